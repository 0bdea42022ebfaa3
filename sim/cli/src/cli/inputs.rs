//! Inputs `predict` and `sweep` share: the model and hardware flags, the workload flags, and the
//! readers that turn them into the library's types (naming the flag or file at fault), plus the
//! progress bar.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;

use afd_sim::model::arch::ModelArch;
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::workload::{
    ArrivalDraw, Arrivals, ExpertPopularity, RampUp, RandomDataset, TraceEntry, Workload,
    random_workload_drawn, trace_workload,
};
use afd_sim::rng::Seed;
use afd_traces::model_config::{BUILTIN_MODEL_NAMES, ModelConfig};
use afd_traces::workload::{TraceFormat, read_trace_file_within};

use crate::cli::profiles::CostSource;

/// Model, GPU, calibration and expert routing.
#[derive(Args, Debug, Clone)]
pub(crate) struct HardwareArgs {
    /// A Hugging Face config.json (or DeepSeek inference config), or a shipped model name.
    #[arg(
        long,
        default_value = "deepseek-v2-lite",
        help_heading = "Model and hardware"
    )]
    pub(crate) model: String,
    /// GPU kind: h200 (priced by its built-in measured profile), h100, h800, h20, a100, l4, l20, a100-pcie, h100-pcie, rtx-pro-6000
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
}

/// The `vllm bench serve` client: random dataset or a trace, arrivals, concurrency.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Workload")]
pub(crate) struct WorkloadArgs {
    /// Number of requests (with --trace: the first N of the trace).
    #[arg(long)]
    pub(crate) num_prompts: Option<u32>,
    /// Prompt tokens per request (random dataset).
    #[arg(long, alias = "random-input-len", default_value_t = 1024)]
    pub(crate) input_len: u32,
    /// Output tokens per request (random dataset, ignore_eos).
    #[arg(long, alias = "random-output-len", default_value_t = 128)]
    pub(crate) output_len: u32,
    /// Lengths are drawn uniformly from len·(1−r) to len·(1+r) (random dataset; 0 ≤ r < 1).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) random_range_ratio: f64,
    /// Requests per second, or `inf` to send everything at once [default: 5]. Priced as real vLLM
    /// runs it, a burst reaches the server as `vllm bench serve` sends it: the first request at
    /// once, the rest once its client has opened a connection for each (the engine profile's
    /// `connect_ns` a connection), and that wait is in their TTFT.
    #[arg(long)]
    pub(crate) request_rate: Option<String>,
    /// Gamma shape of inter-arrivals (1 = Poisson).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) burstiness: f64,
    /// Requests in flight at most, or `none` [default: 32].
    #[arg(long)]
    pub(crate) max_concurrency: Option<String>,
    /// Ramp the request rate over the run, as `vllm bench serve --ramp-up-strategy` does: request i
    /// of N is sent at the rate --ramp-up-start-rps + (end − start)·i/(N−1) (linear) or
    /// start·(end/start)^(i/(N−1)) (exponential). Takes the place of --request-rate.
    #[arg(
        long,
        value_name = "linear|exponential",
        value_parser = clap::builder::PossibleValuesParser::new(RampUp::STRATEGIES),
        requires_all = ["ramp_up_start_rps", "ramp_up_end_rps"]
    )]
    pub(crate) ramp_up_strategy: Option<String>,
    /// The ramp's first request's rate, requests/s.
    #[arg(long, value_name = "RPS", requires = "ramp_up_strategy")]
    pub(crate) ramp_up_start_rps: Option<f64>,
    /// The ramp's last request's rate, requests/s.
    #[arg(long, value_name = "RPS", requires = "ramp_up_strategy")]
    pub(crate) ramp_up_end_rps: Option<f64>,
    /// Draw the request gaps exactly as `vllm bench serve --seed SEED` does (numpy's legacy
    /// generator), so the simulated client sends when that bench run's client did; without it the
    /// gaps are the simulator's own draw of --seed.
    #[arg(long, value_name = "SEED", conflicts_with = "trace")]
    pub(crate) bench_seed: Option<u32>,
    /// Replay a workload trace (Azure CSV, Mooncake JSONL, or a token-count CSV).
    #[arg(long)]
    pub(crate) trace: Option<PathBuf>,
    /// Trace format when it cannot be detected: azure, mooncake or lengths.
    #[arg(long)]
    pub(crate) trace_format: Option<String>,
    /// Largest --trace file read, in MiB (a larger or endless file is an error).
    #[arg(long, default_value_t = afd_traces::input::InputKind::TRACE.limit_bytes >> 20)]
    pub(crate) max_trace_mib: u64,
}

impl HardwareArgs {
    /// `--gpu` as a datasheet kind.
    pub(crate) fn gpu(&self) -> anyhow::Result<GpuKind> {
        parse_gpu(&self.gpu)
    }

    /// Where the costs come from: `--calibration` files, `--roofline`, or the GPU's built-in
    /// profiles.
    pub(crate) fn cost_source(&self) -> CostSource<'_> {
        match (&self.calibration, self.roofline) {
            (Some(paths), _) => CostSource::Files(paths),
            (None, true) => CostSource::Roofline,
            (None, false) => CostSource::Default,
        }
    }
}

impl WorkloadArgs {
    /// `--request-rate` as given, or its default.
    pub(crate) fn request_rate(&self) -> &str {
        self.request_rate.as_deref().unwrap_or("5")
    }

    /// `--max-concurrency` as given, or its default.
    pub(crate) fn max_concurrency(&self) -> &str {
        self.max_concurrency.as_deref().unwrap_or("32")
    }

    /// `--ramp-up-strategy` with its start and end rates, when given.
    pub(crate) fn ramp_up(&self) -> Option<RampUp> {
        RampUp::of(
            self.ramp_up_strategy.as_deref()?,
            self.ramp_up_start_rps?,
            self.ramp_up_end_rps?,
        )
    }

    /// The workload and the dataset name the report gives it.
    pub(crate) fn workload(&self, seed: Seed) -> anyhow::Result<(Workload, String)> {
        let arrivals = match self.ramp_up() {
            Some(ramp) => {
                if self
                    .request_rate
                    .as_deref()
                    .is_some_and(|r| !r.trim().eq_ignore_ascii_case("inf"))
                {
                    bail!(
                        "--request-rate with --ramp-up-strategy: the ramp sets the rate (vllm bench serve refuses both)"
                    );
                }
                Arrivals::RampUp {
                    ramp,
                    burstiness: self.burstiness,
                }
                .validate()?
            }
            None => parse_arrivals(self.request_rate(), self.burstiness)?,
        };
        let max_concurrency = parse_concurrency(self.max_concurrency())?;
        match &self.trace {
            None => {
                let dataset = RandomDataset {
                    num_prompts: self.num_prompts.unwrap_or(1024),
                    input_len: self.input_len,
                    output_len: self.output_len,
                    range_ratio: self.random_range_ratio,
                };
                let gaps = match self.bench_seed {
                    Some(seed) => ArrivalDraw::VllmBench { seed },
                    None => ArrivalDraw::Simulator,
                };
                Ok((
                    random_workload_drawn(dataset, arrivals, gaps, max_concurrency, seed)?,
                    "random".to_owned(),
                ))
            }
            Some(path) => read_workload(path, self, arrivals, max_concurrency, seed),
        }
    }
}

/// A shipped model name, or a config file.
/// `--gpu` as a datasheet kind.
pub(crate) fn parse_gpu(text: &str) -> anyhow::Result<GpuKind> {
    GpuKind::parse(text).with_context(|| {
        let names: Vec<&str> = GpuKind::ALL.iter().map(|g| g.as_str()).collect();
        format!("--gpu {text:?} is not one of {}", names.join(", "))
    })
}

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
    let text = afd_traces::input::read_text(path, afd_traces::input::InputKind::MODEL_CONFIG)?;
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
    args: &WorkloadArgs,
    arrivals: Arrivals,
    max_concurrency: Option<u32>,
    seed: Seed,
) -> anyhow::Result<(Workload, String)> {
    let format = match &args.trace_format {
        None => None,
        Some(name) => Some(name.parse::<TraceFormat>().context("--trace-format")?),
    };
    let trace = read_trace_file_within(path, format, args.max_trace_mib.saturating_mul(1 << 20))
        .context("--trace")?;
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

pub(crate) fn parse_arrivals(rate: &str, burstiness: f64) -> anyhow::Result<Arrivals> {
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

pub(crate) fn parse_concurrency(text: &str) -> anyhow::Result<Option<u32>> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let n: u32 = text.trim().parse().with_context(|| {
        format!("--max-concurrency must be a positive integer or none, got {text:?}")
    })?;
    if n == 0 {
        bail!("--max-concurrency {text}: must be at least 1 (or none)");
    }
    Ok(Some(n))
}

pub(crate) fn parse_routing(text: &str) -> anyhow::Result<ExpertPopularity> {
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

/// A progress bar on stderr that appears only once a run has lasted a second.
pub(crate) struct Progress {
    bar: indicatif::ProgressBar,
    started: std::time::Instant,
}

impl Progress {
    #[expect(
        clippy::disallowed_methods,
        reason = "the CLI's progress bar reads wall time; the simulation never does"
    )]
    pub(crate) fn new(total: u64, unit: &str) -> Progress {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(total),
            indicatif::ProgressDrawTarget::hidden(),
        );
        bar.set_style(
            indicatif::ProgressStyle::with_template(&format!(
                "{{elapsed_precise}} [{{bar:40}}] {{pos}}/{{len}} {unit}"
            ))
            .expect("static template")
            .progress_chars("=> "),
        );
        Progress {
            bar,
            started: std::time::Instant::now(),
        }
    }

    pub(crate) fn update(&self, done: u64) {
        if self.bar.is_hidden() && self.started.elapsed().as_secs_f64() > 1.0 {
            self.bar
                .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        self.bar.set_position(done);
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Reads `--link attention-ffn=KIND[,key=value...]`.
pub(crate) fn parse_link_flag(text: &str) -> anyhow::Result<afd_sim::model::link::LinkSpec> {
    let Some((path, link)) = text.split_once('=') else {
        bail!("--link expects attention-ffn=KIND[,key=value...], got '{text}'");
    };
    if path.trim() != "attention-ffn" {
        bail!(
            "--link names the path '{}'; the one path it can set is attention-ffn",
            path.trim()
        );
    }
    afd_sim::model::link::LinkSpec::parse(link).with_context(|| format!("--link {text}"))
}

#[cfg(test)]
mod tests;
