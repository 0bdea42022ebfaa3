//! The suite's HTTP client: one fresh connection per request, a deadline on every step of every call, and
//! a typed account of how a call went wrong.
//!
//! A misbehaving server cannot crash or hang the suite: connecting, writing, reading the head and
//! reading the body all run against one deadline per call; bodies are capped; garbage becomes a
//! [`HttpError::Malformed`]; a reset or an early close becomes [`HttpError::Closed`]. After a complete
//! response the client keeps reading briefly, so bytes after it (a duplicate response) are caught in
//! [`Response::trailing`]. Only plain `http://` URLs are supported. Nothing here judges a response.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout_at};

use crate::client::wire::{BodyDecoder, ResponseHead, WireError};
use crate::sse::{SseEvent, SseParser};

pub mod wire;

/// A server the suite talks to: `http://host:port[/prefix]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
    /// Path prefix without a trailing slash (usually empty).
    pub prefix: String,
}

/// A URL the suite cannot use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid URL '{url}': {reason}")]
pub struct UrlError {
    pub url: String,
    pub reason: String,
}

impl Endpoint {
    /// Parses `http://host[:port][/prefix]` (port 80 when absent; IPv6 hosts in brackets).
    pub fn parse(url: &str) -> Result<Endpoint, UrlError> {
        let fail = |reason: &str| UrlError {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        let trimmed = url.trim();
        if trimmed.contains(char::is_whitespace) {
            return Err(fail("a URL holds no spaces (write %20)"));
        }
        let rest = if let Some(rest) = trimmed.strip_prefix("http://") {
            rest
        } else if trimmed.starts_with("https://") {
            return Err(fail(
                "https is not supported; point the suite at the server's plain HTTP port",
            ));
        } else {
            return Err(fail("expected http://HOST:PORT"));
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => (&rest[..at], &rest[at..]),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(fail("no host"));
        }
        if authority.contains('@') {
            return Err(fail("user information in the URL is not supported"));
        }
        let (host, port_text) = if let Some(inner) = authority.strip_prefix('[') {
            let Some((host, after)) = inner.split_once(']') else {
                return Err(fail("unclosed '[' in the host"));
            };
            let port = match after.strip_prefix(':') {
                Some(port) => Some(port),
                None if after.is_empty() => None,
                None => return Err(fail("expected ':PORT' after the bracketed host")),
            };
            if !host.chars().all(|c| c == ':' || host_char(c)) {
                return Err(fail("a bracketed host holds an IPv6 address only"));
            }
            (host, port)
        } else {
            let (host, port) = match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            };
            if host.contains(':') {
                return Err(fail("an IPv6 host goes in brackets: http://[::1]:PORT"));
            }
            (host, port)
        };
        if host.is_empty() {
            return Err(fail("no host"));
        }
        if let Some(bad) = host.chars().find(|&c| c != ':' && !host_char(c)) {
            return Err(fail(&format!("the host holds {bad:?}")));
        }
        let port = match port_text {
            None => 80,
            Some(text) => match text.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(fail("the port must be 1..65535")),
            },
        };
        if path.contains(['?', '#']) {
            return Err(fail("query strings and fragments are not supported"));
        }
        Ok(Endpoint {
            host: host.to_owned(),
            port,
            prefix: path.trim_end_matches('/').to_owned(),
        })
    }

    /// `host:port` for the `Host` header and messages (IPv6 in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL, for reports.
    pub fn url(&self) -> String {
        format!("http://{}{}", self.authority(), self.prefix)
    }

    /// Whether two endpoints name the same host and port (the shared-port recipes of afd-spec §6.4).
    pub fn same_socket(&self, other: &Endpoint) -> bool {
        self.port == other.port && normalise_host(&self.host) == normalise_host(&other.host)
    }
}

/// A character a host name, IPv4 address or IPv6 address (with a `%` zone) may hold besides `:`.
fn host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '%')
}

fn normalise_host(host: &str) -> String {
    match host {
        "localhost" | "127.0.0.1" | "::1" | "0.0.0.0" | "::" => "loopback".to_owned(),
        other => other.to_ascii_lowercase(),
    }
}

/// One request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: &'static str,
    /// Path below the endpoint's prefix, starting with `/`.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn get(path: &str) -> Request {
        Request {
            method: "GET",
            path: path.to_owned(),
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn post_json(path: &str, body: &serde_json::Value) -> Request {
        Request {
            method: "POST",
            path: path.to_owned(),
            headers: vec![("Content-Type".to_owned(), "application/json".to_owned())],
            body: body.to_string().into_bytes(),
        }
    }

    /// A POST with a raw body (for malformed-request checks).
    pub fn post_raw(path: &str, content_type: &str, body: &[u8]) -> Request {
        Request {
            method: "POST",
            path: path.to_owned(),
            headers: vec![("Content-Type".to_owned(), content_type.to_owned())],
            body: body.to_vec(),
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

/// An event of a streamed body and when it arrived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimedEvent {
    pub event: SseEvent,
    /// Since the request was sent.
    pub at: Duration,
}

/// A complete response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    pub head: ResponseHead,
    /// The decoded body (for streams: the raw event-stream text).
    pub body: Vec<u8>,
    /// Bytes the server sent after the response had ended by its own framing.
    pub trailing: Vec<u8>,
    /// From sending the request to the end of the body.
    pub elapsed: Duration,
    /// For [`BodyMode::Sse`]: the events, with arrival times.
    pub events: Vec<TimedEvent>,
    /// For [`BodyMode::Sse`]: framing problems the parser met.
    pub sse_problems: Vec<String>,
    /// The client closed the connection on purpose after `cancel_after` events.
    pub cancelled: bool,
}

impl Response {
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// The body as JSON, if it is JSON.
    pub fn json(&self) -> Option<serde_json::Value> {
        serde_json::from_slice(&self.body).ok()
    }
}

/// How to read the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyMode {
    Whole,
    /// Parse `text/event-stream` as it arrives; close the connection after `cancel_after` events.
    Sse {
        cancel_after: Option<usize>,
    },
}

/// Which step of a call was under way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Connect,
    Send,
    Head,
    Body,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Connect => "connecting",
            Phase::Send => "sending the request",
            Phase::Head => "waiting for the response head",
            Phase::Body => "reading the body",
        }
    }
}

/// How a call failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("connection refused by {0}")]
    Refused(String),
    #[error("cannot connect to {authority}: {source}")]
    Connect {
        authority: String,
        #[source]
        source: io::Error,
    },
    #[error("no complete response within {after:.1?} ({} after {received} bytes)", phase.as_str())]
    Timeout {
        phase: Phase,
        after: Duration,
        received: usize,
    },
    #[error("connection closed {} after {received} bytes with no complete response{}", phase.as_str(), reset_note(*reset))]
    Closed {
        phase: Phase,
        received: usize,
        reset: bool,
    },
    #[error("malformed response: {0}")]
    Malformed(#[from] WireError),
    #[error("response body exceeds {limit} bytes")]
    TooLarge { limit: usize },
    #[error("i/o error {}: {source}", phase.as_str())]
    Io {
        phase: Phase,
        #[source]
        source: io::Error,
    },
}

fn reset_note(reset: bool) -> &'static str {
    if reset { " (reset)" } else { "" }
}

impl HttpError {
    pub fn is_timeout(&self) -> bool {
        matches!(self, HttpError::Timeout { .. })
    }

    pub fn is_refused(&self) -> bool {
        matches!(self, HttpError::Refused(_))
    }

    /// True when the server took the request and then broke off without a response (or mid-response).
    pub fn is_lost_response(&self) -> bool {
        matches!(self, HttpError::Closed { phase, .. } if *phase != Phase::Connect)
    }
}

/// Limits every call runs under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Client {
    /// The whole call, connect to last byte.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_body_bytes: usize,
    /// How long to wait after a complete response for the connection to close (bytes in that time are
    /// trailing).
    pub trailing_grace: Duration,
}

impl Default for Client {
    fn default() -> Client {
        Client {
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            max_body_bytes: 16 << 20,
            trailing_grace: Duration::from_millis(250),
        }
    }
}

/// The outcome of a bare TCP connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Connect {
    Accepted,
    Refused,
    TimedOut,
    Failed(String),
}

impl Client {
    pub fn with_timeout(mut self, timeout: Duration) -> Client {
        self.timeout = timeout;
        self
    }

    /// Sends `request` and reads the whole response.
    pub async fn send(
        &self,
        endpoint: &Endpoint,
        request: &Request,
    ) -> Result<Response, HttpError> {
        self.call(endpoint, request, BodyMode::Whole).await
    }

    /// Sends `request` and reads the body as an event stream.
    pub async fn stream(
        &self,
        endpoint: &Endpoint,
        request: &Request,
        cancel_after: Option<usize>,
    ) -> Result<Response, HttpError> {
        self.call(endpoint, request, BodyMode::Sse { cancel_after })
            .await
    }

    /// Opens and closes a TCP connection to `host:port` within the connect timeout.
    pub async fn probe_tcp(&self, host: &str, port: u16) -> Connect {
        let deadline = Instant::now() + self.connect_timeout;
        match timeout_at(deadline, TcpStream::connect((host, port))).await {
            Ok(Ok(_stream)) => Connect::Accepted,
            Ok(Err(err)) if err.kind() == io::ErrorKind::ConnectionRefused => Connect::Refused,
            Ok(Err(err)) => Connect::Failed(err.to_string()),
            Err(_) => Connect::TimedOut,
        }
    }

    /// One call under one deadline.
    pub async fn call(
        &self,
        endpoint: &Endpoint,
        request: &Request,
        mode: BodyMode,
    ) -> Result<Response, HttpError> {
        let start = Instant::now();
        let deadline = start + self.timeout;
        let mut received = 0usize;
        let timeout = |phase: Phase, received: usize| HttpError::Timeout {
            phase,
            after: start.elapsed(),
            received,
        };

        let connect_deadline = deadline.min(start + self.connect_timeout);
        let authority = endpoint.authority();
        let mut stream = match timeout_at(
            connect_deadline,
            TcpStream::connect((endpoint.host.as_str(), endpoint.port)),
        )
        .await
        {
            Err(_) => return Err(timeout(Phase::Connect, 0)),
            Ok(Err(err)) if err.kind() == io::ErrorKind::ConnectionRefused => {
                return Err(HttpError::Refused(authority));
            }
            Ok(Err(source)) => return Err(HttpError::Connect { authority, source }),
            Ok(Ok(stream)) => stream,
        };
        let _ = stream.set_nodelay(true);

        let path = format!("{}{}", endpoint.prefix, request.path);
        let bytes = wire::encode_request(
            request.method,
            &authority,
            &path,
            &request.headers,
            &request.body,
        );
        match timeout_at(deadline, stream.write_all(&bytes)).await {
            Err(_) => return Err(timeout(Phase::Send, 0)),
            Ok(Err(err)) => return Err(io_error(Phase::Send, err, 0)),
            Ok(Ok(())) => {}
        }
        let sent = Instant::now();

        // The head.
        let mut buf = vec![0u8; 16 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        let (head, consumed) = loop {
            if let Some(parsed) = wire::parse_head(&pending)? {
                break parsed;
            }
            let n = match timeout_at(deadline, stream.read(&mut buf)).await {
                Err(_) => return Err(timeout(Phase::Head, received)),
                Ok(Err(err)) => return Err(io_error(Phase::Head, err, received)),
                Ok(Ok(n)) => n,
            };
            if n == 0 {
                return Err(HttpError::Closed {
                    phase: Phase::Head,
                    received,
                    reset: false,
                });
            }
            received += n;
            pending.extend_from_slice(&buf[..n]);
        };
        let rest = pending.split_off(consumed);

        // The body.
        let mut decoder = BodyDecoder::new(wire::framing(&head)?);
        let mut body = Vec::new();
        let mut trailing = Vec::new();
        let mut sse = match mode {
            BodyMode::Sse { .. } if head.status == 200 => Some(SseParser::new()),
            _ => None,
        };
        let cancel_after = match mode {
            BodyMode::Sse { cancel_after } => cancel_after,
            BodyMode::Whole => None,
        };
        let mut events: Vec<TimedEvent> = Vec::new();
        let mut cancelled = false;
        let mut feed = |input: &[u8],
                        decoder: &mut BodyDecoder,
                        body: &mut Vec<u8>,
                        trailing: &mut Vec<u8>,
                        events: &mut Vec<TimedEvent>|
         -> Result<(), HttpError> {
            let before = body.len();
            let used = decoder.push(input, body)?;
            trailing.extend_from_slice(&input[used..]);
            if body.len() > self.max_body_bytes {
                return Err(HttpError::TooLarge {
                    limit: self.max_body_bytes,
                });
            }
            if let Some(parser) = sse.as_mut() {
                let at = sent.elapsed();
                events.extend(
                    parser
                        .push(&body[before..])
                        .into_iter()
                        .map(|event| TimedEvent { event, at }),
                );
            }
            Ok(())
        };
        feed(&rest, &mut decoder, &mut body, &mut trailing, &mut events)?;
        while !decoder.is_complete() {
            if cancel_after.is_some_and(|k| events.len() >= k) {
                cancelled = true;
                break;
            }
            let n = match timeout_at(deadline, stream.read(&mut buf)).await {
                Err(_) => return Err(timeout(Phase::Body, received)),
                Ok(Err(err)) => return Err(io_error(Phase::Body, err, received)),
                Ok(Ok(n)) => n,
            };
            received += n;
            if n == 0 {
                decoder.on_eof().map_err(|_| HttpError::Closed {
                    phase: Phase::Body,
                    received,
                    reset: false,
                })?;
                break;
            }
            feed(
                &buf[..n],
                &mut decoder,
                &mut body,
                &mut trailing,
                &mut events,
            )?;
        }
        let elapsed = sent.elapsed();
        let mut sse_problems = Vec::new();
        if let Some(parser) = sse.as_mut() {
            if !cancelled {
                parser.finish();
            }
            sse_problems = parser.problems().to_vec();
        }

        // After the response: anything more is trailing (a duplicate response, garbage).
        if !cancelled {
            let grace = deadline.min(Instant::now() + self.trailing_grace);
            while trailing.len() < 64 * 1024 {
                match timeout_at(grace, stream.read(&mut buf)).await {
                    Ok(Ok(n)) if n > 0 => trailing.extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
        }
        drop(stream);
        Ok(Response {
            head,
            body,
            trailing,
            elapsed,
            events,
            sse_problems,
            cancelled,
        })
    }
}

fn io_error(phase: Phase, err: io::Error, received: usize) -> HttpError {
    match err.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => HttpError::Closed {
            phase,
            received,
            reset: err.kind() != io::ErrorKind::UnexpectedEof,
        },
        _ => HttpError::Io { phase, source: err },
    }
}

#[cfg(test)]
mod tests;
