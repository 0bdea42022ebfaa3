//! Fits on recorded samples.

use proptest::prelude::*;

use super::*;

#[test]
fn least_squares_recovers_a_line() {
    let line = least_squares(&[(1.0, 3.0), (2.0, 5.0), (4.0, 9.0)]).unwrap();
    assert!((line.intercept - 1.0).abs() < 1e-12);
    assert!((line.slope - 2.0).abs() < 1e-12);
    assert!(least_squares(&[(1.0, 3.0)]).is_none());
    assert!(least_squares(&[(1.0, 3.0), (1.0, 4.0)]).is_none());
}

#[test]
fn alpha_beta_of_recorded_one_way_sends() {
    // One-way NCCL send 0→1 measured on 2×H200 (research note §1.3): bytes, µs.
    let points = [
        (8.0, 10.6),
        (1_048_576.0, 11.8),
        (4_194_304.0, 20.7),
        (16_777_216.0, 56.4),
        (67_108_864.0, 197.3),
        (268_435_456.0, 745.6),
        (1_073_741_824.0, 2902.5),
    ];
    let fit = alpha_beta(&points, 8.0, 67_108_864.0).unwrap();
    assert!((fit.latency_us - 10.6).abs() < 1e-9);
    assert!(fit.gbps > 360.0 && fit.gbps < 400.0, "{fit:?}");
    assert!(alpha_beta(&points, 1.0, 67_108_864.0).is_none());
}

#[test]
fn interpolation_clamps_and_blends() {
    let points = [(1.0, 10.0), (3.0, 30.0)];
    assert_eq!(interpolate(&points, 0.0), Some(10.0));
    assert_eq!(interpolate(&points, 2.0), Some(20.0));
    assert_eq!(interpolate(&points, 9.0), Some(30.0));
    assert_eq!(interpolate(&[], 1.0), None);
    assert_eq!(interpolate(&points, f64::NAN), None);
}

#[test]
fn bilinear_hits_grid_points_and_blends_between() {
    let xs = [1.0, 2.0];
    let ys = [10.0, 20.0, 40.0];
    let values = vec![vec![1.0, 2.0, 4.0], vec![3.0, 4.0, 6.0]];
    assert_eq!(bilinear(&xs, &ys, &values, 2.0, 20.0), Some(4.0));
    assert_eq!(bilinear(&xs, &ys, &values, 1.5, 30.0), Some(4.0));
    assert_eq!(bilinear(&xs, &ys, &values[..1], 1.5, 30.0), None);
}

#[test]
fn grid_lookup_reads_a_cost_table() {
    use afd_traces::calibration::{CostPoint, CostTable, SampleStats};
    let at = |a: f64, m: f64, us: f64| CostPoint {
        at: vec![a, m],
        stats: SampleStats {
            n: 1,
            min_us: us,
            median_us: us,
            p99_us: us,
            max_us: us,
            mean_us: us,
        },
        samples_us: vec![us],
        derived: Default::default(),
    };
    let mut table = CostTable {
        op: "moe.routed_experts".to_owned(),
        variant: Default::default(),
        axes: vec!["active_experts".to_owned(), "tokens_per_expert".to_owned()],
        points: vec![
            at(1.0, 1.0, 10.0),
            at(1.0, 2.0, 12.0),
            at(2.0, 1.0, 20.0),
            at(2.0, 2.0, 22.0),
        ],
    };
    assert_eq!(grid_lookup(&table, 1.5, 1.5), Some(16.0));
    table.points.pop();
    assert_eq!(grid_lookup(&table, 1.5, 1.5), None, "incomplete grid");
}

proptest! {
    #[test]
    fn interpolation_stays_within_the_data(
        mut ys in prop::collection::vec(0.0f64..1e6, 1..20),
        x in -10.0f64..40.0,
    ) {
        let points: Vec<(f64, f64)> = ys.drain(..).enumerate().map(|(i, y)| (i as f64, y)).collect();
        let v = interpolate(&points, x).unwrap();
        let lo = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let hi = points.iter().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
        prop_assert!(v >= lo - 1e-9 && v <= hi + 1e-9);
    }
}
