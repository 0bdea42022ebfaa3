//! Simulator speed (DESIGN §8): events per second of the DES core, and wall time of the default
//! `afd-sim predict` run (target < 0.1 s).
//!
//! Run with `cargo bench -p afd-benches --bench sim`.

use std::hint::black_box;

use afd_benches::{default_costs, default_predict, roofline};
use afd_sim::engine::{RunOptions, run};
use afd_sim::event::Event;
use afd_sim::queue::EventQueue;
use afd_sim::rng::{RngStream, Seed, stream};
use afd_sim::time::{SimDuration, SimTime};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::RngExt;
use xxhash_rust::xxh3::Xxh3;

/// The DES core alone: pop, hash `(time, kind, id)` into the event log, and schedule a follow-up at
/// a random delay, with 1,024 events pending (the loop of `engine::run` without the model).
fn core_events(n: u64) -> u64 {
    let mut queue = EventQueue::with_capacity(1024);
    let mut rng = stream(Seed(1), RngStream::Arrivals);
    for request in 0..1024 {
        queue.schedule(
            SimTime::from_ns(rng.random_range(0..1_000_000)),
            Event::RequestIntended { request },
        );
    }
    let mut hash = Xxh3::new();
    let mut handled = 0;
    while let Some((now, event)) = queue.pop() {
        hash.update(&now.as_ns().to_le_bytes());
        hash.update(&[event.kind()]);
        hash.update(&event.id().to_le_bytes());
        handled += 1;
        if handled >= n {
            break;
        }
        let next = match event {
            Event::RequestIntended { request } => Event::StepFinished {
                step: u64::from(request),
            },
            Event::StepFinished { step } => Event::RequestIntended {
                request: step as u32,
            },
            Event::StepStarted
            | Event::StatsPublished
            | Event::RequestAdmitted { .. }
            | Event::RequestDelivered { .. }
            | Event::TokensEmitted { .. }
            | Event::ConnectionsOpened => Event::StepStarted,
        };
        queue.schedule(
            now + SimDuration::from_ns(rng.random_range(1..100_000)),
            next,
        );
    }
    hash.digest() ^ handled
}

fn event_loop(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim/event_loop");
    let n = 1_000_000;
    group.throughput(Throughput::Elements(n));
    group.bench_function("pop_hash_schedule", |b| {
        b.iter(|| black_box(core_events(black_box(n))))
    });
    group.finish();
}

fn predict(c: &mut Criterion) {
    let (config, model, workload) = default_predict();
    let options = RunOptions::new(Seed(0));
    let mut group = c.benchmark_group("sim/predict");
    group.sample_size(20);
    // What `afd-sim` runs with no flags (the built-in H200 profile), and the datasheet roofline.
    group.bench_function("default_run", |b| {
        b.iter(|| {
            let result = run(&config, default_costs(&config, &model), &workload, &options)
                .expect("the seed recipe serves its model");
            black_box(result.event_log_hash)
        })
    });
    group.bench_function("default_run_roofline", |b| {
        b.iter(|| {
            let result = run(&config, roofline(&config, &model), &workload, &options)
                .expect("the seed recipe serves its model");
            black_box(result.event_log_hash)
        })
    });
    group.finish();
}

criterion_group!(benches, event_loop, predict);
criterion_main!(benches);
