//! Shared fixtures for the criterion benchmarks under `benches/benches/`.

use afd_sim::engine::RunOptions;
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::CostModel;
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::profiles::LoadedProfile;
use afd_sim::model::workload::{Arrivals, RandomDataset, Workload, random_workload};
use afd_sim::planner::candidate::Context;
use afd_sim::planner::evaluate::Inputs;
use afd_sim::planner::frontier::{Slo, SloStat};
use afd_sim::planner::space::{Budget, Dimensions};
use afd_sim::planner::{Plan, plan};
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;
use afd_sim::topology::RuleSet;

/// The seed recipe, DeepSeek-V2-Lite on the H200 roofline, and the recipe's benchmark workload
/// (1024 prompts, 1024 in / 128 out, 5 req/s, concurrency 32): what `afd-sim` runs with no arguments.
pub fn default_predict() -> (ServingConfig, ModelArch, Workload) {
    let config = ServingConfig::seed_recipe();
    let model = ModelArch::deepseek_v2_lite();
    let dataset = RandomDataset {
        num_prompts: 1024,
        input_len: 1024,
        output_len: 128,
        range_ratio: 0.0,
    };
    let workload = random_workload(
        dataset,
        Arrivals::Gamma {
            rate: 5.0,
            burstiness: 1.0,
        },
        Some(32),
        Seed(0),
    )
    .expect("the default workload is valid");
    (config, model, workload)
}

/// The roofline cost model of a deployment.
pub fn roofline(config: &ServingConfig, model: &ModelArch) -> CostModel {
    CostModel::roofline(model, config.gpu, config.cost_layout())
}

/// The cost model `afd-sim predict` uses without flags: the GPU's built-in measured profile.
pub fn default_costs(config: &ServingConfig, model: &ModelArch) -> CostModel {
    afd_sim::model::profiles::default_cost_model(model, config.gpu, config.cost_layout())
        .expect("the built-in profiles price the shipped model")
}

/// The planner's benchmark: `count` candidates spread evenly over the default sweep of 16 H200s
/// (every kind of split, layout, DBO, graph and batch setting), DeepSeek-V2-Lite, the recipe's
/// workload. Returns the model, the workload and the plan holding those candidates.
pub fn sweep_sample(count: usize) -> (ModelArch, Workload, Plan) {
    sweep_subset(count, false)
}

/// `count` consecutive candidates from the middle of the same space: neighbours share layouts, so
/// the sweep's reuse of identical runs and its step memo per layout work as in a full sweep.
pub fn sweep_slice(count: usize) -> (ModelArch, Workload, Plan) {
    sweep_subset(count, true)
}

fn sweep_subset(count: usize, consecutive: bool) -> (ModelArch, Workload, Plan) {
    let (_, model, workload) = default_predict();
    let context = Context {
        model: &model,
        model_path: "deepseek-ai/DeepSeek-V2-Lite",
        gpu: GpuKind::H200,
        rules: RuleSet::Latest,
        budget: Budget {
            gpus: 16,
            min_gpus: 16,
            gpus_per_node: 8,
        },
    };
    let mut plan = plan(&Dimensions::default(), &context);
    let (skip, stride) = if consecutive {
        (plan.candidates.len().saturating_sub(count) / 2, 1)
    } else {
        (0, (plan.candidates.len() / count.max(1)).max(1))
    };
    plan.candidates = plan
        .candidates
        .into_iter()
        .skip(skip)
        .step_by(stride)
        .take(count)
        .collect();
    (model, workload, plan)
}

/// The sweep's shared inputs for `workload` on `model` (seed 0, no SLO), priced by `profile` (as
/// `afd-sim sweep` prices by the GPU's built-in profile) or the roofline.
pub fn sweep_inputs<'a>(
    model: &'a ModelArch,
    workload: &'a Workload,
    profile: Option<&'a LoadedProfile>,
) -> Inputs<'a> {
    Inputs {
        model,
        calibration: profile.map(|p| (&p.profile, p.name.as_str())),
        workload,
        dataset: "random",
        options: RunOptions::new(Seed(0)),
        slo: Slo {
            ttft_ms: None,
            tpot_ms: None,
            stat: SloStat::P99,
        },
        cross_node_link: None,
        loads: Default::default(),
        capacity: None,
        engine: None,
    }
}
