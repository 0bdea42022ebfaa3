//! The vLLM V1 scheduler of one Attention DP engine (`vllm/v1/core/sched/scheduler.py`, FCFS).
//!
//! Each step: first the running requests in order (a decode is one token, a partially prefilled
//! request continues its prompt in chunks), then waiting requests while the token budget
//! (`max_num_batched_tokens`) and `max_num_seqs` allow, each prefill chunked to the remaining
//! budget (chunked prefill, decode first, afd-spec §8.1). When KV blocks run out, the
//! lowest-priority running request (the last one) is preempted by recompute: its blocks are freed,
//! its computed tokens reset, and it goes back to the front of the waiting queue; no new request is
//! admitted in a step that preempted. A request emits one token whenever a step finishes its known
//! tokens (a completed prefill or a decode) and finishes after its output length (`ignore_eos`).
//!
//! Every comparison against `max_num_seqs` or `max_num_batched_tokens` goes through a
//! [`Span`](crate::model::limits::Span), which records the limit values that agree with it
//! (`limits.rs`); the KV cache does the same for its capacity.

use std::collections::VecDeque;

use crate::model::kv_cache::KvCache;
use crate::model::limits::{LimitSpans, Span};

/// Index of a request in the run's arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u32);

impl RequestId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Where a request is in its engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestStatus {
    Waiting,
    Running,
    Finished,
}

/// Scheduler-side state of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestState {
    pub prompt_tokens: u32,
    pub max_output_tokens: u32,
    /// Output tokens generated so far.
    pub output_tokens: u32,
    /// Tokens whose KV is computed (prompt and generated tokens alike; reset by preemption).
    pub computed_tokens: u32,
    pub blocks: u32,
    pub status: RequestStatus,
    pub preemptions: u32,
}

impl RequestState {
    pub fn new(prompt_tokens: u32, max_output_tokens: u32) -> RequestState {
        RequestState {
            prompt_tokens,
            max_output_tokens,
            output_tokens: 0,
            computed_tokens: 0,
            blocks: 0,
            status: RequestStatus::Waiting,
            preemptions: 0,
        }
    }

    /// Tokens the request knows: prompt plus generated output.
    pub fn known_tokens(&self) -> u32 {
        self.prompt_tokens + self.output_tokens
    }
}

/// Batch limits of an engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedulerLimits {
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
}

/// One request's share of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduledItem {
    pub request: RequestId,
    pub new_tokens: u32,
    /// Tokens already in the KV cache before this step.
    pub context_before: u32,
}

impl ScheduledItem {
    /// A one-token step of a request (vLLM's uniform-decode test looks only at the token count).
    pub fn is_single_token(&self) -> bool {
        self.new_tokens == 1
    }
}

/// What one engine runs in one step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineBatch {
    pub items: Vec<ScheduledItem>,
    pub tokens: u32,
    /// Requests preempted while scheduling this step.
    pub preempted: u32,
    /// Which requests were preempted, in order.
    pub preempted_ids: Vec<RequestId>,
}

impl EngineBatch {
    pub fn clear(&mut self) {
        self.items.clear();
        self.tokens = 0;
        self.preempted = 0;
        self.preempted_ids.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds `new_tokens` of `request` (whose state is `state`) and returns them, for the budget.
    fn push(&mut self, request: RequestId, new_tokens: u32, state: &RequestState) -> u32 {
        self.items.push(ScheduledItem {
            request,
            new_tokens,
            context_before: state.computed_tokens,
        });
        self.tokens += new_tokens;
        new_tokens
    }

    /// Every request schedules exactly one token (vLLM uniform decode, afd-spec §5.1).
    pub fn is_uniform_decode(&self) -> bool {
        self.items.iter().all(ScheduledItem::is_single_token)
    }
}

/// The scheduler of one engine.
#[derive(Clone, Debug)]
pub struct EngineScheduler {
    limits: SchedulerLimits,
    kv: KvCache,
    waiting: VecDeque<RequestId>,
    running: Vec<RequestId>,
    seqs_span: Span,
    tokens_span: Span,
}

/// What finishing a step did to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenEvent {
    pub request: RequestId,
    /// Index of the emitted output token (0 = first token).
    pub token_index: u32,
    pub finished: bool,
}

impl EngineScheduler {
    pub fn new(limits: SchedulerLimits, kv: KvCache) -> EngineScheduler {
        EngineScheduler {
            limits,
            kv,
            waiting: VecDeque::new(),
            running: Vec::new(),
            seqs_span: Span::ALL,
            tokens_span: Span::ALL,
        }
    }

    /// The limit values for which every comparison this engine made would have come out the same.
    pub fn spans(&self) -> LimitSpans {
        LimitSpans {
            max_num_seqs: self.seqs_span,
            max_num_batched_tokens: self.tokens_span,
            kv_blocks: self.kv.span(),
        }
    }

    pub fn kv(&self) -> &KvCache {
        &self.kv
    }

    pub fn waiting_len(&self) -> usize {
        self.waiting.len()
    }

    pub fn running_len(&self) -> usize {
        self.running.len()
    }

    pub fn has_work(&self) -> bool {
        !self.waiting.is_empty() || !self.running.is_empty()
    }

    /// Whether a request of `tokens` total tokens could ever fit in this engine's KV cache.
    pub fn fits(&mut self, tokens: u32) -> bool {
        self.kv.fits(tokens)
    }

    /// Queues a new request.
    pub fn add(&mut self, request: RequestId) {
        self.waiting.push_back(request);
    }

    /// Schedules one step into `batch` (cleared first).
    pub fn schedule(&mut self, requests: &mut [RequestState], batch: &mut EngineBatch) {
        batch.clear();
        let max_tokens = u64::from(self.limits.max_num_batched_tokens);
        let max_seqs = u64::from(self.limits.max_num_seqs);
        // Tokens of the budget taken so far (the budget left is `max_tokens - used`).
        let mut used = 0u64;
        let mut index = 0;
        while index < self.running.len() && self.tokens_span.above(max_tokens, used) {
            let id = self.running[index];
            let state = &requests[id.index()];
            let need = state.known_tokens().saturating_sub(state.computed_tokens);
            let new_tokens = self.chunk(max_tokens, used, need);
            if new_tokens == 0 {
                index += 1;
                continue;
            }
            let mut scheduled = false;
            loop {
                let state = &requests[id.index()];
                if let Some(blocks) = self
                    .kv
                    .grow(state.blocks, state.computed_tokens + new_tokens)
                {
                    requests[id.index()].blocks = blocks;
                    scheduled = true;
                    break;
                }
                let victim = self
                    .running
                    .pop()
                    .expect("the request being scheduled is running");
                self.preempt(requests, victim);
                batch.preempted += 1;
                batch.preempted_ids.push(victim);
                if victim == id {
                    break;
                }
            }
            if !scheduled {
                break;
            }
            used += u64::from(batch.push(id, new_tokens, &requests[id.index()]));
            index += 1;
        }
        if batch.preempted == 0 {
            // The queue is looked at first: with nobody waiting, the limits decide nothing.
            while let Some(&id) = self.waiting.front() {
                if !self.tokens_span.above(max_tokens, used)
                    || !self.seqs_span.above(max_seqs, self.running.len() as u64)
                {
                    break;
                }
                let state = &requests[id.index()];
                let need = state.known_tokens().saturating_sub(state.computed_tokens);
                let new_tokens = self.chunk(max_tokens, used, need);
                let Some(blocks) = self
                    .kv
                    .grow(state.blocks, state.computed_tokens + new_tokens)
                else {
                    break;
                };
                self.waiting.pop_front();
                let state = &mut requests[id.index()];
                state.blocks = blocks;
                state.status = RequestStatus::Running;
                self.running.push(id);
                used += u64::from(batch.push(id, new_tokens, state));
            }
        }
    }

    /// `need` cut to the token budget left after `used` (chunked prefill).
    fn chunk(&mut self, max_tokens: u64, used: u64, need: u32) -> u32 {
        let tokens = self.tokens_span.chunk(max_tokens, used, u64::from(need));
        u32::try_from(tokens).expect("a chunk is at most the request's own tokens")
    }

    fn preempt(&mut self, requests: &mut [RequestState], victim: RequestId) {
        let state = &mut requests[victim.index()];
        self.kv.release(state.blocks);
        state.blocks = 0;
        state.computed_tokens = 0;
        state.status = RequestStatus::Waiting;
        state.preemptions += 1;
        self.waiting.push_front(victim);
    }

    /// Applies a finished step: advances computed tokens, emits one token for every request whose
    /// known tokens are now all computed, and retires requests that reached their output length.
    pub fn finish_step(
        &mut self,
        requests: &mut [RequestState],
        batch: &EngineBatch,
        mut on_token: impl FnMut(TokenEvent),
    ) {
        let mut any_finished = false;
        for item in &batch.items {
            let state = &mut requests[item.request.index()];
            state.computed_tokens += item.new_tokens;
            if state.computed_tokens < state.known_tokens() {
                continue;
            }
            let token_index = state.output_tokens;
            state.output_tokens += 1;
            let finished = state.output_tokens >= state.max_output_tokens;
            if finished {
                state.status = RequestStatus::Finished;
                self.kv.release(state.blocks);
                state.blocks = 0;
                any_finished = true;
            }
            on_token(TokenEvent {
                request: item.request,
                token_index,
                finished,
            });
        }
        if any_finished {
            self.running
                .retain(|id| requests[id.index()].status != RequestStatus::Finished);
        }
    }

    /// Drops a request (its client went away): frees its blocks and forgets it. Returns whether the
    /// engine had it. Must not be called while a step that scheduled it is in flight.
    pub fn abort(&mut self, requests: &mut [RequestState], id: RequestId) -> bool {
        let state = &mut requests[id.index()];
        if state.status == RequestStatus::Finished {
            return false;
        }
        let before = self.waiting.len() + self.running.len();
        self.waiting.retain(|&r| r != id);
        self.running.retain(|&r| r != id);
        if before == self.waiting.len() + self.running.len() {
            return false;
        }
        self.kv.release(state.blocks);
        state.blocks = 0;
        state.status = RequestStatus::Finished;
        true
    }

    pub fn invariants_hold(&self, requests: &[RequestState]) -> bool {
        let held: u64 = self
            .running
            .iter()
            .map(|id| u64::from(requests[id.index()].blocks))
            .sum();
        self.kv.invariants_hold()
            && held == self.kv.used_blocks()
            && self.running.len() as u32 <= self.limits.max_num_seqs
    }
}

#[cfg(test)]
mod tests;
