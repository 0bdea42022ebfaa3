//! Whole-run behaviour: hand arithmetic from a profile, conservation, padding, DBO, TPOT floor,
//! determinism.

use afd_sim::engine::{RunOptions, RunResult};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::CostModel;
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::workload::{Arrivals, TraceEntry, Workload, trace_workload};
use afd_sim::report::{ReportContext, build_report, request_rows, step_rows};
use afd_sim::rng::Seed;
use afd_sim::serving::{GraphMode, RoleLayout, ServingConfig};
use afd_traces::model_config::ModelConfig;
use proptest::prelude::*;

use crate::support::{flat, flat_costs, profile, simulate, workload};

/// One MoE layer of DeepSeek-V2-Lite's shapes.
fn one_layer_model() -> ModelArch {
    let text = r#"{"vocab_size": 1024, "dim": 2048, "inter_dim": 10944, "moe_inter_dim": 1408,
        "n_layers": 1, "n_dense_layers": 0, "n_heads": 16, "n_routed_experts": 64,
        "n_shared_experts": 2, "n_activated_experts": 6, "route_scale": 1.0, "q_lora_rank": 0,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}"#;
    ModelArch::from_config(
        "one-layer",
        ModelConfig::from_json(text).expect("the one-layer config is valid"),
    )
}

fn one_by_one_eager() -> ServingConfig {
    let role = RoleLayout {
        dp: 1,
        tp: 1,
        expert_parallel: true,
    };
    let mut config = ServingConfig::seed_recipe();
    config.attention = role;
    config.ffn = role;
    config.dbo = None;
    config.graph = GraphMode::Eager;
    config
}

/// Runs one request (4 prompt tokens, 2 output tokens, sent at 0) of the one-layer model priced by
/// `tables` on `config`.
fn one_request(
    config: &ServingConfig,
    tables: Vec<afd_traces::calibration::CostTable>,
) -> (RunResult, Workload) {
    let model = one_layer_model();
    let cost = CostModel::calibrated(
        &model,
        GpuKind::H200,
        config.cost_layout(),
        &profile(tables),
        "flat",
    )
    .expect("flat tables price the one-layer model");
    let workload = trace_workload(
        &[TraceEntry {
            arrival_us: Some(0),
            input_tokens: 4,
            output_tokens: 2,
        }],
        Arrivals::AllAtOnce,
        None,
        Seed(0),
    )
    .expect("one request is a valid trace");
    let result = afd_sim::engine::run(config, cost, &workload, &RunOptions::new(Seed(0)))
        .expect("the scenario's deployment is valid");
    (result, workload)
}

#[test]
fn one_layer_one_request_times_follow_from_the_profile() {
    // Flat tables: every operation costs the same at any size, launches are free.
    let (h, p, proj, prefill, decode, router, dispatch, experts, shared, lm) =
        (100.0, 10.0, 40.0, 50.0, 30.0, 5.0, 3.0, 60.0, 20.0, 8.0);
    let tables = vec![
        flat("p2p.one_way", &[("graph", "false")], &["bytes"], p),
        flat("attention.proj", &[], &["tokens"], proj),
        flat("attention.prefill", &[], &["tokens", "context"], prefill),
        flat("attention.mla_decode", &[], &["batch", "context"], decode),
        flat("attention.lm_head", &[], &["tokens"], lm),
        flat("moe.router", &[], &["tokens"], router),
        flat("moe.dispatch", &[], &["tokens"], dispatch),
        flat(
            "moe.routed_experts",
            &[],
            &["active_experts", "tokens_per_expert"],
            experts,
        ),
        flat("moe.shared_experts", &[], &["tokens"], shared),
        flat("launch.eager", &[], &["kernels"], 0.0),
        flat("launch.graph", &[], &["kernels"], 0.0),
        flat("host.step", &[], &["requests"], h),
    ];
    let config = one_by_one_eager();
    let (result, workload) = one_request(&config, tables);
    let row = &request_rows(&result, &workload)[0];
    // Prefill step: host, two control sends, projections + prefill, A→F, router + dispatch + experts
    // + shared, F→A, LM head.
    let moe = router + dispatch + experts + shared;
    let ttft = h + 2.0 * p + proj + prefill + p + moe + p + lm;
    // Decode step: the same with decode attention instead of prefill.
    let tpot = h + 2.0 * p + proj + decode + p + moe + p + lm;
    assert_eq!(row.ttft_ms, Some(ttft / 1e3));
    assert_eq!(row.e2el_ms, Some((ttft + tpot) / 1e3));
    let report = build_report(
        &result,
        &ReportContext {
            config: &config,
            workload: &workload,
            seed: Seed(0),
            dataset: "t",
        },
    );
    let source = |op: &str| {
        report
            .costs
            .iter()
            .find(|c| c.op == op)
            .unwrap()
            .source
            .clone()
    };
    assert_eq!(source("moe.routed_experts"), "calibration");
    assert_eq!(source("attention.lm_head"), "calibration");
}

#[test]
fn same_inputs_give_identical_json_and_another_seed_another_hash() {
    let config = ServingConfig::seed_recipe();
    let model = ModelArch::deepseek_v2_lite();
    let w = workload(40, 200, 16, Some(20.0), Some(8), 3);
    let (_, first) = simulate(&config, &model, &w, &RunOptions::new(Seed(3)));
    let (_, second) = simulate(&config, &model, &w, &RunOptions::new(Seed(3)));
    assert_eq!(first.to_json(), second.to_json());
    let other = workload(40, 200, 16, Some(20.0), Some(8), 4);
    let (_, third) = simulate(&config, &model, &other, &RunOptions::new(Seed(4)));
    assert_ne!(first.event_log_hash, third.event_log_hash);
}

#[test]
fn capture_size_padding_shows_up_as_ffn_work() {
    let model = ModelArch::deepseek_v2_lite();
    let w = workload(4, 16, 40, None, None, 0);
    // Without DBO, so both runs keep one ubatch per step (a 4-row graph would otherwise split).
    let mut big = ServingConfig::seed_recipe();
    big.dbo = None;
    let mut small = big.clone();
    small.graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![4, 64],
    };
    let (small_run, small_report) = simulate(&small, &model, &w, &RunOptions::new(Seed(0)));
    let (big_run, big_report) = simulate(&big, &model, &w, &RunOptions::new(Seed(0)));
    // The same decode steps, padded to 4 rows or to 64: more FFN time and more padded rows at 64.
    assert_eq!(small_report.steps.graph, big_report.steps.graph);
    assert!(big_report.steps.padded_row_share > small_report.steps.padded_row_share + 0.5);
    assert!(big_run.summary.totals.ffn_busy_ns > small_run.summary.totals.ffn_busy_ns);
}

#[test]
fn tpot_is_never_below_the_fastest_step() {
    let config = ServingConfig::seed_recipe();
    let model = ModelArch::deepseek_v2_lite();
    let w = workload(30, 300, 20, Some(10.0), Some(16), 1);
    let mut options = RunOptions::new(Seed(1));
    options.record_steps = true;
    let (result, _) = simulate(&config, &model, &w, &options);
    let floor_ms = step_rows(&result.steps)
        .iter()
        .map(|s| s.duration_us / 1e3)
        .fold(f64::INFINITY, f64::min);
    for row in request_rows(&result, &w) {
        let tpot = row.tpot_ms.unwrap();
        assert!(
            tpot >= floor_ms - 1e-9,
            "request {} TPOT {tpot} < step floor {floor_ms}",
            row.request
        );
    }
}

#[test]
fn dbo_speeds_up_the_seed_decode_benchmark() {
    let model = ModelArch::deepseek_v2_lite();
    let w = workload(64, 8, 64, None, None, 0);
    let (_, with) = simulate(
        &ServingConfig::seed_recipe(),
        &model,
        &w,
        &RunOptions::new(Seed(0)),
    );
    let mut config = ServingConfig::seed_recipe();
    config.dbo = None;
    let (_, without) = simulate(&config, &model, &w, &RunOptions::new(Seed(0)));
    assert!(with.steps.dbo > 0 && without.steps.dbo == 0);
    assert!(with.steps.dbo_overlap > 0.0);
}

#[test]
fn two_attention_engines_share_one_ffn_and_route_by_load() {
    let mut config = ServingConfig::seed_recipe();
    config.attention = RoleLayout {
        dp: 2,
        tp: 1,
        expert_parallel: true,
    };
    config.ffn = RoleLayout {
        dp: 1,
        tp: 1,
        expert_parallel: true,
    };
    let model = ModelArch::deepseek_v2_lite();
    let w = workload(40, 64, 8, Some(50.0), None, 2);
    let (result, report) = simulate(&config, &model, &w, &RunOptions::new(Seed(2)));
    assert_eq!(report.benchmark.completed, 40);
    let rows = request_rows(&result, &w);
    let on_second = rows.iter().filter(|r| r.engine == Some(1)).count();
    assert!(
        (10..=30).contains(&on_second),
        "{on_second} of 40 on engine 1"
    );
}

/// The seed recipe with Attention DP `attention_dp` (TP 1), the FFN role `ffn`, optionally
/// colocated, eager and without DBO.
fn seed_variant(
    attention_dp: u32,
    ffn: RoleLayout,
    colocated: bool,
    eager: bool,
    dbo: bool,
) -> ServingConfig {
    let mut config = ServingConfig::seed_recipe();
    config.attention = RoleLayout {
        dp: attention_dp,
        tp: 1,
        expert_parallel: true,
    };
    config.ffn = ffn;
    if colocated {
        config = config.to_colocated(config.attention);
    }
    if eager {
        config.graph = GraphMode::Eager;
    }
    if !dbo {
        config.dbo = None;
    }
    config
}

/// Leaves room for a few hundred tokens of KV cache, so requests preempt each other.
fn leave_kv_for_a_few_hundred_tokens(config: &mut ServingConfig, model: &ModelArch) {
    let weights = model.attention_weight_bytes(1);
    let kv = model.kv_bytes_per_token(1) * 64 * 6;
    let memory = GpuKind::H200.spec().memory_bytes as f64;
    config.kv_reserve_bytes = 0;
    config.gpu_memory_utilization = (weights + kv) as f64 / memory;
    // vLLM starts only where one request of max_model_len fits (`memory.max-model-len-fits`).
    config.max_model_len = Some(64 * 6);
}

/// Two runs of `config` on `w` are the same to the byte: summary (event-log hash included) and
/// every step's record.
fn prop_assert_same_run(
    a: &RunResult,
    b: &RunResult,
    config: &ServingConfig,
    w: &Workload,
    seed: u64,
) -> Result<(), TestCaseError> {
    let context = ReportContext {
        config,
        workload: w,
        seed: Seed(seed),
        dataset: "random",
    };
    prop_assert_eq!(
        build_report(a, &context).to_json(),
        build_report(b, &context).to_json()
    );
    prop_assert_eq!(
        format!("{:?}", step_rows(&a.steps)),
        format!("{:?}", step_rows(&b.steps))
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn requests_and_tokens_are_conserved(
        n in 1u32..30,
        input in 1u32..300,
        output in 1u32..40,
        dp in 1u32..3,
        eager in any::<bool>(),
        dbo in any::<bool>(),
        tiny_kv in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let model = ModelArch::deepseek_v2_lite();
        let ffn = RoleLayout { dp: 1, tp: 1, expert_parallel: true };
        let mut config = seed_variant(dp, ffn, false, eager, dbo);
        if tiny_kv {
            leave_kv_for_a_few_hundred_tokens(&mut config, &model);
        }
        let w = workload(n, input, output, Some(40.0), Some(8), seed);
        let (result, report) = simulate(&config, &model, &w, &RunOptions::new(Seed(seed)));
        prop_assert_eq!(report.outcome.as_str(), "completed");
        prop_assert_eq!(report.benchmark.completed + report.benchmark.failed, u64::from(n));
        let served: u64 = request_rows(&result, &w)
            .iter()
            .filter(|r| r.error.is_empty())
            .map(|r| u64::from(r.output_tokens))
            .sum();
        prop_assert_eq!(report.benchmark.total_output_tokens, served);
        for row in request_rows(&result, &w) {
            if row.error.is_empty() {
                prop_assert_eq!(row.output_tokens, output);
            }
        }
    }
}

#[test]
fn colocated_baseline_times_follow_from_the_profile() {
    // Two GPUs, DP2 x TP1 with expert parallelism: each runs attention, the router, the
    // all-to-all dispatch, its experts plus the shared experts, and the combine; the idle engine
    // runs a one-row dummy batch, so both GPUs wait for each other at every all-to-all.
    let (h, proj, prefill, decode, router, dispatch, experts, shared, a2a, lm) =
        (100.0, 40.0, 50.0, 30.0, 5.0, 3.0, 60.0, 20.0, 7.0, 8.0);
    let tables = flat_costs(&[
        ("attention.proj", proj),
        ("attention.prefill", prefill),
        ("attention.mla_decode", decode),
        ("attention.lm_head", lm),
        ("moe.router", router),
        ("moe.dispatch", dispatch),
        ("moe.routed_experts", experts),
        ("moe.shared_experts", shared),
        ("nccl.all_to_all@ranks=2", a2a),
        ("host.step", h),
    ]);
    let layout = RoleLayout {
        dp: 2,
        tp: 1,
        expert_parallel: true,
    };
    let config = one_by_one_eager().to_colocated(layout);
    assert_eq!((config.gpus(), config.attention_ranks()), (2, 2));
    let (result, workload) = one_request(&config, tables);
    let row = &request_rows(&result, &workload)[0];
    let moe = router + a2a + dispatch + experts + shared + a2a;
    let ttft = h + proj + prefill + moe + lm;
    let tpot = h + proj + decode + moe + lm;
    assert_eq!(row.ttft_ms, Some(ttft / 1e3));
    assert_eq!(row.e2el_ms, Some((ttft + tpot) / 1e3));
    let report = build_report(
        &result,
        &ReportContext {
            config: &config,
            workload: &workload,
            seed: Seed(0),
            dataset: "t",
        },
    );
    assert_eq!(report.deployment.gpus, 2);
    // Utilisation: every GPU was busy with attention (projections, attention, LM head) and MoE.
    let span = result.end.as_ns() as f64 / 1e3;
    // GPU 0 served the request; GPU 1 ran the one-row dummy (projections, no context).
    let busy = (2.0 * proj + prefill + decode + 2.0 * lm) + (2.0 * proj + 2.0 * lm);
    let attention = busy / (2.0 * span);
    assert!((report.utilisation.attention - attention).abs() < 1e-9);
    assert_eq!(result.summary.totals.closed_form.steps, 0);
}

#[test]
fn colocated_dbo_ping_pongs_compute_and_all_to_alls_by_hand() {
    // DP1 x TP2 with DBO: a decode step of 4 requests splits 2/2. Flat tables make each ubatch's
    // op cost what the whole batch's would, so only the schedule differs from the serial step.
    let (h, proj, decode, reduce, router, dispatch, experts, shared, a2a, lm) =
        (100.0, 10.0, 30.0, 5.0, 5.0, 0.0, 60.0, 20.0, 30.0, 8.0);
    let tables = flat_costs(&[
        ("attention.proj", proj),
        ("attention.prefill", 50.0),
        ("attention.mla_decode", decode),
        ("attention.lm_head", lm),
        ("moe.router", router),
        ("moe.dispatch", dispatch),
        ("moe.routed_experts", experts),
        ("moe.shared_experts", shared),
        ("nccl.all_to_all@ranks=2", a2a),
        ("nccl.all_reduce@ranks=2", reduce),
        ("host.step", h),
    ]);
    let layout = RoleLayout {
        dp: 1,
        tp: 2,
        expert_parallel: true,
    };
    let model = one_layer_model();
    let entries: Vec<TraceEntry> = (0..4)
        .map(|_| TraceEntry {
            arrival_us: Some(0),
            input_tokens: 4,
            output_tokens: 2,
        })
        .collect();
    let workload = trace_workload(&entries, Arrivals::AllAtOnce, None, Seed(0)).unwrap();
    let last_step_us = |dbo: Option<afd_sim::serving::DboConfig>| {
        let mut config = one_by_one_eager().to_colocated(layout);
        config.dbo = dbo;
        let cost = CostModel::calibrated(
            &model,
            GpuKind::H200,
            config.cost_layout(),
            &profile(tables.clone()),
            "flat",
        )
        .unwrap();
        let mut options = RunOptions::new(Seed(0));
        options.record_steps = true;
        let result = afd_sim::engine::run(&config, cost, &workload, &options).unwrap();
        let rows = step_rows(&result.steps);
        let last = rows.last().unwrap();
        (last.ubatches, last.duration_us)
    };
    // Projections and shared experts are measured for one GPU and split across TP 2.
    let a = proj / 2.0 + decode;
    let e = experts + shared / 2.0;
    // Serial: attention, all-reduce, router, dispatch, experts, combine, LM head.
    let serial = h + a + reduce + router + a2a + e + a2a + lm;
    assert_eq!(last_step_us(None), (1, serial));
    // DBO: compute runs A0 AR0 R0 A1 AR1 R1 E0 E1 while the comm stream runs D0 D1 C0 C1:
    // D0 45..75, D1 90..120, E0 90..160, C0 160..190, E1 160..230, C1 230..260, then the LM head.
    let dbo = Some(afd_sim::serving::DboConfig {
        decode_threshold: 2,
        prefill_threshold: 12,
    });
    let e1_end = 2.0 * (a + reduce + router) + 2.0 * e;
    let c1_end = e1_end + a2a;
    assert_eq!(c1_end, 260.0);
    assert_eq!(last_step_us(dbo), (2, h + c1_end + lm));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// The step memo (`cluster/memo.rs`) is a cache: with it off every step is priced and swept,
    /// and the run is the same to the byte — summary, event-log hash and every step's record —
    /// over AFD and colocated layouts, eager and graph, DBO, preemption, and the measured H200
    /// profile (hand-off wait curves, NCCL busy times) as well as the roofline.
    #[test]
    fn the_step_memo_is_exact(
        n in 1u32..40,
        input in 1u32..400,
        output in 1u32..48,
        attention_dp in 1u32..4,
        ffn_dp in 1u32..3,
        ffn_ep in any::<bool>(),
        colocated in any::<bool>(),
        eager in any::<bool>(),
        dbo in any::<bool>(),
        tiny_kv in any::<bool>(),
        measured in any::<bool>(),
        seed in 0u64..1000,
    ) {
        let model = ModelArch::deepseek_v2_lite();
        let ffn = RoleLayout { dp: ffn_dp.min(attention_dp), tp: 1, expert_parallel: ffn_ep };
        let mut config = seed_variant(attention_dp, ffn, colocated, eager, dbo);
        if tiny_kv {
            leave_kv_for_a_few_hundred_tokens(&mut config, &model);
        }
        let w = workload(n, input, output, Some(40.0), Some(8), seed);
        let cost = || {
            if measured {
                afd_sim::model::profiles::default_cost_model(&model, GpuKind::H200, config.cost_layout())
                    .expect("the built-in H200 profile prices DeepSeek-V2-Lite")
            } else {
                CostModel::roofline(&model, GpuKind::H200, config.cost_layout())
            }
        };
        let mut options = RunOptions::new(Seed(seed));
        options.record_steps = true;
        let Ok(with) = afd_sim::engine::run(&config, cost(), &w, &options) else {
            // Too little memory for this layout's weights: nothing to compare.
            return Ok(());
        };
        options.model.step_memo = false;
        let without = afd_sim::engine::run(&config, cost(), &w, &options)
            .expect("the same deployment runs without the memo");
        prop_assert_same_run(&with, &without, &config, &w, seed)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// A step memo handed from one run to the next run of the same pipeline (as the planner does
    /// for the candidates of one layout) changes nothing: the second run, whatever its graph
    /// mode, DBO and batch limits, is the same to the byte as that run alone without a memo.
    #[test]
    fn a_memo_handed_between_runs_is_exact(
        n in 1u32..30,
        input in 1u32..300,
        output in 1u32..32,
        attention_dp in 1u32..3,
        colocated in any::<bool>(),
        first_eager in any::<bool>(),
        second_eager in any::<bool>(),
        first_dbo in any::<bool>(),
        second_dbo in any::<bool>(),
        second_tokens in prop::sample::select(vec![64u32, 128, 512]),
        seed in 0u64..1000,
    ) {
        let model = ModelArch::deepseek_v2_lite();
        let configure = |eager: bool, dbo: bool, tokens: u32| {
            let ffn = RoleLayout { dp: 1, tp: 1, expert_parallel: true };
            let mut config = seed_variant(attention_dp, ffn, colocated, eager, dbo);
            config.max_num_batched_tokens = tokens;
            config
        };
        let first = configure(first_eager, first_dbo, 64);
        let second = configure(second_eager, second_dbo, second_tokens);
        let w = workload(n, input, output, Some(40.0), Some(8), seed);
        let cost = |config: &ServingConfig| {
            afd_sim::model::profiles::default_cost_model(&model, GpuKind::H200, config.cost_layout())
                .expect("the built-in H200 profile prices DeepSeek-V2-Lite")
        };
        let mut options = RunOptions::new(Seed(seed));
        options.record_steps = true;
        let mut memo = None;
        let loads = afd_sim::model::routing::LoadsCache::default();
        afd_sim::engine::run_sharing_memo(&first, cost(&first), &w, &options, &mut memo, &loads)
            .expect("the deployment runs");
        let shared =
            afd_sim::engine::run_sharing_memo(&second, cost(&second), &w, &options, &mut memo, &loads)
                .expect("the deployment runs");
        options.model.step_memo = false;
        let alone = afd_sim::engine::run(&second, cost(&second), &w, &options)
            .expect("the deployment runs");
        prop_assert_same_run(&shared, &alone, &second, &w, seed)?;
    }
}
