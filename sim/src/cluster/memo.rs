//! The step memo: a whole global step (pricing and layer pipeline) remembered by its inputs.
//!
//! A step's timing is a pure function of its shape (what every engine runs, padding, ubatches,
//! graph or eager), the scheduler's request count (host time), and the routings it draws — and the
//! routings are drawn from a stream named by a digest of the same inputs
//! ([`RoutingPools::seed_picks`](crate::model::routing::RoutingPools::seed_picks)). The layer
//! pipeline is shift-invariant (max-plus over times relative to the step's start), and the state a
//! step carries in (`PipelineState`: FFN host ready, inbound port free) only enters through
//! `max(state, t)` with `t` at or after the step's start, so when that state is at or before the
//! start it cannot change the step. Then the step's timing relative to its start, the state it
//! leaves relative to its start, and the pricing's usage counts are all the memo needs to replay
//! the step exactly. The memo is a cache, never an approximation: `ModelOptions::step_memo` off
//! gives the same bytes (`scenarios::the_step_memo_is_exact` in `sim/tests/it`).
//!
//! A memo can outlive its run: [`Cluster::take_step_memo`](super::Cluster::take_step_memo) and
//! [`Cluster::adopt_step_memo`](super::Cluster::adopt_step_memo) hand it to the next run of the same
//! pipeline (layout, cost model, seed — its `context`), as a sweep does for the candidates of one
//! layout: their runs differ in batch limits, graphs or DBO, but most of their steps have the same
//! inputs, so each step is priced and swept once per layout, not once per candidate. A memo whose
//! context differs from the adopting run's is dropped.
//!
//! Entries are looked up by a digest of the encoded inputs and confirmed by comparing the
//! whole encoding. Growth stops at [`StepMemo::CAPACITY`] entries, and after
//! [`StepMemo::PROBATION`] steps with fewer than one hit in [`StepMemo::MIN_HIT_SHARE`] the memo
//! stops storing (a run whose steps never repeat pays no memory for it); neither changes results.
//!
//! It is not a price memo, and it shares no table with the one price memo, the run's
//! [`PriceBook`](crate::model::cost::PriceBook): that one keys a price by an operation and two
//! integers, holds fixed-size values, lives as long as its run and never needs bounding, while this
//! one keys a whole step by a variable-length encoding (found by digest, confirmed by comparing
//! the encoding), holds pipeline state and totals besides, bounds its growth and outlives its run;
//! one table type for both would make each pay for the other's needs. Of pricing it keeps only the
//! usage counts, and replays them into the run's book.

use std::hash::{BuildHasherDefault, Hasher};

use crate::closed_form::DecodeStep;
use crate::cluster::Regime;
use crate::model::cost::ClassUsage;
use crate::pipeline::{PipelineState, StepTiming};
use crate::step::StepShape;

/// A hasher for keys that already are digests.
#[derive(Default)]
struct Digest(u64);

impl Hasher for Digest {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; fold anything else in for safety.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[expect(
    clippy::disallowed_types,
    reason = "a lookup table from digests to entries; it is never iterated"
)]
type DigestTable = std::collections::HashMap<u64, u32, BuildHasherDefault<Digest>>;

/// What a step adds to the run's totals (`Cluster::account`), kept with it.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Accounted {
    pub(super) shortcut_layers: u32,
    pub(super) attention_busy_sum: u64,
    pub(super) ffn_busy_sum: u64,
    pub(super) link_busy_sum: u64,
    /// Busiest Attention rank, FFN rank and link.
    pub(super) busiest: (u64, u64, u64),
    /// The busiest device, and whether the host's issue set the step's pace instead.
    pub(super) regime: Regime,
    pub(super) host_bound: bool,
    pub(super) overlap: f64,
    pub(super) real_rows: u64,
    pub(super) padded_rows: u64,
    pub(super) oversized: u64,
    /// The closed-form cross-checks' record of a decode step (AFD only).
    pub(super) decode: Option<DecodeStep>,
}

/// What a step left behind, relative to its start.
#[derive(Debug)]
pub(super) struct Remembered {
    key: Box<[u64]>,
    forward_start: u64,
    end: u64,
    host: u64,
    kernels: u64,
    /// `PipelineState` after the step, relative to its start (AFD only; empty when colocated).
    ffn_ready: Box<[i64]>,
    port_free: Box<[i64]>,
    pub(super) accounted: Accounted,
    /// Usage counts the step's pricing recorded.
    pub(super) usage: Vec<(usize, ClassUsage)>,
    /// Routing pools the step picked from, as `(real, padded)`.
    pub(super) pools: Box<[(u32, u32)]>,
    /// The memo's generation (run) that last replayed or made it: a run replaying an entry of an
    /// earlier run first builds the entry's pools, as pricing the step would have.
    pub(super) generation: u32,
}

/// Remembered steps of one pipeline (see the module documentation); opaque outside `cluster`.
#[derive(Debug, Default)]
pub struct StepMemo {
    /// Digest of what every remembered step assumed: layout, cost model, seed.
    pub(super) context: u64,
    index: DigestTable,
    entries: Vec<Remembered>,
    key: Vec<u64>,
    digest: u64,
    storing: bool,
    /// Incremented each time a run adopts the memo.
    pub(super) generation: u32,
    pub(super) hits: u64,
    pub(super) misses: u64,
}

impl StepMemo {
    pub(super) const CAPACITY: usize = 1 << 16;
    pub(super) const PROBATION: u64 = 4096;
    /// One hit in this many steps keeps the memo storing after probation.
    pub(super) const MIN_HIT_SHARE: u64 = 20;

    pub(super) fn new(context: u64) -> StepMemo {
        StepMemo {
            context,
            storing: true,
            ..StepMemo::default()
        }
    }

    /// Encodes the inputs of the step `shape` with `scheduled` requests on the busiest engine and
    /// returns their digest (also the name of the step's routing stream).
    pub(super) fn encode(&mut self, shape: &StepShape, scheduled: u32) -> u64 {
        // The digest folds the inputs' canonical words (flags, sampled counts, then per stage and
        // engine: rows|real, seqs|prefill chunks, decode context, each chunk); the key kept for
        // comparison is a compact, equally injective packing of the same values.
        let works = &shape.work[..shape.stages];
        let words = 1
            + shape.sampled.len()
            + works
                .iter()
                .flatten()
                .map(|w| 3 + w.prefill.len())
                .sum::<usize>();
        let flags = u64::from(shape.graph)
            | u64::from(shape.ffn_graph) << 1
            | (shape.stages as u64) << 2
            | u64::from(scheduled) << 8;
        let mut fold = Fold::new(words);
        let key = &mut self.key;
        key.clear();
        fold.add(flags);
        key.push(flags);
        for pair in shape.sampled.chunks(2) {
            let (a, b) = (u64::from(pair[0]), pair.get(1).map_or(0, |&b| u64::from(b)));
            fold.add(a);
            if pair.len() == 2 {
                fold.add(b);
            }
            key.push(a | b << 32);
        }
        for work in works.iter().flatten() {
            let (rows, real, seqs) = (work.rows, work.real, work.decode_seqs);
            let chunks = work.prefill.len();
            fold.add(u64::from(rows) | u64::from(real) << 32);
            fold.add(u64::from(seqs) | (chunks as u64) << 32);
            fold.add(work.decode_context);
            if rows < 1 << 20 && real < 1 << 20 && seqs < 1 << 16 && chunks < 1 << 7 {
                key.push(
                    1 << 63
                        | u64::from(rows)
                        | u64::from(real) << 20
                        | u64::from(seqs) << 40
                        | (chunks as u64) << 56,
                );
                // A decode context is a sum over decode sequences: zero without them.
                if seqs > 0 {
                    key.push(work.decode_context);
                }
            } else {
                // Too large to pack: a zero word (packed words have bit 63 set), then in full.
                key.push(0);
                key.push(u64::from(rows) | u64::from(real) << 32);
                key.push(u64::from(seqs) | (chunks as u64) << 32);
                key.push(work.decode_context);
            }
            for &(tokens, context) in &work.prefill {
                let chunk = u64::from(tokens) | u64::from(context) << 32;
                fold.add(chunk);
                key.push(chunk);
            }
        }
        self.digest = fold.finish();
        self.digest
    }

    /// The remembered step with the inputs last encoded.
    pub(super) fn find(&mut self) -> Option<&mut Remembered> {
        let found = match self.index.get(&self.digest) {
            Some(&i) if *self.entries[i as usize].key == self.key[..] => {
                Some(&mut self.entries[i as usize])
            }
            _ => None,
        };
        if found.is_some() {
            self.hits += 1;
        } else {
            self.misses += 1;
        }
        found
    }

    /// Remembers the step just run from `start` with the inputs last encoded.
    pub(super) fn store(
        &mut self,
        start: u64,
        timing: &StepTiming,
        state: Option<&PipelineState>,
        accounted: Accounted,
        usage: Vec<(usize, ClassUsage)>,
        pools: &[(u32, u32)],
    ) {
        let steps = self.hits + self.misses;
        if steps >= Self::PROBATION && self.hits * Self::MIN_HIT_SHARE < steps {
            self.storing = false;
        }
        if !self.storing || self.entries.len() >= Self::CAPACITY {
            return;
        }
        if self.index.contains_key(&self.digest) {
            // A digest collision with different inputs: keep the first.
            return;
        }
        let relative = |v: &[u64]| -> Box<[i64]> {
            v.iter()
                .map(|&t| t as i64 - start as i64)
                .collect::<Vec<_>>()
                .into_boxed_slice()
        };
        let (ffn_ready, port_free) = match state {
            Some(state) => (relative(&state.ffn_ready), relative(&state.port_free)),
            None => (Box::default(), Box::default()),
        };
        self.index.insert(self.digest, self.entries.len() as u32);
        self.entries.push(Remembered {
            key: self.key.clone().into_boxed_slice(),
            forward_start: timing.forward_start - start,
            end: timing.end - start,
            host: timing.host,
            kernels: timing.kernels,
            ffn_ready,
            port_free,
            accounted,
            usage,
            pools: pools.into(),
            generation: self.generation,
        });
    }
}

impl Remembered {
    /// Writes the step's times and the state it leaves as if it had run from `start` (its busy
    /// times are in [`Accounted`]; `timing`'s per-rank vectors are left as they were).
    pub(super) fn replay(
        &self,
        start: u64,
        timing: &mut StepTiming,
        state: Option<&mut PipelineState>,
    ) {
        timing.forward_start = start + self.forward_start;
        timing.end = start + self.end;
        timing.host = self.host;
        timing.kernels = self.kernels;
        if let Some(state) = state {
            let absolute = |to: &mut Vec<u64>, from: &[i64]| {
                to.clear();
                to.extend(from.iter().map(|&d| (start as i64 + d) as u64));
            };
            absolute(&mut state.ffn_ready, &self.ffn_ready);
            absolute(&mut state.port_free, &self.port_free);
        }
    }
}

/// A 64-bit digest of a sequence of words whose count is known up front: a multiply-rotate fold
/// and a SplitMix64 finish, so every input bit reaches every output bit (digests name routing
/// streams and index the memo; equal digests of different keys are told apart by the keys).
struct Fold(u64);

impl Fold {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;

    fn new(words: usize) -> Fold {
        Fold((words as u64).wrapping_mul(Self::K))
    }

    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(23) ^ word).wrapping_mul(Self::K);
    }

    fn finish(self) -> u64 {
        let mut h = self.0;
        h ^= h >> 30;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^ (h >> 31)
    }
}
