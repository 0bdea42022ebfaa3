//! Planner throughput (DESIGN §8, issue 8): candidates per second of `afd-sim sweep` on one and two
//! threads, each candidate simulated in full (DeepSeek-V2-Lite on 16 H200s, the recipe's 1,024
//! requests). The acceptance figure (≥ 4,500 candidates in < 30 s on 2 cores) follows from the
//! two-thread rate; docs/planner.md has the full-sweep command and its measured wall time.
//!
//! Run with `cargo bench -p afd-benches --bench sweep`.

use std::hint::black_box;

use afd_benches::{sweep_inputs, sweep_sample};
use afd_sim::planner::{Shard, run};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

/// Candidates per measured iteration, spread over the default space.
const CANDIDATES: usize = 24;

fn sweep(c: &mut Criterion) {
    let (model, workload, plan) = sweep_sample(CANDIDATES);
    let inputs = sweep_inputs(&model, &workload);
    let mut group = c.benchmark_group("planner/sweep");
    group.sample_size(10);
    group.throughput(Throughput::Elements(plan.candidates.len() as u64));
    for threads in [1, 2] {
        group.bench_function(format!("{threads}_thread"), |b| {
            b.iter(|| {
                let rows = run(&plan, &inputs, Shard::WHOLE, threads, &|| {});
                black_box(rows.len())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sweep);
criterion_main!(benches);
