//! Model shapes from the configs `afd-traces` reads.

use expect_test::expect;

use super::*;

/// The fields of DeepSeek-V2-Lite's Hugging Face config.json (afd-spec §3.1).
const DEEPSEEK_V2_LITE_HF: &str = r#"{
  "_name_or_path": "deepseek-ai/DeepSeek-V2-Lite",
  "architectures": ["DeepseekV2ForCausalLM"],
  "first_k_dense_replace": 1,
  "hidden_size": 2048,
  "intermediate_size": 10944,
  "kv_lora_rank": 512,
  "max_position_embeddings": 163840,
  "moe_intermediate_size": 1408,
  "moe_layer_freq": 1,
  "n_routed_experts": 64,
  "n_shared_experts": 2,
  "num_attention_heads": 16,
  "num_experts_per_tok": 6,
  "num_hidden_layers": 27,
  "num_key_value_heads": 16,
  "q_lora_rank": null,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "rms_norm_eps": 1e-06,
  "topk_method": "greedy",
  "v_head_dim": 128,
  "vocab_size": 102400
}"#;

#[test]
fn the_built_in_model_is_deepseek_v2_lite() {
    let shape = ModelShape::deepseek_v2_lite();
    expect![[r#"
        ModelShape {
            name: "DeepSeek-V2-Lite",
            hidden_size: 2048,
            num_layers: 27,
            dense_layers: 1,
            n_routed_experts: 64,
            experts_per_token: 6,
            moe_intermediate_size: 1408,
            dense_intermediate_size: 10944,
            shared_intermediate_size: 2816,
            num_heads: 16,
            mla: Some(
                MlaShape {
                    kv_lora_rank: 512,
                    qk_nope_head_dim: 128,
                    qk_rope_head_dim: 64,
                    v_head_dim: 128,
                    q_lora_rank: None,
                },
            ),
            rms_norm_eps: 1e-6,
        }
    "#]]
    .assert_debug_eq(&shape);
    assert_eq!(shape.moe_layers(), 26);
    assert_eq!(shape.expert_bytes(), 17_301_504);
    assert!(shape.require_mla().is_ok());
}

#[test]
fn the_hugging_face_config_gives_the_same_shapes() {
    let shape = ModelShape::from_config_json(DEEPSEEK_V2_LITE_HF, "config.json", "folder").unwrap();
    assert_eq!(shape, ModelShape::deepseek_v2_lite());
}

#[test]
fn qwen3_has_no_dense_layer_no_shared_expert_and_no_mla() {
    let shape = ModelShape::from_name_or_file("qwen3-30b-a3b").unwrap();
    assert_eq!(
        (
            shape.name.as_str(),
            shape.num_layers,
            shape.dense_layers,
            shape.n_routed_experts
        ),
        ("Qwen3-30B-A3B", 48, 0, 128)
    );
    assert_eq!(
        (shape.experts_per_token, shape.moe_intermediate_size),
        (8, 768)
    );
    assert_eq!(shape.shared_intermediate_size, 0);
    assert_eq!(
        shape.require_mla().unwrap_err().to_string(),
        "model config Qwen3-30B-A3B, field `kv_lora_rank`: missing: the attention and pipeline probes model multi-head latent attention (DeepSeek-V2/V3) only"
    );
}

#[test]
fn config_errors_name_the_file_and_the_key() {
    let message = ModelShape::from_config_json(
        &DEEPSEEK_V2_LITE_HF.replace("\"hidden_size\": 2048,", ""),
        "m.json",
        "m",
    )
    .unwrap_err()
    .to_string();
    assert!(message.starts_with("m.json: "), "{message}");
    assert!(message.contains("hidden_size"), "{message}");
    let limit = ModelShape::from_config_json(
        &DEEPSEEK_V2_LITE_HF.replace("\"num_experts_per_tok\": 6", "\"num_experts_per_tok\": 17"),
        "m.json",
        "m",
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        limit,
        "model config m.json, field `num_experts_per_tok`: 17 exceeds the probe's limit of 16"
    );
    let message = ModelShape::from_config_json("{\"hidden_size\": ", "m.json", "m")
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("m.json: model config is not valid JSON"),
        "{message}"
    );
}

#[test]
fn unsupported_mla_ranks_are_refused() {
    let shape = ModelShape::from_config_json(
        &DEEPSEEK_V2_LITE_HF.replace("\"kv_lora_rank\": 512", "\"kv_lora_rank\": 256"),
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
    let err = ModelShape::from_name_or_file("/nonexistent/config.json").unwrap_err();
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
        let mut bytes = DEEPSEEK_V2_LITE_HF.as_bytes().to_vec();
        let at = at % bytes.len();
        bytes[at] = byte;
        let _ = ModelShape::from_config_json(&String::from_utf8_lossy(&bytes), "x", "x");
    }
}
