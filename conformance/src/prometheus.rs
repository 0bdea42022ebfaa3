//! The Prometheus text exposition format (0.0.4) as vLLM's `/metrics` serves it: one tokenizer for sample
//! lines, and the sums the routing checks and the load generator need (per engine, over label filters).
//!
//! Two entry points share the tokenizer. [`Scrape::parse`] is strict: a line that is not a comment or a
//! well-formed sample is an error with its line number, so the suite never judges a silently wrong
//! number. [`Scrape::parse_lenient`] skips such lines, so the load generator's report survives a server
//! that mixes odd lines into its output. Nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet};

/// Longest exposition [`Scrape::parse`] accepts (a scrape of a healthy server is a few hundred KiB).
pub const MAX_TEXT_BYTES: usize = 32 << 20;

/// One sample: `name{labels} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Sample {
    /// The value of label `key`, if the sample has it.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// Why an exposition could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("/metrics line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Every sample of a scrape, in the order served.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

/// The label vLLM puts the DP engine index in.
pub const ENGINE_LABEL: &str = "engine";

impl Scrape {
    /// Parses a whole exposition; the first line that is neither blank, a comment nor a sample is an
    /// error naming it.
    pub fn parse(text: &str) -> Result<Scrape, ParseError> {
        if text.len() > MAX_TEXT_BYTES {
            return Err(ParseError {
                line: 0,
                message: format!("exposition larger than {MAX_TEXT_BYTES} bytes"),
            });
        }
        let mut samples = Vec::new();
        for (n, line) in sample_lines(text) {
            samples.push(parse_sample(line).map_err(|message| ParseError { line: n, message })?);
        }
        Ok(Scrape { samples })
    }

    /// Parses what it can: lines [`Scrape::parse`] would reject are skipped. Never fails.
    pub fn parse_lenient(text: &str) -> Scrape {
        Scrape {
            samples: sample_lines(text)
                .filter_map(|(_, line)| parse_sample(line).ok())
                .collect(),
        }
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

    /// Sum of `name` over all its samples; `None` when no sample has that name.
    pub fn sum(&self, name: &str) -> Option<f64> {
        self.sum_where(name, |_| true)
    }

    /// `name` summed per value of label `key` (samples without it are left out), numeric values in
    /// numeric order (`engine="10"` after `"9"`), then the others by text.
    pub fn sum_by(&self, name: &str, key: &str) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = self.by_label(name, key).into_iter().collect();
        out.sort_by(|a, b| natural(&a.0).cmp(&natural(&b.0)).then(a.0.cmp(&b.0)));
        out
    }

    /// The distinct values of label `key` on samples named `name`, in [`Scrape::sum_by`]'s order.
    pub fn label_values(&self, name: &str, key: &str) -> Vec<String> {
        self.sum_by(name, key).into_iter().map(|(l, _)| l).collect()
    }

    /// `name` summed per value of the `engine` label (samples without it are left out).
    pub fn per_engine(&self, name: &str) -> BTreeMap<String, f64> {
        self.by_label(name, ENGINE_LABEL)
    }

    /// Every `engine` label value on a `vllm:` series.
    pub fn engine_labels(&self) -> BTreeSet<String> {
        self.samples
            .iter()
            .filter(|s| s.name.starts_with("vllm:"))
            .filter_map(|s| s.labels.get(ENGINE_LABEL).cloned())
            .collect()
    }

    fn by_label(&self, name: &str, key: &str) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for sample in self.samples.iter().filter(|s| s.name == name) {
            if let Some(value) = sample.labels.get(key) {
                *out.entry(value.clone()).or_insert(0.0) += sample.value;
            }
        }
        out
    }
}

/// Numeric labels sort as numbers, before the others.
fn natural(label: &str) -> (u8, u64) {
    match label.parse::<u64>() {
        Ok(n) => (0, n),
        Err(_) => (1, 0),
    }
}

/// The lines that should hold a sample, numbered from 1 and trimmed: not blank, not a comment.
fn sample_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(n, raw)| (n + 1, raw.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
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
