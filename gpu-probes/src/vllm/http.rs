//! A minimal HTTP/1.1 client over `std::net` for a local `vllm serve`: GETs with a deadline, and a
//! streamed POST that timestamps each server-sent event as it arrives.
//!
//! It speaks only what uvicorn answers a local client with (`Content-Length` or chunked bodies); it is
//! not a general client and never follows redirects.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A response head and its whole body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub body: String,
}

/// `GET path` on `addr`, the whole exchange bounded by `timeout`.
pub fn get(addr: SocketAddr, path: &str, timeout: Duration) -> std::io::Result<Response> {
    let mut stream = connect(addr, timeout)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    read_response(BufReader::new(stream))
}

/// `POST path` with a JSON body whose answer is one document (a non-streamed completion), the whole
/// exchange bounded by `timeout`.
pub fn post(
    addr: SocketAddr,
    path: &str,
    body: &str,
    timeout: Duration,
) -> std::io::Result<Response> {
    let mut stream = connect(addr, timeout)?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    read_response(BufReader::new(stream))
}

fn read_response(mut reader: impl BufRead) -> std::io::Result<Response> {
    let (status, chunked, length) = read_head(&mut reader)?;
    let mut body = Vec::new();
    if chunked {
        while let Some(chunk) = read_chunk(&mut reader)? {
            body.extend_from_slice(&chunk);
        }
    } else if let Some(n) = length {
        body.resize(n, 0);
        reader.read_exact(&mut body)?;
    } else {
        reader.read_to_end(&mut body)?;
    }
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// `POST path` with a JSON body whose answer is an event stream; calls `on_event(data, at)` for each
/// `data:` line as it arrives, `at` measured from `epoch`. Returns the status; a non-200 answer's body
/// is returned as the error text.
pub fn post_stream(
    addr: SocketAddr,
    path: &str,
    body: &str,
    timeout: Duration,
    epoch: Instant,
    mut on_event: impl FnMut(&str, Duration),
) -> std::io::Result<u16> {
    let mut stream = connect(addr, timeout)?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut reader = BufReader::new(stream);
    let (status, chunked, _) = read_head(&mut reader)?;
    if status != 200 {
        let mut rest = Vec::new();
        let _ = reader.read_to_end(&mut rest);
        return Err(std::io::Error::other(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&rest)
                .chars()
                .take(400)
                .collect::<String>()
        )));
    }
    let mut pending = String::new();
    let mut feed = |bytes: &[u8], pending: &mut String| {
        pending.push_str(&String::from_utf8_lossy(bytes));
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            if let Some(data) = line.trim_end().strip_prefix("data:") {
                on_event(data.trim_start(), epoch.elapsed());
            }
        }
    };
    if chunked {
        while let Some(chunk) = read_chunk(&mut reader)? {
            feed(&chunk, &mut pending);
        }
    } else {
        let mut buf = [0u8; 8192];
        loop {
            let n = reader.read(&mut buf)?;
            if n == 0 {
                break;
            }
            feed(&buf[..n], &mut pending);
        }
    }
    Ok(status)
}

fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, timeout.min(Duration::from_secs(10)))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Status, whether the body is chunked, and its `Content-Length`.
fn read_head(reader: &mut impl BufRead) -> std::io::Result<(u16, bool, Option<usize>)> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP status line: {line:?}")))?;
    let (mut chunked, mut length) = (false, None);
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
            chunked = true;
        } else if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().ok();
        }
    }
    Ok((status, chunked, length))
}

/// The next chunk of a chunked body, `None` after the last.
fn read_chunk(reader: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let size_text = line.trim().split(';').next().unwrap_or("");
    let size = usize::from_str_radix(size_text, 16)
        .map_err(|_| std::io::Error::other(format!("bad chunk size {size_text:?}")))?;
    if size == 0 {
        return Ok(None);
    }
    let mut chunk = vec![0; size];
    reader.read_exact(&mut chunk)?;
    let mut crlf = [0u8; 2];
    reader.read_exact(&mut crlf)?;
    Ok(Some(chunk))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_body_reads_chunk_by_chunk() {
        let wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=1\r\nabc\r\n0\r\n\r\n";
        let mut reader = BufReader::new(&wire[..]);
        assert_eq!(read_head(&mut reader).unwrap(), (200, true, None));
        assert_eq!(read_chunk(&mut reader).unwrap().unwrap(), b"hello");
        assert_eq!(read_chunk(&mut reader).unwrap().unwrap(), b"abc");
        assert!(read_chunk(&mut reader).unwrap().is_none());
    }

    #[test]
    fn a_sized_body_reads_whole() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{\"a\":1}trailing";
        let r = read_response(BufReader::new(&wire[..])).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "{\"a\":1}"));
    }

    #[test]
    fn a_garbled_status_line_is_an_error() {
        let mut reader = BufReader::new(&b"SSH-2.0-OpenSSH\r\n"[..]);
        assert!(read_head(&mut reader).is_err());
    }
}
