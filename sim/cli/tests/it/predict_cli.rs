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
        "--cudagraph-capture-sizes expects positive integers",
    );
    fails_naming(&["predict", "--timeline-window", "1:2"], "--timeline");
    fails_naming(&["predict", "--calibration", profile], "profile.json");
    fails_naming(&["predict", "--trace", trace], "trace.csv:2");
    fails_naming(&["predict", "--model", model], "config.json");
    fails_naming(&["predict", "--num-prompts", "many"], "--num-prompts");
    let ramp = ["--ramp-up-strategy", "linear", "--ramp-up-start-rps", "1"];
    fails_naming(&[&["predict"][..], &ramp].concat(), "--ramp-up-end-rps");
    let rated = [
        &["predict", "--request-rate", "3", "--ramp-up-end-rps", "4"][..],
        &ramp,
    ]
    .concat();
    fails_naming(&rated, "--ramp-up-strategy");
    let falling = [&["predict", "--ramp-up-end-rps", "0.5"][..], &ramp].concat();
    fails_naming(&falling, "ramp-up from 1 to 0.5");
    let search = [
        &[
            "sweep",
            "--gpus",
            "2",
            "--ttft-slo",
            "500",
            "--capacity-by",
            "rate",
        ][..],
        &ramp,
        &["--ramp-up-end-rps", "4", "--out", "never.csv"],
    ]
    .concat();
    fails_naming(&search, "a capacity search sets the load itself");
}

#[test]
fn a_ramped_prediction_is_recorded_as_vllm_bench_serve_records_one() {
    let output = afd_sim(&[
        "predict",
        "--num-prompts",
        "16",
        "--input-len",
        "100",
        "--output-len",
        "4",
        "--ramp-up-strategy",
        "exponential",
        "--ramp-up-start-rps",
        "1",
        "--ramp-up-end-rps",
        "16",
        "--bench-seed",
        "9",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["request_rate"], "inf");
    assert_eq!(report["ramp_up_strategy"], "exponential");
    assert_eq!(
        (
            report["ramp_up_start_rps"].as_f64(),
            report["ramp_up_end_rps"].as_f64()
        ),
        (Some(1.0), Some(16.0))
    );
    // Gaps at 1 to 16 req/s, not rescaled: the 16 requests take several seconds, not one.
    assert!(report["duration"].as_f64().unwrap() > 2.0, "{report}");
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
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../traces/data/workloads");
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
    let recipes = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/recipes");
    // Each recipe under the rule set whose model runner it exports (afd-spec §1.6, §1.9).
    for (recipe, rules) in [
        ("2a2f_graph_dbo_dp1tp2.sh", "latest"),
        ("2a2f_graph_dbo_dp2tp1.sh", "latest"),
        ("2a2f_eager_dbo_dp1tp2.sh", "v0.26"),
        ("4a4f_graph_dbo_dp2tp2.sh", "v0.26"),
        ("plain_vllm_tp2.sh", "latest"),
    ] {
        let path = format!("{recipes}/{recipe}");
        let output = afd_sim(&[
            "predict",
            &path,
            "--rules",
            rules,
            "--num-prompts",
            "16",
            "--json",
        ]);
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
    let attention = "VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --enable-expert-parallel --additional-config '{\"afd\":{\"role\":\"attention\"}}'";
    let ffn = "VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --enable-expert-parallel --port 8001 --additional-config '{\"afd\":{\"role\":\"ffn\"}}'";
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

/// `predict` with deployment flags exits 2 naming the rule, with the same rule `check` names for
/// the same words; one failing command per override family.
#[test]
fn every_override_family_is_judged_by_the_rules() {
    let failing: &[(&[&str], &str)] = &[
        (
            &["--max-num-seqs", "128", "--max-num-batched-tokens", "64"],
            "error[vllm.batched-tokens-ge-seqs]",
        ),
        (
            &["--ffn-dp", "2", "--ffn-tp", "2"],
            "error[afd.attention-ge-ffn]",
        ),
        (&["--ffn-dp", "3"], "error[afd.attention-ge-ffn]"),
        (&["--attention-dp", "3"], "error[afd.sequence-parallel-moe]"),
        (
            &["--no-expert-parallel"],
            "error[mrv2.static-expert-parallel]",
        ),
        (
            &["--ubatch-size", "3", "--no-dbo"],
            "error[afd.ubatch-count]",
        ),
        (
            &["--gpu-memory-utilization", "1.5"],
            "error[vllm.gpu-memory-utilization]",
        ),
        (
            &["--max-cudagraph-capture-size", "32"],
            "error[vllm.capture-size-consistency]",
        ),
        (
            &["--gpu-memory-utilization", "0.05"],
            "error[memory.role-fits]",
        ),
        (
            &["--rules", "v0.26", "--attention-dp", "3", "--ffn-dp", "2"],
            "error[v026.divisible-ranks]",
        ),
    ];
    for (flags, rule) in failing {
        let mut args = vec!["predict"];
        args.extend_from_slice(flags);
        let output = afd_sim(&args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{flags:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(rule),
            "{flags:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).contains("panicked"));
    }
    // `--enable-dbo` with `--ubatch-size 3` is legal in vLLM 0.26 (two ubatches when DBO is on).
    let legal = afd_sim(&[
        "predict",
        "--ubatch-size",
        "3",
        "--num-prompts",
        "4",
        "--json",
    ]);
    assert!(legal.status.success(), "{}", stderr(&legal));
}

#[test]
fn dbo_runs_only_when_the_deployment_asks_for_it() {
    let report = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["predict", "--num-prompts", "8", "--json"];
        all.extend_from_slice(args);
        let output = afd_sim(&all);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let seed = report(&[]);
    assert_eq!(seed["deployment"]["dbo"], true);
    assert_eq!(seed["deployment"]["dbo_decode_token_threshold"], 2);
    let off = report(&["--no-dbo"]);
    assert_eq!(off["deployment"]["dbo"], false);
    assert_eq!(off["steps"]["dbo"], 0);
    // Thresholds alone do not turn DBO on, as in vLLM.
    let thresholds = report(&["--enable-dbo", "--dbo-decode-token-threshold", "4"]);
    assert_eq!(thresholds["deployment"]["dbo"], true);
    assert_eq!(thresholds["deployment"]["dbo_decode_token_threshold"], 4);
    let line = "VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --enable-expert-parallel --dbo-decode-token-threshold 4";
    let attention = format!("{line} --additional-config '{{\"afd\":{{\"role\":\"attention\"}}}}'");
    let ffn = format!("{line} --port 8001 --additional-config '{{\"afd\":{{\"role\":\"ffn\"}}}}'");
    let plain = report(&["--attention-args", &attention, "--ffn-args", &ffn]);
    assert_eq!(plain["deployment"]["dbo"], false);
    assert_eq!(
        plain["deployment"]["dbo_decode_token_threshold"],
        serde_json::Value::Null
    );
    let table = afd_sim(&["predict", "--num-prompts", "8"]);
    let text = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        text.lines()
            .any(|l| l.starts_with("DBO (decode / prefill threshold):")
                && l.trim_end().ends_with("on (2 / 12)")),
        "{text}"
    );
}

#[test]
fn a_plain_vllm_serve_command_is_simulated_as_the_colocated_deployment() {
    let line = "CUDA_VISIBLE_DEVICES=0,1 vllm serve /models/DeepSeek-V2-Lite --tensor-parallel-size 2 --enable-expert-parallel";
    let output = afd_sim(&[
        "predict",
        "--serve-args",
        line,
        "--num-prompts",
        "8",
        "--json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let deployment = &report["deployment"];
    assert_eq!(deployment["gpus"], 2);
    assert_eq!(deployment["cudagraph_mode"], "FULL_AND_PIECEWISE");
    // vLLM 0.26.0's defaults for `vllm serve` on an H200.
    assert_eq!(deployment["max_num_seqs"], 1024);
    assert_eq!(deployment["max_num_batched_tokens"], 8192);
    assert_eq!(deployment["block_size"], 16);
    assert_eq!(deployment["dbo"], false);
    assert_eq!(report["completed"], 8);
    // `check` judges it by vLLM's own rules: TP 2 on one GPU fails.
    let one_gpu = line.replace("0,1", "0");
    let check = afd_sim(&["check", "--serve-args", &one_gpu]);
    assert_eq!(check.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&check.stdout).contains("error[vllm.gpu-count]"));
    let predict = afd_sim(&["predict", "--serve-args", &one_gpu]);
    assert_eq!(predict.status.code(), Some(2));
    assert!(stderr(&predict).contains("error[vllm.gpu-count]"));
    // An FFN flag has no role to go to.
    let ffn = afd_sim(&["predict", "--serve-args", line, "--ffn-dp", "2"]);
    assert_eq!(ffn.status.code(), Some(2));
    assert!(
        stderr(&ffn).contains("--ffn-dp needs an AFD deployment"),
        "{}",
        stderr(&ffn)
    );
}

/// The Hugging Face `config.json` the real vLLM runs served, given as `--model`, predicts what the
/// built-in DeepSeek-V2-Lite does, byte for byte.
#[test]
fn the_shipped_hugging_face_config_of_deepseek_v2_lite_is_the_builtin_model() {
    let config = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../traces/data/models/deepseek-v2-lite/config.json"
    );
    let args = ["predict", "--num-prompts", "64", "--json"];
    let builtin = afd_sim(&args);
    let mut with_file = args.to_vec();
    with_file.extend(["--model", config]);
    let from_file = afd_sim(&with_file);
    assert!(builtin.status.success(), "{}", stderr(&builtin));
    assert!(from_file.status.success(), "{}", stderr(&from_file));
    let hash = |o: &Output| {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["event_log_hash"].clone()
    };
    assert!(!hash(&builtin).is_null());
    assert_eq!(hash(&builtin), hash(&from_file));
}
