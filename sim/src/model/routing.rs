//! Expert routing of a MoE layer's rows, priced per FFN (EP) rank, from pools of sampled routings.
//!
//! Per distinct `(real rows, padded rows)` of an EP group, a small pool of routings is sampled once
//! (per-token top-k from `model/workload.rs`), each reduced to what prices an EP rank's routed
//! experts: its active local experts and the most tokens any of them got (the `moe.routed_experts`
//! calibration axes). Every (step, layer, stage) then picks one pool entry with its own stream, so
//! the load imbalance between layers and ranks comes from sampled routings, never from averages.
//!
//! Padded rows (CUDA-graph padding, afd-spec §5.1) carry identical dummy hidden states, so they all
//! pick the same top-k experts; that fixed set is drawn once per run [inferred: padding rows are the
//! embedding of one token id].

use std::collections::BTreeMap;

use rand::RngExt;

use crate::model::workload::ExpertSampler;
use crate::rng::SimRng;
use crate::time::SimDuration;

/// Sampled routings for one `(real, padded)` row count.
#[derive(Clone, Debug)]
struct Pool {
    /// `entries[e * ranks + r]` is the routed-expert time of EP rank `r` in pool entry `e`.
    cost: Vec<SimDuration>,
    /// `(active experts, max tokens per expert)` in the same layout, for tests and reports.
    load: Vec<(u32, u32)>,
}

/// All pools of a run and the streams that fill and pick from them.
#[derive(Debug)]
pub struct RoutingPools {
    sampler: ExpertSampler,
    /// EP ranks sharing the experts (1 without expert parallelism: every rank holds every expert).
    ranks: u32,
    pool_size: usize,
    pools: BTreeMap<(u32, u32), Pool>,
    padding_experts: Vec<u32>,
    build_rng: SimRng,
    pick_rng: SimRng,
    token: Vec<u32>,
    counts: Vec<u32>,
}

impl RoutingPools {
    /// `ranks` EP ranks own contiguous blocks of `sampler.experts() / ranks` experts.
    pub fn new(
        sampler: ExpertSampler,
        ranks: u32,
        pool_size: usize,
        mut build_rng: SimRng,
        pick_rng: SimRng,
    ) -> RoutingPools {
        assert!(
            ranks >= 1 && pool_size >= 1,
            "ranks {ranks}, pool size {pool_size}"
        );
        let mut padding_experts = Vec::new();
        sampler.sample_token(&mut build_rng, &mut padding_experts);
        let experts = sampler.experts() as usize;
        RoutingPools {
            sampler,
            ranks,
            pool_size,
            pools: BTreeMap::new(),
            padding_experts,
            build_rng,
            pick_rng,
            token: Vec::new(),
            counts: vec![0; experts],
        }
    }

    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    fn rank_of(&self, expert: u32) -> usize {
        let per_rank = self.sampler.experts().div_ceil(self.ranks);
        (expert / per_rank) as usize
    }

    fn build(
        &mut self,
        real: u32,
        padded: u32,
        price: &mut impl FnMut(u32, u32) -> SimDuration,
    ) -> Pool {
        let ranks = self.ranks as usize;
        let mut cost = Vec::with_capacity(self.pool_size * ranks);
        let mut load = Vec::with_capacity(self.pool_size * ranks);
        for _ in 0..self.pool_size {
            self.counts.iter_mut().for_each(|c| *c = 0);
            for _ in 0..real {
                self.sampler
                    .sample_token(&mut self.build_rng, &mut self.token);
                for &e in &self.token {
                    self.counts[e as usize] += 1;
                }
            }
            for &e in &self.padding_experts {
                self.counts[e as usize] += padded;
            }
            let mut per_rank = vec![(0u32, 0u32); ranks];
            for (e, &n) in self.counts.iter().enumerate() {
                if n > 0 {
                    let slot = &mut per_rank[self.rank_of(e as u32)];
                    slot.0 += 1;
                    slot.1 = slot.1.max(n);
                }
            }
            for (active, max_tokens) in per_rank {
                cost.push(price(active, max_tokens));
                load.push((active, max_tokens));
            }
        }
        Pool { cost, load }
    }

    /// Picks one sampled routing for an EP group that processes `real` real and `padded` padded rows
    /// and returns the routed-expert time of each EP rank. `price(active, max_tokens_per_expert)`
    /// prices a rank; it is called only while a new pool is built.
    pub fn pick(
        &mut self,
        real: u32,
        padded: u32,
        mut price: impl FnMut(u32, u32) -> SimDuration,
    ) -> &[SimDuration] {
        if !self.pools.contains_key(&(real, padded)) {
            let pool = self.build(real, padded, &mut price);
            self.pools.insert((real, padded), pool);
        }
        let entry = self.pick_rng.random_range(0..self.pool_size);
        let ranks = self.ranks as usize;
        let pool = &self.pools[&(real, padded)];
        &pool.cost[entry * ranks..(entry + 1) * ranks]
    }

    /// [`RoutingPools::pick`] for `picks` consecutive layers of one stage: appends each pick's
    /// per-rank costs to `out` (one pool lookup for all of them).
    pub fn pick_many(
        &mut self,
        real: u32,
        padded: u32,
        picks: usize,
        mut price: impl FnMut(u32, u32) -> SimDuration,
        out: &mut Vec<SimDuration>,
    ) {
        if !self.pools.contains_key(&(real, padded)) {
            let pool = self.build(real, padded, &mut price);
            self.pools.insert((real, padded), pool);
        }
        let ranks = self.ranks as usize;
        let pool = &self.pools[&(real, padded)];
        if self.pool_size.is_power_of_two() && self.pool_size <= 256 {
            // Uniform picks from the bits of one draw: `bits` bits per pick, 64 / bits picks per u64.
            let bits = self.pool_size.trailing_zeros().max(1);
            let per_draw = 64 / bits;
            let mask = (self.pool_size - 1) as u64;
            let mut left = 0;
            let mut word = 0u64;
            for _ in 0..picks {
                if left == 0 {
                    word = self.pick_rng.random::<u64>();
                    left = per_draw;
                }
                let entry = (word & mask) as usize;
                word >>= bits;
                left -= 1;
                out.extend_from_slice(&pool.cost[entry * ranks..(entry + 1) * ranks]);
            }
        } else {
            for _ in 0..picks {
                let entry = self.pick_rng.random_range(0..self.pool_size);
                out.extend_from_slice(&pool.cost[entry * ranks..(entry + 1) * ranks]);
            }
        }
    }

    /// Every `(active, max tokens per expert)` per rank of the pool for `(real, padded)`, if built.
    pub fn loads(&self, real: u32, padded: u32) -> Option<&[(u32, u32)]> {
        self.pools.get(&(real, padded)).map(|p| p.load.as_slice())
    }
}

#[cfg(test)]
mod tests;
