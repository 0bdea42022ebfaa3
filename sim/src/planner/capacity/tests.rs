//! The capacity search: what it reports passes and the step above fails, a looser objective never
//! lowers it, and capacity sweeps split into shards merge into the single run's bytes.

use proptest::prelude::*;

use super::*;
use crate::engine::RunOptions;
use crate::model::arch::ModelArch;
use crate::model::hardware::GpuKind;
use crate::model::workload::{Arrivals, RandomDataset, random_workload};
use crate::planner::candidate::Context;
use crate::planner::evaluate::Inputs;
use crate::planner::frontier::{Slo, SloStat};
use crate::planner::space::{Budget, Dimensions};
use crate::planner::{Shard, merge, plan, run};
use crate::rng::Seed;
use crate::topology::RuleSet;

/// A small random workload sent at 1 request/s, the base a rate search rescales.
fn base(seed: u64, prompts: u32) -> Workload {
    random_workload(
        RandomDataset {
            num_prompts: prompts,
            input_len: 256,
            output_len: 16,
            range_ratio: 0.5,
        },
        Arrivals::Gamma {
            rate: 1.0,
            burstiness: 1.0,
        },
        None,
        Seed(seed),
    )
    .unwrap()
}

fn context(model: &ModelArch, gpu: GpuKind, gpus: u32) -> Context<'_> {
    Context {
        model,
        model_path: "deepseek-ai/DeepSeek-V2-Lite",
        gpu,
        rules: RuleSet::Latest,
        budget: Budget {
            gpus,
            min_gpus: gpus,
            gpus_per_node: 8,
        },
    }
}

fn inputs<'a>(
    model: &'a ModelArch,
    workload: &'a Workload,
    slo: Slo,
    by: CapacityBy,
) -> Inputs<'a> {
    Inputs {
        model,
        calibration: None,
        workload,
        dataset: "random",
        options: RunOptions::new(Seed(3)),
        slo,
        cross_node_link: None,
        loads: Default::default(),
        capacity: Some(CapacitySearch::new(by)),
        engine: None,
    }
}

/// The candidates of a small space on `gpus` GPUs of `gpu` (both kinds, a few limits).
fn candidates(model: &ModelArch, gpu: GpuKind, gpus: u32) -> Vec<Candidate> {
    let mut dimensions = Dimensions::default();
    dimensions
        .assign("dbo=off,2;capture=eager,auto;max-num-seqs=16,64;max-num-batched-tokens=512")
        .unwrap();
    plan(&dimensions, &context(model, gpu, gpus)).candidates
}

fn verdict_at(candidate: &Candidate, inputs: &Inputs<'_>, by: CapacityBy, load: f64) -> String {
    let workload = workload_at(inputs.workload, by, Load::Level(load));
    simulate_with(candidate, 0, 1, "t", inputs, &workload, &mut None)
        .row
        .slo
}

fn tpot(ms: f64) -> Slo {
    Slo {
        ttft_ms: Some(2_000.0),
        tpot_ms: Some(ms),
        stat: SloStat::P99,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Over GPUs (their datasheets price every kernel: a different cost table each), candidates,
    /// seeds and objectives: the reported capacity met the objective, one step above did not (or
    /// it is the saturated throughput, above which nothing is sustained).
    #[test]
    fn a_candidate_meets_the_objective_at_its_capacity_and_not_one_step_above(
        gpu in prop::sample::select(vec![GpuKind::H200, GpuKind::H100, GpuKind::A100, GpuKind::L4]),
        pick in 0usize..64,
        seed in 0u64..4,
        tpot_ms in 5.0f64..80.0,
        by_rate in any::<bool>(),
    ) {
        let model = ModelArch::deepseek_v2_lite();
        let all = candidates(&model, gpu, 4);
        prop_assume!(!all.is_empty());
        let candidate = &all[pick % all.len()];
        let workload = base(seed, 24);
        let by = if by_rate { CapacityBy::Rate } else { CapacityBy::Concurrency };
        let inputs = inputs(&model, &workload, tpot(tpot_ms), by);
        let found = search(candidate, 0, 1, "t", &inputs, CapacitySearch::new(by), &mut None);
        prop_assume!(found.row.status == "ok");
        let capacity = found.row.capacity.unwrap();
        let probes = found.row.capacity_probes.unwrap();
        prop_assert!(probes <= 24);
        if capacity > 0.0 {
            prop_assert_eq!(found.row.slo.as_str(), "pass");
            prop_assert_eq!(verdict_at(candidate, &inputs, by, capacity), "pass");
            let above = match by {
                CapacityBy::Rate => capacity * 1.05,
                CapacityBy::Concurrency => (capacity * 1.05).ceil().max(capacity + 1.0),
            };
            let ceiling = match by {
                CapacityBy::Rate => {
                    let saturated = workload_at(&workload, by, Load::Saturated);
                    simulate_with(candidate, 0, 1, "t", &inputs, &saturated, &mut None)
                        .row
                        .request_throughput
                        .unwrap()
                }
                CapacityBy::Concurrency => workload.requests.len() as f64,
            };
            if above <= ceiling && probes < 24 {
                prop_assert_eq!(verdict_at(candidate, &inputs, by, above), "fail");
            }
            prop_assert!(found.row.goodput_requests_per_s.unwrap() > 0.0);
            if by == CapacityBy::Rate {
                // Steady state: the rate carried, not the finite run's completions over its span.
                prop_assert_eq!(found.row.goodput_requests_per_s, Some(capacity));
            }
        } else {
            prop_assert_eq!(found.row.goodput_tokens_per_s_per_gpu, Some(0.0));
        }
    }

    /// A looser objective never lowers the capacity by a search step or more. Where the verdict is
    /// monotone in the load, a search reports a passing `c` with a failing `c × step` above it, so
    /// the tight capacity `a` lies below the tight threshold, which lies at or below the looser
    /// one, which lies below `b × step`. The verdict need not be monotone (the module's doc), and
    /// the two searches then probe different loads: an A100 candidate's tight search found
    /// 30.64 req/s where the looser one found 30.31, both within one step
    /// (proptest-regressions/planner/capacity/tests.txt). A candidate that meets neither objective
    /// at any load reports 0 for both (an A100 one at a 5 ms TPOT, kept there too).
    #[test]
    fn a_looser_objective_never_lowers_the_capacity(
        gpu in prop::sample::select(vec![GpuKind::H200, GpuKind::A100]),
        pick in 0usize..64,
        tight in 5.0f64..40.0,
        looser in 1.0f64..3.0,
    ) {
        let model = ModelArch::deepseek_v2_lite();
        let all = candidates(&model, gpu, 4);
        prop_assume!(!all.is_empty());
        let candidate = &all[pick % all.len()];
        let workload = base(1, 24);
        let capacity = |ms: f64| {
            let inputs = inputs(&model, &workload, tpot(ms), CapacityBy::Rate);
            let found = search(
                candidate,
                0,
                1,
                "t",
                &inputs,
                CapacitySearch::new(CapacityBy::Rate),
                &mut None,
            );
            found.row.capacity.unwrap_or(0.0)
        };
        let (a, b) = (capacity(tight), capacity(tight * looser));
        let step = CapacitySearch::new(CapacityBy::Rate).step;
        // Where no load meets the tight objective (a = 0), any looser capacity is at least as high.
        prop_assert!(
            a == 0.0 || b * step > a,
            "TPOT {tight} ms: {a} req/s; {} ms: {b} req/s",
            tight * looser
        );
    }
}

#[test]
fn capacity_sweeps_split_into_shards_merge_into_the_single_runs_bytes() {
    let model = ModelArch::deepseek_v2_lite();
    let workload = base(0, 16);
    let mut dimensions = Dimensions::default();
    dimensions
        .assign("dbo=off;capture=eager;max-num-seqs=16,64;max-num-batched-tokens=512")
        .unwrap();
    let plan = plan(&dimensions, &context(&model, GpuKind::H200, 4));
    assert!(plan.candidates.len() >= 4, "{}", plan.candidates.len());
    let inputs = inputs(&model, &workload, tpot(20.0), CapacityBy::Rate);
    let single = run(&plan, &inputs, Shard::WHOLE, 1, &|| {});
    assert!(single.iter().all(|r| r.capacity_by == "rate"));
    assert!(single.iter().any(|r| r.capacity.is_some_and(|c| c > 0.0)));
    let bytes = afd_traces::sweep::write_sweep_csv(&single).unwrap();
    let merged = merge(crate::planner::tests::written_shards(&plan, &inputs, 2)).unwrap();
    assert_eq!(afd_traces::sweep::write_sweep_csv(&merged).unwrap(), bytes);
}

#[test]
fn a_rate_probe_squeezes_the_same_arrivals_and_a_concurrency_probe_sends_them_at_once() {
    let w = base(2, 8);
    let at = workload_at(&w, CapacityBy::Rate, Load::Level(4.0));
    assert_eq!(at.request_rate, Some(4.0));
    for (a, b) in w.requests.iter().zip(&at.requests) {
        assert_eq!(
            b.intended_send.as_ns(),
            (a.intended_send.as_ns() as f64 / 4.0).round() as u64
        );
        assert_eq!(
            (a.input_tokens, a.output_tokens),
            (b.input_tokens, b.output_tokens)
        );
    }
    let streams = workload_at(&w, CapacityBy::Concurrency, Load::Level(3.0));
    assert_eq!(streams.max_concurrency, Some(3));
    assert!(
        streams
            .requests
            .iter()
            .all(|r| r.intended_send == SimTime::ZERO)
    );
}
