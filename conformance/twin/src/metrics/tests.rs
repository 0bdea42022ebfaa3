//! The Prometheus rendering: names, labels, cumulative buckets and the faults that skew it.

use super::*;

fn sample(skew: MetricsSkew) -> Metrics {
    let metrics = Metrics::new("m\"x", 2, skew);
    metrics.with(|engines| {
        engines[1].running = 3;
        engines[1].prompt_tokens = 10;
        engines[1].ttft.observe(0.002);
        engines[1].ttft.observe(5000.0);
    });
    metrics.record_finished(1, FinishReason::Length);
    metrics
}

fn lines_with<'a>(text: &'a str, needle: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(needle)).collect()
}

#[test]
fn every_engine_has_labelled_series() {
    let text = sample(MetricsSkew::default()).render();
    assert_eq!(
        lines_with(&text, "vllm:num_requests_running{"),
        vec![
            "vllm:num_requests_running{engine=\"0\",model_name=\"m\\\"x\"} 0.0",
            "vllm:num_requests_running{engine=\"1\",model_name=\"m\\\"x\"} 3.0",
        ]
    );
    assert!(text.contains(
        "vllm:request_success_total{engine=\"1\",finished_reason=\"length\",model_name=\"m\\\"x\"} 1.0"
    ));
    assert!(text.contains("vllm:prompt_tokens_total{engine=\"1\",model_name=\"m\\\"x\"} 10.0"));
}

#[test]
fn histogram_buckets_are_cumulative_with_inf() {
    let text = sample(MetricsSkew::default()).render();
    let engine1: Vec<&str> = lines_with(
        &text,
        "vllm:time_to_first_token_seconds_bucket{engine=\"1\"",
    );
    assert_eq!(engine1.len(), TTFT_BUCKETS_S.len() + 1);
    assert!(engine1[0].ends_with("le=\"0.001\",model_name=\"m\\\"x\"} 0.0"));
    assert!(engine1[1].ends_with("le=\"0.005\",model_name=\"m\\\"x\"} 1.0"));
    assert!(engine1.last().expect("has +Inf").contains("le=\"+Inf\""));
    assert!(engine1.last().expect("has +Inf").ends_with(" 2.0"));
    assert!(text.contains(
        "vllm:time_to_first_token_seconds_count{engine=\"1\",model_name=\"m\\\"x\"} 2.0"
    ));
}

#[test]
fn wrong_engine_labels_adds_a_phantom_engine() {
    let text = sample(MetricsSkew {
        extra_engine: true,
        double_success: false,
    })
    .render();
    assert_eq!(lines_with(&text, "vllm:num_requests_running{").len(), 3);
    assert!(text.contains("vllm:num_requests_running{engine=\"2\""));
}

#[test]
fn metrics_not_conserved_double_counts_success_only() {
    let text = sample(MetricsSkew {
        extra_engine: false,
        double_success: true,
    })
    .render();
    assert!(text.contains(
        "vllm:request_success_total{engine=\"1\",finished_reason=\"length\",model_name=\"m\\\"x\"} 2.0"
    ));
    assert!(text.contains("vllm:prompt_tokens_total{engine=\"1\",model_name=\"m\\\"x\"} 10.0"));
}

#[test]
fn score_is_four_waiting_plus_running() {
    let metrics = Metrics::new("m", 1, MetricsSkew::default());
    metrics.with(|engines| {
        engines[0].waiting = 2;
        engines[0].running = 3;
        assert_eq!(engines[0].score(), 11);
    });
}

#[test]
fn the_timing_info_follows_vllm_series_only_when_given() {
    let info = crate::timing::sim::TimingInfo {
        model: "deepseek-v2-lite".to_owned(),
        gpu: afd_sim::model::hardware::GpuKind::H200,
        seed: 0,
        time_scale: 1.0,
        kernel_model: false,
    };
    let plain = sample(MetricsSkew::default()).render();
    assert!(!plain.contains("afd_twin"));
    let text = Metrics::new("m", 1, MetricsSkew::default())
        .with_timing(info)
        .render();
    assert!(text.ends_with(
        "afd_twin_timing_info{gpu=\"h200\",model=\"deepseek-v2-lite\",pricing=\"vllm-host-pace\",seed=\"0\",time_scale=\"1\"} 1.0\n"
    ));
    let scrape = afd_conformance::prometheus::Scrape::parse(&text).expect("a valid exposition");
    assert_eq!(scrape.engine_labels().len(), 1, "not a vllm: series");
}
