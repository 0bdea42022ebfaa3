//! Statistics on recorded samples.

use expect_test::{Expect, expect};
use proptest::prelude::*;

use super::*;

#[track_caller]
fn check(samples: &[f64], expected: Expect) {
    let stats = summarize(samples).expect("non-empty finite samples");
    expected.assert_eq(&format!(
        "n={} min={} median={} p99={} max={} mean={}",
        stats.n, stats.min_us, stats.median_us, stats.p99_us, stats.max_us, stats.mean_us
    ));
}

#[test]
fn one_sample_is_every_statistic() {
    check(
        &[6.1],
        expect!["n=1 min=6.1 median=6.1 p99=6.1 max=6.1 mean=6.1"],
    );
}

#[test]
fn even_count_takes_the_mean_of_the_middle_pair() {
    check(
        &[10.0, 9.0, 12.0, 11.0],
        expect!["n=4 min=9 median=10.5 p99=12 max=12 mean=10.5"],
    );
}

#[test]
fn p99_is_nearest_rank() {
    // Recorded 8-byte eager send/recv latencies (µs) with one outlier, as nccl-tests -I shows them.
    let mut samples: Vec<f64> = (0..199).map(|i| 9.0 + f64::from(i % 7) * 0.25).collect();
    samples.push(32.5);
    check(
        &samples,
        expect!["n=200 min=9 median=9.75 p99=10.5 max=32.5 mean=9.85625"],
    );
}

#[test]
fn empty_or_nan_samples_have_no_summary() {
    assert!(summarize(&[]).is_none());
    assert!(summarize(&[1.0, f64::NAN]).is_none());
    assert!(median(&[]).is_none());
}

#[test]
fn max_over_ranks_takes_the_slowest_rank_per_iteration() {
    let merged = max_over_ranks(&[vec![1.0, 5.0, 2.0], vec![3.0, 4.0]]);
    assert_eq!(merged, vec![3.0, 5.0, 2.0]);
}

#[test]
fn cv_of_constant_samples_is_zero() {
    assert_eq!(cv_percent(&[4.0, 4.0, 4.0]), 0.0);
    assert!((cv_percent(&[1.0, 3.0]) - 70.710_678_118_654_76).abs() < 1e-9);
}

proptest! {
    #[test]
    fn statistics_are_ordered(samples in prop::collection::vec(0.0f64..1e7, 1..300)) {
        let stats = summarize(&samples).unwrap();
        prop_assert!(stats.min_us <= stats.median_us);
        prop_assert!(stats.median_us <= stats.p99_us);
        prop_assert!(stats.p99_us <= stats.max_us);
        prop_assert!(stats.min_us <= stats.mean_us && stats.mean_us <= stats.max_us);
        prop_assert_eq!(stats.n as usize, samples.len());
    }
}
