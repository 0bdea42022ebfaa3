//! `launch`: host cost of launching N tiny kernels one by one versus replaying the same N as one
//! CUDA graph, each until the last kernel has run.

use std::time::Instant;

use super::gpu::{EventPairs, Gpu, Graph, zero_async};
use super::kernels::Kernels;
use crate::assemble::{derived, point, table};
use crate::error::ProbeError;
use crate::spec::{LaunchSpec, Measured};

pub(super) fn run(spec: &LaunchSpec) -> Result<Measured, ProbeError> {
    let gpu = Gpu::open(spec.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let counter = gpu.alloc(4, "launch counter")?;
    zero_async(&stream, counter.ptr, 4)?;
    let mut launched: u64 = 0;
    let iters = spec.timing.iters.max(1);
    let events = EventPairs::new(&gpu, iters)?;
    let mut eager_points = Vec::new();
    let mut graph_points = Vec::new();
    // Runs `enqueue` (which launches `n` kernels) warm-up times, then `iters` timed times: host clock
    // from the first launch until the stream has drained, enqueue time, and events.
    let mut measure = |n: usize, enqueue: &dyn Fn() -> Result<(), ProbeError>| {
        for _ in 0..spec.timing.warmup.max(1) {
            enqueue()?;
            stream.sync()?;
            launched += n as u64;
        }
        let mut total = Vec::with_capacity(iters);
        let mut host = Vec::with_capacity(iters);
        for i in 0..iters {
            let t0 = Instant::now();
            events.start[i].record(&stream)?;
            enqueue()?;
            events.end[i].record(&stream)?;
            host.push(t0.elapsed().as_secs_f64() * 1e6);
            stream.sync()?;
            total.push(t0.elapsed().as_secs_f64() * 1e6);
            launched += n as u64;
        }
        let device = events.elapsed_us(iters)?;
        let median = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
        let d = derived(&[
            ("host_us", median(&host)),
            ("device_us", median(&device)),
            ("per_kernel_us", median(&total) / n as f64),
            ("kernels", n as f64),
        ]);
        point(vec![n as f64], total, d)
    };
    for &n in &spec.kernels {
        let n = n as usize;
        let eager = || -> Result<(), ProbeError> {
            for _ in 0..n {
                kernels.add_one(&stream, counter.ptr)?;
            }
            Ok(())
        };
        eager_points.push(measure(n, &eager)?);
        // The same n launches captured once and replayed.
        let graph = Graph::capture(&stream, eager)?;
        graph_points.push(measure(n, &|| graph.launch(&stream))?);
    }
    stream.sync()?;
    let mut count = [0f32];
    counter.download(&mut count)?;
    if f64::from(count[0]) != launched as f64 {
        return Err(ProbeError::DataCheck {
            what: "launch".to_owned(),
            detail: format!(
                "{launched} kernels launched but the counter reads {}",
                count[0]
            ),
        });
    }
    let mut measured = Measured::default();
    measured.notes.insert(
        "launch".to_owned(),
        format!(
            "GPU {} ({}): kernel add_one (1 thread); samples are host µs from the first launch until the stream drained; {} warm-ups, {iters} timed runs per count",
            gpu.ordinal, gpu.name, spec.timing.warmup
        ),
    );
    for (name, points) in [
        ("launch.eager", &eager_points),
        ("launch.graph", &graph_points),
    ] {
        let line: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.at[0], p.stats.median_us))
            .collect();
        if let Some(fit) = crate::fit::least_squares(&line) {
            measured.notes.insert(
                format!("{name}.fit"),
                format!(
                    "median µs ≈ {:.2} + {:.3} × kernels",
                    fit.intercept, fit.slope
                ),
            );
        }
    }
    measured
        .tables
        .push(table("launch.eager", &[], &["kernels"], eager_points));
    measured
        .tables
        .push(table("launch.graph", &[], &["kernels"], graph_points));
    Ok(measured)
}
