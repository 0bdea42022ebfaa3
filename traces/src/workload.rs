//! Workload traces: per-request arrival times and token counts read from public LLM-serving traces.
//!
//! Three on-disk formats become one [`WorkloadTrace`] (DESIGN.md §7; the files and their quirks are
//! described in `research/traces.md` and in each `traces/data/workloads/*/SOURCE.md`):
//!
//! | [`TraceFormat`] | files | arrivals | quirks handled |
//! | --- | --- | --- | --- |
//! | `azure` | Azure LLM inference 2023/2024 CSV (`TIMESTAMP,ContextTokens,GeneratedTokens`) | wall clock, read as UTC | CRLF, no final newline, 7 fractional digits, optional `Z`/`±HH:MM` suffix |
//! | `mooncake` | Mooncake FAST'25 JSON lines (`timestamp`, `input_length`, `output_length`, `hash_ids`) | milliseconds from the trace start | integer or fractional ms, unknown keys ignored |
//! | `lengths` | token-count CSV (Sarathi-Serve ShareGPT, Vidur arXiv: `num_prefill_tokens,num_decode_tokens,…`) | none, unless an `arrived_at` column (seconds) is present | `num_total_tokens`, when present, must equal the sum |
//!
//! Every reader strips a UTF-8 byte-order mark, accepts LF or CRLF, with or without a final newline,
//! skips blank lines, and finds CSV columns by header name, so column order does not matter.
//!
//! Decisions, applied the same way to every format:
//! - Arrivals must be in file order, non-decreasing. A request earlier than the one before it is
//!   rejected with both lines named rather than sorted: every shipped trace is sorted, and a file
//!   out of order is more likely mangled (two files concatenated, a wrong column) than meant.
//!   Equal arrivals (the Mooncake conversation trace has about ten per 3 s tick) keep file order.
//! - Arrivals are made relative to the first request and rounded to the nearest microsecond.
//! - A request with zero input tokens or zero output tokens is rejected: vLLM cannot serve an
//!   empty prompt and always generates at least one token.
//! - An empty trace (no request rows) is an error.
//!
//! This module does not sample, scale, jitter or synthesise workloads; the simulator does that.

use std::{fmt, num::IntErrorKind, path::Path, str::FromStr};

use crate::input::{InputError, InputKind};

mod azure;
mod lengths;
mod mooncake;

/// Tokens covered by one Mooncake prefix-hash block (`hash_ids` entry), per the FAST'25 release.
pub const MOONCAKE_BLOCK_TOKENS: u32 = 512;

/// A workload read from a trace file: requests in arrival order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadTrace {
    /// File stem or the name given to [`read_trace`].
    pub name: String,
    pub format: TraceFormat,
    /// Invariant: non-empty, `arrival_us` non-decreasing, first `arrival_us` is 0.
    pub requests: Vec<TraceRequest>,
    /// False for length-only sets: every `arrival_us` is then 0 and the caller draws arrivals.
    pub has_arrivals: bool,
}

/// One request of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// Microseconds after the first request of the trace; 0 when the trace has no arrivals.
    pub arrival_us: u64,
    /// Prompt length in tokens, at least 1.
    pub input_tokens: u32,
    /// Generated length in tokens, at least 1.
    pub output_tokens: u32,
    /// Mooncake `hash_ids`: one id per [`MOONCAKE_BLOCK_TOKENS`]-token prompt block; requests share
    /// prefix KV cache as far as their leading ids agree. Empty for formats without them.
    pub prefix_blocks: Vec<u32>,
}

/// Which reader a trace file needs; parsed from `azure`, `mooncake` or `lengths`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TraceFormat {
    /// Azure LLM inference CSV: `TIMESTAMP,ContextTokens,GeneratedTokens`.
    Azure,
    /// Mooncake FAST'25 JSON lines.
    Mooncake,
    /// Token-count CSV with `num_prefill_tokens,num_decode_tokens` (optional `arrived_at`, seconds).
    Lengths,
}

/// Figures of a trace, for reports and checks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceSummary {
    pub n_requests: usize,
    /// Last arrival minus first, microseconds; 0 without arrivals.
    pub span_us: u64,
    pub mean_input_tokens: f64,
    pub mean_output_tokens: f64,
    pub max_input_tokens: u32,
    pub max_output_tokens: u32,
}

/// Why a trace could not be read. Every variant names the file; all but `Io` and `Empty` name the
/// line (1-based), and field errors name the column and the offending value.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read trace {file}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}: not UTF-8 text (invalid byte at column {column})")]
    NotUtf8 {
        file: String,
        line: u64,
        column: u64,
    },
    #[error(
        "trace {file} exceeds the size limit of {limit_mib} MiB (raise it with --max-trace-mib)"
    )]
    TooLarge { file: String, limit_mib: u64 },
    #[error("{file}:{line}: not text (a NUL byte at column {column})")]
    Binary {
        file: String,
        line: u64,
        column: u64,
    },
    #[error("{file}: empty trace: no requests")]
    Empty { file: String },
    #[error(
        "{file}:{line}: cannot tell the trace format from {first_line:?}; expected an Azure header \
         (TIMESTAMP,ContextTokens,GeneratedTokens), a token-count header (num_prefill_tokens,\
         num_decode_tokens,...) or Mooncake JSON lines; name the format explicitly"
    )]
    UnknownFormat {
        file: String,
        line: u64,
        first_line: String,
    },
    #[error("{file}:{line}: missing column {column:?} in header {header:?}")]
    MissingColumn {
        file: String,
        line: u64,
        column: &'static str,
        header: Vec<String>,
    },
    #[error("{file}:{line}: row has {found} fields, the header has {expected}")]
    FieldCount {
        file: String,
        line: u64,
        found: usize,
        expected: usize,
    },
    #[error("{file}:{line}: field {field} = {value:?}: {problem}")]
    BadField {
        file: String,
        line: u64,
        field: String,
        value: String,
        problem: String,
    },
    #[error("{file}:{line}:{column}: {message}")]
    BadJson {
        file: String,
        line: u64,
        column: u64,
        message: String,
    },
    #[error(
        "{file}:{line}: arrival {value} is earlier than {previous} on line {previous_line}; \
         requests must be in arrival order"
    )]
    OutOfOrder {
        file: String,
        line: u64,
        value: String,
        previous: String,
        previous_line: u64,
    },
    #[error("{file}:{line}: malformed CSV: {message}")]
    Csv {
        file: String,
        line: u64,
        message: String,
    },
}

/// A format name that is not one of [`TraceFormat::NAMES`].
#[derive(Debug, thiserror::Error)]
#[error("unknown trace format {0:?}; expected one of azure, mooncake, lengths")]
pub struct UnknownTraceFormat(pub String);

/// Reads a trace from text. `name` labels errors and becomes [`WorkloadTrace::name`]; `format`
/// overrides detection from the first non-blank line.
pub fn read_trace(
    text: &str,
    name: &str,
    format: Option<TraceFormat>,
) -> Result<WorkloadTrace, TraceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = match format {
        Some(format) => format,
        None => TraceFormat::detect(text, name)?,
    };
    let (requests, has_arrivals) = match format {
        TraceFormat::Azure => (azure::read(text, name)?, true),
        TraceFormat::Mooncake => (mooncake::read(text, name)?, true),
        TraceFormat::Lengths => lengths::read(text, name)?,
    };
    if requests.is_empty() {
        return Err(TraceError::Empty {
            file: name.to_owned(),
        });
    }
    Ok(WorkloadTrace {
        name: name.to_owned(),
        format,
        requests,
        has_arrivals,
    })
}

/// Reads a trace file of at most [`InputKind::TRACE`]'s size; errors carry the path, the trace is
/// named after the file stem.
pub fn read_trace_file(
    path: &Path,
    format: Option<TraceFormat>,
) -> Result<WorkloadTrace, TraceError> {
    read_trace_file_within(path, format, InputKind::TRACE.limit_bytes)
}

/// As [`read_trace_file`], refusing a file larger than `limit_bytes` (read at most one byte past it,
/// so an endless file such as `/dev/zero` ends in an error).
pub fn read_trace_file_within(
    path: &Path,
    format: Option<TraceFormat>,
    limit_bytes: u64,
) -> Result<WorkloadTrace, TraceError> {
    let file = path.display().to_string();
    let kind = InputKind::new(InputKind::TRACE.name, limit_bytes);
    let text = crate::input::read_text(path, kind).map_err(|err| match err {
        InputError::Io { source, .. } => TraceError::Io {
            file: file.clone(),
            source,
        },
        InputError::NotUtf8 { line, column, .. } => TraceError::NotUtf8 {
            file: file.clone(),
            line,
            column,
        },
        InputError::Binary { line, column, .. } => TraceError::Binary {
            file: file.clone(),
            line,
            column,
        },
        InputError::TooLarge { limit_bytes, .. } => TraceError::TooLarge {
            file: file.clone(),
            limit_mib: limit_bytes >> 20,
        },
    })?;
    let mut trace = read_trace(&text, &file, format)?;
    trace.name = path
        .file_stem()
        .map_or_else(|| file.clone(), |stem| stem.to_string_lossy().into_owned());
    Ok(trace)
}

impl WorkloadTrace {
    /// Request count, span and token means of the trace.
    pub fn summary(&self) -> TraceSummary {
        let n = self.requests.len();
        let sum = |f: fn(&TraceRequest) -> u32| -> f64 {
            self.requests.iter().map(|r| u64::from(f(r))).sum::<u64>() as f64
        };
        let max = |f: fn(&TraceRequest) -> u32| self.requests.iter().map(f).max().unwrap_or(0);
        TraceSummary {
            n_requests: n,
            span_us: self.requests.last().map_or(0, |r| r.arrival_us),
            mean_input_tokens: sum(|r| r.input_tokens) / n.max(1) as f64,
            mean_output_tokens: sum(|r| r.output_tokens) / n.max(1) as f64,
            max_input_tokens: max(|r| r.input_tokens),
            max_output_tokens: max(|r| r.output_tokens),
        }
    }
}

impl TraceError {
    /// The 1-based line the error points at, when it points at one.
    pub fn line(&self) -> Option<u64> {
        match self {
            TraceError::Io { .. } | TraceError::TooLarge { .. } | TraceError::Empty { .. } => None,
            TraceError::NotUtf8 { line, .. }
            | TraceError::Binary { line, .. }
            | TraceError::UnknownFormat { line, .. }
            | TraceError::MissingColumn { line, .. }
            | TraceError::FieldCount { line, .. }
            | TraceError::BadField { line, .. }
            | TraceError::BadJson { line, .. }
            | TraceError::OutOfOrder { line, .. }
            | TraceError::Csv { line, .. } => Some(*line),
        }
    }
}

impl TraceFormat {
    /// Names accepted by `FromStr`, in the order of the variants.
    pub const NAMES: [&'static str; 3] = ["azure", "mooncake", "lengths"];

    /// The format a trace's first non-blank line announces: a JSON object means Mooncake, a CSV
    /// header is recognised by its column names.
    pub fn detect(text: &str, file: &str) -> Result<TraceFormat, TraceError> {
        let Some((line, _, first)) = first_content_line(text) else {
            return Err(TraceError::Empty {
                file: file.to_owned(),
            });
        };
        if first.starts_with('{') {
            return Ok(TraceFormat::Mooncake);
        }
        let columns: Vec<&str> = first
            .split(',')
            .map(|c| c.trim().trim_matches('"'))
            .collect();
        let has = |name: &str| columns.contains(&name);
        if has("TIMESTAMP") && has("ContextTokens") {
            Ok(TraceFormat::Azure)
        } else if has("num_prefill_tokens") {
            Ok(TraceFormat::Lengths)
        } else {
            Err(TraceError::UnknownFormat {
                file: file.to_owned(),
                line,
                first_line: first.chars().take(120).collect(),
            })
        }
    }

    /// The name `FromStr` accepts for this format.
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Azure => Self::NAMES[0],
            TraceFormat::Mooncake => Self::NAMES[1],
            TraceFormat::Lengths => Self::NAMES[2],
        }
    }
}

impl fmt::Display for TraceFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for TraceFormat {
    type Err = UnknownTraceFormat;

    fn from_str(s: &str) -> Result<TraceFormat, UnknownTraceFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "azure" => Ok(TraceFormat::Azure),
            "mooncake" => Ok(TraceFormat::Mooncake),
            "lengths" => Ok(TraceFormat::Lengths),
            _ => Err(UnknownTraceFormat(s.to_owned())),
        }
    }
}

/// The first line with non-whitespace content: its 1-based number, byte offset and trimmed text.
fn first_content_line(text: &str) -> Option<(u64, usize, &str)> {
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        if !line.trim().is_empty() {
            return Some((index as u64 + 1, offset, line.trim()));
        }
        offset += line.len();
    }
    None
}

/// Turns absolute arrival times (nanoseconds on any fixed origin) into microseconds after the
/// first request, rejecting a request earlier than its predecessor.
struct ArrivalClock<'f> {
    file: &'f str,
    first_ns: Option<i128>,
    // Invariant: `Some` once a request was pushed; holds its time, line and text as written.
    previous: Option<(i128, u64, String)>,
}

impl<'f> ArrivalClock<'f> {
    fn new(file: &'f str) -> ArrivalClock<'f> {
        ArrivalClock {
            file,
            first_ns: None,
            previous: None,
        }
    }

    /// Microseconds since the first arrival for a request at `ns`, written as `text` on `line`.
    fn push(&mut self, ns: i128, line: u64, text: &str) -> Result<u64, TraceError> {
        if let Some((previous_ns, previous_line, previous)) = &self.previous
            && ns < *previous_ns
        {
            return Err(TraceError::OutOfOrder {
                file: self.file.to_owned(),
                line,
                value: text.to_owned(),
                previous: previous.clone(),
                previous_line: *previous_line,
            });
        }
        let first_ns = *self.first_ns.get_or_insert(ns);
        let offset_us = (ns - first_ns + 500) / 1000;
        let arrival_us = u64::try_from(offset_us).map_err(|_| TraceError::BadField {
            file: self.file.to_owned(),
            line,
            field: "arrival".to_owned(),
            value: text.to_owned(),
            problem: "more than 2^64 microseconds after the first request".to_owned(),
        })?;
        match &mut self.previous {
            Some(previous) => {
                previous.0 = ns;
                previous.1 = line;
                previous.2.clear();
                previous.2.push_str(text);
            }
            None => self.previous = Some((ns, line, text.to_owned())),
        }
        Ok(arrival_us)
    }
}

/// Parses a token count, which must be a whole number of at least 1.
fn parse_tokens(file: &str, line: u64, field: &str, value: &str) -> Result<u32, TraceError> {
    let bad = |problem: &str| TraceError::BadField {
        file: file.to_owned(),
        line,
        field: field.to_owned(),
        value: value.to_owned(),
        problem: problem.to_owned(),
    };
    match value.parse::<u32>() {
        Ok(0) => Err(bad("must be at least 1 token")),
        Ok(tokens) => Ok(tokens),
        Err(err) => Err(bad(match err.kind() {
            IntErrorKind::Empty => "empty; expected a token count",
            IntErrorKind::PosOverflow => "too large; at most 4294967295 tokens",
            _ => "not a whole number of tokens",
        })),
    }
}

/// Parses seconds as written in a CSV (`arrived_at`) into nanoseconds.
fn parse_seconds_ns(file: &str, line: u64, field: &str, value: &str) -> Result<i128, TraceError> {
    let seconds: f64 = value.parse().map_err(|_| TraceError::BadField {
        file: file.to_owned(),
        line,
        field: field.to_owned(),
        value: value.to_owned(),
        problem: "not a number of seconds".to_owned(),
    })?;
    finite_nonnegative_ns(file, line, field, value, seconds * 1e9)
}

/// Checks a time already scaled to nanoseconds and rounds it to an integer.
fn finite_nonnegative_ns(
    file: &str,
    line: u64,
    field: &str,
    value: &str,
    ns: f64,
) -> Result<i128, TraceError> {
    // 1e30 ns is about 3e13 years: far beyond any trace, and well inside i128.
    if ns.is_finite() && (0.0..1e30).contains(&ns) {
        Ok(ns.round() as i128)
    } else {
        Err(TraceError::BadField {
            file: file.to_owned(),
            line,
            field: field.to_owned(),
            value: value.to_owned(),
            problem: "must be a finite time, not negative".to_owned(),
        })
    }
}

/// CSV plumbing shared by the Azure and token-count readers: a lenient reader (row lengths are
/// checked here, with a better message), column lookup by header name, and line numbers counted
/// here because the `csv` crate's own count drifts after CRLF line endings.
struct CsvTable<'t> {
    file: &'t str,
    reader: csv::Reader<&'t [u8]>,
    header: Vec<String>,
    header_line: u64,
    lines: LineCounter<'t>,
}

impl<'t> CsvTable<'t> {
    fn new(text: &'t str, file: &'t str) -> Result<CsvTable<'t>, TraceError> {
        // Start at the header: blank lines before it would otherwise be taken for the header.
        let (header_line, start) =
            first_content_line(text).map_or((1, 0), |(line, at, _)| (line, at));
        let bytes = &text.as_bytes()[start..];
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(bytes);
        let mut lines = LineCounter {
            bytes,
            byte: 0,
            line: header_line,
        };
        let header = match reader.headers() {
            Ok(header) => header.iter().map(str::to_owned).collect(),
            Err(err) => return Err(csv_error(file, &mut lines, &err)),
        };
        Ok(CsvTable {
            file,
            reader,
            header,
            header_line,
            lines,
        })
    }

    /// Index of a required column.
    fn column(&self, name: &'static str) -> Result<usize, TraceError> {
        self.optional_column(name)
            .ok_or_else(|| TraceError::MissingColumn {
                file: self.file.to_owned(),
                line: self.header_line,
                column: name,
                header: self.header.clone(),
            })
    }

    fn optional_column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|column| column == name)
    }

    /// Calls `row` with each non-blank record and its 1-based line, after checking the field count.
    fn for_each_row(
        mut self,
        mut row: impl FnMut(&csv::StringRecord, u64) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        let mut record = csv::StringRecord::new();
        loop {
            match self.reader.read_record(&mut record) {
                Ok(false) => return Ok(()),
                Ok(true) => {}
                Err(err) => return Err(csv_error(self.file, &mut self.lines, &err)),
            }
            let line = self
                .lines
                .line_at(record.position().map_or(0, csv::Position::byte) as usize);
            if record.len() == 1 && record[0].is_empty() {
                continue;
            }
            if record.len() != self.header.len() {
                return Err(TraceError::FieldCount {
                    file: self.file.to_owned(),
                    line,
                    found: record.len(),
                    expected: self.header.len(),
                });
            }
            row(&record, line)?;
        }
    }
}

/// Maps byte offsets, visited in increasing order, to 1-based line numbers.
struct LineCounter<'t> {
    bytes: &'t [u8],
    // Invariant: `line` is the line that holds `byte`.
    byte: usize,
    line: u64,
}

impl LineCounter<'_> {
    /// The line of the first character at or after `byte` that is not a line break.
    fn line_at(&mut self, byte: usize) -> u64 {
        let mut byte = byte.clamp(self.byte, self.bytes.len());
        while matches!(self.bytes.get(byte), Some(b'\r' | b'\n')) {
            byte += 1;
        }
        let breaks = self.bytes[self.byte..byte]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.line += breaks as u64;
        self.byte = byte;
        self.line
    }
}

fn csv_error(file: &str, lines: &mut LineCounter<'_>, err: &csv::Error) -> TraceError {
    TraceError::Csv {
        file: file.to_owned(),
        line: lines.line_at(err.position().map_or(0, csv::Position::byte) as usize),
        message: err.to_string(),
    }
}

#[cfg(test)]
mod tests;
