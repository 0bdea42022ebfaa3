//! Issue "Real vLLM as the ground truth": the committed real vLLM 0.26.0 runs on 1 × H200, replayed
//! with the built-in engine profile, and the engine profile derived again from the committed runs.
//!
//! The issue's bars (median |error| ≤ 10 %, worst ≤ 25 %, graph/eager TPOT ratio within 10 %) are
//! not met yet (docs/fidelity.md, "Real vLLM"); these tests hold the figures the model reaches now
//! so that a change cannot make them worse unnoticed, and check the command's refusals.

use std::path::PathBuf;
use std::process::Command;

fn data(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../traces/data")
        .join(path)
}

fn afd_sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_afd-sim"))
        .args(args)
        .output()
        .expect("afd-sim runs")
}

#[test]
fn the_committed_vllm_runs_are_predicted_no_worse_than_recorded() {
    let dir = data("vllm");
    let out = afd_sim(&["replay-vllm", dir.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = value["records"].as_array().unwrap();
    assert_eq!(
        records.len(),
        39,
        "every judged bench record of the committed runs"
    );
    let median = value["median_abs_error"].as_f64().unwrap();
    let worst = value["worst_abs_error"].as_f64().unwrap();
    // Recorded at this commit: median 16.6 %, worst 96.9 % (eager 64/64 e2e-dec-r4 mean TTFT, a
    // server near its prefill capacity, where a step's error is multiplied in the queue).
    assert!(median <= 0.17, "median |error| {median}");
    assert!(worst <= 0.97, "worst |error| {worst}");
    let ratios = value["graph_over_eager_tpot"].as_array().unwrap();
    assert_eq!(ratios.len(), 22);
    let within = ratios
        .iter()
        .filter(|r| r["error"].as_f64().unwrap().abs() <= 0.10)
        .count();
    // 4 of 16: the pooled eager decode period (77 ms) is right for eager runs, and the graph
    // runs' front-end-bound TPOTs are still predicted short, so their ratios fall low.
    assert!(
        within >= 4,
        "graph/eager TPOT ratios within 10 %: {within} of 16"
    );
}

#[test]
fn the_builtin_engine_profile_is_what_the_committed_runs_give() {
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("engine.json");
    let runs: Vec<String> = [
        "cal-eager-256-8192",
        "cal-graph-256-8192",
        "eager-256-2048",
        "eager-256-8192",
        "eager-64-64",
        "graph-256-2048",
        "graph-256-8192",
        "graph-64-64",
    ]
    .iter()
    .map(|l| {
        data(&format!("vllm/h200-dsv2l-{l}.json.gz"))
            .to_str()
            .unwrap()
            .to_owned()
    })
    .collect();
    let mut args: Vec<&str> = vec!["engine-profile"];
    args.extend(runs.iter().map(String::as_str));
    args.extend(["--out", out_path.to_str().unwrap()]);
    let out = afd_sim(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let derived = std::fs::read_to_string(&out_path).unwrap();
    let shipped = std::fs::read_to_string(data("engine/h200-dsv2l-vllm-engine.json")).unwrap();
    assert_eq!(
        derived, shipped,
        "run `afd-sim engine-profile traces/data/vllm/h200-dsv2l-*.json.gz --out traces/data/engine/h200-dsv2l-vllm-engine.json`"
    );
}

#[test]
fn compare_refuses_a_plain_result_without_its_server_and_bad_words() {
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    std::fs::write(&result, r#"{"completed": 4, "total_input_tokens": 400, "total_output_tokens": 40, "request_rate": "inf"}"#).unwrap();
    let path = result.to_str().unwrap();
    let out = afd_sim(&["compare", path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--serve-args"));
    let out = afd_sim(&[
        "compare",
        path,
        "--serve-args",
        "vllm serve --enforce-eager",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = afd_sim(&[
        "compare",
        path,
        "--serve-args",
        "vllm serve /m --max-num-seqs 256",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "vLLM's default piecewise graphs have no engine costs"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("FULL_AND_PIECEWISE"));
    let ok = afd_sim(&[
        "compare",
        path,
        "--serve-args",
        "vllm serve /m --enforce-eager --max-num-seqs 4",
        "--json",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let zero = afd_sim(&["replay-vllm", "/nonexistent-folder"]);
    assert_eq!(zero.status.code(), Some(2));
    let zero = afd_sim(&[
        "compare",
        "/dev/zero",
        "--serve-args",
        "vllm serve /m --enforce-eager",
    ]);
    assert_eq!(
        zero.status.code(),
        Some(2),
        "an endless file is refused, not read"
    );
    std::fs::write(&result, "[1, 2").unwrap();
    assert_eq!(
        afd_sim(&[
            "compare",
            path,
            "--serve-args",
            "vllm serve /m --enforce-eager"
        ])
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn predict_prices_a_plain_server_the_profile_measured_as_real_vllm_runs_it() {
    let tpot = |extra: &[&str]| {
        let mut args = vec![
            "predict",
            "--serve-args",
            "vllm serve deepseek-ai/DeepSeek-V2-Lite --enforce-eager --max-num-seqs 64",
            "--input-len",
            "128",
            "--output-len",
            "32",
            "--num-prompts",
            "16",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = afd_sim(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["mean_tpot_ms"].as_f64().unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The engine's eager decode step is host-bound at about 77 ms (the built-in profile); the
    // kernels alone are a few ms.
    let (engine, note) = tpot(&["--real-engine"]);
    assert!((60.0..100.0).contains(&engine), "{engine}");
    assert!(note.contains("priced as real vLLM 0.26.0"), "{note}");
    let (kernels, quiet) = tpot(&[]);
    assert!(kernels < 30.0, "{kernels}");
    assert!(!quiet.contains("priced as real vLLM"), "{quiet}");
    // A model the profile did not measure keeps the kernel model, and says so.
    let (_, other) = tpot(&["--real-engine", "--model", "qwen3-30b-a3b"]);
    assert!(other.contains("measured DeepSeek-V2-Lite"), "{other}");
    // An AFD pair's engine was never measured.
    let out = afd_sim(&["predict", "--real-engine"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--real-engine prices a plain"));
}
