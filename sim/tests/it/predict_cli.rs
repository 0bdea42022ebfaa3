//! The binary: defaults, outputs, and errors that name the bad input with exit code 2.

use std::process::{Command, Output};

fn afd_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_afd-sim"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[track_caller]
fn fails_naming(args: &[&str], needle: &str) {
    let output = afd_sim(args);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: {}",
        stderr(&output)
    );
    let message = stderr(&output);
    assert!(
        message.contains(needle),
        "{args:?}: {message:?} lacks {needle:?}"
    );
    assert!(!message.contains("panicked"), "{message}");
}

#[test]
fn bad_flags_and_files_exit_2_naming_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let bad_profile = dir.path().join("profile.json");
    std::fs::write(
        &bad_profile,
        "{\"format\": \"afd-calibration\", \"schema_version\": 1, \"tables\": 3}",
    )
    .unwrap();
    let bad_trace = dir.path().join("trace.csv");
    std::fs::write(
        &bad_trace,
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\nyesterday,10,2\r\n",
    )
    .unwrap();
    let bad_model = dir.path().join("config.json");
    std::fs::write(&bad_model, "{\"hidden_size\": 8}").unwrap();
    let profile = bad_profile.to_str().unwrap();
    let trace = bad_trace.to_str().unwrap();
    let model = bad_model.to_str().unwrap();
    fails_naming(&["predict", "--request-rate", "fast"], "--request-rate");
    fails_naming(&["predict", "--max-concurrency", "0"], "--max-concurrency");
    fails_naming(&["predict", "--gpu", "b200"], "--gpu");
    fails_naming(&["predict", "--model", "gpt-9"], "--model");
    fails_naming(&["predict", "--routing", "zipf"], "--routing");
    fails_naming(
        &["predict", "--ffn-dp", "2"],
        "num_attention_ranks >= num_ffn_ranks",
    );
    fails_naming(
        &["predict", "--cudagraph-capture-sizes", "0"],
        "cudagraph_capture_sizes",
    );
    fails_naming(&["predict", "--timeline-window", "1:2"], "--timeline");
    fails_naming(&["predict", "--calibration", profile], "profile.json");
    fails_naming(&["predict", "--trace", trace], "trace.csv:2");
    fails_naming(&["predict", "--model", model], "config.json");
    fails_naming(&["predict", "--num-prompts", "many"], "--num-prompts");
}

#[test]
fn predict_writes_json_csvs_and_a_perfetto_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let timeline = dir.path().join("timeline.json");
    let requests = dir.path().join("requests.csv");
    let steps = dir.path().join("steps.csv");
    let output = afd_sim(&[
        "predict",
        "--num-prompts",
        "8",
        "--input-len",
        "100",
        "--output-len",
        "4",
        "--request-rate",
        "inf",
        "--json",
        "--timeline",
        timeline.to_str().unwrap(),
        "--timeline-window",
        "0:0.05",
        "--requests-csv",
        requests.to_str().unwrap(),
        "--steps-csv",
        steps.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["completed"], 8);
    assert_eq!(report["total_output_tokens"], 32);
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&timeline).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["ph"] == "X" && e["pid"] == 2),
        "FFN spans are recorded"
    );
    assert!(
        events.iter().any(|e| e["args"]["name"] == "A0→F0"),
        "links have tracks"
    );
    assert_eq!(
        std::fs::read_to_string(&requests).unwrap().lines().count(),
        9
    );
    assert!(
        std::fs::read_to_string(&steps)
            .unwrap()
            .starts_with("step,start_ms,duration_us,mode")
    );
}

#[test]
fn every_shipped_trace_replays() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../traces/data/workloads");
    for trace in [
        "azure-llm-inference-2023/AzureLLMInferenceTrace_code.csv",
        "azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv",
        "mooncake-fast25/conversation_trace.jsonl",
        "mooncake-fast25/synthetic_trace.jsonl",
        "sarathi-serve-sharegpt/sharegpt_8k_filtered_stats_llama2_tokenizer.csv",
        "vidur-arxiv-summarization/arxiv_summarization_stats_llama2_tokenizer_filtered_v2.csv",
    ] {
        let path = format!("{root}/{trace}");
        let output = afd_sim(&["predict", "--trace", &path, "--num-prompts", "20", "--json"]);
        assert!(output.status.success(), "{trace}: {}", stderr(&output));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(
            report["completed"].as_u64().unwrap() + report["failed"].as_u64().unwrap(),
            20,
            "{trace}"
        );
    }
}

#[test]
fn recipes_and_command_lines_drive_predict_and_broken_ones_exit_2() {
    let recipes = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/recipes");
    for recipe in [
        "2a2f_graph_dbo_dp1tp2.sh",
        "2a2f_graph_dbo_dp2tp1.sh",
        "2a2f_eager_dbo_dp1tp2.sh",
        "4a4f_graph_dbo_dp2tp2.sh",
    ] {
        let path = format!("{recipes}/{recipe}");
        let output = afd_sim(&["predict", &path, "--num-prompts", "16", "--json"]);
        assert!(output.status.success(), "{recipe}: {}", stderr(&output));
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["completed"], 16, "{recipe}");
    }
    let seed = afd_sim(&[
        "predict",
        &format!("{recipes}/2a2f_graph_dbo_dp1tp2.sh"),
        "--num-prompts",
        "16",
        "--json",
    ]);
    let default = afd_sim(&["predict", "--num-prompts", "16", "--json"]);
    // Byte for byte but for the wall-clock `date` of vLLM's --save-result.
    let undated = |stdout: &[u8]| {
        let mut report: serde_json::Value = serde_json::from_slice(stdout).unwrap();
        report
            .as_object_mut()
            .expect("an object")
            .remove("date")
            .expect("predict --json has a date");
        report
    };
    assert_eq!(
        undated(&seed.stdout),
        undated(&default.stdout),
        "the seed recipe script is the default deployment"
    );
    let broken = afd_sim(&[
        "predict",
        &format!("{recipes}/broken/afd.async-connector.sh"),
    ]);
    assert_eq!(broken.status.code(), Some(2));
    assert!(
        stderr(&broken).contains("error[afd.async-connector]"),
        "{}",
        stderr(&broken)
    );
    let attention =
        "vllm serve /m --enforce-eager --additional-config '{\"afd\":{\"role\":\"attention\"}}'";
    let ffn = "vllm serve /m --enforce-eager --port 8001 --additional-config '{\"afd\":{\"role\":\"ffn\"}}'";
    let lines = afd_sim(&[
        "predict",
        "--attention-args",
        attention,
        "--ffn-args",
        ffn,
        "--num-prompts",
        "8",
        "--json",
    ]);
    assert!(lines.status.success(), "{}", stderr(&lines));
    let report: serde_json::Value = serde_json::from_slice(&lines.stdout).unwrap();
    assert_eq!(report["deployment"]["cudagraph_mode"], "eager");
    assert_eq!(report["deployment"]["gpus"], 2);
}
