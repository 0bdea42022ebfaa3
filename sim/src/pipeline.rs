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

/// Host-side launch costs of a step, nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostCosts {
    /// Attention engine host time before the forward (scheduler, input preparation).
    pub step: u64,
    /// FFN loop host time after the control payload arrives.
    pub ffn_loop: u64,
    pub graph_launch: u64,
    /// Eager issue costs per op.
    pub attention_compute: u64,
    pub p2p: u64,
    pub collective: u64,
    pub ffn_compute: u64,
}

/// Device costs of one step, nanoseconds. Buffers are reused between steps.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepCosts {
    pub stages: usize,
    pub attention_graph: bool,
    pub ffn_graph: bool,
    /// `[stage][engine]` attention block (projections + attention kernels) per layer.
    pub attention_compute: [Vec<u64>; 2],
    /// `[stage][engine]` attention TP all-reduce per layer (0 without TP).
    pub attention_all_reduce: [Vec<u64>; 2],
    /// `[stage][attention rank]` A→F port occupancy and latency.
    pub send_occupancy: [Vec<u64>; 2],
    pub send_latency: [Vec<u64>; 2],
    /// `[stage][attention rank]` F→A send time on the FFN stream.
    pub send_back: [Vec<u64>; 2],
    /// `[(layer * stages + stage) * ffn_ranks + f]` FFN compute before and after the dispatch.
    pub ffn_pre: Vec<u64>,
    pub ffn_post: Vec<u64>,
    /// `[layer * stages + stage]` collective times (dispatch; combine or all-reduce).
    pub ffn_collective_1: Vec<u64>,
    pub ffn_collective_2: Vec<u64>,
    /// `[engine]` LM head and sampling.
    pub lm_head: Vec<u64>,
    /// Control payload transfer (two small sends).
    pub control: u64,
    pub host: HostCosts,
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

/// Where a timeline span happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Track {
    Attention(usize),
    Ffn(usize),
    /// A→F link of an Attention rank.
    LinkToFfn(usize),
    /// F→A link of an Attention rank.
    LinkToAttention(usize),
}

/// What a span was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Control,
    AttentionCompute,
    AttentionAllReduce,
    Send,
    Recv,
    FfnRecv,
    FfnCompute,
    FfnCollective,
    FfnSend,
    LmHead,
}

/// One operation on a track, nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub track: Track,
    pub kind: SpanKind,
    pub layer: u32,
    pub stage: u32,
    pub start: u64,
    pub end: u64,
}

/// Collects spans that intersect a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanSink {
    pub window: (u64, u64),
    pub spans: Vec<Span>,
}

impl SpanSink {
    fn push(&mut self, span: Span) {
        if span.end >= self.window.0 && span.start <= self.window.1 {
            self.spans.push(span);
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
    previous_device: Vec<u64>,
    device: Vec<u64>,
    previous_host: Vec<u64>,
    busy_before: Vec<u64>,
    busy_now: Vec<u64>,
    control_arrival: Vec<u64>,
    attention_host_won: bool,
    ffn_host_won: bool,
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
    let stages = costs.stages;
    let shortcut = shortcut && sink.is_none();
    let host = &costs.host;
    reset(&mut timing.attention_busy, a_n, 0);
    reset(&mut timing.ffn_busy, f_n, 0);
    reset(&mut timing.link_busy, f_n, 0);
    timing.shortcut_layers = 0;
    let forward_start = start + host.step;
    timing.forward_start = forward_start;

    reset(&mut sweep.stream, a_n, forward_start);
    reset(&mut sweep.host, a_n, forward_start);
    reset(&mut sweep.to_ffn, a_n, 0);
    for s in 0..2 {
        reset(&mut sweep.to_attention[s], a_n, 0);
    }

    // Control payload: Attention rank r < F sends to FFN rank r before layer 0 (§3.4), issued by the
    // host outside any graph.
    let mut control_arrival = std::mem::take(&mut sweep.control_arrival);
    reset(&mut control_arrival, f_n, 0);
    for (f, arrival) in control_arrival.iter_mut().enumerate() {
        let a = f;
        sweep.host[a] += 2 * host.p2p;
        let begin = sweep.stream[a].max(sweep.host[a]);
        let end = begin + costs.control;
        sweep.stream[a] = end;
        *arrival = end;
        if let Some(sink) = sink.as_deref_mut() {
            sink.push(Span {
                track: Track::Attention(a),
                kind: SpanKind::Control,
                layer: 0,
                stage: 0,
                start: begin,
                end,
            });
        }
    }
    if costs.attention_graph {
        for h in &mut sweep.host {
            *h += host.graph_launch;
        }
    }
    let attention_eager = !costs.attention_graph;
    let ffn_eager = !costs.ffn_graph;

    // FFN hosts: synchronised on the previous step, then receive the payload and start the step.
    sweep.fstream.clear();
    sweep.fhost.clear();
    for (&ready, &control) in state.ffn_ready.iter().zip(&control_arrival) {
        let started = ready.max(control) + host.ffn_loop;
        let launched = if costs.ffn_graph {
            started + host.graph_launch
        } else {
            started
        };
        sweep.fstream.push(ready);
        sweep.fhost.push(launched);
    }
    sweep.control_arrival = control_arrival;

    let dev_len = a_n + 2 * f_n + if stages == 2 { 2 * a_n } else { 0 };
    reset(&mut sweep.previous_device, dev_len, 0);
    reset(&mut sweep.device, dev_len, 0);
    let busy_len = a_n + 2 * f_n;
    reset(&mut sweep.busy_before, busy_len, 0);
    reset(&mut sweep.busy_now, busy_len, 0);

    let mut layer = 0;
    while layer < layout.layers {
        sweep.attention_host_won = false;
        sweep.ffn_host_won = false;
        // Layers after this one that the shortcut could skip; snapshots are taken only then.
        let run = if shortcut && layer >= 1 {
            same_cost_run(layout, costs, layer)
        } else {
            0
        };
        if run > 0 {
            snapshot_busy(timing, &mut sweep.busy_before);
            snapshot_device(sweep, state, stages, &mut DeviceSlot::Previous);
            sweep.previous_host.clear();
            sweep.previous_host.extend_from_slice(&sweep.host);
            sweep.previous_host.extend_from_slice(&sweep.fhost);
        }

        for s in 0..stages {
            // Attention: R_s(L-1) (DBO), A_s(L), all-reduce, S_s(L).
            for a in 0..a_n {
                let e = layout.engine_of(a);
                if stages == 2 && layer > 0 {
                    recv_on_attention(
                        sweep,
                        a,
                        s,
                        attention_eager,
                        host.p2p,
                        layer - 1,
                        sink.as_deref_mut(),
                    );
                }
                if attention_eager {
                    sweep.host[a] += host.attention_compute;
                }
                let issued = sweep.host[a];
                let begin = sweep.stream[a].max(issued);
                sweep.attention_host_won |= issued > sweep.stream[a];
                let end = begin + costs.attention_compute[s][e];
                sweep.stream[a] = end;
                timing.attention_busy[a] += end - begin;
                if let Some(sink) = sink.as_deref_mut() {
                    sink.push(Span {
                        track: Track::Attention(a),
                        kind: SpanKind::AttentionCompute,
                        layer: layer as u32,
                        stage: s as u32,
                        start: begin,
                        end,
                    });
                }
            }
            if layout.attention_tp > 1 {
                for e in 0..layout.engines() {
                    let ranks = e * layout.attention_tp..(e + 1) * layout.attention_tp;
                    let duration = costs.attention_all_reduce[s][e];
                    let mut begin = 0;
                    for a in ranks.clone() {
                        if attention_eager {
                            sweep.host[a] += host.collective;
                        }
                        sweep.attention_host_won |= sweep.host[a] > sweep.stream[a];
                        begin = max3(begin, sweep.stream[a], sweep.host[a]);
                    }
                    let end = begin + duration;
                    for a in ranks {
                        timing.attention_busy[a] += duration;
                        sweep.stream[a] = end;
                        if let Some(sink) = sink.as_deref_mut() {
                            sink.push(Span {
                                track: Track::Attention(a),
                                kind: SpanKind::AttentionAllReduce,
                                layer: layer as u32,
                                stage: s as u32,
                                start: begin,
                                end,
                            });
                        }
                    }
                }
            }
            for a in 0..a_n {
                let f = layout.subgroup_of[a];
                if attention_eager {
                    sweep.host[a] += host.p2p;
                }
                let issued = sweep.host[a];
                sweep.attention_host_won |= issued > sweep.stream[a];
                let begin = sweep.stream[a].max(issued);
                let port = begin.max(state.port_free[f]);
                let occupancy = costs.send_occupancy[s][a];
                state.port_free[f] = port + occupancy;
                let arrival = port + occupancy + costs.send_latency[s][a];
                sweep.stream[a] = arrival;
                sweep.to_ffn[a] = arrival;
                timing.link_busy[f] += occupancy + costs.send_latency[s][a];
                if let Some(sink) = sink.as_deref_mut() {
                    sink.push(Span {
                        track: Track::Attention(a),
                        kind: SpanKind::Send,
                        layer: layer as u32,
                        stage: s as u32,
                        start: begin,
                        end: arrival,
                    });
                    sink.push(Span {
                        track: Track::LinkToFfn(a),
                        kind: SpanKind::Send,
                        layer: layer as u32,
                        stage: s as u32,
                        start: port,
                        end: arrival,
                    });
                }
            }

            // FFN: receive every peer in order, compute, collectives, send back.
            let slot = layer * stages + s;
            for f in 0..f_n {
                for &a in &layout.blocks[f] {
                    if ffn_eager {
                        sweep.fhost[f] += host.p2p;
                    }
                    let issued = sweep.fhost[f];
                    sweep.ffn_host_won |= issued > sweep.fstream[f].max(sweep.to_ffn[a]);
                    let begin = sweep.fstream[f].max(issued);
                    let end = begin.max(sweep.to_ffn[a]);
                    sweep.fstream[f] = end;
                    if let Some(sink) = sink.as_deref_mut() {
                        sink.push(Span {
                            track: Track::Ffn(f),
                            kind: SpanKind::FfnRecv,
                            layer: layer as u32,
                            stage: s as u32,
                            start: begin,
                            end,
                        });
                    }
                }
                let pre = costs.ffn_pre[slot * f_n + f];
                if pre > 0 {
                    ffn_compute(
                        sweep,
                        timing,
                        f,
                        pre,
                        ffn_eager,
                        host.ffn_compute,
                        layer,
                        s,
                        sink.as_deref_mut(),
                    );
                }
            }
            let collective = layout.collective(layer);
            if collective == FfnCollective::AllToAll {
                ffn_group(
                    layout,
                    sweep,
                    timing,
                    0..f_n,
                    costs.ffn_collective_1[slot],
                    ffn_eager,
                    host.collective,
                    layer,
                    s,
                    sink.as_deref_mut(),
                );
            }
            for f in 0..f_n {
                let post = costs.ffn_post[slot * f_n + f];
                ffn_compute(
                    sweep,
                    timing,
                    f,
                    post,
                    ffn_eager,
                    host.ffn_compute,
                    layer,
                    s,
                    sink.as_deref_mut(),
                );
            }
            match collective {
                FfnCollective::None => {}
                FfnCollective::AllToAll => {
                    ffn_group(
                        layout,
                        sweep,
                        timing,
                        0..f_n,
                        costs.ffn_collective_2[slot],
                        ffn_eager,
                        host.collective,
                        layer,
                        s,
                        sink.as_deref_mut(),
                    );
                }
                FfnCollective::AllReduce => {
                    for g in 0..f_n / layout.ffn_tp {
                        let ranks = g * layout.ffn_tp..(g + 1) * layout.ffn_tp;
                        ffn_group(
                            layout,
                            sweep,
                            timing,
                            ranks,
                            costs.ffn_collective_2[slot],
                            ffn_eager,
                            host.collective,
                            layer,
                            s,
                            sink.as_deref_mut(),
                        );
                    }
                }
            }
            for f in 0..f_n {
                for &a in &layout.blocks[f] {
                    if ffn_eager {
                        sweep.fhost[f] += host.p2p;
                    }
                    let issued = sweep.fhost[f];
                    sweep.ffn_host_won |= issued > sweep.fstream[f];
                    let begin = sweep.fstream[f].max(issued);
                    let end = begin + costs.send_back[s][a];
                    sweep.fstream[f] = end;
                    sweep.to_attention[s][a] = end;
                    timing.link_busy[f] += end - begin;
                    if let Some(sink) = sink.as_deref_mut() {
                        sink.push(Span {
                            track: Track::Ffn(f),
                            kind: SpanKind::FfnSend,
                            layer: layer as u32,
                            stage: s as u32,
                            start: begin,
                            end,
                        });
                        sink.push(Span {
                            track: Track::LinkToAttention(a),
                            kind: SpanKind::FfnSend,
                            layer: layer as u32,
                            stage: s as u32,
                            start: begin,
                            end,
                        });
                    }
                }
            }
            if stages == 1 {
                for a in 0..a_n {
                    recv_on_attention(
                        sweep,
                        a,
                        0,
                        attention_eager,
                        host.p2p,
                        layer,
                        sink.as_deref_mut(),
                    );
                }
            }
        }

        if run > 0 {
            snapshot_device(sweep, state, stages, &mut DeviceSlot::Current);
            if let Some(lambda) = uniform_delta(&sweep.previous_device, &sweep.device)
                && lambda > 0
                && hosts_never_overtake(sweep, a_n, lambda)
            {
                let k = run as u64;
                advance(sweep, state, stages, lambda * k);
                for (i, h) in sweep
                    .host
                    .iter_mut()
                    .chain(sweep.fhost.iter_mut())
                    .enumerate()
                {
                    let step = *h - sweep.previous_host[i];
                    *h += step * k;
                }
                snapshot_busy(timing, &mut sweep.busy_now);
                add_busy(timing, &sweep.busy_before, &sweep.busy_now, k);
                timing.shortcut_layers += run as u32;
                layer += run;
            }
        }
        layer += 1;
    }
    if stages == 2 {
        for s in 0..2 {
            for a in 0..a_n {
                recv_on_attention(
                    sweep,
                    a,
                    s,
                    attention_eager,
                    host.p2p,
                    layout.layers - 1,
                    sink.as_deref_mut(),
                );
            }
        }
    }
    let mut end = forward_start;
    for a in 0..a_n {
        let e = layout.engine_of(a);
        if attention_eager {
            sweep.host[a] += host.attention_compute;
        }
        let begin = sweep.stream[a].max(sweep.host[a]);
        let finish = begin + costs.lm_head[e];
        timing.attention_busy[a] += finish - begin;
        if let Some(sink) = sink.as_deref_mut() {
            sink.push(Span {
                track: Track::Attention(a),
                kind: SpanKind::LmHead,
                layer: layout.layers as u32,
                stage: 0,
                start: begin,
                end: finish,
            });
        }
        end = end.max(finish);
    }
    timing.end = end;
    for f in 0..f_n {
        // The FFN host synchronises on its stream after the step (§6.2).
        state.ffn_ready[f] = sweep.fstream[f].max(sweep.fhost[f]);
    }
}

fn recv_on_attention(
    sweep: &mut Sweep,
    a: usize,
    s: usize,
    eager: bool,
    p2p_issue: u64,
    layer: usize,
    sink: Option<&mut SpanSink>,
) {
    if eager {
        sweep.host[a] += p2p_issue;
    }
    let issued = sweep.host[a];
    let arrival = sweep.to_attention[s][a];
    sweep.attention_host_won |= issued > sweep.stream[a].max(arrival);
    let begin = sweep.stream[a].max(issued);
    let end = begin.max(arrival);
    sweep.stream[a] = end;
    if let Some(sink) = sink {
        sink.push(Span {
            track: Track::Attention(a),
            kind: SpanKind::Recv,
            layer: layer as u32,
            stage: s as u32,
            start: begin,
            end,
        });
    }
}

#[expect(clippy::too_many_arguments, reason = "one op of the sweep")]
fn ffn_compute(
    sweep: &mut Sweep,
    timing: &mut StepTiming,
    f: usize,
    duration: u64,
    eager: bool,
    issue: u64,
    layer: usize,
    s: usize,
    sink: Option<&mut SpanSink>,
) {
    if eager {
        sweep.fhost[f] += issue;
    }
    let issued = sweep.fhost[f];
    sweep.ffn_host_won |= issued > sweep.fstream[f];
    let begin = sweep.fstream[f].max(issued);
    let end = begin + duration;
    sweep.fstream[f] = end;
    timing.ffn_busy[f] += duration;
    if let Some(sink) = sink {
        sink.push(Span {
            track: Track::Ffn(f),
            kind: SpanKind::FfnCompute,
            layer: layer as u32,
            stage: s as u32,
            start: begin,
            end,
        });
    }
}

#[expect(clippy::too_many_arguments, reason = "one group op of the sweep")]
fn ffn_group(
    _layout: &PipelineLayout,
    sweep: &mut Sweep,
    timing: &mut StepTiming,
    ranks: std::ops::Range<usize>,
    duration: u64,
    eager: bool,
    issue: u64,
    layer: usize,
    s: usize,
    mut sink: Option<&mut SpanSink>,
) {
    let mut begin = 0;
    for f in ranks.clone() {
        if eager {
            sweep.fhost[f] += issue;
        }
        sweep.ffn_host_won |= sweep.fhost[f] > sweep.fstream[f];
        begin = max3(begin, sweep.fstream[f], sweep.fhost[f]);
    }
    let end = begin + duration;
    for f in ranks {
        sweep.fstream[f] = end;
        timing.ffn_busy[f] += duration;
        if let Some(sink) = sink.as_deref_mut() {
            sink.push(Span {
                track: Track::Ffn(f),
                kind: SpanKind::FfnCollective,
                layer: layer as u32,
                stage: s as u32,
                start: begin,
                end,
            });
        }
    }
}

/// Whether every host timeline either advanced with the devices (by exactly `lambda`, so the
/// whole state shifted uniformly) or advanced more slowly without ever delaying an op this layer
/// (so its lead only shrinks and it never delays one later). Either way the next layers with the
/// same costs repeat this one shifted by `lambda`.
fn hosts_never_overtake(sweep: &Sweep, attention_ranks: usize, lambda: u64) -> bool {
    sweep
        .host
        .iter()
        .chain(sweep.fhost.iter())
        .zip(&sweep.previous_host)
        .enumerate()
        .all(|(i, (now, before))| {
            let delta = now - before;
            let won = if i < attention_ranks {
                sweep.attention_host_won
            } else {
                sweep.ffn_host_won
            };
            delta == lambda || (delta < lambda && !won)
        })
}

enum DeviceSlot {
    Previous,
    Current,
}

fn snapshot_device(sweep: &mut Sweep, state: &PipelineState, stages: usize, slot: &mut DeviceSlot) {
    let out = match slot {
        DeviceSlot::Previous => &mut sweep.previous_device,
        DeviceSlot::Current => &mut sweep.device,
    };
    out.clear();
    out.extend_from_slice(&sweep.stream);
    out.extend_from_slice(&sweep.fstream);
    out.extend_from_slice(&state.port_free);
    if stages == 2 {
        out.extend_from_slice(&sweep.to_attention[0]);
        out.extend_from_slice(&sweep.to_attention[1]);
    }
}

fn uniform_delta(before: &[u64], after: &[u64]) -> Option<u64> {
    let lambda = after[0].checked_sub(before[0])?;
    before
        .iter()
        .zip(after)
        .all(|(b, a)| a.checked_sub(*b) == Some(lambda))
        .then_some(lambda)
}

fn advance(sweep: &mut Sweep, state: &mut PipelineState, stages: usize, by: u64) {
    sweep.stream.iter_mut().for_each(|t| *t += by);
    sweep.fstream.iter_mut().for_each(|t| *t += by);
    state.port_free.iter_mut().for_each(|t| *t += by);
    if stages == 2 {
        for s in 0..2 {
            sweep.to_attention[s].iter_mut().for_each(|t| *t += by);
        }
    }
}

fn snapshot_busy(timing: &StepTiming, out: &mut Vec<u64>) {
    out.clear();
    out.extend_from_slice(&timing.attention_busy);
    out.extend_from_slice(&timing.ffn_busy);
    out.extend_from_slice(&timing.link_busy);
}

fn add_busy(timing: &mut StepTiming, before: &[u64], now: &[u64], k: u64) {
    let all = timing
        .attention_busy
        .iter_mut()
        .chain(timing.ffn_busy.iter_mut())
        .chain(timing.link_busy.iter_mut());
    for (i, b) in all.enumerate() {
        *b += (now[i] - before[i]) * k;
    }
}

/// Number of layers after `layer` whose FFN costs equal `layer`'s, provided `layer`'s equal
/// `layer - 1`'s (otherwise 0).
fn same_cost_run(layout: &PipelineLayout, costs: &StepCosts, layer: usize) -> usize {
    let same = |x: usize, y: usize| {
        if layout.dense[x] != layout.dense[y] {
            return false;
        }
        let width = costs.stages * layout.ffn_ranks;
        let slots = costs.stages;
        costs.ffn_pre[x * width..(x + 1) * width] == costs.ffn_pre[y * width..(y + 1) * width]
            && costs.ffn_post[x * width..(x + 1) * width]
                == costs.ffn_post[y * width..(y + 1) * width]
            && costs.ffn_collective_1[x * slots..(x + 1) * slots]
                == costs.ffn_collective_1[y * slots..(y + 1) * slots]
            && costs.ffn_collective_2[x * slots..(x + 1) * slots]
                == costs.ffn_collective_2[y * slots..(y + 1) * slots]
    };
    if !same(layer, layer - 1) {
        return 0;
    }
    let mut run = 0;
    while layer + run + 1 < layout.layers && same(layer + run + 1, layer) {
        run += 1;
    }
    run
}

#[cfg(test)]
mod tests;
