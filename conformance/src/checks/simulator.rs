//! Token timing against the simulator (`timing.simulator`): the mean TTFT and TPOT a client measured under
//! the run's open-loop load ([`Session::open_loop`]), compared with what `afd-sim` predicts for the same
//! deployment serving the same requests, within `--max-sim-deviation`.
//!
//! Only an afd-twin has a prediction to meet: it times tokens with the simulator's live engine and states
//! on `/metrics` how ([`TimingInfo`]: priced model, GPU, seed, time scale). The prediction is
//! `afd_sim::engine::run` on the deployment as launched (the twin's own [`serving_config`]) with the
//! load's requests: their scheduled arrivals, the prompt lengths the server counted, `max_tokens` outputs
//! (`ignore_eos`), the load's concurrency cap. Real time is simulated time times the scale, so arrivals
//! and measured latencies are divided by it. Means, not percentiles: a short load has too few samples for
//! a tail, and the mean is what `afd-sim predict` and afd-twin agree on (docs/twin.md). The client's and
//! the twin's own costs (HTTP, JSON, the loopback) count against the tolerance; they weigh most on short
//! requests and small time scales. Against a real vLLM pair this check is indeterminate: its timing is a
//! measurement to compare with `afd-sim predict`, not an invariant.

use afd_sim::engine::{RunOptions, run};
use afd_sim::model::cost::CostModel;
use afd_sim::model::workload::{RequestSpec as SimRequest, Workload};
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;
use afd_sim::time::SimTime;

use crate::bench::stats::{Metric, mean, samples_ms};
use crate::bench::{BenchResult, random_requests};
use crate::checks::Session;
use crate::report::Outcome;
use crate::twin::timing::sim::{SimPricing, TIMING_INFO_METRIC, TimingInfo, serving_config};

/// The invariant this module judges.
pub const ID: &str = "timing.simulator";

/// Mean latencies in simulated milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Latencies {
    /// Requests that completed.
    pub n: usize,
    pub ttft_ms: f64,
    /// `None` when no request generated more than one token.
    pub tpot_ms: Option<f64>,
}

/// The check, run after the open-loop load (it sends the load itself when routing did not).
pub async fn check(session: &Session) -> Outcome {
    let Some(max_deviation) = session.settings.max_sim_deviation else {
        return Outcome::skipped("no --max-sim-deviation given");
    };
    if let Some(reason) = session.hung() {
        return Outcome::indeterminate(format!("not run: {reason}"));
    }
    let scrape = match session.scrape().await {
        Ok(scrape) => scrape,
        Err(err) => return Outcome::indeterminate(err),
    };
    let timing = match TimingInfo::from_scrape(&scrape) {
        None => {
            return Outcome::indeterminate(format!(
                "the pair is not an afd-twin (/metrics has no {TIMING_INFO_METRIC}); afd-sim's prediction is a twin's timing, a real pair's is a measurement"
            ));
        }
        Some(Err(err)) => return Outcome::indeterminate(format!("/metrics: {err}")),
        Some(Ok(timing)) => timing,
    };
    if timing.time_scale == 0.0 {
        return Outcome::indeterminate(
            "the twin runs at --time-scale 0 (steps back to back): no simulated time passes",
        );
    }
    let Some(deployment) = &session.target.deployment else {
        return Outcome::indeterminate(
            "no deployment given (--recipe or --attention-args/--ffn-args): nothing to simulate",
        );
    };
    let pricing = SimPricing::new(deployment.attention.model().unwrap_or(""), timing.gpu);
    if pricing.model.name != timing.model {
        return Outcome::indeterminate(format!(
            "the twin prices {}, but the deployment's model resolves to {} here ({})",
            timing.model, pricing.model.name, pricing.model_source
        ));
    }
    let config = match serving_config(deployment, &pricing) {
        Ok(config) => config,
        Err(err) => {
            return Outcome::indeterminate(format!("afd-sim cannot model the deployment: {err}"));
        }
    };
    let cost = match pricing.cost(&config) {
        Ok(cost) => cost,
        Err(err) => {
            return Outcome::indeterminate(format!("afd-sim cannot price the deployment: {err}"));
        }
    };
    let load = match session.open_loop().await {
        Ok(load) => load,
        Err(err) => return Outcome::indeterminate(err.clone()),
    };
    let prediction = workload(load, timing.time_scale).and_then(|workload| {
        let predicted = predict(&config, cost, &workload, timing.seed)?;
        Ok((workload, predicted))
    });
    let (workload, predicted) = match prediction {
        Ok(prediction) => prediction,
        Err(err) => return Outcome::indeterminate(err),
    };
    let measured = measured(load, timing.time_scale);
    let context = format!(
        "{} requests of the open-loop load ({} in / {} out, ±{:.0} %, {} requests/s, concurrency {}, seed {}) on {} as {} on {}, seed {}, time scale {}",
        workload.requests.len(),
        load.config.random_input_len,
        load.config.random_output_len,
        load.config.random_range_ratio * 100.0,
        load.config.request_rate,
        load.config
            .max_concurrency
            .map_or_else(|| "unlimited".to_owned(), |c| c.to_string()),
        load.config.seed,
        session
            .target
            .deployment_origin
            .as_deref()
            .unwrap_or("the deployment"),
        timing.model,
        timing.gpu.as_str(),
        timing.seed,
        timing.time_scale
    );
    judge(measured, predicted, max_deviation, &context)
}

/// The load's requests as the simulator's client sends them: arrivals at simulated time (real time
/// divided by `time_scale`), prompt lengths from the server's `usage` (the generated length where it
/// sent none), outputs of `max_tokens`. Every request must have completed.
pub fn workload(load: &BenchResult, time_scale: f64) -> Result<Workload, String> {
    let failed: Vec<String> = load
        .records
        .iter()
        .filter(|r| !r.success)
        .map(|r| format!("request {}: {}", r.index, r.error))
        .collect();
    if let Some(first) = failed.first() {
        return Err(format!(
            "{} of {} requests of the open-loop load failed (first: {first}); the prediction needs all of them",
            failed.len(),
            load.records.len()
        ));
    }
    let scheduled = random_requests(&load.config).map_err(|err| err.to_string())?;
    if scheduled.len() != load.records.len() {
        return Err(format!(
            "the load sent {} requests but its settings draw {}",
            load.records.len(),
            scheduled.len()
        ));
    }
    let requests = load
        .records
        .iter()
        .zip(&scheduled)
        .map(|(record, &(at_s, input, _))| {
            let prompt = record
                .prompt_tokens
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(input);
            SimRequest {
                intended_send: SimTime::from_ns((at_s / time_scale * 1e9).round() as u64),
                input_tokens: prompt.max(1),
                output_tokens: record.max_tokens.max(1),
            }
        })
        .collect();
    let rate = load.config.request_rate;
    Ok(Workload {
        requests,
        max_concurrency: load
            .config
            .max_concurrency
            .map(|c| u32::try_from(c).unwrap_or(u32::MAX)),
        request_rate: rate.is_finite().then_some(rate * time_scale),
        burstiness: load.config.burstiness,
    })
}

/// Mean TTFT and TPOT the client measured, as `vllm bench serve` defines them, in simulated ms.
pub fn measured(load: &BenchResult, time_scale: f64) -> Latencies {
    let ttft = samples_ms(load, Metric::Ttft);
    let tpot = samples_ms(load, Metric::Tpot);
    Latencies {
        n: ttft.len(),
        ttft_ms: mean(&ttft) / time_scale,
        tpot_ms: (!tpot.is_empty()).then(|| mean(&tpot) / time_scale),
    }
}

/// What `afd-sim` predicts for `workload` on `config` priced by `cost`, with the twin's `seed`.
pub fn predict(
    config: &ServingConfig,
    cost: CostModel,
    workload: &Workload,
    seed: u64,
) -> Result<Latencies, String> {
    let result = run(config, cost, workload, &RunOptions::new(Seed(seed)))
        .map_err(|err| format!("afd-sim cannot model the deployment: {err}"))?;
    let metrics = &result.metrics;
    if metrics.completed != workload.requests.len() as u64 {
        return Err(format!(
            "afd-sim completes {} of the {} requests ({} failed, run {})",
            metrics.completed,
            workload.requests.len(),
            metrics.failed,
            result.outcome.as_str()
        ));
    }
    Ok(Latencies {
        n: usize::try_from(metrics.completed).unwrap_or(usize::MAX),
        ttft_ms: metrics.ttft.summary_ms()[0],
        tpot_ms: (metrics.tpot.count() > 0).then(|| metrics.tpot.summary_ms()[0]),
    })
}

/// Passes when every mean lies within `max_deviation` (a fraction) of the prediction.
pub fn judge(
    measured: Latencies,
    predicted: Latencies,
    max_deviation: f64,
    context: &str,
) -> Outcome {
    let mut lines = Vec::new();
    let mut worst: Option<(&str, f64)> = None;
    let mut compare = |name: &'static str, got: f64, want: f64| {
        let deviation = if want > 0.0 {
            (got - want) / want
        } else {
            f64::INFINITY
        };
        lines.push(format!(
            "{name} {got:.3} ms, afd-sim {want:.3} ms ({:+.1} %)",
            deviation * 100.0
        ));
        if worst.is_none_or(|(_, w)| deviation.abs() > w.abs()) {
            worst = Some((name, deviation));
        }
    };
    compare("mean TTFT", measured.ttft_ms, predicted.ttft_ms);
    match (measured.tpot_ms, predicted.tpot_ms) {
        (Some(got), Some(want)) => compare("mean TPOT", got, want),
        _ => lines.push("mean TPOT not compared (no request of more than one token)".to_owned()),
    }
    let summary = lines.join(", ");
    let (name, deviation) = worst.expect("TTFT is always compared");
    if deviation.abs() <= max_deviation {
        Outcome::pass(format!(
            "{summary}: within ±{:.0} % over {} requests",
            max_deviation * 100.0,
            measured.n
        ))
    } else {
        Outcome::fail(format!(
            "{name} differs from afd-sim's prediction by {:+.1} %, more than --max-sim-deviation {max_deviation}",
            deviation * 100.0
        ))
        .with_counterexample(format!("{summary}; {context}"))
    }
}

#[cfg(test)]
mod tests;
