//! Where the Attention twin's steps come from: the [`StepSource`] trait the engine loop drives, one step
//! at a time, and the clock that maps the source's simulated time onto the twin's real time.
//!
//! A source owns the scheduling of every Attention DP engine (which requests run in a step, which get a
//! token) and the step's simulated start and duration. The product source is the simulator's live
//! engine ([`sim::SimSource`]); this module does not time anything by itself, and the source never reads
//! a clock: the engine loop tells it what time it is.

use std::time::Duration;

use tokio::time::Instant;

pub use afd_sim::live::Rejection;

pub mod sim;

/// Identifies one request inside the twin (not the client's `X-Request-Id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// A request handed to a source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimedRequest {
    pub id: RequestId,
    /// Attention DP engine (DP rank) the router chose.
    pub engine: u32,
    pub prompt_tokens: u32,
    /// Exactly this many tokens will be generated (max_tokens, or the natural length without ignore_eos).
    pub output_tokens: u32,
}

/// What one step of the whole Attention side did (all DP engines step together, afd-spec §3.8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    /// Simulated time the step started at, since the source was built: the `now` it was asked at, or
    /// the end of the previous step if that is later.
    pub start: Duration,
    /// Simulated duration of the step, FFN round trips included.
    pub duration: Duration,
    /// Requests that were part of the batch (prefill chunks and decodes).
    pub scheduled: Vec<RequestId>,
    /// Requests that got one output token at the end of the step, in batch order.
    pub emitted: Vec<RequestId>,
    /// Requests pushed back to waiting by preemption.
    pub preempted: Vec<RequestId>,
    /// Tokens scheduled per Attention DP engine: the control payload's `num_tokens_across_dp_cpu`
    /// (afd-spec §3.4); idle engines count 0 here and send one dummy row on the wire (§3.8).
    pub tokens_per_engine: Vec<u32>,
    /// 1 without a DBO split, 2 with one (afd-spec §4.2).
    pub stages: u32,
}

/// A scheduler-and-clock for the Attention side.
///
/// Invariant: a request leaves the source when it has emitted `output_tokens` tokens or is aborted; it is
/// never emitted twice in one step, and steps never overlap (`start` ≥ the previous step's end).
pub trait StepSource: Send {
    /// Number of Attention DP engines (the engine indices are `0..n`).
    fn n_engines(&self) -> u32;
    /// Queues a request on its engine; refused when it can never be served.
    fn submit(&mut self, request: TimedRequest) -> Result<(), Rejection>;
    /// Drops a request (client went away); unknown ids are ignored.
    fn abort(&mut self, id: RequestId);
    /// Runs the next step, starting at `now` (simulated time since the source was built) or when the
    /// previous step ends, whichever is later; `None` when no engine has work.
    fn next_step(&mut self, now: Duration) -> Option<StepOutcome>;
}

/// The latest real time [`SimClock::real`] maps to, after the epoch.
const FAR_FUTURE: Duration = Duration::from_secs(365 * 86_400);

/// The map between simulated time and the twin's real time: simulated `t` happens at
/// `epoch + t · scale`. Scale 0 runs every step at once (no sleeping).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SimClock {
    epoch: Instant,
    // Invariant: finite and >= 0.
    scale: f64,
}

impl SimClock {
    /// Simulated time 0 is `epoch`; `scale` real seconds pass per simulated second (finite, ≥ 0).
    pub fn new(epoch: Instant, scale: f64) -> SimClock {
        assert!(
            scale.is_finite() && scale >= 0.0,
            "the time scale is checked on the command line, got {scale}"
        );
        SimClock { epoch, scale }
    }

    pub fn scale(self) -> f64 {
        self.scale
    }

    /// When simulated time `at` happens in real time (a year after the epoch at most, so an absurd
    /// scale cannot overflow the clock).
    pub fn real(self, at: Duration) -> Instant {
        let offset = Duration::try_from_secs_f64(at.as_secs_f64() * self.scale)
            .map_or(FAR_FUTURE, |d| d.min(FAR_FUTURE));
        self.epoch + offset
    }

    /// The simulated time of real instant `at` (0 before the epoch, and always 0 at scale 0, where
    /// simulated time advances only by step durations).
    pub fn simulated(self, at: Instant) -> Duration {
        if self.scale == 0.0 {
            return Duration::ZERO;
        }
        let real = at.saturating_duration_since(self.epoch).as_secs_f64();
        Duration::try_from_secs_f64(real / self.scale).unwrap_or(Duration::MAX)
    }
}

#[cfg(test)]
mod tests;
