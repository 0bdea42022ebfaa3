//! Limit spans: for each scheduler limit of a run (`--max-num-seqs`, `--max-num-batched-tokens`,
//! the KV-cache capacity in blocks per engine), the interval of values for which every comparison
//! the run made against that limit would have come out the same.
//!
//! The scheduler (`scheduler.rs`) and the KV cache (`kv_cache.rs`) route every comparison that
//! involves a limit through a [`Span`], which does the comparison and narrows itself to the values
//! that agree with its outcome: a couple of integer min/max, nothing else. A run whose limits are
//! replaced by any values inside its spans makes the same comparisons with the same outcomes, in
//! the same order, so it takes the same branches and runs identically, event for event (the limits
//! are read nowhere else in the simulation). The planner uses this to reuse one simulation for
//! every candidate that differs from it only in limits inside its spans (docs/planner.md).

/// The values `[lo, hi]` of one limit that agree with every comparison recorded so far.
///
/// Invariant: the limit the run actually used lies inside (so `lo <= hi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    pub lo: u64,
    pub hi: u64,
}

impl Span {
    /// No comparison yet: every value agrees.
    pub const ALL: Span = Span {
        lo: 0,
        hi: u64::MAX,
    };

    pub fn contains(self, value: u64) -> bool {
        self.lo <= value && value <= self.hi
    }

    /// The values inside both spans (`lo > hi` when they are disjoint).
    pub fn intersect(self, other: Span) -> Span {
        Span {
            lo: self.lo.max(other.lo),
            hi: self.hi.min(other.hi),
        }
    }

    /// Compares `limit >= need` and keeps the values that give the same answer.
    pub fn at_least(&mut self, limit: u64, need: u64) -> bool {
        if limit >= need {
            self.lo = self.lo.max(need);
            true
        } else {
            // `need > limit >= 0`, so `need - 1` cannot wrap.
            self.hi = self.hi.min(need - 1);
            false
        }
    }

    /// Compares `limit > used` and keeps the values that give the same answer.
    pub fn above(&mut self, limit: u64, used: u64) -> bool {
        match used.checked_add(1) {
            Some(need) => self.at_least(limit, need),
            // Nothing exceeds `u64::MAX`, whatever the limit.
            None => false,
        }
    }

    /// `need.min(limit - used)`, a chunk cut to what is left of a budget of `limit` after `used`
    /// (`used <= limit`). When the budget cuts it, the chunk's size is the limit's value itself,
    /// so the span pins to exactly that value.
    pub fn chunk(&mut self, limit: u64, used: u64, need: u64) -> u64 {
        let left = limit - used;
        if need <= left {
            self.lo = self.lo.max(used + need);
            need
        } else {
            self.lo = self.lo.max(limit);
            self.hi = self.hi.min(limit);
            left
        }
    }
}

/// The spans of every scheduler limit of a run (intersected over every engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitSpans {
    pub max_num_seqs: Span,
    pub max_num_batched_tokens: Span,
    /// KV-cache capacity in blocks per engine (every engine has the same).
    pub kv_blocks: Span,
}

/// One value per limit, as a run uses them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LimitValues {
    pub max_num_seqs: u64,
    pub max_num_batched_tokens: u64,
    pub kv_blocks: u64,
}

impl LimitSpans {
    pub const ALL: LimitSpans = LimitSpans {
        max_num_seqs: Span::ALL,
        max_num_batched_tokens: Span::ALL,
        kv_blocks: Span::ALL,
    };

    pub fn intersect(self, other: LimitSpans) -> LimitSpans {
        LimitSpans {
            max_num_seqs: self.max_num_seqs.intersect(other.max_num_seqs),
            max_num_batched_tokens: self
                .max_num_batched_tokens
                .intersect(other.max_num_batched_tokens),
            kv_blocks: self.kv_blocks.intersect(other.kv_blocks),
        }
    }

    /// Whether a run with these limits would make every recorded comparison the same way.
    pub fn contains(&self, values: LimitValues) -> bool {
        self.max_num_seqs.contains(values.max_num_seqs)
            && self
                .max_num_batched_tokens
                .contains(values.max_num_batched_tokens)
            && self.kv_blocks.contains(values.kv_blocks)
    }
}

#[cfg(test)]
mod tests;
