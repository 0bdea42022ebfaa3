//! The queue pops by `(time, seq)`.

use proptest::prelude::*;

use super::*;

#[test]
fn simultaneous_events_pop_in_schedule_order() {
    let mut queue = EventQueue::new();
    queue.schedule(SimTime::from_ns(5), 'b');
    queue.schedule(SimTime::from_ns(1), 'a');
    queue.schedule(SimTime::from_ns(5), 'c');
    let order: Vec<char> = std::iter::from_fn(|| queue.pop().map(|(_, e)| e)).collect();
    assert_eq!(order, ['a', 'b', 'c']);
    assert_eq!(queue.now(), SimTime::from_ns(5));
}

proptest! {
    #[test]
    fn pops_are_sorted_by_time_then_sequence(times in proptest::collection::vec(0u64..50, 0..200)) {
        let mut queue = EventQueue::new();
        for (i, t) in times.iter().enumerate() {
            queue.schedule(SimTime::from_ns(*t), i);
        }
        let mut last: Option<(SimTime, usize)> = None;
        while let Some((at, i)) = queue.pop() {
            if let Some(prev) = last {
                prop_assert!(prev < (at, i), "{prev:?} then {:?}", (at, i));
            }
            last = Some((at, i));
        }
    }
}
