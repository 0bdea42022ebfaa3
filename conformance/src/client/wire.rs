//! HTTP/1.1 on the wire, as pure functions over bytes: encoding a request, reading a response head, and
//! decoding a body framed by `Content-Length`, `chunked` or the end of the connection.
//!
//! The suite speaks HTTP itself so it sees what a library would hide: a connection closed before any
//! response, bytes after a complete response (a duplicate), a body that drips in. Nothing here does I/O
//! or keeps time; [`crate::client`] does. Every input, however mangled, ends in a value or a
//! [`WireError`], never a panic.

/// Largest response head accepted; a longer one is garbage, not a reason to allocate.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header lines accepted in one head.
pub const MAX_HEADERS: usize = 128;
/// Longest chunk-size or trailer line accepted.
pub const MAX_LINE_BYTES: usize = 4096;

/// What went wrong reading a response off the wire.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    #[error("response head is not HTTP/1.x: {0}")]
    BadHead(String),
    #[error("response head exceeds {MAX_HEAD_BYTES} bytes without ending")]
    HeadTooLong,
    #[error("bad Content-Length '{0}'")]
    BadContentLength(String),
    #[error("both Content-Length and Transfer-Encoding: chunked")]
    ConflictingFraming,
    #[error("unsupported Transfer-Encoding '{0}'")]
    UnsupportedEncoding(String),
    #[error("bad chunk size line '{0}'")]
    BadChunkSize(String),
    #[error("chunk data not followed by CRLF")]
    MissingChunkCrlf,
    #[error("chunk-size or trailer line longer than {MAX_LINE_BYTES} bytes")]
    LineTooLong,
    #[error("connection closed {0}")]
    Truncated(&'static str),
}

/// Status line and headers of a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    pub reason: String,
    /// In wire order; names as sent.
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Reads a response head from the start of `buf`: `Ok(None)` while it is incomplete, else the head and
/// the number of bytes it took.
pub fn parse_head(buf: &[u8]) -> Result<Option<(ResponseHead, usize)>, WireError> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    match response.parse(buf) {
        Ok(httparse::Status::Complete(consumed)) => {
            let status = response
                .code
                .ok_or_else(|| WireError::BadHead("no status code".to_owned()))?;
            let head = ResponseHead {
                status,
                reason: response.reason.unwrap_or("").to_owned(),
                headers: response
                    .headers
                    .iter()
                    .map(|h| {
                        (
                            h.name.to_owned(),
                            String::from_utf8_lossy(h.value).into_owned(),
                        )
                    })
                    .collect(),
            };
            Ok(Some((head, consumed)))
        }
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => Err(WireError::HeadTooLong),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(err) => Err(WireError::BadHead(format!(
            "{err} (first bytes: {})",
            printable_prefix(buf, 40)
        ))),
    }
}

/// Up to `n` bytes of `buf` as escaped text, for error messages about garbage.
pub fn printable_prefix(buf: &[u8], n: usize) -> String {
    let shown = &buf[..buf.len().min(n)];
    let mut text: String = shown.escape_ascii().to_string();
    if buf.len() > n {
        text.push('…');
    }
    format!("\"{text}\"")
}

/// How a response body ends (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body (1xx, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Until the server closes the connection.
    UntilClose,
}

/// The framing a response head announces.
pub fn framing(head: &ResponseHead) -> Result<Framing, WireError> {
    if head.status < 200 || head.status == 204 || head.status == 304 {
        return Ok(Framing::Empty);
    }
    let chunked = match head.header("transfer-encoding") {
        None => false,
        Some(value) => {
            let last = value.rsplit(',').next().unwrap_or("").trim();
            if last.eq_ignore_ascii_case("chunked") {
                true
            } else {
                return Err(WireError::UnsupportedEncoding(value.to_owned()));
            }
        }
    };
    let length = head.header("content-length");
    match (chunked, length) {
        (true, Some(_)) => Err(WireError::ConflictingFraming),
        (true, None) => Ok(Framing::Chunked),
        (false, Some(text)) => text
            .trim()
            .parse::<u64>()
            .map(Framing::Length)
            .map_err(|_| WireError::BadContentLength(text.to_owned())),
        (false, None) => Ok(Framing::UntilClose),
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ChunkState {
    /// Reading a chunk-size line.
    Size(Vec<u8>),
    /// Inside chunk data, this many bytes left.
    Data(u64),
    /// After chunk data, this many bytes of CRLF seen.
    DataEnd(u8),
    /// Reading trailer lines after the last chunk.
    Trailer(Vec<u8>),
    Done,
}

/// Incremental body decoder for one response.
///
/// Invariant: once [`BodyDecoder::is_complete`] is true, [`BodyDecoder::push`] consumes nothing more, so
/// the caller sees every byte after the body as trailing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyDecoder {
    framing: Framing,
    /// Bytes left for `Length`.
    remaining: u64,
    chunk: ChunkState,
    complete: bool,
}

impl BodyDecoder {
    pub fn new(framing: Framing) -> BodyDecoder {
        let (remaining, complete) = match framing {
            Framing::Empty => (0, true),
            Framing::Length(n) => (n, n == 0),
            Framing::Chunked | Framing::UntilClose => (0, false),
        };
        BodyDecoder {
            framing,
            remaining,
            chunk: ChunkState::Size(Vec::new()),
            complete,
        }
    }

    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// True once the body has ended by its own framing (never for `UntilClose` before EOF).
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// Decodes from `input`, appending body bytes to `out`; returns how many input bytes it consumed.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, WireError> {
        if self.complete {
            return Ok(0);
        }
        match self.framing {
            Framing::Empty => Ok(0),
            Framing::UntilClose => {
                out.extend_from_slice(input);
                Ok(input.len())
            }
            Framing::Length(_) => {
                let take = usize::try_from(self.remaining)
                    .unwrap_or(usize::MAX)
                    .min(input.len());
                out.extend_from_slice(&input[..take]);
                self.remaining -= take as u64;
                self.complete = self.remaining == 0;
                Ok(take)
            }
            Framing::Chunked => self.push_chunked(input, out),
        }
    }

    fn push_chunked(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, WireError> {
        let mut at = 0;
        while at < input.len() && !self.complete {
            match &mut self.chunk {
                ChunkState::Size(line) => {
                    let byte = input[at];
                    at += 1;
                    if byte == b'\n' {
                        let size = parse_chunk_size(line)?;
                        self.chunk = if size == 0 {
                            ChunkState::Trailer(Vec::new())
                        } else {
                            ChunkState::Data(size)
                        };
                    } else {
                        if line.len() >= MAX_LINE_BYTES {
                            return Err(WireError::LineTooLong);
                        }
                        line.push(byte);
                    }
                }
                ChunkState::Data(left) => {
                    let take = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(input.len() - at);
                    out.extend_from_slice(&input[at..at + take]);
                    at += take;
                    *left -= take as u64;
                    if *left == 0 {
                        self.chunk = ChunkState::DataEnd(0);
                    }
                }
                ChunkState::DataEnd(seen) => {
                    let byte = input[at];
                    at += 1;
                    match (*seen, byte) {
                        (0, b'\r') => *seen = 1,
                        (0 | 1, b'\n') => self.chunk = ChunkState::Size(Vec::new()),
                        _ => return Err(WireError::MissingChunkCrlf),
                    }
                }
                ChunkState::Trailer(line) => {
                    let byte = input[at];
                    at += 1;
                    if byte == b'\n' {
                        let blank = line.iter().all(|&b| b == b'\r');
                        if blank {
                            self.chunk = ChunkState::Done;
                            self.complete = true;
                        } else {
                            line.clear();
                        }
                    } else {
                        if line.len() >= MAX_LINE_BYTES {
                            return Err(WireError::LineTooLong);
                        }
                        line.push(byte);
                    }
                }
                ChunkState::Done => self.complete = true,
            }
        }
        Ok(at)
    }

    /// The connection ended: completes an `UntilClose` body, or says the body was cut short.
    pub fn on_eof(&mut self) -> Result<(), WireError> {
        if self.complete {
            return Ok(());
        }
        match self.framing {
            Framing::UntilClose => {
                self.complete = true;
                Ok(())
            }
            Framing::Length(_) => Err(WireError::Truncated("before Content-Length bytes arrived")),
            Framing::Chunked => Err(WireError::Truncated("before the last chunk")),
            Framing::Empty => Ok(()),
        }
    }
}

fn parse_chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let lossy = String::from_utf8_lossy(line);
    let text = lossy.trim_end_matches('\r');
    let size_text = text.split(';').next().unwrap_or("").trim();
    if size_text.is_empty() || size_text.len() > 16 {
        return Err(WireError::BadChunkSize(text.to_owned()));
    }
    u64::from_str_radix(size_text, 16).map_err(|_| WireError::BadChunkSize(text.to_owned()))
}

/// The bytes of one request. Every request asks for `Connection: close`, so each gets a fresh
/// connection (on a shared `SO_REUSEPORT` port the kernel picks a listener per connection, afd-spec §6.4).
pub fn encode_request(
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    out.extend_from_slice(
        concat!(
            "User-Agent: afd-conformance/",
            env!("CARGO_PKG_VERSION"),
            "\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(b"Accept: */*\r\nConnection: close\r\n");
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    if !body.is_empty() || method == "POST" {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests;
