//! The layer pipeline of one global step, computed as a deterministic max-plus sweep over
//! (layer, ubatch, rank) — no heap event per layer.
//!
//! Resources (afd-spec §3.5–§3.8, §6.2, Appendix A):
//! - each Attention rank: a host issue timeline and one device stream on which attention compute,
//!   NCCL sends and NCCL receives run in the §3.6 issue order (`A0 S0 | A1 S1 | R0 A0' S0' | R1 …`
//!   with DBO, `A S R` without);
//! - each FFN rank's inbound port, shared by the Attention ranks of its subgroup (fan-in: transfers
//!   to one FFN rank serialise on it); sends are buffered, so a send ends when its data has arrived;
//! - each FFN rank: a host timeline and one stream that receives from every subgroup peer in order,
//!   computes stage 0 then stage 1 of each layer, joins the FFN-internal collective (TP all-reduce,
//!   or EP all-to-all dispatch and combine, coupling every FFN rank of the group) and sends each peer
//!   its rows back;
//! - the control payload (two small sends from Attention rank `r < F` to FFN rank `r`) before
//!   layer 0, and the FFN host synchronisation after each step: the FFN cannot start a step before
//!   its previous step finished on its GPU and the new payload arrived (§3.4, §6.2).
//!
//! Eager vs graph: in eager mode each op is issued by the host at its own launch cost, and a device
//! op starts at `max(issued, stream free, inputs ready)`; in graph mode the host pays one launch
//! and every op is issued at once. Launch gaps, DBO overlap, fan-in waiting and padding all emerge
//! from this recurrence.
//!
//! Periodic shortcut: when a layer's FFN costs equal the previous layer's, every device time
//! advanced by the same λ over that layer, and no op waited on its host issue (with hosts advancing
//! by at most λ), the max-plus map is shift-invariant, so the following layers with the same costs
//! advance exactly by λ each; the sweep jumps over them. `shortcut_matches_full_sweep` proves the
//! equality on generated steps.

mod costs;
mod shortcut;
mod spans;

pub use costs::{HostCosts, StepCosts, WaitCurve};
use shortcut::{
    add_busy, advance, hosts_never_overtake, same_cost_run, snapshot_busy, snapshot_device,
    snapshot_hosts, uniform_delta,
};
pub use spans::{Span, SpanKind, SpanSink, Track};

/// How the FFN ranks of a MoE layer exchange tokens (afd-spec §3.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnCollective {
    /// One FFN rank, or ranks that need no exchange.
    None,
    /// TP all-reduce of the output within each FFN TP group (tokens replicated across TP).
    AllReduce,
    /// DP + EP: all-to-all dispatch before the experts and combine after, over all FFN ranks.
    AllToAll,
}

/// The fixed shape of the pipeline of a deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineLayout {
    pub attention_ranks: usize,
    pub attention_tp: usize,
    pub ffn_ranks: usize,
    pub ffn_tp: usize,
    pub layers: usize,
    /// FFN rank (subgroup) of each Attention rank.
    pub subgroup_of: Vec<usize>,
    /// Attention ranks of each FFN rank's subgroup, in subgroup-rank order.
    pub blocks: Vec<Vec<usize>>,
    /// `dense[l]`: layer `l` runs the dense MLP.
    pub dense: Vec<bool>,
    pub moe_collective: FfnCollective,
}

impl PipelineLayout {
    /// One Attention rank and one FFN rank without tensor parallelism (as `afd-probe pipeline`
    /// runs them); `dense[l]`: layer `l` runs the dense MLP.
    pub fn single_pair(dense: Vec<bool>) -> PipelineLayout {
        PipelineLayout {
            attention_ranks: 1,
            attention_tp: 1,
            ffn_ranks: 1,
            ffn_tp: 1,
            layers: dense.len(),
            subgroup_of: vec![0],
            blocks: vec![vec![0]],
            dense,
            moe_collective: FfnCollective::None,
        }
    }

    pub fn engines(&self) -> usize {
        self.attention_ranks / self.attention_tp
    }

    #[inline]
    pub fn engine_of(&self, attention_rank: usize) -> usize {
        attention_rank / self.attention_tp
    }

    fn collective(&self, layer: usize) -> FfnCollective {
        if self.dense[layer] {
            if self.ffn_tp > 1 {
                FfnCollective::AllReduce
            } else {
                FfnCollective::None
            }
        } else {
            self.moe_collective
        }
    }
}

/// What the pipeline carries from one step to the next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PipelineState {
    /// When each FFN rank's host has synchronised on its last step.
    pub ffn_ready: Vec<u64>,
    /// When each FFN rank's inbound port is free.
    pub port_free: Vec<u64>,
}

impl PipelineState {
    pub fn new(layout: &PipelineLayout) -> PipelineState {
        PipelineState {
            ffn_ready: vec![0; layout.ffn_ranks],
            port_free: vec![0; layout.ffn_ranks],
        }
    }
}

/// Timing of one step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepTiming {
    /// When the forward pass starts (after the host step overhead).
    pub forward_start: u64,
    /// When every Attention rank has its sampled tokens.
    pub end: u64,
    /// How long from the step's start the engine core's host is busy issuing it, nanoseconds
    /// (`EngineStepCost::host_ns`); 0 where the GPU sets the pace or no engine profile prices the
    /// step.
    pub host: u64,
    /// What the step's kernels take alone, nanoseconds, where an engine profile prices it: its
    /// period where its kernels set it, else the kernel sweep's span (at most the period); 0
    /// without an engine profile.
    pub kernels: u64,
    /// The longest any rank's host spends issuing the sweep's ops, nanoseconds: from the step's
    /// start (an Attention rank, its step overhead included) or from its start on the step (an
    /// FFN rank, once the control payload has arrived) to its last issue. A step whose host issue
    /// outlasts every device's busy time is the host's, whatever device is busiest.
    pub host_issue: u64,
    /// Device busy time per Attention rank (compute and TP all-reduce).
    pub attention_busy: Vec<u64>,
    /// Device busy time per FFN rank (compute and collectives).
    pub ffn_busy: Vec<u64>,
    /// Transfer time per FFN rank's links (inbound occupancy + latency, outbound sends).
    pub link_busy: Vec<u64>,
    /// Layers skipped by the periodic shortcut.
    pub shortcut_layers: u32,
}

/// Scratch buffers of the sweep, reused between steps.
#[derive(Clone, Debug, Default)]
pub struct Sweep {
    stream: Vec<u64>,
    host: Vec<u64>,
    fstream: Vec<u64>,
    fhost: Vec<u64>,
    to_ffn: Vec<u64>,
    to_attention: [Vec<u64>; 2],
    /// Each FFN rank's host timeline when it starts on the step.
    fhost_start: Vec<u64>,
    snapshots: Snapshots,
}

/// What the periodic shortcut compares across a layer (`pipeline/shortcut.rs`): device times and
/// host timelines before and after it, and busy times before and after.
#[derive(Clone, Debug, Default)]
struct Snapshots {
    previous_device: Vec<u64>,
    device: Vec<u64>,
    previous_host: Vec<u64>,
    busy_before: Vec<u64>,
    busy_now: Vec<u64>,
}

impl Sweep {
    pub fn new() -> Sweep {
        Sweep::default()
    }
}

/// Sets `v` to `len` copies of `value`, reallocating only when the length changes.
#[inline]
fn reset(v: &mut Vec<u64>, len: usize, value: u64) {
    if v.len() == len {
        v.fill(value);
    } else {
        v.clear();
        v.resize(len, value);
    }
}

#[inline]
fn max3(a: u64, b: u64, c: u64) -> u64 {
    a.max(b).max(c)
}

/// Per-rank times of the sweep as plain slices, so the hot loop keeps their addresses in registers.
struct Lanes<'a> {
    /// Attention device streams and host issue timelines.
    stream: &'a mut [u64],
    host: &'a mut [u64],
    /// FFN device streams and host issue timelines.
    fstream: &'a mut [u64],
    fhost: &'a mut [u64],
    /// Arrival at the FFN of each Attention rank's latest send.
    to_ffn: &'a mut [u64],
    /// Arrival back at each Attention rank, per stage.
    to_attention: [&'a mut [u64]; 2],
    port_free: &'a mut [u64],
    attention_busy: &'a mut [u64],
    ffn_busy: &'a mut [u64],
    link_busy: &'a mut [u64],
    attention_host_won: bool,
    ffn_host_won: bool,
}

/// Issues an op on a host timeline (paying `issue` in eager mode) and returns when it starts on
/// its device stream: after the issue, the stream and `ready` (its input's arrival). `won` records
/// whether the host issue alone delayed it (the periodic shortcut needs to know).
#[inline]
fn start_op(
    host: &mut u64,
    stream: u64,
    ready: u64,
    eager: bool,
    issue: u64,
    won: &mut bool,
) -> u64 {
    if eager {
        *host += issue;
    }
    *won |= *host > stream.max(ready);
    stream.max(*host)
}

/// Issues a compute op of `kernels` kernels on a host timeline (in eager mode `issue` host time,
/// spread evenly over them) and runs it on its stream, where each kernel starts once it is issued
/// and the one before it has ended. With kernels of equal length the op starts after its first
/// kernel's issue and ends no earlier than its last kernel's issue plus that kernel's share of
/// `duration`: a slow host stretches the op, it does not delay all of it. Returns `(begin, end)`;
/// `won` records whether the host issue shaped it (the periodic shortcut needs to know).
#[inline]
pub(crate) fn run_compute(
    host: &mut u64,
    stream: u64,
    eager: bool,
    issue: u64,
    kernels: u64,
    duration: u64,
    won: &mut bool,
) -> (u64, u64) {
    if !eager {
        *won |= *host > stream;
        let begin = stream.max(*host);
        return (begin, begin + duration);
    }
    let kernels = kernels.max(1);
    let first_issued = *host + issue / kernels;
    *host += issue;
    let begin = stream.max(first_issued);
    let last_kernel = *host + duration / kernels;
    *won |= first_issued > stream || last_kernel > begin + duration;
    (begin, (begin + duration).max(last_kernel))
}

/// Records a span when a sink is attached.
#[inline]
fn record(
    sink: &mut Option<&mut SpanSink>,
    track: Track,
    kind: SpanKind,
    layer: usize,
    stage: usize,
    start: u64,
    end: u64,
) {
    if let Some(sink) = sink.as_deref_mut() {
        sink.push(Span {
            track,
            kind,
            layer: layer as u32,
            stage: stage as u32,
            start,
            end,
        });
    }
}

/// Runs one step starting at `start` (ns). `shortcut` enables the periodic extrapolation (it is
/// disabled while spans are recorded).
#[expect(
    clippy::too_many_arguments,
    reason = "the sweep's inputs are distinct by nature"
)]
pub fn run_step(
    layout: &PipelineLayout,
    costs: &StepCosts,
    state: &mut PipelineState,
    start: u64,
    sweep: &mut Sweep,
    timing: &mut StepTiming,
    mut sink: Option<&mut SpanSink>,
    shortcut: bool,
) {
    let a_n = layout.attention_ranks;
    let f_n = layout.ffn_ranks;
    let shortcut = shortcut && sink.is_none();
    let forward_start = start + costs.host.step;
    timing.forward_start = forward_start;
    timing.shortcut_layers = 0;
    reset(&mut timing.attention_busy, a_n, 0);
    reset(&mut timing.ffn_busy, f_n, 0);
    reset(&mut timing.link_busy, f_n, 0);
    let Sweep {
        stream,
        host,
        fstream,
        fhost,
        to_ffn,
        to_attention: [to_attention_0, to_attention_1],
        fhost_start,
        snapshots,
    } = sweep;
    reset(stream, a_n, forward_start);
    reset(host, a_n, forward_start);
    reset(to_ffn, a_n, 0);
    reset(to_attention_0, a_n, 0);
    reset(to_attention_1, a_n, 0);
    reset(fstream, f_n, 0);
    reset(fhost, f_n, 0);
    let mut lanes = Lanes {
        stream,
        host,
        fstream,
        fhost,
        to_ffn,
        to_attention: [to_attention_0, to_attention_1],
        port_free: &mut state.port_free,
        attention_busy: &mut timing.attention_busy,
        ffn_busy: &mut timing.ffn_busy,
        link_busy: &mut timing.link_busy,
        attention_host_won: false,
        ffn_host_won: false,
    };
    begin_forward(layout, costs, &state.ffn_ready, &mut lanes, &mut sink);
    fhost_start.clear();
    fhost_start.extend_from_slice(lanes.fhost);
    let skipped = sweep_layers(layout, costs, &mut lanes, snapshots, shortcut, &mut sink);
    if costs.stages == 2 {
        last_receives(layout, costs, &mut lanes, &mut sink);
    }
    let end = lm_heads(layout, costs, &mut lanes, forward_start, &mut sink);
    for f in 0..f_n {
        // The FFN host synchronises on its stream after the step (§6.2).
        state.ffn_ready[f] = lanes.fstream[f].max(lanes.fhost[f]);
    }
    timing.shortcut_layers = skipped;
    timing.end = end;
    timing.host = 0;
    timing.kernels = 0;
    let attention_issue = lanes.host.iter().map(|&h| h - start);
    let ffn_issue = lanes
        .fhost
        .iter()
        .zip(fhost_start.iter())
        .map(|(&h, &s)| h - s);
    timing.host_issue = attention_issue.chain(ffn_issue).max().unwrap_or(0);
}

/// The step's start before layer 0: Attention rank r < F sends the control payload to FFN rank r
/// (§3.4), issued by the host outside any graph; the FFN host, synchronised on its previous step
/// (§6.2), starts once the payload has arrived; graph launches follow.
fn begin_forward(
    layout: &PipelineLayout,
    costs: &StepCosts,
    ffn_ready: &[u64],
    lanes: &mut Lanes<'_>,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    for (f, &ready) in ffn_ready[..layout.ffn_ranks].iter().enumerate() {
        let a = f;
        lanes.host[a] += 2 * host.p2p;
        let begin = lanes.stream[a].max(lanes.host[a]);
        let end = begin + costs.control;
        lanes.stream[a] = end;
        record(
            sink,
            Track::Attention(a),
            SpanKind::Control,
            0,
            0,
            begin,
            end,
        );
        let started = ready.max(end) + host.ffn_loop;
        lanes.fstream[f] = ready;
        lanes.fhost[f] = if costs.ffn_graph {
            started + host.graph_launch
        } else {
            started
        };
    }
    if costs.attention_graph {
        for h in lanes.host.iter_mut() {
            *h += host.graph_launch;
        }
    }
}

/// Every layer in order, jumping over runs of layers the periodic shortcut proves to repeat when
/// `shortcut` is on; returns how many layers it jumped over.
fn sweep_layers(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    snapshots: &mut Snapshots,
    shortcut: bool,
    sink: &mut Option<&mut SpanSink>,
) -> u32 {
    let stages = costs.stages;
    let mut skipped = 0u32;
    let mut layer = 0;
    while layer < layout.layers {
        lanes.attention_host_won = false;
        lanes.ffn_host_won = false;
        // Layers after this one that the shortcut could skip; snapshots are taken only then.
        let run = if shortcut && layer >= 1 {
            same_cost_run(layout, costs, layer)
        } else {
            0
        };
        if run > 0 {
            snapshot_device(lanes, stages, &mut snapshots.previous_device);
            snapshot_hosts(lanes, &mut snapshots.previous_host);
            snapshot_busy(lanes, &mut snapshots.busy_before);
        }
        layer_stages(layout, costs, lanes, layer, sink);
        if run > 0 && skip_periodic(layout, stages, lanes, snapshots, run) {
            skipped += run as u32;
            layer += run;
        }
        layer += 1;
    }
    skipped
}

/// Every stage of one layer on both sides; without DBO each Attention rank receives the layer's
/// output right after it.
#[inline]
fn layer_stages(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let attention_eager = !costs.attention_graph;
    for s in 0..costs.stages {
        attention_stage(layout, costs, lanes, layer, s, sink);
        ffn_stage(layout, costs, lanes, layer, s, sink);
        if costs.stages == 1 {
            for a in 0..layout.attention_ranks {
                recv_on_attention(
                    lanes,
                    a,
                    0,
                    attention_eager,
                    costs.host.p2p,
                    costs.recv_busy[0][a],
                    &costs.recv_extra[0][a],
                    layer,
                    sink,
                );
            }
        }
    }
}

/// After a layer that began a run of `run` same-cost layers: when every device time advanced by
/// the same λ > 0 and no host overtook its stream, advances every timeline and busy time by the
/// `run` layers at once and returns true; else leaves the sweep as it is.
fn skip_periodic(
    layout: &PipelineLayout,
    stages: usize,
    lanes: &mut Lanes<'_>,
    snapshots: &mut Snapshots,
    run: usize,
) -> bool {
    snapshot_device(lanes, stages, &mut snapshots.device);
    let Some(lambda) = uniform_delta(&snapshots.previous_device, &snapshots.device) else {
        return false;
    };
    if lambda == 0
        || !hosts_never_overtake(
            lanes,
            &snapshots.previous_host,
            layout.attention_ranks,
            lambda,
        )
    {
        return false;
    }
    let k = run as u64;
    advance(lanes, stages, lambda * k);
    for (i, h) in lanes
        .host
        .iter_mut()
        .chain(lanes.fhost.iter_mut())
        .enumerate()
    {
        let step = *h - snapshots.previous_host[i];
        *h += step * k;
    }
    snapshot_busy(lanes, &mut snapshots.busy_now);
    add_busy(lanes, &snapshots.busy_before, &snapshots.busy_now, k);
    true
}

/// With DBO, each Attention rank receives both stages of the last layer after the sweep.
fn last_receives(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    sink: &mut Option<&mut SpanSink>,
) {
    let attention_eager = !costs.attention_graph;
    for s in 0..2 {
        for a in 0..layout.attention_ranks {
            recv_on_attention(
                lanes,
                a,
                s,
                attention_eager,
                costs.host.p2p,
                costs.recv_busy[s][a],
                &costs.recv_extra[s][a],
                layout.layers - 1,
                sink,
            );
        }
    }
}

/// The LM head on every Attention rank of an engine that samples, and when the step ends: when
/// every Attention rank has its sampled tokens (or, without LM head, its last receive).
fn lm_heads(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    forward_start: u64,
    sink: &mut Option<&mut SpanSink>,
) -> u64 {
    let mut end = forward_start;
    for a in 0..layout.attention_ranks {
        // A forward pass without LM head ends when its last receive has completed.
        let Some(&lm_head) = costs.lm_head.get(layout.engine_of(a)) else {
            end = end.max(lanes.stream[a]);
            continue;
        };
        if !costs.attention_graph {
            lanes.host[a] += costs.host.attention_compute;
        }
        let begin = lanes.stream[a].max(lanes.host[a]);
        let finish = begin + lm_head;
        lanes.attention_busy[a] += finish - begin;
        record(
            sink,
            Track::Attention(a),
            SpanKind::LmHead,
            layout.layers,
            0,
            begin,
            finish,
        );
        end = end.max(finish);
    }
    end
}

/// Attention side of one (layer, stage): `R_s(L-1)` (with DBO), `A_s(L)`, the TP all-reduce and
/// `S_s(L)` on every Attention rank, in the §3.6 issue order.
#[inline]
fn attention_stage(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    attention_compute(layout, costs, lanes, layer, s, sink);
    if layout.attention_tp > 1 {
        attention_all_reduce(layout, costs, lanes, layer, s, sink);
    }
    attention_sends(layout, costs, lanes, layer, s, sink);
}

/// `R_s(L-1)` (with DBO, after the first layer) and `A_s(L)` on every Attention rank.
#[inline]
fn attention_compute(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    let eager = !costs.attention_graph;
    let compute = &costs.attention_compute[s];
    let a_n = layout.attention_ranks;
    for a in 0..a_n {
        if costs.stages == 2 && layer > 0 {
            let (busy, extra) = (costs.recv_busy[s][a], &costs.recv_extra[s][a]);
            recv_on_attention(lanes, a, s, eager, host.p2p, busy, extra, layer - 1, sink);
        }
        let duration = compute[layout.engine_of(a)];
        let (begin, end) = run_compute(
            &mut lanes.host[a],
            lanes.stream[a],
            eager,
            host.attention_compute,
            host.attention_kernels,
            duration,
            &mut lanes.attention_host_won,
        );
        lanes.stream[a] = end;
        lanes.attention_busy[a] += duration;
        record(
            sink,
            Track::Attention(a),
            SpanKind::AttentionCompute,
            layer,
            s,
            begin,
            end,
        );
    }
}

/// The TP all-reduce after `A_s(L)`: each engine's ranks start it together, once all of them
/// have issued it and finished what came before.
#[inline]
fn attention_all_reduce(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    let eager = !costs.attention_graph;
    let reduce = &costs.attention_all_reduce[s];
    for (e, &duration) in reduce.iter().enumerate() {
        let ranks = e * layout.attention_tp..(e + 1) * layout.attention_tp;
        let mut begin = 0;
        for a in ranks.clone() {
            if eager {
                lanes.host[a] += host.collective;
            }
            lanes.attention_host_won |= lanes.host[a] > lanes.stream[a];
            begin = max3(begin, lanes.stream[a], lanes.host[a]);
        }
        let end = begin + duration;
        for a in ranks {
            lanes.attention_busy[a] += duration;
            lanes.stream[a] = end;
            record(
                sink,
                Track::Attention(a),
                SpanKind::AttentionAllReduce,
                layer,
                s,
                begin,
                end,
            );
        }
    }
}

/// `S_s(L)` on every Attention rank: each send through its FFN rank's inbound port (fan-in),
/// buffered, so it holds the stream until its data has left the port.
#[inline]
fn attention_sends(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    let eager = !costs.attention_graph;
    let a_n = layout.attention_ranks;
    let occupancy = &costs.send_occupancy[s];
    let latency = &costs.send_latency[s];
    let busy = &costs.send_busy[s];
    for a in 0..a_n {
        let f = layout.subgroup_of[a];
        let begin = start_op(
            &mut lanes.host[a],
            lanes.stream[a],
            0,
            eager,
            host.p2p,
            &mut lanes.attention_host_won,
        );
        // Transfers into one FFN rank share its inbound port (fan-in). Sends are buffered: the
        // send holds the stream for its own time and until its data has left the port.
        let port = begin.max(lanes.port_free[f]);
        lanes.port_free[f] = port + occupancy[a];
        let arrival = port + occupancy[a] + latency[a];
        let end = (begin + busy[a]).max(port + occupancy[a]);
        lanes.stream[a] = end;
        lanes.to_ffn[a] = arrival;
        lanes.link_busy[f] += occupancy[a] + latency[a];
        record(
            sink,
            Track::Attention(a),
            SpanKind::Send,
            layer,
            s,
            begin,
            end,
        );
        record(
            sink,
            Track::LinkToFfn(a),
            SpanKind::Send,
            layer,
            s,
            port,
            arrival,
        );
    }
}

/// FFN side of one (layer, stage): receive every subgroup peer in order, compute (with the
/// collectives that couple the FFN ranks, §3.7), and send each peer its rows back.
#[inline]
fn ffn_stage(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    ffn_receive(layout, costs, lanes, layer, s, sink);
    ffn_experts(layout, costs, lanes, layer, s, sink);
    ffn_send_back(layout, costs, lanes, layer, s, sink);
}

/// Each FFN rank receives from its subgroup peers in order, then runs the compute before the
/// FFN collective (`ffn_pre`).
#[inline]
fn ffn_receive(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    let eager = !costs.ffn_graph;
    let f_n = layout.ffn_ranks;
    let slot = layer * costs.stages + s;
    let pre = &costs.ffn_pre[slot * f_n..(slot + 1) * f_n];
    for (f, (block, &pre)) in layout.blocks.iter().zip(pre).enumerate() {
        for &a in block {
            let arrival = lanes.to_ffn[a];
            let begin = start_op(
                &mut lanes.fhost[f],
                lanes.fstream[f],
                arrival,
                eager,
                host.p2p,
                &mut lanes.ffn_host_won,
            );
            let end = recv_end(
                begin,
                arrival,
                costs.recv_busy[s][a],
                &costs.recv_extra[s][a],
            );
            lanes.fstream[f] = end;
            record(sink, Track::Ffn(f), SpanKind::FfnRecv, layer, s, begin, end);
        }
        if pre > 0 {
            ffn_compute(
                lanes,
                f,
                pre,
                eager,
                host.ffn_compute,
                host.ffn_kernels,
                layer,
                s,
                sink,
            );
        }
    }
}

/// The FFN ranks' coupled part (§3.7): the all-to-all dispatch, the compute after it
/// (`ffn_post`), then the all-to-all combine or the TP all-reduce.
#[inline]
fn ffn_experts(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    let eager = !costs.ffn_graph;
    let f_n = layout.ffn_ranks;
    let slot = layer * costs.stages + s;
    let post = &costs.ffn_post[slot * f_n..(slot + 1) * f_n];
    let collective = layout.collective(layer);
    if collective == FfnCollective::AllToAll {
        ffn_group(
            lanes,
            0..f_n,
            costs.ffn_collective_1[slot],
            eager,
            host.collective,
            layer,
            s,
            sink,
        );
    }
    for (f, &post) in post.iter().enumerate() {
        ffn_compute(
            lanes,
            f,
            post,
            eager,
            host.ffn_compute,
            host.ffn_kernels,
            layer,
            s,
            sink,
        );
    }
    match collective {
        FfnCollective::None => {}
        FfnCollective::AllToAll => {
            ffn_group(
                lanes,
                0..f_n,
                costs.ffn_collective_2[slot],
                eager,
                host.collective,
                layer,
                s,
                sink,
            );
        }
        FfnCollective::AllReduce => {
            for g in 0..f_n / layout.ffn_tp {
                let ranks = g * layout.ffn_tp..(g + 1) * layout.ffn_tp;
                ffn_group(
                    lanes,
                    ranks,
                    costs.ffn_collective_2[slot],
                    eager,
                    host.collective,
                    layer,
                    s,
                    sink,
                );
            }
        }
    }
}

/// Each FFN rank sends every subgroup peer its rows back, in subgroup order.
#[inline]
fn ffn_send_back(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let host = &costs.host;
    let eager = !costs.ffn_graph;
    let f_n = layout.ffn_ranks;
    let back = &costs.send_back[s];
    let busy = &costs.send_back_busy[s];
    for f in 0..f_n {
        for &a in &layout.blocks[f] {
            let begin = start_op(
                &mut lanes.fhost[f],
                lanes.fstream[f],
                0,
                eager,
                host.p2p,
                &mut lanes.ffn_host_won,
            );
            let end = begin + busy[a];
            let arrival = begin + back[a];
            lanes.fstream[f] = end;
            lanes.to_attention[s][a] = arrival;
            lanes.link_busy[f] += back[a];
            record(sink, Track::Ffn(f), SpanKind::FfnSend, layer, s, begin, end);
            record(
                sink,
                Track::LinkToAttention(a),
                SpanKind::FfnSend,
                layer,
                s,
                begin,
                arrival,
            );
        }
    }
}

/// When a receive that started at `begin` completes: after its own time when the data is already
/// there, else at the data's arrival plus what its rank's wait adds to the hand-off.
#[inline]
fn recv_end(begin: u64, arrival: u64, busy: u64, extra: &WaitCurve) -> u64 {
    let waited = arrival.saturating_sub(begin);
    (begin + busy).max(arrival + extra.at(waited))
}

#[expect(clippy::too_many_arguments, reason = "one op of the sweep")]
#[inline]
fn recv_on_attention(
    lanes: &mut Lanes<'_>,
    a: usize,
    s: usize,
    eager: bool,
    p2p_issue: u64,
    busy: u64,
    extra: &WaitCurve,
    layer: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let arrival = lanes.to_attention[s][a];
    let begin = start_op(
        &mut lanes.host[a],
        lanes.stream[a],
        arrival,
        eager,
        p2p_issue,
        &mut lanes.attention_host_won,
    );
    let end = recv_end(begin, arrival, busy, extra);
    lanes.stream[a] = end;
    record(
        sink,
        Track::Attention(a),
        SpanKind::Recv,
        layer,
        s,
        begin,
        end,
    );
}

#[expect(clippy::too_many_arguments, reason = "one op of the sweep")]
#[inline]
fn ffn_compute(
    lanes: &mut Lanes<'_>,
    f: usize,
    duration: u64,
    eager: bool,
    issue: u64,
    kernels: u64,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let (begin, end) = run_compute(
        &mut lanes.fhost[f],
        lanes.fstream[f],
        eager,
        issue,
        kernels,
        duration,
        &mut lanes.ffn_host_won,
    );
    lanes.fstream[f] = end;
    lanes.ffn_busy[f] += duration;
    record(
        sink,
        Track::Ffn(f),
        SpanKind::FfnCompute,
        layer,
        s,
        begin,
        end,
    );
}

#[expect(clippy::too_many_arguments, reason = "one group op of the sweep")]
#[inline]
fn ffn_group(
    lanes: &mut Lanes<'_>,
    ranks: std::ops::Range<usize>,
    duration: u64,
    eager: bool,
    issue: u64,
    layer: usize,
    s: usize,
    sink: &mut Option<&mut SpanSink>,
) {
    let mut begin = 0;
    for f in ranks.clone() {
        if eager {
            lanes.fhost[f] += issue;
        }
        lanes.ffn_host_won |= lanes.fhost[f] > lanes.fstream[f];
        begin = max3(begin, lanes.fstream[f], lanes.fhost[f]);
    }
    let end = begin + duration;
    for f in ranks {
        lanes.fstream[f] = end;
        lanes.ffn_busy[f] += duration;
        record(
            sink,
            Track::Ffn(f),
            SpanKind::FfnCollective,
            layer,
            s,
            begin,
            end,
        );
    }
}

#[cfg(test)]
mod tests;
