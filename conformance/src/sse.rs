//! Server-sent events as OpenAI-compatible servers stream them: an incremental parser that splits a body
//! into events and records every deviation from the `text/event-stream` framing it meets.
//!
//! Lines end in LF, CRLF or CR; a blank line ends an event; `data:` lines are joined with newlines;
//! `:` lines are comments. The parser never fails: framing problems are collected in
//! [`SseParser::problems`] so a check can report them. What the events mean (chunks, `[DONE]`) is judged
//! in `checks::streaming`.

/// Longest line kept; the rest of a longer line is dropped and reported.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The `event:` field, if any.
    pub event: Option<String>,
}

/// Incremental parser. Feed it body bytes as they arrive.
#[derive(Clone, Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    line_overflow: bool,
    /// The previous byte was a CR, so an LF right after it ends nothing new.
    after_cr: bool,
    data: Vec<String>,
    event: Option<String>,
    /// Any field seen since the last dispatch (an event with only `event:` still counts as started).
    started: bool,
    problems: Vec<String>,
    lines_seen: usize,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Parses `bytes` and returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    let overflow = std::mem::replace(&mut self.line_overflow, false);
                    events.extend(self.on_line(&line, overflow));
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() < MAX_LINE_BYTES {
                        self.line.push(byte);
                    } else {
                        self.line_overflow = true;
                    }
                }
            }
        }
        events
    }

    /// The body ended: reports an unterminated line or event. Events are only dispatched by a blank line,
    /// so a final event without one is reported and dropped, as a browser would.
    pub fn finish(&mut self) {
        if !self.line.is_empty() {
            self.problems.push(format!(
                "stream ended inside a line ({} bytes without a line end)",
                self.line.len()
            ));
            self.line.clear();
        }
        if self.started {
            self.problems.push(
                "stream ended inside an event (no blank line after its last field)".to_owned(),
            );
            self.data.clear();
            self.event = None;
            self.started = false;
        }
    }

    /// Framing problems seen so far, in order.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }

    fn on_line(&mut self, line: &[u8], overflow: bool) -> Option<SseEvent> {
        self.lines_seen += 1;
        if overflow {
            self.problems.push(format!(
                "line {} longer than {MAX_LINE_BYTES} bytes; truncated",
                self.lines_seen
            ));
        }
        if line.is_empty() {
            if !self.started {
                return None;
            }
            self.started = false;
            let event = SseEvent {
                data: self.data.join("\n"),
                event: self.event.take(),
            };
            self.data.clear();
            return Some(event);
        }
        if line[0] == b':' {
            return None;
        }
        let text = match std::str::from_utf8(line) {
            Ok(text) => text.to_owned(),
            Err(_) => {
                self.problems
                    .push(format!("line {} is not UTF-8", self.lines_seen));
                String::from_utf8_lossy(line).into_owned()
            }
        };
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_str(), ""),
        };
        self.started = true;
        match field {
            "data" => self.data.push(value.to_owned()),
            "event" => self.event = Some(value.to_owned()),
            "id" | "retry" => {}
            other => self.problems.push(format!(
                "line {}: unknown field '{}'",
                self.lines_seen,
                other.chars().take(40).collect::<String>()
            )),
        }
        None
    }
}

#[cfg(test)]
mod tests;
