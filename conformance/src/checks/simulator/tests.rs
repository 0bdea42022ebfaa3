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
    let pricing = SimPricing::new(
        deployment.attention.model().expect("a model"),
        GpuKind::H200,
    );
    assert_eq!(pricing.model.name, "deepseek-v2-lite");
    let config = serving_config(&deployment, &pricing).expect("the seed is modelled");
    let workload = workload(&load(16), 1.0).expect("every request succeeded");
    let first = predict(&config, cost(&pricing, &config), &workload, 0).expect("predicted");
    let again = predict(&config, cost(&pricing, &config), &workload, 0).expect("predicted");
    assert_eq!(first, again);
    assert_eq!(first.n, 16);
    assert!(
        first.ttft_ms > 0.0 && first.tpot_ms.is_some_and(|t| t > 0.0),
        "{first:?}"
    );
    // Arrivals twice as dense in simulated time (a time scale of 2) can only queue more.
    let denser = workload_at(&load(16), 2.0);
    let busier = predict(&config, cost(&pricing, &config), &denser, 0).expect("predicted");
    assert!(busier.ttft_ms >= first.ttft_ms, "{busier:?} vs {first:?}");
}

fn cost(pricing: &SimPricing, config: &ServingConfig) -> CostModel {
    pricing.cost(config).expect("the seed deployment is priced")
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
