//! Expert routing of a MoE layer's rows, priced per FFN (EP) rank, from pools of sampled routings.
//!
//! Per distinct `(real rows, padded rows)` of an EP group, a small pool of routings is sampled once
//! (per-token top-k from `model/workload.rs`), each reduced to what prices an EP rank's routed
//! experts: its active local experts and the most tokens any of them got (the `moe.routed_experts`
//! calibration axes). Every (step, layer, stage) then picks one pool entry, so the load imbalance
//! between layers and ranks comes from sampled routings, never from averages.
//!
//! The picks of a step come from a stream named by the step's inputs ([`RoutingPools::seed_picks`]
//! with a digest of the step's shape): two steps with identical inputs route identically. That
//! makes a step a pure function of its shape, so `Cluster` can memoise whole steps and give the
//! same bytes with the memo on or off.
//!
//! Entry `e` of every pool counts the first tokens of one stream of sampled tokens, entry `e`'s
//! (`routing/streams.rs`): the pool for `n` rows holds the first `n` tokens of each entry's stream,
//! so pools of nearby row counts are nested (common random numbers: a step one row larger routes
//! one more token, not a fresh sample) and a pool costs a kept checkpoint and a few draws, not `n`
//! fresh tokens. A pool is thus a pure function of the run's seed, the sampler, the EP ranks and
//! its row counts, whatever order the run needs pools in. The streams and the sampled loads are
//! shared between runs in one process (a sweep's candidates, whatever their EP ranks) through a
//! [`LoadsCache`] the caller owns; each run prices them with its own cost model.
//!
//! Padded rows (CUDA-graph padding, afd-spec §5.1) carry identical dummy hidden states, so they all
//! pick the same top-k experts; that fixed set is drawn once per run [inferred: padding rows are the
//! embedding of one token id].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::RngExt;

use crate::model::workload::ExpertSampler;
use crate::rng::SimRng;
use crate::time::SimDuration;

mod streams;

use streams::TokenStreams;

/// Sampled routings for one `(real, padded)` row count.
#[derive(Clone, Debug)]
struct Pool {
    /// `entries[e * ranks + r]` is the routed-expert time of EP rank `r` in pool entry `e`.
    cost: Vec<SimDuration>,
    /// `(active experts, max tokens per expert)` in the same layout, for tests and reports.
    load: Arc<[(u32, u32)]>,
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
    /// The pools' stream before any draw; each pool draws from its own stream of the same seed.
    build_template: SimRng,
    /// What names this run's token streams and, with the EP ranks and row counts, its pools'
    /// loads in the shared [`LoadsCache`].
    family: StreamsKey,
    pick_rng: SimRng,
    /// The run's pick stream before any pick; [`RoutingPools::seed_picks`] derives each step's.
    pick_template: SimRng,
    token: Vec<u32>,
    counts: Vec<u32>,
    /// `(real, padded)` of every pool picked from since the last [`RoutingPools::seed_picks`].
    touched: Vec<(u32, u32)>,
    loads: LoadsCache,
}

impl RoutingPools {
    /// `ranks` EP ranks own contiguous blocks of `sampler.experts() / ranks` experts.
    /// `loads` caches the pools' sampled loads; runs that hold clones of one cache draw each pool
    /// once between them.
    pub fn new(
        sampler: ExpertSampler,
        ranks: u32,
        pool_size: usize,
        mut build_rng: SimRng,
        pick_rng: SimRng,
        loads: LoadsCache,
    ) -> RoutingPools {
        assert!(
            ranks >= 1 && pool_size >= 1,
            "ranks {ranks}, pool size {pool_size}"
        );
        let mut padding_experts = Vec::new();
        sampler.sample_token(&mut build_rng, &mut padding_experts);
        build_rng.set_word_pos(0);
        let experts = sampler.experts() as usize;
        let family = StreamsKey {
            seed: build_rng.get_seed(),
            stream: build_rng.get_stream(),
            sampler: sampler.fingerprint(),
            pool_size: pool_size as u32,
        };
        RoutingPools {
            family,
            sampler,
            ranks,
            pool_size,
            pools: BTreeMap::new(),
            padding_experts,
            build_template: build_rng,
            pick_template: pick_rng.clone(),
            pick_rng,
            token: Vec::new(),
            counts: vec![0; experts],
            touched: Vec::new(),
            loads,
        }
    }

    /// Restarts the picks on the stream named `key` (a digest of a step's inputs): every later pick
    /// until the next call is a pure function of the run's seed and `key`.
    pub fn seed_picks(&mut self, key: u64) {
        self.touched.clear();
        self.pick_rng.clone_from(&self.pick_template);
        self.pick_rng.set_stream(key);
        self.pick_rng.set_word_pos(0);
    }

    /// The pools picked from since the last [`RoutingPools::seed_picks`], as `(real, padded)`.
    pub fn touched(&self) -> &[(u32, u32)] {
        &self.touched
    }

    /// Builds the pool for `(real, padded)` if this run has not yet: a step replayed from another
    /// run's memo builds (and prices, and counts) the pools it would have picked from.
    pub fn ensure(
        &mut self,
        real: u32,
        padded: u32,
        mut price: impl FnMut(u32, u32) -> SimDuration,
    ) {
        if !self.pools.contains_key(&(real, padded)) {
            let pool = self.build(real, padded, &mut price);
            self.pools.insert((real, padded), pool);
        }
    }

    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    fn rank_of(&self, expert: u32) -> usize {
        let per_rank = self.sampler.experts().div_ceil(self.ranks);
        (expert / per_rank) as usize
    }

    /// The sampled `(active experts, max tokens per expert)` of every rank of every entry of the
    /// pool for `(real, padded)`: from the [`LoadsCache`] when a run sharing it drew it, else drawn
    /// now.
    fn loads_of(&mut self, real: u32, padded: u32) -> Arc<[(u32, u32)]> {
        let key = LoadsKey {
            family: self.family.clone(),
            ranks: self.ranks,
            real,
            padded,
        };
        if let Some(loads) = self.loads.get(&key) {
            return loads;
        }
        let loads: Arc<[(u32, u32)]> = self.draw_loads(real, padded).into();
        self.loads.insert(key, Arc::clone(&loads));
        loads
    }

    fn draw_loads(&mut self, real: u32, padded: u32) -> Vec<(u32, u32)> {
        let ranks = self.ranks as usize;
        let streams = self.loads.streams(self.family.clone(), || {
            TokenStreams::new(&self.build_template, self.sampler.experts(), self.pool_size)
        });
        let mut load = Vec::with_capacity(self.pool_size * ranks);
        for entry in 0..self.pool_size {
            streams.counts_at(
                entry,
                real,
                &self.sampler,
                &mut self.counts,
                &mut self.token,
            );
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
            load.extend(per_rank);
        }
        load
    }

    fn build(
        &mut self,
        real: u32,
        padded: u32,
        price: &mut impl FnMut(u32, u32) -> SimDuration,
    ) -> Pool {
        let load = self.loads_of(real, padded);
        let cost = load
            .iter()
            .map(|&(active, max_tokens)| price(active, max_tokens))
            .collect();
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
        self.ensure(real, padded, &mut price);
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
        if self.touched.last() != Some(&(real, padded)) {
            self.touched.push((real, padded));
        }
        self.ensure(real, padded, &mut price);
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
        self.pools.get(&(real, padded)).map(|p| &p.load[..])
    }
}

/// What names a pool's sampled loads across runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct LoadsKey {
    family: StreamsKey,
    ranks: u32,
    real: u32,
    padded: u32,
}

/// Pools' sampled loads, shared by the runs that hold clones of one cache (the planner gives the
/// candidates of a sweep one): a pure cache, since a pool is a function of its key, bounded by
/// [`LOADS_CAPACITY`] pools. The caller owns it; nothing is kept between caches.
#[derive(Clone, Default)]
pub struct LoadsCache {
    table: Arc<Mutex<LoadsTable>>,
    streams: Arc<Mutex<StreamsTable>>,
}

/// What names a pool family's token streams ([`streams`]): every pool of a run, whatever its row
/// counts and EP ranks, counts tokens of the same streams.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct StreamsKey {
    seed: [u8; 32],
    stream: u64,
    sampler: u64,
    pool_size: u32,
}

impl std::fmt::Debug for LoadsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LoadsCache {{ pools: {} }}", self.len())
    }
}

impl LoadsCache {
    /// Pools held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, key: &LoadsKey) -> Option<Arc<[(u32, u32)]>> {
        self.lock().get(key).map(Arc::clone)
    }

    fn insert(&self, key: LoadsKey, loads: Arc<[(u32, u32)]>) {
        let mut table = self.lock();
        if table.len() < LOADS_CAPACITY {
            table.insert(key, loads);
        }
    }

    /// The token streams of `key`, made by `make` if no run sharing the cache made them yet.
    fn streams(&self, key: StreamsKey, make: impl FnOnce() -> TokenStreams) -> Arc<TokenStreams> {
        let mut table = self
            .streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(table.entry(key).or_insert_with(|| Arc::new(make())))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LoadsTable> {
        // A poisoned lock only means another run panicked while inserting a complete entry.
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[expect(
    clippy::disallowed_types,
    reason = "a lookup table of pools' loads; it is never iterated"
)]
type LoadsTable = std::collections::HashMap<LoadsKey, Arc<[(u32, u32)]>>;

#[expect(
    clippy::disallowed_types,
    reason = "a lookup table of token streams; it is never iterated"
)]
type StreamsTable = std::collections::HashMap<StreamsKey, Arc<TokenStreams>>;

const LOADS_CAPACITY: usize = 1 << 16;

#[cfg(test)]
mod tests;
