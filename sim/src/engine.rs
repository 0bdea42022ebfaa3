//! The discrete-event run: the `vllm bench serve` client, the pair (`cluster.rs`) and the metrics,
//! driven by one loop over one closed event enum.
//!
//! `run(config, workload, options)` is a pure function: same inputs and seed, same report, byte for
//! byte. Bounds (`max_events`, `horizon`) end a run with an outcome instead of hanging. Every handled
//! event is folded into an xxh3 event-log hash over `(time, kind, id)`; debug builds check the
//! invariants after each event (time monotonic, requests conserved, KV blocks within capacity).

use std::collections::VecDeque;

use xxhash_rust::xxh3::Xxh3;

use crate::cluster::{
    Cluster, ClusterError, ModelOptions, Rejection, RunSummary, StepMemo, StepRecord,
};
use crate::event::Event;
use crate::metrics::Metrics;
use crate::model::cost::CostModel;
use crate::model::router::STATS_PERIOD_MS;
use crate::model::routing::LoadsCache;
use crate::model::scheduler::{RequestId, TokenEvent};
use crate::model::workload::Workload;
use crate::pipeline::SpanSink;
use crate::queue::EventQueue;
use crate::rng::Seed;
use crate::serving::ServingConfig;
use crate::time::{SimDuration, SimTime};

/// How a run is bounded and what it records.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    pub seed: Seed,
    /// Stop handling events after this time.
    pub horizon: SimTime,
    /// Stop after this many events.
    pub max_events: u64,
    /// Record pipeline spans of steps that intersect this window.
    pub timeline_window: Option<(SimTime, SimTime)>,
    /// Keep a record of every step (for `--steps-csv`).
    pub record_steps: bool,
    pub model: ModelOptions,
    /// The front end's serial intake per request (vLLM's API server takes requests in one at a
    /// time on one event loop): a request reaches the engine this long after the front end is free
    /// of the ones before it. Zero (the default) hands every request to the engine as it is sent.
    pub frontend_intake: SimDuration,
    /// The front end's serial cost per streamed token (vLLM's API server turns each output into a
    /// server-sent event on the same event loop that takes requests in, and `vllm bench serve`'s
    /// client reads them one by one): a token reaches the client this long after the front end is
    /// free of the work before it. Zero (the default) delivers every token as the step emits it.
    pub frontend_token: SimDuration,
    /// The rest of a token's way to the client once the front end has made it an event (the HTTP
    /// response path, the hop back from the engine core): the client sees it, and frees the
    /// request's concurrency slot, this much later. It delays no step. Zero by default.
    pub frontend_latency: SimDuration,
    /// What `vllm bench serve`'s client spends opening one connection. Its aiohttp session keeps
    /// idle connections alive and starts the run with one (the metrics fetch just before it,
    /// vllm/benchmarks/serve.py `fetch_spec_decode_metrics`); a request sent when none is idle
    /// waits for a new one, and the requests sent at one instant (every prompt at once, or the
    /// first `--max-concurrency` of them) open theirs in one pass before any is written, so all of
    /// them reach the front end this long times their number after they were sent. A finished
    /// request's connection is idle again. Zero (the default) sends every request at once.
    pub client_connect: SimDuration,
    /// vLLM 0.26's asynchronous scheduling (on by default, vllm/config/vllm.py:1059-1107): the
    /// engine core schedules step n+1 while step n runs (a batch queue of two,
    /// vllm/v1/engine/core.py `step_with_batch_queue`), so a request that reaches the engine during
    /// step n first runs in step n+2. Off (the default) lets it join the next step.
    pub async_scheduling: bool,
    /// What the first step after the engine sat idle costs beyond its period (an engine profile's
    /// `idle_start_ns`): it delays that step and everything after it. Zero by default.
    pub idle_start: SimDuration,
    /// The fused-MoE kernels' token counts of the steps the server ran before this run (its
    /// warm-ups and earlier runs; `model::engine::kernel_history`): their kernels are compiled. A
    /// fresh server (empty, the default) has compiled only what its start-up ran.
    pub compiled_kernel_tokens: Vec<u32>,
    /// Every fused-MoE kernel specialization is compiled: a server past its first uses (the
    /// steady state; `predict --warm-kernels`). Off by default.
    pub kernels_warm: bool,
}

impl RunOptions {
    /// Defaults: a day of simulated time, 100 M events, nothing recorded.
    pub fn new(seed: Seed) -> RunOptions {
        RunOptions {
            seed,
            horizon: SimTime::ZERO + SimDuration::from_secs_f64(86_400.0),
            max_events: 100_000_000,
            timeline_window: None,
            record_steps: false,
            model: ModelOptions::default(),
            frontend_intake: SimDuration::ZERO,
            frontend_token: SimDuration::ZERO,
            frontend_latency: SimDuration::ZERO,
            client_connect: SimDuration::ZERO,
            async_scheduling: false,
            idle_start: SimDuration::ZERO,
            compiled_kernel_tokens: Vec::new(),
            kernels_warm: false,
        }
    }
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every request was served or failed.
    Completed,
    /// `max_events` was reached first.
    EventLimit,
    /// The next event lay past `horizon`.
    Horizon,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::EventLimit => "event_limit",
            Outcome::Horizon => "horizon",
        }
    }
}

/// Client-side life of one workload request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestTrace {
    pub id: Option<RequestId>,
    pub engine: Option<u32>,
    pub send: Option<SimTime>,
    pub first_token: Option<SimTime>,
    pub last_token: Option<SimTime>,
    pub finish: Option<SimTime>,
    pub tokens: u32,
    pub rejection: Option<Rejection>,
}

/// Everything a finished run knows, before it is turned into a report.
#[derive(Debug)]
pub struct RunResult {
    pub outcome: Outcome,
    pub events: u64,
    pub event_log_hash: u64,
    pub end: SimTime,
    pub metrics: Metrics,
    pub requests: Vec<RequestTrace>,
    pub steps: Vec<StepRecord>,
    pub spans: Option<SpanSink>,
    /// What the cluster left: totals, costs, the pipeline's shape, limit spans, step memo.
    pub summary: RunSummary,
}

/// The state of a run.
struct World<'w> {
    workload: &'w Workload,
    cluster: Cluster,
    queue: EventQueue<Event>,
    traces: Vec<RequestTrace>,
    /// Workload index of each admitted request, by `RequestId`.
    workload_of: Vec<u32>,
    client_waiting: VecDeque<u32>,
    in_flight: u32,
    sent: u64,
    done: u64,
    next_step: u64,
    metrics: Metrics,
    hash: Xxh3,
    last_time: SimTime,
    steps: Vec<StepRecord>,
    record_steps: bool,
    sink: Option<SpanSink>,
    stats_scheduled: bool,
    step_pending: bool,
    /// Per-request front-end intake ([`RunOptions::frontend_intake`]).
    intake: SimDuration,
    /// [`RunOptions::async_scheduling`].
    async_scheduling: bool,
    /// Requests that reached the engine while a step ran, under asynchronous scheduling: they are
    /// queued after the next step is planned.
    deferred: Vec<u32>,
    /// The tokens of the step that just ended are being delivered at its end: a request the client
    /// sends in reply (a concurrency slot freed) reaches the engine after the engine core scheduled
    /// the next step at that same instant, so it joins the step after, as [`Self::deferred`].
    replying: bool,
    /// Whether steps carry the engine core's host share (an engine profile prices them, under
    /// asynchronous scheduling): the next step is planned once the running one is issued, and a
    /// step's tokens leave once the step after it is issued.
    host_issue: bool,
    /// When the engine core's host finished (or will finish) issuing the step in flight: the next
    /// step is planned then, and a request reaching the engine later waits for the one after.
    issued: SimTime,
    /// Tokens of step `held.0` that leave the engine core at `held.1`, once the next step is issued.
    held: Option<(u64, SimTime)>,
    held_tokens: Vec<TokenEvent>,
    /// [`RunOptions::idle_start`].
    idle_start: SimDuration,
    /// Per-token front-end cost ([`RunOptions::frontend_token`]).
    token_cost: SimDuration,
    /// [`RunOptions::frontend_latency`].
    latency: SimDuration,
    /// When the front end is free of the requests taken in and the tokens delivered so far.
    frontend_free: SimTime,
    /// The client's keep-alive connections.
    connections: Connections,
    dp: bool,
}

/// `vllm bench serve`'s keep-alive connections ([`RunOptions::client_connect`]).
struct Connections {
    /// What opening one costs; at zero a new one carries its request at once.
    cost: SimDuration,
    /// Open and idle (the run starts with one, its `/metrics` fetch's).
    idle: u32,
    /// Requests sent at this instant that found none idle, in the order sent.
    opening: Vec<u32>,
}

impl Connections {
    /// The pool a run starts with: one idle connection, each new one costing `cost`.
    fn new(cost: SimDuration) -> Connections {
        Connections {
            cost,
            idle: 1,
            opening: Vec::new(),
        }
    }
}

/// Progress of a run, for progress bars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Requests finished or failed.
    pub done: u64,
    pub total: u64,
    pub now: SimTime,
}

/// Simulates `workload` on the deployment `config` priced by `cost`.
pub fn run(
    config: &ServingConfig,
    cost: CostModel,
    workload: &Workload,
    options: &RunOptions,
) -> Result<RunResult, ClusterError> {
    run_observed(config, cost, workload, options, &mut |_| {})
}

/// [`run`], calling `observe` every few thousand events (it cannot change the run).
pub fn run_observed(
    config: &ServingConfig,
    cost: CostModel,
    workload: &Workload,
    options: &RunOptions,
    observe: &mut dyn FnMut(Progress),
) -> Result<RunResult, ClusterError> {
    run_inner(config, cost, workload, options, observe, Shared::default())
}

/// What a run may take over from runs before it: the step memo of an earlier run of the same
/// pipeline, and the routing pools' cache of the runs it shares draws with. Neither changes a
/// result, only the time it takes.
#[derive(Default)]
struct Shared {
    memo: Option<StepMemo>,
    loads: LoadsCache,
}

/// [`run`], continuing from `memo` (the step memo of an earlier run of the same pipeline, see
/// `cluster/memo.rs`) and leaving this run's memo there for the next, and drawing routing pools
/// through `loads`, which the runs of one sweep share. The result is the same as [`run`]'s; only
/// the time it takes differs.
pub fn run_sharing_memo(
    config: &ServingConfig,
    cost: CostModel,
    workload: &Workload,
    options: &RunOptions,
    memo: &mut Option<StepMemo>,
    loads: &LoadsCache,
) -> Result<RunResult, ClusterError> {
    let shared = Shared {
        memo: memo.take(),
        loads: loads.clone(),
    };
    let mut result = run_inner(config, cost, workload, options, &mut |_| {}, shared)?;
    *memo = Some(result.summary.take_step_memo());
    Ok(result)
}

fn run_inner(
    config: &ServingConfig,
    cost: CostModel,
    workload: &Workload,
    options: &RunOptions,
    observe: &mut dyn FnMut(Progress),
    shared: Shared,
) -> Result<RunResult, ClusterError> {
    let host_issue = options.async_scheduling && cost.engine().is_some();
    let mut cluster = Cluster::new(config, cost, options.model, options.seed, shared.loads)?;
    cluster.mark_compiled(&options.compiled_kernel_tokens, options.kernels_warm);
    if let Some(memo) = shared.memo {
        cluster.adopt_step_memo(memo);
    }
    let dp = config.attention.dp > 1;
    let mut world = World {
        workload,
        cluster,
        queue: EventQueue::with_capacity(16),
        traces: vec![RequestTrace::default(); workload.requests.len()],
        workload_of: Vec::with_capacity(workload.requests.len()),
        client_waiting: VecDeque::new(),
        in_flight: 0,
        sent: 0,
        done: 0,
        next_step: 0,
        metrics: Metrics::new(),
        hash: Xxh3::new(),
        last_time: SimTime::ZERO,
        steps: Vec::new(),
        record_steps: options.record_steps,
        sink: options.timeline_window.map(|(a, b)| SpanSink {
            window: (a.as_ns(), b.as_ns()),
            spans: Vec::new(),
        }),
        stats_scheduled: false,
        step_pending: false,
        intake: options.frontend_intake,
        token_cost: options.frontend_token,
        latency: options.frontend_latency,
        async_scheduling: options.async_scheduling,
        deferred: Vec::new(),
        replying: false,
        host_issue,
        issued: SimTime::ZERO,
        held: None,
        held_tokens: Vec::new(),
        idle_start: options.idle_start,
        frontend_free: SimTime::ZERO,
        connections: Connections::new(options.client_connect),
        dp,
    };
    for (index, spec) in workload.requests.iter().enumerate() {
        let request = u32::try_from(index).expect("fewer than 4 billion requests");
        world
            .queue
            .schedule(spec.intended_send, Event::RequestIntended { request });
    }
    let mut events = 0u64;
    let mut outcome = Outcome::Completed;
    while let Some(at) = world.queue.peek_time() {
        if at > options.horizon {
            outcome = Outcome::Horizon;
            break;
        }
        if events >= options.max_events {
            outcome = Outcome::EventLimit;
            break;
        }
        let (now, event) = world.queue.pop().expect("peeked an event");
        events += 1;
        world.log(now, event);
        world.handle(now, event);
        debug_assert!(
            world.invariants_hold(now),
            "invariants broken at {now:?} after {event:?}"
        );
        world.last_time = now;
        if events.is_multiple_of(4096) {
            observe(Progress {
                done: world.done,
                total: workload.requests.len() as u64,
                now,
            });
        }
    }
    let event_log_hash = world.hash.digest();
    Ok(RunResult {
        outcome,
        events,
        event_log_hash,
        end: world.last_time,
        metrics: world.metrics,
        requests: world.traces,
        steps: world.steps,
        spans: world.sink,
        summary: world.cluster.into_summary(),
    })
}

impl World<'_> {
    fn log(&mut self, now: SimTime, event: Event) {
        self.hash.update(&now.as_ns().to_le_bytes());
        self.hash.update(&[event.kind()]);
        self.hash.update(&event.id().to_le_bytes());
    }

    fn handle(&mut self, now: SimTime, event: Event) {
        match event {
            Event::RequestIntended { request } => self.on_request_intended(now, request),
            Event::RequestAdmitted { request } => self.admit(now, request),
            Event::RequestDelivered { .. } => self.release(now),
            Event::StepStarted => self.on_step_started(now),
            Event::StepFinished { step } => self.on_step_finished(now, step),
            Event::StatsPublished => self.on_stats_published(now),
            Event::TokensEmitted { step } => self.on_tokens_emitted(now, step),
            Event::ConnectionsOpened => self.on_connections_opened(now),
        }
    }

    fn on_request_intended(&mut self, now: SimTime, request: u32) {
        let limit = self.workload.max_concurrency.unwrap_or(u32::MAX);
        if self.in_flight < limit {
            self.send(now, request);
        } else {
            self.client_waiting.push_back(request);
        }
        self.ensure_stats(now);
    }

    /// The client sends request `index` now: TTFT and E2EL are measured from here.
    fn send(&mut self, now: SimTime, index: u32) {
        self.in_flight += 1;
        self.sent += 1;
        self.traces[index as usize].send = Some(now);
        let pool = &mut self.connections;
        if pool.idle > 0 {
            pool.idle -= 1;
        } else if pool.cost > SimDuration::ZERO {
            if pool.opening.is_empty() {
                self.queue.schedule(now, Event::ConnectionsOpened);
            }
            pool.opening.push(index);
            return;
        }
        self.reach_front_end(now, now, index);
    }

    /// Every request sent at this instant has been handed its connection (the event runs after
    /// them): the client opened one for each request that found none idle, then wrote them all.
    fn on_connections_opened(&mut self, now: SimTime) {
        let opening = std::mem::take(&mut self.connections.opening);
        let count = u64::try_from(opening.len()).expect("fewer than 2^64 requests");
        let at = now + SimDuration::from_ns(self.connections.cost.as_ns() * count);
        for index in opening {
            self.reach_front_end(now, at, index);
        }
    }

    /// Request `index` reaches the front end at `at` (now or later): it hands the request to the
    /// engine once it has taken in the ones before it.
    fn reach_front_end(&mut self, now: SimTime, at: SimTime, index: u32) {
        if self.intake == SimDuration::ZERO {
            if at == now {
                self.admit(now, index);
            } else {
                self.queue
                    .schedule(at, Event::RequestAdmitted { request: index });
            }
        } else {
            let at = at.max(self.frontend_free) + self.intake;
            self.frontend_free = at;
            self.queue
                .schedule(at, Event::RequestAdmitted { request: index });
        }
    }

    /// The front end hands request `index` to the engine now: under asynchronous scheduling, once
    /// the step in flight is issued the step after it is planned, and the request waits for the one
    /// after that. A request sent in reply to a token delivered the instant a step ended waits
    /// for the step after the one the engine core scheduled then.
    fn admit(&mut self, now: SimTime, index: u32) {
        if self.replying
            || self.async_scheduling && self.cluster.is_stepping() && now >= self.issued
        {
            self.deferred.push(index);
        } else {
            self.hand_over(now, index);
        }
    }

    /// Queues request `index` at the engine's scheduler now.
    fn hand_over(&mut self, now: SimTime, index: u32) {
        let spec = self.workload.requests[index as usize];
        let trace = &mut self.traces[index as usize];
        match self
            .cluster
            .admit(spec.input_tokens, spec.output_tokens, None)
        {
            Ok(id) => {
                trace.id = Some(id);
                trace.engine = Some(self.cluster.engine_of(id));
                self.workload_of.push(index);
                if !self.cluster.is_stepping() && !self.step_pending {
                    self.step_pending = true;
                    self.queue.schedule(now, Event::StepStarted);
                }
            }
            Err(rejection) => {
                trace.rejection = Some(rejection);
                self.metrics.failed += 1;
                self.release(now);
            }
        }
    }

    /// A request left the client (finished or failed): free its concurrency slot.
    fn release(&mut self, now: SimTime) {
        self.in_flight -= 1;
        self.done += 1;
        self.connections.idle += 1;
        if let Some(next) = self.client_waiting.pop_front() {
            self.send(now, next);
        }
    }

    fn on_step_started(&mut self, now: SimTime) {
        self.step_pending = false;
        if !self.cluster.is_stepping() {
            self.start_step(now, None, self.idle_start);
        }
    }

    /// Begins the next step now, its GPU work after the last one's. `planned_at` is when the host
    /// planned it, while the last step ran (asynchronous scheduling), `None` when it is planned
    /// now; `idle` is what it costs beyond its period because the engine sat idle. Returns when the
    /// host has issued it, if a step began.
    fn start_step(
        &mut self,
        now: SimTime,
        planned_at: Option<SimTime>,
        idle: SimDuration,
    ) -> Option<SimTime> {
        let sink = match self.sink.as_mut() {
            Some(sink) if now.as_ns() <= sink.window.1 => Some(sink),
            _ => None,
        };
        let record = self.cluster.begin_step(now, sink)?;
        let step = self.next_step;
        self.next_step += 1;
        // The host issued the step from when it planned it, beside the last step's kernels
        // (vllm/v1/engine/core.py `step_with_batch_queue`): a host-bound step ends once issued, and
        // not before its own kernels ran after the last step's.
        let from = if self.host_issue { planned_at } else { None };
        let issued = (from.unwrap_or(now) + record.host + idle).max(now);
        let end = if self.host_issue && record.host > SimDuration::ZERO {
            (now + idle + record.kernels).max(issued)
        } else {
            record.end + idle
        };
        self.issued = issued;
        self.queue.schedule(end, Event::StepFinished { step });
        if self.record_steps {
            let mut kept = record.clone();
            kept.end = end;
            self.steps.push(kept);
        }
        Some(issued)
    }

    /// The held tokens of step `step` leave the engine core now.
    fn on_tokens_emitted(&mut self, now: SimTime, step: u64) {
        if self.held.is_some_and(|(held, _)| held == step) {
            self.release_held(now);
        }
    }

    /// Delivers the tokens held for the next step's issue, at the time they left the engine core
    /// (requests sent meanwhile wait for the step that starts after delivery).
    fn release_held(&mut self, now: SimTime) {
        if let Some((_, at)) = self.held.take() {
            debug_assert!(at <= now, "held tokens delivered late");
            let tokens = std::mem::take(&mut self.held_tokens);
            self.step_pending = true;
            for &token in &tokens {
                self.on_token(at, token);
            }
            self.step_pending = false;
            self.held_tokens = tokens;
            self.held_tokens.clear();
        }
    }

    fn on_step_finished(&mut self, now: SimTime, step: u64) {
        // Tokens of the step before leave no later than this step ends.
        self.release_held(now);
        if self.host_issue {
            self.finish_issued(now, step);
            return;
        }
        let mut emitted: Vec<TokenEvent> = Vec::new();
        self.cluster.finish_step(|token| emitted.push(token));
        // Requests sent in reply to these tokens reach the engine after it scheduled the next step:
        // its scheduler runs the instant the step's output is processed (vllm/v1/engine/core.py
        // `step`), before any client has the tokens.
        self.step_pending = true;
        self.replying = true;
        for token in emitted {
            self.on_token(now, token);
        }
        self.replying = false;
        self.step_pending = false;
        // The step planned while the last one ran starts; what reached the engine meanwhile (under
        // asynchronous scheduling) waits for the step after it, unless nothing was planned, when the
        // engine core schedules the newcomers at once.
        let planned = self.cluster.has_work();
        if planned {
            self.start_step(now, None, SimDuration::ZERO);
        }
        self.hand_over_deferred(now, planned);
    }

    /// What reached the engine while the last step ran (under asynchronous scheduling) waits for
    /// the step after the one planned meanwhile, unless nothing was planned, when the engine core
    /// schedules the newcomers at once.
    fn hand_over_deferred(&mut self, now: SimTime, planned: bool) {
        let deferred = std::mem::take(&mut self.deferred);
        self.step_pending = true;
        for index in deferred {
            self.hand_over(now, index);
        }
        self.step_pending = false;
        if !planned && self.cluster.has_work() {
            self.start_step(now, None, SimDuration::ZERO);
        }
    }

    /// [`Self::on_step_finished`] where steps carry the host's share: the step planned while this
    /// one ran was being issued from when this one was (vLLM's batch queue of two), and this step's
    /// tokens leave the engine core once that step is issued (`step_with_batch_queue` waits for
    /// step n's output only after issuing step n+1), at once when nothing was planned.
    fn finish_issued(&mut self, now: SimTime, step: u64) {
        let mut emitted = std::mem::take(&mut self.held_tokens);
        self.cluster.finish_step(|token| emitted.push(token));
        let planned_at = self.issued.min(now);
        let planned = self.cluster.has_work();
        let leave = if planned {
            self.start_step(now, Some(planned_at), SimDuration::ZERO)
                .map_or(now, |issued| issued.max(now))
        } else {
            now
        };
        self.held_tokens = emitted;
        self.held = Some((step, leave));
        if leave > now {
            self.queue.schedule(leave, Event::TokensEmitted { step });
        } else {
            self.release_held(now);
        }
        self.hand_over_deferred(now, planned);
    }

    fn on_token(&mut self, emitted: SimTime, token: TokenEvent) {
        // The client sees the token once the front end has turned it into an event.
        let delivered = if self.token_cost == SimDuration::ZERO {
            emitted
        } else {
            let at = emitted.max(self.frontend_free) + self.token_cost;
            self.frontend_free = at;
            at
        };
        let now = delivered + self.latency;
        let index = self.workload_of[token.request.index()] as usize;
        let trace = &mut self.traces[index];
        let send = trace.send.expect("a request with tokens was sent");
        if token.token_index == 0 {
            trace.first_token = Some(now);
            self.metrics.record_ttft(now - send);
        } else {
            let last = trace
                .last_token
                .expect("a later token follows an earlier one");
            self.metrics.record_itl(now - last);
        }
        trace.last_token = Some(now);
        trace.tokens += 1;
        if token.finished {
            trace.finish = Some(now);
            let spec = self.workload.requests[index];
            let first = trace
                .first_token
                .expect("finished requests have a first token");
            self.metrics.record_finished(
                spec.input_tokens,
                trace.tokens,
                now - send,
                first - send,
                now,
            );
            if now == emitted {
                self.release(now);
            } else {
                let request = u32::try_from(index).expect("fewer than 4 billion requests");
                self.queue
                    .schedule(now, Event::RequestDelivered { request });
            }
        }
    }

    fn ensure_stats(&mut self, now: SimTime) {
        if self.dp && !self.stats_scheduled {
            self.stats_scheduled = true;
            self.queue.schedule(
                now + SimDuration::from_ms(STATS_PERIOD_MS),
                Event::StatsPublished,
            );
        }
    }

    fn on_stats_published(&mut self, now: SimTime) {
        self.stats_scheduled = false;
        self.cluster.publish_stats();
        let outstanding = self.done < self.workload.requests.len() as u64;
        if outstanding {
            self.ensure_stats(now);
        }
    }

    fn invariants_hold(&self, now: SimTime) -> bool {
        now >= self.last_time
            && self.sent == self.done + u64::from(self.in_flight)
            && self.cluster.invariants_hold()
    }
}

#[cfg(test)]
mod tests;
