//! `afd-sim predict`: simulate a deployment serving a workload and print a `vllm bench serve`-style
//! summary.
//!
//! Arguments are read in two steps (ripgrep's low and high args): clap fills [`PredictArgs`], then
//! [`Inputs::from_args`] reads files and checks values into the library's types, so every bad
//! flag, model file, trace or profile is reported with its name before anything runs.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use afd_sim::engine::{RunOptions, run_observed};
use afd_sim::launch::Launch;
use afd_sim::launch::Overrides;
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{AfdLink, CostModel};
use afd_sim::model::link::afd_link;
use afd_sim::model::workload::Workload;
use afd_sim::report::{ReportContext, build_report, request_rows, step_rows, timeline};
use afd_sim::rng::Seed;
use afd_sim::serving::ServingConfig;
use afd_sim::time::{SimDuration, SimTime};
use afd_sim::topology::Role;
use afd_sim::vllm_compare::{RealServer, VllmPricing, price_as_vllm};

use crate::cli::check::{DeploymentArgs, checked, load};
use crate::cli::inputs::{
    HardwareArgs, Progress, WorkloadArgs, parse_concurrency, parse_link_flag, parse_routing,
    read_model,
};
use crate::cli::output::{check_outputs, csv_bytes, emit, write_all_atomically};
use crate::cli::profiles::cost_model;
use crate::cli::save_result::{Objective, Percentiles, SaveResultInputs, add_save_result_fields};

const AFTER_HELP: &str = "\
Examples:
  afd-sim predict                                   # the seed recipe's benchmark on H200
  afd-sim predict sim/tests/fixtures/recipes/2a2f_graph_dbo_dp2tp1.sh   # a recipe script (never executed)
  afd-sim predict --attention-args \"$ATTENTION_CMD\" --ffn-args \"$FFN_CMD\"
  afd-sim predict --serve-args 'vllm serve /models/DeepSeek-V2-Lite --tensor-parallel-size 2 --enable-expert-parallel'
  afd-sim predict --json > report.json              # the same, as vllm bench serve JSON fields
  afd-sim predict --request-rate inf --max-concurrency 64 --num-prompts 256
  afd-sim predict --attention-dp 2 --attention-tp 1 --ffn-dp 2 --ffn-tp 1   # 2A2F DP2xTP1
  afd-sim predict --enforce-eager --no-dbo          # the eager recipe variant
  afd-sim predict --trace traces/data/workloads/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.csv \\
      --num-prompts 2000 --max-concurrency none
  afd-sim predict --timeline out.json --timeline-window 20:20.05   # open out.json in ui.perfetto.dev
  afd-sim predict --calibration traces/data/calibration/h200x2-deepseek-v2-lite.json --steps-csv steps.csv --requests-csv requests.csv

The deployment is a recipe script, both roles' command lines, or one plain `vllm serve` command
line (--serve-args, or a recipe with one server and no afd block: the colocated deployment of its
DP x TP GPUs, judged by vLLM's own rules), else the seed recipe 2a2f_graph_dbo_dp1tp2 (both roles
DP1 TP2 with expert parallelism, max-num-seqs 64, max-num-batched-tokens 64, DBO thresholds 2/12,
FULL_DECODE_ONLY with capture size 64, VLLM_USE_V2_MODEL_RUNNER=1; =0 under --rules v0.26).
Each deployment flag is written into every server's vllm serve words (--attention-*/--ffn-* into
that role's; layout changes update the afd block's rank counts and CUDA_VISIBLE_DEVICES), and the
words are judged as `afd-sim check` judges them: a deployment that breaks a rule, or a role that
does not fit in GPU memory, exits 2 with the findings. One that runs is predicted, and stderr
names what the prediction leaves out: the check's warnings, and the serve flags the model does
not read (`--kv-cache-dtype fp8`, say; those that change no step, such as --trust-remote-code or
--seed, are not named).

Defaults are vLLM 0.26.0's for what the words leave out: max-num-seqs 1024 and
max-num-batched-tokens 8192 on GPUs of at least 70 GiB that are not A100s (256 / 2048 on A100, L4,
L20); CUDA-graph capture sizes 1, 2, 4, 8, 16, ... up to min(2 x max-num-seqs, 512) (or
--max-cudagraph-capture-size), capped at max-num-batched-tokens; full decode graphs only for sizes
<= max-num-seqs; cudagraph_mode FULL_AND_PIECEWISE for a plain server (AFD requires
FULL_DECODE_ONLY or --enforce-eager); no DBO unless --enable-dbo (or --ubatch-size 2), thresholds
32 / 512; KV block size 16 (FLASH_ATTN_MLA on Hopper); prefix caching and chunked prefill on; the
V2 model runner where vLLM picks it. The report states whether DBO ran and its thresholds.
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
    /// Most sequences an engine schedules at once (vllm serve --max-num-seqs).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_num_seqs: Option<u32>,
    /// Most tokens an engine schedules in one step (vllm serve --max-num-batched-tokens).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_num_batched_tokens: Option<u32>,
    /// Turn dual-batch overlap on (vLLM's --enable-dbo; off unless the deployment asks for it).
    #[arg(long, conflicts_with = "no_dbo", help_heading = "Deployment")]
    pub(crate) enable_dbo: bool,
    /// Disable dual-batch overlap (removes --enable-dbo and --ubatch-size; the seed recipe has it).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) no_dbo: bool,
    /// Price the deployment as real vLLM 0.26.0 runs it, where an engine profile measured its GPU
    /// kind, model and graph mode (the built-in ones: DeepSeek-V2-Lite on H200, --enforce-eager,
    /// FULL_DECODE_ONLY or vLLM's default FULL_AND_PIECEWISE, cudagraph_mode NONE of the compiled
    /// model by FULL_DECODE_ONLY's steps without graphs; on H100, --enforce-eager and FULL_DECODE_ONLY). The
    /// default; the flag says so explicitly.
    /// A plain server steps at the engine's measured periods, with its front end and asynchronous
    /// scheduling, as `afd-sim compare` prices it. An AFD pair takes the profile's front end and
    /// asynchronous scheduling for its Attention server (vLLM's own API server and engine core),
    /// and real vLLM's host pace for every step a role runs without graphs: each role issues its
    /// part of a plain vLLM step of the same shape (the Attention role's in its own mode, the FFN
    /// role's op by op); the pair's kernels, never measured on real vLLM, keep the kernel model.
    /// The profile's runs served --load-format dummy, whose decode tokens route to few experts: a
    /// server that loads its weights replays dearer decode graphs, every expert even routing picks
    /// read. `afd-sim sweep` prices its candidates alike.
    #[arg(long, conflicts_with = "kernel_model", help_heading = "Deployment")]
    pub(crate) real_engine: bool,
    /// Price from kernels alone: the lean host path and the kernels our own probes measured
    /// (docs/fidelity.md's pipeline fidelity), without real vLLM's engine. Real vLLM's eager and
    /// graph-less steps take many times longer than this prices them.
    #[arg(long, help_heading = "Deployment")]
    pub(crate) kernel_model: bool,
    /// The engine profile to price with: `afd-sim engine-profile` of your own `afd-probe vllm`
    /// runs (docs/probes.md); default: the GPU's built-in one. It must have measured the
    /// deployment's GPU kind (--gpu).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "kernel_model",
        help_heading = "Deployment"
    )]
    pub(crate) engine: Option<PathBuf>,
    /// Price a plain server past its first uses of the fused-MoE Triton kernel's specializations
    /// (the steady state of a server that has served traffic like this before, as `sweep` prices
    /// its candidates). Without it the server is freshly started: the first step that needs each
    /// specialization start-up did not compile waits for vLLM to compile it (about a second;
    /// docs/fidelity.md, "The twenty-sixth batch"), as vLLM's own JIT monitor warns.
    #[arg(long, conflicts_with = "kernel_model", help_heading = "Deployment")]
    pub(crate) warm_kernels: bool,
    /// vLLM's --ubatch-size (2 ubatches whenever DBO is on; without DBO, > 1 turns ubatching on).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) ubatch_size: Option<u32>,
    /// Decode tokens from which a step splits into two DBO ubatches (vllm serve flag).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) dbo_decode_token_threshold: Option<u32>,
    /// Prefill tokens from which a step splits into two DBO ubatches (vllm serve flag).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) dbo_prefill_token_threshold: Option<u32>,
    /// Run every step eagerly (no CUDA graphs).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) enforce_eager: bool,
    /// CUDA-graph capture sizes, comma-separated (e.g. 8,16,32,64); replaces every capture-size
    /// setting of the deployment.
    #[arg(long, value_delimiter = ',', help_heading = "Deployment")]
    pub(crate) cudagraph_capture_sizes: Option<Vec<u32>>,
    /// vLLM's --max-cudagraph-capture-size.
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_cudagraph_capture_size: Option<u32>,
    /// Fraction of each GPU's memory vLLM may use, 0 < u <= 1 (sizes the KV cache).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) gpu_memory_utilization: Option<f64>,
    /// Longest prompt plus output a request may have; longer requests fail (vllm serve flag).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) max_model_len: Option<u32>,
    /// KV-cache block size in tokens (vLLM's --block-size; default 16, 64 with FLASHMLA).
    #[arg(long, help_heading = "Deployment")]
    pub(crate) block_size: Option<u32>,

    /// The link A↔F hand-offs take, for what-if questions:
    /// `attention-ffn=KIND[,gbps=..,latency-us=..,chunk-kib=..,efficiency=..,nics=..]` with KIND one
    /// of pcie-gen4, pcie-gen5, ib, roce, tcp (traces/data/hardware/datasheets.json; gbps in Gb/s,
    /// nics per host shared by the role's ranks). Without it, roles whose VLLM_HOST_IP differ talk
    /// over tcp and roles on one host over the GPUs' own link.
    #[arg(long, value_name = "PATH=LINK", help_heading = "Model and hardware")]
    pub(crate) link: Option<String>,
    #[command(flatten)]
    pub(crate) hardware: HardwareArgs,
    #[command(flatten)]
    pub(crate) workload: WorkloadArgs,

    /// Seed of every random draw (lengths, arrivals, routing); the same seed gives the same run.
    #[arg(long, default_value_t = 0, help_heading = "Run and output")]
    pub(crate) seed: u64,
    /// Print the report as JSON: a drop-in for `vllm bench serve --save-result` (its field names
    /// at the top level, plus the AFD figures).
    #[arg(long, help_heading = "Run and output")]
    pub(crate) json: bool,
    /// Percentiles --json reports as p{P}_{METRIC}_ms, comma-separated (vllm bench serve flag).
    #[arg(long, default_value = "99", help_heading = "Run and output")]
    pub(crate) metric_percentiles: String,
    /// Metrics of --metric-percentiles, comma-separated of ttft, tpot, itl, e2el (vllm bench serve flag).
    #[arg(long, default_value = "ttft,tpot,itl", help_heading = "Run and output")]
    pub(crate) percentile_metrics: String,
    /// Goodput objectives METRIC:MS (ttft, tpot, e2el), e.g. --goodput ttft:500 tpot:50; --json then
    /// reports request_goodput, the good requests per second (vllm bench serve flag).
    #[arg(long, num_args = 1.., value_name = "METRIC:MS", help_heading = "Run and output")]
    pub(crate) goodput: Vec<String>,
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
    check_outputs(&[
        ("--requests-csv", args.requests_csv.as_deref()),
        ("--steps-csv", args.steps_csv.as_deref()),
        ("--timeline", args.timeline.as_deref()),
    ])?;
    let percentiles = Percentiles::parse(&args.percentile_metrics, &args.metric_percentiles)?;
    let goodput = args
        .goodput
        .iter()
        .map(|text| Objective::parse(text))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let inputs = match Inputs::from_args(args)? {
        Ok(inputs) => inputs,
        Err(findings) => {
            // The deployment breaks the plugin's rules: say which, as `afd-sim check` does.
            eprint!("{findings}");
            return Ok(ExitCode::from(2));
        }
    };
    let progress = Progress::new(inputs.workload.requests.len() as u64, "requests");
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
    let rows = request_rows(&result, &inputs.workload);
    warn_failures(&rows);
    // Every output file or none (a bad second path must not leave the first behind).
    let mut files: Vec<(&std::path::Path, Vec<u8>)> = Vec::new();
    if let Some(path) = &args.requests_csv {
        files.push((path, csv_bytes(&rows)?));
    }
    if let Some(path) = &args.steps_csv {
        files.push((path, csv_bytes(&step_rows(&result.steps))?));
    }
    if let (Some(path), Some(sink)) = (&args.timeline, &result.spans) {
        let trace = timeline(sink, &result.summary.layout);
        files.push((path, trace.to_json().into_bytes()));
    }
    let files: Vec<(&std::path::Path, &[u8])> =
        files.iter().map(|(p, b)| (*p, b.as_slice())).collect();
    write_all_atomically(&files)?;
    if args.json {
        let inputs = SaveResultInputs {
            model_id: &args.hardware.model,
            num_prompts: inputs.workload.requests.len(),
            // A ramped run is recorded as vLLM records it: `--request-rate inf` and the ramp.
            request_rate: match args.workload.ramp_up() {
                Some(_) => "inf",
                None => args.workload.request_rate(),
            },
            ramp_up: args.workload.ramp_up(),
            burstiness: args.workload.burstiness,
            max_concurrency: parse_concurrency(args.workload.max_concurrency())?,
            percentiles: &percentiles,
            goodput: &goodput,
        };
        emit(&add_save_result_fields(
            &report.to_json(),
            &rows,
            &inputs,
            wall_clock_now(),
        )?)?;
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
        let model = read_model(&args.hardware.model)?;
        let link_spec = args.link.as_deref().map(parse_link_flag).transpose()?;
        let Served {
            config,
            placement,
            dummy_weights,
            async_scheduling,
            caveats,
        } = match serving_config(args, &model)? {
            Ok(found) => found,
            Err(findings) => return Ok(Err(findings)),
        };
        for caveat in &caveats {
            eprintln!("{caveat}");
        }
        if dummy_weights && (placement != Placement::Plain || args.kernel_model) {
            eprintln!(
                "note: the deployment fills its weights at random (--load-format dummy); such a model's \
                 decode tokens reach few experts, so its decode steps run faster than the kernel model's \
                 even routing prices them (docs/fidelity.md, \"Why a replayed decode step is cheap here\")"
            );
        }
        config.validate().context("invalid deployment")?;
        let popularity = parse_routing(&args.hardware.routing)?;
        let mut cost = cost_model(
            &args.hardware.cost_source(),
            &model,
            config.gpu,
            config.cost_layout(),
        )?;
        if link_spec.is_some() && placement == Placement::Plain {
            bail!("--link attention-ffn needs an AFD deployment; this one is a plain vLLM server");
        }
        let sheets = afd_traces::hardware::builtin_datasheets();
        let different_hosts = matches!(placement, Placement::TwoHosts { .. });
        if let Some(link) = afd_link(link_spec.as_ref(), different_hosts, &sheets)
            .context("--link attention-ffn")?
        {
            // The ranks of a host share its NICs: a role's ranks on its one host, or the most
            // ranks of one role on any host when a role is spread over hosts.
            let ranks_on_host = match placement {
                Placement::TwoHosts { ranks_on_host } => ranks_on_host,
                _ => config.attention_ranks().max(config.ffn_ranks()),
            };
            cost = cost.with_afd_link(AfdLink {
                link,
                ranks_on_host,
            });
        }
        let seed = Seed(args.seed);
        let (workload, dataset) = args.workload.workload(seed)?;
        let mut options = RunOptions::new(seed);
        if !args.kernel_model {
            let server = RealServer {
                config: &config,
                pair: placement != Placement::Plain,
                dummy_weights,
                async_scheduling,
                popularity,
                warm_kernels: args.warm_kernels,
            };
            let profile = engine_profile(args.engine.as_deref(), config.gpu)?;
            cost = with_real_engine(cost, server, profile, &model, &workload, &mut options)?;
        }
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

/// A plain server the built-in engine profile measured is priced as real vLLM 0.26.0 runs it: the
/// profile's step periods, its front end (text prompts, as `vllm bench serve` sends them) and
/// asynchronous scheduling, as `afd-sim compare` prices it (docs/fidelity.md). An AFD pair takes
/// the front end and asynchronous scheduling (its Attention server's API server and engine core are
/// vLLM's own; the plugin keeps the batch queue, `afd_plugin/compat/patches/engine_core.py:151-179`)
/// and vLLM's host pace for what its roles issue op by op (`CostModel::with_vllm_host`); no step
/// of an AFD role was measured, so its kernels keep the kernel model. Any other deployment keeps
/// the kernel model, and says so. A server that loads its weights replays the decode graphs of a
/// trained model's routing, not the profile's dummy weights' (`EngineModel::serving`).
fn with_real_engine(
    cost: CostModel,
    server: RealServer<'_>,
    profile: Option<EngineProfile>,
    model: &ModelArch,
    workload: &Workload,
    options: &mut RunOptions,
) -> anyhow::Result<CostModel> {
    let config = server.config;
    let Some(EngineProfile { profile, source }) = profile else {
        eprintln!(
            "note: no engine profile measured {}: priced from kernels alone (an `afd-sim engine-profile` of your own `afd-probe vllm` runs, given as --engine FILE, prices it as real vLLM runs it)",
            config.gpu.as_str()
        );
        return Ok(cost);
    };
    if source.is_none() && !afd_sim::vllm_compare::is_engine_profiled_model(model) {
        eprintln!(
            "note: the built-in {} engine profile measured DeepSeek-V2-Lite; {} is priced from kernels alone",
            profile.gpu, model.name
        );
        return Ok(cost);
    }
    let named = match &source {
        Some(path) => format!("the engine profile {}", path.display()),
        None => format!("the built-in {} engine profile", profile.gpu),
    };
    let engine = std::sync::Arc::new(afd_sim::model::engine::EngineModel::new(profile.clone()));
    let (cost, priced) = price_as_vllm(cost, server, &engine, workload, options);
    match priced {
        VllmPricing::Unpriced => eprintln!(
            "note: the engine profile prices {}; this server runs {}, priced from kernels alone",
            engine.mode_names().join(", "),
            config.graph.name()
        ),
        VllmPricing::Pair => {
            eprintln!(
                "note: the Attention server's front end and asynchronous scheduling priced as real vLLM {} runs them ({named}), and each role's host issue of a step without graphs as its share of a plain vLLM step of the same shape (divided {}); an AFD role's steps were never measured, so their kernels keep the kernel model (--kernel-model prices the pair from kernels alone)",
                profile.vllm_version,
                afd_sim::model::engine::division_words(&profile)
            );
            if !engine.prices(&afd_sim::serving::GraphMode::Eager) {
                eprintln!(
                    "note: the engine profile has no eager steps: the FFN role's issue of a step without graphs keeps the kernel model"
                );
            }
        }
        VllmPricing::Plain { trained_weights } => {
            eprintln!(
                "note: priced as real vLLM {} runs it ({named}; --kernel-model prices it from kernels alone)",
                profile.vllm_version
            );
            if profile.jit_compile_ns > 0 && !server.warm_kernels {
                eprintln!(
                    "note: a freshly started server: the first step that needs each fused-MoE kernel specialization start-up did not compile waits {:.0} ms for vLLM's Triton compile (--warm-kernels prices a server past them; `afd-sim warm-up` lists the prompts that take a real one there)",
                    profile.jit_compile_ns as f64 / 1e6
                );
            }
            if let Some(caveat) = afd_sim::vllm_compare::engine_layout_caveat(config) {
                eprintln!("{caveat}");
            }
            if trained_weights {
                eprintln!(
                    "note: the profile's replayed decode steps served dummy weights, whose router sends every \
                     token of a layer to the same six experts; this server loads its weights, so each is priced \
                     with those experts swapped for the ones its routing reads (docs/fidelity.md, \"The \
                     twenty-fifth batch\"; --load-format dummy prices the dummy model)"
                );
            }
        }
    }
    Ok(cost)
}

/// An engine profile `--real-engine` prices with, and the file it came from (`None`: built in).
pub(crate) struct EngineProfile {
    pub(crate) profile: afd_traces::vllm_run::VllmEngineProfile,
    source: Option<PathBuf>,
}

/// `--engine FILE`, else the GPU's built-in engine profile (`None` when it has none). A file that
/// measured another GPU kind than the deployment's is an error: its steps are that GPU's.
pub(crate) fn engine_profile(
    file: Option<&std::path::Path>,
    gpu: afd_sim::model::hardware::GpuKind,
) -> anyhow::Result<Option<EngineProfile>> {
    use afd_traces::vllm_run::VllmEngineProfile;
    let Some(path) = file else {
        let Some(text) = afd_traces::vllm_run::builtin_engine_profile(gpu.as_str()) else {
            return Ok(None);
        };
        let profile = VllmEngineProfile::from_json(text).context("the built-in engine profile")?;
        return Ok(Some(EngineProfile {
            profile,
            source: None,
        }));
    };
    let profile = crate::cli::vllm::read_engine_profile(path)?;
    match afd_sim::model::hardware::GpuKind::of_device_name(&profile.gpu) {
        Some(kind) if kind == gpu => {}
        Some(kind) => bail!(
            "--engine {}: the profile measured {} ({}), the deployment runs on {} (--gpu)",
            path.display(),
            profile.gpu,
            kind.as_str(),
            gpu.as_str()
        ),
        None => bail!(
            "--engine {}: the profile measured {:?}, not a GPU kind afd-sim knows",
            path.display(),
            profile.gpu
        ),
    }
    Ok(Some(EngineProfile {
        profile,
        source: Some(path.to_owned()),
    }))
}

/// The deployment `predict` simulates, as its command lines give it.
struct Served {
    config: ServingConfig,
    placement: Placement,
    /// Whether a server fills its weights at random (`--load-format dummy`).
    dummy_weights: bool,
    /// Whether the (Attention) server schedules one step ahead (`RoleConfig::async_scheduling`).
    async_scheduling: bool,
    /// What the prediction leaves out (`Launch::caveats`), for stderr.
    caveats: Vec<String>,
}

/// The recipe or command lines given (else the seed recipe) with every deployment flag rendered
/// into their words and judged by the rules (and memory for `model`) as `check` judges them;
/// `Err(findings)` when the deployment breaks a rule or does not fit.
fn serving_config(args: &PredictArgs, model: &ModelArch) -> anyhow::Result<Result<Served, String>> {
    let gpu = args.hardware.gpu()?;
    if args.no_dbo
        && (args.dbo_decode_token_threshold.is_some() || args.dbo_prefill_token_threshold.is_some())
    {
        bail!("--no-dbo conflicts with --dbo-*-token-threshold");
    }
    let overrides = overrides(args);
    let (launch, report) = match checked(load(&args.deployment, &overrides, gpu)?, gpu, model) {
        Ok(checked) => checked,
        Err(findings) => return Ok(Err(findings)),
    };
    let config = launch
        .serving_config(gpu, model)
        .context("the deployment cannot be simulated")?;
    let placement = match &launch {
        Launch::Plain(_) => Placement::Plain,
        Launch::Afd(deployment) if deployment.on_different_hosts() => {
            warn_collectives_across_hosts(deployment);
            let most = [Role::Attention, Role::Ffn]
                .map(|role| deployment.max_ranks_per_host(role))
                .into_iter()
                .max()
                .unwrap_or(1);
            Placement::TwoHosts {
                ranks_on_host: u32::try_from(most).unwrap_or(u32::MAX),
            }
        }
        Launch::Afd(_) => Placement::OneHost,
    };
    Ok(Ok(Served {
        config,
        placement,
        dummy_weights: launch.dummy_weights(),
        async_scheduling: launch.async_scheduling(),
        caveats: launch.caveats(&report),
    }))
}

/// Where the servers run, as far as the A↔F link goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    Plain,
    OneHost,
    /// Some A↔F hand-offs cross hosts; at most `ranks_on_host` ranks of one role share a host.
    TwoHosts {
        ranks_on_host: u32,
    },
}

/// Says on stderr what the model leaves out when the FFN role (the one that runs the MoE) spans
/// hosts with expert parallelism: its EP all-to-all then crosses the network, and is priced over
/// the GPUs' own link. (Attention DP ranks run no collective between them, afd-spec §3.)
fn warn_collectives_across_hosts(deployment: &afd_sim::deployment::Deployment) {
    let hosts = deployment.role_hosts(Role::Ffn);
    if hosts.len() > 1 && deployment.ffn.expert_parallel() {
        eprintln!(
            "note: the FFN role's expert-parallel all-to-all spans hosts {}; afd-sim prices it over the GPUs' own link, not the network between them",
            hosts.join(", ")
        );
    }
}

/// Says on stderr why requests failed (vLLM prints the first errors too), at most three reasons.
fn warn_failures(rows: &[afd_traces::report::RequestRow]) {
    let mut reasons: std::collections::BTreeMap<&str, (usize, u64)> = Default::default();
    for row in rows.iter().filter(|r| !r.error.is_empty()) {
        reasons.entry(&row.error).or_insert((0, row.request)).0 += 1;
    }
    let failed: usize = reasons.values().map(|(n, _)| n).sum();
    if failed == 0 {
        return;
    }
    eprintln!("warning: {failed} of {} requests failed:", rows.len());
    for (reason, (n, first)) in reasons.iter().take(3) {
        eprintln!("  {n} × {reason} (first: request {first})");
    }
    if reasons.len() > 3 {
        eprintln!(
            "  … and {} other reasons (see --requests-csv)",
            reasons.len() - 3
        );
    }
}

/// The wall clock, only for the report's `date` field.
#[expect(
    clippy::disallowed_methods,
    reason = "vLLM's --save-result records the run's date; the simulation never reads wall time"
)]
fn wall_clock_now() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

/// `predict`'s deployment flags as overrides of the servers' words.
fn overrides(args: &PredictArgs) -> Overrides {
    Overrides {
        attention_dp: args.attention_dp,
        attention_tp: args.attention_tp,
        ffn_dp: args.ffn_dp,
        ffn_tp: args.ffn_tp,
        no_expert_parallel: args.no_expert_parallel,
        max_num_seqs: args.max_num_seqs,
        max_num_batched_tokens: args.max_num_batched_tokens,
        enable_dbo: args.enable_dbo,
        no_dbo: args.no_dbo,
        dbo_decode_token_threshold: args.dbo_decode_token_threshold,
        dbo_prefill_token_threshold: args.dbo_prefill_token_threshold,
        ubatch_size: args.ubatch_size,
        enforce_eager: args.enforce_eager,
        cudagraph_capture_sizes: args.cudagraph_capture_sizes.clone(),
        max_cudagraph_capture_size: args.max_cudagraph_capture_size,
        gpu_memory_utilization: args.gpu_memory_utilization,
        max_model_len: args.max_model_len,
        block_size: args.block_size,
    }
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

#[cfg(test)]
mod tests;
