//! Finds where each object key of a JSON text starts, so a finding about `afd.port` can point at
//! the line of `"port"` inside a multi-line `--additional-config` argument.
//!
//! Runs only on text `serde_json` already accepted; on anything else it stops early and returns
//! what it found (never panics). Keys are recorded as dotted paths (`afd.port`); array elements
//! are skipped. A key given twice records its last position, matching the value JSON parsers keep.

use std::collections::BTreeMap;

/// Dotted key path → index (in `char`s) of the key's opening quote.
pub(crate) fn key_positions(text: &str) -> BTreeMap<String, usize> {
    let chars: Vec<char> = text.chars().collect();
    let mut scanner = Scanner {
        chars: &chars,
        pos: 0,
        found: BTreeMap::new(),
    };
    scanner.value("");
    scanner.found
}

struct Scanner<'a> {
    chars: &'a [char],
    pos: usize,
    found: BTreeMap<String, usize>,
}

impl Scanner<'_> {
    fn skip_whitespace(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    /// Scans one value; returns false when the text ends or is malformed.
    fn value(&mut self, path: &str) -> bool {
        self.skip_whitespace();
        match self.chars.get(self.pos) {
            Some('{') => self.object(path),
            Some('[') => self.array(path),
            Some('"') => self.string().is_some(),
            Some(_) => {
                while self
                    .chars
                    .get(self.pos)
                    .is_some_and(|c| !matches!(c, ',' | '}' | ']') && !c.is_whitespace())
                {
                    self.pos += 1;
                }
                true
            }
            None => false,
        }
    }

    fn object(&mut self, path: &str) -> bool {
        self.pos += 1;
        loop {
            self.skip_whitespace();
            match self.chars.get(self.pos) {
                Some('}') => {
                    self.pos += 1;
                    return true;
                }
                Some(',') => self.pos += 1,
                Some('"') => {
                    let start = self.pos;
                    let Some(key) = self.string() else {
                        return false;
                    };
                    let child = if path.is_empty() {
                        key
                    } else {
                        format!("{path}.{key}")
                    };
                    self.found.insert(child.clone(), start);
                    self.skip_whitespace();
                    if self.chars.get(self.pos) != Some(&':') {
                        return false;
                    }
                    self.pos += 1;
                    if !self.value(&child) {
                        return false;
                    }
                }
                _ => return false,
            }
        }
    }

    fn array(&mut self, path: &str) -> bool {
        self.pos += 1;
        loop {
            self.skip_whitespace();
            match self.chars.get(self.pos) {
                Some(']') => {
                    self.pos += 1;
                    return true;
                }
                Some(',') => self.pos += 1,
                Some(_) => {
                    // Keys inside array elements are not addressable by a dotted path.
                    let mut nested = Scanner {
                        chars: self.chars,
                        pos: self.pos,
                        found: BTreeMap::new(),
                    };
                    if !nested.value(path) {
                        return false;
                    }
                    self.pos = nested.pos;
                }
                None => return false,
            }
        }
    }

    /// At `"`: returns the decoded string and moves past the closing quote.
    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let c = *self.chars.get(self.pos)?;
            self.pos += 1;
            match c {
                '"' => return Some(out),
                '\\' => {
                    let escaped = *self.chars.get(self.pos)?;
                    self.pos += 1;
                    match escaped {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'u' => {
                            let hex: String =
                                self.chars.get(self.pos..self.pos + 4)?.iter().collect();
                            self.pos += 4;
                            let code = u32::from_str_radix(&hex, 16).ok()?;
                            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                        }
                        other => out.push(other),
                    }
                }
                other => out.push(other),
            }
        }
    }
}

#[cfg(test)]
mod tests;
