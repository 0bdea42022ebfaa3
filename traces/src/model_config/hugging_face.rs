//! Hugging Face `config.json` for `DeepseekV2ForCausalLM`, `DeepseekV3ForCausalLM`,
//! `Qwen3MoeForCausalLM`, and the hybrid `Qwen3NextForCausalLM` and Qwen3.5-MoE
//! (`Qwen3_5MoeForCausalLM`, or `Qwen3_5MoeForConditionalGeneration` whose `text_config` holds the
//! language model; the vision tower is not timed).
//!
//! Only the keys below are read; others are ignored. Optional keys take the defaults of the
//! architecture's transformers config class where the shipped configs rely on them, and are
//! documented per field. Which layers are MoE follows the modelling code: DeepSeek's
//! `layer >= first_k_dense_replace && layer % moe_layer_freq == 0`, Qwen3-MoE's
//! `layer ∉ mlp_only_layers && (layer + 1) % decoder_sparse_step == 0`.

use serde::Deserialize;

use super::{
    Architecture, Attention, ConfigFormat, Dtype, GqaAttention, LayerKind, LinearAttention,
    MixerKind, MlaAttention, ModelConfig, ModelConfigError, MoeConfig, RouterScoring, from_value,
    invalid, layer_kinds,
};

#[derive(Deserialize)]
struct Header {
    architectures: Vec<String>,
}

/// Keys both families share.
#[derive(Deserialize)]
struct Common {
    hidden_size: u32,
    num_hidden_layers: u32,
    /// Dense MLP width; Qwen3.5 MoE text configs, all of whose layers are MoE, have none.
    #[serde(default)]
    intermediate_size: Option<u32>,
    num_attention_heads: u32,
    vocab_size: u32,
    max_position_embeddings: u32,
    /// Default false, as in both config classes.
    #[serde(default)]
    tie_word_embeddings: bool,
    /// transformers ≥ 5 writes `dtype`, older versions `torch_dtype`; default bf16.
    #[serde(default)]
    torch_dtype: Option<String>,
    #[serde(default)]
    dtype: Option<String>,
    #[serde(default)]
    quantization_config: Option<Quantization>,
}

#[derive(Deserialize)]
struct Quantization {
    quant_method: String,
}

#[derive(Deserialize)]
struct Deepseek {
    #[serde(flatten)]
    common: Common,
    /// `null` means a full `q_proj`.
    #[serde(default)]
    q_lora_rank: Option<u32>,
    kv_lora_rank: u32,
    qk_nope_head_dim: u32,
    qk_rope_head_dim: u32,
    v_head_dim: u32,
    /// `null` would make every layer dense, which is not an MoE model to disaggregate.
    n_routed_experts: Option<u32>,
    num_experts_per_tok: u32,
    moe_intermediate_size: u32,
    /// Missing or `null`: no shared experts.
    #[serde(default)]
    n_shared_experts: Option<u32>,
    #[serde(default)]
    first_k_dense_replace: Option<u32>,
    #[serde(default)]
    moe_layer_freq: Option<u32>,
    #[serde(default)]
    n_group: Option<u32>,
    #[serde(default)]
    topk_group: Option<u32>,
    /// Default `softmax` (DeepSeek-V2).
    #[serde(default)]
    scoring_func: Option<String>,
    /// `noaux_tc` (DeepSeek-V3) adds a per-expert score-correction bias to the router.
    #[serde(default)]
    topk_method: Option<String>,
    #[serde(default)]
    norm_topk_prob: Option<bool>,
    #[serde(default)]
    routed_scaling_factor: Option<f64>,
}

#[derive(Deserialize)]
struct Qwen3Moe {
    #[serde(flatten)]
    common: Common,
    num_key_value_heads: u32,
    head_dim: u32,
    /// transformers ≥ 5 calls it `num_local_experts`.
    #[serde(alias = "num_local_experts")]
    num_experts: u32,
    num_experts_per_tok: u32,
    moe_intermediate_size: u32,
    /// Width of the one shared expert every token also runs (Qwen2-MoE and Qwen3-Next style
    /// configs carry it; Qwen3-MoE checkpoints have none). Missing, `null` or 0: no shared expert.
    #[serde(default)]
    shared_expert_intermediate_size: Option<u32>,
    #[serde(default)]
    decoder_sparse_step: Option<u32>,
    #[serde(default)]
    mlp_only_layers: Option<Vec<u32>>,
    #[serde(default)]
    norm_topk_prob: Option<bool>,
    #[serde(default)]
    attention_bias: Option<bool>,
}

/// The keys of a hybrid Qwen text model beyond Qwen3-MoE's, with the defaults of transformers'
/// `Qwen3NextConfig` (`linear_*`, `full_attention_interval` 4) where a config leaves them out.
#[derive(Deserialize)]
struct QwenHybrid {
    #[serde(flatten)]
    moe: Qwen3Moe,
    /// `linear_attention` or `full_attention` per layer; without it every
    /// `full_attention_interval`-th layer (1-based) is full.
    #[serde(default)]
    layer_types: Option<Vec<String>>,
    #[serde(default)]
    full_attention_interval: Option<u32>,
    #[serde(default)]
    linear_num_key_heads: Option<u32>,
    #[serde(default)]
    linear_num_value_heads: Option<u32>,
    #[serde(default)]
    linear_key_head_dim: Option<u32>,
    #[serde(default)]
    linear_value_head_dim: Option<u32>,
    #[serde(default)]
    linear_conv_kernel_dim: Option<u32>,
    /// The recurrent state's dtype (Qwen3.5 configs: `float32`); default the model's.
    #[serde(default)]
    mamba_ssm_dtype: Option<String>,
    /// Qwen3.5's key; Qwen3-Next always gates its attention output.
    #[serde(default)]
    attn_output_gate: Option<bool>,
}

pub(super) fn parse(value: serde_json::Value) -> Result<ModelConfig, ModelConfigError> {
    let header: Header = from_value(value.clone())?;
    let architecture = header
        .architectures
        .iter()
        .find_map(|name| match name.as_str() {
            "DeepseekV2ForCausalLM" => Some(Architecture::DeepseekV2),
            "DeepseekV3ForCausalLM" => Some(Architecture::DeepseekV3),
            "Qwen3MoeForCausalLM" => Some(Architecture::Qwen3Moe),
            "Qwen3NextForCausalLM" => Some(Architecture::Qwen3Next),
            "Qwen3_5MoeForCausalLM" | "Qwen3_5MoeForConditionalGeneration" => {
                Some(Architecture::Qwen3_5Moe)
            }
            _ => None,
        })
        .ok_or(ModelConfigError::Unsupported {
            found: header.architectures.clone(),
        })?;
    match architecture {
        Architecture::DeepseekV2 | Architecture::DeepseekV3 => {
            deepseek(architecture, from_value(value)?)
        }
        Architecture::Qwen3Moe => qwen3_moe(from_value(value)?),
        Architecture::Qwen3Next | Architecture::Qwen3_5Moe => {
            // A multimodal Qwen3.5 keeps its language model under `text_config`.
            let text = match value.get("text_config") {
                Some(text) if text.is_object() => text.clone(),
                _ => value,
            };
            qwen_hybrid(architecture, from_value(text)?)
        }
    }
}

fn qwen_hybrid(
    architecture: Architecture,
    raw: QwenHybrid,
) -> Result<ModelConfig, ModelConfigError> {
    let n_layers = raw.moe.common.num_hidden_layers;
    let mixers: Vec<MixerKind> = match &raw.layer_types {
        Some(types) => types
            .iter()
            .enumerate()
            .map(|(i, kind)| match kind.as_str() {
                "full_attention" => Ok(MixerKind::Full),
                "linear_attention" => Ok(MixerKind::Linear),
                other => Err(invalid(
                    &format!("layer_types[{i}]"),
                    format!("unknown {other:?}; expected full_attention or linear_attention"),
                )),
            })
            .collect::<Result<_, _>>()?,
        None => {
            let interval = raw.full_attention_interval.unwrap_or(4);
            if interval == 0 {
                return Err(invalid(
                    "full_attention_interval",
                    "must be at least 1".to_owned(),
                ));
            }
            (0..n_layers.min(super::MAX_COUNT + 1))
                .map(|layer| {
                    if (layer + 1).is_multiple_of(interval) {
                        MixerKind::Full
                    } else {
                        MixerKind::Linear
                    }
                })
                .collect()
        }
    };
    let state_dtype = match &raw.mamba_ssm_dtype {
        Some(name) => Some(Dtype::from_config("mamba_ssm_dtype", name)?),
        None => None,
    };
    let linear = LinearAttention {
        num_key_heads: raw.linear_num_key_heads.unwrap_or(16),
        num_value_heads: raw.linear_num_value_heads.unwrap_or(32),
        key_head_dim: raw.linear_key_head_dim.unwrap_or(128),
        value_head_dim: raw.linear_value_head_dim.unwrap_or(128),
        conv_kernel: raw.linear_conv_kernel_dim.unwrap_or(4),
        // Filled with the model's dtype below when the config names none.
        state_dtype: state_dtype.unwrap_or(Dtype::Bf16),
    };
    let gate = raw.attn_output_gate.unwrap_or(true);
    let mut config = qwen3_moe(raw.moe)?;
    config.architecture = architecture;
    if let Attention::Gqa(gqa) = &mut config.attention {
        gqa.output_gate = gate;
    }
    let linear = LinearAttention {
        state_dtype: state_dtype.unwrap_or(config.dtype),
        ..linear
    };
    config.linear_attention = mixers.contains(&MixerKind::Linear).then_some(linear);
    config.mixers = mixers;
    Ok(config)
}

fn deepseek(architecture: Architecture, raw: Deepseek) -> Result<ModelConfig, ModelConfigError> {
    let n_layers = raw.common.num_hidden_layers;
    let first_dense = raw.first_k_dense_replace.unwrap_or(0);
    if first_dense > n_layers {
        return Err(invalid(
            "first_k_dense_replace",
            format!("{first_dense} is above num_hidden_layers {n_layers}"),
        ));
    }
    let frequency = raw.moe_layer_freq.unwrap_or(1);
    if frequency == 0 {
        return Err(invalid("moe_layer_freq", "must be at least 1".to_owned()));
    }
    let n_routed_experts = raw.n_routed_experts.ok_or_else(|| {
        invalid(
            "n_routed_experts",
            "missing or null: a dense model has no experts to disaggregate".to_owned(),
        )
    })?;
    let layers = layer_kinds(n_layers, |layer| {
        layer >= first_dense && layer.is_multiple_of(frequency)
    });
    let scoring = match raw.scoring_func.as_deref().unwrap_or("softmax") {
        "softmax" => RouterScoring::Softmax,
        "sigmoid" => RouterScoring::Sigmoid,
        other => {
            return Err(invalid(
                "scoring_func",
                format!("unknown {other:?}; expected softmax or sigmoid"),
            ));
        }
    };
    let n_shared_experts = raw.n_shared_experts.unwrap_or(0);
    let attention = Attention::Mla(MlaAttention {
        num_heads: raw.common.num_attention_heads,
        q_lora_rank: raw.q_lora_rank,
        kv_lora_rank: raw.kv_lora_rank,
        qk_nope_head_dim: raw.qk_nope_head_dim,
        qk_rope_head_dim: raw.qk_rope_head_dim,
        v_head_dim: raw.v_head_dim,
    });
    let moe = MoeConfig {
        n_routed_experts,
        experts_per_token: raw.num_experts_per_tok,
        intermediate_size: raw.moe_intermediate_size,
        n_shared_experts,
        shared_intermediate_size: n_shared_experts.saturating_mul(raw.moe_intermediate_size),
        n_groups: raw.n_group.unwrap_or(1),
        topk_groups: raw.topk_group.unwrap_or(1),
        scoring,
        norm_topk_prob: raw.norm_topk_prob.unwrap_or(false),
        routed_scaling_factor: raw.routed_scaling_factor.unwrap_or(1.0),
        score_correction_bias: raw.topk_method.as_deref() == Some("noaux_tc"),
    };
    raw.common.into_config(architecture, attention, moe, layers)
}

fn qwen3_moe(raw: Qwen3Moe) -> Result<ModelConfig, ModelConfigError> {
    let n_layers = raw.common.num_hidden_layers;
    let step = raw.decoder_sparse_step.unwrap_or(1);
    if step == 0 {
        return Err(invalid(
            "decoder_sparse_step",
            "must be at least 1".to_owned(),
        ));
    }
    let mlp_only = raw.mlp_only_layers.unwrap_or_default();
    if let Some(&layer) = mlp_only.iter().find(|&&layer| layer >= n_layers) {
        return Err(invalid(
            "mlp_only_layers",
            format!("layer {layer} does not exist; there are {n_layers} layers"),
        ));
    }
    let layers = layer_kinds(n_layers, |layer| {
        !mlp_only.contains(&layer) && (layer + 1).is_multiple_of(step)
    });
    let shared = raw.shared_expert_intermediate_size.unwrap_or(0);
    let attention = Attention::Gqa(GqaAttention {
        num_heads: raw.common.num_attention_heads,
        num_kv_heads: raw.num_key_value_heads,
        head_dim: raw.head_dim,
        qk_norm: true,
        bias: raw.attention_bias.unwrap_or(false),
        output_gate: false,
    });
    let moe = MoeConfig {
        n_routed_experts: raw.num_experts,
        experts_per_token: raw.num_experts_per_tok,
        intermediate_size: raw.moe_intermediate_size,
        n_shared_experts: u32::from(shared > 0),
        shared_intermediate_size: shared,
        n_groups: 1,
        topk_groups: 1,
        scoring: RouterScoring::Softmax,
        norm_topk_prob: raw.norm_topk_prob.unwrap_or(false),
        routed_scaling_factor: 1.0,
        score_correction_bias: false,
    };
    raw.common
        .into_config(Architecture::Qwen3Moe, attention, moe, layers)
}

impl Common {
    /// The config built from the keys both families share and the family-specific blocks.
    fn into_config(
        self,
        architecture: Architecture,
        attention: Attention,
        moe: MoeConfig,
        layers: Vec<LayerKind>,
    ) -> Result<ModelConfig, ModelConfigError> {
        let (dtype, weight_dtype) = dtypes(&self)?;
        let dense_intermediate_size = match self.intermediate_size {
            Some(size) => size,
            None => match layers.iter().position(|kind| *kind == LayerKind::Dense) {
                Some(layer) => {
                    return Err(invalid(
                        "intermediate_size",
                        format!("missing, and layer {layer} is a dense MLP"),
                    ));
                }
                None => 0,
            },
        };
        let mixers = vec![MixerKind::Full; layers.len()];
        Ok(ModelConfig {
            architecture,
            format: ConfigFormat::HuggingFace,
            hidden_size: self.hidden_size,
            vocab_size: self.vocab_size,
            max_position_embeddings: self.max_position_embeddings,
            tie_word_embeddings: self.tie_word_embeddings,
            dtype,
            weight_dtype,
            attention,
            dense_intermediate_size,
            moe,
            layers,
            mixers,
            linear_attention: None,
        })
    }
}

/// Activation dtype from `dtype`/`torch_dtype` (default bf16) and weight dtype, FP8 when
/// `quantization_config.quant_method` is `fp8`.
fn dtypes(common: &Common) -> Result<(Dtype, Dtype), ModelConfigError> {
    let (field, name) = match (&common.dtype, &common.torch_dtype) {
        (Some(name), _) => ("dtype", name.as_str()),
        (None, Some(name)) => ("torch_dtype", name.as_str()),
        (None, None) => ("torch_dtype", "bfloat16"),
    };
    let dtype = Dtype::from_config(field, name)?;
    let weight_dtype = match &common.quantization_config {
        None => dtype,
        Some(quantization) if quantization.quant_method == "fp8" => Dtype::Fp8,
        Some(quantization) => {
            return Err(invalid(
                "quantization_config.quant_method",
                format!(
                    "{:?} is not modelled; only fp8 weights are",
                    quantization.quant_method
                ),
            ));
        }
    };
    Ok((dtype, weight_dtype))
}
