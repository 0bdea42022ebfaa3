//! Expanding a recipe's commands as bash would: variables and their defaults, field splitting,
//! `export`, `set`, per-command environment prefixes, and which commands start `vllm serve`.

use super::lexer::*;
use super::*;

#[derive(Clone, Debug)]
pub(super) struct Variable {
    pub(super) value: String,
    pub(super) exported: bool,
    pub(super) location: Location,
}

pub(super) struct Shell {
    pub(super) variables: BTreeMap<String, Variable>,
    /// Names marked by `export NAME` before they had a value.
    pub(super) exported_unset: Vec<String>,
}

/// One character of an expanded word.
#[derive(Clone, Copy)]
pub(super) struct Expanded {
    pub(super) ch: char,
    pub(super) at: Location,
    /// Came from an unquoted expansion, so whitespace here splits fields.
    pub(super) splits: bool,
}

pub(super) const COMPOUND_KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "[[", "[", "!", "time", "coproc",
];

impl Shell {
    pub(super) fn new(options: &RecipeOptions) -> Shell {
        let variables = options
            .env
            .iter()
            .map(|(name, value)| {
                let variable = Variable {
                    value: value.clone(),
                    exported: true,
                    location: Location::START,
                };
                (name.clone(), variable)
            })
            .collect();
        Shell {
            variables,
            exported_unset: Vec::new(),
        }
    }

    pub(super) fn exported_env(&self, fallback: Location) -> BTreeMap<String, Located<String>> {
        self.variables
            .iter()
            .filter(|(_, variable)| variable.exported)
            .map(|(name, variable)| {
                let location = if variable.location == Location::START {
                    fallback
                } else {
                    variable.location
                };
                (name.clone(), Located::new(variable.value.clone(), location))
            })
            .collect()
    }

    pub(super) fn assign(&mut self, name: String, value: String, location: Location, export: bool) {
        let exported = export
            || self.variables.get(&name).is_some_and(|v| v.exported)
            || self.exported_unset.contains(&name);
        self.exported_unset.retain(|n| n != &name);
        self.variables.insert(
            name,
            Variable {
                value,
                exported,
                location,
            },
        );
    }

    /// Runs one command; returns the `vllm serve` it describes, if it is one.
    pub(super) fn run(&mut self, command: RawCommand) -> Result<Option<ServeCommand>, RecipeError> {
        let (prefix, rest) = split_prefix(&command.words);
        let Some(head) = rest.first() else {
            if let Some(&(_, _, at)) = command.redirects.first() {
                return Err(RecipeError::at(at, "redirection without a command"));
            }
            if command.background {
                return Err(RecipeError::at(
                    command.location,
                    "`&` after an assignment runs nothing",
                ));
            }
            let values = self.evaluate_assignments(prefix)?;
            for (name, value, location) in values {
                self.assign(name, value, location, false);
            }
            return Ok(None);
        };
        let name = head.literal().ok_or_else(|| {
            RecipeError::at(
                head.start,
                "the command name comes from an expansion; write the command (vllm serve) out",
            )
        })?;
        match name.as_str() {
            "export" => {
                self.no_decorations(&command, prefix, "export")?;
                self.export(&rest[1..])?;
                Ok(None)
            }
            "set" => {
                self.no_decorations(&command, prefix, "set")?;
                check_set_options(&rest[1..])?;
                Ok(None)
            }
            "wait" => {
                self.no_decorations(&command, prefix, "wait")?;
                if let Some(arg) = rest.get(1) {
                    return Err(RecipeError::at(
                        arg.start,
                        "`wait` with arguments is not modelled (process ids are not tracked); use a bare `wait`",
                    ));
                }
                Ok(None)
            }
            "vllm" | "uv" => {
                let skip = serve_prefix_len(rest)?;
                self.serve(&command, prefix, &rest[skip..]).map(Some)
            }
            keyword if COMPOUND_KEYWORDS.contains(&keyword) => Err(RecipeError::at(
                head.start,
                format!(
                    "`{keyword}` (conditionals, loops and tests) is not modelled; a recipe is a straight list of commands"
                ),
            )),
            other => Err(RecipeError::at(
                head.start,
                format!(
                    "unknown command `{other}`: a recipe may only assign and export variables, `set` shell options, run `vllm serve` or `uv run vllm serve`, and `wait`"
                ),
            )),
        }
    }

    /// For `--attention-args`: prefixes, then `vllm serve …` or bare arguments.
    pub(super) fn run_bare_arguments(
        &mut self,
        command: RawCommand,
    ) -> Result<ServeCommand, RecipeError> {
        let (prefix, rest) = split_prefix(&command.words);
        let skip = match rest.first().and_then(RawWord::literal).as_deref() {
            Some("vllm" | "uv") => serve_prefix_len(rest)?,
            _ => 0,
        };
        self.serve(&command, prefix, &rest[skip..])
    }

    pub(super) fn no_decorations(
        &self,
        command: &RawCommand,
        prefix: &[RawWord],
        what: &str,
    ) -> Result<(), RecipeError> {
        if let Some(word) = prefix.first() {
            return Err(RecipeError::at(
                word.start,
                format!("an environment prefix before `{what}` is not modelled"),
            ));
        }
        if let Some(&(_, _, at)) = command.redirects.first() {
            return Err(RecipeError::at(
                at,
                format!("redirecting `{what}` is not modelled"),
            ));
        }
        if command.background {
            return Err(RecipeError::at(
                command.location,
                format!("running `{what}` in the background is not modelled"),
            ));
        }
        Ok(())
    }

    pub(super) fn export(&mut self, args: &[RawWord]) -> Result<(), RecipeError> {
        for arg in args {
            if let Some((name, value)) = arg.as_assignment() {
                let value = self.expand_joined(value)?;
                self.assign(name, value, arg.start, true);
                continue;
            }
            match arg.literal() {
                Some(name)
                    if !name.is_empty()
                        && name
                            .chars()
                            .enumerate()
                            .all(|(i, c)| is_name_char(c, i == 0)) =>
                {
                    match self.variables.get_mut(&name) {
                        Some(variable) => variable.exported = true,
                        None => self.exported_unset.push(name),
                    }
                }
                Some(option) if option.starts_with('-') => {
                    return Err(RecipeError::at(
                        arg.start,
                        format!("`export {option}` is not modelled; use `export NAME=value`"),
                    ));
                }
                _ => {
                    return Err(RecipeError::at(
                        arg.start,
                        "`export` expects NAME or NAME=value",
                    ));
                }
            }
        }
        Ok(())
    }

    pub(super) fn serve(
        &mut self,
        command: &RawCommand,
        prefix: &[RawWord],
        args: &[RawWord],
    ) -> Result<ServeCommand, RecipeError> {
        // Prefix values expand against the shell's variables, not each other (bash semantics).
        let assignments = self.evaluate_assignments(prefix)?;
        let mut env = self.exported_env(command.location);
        for (name, value, location) in assignments {
            env.insert(name, Located::new(value, location));
        }
        let mut words = Vec::new();
        for arg in args {
            words.extend(self.expand_fields(arg)?);
        }
        let mut redirections = Vec::new();
        for (fd, kind, at) in &command.redirects {
            let kind = match kind {
                RawRedirectKind::Duplicate(target) => RedirectionKind::Duplicate(*target),
                RawRedirectKind::Truncate(word) => {
                    RedirectionKind::Truncate(self.redirect_target(word)?)
                }
                RawRedirectKind::Append(word) => {
                    RedirectionKind::Append(self.redirect_target(word)?)
                }
            };
            redirections.push(Redirection {
                fd: *fd,
                kind,
                location: *at,
            });
        }
        Ok(ServeCommand {
            location: command.location,
            env,
            args: words,
            redirections,
            background: command.background,
        })
    }

    pub(super) fn redirect_target(&self, word: &RawWord) -> Result<String, RecipeError> {
        let mut fields = self.expand_fields(word)?;
        if fields.len() != 1 {
            return Err(RecipeError::at(
                word.start,
                format!(
                    "ambiguous redirect: the target expands to {} words",
                    fields.len()
                ),
            ));
        }
        Ok(fields.remove(0).text)
    }

    pub(super) fn evaluate_assignments(
        &self,
        words: &[RawWord],
    ) -> Result<Vec<(String, String, Location)>, RecipeError> {
        words
            .iter()
            .map(|word| {
                let (name, value) = word
                    .as_assignment()
                    .expect("split_prefix only returns assignments");
                Ok((name, self.expand_joined(value)?, word.start))
            })
            .collect()
    }

    /// Expands without field splitting (assignment values).
    pub(super) fn expand_joined(&self, pieces: &[Piece]) -> Result<String, RecipeError> {
        let mut out = Vec::new();
        self.expand(pieces, false, &mut out)?;
        Ok(out.iter().map(|e| e.ch).collect())
    }

    /// Expands a word into fields, splitting unquoted expansions at whitespace.
    pub(super) fn expand_fields(&self, word: &RawWord) -> Result<Vec<Word>, RecipeError> {
        let mut chars = Vec::new();
        self.expand(&word.pieces, false, &mut chars)?;
        let mut fields = Vec::new();
        let mut current: Vec<Expanded> = Vec::new();
        for expanded in chars {
            if expanded.splits && matches!(expanded.ch, ' ' | '\t' | '\n') {
                if !current.is_empty() {
                    fields.push(make_word(&current, word.start));
                    current.clear();
                }
            } else {
                current.push(expanded);
            }
        }
        if !current.is_empty() {
            fields.push(make_word(&current, word.start));
        }
        if fields.is_empty() && word.has_quotes {
            fields.push(Word::new(String::new(), word.start));
        }
        Ok(fields)
    }

    pub(super) fn expand(
        &self,
        pieces: &[Piece],
        in_unquoted_expansion: bool,
        out: &mut Vec<Expanded>,
    ) -> Result<(), RecipeError> {
        for piece in pieces {
            match piece {
                Piece::Char { ch, at, quoted } => out.push(Expanded {
                    ch: *ch,
                    at: *at,
                    splits: in_unquoted_expansion && !quoted,
                }),
                Piece::Param {
                    name,
                    default,
                    quoted,
                    at,
                } => {
                    let value = self.variables.get(name).map(|v| v.value.as_str());
                    match (value, default) {
                        (Some(value), None) => self.push_value(name, value, *quoted, *at, out)?,
                        (Some(value), Some(_)) if !value.is_empty() => {
                            self.push_value(name, value, *quoted, *at, out)?;
                        }
                        (_, Some(default)) => {
                            self.expand(default, in_unquoted_expansion || !quoted, out)?;
                        }
                        (None, None) => {
                            return Err(RecipeError::at(
                                *at,
                                format!(
                                    "variable `{name}` is not set here; assign it earlier, write ${{{name}:-default}}, or pass it as an environment variable"
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn push_value(
        &self,
        name: &str,
        value: &str,
        quoted: bool,
        at: Location,
        out: &mut Vec<Expanded>,
    ) -> Result<(), RecipeError> {
        if !quoted && value.contains(['*', '?', '[']) {
            return Err(RecipeError::at(
                at,
                format!(
                    "unquoted ${name} expands to a filename pattern (globbing is not modelled); quote it"
                ),
            ));
        }
        if out.len() + value.len() > MAX_EXPANDED_CHARS {
            return Err(RecipeError::at(
                at,
                format!(
                    "expanding ${name} makes a word longer than {MAX_EXPANDED_CHARS} characters"
                ),
            ));
        }
        out.extend(value.chars().map(|ch| Expanded {
            ch,
            at,
            splits: !quoted,
        }));
        Ok(())
    }
}

pub(super) fn make_word(chars: &[Expanded], fallback: Location) -> Word {
    Word {
        text: chars.iter().map(|e| e.ch).collect(),
        location: chars.first().map_or(fallback, |e| e.at),
        char_locations: chars.iter().map(|e| e.at).collect(),
    }
}

/// Leading `NAME=value` words, and the rest.
pub(super) fn split_prefix(words: &[RawWord]) -> (&[RawWord], &[RawWord]) {
    let count = words
        .iter()
        .take_while(|word| word.as_assignment().is_some())
        .count();
    words.split_at(count)
}

/// Number of words in `vllm serve` (2) or `uv run vllm serve` (4); anything else is an error.
pub(super) fn serve_prefix_len(words: &[RawWord]) -> Result<usize, RecipeError> {
    let expected: &[&str] = match words.first().and_then(RawWord::literal).as_deref() {
        Some("uv") => &["uv", "run", "vllm", "serve"],
        _ => &["vllm", "serve"],
    };
    for (i, want) in expected.iter().enumerate() {
        let Some(word) = words.get(i) else {
            let at = words.last().map_or(Location::START, |w| w.start);
            return Err(RecipeError::at(
                at,
                format!(
                    "expected `{}`, found the end of the command",
                    expected.join(" ")
                ),
            ));
        };
        if word.literal().as_deref() != Some(*want) {
            let found = word.literal().unwrap_or_else(|| "an expansion".to_owned());
            return Err(RecipeError::at(
                word.start,
                format!(
                    "expected `{}`, found `{found}` here: only `vllm serve` and `uv run vllm serve` are modelled",
                    expected.join(" ")
                ),
            ));
        }
    }
    Ok(expected.len())
}

pub(super) fn check_set_options(args: &[RawWord]) -> Result<(), RecipeError> {
    let mut expect_option_name = false;
    for arg in args {
        let text = arg.literal().unwrap_or_default();
        if expect_option_name {
            if !matches!(text.as_str(), "pipefail" | "errexit" | "nounset" | "xtrace") {
                return Err(RecipeError::at(
                    arg.start,
                    format!(
                        "`set -o {text}` is not modelled; accepted: pipefail, errexit, nounset, xtrace"
                    ),
                ));
            }
            expect_option_name = false;
            continue;
        }
        let mut chars = text.chars();
        match chars.next() {
            Some('-' | '+') if text.len() > 1 => {
                for flag in chars {
                    match flag {
                        'e' | 'u' | 'x' => {}
                        'o' => expect_option_name = true,
                        other => {
                            return Err(RecipeError::at(
                                arg.start,
                                format!(
                                    "`set` option `{other}` is not modelled; accepted: -e, -u, -x, -o pipefail"
                                ),
                            ));
                        }
                    }
                }
            }
            _ => {
                return Err(RecipeError::at(
                    arg.start,
                    format!(
                        "`set {text}` is not modelled: only shell options such as `set -euo pipefail` are accepted"
                    ),
                ));
            }
        }
    }
    if expect_option_name {
        let at = args.last().map_or(Location::START, |w| w.start);
        return Err(RecipeError::at(at, "`set -o` needs an option name"));
    }
    Ok(())
}
