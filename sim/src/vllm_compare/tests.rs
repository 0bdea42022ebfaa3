//! Tests of reading a bench result's workload and a plain server's deployment.

use super::*;

fn model() -> ModelArch {
    ModelArch::deepseek_v2_lite()
}

fn words(text: &str) -> Vec<String> {
    text.split(' ').map(str::to_owned).collect()
}

#[test]
fn the_setting_is_read_from_a_bench_result() {
    let result = serde_json::json!({
        "completed": 80, "num_prompts": 80, "total_input_tokens": 20480, "total_output_tokens": 10240,
        "request_rate": 8.0, "burstiness": 1.0, "max_concurrency": null
    });
    let s = bench_setting(&result).unwrap();
    assert_eq!(
        (
            s.num_prompts,
            s.input_len,
            s.output_len,
            s.request_rate,
            s.max_concurrency
        ),
        (80, 256, 128, Some(8.0), None)
    );
    let saturated = serde_json::json!({
        "completed": 4, "total_input_tokens": 4, "total_output_tokens": 4, "request_rate": "inf", "max_concurrency": 64
    });
    let s = bench_setting(&saturated).unwrap();
    assert_eq!((s.request_rate, s.max_concurrency), (None, Some(64)));
}

#[test]
fn a_ramped_result_is_read_as_vllm_bench_serve_ran_it() {
    let ramped = |extra: serde_json::Value| {
        let mut result = serde_json::json!({
            "completed": 30, "total_input_tokens": 3840, "total_output_tokens": 960,
            "request_rate": "inf", "burstiness": 1.0,
            "ramp_up_strategy": "exponential", "ramp_up_start_rps": 1, "ramp_up_end_rps": 16
        });
        for (k, v) in extra.as_object().unwrap() {
            result[k] = v.clone();
        }
        bench_setting(&result)
    };
    let s = ramped(serde_json::json!({})).unwrap();
    assert_eq!(
        s.ramp_up,
        Some(RampUp {
            exponential: true,
            start_rps: 1.0,
            end_rps: 16.0
        })
    );
    assert!(s.arrival_bound() && s.request_rate.is_none());
    // What vllm bench serve refuses, refused by name.
    for (extra, names) in [
        (serde_json::json!({"request_rate": 4.0}), "--request-rate"),
        (
            serde_json::json!({"ramp_up_strategy": "cubic"}),
            "ramp_up_strategy",
        ),
        (
            serde_json::json!({"ramp_up_end_rps": null}),
            "ramp_up_end_rps",
        ),
        (serde_json::json!({"ramp_up_start_rps": 0}), "ramp-up"),
        (serde_json::json!({"ramp_up_start_rps": 20}), "ramp-up"),
    ] {
        let err = ramped(extra).unwrap_err();
        assert!(err.contains(names), "{err}");
    }
}

#[test]
fn a_result_without_its_workload_names_the_missing_field() {
    let err = bench_setting(&serde_json::json!({"completed": 3, "request_rate": 1.0})).unwrap_err();
    assert!(err.contains("total_input_tokens"), "{err}");
    let err = bench_setting(&serde_json::json!({"completed": 0, "total_input_tokens": 0, "total_output_tokens": 0, "request_rate": 1.0})).unwrap_err();
    assert!(err.contains("no request"), "{err}");
}

#[test]
fn a_result_whose_counts_disagree_is_refused_before_it_is_simulated() {
    let result = |extra: serde_json::Value| {
        let mut r = serde_json::json!({"completed": 8, "num_prompts": 8, "failed": 0,
            "total_input_tokens": 2048, "total_output_tokens": 256, "request_rate": 4.0});
        for (k, v) in extra.as_object().unwrap() {
            r[k] = v.clone();
        }
        bench_setting(&r)
    };
    assert_eq!(result(serde_json::json!({})).unwrap().num_prompts, 8);
    assert_eq!(
        result(serde_json::json!({"num_prompts": 10, "failed": 2}))
            .unwrap()
            .num_prompts,
        10
    );
    for (extra, what) in [
        // A billion prompts of which 8 completed and none failed would simulate for hours.
        (
            serde_json::json!({"num_prompts": 1e9}),
            "num_prompts 1000000000",
        ),
        (serde_json::json!({"num_prompts": 9}), "plus the 0 failed"),
        (
            serde_json::json!({"total_input_tokens": 1e30}),
            "total_input_tokens",
        ),
        (
            serde_json::json!({"total_output_tokens": -8}),
            "total_output_tokens",
        ),
    ] {
        let err = result(extra.clone()).unwrap_err();
        assert!(err.contains(what), "{extra}: {err}");
    }
}

#[test]
fn plain_serve_words_give_a_colocated_single_gpu_deployment() {
    let mut graph_words =
        words("/m --max-num-seqs 256 --max-num-batched-tokens 8192 --compilation-config");
    graph_words.push(r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#.into());
    let graph = plain_config(&graph_words, GpuKind::H200, &model()).unwrap();
    assert_eq!(
        (
            graph.attention.dp,
            graph.attention.tp,
            graph.max_num_seqs,
            graph.max_num_batched_tokens
        ),
        (1, 1, 256, 8192)
    );
    let eager = plain_config(
        &words("/m --enforce-eager --max-num-seqs 64"),
        GpuKind::H200,
        &model(),
    )
    .unwrap();
    assert_eq!(eager.graph, crate::serving::GraphMode::Eager);
}

#[test]
fn vllm_s_default_graph_mode_is_full_and_piecewise() {
    let config = plain_config(&words("/m --max-num-seqs 256"), GpuKind::H200, &model()).unwrap();
    assert_eq!(config.graph.name(), "FULL_AND_PIECEWISE");
}

#[test]
fn a_deployment_the_rules_refuse_is_never_compared() {
    let err = plain_config(
        &words("/m --max-num-seqs 128 --max-num-batched-tokens 64"),
        GpuKind::H200,
        &model(),
    )
    .unwrap_err();
    assert!(err.contains("vllm.batched-tokens-ge-seqs"), "{err}");
}

#[test]
fn an_afd_server_is_not_a_plain_deployment() {
    let afd = vec![
        "/m".into(),
        "--additional-config".into(),
        r#"{"afd": {"role": "attention"}}"#.into(),
    ];
    assert!(plain_config(&afd, GpuKind::H200, &model()).is_err());
}

#[test]
fn a_row_s_error_is_relative_to_the_real_figure() {
    let row = MetricRow {
        key: "mean_tpot_ms",
        real: 10.0,
        predicted: 11.0,
    };
    assert!((row.error() - 0.1).abs() < 1e-12);
}

#[test]
fn cached_prefixes_give_the_uncomputed_prompt_tokens_to_the_first_requests_as_full_hits() {
    let config = ServingConfig::seed_recipe();
    // 100 prompts of 2,048 tokens, 108,160 computed: 96,640 cached, 2,032 per full hit
    // (vLLM recomputes the last 16-token block of a fully cached prompt).
    let setting = BenchSetting {
        num_prompts: 100,
        input_len: 2048,
        output_len: 32,
        request_rate: None,
        burstiness: 1.0,
        max_concurrency: None,
        ramp_up: None,
    };
    let cached = cached_prefixes(&config, &setting, 108_160, &[]);
    assert_eq!(cached.len(), 48);
    assert_eq!(cached[0], 2032);
    assert_eq!(cached[47], 96_640 - 47 * 2032);
    assert_eq!(cached.iter().map(|&c| u64::from(c)).sum::<u64>(), 96_640);
    assert!(cached_prefixes(&config, &setting, 204_800, &[]).is_empty());
    let mut off = config.clone();
    off.prefix_caching = false;
    assert!(cached_prefixes(&off, &setting, 0, &[]).is_empty());
}

/// The first graph 256/8192 server ran every workload on seed 1: its `pre-r4` (40 prompts of 2,048)
/// followed 80 and 256 prompts of 256 tokens, so each of its requests found its first 256 tokens
/// cached (10,240 in all, what its step log shows uncomputed), not five prompts cached whole; its
/// `pre-sat` (100 of 2,048) found `pre-r4`'s 40 cached whole and 256 tokens of the next 60.
#[test]
fn cached_prefixes_follow_the_earlier_runs_of_the_seed_where_the_log_agrees() {
    let config = ServingConfig::seed_recipe();
    let setting = |num_prompts, input_len| BenchSetting {
        num_prompts,
        input_len,
        output_len: 32,
        request_rate: None,
        burstiness: 1.0,
        max_concurrency: None,
        ramp_up: None,
    };
    let earlier = [(80, 256), (256, 256)];
    let cached = cached_prefixes(&config, &setting(40, 2048), 71_680, &earlier);
    assert_eq!(cached, vec![256; 40]);
    let earlier = [(80, 256), (256, 256), (40, 2048)];
    let cached = cached_prefixes(&config, &setting(100, 2048), 108_160, &earlier);
    assert_eq!(cached.len(), 100);
    assert!(cached[..40].iter().all(|&c| c == 2032));
    assert!(cached[40..].iter().all(|&c| c == 256));
    // A log that disagrees with the layout (the cache evicted, or another client's prompts): the
    // uncomputed tokens go to full hits as before.
    let cached = cached_prefixes(&config, &setting(40, 2048), 81_920 - 4064, &[(80, 256)]);
    assert_eq!(cached, vec![2032, 2032]);
}

#[test]
fn asynchronous_scheduling_is_on_unless_the_words_turn_it_off() {
    let async_scheduling = |text: &str| {
        plain_server(&words(text), GpuKind::H200, &model())
            .unwrap()
            .async_scheduling
    };
    assert!(async_scheduling("/m --enforce-eager"));
    assert!(!async_scheduling("/m --no-async-scheduling"));
    assert!(async_scheduling(
        "/m --no-async-scheduling --async-scheduling"
    ));
    let dummy = |text: &str| {
        plain_server(&words(text), GpuKind::H200, &model())
            .unwrap()
            .dummy_weights
    };
    assert!(dummy("/m --load-format dummy") && !dummy("/m"));
}

/// The roofline cost model of the plain eager server `words` names, and its deployment.
fn roofline_server(
    words_text: &str,
) -> (ServingConfig, impl Fn() -> Result<CostModel, String> + Sync) {
    let config = plain_config(&words(words_text), GpuKind::H200, &model()).unwrap();
    let layout = config.cost_layout();
    (config, move || {
        Ok(CostModel::roofline(&model(), GpuKind::H200, layout))
    })
}

fn bench(rate: Option<f64>) -> (BenchSetting, serde_json::Value) {
    let setting = BenchSetting {
        num_prompts: 24,
        input_len: 512,
        output_len: 16,
        request_rate: rate,
        burstiness: 1.0,
        max_concurrency: None,
        ramp_up: None,
    };
    let real = serde_json::json!({
        "output_throughput": 100.0, "mean_ttft_ms": 50.0, "mean_tpot_ms": 5.0
    });
    (setting, real)
}

#[test]
fn an_arrival_bound_run_is_predicted_as_the_mean_of_its_draws() {
    let (config, cost) = roofline_server("/m --enforce-eager --max-num-seqs 8");
    let (setting, real) = bench(Some(20.0));
    let front = FrontEnd::default();
    let draws = |n| SendTimes::Simulator { draws: n };
    let one = |seed| {
        compare(
            &config,
            &cost,
            &setting,
            &real,
            Seed(seed),
            draws(1),
            &front,
        )
        .unwrap()
    };
    let outcomes = [one(7), one(8), one(9)];
    let mean = compare(&config, &cost, &setting, &real, Seed(7), draws(3), &front).unwrap();
    assert_eq!(mean.rows.len(), 3, "only the metrics the real result has");
    assert_eq!((mean.failed, &mean.rejection), (0.0, &None));
    for (k, row) in mean.rows.iter().enumerate() {
        let expected = outcomes.iter().map(|d| d.rows[k].predicted).sum::<f64>() / 3.0;
        assert!(
            (row.predicted - expected).abs() <= 1e-9 * expected.abs(),
            "{}: {} against the draws' mean {expected}",
            row.key,
            row.predicted
        );
    }
    // The draws differ (else the mean says nothing about them).
    assert!(outcomes[0] != outcomes[1] || outcomes[1] != outcomes[2]);
}

#[test]
fn a_run_that_sends_every_prompt_at_once_is_simulated_once() {
    let (config, cost) = roofline_server("/m --enforce-eager --max-num-seqs 8");
    let (setting, real) = bench(None);
    let front = FrontEnd::default();
    let draws = |n| SendTimes::Simulator { draws: n };
    let once = compare(&config, &cost, &setting, &real, Seed(3), draws(1), &front).unwrap();
    let many = compare(&config, &cost, &setting, &real, Seed(3), draws(5), &front).unwrap();
    assert_eq!(once, many);
    let bench = SendTimes::Bench { seed: 5 };
    assert_eq!(bench.simulations(&setting), 1);
    assert_eq!(
        compare(&config, &cost, &setting, &real, Seed(3), bench, &front).unwrap(),
        once
    );
}

#[test]
fn the_bench_draw_is_one_simulation_at_the_real_clients_send_times() {
    let (config, cost) = roofline_server("/m --enforce-eager --max-num-seqs 8");
    let (setting, real) = bench(Some(20.0));
    let front = FrontEnd::default();
    let bench = |seed| SendTimes::Bench { seed };
    assert_eq!(bench(1).simulations(&setting), 1);
    assert_eq!(SendTimes::Simulator { draws: 4 }.simulations(&setting), 4);
    // A ramp is as arrival-bound as a rate.
    let ramp = BenchSetting {
        request_rate: None,
        ramp_up: Some(RampUp {
            exponential: false,
            start_rps: 5.0,
            end_rps: 40.0,
        }),
        ..setting
    };
    assert_eq!(SendTimes::Simulator { draws: 4 }.simulations(&ramp), 4);
    let run = |setting: &BenchSetting, send| {
        compare(&config, &cost, setting, &real, Seed(0), send, &front).unwrap()
    };
    assert_ne!(run(&ramp, bench(1)), run(&setting, bench(1)));
    let run = |send| compare(&config, &cost, &setting, &real, Seed(0), send, &front).unwrap();
    // Another bench seed is another draw; the same one is the same run.
    assert_eq!(run(bench(1)), run(bench(1)));
    assert_ne!(run(bench(1)), run(bench(2)));
    assert_ne!(run(bench(1)), run(SendTimes::Simulator { draws: 1 }));
}

#[test]
fn a_detailed_result_is_simulated_request_by_request() {
    let (config, cost) = roofline_server("/m --enforce-eager --max-num-seqs 8");
    let (setting, real) = bench(None);
    let front = FrontEnd::default();
    let send = SendTimes::Bench { seed: 0 };
    let run =
        |real: &serde_json::Value| compare(&config, &cost, &setting, real, Seed(0), send, &front);
    let mean = run(&real).unwrap();
    // The same totals (24 prompts of 512 tokens on average, 16 output tokens) as half 64-token and
    // half 960-token prompts: the long ones queue behind one another, the short ones do not.
    let mut detailed = real.clone();
    let inputs: Vec<u32> = (0..24).map(|i| if i % 2 == 0 { 64 } else { 960 }).collect();
    detailed["input_lens"] = serde_json::json!(inputs);
    detailed["output_lens"] = serde_json::json!(vec![16; 24]);
    let each = run(&detailed).unwrap();
    assert_ne!(each.rows, mean.rows);
    assert_eq!(
        request_lengths(&detailed, &setting).unwrap().unwrap()[..2],
        [(64, 16), (960, 16)]
    );
    // The same lengths as the mean give the same run: nothing else moved.
    let mut flat = real.clone();
    flat["input_lens"] = serde_json::json!(vec![512; 24]);
    flat["output_lens"] = serde_json::json!(vec![16; 24]);
    assert_eq!(run(&flat).unwrap(), mean);
    for (key, value, what) in [
        ("input_lens", serde_json::json!(vec![512; 23]), "23 entries"),
        ("input_lens", serde_json::json!("512"), "not a list"),
        (
            "output_lens",
            serde_json::json!([16, -1]),
            "output_lens[1] is -1",
        ),
        ("input_lens", serde_json::Value::Null, "without the other"),
    ] {
        let mut bad = flat.clone();
        bad[key] = value;
        let err = run(&bad).unwrap_err();
        assert!(err.contains(what), "{key}: {err}");
    }
}

#[test]
fn the_built_in_engine_prices_deepseek_v2_lite_on_h200() {
    let dsv2l = ModelArch::deepseek_v2_lite();
    let engine = builtin_engine(&dsv2l, GpuKind::H200).expect("the shipped H200 profile reads");
    assert!(engine.prices(&crate::serving::GraphMode::Eager));
    // The H100's measured servers: eager and FULL_DECODE_ONLY; vLLM's default FULL_AND_PIECEWISE,
    // never run there, stays the kernel model's.
    let h100 = builtin_engine(&dsv2l, GpuKind::H100).expect("the shipped H100 profile reads");
    assert!(h100.prices(&crate::serving::GraphMode::Eager));
    assert!(h100.prices(&crate::serving::GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 2, 4, 8],
    }));
    assert!(!h100.prices(&crate::serving::GraphMode::FullAndPiecewise {
        capture_sizes: vec![1, 2, 4, 8],
        piecewise_sizes: vec![1, 2, 4, 8],
    }));
    assert!(builtin_engine(&dsv2l, GpuKind::A100).is_none());
    let qwen = ModelArch::builtin("qwen3-30b-a3b")
        .expect("shipped")
        .expect("valid");
    assert!(builtin_engine(&qwen, GpuKind::H200).is_none());
    // The Hugging Face config.json the real runs served is the same architecture.
    let text = include_str!("../../../traces/data/models/deepseek-v2-lite/config.json");
    let served = ModelArch::from_config(
        "DeepSeek-V2-Lite",
        afd_traces::model_config::ModelConfig::from_json(text).expect("reads"),
    );
    assert!(is_engine_profiled_model(&served));
    assert!(!is_engine_profiled_model(&qwen));
}
