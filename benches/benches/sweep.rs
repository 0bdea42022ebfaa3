//! Planner throughput (DESIGN §8, issue 8): candidates per second of `afd-sim sweep` on one and two
//! threads, each candidate simulated in full (DeepSeek-V2-Lite on 16 H200s priced by the built-in
//! H200 profile, the recipe's 1,024 requests): `planner/sweep` over 24 candidates spread across the
//! space (no two share a layout: the worst case), `planner/sweep_slice` over 96 consecutive ones
//! (as a full sweep sees them), both from kernels alone (`sweep --kernel-model`); `planner/sweep_slice_engine`
//! the same slice priced as real vLLM runs each candidate (`sweep`'s default since the engine profile
//! prices AFD pairs). The acceptance figure (≥ 4,500 candidates in < 30 s on 2 cores) follows from the
//! two-thread rate; docs/planner.md has the full-sweep command and its measured wall time.
//!
//! Run with `cargo bench -p afd-benches --bench sweep`.

use std::hint::black_box;

use afd_benches::{sweep_inputs, sweep_sample, sweep_slice};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::workload::Workload;
use afd_sim::planner::{Plan, Shard, run};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Candidates per measured iteration, spread over the default space.
const CANDIDATES: usize = 24;

/// Consecutive candidates per measured iteration (neighbours share layouts, as in a full sweep).
const SLICE: usize = 96;

fn sweep(c: &mut Criterion) {
    for (name, (model, workload, plan), engine) in [
        ("planner/sweep", sweep_sample(CANDIDATES), false),
        ("planner/sweep_slice", sweep_slice(SLICE), false),
        ("planner/sweep_slice_engine", sweep_slice(SLICE), true),
    ] {
        measure(c, name, &model, &workload, &plan, engine);
    }
}

fn measure(
    c: &mut Criterion,
    name: &str,
    model: &ModelArch,
    workload: &Workload,
    plan: &Plan,
    engine: bool,
) {
    // Priced by the built-in H200 profile, as `afd-sim sweep --kernel-model` prices (the figures
    // before the engine became the default); the `_engine` group as `afd-sim sweep` prices by
    // default, real vLLM's engine beside it.
    let profile = afd_sim::model::profiles::builtin(GpuKind::H200)
        .expect("the built-in profiles parse")
        .expect("the H200 has built-in profiles");
    let mut inputs = sweep_inputs(model, workload, Some(&profile));
    if engine {
        inputs.engine = afd_sim::vllm_compare::builtin_engine(model, GpuKind::H200);
        assert!(
            inputs.engine.is_some(),
            "the built-in engine prices the model"
        );
    }
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.throughput(Throughput::Elements(plan.candidates.len() as u64));
    for threads in [1, 2] {
        group.bench_function(format!("{threads}_thread"), |b| {
            b.iter(|| {
                let rows = run(plan, &inputs, Shard::WHOLE, threads, &|| {});
                black_box(rows.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sweep);
criterion_main!(benches);
