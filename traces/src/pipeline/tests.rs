//! Round trips and error messages of the pipeline results format.

use std::collections::BTreeMap;

use super::*;

fn sample_results() -> PipelineResults {
    let mut results = PipelineResults::new(
        Provenance {
            tool: "afd-probe test".to_owned(),
            gpus: vec!["Test GPU".to_owned(), "Test GPU".to_owned()],
            env: BTreeMap::new(),
            ..Provenance::default()
        },
        PipelineModel {
            name: "tiny".to_owned(),
            hidden_size: 64,
            num_layers: 3,
            dense_layers: 1,
            n_routed_experts: 8,
            experts_per_token: 2,
            ..PipelineModel::default()
        },
        PipelineSetup {
            routing: "uniform".to_owned(),
            ..PipelineSetup::default()
        },
    );
    results.records.push(PipelineRecord {
        tokens: 4,
        context: 512,
        dbo: true,
        graph: false,
        ubatch_tokens: vec![2, 2],
        layers: 3,
        steps: 3,
        control_payload_bytes: 150,
        step_us: SampleStats {
            n: 3,
            min_us: 900.0,
            median_us: 1000.0,
            p99_us: 1100.0,
            max_us: 1100.0,
            mean_us: 1000.0,
        },
        samples_us: vec![900.0, 1000.0, 1100.0],
        attention_busy_us: None,
        ffn_busy_us: Some(400.0),
        routing: vec![LayerRouting {
            layer: 1,
            ubatch: 1,
            active_experts: 3,
            max_tokens_per_expert: 1,
        }],
    });
    results
}

#[track_caller]
fn check_error(results: &PipelineResults, expected: &str) {
    let err = PipelineResults::from_json(&results.to_json()).unwrap_err();
    assert_eq!(err.to_string(), expected);
}

#[test]
fn results_round_trip_through_json() {
    let results = sample_results();
    let text = results.to_json();
    assert_eq!(PipelineResults::from_json(&text).unwrap(), results);
    assert!(results.find(4, 512, true, false).is_some());
    assert!(results.find(4, 512, true, true).is_none());
}

#[test]
fn dbo_records_need_two_ubatches() {
    let mut results = sample_results();
    results.records[0].ubatch_tokens = vec![4];
    check_error(
        &results,
        "pipeline results field records[0].ubatch_tokens: has 1 entries, expected 2 (dbo = true)",
    );
}

#[test]
fn ubatches_must_sum_to_tokens() {
    let mut results = sample_results();
    results.records[0].ubatch_tokens = vec![1, 2];
    check_error(
        &results,
        "pipeline results field records[0].ubatch_tokens: [1, 2] must be non-empty ubatches summing to tokens 4",
    );
}

#[test]
fn sample_count_must_match_steps() {
    let mut results = sample_results();
    results.records[0].samples_us.pop();
    check_error(
        &results,
        "pipeline results field records[0].samples_us: has 2 samples but steps is 3",
    );
}

#[test]
fn routing_layers_must_exist() {
    let mut results = sample_results();
    results.records[0].routing[0].layer = 3;
    check_error(
        &results,
        "pipeline results field records[0].routing[0].layer: layer 3 is not below layers 3",
    );
}

#[test]
fn negative_busy_time_is_rejected() {
    let mut results = sample_results();
    results.records[0].ffn_busy_us = Some(-1.0);
    check_error(
        &results,
        "pipeline results field records[0].ffn_busy_us: -1 must be finite and >= 0",
    );
}

#[test]
fn unordered_stats_are_rejected() {
    let mut results = sample_results();
    results.records[0].step_us.median_us = 5000.0;
    check_error(
        &results,
        "pipeline results field records[0].step_us: expected min <= median <= p99 <= max, got 900 / 5000 / 1100 / 1100",
    );
}

#[test]
fn type_errors_carry_the_json_path() {
    let text = sample_results()
        .to_json()
        .replace("\"tokens\": 4", "\"tokens\": \"four\"");
    let message = PipelineResults::from_json(&text).unwrap_err().to_string();
    assert!(message.contains("records[0].tokens"), "{message}");
}

#[test]
fn other_formats_and_versions_are_refused() {
    let text = sample_results()
        .to_json()
        .replace("\"schema_version\": 1", "\"schema_version\": 7");
    assert_eq!(
        PipelineResults::from_json(&text).unwrap_err().to_string(),
        "pipeline results have schema_version 7, this build reads 1"
    );
    let text = sample_results()
        .to_json()
        .replace("afd-pipeline-results", "afd-calibration");
    assert_eq!(
        PipelineResults::from_json(&text).unwrap_err().to_string(),
        "pipeline results have format \"afd-calibration\", expected \"afd-pipeline-results\""
    );
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = PipelineResults::from_json(&text);
    }

    #[test]
    fn mangled_results_never_panic(cut in 0usize..2000, byte in proptest::num::u8::ANY) {
        let mut text = sample_results().to_json().into_bytes();
        let at = cut % text.len();
        text[at] = byte;
        let _ = PipelineResults::from_json(&String::from_utf8_lossy(&text));
    }
}

#[test]
fn committed_results_cover_the_fidelity_grid() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/pipeline/h200x2-deepseek-v2-lite.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let results =
        PipelineResults::from_json(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    assert!(results.records.len() >= 24);
    assert!(results.provenance.tool.contains("(git "));
    assert_eq!(results.model.name, "DeepSeek-V2-Lite");
    for dbo in [false, true] {
        for graph in [false, true] {
            assert!(
                results
                    .records
                    .iter()
                    .any(|r| r.dbo == dbo && r.graph == graph)
            );
        }
    }
    for record in &results.records {
        assert!(record.steps >= 50, "≥ 50 timed steps per configuration");
        assert_eq!(record.layers, results.model.num_layers);
        assert_eq!(
            record.routing.len() as u32,
            (results.model.num_layers - results.model.dense_layers)
                * record.ubatch_tokens.len() as u32
        );
    }
}
