//! Pipeline results: step times of real Attention→FFN→Attention steps measured by `afd-probe pipeline`.
//!
//! Each record is one configuration (tokens, context, DBO, graph) run for many steps on real GPUs; the
//! simulator replays the same configurations from a calibration profile and is judged against these step
//! times (issue "Fidelity"). This module only defines, reads, writes and checks the format: it computes
//! nothing from the samples.
//!
//! The provenance block is the same [`Provenance`] type calibration profiles carry, so a results file and
//! the profile measured beside it can be matched by GPU, driver, NCCL and date.

use serde::{Deserialize, Serialize};

use crate::json_at::{self, JsonAt};

use crate::calibration::{Provenance, SampleStats};

/// Schema version written by this build; readers accept exactly this version.
pub const PIPELINE_SCHEMA_VERSION: u32 = 1;

/// The `format` tag of a pipeline results file.
pub const PIPELINE_FORMAT: &str = "afd-pipeline-results";

/// A pipeline results file as stored on disk (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineResults {
    /// Always [`PIPELINE_FORMAT`].
    pub format: String,
    /// Always [`PIPELINE_SCHEMA_VERSION`] for files this build reads.
    pub schema_version: u32,
    pub provenance: Provenance,
    pub model: PipelineModel,
    pub setup: PipelineSetup,
    pub records: Vec<PipelineRecord>,
}

/// The model whose layers the pipeline ran: its name and the dimensions that fix every shape.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineModel {
    /// `DeepSeek-V2-Lite`, or the name read from the config file.
    pub name: String,
    pub hidden_size: u32,
    /// Decoder layers; every one crosses the wire (afd-spec §3.2).
    pub num_layers: u32,
    /// Leading dense layers (`first_k_dense_replace`), run as a dense MLP on the FFN side.
    pub dense_layers: u32,
    pub n_routed_experts: u32,
    pub experts_per_token: u32,
    pub moe_intermediate_size: u32,
    pub dense_intermediate_size: u32,
    /// Width of the fused shared-expert MLP (experts × moe_intermediate_size); 0 when there is none.
    pub shared_intermediate_size: u32,
    pub num_heads: u32,
    pub kv_lora_rank: u32,
    pub qk_nope_head_dim: u32,
    pub qk_rope_head_dim: u32,
    pub v_head_dim: u32,
}

/// How the pipeline was laid out and driven; the same for every record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSetup {
    /// GPU ordinal of the Attention rank.
    pub attention_gpu: u32,
    /// GPU ordinal of the FFN rank.
    pub ffn_gpu: u32,
    /// `threads` (one thread per GPU in one process) or `processes` (one process per GPU).
    pub ranks_layout: String,
    /// Routing distribution (`uniform`, `power-law:1.0`), drawn on the host per token and layer.
    pub routing: String,
    pub seed: u64,
    /// Untimed steps before the timed ones, per configuration.
    pub warmup_steps: u32,
    /// How the step time is taken (events on the Attention stream around the step, …).
    pub timing: String,
}

/// One configuration and its measured step times.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineRecord {
    /// Tokens (rows) per step on the Attention rank; one decode token per sequence.
    pub tokens: u32,
    /// KV-cache length of every sequence, tokens.
    pub context: u32,
    /// Two ubatches in the afd-spec §3.6 issue order.
    pub dbo: bool,
    /// The whole step (all layers, both sides, control message excluded) replayed as one CUDA graph per side.
    pub graph: bool,
    /// Rows of each ubatch (one entry without DBO, two with).
    pub ubatch_tokens: Vec<u32>,
    /// Layers per step (all of them cross the wire).
    pub layers: u32,
    /// Timed steps.
    pub steps: u32,
    /// Bytes of the JSON control payload sent before layer 0 (after its 8-byte size).
    pub control_payload_bytes: u32,
    /// Summary of `samples_us`.
    pub step_us: SampleStats,
    /// Every timed step, microseconds, in measurement order.
    pub samples_us: Vec<f64>,
    /// Median GPU-busy time of the Attention rank per step, µs, where measured.
    #[serde(default)]
    pub attention_busy_us: Option<f64>,
    /// Median GPU-busy time of the FFN rank per step, µs, where measured.
    #[serde(default)]
    pub ffn_busy_us: Option<f64>,
    /// The routing drawn for each MoE layer and ubatch, as the FFN GEMMs saw it.
    #[serde(default)]
    pub routing: Vec<LayerRouting>,
}

/// Shape of the routed-expert GEMMs of one MoE layer and ubatch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerRouting {
    pub layer: u32,
    pub ubatch: u32,
    /// Experts that received at least one token.
    pub active_experts: u32,
    /// The largest number of tokens any expert received; every active expert's GEMM is padded to it.
    pub max_tokens_per_expert: u32,
}

/// Why a pipeline results file could not be read. Every variant names the place in the file.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("pipeline results are not valid JSON for this schema {0}")]
    Json(#[from] JsonAt),
    #[error("pipeline results have format {found:?}, expected {expected:?}")]
    Format {
        found: String,
        expected: &'static str,
    },
    #[error("pipeline results have schema_version {found}, this build reads {expected}")]
    SchemaVersion { found: u32, expected: u32 },
    #[error("pipeline results field {path}: {problem}")]
    Invalid { path: String, problem: String },
}

impl PipelineResults {
    /// A new results file of the current schema with no records.
    pub fn new(
        provenance: Provenance,
        model: PipelineModel,
        setup: PipelineSetup,
    ) -> PipelineResults {
        PipelineResults {
            format: PIPELINE_FORMAT.to_owned(),
            schema_version: PIPELINE_SCHEMA_VERSION,
            provenance,
            model,
            setup,
            records: Vec::new(),
        }
    }

    /// Parses and checks a results file; errors name the offending field path.
    pub fn from_json(text: &str) -> Result<PipelineResults, PipelineError> {
        let results: PipelineResults = json_at::from_str(text)?;
        results.check()?;
        Ok(results)
    }

    /// Pretty JSON with a trailing newline; stable for the same results.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .expect("pipeline results hold only strings, numbers, booleans and lists");
        text.push('\n');
        text
    }

    /// Checks the invariants serde cannot: format tag, version, shapes, finite ordered statistics.
    pub fn check(&self) -> Result<(), PipelineError> {
        if self.format != PIPELINE_FORMAT {
            return Err(PipelineError::Format {
                found: self.format.clone(),
                expected: PIPELINE_FORMAT,
            });
        }
        if self.schema_version != PIPELINE_SCHEMA_VERSION {
            return Err(PipelineError::SchemaVersion {
                found: self.schema_version,
                expected: PIPELINE_SCHEMA_VERSION,
            });
        }
        let model = &self.model;
        for (name, value) in [
            ("hidden_size", model.hidden_size),
            ("num_layers", model.num_layers),
        ] {
            if value == 0 {
                return Err(invalid(format!("model.{name}"), "must be at least 1"));
            }
        }
        if model.dense_layers > model.num_layers {
            return Err(invalid(
                "model.dense_layers",
                format!(
                    "{} dense layers exceed num_layers {}",
                    model.dense_layers, model.num_layers
                ),
            ));
        }
        for (r, record) in self.records.iter().enumerate() {
            record.check(&format!("records[{r}]"))?;
        }
        Ok(())
    }

    /// The record of one configuration, if measured.
    pub fn find(
        &self,
        tokens: u32,
        context: u32,
        dbo: bool,
        graph: bool,
    ) -> Option<&PipelineRecord> {
        self.records.iter().find(|record| {
            record.tokens == tokens
                && record.context == context
                && record.dbo == dbo
                && record.graph == graph
        })
    }
}

impl PipelineRecord {
    fn check(&self, path: &str) -> Result<(), PipelineError> {
        if self.tokens == 0 {
            return Err(invalid(format!("{path}.tokens"), "must be at least 1"));
        }
        let expected_ubatches = if self.dbo { 2 } else { 1 };
        if self.ubatch_tokens.len() != expected_ubatches {
            return Err(invalid(
                format!("{path}.ubatch_tokens"),
                format!(
                    "has {} entries, expected {expected_ubatches} (dbo = {})",
                    self.ubatch_tokens.len(),
                    self.dbo
                ),
            ));
        }
        let sum: u64 = self.ubatch_tokens.iter().map(|&t| u64::from(t)).sum();
        if sum != u64::from(self.tokens) || self.ubatch_tokens.contains(&0) {
            return Err(invalid(
                format!("{path}.ubatch_tokens"),
                format!(
                    "{:?} must be non-empty ubatches summing to tokens {}",
                    self.ubatch_tokens, self.tokens
                ),
            ));
        }
        if self.samples_us.len() != self.steps as usize {
            return Err(invalid(
                format!("{path}.samples_us"),
                format!(
                    "has {} samples but steps is {}",
                    self.samples_us.len(),
                    self.steps
                ),
            ));
        }
        if u64::from(self.step_us.n) != u64::from(self.steps) {
            return Err(invalid(
                format!("{path}.step_us.n"),
                format!("{} does not match steps {}", self.step_us.n, self.steps),
            ));
        }
        check_stats(&self.step_us, &format!("{path}.step_us"))?;
        if let Some(i) = self
            .samples_us
            .iter()
            .position(|x| !x.is_finite() || *x < 0.0)
        {
            return Err(invalid(
                format!("{path}.samples_us[{i}]"),
                format!("sample {} must be finite and >= 0", self.samples_us[i]),
            ));
        }
        for (name, value) in [
            ("attention_busy_us", self.attention_busy_us),
            ("ffn_busy_us", self.ffn_busy_us),
        ] {
            if let Some(value) = value
                && (!value.is_finite() || value < 0.0)
            {
                return Err(invalid(
                    format!("{path}.{name}"),
                    format!("{value} must be finite and >= 0"),
                ));
            }
        }
        for (i, routing) in self.routing.iter().enumerate() {
            if routing.layer >= self.layers {
                return Err(invalid(
                    format!("{path}.routing[{i}].layer"),
                    format!(
                        "layer {} is not below layers {}",
                        routing.layer, self.layers
                    ),
                ));
            }
            if routing.ubatch as usize >= self.ubatch_tokens.len() {
                return Err(invalid(
                    format!("{path}.routing[{i}].ubatch"),
                    format!(
                        "ubatch {} does not exist ({} ubatches)",
                        routing.ubatch,
                        self.ubatch_tokens.len()
                    ),
                ));
            }
        }
        Ok(())
    }
}

fn check_stats(stats: &SampleStats, path: &str) -> Result<(), PipelineError> {
    let fields = [
        ("min_us", stats.min_us),
        ("median_us", stats.median_us),
        ("p99_us", stats.p99_us),
        ("max_us", stats.max_us),
        ("mean_us", stats.mean_us),
    ];
    for (name, value) in fields {
        if !value.is_finite() || value < 0.0 {
            return Err(invalid(
                format!("{path}.{name}"),
                format!("{value} must be finite and >= 0"),
            ));
        }
    }
    if stats.n == 0 {
        return Err(invalid(
            format!("{path}.n"),
            "must count at least one sample",
        ));
    }
    if !(stats.min_us <= stats.median_us
        && stats.median_us <= stats.p99_us
        && stats.p99_us <= stats.max_us)
    {
        return Err(invalid(
            path,
            format!(
                "expected min <= median <= p99 <= max, got {} / {} / {} / {}",
                stats.min_us, stats.median_us, stats.p99_us, stats.max_us
            ),
        ));
    }
    Ok(())
}

fn invalid(path: impl Into<String>, problem: impl Into<String>) -> PipelineError {
    PipelineError::Invalid {
        path: path.into(),
        problem: problem.into(),
    }
}

#[cfg(test)]
mod tests;
