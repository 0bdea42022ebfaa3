//! Token timing against the simulator (`timing.simulator`): the mean TTFT and TPOT a client measured under
//! the run's open-loop load ([`Session::open_loop`]), compared with what `afd-sim` predicts for the same
//! deployment serving the same requests, within `--max-sim-deviation`.
//!
//! Only an afd-twin has a prediction to meet: it times tokens with the simulator's live engine and states
//! on `/metrics` how ([`TwinTiming`]: priced model, GPU, seed, time scale). The prediction asks
//! `afd-sim`'s public API what `afd-sim predict --model MODEL --gpu GPU --seed SEED` would: the model the
//! twin names ([`priced_model`]), the deployment as launched on that GPU
//! (`ServingConfig::from_deployment`), the cost model `afd-sim predict` prices a pair's steps with by
//! default (`profiles::default_cost_model` at real vLLM's host pace, `vllm_compare::pair_at_vllm_pace`;
//! `predict`'s model of vLLM's front end is left out, the twin's own HTTP server standing in for it),
//! and `afd_sim::engine::run` with the load's requests: their scheduled
//! arrivals, the prompt lengths the server counted, `max_tokens` outputs (`ignore_eos`), the load's
//! concurrency cap. Nothing here reads the twin's own code. Real time is simulated time times the scale,
//! so arrivals and measured latencies are divided by it. Means, not percentiles: a short load has too few
//! samples for a tail, and the mean is what `afd-sim predict` and afd-twin agree on (docs/twin.md). The
//! client's and the twin's own costs (HTTP, JSON, the loopback) count against the tolerance; they weigh
//! most on short requests and small time scales. Against a real vLLM pair this check is indeterminate:
//! its timing is a measurement to compare with `afd-sim predict`, not an invariant.

use std::path::Path;

use afd_sim::deployment::Deployment;
use afd_sim::engine::{RunOptions, run};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::CostModel;
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::profiles::default_cost_model;
use afd_sim::model::workload::{RequestSpec as SimRequest, Workload};
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;
use afd_sim::time::SimTime;
use afd_traces::input::{InputKind, read_text};
use afd_traces::model_config::ModelConfig;

use crate::bench::stats::{Metric, mean, samples_ms};
use crate::bench::{BenchResult, random_requests};
use crate::checks::Session;
use crate::prometheus::Scrape;
use crate::report::Outcome;

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

/// The `/metrics` series in which an afd-twin states how it times tokens (docs/twin.md; not a vLLM
/// metric).
pub const TWIN_TIMING_METRIC: &str = "afd_twin_timing_info";

/// The `pricing` label's value of [`TWIN_TIMING_METRIC`] for a twin that prices a pair from kernels
/// alone (`afd-twin --kernel-model`).
pub const PRICING_KERNEL_MODEL: &str = "kernel-model";
/// The `pricing` label's value for a twin at real vLLM's host pace where the engine profile measured
/// the model (its default).
pub const PRICING_VLLM_HOST_PACE: &str = "vllm-host-pace";

/// How an afd-twin says it times tokens: what `afd-sim` needs, besides the deployment, to predict the
/// latencies a client of that twin measures.
#[derive(Clone, Debug, PartialEq)]
pub struct TwinTiming {
    /// The priced model's name: a shipped model, or the folder whose `config.json` the twin read.
    pub model: String,
    pub gpu: GpuKind,
    /// The live engine's seed (`--seed` of the serve words).
    pub seed: u64,
    /// Real seconds per simulated second (`--time-scale`).
    pub time_scale: f64,
    /// The twin prices the pair from kernels alone (`afd-twin --kernel-model`, the series'
    /// `pricing="kernel-model"`); else at real vLLM's host pace (`pricing="vllm-host-pace"`, or no
    /// `pricing` label: twins before it had none and priced so).
    pub kernel_model: bool,
}

impl TwinTiming {
    /// The twin's timing as its `/metrics` states it: `None` when the scrape has no such series (the
    /// server is not an afd-twin), an error naming the label that does not read.
    pub fn from_scrape(scrape: &Scrape) -> Option<Result<TwinTiming, String>> {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.name == TWIN_TIMING_METRIC)?;
        let label = |key: &str| {
            sample
                .label(key)
                .ok_or_else(|| format!("{TWIN_TIMING_METRIC} has no {key} label"))
        };
        let read = || -> Result<TwinTiming, String> {
            let gpu_text = label("gpu")?;
            let gpu = GpuKind::parse(gpu_text).ok_or_else(|| {
                format!("{TWIN_TIMING_METRIC} gpu=\"{gpu_text}\" is no GPU afd-sim knows")
            })?;
            let seed_text = label("seed")?;
            let seed = seed_text.parse().map_err(|_| {
                format!("{TWIN_TIMING_METRIC} seed=\"{seed_text}\" is not an unsigned integer")
            })?;
            let scale_text = label("time_scale")?;
            let time_scale = scale_text
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| {
                    format!("{TWIN_TIMING_METRIC} time_scale=\"{scale_text}\" is not a finite number >= 0")
                })?;
            let kernel_model = match sample.label("pricing") {
                None | Some(PRICING_VLLM_HOST_PACE) => false,
                Some(PRICING_KERNEL_MODEL) => true,
                Some(other) => {
                    return Err(format!(
                        "{TWIN_TIMING_METRIC} pricing=\"{other}\" is neither {PRICING_KERNEL_MODEL} nor {PRICING_VLLM_HOST_PACE}"
                    ));
                }
            };
            Ok(TwinTiming {
                model: label("model")?.to_owned(),
                gpu,
                seed,
                time_scale,
                kernel_model,
            })
        };
        Some(read())
    }
}

/// The model a twin prices, taken as `afd-sim predict --model` takes one: the `config.json` of the
/// deployment's model folder `served` when the twin names that folder (it read that file), else the
/// shipped model of that name. An error says why neither applies.
pub fn priced_model(served: &str, named: &str) -> Result<ModelArch, String> {
    let path = Path::new(served);
    if path.file_name().and_then(|n| n.to_str()) == Some(named)
        && let Ok(text) = read_text(&path.join("config.json"), InputKind::MODEL_CONFIG)
        && let Ok(config) = ModelConfig::from_json(&text)
    {
        return Ok(ModelArch::from_config(named, config));
    }
    match ModelArch::builtin(named) {
        Some(Ok(model)) => Ok(model),
        Some(Err(err)) => Err(format!(
            "the shipped config of {named} does not read: {err}"
        )),
        None => Err(format!(
            "the twin prices {named}, which is neither a shipped model nor the config.json of the deployment's model folder {served} here"
        )),
    }
}

/// What afd-sim simulates for `deployment` on `gpu` serving `model`: its timing view and the cost model
/// `afd-sim predict` prices a pair's steps with by default (the GPU's built-in profile, else its
/// datasheet roofline, each role's issue of a step without graphs at real vLLM's host pace where the
/// built-in engine profile measured the model: `vllm_compare::pair_at_vllm_pace`), or with
/// `--kernel-model` where `kernel_model` (the twin said so).
pub fn simulated(
    deployment: &Deployment,
    model: &ModelArch,
    gpu: GpuKind,
    kernel_model: bool,
) -> Result<(ServingConfig, CostModel), String> {
    let config = ServingConfig::from_deployment(deployment, gpu)
        .map_err(|err| format!("afd-sim cannot model the deployment: {err}"))?;
    let cost = default_cost_model(model, gpu, config.cost_layout())
        .map_err(|err| format!("afd-sim cannot price the deployment: {err}"))?;
    let engine = (!kernel_model)
        .then(|| afd_sim::vllm_compare::builtin_engine(model, gpu))
        .flatten();
    let cost = afd_sim::vllm_compare::pair_at_vllm_pace(cost, &config, engine.as_ref());
    Ok((config, cost))
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
    let timing = match TwinTiming::from_scrape(&scrape) {
        None => {
            return Outcome::indeterminate(format!(
                "the pair is not an afd-twin (/metrics has no {TWIN_TIMING_METRIC}); afd-sim's prediction is a twin's timing, a real pair's is a measurement"
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
    let simulated = priced_model(deployment.attention.model().unwrap_or(""), &timing.model)
        .and_then(|model| simulated(deployment, &model, timing.gpu, timing.kernel_model));
    let (config, cost) = match simulated {
        Ok(simulated) => simulated,
        Err(err) => return Outcome::indeterminate(err),
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
