//! The model dimensions the probes need, read from a Hugging Face `config.json` or built in.
//!
//! Only the few fields that fix kernel shapes are read (hidden size, layers, experts, MLA ranks), with
//! `serde_json::Value` so this crate derives no serde types. The built-in model is DeepSeek-V2-Lite
//! (afd-spec §3.1). A fuller parser is being added to `afd-traces` (`model_config.rs`); this module
//! keeps the probe's needs in one place so it can be swapped for that one.

use std::path::Path;

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
    #[error("cannot read model config {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "model config {source_name} is not valid JSON (line {line}, column {column}): {message}"
    )]
    Json {
        source_name: String,
        line: usize,
        column: usize,
        message: String,
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
    /// DeepSeek-V2-Lite as afd-spec §3.1 gives it.
    pub fn deepseek_v2_lite() -> ModelShape {
        ModelShape {
            name: "DeepSeek-V2-Lite".to_owned(),
            hidden_size: 2048,
            num_layers: 27,
            dense_layers: 1,
            n_routed_experts: 64,
            experts_per_token: 6,
            moe_intermediate_size: 1408,
            dense_intermediate_size: 10944,
            shared_intermediate_size: 2 * 1408,
            num_heads: 16,
            mla: Some(MlaShape {
                kv_lora_rank: 512,
                qk_nope_head_dim: 128,
                qk_rope_head_dim: 64,
                v_head_dim: 128,
                q_lora_rank: None,
            }),
            rms_norm_eps: 1e-6,
        }
    }

    /// Reads a `config.json` file; the model is named after `_name_or_path`, else the file's folder.
    pub fn from_file(path: &Path) -> Result<ModelShape, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModelError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let fallback_name = path
            .parent()
            .and_then(Path::file_name)
            .map(|name| name.to_string_lossy().into_owned())
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| path.display().to_string());
        ModelShape::from_config_json(&text, &path.display().to_string(), &fallback_name)
    }

    /// Parses the text of a Hugging Face `config.json`. `source_name` appears in errors.
    pub fn from_config_json(
        text: &str,
        source_name: &str,
        fallback_name: &str,
    ) -> Result<ModelShape, ModelError> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|err| ModelError::Json {
                source_name: source_name.to_owned(),
                line: err.line(),
                column: err.column(),
                message: err.to_string(),
            })?;
        let reader = Reader {
            value: &value,
            source_name,
        };
        if !value.is_object() {
            return Err(reader.field_error("(root)", "must be a JSON object"));
        }
        let name = value
            .get("_name_or_path")
            .and_then(serde_json::Value::as_str)
            .and_then(|path| path.rsplit('/').next())
            .filter(|name| !name.is_empty())
            .unwrap_or(fallback_name)
            .to_owned();
        let hidden_size = reader.required("hidden_size")?;
        let num_layers = reader.required("num_hidden_layers")?;
        let num_heads = reader.required("num_attention_heads")?;
        let n_routed_experts = match reader.optional("n_routed_experts")? {
            Some(n) => n,
            None => reader.required("num_experts")?,
        };
        let experts_per_token = reader.required("num_experts_per_tok")?;
        let moe_intermediate_size = reader.required("moe_intermediate_size")?;
        let dense_intermediate_size = reader
            .optional("intermediate_size")?
            .unwrap_or(moe_intermediate_size);
        let dense_layers = reader.optional("first_k_dense_replace")?.unwrap_or(0);
        if let Some(step) = reader.optional("moe_layer_freq")?
            && step != 1
        {
            return Err(
                reader.field_error("moe_layer_freq", "only 1 (every layer MoE) is supported")
            );
        }
        if let Some(step) = reader.optional("decoder_sparse_step")?
            && step != 1
        {
            return Err(reader.field_error(
                "decoder_sparse_step",
                "only 1 (every layer MoE) is supported",
            ));
        }
        if let Some(list) = value.get("mlp_only_layers")
            && list.as_array().is_none_or(|items| !items.is_empty())
        {
            return Err(reader.field_error("mlp_only_layers", "must be an empty list"));
        }
        let shared_intermediate_size = match reader.optional_from("n_shared_experts", 0)? {
            Some(n) => n * moe_intermediate_size,
            None => reader
                .optional("shared_expert_intermediate_size")?
                .unwrap_or(0),
        };
        let mla = match reader.optional("kv_lora_rank")? {
            Some(kv_lora_rank) => Some(MlaShape {
                kv_lora_rank,
                qk_nope_head_dim: reader.required("qk_nope_head_dim")?,
                qk_rope_head_dim: reader.required("qk_rope_head_dim")?,
                v_head_dim: reader.required("v_head_dim")?,
                q_lora_rank: reader.optional("q_lora_rank")?,
            }),
            None => None,
        };
        let rms_norm_eps = match value.get("rms_norm_eps") {
            None | Some(serde_json::Value::Null) => 1e-6,
            Some(v) => v
                .as_f64()
                .filter(|eps| eps.is_finite() && *eps > 0.0)
                .ok_or_else(|| reader.field_error("rms_norm_eps", "must be a positive number"))?,
        };
        let shape = ModelShape {
            name,
            hidden_size,
            num_layers,
            dense_layers,
            n_routed_experts,
            experts_per_token,
            moe_intermediate_size,
            dense_intermediate_size,
            shared_intermediate_size,
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

struct Reader<'a> {
    value: &'a serde_json::Value,
    source_name: &'a str,
}

impl Reader<'_> {
    /// A positive integer field that must be present.
    fn required(&self, field: &str) -> Result<usize, ModelError> {
        self.optional(field)?
            .ok_or_else(|| self.field_error(field, "missing"))
    }

    /// A positive integer field; `None` when absent or `null`.
    fn optional(&self, field: &str) -> Result<Option<usize>, ModelError> {
        self.optional_from(field, 1)
    }

    /// An integer field of at least `min`; `None` when absent or `null`.
    fn optional_from(&self, field: &str, min: u64) -> Result<Option<usize>, ModelError> {
        const MAX: u64 = 1 << 24;
        match self.value.get(field) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n >= min && *n <= MAX)
                .map(|n| Some(n as usize))
                .ok_or_else(|| {
                    self.field_error(field, &format!("{v} is not an integer in {min}..={MAX}"))
                }),
        }
    }

    fn field_error(&self, field: &str, problem: &str) -> ModelError {
        ModelError::Field {
            source_name: self.source_name.to_owned(),
            field: field.to_owned(),
            problem: problem.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
