//! The report's JSON keeps vLLM's field names at the top level.

use super::*;

fn zero_bench() -> BenchSummary {
    serde_json::from_value(serde_json::json!({
        "completed": 2, "failed": 0, "duration": 1.5, "total_input_tokens": 10, "total_output_tokens": 4,
        "request_throughput": 1.0, "output_throughput": 2.0, "total_token_throughput": 3.0,
        "mean_ttft_ms": 1.0, "median_ttft_ms": 1.0, "std_ttft_ms": 0.0, "p99_ttft_ms": 1.0,
        "mean_tpot_ms": 1.0, "median_tpot_ms": 1.0, "std_tpot_ms": 0.0, "p99_tpot_ms": 1.0,
        "mean_itl_ms": 1.0, "median_itl_ms": 1.0, "std_itl_ms": 0.0, "p99_itl_ms": 1.0,
        "mean_e2el_ms": 1.0, "median_e2el_ms": 1.0, "std_e2el_ms": 0.0, "p99_e2el_ms": 1.0
    }))
    .unwrap()
}

#[test]
fn bench_fields_are_flattened_to_the_top_level() {
    let report = sample_report();
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["completed"], 2);
    assert_eq!(json["p99_e2el_ms"], 1.0);
    assert!(json.get("benchmark").is_none());
    let back: PredictReport = serde_json::from_value(json).unwrap();
    assert_eq!(back, report);
    let table = report.to_table();
    assert!(
        table.starts_with("============ Serving Benchmark Result ============\n"),
        "{table}"
    );
    assert!(
        table.contains("Successful requests:                     2"),
        "{table}"
    );
}

/// A plain server is one server, not a pair of one Attention and one FFN rank; a report written
/// before the placement field reads as a pair.
#[test]
fn a_plain_server_reports_as_one_server() {
    let mut report = sample_report();
    let pair = report.to_table();
    assert!(
        pair.contains("1A1F attention DP1xTP1, ffn DP1xTP1 EP on h200"),
        "{pair}"
    );
    report.deployment.placement = "colocated".to_owned();
    report.deployment.gpus = 1;
    let plain = report.to_table();
    assert!(
        plain.contains("one server DP1xTP1 EP on 1 x h200"),
        "{plain}"
    );
    assert!(
        !plain.contains("1A1F") && !plain.contains("-AFD-"),
        "{plain}"
    );
    let mut json: serde_json::Value = serde_json::from_str(&sample_report().to_json()).unwrap();
    json["deployment"]
        .as_object_mut()
        .unwrap()
        .remove("placement");
    let old: PredictReport = serde_json::from_value(json).unwrap();
    assert_eq!(old.deployment.placement, "disaggregated");
}

fn sample_report() -> PredictReport {
    PredictReport {
        format: REPORT_FORMAT.to_owned(),
        schema_version: REPORT_SCHEMA_VERSION,
        seed: 0,
        event_log_hash: "0".repeat(16),
        outcome: "completed".to_owned(),
        events: 3,
        model: "m".to_owned(),
        deployment: DeploymentSummary {
            placement: "disaggregated".to_owned(),
            attention_dp: 1,
            attention_tp: 1,
            ffn_dp: 1,
            ffn_tp: 1,
            expert_parallel: true,
            attention_ranks: 1,
            ffn_ranks: 1,
            gpus: 2,
            gpu: "h200".to_owned(),
            rules: "latest".to_owned(),
            max_num_seqs: 1,
            max_num_batched_tokens: 1,
            dbo: false,
            dbo_decode_token_threshold: None,
            dbo_prefill_token_threshold: None,
            cudagraph_mode: "eager".to_owned(),
            cudagraph_capture_sizes: vec![],
            gpu_memory_utilization: 0.9,
            block_size: 64,
            kv_blocks_per_engine: 10,
        },
        workload: WorkloadSummary {
            num_prompts: 2,
            request_rate: None,
            burstiness: 1.0,
            max_concurrency: None,
            dataset: "random".to_owned(),
        },
        benchmark: zero_bench(),
        per_gpu: PerGpu {
            output_tokens_per_s_per_gpu: 1.0,
            total_tokens_per_s_per_gpu: 1.5,
        },
        utilisation: Utilisation {
            attention: 0.5,
            ffn: 0.5,
            links: 0.1,
        },
        steps: StepSummary {
            total: 1,
            graph: 0,
            eager: 1,
            ffn_graph: 0,
            dbo: 0,
            dbo_hazards: 0,
            attention_bound_share: 1.0,
            ffn_bound_share: 0.0,
            transfer_bound_share: 0.0,
            host_bound_share: 0.0,
            dbo_overlap: 0.0,
            single_stage_overlap: 0.0,
            padded_row_share: 0.0,
            preemptions: 0,
            oversized_messages: 0,
            shortcut_layers: 0,
        },
        calibration: None,
        costs: vec![],
        afd_link: None,
    }
}
