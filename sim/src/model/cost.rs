//! Cost of every operation of an AFD step, from a measured calibration profile where it has the
//! operation, otherwise from a roofline over the GPU's datasheet figures (`model/hardware.rs`).
//!
//! The cost model knows the model's shapes and the deployment's parallel layout, so callers ask in
//! tokens and rows. It is an immutable value: every price is a pure function of the model and the
//! query. What a run asked is counted where the price is asked for, in the caller's [`PriceBook`]
//! (per operation class, how many queries each source priced and how many calibrated queries fell
//! outside the measured range, clamped), which also memoises the prices. It never schedules
//! anything: the step pipeline (`pipeline.rs`) decides when each operation runs.
//!
//! Every compute price is the device time of the operation inside a CUDA graph, launch gaps between
//! its kernels included: a profile's `samples_us` are replays of back-to-back repetitions, so they
//! already hold those gaps; the roofline adds `kernels × graph_kernel_gap`. Eager launches add
//! [`CostModel::eager_kernel_gap`] per kernel on the device (callers add it; `pricing.rs`), and host
//! issue costs are separate ([`CostModel::eager_host`]). Transfers are priced as dependent hand-offs
//! (`p2p.ping_pong`, per leg): in a step each transfer waits for the one before it.

mod book;
mod calibrated;
pub mod interp;

use afd_traces::calibration::CalibrationProfile;

use crate::model::arch::ModelArch;
use crate::model::cost::interp::{InterpError, Lookup};
use crate::model::hardware::{Efficiency, GpuKind, GpuSpec};
use crate::pipeline::WaitCurve;
use crate::time::SimDuration;
use book::{Keyed, PricedOp, Rows};
pub use book::{PriceBook, UsageCounts};
use calibrated::Calibrated;
pub use calibrated::{eager_gap_fit, merge_profiles};
pub(crate) use calibrated::{median, model_matches};

/// The classes of operations the report attributes to a cost source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpClass {
    /// NCCL send/recv between an Attention and an FFN rank (hidden states and control payload).
    P2p,
    AllReduce,
    AllToAll,
    MoeRouter,
    /// Token gather before the routed experts and weighted combine after them.
    MoeDispatch,
    MoeRoutedExperts,
    MoeSharedExperts,
    /// What a whole measured MoE layer costs beyond the sum of its measured parts (`moe.layer`
    /// minus its `parts_sum_us`).
    MoeLayer,
    MlpDense,
    AttentionProj,
    AttentionMlaDecode,
    AttentionPrefill,
    /// LM head and sampling at the end of a step (`attention.lm_head` over `tokens`, when a profile
    /// has it; no probe in the catalogue measures it yet).
    LmHead,
    LaunchEager,
    LaunchGraph,
    /// Host time of an engine step outside the forward pass.
    HostStep,
}

impl OpClass {
    pub const ALL: [OpClass; 16] = [
        OpClass::P2p,
        OpClass::AllReduce,
        OpClass::AllToAll,
        OpClass::MoeRouter,
        OpClass::MoeDispatch,
        OpClass::MoeRoutedExperts,
        OpClass::MoeSharedExperts,
        OpClass::MoeLayer,
        OpClass::MlpDense,
        OpClass::AttentionProj,
        OpClass::AttentionMlaDecode,
        OpClass::AttentionPrefill,
        OpClass::LmHead,
        OpClass::LaunchEager,
        OpClass::LaunchGraph,
        OpClass::HostStep,
    ];

    /// Stable name, the calibration `op` family it is read from.
    pub fn as_str(self) -> &'static str {
        match self {
            OpClass::P2p => "p2p",
            OpClass::AllReduce => "nccl.all_reduce",
            OpClass::AllToAll => "nccl.all_to_all",
            OpClass::MoeRouter => "moe.router",
            OpClass::MoeDispatch => "moe.dispatch",
            OpClass::MoeRoutedExperts => "moe.routed_experts",
            OpClass::MoeSharedExperts => "moe.shared_experts",
            OpClass::MoeLayer => "moe.layer",
            OpClass::MlpDense => "mlp.dense",
            OpClass::AttentionProj => "attention.proj",
            OpClass::AttentionMlaDecode => "attention.mla_decode",
            OpClass::AttentionPrefill => "attention.prefill",
            OpClass::LmHead => "attention.lm_head",
            OpClass::LaunchEager => "launch.eager",
            OpClass::LaunchGraph => "launch.graph",
            OpClass::HostStep => "host.step",
        }
    }

    /// Position in [`OpClass::ALL`] (and in [`UsageCounts`]).
    pub fn index(self) -> usize {
        self as usize
    }
}

/// How the parallel layout splits work (what the cost model needs of the deployment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CostLayout {
    pub attention_tp: u32,
    pub ffn_dp: u32,
    pub ffn_tp: u32,
    /// Experts are sharded over all `ffn_dp × ffn_tp` FFN ranks (`--enable-expert-parallel`);
    /// otherwise every FFN rank holds every expert, TP-sharded.
    pub expert_parallel: bool,
}

/// A point-to-point transfer: `occupancy` on the shared inbound port, then `latency` to arrive.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransferCost {
    pub occupancy: SimDuration,
    pub latency: SimDuration,
}

impl TransferCost {
    pub fn total(self) -> SimDuration {
        self.occupancy + self.latency
    }
}

/// Per-class usage counters for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassUsage {
    pub calibrated: u64,
    pub roofline: u64,
    pub out_of_range: u64,
}

impl ClassUsage {
    /// What was counted between `before` and `self` (a later snapshot of the same counters).
    fn since(self, before: ClassUsage) -> ClassUsage {
        ClassUsage {
            calibrated: self.calibrated - before.calibrated,
            roofline: self.roofline - before.roofline,
            out_of_range: self.out_of_range - before.out_of_range,
        }
    }
}

/// Why a calibration profile cannot price this model.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    #[error("calibration table {index} (op {op:?}) {problem}")]
    Table {
        index: usize,
        op: String,
        #[source]
        problem: InterpError,
    },
    #[error("calibration table {index} (op {op:?}) has axes {found:?}, expected {expected:?}")]
    Axes {
        index: usize,
        op: String,
        found: Vec<String>,
        expected: Vec<&'static str>,
    },
}

/// Number of kernels (or NCCL calls) one operation issues; prices launch gaps. A profile's
/// `derived.kernels` replaces the default of the operation it measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCounts {
    pub attention_proj: u32,
    pub attention_decode: u32,
    pub attention_prefill: u32,
    pub router: u32,
    pub dispatch: u32,
    pub routed: u32,
    pub shared: u32,
    pub dense: u32,
    pub p2p: u32,
    pub collective: u32,
    pub lm_head: u32,
}

impl KernelCounts {
    /// Counts of a DeepSeek-style layer in vLLM eager mode [inferred from the module structure:
    /// norms, q/kv projections, rotary, output projection (10) and the attention kernel with its
    /// metadata (2); router and top-k (2), gather and combine (2), grouped gate/up, activation and
    /// down with their index set-up (5), shared MLP (3); dense MLP (4)].
    pub const fn defaults() -> KernelCounts {
        KernelCounts {
            attention_proj: 10,
            attention_decode: 2,
            attention_prefill: 3,
            router: 2,
            dispatch: 2,
            routed: 5,
            shared: 3,
            dense: 4,
            p2p: 1,
            collective: 1,
            lm_head: 4,
        }
    }

    /// Kernels of one whole MoE layer (router, dispatch, routed and shared experts).
    pub fn moe_layer(&self) -> u32 {
        self.router + self.dispatch + self.routed + self.shared
    }
}

/// Prices operations for one deployment of one model on one GPU kind.
///
/// Immutable: no price depends on an earlier one, so a model is `Sync` and can be shared. Every
/// method that prices takes the caller's [`PriceBook`], which counts the query and memoises the
/// price; a book serves one model.
#[derive(Debug)]
pub struct CostModel {
    model: ModelArch,
    spec: GpuSpec,
    efficiency: Efficiency,
    layout: CostLayout,
    kernels: KernelCounts,
    calibration: Option<Calibrated>,
    /// The real engine's step floors (`model/engine.rs`), when an engine profile was given.
    engine: Option<std::sync::Arc<crate::model::engine::EngineModel>>,
    /// Real vLLM's host path for the steps an AFD pair's roles issue op by op, when an engine
    /// profile was given for a pair (`with_vllm_host`).
    vllm_host: Option<VllmHost>,
    /// The link A↔F hand-offs take when it is not the GPUs' own (another host, or `--link`).
    afd_link: Option<AfdLink>,
}

// A cost model can be shared between threads as it is: it has no state to race on (and the tidy
// test `the_cost_model_keeps_no_state` keeps interior mutability out of its files).
const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<CostModel>();
};

/// Real vLLM's host path for an AFD pair ([`CostModel::with_vllm_host`]): the engine profile that
/// measured plain vLLM's steps, and the Attention role's graph mode (its steps without graphs run
/// the `torch.compile`d model, or op by op under `--enforce-eager`; the FFN role's run op by op in
/// either, afd-spec §5.3).
#[derive(Clone, Debug)]
pub struct VllmHost {
    pub engine: std::sync::Arc<crate::model::engine::EngineModel>,
    pub attention_mode: crate::serving::GraphMode,
}

/// The link between the Attention and FFN ranks and how many ranks of one host share it.
#[derive(Clone, Debug, PartialEq)]
pub struct AfdLink {
    pub link: crate::model::link::Link,
    /// Ranks of the busiest host sending or receiving over it at once (they share its NICs).
    pub ranks_on_host: u32,
}

impl CostModel {
    /// A cost model that prices everything from the datasheet roofline.
    pub fn roofline(model: &ModelArch, gpu: GpuKind, layout: CostLayout) -> CostModel {
        CostModel {
            model: model.clone(),
            spec: gpu.spec(),
            efficiency: Efficiency::defaults(),
            layout,
            kernels: KernelCounts::defaults(),
            calibration: None,
            engine: None,
            vllm_host: None,
            afd_link: None,
        }
    }

    /// The same model with every A↔F hand-off priced over `link` by the link model
    /// (`model/link.rs`) in place of the GPU's link or a profile's hand-off tables, which measured
    /// another link.
    pub fn with_afd_link(mut self, link: AfdLink) -> CostModel {
        self.afd_link = Some(link);
        self
    }

    /// The A↔F link, when one was given.
    pub fn afd_link(&self) -> Option<&AfdLink> {
        self.afd_link.as_ref()
    }

    /// The same model, with every step also at least as long as the real engine's floor for its
    /// shape (colocated deployments; `model/engine.rs`).
    pub fn with_engine(
        mut self,
        engine: std::sync::Arc<crate::model::engine::EngineModel>,
    ) -> CostModel {
        self.engine = Some(engine);
        self
    }

    /// The engine model, when one was given.
    pub fn engine(&self) -> Option<&crate::model::engine::EngineModel> {
        self.engine.as_deref()
    }

    /// The same model, with an AFD pair's steps issued at real vLLM's host pace: where a role runs
    /// a step without graphs, its eager issue costs are scaled to what the engine profile measured
    /// a plain vLLM step of the same shape spending on its host (`pricing::vllm_host_costs`).
    pub fn with_vllm_host(mut self, host: VllmHost) -> CostModel {
        self.vllm_host = Some(host);
        self
    }

    /// Real vLLM's host path for an AFD pair's steps, when one was given.
    pub fn vllm_host(&self) -> Option<&VllmHost> {
        self.vllm_host.as_ref()
    }

    /// A cost model that prices from `profile` wherever it has a table for this model, else from the
    /// roofline. `source` names the profile in the report (a path or a built-in name).
    pub fn calibrated(
        model: &ModelArch,
        gpu: GpuKind,
        layout: CostLayout,
        profile: &CalibrationProfile,
        source: &str,
    ) -> Result<CostModel, CostError> {
        let mut cost = CostModel::roofline(model, gpu, layout);
        cost.calibration = Some(Calibrated::from_profile(
            model,
            layout,
            profile,
            source,
            &mut cost.kernels,
        )?);
        Ok(cost)
    }

    /// Replaces the efficiency factors and launch costs (tests and what-if studies).
    pub fn with_efficiency(mut self, efficiency: Efficiency) -> CostModel {
        self.efficiency = efficiency;
        self
    }

    pub fn model(&self) -> &ModelArch {
        &self.model
    }

    pub fn layout(&self) -> CostLayout {
        self.layout
    }

    pub fn spec(&self) -> &GpuSpec {
        &self.spec
    }

    pub fn kernels(&self) -> KernelCounts {
        self.kernels
    }

    /// Name of the calibration profile in use, if any.
    pub fn calibration_name(&self) -> Option<&str> {
        self.calibration.as_ref().map(|c| c.name.as_str())
    }

    fn calibration(&self) -> Option<&Calibrated> {
        self.calibration.as_ref()
    }

    /// Roofline time of an operation inside a graph: the slower of compute and memory, never below
    /// its kernels' floor, plus one graph launch gap per kernel (what a measured replay includes).
    fn roofline_time(&self, flops: f64, bytes: f64, kernels: u32) -> SimDuration {
        let compute = flops / (self.spec.bf16_flops * self.efficiency.compute);
        let memory = bytes / (self.spec.hbm_bytes_per_s * self.efficiency.hbm);
        let floor = f64::from(kernels) * self.efficiency.kernel_floor_s;
        let gaps = f64::from(kernels) * self.graph_kernel_gap().as_secs_f64();
        SimDuration::from_secs_f64(compute.max(memory).max(floor) + gaps)
    }

    /// Bytes per activation element.
    fn dtype(&self) -> f64 {
        self.model.dtype_bytes() as f64
    }

    /// Bytes per weight element.
    fn weight(&self) -> f64 {
        self.model.weight_bytes() as f64
    }

    /// Hand-off of `rows` rows of hidden states (afd-spec §3.3) from one rank to the other: from the
    /// start of the send until the receiver has them, as one leg of a dependent exchange between
    /// compute kernels whose receiver has not waited long (`p2p.handoff` with the shortest compute,
    /// graph mode; else `p2p.ping_pong` per leg; else the one-way tables). The same on the device in
    /// graph and eager mode: the eager hand-off measures the same within 0.2 µs once its timing
    /// events are accounted for (docs/fidelity.md); eager issue costs are the host's
    /// ([`CostModel::eager_host`]).
    /// Memoised by `rows`; a memo hit counts as a query of the source that priced it.
    pub fn transfer_rows(&self, book: &mut PriceBook, rows: u32) -> TransferCost {
        book.memoised(Rows(rows), |book| {
            self.transfer_bytes(book, u64::from(rows) * self.model.row_bytes())
        })
    }

    /// Hand-off of `bytes` by one NCCL send/recv pair (see [`CostModel::transfer_rows`]).
    pub fn transfer_bytes(&self, book: &mut PriceBook, bytes: u64) -> TransferCost {
        if let Some(afd) = &self.afd_link {
            book.record(OpClass::P2p, None);
            let total = afd.link.transfer_time(bytes, afd.ranks_on_host);
            let latency = SimDuration::from_secs_f64(afd.link.latency_s).min(total);
            return TransferCost {
                occupancy: SimDuration::from_ns(total.as_ns() - latency.as_ns()),
                latency,
            };
        }
        // The eager one-way table is the last resort: its small messages time the two hosts'
        // launch skew, not the link.
        let curve = self.calibration().and_then(|c| {
            c.handoff
                .first()
                .map(|(_, curve)| curve)
                .or(c.p2p_ping_pong.as_ref())
                .or(c.p2p_graph.as_ref())
                .or(c.p2p_eager.as_ref())
        });
        let lookup = curve.map(|c| c.at(bytes as f64));
        match (book.record(OpClass::P2p, lookup), curve) {
            (Some(total_us), Some(curve)) => {
                let latency_us = curve.first_value_us().min(total_us);
                TransferCost {
                    occupancy: SimDuration::from_us_f64(total_us - latency_us),
                    latency: SimDuration::from_us_f64(latency_us),
                }
            }
            _ => TransferCost {
                occupancy: SimDuration::from_secs_f64(
                    bytes as f64 / (self.spec.link_bytes_per_s * self.efficiency.link),
                ),
                latency: SimDuration::from_secs_f64(self.spec.link_latency_s),
            },
        }
    }

    /// How long an NCCL send or receive of `rows` rows holds its stream when its peer is ready (a
    /// send, or a receive whose data has already arrived): the per-operation time of back-to-back
    /// one-way operations in a graph (`p2p.one_way`, `graph=true`), where each rank runs one NCCL
    /// kernel per operation. `None` without that table.
    pub fn nccl_busy_rows(&self, book: &mut PriceBook, rows: u32) -> Option<SimDuration> {
        book.memoised(
            Keyed::new(PricedOp::NcclBusyRows, u64::from(rows), 0),
            |_| {
                // A profile's tables measured the GPUs' own link, not the A↔F link given.
                if self.afd_link.is_some() {
                    return None;
                }
                let bytes = f64::from(rows) * self.model.row_bytes() as f64;
                self.calibration()
                    .and_then(|c| c.p2p_graph.as_ref())
                    .map(|curve| SimDuration::from_us_f64(curve.at(bytes).value_us))
            },
        )
    }

    /// How much later than [`CostModel::transfer_rows`] a receive of `rows` rows completes after its
    /// rank has waited for the data, as `(wait, extra)` points in increasing wait, nanoseconds
    /// (empty without `p2p.handoff` tables). A hand-off whose receiver idled longer is slower: in
    /// `p2p.handoff` the receiver waits for the peer's compute (`work_us`) and one leg, and each
    /// longer compute adds to the leg (on 2 × H200: +0.5 µs after 22 µs, +4 µs after 165 µs).
    pub fn handoff_wait_extra(&self, book: &mut PriceBook, rows: u32) -> WaitCurve {
        book.memoised(
            Keyed::new(PricedOp::HandoffWaitExtra, u64::from(rows), 0),
            |_| {
                let mut out = WaitCurve::default();
                if self.afd_link.is_some() {
                    return out;
                }
                let Some(handoff) = self.calibration().map(|c| &c.handoff) else {
                    return out;
                };
                let bytes = f64::from(rows) * self.model.row_bytes() as f64;
                let Some((_, first)) = handoff.first() else {
                    return out;
                };
                let base = first.at(bytes).value_us;
                for (work_us, curve) in handoff.iter().take(WaitCurve::CAPACITY) {
                    let leg = curve.at(bytes).value_us;
                    out.push(
                        SimDuration::from_us_f64(work_us + base).as_ns(),
                        SimDuration::from_us_f64((leg - base).max(0.0)).as_ns(),
                    );
                }
                out
            },
        )
    }

    /// Port occupancy per sender when `senders` Attention ranks send `rows` rows each to one FFN rank
    /// at once (afd-spec fan-in): from `p2p.fan_in` when measured for this sender count, else the
    /// one-way occupancy (the port then serialises the senders).
    pub fn fan_in_occupancy(&self, book: &mut PriceBook, rows: u32, senders: u32) -> SimDuration {
        book.memoised(
            Keyed::new(
                PricedOp::FanInOccupancy,
                u64::from(rows),
                u64::from(senders),
            ),
            |book| {
                let single = self.transfer_rows(book, rows);
                if senders <= 1 {
                    return single.occupancy;
                }
                let curve = self
                    .calibration()
                    .filter(|_| self.afd_link.is_none())
                    .and_then(|c| c.fan_in.iter().find(|(n, _)| *n == senders).map(|(_, c)| c));
                let bytes = f64::from(rows) * self.model.row_bytes() as f64;
                match curve {
                    Some(curve) => {
                        let found = curve.at(bytes);
                        book.record(OpClass::P2p, Some(found));
                        let total = SimDuration::from_us_f64(found.value_us);
                        SimDuration::from_ns(
                            total.as_ns().saturating_sub(single.latency.as_ns())
                                / u64::from(senders),
                        )
                    }
                    None => single.occupancy,
                }
            },
        )
    }

    /// Ring all-reduce of `rows` rows over `ranks` GPUs (Attention TP after `o_proj`; FFN TP after
    /// the experts, afd-spec §3.7).
    pub fn all_reduce_rows(&self, book: &mut PriceBook, rows: u32, ranks: u32) -> SimDuration {
        self.collective_rows(book, Collective::AllReduce, rows, ranks)
    }

    /// All-to-all of `rows` rows per rank over `ranks` GPUs (FFN DP + EP dispatch or combine).
    pub fn all_to_all_rows(&self, book: &mut PriceBook, rows: u32, ranks: u32) -> SimDuration {
        self.collective_rows(book, Collective::AllToAll, rows, ranks)
    }

    /// A collective of `rows` rows over `ranks` GPUs: the profile's curve for that group size, else
    /// the roofline, `hops` link latencies plus `volume` × (n − 1)/n of the bytes over the link.
    fn collective_rows(
        &self,
        book: &mut PriceBook,
        collective: Collective,
        rows: u32,
        ranks: u32,
    ) -> SimDuration {
        let (op, class, hops, volume) = match collective {
            // A ring sends and receives every byte's share twice: reduce-scatter, then all-gather.
            Collective::AllReduce => (PricedOp::AllReduceRows, OpClass::AllReduce, 2.0, 2.0),
            Collective::AllToAll => (PricedOp::AllToAllRows, OpClass::AllToAll, 1.0, 1.0),
        };
        book.memoised(Keyed::new(op, u64::from(rows), u64::from(ranks)), |book| {
            if ranks <= 1 {
                return SimDuration::ZERO;
            }
            let bytes = f64::from(rows) * self.model.row_bytes() as f64;
            let lookup = self.calibration().and_then(|c| {
                let table = match collective {
                    Collective::AllReduce => &c.all_reduce,
                    Collective::AllToAll => &c.all_to_all,
                };
                table
                    .iter()
                    .find(|(n, _)| *n == ranks)
                    .map(|(_, curve)| curve.at(bytes))
            });
            if let Some(us) = book.record(class, lookup) {
                return SimDuration::from_us_f64(us);
            }
            let n = f64::from(ranks);
            let wire = volume * (n - 1.0) / n * bytes
                / (self.spec.link_bytes_per_s * self.efficiency.link);
            SimDuration::from_secs_f64(hops * self.spec.link_latency_s + wire)
        })
    }

    /// Router (gate GEMM + top-k) of one MoE layer over `tokens` rows.
    pub fn router(&self, book: &mut PriceBook, tokens: u32) -> SimDuration {
        book.memoised(Keyed::new(PricedOp::Router, u64::from(tokens), 0), |book| {
            let lookup = self
                .calibration()
                .and_then(|c| c.router.as_ref().map(|curve| curve.at(f64::from(tokens))));
            if let Some(us) = book.record(OpClass::MoeRouter, lookup) {
                return SimDuration::from_us_f64(us);
            }
            let params = self.model.router_params() as f64;
            let t = f64::from(tokens);
            self.roofline_time(
                2.0 * t * params,
                params * self.weight() + t * f64::from(self.model.hidden()) * self.dtype(),
                self.kernels.router,
            )
        })
    }

    /// Token gather before the routed experts and the weighted combine after them, over `tokens`
    /// rows of one FFN rank (`moe.dispatch`).
    pub fn moe_dispatch(&self, book: &mut PriceBook, tokens: u32) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::MoeDispatch, u64::from(tokens), 0),
            |book| {
                let lookup = self
                    .calibration()
                    .and_then(|c| c.dispatch.as_ref().map(|curve| curve.at(f64::from(tokens))));
                if let Some(us) = book.record(OpClass::MoeDispatch, lookup) {
                    return SimDuration::from_us_f64(us);
                }
                // Gather reads and writes `top_k` copies of each row; combine reads them and writes one.
                let rows = f64::from(tokens) * f64::from(self.model.experts_per_token());
                let bytes = (3.0 * rows + f64::from(tokens))
                    * f64::from(self.model.hidden())
                    * self.dtype();
                self.roofline_time(0.0, bytes, self.kernels.dispatch)
            },
        )
    }

    /// What a whole MoE layer over `tokens` rows costs beyond the sum of its parts, in signed
    /// nanoseconds: `moe.layer` minus its `parts_sum_us` (router + dispatch + routed grid at the
    /// layer's own routings + shared), both measured by the same probe run. The parts are each
    /// timed back to back with themselves; in a layer they follow one another and the router's
    /// and dispatch's small working sets are no longer warm in L2. Zero without the table.
    pub fn moe_composition_ns(&self, book: &mut PriceBook, tokens: u32) -> i64 {
        book.memoised(
            Keyed::new(PricedOp::MoeCompositionNs, u64::from(tokens), 0),
            |book| {
                let lookup = self.calibration().and_then(|c| {
                    c.composition
                        .as_ref()
                        .map(|curve| curve.at(f64::from(tokens)))
                });
                match lookup {
                    Some(found) => {
                        book.record(OpClass::MoeLayer, Some(found));
                        crate::time::round_half_away(found.value_us * 1e3) as i64
                    }
                    None => 0,
                }
            },
        )
    }

    /// Routed experts of one FFN rank: `active` local experts, each padded to `tokens_per_expert`
    /// rows (the calibration axes). Without expert parallelism every rank runs every expert at
    /// `1/ffn_tp` width.
    pub fn routed_experts(
        &self,
        book: &mut PriceBook,
        active: u32,
        tokens_per_expert: u32,
    ) -> SimDuration {
        if active == 0 {
            return SimDuration::ZERO;
        }
        let width = if self.layout.expert_parallel {
            1.0
        } else {
            f64::from(self.layout.ffn_tp.max(1))
        };
        let lookup = self.calibration().and_then(|c| {
            c.routed
                .as_ref()
                .map(|grid| grid.at(f64::from(active), f64::from(tokens_per_expert)))
        });
        if let Some(us) = book.record(OpClass::MoeRoutedExperts, lookup) {
            return SimDuration::from_us_f64(us / width);
        }
        // Weights only on the memory side: a decode MoE layer reads ~277 MB of experts per DeepSeek-V2-Lite
        // EP rank against ≤ 3 MB of activations, and leaving them out keeps the cost a function of
        // the active experts alone while bandwidth-bound, as the grouped GEMM's time is.
        let params = self.model.expert_params() as f64 * f64::from(active) / width;
        self.roofline_time(
            2.0 * f64::from(tokens_per_expert) * params,
            params * self.weight(),
            self.kernels.routed,
        )
    }

    /// Fused shared-expert MLP over `tokens` rows, TP-sharded over the FFN TP group.
    pub fn shared_experts(&self, book: &mut PriceBook, tokens: u32) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::SharedExperts, u64::from(tokens), 0),
            |book| {
                if self.model.shared_expert_params() == 0 || !self.model.has_moe() {
                    return SimDuration::ZERO;
                }
                self.sharded_mlp(
                    book,
                    OpClass::MoeSharedExperts,
                    |c| c.shared.as_ref(),
                    tokens,
                    self.layout.ffn_tp,
                    (self.model.shared_expert_params(), self.kernels.shared),
                )
            },
        )
    }

    /// Dense MLP of the first layers over `tokens` rows, TP-sharded (afd-spec §3.2: FFN owns it).
    pub fn dense_mlp(&self, book: &mut PriceBook, tokens: u32) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::DenseMlp, u64::from(tokens), 0),
            |book| {
                self.sharded_mlp(
                    book,
                    OpClass::MlpDense,
                    |c| c.dense.as_ref(),
                    tokens,
                    self.layout.ffn_tp,
                    (self.model.dense_mlp_params(), self.kernels.dense),
                )
            },
        )
    }

    /// An MLP-shaped op over `tokens` rows split over `tp` ranks: the profile's curve for the whole
    /// op (recorded as `class`) over `tp`, else the roofline of `params` over `tp` in `kernels`.
    fn sharded_mlp(
        &self,
        book: &mut PriceBook,
        class: OpClass,
        curve: impl FnOnce(&Calibrated) -> Option<&interp::Curve>,
        tokens: u32,
        tp: u32,
        (params, kernels): (u64, u32),
    ) -> SimDuration {
        let tp = f64::from(tp.max(1));
        let lookup = self
            .calibration()
            .and_then(|c| curve(c).map(|curve| curve.at(f64::from(tokens))));
        if let Some(us) = book.record(class, lookup) {
            return SimDuration::from_us_f64(us / tp);
        }
        self.mlp_roofline(params as f64 / tp, tokens, kernels)
    }

    fn mlp_roofline(&self, params: f64, tokens: u32, kernels: u32) -> SimDuration {
        let t = f64::from(tokens);
        self.roofline_time(
            2.0 * t * params,
            params * self.weight() + 2.0 * t * f64::from(self.model.hidden()) * self.dtype(),
            kernels,
        )
    }

    /// One layer's Attention-side projections and norms over `tokens` rows on one Attention rank.
    pub fn attention_proj(&self, book: &mut PriceBook, tokens: u32) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::AttentionProj, u64::from(tokens), 0),
            |book| {
                self.sharded_mlp(
                    book,
                    OpClass::AttentionProj,
                    |c| c.proj.as_ref(),
                    tokens,
                    self.layout.attention_tp,
                    (
                        self.model.attention_params_per_layer(),
                        self.kernels.attention_proj,
                    ),
                )
            },
        )
    }

    /// One layer's decode attention over `batch` sequences whose contexts sum to `context_sum`
    /// tokens. MLA reads the whole latent cache on every TP rank; only the heads are split.
    pub fn attention_decode(
        &self,
        book: &mut PriceBook,
        batch: u32,
        context_sum: u64,
    ) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::AttentionDecode, u64::from(batch), context_sum),
            |book| {
                if batch == 0 {
                    return SimDuration::ZERO;
                }
                let mean_context = context_sum as f64 / f64::from(batch);
                let lookup = self.calibration().and_then(|c| {
                    c.mla_decode
                        .as_ref()
                        .map(|grid| grid.at(f64::from(batch), mean_context))
                });
                if let Some(us) = book.record(OpClass::AttentionMlaDecode, lookup) {
                    return SimDuration::from_us_f64(us);
                }
                let tp = f64::from(self.layout.attention_tp.max(1));
                let ctx = context_sum as f64;
                // A hybrid model's layer is its full-attention share of a softmax layer and the rest of a
                // linear one, which reads and writes each sequence's state once a token.
                let full = self.model.full_attention_share();
                let sequences = f64::from(batch);
                let flops = full * ctx * self.model.attention_flops_per_context_token() as f64 / tp
                    + (1.0 - full)
                        * sequences
                        * self.model.linear_attention_flops_per_token() as f64
                        / tp;
                let bytes = full
                    * ctx
                    * self
                        .model
                        .kv_bytes_per_token_layer(self.layout.attention_tp)
                        as f64
                    + (1.0 - full)
                        * sequences
                        * 2.0
                        * self
                            .model
                            .linear_state_bytes_per_layer(self.layout.attention_tp)
                            as f64;
                self.roofline_time(flops, bytes, self.kernels.attention_decode)
            },
        )
    }

    /// One layer's prefill attention for a chunk of `tokens` tokens on top of `context` cached ones.
    pub fn attention_prefill(
        &self,
        book: &mut PriceBook,
        tokens: u32,
        context: u32,
    ) -> SimDuration {
        book.memoised(
            Keyed::new(
                PricedOp::AttentionPrefill,
                u64::from(tokens),
                u64::from(context),
            ),
            |book| {
                if tokens == 0 {
                    return SimDuration::ZERO;
                }
                let tp = f64::from(self.layout.attention_tp.max(1));
                let lookup = self.calibration().and_then(|c| {
                    c.prefill
                        .as_ref()
                        .map(|grid| grid.at(f64::from(tokens), f64::from(context)))
                });
                if let Some(us) = book.record(OpClass::AttentionPrefill, lookup) {
                    return SimDuration::from_us_f64(us / tp);
                }
                // Causal attention over the chunk: each new token sees the cached context plus half the chunk.
                // A hybrid layer: its full-attention share of that, the rest a linear layer's chunked scan
                // (its per-token work, reading and writing the sequence's state once).
                let t = f64::from(tokens);
                let full = self.model.full_attention_share();
                let pairs = t * (f64::from(context) + t / 2.0);
                let flops = full * pairs * self.model.attention_flops_per_context_token() as f64
                    / tp
                    + (1.0 - full) * t * self.model.linear_attention_flops_per_token() as f64 / tp;
                let bytes = full
                    * (f64::from(context) + t)
                    * self
                        .model
                        .kv_bytes_per_token_layer(self.layout.attention_tp)
                        as f64
                    + (1.0 - full)
                        * 2.0
                        * self
                            .model
                            .linear_state_bytes_per_layer(self.layout.attention_tp)
                            as f64;
                self.roofline_time(flops, bytes, self.kernels.attention_prefill)
            },
        )
    }

    /// LM head and sampling for `rows` sampled sequences on one Attention rank (vocab-parallel).
    pub fn lm_head(&self, book: &mut PriceBook, rows: u32) -> SimDuration {
        book.memoised(Keyed::new(PricedOp::LmHead, u64::from(rows), 0), |book| {
            let lookup = self.calibration().and_then(|c| {
                c.lm_head
                    .as_ref()
                    .map(|curve| curve.at(f64::from(rows.max(1))))
            });
            if let Some(us) = book.record(OpClass::LmHead, lookup) {
                return SimDuration::from_us_f64(us);
            }
            let tp = f64::from(self.layout.attention_tp.max(1));
            // `mlp_roofline` prices three projections of `params`; the LM head is one.
            self.mlp_roofline(
                self.model.lm_head_params() as f64 / tp / 3.0,
                rows.max(1),
                self.kernels.lm_head,
            )
        })
    }

    /// Host time to issue an operation of `kernels` kernels in eager mode; `class` selects a
    /// measured `derived.host_us` when the profile has one for that operation.
    pub fn eager_host(&self, book: &mut PriceBook, class: OpClass, kernels: u32) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::EagerHost, class as u64, u64::from(kernels)),
            |book| {
                if let Some(us) = self.calibration().and_then(|c| c.host_us[class.index()]) {
                    book.record(
                        OpClass::LaunchEager,
                        Some(Lookup {
                            value_us: us,
                            out_of_range: false,
                        }),
                    );
                    return SimDuration::from_us_f64(us);
                }
                let lookup = self.calibration().and_then(|c| {
                    c.launch_eager.as_ref().map(|curve| {
                        let found = curve.at(f64::from(kernels.max(1)));
                        Lookup {
                            value_us: found.value_us,
                            out_of_range: found.out_of_range,
                        }
                    })
                });
                if let Some(us) = book.record(OpClass::LaunchEager, lookup) {
                    return SimDuration::from_us_f64(us);
                }
                SimDuration::from_secs_f64(
                    f64::from(kernels) * self.efficiency.eager_host_per_kernel_s,
                )
            },
        )
    }

    /// Host time to launch one captured graph.
    pub fn graph_launch(&self, book: &mut PriceBook) -> SimDuration {
        let lookup = self
            .calibration()
            .and_then(|c| c.launch_graph.as_ref().map(|curve| curve.at(1.0)));
        if let Some(us) = book.record(OpClass::LaunchGraph, lookup) {
            return SimDuration::from_us_f64(us);
        }
        SimDuration::from_secs_f64(self.efficiency.graph_launch_s)
    }

    /// Device gap between consecutive kernels of a graph, which roofline prices add per kernel: the
    /// slope of the measured `launch.graph` table (replay time per extra kernel) when a profile has
    /// one, else the default. Calibrated prices already contain it.
    pub fn graph_kernel_gap(&self) -> SimDuration {
        if let Some(curve) = self.calibration().and_then(|c| c.launch_graph.as_ref())
            && let Some(slope_us) = curve.slope_per_unit()
        {
            return SimDuration::from_us_f64(slope_us);
        }
        SimDuration::from_secs_f64(self.efficiency.graph_kernel_gap_s)
    }

    /// Host time of one engine step outside the forward pass, for `requests` scheduled requests.
    pub fn step_host(&self, book: &mut PriceBook, requests: u32) -> SimDuration {
        book.memoised(
            Keyed::new(PricedOp::StepHost, u64::from(requests), 0),
            |book| {
                let lookup = self.calibration().and_then(|c| {
                    c.host_step
                        .as_ref()
                        .map(|curve| curve.at(f64::from(requests)))
                });
                if let Some(us) = book.record(OpClass::HostStep, lookup) {
                    return SimDuration::from_us_f64(us);
                }
                SimDuration::from_secs_f64(
                    self.efficiency.step_host_s
                        + f64::from(requests) * self.efficiency.step_host_per_request_s,
                )
            },
        )
    }

    /// Extra device time of one eagerly launched kernel over the same kernel in a graph, when the
    /// host has queued it ahead: the slope of a robust line through `eager_us − samples_us` against
    /// `kernels` over the profile's operations whose eager runs were device-bound (see
    /// [`eager_gap_fit`]); the intercept, the event pair around each timed eager run, is left out.
    /// Without such points, the default (`Efficiency::eager_kernel_gap_s`).
    pub fn eager_kernel_gap(&self) -> SimDuration {
        match self.calibration().and_then(|c| c.eager_gap_us) {
            Some(us) => SimDuration::from_us_f64(us),
            None => SimDuration::from_secs_f64(self.efficiency.eager_kernel_gap_s),
        }
    }

    /// Host time of the FFN worker loop between steps once the control message has arrived: it
    /// reads the 8-byte size and then the payload, each a receive and a copy to the host followed
    /// by a synchronisation (afd-spec §3.4, §6.2). Calibrated: twice `launch.eager` at 2 kernels
    /// (host time to launch two small operations until they have run); else the default.
    pub fn ffn_loop_host(&self, book: &mut PriceBook) -> SimDuration {
        let lookup = self
            .calibration()
            .and_then(|c| c.launch_eager.as_ref().map(|curve| curve.at(2.0)));
        if let Some(us) = book.record(OpClass::LaunchEager, lookup) {
            return SimDuration::from_us_f64(2.0 * us);
        }
        SimDuration::from_secs_f64(self.efficiency.ffn_loop_host_s)
    }
}

/// The collectives priced by rows and group size.
#[derive(Clone, Copy)]
enum Collective {
    AllReduce,
    AllToAll,
}

#[cfg(test)]
mod tests;
