//! Model architecture: the numbers of a Hugging Face `config.json` that timing depends on.
//!
//! Built-in constructors cover DeepSeek-V2-Lite (afd-spec §3.1, the target model), DeepSeek-V3 and
//! Qwen3-30B-A3B; reading `config.json` files is the `afd-traces` crate's job. Derived quantities
//! (bytes per token on the wire, KV bytes, FLOPs and weight bytes per operation) live here so every
//! cost source prices the same shapes.

/// The attention block of a layer.
#[derive(Clone, Debug, PartialEq)]
pub enum AttentionArch {
    /// Multi-head latent attention (DeepSeek-V2/V3): the KV cache holds `kv_lora_rank + qk_rope_head_dim`
    /// values per token per layer, shared by all heads.
    Mla {
        heads: u32,
        q_lora_rank: Option<u32>,
        kv_lora_rank: u32,
        qk_nope_head_dim: u32,
        qk_rope_head_dim: u32,
        v_head_dim: u32,
    },
    /// Grouped-query attention (Qwen3-MoE): K and V of `kv_heads` heads per token per layer.
    Gqa {
        heads: u32,
        kv_heads: u32,
        head_dim: u32,
    },
}

/// The mixture-of-experts block of MoE layers.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeArch {
    pub routed_experts: u32,
    pub experts_per_token: u32,
    /// Intermediate width of one routed expert.
    pub moe_intermediate: u32,
    /// Number of shared experts, each `moe_intermediate` wide (fused into one MLP).
    pub shared_experts: u32,
}

/// What the simulator needs to know about a model.
///
/// Invariant: `first_dense_layers <= layers`; `moe` is `None` only for a dense model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelArch {
    pub name: String,
    pub hidden: u32,
    pub layers: u32,
    /// Layers `0..first_dense_layers` use the dense MLP (`first_k_dense_replace`).
    pub first_dense_layers: u32,
    /// Intermediate width of the dense MLP.
    pub dense_intermediate: u32,
    pub moe: Option<MoeArch>,
    pub attention: AttentionArch,
    pub vocab: u32,
    /// Bytes per weight and activation element (2 for bf16).
    pub dtype_bytes: u32,
    pub max_position_embeddings: u32,
}

impl ModelArch {
    /// DeepSeek-V2-Lite as in its `config.json` (afd-spec §3.1, sim-anchors §4).
    pub fn deepseek_v2_lite() -> ModelArch {
        ModelArch {
            name: "DeepSeek-V2-Lite".to_owned(),
            hidden: 2048,
            layers: 27,
            first_dense_layers: 1,
            dense_intermediate: 10944,
            moe: Some(MoeArch {
                routed_experts: 64,
                experts_per_token: 6,
                moe_intermediate: 1408,
                shared_experts: 2,
            }),
            attention: AttentionArch::Mla {
                heads: 16,
                q_lora_rank: None,
                kv_lora_rank: 512,
                qk_nope_head_dim: 128,
                qk_rope_head_dim: 64,
                v_head_dim: 128,
            },
            vocab: 102_400,
            dtype_bytes: 2,
            max_position_embeddings: 163_840,
        }
    }

    /// DeepSeek-V3 (671B) as in its `config.json`, priced in bf16 (the checkpoint is FP8).
    pub fn deepseek_v3() -> ModelArch {
        ModelArch {
            name: "DeepSeek-V3".to_owned(),
            hidden: 7168,
            layers: 61,
            first_dense_layers: 3,
            dense_intermediate: 18432,
            moe: Some(MoeArch {
                routed_experts: 256,
                experts_per_token: 8,
                moe_intermediate: 2048,
                shared_experts: 1,
            }),
            attention: AttentionArch::Mla {
                heads: 128,
                q_lora_rank: Some(1536),
                kv_lora_rank: 512,
                qk_nope_head_dim: 128,
                qk_rope_head_dim: 64,
                v_head_dim: 128,
            },
            vocab: 129_280,
            dtype_bytes: 2,
            max_position_embeddings: 163_840,
        }
    }

    /// Qwen3-30B-A3B as in its `config.json`: every layer MoE, GQA, no shared experts.
    pub fn qwen3_30b_a3b() -> ModelArch {
        ModelArch {
            name: "Qwen3-30B-A3B".to_owned(),
            hidden: 2048,
            layers: 48,
            first_dense_layers: 0,
            dense_intermediate: 6144,
            moe: Some(MoeArch {
                routed_experts: 128,
                experts_per_token: 8,
                moe_intermediate: 768,
                shared_experts: 0,
            }),
            attention: AttentionArch::Gqa {
                heads: 32,
                kv_heads: 4,
                head_dim: 128,
            },
            vocab: 151_936,
            dtype_bytes: 2,
            max_position_embeddings: 40_960,
        }
    }

    /// Whether layer `layer` runs the dense MLP rather than the MoE block.
    pub fn is_dense_layer(&self, layer: u32) -> bool {
        self.moe.is_none() || layer < self.first_dense_layers
    }

    /// Bytes of one row of hidden states on the wire (A→F or F→A, afd-spec §3.3).
    pub fn row_bytes(&self) -> u64 {
        u64::from(self.hidden) * u64::from(self.dtype_bytes)
    }

    /// KV-cache bytes per token per layer on one Attention rank (MLA latent is replicated across TP;
    /// GQA heads are split across TP down to one KV head per rank).
    pub fn kv_bytes_per_token_layer(&self, attention_tp: u32) -> u64 {
        let dtype = u64::from(self.dtype_bytes);
        match self.attention {
            AttentionArch::Mla {
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => u64::from(kv_lora_rank + qk_rope_head_dim) * dtype,
            AttentionArch::Gqa {
                kv_heads, head_dim, ..
            } => {
                let local_heads = kv_heads.div_ceil(attention_tp.max(1)).max(1);
                2 * u64::from(local_heads) * u64::from(head_dim) * dtype
            }
        }
    }

    /// KV-cache bytes per token over all layers on one Attention rank.
    pub fn kv_bytes_per_token(&self, attention_tp: u32) -> u64 {
        self.kv_bytes_per_token_layer(attention_tp) * u64::from(self.layers)
    }

    /// Parameters of one layer's attention block (projections, all heads).
    pub fn attention_params_per_layer(&self) -> u64 {
        let h = u64::from(self.hidden);
        match self.attention {
            AttentionArch::Mla {
                heads,
                q_lora_rank,
                kv_lora_rank,
                qk_nope_head_dim,
                qk_rope_head_dim,
                v_head_dim,
            } => {
                let heads = u64::from(heads);
                let qk = u64::from(qk_nope_head_dim + qk_rope_head_dim);
                let q = match q_lora_rank {
                    None => h * heads * qk,
                    Some(r) => h * u64::from(r) + u64::from(r) * heads * qk,
                };
                let kv_a = h * u64::from(kv_lora_rank + qk_rope_head_dim);
                let kv_b =
                    u64::from(kv_lora_rank) * heads * u64::from(qk_nope_head_dim + v_head_dim);
                let o = heads * u64::from(v_head_dim) * h;
                q + kv_a + kv_b + o
            }
            AttentionArch::Gqa {
                heads,
                kv_heads,
                head_dim,
            } => {
                let d = u64::from(head_dim);
                h * u64::from(heads) * d * 2 + h * u64::from(kv_heads) * d * 2
            }
        }
    }

    /// FLOPs of the attention kernel per query token per context token, all heads (absorbed MLA:
    /// scores over `kv_lora + rope`, output over `kv_lora`).
    pub fn attention_flops_per_context_token(&self) -> u64 {
        match self.attention {
            AttentionArch::Mla {
                heads,
                kv_lora_rank,
                qk_rope_head_dim,
                ..
            } => 2 * u64::from(heads) * u64::from(2 * kv_lora_rank + qk_rope_head_dim),
            AttentionArch::Gqa {
                heads, head_dim, ..
            } => 4 * u64::from(heads) * u64::from(head_dim),
        }
    }

    /// Number of attention heads (for splitting work across Attention TP).
    pub fn attention_heads(&self) -> u32 {
        match self.attention {
            AttentionArch::Mla { heads, .. } | AttentionArch::Gqa { heads, .. } => heads,
        }
    }

    /// Parameters of one routed expert (gate, up and down projections).
    pub fn expert_params(&self) -> u64 {
        self.moe.as_ref().map_or(0, |moe| {
            3 * u64::from(self.hidden) * u64::from(moe.moe_intermediate)
        })
    }

    /// Parameters of the fused shared-expert MLP.
    pub fn shared_expert_params(&self) -> u64 {
        self.moe.as_ref().map_or(0, |moe| {
            3 * u64::from(self.hidden)
                * u64::from(moe.moe_intermediate)
                * u64::from(moe.shared_experts)
        })
    }

    /// Parameters of the router (gate) of one MoE layer.
    pub fn router_params(&self) -> u64 {
        self.moe.as_ref().map_or(0, |moe| {
            u64::from(self.hidden) * u64::from(moe.routed_experts)
        })
    }

    /// Parameters of the dense MLP.
    pub fn dense_mlp_params(&self) -> u64 {
        3 * u64::from(self.hidden) * u64::from(self.dense_intermediate)
    }

    /// Parameters of the embedding table and of the (untied) LM head, each.
    pub fn embedding_params(&self) -> u64 {
        u64::from(self.vocab) * u64::from(self.hidden)
    }

    /// Weight bytes one Attention rank holds: attention blocks, embeddings and LM head, split by TP.
    pub fn attention_weight_bytes(&self, attention_tp: u32) -> u64 {
        let params = self.attention_params_per_layer() * u64::from(self.layers)
            + 2 * self.embedding_params();
        params * u64::from(self.dtype_bytes) / u64::from(attention_tp.max(1))
    }
}

#[cfg(test)]
mod tests;
