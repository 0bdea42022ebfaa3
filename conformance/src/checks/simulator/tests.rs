//! The simulator check's pure parts: the load as the simulator's workload, the measured means at a time
//! scale, the prediction on the seed deployment, and the verdict.

use expect_test::expect;

use afd_sim::deployment::{Deployment, RecipeOptions};
use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::RuleSet;

use super::*;
use crate::bench::{BenchConfig, RequestRecord};
use crate::report::Status;

/// A load of `n` requests at 20 requests/s, concurrency 4, as the suite configures it; every request
/// succeeded with 1 ms per token from a 10 ms first token (real time).
fn load(n: usize) -> BenchResult {
    let mut config = BenchConfig::new("http://127.0.0.1:1");
    config.num_prompts = n;
    config.random_input_len = 16;
    config.random_output_len = 8;
    config.random_range_ratio = 0.5;
    config.request_rate = 20.0;
    config.max_concurrency = Some(4);
    config.ignore_eos = true;
    config.seed = 3;
    let drawn = random_requests(&config).expect("valid settings");
    let records = drawn
        .iter()
        .enumerate()
        .map(|(index, &(at, input, output))| RequestRecord {
            index,
            input_len: input,
            max_tokens: output,
            success: true,
            intended_start_s: at,
            ttft_s: 0.010,
            itls_s: vec![0.001; output as usize - 1],
            latency_s: 0.010 + 0.001 * f64::from(output - 1),
            prompt_tokens: Some(u64::from(input) + 1),
            completion_tokens: Some(u64::from(output)),
            ..RequestRecord::default()
        })
        .collect();
    BenchResult {
        config,
        model: "m".to_owned(),
        duration_s: 1.0,
        records,
        max_concurrent_requests: 4,
        metrics_before: None,
        metrics_after: None,
    }
}

#[test]
fn the_workload_is_the_load_in_simulated_time() {
    let load = load(6);
    let drawn = random_requests(&load.config).expect("valid settings");
    let workload = workload(&load, 0.5).expect("every request succeeded");
    assert_eq!(workload.max_concurrency, Some(4));
    assert_eq!(workload.request_rate, Some(10.0));
    for ((request, record), (at, _, output)) in
        workload.requests.iter().zip(&load.records).zip(drawn)
    {
        // Half a real second per simulated second: simulated arrivals are twice as late.
        assert!((request.intended_send.as_secs_f64() - 2.0 * at).abs() < 1e-9);
        assert_eq!(
            u64::from(request.input_tokens),
            record.prompt_tokens.expect("usage")
        );
        assert_eq!(request.output_tokens, output);
    }
}

#[test]
fn a_failed_request_leaves_no_workload() {
    let mut load = load(3);
    load.records[1].success = false;
    load.records[1].error = "timed out after 3 s".to_owned();
    expect!["1 of 3 requests of the open-loop load failed (first: request 1: timed out after 3 s); the prediction needs all of them"]
        .assert_eq(&workload(&load, 1.0).expect_err("a request failed"));
}

#[test]
fn measured_means_are_in_simulated_time() {
    let measured = measured(&load(5), 0.5);
    assert_eq!(measured.n, 5);
    assert!((measured.ttft_ms - 20.0).abs() < 1e-9, "{measured:?}");
    assert!((measured.tpot_ms.expect("outputs above one token") - 2.0).abs() < 1e-9);
}

#[test]
fn the_seed_deployment_has_a_deterministic_prediction() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh"
    );
    let text = std::fs::read_to_string(path).expect("the seed recipe is readable");
    let deployment = Deployment::from_recipe(&text, &RecipeOptions::default(), RuleSet::Latest)
        .expect("the seed recipe parses");
    let model = priced_model(
        deployment.attention.model().expect("a model"),
        "deepseek-v2-lite",
    )
    .expect("a shipped model");
    assert_eq!(model.name, "deepseek-v2-lite");
    let simulate =
        || simulated(&deployment, &model, GpuKind::H200, false).expect("the seed is modelled");
    let (config, cost) = simulate();
    let workload = workload(&load(16), 1.0).expect("every request succeeded");
    let first = predict(&config, cost, &workload, 0).expect("predicted");
    let again = predict(&config, simulate().1, &workload, 0).expect("predicted");
    assert_eq!(first, again);
    // A twin that says it prices from kernels alone (`pricing="kernel-model"`) is predicted so:
    // its steps without graphs take the lean host costs, far below vLLM's pace.
    let (_, kernels) =
        simulated(&deployment, &model, GpuKind::H200, true).expect("the seed is modelled");
    let lean = predict(&config, kernels, &workload, 0).expect("predicted");
    assert!(
        lean.ttft_ms * 2.0 < first.ttft_ms,
        "{lean:?} against {first:?}"
    );
    assert_eq!(first.n, 16);
    assert!(
        first.ttft_ms > 0.0 && first.tpot_ms.is_some_and(|t| t > 0.0),
        "{first:?}"
    );
    // Arrivals twice as dense in simulated time (a time scale of 2) reach the prediction. Its steps
    // without graphs are host-bound at vLLM's pace, so denser prompts may share one prefill step and
    // the TTFT need not grow.
    let denser = workload_at(&load(16), 2.0);
    let busier = predict(&config, simulate().1, &denser, 0).expect("predicted");
    assert_ne!(busier, first);
    assert_eq!(busier.n, 16);
}

fn workload_at(load: &BenchResult, time_scale: f64) -> Workload {
    workload(load, time_scale).expect("every request succeeded")
}

#[track_caller]
fn check_judge(
    measured: (f64, Option<f64>),
    predicted: (f64, Option<f64>),
    expect: expect_test::Expect,
) {
    let latencies = |(ttft_ms, tpot_ms): (f64, Option<f64>)| Latencies {
        n: 8,
        ttft_ms,
        tpot_ms,
    };
    let outcome = judge(
        latencies(measured),
        latencies(predicted),
        0.25,
        "8 requests",
    );
    let status = match outcome.status {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Indeterminate => "indeterminate",
        Status::Skipped => "skipped",
    };
    expect.assert_eq(&format!(
        "{status}: {} | {}",
        outcome.message,
        outcome.counterexample.unwrap_or_default()
    ));
}

#[test]
fn judged_by_the_worst_mean_against_the_tolerance() {
    check_judge(
        (9.0, Some(4.4)),
        (8.0, Some(4.0)),
        expect![
            "pass: mean TTFT 9.000 ms, afd-sim 8.000 ms (+12.5 %), mean TPOT 4.400 ms, afd-sim 4.000 ms (+10.0 %): within ±25 % over 8 requests | "
        ],
    );
    check_judge(
        (8.0, Some(34.0)),
        (8.0, Some(4.0)),
        expect![
            "fail: mean TPOT differs from afd-sim's prediction by +750.0 %, more than --max-sim-deviation 0.25 | mean TTFT 8.000 ms, afd-sim 8.000 ms (+0.0 %), mean TPOT 34.000 ms, afd-sim 4.000 ms (+750.0 %); 8 requests"
        ],
    );
    check_judge(
        (5.0, None),
        (8.0, Some(4.0)),
        expect![
            "fail: mean TTFT differs from afd-sim's prediction by -37.5 %, more than --max-sim-deviation 0.25 | mean TTFT 5.000 ms, afd-sim 8.000 ms (-37.5 %), mean TPOT not compared (no request of more than one token); 8 requests"
        ],
    );
}

#[test]
fn the_twin_timing_reads_from_a_strict_scrape() {
    let text = "vllm:num_requests_running{engine=\"0\"} 0.0\n# HELP afd_twin_timing_info How afd-twin times tokens.\n# TYPE afd_twin_timing_info gauge\nafd_twin_timing_info{gpu=\"h100\",model=\"deepseek \\\"v2\\\" lite\",seed=\"7\",time_scale=\"0.25\"} 1.0\n";
    let scrape = Scrape::parse(text).expect("a valid exposition");
    let expected = TwinTiming {
        model: "deepseek \"v2\" lite".to_owned(),
        gpu: GpuKind::H100,
        seed: 7,
        time_scale: 0.25,
        kernel_model: false,
    };
    assert_eq!(TwinTiming::from_scrape(&scrape), Some(Ok(expected)));
    let vllm = Scrape::parse("vllm:num_requests_running{engine=\"0\"} 0.0").expect("valid");
    assert_eq!(TwinTiming::from_scrape(&vllm), None);
}

#[track_caller]
fn check_twin_timing(labels: &str, expect: expect_test::Expect) {
    let scrape = Scrape::parse(&format!("{TWIN_TIMING_METRIC}{{{labels}}} 1")).expect("valid");
    let read = TwinTiming::from_scrape(&scrape).expect("the series is there");
    expect.assert_eq(&read.expect_err("a label does not read"));
}

#[test]
fn a_twin_timing_that_does_not_read_names_its_label() {
    check_twin_timing(
        r#"gpu="h200",seed="0",time_scale="1""#,
        expect!["afd_twin_timing_info has no model label"],
    );
    check_twin_timing(
        r#"gpu="tpu",model="m",seed="0",time_scale="1""#,
        expect![[r#"afd_twin_timing_info gpu="tpu" is no GPU afd-sim knows"#]],
    );
    check_twin_timing(
        r#"gpu="h200",model="m",seed="-1",time_scale="1""#,
        expect![[r#"afd_twin_timing_info seed="-1" is not an unsigned integer"#]],
    );
    check_twin_timing(
        r#"gpu="h200",model="m",seed="0",time_scale="-2""#,
        expect![[r#"afd_twin_timing_info time_scale="-2" is not a finite number >= 0"#]],
    );
    check_twin_timing(
        r#"gpu="h200",model="m",pricing="fast",seed="0",time_scale="1""#,
        expect![[
            r#"afd_twin_timing_info pricing="fast" is neither kernel-model nor vllm-host-pace"#
        ]],
    );
}

#[test]
fn the_priced_model_is_a_shipped_name_or_the_named_folders_config() {
    let shipped =
        priced_model("/path/model_weights/DeepSeek-V2-Lite", "deepseek-v2-lite").expect("shipped");
    assert_eq!(shipped, ModelArch::deepseek_v2_lite());
    let folder = tempfile::tempdir().expect("temp dir");
    let served = folder.path().join("Tiny-MoE");
    std::fs::create_dir(&served).expect("model folder");
    let config = afd_traces::model_config::builtin_model("qwen3-30b-a3b").expect("shipped");
    std::fs::write(served.join("config.json"), config).expect("config.json");
    let served = served.to_str().expect("UTF-8");
    let read = priced_model(served, "Tiny-MoE").expect("the folder's config");
    assert_eq!(read.name, "Tiny-MoE");
    assert_eq!(
        read.config,
        ModelArch::builtin("qwen3-30b-a3b")
            .expect("shipped")
            .expect("valid")
            .config
    );
    let err = priced_model(served, "Other-Model").expect_err("neither");
    assert!(err.contains("neither a shipped model"), "{err}");
}
