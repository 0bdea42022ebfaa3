//! The `afd-probe` binary on a machine without a GPU (CI): every subcommand exits with code 2, says
//! why, and writes no output file. Set `GPU_PROBES=1` on a GPU host to skip these.

use std::path::Path;
use std::process::{Command, Output};

fn probe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_afd-probe"))
        .args(args)
        .env_remove("RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("LOCAL_RANK")
        .env_remove("MASTER_ADDR")
        .env_remove("MASTER_PORT")
        .output()
        .expect("the afd-probe binary runs")
}

fn gpu_available() -> bool {
    if std::env::var("GPU_PROBES").as_deref() == Ok("1") {
        eprintln!("skipped: GPU_PROBES=1 says this host has a GPU");
        return true;
    }
    false
}

#[test]
fn every_subcommand_exits_2_without_a_gpu() {
    if gpu_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("result.json");
    let out = out.to_str().unwrap();
    for args in [
        vec!["p2p", "--out", out],
        vec!["hbm", "--out", out],
        vec!["moe", "--out", out],
        vec!["attention", "--out", out],
        vec!["launch", "--out", out],
        vec!["calibrate", "--out", out],
        vec!["pipeline", "--out", out],
    ] {
        let output = probe(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("no CUDA driver found") || stderr.contains("GPU"),
            "{args:?} says why: {stderr}"
        );
        assert!(!Path::new(out).exists(), "{args:?} wrote no file");
    }
}

#[test]
fn bad_flags_exit_2_and_name_the_flag() {
    let output = probe(&["moe", "--tokens", "0:8"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--tokens"), "{stderr}");

    let output = probe(&["pipeline", "--out", "x.json", "--routing", "zipf"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("zipf"));

    let output = probe(&["p2p", "--gpus", "0"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("needs 2 GPU(s)"));
}

#[test]
fn a_model_without_mla_is_refused_by_the_attention_probe() {
    let output = probe(&["attention", "--model", "qwen3-30b-a3b"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("kv_lora_rank"));
}

#[test]
fn a_config_file_that_is_not_a_model_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"hidden_size": 2048}"#).unwrap();
    let path = config.to_str().unwrap();
    let output = probe(&["moe", "--model", path]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(path) && stderr.contains("neither a Hugging Face"),
        "{stderr}"
    );
}

#[test]
fn help_teaches_with_examples() {
    let output = probe(&["--help"]);
    assert_eq!(output.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for word in ["p2p", "calibrate", "pipeline", "Examples:", "exit"] {
        assert!(stdout.contains(word), "{word} in --help");
    }
}

#[test]
fn half_set_launcher_variables_are_an_error() {
    let output = Command::new(env!("CARGO_BIN_EXE_afd-probe"))
        .args(["p2p"])
        .env("RANK", "0")
        .env_remove("WORLD_SIZE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("launcher variables are incomplete"));
}
