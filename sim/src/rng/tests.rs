//! Streams are independent and reproducible.

use rand::RngExt;

use super::*;

#[test]
fn same_seed_and_consumer_give_the_same_draws() {
    let a: Vec<u64> = (0..4)
        .map(|_| 0)
        .scan(stream(Seed(7), RngStream::Arrivals), |rng, _: u64| {
            Some(rng.random::<u64>())
        })
        .collect();
    let b: Vec<u64> = (0..4)
        .map(|_| 0)
        .scan(stream(Seed(7), RngStream::Arrivals), |rng, _: u64| {
            Some(rng.random::<u64>())
        })
        .collect();
    assert_eq!(a, b);
}

#[test]
fn consumers_and_seeds_draw_different_values() {
    let first = |seed, consumer| stream(Seed(seed), consumer).random::<u64>();
    assert_ne!(first(7, RngStream::Arrivals), first(7, RngStream::Lengths));
    assert_ne!(first(7, RngStream::Arrivals), first(8, RngStream::Arrivals));
}
