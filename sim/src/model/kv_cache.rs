//! Paged KV cache of one Attention DP engine: a pool of fixed-size blocks (vLLM V1 `KVCacheManager`).
//!
//! Capacity comes from GPU memory × `gpu_memory_utilization` minus weights and a reserve, divided
//! by the bytes one block holds over all layers. Only counts are kept: which block holds which token
//! does not affect timing. Prefix caching is not modelled (every request is cache-cold).
//!
//! Every check against the capacity (an allocation, whether a request fits at all) narrows the
//! capacity's [`Span`] (`limits.rs`).

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
    total: u64,
    used: u64,
    /// Capacities that agree with every check against `total` so far.
    span: Span,
}

/// How many blocks fit on one Attention rank (every TP rank of an engine holds the same blocks for
/// MLA, so one rank's memory decides). Zero when weights and reserve exceed the budget.
pub fn capacity_blocks(
    memory_bytes: u64,
    gpu_memory_utilization: f64,
    weight_bytes: u64,
    reserve_bytes: u64,
    kv_bytes_per_token: u64,
    block_size: u32,
) -> u64 {
    let budget = (memory_bytes as f64 * gpu_memory_utilization) as u64;
    let free = budget
        .saturating_sub(weight_bytes)
        .saturating_sub(reserve_bytes);
    let block_bytes = kv_bytes_per_token.max(1) * u64::from(block_size.max(1));
    free / block_bytes
}

impl KvCache {
    pub fn new(block_size: u32, total_blocks: u64) -> KvCache {
        assert!(block_size > 0, "block size must be positive");
        KvCache {
            block_size,
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

    /// Blocks needed to hold `tokens` tokens.
    pub fn blocks_for(&self, tokens: u32) -> u32 {
        tokens.div_ceil(self.block_size)
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
