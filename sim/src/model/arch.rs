//! Model architecture as the timing model sees it: a checked `afd_traces::model_config::ModelConfig`
//! (read from a Hugging Face or DeepSeek config file, or one of the configs shipped under
//! `traces/data/models/`) plus the derived shapes that only timing needs: FLOPs per attention
//! context token, TP-split KV bytes, weight bytes per role and rank.

use afd_traces::model_config::{
    Attention, LayerKind, ModelConfig, ModelConfigError, builtin_model,
};

/// A model, named, with its configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelArch {
    /// Name used in reports and to match calibration tables' `model` variant.
    pub name: String,
    pub config: ModelConfig,
}

impl ModelArch {
    /// A model shipped with the project (`deepseek-v2-lite`, `deepseek-v3`, `qwen3-30b-a3b`, …).
    pub fn builtin(name: &str) -> Option<Result<ModelArch, ModelConfigError>> {
        let text = builtin_model(name)?;
        Some(ModelConfig::from_json(text).map(|config| ModelArch::from_config(name, config)))
    }

    /// Wraps a checked configuration.
    pub fn from_config(name: &str, config: ModelConfig) -> ModelArch {
        ModelArch {
            name: name.to_owned(),
            config,
        }
    }

    /// DeepSeek-V2-Lite, the target model (afd-spec §3.1), from its shipped config.
    pub fn deepseek_v2_lite() -> ModelArch {
        ModelArch::builtin("deepseek-v2-lite")
            .expect("deepseek-v2-lite is shipped")
            .expect("the shipped config is valid")
    }

    pub fn hidden(&self) -> u32 {
        self.config.hidden_size
    }

    pub fn layers(&self) -> u32 {
        self.config.num_layers()
    }

    /// Whether layer `layer` runs the dense MLP rather than the MoE block.
    pub fn is_dense_layer(&self, layer: u32) -> bool {
        !self.config.is_moe_layer(layer)
    }

    /// Whether any layer has a MoE block.
    pub fn has_moe(&self) -> bool {
        self.config.n_moe_layers() > 0
    }

    pub fn routed_experts(&self) -> u32 {
        self.config.moe.n_routed_experts
    }

    pub fn experts_per_token(&self) -> u32 {
        self.config.moe.experts_per_token
    }

    /// Bytes per activation and KV element.
    pub fn dtype_bytes(&self) -> u64 {
        self.config.dtype.bytes()
    }

    /// Bytes per weight element (1 for FP8 checkpoints).
    pub fn weight_bytes(&self) -> u64 {
        self.config.weight_dtype.bytes()
    }

    pub fn max_position_embeddings(&self) -> u32 {
        self.config.max_position_embeddings
    }

    /// Bytes of one row of hidden states on the wire (A→F or F→A, afd-spec §3.3).
    pub fn row_bytes(&self) -> u64 {
        self.config.hidden_bytes_per_token()
    }

    /// KV-cache bytes per token per layer on one Attention rank: the MLA latent is replicated across
    /// TP; GQA KV heads are split across TP down to one head per rank.
    pub fn kv_bytes_per_token_layer(&self, attention_tp: u32) -> u64 {
        match &self.config.attention {
            Attention::Mla(_) => self.config.kv_cache_bytes_per_token_per_layer(),
            Attention::Gqa(gqa) => {
                let local = gqa.num_kv_heads.div_ceil(attention_tp.max(1)).max(1);
                2 * u64::from(local) * u64::from(gqa.head_dim) * self.dtype_bytes()
            }
        }
    }

    /// KV-cache bytes per token over all layers on one Attention rank.
    pub fn kv_bytes_per_token(&self, attention_tp: u32) -> u64 {
        self.kv_bytes_per_token_layer(attention_tp) * u64::from(self.layers())
    }

    /// Parameters of one layer's attention block.
    pub fn attention_params_per_layer(&self) -> u64 {
        self.config.attention_params_per_layer()
    }

    /// FLOPs of the attention kernel per query token per context token, all heads (absorbed MLA:
    /// scores over `kv_lora + rope`, output over `kv_lora`; GQA: scores and output over `head_dim`).
    pub fn attention_flops_per_context_token(&self) -> u64 {
        match &self.config.attention {
            Attention::Mla(mla) => {
                2 * u64::from(mla.num_heads)
                    * u64::from(2 * mla.kv_lora_rank + mla.qk_rope_head_dim)
            }
            Attention::Gqa(gqa) => 4 * u64::from(gqa.num_heads) * u64::from(gqa.head_dim),
        }
    }

    /// Parameters of one routed expert.
    pub fn expert_params(&self) -> u64 {
        self.config.expert_params()
    }

    /// Parameters of the fused shared-expert MLP (0 without shared experts).
    pub fn shared_expert_params(&self) -> u64 {
        self.config.shared_experts_params()
    }

    /// Parameters of the router (gate) of one MoE layer.
    pub fn router_params(&self) -> u64 {
        u64::from(self.hidden()) * u64::from(self.routed_experts())
    }

    /// Parameters of the dense MLP.
    pub fn dense_mlp_params(&self) -> u64 {
        self.config.ffn_params(LayerKind::Dense)
    }

    /// Parameters of the LM head (the vocabulary projection).
    pub fn lm_head_params(&self) -> u64 {
        u64::from(self.config.vocab_size) * u64::from(self.hidden())
    }

    /// Weight bytes one Attention rank holds (afd-spec §3.2 split), divided across Attention TP.
    pub fn attention_weight_bytes(&self, attention_tp: u32) -> u64 {
        self.config.params_by_role().attention * self.weight_bytes()
            / u64::from(attention_tp.max(1))
    }
}

#[cfg(test)]
mod tests;
