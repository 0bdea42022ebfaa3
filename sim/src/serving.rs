//! A plain numeric view of an AFD deployment: what the simulator needs of the two `vllm serve`
//! command lines (parallel layout per role, batch limits, DBO, CUDA graphs, memory, GPU).
//!
//! The typed, validated `Deployment` parsed from recipes and flags lives in `deployment.rs` (branch
//! `foundation`); this view is built from it or by hand (tests, sweeps), and checks only what the
//! timing model itself relies on.

use crate::deployment::{CudaGraphMode, Deployment, RoleConfig};
use crate::model::cost::CostLayout;
use crate::model::hardware::GpuKind;
use crate::model::kv_cache::{DEFAULT_RESERVE_BYTES, FLASHMLA_BLOCK_SIZE};
use crate::topology::{RuleSet, Topology, TopologyError};

/// Parallel layout of one role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoleLayout {
    pub dp: u32,
    pub tp: u32,
    /// `--enable-expert-parallel`.
    pub expert_parallel: bool,
}

impl RoleLayout {
    /// Ranks of the role: `dp × tp` (PCP is 1 in every GPU recipe).
    pub fn ranks(self) -> u32 {
        self.dp * self.tp
    }
}

/// `--enable-dbo` with its thresholds (afd-spec §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DboConfig {
    pub decode_threshold: u32,
    pub prefill_threshold: u32,
}

/// CUDA-graph mode (afd-spec §5.1): AFD accepts only eager or `FULL_DECODE_ONLY`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphMode {
    Eager,
    /// Full graphs for uniform-decode batches up to the largest capture size, padded to the next
    /// capture size. Invariant: sizes sorted, distinct, non-empty, all ≥ 1.
    FullDecodeOnly {
        capture_sizes: Vec<u32>,
    },
}

impl GraphMode {
    /// The smallest capture size ≥ `tokens`, if any.
    pub fn padded_size(&self, tokens: u32) -> Option<u32> {
        match self {
            GraphMode::Eager => None,
            GraphMode::FullDecodeOnly { capture_sizes } => {
                capture_sizes.iter().copied().find(|&c| c >= tokens)
            }
        }
    }
}

/// Everything about a deployment that changes its timing.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingConfig {
    pub attention: RoleLayout,
    pub ffn: RoleLayout,
    pub rules: RuleSet,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub dbo: Option<DboConfig>,
    pub graph: GraphMode,
    pub gpu_memory_utilization: f64,
    /// `--max-model-len`; the model's `max_position_embeddings` when `None`.
    pub max_model_len: Option<u32>,
    pub gpu: GpuKind,
    /// KV-cache block size in tokens.
    pub block_size: u32,
    /// Attention-rank memory kept outside weights and KV cache, bytes.
    pub kv_reserve_bytes: u64,
}

/// Why a serving configuration cannot be simulated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ServingConfigError {
    #[error("{role} {what} must be at least 1, got 0")]
    Zero {
        role: &'static str,
        what: &'static str,
    },
    #[error("rank mapping: {0}")]
    Topology(#[from] TopologyError),
    #[error("--max-num-seqs must be at least 1")]
    MaxNumSeqs,
    #[error("--max-num-batched-tokens must be at least 1")]
    MaxNumBatchedTokens,
    #[error("--dbo-{which}-token-threshold must be at least 1")]
    DboThreshold { which: &'static str },
    #[error("cudagraph_capture_sizes must be a non-empty list of sizes >= 1, got {0:?}")]
    CaptureSizes(Vec<u32>),
    #[error("--gpu-memory-utilization must be in (0, 1], got {0}")]
    MemoryUtilization(f64),
    #[error("--block-size must be at least 1")]
    BlockSize,
    #[error(
        "the {role} role runs cudagraph_mode {mode}; AFD simulates only FULL_DECODE_ONLY or --enforce-eager (afd-spec §1.6)"
    )]
    GraphMode {
        role: &'static str,
        mode: &'static str,
    },
}

impl ServingConfig {
    /// The seed recipe `2a2f_graph_dbo_dp1tp2.sh`: both roles DP1 TP2 with expert parallelism
    /// (A = F = 2), max-num-seqs 64, max-num-batched-tokens 64, DBO thresholds decode 2 / prefill 12,
    /// FULL_DECODE_ONLY with capture sizes [64], on H200, vLLM's default memory utilisation 0.9.
    pub fn seed_recipe() -> ServingConfig {
        let role = RoleLayout {
            dp: 1,
            tp: 2,
            expert_parallel: true,
        };
        ServingConfig {
            attention: role,
            ffn: role,
            rules: RuleSet::Latest,
            max_num_seqs: 64,
            max_num_batched_tokens: 64,
            dbo: Some(DboConfig {
                decode_threshold: 2,
                prefill_threshold: 12,
            }),
            graph: GraphMode::FullDecodeOnly {
                capture_sizes: vec![64],
            },
            gpu_memory_utilization: 0.9,
            max_model_len: None,
            gpu: GpuKind::H200,
            block_size: FLASHMLA_BLOCK_SIZE,
            kv_reserve_bytes: DEFAULT_RESERVE_BYTES,
        }
    }

    /// The timing view of a parsed deployment (afd-spec §1, DESIGN §3) on GPUs of kind `gpu`. The
    /// Attention role's scheduler limits, DBO, graph and memory settings govern the step (the FFN
    /// role follows the Attention role's payload); both roles' layouts shape the pipeline.
    pub fn from_deployment(
        deployment: &Deployment,
        gpu: GpuKind,
    ) -> Result<ServingConfig, ServingConfigError> {
        let layout = |role: &RoleConfig| RoleLayout {
            dp: role.dp_size(),
            tp: role.tp_size(),
            expert_parallel: role.expert_parallel(),
        };
        let attention = &deployment.attention;
        for (name, role) in [("attention", attention), ("ffn", &deployment.ffn)] {
            let mode = role.cudagraph_mode();
            if !matches!(mode, CudaGraphMode::None | CudaGraphMode::FullDecodeOnly) {
                return Err(ServingConfigError::GraphMode {
                    role: name,
                    mode: mode.as_str(),
                });
            }
        }
        let graph = match attention.cudagraph_mode() {
            CudaGraphMode::FullDecodeOnly => GraphMode::FullDecodeOnly {
                capture_sizes: attention.capture_sizes(),
            },
            _ => GraphMode::Eager,
        };
        let config = ServingConfig {
            attention: layout(attention),
            ffn: layout(&deployment.ffn),
            rules: deployment.rules,
            max_num_seqs: attention.max_num_seqs(),
            max_num_batched_tokens: attention.max_num_batched_tokens(),
            dbo: attention.dbo().map(|dbo| DboConfig {
                decode_threshold: dbo.decode_token_threshold,
                prefill_threshold: dbo.prefill_token_threshold,
            }),
            graph,
            gpu_memory_utilization: attention.gpu_memory_utilization(),
            max_model_len: attention.max_model_len(),
            gpu,
            block_size: FLASHMLA_BLOCK_SIZE,
            kv_reserve_bytes: DEFAULT_RESERVE_BYTES,
        };
        config.validate()?;
        Ok(config)
    }

    /// How this layout splits work, as the cost model prices it.
    pub fn cost_layout(&self) -> CostLayout {
        CostLayout {
            attention_tp: self.attention.tp,
            ffn_dp: self.ffn.dp,
            ffn_tp: self.ffn.tp,
            expert_parallel: self.ffn.expert_parallel,
        }
    }

    /// `A`, the number of Attention ranks.
    pub fn attention_ranks(&self) -> u32 {
        self.attention.ranks()
    }

    /// `F`, the number of FFN ranks.
    pub fn ffn_ranks(&self) -> u32 {
        self.ffn.ranks()
    }

    /// Total GPUs of the pair.
    pub fn gpus(&self) -> u32 {
        self.attention_ranks() + self.ffn_ranks()
    }

    /// The rank mapping (afd-spec §2).
    pub fn topology(&self) -> Result<Topology, ServingConfigError> {
        Ok(Topology::new(
            self.attention_ranks(),
            self.ffn_ranks(),
            self.rules,
            1239,
        )?)
    }

    /// Checks what the timing model relies on; the first problem wins.
    pub fn validate(&self) -> Result<(), ServingConfigError> {
        for (role, layout) in [("attention", self.attention), ("ffn", self.ffn)] {
            if layout.dp == 0 {
                return Err(ServingConfigError::Zero {
                    role,
                    what: "--data-parallel-size",
                });
            }
            if layout.tp == 0 {
                return Err(ServingConfigError::Zero {
                    role,
                    what: "--tensor-parallel-size",
                });
            }
        }
        self.topology()?;
        if self.max_num_seqs == 0 {
            return Err(ServingConfigError::MaxNumSeqs);
        }
        if self.max_num_batched_tokens == 0 {
            return Err(ServingConfigError::MaxNumBatchedTokens);
        }
        if let Some(dbo) = self.dbo {
            if dbo.decode_threshold == 0 {
                return Err(ServingConfigError::DboThreshold { which: "decode" });
            }
            if dbo.prefill_threshold == 0 {
                return Err(ServingConfigError::DboThreshold { which: "prefill" });
            }
        }
        if let GraphMode::FullDecodeOnly { capture_sizes } = &self.graph {
            let sorted = capture_sizes.windows(2).all(|w| w[0] < w[1]);
            if capture_sizes.is_empty() || capture_sizes[0] == 0 || !sorted {
                return Err(ServingConfigError::CaptureSizes(capture_sizes.clone()));
            }
        }
        if !(self.gpu_memory_utilization > 0.0 && self.gpu_memory_utilization <= 1.0) {
            return Err(ServingConfigError::MemoryUtilization(
                self.gpu_memory_utilization,
            ));
        }
        if self.block_size == 0 {
            return Err(ServingConfigError::BlockSize);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
