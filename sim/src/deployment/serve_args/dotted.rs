//! vLLM's dotted JSON arguments: `-cc.cudagraph_mode=FULL_DECODE_ONLY`, `--compilation-config.mode
//! 3`, `--additional-config.afd.port=6000`, `-cc.cudagraph_capture_sizes+ 1,2,4`.
//!
//! vLLM 0.26.0's `FlexibleArgumentParser.parse_args` (`vllm/utils/argparse_utils.py:370-426`)
//! takes every option word whose name holds a `.` out of the list, reads its value (the text after
//! `=`, else the next word) as JSON, else as a human-readable integer (`1k`, `2M`), else as a string
//! (`+` after the name: a comma-separated list of strings), nests it under the keys after the
//! first `.`, merges the words of one flag spelling (objects merged key by key, lists
//! concatenated, a repeated key's last value kept), and appends each spelling with its JSON object
//! at the end of the list, in the order the spellings first appear. [`fold`] does the same to
//! located words, so a dotted key's finding points at the word that set it.

use serde_json::{Map, Value};

use super::{ArgError, argument_words, looks_like_flag};
use crate::deployment::findings::Subject;
use crate::deployment::location::Location;
use crate::deployment::recipe::Word;

/// One dotted word's contribution: its key path below the flag and where it was written.
struct Setting {
    path: Vec<String>,
    location: Location,
}

/// One flag spelling's dotted words, merged.
struct Group {
    flag: String,
    location: Location,
    value: Map<String, Value>,
    settings: Vec<Setting>,
}

/// `words` with every dotted option folded as vLLM folds it: the other words in order, then each
/// dotted flag spelling with its merged JSON object. A dotted option without a value is an error.
pub(super) fn fold(words: &[Word]) -> (Vec<Word>, Vec<ArgError>) {
    let mut kept = Vec::with_capacity(words.len());
    let mut groups: Vec<Group> = Vec::new();
    let mut errors = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        i += 1;
        let Some((name, inline)) = dotted_name(&word.text) else {
            kept.push(word.clone());
            continue;
        };
        let value_text = match inline {
            Some(value) => value.to_owned(),
            None => match words.get(i) {
                // vLLM takes the next word whatever it looks like.
                Some(next) => {
                    i += 1;
                    next.text.clone()
                }
                None => {
                    errors.push(ArgError {
                        location: word.location,
                        subject: Some(Subject::flag(&word.text)),
                        message: format!("{} expects a value", word.text),
                    });
                    continue;
                }
            },
        };
        let (name, list) = match name.strip_suffix('+') {
            Some(name) => (name.to_owned(), true),
            None => (name, false),
        };
        let mut keys = name.split('.').map(str::to_owned);
        let flag = keys.next().unwrap_or_default();
        let path: Vec<String> = keys.collect();
        let value = if list {
            Value::Array(
                value_text
                    .split(',')
                    .map(|s| Value::String(s.to_owned()))
                    .collect(),
            )
        } else {
            read_value(&value_text)
        };
        let nested = path.iter().rev().fold(value, |inner, key| {
            Value::Object(Map::from_iter([(key.clone(), inner)]))
        });
        let index = match groups.iter().position(|g| g.flag == flag) {
            Some(index) => index,
            None => {
                groups.push(Group {
                    flag: flag.clone(),
                    location: word.location,
                    value: Map::new(),
                    settings: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let group = &mut groups[index];
        if let Value::Object(update) = nested {
            merge(&mut group.value, update);
        }
        group.settings.push(Setting {
            path,
            location: word.location,
        });
    }
    for mut group in groups {
        kept.push(Word::new(group.flag.clone(), group.location));
        let mut text = String::new();
        let mut chars = Vec::new();
        let value = Value::Object(std::mem::take(&mut group.value));
        emit(&value, &[], &group, &mut text, &mut chars);
        kept.push(Word::with_char_locations(text, group.location, chars));
    }
    (kept, errors)
}

/// Whether any word is a dotted option (most command lines hold none, and are read as they are).
pub(super) fn any(words: &[Word]) -> bool {
    words.iter().any(|w| dotted_name(&w.text).is_some())
}

/// [`fold`] over plain arguments (no positions); `args` as they are when a dotted option lacks
/// its value (parsing reports it).
pub(crate) fn fold_args(args: &[String]) -> Vec<String> {
    if !args.iter().any(|a| dotted_name(a).is_some()) {
        return args.to_vec();
    }
    match fold(&argument_words(args)) {
        (folded, errors) if errors.is_empty() => folded.into_iter().map(|w| w.text).collect(),
        _ => args.to_vec(),
    }
}

/// The name of a dotted option (a long name's `_` before its first `.` read as `-`) and its inline
/// value; `None` for any other word. `-O…` is vLLM's optimization level, rewritten before.
fn dotted_name(text: &str) -> Option<(String, Option<&str>)> {
    if !looks_like_flag(text) || (text.starts_with("-O") && !text.starts_with("--")) {
        return None;
    }
    let (name, inline) = match text.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (text, None),
    };
    if !name.contains('.') {
        return None;
    }
    let name = match name.strip_prefix("--") {
        Some(long) => {
            let (head, tail) = long.split_at(long.find('.').unwrap_or(long.len()));
            format!("--{}{tail}", head.replace('_', "-"))
        }
        None => name.to_owned(),
    };
    Some((name, inline))
}

/// A dotted option's value as vLLM reads it: JSON, else a human-readable integer, else the text.
fn read_value(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return value;
    }
    human_readable_int(text).map_or_else(|| Value::String(text.to_owned()), Value::from)
}

/// vLLM's `human_readable_int` (`vllm/utils/argparse_utils.py:29-72`): digits with k/m/g/t (×1000,
/// decimals allowed) or K/M/G/T (×1024, whole numbers only), or a plain integer.
fn human_readable_int(text: &str) -> Option<i64> {
    let text = text.trim();
    let suffix = text.chars().last()?;
    let number = &text[..text.len() - suffix.len_utf8()];
    let shape_ok = |s: &str| {
        let (whole, fraction) = s.split_once('.').unwrap_or((s, "0"));
        !whole.is_empty()
            && !fraction.is_empty()
            && whole
                .chars()
                .chain(fraction.chars())
                .all(|c| c.is_ascii_digit())
    };
    let decimal = match suffix {
        'k' => Some(1e3),
        'm' => Some(1e6),
        'g' => Some(1e9),
        't' => Some(1e12),
        _ => None,
    };
    if let Some(multiplier) = decimal {
        let value: f64 = number.parse().ok().filter(|_| shape_ok(number))?;
        return Some((value * multiplier) as i64);
    }
    let binary = match suffix {
        'K' => Some(1i64 << 10),
        'M' => Some(1 << 20),
        'G' => Some(1 << 30),
        'T' => Some(1 << 40),
        _ => None,
    };
    match binary {
        Some(multiplier) if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()) => {
            number.parse::<i64>().ok()?.checked_mul(multiplier)
        }
        Some(_) => None,
        None => text.parse().ok(),
    }
}

/// vLLM's `recursive_dict_update`: objects merge key by key, lists concatenate, else the update
/// wins.
fn merge(original: &mut Map<String, Value>, update: Map<String, Value>) {
    for (key, value) in update {
        match (original.get_mut(&key), value) {
            (Some(Value::Object(inner)), Value::Object(update)) => merge(inner, update),
            (Some(Value::Array(inner)), Value::Array(more)) => inner.extend(more),
            (_, value) => {
                original.insert(key, value);
            }
        }
    }
}

/// Where the key path `path` was set: the last word that set it or a key above it, else the first
/// that set a key below it.
fn location_of(group: &Group, path: &[String]) -> Location {
    group
        .settings
        .iter()
        .rev()
        .find(|s| path.starts_with(&s.path))
        .or_else(|| group.settings.iter().find(|s| s.path.starts_with(path)))
        .map_or(group.location, |s| s.location)
}

/// Writes `value` as JSON, each character located at the word that set its key path.
fn emit(
    value: &Value,
    path: &[String],
    group: &Group,
    text: &mut String,
    chars: &mut Vec<Location>,
) {
    fn put(s: &str, at: Location, text: &mut String, chars: &mut Vec<Location>) {
        text.push_str(s);
        chars.extend(std::iter::repeat_n(at, s.chars().count()));
    }
    let here = location_of(group, path);
    match value {
        Value::Object(object) => {
            put("{", here, text, chars);
            for (n, (key, inner)) in object.iter().enumerate() {
                let mut below = path.to_vec();
                below.push(key.clone());
                let at = location_of(group, &below);
                if n > 0 {
                    put(", ", at, text, chars);
                }
                put(&Value::String(key.clone()).to_string(), at, text, chars);
                put(": ", at, text, chars);
                emit(inner, &below, group, text, chars);
            }
            put("}", here, text, chars);
        }
        leaf => put(&leaf.to_string(), here, text, chars),
    }
}
