//! Unit tests of the `--save-result` fields: vLLM's date format, percentile keys and interpolation,
//! the per-second peaks, goodput, and that fields already in the report keep their value.

use std::time::{Duration, UNIX_EPOCH};

use super::*;

fn row(send_ms: f64, first_ms: f64, finish_ms: f64, tokens: u32) -> RequestRow {
    let tpot = (tokens > 1).then(|| (finish_ms - first_ms) / f64::from(tokens - 1));
    RequestRow {
        request: 0,
        engine: Some(0),
        input_tokens: 10,
        output_tokens: tokens,
        intended_send_ms: send_ms,
        send_ms,
        first_token_ms: Some(first_ms),
        finish_ms: Some(finish_ms),
        ttft_ms: Some(first_ms - send_ms),
        tpot_ms: tpot,
        e2el_ms: Some(finish_ms - send_ms),
        preemptions: 0,
        error: String::new(),
    }
}

#[test]
fn the_date_is_vllms_format_in_utc() {
    // 2026-12-01 21:05:09 UTC.
    let at = UNIX_EPOCH + Duration::from_secs(1_796_159_109);
    assert_eq!(date(at), "20261201-210509");
    assert_eq!(date(UNIX_EPOCH), "19700101-000000");
}

#[test]
fn percentiles_interpolate_as_numpy_and_name_as_vllm() {
    let sorted = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile(&sorted, 50.0), 2.5);
    assert_eq!(percentile(&sorted, 100.0), 4.0);
    assert_eq!(percentile(&[], 99.0), 0.0);
    assert_eq!(percentile_word(99.0), "99");
    assert_eq!(percentile_word(99.9), "99.9");
}

#[test]
fn fields_are_added_at_the_top_level_without_replacing_the_reports() {
    let rows = vec![row(0.0, 100.0, 400.0, 4), row(0.0, 200.0, 1_500.0, 2)];
    let percentiles = Percentiles::parse("ttft,e2el", "50,99").unwrap();
    let goodput = [Objective::parse("ttft:150").unwrap()];
    let inputs = SaveResultInputs {
        model_id: "deepseek-v2-lite",
        num_prompts: 2,
        request_rate: "inf",
        burstiness: 1.0,
        ramp_up: None,
        max_concurrency: Some(32),
        percentiles: &percentiles,
        goodput: &goodput,
    };
    let report = r#"{"duration": 2.0, "p99_ttft_ms": 7.0}"#;
    let text = add_save_result_fields(report, &rows, &inputs, UNIX_EPOCH).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["date"], "19700101-000000");
    assert_eq!(value["model_id"], "deepseek-v2-lite");
    assert_eq!(value["num_prompts"], 2);
    assert_eq!(value["request_rate"], "inf");
    assert_eq!(value["burstiness"], 1.0);
    assert_eq!(value["max_concurrency"], 32);
    assert_eq!(value["p50_ttft_ms"], 150.0);
    assert_eq!(value["p99_ttft_ms"], 7.0, "the simulator's own p99 stays");
    assert_eq!(value["p50_e2el_ms"], 950.0);
    assert_eq!(value["request_goodput"], 0.5);
    assert_eq!(value["max_output_tokens_per_s"], 5.0);
    assert_eq!(value["max_concurrent_requests"], 2);
}

#[test]
fn without_goodput_it_is_null_and_bad_flags_are_refused() {
    let percentiles = Percentiles::parse("ttft", "99").unwrap();
    let inputs = SaveResultInputs {
        model_id: "m",
        num_prompts: 0,
        request_rate: "5",
        burstiness: 1.0,
        ramp_up: None,
        max_concurrency: None,
        percentiles: &percentiles,
        goodput: &[],
    };
    let text = add_save_result_fields("{}", &[], &inputs, UNIX_EPOCH).unwrap();
    let value: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(value["request_goodput"], Value::Null);
    assert_eq!(value["request_rate"], 5.0);
    assert_eq!(value["max_concurrency"], Value::Null);
    assert!(Percentiles::parse("ttft,speed", "99").is_err());
    assert!(Percentiles::parse("ttft", "101").is_err());
    assert!(Objective::parse("itl:5").is_err());
    assert!(Objective::parse("ttft:-1").is_err());
}
