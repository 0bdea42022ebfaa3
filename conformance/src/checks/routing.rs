//! Data-parallel routing and metric conservation (afd-spec §7.2, §7.4 R8; probe-conformance-anchors §5):
//! requests and tokens the client saw equal the changes in the per-engine counters, pinned requests land
//! on their engine, out-of-range pins are rejected, a burst spreads over engines, cancelled streams are
//! counted at most once, and the queues drain.
//!
//! Each part runs in its own window: wait for idle queues, scrape, send, scrape until the counters
//! settle. Requests that timed out or lost their response are indeterminate (Jepsen's `info`): they widen
//! the expected interval instead of failing it.

use std::collections::BTreeMap;

use crate::checks::{
    Api, CallResult, Counters, Outcomes, RequestSpec, Session, api::error_shape, queues,
    show_engines,
};
use crate::report::Outcome;

/// What the client saw of a window's requests.
#[derive(Clone, Debug, Default, PartialEq)]
struct Tally {
    completed: u64,
    /// Lost, timed out: may or may not have counted.
    indeterminate: u64,
    cancelled: u64,
    prompt_tokens: u64,
    generation_tokens: u64,
    /// Some completed response carried no usage, so token sums are unknown.
    usage_unknown: bool,
    /// Completed per pinned engine.
    pinned: BTreeMap<String, u64>,
    /// Rendered descriptions of the requests, for counterexamples.
    requests: Vec<String>,
}

/// One window's observation.
struct Window {
    tally: Tally,
    delta: Counters,
}

fn tally(session: &Session, indices: &[usize]) -> Tally {
    let mut t = Tally::default();
    for &i in indices {
        session.with_call(i, |call| {
            t.requests.push(format!(
                "{} → {}",
                call.spec.describe(),
                call.describe_result()
            ));
            match &call.result {
                CallResult::Response(r) if r.cancelled => t.cancelled += 1,
                CallResult::Response(r) if r.status() == 200 && !call.spec.expect_error => {
                    t.completed += 1;
                    if let Some(pin) = &call.spec.pin {
                        *t.pinned.entry(pin.clone()).or_insert(0) += 1;
                    }
                    match call.usage() {
                        Some(u) => {
                            t.prompt_tokens += u64::try_from(u.prompt_tokens).unwrap_or(0);
                            t.generation_tokens += u64::try_from(u.completion_tokens).unwrap_or(0);
                        }
                        None => t.usage_unknown = true,
                    }
                }
                CallResult::Response(_) => {}
                CallResult::Failed(err) if err.is_refused() => {}
                CallResult::Failed(_) => t.indeterminate += 1,
                CallResult::OutOfBudget { waited } if !waited.is_zero() => t.indeterminate += 1,
                CallResult::NotSent(_) | CallResult::OutOfBudget { .. } => {}
            }
        });
    }
    t
}

async fn idle_snapshot(session: &Session) -> Result<Counters, String> {
    let (scrape, idle) = session
        .settle(session.settings.drain_timeout, |s| queues(s).1)
        .await?;
    if !idle {
        return Err(format!(
            "the queues are not idle before the window (running + waiting per engine {})",
            show_engines(&queues(&scrape).0)
        ));
    }
    Counters::read(&scrape)
}

async fn window(
    session: &Session,
    specs: Vec<RequestSpec>,
    concurrency: usize,
) -> Result<Window, String> {
    observe(session, async {
        let indices = session.generate_all(specs, concurrency).await;
        Ok(tally(session, &indices))
    })
    .await
}

/// The run's open-loop load ([`Session::open_loop`]), judged by its counts only; wire-level invariants
/// are judged on the suite's own requests.
async fn bench_load(session: &Session) -> Result<Tally, String> {
    let result = session.open_loop().await.as_ref().map_err(Clone::clone)?;
    let mut t = Tally::default();
    for record in &result.records {
        let what = format!(
            "bench request {} (max_tokens {}, ignore_eos, stream)",
            record.index, record.max_tokens
        );
        if record.success {
            t.completed += 1;
            match (record.prompt_tokens, record.completion_tokens) {
                (Some(prompt), Some(completion)) => {
                    t.prompt_tokens += prompt;
                    t.generation_tokens += completion;
                }
                _ => t.usage_unknown = true,
            }
            t.requests
                .push(format!("{what} → {} tokens", record.output_tokens()));
        } else {
            // Failed mid-way or timed out: it may or may not have been counted.
            t.indeterminate += 1;
            t.requests
                .push(format!("{what} → failed: {}", record.error));
        }
    }
    Ok(t)
}

/// Waits for idle queues, scrapes, runs `load`, and scrapes until the counters settle.
async fn observe(
    session: &Session,
    load: impl std::future::Future<Output = Result<Tally, String>>,
) -> Result<Window, String> {
    let before = idle_snapshot(session).await?;
    let tally = load.await?;
    let lo = tally.completed as f64;
    let (scrape, _) = session
        .settle(session.settings.settle_timeout, |scrape| {
            Counters::read(scrape).is_ok_and(|now| {
                let delta = now.since(&before);
                delta.success >= lo
                    && (tally.usage_unknown
                        || (delta.prompt_tokens >= tally.prompt_tokens as f64
                            && delta.generation_tokens >= tally.generation_tokens as f64))
                    && queues(scrape).1
            })
        })
        .await?;
    let delta = Counters::read(&scrape)?.since(&before);
    Ok(Window { tally, delta })
}

fn specs(session: &Session, phase: &'static str, n: u32, pin: Option<u32>) -> Vec<RequestSpec> {
    let mut rng = session.rng(phase);
    (0..n)
        .map(|i| {
            let api = if i % 3 == 2 {
                Api::Chat
            } else {
                Api::Completions
            };
            let spec = RequestSpec::new(
                phase,
                api,
                session.prompt(&mut rng),
                session.settings.max_tokens,
            );
            let spec = if i % 2 == 1 {
                spec.streaming(true)
            } else {
                spec
            };
            match pin {
                Some(k) => spec.pinned(k),
                None => spec,
            }
        })
        .collect()
}

/// Judges `observed` against `[lo, lo + slack]`.
fn within(what: &str, observed: f64, lo: u64, slack: u64) -> Result<bool, String> {
    let hi = lo + slack;
    if observed < lo as f64 - 1e-9 || observed > hi as f64 + 1e-9 {
        let expected = if slack == 0 {
            lo.to_string()
        } else {
            format!("[{lo}, {hi}]")
        };
        Err(format!(
            "{what} changed by {observed}, the client saw {expected}"
        ))
    } else {
        Ok(slack == 0)
    }
}

/// The routing phase.
pub async fn check(session: &Session) -> Outcomes {
    if let Some(reason) = session.hung() {
        return ids()
            .iter()
            .map(|&id| (id, Outcome::indeterminate(format!("not run: {reason}"))))
            .collect();
    }
    let mut conservation = Judged::default();
    let mut tokens = Judged::default();
    let mut out = Vec::new();

    // The unpinned open-loop load, then a closed-loop mix of the suite's own requests.
    let load = observe(session, bench_load(session)).await;
    judge_conservation("open-loop load", &load, &mut conservation, &mut tokens);
    let mix = window(
        session,
        specs(
            session,
            "routing.mix",
            session.settings.requests.div_ceil(2),
            None,
        ),
        session.settings.concurrency as usize,
    )
    .await;
    judge_conservation("request mix", &mix, &mut conservation, &mut tokens);

    let (engines, engines_note) = engine_count(session).await;
    out.push(("routing.pinning", Outcome::indeterminate("not run")));
    out.push((
        "routing.pin-out-of-range",
        Outcome::indeterminate("not run"),
    ));
    if let Some(n) = engines {
        let (pinning, out_of_range) =
            pinning(session, n, &engines_note, &mut conservation, &mut tokens).await;
        out[0].1 = pinning;
        out[1].1 = out_of_range;
    } else {
        out[0].1 = Outcome::indeterminate(engines_note.clone());
        out[1].1 = Outcome::indeterminate(engines_note.clone());
    }
    out.push((
        "routing.spread",
        spread(session, engines, &mut conservation).await,
    ));
    out.push(("routing.abort-accounting", aborts(session).await));
    out.push((
        "routing.request-conservation",
        conservation.outcome("requests"),
    ));
    out.push(("routing.token-conservation", tokens.outcome("tokens")));
    out.push(("routing.drain", drain(session).await));
    out
}

/// Ids this phase reports.
pub fn ids() -> &'static [&'static str] {
    &[
        "routing.pinning",
        "routing.pin-out-of-range",
        "routing.spread",
        "routing.abort-accounting",
        "routing.request-conservation",
        "routing.token-conservation",
        "routing.drain",
    ]
}

/// Failures, exact windows and indeterminate windows of one conservation invariant.
#[derive(Default)]
struct Judged {
    failures: Vec<String>,
    exact: u32,
    loose: Vec<String>,
    unknown: Vec<String>,
}

impl Judged {
    fn record(&mut self, window: &str, result: Result<bool, String>, requests: &[String]) {
        match result {
            Ok(true) => self.exact += 1,
            Ok(false) => self.loose.push(window.to_owned()),
            Err(message) => {
                let sample: Vec<&String> = requests.iter().take(5).collect();
                let mut counterexample = format!(
                    "window '{window}': {message}\nrequests ({} in all):",
                    requests.len()
                );
                for request in sample {
                    counterexample.push_str("\n  ");
                    counterexample.push_str(request);
                }
                self.failures.push(counterexample);
            }
        }
    }

    /// Records a window's request conservation: the change in successes against what the client saw,
    /// widened by its indeterminate requests.
    fn record_requests(&mut self, name: &str, window: &Window) {
        let t = &window.tally;
        let verdict = within(
            "sum of vllm:request_success_total",
            window.delta.success,
            t.completed,
            t.indeterminate,
        );
        self.record(name, verdict, &t.requests);
    }

    fn outcome(&self, what: &str) -> Outcome {
        if !self.failures.is_empty() {
            return Outcome::from_failures("", &self.failures);
        }
        if self.exact == 0 {
            let mut reasons = self.loose.clone();
            reasons.extend(self.unknown.iter().cloned());
            return Outcome::indeterminate(format!(
                "no window with every request accounted for: {}",
                reasons.join("; ")
            ));
        }
        Outcome::pass(format!(
            "{what} conserved exactly in {} window(s)",
            self.exact
        ))
    }
}

fn judge_conservation(
    name: &str,
    window: &Result<Window, String>,
    requests: &mut Judged,
    tokens: &mut Judged,
) {
    let window = match window {
        Ok(w) => w,
        Err(err) => {
            requests.unknown.push(format!("{name}: {err}"));
            tokens.unknown.push(format!("{name}: {err}"));
            return;
        }
    };
    let t = &window.tally;
    requests.record_requests(name, window);
    if t.usage_unknown {
        tokens
            .unknown
            .push(format!("{name}: a response had no usage"));
    } else if t.indeterminate > 0 {
        tokens.loose.push(format!(
            "{name}: {} requests indeterminate",
            t.indeterminate
        ));
    } else {
        let prompt = within(
            "sum of vllm:prompt_tokens_total",
            window.delta.prompt_tokens,
            t.prompt_tokens,
            0,
        );
        let generation = within(
            "sum of vllm:generation_tokens_total",
            window.delta.generation_tokens,
            t.generation_tokens,
            0,
        );
        tokens.record(name, prompt.and(generation), &t.requests);
    }
}

async fn engine_count(session: &Session) -> (Option<u32>, String) {
    if let Some(n) = session.target.expect.attention_dp {
        return (Some(n), format!("Attention DP {n}"));
    }
    match session.scrape().await {
        Ok(scrape) => {
            let labels = scrape.engine_labels();
            if labels.is_empty() {
                (
                    None,
                    "the Attention DP size is unknown and /metrics has no engine labels".to_owned(),
                )
            } else {
                let n = u32::try_from(labels.len()).unwrap_or(u32::MAX);
                (
                    Some(n),
                    format!("Attention DP {n} assumed from the engine labels of /metrics"),
                )
            }
        }
        Err(err) => (None, format!("the Attention DP size is unknown: {err}")),
    }
}

async fn pinning(
    session: &Session,
    n: u32,
    note: &str,
    conservation: &mut Judged,
    tokens: &mut Judged,
) -> (Outcome, Outcome) {
    // One window per engine, each with one concurrent burst pinned to it, highest engine first. Every
    // window opens on an idle pair, where a balancer that ignored the pins would send the burst's first
    // request to engine 0: the first window alone then shows the fault, whatever the timing after it.
    let per_engine = 3;
    let mut rng = session.rng("routing.pin-out-of-range");
    let bad_ranks = [i64::from(n), -1, i64::from(n) + 3];
    let mut out_of_range: Vec<RequestSpec> = bad_ranks
        .iter()
        .map(|rank| {
            RequestSpec::new("routing", Api::Completions, session.prompt(&mut rng), 4)
                .pinned(rank)
                .invalid()
        })
        .collect();
    let mut failures = Vec::new();
    let mut slack = 0;
    for k in (0..n).rev() {
        let mut burst = specs(session, "routing.pin", per_engine, Some(k));
        if k == 0 {
            // The out-of-range pins ride with the last burst: a server that took one would count it.
            burst.append(&mut out_of_range);
        }
        let size = burst.len();
        let window = observe(session, async {
            let indices = session.generate_all(burst, size).await;
            Ok(tally(session, &indices))
        })
        .await;
        judge_conservation(
            &format!("requests pinned to engine {k}"),
            &window,
            conservation,
            tokens,
        );
        match window {
            Ok(w) => {
                slack += w.tally.indeterminate;
                failures.extend(pinned_only_there(&w, k, n));
            }
            Err(err) => {
                return (
                    Outcome::indeterminate(err.clone()),
                    Outcome::indeterminate(err),
                );
            }
        }
    }
    let pinning = if failures.is_empty() && slack > 0 {
        Outcome::indeterminate(format!("{slack} pinned requests got no answer"))
    } else {
        Outcome::from_failures(
            format!("requests pinned to each of {n} engines counted only there ({note})"),
            &failures,
        )
    };
    // Out of range: rejected with an error in shape.
    let mut rejections = Vec::new();
    let mut rejected = 0;
    session.with_ledger(|ledger| {
        for call in ledger
            .iter()
            .filter(|g| g.spec.expect_error && g.spec.phase == "routing")
        {
            match &call.result {
                CallResult::Response(r) if (400..500).contains(&r.status()) => match error_shape(r)
                {
                    Ok(()) => rejected += 1,
                    Err(problem) => rejections.push(format!(
                        "{}: HTTP {} but {problem}",
                        call.spec.describe(),
                        r.status()
                    )),
                },
                _ => rejections.push(format!(
                    "{}: expected a 400-class rejection, got {}",
                    call.spec.describe(),
                    call.describe_result()
                )),
            }
        }
    });
    let out_of_range = Outcome::from_failures(
        format!(
            "{rejected} out-of-range pins {bad_ranks:?} rejected with 400-class errors ({note})"
        ),
        &rejections,
    );
    (pinning, out_of_range)
}

/// The failures of a window whose completed requests were all pinned to engine `k`: every engine must
/// have changed by exactly the requests pinned to it (widened by the window's indeterminate ones).
fn pinned_only_there(window: &Window, k: u32, n: u32) -> Vec<String> {
    let mut failures = Vec::new();
    let slack = window.tally.indeterminate;
    for engine in 0..n {
        let key = engine.to_string();
        let expected = window.tally.pinned.get(&key).copied().unwrap_or(0);
        let observed = window
            .delta
            .success_by_engine
            .get(&key)
            .copied()
            .unwrap_or(0.0);
        if let Err(message) = within(
            &format!("engine {engine}'s vllm:request_success_total"),
            observed,
            expected,
            slack,
        ) {
            failures.push(format!(
                "burst pinned to engine {k}: {message} pinned to it; per-engine changes {}",
                show_engines(&window.delta.success_by_engine)
            ));
        }
    }
    for (engine, observed) in &window.delta.success_by_engine {
        let known = engine.parse::<u32>().is_ok_and(|e| e < n);
        if !known && *observed != 0.0 {
            failures.push(format!(
                "burst pinned to engine {k}: engine {engine} (not an Attention DP engine) changed by {observed}"
            ));
        }
    }
    failures
}

async fn spread(session: &Session, engines: Option<u32>, conservation: &mut Judged) -> Outcome {
    let Some(n) = engines else {
        return Outcome::indeterminate("the Attention DP size is unknown");
    };
    if n < 2 {
        return Outcome::skipped(format!("Attention DP {n}: nothing to spread over"));
    }
    let mut last = String::new();
    // A second, larger burst before failing: a short burst on a fast server can finish before the next
    // request arrives, and then the balancer rightly picks the same idle engine.
    for factor in [4u32, 8] {
        let size = factor * n;
        let mut rng = session.rng("routing.spread");
        let specs: Vec<RequestSpec> = (0..size)
            .map(|_| {
                RequestSpec::new(
                    "routing.spread",
                    Api::Completions,
                    session.prompt(&mut rng),
                    session.settings.max_tokens * 4,
                )
                .ignoring_eos()
            })
            .collect();
        let window = match window(session, specs, size as usize).await {
            Ok(w) => w,
            Err(err) => return Outcome::indeterminate(err),
        };
        let t = &window.tally;
        conservation.record_requests("burst", &window);
        if t.completed + t.indeterminate < u64::from(size) {
            return Outcome::indeterminate(format!(
                "only {} of {size} burst requests completed",
                t.completed
            ));
        }
        let busy: Vec<&String> = window
            .delta
            .success_by_engine
            .iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, _)| k)
            .collect();
        if busy.len() >= 2 {
            return Outcome::pass(format!(
                "a burst of {size} spread over engines {}",
                show_engines(&window.delta.success_by_engine)
            ));
        }
        last = format!(
            "a concurrent burst of {size} unpinned requests all landed on engine(s) {busy:?} of {n}: {}",
            show_engines(&window.delta.success_by_engine)
        );
    }
    Outcome::fail(last.clone()).with_counterexample(format!(
        "{last}; afd-spec §7.2: an unpinned request goes to the engine with the least 4*waiting + running"
    ))
}

async fn aborts(session: &Session) -> Outcome {
    let mut rng = session.rng("routing.abort");
    let long = session.settings.max_tokens * 4;
    let mut specs = Vec::new();
    for i in 0..4 {
        let spec = RequestSpec::new(
            "routing.abort",
            Api::Completions,
            session.prompt(&mut rng),
            long,
        )
        .ignoring_eos();
        specs.push(if i < 3 { spec.cancelled_after(1) } else { spec });
    }
    let window = match window(session, specs, 4).await {
        Ok(w) => w,
        Err(err) => return Outcome::indeterminate(err),
    };
    let t = &window.tally;
    let slack = t.cancelled + t.indeterminate;
    let mut failures = Vec::new();
    if let Err(message) = within(
        "sum of vllm:request_success_total",
        window.delta.success,
        t.completed,
        slack,
    ) {
        failures.push(message);
    }
    if window.delta.aborted > slack as f64 + 1e-9 {
        failures.push(format!(
            "finished_reason=\"abort\" changed by {}, but only {} streams were cancelled",
            window.delta.aborted, t.cancelled
        ));
    }
    if failures.is_empty() && t.cancelled == 0 {
        return Outcome::indeterminate(
            "no stream was cancelled (each finished before its first event?)",
        );
    }
    Outcome::from_failures(
        format!(
            "{} cancelled streams: success changed by {}, abort by {}",
            t.cancelled, window.delta.success, window.delta.aborted
        ),
        &failures,
    )
}

async fn drain(session: &Session) -> Outcome {
    match session
        .settle(session.settings.drain_timeout, |s| queues(s).1)
        .await
    {
        Ok((_, true)) => Outcome::pass(format!(
            "running and waiting are 0 on every engine within {:.0?}",
            session.settings.drain_timeout
        )),
        Ok((scrape, false)) => {
            let per = queues(&scrape).0;
            Outcome::fail(format!(
                "after the load, running + waiting per engine is still {} after {:.1?}",
                show_engines(&per),
                session.settings.drain_timeout
            ))
            .with_counterexample(format!(
                "GET /metrics {:.1?} after the last request: vllm:num_requests_running + vllm:num_requests_waiting = {}",
                session.settings.drain_timeout,
                show_engines(&per)
            ))
        }
        Err(err) => Outcome::indeterminate(err),
    }
}
