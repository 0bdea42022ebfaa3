//! `--compilation-config` (the CUDA-graph part) and vLLM's rules for the capture sizes it ends up
//! with (afd-spec §5.1).
//!
//! Read from the JSON: `cudagraph_mode`, `cudagraph_capture_sizes` (old name `cuda_graph_sizes`),
//! `max_cudagraph_capture_size`, `pass_config.enable_sp`, and whether `level`/`mode` is set.
//! Other keys are kept as notes. Sizes are resolved as vLLM 0.26.0's
//! `VllmConfig._set_cudagraph_sizes` does (`vllm/config/vllm.py:1739-1897`):
//! - eager or mode `NONE`: no graphs;
//! - the max capture size is `--max-cudagraph-capture-size` or `min(2 × max_num_seqs, 512)`, then
//!   capped at `max_num_batched_tokens`;
//! - explicit sizes are de-duplicated, sizes above `max_num_batched_tokens` dropped, sorted;
//! - default sizes are `1, 2, 4`, then multiples of 8 below 256, then multiples of 16 from 256, all
//!   up to the max capture size, plus `max_num_batched_tokens` when it is at most that size;
//! - with `pass_config.enable_sp` and TP > 1, sizes not divisible by TP are dropped;
//! - the default list stops at [`MAX_DEFAULT_CAPTURE_SIZE`], a bound of this model, not vLLM's.
//!
//! When `cudagraph_mode` is absent the mode is vLLM V1's default `FULL_AND_PIECEWISE`
//! (upstream `vllm/config/compilation.py`, vLLM ≥ 0.11), which the plugin rejects (§1.6).

use std::fmt;

use serde_json::Value;

use crate::deployment::location::{Located, Location};

/// vLLM's `CUDAGraphMode` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CudaGraphMode {
    None,
    Piecewise,
    Full,
    FullDecodeOnly,
    FullAndPiecewise,
}

impl CudaGraphMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CudaGraphMode::None => "NONE",
            CudaGraphMode::Piecewise => "PIECEWISE",
            CudaGraphMode::Full => "FULL",
            CudaGraphMode::FullDecodeOnly => "FULL_DECODE_ONLY",
            CudaGraphMode::FullAndPiecewise => "FULL_AND_PIECEWISE",
        }
    }

    /// Case-insensitive, as vLLM accepts it.
    pub fn parse(text: &str) -> Option<CudaGraphMode> {
        Some(match text.trim().to_ascii_uppercase().as_str() {
            "NONE" => CudaGraphMode::None,
            "PIECEWISE" => CudaGraphMode::Piecewise,
            "FULL" => CudaGraphMode::Full,
            "FULL_DECODE_ONLY" => CudaGraphMode::FullDecodeOnly,
            "FULL_AND_PIECEWISE" => CudaGraphMode::FullAndPiecewise,
            _ => return None,
        })
    }
}

impl fmt::Display for CudaGraphMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The mode vLLM V1 uses when `cudagraph_mode` is not given and the role is not eager.
pub const DEFAULT_CUDAGRAPH_MODE: CudaGraphMode = CudaGraphMode::FullAndPiecewise;

/// The graph-related part of `--compilation-config` as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompilationConfig {
    pub cudagraph_mode: Option<Located<CudaGraphMode>>,
    pub cudagraph_capture_sizes: Option<Located<Vec<u32>>>,
    pub max_cudagraph_capture_size: Option<Located<u32>>,
    /// `pass_config.enable_sp` (sequence parallelism pass).
    pub enable_sp: Option<Located<bool>>,
    /// `mode` (or its old name `level`): the torch.compile mode, 0-3 (`CompilationMode`), which
    /// decides whether piecewise graphs can be captured.
    pub level: Option<Located<i64>>,
    /// Keys not interpreted here, with their locations.
    pub other_keys: Vec<Located<String>>,
}

/// A malformed key of `--compilation-config`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KeyError {
    pub key: String,
    pub location: Location,
    pub message: String,
}

/// Reads the keys above; `locate` maps a key path to its place in the input.
pub(crate) fn parse_compilation_config(
    value: &Value,
    locate: &dyn Fn(&str) -> Location,
) -> (CompilationConfig, Vec<KeyError>) {
    let mut config = CompilationConfig::default();
    let mut errors = Vec::new();
    let Some(object) = value.as_object() else {
        errors.push(KeyError {
            key: String::new(),
            location: locate(""),
            message: format!("--compilation-config must be a JSON object, got {value}"),
        });
        return (config, errors);
    };
    for (key, value) in object {
        let location = locate(key);
        let mut error = |message: String| {
            errors.push(KeyError {
                key: key.clone(),
                location,
                message,
            });
        };
        match key.as_str() {
            "cudagraph_mode" => match value.as_str().and_then(CudaGraphMode::parse) {
                Some(mode) => config.cudagraph_mode = Some(Located::new(mode, location)),
                None => error(format!(
                    "cudagraph_mode must be one of NONE, PIECEWISE, FULL, FULL_DECODE_ONLY, FULL_AND_PIECEWISE, got {value}"
                )),
            },
            "cudagraph_capture_sizes" | "cuda_graph_sizes" => match positive_list(value) {
                Some(sizes) if !sizes.is_empty() => {
                    config.cudagraph_capture_sizes = Some(Located::new(sizes, location));
                }
                Some(_) => error(format!("{key} must list at least one size")),
                None => error(format!(
                    "{key} must be a list of positive integers, got {value}"
                )),
            },
            "max_cudagraph_capture_size" => match positive_u32(value) {
                Some(size) => {
                    config.max_cudagraph_capture_size = Some(Located::new(size, location))
                }
                None => error(format!(
                    "max_cudagraph_capture_size must be a positive integer, got {value}"
                )),
            },
            "pass_config" => {
                match value.as_object() {
                    Some(pass) => {
                        if let Some(enable_sp) = pass.get("enable_sp") {
                            let location = locate("pass_config.enable_sp");
                            match enable_sp.as_bool() {
                            Some(b) => config.enable_sp = Some(Located::new(b, location)),
                            None => errors.push(KeyError {
                                key: "pass_config.enable_sp".to_owned(),
                                location,
                                message: format!("pass_config.enable_sp must be true or false, got {enable_sp}"),
                            }),
                        }
                        }
                    }
                    None => error(format!("pass_config must be a JSON object, got {value}")),
                }
            }
            "level" | "mode" => match value.as_i64().filter(|m| (0..=3).contains(m)) {
                Some(level) => config.level = Some(Located::new(level, location)),
                None => error(format!(
                    "{key} must be a compilation mode 0 (NONE), 1 (STOCK_TORCH_COMPILE), 2 (DYNAMO_TRACE_ONCE) or 3 (VLLM_COMPILE), got {value}"
                )),
            },
            _ => config.other_keys.push(Located::new(key.clone(), location)),
        }
    }
    (config, errors)
}

/// A positive integer, or a string of one: pydantic's lax mode, which validates vLLM's
/// `CompilationConfig` (`vllm/engine/arg_utils.py:330-337`), takes `"8"` for 8 (the strings of a
/// dotted `-cc.cudagraph_capture_sizes+ 8,16` list).
fn positive_u32(value: &Value) -> Option<u32> {
    let number = match value {
        Value::String(text) => text.trim().parse::<u64>().ok(),
        _ => value.as_u64(),
    };
    number
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v > 0)
}

fn positive_list(value: &Value) -> Option<Vec<u32>> {
    value.as_array()?.iter().map(positive_u32).collect()
}

/// Inputs of vLLM's capture-size resolution for one role.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SizeInputs<'a> {
    pub graphs_on: bool,
    pub explicit_sizes: Option<&'a [u32]>,
    pub explicit_max: Option<u32>,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub sequence_parallel_tp: Option<u32>,
}

/// Largest size the default list is generated up to. vLLM would list every multiple of 16 up to
/// an explicit `--max-cudagraph-capture-size`; past this bound (far beyond any real batch) the list
/// stops, so absurd inputs cannot exhaust memory.
pub const MAX_DEFAULT_CAPTURE_SIZE: u32 = 1 << 16;

/// The capture sizes vLLM ends up with, ascending (empty when graphs are off).
pub(crate) fn resolve_capture_sizes(inputs: SizeInputs<'_>) -> Vec<u32> {
    if !inputs.graphs_on {
        return Vec::new();
    }
    let max_tokens = inputs.max_num_batched_tokens;
    let max_size = inputs
        .explicit_max
        .unwrap_or_else(|| inputs.max_num_seqs.saturating_mul(2).min(512))
        .min(max_tokens)
        .min(MAX_DEFAULT_CAPTURE_SIZE);
    let mut sizes: Vec<u32> = match inputs.explicit_sizes {
        Some(explicit) => explicit
            .iter()
            .copied()
            .filter(|&s| s <= max_tokens)
            .collect(),
        None => {
            let mut sizes: Vec<u32> = [1, 2, 4].into_iter().filter(|&s| s <= max_size).collect();
            if max_size >= 8 {
                sizes.extend((8..(max_size.saturating_add(1)).min(256)).step_by(8));
            }
            if max_size >= 256 {
                sizes.extend((256..=max_size).step_by(16));
            }
            // `max_num_batched_tokens` itself is captured when it fits (`vllm/config/vllm.py:1838-1843`).
            if max_tokens <= max_size && !sizes.contains(&max_tokens) {
                sizes.push(max_tokens);
            }
            sizes
        }
    };
    if let Some(tp) = inputs.sequence_parallel_tp.filter(|&tp| tp > 1) {
        sizes.retain(|s| s % tp == 0);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

#[cfg(test)]
mod tests;
