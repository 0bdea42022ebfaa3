//! Sweep CLI helpers: the frontier plot's log-axis ticks.

use super::svg::log_ticks;

#[test]
fn log_ticks_are_one_two_five_per_decade_inside_the_range() {
    assert_eq!(log_ticks(&(2.5..60.0)), vec![5.0, 10.0, 20.0, 50.0]);
    // The end is excluded, as the axis range is.
    assert_eq!(
        log_ticks(&(300.0..20_000.0)),
        vec![500.0, 1000.0, 2000.0, 5000.0, 10_000.0]
    );
    assert_eq!(log_ticks(&(0.8..1.5)), vec![1.0]);
    assert!(log_ticks(&(3.0..4.0)).is_empty());
}
