//! Reading model configs.

use expect_test::expect;

use super::*;

/// The fields of DeepSeek-V2-Lite's Hugging Face config.json that the probes read (afd-spec §3.1).
const DEEPSEEK_V2_LITE: &str = r#"{
  "_name_or_path": "deepseek-ai/DeepSeek-V2-Lite",
  "architectures": ["DeepseekV2ForCausalLM"],
  "first_k_dense_replace": 1,
  "hidden_size": 2048,
  "intermediate_size": 10944,
  "kv_lora_rank": 512,
  "moe_intermediate_size": 1408,
  "moe_layer_freq": 1,
  "n_routed_experts": 64,
  "n_shared_experts": 2,
  "num_attention_heads": 16,
  "num_experts_per_tok": 6,
  "num_hidden_layers": 27,
  "q_lora_rank": null,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06,
  "v_head_dim": 128
}"#;

const QWEN3_30B_A3B: &str = r#"{
  "architectures": ["Qwen3MoeForCausalLM"],
  "decoder_sparse_step": 1,
  "head_dim": 128,
  "hidden_size": 2048,
  "intermediate_size": 6144,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "rms_norm_eps": 1e-06
}"#;

#[test]
fn deepseek_config_matches_the_built_in_model() {
    let shape = ModelShape::from_config_json(DEEPSEEK_V2_LITE, "config.json", "folder").unwrap();
    assert_eq!(shape, ModelShape::deepseek_v2_lite());
    assert_eq!(shape.moe_layers(), 26);
    assert_eq!(shape.expert_bytes(), 17_301_504);
    assert!(shape.require_mla().is_ok());
}

#[test]
fn qwen3_has_no_dense_layer_no_shared_expert_and_no_mla() {
    let shape =
        ModelShape::from_config_json(QWEN3_30B_A3B, "config.json", "Qwen3-30B-A3B").unwrap();
    expect![[r#"
        ModelShape {
            name: "Qwen3-30B-A3B",
            hidden_size: 2048,
            num_layers: 48,
            dense_layers: 0,
            n_routed_experts: 128,
            experts_per_token: 8,
            moe_intermediate_size: 768,
            dense_intermediate_size: 6144,
            shared_intermediate_size: 0,
            num_heads: 32,
            mla: None,
            rms_norm_eps: 1e-6,
        }
    "#]]
    .assert_debug_eq(&shape);
    assert_eq!(
        shape.require_mla().unwrap_err().to_string(),
        "model config Qwen3-30B-A3B, field `kv_lora_rank`: missing: the attention and pipeline probes model multi-head latent attention (DeepSeek-V2/V3) only"
    );
}

#[track_caller]
fn check_error(text: &str, expected: &str) {
    let err = ModelShape::from_config_json(text, "m.json", "m").unwrap_err();
    assert_eq!(err.to_string(), expected);
}

#[test]
fn missing_and_mistyped_fields_are_named() {
    check_error(
        &DEEPSEEK_V2_LITE.replace("\"hidden_size\": 2048,", ""),
        "model config m.json, field `hidden_size`: missing",
    );
    check_error(
        &DEEPSEEK_V2_LITE.replace("\"hidden_size\": 2048", "\"hidden_size\": \"2048\""),
        "model config m.json, field `hidden_size`: \"2048\" is not an integer in 1..=16777216",
    );
    check_error(
        &DEEPSEEK_V2_LITE.replace("\"num_experts_per_tok\": 6", "\"num_experts_per_tok\": 65"),
        "model config m.json, field `num_experts_per_tok`: 65 exceeds the 64 routed experts",
    );
    check_error(
        &QWEN3_30B_A3B.replace("\"mlp_only_layers\": []", "\"mlp_only_layers\": [0]"),
        "model config m.json, field `mlp_only_layers`: must be an empty list",
    );
    check_error(
        "[1, 2]",
        "model config m.json, field `(root)`: must be a JSON object",
    );
    check_error(
        "{\"hidden_size\": ",
        "model config m.json is not valid JSON (line 1, column 16): EOF while parsing a value at line 1 column 16",
    );
}

#[test]
fn unsupported_mla_ranks_are_refused() {
    let shape = ModelShape::from_config_json(
        &DEEPSEEK_V2_LITE.replace("\"kv_lora_rank\": 512", "\"kv_lora_rank\": 256"),
        "m.json",
        "m",
    )
    .unwrap();
    assert_eq!(
        shape.require_mla().unwrap_err().to_string(),
        "model config DeepSeek-V2-Lite, field `kv_lora_rank`: 256 is not supported: the MLA decode kernel is built for 512"
    );
}

#[test]
fn files_that_do_not_exist_name_the_path() {
    let err = ModelShape::from_file(Path::new("/nonexistent/config.json")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot read model config /nonexistent/config.json")
    );
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = ModelShape::from_config_json(&text, "x", "x");
    }

    #[test]
    fn mangled_configs_never_panic(at in 0usize..2000, byte in proptest::num::u8::ANY) {
        let mut bytes = DEEPSEEK_V2_LITE.as_bytes().to_vec();
        let at = at % bytes.len();
        bytes[at] = byte;
        let _ = ModelShape::from_config_json(&String::from_utf8_lossy(&bytes), "x", "x");
    }
}
