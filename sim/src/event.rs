//! Everything that can happen in a run. Closed: a new variant breaks every `match` until handled.
//!
//! Events are request-level and step-level facts; the layer pipeline inside a step is computed by a
//! function (`pipeline.rs`), not by events.

/// A fact at a point of simulated time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The client's intended send time of workload request `request` came (before the
    /// `--max-concurrency` limit).
    RequestIntended { request: u32 },
    /// Work appeared at an idle pair: the next global step starts now, after every event already
    /// scheduled for this instant (so simultaneous arrivals share the step).
    StepStarted,
    /// Global step `step` finished on every rank; its tokens are emitted now.
    StepFinished { step: u64 },
    /// The DP coordinator published the engines' queue lengths (afd-spec §7.2).
    StatsPublished,
    /// The front end finished taking in workload request `request` (HTTP, parsing, hand-off to the
    /// engine); only scheduled when the run has a per-request front-end intake cost.
    RequestAdmitted { request: u32 },
    /// The front end delivered the last token of workload request `request` to the client, which
    /// frees its concurrency slot; only scheduled when the run has a per-token front-end cost.
    RequestDelivered { request: u32 },
    /// The tokens of global step `step` leave the engine core now, once the step after it is
    /// issued (asynchronous scheduling with a host-bound next step); only scheduled when an engine
    /// profile prices the steps.
    TokensEmitted { step: u64 },
    /// The client finished opening the connections that the requests it sent at this instant
    /// found none idle for ([`crate::engine::RunOptions::client_connect`]); they are on their way
    /// to the front end now. Only scheduled when the run prices the client's connections.
    ConnectionsOpened,
}

impl Event {
    /// Stable kind code for the event-log hash.
    pub fn kind(self) -> u8 {
        match self {
            Event::RequestIntended { .. } => 1,
            Event::StepFinished { .. } => 2,
            Event::StatsPublished => 3,
            Event::StepStarted => 4,
            Event::RequestAdmitted { .. } => 5,
            Event::RequestDelivered { .. } => 6,
            Event::TokensEmitted { .. } => 7,
            Event::ConnectionsOpened => 8,
        }
    }

    /// The id the event carries, for the event-log hash.
    pub fn id(self) -> u64 {
        match self {
            Event::RequestIntended { request }
            | Event::RequestAdmitted { request }
            | Event::RequestDelivered { request } => u64::from(request),
            Event::StepFinished { step } | Event::TokensEmitted { step } => step,
            Event::StatsPublished | Event::StepStarted | Event::ConnectionsOpened => 0,
        }
    }
}
