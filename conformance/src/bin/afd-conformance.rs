//! `afd-conformance`: the nightly suite for a live Attention+FFN pair.
//!
//! `list` prints the invariant catalog, `run` checks a pair and reports like a test runner (human summary
//! on stdout, `--json` and `--junit` files; exit 0 all pass, 1 a failure, 2 could not run), `up` starts a
//! twin pair from a recipe for rehearsal. All logic lives in the library; this file parses flags, prints
//! and writes files.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser, Subcommand};

use afd_conformance::catalog::{self, Kind};
use afd_conformance::checks::Settings;
use afd_conformance::report::{self, Report};
use afd_conformance::run::{RunOptions, run};
use afd_conformance::target::{DeploymentInput, TargetOptions};
use afd_conformance::up::{Pair, UpOptions, twin_next_to_current_exe};
use afd_sim::topology::RuleSet;

#[derive(Parser, Debug)]
#[command(
    name = "afd-conformance",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("AFD_GIT_COMMIT"), ")"),
    args_override_self = true,
    about = "Check a live AFD Attention+FFN pair (vLLM with the afd-plugin, or afd-twin) for rank-mapping and routing invariants",
    after_help = "Examples:\n  afd-conformance list\n  afd-conformance run --recipe sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh --attention-log attn.log --ffn-log ffn.log --junit conformance.xml\n  afd-conformance run --attention-url http://gpu-node:18305 --attention-dp 2 --time-budget 5m --json report.json\n  afd-conformance up sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print the invariant catalog.
    #[command(
        after_help = "Examples:\n  afd-conformance list\n  afd-conformance list --kind live\n  afd-conformance list --json > catalog.json"
    )]
    List {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Only invariants of this kind (static, live, stateful).
        #[arg(long)]
        kind: Option<String>,
    },
    /// Check a live pair.
    Run(Box<RunArgs>),
    /// Start a twin pair from a recipe and keep it up until Ctrl-C.
    Up(UpArgs),
    /// Send the fixed list of exchanges to a server and write each request and response as JSON.
    Record(RecordArgs),
}

#[derive(Args, Debug)]
#[command(
    after_help = "Writes DIR/NN-NAME.json per exchange (request; response status, every header, body, every stream event in order) and DIR/index.json (provenance, plan, one line per exchange).\nExit status: 0 when every exchange was sent (error answers are what is recorded), 2 for bad flags or a server that never answered GET /v1/models.\n\nExamples:\n  afd-conformance record --url http://127.0.0.1:8000 --out transcripts/real --provenance-note 'vLLM 0.26.0, 1 x H200'\n  afd-conformance record --url http://127.0.0.1:8000 --out t --chat-template template.jinja --load 8"
)]
struct RecordArgs {
    /// The server (`http://HOST:PORT`).
    #[arg(long)]
    url: String,
    /// Directory the transcripts are written to (created; existing exchange files are replaced).
    #[arg(long)]
    out: PathBuf,
    /// Model name for requests (default: the first model /v1/models lists).
    #[arg(long)]
    model: Option<String>,
    /// A Jinja chat template file, sent as `chat_template` in every chat request (the server needs
    /// --trust-request-chat-template for it).
    #[arg(long)]
    chat_template: Option<PathBuf>,
    /// Completions in the known load before the last GET /metrics.
    #[arg(long, default_value_t = 8)]
    load: u32,
    /// Context length for the too-long prompt (default: max_model_len from /v1/models).
    #[arg(long)]
    max_model_len: Option<u64>,
    /// Free text stored in index.json (vLLM version, flags, GPU, date).
    #[arg(long)]
    provenance_note: Option<String>,
    /// Deadline of one exchange.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// How long to wait for /v1/models to answer 200 before giving up (exit 2).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    ready_timeout: Duration,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Exit status: 0 every invariant passed (indeterminate and skipped allowed), 1 an invariant failed, 2 the run could not proceed (bad input, unreachable pair).\n\nExamples:\n  # The seed recipe as launched, with its logs:\n  afd-conformance run --recipe sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh --attention-log attn.log --ffn-log ffn.log\n  # Raw flags of the two roles and explicit URLs:\n  afd-conformance run --attention-args \"vllm serve /models/DeepSeek-V2-Lite --data-parallel-size 2 ...\" \\\n      --ffn-args \"vllm serve /models/DeepSeek-V2-Lite ...\" --attention-url http://10.0.0.5:18305 --ffn-url http://10.0.0.6:18306\n  # Only routing and the FFN port, with a fixed seed, for CI:\n  afd-conformance run --recipe sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh --only routing,ffn --seed 7 --junit out.xml --json out.json"
)]
struct RunArgs {
    /// The recipe script that launched the pair (read as text, never run).
    #[arg(long, conflicts_with_all = ["attention_args", "ffn_args"])]
    recipe: Option<PathBuf>,
    /// The Attention role's command line (`vllm serve MODEL --flag ...`, env prefixes allowed).
    #[arg(long, requires = "ffn_args")]
    attention_args: Option<String>,
    /// The FFN role's command line.
    #[arg(long, requires = "attention_args")]
    ffn_args: Option<String>,
    /// The Attention server (default: from the deployment's --host/--port); `--url` for a plain server.
    #[arg(long, visible_alias = "url")]
    attention_url: Option<String>,
    /// The target is one plain vLLM server (no AFD pair): AFD-only invariants end indeterminate.
    #[arg(long, conflicts_with_all = ["recipe", "attention_args", "ffn_args", "ffn_url", "ffn_log"])]
    plain: bool,
    /// A plain vLLM server's command line (`vllm serve MODEL --flag ...`; implies --plain): its served
    /// name, DP size and --host/--port.
    #[arg(long, conflicts_with_all = ["recipe", "attention_args", "ffn_args", "ffn_url", "ffn_log"])]
    serve_args: Option<String>,
    /// A Jinja chat template file, sent as `chat_template` in every chat request (the server needs
    /// --trust-request-chat-template to accept it).
    #[arg(long)]
    chat_template: Option<PathBuf>,
    /// The FFN server (default: from the deployment's --host/--port).
    #[arg(long)]
    ffn_url: Option<String>,
    /// The Attention server's log, for its rank-mapping lines.
    #[arg(long)]
    attention_log: Option<PathBuf>,
    /// The FFN server's log, for its rank-mapping lines.
    #[arg(long)]
    ffn_log: Option<PathBuf>,
    /// Attention DP size when no deployment is given.
    #[arg(long)]
    attention_dp: Option<u32>,
    /// Model name for requests (default: the deployment's served name, else what /v1/models lists).
    #[arg(long)]
    model: Option<String>,
    /// Rule set the deployment is judged by.
    #[arg(long, default_value = "latest", value_parser = parse_rules)]
    rules: RuleSet,
    /// Only these invariants: ids, areas (routing), kinds (static), or prefixes (api.*); comma-separated or repeated.
    #[arg(long, num_args = 1..)]
    only: Vec<String>,
    /// Seed of every random choice (printed; pass it back to reproduce a run).
    #[arg(long)]
    seed: Option<u64>,
    /// Stateful sequences to run at most.
    #[arg(long, default_value_t = 32)]
    cases: u32,
    /// Budget for the whole run, readiness included (the stateful phase gets what is left): 300s, 5m,
    /// 1h. The run ends within it plus about 2 s, reports written; what it did not reach is indeterminate.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    time_budget: Duration,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write JUnit XML here.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Deadline of one generation request.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    request_timeout: Duration,
    /// Deadline for the FFN server to refuse or answer.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    ffn_deadline: Duration,
    /// How long counters may take to reflect finished requests.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    settle_timeout: Duration,
    /// How long the queues may take to drain after load.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    drain_timeout: Duration,
    /// How long to wait for /v1/models to answer 200 before giving up (exit 2); never past --time-budget.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    ready_timeout: Duration,
    /// Requests in the routing load.
    #[arg(long, default_value_t = 64)]
    requests: u32,
    /// Arrival rate of the open-loop load in requests per second (inf: all at once).
    #[arg(long, default_value_t = 20.0)]
    load_rate: f64,
    /// Largest concurrency used.
    #[arg(long, default_value_t = 16)]
    concurrency: u32,
    /// max_tokens of ordinary requests.
    #[arg(long, default_value_t = 16)]
    max_tokens: u32,
    /// Longest stateful sequence.
    #[arg(long, default_value_t = 12)]
    max_steps: usize,
    /// Objective for the median inter-token latency (ms); timing.itl is skipped without it.
    #[arg(long)]
    max_itl_ms: Option<f64>,
    /// Objective for the median time to first token (ms); timing.ttft is skipped without it.
    #[arg(long)]
    max_ttft_ms: Option<f64>,
    /// Largest relative difference (0.25 = 25 %) between the open-loop load's mean TTFT and TPOT and
    /// what afd-sim predicts for it; timing.simulator is skipped without it (an afd-twin pair only).
    #[arg(long, value_name = "FRACTION")]
    max_sim_deviation: Option<f64>,
    /// Least common-prefix fraction of greedy text across load when the server is not batch-invariant.
    #[arg(long, default_value_t = 0.5)]
    greedy_prefix: f64,
    /// Whether the server runs vLLM's batch-invariant mode (default: VLLM_BATCH_INVARIANT of the deployment).
    #[arg(long)]
    batch_invariant: Option<bool>,
    /// List passing and skipped invariants too.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(Args, Debug)]
#[command(
    after_help = "Each `vllm serve` / `uv run vllm serve` of the recipe is replaced by afd-twin; redirections become files under --log-dir.\n\nExamples:\n  afd-conformance up sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh   # tokens timed as the simulator predicts, in real time\n  afd-conformance up sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh --time-scale 0   # steps back to back, for fast functional runs\n  afd-conformance up sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh --free-ports --fault attention:drop-response=5 --log-dir /tmp/pair"
)]
struct UpArgs {
    /// The recipe script.
    recipe: PathBuf,
    /// The afd-twin binary (default: next to this executable).
    #[arg(long)]
    twin_bin: Option<PathBuf>,
    /// Directory for the twins' logs.
    #[arg(long, default_value = ".")]
    log_dir: PathBuf,
    /// A fault switch: `attention:NAME[=V]`, `ffn:NAME[=V]`, or `NAME[=V]` for both roles.
    #[arg(long)]
    fault: Vec<String>,
    /// Real seconds per simulated second of the twins' token timing, passed to both (1: real time, as
    /// `afd-sim predict` times the pair; 0: steps back to back).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Any other afd-twin flag for both twins (repeat for each word).
    #[arg(long, allow_hyphen_values = true)]
    twin_arg: Vec<String>,
    /// Move the HTTP and AFD ports to free ones (to run beside another pair).
    #[arg(long)]
    free_ports: bool,
    /// Rule set the twins are told to apply.
    #[arg(long, default_value = "latest", value_parser = parse_rules)]
    rules: RuleSet,
    /// How long to wait for the Attention twin to answer /v1/models.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    ready_timeout: Duration,
    /// A recipe variable, NAME=VALUE (repeatable), e.g. MODEL_PATH=/models/x.
    #[arg(long = "env")]
    env: Vec<String>,
}

fn parse_rules(text: &str) -> Result<RuleSet, String> {
    RuleSet::parse(text)
        .ok_or_else(|| format!("unknown rule set '{text}'; expected latest or v0.26"))
}

/// `500ms`, `90s`, `5m`, `1h`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('h') {
        (n, 3600.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (examples: 500ms, 90s, 5m, 1h)"))?;
    if !value.is_finite() || value < 0.0 || value * scale > 1e9 {
        return Err(format!("'{text}' is not a duration between 0 and 10^9 s"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
        }
    };
    let result = match cli.command {
        Command::List { json, kind } => list(json, kind.as_deref()).map(|()| 0),
        Command::Run(args) => runtime().and_then(|rt| {
            let result = rt.block_on(run_command(*args));
            // A phase the budget cut short may leave a blocking task behind; do not wait for it.
            rt.shutdown_timeout(Duration::from_millis(200));
            result
        }),
        Command::Up(args) => runtime().and_then(|rt| rt.block_on(up_command(args))),
        Command::Record(args) => runtime().and_then(|rt| rt.block_on(record_command(args))),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("afd-conformance: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn list(json: bool, kind: Option<&str>) -> Result<()> {
    let kind = match kind {
        None => None,
        Some(text) => Some(
            Kind::ALL
                .into_iter()
                .find(|k| k.as_str() == text)
                .with_context(|| format!("--kind {text}: expected static, live or stateful"))?,
        ),
    };
    let all: Vec<_> = catalog::catalog()
        .into_iter()
        .filter(|i| kind.is_none_or(|k| i.kind == k))
        .collect();
    let mut out = std::io::stdout().lock();
    if json {
        let items: Vec<serde_json::Value> = all
            .iter()
            .map(|i| {
                serde_json::json!({
                    "id": i.id, "kind": i.kind.as_str(), "area": i.area.as_str(),
                    "source": i.source, "statement": i.statement, "indeterminate": i.indeterminate,
                })
            })
            .collect();
        let counts: BTreeMap<&str, usize> = catalog::count_by_kind()
            .into_iter()
            .map(|(k, n)| (k.as_str(), n))
            .collect();
        let doc = serde_json::json!({"schema_version": report::SCHEMA_VERSION, "count": all.len(), "by_kind": counts, "invariants": items});
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(());
    }
    let width = all.iter().map(|i| i.id.len()).max().unwrap_or(10);
    writeln!(
        out,
        "{:<width$}  {:<8}  {:<12}  statement [source]",
        "id", "kind", "area"
    )?;
    for i in &all {
        writeln!(
            out,
            "{:<width$}  {:<8}  {:<12}  {} [{}]",
            i.id,
            i.kind.as_str(),
            i.area.as_str(),
            i.statement,
            i.source
        )?;
    }
    let counts: Vec<String> = catalog::count_by_kind()
        .into_iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    writeln!(out, "\n{} invariants ({})", all.len(), counts.join(", "))?;
    Ok(())
}

/// A word as a POSIX shell (and the recipe reader) reads it back.
fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn rerun_command(seed: u64) -> String {
    let mut words: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1).peekable();
    while let Some(arg) = args.next() {
        if arg == "--seed" {
            args.next();
            continue;
        }
        if arg.starts_with("--seed=") {
            continue;
        }
        words.push(arg);
    }
    words.push("--seed".to_owned());
    words.push(seed.to_string());
    let quoted: Vec<String> = words
        .iter()
        .map(|w| {
            if w.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect();
    format!("afd-conformance {}", quoted.join(" "))
}

async fn run_command(args: RunArgs) -> Result<u8> {
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            % 1_000_000_007
    });
    for (flag, path) in [("--json", &args.json), ("--junit", &args.junit)] {
        if let Some(path) = path {
            check_output(flag, path)?;
        }
    }
    let deployment = match (&args.recipe, &args.attention_args, &args.ffn_args) {
        (Some(path), _, _) => Some(DeploymentInput::Recipe(path.clone())),
        (None, Some(attention), Some(ffn)) => Some(DeploymentInput::Args {
            attention: attention.clone(),
            ffn: ffn.clone(),
        }),
        _ => None,
    };
    if !(0.0..=1.0).contains(&args.greedy_prefix) {
        bail!("--greedy-prefix {} must lie in 0..1", args.greedy_prefix);
    }
    for (flag, value) in [
        ("--concurrency", args.concurrency),
        ("--max-tokens", args.max_tokens),
        ("--requests", args.requests),
        ("--attention-dp", args.attention_dp.unwrap_or(1)),
    ] {
        if value == 0 {
            bail!("{flag} 0: must be at least 1");
        }
    }
    for (flag, value) in [
        ("--max-itl-ms", args.max_itl_ms),
        ("--max-ttft-ms", args.max_ttft_ms),
    ] {
        if value.is_some_and(|v| !v.is_finite() || v <= 0.0) {
            bail!("{flag} must be a positive number of milliseconds");
        }
    }
    if args
        .max_sim_deviation
        .is_some_and(|v| !v.is_finite() || v <= 0.0)
    {
        bail!("--max-sim-deviation must be a positive fraction (0.25 allows 25 %)");
    }
    if args.load_rate.is_nan() || args.load_rate <= 0.0 {
        bail!(
            "--load-rate {} must be a positive number of requests per second (or inf)",
            args.load_rate
        );
    }
    let chat_template = match &args.chat_template {
        None => None,
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading --chat-template {}", path.display()))?,
        ),
    };
    let options = RunOptions {
        target: TargetOptions {
            deployment,
            rules: args.rules,
            attention_url: args.attention_url.clone(),
            ffn_url: args.ffn_url.clone(),
            attention_log: args.attention_log.clone(),
            ffn_log: args.ffn_log.clone(),
            attention_dp: args.attention_dp,
            batch_invariant: args.batch_invariant,
            model: args.model.clone(),
            plain: args.plain,
            serve_args: args.serve_args.clone(),
        },
        settings: Settings {
            request_timeout: args.request_timeout,
            probe_timeout: args.request_timeout.min(Duration::from_secs(10)),
            ffn_deadline: args.ffn_deadline,
            settle_timeout: args.settle_timeout,
            drain_timeout: args.drain_timeout,
            requests: args.requests,
            load_rate: args.load_rate,
            concurrency: args.concurrency,
            max_tokens: args.max_tokens,
            breaker_timeouts: 3,
            max_itl_ms: args.max_itl_ms,
            max_ttft_ms: args.max_ttft_ms,
            max_sim_deviation: args.max_sim_deviation,
            greedy_prefix: args.greedy_prefix,
            chat_template,
        },
        seed,
        cases: args.cases,
        max_steps: args.max_steps,
        time_budget: args.time_budget,
        ready_timeout: args.ready_timeout,
        only: args.only.clone(),
        rerun: rerun_command(seed),
    };
    eprintln!("afd-conformance: seed {seed}");
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    let progress = |phase: &str| spinner.set_message(format!("checking: {phase}"));
    let report = run(options, &progress).await;
    spinner.finish_and_clear();
    let report = report?;
    print!("{}", report::human::render(&report, args.verbose));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report::json::render(&report))?;
        write_atomically(path, &text)?;
    }
    if let Some(path) = &args.junit {
        write_atomically(path, &report::junit::render(&report))?;
    }
    Ok(exit_code(&report))
}

fn exit_code(report: &Report) -> u8 {
    u8::try_from(report.exit_code()).unwrap_or(2)
}

/// Checks before the run that a report can be written to `path`: its folder exists and it is no folder.
fn check_output(flag: &str, path: &Path) -> Result<()> {
    let folder = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if path.file_name().is_none() || path.is_dir() {
        bail!("{flag} {}: names a folder, not a file", path.display());
    }
    if !folder.is_dir() {
        bail!(
            "{flag} {}: folder {} does not exist",
            path.display(),
            folder.display()
        );
    }
    Ok(())
}

/// Writes `text` to a temporary file beside `path`, then renames it over `path`.
fn write_atomically(path: &Path, text: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .with_context(|| format!("{} names no file", path.display()))?;
    let temp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::write(&temp, text).with_context(|| format!("writing {}", temp.display()))?;
    std::fs::rename(&temp, path).with_context(|| {
        let _ = std::fs::remove_file(&temp);
        format!("moving {} to {}", temp.display(), path.display())
    })?;
    Ok(())
}

async fn record_command(args: RecordArgs) -> Result<u8> {
    use afd_conformance::client::{Client, Endpoint, Request};
    use afd_conformance::transcript::{self, Plan};

    let endpoint = Endpoint::parse(&args.url).with_context(|| format!("--url {}", args.url))?;
    let chat_template = match &args.chat_template {
        None => None,
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading --chat-template {}", path.display()))?,
        ),
    };
    let client = Client {
        timeout: args.request_timeout,
        ..Client::default()
    };
    let probe = client
        .clone()
        .with_timeout(args.request_timeout.min(Duration::from_secs(10)));
    // Readiness: /v1/models answering 200, as vLLM's runners wait for it.
    let start = std::time::Instant::now();
    let models = loop {
        let last = match probe.send(&endpoint, &Request::get("/v1/models")).await {
            Ok(response) if response.status() == 200 => break response.json(),
            Ok(response) => format!("HTTP {}", response.status()),
            Err(err) => err.to_string(),
        };
        if start.elapsed() >= args.ready_timeout {
            bail!(
                "{} did not answer GET /v1/models with 200 within {:.0?} (last: {last})",
                endpoint.url(),
                args.ready_timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let listed = models.as_ref().and_then(transcript::served_model);
    let model = match (&args.model, &listed) {
        (Some(model), _) => model.clone(),
        (None, Some((id, _))) => id.clone(),
        (None, None) => bail!("/v1/models lists no model; pass --model"),
    };
    let max_model_len = args
        .max_model_len
        .or(listed.as_ref().and_then(|(_, len)| *len))
        .unwrap_or(transcript::DEFAULT_MAX_MODEL_LEN);
    let plan = Plan {
        model: model.clone(),
        max_model_len,
        chat_template: chat_template.clone(),
        load: args.load,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let recorded = transcript::record(&client, &endpoint, &plan).await;
    let mut index = Vec::new();
    let (mut ok, mut client_errors, mut server_errors, mut failed) = (0, 0, 0, 0);
    let mut version = None;
    for exchange in &recorded {
        let file = format!("{}.json", exchange.exchange.name);
        let doc = transcript::exchange_json(exchange);
        write_atomically(&args.out.join(&file), &serde_json::to_string_pretty(&doc)?)?;
        let status = exchange.result.as_ref().map(|r| r.status()).ok();
        match status {
            Some(200..=299) => ok += 1,
            Some(400..=499) => client_errors += 1,
            Some(_) => server_errors += 1,
            None => failed += 1,
        }
        if exchange.exchange.request.path == "/version" {
            version = exchange
                .result
                .as_ref()
                .ok()
                .filter(|r| r.status() == 200)
                .and_then(|r| r.json());
        }
        index.push(serde_json::json!({
            "name": exchange.exchange.name,
            "file": file,
            "about": exchange.exchange.about,
            "method": exchange.exchange.request.method,
            "path": exchange.exchange.request.path,
            "status": status,
            "error": exchange.result.as_ref().err(),
        }));
    }
    let elapsed = start.elapsed();
    let doc = serde_json::json!({
        "schema_version": transcript::SCHEMA_VERSION,
        "tool": format!("afd-conformance {}", env!("CARGO_PKG_VERSION")),
        "url": endpoint.url(),
        "started_unix_s": started_unix_s,
        "duration_s": elapsed.as_secs_f64(),
        "provenance_note": args.provenance_note,
        "server_version": version,
        "plan": {
            "model": plan.model,
            "max_model_len": plan.max_model_len,
            "chat_template": plan.chat_template,
            "chat_template_file": args.chat_template.as_ref().map(|p| p.display().to_string()),
            "load": plan.load,
            "load_prompt_tokens": transcript::LOAD_PROMPT_TOKENS,
            "load_output_tokens": transcript::LOAD_OUTPUT_TOKENS,
        },
        "exchanges": index,
    });
    write_atomically(
        &args.out.join("index.json"),
        &serde_json::to_string_pretty(&doc)?,
    )?;
    println!(
        "recorded {} exchanges from {} (model {model}, max_model_len {max_model_len}) into {} in {:.1} s: {ok} 2xx, {client_errors} 4xx, {server_errors} other, {failed} without a response",
        recorded.len(),
        endpoint.url(),
        args.out.display(),
        elapsed.as_secs_f64()
    );
    Ok(0)
}

async fn up_command(args: UpArgs) -> Result<u8> {
    let twin_bin = match args.twin_bin.clone().or_else(twin_next_to_current_exe) {
        Some(path) => path,
        None => bail!(
            "no afd-twin next to this executable; build it (cargo build -p afd-twin) or pass --twin-bin"
        ),
    };
    let mut attention_faults = Vec::new();
    let mut ffn_faults = Vec::new();
    for fault in &args.fault {
        match fault.split_once(':') {
            Some(("attention", name)) => attention_faults.push(name.to_owned()),
            Some(("ffn", name)) => ffn_faults.push(name.to_owned()),
            Some((role, _)) => bail!("--fault {fault}: role '{role}' is neither attention nor ffn"),
            None => {
                attention_faults.push(fault.clone());
                ffn_faults.push(fault.clone());
            }
        }
    }
    let mut env = BTreeMap::new();
    for pair in &args.env {
        let Some((name, value)) = pair.split_once('=') else {
            bail!("--env {pair}: expected NAME=VALUE");
        };
        env.insert(name.to_owned(), value.to_owned());
    }
    if !(0.0..=1000.0).contains(&args.time_scale) {
        bail!(
            "--time-scale {}: expected a number from 0 to 1000 (1: real time, 0: steps back to back)",
            if args.time_scale.abs() >= 1e16 {
                format!("{:e}", args.time_scale)
            } else {
                args.time_scale.to_string()
            }
        );
    }
    let mut twin_args = vec!["--time-scale".to_owned(), args.time_scale.to_string()];
    twin_args.extend(args.twin_arg.iter().cloned());
    let options = UpOptions {
        recipe: args.recipe.clone(),
        twin_bin,
        log_dir: args.log_dir.clone(),
        rules: args.rules,
        twin_args,
        attention_faults,
        ffn_faults,
        free_ports: args.free_ports,
        ready_timeout: args.ready_timeout,
        env,
    };
    // The twins lead their own process groups, so a signal to this process does not reach them: catch
    // the usual ones and stop the pair before exiting. Listening from before the start, so a signal
    // that arrives while the pair starts, or as soon as it is announced, still stops it.
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("listening for SIGTERM")?;
    let mut hangup = signal(SignalKind::hangup()).context("listening for SIGHUP")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("listening for SIGINT")?;
    let spinner = indicatif::ProgressBar::new_spinner();
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner.set_message("starting the twin pair");
    let pair = Pair::start(&options).await;
    spinner.finish_and_clear();
    let mut pair = pair?;
    println!("twin pair up ({})", pair.origin);
    println!(
        "  attention {}  log {}",
        pair.attention_url,
        pair.attention_log.display()
    );
    println!(
        "  ffn       {}  log {}",
        pair.ffn_url,
        pair.ffn_log.display()
    );
    let deployment = if args.free_ports {
        // The recipe names the old ports; hand the suite a recipe of the command lines the twins
        // really got, beside their logs.
        let stem = args
            .recipe
            .file_stem()
            .map_or_else(|| "recipe".into(), |s| s.to_string_lossy());
        let path = args.log_dir.join(format!("{stem}.free-ports.sh"));
        let text = afd_conformance::up::rewritten_recipe(
            &args.recipe.display().to_string(),
            (&pair.attention, &pair.attention_log),
            (&pair.ffn, &pair.ffn_log),
        );
        if let Err(err) = write_atomically(&path, &text) {
            pair.stop().await;
            return Err(err);
        }
        println!("  recipe    {} (the ports as moved)", path.display());
        format!("--recipe {}", shell_quote(&path.display().to_string()))
    } else {
        format!(
            "--recipe {}",
            shell_quote(&args.recipe.display().to_string())
        )
    };
    println!(
        "check it with:\n  afd-conformance run {deployment} --rules {} --attention-url {} --ffn-url {} --attention-log {} --ffn-log {}",
        args.rules,
        pair.attention_url,
        pair.ffn_url,
        shell_quote(&pair.attention_log.display().to_string()),
        shell_quote(&pair.ffn_log.display().to_string()),
    );
    println!("Ctrl-C (or SIGTERM) stops the pair.");
    let _ = std::io::stdout().flush();
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = hangup.recv() => break,
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                let exited = pair.exited();
                if let Some((role, status)) = exited.first() {
                    eprintln!("afd-conformance: the {role} twin exited with {status}; stopping the pair");
                    pair.stop().await;
                    return Ok(1);
                }
            }
        }
    }
    for (role, status) in pair.stop().await {
        match status {
            Some(status) => println!("{role} twin stopped: {status}"),
            None => println!("{role} twin killed"),
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::Cli;

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
        let missing = without_help(&Cli::command());
        assert!(missing.is_empty(), "flags without help: {missing:?}");
    }

    #[test]
    fn durations_parse_or_fail_without_panicking() {
        assert_eq!(
            super::parse_duration("90s"),
            Ok(std::time::Duration::from_secs(90))
        );
        for bad in ["1e30", "NaN", "-1s", "inf", "soon"] {
            assert!(super::parse_duration(bad).is_err(), "{bad}");
        }
    }
}
