//! Field-by-field comparison of two recordings of the same exchange (real vLLM against `afd-twin`).
//!
//! Compared exactly: the status, the set of response header names and their values (bar `date` and
//! `content-length`), every JSON key at every depth, every string and number, and every stream event
//! in order. Left aside: what differs between any two runs of the same server (ids, timestamps,
//! generated text, token ids the model sampled, latencies; [`VOLATILE_KEYS`]), which are compared by
//! JSON type only. `/metrics` is compared as families: name, `# TYPE`, `# HELP` and the label names of
//! every sample, never values. Pure: the callers read the files.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// JSON keys whose values change from run to run (or with the weights); compared by type only.
pub const VOLATILE_KEYS: &[&str] = &[
    "id",
    "created",
    "system_fingerprint",
    "text",
    "content",
    "reasoning_content",
    "reasoning",
    "token_ids",
    "prompt_token_ids",
    "elapsed_ms",
];

/// Response headers whose values change from response to response; their presence is compared.
pub const VOLATILE_HEADERS: &[&str] = &["date", "content-length", "x-request-id"];

/// Metric families only the twin serves (docs/twin.md): allowed extra in the twin's `/metrics`.
pub const TWIN_ONLY_METRICS: &[&str] = &[crate::checks::simulator::TWIN_TIMING_METRIC];

/// The differences between `real` and `twin` recordings of one exchange (`exchange_json` documents),
/// each a line naming the place: empty when they agree.
pub fn differences(real: &Value, twin: &Value) -> Vec<String> {
    let mut out = Vec::new();
    match (real.get("response"), twin.get("response")) {
        (Some(r), Some(t)) => response(r, t, &mut out),
        (None, None) => {}
        (r, t) => out.push(format!(
            "response: real {}, twin {}",
            presence(r.is_some(), real.get("error")),
            presence(t.is_some(), twin.get("error"))
        )),
    }
    out
}

fn presence(has_response: bool, error: Option<&Value>) -> String {
    if has_response {
        "answered".to_owned()
    } else {
        format!("no response ({})", error.unwrap_or(&Value::Null))
    }
}

fn response(real: &Value, twin: &Value, out: &mut Vec<String>) {
    if real["status"] != twin["status"] {
        out.push(format!(
            "status: real {}, twin {}",
            real["status"], twin["status"]
        ));
    }
    headers(&real["headers"], &twin["headers"], out);
    if let (Some(r), Some(t)) = (real.get("events"), twin.get("events")) {
        events(r, t, out);
        return;
    }
    match (real.get("events"), twin.get("events")) {
        (Some(_), None) => out.push("body: real streams events, twin does not".to_owned()),
        (None, Some(_)) => out.push("body: twin streams events, real does not".to_owned()),
        _ => {}
    }
    let (rb, tb) = (&real["body"], &twin["body"]);
    match (
        rb.get("json"),
        tb.get("json"),
        rb.get("text"),
        tb.get("text"),
    ) {
        (Some(r), Some(t), _, _) => json("body", r, t, out),
        (None, None, Some(r), Some(t)) => {
            let (r, t) = (r.as_str().unwrap_or(""), t.as_str().unwrap_or(""));
            if looks_like_metrics(r) {
                metrics(r, t, out);
            } else if r != t {
                out.push(format!("body text: real {r:?}, twin {t:?}"));
            }
        }
        _ => out.push(format!("body: real {rb}, twin {tb}")),
    }
}

fn header_map(headers: &Value) -> BTreeMap<String, Vec<String>> {
    let mut map: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pair in headers.as_array().into_iter().flatten() {
        let name = pair[0].as_str().unwrap_or("").to_ascii_lowercase();
        let value = pair[1].as_str().unwrap_or("").to_owned();
        map.entry(name).or_default().push(value);
    }
    map
}

fn headers(real: &Value, twin: &Value, out: &mut Vec<String>) {
    let (real, twin) = (header_map(real), header_map(twin));
    for (name, values) in &real {
        match twin.get(name) {
            None => out.push(format!("header {name}: real {values:?}, twin has none")),
            Some(t) if !VOLATILE_HEADERS.contains(&name.as_str()) && t != values => {
                out.push(format!("header {name}: real {values:?}, twin {t:?}"));
            }
            Some(_) => {}
        }
    }
    for (name, values) in &twin {
        if !real.contains_key(name) {
            out.push(format!("header {name}: twin {values:?}, real has none"));
        }
    }
}

/// A value shown in a difference: scalars whole, containers by kind (their volatile insides would make
/// the line differ from run to run).
fn brief(key: &str, value: &Value) -> String {
    match value {
        _ if VOLATILE_KEYS.contains(&key) => kind(value).to_owned(),
        Value::Object(_) | Value::Array(_) => kind(value).to_owned(),
        Value::String(s) if s.len() > 80 => format!("a string of {} bytes", s.len()),
        other => other.to_string(),
    }
}

/// A stream's events in four parts: the chat role chunk, the text chunks before the finish, the chunk
/// that carries `finish_reason`, and what follows it (usage chunk, `[DONE]`).
struct StreamParts<'a> {
    head: Vec<&'a Value>,
    text: Vec<&'a Value>,
    finish: Vec<&'a Value>,
    tail: Vec<&'a Value>,
}

fn stream_parts(events: &[Value]) -> StreamParts<'_> {
    let mut parts = StreamParts {
        head: Vec::new(),
        text: Vec::new(),
        finish: Vec::new(),
        tail: Vec::new(),
    };
    for event in events {
        let choice = &event["data"]["json"]["choices"][0];
        if !parts.finish.is_empty() || choice.is_null() {
            parts.tail.push(event);
        } else if !choice["finish_reason"].is_null() {
            parts.finish.push(event);
        } else if !choice["delta"]["role"].is_null() && parts.text.is_empty() {
            parts.head.push(event);
        } else {
            parts.text.push(event);
        }
    }
    parts
}

/// Streams are compared part by part: vLLM sends one text chunk per engine output, and how many
/// tokens an output carries depends on timing (the last two tokens often arrive together), so the
/// number of text chunks is left aside; every text chunk is compared with the twin's first one.
fn events(real: &Value, twin: &Value, out: &mut Vec<String>) {
    let (real, twin) = (
        real.as_array().cloned().unwrap_or_default(),
        twin.as_array().cloned().unwrap_or_default(),
    );
    let (r, t) = (stream_parts(&real), stream_parts(&twin));
    for (name, rp, tp) in [
        ("role chunk", &r.head, &t.head),
        ("finish chunk", &r.finish, &t.finish),
        ("after the finish", &r.tail, &t.tail),
    ] {
        if rp.len() != tp.len() {
            out.push(format!(
                "events, {name}: real {} events, twin {}",
                rp.len(),
                tp.len()
            ));
        }
        for (i, (re, te)) in rp.iter().zip(tp.iter()).enumerate() {
            json(&format!("events, {name} {i}"), re, te, out);
        }
    }
    match (r.text.is_empty(), t.text.first()) {
        (false, None) => out.push("events: real has text chunks, twin none".to_owned()),
        (true, Some(_)) => out.push("events: twin has text chunks, real none".to_owned()),
        (false, Some(first)) => {
            let mut seen = BTreeSet::new();
            for re in &r.text {
                let mut lines = Vec::new();
                json("events, text chunk", re, first, &mut lines);
                for line in lines {
                    if seen.insert(line.clone()) {
                        out.push(line);
                    }
                }
            }
        }
        (true, None) => {}
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compares JSON values key by key; volatile keys by type only.
pub fn json(path: &str, real: &Value, twin: &Value, out: &mut Vec<String>) {
    let key = path.rsplit('.').next().unwrap_or(path);
    let key = key.split('[').next().unwrap_or(key);
    if VOLATILE_KEYS.contains(&key) {
        if kind(real) != kind(twin) && !(real.is_array() && twin.is_array()) {
            out.push(format!(
                "{path}: real is {} ({real}), twin is {} ({twin})",
                kind(real),
                kind(twin)
            ));
        }
        return;
    }
    match (real, twin) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, rv) in r {
                match t.get(k) {
                    Some(tv) => json(&format!("{path}.{k}"), rv, tv, out),
                    None => out.push(format!(
                        "{path}.{k}: real {}, twin has no such key",
                        brief(k, rv)
                    )),
                }
            }
            for (k, tv) in t {
                if !r.contains_key(k) {
                    out.push(format!(
                        "{path}.{k}: twin {}, real has no such key",
                        brief(k, tv)
                    ));
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            if r.len() != t.len() {
                out.push(format!(
                    "{path}: real has {} elements, twin {}",
                    r.len(),
                    t.len()
                ));
            }
            for (i, (rv, tv)) in r.iter().zip(t).enumerate() {
                json(&format!("{path}[{i}]"), rv, tv, out);
            }
        }
        (Value::Number(r), Value::Number(t))
            if r.as_f64() != t.as_f64() || kind(real) != kind(twin) =>
        {
            out.push(format!("{path}: real {r}, twin {t}"));
        }
        (Value::Number(_), Value::Number(_)) => {}
        (r, t) if r != t => out.push(format!("{path}: real {r}, twin {t}")),
        _ => {}
    }
}

fn looks_like_metrics(text: &str) -> bool {
    text.starts_with("# HELP") || text.starts_with("# TYPE")
}

/// One metric family as `/metrics` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Family {
    pub kind: Option<String>,
    pub help: Option<String>,
    /// Label names of each sample name of the family (`_bucket`, `_sum`, ... separately).
    pub samples: BTreeMap<String, BTreeSet<Vec<String>>>,
}

/// The families of an exposition, by name, values left out.
pub fn families(text: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            current = name.to_owned();
            out.entry(current.clone()).or_default().help = Some(help.to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            current = name.to_owned();
            out.entry(current.clone()).or_default().kind = Some(kind.to_owned());
        } else if line.starts_with('#') || line.trim().is_empty() {
        } else {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = &line[..name_end];
            let labels = label_names(&line[name_end..]);
            let family = if name.starts_with(current.as_str()) && !current.is_empty() {
                current.clone()
            } else {
                name.to_owned()
            };
            out.entry(family)
                .or_default()
                .samples
                .entry(name.to_owned())
                .or_default()
                .insert(labels);
        }
    }
    out
}

/// The label names of `{a="x",b="y"} 1`, in order.
fn label_names(rest: &str) -> Vec<String> {
    let Some(inner) = rest.strip_prefix('{') else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut chars = inner.chars().peekable();
    loop {
        let name: String = chars
            .by_ref()
            .skip_while(|c| *c == ',' || c.is_whitespace())
            .take_while(|c| *c != '=')
            .collect();
        if name.is_empty() || name.starts_with('}') {
            break;
        }
        names.push(name.trim().to_owned());
        // Skip the quoted value, honouring escapes.
        if chars.next() != Some('"') {
            break;
        }
        let mut escaped = false;
        for c in chars.by_ref() {
            match (escaped, c) {
                (false, '\\') => escaped = true,
                (false, '"') => break,
                _ => escaped = false,
            }
        }
        if chars.peek() == Some(&'}') {
            break;
        }
    }
    names.sort();
    names
}

fn metrics(real: &str, twin: &str, out: &mut Vec<String>) {
    let (real, twin) = (families(real), families(twin));
    for (name, family) in &real {
        match twin.get(name) {
            None => out.push(format!(
                "metrics {name}: real has it ({}), twin does not",
                family.kind.as_deref().unwrap_or("untyped")
            )),
            Some(t) => {
                if t.kind != family.kind {
                    out.push(format!(
                        "metrics {name}: TYPE real {:?}, twin {:?}",
                        family.kind, t.kind
                    ));
                }
                if t.help != family.help {
                    out.push(format!(
                        "metrics {name}: HELP real {:?}, twin {:?}",
                        family.help, t.help
                    ));
                }
                if t.samples != family.samples {
                    out.push(format!(
                        "metrics {name}: samples and label names real {:?}, twin {:?}",
                        family.samples, t.samples
                    ));
                }
            }
        }
    }
    for name in twin.keys() {
        if !real.contains_key(name) && !TWIN_ONLY_METRICS.contains(&name.as_str()) {
            out.push(format!("metrics {name}: twin has it, real does not"));
        }
    }
}
