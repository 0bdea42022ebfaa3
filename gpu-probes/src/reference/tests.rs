//! The CPU references on hand-checkable inputs.

use proptest::prelude::*;

use super::*;

fn bf(values: &[f32]) -> Vec<u16> {
    values.iter().map(|v| f32_to_bf16(*v)).collect()
}

#[test]
fn bf16_round_trips_and_rounds_to_even() {
    assert_eq!(bf16_to_f32(f32_to_bf16(1.0)), 1.0);
    assert_eq!(bf16_to_f32(f32_to_bf16(-2.5)), -2.5);
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
    assert_eq!(bf16_to_f32(f32_to_bf16(1.0 + 1.0 / 256.0)), 1.0);
    assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
}

#[test]
fn mla_decode_of_equal_scores_averages_the_rows() {
    let heads = 1;
    let q_lat = vec![0u16; 512];
    let q_pe = vec![0u16; 64];
    let mut rows = vec![0u16; 2 * 576];
    rows[0] = f32_to_bf16(2.0);
    rows[576] = f32_to_bf16(4.0);
    let out = mla_decode(&q_lat, &q_pe, &rows, heads, 2, 1.0);
    assert!((out[0] - 3.0).abs() < 1e-12);
}

#[test]
fn mla_decode_prefers_the_matching_row() {
    let mut q_lat = vec![0u16; 512];
    q_lat[0] = f32_to_bf16(10.0);
    let q_pe = vec![0u16; 64];
    let mut rows = vec![0u16; 2 * 576];
    rows[0] = f32_to_bf16(1.0);
    rows[1] = f32_to_bf16(7.0);
    rows[576 + 1] = f32_to_bf16(9.0);
    let out = mla_decode(&q_lat, &q_pe, &rows, 1, 2, 1.0);
    // weights e^10 : e^0, so out[1] ≈ 7 and a little of 9.
    let w = 1.0 / (1.0 + (-10.0f64).exp());
    assert!((out[1] - (7.0 * w + 9.0 * (1.0 - w))).abs() < 1e-6);
}

#[test]
fn gated_mlp_of_one_unit() {
    // hidden 2, inter 1: gate = x0, up = x1, down = [1, 2].
    let x = bf(&[1.0, 3.0]);
    let gate_up = bf(&[1.0, 0.0, 0.0, 1.0]);
    let down = bf(&[1.0, 2.0]);
    let out = gated_mlp(&x, &gate_up, &down, 2, 1);
    let silu1 = 1.0 / (1.0 + (-1.0f64).exp());
    let act = f64::from(bf16_to_f32(f32_to_bf16((silu1 * 3.0) as f32)));
    assert!((out[0] - act).abs() < 1e-9);
    assert!((out[1] - 2.0 * act).abs() < 1e-9);
}

#[test]
fn relative_error_flags_non_finite_values() {
    assert_eq!(relative_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
    assert!(relative_error(&[f32::NAN], &[1.0]).is_infinite());
    assert!((relative_error(&[1.1], &[1.0]) - 0.1).abs() < 1e-6);
}

proptest! {
    #[test]
    fn bf16_conversion_is_within_half_an_ulp(value in -1e30f32..1e30) {
        let back = bf16_to_f32(f32_to_bf16(value));
        prop_assert!((back - value).abs() <= value.abs() / 256.0 + f32::MIN_POSITIVE);
    }
}
