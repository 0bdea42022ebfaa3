//! Real vLLM against the simulator: a plain `vllm serve` deployment and a `vllm bench serve` result
//! are simulated with the same deployment and workload, and each headline metric is set beside the
//! measured one (`afd-sim compare`, `afd-sim replay-vllm`).
//!
//! The deployment comes from the server's `vllm serve` words, read by the same deployment model as
//! `check` and `predict`; the workload from the result's own fields (prompts, rate, burstiness,
//! concurrency, token counts). Nothing here is fitted: the simulated run is priced by whatever cost
//! model the caller gives (the built-in profile plus the engine profile, `model/engine.rs`).

use crate::deployment::RoleConfig;
use crate::engine::{RunOptions, run};
use crate::launch::serving_config_from_command_lines;
use crate::model::arch::ModelArch;
use crate::model::cost::CostModel;
use crate::model::hardware::GpuKind;
use crate::model::workload::{ArrivalDraw, Arrivals, RampUp, RandomDataset, random_workload_drawn};
use crate::rng::Seed;
use crate::serving::ServingConfig;
use crate::topology::RuleSet;

/// What `vllm bench serve` was asked to run, read back from its result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BenchSetting {
    pub num_prompts: u32,
    pub input_len: u32,
    pub output_len: u32,
    /// `None` for `inf`.
    pub request_rate: Option<f64>,
    pub burstiness: f64,
    pub max_concurrency: Option<u32>,
    /// `--ramp-up-strategy` and its rates (the run's `request_rate` is then `inf`).
    pub ramp_up: Option<RampUp>,
}

impl BenchSetting {
    /// Whether the client paced its sends (a request rate or a ramp) rather than sending every
    /// prompt at once.
    pub fn arrival_bound(&self) -> bool {
        self.request_rate.is_some() || self.ramp_up.is_some()
    }
}

/// One metric, real and predicted.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricRow {
    /// The `vllm bench serve` result key (`output_throughput`, `mean_ttft_ms`, ...).
    pub key: &'static str,
    pub real: f64,
    pub predicted: f64,
}

impl MetricRow {
    /// Signed relative error of the prediction, `(predicted - real) / real`.
    pub fn error(&self) -> f64 {
        if self.real == 0.0 {
            0.0
        } else {
            (self.predicted - self.real) / self.real
        }
    }
}

/// The metrics compared, in report order.
pub const METRICS: [&str; 14] = [
    "output_throughput",
    "request_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
];

/// Reads the workload of a `vllm bench serve --save-result` JSON (random dataset, fixed lengths:
/// every request's length is the result's mean).
pub fn bench_setting(result: &serde_json::Value) -> Result<BenchSetting, String> {
    let number = |key: &str| result.get(key).and_then(serde_json::Value::as_f64);
    let need = |key: &str| number(key).ok_or_else(|| format!("the result has no number {key:?}"));
    let completed = need("completed")?;
    let num_prompts = number("num_prompts").unwrap_or(completed);
    if completed < 1.0 || num_prompts < 1.0 {
        return Err("the result completed no request".into());
    }
    // Every prompt sent either completed or failed (vllm/benchmarks/serve.py counts both), so a
    // result claims no more prompts than those: the simulation sends every one.
    let failed = number("failed").unwrap_or(0.0);
    let counts_agree = num_prompts >= completed
        && (result.get("failed").is_none() || num_prompts <= completed + failed);
    if !counts_agree || num_prompts.fract() != 0.0 || num_prompts > f64::from(u32::MAX) {
        return Err(format!(
            "num_prompts {num_prompts} is not the {completed} requests completed plus the {failed} failed"
        ));
    }
    let per_request = |key: &str| -> Result<u32, String> {
        let total = need(key)?;
        let mean = (total / completed).round();
        if !(0.0..=f64::from(u32::MAX)).contains(&mean) {
            return Err(format!(
                "{key} {total} over {completed} completed requests is not a token count a request can have"
            ));
        }
        Ok(mean as u32)
    };
    let input_len = per_request("total_input_tokens")?;
    let output_len = per_request("total_output_tokens")?;
    let request_rate = match result.get("request_rate") {
        Some(serde_json::Value::String(s)) if s == "inf" => None,
        Some(v) => match v.as_f64() {
            Some(r) if r.is_finite() && r > 0.0 => Some(r),
            Some(r) if r.is_infinite() => None,
            _ => {
                return Err(format!(
                    "request_rate {v} is neither a positive number nor \"inf\""
                ));
            }
        },
        None => return Err("the result has no request_rate".into()),
    };
    let burstiness = number("burstiness").unwrap_or(1.0);
    if !(burstiness.is_finite() && burstiness > 0.0) {
        return Err(format!("burstiness {burstiness} must be a positive number"));
    }
    let max_concurrency = match result.get("max_concurrency") {
        None | Some(serde_json::Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|&c| c >= 1)
                .ok_or_else(|| format!("max_concurrency {v} is not a count"))? as u32,
        ),
    };
    if input_len == 0 || output_len == 0 {
        return Err("the result's requests have no input or output tokens".into());
    }
    let ramp_up = ramp_up(result)?;
    if ramp_up.is_some() && request_rate.is_some() {
        return Err(
            "a ramp-up beside a finite request_rate: vllm bench serve refuses --request-rate with --ramp-up-strategy"
                .into(),
        );
    }
    Ok(BenchSetting {
        num_prompts: num_prompts as u32,
        input_len,
        output_len,
        request_rate,
        burstiness,
        max_concurrency,
        ramp_up,
    })
}

/// Each request's prompt and output tokens, in send order, where the result holds them: `vllm bench
/// serve --save-detailed` writes `input_lens` and `output_lens`, one entry per request (vLLM 0.26.0
/// `vllm/benchmarks/serve.py`; without the switch it deletes them). A run of the sharegpt dataset or
/// of random lengths (`--random-range-ratio`) is then simulated request by request, not at the mean
/// [`bench_setting`] reads from the totals. A failed request's output counts 0: it is simulated
/// asking for one token (what it asked is not in the result). `None` when the result has neither.
pub fn request_lengths(
    result: &serde_json::Value,
    setting: &BenchSetting,
) -> Result<Option<Vec<(u32, u32)>>, String> {
    let list = |key: &str| -> Result<Option<Vec<u32>>, String> {
        match result.get(key) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| format!("{key}[{i}] is {v}, not a token count"))
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(v) => Err(format!("{key} is {v}, not a list of token counts")),
        }
    };
    match (list("input_lens")?, list("output_lens")?) {
        (None, None) => Ok(None),
        (Some(_), None) | (None, Some(_)) => Err(
            "the result has one of input_lens and output_lens without the other (--save-detailed writes both)"
                .into(),
        ),
        (Some(inputs), Some(outputs)) => {
            if inputs.len() != outputs.len() || inputs.len() != setting.num_prompts as usize {
                return Err(format!(
                    "input_lens has {} entries and output_lens {}, where the result sent {} prompts",
                    inputs.len(),
                    outputs.len(),
                    setting.num_prompts
                ));
            }
            if let Some(i) = inputs.iter().position(|&n| n == 0) {
                return Err(format!("input_lens[{i}] is 0: a prompt has at least one token"));
            }
            Ok(Some(
                inputs
                    .into_iter()
                    .zip(outputs)
                    .map(|(input, output)| (input, output.max(1)))
                    .collect(),
            ))
        }
    }
}

/// A result's `ramp_up_strategy` with its start and end rates, checked as `vllm bench serve` checks
/// them (vllm/benchmarks/serve.py `main_async`).
fn ramp_up(result: &serde_json::Value) -> Result<Option<RampUp>, String> {
    let strategy = match result.get("ramp_up_strategy") {
        None | Some(serde_json::Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let rps = |key: &str| {
        result
            .get(key)
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("a ramp-up result needs a number {key:?}"))
    };
    let (start, end) = (rps("ramp_up_start_rps")?, rps("ramp_up_end_rps")?);
    let ramp = strategy
        .as_str()
        .and_then(|name| RampUp::of(name, start, end))
        .ok_or_else(|| {
            format!("ramp_up_strategy {strategy} is neither \"linear\" nor \"exponential\"")
        })?;
    Arrivals::RampUp {
        ramp,
        burstiness: 1.0,
    }
    .validate()
    .map_err(|e| e.to_string())?;
    Ok(Some(ramp))
}

/// The colocated deployment one plain `vllm serve` command runs (`words` after `serve`), judged by
/// the same rules and memory plan as `check` and `predict` (`launch.rs`). An AFD block is refused:
/// that is a pair, not one server.
pub fn plain_config(
    words: &[String],
    gpu: GpuKind,
    model: &ModelArch,
) -> Result<ServingConfig, String> {
    plain_server(words, gpu, model).map(|server| server.config)
}

/// A plain server as `compare` simulates it: its timing view and what a prediction of it leaves
/// out (`Launch::caveats`: the check's warnings, the flags the model does not read).
#[derive(Clone, Debug, PartialEq)]
pub struct PlainServer {
    pub config: ServingConfig,
    pub caveats: Vec<String>,
    /// Whether it schedules one step ahead (`RoleConfig::async_scheduling`).
    pub async_scheduling: bool,
    /// Whether it fills its weights at random (`RoleConfig::dummy_weights`).
    pub dummy_weights: bool,
}

/// As [`plain_config`], with the caveats.
pub fn plain_server(
    words: &[String],
    gpu: GpuKind,
    model: &ModelArch,
) -> Result<PlainServer, String> {
    let role =
        RoleConfig::from_serve_args(words).map_err(|e| format!("the vllm serve words: {e}"))?;
    if role.afd().is_some() {
        return Err(
            "the vllm serve words carry an afd block: compare a pair with both roles' words".into(),
        );
    }
    let line = std::iter::once("vllm serve".to_owned())
        .chain(
            words
                .iter()
                .map(|w| format!("'{}'", w.replace('\'', "'\\''"))),
        )
        .collect::<Vec<_>>()
        .join(" ");
    plain_server_from_line(&line, gpu, model)
}

/// As [`plain_server`], from one command line (`vllm serve MODEL --flag ...`, shell quoting).
fn plain_server_from_line(
    line: &str,
    gpu: GpuKind,
    model: &ModelArch,
) -> Result<PlainServer, String> {
    let launched = serving_config_from_command_lines(&[line], RuleSet::Latest, gpu, model)
        .map_err(|e| e.to_string())?;
    if !matches!(launched.launch, crate::launch::Launch::Plain(_)) {
        return Err("the command line is one role of an AFD pair, not a plain vLLM server".into());
    }
    Ok(PlainServer {
        caveats: launched.launch.caveats(&launched.report),
        async_scheduling: launched.launch.async_scheduling(),
        dummy_weights: launched.launch.dummy_weights(),
        config: launched.config,
    })
}

/// Prompt tokens each request of the run found in vLLM's prefix cache, when the engine's per-step
/// log says how many prompt tokens it computed (`computed_prompt_tokens`, the sum of the log's
/// context tokens). `vllm bench serve`'s random dataset gives request `i` the same leading tokens
/// for the same seed, whatever the lengths and counts, so a run after others of its seed on the
/// same server (`earlier`: their `(num_prompts, input_len)`) finds request `i`'s first
/// `min(L, L_earlier)` tokens cached, in whole blocks, where an earlier run had a request `i`; a
/// prompt cached whole recomputes its last block (`floor((L - 1) / block) * block` cached). That
/// layout is taken where its total is the log's uncomputed tokens (it was on every committed run
/// that shared a seed); otherwise, or with no earlier run of the seed, the uncomputed tokens go in
/// request order to full hits. Nothing is cached when prefix caching is off or the log shows every
/// token computed.
pub fn cached_prefixes(
    config: &ServingConfig,
    setting: &BenchSetting,
    computed_prompt_tokens: u64,
    earlier: &[(u32, u32)],
) -> Vec<u32> {
    let nominal = u64::from(setting.num_prompts) * u64::from(setting.input_len);
    let block = config.block_size.max(1);
    let length = setting.input_len;
    let full_hit = (length.saturating_sub(1) / block) * block;
    let mut left = nominal.saturating_sub(computed_prompt_tokens);
    if !config.prefix_caching || full_hit == 0 || left == 0 {
        return Vec::new();
    }
    let mut shared: Vec<u32> = (0..setting.num_prompts)
        .map(|i| {
            let common = earlier
                .iter()
                .filter(|&&(n, _)| i < n)
                .map(|&(_, l)| l.min(length))
                .max()
                .unwrap_or(0);
            if common >= length {
                full_hit
            } else {
                (common / block) * block
            }
        })
        .collect();
    while shared.last() == Some(&0) {
        shared.pop();
    }
    if shared.iter().map(|&c| u64::from(c)).sum::<u64>() == left {
        return shared;
    }
    let mut cached = Vec::new();
    while left > 0 && cached.len() < setting.num_prompts as usize {
        let c = left.min(u64::from(full_hit)) as u32;
        cached.push(c);
        left -= u64::from(c);
    }
    cached
}

/// What happens to the run's requests outside the engine's steps.
#[derive(Clone, Copy, Debug, Default)]
pub struct FrontEnd<'a> {
    /// The front end's per-request latency (the engine profile's): added to each request's time
    /// to first token and end-to-end latency; it delays no step.
    pub latency_ns: u64,
    /// What the first step after the engine sat idle costs beyond its period (the engine
    /// profile's, for the server's graph mode).
    pub idle_start_ns: u64,
    /// The front end's serial intake per request (the engine profile's): requests reach the engine
    /// one after another.
    pub intake_ns: u64,
    /// What a text prompt adds to the intake per prompt token (`vllm bench serve` sends text).
    pub text_token_ns: f64,
    /// The front end's serial cost per streamed token (the engine profile's).
    pub stream_token_ns: u64,
    /// What `vllm bench serve`'s client spends opening a connection (the engine profile's).
    pub connect_ns: u64,
    /// Each request's cached prefix ([`cached_prefixes`]; empty when unknown).
    pub cached: &'a [u32],
    /// The engine core schedules one step ahead ([`async_scheduling`]).
    pub async_scheduling: bool,
    /// The fused-MoE kernels' token counts of the steps the server ran before the run
    /// (`model::engine::kernel_history`; empty: a fresh server).
    pub compiled: &'a [u32],
}

impl<'a> FrontEnd<'a> {
    /// The front end an engine profile measured, for a server of graph mode `graph` that schedules
    /// asynchronously or not.
    pub fn of_engine(
        engine: &crate::model::engine::EngineModel,
        graph: &crate::serving::GraphMode,
        cached: &'a [u32],
        async_scheduling: bool,
    ) -> FrontEnd<'a> {
        let profile = engine.profile();
        FrontEnd {
            latency_ns: profile.frontend_ns,
            idle_start_ns: engine.idle_start_ns(graph),
            intake_ns: profile.intake_ns,
            text_token_ns: profile.text_token_ns,
            stream_token_ns: profile.stream_token_ns,
            connect_ns: profile.connect_ns,
            cached,
            async_scheduling,
            compiled: &[],
        }
    }

    /// Sets the run's front-end terms for requests of `prompt_tokens` tokens sent as text (as
    /// `vllm bench serve` sends them; the tokenizer reads the whole prompt whatever is cached).
    pub fn apply(&self, options: &mut RunOptions, prompt_tokens: f64) {
        use crate::time::SimDuration;
        let intake = self.intake_ns + (self.text_token_ns * prompt_tokens).round() as u64;
        options.frontend_intake = SimDuration::from_ns(intake);
        options.frontend_token = SimDuration::from_ns(self.stream_token_ns);
        options.frontend_latency = SimDuration::from_ns(self.latency_ns);
        options.client_connect = SimDuration::from_ns(self.connect_ns);
        options.async_scheduling = self.async_scheduling;
        options.idle_start = SimDuration::from_ns(self.idle_start_ns);
        options.compiled_kernel_tokens = self.compiled.to_vec();
    }
}

/// What the engine profile leaves out for a plain server of more than one GPU: every committed run it
/// was derived from served one H200, so each engine of a server with tensor or data parallelism
/// steps at a one-GPU server's measured periods, with no term for its collectives (the kernel model
/// keeps each GPU's busy time). `None` for one GPU.
pub fn engine_layout_caveat(config: &ServingConfig) -> Option<String> {
    let layout = config.attention;
    (layout.ranks() > 1).then(|| {
        format!(
            "note: the engine profile measured servers of one GPU; each engine of this server's {} ranks (DP {} x TP {}{}) steps at a one-GPU server's measured periods, with no term for their collectives",
            layout.ranks(),
            layout.dp,
            layout.tp,
            if layout.expert_parallel { ", EP" } else { "" }
        )
    })
}

/// A deployment [`price_as_vllm`] prices, as its command lines say.
#[derive(Clone, Copy, Debug)]
pub struct RealServer<'a> {
    pub config: &'a ServingConfig,
    /// An AFD pair (else one plain `vllm serve` server, of one GPU or more).
    pub pair: bool,
    /// It fills its weights at random (`--load-format dummy`).
    pub dummy_weights: bool,
    /// Its (Attention) engine core schedules one step ahead (`--no-async-scheduling` turns it off).
    pub async_scheduling: bool,
    /// How a trained model's tokens pick experts.
    pub popularity: crate::model::workload::ExpertPopularity,
    /// Past its first uses of the fused-MoE kernel's specializations (else freshly started).
    pub warm_kernels: bool,
}

/// How [`price_as_vllm`] priced a deployment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VllmPricing {
    /// A plain server at the engine's measured step periods; `trained_weights` where its replayed
    /// decode steps swap the profile's dummy routing for a trained model's
    /// (`EngineModel::serving`).
    Plain { trained_weights: bool },
    /// An AFD pair: the kernel model's kernels, each role's issue of a step without graphs at
    /// vLLM's host pace (`CostModel::with_vllm_host`).
    Pair,
    /// The profile has no costs for the deployment's graph mode: the kernel model alone.
    Unpriced,
}

/// Prices `server` as real vLLM runs it, with `engine`'s measured terms: the front end, its
/// intake of `workload`'s prompts as text (their mean length), asynchronous scheduling and the
/// first-use compiles on `options`; a plain server's steps at the engine's periods; an AFD pair's
/// host issue at vLLM's pace ([`pair_at_vllm_pace`]), its kernels from the kernel model. A graph
/// mode the profile did not measure is left to the kernel model, `options` untouched. `predict`
/// and `sweep` price through it, the twin and `compare`'s pairs through [`pair_at_vllm_pace`], so
/// one deployment's steps cost the same in each.
pub fn price_as_vllm(
    cost: CostModel,
    server: RealServer<'_>,
    engine: &std::sync::Arc<crate::model::engine::EngineModel>,
    workload: &crate::model::workload::Workload,
    options: &mut RunOptions,
) -> (CostModel, VllmPricing) {
    let graph = &server.config.graph;
    if !engine.prices(graph) {
        return (cost, VllmPricing::Unpriced);
    }
    let prompt_tokens = workload
        .requests
        .iter()
        .map(|r| f64::from(r.input_tokens))
        .sum::<f64>()
        / workload.requests.len().max(1) as f64;
    FrontEnd::of_engine(engine, graph, &[], server.async_scheduling).apply(options, prompt_tokens);
    options.kernels_warm = server.warm_kernels;
    if server.pair {
        let cost = pair_at_vllm_pace(cost, server.config, Some(engine));
        return (cost, VllmPricing::Pair);
    }
    let served = (**engine)
        .clone()
        .serving(server.dummy_weights, &cost, server.popularity);
    let trained_weights = served.prices_trained_weights();
    (
        cost.with_engine(std::sync::Arc::new(served)),
        VllmPricing::Plain { trained_weights },
    )
}

/// Whether `model` is the architecture the built-in engine profiles measured (DeepSeek-V2-Lite, by
/// its config, whatever its name: a served folder's `config.json` names it after the folder; the
/// file's format and context length aside, which the Hugging Face and the shipped config spell
/// differently).
pub fn is_engine_profiled_model(model: &ModelArch) -> bool {
    let measured = ModelArch::deepseek_v2_lite().config;
    let mut config = model.config.clone();
    config.format = measured.format;
    config.max_position_embeddings = measured.max_position_embeddings;
    config == measured
}

/// The built-in engine profile of `gpu` where it measured `model` (DeepSeek-V2-Lite), what
/// `afd-sim predict` and `sweep` price with by default; `None` for any other GPU kind or model.
pub fn builtin_engine(
    model: &ModelArch,
    gpu: GpuKind,
) -> Option<std::sync::Arc<crate::model::engine::EngineModel>> {
    if !is_engine_profiled_model(model) {
        return None;
    }
    let text = afd_traces::vllm_run::builtin_engine_profile(gpu.as_str())?;
    // The shipped profile reads (`tests::the_built_in_engine_prices_deepseek_v2_lite_on_h200`).
    let profile = afd_traces::vllm_run::VllmEngineProfile::from_json(text).ok()?;
    Some(std::sync::Arc::new(crate::model::engine::EngineModel::new(
        profile,
    )))
}

/// An AFD pair's cost model as `afd-sim predict` prices it by default, for a caller that runs the
/// pair's steps without `predict`'s front end (afd-twin's live engine, the conformance suite's
/// prediction of a twin): `cost`, with each role's issue of a step without graphs at real vLLM's
/// host pace where `engine` prices the pair's graph mode (`CostModel::with_vllm_host`).
pub fn pair_at_vllm_pace(
    cost: CostModel,
    config: &ServingConfig,
    engine: Option<&std::sync::Arc<crate::model::engine::EngineModel>>,
) -> CostModel {
    match engine {
        Some(engine) if engine.prices(&config.graph) => {
            cost.with_vllm_host(crate::model::cost::VllmHost {
                engine: engine.clone(),
                attention_mode: config.graph.clone(),
            })
        }
        _ => cost,
    }
}

/// How `compare` draws an arrival-bound run's send times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendTimes {
    /// The gaps `vllm bench serve --seed SEED` drew (numpy's legacy generator, replayed exactly:
    /// `model/workload/vllm_bench.rs`): the simulated client sends when the real one did, and one
    /// simulation is the prediction. At a few requests a second the metrics rare coincidences set
    /// (two prompts in one step, which on vLLM's default server leaves the piecewise graphs) differ
    /// from draw to draw by more than the model's own error, so only the run's own draw judges it.
    Bench { seed: u32 },
    /// `draws` draws of the simulator's own generator (seeds `seed`, `seed + 1`, ...), each metric
    /// the mean over them: what such a run gives on average, for a result whose seed is unknown.
    Simulator { draws: u32 },
}

impl SendTimes {
    /// The simulations `compare` runs of `setting`: one for the bench's draw or a run that sends
    /// every prompt at once, else the asked draws (at least one).
    pub fn simulations(self, setting: &BenchSetting) -> u32 {
        match self {
            SendTimes::Simulator { draws } if setting.arrival_bound() => draws.max(1),
            _ => 1,
        }
    }
}

/// What [`compare`] found: each metric beside the real one, and the requests the simulated server
/// refused (as vLLM answers a request it cannot serve with an error, which the bench counts as
/// failed).
#[derive(Clone, Debug, PartialEq)]
pub struct Compared {
    pub rows: Vec<MetricRow>,
    /// Requests the simulated server refused, the mean over the simulations.
    pub failed: f64,
    /// Why the first refused request was refused, in the first simulation that refused one.
    pub rejection: Option<String>,
}

/// Simulates the bench run on `config` and sets each metric beside the real one. An arrival-bound
/// run is simulated at the send times `send` gives: once at the bench's own, or the mean over
/// several of the simulator's draws; a run that sends every prompt at once has one outcome and is
/// simulated once. `seed` seeds everything else the run draws (routing); `cost` builds each
/// simulation's cost model (they run in parallel).
pub fn compare(
    config: &ServingConfig,
    cost: &(dyn Fn() -> Result<CostModel, String> + Sync),
    setting: &BenchSetting,
    real: &serde_json::Value,
    seed: Seed,
    send: SendTimes,
    front: &FrontEnd,
) -> Result<Compared, String> {
    use rayon::prelude::*;
    let lengths = request_lengths(real, setting)?;
    let gaps = match send {
        SendTimes::Bench { seed } => ArrivalDraw::VllmBench { seed },
        SendTimes::Simulator { .. } => ArrivalDraw::Simulator,
    };
    let outcomes = (0..u64::from(send.simulations(setting)))
        .into_par_iter()
        .map(|k| {
            simulate_bench(
                config,
                cost()?,
                setting,
                lengths.as_deref(),
                gaps,
                Seed(seed.0.wrapping_add(k)),
                front,
            )
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut predicted = [0.0; METRICS.len()];
    for outcome in &outcomes {
        for (sum, value) in predicted.iter_mut().zip(&outcome.metrics) {
            *sum += value / outcomes.len() as f64;
        }
    }
    let rows = METRICS
        .iter()
        .zip(predicted)
        .filter_map(|(&key, predicted)| {
            let real = real.get(key)?.as_f64()?;
            Some(MetricRow {
                key,
                real,
                predicted,
            })
        })
        .collect();
    Ok(Compared {
        rows,
        failed: outcomes.iter().map(|o| o.failed as f64).sum::<f64>() / outcomes.len() as f64,
        rejection: outcomes.iter().find_map(|o| o.rejection.clone()),
    })
}

/// One simulated draw of the bench run.
struct Outcome {
    /// Each metric of [`METRICS`], in order.
    metrics: [f64; METRICS.len()],
    failed: u64,
    rejection: Option<String>,
}

/// One simulated draw of the bench run.
fn simulate_bench(
    config: &ServingConfig,
    cost: CostModel,
    setting: &BenchSetting,
    lengths: Option<&[(u32, u32)]>,
    gaps: ArrivalDraw,
    seed: Seed,
    front: &FrontEnd,
) -> Result<Outcome, String> {
    let dataset = RandomDataset {
        num_prompts: setting.num_prompts,
        input_len: setting.input_len,
        output_len: setting.output_len,
        range_ratio: 0.0,
    };
    let arrivals = match (setting.ramp_up, setting.request_rate) {
        (Some(ramp), _) => Arrivals::RampUp {
            ramp,
            burstiness: setting.burstiness,
        },
        (None, None) => Arrivals::AllAtOnce,
        (None, Some(rate)) => Arrivals::Gamma {
            rate,
            burstiness: setting.burstiness,
        },
    };
    let mut workload =
        random_workload_drawn(dataset, arrivals, gaps, setting.max_concurrency, seed)
            .map_err(|e| e.to_string())?;
    // Lengths draw from their own stream: setting each request's own changes no send time.
    for (request, &(input, output)) in workload.requests.iter_mut().zip(lengths.unwrap_or(&[])) {
        request.input_tokens = input;
        request.output_tokens = output;
    }
    // A cached prefix is never prefilled: the request schedules only its other tokens. A request
    // vLLM refuses for its length keeps its whole prompt, so that the engine refuses it as vLLM does
    // (the cache does not shorten what `--max-model-len` is held against).
    let max_model_len = config
        .max_model_len
        .unwrap_or(cost.model().max_position_embeddings());
    for (request, &c) in workload.requests.iter_mut().zip(front.cached) {
        if request.input_tokens.saturating_add(request.output_tokens) <= max_model_len {
            request.input_tokens = request.input_tokens.saturating_sub(c).max(1);
        }
    }
    let mut options = RunOptions::new(seed);
    front.apply(&mut options, f64::from(setting.input_len));
    let result = run(config, cost, &workload, &options).map_err(|e| e.to_string())?;
    let m = &result.metrics;
    let seconds = result.end.as_secs_f64().max(1e-9);
    let [ttft_mean, ttft_median, _, ttft_p99] = m.ttft.summary_ms();
    let [tpot_mean, tpot_median, _, tpot_p99] = m.tpot.summary_ms();
    let [itl_mean, itl_median, _, itl_p99] = m.itl.summary_ms();
    let [e2el_mean, e2el_median, _, e2el_p99] = m.e2el.summary_ms();
    Ok(Outcome {
        metrics: [
            m.output_tokens as f64 / seconds,
            m.completed as f64 / seconds,
            ttft_mean,
            ttft_median,
            ttft_p99,
            tpot_mean,
            tpot_median,
            tpot_p99,
            itl_mean,
            itl_median,
            itl_p99,
            e2el_mean,
            e2el_median,
            e2el_p99,
        ],
        failed: m.failed,
        rejection: result
            .requests
            .iter()
            .find_map(|r| r.rejection.as_ref().map(ToString::to_string)),
    })
}

#[cfg(test)]
mod tests;
