//! What each probe is asked to measure: sizes, grids, iteration counts, rank layout.
//!
//! Plain data built by the command line and read by the device code; no defaults are hidden in the
//! device code, so a profile's notes can state every setting.

use std::collections::BTreeMap;

use crate::gemm_choice::PathSet;
use crate::model::ModelShape;
use crate::rendezvous::LauncherEnv;
use crate::routing::Routing;

/// Warm-up and repetition counts shared by the single-GPU probes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    /// Untimed runs of every point before any point is timed.
    pub warmup: usize,
    /// Timed samples per point.
    pub iters: usize,
    /// Each graph replay repeats the operation until it lasts at least this long (µs), so replay
    /// overhead is amortised; repetitions also rotate over distinct weights so L2 cannot hold them.
    pub min_replay_us: f64,
}

/// Where the ranks of a multi-GPU probe run.
#[derive(Clone, Debug, PartialEq)]
pub enum RankLayout {
    /// One thread per GPU in this process; rank `i` drives `gpus[i]`.
    Threads { gpus: Vec<usize> },
    /// One process per GPU, found through launcher variables; this process is one rank.
    Processes(LauncherEnv),
}

impl RankLayout {
    /// Number of ranks.
    pub fn world_size(&self) -> usize {
        match self {
            RankLayout::Threads { gpus } => gpus.len(),
            RankLayout::Processes(env) => env.world_size,
        }
    }

    /// `threads` or `processes`, as the results record it.
    pub fn name(&self) -> &'static str {
        match self {
            RankLayout::Threads { .. } => "threads",
            RankLayout::Processes(_) => "processes",
        }
    }
}

/// One NCCL point-to-point pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum P2pMode {
    /// Rank 0 sends, rank 1 receives.
    OneWay,
    /// Rank 0 sends, rank 1 sends back; time is per leg.
    PingPong,
    /// Both ranks send and receive at once (nccl-tests `sendrecv_perf` at 2 ranks).
    Bidirectional,
    /// Ranks 1..=r send to rank 0 at once.
    FanIn,
    /// Ping-pong with a compute kernel before each send: rank 0 computes, sends and receives; rank
    /// 1 receives, computes and sends back. Time per leg, the compute excluded: what a dependent
    /// hand-off between compute kernels costs (a layer's A→F→A round trip).
    Handoff,
}

impl P2pMode {
    /// The calibration `op` name of the mode.
    pub fn op(self) -> &'static str {
        match self {
            P2pMode::OneWay => "p2p.one_way",
            P2pMode::PingPong => "p2p.ping_pong",
            P2pMode::Bidirectional => "p2p.bidirectional",
            P2pMode::FanIn => "p2p.fan_in",
            P2pMode::Handoff => "p2p.handoff",
        }
    }
}

/// NCCL collectives measured beside point-to-point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Collective {
    AllReduce,
    AllToAll,
}

impl Collective {
    /// The calibration `op` name.
    pub fn op(self) -> &'static str {
        match self {
            Collective::AllReduce => "nccl.all_reduce",
            Collective::AllToAll => "nccl.all_to_all",
        }
    }
}

/// The `p2p` probe.
#[derive(Clone, Debug, PartialEq)]
pub struct P2pSpec {
    pub layout: RankLayout,
    pub sizes: Vec<u64>,
    pub modes: Vec<P2pMode>,
    pub collectives: Vec<Collective>,
    pub collective_sizes: Vec<u64>,
    /// Eager (`false`) and/or graph-captured (`true`) runs.
    pub graph_modes: Vec<bool>,
    pub warmup: usize,
    pub iters: usize,
    /// Bytes the compute kernel of `Handoff` writes, one table per entry.
    pub handoff_work: Vec<u64>,
}

/// The `hbm` probe.
#[derive(Clone, Debug, PartialEq)]
pub struct HbmSpec {
    pub gpu: usize,
    pub sizes: Vec<u64>,
    pub timing: Timing,
}

/// The `launch` probe.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchSpec {
    pub gpu: usize,
    pub kernels: Vec<u64>,
    pub timing: Timing,
}

/// The `moe` probe.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeSpec {
    pub gpu: usize,
    pub model: ModelShape,
    /// Token counts of the whole-layer, router, shared-expert and dense-MLP tables.
    pub tokens: Vec<u64>,
    /// Routing distributions of the whole-layer tables.
    pub routings: Vec<Routing>,
    pub seed: u64,
    /// `moe.routed_experts` grid; empty skips it.
    pub grid_active: Vec<u64>,
    pub grid_tokens_per_expert: Vec<u64>,
    /// Also measure router, shared experts, dense MLP and dispatch on their own.
    pub parts: bool,
    /// MoE layers whose weights are allocated (rotation against L2); the model's count when `None`.
    pub layers: Option<usize>,
    /// Routed-expert GEMM path sets: the first serves every table; each further one measures the
    /// `moe.routed_experts` grid again (`moe.routed_experts_by_path`) for comparison. Empty: `auto`.
    pub gemm_paths: Vec<PathSet>,
    pub timing: Timing,
}

/// The `attention` probe.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionSpec {
    pub gpu: usize,
    pub model: ModelShape,
    /// Token counts of the projection table.
    pub tokens: Vec<u64>,
    pub batches: Vec<u64>,
    pub contexts: Vec<u64>,
    pub prefill_tokens: Vec<u64>,
    pub prefill_contexts: Vec<u64>,
    pub timing: Timing,
}

/// The `pipeline` probe (issue "Fidelity").
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineSpec {
    pub layout: RankLayout,
    pub model: ModelShape,
    pub tokens: Vec<u64>,
    pub contexts: Vec<u64>,
    pub dbo_modes: Vec<bool>,
    pub graph_modes: Vec<bool>,
    pub steps: usize,
    pub warmup_steps: usize,
    pub routing: Routing,
    pub seed: u64,
    /// A step (or capture) that takes longer than this is a hang: communicators are aborted.
    pub step_timeout_s: u64,
}

/// Tables measured by a probe, with the notes its profile should carry.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    pub tables: Vec<afd_traces::calibration::CostTable>,
    pub notes: BTreeMap<String, String>,
}

impl Measured {
    /// Appends another probe's tables and notes.
    pub fn extend(&mut self, other: Measured) {
        self.tables.extend(other.tables);
        self.notes.extend(other.notes);
    }
}
