//! Which `vllm serve` option a flag word names, as vLLM 0.26.0's parser decides it: Python 3.12's
//! `argparse` (`ArgumentParser._parse_optional` and `_get_option_tuples`, abbreviations allowed, as
//! `FlexibleArgumentParser` leaves them) over the options of vLLM's own parser
//! (`afd_traces::vllm_cli::builtin_serve_flags`, read from the wheel by
//! `sim/scripts/vllm_serve_flags.py`).
//!
//! An exact spelling names its option; a long flag (`--max-num-seq`) names the one option it is a
//! prefix of; a short flag (`-t`) likewise, or a one-letter option with its value attached
//! (`-q8`); a multi-letter short option never takes an attached value (`-tp2` is refused). A prefix
//! of several options is ambiguous, and a name that matches none is unrecognized: vLLM refuses
//! both before it starts.

use afd_traces::vllm_cli::{ServeFlag, builtin_serve_flags};

/// What a flag word names.
#[derive(Debug, PartialEq)]
pub(super) enum Resolved {
    /// The option spelt `option` in full; `attached` is a one-letter option's value written
    /// against it (`-q8`: `8`), with the character offset it starts at.
    Known {
        option: &'static str,
        abbreviated: bool,
        attached: Option<(String, usize)>,
    },
    /// A prefix of every option listed.
    Ambiguous(Vec<&'static str>),
    /// No option of that name; how to write what it likely meant, where that is clear.
    Unrecognized { hint: Option<String> },
}

/// The option `name` names. `name` is the word's flag name as `FlexibleArgumentParser` hands it
/// on (a long flag's `_` read as `-`) without any `=value`; `inline` says the word had one.
pub(super) fn resolve(name: &str, inline: bool) -> Resolved {
    // `FlexibleArgumentParser` rewrites `-O`, `-O<n>` and `-O=<n>` to `--optimization-level`
    // before argparse sees them (`vllm/utils/argparse_utils.py:322-333`), so its parser lists no `-O`.
    if name == "-O" {
        return Resolved::Known {
            option: "--optimization-level",
            abbreviated: false,
            attached: None,
        };
    }
    let flags = builtin_serve_flags();
    if let Some((option, _)) = flags.spellings().find(|(option, _)| *option == name) {
        return Resolved::Known {
            option,
            abbreviated: false,
            attached: None,
        };
    }
    let matches: Vec<(&'static str, Option<(String, usize)>)> = if name.starts_with("--") {
        flags
            .spellings()
            .filter(|(option, _)| option.starts_with(name))
            .map(|(option, _)| (option, None))
            .collect()
    } else if inline {
        // argparse sets a short flag's `=value` against the whole word, which no option starts.
        Vec::new()
    } else {
        let short = name.get(..2).unwrap_or(name);
        flags
            .spellings()
            .filter_map(|(option, _)| {
                if option == short {
                    Some((option, Some((name[2..].to_owned(), 2))))
                } else {
                    option.starts_with(name).then_some((option, None))
                }
            })
            .collect()
    };
    match matches.len() {
        0 => Resolved::Unrecognized {
            hint: attached_hint(name)
                .or_else(|| nearest(name).map(|option| format!("did you mean {option}?"))),
        },
        1 => {
            let (option, attached) = matches.into_iter().next().expect("one match");
            Resolved::Known {
                option,
                abbreviated: attached.is_none(),
                attached,
            }
        }
        _ => Resolved::Ambiguous(matches.into_iter().map(|(option, _)| option).collect()),
    }
}

/// Why vLLM refuses `value` for the option spelt `canonical`, where it does: a value outside the
/// option's argparse choices, or an `--attention-backend` no member of `AttentionBackendEnum`
/// names (the attention config's validator).
pub(super) fn refused_value(canonical: &str, value: &str) -> Option<String> {
    let flags = builtin_serve_flags();
    if canonical == "--attention-backend" && !flags.is_attention_backend(value) {
        return Some(format!(
            "unknown attention backend '{value}': vLLM 0.26.0 takes auto or one of {}",
            flags.attention_backends.join(", ")
        ));
    }
    let choices = flag(canonical)?.choices.as_ref()?;
    (!choices.iter().any(|c| c == value)).then(|| {
        format!(
            "invalid choice: '{value}' (vLLM 0.26.0 takes {})",
            choices.join(", ")
        )
    })
}

/// The option spelt `option` (a spelling [`resolve`] returned).
pub(super) fn flag(option: &str) -> Option<&'static ServeFlag> {
    builtin_serve_flags().option(option)
}

/// `-tp2`: a multi-letter short option with its value written against it.
fn attached_hint(name: &str) -> Option<String> {
    if name.starts_with("--") {
        return None;
    }
    builtin_serve_flags()
        .spellings()
        .filter(|(option, _)| option.len() > 2 && !option.starts_with("--"))
        .find_map(|(option, _)| {
            let value = name.strip_prefix(option).filter(|v| !v.is_empty())?;
            Some(format!(
                "argparse attaches a value only to a one-letter option: write {option} {value}"
            ))
        })
}

/// The spelling of the same kind (long or short) nearest to `name`, where a typo could explain
/// the difference: within a third of its length by Damerau-Levenshtein distance.
fn nearest(name: &str) -> Option<&'static str> {
    let long = name.starts_with("--");
    builtin_serve_flags()
        .spellings()
        .map(|(option, _)| option)
        .filter(|option| option.starts_with("--") == long)
        .map(|option| (strsim::damerau_levenshtein(name, option), option))
        .filter(|(distance, _)| *distance * 3 <= name.len().max(3))
        .min()
        .map(|(_, option)| option)
}

#[cfg(test)]
mod tests;
