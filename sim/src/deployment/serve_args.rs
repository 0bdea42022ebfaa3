//! Parses the words after `vllm serve` into a [`RoleConfig`]: `--flag value`, `--flag=value`,
//! `--no-flag`, underscores in flag names (vLLM normalises them to dashes), the positional model,
//! the JSON of `--additional-config` and `--compilation-config`, and dotted JSON arguments
//! (`-cc.cudagraph_mode=FULL_DECODE_ONLY`, folded as vLLM folds them: `dotted.rs`).
//!
//! Flags this model interprets parse strictly: a bad value is an [`ArgError`] naming the flag and
//! its place, and every such error of the list is reported at once. Flags it does not interpret
//! are kept (vLLM has hundreds) and reported as notes; an unknown flag takes the next word as its
//! value unless that word looks like a flag or the flag is a known switch (`--trust-remote-code`,
//! `--no-…`, …). `-O<n>` is vLLM 0.26.0's `--optimization-level`. Forms that would change what is
//! modelled but are not understood (`--config` YAML files, the pre-plugin `--afd-config`) are errors
//! rather than guesses.

use std::collections::{BTreeMap, BTreeSet};

use afd_traces::vllm_cli::FlagValues;
use serde_json::Value;

use crate::deployment::afd_config::{parse_afd_block, parse_python_int};
use crate::deployment::compilation::{CompilationConfig, parse_compilation_config};
use crate::deployment::findings::{Finding, Subject};
use crate::deployment::json_keys::key_positions;
use crate::deployment::location::{Located, Location};
use crate::deployment::recipe::Word;
use crate::deployment::role_config::{GpuClass, GpuId, RoleConfig, UnknownFlag};
use crate::deployment::rules::Rule;

/// One bad argument: where, what (flag, key or environment variable) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location}: {message}")]
pub struct ArgError {
    pub location: Location,
    pub subject: Option<Subject>,
    /// Lowercase; names the flag and the bad value.
    pub message: String,
}

/// Every bad argument of one command line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", render_all(.errors))]
pub struct ServeArgsError {
    pub errors: Vec<ArgError>,
}

fn render_all(errors: &[ArgError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SizeField {
    Dp,
    DpLocal,
    Tp,
    Pp,
    Pcp,
    Dcp,
    MaxNumSeqs,
    MaxNumBatchedTokens,
    BlockSize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CountField {
    DboDecode,
    DboPrefill,
    UbatchSize,
    DpStartRank,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BoolField {
    ExpertParallel,
    Eplb,
    ElasticEp,
    Dbo,
    EnforceEager,
    PrefixCaching,
    ChunkedPrefill,
    Headless,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum TextField {
    DpAddress,
    All2allBackend,
    WorkerCls,
    Host,
    AttentionBackend,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum FlagKind {
    Model,
    ServedModelName,
    /// Integer ≥ 1.
    Size(SizeField),
    /// Integer ≥ 0.
    Count(CountField),
    MaxModelLen,
    GpuMemoryUtilization,
    Bool(BoolField),
    Text(TextField),
    Port,
    AdditionalConfig,
    CompilationConfig,
    /// `-O<n>`: 0-3.
    OptimizationLevel,
    MaxCaptureSize,
    CaptureSizes,
    Reject(&'static str),
}

/// The canonical spelling and kind of an interpreted flag.
fn lookup(name: &str) -> Option<(&'static str, FlagKind)> {
    use FlagKind::*;
    Some(match name {
        "--model" => ("--model", Model),
        "--served-model-name" => ("--served-model-name", ServedModelName),
        "--data-parallel-size" | "-dp" => ("--data-parallel-size", Size(SizeField::Dp)),
        "--data-parallel-size-local" | "-dpl" => {
            ("--data-parallel-size-local", Size(SizeField::DpLocal))
        }
        "--data-parallel-start-rank" | "-dpr" => {
            ("--data-parallel-start-rank", Count(CountField::DpStartRank))
        }
        "--data-parallel-address" | "-dpa" => {
            ("--data-parallel-address", Text(TextField::DpAddress))
        }
        "--headless" => ("--headless", Bool(BoolField::Headless)),
        "--tensor-parallel-size" | "-tp" => ("--tensor-parallel-size", Size(SizeField::Tp)),
        "--pipeline-parallel-size" | "-pp" => ("--pipeline-parallel-size", Size(SizeField::Pp)),
        "--prefill-context-parallel-size" | "-pcp" => {
            ("--prefill-context-parallel-size", Size(SizeField::Pcp))
        }
        "--decode-context-parallel-size" | "-dcp" => {
            ("--decode-context-parallel-size", Size(SizeField::Dcp))
        }
        "--max-num-seqs" => ("--max-num-seqs", Size(SizeField::MaxNumSeqs)),
        "--max-num-batched-tokens" => (
            "--max-num-batched-tokens",
            Size(SizeField::MaxNumBatchedTokens),
        ),
        "--max-model-len" => ("--max-model-len", MaxModelLen),
        "--gpu-memory-utilization" => ("--gpu-memory-utilization", GpuMemoryUtilization),
        "--dbo-decode-token-threshold" => {
            ("--dbo-decode-token-threshold", Count(CountField::DboDecode))
        }
        "--dbo-prefill-token-threshold" => (
            "--dbo-prefill-token-threshold",
            Count(CountField::DboPrefill),
        ),
        "--ubatch-size" => ("--ubatch-size", Count(CountField::UbatchSize)),
        "--enable-expert-parallel" | "-ep" => {
            ("--enable-expert-parallel", Bool(BoolField::ExpertParallel))
        }
        "--enable-eplb" => ("--enable-eplb", Bool(BoolField::Eplb)),
        "--enable-elastic-ep" => ("--enable-elastic-ep", Bool(BoolField::ElasticEp)),
        "--enable-dbo" => ("--enable-dbo", Bool(BoolField::Dbo)),
        "--enforce-eager" => ("--enforce-eager", Bool(BoolField::EnforceEager)),
        "--enable-prefix-caching" => ("--enable-prefix-caching", Bool(BoolField::PrefixCaching)),
        "--enable-chunked-prefill" => ("--enable-chunked-prefill", Bool(BoolField::ChunkedPrefill)),
        "--block-size" => ("--block-size", Size(SizeField::BlockSize)),
        "--attention-backend" => ("--attention-backend", Text(TextField::AttentionBackend)),
        "--all2all-backend" => ("--all2all-backend", Text(TextField::All2allBackend)),
        "--worker-cls" => ("--worker-cls", Text(TextField::WorkerCls)),
        "--host" => ("--host", Text(TextField::Host)),
        "--port" => ("--port", Port),
        "--additional-config" => ("--additional-config", AdditionalConfig),
        "--compilation-config" | "-cc" => ("--compilation-config", CompilationConfig),
        // vLLM 0.26.0 rewrites `-O<n>`, `-O=<n>` and `-O <n>` to `--optimization-level <n>`
        // (`vllm/utils/argparse_utils.py:322-333`).
        "--optimization-level" | "-O" => ("--optimization-level", OptimizationLevel),
        "--max-cudagraph-capture-size" => ("--max-cudagraph-capture-size", MaxCaptureSize),
        "--cudagraph-capture-sizes" => ("--cudagraph-capture-sizes", CaptureSizes),
        "--config" => (
            "--config",
            Reject("vLLM YAML config files are not modelled; put the flags on the command line"),
        ),
        "--afd-config" => (
            "--afd-config",
            Reject(
                "--afd-config belongs to the pre-plugin vLLM fork; the afd-plugin reads --additional-config '{\"afd\": {…}}' (afd-spec §1.1)",
            ),
        ),
        _ => return None,
    })
}

/// `-O3`: vLLM 0.26.0's `FlexibleArgumentParser` rewrites `-O<n>` to `--optimization-level <n>`
/// (`vllm/utils/argparse_utils.py:322-333`). No other short option takes an attached value:
/// argparse attaches one only to a one-letter option, and vLLM refuses `-tp2`.
fn split_attached_short(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix("-O")?;
    (!rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit())).then_some(("-O", rest))
}

/// A word that argparse would take as an option rather than a value.
fn looks_like_flag(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next() == Some('-')
        && chars
            .next()
            .is_some_and(|c| !(c.is_ascii_digit() || c == '.'))
}

/// `args` without any occurrence of the flag `canonical` (in any spelling this parser accepts:
/// `_` for `-`, `=value`, attached short forms, `--no-` for switches) or its values; other words
/// are kept in order. Used to render a flag override into a command's words.
pub(crate) fn remove_flag(args: &[String], canonical: &str) -> Vec<String> {
    let mut kept = Vec::with_capacity(args.len());
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        i += 1;
        if !looks_like_flag(word) {
            kept.push(word.clone());
            continue;
        }
        let (raw_name, inline) = match word.split_once('=') {
            Some((name, _)) => (name, true),
            None => (word.as_str(), false),
        };
        let mut name = match raw_name.strip_prefix("--") {
            Some(long) => format!("--{}", long.replace('_', "-")),
            None => raw_name.to_owned(),
        };
        let mut inline = inline;
        if !inline && let Some((short, _)) = split_attached_short(&name) {
            name = short.to_owned();
            inline = true;
        } else if let options::Resolved::Known {
            option, attached, ..
        } = options::resolve(&name, inline)
        {
            name = option.to_owned();
            inline |= attached.is_some();
        }
        let negated = name
            .strip_prefix("--no-")
            .map(|rest| format!("--{rest}"))
            .filter(|positive| matches!(lookup(positive), Some((_, FlagKind::Bool(_)))));
        let (found, kind) = match negated
            .as_deref()
            .map(lookup)
            .or_else(|| Some(lookup(&name)))
        {
            Some(Some((found, kind))) => (found, Some(kind)),
            _ => ("", None),
        };
        let matches = found == canonical || (kind.is_none() && name == canonical);
        if !matches {
            kept.push(word.clone());
            continue;
        }
        let takes_values = match kind {
            Some(FlagKind::Bool(_)) => 0,
            Some(FlagKind::CaptureSizes | FlagKind::ServedModelName) => usize::MAX,
            _ => 1,
        };
        if !inline {
            let mut skipped = 0;
            while skipped < takes_values && args.get(i).is_some_and(|w| !looks_like_flag(w)) {
                i += 1;
                skipped += 1;
            }
        }
    }
    kept
}

/// Edits, in place, the JSON object of every occurrence of the JSON flag `canonical`
/// (`--additional-config`, `--compilation-config`); values that are not JSON objects are left as
/// they are (parsing reports them). Returns whether the flag occurs.
pub(crate) fn edit_json_flag(
    args: &mut [String],
    canonical: &str,
    edit: &mut dyn FnMut(&mut serde_json::Map<String, Value>),
) -> bool {
    let mut found = false;
    let mut i = 0;
    while i < args.len() {
        let word = args[i].clone();
        i += 1;
        if !looks_like_flag(&word) {
            continue;
        }
        let (raw_name, inline) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word.as_str(), None),
        };
        let name = match raw_name.strip_prefix("--") {
            Some(long) => format!("--{}", long.replace('_', "-")),
            None => raw_name.to_owned(),
        };
        if lookup(&name).map(|(c, _)| c) != Some(canonical) {
            continue;
        }
        found = true;
        let (index, text) = match inline {
            Some(value) => (i - 1, value.to_owned()),
            None if i < args.len() && !looks_like_flag(&args[i]) => {
                i += 1;
                (i - 1, args[i - 1].clone())
            }
            None => continue,
        };
        let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        edit(&mut object);
        let rendered = Value::Object(object).to_string();
        args[index] = match inline {
            Some(_) => format!("{raw_name}={rendered}"),
            None => rendered,
        };
    }
    found
}

/// Parses an argument list as the twin receives it; env is located at word 0.
pub(crate) fn parse_argument_list(
    args: &[String],
    env: &BTreeMap<String, String>,
) -> Result<RoleConfig, ServeArgsError> {
    let words = argument_words(args);
    let start = Location::Argument { index: 0 };
    let env = env
        .iter()
        .map(|(k, v)| (k.clone(), Located::new(v.clone(), start)))
        .collect();
    parse_words(&words, env, start)
}

/// An argument list as words, each located by its index.
fn argument_words(args: &[String]) -> Vec<Word> {
    args.iter()
        .enumerate()
        .map(|(i, arg)| {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            Word::new(arg.clone(), Location::Argument { index })
        })
        .collect()
}

/// Parses the words of one `vllm serve` command with its environment.
pub(crate) fn parse_words(
    words: &[Word],
    env: BTreeMap<String, Located<String>>,
    location: Location,
) -> Result<RoleConfig, ServeArgsError> {
    let mut parser = Parser {
        config: empty_config(location, env),
        errors: Vec::new(),
        seen: BTreeSet::new(),
        capture_flag: None,
        capture_sizes_flag: None,
    };
    if dotted::any(words) {
        let (folded, errors) = dotted::fold(words);
        parser.errors = errors;
        parser.run(&folded);
    } else {
        parser.run(words);
    }
    parser.finish()
}

fn empty_config(location: Location, env: BTreeMap<String, Located<String>>) -> RoleConfig {
    RoleConfig {
        location,
        model: None,
        served_model_names: Vec::new(),
        data_parallel_size: None,
        data_parallel_size_local: None,
        data_parallel_start_rank: None,
        data_parallel_address: None,
        headless: None,
        tensor_parallel_size: None,
        pipeline_parallel_size: None,
        prefill_context_parallel_size: None,
        decode_context_parallel_size: None,
        enable_expert_parallel: None,
        enable_eplb: None,
        enable_elastic_ep: None,
        all2all_backend: None,
        worker_cls: None,
        additional_config: None,
        afd: None,
        max_num_seqs: None,
        max_num_batched_tokens: None,
        max_model_len: None,
        max_model_len_auto: false,
        gpu_memory_utilization: None,
        enable_dbo: None,
        dbo_decode_token_threshold: None,
        dbo_prefill_token_threshold: None,
        ubatch_size: None,
        enforce_eager: None,
        enable_prefix_caching: None,
        enable_chunked_prefill: None,
        block_size: None,
        attention_backend: None,
        gpu_class: GpuClass::default(),
        compilation: CompilationConfig::default(),
        optimization_level: None,
        http_host: None,
        http_port: None,
        env,
        gpus: None,
        unknown_flags: Vec::new(),
        parse_findings: Vec::new(),
    }
}

/// A flag word as argparse reads it: the name (a long flag's `_` read as `-`, an attached short
/// flag's digits split off), the name as written, and an inline value with the character offset
/// its text starts at.
struct FlagWord<'a> {
    name: String,
    raw_name: &'a str,
    inline: Option<(String, usize)>,
}

impl<'a> FlagWord<'a> {
    fn new(word: &'a Word) -> FlagWord<'a> {
        let (raw_name, inline) = match word.text.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (word.text.as_str(), None),
        };
        let mut name = if let Some(long) = raw_name.strip_prefix("--") {
            format!("--{}", long.replace('_', "-"))
        } else {
            raw_name.to_owned()
        };
        let mut inline = inline.map(|value| (value.to_owned(), raw_name.chars().count() + 1));
        if inline.is_none()
            && let Some((short, digits)) = split_attached_short(&name)
        {
            inline = Some((digits.to_owned(), short.len()));
            name = short.to_owned();
        }
        FlagWord {
            name,
            raw_name,
            inline,
        }
    }
}

struct Parser {
    config: RoleConfig,
    errors: Vec<ArgError>,
    seen: BTreeSet<&'static str>,
    /// `--max-cudagraph-capture-size` as a flag (folded into the compilation config at the end).
    capture_flag: Option<Located<u32>>,
    /// `--cudagraph-capture-sizes` as a flag.
    capture_sizes_flag: Option<Located<Vec<u32>>>,
}

impl Parser {
    fn error(&mut self, location: Location, subject: Option<Subject>, message: String) {
        self.errors.push(ArgError {
            location,
            subject,
            message,
        });
    }

    /// Reads every word: positionals, flags and their values.
    fn run(&mut self, words: &[Word]) {
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            i += 1;
            if word.text == "--" {
                self.error(
                    word.location,
                    None,
                    "`--` (end of options) is not modelled".to_owned(),
                );
                continue;
            }
            if !looks_like_flag(&word.text) {
                self.positional(word);
                continue;
            }
            i += self.flag(word, &words[i..]);
        }
    }

    /// Reads the flag `word`, taking its value from `rest` (the words after it) where it has
    /// one; returns how many words of `rest` it took.
    fn flag(&mut self, word: &Word, rest: &[Word]) -> usize {
        let mut spelt = FlagWord::new(word);
        let next_is_value = rest.first().is_some_and(|w| !looks_like_flag(&w.text));
        if let Some(message) = refused_level(&spelt.name, spelt.raw_name) {
            self.error(word.location, Some(Subject::flag(spelt.raw_name)), message);
            return 0;
        }
        if !self.resolve(word, &mut spelt) {
            // vLLM refuses the word and any value after it.
            return usize::from(next_is_value);
        }
        let negated = spelt
            .name
            .strip_prefix("--no-")
            .map(|rest| format!("--{rest}"))
            .and_then(|positive| match lookup(&positive) {
                Some((canonical, FlagKind::Bool(field))) => Some((canonical, field)),
                _ => None,
            });
        if let Some((canonical, field)) = negated {
            self.switch(word, spelt.inline.is_some(), canonical, field, false);
            return 0;
        }
        let Some((canonical, kind)) = lookup(&spelt.name) else {
            return self.unknown_flag(word, spelt, rest);
        };
        if let FlagKind::Reject(message) = kind {
            self.error(
                word.location,
                Some(Subject::flag(canonical)),
                message.to_owned(),
            );
            return usize::from(spelt.inline.is_none() && next_is_value);
        }
        if let FlagKind::Bool(field) = kind {
            self.switch(word, spelt.inline.is_some(), canonical, field, true);
            return 0;
        }
        self.value_flag(word, spelt.inline, canonical, kind, rest)
    }

    /// Keeps a flag this model does not interpret, with its value, as vLLM's parser reads it: a
    /// switch takes none, an option of one value the inline one or the next word, an optional
    /// value the next word that is not a flag, one of several values every such word; a value
    /// outside the option's choices, or a missing one, is vLLM's error. Returns how many words of
    /// `rest` it took.
    fn unknown_flag(&mut self, word: &Word, spelt: FlagWord<'_>, rest: &[Word]) -> usize {
        let name = spelt.name;
        let flag = options::flag(&name);
        let arity = flag.map_or(FlagValues::One, |f| f.values);
        let following = rest
            .iter()
            .take_while(|next| !looks_like_flag(&next.text))
            .count();
        let (values, taken): (Vec<String>, usize) = match (arity, spelt.inline) {
            (FlagValues::None | FlagValues::Help, Some((value, _))) => {
                self.error(
                    word.location,
                    Some(Subject::Flag(name.clone())),
                    format!(
                        "{name} takes no value: vLLM refuses the explicit argument '{}' (write {name} alone)",
                        truncate(&value)
                    ),
                );
                return 0;
            }
            (FlagValues::None | FlagValues::Help, None) => (Vec::new(), 0),
            (_, Some((value, _))) => (vec![value], 0),
            (FlagValues::One | FlagValues::Optional, None) => {
                let taken = following.min(1);
                (
                    rest[..taken].iter().map(|w| w.text.clone()).collect(),
                    taken,
                )
            }
            (FlagValues::OneOrMore, None) => (
                rest[..following].iter().map(|w| w.text.clone()).collect(),
                following,
            ),
        };
        if values.is_empty() && matches!(arity, FlagValues::One | FlagValues::OneOrMore) {
            let expected = if arity == FlagValues::One {
                "one argument"
            } else {
                "at least one argument"
            };
            self.error(
                word.location,
                Some(Subject::Flag(name.clone())),
                format!("{name} expected {expected} (vLLM refuses it bare)"),
            );
            return 0;
        }
        if let Some(problem) = values
            .iter()
            .find_map(|value| options::refused_value(&name, value))
        {
            self.error(word.location, Some(Subject::Flag(name.clone())), problem);
            return taken;
        }
        let value = (!values.is_empty()).then(|| values.join(" "));
        self.config.unknown_flags.push(UnknownFlag {
            flag: name,
            value,
            location: word.location,
        });
        taken
    }

    /// Reads a flag that takes a value: inline `=value` (its text starts after the `=`) or the
    /// next word, and for the flags that take several, every following word that is not a flag;
    /// returns how many words of `rest` it took.
    fn value_flag(
        &mut self,
        word: &Word,
        inline: Option<(String, usize)>,
        canonical: &'static str,
        kind: FlagKind,
        rest: &[Word],
    ) -> usize {
        let mut used = 0;
        let value_word = match inline {
            Some((value, offset)) => {
                let chars: Vec<Location> = (0..value.chars().count())
                    .map(|k| word.location_of_char(offset + k))
                    .collect();
                Some(OwnedValue::new(value, word.location, chars))
            }
            None => match rest.first() {
                Some(next) if !looks_like_flag(&next.text) => {
                    used += 1;
                    Some(OwnedValue::from_word(next))
                }
                _ => None,
            },
        };
        let Some(value) = value_word else {
            self.error(
                word.location,
                Some(Subject::flag(canonical)),
                format!("{canonical} expects a value"),
            );
            return used;
        };
        if let Some(problem) = options::refused_value(canonical, &value.text) {
            self.error(word.location, Some(Subject::flag(canonical)), problem);
            return used;
        }
        self.note_repeat(canonical, word.location);
        let more = rest[used..]
            .iter()
            .take_while(|w| !looks_like_flag(&w.text));
        if kind == FlagKind::ServedModelName {
            let mut names = vec![Located::new(value.text, value.location)];
            for next in more {
                names.push(Located::new(next.text.clone(), next.location));
                used += 1;
            }
            self.config.served_model_names = names;
            return used;
        }
        if kind == FlagKind::CaptureSizes {
            let mut texts = vec![value];
            for next in more {
                texts.push(OwnedValue::from_word(next));
                used += 1;
            }
            self.capture_sizes(canonical, word.location, &texts);
            return used;
        }
        self.value(canonical, kind, word.location, &value);
        used
    }

    fn note_repeat(&mut self, canonical: &'static str, location: Location) {
        if !self.seen.insert(canonical) {
            self.config.parse_findings.push(
                Finding::new(
                    Rule::NoteRepeatedFlag,
                    None,
                    format!("{canonical} is given more than once; the last value wins"),
                )
                .with_subject(Subject::flag(canonical))
                .at(Some(location)),
            );
        }
    }

    fn positional(&mut self, word: &Word) {
        if self.config.model.is_some() {
            self.error(
                word.location,
                None,
                format!(
                    "unexpected positional argument '{}': the model is already given",
                    truncate(&word.text)
                ),
            );
            return;
        }
        self.config.model = Some(Located::new(word.text.clone(), word.location));
    }

    /// Names `spelt`'s option as vLLM's parser does (`options.rs`): its full spelling, with a
    /// one-letter option's attached value as its inline one; a prefix is noted. False, with the
    /// error vLLM gives, for a word that names no option or several, or asks for the help.
    fn resolve(&mut self, word: &Word, spelt: &mut FlagWord<'_>) -> bool {
        let raw = spelt.raw_name;
        match options::resolve(&spelt.name, spelt.inline.is_some()) {
            options::Resolved::Known {
                option,
                abbreviated,
                attached,
            } => {
                if options::flag(option).is_some_and(|f| f.values == FlagValues::Help) {
                    self.error(
                        word.location,
                        Some(Subject::flag(option)),
                        format!(
                            "{raw} prints vllm serve's help and exits: the server never starts"
                        ),
                    );
                    return false;
                }
                if abbreviated {
                    self.config.parse_findings.push(
                        Finding::new(
                            Rule::NoteAbbreviatedFlag,
                            None,
                            format!("read as {option}, the one vLLM 0.26.0 option it begins"),
                        )
                        .with_subject(Subject::flag(raw))
                        .at(Some(word.location)),
                    );
                }
                spelt.name = option.to_owned();
                if attached.is_some() {
                    spelt.inline = attached;
                }
                true
            }
            options::Resolved::Ambiguous(matches) => {
                self.error(
                    word.location,
                    Some(Subject::flag(raw)),
                    format!(
                        "ambiguous option: {raw} could match {} (vLLM 0.26.0 refuses it; write the option in full)",
                        matches.join(", ")
                    ),
                );
                false
            }
            options::Resolved::Unrecognized { hint } => {
                let message = match lookup(&spelt.name) {
                    Some((_, FlagKind::Reject(message))) => message.to_owned(),
                    _ => {
                        let hint = hint.map_or(String::new(), |h| format!("; {h}"));
                        format!(
                            "unrecognized argument: vLLM 0.26.0's vllm serve has no option {raw}, and refuses it{hint}"
                        )
                    }
                };
                self.error(word.location, Some(Subject::flag(raw)), message);
                false
            }
        }
    }

    fn switch(
        &mut self,
        word: &Word,
        has_inline: bool,
        canonical: &'static str,
        field: BoolField,
        on: bool,
    ) {
        if has_inline {
            self.error(
                word.location,
                Some(Subject::flag(canonical)),
                format!(
                    "{canonical} takes no value (write {canonical} or --no-{})",
                    &canonical[2..]
                ),
            );
            return;
        }
        self.note_repeat(canonical, word.location);
        let value = Some(Located::new(on, word.location));
        match field {
            BoolField::ExpertParallel => self.config.enable_expert_parallel = value,
            BoolField::Eplb => self.config.enable_eplb = value,
            BoolField::ElasticEp => self.config.enable_elastic_ep = value,
            BoolField::Dbo => self.config.enable_dbo = value,
            BoolField::EnforceEager => self.config.enforce_eager = value,
            BoolField::PrefixCaching => self.config.enable_prefix_caching = value,
            BoolField::ChunkedPrefill => self.config.enable_chunked_prefill = value,
            BoolField::Headless => self.config.headless = value,
        }
    }

    /// Reads the value of a flag that takes one (`at` is the flag's location).
    fn value(&mut self, canonical: &'static str, kind: FlagKind, at: Location, value: &OwnedValue) {
        let subject = Some(Subject::flag(canonical));
        let text = value.text.as_str();
        let location = value.location;
        match kind {
            FlagKind::Model => {
                if self.config.model.is_some() {
                    self.error(at, subject, "the model is given both positionally and with --model".to_owned());
                } else {
                    self.config.model = Some(Located::new(value.text.clone(), location));
                }
            }
            FlagKind::Size(field) => self.size(canonical, field, location, text),
            FlagKind::Count(field) => self.count(canonical, field, location, text),
            // vLLM's `human_readable_int_or_auto`: `-1` or `auto` fit the length to the KV cache.
            FlagKind::MaxModelLen if text.trim() == "-1" || text.trim().eq_ignore_ascii_case("auto") => {
                self.config.max_model_len = None;
                self.config.max_model_len_auto = true;
            }
            FlagKind::MaxModelLen => match parse_human_int(text) {
                Some(len) => {
                    self.config.max_model_len = Some(Located::new(len, location));
                    self.config.max_model_len_auto = false;
                }
                None => self.error(
                    location,
                    subject,
                    format!(
                        "--max-model-len expects a positive integer, optionally with a k/m/g/t (×1000, decimals allowed) or K/M/G/T (×1024) suffix, or auto (-1), got '{}'",
                        truncate(text)
                    ),
                ),
            },
            FlagKind::GpuMemoryUtilization => match text.trim().parse::<f64>() {
                Ok(fraction) if fraction.is_finite() => {
                    self.config.gpu_memory_utilization = Some(Located::new(fraction, location));
                }
                _ => self.error(
                    location,
                    subject,
                    format!("--gpu-memory-utilization expects a number, got '{}'", truncate(text)),
                ),
            },
            FlagKind::Text(field) => {
                let located = Some(Located::new(value.text.clone(), location));
                match field {
                    TextField::DpAddress => self.config.data_parallel_address = located,
                    TextField::All2allBackend => self.config.all2all_backend = located,
                    TextField::WorkerCls => self.config.worker_cls = located,
                    TextField::Host => self.config.http_host = located,
                    TextField::AttentionBackend => self.config.attention_backend = located,
                }
            }
            FlagKind::Port => match parse_python_int(text).and_then(|v| u16::try_from(v).ok()).filter(|&p| p > 0) {
                Some(port) => self.config.http_port = Some(Located::new(port, location)),
                None => self.error(
                    location,
                    subject,
                    format!("--port expects a TCP port 1..65535, got '{}'", truncate(text)),
                ),
            },
            FlagKind::MaxCaptureSize => {
                match parse_python_int(text).and_then(|v| u32::try_from(v).ok()).filter(|&v| v >= 1) {
                    Some(size) => self.capture_flag = Some(Located::new(size, location)),
                    None => self.error(
                        location,
                        subject,
                        format!("{canonical} expects a positive integer, got '{}'", truncate(text)),
                    ),
                }
            }
            FlagKind::AdditionalConfig => self.additional_config(canonical, at, value),
            FlagKind::CompilationConfig => self.compilation_config(canonical, value),
            FlagKind::OptimizationLevel => match parse_python_int(text)
                .and_then(|v| u8::try_from(v).ok())
                .filter(|&v| v <= 3)
            {
                Some(level) => self.config.optimization_level = Some(Located::new(level, location)),
                None => self.error(
                    location,
                    subject,
                    format!(
                        "--optimization-level (-O) takes 0, 1, 2 or 3, got '{}'; a JSON compilation config goes to --compilation-config (-cc)",
                        truncate(text)
                    ),
                ),
            },
            FlagKind::ServedModelName
            | FlagKind::CaptureSizes
            | FlagKind::Bool(_)
            | FlagKind::Reject(_) => {
                unreachable!("{canonical} is handled before value parsing")
            }
        }
    }

    /// A size flag: a positive integer (parallel sizes, batch limits, the KV block size).
    fn size(&mut self, canonical: &'static str, field: SizeField, location: Location, text: &str) {
        // vLLM reads `--max-num-batched-tokens` as a human-readable integer (`2k`, `1K`,
        // `vllm/engine/arg_utils.py` `human_readable_int_args`), every other size as `int`.
        let human = field == SizeField::MaxNumBatchedTokens;
        let parsed = if human {
            parse_human_int(text).map(i64::from)
        } else {
            parse_python_int(text)
        };
        let Some(size) = parsed
            .and_then(|v| u32::try_from(v).ok())
            .filter(|&v| v >= 1)
        else {
            let suffix = if human {
                ", optionally with a k/m/g/t (×1000) or K/M/G/T (×1024) suffix"
            } else {
                ""
            };
            self.error(
                location,
                Some(Subject::flag(canonical)),
                format!(
                    "{canonical} expects a positive integer{suffix}, got '{}'",
                    truncate(text)
                ),
            );
            return;
        };
        let located = Some(Located::new(size, location));
        match field {
            SizeField::Dp => self.config.data_parallel_size = located,
            SizeField::DpLocal => self.config.data_parallel_size_local = located,
            SizeField::Tp => self.config.tensor_parallel_size = located,
            SizeField::Pp => self.config.pipeline_parallel_size = located,
            SizeField::Pcp => self.config.prefill_context_parallel_size = located,
            SizeField::Dcp => self.config.decode_context_parallel_size = located,
            SizeField::MaxNumSeqs => self.config.max_num_seqs = located,
            SizeField::MaxNumBatchedTokens => self.config.max_num_batched_tokens = located,
            SizeField::BlockSize => self.config.block_size = located,
        }
    }

    /// A count flag: a non-negative integer (DBO thresholds, the ubatch size, the DP start rank).
    fn count(
        &mut self,
        canonical: &'static str,
        field: CountField,
        location: Location,
        text: &str,
    ) {
        let Some(count) = parse_python_int(text).and_then(|v| u32::try_from(v).ok()) else {
            self.error(
                location,
                Some(Subject::flag(canonical)),
                format!(
                    "{canonical} expects a non-negative integer, got '{}'",
                    truncate(text)
                ),
            );
            return;
        };
        let located = Some(Located::new(count, location));
        match field {
            CountField::DboDecode => self.config.dbo_decode_token_threshold = located,
            CountField::DboPrefill => self.config.dbo_prefill_token_threshold = located,
            CountField::UbatchSize => self.config.ubatch_size = located,
            CountField::DpStartRank => self.config.data_parallel_start_rank = located,
        }
    }

    /// `--additional-config`: JSON whose `afd` block is parsed with the plugin's aliases and
    /// coercions (`afd_config.rs`).
    fn additional_config(&mut self, canonical: &'static str, at: Location, value: &OwnedValue) {
        self.config.additional_config = Some(at);
        let Some((json, positions)) = self.json(canonical, value) else {
            return;
        };
        let locate = |path: &str| value.key_location(&positions, path);
        let (afd, findings) = parse_afd_block(&json, &locate);
        self.config.afd = afd;
        self.config.parse_findings.extend(findings);
    }

    /// `--compilation-config`: a JSON object of graph keys (`compilation.rs`). vLLM 0.26.0 parses
    /// it as a `CompilationConfig` object only (`vllm/engine/arg_utils.py:330-337`), so an integer
    /// (an optimization level in older versions) is refused.
    fn compilation_config(&mut self, canonical: &'static str, value: &OwnedValue) {
        let text = value.text.as_str();
        if parse_python_int(text).is_some() {
            self.error(
                value.location,
                Some(Subject::flag(canonical)),
                format!(
                    "vLLM 0.26.0 takes a JSON object for {canonical}, not a level ({}); an optimization level is -O<n> (--optimization-level)",
                    text.trim()
                ),
            );
            return;
        }
        let Some((json, positions)) = self.json(canonical, value) else {
            return;
        };
        let locate = |path: &str| value.key_location(&positions, path);
        let (compilation, key_errors) = parse_compilation_config(&json, &locate);
        for error in key_errors {
            let subject = Subject::compilation_key(&error.key);
            self.error(error.location, Some(subject), error.message);
        }
        self.config.compilation = compilation;
    }

    fn capture_sizes(&mut self, canonical: &'static str, at: Location, values: &[OwnedValue]) {
        let mut sizes = Vec::new();
        for value in values {
            // Each word may itself be a comma-separated list (`--cudagraph-capture-sizes 8,16`).
            for part in value.text.split(',').filter(|p| !p.trim().is_empty()) {
                match parse_python_int(part)
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|&v| v >= 1)
                {
                    Some(size) => sizes.push(size),
                    None => {
                        self.error(
                            value.location,
                            Some(Subject::flag(canonical)),
                            format!(
                                "{canonical} expects positive integers, got '{}'",
                                truncate(part)
                            ),
                        );
                        return;
                    }
                }
            }
        }
        if sizes.is_empty() {
            self.error(
                at,
                Some(Subject::flag(canonical)),
                format!("{canonical} needs at least one size"),
            );
            return;
        }
        self.capture_sizes_flag = Some(Located::new(sizes, at));
    }

    /// Parses a JSON flag value; on a syntax error records it at the offending character.
    fn json(
        &mut self,
        canonical: &'static str,
        value: &OwnedValue,
    ) -> Option<(Value, BTreeMap<String, usize>)> {
        match serde_json::from_str::<Value>(&value.text) {
            Ok(json) => Some((json, key_positions(&value.text))),
            Err(err) => {
                let char_index = char_index_of(&value.text, err.line(), err.column());
                let message = err.to_string();
                let message = message
                    .rsplit_once(" at line ")
                    .map_or(message.as_str(), |(head, _)| head)
                    .to_owned();
                self.error(
                    value.char_location(char_index),
                    Some(Subject::flag(canonical)),
                    format!("{canonical} is not valid JSON: {message}"),
                );
                None
            }
        }
    }

    fn finish(mut self) -> Result<RoleConfig, ServeArgsError> {
        self.fold_capture_flags();
        self.read_gpus();
        if let Some(runner) = self.config.env.get("VLLM_USE_V2_MODEL_RUNNER")
            && parse_python_int(&runner.value).is_none()
        {
            let location = runner.location;
            let message = format!(
                "VLLM_USE_V2_MODEL_RUNNER must be an integer (vLLM reads it with int()), got '{}'",
                truncate(&runner.value)
            );
            self.error(
                location,
                Some(Subject::env("VLLM_USE_V2_MODEL_RUNNER")),
                message,
            );
        }
        if self.config.model.is_none() {
            self.error(
                self.config.location,
                None,
                "no model given: vllm serve needs the model path as its first argument".to_owned(),
            );
        }
        for flag in &self.config.unknown_flags {
            let message = match &flag.value {
                Some(value) => format!(
                    "kept with value '{}' but not interpreted by this model",
                    truncate(value)
                ),
                None => "kept but not interpreted by this model".to_owned(),
            };
            self.config.parse_findings.push(
                Finding::new(Rule::NoteUnknownFlag, None, message)
                    .with_subject(Subject::Flag(flag.flag.clone()))
                    .at(Some(flag.location)),
            );
        }
        for key in &self.config.compilation.other_keys {
            self.config.parse_findings.push(
                Finding::new(
                    Rule::NoteUnknownFlag,
                    None,
                    "kept but not interpreted by this model".to_owned(),
                )
                .with_subject(Subject::compilation_key(&key.value))
                .at(Some(key.location)),
            );
        }
        if self.errors.is_empty() {
            Ok(self.config)
        } else {
            self.errors.sort_by_key(|e| e.location);
            Err(ServeArgsError {
                errors: self.errors,
            })
        }
    }

    /// vLLM rejects a size given both as a flag and inside `--compilation-config`.
    fn fold_capture_flags(&mut self) {
        if let Some(flag) = self.capture_flag.take() {
            if self.config.compilation.max_cudagraph_capture_size.is_some() {
                self.error(
                    flag.location,
                    Some(Subject::flag("--max-cudagraph-capture-size")),
                    "--max-cudagraph-capture-size and --compilation-config max_cudagraph_capture_size are mutually exclusive".to_owned(),
                );
            } else {
                self.config.compilation.max_cudagraph_capture_size = Some(flag);
            }
        }
        if let Some(flag) = self.capture_sizes_flag.take() {
            if self.config.compilation.cudagraph_capture_sizes.is_some() {
                self.error(
                    flag.location,
                    Some(Subject::flag("--cudagraph-capture-sizes")),
                    "--cudagraph-capture-sizes and --compilation-config cudagraph_capture_sizes are mutually exclusive".to_owned(),
                );
            } else {
                self.config.compilation.cudagraph_capture_sizes = Some(flag);
            }
        }
    }

    /// `CUDA_VISIBLE_DEVICES`: indices or `GPU-`/`MIG-` UUIDs; malformed or repeated entries are
    /// findings (`cross.gpu-list`).
    fn read_gpus(&mut self) {
        let Some(devices) = self.config.env.get("CUDA_VISIBLE_DEVICES").cloned() else {
            return;
        };
        let mut gpus = Vec::new();
        for entry in devices.value.split(',') {
            let entry = entry.trim();
            let gpu = if let Ok(index) = entry.parse::<u32>() {
                GpuId::Index(index)
            } else if entry.starts_with("GPU-") || entry.starts_with("MIG-") {
                GpuId::Uuid(entry.to_owned())
            } else {
                let message = if entry.is_empty() {
                    format!(
                        "CUDA_VISIBLE_DEVICES='{}' has an empty entry",
                        truncate(&devices.value)
                    )
                } else {
                    format!(
                        "CUDA_VISIBLE_DEVICES entry '{}' is neither a GPU index nor a GPU-/MIG- UUID",
                        truncate(entry)
                    )
                };
                self.config.parse_findings.push(
                    Finding::new(Rule::CrossGpuList, None, message)
                        .with_subject(Subject::env("CUDA_VISIBLE_DEVICES"))
                        .at(Some(devices.location)),
                );
                continue;
            };
            if gpus.contains(&gpu) {
                self.config.parse_findings.push(
                    Finding::new(
                        Rule::CrossGpuList,
                        None,
                        format!("CUDA_VISIBLE_DEVICES lists GPU {gpu} twice"),
                    )
                    .with_subject(Subject::env("CUDA_VISIBLE_DEVICES"))
                    .at(Some(devices.location)),
                );
                continue;
            }
            gpus.push(gpu);
        }
        self.config.gpus = Some(Located::new(gpus, devices.location));
    }
}

/// An `-O` spelling vLLM refuses: `-O3`, `-O=3` and `-O` are split before this; anything else after
/// `-O` is what vLLM passes to --optimization-level, which refuses it.
fn refused_level(name: &str, as_written: &str) -> Option<String> {
    let level = name.strip_prefix("-O").filter(|l| !l.is_empty())?;
    Some(format!(
        "vLLM 0.26.0 reads {as_written} as --optimization-level {level}, which takes 0, 1, 2 or 3"
    ))
}

/// A flag's value with per-character positions (so JSON keys can be located).
struct OwnedValue {
    text: String,
    location: Location,
    chars: Vec<Location>,
}

impl OwnedValue {
    fn new(text: String, location: Location, chars: Vec<Location>) -> OwnedValue {
        OwnedValue {
            text,
            location,
            chars,
        }
    }

    fn from_word(word: &Word) -> OwnedValue {
        let chars = (0..word.text.chars().count())
            .map(|i| word.location_of_char(i))
            .collect();
        OwnedValue::new(word.text.clone(), word.location, chars)
    }

    fn char_location(&self, index: usize) -> Location {
        self.chars.get(index).copied().unwrap_or(self.location)
    }

    /// Where a dotted key path starts; the value's start for the root or an unknown path.
    fn key_location(&self, positions: &BTreeMap<String, usize>, path: &str) -> Location {
        positions
            .get(path)
            .map_or(self.location, |&index| self.char_location(index))
    }
}

/// The char index of serde_json's 1-based line/column (columns count bytes); clamps.
fn char_index_of(text: &str, line: usize, column: usize) -> usize {
    let mut byte = 0;
    for (n, segment) in text.split_inclusive('\n').enumerate() {
        if n + 1 == line {
            byte += column.saturating_sub(1).min(segment.len());
            break;
        }
        byte += segment.len();
    }
    let byte = byte.min(text.len());
    text.char_indices().take_while(|&(b, _)| b < byte).count()
}

/// vLLM's human-readable integers for `--max-model-len`: digits with an optional k/m/g (×1000) or
/// K/M/G (×1024) suffix.
/// vLLM 0.26.0's `human_readable_int` (`vllm/utils/argparse_utils.py:29-72`), positive and within
/// `u32`: digits with an optional decimal part and one of `k m g t` (×1000, the product truncated,
/// `25.6k` is 25,600) or `K M G T` (×1024, whole numbers only); else Python's `int`.
fn parse_human_int(text: &str) -> Option<u32> {
    let text = text.trim();
    let last = text.chars().last()?;
    let number = &text[..text.len() - last.len_utf8()];
    let decimal = |n: &str| {
        let (whole, fraction) = n.split_once('.').unwrap_or((n, ""));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        digits(whole) && (fraction.is_empty() && !n.ends_with('.') || digits(fraction))
    };
    let power = match last.to_ascii_lowercase() {
        'k' => 1,
        'm' => 2,
        'g' => 3,
        't' => 4,
        _ => 0,
    };
    let value: i64 = if power > 0 && last.is_ascii_lowercase() && decimal(number) {
        // int(float(number) * mult), as Python computes it: IEEE doubles, truncated.
        let product = number.parse::<f64>().ok()? * 1_000f64.powi(power);
        if !(1.0..=f64::from(u32::MAX)).contains(&product.trunc()) {
            return None;
        }
        product as i64
    } else if power > 0 && last.is_ascii_uppercase() && decimal(number) {
        number
            .parse::<i64>()
            .ok()?
            .checked_mul(1i64 << (10 * power))?
    } else {
        parse_python_int(text)?
    };
    u32::try_from(value).ok().filter(|&v| v >= 1)
}

fn truncate(text: &str) -> String {
    if text.chars().count() > 60 {
        text.chars().take(57).collect::<String>() + "..."
    } else {
        text.to_owned()
    }
}

mod dotted;
pub(crate) use dotted::fold_args as fold_dotted_args;
mod options;

#[cfg(test)]
mod tests;
