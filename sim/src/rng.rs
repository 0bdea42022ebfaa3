//! Named, seeded random streams: one ChaCha8 stream per consumer.
//!
//! Every consumer owns its stream (`seed_from_u64(seed)` then `set_stream(consumer)`), so adding a
//! consumer or drawing more from one never shifts another's draws (STYLE.md §4). No OS randomness,
//! no `StdRng`/`SmallRng`: their output may change between versions.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The seed of a run; the only source of randomness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seed(pub u64);

/// Who draws from a stream. The discriminant is the ChaCha stream id and must never change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u64)]
pub enum RngStream {
    /// Inter-arrival times of the client (`vllm bench serve` request rate and burstiness).
    Arrivals = 1,
    /// Prompt and output lengths of the random dataset.
    Lengths = 2,
    /// Which API server process (SO_REUSEPORT) accepts each request (afd-spec §7.2).
    ApiServers = 3,
    /// Building the pools of sampled expert routings.
    RoutingPools = 4,
    /// Picking a routing from a pool for each (step, layer, stage).
    RoutingPicks = 5,
    /// The experts a trained model's decode batch activates under a skewed popularity (the engine
    /// model's trained-weights term, `model/engine/trained.rs`; drawn from a fixed seed, as a
    /// property of the model, not of a run).
    TrainedRouting = 6,
}

/// The random generator every consumer uses.
pub type SimRng = ChaCha8Rng;

/// The stream `consumer` draws from in a run seeded with `seed`.
pub fn stream(seed: Seed, consumer: RngStream) -> SimRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.0);
    rng.set_stream(consumer as u64);
    rng
}

#[cfg(test)]
mod tests;
