//! Token timing against service-level objectives: the median time to first token and inter-token latency
//! of lone streams, compared with `--max-ttft-ms` and `--max-itl-ms`; and, through
//! [`crate::checks::simulator`], the open-loop load's latencies against `afd-sim`'s prediction.
//!
//! Times are taken at the client from the arrival of each text chunk (`vllm bench serve`'s TTFT and ITL);
//! without an objective the invariants are skipped, since a pair's speed is not a property of the
//! protocol.

use std::time::Duration;

use crate::bench::stats::percentile;
use crate::checks::{Api, Outcomes, RequestSpec, Session, StreamView};
use crate::report::Outcome;

/// Lone streams measured.
pub const STREAMS: usize = 3;

/// The timing phase.
pub async fn check(session: &Session) -> Outcomes {
    let mut out = objectives(session).await;
    out.push((
        crate::checks::simulator::ID,
        crate::checks::simulator::check(session).await,
    ));
    out
}

/// `timing.itl` and `timing.ttft`.
async fn objectives(session: &Session) -> Outcomes {
    let (itl_slo, ttft_slo) = (session.settings.max_itl_ms, session.settings.max_ttft_ms);
    if itl_slo.is_none() && ttft_slo.is_none() {
        return vec![
            ("timing.itl", Outcome::skipped("no --max-itl-ms given")),
            ("timing.ttft", Outcome::skipped("no --max-ttft-ms given")),
        ];
    }
    let mut rng = session.rng("timing");
    let mut itls = Vec::new();
    let mut ttfts = Vec::new();
    let tokens = session.settings.max_tokens.max(8) * 2;
    for _ in 0..STREAMS {
        let spec = RequestSpec::new("timing", Api::Completions, session.prompt(&mut rng), tokens)
            .streaming(true)
            .ignoring_eos();
        let index = session.generate(spec).await;
        session.with_call(index, |call| {
            if let Some(response) = call.ok() {
                let times = StreamView::parse(call.spec.api, response).text_times;
                if let Some(first) = times.first() {
                    ttfts.push(ms(*first));
                }
                itls.extend(times.windows(2).map(|w| ms(w[1].saturating_sub(w[0]))));
            }
        });
    }
    let itl = judge("inter-token latency", &mut itls, itl_slo, "--max-itl-ms");
    let ttft = judge("time to first token", &mut ttfts, ttft_slo, "--max-ttft-ms");
    vec![("timing.itl", itl), ("timing.ttft", ttft)]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// The median of `samples` against the objective `slo` (ms) of `flag`.
pub(crate) fn judge(what: &str, samples: &mut [f64], slo: Option<f64>, flag: &str) -> Outcome {
    let Some(slo) = slo else {
        return Outcome::skipped(format!("no {flag} given"));
    };
    let n = samples.len();
    if n == 0 {
        return Outcome::indeterminate(format!("no {what} sample (no stream completed)"));
    }
    samples.sort_by(f64::total_cmp);
    // numpy's linear median: the mean of the middle two for an even count.
    let median = percentile(samples, 50.0);
    let max = samples.iter().copied().fold(0.0, f64::max);
    if median <= slo {
        Outcome::pass(format!(
            "median {what} {median:.2} ms <= {slo} ms over {n} samples (max {max:.2} ms)"
        ))
    } else {
        Outcome::fail(format!("median {what} {median:.2} ms exceeds {flag} {slo} ms"))
            .with_counterexample(format!(
                "{n} samples from {STREAMS} lone streams: median {median:.2} ms, max {max:.2} ms, objective {slo} ms"
            ))
    }
}
