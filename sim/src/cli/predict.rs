//! `afd-sim predict`: simulate a deployment serving a workload and print a `vllm bench serve`-style
//! summary.
//!
//! Arguments are read in two steps (ripgrep's low and high args): clap fills [`PredictArgs`], then
//! [`Inputs::from_args`] reads files and checks values into the library's types, so every bad
//! flag, model file, trace or profile is reported with its name before anything runs.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use afd_sim::engine::{RunOptions, run_observed};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel};
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::workload::{
    Arrivals, ExpertPopularity, RandomDataset, TraceEntry, Workload, random_workload,
    trace_workload,
};
use afd_sim::report::{ReportContext, build_report, request_rows, step_rows, timeline};
use afd_sim::rng::Seed;
use afd_sim::serving::{DboConfig, GraphMode, ServingConfig};
use afd_sim::time::{SimDuration, SimTime};
use afd_traces::model_config::{BUILTIN_MODEL_NAMES, ModelConfig};
use afd_traces::workload::{TraceFormat, read_trace_file};

use crate::cli::check::{DeploymentArgs, checked, load};
use crate::cli::output::{csv_bytes, emit, write_atomically};
use crate::cli::profiles::{CostSource, cost_model};

const AFTER_HELP: &str = "\
Examples:
  afd-sim predict                                   # the seed recipe's benchmark on H200
  afd-sim predict recipe/2a2f_graph_dbo_dp2tp1.sh   # a recipe script (never executed)
  afd-sim predict --attention-args \"$ATTENTION_CMD\" --ffn-args \"$FFN_CMD\"
  afd-sim predict --json > report.json              # the same, as vllm bench serve JSON fields
  afd-sim predict --request-rate inf --max-concurrency 64 --num-prompts 256
  afd-sim predict --attention-dp 2 --attention-tp 1 --ffn-dp 2 --ffn-tp 1   # 2A2F DP2xTP1
  afd-sim predict --enforce-eager --no-dbo          # the eager recipe variant
  afd-sim predict --trace traces/data/workloads/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv \\
      --num-prompts 2000 --max-concurrency none
  afd-sim predict --timeline out.json --timeline-window 20:20.05   # open out.json in ui.perfetto.dev
  afd-sim predict --calibration h200-profile.json --steps-csv steps.csv --requests-csv requests.csv

The deployment is a recipe script or both roles' command lines (read and checked as `afd-sim check`
does; a deployment that breaks a rule exits 2 with the findings), or else the seed recipe
2a2f_graph_dbo_dp1tp2 (both roles DP1 TP2 with expert parallelism, max-num-seqs 64,
max-num-batched-tokens 64, DBO thresholds 2/12, FULL_DECODE_ONLY with capture size 64). Each
deployment flag then overrides one setting, with vllm serve's flag names.
Costs come from --calibration, else the GPU's built-in profile (h200: the committed afd-probe
calibration of 2 x H200, traces/data/calibration/), else the GPU's datasheet roofline; the roofline
also prices what a profile lacks, and the report says which source priced each operation class.";

/// Simulate a deployment serving a workload (`vllm bench serve` semantics).
#[derive(Args, Debug, Clone)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct PredictArgs {
    #[command(flatten)]
    pub(crate) deployment: DeploymentArgs,
    /// Attention role --data-parallel-size.
    #[arg(long, help_heading = "Deployment")]
    pub(crate) attention_dp: Option<u32>,
    /// Attention role --tensor-parallel-size.
    #[arg(long, help_heading = "Deployment")]
    pub(crate) attention_tp: Option<u32>,
    /// FFN role --data-parallel-size.
    #[arg(long, help_heading = "Deployment")]
    pub(crate) ffn_dp: Option<u32>,
    /// FFN role --tensor-parallel-size.
    #[arg(long, help_heading = "Deployment")]
    pub(crate) ffn_tp: Option<u32>,
    /// Run the FFN role without --enable-expert-parallel (experts TP-sharded on every rank).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) no_expert_parallel: bool,
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_num_seqs: Option<u32>,
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_num_batched_tokens: Option<u32>,
    /// Disable dual-batch overlap (--enable-dbo is on in the seed recipe).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) no_dbo: bool,
    #[arg(long, help_heading = "Deployment")]
    pub(crate) dbo_decode_token_threshold: Option<u32>,
    #[arg(long, help_heading = "Deployment")]
    pub(crate) dbo_prefill_token_threshold: Option<u32>,
    /// Run every step eagerly (no CUDA graphs).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) enforce_eager: bool,
    /// FULL_DECODE_ONLY capture sizes, comma-separated (e.g. 8,16,32,64).
    #[arg(long, value_delimiter = ',', help_heading = "Deployment")]
    pub(crate) cudagraph_capture_sizes: Option<Vec<u32>>,
    #[arg(long, help_heading = "Deployment")]
    pub(crate) gpu_memory_utilization: Option<f64>,
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_model_len: Option<u32>,
    /// KV-cache block size in tokens (vLLM forces 64 for FlashMLA).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) block_size: Option<u32>,

    /// A Hugging Face config.json (or DeepSeek inference config), or a shipped model name.
    #[arg(
        long,
        default_value = "deepseek-v2-lite",
        help_heading = "Model and hardware"
    )]
    pub(crate) model: String,
    /// GPU kind: h200 (priced by its built-in measured profile), h100, h800, h20, a100, l4, l20
    /// (datasheet roofline).
    #[arg(long, default_value = "h200", help_heading = "Model and hardware")]
    pub(crate) gpu: String,
    /// Calibration profile written by `afd-probe` (repeatable: merged in order, the first wins a
    /// table both have; default: the GPU's built-in profiles).
    #[arg(
        long,
        value_name = "PROFILE.json",
        num_args = 1,
        conflicts_with = "roofline",
        help_heading = "Model and hardware"
    )]
    pub(crate) calibration: Option<Vec<PathBuf>>,
    /// Price everything from the GPU's datasheet roofline, ignoring any built-in profile.
    #[arg(long, help_heading = "Model and hardware")]
    pub(crate) roofline: bool,
    /// Expert popularity: `uniform` or `power-law:EXPONENT` (e.g. power-law:1.2).
    #[arg(long, default_value = "uniform", help_heading = "Model and hardware")]
    pub(crate) routing: String,

    /// Number of requests (with --trace: the first N of the trace).
    #[arg(long, help_heading = "Workload")]
    pub(crate) num_prompts: Option<u32>,
    /// Prompt tokens per request (random dataset).
    #[arg(
        long,
        alias = "random-input-len",
        default_value_t = 1024,
        help_heading = "Workload"
    )]
    pub(crate) input_len: u32,
    /// Output tokens per request (random dataset, ignore_eos).
    #[arg(
        long,
        alias = "random-output-len",
        default_value_t = 128,
        help_heading = "Workload"
    )]
    pub(crate) output_len: u32,
    #[arg(long, default_value_t = 0.0, help_heading = "Workload")]
    pub(crate) random_range_ratio: f64,
    /// Requests per second, or `inf` to send everything at once.
    #[arg(long, default_value = "5", help_heading = "Workload")]
    pub(crate) request_rate: String,
    /// Gamma shape of inter-arrivals (1 = Poisson).
    #[arg(long, default_value_t = 1.0, help_heading = "Workload")]
    pub(crate) burstiness: f64,
    /// Requests in flight at most, or `none`.
    #[arg(long, default_value = "32", help_heading = "Workload")]
    pub(crate) max_concurrency: String,
    /// Replay a workload trace (Azure CSV, Mooncake JSONL, or a token-count CSV).
    #[arg(long, help_heading = "Workload")]
    pub(crate) trace: Option<PathBuf>,
    /// Trace format when it cannot be detected: azure, mooncake or lengths.
    #[arg(long, help_heading = "Workload")]
    pub(crate) trace_format: Option<String>,

    #[arg(long, default_value_t = 0, help_heading = "Run and output")]
    pub(crate) seed: u64,
    /// Print the report as JSON (vllm bench serve field names at the top level).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) json: bool,
    /// Write a Chrome-trace timeline (open it in ui.perfetto.dev).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) timeline: Option<PathBuf>,
    /// Timeline window in seconds of simulated time, `START:END` (default 0:0.1).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) timeline_window: Option<String>,
    /// Write one CSV row per request.
    #[arg(long, help_heading = "Run and output")]
    pub(crate) requests_csv: Option<PathBuf>,
    /// Write one CSV row per step.
    #[arg(long, help_heading = "Run and output")]
    pub(crate) steps_csv: Option<PathBuf>,
    /// Stop after this many events (reported as outcome event_limit).
    #[arg(long, default_value_t = 100_000_000, help_heading = "Run and output")]
    pub(crate) max_events: u64,
    /// Stop at this much simulated time, seconds (reported as outcome horizon).
    #[arg(long, default_value_t = 86_400.0, help_heading = "Run and output")]
    pub(crate) horizon: f64,
}

/// Everything `predict` needs, read and checked.
struct Inputs {
    config: ServingConfig,
    cost: CostModel,
    workload: Workload,
    options: RunOptions,
    dataset: String,
}

/// Runs `afd-sim predict`.
pub(crate) fn run(args: &PredictArgs) -> anyhow::Result<ExitCode> {
    let inputs = match Inputs::from_args(args)? {
        Ok(inputs) => inputs,
        Err(findings) => {
            // The deployment breaks the plugin's rules: say which, as `afd-sim check` does.
            eprint!("{findings}");
            return Ok(ExitCode::from(2));
        }
    };
    let progress = Progress::new(inputs.workload.requests.len() as u64);
    let result = run_observed(
        &inputs.config,
        inputs.cost,
        &inputs.workload,
        &inputs.options,
        &mut |p| progress.update(p.done),
    )
    .context("the deployment cannot serve this model")?;
    progress.finish();
    let context = ReportContext {
        config: &inputs.config,
        workload: &inputs.workload,
        seed: inputs.options.seed,
        dataset: &inputs.dataset,
    };
    let report = build_report(&result, &context);
    if let Some(path) = &args.requests_csv {
        write_atomically(path, &csv_bytes(&request_rows(&result, &inputs.workload))?)?;
    }
    if let Some(path) = &args.steps_csv {
        write_atomically(path, &csv_bytes(&step_rows(&result.steps))?)?;
    }
    if let (Some(path), Some(sink)) = (&args.timeline, &result.spans) {
        let trace = timeline(sink, result.cluster.layout());
        write_atomically(path, trace.to_json().as_bytes())?;
    }
    if args.json {
        emit(&report.to_json())?;
    } else {
        emit(&report.to_table())?;
    }
    if report.outcome != "completed" {
        eprintln!(
            "warning: the run stopped early ({}); raise --max-events or --horizon",
            report.outcome
        );
    }
    Ok(ExitCode::SUCCESS)
}

impl Inputs {
    /// The inputs, or the `check` findings of a deployment that breaks the plugin's rules.
    fn from_args(args: &PredictArgs) -> anyhow::Result<Result<Inputs, String>> {
        let config = match serving_config(args)? {
            Ok(config) => config,
            Err(findings) => return Ok(Err(findings)),
        };
        config.validate().context("invalid deployment")?;
        let model = read_model(&args.model)?;
        let popularity = parse_routing(&args.routing)?;
        let layout = CostLayout {
            attention_tp: config.attention.tp,
            ffn_dp: config.ffn.dp,
            ffn_tp: config.ffn.tp,
            expert_parallel: config.ffn.expert_parallel,
        };
        let source = match (&args.calibration, args.roofline) {
            (Some(paths), _) => CostSource::Files(paths),
            (None, true) => CostSource::Roofline,
            (None, false) => CostSource::Default,
        };
        let cost = cost_model(&source, &model, config.gpu, layout)?;
        let seed = Seed(args.seed);
        let arrivals = parse_arrivals(&args.request_rate, args.burstiness)?;
        let max_concurrency = parse_concurrency(&args.max_concurrency)?;
        let (workload, dataset) = match &args.trace {
            None => {
                let dataset = RandomDataset {
                    num_prompts: args.num_prompts.unwrap_or(1024),
                    input_len: args.input_len,
                    output_len: args.output_len,
                    range_ratio: args.random_range_ratio,
                };
                (
                    random_workload(dataset, arrivals, max_concurrency, seed)?,
                    "random".to_owned(),
                )
            }
            Some(path) => read_workload(path, args, arrivals, max_concurrency, seed)?,
        };
        let mut options = RunOptions::new(seed);
        options.max_events = args.max_events;
        if !(args.horizon.is_finite() && args.horizon > 0.0) {
            bail!(
                "--horizon must be a positive number of seconds, got {}",
                args.horizon
            );
        }
        options.horizon = SimTime::ZERO + SimDuration::from_secs_f64(args.horizon);
        options.record_steps = args.steps_csv.is_some();
        options.model.popularity = popularity;
        if args.timeline.is_some() {
            options.timeline_window = Some(parse_window(
                args.timeline_window.as_deref().unwrap_or("0:0.1"),
            )?);
        } else if args.timeline_window.is_some() {
            bail!("--timeline-window needs --timeline FILE");
        }
        Ok(Ok(Inputs {
            config,
            cost,
            workload,
            options,
            dataset,
        }))
    }
}

/// The recipe or command lines given (else the seed recipe) with every deployment flag applied;
/// `Err(findings)` when the given deployment breaks the plugin's rules.
fn serving_config(args: &PredictArgs) -> anyhow::Result<Result<ServingConfig, String>> {
    let gpu = GpuKind::parse(&args.gpu).with_context(|| {
        let names: Vec<&str> = GpuKind::ALL.iter().map(|g| g.as_str()).collect();
        format!("--gpu {:?} is not one of {}", args.gpu, names.join(", "))
    })?;
    let mut config = if args.deployment.is_given() {
        let deployment = match checked(load(&args.deployment)?) {
            Ok(deployment) => deployment,
            Err(findings) => return Ok(Err(findings)),
        };
        ServingConfig::from_deployment(&deployment, gpu)
            .context("the deployment cannot be simulated")?
    } else {
        let mut seed = ServingConfig::seed_recipe();
        seed.rules = args.deployment.rules;
        seed
    };
    config.gpu = gpu;
    let set = |target: &mut u32, value: Option<u32>| {
        if let Some(v) = value {
            *target = v;
        }
    };
    set(&mut config.attention.dp, args.attention_dp);
    set(&mut config.attention.tp, args.attention_tp);
    set(&mut config.ffn.dp, args.ffn_dp);
    set(&mut config.ffn.tp, args.ffn_tp);
    set(&mut config.max_num_seqs, args.max_num_seqs);
    set(
        &mut config.max_num_batched_tokens,
        args.max_num_batched_tokens,
    );
    set(&mut config.block_size, args.block_size);
    if args.no_expert_parallel {
        config.attention.expert_parallel = false;
        config.ffn.expert_parallel = false;
    }
    if args.no_dbo {
        if args.dbo_decode_token_threshold.is_some() || args.dbo_prefill_token_threshold.is_some() {
            bail!("--no-dbo conflicts with --dbo-*-token-threshold");
        }
        config.dbo = None;
    } else if let Some(dbo) = &mut config.dbo {
        set(&mut dbo.decode_threshold, args.dbo_decode_token_threshold);
        set(&mut dbo.prefill_threshold, args.dbo_prefill_token_threshold);
    } else {
        config.dbo = Some(DboConfig {
            decode_threshold: args.dbo_decode_token_threshold.unwrap_or(32),
            prefill_threshold: args.dbo_prefill_token_threshold.unwrap_or(512),
        });
    }
    match (args.enforce_eager, &args.cudagraph_capture_sizes) {
        (true, Some(_)) => bail!("--enforce-eager conflicts with --cudagraph-capture-sizes"),
        (true, None) => config.graph = GraphMode::Eager,
        (false, Some(sizes)) => {
            let mut sizes = sizes.clone();
            sizes.sort_unstable();
            sizes.dedup();
            config.graph = GraphMode::FullDecodeOnly {
                capture_sizes: sizes,
            };
        }
        (false, None) => {}
    }
    if let Some(u) = args.gpu_memory_utilization {
        config.gpu_memory_utilization = u;
    }
    config.max_model_len = args.max_model_len.or(config.max_model_len);
    Ok(Ok(config))
}

/// A shipped model name, or a config file.
pub(crate) fn read_model(spec: &str) -> anyhow::Result<ModelArch> {
    if let Some(builtin) = ModelArch::builtin(spec) {
        return builtin.with_context(|| format!("shipped model {spec}"));
    }
    let path = Path::new(spec);
    if !path.exists() {
        bail!(
            "--model {spec:?} is neither a file nor a shipped model ({})",
            BUILTIN_MODEL_NAMES.join(", ")
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading model config {}", path.display()))?;
    let config = ModelConfig::from_json(&text)
        .with_context(|| format!("model config {}", path.display()))?;
    // A Hugging Face model folder holds `config.json`; name the model after the folder then.
    let name = match path.file_stem().and_then(|s| s.to_str()) {
        Some("config") => path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("config"),
        Some(stem) => stem,
        None => spec,
    };
    Ok(ModelArch::from_config(name, config))
}

fn read_workload(
    path: &Path,
    args: &PredictArgs,
    arrivals: Arrivals,
    max_concurrency: Option<u32>,
    seed: Seed,
) -> anyhow::Result<(Workload, String)> {
    let format = match &args.trace_format {
        None => None,
        Some(name) => Some(name.parse::<TraceFormat>().context("--trace-format")?),
    };
    let trace = read_trace_file(path, format).context("--trace")?;
    let limit = args.num_prompts.map_or(usize::MAX, |n| n as usize);
    let entries: Vec<TraceEntry> = trace
        .requests
        .iter()
        .take(limit)
        .map(|r| TraceEntry {
            arrival_us: trace.has_arrivals.then_some(r.arrival_us),
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
        })
        .collect();
    let workload = trace_workload(&entries, arrivals, max_concurrency, seed)
        .with_context(|| format!("trace {}", path.display()))?;
    Ok((workload, trace.name))
}

fn parse_arrivals(rate: &str, burstiness: f64) -> anyhow::Result<Arrivals> {
    let arrivals = if rate.trim().eq_ignore_ascii_case("inf") {
        Arrivals::AllAtOnce
    } else {
        let rate: f64 = rate
            .trim()
            .parse()
            .with_context(|| format!("--request-rate must be a number or inf, got {rate:?}"))?;
        Arrivals::Gamma { rate, burstiness }
    };
    Ok(arrivals.validate()?)
}

fn parse_concurrency(text: &str) -> anyhow::Result<Option<u32>> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let n: u32 = text.trim().parse().with_context(|| {
        format!("--max-concurrency must be a positive integer or none, got {text:?}")
    })?;
    if n == 0 {
        bail!("--max-concurrency must be at least 1 (or none)");
    }
    Ok(Some(n))
}

fn parse_routing(text: &str) -> anyhow::Result<ExpertPopularity> {
    let text = text.trim();
    if text == "uniform" {
        return Ok(ExpertPopularity::Uniform);
    }
    if let Some(exponent) = text.strip_prefix("power-law:") {
        let exponent: f64 = exponent.parse().with_context(|| {
            format!("--routing power-law exponent must be a number, got {exponent:?}")
        })?;
        if !(exponent.is_finite() && exponent >= 0.0) {
            bail!("--routing power-law exponent must be finite and >= 0, got {exponent}");
        }
        return Ok(ExpertPopularity::PowerLaw { exponent });
    }
    bail!("--routing must be uniform or power-law:EXPONENT, got {text:?}")
}

fn parse_window(text: &str) -> anyhow::Result<(SimTime, SimTime)> {
    let parse = |part: &str| -> anyhow::Result<f64> {
        let value: f64 = part.trim().parse().with_context(|| {
            format!("--timeline-window {text:?}: {part:?} is not a number of seconds")
        })?;
        if !(value.is_finite() && value >= 0.0) {
            bail!("--timeline-window {text:?}: times must be finite and >= 0");
        }
        Ok(value)
    };
    let (start, end) = text
        .split_once(':')
        .with_context(|| format!("--timeline-window must be START:END in seconds, got {text:?}"))?;
    let (start, end) = (parse(start)?, parse(end)?);
    if start >= end {
        bail!("--timeline-window {text:?}: START must be before END");
    }
    let at = |s: f64| SimTime::ZERO + SimDuration::from_secs_f64(s);
    Ok((at(start), at(end)))
}

/// A progress bar on stderr that appears only once a run has lasted a second.
struct Progress {
    bar: indicatif::ProgressBar,
    started: std::time::Instant,
}

impl Progress {
    #[expect(
        clippy::disallowed_methods,
        reason = "the CLI's progress bar reads wall time; the simulation never does"
    )]
    fn new(total: u64) -> Progress {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::hidden(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{elapsed_precise} [{bar:40}] {pos}/{len} requests",
            )
            .expect("static template")
            .progress_chars("=> "),
        );
        Progress {
            bar,
            started: std::time::Instant::now(),
        }
    }

    fn update(&self, done: u64) {
        if self.bar.is_hidden() && self.started.elapsed().as_secs_f64() > 1.0 {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        self.bar.set_position(done);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests;
