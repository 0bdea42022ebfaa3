//! Unit tests of the model-config readers: the shapes read from the shipped configs, both file
//! formats agreeing, layer patterns, and errors naming the key at fault. Derived figures are
//! compared with the documented ones in `tests/it/models.rs`.

use expect_test::{Expect, expect};
use proptest::prelude::*;

use super::*;

fn builtin(name: &str) -> ModelConfig {
    ModelConfig::from_json(builtin_model(name).unwrap()).unwrap()
}

/// Renders the shape of a config: kinds of layers in runs, then the blocks.
fn render(config: &ModelConfig) -> String {
    let mut runs: Vec<(LayerKind, usize)> = Vec::new();
    for &kind in &config.layers {
        match runs.last_mut() {
            Some((last, n)) if *last == kind => *n += 1,
            _ => runs.push((kind, 1)),
        }
    }
    let layers: Vec<String> = runs.iter().map(|(k, n)| format!("{n}×{k:?}")).collect();
    format!(
        "{} from {:?}: hidden {}, vocab {}, positions {}, tied {}, dtype {:?}, weights {:?}\n\
         layers {}\nattention {:?}\ndense MLP {}\nmoe {:?}\n",
        config.architecture,
        config.format,
        config.hidden_size,
        config.vocab_size,
        config.max_position_embeddings,
        config.tie_word_embeddings,
        config.dtype,
        config.weight_dtype,
        layers.join(" + "),
        config.attention,
        config.dense_intermediate_size,
        config.moe,
    )
}

#[track_caller]
fn check(config: &ModelConfig, expect: Expect) {
    expect.assert_eq(&render(config));
}

#[test]
fn deepseek_v2_lite_has_the_shape_of_afd_spec_3_1() {
    check(
        &builtin("deepseek-v2-lite"),
        expect![[r#"
            DeepseekV2ForCausalLM from DeepSeekInference: hidden 2048, vocab 102400, positions 163840, tied false, dtype Bf16, weights Bf16
            layers 1×Dense + 26×Moe
            attention Mla(MlaAttention { num_heads: 16, q_lora_rank: None, kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 })
            dense MLP 10944
            moe MoeConfig { n_routed_experts: 64, experts_per_token: 6, intermediate_size: 1408, n_shared_experts: 2, shared_intermediate_size: 2816, n_groups: 1, topk_groups: 1, scoring: Softmax, norm_topk_prob: false, routed_scaling_factor: 1.0, score_correction_bias: false }
        "#]],
    );
}

/// The Hugging Face `config.json` of the same model (the one the measured vLLM servers loaded,
/// `data/models/deepseek-v2-lite/config.json`) reads to the same config as DeepSeek's own file.
#[test]
fn both_formats_of_deepseek_v2_lite_agree() {
    let hf = include_str!("../../data/models/deepseek-v2-lite/config.json");
    let from_hf = ModelConfig::from_json(hf).unwrap();
    assert_eq!(from_hf.format, ConfigFormat::HuggingFace);
    let mut from_deepseek = builtin("deepseek-v2-lite");
    assert_eq!(from_deepseek.format, ConfigFormat::DeepSeekInference);
    from_deepseek.format = ConfigFormat::HuggingFace;
    assert_eq!(from_hf, from_deepseek);
}

#[test]
fn deepseek_v3_architecture_reads_fp8_weights_and_group_routing() {
    let model = builtin("deepseek-v3");
    check(
        &model,
        expect![[r#"
            DeepseekV3ForCausalLM from HuggingFace: hidden 7168, vocab 129280, positions 163840, tied false, dtype Bf16, weights Fp8
            layers 3×Dense + 58×Moe
            attention Mla(MlaAttention { num_heads: 128, q_lora_rank: Some(1536), kv_lora_rank: 512, qk_nope_head_dim: 128, qk_rope_head_dim: 64, v_head_dim: 128 })
            dense MLP 18432
            moe MoeConfig { n_routed_experts: 256, experts_per_token: 8, intermediate_size: 2048, n_shared_experts: 1, shared_intermediate_size: 2048, n_groups: 8, topk_groups: 4, scoring: Sigmoid, norm_topk_prob: true, routed_scaling_factor: 2.5, score_correction_bias: true }
        "#]],
    );
    assert_eq!(
        builtin_model("deepseek-r1-0528"),
        builtin_model("deepseek-v3")
    );
    // One FP8 expert: 3 × 7168 × 2048 bytes; MLA cache as V2-Lite's per layer.
    assert_eq!(model.expert_weight_bytes(), 3 * 7168 * 2048);
    assert_eq!(model.kv_cache_bytes_per_token_per_layer(), 1_152);
}

#[test]
fn qwen3_moe_is_gqa_with_every_layer_sparse() {
    let model = builtin("qwen3-30b-a3b");
    check(
        &model,
        expect![[r#"
            Qwen3MoeForCausalLM from HuggingFace: hidden 2048, vocab 151936, positions 40960, tied false, dtype Bf16, weights Bf16
            layers 48×Moe
            attention Gqa(GqaAttention { num_heads: 32, num_kv_heads: 4, head_dim: 128, qk_norm: true, bias: false, output_gate: false })
            dense MLP 6144
            moe MoeConfig { n_routed_experts: 128, experts_per_token: 8, intermediate_size: 768, n_shared_experts: 0, shared_intermediate_size: 0, n_groups: 1, topk_groups: 1, scoring: Softmax, norm_topk_prob: true, routed_scaling_factor: 1.0, score_correction_bias: false }
        "#]],
    );
    // GQA: 2 × 4 KV heads × 128 × 2 B.
    assert_eq!(model.kv_cache_bytes_per_token_per_layer(), 2_048);
    assert_eq!(model.shared_experts_params(), 0);
}

#[test]
fn builtin_names_are_listed_and_case_insensitive() {
    for name in BUILTIN_MODEL_NAMES {
        builtin(name);
    }
    assert!(builtin_model("DeepSeek-V2-Lite").is_some());
    assert!(builtin_model("llama-3").is_none());
}

#[test]
fn layer_patterns_follow_the_modelling_code() {
    let deepseek = r#"{"architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 64,
        "num_hidden_layers": 6, "first_k_dense_replace": 1, "moe_layer_freq": 2,
        "intermediate_size": 128, "n_routed_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "num_attention_heads": 2, "kv_lora_rank": 16,
        "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "vocab_size": 100,
        "max_position_embeddings": 512}"#;
    let model = ModelConfig::from_json(deepseek).unwrap();
    let kinds: Vec<bool> = (0..6).map(|l| model.is_moe_layer(l)).collect();
    assert_eq!(kinds, [false, false, true, false, true, false]);
    assert!(!model.is_moe_layer(6));
    assert_eq!(model.moe.shared_intermediate_size, 0);

    let qwen = r#"{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
        "num_hidden_layers": 6, "decoder_sparse_step": 2, "mlp_only_layers": [3],
        "intermediate_size": 128, "num_local_experts": 4, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "vocab_size": 100, "max_position_embeddings": 512, "dtype": "float16"}"#;
    let model = ModelConfig::from_json(qwen).unwrap();
    let kinds: Vec<bool> = (0..6).map(|l| model.is_moe_layer(l)).collect();
    assert_eq!(kinds, [false, true, false, false, false, true]);
    assert_eq!((model.n_moe_layers(), model.n_dense_layers()), (2, 4));
    assert_eq!(model.dtype, Dtype::F16);
    assert_eq!(model.shared_experts_params(), 0);
}

#[test]
fn a_qwen_shared_expert_is_read_from_the_config() {
    let qwen = r#"{"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 64,
        "num_hidden_layers": 2, "intermediate_size": 128, "num_experts": 4,
        "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 48, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 100,
        "max_position_embeddings": 512}"#;
    let model = ModelConfig::from_json(qwen).unwrap();
    assert_eq!(
        (
            model.moe.n_shared_experts,
            model.moe.shared_intermediate_size
        ),
        (1, 48)
    );
    // Per MoE layer: gate, up and down of a 64 x 48 MLP.
    assert_eq!(model.shared_experts_params(), 3 * 64 * 48);
    let none = qwen.replace(
        "\"shared_expert_intermediate_size\": 48",
        "\"shared_expert_intermediate_size\": 0",
    );
    let model = ModelConfig::from_json(&none).unwrap();
    assert_eq!(
        (model.moe.n_shared_experts, model.shared_experts_params()),
        (0, 0)
    );
}

/// Replaces one `"key": value` of a builtin config and renders the error.
#[track_caller]
fn check_edit(name: &str, from: &str, to: &str, expect: Expect) {
    let text = builtin_model(name).unwrap();
    assert!(text.contains(from), "{from} not in {name}");
    let actual = match ModelConfig::from_json(&text.replacen(from, to, 1)) {
        Ok(_) => "ok".to_owned(),
        Err(err) => err.to_string(),
    };
    expect.assert_eq(&actual);
}

#[test]
fn missing_and_mistyped_keys_are_named() {
    check_edit(
        "qwen3-30b-a3b",
        "\"hidden_size\": 2048,",
        "",
        expect!["model config: missing field `hidden_size`"],
    );
    check_edit(
        "qwen3-30b-a3b",
        "\"num_experts\": 128",
        "\"num_experts\": \"many\"",
        expect![[r#"model config: field num_experts: invalid type: string "many", expected u32"#]],
    );
    check_edit(
        "deepseek-v3",
        "\"kv_lora_rank\": 512",
        "\"kv_lora_rank\": -512",
        expect!["model config: field kv_lora_rank: invalid value: integer `-512`, expected u32"],
    );
    check_edit(
        "deepseek-v2-lite",
        "\"n_activated_experts\": 6,",
        "",
        expect!["model config: missing field `n_activated_experts`"],
    );
    check_edit(
        "deepseek-v3",
        "\"n_routed_experts\": 256,",
        "",
        expect![
            "model config field n_routed_experts: missing or null: a dense model has no experts to disaggregate"
        ],
    );
}

#[test]
fn values_are_checked_and_the_key_named() {
    check_edit(
        "qwen3-30b-a3b",
        "\"num_experts_per_tok\": 8",
        "\"num_experts_per_tok\": 129",
        expect!["model config field num_experts_per_tok: 129 is above 128"],
    );
    check_edit(
        "qwen3-30b-a3b",
        "\"num_key_value_heads\": 4",
        "\"num_key_value_heads\": 5",
        expect!["model config field num_key_value_heads: 5 does not divide num_attention_heads 32"],
    );
    check_edit(
        "qwen3-30b-a3b",
        "\"hidden_size\": 2048",
        "\"hidden_size\": 0",
        expect!["model config field hidden_size: must be at least 1"],
    );
    check_edit(
        "qwen3-30b-a3b",
        "\"mlp_only_layers\": []",
        "\"mlp_only_layers\": [48]",
        expect!["model config field mlp_only_layers: layer 48 does not exist; there are 48 layers"],
    );
    check_edit(
        "deepseek-v3",
        "\"n_group\": 8",
        "\"n_group\": 7",
        expect!["model config field n_group: 7 does not divide n_routed_experts 256"],
    );
    check_edit(
        "deepseek-v3",
        "\"topk_group\": 4",
        "\"topk_group\": 0",
        expect!["model config field topk_group: must be at least 1"],
    );
    check_edit(
        "deepseek-v3",
        "\"num_experts_per_tok\": 8",
        "\"num_experts_per_tok\": 200",
        expect![
            "model config field num_experts_per_tok: 200 experts cannot be picked from 4 groups of 32"
        ],
    );
    check_edit(
        "deepseek-v3",
        "\"first_k_dense_replace\": 3",
        "\"first_k_dense_replace\": 62",
        expect!["model config field first_k_dense_replace: 62 is above num_hidden_layers 61"],
    );
    check_edit(
        "deepseek-v3",
        "\"quant_method\": \"fp8\"",
        "\"quant_method\": \"gptq\"",
        expect![[
            r#"model config field quantization_config.quant_method: "gptq" is not modelled; only fp8 weights are"#
        ]],
    );
    check_edit(
        "deepseek-v3",
        "\"torch_dtype\": \"bfloat16\"",
        "\"torch_dtype\": \"int3\"",
        expect![[
            r#"model config field torch_dtype: unknown dtype "int3"; expected bfloat16, float16, float32 or fp8"#
        ]],
    );
    check_edit(
        "deepseek-v3",
        "\"hidden_size\": 7168",
        "\"hidden_size\": 4000000",
        expect!["model config field hidden_size: 4000000 is above 1048576"],
    );
    check_edit(
        "deepseek-v2-lite",
        "\"n_activated_experts\": 6",
        "\"n_activated_experts\": 65",
        expect!["model config field n_activated_experts: 65 is above 64"],
    );
    check_edit(
        "deepseek-v2-lite",
        "\"dim\": 2048",
        "\"dim\": 0",
        expect!["model config field dim: must be at least 1"],
    );
}

#[test]
fn other_files_are_refused_with_a_reason() {
    let refuse = |text: &str| ModelConfig::from_json(text).unwrap_err().to_string();
    assert_eq!(
        refuse("{\"architectures\": [\"LlamaForCausalLM\"]}"),
        "model config has architectures [\"LlamaForCausalLM\"]; this build reads \
         DeepseekV2ForCausalLM, DeepseekV3ForCausalLM, Qwen3MoeForCausalLM, Qwen3NextForCausalLM and Qwen3_5MoeForCausalLM (or Qwen3_5MoeForConditionalGeneration)"
    );
    assert_eq!(
        refuse("{\"hidden_size\": 1}"),
        "model config is neither a Hugging Face config.json (no \"architectures\") nor a \
         DeepSeek inference config (no \"dim\")"
    );
    assert_eq!(
        refuse("[1, 2]"),
        "model config field (top level): must be a JSON object"
    );
    assert_eq!(
        refuse("{\n  \"architectures\": [\n}"),
        "model config is not valid JSON (line 3, column 1): expected value"
    );
}

#[test]
fn hand_built_configs_are_checked_too() {
    let mut model = builtin("deepseek-v2-lite");
    model.layers.clear();
    assert_eq!(
        model.check().unwrap_err().to_string(),
        "model config field num_hidden_layers: must be at least 1"
    );
    let mut model = builtin("deepseek-v2-lite");
    model.moe.shared_intermediate_size = 0;
    assert_eq!(
        model.check().unwrap_err().to_string(),
        "model config field n_shared_experts: 2 shared experts cannot have a fused width of 0"
    );
    let mut model = builtin("deepseek-v2-lite");
    model.moe.routed_scaling_factor = f64::NAN;
    assert!(model.check().is_err());
}

/// Calls every derived helper, which must not overflow on a checked config.
fn exercise(model: &ModelConfig) {
    let roles = model.params_by_role();
    assert_eq!(roles.attention + roles.ffn, model.total_params());
    assert!(model.active_params_per_token() <= model.total_params());
    let _ = (
        model.kv_cache_bytes_per_token(),
        model.hidden_bytes_per_token(),
        model.expert_weight_bytes(),
        model.ffn_params(LayerKind::Dense),
        model.attention_params_per_layer(),
    );
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        let _ = ModelConfig::from_json(&text);
    }

    /// Any number of a shipped config replaced by another JSON value: an error or a config whose
    /// helpers all work.
    #[test]
    fn edited_numbers_never_panic(
        name in proptest::sample::select(BUILTIN_MODEL_NAMES.to_vec()),
        which in any::<usize>(),
        replacement in prop_oneof![
            any::<u32>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_map(|v| format!("{v:?}")),
            Just("null".to_owned()),
            Just("\"7\"".to_owned()),
            (0u32..9).prop_map(|v| v.to_string()),
        ],
    ) {
        let text = builtin_model(name).unwrap();
        let numbers: Vec<(usize, usize)> = text
            .match_indices(": ")
            .filter_map(|(at, _)| {
                let start = at + 2;
                let len = text[start..].find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == 'e'))?;
                (len > 0).then_some((start, start + len))
            })
            .collect();
        let (start, end) = numbers[which % numbers.len()];
        let edited = format!("{}{}{}", &text[..start], replacement, &text[end..]);
        if let Ok(model) = ModelConfig::from_json(&edited) {
            model.check().unwrap();
            exercise(&model);
        }
    }
}

/// Qwen3-Next-80B-A3B: three Gated DeltaNet layers to one gated softmax layer, KV in the softmax
/// layers only, a fixed state per sequence in the others; sizes by hand from the config.
#[test]
fn qwen3_next_mixes_linear_and_full_attention_and_keeps_kv_in_one_layer_of_four() {
    let model = builtin("qwen3-next-80b-a3b");
    assert_eq!(model.architecture, Architecture::Qwen3Next);
    assert_eq!(model.num_layers(), 48);
    assert_eq!(model.n_full_attention_layers(), 12);
    assert_eq!(model.n_linear_attention_layers(), 36);
    // Layers 3, 7, 11, …: every fourth (1-based) is full.
    assert_eq!(model.mixers[3], MixerKind::Full);
    assert_eq!(model.mixers[4], MixerKind::Linear);
    // KV: 2 (k and v) × 2 KV heads × 256 × 2 bytes per full layer, 12 full layers.
    assert_eq!(model.kv_cache_bytes_per_token_per_layer(), 2048);
    assert_eq!(model.kv_cache_bytes_per_token(), 12 * 2048);
    // State: 32 value heads × 128 × 128 in bf16, and 3 × (2 × 16 × 128 + 32 × 128) conv inputs.
    assert_eq!(
        model.linear_state_bytes_per_layer(),
        32 * 128 * 128 * 2 + 3 * 8192 * 2
    );
    // Gated DeltaNet: qkvz 2048 × (2 × 2048 + 2 × 4096), ba 2048 × 64, conv 8192 × 4, dt_bias and
    // A_log 2 × 32, norm 128, out 4096 × 2048; and both layer norms.
    let linear = 2048 * 12288 + 2048 * 64 + 8192 * 4 + 64 + 128 + 4096 * 2048 + 2 * 2048;
    assert_eq!(model.mixer_params(MixerKind::Linear), linear);
    // Gated attention: q_proj 2048 × 2 × 16 × 256 (queries and gate), k and v 2048 × 2 × 256, o
    // 4096 × 2048, q/k norms 2 × 256; and both layer norms.
    let full = 2048 * 8192 + 2 * 2048 * 512 + 4096 * 2048 + 2 * 256 + 2 * 2048;
    assert_eq!(model.mixer_params(MixerKind::Full), full);
    // 512 routed experts of 3 × 2048 × 512, top-10, one shared expert of the same width.
    assert_eq!(model.moe.n_routed_experts, 512);
    assert_eq!(model.moe.shared_intermediate_size, 512);
    let total = model.total_params() as f64 / 1e9;
    let active = model.active_params_per_token() as f64 / 1e9;
    assert!((79.0..82.0).contains(&total), "{total} B parameters");
    // "A3B": Qwen counts about 3 B; with the LM head this count's 3.56 B.
    assert!((3.0..3.7).contains(&active), "{active} B active");
}

#[test]
fn a_multimodal_qwen3_5_reads_its_text_config_and_a_bad_layer_type_is_named() {
    let config = r#"{
      "architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe",
      "vision_config": {"depth": 27},
      "text_config": {
        "hidden_size": 2048, "num_hidden_layers": 4, "intermediate_size": 512,
        "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "vocab_size": 248320, "max_position_embeddings": 262144,
        "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "norm_topk_prob": true,
        "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "mamba_ssm_dtype": "float32",
        "attn_output_gate": true, "dtype": "bfloat16"
      }
    }"#;
    let model = ModelConfig::from_json(config).unwrap();
    assert_eq!(model.architecture, Architecture::Qwen3_5Moe);
    assert_eq!(model.n_linear_attention_layers(), 3);
    let linear = model.linear_attention.as_ref().unwrap();
    assert_eq!(linear.state_dtype, Dtype::F32);
    assert_eq!(
        model.linear_state_bytes_per_layer(),
        32 * 128 * 128 * 4 + 3 * 8192 * 2
    );
    let bad = config.replace("\"full_attention\"]", "\"sliding_attention\"]");
    let err = ModelConfig::from_json(&bad).unwrap_err().to_string();
    assert!(
        err.contains("layer_types[3]") && err.contains("sliding_attention"),
        "{err}"
    );
    let short = config.replace("\"num_hidden_layers\": 4", "\"num_hidden_layers\": 5");
    let err = ModelConfig::from_json(&short).unwrap_err().to_string();
    assert!(
        err.contains("layer_types") && err.contains("4 entries for 5 layers"),
        "{err}"
    );
    let uneven = config.replace(
        "\"linear_num_value_heads\": 32",
        "\"linear_num_value_heads\": 24",
    );
    let err = ModelConfig::from_json(&uneven).unwrap_err().to_string();
    assert!(err.contains("linear_num_value_heads"), "{err}");
}

#[test]
fn qwen3_next_has_eighty_billion_parameters() {
    let total = builtin("qwen3-next-80b-a3b").total_params();
    // 79.67 B: "80B" in the model's name.
    assert_eq!(total / 10_000_000, 7967, "{total}");
}

#[test]
fn qwen3_5_122b_reads_its_text_config_to_a_hundred_and_twenty_two_billion_parameters() {
    let model = builtin("qwen3.5-122b-a10b");
    assert_eq!(model.architecture, Architecture::Qwen3_5Moe);
    assert_eq!(model.num_layers(), 48);
    assert_eq!(model.n_linear_attention_layers(), 36);
    assert_eq!(model.moe.n_routed_experts, 256);
    assert_eq!(model.moe.shared_intermediate_size, 1024);
    let total = model.total_params();
    let active = model.active_params_per_token() as f64 / 1e9;
    // 122.11 B: "122B" in the model's name, without the vision tower, which is not priced. With 32
    // linear value heads (the 35B-A3B's) it would be 120.7 B.
    assert_eq!(total / 10_000_000, 12211, "{total} parameters");
    // "A10B": this count (LM head, no embedding table) is 9.0 B; the input embedding adds 0.76 B.
    assert!((8.9..9.1).contains(&active), "{active} B active");
}

#[test]
fn a_dense_mlp_width_is_needed_only_where_a_layer_is_dense() {
    let deepseek = include_str!("../../data/models/deepseek-v2-lite/config.json")
        .replace("\"intermediate_size\": 10944,", "");
    let err = ModelConfig::from_json(&deepseek).unwrap_err().to_string();
    assert_eq!(
        err,
        "model config field intermediate_size: missing, and layer 0 is a dense MLP"
    );
    // Qwen3-30B-A3B has no dense layer: its width is not needed.
    let qwen = builtin_model("qwen3-30b-a3b")
        .unwrap()
        .replace("\"intermediate_size\": 6144,", "");
    let model = ModelConfig::from_json(&qwen).unwrap();
    assert_eq!(model.n_dense_layers(), 0);
}
