//! The simulated AFD pair without a clock: Attention DP engines (router, schedulers, KV caches),
//! the step shape, the cost of each operation and the layer pipeline, stepped one global step at a
//! time. The discrete-event engine (`engine.rs`) and the real-time `LiveEngine` (`live.rs`) both
//! drive this one model.
//!
//! A global step couples every Attention DP engine and FFN rank (afd-spec §3.5, §3.7, §3.8): it
//! starts when the previous one ended (or when work arrives at an idle pair), schedules every
//! engine, agrees on a shape (`step.rs`), prices it, runs the pipeline (`pipeline.rs`), and at its
//! end every scheduled request advances and emits its token.

use rand::RngExt;

use crate::closed_form::{ClosedFormTotals, DecodeStep};
use crate::colocated::{ColocatedModel, weight_bytes_per_gpu};
use crate::model::arch::{KvLayout, ModelArch};
use crate::model::cost::{CostModel, OpClass, PriceBook, UsageCounts};
use crate::model::kv_cache::{KvCache, capacity_blocks};
use crate::model::limits::LimitSpans;
use crate::model::router::DpRouter;
use crate::model::routing::{LoadsCache, RoutingPools};
use crate::model::scheduler::{
    EngineBatch, EngineScheduler, RequestId, RequestState, SchedulerLimits, TokenEvent,
};
use crate::model::workload::{ExpertPopularity, ExpertSampler};
use crate::pipeline::{
    FfnCollective, PipelineLayout, PipelineState, SpanSink, StepCosts, StepTiming, Sweep, run_step,
};
use crate::pricing::{FfnRows, PriceScratch, StepInputs, StepScope, price_step};
use crate::rng::{RngStream, Seed, SimRng, stream};
use crate::serving::{Placement, ServingConfig, ServingConfigError};
use crate::step::{StepShape, plan_step};
use crate::time::{SimDuration, SimTime};
use memo::Accounted;

/// Routing pool size: sampled routings kept per distinct row count.
pub const ROUTING_POOL_SIZE: usize = 16;

/// Knobs of the model that are not part of the deployment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelOptions {
    pub popularity: ExpertPopularity,
    /// Use the periodic shortcut in the layer sweep (exact; off only to test it).
    pub periodic_shortcut: bool,
    /// Replay steps whose inputs were seen before from the step memo (`cluster/memo.rs`; exact,
    /// off only to test it).
    pub step_memo: bool,
}

impl Default for ModelOptions {
    fn default() -> ModelOptions {
        ModelOptions {
            popularity: ExpertPopularity::Uniform,
            periodic_shortcut: true,
            step_memo: true,
        }
    }
}

/// Why a deployment cannot serve a model.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ClusterError {
    #[error(transparent)]
    Config(#[from] ServingConfigError),
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    #[error(
        "the KV cache of an Attention rank has no room: {memory_gib:.1} GiB x {utilization} leaves nothing after {weights_gib:.1} GiB of weights and {reserve_gib:.1} GiB reserved"
    )]
    NoKvCache {
        memory_gib: f64,
        utilization: f64,
        weights_gib: f64,
        reserve_gib: f64,
    },
    #[error("model {model} has {experts} routed experts, fewer than its top-{top_k}")]
    Experts {
        model: String,
        experts: u32,
        top_k: u32,
    },
}

/// Why one request is refused at admission (vLLM answers HTTP 400 and the client counts a failure).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("prompt of {prompt} tokens plus {output} output tokens exceeds max_model_len {max}")]
    TooLong { prompt: u32, output: u32, max: u32 },
    #[error("request of {tokens} tokens needs more KV blocks than an engine has")]
    NoRoom { tokens: u32 },
    #[error("data-parallel rank {rank} is out of range for {engines} engines")]
    BadRank { rank: u32, engines: u32 },
}

/// Which resource bounded a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Regime {
    #[default]
    Attention,
    Ffn,
    Transfer,
}

/// Summary of one finished global step.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepRecord {
    pub index: u64,
    pub start: SimTime,
    pub end: SimTime,
    /// How long from `start` the engine core's host is busy issuing the step (an engine profile's
    /// `EngineStepCost::host_ns`; zero where the GPU sets the pace).
    pub host: SimDuration,
    /// What the step's kernels take alone (`StepTiming::kernels`; zero without an engine profile).
    pub kernels: SimDuration,
    pub graph: bool,
    pub ffn_graph: bool,
    pub stages: u32,
    pub tokens: Vec<u32>,
    pub padded: Vec<u32>,
    /// The busiest device.
    pub regime: Regime,
    /// The host's issue set the step's pace, not `regime`'s device: an engine profile prices the
    /// step as its host's, or no engine profile prices it and the sweep's longest host issue
    /// outlasts every device's busy time.
    pub host_bound: bool,
    /// Fraction of the overlappable time actually hidden, in `[0, 1]`.
    pub overlap: f64,
    pub attention_busy_ns: u64,
    pub ffn_busy_ns: u64,
    pub transfer_busy_ns: u64,
}

/// Totals over a run, for the report.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClusterTotals {
    pub steps: u64,
    pub graph_steps: u64,
    pub eager_steps: u64,
    pub ffn_graph_steps: u64,
    pub dbo_steps: u64,
    pub dbo_hazards: u64,
    /// Steps bound by each device kind, and by the host's issue (`StepRecord::host_bound`, counted
    /// there and not by device).
    pub regime_attention: u64,
    pub regime_ffn: u64,
    pub regime_transfer: u64,
    pub regime_host: u64,
    pub overlap_sum_dbo: f64,
    pub overlap_sum_single: f64,
    pub attention_busy_ns: u64,
    pub ffn_busy_ns: u64,
    pub link_busy_ns: u64,
    pub padded_rows: u64,
    pub real_rows: u64,
    pub preemptions: u64,
    pub shortcut_layers: u64,
    pub oversized_messages: u64,
    /// Closed-form cross-checks over the decode steps (AFD only).
    pub closed_form: ClosedFormTotals,
}

/// NCCL's default buffer; sends larger than this are no longer fully buffered [inferred; counted].
pub const NCCL_BUFFER_BYTES: u64 = 4 << 20;

/// What a finished run's cluster leaves for its report and for the runs after it: totals, the cost
/// model and the usage counts of its prices, the pipeline's shape, the KV cache's size, each
/// request's preemptions, the limit spans and the step memo; the schedulers, the price memo and
/// scratch state are gone.
#[derive(Debug)]
pub struct RunSummary {
    pub totals: ClusterTotals,
    pub cost: CostModel,
    /// What the run asked `cost`, per operation class (the report's cost sources).
    pub usage: UsageCounts,
    pub layout: PipelineLayout,
    /// Tokens of one KV block ([`Cluster::kv_block_size`]).
    pub kv_block_size: u32,
    pub kv_blocks_per_engine: u64,
    /// Preemptions of each admitted request, by [`RequestId`] index.
    pub preemptions: Vec<u32>,
    /// [`Cluster::limit_spans`] at the end of the run.
    pub limit_spans: LimitSpans,
    /// The step memo, for the next run of the same pipeline (`cluster/memo.rs`).
    memo: StepMemo,
}

impl RunSummary {
    pub fn model(&self) -> &ModelArch {
        self.cost.model()
    }

    /// Preemptions of request `id`.
    pub fn preemptions_of(&self, id: RequestId) -> u32 {
        self.preemptions[id.index()]
    }

    /// The step memo, for the next run of the same pipeline; this summary keeps an empty one.
    pub fn take_step_memo(&mut self) -> StepMemo {
        let context = self.memo.context;
        std::mem::replace(&mut self.memo, StepMemo::new(context))
    }
}

/// The Attention + FFN pair being simulated.
#[derive(Debug)]
pub struct Cluster {
    config: ServingConfig,
    cost: CostModel,
    /// What this run asked `cost`: usage counts and the price memo.
    prices: PriceBook,
    layout: PipelineLayout,
    state: PipelineState,
    sweep: Sweep,
    engines: Vec<EngineScheduler>,
    batches: Vec<EngineBatch>,
    requests: Vec<RequestState>,
    engine_of: Vec<u32>,
    router: DpRouter,
    api_rng: SimRng,
    routing: Option<RoutingPools>,
    /// The baseline's step model when the deployment is colocated (no AFD pipeline then).
    colocated: Option<ColocatedModel>,
    scratch: PriceScratch,
    /// Scratch: the FFN rows per stage and rank of the step being priced.
    ffn_rows: FfnRows,
    /// Scratch: routed-expert time per (stage, MoE layer, FFN rank) of the step being priced.
    routed: Vec<crate::time::SimDuration>,
    shape: StepShape,
    costs: StepCosts,
    timing: StepTiming,
    totals: ClusterTotals,
    max_model_len: u32,
    in_step: bool,
    step_start: u64,
    options: ModelOptions,
    last: Option<StepRecord>,
    memo: StepMemo,
}

impl Cluster {
    /// Builds the pair for a validated configuration.
    /// `loads` is the routing pools' cache ([`LoadsCache`]): a fresh one for a lone run, one clone
    /// per run for runs that share their draws (a sweep's candidates).
    pub fn new(
        config: &ServingConfig,
        cost: CostModel,
        options: ModelOptions,
        seed: Seed,
        loads: LoadsCache,
    ) -> Result<Cluster, ClusterError> {
        config.validate()?;
        let colocated = config.placement == Placement::Colocated;
        let model = cost.model().clone();
        let layout = pipeline_layout(config, &model)?;
        let engines = engine_schedulers(config, &model, &cost)?;
        let engine_count = config.attention.dp as usize;
        let routing = routing_pools(config, &model, options, seed, loads)?;
        let max_model_len = config
            .max_model_len
            .unwrap_or(model.max_position_embeddings());
        let memo_context = memo_context(config, &layout, &cost, seed, options, &model);
        Ok(Cluster {
            config: config.clone(),
            state: PipelineState::new(&layout),
            layout,
            cost,
            prices: PriceBook::new(),
            sweep: Sweep::new(),
            engines,
            batches: vec![EngineBatch::default(); engine_count],
            requests: Vec::new(),
            engine_of: Vec::new(),
            router: DpRouter::new(config.attention.dp),
            api_rng: stream(seed, RngStream::ApiServers),
            routing,
            colocated: colocated.then(|| ColocatedModel::new(config, &model)),
            scratch: PriceScratch::default(),
            ffn_rows: FfnRows::default(),
            routed: Vec::new(),
            shape: StepShape::default(),
            costs: StepCosts::default(),
            timing: StepTiming::default(),
            totals: ClusterTotals::default(),
            max_model_len,
            in_step: false,
            step_start: 0,
            options,
            last: None,
            memo: StepMemo::new(memo_context),
        })
    }

    /// The run is over: what its report and the runs after it need.
    pub fn into_summary(self) -> RunSummary {
        RunSummary {
            kv_block_size: self.kv_block_size(),
            kv_blocks_per_engine: self.kv_blocks_per_engine(),
            limit_spans: self.limit_spans(),
            preemptions: self.requests.iter().map(|r| r.preemptions).collect(),
            totals: self.totals,
            cost: self.cost,
            usage: *self.prices.usage(),
            layout: self.layout,
            memo: self.memo,
        }
    }

    /// A step that first needs a fused-MoE kernel specialization waits for vLLM to compile it (the
    /// engine profile's `jit_compile_ns`), held on the host: added after the step memo, as it
    /// depends on what ran before the step.
    fn first_use_stall(&mut self) {
        let compile_ns = self.cost.engine().map_or(0, |e| e.profile().jit_compile_ns);
        if compile_ns > 0
            && let Some(colocated) = &mut self.colocated
        {
            let stall = colocated.jit_stall(&self.shape, compile_ns);
            self.timing.end += stall;
            self.timing.host += stall;
        }
    }

    /// Marks the fused-MoE kernels of steps of these token counts compiled on every engine of a
    /// plain server (`RunOptions::compiled_kernel_tokens`), or with `warm` every one
    /// (`RunOptions::kernels_warm`).
    pub fn mark_compiled(&mut self, kernel_tokens: &[u32], warm: bool) {
        if let Some(colocated) = &mut self.colocated {
            colocated.compiled(kernel_tokens);
            if warm {
                colocated.warm_kernels();
            }
        }
    }

    /// Continues from `memo`, a memo of an earlier run, when it was made for the same pipeline
    /// (else it is dropped). Call before the first step.
    pub fn adopt_step_memo(&mut self, memo: StepMemo) {
        if memo.context == self.memo.context && self.totals.steps == 0 {
            self.memo = memo;
            self.memo.generation += 1;
        }
    }

    pub fn config(&self) -> &ServingConfig {
        &self.config
    }

    pub fn cost(&self) -> &CostModel {
        &self.cost
    }

    /// What the run has asked its cost model so far, per operation class.
    pub fn usage(&self) -> &UsageCounts {
        self.prices.usage()
    }

    pub fn layout(&self) -> &PipelineLayout {
        &self.layout
    }

    pub fn totals(&self) -> &ClusterTotals {
        &self.totals
    }

    pub fn request(&self, id: RequestId) -> &RequestState {
        &self.requests[id.index()]
    }

    pub fn engine_of(&self, id: RequestId) -> u32 {
        self.engine_of[id.index()]
    }

    /// KV blocks per engine.
    pub fn kv_blocks_per_engine(&self) -> u64 {
        self.engines[0].kv().total_blocks()
    }

    /// Tokens of one KV block per engine: the configured block size, or more for a hybrid model
    /// ([`kv_layout`]).
    pub fn kv_block_size(&self) -> u32 {
        self.engines[0].kv().block_size()
    }

    /// The longest request one engine's KV cache holds, tokens (whole blocks, after a hybrid
    /// model's states).
    pub fn kv_tokens_per_engine(&self) -> u64 {
        self.engines[0].kv().tokens_capacity()
    }

    /// The values of `--max-num-seqs`, `--max-num-batched-tokens` and the KV capacity (blocks per
    /// engine) for which every comparison this run made against them, in every engine, would have
    /// come out the same (`model/limits.rs`): with any such values the run is identical.
    pub fn limit_spans(&self) -> LimitSpans {
        self.engines
            .iter()
            .fold(LimitSpans::ALL, |spans, e| spans.intersect(e.spans()))
    }

    /// The longest request (prompt plus output tokens) [`Cluster::admit`] accepts: `--max-model-len`,
    /// or the model's `max_position_embeddings`.
    pub fn max_model_len(&self) -> u32 {
        self.max_model_len
    }

    /// Whether any engine has a request waiting or running.
    pub fn has_work(&self) -> bool {
        self.engines.iter().any(EngineScheduler::has_work)
    }

    pub fn is_stepping(&self) -> bool {
        self.in_step
    }

    /// Admits a request: checks it can ever be served, routes it to an engine (afd-spec §7.2, or
    /// `pinned` as `X-data-parallel-rank` does) and queues it.
    pub fn admit(
        &mut self,
        input_tokens: u32,
        output_tokens: u32,
        pinned: Option<u32>,
    ) -> Result<RequestId, Rejection> {
        let total = input_tokens.saturating_add(output_tokens);
        if total > self.max_model_len {
            return Err(Rejection::TooLong {
                prompt: input_tokens,
                output: output_tokens,
                max: self.max_model_len,
            });
        }
        if !self.engines[0].fits(total) {
            return Err(Rejection::NoRoom { tokens: total });
        }
        let engines = self.engines.len() as u32;
        let engine = match pinned {
            Some(rank) if rank >= engines => return Err(Rejection::BadRank { rank, engines }),
            Some(rank) => rank,
            None if engines == 1 => 0,
            None => {
                let client = self.api_rng.random_range(0..self.router.clients());
                self.router.route(client)
            }
        };
        let id =
            RequestId(u32::try_from(self.requests.len()).expect("fewer than 4 billion requests"));
        self.requests
            .push(RequestState::new(input_tokens, output_tokens));
        self.engine_of.push(engine);
        self.engines[engine as usize].add(id);
        Ok(id)
    }

    /// `(waiting, running)` per engine.
    pub fn queue_lengths(&self) -> Vec<(u64, u64)> {
        self.engines
            .iter()
            .map(|e| (e.waiting_len() as u64, e.running_len() as u64))
            .collect()
    }

    /// The coordinator's stats publication (afd-spec §7.2); returns whether the counts changed.
    pub fn publish_stats(&mut self) -> bool {
        let counts = self.queue_lengths();
        self.router.publish(&counts)
    }

    /// Starts a global step at `start`: schedules every engine, plans and prices the step and runs
    /// its pipeline. Returns the step's record (its end among it); call [`Cluster::finish_step`]
    /// at that end. `None` when no engine has anything to run.
    pub fn begin_step(
        &mut self,
        start: SimTime,
        sink: Option<&mut SpanSink>,
    ) -> Option<&StepRecord> {
        let start_ns = start.as_ns();
        assert!(
            !self.in_step,
            "a step began while another was running at {start_ns} ns"
        );
        let mut preempted = 0;
        for (engine, batch) in self.engines.iter_mut().zip(self.batches.iter_mut()) {
            engine.schedule(&mut self.requests, batch);
            preempted += u64::from(batch.preempted);
        }
        self.totals.preemptions += preempted;
        if self.batches.iter().all(EngineBatch::is_empty) {
            return None;
        }
        plan_step(&self.config, &self.batches, &self.requests, &mut self.shape);
        let scheduled = self
            .batches
            .iter()
            .map(|b| b.items.len() as u32)
            .max()
            .unwrap_or(0);
        let digest = self.memo.encode(&self.shape, scheduled);
        // The carried state cannot change a step it precedes (see `cluster/memo.rs`).
        let colocated = self.colocated.is_some();
        let memo = self.options.step_memo
            && sink.is_none()
            && (colocated
                || (self.state.ffn_ready.iter().all(|&t| t <= start_ns)
                    && self.state.port_free.iter().all(|&t| t <= start_ns)));
        let generation = self.memo.generation;
        let accounted = if memo && let Some(step) = self.memo.find() {
            if step.generation != generation {
                // Made by an earlier run: build the pools this run has not built yet.
                if let Some(routing) = &mut self.routing {
                    let (cost, book) = (&self.cost, &mut self.prices);
                    for &(real, padded) in &step.pools {
                        routing.ensure(real, padded, |a, t| cost.routed_experts(book, a, t));
                    }
                }
                step.generation = generation;
            }
            let state = (!colocated).then_some(&mut self.state);
            step.replay(start_ns, &mut self.timing, state);
            self.prices.add_usage(&step.usage);
            step.accounted
        } else {
            let before = memo.then(|| *self.prices.usage());
            if let Some(routing) = &mut self.routing {
                routing.seed_picks(digest);
            }
            if let Some(colocated) = &mut self.colocated {
                colocated.run_step(
                    &self.shape,
                    scheduled,
                    &self.cost,
                    &mut self.prices,
                    self.routing.as_mut(),
                    start_ns,
                    &mut self.timing,
                );
            } else {
                self.price(scheduled);
                run_step(
                    &self.layout,
                    &self.costs,
                    &mut self.state,
                    start_ns,
                    &mut self.sweep,
                    &mut self.timing,
                    sink,
                    self.options.periodic_shortcut,
                );
            }
            let accounted = self.accounted();
            if let Some(before) = before {
                // Routed experts are priced only while a routing pool is built, once per run; a
                // step replayed later finds its pools built and prices none.
                let routed = OpClass::MoeRoutedExperts.index();
                let mut usage = self.prices.usage().since(&before);
                usage.retain(|&(class, _)| class != routed);
                let state = (!colocated).then_some(&self.state);
                let pools = self.routing.as_ref().map_or(&[][..], |r| r.touched());
                self.memo
                    .store(start_ns, &self.timing, state, accounted, usage, pools);
            }
            accounted
        };
        self.first_use_stall();
        self.in_step = true;
        self.step_start = start_ns;
        self.account(&accounted);
        self.last.as_ref()
    }

    /// Ends the step begun last: advances every scheduled request and reports each emitted token.
    pub fn finish_step(&mut self, mut on_token: impl FnMut(TokenEvent)) {
        assert!(self.in_step, "finish_step without a step in flight");
        for (engine, batch) in self.engines.iter_mut().zip(self.batches.iter()) {
            engine.finish_step(&mut self.requests, batch, &mut on_token);
        }
        self.in_step = false;
    }

    /// Drops a request between steps (the client went away); `false` when it already finished or
    /// is unknown.
    pub fn abort(&mut self, id: RequestId) -> bool {
        assert!(!self.in_step, "abort during a step in flight");
        match self.engine_of.get(id.index()) {
            Some(&engine) => self.engines[engine as usize].abort(&mut self.requests, id),
            None => false,
        }
    }

    /// What each engine runs in the step in flight (or ran in the last one).
    pub fn batches(&self) -> &[EngineBatch] {
        &self.batches
    }

    /// The shape of the step in flight (or of the last one).
    pub fn shape(&self) -> &StepShape {
        &self.shape
    }

    /// What the step just run adds to the totals: a pure function of its inputs and its timing
    /// relative to its start, so the step memo keeps it with the step.
    fn accounted(&self) -> Accounted {
        let t = &self.timing;
        let shape = &self.shape;
        let a_busy = t.attention_busy.iter().copied().max().unwrap_or(0);
        let f_busy = t.ffn_busy.iter().copied().max().unwrap_or(0);
        let l_busy = t.link_busy.iter().copied().max().unwrap_or(0);
        let regime = if a_busy >= f_busy && a_busy >= l_busy {
            Regime::Attention
        } else if f_busy >= l_busy {
            Regime::Ffn
        } else {
            Regime::Transfer
        };
        let span = t.end - t.forward_start;
        let serial = a_busy + f_busy + l_busy;
        let best = a_busy.max(f_busy).max(l_busy);
        // An engine profile says whose pace a step is (its host's or its kernels'); without one,
        // the step is its host's when some rank's host issues it for longer than any device works.
        let host_bound = if t.host > 0 || t.kernels > 0 {
            t.host > 0 && t.host >= t.kernels
        } else {
            t.host_issue > best
        };
        let overlap = if serial > best {
            ((serial as f64 - span as f64) / (serial - best) as f64).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let row_bytes = self.cost.model().row_bytes();
        let (mut real_rows, mut padded_rows, mut oversized) = (0, 0, 0);
        for stage in 0..shape.stages {
            for work in &shape.work[stage] {
                real_rows += u64::from(work.real);
                padded_rows += u64::from(work.rows - work.real.min(work.rows));
                if u64::from(work.rows) * row_bytes > NCCL_BUFFER_BYTES {
                    oversized += 1;
                }
            }
        }
        let decode = self.colocated.is_none()
            && shape.work[..shape.stages]
                .iter()
                .all(|stage| stage.iter().all(|w| w.prefill.is_empty()));
        Accounted {
            shortcut_layers: t.shortcut_layers,
            attention_busy_sum: t.attention_busy.iter().sum(),
            ffn_busy_sum: t.ffn_busy.iter().sum(),
            link_busy_sum: t.link_busy.iter().sum(),
            busiest: (a_busy, f_busy, l_busy),
            regime,
            host_bound,
            overlap,
            real_rows,
            padded_rows,
            oversized,
            decode: decode.then(|| {
                // The busiest LM head and the control payload, as this step priced them.
                let lm_head = self.costs.lm_head.iter().copied().max().unwrap_or(0);
                let fixed = (lm_head, self.costs.control);
                decode_step(&self.layout, shape, fixed, t, (a_busy, f_busy, l_busy))
            }),
        }
    }

    fn account(&mut self, step: &Accounted) {
        let shape = &self.shape;
        let totals = &mut self.totals;
        totals.steps += 1;
        if shape.graph {
            totals.graph_steps += 1;
        } else {
            totals.eager_steps += 1;
        }
        totals.ffn_graph_steps += u64::from(shape.ffn_graph);
        totals.dbo_hazards += u64::from(shape.dbo_hazard);
        totals.shortcut_layers += u64::from(step.shortcut_layers);
        totals.attention_busy_ns += step.attention_busy_sum;
        totals.ffn_busy_ns += step.ffn_busy_sum;
        totals.link_busy_ns += step.link_busy_sum;
        match step.regime {
            _ if step.host_bound => totals.regime_host += 1,
            Regime::Attention => totals.regime_attention += 1,
            Regime::Ffn => totals.regime_ffn += 1,
            Regime::Transfer => totals.regime_transfer += 1,
        }
        if shape.stages == 2 {
            totals.dbo_steps += 1;
            totals.overlap_sum_dbo += step.overlap;
        } else {
            totals.overlap_sum_single += step.overlap;
        }
        totals.real_rows += step.real_rows;
        totals.padded_rows += step.padded_rows;
        if let Some(decode) = &step.decode {
            totals.closed_form.record(decode);
        }
        totals.oversized_messages += step.oversized;
        // Updated in place: the per-engine vectors keep their allocation between steps.
        let (a_busy, f_busy, l_busy) = step.busiest;
        let last = self.last.get_or_insert_with(StepRecord::default);
        last.index = totals.steps - 1;
        last.start = SimTime::from_ns(self.step_start);
        last.end = SimTime::from_ns(self.timing.end);
        last.host = SimDuration::from_ns(self.timing.host);
        last.kernels = SimDuration::from_ns(self.timing.kernels);
        last.graph = shape.graph;
        last.ffn_graph = shape.ffn_graph;
        last.stages = shape.stages as u32;
        last.tokens.clone_from(&shape.tokens);
        last.padded.clone_from(&shape.padded);
        last.regime = step.regime;
        last.host_bound = step.host_bound;
        last.overlap = step.overlap;
        last.attention_busy_ns = a_busy;
        last.ffn_busy_ns = f_busy;
        last.transfer_busy_ns = l_busy;
    }

    /// Fills `self.costs` for `self.shape`: first one sampled routing per (stage, MoE layer) for
    /// the step's FFN rows, then the prices.
    fn price(&mut self, scheduled: u32) {
        let layout = &self.layout;
        let stages = self.shape.stages;
        let ep = self.config.ffn.expert_parallel;
        let moe_layers = layout.dense.iter().filter(|&&d| !d).count();
        let (cost, book) = (&self.cost, &mut self.prices);
        let ffn = &mut self.ffn_rows;
        ffn.fill(layout, &self.shape);
        let routed = &mut self.routed;
        routed.clear();
        if moe_layers > 0 {
            let routing = self
                .routing
                .as_mut()
                .expect("MoE layers have routing pools");
            let mut price = |active, tpe| cost.routed_experts(book, active, tpe);
            for s in 0..stages {
                if ep {
                    let (mut real, mut total) = (0, 0);
                    for g in 0..layout.ffn_ranks / layout.ffn_tp {
                        real += ffn.real[s][g * layout.ffn_tp];
                        total += ffn.rows[s][g * layout.ffn_tp];
                    }
                    routing.pick_many(real, total - real, moe_layers, &mut price, routed);
                } else {
                    // Every FFN rank routes its own rows over all experts: picks are rank-major
                    // here, as `routed_index` reads them.
                    for f in 0..layout.ffn_ranks {
                        let real = ffn.real[s][f];
                        routing.pick_many(
                            real,
                            ffn.rows[s][f] - real,
                            moe_layers,
                            &mut price,
                            routed,
                        );
                    }
                }
            }
        }
        let step = StepInputs {
            layout,
            expert_parallel: ep,
            shape: &self.shape,
            ffn: &self.ffn_rows,
            scope: StepScope::Serving { scheduled },
        };
        price_step(
            cost,
            &mut self.prices,
            step,
            &mut self.scratch,
            &self.routed,
            &mut self.costs,
        );
    }

    /// Internal consistency: KV accounting of every engine.
    pub fn invariants_hold(&self) -> bool {
        self.engines
            .iter()
            .all(|e| e.invariants_hold(&self.requests))
    }

    /// Model architecture served.
    pub fn model(&self) -> &ModelArch {
        self.cost.model()
    }
}

/// The pipeline's fixed shape for `config`: ranks, TP widths, each Attention rank's FFN subgroup
/// (afd-spec §2), dense layers, and how the FFN ranks exchange a MoE layer's tokens (§3.7).
fn pipeline_layout(
    config: &ServingConfig,
    model: &ModelArch,
) -> Result<PipelineLayout, ClusterError> {
    let colocated = config.placement == Placement::Colocated;
    let a_n = config.attention_ranks() as usize;
    let f_n = config.ffn_ranks() as usize;
    // A colocated deployment has no rank mapping: each GPU is its own "subgroup".
    let (subgroup_of, blocks): (Vec<usize>, Vec<Vec<usize>>) = if colocated {
        ((0..a_n).collect(), (0..f_n).map(|f| vec![f]).collect())
    } else {
        let topology = config.topology()?;
        (
            (0..a_n as u32)
                .map(|a| topology.subgroup_of_attention(a) as usize)
                .collect(),
            (0..f_n as u32)
                .map(|f| topology.attention_block(f).map(|a| a as usize).collect())
                .collect(),
        )
    };
    let moe_collective = if f_n == 1 {
        FfnCollective::None
    } else if config.ffn.expert_parallel && config.ffn.dp > 1 {
        FfnCollective::AllToAll
    } else if config.ffn.tp > 1 {
        FfnCollective::AllReduce
    } else {
        FfnCollective::None
    };
    Ok(PipelineLayout {
        attention_ranks: a_n,
        attention_tp: config.attention.tp as usize,
        ffn_ranks: f_n,
        ffn_tp: config.ffn.tp as usize,
        layers: model.layers() as usize,
        subgroup_of,
        blocks,
        dense: (0..model.layers())
            .map(|l| model.is_dense_layer(l))
            .collect(),
        moe_collective,
    })
}

/// One scheduler per Attention engine, with the KV cache the memory plan leaves it; an error
/// when a role does not fit or no KV block is left.
fn engine_schedulers(
    config: &ServingConfig,
    model: &ModelArch,
    cost: &CostModel,
) -> Result<Vec<EngineScheduler>, ClusterError> {
    crate::memory::plan(config, model, cost.spec().memory_bytes)?;
    let (blocks_per_engine, weights) = kv_capacity(config, model, cost.spec().memory_bytes);
    let spec = cost.spec();
    if blocks_per_engine == 0 {
        const GIB: f64 = (1u64 << 30) as f64;
        return Err(ClusterError::NoKvCache {
            memory_gib: spec.memory_bytes as f64 / GIB,
            utilization: config.gpu_memory_utilization,
            weights_gib: weights as f64 / GIB,
            reserve_gib: config.kv_reserve_bytes as f64 / GIB,
        });
    }
    let limits = SchedulerLimits {
        max_num_seqs: config.max_num_seqs,
        max_num_batched_tokens: config.max_num_batched_tokens,
    };
    let kv = kv_layout(config, model);
    Ok((0..config.attention.dp as usize)
        .map(|_| EngineScheduler::new(limits, KvCache::with_layout(&kv, blocks_per_engine)))
        .collect())
}

/// The sampled routings of a MoE model (`None` without MoE layers): one pool family per EP rank
/// (one for all without expert parallelism), drawn from the seed's routing streams.
fn routing_pools(
    config: &ServingConfig,
    model: &ModelArch,
    options: ModelOptions,
    seed: Seed,
    loads: LoadsCache,
) -> Result<Option<RoutingPools>, ClusterError> {
    if !model.has_moe() {
        return Ok(None);
    }
    let (experts, top_k) = (model.routed_experts(), model.experts_per_token());
    if top_k > experts || experts == 0 {
        return Err(ClusterError::Experts {
            model: model.name.clone(),
            experts,
            top_k,
        });
    }
    let ranks = if config.ffn.expert_parallel {
        config.ffn_ranks()
    } else {
        1
    };
    Ok(Some(RoutingPools::new(
        ExpertSampler::new(options.popularity, experts, top_k),
        ranks,
        ROUTING_POOL_SIZE,
        stream(seed, RngStream::RoutingPools),
        stream(seed, RngStream::RoutingPicks),
        loads,
    )))
}

/// What a remembered step assumed besides its own inputs (`cluster/memo.rs`): a digest of the
/// layout, the deployment, the cost model, the seed, the options and the model.
fn memo_context(
    config: &ServingConfig,
    layout: &PipelineLayout,
    cost: &CostModel,
    seed: Seed,
    options: ModelOptions,
    model: &ModelArch,
) -> u64 {
    // Real vLLM's engine prices a step by the deployment's graph mode too (an eager and a
    // graph-less step of one shape cost differently), and by its profile (named by its sources).
    let engine = match (cost.engine(), cost.vllm_host()) {
        (None, None) => String::new(),
        (engine, host) => format!(
            " {:?} {:?} {:?}",
            config.graph,
            engine.map(|e| (&e.profile().sources, e.prices_trained_weights())),
            host.map(|h| &h.engine.profile().sources)
        ),
    };
    xxhash_rust::xxh3::xxh3_64(
        format!(
            "{layout:?} {:?} {:?} {:?} {:?} {:?} {:?} {seed:?} {options:?} {} {model:?}{engine}",
            config.placement,
            config.attention,
            config.ffn,
            config.gpu,
            config.rules,
            cost.layout(),
            cost.calibration_name().unwrap_or("roofline"),
        )
        .as_bytes(),
    )
}

/// KV blocks per Attention engine of `config` serving `model` on GPUs of `memory_bytes`, and the
/// weight bytes per Attention GPU they are left after. Zero blocks when nothing is left.
pub fn kv_capacity(config: &ServingConfig, model: &ModelArch, memory_bytes: u64) -> (u64, u64) {
    let weights = if config.placement == Placement::Colocated {
        weight_bytes_per_gpu(
            model,
            config.attention.dp,
            config.attention.tp,
            config.attention.expert_parallel,
        )
    } else {
        model.attention_weight_bytes(config.attention.tp)
    };
    let blocks = capacity_blocks(
        memory_bytes,
        config.gpu_memory_utilization,
        weights,
        config.kv_reserve_bytes,
        kv_layout(config, model).block_bytes,
    );
    (blocks, weights)
}

/// How the KV cache of `config`'s Attention ranks serving `model` is cut into blocks: the
/// configured block size, grown for a hybrid model so that a page holds a linear layer's state.
pub fn kv_layout(config: &ServingConfig, model: &ModelArch) -> KvLayout {
    model.kv_layout(config.attention.tp, config.block_size)
}

/// Feeds one AFD decode step to the closed-form cross-checks (`closed_form.rs`).
fn decode_step(
    layout: &PipelineLayout,
    shape: &StepShape,
    (lm_head, control): (u64, u64),
    timing: &StepTiming,
    (a_busy, f_busy, l_busy): (u64, u64, u64),
) -> DecodeStep {
    let stages = shape.stages;
    let a_n = layout.attention_ranks;
    let f_n = layout.ffn_ranks;
    let mut rows_a = 0u64;
    let mut tokens = 0u32;
    for a in 0..a_n {
        for s in 0..stages {
            rows_a += u64::from(shape.rows(s, layout.engine_of(a)));
        }
    }
    for e in 0..layout.engines() {
        for s in 0..stages {
            let work = &shape.work[s][e];
            tokens += work.real.min(work.rows);
        }
    }
    let rows_f = (0..f_n)
        .map(|f| {
            let rows: u64 = (0..stages)
                .map(|s| {
                    layout.blocks[f]
                        .iter()
                        .map(|&a| u64::from(shape.rows(s, layout.engine_of(a))))
                        .sum::<u64>()
                })
                .sum();
            rows
        })
        .max()
        .unwrap_or(0);
    let mean = |v: &[u64]| v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
    DecodeStep {
        layers: layout.layers as u32,
        stages: stages as u32,
        span_ns: timing.end - timing.forward_start,
        attention_busy_max_ns: a_busy.saturating_sub(lm_head),
        attention_busy_mean_ns: (mean(&timing.attention_busy) - lm_head as f64).max(0.0),
        ffn_busy_max_ns: f_busy,
        ffn_busy_mean_ns: mean(&timing.ffn_busy),
        link_busy_max_ns: l_busy,
        fixed_ns: control + lm_head,
        tokens,
        rows_per_attention_rank: rows_a as f64 / (a_n * stages).max(1) as f64,
        rows_per_ffn_rank: rows_f as f64 / stages.max(1) as f64,
        attention_ranks: a_n as u32,
        ffn_ranks: f_n as u32,
        eager: !shape.graph,
    }
}

mod memo;
pub use memo::StepMemo;

#[cfg(test)]
mod tests;
