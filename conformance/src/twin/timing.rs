//! Where the Attention twin's steps come from: the [`StepSource`] trait the engine loop drives, one step
//! at a time, and the sources that implement it.
//!
//! A source owns the scheduling of every Attention DP engine (which requests run in a step, which get a
//! token) and the step's duration. The simulator's live engine is the product source; this module does
//! not time anything by itself.

use std::time::Duration;

pub mod schedule_only;

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
/// never emitted twice in one step.
pub trait StepSource: Send {
    /// Number of Attention DP engines (the engine indices are `0..n`).
    fn n_engines(&self) -> u32;
    fn submit(&mut self, request: TimedRequest);
    /// Drops a request (client went away); unknown ids are ignored.
    fn abort(&mut self, id: RequestId);
    /// Runs the next step, or `None` when no engine has work.
    fn next_step(&mut self) -> Option<StepOutcome>;
}
