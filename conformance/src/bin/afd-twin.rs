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

use afd_conformance::twin::faults::{CATALOG, Fault, FaultSet};
use afd_conformance::twin::ffn::FfnHttp;
use afd_conformance::twin::{self, TwinOptions};
use afd_sim::topology::RuleSet;

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
  # Break one invariant on purpose:
  afd-twin ... --fault drop-response=5 --fault health-lies

Exit status: 0 after a clean shutdown, 1 when the peer went away or the rendezvous timed out,
2 for a bad command line, a mismatched pair or a port in use. See docs/twin.md.";

/// The twin's own flags of a serve run.
#[derive(Parser, Debug)]
#[command(
    name = "afd-twin",
    version,
    about = "A GPU-free stand-in for one role (Attention or FFN) of a vLLM afd-plugin pair",
    after_help = SERVE_AFTER_HELP
)]
struct TwinFlags {
    /// Real seconds per simulated second for token timing (1 = real time, 0 = as fast as possible).
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
}

fn parse_fault(text: &str) -> Result<Fault, String> {
    Fault::parse(text).map_err(|err| err.to_string())
}

/// The other subcommands.
#[derive(Parser, Debug)]
#[command(name = "afd-twin", version)]
struct Tools {
    #[command(subcommand)]
    command: Tool,
}

#[derive(Subcommand, Debug)]
enum Tool {
    /// List the fault switches: name, parameter, role, the invariant it breaks.
    Faults {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

const TWIN_VALUE_FLAGS: &[&str] = &[
    "--time-scale",
    "--fault",
    "--rendezvous-timeout",
    "--ffn-http",
    "--rules",
];

/// Splits argv (without the program name) into the twin's flags and the `vllm serve` words.
fn split_args(args: &[String]) -> (Vec<String>, Vec<String>) {
    let mut twin = Vec::new();
    let mut serve = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let word = &args[i];
        let name = word.split_once('=').map_or(word.as_str(), |(n, _)| n);
        if matches!(word.as_str(), "-h" | "--help" | "-V" | "--version") {
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
        Some("faults") => {
            let tools = Tools::parse();
            let Tool::Faults { json } = tools.command;
            print_faults(json);
            ExitCode::SUCCESS
        }
        Some("serve") => serve(&args[1..]),
        _ => serve(&args),
    }
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
    match runtime.block_on(twin::run(options, stop_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err}");
            eprintln!("afd-twin: error: {err}");
            ExitCode::from(u8::try_from(err.exit_code()).unwrap_or(1))
        }
    }
}

fn options(flags: TwinFlags, serve_args: Vec<String>) -> anyhow::Result<TwinOptions> {
    if !flags.time_scale.is_finite() || flags.time_scale < 0.0 {
        bail!(
            "--time-scale must be a finite number >= 0, got {}",
            flags.time_scale
        );
    }
    if !flags.rendezvous_timeout.is_finite() || flags.rendezvous_timeout <= 0.0 {
        bail!(
            "--rendezvous-timeout must be a positive number of seconds, got {}",
            flags.rendezvous_timeout
        );
    }
    let rules = RuleSet::parse(&flags.rules).context("--rules")?;
    let ffn_http = FfnHttp::parse(&flags.ffn_http).context("--ffn-http")?;
    if serve_args.is_empty() {
        bail!(
            "missing the vllm serve command line (at least the model path and --additional-config); see --help"
        );
    }
    Ok(TwinOptions {
        serve_args,
        rules,
        time_scale: flags.time_scale,
        faults: FaultSet::new(flags.faults),
        rendezvous_timeout: Duration::from_secs_f64(flags.rendezvous_timeout),
        ffn_http,
    })
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
