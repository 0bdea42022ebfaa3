//! Tests of the SSE parser: line ends, comments, multi-line data, framing problems, arbitrary splits.

use proptest::prelude::*;

use super::*;

fn parse(input: &str) -> (Vec<SseEvent>, Vec<String>) {
    let mut parser = SseParser::new();
    let events = parser.push(input.as_bytes());
    parser.finish();
    (events, parser.problems().to_vec())
}

fn data(events: &[SseEvent]) -> Vec<&str> {
    events.iter().map(|e| e.data.as_str()).collect()
}

#[test]
fn data_events_end_at_blank_lines_with_any_line_end() {
    let (events, problems) = parse("data: {\"a\":1}\n\ndata: x\r\n\r\ndata: y\r\rdata: [DONE]\n\n");
    assert_eq!(data(&events), ["{\"a\":1}", "x", "y", "[DONE]"]);
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn comments_fields_and_multi_line_data() {
    let (events, problems) = parse(": keep-alive\nevent: error\ndata: one\ndata:two\nid: 7\n\n");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].data, "one\ntwo");
    assert_eq!(events[0].event.as_deref(), Some("error"));
    assert!(problems.is_empty());
}

#[test]
fn an_unterminated_event_and_unknown_fields_are_reported() {
    let (events, problems) = parse("data: a\n\nbogus: 1\ndata: b");
    assert_eq!(data(&events), ["a"]);
    assert_eq!(
        problems,
        [
            "line 3: unknown field 'bogus'",
            "stream ended inside a line (7 bytes without a line end)",
            "stream ended inside an event (no blank line after its last field)",
        ]
    );
}

#[test]
fn invalid_utf8_is_reported_not_fatal() {
    let mut parser = SseParser::new();
    let events = parser.push(b"data: \xff\xfe\n\n");
    assert_eq!(events.len(), 1);
    assert_eq!(parser.problems(), ["line 1 is not UTF-8"]);
}

proptest! {
    #[test]
    fn splitting_the_input_changes_nothing(text in "(data: [a-z{}\":]{0,8}(\n|\r\n|\r)|\n|: c\n){0,20}", cut in 0usize..200) {
        let bytes = text.as_bytes();
        let cut = cut.min(bytes.len());
        let mut whole = SseParser::new();
        let expected = whole.push(bytes);
        let mut split = SseParser::new();
        let mut got = split.push(&bytes[..cut]);
        got.extend(split.push(&bytes[cut..]));
        // A CR at the cut followed by an LF is one line end either way.
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut parser = SseParser::new();
        let _ = parser.push(&bytes);
        parser.finish();
    }
}
