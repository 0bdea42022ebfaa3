//! Tests of the Prometheus text parser and the sums the routing checks take.

use expect_test::expect;
use proptest::prelude::*;

use super::*;

const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 1.0
vllm:num_requests_running{engine="1",model_name="m"} 0.0
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 2.0
vllm:request_success_total{engine="1",finished_reason="abort",model_name="m"} 1.0
vllm:request_success_created{engine="0",finished_reason="stop",model_name="m"} 1.7e9
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5
process_cpu_seconds_total 12.5 1700000000000
"#;

#[test]
fn reads_vllm_series() {
    let scrape = Scrape::parse(VLLM).expect("valid exposition");
    assert_eq!(scrape.sum("vllm:request_success_total"), Some(6.0));
    assert_eq!(
        scrape.sum_where("vllm:request_success_total", |l| l
            .get("finished_reason")
            .map(String::as_str)
            == Some("abort")),
        Some(1.0)
    );
    assert_eq!(scrape.sum("vllm:prompt_tokens_total"), None);
    let per = scrape.per_engine("vllm:request_success_total");
    assert_eq!(per.get("0"), Some(&5.0));
    assert_eq!(per.get("1"), Some(&1.0));
    let labels: Vec<String> = scrape.engine_labels().into_iter().collect();
    assert_eq!(labels, ["0", "1"]);
    assert!(scrape.has("process_cpu_seconds_total"));
}

#[test]
fn label_values_unescape() {
    let scrape = Scrape::parse("m{a=\"x\\\"y\\\\z\\n\",b=\"\",} 1").expect("valid");
    assert_eq!(scrape.samples[0].labels["a"], "x\"y\\z\n");
    assert_eq!(scrape.samples[0].labels["b"], "");
}

#[track_caller]
fn check_error(text: &str, expect: expect_test::Expect) {
    expect.assert_eq(&Scrape::parse(text).expect_err("invalid").to_string());
}

#[test]
fn errors_name_the_line() {
    check_error(
        "ok 1\n{x=\"1\"} 2",
        expect!["/metrics line 2: expected a metric name, found '{x=\"1\"} 2'"],
    );
    check_error(
        "m{x=1} 2",
        expect!["/metrics line 1: label 'x' value is not quoted"],
    );
    check_error(
        "m{x=\"1\" 2",
        expect!["/metrics line 1: expected ',' or '}' after a label, found '2'"],
    );
    check_error(
        "m 12abc",
        expect!["/metrics line 1: sample 'm' has value '12abc', not a number"],
    );
    check_error("m", expect!["/metrics line 1: sample 'm' has no value"]);
    check_error(
        "m 1 2 3",
        expect!["/metrics line 1: sample 'm' has text after its timestamp"],
    );
    check_error(
        "<html>oops</html>",
        expect!["/metrics line 1: expected a metric name, found '<html>oops</html>'"],
    );
}

#[test]
fn special_values() {
    let scrape = Scrape::parse("a +Inf\nb -Inf\nc NaN").expect("valid");
    assert_eq!(scrape.samples[0].value, f64::INFINITY);
    assert!(scrape.samples[2].value.is_nan());
}

proptest! {
    #[test]
    fn garbage_never_panics(text in "[ -~\n\u{80}-\u{10ffff}]{0,300}") {
        let _ = Scrape::parse(&text);
    }

    #[test]
    fn rendered_samples_round_trip(
        names in proptest::collection::vec("[a-z_:][a-z0-9_:]{0,12}", 1..5),
        engine in 0u32..8,
        value in 0u32..100_000,
    ) {
        let text: String = names
            .iter()
            .map(|n| format!("{n}{{engine=\"{engine}\"}} {value}\n"))
            .collect();
        let scrape = Scrape::parse(&text).expect("rendered exposition parses");
        prop_assert_eq!(scrape.samples.len(), names.len());
        for sample in &scrape.samples {
            prop_assert_eq!(sample.value, f64::from(value));
            prop_assert_eq!(&sample.labels[ENGINE_LABEL], &engine.to_string());
        }
    }
}
