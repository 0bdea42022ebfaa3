//! The builders the library's integration tests share (the binary's tests are in sim/cli).

use std::collections::BTreeMap;

use afd_sim::engine::{RunOptions, RunResult, run};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::CostModel;
use afd_sim::model::workload::{Arrivals, RandomDataset, Workload, random_workload};
use afd_sim::report::{ReportContext, build_report};
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;
use afd_traces::calibration::{CalibrationProfile, CostPoint, CostTable, Provenance, SampleStats};
use afd_traces::report::PredictReport;

pub(crate) fn roofline(config: &ServingConfig, model: &ModelArch) -> CostModel {
    CostModel::roofline(model, config.gpu, config.cost_layout())
}

/// `n` random-dataset requests of `input`/`output` tokens at `rate` req/s (None: all at once).
pub(crate) fn workload(
    n: u32,
    input: u32,
    output: u32,
    rate: Option<f64>,
    concurrency: Option<u32>,
    seed: u64,
) -> Workload {
    let arrivals = match rate {
        Some(rate) => Arrivals::Gamma {
            rate,
            burstiness: 1.0,
        },
        None => Arrivals::AllAtOnce,
    };
    let dataset = RandomDataset {
        num_prompts: n,
        input_len: input,
        output_len: output,
        range_ratio: 0.0,
    };
    random_workload(dataset, arrivals, concurrency, Seed(seed)).expect("test workloads are valid")
}

pub(crate) fn simulate(
    config: &ServingConfig,
    model: &ModelArch,
    workload: &Workload,
    options: &RunOptions,
) -> (RunResult, PredictReport) {
    let result = run(config, roofline(config, model), workload, options)
        .expect("test deployments are valid");
    let report = build_report(
        &result,
        &ReportContext {
            config,
            workload,
            seed: options.seed,
            dataset: "random",
        },
    );
    (result, report)
}

fn point(at: Vec<f64>, us: f64) -> CostPoint {
    CostPoint {
        at,
        stats: SampleStats {
            n: 1,
            min_us: us,
            median_us: us,
            p99_us: us,
            max_us: us,
            mean_us: us,
        },
        samples_us: vec![us],
        derived: BTreeMap::new(),
    }
}

/// A table whose every point costs `us` (flat), over one or two axes.
pub(crate) fn flat(op: &str, variant: &[(&str, &str)], axes: &[&str], us: f64) -> CostTable {
    let points = match axes.len() {
        1 => vec![point(vec![1.0], us), point(vec![1e9], us)],
        _ => vec![
            point(vec![1.0, 1.0], us),
            point(vec![1.0, 1e6], us),
            point(vec![1e6, 1.0], us),
            point(vec![1e6, 1e6], us),
        ],
    };
    CostTable {
        op: op.to_owned(),
        variant: variant
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        axes: axes.iter().map(|a| (*a).to_owned()).collect(),
        points,
    }
}

pub(crate) fn profile(tables: Vec<CostTable>) -> CalibrationProfile {
    let mut profile = CalibrationProfile::new(Provenance::default());
    profile.tables = tables;
    profile
}

/// Flat tables from `(op, µs)` pairs, with each op's axes; `op@key=value` adds a variant (e.g.
/// `nccl.all_to_all@ranks=2`). Launches cost nothing unless listed.
pub(crate) fn flat_costs(entries: &[(&str, f64)]) -> Vec<CostTable> {
    let mut tables: Vec<CostTable> = entries
        .iter()
        .map(|&(spec, us)| {
            let (op, variant) = match spec.split_once('@') {
                Some((op, variant)) => (op, variant.split_once('=')),
                None => (spec, None),
            };
            let axes: &[&str] = match op {
                "p2p.one_way" | "nccl.all_reduce" | "nccl.all_to_all" => &["bytes"],
                "attention.prefill" => &["tokens", "context"],
                "attention.mla_decode" => &["batch", "context"],
                "moe.routed_experts" => &["active_experts", "tokens_per_expert"],
                "launch.eager" | "launch.graph" => &["kernels"],
                "host.step" => &["requests"],
                _ => &["tokens"],
            };
            flat(op, variant.as_slice(), axes, us)
        })
        .collect();
    for launch in ["launch.eager", "launch.graph"] {
        if !entries.iter().any(|(spec, _)| *spec == launch) {
            tables.push(flat(launch, &[], &["kernels"], 0.0));
        }
    }
    tables
}
