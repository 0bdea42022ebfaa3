//! The closed forms by hand arithmetic.

use super::*;

fn times(a: f64, f: f64, c: f64) -> LayerTimes {
    LayerTimes {
        attention_us: a,
        ffn_us: f,
        transfer_us: c,
    }
}

#[test]
fn one_ubatch_cannot_overlap_so_the_step_is_serial() {
    assert_eq!(
        pipeline_step_us(times(30.0, 50.0, 10.0), 27, 1),
        (27.0 * 90.0, false)
    );
}

#[test]
fn two_ubatches_overlap_when_transfers_are_small() {
    // m = 2 ≥ 2 + 0/50 holds only without transfers; then cycle = max(t_A, t_F).
    let (step, holds) = pipeline_step_us(times(30.0, 50.0, 0.0), 10, 2);
    assert!(holds);
    assert_eq!(step, 80.0 + 50.0 * 19.0);
    // With a 10 µs round trip m = 2 < 2.2: conservative cycle max(t_A, t_F) + t_c/2.
    let (step, holds) = pipeline_step_us(times(30.0, 50.0, 10.0), 10, 2);
    assert!(!holds);
    assert_eq!(step, 90.0 + 55.0 * 19.0);
    // Three ubatches satisfy m ≥ 2 + 10/50 and the cycle is the slowest stage.
    let (step, holds) = pipeline_step_us(times(30.0, 50.0, 10.0), 10, 3);
    assert!(holds);
    assert_eq!(step, 90.0 + 50.0 * 29.0);
}

#[test]
fn the_ratio_rule_picks_the_largest_term() {
    // t_F(x) = 0.5·x + 20, B = 8 rows: r_A = (60 − 20)/4 = 10, r_C = (10 − 20)/4 < 0,
    // r_peak = sqrt(20/4) ≈ 2.24.
    let (r, regime) = optimal_ratio(60.0, 10.0, 0.5, 20.0, 8.0).unwrap();
    assert_eq!((r, regime), (10.0, Regime::Attention));
    let (r, regime) = optimal_ratio(10.0, 5.0, 0.5, 20.0, 8.0).unwrap();
    assert_eq!(regime, Regime::Ffn);
    assert!((r - 5f64.sqrt()).abs() < 1e-12);
    let (_, regime) = optimal_ratio(10.0, 90.0, 0.5, 20.0, 8.0).unwrap();
    assert_eq!(regime, Regime::Communication);
    assert_eq!(optimal_ratio(10.0, 5.0, 0.0, 20.0, 8.0), None);
}

fn step(rows_f: f64, ffn_ns: u64) -> DecodeStep {
    DecodeStep {
        layers: 2,
        stages: 1,
        span_ns: 400_000,
        attention_busy_max_ns: 60_000,
        attention_busy_mean_ns: 60_000.0,
        ffn_busy_max_ns: ffn_ns,
        ffn_busy_mean_ns: ffn_ns as f64 / 2.0,
        link_busy_max_ns: 20_000,
        fixed_ns: 10_000,
        tokens: 8,
        rows_per_attention_rank: 4.0,
        rows_per_ffn_rank: rows_f,
        attention_ranks: 2,
        ffn_ranks: 1,
        eager: false,
    }
}

#[test]
fn totals_average_the_steps_and_fit_the_ffn_line() {
    let mut totals = ClosedFormTotals::default();
    assert_eq!(totals.summary(), None);
    // t_F per layer: 40 µs at 8 rows, 60 µs at 16 rows: α_F = 2.5 µs/row, β_F = 20 µs.
    totals.record(&step(8.0, 80_000));
    totals.record(&step(16.0, 120_000));
    let summary = totals.summary().unwrap();
    assert_eq!(summary.times, times(30.0, 50.0, 10.0));
    // Serial: 2 layers × (30 + t_F + 10) + 10 fixed, averaged: (170 + 210) / 2 = 190 µs.
    assert!((summary.closed_form_step_ms - 0.19).abs() < 1e-12);
    assert_eq!(summary.simulated_step_ms, 0.4);
    assert_eq!(summary.ratio, 2.0);
    // r_A = (30 − 20) / (2.5·4) = 1, r_peak = sqrt(20/10) ≈ 1.41 wins.
    let (r, regime) = summary.optimal_ratio.unwrap();
    assert_eq!(regime, Regime::Ffn);
    assert!((r - 2f64.sqrt()).abs() < 1e-12);
    // 16 tokens over 0.8 ms on 3 GPUs; the paper's cycle is max(t_A, t_c, t_F) per layer.
    assert!((summary.simulated_tokens_per_s_per_gpu - 16.0 / 0.8e-3 / 3.0).abs() < 1e-6);
    let cycle_s = (2.0 * 40.0 + 2.0 * 60.0) * 1e-6;
    assert!((summary.closed_form_tokens_per_s_per_gpu - 16.0 / cycle_s / 3.0).abs() < 1e-6);
    assert_eq!(summary.ffn_imbalance, 1.0);
}
