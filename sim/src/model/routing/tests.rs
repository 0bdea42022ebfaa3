//! Pools conserve token-expert assignments and concentrate padding.

use super::*;
use crate::model::workload::ExpertPopularity;
use crate::rng::{RngStream, Seed, stream};

fn pools(ranks: u32) -> RoutingPools {
    RoutingPools::new(
        ExpertSampler::new(ExpertPopularity::Uniform, 64, 6),
        ranks,
        4,
        stream(Seed(1), RngStream::RoutingPools),
        stream(Seed(1), RngStream::RoutingPicks),
    )
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
