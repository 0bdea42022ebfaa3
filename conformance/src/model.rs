//! The reference model of an Attention server as the suite's random sequences see it: what each step
//! (submit, stream, cancel, pin, burst, wait) must do to the server's counters, as bounds.
//!
//! Pure: no I/O, no clock. It implements proptest-state-machine's [`ReferenceStateMachine`], so
//! sequences are generated from it and shrunk against it; `stateful.rs` replays them on the live pair.
//! Bounds are Jepsen-style: a cancelled request may finish or abort, so it widens the bounds instead of
//! fixing them. The number of DP engines comes from [`with_engines`], because proptest-state-machine's
//! `init_state` takes no arguments.

use std::cell::Cell;
use std::ops::Add;

use proptest::prelude::*;
use proptest_state_machine::ReferenceStateMachine;

use crate::checks::Api;

thread_local! {
    static ENGINES: Cell<u32> = const { Cell::new(1) };
    static MAX_TOKENS: Cell<u32> = const { Cell::new(16) };
}

/// Runs `f` with the model configured for `n_engines` Attention DP engines and requests of at most
/// `max_tokens` tokens (on this thread).
pub fn with_engines<T>(n_engines: u32, max_tokens: u32, f: impl FnOnce() -> T) -> T {
    let previous = (ENGINES.get(), MAX_TOKENS.get());
    ENGINES.set(n_engines.max(1));
    MAX_TOKENS.set(max_tokens.max(2));
    let out = f();
    ENGINES.set(previous.0);
    MAX_TOKENS.set(previous.1);
    out
}

/// A closed interval on the change of a counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bound {
    pub lo: u64,
    pub hi: u64,
}

impl Bound {
    pub const ZERO: Bound = Bound { lo: 0, hi: 0 };

    pub fn exact(n: u64) -> Bound {
        Bound { lo: n, hi: n }
    }

    pub fn between(lo: u64, hi: u64) -> Bound {
        Bound { lo, hi }
    }

    /// Whether `value` (a counter change, possibly fractional from Prometheus) lies within.
    pub fn contains(self, value: f64) -> bool {
        value >= self.lo as f64 - 1e-9 && value <= self.hi as f64 + 1e-9
    }

    /// Widens the upper end by `n`.
    pub fn widen(self, n: u64) -> Bound {
        Bound {
            lo: self.lo,
            hi: self.hi.saturating_add(n),
        }
    }
}

impl Add for Bound {
    type Output = Bound;

    fn add(self, other: Bound) -> Bound {
        Bound {
            lo: self.lo.saturating_add(other.lo),
            hi: self.hi.saturating_add(other.hi),
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.lo == self.hi {
            write!(f, "{}", self.lo)
        } else {
            write!(f, "[{}, {}]", self.lo, self.hi)
        }
    }
}

/// One step of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transition {
    /// One request, waited for.
    Submit {
        api: Api,
        stream: bool,
        words: u8,
        max_tokens: u32,
    },
    /// One request pinned with `X-data-parallel-rank: rank` (out of range when `rank` is not an engine).
    Pin { rank: i64, max_tokens: u32 },
    /// A stream closed by the client after `after_events` events.
    Cancel { after_events: u8, max_tokens: u32 },
    /// `n` unpinned requests at once, all waited for.
    Burst { n: u8, max_tokens: u32 },
    /// Nothing sent: the queues must drain and the counters stay.
    Wait,
}

/// What the counters may have changed by since the sequence started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelState {
    pub n_engines: u32,
    /// Δ `vllm:request_success_total`, all reasons.
    pub success: Bound,
    /// Δ with `finished_reason="abort"`.
    pub aborted: Bound,
    /// Per engine: requests pinned to it (they must count there).
    pub pinned: Vec<Bound>,
    /// Requests that may count on any engine (unpinned, cancelled).
    pub unpinned: Bound,
    /// Requests that must be rejected and count nowhere.
    pub rejected: u64,
    pub steps: u32,
}

impl ModelState {
    pub fn new(n_engines: u32) -> ModelState {
        ModelState {
            n_engines: n_engines.max(1),
            success: Bound::ZERO,
            aborted: Bound::ZERO,
            pinned: vec![Bound::ZERO; n_engines.max(1) as usize],
            unpinned: Bound::ZERO,
            rejected: 0,
            steps: 0,
        }
    }

    /// Whether `rank` names an engine.
    pub fn is_engine(&self, rank: i64) -> bool {
        rank >= 0 && rank < i64::from(self.n_engines)
    }

    /// The bound on one engine's Δ success: its pinned requests, plus any unpinned one.
    pub fn engine_bound(&self, engine: usize) -> Bound {
        let pinned = self.pinned.get(engine).copied().unwrap_or(Bound::ZERO);
        Bound::between(pinned.lo, pinned.hi.saturating_add(self.unpinned.hi))
    }

    /// The state after `transition`.
    pub fn after(mut self, transition: &Transition) -> ModelState {
        self.steps += 1;
        match transition {
            Transition::Submit { .. } => {
                self.success = self.success + Bound::exact(1);
                self.unpinned = self.unpinned + Bound::exact(1);
            }
            Transition::Pin { rank, .. } => {
                if self.is_engine(*rank) {
                    self.success = self.success + Bound::exact(1);
                    let slot = usize::try_from(*rank).expect("an engine index is non-negative");
                    self.pinned[slot] = self.pinned[slot] + Bound::exact(1);
                } else {
                    self.rejected += 1;
                }
            }
            Transition::Cancel { .. } => {
                // Cancelled after its first event: it was admitted and ends as an abort or, if it
                // finished before the server noticed, as stop/length. Whether vLLM counts an abort in
                // request_success_total at all is not pinned down (probe-conformance-anchors §5), so
                // it counts at most once.
                self.success = self.success + Bound::between(0, 1);
                self.aborted = self.aborted + Bound::between(0, 1);
                self.unpinned = self.unpinned + Bound::exact(1);
            }
            Transition::Burst { n, .. } => {
                self.success = self.success + Bound::exact(u64::from(*n));
                self.unpinned = self.unpinned + Bound::exact(u64::from(*n));
            }
            Transition::Wait => {}
        }
        self
    }
}

/// The reference state machine.
#[derive(Clone, Copy, Debug)]
pub struct Reference;

fn api() -> impl Strategy<Value = Api> {
    prop_oneof![Just(Api::Completions), Just(Api::Chat)]
}

impl ReferenceStateMachine for Reference {
    type State = ModelState;
    type Transition = Transition;

    fn init_state() -> BoxedStrategy<ModelState> {
        Just(ModelState::new(ENGINES.get())).boxed()
    }

    fn transitions(state: &ModelState) -> BoxedStrategy<Transition> {
        let max_tokens = MAX_TOKENS.get();
        let n = i64::from(state.n_engines);
        prop_oneof![
            4 => (api(), any::<bool>(), 1u8..16, 1..=max_tokens).prop_map(|(api, stream, words, max_tokens)| {
                Transition::Submit { api, stream, words, max_tokens }
            }),
            2 => (-1..=n, 1..=max_tokens).prop_map(|(rank, max_tokens)| Transition::Pin { rank, max_tokens }),
            2 => (1u8..4, 2..=max_tokens).prop_map(|(after_events, max_tokens)| Transition::Cancel {
                after_events,
                max_tokens: max_tokens.max(u32::from(after_events) + 1),
            }),
            1 => (2u8..9, 1..=max_tokens).prop_map(|(n, max_tokens)| Transition::Burst { n, max_tokens }),
            1 => Just(Transition::Wait),
        ]
        .boxed()
    }

    fn apply(state: ModelState, transition: &Transition) -> ModelState {
        state.after(transition)
    }
}

#[cfg(test)]
mod tests;
