//! `afd-sim engine-profile`, `compare` and `replay-vllm`: the simulator held against real vLLM.
//!
//! `engine-profile` derives the engine's step costs from the fixed-shape records of `afd-probe vllm`
//! runs; `compare` simulates the deployment and workload of one real `vllm bench serve` result and
//! prints real, predicted and error per metric; `replay-vllm` does that for every bench record of
//! every run file in a folder and checks the acceptance bars. This module reads and writes the files;
//! the library's `vllm_compare` and `model::engine` do the work.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use afd_sim::launch::Launch;
use afd_sim::model::arch::ModelArch;
use afd_sim::model::engine::{self, EngineModel};
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::profiles::default_cost_model;
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;
use afd_sim::vllm_compare::{self, MetricRow};
use afd_traces::vllm_run::{HostShare, VllmEngineProfile, VllmRun, builtin_engine_profile};

use crate::cli::check::{DeploymentArgs, checked, load};
use crate::cli::inputs::read_model;
use crate::cli::output::{emit, json_text, table, write_all_atomically};

/// Acceptance bars of issue "Real vLLM as the ground truth", checked by `replay-vllm --check`.
const MEDIAN_BAR: f64 = 0.10;
const WORST_BAR: f64 = 0.25;
const RATIO_BAR: f64 = 0.10;
/// The metrics the bars judge, per run.
const JUDGED: [&str; 3] = ["output_throughput", "mean_tpot_ms", "mean_ttft_ms"];

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim engine-profile traces/data/vllm/h200-dsv2l-*.json.xz --out engine.json
  afd-sim engine-profile traces/data/vllm/h200-dsv2l-*.json.xz \\
      --modules traces/data/vllm/modules/*.modules-*.json --out engine.json   # the shipped profile

Each run's mode comes from its serve words (--enforce-eager, or cudagraph_mode FULL_DECODE_ONLY or
FULL_AND_PIECEWISE, vLLM's default, under vLLM's compiled model; FULL as the MLA attention backend
the server logged resolves it); a run of another mode is refused by name. Per mode, pooled over every run of the mode: the median
inter-token time of each streamed uniform decode burst (prompts of at most 512 tokens, prefilled in
few steps) by batch size, replaced by the engine's own period where unstreamed bursts of that batch
are well faster, and by calibration `vllm bench serve` runs of that batch where the engine set their
pace (always in eager mode: its client shares the host), kept non-decreasing; what long contexts add
per context token; the period of a non-uniform step by its scheduled tokens, from requests injected
into standing decode bursts and from bursts with four or more such steps in their step log (under
FULL_AND_PIECEWISE the steps within the largest capture size make a piecewise table; in eager mode
an injected prefill's step is priced as what it added to the standing gap), each entry the median
over servers of each server's own; what a decode adds to such a step, from one prompt length
injected beside two batches of one server, each server's slope counted once. The front end's:
latency (the intercept of isolated prompts' first tokens against their chunk count), intake per
request (cached bursts), what text prompts add per token (cached text against cached token-id
bursts) and its serial cost per streamed token (graph calibration bench runs whose mean time per
output token is well above the engine's); and what `vllm bench serve`'s client spends opening a
connection (calibration bench runs of 64 or more prompts at once whose step lines are stamped: the
time until the burst's second request reached the engine, over the connections it opened). Each file is one server (a file name two files share
gives way to their paths). Bench runs that are not marked calibration are what the model is judged
by and are never read here. The profile records whether its runs served --load-format dummy (whose
decode tokens reach few experts; compare and predict --real-engine then price a server that loads
its weights with a trained router's experts); runs of dummy and loaded weights are not mixed in one
profile. Where a run's server log lies beside it (NAME.server.log[.xz|.gz], or server.log beside
run.json), its stamped steps price the first use of a fused-MoE kernel specialization: vLLM's Triton
JIT compile of the step's kernels, each first use in a warm-up or fixed-shape record against the
same server's steps of half to twice its tokens (jit_compile_ns; docs/fidelity.md). --modules adds
how an eager step's host time divides between the AFD roles (role_division), from a profiled eager
server's steps (gpu-probes/scripts/profile-modules.py; AFD pairs' steps without graphs take it).
Every figure's records are named in its mode's evidence. A term no run measured (a decode step's
context slope, the graph-less decode term, the pure-prefill ratio, the stream's cost per token) adds
nothing: stderr notes each one, what its absence means and the committed plan under
gpu-probes/plans/ whose workloads measure it.")]
pub(crate) struct EngineProfileArgs {
    /// Run files written by `afd-probe vllm`.
    #[arg(value_name = "RUN.json[.xz|.gz]", required = true)]
    runs: Vec<PathBuf>,
    /// Write the profile here (atomically); stdout when absent.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Model architecture the runs served (a shipped name or a Hugging Face config.json): its
    /// routed experts and experts per token decide which steps compile a fused-MoE kernel.
    #[arg(
        long,
        default_value = "deepseek-v2-lite",
        value_name = "NAME_OR_CONFIG"
    )]
    model: String,
    /// Module summaries of a profiled eager server's steps (`sim/scripts/module_shares.py --json`):
    /// per step size, the median share of the step outside the decoder layers and of the layers in
    /// their MLP and MoE blocks becomes the profile's role_division.
    #[arg(long, value_name = "MODULES.json[.xz|.gz]", num_args = 1..)]
    modules: Vec<PathBuf>,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim compare traces/data/vllm/h200-dsv2l-graph-256-8192.json.xz    every bench record of a run file
  afd-sim compare result.json --serve-args 'vllm serve /models/dsv2l --enforce-eager --max-num-seqs 256'
  afd-sim compare result.json 2a2f_graph_dbo_dp1tp2.sh      an AFD pair's bench run, by its recipe
  afd-sim compare traces/data/vllm/h200-dsv2l-cal8-piecewise-1024-8192.json.xz --calibration
                                                          its calibration bench runs, judged nowhere

RESULT.json is an afd-probe vllm run file (its serve words give the deployment) or a plain `vllm
bench serve --save-result` JSON with the deployment that ran it: --serve-args for one server, or
an AFD pair's recipe or --attention-args and --ffn-args (judged as `check` judges them; a pair's
kernels are priced by the kernel model; the engine profile prices its Attention server's front end
and asynchronous scheduling, and each role's host issue of a step without graphs as its part of a
plain vLLM step of the same shape, as `predict --real-engine` prices a pair). The workload is
read from the result (num_prompts, request_rate, burstiness, ramp_up_strategy and its rates,
max_concurrency, token totals: the random dataset at fixed lengths; a --save-detailed result's
input_lens and output_lens give each request its own, for the sharegpt dataset or random
lengths). A run at a request rate or a ramp is simulated at the send times `vllm bench serve`
drew: its gaps come from numpy's legacy generator seeded with the bench's --seed, replayed
exactly (a run file records the seed; a plain result does not, so give --bench-seed unless the
bench ran on vLLM's default 0). --draws N instead takes the mean over N draws of the simulator's
own generator. Costs: the GPU's built-in profile plus its built-in engine profile (or --engine).
Where the probe read /proc around a run (`host` in its record), a line after the table says how
much of the real run the engine core's thread was on a CPU or waited for one, and the host's
busy and stolen CPU time (`host` in --json): steps that were slow while that thread ran
throughout were the host core's own speed, which no profile holds.
The GPU is the one a run file's provenance names (--gpu names it for a plain result; h200 by
default): a run measured on another GPU than --gpu, on a GPU afd-sim does not know (unless --gpu
names one), or whose serve words need more GPUs than its provenance lists is refused. On stderr,
once per run: the check's warnings and the serve flags the model does not read, which the
prediction leaves out (`caveats` in --json; `afd-sim check` says where each is); and per record,
when the simulated server refused another number of requests than the real bench counted failed
(a prompt and its output over --max-model-len), both counts and why (`failed` in --json).
Exit status: 0, or 2 for bad input (a run file without a bench run of the asked kind among them: the
error says what it holds).")]
pub(crate) struct CompareArgs {
    /// A run file of `afd-probe vllm`, or a `vllm bench serve --save-result` JSON.
    #[arg(value_name = "RESULT.json")]
    result: PathBuf,
    /// The deployment a plain bench result ran on: one server's `--serve-args`, or an AFD pair's
    /// recipe or `--attention-args` and `--ffn-args`.
    #[command(flatten)]
    deployment: DeploymentArgs,
    /// Compare a run file's calibration bench runs instead of its judged ones. Those sent all at
    /// once may have priced the engine profile's decode periods; those at a request rate priced
    /// nothing, and check the model on runs no table read.
    #[arg(long)]
    calibration: bool,
    /// The `--seed` a plain result's `vllm bench serve` ran with (vLLM's default is 0): its request
    /// gaps are replayed from it. A run file records its own.
    #[arg(long, value_name = "SEED")]
    bench_seed: Option<u32>,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
#[command(after_help = "\
Example:
  afd-sim replay-vllm traces/data/vllm/ --check

Compares every bench-serve record of every afd-vllm-run file in DIR (as `compare` does), then
judges: the median and worst |error| over output throughput, mean TPOT and mean TTFT of every
record (bars 10 % and 25 %), and the graph-over-eager mean-TPOT ratio of each workload run under
both modes with the same limits (within 10 % of the measured ratio). Each graph mode's median
|error| and median signed error per judged metric say where the error lies and which way it leans
(`by_mode` in --json). A workload measured on two
servers of one mode and limits (a repeated server) is also set against itself: each real run as the
prediction of the other, the measurement's own reproducibility beside the bars (`real_against_real`
in --json), with the least mean error one prediction of both runs can have (half their difference,
`one_prediction_floor`) and the model's mean error over the two; a repeated graph server's
graph/eager ratios likewise, each real ratio as the prediction of the other beside the ratio bar
(`real_against_real.ratios`).
Exit status: 0, or 1 with --check when a bar is missed; 2 for bad input.")]
pub(crate) struct ReplayVllmArgs {
    /// Folder of run files (other JSON files are skipped with a note).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Exit 1 when a bar is missed.
    #[arg(long)]
    check: bool,
    #[command(flatten)]
    common: Common,
}

#[derive(Args, Debug)]
struct Common {
    /// Model architecture (a shipped name or a Hugging Face config.json); the runs serve a folder
    /// whose name says nothing.
    #[arg(
        long,
        default_value = "deepseek-v2-lite",
        value_name = "NAME_OR_CONFIG"
    )]
    model: String,
    /// GPU kind the runs were made on; default: the kind a run file's provenance names (h200 for a
    /// plain bench result). A run file measured on another kind is refused.
    #[arg(long, value_name = "GPU")]
    gpu: Option<String>,
    /// Engine profile (`afd-sim engine-profile`); default: the GPU's built-in one.
    #[arg(long, value_name = "FILE", conflicts_with = "no_engine")]
    engine: Option<PathBuf>,
    /// Price steps from kernels alone, without the engine's host floors (to see what they add).
    #[arg(long)]
    no_engine: bool,
    /// Seed of what the simulation draws besides the bench's send times (expert routing; with
    /// --draws, draw k's send times take seed + k).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Instead of the bench's own send times, simulate an arrival-bound run at N draws of the
    /// simulator's generator and report each metric's mean (what such a run gives on average).
    /// Runs that send every prompt at once are simulated once.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    draws: Option<u32>,
    /// Print JSON instead of the table.
    #[arg(long)]
    json: bool,
}

/// Each run's name in the profile's sources and evidence: its file name, or the path as given where
/// two runs share a file name (`afd-probe vllm --out DIR` writes every run as `DIR/run.json`). The
/// derivation takes a name for one server (its pairs of injections, each server counted once), so
/// two servers under one name would be priced as one.
fn run_names(paths: &[PathBuf]) -> Vec<String> {
    let file_name = |path: &PathBuf| path.file_name().map(|n| n.to_string_lossy().into_owned());
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for name in paths.iter().filter_map(file_name) {
        *seen.entry(name).or_default() += 1;
    }
    paths
        .iter()
        .map(|path| match file_name(path) {
            Some(name) if seen[&name] == 1 => name,
            _ => path.display().to_string(),
        })
        .collect()
}

pub(crate) fn engine_profile(args: &EngineProfileArgs) -> anyhow::Result<ExitCode> {
    let model = read_model(&args.model)?;
    let mut runs = Vec::new();
    let mut logs = Vec::new();
    for path in &args.runs {
        runs.push(read_run(path)?);
        logs.push(server_log_steps(path)?);
    }
    let moe = engine::MoeShape {
        experts: model.routed_experts(),
        top_k: model.experts_per_token(),
    };
    let moe = (moe.experts > 0 && moe.top_k > 0).then_some(moe);
    let mut profile = engine::derive_with_logs(&runs, &run_names(&args.runs), &logs, moe)?;
    if !args.modules.is_empty() {
        // Each server's hook writes `modules-SHAPE.json`: a name two summaries share gives way to
        // their paths, as run files' do.
        let mut summaries = Vec::new();
        for (path, name) in args.modules.iter().zip(run_names(&args.modules)) {
            let text =
                afd_traces::input::read_text(path, afd_traces::input::InputKind::MODULE_SUMMARY)?;
            summaries.push((name, text));
        }
        profile.role_division =
            engine::role_division(&summaries).map_err(|e| anyhow::anyhow!("--modules: {e}"))?;
    }
    if engine::frontend_from_lone_prompts(&profile) {
        // No mode's injected requests told the running engine's front end from the idle engine's
        // first step: the figure is what lone prompts met beyond their steps.
        eprintln!(
            "note: no server's injected requests among the runs: the front end's latency ({:.1} ms) is \
             read from lone prompts on an idle engine, which on eager servers keeps most of a step \
             (docs/fidelity.md, \"The thirty-sixth batch\"); a plan that injects prompts beside \
             standing decodes prices it",
            profile.frontend_ns as f64 / 1e6
        );
    }
    for term in engine::unmeasured_terms(&profile) {
        // Priced as nothing: right only where the term is small on this host.
        eprintln!("note: {term}");
    }
    let text = profile.to_json();
    match &args.out {
        Some(path) => {
            write_all_atomically(&[(path.as_path(), text.as_bytes())])?;
            eprintln!("wrote {} ({} modes)", path.display(), profile.modes.len());
        }
        None => emit(&text)?,
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn compare(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let text = read_text(&args.result)?;
    let value: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not JSON", args.result.display()))?;
    let (setup, cases) = if value.get("format").and_then(Value::as_str) == Some("afd-vllm-run") {
        if args.deployment.is_given() {
            bail!(
                "{} is a run file and carries its own serve words: give no recipe, --serve-args, --attention-args or --ffn-args",
                args.result.display()
            );
        }
        if args.bench_seed.is_some() {
            bail!(
                "--bench-seed: {} is a run file and records each bench run's own seed",
                args.result.display()
            );
        }
        let run = VllmRun::from_json(&text).with_context(|| args.result.display().to_string())?;
        let setup = Setup::new(&args.common, &[(args.result.as_path(), &run)])?;
        let cases = cases_of(&run, &args.result, &setup, args.calibration)?;
        if cases.is_empty() {
            bail!(
                "{}",
                nothing_to_compare(&run, &args.result, args.calibration)
            );
        }
        (setup, cases)
    } else {
        if args.calibration {
            bail!(
                "--calibration: {} is a plain bench result; only a run file of `afd-probe vllm` marks calibration runs",
                args.result.display()
            );
        }
        if !args.deployment.is_given() {
            bail!(
                "{} is a plain bench result: give the deployment that ran it (--serve-args 'vllm serve MODEL ...' for one server; a recipe, or --attention-args and --ffn-args, for an AFD pair)",
                args.result.display()
            );
        }
        let setup = Setup::new(&args.common, &[])?;
        let loaded = load(&args.deployment, &Default::default(), setup.gpu)?;
        // The findings `check` prints, for a deployment vLLM or the plugin would refuse.
        let (launch, report) = checked(loaded, setup.gpu, &setup.model)
            .map_err(|findings| anyhow::anyhow!("{findings}"))?;
        let config = launch
            .serving_config(setup.gpu, &setup.model)
            .context("the deployment cannot be simulated")?;
        let caveats = launch.caveats(&report);
        let label = match &launch {
            Launch::Plain(_) => args
                .deployment
                .serve_args
                .clone()
                .or_else(|| {
                    args.deployment
                        .recipe
                        .as_ref()
                        .map(|p| p.display().to_string())
                })
                .unwrap_or_default(),
            Launch::Afd(_) => args.deployment.recipe.as_ref().map_or_else(
                || "--attention-args/--ffn-args".to_owned(),
                |p| p.display().to_string(),
            ),
        };
        let cases = vec![Case {
            run: "result".into(),
            label,
            workload: stem(&args.result),
            config,
            caveats,
            result: value,
            bench_seed: args.bench_seed.unwrap_or(0),
            computed_prompt_tokens: None,
            async_scheduling: launch.async_scheduling(),
            dummy_weights: launch.dummy_weights(),
            host: None,
            // A plain bench result says nothing of what its server ran before: a fresh server.
            compiled: Vec::new(),
            same_seed_before: Vec::new(),
        }];
        (setup, cases)
    };
    let rows = setup.compare_all(&cases)?;
    setup.note_trained_weights(&cases);
    warn_caveats(&rows);
    if args.common.json {
        emit(&json_text(&Value::Array(
            rows.iter().map(CaseRows::to_json).collect(),
        )))?;
    } else {
        emit(&render(&rows))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn replay(args: &ReplayVllmArgs) -> anyhow::Result<ExitCode> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&args.dir)
        .with_context(|| format!("reading folder {}", args.dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| is_run_file_name(p))
        .collect();
    paths.sort();
    let mut runs = Vec::new();
    for path in &paths {
        if path.is_dir() {
            eprintln!("note: {} is a folder; skipped", path.display());
            continue;
        }
        let text = read_text(path)?;
        let is_run = serde_json::from_str::<Value>(&text)
            .ok()
            .is_some_and(|v| v.get("format").and_then(Value::as_str) == Some("afd-vllm-run"));
        if !is_run {
            eprintln!(
                "note: {} is not an afd-vllm-run file; skipped",
                path.display()
            );
            continue;
        }
        let run = VllmRun::from_json(&text).with_context(|| path.display().to_string())?;
        runs.push((path.as_path(), run));
    }
    let setup = Setup::new(
        &args.common,
        &runs.iter().map(|(p, r)| (*p, r)).collect::<Vec<_>>(),
    )?;
    let mut cases = Vec::new();
    for (path, run) in &runs {
        cases.extend(cases_of(run, path, &setup, false)?);
    }
    if cases.is_empty() {
        bail!(
            "{} holds no bench-serve record of an afd-vllm-run file",
            args.dir.display()
        );
    }
    let rows = setup.compare_all(&cases)?;
    setup.note_trained_weights(&cases);
    warn_caveats(&rows);
    let verdict = Verdict::of(&rows);
    if args.common.json {
        let (real_median, real_worst) = median_and_worst(&Repeat::all_errors(&verdict.repeats));
        let (floor, on_repeats) = Repeat::floor_and_model(&verdict.repeats);
        let value = json!({
            "records": rows.iter().map(CaseRows::to_json).collect::<Vec<_>>(),
            "median_abs_error": verdict.median,
            "worst_abs_error": verdict.worst,
            "by_mode": verdict.by_mode.iter().map(|m| json!({
                "mode": m.mode, "records": m.records,
                "metrics": JUDGED.iter().zip(&m.metrics).map(|(k, (abs, signed))| json!({
                    "metric": k, "median_abs_error": abs, "median_error": signed,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "seed": setup.seed.0,
            "arrival_draws": setup.draws,
            "send_times": if setup.draws.is_some() { "simulator draws" } else { "vllm bench seed" },
            "graph_over_eager_tpot": verdict.ratios.iter().map(|r| json!({
                "workload": r.workload, "limits": r.limits, "server": r.server, "eager_server": r.eager_server, "real": r.real, "predicted": r.predicted, "error": r.error(),
            })).collect::<Vec<_>>(),
            "bars": {"median": MEDIAN_BAR, "worst": WORST_BAR, "ratio": RATIO_BAR},
            "pass": verdict.pass(),
            "real_against_real": {
                "median_abs_error": real_median,
                "worst_abs_error": real_worst,
                "one_prediction_floor_median": floor,
                "model_on_repeats_median": on_repeats,
                "values_beyond_worst_bar": Repeat::beyond_worst_bar(&verdict.repeats),
                "ratios_within_bar": verdict.ratio_repeats.iter().filter(|r| r.agrees()).count(),
                "ratios_one_prediction_can_meet": verdict.ratio_repeats.iter().filter(|r| r.one_prediction_can_meet_both()).count(),
                "ratios": verdict.ratio_repeats.iter().map(|r| {
                    let (a, b) = r.errors();
                    json!({
                        "workload": r.workload, "limits": r.limits, "mode": r.mode,
                        "servers": r.servers, "eager_server": r.eager_server,
                        "real": r.real, "predicted": r.predicted,
                        "first_as_prediction": a, "second_as_prediction": b,
                    })
                }).collect::<Vec<_>>(),
                "repeats": verdict.repeats.iter().map(|r| json!({
                    "workload": r.workload, "limits": r.limits, "mode": r.mode, "runs": r.runs,
                    "metrics": r.errors.iter().zip(&r.model).map(|((k, a, b), m)| json!({
                        "metric": k, "first_as_prediction": a, "second_as_prediction": b,
                        "one_prediction_floor": Repeat::floor(*a, *b), "model_mean_abs_error": m,
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            },
        });
        emit(&json_text(&value))?;
    } else {
        let mut text = render(&rows);
        text.push_str(&verdict.render());
        emit(&text)?;
    }
    Ok(if args.check && !verdict.pass() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One bench record to simulate.
struct Case {
    run: String,
    label: String,
    workload: String,
    config: ServingConfig,
    /// What a prediction of the server leaves out (`vllm_compare::PlainServer::caveats`), and the
    /// run file's notes (another vLLM version than the engine profile's).
    caveats: Vec<String>,
    result: Value,
    /// The `--seed` of the run's `vllm bench serve` (its send times are replayed from it).
    bench_seed: u32,
    /// Prompt tokens the engine's per-step log shows computed, when the record has the log.
    computed_prompt_tokens: Option<u64>,
    /// Whether the server schedules one step ahead (its serve words).
    async_scheduling: bool,
    /// Whether the server filled its weights at random (`--load-format dummy`).
    dummy_weights: bool,
    /// The probe's /proc readings around the workload, when it took them.
    host: Option<HostShare>,
    /// The fused-MoE kernels' token counts of the steps the server ran before the record
    /// (`engine::kernel_history`), where the engine profile prices first-use compiles.
    compiled: Vec<u32>,
    /// `(num_prompts, input_len)` of the server's earlier bench runs on the record's seed, whose
    /// prompts its requests share (`vllm_compare::cached_prefixes`).
    same_seed_before: Vec<(u32, u32)>,
}

struct CaseRows {
    case_run: String,
    label: String,
    workload: String,
    limits: String,
    eager: bool,
    /// vLLM's name of the server's graph mode: with `limits`, `workload`, `setting` and `cached`
    /// it says which records are repeats of one another.
    mode: &'static str,
    /// What the bench client was asked to run: a run of one name but other counts or rates
    /// is not a repeat.
    setting: vllm_compare::BenchSetting,
    /// Prompt tokens the prefix cache served (from the per-step log): a run that found earlier
    /// runs' prompts cached is not a repeat of one that computed them.
    cached: usize,
    /// The send times simulated: the bench's own, or draws of the simulator's.
    send: vllm_compare::SendTimes,
    rows: Vec<MetricRow>,
    /// Requests the real bench counted failed (its result's `failed`, 0 where it has none).
    real_failed: u64,
    /// Requests the simulated server refused (the mean over the simulations), and why the first was.
    predicted_failed: f64,
    rejection: Option<String>,
    caveats: Vec<String>,
    /// Where the engine core's thread and the host's CPUs spent the real run (`host` of its record).
    host: Option<HostShare>,
}

impl CaseRows {
    fn to_json(&self) -> Value {
        let mut value = json!({
            "run": self.case_run, "server": self.label, "workload": self.workload,
            // Simulations whose mean each prediction is.
            "draws": self.send.simulations(&self.setting),
            "bench_seed": match self.send {
                vllm_compare::SendTimes::Bench { seed } => Some(seed),
                vllm_compare::SendTimes::Simulator { .. } => None,
            },
            "metrics": self.rows.iter().map(|r| json!({
                "metric": r.key, "real": r.real, "predicted": r.predicted, "error": r.error(),
            })).collect::<Vec<_>>(),
            "failed": {
                "real": self.real_failed, "predicted": self.predicted_failed,
                "predicted_reason": self.rejection,
            },
            "caveats": self.caveats,
        });
        if let Some(host) = &self.host {
            value["host"] = json!(host);
        }
        value
    }

    fn metric(&self, key: &str) -> Option<&MetricRow> {
        self.rows.iter().find(|r| r.key == key)
    }
}

struct Setup {
    model: ModelArch,
    gpu: GpuKind,
    engine: Option<Arc<EngineModel>>,
    seed: Seed,
    /// `--draws`: simulator draws instead of the bench's own send times.
    draws: Option<u32>,
}

impl Setup {
    /// The settings of a comparison of `runs` (none for a plain bench result): the GPU is `--gpu`,
    /// else the one the runs' provenance names, else h200; a run measured on another GPU than the
    /// others or than `--gpu` is refused.
    fn new(common: &Common, runs: &[(&Path, &VllmRun)]) -> anyhow::Result<Setup> {
        let model = read_model(&common.model)?;
        let asked = common
            .gpu
            .as_deref()
            .map(|name| {
                GpuKind::parse(name)
                    .ok_or_else(|| anyhow::anyhow!("--gpu {name:?} is not a known GPU kind"))
            })
            .transpose()?;
        let gpu = runs_gpu(asked, runs)?;
        let engine = if common.no_engine {
            None
        } else {
            let profile = match &common.engine {
                Some(path) => {
                    let profile = read_engine_profile(path)?;
                    // Its steps are the GPU's it measured: a profile of another kind than the
                    // runs' would price them as that GPU's.
                    if GpuKind::of_device_name(&profile.gpu) != Some(gpu) {
                        bail!(
                            "--engine {}: the profile measured {}, the runs are priced on {}",
                            path.display(),
                            profile.gpu,
                            gpu.as_str()
                        );
                    }
                    profile
                }
                None => match builtin_engine_profile(gpu.as_str()) {
                    Some(text) => {
                        VllmEngineProfile::from_json(text).context("the built-in engine profile")?
                    }
                    None => bail!(
                        "no built-in engine profile for {}: give --engine or --no-engine",
                        gpu.as_str()
                    ),
                },
            };
            Some(Arc::new(EngineModel::new(profile)))
        };
        Ok(Setup {
            model,
            gpu,
            engine,
            seed: Seed(common.seed),
            draws: common.draws,
        })
    }

    /// Says on stderr when a server that loads its weights was priced by a profile of dummy ones
    /// (its replayed decode steps with a trained router's experts, `EngineModel::serving`).
    fn note_trained_weights(&self, cases: &[Case]) {
        let differ = |e: &Arc<EngineModel>| {
            cases.iter().any(|c| {
                c.config.placement != afd_sim::serving::Placement::Disaggregated
                    && e.measured_dummy_for(c.dummy_weights)
            })
        };
        if self.engine.as_ref().is_some_and(differ) {
            eprintln!(
                "note: the engine profile's decode steps served --load-format dummy, whose tokens reach \
                 few experts; this server loads its weights, so its replayed decode steps are priced \
                 with the experts even routing reads (docs/fidelity.md, \"Why a replayed decode step is \
                 cheap here\")"
            );
        }
    }

    /// A case's caveats, with what the engine profile leaves out of its pricing: an AFD pair's
    /// steps (never measured), or a plain server's collectives past one GPU.
    fn caveats(&self, case: &Case, pair: bool) -> Vec<String> {
        let mut caveats = case.caveats.clone();
        if self.engine.is_some() {
            if pair {
                caveats.push(
                    "note: an AFD pair's steps were never measured on real vLLM: the kernel model prices their kernels, and the engine profile their host issue (each role's share of a plain vLLM step of the same shape), the Attention server's front end and asynchronous scheduling (as `predict --real-engine` prices a pair)"
                        .to_owned(),
                );
            } else {
                caveats.extend(vllm_compare::engine_layout_caveat(&case.config));
            }
        }
        caveats
    }

    fn compare_all(&self, cases: &[Case]) -> anyhow::Result<Vec<CaseRows>> {
        cases
            .iter()
            .map(|case| {
                let setting = vllm_compare::bench_setting(&case.result)
                    .map_err(|e| anyhow::anyhow!("{} {}: {e}", case.run, case.workload))?;
                let pair = case.config.placement == afd_sim::serving::Placement::Disaggregated;
                if let Some(engine) = &self.engine
                    && !pair
                    && !engine.prices(&case.config.graph)
                {
                    bail!(
                        "{} {}: the engine profile has no costs for this server's {} \
                         (it prices {}; give --no-engine to price it from kernels alone)",
                        case.run,
                        case.workload,
                        case.config.graph.name(),
                        engine.mode_names().join(", ")
                    );
                }
                let cost = || -> Result<afd_sim::model::cost::CostModel, String> {
                    let cost = default_cost_model(&self.model, self.gpu, case.config.cost_layout())
                        .map_err(|e| format!("{e:#}"))?;
                    Ok(match &self.engine {
                        // An AFD role's steps were never measured: the kernel model prices
                        // their kernels, real vLLM's host path their issue (`with_vllm_host`).
                        _ if pair => vllm_compare::pair_at_vllm_pace(
                            cost,
                            &case.config,
                            self.engine.as_ref(),
                        ),
                        // A server that loads trained weights, priced by a profile of dummy ones,
                        // replays dearer decode steps (`EngineModel::serving`).
                        Some(engine) if engine.measured_dummy_for(case.dummy_weights) => {
                            let trained = (**engine).clone().serving(
                                false,
                                &cost,
                                afd_sim::model::workload::ExpertPopularity::Uniform,
                            );
                            cost.with_engine(Arc::new(trained))
                        }
                        Some(engine) => cost.with_engine(engine.clone()),
                        None => cost,
                    })
                };
                let cached = case
                    .computed_prompt_tokens
                    .map_or_else(Vec::new, |computed| {
                        vllm_compare::cached_prefixes(
                            &case.config,
                            &setting,
                            computed,
                            &case.same_seed_before,
                        )
                    });
                let send = match self.draws {
                    Some(draws) => vllm_compare::SendTimes::Simulator { draws },
                    None => vllm_compare::SendTimes::Bench {
                        seed: case.bench_seed,
                    },
                };
                let compared = vllm_compare::compare(
                    &case.config,
                    &cost,
                    &setting,
                    &case.result,
                    self.seed,
                    send,
                    &self.engine.as_ref().map_or_else(
                        || vllm_compare::FrontEnd {
                            cached: &cached,
                            async_scheduling: case.async_scheduling,
                            ..Default::default()
                        },
                        |e| vllm_compare::FrontEnd {
                            compiled: &case.compiled,
                            ..vllm_compare::FrontEnd::of_engine(
                                e,
                                &case.config.graph,
                                &cached,
                                case.async_scheduling,
                            )
                        },
                    ),
                )
                .map_err(|e| anyhow::anyhow!("{} {}: {e}", case.run, case.workload))?;
                Ok(CaseRows {
                    case_run: case.run.clone(),
                    label: case.label.clone(),
                    workload: case.workload.clone(),
                    limits: format!(
                        "{}/{}",
                        case.config.max_num_seqs, case.config.max_num_batched_tokens
                    ),
                    eager: case.config.graph == afd_sim::serving::GraphMode::Eager,
                    mode: case.config.graph.name(),
                    setting,
                    cached: cached.iter().map(|&c| c as usize).sum(),
                    send,
                    rows: compared.rows,
                    real_failed: case
                        .result
                        .get("failed")
                        .and_then(Value::as_u64)
                        .unwrap_or(0),
                    predicted_failed: compared.failed,
                    rejection: compared.rejection,
                    caveats: self.caveats(case, pair),
                    host: case.host.clone(),
                })
            })
            .collect()
    }
}

/// The bench records of a run file to compare: its judged ones, or with `calibration` its
/// calibration ones.
fn cases_of(
    run: &VllmRun,
    path: &Path,
    setup: &Setup,
    calibration: bool,
) -> anyhow::Result<Vec<Case>> {
    let words: Vec<String> = strip_probe_words(&run.serve_args);
    let server = vllm_compare::plain_server(&words, setup.gpu, &setup.model)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let gpus = run.provenance.gpus.len();
    let ranks = server.config.attention_ranks();
    if gpus > 0 && ranks as usize > gpus {
        bail!(
            "{}: the serve words run {ranks} ranks (DP {} x TP {}), one GPU each, but the run's provenance lists {gpus} GPU{}: vLLM could not have started this server",
            path.display(),
            server.config.attention.dp,
            server.config.attention.tp,
            if gpus == 1 { "" } else { "s" }
        );
    }
    let mut caveats = server.caveats;
    if let Some(engine) = &setup.engine {
        let measured = &engine.profile().vllm_version;
        if !run.provenance.vllm_version.is_empty() && &run.provenance.vllm_version != measured {
            caveats.push(format!(
                "note: the run served vLLM {}; the engine profile measured vLLM {measured}",
                run.provenance.vllm_version
            ));
        }
    }
    let config = server.config;
    // What the server compiled before each record: its log's steps (warm-ups included) where kept
    // beside the run file, else its earlier records' (read only where the profile prices it).
    let prices_compiles = setup
        .engine
        .as_ref()
        .is_some_and(|e| e.profile().jit_compile_ns > 0);
    let log = if prices_compiles {
        server_log_steps(path)?
    } else {
        Vec::new()
    };
    for r in run.records.iter().filter(|r| {
        r.workload.kind == afd_traces::vllm_run::WorkloadKind::BenchServe
            && r.workload.calibration == calibration
    }) {
        if let Some(failure) = &r.failure {
            let first = failure.lines().next().unwrap_or_default();
            eprintln!(
                "note: {} {}: the real bench run failed and is not compared ({})",
                stem(path),
                r.workload.name,
                first.chars().take(200).collect::<String>()
            );
        }
    }
    run.records
        .iter()
        .enumerate()
        .filter(|(_, r)| r.failure.is_none() && r.workload.calibration == calibration)
        .filter_map(|(i, r)| Some((i, r, r.bench_result.as_ref()?)))
        .map(|(index, r, result)| {
            // `np.random.seed` takes 0..=2**32 - 1; the bench would have refused another.
            let bench_seed = u32::try_from(r.workload.seed).map_err(|_| {
                anyhow::anyhow!(
                    "{} {}: seed {} is beyond the 0..=4294967295 numpy (and so `vllm bench serve`) accepts",
                    path.display(),
                    r.workload.name,
                    r.workload.seed
                )
            })?;
            Ok(Case {
                run: stem(path),
                label: run.label.clone(),
                workload: r.workload.name.clone(),
                config: config.clone(),
                caveats: caveats.clone(),
                result: result.clone(),
                bench_seed,
                async_scheduling: server.async_scheduling,
                dummy_weights: server.dummy_weights,
                computed_prompt_tokens: (!r.steps.is_empty())
                    .then(|| r.steps.iter().map(|s| u64::from(s.ctx_tokens)).sum()),
                host: r.host.clone(),
                compiled: if prices_compiles {
                    engine::kernel_history(run, &log, index)
                } else {
                    Vec::new()
                },
                same_seed_before: run.records[..index]
                    .iter()
                    .filter(|e| {
                        e.bench_result.is_some()
                            && e.failure.is_none()
                            && e.workload.seed == r.workload.seed
                    })
                    .map(|e| (e.workload.num_prompts, e.workload.input_len))
                    .collect(),
            })
        })
        .collect()
}

/// The GPU kind the runs were measured on, from their provenance (`NVIDIA H200, 580.159.04, 143771
/// MiB`): `asked` (`--gpu`), else the runs' kind, else h200 (a plain result, or runs whose
/// provenance lists no GPU). A run of a GPU afd-sim does not know (unless `asked` names one), of
/// several kinds, or of another kind than `asked` or the other runs is refused: its steps cannot be
/// priced as another GPU's.
fn runs_gpu(asked: Option<GpuKind>, runs: &[(&Path, &VllmRun)]) -> anyhow::Result<GpuKind> {
    let mut found: Option<(GpuKind, &Path, &str)> = None;
    for &(path, run) in runs {
        for line in &run.provenance.gpus {
            let name = line.split(',').next().unwrap_or_default().trim();
            let Some(kind) = GpuKind::of_device_name(name) else {
                if asked.is_some() {
                    continue;
                }
                bail!(
                    "{}: the run was measured on {name:?}, which is not a GPU kind afd-sim knows; give --gpu to price it as one",
                    path.display()
                );
            };
            if let Some(asked) = asked
                && asked != kind
            {
                bail!(
                    "--gpu {asked}: {} was measured on {name} ({kind}); compare prices the GPU a run used",
                    path.display()
                );
            }
            match found {
                Some((other, other_path, other_name)) if other != kind => bail!(
                    "{} was measured on {name} ({kind}) and {} on {other_name} ({other}); compare the runs of each GPU apart",
                    path.display(),
                    other_path.display()
                ),
                Some(_) => {}
                None => found = Some((kind, path, name)),
            }
        }
    }
    Ok(asked
        .or(found.map(|(kind, ..)| kind))
        .unwrap_or(GpuKind::H200))
}

/// Says on stderr, once per run, what its predictions leave out, and for each record where the
/// simulated server refused another number of requests than the real bench counted failed, both
/// counts and why the first was refused.
fn warn_caveats(cases: &[CaseRows]) {
    let mut said = std::collections::BTreeSet::new();
    for case in cases {
        if said.insert(case.case_run.as_str()) {
            for caveat in &case.caveats {
                eprintln!("{}: {caveat}", case.case_run);
            }
        }
        if (case.predicted_failed - case.real_failed as f64).abs() >= 0.5 {
            eprintln!(
                "warning: {} {}: the simulated server refused {} of {} requests{} where the real bench counted {} failed; each side's metrics are of the requests it completed",
                case.case_run,
                case.workload,
                fmt_count(case.predicted_failed),
                case.setting.num_prompts,
                case.rejection
                    .as_ref()
                    .map_or_else(String::new, |r| format!(" (the first: {r})")),
                case.real_failed
            );
        }
    }
}

/// A mean count of requests: whole where it is, else to one decimal.
fn fmt_count(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        format!("{n:.1}")
    }
}

/// Why a run file gave `compare` nothing: what its records are, and the switch that compares the
/// other kind of bench run where it has some.
fn nothing_to_compare(run: &VllmRun, path: &Path, calibration: bool) -> String {
    let benches = |cal: bool| {
        run.records
            .iter()
            .filter(|r| r.failure.is_none() && r.bench_result.is_some())
            .filter(|r| r.workload.calibration == cal)
            .count()
    };
    let failed = run.records.iter().filter(|r| r.failure.is_some()).count();
    let fixed = run.records.iter().filter(|r| r.fixed.is_some()).count();
    let (kind, other_kind, hint) = if calibration {
        (
            "calibration",
            "judged",
            "without --calibration it compares its judged runs",
        )
    } else {
        (
            "judged",
            "calibration",
            "--calibration compares its calibration runs",
        )
    };
    let other = benches(!calibration);
    let mut message = format!(
        "{}: no {kind} bench run to compare ({} records: {fixed} fixed-shape, {failed} failed, {other} {other_kind} bench)",
        path.display(),
        run.records.len(),
    );
    if other > 0 {
        message.push_str(&format!("; {hint}"));
    }
    message
}

/// The serve words without the ones the probe adds that change no timing (`--host`, `--port`,
/// the per-step log) and the kernel-config switch of FlashInfer's start-up autotune.
fn strip_probe_words(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for w in words {
        if skip {
            skip = false;
            continue;
        }
        match w.as_str() {
            "--host" | "--port" | "--kernel-config" => skip = true,
            "--enable-logging-iteration-details" => {}
            _ => out.push(w.clone()),
        }
    }
    out
}

fn render(cases: &[CaseRows]) -> String {
    let mut rows = vec![vec![
        "run".into(),
        "workload".into(),
        "metric".into(),
        "real".into(),
        "predicted".into(),
        "error".into(),
    ]];
    for case in cases {
        for r in &case.rows {
            rows.push(vec![
                case.case_run.clone(),
                case.workload.clone(),
                r.key.into(),
                format!("{:.2}", r.real),
                format!("{:.2}", r.predicted),
                format!("{:+.1}%", 100.0 * r.error()),
            ]);
        }
    }
    let mut text = table(&rows);
    for case in cases {
        if let Some(line) = case.host.as_ref().and_then(host_line) {
            text.push_str(&format!("{} {}: {line}\n", case.case_run, case.workload));
        }
    }
    text
}

/// What the probe read from /proc around a real run, as a sentence: a run whose steps were slow
/// while the engine core's thread was on a CPU throughout was the core's own speed; waiting for a
/// CPU or steal was another process's or the hypervisor's (docs/fidelity.md, "The twenty-second
/// batch"). `None` for a reading of no duration.
fn host_line(h: &HostShare) -> Option<String> {
    (h.wall_s > 0.0).then(|| {
        format!(
            "the engine core's thread was on a CPU {:.0}% of the real run and waited for one {:.1}%; \
             the host's CPUs were busy {:.2} and stolen {:.3} CPUs' worth",
            100.0 * h.engine_core_on_cpu_s / h.wall_s,
            100.0 * h.engine_core_waited_s / h.wall_s,
            h.busy_s / h.wall_s,
            h.steal_s / h.wall_s
        )
    })
}

struct Ratio {
    workload: String,
    limits: String,
    /// The graph run's mode.
    mode: &'static str,
    /// The graph run's server label: a server measured twice gives two ratios.
    server: String,
    /// The eager run's server label (the first eager server that ran the workload at the limits).
    eager_server: String,
    real: f64,
    predicted: f64,
}

impl Ratio {
    fn error(&self) -> f64 {
        (self.predicted - self.real) / self.real
    }
}

struct Verdict {
    median: f64,
    worst: f64,
    /// Per graph mode, where its error lies.
    by_mode: Vec<ModeErrors>,
    ratios: Vec<Ratio>,
    /// The same workload on two servers of the same mode and limits: each real run taken as the
    /// prediction of the other, per judged metric (the measurement's own reproducibility).
    repeats: Vec<Repeat>,
    /// The graph/eager ratios of the repeats whose servers replay graphs.
    ratio_repeats: Vec<RatioRepeat>,
}

/// One workload's graph/eager mean-TPOT ratio measured on both graph servers of a repeat (each
/// over the same eager run): how well one real ratio predicts the other, the measurement's own
/// reproducibility beside the ratio bar.
struct RatioRepeat {
    workload: String,
    limits: String,
    mode: &'static str,
    /// The two graph servers, and the eager server both ratios divide by.
    servers: [String; 2],
    eager_server: String,
    real: [f64; 2],
    predicted: [f64; 2],
}

impl RatioRepeat {
    /// `(|a − b| / b, |b − a| / a)`: each real ratio as the prediction of the other.
    fn errors(&self) -> (f64, f64) {
        let [a, b] = self.real;
        (((a - b) / b).abs(), ((b - a) / a).abs())
    }

    /// Whether either real ratio predicts the other within the ratio bar.
    fn agrees(&self) -> bool {
        let (a, b) = self.errors();
        a.min(b) <= RATIO_BAR
    }

    /// Whether one value can lie within the ratio bar of both real ratios: the larger at most
    /// (1 + bar) / (1 − bar) times the smaller. Where it cannot, a deterministic model misses
    /// the bar on one server of the pair whatever it predicts.
    fn one_prediction_can_meet_both(&self) -> bool {
        let [a, b] = self.real;
        a.max(b) <= a.min(b) * (1.0 + RATIO_BAR) / (1.0 - RATIO_BAR)
    }

    /// Every repeat of a graph mode whose two servers each have a ratio for the workload.
    fn of(repeats: &[Repeat], ratios: &[Ratio]) -> Vec<RatioRepeat> {
        repeats
            .iter()
            .filter_map(|repeat| {
                let ratio_of = |label: &str| {
                    ratios.iter().find(|r| {
                        r.server == label
                            && r.workload == repeat.workload
                            && r.limits == repeat.limits
                            && r.mode == repeat.mode
                    })
                };
                let (a, b) = (ratio_of(&repeat.labels[0])?, ratio_of(&repeat.labels[1])?);
                (a.eager_server == b.eager_server).then(|| RatioRepeat {
                    workload: repeat.workload.clone(),
                    limits: repeat.limits.clone(),
                    mode: repeat.mode,
                    servers: [a.server.clone(), b.server.clone()],
                    eager_server: a.eager_server.clone(),
                    real: [a.real, b.real],
                    predicted: [a.predicted, b.predicted],
                })
            })
            .collect()
    }
}

struct Repeat {
    workload: String,
    limits: String,
    mode: &'static str,
    runs: [String; 2],
    /// The two servers' labels (as ratios name them).
    labels: [String; 2],
    /// `(metric, |a − b| / b, |b − a| / a)`.
    errors: Vec<(&'static str, f64, f64)>,
    /// Per metric of `errors`, the model's mean |error| over the two records.
    model: Vec<f64>,
}

impl Repeat {
    fn all_errors(repeats: &[Repeat]) -> Vec<f64> {
        let mut errors: Vec<f64> = repeats
            .iter()
            .flat_map(|r| r.errors.iter().flat_map(|&(_, a, b)| [a, b]))
            .collect();
        errors.sort_by(f64::total_cmp);
        errors
    }

    /// The least mean |error| any one prediction of both runs can have on a metric: with real
    /// values `x < y`, a prediction `p` errs by `|p − x| / x + |p − y| / y` over the two, which is
    /// least at `p = x`, `(y − x) / y`; half that is the mean, `min(|a − b| / b, |b − a| / a) / 2`.
    /// A deterministic model predicts both runs of a repeat alike, so it cannot do better.
    fn floor(a_as_b: f64, b_as_a: f64) -> f64 {
        a_as_b.min(b_as_a) / 2.0
    }

    /// The repeats' values no one prediction can bring within the worst-value bar of both runs:
    /// the larger real value more than (1 + bar) / (1 − bar) times the smaller (`|a − b| / b` and
    /// `|b − a| / a` are that ratio less one, one of them each way).
    fn beyond_worst_bar(repeats: &[Repeat]) -> usize {
        repeats
            .iter()
            .flat_map(|r| &r.errors)
            .filter(|&&(_, a, b)| 1.0 + a.max(b) > (1.0 + WORST_BAR) / (1.0 - WORST_BAR))
            .count()
    }

    /// `(floor, model)` medians over every metric of every repeat: how close one prediction of
    /// both runs could come, and how close the model came.
    fn floor_and_model(repeats: &[Repeat]) -> (f64, f64) {
        let mut floors: Vec<f64> = repeats
            .iter()
            .flat_map(|r| r.errors.iter().map(|&(_, a, b)| Repeat::floor(a, b)))
            .collect();
        let mut model: Vec<f64> = repeats
            .iter()
            .flat_map(|r| r.model.iter().copied())
            .collect();
        floors.sort_by(f64::total_cmp);
        model.sort_by(f64::total_cmp);
        (median_and_worst(&floors).0, median_and_worst(&model).0)
    }
}

/// Every pair of records of one workload (name, counts, rates and prefix-cache hits) on two runs
/// whose servers share a mode and limits.
fn repeats_of(cases: &[CaseRows]) -> Vec<Repeat> {
    let mut repeats = Vec::new();
    for (i, a) in cases.iter().enumerate() {
        for b in &cases[i + 1..] {
            if (a.workload.as_str(), a.limits.as_str(), a.mode, a.cached)
                != (b.workload.as_str(), b.limits.as_str(), b.mode, b.cached)
                || a.setting != b.setting
                || a.case_run == b.case_run
            {
                continue;
            }
            let (errors, model) = JUDGED
                .iter()
                .filter_map(|&k| {
                    let (x, y) = (a.metric(k)?, b.metric(k)?);
                    let errors = (
                        k,
                        ((x.real - y.real) / y.real).abs(),
                        ((y.real - x.real) / x.real).abs(),
                    );
                    Some((errors, (x.error().abs() + y.error().abs()) / 2.0))
                })
                .unzip();
            repeats.push(Repeat {
                workload: a.workload.clone(),
                limits: a.limits.clone(),
                mode: a.mode,
                runs: [a.case_run.clone(), b.case_run.clone()],
                labels: [a.label.clone(), b.label.clone()],
                errors,
                model,
            });
        }
    }
    repeats
}

/// The upper median and the largest of sorted values (0 when empty).
/// The errors of one graph mode's records, per judged metric.
struct ModeErrors {
    mode: &'static str,
    records: usize,
    /// Per metric of [`JUDGED`], in order: the median |error| and the median signed error.
    metrics: [(f64, f64); JUDGED.len()],
}

impl ModeErrors {
    /// One entry per graph mode the records run, in the order the modes first appear.
    fn of(cases: &[CaseRows]) -> Vec<ModeErrors> {
        let mut modes: Vec<&'static str> = Vec::new();
        for case in cases {
            if !modes.contains(&case.mode) {
                modes.push(case.mode);
            }
        }
        modes
            .into_iter()
            .map(|mode| {
                let of_mode: Vec<&CaseRows> = cases.iter().filter(|c| c.mode == mode).collect();
                let metrics = JUDGED.map(|key| {
                    let mut signed: Vec<f64> = of_mode
                        .iter()
                        .filter_map(|c| c.metric(key))
                        .map(MetricRow::error)
                        .collect();
                    let mut abs: Vec<f64> = signed.iter().map(|e| e.abs()).collect();
                    signed.sort_by(f64::total_cmp);
                    abs.sort_by(f64::total_cmp);
                    (median_and_worst(&abs).0, median_and_worst(&signed).0)
                });
                ModeErrors {
                    mode,
                    records: of_mode.len(),
                    metrics,
                }
            })
            .collect()
    }
}

fn median_and_worst(sorted: &[f64]) -> (f64, f64) {
    (
        sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
        sorted.last().copied().unwrap_or(0.0),
    )
}

impl Verdict {
    fn of(cases: &[CaseRows]) -> Verdict {
        let mut errors: Vec<f64> = cases
            .iter()
            .flat_map(|c| {
                JUDGED
                    .iter()
                    .filter_map(|k| c.metric(k))
                    .map(|r| r.error().abs())
            })
            .collect();
        errors.sort_by(f64::total_cmp);
        let (median, worst) = median_and_worst(&errors);
        let by_mode = ModeErrors::of(cases);
        let repeats = repeats_of(cases);
        let mut ratios = Vec::new();
        for graph in cases.iter().filter(|c| !c.eager) {
            let eager = cases
                .iter()
                .find(|c| c.eager && c.workload == graph.workload && c.limits == graph.limits);
            if let (Some(eager), Some(g)) = (eager, graph.metric("mean_tpot_ms"))
                && let Some(e) = eager.metric("mean_tpot_ms")
            {
                ratios.push(Ratio {
                    workload: graph.workload.clone(),
                    limits: graph.limits.clone(),
                    mode: graph.mode,
                    server: graph.label.clone(),
                    eager_server: eager.label.clone(),
                    real: g.real / e.real,
                    predicted: g.predicted / e.predicted,
                });
            }
        }
        let ratio_repeats = RatioRepeat::of(&repeats, &ratios);
        Verdict {
            median,
            worst,
            by_mode,
            ratios,
            repeats,
            ratio_repeats,
        }
    }

    fn pass(&self) -> bool {
        self.median <= MEDIAN_BAR
            && self.worst <= WORST_BAR
            && self.ratios.iter().all(|r| r.error().abs() <= RATIO_BAR)
    }

    fn render(&self) -> String {
        let mut text = format!(
            "\n|error| over output throughput, mean TPOT, mean TTFT: median {:.1}% (bar {:.0}%), worst {:.1}% (bar {:.0}%)\n",
            100.0 * self.median,
            100.0 * MEDIAN_BAR,
            100.0 * self.worst,
            100.0 * WORST_BAR
        );
        text.push_str(
            "by mode: median |error| (median signed error) of output throughput / mean TPOT / mean TTFT\n",
        );
        for m in &self.by_mode {
            let cells: Vec<String> = m
                .metrics
                .iter()
                .map(|(abs, signed)| format!("{:.1}% ({:+.1}%)", 100.0 * abs, 100.0 * signed))
                .collect();
            text.push_str(&format!(
                "  {} ({} records): {}\n",
                m.mode,
                m.records,
                cells.join(" / ")
            ));
        }
        for r in &self.ratios {
            text.push_str(&format!(
                "graph/eager mean TPOT, {} at {} ({} / {}): real {:.3}, predicted {:.3} ({:+.1}%, bar {:.0}%)\n",
                r.workload,
                r.limits,
                r.server,
                r.eager_server,
                r.real,
                r.predicted,
                100.0 * r.error(),
                100.0 * RATIO_BAR
            ));
        }
        if !self.repeats.is_empty() {
            let (median, worst) = median_and_worst(&Repeat::all_errors(&self.repeats));
            let (floor, model) = Repeat::floor_and_model(&self.repeats);
            text.push_str(&format!(
                "real against real: {} workloads measured on two servers of one mode and limits; \
                 each run as the prediction of the other: median {:.1}%, worst {:.1}%\n\
                 one prediction of both runs of a repeat errs by at least half their difference \
                 (mean over the two): median {:.1}%; the model's mean over the two: median {:.1}%; \
                 no one value lies within {:.0}% of both runs in {} of their {} values\n",
                self.repeats.len(),
                100.0 * median,
                100.0 * worst,
                100.0 * floor,
                100.0 * model,
                100.0 * WORST_BAR,
                Repeat::beyond_worst_bar(&self.repeats),
                self.repeats.iter().map(|r| r.errors.len()).sum::<usize>()
            ));
            for r in &self.repeats {
                let cells: Vec<String> = r
                    .errors
                    .iter()
                    .map(|(k, a, b)| format!("{k} {:.1}%", 100.0 * a.max(*b)))
                    .collect();
                text.push_str(&format!(
                    "  {} at {} {} ({} / {}): {}\n",
                    r.workload,
                    r.limits,
                    r.mode,
                    r.runs[0],
                    r.runs[1],
                    cells.join(", ")
                ));
            }
        }
        if !self.ratio_repeats.is_empty() {
            let agree = self.ratio_repeats.iter().filter(|r| r.agrees()).count();
            let reachable = self
                .ratio_repeats
                .iter()
                .filter(|r| r.one_prediction_can_meet_both())
                .count();
            text.push_str(&format!(
                "graph/eager mean-TPOT ratios measured on two graph servers of one mode and limits \
                 (over one eager run): one real ratio predicts the other within {:.0}% in {agree} \
                 of {}; one value lies within {:.0}% of both in {reachable}\n",
                100.0 * RATIO_BAR,
                self.ratio_repeats.len(),
                100.0 * RATIO_BAR
            ));
            for r in &self.ratio_repeats {
                let (a, b) = r.errors();
                text.push_str(&format!(
                    "  {} at {} {} ({} / {} over {}): real {:.3} / {:.3} ({:.1}% apart), predicted {:.3} / {:.3}\n",
                    r.workload,
                    r.limits,
                    r.mode,
                    r.servers[0],
                    r.servers[1],
                    r.eager_server,
                    r.real[0],
                    r.real[1],
                    100.0 * a.min(b),
                    r.predicted[0],
                    r.predicted[1]
                ));
            }
        }
        text.push_str(if self.pass() {
            "result: within every bar\n"
        } else {
            "result: a bar is missed\n"
        });
        text
    }
}

/// The server log `afd-probe vllm` kept beside a run file: `NAME.server.log[.xz|.gz]` beside
/// `NAME.json[.xz|.gz]` (as committed), or `server.log` beside `run.json` (as the probe writes them).
fn server_log_beside(run: &Path) -> Option<PathBuf> {
    let name = run.file_name()?.to_str()?;
    let stem = [".json.xz", ".json.gz", ".json"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))?;
    let stem = if stem == "run" { "server" } else { stem };
    ["server.log.xz", "server.log.gz", "server.log"]
        .iter()
        .map(|tail| match stem {
            "server" => run.with_file_name(tail),
            _ => run.with_file_name(format!("{stem}.{tail}")),
        })
        .find(|p| p.is_file())
}

/// The engine's steps from the server log beside `run` ([`server_log_beside`]), every line from
/// start-up on; none when no log was kept. A log that cannot be read is an error naming it.
fn server_log_steps(run: &Path) -> anyhow::Result<Vec<afd_traces::vllm_run::EngineStep>> {
    Ok(match server_log_beside(run) {
        Some(log) => afd_traces::vllm_run::engine_steps(&afd_traces::input::read_text(
            &log,
            afd_traces::input::InputKind::SERVER_LOG,
        )?),
        None => Vec::new(),
    })
}

fn read_run(path: &Path) -> anyhow::Result<VllmRun> {
    VllmRun::from_json(&read_text(path)?).with_context(|| path.display().to_string())
}

fn read_text(path: &Path) -> anyhow::Result<String> {
    Ok(afd_traces::input::read_text(
        path,
        afd_traces::input::InputKind::VLLM_RUN,
    )?)
}

/// The engine profile `--engine` names (`compare`, `predict --real-engine`); errors name the file.
pub(crate) fn read_engine_profile(path: &Path) -> anyhow::Result<VllmEngineProfile> {
    let text = afd_traces::input::read_text(path, afd_traces::input::InputKind::ENGINE_PROFILE)?;
    VllmEngineProfile::from_json(&text).with_context(|| format!("--engine {}", path.display()))
}

/// The names a run file may have: `NAME.json` as `afd-probe vllm` writes it, `NAME.json.xz` as the
/// committed ones are stored, or `NAME.json.gz`.
const RUN_FILE_SUFFIXES: [&str; 3] = [".json.xz", ".json.gz", ".json"];

fn is_run_file_name(path: &Path) -> bool {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    RUN_FILE_SUFFIXES
        .iter()
        .any(|suffix| name.ends_with(suffix))
}

/// A run file's name without its suffix (`.json`, `.json.xz`, `.json.gz`).
fn stem(path: &Path) -> String {
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    RUN_FILE_SUFFIXES
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(&name)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_file_is_named_json_plain_xz_or_gz_and_its_stem_drops_the_suffix() {
        for (name, stem_of) in [
            (
                "h200-dsv2l-cal17-graph-256-8192.json.xz",
                "h200-dsv2l-cal17-graph-256-8192",
            ),
            ("run.json.gz", "run"),
            ("run.json", "run"),
        ] {
            assert!(is_run_file_name(Path::new(name)), "{name}");
            assert_eq!(stem(Path::new(&format!("dir/{name}"))), stem_of);
        }
        // The logs and readings stored beside a run file are not run files.
        for name in [
            "h200-dsv2l-cal20-graph-64-64.server.log.xz",
            "h200-dsv2l-cal20-graph-64-64.proc.log.xz",
            "h200-dsv2l-cal20-graph-64-64.gpu.csv.xz",
            "run.json.zst",
            "PROVENANCE.md",
        ] {
            assert!(!is_run_file_name(Path::new(name)), "{name}");
        }
    }

    fn case(run: &str, num_prompts: u32, cached: usize, tpot: f64) -> CaseRows {
        CaseRows {
            case_run: run.to_owned(),
            label: run.to_owned(),
            workload: "e2e-dec-sat".to_owned(),
            limits: "256/8192".to_owned(),
            eager: false,
            mode: "FULL_DECODE_ONLY",
            setting: vllm_compare::BenchSetting {
                num_prompts,
                input_len: 256,
                output_len: 256,
                request_rate: None,
                burstiness: 1.0,
                max_concurrency: None,
                ramp_up: None,
            },
            cached,
            send: vllm_compare::SendTimes::Bench { seed: 0 },
            host: None,
            real_failed: 0,
            predicted_failed: 0.0,
            rejection: None,
            caveats: Vec::new(),
            rows: vec![MetricRow {
                key: "mean_tpot_ms",
                real: tpot,
                predicted: 11.0,
            }],
        }
    }

    #[test]
    fn a_run_with_the_probes_proc_readings_says_where_its_engine_core_spent_it() {
        let mut with = case("a", 256, 0, 10.0);
        with.host = Some(HostShare {
            engine_core_pid: 958,
            wall_s: 20.0,
            engine_core_on_cpu_s: 19.0,
            engine_core_waited_s: 0.1,
            steal_s: 0.02,
            busy_s: 23.0,
        });
        let text = render(&[with, case("b", 256, 0, 12.0)]);
        assert!(
            text.contains(
                "a e2e-dec-sat: the engine core's thread was on a CPU 95% of the real run and \
                 waited for one 0.5%; the host's CPUs were busy 1.15 and stolen 0.001 CPUs' worth"
            ),
            "{text}"
        );
        // A run without readings says nothing of them.
        assert!(!text.contains("b e2e-dec-sat: the engine"), "{text}");
        let mut zero = case("c", 256, 0, 10.0);
        zero.host = Some(HostShare {
            wall_s: 0.0,
            ..with_host()
        });
        assert!(!render(&[zero]).contains("engine core"));
    }

    fn with_host() -> HostShare {
        HostShare {
            engine_core_pid: 1,
            wall_s: 1.0,
            engine_core_on_cpu_s: 1.0,
            engine_core_waited_s: 0.0,
            steal_s: 0.0,
            busy_s: 1.0,
        }
    }

    #[test]
    fn the_verdict_says_where_each_modes_error_lies() {
        let mut eager = case("e", 8, 0, 10.0);
        eager.mode = "eager";
        // Predicted 11 ms each: +10 %, +10 % and -50 %.
        let cases = [eager, case("g1", 8, 0, 10.0), case("g2", 8, 0, 22.0)];
        let modes = ModeErrors::of(&cases);
        let tpot = |m: &ModeErrors| m.metrics[1];
        assert_eq!(
            modes
                .iter()
                .map(|m| (m.mode, m.records))
                .collect::<Vec<_>>(),
            [("eager", 1), ("FULL_DECODE_ONLY", 2)]
        );
        let close =
            |(a, b): (f64, f64), (x, y): (f64, f64)| (a - x).abs() < 1e-9 && (b - y).abs() < 1e-9;
        assert!(close(tpot(&modes[0]), (0.1, 0.1)));
        // The upper median, as the bars take it: |error| 0.5, signed +0.1.
        assert!(close(tpot(&modes[1]), (0.5, 0.1)), "{:?}", tpot(&modes[1]));
        // A metric no record has is zero, not a guess.
        assert_eq!(modes[1].metrics[0], (0.0, 0.0));
    }

    #[test]
    fn a_repeat_is_one_workload_on_two_servers_and_nothing_else() {
        let first = case("a", 256, 0, 10.0);
        let repeat = case("b", 256, 0, 12.0);
        let pairs = repeats_of(&[first, repeat]);
        assert_eq!(pairs.len(), 1);
        let (k, ab, ba) = pairs[0].errors[0];
        assert_eq!(k, "mean_tpot_ms");
        assert!((ab - 1.0 / 6.0).abs() < 1e-12 && (ba - 0.2).abs() < 1e-12);
        // Real 10 and 12: one prediction of both errs by at least (12 − 10) / 12 over the two,
        // 1/12 on their mean (at 10: 0 and 1/6); the model's 11 errs by 1/10 and 1/12.
        let (floor, model) = Repeat::floor_and_model(&pairs);
        assert!((floor - 1.0 / 12.0).abs() < 1e-12, "{floor}");
        assert!((model - (0.1 + 1.0 / 12.0) / 2.0).abs() < 1e-12, "{model}");
        for p in [10.0, 10.5, 11.0, 12.0, 13.0] {
            let mean = ((p - 10.0_f64).abs() / 10.0 + (p - 12.0_f64).abs() / 12.0) / 2.0;
            assert!(
                mean >= floor - 1e-12,
                "a prediction of {p} beats the floor: {mean}"
            );
        }
        // Another prompt count, or prompts an earlier run left in the prefix cache: not a repeat.
        assert!(repeats_of(&[case("a", 256, 0, 10.0), case("b", 100, 0, 10.0)]).is_empty());
        assert!(repeats_of(&[case("a", 256, 0, 10.0), case("b", 256, 19_200, 10.0)]).is_empty());
        // Two records of one run are not repeats of each other.
        assert!(repeats_of(&[case("a", 256, 0, 10.0), case("a", 256, 0, 10.0)]).is_empty());
    }
}
