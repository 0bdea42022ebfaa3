//! Greedy repeatability in the MLPerf spirit (TEST01/TEST06; afd-spec §7.4 R4): the same temperature-0
//! request gives the same text when repeated alone, streamed or not; inside a concurrent burst it gives
//! the same text only when the server runs vLLM's batch-invariant mode, and otherwise a common prefix of
//! at least `--greedy-prefix` of its length, because batching can reorder floating-point reductions and
//! flip an argmax.

use crate::checks::{Api, Outcomes, RequestSpec, Session};
use crate::report::Outcome;

/// Repeats of the lone request.
pub const REPEATS: usize = 3;

/// Characters two texts share from the start, as a fraction of the longer one (1 for two empty texts).
pub fn common_prefix_ratio(a: &str, b: &str) -> f64 {
    let shared = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let longest = a.chars().count().max(b.chars().count());
    if longest == 0 {
        1.0
    } else {
        shared as f64 / longest as f64
    }
}

/// The greedy phase.
pub async fn check(session: &Session) -> Outcomes {
    let mut rng = session.rng("greedy");
    let prompt = session.prompt(&mut rng);
    let max_tokens = session.settings.max_tokens.max(8) * 2;
    let lone = || RequestSpec::new("greedy", Api::Completions, prompt.clone(), max_tokens);

    let mut alone = Vec::new();
    for _ in 0..REPEATS {
        let index = session.generate(lone()).await;
        alone.push(session.with_call(index, |g| g.text()));
    }
    let reference = alone.first().cloned().flatten();
    let fixed = match &reference {
        None => Outcome::indeterminate("the first lone request got no text"),
        Some(first) => {
            let differing: Vec<String> = alone
                .iter()
                .enumerate()
                .skip(1)
                .filter_map(|(i, text)| match text {
                    None => None,
                    Some(text) if text == first => None,
                    Some(text) => Some(format!(
                        "repeat {i} of the same greedy request gave {text:?}, the first gave {first:?} (prompt {prompt:?}, max_tokens {max_tokens})"
                    )),
                })
                .collect();
            let missing = alone.iter().filter(|t| t.is_none()).count();
            if differing.is_empty() && missing > 0 {
                Outcome::indeterminate(format!("{missing} of {REPEATS} repeats got no text"))
            } else {
                Outcome::from_failures(
                    format!("{REPEATS} lone repeats gave identical text"),
                    &differing,
                )
            }
        }
    };

    let streamed = session.generate(lone().streaming(true)).await;
    let streamed = session.with_call(streamed, |g| g.text());
    let stream_equals = match (&reference, streamed) {
        (Some(full), Some(stream)) if *full == stream => {
            Outcome::pass("the greedy stream's text equals the non-streaming text")
        }
        (Some(full), Some(stream)) => Outcome::fail("the greedy stream's text differs from the non-streaming text")
            .with_counterexample(format!(
                "prompt {prompt:?}, max_tokens {max_tokens}: stream gave {stream:?}, non-streaming gave {full:?}"
            )),
        _ => Outcome::indeterminate("a response is missing"),
    };

    // The same request inside a burst of others.
    let burst_size = session.settings.concurrency.clamp(2, 16) as usize;
    let mut specs: Vec<RequestSpec> = (0..burst_size - 1)
        .map(|_| {
            RequestSpec::new(
                "greedy",
                Api::Completions,
                session.prompt(&mut rng),
                max_tokens,
            )
        })
        .collect();
    specs.insert(burst_size / 2, lone());
    let indices = session.generate_all(specs, burst_size).await;
    let loaded = session.with_call(indices[burst_size / 2], |g| g.text());
    let invariant = session.target.expect.batch_invariant;
    let across = match (&reference, loaded) {
        (Some(alone), Some(loaded)) => {
            let ratio = common_prefix_ratio(alone, &loaded);
            let needed = if invariant {
                1.0
            } else {
                session.settings.greedy_prefix
            };
            let mode = if invariant {
                "batch-invariant server: identical text required".to_owned()
            } else {
                format!("not batch-invariant: common prefix >= {needed:.2} required")
            };
            if ratio + 1e-12 >= needed {
                Outcome::pass(format!(
                    "inside a burst of {burst_size}: common prefix {ratio:.2} ({mode})"
                ))
            } else {
                Outcome::fail(format!("inside a burst of {burst_size} the greedy text shares only {ratio:.2} of its prefix ({mode})"))
                    .with_counterexample(format!(
                        "prompt {prompt:?}, max_tokens {max_tokens}: alone {alone:?}, inside the burst {loaded:?}"
                    ))
            }
        }
        _ => Outcome::indeterminate("a response is missing"),
    };
    vec![
        ("greedy.fixed-load", fixed),
        ("greedy.stream-equals-full", stream_equals),
        ("greedy.across-load", across),
    ]
}

#[cfg(test)]
mod tests;
