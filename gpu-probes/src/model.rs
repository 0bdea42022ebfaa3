//! The model dimensions the probes need, from `afd-traces`' model configs (a Hugging Face
//! `config.json`, DeepSeek's inference config, or a model shipped under `traces/data/models/`).
//!
//! [`ModelShape`] flattens [`afd_traces::model_config::ModelConfig`] into the few sizes that fix the
//! probe's kernel shapes and adds the probe's own limits (top-k kernel width, 16-byte vectors, the MLA
//! kernel's 512 + 64 cache row). The built-in model is DeepSeek-V2-Lite (afd-spec §3.1).

use std::path::Path;

use afd_traces::model_config::{Attention, LayerKind, ModelConfig, builtin_model};

/// Shapes of one MoE decoder model, as the probes build its layers.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    /// `DeepSeek-V2-Lite`, or the name read from the config file.
    pub name: String,
    pub hidden_size: usize,
    pub num_layers: usize,
    /// Leading dense-MLP layers (`first_k_dense_replace`); the rest are MoE layers.
    pub dense_layers: usize,
    pub n_routed_experts: usize,
    pub experts_per_token: usize,
    pub moe_intermediate_size: usize,
    pub dense_intermediate_size: usize,
    /// Width of the fused shared-expert MLP; 0 when the model has none.
    pub shared_intermediate_size: usize,
    pub num_heads: usize,
    /// Multi-head latent attention dimensions; `None` for other attention kinds.
    pub mla: Option<MlaShape>,
    pub rms_norm_eps: f64,
}

/// Multi-head latent attention (DeepSeek-V2/V3) dimensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlaShape {
    pub kv_lora_rank: usize,
    pub qk_nope_head_dim: usize,
    pub qk_rope_head_dim: usize,
    pub v_head_dim: usize,
    /// `None` when queries are projected directly (DeepSeek-V2-Lite).
    pub q_lora_rank: Option<usize>,
}

/// Why a model config could not be used; names the file and field.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Unreadable, not UTF-8, or larger than [`afd_traces::input::InputKind::MODEL_CONFIG`].
    #[error(transparent)]
    Read(#[from] afd_traces::input::InputError),
    #[error("{source_name}: {source}")]
    Config {
        source_name: String,
        #[source]
        source: afd_traces::model_config::ModelConfigError,
    },
    #[error("model config {source_name}, field `{field}`: {problem}")]
    Field {
        source_name: String,
        field: String,
        problem: String,
    },
}

/// The largest `num_experts_per_tok` the top-k kernel handles.
pub const MAX_EXPERTS_PER_TOKEN: usize = 16;

/// The largest routed-expert count the top-k kernel handles.
pub const MAX_ROUTED_EXPERTS: usize = 1024;

impl ModelShape {
    /// DeepSeek-V2-Lite (afd-spec §3.1), from the config shipped in `afd-traces`.
    pub fn deepseek_v2_lite() -> ModelShape {
        ModelShape::builtin("deepseek-v2-lite")
            .and_then(Result::ok)
            .expect("afd-traces ships a valid DeepSeek-V2-Lite config")
    }

    /// A model shipped under `traces/data/models/` (`deepseek-v2-lite`, `qwen3-30b-a3b`, …).
    pub fn builtin(name: &str) -> Option<Result<ModelShape, ModelError>> {
        let text = builtin_model(name)?;
        let display = match name.to_ascii_lowercase().as_str() {
            "deepseek-v2-lite" => "DeepSeek-V2-Lite".to_owned(),
            "qwen3-30b-a3b" => "Qwen3-30B-A3B".to_owned(),
            "deepseek-v3" => "DeepSeek-V3".to_owned(),
            "deepseek-r1-0528" => "DeepSeek-R1-0528".to_owned(),
            other => other.to_owned(),
        };
        Some(ModelShape::from_config_json(text, name, &display))
    }

    /// A built-in model name, or else a path to a config file.
    pub fn from_name_or_file(arg: &str) -> Result<ModelShape, ModelError> {
        match ModelShape::builtin(arg) {
            Some(shape) if !arg.contains('/') => shape,
            _ => ModelShape::from_file(Path::new(arg)),
        }
    }

    /// Reads a config file; the model is named after `_name_or_path`, else the file's folder.
    pub fn from_file(path: &Path) -> Result<ModelShape, ModelError> {
        let text = afd_traces::input::read_text(path, afd_traces::input::InputKind::MODEL_CONFIG)?;
        let fallback_name = path
            .parent()
            .and_then(Path::file_name)
            .map(|name| name.to_string_lossy().into_owned())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| path.display().to_string());
        ModelShape::from_config_json(&text, &path.display().to_string(), &fallback_name)
    }

    /// Parses a config's text (either format `afd-traces` reads). `source_name` appears in errors.
    pub fn from_config_json(
        text: &str,
        source_name: &str,
        fallback_name: &str,
    ) -> Result<ModelShape, ModelError> {
        let config = ModelConfig::from_json(text).map_err(|source| ModelError::Config {
            source_name: source_name.to_owned(),
            source,
        })?;
        // Fields the shared parser does not keep: the display name and the RMSNorm epsilon.
        let raw: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        let name = raw
            .get("_name_or_path")
            .and_then(serde_json::Value::as_str)
            .and_then(|path| path.rsplit('/').next())
            .filter(|name| !name.is_empty())
            .unwrap_or(fallback_name)
            .to_owned();
        let rms_norm_eps = raw
            .get("rms_norm_eps")
            .and_then(serde_json::Value::as_f64)
            .filter(|eps| eps.is_finite() && *eps > 0.0)
            .unwrap_or(1e-6);
        ModelShape::from_config(&config, name, rms_norm_eps, source_name)
    }

    /// Flattens a checked config; dense layers must lead (DeepSeek's `first_k_dense_replace`).
    pub fn from_config(
        config: &ModelConfig,
        name: String,
        rms_norm_eps: f64,
        source_name: &str,
    ) -> Result<ModelShape, ModelError> {
        let dense_layers = config
            .layers
            .iter()
            .take_while(|kind| **kind == LayerKind::Dense)
            .count();
        if config.layers[dense_layers..].contains(&LayerKind::Dense) {
            return Err(ModelError::Field {
                source_name: source_name.to_owned(),
                field: "layers".to_owned(),
                problem: "dense layers after the first MoE layer are not modelled: the probes run leading dense layers only".to_owned(),
            });
        }
        let (num_heads, mla) = match &config.attention {
            Attention::Mla(m) => (
                m.num_heads as usize,
                Some(MlaShape {
                    kv_lora_rank: m.kv_lora_rank as usize,
                    qk_nope_head_dim: m.qk_nope_head_dim as usize,
                    qk_rope_head_dim: m.qk_rope_head_dim as usize,
                    v_head_dim: m.v_head_dim as usize,
                    q_lora_rank: m.q_lora_rank.map(|r| r as usize),
                }),
            ),
            Attention::Gqa(g) => (g.num_heads as usize, None),
        };
        let moe = &config.moe;
        let shape = ModelShape {
            name,
            hidden_size: config.hidden_size as usize,
            num_layers: config.layers.len(),
            dense_layers,
            n_routed_experts: moe.n_routed_experts as usize,
            experts_per_token: moe.experts_per_token as usize,
            moe_intermediate_size: moe.intermediate_size as usize,
            dense_intermediate_size: config.dense_intermediate_size as usize,
            shared_intermediate_size: moe.shared_intermediate_size as usize,
            num_heads,
            mla,
            rms_norm_eps,
        };
        shape.validate(source_name)?;
        Ok(shape)
    }

    /// Number of MoE layers (all but the leading dense ones).
    pub fn moe_layers(&self) -> usize {
        self.num_layers - self.dense_layers
    }

    /// Bytes of one routed expert's weights (gate, up and down), bf16.
    pub fn expert_bytes(&self) -> usize {
        3 * self.hidden_size * self.moe_intermediate_size * 2
    }

    /// The MLA shape, or an error saying the attention probes need one.
    pub fn require_mla(&self) -> Result<MlaShape, ModelError> {
        let mla = self.mla.ok_or_else(|| ModelError::Field {
            source_name: self.name.clone(),
            field: "kv_lora_rank".to_owned(),
            problem: "missing: the attention and pipeline probes model multi-head latent attention (DeepSeek-V2/V3) only"
                .to_owned(),
        })?;
        let unsupported = |field: &str, problem: String| ModelError::Field {
            source_name: self.name.clone(),
            field: field.to_owned(),
            problem,
        };
        if mla.kv_lora_rank != 512 {
            return Err(unsupported(
                "kv_lora_rank",
                format!(
                    "{} is not supported: the MLA decode kernel is built for 512",
                    mla.kv_lora_rank
                ),
            ));
        }
        if mla.qk_rope_head_dim != 64 {
            return Err(unsupported(
                "qk_rope_head_dim",
                format!(
                    "{} is not supported: the MLA decode kernel is built for 64",
                    mla.qk_rope_head_dim
                ),
            ));
        }
        if !self.num_heads.is_multiple_of(16) {
            return Err(unsupported(
                "num_attention_heads",
                format!(
                    "{} is not a multiple of 16 (heads per MLA tile)",
                    self.num_heads
                ),
            ));
        }
        if mla.q_lora_rank.is_some() {
            return Err(unsupported(
                "q_lora_rank",
                "query LoRA is not modelled: the probe projects queries directly (DeepSeek-V2-Lite)".to_owned(),
            ));
        }
        Ok(mla)
    }

    fn validate(&self, source_name: &str) -> Result<(), ModelError> {
        let err = |field: &str, problem: String| ModelError::Field {
            source_name: source_name.to_owned(),
            field: field.to_owned(),
            problem,
        };
        if self.dense_layers > self.num_layers {
            return Err(err(
                "first_k_dense_replace",
                format!(
                    "{} exceeds num_hidden_layers {}",
                    self.dense_layers, self.num_layers
                ),
            ));
        }
        if self.experts_per_token > self.n_routed_experts {
            return Err(err(
                "num_experts_per_tok",
                format!(
                    "{} exceeds the {} routed experts",
                    self.experts_per_token, self.n_routed_experts
                ),
            ));
        }
        if self.experts_per_token > MAX_EXPERTS_PER_TOKEN {
            return Err(err(
                "num_experts_per_tok",
                format!(
                    "{} exceeds the probe's limit of {MAX_EXPERTS_PER_TOKEN}",
                    self.experts_per_token
                ),
            ));
        }
        if self.n_routed_experts > MAX_ROUTED_EXPERTS {
            return Err(err(
                "n_routed_experts",
                format!(
                    "{} exceeds the probe's limit of {MAX_ROUTED_EXPERTS}",
                    self.n_routed_experts
                ),
            ));
        }
        for (field, value) in [
            ("hidden_size", self.hidden_size),
            ("moe_intermediate_size", self.moe_intermediate_size),
            ("intermediate_size", self.dense_intermediate_size),
            (
                "shared_expert_intermediate_size",
                self.shared_intermediate_size,
            ),
        ] {
            if !value.is_multiple_of(8) {
                return Err(err(
                    field,
                    format!("{value} is not a multiple of 8 (16-byte bf16 vectors)"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
