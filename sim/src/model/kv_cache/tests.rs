//! Block accounting and capacity arithmetic.

use super::*;

#[test]
fn growing_allocates_whole_blocks_and_refuses_overflow() {
    let mut kv = KvCache::new(64, 3);
    assert_eq!(kv.grow(0, 65), Some(2));
    assert_eq!(kv.used_blocks(), 2);
    assert_eq!(kv.grow(2, 128), Some(2));
    assert_eq!(kv.grow(2, 200), None);
    assert_eq!(kv.used_blocks(), 2);
    kv.release(2);
    assert_eq!(kv.free_blocks(), 3);
}

#[test]
fn capacity_subtracts_weights_and_reserve() {
    // 100 GB x 0.9 - 10 GB - 0 = 80 GB of 1,000-byte tokens in 10-token blocks = 8M blocks.
    assert_eq!(
        capacity_blocks(100_000_000_000, 0.9, 10_000_000_000, 0, 1000, 10),
        8_000_000
    );
    assert_eq!(capacity_blocks(1000, 0.5, 600, 0, 10, 1), 0);
}
