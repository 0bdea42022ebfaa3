//! The simulated-to-real clock: scaling both ways, scale 0, and absurd scales that must not overflow.

use std::time::Duration;

use tokio::time::Instant;

use super::*;

#[test]
fn simulated_time_maps_to_real_time_by_the_scale() {
    let epoch = Instant::now();
    let clock = SimClock::new(epoch, 0.5);
    assert_eq!(
        clock.real(Duration::from_secs(4)),
        epoch + Duration::from_secs(2)
    );
    assert_eq!(
        clock.simulated(epoch + Duration::from_secs(3)),
        Duration::from_secs(6)
    );
    assert_eq!(clock.simulated(epoch), Duration::ZERO);
    let at = Duration::from_micros(123_457);
    let back = clock.simulated(clock.real(at));
    assert!(back.abs_diff(at) <= Duration::from_nanos(4), "{back:?}");
}

#[test]
fn scale_zero_keeps_every_step_at_the_epoch() {
    let epoch = Instant::now();
    let clock = SimClock::new(epoch, 0.0);
    assert_eq!(clock.real(Duration::from_secs(1_000)), epoch);
    assert_eq!(
        clock.simulated(epoch + Duration::from_secs(5)),
        Duration::ZERO
    );
}

#[test]
fn absurd_scales_saturate_instead_of_overflowing() {
    let epoch = Instant::now();
    let huge = SimClock::new(epoch, 1e300);
    assert_eq!(huge.real(Duration::from_secs(1)), epoch + FAR_FUTURE);
    let tiny = SimClock::new(epoch, 1e-300);
    assert_eq!(
        tiny.simulated(epoch + Duration::from_secs(1)),
        Duration::MAX
    );
    assert_eq!(tiny.real(Duration::MAX), epoch);
}
