//! SSE streaming invariants, judged on every stream of the run: `text/event-stream` framing, exactly one
//! `data: [DONE]` as the last event, exactly one finish_reason with no text after it, and the usage chunk
//! of `stream_options.include_usage`.
//!
//! Cancelled streams (closed by the suite on purpose) are not judged; failed calls are left to the
//! ledger's liveness and one-response invariants.

use crate::checks::{Call, Outcomes, StreamView};
use crate::report::Outcome;

/// The four `sse.*` outcomes over the ledger.
pub fn judge(ledger: &[Call]) -> Outcomes {
    let streams: Vec<(&Call, StreamView)> = ledger
        .iter()
        .filter(|g| g.spec.stream && !g.spec.expect_error)
        .filter_map(|g| g.ok().map(|r| (g, StreamView::parse(g.spec.api, r))))
        .collect();
    if streams.is_empty() {
        let none = || Outcome::indeterminate("no stream completed");
        return vec![
            ("sse.framing", none()),
            ("sse.single-done", none()),
            ("sse.finish-once", none()),
            ("sse.usage", none()),
        ];
    }
    let n = streams.len();
    let mut framing = Vec::new();
    let mut done = Vec::new();
    let mut finish = Vec::new();
    let mut usage = Vec::new();
    let mut with_usage = 0;
    for (call, view) in &streams {
        let who = call.spec.describe();
        if let Some(problem) = view.problems.first() {
            framing.push(format!("{who}: {problem}"));
        }
        if view.ids.len() > 1 {
            framing.push(format!(
                "{who}: chunks carry {} different ids {:?}",
                view.ids.len(),
                view.ids
            ));
        }
        if let Some(error) = &view.error_event {
            framing.push(format!(
                "{who}: a 200 stream carried an error event {error}"
            ));
        }
        let last = view.n_events.checked_sub(1);
        match view.done_positions.as_slice() {
            [only] if Some(*only) == last => {}
            [] => done.push(format!(
                "{who}: {} events and no data: [DONE]",
                view.n_events
            )),
            [only] => done.push(format!(
                "{who}: data: [DONE] is event {only} of {}, not the last",
                view.n_events
            )),
            many => done.push(format!(
                "{who}: data: [DONE] {} times (events {many:?})",
                many.len()
            )),
        }
        match view.finishes.as_slice() {
            [(at, reason)] => {
                if reason != "stop" && reason != "length" {
                    finish.push(format!(
                        "{who}: finish_reason {reason:?}, expected stop or length"
                    ));
                }
                if view.last_text_position.is_some_and(|p| p > *at) {
                    finish.push(format!(
                        "{who}: text arrives after the finish_reason chunk (event {at})"
                    ));
                }
            }
            [] => finish.push(format!("{who}: no chunk carries a finish_reason")),
            many => finish.push(format!(
                "{who}: {} chunks carry a finish_reason: {many:?}",
                many.len()
            )),
        }
        if call.spec.include_usage {
            with_usage += 1;
            match view.usage {
                None => usage.push(format!("{who}: include_usage set but no usage chunk")),
                Some(u) => {
                    if view.usage_chunk_with_choices {
                        usage.push(format!("{who}: the usage chunk has choices (expected [])"));
                    }
                    if u.completion_tokens < view.text_chunks as i64 {
                        usage.push(format!(
                            "{who}: usage says {} completion tokens but {} chunks carried text",
                            u.completion_tokens, view.text_chunks
                        ));
                    }
                }
            }
        }
    }
    let usage_outcome = if with_usage == 0 {
        Outcome::indeterminate("no stream asked for usage")
    } else {
        Outcome::from_failures(format!("{with_usage} streams with include_usage"), &usage)
    };
    vec![
        (
            "sse.framing",
            Outcome::from_failures(format!("{n} streams well framed"), &framing),
        ),
        (
            "sse.single-done",
            Outcome::from_failures(format!("{n} streams ended with one [DONE]"), &done),
        ),
        (
            "sse.finish-once",
            Outcome::from_failures(format!("{n} streams had one finish_reason"), &finish),
        ),
        ("sse.usage", usage_outcome),
    ]
}
