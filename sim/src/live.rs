//! A real-time stepping API over the same model the DES runs, for `afd-twin`.
//!
//! [`LiveEngine`] owns the pair (`cluster.rs`) and no clock: the caller submits requests, asks for
//! the next global step with its own notion of "now", sleeps the returned duration in real time and
//! streams the returned tokens. Costs, scheduling, routing and the layer pipeline are exactly the
//! discrete-event simulator's.

use crate::cluster::Cluster;
use crate::model::cost::CostModel;
use crate::model::router::STATS_PERIOD_MS;
use crate::model::routing::LoadsCache;

/// What the live API's signatures name, so its callers need no internal module.
pub use crate::cluster::{ClusterError, ModelOptions, Rejection};
pub use crate::model::scheduler::RequestId;
use crate::rng::Seed;
use crate::serving::ServingConfig;
use crate::time::{SimDuration, SimTime};

/// A request as a server receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveRequest {
    pub input_tokens: u32,
    /// `max_tokens`; the request finishes after exactly this many tokens (`ignore_eos`).
    pub output_tokens: u32,
    /// `X-data-parallel-rank`, when the client pins the request to an engine.
    pub data_parallel_rank: Option<u32>,
}

/// One token streamed to a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmittedToken {
    pub request: RequestId,
    /// 0 for the first token.
    pub index: u32,
    pub finished: bool,
}

/// What one global step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepOutcome {
    /// When the step started (`max(now, end of the previous step)`).
    pub start: SimTime,
    /// How long the step takes; the server sleeps this long before streaming `tokens`.
    pub duration: SimDuration,
    /// Requests in the batch (prefill chunks and decodes), engine by engine in batch order.
    pub scheduled: Vec<RequestId>,
    pub tokens: Vec<EmittedToken>,
    /// Requests that finished in this step.
    pub finished: Vec<RequestId>,
    /// Requests pushed back to waiting by preemption while scheduling this step.
    pub preempted: Vec<RequestId>,
    /// Real tokens per Attention DP engine (the control payload's counts before padding, §3.4).
    pub tokens_per_engine: Vec<u32>,
    /// 1 without a DBO split, 2 with one (§4.2).
    pub stages: u32,
}

/// The simulated pair, stepped by a real-time server.
#[derive(Debug)]
pub struct LiveEngine {
    cluster: Cluster,
    /// End of the last step.
    free_at: SimTime,
    next_stats: SimTime,
}

impl LiveEngine {
    pub fn new(
        config: &ServingConfig,
        cost: CostModel,
        options: ModelOptions,
        seed: Seed,
    ) -> Result<LiveEngine, ClusterError> {
        Ok(LiveEngine {
            cluster: Cluster::new(config, cost, options, seed, LoadsCache::default())?,
            free_at: SimTime::ZERO,
            next_stats: SimTime::ZERO,
        })
    }

    /// Queues a request on an engine (DP routing of afd-spec §7.2 unless pinned).
    pub fn submit(&mut self, request: LiveRequest) -> Result<RequestId, Rejection> {
        self.cluster.admit(
            request.input_tokens,
            request.output_tokens,
            request.data_parallel_rank,
        )
    }

    /// The Attention DP engine a request was routed to (its `engine` metrics label).
    pub fn engine_of(&self, request: RequestId) -> u32 {
        self.cluster.engine_of(request)
    }

    /// Whether any request is waiting or running.
    pub fn has_work(&self) -> bool {
        self.cluster.has_work()
    }

    /// Runs the next global step at `now` (the caller's clock since it started) or when the previous
    /// step ends, whichever is later. `None` when there is nothing to run.
    pub fn next_step(&mut self, now: SimTime) -> Option<StepOutcome> {
        let start = now.max(self.free_at);
        while self.next_stats <= start {
            self.cluster.publish_stats();
            self.next_stats += SimDuration::from_ms(STATS_PERIOD_MS);
        }
        let end = self.cluster.begin_step(start, None)?.end;
        let batches = self.cluster.batches();
        let scheduled = batches
            .iter()
            .flat_map(|b| b.items.iter().map(|i| i.request))
            .collect();
        let preempted = batches
            .iter()
            .flat_map(|b| b.preempted_ids.iter().copied())
            .collect();
        let tokens_per_engine = self.cluster.shape().tokens.clone();
        let stages = self.cluster.shape().stages as u32;
        let mut tokens = Vec::new();
        let mut finished = Vec::new();
        self.cluster.finish_step(|token| {
            tokens.push(EmittedToken {
                request: token.request,
                index: token.token_index,
                finished: token.finished,
            });
            if token.finished {
                finished.push(token.request);
            }
        });
        self.free_at = end;
        Some(StepOutcome {
            start,
            duration: end - start,
            scheduled,
            tokens,
            finished,
            preempted,
            tokens_per_engine,
            stages,
        })
    }

    /// Drops a request between steps (the client went away); `false` when it already finished.
    pub fn abort(&mut self, request: RequestId) -> bool {
        self.cluster.abort(request)
    }

    /// Number of Attention DP engines.
    pub fn engines(&self) -> u32 {
        self.cluster.config().attention.dp
    }

    /// The longest request (prompt plus output tokens) [`LiveEngine::submit`] accepts.
    pub fn max_model_len(&self) -> u32 {
        self.cluster.max_model_len()
    }

    /// Tokens one engine's KV cache holds (whole blocks); a request longer than this is refused
    /// with [`Rejection::NoRoom`]. vLLM refuses to start when `max_model_len` exceeds it.
    pub fn kv_tokens_per_engine(&self) -> u64 {
        self.cluster.kv_tokens_per_engine()
    }

    /// Running and waiting requests per engine, as vLLM's `/metrics` gauges report them.
    pub fn queue_lengths(&self) -> Vec<(u64, u64)> {
        self.cluster.queue_lengths()
    }
}

#[cfg(test)]
mod tests;
