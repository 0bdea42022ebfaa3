//! Key positions of the seed recipe's JSON shapes, and malformed input.

use super::key_positions;

#[test]
fn nested_keys_point_at_their_opening_quote() {
    let text = "{\n  \"afd\": {\n    \"role\": \"ffn\",\n    \"port\": 6269\n  }\n}";
    let found = key_positions(text);
    let at = |key: &str| found[key];
    let chars: Vec<char> = text.chars().collect();
    assert_eq!(chars[at("afd")], '"');
    assert_eq!(chars[at("afd.role") + 1], 'r');
    assert_eq!(chars[at("afd.port") + 1], 'p');
    assert_eq!(found.len(), 3);
}

#[test]
fn array_elements_and_escapes_do_not_confuse_paths() {
    let found = key_positions(
        r#"{"a\"b": [ {"x": 1} ], "cudagraph_capture_sizes": [64], "c": {"d": "}"}}"#,
    );
    let keys: Vec<&str> = found.keys().map(String::as_str).collect();
    assert_eq!(keys, ["a\"b", "c", "c.d", "cudagraph_capture_sizes"]);
}

#[test]
fn malformed_text_returns_what_was_found() {
    assert_eq!(key_positions(r#"{"a": 1, "b"#).len(), 1);
    assert!(key_positions("").is_empty());
    assert!(key_positions(r#"{"a": "\u12"#).contains_key("a"));
}
