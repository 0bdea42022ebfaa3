//! The model configs shipped under `traces/data/models/` are the copies `SOURCE.md` describes,
//! every one is reachable through `builtin_model`, and the sizes derived from them match the
//! figures afd-spec §3.1, research/sim-anchors.md §4 and the model publishers document.

use std::path::Path;

use afd_traces::model_config::{BUILTIN_MODEL_NAMES, LayerKind, ModelConfig, builtin_model};

use crate::assert_figure;

fn builtin(name: &str) -> ModelConfig {
    ModelConfig::from_json(builtin_model(name).unwrap()).unwrap()
}

#[test]
fn shipped_configs_keep_their_documented_sizes_and_are_all_builtin() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/models");
    let source = std::fs::read_to_string(dir.join("SOURCE.md")).unwrap();
    for (file, size) in [
        ("deepseek-v2-lite/config_16B.json", 418),
        ("deepseek-r1-0528/config.json", 1_660),
        ("qwen3-30b-a3b/config.json", 964),
        ("qwen3-next-80b-a3b/config.json", 854),
        ("qwen3.5-122b-a10b/config.json", 896),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert_eq!(text.len(), size, "{file}");
        assert!(
            source.contains(&format!("`{file}`")),
            "{file} not in SOURCE.md"
        );
        assert!(
            BUILTIN_MODEL_NAMES
                .iter()
                .any(|name| builtin_model(name) == Some(text.as_str())),
            "{file} is not served by builtin_model"
        );
        ModelConfig::from_json(&text).unwrap_or_else(|err| panic!("{file}: {err}"));
    }
    let shipped = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().path().is_dir())
        .count();
    assert_eq!(shipped, 5, "a model folder was added without a test above");
}

#[test]
fn deepseek_v2_lite_derived_sizes_match_the_spec() {
    let model = builtin("deepseek-v2-lite");
    // afd-spec §3.1 and sim-anchors §4: 17.3 MB per expert, 28.8 GB for all 64×26 experts.
    assert_eq!(model.expert_params(), 3 * 2048 * 1408);
    assert_figure(
        "expert MB",
        model.expert_weight_bytes() as f64 / 1e6,
        "17.3",
    );
    let all_experts = model.expert_weight_bytes() * 64 * u64::from(model.n_moe_layers());
    assert_figure("all experts GB", all_experts as f64 / 1e9, "28.8");
    // (512 + 64) × 2 B = 1,152 B per token per layer; 31,104 B over 27 layers.
    assert_eq!(model.kv_cache_bytes_per_token_per_layer(), 1_152);
    assert_eq!(model.kv_cache_bytes_per_token(), 31_104);
    // afd-spec §3.3: 2048 × 2 B = 4096 B per token per layer and direction.
    assert_eq!(model.hidden_bytes_per_token(), 4_096);
    // sim-anchors §4: attention ≈ 13.76M per layer; ≈ 15.71B total; ≈ 2.45B activated;
    // FFN side ≈ 14.9B, Attention side ≈ 0.79B.
    let attention_block = model.attention_params_per_layer() - 2 * 2048;
    assert_figure("attention M", attention_block as f64 / 1e6, "13.76");
    assert_figure("total B", model.total_params() as f64 / 1e9, "15.71");
    assert_figure(
        "active B",
        model.active_params_per_token() as f64 / 1e9,
        "2.45",
    );
    let roles = model.params_by_role();
    assert_eq!(roles.attention + roles.ffn, model.total_params());
    assert_figure("FFN side B", roles.ffn as f64 / 1e9, "14.9");
    assert_figure("Attention side B", roles.attention as f64 / 1e9, "0.79");
    // Routed experts of one MoE layer: 553.6M parameters (sim-anchors §4).
    let routed = model.ffn_params(LayerKind::Moe) - model.shared_experts_params() - 2048 * 64;
    assert_figure("routed per layer M", routed as f64 / 1e6, "553.6");
}

#[test]
fn deepseek_v3_counts_match_deepseeks_figures() {
    let model = builtin("deepseek-v3");
    // DeepSeek-V3's README_WEIGHTS.md (vendored by tt-metal beside the config): 671B parameters
    // in the main model, 36.6B activated including the 0.9B output head.
    assert_figure("total B", model.total_params() as f64 / 1e9, "671");
    assert_figure(
        "active B",
        model.active_params_per_token() as f64 / 1e9,
        "36.6",
    );
    assert_figure("head B", f64::from(model.vocab_size) * 7168.0 / 1e9, "0.9");
}

#[test]
fn qwen3_30b_a3b_counts_match_the_model_card() {
    // Qwen3-30B-A3B model card: 30.5B parameters in total.
    let model = builtin("qwen3-30b-a3b");
    assert_figure("total B", model.total_params() as f64 / 1e9, "30.5");
}
