//! Paged KV cache of one Attention DP engine: a pool of fixed-size blocks (vLLM V1 `KVCacheManager`).
//!
//! Capacity comes from GPU memory × `gpu_memory_utilization` minus weights and a reserve, divided
//! by the bytes one block id holds over all layers ([`KvLayout`]). A hybrid model's request holds
//! its linear-attention states in the same pool, a fixed number of blocks whatever its length.
//! Only counts are kept: which block holds which token does not affect timing. Prefix caching is
//! not modelled (every request is cache-cold).
//!
//! Every check against the capacity (an allocation, whether a request fits at all) narrows the
//! capacity's [`Span`] (`limits.rs`).

use crate::model::arch::KvLayout;
use crate::model::limits::Span;

/// Block size vLLM forces for MLA models on Hopper with the FlashMLA backend
/// (`vllm/platforms/cuda.py`: "Forcing kv cache block size to 64 for FlashMLA backend").
pub const FLASHMLA_BLOCK_SIZE: u32 = 64;

/// Memory vLLM keeps outside weights and KV cache (activation peak of the profiling run, CUDA-graph
/// pool, NCCL buffers, non-torch allocations). An assumption until a probe measures it.
pub const DEFAULT_RESERVE_BYTES: u64 = 3 << 30;

/// Block counts of one engine.
///
/// Invariant: `used <= total`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvCache {
    block_size: u32,
    /// Blocks a request takes per `block_size` tokens, and for its states ([`KvLayout`]).
    token_groups: u32,
    state_groups: u32,
    total: u64,
    used: u64,
    /// Capacities that agree with every check against `total` so far.
    span: Span,
}

/// How many blocks of `block_bytes` fit on one Attention rank (every TP rank of an engine holds
/// the same blocks, so one rank's memory decides). Zero when weights and reserve exceed the budget.
pub fn capacity_blocks(
    memory_bytes: u64,
    gpu_memory_utilization: f64,
    weight_bytes: u64,
    reserve_bytes: u64,
    block_bytes: u64,
) -> u64 {
    let budget = (memory_bytes as f64 * gpu_memory_utilization) as u64;
    let free = budget
        .saturating_sub(weight_bytes)
        .saturating_sub(reserve_bytes);
    free / block_bytes.max(1)
}

impl KvCache {
    /// A pool of `total_blocks` blocks of `block_size` tokens in one group (no linear attention).
    pub fn new(block_size: u32, total_blocks: u64) -> KvCache {
        KvCache::with_layout(
            &KvLayout {
                block_size,
                block_bytes: 0,
                token_groups: 1,
                state_groups: 0,
            },
            total_blocks,
        )
    }

    /// A pool of `total_blocks` block ids cut as `layout` says.
    pub fn with_layout(layout: &KvLayout, total_blocks: u64) -> KvCache {
        assert!(layout.block_size > 0, "block size must be positive");
        assert!(
            layout.token_groups > 0,
            "a request needs blocks for its tokens"
        );
        KvCache {
            block_size: layout.block_size,
            token_groups: layout.token_groups,
            state_groups: layout.state_groups,
            total: total_blocks,
            used: 0,
            span: Span::ALL,
        }
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    pub fn total_blocks(&self) -> u64 {
        self.total
    }

    pub fn used_blocks(&self) -> u64 {
        self.used
    }

    pub fn free_blocks(&self) -> u64 {
        self.total - self.used
    }

    /// Capacities (blocks) for which every check so far would have come out the same.
    pub fn span(&self) -> Span {
        self.span
    }

    /// Whether a request of `tokens` tokens could ever fit in the pool.
    pub fn fits(&mut self, tokens: u32) -> bool {
        let need = u64::from(self.blocks_for(tokens));
        self.span.at_least(self.total, need)
    }

    /// Blocks a request of `tokens` tokens holds: its token blocks in every full-attention group
    /// and, once it holds any, its linear-attention states.
    pub fn blocks_for(&self, tokens: u32) -> u32 {
        if tokens == 0 {
            return 0;
        }
        tokens
            .div_ceil(self.block_size)
            .saturating_mul(self.token_groups)
            .saturating_add(self.state_groups)
    }

    /// The longest request the whole pool holds, tokens (whole blocks).
    pub fn tokens_capacity(&self) -> u64 {
        self.total.saturating_sub(u64::from(self.state_groups)) / u64::from(self.token_groups)
            * u64::from(self.block_size)
    }

    /// Grows a request holding `held` blocks to cover `tokens` tokens; returns its new block count,
    /// or `None` (and changes nothing) when the pool is short.
    pub fn grow(&mut self, held: u32, tokens: u32) -> Option<u32> {
        let need = self.blocks_for(tokens).max(held);
        let extra = u64::from(need - held);
        // `extra <= total - used`, compared on the capacity.
        if !self.span.at_least(self.total, self.used + extra) {
            return None;
        }
        self.used += extra;
        Some(need)
    }

    /// Returns `blocks` blocks to the pool.
    pub fn release(&mut self, blocks: u32) {
        let blocks = u64::from(blocks);
        assert!(
            blocks <= self.used,
            "releasing {blocks} blocks, only {} in use",
            self.used
        );
        self.used -= blocks;
    }

    pub fn invariants_hold(&self) -> bool {
        self.used <= self.total
    }
}

#[cfg(test)]
mod tests;
