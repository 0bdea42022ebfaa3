//! Model architecture as the timing model sees it: a checked `afd_traces::model_config::ModelConfig`
//! (read from a Hugging Face or DeepSeek config file, or one of the configs shipped under
//! `traces/data/models/`) plus the derived shapes that only timing needs: FLOPs per attention
//! context token, TP-split KV bytes, weight bytes per role and rank.

use afd_traces::model_config::{
    Attention, LayerKind, MixerKind, ModelConfig, ModelConfigError, builtin_model,
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

    /// Whether attention is multi-head latent attention (vLLM runs it on an MLA backend).
    pub fn is_mla(&self) -> bool {
        matches!(self.config.attention, Attention::Mla(_))
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

    /// KV-cache bytes per token over all layers on one Attention rank (only full-attention layers
    /// keep a cache).
    pub fn kv_bytes_per_token(&self, attention_tp: u32) -> u64 {
        self.kv_bytes_per_token_layer(attention_tp)
            * u64::from(self.config.n_full_attention_layers())
    }

    /// The share of layers that run softmax attention: 1 but for hybrid models (Qwen3-Next: 1/4).
    /// A layer of the pipeline is priced as the mean over the model's layers, so a hybrid layer
    /// costs this share of a full-attention layer and the rest of a linear one.
    pub fn full_attention_share(&self) -> f64 {
        f64::from(self.config.n_full_attention_layers()) / f64::from(self.layers().max(1))
    }

    /// Bytes one sequence's linear-attention state holds in one layer on one Attention rank (the
    /// value heads split across TP); 0 without linear attention.
    pub fn linear_state_bytes_per_layer(&self, attention_tp: u32) -> u64 {
        self.config
            .linear_state_bytes_per_layer()
            .div_ceil(u64::from(attention_tp.max(1)))
    }

    /// How one Attention rank's KV cache is cut into blocks for a configured `block_size` (vLLM
    /// 0.26.0's `--block-size`, 16 by default): one pool of block ids shared by every layer. A
    /// model without linear attention keeps all layers in one group, so a block is `block_size`
    /// tokens of every layer and a request holds only token blocks.
    ///
    /// A hybrid model follows vLLM's hybrid allocator: the attention block grows to the smallest
    /// multiple of `block_size` whose page (one layer's KV of the block) holds a linear layer's
    /// state (`Platform._align_hybrid_block_size`, no prefix caching); layers are grouped by kind in
    /// groups of the smaller kind's count (the larger's when below 1.5 times it;
    /// `_get_kv_cache_groups_uniform_page_size`), and a block id stands for one page in each of a
    /// group's layers (`get_kv_cache_config_from_groups`). A request holds one block per linear
    /// group for its states and one per full-attention group for each attention block of tokens.
    pub fn kv_layout(&self, attention_tp: u32, block_size: u32) -> KvLayout {
        let block_size = block_size.max(1);
        let token_page = self.kv_bytes_per_token_layer(attention_tp).max(1);
        let full = self.config.n_full_attention_layers();
        let linear = self.config.n_linear_attention_layers();
        let state_page = self.linear_state_bytes_per_layer(attention_tp);
        if linear == 0 || full == 0 || state_page == 0 {
            return KvLayout {
                block_size,
                block_bytes: token_page * u64::from(block_size) * u64::from(full.max(1)),
                token_groups: 1,
                state_groups: 0,
            };
        }
        let align = u64::from(block_size);
        let tokens = align * state_page.div_ceil(align * token_page);
        let block_size = u32::try_from(tokens).unwrap_or(u32::MAX).max(block_size);
        let (fewer, more) = (full.min(linear), full.max(linear));
        // vLLM compares `more < fewer * 1.5` in floating point.
        let group = if 2 * u64::from(more) < 3 * u64::from(fewer) {
            more
        } else {
            fewer
        };
        KvLayout {
            block_size,
            block_bytes: u64::from(group) * u64::from(block_size) * token_page,
            token_groups: full.div_ceil(group),
            state_groups: linear.div_ceil(group),
        }
    }

    /// Bytes one sequence's linear-attention state holds over all layers on one Attention rank,
    /// whatever its length: vLLM keeps one per running request.
    pub fn linear_state_bytes_per_sequence(&self, attention_tp: u32) -> u64 {
        self.linear_state_bytes_per_layer(attention_tp)
            * u64::from(self.config.n_linear_attention_layers())
    }

    /// FLOPs of one linear-attention layer per token, all heads: the gated delta rule's decay,
    /// prediction, update and readout of each value head's `key × value` state (about 8 × key ×
    /// value), and the causal convolution (2 × kernel per convolved channel).
    pub fn linear_attention_flops_per_token(&self) -> u64 {
        self.config.linear_attention.as_ref().map_or(0, |linear| {
            8 * linear.state_elements() + 2 * linear.conv_dim() * u64::from(linear.conv_kernel)
        })
    }

    /// Parameters of one layer's attention block and norms: the mean over the model's layers
    /// (full and linear attention differ in hybrid models).
    pub fn attention_params_per_layer(&self) -> u64 {
        let total: u64 = self
            .config
            .mixers
            .iter()
            .map(|&kind| self.config.mixer_params(kind))
            .sum();
        total / u64::from(self.layers().max(1))
    }

    /// Whether any layer runs linear attention.
    pub fn is_hybrid(&self) -> bool {
        self.config.mixers.contains(&MixerKind::Linear)
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

/// How one Attention rank's KV cache is cut into blocks ([`ModelArch::kv_layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvLayout {
    /// Tokens of one attention block: the configured block size, or more for a hybrid model.
    pub block_size: u32,
    /// Bytes one block id takes on the rank (one page in each layer of a group).
    pub block_bytes: u64,
    /// Block ids a request takes for each `block_size` tokens (one per full-attention group).
    pub token_groups: u32,
    /// Block ids a running request takes for its linear-attention states, whatever its length
    /// (one per linear-attention group; 0 without linear attention).
    pub state_groups: u32,
}
