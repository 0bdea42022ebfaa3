//! Shared fixtures for the criterion benchmarks under `benches/benches/`.

use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel};
use afd_sim::model::workload::{Arrivals, RandomDataset, Workload, random_workload};
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;

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
    CostModel::roofline(
        model,
        config.gpu,
        CostLayout {
            attention_tp: config.attention.tp,
            ffn_dp: config.ffn.dp,
            ffn_tp: config.ffn.tp,
            expert_parallel: config.ffn.expert_parallel,
        },
    )
}
