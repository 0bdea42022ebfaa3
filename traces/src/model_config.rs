//! Model architectures: the sizes a timing model needs, read from a model's configuration file and
//! checked.
//!
//! Two file formats are read into one [`ModelConfig`]:
//! - a Hugging Face `config.json` for `DeepseekV2ForCausalLM`, `DeepseekV3ForCausalLM`,
//!   `Qwen3MoeForCausalLM`, and the hybrid `Qwen3NextForCausalLM` and Qwen3.5-MoE, whose
//!   layers mix Gated DeltaNet linear attention (a state per sequence, no KV cache) with gated
//!   softmax attention; unknown keys are ignored, since HF configs carry many;
//! - DeepSeek's inference `ModelArgs` JSON (`inference/configs/config_*.json` of the DeepSeek-V3
//!   repository: `dim`, `n_layers`, `n_dense_layers`, …), which is how the shipped DeepSeek-V2-Lite
//!   config comes (see `traces/data/models/SOURCE.md`).
//!
//! A missing required key is an error naming it; values are checked (positive sizes, top-k within
//! the experts, group-limited routing that can pick enough experts, …) and bounded so that every
//! derived count fits in a `u64`. Derived helpers give what afd-spec §3.1–§3.3 derive by hand: KV
//! bytes per token, expert weight bytes, A↔F bytes per token, and parameters per role, where the
//! Attention side holds attention, norms, embeddings and LM head and the FFN side the MLP/MoE block
//! (afd-spec §3.2, default `compute_gate_on_attention = false`).
//!
//! Not here: FLOP counts, timing, rope and normalisation numerics, multi-token-prediction layers
//! (`num_nextn_predict_layers` is ignored: vLLM runs them only for speculative decoding).

use std::fmt;

mod deepseek;
mod hugging_face;

/// Names [`builtin_model`] knows, for help texts.
pub const BUILTIN_MODEL_NAMES: [&str; 6] = [
    "deepseek-v2-lite",
    "deepseek-v3",
    "deepseek-r1-0528",
    "qwen3-30b-a3b",
    "qwen3-next-80b-a3b",
    "qwen3.5-122b-a10b",
];

/// The text of a configuration file shipped under `traces/data/models/`, by model name
/// (case-insensitive), for binaries to default to. Sources are in that folder's `SOURCE.md`;
/// `deepseek-v3` is served by DeepSeek-R1-0528's config, which has the same architecture.
pub fn builtin_model(name: &str) -> Option<&'static str> {
    match name.to_ascii_lowercase().as_str() {
        "deepseek-v2-lite" => Some(include_str!(
            "../data/models/deepseek-v2-lite/config_16B.json"
        )),
        "deepseek-v3" | "deepseek-r1-0528" => {
            Some(include_str!("../data/models/deepseek-r1-0528/config.json"))
        }
        "qwen3-30b-a3b" => Some(include_str!("../data/models/qwen3-30b-a3b/config.json")),
        "qwen3-next-80b-a3b" => Some(include_str!(
            "../data/models/qwen3-next-80b-a3b/config.json"
        )),
        "qwen3.5-122b-a10b" => Some(include_str!("../data/models/qwen3.5-122b-a10b/config.json")),
        _ => None,
    }
}

/// A model's architecture as far as timing needs it. Build one with [`ModelConfig::from_json`], or
/// by hand followed by [`ModelConfig::check`]; the derived helpers assume a checked config.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub architecture: Architecture,
    /// The file format it was read from.
    pub format: ConfigFormat,
    /// Model width; activations per token are this many elements of [`Self::dtype`].
    pub hidden_size: u32,
    pub vocab_size: u32,
    pub max_position_embeddings: u32,
    /// Whether the LM head shares the embedding table (no separate head weights).
    pub tie_word_embeddings: bool,
    /// Activations and KV cache (`torch_dtype`, default bf16).
    pub dtype: Dtype,
    /// Linear-layer weights: [`Dtype::Fp8`] when `quantization_config` says FP8, else `dtype`.
    pub weight_dtype: Dtype,
    pub attention: Attention,
    /// Width of the dense MLP of [`LayerKind::Dense`] layers (`intermediate_size`).
    pub dense_intermediate_size: u32,
    /// The MoE block of [`LayerKind::Moe`] layers; unused when there are none.
    pub moe: MoeConfig,
    /// One entry per decoder layer, in order. Invariant: non-empty.
    pub layers: Vec<LayerKind>,
    /// The token mixer of each decoder layer, in order; every layer [`MixerKind::Full`] but for
    /// hybrid models. Invariant: as long as `layers`.
    pub mixers: Vec<MixerKind>,
    /// The linear attention of [`MixerKind::Linear`] layers; `None` when there are none.
    pub linear_attention: Option<LinearAttention>,
}

/// The model classes this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Architecture {
    DeepseekV2,
    DeepseekV3,
    Qwen3Moe,
    /// Hybrid: Gated DeltaNet and gated softmax attention, one in four layers full (Qwen3-Next).
    Qwen3Next,
    /// Qwen3.5-MoE: the same hybrid layout as Qwen3-Next.
    Qwen3_5Moe,
}

/// Which file format a config came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConfigFormat {
    /// A Hugging Face `config.json`.
    HuggingFace,
    /// DeepSeek's inference `ModelArgs` JSON.
    DeepSeekInference,
}

/// Element types of weights, activations and KV cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    F32,
    F16,
    Bf16,
    /// FP8 (e4m3) weights with block scales; the scales are not counted.
    Fp8,
}

/// What the FFN side of a decoder layer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayerKind {
    /// A dense MLP of width [`ModelConfig::dense_intermediate_size`] (afd-spec §3.2: layer 0 of V2-Lite).
    Dense,
    /// Router, routed experts and shared experts as [`ModelConfig::moe`] describes.
    Moe,
}

/// The token mixer of one decoder layer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MixerKind {
    /// Softmax attention as [`ModelConfig::attention`] describes, with a KV cache.
    Full,
    /// Gated DeltaNet linear attention as [`ModelConfig::linear_attention`] describes: a fixed-size
    /// state per sequence, no KV cache (Qwen3-Next, Qwen3.5).
    Linear,
}

/// Gated DeltaNet linear attention (Qwen3-Next and Qwen3.5's `linear_attention` layers): a causal
/// convolution over the q, k and v projections, then a recurrent delta-rule state per value head.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinearAttention {
    pub num_key_heads: u32,
    /// Invariant: a multiple of `num_key_heads`.
    pub num_value_heads: u32,
    pub key_head_dim: u32,
    pub value_head_dim: u32,
    /// Width of the causal convolution (`linear_conv_kernel_dim`).
    pub conv_kernel: u32,
    /// Element type of the recurrent state (`mamba_ssm_dtype`, else the model's dtype).
    pub state_dtype: Dtype,
}

/// The attention block, which fixes the KV cache layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attention {
    /// Multi-head latent attention (DeepSeek): the cache holds one compressed latent per token.
    Mla(MlaAttention),
    /// Grouped-query attention: the cache holds keys and values of every KV head.
    Gqa(GqaAttention),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MlaAttention {
    pub num_heads: u32,
    /// Query compression rank; `None` means a full `q_proj` (DeepSeek-V2-Lite).
    pub q_lora_rank: Option<u32>,
    /// Width of the compressed KV latent kept in the cache.
    pub kv_lora_rank: u32,
    pub qk_nope_head_dim: u32,
    /// Decoupled rope key width, also kept in the cache.
    pub qk_rope_head_dim: u32,
    pub v_head_dim: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GqaAttention {
    pub num_heads: u32,
    /// Invariant: divides `num_heads`.
    pub num_kv_heads: u32,
    pub head_dim: u32,
    /// Per-head RMS norms on queries and keys (Qwen3).
    pub qk_norm: bool,
    /// Biases on the q, k, v and o projections.
    pub bias: bool,
    /// A sigmoid gate on the output, projected with the queries (`q_proj` twice as wide):
    /// Qwen3-Next and Qwen3.5 (`attn_output_gate`).
    pub output_gate: bool,
}

/// The MoE block: a router over routed experts plus always-active shared experts.
#[derive(Clone, Debug, PartialEq)]
pub struct MoeConfig {
    pub n_routed_experts: u32,
    /// Routed experts each token goes to (top-k).
    pub experts_per_token: u32,
    /// Width of one routed expert (gate, up and down projections).
    pub intermediate_size: u32,
    pub n_shared_experts: u32,
    /// Width of the fused shared-expert MLP: `n_shared_experts × intermediate_size` for DeepSeek;
    /// 0 without shared experts.
    pub shared_intermediate_size: u32,
    /// Expert groups for group-limited routing (1: none). Invariant: divides `n_routed_experts`.
    pub n_groups: u32,
    /// Groups a token may pick its experts from. Invariant: `1 ≤ topk_groups ≤ n_groups`.
    pub topk_groups: u32,
    pub scoring: RouterScoring,
    /// Whether the top-k weights are renormalised to sum to 1.
    pub norm_topk_prob: bool,
    pub routed_scaling_factor: f64,
    /// DeepSeek-V3's `e_score_correction_bias` (one value per routed expert, `noaux_tc` routing).
    pub score_correction_bias: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouterScoring {
    Softmax,
    Sigmoid,
}

/// Parameters held by each AFD role (afd-spec §3.2 weight split).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleParams {
    /// Attention blocks, both layer norms of every layer, embeddings, final norm and LM head.
    pub attention: u64,
    /// Dense MLPs and MoE blocks (router, routed experts, shared experts).
    pub ffn: u64,
}

/// Why a model config could not be read; every variant names the key or position at fault.
#[derive(Debug, thiserror::Error)]
pub enum ModelConfigError {
    #[error("model config is not valid JSON (line {line}, column {column}): {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    #[error("model config: {message}")]
    Field { message: String },
    #[error(
        "model config is neither a Hugging Face config.json (no \"architectures\") nor a DeepSeek \
         inference config (no \"dim\")"
    )]
    UnknownFormat,
    #[error(
        "model config has architectures {found:?}; this build reads DeepseekV2ForCausalLM, \
         DeepseekV3ForCausalLM, Qwen3MoeForCausalLM, Qwen3NextForCausalLM and \
         Qwen3_5MoeForCausalLM (or Qwen3_5MoeForConditionalGeneration)"
    )]
    Unsupported { found: Vec<String> },
    #[error("model config field {field}: {problem}")]
    Invalid { field: String, problem: String },
}

/// Largest size (widths, ranks, head dims) a config may give.
const MAX_SIZE: u32 = 1 << 20;
/// Largest count (layers, heads, experts, groups) a config may give.
const MAX_COUNT: u32 = 1 << 16;
/// Largest vocabulary a config may give.
const MAX_VOCAB: u32 = 1 << 24;
/// Largest parameter count accepted; far above any real model, and exact in an `f64`.
const MAX_PARAMS: u128 = 1_000_000_000_000_000;

impl ModelConfig {
    /// Reads and checks a Hugging Face `config.json` or a DeepSeek inference config.
    pub fn from_json(text: &str) -> Result<ModelConfig, ModelConfigError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|err| ModelConfigError::Syntax {
                line: err.line(),
                column: err.column(),
                message: strip_position(&err.to_string()),
            })?;
        let Some(object) = value.as_object() else {
            return Err(ModelConfigError::Invalid {
                field: "(top level)".to_owned(),
                problem: "must be a JSON object".to_owned(),
            });
        };
        let config = if object.contains_key("architectures") {
            hugging_face::parse(value)?
        } else if object.contains_key("dim") {
            deepseek::parse(value)?
        } else {
            return Err(ModelConfigError::UnknownFormat);
        };
        config.check().map_err(|err| match (config.format, err) {
            (ConfigFormat::DeepSeekInference, ModelConfigError::Invalid { field, problem }) => {
                ModelConfigError::Invalid {
                    field: deepseek::field_name(&field).to_owned(),
                    problem,
                }
            }
            (_, err) => err,
        })?;
        Ok(config)
    }

    /// Checks the invariants of the fields; errors name Hugging Face keys.
    pub fn check(&self) -> Result<(), ModelConfigError> {
        let n_layers = u32::try_from(self.layers.len()).unwrap_or(u32::MAX);
        in_range("num_hidden_layers", n_layers, MAX_COUNT)?;
        in_range("hidden_size", self.hidden_size, MAX_SIZE)?;
        in_range("vocab_size", self.vocab_size, MAX_VOCAB)?;
        in_range(
            "max_position_embeddings",
            self.max_position_embeddings,
            u32::MAX,
        )?;
        if self.layers.contains(&LayerKind::Dense) {
            in_range("intermediate_size", self.dense_intermediate_size, MAX_SIZE)?;
        }
        match &self.attention {
            Attention::Mla(mla) => mla.check()?,
            Attention::Gqa(gqa) => gqa.check()?,
        }
        if self.mixers.len() != self.layers.len() {
            return Err(invalid(
                "layer_types",
                format!(
                    "{} entries for {} layers",
                    self.mixers.len(),
                    self.layers.len()
                ),
            ));
        }
        match (
            &self.linear_attention,
            self.mixers.contains(&MixerKind::Linear),
        ) {
            (Some(linear), _) => linear.check()?,
            (None, true) => {
                return Err(invalid(
                    "layer_types",
                    "linear_attention layers without linear attention sizes".to_owned(),
                ));
            }
            (None, false) => {}
        }
        if self.layers.contains(&LayerKind::Moe) {
            self.moe.check()?;
        }
        let total = self.total_params_wide();
        if total > MAX_PARAMS {
            return Err(invalid(
                "(all)",
                format!("{total} parameters; at most {MAX_PARAMS} are accepted"),
            ));
        }
        Ok(())
    }

    pub fn num_layers(&self) -> u32 {
        self.layers.len() as u32
    }

    /// Whether decoder layer `layer` (0-based) has an MoE block; false past the last layer.
    pub fn is_moe_layer(&self, layer: u32) -> bool {
        self.layers.get(layer as usize) == Some(&LayerKind::Moe)
    }

    pub fn n_moe_layers(&self) -> u32 {
        self.layers.iter().filter(|&&k| k == LayerKind::Moe).count() as u32
    }

    pub fn n_dense_layers(&self) -> u32 {
        self.num_layers() - self.n_moe_layers()
    }

    /// KV-cache bytes one token occupies in one layer: MLA keeps `(kv_lora_rank +
    /// qk_rope_head_dim)` elements, GQA keeps a key and a value per KV head (afd-spec §3.1).
    pub fn kv_cache_bytes_per_token_per_layer(&self) -> u64 {
        let elements = match &self.attention {
            Attention::Mla(mla) => u64::from(mla.kv_lora_rank) + u64::from(mla.qk_rope_head_dim),
            Attention::Gqa(gqa) => 2 * u64::from(gqa.num_kv_heads) * u64::from(gqa.head_dim),
        };
        elements * self.dtype.bytes()
    }

    /// KV-cache bytes one token occupies over all layers (only full-attention layers keep one).
    pub fn kv_cache_bytes_per_token(&self) -> u64 {
        self.kv_cache_bytes_per_token_per_layer() * u64::from(self.n_full_attention_layers())
    }

    /// Layers that run softmax attention (all of them but for hybrid models).
    pub fn n_full_attention_layers(&self) -> u32 {
        self.mixers
            .iter()
            .filter(|&&k| k == MixerKind::Full)
            .count() as u32
    }

    /// Layers that run linear attention.
    pub fn n_linear_attention_layers(&self) -> u32 {
        self.num_layers() - self.n_full_attention_layers()
    }

    /// Bytes one sequence's linear-attention state occupies in one layer, whatever its length: the
    /// recurrent state in its dtype and the last `conv_kernel − 1` convolution inputs (0 without
    /// linear attention).
    pub fn linear_state_bytes_per_layer(&self) -> u64 {
        self.linear_attention.as_ref().map_or(0, |linear| {
            linear.state_elements() * linear.state_dtype.bytes()
                + u64::from(linear.conv_kernel.saturating_sub(1))
                    * linear.conv_dim()
                    * self.dtype.bytes()
        })
    }

    /// Bytes of one token's hidden state, the A→F and F→A payload per layer (afd-spec §3.3).
    pub fn hidden_bytes_per_token(&self) -> u64 {
        u64::from(self.hidden_size) * self.dtype.bytes()
    }

    /// Parameters of one routed expert: gate, up and down projections.
    pub fn expert_params(&self) -> u64 {
        3 * u64::from(self.hidden_size) * u64::from(self.moe.intermediate_size)
    }

    /// Weight bytes of one routed expert.
    pub fn expert_weight_bytes(&self) -> u64 {
        self.expert_params() * self.weight_dtype.bytes()
    }

    /// Parameters of the fused shared-expert MLP of one MoE layer.
    pub fn shared_experts_params(&self) -> u64 {
        3 * u64::from(self.hidden_size) * u64::from(self.moe.shared_intermediate_size)
    }

    /// Parameters one decoder layer holds on the Attention side: the attention block and both
    /// layer norms (afd-spec §3.2).
    pub fn attention_params_per_layer(&self) -> u64 {
        self.attention_params_per_layer_wide() as u64
    }

    /// Parameters of the FFN side of one layer of the given kind.
    pub fn ffn_params(&self, kind: LayerKind) -> u64 {
        self.ffn_params_wide(kind) as u64
    }

    /// Parameters held by each AFD role.
    pub fn params_by_role(&self) -> RoleParams {
        RoleParams {
            attention: self.attention_side_wide() as u64,
            ffn: self.ffn_side_wide() as u64,
        }
    }

    /// All parameters of the model (without multi-token-prediction layers).
    pub fn total_params(&self) -> u64 {
        self.total_params_wide() as u64
    }

    /// Parameters a token's forward pass uses: everything but the routed experts it is not sent to
    /// and an untied embedding table (a lookup). DeepSeek's "activated parameters" count this way.
    pub fn active_params_per_token(&self) -> u64 {
        let moe = u128::from(self.n_moe_layers());
        let idle_experts = u128::from(
            self.moe
                .n_routed_experts
                .saturating_sub(self.moe.experts_per_token),
        );
        // A tied table is also the LM head, which every token uses.
        let lookup_only = if self.tie_word_embeddings {
            0
        } else {
            self.embedding_wide()
        };
        let unused = moe * idle_experts * u128::from(self.expert_params()) + lookup_only;
        self.total_params_wide().saturating_sub(unused) as u64
    }

    fn embedding_wide(&self) -> u128 {
        u128::from(self.vocab_size) * u128::from(self.hidden_size)
    }

    fn attention_params_per_layer_wide(&self) -> u128 {
        self.mixer_params_wide(MixerKind::Full)
    }

    /// Parameters of one layer's token mixer of `kind` and both layer norms.
    fn mixer_params_wide(&self, kind: MixerKind) -> u128 {
        let h = u128::from(self.hidden_size);
        let block = match (kind, &self.linear_attention) {
            (MixerKind::Linear, Some(linear)) => linear.params(h),
            _ => match &self.attention {
                Attention::Mla(mla) => mla.params(h),
                Attention::Gqa(gqa) => gqa.params(h),
            },
        };
        block + 2 * h
    }

    /// Parameters one layer of `kind` holds on the Attention side (its mixer and both norms).
    pub fn mixer_params(&self, kind: MixerKind) -> u64 {
        self.mixer_params_wide(kind) as u64
    }

    fn ffn_params_wide(&self, kind: LayerKind) -> u128 {
        let h = u128::from(self.hidden_size);
        match kind {
            LayerKind::Dense => 3 * h * u128::from(self.dense_intermediate_size),
            LayerKind::Moe => {
                let e = u128::from(self.moe.n_routed_experts);
                let router = h * e + if self.moe.score_correction_bias { e } else { 0 };
                let routed = e * 3 * h * u128::from(self.moe.intermediate_size);
                let shared = 3 * h * u128::from(self.moe.shared_intermediate_size);
                router + routed + shared
            }
        }
    }

    fn attention_side_wide(&self) -> u128 {
        let head = if self.tie_word_embeddings {
            0
        } else {
            self.embedding_wide()
        };
        let final_norm = u128::from(self.hidden_size);
        self.mixers
            .iter()
            .map(|&kind| self.mixer_params_wide(kind))
            .sum::<u128>()
            + self.embedding_wide()
            + head
            + final_norm
    }

    fn ffn_side_wide(&self) -> u128 {
        self.layers
            .iter()
            .map(|&kind| self.ffn_params_wide(kind))
            .sum()
    }

    fn total_params_wide(&self) -> u128 {
        self.attention_side_wide() + self.ffn_side_wide()
    }
}

impl MlaAttention {
    fn check(&self) -> Result<(), ModelConfigError> {
        in_range("num_attention_heads", self.num_heads, MAX_COUNT)?;
        if let Some(rank) = self.q_lora_rank {
            in_range("q_lora_rank", rank, MAX_SIZE)?;
        }
        in_range("kv_lora_rank", self.kv_lora_rank, MAX_SIZE)?;
        in_range("qk_nope_head_dim", self.qk_nope_head_dim, MAX_SIZE)?;
        in_range("qk_rope_head_dim", self.qk_rope_head_dim, MAX_SIZE)?;
        in_range("v_head_dim", self.v_head_dim, MAX_SIZE)
    }

    /// `q_proj` (or `q_a_proj`, its norm and `q_b_proj`), `kv_a_proj_with_mqa`, its norm,
    /// `kv_b_proj` and `o_proj`.
    fn params(&self, h: u128) -> u128 {
        let heads = u128::from(self.num_heads);
        let qk_head = u128::from(self.qk_nope_head_dim) + u128::from(self.qk_rope_head_dim);
        let kv_lora = u128::from(self.kv_lora_rank);
        let v_head = u128::from(self.v_head_dim);
        let q = match self.q_lora_rank {
            None => h * heads * qk_head,
            Some(rank) => {
                let rank = u128::from(rank);
                h * rank + rank + rank * heads * qk_head
            }
        };
        let kv_a = h * (kv_lora + u128::from(self.qk_rope_head_dim)) + kv_lora;
        let kv_b = kv_lora * heads * (u128::from(self.qk_nope_head_dim) + v_head);
        let o = heads * v_head * h;
        q + kv_a + kv_b + o
    }
}

impl GqaAttention {
    fn check(&self) -> Result<(), ModelConfigError> {
        in_range("num_attention_heads", self.num_heads, MAX_COUNT)?;
        in_range("num_key_value_heads", self.num_kv_heads, MAX_COUNT)?;
        in_range("head_dim", self.head_dim, MAX_SIZE)?;
        divides(
            "num_key_value_heads",
            self.num_kv_heads,
            "num_attention_heads",
            self.num_heads,
        )
    }

    /// q (with the output gate when set), k, v and o projections (with biases when set) and the
    /// per-head q/k norms.
    fn params(&self, h: u128) -> u128 {
        let q = u128::from(self.num_heads) * u128::from(self.head_dim);
        let q_out = if self.output_gate { 2 * q } else { q };
        let kv = u128::from(self.num_kv_heads) * u128::from(self.head_dim);
        let weights = h * q_out + 2 * h * kv + q * h;
        let biases = if self.bias { q_out + 2 * kv + h } else { 0 };
        let norms = if self.qk_norm {
            2 * u128::from(self.head_dim)
        } else {
            0
        };
        weights + biases + norms
    }
}

impl LinearAttention {
    fn check(&self) -> Result<(), ModelConfigError> {
        in_range("linear_num_key_heads", self.num_key_heads, MAX_COUNT)?;
        in_range("linear_num_value_heads", self.num_value_heads, MAX_COUNT)?;
        in_range("linear_key_head_dim", self.key_head_dim, MAX_SIZE)?;
        in_range("linear_value_head_dim", self.value_head_dim, MAX_SIZE)?;
        in_range("linear_conv_kernel_dim", self.conv_kernel, MAX_SIZE)?;
        divides(
            "linear_num_key_heads",
            self.num_key_heads,
            "linear_num_value_heads",
            self.num_value_heads,
        )
    }

    /// Width of the convolved q, k and v projections: two key widths and a value width.
    pub fn conv_dim(&self) -> u64 {
        2 * u64::from(self.num_key_heads) * u64::from(self.key_head_dim)
            + u64::from(self.num_value_heads) * u64::from(self.value_head_dim)
    }

    /// Elements of the recurrent state of one sequence in one layer: a `key × value` matrix per
    /// value head.
    pub fn state_elements(&self) -> u64 {
        u64::from(self.num_value_heads)
            * u64::from(self.key_head_dim)
            * u64::from(self.value_head_dim)
    }

    /// `in_proj_qkvz` (q, k, v and the output gate z), `in_proj_ba` (β and the decay per value
    /// head), the convolution, `dt_bias` and `A_log`, the gated norm and `out_proj`
    /// (transformers' `Qwen3NextGatedDeltaNet`; Qwen3.5 splits the same projections four ways).
    fn params(&self, h: u128) -> u128 {
        let key = u128::from(self.num_key_heads) * u128::from(self.key_head_dim);
        let value = u128::from(self.num_value_heads) * u128::from(self.value_head_dim);
        let v_heads = u128::from(self.num_value_heads);
        let qkvz = h * (2 * key + 2 * value);
        let ba = h * 2 * v_heads;
        let conv = u128::from(self.conv_dim()) * u128::from(self.conv_kernel);
        let decay = 2 * v_heads;
        let norm = u128::from(self.value_head_dim);
        let out = value * h;
        qkvz + ba + conv + decay + norm + out
    }
}

impl MoeConfig {
    fn check(&self) -> Result<(), ModelConfigError> {
        in_range("n_routed_experts", self.n_routed_experts, MAX_COUNT)?;
        in_range(
            "num_experts_per_tok",
            self.experts_per_token,
            self.n_routed_experts,
        )?;
        in_range("moe_intermediate_size", self.intermediate_size, MAX_SIZE)?;
        if self.n_shared_experts > MAX_COUNT {
            return Err(invalid(
                "n_shared_experts",
                format!("{} is above {MAX_COUNT}", self.n_shared_experts),
            ));
        }
        if (self.n_shared_experts == 0) != (self.shared_intermediate_size == 0)
            || self.shared_intermediate_size > MAX_SIZE
        {
            return Err(invalid(
                "n_shared_experts",
                format!(
                    "{} shared experts cannot have a fused width of {}",
                    self.n_shared_experts, self.shared_intermediate_size
                ),
            ));
        }
        in_range("n_group", self.n_groups, self.n_routed_experts)?;
        divides(
            "n_group",
            self.n_groups,
            "n_routed_experts",
            self.n_routed_experts,
        )?;
        in_range("topk_group", self.topk_groups, self.n_groups)?;
        let reachable = self.topk_groups * (self.n_routed_experts / self.n_groups);
        if self.experts_per_token > reachable {
            return Err(invalid(
                "num_experts_per_tok",
                format!(
                    "{} experts cannot be picked from {} groups of {}",
                    self.experts_per_token,
                    self.topk_groups,
                    self.n_routed_experts / self.n_groups
                ),
            ));
        }
        if !(self.routed_scaling_factor.is_finite() && self.routed_scaling_factor > 0.0) {
            return Err(invalid(
                "routed_scaling_factor",
                format!("{} must be finite and positive", self.routed_scaling_factor),
            ));
        }
        Ok(())
    }
}

impl Architecture {
    /// The class name Hugging Face configs list under `architectures`.
    pub fn hf_name(self) -> &'static str {
        match self {
            Architecture::DeepseekV2 => "DeepseekV2ForCausalLM",
            Architecture::DeepseekV3 => "DeepseekV3ForCausalLM",
            Architecture::Qwen3Moe => "Qwen3MoeForCausalLM",
            Architecture::Qwen3Next => "Qwen3NextForCausalLM",
            Architecture::Qwen3_5Moe => "Qwen3_5MoeForCausalLM",
        }
    }
}

impl fmt::Display for Architecture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.hf_name())
    }
}

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::F32 => 4,
            Dtype::F16 | Dtype::Bf16 => 2,
            Dtype::Fp8 => 1,
        }
    }

    /// Reads a `torch_dtype` / `dtype` value.
    fn from_config(field: &str, name: &str) -> Result<Dtype, ModelConfigError> {
        match name {
            "bfloat16" | "bf16" => Ok(Dtype::Bf16),
            "float16" | "fp16" | "half" => Ok(Dtype::F16),
            "float32" | "fp32" | "float" => Ok(Dtype::F32),
            "fp8" | "float8_e4m3fn" => Ok(Dtype::Fp8),
            _ => Err(invalid(
                field,
                format!("unknown dtype {name:?}; expected bfloat16, float16, float32 or fp8"),
            )),
        }
    }
}

/// Kinds of `n_layers` layers by a predicate on the 0-based layer index. Counts past
/// [`MAX_COUNT`] are cut one above it, so [`ModelConfig::check`] rejects them without allocating.
fn layer_kinds(n_layers: u32, is_moe: impl Fn(u32) -> bool) -> Vec<LayerKind> {
    (0..n_layers.min(MAX_COUNT + 1))
        .map(|layer| {
            if is_moe(layer) {
                LayerKind::Moe
            } else {
                LayerKind::Dense
            }
        })
        .collect()
}

fn invalid(field: &str, problem: String) -> ModelConfigError {
    ModelConfigError::Invalid {
        field: field.to_owned(),
        problem,
    }
}

/// Checks that `divisor` (named `field`, already known non-zero) divides `dividend` (named
/// `of`); the error names `field`.
fn divides(field: &str, divisor: u32, of: &str, dividend: u32) -> Result<(), ModelConfigError> {
    if dividend.is_multiple_of(divisor) {
        Ok(())
    } else {
        Err(invalid(
            field,
            format!("{divisor} does not divide {of} {dividend}"),
        ))
    }
}

/// Checks `1 ≤ value ≤ max`.
fn in_range(field: &str, value: u32, max: u32) -> Result<(), ModelConfigError> {
    if value == 0 {
        Err(invalid(field, "must be at least 1".to_owned()))
    } else if value > max {
        Err(invalid(field, format!("{value} is above {max}")))
    } else {
        Ok(())
    }
}

/// Deserializes a raw config struct from JSON, naming the key path on a type error.
fn from_value<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, ModelConfigError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = strip_position(&err.into_inner().to_string());
        ModelConfigError::Field {
            message: if path == "." {
                message
            } else {
                format!("field {path}: {message}")
            },
        }
    })
}

/// serde_json's messages end in " at line L column C"; the position is reported separately.
fn strip_position(message: &str) -> String {
    message
        .rfind(" at line ")
        .map_or(message, |at| &message[..at])
        .to_owned()
}

#[cfg(test)]
mod tests;
