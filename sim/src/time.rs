//! Simulated time: integer nanoseconds, so ordering and sums are exact and platform independent.
//!
//! [`SimTime`] is an instant since the start of a run, [`SimDuration`] a span. Nothing here reads a
//! clock; conversions to floating point exist only for reports.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// Nanoseconds since the start of the run; integer, so ordering is exact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

/// A span of simulated time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_ns(ns: u64) -> SimTime {
        SimTime(ns)
    }

    pub const fn as_ns(self) -> u64 {
        self.0
    }

    /// Microseconds as a float, for reports and timelines only.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }

    /// Seconds as a float, for reports only.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The span from `earlier` to `self`; zero when `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);

    pub const fn from_ns(ns: u64) -> SimDuration {
        SimDuration(ns)
    }

    /// Saturates at `u64::MAX` ns (584 years) rather than overflowing.
    pub const fn from_us(us: u64) -> SimDuration {
        SimDuration(us.saturating_mul(1_000))
    }

    /// Saturates at `u64::MAX` ns rather than overflowing.
    pub const fn from_ms(ms: u64) -> SimDuration {
        SimDuration(ms.saturating_mul(1_000_000))
    }

    /// Rounds a non-negative float of microseconds to the nearest nanosecond; NaN and negatives give 0.
    pub fn from_us_f64(us: f64) -> SimDuration {
        if us.is_nan() || us <= 0.0 {
            return SimDuration(0);
        }
        // The cast saturates at u64::MAX for absurdly large values, which the bounds then report.
        SimDuration(round_half_away(us * 1e3) as u64)
    }

    /// Rounds a non-negative float of seconds to the nearest nanosecond; NaN and negatives give 0.
    pub fn from_secs_f64(secs: f64) -> SimDuration {
        SimDuration::from_us_f64(secs * 1e6)
    }

    pub const fn as_ns(self) -> u64 {
        self.0
    }

    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }

    pub fn as_ms_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, rhs: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, rhs: SimDuration) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub<SimTime> for SimTime {
    type Output = SimDuration;
    /// Panics when `rhs` is later: a negative span is a bug in the caller.
    fn sub(self, rhs: SimTime) -> SimDuration {
        SimDuration(
            self.0
                .checked_sub(rhs.0)
                .unwrap_or_else(|| panic!("negative span: {self:?} - {rhs:?}")),
        )
    }
}

impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, rhs: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for SimDuration {
    fn add_assign(&mut self, rhs: SimDuration) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}ms", self.0 as f64 / 1e6)
    }
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}ms", self.0 as f64 / 1e6)
    }
}

/// `x.round()` (half away from zero) for a value about to be cast to an integer, without a libm
/// call: truncation and one comparison, exact for every float (only the sign of a zero result may
/// differ, which no integer cast sees). Hot pricing code rounds every duration.
#[inline]
pub fn round_half_away(x: f64) -> f64 {
    // Beyond 2^52 every float is an integer (and NaN and infinities round to themselves).
    if x.abs() >= 4_503_599_627_370_496.0 || x.is_nan() {
        return x;
    }
    let whole = x as i64 as f64;
    let fraction = x - whole;
    if fraction >= 0.5 {
        whole + 1.0
    } else if fraction <= -0.5 {
        whole - 1.0
    } else {
        whole
    }
}

#[cfg(test)]
mod tests;
