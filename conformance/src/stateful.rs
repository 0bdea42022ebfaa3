//! Stateful checks: random sequences of submit, stream, cancel, pin, burst and wait, generated from the
//! reference model ([`crate::model`]) with proptest-state-machine, replayed on the live pair, with the
//! invariants checked after every step and a failing sequence shrunk to a minimal one.
//!
//! Each case starts from idle queues and a fresh scrape, and every request carries a fresh id, so
//! shrinking can replay cases against the same server. Cases run until `--cases` or `--time-budget`,
//! whichever comes first; shrinking gets what is left of the budget. Runs on a blocking thread and
//! enters the async client through a runtime handle, as the trait methods are synchronous.

use std::cell::RefCell;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use proptest_state_machine::ReferenceStateMachine as _;
use tokio::runtime::Handle;

use crate::checks::{
    Api, Call, CallResult, Completion, Counters, Outcomes, RequestSpec, Session, StreamView,
    api::error_shape, queues, show_engines,
};
use crate::model::{Bound, ModelState, Reference, Transition};
use crate::report::Outcome;

/// Every stateful invariant id.
pub const IDS: [&str; 4] = [
    "stateful.responses",
    "stateful.conservation",
    "stateful.pinning",
    "stateful.drain",
];

/// Bounds of one stateful run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatefulOptions {
    pub cases: u32,
    pub budget: Duration,
    /// Longest sequence generated.
    pub max_steps: usize,
    pub seed: u64,
    /// Attention DP engines the model assumes.
    pub engines: u32,
}

/// The failure reason of a case that could not be judged (an unreadable `/metrics`): every stateful
/// invariant ends indeterminate rather than failed.
const INDETERMINATE: &str = "indeterminate";

/// Tokens a chat template may add around the user's text (bounds prompt tokens of cancelled requests,
/// whose usage the client never sees).
const TEMPLATE_TOKENS: u64 = 64;

/// Runs the stateful phase; call from a blocking thread.
pub fn run(session: &Session, handle: &Handle, options: &StatefulOptions) -> Outcomes {
    if let Some(reason) = session.hung() {
        return every(Outcome::indeterminate(format!("not run: {reason}")));
    }
    let start = Instant::now();
    let deadline = start + options.budget;
    let max_tokens = session.settings.max_tokens.max(2);
    let strategy = Reference::sequential_strategy(1..=options.max_steps.max(1));
    let steps_run = RefCell::new(0u64);
    let mut cases_run = 0u32;
    let mut failure: Option<(String, Vec<Transition>, u32)> = None;
    let mut aborted: Option<String> = None;
    for case in 0..options.cases {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        let left = deadline - now;
        let config = Config {
            cases: 1,
            failure_persistence: None,
            max_shrink_iters: 512,
            max_shrink_time: u32::try_from(left.as_millis().min(60_000))
                .unwrap_or(60_000)
                .max(1),
            max_global_rejects: 10_000,
            ..Config::default()
        };
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&options.seed.to_le_bytes());
        bytes[8..12].copy_from_slice(&case.to_le_bytes());
        bytes[12..20].copy_from_slice(&crate::stable_hash(b"stateful").to_le_bytes());
        let mut runner =
            TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
        let result = crate::model::with_engines(options.engines, max_tokens, || {
            runner
                .run(&strategy, |(initial, transitions, seen)| {
                    if session.hung().is_some() || session.remaining().is_zero() {
                        // The pair stopped answering, or the run's budget is spent; further replays
                        // would only wait out timeouts.
                        return Ok(());
                    }
                    let mut sut = Sut::new(session, handle, case).map_err(TestCaseError::fail)?;
                    let mut state = initial;
                    for (step, transition) in transitions.iter().enumerate() {
                        if let Some(counter) = &seen {
                            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                        state = state.after(transition);
                        *steps_run.borrow_mut() += 1;
                        sut.apply(step, transition, &state)
                            .map_err(TestCaseError::fail)?;
                        sut.check(step, transition, &state)
                            .map_err(TestCaseError::fail)?;
                    }
                    Ok(())
                })
                .map_err(Box::new)
        });
        match result.map_err(|boxed| *boxed) {
            Ok(()) => cases_run += 1,
            Err(TestError::Fail(reason, _)) if session.remaining().is_zero() => {
                // A sequence the budget cut short proves nothing either way.
                aborted = Some(format!(
                    "the time budget ran out during sequence {case} ({reason})"
                ));
                break;
            }
            Err(TestError::Fail(reason, (_, transitions, _))) => {
                failure = Some((reason.to_string(), transitions, case));
                break;
            }
            Err(TestError::Abort(reason)) => {
                aborted = Some(reason.to_string());
                break;
            }
        }
    }
    let steps = *steps_run.borrow();
    let summary = format!(
        "{cases_run} sequences, {steps} steps in {:.1} s (seed {}, up to {} steps each)",
        start.elapsed().as_secs_f64(),
        options.seed,
        options.max_steps
    );
    if let Some(reason) = session.hung() {
        return every(Outcome::indeterminate(format!(
            "{summary}; stopped: {reason}"
        )));
    }
    if let Some((reason, _, _)) = failure
        .as_ref()
        .filter(|(r, _, _)| r.starts_with(INDETERMINATE))
    {
        let reason = reason
            .trim_start_matches(INDETERMINATE)
            .trim_start_matches(": ");
        return every(Outcome::indeterminate(format!(
            "{summary}; stopped: {reason}"
        )));
    }
    if let Some(reason) = aborted {
        return every(Outcome::indeterminate(format!(
            "{summary}; stopped: {reason}"
        )));
    }
    if cases_run == 0 && failure.is_none() {
        return every(Outcome::indeterminate(
            "no sequence ran within the time budget",
        ));
    }
    IDS.iter()
        .map(|&id| {
            let outcome = match &failure {
                Some((reason, transitions, case)) if reason.starts_with(id) => {
                    let message = reason
                        .strip_prefix(id)
                        .unwrap_or(reason)
                        .trim_start_matches(": ");
                    let mut counterexample = format!(
                        "seed {} case {case}; minimal sequence of {} step(s):",
                        options.seed,
                        transitions.len()
                    );
                    for (i, t) in transitions.iter().enumerate() {
                        let _ = write!(counterexample, "\n  {}. {t:?}", i + 1);
                    }
                    let _ = write!(counterexample, "\nbroke {id}: {message}");
                    Outcome::fail(first_line(message).to_owned())
                        .with_counterexample(counterexample)
                }
                _ => Outcome::pass(summary.clone()),
            };
            (id, outcome)
        })
        .collect()
}

/// The same outcome for every stateful invariant.
fn every(outcome: Outcome) -> Outcomes {
    IDS.iter().map(|&id| (id, outcome.clone())).collect()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// The live pair during one case, with what the client has seen since the case began.
struct Sut<'a> {
    session: &'a Session,
    handle: &'a Handle,
    before: Counters,
    case: u32,
    /// Token sums from responses with usage.
    prompt_known: u64,
    generation_known: u64,
    /// Extra room for requests whose usage the client did not see (cancelled, lost).
    prompt_unknown: Bound,
    generation_unknown: Bound,
    /// Requests that timed out or lost their response: they may count anywhere, or not at all.
    indeterminate: u64,
}

impl<'a> Sut<'a> {
    fn new(session: &'a Session, handle: &'a Handle, case: u32) -> Result<Sut<'a>, String> {
        let (scrape, idle) = handle
            .block_on(session.settle(session.settings.drain_timeout, |s| queues(s).1))
            .map_err(|e| format!("{INDETERMINATE}: {e}"))?;
        if !idle {
            return Err(format!(
                "stateful.drain: queues not idle before the case: {}",
                show_engines(&queues(&scrape).0)
            ));
        }
        Ok(Sut {
            session,
            handle,
            before: Counters::read(&scrape).map_err(|e| format!("{INDETERMINATE}: {e}"))?,
            case,
            prompt_known: 0,
            generation_known: 0,
            prompt_unknown: Bound::ZERO,
            generation_unknown: Bound::ZERO,
            indeterminate: 0,
        })
    }

    fn prompt(&self, step: usize, words: u8) -> String {
        const WORDS: &[&str] = &[
            "alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta",
        ];
        let body: Vec<&str> = (0..usize::from(words.max(1)))
            .map(|i| WORDS[(i * 5 + step * 3 + self.case as usize) % WORDS.len()])
            .collect();
        format!("Stateful step {step}: {}", body.join(" "))
    }

    fn send(&self, specs: Vec<RequestSpec>) -> Vec<usize> {
        let n = specs.len();
        self.handle.block_on(self.session.generate_all(specs, n))
    }

    /// Sends the step's requests and checks each response against the model (postconditions).
    fn apply(
        &mut self,
        step: usize,
        transition: &Transition,
        state: &ModelState,
    ) -> Result<(), String> {
        let fail = |message: String| {
            format!(
                "stateful.responses: step {} {transition:?}: {message}",
                step + 1
            )
        };
        let specs: Vec<(RequestSpec, Expect)> = match transition {
            Transition::Submit {
                api,
                stream,
                words,
                max_tokens,
            } => {
                let spec =
                    RequestSpec::new("stateful", *api, self.prompt(step, *words), *max_tokens);
                vec![(
                    if *stream { spec.streaming(true) } else { spec },
                    Expect::Complete,
                )]
            }
            Transition::Pin { rank, max_tokens } => {
                let spec = RequestSpec::new(
                    "stateful",
                    Api::Completions,
                    self.prompt(step, 4),
                    *max_tokens,
                )
                .pinned(rank);
                if state.is_engine(*rank) {
                    vec![(spec, Expect::Complete)]
                } else {
                    vec![(spec.invalid(), Expect::Rejected)]
                }
            }
            Transition::Cancel {
                after_events,
                max_tokens,
            } => {
                let spec = RequestSpec::new(
                    "stateful",
                    Api::Completions,
                    self.prompt(step, 6),
                    *max_tokens,
                )
                .ignoring_eos()
                .cancelled_after(usize::from(*after_events));
                vec![(spec, Expect::Cancelled)]
            }
            Transition::Burst { n, max_tokens } => (0..*n)
                .map(|i| {
                    let spec = RequestSpec::new(
                        "stateful",
                        Api::Completions,
                        self.prompt(step, i + 2),
                        *max_tokens,
                    );
                    (
                        if i % 2 == 1 {
                            spec.streaming(true)
                        } else {
                            spec
                        },
                        Expect::Complete,
                    )
                })
                .collect(),
            Transition::Wait => {
                std::thread::sleep(Duration::from_millis(20));
                Vec::new()
            }
        };
        let expectations: Vec<Expect> = specs.iter().map(|(_, e)| *e).collect();
        let indices = self.send(specs.into_iter().map(|(s, _)| s).collect());
        for (index, expect) in indices.into_iter().zip(expectations) {
            let result = self
                .session
                .with_call(index, |call| self.postcondition(call, expect));
            match result {
                Ok(Observed::Usage(prompt, generation)) => {
                    self.prompt_known += prompt;
                    self.generation_known += generation;
                }
                Ok(Observed::Unknown {
                    prompt_bytes,
                    text_chunks,
                    max_tokens,
                }) => {
                    self.prompt_unknown =
                        self.prompt_unknown + Bound::between(1, prompt_bytes + TEMPLATE_TOKENS);
                    self.generation_unknown =
                        self.generation_unknown + Bound::between(text_chunks, max_tokens);
                }
                Ok(Observed::Indeterminate {
                    prompt_bytes,
                    max_tokens,
                }) => {
                    self.indeterminate += 1;
                    self.prompt_unknown = self.prompt_unknown.widen(prompt_bytes + TEMPLATE_TOKENS);
                    self.generation_unknown = self.generation_unknown.widen(max_tokens);
                }
                Ok(Observed::Nothing) => {}
                Err(message) => return Err(fail(message)),
            }
        }
        Ok(())
    }

    fn postcondition(&self, call: &Call, expect: Expect) -> Result<Observed, String> {
        let prompt_bytes = call.spec.prompt.len() as u64;
        let max_tokens = u64::from(call.spec.max_tokens);
        let response = match &call.result {
            CallResult::Response(response) => response,
            CallResult::OutOfBudget { .. } => {
                return Ok(Observed::Indeterminate {
                    prompt_bytes,
                    max_tokens,
                });
            }
            CallResult::Failed(err) if err.is_timeout() || err.is_lost_response() => {
                return Ok(Observed::Indeterminate {
                    prompt_bytes,
                    max_tokens,
                });
            }
            CallResult::Failed(err) => return Err(format!("{}: {err}", call.spec.describe())),
            CallResult::NotSent(reason) => return Err(format!("not sent: {reason}")),
        };
        let who = call.spec.describe();
        match expect {
            Expect::Rejected => {
                if !(400..500).contains(&response.status()) {
                    return Err(format!(
                        "{who}: expected a 400-class rejection, got {}",
                        call.describe_result()
                    ));
                }
                error_shape(response)
                    .map_err(|p| format!("{who}: HTTP {} but {p}", response.status()))?;
                Ok(Observed::Nothing)
            }
            Expect::Cancelled => {
                if response.status() != 200 {
                    return Err(format!("{who}: {}", call.describe_result()));
                }
                // A stream that arrived whole before the client could close it simply finished; either
                // way the client saw no usage, so only bounds are known.
                let view = StreamView::parse(call.spec.api, response);
                if !response.cancelled && view.done_positions.len() != 1 {
                    return Err(format!(
                        "{who}: the stream ended uncancelled with {} [DONE] events",
                        view.done_positions.len()
                    ));
                }
                Ok(Observed::Unknown {
                    prompt_bytes,
                    text_chunks: view.text_chunks as u64,
                    max_tokens,
                })
            }
            Expect::Complete => {
                if response.status() != 200 {
                    return Err(format!("{who}: {}", call.describe_result()));
                }
                let usage = if call.spec.stream {
                    let view = StreamView::parse(call.spec.api, response);
                    if let Some(problem) = view.problems.first() {
                        return Err(format!("{who}: {problem}"));
                    }
                    if view.done_positions.len() != 1 {
                        return Err(format!(
                            "{who}: {} [DONE] events",
                            view.done_positions.len()
                        ));
                    }
                    view.usage
                } else {
                    let parsed = Completion::parse(call.spec.api, response);
                    if let Some(problem) = parsed.problems.first() {
                        return Err(format!("{who}: {problem}"));
                    }
                    parsed.usage
                };
                let Some(usage) = usage else {
                    return Err(format!("{who}: no usage"));
                };
                if usage.total_tokens != usage.prompt_tokens + usage.completion_tokens
                    || usage.completion_tokens <= 0
                    || usage.completion_tokens > i64::from(call.spec.max_tokens)
                {
                    return Err(format!(
                        "{who}: usage {usage:?} is inconsistent (total = prompt + completion, 0 < completion <= max_tokens {})",
                        call.spec.max_tokens
                    ));
                }
                Ok(Observed::Usage(
                    u64::try_from(usage.prompt_tokens).unwrap_or(0),
                    u64::try_from(usage.completion_tokens).unwrap_or(0),
                ))
            }
        }
    }

    /// Scrapes until every invariant holds; a counter past its upper bound fails at once (counters only
    /// grow), one below its lower bound gets the settle timeout to catch up.
    fn check(
        &self,
        step: usize,
        transition: &Transition,
        state: &ModelState,
    ) -> Result<(), String> {
        let settle = self.session.settings.settle_timeout;
        let deadline = tokio::time::Instant::now() + settle;
        loop {
            let scrape = self
                .handle
                .block_on(self.session.scrape())
                .map_err(|e| format!("{INDETERMINATE}: {e}"))?;
            let verdict = self.judge(&scrape, state);
            let now = tokio::time::Instant::now();
            match verdict {
                Verdict::Holds => return Ok(()),
                Verdict::Over(id, message) => {
                    return Err(format!(
                        "{id}: after step {} {transition:?}: {message}",
                        step + 1
                    ));
                }
                Verdict::Under(id, message) if now >= deadline => {
                    return Err(format!(
                        "{id}: after step {} {transition:?}, still after {settle:.1?}: {message}",
                        step + 1
                    ));
                }
                Verdict::Under(..) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    fn judge(&self, scrape: &crate::prometheus::Scrape, state: &ModelState) -> Verdict {
        let now = match Counters::read(scrape) {
            Ok(c) => c,
            Err(e) => return Verdict::Over(INDETERMINATE, e),
        };
        let delta = now.since(&self.before);
        // A request that timed out or lost its response is already in the model's upper bounds; it
        // may not have been counted at all, so it lowers the lower bounds (Jepsen's `info`). One the
        // server gave up on may show as an abort.
        let slack = self.indeterminate;
        let loosen = |b: Bound| Bound::between(b.lo.saturating_sub(slack), b.hi);
        let checks: [(&str, &str, f64, Bound); 4] = [
            (
                "stateful.conservation",
                "sum of vllm:request_success_total",
                delta.success,
                loosen(state.success),
            ),
            (
                "stateful.conservation",
                "finished_reason=\"abort\" count",
                delta.aborted,
                state.aborted.widen(slack),
            ),
            (
                "stateful.conservation",
                "vllm:prompt_tokens_total",
                delta.prompt_tokens,
                Bound::exact(self.prompt_known) + self.prompt_unknown,
            ),
            (
                "stateful.conservation",
                "vllm:generation_tokens_total",
                delta.generation_tokens,
                Bound::exact(self.generation_known) + self.generation_unknown,
            ),
        ];
        let mut under = None;
        for (id, what, observed, bound) in checks {
            if observed > bound.hi as f64 + 1e-9 {
                return Verdict::Over(
                    id,
                    format!("{what} changed by {observed}, the model allows {bound}"),
                );
            }
            if observed < bound.lo as f64 - 1e-9 && under.is_none() {
                under = Some(Verdict::Under(
                    id,
                    format!("{what} changed by {observed}, the model expects {bound}"),
                ));
            }
        }
        for engine in 0..state.n_engines as usize {
            let bound = loosen(state.engine_bound(engine));
            let observed = delta
                .success_by_engine
                .get(&engine.to_string())
                .copied()
                .unwrap_or(0.0);
            if observed > bound.hi as f64 + 1e-9 {
                return Verdict::Over(
                    "stateful.pinning",
                    format!(
                        "engine {engine} counted {observed} requests, the model allows {bound} (pinned there: {}); per engine {}",
                        state.pinned[engine],
                        show_engines(&delta.success_by_engine)
                    ),
                );
            }
            if observed < bound.lo as f64 - 1e-9 && under.is_none() {
                under = Some(Verdict::Under(
                    "stateful.pinning",
                    format!(
                        "engine {engine} counted {observed} requests but {} were pinned there; per engine {}",
                        state.pinned[engine],
                        show_engines(&delta.success_by_engine)
                    ),
                ));
            }
        }
        if let Some(under) = under {
            return under;
        }
        let (per, idle) = queues(scrape);
        if !idle {
            return Verdict::Under(
                "stateful.drain",
                format!("running + waiting per engine is {}", show_engines(&per)),
            );
        }
        Verdict::Holds
    }
}

/// What a step's request must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    Complete,
    Rejected,
    Cancelled,
}

/// What the client learned from a request.
enum Observed {
    Usage(u64, u64),
    Unknown {
        prompt_bytes: u64,
        text_chunks: u64,
        max_tokens: u64,
    },
    Indeterminate {
        prompt_bytes: u64,
        max_tokens: u64,
    },
    Nothing,
}

enum Verdict {
    Holds,
    /// Past an upper bound: final.
    Over(&'static str, String),
    /// Below a lower bound or not drained: may still change.
    Under(&'static str, String),
}
