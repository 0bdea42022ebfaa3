//! The `afd-twin` command line: `afd-twin [serve] MODEL [vllm serve flags] [twin flags]` runs one role of
//! a GPU-free AFD pair; `afd-twin bench …` is a `vllm bench serve`-style load generator; `afd-twin faults`
//! lists the fault switches.
//!
//! The twin's own flags are picked out of the command line wherever they stand, so a recipe works after
//! replacing `uv run vllm serve` with `afd-twin`; every other word goes to the `vllm serve` reader.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Parser, Subcommand};

use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::RuleSet;
use afd_twin::TwinOptions;
use afd_twin::faults::{CATALOG, Fault, FaultSet};
use afd_twin::ffn::FfnHttp;

const SERVE_AFTER_HELP: &str = "\
Every other word is read as `vllm serve` reads it: the model path (positional), --data-parallel-size,
--tensor-parallel-size, --enable-expert-parallel, --additional-config '{\"afd\": {...}}',
--max-num-seqs, --max-num-batched-tokens, --max-model-len, --enable-dbo, --dbo-*-token-threshold,
--max-cudagraph-capture-size, --compilation-config, --enforce-eager, --host, --port,
--served-model-name, --seed, --trust-remote-code. The afd block's role picks the twin's role.

Examples:
  # The seed recipe's pair, with every `uv run vllm serve` replaced by `afd-twin`:
  afd-twin /models/DeepSeek-V2-Lite --data-parallel-size 1 --tensor-parallel-size 2 \\
      --enable-expert-parallel --additional-config '{\"afd\": {\"role\": \"ffn\", \"host\": \"127.0.0.1\",
      \"port\": 6269, \"num_attention_ranks\": 2, \"num_ffn_ranks\": 2}}' --port 18305 &
  afd-twin /models/DeepSeek-V2-Lite --data-parallel-size 1 --tensor-parallel-size 2 \\
      --enable-expert-parallel --additional-config '{\"afd\": {\"role\": \"attention\", \"host\": \"127.0.0.1\",
      \"port\": 6269, \"num_attention_ranks\": 2, \"num_ffn_ranks\": 2}}' --port 18305 --time-scale 0 &
  # Tokens at half the speed afd-sim predicts for this pair on H100:
  afd-twin ... --time-scale 2 --gpu h100
  # Break one invariant on purpose:
  afd-twin ... --fault drop-response=5 --fault health-lies

Exit status: 0 after a clean shutdown, 1 when the peer went away or the rendezvous timed out,
2 for a bad command line, a mismatched pair or a port in use. See docs/twin.md.";

/// The twin's own flags of a serve run.
#[derive(Parser, Debug)]
#[command(
    name = "afd-twin",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("AFD_GIT_COMMIT"), ")"),
    about = "A GPU-free stand-in for one role (Attention or FFN) of a vLLM afd-plugin pair",
    after_help = SERVE_AFTER_HELP,
    args_override_self = true
)]
struct TwinFlags {
    /// Real seconds per simulated second of afd-sim's model of the pair, which times every step (1 = real
    /// time, 0 = as fast as possible).
    #[arg(long, default_value_t = 1.0, value_name = "FACTOR")]
    time_scale: f64,
    /// Switch on a fault (repeatable): NAME or NAME=VALUE; `afd-twin faults` lists them.
    #[arg(long = "fault", value_name = "NAME[=VALUE]", value_parser = parse_fault)]
    faults: Vec<Fault>,
    /// Longest wait for the peer twin on the rendezvous port, in seconds (the plugin's 2 minutes).
    #[arg(long, default_value_t = 120.0, value_name = "SECONDS")]
    rendezvous_timeout: f64,
    /// FFN HTTP port: `refuse` (bound, never listening, as afd-spec §6.4) or `reject` (503 to everything).
    #[arg(long, default_value = "refuse", value_parser = ["refuse", "reject"])]
    ffn_http: String,
    /// Plugin rule set: `latest` (block partition, no derived ports) or `v0.26` (ports port+k+1).
    #[arg(long, default_value = "latest", value_parser = ["latest", "v0.26"])]
    rules: String,
    /// GPU the simulated steps are priced on, as `afd-sim predict --gpu`: its built-in calibration
    /// profile where one ships, else its datasheet roofline: h200, h100, h800, h20, a100, l4, l20,
    /// a100-pcie, h100-pcie.
    #[arg(long, default_value = "h200", value_name = "GPU")]
    gpu: String,
    /// Price the simulated pair from kernels alone, as `afd-sim predict --kernel-model` does: the
    /// steps without graphs take the lean host costs of the project's own pipeline probe instead of
    /// real vLLM's host pace (the default where the GPU's built-in engine profile measured the
    /// model).
    #[arg(long)]
    kernel_model: bool,
}

fn parse_fault(text: &str) -> Result<Fault, String> {
    Fault::parse(text).map_err(|err| err.to_string())
}

/// The other subcommands.
#[derive(Parser, Debug)]
#[command(name = "afd-twin", version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("AFD_GIT_COMMIT"), ")"))]
struct Tools {
    #[command(subcommand)]
    command: Tool,
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// Load an OpenAI-compatible server as `vllm bench serve` does (random dataset, streaming).
    #[command(after_help = BENCH_AFTER_HELP)]
    Bench(Box<BenchArgs>),
    /// List the fault switches: name, parameter, role, the invariant it breaks.
    Faults {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

const BENCH_AFTER_HELP: &str = "\
Latency clocks start at each request's intended start (its scheduled arrival, or the moment it got a
slot under --max-concurrency), so a lagging client charges its delay to the server. Prompts are random
words, one afd-twin token each; against a real vLLM the server's usage counts are reported.

Examples:
  # The seed recipe's benchmark (tools/benchmarks/request_generator.sh):
  afd-twin bench --base-url http://127.0.0.1:18305 --num-prompts 1024 --random-input-len 1024 \\
      --random-output-len 128 --request-rate 5 --max-concurrency 32 --ignore-eos
  # 1,000 concurrent clients, 20,000 short requests, checking /metrics conservation:
  afd-twin bench --base-url http://127.0.0.1:18305 --num-prompts 20000 --max-concurrency 1000 \\
      --random-input-len 8 --random-output-len 4 --ignore-eos --check-metrics --json";

/// Flags of `afd-twin bench`, named as `vllm bench serve` names them.
#[derive(clap::Args, Debug)]
struct BenchArgs {
    /// Server to load, e.g. http://127.0.0.1:18305.
    #[arg(long)]
    base_url: String,
    /// API path; /v1/chat/completions switches to chat requests.
    #[arg(long, default_value = "/v1/completions")]
    endpoint: String,
    /// Model name (default: the first model /v1/models lists).
    #[arg(long)]
    model: Option<String>,
    /// Requests to send.
    #[arg(long, default_value_t = 1000)]
    num_prompts: usize,
    /// Prompt tokens per request (random dataset).
    #[arg(long, default_value_t = 1024)]
    random_input_len: u32,
    /// Output tokens per request (max_tokens).
    #[arg(long, default_value_t = 128)]
    random_output_len: u32,
    /// Draw lengths uniformly from [len*(1-r), len*(1+r)].
    #[arg(long, default_value_t = 0.0)]
    random_range_ratio: f64,
    /// Requests per second (inf: all at once).
    #[arg(long, default_value = "inf")]
    request_rate: f64,
    /// Gamma shape of inter-arrival times (1: Poisson).
    #[arg(long, default_value_t = 1.0)]
    burstiness: f64,
    /// Most requests in flight at once.
    #[arg(long)]
    max_concurrency: Option<usize>,
    /// Ask the server to ignore EOS so outputs have exactly --random-output-len tokens.
    #[arg(long)]
    ignore_eos: bool,
    /// Seed of the prompts, lengths and arrivals.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Metrics to report: comma-separated of ttft, tpot, itl, e2el.
    #[arg(long, default_value = "ttft,tpot,itl")]
    percentile_metrics: String,
    /// Percentiles to report, comma-separated.
    #[arg(long, default_value = "99")]
    metric_percentiles: String,
    /// Extra header on every request, NAME:VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    headers: Vec<String>,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 600.0)]
    timeout: f64,
    /// Scrape /metrics before and after and compare requests and tokens with what the client saw.
    #[arg(long)]
    check_metrics: bool,
    /// Print the result JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the result JSON to this file.
    #[arg(long, value_name = "FILE")]
    save_result: Option<std::path::PathBuf>,
    /// Include per-request arrays (input_lens, output_lens, ttfts, itls, generated_texts, errors).
    #[arg(long)]
    save_detailed: bool,
}

const TWIN_VALUE_FLAGS: &[&str] = &[
    "--time-scale",
    "--fault",
    "--rendezvous-timeout",
    "--ffn-http",
    "--rules",
    "--gpu",
];

/// The twin's own switches (flags without a value), kept out of the `vllm serve` words.
const TWIN_SWITCHES: &[&str] = &["--kernel-model"];

/// Splits argv (without the program name) into the twin's flags and the `vllm serve` words.
fn split_args(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut twin = Vec::new();
    let mut serve = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let name = word.split_once('=').map_or(word.as_str(), |(n, _)| n);
        if matches!(word.as_str(), "-h" | "--help" | "-V" | "--version")
            || TWIN_SWITCHES.contains(&word.as_str())
        {
            twin.push(word.clone());
        } else if TWIN_VALUE_FLAGS.contains(&name) {
            twin.push(word.clone());
            if !word.contains('=')
                && let Some(value) = args.get(i + 1)
            {
                twin.push(value.clone());
                i += 1;
            }
        } else {
            serve.push(word.clone());
        }
        i += 1;
    }
    (twin, serve)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("faults" | "bench") => match Tools::parse().command {
            Tool::Faults { json } => {
                print_faults(json);
                ExitCode::SUCCESS
            }
            Tool::Bench(args) => match bench(*args) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(err) => {
                    eprintln!("afd-twin bench: error: {err:#}");
                    ExitCode::from(2)
                }
            },
        },
        Some("serve") => serve(&args[1..]),
        _ => serve(&args),
    }
}

/// Runs `afd-twin bench`; `Ok(false)` when requests failed or `/metrics` was not conserved.
fn bench(args: BenchArgs) -> anyhow::Result<bool> {
    use afd_conformance::bench::{self, Api, BenchConfig, stats};
    let percentiles = args
        .metric_percentiles
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=100.0).contains(p))
                .with_context(|| format!("--metric-percentiles: '{p}' is not a number in 0..=100"))
        })
        .collect::<anyhow::Result<Vec<f64>>>()?;
    let metrics = args
        .percentile_metrics
        .split(',')
        .map(|m| {
            stats::Metric::parse(m).with_context(|| {
                format!("--percentile-metrics: '{m}' is not one of ttft, tpot, itl, e2el")
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let headers = args
        .headers
        .iter()
        .map(|h| {
            h.split_once(':')
                .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
                .with_context(|| format!("--header '{h}': expected NAME:VALUE"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let timeout = seconds("--timeout", args.timeout)?;
    if args.request_rate.is_nan() || args.request_rate <= 0.0 {
        bail!(
            "--request-rate {}: expected a positive number of requests per second, or inf",
            shown(args.request_rate)
        );
    }
    if !(args.burstiness.is_finite() && args.burstiness > 0.0) {
        bail!(
            "--burstiness {}: expected a positive finite gamma shape (1: Poisson)",
            shown(args.burstiness)
        );
    }
    if !(0.0..1.0).contains(&args.random_range_ratio) {
        bail!(
            "--random-range-ratio {}: expected a number from 0 up to (not including) 1",
            shown(args.random_range_ratio)
        );
    }
    if !args.base_url.starts_with("http://") && !args.base_url.starts_with("https://") {
        bail!(
            "--base-url must start with http:// or https://, got '{}'",
            args.base_url
        );
    }
    let mut config = BenchConfig::new(&args.base_url);
    config.api = if args.endpoint.contains("chat") {
        Api::Chat
    } else {
        Api::Completions
    };
    config.endpoint = args.endpoint;
    config.model = args.model;
    config.num_prompts = args.num_prompts;
    config.random_input_len = args.random_input_len;
    config.random_output_len = args.random_output_len;
    config.random_range_ratio = args.random_range_ratio;
    config.request_rate = args.request_rate;
    config.burstiness = args.burstiness;
    config.max_concurrency = args.max_concurrency;
    config.ignore_eos = args.ignore_eos;
    config.seed = args.seed;
    config.request_timeout = timeout;
    config.headers = headers;
    let progress = indicatif::ProgressBar::new(args.num_prompts as u64);
    progress.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} requests ({per_sec})",
        )
        .expect("static template")
        .progress_chars("=> "),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let tick = progress.clone();
    let result = runtime.block_on(bench::run(config, args.check_metrics, move || tick.inc(1)))?;
    progress.finish_and_clear();
    let summary = stats::summary(&result, &percentiles, args.save_detailed);
    if let Some(path) = &args.save_result {
        let text = serde_json::to_string_pretty(&summary).context("encoding the result")?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    }
    if args.json {
        println!("{summary}");
    } else {
        print!("{}", stats::table(&summary, &metrics, &percentiles));
    }
    let failed = summary["failed"].as_u64().unwrap_or(0);
    let conserved = summary
        .get("conservation")
        .is_none_or(|c| c["conserved"].as_bool() == Some(true));
    Ok(failed == 0 && conserved)
}

fn print_faults(json: bool) {
    if json {
        let list: Vec<serde_json::Value> = CATALOG
            .iter()
            .map(|f| {
                serde_json::json!({
                    "name": f.name,
                    "parameter": f.parameter.map(|(name, default)| serde_json::json!({"name": name, "default": default})),
                    "role": f.role.as_str(),
                    "breaks": f.breaks,
                    "observable": f.observable,
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(list));
        return;
    }
    for f in CATALOG {
        let name = match f.parameter {
            Some((p, default)) => format!("{}[={}] (default {default})", f.name, p.to_uppercase()),
            None => f.name.to_owned(),
        };
        println!(
            "{name}\n  role: {}\n  breaks: {}\n  observable: {}\n",
            f.role, f.breaks, f.observable
        );
    }
}

fn serve(args: &[String]) -> ExitCode {
    let (twin_words, serve_words) = split_args(args);
    let flags =
        match TwinFlags::try_parse_from(std::iter::once("afd-twin".to_owned()).chain(twin_words)) {
            Ok(flags) => flags,
            Err(err) => {
                let code = if err.use_stderr() { 2 } else { 0 };
                let _ = err.print();
                return ExitCode::from(code);
            }
        };
    let options = match options(flags, serve_words) {
        Ok(options) => options,
        Err(err) => {
            eprintln!("afd-twin: error: {err:#}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stdout)
        .with_target(false)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("afd-twin: error: cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(afd_twin::run(options, stop_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            eprintln!("afd-twin: error: {err}");
            ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(1))
        }
    }
}

fn options(flags: TwinFlags, serve_args: Vec<String>) -> anyhow::Result<TwinOptions> {
    if !(0.0..=MAX_TIME_SCALE).contains(&flags.time_scale) {
        bail!(
            "--time-scale {}: expected a number from 0 to {MAX_TIME_SCALE} (real seconds per simulated second)",
            shown(flags.time_scale)
        );
    }
    let rendezvous_timeout = seconds("--rendezvous-timeout", flags.rendezvous_timeout)?;
    let rules = RuleSet::parse(&flags.rules).context("--rules")?;
    let gpu = GpuKind::parse(&flags.gpu).with_context(|| {
        let names: Vec<&str> = GpuKind::ALL.iter().map(|g| g.as_str()).collect();
        format!("--gpu {:?} is not one of {}", flags.gpu, names.join(", "))
    })?;
    let ffn_http = FfnHttp::parse(&flags.ffn_http).context("--ffn-http")?;
    if serve_args.is_empty() {
        bail!(
            "missing the vllm serve command line (at least the model path and --additional-config); see --help"
        );
    }
    Ok(TwinOptions {
        serve_args,
        env: afd_twin::launch::relevant_env(std::env::vars()),
        rules,
        time_scale: flags.time_scale,
        gpu,
        faults: FaultSet::new(flags.faults),
        rendezvous_timeout,
        ffn_http,
        kernel_model: flags.kernel_model,
    })
}

/// The largest `--time-scale`: 1000 real seconds per simulated second (beyond that a step's sleep
/// outlasts any run, and the twin would sit in it instead of stopping).
const MAX_TIME_SCALE: f64 = 1000.0;

/// The longest duration a seconds flag takes: a week.
const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// A positive number of seconds up to [`MAX_SECONDS`], as a `Duration` (never a panic).
fn seconds(flag: &str, value: f64) -> anyhow::Result<Duration> {
    if value.is_nan() || value <= 0.0 || value > MAX_SECONDS {
        bail!(
            "{flag} {}: expected a positive number of seconds up to {MAX_SECONDS} (a week)",
            shown(value)
        );
    }
    Ok(Duration::from_secs_f64(value))
}

/// A number as the user would have typed it: `1e30` rather than thirty-one digits.
fn shown(value: f64) -> String {
    if value.is_finite() && value != 0.0 && !(1e-4..1e16).contains(&value.abs()) {
        format!("{value:e}")
    } else {
        value.to_string()
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => futures::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = futures::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::{Tools, TwinFlags};

    /// Flags of `command` and its subcommands without help text.
    fn without_help(command: &clap::Command) -> Vec<String> {
        let mut missing: Vec<String> = command
            .get_arguments()
            .filter(|arg| !matches!(arg.get_id().as_str(), "help" | "version"))
            .filter(|arg| arg.get_help().is_none() && arg.get_long_help().is_none())
            .map(|arg| format!("{} --{}", command.get_name(), arg.get_id()))
            .collect();
        for sub in command.get_subcommands() {
            missing.extend(without_help(sub));
        }
        missing
    }

    #[test]
    fn every_flag_has_help_text() {
        let mut missing = without_help(&TwinFlags::command());
        missing.extend(without_help(&Tools::command()));
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    #[test]
    fn the_kernel_model_switch_is_the_twins_and_never_a_serve_word() {
        let words = |list: &[&str]| list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let (twin, serve) = super::split_args(&words(&[
            "/models/DeepSeek-V2-Lite",
            "--kernel-model",
            "--gpu",
            "h100",
            "--enforce-eager",
        ]));
        assert_eq!(twin, words(&["--kernel-model", "--gpu", "h100"]));
        assert_eq!(
            serve,
            words(&["/models/DeepSeek-V2-Lite", "--enforce-eager"])
        );
        let mut argv = vec!["afd-twin".to_owned()];
        argv.extend(twin);
        let flags = <TwinFlags as clap::Parser>::try_parse_from(argv).expect("the twin's flags");
        let options = super::options(flags, serve).expect("options");
        assert!(options.kernel_model);
    }

    #[test]
    fn absurd_durations_and_scales_are_errors_not_panics() {
        for (flag, value) in [
            ("--rendezvous-timeout", 1e30),
            ("--rendezvous-timeout", f64::NAN),
            ("--rendezvous-timeout", -1.0),
            ("--timeout", f64::INFINITY),
        ] {
            let err = super::seconds(flag, value).expect_err("refused");
            assert!(err.to_string().starts_with(flag), "{err}");
        }
        assert_eq!(
            super::seconds("--timeout", 2.5).expect("fine"),
            std::time::Duration::from_millis(2500)
        );
    }
}
