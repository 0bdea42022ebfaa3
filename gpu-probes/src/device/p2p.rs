//! `p2p`: NCCL send/recv between GPUs (one-way, ping-pong, both directions, fan-in, and hand-offs
//! between compute kernels) and the FFN-side collectives (all-reduce, all-to-all), eager and
//! graph-captured, nccl-tests style: every size warmed before timing, CUDA events around each
//! operation on every rank, the slowest rank per iteration, random data checked after timing.
//!
//! A hand-off is a ping-pong with one compute kernel (`fill_u32` over `work` bytes) before each send,
//! as in a layer of the AFD pipeline: rank 0 computes, sends, receives; rank 1 receives, computes,
//! sends back. The same kernel alone is timed first in the same mode; the hand-off table is the time
//! per leg with that kernel's time taken out.

use std::time::{Duration, Instant};

use super::gpu::{EventPairs, Gpu, Graph, Stream, memset_u32_async, zero_async};
use super::kernels::Kernels;
use super::nccl::{Comm, Dtype};
use super::ranks::{RankSetup, run_ranks};
use crate::assemble::{derived, point, table};
use crate::error::ProbeError;
use crate::spec::{Collective, Measured, P2pMode, P2pSpec};

/// A hung operation is aborted after this long.
const OP_TIMEOUT: Duration = Duration::from_secs(120);

/// One traffic pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern {
    OneWay,
    PingPong,
    Bidirectional,
    FanIn {
        senders: usize,
    },
    AllReduce,
    AllToAll,
    /// The compute kernel of `Handoff` alone, on both ranks at once (no NCCL).
    Work {
        work: u64,
    },
    Handoff {
        work: u64,
    },
}

impl Pattern {
    fn op(self) -> &'static str {
        match self {
            Pattern::OneWay => P2pMode::OneWay.op(),
            Pattern::PingPong => P2pMode::PingPong.op(),
            Pattern::Bidirectional => P2pMode::Bidirectional.op(),
            Pattern::FanIn { .. } => P2pMode::FanIn.op(),
            Pattern::AllReduce => Collective::AllReduce.op(),
            Pattern::AllToAll => Collective::AllToAll.op(),
            Pattern::Work { .. } => "p2p.handoff_work",
            Pattern::Handoff { .. } => P2pMode::Handoff.op(),
        }
    }

    fn participates(self, rank: usize) -> bool {
        match self {
            Pattern::OneWay
            | Pattern::PingPong
            | Pattern::Bidirectional
            | Pattern::Work { .. }
            | Pattern::Handoff { .. } => rank < 2,
            Pattern::FanIn { senders } => rank <= senders,
            Pattern::AllReduce | Pattern::AllToAll => true,
        }
    }

    /// NCCL calls one rank issues per operation.
    fn calls(self, world: usize) -> usize {
        match self {
            Pattern::Work { .. } => 0,
            Pattern::OneWay | Pattern::AllReduce => 1,
            Pattern::PingPong | Pattern::Bidirectional | Pattern::Handoff { .. } => 2,
            Pattern::FanIn { senders } => senders,
            Pattern::AllToAll => 2 * world,
        }
    }

    /// Bytes moved per operation for algbw, and the busbw factor (nccl-tests PERFORMANCE.md).
    fn bandwidth(self, bytes: u64, world: usize) -> (f64, f64) {
        let n = world as f64;
        match self {
            Pattern::FanIn { senders } => ((senders as u64 * bytes) as f64, 1.0),
            Pattern::AllReduce => (bytes as f64, 2.0 * (n - 1.0) / n),
            Pattern::AllToAll => (bytes as f64, (n - 1.0) / n),
            _ => (bytes as f64, 1.0),
        }
    }
}

/// A table to measure: pattern, graph mode and sizes.
#[derive(Clone, Debug)]
struct Series {
    pattern: Pattern,
    graph: bool,
    sizes: Vec<u64>,
}

fn plan(spec: &P2pSpec, world: usize) -> Vec<Series> {
    let mut patterns = Vec::new();
    for mode in &spec.modes {
        match mode {
            P2pMode::OneWay => patterns.push(Pattern::OneWay),
            P2pMode::PingPong => patterns.push(Pattern::PingPong),
            P2pMode::Bidirectional => patterns.push(Pattern::Bidirectional),
            P2pMode::FanIn => {
                for senders in 2..world {
                    patterns.push(Pattern::FanIn { senders });
                }
            }
            P2pMode::Handoff => {
                for &work in &spec.handoff_work {
                    patterns.push(Pattern::Work { work });
                    patterns.push(Pattern::Handoff { work });
                }
            }
        }
    }
    let mut series = Vec::new();
    for &pattern in &patterns {
        for &graph in &spec.graph_modes {
            series.push(Series {
                pattern,
                graph,
                // The compute kernel alone moves no message: one size.
                sizes: match pattern {
                    Pattern::Work { .. } => vec![8],
                    _ => spec.sizes.clone(),
                },
            });
        }
    }
    for collective in &spec.collectives {
        let pattern = match collective {
            Collective::AllReduce => Pattern::AllReduce,
            Collective::AllToAll => Pattern::AllToAll,
        };
        for &graph in &spec.graph_modes {
            series.push(Series {
                pattern,
                graph,
                sizes: spec
                    .collective_sizes
                    .iter()
                    .copied()
                    .filter(|&s| s >= 4 * world as u64)
                    .collect(),
            });
        }
    }
    series
}

/// Timed iterations at one size: fewer for the largest transfers.
fn iters_for(spec: &P2pSpec, bytes: u64) -> usize {
    if bytes >= 256 << 20 {
        spec.iters.clamp(1, 20)
    } else {
        spec.iters.max(1)
    }
}

/// Operations captured per graph: many for small sizes, so launch cost amortises as in nccl-tests -G.
fn ops_per_graph(bytes: u64) -> usize {
    match bytes {
        0..=1_048_576 => 20,
        1_048_577..=67_108_864 => 4,
        _ => 1,
    }
}

fn seed(rank: usize, bytes: u64) -> u64 {
    0x5032_5000_0000_0000 ^ ((rank as u64) << 40) ^ bytes
}

struct Buffers {
    send: super::gpu::Buffer,
    recv: super::gpu::Buffer,
    wrong: super::gpu::Buffer,
    /// What the hand-off's compute kernel writes.
    work: super::gpu::Buffer,
}

/// Runs the probe on every rank; rank 0 returns the tables.
pub(super) fn run(spec: &P2pSpec) -> Result<Option<Measured>, ProbeError> {
    let world = spec.layout.world_size();
    let body_spec = spec.clone();
    let blobs = run_ranks(&spec.layout, move |setup| rank_body(&body_spec, &setup))?;
    let Some(blobs) = blobs else {
        return Ok(None);
    };
    let per_rank: Vec<Vec<Vec<f64>>> = blobs
        .iter()
        .enumerate()
        .map(|(rank, blob)| {
            serde_json::from_slice(blob).map_err(|err| ProbeError::Rank {
                rank,
                message: format!("sent unreadable results: {err}"),
            })
        })
        .collect::<Result<_, _>>()?;
    assemble(spec, world, &per_rank).map(Some)
}

fn rank_body(spec: &P2pSpec, setup: &RankSetup) -> Result<Vec<u8>, ProbeError> {
    let gpu = Gpu::open(setup.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let comm = Comm::init(&setup.id, setup.rank, setup.world)?;
    let series = plan(spec, setup.world);
    let max_size = series
        .iter()
        .flat_map(|s| s.sizes.iter().copied())
        .max()
        .unwrap_or(8) as usize;
    let max_senders = series
        .iter()
        .map(|s| match s.pattern {
            Pattern::FanIn { senders } => senders,
            _ => 1,
        })
        .max()
        .unwrap_or(1);
    let buffers = Buffers {
        send: gpu.alloc(max_size, "send buffer")?,
        recv: gpu.alloc(max_size * max_senders, "receive buffer")?,
        wrong: gpu.alloc(8, "check counter")?,
        work: gpu.alloc(
            spec.handoff_work
                .iter()
                .copied()
                .filter(|_| spec.modes.contains(&P2pMode::Handoff))
                .max()
                .unwrap_or(4) as usize,
            "hand-off compute buffer",
        )?,
    };
    // Random data from the start: nothing is ever timed on zeros.
    kernels.fill_u32(
        &stream,
        buffers.send.ptr,
        (buffers.send.bytes / 4) as u64,
        seed(setup.rank, 0),
    )?;
    kernels.fill_u32(
        &stream,
        buffers.recv.ptr,
        (buffers.recv.bytes / 4) as u64,
        seed(setup.rank, 1),
    )?;
    let max_iters = spec.iters.max(20);
    let events = EventPairs::new(&gpu, max_iters)?;
    let ctx = RankCtx {
        rank: setup.rank,
        world: setup.world,
        kernels: &kernels,
        stream: &stream,
        comm: &comm,
        buffers: &buffers,
    };
    let mut out: Vec<Vec<f64>> = Vec::new();
    for s in &series {
        let participates = s.pattern.participates(setup.rank);
        if participates {
            for &bytes in &s.sizes {
                for _ in 0..spec.warmup.max(1) {
                    ctx.enqueue(s.pattern, bytes)?;
                }
            }
            ctx.wait("warm-up")?;
        }
        for &bytes in &s.sizes {
            if !participates {
                out.extend([Vec::new(), Vec::new(), vec![0.0, 0.0]]);
                continue;
            }
            let iters = iters_for(spec, bytes);
            let (samples, host) = if s.graph {
                let per_graph = ops_per_graph(bytes);
                let graph = Graph::capture(&stream, || {
                    for _ in 0..per_graph {
                        ctx.enqueue(s.pattern, bytes)?;
                    }
                    Ok(())
                })?;
                for _ in 0..2 {
                    graph.launch(&stream)?;
                }
                ctx.wait("graph warm-up")?;
                let mut host = Vec::with_capacity(iters);
                for i in 0..iters {
                    events.start[i].record(&stream)?;
                    let t0 = Instant::now();
                    graph.launch(&stream)?;
                    host.push(t0.elapsed().as_secs_f64() * 1e6);
                    events.end[i].record(&stream)?;
                }
                ctx.wait("graph replays")?;
                let samples: Vec<f64> = events
                    .elapsed_us(iters)?
                    .into_iter()
                    .map(|t| t / per_graph as f64)
                    .collect();
                (samples, host)
            } else {
                let mut host = Vec::with_capacity(iters);
                for i in 0..iters {
                    events.start[i].record(&stream)?;
                    let t0 = Instant::now();
                    ctx.enqueue(s.pattern, bytes)?;
                    host.push(t0.elapsed().as_secs_f64() * 1e6);
                    events.end[i].record(&stream)?;
                }
                ctx.wait("timed operations")?;
                (events.elapsed_us(iters)?, host)
            };
            let legs = if matches!(s.pattern, Pattern::PingPong | Pattern::Handoff { .. }) {
                2.0
            } else {
                1.0
            };
            let wrong = ctx.check(s.pattern, bytes)?;
            out.push(samples.into_iter().map(|t| t / legs).collect());
            out.push(host);
            out.push(vec![wrong as f64, 1.0]);
        }
    }
    stream.sync()?;
    serde_json::to_vec(&out).map_err(|err| ProbeError::Rank {
        rank: setup.rank,
        message: format!("cannot encode results: {err}"),
    })
}

struct RankCtx<'a> {
    rank: usize,
    world: usize,
    kernels: &'a Kernels,
    stream: &'a Stream,
    comm: &'a Comm,
    buffers: &'a Buffers,
}

impl RankCtx<'_> {
    fn wait(&self, what: &str) -> Result<(), ProbeError> {
        self.stream.sync_or_timeout(
            OP_TIMEOUT,
            &format!("NCCL {what}"),
            self.rank,
            || self.comm.async_error(),
            || self.comm.abort(),
        )
    }

    /// Enqueues one operation of `pattern` moving `bytes` (per sender).
    fn enqueue(&self, pattern: Pattern, bytes: u64) -> Result<(), ProbeError> {
        let (c, s, b) = (self.comm, self.stream, self.buffers);
        let n = bytes as usize;
        let peer = 1 - self.rank.min(1);
        match pattern {
            Pattern::OneWay => match self.rank {
                0 => c.send(b.send.ptr, n, Dtype::U8, 1, s),
                1 => c.recv(b.recv.ptr, n, Dtype::U8, 0, s),
                _ => Ok(()),
            },
            Pattern::PingPong => match self.rank {
                0 => {
                    c.send(b.send.ptr, n, Dtype::U8, 1, s)?;
                    c.recv(b.recv.ptr, n, Dtype::U8, 1, s)
                }
                1 => {
                    c.recv(b.recv.ptr, n, Dtype::U8, 0, s)?;
                    c.send(b.send.ptr, n, Dtype::U8, 0, s)
                }
                _ => Ok(()),
            },
            Pattern::Bidirectional => {
                if self.rank > 1 {
                    return Ok(());
                }
                c.group_start()?;
                let r = c
                    .send(b.send.ptr, n, Dtype::U8, peer, s)
                    .and_then(|()| c.recv(b.recv.ptr, n, Dtype::U8, peer, s));
                let end = c.group_end();
                r.and(end)
            }
            Pattern::FanIn { senders } => {
                if self.rank == 0 {
                    c.group_start()?;
                    let mut r = Ok(());
                    for i in 1..=senders {
                        r = r.and_then(|()| c.recv(b.recv.at((i - 1) * n), n, Dtype::U8, i, s));
                    }
                    let end = c.group_end();
                    r.and(end)
                } else if self.rank <= senders {
                    c.send(b.send.ptr, n, Dtype::U8, 0, s)
                } else {
                    Ok(())
                }
            }
            Pattern::Work { work } => {
                if self.rank < 2 {
                    self.kernels.fill_u32(s, b.work.ptr, work / 4, bytes)
                } else {
                    Ok(())
                }
            }
            Pattern::Handoff { work } => match self.rank {
                0 => {
                    self.kernels.fill_u32(s, b.work.ptr, work / 4, bytes)?;
                    c.send(b.send.ptr, n, Dtype::U8, 1, s)?;
                    c.recv(b.recv.ptr, n, Dtype::U8, 1, s)
                }
                1 => {
                    c.recv(b.recv.ptr, n, Dtype::U8, 0, s)?;
                    self.kernels.fill_u32(s, b.work.ptr, work / 4, bytes)?;
                    c.send(b.send.ptr, n, Dtype::U8, 0, s)
                }
                _ => Ok(()),
            },
            Pattern::AllReduce => c.all_reduce_f32(b.recv.ptr, n / 4, s),
            Pattern::AllToAll => {
                let per_peer = n / self.world / 4 * 4;
                c.all_to_all(b.send.ptr, b.recv.ptr, per_peer, s)
            }
        }
    }

    /// Runs one operation on fresh patterns and counts received words that are wrong.
    fn check(&self, pattern: Pattern, bytes: u64) -> Result<u64, ProbeError> {
        let (k, s, b) = (self.kernels, self.stream, self.buffers);
        let words = bytes / 4;
        k.fill_u32(s, b.send.ptr, words, seed(self.rank, bytes))?;
        let recv_bytes = match pattern {
            Pattern::FanIn { senders } if self.rank == 0 => senders * bytes as usize,
            _ => bytes as usize,
        };
        zero_async(s, b.recv.ptr, recv_bytes)?;
        if pattern == Pattern::AllReduce {
            let value = (self.rank as f32 + 1.0).to_bits();
            memset_u32_async(s, b.recv.ptr, value, words as usize)?;
        }
        zero_async(s, b.wrong.ptr, 8)?;
        self.enqueue(pattern, bytes)?;
        let peer = 1 - self.rank.min(1);
        match pattern {
            Pattern::OneWay => {
                if self.rank == 1 {
                    k.check_u32(s, b.recv.ptr, words, seed(0, bytes), 0, b.wrong.ptr)?;
                }
            }
            Pattern::PingPong | Pattern::Bidirectional | Pattern::Handoff { .. } => {
                if self.rank < 2 {
                    k.check_u32(s, b.recv.ptr, words, seed(peer, bytes), 0, b.wrong.ptr)?;
                }
            }
            Pattern::Work { .. } => {}
            Pattern::FanIn { senders } => {
                if self.rank == 0 {
                    for i in 1..=senders {
                        k.check_u32(
                            s,
                            b.recv.at((i - 1) * bytes as usize),
                            words,
                            seed(i, bytes),
                            0,
                            b.wrong.ptr,
                        )?;
                    }
                }
            }
            Pattern::AllReduce => {
                let n = self.world as f32;
                let expect = (n * (n + 1.0) / 2.0).to_bits();
                k.check_const_u32(s, b.recv.ptr, words, expect, b.wrong.ptr)?;
            }
            Pattern::AllToAll => {
                let per_peer = bytes as usize / self.world / 4 * 4;
                let per_peer_words = (per_peer / 4) as u64;
                for p in 0..self.world {
                    k.check_u32(
                        s,
                        b.recv.at(p * per_peer),
                        per_peer_words,
                        seed(p, bytes),
                        self.rank as u64 * per_peer_words,
                        b.wrong.ptr,
                    )?;
                }
            }
        }
        self.wait("data check")?;
        let mut wrong = [0u64];
        b.wrong.download(&mut wrong)?;
        Ok(wrong[0])
    }
}

fn assemble(
    spec: &P2pSpec,
    world: usize,
    per_rank: &[Vec<Vec<f64>>],
) -> Result<Measured, ProbeError> {
    let mut measured = Measured::default();
    let mut cursor = 0usize;
    // Median time of each hand-off compute kernel alone, by (work bytes, graph).
    let mut work_us: Vec<((u64, bool), f64)> = Vec::new();
    for s in plan(spec, world) {
        let mut points = Vec::new();
        for &bytes in &s.sizes {
            let mut samples_by_rank = Vec::new();
            let mut host_by_rank = Vec::new();
            let mut wrong = 0.0;
            for (rank, lists) in per_rank.iter().enumerate() {
                let entry = lists
                    .get(cursor..cursor + 3)
                    .ok_or_else(|| ProbeError::Rank {
                        rank,
                        message: "sent fewer results than planned".to_owned(),
                    })?;
                if entry[2].get(1).copied() == Some(1.0) {
                    samples_by_rank.push(entry[0].clone());
                    host_by_rank.push(entry[1].clone());
                    wrong += entry[2][0];
                }
            }
            cursor += 3;
            if wrong > 0.0 {
                return Err(ProbeError::DataCheck {
                    what: format!(
                        "{} ({}) of {bytes} B",
                        s.pattern.op(),
                        if s.graph { "graph" } else { "eager" }
                    ),
                    detail: format!("{wrong} received words differ from what was sent"),
                });
            }
            let mut samples = crate::stats::max_over_ranks(&samples_by_rank);
            let host = crate::stats::max_over_ranks(&host_by_rank);
            let mut extra = Vec::new();
            match s.pattern {
                Pattern::Work { work } => {
                    let median = crate::stats::median(&samples).unwrap_or(f64::NAN);
                    work_us.push(((work, s.graph), median));
                }
                Pattern::Handoff { work } => {
                    // Each leg ran the compute kernel once: take its time alone out.
                    let alone = work_us
                        .iter()
                        .find(|(key, _)| *key == (work, s.graph))
                        .map_or(0.0, |(_, us)| *us);
                    extra.push(("work_us", alone));
                    extra.push((
                        "leg_with_work_us",
                        crate::stats::median(&samples).unwrap_or(f64::NAN),
                    ));
                    samples = samples.iter().map(|t| (t - alone).max(0.0)).collect();
                }
                _ => {}
            }
            let median = crate::stats::median(&samples).unwrap_or(f64::NAN);
            let (moved, factor) = s.pattern.bandwidth(bytes, world);
            let algbw = moved / (median * 1e3);
            let mut figures = extra;
            figures.extend([
                ("algbw_gbps", algbw),
                ("busbw_gbps", algbw * factor),
                (
                    // Eager: host time to enqueue one operation. Graph: host time of one replay
                    // launch (of `ops_per_graph` operations), which is not a per-operation cost.
                    if s.graph { "replay_host_us" } else { "host_us" },
                    crate::stats::median(&host).unwrap_or(f64::NAN),
                ),
                ("kernels", s.pattern.calls(world) as f64),
                (
                    "ops_per_graph",
                    if s.graph {
                        ops_per_graph(bytes) as f64
                    } else {
                        0.0
                    },
                ),
            ]);
            points.push(point(vec![bytes as f64], samples, derived(&figures))?);
        }
        let mut variant = vec![("graph", s.graph.to_string())];
        match s.pattern {
            Pattern::FanIn { senders } => variant.push(("senders", senders.to_string())),
            Pattern::Work { work } | Pattern::Handoff { work } => {
                variant.push(("work_bytes", work.to_string()));
            }
            Pattern::AllReduce | Pattern::AllToAll => variant.push(("ranks", world.to_string())),
            _ => {}
        }
        let fit_points: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.at[0], p.stats.median_us))
            .collect();
        if let Some(fit) = crate::fit::alpha_beta(&fit_points, 1024.0, 64.0 * 1024.0 * 1024.0) {
            measured.notes.insert(
                format!("{}.{}.fit", s.pattern.op(), if s.graph { "graph" } else { "eager" }),
                format!(
                    "latency {:.2} µs (median of sizes ≤ 1 KiB), bandwidth {:.1} GB/s (slope over sizes ≥ 64 MiB)",
                    fit.latency_us, fit.gbps
                ),
            );
        }
        measured
            .tables
            .push(table(s.pattern.op(), &variant, &["bytes"], points));
    }
    measured.notes.insert(
        "p2p".to_owned(),
        format!(
            "{} ranks as {}; {} warm-ups of every size before timing; {} timed operations per size (20 from 256 MiB); \
             events around each operation on every rank, each iteration's time is the slowest participating rank's; \
             graph mode captures 20 (≤ 1 MiB), 4 (≤ 64 MiB) or 1 operation per graph and divides each replay's time; \
             ping-pong time is per leg; algbw/busbw as nccl-tests (fan-in algbw counts all senders' bytes); \
             data checked after timing every size",
            world,
            spec.layout.name(),
            spec.warmup,
            spec.iters
        ),
    );
    Ok(measured)
}
