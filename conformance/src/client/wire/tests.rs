//! Tests of the HTTP/1.1 wire functions: heads, framing, chunked bodies split anywhere, garbage.

use expect_test::expect;
use proptest::prelude::*;

use super::*;

fn decode_all(framing: Framing, input: &[u8]) -> (Result<Vec<u8>, WireError>, Vec<u8>, bool) {
    let mut decoder = BodyDecoder::new(framing);
    let mut body = Vec::new();
    match decoder.push(input, &mut body) {
        Ok(used) => (Ok(body), input[used..].to_vec(), decoder.is_complete()),
        Err(err) => (Err(err), Vec::new(), false),
    }
}

#[test]
fn head_is_incomplete_until_the_blank_line() {
    assert_eq!(parse_head(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
    let (head, used) =
        parse_head(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\nX-Request-Id: a\r\n\r\n{}")
            .expect("valid head")
            .expect("complete head");
    assert_eq!(head.status, 404);
    assert_eq!(head.reason, "Not Found");
    assert_eq!(head.header("x-request-id"), Some("a"));
    assert_eq!(head.header("CONTENT-LENGTH"), Some("2"));
    assert_eq!(used, 62);
}

#[test]
fn garbage_head_is_an_error_naming_the_bytes() {
    let err = parse_head(b"\x00\x01garbage\r\n\r\n").expect_err("not HTTP");
    expect![[r#"response head is not HTTP/1.x: invalid HTTP version (first bytes: "\x00\x01garbage\r\n\r\n")"#]]
        .assert_eq(&err.to_string());
}

#[test]
fn an_endless_head_is_refused() {
    let mut long = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
    long.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES + 10));
    assert_eq!(parse_head(&long), Err(WireError::HeadTooLong));
}

fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
    ResponseHead {
        status,
        reason: String::new(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

#[test]
fn framing_follows_rfc_9112() {
    assert_eq!(
        framing(&head(204, &[("Content-Length", "5")])),
        Ok(Framing::Empty)
    );
    assert_eq!(
        framing(&head(200, &[("Content-Length", " 5 ")])),
        Ok(Framing::Length(5))
    );
    assert_eq!(
        framing(&head(200, &[("Transfer-Encoding", "gzip, chunked")])),
        Ok(Framing::Chunked)
    );
    assert_eq!(framing(&head(200, &[])), Ok(Framing::UntilClose));
    assert_eq!(
        framing(&head(
            200,
            &[("Transfer-Encoding", "chunked"), ("Content-Length", "3")]
        )),
        Err(WireError::ConflictingFraming)
    );
    assert_eq!(
        framing(&head(200, &[("Content-Length", "-1")])),
        Err(WireError::BadContentLength("-1".to_owned()))
    );
    assert_eq!(
        framing(&head(200, &[("Transfer-Encoding", "gzip")])),
        Err(WireError::UnsupportedEncoding("gzip".to_owned()))
    );
}

#[test]
fn length_body_leaves_trailing_bytes() {
    let (body, rest, done) = decode_all(Framing::Length(3), b"abcHTTP/1.1 200");
    assert_eq!(body.expect("decodes"), b"abc");
    assert_eq!(rest, b"HTTP/1.1 200");
    assert!(done);
}

#[test]
fn chunked_body_with_extensions_and_trailers() {
    let input = b"4;name=x\r\nWiki\r\n5\r\npedia\r\n0\r\nX-Trailer: 1\r\n\r\nEXTRA";
    let (body, rest, done) = decode_all(Framing::Chunked, input);
    assert_eq!(body.expect("decodes"), b"Wikipedia");
    assert_eq!(rest, b"EXTRA");
    assert!(done);
}

#[test]
fn chunked_errors_are_named() {
    let (body, _, _) = decode_all(Framing::Chunked, b"zz\r\n");
    expect!["bad chunk size line 'zz'"].assert_eq(&body.expect_err("bad size").to_string());
    let (body, _, _) = decode_all(Framing::Chunked, b"2\r\nabX");
    assert_eq!(body, Err(WireError::MissingChunkCrlf));
}

#[test]
fn eof_completes_only_close_delimited_bodies() {
    let mut decoder = BodyDecoder::new(Framing::UntilClose);
    assert_eq!(decoder.on_eof(), Ok(()));
    assert!(decoder.is_complete());
    let mut decoder = BodyDecoder::new(Framing::Length(4));
    let mut body = Vec::new();
    decoder.push(b"ab", &mut body).expect("decodes");
    assert!(decoder.on_eof().is_err());
    let mut decoder = BodyDecoder::new(Framing::Chunked);
    decoder.push(b"2\r\nab\r\n", &mut body).expect("decodes");
    assert!(decoder.on_eof().is_err());
}

#[test]
fn request_bytes_close_the_connection() {
    let bytes = encode_request(
        "POST",
        "127.0.0.1:8000",
        "/v1/completions",
        &[("X-Request-Id".to_owned(), "r1".to_owned())],
        b"{}",
    );
    let text = String::from_utf8(bytes).expect("ASCII");
    let text = text.replace(env!("CARGO_PKG_VERSION"), "VERSION");
    expect![[r#"
        POST /v1/completions HTTP/1.1
        Host: 127.0.0.1:8000
        User-Agent: afd-conformance/VERSION
        Accept: */*
        Connection: close
        X-Request-Id: r1
        Content-Length: 2

        {}"#]]
    .assert_eq(&text.replace("\r\n", "\n"));
}

fn chunked(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for part in parts.iter().filter(|p| !p.is_empty()) {
        out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
        out.extend_from_slice(part);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

proptest! {
    #[test]
    fn chunked_decoding_does_not_depend_on_how_bytes_arrive(
        parts in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..6),
        cuts in proptest::collection::vec(1usize..16, 0..40),
    ) {
        let encoded = chunked(&parts);
        let mut decoder = BodyDecoder::new(Framing::Chunked);
        let mut body = Vec::new();
        let mut at = 0;
        for cut in cuts.iter().chain(std::iter::repeat(&7)) {
            if at >= encoded.len() {
                break;
            }
            let end = (at + cut).min(encoded.len());
            let used = decoder.push(&encoded[at..end], &mut body).expect("valid chunked input");
            prop_assert_eq!(used, end - at);
            at = end;
        }
        prop_assert!(decoder.is_complete());
        prop_assert_eq!(body, parts.concat());
    }

    #[test]
    fn garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = parse_head(&bytes);
        for framing in [Framing::Chunked, Framing::Length(17), Framing::UntilClose] {
            let mut decoder = BodyDecoder::new(framing);
            let mut body = Vec::new();
            if let Ok(used) = decoder.push(&bytes, &mut body) {
                prop_assert!(used <= bytes.len());
            }
            let _ = decoder.on_eof();
        }
    }

    #[test]
    fn mangled_heads_never_panic(
        status in 0u16..1000,
        name in "[ -~]{0,20}",
        value in "[ -~\u{80}-\u{ff}]{0,20}",
        cut in 0usize..80,
    ) {
        let text = format!("HTTP/1.1 {status} X\r\n{name}: {value}\r\nTransfer-Encoding: {value}\r\n\r\n");
        let bytes = text.as_bytes();
        if let Ok(Some((head, _))) = parse_head(&bytes[..cut.min(bytes.len())]) {
            let _ = framing(&head);
        }
    }
}
