//! The non-disaggregated baseline: the same model served by plain vLLM with DP×TP and expert
//! parallelism on the same GPUs, so a sweep can say whether AFD pays.
//!
//! Everything but the step's timing is shared with the AFD pair (`cluster.rs` drives both): the
//! `vllm bench serve` client, DP routing (§7.2), the V1 scheduler and KV cache per DP engine, the
//! agreed step shape (graph padding across DP, the DBO split of §4.2), the cost model and the
//! routing pools. What differs is here:
//! - every GPU holds its engine's attention (TP-sharded), the shared experts and dense MLPs
//!   (TP-sharded) and `1/N` of the routed experts (EP over all `N = DP×TP` GPUs), so its KV cache
//!   gets what those weights leave;
//! - a MoE layer runs attention, the router, an all-to-all dispatch over all `N` GPUs, the local
//!   routed experts plus the shared experts, and an all-to-all combine (vLLM DP+EP; tokens are split
//!   across each TP group, as sequence-parallel MoE does); without expert parallelism the experts are
//!   TP-sharded and a TP all-reduce replaces the all-to-alls; dense layers run the MLP and a TP
//!   all-reduce;
//! - each GPU has a compute stream and a communication stream; with DBO the two ubatches ping-pong
//!   as vLLM's DBO does for DP+EP (docs.vllm.ai design/dbo, research/sim-anchors.md §2.7): compute
//!   runs `A₀ A₁ E₀ E₁` per layer while the all-to-alls run `D₀ D₁ C₀ C₁`, so one ubatch's
//!   communication hides behind the other's compute;
//! - eager steps pay each op's launch on a host timeline per GPU, graph steps one launch.
//!
//! It does not model DeepEP's low-latency kernels, EPLB, or all-to-all contention with other
//! traffic; the all-to-all is priced by `CostModel::all_to_all_rows` like the FFN's in AFD.

use crate::model::arch::ModelArch;
use crate::model::cost::{CostModel, PriceBook};
use crate::model::engine::JitCache;
use crate::model::routing::RoutingPools;
use crate::pipeline::{HostCosts, StepTiming, run_compute};
use crate::pricing::{
    StepScope, attention_block_ns, ffn_parts, host_costs, lm_head_ns, routed_launch_ns,
    with_composition,
};
use crate::serving::ServingConfig;
use crate::step::StepShape;
use crate::time::SimDuration;

/// Weight bytes one GPU of a colocated deployment holds: attention, dense MLPs, routers and shared
/// experts split across TP; routed experts split across all GPUs with expert parallelism, across
/// TP without it.
pub fn weight_bytes_per_gpu(model: &ModelArch, dp: u32, tp: u32, expert_parallel: bool) -> u64 {
    let config = &model.config;
    let roles = config.params_by_role();
    let routed = u64::from(config.n_moe_layers())
        * u64::from(model.routed_experts())
        * model.expert_params();
    let tp = u64::from(tp.max(1));
    let gpus = u64::from(dp.max(1)) * tp;
    let routed_share = if expert_parallel {
        routed / gpus
    } else {
        routed / tp
    };
    let rest = roles.attention + roles.ffn.saturating_sub(routed);
    (rest / tp + routed_share) * model.weight_bytes()
}

/// The baseline's step model for one deployment, with its buffers (reused between steps).
#[derive(Debug)]
pub struct ColocatedModel {
    dp: usize,
    tp: usize,
    gpus: usize,
    expert_parallel: bool,
    dense: Vec<bool>,
    moe_layers: usize,
    prices: Prices,
    lanes: Lanes,
    graph: crate::serving::GraphMode,
    /// The fused-MoE kernel specializations each engine process has compiled (a step that needs
    /// a new one waits for its Triton JIT compile, where the engine profile prices it).
    jit: Vec<JitCache>,
}

/// Device and host costs of the step being run, nanoseconds; `[stage][engine]` unless noted.
#[derive(Debug, Default)]
struct Prices {
    attention: [Vec<u64>; 2],
    attention_reduce: [Vec<u64>; 2],
    router: [Vec<u64>; 2],
    /// Dispatch kernels plus the shared experts.
    shared: [Vec<u64>; 2],
    /// Measured overhead of a whole MoE layer over its parts (signed).
    composition: [Vec<i64>; 2],
    dense: [Vec<u64>; 2],
    /// TP all-reduce after a dense MLP, or after the experts without expert parallelism.
    reduce: [Vec<u64>; 2],
    /// All-to-all dispatch (and, equally, combine) per stage.
    all_to_all: [u64; 2],
    /// Routed experts: `[(stage · moe_layers + moe) · gpus + gpu]` with expert parallelism,
    /// `[(stage · dp + engine) · moe_layers + moe]` without.
    routed: Vec<SimDuration>,
    routed_launch: u64,
    lm_head: Vec<u64>,
    host: HostCosts,
}

/// Per-GPU timelines of the step being run.
#[derive(Debug, Default)]
struct Lanes {
    compute: Vec<u64>,
    comm: Vec<u64>,
    host: Vec<u64>,
    /// When each ubatch's hidden states are ready on each GPU for its next layer.
    ready: [Vec<u64>; 2],
    /// When each ubatch's dispatch ended (every GPU receives at once).
    dispatched: [u64; 2],
}

impl ColocatedModel {
    pub fn new(config: &ServingConfig, model: &ModelArch) -> ColocatedModel {
        let dp = config.attention.dp as usize;
        let tp = config.attention.tp as usize;
        let dense: Vec<bool> = (0..model.layers())
            .map(|l| model.is_dense_layer(l))
            .collect();
        let moe_layers = dense.iter().filter(|&&d| !d).count();
        ColocatedModel {
            dp,
            tp,
            gpus: dp * tp,
            expert_parallel: config.attention.expert_parallel,
            dense,
            moe_layers,
            prices: Prices::default(),
            lanes: Lanes::default(),
            graph: config.graph.clone(),
            jit: vec![
                JitCache::at_start(
                    &config.graph,
                    config.max_num_seqs,
                    config.max_num_batched_tokens,
                    model.routed_experts(),
                    model.experts_per_token(),
                );
                dp
            ],
        }
    }

    /// Marks the fused-MoE kernels of steps of these kernel token counts compiled on every engine:
    /// what the server ran before this run (its warm-ups and earlier runs), [`JitCache`].
    pub fn compiled(&mut self, kernel_tokens: &[u32]) {
        for cache in &mut self.jit {
            for &m in kernel_tokens {
                cache.record(m);
            }
        }
    }

    /// Takes every fused-MoE kernel specialization as compiled on every engine.
    pub fn warm_kernels(&mut self) {
        for cache in &mut self.jit {
            cache.warm();
        }
    }

    /// What `shape` waits for its engines' first-use Triton compiles, nanoseconds: `compile_ns`
    /// when an engine's step needs a fused-MoE kernel specialization its process has not compiled
    /// (the engines compile side by side), else 0. The specializations are recorded as compiled.
    pub fn jit_stall(&mut self, shape: &StepShape, compile_ns: u64) -> u64 {
        let mut stall = 0;
        for (e, cache) in self.jit.iter_mut().enumerate() {
            let tokens = shape.tokens.get(e).copied().unwrap_or(0).max(1);
            if let Some(m) = JitCache::kernel_tokens(&self.graph, shape.graph, tokens)
                && cache.record(m)
            {
                stall = compile_ns;
            }
        }
        stall
    }

    /// Prices and runs one global step of `shape` starting at `start` (ns), writing its timing:
    /// `attention_busy` (attention and its TP all-reduce, LM head), `ffn_busy` (router, experts, dense
    /// MLP and their reductions) and `link_busy` (all-to-alls), one entry per GPU. `book` is the
    /// run's price book for `cost`.
    #[expect(
        clippy::too_many_arguments,
        reason = "the step, its pricing and its timing"
    )]
    pub fn run_step(
        &mut self,
        shape: &StepShape,
        scheduled: u32,
        cost: &CostModel,
        book: &mut PriceBook,
        routing: Option<&mut RoutingPools>,
        start: u64,
        timing: &mut StepTiming,
    ) {
        self.price(shape, scheduled, cost, book, routing);
        self.sweep(shape, start, timing);
        // With a real engine's profile the step costs what that engine's fixed-shape steps cost
        // (its host path overlapped with the kernels vLLM runs, `model/engine.rs`); the kernel
        // sweep above keeps the per-GPU busy times.
        timing.host = 0;
        timing.kernels = 0;
        if let Some(step) = cost.engine().and_then(|e| e.step_cost(&self.graph, shape)) {
            let sweep = timing.end - start;
            timing.end = start + step.period_ns;
            timing.host = step.host_ns;
            timing.kernels = if step.period_ns > step.host_ns {
                step.period_ns
            } else {
                sweep.min(step.period_ns)
            };
        }
    }

    fn engine_of(&self, gpu: usize) -> usize {
        gpu / self.tp
    }

    fn price(
        &mut self,
        shape: &StepShape,
        scheduled: u32,
        cost: &CostModel,
        book: &mut PriceBook,
        routing: Option<&mut RoutingPools>,
    ) {
        let tp = self.tp as u32;
        let eager = !shape.graph;
        let prices = &mut self.prices;
        let mut totals = [(0u32, 0u32); 2];
        let mut max_rows_per_gpu = [0u32; 2];
        for s in 0..2 {
            for v in [
                &mut prices.attention[s],
                &mut prices.attention_reduce[s],
                &mut prices.router[s],
                &mut prices.shared[s],
                &mut prices.dense[s],
                &mut prices.reduce[s],
            ] {
                v.clear();
            }
            prices.composition[s].clear();
        }
        for s in 0..shape.stages {
            for e in 0..self.dp {
                let work = &shape.work[s][e];
                prices.attention[s].push(attention_block_ns(cost, book, work, eager));
                prices.attention_reduce[s].push(cost.all_reduce_rows(book, work.rows, tp).as_ns());
                let parts = ffn_parts(cost, book, work.rows, eager);
                prices.router[s].push(parts.router);
                prices.shared[s].push(parts.shared);
                prices.dense[s].push(parts.dense);
                prices.composition[s].push(parts.composition);
                prices.reduce[s].push(cost.all_reduce_rows(book, work.rows, tp).as_ns());
                // Sequence-parallel MoE: each TP rank dispatches its slice of the engine's rows.
                let per_gpu = if self.expert_parallel {
                    work.rows.div_ceil(tp)
                } else {
                    work.rows
                };
                max_rows_per_gpu[s] = max_rows_per_gpu[s].max(per_gpu);
                let real = work.real.min(work.rows);
                totals[s].0 += real;
                totals[s].1 += work.rows - real;
            }
            prices.all_to_all[s] = if self.expert_parallel {
                cost.all_to_all_rows(book, max_rows_per_gpu[s], self.gpus as u32)
                    .as_ns()
            } else {
                0
            };
        }
        prices.routed.clear();
        prices.routed_launch = routed_launch_ns(cost, eager);
        if self.moe_layers > 0 {
            let routing = routing.expect("MoE layers have routing pools");
            let mut price = |active, tpe| cost.routed_experts(book, active, tpe);
            for (s, &(real, padded)) in totals.iter().enumerate().take(shape.stages) {
                if self.expert_parallel {
                    routing.pick_many(
                        real,
                        padded,
                        self.moe_layers,
                        &mut price,
                        &mut prices.routed,
                    );
                } else {
                    for e in 0..self.dp {
                        let work = &shape.work[s][e];
                        let real = work.real.min(work.rows);
                        routing.pick_many(
                            real,
                            work.rows - real,
                            self.moe_layers,
                            &mut price,
                            &mut prices.routed,
                        );
                    }
                }
            }
        }
        prices.lm_head.clear();
        for &sampled in &shape.sampled {
            prices.lm_head.push(lm_head_ns(cost, book, sampled, eager));
        }
        prices.host = host_costs(cost, book, StepScope::Serving { scheduled });
    }

    fn routed_at(&self, s: usize, moe: usize, gpu: usize) -> u64 {
        let index = if self.expert_parallel {
            (s * self.moe_layers + moe) * self.gpus + gpu
        } else {
            (s * self.dp + self.engine_of(gpu)) * self.moe_layers + moe
        };
        self.prices.routed[index].as_ns() + self.prices.routed_launch
    }

    fn sweep(&mut self, shape: &StepShape, start: u64, timing: &mut StepTiming) {
        let n = self.gpus;
        let stages = shape.stages;
        let eager = !shape.graph;
        let forward_start = start + self.prices.host.step;
        timing.forward_start = forward_start;
        timing.shortcut_layers = 0;
        for busy in [
            &mut timing.attention_busy,
            &mut timing.ffn_busy,
            &mut timing.link_busy,
        ] {
            busy.clear();
            busy.resize(n, 0);
        }
        let host_start = if eager {
            forward_start
        } else {
            forward_start + self.prices.host.graph_launch
        };
        let lanes = &mut self.lanes;
        let [ready_0, ready_1] = &mut lanes.ready;
        for (v, value) in [
            (&mut lanes.compute, forward_start),
            (&mut lanes.comm, forward_start),
            (&mut lanes.host, host_start),
            (ready_0, forward_start),
            (ready_1, forward_start),
        ] {
            v.clear();
            v.resize(n, value);
        }
        let mut moe = 0;
        for layer in 0..self.dense.len() {
            let dense = self.dense[layer];
            for s in 0..stages {
                self.attention(s, eager, timing);
                if dense {
                    self.dense_mlp(s, eager, timing);
                } else if self.expert_parallel {
                    self.dispatch(s, eager, timing);
                }
            }
            if !dense {
                for s in 0..stages {
                    self.experts(s, moe, eager, timing);
                }
                moe += 1;
            }
        }
        let mut end = forward_start;
        for g in 0..n {
            let e = self.engine_of(g);
            let lanes = &mut self.lanes;
            let ready = (0..stages).map(|s| lanes.ready[s][g]).max().unwrap_or(0);
            let host = &self.prices.host;
            let (begin, finish) = compute(
                &mut lanes.host[g],
                lanes.compute[g].max(ready),
                eager,
                (host.attention_compute, host.attention_kernels),
                self.prices.lm_head[e],
            );
            timing.attention_busy[g] += finish - begin;
            end = end.max(finish);
        }
        timing.end = end;
        timing.host_issue = self
            .lanes
            .host
            .iter()
            .map(|&h| h - start)
            .max()
            .unwrap_or(0);
    }

    /// Attention of ubatch `s` on every GPU, then its engine's TP all-reduce.
    fn attention(&mut self, s: usize, eager: bool, timing: &mut StepTiming) {
        let lanes = &mut self.lanes;
        let prices = &self.prices;
        let host = &prices.host;
        for g in 0..self.gpus {
            let e = g / self.tp;
            let (begin, end) = compute(
                &mut lanes.host[g],
                lanes.compute[g].max(lanes.ready[s][g]),
                eager,
                (host.attention_compute, host.attention_kernels),
                prices.attention[s][e],
            );
            lanes.compute[g] = end;
            timing.attention_busy[g] += end - begin;
        }
        tp_all_reduce(
            lanes,
            self.tp,
            &prices.attention_reduce[s],
            eager,
            host.collective,
            &mut timing.attention_busy,
        );
    }

    /// Dense MLP of ubatch `s` and its TP all-reduce; its output is the ubatch's next input.
    fn dense_mlp(&mut self, s: usize, eager: bool, timing: &mut StepTiming) {
        let lanes = &mut self.lanes;
        let prices = &self.prices;
        let host = &prices.host;
        for g in 0..self.gpus {
            let e = g / self.tp;
            let (begin, end) = compute(
                &mut lanes.host[g],
                lanes.compute[g],
                eager,
                (host.ffn_compute, host.ffn_kernels),
                prices.dense[s][e],
            );
            lanes.compute[g] = end;
            timing.ffn_busy[g] += end - begin;
        }
        tp_all_reduce(
            lanes,
            self.tp,
            &prices.reduce[s],
            eager,
            host.collective,
            &mut timing.ffn_busy,
        );
        for g in 0..self.gpus {
            lanes.ready[s][g] = lanes.compute[g];
        }
    }

    /// Router of ubatch `s`, then its all-to-all dispatch over every GPU on the comm streams.
    fn dispatch(&mut self, s: usize, eager: bool, timing: &mut StepTiming) {
        let lanes = &mut self.lanes;
        let prices = &self.prices;
        let mut begin = 0;
        for g in 0..self.gpus {
            let e = g / self.tp;
            // The router's issue is counted with the experts' (one MoE issue per layer).
            let (router, end) = compute(
                &mut lanes.host[g],
                lanes.compute[g],
                eager,
                (0, 1),
                prices.router[s][e],
            );
            lanes.compute[g] = end;
            timing.ffn_busy[g] += end - router;
            begin = begin.max(issue(
                &mut lanes.host[g],
                lanes.compute[g].max(lanes.comm[g]),
                eager,
                prices.host.collective,
            ));
        }
        let end = begin + prices.all_to_all[s];
        for g in 0..self.gpus {
            lanes.comm[g] = end;
            timing.link_busy[g] += prices.all_to_all[s];
        }
        lanes.dispatched[s] = end;
    }

    /// Routed and shared experts of ubatch `s`, then its combine (or, without expert parallelism,
    /// the TP all-reduce); its output is the ubatch's next input.
    fn experts(&mut self, s: usize, moe: usize, eager: bool, timing: &mut StepTiming) {
        let mut begin_combine = 0;
        for g in 0..self.gpus {
            let e = g / self.tp;
            let routed = self.routed_at(s, moe, g);
            let lanes = &mut self.lanes;
            let prices = &self.prices;
            let (input, router) = if self.expert_parallel {
                (lanes.dispatched[s], 0)
            } else {
                (lanes.compute[g], prices.router[s][e])
            };
            let duration = with_composition(
                router + routed + prices.shared[s][e],
                prices.composition[s][e],
            );
            let (begin, end) = compute(
                &mut lanes.host[g],
                lanes.compute[g].max(input),
                eager,
                (prices.host.ffn_compute, prices.host.ffn_kernels),
                duration,
            );
            lanes.compute[g] = end;
            timing.ffn_busy[g] += end - begin;
            if self.expert_parallel {
                begin_combine = begin_combine.max(issue(
                    &mut lanes.host[g],
                    lanes.compute[g].max(lanes.comm[g]),
                    eager,
                    prices.host.collective,
                ));
            }
        }
        let lanes = &mut self.lanes;
        let prices = &self.prices;
        if self.expert_parallel {
            let end = begin_combine + prices.all_to_all[s];
            for g in 0..self.gpus {
                lanes.comm[g] = end;
                lanes.ready[s][g] = end;
                timing.link_busy[g] += prices.all_to_all[s];
            }
            return;
        }
        tp_all_reduce(
            lanes,
            self.tp,
            &prices.reduce[s],
            eager,
            prices.host.collective,
            &mut timing.ffn_busy,
        );
        for g in 0..self.gpus {
            lanes.ready[s][g] = lanes.compute[g];
        }
    }
}

/// A compute op on a GPU's stream free at `free`: issued on its host timeline (`issue` host time
/// over `kernels` kernels when eager), as the AFD pipeline runs its compute ops
/// (`pipeline::run_compute`). Returns `(begin, end)`.
#[inline]
fn compute(
    host: &mut u64,
    free: u64,
    eager: bool,
    (issue, kernels): (u64, u64),
    duration: u64,
) -> (u64, u64) {
    let mut won = false;
    run_compute(host, free, eager, issue, kernels, duration, &mut won)
}

/// Issues a collective on a GPU's host timeline (paying `cost` when eager) and returns when it can
/// start on a stream free at `free`.
#[inline]
fn issue(host: &mut u64, free: u64, eager: bool, cost: u64) -> u64 {
    if eager {
        *host += cost;
    }
    free.max(*host)
}

/// Each engine's TP all-reduce on its GPUs' compute streams: it starts when every member is free
/// and has issued it, ends on all of them together, and counts as busy time in `busy`.
fn tp_all_reduce(
    lanes: &mut Lanes,
    tp: usize,
    durations: &[u64],
    eager: bool,
    cost: u64,
    busy: &mut [u64],
) {
    if tp <= 1 {
        return;
    }
    for (e, &duration) in durations.iter().enumerate() {
        let gpus = e * tp..(e + 1) * tp;
        let mut begin = 0;
        for g in gpus.clone() {
            begin = begin.max(issue(&mut lanes.host[g], lanes.compute[g], eager, cost));
        }
        for g in gpus {
            lanes.compute[g] = begin + duration;
            busy[g] += duration;
        }
    }
}

#[cfg(test)]
mod tests;
