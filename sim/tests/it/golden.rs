//! Golden summaries of small scenarios: a changed file is a behaviour change, say why in the commit.

use afd_sim::engine::RunOptions;
use afd_sim::model::arch::ModelArch;
use afd_sim::rng::Seed;
use afd_sim::serving::{GraphMode, RoleLayout, ServingConfig};
use expect_test::{ExpectFile, expect_file};

use crate::support::{simulate, workload};

#[track_caller]
fn check(config: &ServingConfig, seed: u64, expect: ExpectFile) {
    let model = ModelArch::deepseek_v2_lite();
    let w = workload(48, 512, 32, Some(8.0), Some(16), seed);
    let options = RunOptions::new(Seed(seed));
    let (_, report) = simulate(config, &model, &w, &options);
    let (_, again) = simulate(config, &model, &w, &options);
    assert_eq!(
        report.event_log_hash, again.event_log_hash,
        "SIM_SEED={seed} to reproduce"
    );
    let text = format!(
        "seed {seed}, schema {} v{}\n{}",
        report.format,
        report.schema_version,
        report.to_table()
    );
    expect.assert_eq(&text);
}

#[test]
fn seed_recipe() {
    check(
        &ServingConfig::seed_recipe(),
        0,
        expect_file!["../golden/seed_recipe.txt"],
    );
}

#[test]
fn seed_recipe_eager_without_dbo() {
    let mut config = ServingConfig::seed_recipe();
    config.graph = GraphMode::Eager;
    config.dbo = None;
    check(&config, 0, expect_file!["../golden/eager_no_dbo.txt"]);
}

#[test]
fn two_engines_one_ffn() {
    let mut config = ServingConfig::seed_recipe();
    config.attention = RoleLayout {
        dp: 2,
        tp: 1,
        expert_parallel: true,
    };
    config.ffn = RoleLayout {
        dp: 1,
        tp: 1,
        expert_parallel: true,
    };
    check(&config, 5, expect_file!["../golden/2a1f_dp2.txt"]);
}

#[test]
fn four_attention_two_ffn_data_parallel() {
    let mut config = ServingConfig::seed_recipe();
    config.attention = RoleLayout {
        dp: 4,
        tp: 1,
        expert_parallel: true,
    };
    config.ffn = RoleLayout {
        dp: 2,
        tp: 1,
        expert_parallel: true,
    };
    config.max_num_batched_tokens = 256;
    check(&config, 7, expect_file!["../golden/4a2f_dp.txt"]);
}
