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
    let mut book = PriceBook::new();
    // 64 experts x 17.3 MB read once at 0.8 x 4.8 TB/s ≈ 288 µs, plus activations (sim-anchors §4:
    // ~238 µs at 100 % bandwidth for routed + shared).
    let t = cost.routed_experts(&mut book, 64, 6).as_us_f64();
    assert!((285.0..300.0).contains(&t), "{t}");
    assert_eq!(
        book.usage().source_of(OpClass::MoeRoutedExperts),
        "roofline"
    );
    assert_eq!(book.usage().source_of(OpClass::P2p), "unused");
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
    let mut book = PriceBook::new();
    assert_eq!(cost.router(&mut book, 64).as_us_f64(), 5.0);
    // The shared-experts table is for another model: roofline.
    let _ = cost.shared_experts(&mut book, 64);
    assert_eq!(book.usage().source_of(OpClass::MoeRouter), "calibration");
    assert_eq!(
        book.usage().source_of(OpClass::MoeSharedExperts),
        "roofline"
    );
    // 8 bytes is the first point: all latency, no occupancy.
    let small = cost.transfer_bytes(&mut book, 8);
    assert_eq!(
        (small.latency.as_us_f64(), small.occupancy.as_us_f64()),
        (10.0, 0.0)
    );
    let big = cost.transfer_bytes(&mut book, 1 << 20);
    assert_eq!(big.total().as_us_f64(), 1034.0);
    // Outside the measured range: clamped and counted.
    let _ = cost.transfer_bytes(&mut book, 1 << 30);
    assert_eq!(book.usage().of(OpClass::P2p).out_of_range, 1);
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
    let mut book = PriceBook::new();
    let first = cost.transfer_rows(&mut book, 64);
    assert_eq!(cost.transfer_rows(&mut book, 64), first);
    assert_eq!(book.usage().of(OpClass::P2p).roofline, 2);
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
                let mut book = PriceBook::new();
                // Every query of a profile that loaded answers without panicking.
                let _ = cost.transfer_rows(&mut book, rows);
                let _ = cost.fan_in_occupancy(&mut book, rows, 2);
                let _ = cost.all_reduce_rows(&mut book, rows, 2);
                let _ = cost.router(&mut book, rows);
                let _ = cost.routed_experts(&mut book, rows % 64 + 1, rows);
                let _ = cost.attention_decode(&mut book, rows, u64::from(rows) * 100);
                let _ = cost.attention_prefill(&mut book, rows, rows);
                let _ = cost.eager_host(&mut book, OpClass::AttentionProj, 12);
                let _ = cost.graph_kernel_gap();
                let _ = cost.step_host(&mut book, rows);
            }
        }
    }
}

fn point_with(at: Vec<f64>, us: f64, derived: &[(&str, f64)]) -> CostPoint {
    let mut p = point(at, us);
    p.derived = derived.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect();
    p
}

fn calibrated(profile: &CalibrationProfile) -> CostModel {
    CostModel::calibrated(
        &ModelArch::deepseek_v2_lite(),
        GpuKind::H200,
        layout(),
        profile,
        "test",
    )
    .unwrap()
}

#[test]
fn the_eager_gap_is_the_robust_slope_over_device_bound_eager_runs() {
    let mut profile = CalibrationProfile::new(Provenance::default());
    // eager − graph = 2 µs of events + 1.5 µs per kernel, for 2- and 10-kernel operations; one
    // outlier, and one host-bound point (host 60 µs > graph 40 µs) that must not count.
    let points = vec![
        point_with(
            vec![1.0],
            20.0,
            &[("kernels", 2.0), ("host_us", 5.0), ("eager_us", 25.0)],
        ),
        point_with(
            vec![2.0],
            30.0,
            &[("kernels", 2.0), ("host_us", 5.0), ("eager_us", 35.0)],
        ),
        point_with(
            vec![3.0],
            90.0,
            &[("kernels", 10.0), ("host_us", 5.0), ("eager_us", 107.0)],
        ),
        point_with(
            vec![4.0],
            95.0,
            &[("kernels", 10.0), ("host_us", 5.0), ("eager_us", 112.0)],
        ),
        point_with(
            vec![5.0],
            99.0,
            &[("kernels", 10.0), ("host_us", 5.0), ("eager_us", 160.0)],
        ),
        point_with(
            vec![6.0],
            40.0,
            &[("kernels", 2.0), ("host_us", 60.0), ("eager_us", 200.0)],
        ),
    ];
    profile
        .tables
        .push(table("moe.router", &[], &["tokens"], points));
    assert_eq!(eager_gap_fit(&profile), Some(1.5));
    assert_eq!(calibrated(&profile).eager_kernel_gap().as_ns(), 1_500);
    // Without eager runs the default applies (zero for the roofline).
    let roofline = CostModel::roofline(&ModelArch::deepseek_v2_lite(), GpuKind::H200, layout());
    assert_eq!(roofline.eager_kernel_gap(), SimDuration::ZERO);
}

#[test]
fn handoffs_price_transfers_and_slow_down_after_long_waits() {
    let mut profile = CalibrationProfile::new(Provenance::default());
    let handoff = |work: f64, legs: [f64; 2]| {
        table(
            "p2p.handoff",
            &[("graph", "true"), ("work_bytes", "1")],
            &["bytes"],
            vec![
                point_with(vec![8.0], legs[0], &[("work_us", work)]),
                point_with(vec![4096.0 * 64.0], legs[1], &[("work_us", work)]),
            ],
        )
    };
    profile.tables.push(table(
        "p2p.ping_pong",
        &[("graph", "true")],
        &["bytes"],
        vec![point(vec![8.0], 99.0)],
    ));
    profile.tables.push(handoff(100.0, [9.0, 14.0]));
    profile.tables.push(handoff(1.0, [6.0, 10.0]));
    profile.tables.push(table(
        "p2p.one_way",
        &[("graph", "true")],
        &["bytes"],
        vec![point(vec![8.0], 5.0), point(vec![4096.0 * 64.0], 8.0)],
    ));
    let cost = calibrated(&profile);
    let mut book = PriceBook::new();
    // The shortest-compute hand-off prices the leg (not ping-pong): 64 rows of 4 KiB.
    assert_eq!(cost.transfer_rows(&mut book, 64).total().as_us_f64(), 10.0);
    assert_eq!(
        cost.nccl_busy_rows(&mut book, 64).map(|d| d.as_us_f64()),
        Some(8.0)
    );
    // After waiting the 100 µs compute plus one leg, the leg is 4 µs longer.
    let extra = cost.handoff_wait_extra(&mut book, 64);
    assert_eq!(extra.at(1_000 + 10_000), 0);
    assert_eq!(extra.at(100_000 + 10_000), 4_000);
    assert_eq!(extra.at(1_000_000), 4_000);
    // Without hand-off tables: ping-pong, and no extra.
    profile.tables.retain(|t| t.op != "p2p.handoff");
    let cost = calibrated(&profile);
    let mut book = PriceBook::new();
    assert_eq!(cost.transfer_rows(&mut book, 64).total().as_us_f64(), 99.0);
    assert_eq!(cost.handoff_wait_extra(&mut book, 64).at(1_000_000), 0);
}

#[test]
fn a_whole_moe_layer_adds_what_its_parts_miss() {
    let mut profile = CalibrationProfile::new(Provenance::default());
    profile.tables.push(table(
        "moe.layer",
        &[("routing", "power-law:1.2")],
        &["tokens"],
        vec![point_with(vec![4.0], 100.0, &[("parts_sum_us", 50.0)])],
    ));
    profile.tables.push(table(
        "moe.layer",
        &[("routing", "uniform")],
        &["tokens"],
        vec![
            point_with(vec![4.0], 130.0, &[("parts_sum_us", 118.0)]),
            point_with(vec![4096.0], 1200.0, &[("parts_sum_us", 1210.0)]),
        ],
    ));
    let cost = calibrated(&profile);
    let mut book = PriceBook::new();
    // The uniform table wins; the difference is signed.
    assert_eq!(cost.moe_composition_ns(&mut book, 4), 12_000);
    assert_eq!(cost.moe_composition_ns(&mut book, 4096), -10_000);
    assert_eq!(book.usage().source_of(OpClass::MoeLayer), "calibration");
    let roofline = CostModel::roofline(&ModelArch::deepseek_v2_lite(), GpuKind::H200, layout());
    let mut book = PriceBook::new();
    assert_eq!(roofline.moe_composition_ns(&mut book, 4), 0);
}

#[test]
fn books_of_one_shared_model_agree_whatever_they_asked_before() {
    // One model priced through several books, as the planner's candidates or a replay's records
    // might: the same queries give the same prices and counts in any order, and a book's memo
    // counts as many queries as fresh books would.
    let cost = calibrated(&synthetic_profile());
    let query = |book: &mut PriceBook, rows: u32| {
        (
            cost.transfer_rows(book, rows),
            cost.fan_in_occupancy(book, rows, 2),
            cost.router(book, rows),
            cost.shared_experts(book, rows),
            cost.transfer_bytes(book, u64::from(rows)),
        )
    };
    let rows = [64, 8, 64, 4096, 8];
    let mut forward = PriceBook::new();
    let prices: Vec<_> = rows.iter().map(|&r| query(&mut forward, r)).collect();
    let mut backward = PriceBook::new();
    let mut reversed: Vec<_> = rows
        .iter()
        .rev()
        .map(|&r| query(&mut backward, r))
        .collect();
    reversed.reverse();
    assert_eq!(prices, reversed);
    assert_eq!(forward.usage(), backward.usage());
    let mut fresh = PriceBook::new();
    for (&r, price) in rows.iter().zip(&prices) {
        let mut once = PriceBook::new();
        assert_eq!(query(&mut once, r), *price);
        fresh.add_usage(&once.usage().since(&UsageCounts::default()));
    }
    assert_eq!(fresh.usage(), forward.usage());
    assert_eq!(forward.usage().of(OpClass::P2p).calibrated, 15);
}
