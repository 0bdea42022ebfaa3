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
        capacity_blocks(100_000_000_000, 0.9, 10_000_000_000, 0, 10_000),
        8_000_000
    );
    assert_eq!(capacity_blocks(1000, 0.5, 600, 0, 10), 0);
}

/// A hybrid model's request holds its states (two groups here) once it holds anything, and one
/// block per full-attention group (one here) for each block of tokens.
#[test]
fn a_hybrid_request_holds_its_states_beside_its_token_blocks() {
    let layout = KvLayout {
        block_size: 1072,
        block_bytes: 1,
        token_groups: 1,
        state_groups: 3,
    };
    let mut kv = KvCache::with_layout(&layout, 10);
    assert_eq!(kv.blocks_for(0), 0);
    assert_eq!(kv.blocks_for(1), 4);
    assert_eq!(kv.blocks_for(1072), 4);
    assert_eq!(kv.blocks_for(1073), 5);
    assert_eq!(kv.grow(0, 1152), Some(5));
    assert_eq!(kv.grow(5, 2200), Some(6));
    // 4 blocks left: one more request of up to 1072 tokens, not two.
    assert_eq!(kv.grow(0, 500), Some(4));
    assert_eq!(kv.grow(0, 1), None);
    // The whole pool holds one request of (10 - 3) x 1072 tokens.
    assert_eq!(kv.tokens_capacity(), 7 * 1072);
    assert!(!kv.fits(7 * 1072 + 1));
    assert!(kv.fits(7 * 1072));
}
