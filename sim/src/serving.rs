//! A plain numeric view of an AFD deployment: what the simulator needs of the two `vllm serve`
//! command lines (parallel layout per role, batch limits, DBO, CUDA graphs, memory, GPU), or of the
//! one command of the non-disaggregated baseline (`Placement::Colocated`, `colocated.rs`).
//!
//! The typed, validated `Deployment` parsed from recipes and flags lives in `deployment.rs`; this
//! view is built from it ([`ServingConfig::from_deployment`], [`ServingConfig::from_plain`]) or by
//! hand (tests), and checks only what the timing model itself relies on. Every default a command
//! leaves out is vLLM 0.26.0's, resolved by the `RoleConfig` accessors (sources cited there).

use crate::deployment::role_config::{COMPILE_MODE_VLLM, DEFAULT_GPU_MEMORY_UTILIZATION};
use crate::deployment::{CudaGraphMode, Deployment, RoleConfig};
use crate::model::arch::ModelArch;
use crate::model::cost::CostLayout;
use crate::model::hardware::GpuKind;
use crate::model::kv_cache::DEFAULT_RESERVE_BYTES;
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

/// CUDA-graph mode (afd-spec §5.1): AFD accepts only eager or `FULL_DECODE_ONLY`; a plain `vllm
/// serve` runs vLLM's default `FULL_AND_PIECEWISE` too.
///
/// The sizes are the graphs a uniform-decode batch can replay: vLLM 0.26.0 keys its FULL decode
/// graphs only for capture sizes ≤ `max_num_seqs` (query length 1), in both model runners
/// (`vllm/v1/cudagraph_dispatcher.py:204-232`; `vllm/v1/worker/gpu/cudagraph_utils.py:225-250`),
/// and pads a batch to the smallest of them ≥ its token count (`vllm/v1/cudagraph_dispatcher.py:
/// 72-91, 132-156, 302-316`; `vllm/v1/worker/gpu/cudagraph_utils.py:275-284`). A batch above them
/// runs eagerly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GraphMode {
    Eager,
    /// vLLM's compiled model without CUDA graphs (`cudagraph_mode` `NONE` under compilation mode
    /// 3): every step runs the torch.compile'd model op by op, as `FULL_DECODE_ONLY` runs every
    /// batch it has no graph for (`vllm/v1/worker/gpu/cudagraph_utils.py` `dispatch`). The kernel
    /// model prices it as eager; the engine model by `FULL_DECODE_ONLY`'s steps without graphs.
    Compiled,
    /// Full graphs for uniform-decode batches up to the largest capture size, padded to the next
    /// capture size. Invariant: sizes sorted, distinct, non-empty, all ≥ 1.
    FullDecodeOnly {
        capture_sizes: Vec<u32>,
    },
    /// vLLM's default for a plain server: full graphs for uniform decode as above (`capture_sizes`,
    /// possibly empty for `PIECEWISE`), piecewise graphs for every other batch up to the largest
    /// of `piecewise_sizes`, padded to the next of them (attention runs outside the graph, so the
    /// step is priced as eager with its padded rows). Invariant: both sorted and distinct,
    /// `piecewise_sizes` non-empty.
    FullAndPiecewise {
        capture_sizes: Vec<u32>,
        piecewise_sizes: Vec<u32>,
    },
}

impl GraphMode {
    /// The graphs a server of cudagraph `mode` captures from its resolved capture `sizes`: full
    /// decode graphs only up to `max_num_seqs` (a uniform decode batch holds no more requests),
    /// piecewise graphs at every size; eager when it captures none.
    pub fn resolve(mode: CudaGraphMode, sizes: Vec<u32>, max_num_seqs: u32) -> GraphMode {
        let decode: Vec<u32> = sizes
            .iter()
            .copied()
            .filter(|&s| s <= max_num_seqs)
            .collect();
        match mode {
            CudaGraphMode::FullDecodeOnly if !decode.is_empty() => GraphMode::FullDecodeOnly {
                capture_sizes: decode,
            },
            CudaGraphMode::FullAndPiecewise | CudaGraphMode::Piecewise if !sizes.is_empty() => {
                GraphMode::FullAndPiecewise {
                    capture_sizes: if mode == CudaGraphMode::Piecewise {
                        Vec::new()
                    } else {
                        decode
                    },
                    piecewise_sizes: sizes,
                }
            }
            _ => GraphMode::Eager,
        }
    }

    /// The smallest full decode graph size ≥ `tokens`, if any.
    pub fn padded_size(&self, tokens: u32) -> Option<u32> {
        match self {
            GraphMode::Eager | GraphMode::Compiled => None,
            GraphMode::FullDecodeOnly { capture_sizes }
            | GraphMode::FullAndPiecewise { capture_sizes, .. } => {
                capture_sizes.iter().copied().find(|&c| c >= tokens)
            }
        }
    }

    /// The smallest piecewise graph size ≥ `tokens` a non-decode batch is padded to, if any.
    pub fn piecewise_size(&self, tokens: u32) -> Option<u32> {
        match self {
            GraphMode::FullAndPiecewise {
                piecewise_sizes, ..
            } => piecewise_sizes.iter().copied().find(|&c| c >= tokens),
            _ => None,
        }
    }

    /// vLLM's name of the mode (`eager` for none).
    pub fn name(&self) -> &'static str {
        match self {
            GraphMode::Eager => "eager",
            GraphMode::Compiled => "NONE",
            GraphMode::FullDecodeOnly { .. } => "FULL_DECODE_ONLY",
            GraphMode::FullAndPiecewise { capture_sizes, .. } if capture_sizes.is_empty() => {
                "PIECEWISE"
            }
            GraphMode::FullAndPiecewise { .. } => "FULL_AND_PIECEWISE",
        }
    }

    /// The full decode graph sizes (empty when eager).
    pub fn capture_sizes(&self) -> &[u32] {
        match self {
            GraphMode::Eager | GraphMode::Compiled => &[],
            GraphMode::FullDecodeOnly { capture_sizes }
            | GraphMode::FullAndPiecewise { capture_sizes, .. } => capture_sizes,
        }
    }
}

/// Where attention and the FFN (MoE) run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Placement {
    /// AFD: the Attention role and the FFN role on separate GPUs.
    #[default]
    Disaggregated,
    /// Plain vLLM DP×TP (with expert parallelism): every GPU runs attention and its share of the
    /// MoE; `attention` is the layout and `ffn` mirrors it.
    Colocated,
}

/// Everything about a deployment that changes its timing.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingConfig {
    pub placement: Placement,
    pub attention: RoleLayout,
    pub ffn: RoleLayout,
    pub rules: RuleSet,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub dbo: Option<DboConfig>,
    pub graph: GraphMode,
    /// `--gpu-memory-utilization` of the Attention role (of the server, colocated): its KV cache.
    pub gpu_memory_utilization: f64,
    /// `--gpu-memory-utilization` of the FFN role, which only has to hold its weights.
    pub ffn_gpu_memory_utilization: f64,
    /// `--max-model-len`; the model's `max_position_embeddings` when `None`.
    pub max_model_len: Option<u32>,
    pub gpu: GpuKind,
    /// KV-cache block size in tokens.
    pub block_size: u32,
    /// Automatic prefix caching (vLLM's default on). The shipped workloads share no prefixes, so
    /// it changes nothing in the run; reported so a reader knows what vLLM would do.
    pub prefix_caching: bool,
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
    #[error(
        "the server runs cudagraph_mode FULL with a non-MLA model, whose attention backend may capture full graphs of mixed batches; the simulator models NONE, PIECEWISE, FULL_DECODE_ONLY and FULL_AND_PIECEWISE for such a server"
    )]
    PlainFullGraphs,
    #[error(
        "compilation mode {mode} with cudagraph_mode {graphs} is not simulated: the engine's graph-less steps were measured on vLLM's compiled model (mode 3); use mode 3, or --enforce-eager"
    )]
    PlainCompileMode { mode: i64, graphs: &'static str },
    #[error(
        "--no-enable-chunked-prefill is not simulated: the scheduler model always chunks prefills (vLLM 0.26.0's default)"
    )]
    ChunkedPrefillOff,
}

impl ServingConfig {
    /// The seed recipe `2a2f_graph_dbo_dp1tp2.sh`: both roles DP1 TP2 with expert parallelism
    /// (A = F = 2), max-num-seqs 64, max-num-batched-tokens 64, DBO thresholds decode 2 / prefill 12,
    /// FULL_DECODE_ONLY with capture sizes [64], on H200, vLLM 0.26.0's default memory utilisation
    /// 0.92 (`vllm/config/cache.py:68`),
    /// block size 16 (vLLM 0.26.0's FLASH_ATTN_MLA default on Hopper) and prefix caching on.
    pub fn seed_recipe() -> ServingConfig {
        let role = RoleLayout {
            dp: 1,
            tp: 2,
            expert_parallel: true,
        };
        ServingConfig {
            placement: Placement::Disaggregated,
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
            gpu_memory_utilization: DEFAULT_GPU_MEMORY_UTILIZATION,
            ffn_gpu_memory_utilization: DEFAULT_GPU_MEMORY_UTILIZATION,
            max_model_len: None,
            gpu: GpuKind::H200,
            block_size: crate::deployment::role_config::DEFAULT_BLOCK_SIZE,
            prefix_caching: true,
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
        let class = gpu.batch_class();
        let attention = deployment.attention.clone().on_gpu(class);
        let ffn = deployment.ffn.clone().on_gpu(class);
        for (name, role) in [("attention", &attention), ("ffn", &ffn)] {
            let mode = role.cudagraph_mode();
            if !matches!(mode, CudaGraphMode::None | CudaGraphMode::FullDecodeOnly) {
                return Err(ServingConfigError::GraphMode {
                    role: name,
                    mode: mode.as_str(),
                });
            }
        }
        let mut config = ServingConfig::from_server(&attention, gpu, attention.cudagraph_mode())?;
        config.ffn = layout(&ffn);
        config.ffn_gpu_memory_utilization = ffn.gpu_memory_utilization();
        config.rules = deployment.rules;
        config.validate()?;
        Ok(config)
    }

    /// The timing view of one plain `vllm serve` command (no `afd` block): the colocated
    /// deployment of its DP × TP GPUs, each running attention and its share of the MoE.
    pub fn from_plain(
        server: &RoleConfig,
        rules: RuleSet,
        gpu: GpuKind,
        model: &ModelArch,
    ) -> Result<ServingConfig, ServingConfigError> {
        let server = server.clone().on_gpu(gpu.batch_class());
        let mode = plain_graph_mode(&server, model.is_mla())?;
        let mut config = ServingConfig::from_server(&server, gpu, mode)?;
        if mode == CudaGraphMode::None && server.compile_mode() == COMPILE_MODE_VLLM {
            config.graph = GraphMode::Compiled;
        }
        if config.attention.dp == 1 {
            // vLLM decides ubatching only in its DP coordination, so a DP-1 server never splits
            // (`vllm/v1/worker/gpu_model_runner.py:3948-3959`; the plugin adds the DP-1 split).
            config.dbo = None;
        }
        config.placement = Placement::Colocated;
        config.ffn = config.attention;
        config.rules = rules;
        config.validate()?;
        Ok(config)
    }

    /// What one server's flags set (the Attention role's for a pair; it governs the step, and the
    /// FFN follows its payload), with vLLM 0.26.0's defaults for what the command leaves out.
    fn from_server(
        server: &RoleConfig,
        gpu: GpuKind,
        mode: CudaGraphMode,
    ) -> Result<ServingConfig, ServingConfigError> {
        if !server.chunked_prefill() {
            return Err(ServingConfigError::ChunkedPrefillOff);
        }
        let max_num_seqs = server.max_num_seqs();
        let graph = GraphMode::resolve(mode, server.capture_sizes(), max_num_seqs);
        Ok(ServingConfig {
            placement: Placement::Disaggregated,
            attention: layout(server),
            ffn: layout(server),
            rules: RuleSet::Latest,
            max_num_seqs,
            max_num_batched_tokens: server.max_num_batched_tokens(),
            dbo: server.dbo().map(|dbo| DboConfig {
                decode_threshold: dbo.decode_token_threshold,
                prefill_threshold: dbo.prefill_token_threshold,
            }),
            graph,
            gpu_memory_utilization: server.gpu_memory_utilization(),
            ffn_gpu_memory_utilization: server.gpu_memory_utilization(),
            max_model_len: server.max_model_len(),
            gpu,
            block_size: server.block_size(),
            prefix_caching: server.prefix_caching(),
            kv_reserve_bytes: DEFAULT_RESERVE_BYTES,
        })
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

    /// Total GPUs: both roles', or the shared ones of a colocated deployment.
    pub fn gpus(&self) -> u32 {
        match self.placement {
            Placement::Disaggregated => self.attention_ranks() + self.ffn_ranks(),
            Placement::Colocated => self.attention_ranks(),
        }
    }

    /// The colocated baseline of `layout` (DP×TP, expert parallel or not) with this config's batch
    /// limits, DBO, graphs, memory and GPU.
    pub fn to_colocated(&self, layout: RoleLayout) -> ServingConfig {
        ServingConfig {
            placement: Placement::Colocated,
            attention: layout,
            ffn: layout,
            ..self.clone()
        }
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
        if self.placement == Placement::Disaggregated {
            self.topology()?;
        }
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
        let sorted = |sizes: &[u32]| {
            !sizes.is_empty() && sizes[0] > 0 && sizes.windows(2).all(|w| w[0] < w[1])
        };
        match &self.graph {
            GraphMode::Eager | GraphMode::Compiled => {}
            GraphMode::FullDecodeOnly { capture_sizes } => {
                if !sorted(capture_sizes) {
                    return Err(ServingConfigError::CaptureSizes(capture_sizes.clone()));
                }
            }
            GraphMode::FullAndPiecewise {
                capture_sizes,
                piecewise_sizes,
            } => {
                if !(capture_sizes.is_empty() || sorted(capture_sizes)) {
                    return Err(ServingConfigError::CaptureSizes(capture_sizes.clone()));
                }
                if !sorted(piecewise_sizes) {
                    return Err(ServingConfigError::CaptureSizes(piecewise_sizes.clone()));
                }
            }
        }
        for fraction in [self.gpu_memory_utilization, self.ffn_gpu_memory_utilization] {
            if !(fraction > 0.0 && fraction <= 1.0) {
                return Err(ServingConfigError::MemoryUtilization(fraction));
            }
        }
        if self.block_size == 0 {
            return Err(ServingConfigError::BlockSize);
        }
        Ok(())
    }
}

/// The parallel layout of one server's flags.
fn layout(role: &RoleConfig) -> RoleLayout {
    RoleLayout {
        dp: role.dp_size(),
        tp: role.tp_size(),
        expert_parallel: role.expert_parallel(),
    }
}

#[cfg(test)]
mod tests;

/// The CUDA-graph mode a plain server runs once its attention backend has had its say (`mla`: the
/// model's attention is MLA), or why the simulator does not model it. Every MLA backend captures
/// full graphs of uniform batches at most, so vLLM turns `FULL` into `FULL_AND_PIECEWISE` when
/// attention splits the compiled graph (vLLM's compiled model) and into `FULL_DECODE_ONLY` otherwise
/// (`CompilationConfig.resolve_cudagraph_mode_and_sizes`, `vllm/config/compilation.py:1371-1396`;
/// `_cudagraph_support` of `vllm/v1/attention/backends/mla/*.py`; splitting ops
/// `compilation.py:1129-1146`); another model's backend may capture mixed batches, which is not
/// modelled. Other modes are the server config's ([`RoleConfig::cudagraph_mode`]). A mode with
/// graphs outside vLLM's compiled model is refused: the steps it runs without a graph were measured
/// on the compiled model only.
pub fn plain_graph_mode(
    server: &RoleConfig,
    mla: bool,
) -> Result<CudaGraphMode, ServingConfigError> {
    let compiled = server.compile_mode() == COMPILE_MODE_VLLM;
    let mode = match server.cudagraph_mode() {
        CudaGraphMode::Full if mla && compiled => CudaGraphMode::FullAndPiecewise,
        CudaGraphMode::Full if mla => CudaGraphMode::FullDecodeOnly,
        CudaGraphMode::Full => return Err(ServingConfigError::PlainFullGraphs),
        mode => mode,
    };
    if mode != CudaGraphMode::None && !compiled {
        return Err(ServingConfigError::PlainCompileMode {
            mode: server.compile_mode(),
            graphs: mode.as_str(),
        });
    }
    Ok(mode)
}
