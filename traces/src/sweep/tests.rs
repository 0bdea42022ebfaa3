//! Sweep CSV: rows round-trip byte for byte, and bad files are refused naming line and column.

use expect_test::expect;
use proptest::prelude::*;

use super::*;

fn row(candidate: u64, tokens_per_gpu: Option<f64>) -> SweepRow {
    SweepRow {
        schema_version: SWEEP_SCHEMA_VERSION,
        sweep: "00000000deadbeef".to_owned(),
        candidate,
        candidates: 3,
        kind: "afd".to_owned(),
        gpus: 4,
        nodes: 1,
        attention_ranks: 2,
        ffn_ranks: 2,
        attention_dp: 1,
        attention_tp: 2,
        ffn_dp: Some(1),
        ffn_tp: Some(2),
        expert_parallel: true,
        dbo_decode_token_threshold: Some(2),
        dbo_prefill_token_threshold: Some(12),
        cudagraph_mode: "FULL_DECODE_ONLY".to_owned(),
        cudagraph_capture_sizes: "8;16".to_owned(),
        max_num_seqs: 64,
        max_num_batched_tokens: 2048,
        cross_node: false,
        nics: None,
        warnings: "cross.shared-http-port".to_owned(),
        status: "ok".to_owned(),
        error: String::new(),
        outcome: Some("completed".to_owned()),
        completed: Some(1024),
        failed: Some(0),
        duration: Some(205.25),
        request_throughput: Some(4.99),
        output_throughput: Some(638.2),
        total_token_throughput: Some(5743.0),
        mean_ttft_ms: Some(60.5),
        median_ttft_ms: Some(55.0),
        std_ttft_ms: Some(3.25),
        p99_ttft_ms: Some(80.0),
        mean_tpot_ms: Some(8.5),
        median_tpot_ms: Some(8.25),
        std_tpot_ms: Some(0.5),
        p99_tpot_ms: Some(9.75),
        mean_itl_ms: Some(8.5),
        median_itl_ms: Some(8.25),
        std_itl_ms: Some(0.5),
        p99_itl_ms: Some(9.75),
        mean_e2el_ms: Some(1100.0),
        median_e2el_ms: Some(1090.0),
        std_e2el_ms: Some(20.0),
        p99_e2el_ms: Some(1200.0),
        output_tokens_per_s_per_gpu: tokens_per_gpu,
        total_tokens_per_s_per_gpu: tokens_per_gpu.map(|t| t * 9.0),
        attention_utilisation: Some(0.25),
        ffn_utilisation: Some(0.125),
        link_utilisation: Some(0.01),
        steps: Some(25000),
        graph_steps: Some(7000),
        eager_steps: Some(18000),
        dbo_steps: Some(18000),
        dbo_overlap: Some(0.8),
        attention_bound_share: Some(0.25),
        ffn_bound_share: Some(0.5),
        transfer_bound_share: Some(0.0),
        host_bound_share: Some(0.25),
        padded_row_share: Some(0.1),
        preemptions: Some(0),
        kv_blocks_per_engine: Some(27000),
        event_log_hash: Some("0123456789abcdef".to_owned()),
        ttft_slo_ms: None,
        tpot_slo_ms: Some(50.0),
        slo_stat: "p99".to_owned(),
        slo: "pass".to_owned(),
        capacity_by: String::new(),
        capacity: None,
        capacity_probes: None,
        goodput_requests_per_s: None,
        goodput_tokens_per_s_per_gpu: None,
        rank: Some(candidate + 1),
        frontier_tpot: Some(true),
        frontier_ttft: None,
        cf_t_attention_us: Some(40.0),
        cf_t_ffn_us: Some(60.0),
        cf_t_transfer_us: Some(10.0),
        cf_ubatches: Some(2.0),
        cf_pipeline_condition: Some("holds".to_owned()),
        cf_step_ms: Some(7.5),
        sim_step_ms: Some(8.0),
        cf_step_error: Some(-0.0625),
        af_ratio: Some(1.0),
        af_ratio_optimal: Some(1.5),
        af_regime: Some("attention".to_owned()),
        cf_decode_tokens_per_s_per_gpu: Some(100.0),
        sim_decode_tokens_per_s_per_gpu: Some(90.0),
        cf_throughput_error: Some(0.111),
        cross_check: Some("ok".to_owned()),
        cross_check_reason: String::new(),
        attention_args: "CUDA_VISIBLE_DEVICES=0,1 model --tensor-parallel-size 2 --additional-config '{\"afd\": {}}'".to_owned(),
        ffn_args: "CUDA_VISIBLE_DEVICES=2,3 model".to_owned(),
    }
}

#[test]
fn rows_round_trip_byte_for_byte() {
    let rows = vec![row(0, Some(159.5)), row(1, None), row(2, Some(1.0 / 3.0))];
    let bytes = write_sweep_csv(&rows).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let back = read_sweep_csv(&text, "a.csv").unwrap();
    assert_eq!(back, rows);
    assert_eq!(write_sweep_csv(&back).unwrap(), bytes);
}

#[test]
fn the_header_lists_the_columns_in_field_order() {
    let bytes = write_sweep_csv(&[row(0, Some(1.0))]).unwrap();
    let text = String::from_utf8(bytes).unwrap();
    let header = text.lines().next().unwrap();
    let columns: Vec<&str> = header.split(',').collect();
    assert_eq!(columns.len(), 96);
    assert_eq!(
        &columns[..4],
        ["schema_version", "sweep", "candidate", "candidates"]
    );
    assert_eq!(columns.last(), Some(&"ffn_args"));
}

#[track_caller]
fn check_error(text: &str, expect: expect_test::Expect) {
    let err = read_sweep_csv(text, "shard.csv").unwrap_err();
    expect.assert_eq(&err.to_string());
}

#[test]
fn bad_files_name_the_line_and_column() {
    let good = String::from_utf8(write_sweep_csv(&[row(0, Some(1.0))]).unwrap()).unwrap();
    let header = good.lines().next().unwrap();
    let body = good.lines().nth(1).unwrap();
    check_error(
        &format!("{header}\n{}\n", body.replacen(",0,3,", ",zero,3,", 1)),
        expect!["shard.csv: line 2, column 3 (candidate): invalid digit found in string"],
    );
    check_error(
        &format!("{header}\n{}\n", body.replacen("4,", "7,", 1)),
        expect![[r#"shard.csv:2: schema_version 7, this build reads 4"#]],
    );
    check_error(&format!("{header}\n"), expect![[r#"shard.csv: no rows"#]]);
    check_error(
        &format!("{header},extra\n{body},1\n"),
        expect![
            "shard.csv: line 2: unknown field `extra`, expected one of `schema_version`, `sweep`, `candidate`, `candidates`, `kind`, `gpus`, `nodes`, `attention_ranks`, `ffn_ranks`, `attention_dp`, `attention_tp`, `ffn_dp`, `ffn_tp`, `expert_parallel`, `dbo_decode_token_threshold`, `dbo_prefill_token_threshold`, `cudagraph_mode`, `cudagraph_capture_sizes`, `max_num_seqs`, `max_num_batched_tokens`, `cross_node`, `nics`, `warnings`, `status`, `error`, `outcome`, `completed`, `failed`, `duration`, `request_throughput`, `output_throughput`, `total_token_throughput`, `mean_ttft_ms`, `median_ttft_ms`, `std_ttft_ms`, `p99_ttft_ms`, `mean_tpot_ms`, `median_tpot_ms`, `std_tpot_ms`, `p99_tpot_ms`, `mean_itl_ms`, `median_itl_ms`, `std_itl_ms`, `p99_itl_ms`, `mean_e2el_ms`, `median_e2el_ms`, `std_e2el_ms`, `p99_e2el_ms`, `output_tokens_per_s_per_gpu`, `total_tokens_per_s_per_gpu`, `attention_utilisation`, `ffn_utilisation`, `link_utilisation`, `steps`, `graph_steps`, `eager_steps`, `dbo_steps`, `dbo_overlap`, `attention_bound_share`, `ffn_bound_share`, `transfer_bound_share`, `host_bound_share`, `padded_row_share`, `preemptions`, `kv_blocks_per_engine`, `event_log_hash`, `ttft_slo_ms`, `tpot_slo_ms`, `slo_stat`, `slo`, `capacity_by`, `capacity`, `capacity_probes`, `goodput_requests_per_s`, `goodput_tokens_per_s_per_gpu`, `rank`, `frontier_tpot`, `frontier_ttft`, `cf_t_attention_us`, `cf_t_ffn_us`, `cf_t_transfer_us`, `cf_ubatches`, `cf_pipeline_condition`, `cf_step_ms`, `sim_step_ms`, `cf_step_error`, `af_ratio`, `af_ratio_optimal`, `af_regime`, `cf_decode_tokens_per_s_per_gpu`, `sim_decode_tokens_per_s_per_gpu`, `cf_throughput_error`, `cross_check`, `cross_check_reason`, `attention_args`, `ffn_args`"
        ],
    );
    check_error(
        &format!("{header}\n{body},1\n"),
        expect![
            "shard.csv: line 2: CSV error: record 1 (line: 2, byte: 1360): found record with 97 fields, but the previous record has 96 fields"
        ],
    );
}

#[test]
fn infinite_nan_and_negative_metrics_are_refused() {
    for value in [f64::INFINITY, f64::NAN, -2.0] {
        let text = String::from_utf8(write_sweep_csv(&[row(0, Some(value))]).unwrap()).unwrap();
        let err = read_sweep_csv(&text, "shard.csv").unwrap_err().to_string();
        assert!(
            err.starts_with("shard.csv:2: column output_tokens_per_s_per_gpu is ")
                && err.ends_with("; a metric must be a finite number >= 0"),
            "{value}: {err}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Mangled files (bytes flipped, cut, lines swapped) are refused with an error or read, never
    /// a panic; whatever reads writes back to a file that reads the same.
    #[test]
    fn mangled_files_never_panic(
        cut in 0usize..3000,
        flips in proptest::collection::vec((0usize..3000, any::<u8>()), 0..6),
    ) {
        let good = write_sweep_csv(&[row(0, Some(2.5)), row(1, None)]).unwrap();
        let mut bytes = good.clone();
        for (at, byte) in flips {
            if !bytes.is_empty() {
                let at = at % bytes.len();
                bytes[at] = byte;
            }
        }
        bytes.truncate(cut.max(1).min(bytes.len()));
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(rows) = read_sweep_csv(&text, "m.csv") {
            let again = write_sweep_csv(&rows).unwrap();
            let reread = read_sweep_csv(std::str::from_utf8(&again).unwrap(), "m.csv").unwrap();
            prop_assert_eq!(reread.len(), rows.len());
        }
    }
}
