//! Reading vLLM-style exposition text.

use super::*;

const TEXT: &str = r#"# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="a \"b\""} 3.0
vllm:request_success_total{engine="1",finished_reason="length",model_name="a \"b\""} 4.0
vllm:request_success_total{engine="10",finished_reason="stop",model_name="a \"b\""} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 7.0
plain_metric 2.5
garbage line {
"#;

#[test]
fn sums_by_label_with_numeric_order() {
    let scrape = Scrape::parse(TEXT);
    assert_eq!(scrape.sum("vllm:request_success_total"), 8.0);
    assert_eq!(
        scrape.sum_by("vllm:request_success_total", "engine"),
        vec![
            ("0".to_owned(), 3.0),
            ("1".to_owned(), 4.0),
            ("10".to_owned(), 1.0)
        ]
    );
    assert_eq!(scrape.samples[0].label("model_name"), Some("a \"b\""));
    assert_eq!(scrape.sum("plain_metric"), 2.5);
    assert_eq!(scrape.samples.len(), 5);
}

proptest::proptest! {
    #[test]
    fn never_panics(text in "\\PC{0,200}") {
        let _ = Scrape::parse(&text);
    }
}
