//! Per-entry token streams of the routing pools, with checkpoints of their expert counts.
//!
//! Entry `e` of every pool of a run reads the same stream of sampled tokens: the pool for `n` rows
//! counts the first `n` tokens of that stream. So pools of different row counts are nested (a step
//! one row larger routes one more token, not a fresh sample: common random numbers between the
//! loads a run or a capacity search compares), and a pool never redraws what a smaller one drew.
//! The stream keeps its per-expert counts every [`CHECKPOINT_TOKENS`] tokens with the generator's
//! position there, so the counts of `n` tokens cost one checkpoint copy and fewer than
//! [`CHECKPOINT_TOKENS`] draws once the stream has reached `n`.

use std::sync::Mutex;

use crate::model::workload::ExpertSampler;
use crate::rng::SimRng;

/// Tokens between two kept count vectors of one entry's stream.
pub(super) const CHECKPOINT_TOKENS: u32 = 32;

/// One entry's stream: its generator and the counts at every checkpoint so far.
#[derive(Debug)]
struct EntryStream {
    rng: SimRng,
    /// `counts[k * experts..(k + 1) * experts]`: tokens per expert after `k * CHECKPOINT_TOKENS`.
    counts: Vec<u32>,
    /// The generator's word position at checkpoint `k`.
    word_pos: Vec<u128>,
}

/// The token streams of every entry of one pool family (one seed, sampler and pool size).
#[derive(Debug)]
pub(super) struct TokenStreams {
    experts: usize,
    entries: Vec<Mutex<EntryStream>>,
}

impl TokenStreams {
    /// `entries` streams, entry `e` on the stream of `template` named by `e`.
    pub(super) fn new(template: &SimRng, experts: u32, entries: usize) -> TokenStreams {
        let experts = experts as usize;
        let entries = (0..entries)
            .map(|e| {
                let mut rng = template.clone();
                rng.set_stream(xxhash_rust::xxh3::xxh3_64(
                    &[b"pool entry".as_slice(), &(e as u64).to_le_bytes()].concat(),
                ));
                rng.set_word_pos(0);
                Mutex::new(EntryStream {
                    rng,
                    counts: vec![0; experts],
                    word_pos: vec![0],
                })
            })
            .collect();
        TokenStreams { experts, entries }
    }

    /// Writes into `out` (one slot per expert) how many of the first `n` tokens of entry `entry`'s
    /// stream picked each expert. `token` is scratch for one token's experts.
    pub(super) fn counts_at(
        &self,
        entry: usize,
        n: u32,
        sampler: &ExpertSampler,
        out: &mut [u32],
        token: &mut Vec<u32>,
    ) {
        let experts = self.experts;
        assert_eq!(out.len(), experts, "one count per expert");
        // A poisoned lock only means another run panicked; the stream's kept checkpoints are whole.
        let mut s = self.entries[entry]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let k = (n / CHECKPOINT_TOKENS) as usize;
        while s.word_pos.len() <= k {
            let last = s.word_pos.len() - 1;
            let mut next = s.counts[last * experts..(last + 1) * experts].to_vec();
            let pos = s.word_pos[last];
            s.rng.set_word_pos(pos);
            draw(sampler, &mut s.rng, CHECKPOINT_TOKENS, &mut next, token);
            let pos = s.rng.get_word_pos();
            s.counts.extend_from_slice(&next);
            s.word_pos.push(pos);
        }
        out.copy_from_slice(&s.counts[k * experts..(k + 1) * experts]);
        let pos = s.word_pos[k];
        s.rng.set_word_pos(pos);
        draw(sampler, &mut s.rng, n % CHECKPOINT_TOKENS, out, token);
    }
}

/// Adds `tokens` sampled tokens' experts to `counts`.
fn draw(
    sampler: &ExpertSampler,
    rng: &mut SimRng,
    tokens: u32,
    counts: &mut [u32],
    token: &mut Vec<u32>,
) {
    for _ in 0..tokens {
        sampler.sample_token(rng, token);
        for &e in token.iter() {
            counts[e as usize] += 1;
        }
    }
}
