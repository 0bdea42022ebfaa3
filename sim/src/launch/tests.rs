//! Command lines into launches: overrides rendered into words (and judged as `check` judges them),
//! plain servers, quoting round trips, and the one entry for callers holding command lines.

use crate::deployment::{RecipeOptions, Rule};
use crate::launch::{
    Launch, LaunchError, OverrideError, Overrides, SEED_RECIPE, ServerWords,
    serving_config_from_command_lines,
};
use crate::model::arch::ModelArch;
use crate::model::hardware::GpuKind;
use crate::serving::{GraphMode, Placement, ServingConfig};
use crate::topology::RuleSet;

fn seed_words() -> Vec<ServerWords> {
    Launch::recipe_words(SEED_RECIPE, &RecipeOptions::default()).unwrap()
}

fn launch(servers: &[ServerWords]) -> Launch {
    Launch::from_servers(servers, RuleSet::Latest).unwrap()
}

#[test]
fn the_seed_recipe_is_the_seed_serving_config() {
    let seed = launch(&seed_words());
    assert!(seed.check().is_clean());
    assert_eq!(
        seed.serving_config(GpuKind::H200, &ModelArch::deepseek_v2_lite())
            .unwrap(),
        ServingConfig::seed_recipe()
    );
}

#[test]
fn overrides_replace_every_spelling_of_a_flag() {
    // Prefixes too: vLLM's argparse reads `--max-num-seq` as `--max-num-seqs`.
    let mut server = ServerWords::from_command_line(
        "vllm serve /m --max_num_seqs=8 -tp 2 --max-num-seq 16 --enable-dbo --no-enable-dbo --cudagraph-capture-sizes 1 2 4 --port 1 --tensor-parallel=3",
        &RecipeOptions::default(),
    )
    .unwrap();
    server.set_flag("--max-num-seqs", Some("32"));
    server.set_flag("--tensor-parallel-size", Some("4"));
    server.remove_flag("--enable-dbo");
    server.remove_flag("--cudagraph-capture-sizes");
    assert_eq!(
        server.args,
        [
            "/m",
            "--port",
            "1",
            "--max-num-seqs",
            "32",
            "--tensor-parallel-size",
            "4"
        ]
    );
}

#[test]
fn layout_overrides_keep_the_afd_block_and_gpus_consistent() {
    let mut servers = seed_words();
    let overrides = Overrides {
        attention_dp: Some(2),
        attention_tp: Some(1),
        ffn_dp: Some(2),
        ffn_tp: Some(1),
        ..Overrides::default()
    };
    overrides.apply(&mut servers).unwrap();
    let launched = launch(&servers);
    assert!(launched.check().is_clean(), "{:?}", launched.check());
    let Launch::Afd(pair) = &launched else {
        panic!("a pair")
    };
    assert_eq!(pair.attention.afd().unwrap().ffn_ranks(), Some(2));
    assert_eq!(servers[1].env["CUDA_VISIBLE_DEVICES"], "2,3");
    let config = launched
        .serving_config(GpuKind::H200, &ModelArch::deepseek_v2_lite())
        .unwrap();
    assert_eq!((config.attention.dp, config.ffn.dp), (2, 2));
}

#[test]
fn overrides_are_judged_by_the_rules_before_any_serving_config() {
    let refused = |overrides: Overrides| {
        let mut servers = seed_words();
        overrides.apply(&mut servers).unwrap();
        launch(&servers).check()
    };
    let batch = refused(Overrides {
        max_num_seqs: Some(128),
        max_num_batched_tokens: Some(64),
        ..Overrides::default()
    });
    assert!(batch.has(Rule::VllmBatchedTokensAtLeastSeqs));
    let ffn = refused(Overrides {
        ffn_dp: Some(2),
        ffn_tp: Some(2),
        ..Overrides::default()
    });
    assert!(ffn.has(Rule::AfdAttentionAtLeastFfn));
    let conflict = Overrides {
        enable_dbo: true,
        no_dbo: true,
        ..Overrides::default()
    };
    assert_eq!(
        conflict.apply(&mut seed_words()),
        Err(OverrideError::Conflict("--enable-dbo", "--no-dbo"))
    );
}

#[test]
fn dbo_and_capture_overrides_render_as_vllm_reads_them() {
    let mut servers = seed_words();
    Overrides {
        no_dbo: true,
        cudagraph_capture_sizes: Some(vec![8, 16, 32, 64]),
        ..Overrides::default()
    }
    .apply(&mut servers)
    .unwrap();
    let config = launch(&servers)
        .serving_config(GpuKind::H200, &ModelArch::deepseek_v2_lite())
        .unwrap();
    assert_eq!(config.dbo, None);
    assert_eq!(
        config.graph,
        GraphMode::FullDecodeOnly {
            capture_sizes: vec![8, 16, 32, 64]
        }
    );
}

/// A capture override reaches a size set by a dotted key (`-cc.max_cudagraph_capture_size=…`),
/// which vLLM would otherwise fold in after it and keep.
#[test]
fn capture_overrides_reach_dotted_keys() {
    let mut servers = vec![
        ServerWords::from_command_line(
            "vllm serve /m -cc.cudagraph_mode=FULL_DECODE_ONLY -cc.max_cudagraph_capture_size=16 --max-num-seqs 64",
            &RecipeOptions::default(),
        )
        .unwrap(),
    ];
    let plain = |servers: &[ServerWords]| {
        launch(servers)
            .serving_config(GpuKind::H200, &ModelArch::deepseek_v2_lite())
            .unwrap()
            .graph
    };
    let before = plain(&servers);
    assert_eq!(
        before,
        GraphMode::FullDecodeOnly {
            capture_sizes: vec![1, 2, 4, 8, 16]
        }
    );
    Overrides {
        max_cudagraph_capture_size: Some(32),
        ..Overrides::default()
    }
    .apply(&mut servers)
    .unwrap();
    assert_eq!(
        plain(&servers),
        GraphMode::FullDecodeOnly {
            capture_sizes: vec![1, 2, 4, 8, 16, 24, 32]
        },
        "{}",
        servers[0].to_command_line()
    );
}

#[test]
fn command_lines_survive_quoting_round_trips() {
    let servers = seed_words();
    for server in &servers {
        let line = server.to_command_line();
        let back = ServerWords::from_command_line(&line, &RecipeOptions::default()).unwrap();
        assert_eq!(&back, server, "{line}");
    }
}

#[test]
fn a_plain_dsv2_lite_server_on_one_h200_takes_vllm_defaults() {
    let model = ModelArch::deepseek_v2_lite();
    let line = "vllm serve /root/model/dsv2l --load-format dummy --max-num-seqs 256 --max-num-batched-tokens 8192";
    let launched =
        serving_config_from_command_lines(&[line], RuleSet::Latest, GpuKind::H200, &model).unwrap();
    let config = &launched.config;
    assert_eq!(config.placement, Placement::Colocated);
    assert_eq!(config.gpus(), 1);
    assert_eq!(
        (config.max_num_seqs, config.max_num_batched_tokens),
        (256, 8192)
    );
    // Capture sizes up to min(2 x 256, 512) = 512; full decode graphs only up to 256.
    let GraphMode::FullAndPiecewise {
        capture_sizes,
        piecewise_sizes,
    } = &config.graph
    else {
        panic!("{:?}", config.graph)
    };
    assert_eq!(capture_sizes.last(), Some(&256));
    assert_eq!(piecewise_sizes.last(), Some(&512));
    assert_eq!(config.block_size, 16);
    assert!(config.prefix_caching && config.dbo.is_none());
    let eager = serving_config_from_command_lines(
        &[&format!("{line} --enforce-eager")],
        RuleSet::Latest,
        GpuKind::H200,
        &model,
    )
    .unwrap();
    assert_eq!(eager.config.graph, GraphMode::Eager);
}

#[test]
fn a_plain_server_that_does_not_fit_is_a_memory_error() {
    let model = ModelArch::deepseek_v2_lite();
    let err = serving_config_from_command_lines(
        &["vllm serve /m --gpu-memory-utilization 0.1"],
        RuleSet::Latest,
        GpuKind::H200,
        &model,
    )
    .unwrap_err();
    let LaunchError::Memory(memory) = err else {
        panic!("{err}")
    };
    assert_eq!(memory.role(), "server");
    let refused = serving_config_from_command_lines(
        &["vllm serve /m --max-num-seqs 9000"],
        RuleSet::Latest,
        GpuKind::H200,
        &model,
    )
    .unwrap_err();
    assert!(
        refused.to_string().contains("vllm.batched-tokens-ge-seqs"),
        "{refused}"
    );
}
