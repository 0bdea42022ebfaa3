//! The Prometheus text exposition format (0.0.4) as vLLM's `/metrics` serves it: a parser into samples and
//! the sums the routing checks need (per engine, over label filters).
//!
//! The parser is strict about sample lines (name, labels, value) and ignores comments, so garbage is an
//! error with its line number rather than a silently wrong number. Nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet};

/// Longest exposition accepted (a scrape of a healthy server is a few hundred KiB).
pub const MAX_TEXT_BYTES: usize = 32 << 20;

/// One sample: `name{labels} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Why an exposition could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("/metrics line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// A parsed scrape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

/// The label vLLM puts the DP engine index in.
pub const ENGINE_LABEL: &str = "engine";

impl Scrape {
    /// Parses a whole exposition.
    pub fn parse(text: &str) -> Result<Scrape, ParseError> {
        if text.len() > MAX_TEXT_BYTES {
            return Err(ParseError {
                line: 0,
                message: format!("exposition larger than {MAX_TEXT_BYTES} bytes"),
            });
        }
        let mut samples = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            samples.push(parse_sample(line).map_err(|message| ParseError {
                line: n + 1,
                message,
            })?);
        }
        Ok(Scrape { samples })
    }

    /// Whether any sample has this name.
    pub fn has(&self, name: &str) -> bool {
        self.samples.iter().any(|s| s.name == name)
    }

    /// Sum of `name` over samples whose labels pass `keep`; `None` when no sample has that name.
    pub fn sum_where(
        &self,
        name: &str,
        keep: impl Fn(&BTreeMap<String, String>) -> bool,
    ) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for sample in self.samples.iter().filter(|s| s.name == name) {
            found = true;
            if keep(&sample.labels) {
                total += sample.value;
            }
        }
        found.then_some(total)
    }

    /// Sum of `name` over all its samples.
    pub fn sum(&self, name: &str) -> Option<f64> {
        self.sum_where(name, |_| true)
    }

    /// `name` summed per value of the `engine` label (samples without it are left out).
    pub fn per_engine(&self, name: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for sample in self.samples.iter().filter(|s| s.name == name) {
            if let Some(engine) = sample.labels.get(ENGINE_LABEL) {
                *out.entry(engine.clone()).or_insert(0.0) += sample.value;
            }
        }
        out
    }

    /// Every `engine` label value on a `vllm:` series.
    pub fn engine_labels(&self) -> BTreeSet<String> {
        self.samples
            .iter()
            .filter(|s| s.name.starts_with("vllm:"))
            .filter_map(|s| s.labels.get(ENGINE_LABEL).cloned())
            .collect()
    }
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Bytes of the metric or label name `text` starts with (0 when it starts with none).
fn name_len(text: &str) -> usize {
    text.char_indices()
        .find(|&(i, c)| {
            !(if i == 0 {
                is_name_start(c)
            } else {
                is_name_char(c)
            })
        })
        .map_or(text.len(), |(i, _)| i)
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = name_len(line);
    if name_end == 0 {
        return Err(format!("expected a metric name, found {}", excerpt(line)));
    }
    let name = line[..name_end].to_owned();
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels)?;
    }
    let mut fields = rest.split_whitespace();
    let value_text = fields
        .next()
        .ok_or_else(|| format!("sample '{name}' has no value"))?;
    let value = parse_value(value_text).ok_or_else(|| {
        format!(
            "sample '{name}' has value {}, not a number",
            excerpt(value_text)
        )
    })?;
    if let Some(timestamp) = fields.next()
        && timestamp.parse::<i64>().is_err()
    {
        return Err(format!(
            "sample '{name}' has timestamp {}, not an integer",
            excerpt(timestamp)
        ));
    }
    if fields.next().is_some() {
        return Err(format!("sample '{name}' has text after its timestamp"));
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

/// Parses `name="value",...}` and returns what follows the closing brace.
fn parse_labels<'a>(
    mut text: &'a str,
    labels: &mut BTreeMap<String, String>,
) -> Result<&'a str, String> {
    loop {
        text = text.trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Ok(after);
        }
        let name_end = name_len(text);
        if name_end == 0 {
            return Err(format!("expected a label name, found {}", excerpt(text)));
        }
        let label = text[..name_end].to_owned();
        text = text[name_end..].trim_start();
        text = text
            .strip_prefix('=')
            .ok_or_else(|| format!("label '{label}' lacks '='"))?
            .trim_start();
        text = text
            .strip_prefix('"')
            .ok_or_else(|| format!("label '{label}' value is not quoted"))?;
        let mut value = String::new();
        let mut chars = text.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err(format!("label '{label}' value is not closed")),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, other)) => {
                        value.push('\\');
                        value.push(other);
                    }
                    None => return Err(format!("label '{label}' value ends in '\\'")),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.insert(label, value);
        text = text[end + 1..].trim_start();
        if let Some(after) = text.strip_prefix(',') {
            text = after;
        } else if !text.starts_with('}') {
            return Err(format!(
                "expected ',' or '}}' after a label, found {}",
                excerpt(text)
            ));
        }
    }
}

fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        other => other.parse::<f64>().ok().filter(|v| v.is_finite()),
    }
}

fn excerpt(text: &str) -> String {
    let shown: String = text.chars().take(30).collect();
    if shown.len() < text.len() {
        format!("'{shown}…'")
    } else {
        format!("'{shown}'")
    }
}

#[cfg(test)]
mod tests;
