//! Tests of the client against misbehaving raw TCP servers: garbage, resets, early closes, slow drips,
//! silence and duplicate responses all end in a typed outcome within the deadline.

use std::time::Duration;

use expect_test::expect;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

#[track_caller]
fn check_url(url: &str, expect: expect_test::Expect) {
    let shown = match Endpoint::parse(url) {
        Ok(e) => format!("{} {} {:?} -> {}", e.host, e.port, e.prefix, e.url()),
        Err(err) => err.to_string(),
    };
    expect.assert_eq(&shown);
}

#[test]
fn urls() {
    check_url(
        "http://127.0.0.1:18305",
        expect![[r#"127.0.0.1 18305 "" -> http://127.0.0.1:18305"#]],
    );
    check_url(
        "http://node/v1/",
        expect![[r#"node 80 "/v1" -> http://node:80/v1"#]],
    );
    check_url(
        "http://[::1]:8000",
        expect![[r#"::1 8000 "" -> http://[::1]:8000"#]],
    );
    check_url(
        "https://x:1",
        expect![
            "invalid URL 'https://x:1': https is not supported; point the suite at the server's plain HTTP port"
        ],
    );
    check_url(
        "127.0.0.1:80",
        expect!["invalid URL '127.0.0.1:80': expected http://HOST:PORT"],
    );
    check_url(
        "http://x:0",
        expect!["invalid URL 'http://x:0': the port must be 1..65535"],
    );
    check_url(
        "http://x:99999",
        expect!["invalid URL 'http://x:99999': the port must be 1..65535"],
    );
    check_url("http://:80", expect!["invalid URL 'http://:80': no host"]);
    // Found by `any_url_text_parses_or_is_refused`: an unbracketed host with ':' once parsed
    // into an endpoint whose own URL did not parse back.
    check_url(
        "http://]::1/",
        expect!["invalid URL 'http://]::1/': an IPv6 host goes in brackets: http://[::1]:PORT"],
    );
    check_url(
        "http://[::1]x",
        expect!["invalid URL 'http://[::1]x': expected ':PORT' after the bracketed host"],
    );
    check_url(
        "http://[a*b]:1",
        expect!["invalid URL 'http://[a*b]:1': a bracketed host holds an IPv6 address only"],
    );
    check_url(
        "http://a b:80",
        expect!["invalid URL 'http://a b:80': a URL holds no spaces (write %20)"],
    );
    check_url(
        "http://0/ /",
        expect!["invalid URL 'http://0/ /': a URL holds no spaces (write %20)"],
    );
    check_url(
        "http://a*b:80",
        expect!["invalid URL 'http://a*b:80': the host holds '*'"],
    );
    check_url(
        "http://x:80/a?b",
        expect!["invalid URL 'http://x:80/a?b': query strings and fragments are not supported"],
    );
}

#[test]
fn shared_sockets_compare_loopback_names() {
    let a = Endpoint::parse("http://127.0.0.1:1").expect("url");
    let b = Endpoint::parse("http://localhost:1").expect("url");
    let c = Endpoint::parse("http://localhost:2").expect("url");
    assert!(a.same_socket(&b));
    assert!(!a.same_socket(&c));
}

/// What a test server does after reading the request.
#[derive(Clone)]
enum Behaviour {
    Write(Vec<u8>),
    WriteTwice(Vec<u8>),
    Reset,
    Silent,
    Drip(Vec<u8>, Duration),
}

async fn read_request(stream: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Serves one connection with `behaviour`; returns the endpoint.
async fn server(behaviour: Behaviour) -> Endpoint {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        read_request(&mut stream).await;
        match behaviour {
            Behaviour::Write(bytes) => {
                let _ = stream.write_all(&bytes).await;
            }
            Behaviour::WriteTwice(bytes) => {
                let _ = stream.write_all(&bytes).await;
                let _ = stream.write_all(&bytes).await;
            }
            Behaviour::Reset => {
                let _ = stream.set_zero_linger();
                drop(stream);
            }
            Behaviour::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
            Behaviour::Drip(bytes, pause) => {
                for byte in bytes {
                    if stream.write_all(&[byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(pause).await;
                }
            }
        }
    });
    Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url")
}

fn client(timeout_ms: u64) -> Client {
    Client {
        timeout: Duration::from_millis(timeout_ms),
        connect_timeout: Duration::from_millis(timeout_ms),
        max_body_bytes: 1 << 16,
        trailing_grace: Duration::from_millis(100),
    }
}

const OK: &[u8] =
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";

#[tokio::test]
async fn a_complete_response_has_no_trailing_bytes() {
    let endpoint = server(Behaviour::Write(OK.to_vec())).await;
    let response = client(2000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect("a response");
    assert_eq!(response.status(), 200);
    assert_eq!(response.json().expect("json")["ok"], true);
    assert!(response.trailing.is_empty());
}

#[tokio::test]
async fn a_duplicate_response_is_trailing() {
    let endpoint = server(Behaviour::WriteTwice(OK.to_vec())).await;
    let response = client(2000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect("a response");
    assert_eq!(response.trailing, OK);
}

#[tokio::test]
async fn garbage_is_malformed() {
    let endpoint = server(Behaviour::Write(b"\x16\x03\x01garbage\r\n\r\n".to_vec())).await;
    let err = client(2000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("garbage");
    assert!(
        matches!(err, HttpError::Malformed(WireError::BadHead(_))),
        "{err}"
    );
}

#[tokio::test]
async fn a_reset_before_the_response_is_a_lost_response() {
    let endpoint = server(Behaviour::Reset).await;
    let err = client(2000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("reset");
    assert!(err.is_lost_response(), "{err}");
}

#[tokio::test]
async fn a_close_mid_body_is_a_lost_response() {
    let endpoint = server(Behaviour::Write(
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort".to_vec(),
    ))
    .await;
    let err = client(2000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("short body");
    expect!["connection closed reading the body after 45 bytes with no complete response"]
        .assert_eq(&err.to_string());
}

#[tokio::test]
async fn silence_times_out_waiting_for_the_head() {
    let endpoint = server(Behaviour::Silent).await;
    let start = std::time::Instant::now();
    let err = client(300)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("silent");
    assert!(
        matches!(
            err,
            HttpError::Timeout {
                phase: Phase::Head,
                received: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_slow_drip_times_out_within_the_deadline() {
    let endpoint = server(Behaviour::Drip(OK.to_vec(), Duration::from_millis(40))).await;
    let start = std::time::Instant::now();
    let err = client(400)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("drip");
    assert!(err.is_timeout(), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_refused_connection_is_named() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    let endpoint = Endpoint::parse(&format!("http://127.0.0.1:{port}")).expect("url");
    let err = client(1000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("refused");
    assert!(err.is_refused(), "{err}");
    assert_eq!(
        client(1000).probe_tcp("127.0.0.1", port).await,
        Connect::Refused
    );
}

#[tokio::test]
async fn a_huge_body_is_refused() {
    let mut bytes = b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n".to_vec();
    bytes.extend(std::iter::repeat_n(b'x', 200_000));
    let endpoint = server(Behaviour::Write(bytes)).await;
    let err = client(2000)
        .send(&endpoint, &Request::get("/x"))
        .await
        .expect_err("too large");
    assert!(matches!(err, HttpError::TooLarge { limit: 65536 }), "{err}");
}

fn sse_body(events: usize) -> Vec<u8> {
    let mut body =
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for i in 0..events {
        let event = format!("data: {{\"n\":{i}}}\n\n");
        body.extend_from_slice(format!("{:x}\r\n{event}\r\n", event.len()).as_bytes());
    }
    let done = "data: [DONE]\n\n";
    body.extend_from_slice(format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()).as_bytes());
    body
}

#[tokio::test]
async fn streams_are_read_as_events_and_can_be_cancelled() {
    let endpoint = server(Behaviour::Write(sse_body(3))).await;
    let response = client(2000)
        .stream(&endpoint, &Request::get("/s"), None)
        .await
        .expect("a stream");
    let data: Vec<&str> = response
        .events
        .iter()
        .map(|e| e.event.data.as_str())
        .collect();
    assert_eq!(data, ["{\"n\":0}", "{\"n\":1}", "{\"n\":2}", "[DONE]"]);
    assert!(!response.cancelled && response.sse_problems.is_empty());

    let endpoint = server(Behaviour::Drip(sse_body(50), Duration::from_millis(1))).await;
    let response = client(5000)
        .stream(&endpoint, &Request::get("/s"), Some(2))
        .await
        .expect("a stream");
    assert!(response.cancelled);
    assert!(response.events.len() >= 2 && response.events.len() < 51);
}

proptest::proptest! {
    #[test]
    fn any_url_text_parses_or_is_refused(text in "(http://|https://)?[ -~]{0,40}") {
        if let Ok(endpoint) = Endpoint::parse(&text) {
            proptest::prop_assert!(endpoint.port > 0 && !endpoint.host.is_empty());
            proptest::prop_assert_eq!(Endpoint::parse(&endpoint.url()).map(|e| e.url()), Ok(endpoint.url()));
        }
    }
}
