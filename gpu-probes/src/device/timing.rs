//! How every single-GPU operation is timed: warm-up, eager runs (CUDA events around each run, host
//! clock around each enqueue) and graph replays of many back-to-back repetitions.
//!
//! `op(rep)` enqueues one repetition; `rep` selects which layer's weights or which KV buffer it uses, so
//! consecutive repetitions touch distinct memory and L2 cannot hold them (as in a real step, where the
//! other layers' weights pass through L2 in between).

use std::time::Instant;

use super::gpu::{EventPairs, Gpu, Graph, Stream};
use crate::error::ProbeError;
use crate::spec::Timing;

/// Samples of one operation at one point.
pub(super) struct OpSamples {
    /// Per-operation GPU time from graph replays (replay time / `reps`), µs.
    pub(super) graph_us: Vec<f64>,
    /// Repetitions per graph replay.
    pub(super) reps: usize,
    /// CUDA-event time of each eager run, µs (includes launch gaps when the host is the bottleneck).
    pub(super) eager_us: Vec<f64>,
    /// Host time to enqueue each eager run, µs.
    pub(super) host_us: Vec<f64>,
}

impl OpSamples {
    /// The derived figures every timed single-GPU point carries: launches per operation, median host
    /// enqueue time and eager time, repetitions per replay.
    pub(super) fn derived(&self, kernels: usize) -> Vec<(&'static str, f64)> {
        self.derived_launches(kernels as f64)
    }

    /// As [`OpSamples::derived`], for an operation whose launch count is a mean over its repetitions.
    pub(super) fn derived_launches(&self, kernels: f64) -> Vec<(&'static str, f64)> {
        vec![
            ("kernels", kernels),
            (
                "host_us",
                crate::stats::median(&self.host_us).unwrap_or(f64::NAN),
            ),
            (
                "eager_us",
                crate::stats::median(&self.eager_us).unwrap_or(f64::NAN),
            ),
            ("reps_per_replay", self.reps as f64),
        ]
    }
}

/// The most repetitions one graph holds.
const MAX_REPS: usize = 1024;

/// Times `op` on `stream`. `min_reps` is the rotation length needed to defeat L2 (1 when the op's
/// working set is already larger than L2).
pub(super) fn time_op(
    gpu: &Gpu,
    stream: &Stream,
    timing: &Timing,
    min_reps: usize,
    mut op: impl FnMut(usize) -> Result<(), ProbeError>,
) -> Result<OpSamples, ProbeError> {
    for rep in 0..timing.warmup.max(1) {
        op(rep)?;
    }
    stream.sync()?;

    let iters = timing.iters.max(1);
    let events = EventPairs::new(gpu, iters)?;
    let mut host_us = Vec::with_capacity(iters);
    for i in 0..iters {
        events.start[i].record(stream)?;
        let t0 = Instant::now();
        op(i)?;
        host_us.push(t0.elapsed().as_secs_f64() * 1e6);
        events.end[i].record(stream)?;
    }
    stream.sync()?;
    let eager_us = events.elapsed_us(iters)?;

    let estimate = crate::stats::median(&eager_us).unwrap_or(1.0).max(0.5);
    let reps = crate::shapes::graph_reps(estimate, timing.min_replay_us, min_reps, MAX_REPS);
    let graph = Graph::capture(stream, || {
        for rep in 0..reps {
            op(rep)?;
        }
        Ok(())
    })?;
    for _ in 0..2 {
        graph.launch(stream)?;
    }
    stream.sync()?;
    for i in 0..iters {
        events.start[i].record(stream)?;
        graph.launch(stream)?;
        events.end[i].record(stream)?;
    }
    stream.sync()?;
    let graph_us = events
        .elapsed_us(iters)?
        .into_iter()
        .map(|t| t / reps as f64)
        .collect();
    Ok(OpSamples {
        graph_us,
        reps,
        eager_us,
        host_us,
    })
}
