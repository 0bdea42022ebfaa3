//! Sizing decisions of the probes, as pure functions: repetitions per graph replay, rotation lengths
//! that keep working sets out of L2, and how the MLA decode kernel splits a context.

/// Repetitions captured into one timing graph: enough to last `min_replay_us` at `estimate_us` each,
/// at least `min_reps` (the L2 rotation), at most `max_reps`.
pub fn graph_reps(estimate_us: f64, min_replay_us: f64, min_reps: usize, max_reps: usize) -> usize {
    let by_time = if estimate_us > 0.0 && estimate_us.is_finite() {
        (min_replay_us / estimate_us).ceil().max(1.0) as usize
    } else {
        1
    };
    by_time.max(min_reps).clamp(1, max_reps.max(1))
}

/// Distinct copies of a `bytes`-sized working set that together exceed `factor` × L2.
pub fn rotation(bytes: usize, l2_bytes: usize, factor: usize) -> usize {
    if bytes == 0 {
        return 1;
    }
    (factor * l2_bytes).div_ceil(bytes).max(1)
}

/// How an MLA decode launch splits each query's context (flash decoding).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MlaSplit {
    /// Tokens per split, a multiple of the 32-token tile.
    pub chunk: usize,
    /// Splits per query.
    pub splits: usize,
}

/// Shortest split worth its fixed cost (loading 16 query heads and writing a 32 KiB partial).
pub const MLA_MIN_SPLIT_TOKENS: usize = 128;

impl MlaSplit {
    /// Splits so that `queries × head_groups × splits` reaches `target_blocks`, each split at least
    /// [`MLA_MIN_SPLIT_TOKENS`] long (unless the context is shorter).
    pub fn choose(
        queries: usize,
        head_groups: usize,
        max_len: usize,
        target_blocks: usize,
    ) -> MlaSplit {
        let max_len = max_len.max(1);
        let by_occupancy = target_blocks.div_ceil((queries * head_groups).max(1));
        let by_length = max_len.div_ceil(MLA_MIN_SPLIT_TOKENS).max(1);
        let splits = by_occupancy.clamp(1, by_length);
        let chunk = max_len.div_ceil(splits).div_ceil(32) * 32;
        MlaSplit {
            chunk,
            splits: max_len.div_ceil(chunk),
        }
    }

    /// A fixed chunk (self-tests use short chunks to exercise the split merge).
    pub fn with_chunk(max_len: usize, chunk: usize) -> MlaSplit {
        let chunk = chunk.max(32).div_ceil(32) * 32;
        MlaSplit {
            chunk,
            splits: max_len.max(1).div_ceil(chunk),
        }
    }
}

/// Bytes moved by an MLA decode over `queries` sequences of `len` cached tokens: the KV rows read once
/// (576 bf16 each), the query read and the output written.
pub fn mla_bytes(queries: usize, heads: usize, len: usize) -> usize {
    queries * (len * 576 * 2 + heads * 576 * 2 + heads * 512 * 2)
}

#[cfg(test)]
mod tests;
