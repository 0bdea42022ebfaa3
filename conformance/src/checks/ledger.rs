//! Invariants judged over every generation request of the run, from the session's ledger: response
//! shapes, usage arithmetic, finish reasons, `X-Request-Id` echo, exactly one response per request, and
//! liveness (every valid request completes in time), plus the `sse.*` invariants of [`streaming`].
//!
//! A request the breaker kept from being sent is neither a pass nor a failure here; the timeouts that
//! tripped the breaker already fail `liveness.completes`.
//!
//! [`streaming`]: crate::checks::streaming

use std::time::Duration;

use crate::checks::{
    Api, Call, CallResult, Completion, Outcomes, REQUEST_ID_HEADER, StreamView, Usage, streaming,
};
use crate::report::Outcome;

/// Every ledger-derived outcome.
/// `silent_posts` are the API probes that got no answer (what and how long each waited), liveness
/// evidence beside the ledger; an unanswered wait of `stall` or more is a hang.
pub fn judge(
    ledger: &[Call],
    request_id_headers: bool,
    stall: Duration,
    silent_posts: &[(String, Duration)],
) -> Outcomes {
    let mut out = vec![
        ("api.completion-shape", shapes(ledger, Api::Completions)),
        ("api.chat-shape", shapes(ledger, Api::Chat)),
        ("api.usage-arithmetic", usage_arithmetic(ledger)),
        ("api.finish-reason", finish_reason(ledger)),
        (
            "api.request-id-echo",
            request_id_echo(ledger, request_id_headers),
        ),
        ("api.one-response", one_response(ledger)),
        ("liveness.completes", completes(ledger, stall, silent_posts)),
    ];
    out.extend(streaming::judge(ledger));
    out
}

fn shapes(ledger: &[Call], api: Api) -> Outcome {
    let mut failures = Vec::new();
    let mut n = 0;
    for call in ledger
        .iter()
        .filter(|g| g.spec.api == api && !g.spec.stream && !g.spec.expect_error)
    {
        let Some(response) = call.ok() else { continue };
        n += 1;
        let parsed = Completion::parse(api, response);
        if let Some(problem) = parsed.problems.first() {
            failures.push(format!(
                "{}: {problem}; {}",
                call.spec.describe(),
                call.describe_result()
            ));
        }
    }
    if n == 0 {
        return Outcome::indeterminate(format!(
            "no non-streaming {} response came back",
            api.path()
        ));
    }
    Outcome::from_failures(
        format!("{n} {} responses well formed", api.object()),
        &failures,
    )
}

fn usage_check(usage: Usage) -> Option<String> {
    if usage.total_tokens != usage.prompt_tokens + usage.completion_tokens {
        Some(format!(
            "usage.total_tokens {} != prompt_tokens {} + completion_tokens {}",
            usage.total_tokens, usage.prompt_tokens, usage.completion_tokens
        ))
    } else if usage.completion_tokens <= 0 {
        Some(format!(
            "usage.completion_tokens is {}",
            usage.completion_tokens
        ))
    } else if usage.prompt_tokens <= 0 {
        Some(format!("usage.prompt_tokens is {}", usage.prompt_tokens))
    } else {
        None
    }
}

fn usage_arithmetic(ledger: &[Call]) -> Outcome {
    let mut failures = Vec::new();
    let mut n = 0;
    for call in ledger.iter().filter(|g| !g.spec.expect_error) {
        let Some(usage) = call.usage() else { continue };
        n += 1;
        if let Some(problem) = usage_check(usage) {
            failures.push(format!("{}: {problem}", call.spec.describe()));
        }
    }
    if n == 0 {
        return Outcome::indeterminate("no response carried usage");
    }
    Outcome::from_failures(format!("{n} responses with consistent usage"), &failures)
}

fn finish_reason(ledger: &[Call]) -> Outcome {
    let mut failures = Vec::new();
    let mut n = 0;
    for call in ledger.iter().filter(|g| !g.spec.expect_error) {
        let Some(response) = call.ok() else { continue };
        let (reason, usage) = if call.spec.stream {
            let view = StreamView::parse(call.spec.api, response);
            (view.finishes.last().map(|(_, r)| r.clone()), view.usage)
        } else {
            let parsed = Completion::parse(call.spec.api, response);
            (parsed.finish_reason, parsed.usage)
        };
        n += 1;
        let who = call.spec.describe();
        let max = i64::from(call.spec.max_tokens);
        match reason.as_deref() {
            Some("stop" | "length") => {}
            other => {
                failures.push(format!(
                    "{who}: finish_reason {other:?}, expected \"stop\" or \"length\""
                ));
                continue;
            }
        }
        let Some(usage) = usage else { continue };
        if usage.completion_tokens > max {
            failures.push(format!(
                "{who}: {} completion tokens exceed max_tokens {max}",
                usage.completion_tokens
            ));
        } else if reason.as_deref() == Some("length") && usage.completion_tokens != max {
            failures.push(format!(
                "{who}: finish_reason \"length\" after {} of max_tokens {max} tokens",
                usage.completion_tokens
            ));
        }
    }
    if n == 0 {
        return Outcome::indeterminate("no response came back");
    }
    Outcome::from_failures(
        format!("{n} responses with a valid finish_reason"),
        &failures,
    )
}

fn request_id_echo(ledger: &[Call], always: bool) -> Outcome {
    let mut failures = Vec::new();
    let mut n = 0;
    let mut echoed = 0;
    for call in ledger {
        let Some(response) = call.response() else {
            continue;
        };
        n += 1;
        match response.head.header(REQUEST_ID_HEADER) {
            Some(id) if id == call.spec.request_id => echoed += 1,
            Some(id) => failures.push(format!(
                "{}: answered with X-Request-Id {id:?}",
                call.spec.describe()
            )),
            None if always => failures.push(format!(
                "{}: no X-Request-Id on the response although --enable-request-id-headers is set",
                call.spec.describe()
            )),
            None => {}
        }
    }
    if n == 0 {
        return Outcome::indeterminate("no response came back");
    }
    Outcome::from_failures(
        format!("{echoed} of {n} responses echoed X-Request-Id, each the one sent"),
        &failures,
    )
}

fn one_response(ledger: &[Call]) -> Outcome {
    let mut failures = Vec::new();
    let mut n = 0;
    for call in ledger {
        match &call.result {
            CallResult::Response(response) => {
                n += 1;
                if !response.trailing.is_empty() {
                    failures.push(format!(
                        "{}: {} bytes followed the complete response (a second response?); {}",
                        call.spec.describe(),
                        response.trailing.len(),
                        call.describe_result()
                    ));
                }
            }
            CallResult::Failed(err) if !err.is_timeout() && !err.is_refused() => {
                n += 1;
                failures.push(format!("{}: {err}", call.spec.describe()));
            }
            CallResult::Failed(_) | CallResult::NotSent(_) | CallResult::OutOfBudget { .. } => {}
        }
    }
    if n == 0 {
        return Outcome::indeterminate("no request got an answer in time");
    }
    Outcome::from_failures(
        format!("{n} requests got exactly one complete response"),
        &failures,
    )
}

/// Liveness needs evidence: a request that ended (answered, timed out, refused). A run in which none
/// did is indeterminate, never a pass; a request still unanswered after `stall` when the budget ran
/// out fails it as a timeout would (a server that stops answering fails whatever the budget).
fn completes(ledger: &[Call], stall: Duration, silent_posts: &[(String, Duration)]) -> Outcome {
    let mut failures: Vec<String> = silent_posts
        .iter()
        .filter(|(_, waited)| *waited >= stall)
        .map(|(what, waited)| {
            format!(
                "{what}: no answer after {:.1} s, not even an error",
                waited.as_secs_f64()
            )
        })
        .collect();
    let mut n = 0;
    let mut cut_short = 0;
    for call in ledger {
        let who = call.spec.describe();
        match &call.result {
            CallResult::Failed(err) if err.is_timeout() => failures.push(format!("{who}: {err}")),
            CallResult::Failed(err) if err.is_refused() => failures.push(format!(
                "{who}: {err} (the Attention server stopped accepting connections)"
            )),
            CallResult::OutOfBudget { waited } if *waited >= stall => failures.push(format!(
                "{who}: no answer after {:.1} s (the time budget ran out; {:.1} s without an answer is a hang)",
                waited.as_secs_f64(),
                stall.as_secs_f64()
            )),
            CallResult::OutOfBudget { waited } if !waited.is_zero() => cut_short += 1,
            CallResult::Response(response) if !call.spec.expect_error && !response.cancelled => {
                n += 1;
                if response.status() != 200 {
                    failures.push(format!(
                        "{who}: a valid request failed: {}",
                        call.describe_result()
                    ));
                } else if call.spec.stream
                    && let Some(error) = StreamView::parse(call.spec.api, response).error_event
                {
                    failures.push(format!("{who}: the stream ended in an error event {error}"));
                }
            }
            _ => {}
        }
    }
    if n == 0 && failures.is_empty() {
        return Outcome::indeterminate(if cut_short > 0 {
            format!(
                "no valid request completed: the time budget ran out while {cut_short} waited (less than {:.1} s each)",
                stall.as_secs_f64()
            )
        } else {
            "no valid request was sent, so liveness was not observed".to_owned()
        });
    }
    Outcome::from_failures(
        format!("{n} valid requests completed successfully in time"),
        &failures,
    )
}
