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

use proptest::prelude::*;

const OPS: [&str; 12] = [
    "p2p.one_way",
    "p2p.fan_in",
    "nccl.all_reduce",
    "moe.router",
    "moe.routed_experts",
    "moe.shared_experts",
    "attention.proj",
    "attention.mla_decode",
    "attention.prefill",
    "launch.eager",
    "launch.graph",
    "host.step",
];

fn arbitrary_table() -> impl Strategy<Value = CostTable> {
    (
        0..OPS.len(),
        proptest::collection::vec("[a-z_]{1,16}", 1..3),
        proptest::collection::vec(
            (proptest::collection::vec(0.0f64..1e7, 1..3), 0.0f64..1e5),
            1..6,
        ),
        any::<bool>(),
    )
        .prop_map(|(op, axes, points, variant)| CostTable {
            op: OPS[op].to_owned(),
            variant: if variant {
                BTreeMap::from([
                    ("senders".to_owned(), "2".to_owned()),
                    ("ranks".to_owned(), "2".to_owned()),
                ])
            } else {
                BTreeMap::new()
            },
            axes,
            points: points.into_iter().map(|(at, us)| point(at, us)).collect(),
        })
}

proptest! {
    #[test]
    fn any_profile_is_accepted_or_refused_without_panicking(
        tables in proptest::collection::vec(arbitrary_table(), 0..6),
        rows in 1u32..5000,
    ) {
        let mut profile = CalibrationProfile::new(Provenance::default());
        profile.tables = tables;
        let model = ModelArch::deepseek_v2_lite();
        let layout = CostLayout { attention_tp: 2, ffn_dp: 1, ffn_tp: 2, expert_parallel: true };
        match CostModel::calibrated(&model, GpuKind::H200, layout, &profile, "random") {
            Err(err) => prop_assert!(err.to_string().starts_with("calibration table ")),
            Ok(cost) => {
                // Every query of a profile that loaded answers without panicking.
                let _ = cost.transfer_rows(rows, false);
                let _ = cost.fan_in_occupancy(rows, 2, true);
                let _ = cost.all_reduce_rows(rows, 2);
                let _ = cost.router(rows);
                let _ = cost.routed_experts(rows % 64 + 1, rows);
                let _ = cost.attention_decode(rows, u64::from(rows) * 100);
                let _ = cost.attention_prefill(rows, rows);
                let _ = cost.eager_host(OpClass::AttentionProj, 12);
                let _ = cost.graph_kernel_gap();
                let _ = cost.step_host(rows);
            }
        }
    }
}
