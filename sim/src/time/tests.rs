//! Conversions and arithmetic of simulated time.

use super::*;

#[test]
fn float_conversions_round_to_the_nearest_nanosecond() {
    assert_eq!(SimDuration::from_us_f64(1.0004).as_ns(), 1_000);
    assert_eq!(SimDuration::from_us_f64(1.0006).as_ns(), 1_001);
    assert_eq!(SimDuration::from_us_f64(-3.0), SimDuration::ZERO);
    assert_eq!(SimDuration::from_us_f64(f64::NAN), SimDuration::ZERO);
    assert_eq!(SimDuration::from_secs_f64(0.25).as_ns(), 250_000_000);
}

#[test]
fn adding_saturates_instead_of_wrapping() {
    assert_eq!(SimTime::MAX + SimDuration::from_ns(5), SimTime::MAX);
    let t = SimTime::from_ns(10) + SimDuration::from_us(2);
    assert_eq!(t.as_ns(), 2_010);
    assert_eq!(t - SimTime::from_ns(10), SimDuration::from_ns(2_000));
    assert_eq!(SimTime::from_ns(3).saturating_since(t), SimDuration::ZERO);
}

#[test]
fn huge_integer_spans_saturate() {
    assert_eq!(SimDuration::from_us(u64::MAX / 2).as_ns(), u64::MAX);
    assert_eq!(SimDuration::from_ms(u64::MAX / 2).as_ns(), u64::MAX);
}

proptest::proptest! {
    /// The libm-free rounding agrees with `f64::round` on every float an integer cast would see.
    #[test]
    fn round_half_away_is_f64_round(bits in proptest::num::u64::ANY, small in -1e7f64..1e7) {
        for x in [f64::from_bits(bits), small, small.trunc() + 0.5, small.trunc() - 0.5] {
            let (ours, std) = (round_half_away(x), x.round());
            proptest::prop_assert!(
                ours == std || (ours.is_nan() && std.is_nan()),
                "{x:e}: {ours:e} vs {std:e}"
            );
            proptest::prop_assert_eq!(ours as i64, std as i64);
            proptest::prop_assert_eq!(ours as u64, std as u64);
        }
    }
}

#[test]
fn round_half_away_rounds_halves_away_from_zero() {
    for (x, rounded) in [
        (0.5, 1.0),
        (-0.5, -1.0),
        (2.5, 3.0),
        (0.499_999_999_999_999_94, 0.0),
        (1e300, 1e300),
        (4_503_599_627_370_495.5, 4_503_599_627_370_496.0),
    ] {
        assert_eq!(round_half_away(x), rounded, "{x:e}");
    }
}
