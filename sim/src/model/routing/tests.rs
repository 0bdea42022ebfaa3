//! Pools conserve token-expert assignments and concentrate padding.

use super::*;
use crate::model::workload::ExpertPopularity;
use crate::rng::{RngStream, Seed, stream};

fn pools(ranks: u32) -> RoutingPools {
    pools_sharing(ranks, &LoadsCache::default())
}

fn pools_sharing(ranks: u32, loads: &LoadsCache) -> RoutingPools {
    RoutingPools::new(
        ExpertSampler::new(ExpertPopularity::Uniform, 64, 6),
        ranks,
        4,
        stream(Seed(1), RngStream::RoutingPools),
        stream(Seed(1), RngStream::RoutingPicks),
        loads.clone(),
    )
}

#[test]
fn runs_sharing_a_loads_cache_draw_each_pool_once_and_alike() {
    let price = |a: u32, t: u32| SimDuration::from_ns(u64::from(a) * 100 + u64::from(t));
    let shared = LoadsCache::default();
    let mut first = pools_sharing(2, &shared);
    first.pick(10, 6, price);
    first.pick(3, 0, price);
    assert_eq!(shared.len(), 2);
    // A second run through the same cache draws nothing new and sees the same loads as a run
    // with a cache of its own.
    let mut second = pools_sharing(2, &shared);
    second.pick(10, 6, price);
    assert_eq!(shared.len(), 2);
    let mut alone = pools(2);
    alone.pick(10, 6, price);
    assert_eq!(second.loads(10, 6), alone.loads(10, 6));
    // Another seed is another key: the shared cache holds both, and nothing leaks into a fresh one.
    let mut other = RoutingPools::new(
        ExpertSampler::new(ExpertPopularity::Uniform, 64, 6),
        2,
        4,
        stream(Seed(2), RngStream::RoutingPools),
        stream(Seed(2), RngStream::RoutingPicks),
        shared.clone(),
    );
    other.pick(10, 6, price);
    assert_eq!(shared.len(), 3);
    assert!(LoadsCache::default().is_empty());
}

#[test]
fn per_rank_loads_cover_every_routed_token() {
    let mut pools = pools(2);
    pools.pick(10, 0, |a, t| SimDuration::from_ns(u64::from(a * 1000 + t)));
    for entry in pools.loads(10, 0).unwrap().chunks(2) {
        let active: u32 = entry.iter().map(|l| l.0).sum();
        // 10 tokens x top-6 touch between 6 and 60 distinct experts.
        assert!((6..=60).contains(&active), "{entry:?}");
        assert!(entry.iter().all(|l| l.0 <= 32));
    }
}

#[test]
fn padded_rows_pile_onto_one_expert_set() {
    let mut pools = pools(1);
    pools.pick(0, 60, |_, _| SimDuration::ZERO);
    // No real tokens: only the six padding experts are active, each with all 60 padded rows.
    assert!(pools.loads(0, 60).unwrap().iter().all(|&l| l == (6, 60)));
}

#[test]
fn picks_are_reproducible_for_a_seed() {
    let price = |a: u32, t: u32| SimDuration::from_ns(u64::from(a) * 100 + u64::from(t));
    let mut first = pools(2);
    let mut second = pools(2);
    for _ in 0..20 {
        assert_eq!(
            first.pick(32, 32, price).to_vec(),
            second.pick(32, 32, price).to_vec()
        );
    }
}

#[test]
fn pools_of_more_rows_count_the_same_tokens_and_more() {
    // Entry e of the pool for n rows counts the first n tokens of entry e's stream: whatever order
    // the pools are built in, and across checkpoints, a larger pool's per-expert counts contain a
    // smaller one's.
    let sampler = ExpertSampler::new(ExpertPopularity::PowerLaw { exponent: 1.2 }, 64, 6);
    let template = stream(Seed(3), RngStream::RoutingPools);
    let ascending = streams::TokenStreams::new(&template, 64, 2);
    let descending = streams::TokenStreams::new(&template, 64, 2);
    let sizes = [0, 1, 31, 32, 33, 300, 1000];
    let mut token = Vec::new();
    let mut counts = |s: &streams::TokenStreams, entry: usize, n: u32| {
        let mut out = vec![0; 64];
        s.counts_at(entry, n, &sampler, &mut out, &mut token);
        out
    };
    let mut up = Vec::new();
    for &n in &sizes {
        up.push(counts(&ascending, 1, n));
    }
    let mut down: Vec<_> = sizes
        .iter()
        .rev()
        .map(|&n| counts(&descending, 1, n))
        .collect();
    down.reverse();
    assert_eq!(
        up, down,
        "a pool does not depend on which pools were built before it"
    );
    for (pair, n) in up.windows(2).zip(&sizes[1..]) {
        assert!(pair[0].iter().zip(&pair[1]).all(|(a, b)| a <= b));
        assert_eq!(pair[1].iter().sum::<u32>(), 6 * n);
    }
    // Another entry is another stream.
    assert_ne!(counts(&ascending, 0, 1000), up[6]);
}

#[test]
fn runs_of_other_ep_ranks_share_the_token_streams() {
    let price = |a: u32, t: u32| SimDuration::from_ns(u64::from(a) * 100 + u64::from(t));
    let shared = LoadsCache::default();
    let mut one = pools_sharing(1, &shared);
    let mut two = pools_sharing(2, &shared);
    one.pick(200, 0, price);
    two.pick(200, 0, price);
    // The same tokens, split over two ranks: the active experts add up, the busiest expert is
    // the busier rank's.
    for (whole, halves) in one
        .loads(200, 0)
        .unwrap()
        .iter()
        .zip(two.loads(200, 0).unwrap().chunks(2))
    {
        assert_eq!(whole.0, halves[0].0 + halves[1].0);
        assert_eq!(whole.1, halves[0].1.max(halves[1].1));
    }
}
