//! Roofline arithmetic and calibrated lookups, with the source of each class recorded.

use std::collections::BTreeMap;

use afd_traces::calibration::{CostPoint, CostTable, Provenance, SampleStats};

use super::*;

fn layout() -> CostLayout {
    CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: true,
    }
}

fn point(at: Vec<f64>, us: f64) -> CostPoint {
    CostPoint {
        at,
        stats: SampleStats {
            n: 1,
            min_us: us,
            median_us: us,
            p99_us: us,
            max_us: us,
            mean_us: us,
        },
        samples_us: vec![us],
        derived: BTreeMap::new(),
    }
}

fn table(op: &str, variant: &[(&str, &str)], axes: &[&str], points: Vec<CostPoint>) -> CostTable {
    CostTable {
        op: op.to_owned(),
        variant: variant
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        axes: axes.iter().map(|a| (*a).to_owned()).collect(),
        points,
    }
}

/// A small synthetic profile: p2p 10 µs + 1 µs/KiB, router 5 µs flat, shared experts 20 µs at 64.
pub(crate) fn synthetic_profile() -> CalibrationProfile {
    let mut profile = CalibrationProfile::new(Provenance::default());
    profile.tables.push(table(
        "p2p.one_way",
        &[("graph", "false")],
        &["bytes"],
        vec![point(vec![8.0], 10.0), point(vec![1024.0 * 1024.0], 1034.0)],
    ));
    profile.tables.push(table(
        "moe.router",
        &[("model", "deepseek-ai/DeepSeek-V2-Lite")],
        &["tokens"],
        vec![point(vec![1.0], 5.0), point(vec![4096.0], 5.0)],
    ));
    profile.tables.push(table(
        "moe.shared_experts",
        &[("model", "Qwen3-30B-A3B")],
        &["tokens"],
        vec![point(vec![64.0], 20.0)],
    ));
    profile
}

#[test]
fn roofline_of_a_bandwidth_bound_expert_read_matches_the_anchor() {
    let model = ModelArch::deepseek_v2_lite();
    let cost = CostModel::roofline(&model, GpuKind::H200, layout());
    // 64 experts x 17.3 MB read once at 0.8 x 4.8 TB/s ≈ 288 µs, plus activations (sim-anchors §4:
    // ~238 µs at 100 % bandwidth for routed + shared).
    let t = cost.routed_experts(64, 6).as_us_f64();
    assert!((285.0..300.0).contains(&t), "{t}");
    assert_eq!(cost.source_of(OpClass::MoeRoutedExperts), "roofline");
    assert_eq!(cost.source_of(OpClass::P2p), "unused");
}

#[test]
fn calibrated_tables_price_their_classes_and_others_fall_back() {
    let model = ModelArch::deepseek_v2_lite();
    let cost = CostModel::calibrated(
        &model,
        GpuKind::H200,
        layout(),
        &synthetic_profile(),
        "test.json",
    )
    .unwrap();
    assert_eq!(cost.router(64).as_us_f64(), 5.0);
    // The shared-experts table is for another model: roofline.
    let _ = cost.shared_experts(64);
    assert_eq!(cost.source_of(OpClass::MoeRouter), "calibration");
    assert_eq!(cost.source_of(OpClass::MoeSharedExperts), "roofline");
    // 8 bytes is the first point: all latency, no occupancy.
    let small = cost.transfer_bytes(8, false);
    assert_eq!(
        (small.latency.as_us_f64(), small.occupancy.as_us_f64()),
        (10.0, 0.0)
    );
    let big = cost.transfer_bytes(1 << 20, false);
    assert_eq!(big.total().as_us_f64(), 1034.0);
    // Outside the measured range: clamped and counted.
    let _ = cost.transfer_bytes(1 << 30, false);
    assert_eq!(cost.usage(OpClass::P2p).out_of_range, 1);
}

#[test]
fn tables_with_wrong_axes_are_rejected_with_their_index() {
    let mut profile = synthetic_profile();
    profile.tables.push(table(
        "attention.mla_decode",
        &[],
        &["batch"],
        vec![point(vec![1.0], 1.0)],
    ));
    let err = CostModel::calibrated(
        &ModelArch::deepseek_v2_lite(),
        GpuKind::H200,
        layout(),
        &profile,
        "x",
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "calibration table 3 (op \"attention.mla_decode\") has axes [\"batch\"], expected [\"batch\", \"context\"]"
    );
}

#[test]
fn memo_hits_count_as_queries_of_their_source() {
    let model = ModelArch::deepseek_v2_lite();
    let cost = CostModel::roofline(&model, GpuKind::H200, layout());
    let first = cost.transfer_rows(64, false);
    assert_eq!(cost.transfer_rows(64, false), first);
    assert_eq!(cost.usage(OpClass::P2p).roofline, 2);
    // 64 rows x 4 KiB at 0.4 x 450 GB/s ≈ 1.46 µs of occupancy plus 3 µs latency.
    assert!(
        (first.occupancy.as_us_f64() - 1.456).abs() < 0.01,
        "{first:?}"
    );
}
