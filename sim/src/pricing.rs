//! Prices one planned step: turns a [`StepShape`] and the routed-expert time of every (stage, MoE
//! layer, FFN rank) into the [`StepCosts`] the layer pipeline (`pipeline.rs`) sweeps.
//!
//! `Cluster` (serving, with sampled routings) and `replay` (a measured probe step, with its recorded
//! routings) both price through [`price_step`]; neither has a formula of its own. Only how the
//! routed experts were chosen differs, so the caller supplies them through a closure.
//!
//! What a price is made of (`model/cost.rs` has each operation's source):
//! - device time of every operation inside a graph, launch gaps included; in eager mode plus
//!   [`CostModel::eager_kernel_gap`] per kernel launched (NCCL calls excluded: their eager device
//!   cost is not measured; `p2p` eager figures time the hosts' launch skew);
//! - one MoE layer = router + dispatch + routed experts + shared experts + the measured
//!   composition overhead of a whole layer over its parts;
//! - a transfer = one dependent hand-off leg, longer after its receiver waited
//!   ([`CostModel::handoff_wait_extra`]); a send, and a receive whose data has already arrived, hold
//!   their stream for [`CostModel::nccl_busy_rows`];
//! - host issue costs per operation in eager mode (`derived.host_us` of the operation's table).
//!
//! It does not decide when anything runs.

use crate::model::cost::{CostModel, OpClass, PriceBook};
use crate::pipeline::{FfnCollective, HostCosts, PipelineLayout, StepCosts};
use crate::step::{AttentionWork, StepShape};
use crate::time::SimDuration;

/// What kind of step is priced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepScope {
    /// A serving engine step: scheduler host time before the forward, LM head and sampling after.
    Serving {
        /// Requests scheduled on the busiest engine (prices the scheduler's host time).
        scheduled: u32,
    },
    /// The forward pass alone, as `afd-probe pipeline` runs it: no scheduler, no LM head.
    Forward,
}

/// Per-stage, per-FFN-rank buffers of [`price_step`], reused between steps.
#[derive(Debug, Default)]
pub struct PriceScratch {
    dense: [Vec<u64>; 2],
    router: [Vec<u64>; 2],
    shared: [Vec<u64>; 2],
    composition: [Vec<i64>; 2],
}

impl PriceScratch {
    fn reset(&mut self, ffn_ranks: usize) {
        for s in 0..2 {
            for v in [&mut self.dense[s], &mut self.router[s], &mut self.shared[s]] {
                v.clear();
                v.resize(ffn_ranks, 0);
            }
            self.composition[s].clear();
            self.composition[s].resize(ffn_ranks, 0);
        }
    }
}

/// Rows each FFN rank processes per stage of a planned step: `rows[stage][ffn rank]` (padded) and
/// `real[..][..]`. The caller fills them ([`FfnRows::fill`]) once per step, draws its routings for
/// them, and hands them to [`price_step`]; the buffers are reused between steps.
#[derive(Debug, Default)]
pub struct FfnRows {
    pub rows: [Vec<u32>; 2],
    pub real: [Vec<u32>; 2],
}

impl FfnRows {
    /// The rows each FFN rank receives per stage of `shape`: the sum over its subgroup's
    /// Attention ranks.
    pub fn fill(&mut self, layout: &PipelineLayout, shape: &StepShape) {
        let f_n = layout.ffn_ranks;
        for s in 0..2 {
            for v in [&mut self.rows[s], &mut self.real[s]] {
                v.clear();
                v.resize(f_n, 0);
            }
        }
        for s in 0..shape.stages {
            for f in 0..f_n {
                for &a in &layout.blocks[f] {
                    let work = &shape.work[s][layout.engine_of(a)];
                    self.rows[s][f] += work.rows;
                    self.real[s][f] += work.real.min(work.rows);
                }
            }
        }
    }
}

/// Index of the routed-expert time of `(stage, moe layer, ffn rank)` in the vector the caller of
/// [`price_step`] fills: stage-major then layer then rank with expert parallelism (one routing per
/// EP group), rank-major then layer without (every rank routes its own rows).
pub fn routed_index(
    expert_parallel: bool,
    moe_layers: usize,
    ffn_ranks: usize,
    stage: usize,
    moe: usize,
    rank: usize,
) -> usize {
    if expert_parallel {
        (stage * moe_layers + moe) * ffn_ranks + rank
    } else {
        (stage * ffn_ranks + rank) * moe_layers + moe
    }
}

/// The step [`price_step`] prices: the pipeline's shape, whether the FFN role runs expert
/// parallelism, the planned step, its FFN rows ([`FfnRows::fill`] of the same shape), and what
/// kind of step it is.
#[derive(Clone, Copy, Debug)]
pub struct StepInputs<'a> {
    pub layout: &'a PipelineLayout,
    pub expert_parallel: bool,
    pub shape: &'a StepShape,
    pub ffn: &'a FfnRows,
    pub scope: StepScope,
}

/// Fills `costs` for `step`. `routed` holds the routed-expert time of every (stage, MoE layer,
/// FFN rank) in [`routed_index`] order, drawn by the caller before pricing for `step.ffn`; it is
/// empty for a model without MoE layers.
pub fn price_step(
    cost: &CostModel,
    book: &mut PriceBook,
    step: StepInputs<'_>,
    scratch: &mut PriceScratch,
    routed: &[SimDuration],
    costs: &mut StepCosts,
) {
    let StepInputs {
        layout,
        shape,
        scope,
        ..
    } = step;
    let stages = shape.stages;
    let engines = layout.engines();
    costs.stages = stages;
    costs.attention_graph = shape.graph;
    costs.ffn_graph = shape.ffn_graph;
    price_attention_side(cost, book, step, costs);
    let collectives = price_ffn_parts(cost, book, step, scratch);
    fill_ffn_layers(cost, step, scratch, collectives, routed, costs);
    costs.lm_head.clear();
    if let StepScope::Serving { .. } = scope {
        for e in 0..engines {
            costs
                .lm_head
                .push(lm_head_ns(cost, book, shape.sampled[e], !shape.graph));
        }
    }
    // Control payload: an 8-byte size then ~135–210 bytes of JSON, each a dependent hand-off
    // (afd-spec §3.4).
    let json = 135 + 68 * (stages as u64 - 1) + 3 * (engines as u64 - 1);
    costs.control = cost.transfer_bytes(book, 8).total().as_ns()
        + cost.transfer_bytes(book, json).total().as_ns();
    costs.host = host_costs(cost, book, scope);
    if let Some(vllm) = cost.vllm_host() {
        costs.host = vllm_host_costs(costs.host, vllm, cost.model().layers(), shape);
    }
}

/// An AFD step's host costs at real vLLM's pace ([`CostModel::with_vllm_host`]).
///
/// Real vLLM issues a step without graphs from Python, and its host, not its kernels, sets the
/// step's length: a plain eager decode step of DeepSeek-V2-Lite on H200 takes 49-75 ms where the
/// operations' measured lean issue costs (`derived.host_us`) add up to a few. The engine profile
/// measured what the whole plain step of a shape costs (`EngineModel::step_cost`'s host share);
/// how it divides between the roles is the profile's measured division where it has one
/// ([`measured_division`]); else the lean costs say how a plain step's issue divides over its
/// parts: the scheduler (`host.step`), an attention block per layer and for the LM head, an FFN
/// block per layer, as `ColocatedModel::sweep` issues them. Each role's parts are scaled by the measured step over
/// that lean sum, the Attention role's by its own mode's step (the `torch.compile`d model without
/// graphs under `FULL_DECODE_ONLY`, op by op under `--enforce-eager`), the FFN role's by the eager
/// step (it runs `compute_ffn_output` outside the compiled forward whenever it replays no graph,
/// afd-spec §5.3), so the two roles' parts of one layer sum to the plain layer's measured issue.
/// A role that replays a graph keeps its costs; so do the hand-offs, the collectives and the FFN
/// loop, which no plain step measured. Never below the lean costs.
pub fn vllm_host_costs(
    host: HostCosts,
    vllm: &crate::model::cost::VllmHost,
    layers: u32,
    shape: &StepShape,
) -> HostCosts {
    if let Some(measured) = measured_division(host, vllm, layers, shape) {
        return measured;
    }
    let layers = u64::from(layers);
    let lean = host.step + (layers + 1) * host.attention_compute + layers * host.ffn_compute;
    if lean == 0 {
        return host;
    }
    let factor = |mode: &crate::serving::GraphMode| {
        vllm.engine
            .step_cost_without_graphs(mode, shape)
            .map_or(1.0, |c| (c.host_ns as f64 / lean as f64).max(1.0))
    };
    let scale = |ns: u64, f: f64| (ns as f64 * f).round() as u64;
    let mut scaled = host;
    if !shape.graph {
        let f = factor(&vllm.attention_mode);
        scaled.step = scale(host.step, f);
        scaled.attention_compute = scale(host.attention_compute, f);
    }
    if !shape.ffn_graph {
        scaled.ffn_compute = scale(host.ffn_compute, factor(&crate::serving::GraphMode::Eager));
    }
    scaled
}

/// [`vllm_host_costs`] where the engine profile measured how an eager step's host time divides
/// ([`afd_traces::vllm_run::VllmEngineProfile::role_division`], vLLM's torch profiler on a plain
/// eager server): of the plain step of the shape, the part outside the decoder layers (input
/// preparation, embedding, final norm, LM head, sampler) and each layer's norms and attention are
/// the Attention role's, each layer's MLP or MoE block the FFN role's (afd-spec §5.3). The
/// Attention role takes its part of its own mode's step, the FFN role its part of the eager step;
/// the LM head's attention block comes out of the part outside the layers, so a plain step's
/// parts still sum to the step. `None` when the profile has no division or no cost for the shape.
fn measured_division(
    host: HostCosts,
    vllm: &crate::model::cost::VllmHost,
    layers: u32,
    shape: &StepShape,
) -> Option<HostCosts> {
    let engine = &vllm.engine;
    let tokens = shape.tokens.iter().copied().max().unwrap_or(0);
    let (outside, ffn_share) =
        crate::model::engine::division_at(&engine.profile().role_division, tokens)?;
    let plain = |mode: &crate::serving::GraphMode| {
        engine
            .step_cost_without_graphs(mode, shape)
            .map(|c| c.host_ns as f64)
    };
    let layers = f64::from(layers.max(1));
    let mut scaled = host;
    if !shape.graph {
        let step = plain(&vllm.attention_mode)?;
        let attention = (step * (1.0 - outside) * (1.0 - ffn_share) / layers).round() as u64;
        scaled.attention_compute = attention.max(host.attention_compute);
        let rest = (step * outside - scaled.attention_compute as f64).max(0.0);
        scaled.step = (rest.round() as u64).max(host.step);
    }
    if !shape.ffn_graph {
        let step = plain(&crate::serving::GraphMode::Eager)?;
        let ffn = (step * (1.0 - outside) * ffn_share / layers).round() as u64;
        scaled.ffn_compute = ffn.max(host.ffn_compute);
    }
    Some(scaled)
}

/// The Attention side of `step` and its hand-offs: each engine's attention block and TP
/// all-reduce per stage, and per Attention rank the send's port occupancy, latency and stream
/// time, the send back, and the receive's stream time and wait curve.
fn price_attention_side(
    cost: &CostModel,
    book: &mut PriceBook,
    step: StepInputs<'_>,
    costs: &mut StepCosts,
) {
    let StepInputs { layout, shape, .. } = step;
    for s in 0..2 {
        costs.attention_compute[s].clear();
        costs.attention_all_reduce[s].clear();
        costs.send_occupancy[s].clear();
        costs.send_latency[s].clear();
        costs.send_busy[s].clear();
        costs.send_back[s].clear();
        costs.send_back_busy[s].clear();
        costs.recv_busy[s].clear();
        costs.recv_extra[s].clear();
    }
    for s in 0..shape.stages {
        for e in 0..layout.engines() {
            let work = &shape.work[s][e];
            costs.attention_compute[s].push(attention_block_ns(cost, book, work, !shape.graph));
            costs.attention_all_reduce[s].push(
                cost.all_reduce_rows(book, work.rows, layout.attention_tp as u32)
                    .as_ns(),
            );
        }
        for a in 0..layout.attention_ranks {
            let rows = shape.rows(s, layout.engine_of(a));
            let senders = layout.blocks[layout.subgroup_of[a]].len() as u32;
            let transfer = cost.transfer_rows(book, rows);
            // Without a measured NCCL kernel time, a send holds its stream until its data has
            // arrived and a receive whose data is there takes no time.
            let nccl = cost.nccl_busy_rows(book, rows);
            let send_busy = nccl.unwrap_or(transfer.total()).as_ns();
            costs.send_occupancy[s].push(cost.fan_in_occupancy(book, rows, senders).as_ns());
            costs.send_latency[s].push(transfer.latency.as_ns());
            costs.send_busy[s].push(send_busy);
            costs.send_back[s].push(transfer.total().as_ns());
            costs.send_back_busy[s].push(send_busy);
            costs.recv_busy[s].push(nccl.unwrap_or_default().as_ns());
            costs.recv_extra[s].push(cost.handoff_wait_extra(book, rows));
        }
    }
}

/// The FFN collectives of one stage, ns: the TP all-reduce and the all-to-all over the busiest
/// FFN rank's rows.
#[derive(Clone, Copy, Debug)]
struct StageCollectives {
    reduce: [u64; 2],
    a2a: [u64; 2],
}

/// The parts of an FFN layer that depend on a stage's rows only, per stage and FFN rank, into
/// `scratch` (dense MLP, router with dispatch, shared experts, composition), and the stage's
/// collectives.
fn price_ffn_parts(
    cost: &CostModel,
    book: &mut PriceBook,
    step: StepInputs<'_>,
    scratch: &mut PriceScratch,
) -> StageCollectives {
    let StepInputs {
        layout, shape, ffn, ..
    } = step;
    let f_n = layout.ffn_ranks;
    scratch.reset(f_n);
    let rows_f = &ffn.rows;
    let PriceScratch {
        dense,
        router,
        shared,
        composition,
    } = scratch;
    let ffn_tp = layout.ffn_tp as u32;
    let mut reduce = [0u64; 2];
    let mut a2a = [0u64; 2];
    for s in 0..shape.stages {
        for f in 0..f_n {
            let parts = ffn_parts(cost, book, rows_f[s][f], !shape.ffn_graph);
            dense[s][f] = parts.dense;
            router[s][f] = parts.router;
            shared[s][f] = parts.shared;
            composition[s][f] = parts.composition;
        }
        let max_rows = rows_f[s].iter().copied().max().unwrap_or(1);
        reduce[s] = cost.all_reduce_rows(book, max_rows, ffn_tp).as_ns();
        a2a[s] = cost.all_to_all_rows(book, max_rows, f_n as u32).as_ns();
    }
    StageCollectives { reduce, a2a }
}

/// The FFN side of every (layer, stage) slot: compute before and after the collective per FFN
/// rank, and the collectives, from the per-stage parts and the routed-expert times `routed`.
fn fill_ffn_layers(
    cost: &CostModel,
    step: StepInputs<'_>,
    scratch: &PriceScratch,
    collectives: StageCollectives,
    routed: &[SimDuration],
    costs: &mut StepCosts,
) {
    let StepInputs {
        layout,
        expert_parallel,
        shape,
        ..
    } = step;
    let PriceScratch {
        dense,
        router,
        shared,
        composition,
    } = scratch;
    let StageCollectives { reduce, a2a } = collectives;
    let stages = shape.stages;
    let f_n = layout.ffn_ranks;
    let layers = layout.layers;
    let slots = layers * stages;
    costs.ffn_pre.clear();
    costs.ffn_pre.resize(slots * f_n, 0);
    costs.ffn_post.clear();
    costs.ffn_post.resize(slots * f_n, 0);
    costs.ffn_collective_1.clear();
    costs.ffn_collective_1.resize(slots, 0);
    costs.ffn_collective_2.clear();
    costs.ffn_collective_2.resize(slots, 0);
    let moe_layers = layout.dense.iter().filter(|&&d| !d).count();
    if moe_layers > 0 {
        assert_eq!(
            routed.len(),
            stages * moe_layers * f_n,
            "routing must price every (stage, MoE layer, FFN rank)"
        );
    }
    let routed_launch = routed_launch_ns(cost, !shape.ffn_graph);
    let routed_at = |s: usize, moe: usize, f: usize| -> u64 {
        routed[routed_index(expert_parallel, moe_layers, f_n, s, moe, f)].as_ns() + routed_launch
    };
    let with_composition =
        |ns: u64, s: usize, f: usize| -> u64 { with_composition(ns, composition[s][f]) };
    let mut moe = 0;
    for layer in 0..layers {
        for s in 0..stages {
            let slot = layer * stages + s;
            if layout.dense[layer] {
                costs.ffn_post[slot * f_n..(slot + 1) * f_n].copy_from_slice(&dense[s]);
                costs.ffn_collective_2[slot] = reduce[s];
                continue;
            }
            match layout.moe_collective {
                FfnCollective::AllToAll => {
                    for f in 0..f_n {
                        costs.ffn_pre[slot * f_n + f] = router[s][f];
                        costs.ffn_post[slot * f_n + f] =
                            with_composition(routed_at(s, moe, f) + shared[s][f], s, f);
                    }
                    costs.ffn_collective_1[slot] = a2a[s];
                    costs.ffn_collective_2[slot] = a2a[s];
                }
                FfnCollective::AllReduce | FfnCollective::None => {
                    for f in 0..f_n {
                        costs.ffn_post[slot * f_n + f] = with_composition(
                            router[s][f] + routed_at(s, moe, f) + shared[s][f],
                            s,
                            f,
                        );
                    }
                    if layout.moe_collective == FfnCollective::AllReduce {
                        costs.ffn_collective_2[slot] = reduce[s];
                    }
                }
            }
        }
        if !layout.dense[layer] {
            moe += 1;
        }
    }
}

/// Device time of one engine's attention block for one ubatch: projections, decode attention over
/// its sequences' contexts and each prefill chunk, plus [`CostModel::eager_kernel_gap`] per kernel
/// when `eager`.
pub fn attention_block_ns(
    cost: &CostModel,
    book: &mut PriceBook,
    work: &AttentionWork,
    eager: bool,
) -> u64 {
    let kernels = cost.kernels();
    let mut compute = cost.attention_proj(book, work.rows);
    let mut launched = kernels.attention_proj;
    if work.decode_seqs > 0 {
        compute += cost.attention_decode(book, work.decode_seqs, work.decode_context);
        launched += kernels.attention_decode;
    }
    for &(tokens, context) in &work.prefill {
        compute += cost.attention_prefill(book, tokens, context);
        launched += kernels.attention_prefill;
    }
    compute.as_ns() + launch_ns(cost, launched, eager)
}

/// The parts of an FFN layer that depend on its rows alone, nanoseconds, launch gaps included.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FfnParts {
    pub dense: u64,
    pub router: u64,
    /// Dispatch (gather and combine kernels) plus the shared experts.
    pub shared: u64,
    /// The measured overhead of a whole MoE layer over its parts (signed).
    pub composition: i64,
}

/// [`FfnParts`] of `rows` rows on one rank.
pub fn ffn_parts(cost: &CostModel, book: &mut PriceBook, rows: u32, eager: bool) -> FfnParts {
    let kernels = cost.kernels();
    FfnParts {
        dense: cost.dense_mlp(book, rows).as_ns() + launch_ns(cost, kernels.dense, eager),
        router: cost.router(book, rows).as_ns() + launch_ns(cost, kernels.router, eager),
        shared: (cost.moe_dispatch(book, rows) + cost.shared_experts(book, rows)).as_ns()
            + launch_ns(cost, kernels.dispatch + kernels.shared, eager),
        composition: cost.moe_composition_ns(book, rows),
    }
}

/// Launch gaps of the routed-expert kernels of one layer (zero inside a graph).
pub fn routed_launch_ns(cost: &CostModel, eager: bool) -> u64 {
    launch_ns(cost, cost.kernels().routed, eager)
}

/// A MoE layer's parts plus its composition overhead (signed), never below zero.
pub fn with_composition(parts_ns: u64, composition: i64) -> u64 {
    (parts_ns as i64 + composition).max(0) as u64
}

/// LM head and sampling of `sampled` sequences, launch gaps included when `eager`.
pub fn lm_head_ns(cost: &CostModel, book: &mut PriceBook, sampled: u32, eager: bool) -> u64 {
    cost.lm_head(book, sampled).as_ns() + launch_ns(cost, cost.kernels().lm_head, eager)
}

/// Device overhead of `kernels` kernels launched eagerly (zero inside a graph).
fn launch_ns(cost: &CostModel, kernels: u32, eager: bool) -> u64 {
    if eager {
        u64::from(kernels) * cost.eager_kernel_gap().as_ns()
    } else {
        0
    }
}

/// Host costs of a step: the scheduler's time before the forward (serving steps), the FFN loop,
/// graph launches and each operation's eager issue time.
pub fn host_costs(cost: &CostModel, book: &mut PriceBook, scope: StepScope) -> HostCosts {
    let kernels = cost.kernels();
    let moe_issue = [
        OpClass::MoeRouter,
        OpClass::MoeDispatch,
        OpClass::MoeRoutedExperts,
        OpClass::MoeSharedExperts,
    ]
    .iter()
    .zip([
        kernels.router,
        kernels.dispatch,
        kernels.routed,
        kernels.shared,
    ])
    .map(|(&class, n)| cost.eager_host(book, class, n).as_ns())
    .sum();
    HostCosts {
        step: match scope {
            StepScope::Serving { scheduled } => cost.step_host(book, scheduled).as_ns(),
            StepScope::Forward => 0,
        },
        ffn_loop: cost.ffn_loop_host(book).as_ns(),
        graph_launch: cost.graph_launch(book).as_ns(),
        attention_compute: (cost.eager_host(book, OpClass::AttentionProj, kernels.attention_proj)
            + cost.eager_host(book, OpClass::AttentionMlaDecode, kernels.attention_decode))
        .as_ns(),
        p2p: cost.eager_host(book, OpClass::P2p, kernels.p2p).as_ns(),
        collective: cost
            .eager_host(book, OpClass::AllReduce, kernels.collective)
            .as_ns(),
        ffn_compute: moe_issue,
        attention_kernels: u64::from(kernels.attention_proj + kernels.attention_decode),
        ffn_kernels: u64::from(kernels.moe_layer()),
    }
}

#[cfg(test)]
mod tests;
