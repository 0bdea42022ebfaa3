//! The options of `vllm serve` (`afd-vllm-serve-flags`): every spelling vLLM's own argument
//! parser accepts, how many values each takes and its choices, with sample command lines the real
//! parser accepted or refused.
//!
//! The shipped file is `data/vllm-cli/serve-flags-0.26.0.json` ([`builtin_serve_flags`]), written
//! by `sim/scripts/vllm_serve_flags.py` from the vLLM 0.26.0 wheel (its `PROVENANCE.md` says how).
//! This module only reads and checks it: how a command line's words are read against it (argparse's
//! prefixes, arity and choices) is `afd-sim`'s `deployment/serve_args.rs`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::json_at::{self, JsonAt};

/// The `format` tag of a serve-flags file.
pub const SERVE_FLAGS_FORMAT: &str = "afd-vllm-serve-flags";
/// The schema this build reads and writes.
pub const SERVE_FLAGS_SCHEMA_VERSION: u32 = 1;

/// A serve-flags file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFlags {
    pub format: String,
    pub schema_version: u32,
    pub provenance: ServeFlagsProvenance,
    pub flags: Vec<ServeFlag>,
    /// What `--attention-backend` may name: the members of vLLM's `AttentionBackendEnum`, which
    /// the attention config's validator reads the value as (upper-cased; `auto` selects one).
    pub attention_backends: Vec<String>,
    /// Command lines the real parser read, each accepted or refused.
    pub samples: Vec<ServeSample>,
}

/// Where the options were read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFlagsProvenance {
    pub vllm_version: String,
    /// The Python whose `argparse` parsed the samples.
    pub python: String,
    /// Modules replaced by stand-ins while the parser was built.
    pub stubbed: Vec<String>,
    pub command: String,
    pub date_utc: String,
}

/// How many values an option takes (argparse's `nargs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlagValues {
    /// A switch (`nargs=0`): `--enforce-eager`, `--no-enforce-eager`.
    None,
    /// Exactly one value, the next word or after `=`.
    One,
    /// One or more values: every following word that is not an option.
    OneOrMore,
    /// The next word if it is not an option (`nargs='?'`).
    Optional,
    /// `-h`/`--help`: prints the help and exits.
    Help,
}

/// One option of `vllm serve`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFlag {
    /// Every spelling (`--tensor-parallel-size`, `-tp`; a boolean's `--no-` form).
    pub options: Vec<String>,
    pub values: FlagValues,
    /// The values argparse accepts, where it checks them.
    pub choices: Option<Vec<String>>,
}

/// One command line (the words after `vllm serve`) as the real parser read it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSample {
    pub words: Vec<String>,
    pub accepted: bool,
    /// An accepted line's values that differ from the defaults, by destination.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<BTreeMap<String, serde_json::Value>>,
    /// A refused line's argparse message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Why a serve-flags file could not be read; every variant names the place in the file.
#[derive(Debug, thiserror::Error)]
pub enum ServeFlagsError {
    #[error("vLLM serve flags are not valid JSON for this schema {0}")]
    Json(#[from] JsonAt),
    #[error("vLLM serve flags have format {found:?}, expected {expected:?}")]
    Format {
        found: String,
        expected: &'static str,
    },
    #[error("vLLM serve flags have schema_version {found}, this build reads {expected}")]
    SchemaVersion { found: u32, expected: u32 },
    #[error("vLLM serve flags field {path}: {problem}")]
    Invalid { path: String, problem: String },
}

/// The shipped options of vLLM 0.26.0's `vllm serve`, checked.
pub fn builtin_serve_flags() -> &'static ServeFlags {
    static FLAGS: std::sync::OnceLock<ServeFlags> = std::sync::OnceLock::new();
    FLAGS.get_or_init(|| {
        ServeFlags::from_json(include_str!("../data/vllm-cli/serve-flags-0.26.0.json"))
            .expect("the shipped serve flags are checked by the tests of this module")
    })
}

impl ServeFlags {
    /// Parses and checks a serve-flags file; errors name the offending field path.
    pub fn from_json(text: &str) -> Result<ServeFlags, ServeFlagsError> {
        let flags: ServeFlags = json_at::from_str(text)?;
        flags.check()?;
        Ok(flags)
    }

    fn check(&self) -> Result<(), ServeFlagsError> {
        if self.format != SERVE_FLAGS_FORMAT {
            return Err(ServeFlagsError::Format {
                found: self.format.clone(),
                expected: SERVE_FLAGS_FORMAT,
            });
        }
        if self.schema_version != SERVE_FLAGS_SCHEMA_VERSION {
            return Err(ServeFlagsError::SchemaVersion {
                found: self.schema_version,
                expected: SERVE_FLAGS_SCHEMA_VERSION,
            });
        }
        let invalid = |path: String, problem: &str| ServeFlagsError::Invalid {
            path,
            problem: problem.to_owned(),
        };
        if self.flags.is_empty() {
            return Err(invalid("flags".to_owned(), "no options"));
        }
        let mut seen = BTreeSet::new();
        for (i, flag) in self.flags.iter().enumerate() {
            if flag.options.is_empty() {
                return Err(invalid(format!("flags[{i}].options"), "no spelling"));
            }
            for (k, option) in flag.options.iter().enumerate() {
                let path = format!("flags[{i}].options[{k}]");
                let well_formed = option.len() >= 2
                    && option.starts_with('-')
                    && option
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                if !well_formed {
                    return Err(invalid(path, "an option is '-' or '--' and a name"));
                }
                if !seen.insert(option.as_str()) {
                    return Err(invalid(path, "spelt by two options"));
                }
            }
            if flag.choices.as_ref().is_some_and(Vec::is_empty) {
                return Err(invalid(format!("flags[{i}].choices"), "empty"));
            }
        }
        if self.attention_backends.is_empty() {
            return Err(invalid("attention_backends".to_owned(), "empty"));
        }
        for (i, sample) in self.samples.iter().enumerate() {
            if sample.accepted != sample.set.is_some()
                || sample.accepted == sample.message.is_some()
            {
                return Err(invalid(
                    format!("samples[{i}]"),
                    "an accepted sample has `set` and no `message`, a refused one the reverse",
                ));
            }
        }
        Ok(())
    }

    /// The option spelt exactly `option`.
    pub fn option(&self, option: &str) -> Option<&ServeFlag> {
        self.flags
            .iter()
            .find(|flag| flag.options.iter().any(|o| o == option))
    }

    /// Whether vLLM's attention config accepts `--attention-backend value`.
    pub fn is_attention_backend(&self, value: &str) -> bool {
        value.eq_ignore_ascii_case("auto")
            || self
                .attention_backends
                .iter()
                .any(|name| *name == value.to_uppercase())
    }

    /// Every spelling, each with its option.
    pub fn spellings(&self) -> impl Iterator<Item = (&str, &ServeFlag)> {
        self.flags
            .iter()
            .flat_map(|flag| flag.options.iter().map(move |o| (o.as_str(), flag)))
    }
}

#[cfg(test)]
mod tests;
