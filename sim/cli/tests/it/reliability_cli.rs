//! Issue 18 through the binary: bounded inputs (an endless file is refused, exit 2), no partial output
//! file when a later output path is bad, inputs that would be silently ignored refused, and the CLI a
//! vLLM user expects (`--save-result` fields, failure reasons, `--version`, examples that name real paths;
//! help for every flag is a unit test of the command line).

use std::path::Path;

use crate::support::{SIM_DIR, afd_sim, json};

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[track_caller]
fn refused(args: &[&str], needle: &str) {
    let run = afd_sim(args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "{args:?}: {:?} lacks {needle:?}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    // The user's value is stated once, not repeated by each layer of context.
    assert_eq!(
        run.stderr.matches(needle).count(),
        1,
        "{args:?}: {:?} names {needle:?} more than once",
        run.stderr
    );
}

#[test]
fn endless_and_oversized_input_files_are_refused() {
    for args in [
        &["check", "/dev/zero"][..],
        &["predict", "--model", "/dev/zero"],
        &["predict", "--trace", "/dev/zero"],
        &["predict", "--calibration", "/dev/zero"],
        &["replay-pipeline", "/dev/zero"],
        &[
            "sweep-merge",
            "/dev/zero",
            "--out",
            "/tmp/never-written.csv",
        ],
    ] {
        refused(args, "/dev/zero:1: ");
        refused(args, "not text (a NUL byte at column 1)");
    }
    let dir = tempfile::tempdir().unwrap();
    let big = |name: &str, mib: usize| {
        let file = dir.path().join(name);
        std::fs::write(&file, "a".repeat((mib << 20) + 1)).unwrap();
        file
    };
    let recipe = big("r.sh", 1);
    refused(
        &["check", path(&recipe)],
        "r.sh exceeds the size limit of 1 MiB",
    );
    let model = big("config.json", 4);
    refused(
        &["predict", "--model", path(&model)],
        "config.json exceeds the size limit of 4 MiB",
    );
    let trace = big("t.csv", 1);
    refused(
        &["predict", "--trace", path(&trace), "--max-trace-mib", "1"],
        "t.csv exceeds the size limit of 1 MiB (raise it with --max-trace-mib)",
    );
}

#[test]
fn a_bad_second_output_path_leaves_no_first_file() {
    let dir = tempfile::tempdir().unwrap();
    let requests = dir.path().join("rq.csv");
    refused(
        &[
            "predict",
            "--num-prompts",
            "4",
            "--requests-csv",
            path(&requests),
            "--steps-csv",
            "/nonexistent/s.csv",
        ],
        "--steps-csv /nonexistent/s.csv: folder /nonexistent does not exist",
    );
    assert!(!requests.exists(), "predict left {}", requests.display());
    let out = dir.path().join("x.csv");
    refused(
        &[
            "sweep",
            "--gpus",
            "2",
            "--num-prompts",
            "4",
            "--out",
            path(&out),
            "--svg",
            "/nonexistent/x.svg",
        ],
        "--svg /nonexistent/x.svg: folder /nonexistent does not exist",
    );
    assert!(!out.exists(), "sweep left {}", out.display());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no temporary file either"
    );
}

#[test]
fn inputs_that_would_be_silently_ignored_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        &[
            "predict",
            "--calibration",
            "../traces/data/calibration/h200-moe-qwen3-30b-a3b.json",
        ],
        "prices nothing for model deepseek-v2-lite (its tables are for Qwen3-30B-A3B)",
    );
    let empty = dir.path().join("empty.json");
    let qwen = std::fs::read_to_string(
        Path::new(SIM_DIR).join("../traces/data/calibration/h200-moe-qwen3-30b-a3b.json"),
    )
    .unwrap();
    let mut profile: serde_json::Value = serde_json::from_str(&qwen).unwrap();
    profile["tables"] = serde_json::json!([]);
    std::fs::write(&empty, profile.to_string()).unwrap();
    refused(
        &["predict", "--calibration", path(&empty)],
        "(it has no tables)",
    );
    let out = dir.path().join("never.csv");
    refused(
        &[
            "sweep",
            "--gpus",
            "4",
            "--dimensions",
            "split=5:5",
            "--out",
            path(&out),
        ],
        "5:5 (10 GPUs) outside the budget of 4 GPUs",
    );
    refused(
        &[
            "sweep",
            "--gpus",
            "4",
            "--threads",
            "100000",
            "--out",
            path(&out),
        ],
        "--threads 100000: expected 1 to 256",
    );
    assert!(!out.exists());
}

#[test]
fn predict_json_is_a_drop_in_for_vllm_save_result() {
    let run = afd_sim(&[
        "predict",
        "--num-prompts",
        "16",
        "--input-len",
        "64",
        "--output-len",
        "8",
        "--json",
        "--metric-percentiles",
        "50,90,99.9",
        "--percentile-metrics",
        "ttft,e2el",
        "--goodput",
        "ttft:100000",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = json(&run);
    assert_eq!(report["num_prompts"], 16);
    assert_eq!(report["request_rate"], 5.0);
    assert_eq!(report["burstiness"], 1.0);
    assert_eq!(report["max_concurrency"], 32);
    assert_eq!(report["model_id"], "deepseek-v2-lite");
    let date = report["date"].as_str().expect("a date string");
    assert_eq!(date.len(), "20261201-210509".len(), "{date}");
    assert!(report["max_output_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(report["max_concurrent_requests"].as_u64().unwrap() >= 1);
    let goodput = report["request_goodput"].as_f64().unwrap();
    let throughput = report["request_throughput"].as_f64().unwrap();
    assert!(
        (goodput - throughput).abs() < 1e-9,
        "{goodput} vs {throughput}"
    );
    for key in ["p50_ttft_ms", "p90_ttft_ms", "p99.9_ttft_ms", "p50_e2el_ms"] {
        assert!(report[key].as_f64().is_some(), "{key} missing");
    }
    // The simulator's own fields are unchanged.
    assert_eq!(report["completed"], 16);
    assert!(report["event_log_hash"].is_string());
}

#[test]
fn failed_requests_say_why() {
    let run = afd_sim(&["predict", "--num-prompts", "4", "--max-model-len", "10"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stderr.contains("warning: 4 of 4 requests failed:"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("max_model_len"), "{}", run.stderr);
}

#[test]
fn the_version_names_the_commit() {
    let run = afd_sim(&["--version"]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.starts_with("afd-sim 0."), "{}", run.stdout);
    assert!(run.stdout.contains("(commit "), "{}", run.stdout);
}

/// Paths the help examples name as inputs exist in the repository.
#[test]
fn help_examples_name_real_paths() {
    for args in [
        &["--help"][..],
        &["predict", "--help"],
        &["check", "--help"],
        &["replay-pipeline", "--help"],
        &["sweep", "--help"],
    ] {
        let command = args.join(" ");
        let run = afd_sim(args);
        for word in run.stdout.split_whitespace() {
            let input = word.ends_with(".sh")
                || (word.starts_with("traces/")
                    && (word.ends_with(".json") || word.ends_with(".csv")));
            if input {
                assert!(
                    Path::new(SIM_DIR).join("..").join(word).exists(),
                    "afd-sim {command} --help names {word}, which does not exist"
                );
            }
        }
    }
}
