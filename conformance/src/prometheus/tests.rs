//! Tests of the Prometheus text parser, strict and lenient, and the sums the routing checks and the load
//! generator take.

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

/// What the load generator reads: odd lines among vLLM's series.
const LENIENT: &str = r#"# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="a \"b\""} 3.0
vllm:request_success_total{engine="1",finished_reason="length",model_name="a \"b\""} 4.0
vllm:request_success_total{engine="10",finished_reason="stop",model_name="a \"b\""} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 7.0
plain_metric 2.5
garbage line {
"#;

#[test]
fn lenient_sums_by_label_with_numeric_order() {
    let scrape = Scrape::parse_lenient(LENIENT);
    assert_eq!(scrape.sum("vllm:request_success_total"), Some(8.0));
    assert_eq!(
        scrape.sum_by("vllm:request_success_total", "engine"),
        vec![
            ("0".to_owned(), 3.0),
            ("1".to_owned(), 4.0),
            ("10".to_owned(), 1.0)
        ]
    );
    assert_eq!(scrape.samples[0].label("model_name"), Some("a \"b\""));
    assert_eq!(scrape.sum("plain_metric"), Some(2.5));
    assert_eq!(scrape.samples.len(), 5);
}

#[test]
fn lenient_keeps_exactly_what_strict_accepts() {
    // The line the lenient reader skips is the one the strict reader names.
    check_error(
        LENIENT,
        expect!["/metrics line 8: sample 'garbage' has value 'line', not a number"],
    );
    let clean: String = LENIENT
        .lines()
        .filter(|l| !l.starts_with("garbage"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        Scrape::parse(&clean).expect("valid without the garbage line"),
        Scrape::parse_lenient(LENIENT)
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
    fn lenient_never_panics(text in "\\PC{0,200}") {
        let _ = Scrape::parse_lenient(&text);
    }

    #[test]
    fn lenient_reads_the_valid_lines_strict_reads(
        lines in proptest::collection::vec(
            prop_oneof![
                ("[a-z_:][a-z0-9_:]{0,8}", 0u32..8, 0u32..1000)
                    .prop_map(|(n, e, v)| (true, format!("{n}{{engine=\"{e}\"}} {v}"))),
                // No metric name starts with '{', so these lines are never samples.
                "\\{[ -~]{0,30}".prop_map(|g| (false, g)),
            ],
            0..12,
        ),
    ) {
        let mixed: String = lines.iter().map(|(_, l)| format!("{l}\n")).collect();
        let valid: String = lines
            .iter()
            .filter(|(ok, _)| *ok)
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        let strict = Scrape::parse(&valid).expect("rendered samples parse");
        prop_assert_eq!(Scrape::parse_lenient(&mixed), strict);
        if lines.iter().any(|(ok, _)| !ok) {
            prop_assert!(Scrape::parse(&mixed).is_err());
        }
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
