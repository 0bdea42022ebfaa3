//! GPU memory of every rank of a deployment: the weights each rank holds, vLLM's reserve for
//! activations and CUDA graphs, the budget `--gpu-memory-utilization` grants, and what is left for
//! the KV cache. A role whose rank cannot hold its weights and reserve is an error that names the
//! role, the rank and both byte counts.
//!
//! Weights per rank (afd-spec §3.2): an Attention rank holds the attention-side parameters
//! (attention blocks, embeddings, norms, LM head) split across Attention TP; an FFN rank holds its
//! share of the routed experts (all FFN ranks share them with expert parallelism, the TP group
//! without it) plus the shared experts, routers and dense MLPs split across FFN TP; a colocated
//! GPU holds both halves that way. vLLM sizes the KV cache from what the budget leaves after the
//! weights and the peak of its profiling run (`vllm/v1/worker/gpu_worker.py`,
//! `determine_available_memory`); that peak (activations of a `max_num_batched_tokens` dummy batch,
//! the CUDA-graph pool, NCCL buffers) is [`ServingConfig::kv_reserve_bytes`], an assumption until a
//! probe measures it. The FFN role keeps no KV cache (afd-spec §6.1), so it only needs to fit.
//!
//! A hybrid linear-attention model keeps each running request's states in the KV cache's own
//! block pool (`cluster::kv_layout`), so nothing is set aside for them; but a role that replays
//! full CUDA graphs needs a block per sequence: vLLM refuses to capture when `--max-num-seqs`
//! exceeds the pool's blocks (`vllm/config/compilation.py:1476-1497`, vLLM 0.26.0).
//!
//! vLLM also refuses to start when the KV cache cannot hold one request of `max_model_len` tokens
//! (`_check_enough_kv_cache_memory`, `vllm/v1/core/kv_cache_utils.py`), and with
//! `--max-model-len auto` (or `-1`) it fits the length to what the cache holds instead.
//! Nothing here reads the GPU: the sizes come from the model's config and the datasheet.

use crate::cluster::{kv_capacity, kv_layout};
use crate::model::arch::{KvLayout, ModelArch};
use crate::serving::{GraphMode, Placement, ServingConfig};

/// One role's memory on its fullest rank (every rank of a role holds the same, up to rounding).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleMemory {
    /// `attention`, `ffn`, or `server` for a plain (colocated) deployment.
    pub role: &'static str,
    /// The role rank the figures are for.
    pub rank: u32,
    /// Weights on that rank, bytes.
    pub weight_bytes: u64,
    /// Activation and CUDA-graph reserve, bytes.
    pub reserve_bytes: u64,
    /// GPU memory × `--gpu-memory-utilization`, bytes.
    pub budget_bytes: u64,
    /// What the budget leaves after weights and reserve (the KV cache of roles that keep one).
    pub free_bytes: u64,
}

/// Why a deployment's memory does not work out.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error(transparent)]
    RoleFits(#[from] RoleFitsError),
    #[error(transparent)]
    StateBlocks(#[from] StateBlocksError),
    #[error(transparent)]
    MaxLenFits(#[from] MaxLenFitsError),
}

impl MemoryError {
    /// `attention`, `ffn`, or `server`: the role at fault.
    pub fn role(&self) -> &'static str {
        match self {
            MemoryError::RoleFits(err) => err.role,
            MemoryError::StateBlocks(err) => err.role,
            MemoryError::MaxLenFits(err) => err.role,
        }
    }
}

/// A role that does not fit on its GPU.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {role} role does not fit on its GPU (rank {rank}): it needs {needed_bytes} bytes ({weight_bytes} of weights and {reserve_bytes} reserved for activations and CUDA graphs) but --gpu-memory-utilization {utilization} of the {gpu}'s {memory_bytes} bytes leaves {available_bytes}"
)]
pub struct RoleFitsError {
    pub role: &'static str,
    pub rank: u32,
    pub needed_bytes: u64,
    pub weight_bytes: u64,
    pub reserve_bytes: u64,
    pub available_bytes: u64,
    pub memory_bytes: u64,
    pub utilization: String,
    pub gpu: &'static str,
}

/// A hybrid model's role with full CUDA graphs whose KV cache has fewer blocks than
/// `--max-num-seqs`: vLLM needs one linear-attention state block per decode sequence to capture.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {role} role replays full CUDA graphs ({mode}) of a linear-attention model, which need one state block per sequence: --max-num-seqs {max_num_seqs} exceeds the {blocks} KV blocks of {block_bytes} bytes that the {free_bytes} bytes left after weights and reserve hold, and vLLM refuses to capture (lower --max-num-seqs, raise --gpu-memory-utilization, or run --enforce-eager)"
)]
pub struct StateBlocksError {
    pub role: &'static str,
    pub mode: &'static str,
    pub max_num_seqs: u32,
    pub blocks: u64,
    pub block_bytes: u64,
    pub free_bytes: u64,
}

/// A role whose KV cache cannot hold one request of `--max-model-len` tokens: vLLM refuses to
/// start (`_check_enough_kv_cache_memory`, `vllm/v1/core/kv_cache_utils.py`, vLLM 0.26.0).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the {role} role's KV cache cannot hold one request of max_model_len {max_model_len} tokens: it needs {needed_blocks} blocks of {block_size} tokens ({block_bytes} bytes each) and the {free_bytes} bytes left after weights and reserve hold {blocks}, so vLLM refuses to start (the most they hold is {fits} tokens; raise --gpu-memory-utilization, or lower --max-model-len or give --max-model-len auto)"
)]
pub struct MaxLenFitsError {
    pub role: &'static str,
    pub max_model_len: u32,
    pub needed_blocks: u64,
    pub blocks: u64,
    pub block_size: u32,
    pub block_bytes: u64,
    pub free_bytes: u64,
    /// The longest request the blocks hold (what `--max-model-len auto` would give).
    pub fits: u64,
}

/// Weight bytes on the fullest rank of each role: `(attention, ffn)`; for a colocated deployment
/// both are the per-GPU figure.
pub fn weight_bytes_per_rank(config: &ServingConfig, model: &ModelArch) -> (u64, u64) {
    match config.placement {
        Placement::Colocated => {
            let gpu = crate::colocated::weight_bytes_per_gpu(
                model,
                config.attention.dp,
                config.attention.tp,
                config.attention.expert_parallel,
            );
            (gpu, gpu)
        }
        Placement::Disaggregated => {
            let roles = model.config.params_by_role();
            let routed = u64::from(model.config.n_moe_layers())
                * u64::from(model.routed_experts())
                * model.expert_params();
            let tp = u64::from(config.ffn.tp.max(1));
            let ranks = u64::from(config.ffn.dp.max(1)) * tp;
            // Ceiling divisions: the rank holding the remainder is the fullest.
            let routed_share = if config.ffn.expert_parallel {
                routed.div_ceil(ranks)
            } else {
                routed.div_ceil(tp)
            };
            let ffn = (roles.ffn.saturating_sub(routed).div_ceil(tp) + routed_share)
                * model.weight_bytes();
            (model.attention_weight_bytes(config.attention.tp), ffn)
        }
    }
}

/// Every role's memory, or the first role (Attention first) that does not fit on `memory_bytes`,
/// then the first role whose KV cache vLLM refuses (too few blocks for its full graphs' states or
/// for one request of `max_model_len`).
pub fn plan(
    config: &ServingConfig,
    model: &ModelArch,
    memory_bytes: u64,
) -> Result<Vec<RoleMemory>, MemoryError> {
    let (attention, ffn) = weight_bytes_per_rank(config, model);
    let roles: Vec<(&'static str, u64, f64)> = match config.placement {
        Placement::Colocated => vec![("server", attention, config.gpu_memory_utilization)],
        Placement::Disaggregated => vec![
            ("attention", attention, config.gpu_memory_utilization),
            ("ffn", ffn, config.ffn_gpu_memory_utilization),
        ],
    };
    let mut plans = Vec::with_capacity(roles.len());
    for (role, weight_bytes, utilization) in roles {
        let budget = (memory_bytes as f64 * utilization) as u64;
        let reserve = config.kv_reserve_bytes;
        let needed = weight_bytes + reserve;
        if needed > budget {
            return Err(MemoryError::RoleFits(RoleFitsError {
                role,
                rank: 0,
                needed_bytes: needed,
                weight_bytes,
                reserve_bytes: reserve,
                available_bytes: budget,
                memory_bytes,
                utilization: utilization.to_string(),
                gpu: config.gpu.as_str(),
            }));
        }
        let free_bytes = budget - needed;
        plans.push(RoleMemory {
            role,
            rank: 0,
            weight_bytes,
            reserve_bytes: reserve,
            budget_bytes: budget,
            free_bytes,
        });
    }
    // Every role fits before any KV cache is judged: a role without room for its weights is the
    // first thing to fix.
    let layout = kv_layout(config, model);
    for role in plans.iter().filter(|r| r.role != "ffn") {
        state_blocks(config, &layout, role.role, role.free_bytes)?;
        max_len_fits(config, model, &layout, role.role, role.free_bytes)?;
    }
    Ok(plans)
}

/// The longest request, in tokens, that `blocks` of `layout` hold: each request takes one block
/// per `block_size` tokens in each full-attention group and one per linear-attention group
/// whatever its length.
fn tokens_in_blocks(layout: &KvLayout, blocks: u64) -> u64 {
    let per_token_group = blocks.saturating_sub(u64::from(layout.state_groups))
        / u64::from(layout.token_groups.max(1));
    per_token_group * u64::from(layout.block_size)
}

/// What `--max-model-len auto` (or `-1`) gives on `memory_bytes` GPUs: the model's maximum, or
/// the longest request the KV cache of the role that keeps one holds where that is shorter
/// (`_auto_fit_max_model_len`, `vllm/v1/core/kv_cache_utils.py`); `None` where it holds none or
/// the role does not fit (the memory plan then says why).
pub fn auto_fit_max_model_len(
    config: &ServingConfig,
    model: &ModelArch,
    memory_bytes: u64,
) -> Option<u32> {
    let (blocks, _) = kv_capacity(config, model, memory_bytes);
    let fits = tokens_in_blocks(&kv_layout(config, model), blocks);
    let fits = u32::try_from(fits).unwrap_or(u32::MAX);
    (fits > 0).then(|| fits.min(model.max_position_embeddings()))
}

/// vLLM's check that the KV cache holds one request of the server's `max_model_len`.
fn max_len_fits(
    config: &ServingConfig,
    model: &ModelArch,
    layout: &KvLayout,
    role: &'static str,
    free_bytes: u64,
) -> Result<(), MaxLenFitsError> {
    let max_model_len = config
        .max_model_len
        .unwrap_or(model.max_position_embeddings());
    let blocks = free_bytes / layout.block_bytes.max(1);
    let needed_blocks = u64::from(layout.token_groups)
        * u64::from(max_model_len.div_ceil(layout.block_size.max(1)))
        + u64::from(layout.state_groups);
    if needed_blocks <= blocks {
        return Ok(());
    }
    Err(MaxLenFitsError {
        role,
        max_model_len,
        needed_blocks,
        blocks,
        block_size: layout.block_size,
        block_bytes: layout.block_bytes,
        free_bytes,
        fits: tokens_in_blocks(layout, blocks),
    })
}

/// vLLM's check that a hybrid model replaying full decode graphs has a state block for each of
/// `--max-num-seqs` sequences in the `free_bytes` its KV cache gets.
fn state_blocks(
    config: &ServingConfig,
    layout: &KvLayout,
    role: &'static str,
    free_bytes: u64,
) -> Result<(), StateBlocksError> {
    let full_graphs = match &config.graph {
        GraphMode::Eager | GraphMode::Compiled => false,
        GraphMode::FullDecodeOnly { .. } => true,
        GraphMode::FullAndPiecewise { capture_sizes, .. } => !capture_sizes.is_empty(),
    };
    if layout.state_groups == 0 || !full_graphs {
        return Ok(());
    }
    let blocks = free_bytes / layout.block_bytes.max(1);
    if u64::from(config.max_num_seqs) > blocks {
        return Err(StateBlocksError {
            role,
            mode: config.graph.name(),
            max_num_seqs: config.max_num_seqs,
            blocks,
            block_bytes: layout.block_bytes,
            free_bytes,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
