//! Issue "Fidelity": the committed AFD pipeline measurements on 2 × H200, replayed from the
//! committed component calibration alone, must stay within the acceptance bars; and
//! `replay-pipeline` refuses bad input with exit code 2.

use std::path::PathBuf;
use std::process::{Command, Output};

use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel, merge_profiles};
use afd_sim::model::hardware::GpuKind;
use afd_sim::replay::replay;
use afd_traces::calibration::CalibrationProfile;
use afd_traces::pipeline::PipelineResults;

fn data(path: &str) -> PathBuf {
    PathBuf::from(crate::support::SIM_DIR)
        .join("../traces/data")
        .join(path)
}

const RESULTS: &str = "pipeline/h200x2-deepseek-v2-lite.json";
const PROFILES: [&str; 2] = [
    "calibration/h200x2-deepseek-v2-lite.json",
    "calibration/h200x2-handoff.json",
];

/// The committed profiles, merged as the CLI merges them.
fn committed_profile() -> CalibrationProfile {
    merge_profiles(PROFILES.iter().map(|path| {
        let text = std::fs::read_to_string(data(path)).expect("the committed profile is readable");
        CalibrationProfile::from_json(&text).expect("the committed profile is valid")
    }))
    .expect("two profiles merge into one")
}

#[test]
fn the_committed_h200_pipeline_is_predicted_within_the_bars() {
    let text = std::fs::read_to_string(data(RESULTS)).unwrap();
    let results = PipelineResults::from_json(&text).unwrap();
    let model = ModelArch::builtin(&results.model.name).unwrap().unwrap();
    let layout = CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: true,
    };
    let cost = CostModel::calibrated(
        &model,
        GpuKind::H200,
        layout,
        &committed_profile(),
        "committed",
    )
    .unwrap();
    let outcome = replay(&results, &model, &cost).unwrap();
    assert_eq!(outcome.steps.len(), 32);
    let table: Vec<String> = outcome
        .steps
        .iter()
        .map(|s| {
            format!(
                "T={} ctx={} dbo={} graph={}: {:.1} vs {:.1} µs ({:+.2} %)",
                s.tokens,
                s.context,
                s.dbo,
                s.graph,
                s.predicted_us,
                s.measured_us,
                100.0 * s.error
            )
        })
        .collect();
    let table = table.join("\n");
    assert!(
        outcome.median_abs_error <= 0.05,
        "median |error| {:.2} % > 5 %\n{table}",
        100.0 * outcome.median_abs_error
    );
    assert!(
        outcome.worst_abs_error <= 0.10,
        "worst |error| {:.2} % > 10 %\n{table}",
        100.0 * outcome.worst_abs_error
    );
    // 8 (tokens, context) pairs, each with DBO gains in both graph modes and graph gains with and
    // without DBO.
    assert_eq!(outcome.gains.len(), 32);
    for gain in &outcome.gains {
        assert!(
            gain.error_pp().abs() <= 3.0,
            "{:?} T={} ctx={}: predicted {:.3}, measured {:.3}",
            gain.kind,
            gain.tokens,
            gain.context,
            gain.predicted,
            gain.measured
        );
    }
}

fn afd_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_afd-sim"))
        .args(args)
        .current_dir(crate::support::SIM_DIR)
        .output()
        .expect("the binary runs")
}

#[test]
fn replay_pipeline_passes_its_check_on_the_committed_files_with_the_built_in_profile() {
    let results = data(RESULTS);
    let output = afd_sim(&[
        "replay-pipeline",
        results.to_str().unwrap(),
        "--check",
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["bars"]["passed"], true);
    assert_eq!(json["configurations"].as_array().unwrap().len(), 32);
    assert!(
        json["profile"]
            .as_str()
            .unwrap()
            .contains("h200x2-deepseek-v2-lite.json + h200x2-handoff.json")
    );
    // Every class the replay priced came from the profiles.
    for cost in json["costs"].as_array().unwrap() {
        assert_eq!(cost["source"], "calibration", "{cost}");
    }
    // The same with the files named, and the table form.
    let profiles: Vec<PathBuf> = PROFILES.iter().map(|p| data(p)).collect();
    let output = afd_sim(&[
        "replay-pipeline",
        results.to_str().unwrap(),
        "--calibration",
        profiles[0].to_str().unwrap(),
        "--calibration",
        profiles[1].to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0));
    assert!(text.contains("median |error|") && text.contains("DBO (graph=true)"));
}

#[test]
fn replay_pipeline_refuses_bad_input_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let fails = |args: &[&str], needle: &str| {
        let output = afd_sim(args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?}: {stderr:?} lacks {needle:?}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(
            output.stdout.is_empty(),
            "{args:?} printed a partial result"
        );
    };
    let missing = dir.path().join("nothing.json");
    fails(
        &["replay-pipeline", missing.to_str().unwrap()],
        "nothing.json",
    );
    let text = std::fs::read_to_string(data(RESULTS)).unwrap();
    let broken = dir.path().join("broken.json");
    std::fs::write(
        &broken,
        text.replacen("\"tokens\": 4", "\"tokens\": \"four\"", 1),
    )
    .unwrap();
    fails(
        &["replay-pipeline", broken.to_str().unwrap()],
        "broken.json",
    );
    let mut results = PipelineResults::from_json(&text).unwrap();
    results.model.name = "Mystery-MoE".to_owned();
    let unknown = dir.path().join("unknown.json");
    std::fs::write(&unknown, results.to_json()).unwrap();
    fails(
        &["replay-pipeline", unknown.to_str().unwrap()],
        "Mystery-MoE",
    );
    let mut results = PipelineResults::from_json(&text).unwrap();
    results.records[3].routing.remove(7);
    let holes = dir.path().join("holes.json");
    std::fs::write(&holes, results.to_json()).unwrap();
    fails(
        &["replay-pipeline", holes.to_str().unwrap()],
        "records[3].routing",
    );
    let good = data(RESULTS);
    fails(
        &[
            "replay-pipeline",
            good.to_str().unwrap(),
            "--calibration",
            missing.to_str().unwrap(),
        ],
        "nothing.json",
    );
    fails(
        &["replay-pipeline", good.to_str().unwrap(), "--gpu", "b200"],
        "--gpu",
    );
    fails(
        &[
            "replay-pipeline",
            good.to_str().unwrap(),
            "--model",
            "qwen3-30b-a3b",
        ],
        "model.num_layers",
    );
}
