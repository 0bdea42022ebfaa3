//! Routing by `4·waiting + running` with stale stats and optimistic increments.

use super::*;

#[test]
fn optimistic_increments_spread_a_burst_between_publications() {
    let mut router = DpRouter::new(2);
    // Client 0 scans from engine 0: the first request goes there, its view then says engine 0 has
    // 2 waiting, so the next goes to engine 1.
    assert_eq!(router.route(0), 0);
    assert_eq!(router.route(0), 1);
    assert_eq!(router.route(0), 0);
    // Client 1 has its own view and starts at engine 1.
    assert_eq!(router.route(1), 1);
}

#[test]
fn publication_replaces_stale_views() {
    let mut router = DpRouter::new(3);
    assert!(router.publish(&[(0, 9), (1, 0), (0, 2)]));
    // Scores 9, 4, 2: engine 2 wins.
    assert_eq!(router.route(0), 2);
    assert!(!router.publish(&[(0, 9), (1, 0), (0, 2)]));
}
