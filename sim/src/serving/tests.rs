//! The seed recipe is valid and bad values name their flag.

use super::*;

#[test]
fn seed_recipe_is_two_plus_two_gpus() {
    let config = ServingConfig::seed_recipe();
    config.validate().unwrap();
    assert_eq!(
        (config.attention_ranks(), config.ffn_ranks(), config.gpus()),
        (2, 2, 4)
    );
    assert_eq!(config.graph.padded_size(33), Some(64));
    assert_eq!(config.graph.padded_size(65), None);
}

#[test]
fn bad_values_name_the_flag() {
    let mut config = ServingConfig::seed_recipe();
    config.graph = GraphMode::FullDecodeOnly {
        capture_sizes: vec![64, 8],
    };
    assert_eq!(
        config.validate().unwrap_err().to_string(),
        "cudagraph_capture_sizes must be a non-empty list of sizes >= 1, got [64, 8]"
    );
    let mut config = ServingConfig::seed_recipe();
    config.ffn.dp = 2;
    assert!(
        config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("num_attention_ranks >= num_ffn_ranks")
    );
    let mut config = ServingConfig::seed_recipe();
    config.gpu_memory_utilization = 0.0;
    assert!(
        config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--gpu-memory-utilization")
    );
}

#[test]
fn the_seed_recipe_script_gives_the_seed_config() {
    let text = include_str!("../../tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh");
    let deployment = Deployment::from_recipe(
        text,
        &crate::deployment::RecipeOptions::default(),
        RuleSet::Latest,
    )
    .expect("the seed recipe parses");
    let config = ServingConfig::from_deployment(&deployment, GpuKind::H200).expect("and simulates");
    assert_eq!(config, ServingConfig::seed_recipe());
}

#[test]
fn eager_and_dp2_recipes_map_their_layout_and_mode() {
    let text = include_str!("../../tests/fixtures/recipes/2a2f_eager_dbo_dp2tp1.sh");
    let deployment = Deployment::from_recipe(
        text,
        &crate::deployment::RecipeOptions::default(),
        RuleSet::Latest,
    )
    .expect("the recipe parses");
    let config = ServingConfig::from_deployment(&deployment, GpuKind::H100).expect("and simulates");
    assert_eq!((config.attention.dp, config.attention.tp), (2, 1));
    assert_eq!(config.graph, GraphMode::Eager);
    assert!(config.dbo.is_some());
}

#[test]
fn the_cost_layout_follows_the_roles() {
    let mut config = ServingConfig::seed_recipe();
    config.ffn = RoleLayout {
        dp: 2,
        tp: 1,
        expert_parallel: false,
    };
    assert_eq!(
        config.cost_layout(),
        CostLayout {
            attention_tp: 2,
            ffn_dp: 2,
            ffn_tp: 1,
            expert_parallel: false,
        }
    );
}

#[test]
fn capture_sizes_above_max_num_seqs_are_no_decode_graphs() {
    let line = |extra: &str| {
        format!(
            "VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enable-expert-parallel --max-num-seqs 8 --compilation-config '{{\"cudagraph_mode\": \"FULL_DECODE_ONLY\", \"cudagraph_capture_sizes\": [4, 8, 16]}}' {extra}"
        )
    };
    let role = |extra: &str| {
        crate::deployment::RoleConfig::from_command_line(
            &line(extra),
            &crate::deployment::RecipeOptions::default(),
        )
        .unwrap()
    };
    let deployment = Deployment::new(
        role("--additional-config '{\"afd\": {\"role\": \"attention\"}}'"),
        role("--port 8001 --additional-config '{\"afd\": {\"role\": \"ffn\"}}'"),
        RuleSet::Latest,
    );
    let config = ServingConfig::from_deployment(&deployment, GpuKind::H200).unwrap();
    assert_eq!(
        config.graph,
        GraphMode::FullDecodeOnly {
            capture_sizes: vec![4, 8]
        }
    );
    // vLLM 0.26.0's batch defaults follow the GPU class: 256 / 2048 on an A100.
    let plain = crate::deployment::RoleConfig::from_command_line(
        "vllm serve /m",
        &crate::deployment::RecipeOptions::default(),
    )
    .unwrap();
    let on = |gpu| {
        ServingConfig::from_plain(&plain, RuleSet::Latest, gpu, &ModelArch::deepseek_v2_lite())
            .unwrap()
    };
    let a100 = on(GpuKind::A100);
    assert_eq!(
        (a100.max_num_seqs, a100.max_num_batched_tokens),
        (256, 2048)
    );
    let h200 = on(GpuKind::H200);
    assert_eq!(
        (h200.max_num_seqs, h200.max_num_batched_tokens),
        (1024, 8192)
    );
    assert_eq!(h200.graph.name(), "FULL_AND_PIECEWISE");
    assert_eq!(h200.graph.capture_sizes().last(), Some(&512));
}

/// A plain server's graph mode as vLLM 0.26.0 settles it: the optimization level's default, the
/// compilation mode, and `FULL` resolved by the model's attention backend.
#[test]
fn a_plain_server_takes_the_graph_mode_vllm_resolves() {
    let mla = ModelArch::deepseek_v2_lite();
    let gqa = ModelArch::builtin("qwen3-30b-a3b")
        .expect("shipped")
        .expect("parses");
    let on = |line: &str, model: &ModelArch| {
        let role = crate::deployment::RoleConfig::from_command_line(
            &format!("vllm serve /m {line}"),
            &crate::deployment::RecipeOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{line}: {e}"));
        ServingConfig::from_plain(&role, RuleSet::Latest, GpuKind::H200, model)
    };
    let cases = [
        ("", "FULL_AND_PIECEWISE"),
        ("-O3", "FULL_AND_PIECEWISE"),
        ("-O 2", "FULL_AND_PIECEWISE"),
        ("--optimization-level=1", "PIECEWISE"),
        ("-O1", "PIECEWISE"),
        ("-O0", "eager"),
        ("-O=0", "eager"),
        ("--enforce-eager -O3", "eager"),
        ("-cc '{\"cudagraph_mode\": \"FULL\"}'", "FULL_AND_PIECEWISE"),
        // vLLM's compiled model without graphs: not eager, whose model is not compiled.
        ("-cc.cudagraph_mode=NONE", "NONE"),
        ("-O3 -cc '{\"cudagraph_mode\": \"NONE\"}'", "NONE"),
        (
            "-O1 -cc '{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}'",
            "FULL_DECODE_ONLY",
        ),
        // Piecewise graphs need vLLM's compiled model: without it vLLM captures none.
        ("-cc '{\"mode\": 0}'", "eager"),
        (
            "-cc '{\"mode\": 2, \"cudagraph_mode\": \"PIECEWISE\"}'",
            "eager",
        ),
        (
            "-O0 -cc '{\"cudagraph_mode\": \"FULL_AND_PIECEWISE\"}'",
            "eager",
        ),
    ];
    for (line, name) in cases {
        let config = on(line, &mla).unwrap_or_else(|e| panic!("{line}: {e}"));
        assert_eq!(config.graph.name(), name, "{line}");
    }
    // Full graphs of the uncompiled model were never measured, and a GQA model's backend may
    // capture mixed batches in FULL mode.
    for line in [
        "-cc '{\"mode\": 0, \"cudagraph_mode\": \"FULL_DECODE_ONLY\"}'",
        "-O0 -cc '{\"cudagraph_mode\": \"FULL\"}'",
    ] {
        assert!(
            matches!(
                on(line, &mla),
                Err(ServingConfigError::PlainCompileMode { .. })
            ),
            "{line}"
        );
    }
    assert_eq!(
        on("-cc '{\"cudagraph_mode\": \"FULL\"}'", &gqa),
        Err(ServingConfigError::PlainFullGraphs)
    );
    assert_eq!(
        on("", &gqa).map(|c| c.graph.name()),
        Ok("FULL_AND_PIECEWISE")
    );
}
