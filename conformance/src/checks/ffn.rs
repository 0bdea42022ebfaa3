//! The FFN server's HTTP port (afd-spec §6.4, §7.4 R7): it never completes a client request, and a
//! request sent to it is refused or answered with an error within the deadline; a hang is a failure.
//!
//! On its own port the FFN is asked directly. When both roles share one host:port (the colocation
//! recipes), every connection is a fresh one, so the kernel may hand it to either listener: the check
//! sends a series of requests there and demands that each is answered in time and counted by the
//! Attention server's `/metrics` (one not counted was completed by someone else). A hang there counts
//! against the FFN only when later connections are still served (two listeners); a port that stops
//! answering altogether is the Attention server's own hang, judged by `liveness.completes`.

use std::time::Duration;

use crate::checks::{Api, Completion, Counters, Outcomes, RequestSpec, Session, queues};
use crate::client::{HttpError, Request};
use crate::report::Outcome;

/// Fresh connections sent to a shared port. With two listeners each lands on the FFN with probability
/// 1/2, so a listening FFN goes unnoticed with probability 2^-24.
pub const SHARED_PORT_REQUESTS: u32 = 24;

/// The FFN phase.
pub async fn check(session: &Session) -> Outcomes {
    let Some(ffn) = session.target.ffn.clone() else {
        let skip = || Outcome::skipped("no FFN URL (give --ffn-url or a deployment)");
        return vec![("ffn.never-completes", skip()), ("ffn.fails-fast", skip())];
    };
    if session.target.ffn_shares_port() {
        return shared_port(session).await;
    }
    let deadline = session.settings.ffn_deadline;
    let mut completed = Vec::new();
    let mut hung = Vec::new();
    let mut answers = Vec::new();
    let mut rng = session.rng("ffn");
    for api in [Api::Completions, Api::Chat, Api::Completions] {
        let stream = answers.len() == 2;
        let mut spec = RequestSpec::new("ffn", api, session.prompt(&mut rng), 4);
        if stream {
            spec = spec.streaming(false);
        }
        let request = Request::post_json(api.path(), &spec.body(&session.model));
        let what = format!(
            "POST {}{} to the FFN server {}",
            api.path(),
            if stream { " (stream)" } else { "" },
            ffn.url()
        );
        let client = session
            .client
            .clone()
            .with_timeout(session.within_budget(deadline));
        let result = if stream {
            client.stream(&ffn, &request, None).await
        } else {
            client.send(&ffn, &request).await
        };
        match result {
            Ok(r) if r.status() == 200 => {
                completed.push(format!(
                    "{what}: HTTP 200 after {:.3} s: {}",
                    r.elapsed.as_secs_f64(),
                    crate::client::wire::printable_prefix(&r.body, 160)
                ));
                answers.push("200".to_owned());
            }
            Ok(r) => answers.push(format!("HTTP {}", r.status())),
            Err(err) if err.is_timeout() => {
                hung.push(format!("{what}: {err}"));
                answers.push("no answer".to_owned());
            }
            Err(HttpError::Refused(_)) => answers.push("refused".to_owned()),
            Err(err) => answers.push(format!("{err}")),
        }
        if !hung.is_empty() {
            break;
        }
    }
    let summary = format!(
        "the FFN server {} answered: {}",
        ffn.url(),
        answers.join(", ")
    );
    let never = if completed.is_empty() {
        Outcome::pass(summary.clone())
    } else {
        Outcome::from_failures("", &completed)
    };
    let fast = if hung.is_empty() {
        Outcome::pass(format!("{summary}, each within {deadline:.1?}"))
    } else {
        Outcome::from_failures("", &hung)
    };
    vec![("ffn.never-completes", never), ("ffn.fails-fast", fast)]
}

async fn shared_port(session: &Session) -> Outcomes {
    let url = session.target.attention.url();
    // Without a baseline, never-completes falls back on the response ids; fails-fast needs no metrics.
    let before = idle_counters(session).await;
    let deadline = session
        .settings
        .ffn_deadline
        .max(session.settings.probe_timeout);
    let mut rng = session.rng("ffn.shared");
    let mut ok = 0u64;
    let mut foreign = Vec::new();
    let mut hung = Vec::new();
    let mut other = Vec::new();
    let mut served_after_hang = false;
    let mut consecutive_hangs = 0;
    for i in 0..SHARED_PORT_REQUESTS {
        let request_id = format!("conf-ffn-{:x}-{i}", session.seed);
        let spec = RequestSpec::new("ffn", Api::Completions, session.prompt(&mut rng), 2);
        let request = Request::post_json(spec.api.path(), &spec.body(&session.model))
            .with_header(crate::checks::REQUEST_ID_HEADER, &request_id);
        let client = session
            .client
            .clone()
            .with_timeout(session.within_budget(deadline));
        let sent = tokio::time::Instant::now();
        match client.send(&session.target.attention, &request).await {
            Ok(r) if r.status() == 200 => {
                ok += 1;
                consecutive_hangs = 0;
                served_after_hang |= !hung.is_empty();
                // vLLM (and the twin) build the response id from X-Request-Id; a response without it
                // came from a server that never saw the request as the Attention server does.
                let id = Completion::parse(Api::Completions, &r)
                    .id
                    .unwrap_or_default();
                if !id.contains(&request_id) {
                    foreign.push(format!(
                        "request {i} (X-Request-Id {request_id}) on a fresh connection to {url} answered 200 with id {id:?}: {}",
                        crate::client::wire::printable_prefix(&r.body, 160)
                    ));
                }
            }
            Ok(r) => other.push(format!("request {i}: HTTP {}", r.status())),
            Err(err) if err.is_timeout() => {
                consecutive_hangs += 1;
                let what = format!(
                    "request {i} (X-Request-Id {request_id}) on a fresh connection to the shared host:port {url}"
                );
                // The Attention server's host:port took the request and never answered: liveness
                // evidence whichever listener took it (the table of docs/conformance.md lists both).
                session.note_silent_post(what.clone(), sent.elapsed());
                hung.push(format!("{what}: {err}"));
            }
            Err(err) => other.push(format!("request {i}: {err}")),
        }
        // Enough evidence either way: a listener that hangs while another serves, or a port that
        // stopped answering altogether (8 hangs in a row: 1 in 256 for two listeners taking turns at
        // random).
        if (hung.len() >= 2 && served_after_hang) || consecutive_hangs >= 8 {
            break;
        }
    }
    let note = format!("fresh connections to the shared host:port {url}");
    let fast = if hung.is_empty() {
        Outcome::pass(format!(
            "{ok} {note}, every one answered within {deadline:.1?}"
        ))
    } else if served_after_hang {
        Outcome::fail(format!(
            "{} {note} hung while later ones were served: a second listener (the FFN server?) accepts and never answers",
            hung.len()
        ))
        .with_counterexample(hung.join("\n"))
    } else {
        Outcome::indeterminate(format!(
            "{note} stopped answering altogether after {ok} answers, so the hang cannot be told from the Attention server's own (see liveness.completes)"
        ))
    };
    let counted = match &before {
        Err(err) => Err(err.clone()),
        Ok(before) => session
            .settle(session.settings.settle_timeout, |scrape| {
                Counters::read(scrape).is_ok_and(|now| now.since(before).success >= ok as f64)
            })
            .await
            .and_then(|(scrape, _)| Counters::read(&scrape))
            .map(|now| now.since(before).success),
    };
    let never = match counted {
        Ok(counted) if counted + 1e-9 < ok as f64 => Outcome::fail(format!(
            "{ok} {note} answered 200 but the Attention server counted {counted}; the rest were completed by another listener (the FFN server?)"
        ))
        .with_counterexample(
            foreign
                .first()
                .cloned()
                .unwrap_or_else(|| format!("{} successful responses are missing from vllm:request_success_total", ok as f64 - counted)),
        ),
        _ if !foreign.is_empty() => Outcome::from_failures("", &foreign),
        Ok(_) if !other.is_empty() => {
            Outcome::indeterminate(format!("{note}: {} requests failed: {}", other.len(), other[0]))
        }
        Ok(_) => Outcome::pass(format!("all {ok} {note} were served and counted by the Attention server")),
        Err(err) => Outcome::indeterminate(format!("{note}: {err}")),
    };
    vec![("ffn.never-completes", never), ("ffn.fails-fast", fast)]
}

async fn idle_counters(session: &Session) -> Result<Counters, String> {
    let (scrape, idle) = session
        .settle(
            session.settings.drain_timeout.min(Duration::from_secs(30)),
            |s| queues(s).1,
        )
        .await?;
    if !idle {
        return Err("the Attention queues are not idle".to_owned());
    }
    Counters::read(&scrape)
}
