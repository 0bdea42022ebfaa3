//! Tests of the reference model: bounds and what each transition allows.

use proptest::prelude::*;
use proptest::strategy::ValueTree as _;
use proptest::test_runner::TestRunner;
use proptest_state_machine::ReferenceStateMachine as _;

use super::*;

#[test]
fn bounds_add_widen_and_contain() {
    let b = Bound::exact(2) + Bound::between(0, 1);
    assert_eq!(b, Bound::between(2, 3));
    assert!(b.contains(2.0) && b.contains(3.0) && !b.contains(3.5) && !b.contains(1.0));
    assert_eq!(b.widen(2), Bound::between(2, 5));
    assert_eq!(b.to_string(), "[2, 3]");
    assert_eq!(Bound::exact(4).to_string(), "4");
}

#[test]
fn each_transition_moves_the_bounds() {
    let state = ModelState::new(2)
        .after(&Transition::Submit {
            api: Api::Chat,
            stream: true,
            words: 3,
            max_tokens: 4,
        })
        .after(&Transition::Pin {
            rank: 1,
            max_tokens: 4,
        })
        .after(&Transition::Pin {
            rank: 2,
            max_tokens: 4,
        })
        .after(&Transition::Pin {
            rank: -1,
            max_tokens: 4,
        })
        .after(&Transition::Cancel {
            after_events: 1,
            max_tokens: 8,
        })
        .after(&Transition::Burst {
            n: 3,
            max_tokens: 4,
        })
        .after(&Transition::Wait);
    assert_eq!(state.steps, 7);
    assert_eq!(state.success, Bound::between(5, 6));
    assert_eq!(state.aborted, Bound::between(0, 1));
    assert_eq!(state.rejected, 2);
    assert_eq!(state.pinned, [Bound::ZERO, Bound::exact(1)]);
    assert_eq!(state.unpinned, Bound::exact(5));
    assert_eq!(state.engine_bound(0), Bound::between(0, 5));
    assert_eq!(state.engine_bound(1), Bound::between(1, 6));
}

#[test]
fn generated_sequences_respect_the_configuration() {
    with_engines(3, 6, || {
        let mut runner = TestRunner::deterministic();
        for _ in 0..50 {
            let (state, transitions, _) = Reference::sequential_strategy(1..20)
                .new_tree(&mut runner)
                .expect("a sequence")
                .current();
            assert_eq!(state.n_engines, 3);
            for t in transitions {
                match t {
                    Transition::Submit { max_tokens, .. }
                    | Transition::Pin { max_tokens, .. }
                    | Transition::Burst { max_tokens, .. } => {
                        assert!((1..=6).contains(&max_tokens));
                    }
                    Transition::Cancel {
                        after_events,
                        max_tokens,
                    } => {
                        assert!(
                            max_tokens > u32::from(after_events),
                            "{after_events} {max_tokens}"
                        );
                    }
                    Transition::Wait => {}
                }
                if let Transition::Pin { rank, .. } = t {
                    assert!((-1..=3).contains(&rank));
                }
            }
        }
    });
}

proptest! {
    #[test]
    fn success_bounds_never_shrink(n in 1u32..5, steps in proptest::collection::vec(0u8..5, 0..30)) {
        let mut state = ModelState::new(n);
        for step in steps {
            let before = state.success;
            let transition = match step {
                0 => Transition::Submit { api: Api::Completions, stream: false, words: 1, max_tokens: 1 },
                1 => Transition::Pin { rank: i64::from(step), max_tokens: 1 },
                2 => Transition::Cancel { after_events: 1, max_tokens: 2 },
                3 => Transition::Burst { n: 2, max_tokens: 1 },
                _ => Transition::Wait,
            };
            state = state.after(&transition);
            prop_assert!(state.success.lo >= before.lo && state.success.hi >= before.hi);
            prop_assert!(state.success.lo <= state.success.hi);
            let pinned: u64 = state.pinned.iter().map(|b| b.lo).sum();
            prop_assert!(pinned <= state.success.lo);
        }
    }
}
