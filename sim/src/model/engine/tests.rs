//! Tests of the engine model: step periods by shape and mode, and the profile derived from fixed-shape records.

use afd_traces::vllm_run::{FixedShapeResult, PromptForm, VllmProvenance, Workload, WorkloadKind};

use super::*;
use crate::step::AttentionWork;

/// A mode measured only for its decode periods, its non-uniform floor and its per-token cost.
pub(crate) fn mode_costs(
    name: &str,
    decode: Vec<(u32, u64)>,
    floor: u64,
    token: f64,
) -> EngineModeCosts {
    EngineModeCosts {
        mode: name.into(),
        decode_period_ns: decode,
        nonuniform_floor_ns: floor,
        nonuniform_token_ns: token,
        nonuniform_period_ns: vec![],
        mixed_decode_ns: 0.0,
        graphless_decode_ns: 0.0,
        decode_context_ns: 0.0,
        decode_reference_context: 0,
        prefill_extra_ns: vec![],
        piecewise_period_ns: vec![],
        piecewise_max_tokens: 0,
        piecewise_decode_ns: 0.0,
        pure_prefill_ratio: None,
        pure_piecewise_ratio: None,
        pure_prefill_max_tokens: None,
        pure_piecewise_max_tokens: None,
        evidence: BTreeMap::new(),
    }
}

/// A profile of `modes` on an H200 whose front end adds `frontend_ns` and nothing else.
pub(crate) fn profile_of(modes: Vec<EngineModeCosts>, frontend_ns: u64) -> VllmEngineProfile {
    VllmEngineProfile {
        format: VLLM_ENGINE_FORMAT.into(),
        schema_version: VLLM_ENGINE_SCHEMA_VERSION,
        gpu: "NVIDIA H200".into(),
        model: "/m".into(),
        vllm_version: "0.26.0".into(),
        cpu_model: String::new(),
        cpu_cores: 16,
        sources: vec![],
        frontend_ns,
        idle_start_ns: 0,
        intake_ns: 0,
        stream_token_ns: 0,
        text_token_ns: 0.0,
        modes,
        dummy_weights: false,
        connect_ns: 0,
        jit_compile_ns: 0,
        role_division: Vec::new(),
    }
}

fn profile() -> VllmEngineProfile {
    profile_of(
        vec![
            mode_costs(
                EAGER,
                vec![(1, 50_000_000), (256, 56_000_000)],
                110_000_000,
                11_000.0,
            ),
            mode_costs(
                FULL_DECODE_ONLY,
                vec![(1, 3_000_000), (64, 4_000_000), (256, 12_000_000)],
                70_000_000,
                11_000.0,
            ),
        ],
        60_000_000,
    )
}

/// A step's period alone.
trait PeriodOf {
    fn period_ns(&self, graph: &GraphMode, shape: &StepShape) -> Option<u64>;
}

impl PeriodOf for EngineModel {
    fn period_ns(&self, graph: &GraphMode, shape: &StepShape) -> Option<u64> {
        self.step_cost(graph, shape).map(|c| c.period_ns)
    }
}

fn shape(graph: bool, decodes: u32, prefill: u32, padded: u32) -> StepShape {
    let work = AttentionWork {
        rows: decodes + prefill,
        real: decodes + prefill,
        decode_seqs: decodes,
        decode_context: 0,
        prefill: if prefill > 0 {
            vec![(prefill, 0)]
        } else {
            vec![]
        },
    };
    StepShape {
        graph,
        stages: 1,
        work: [vec![work], vec![]],
        tokens: vec![decodes + prefill],
        padded: vec![padded],
        sampled: vec![decodes],
        ..Default::default()
    }
}

#[test]
fn a_graph_replayed_decode_step_costs_the_period_of_its_padded_batch() {
    let engine = EngineModel::new(profile());
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 64, 256],
    };
    assert_eq!(
        engine.period_ns(&graph, &shape(true, 64, 0, 64)),
        Some(4_000_000)
    );
    // 100 decodes pad to 256: the period of 256, not of 100.
    assert_eq!(
        engine.period_ns(&graph, &shape(true, 100, 0, 256)),
        Some(12_000_000)
    );
}

#[test]
fn a_mixed_step_pays_the_larger_of_the_host_floor_and_its_tokens() {
    let engine = EngineModel::new(profile());
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 64],
    };
    assert_eq!(
        engine.period_ns(&graph, &shape(false, 8, 64, 72)),
        Some(70_000_000)
    );
    assert_eq!(
        engine.period_ns(&graph, &shape(false, 0, 8192, 8192)),
        Some(90_112_000)
    );
    assert_eq!(
        engine.period_ns(&GraphMode::Eager, &shape(false, 8, 64, 72)),
        Some(110_000_000)
    );
}

#[test]
fn an_eager_step_of_one_whole_prompt_is_the_hosts_and_others_pay_the_token_floor() {
    let mut p = profile();
    p.modes[0].prefill_extra_ns = vec![(64, 5_000_000), (8000, 9_000_000)];
    let engine = EngineModel::new(p);
    // Host: the decode table at 1 decode and 1 prompt (50 ms) plus the extra (9 ms), below
    // 8,001 tokens' floor (88 ms).
    let host = engine
        .period_ns(&GraphMode::Eager, &shape(false, 1, 8000, 8001))
        .unwrap();
    assert!(host > 58_000_000 && host < 60_000_000, "{host}");
    let floor = 88_011_000;
    // The same tokens continuing a chunked prompt, or split between two prompts, pay the floor.
    let mut continuing = shape(false, 1, 8000, 8001);
    continuing.work[0][0].prefill = vec![(8000, 4000)];
    assert_eq!(
        engine.period_ns(&GraphMode::Eager, &continuing),
        Some(floor)
    );
    let mut two = shape(false, 1, 8000, 8001);
    two.work[0][0].prefill = vec![(4000, 0), (4000, 0)];
    assert_eq!(engine.period_ns(&GraphMode::Eager, &two), Some(floor));
    // Within the prefill extra's reach (its last point × 1.5: 12,000 tokens) one whole prompt is
    // the host's; past it no injection measured one, and it pays the floor again.
    let within = engine
        .period_ns(&GraphMode::Eager, &shape(false, 1, 12000, 12001))
        .unwrap();
    assert!(within < 62_000_000, "{within}");
    assert_eq!(
        engine.period_ns(&GraphMode::Eager, &shape(false, 1, 12001, 12002)),
        Some(132_022_000)
    );
}

#[test]
fn eager_decode_interpolates_between_measured_batches() {
    let engine = EngineModel::new(profile());
    let mid = engine
        .period_ns(&GraphMode::Eager, &shape(false, 128, 0, 128))
        .unwrap();
    assert!(mid > 50_000_000 && mid < 56_000_000, "{mid}");
    assert_eq!(interpolate(&[(4, 10), (8, 20)], 1), 10);
    assert_eq!(
        interpolate(&[(4, 10), (8, 20)], 12),
        30,
        "the last slope continues"
    );
}

#[test]
fn a_mode_the_profile_lacks_adds_no_floor() {
    let mut p = profile();
    p.modes.retain(|m| m.mode == EAGER);
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![64],
    };
    assert_eq!(
        EngineModel::new(p).period_ns(&graph, &shape(true, 8, 0, 64)),
        None
    );
}

fn burst(name: &str, n: u32, input: u32, gap_s: f64, ttft_step_s: f64) -> WorkloadRecord {
    let requests = (0..n)
        .map(|i| {
            let first = 0.05 + ttft_step_s * f64::from(i) * f64::from(input) / 8192.0;
            FixedShapeRequest {
                sent_s: 0.0,
                chunk_s: (0..16).map(|k| first + gap_s * f64::from(k)).collect(),
                ..Default::default()
            }
        })
        .collect();
    WorkloadRecord {
        workload: Workload {
            name: name.into(),
            kind: WorkloadKind::FixedShape,
            input_len: input,
            output_len: 16,
            num_prompts: n,
            request_rate: None,
            max_concurrency: None,
            seed: 0,
            timeout_s: 60.0,
            min_max_num_seqs: None,
            prompt_form: Default::default(),
            stream: true,
            calibration: false,
            inject: vec![],
            temperature: None,
            keep_text: false,
            routed_experts: false,
        },
        failure: None,
        wall_s: 1.0,
        bench_result: None,
        fixed: Some(FixedShapeResult {
            requests,
            routed: None,
        }),
        steps: vec![],
        metrics_after: String::new(),
        host: None,
    }
}

/// A FULL_DECODE_ONLY server with a budget of 8,192 tokens.
const DECODE_ONLY_8192: [&str; 5] = [
    "/m",
    "--max-num-batched-tokens",
    "8192",
    "--compilation-config",
    r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#,
];

fn run(words: &[&str], records: Vec<WorkloadRecord>) -> VllmRun {
    VllmRun {
        format: "afd-vllm-run".into(),
        schema_version: 1,
        label: "t".into(),
        provenance: VllmProvenance {
            gpus: vec!["NVIDIA H200, 580, 143771 MiB".into()],
            vllm_version: "0.26.0".into(),
            ..Default::default()
        },
        serve_args: words.iter().map(|s| s.to_string()).collect(),
        server_env: BTreeMap::new(),
        backends: BTreeMap::new(),
        startup_s: 1.0,
        records,
    }
}

#[test]
fn derive_reads_decode_periods_the_floor_and_the_per_token_cost_from_bursts() {
    let records = vec![
        burst("fx-d1", 1, 128, 0.003, 0.0),
        burst("fx-d64", 64, 128, 0.004, 0.0),
        burst("fx-p2048", 1, 2048, 0.003, 0.0),
        burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
    ];
    let graph = run(
        &[
            "/m",
            "--max-num-batched-tokens",
            "8192",
            "--compilation-config",
            r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#,
        ],
        records,
    );
    let profile = derive(&[graph], &["g.json".into()]).unwrap();
    let m = &profile.modes[0];
    assert_eq!(m.mode, FULL_DECODE_ONLY);
    assert_eq!(m.decode_period_ns, vec![(1, 3_000_000), (64, 4_000_000)]);
    // The 2048-token prefill's first token at 50 ms less its step (2048 × the burst's per-token cost,
    // 25 ms) is the front end; the floor is what remains of the same first token.
    assert_eq!(profile.frontend_ns, 25_000_000);
    assert_eq!(m.nonuniform_floor_ns, 25_000_000);
    // 63 later prompts of 2048 tokens spread first tokens over 63 × 2048 / 8192 × 0.1 s.
    assert!(
        (m.nonuniform_token_ns - 0.1e9 / 8192.0).abs() < 1.0,
        "{}",
        m.nonuniform_token_ns
    );
    assert_eq!(profile.gpu, "NVIDIA H200");
}

#[test]
fn derive_refuses_unmeasured_graph_modes_and_runs_without_bursts() {
    let piecewise = run(
        &["/m", "-cc", r#"{"cudagraph_mode": "PIECEWISE"}"#],
        vec![burst("fx-d1", 1, 128, 0.003, 0.0)],
    );
    assert!(matches!(
        derive(&[piecewise], &["p".into()]),
        Err(EngineProfileError::Mode { .. })
    ));
    let eager = run(
        &["/m", "--enforce-eager"],
        vec![burst("fx-d1", 1, 128, 0.05, 0.0)],
    );
    let err = derive(&[eager], &["e".into()]).unwrap_err().to_string();
    assert!(
        err.contains("isolated prefill") || err.contains("burst"),
        "{err}"
    );
}

fn step(ctx_requests: u32, ctx_tokens: u32, gen_requests: u32) -> afd_traces::vllm_run::EngineStep {
    afd_traces::vllm_run::EngineStep {
        ctx_requests,
        ctx_tokens,
        gen_requests,
        gen_tokens: gen_requests,
        ..Default::default()
    }
}

/// A lone prompt of `input` tokens, chunked by `budget`, whose first token comes `ttft_s` after it
/// was sent; its step log holds one non-uniform step per chunk.
fn chunked(name: &str, input: u32, budget: u32, ttft_s: f64) -> WorkloadRecord {
    let mut r = burst(name, 1, input, 0.003, 0.0);
    let q = &mut r.fixed.as_mut().unwrap().requests[0];
    q.chunk_s = (0..16).map(|k| ttft_s + 0.003 * f64::from(k)).collect();
    r.steps = (0..input.div_ceil(budget))
        .map(|_| step(1, budget, 0))
        .chain((0..15).map(|_| step(0, 0, 1)))
        .collect();
    r
}

#[test]
fn the_nonuniform_table_reads_step_periods_by_tokens_and_never_falls() {
    let words = |budget: &str| {
        vec![
            "/m".to_owned(),
            "--max-num-batched-tokens".into(),
            budget.into(),
            "--compilation-config".into(),
            r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#.into(),
        ]
    };
    // 64-token chunks at 60 ms, 2,048-token chunks at 80 ms, a front end of 20 ms; then a
    // 4,096-token server whose chunks (75 ms) are cheaper than the 2,048-token ones.
    let small = {
        let mut r = run(
            &[],
            vec![
                burst("fx-d1", 1, 16, 0.003, 0.0),
                chunked("fx-p256", 256, 64, 0.020 + 4.0 * 0.060),
                chunked("fx-p1024", 1024, 64, 0.020 + 16.0 * 0.060),
            ],
        );
        r.serve_args = words("64");
        r
    };
    let large = {
        let mut r = run(
            &[],
            vec![
                chunked("fx-p2048", 2048, 2048, 0.020 + 0.080),
                chunked("fx-p8192", 8192, 2048, 0.020 + 4.0 * 0.080),
                chunked("fx-p16384", 16384, 2048, 0.020 + 8.0 * 0.080),
            ],
        );
        r.serve_args = words("2048");
        r
    };
    let larger = {
        let mut r = run(
            &[],
            vec![
                chunked("fx-p4096", 4096, 4096, 0.020 + 0.075),
                chunked("fx-p16384", 16384, 4096, 0.020 + 4.0 * 0.075),
                // A burst without a step log: it prices the per-token slope, not the table.
                burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
            ],
        );
        r.serve_args = words("4096");
        r
    };
    let p = derive(
        &[small, large, larger],
        &["s".into(), "l".into(), "x".into()],
    )
    .unwrap();
    assert!(
        (p.frontend_ns as i64 - 20_000_000).abs() < 1_000,
        "{}",
        p.frontend_ns
    );
    let table = &p.modes[0].nonuniform_period_ns;
    assert_eq!(table[0], (64, 60_000_000));
    // 2,048 tokens at 80 ms and 4,096 at 75 ms pool to one level: a step never gets cheaper
    // with more tokens.
    assert!(table.windows(2).all(|w| w[0].1 <= w[1].1), "{table:?}");
    assert_eq!(table.len(), 3);
}

/// A burst of `n` prompts answered whole (`stream: false`) after `done_s`.
fn whole(name: &str, n: u32, input: u32, output: u32, done_s: f64) -> WorkloadRecord {
    let mut r = burst(name, n, input, 0.0, 0.0);
    r.workload.stream = false;
    r.workload.output_len = output;
    for q in &mut r.fixed.as_mut().unwrap().requests {
        q.chunk_s.clear();
        q.done_s = Some(done_s);
    }
    r
}

/// A cached burst: `n` first tokens `spread_s` apart, and a step log that computed one block each.
fn cached(name: &str, n: u32, input: u32, spread_s: f64, form: PromptForm) -> WorkloadRecord {
    let mut r = burst(name, n, input, 0.003, 0.0);
    r.workload.prompt_form = form;
    for (i, q) in r.fixed.as_mut().unwrap().requests.iter_mut().enumerate() {
        q.chunk_s = vec![0.1 + spread_s * i as f64, 0.2 + spread_s * i as f64];
    }
    r.steps = vec![step(n, 16 * n, 0)];
    r
}

#[test]
fn derive_prices_the_engine_without_the_stream_the_front_ends_tokens_and_text_intake() {
    let graph_words = [
        "/m",
        "--max-num-batched-tokens",
        "8192",
        "--compilation-config",
        r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#,
    ];
    let mut bench = burst("cal-bench-d256", 256, 128, 0.0, 0.0);
    bench.workload.kind = WorkloadKind::BenchServe;
    bench.workload.calibration = true;
    bench.fixed = None;
    bench.bench_result = Some(serde_json::json!({"median_itl_ms": 9.0, "mean_tpot_ms": 10.24}));
    let records = vec![
        burst("fx-d1", 1, 128, 0.003, 0.0),
        // Streamed, 256 prompts pace at 18 ms; unstreamed, 128 tokens take 0.4 s more than 64:
        // the engine steps in 6.25 ms and the stream was the front end's pace.
        burst("fx-d256", 256, 128, 0.018, 0.0),
        whole("fx-d256-o128-ns", 256, 128, 128, 1.2),
        whole("fx-d256-o64-ns", 256, 128, 64, 0.8),
        burst("fx-p2048", 1, 2048, 0.003, 0.0),
        burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
        bench,
        cached("fx-fe-n256", 256, 1024, 0.0015, PromptForm::Ids),
        cached("fx-fe-text-n256", 256, 1024, 0.0025, PromptForm::Text),
    ];
    let profile = derive(&[run(&graph_words, records)], &["g.json".into()]).unwrap();
    let m = &profile.modes[0];
    assert_eq!(m.decode_period_ns, vec![(1, 3_000_000), (256, 6_250_000)]);
    // 10.24 ms a token over 256 streams, well above the engine's 6.25 ms: 40 µs a token (the mean
    // time per output token, not the median gap between events the client read together).
    assert_eq!(profile.stream_token_ns, 40_000);
    assert_eq!(profile.intake_ns, 1_500_000);
    // Text adds 1 ms a request over 1,024 words.
    assert!(
        (profile.text_token_ns - 976.5625).abs() < 0.01,
        "{}",
        profile.text_token_ns
    );
}

/// The fewest fixed shapes a profile derives from: decode bursts of 1 and `batch` requests stepping
/// at `lone_s` and `batch_s`, an isolated 2,048-token prefill and a full-budget prefill burst.
fn least_bursts(batch: u32, lone_s: f64, batch_s: f64) -> Vec<WorkloadRecord> {
    vec![
        burst("fx-d1", 1, 128, lone_s, 0.0),
        burst(&format!("fx-d{batch}"), batch, 128, batch_s, 0.0),
        burst("fx-p2048", 1, 2048, lone_s, 0.0),
        burst("fx-d64-c2048", 64, 2048, batch_s, 0.1),
    ]
}

/// A calibration bench run of `n` prompts sent at once (at most `concurrency` in flight) whose
/// stamped step log holds the first request's steps at `lone_s` and then a step of many.
fn bench_burst(name: &str, n: u32, concurrency: Option<u32>, lone_s: &[f64]) -> WorkloadRecord {
    let mut r = burst(name, n, 128, 0.0, 0.0);
    r.workload.kind = WorkloadKind::BenchServe;
    r.workload.calibration = true;
    r.workload.max_concurrency = concurrency;
    r.fixed = None;
    r.bench_result = Some(serde_json::json!({"mean_tpot_ms": 10.0}));
    let stamped = |mut s: afd_traces::vllm_run::EngineStep, at: f64| {
        s.logged_s = Some(1_000.0 + at);
        s
    };
    r.steps = lone_s
        .iter()
        .enumerate()
        .map(|(i, &at)| {
            stamped(
                if i == 0 {
                    step(1, 128, 0)
                } else {
                    step(0, 0, 1)
                },
                at,
            )
        })
        .collect();
    let last = lone_s.last().copied().unwrap_or(0.0);
    r.steps.push(stamped(step(16, 2048, 1), last + 0.07));
    r.steps.push(stamped(step(16, 2048, 17), last + 0.14));
    r
}

#[test]
fn the_bench_clients_connections_are_read_from_its_bursts_first_lone_steps() {
    let words = ["/m", "--enforce-eager", "--max-num-batched-tokens", "8192"];
    let with = |extra: Vec<WorkloadRecord>| {
        let mut records = least_bursts(256, 0.050, 0.056);
        records.extend(extra);
        records
    };
    // Server a: 256 at once, the second request reached the engine between the stamps 0.10 and
    // 0.15 s after the first step's: 0.125 s over 255 connections. Its 64-at-once burst at a
    // concurrency of 32 opens too few to read, and its 128-burst met the first step (k = 1).
    let a = run(
        &words,
        with(vec![
            bench_burst("cal-bench-d256", 256, None, &[0.0, 0.05, 0.10, 0.15]),
            bench_burst("cal-bench-c32", 64, Some(32), &[0.0, 0.05, 0.10]),
            bench_burst("cal-bench-d128", 128, None, &[0.0]),
        ]),
    );
    // Server b, twice: 0.255 s and 0.0762 s over 255 and 127 connections (1 ms and 0.6 ms).
    let b = run(
        &words,
        with(vec![
            bench_burst("cal-bench-d256", 256, None, &[0.0, 0.2, 0.31]),
            bench_burst("cal-bench-d128", 128, Some(128), &[0.0, 0.05, 0.1024]),
        ]),
    );
    // Server c: no stamps, so nothing.
    let mut unstamped = bench_burst("cal-bench-d256", 256, None, &[0.0, 0.05, 0.10, 0.15]);
    for s in &mut unstamped.steps {
        s.logged_s = None;
    }
    let c = run(&words, with(vec![unstamped]));
    let names = ["a".to_string(), "b".to_string(), "c".to_string()];
    let alone = derive(std::slice::from_ref(&a), &names[..1]).unwrap();
    assert_eq!(alone.connect_ns, 490_196);
    // Every server counts once: a's figure and b's median (0.8 ms), the median of the two.
    let both = derive(&[a, b, c.clone()], &names).unwrap();
    assert_eq!(both.connect_ns, (490_196 + 800_000) / 2);
    // A server without a stamped burst measures none.
    assert_eq!(derive(&[c], &names[2..]).unwrap().connect_ns, 0);
}

#[test]
fn a_noisy_decode_table_is_made_non_decreasing() {
    let eager = run(
        &["/m", "--enforce-eager", "--max-num-batched-tokens", "8192"],
        vec![
            burst("fx-d1", 1, 128, 0.080, 0.0),
            burst("fx-d4", 4, 128, 0.060, 0.0),
            burst("fx-d16", 16, 128, 0.070, 0.0),
            burst("fx-p2048", 1, 2048, 0.05, 0.0),
            burst("fx-d64-c2048", 64, 2048, 0.06, 0.1),
        ],
    );
    let profile = derive(&[eager], &["e.json".into()]).unwrap();
    // 80 then 60 pool to 70; 70 stays.
    assert_eq!(
        profile.modes[0].decode_period_ns,
        vec![(1, 70_000_000), (4, 70_000_000), (16, 70_000_000)]
    );
}

#[test]
fn long_contexts_add_to_a_decode_step_what_their_burst_measured() {
    let mut long = burst("fx-d16-c4096-o64", 16, 4096, 0.0, 0.0);
    long.workload.output_len = 64;
    for q in &mut long.fixed.as_mut().unwrap().requests {
        // 4.0 ms a token against the table's 3.0 ms at 16: 1 ms over 16 × (4,128 − 144) tokens.
        q.chunk_s = (0..64).map(|k| 0.05 + 0.004 * f64::from(k)).collect();
    }
    let records = vec![
        burst("fx-d16", 16, 128, 0.003, 0.0),
        burst("fx-p2048", 1, 2048, 0.003, 0.0),
        burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
        long,
    ];
    let words = DECODE_ONLY_8192;
    let profile = derive(&[run(&words, records)], &["g.json".into()]).unwrap();
    let m = &profile.modes[0];
    // The table's bursts: 128-token prompts, 16 output tokens, 136 a sequence on average.
    assert_eq!(m.decode_reference_context, 136);
    let slope = 1e6 / (16.0 * (4096.0 + 32.0 - 136.0));
    assert!(
        (m.decode_context_ns - slope).abs() < 0.01,
        "{} vs {slope}",
        m.decode_context_ns
    );
    let engine = EngineModel::new(profile.clone());
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![16],
    };
    let mut step = shape(true, 16, 0, 16);
    let short = engine.period_ns(&graph, &step).unwrap();
    step.work[0][0].decode_context = 16 * 4128;
    let longer = engine.period_ns(&graph, &step).unwrap();
    assert!(longer > short, "{longer} vs {short}");
}

#[test]
fn a_graph_mode_without_long_context_bursts_takes_the_other_graph_modes_slope() {
    let measured = |name: &str, slope: f64| {
        let mut m = mode_costs(name, vec![(1, 3_000_000)], 80_000_000, 10_000.0);
        m.decode_context_ns = slope;
        m.evidence
            .insert("decode_context_fx-d16-c4096-o64".into(), "g.json:x".into());
        m
    };
    let unmeasured = |name: &str| mode_costs(name, vec![(1, 3_000_000)], 80_000_000, 10_000.0);
    // The piecewise mode ran no long-context burst: it takes the decode-only mode's 8 ns; eager
    // (host-bound decodes) keeps its own none.
    let mut modes = vec![
        unmeasured(EAGER),
        unmeasured(FULL_AND_PIECEWISE),
        measured(FULL_DECODE_ONLY, 8.0),
    ];
    share_decode_context(&mut modes);
    assert_eq!(modes[0].decode_context_ns, 0.0);
    assert_eq!(modes[1].decode_context_ns, 8.0);
    assert!(modes[1].evidence["decode_context_shared"].starts_with(FULL_DECODE_ONLY));
    // A mode that measured its own (even a slope of 0) keeps it.
    let mut modes = vec![
        measured(FULL_AND_PIECEWISE, 0.0),
        measured(FULL_DECODE_ONLY, 8.0),
    ];
    share_decode_context(&mut modes);
    assert_eq!(modes[0].decode_context_ns, 0.0);
    assert!(!modes[0].evidence.contains_key("decode_context_shared"));
}

/// A standing burst of `n` 128-token prompts streaming a token every `gap_s` from 0.1 s for 2 s, and
/// one 4-token request of each `(at_s, input_len, step_s)` injected into it: its first token comes
/// `step_s` + 5 ms after it is sent, and every standing stream shows one gap of `step_s` there.
fn injected(name: &str, n: u32, gap_s: f64, injections: &[(f64, u32, f64)]) -> WorkloadRecord {
    let mut r = burst(name, n, 128, gap_s, 0.0);
    let mut chunks = Vec::new();
    let mut t = 0.1;
    while t < 2.1 {
        chunks.push(t);
        let stall = injections
            .iter()
            .find(|&&(at, _, _)| at > t - 1e-9 && at < t + gap_s);
        t += stall.map_or(gap_s, |&(_, _, step)| step);
    }
    for q in &mut r.fixed.as_mut().unwrap().requests {
        q.chunk_s = chunks.clone();
    }
    r.workload.output_len = chunks.len() as u32;
    for &(at, input, step) in injections {
        r.workload.inject.push(afd_traces::vllm_run::Injection {
            at_s: at,
            input_len: input,
            output_len: 4,
        });
        r.fixed.as_mut().unwrap().requests.push(FixedShapeRequest {
            sent_s: at,
            chunk_s: vec![at + step + 0.005, at + step + 0.01],
            ..Default::default()
        });
    }
    r
}

fn with_floor_records(mut records: Vec<WorkloadRecord>) -> Vec<WorkloadRecord> {
    records.extend([
        burst("fx-p2048", 1, 2048, 0.003, 0.0),
        burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
    ]);
    records
}

#[test]
fn injected_requests_price_mixed_steps_and_piecewise_graphs_split_at_the_capture_size() {
    let inject = injected(
        "fx-inj-b8",
        8,
        0.004,
        &[
            (0.5, 64, 0.015),
            (0.8, 300, 0.017),
            (1.1, 1024, 0.070),
            (1.4, 2048, 0.080),
        ],
    );
    let records = with_floor_records(vec![burst("fx-d8", 8, 128, 0.004, 0.0), inject]);
    let words = |cc: &str| {
        [
            "/m",
            "--max-num-seqs",
            "256",
            "--max-num-batched-tokens",
            "8192",
            "-cc",
            cc,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let mut piecewise = run(&[], records.clone());
    piecewise.serve_args = words(r#"{"cudagraph_mode": "FULL_AND_PIECEWISE"}"#);
    let mut decode_only = run(&[], records);
    decode_only.serve_args = words(r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#);
    let p = derive(&[piecewise], &["p".into()]).unwrap();
    let m = &p.modes[0];
    assert_eq!(m.mode, FULL_AND_PIECEWISE);
    // 64 + 8 and 300 + 8 tokens fit the largest capture size (2 × 256, at most 512): piecewise
    // graphs; 1,032 and 2,056 tokens run without graphs.
    assert_eq!(m.piecewise_max_tokens, 512);
    assert_eq!(
        m.piecewise_period_ns,
        vec![(72, 15_000_000), (308, 17_000_000)]
    );
    assert!(
        m.nonuniform_period_ns.contains(&(1032, 70_000_000)),
        "{:?}",
        m.nonuniform_period_ns
    );
    assert!(
        m.nonuniform_period_ns.contains(&(2056, 80_000_000)),
        "{:?}",
        m.nonuniform_period_ns
    );
    // Under FULL_DECODE_ONLY every injected step is one of the non-uniform table's points.
    let d = derive(&[decode_only], &["d".into()]).unwrap();
    let table = &d.modes[0].nonuniform_period_ns;
    assert!(d.modes[0].piecewise_period_ns.is_empty());
    assert_eq!(table[0], (72, 15_000_000), "{table:?}");
    assert!(table.windows(2).all(|w| w[0].1 <= w[1].1), "{table:?}");

    let engine = EngineModel::new(p);
    let graph = GraphMode::FullAndPiecewise {
        capture_sizes: vec![8, 512],
        piecewise_sizes: vec![8, 512],
    };
    assert_eq!(
        engine.period_ns(&graph, &shape(false, 8, 300, 512)),
        Some(17_000_000),
        "a 308-token mixed step replays piecewise graphs"
    );
    assert_eq!(
        engine.period_ns(&graph, &shape(false, 8, 1024, 1032)),
        Some(70_000_000),
        "past the largest capture size it runs without graphs"
    );
    assert_eq!(engine.mode_names(), vec!["FULL_AND_PIECEWISE"]);
}

#[test]
fn eager_mixed_steps_add_what_injected_prefills_took_beyond_the_standing_gap() {
    let eager_words = ["/m", "--enforce-eager", "--max-num-batched-tokens", "8192"];
    // The standing batch steps in 60 ms; a 64-token prefill adds 10 ms, a 2,048-token one 30 ms; a
    // first-use compile (1 s, over three standing periods) is no step and is left out.
    let inject = injected(
        "fx-inj-b8",
        8,
        0.060,
        &[(0.3, 64, 0.070), (0.9, 2048, 0.090), (1.5, 300, 1.0)],
    );
    let records = with_floor_records(vec![burst("fx-d8", 8, 128, 0.060, 0.0), inject]);
    let p = derive(&[run(&eager_words, records)], &["e".into()]).unwrap();
    let m = &p.modes[0];
    let extra = &m.prefill_extra_ns;
    assert_eq!(extra.len(), 2, "{extra:?}");
    assert!((extra[0].1 as i64 - 10_000_000).abs() < 1_000, "{extra:?}");
    assert!((extra[1].1 as i64 - 30_000_000).abs() < 1_000, "{extra:?}");
    assert!(m.nonuniform_period_ns.is_empty());
    let engine = EngineModel::new(p);
    // 8 decodes and a 64-token chunk: nine requests' host step and what the chunk adds.
    let mixed = engine
        .period_ns(&GraphMode::Eager, &shape(false, 8, 64, 72))
        .unwrap();
    assert!((mixed as i64 - 70_000_000).abs() < 1_000, "{mixed}");
}

#[test]
fn bench_calibration_runs_set_the_decode_period_where_the_engine_set_their_pace() {
    let bench = |name: &str, n: u32, tpot_ms: f64| {
        let mut b = burst(name, n, 128, 0.0, 0.0);
        b.workload.kind = WorkloadKind::BenchServe;
        b.workload.calibration = true;
        b.workload.output_len = 128;
        b.fixed = None;
        b.bench_result = Some(serde_json::json!({"mean_tpot_ms": tpot_ms}));
        b
    };
    let graph_words = [
        "/m",
        "--max-num-batched-tokens",
        "8192",
        "-cc",
        r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#,
    ];
    let graph = with_floor_records(vec![
        burst("fx-d64", 64, 128, 0.004, 0.0),
        burst("fx-d256", 256, 128, 0.006, 0.0),
        // Past 64 streams a streamed figure needs an unstreamed pair of its batch: 6 ms a token.
        whole("fx-d256-o128-ns", 256, 128, 128, 0.868),
        whole("fx-d256-o64-ns", 256, 128, 64, 0.484),
        // At 64 the bench client sees the engine (4.4 ms): it sets the table; at 256 it sees 13 ms,
        // the front end's pace: the table keeps the probe's 6 ms and the run prices the front end.
        bench("cal-bench-d64", 64, 4.4),
        bench("cal-bench-d256", 256, 13.0),
    ]);
    let p = derive(&[run(&graph_words, graph)], &["g".into()]).unwrap();
    assert_eq!(
        p.modes[0].decode_period_ns,
        vec![(64, 4_400_000), (256, 6_000_000)]
    );
    assert_eq!(p.stream_token_ns, (13.0e6 / 256.0_f64).round() as u64);
    // The evidence names the run that read it, with its figure; the engine-paced run is absent.
    assert_eq!(
        p.modes[0].evidence["stream_token"],
        "g:cal-bench-d256 (50.8 µs)"
    );
    // Eager steps are the host's: a bench run 30 % above the probe is the client's share of the
    // host, not the front end's pace, and it sets the table; eager runs price no front end.
    let eager = with_floor_records(vec![
        burst("fx-d64", 64, 128, 0.060, 0.0),
        bench("cal-bench-d64", 64, 78.0),
    ]);
    let p = derive(
        &[run(
            &["/m", "--enforce-eager", "--max-num-batched-tokens", "8192"],
            eager,
        )],
        &["e".into()],
    )
    .unwrap();
    assert_eq!(p.modes[0].decode_period_ns, vec![(64, 78_000_000)]);
    assert_eq!(p.stream_token_ns, 0);
    assert!(!p.modes[0].evidence.contains_key("stream_token"));
}

#[test]
fn one_prompt_injected_beside_two_batches_prices_what_a_decode_adds_to_a_mixed_step() {
    // A 256-token prompt takes a 60 ms step beside 8 decodes and 72 ms beside 64: 12 ms over 56
    // decodes. The table holds the step less that share, and a priced step adds it back.
    let records = with_floor_records(vec![
        burst("fx-d8", 8, 128, 0.004, 0.0),
        burst("fx-d64", 64, 128, 0.005, 0.0),
        injected("fx-inj-b8", 8, 0.004, &[(0.5, 256, 0.060)]),
        injected("fx-inj-b64", 64, 0.005, &[(0.5, 256, 0.072)]),
    ]);
    let words = DECODE_ONLY_8192;
    let p = derive(&[run(&words, records)], &["g".into()]).unwrap();
    let m = &p.modes[0];
    let per_decode = 0.012e9 / 56.0;
    assert!(
        (m.mixed_decode_ns - per_decode).abs() < 1.0,
        "{}",
        m.mixed_decode_ns
    );
    // The evidence names the server's pair and its own slope: 12 ms over 56 decodes.
    assert_eq!(
        m.evidence["mixed_decode"],
        "g: 1 pairs 56-56 decodes apart, 0.214 ms a decode"
    );
    // Both steps, less their decodes' share, are one point (264 and 320 tokens group together).
    let base = (0.060e9 - 8.0 * per_decode).round() as u64;
    assert_eq!(m.nonuniform_period_ns, vec![(292, base)]);
    let engine = EngineModel::new(p);
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![8, 64],
    };
    let step = engine
        .period_ns(&graph, &shape(false, 8, 256, 264))
        .unwrap();
    assert!((step as i64 - 60_000_000).abs() < 1_000, "{step}");
}

/// Across servers every server's slope counts once, alike: a server's many pairs ran on one loan,
/// and one server's wide pairs do not set the term for the others' regimes. Thirteen pairs of one
/// server at 0 ms a decode (48 apart) and one wide pair of another at 0.3 ms (56 apart) meet a third
/// server's narrow pair at 0.1 ms in the middle; within a server, a narrow pair weighs little.
#[test]
fn the_decode_term_counts_every_server_once() {
    let step = |run: &str, input_len: u32, decoding: u32, period_s: f64| Injected {
        tokens: input_len + decoding,
        prefill: input_len,
        period_s,
        standing_s: 0.005,
        ttft_s: 0.08,
        batch: decoding,
        one_step: true,
        max_capture: 512,
        decoding,
        input_len,
        run: run.to_owned(),
        evidence: format!("{run}:x"),
    };
    let mut steps = Vec::new();
    for len in 0..13 {
        steps.push(step("many", 64 + len, 16, 0.080));
        steps.push(step("many", 64 + len, 64, 0.080));
    }
    steps.push(step("one", 256, 8, 0.070));
    steps.push(step("one", 256, 64, 0.070 + 56.0 * 0.0003));
    // Within "one", a pair 2 apart at -5 ms a decode weighs 4 against 3,136.
    steps.push(step("one", 256, 10, 0.060));
    // A third server's one narrow pair (64/64: 2 and 8 decodes) at 0.1 ms a decode.
    steps.push(step("narrow", 62, 2, 0.060));
    steps.push(step("narrow", 62, 8, 0.060 + 6.0 * 0.0001));
    let refs: Vec<&Injected> = steps.iter().collect();
    let mut evidence = BTreeMap::new();
    let per_decode = decode_slope_s(&refs, "d", &mut evidence);
    assert!((per_decode - 0.0001).abs() < 1e-12, "{per_decode}");
    assert!(evidence["d"].contains("many: 13 pairs 48-48 decodes apart, 0.000 ms a decode"));
    assert!(evidence["d"].contains("one: 3 pairs 2-56 decodes apart, 0.300 ms a decode"));
    assert!(evidence["d"].contains("narrow: 1 pairs 6-6 decodes apart, 0.100 ms a decode"));
    // Pooled pair by pair, the thirteen would have set it at 0; each server weighted by its widest
    // pair squared, "one" would have (3,136 against 2,304 and 36).
    let pooled = weighted_median(vec![
        (0.0, 13.0 * 48.0 * 48.0),
        (0.0003, 56.0 * 56.0),
        (0.0001, 36.0),
    ]);
    assert_eq!(pooled, Some(0.0));
    let by_widest = weighted_median(vec![
        (0.0, 48.0 * 48.0),
        (0.0003, 56.0 * 56.0),
        (0.0001, 36.0),
    ]);
    assert_eq!(by_widest, Some(0.0003));
}

#[test]
fn a_server_on_vllms_defaults_takes_the_limits_vllm_gives_its_gpu() {
    let defaults = run(&["/m"], vec![]);
    assert_eq!(serve_limits(&defaults), Some((1024, 8192)), "an H200");
    let mut a100 = run(&["/m", "--max-num-seqs", "64"], vec![]);
    a100.provenance.gpus = vec!["NVIDIA A100-SXM4-80GB, 580, 81920 MiB".into()];
    assert_eq!(serve_limits(&a100), Some((64, 2048)));
    let mut unknown = run(&["/m"], vec![]);
    unknown.provenance.gpus = vec!["NVIDIA H200".into()];
    assert_eq!(serve_limits(&unknown), None, "no memory, no default");
    let bad = run(&["/m", "--max-num-batched-tokens", "lots"], vec![]);
    assert_eq!(serve_limits(&bad), None);
}

#[test]
fn eager_servers_alone_read_the_front_end_with_the_next_steps_issue_taken_off() {
    let eager_words = ["/m", "--enforce-eager", "--max-num-batched-tokens", "8192"];
    // The standing batch steps in 60 ms; a 64-token prefill adds 10 ms, a 2,048-token one 30 ms. An
    // eager step's tokens leave once the next step is issued, a standing period later: each
    // injected request's first token comes half a period (its wait), its step, a period and a 4 ms
    // front end after it was sent.
    let mut inject = injected(
        "fx-inj-b8",
        8,
        0.060,
        &[(0.3, 64, 0.070), (0.9, 2048, 0.090)],
    );
    for q in inject.fixed.as_mut().unwrap().requests.iter_mut().skip(8) {
        let step = if q.sent_s < 0.5 { 0.070 } else { 0.090 };
        q.chunk_s = vec![q.sent_s + 0.030 + step + 0.060 + 0.004];
    }
    // The lone 2,048-token prompt: the front end, a 6 ms idle start, its step at the host's price
    // (one request's 60 ms and the 30 ms extra) and the next step's issue (60 ms).
    let mut records = with_floor_records(vec![burst("fx-d8", 8, 128, 0.060, 0.0), inject]);
    let lone = records
        .iter_mut()
        .find(|r| r.workload.name == "fx-p2048")
        .unwrap();
    lone.fixed.as_mut().unwrap().requests[0].chunk_s = vec![0.004 + 0.006 + 0.090 + 0.060];
    let p = derive(&[run(&eager_words, records)], &["e".into()]).unwrap();
    assert!(
        (p.frontend_ns as i64 - 4_000_000).abs() < 1_000,
        "{}",
        p.frontend_ns
    );
    assert!(
        (p.idle_start_ns as i64 - 6_000_000).abs() < 1_000,
        "{}",
        p.idle_start_ns
    );
    let read = &p.modes[0].evidence[FRONTEND_EVIDENCE];
    assert!(
        read.starts_with("eager servers' injected requests"),
        "{read}"
    );
}

#[test]
fn injected_requests_price_the_front_end_and_lone_prompts_the_idle_start() {
    // Standing bursts price a 72-token piecewise step at 15 ms and a 308-token one at 17 ms, and
    // their injected requests got their first token 5 ms after their step: less half the standing
    // period (the wait for the step), the front end takes 3 ms on a running engine. A lone 300-token
    // prompt got its first token 29 ms after it was sent: 12 ms beyond its step, 9 ms of them the
    // idle engine's start.
    let inject = injected(
        "fx-inj-b8",
        8,
        0.004,
        &[(0.5, 64, 0.015), (0.8, 300, 0.017)],
    );
    let mut lone = burst("fx-p300", 1, 300, 0.004, 0.0);
    for q in &mut lone.fixed.as_mut().unwrap().requests {
        q.chunk_s = (0..16).map(|k| 0.029 + 0.004 * f64::from(k)).collect();
    }
    // A lone prompt past the largest capture size (512) is no piecewise step and says nothing.
    let mut long = burst("fx-p2048", 1, 2048, 0.004, 0.0);
    for q in &mut long.fixed.as_mut().unwrap().requests {
        q.chunk_s = (0..16).map(|k| 0.5 + 0.004 * f64::from(k)).collect();
    }
    let records = vec![
        burst("fx-d8", 8, 128, 0.004, 0.0),
        inject,
        lone,
        long,
        burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
    ];
    let piecewise = run(&["/m", "--max-num-seqs", "256"], records);
    let p = derive(&[piecewise], &["p".into()]).unwrap();
    assert_eq!(p.modes[0].piecewise_period_ns[1], (308, 17_000_000));
    let piecewise_at_300 = interpolate(&p.modes[0].piecewise_period_ns, 300);
    assert_eq!(p.frontend_ns, 3_000_000);
    assert_eq!(p.idle_start_ns, 29_000_000 - piecewise_at_300 - 3_000_000);
    // The lone 300-token prompt and the one injected beside 8 decodes are a pair of one server: 29
    // ms against 22 ms, plus the half standing period the running one waited, is 9 ms more than
    // its 17 ms step (piecewise graphs; no decode term here): a prefill alone costs 26/17 of it.
    assert_eq!(p.modes[0].pure_piecewise_ratio, Some(1.5294));
    assert_eq!(p.modes[0].pure_prefill_ratio, None);
}

/// A record of one 16-token request done at 0.2 s and requests injected after it at `(at, prompt,
/// first token after sending)`, each done 10 ms after its first token.
fn idle_spells(name: &str, injections: &[(f64, u32, f64)]) -> WorkloadRecord {
    let mut r = burst(name, 1, 16, 0.004, 0.0);
    let fixed = r.fixed.as_mut().unwrap();
    fixed.requests[0].done_s = Some(0.2);
    for &(at, input, ttft) in injections {
        r.workload.inject.push(afd_traces::vllm_run::Injection {
            at_s: at,
            input_len: input,
            output_len: 4,
        });
        fixed.requests.push(FixedShapeRequest {
            sent_s: at,
            chunk_s: vec![at + ttft, at + ttft + 0.005],
            done_s: Some(at + ttft + 0.01),
            ..Default::default()
        });
    }
    r
}

#[test]
fn a_prefill_beside_no_decode_is_priced_from_idle_and_running_prompts_of_one_server() {
    // Beside 8 standing decodes (4 ms a step) a 256-token prompt was prefilled in a 17 ms step and
    // got its first token 22 ms after it was sent. Alone on the idle engine the same prompt took 30
    // ms: its step took 30 - 22 + 2 (the half step the running one waited) + 17 = 27 ms, 27/17 of
    // the step beside the decodes.
    let running = injected("fx-inj-b8", 8, 0.004, &[(0.8, 256, 0.017)]);
    let idle = idle_spells("fx-idle-a", &[(0.5, 256, 0.030), (1.5, 256, 0.030)]);
    // Two requests sent 10 ms apart, each before the other's first token: neither met it idle.
    let crowded = idle_spells("fx-idle-b", &[(0.5, 256, 0.030), (0.51, 256, 0.030)]);
    let records = with_floor_records(vec![
        burst("fx-d8", 8, 128, 0.004, 0.0),
        running.clone(),
        idle,
        crowded.clone(),
    ]);
    let words = ["/m", "--max-num-seqs", "256"];
    let p = derive(&[run(&words, records)], &["p".into()]).unwrap();
    assert_eq!(p.modes[0].pure_piecewise_ratio, Some(1.5882));
    let evidence = &p.modes[0].evidence["pure_piecewise_p256"];
    assert!(evidence.contains("p:fx-idle-a+256@1.5"), "{evidence}");
    assert!(evidence.contains("p:fx-inj-b8+256@0.8"), "{evidence}");
    assert!(!evidence.contains("fx-idle-b"), "{evidence}");
    // An idle engine that answers sooner prices a cheaper step: 12 - 22 + 2 + 17 = 9 ms.
    let quick = idle_spells("fx-idle-a", &[(0.5, 256, 0.012)]);
    let records = with_floor_records(vec![burst("fx-d8", 8, 128, 0.004, 0.0), running, quick]);
    let p = derive(&[run(&words, records)], &["p".into()]).unwrap();
    assert_eq!(p.modes[0].pure_piecewise_ratio, Some(0.5294));
    let graph = GraphMode::FullAndPiecewise {
        capture_sizes: vec![8, 512],
        piecewise_sizes: vec![8, 512],
    };
    let engine = EngineModel::new(p.clone());
    let table = interpolate(&p.modes[0].piecewise_period_ns, 256);
    let alone = engine
        .step_cost(&graph, &shape(false, 0, 256, 256))
        .unwrap();
    assert_eq!(alone.period_ns, (table as f64 * 0.5294).round() as u64);
    let beside = engine
        .step_cost(&graph, &shape(false, 1, 256, 257))
        .unwrap();
    assert!(beside.period_ns >= table, "{beside:?}");
    // The pairs measured 256-token prompts: the ratio reaches steps of up to 384 tokens, and a
    // larger one beside no decode costs the table.
    assert_eq!(p.modes[0].pure_piecewise_max_tokens, Some(384));
    let table = interpolate(&p.modes[0].piecewise_period_ns, 500);
    let past = engine
        .step_cost(&graph, &shape(false, 0, 500, 500))
        .unwrap();
    assert_eq!(past.period_ns, table);
    // The ratio prices the idle engine's first step: no idle start is added to it.
    assert_eq!(engine.idle_start_ns(&graph), 0);
    // Without a pair the mode has no ratio, and the engine model takes the profile's idle start.
    let records = with_floor_records(vec![burst("fx-d8", 8, 128, 0.004, 0.0), crowded]);
    let mut p = derive(&[run(&words, records)], &["p".into()]).unwrap();
    assert_eq!(p.modes[0].pure_piecewise_ratio, None);
    p.idle_start_ns = 7_000_000;
    assert_eq!(EngineModel::new(p).idle_start_ns(&graph), 7_000_000);
}

#[test]
fn a_spans_steps_beside_no_decode_enter_the_table_on_the_ratios_footing() {
    // FULL_DECODE_ONLY at 64/64: a lone 1,024-token prompt's 16 chunks, each a step beside no
    // decode. Where the mode's pairs price such a step at 1.1 of the mixed one, the span is read as
    // 1.1 of the table's (mixed) step, so that the model gives the chunk back what it measured.
    let mut words = DECODE_ONLY_8192.to_vec();
    words[2] = "64";
    words.extend(["--max-num-seqs", "64"]);
    let records = with_floor_records(vec![
        burst("fx-d8", 8, 128, 0.004, 0.0),
        chunked("fx-p1024", 1024, 64, 0.066 * 16.0),
    ]);
    let server = run(&words, records);
    let runs = [("g", &server)];
    let decode = vec![(8, 4_000_000)];
    let injected = injected_steps(&runs, &decode, false);
    let table_at_64 = |pure| {
        let mut evidence = BTreeMap::new();
        let tables = step_tables(
            FULL_DECODE_ONLY,
            &runs,
            &injected,
            &decode,
            0.0,
            pure,
            &mut evidence,
        );
        interpolate(&tables.nonuniform, 64) as f64
    };
    let plain = table_at_64((None, None));
    let reach = |max_tokens| idle::PureRatio {
        ratio: 1.1,
        max_tokens,
    };
    let on_ratio = table_at_64((Some(reach(96)), None));
    assert!(
        (on_ratio * 1.1 - plain).abs() < 2.0,
        "{on_ratio} × 1.1 vs {plain}"
    );
    // A ratio whose pairs reach no step of the span's tokens leaves it as measured.
    assert_eq!(table_at_64((Some(reach(32)), None)), plain);
    // The ratio a step takes: within the reach, past it, and in profiles without a reach.
    let at = |ratio, max_tokens, tokens| {
        idle::PureRatio::of(ratio, max_tokens).map_or(1.0, |p| p.at(tokens))
    };
    assert_eq!(at(Some(1.1), Some(96), 64), 1.1);
    assert_eq!(at(Some(1.1), Some(96), 97), 1.0);
    assert_eq!(at(Some(1.1), None, 10_000), 1.1);
    assert_eq!(at(None, Some(96), 64), 1.0);
}

#[test]
fn a_large_streamed_graph_burst_prices_decode_only_beside_an_unstreamed_pair() {
    let records = with_floor_records(vec![
        burst("fx-d64", 64, 128, 0.004, 0.0),
        // 512 streams paced by the client at 40 ms a token: no engine period.
        burst("fx-d512", 512, 16, 0.040, 0.0),
    ]);
    let graph = run(&DECODE_ONLY_8192, records.clone());
    let profile = derive(&[graph], &["g".into()]).unwrap();
    assert_eq!(profile.modes[0].decode_period_ns, vec![(64, 4_000_000)]);
    // Eager steps are the host's, slower than any stream: the same burst prices its batch.
    let mut eager_words = DECODE_ONLY_8192[..3].to_vec();
    eager_words.push("--enforce-eager");
    let eager = run(&eager_words, records);
    let profile = derive(&[eager], &["e".into()]).unwrap();
    assert!(
        profile.modes[0]
            .decode_period_ns
            .contains(&(512, 40_000_000)),
        "{:?}",
        profile.modes[0].decode_period_ns
    );
}

#[test]
fn chunks_within_the_capture_size_price_the_piecewise_table_not_the_graphless_one() {
    // vLLM's default mode at 64/64 (largest capture size 64, the budget): a lone prompt chunked at 64
    // replays the piecewise graphs in every chunk (12 ms each); 8,192-token chunks run without
    // graphs (80 ms).
    let mut small = run(
        &[
            "/m",
            "--max-num-seqs",
            "64",
            "--max-num-batched-tokens",
            "64",
        ],
        vec![
            burst("fx-d1", 1, 16, 0.003, 0.0),
            chunked("fx-p256", 256, 64, 0.020 + 4.0 * 0.012),
            chunked("fx-p1024", 1024, 64, 0.020 + 16.0 * 0.012),
        ],
    );
    small.label = "small".into();
    let large = run(
        &["/m", "--max-num-batched-tokens", "8192"],
        with_floor_records(vec![
            chunked("fx-p8192", 8192, 8192, 0.020 + 0.080),
            chunked("fx-p16384", 16384, 8192, 0.020 + 2.0 * 0.080),
        ]),
    );
    let p = derive(&[small, large], &["s".into(), "l".into()]).unwrap();
    let m = &p.modes[0];
    assert_eq!(m.mode, FULL_AND_PIECEWISE);
    assert_eq!(m.piecewise_max_tokens, 64);
    assert_eq!(
        m.piecewise_period_ns.len(),
        1,
        "{:?}",
        m.piecewise_period_ns
    );
    assert_eq!(m.piecewise_period_ns[0].0, 64);
    assert!(
        m.nonuniform_period_ns
            .iter()
            .all(|&(tokens, _)| tokens > 64),
        "{:?}",
        m.nonuniform_period_ns
    );
}

#[test]
fn a_one_token_prefill_chunk_beside_decodes_is_a_uniform_decode_step() {
    // vLLM's uniform-decode test counts requests that schedule one token each: 63 decodes and a
    // prompt's one-token chunk replay the full graph of 64, priced by the decode table.
    let engine = EngineModel::new(profile());
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 64, 256],
    };
    assert_eq!(
        engine.period_ns(&graph, &shape(true, 63, 1, 64)),
        engine.period_ns(&graph, &shape(true, 64, 0, 64)),
    );
    // Two prefill tokens is a mixed step: the non-uniform price, far above the graph's.
    let mixed = engine.period_ns(&graph, &shape(false, 62, 2, 64)).unwrap();
    assert!(mixed > 4_000_000, "{mixed}");
}

/// A burst of `n` streams decoding every `gap_s`, and one `input`-token request sent at `at_s` that
/// is prefilled over `stalls.len()` mixed steps, the standing streams stalling that long each.
fn injected_over_steps(
    name: &str,
    n: u32,
    gap_s: f64,
    at_s: f64,
    input: u32,
    stalls: &[f64],
) -> WorkloadRecord {
    let mut r = burst(name, n, 128, gap_s, 0.0);
    let mut chunks = Vec::new();
    let mut t = 0.1;
    while t < at_s {
        chunks.push(t);
        t += gap_s;
    }
    for &stall in stalls {
        chunks.push(t);
        t += stall;
    }
    let first = t;
    for _ in 0..8 {
        chunks.push(t);
        t += gap_s;
    }
    for q in &mut r.fixed.as_mut().unwrap().requests {
        q.chunk_s = chunks.clone();
    }
    r.workload.output_len = chunks.len() as u32;
    r.workload.inject.push(afd_traces::vllm_run::Injection {
        at_s,
        input_len: input,
        output_len: 4,
    });
    r.fixed.as_mut().unwrap().requests.push(FixedShapeRequest {
        sent_s: at_s,
        chunk_s: vec![first + 0.001, first + 0.002],
        ..Default::default()
    });
    r
}

#[test]
fn piecewise_mixed_steps_add_what_each_decode_beside_the_prefill_costs() {
    // At 64/64 under FULL_AND_PIECEWISE every mixed step schedules 64 tokens. A 200-token prompt
    // beside 8 decodes (56-token chunks, 4 steps of 11 ms) and beside 56 (8-token chunks, 25
    // steps of 15 ms, one of them a 40 ms hiccup): the multi-step stalls' median prices each, and
    // the difference over 48 decodes is what a decode adds to a piecewise step.
    let stalls_56: Vec<f64> = (0..25)
        .map(|k| if k == 3 { 0.040 } else { 0.015 })
        .collect();
    let records = vec![
        injected_over_steps("fx-inj-b8", 8, 0.004, 0.5, 200, &[0.011; 4]),
        injected_over_steps("fx-inj-b56", 56, 0.005, 0.5, 200, &stalls_56),
    ];
    let small = run(
        &[
            "/m",
            "--max-num-seqs",
            "64",
            "--max-num-batched-tokens",
            "64",
        ],
        records,
    );
    // The decode table, the floor and the per-token cost come from a server with a full budget.
    let large = run(
        &["/m", "--max-num-batched-tokens", "8192"],
        with_floor_records(vec![
            burst("fx-d8", 8, 128, 0.004, 0.0),
            burst("fx-d56", 56, 128, 0.005, 0.0),
        ]),
    );
    let p = derive(&[small, large], &["p".into(), "q".into()]).unwrap();
    let m = &p.modes[0];
    assert_eq!(m.mode, FULL_AND_PIECEWISE);
    let per_decode = 0.004e9 / 48.0;
    assert!(
        (m.piecewise_decode_ns - per_decode).abs() < 1.0,
        "{}",
        m.piecewise_decode_ns
    );
    let engine = EngineModel::new(p);
    let graph = GraphMode::FullAndPiecewise {
        capture_sizes: vec![8, 64],
        piecewise_sizes: vec![8, 64],
    };
    for (decodes, period) in [(8, 11_000_000i64), (56, 15_000_000)] {
        let step = engine
            .period_ns(&graph, &shape(false, decodes, 64 - decodes, 64))
            .unwrap();
        assert!((step as i64 - period).abs() < 1_000, "{decodes}: {step}");
    }
}

#[test]
fn a_step_issued_op_by_op_holds_the_host_and_a_replayed_graph_does_not() {
    let mut p = profile();
    p.modes[1].nonuniform_period_ns = vec![(64, 60_000_000), (2048, 80_000_000)];
    let engine = EngineModel::new(p);
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 64, 256],
    };
    let decode = engine.step_cost(&graph, &shape(true, 64, 0, 64)).unwrap();
    assert_eq!((decode.period_ns, decode.host_ns), (4_000_000, 0));
    let mixed = engine
        .step_cost(&graph, &shape(false, 8, 256, 264))
        .unwrap();
    assert!(mixed.period_ns > 60_000_000, "{mixed:?}");
    assert_eq!(
        mixed.host_ns, mixed.period_ns,
        "the compiled model without graphs"
    );
    let eager = engine
        .step_cost(&GraphMode::Eager, &shape(false, 8, 0, 8))
        .unwrap();
    assert_eq!(eager.host_ns, eager.period_ns, "an eager decode step");
    // A prefill its kernels bound: 16,384 tokens at 11 µs outlast the 110 ms host floor.
    let prefill = engine
        .step_cost(&GraphMode::Eager, &shape(false, 0, 16_384, 16_384))
        .unwrap();
    assert_eq!(prefill.period_ns, 180_224_000);
    assert_eq!(prefill.host_ns, 110_000_000);
}

#[test]
fn requests_injected_close_together_price_no_step() {
    // Two requests 20 ms apart share their stalls (the first one's token waits for the second one's
    // step): neither is a mixed step alone. The lone one 0.5 s later is.
    let inject = injected(
        "fx-cascade-b8",
        8,
        0.004,
        &[(0.5, 256, 0.060), (0.52, 256, 0.060), (1.2, 300, 0.070)],
    );
    let records = with_floor_records(vec![burst("fx-d8", 8, 128, 0.004, 0.0), inject]);
    let p = derive(&[run(&DECODE_ONLY_8192, records)], &["g".into()]).unwrap();
    let table = &p.modes[0].nonuniform_period_ns;
    assert!(table.iter().all(|&(t, _)| t != 264), "{table:?}");
    assert!(table.contains(&(308, 70_000_000)), "{table:?}");
}

#[test]
fn a_weighted_median_passes_half_the_weight() {
    assert_eq!(weighted_median(vec![]), None);
    // Equal weights: the plain median, odd and even.
    assert_eq!(
        weighted_median(vec![(3.0, 1.0), (1.0, 1.0), (2.0, 1.0)]),
        Some(2.0)
    );
    assert_eq!(
        weighted_median(vec![(4.0, 1.0), (1.0, 1.0), (2.0, 1.0), (3.0, 1.0)]),
        Some(2.5)
    );
    assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
    // One heavy value outweighs many light ones; zero, negative and non-finite weights count nothing.
    let light = (0..5).map(|k| (-1.0 - f64::from(k), 1.0));
    let pairs: Vec<(f64, f64)> = light
        .chain([(0.2, 100.0), (9.0, 0.0), (7.0, f64::NAN)])
        .collect();
    assert_eq!(weighted_median(pairs), Some(0.2));
}

/// A uniform decode batch past the server's largest capture size (512 on a server of vLLM's
/// default 1,024 sequences) runs the compiled model without graphs: its measured period prices
/// what each request adds over the non-uniform table, and it stays out of the decode table.
#[test]
fn a_decode_batch_past_the_capture_size_prices_the_graphless_term() {
    let words: Vec<String> = [
        "/m",
        "--max-num-batched-tokens",
        "4096",
        "--compilation-config",
        r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#,
    ]
    .iter()
    .map(|w| w.to_string())
    .collect();
    let mut records = vec![
        burst("fx-d1", 1, 16, 0.003, 0.0),
        chunked("fx-p4096", 4096, 4096, 0.020 + 0.075),
        chunked("fx-p16384", 16384, 4096, 0.020 + 4.0 * 0.075),
        burst("fx-d64-c2048", 64, 2048, 0.004, 0.1),
    ];
    let mut base = run(&[], records.clone());
    base.serve_args = words.clone();
    let before = derive(&[base], &["b".into()]).unwrap();
    assert_eq!(before.modes[0].graphless_decode_ns, 0.0);
    // 768 requests answered whole: 128 more tokens took 12.8 s more, 100 ms a step.
    records.push(whole("fx-u768-o64", 768, 128, 64, 8.0));
    records.push(whole("fx-u768-o192", 768, 128, 192, 20.8));
    let mut with = run(&[], records);
    with.serve_args = words;
    let p = derive(&[with], &["w".into()]).unwrap();
    let m = &p.modes[0];
    assert!(
        m.decode_period_ns.iter().all(|&(b, _)| b <= 512),
        "{:?}",
        m.decode_period_ns
    );
    let table_ns = interpolate(&m.nonuniform_period_ns, 768) as f64;
    let expected = (100e6 - table_ns) / 768.0;
    assert!(
        (m.graphless_decode_ns - expected).abs() < 1.0,
        "{} against {expected}",
        m.graphless_decode_ns
    );
    assert!(m.evidence.contains_key("graphless_decode_b768_unstreamed"));
}

#[test]
fn a_graphless_decode_step_pays_the_table_and_its_requests() {
    let mut p = profile();
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 64, 256],
    };
    let fdo = p
        .modes
        .iter_mut()
        .find(|m| m.mode == FULL_DECODE_ONLY)
        .unwrap();
    fdo.nonuniform_period_ns = vec![(64, 60_000_000), (1024, 80_000_000)];
    fdo.mixed_decode_ns = 60_000.0;
    let mixed = EngineModel::new(p.clone());
    // Without the term a batch of 544 decodes past the capture size is priced as a mixed step.
    assert_eq!(
        mixed.period_ns(&graph, &shape(false, 544, 0, 544)),
        Some(70_000_000 + 32_640_000)
    );
    let fdo = p
        .modes
        .iter_mut()
        .find(|m| m.mode == FULL_DECODE_ONLY)
        .unwrap();
    fdo.graphless_decode_ns = 30_000.0;
    let engine = EngineModel::new(p);
    assert_eq!(
        engine.period_ns(&graph, &shape(false, 544, 0, 544)),
        Some(70_000_000 + 16_320_000)
    );
    // A mixed step keeps the mixed term, a replayed batch its graph's period.
    assert_eq!(
        engine.period_ns(&graph, &shape(false, 8, 1016, 1024)),
        Some(80_000_000 + 480_000)
    );
    assert_eq!(
        engine.period_ns(&graph, &shape(true, 64, 0, 64)),
        Some(4_000_000)
    );
    // vLLM's compiled model without graphs (cudagraph_mode NONE) runs every step as
    // FULL_DECODE_ONLY runs a batch it has no graph for: a decode batch of 8 is the table at its
    // tokens and its requests' term, not an eager decode step.
    assert_eq!(
        engine.period_ns(&GraphMode::Compiled, &shape(false, 8, 0, 8)),
        Some(60_000_000 + 240_000)
    );
    assert_eq!(
        engine.period_ns(&GraphMode::Compiled, &shape(false, 8, 1016, 1024)),
        Some(80_000_000 + 480_000)
    );
}

/// A bench run's requests wait, after their first token, through the prefill steps after the one
/// that prefilled them: that time is the engine's, not the front end's, in their time per token.
#[test]
fn a_requests_later_prefill_steps_are_taken_out_of_its_time_per_token() {
    let mut r = burst("cal-bench", 4, 4096, 0.0, 0.0);
    r.steps = vec![
        step(2, 8192, 0),
        step(2, 8192, 2),
        step(0, 0, 4),
        step(0, 0, 4),
    ];
    let flat = [(1024, 100_000_000)];
    // The first two requests wait through one more 100 ms step, the last two through none.
    assert!((prefill_after_first_token_s(&r, &flat) - 0.05).abs() < 1e-12);
    assert_eq!(prefill_after_first_token_s(&r, &[]), 0.0);
    r.steps.clear();
    assert_eq!(prefill_after_first_token_s(&r, &flat), 0.0);
}

/// A table entry comes from steps measured beside decodes where the group has any; steps that
/// prefilled beside no decode (read through the pure-prefill ratio) price only sizes nothing else
/// measured.
#[test]
fn a_table_group_prefers_steps_measured_beside_decodes() {
    let point = |tokens: f64, ms: f64, name: &str, converted: bool| {
        (tokens, ms / 1e3, name.to_owned(), converted)
    };
    let mut evidence = BTreeMap::new();
    let table = grouped_table(
        vec![
            point(64.0, 60.0, "a:mixed", false),
            point(64.0, 62.0, "b:mixed", false),
            point(64.0, 90.0, "c:lone", true),
            point(64.0, 95.0, "d:lone", true),
            point(64.0, 99.0, "e:lone", true),
            point(2048.0, 80.0, "f:lone", true),
            point(2048.0, 84.0, "g:lone", true),
        ],
        "t",
        &mut evidence,
    );
    assert_eq!(table, [(64, 61_000_000), (2048, 82_000_000)]);
    assert_eq!(evidence["t64"], "a:mixed, b:mixed");
    assert_eq!(evidence["t2048"], "f:lone, g:lone");
}

/// Every server counts once in a table entry, however many steps it measured: one server's five
/// slow injections do not outvote two other servers, and the groups are pooled by their servers.
#[test]
fn a_table_entry_counts_every_server_once() {
    let point = |tokens: f64, ms: f64, name: &str| (tokens, ms / 1e3, name.to_owned(), false);
    let mut evidence = BTreeMap::new();
    let mut points: Vec<TablePoint> = (0..5)
        .map(|k| point(64.0, 90.0 + f64::from(k), &format!("slow.json.gz:inj@{k}")))
        .collect();
    points.push(point(64.0, 60.0, "a.json.gz:inj"));
    points.push(point(64.0, 70.0, "b.json.gz:inj"));
    // Pooled, the median of the seven would be 90 ms; over servers it is the median of 60, 70 and
    // slow's own 92.
    assert_eq!(
        grouped_table(points.clone(), "t", &mut evidence),
        [(64, 70_000_000)]
    );
    // A larger size measured lower is pooled with it by servers (three against one), not steps.
    points.push(point(1024.0, 50.0, "c.json.gz:inj"));
    let table = grouped_table(points, "t", &mut evidence);
    assert_eq!(table, [(64, 65_000_000), (1024, 65_000_000)]);
    assert_eq!(
        median_over_servers([("x", 1.0), ("x", 3.0), ("y", 10.0)]),
        Some(6.0)
    );
    assert_eq!(median_over_servers(std::iter::empty()), None);
    assert_eq!(
        server_of("h200-a.json.gz:fx-inj-b8+64@0.5"),
        "h200-a.json.gz"
    );
    assert_eq!(server_of("runs/a:b/run.json:fx-d64"), "runs/a:b/run.json");
}

#[test]
fn the_decode_table_counts_every_server_once() {
    // One fast server measured the 16-request decode in three rounds, two slower ones once each:
    // by burst the fast server's 4 ms would win (median of 4, 4, 4, 6, 7); by server the median is
    // of 4, 6 and 7 ms.
    let fast = run(
        &DECODE_ONLY_8192,
        (0..3)
            .map(|k| burst(&format!("fx-d16-{k}"), 16, 128, 0.004, 0.0))
            .collect(),
    );
    let slow = |gap_s| {
        run(
            &DECODE_ONLY_8192,
            vec![burst("fx-d16", 16, 128, gap_s, 0.0)],
        )
    };
    let runs = [fast, slow(0.006), slow(0.007)];
    let names = ["fast.json", "slow-a.json", "slow-b.json"].map(String::from);
    let refs: Vec<(&str, &VllmRun)> = names.iter().map(String::as_str).zip(&runs).collect();
    let fixed = fixed_records(&refs);
    let mut evidence = BTreeMap::new();
    let (decode, _) = decode_bursts(&refs, &fixed, false);
    assert_eq!(decode[&16].len(), 5);
    let table = decode_table(&refs, decode, (false, false), &mut evidence);
    assert_eq!(table, [(16, 6_000_000)]);
    // The evidence names every burst the entry pools.
    assert_eq!(evidence["decode_b16"].matches(".json:fx-d16").count(), 5);
}

/// A run's mode and limits are read as vLLM reads its serve words, whatever the spelling: dotted
/// JSON keys, `-O<n>`, underscores, the capture-size flag or key; words vLLM would refuse say so.
#[test]
fn a_runs_mode_and_limits_follow_every_spelling_vllm_accepts() {
    let mode = |words: &[&str]| run_mode(&run(words, vec![]));
    assert_eq!(mode(&["/m"]), Ok(FULL_AND_PIECEWISE));
    assert_eq!(mode(&["/m", "-O3"]), Ok(FULL_AND_PIECEWISE));
    assert_eq!(mode(&["/m", "--enforce-eager"]), Ok(EAGER));
    for words in [
        &["/m", "-cc", r#"{"cudagraph_mode": "FULL_DECODE_ONLY"}"#][..],
        &["/m", "-cc.cudagraph_mode=FULL_DECODE_ONLY"][..],
        &[
            "/m",
            "--compilation_config.cudagraph_mode",
            "FULL_DECODE_ONLY",
        ][..],
    ] {
        assert_eq!(mode(words), Ok(FULL_DECODE_ONLY), "{words:?}");
    }
    let piecewise = mode(&["/m", "-O1"]).unwrap_err();
    assert!(piecewise.contains("PIECEWISE"), "{piecewise}");
    let none = mode(&["/m", "-O0"]).unwrap_err();
    assert!(none.contains("NONE"), "{none}");
    let bad = mode(&["/m", "--max-num-seqs", "zero"]).unwrap_err();
    assert!(
        bad.contains("do not parse") && bad.contains("--max-num-seqs"),
        "{bad}"
    );

    // FULL is the attention backend's to resolve: an MLA server runs FULL_AND_PIECEWISE under
    // vLLM's compiled model and FULL_DECODE_ONLY without it; a run that logged no MLA backend
    // cannot say which it ran.
    let with_backend = |words: &[&str], line: &str| {
        let mut r = run(words, vec![]);
        r.backends
            .insert("attention_backend".to_owned(), line.to_owned());
        run_mode(&r)
    };
    let flash_mla = "[cuda.py:482] Using FLASH_ATTN_MLA attention backend out of potential \
                     backends: ['FLASH_ATTN_MLA', 'FLASHMLA', 'TRITON_MLA'].";
    let full = ["/m", "-cc.cudagraph_mode=FULL"];
    assert_eq!(with_backend(&full, flash_mla), Ok(FULL_AND_PIECEWISE));
    // Without vLLM's compiled model FULL is FULL_DECODE_ONLY, whose steps without graphs then run
    // op by op: no term prices them.
    let uncompiled = with_backend(&["/m", "-cc.cudagraph_mode=FULL", "-cc.mode=0"], flash_mla);
    let uncompiled = uncompiled.unwrap_err();
    assert!(
        uncompiled.contains("FULL_DECODE_ONLY") && uncompiled.contains("compilation mode 0"),
        "{uncompiled}"
    );
    let unresolved = with_backend(&full, "[cuda.py:482] Using FLASH_ATTN attention backend.");
    let unresolved = unresolved.unwrap_err();
    assert!(
        unresolved.contains("FULL") && unresolved.contains("MLA"),
        "{unresolved}"
    );
    assert!(mode(&full).is_err());

    let limited = run(
        &[
            "/m",
            "--max_num_seqs=128",
            "--max-num-batched-tokens=4096",
            "-cc.max_cudagraph_capture_size=64",
        ],
        vec![],
    );
    assert_eq!(serve_limits(&limited), Some((128, 4096)));
    assert_eq!(max_capture(&limited, 128, 4096), 64);
    let defaults = run(&["/m"], vec![]);
    assert_eq!(serve_limits(&defaults), Some((1024, 8192)));
    assert_eq!(max_capture(&defaults, 1024, 8192), 512);
}

/// The H200 cost model of a plain one-GPU server.
pub(crate) fn h200_cost() -> crate::model::cost::CostModel {
    let layout = crate::model::cost::CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: false,
    };
    crate::model::profiles::default_cost_model(
        &crate::model::arch::ModelArch::deepseek_v2_lite(),
        crate::model::hardware::GpuKind::H200,
        layout,
    )
    .expect("the built-in H200 profile")
}

#[test]
fn a_server_that_loads_its_weights_replays_dearer_decode_steps_than_dummy_weights_measured() {
    let graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 64, 256],
    };
    let cost = h200_cost();
    let even = crate::model::workload::ExpertPopularity::Uniform;
    let mut measured = profile();
    measured.dummy_weights = true;
    let dummy = EngineModel::new(measured.clone()).serving(true, &cost, even);
    let trained = EngineModel::new(measured.clone()).serving(false, &cost, even);
    assert!(!dummy.prices_trained_weights() && trained.prices_trained_weights());
    let period = |e: &EngineModel, b: u32| e.period_ns(&graph, &shape(true, b, 0, b)).unwrap();
    // The dummy deployment is the table; the trained one reads one token's experts at batch 1 too.
    assert_eq!(period(&dummy, 64), 4_000_000);
    assert_eq!(period(&trained, 1), 3_000_000);
    // At 64 requests even routing reads all 64 experts of 26 layers where one token reads six.
    let more = period(&trained, 64) - period(&dummy, 64);
    assert!((3_000_000..7_000_000).contains(&more), "{more}");
    // Never below what the dummy model measured.
    assert!(period(&trained, 256) >= 12_000_000);
    // A skewed popularity (`--routing power-law:1.2`) activates fewer experts: dearer than the
    // dummy model, cheaper than even routing.
    let skewed = crate::model::workload::ExpertPopularity::PowerLaw { exponent: 1.2 };
    let skewed = EngineModel::new(measured.clone()).serving(false, &cost, skewed);
    let at_16 = |e: &EngineModel| period(e, 16);
    assert!(at_16(&dummy) < at_16(&skewed) && at_16(&skewed) < at_16(&trained));
    // Eager steps are the host's, and a step that prefills routes its prompt's spread tokens: as
    // measured.
    for (g, s) in [
        (GraphMode::Eager, shape(false, 64, 0, 64)),
        (graph.clone(), shape(false, 8, 256, 264)),
    ] {
        assert_eq!(trained.period_ns(&g, &s), dummy.period_ns(&g, &s));
    }
    // A profile of loaded weights prices loaded weights as measured.
    let loaded = EngineModel::new(profile()).serving(false, &cost, even);
    assert!(!loaded.prices_trained_weights());
    assert_eq!(period(&loaded, 64), 4_000_000);
}

#[test]
fn a_profile_says_whether_its_runs_served_dummy_weights_and_never_mixes_them() {
    let records = || least_bursts(64, 0.003, 0.004);
    let words = |dummy: &[&'static str]| {
        let mut w = vec![
            "/m",
            "--max-num-batched-tokens",
            "8192",
            "-cc.cudagraph_mode=FULL_DECODE_ONLY",
        ];
        w.extend_from_slice(dummy);
        w
    };
    let dummy = run(&words(&["--load_format", "dummy"]), records());
    let loaded = run(&words(&[]), records());
    assert!(
        derive(std::slice::from_ref(&dummy), &["d".into()])
            .unwrap()
            .dummy_weights
    );
    assert!(
        !derive(std::slice::from_ref(&loaded), &["l".into()])
            .unwrap()
            .dummy_weights
    );
    let err = derive(&[dummy, loaded], &["d".into(), "l".into()]).unwrap_err();
    assert!(
        matches!(err, EngineProfileError::Mixed { .. }) && err.to_string().contains("weights"),
        "{err}"
    );
}

/// cal31 (`traces/data/vllm/h100/`, vLLM's JIT monitor verbose): the history before its
/// `dec-r16-a` holds the warm-ups' 385- and 1,921-token steps, whose compiles it logged, and not
/// the 105-token step that compiled inside `dec-r16-a`; a server started with that history meets
/// 105 as new, 385 as compiled.
#[test]
fn a_records_history_is_what_its_server_log_ran_before_it() {
    use afd_traces::input::{InputKind, read_text};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/data/vllm/h100");
    let run = VllmRun::from_json(
        &read_text(
            &dir.join("h100-dsv2l-cal31-graph-256-2048.json.xz"),
            InputKind::VLLM_RUN,
        )
        .expect("the committed run reads"),
    )
    .expect("the committed run parses");
    let log = afd_traces::vllm_run::engine_steps(
        &read_text(
            &dir.join("h100-dsv2l-cal31-graph-256-2048.server.log.xz"),
            InputKind::SERVER_LOG,
        )
        .expect("the committed log reads"),
    );
    let index = run
        .records
        .iter()
        .position(|r| r.workload.name == "cal-bench-dec-r16-a")
        .expect("the run holds dec-r16-a");
    let history = kernel_history(&run, &log, index);
    assert!(history.contains(&385) && history.contains(&1921));
    assert!(!history.contains(&105));
    let (graph, seqs, budget) = run_graph(&run).expect("the run's mode");
    let mut cache = JitCache::at_start(&graph, seqs, budget, 64, 6);
    for &m in &history {
        cache.record(m);
    }
    assert!(cache.record(105));
    assert!(!cache.record(385));
    // Without the log, the run file's earlier records are the history: no warm-up in it.
    let from_records = kernel_history(&run, &[], index);
    assert!(!from_records.contains(&1921) && from_records.len() < history.len());
}
