//! DeepSeek's inference config (`inference/configs/config_*.json` of deepseek-ai/DeepSeek-V3, read
//! into `ModelArgs` by `inference/model.py`).
//!
//! The shape keys are required here even though `ModelArgs` gives them defaults (its defaults are
//! DeepSeek-V2-Lite's, so a forgotten key would silently describe another model). Keys that the
//! shipped files leave out take `ModelArgs`' defaults: `q_lora_rank` 0 (a full `q_proj`),
//! `n_expert_groups` and `n_limited_groups` 1, `score_func` softmax, `route_scale` 1, `dtype`
//! bf16, `original_seq_len` 4096, `rope_factor` 40. Following `model.py`: the first
//! `n_dense_layers` layers are dense and the rest MoE; the gate renormalises top-k weights only
//! for sigmoid scoring and has a per-expert bias only when `dim == 7168` (DeepSeek-V3); the LM
//! head is separate from the embedding. With no architecture name in the file, sigmoid scoring
//! marks DeepSeek-V3 and softmax DeepSeek-V2.

use serde::Deserialize;

use super::{
    Architecture, Attention, ConfigFormat, Dtype, MixerKind, MlaAttention, ModelConfig,
    ModelConfigError, MoeConfig, RouterScoring, from_value, invalid, layer_kinds,
};

#[derive(Deserialize)]
struct ModelArgs {
    vocab_size: u32,
    dim: u32,
    inter_dim: u32,
    moe_inter_dim: u32,
    n_layers: u32,
    n_dense_layers: u32,
    n_heads: u32,
    n_routed_experts: u32,
    n_shared_experts: u32,
    n_activated_experts: u32,
    #[serde(default = "one")]
    n_expert_groups: u32,
    #[serde(default = "one")]
    n_limited_groups: u32,
    #[serde(default = "softmax")]
    score_func: String,
    #[serde(default = "one_f64")]
    route_scale: f64,
    #[serde(default)]
    q_lora_rank: u32,
    kv_lora_rank: u32,
    qk_nope_head_dim: u32,
    qk_rope_head_dim: u32,
    v_head_dim: u32,
    #[serde(default = "bf16")]
    dtype: String,
    #[serde(default = "original_seq_len")]
    original_seq_len: u32,
    #[serde(default = "rope_factor")]
    rope_factor: f64,
}

fn one() -> u32 {
    1
}

fn one_f64() -> f64 {
    1.0
}

fn softmax() -> String {
    "softmax".to_owned()
}

fn bf16() -> String {
    "bf16".to_owned()
}

fn original_seq_len() -> u32 {
    4096
}

fn rope_factor() -> f64 {
    40.0
}

pub(super) fn parse(value: serde_json::Value) -> Result<ModelConfig, ModelConfigError> {
    let raw: ModelArgs = from_value(value)?;
    if raw.n_dense_layers > raw.n_layers {
        return Err(invalid(
            "n_dense_layers",
            format!("{} is above n_layers {}", raw.n_dense_layers, raw.n_layers),
        ));
    }
    let (scoring, architecture) = match raw.score_func.as_str() {
        "softmax" => (RouterScoring::Softmax, Architecture::DeepseekV2),
        "sigmoid" => (RouterScoring::Sigmoid, Architecture::DeepseekV3),
        other => {
            return Err(invalid(
                "score_func",
                format!("unknown {other:?}; expected softmax or sigmoid"),
            ));
        }
    };
    let weight_dtype = match raw.dtype.as_str() {
        "bf16" => Dtype::Bf16,
        "fp8" => Dtype::Fp8,
        other => {
            return Err(invalid(
                "dtype",
                format!("unknown {other:?}; expected bf16 or fp8"),
            ));
        }
    };
    let positions = f64::from(raw.original_seq_len) * raw.rope_factor.max(1.0);
    if !(positions.is_finite() && positions <= f64::from(u32::MAX)) {
        return Err(invalid(
            "rope_factor",
            format!(
                "{} × original_seq_len {} is not a position count",
                raw.rope_factor, raw.original_seq_len
            ),
        ));
    }
    let layers = layer_kinds(raw.n_layers, |layer| layer >= raw.n_dense_layers);
    let mixers = vec![MixerKind::Full; layers.len()];
    Ok(ModelConfig {
        architecture,
        format: ConfigFormat::DeepSeekInference,
        hidden_size: raw.dim,
        vocab_size: raw.vocab_size,
        max_position_embeddings: positions as u32,
        tie_word_embeddings: false,
        // `Linear.dtype` (activations) is bf16 whatever the weights are.
        dtype: Dtype::Bf16,
        weight_dtype,
        attention: Attention::Mla(MlaAttention {
            num_heads: raw.n_heads,
            q_lora_rank: (raw.q_lora_rank != 0).then_some(raw.q_lora_rank),
            kv_lora_rank: raw.kv_lora_rank,
            qk_nope_head_dim: raw.qk_nope_head_dim,
            qk_rope_head_dim: raw.qk_rope_head_dim,
            v_head_dim: raw.v_head_dim,
        }),
        dense_intermediate_size: raw.inter_dim,
        moe: MoeConfig {
            n_routed_experts: raw.n_routed_experts,
            experts_per_token: raw.n_activated_experts,
            intermediate_size: raw.moe_inter_dim,
            n_shared_experts: raw.n_shared_experts,
            shared_intermediate_size: raw.n_shared_experts.saturating_mul(raw.moe_inter_dim),
            n_groups: raw.n_expert_groups,
            topk_groups: raw.n_limited_groups,
            scoring,
            norm_topk_prob: scoring == RouterScoring::Sigmoid,
            routed_scaling_factor: raw.route_scale,
            score_correction_bias: raw.dim == 7168,
        },
        layers,
        mixers,
        linear_attention: None,
    })
}

/// The key of this format that holds what [`ModelConfig::check`] names by its Hugging Face key.
pub(super) fn field_name(hf: &str) -> &str {
    match hf {
        "hidden_size" => "dim",
        "intermediate_size" => "inter_dim",
        "moe_intermediate_size" => "moe_inter_dim",
        "num_hidden_layers" => "n_layers",
        "num_attention_heads" => "n_heads",
        "num_experts_per_tok" => "n_activated_experts",
        "n_group" => "n_expert_groups",
        "topk_group" => "n_limited_groups",
        "routed_scaling_factor" => "route_scale",
        "max_position_embeddings" => "original_seq_len",
        other => other,
    }
}
