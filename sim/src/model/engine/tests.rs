//! Tests of the engine model: step periods by shape and mode, and the profile derived from fixed-shape records.

use afd_traces::vllm_run::{FixedShapeResult, VllmProvenance, Workload, WorkloadKind};

use super::*;
use crate::step::AttentionWork;

fn profile() -> VllmEngineProfile {
    let mode = |name: &str, decode: Vec<(u32, u64)>, floor, token| EngineModeCosts {
        mode: name.into(),
        decode_period_ns: decode,
        nonuniform_floor_ns: floor,
        nonuniform_token_ns: token,
        evidence: BTreeMap::new(),
    };
    VllmEngineProfile {
        format: VLLM_ENGINE_FORMAT.into(),
        schema_version: VLLM_ENGINE_SCHEMA_VERSION,
        gpu: "NVIDIA H200".into(),
        model: "/m".into(),
        vllm_version: "0.26.0".into(),
        cpu_model: String::new(),
        cpu_cores: 16,
        sources: vec![],
        frontend_ns: 60_000_000,
        modes: vec![
            mode(
                EAGER,
                vec![(1, 50_000_000), (256, 56_000_000)],
                110_000_000,
                11_000.0,
            ),
            mode(
                FULL_DECODE_ONLY,
                vec![(1, 3_000_000), (64, 4_000_000), (256, 12_000_000)],
                70_000_000,
                11_000.0,
            ),
        ],
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
        engine.step_floor_ns(&graph, &shape(true, 64, 0, 64)),
        Some(4_000_000)
    );
    // 100 decodes pad to 256: the period of 256, not of 100.
    assert_eq!(
        engine.step_floor_ns(&graph, &shape(true, 100, 0, 256)),
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
        engine.step_floor_ns(&graph, &shape(false, 8, 64, 72)),
        Some(70_000_000)
    );
    assert_eq!(
        engine.step_floor_ns(&graph, &shape(false, 0, 8192, 8192)),
        Some(90_112_000)
    );
    assert_eq!(
        engine.step_floor_ns(&GraphMode::Eager, &shape(false, 8, 64, 72)),
        Some(110_000_000)
    );
}

#[test]
fn eager_decode_interpolates_between_measured_batches() {
    let engine = EngineModel::new(profile());
    let mid = engine
        .step_floor_ns(&GraphMode::Eager, &shape(false, 128, 0, 128))
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
        EngineModel::new(p).step_floor_ns(&graph, &shape(true, 8, 0, 64)),
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
        },
        failure: None,
        wall_s: 1.0,
        bench_result: None,
        fixed: Some(FixedShapeResult { requests }),
        steps: vec![],
        metrics_after: String::new(),
    }
}

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
fn derive_refuses_piecewise_graphs_and_runs_without_bursts() {
    let piecewise = run(&["/m"], vec![burst("fx-d1", 1, 128, 0.003, 0.0)]);
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
