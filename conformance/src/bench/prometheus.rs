//! A reader for the Prometheus text exposition format as vLLM serves it on `/metrics`: samples with their
//! labels, and the sums the conservation checks need. Comments and unparsable lines are skipped; the
//! reader never fails on a server's output.

/// One sample line: `name{label="value",...} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Every sample of a scrape, in the order served.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scrape {
    pub samples: Vec<Sample>,
}

impl Scrape {
    pub fn parse(text: &str) -> Scrape {
        Scrape {
            samples: text.lines().filter_map(parse_line).collect(),
        }
    }

    /// Sum of every sample named `name` (all label values).
    pub fn sum(&self, name: &str) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .map(|s| s.value)
            .sum()
    }

    /// Sum of `name` per value of label `key`, sorted by label value.
    pub fn sum_by(&self, name: &str, key: &str) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = Vec::new();
        for s in self.samples.iter().filter(|s| s.name == name) {
            let label = s.label(key).unwrap_or("").to_owned();
            match out.iter_mut().find(|(l, _)| *l == label) {
                Some((_, total)) => *total += s.value,
                None => out.push((label, s.value)),
            }
        }
        out.sort_by(|a, b| natural(&a.0).cmp(&natural(&b.0)).then(a.0.cmp(&b.0)));
        out
    }

    /// The distinct values of label `key` on samples named `name`, sorted.
    pub fn label_values(&self, name: &str, key: &str) -> Vec<String> {
        self.sum_by(name, key).into_iter().map(|(l, _)| l).collect()
    }
}

/// Numeric labels sort as numbers (`engine="10"` after `"9"`).
fn natural(label: &str) -> (u8, u64) {
    match label.parse::<u64>() {
        Ok(n) => (0, n),
        Err(_) => (1, 0),
    }
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (name, labels, rest) = match line.find('{') {
        Some(open) => {
            let close = line.rfind('}')?;
            if close < open {
                return None;
            }
            (
                &line[..open],
                parse_labels(&line[open + 1..close])?,
                &line[close + 1..],
            )
        }
        None => {
            let split = line.find(char::is_whitespace)?;
            (&line[..split], Vec::new(), &line[split..])
        }
    };
    let value_text = rest.split_whitespace().next()?;
    let value = match value_text {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other.parse().ok()?,
    };
    Some(Sample {
        name: name.trim().to_owned(),
        labels,
        value,
    })
}

fn parse_labels(text: &str) -> Option<Vec<(String, String)>> {
    let mut labels = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| *c == ',' || c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(labels);
        }
        let mut key = String::new();
        for c in chars.by_ref() {
            if c == '=' {
                break;
            }
            key.push(c);
        }
        if chars.next()? != '"' {
            return None;
        }
        let mut value = String::new();
        loop {
            match chars.next()? {
                '\\' => match chars.next()? {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        labels.push((key.trim().to_owned(), value));
    }
}

#[cfg(test)]
mod tests;
