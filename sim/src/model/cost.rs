//! Cost of every operation of an AFD step, from a measured calibration profile where it has the
//! operation, otherwise from a roofline over the GPU's datasheet figures (`model/hardware.rs`).
//!
//! The cost model knows the model's shapes and the deployment's parallel layout, so callers ask in
//! tokens and rows. It counts, per operation class, how many queries each source priced and how
//! many calibrated queries fell outside the measured range (clamped). It never schedules anything:
//! the step pipeline (`pipeline.rs`) decides when each operation runs.

pub mod interp;

use std::cell::{Cell, RefCell};

use afd_traces::calibration::{CalibrationProfile, CostTable};

use crate::model::arch::ModelArch;
use crate::model::cost::interp::{Curve, Grid, InterpError, Lookup};
use crate::model::hardware::{Efficiency, GpuKind, GpuSpec};
use crate::time::SimDuration;

/// The classes of operations the report attributes to a cost source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum OpClass {
    /// NCCL send/recv between an Attention and an FFN rank (hidden states and control payload).
    P2p,
    AllReduce,
    AllToAll,
    MoeRouter,
    MoeRoutedExperts,
    MoeSharedExperts,
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
    pub const ALL: [OpClass; 14] = [
        OpClass::P2p,
        OpClass::AllReduce,
        OpClass::AllToAll,
        OpClass::MoeRouter,
        OpClass::MoeRoutedExperts,
        OpClass::MoeSharedExperts,
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
            OpClass::MoeRoutedExperts => "moe.routed_experts",
            OpClass::MoeSharedExperts => "moe.shared_experts",
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

    fn index(self) -> usize {
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

/// Number of kernels (or NCCL calls) one operation issues; prices eager launch gaps and graph gaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCounts {
    pub attention_layer: u32,
    pub moe_layer: u32,
    pub dense_layer: u32,
    pub p2p: u32,
    pub collective: u32,
    pub lm_head: u32,
}

impl KernelCounts {
    /// Counts of a DeepSeek-style layer in vLLM eager mode [inferred from the module structure:
    /// norms, q/kv projections, rotary, attention kernel and metadata, output projection; router,
    /// top-k, grouped gate/up, activation, down, combine, shared MLP].
    pub const fn defaults() -> KernelCounts {
        KernelCounts {
            attention_layer: 12,
            moe_layer: 12,
            dense_layer: 4,
            p2p: 1,
            collective: 1,
            lm_head: 4,
        }
    }
}

/// Prices operations for one deployment of one model on one GPU kind.
#[derive(Debug)]
pub struct CostModel {
    model: ModelArch,
    spec: GpuSpec,
    efficiency: Efficiency,
    layout: CostLayout,
    kernels: KernelCounts,
    calibration: Option<Calibrated>,
    usage: [Cell<ClassUsage>; OpClass::ALL.len()],
    // Memo caches by row count; exact keys only.
    memo_p2p: RefCell<Vec<Option<MemoTransfer>>>,
}

/// A memoised transfer and the lookup that priced it (to count memo hits by source).
type MemoTransfer = (TransferCost, Option<Lookup>);

/// The calibrated tables this model can use, already made interpolable.
#[derive(Debug, Default)]
struct Calibrated {
    name: String,
    p2p_eager: Option<Curve>,
    p2p_graph: Option<Curve>,
    fan_in: Vec<(u32, Curve)>,
    all_reduce: Vec<(u32, Curve)>,
    all_to_all: Vec<(u32, Curve)>,
    router: Option<Curve>,
    routed: Option<Grid>,
    shared: Option<Curve>,
    dense: Option<Curve>,
    proj: Option<Curve>,
    mla_decode: Option<Grid>,
    prefill: Option<Grid>,
    launch_eager: Option<Curve>,
    launch_graph: Option<Curve>,
    host_step: Option<Curve>,
    lm_head: Option<Curve>,
    host_us: [Option<f64>; OpClass::ALL.len()],
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
            usage: Default::default(),
            memo_p2p: RefCell::new(Vec::new()),
        }
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
        cost.calibration = Some(Calibrated::from_profile(model, layout, profile, source)?);
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

    /// Usage counters of one class so far.
    pub fn usage(&self, class: OpClass) -> ClassUsage {
        self.usage[class.index()].get()
    }

    /// Where each class was priced from: `"calibration"`, `"roofline"`, `"calibration+roofline"`, or
    /// `"unused"`.
    pub fn source_of(&self, class: OpClass) -> &'static str {
        let usage = self.usage(class);
        match (usage.calibrated > 0, usage.roofline > 0) {
            (true, true) => "calibration+roofline",
            (true, false) => "calibration",
            (false, true) => "roofline",
            (false, false) => "unused",
        }
    }

    fn record(&self, class: OpClass, lookup: Option<Lookup>) -> Option<f64> {
        let cell = &self.usage[class.index()];
        let mut usage = cell.get();
        let out = match lookup {
            Some(found) => {
                usage.calibrated += 1;
                usage.out_of_range += u64::from(found.out_of_range);
                Some(found.value_us)
            }
            None => {
                usage.roofline += 1;
                None
            }
        };
        cell.set(usage);
        out
    }

    fn calibration(&self) -> Option<&Calibrated> {
        self.calibration.as_ref()
    }

    /// Roofline time of an operation: the slower of compute and memory, never below its kernels'
    /// floor.
    fn roofline_time(&self, flops: f64, bytes: f64, kernels: u32) -> SimDuration {
        let compute = flops / (self.spec.bf16_flops * self.efficiency.compute);
        let memory = bytes / (self.spec.hbm_bytes_per_s * self.efficiency.hbm);
        let floor = f64::from(kernels) * self.efficiency.kernel_floor_s;
        SimDuration::from_secs_f64(compute.max(memory).max(floor))
    }

    /// Bytes per activation element.
    fn dtype(&self) -> f64 {
        self.model.dtype_bytes() as f64
    }

    /// Bytes per weight element.
    fn weight(&self) -> f64 {
        self.model.weight_bytes() as f64
    }

    /// One-way transfer of `rows` rows of hidden states (afd-spec §3.3), in graph or eager mode.
    /// Memoised by `(rows, graph)`; a memo hit counts as a query of the source that priced it.
    pub fn transfer_rows(&self, rows: u32, graph: bool) -> TransferCost {
        let slot = rows as usize * 2 + usize::from(graph);
        if let Some(Some((cost, lookup))) = self.memo_p2p.borrow().get(slot) {
            self.record(OpClass::P2p, *lookup);
            return *cost;
        }
        let (cost, lookup) =
            self.transfer_bytes_with_lookup(u64::from(rows) * self.model.row_bytes(), graph);
        let mut memo = self.memo_p2p.borrow_mut();
        if memo.len() <= slot {
            memo.resize(slot + 1, None);
        }
        memo[slot] = Some((cost, lookup));
        cost
    }

    /// One-way NCCL send/recv of `bytes`.
    pub fn transfer_bytes(&self, bytes: u64, graph: bool) -> TransferCost {
        self.transfer_bytes_with_lookup(bytes, graph).0
    }

    fn transfer_bytes_with_lookup(
        &self,
        bytes: u64,
        graph: bool,
    ) -> (TransferCost, Option<Lookup>) {
        let curve = self.calibration().and_then(|c| {
            if graph {
                c.p2p_graph.as_ref().or(c.p2p_eager.as_ref())
            } else {
                c.p2p_eager.as_ref().or(c.p2p_graph.as_ref())
            }
        });
        let lookup = curve.map(|c| c.at(bytes as f64));
        let cost = match (self.record(OpClass::P2p, lookup), curve) {
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
        };
        (cost, lookup)
    }

    /// Port occupancy per sender when `senders` Attention ranks send `rows` rows each to one FFN rank
    /// at once (afd-spec fan-in): from `p2p.fan_in` when measured for this sender count, else the
    /// one-way occupancy (the port then serialises the senders).
    pub fn fan_in_occupancy(&self, rows: u32, senders: u32, graph: bool) -> SimDuration {
        let single = self.transfer_rows(rows, graph);
        if senders <= 1 {
            return single.occupancy;
        }
        let curve = self
            .calibration()
            .and_then(|c| c.fan_in.iter().find(|(n, _)| *n == senders).map(|(_, c)| c));
        let bytes = f64::from(rows) * self.model.row_bytes() as f64;
        match curve {
            Some(curve) => {
                let found = curve.at(bytes);
                self.record(OpClass::P2p, Some(found));
                let total = SimDuration::from_us_f64(found.value_us);
                SimDuration::from_ns(
                    total.as_ns().saturating_sub(single.latency.as_ns()) / u64::from(senders),
                )
            }
            None => single.occupancy,
        }
    }

    /// Ring all-reduce of `rows` rows over `ranks` GPUs (Attention TP after `o_proj`; FFN TP after
    /// the experts, afd-spec §3.7).
    pub fn all_reduce_rows(&self, rows: u32, ranks: u32) -> SimDuration {
        if ranks <= 1 {
            return SimDuration::ZERO;
        }
        let bytes = f64::from(rows) * self.model.row_bytes() as f64;
        let lookup = self.calibration().and_then(|c| {
            c.all_reduce
                .iter()
                .find(|(n, _)| *n == ranks)
                .map(|(_, curve)| curve.at(bytes))
        });
        if let Some(us) = self.record(OpClass::AllReduce, lookup) {
            return SimDuration::from_us_f64(us);
        }
        let n = f64::from(ranks);
        let wire =
            2.0 * (n - 1.0) / n * bytes / (self.spec.link_bytes_per_s * self.efficiency.link);
        SimDuration::from_secs_f64(2.0 * self.spec.link_latency_s + wire)
    }

    /// All-to-all of `rows` rows per rank over `ranks` GPUs (FFN DP + EP dispatch or combine).
    pub fn all_to_all_rows(&self, rows: u32, ranks: u32) -> SimDuration {
        if ranks <= 1 {
            return SimDuration::ZERO;
        }
        let bytes = f64::from(rows) * self.model.row_bytes() as f64;
        let lookup = self.calibration().and_then(|c| {
            c.all_to_all
                .iter()
                .find(|(n, _)| *n == ranks)
                .map(|(_, curve)| curve.at(bytes))
        });
        if let Some(us) = self.record(OpClass::AllToAll, lookup) {
            return SimDuration::from_us_f64(us);
        }
        let n = f64::from(ranks);
        let wire = (n - 1.0) / n * bytes / (self.spec.link_bytes_per_s * self.efficiency.link);
        SimDuration::from_secs_f64(self.spec.link_latency_s + wire)
    }

    /// Router (gate GEMM + top-k) of one MoE layer over `tokens` rows.
    pub fn router(&self, tokens: u32) -> SimDuration {
        let lookup = self
            .calibration()
            .and_then(|c| c.router.as_ref().map(|curve| curve.at(f64::from(tokens))));
        if let Some(us) = self.record(OpClass::MoeRouter, lookup) {
            return SimDuration::from_us_f64(us);
        }
        let params = self.model.router_params() as f64;
        let t = f64::from(tokens);
        self.roofline_time(
            2.0 * t * params,
            params * self.weight() + t * f64::from(self.model.hidden()) * self.dtype(),
            2,
        )
    }

    /// Routed experts of one FFN rank: `active` local experts, each padded to `tokens_per_expert`
    /// rows (the calibration axes). Without expert parallelism every rank runs every expert at
    /// `1/ffn_tp` width.
    pub fn routed_experts(&self, active: u32, tokens_per_expert: u32) -> SimDuration {
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
        if let Some(us) = self.record(OpClass::MoeRoutedExperts, lookup) {
            return SimDuration::from_us_f64(us / width);
        }
        // Weights only on the memory side: a decode MoE layer reads ~277 MB of experts per DeepSeek-V2-Lite
        // EP rank against ≤ 3 MB of activations, and leaving them out keeps the cost a function of
        // the active experts alone while bandwidth-bound, as the grouped GEMM's time is.
        let params = self.model.expert_params() as f64 * f64::from(active) / width;
        self.roofline_time(
            2.0 * f64::from(tokens_per_expert) * params,
            params * self.weight(),
            self.kernels.moe_layer.saturating_sub(4),
        )
    }

    /// Fused shared-expert MLP over `tokens` rows, TP-sharded over the FFN TP group.
    pub fn shared_experts(&self, tokens: u32) -> SimDuration {
        if self.model.shared_expert_params() == 0 || !self.model.has_moe() {
            return SimDuration::ZERO;
        }
        let tp = f64::from(self.layout.ffn_tp.max(1));
        let lookup = self
            .calibration()
            .and_then(|c| c.shared.as_ref().map(|curve| curve.at(f64::from(tokens))));
        if let Some(us) = self.record(OpClass::MoeSharedExperts, lookup) {
            return SimDuration::from_us_f64(us / tp);
        }
        self.mlp_roofline(self.model.shared_expert_params() as f64 / tp, tokens, 3)
    }

    /// Dense MLP of the first layers over `tokens` rows, TP-sharded (afd-spec §3.2: FFN owns it).
    pub fn dense_mlp(&self, tokens: u32) -> SimDuration {
        let tp = f64::from(self.layout.ffn_tp.max(1));
        let lookup = self
            .calibration()
            .and_then(|c| c.dense.as_ref().map(|curve| curve.at(f64::from(tokens))));
        if let Some(us) = self.record(OpClass::MlpDense, lookup) {
            return SimDuration::from_us_f64(us / tp);
        }
        self.mlp_roofline(
            self.model.dense_mlp_params() as f64 / tp,
            tokens,
            self.kernels.dense_layer,
        )
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
    pub fn attention_proj(&self, tokens: u32) -> SimDuration {
        let tp = f64::from(self.layout.attention_tp.max(1));
        let lookup = self
            .calibration()
            .and_then(|c| c.proj.as_ref().map(|curve| curve.at(f64::from(tokens))));
        if let Some(us) = self.record(OpClass::AttentionProj, lookup) {
            return SimDuration::from_us_f64(us / tp);
        }
        self.mlp_roofline(
            self.model.attention_params_per_layer() as f64 / tp,
            tokens,
            self.kernels.attention_layer.saturating_sub(2),
        )
    }

    /// One layer's decode attention over `batch` sequences whose contexts sum to `context_sum`
    /// tokens. MLA reads the whole latent cache on every TP rank; only the heads are split.
    pub fn attention_decode(&self, batch: u32, context_sum: u64) -> SimDuration {
        if batch == 0 {
            return SimDuration::ZERO;
        }
        let mean_context = context_sum as f64 / f64::from(batch);
        let lookup = self.calibration().and_then(|c| {
            c.mla_decode
                .as_ref()
                .map(|grid| grid.at(f64::from(batch), mean_context))
        });
        if let Some(us) = self.record(OpClass::AttentionMlaDecode, lookup) {
            return SimDuration::from_us_f64(us);
        }
        let tp = f64::from(self.layout.attention_tp.max(1));
        let ctx = context_sum as f64;
        let flops = ctx * self.model.attention_flops_per_context_token() as f64 / tp;
        let bytes = ctx
            * self
                .model
                .kv_bytes_per_token_layer(self.layout.attention_tp) as f64;
        self.roofline_time(flops, bytes, 2)
    }

    /// One layer's prefill attention for a chunk of `tokens` tokens on top of `context` cached ones.
    pub fn attention_prefill(&self, tokens: u32, context: u32) -> SimDuration {
        if tokens == 0 {
            return SimDuration::ZERO;
        }
        let tp = f64::from(self.layout.attention_tp.max(1));
        let lookup = self.calibration().and_then(|c| {
            c.prefill
                .as_ref()
                .map(|grid| grid.at(f64::from(tokens), f64::from(context)))
        });
        if let Some(us) = self.record(OpClass::AttentionPrefill, lookup) {
            return SimDuration::from_us_f64(us / tp);
        }
        // Causal attention over the chunk: each new token sees the cached context plus half the chunk.
        let t = f64::from(tokens);
        let pairs = t * (f64::from(context) + t / 2.0);
        let flops = pairs * self.model.attention_flops_per_context_token() as f64 / tp;
        let bytes = (f64::from(context) + t)
            * self
                .model
                .kv_bytes_per_token_layer(self.layout.attention_tp) as f64;
        self.roofline_time(flops, bytes, 3)
    }

    /// LM head and sampling for `rows` sampled sequences on one Attention rank (vocab-parallel).
    pub fn lm_head(&self, rows: u32) -> SimDuration {
        let lookup = self.calibration().and_then(|c| {
            c.lm_head
                .as_ref()
                .map(|curve| curve.at(f64::from(rows.max(1))))
        });
        if let Some(us) = self.record(OpClass::LmHead, lookup) {
            return SimDuration::from_us_f64(us);
        }
        let tp = f64::from(self.layout.attention_tp.max(1));
        // `mlp_roofline` prices three projections of `params`; the LM head is one.
        self.mlp_roofline(
            self.model.lm_head_params() as f64 / tp / 3.0,
            rows.max(1),
            self.kernels.lm_head,
        )
    }

    /// Host time to issue an operation of `kernels` kernels in eager mode; `class` selects a
    /// measured `derived.host_us` when the profile has one for that operation.
    pub fn eager_host(&self, class: OpClass, kernels: u32) -> SimDuration {
        if let Some(us) = self.calibration().and_then(|c| c.host_us[class.index()]) {
            self.record(
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
        if let Some(us) = self.record(OpClass::LaunchEager, lookup) {
            return SimDuration::from_us_f64(us);
        }
        SimDuration::from_secs_f64(f64::from(kernels) * self.efficiency.eager_host_per_kernel_s)
    }

    /// Host time to launch one captured graph.
    pub fn graph_launch(&self) -> SimDuration {
        let lookup = self
            .calibration()
            .and_then(|c| c.launch_graph.as_ref().map(|curve| curve.at(1.0)));
        if let Some(us) = self.record(OpClass::LaunchGraph, lookup) {
            return SimDuration::from_us_f64(us);
        }
        SimDuration::from_secs_f64(self.efficiency.graph_launch_s)
    }

    /// Device gap between consecutive kernels: the slope of the measured `launch.graph` table
    /// (replay time per extra kernel) when a profile has one, else the default.
    pub fn graph_kernel_gap(&self) -> SimDuration {
        if let Some(curve) = self.calibration().and_then(|c| c.launch_graph.as_ref())
            && let Some(slope_us) = curve.slope_per_unit()
        {
            return SimDuration::from_us_f64(slope_us);
        }
        SimDuration::from_secs_f64(self.efficiency.graph_kernel_gap_s)
    }

    /// Host time of one engine step outside the forward pass, for `requests` scheduled requests.
    pub fn step_host(&self, requests: u32) -> SimDuration {
        let lookup = self.calibration().and_then(|c| {
            c.host_step
                .as_ref()
                .map(|curve| curve.at(f64::from(requests)))
        });
        if let Some(us) = self.record(OpClass::HostStep, lookup) {
            return SimDuration::from_us_f64(us);
        }
        SimDuration::from_secs_f64(
            self.efficiency.step_host_s
                + f64::from(requests) * self.efficiency.step_host_per_request_s,
        )
    }

    /// Host time of the FFN worker loop between steps (synchronise, receive the control payload).
    pub fn ffn_loop_host(&self) -> SimDuration {
        SimDuration::from_secs_f64(self.efficiency.ffn_loop_host_s)
    }
}

impl Calibrated {
    fn from_profile(
        model: &ModelArch,
        layout: CostLayout,
        profile: &CalibrationProfile,
        source: &str,
    ) -> Result<Calibrated, CostError> {
        let mut out = Calibrated {
            name: source.to_owned(),
            ..Calibrated::default()
        };
        let experts_local = model.has_moe().then(|| {
            if layout.expert_parallel {
                model.routed_experts() / (layout.ffn_dp * layout.ffn_tp).max(1)
            } else {
                model.routed_experts()
            }
        });
        for (index, table) in profile.tables.iter().enumerate() {
            if !model_matches(table, model) {
                continue;
            }
            let curve = |axis: &'static str| curve_of(index, table, axis);
            let grid = |x: &'static str, y: &'static str| grid_of(index, table, x, y);
            let graph = table.variant.get("graph").map(String::as_str);
            let count = |key: &str| table.variant.get(key).and_then(|v| v.parse::<u32>().ok());
            match table.op.as_str() {
                "p2p.one_way" => match graph {
                    Some("true") => out.p2p_graph = Some(curve("bytes")?),
                    _ => out.p2p_eager = Some(curve("bytes")?),
                },
                "p2p.fan_in" => {
                    if let Some(n) = count("senders") {
                        out.fan_in.push((n, curve("bytes")?));
                    }
                }
                "nccl.all_reduce" => {
                    if let Some(n) = count("ranks") {
                        out.all_reduce.push((n, curve("bytes")?));
                    }
                }
                "nccl.all_to_all" => {
                    if let Some(n) = count("ranks") {
                        out.all_to_all.push((n, curve("bytes")?));
                    }
                }
                "moe.router" => out.router = Some(curve("tokens")?),
                "moe.routed_experts" => {
                    let local = count("experts_local");
                    if local.is_none() || local == experts_local || out.routed.is_none() {
                        out.routed = Some(grid("active_experts", "tokens_per_expert")?);
                    }
                }
                "moe.shared_experts" => out.shared = Some(curve("tokens")?),
                "mlp.dense" => out.dense = Some(curve("tokens")?),
                "attention.proj" => out.proj = Some(curve("tokens")?),
                "attention.mla_decode" => out.mla_decode = Some(grid("batch", "context")?),
                "attention.prefill" => out.prefill = Some(grid("tokens", "context")?),
                "launch.eager" => out.launch_eager = Some(curve("kernels")?),
                "launch.graph" => out.launch_graph = Some(curve("kernels")?),
                "host.step" => out.host_step = Some(curve("requests")?),
                "attention.lm_head" => out.lm_head = Some(curve("tokens")?),
                _ => continue,
            }
            if let Some(class) = class_of_op(&table.op) {
                let host: Vec<f64> = table
                    .points
                    .iter()
                    .filter_map(|p| p.derived.get("host_us").copied())
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .collect();
                if !host.is_empty() {
                    out.host_us[class.index()] = Some(host.iter().sum::<f64>() / host.len() as f64);
                }
            }
        }
        Ok(out)
    }
}

fn class_of_op(op: &str) -> Option<OpClass> {
    Some(match op {
        "p2p.one_way" => OpClass::P2p,
        "nccl.all_reduce" => OpClass::AllReduce,
        "nccl.all_to_all" => OpClass::AllToAll,
        "moe.router" => OpClass::MoeRouter,
        "moe.routed_experts" => OpClass::MoeRoutedExperts,
        "moe.shared_experts" => OpClass::MoeSharedExperts,
        "mlp.dense" => OpClass::MlpDense,
        "attention.proj" => OpClass::AttentionProj,
        "attention.mla_decode" => OpClass::AttentionMlaDecode,
        "attention.prefill" => OpClass::AttentionPrefill,
        _ => return None,
    })
}

/// A table without a `model` variant applies to every model; otherwise the names must agree
/// (case-insensitively, ignoring an organisation prefix such as `deepseek-ai/`).
fn model_matches(table: &CostTable, model: &ModelArch) -> bool {
    match table.variant.get("model") {
        None => true,
        Some(name) => {
            let short = name.rsplit('/').next().unwrap_or(name);
            short.eq_ignore_ascii_case(&model.name)
        }
    }
}

fn curve_of(index: usize, table: &CostTable, axis: &'static str) -> Result<Curve, CostError> {
    if table.axes.len() != 1 || table.axes[0] != axis {
        return Err(CostError::Axes {
            index,
            op: table.op.clone(),
            found: table.axes.clone(),
            expected: vec![axis],
        });
    }
    Curve::new(
        table
            .points
            .iter()
            .map(|p| (p.at[0], p.stats.median_us))
            .collect(),
    )
    .map_err(|problem| CostError::Table {
        index,
        op: table.op.clone(),
        problem,
    })
}

fn grid_of(
    index: usize,
    table: &CostTable,
    x: &'static str,
    y: &'static str,
) -> Result<Grid, CostError> {
    if table.axes.len() != 2 || table.axes[0] != x || table.axes[1] != y {
        return Err(CostError::Axes {
            index,
            op: table.op.clone(),
            found: table.axes.clone(),
            expected: vec![x, y],
        });
    }
    let points: Vec<(f64, f64, f64)> = table
        .points
        .iter()
        .map(|p| (p.at[0], p.at[1], p.stats.median_us))
        .collect();
    Grid::new(&points).map_err(|problem| CostError::Table {
        index,
        op: table.op.clone(),
        problem,
    })
}

#[cfg(test)]
mod tests;
