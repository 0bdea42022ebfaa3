//! Schedules, prompt lengths and the summary arithmetic, without a server.

use super::*;
use crate::bench::stats::{Metric, percentile, samples_ms, summary};

#[test]
fn infinite_rate_sends_everything_at_once() {
    assert_eq!(
        arrival_schedule(3, f64::INFINITY, 1.0, 0).expect("valid"),
        vec![0.0; 3]
    );
}

#[test]
fn poisson_schedule_has_the_asked_mean_rate() {
    let schedule = arrival_schedule(20_000, 50.0, 1.0, 7).expect("valid");
    let mean_gap = schedule.last().expect("non-empty") / (schedule.len() - 1) as f64;
    assert!((mean_gap - 0.02).abs() < 0.001, "mean gap {mean_gap}");
    assert!(schedule.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(
        schedule,
        arrival_schedule(20_000, 50.0, 1.0, 7).expect("valid")
    );
}

#[test]
fn bad_rates_are_refused_naming_the_flag() {
    let err = arrival_schedule(3, 0.0, 1.0, 0).expect_err("zero rate");
    assert!(err.to_string().contains("--request-rate"), "{err}");
    let err = arrival_schedule(3, 5.0, 0.0, 0).expect_err("zero burstiness");
    assert!(err.to_string().contains("--burstiness"), "{err}");
}

#[test]
fn percentiles_follow_numpy_linear_interpolation() {
    let sorted = [1.0, 2.0, 3.0, 4.0];
    assert_eq!(percentile(&sorted, 50.0), 2.5);
    assert!((percentile(&sorted, 99.0) - 3.97).abs() < 1e-12);
    assert_eq!(percentile(&[], 99.0), 0.0);
}

fn record(ttft: f64, itls: &[f64], tokens: u64) -> RequestRecord {
    RequestRecord {
        success: true,
        input_len: 10,
        ttft_s: ttft,
        itls_s: itls.to_vec(),
        latency_s: ttft + itls.iter().sum::<f64>(),
        completion_tokens: Some(tokens),
        prompt_tokens: Some(10),
        ..RequestRecord::default()
    }
}

#[test]
fn summary_uses_vllm_field_names_and_arithmetic() {
    let result = BenchResult {
        config: BenchConfig::new("http://127.0.0.1:1"),
        model: "m".to_owned(),
        duration_s: 2.0,
        records: vec![
            record(0.1, &[0.02, 0.02, 0.02], 4),
            record(0.3, &[0.04], 2),
            RequestRecord {
                error: "boom".to_owned(),
                ..RequestRecord::default()
            },
        ],
        max_concurrent_requests: 2,
        metrics_before: None,
        metrics_after: None,
    };
    let tpot = samples_ms(&result, Metric::Tpot);
    assert_eq!(tpot.len(), 2);
    assert!((tpot[0] - 20.0).abs() < 1e-9 && (tpot[1] - 40.0).abs() < 1e-9);
    let json = summary(&result, &[99.0], false);
    assert_eq!(json["completed"], 2);
    assert_eq!(json["failed"], 1);
    assert_eq!(json["total_output_tokens"], 6);
    assert_eq!(json["total_input_tokens"], 20);
    assert_eq!(json["request_throughput"], 1.0);
    assert!((json["mean_ttft_ms"].as_f64().expect("number") - 200.0).abs() < 1e-9);
    assert!(json.get("p99_itl_ms").is_some());
    assert!(json.get("median_e2el_ms").is_some());
    assert!(
        json.get("ttfts").is_none(),
        "per-request arrays only when detailed"
    );
    assert!(json.get("conservation").is_none());
}
