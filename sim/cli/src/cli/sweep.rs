//! `afd-sim sweep` and `afd-sim sweep-merge`: search the deployments of a GPU budget by simulating
//! each in full, print the best candidates and the Pareto frontiers, write one CSV row per
//! candidate and draw the frontiers as SVG.
//!
//! Everything that decides a row is in the library (`afd_sim::planner`); this module reads flags
//! and files, runs the plan on a rayon pool with a progress bar, and writes the outputs atomically
//! (CSV, SVG) after the whole sweep has run, so a failed run leaves no partial file.

mod svg;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use clap::Args;

use afd_sim::engine::RunOptions;
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel};
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::link::Link;
use afd_sim::planner::candidate::Context as PlanContext;
use afd_sim::planner::capacity::{CapacityBy, CapacitySearch};
use afd_sim::planner::evaluate::{CrossNodeLink, Inputs, WORKLOAD_BOUND, filling_prompts};
use afd_sim::planner::frontier::{Latency, Slo, SloStat, finalize, latency_ms, summary};
use afd_sim::planner::space::{Budget, Dimensions};
use afd_sim::planner::{Plan, Shard, merge, plan, reuse_groups, run_counted};
use afd_sim::rng::Seed;
use afd_sim::time::{SimDuration, SimTime};
use afd_sim::topology::RuleSet;
use afd_traces::sweep::{SweepRow, SweepSummary, read_sweep_csv, write_sweep_csv};

use crate::cli::inputs::{
    HardwareArgs, Progress, WorkloadArgs, parse_link_flag, parse_routing, read_model,
};
use crate::cli::output::{check_outputs, emit, table, write_all_atomically};
use crate::cli::parse_rule_set;
use crate::cli::profiles::load_profile;

const AFTER_HELP: &str = "\
Examples:
  afd-sim sweep --gpus 16 --tpot-slo 50 --ttft-slo 2000 --out capacity.csv --svg frontier.svg
  afd-sim sweep --gpus 16 --tpot-slo 50 --capacity-by concurrency --out streams.csv
  afd-sim sweep --gpus 16 --tpot-slo 50 --request-rate 5 --out fixed-rate.csv
  afd-sim sweep --gpus 16 --request-rate inf --max-concurrency 512 --out saturated.csv
  afd-sim sweep --gpus 8 --min-gpus 4 --dimensions 'dbo=off,2' --dimensions 'capture=auto' --out r.csv
  afd-sim sweep --gpus 16 --dimensions 'split=12:4,8:8;attention-tp=1' --json --out r.csv
  afd-sim sweep --gpus 16 --dry-run                      # enumerate and judge only
  # A job array of 8 (Slurm: --array=1-8; Kubernetes indexed job: JOB_COMPLETION_INDEX + 1):
  afd-sim sweep --gpus 16 --shard $SLURM_ARRAY_TASK_ID/8 --out shard-$SLURM_ARRAY_TASK_ID.csv
  afd-sim sweep-merge shard-*.csv --out results.csv --svg frontier.svg

Dimensions (NAME=V1,V2,...; several per flag with ';'; defaults in brackets):
  split                   A:F splits, or all          [every A >= F >= 1 with A+F in the budget]
  attention-tp, ffn-tp    TP sizes; DP fills the role  [1,2,4,8]
  expert-parallel         on,off for the FFN role      [on,off]
  dbo                     off or a decode threshold    [off,2,32]
  dbo-prefill             prefill thresholds           [512]
  capture                 eager, auto, max:N, N:N:...  [eager,auto,64]
  max-num-seqs                                         [32,64,128]
  max-num-batched-tokens                               [512,2048,8192]
  baseline                on or off                    [on]
  nics                    NICs per host, with --link   [the link's own]
The baseline is the same model served by vLLM DP x TP with expert parallelism on the same GPUs.
With --link, an AFD candidate whose Attention and FFN ranks sit on different nodes hands off over
that network; `nics=1,2,4` runs each such candidate once per NIC count (the CSV's nics column),
so the frontier says how many NICs per host a split needs.

An objective (--tpot-slo, --ttft-slo) with no load searches each candidate's capacity: the highest
request rate (or, with --capacity-by concurrency, streams) at which the objective holds, to 5 %;
rows hold the run at that capacity and its goodput (by rate: the capacity in steady state, with
the run's output tokens per request), and rank by it (docs/planner.md). A row whose --num-prompts
are fewer than twice its request slots (engines x max-num-seqs) warns capacity.workload-bound: the
prompts, not the deployment, bounded it; the summary names the count that fills every candidate.
Give --request-rate or --max-concurrency to run every candidate once at that load instead.

Every point is judged by the deployment rules (as `afd-sim check` does) before it runs; each legal
candidate is simulated in full (every request, every layer). The CSV has one row per candidate:
the deployment and its vllm serve command lines, every predict metric, the SLO verdict, the rank
and frontier flags, and the closed-form cross-checks. The same inputs give the same bytes whatever
--threads; the shards of a sweep merge into exactly the file a single run writes.

Candidates that differ only in --max-num-seqs / --max-num-batched-tokens values that never decide
anything in a run (every comparison against them comes out the same) run identically, event for
event: such a candidate takes the rows of the identical run instead of simulating again. This is
proven per run, never approximated; the CSV is the same bytes with --no-reuse.";

/// Search the deployments of a GPU budget and report the Pareto frontier.
#[derive(Args, Debug, Clone)]
#[command(after_help = AFTER_HELP)]
pub(crate) struct SweepArgs {
    /// GPUs in the budget (every candidate uses this many unless --min-gpus is lower).
    #[arg(long, help_heading = "Budget")]
    pub(crate) gpus: u32,
    /// Fewest GPUs a candidate may use.
    #[arg(long, help_heading = "Budget")]
    pub(crate) min_gpus: Option<u32>,
    /// GPUs per node; TP groups never straddle nodes.
    #[arg(long, default_value_t = 8, help_heading = "Budget")]
    pub(crate) gpus_per_node: u32,
    /// The network between nodes, `attention-ffn=KIND[,gbps=..,latency-us=..,chunk-kib=..,efficiency=..,nics=..]`
    /// (as `predict --link`): candidates whose Attention and FFN ranks sit on different nodes hand
    /// off over it; without it they are priced over the GPUs' own link.
    #[arg(long, value_name = "PATH=LINK", help_heading = "Budget")]
    pub(crate) link: Option<String>,
    /// Values of one or more dimensions, NAME=V1,V2 (repeatable; see below).
    #[arg(
        long = "dimensions",
        value_name = "NAME=VALUES",
        help_heading = "Budget"
    )]
    pub(crate) dimensions: Vec<String>,
    /// Plugin rule set the candidates must satisfy.
    #[arg(long, default_value = "latest", value_parser = parse_rule_set, help_heading = "Budget")]
    pub(crate) rules: RuleSet,

    #[command(flatten)]
    pub(crate) hardware: HardwareArgs,
    #[command(flatten)]
    pub(crate) workload: WorkloadArgs,

    /// TTFT objective in milliseconds (on the --slo-stat statistic).
    #[arg(long, value_name = "MS", help_heading = "Objective")]
    pub(crate) ttft_slo: Option<f64>,
    /// TPOT objective in milliseconds (on the --slo-stat statistic).
    #[arg(long, value_name = "MS", help_heading = "Objective")]
    pub(crate) tpot_slo: Option<f64>,
    /// Statistic the objectives and frontiers use: mean, median or p99.
    #[arg(long, default_value = "p99", help_heading = "Objective")]
    pub(crate) slo_stat: String,
    /// Search each candidate's capacity under the objectives: the highest request rate (`rate`,
    /// Poisson or --burstiness arrivals) or concurrency (`concurrency`, everything sent at once)
    /// at which they hold. Default: `rate` when an objective is given and neither --request-rate
    /// nor --max-concurrency is; otherwise each candidate runs once at the given load.
    #[arg(long, value_name = "rate|concurrency", help_heading = "Objective")]
    pub(crate) capacity_by: Option<String>,

    /// Seed of every random draw of every candidate's run (the same seed gives the same rows).
    #[arg(long, default_value_t = 0, help_heading = "Run and output")]
    pub(crate) seed: u64,
    /// Run only shard K of N (1 <= K <= N): candidates i with i % N == K - 1.
    #[arg(long, value_name = "K/N", help_heading = "Run and output")]
    pub(crate) shard: Option<String>,
    /// Worker threads (default: every core).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) threads: Option<usize>,
    /// Write one CSV row per candidate here (required unless --dry-run).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) out: Option<PathBuf>,
    /// Draw the frontiers (tokens/s per GPU vs TPOT and vs TTFT) as SVG here.
    #[arg(long, help_heading = "Run and output")]
    pub(crate) svg: Option<PathBuf>,
    /// Print the summary as JSON instead of tables.
    #[arg(long, help_heading = "Run and output")]
    pub(crate) json: bool,
    /// Candidates listed in the ranking.
    #[arg(long, default_value_t = 10, help_heading = "Run and output")]
    pub(crate) top: usize,
    /// Enumerate and judge the candidates, print the counts, simulate nothing.
    #[arg(long, help_heading = "Run and output")]
    pub(crate) dry_run: bool,
    /// Simulate every candidate, even those proven to run identically to one already simulated
    /// (the output is the same bytes; only slower).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) no_reuse: bool,
    /// Stop each simulation after this many events (reported as outcome event_limit).
    #[arg(long, default_value_t = 100_000_000, help_heading = "Run and output")]
    pub(crate) max_events: u64,
    /// Stop each simulation at this much simulated time, seconds (outcome horizon).
    #[arg(long, default_value_t = 86_400.0, help_heading = "Run and output")]
    pub(crate) horizon: f64,
    /// Price every candidate from kernels alone, without real vLLM's engine. By default each is
    /// priced as real vLLM runs it where the GPU's built-in engine profile measured the model
    /// (DeepSeek-V2-Lite on H200), as `predict --warm-kernels` prices it: a server of trained
    /// weights past its first fused-MoE compiles, its front end and asynchronous scheduling, a
    /// plain server's steps at the engine's periods, an AFD pair's host issue at vLLM's pace.
    #[arg(long, help_heading = "Costs")]
    pub(crate) kernel_model: bool,
}

/// Real vLLM's engine every candidate is priced with (`Inputs::engine`): the GPU's built-in engine
/// profile where it measured the model, unless `--kernel-model`; `None` otherwise, said on stderr.
fn sweep_engine(
    kernel_model: bool,
    model: &ModelArch,
    gpu: GpuKind,
) -> Option<std::sync::Arc<afd_sim::model::engine::EngineModel>> {
    if kernel_model {
        return None;
    }
    let engine = afd_sim::vllm_compare::builtin_engine(model, gpu);
    if engine.is_none() {
        eprintln!(
            "note: no built-in engine profile measured {} on {}: every candidate is priced from kernels alone",
            model.name,
            gpu.as_str()
        );
    }
    engine
}

/// The most worker threads `--threads` takes (each holds a simulation; more only thrash).
const MAX_THREADS: usize = 256;

const MERGE_AFTER_HELP: &str = "\
Examples:
  afd-sim sweep-merge shard-1.csv shard-2.csv shard-3.csv --out results.csv
  afd-sim sweep-merge shard-*.csv --out results.csv --svg frontier.svg --json

The shards must come from one sweep (same inputs, same --shard N) and together hold every
candidate exactly once; the merged file is byte for byte what a single run writes.";

/// Join the shard CSVs of one sweep into the result a single run gives.
#[derive(Args, Debug, Clone)]
#[command(after_help = MERGE_AFTER_HELP)]
pub(crate) struct MergeArgs {
    /// Shard CSV files written by `afd-sim sweep --shard K/N`.
    #[arg(required = true)]
    pub(crate) shards: Vec<PathBuf>,
    /// Write the merged CSV here (the bytes a single run writes).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Draw the merged sweep's frontiers as SVG here.
    #[arg(long)]
    pub(crate) svg: Option<PathBuf>,
    /// Print the summary as JSON instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// Candidates listed in the ranking.
    #[arg(long, default_value_t = 10)]
    pub(crate) top: usize,
}

/// `sweep --json`: the summary every sweep file gives, and how this run obtained its rows.
#[derive(serde::Serialize)]
struct SweepReport<'a> {
    #[serde(flatten)]
    summary: &'a SweepSummary,
    runs: Runs,
}

/// Candidates simulated, and those that took the rows of a run proven identical.
#[derive(serde::Serialize)]
struct Runs {
    simulated: u64,
    reused: u64,
    /// Whether reuse was on (off with `--no-reuse`).
    reuse: bool,
}

/// Runs `afd-sim sweep`.
pub(crate) fn run(args: &SweepArgs) -> anyhow::Result<ExitCode> {
    let model = read_model(&args.hardware.model)?;
    let gpu = args.hardware.gpu()?;
    let popularity = parse_routing(&args.hardware.routing)?;
    // Every candidate prices from the same profiles; refuse bad ones before anything runs.
    let calibration = load_profile(&args.hardware.cost_source(), gpu, &model)?;
    if let Some(loaded) = &calibration {
        let layout = CostLayout {
            attention_tp: 1,
            ffn_dp: 1,
            ffn_tp: 1,
            expert_parallel: true,
        };
        CostModel::calibrated(&model, gpu, layout, &loaded.profile, &loaded.name)
            .with_context(|| format!("calibration profile {}", loaded.name))?;
    }
    let seed = Seed(args.seed);
    let capacity = capacity_search(args)?;
    let (workload, dataset) = match capacity {
        None => args.workload.workload(seed)?,
        Some(search) => base_workload(args, search.by, seed)?,
    };
    let budget = budget(args)?;
    let mut dimensions = Dimensions::default();
    for text in &args.dimensions {
        dimensions
            .assign(text)
            .with_context(|| format!("--dimensions {text:?}"))?;
    }
    if !dimensions.nics.is_empty() && args.link.is_none() {
        bail!(
            "--dimensions nics: NICs per host price hand-offs over a network between nodes; give --link attention-ffn=KIND as well"
        );
    }
    if let Some(splits) = &dimensions.splits {
        let outside: Vec<String> = splits
            .iter()
            .filter(|&&(a, f)| !(budget.min_gpus..=budget.gpus).contains(&(a + f)))
            .map(|&(a, f)| format!("{a}:{f} ({} GPUs)", a + f))
            .collect();
        if !outside.is_empty() {
            let range = if budget.min_gpus == budget.gpus {
                format!("{} GPUs", budget.gpus)
            } else {
                format!("{} to {} GPUs", budget.min_gpus, budget.gpus)
            };
            bail!(
                "--dimensions split: {} outside the budget of {range} (--gpus, --min-gpus); such a split would drop out silently",
                outside.join(", ")
            );
        }
    }
    let stat = SloStat::parse(&args.slo_stat).with_context(|| {
        format!(
            "--slo-stat must be mean, median or p99, got {:?}",
            args.slo_stat
        )
    })?;
    for (flag, value) in [("--ttft-slo", args.ttft_slo), ("--tpot-slo", args.tpot_slo)] {
        if let Some(ms) = value
            && !(ms.is_finite() && ms > 0.0)
        {
            bail!("{flag} must be a positive number of milliseconds, got {ms}");
        }
    }
    let slo = Slo {
        ttft_ms: args.ttft_slo,
        tpot_ms: args.tpot_slo,
        stat,
    };
    let shard = match &args.shard {
        None => Shard::WHOLE,
        Some(text) => Shard::parse(text)?,
    };
    if !(args.horizon.is_finite() && args.horizon > 0.0) {
        bail!(
            "--horizon must be a positive number of seconds, got {}",
            args.horizon
        );
    }
    if let Some(threads) = args.threads
        && !(1..=MAX_THREADS).contains(&threads)
    {
        bail!("--threads {threads}: expected 1 to {MAX_THREADS} worker threads");
    }
    let mut options = RunOptions::new(seed);
    options.max_events = args.max_events;
    options.horizon = SimTime::ZERO + SimDuration::from_secs_f64(args.horizon);
    options.model.popularity = popularity;

    let context = PlanContext {
        model: &model,
        model_path: &args.hardware.model,
        gpu,
        rules: args.rules,
        budget,
    };
    let plan = plan(&dimensions, &context);
    let cross_node_link = match &args.link {
        None => None,
        Some(text) => {
            let spec = parse_link_flag(text)?;
            let sheets = afd_traces::hardware::builtin_datasheets();
            Some(CrossNodeLink {
                link: Link::from_spec(&spec, &sheets).with_context(|| format!("--link {text}"))?,
                gpus_per_node: budget.gpus_per_node,
            })
        }
    };
    let inputs = Inputs {
        model: &model,
        calibration: calibration
            .as_ref()
            .map(|loaded| (&loaded.profile, loaded.name.as_str())),
        workload: &workload,
        dataset: &dataset,
        options,
        slo,
        cross_node_link,
        loads: Default::default(),
        capacity,
        engine: sweep_engine(args.kernel_model, &model, gpu),
    };
    let mut header = describe(&plan, &context, &inputs, shard);
    if args.dry_run {
        let chosen: Vec<u64> = (0..plan.candidates.len() as u64)
            .filter(|&i| shard.contains(i))
            .collect();
        let groups = reuse_groups(&plan, &chosen).len();
        let _ = writeln!(
            header,
            "Reuse: {} candidates in {groups} groups equal but for their scheduler limits; at least {groups} simulations, the rest reused where a run proves them identical",
            chosen.len()
        );
        emit(&header)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(out) = &args.out else {
        bail!("--out FILE is required (or --dry-run to only count the candidates)");
    };
    check_outputs(&[("--out", Some(out)), ("--svg", args.svg.as_deref())])?;
    if plan.candidates.is_empty() {
        bail!("no legal candidate in this space:\n{header}");
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let chosen = (0..plan.candidates.len() as u64)
        .filter(|&i| shard.contains(i))
        .count() as u64;
    let progress = Progress::new(chosen, "candidates");
    let finished = AtomicU64::new(0);
    let started = WallClock::start();
    let swept = run_counted(&plan, &inputs, shard, threads, !args.no_reuse, &|| {
        let done = finished.fetch_add(1, Ordering::Relaxed) + 1;
        progress.update(done);
    });
    progress.finish();
    let wall = started.seconds();
    let rows = swept.rows;
    eprintln!(
        "evaluated {} candidates in {wall:.2} s on {threads} thread(s) ({:.0} candidates/s)",
        rows.len(),
        rows.len() as f64 / wall.max(1e-9)
    );
    let _ = writeln!(
        header,
        "Runs: {} simulated, {} reused an identical run{}",
        swept.simulated,
        swept.reused,
        if args.no_reuse { " (--no-reuse)" } else { "" }
    );
    // A shard's rows carry no rank or frontier (only the whole sweep decides them); the tables and
    // the figure rank the shard's own candidates.
    let mut shown = rows.clone();
    if shard.count > 1 {
        finalize(&mut shown);
    }
    write_outputs(
        &rows,
        &shown,
        out,
        args.svg.as_ref(),
        shard.count == 1,
        &header_title(&context, &inputs),
    )?;
    let rows = shown;
    let summary = summary(&rows, args.top);
    if args.json {
        let report = SweepReport {
            summary: &summary,
            runs: Runs {
                simulated: swept.simulated,
                reused: swept.reused,
                reuse: !args.no_reuse,
            },
        };
        let mut text = serde_json::to_string_pretty(&report).context("writing the summary")?;
        text.push('\n');
        emit(&text)?;
    } else {
        if shard.count > 1 {
            let _ = writeln!(
                header,
                "Shard {}/{}: ranks and frontiers below are within this shard; sweep-merge the shards for the sweep's.",
                shard.index, shard.count
            );
        }
        emit(&(header + "\n" + &render(&rows, &summary)))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The capacity search the flags ask for: `--capacity-by`, or by rate when an objective is given
/// and the load is not; `None` runs each candidate once at the given load.
fn capacity_search(args: &SweepArgs) -> anyhow::Result<Option<CapacitySearch>> {
    let objective = args.ttft_slo.is_some() || args.tpot_slo.is_some();
    let w = &args.workload;
    let by = match &args.capacity_by {
        Some(text) => CapacityBy::parse(text)
            .with_context(|| format!("--capacity-by must be rate or concurrency, got {text:?}"))?,
        None if objective
            && w.request_rate.is_none()
            && w.ramp_up().is_none()
            && w.max_concurrency.is_none() =>
        {
            CapacityBy::Rate
        }
        None => return Ok(None),
    };
    if w.ramp_up().is_some() {
        bail!(
            "--ramp-up-strategy with --capacity-by {}: a capacity search sets the load itself; drop the ramp, or --capacity-by",
            by.as_str()
        );
    }
    if !objective {
        bail!(
            "--capacity-by {}: a capacity is the highest load that meets an objective; give --tpot-slo and/or --ttft-slo",
            by.as_str()
        );
    }
    let (flag, given) = match by {
        CapacityBy::Rate => ("--request-rate", &w.request_rate),
        CapacityBy::Concurrency => ("--max-concurrency", &w.max_concurrency),
    };
    if let Some(value) = given {
        bail!(
            "{flag} {value}: --capacity-by {} searches that load itself; leave {flag} out, or drop --capacity-by to run at {value}",
            by.as_str()
        );
    }
    Ok(Some(CapacitySearch::new(by)))
}

/// The workload a capacity search rescales: the flags' requests sent at 1 request/s (by rate; the
/// search rescales their send times) or all at once (by concurrency; the search sets the
/// streams), with no concurrency limit unless one was given for a rate search.
fn base_workload(
    args: &SweepArgs,
    by: CapacityBy,
    seed: Seed,
) -> anyhow::Result<(afd_sim::model::workload::Workload, String)> {
    let mut flags = args.workload.clone();
    match by {
        CapacityBy::Rate => {
            flags.request_rate = Some("1".to_owned());
            flags.max_concurrency = Some(
                flags
                    .max_concurrency
                    .clone()
                    .unwrap_or_else(|| "none".to_owned()),
            );
        }
        CapacityBy::Concurrency => {
            flags.request_rate = Some("inf".to_owned());
            flags.max_concurrency = Some("none".to_owned());
        }
    }
    let (workload, dataset) = flags.workload(seed)?;
    if by == CapacityBy::Rate && workload.request_rate.is_none() {
        bail!(
            "--capacity-by rate: the trace's own arrivals have no rate to scale; give --capacity-by concurrency, or a trace without timestamps"
        );
    }
    Ok((workload, dataset))
}

/// Runs `afd-sim sweep-merge`.
pub(crate) fn merge_shards(args: &MergeArgs) -> anyhow::Result<ExitCode> {
    check_outputs(&[("--out", Some(&args.out)), ("--svg", args.svg.as_deref())])?;
    let mut files = Vec::new();
    for path in &args.shards {
        let name = path.display().to_string();
        let text = afd_traces::input::read_text(path, afd_traces::input::InputKind::SWEEP_SHARD)?;
        let rows = read_sweep_csv(&text, &name)?;
        files.push((name, rows));
    }
    let rows = merge(files)?;
    write_outputs(&rows, &rows, &args.out, args.svg.as_ref(), true, "")?;
    let summary = summary(&rows, args.top);
    if args.json {
        emit(&summary.to_json())?;
    } else {
        let header = format!(
            "Sweep {}: {} candidates merged from {} file(s)\n",
            summary.sweep,
            rows.len(),
            args.shards.len()
        );
        emit(&(header + "\n" + &render(&rows, &summary)))?;
    }
    Ok(ExitCode::SUCCESS)
}

fn budget(args: &SweepArgs) -> anyhow::Result<Budget> {
    if args.gpus < 2 {
        bail!(
            "--gpus must be at least 2 (one Attention and one FFN GPU), got {}",
            args.gpus
        );
    }
    if args.gpus > 4096 {
        bail!(
            "--gpus {} is more than this planner enumerates (4096)",
            args.gpus
        );
    }
    if args.gpus_per_node == 0 {
        bail!("--gpus-per-node must be at least 1");
    }
    let min_gpus = args.min_gpus.unwrap_or(args.gpus);
    if !(1..=args.gpus).contains(&min_gpus) {
        bail!(
            "--min-gpus must be between 1 and --gpus {}, got {min_gpus}",
            args.gpus
        );
    }
    Ok(Budget {
        gpus: args.gpus,
        min_gpus,
        gpus_per_node: args.gpus_per_node,
    })
}

/// Wall time of the run, for the report on stderr (never in an output file).
struct WallClock(std::time::Instant);

impl WallClock {
    #[expect(
        clippy::disallowed_methods,
        reason = "the CLI reports how long the sweep took; the simulation never reads wall time"
    )]
    fn start() -> WallClock {
        WallClock(std::time::Instant::now())
    }

    fn seconds(&self) -> f64 {
        self.0.elapsed().as_secs_f64()
    }
}

fn header_title(context: &PlanContext<'_>, inputs: &Inputs<'_>) -> String {
    format!(
        "{} x {}, {} ({} requests)",
        context.budget.gpus,
        context.gpu.as_str().to_uppercase(),
        inputs.model.name,
        inputs.workload.requests.len()
    )
}

/// What is searched: budget, model, costs, workload, and how many points the rules refused.
fn describe(plan: &Plan, context: &PlanContext<'_>, inputs: &Inputs<'_>, shard: Shard) -> String {
    let mut out = String::new();
    let budget = context.budget;
    let gpus = if budget.min_gpus == budget.gpus {
        budget.gpus.to_string()
    } else {
        format!("{}-{}", budget.min_gpus, budget.gpus)
    };
    let costs = inputs
        .calibration
        .map_or_else(|| "datasheet roofline".to_owned(), |(_, n)| n.to_owned());
    let w = inputs.workload;
    let rate = w
        .request_rate
        .map_or_else(|| "inf".to_owned(), |r| format!("{r}"));
    let concurrency = w
        .max_concurrency
        .map_or_else(|| "none".to_owned(), |c| c.to_string());
    let _ = writeln!(
        out,
        "Sweep: {gpus} x {} ({} per node), {} priced by {costs}, rules {}",
        context.gpu.as_str().to_uppercase(),
        budget.gpus_per_node,
        inputs.model.name,
        context.rules.as_str()
    );
    match inputs.capacity {
        None => {
            let _ = writeln!(
                out,
                "Workload: {} requests ({}), request rate {rate}/s, concurrency {concurrency}, seed {}",
                w.requests.len(),
                inputs.dataset,
                inputs.options.seed.0
            );
        }
        Some(search) => {
            let load = match search.by {
                CapacityBy::Rate => format!(
                    "the highest request rate (burstiness {}, concurrency {concurrency})",
                    w.burstiness
                ),
                CapacityBy::Concurrency => "the highest concurrency (all sent at once)".to_owned(),
            };
            let _ = writeln!(
                out,
                "Workload: {} requests ({}), seed {}; capacity: {load} that meets the objective, to {:.0} %",
                w.requests.len(),
                inputs.dataset,
                inputs.options.seed.0,
                (search.step - 1.0) * 100.0
            );
        }
    }
    let colocated = plan
        .candidates
        .iter()
        .filter(|c| c.ffn_args.is_empty())
        .count();
    let _ = writeln!(
        out,
        "Candidates: {} legal ({} AFD, {colocated} colocated baseline) of {} enumerated",
        plan.candidates.len(),
        plan.candidates.len() - colocated,
        plan.enumerated
    );
    if plan.rejected_points > 0 {
        let rules: Vec<String> = plan
            .rejected
            .iter()
            .map(|(id, n)| format!("{id} {n}"))
            .collect();
        let _ = writeln!(
            out,
            "Refused by the rules: {} ({})",
            plan.rejected_points,
            rules.join(", ")
        );
    }
    if shard.count > 1 {
        let _ = writeln!(out, "Shard {}/{}", shard.index, shard.count);
    }
    out
}

/// Writes the CSV of `rows` (and the SVG of `shown`) atomically.
fn write_outputs(
    rows: &[SweepRow],
    shown: &[SweepRow],
    out: &std::path::Path,
    svg_path: Option<&PathBuf>,
    complete: bool,
    title: &str,
) -> anyhow::Result<()> {
    let bytes = write_sweep_csv(rows).context("formatting the sweep CSV")?;
    let drawing = match svg_path {
        Some(_) => Some(svg::draw(shown, complete, title)?),
        None => None,
    };
    let mut files: Vec<(&std::path::Path, &[u8])> = vec![(out, &bytes)];
    if let (Some(path), Some(drawing)) = (svg_path, &drawing) {
        files.push((path, drawing.as_bytes()));
    }
    write_all_atomically(&files)
}

fn fmt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// One candidate as a table row.
fn cells(row: &SweepRow) -> Vec<String> {
    let layout = |dp: u32, tp: u32| format!("DP{dp}xTP{tp}");
    let (split, ffn) = match (row.ffn_dp, row.ffn_tp) {
        (Some(dp), Some(tp)) => (
            format!("{}A{}F", row.attention_ranks, row.ffn_ranks),
            format!(
                "{}{}",
                layout(dp, tp),
                if row.expert_parallel { " EP" } else { "" }
            ),
        ),
        _ => (format!("{} GPUs", row.gpus), "EP (colocated)".to_owned()),
    };
    let dbo = row
        .dbo_decode_token_threshold
        .zip(row.dbo_prefill_token_threshold)
        .map_or_else(|| "off".to_owned(), |(d, p)| format!("{d}/{p}"));
    let graphs = if row.cudagraph_mode == "eager" {
        "eager".to_owned()
    } else {
        let sizes: Vec<&str> = row.cudagraph_capture_sizes.split(';').collect();
        match sizes.as_slice() {
            [one] => format!("[{one}]"),
            [first, .., last] => format!("{}x [{first}..{last}]", sizes.len()),
            [] => "graph".to_owned(),
        }
    };
    vec![
        row.rank.map_or_else(|| "-".to_owned(), |r| r.to_string()),
        row.candidate.to_string(),
        row.kind.clone(),
        split,
        layout(row.attention_dp, row.attention_tp),
        ffn,
        dbo,
        graphs,
        row.max_num_seqs.to_string(),
        row.max_num_batched_tokens.to_string(),
        fmt(row.output_tokens_per_s_per_gpu, 1),
        fmt(latency_ms(row, Latency::Tpot), 2),
        fmt(latency_ms(row, Latency::Ttft), 1),
        row.cross_check.clone().unwrap_or_else(|| "-".to_owned()),
    ]
}

fn header_cells(stat: &str) -> Vec<String> {
    [
        "rank",
        "#",
        "kind",
        "split",
        "attention",
        "ffn",
        "DBO",
        "graphs",
        "seqs",
        "tokens",
        "tok/s/GPU",
        &format!("{stat} TPOT ms"),
        &format!("{stat} TTFT ms"),
        "closed forms",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

/// The human summary: counts, the ranking, both frontiers, AFD vs the baseline, the ratio rule.
fn render(rows: &[SweepRow], summary: &SweepSummary) -> String {
    let mut out = String::new();
    let stat = summary.slo_stat.as_str();
    let failed = rows.iter().filter(|r| r.status != "ok").count();
    let slo = match (summary.ttft_slo_ms, summary.tpot_slo_ms) {
        (None, None) => "every request served".to_owned(),
        (ttft, tpot) => {
            let mut parts = Vec::new();
            if let Some(t) = ttft {
                parts.push(format!("{stat} TTFT <= {t} ms"));
            }
            if let Some(t) = tpot {
                parts.push(format!("{stat} TPOT <= {t} ms"));
            }
            parts.join(", ")
        }
    };
    let _ = writeln!(
        out,
        "Simulated {} ({} could not run); {} meet the objective ({slo}); closed forms off by > 15 %: {}",
        summary.simulated, failed, summary.passing, summary.disagreements
    );
    let bound = rows
        .iter()
        .filter(|r| r.warnings.split(';').any(|w| w == WORKLOAD_BOUND))
        .collect::<Vec<_>>();
    if let Some(most) = bound
        .iter()
        .map(|r| filling_prompts(r.attention_dp, r.max_num_seqs))
        .max()
    {
        let _ = writeln!(
            out,
            "{} of {} capacities are partly the workload's ({WORKLOAD_BOUND}): fewer prompts than \
             twice their engines' request slots; --num-prompts {most} fills every candidate twice",
            bound.len(),
            rows.len()
        );
    }
    let by_candidate = |c: u64| rows.iter().find(|r| r.candidate == c);
    // A capacity sweep's rows hold each candidate at its capacity.
    let capacity_by = rows
        .first()
        .map(|r| r.capacity_by.as_str())
        .filter(|by| !by.is_empty());
    let section = |out: &mut String, title: &str, list: Vec<&SweepRow>| {
        let _ = writeln!(out, "\n{title}");
        if list.is_empty() {
            let _ = writeln!(out, "  (none)");
            return;
        }
        let capacity_rows = list.clone();
        let mut table_rows = vec![header_cells(stat)];
        table_rows.extend(list.into_iter().map(cells));
        if let Some(by) = capacity_by {
            // The load each row's metrics were measured at: its capacity.
            let heading = match by {
                "rate" => "capacity req/s",
                _ => "capacity streams",
            };
            table_rows[0].insert(10, heading.to_owned());
            for (row, line) in capacity_rows.iter().zip(table_rows.iter_mut().skip(1)) {
                let value = row.capacity.map_or_else(
                    || "-".to_owned(),
                    |c| match by {
                        "rate" => format!("{c:.2}"),
                        _ => format!("{c:.0}"),
                    },
                );
                line.insert(10, value);
            }
        }
        out.push_str(&table(&table_rows));
    };
    section(
        &mut out,
        &format!(
            "Top {} by output tokens/s per GPU (meeting the objective{}):",
            summary.top.len(),
            if capacity_by.is_some() {
                ", at each candidate's capacity: its goodput"
            } else {
                ""
            }
        ),
        summary.top.iter().collect(),
    );
    section(
        &mut out,
        &format!("Pareto frontier, output tokens/s per GPU vs {stat} TPOT:"),
        summary
            .frontier_tpot
            .iter()
            .filter_map(|&c| by_candidate(c))
            .collect(),
    );
    section(
        &mut out,
        &format!("Pareto frontier, output tokens/s per GPU vs {stat} TTFT:"),
        summary
            .frontier_ttft
            .iter()
            .filter_map(|&c| by_candidate(c))
            .collect(),
    );
    let _ = writeln!(out);
    match (&summary.best_afd, &summary.best_colocated) {
        (Some(afd), Some(base)) => {
            let (a, b) = (
                afd.output_tokens_per_s_per_gpu.unwrap_or(0.0),
                base.output_tokens_per_s_per_gpu.unwrap_or(0.0),
            );
            let gain = if b > 0.0 { (a / b - 1.0) * 100.0 } else { 0.0 };
            let (ta, tb) = (
                latency_ms(afd, Latency::Tpot).unwrap_or(0.0),
                latency_ms(base, Latency::Tpot).unwrap_or(0.0),
            );
            // Within 1 % the throughputs tie (an arrival-bound workload serves the same tokens on
            // any deployment of the budget), and latency decides.
            let tied = b > 0.0 && (a / b - 1.0).abs() <= 0.01;
            let verdict = match (a > b, tied, ta < tb) {
                (_, true, true) => "AFD pays (throughput within 1 %, lower latency)",
                (_, true, false) => "AFD does not pay (throughput within 1 %, higher latency)",
                (true, false, _) => "AFD pays",
                (false, false, _) => "AFD does not pay",
            };
            let _ = writeln!(
                out,
                "{verdict}: best AFD #{} {a:.1} tok/s/GPU at {stat} TPOT {ta:.2} ms vs best colocated #{} {b:.1} tok/s/GPU at {tb:.2} ms ({gain:+.1} %)",
                afd.candidate, base.candidate
            );
        }
        (Some(afd), None) => {
            let _ = writeln!(
                out,
                "Best AFD #{} meets the objective; no colocated baseline does (or none was swept).",
                afd.candidate
            );
        }
        (None, Some(base)) => {
            let _ = writeln!(
                out,
                "AFD does not pay: no AFD candidate meets the objective; best colocated #{}.",
                base.candidate
            );
        }
        (None, None) => {
            let _ = writeln!(out, "No candidate meets the objective.");
        }
    }
    if let Some(afd) = &summary.best_afd
        && let (Some(r), Some(optimal), Some(regime)) =
            (afd.af_ratio, afd.af_ratio_optimal, afd.af_regime.as_ref())
    {
        let _ = writeln!(
            out,
            "A:F ratio: the best AFD split is {}A{}F (r = {r:.2}); the ratio rule of arXiv 2601.21351 on its costs gives r* = {optimal:.2} ({regime}-bound){}",
            afd.attention_ranks,
            afd.ffn_ranks,
            if (r / optimal - 1.0).abs() > 0.15 {
                ", more than 15 % apart"
            } else {
                ""
            }
        );
    }
    out
}

#[cfg(test)]
mod tests;
