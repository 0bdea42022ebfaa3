//! Mooncake FAST'25 JSON lines: `{"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}`.
//!
//! `timestamp` is milliseconds from the trace start (integers in the release; fractions accepted).
//! `hash_ids` may be absent (other tools write the same shape without it); unknown keys are ignored.
//! The reader does not check `len(hash_ids) == ceil(input_length / 512)`: it holds in both shipped
//! files (a test checks), but tools that write this format with another block size exist.

use serde::Deserialize;

use super::{ArrivalClock, TraceError, TraceRequest, finite_nonnegative_ns, parse_tokens};

#[derive(Deserialize)]
struct Row {
    timestamp: serde_json::Number,
    input_length: u64,
    output_length: u64,
    #[serde(default)]
    hash_ids: Vec<u32>,
}

pub(super) fn read(text: &str, file: &str) -> Result<Vec<TraceRequest>, TraceError> {
    let mut clock = ArrivalClock::new(file);
    let mut requests = Vec::new();
    for (index, line_text) in text.lines().enumerate() {
        let line = index as u64 + 1;
        if line_text.trim().is_empty() {
            continue;
        }
        let row = parse_row(file, line, line_text)?;
        let stamp = row.timestamp.to_string();
        let ns = match row.timestamp.as_u64() {
            Some(ms) => i128::from(ms) * 1_000_000,
            None => {
                let ms = row.timestamp.as_f64().unwrap_or(f64::NAN);
                finite_nonnegative_ns(file, line, "timestamp", &stamp, ms * 1e6)?
            }
        };
        requests.push(TraceRequest {
            arrival_us: clock.push(ns, line, &stamp)?,
            input_tokens: parse_tokens(file, line, "input_length", &row.input_length.to_string())?,
            output_tokens: parse_tokens(
                file,
                line,
                "output_length",
                &row.output_length.to_string(),
            )?,
            prefix_blocks: row.hash_ids,
        });
    }
    Ok(requests)
}

fn parse_row(file: &str, line: u64, text: &str) -> Result<Row, TraceError> {
    let deserializer = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        // serde_json appends " at line 1 column N", which counts within this one line only.
        let message = inner.to_string();
        let message = message
            .rfind(" at line ")
            .map_or(message.as_str(), |at| &message[..at]);
        let message = if path == "." {
            message.to_owned()
        } else {
            format!("field {path}: {message}")
        };
        TraceError::BadJson {
            file: file.to_owned(),
            line,
            column: inner.column() as u64,
            message,
        }
    })
}
