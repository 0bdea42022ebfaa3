//! The `afd-probe` command line: parses flags into probe specs, checks the machine, runs the probe,
//! prints a short table and writes the JSON file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use afd_gpu_probes::assemble::{self, SystemInfo};
use afd_gpu_probes::calibrate::{self, CalibrateSpec};
use afd_gpu_probes::device::{self, Requirements};
use afd_gpu_probes::error::ProbeError;
use afd_gpu_probes::gemm_choice::PathSet;
use afd_gpu_probes::model::ModelShape;
use afd_gpu_probes::rendezvous::LauncherEnv;
use afd_gpu_probes::routing::Routing;
use afd_gpu_probes::spec::{
    AttentionSpec, Collective, HbmSpec, LaunchSpec, Measured, MoeSpec, P2pMode, P2pSpec,
    PipelineSpec, RankLayout, Timing,
};
use afd_gpu_probes::{render, sweep};
use afd_traces::calibration::CalibrationProfile;
use afd_traces::pipeline::{PipelineModel, PipelineResults, PipelineSetup};
use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

const AFTER_HELP: &str = "\
Examples:
  afd-probe p2p --sizes 8:1G --out p2p.json           NCCL send/recv between GPU 0 and 1, eager and graph
  afd-probe hbm                                      device-to-device copy bandwidth of GPU 0
  afd-probe moe --model qwen3-30b-a3b                one MoE layer's FFN work, token counts 1…4096
  afd-probe attention --batch 1:512 --context 512:8192
  afd-probe launch                                   eager vs graph launch of 1…1024 tiny kernels
  afd-probe calibrate --out h200.json                everything the simulator needs, in one profile
  afd-probe pipeline --out pipeline.json             real Attention→FFN→Attention steps on GPUs 0 and 1

Multi-GPU probes run one thread per GPU; under torchrun or Slurm (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT set) each process is one rank and rank 0 writes the output.
Without a GPU, with too few GPUs or without a loadable NCCL every subcommand exits with code 2;
a failed data check after timing exits with code 1.";

/// Measure NCCL P2P, MoE GEMMs, MLA attention and launch costs on this machine's GPUs, and real AFD
/// pipeline steps; write calibration profiles and pipeline results for afd-sim.
#[derive(Parser, Debug)]
#[command(name = "afd-probe", version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("AFD_GIT_COMMIT"), ")"), about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// NCCL send/recv (one-way, ping-pong, bidirectional, fan-in) and all-reduce/all-to-all, 8 B … 1 GiB.
    #[command(
        after_help = "Example: afd-probe p2p --sizes 8:1G --modes one-way,bidirectional --out p2p.json"
    )]
    P2p(P2pArgs),
    /// Device-to-device copy bandwidth (bytes read + written).
    #[command(after_help = "Example: afd-probe hbm --sizes 64M:4G")]
    Hbm(HbmArgs),
    /// One MoE layer's FFN work: router, routed experts (grid of active experts × tokens per expert),
    /// shared experts, dense MLP, whole layer per token count.
    #[command(
        after_help = "Examples:\n  afd-probe moe --model models/Qwen3-30B-A3B/config.json --out qwen3-moe.json\n  afd-probe moe --no-parts --tokens 512 --grid-active 64 --grid-tokens-per-expert 1:128 \\\n      --gemm-path auto,cublas,cublaslt,own      compare the routed-expert GEMM paths"
    )]
    Moe(MoeArgs),
    /// One layer's Attention work: projections, MLA decode over batch × context, prefill chunks.
    #[command(
        after_help = "Example: afd-probe attention --batch 1:512 --context 512:8192 --out attention.json"
    )]
    Attention(AttentionArgs),
    /// Host cost of launching N tiny kernels eagerly versus one graph replay of the same N.
    #[command(after_help = "Example: afd-probe launch --kernels 1:1024")]
    Launch(LaunchArgs),
    /// Run the set the simulator needs and write one calibration profile.
    #[command(
        after_help = "Example: afd-probe calibrate --out traces/data/calibration/h200-deepseek-v2-lite.json"
    )]
    Calibrate(CalibrateArgs),
    /// Real Attention→FFN→Attention steps on two GPUs (GPU 0 Attention, GPU 1 FFN), DBO and graph variants.
    #[command(
        after_help = "Example: afd-probe pipeline --tokens 4,32,128,512 --contexts 1024,4096 --out pipeline.json"
    )]
    Pipeline(PipelineArgs),
    /// A real vLLM engine: start `vllm serve` with the words after `--`, run a plan of `vllm bench serve`
    /// workloads and fixed-shape bursts, keep per-step logs, /metrics and chosen backends (no CUDA here).
    #[command(after_help = VLLM_HELP)]
    Vllm(VllmArgs),
}

const VLLM_HELP: &str = "\
The server is started as `VLLM serve WORDS --host 127.0.0.1 --port PORT --enable-logging-iteration-details`
(host, port and the per-step log only where WORDS lack them), in its own process group, stopped with
SIGTERM then SIGKILL on every path. Each workload is bounded by its timeout_s; a server that exits or
never answers /health is an error (exit 2) carrying its log tail. OUT gets run.json (afd-vllm-run),
server.log and every bench result and log.

Example (the lent H200, vLLM from ../shared/vllm):
  afd-probe vllm --plan gpu-probes/plans/engine-dsv2l.json --out out/eager-64 --label eager-64-64 \\
      --vllm 'python3 -m vllm.entrypoints.cli.main' -- /root/model/dsv2l --load-format dummy \\
      --enforce-eager --max-num-seqs 64 --max-num-batched-tokens 64";

#[derive(Args, Debug)]
struct VllmArgs {
    /// The plan (afd-vllm-plan JSON): warm-up and recorded workloads, in order.
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// Folder for run.json, server.log and the bench results (created).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Short name of the server configuration (default: the folder's name).
    #[arg(long)]
    label: Option<String>,
    /// The `vllm` command, split on spaces.
    #[arg(long, default_value = "vllm")]
    vllm: String,
    /// The Python that has vLLM (read for vLLM, torch and CUDA versions).
    #[arg(long, default_value = "python3")]
    python: String,
    /// Port for the server when the serve words give none.
    #[arg(long, default_value_t = 18420)]
    port: u16,
    /// Seconds to wait for /health (vLLM's start-up compiles and captures graphs).
    #[arg(long, default_value_t = 900.0, value_name = "SECONDS")]
    ready_timeout: f64,
    /// Provenance notes, KEY=VALUE, repeatable (for example plugin=2e4378f).
    #[arg(long = "note", value_name = "KEY=VALUE")]
    notes: Vec<String>,
    /// A shell command run after the workloads while the server is still up, with VLLM_URL and
    /// VLLM_MODEL set (for example a conformance run); its output goes to OUT/hook.log.
    #[arg(long, value_name = "SHELL_COMMAND")]
    hook: Option<String>,
    /// Seconds the hook may take before its process group is killed.
    #[arg(long, default_value_t = 300.0, value_name = "SECONDS")]
    hook_timeout: f64,
    /// The `vllm serve` words after `serve`: the model path first.
    #[arg(last = true, required = true, value_name = "SERVE_WORDS")]
    serve: Vec<String>,
}

#[derive(Args, Debug, Clone)]
struct Output {
    /// Write the JSON result (calibration profile or pipeline results) to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the JSON result on stdout instead of the table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug, Clone)]
struct TimingArgs {
    /// Untimed runs of every point before timing.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Timed samples per point.
    #[arg(long, default_value_t = 30)]
    iters: usize,
    /// Each graph replay repeats the operation for at least this many µs.
    #[arg(long, default_value_t = 500.0)]
    min_replay_us: f64,
}

impl TimingArgs {
    fn timing(&self) -> anyhow::Result<Timing> {
        if self.iters == 0 || self.iters > 10_000 {
            anyhow::bail!(ProbeError::setting(
                "--iters",
                format!("{} is outside 1..=10000", self.iters)
            ));
        }
        if !(self.min_replay_us.is_finite() && self.min_replay_us > 0.0) {
            anyhow::bail!(ProbeError::setting(
                "--min-replay-us",
                "must be a positive number"
            ));
        }
        Ok(Timing {
            warmup: self.warmup,
            iters: self.iters,
            min_replay_us: self.min_replay_us,
        })
    }
}

#[derive(Args, Debug, Clone)]
struct ModelArg {
    /// A model shipped with afd-traces (deepseek-v2-lite, qwen3-30b-a3b, deepseek-v3) or a config file
    /// (Hugging Face config.json or DeepSeek inference config).
    #[arg(
        long,
        value_name = "NAME_OR_CONFIG",
        default_value = "deepseek-v2-lite"
    )]
    model: String,
}

impl ModelArg {
    fn shape(&self) -> anyhow::Result<ModelShape> {
        Ok(ModelShape::from_name_or_file(&self.model)?)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Mode {
    OneWay,
    PingPong,
    Bidirectional,
    FanIn,
    Handoff,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CollectiveArg {
    AllReduce,
    AllToAll,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Switch {
    Off,
    On,
    Both,
}

impl Switch {
    fn modes(self) -> Vec<bool> {
        match self {
            Switch::Off => vec![false],
            Switch::On => vec![true],
            Switch::Both => vec![false, true],
        }
    }
}

#[derive(Args, Debug)]
struct P2pArgs {
    /// Message sizes: MIN:MAX (factor 2) or a list; suffixes K, M, G.
    #[arg(long, default_value = "8:1G")]
    sizes: String,
    /// Transfer patterns to time: one-way, ping-pong, bidirectional, fan-in, handoff.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "one-way,ping-pong,bidirectional,fan-in"
    )]
    modes: Vec<Mode>,
    /// FFN-side collectives to measure as well (empty list: none).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "all-reduce,all-to-all"
    )]
    collectives: Vec<CollectiveArg>,
    /// Message sizes of the collectives: MIN:MAX (factor 2) or a list; suffixes K, M, G.
    #[arg(long, default_value = "8:256M")]
    collective_sizes: String,
    /// Bytes the compute kernel of the handoff mode writes before each send (a list; K, M, G).
    #[arg(long, default_value = "4K,256M")]
    handoff_work: String,
    /// Eager (off), graph-captured (on) or both.
    #[arg(long, value_enum, default_value = "both")]
    graph: Switch,
    /// GPUs, one thread each (ignored under a launcher).
    #[arg(long, value_delimiter = ',')]
    gpus: Vec<usize>,
    /// Untimed repetitions before timing each size.
    #[arg(long, default_value_t = 5)]
    warmup: usize,
    /// Timed repetitions of each size.
    #[arg(long, default_value_t = 50)]
    iters: usize,
    #[command(flatten)]
    output: Output,
}

#[derive(Args, Debug)]
struct HbmArgs {
    /// The GPU (CUDA device index) to measure on.
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Buffer sizes to copy: MIN:MAX (factor 2) or a list; suffixes K, M, G.
    #[arg(long, default_value = "16M:4G")]
    sizes: String,
    #[command(flatten)]
    timing: TimingArgs,
    #[command(flatten)]
    output: Output,
}

#[derive(Args, Debug)]
struct MoeArgs {
    #[command(flatten)]
    model: ModelArg,
    /// The GPU (CUDA device index) to measure on.
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Token counts of the whole-layer and parts tables.
    #[arg(long, default_value = "1:4096")]
    tokens: String,
    /// Routing distributions of the whole-layer table: `uniform`, `power-law:ALPHA`.
    #[arg(long, value_delimiter = ',', default_value = "uniform,power-law:1.2")]
    routing: Vec<Routing>,
    /// Seed of the routing draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Active experts of the routed-expert grid (default: 1, 2, 4, … and the expert count).
    #[arg(long)]
    grid_active: Option<String>,
    /// Tokens per expert of the routed-expert grid.
    #[arg(long, default_value = "1:4096")]
    grid_tokens_per_expert: String,
    /// Skip the routed-expert grid.
    #[arg(long)]
    no_grid: bool,
    /// Skip the router, shared-expert, dense-MLP and dispatch tables.
    #[arg(long)]
    no_parts: bool,
    /// MoE layers of distinct weights to allocate (default: all of the model's).
    #[arg(long)]
    layers: Option<usize>,
    /// Routed-expert GEMM paths: `auto` (fastest of all, chosen per shape at start-up), `cublas`,
    /// `cublaslt` or `own`. A list measures the routed-expert grid once per entry; the first serves the
    /// other tables.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    gemm_path: Vec<PathSet>,
    #[command(flatten)]
    timing: TimingArgs,
    #[command(flatten)]
    output: Output,
}

#[derive(Args, Debug)]
struct AttentionArgs {
    #[command(flatten)]
    model: ModelArg,
    /// The GPU (CUDA device index) to measure on.
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Token counts of the projection table.
    #[arg(long, default_value = "1:512")]
    tokens: String,
    /// Batch sizes (sequences) of the MLA decode grid.
    #[arg(long, default_value = "1:512")]
    batch: String,
    /// Context lengths of the MLA decode grid.
    #[arg(long, default_value = "512:8192")]
    context: String,
    /// Prefill chunk sizes (empty: none).
    #[arg(long, default_value = "64,256,1024,4096")]
    prefill_tokens: String,
    /// Cached tokens before each prefill chunk (0 allowed).
    #[arg(long, default_value = "0,1024,4096")]
    prefill_context: String,
    #[command(flatten)]
    timing: TimingArgs,
    #[command(flatten)]
    output: Output,
}

#[derive(Args, Debug)]
struct LaunchArgs {
    /// The GPU (CUDA device index) to measure on.
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Kernels per launch batch: MIN:MAX (factor 2) or a list.
    #[arg(long, default_value = "1:1024")]
    kernels: String,
    #[command(flatten)]
    timing: TimingArgs,
    #[command(flatten)]
    output: Output,
}

#[derive(Args, Debug)]
struct CalibrateArgs {
    #[command(flatten)]
    model: ModelArg,
    /// The calibration profile to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Print the profile's JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Small grids and few iterations (a smoke test, not a profile to trust).
    #[arg(long)]
    quick: bool,
    /// GPUs, one thread each (rank 0 Attention side, rank 1 FFN side; ignored under a launcher).
    #[arg(long, value_delimiter = ',')]
    gpus: Vec<usize>,
    #[command(flatten)]
    timing: TimingArgs,
}

#[derive(Args, Debug)]
struct PipelineArgs {
    #[command(flatten)]
    model: ModelArg,
    /// The results file to write.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Print the results' JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Tokens per step (decode rows).
    #[arg(long, default_value = "4,32,128,512")]
    tokens: String,
    /// KV-cache length of every sequence.
    #[arg(long, default_value = "1024,4096")]
    contexts: String,
    /// Dual-batch overlap off, on, or both.
    #[arg(long, value_enum, default_value = "both")]
    dbo: Switch,
    /// Eager (off), graph-captured (on) or both.
    #[arg(long, value_enum, default_value = "both")]
    graph: Switch,
    /// Timed steps per configuration.
    #[arg(long, default_value_t = 50)]
    steps: usize,
    /// Untimed steps before timing each configuration.
    #[arg(long, default_value_t = 10)]
    warmup_steps: usize,
    /// Routing of the drawn tokens: `uniform` or `power-law:ALPHA`.
    #[arg(long, default_value = "uniform")]
    routing: Routing,
    /// Seed of the routing draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A step that takes longer is a hang: communicators are aborted and the run fails.
    #[arg(long, default_value_t = 120)]
    step_timeout_s: u64,
    /// Attention GPU, FFN GPU (ignored under a launcher).
    #[arg(long, value_delimiter = ',', default_value = "0,1")]
    gpus: Vec<usize>,
}

/// When this run started (the provenance's `date_utc`).
static STARTED: std::sync::OnceLock<SystemTime> = std::sync::OnceLock::new();

fn started() -> SystemTime {
    *STARTED.get_or_init(SystemTime::now)
}

fn main() -> ExitCode {
    started();
    let cli = Cli::parse();
    let result = std::panic::catch_unwind(|| run(cli));
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(err)) => {
            eprintln!("afd-probe: {err:#}");
            let code = err
                .downcast_ref::<ProbeError>()
                .map_or(2, ProbeError::exit_code);
            ExitCode::from(code)
        }
        Err(_) => {
            eprintln!("afd-probe: internal error (see the panic message above)");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::P2p(args) => p2p(args),
        Command::Hbm(args) => hbm(args),
        Command::Moe(args) => moe(args),
        Command::Attention(args) => attention(args),
        Command::Launch(args) => launch(args),
        Command::Calibrate(args) => calibrate(args),
        Command::Pipeline(args) => pipeline(args),
        Command::Vllm(args) => vllm(args),
    }
}

fn vllm(args: VllmArgs) -> anyhow::Result<()> {
    use afd_gpu_probes::vllm::{self as engine, VllmSpec};
    use afd_traces::vllm_run::VllmPlan;
    let text = afd_traces::input::read_text(&args.plan, afd_traces::input::InputKind::VLLM_RUN)?;
    let plan =
        VllmPlan::from_json(&text).with_context(|| format!("plan {}", args.plan.display()))?;
    for (flag, value) in [
        ("--ready-timeout", args.ready_timeout),
        ("--hook-timeout", args.hook_timeout),
    ] {
        if !(value.is_finite() && value > 0.0 && value <= 86_400.0) {
            anyhow::bail!(ProbeError::setting(
                flag,
                format!("{value} is not in (0, 86400] seconds")
            ));
        }
    }
    let mut notes = std::collections::BTreeMap::new();
    for note in &args.notes {
        let (k, v) = note
            .split_once('=')
            .ok_or_else(|| ProbeError::setting("--note", format!("{note:?} is not KEY=VALUE")))?;
        notes.insert(k.to_owned(), v.to_owned());
    }
    let vllm_command: Vec<String> = args.vllm.split_whitespace().map(str::to_owned).collect();
    if vllm_command.is_empty() {
        anyhow::bail!(ProbeError::setting("--vllm", "is empty"));
    }
    let label = args.label.clone().unwrap_or_else(|| {
        args.out
            .file_name()
            .map_or("vllm".into(), |n| n.to_string_lossy().into_owned())
    });
    let spec = VllmSpec {
        vllm_command,
        python: args.python.clone(),
        serve_args: args.serve.clone(),
        port: args.port,
        label,
        plan,
        out_dir: args.out.clone(),
        ready_timeout: Duration::from_secs_f64(args.ready_timeout),
        command_line: command_line(),
        notes,
        hook: args.hook.clone(),
        hook_timeout: Duration::from_secs_f64(args.hook_timeout),
    };
    let t0 = std::time::Instant::now();
    let run = engine::run(&spec, |line| {
        eprintln!("[{:7.1} s] {line}", t0.elapsed().as_secs_f64())
    })?;
    let failed = run.records.iter().filter(|r| r.failure.is_some()).count();
    println!(
        "{}: {} workloads recorded ({} failed), start-up {:.1} s, vLLM {} on {}; wrote {}",
        run.label,
        run.records.len(),
        failed,
        run.startup_s,
        run.provenance.vllm_version,
        run.provenance.gpus.first().map_or("no GPU", String::as_str),
        args.out.join("run.json").display()
    );
    Ok(())
}

fn list(flag: &str, text: &str, min: u64, max: u64) -> anyhow::Result<Vec<u64>> {
    sweep::parse_list(text, min, max).with_context(|| format!("flag {flag}"))
}

fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}").expect("static template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn command_line() -> String {
    std::env::args().collect::<Vec<_>>().join(" ")
}

/// Threads over `gpus` (default: the first `default_count`), or this process as one launcher rank.
fn layout(gpus: &[usize], default_count: usize) -> anyhow::Result<(RankLayout, Requirements)> {
    match LauncherEnv::from_process()? {
        Some(env) => {
            if env.world_size < 2 {
                anyhow::bail!(ProbeError::setting(
                    "WORLD_SIZE",
                    "multi-GPU probes need at least 2 ranks"
                ));
            }
            let req = Requirements {
                gpus: vec![env.local_rank],
                min_gpus: 1,
                ..Requirements::default()
            };
            Ok((RankLayout::Processes(env), req))
        }
        None => {
            let gpus: Vec<usize> = if gpus.is_empty() {
                (0..default_count).collect()
            } else {
                gpus.to_vec()
            };
            let mut unique = gpus.clone();
            unique.sort_unstable();
            unique.dedup();
            if unique.len() != gpus.len() {
                anyhow::bail!(ProbeError::setting(
                    "--gpus",
                    format!("{gpus:?} names a GPU twice")
                ));
            }
            if gpus.len() < 2 {
                anyhow::bail!(ProbeError::TooFewGpus {
                    needed: 2,
                    found: gpus.len(),
                    visible: "--gpus".to_owned(),
                });
            }
            let req = Requirements {
                gpus: gpus.clone(),
                min_gpus: 2,
                ..Requirements::default()
            };
            Ok((RankLayout::Threads { gpus }, req))
        }
    }
}

fn is_root(layout: &RankLayout) -> bool {
    match layout {
        RankLayout::Threads { .. } => true,
        RankLayout::Processes(env) => env.rank == 0,
    }
}

/// Writes the profile and prints the table (or the JSON).
fn emit_profile(
    info: &SystemInfo,
    measured: Measured,
    out: Option<&Path>,
    json: bool,
) -> anyhow::Result<()> {
    let mut profile = CalibrationProfile::new(assemble::provenance(
        info,
        command_line(),
        started(),
        std::env::vars(),
        measured.notes,
    ));
    profile.tables = measured.tables;
    profile
        .check()
        .context("the measured profile does not pass its own format check")?;
    let text = profile.to_json();
    if let Some(path) = out {
        assemble::write_atomic(path, &text)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        print!("{text}");
    } else {
        print_header(info);
        print!("{}", render::tables(&profile.tables));
        for (key, value) in &profile.provenance.notes {
            println!("note {key}: {value}");
        }
        if let Some(path) = out {
            println!("wrote {}", path.display());
        }
    }
    Ok(())
}

fn print_header(info: &SystemInfo) {
    println!(
        "GPUs {:?}, driver {}, CUDA {}, NCCL {} ({}), cuBLAS {}",
        info.gpus,
        info.driver_version,
        info.cuda_version,
        info.nccl_version,
        info.nccl_library,
        info.cublas_version
    );
}

fn p2p_spec(args: &P2pArgs, layout: RankLayout) -> anyhow::Result<P2pSpec> {
    let mut modes: Vec<P2pMode> = args
        .modes
        .iter()
        .map(|m| match m {
            Mode::OneWay => P2pMode::OneWay,
            Mode::PingPong => P2pMode::PingPong,
            Mode::Bidirectional => P2pMode::Bidirectional,
            Mode::FanIn => P2pMode::FanIn,
            Mode::Handoff => P2pMode::Handoff,
        })
        .collect();
    modes.sort_unstable();
    modes.dedup();
    let mut collectives: Vec<Collective> = args
        .collectives
        .iter()
        .map(|c| match c {
            CollectiveArg::AllReduce => Collective::AllReduce,
            CollectiveArg::AllToAll => Collective::AllToAll,
        })
        .collect();
    collectives.sort_unstable();
    collectives.dedup();
    if args.iters == 0 {
        anyhow::bail!(ProbeError::setting("--iters", "must be at least 1"));
    }
    Ok(P2pSpec {
        layout,
        sizes: list("--sizes", &args.sizes, 8, 16 << 30)?,
        modes,
        collectives,
        collective_sizes: list("--collective-sizes", &args.collective_sizes, 8, 16 << 30)?,
        graph_modes: args.graph.modes(),
        warmup: args.warmup,
        iters: args.iters,
        handoff_work: list("--handoff-work", &args.handoff_work, 4, 4 << 30)?,
    })
}

fn p2p(args: P2pArgs) -> anyhow::Result<()> {
    let (layout, mut req) = layout(&args.gpus, 2)?;
    req.nccl = true;
    req.nvrtc = true;
    let spec = p2p_spec(&args, layout)?;
    let info = device::preflight(&req)?;
    let bar = progress_bar();
    bar.set_message("p2p");
    let measured = device::p2p(&spec)?;
    bar.finish_and_clear();
    match measured {
        Some(measured) => emit_profile(
            &info,
            measured,
            args.output.out.as_deref(),
            args.output.json,
        ),
        None => Ok(()),
    }
}

fn hbm(args: HbmArgs) -> anyhow::Result<()> {
    let spec = HbmSpec {
        gpu: args.gpu,
        sizes: list("--sizes", &args.sizes, 4, 64 << 30)?,
        timing: args.timing.timing()?,
    };
    if spec.sizes.iter().any(|s| s % 4 != 0) {
        anyhow::bail!(ProbeError::setting(
            "--sizes",
            "copy sizes must be multiples of 4 bytes"
        ));
    }
    single_gpu(args.gpu, false, &args.output, |_| device::hbm(&spec))
}

fn default_grid_active(experts: usize, top_k: usize) -> Vec<u64> {
    let mut grid: Vec<u64> = sweep::geometric(1, experts as u64);
    for extra in [top_k, experts * 3 / 8, experts * 3 / 4, experts] {
        grid.push(extra.clamp(1, experts) as u64);
    }
    grid.sort_unstable();
    grid.dedup();
    grid
}

fn moe_spec(args: &MoeArgs, gpu: usize) -> anyhow::Result<MoeSpec> {
    let model = args.model.shape()?;
    let grid_active = match &args.grid_active {
        Some(text) => list("--grid-active", text, 1, model.n_routed_experts as u64)?,
        None => default_grid_active(model.n_routed_experts, model.experts_per_token),
    };
    Ok(MoeSpec {
        gpu,
        tokens: list("--tokens", &args.tokens, 1, 65_536)?,
        routings: args.routing.clone(),
        seed: args.seed,
        grid_active: if args.no_grid {
            Vec::new()
        } else {
            grid_active
        },
        grid_tokens_per_expert: list(
            "--grid-tokens-per-expert",
            &args.grid_tokens_per_expert,
            1,
            65_536,
        )?,
        parts: !args.no_parts,
        layers: args.layers,
        gemm_paths: args.gemm_path.clone(),
        timing: args.timing.timing()?,
        model,
    })
}

fn moe(args: MoeArgs) -> anyhow::Result<()> {
    let spec = moe_spec(&args, args.gpu)?;
    single_gpu(args.gpu, true, &args.output, |report| {
        device::moe(&spec, report)
    })
}

/// Checks the machine for a single-GPU probe, runs it with a progress spinner and emits its profile.
fn single_gpu(
    gpu: usize,
    cublas: bool,
    output: &Output,
    probe: impl FnOnce(&dyn Fn(&str)) -> Result<Measured, ProbeError>,
) -> anyhow::Result<()> {
    let info = device::preflight(&Requirements {
        gpus: vec![gpu],
        cublas,
        nvrtc: true,
        ..Requirements::default()
    })?;
    let bar = progress_bar();
    let measured = probe(&|m| bar.set_message(m.to_owned()))?;
    bar.finish_and_clear();
    emit_profile(&info, measured, output.out.as_deref(), output.json)
}

fn attention_spec(args: &AttentionArgs, gpu: usize) -> anyhow::Result<AttentionSpec> {
    let model = args.model.shape()?;
    model.require_mla()?;
    let optional = |flag: &str, text: &str, min: u64| -> anyhow::Result<Vec<u64>> {
        if text.trim().is_empty() {
            Ok(Vec::new())
        } else {
            list(flag, text, min, 1 << 20)
        }
    };
    Ok(AttentionSpec {
        gpu,
        tokens: list("--tokens", &args.tokens, 1, 65_536)?,
        batches: list("--batch", &args.batch, 1, 65_536)?,
        contexts: list("--context", &args.context, 1, 1 << 20)?,
        prefill_tokens: optional("--prefill-tokens", &args.prefill_tokens, 1)?,
        prefill_contexts: optional("--prefill-context", &args.prefill_context, 0)?,
        timing: args.timing.timing()?,
        model,
    })
}

fn attention(args: AttentionArgs) -> anyhow::Result<()> {
    let spec = attention_spec(&args, args.gpu)?;
    single_gpu(args.gpu, true, &args.output, |report| {
        device::attention(&spec, report)
    })
}

fn launch(args: LaunchArgs) -> anyhow::Result<()> {
    let spec = LaunchSpec {
        gpu: args.gpu,
        kernels: list("--kernels", &args.kernels, 1, 100_000)?,
        timing: args.timing.timing()?,
    };
    single_gpu(args.gpu, false, &args.output, |_| device::launch(&spec))
}

fn calibrate(args: CalibrateArgs) -> anyhow::Result<()> {
    let (layout, mut req) = layout(&args.gpus, 2)?;
    req.nccl = true;
    req.cublas = true;
    req.nvrtc = true;
    let model = args.model.shape()?;
    model.require_mla()?;
    let timing = args.timing.timing()?;
    let quick = args.quick;
    let pick = |full: &str, small: &str| {
        if quick {
            small.to_owned()
        } else {
            full.to_owned()
        }
    };
    let p2p = p2p_spec(
        &P2pArgs {
            sizes: pick("8:1G", "8:1M"),
            modes: vec![
                Mode::OneWay,
                Mode::PingPong,
                Mode::Bidirectional,
                Mode::FanIn,
            ],
            collectives: vec![CollectiveArg::AllReduce, CollectiveArg::AllToAll],
            collective_sizes: pick("8:256M", "8:1M"),
            handoff_work: "4K".to_owned(),
            graph: Switch::Both,
            gpus: args.gpus.clone(),
            warmup: 5,
            iters: if quick { 5 } else { 50 },
            output: Output {
                out: None,
                json: false,
            },
        },
        layout.clone(),
    )?;
    let timing_args = TimingArgs {
        warmup: timing.warmup,
        iters: if quick { 5 } else { timing.iters },
        min_replay_us: timing.min_replay_us,
    };
    let attention = attention_spec(
        &AttentionArgs {
            model: args.model.clone(),
            gpu: 0,
            tokens: pick("1:512", "1,64"),
            batch: pick("1:512", "1,16"),
            context: pick("512:8192", "512,2048"),
            prefill_tokens: pick("64,256,1024,4096", "64"),
            prefill_context: pick("0,1024,4096", "0"),
            timing: timing_args.clone(),
            output: Output {
                out: None,
                json: false,
            },
        },
        0,
    )?;
    let moe = moe_spec(
        &MoeArgs {
            model: args.model.clone(),
            gpu: 1,
            tokens: pick("1:4096", "1,64"),
            routing: vec![Routing::Uniform, Routing::PowerLaw { alpha: 1.2 }],
            seed: 1,
            grid_active: if quick { Some("1,64".to_owned()) } else { None },
            grid_tokens_per_expert: pick("1:4096", "1,64"),
            no_grid: false,
            no_parts: false,
            layers: if quick { Some(4) } else { None },
            gemm_path: vec![PathSet::Auto],
            timing: timing_args.clone(),
            output: Output {
                out: None,
                json: false,
            },
        },
        1,
    )?;
    let spec = CalibrateSpec {
        layout: layout.clone(),
        p2p,
        attention,
        moe,
        hbm: HbmSpec {
            gpu: 0,
            sizes: list("hbm sizes", &pick("16M:4G", "16M:64M"), 4, 64 << 30)?,
            timing: Timing {
                iters: timing_args.iters,
                ..timing
            },
        },
        launch: LaunchSpec {
            gpu: 0,
            kernels: list("launch kernels", &pick("1:1024", "1:16"), 1, 100_000)?,
            timing: Timing {
                iters: timing_args.iters,
                ..timing
            },
        },
    };
    let info = device::preflight(&req)?;
    let bar = progress_bar();
    let report: Arc<dyn Fn(&str) + Send + Sync> = {
        let bar = bar.clone();
        Arc::new(move |m: &str| bar.set_message(m.to_owned()))
    };
    let measured = calibrate::run(&spec, report)?;
    bar.finish_and_clear();
    let Some(mut measured) = measured else {
        return Ok(());
    };
    measured
        .notes
        .insert("model".to_owned(), format!("{:?}", spec.attention.model));
    measured.notes.insert(
        "layout".to_owned(),
        format!("{} ranks as {}", layout.world_size(), layout.name()),
    );
    if quick {
        measured.notes.insert(
            "quick".to_owned(),
            "small grids and few iterations: a smoke test".to_owned(),
        );
    }
    emit_profile(&info, measured, Some(&args.out), args.json)
}

fn pipeline(args: PipelineArgs) -> anyhow::Result<()> {
    let (layout, mut req) = layout(&args.gpus, 2)?;
    if layout.world_size() != 2 {
        anyhow::bail!(ProbeError::setting(
            "--gpus",
            format!(
                "the pipeline needs exactly 2 ranks (Attention, FFN), got {}",
                layout.world_size()
            )
        ));
    }
    req.nccl = true;
    req.cublas = true;
    req.nvrtc = true;
    let model = args.model.shape()?;
    let mla = model.require_mla()?;
    if args.steps == 0 || args.steps > 100_000 {
        anyhow::bail!(ProbeError::setting("--steps", "must be in 1..=100000"));
    }
    let spec = PipelineSpec {
        layout: layout.clone(),
        tokens: list("--tokens", &args.tokens, 1, 8192)?,
        contexts: list("--contexts", &args.contexts, 1, 1 << 20)?,
        dbo_modes: args.dbo.modes(),
        graph_modes: args.graph.modes(),
        steps: args.steps,
        warmup_steps: args.warmup_steps,
        routing: args.routing,
        seed: args.seed,
        step_timeout_s: args.step_timeout_s.max(1),
        model: model.clone(),
    };
    let info = device::preflight(&req)?;
    let bar = progress_bar();
    let report: Arc<dyn Fn(&str) + Send + Sync> = {
        let bar = bar.clone();
        Arc::new(move |m: &str| bar.set_message(m.to_owned()))
    };
    let outcome = device::pipeline(&spec, report)?;
    bar.finish_and_clear();
    let Some(outcome) = outcome else {
        return Ok(());
    };
    if !is_root(&layout) {
        return Ok(());
    }
    let notes = [
        ("mla_kernel".to_owned(), outcome.mla_kernel.clone()),
        ("ffn_check".to_owned(), format!("worst token-0 error of the FFN vs CPU: {:.2e}", outcome.worst_ffn_check)),
        ("expert_gemm".to_owned(), format!("FFN rank's routed-expert GEMMs (each stage shape runs the fastest correct candidate, timed when first met): {}", outcome.expert_gemm)),
        ("steps".to_owned(), format!("{} warm-up steps, then {} timed steps per configuration; graph variants add 2 untimed replays after capture", spec.warmup_steps, spec.steps)),
    ]
    .into_iter()
    .collect();
    let mut results = PipelineResults::new(
        assemble::provenance(&info, command_line(), started(), std::env::vars(), notes),
        PipelineModel {
            name: model.name.clone(),
            hidden_size: model.hidden_size as u32,
            num_layers: model.num_layers as u32,
            dense_layers: model.dense_layers as u32,
            n_routed_experts: model.n_routed_experts as u32,
            experts_per_token: model.experts_per_token as u32,
            moe_intermediate_size: model.moe_intermediate_size as u32,
            dense_intermediate_size: model.dense_intermediate_size as u32,
            shared_intermediate_size: model.shared_intermediate_size as u32,
            num_heads: model.num_heads as u32,
            kv_lora_rank: mla.kv_lora_rank as u32,
            qk_nope_head_dim: mla.qk_nope_head_dim as u32,
            qk_rope_head_dim: mla.qk_rope_head_dim as u32,
            v_head_dim: mla.v_head_dim as u32,
        },
        PipelineSetup {
            attention_gpu: args.gpus.first().copied().unwrap_or(0) as u32,
            ffn_gpu: args.gpus.get(1).copied().unwrap_or(1) as u32,
            ranks_layout: layout.name().to_owned(),
            routing: spec.routing.to_string(),
            seed: spec.seed,
            warmup_steps: spec.warmup_steps as u32,
            timing: "CUDA events on the Attention rank's stream, from before the control message to after the last layer's receive; the host synchronises after every step on both ranks".to_owned(),
        },
    );
    results.records = outcome.records;
    results
        .check()
        .context("the measured results do not pass their own format check")?;
    let text = results.to_json();
    assemble::write_atomic(&args.out, &text)
        .with_context(|| format!("writing {}", args.out.display()))?;
    if args.json {
        print!("{text}");
    } else {
        print_header(&info);
        print!("{}", render::pipeline(&results.records));
        println!("wrote {}", args.out.display());
    }
    Ok(())
}
