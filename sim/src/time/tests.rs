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
