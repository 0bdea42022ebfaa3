//! Replay by hand arithmetic on flat tables, the gains, and errors naming the field at fault.

use std::collections::BTreeMap;

use afd_traces::calibration::{CalibrationProfile, CostPoint, CostTable, Provenance, SampleStats};
use afd_traces::model_config::ModelConfig;
use afd_traces::pipeline::{LayerRouting, PipelineSetup};

use super::*;
use crate::model::cost::CostLayout;
use crate::model::hardware::GpuKind;

/// One MoE layer of DeepSeek-V2-Lite's shapes.
fn one_layer_model() -> ModelArch {
    let text = r#"{"vocab_size": 1024, "dim": 2048, "inter_dim": 10944, "moe_inter_dim": 1408,
        "n_layers": 1, "n_dense_layers": 0, "n_heads": 16, "n_routed_experts": 64,
        "n_shared_experts": 2, "n_activated_experts": 6, "route_scale": 1.0, "q_lora_rank": 0,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128}"#;
    ModelArch::from_config("one-layer", ModelConfig::from_json(text).unwrap())
}

fn results_model() -> PipelineModel {
    PipelineModel {
        name: "one-layer".to_owned(),
        hidden_size: 2048,
        num_layers: 1,
        dense_layers: 0,
        n_routed_experts: 64,
        experts_per_token: 6,
        moe_intermediate_size: 1408,
        dense_intermediate_size: 10944,
        shared_intermediate_size: 2816,
        num_heads: 16,
        kv_lora_rank: 512,
        qk_nope_head_dim: 128,
        qk_rope_head_dim: 64,
        v_head_dim: 128,
    }
}

fn stats(us: f64) -> SampleStats {
    SampleStats {
        n: 1,
        min_us: us,
        median_us: us,
        p99_us: us,
        max_us: us,
        mean_us: us,
    }
}

fn record(tokens: u32, dbo: bool, graph: bool, measured_us: f64) -> PipelineRecord {
    let ubatch_tokens = if dbo {
        vec![tokens / 2, tokens - tokens / 2]
    } else {
        vec![tokens]
    };
    PipelineRecord {
        tokens,
        context: 100,
        dbo,
        graph,
        routing: (0..ubatch_tokens.len() as u32)
            .map(|ubatch| LayerRouting {
                layer: 0,
                ubatch,
                active_experts: 6,
                max_tokens_per_expert: 1,
            })
            .collect(),
        ubatch_tokens,
        layers: 1,
        steps: 1,
        control_payload_bytes: 112,
        step_us: stats(measured_us),
        samples_us: vec![measured_us],
        attention_busy_us: None,
        ffn_busy_us: None,
    }
}

fn results(records: Vec<PipelineRecord>) -> PipelineResults {
    let mut results = PipelineResults::new(
        Provenance::default(),
        results_model(),
        PipelineSetup::default(),
    );
    results.records = records;
    results
}

/// Flat tables: each operation costs the same at any size; launches and host issue are free.
fn flat(op: &str, axes: &[&str], us: f64) -> CostTable {
    let point = |at: Vec<f64>| CostPoint {
        at,
        stats: stats(us),
        samples_us: vec![us],
        derived: BTreeMap::new(),
    };
    let points = match axes.len() {
        1 => vec![point(vec![1.0]), point(vec![1e9])],
        _ => vec![
            point(vec![1.0, 1.0]),
            point(vec![1.0, 1e6]),
            point(vec![1e6, 1.0]),
            point(vec![1e6, 1e6]),
        ],
    };
    CostTable {
        op: op.to_owned(),
        variant: BTreeMap::new(),
        axes: axes.iter().map(|a| (*a).to_owned()).collect(),
        points,
    }
}

/// p2p 10, projections 40, decode 30, router 5, dispatch 3, experts 60, shared 20 (µs).
fn flat_cost(model: &ModelArch) -> CostModel {
    let mut profile = CalibrationProfile::new(Provenance::default());
    profile.tables = vec![
        flat("p2p.one_way", &["bytes"], 10.0),
        flat("attention.proj", &["tokens"], 40.0),
        flat("attention.mla_decode", &["batch", "context"], 30.0),
        flat("moe.router", &["tokens"], 5.0),
        flat("moe.dispatch", &["tokens"], 3.0),
        flat(
            "moe.routed_experts",
            &["active_experts", "tokens_per_expert"],
            60.0,
        ),
        flat("moe.shared_experts", &["tokens"], 20.0),
        flat("launch.eager", &["kernels"], 0.0),
        flat("launch.graph", &["kernels"], 0.0),
    ];
    let layout = CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: true,
    };
    CostModel::calibrated(model, GpuKind::H200, layout, &profile, "flat").unwrap()
}

#[test]
fn a_one_layer_forward_is_the_sum_of_its_parts() {
    let model = one_layer_model();
    let cost = flat_cost(&model);
    let outcome = replay(&results(vec![record(4, false, true, 200.0)]), &model, &cost).unwrap();
    let step = &outcome.steps[0];
    // Two control sends, projections + decode, A→F, router + dispatch + experts + shared, F→A.
    assert_eq!(
        step.predicted_us,
        2.0 * 10.0 + 40.0 + 30.0 + 10.0 + (5.0 + 3.0 + 60.0 + 20.0) + 10.0
    );
    assert_eq!(step.error, (198.0 - 200.0) / 200.0);
    assert_eq!(
        (step.bound, step.bound_class),
        (Regime::Ffn, OpClass::MoeRoutedExperts)
    );
    assert_eq!(outcome.median_abs_error, 0.01);
}

#[test]
fn gains_are_ratios_of_the_paired_configurations() {
    let model = one_layer_model();
    let cost = flat_cost(&model);
    let records = vec![
        record(4, false, false, 300.0),
        record(4, false, true, 200.0),
        record(4, true, false, 250.0),
        record(4, true, true, 250.0),
    ];
    let outcome = replay(&results(records), &model, &cost).unwrap();
    let gain = |kind: GainKind| {
        outcome
            .gains
            .iter()
            .find(|g| g.kind == kind)
            .map(|g| g.measured)
            .unwrap()
    };
    assert_eq!(gain(GainKind::Dbo { graph: false }), 300.0 / 250.0);
    assert_eq!(gain(GainKind::Dbo { graph: true }), 200.0 / 250.0);
    assert_eq!(gain(GainKind::Graph { dbo: false }), 300.0 / 200.0);
    assert_eq!(gain(GainKind::Graph { dbo: true }), 1.0);
    assert_eq!(outcome.gains.len(), 4);
    let worst = outcome
        .gains
        .iter()
        .map(|g| g.error_pp().abs())
        .fold(0.0, f64::max);
    assert_eq!(outcome.worst_gain_pp, worst);
}

#[track_caller]
fn refused(results: &PipelineResults, model: &ModelArch, expect: &str) {
    let cost = flat_cost(model);
    assert_eq!(
        replay(results, model, &cost).unwrap_err().to_string(),
        expect
    );
}

#[test]
fn bad_results_are_refused_naming_the_field() {
    let model = one_layer_model();
    let mut bad = results(vec![record(4, false, true, 1.0)]);
    bad.model.kv_lora_rank = 256;
    refused(
        &bad,
        &model,
        "pipeline results field model.kv_lora_rank is 256, but model one-layer has 512",
    );
    refused(
        &results(Vec::new()),
        &model,
        "pipeline results have no records",
    );
    let mut missing = results(vec![record(4, true, true, 1.0)]);
    missing.records[0].routing.pop();
    refused(
        &missing,
        &model,
        "pipeline results field records[0].routing: has no entry for layer 0 ubatch 1",
    );
    let mut twice = results(vec![record(4, false, true, 1.0)]);
    let first = twice.records[0].routing[0].clone();
    twice.records[0].routing.push(first);
    refused(
        &twice,
        &model,
        "pipeline results field records[0].routing: layer 0 ubatch 0 appears twice (entry 1)",
    );
    let mut too_many = results(vec![record(4, false, true, 1.0)]);
    too_many.records[0].routing[0].max_tokens_per_expert = 5;
    refused(
        &too_many,
        &model,
        "pipeline results field records[0].routing: entry 0 (layer 0, ubatch 0) gives an expert 5 tokens of a 4-token ubatch",
    );
    let mut layers = results(vec![record(4, false, true, 1.0)]);
    layers.records[0].layers = 2;
    refused(
        &layers,
        &model,
        "pipeline results field records[0].layers: 2 layers, but the model has 1",
    );
}
