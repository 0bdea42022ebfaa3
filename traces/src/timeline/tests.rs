//! The trace uses the field names Perfetto expects.

use super::*;

#[test]
fn spans_and_track_names_use_chrome_field_names() {
    let mut trace = ChromeTrace::new(0.0, 10.0);
    trace.name_track(1, "attention", 3, "A0");
    trace.span(1, 3, "attn L0 u0", "compute", (1.5, 2.0), BTreeMap::new());
    let json: serde_json::Value = serde_json::from_str(&trace.to_json()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    assert_eq!(events[1]["args"]["name"], "A0");
    assert_eq!(events[2]["ph"], "X");
    assert_eq!(events[2]["dur"], 2.0);
    assert_eq!(json["otherData"]["format"], TIMELINE_FORMAT);
}
