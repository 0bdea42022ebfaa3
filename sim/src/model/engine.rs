//! The real vLLM engine's step costs beyond its kernels: what makes a measured vLLM 0.26 step on one
//! GPU cost what it costs, priced from fixed-shape measurements (`afd-probe vllm`).
//!
//! vLLM 0.26 schedules asynchronously by default (vllm/config/vllm.py:1059-1107): the host prepares
//! step n+1 (scheduler, input preparation, Python dispatch of the forward, sampler, output
//! processing) while the GPU runs step n, and step n's tokens leave only once step n+1 is issued
//! (vllm/v1/engine/core.py `step_with_batch_queue`), so a step's period is the larger of its host
//! path and its GPU work, and a step issued op by op holds the host, and the last step's tokens,
//! for that long ([`EngineStepCost`]; the run applies it, `engine.rs`). The host path depends on how
//! the forward is issued
//! (vllm/v1/worker/gpu/cudagraph_utils.py `dispatch`):
//! - a uniform decode batch under `FULL_DECODE_ONLY` or `FULL_AND_PIECEWISE` replays a captured CUDA
//!   graph: one launch, and the period measured for that batch size is the whole story;
//! - under `FULL_AND_PIECEWISE` a non-uniform batch of at most the largest capture size replays the
//!   piecewise graphs (attention runs between them): 12-18 ms for DeepSeek-V2-Lite on the lent H200;
//! - every other batch runs the torch.compile'd model without graphs (55-95 ms, host-bound up to a
//!   few thousand tokens), and every batch under `--enforce-eager` runs op by op from Python (a host
//!   floor of 60-80 ms), while a full 8,192-token prefill is bound by its kernels (Triton fused MoE
//!   with vLLM's default config, FLASH_ATTN_MLA prefill), priced per scheduled token.
//!
//! [`derive`] turns fixed-shape records (and calibration bench runs) into an [`VllmEngineProfile`];
//! [`EngineModel`] prices a planned step from one. Mixed steps come from requests injected into
//! standing decode bursts (the gap the step leaves in the standing streams; one prompt length beside
//! two batches prices what each decode adds to the step); decode periods from the
//! probe's bursts, replaced where `vllm bench serve`'s own calibration runs measured the same batch
//! engine-bound (the client the judged runs use shares the host). This module reads no file: the
//! caller hands it parsed runs or a profile. The front end's terms (latency, serial intake, what
//! text prompts add, the serial cost per streamed token) are derived here and applied by the run
//! (`RunOptions::frontend_intake`, `frontend_token`). A decode step pays its table period plus a
//! per-context-token term for contexts longer than the table's bursts'.

use std::collections::{BTreeMap, BTreeSet};

use afd_traces::vllm_run::{
    EngineModeCosts, EngineStep, FixedShapeRequest, PromptForm, VLLM_ENGINE_FORMAT,
    VLLM_ENGINE_SCHEMA_VERSION, VllmEngineProfile, VllmRun, WorkloadKind, WorkloadRecord,
};

use crate::deployment::{CudaGraphMode, GpuClass, RoleConfig};
use crate::serving::{GraphMode, ServingConfigError, plain_graph_mode};
use crate::step::StepShape;

/// The engine mode name of `--enforce-eager`.
pub const EAGER: &str = "eager";
/// The engine mode name of `cudagraph_mode` `FULL_DECODE_ONLY`.
pub const FULL_DECODE_ONLY: &str = "full-decode-only";
/// The engine mode name of `cudagraph_mode` `FULL_AND_PIECEWISE`, vLLM 0.26's default.
pub const FULL_AND_PIECEWISE: &str = "full-and-piecewise";

/// The largest capture size vLLM 0.26 picks by default for a batch limit (config/vllm.py:1789-1845):
/// twice `max_num_seqs`, at most 512, and never above the token budget.
fn default_max_capture(max_num_seqs: u32, budget: u32) -> u32 {
    (2 * max_num_seqs).min(512).min(budget)
}
/// An injected request's step that took this many times the standing batch's own period was a
/// first-use compile (Triton compiles a kernel the first time a shape bucket runs), not a step.
const COMPILE_STALL_RATIO: f64 = 3.0;

/// Longest prompt of a decode-table burst: its steps attend to short contexts.
const DECODE_TABLE_MAX_INPUT: u32 = 512;
/// Shortest isolated prompt of the front end's chunk regression.
const CHUNK_REGRESSION_MIN_INPUT: u32 = 256;
/// Fewest non-uniform steps a fixed-shape record needs to price the non-uniform table.
const TABLE_MIN_STEPS: usize = 4;
/// Fewest prompts a calibration bench run sends at once to price the bench client's connections
/// ([`connect_s`]): below it the connections open within the first step.
const CONNECT_MIN_BURST: u32 = 64;
/// Fewest prompts of a cached burst that measures the front end's intake.
const INTAKE_MIN_BURST: u32 = 128;
/// Largest burst that prices the non-uniform table: the front end takes requests in one at a time
/// (about 1.5 ms each on the lent H200's host, the cached `fx-fe` burst), so a larger burst's span
/// is mostly intake.
const TABLE_MAX_BURST: u32 = 64;
/// Most streams the probe's own client keeps pace with: it fell behind a graph-replayed engine above
/// 64 (13.9 ms a token at 128 streams where the engine stepped in 5.6 ms), so a larger streamed burst
/// prices a graph mode's decode table only beside an unstreamed pair of its batch.
const PROBE_STREAM_MAX_BATCH: u32 = 64;
/// Fewest prompts of a cached text burst paired with a token-id one to price text intake.
const TEXT_PAIR_MIN_BURST: u32 = 64;
/// A streamed pace this many times the engine's own is the front end's, not the engine's.
const FRONTEND_BOUND_RATIO: f64 = 1.25;
/// A standing stream's gap this many times its burst's median is a step that prefilled beside it.
const MIXED_GAP_RATIO: f64 = 1.5;
/// Largest standing burst whose injected requests price the front end's latency: beside more
/// streams the front end's own backlog of tokens (`stream_token_ns` each) enters the first token.
const STEPPING_FRONTEND_MAX_BATCH: u32 = 16;
/// Injected requests sent closer together than this share their steps' stalls: none of them prices
/// a step or the front end alone.
const CASCADE_S: f64 = 0.25;

/// Records whose mean scheduled tokens are within this factor of a group's first are one group.
const TABLE_GROUP_RATIO: f64 = 1.5;
/// The least token budget whose full prefill steps are priced by their kernels: a step of 4,096
/// tokens or more takes longer on the lent H200 than the host path that issues it (an 8,192-token
/// step about 90 ms against a 55-80 ms floor), a smaller one is the host's floor.
const GPU_BOUND_BUDGET: u64 = 4096;
/// Prompt lengths of the isolated prefills that give the non-uniform floor.
const FLOOR_INPUTS: std::ops::RangeInclusive<u32> = 1024..=4096;

/// Why fixed-shape records could not make a profile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineProfileError {
    #[error(
        "{file}: {reason}; only --enforce-eager, FULL_DECODE_ONLY and FULL_AND_PIECEWISE are priced"
    )]
    Mode { file: String, reason: String },
    #[error("{mode}: no {what} among the fixed-shape records of {files}")]
    Missing {
        mode: String,
        what: &'static str,
        files: String,
    },
    #[error(
        "{file}: its server ran with --enable-return-routed-experts, which copies every token's \
         experts to the host each step: a run that counts experts, not one that prices steps"
    )]
    Routing { file: String },
    #[error("the runs are of different {what}: {a:?} and {b:?}")]
    Mixed {
        what: &'static str,
        a: String,
        b: String,
    },
}

/// A run's serve words (and environment) as vLLM reads them: every spelling it accepts (`-O<n>`,
/// dotted JSON keys, underscores), through the deployment parser `check` and `compare` use.
fn serve_role(run: &VllmRun) -> Result<RoleConfig, String> {
    RoleConfig::from_serve_args_with_env(&run.serve_args, &run.server_env)
        .map_err(|e| format!("the serve words do not parse ({e})"))
}

/// The engine mode a run's serve words select, as vLLM resolves it with the attention backend the
/// server logged ([`crate::serving::plain_graph_mode`], which `compare` and `predict` use too), or
/// why it is not one the profile prices.
pub fn run_mode(run: &VllmRun) -> Result<&'static str, String> {
    let role = serve_role(run)?;
    if role.enforce_eager() {
        return Ok(EAGER);
    }
    let mla = run
        .backends
        .get("attention_backend")
        .is_some_and(|line| line.contains("MLA attention backend"));
    match plain_graph_mode(&role, mla) {
        Ok(CudaGraphMode::FullDecodeOnly) => Ok(FULL_DECODE_ONLY),
        Ok(CudaGraphMode::FullAndPiecewise) => Ok(FULL_AND_PIECEWISE),
        Ok(mode) => Err(format!("the serve words run cudagraph mode {mode}")),
        Err(ServingConfigError::PlainFullGraphs) => Err(format!(
            "the serve words ask for cudagraph mode {} and the server logged no MLA attention \
             backend to resolve it",
            role.cudagraph_mode()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// Derives the engine profile from runs (`names[i]` names `runs[i]` in the evidence), without
/// their server logs (no first-use compile is priced).
pub fn derive(runs: &[VllmRun], names: &[String]) -> Result<VllmEngineProfile, EngineProfileError> {
    derive_with_logs(runs, names, &[], None)
}

/// The routed experts and experts per token of the model the runs served (the fused-MoE kernel's
/// specializations depend on them, [`JitCache`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeShape {
    pub experts: u32,
    pub top_k: u32,
}

/// [`derive`], with `logs[i]` the steps of `runs[i]`'s server log (every line, start-up and warm-ups
/// included; empty when none was kept): with `moe`, the first-use compile is priced from them
/// ([`VllmEngineProfile::jit_compile_ns`]).
pub fn derive_with_logs(
    runs: &[VllmRun],
    names: &[String],
    logs: &[Vec<EngineStep>],
    moe: Option<MoeShape>,
) -> Result<VllmEngineProfile, EngineProfileError> {
    let mut by_mode: BTreeMap<&'static str, Vec<(&str, &VllmRun)>> = BTreeMap::new();
    for (run, name) in runs.iter().zip(names) {
        if serve_role(run).is_ok_and(|role| role.returns_routed_experts()) {
            return Err(EngineProfileError::Routing { file: name.clone() });
        }
        let mode = run_mode(run).map_err(|reason| EngineProfileError::Mode {
            file: name.clone(),
            reason,
        })?;
        by_mode.entry(mode).or_default().push((name, run));
    }
    same_setup(runs)?;
    let first = runs.first();
    let all_runs: Vec<(&str, &VllmRun)> =
        names.iter().map(String::as_str).zip(runs.iter()).collect();
    let frontend_s = lone_frontend_s(runs, names, &by_mode, &all_runs)?;
    let derived: Vec<(EngineModeCosts, Vec<Injected>)> = by_mode
        .iter()
        .map(|(mode, runs)| mode_costs(mode, runs, frontend_s, &all_runs))
        .collect::<Result<_, _>>()?;
    let intake_s = pooled_by_server(runs, names, intake_s);
    let eager_runs = by_mode.get(EAGER).map_or(&[][..], Vec::as_slice);
    let (frontend_s, idle_start_s, read) =
        split_frontend_s(&derived, frontend_s, intake_s, eager_runs);
    let mut modes: Vec<EngineModeCosts> = derived.into_iter().map(|(costs, _)| costs).collect();
    note_frontend_reading(&mut modes, read);
    share_decode_context(&mut modes);
    share_graphless_decode(&mut modes);
    let stream_token_s = stream_token_s(&by_mode, &mut modes);
    let sources = runs
        .iter()
        .zip(names)
        .map(|(r, n)| format!("{n} ({})", r.provenance.date_utc))
        .collect();
    Ok(VllmEngineProfile {
        format: VLLM_ENGINE_FORMAT.into(),
        schema_version: VLLM_ENGINE_SCHEMA_VERSION,
        gpu: first.map(gpu_name).unwrap_or_default(),
        model: first.map(|r| r.serve_args[0].clone()).unwrap_or_default(),
        vllm_version: first
            .map(|r| r.provenance.vllm_version.clone())
            .unwrap_or_default(),
        cpu_model: first
            .map(|r| r.provenance.cpu_model.clone())
            .unwrap_or_default(),
        cpu_cores: first.map_or(0, |r| r.provenance.cpu_cores),
        sources,
        frontend_ns: (frontend_s * 1e9).round() as u64,
        idle_start_ns: (idle_start_s * 1e9).round() as u64,
        intake_ns: (intake_s * 1e9).round() as u64,
        stream_token_ns: (stream_token_s.unwrap_or(0.0) * 1e9).round() as u64,
        text_token_ns: median(runs.iter().flat_map(text_token_s).collect())
            .map_or(0.0, |s| (s * 1e9 * 1000.0).round() / 1000.0),
        modes,
        dummy_weights: first.is_some_and(dummy_weights),
        connect_ns: (pooled_by_server(runs, names, connect_s) * 1e9).round() as u64,
        jit_compile_ns: moe
            .and_then(|moe| jit_compile_s(runs, logs, moe))
            .map_or(0, |s| (s * 1e9).round() as u64),
        role_division: Vec::new(),
    })
}

/// The front end's latency a lone prompt on an idle engine met (one process, whatever the engine's
/// mode), before [`split_frontend_s`] tells the running engine's part apart.
fn lone_frontend_s(
    runs: &[VllmRun],
    names: &[String],
    by_mode: &BTreeMap<&'static str, Vec<(&str, &VllmRun)>>,
    all_runs: &[(&str, &VllmRun)],
) -> Result<f64, EngineProfileError> {
    // The front end's latency (one process, whatever the engine's mode). Best: lone prompts that
    // one piecewise-graph step prefills, less that step as standing bursts priced it. Else the
    // intercept of lone prompts' first tokens against their chunk counts, median over servers; else
    // a one-token-step request's first token less its step's period, the least over modes.
    let regressed: Vec<f64> = runs.iter().filter_map(chunked_frontend_s).collect();
    let provisional_s = median(regressed).unwrap_or_else(|| {
        by_mode
            .values()
            .filter_map(|runs| frontend_s(runs))
            .fold(f64::INFINITY, f64::min)
    });
    let frontend_s = by_mode
        .get(FULL_AND_PIECEWISE)
        .and_then(|runs| {
            // The piecewise table comes from injected requests alone, whatever the front end.
            let any_s = if provisional_s.is_finite() {
                provisional_s
            } else {
                0.0
            };
            let (costs, _) = mode_costs(FULL_AND_PIECEWISE, runs, any_s, all_runs).ok()?;
            one_step_frontend_s(runs, &costs.piecewise_period_ns)
        })
        .map(|f| f.max(0.0))
        .unwrap_or(provisional_s);
    if !frontend_s.is_finite() {
        return Err(EngineProfileError::Missing {
            mode: "any".into(),
            // The three readings `frontend_s` may come from, in the order `derive` tries them.
            what: "reading of the front end's latency (lone prompts of 256 tokens or more at two \
                   chunk counts on one server; a lone prompt within a FULL_AND_PIECEWISE server's \
                   capture size; or a lone prompt of 1,024 tokens or more beside a burst of 8 or \
                   more prompts filling 4 or more full-budget steps of 4,096 tokens or more, as \
                   gpu-probes/plans/engine-dsv2l-eager-256-8192-r2.json holds both)",
            files: names.join(", "),
        });
    }
    Ok(frontend_s)
}

/// The graph mode a run's server ran, with its capture sizes ([`JitCache::at_start`]).
fn run_graph(run: &VllmRun) -> Option<(GraphMode, u32, u32)> {
    let role = serve_role(run).ok()?;
    let (seqs, budget) = limits_of(run, &role)?;
    let mode = match run_mode(run).ok()? {
        EAGER => CudaGraphMode::None,
        FULL_DECODE_ONLY => CudaGraphMode::FullDecodeOnly,
        _ => CudaGraphMode::FullAndPiecewise,
    };
    let graph = GraphMode::resolve(mode, role.capture_sizes_at(seqs, budget), seqs);
    Some((graph, seqs, budget))
}

/// The distinct fused-MoE kernel token counts of the steps `run`'s server ran before its record
/// `record` (start-up aside), ascending: from its server log's steps `log` (warm-ups included) where
/// kept, else from the run file's earlier records. What a comparison of that record starts with
/// compiled ([`JitCache`]); empty where the run's serve words do not give its mode.
pub fn kernel_history(run: &VllmRun, log: &[EngineStep], record: usize) -> Vec<u32> {
    let Some((graph, ..)) = run_graph(run) else {
        return Vec::new();
    };
    let earlier = || run.records[..record.min(run.records.len())].iter();
    let before: Vec<&EngineStep> = if log.is_empty() {
        earlier().flat_map(|r| &r.steps).collect()
    } else {
        let first = run.records.get(record).and_then(|r| r.steps.first());
        let last_earlier = earlier().flat_map(|r| r.steps.last()).last();
        match (first, last_earlier) {
            (Some(first), _) => log
                .iter()
                .filter(|s| s.iteration < first.iteration)
                .collect(),
            (None, Some(last)) => log
                .iter()
                .filter(|s| s.iteration <= last.iteration)
                .collect(),
            (None, None) => Vec::new(),
        }
    };
    // Thousands of steps share a few hundred token counts; a count compiles its kernels once.
    let distinct: BTreeSet<u32> = before
        .into_iter()
        .filter_map(|s| logged_kernel_tokens(&graph, s))
        .collect();
    distinct.into_iter().collect()
}

/// The fused-MoE kernels' token count of a logged step on a server of `graph` mode: `None` where
/// it replays a full decode graph (a uniform decode batch within the largest capture size).
fn logged_kernel_tokens(graph: &GraphMode, step: &EngineStep) -> Option<u32> {
    let tokens = step.ctx_tokens + step.gen_tokens;
    // `padded_size` is None without full decode graphs (eager, the compiled model alone).
    let replayed = step.ctx_requests == 0 && graph.padded_size(tokens).is_some();
    JitCache::kernel_tokens(graph, replayed, tokens)
}

/// [`VllmEngineProfile::jit_compile_ns`], seconds: each server's log walked from its start, the
/// specializations it compiled tracked as vLLM's rules give them ([`JitCache`]); a step that first
/// needs one, in a warm-up or a fixed-shape record (never a bench run), on a running engine whose
/// lines are stamped, against the median period of the server's other steps without a full graph of
/// half to twice its kernel tokens. The median over servers of each server's median.
fn jit_compile_s(runs: &[VllmRun], logs: &[Vec<EngineStep>], moe: MoeShape) -> Option<f64> {
    let per_server = runs.iter().zip(logs).filter_map(|(run, steps)| {
        let (graph, seqs, budget) = run_graph(run)?;
        let bench: BTreeSet<u64> = run
            .records
            .iter()
            .filter(|r| r.workload.kind == WorkloadKind::BenchServe)
            .flat_map(|r| r.steps.iter().map(|s| s.iteration))
            .collect();
        let mut cache = JitCache::at_start(&graph, seqs, budget, moe.experts, moe.top_k);
        // (kernel tokens, period s, a first use, outside a bench run)
        let mut seen: Vec<(u32, f64, bool, bool)> = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            let Some(m) = logged_kernel_tokens(&graph, step) else {
                continue;
            };
            let first = cache.record(m);
            let period = (i >= 2).then(|| {
                let (a, b) = (&steps[i - 2], &steps[i - 1]);
                let running = a.gen_requests + b.gen_requests > 0;
                let consecutive = a.iteration + 2 == step.iteration;
                match (a.logged_s, b.logged_s) {
                    (Some(t0), Some(t1)) if running && consecutive => Some(t1 - t0),
                    _ => None,
                }
            });
            if let Some(Some(p)) = period {
                seen.push((m, p, first, !bench.contains(&step.iteration)));
            }
        }
        let excess: Vec<f64> = seen
            .iter()
            .filter(|&&(_, _, first, counted)| first && counted)
            .filter_map(|&(m, p, _, _)| {
                let like: Vec<f64> = seen
                    .iter()
                    .filter(|&&(n, _, first, _)| !first && 2 * n >= m && n <= 2 * m)
                    .map(|&(_, q, _, _)| q)
                    .collect();
                Some(p - median(like)?)
            })
            .collect();
        median(excess)
    });
    median(per_server.collect())
}

/// A uniform decode batch replays the same FULL CUDA graph under `FULL_DECODE_ONLY` and
/// `FULL_AND_PIECEWISE` (vllm/v1/worker/gpu/cudagraph_utils.py `dispatch`), so its attention's cost
/// per context token is one kernel's: a graph mode whose servers ran no long-context decode burst
/// takes the slope the other graph mode measured, and says so in its evidence. Eager decodes are the
/// host's and keep their own.
fn share_decode_context(modes: &mut [EngineModeCosts]) {
    let measured =
        |m: &EngineModeCosts| m.evidence.keys().any(|k| k.starts_with("decode_context_"));
    let Some((slope, from)) = modes
        .iter()
        .find(|m| m.mode != EAGER && measured(m))
        .map(|m| (m.decode_context_ns, m.mode.clone()))
    else {
        return;
    };
    for m in modes.iter_mut().filter(|m| m.mode != EAGER && !measured(m)) {
        m.decode_context_ns = slope;
        m.evidence.insert(
            "decode_context_shared".into(),
            format!("{from}: the same FULL graph replays its uniform decode batches"),
        );
    }
}

/// Both graph modes run the same compiled model when a batch has no graph (split at attention,
/// `vllm/config/compilation.py:1137-1146`), so a graph mode whose servers ran no decode batch past
/// their capture size takes the per-request term the other measured, and says so in its evidence.
fn share_graphless_decode(modes: &mut [EngineModeCosts]) {
    let Some((per_request, from)) = modes
        .iter()
        .find(|m| m.mode != EAGER && m.graphless_decode_ns > 0.0)
        .map(|m| (m.graphless_decode_ns, m.mode.clone()))
    else {
        return;
    };
    for m in modes
        .iter_mut()
        .filter(|m| m.mode != EAGER && m.graphless_decode_ns == 0.0)
    {
        m.graphless_decode_ns = per_request;
        m.evidence.insert(
            "graphless_decode_shared".into(),
            format!("{from}: the same compiled model runs a batch without graphs"),
        );
    }
}

/// `(latency, idle start)`: `idle_frontend_s` is what a lone prompt met on an idle engine beyond its
/// step; a request reaching a running engine meets less. With injected requests of the graph modes
/// to tell them apart ([`stepping_frontend_s`]), the running engine's latency and what the idle
/// engine's first step adds beyond it and the intake; else, with eager servers' injected requests,
/// the same read on eager steps ([`eager_split_s`]); else the lone prompts' figure alone.
fn split_frontend_s(
    derived: &[(EngineModeCosts, Vec<Injected>)],
    idle_frontend_s: f64,
    intake_s: f64,
    eager_runs: &[(&str, &VllmRun)],
) -> (f64, f64, FrontendReading) {
    let stepping = derived
        .iter()
        .filter(|(costs, _)| costs.mode != EAGER)
        .flat_map(|(_, injected)| stepping_frontend_s(injected, intake_s, 0.0));
    if let Some(stepping_s) = median_over_servers(stepping) {
        let stepping_s = stepping_s.max(0.0);
        let idle_s = (idle_frontend_s - intake_s - stepping_s).max(0.0);
        return (stepping_s, idle_s, FrontendReading::GraphInjections);
    }
    derived
        .iter()
        .find(|(costs, _)| costs.mode == EAGER)
        .and_then(|(costs, injected)| eager_split_s(costs, injected, intake_s, eager_runs))
        .map_or(
            (idle_frontend_s, 0.0, FrontendReading::LonePrompts),
            |(stepping_s, idle_s)| (stepping_s, idle_s, FrontendReading::EagerInjections),
        )
}

/// Where [`split_frontend_s`] read the front end's latency from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FrontendReading {
    GraphInjections,
    EagerInjections,
    LonePrompts,
}

/// The profile's evidence key that says where the front end's latency was read from, where it was
/// not the graph modes' injected requests (the shipped profile's reading, which writes none).
const FRONTEND_EVIDENCE: &str = "frontend";

/// [`FRONTEND_EVIDENCE`] of a front end read from lone prompts alone.
const FRONTEND_LONE_PROMPTS: &str =
    "lone prompts on an idle engine (no mode's injected requests among the runs)";

/// Whether `profile`'s front end was read from lone prompts alone (no mode's injected requests),
/// which on eager servers keeps most of a step: `engine-profile` warns of it.
pub fn frontend_from_lone_prompts(profile: &VllmEngineProfile) -> bool {
    profile.modes.iter().any(|m| {
        m.evidence.get(FRONTEND_EVIDENCE).map(String::as_str) == Some(FRONTEND_LONE_PROMPTS)
    })
}

/// What a front end read without the graph modes' injections means, in every mode's evidence
/// ([`FRONTEND_EVIDENCE`]; `engine-profile` warns on the lone prompts' reading).
fn note_frontend_reading(modes: &mut [EngineModeCosts], read: FrontendReading) {
    let said = match read {
        FrontendReading::GraphInjections => return,
        FrontendReading::EagerInjections => {
            "eager servers' injected requests, each less the next step's issue (no graph mode's \
             injected requests among the runs)"
        }
        FrontendReading::LonePrompts => FRONTEND_LONE_PROMPTS,
    };
    for m in modes {
        m.evidence.insert(FRONTEND_EVIDENCE.into(), said.into());
    }
}

/// [`split_frontend_s`] from eager servers alone. Every eager step is issued op by op, so an
/// injected request's first token leaves only once the step after its own is issued, a whole
/// standing period later ([`stepping_frontend_s`] with that period taken off too): what is left is
/// the front end on a running engine. A lone prompt on an idle engine then adds, beyond that and the
/// intake, its first token less what the model prices its step (the host's: the decode table at one
/// request and the prefill extra at its tokens) and the next step's issue (one decode); the median
/// over servers, none below zero. `None` without eager injections.
fn eager_split_s(
    costs: &EngineModeCosts,
    injected: &[Injected],
    intake_s: f64,
    runs: &[(&str, &VllmRun)],
) -> Option<(f64, f64)> {
    let stepping_s = median_over_servers(stepping_frontend_s(injected, intake_s, 1.0))?.max(0.0);
    let decode_s = interpolate(&costs.decode_period_ns, 1) as f64 / 1e9;
    let idle = lone_floor_prompts(runs)
        .into_iter()
        .map(|(name, r, ttft_s)| {
            // A profile whose injections priced no prefill extra takes the decode step alone.
            let extra = if costs.prefill_extra_ns.is_empty() {
                0
            } else {
                interpolate(&costs.prefill_extra_ns, r.workload.input_len)
            };
            let step_s = decode_s + extra as f64 / 1e9;
            (name, ttft_s - intake_s - stepping_s - step_s - decode_s)
        });
    Some((
        stepping_s,
        median_over_servers(idle).unwrap_or(0.0).max(0.0),
    ))
}

/// Every run measured one GPU kind, one model, dummy or loaded weights alike, and one vLLM version
/// (a profile prices one engine).
fn same_setup(runs: &[VllmRun]) -> Result<(), EngineProfileError> {
    let Some(first) = runs.first().map(setup) else {
        return Ok(());
    };
    for run in &runs[1..] {
        for ((what, a), (_, b)) in first.iter().zip(setup(run)) {
            if *a != b {
                return Err(EngineProfileError::Mixed {
                    what,
                    a: a.clone(),
                    b,
                });
            }
        }
    }
    Ok(())
}

/// What [`same_setup`] holds equal across runs, each with its name in the error.
fn setup(run: &VllmRun) -> [(&'static str, String); 4] {
    [
        ("GPUs", gpu_name(run)),
        ("models", run.serve_args[0].clone()),
        (
            "weights (--load-format dummy against loaded ones: their decode steps route \
             differently; derive a profile from each)",
            weights_name(run).to_owned(),
        ),
        ("vLLM versions", run.provenance.vllm_version.clone()),
    ]
}

/// Whether the run's server filled its weights at random (`--load-format dummy`).
fn dummy_weights(run: &VllmRun) -> bool {
    serve_role(run).is_ok_and(|role| role.dummy_weights())
}

fn weights_name(run: &VllmRun) -> &'static str {
    if dummy_weights(run) {
        "dummy"
    } else {
        "loaded"
    }
}

fn gpu_name(run: &VllmRun) -> String {
    run.provenance
        .gpus
        .first()
        .and_then(|g| g.split(',').next())
        .unwrap_or("")
        .trim()
        .to_owned()
}

type Fixed<'a> = (&'a str, &'a WorkloadRecord, &'a [FixedShapeRequest]);

fn fixed_records<'a>(runs: &[(&'a str, &'a VllmRun)]) -> Vec<Fixed<'a>> {
    runs.iter()
        .flat_map(|(name, run)| {
            run.records
                .iter()
                .filter(|r| r.failure.is_none() && plain_burst(&r.workload))
                .filter_map(move |r| r.fixed.as_ref().map(|f| (*name, r, f.requests.as_slice())))
        })
        .collect()
}

/// A streamed burst of token-id prompts: the shape every table below is read from (text prompts and
/// non-streamed answers price the front end's terms instead).
fn plain_burst(w: &afd_traces::vllm_run::Workload) -> bool {
    w.stream && w.prompt_form == afd_traces::vllm_run::PromptForm::Ids
}

/// Seconds from sending to the first token of a fixed-shape burst's only request.
fn isolated_ttft(requests: &[FixedShapeRequest]) -> Option<f64> {
    match requests {
        [only] => Some(only.chunk_s.first()? - only.sent_s),
        _ => None,
    }
}

/// Per-token cost of full-budget prefill steps: the spread of first tokens across one burst whose
/// prompts fill four or more steps, over the tokens prefilled after the first request's.
fn burst_token_s(
    runs: &[(&str, &VllmRun)],
    evidence: &mut BTreeMap<String, String>,
) -> Option<f64> {
    let per_token: Vec<f64> = fixed_records(runs)
        .iter()
        .filter_map(|(name, r, q)| {
            let w = &r.workload;
            let (_, run) = runs.iter().find(|(n, _)| n == name)?;
            let budget = u64::from(budget(run)?);
            let total = u64::from(w.num_prompts) * u64::from(w.input_len);
            let computed: u64 = r.steps.iter().map(|s| u64::from(s.ctx_tokens)).sum();
            // Below GPU_BOUND_BUDGET a full step is the host's floor, not its tokens'; a burst the
            // prefix cache served, or one with injected requests, spreads for other reasons.
            if w.num_prompts < 8
                || total < 4 * budget
                || budget < GPU_BOUND_BUDGET
                || !w.inject.is_empty()
                || (!r.steps.is_empty() && computed * 10 < total * 9)
            {
                return None;
            }
            let firsts: Vec<f64> = q
                .iter()
                .filter_map(|x| Some(x.chunk_s.first()? - x.sent_s))
                .collect();
            let (lo, hi) = firsts
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
            evidence.insert(
                format!("nonuniform_token_{}", w.name),
                format!("{name}:{}", w.name),
            );
            Some((hi - lo) / (total - u64::from(w.input_len)) as f64)
        })
        .collect();
    median(per_token)
}

/// The front end's latency in one mode: the longest isolated prefill's first token less its step
/// (priced at the burst's per-token cost).
fn frontend_s(runs: &[(&str, &VllmRun)]) -> Option<f64> {
    let token_s = burst_token_s(runs, &mut BTreeMap::new())?;
    fixed_records(runs)
        .iter()
        .filter(|(_, r, _)| {
            r.workload.num_prompts == 1 && r.workload.input_len >= *FLOOR_INPUTS.start()
        })
        .max_by_key(|(_, r, _)| r.workload.input_len)
        .and_then(|(_, r, q)| Some(isolated_ttft(q)? - token_s * f64::from(r.workload.input_len)))
        .map(|f| f.max(0.0))
}

fn mode_costs(
    mode: &str,
    runs: &[(&str, &VllmRun)],
    frontend_s: f64,
    all_runs: &[(&str, &VllmRun)],
) -> Result<(EngineModeCosts, Vec<Injected>), EngineProfileError> {
    let files = runs.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let missing = |what| EngineProfileError::Missing {
        mode: mode.to_owned(),
        what,
        files: files.clone(),
    };
    let fixed = fixed_records(runs);
    let mut evidence = BTreeMap::new();
    let (decode, table_contexts) = decode_bursts(runs, &fixed, false);
    let decode_period_ns = decode_table(runs, decode, (mode == EAGER, false), &mut evidence);
    if decode_period_ns.is_empty() {
        return Err(missing(
            "uniform decode burst (prompts of at most 512 tokens, 8 or more output tokens)",
        ));
    }
    let floors = isolated_prefill_steps(runs, frontend_s, &mut evidence);
    // Large prefill steps are priced by their kernels, which no mode replays as a graph: a mode
    // measured only on small budgets takes the figure every server's bursts give.
    let nonuniform_token_ns = burst_token_s(runs, &mut evidence)
        .or_else(|| burst_token_s(all_runs, &mut evidence))
        .ok_or_else(|| {
            missing(
                "burst of 8 or more prompts filling 4 or more full-budget steps of 4,096 tokens or \
                 more (gpu-probes/plans/engine-dsv2l-eager-256-8192-r2.json's fx-d256-c128 and \
                 fx-d64-c2048 are two)",
            )
        })?
        * 1e9;
    // The requests injected into standing bursts price the step tables here and the front end's
    // latency on a running engine in `derive` ([`split_frontend_s`]).
    let injected = injected_steps(runs, &decode_period_ns, mode == EAGER);
    let tables_with = |pure, evidence: &mut BTreeMap<String, String>| {
        step_tables(
            mode,
            runs,
            &injected,
            &decode_period_ns,
            frontend_s,
            pure,
            evidence,
        )
    };
    let mut tables = tables_with((None, None), &mut evidence);
    // The pairs price a step beside no decode against the tables' mixed one; the bursts' spans that
    // held such steps are then read on the same footing (`step_tables`).
    let (pure_prefill, pure_piecewise) =
        idle::pure_prefill_ratios(mode, runs, &injected, &tables, &mut evidence);
    if pure_prefill.is_some() || pure_piecewise.is_some() {
        tables = tables_with((pure_prefill, pure_piecewise), &mut evidence);
    }
    // A server measured without isolated prefills (the piecewise one) takes its table's least step.
    let nonuniform_floor_ns = match median(floors) {
        Some(floor) => (floor.max(0.0) * 1e9) as u64,
        None => tables
            .nonuniform
            .first()
            .map(|p| p.1)
            .ok_or_else(|| missing("isolated prefill of 1,024 to 4,096 tokens"))?,
    };
    let graphless_decode_ns =
        graphless_decode_s(runs, &fixed, &tables.nonuniform, &mut evidence) * 1e9;
    let decode_reference_context = median(table_contexts).unwrap_or(0.0).round() as u32;
    let decode_context_ns = context_slope_s(
        runs,
        &decode_period_ns,
        decode_reference_context,
        &mut evidence,
    ) * 1e9;
    let costs = EngineModeCosts {
        mode: mode.to_owned(),
        decode_period_ns,
        decode_context_ns: (decode_context_ns * 1000.0).round() / 1000.0,
        decode_reference_context,
        nonuniform_floor_ns,
        nonuniform_token_ns,
        nonuniform_period_ns: tables.nonuniform,
        mixed_decode_ns: (tables.mixed_decode_s * 1e9).round(),
        graphless_decode_ns: graphless_decode_ns.round(),
        prefill_extra_ns: tables.prefill_extra,
        piecewise_period_ns: tables.piecewise,
        piecewise_max_tokens: tables.piecewise_max_tokens,
        piecewise_decode_ns: (tables.piecewise_decode_s * 1e9).round(),
        pure_prefill_ratio: pure_prefill.map(|p| p.ratio),
        pure_piecewise_ratio: pure_piecewise.map(|p| p.ratio),
        pure_prefill_max_tokens: pure_prefill.map(|p| p.max_tokens),
        pure_piecewise_max_tokens: pure_piecewise.map(|p| p.max_tokens),
        evidence,
    };
    Ok((costs, injected))
}

/// Isolated prefills of [`FLOOR_INPUTS`] tokens that fit their server's budget: their first token,
/// less the front end, is one non-uniform step (the mode's floor). A prompt the budget chunks is
/// as many steps as chunks (a 1,024-token prompt at 64/64 is sixteen), no floor.
fn isolated_prefill_steps(
    runs: &[(&str, &VllmRun)],
    frontend_s: f64,
    evidence: &mut BTreeMap<String, String>,
) -> Vec<f64> {
    let mut prefills: Vec<(u32, f64, String)> = lone_floor_prompts(runs)
        .into_iter()
        .map(|(name, r, ttft_s)| {
            (
                r.workload.input_len,
                ttft_s - frontend_s,
                format!("{name}:{}", r.workload.name),
            )
        })
        .collect();
    prefills.sort_by_key(|p| p.0);
    for p in &prefills {
        evidence.insert(format!("floor_p{}", p.0), p.2.clone());
    }
    prefills.into_iter().map(|p| p.1).collect()
}

/// The lone prompts of [`FLOOR_INPUTS`] tokens that fit their server's budget (one step each, on an
/// idle engine), with their first token from sending, seconds.
fn lone_floor_prompts<'a>(
    runs: &[(&'a str, &'a VllmRun)],
) -> Vec<(&'a str, &'a WorkloadRecord, f64)> {
    runs.iter()
        .flat_map(|&(name, run)| {
            let budget = budget(run);
            fixed_records(&[(name, run)])
                .into_iter()
                .filter_map(move |(_, r, q)| {
                    let input = r.workload.input_len;
                    let fits = FLOOR_INPUTS.contains(&input) && budget.is_some_and(|b| input <= b);
                    Some((name, r, isolated_ttft(q).filter(|_| fits)?))
                })
        })
        .collect()
}

/// Seconds by decode batch, each with the record it was read from (`file:workload`).
type ByBatch = BTreeMap<u32, Vec<(f64, String)>>;

/// Uniform decode: the median gap between streamed tokens of each burst of B short prompts (no
/// injected requests), by B, with the burst it came from, and the mean context of each burst's
/// sequences.
fn decode_bursts(
    runs: &[(&str, &VllmRun)],
    fixed: &[Fixed<'_>],
    graphless: bool,
) -> (ByBatch, Vec<f64>) {
    let mut decode = ByBatch::new();
    let mut table_contexts: Vec<f64> = Vec::new();
    for (name, record, requests) in fixed {
        let w = &record.workload;
        let (_, run) = runs
            .iter()
            .find(|(n, _)| n == name)
            .expect("a record's run is among the runs");
        if past_capture(run, w.num_prompts) != graphless {
            continue;
        }
        // The burst's prefill must take few steps beside its decode steps, or the median gap
        // between its tokens is a chunked-prefill step's, not a uniform decode step's.
        if w.input_len <= DECODE_TABLE_MAX_INPUT
            && w.output_len >= 8
            && w.inject.is_empty()
            && few_prefill_steps(run, w)
            && let Some(m) = median_gap(requests)
        {
            decode
                .entry(w.num_prompts)
                .or_default()
                .push((m, format!("{name}:{}", w.name)));
            table_contexts.push(f64::from(w.input_len) + f64::from(w.output_len) / 2.0);
        }
    }
    (decode, table_contexts)
}

/// The evidence key a decode burst's batch is written under: the decode table's, or the graph-less
/// term's.
fn evidence_prefix(graphless: bool) -> &'static str {
    if graphless {
        "graphless_decode_b"
    } else {
        "decode_b"
    }
}

/// Whether a uniform decode batch of `batch` requests ran without graphs on a graph-mode server:
/// past its largest capture size (vLLM's default server captures up to 512 and takes 1,024
/// requests). False for eager servers, whose every step is graph-less and priced by its own table.
fn past_capture(run: &VllmRun, batch: u32) -> bool {
    // One parse of the words serves the mode, the limits and the capture size.
    let Ok(role) = serve_role(run) else {
        return false;
    };
    !role.enforce_eager()
        && limits_of(run, &role)
            .is_some_and(|(seqs, budget)| batch > capture_of(Some(&role), seqs, budget))
}

/// What each request of a uniform decode batch adds to a step of the compiled model without graphs
/// (a batch past the server's largest capture size), over the non-uniform table at its tokens:
/// over such batches measured as the decode table measures its own (unstreamed pairs where the
/// stream set the pace), `(period - table) / batch`, the median; 0 without such a batch or table.
/// On `cal14` (vLLM's defaults, a slow host) 768 and 1,024 decodes stepped at 109 and 117 ms where
/// the table gives 81 ms: about 36 µs a request, against the 0.35 ms a decode adds to a mixed step
/// (`cal2-piecewise`'s pairs; docs/fidelity.md, "What is still wrong").
fn graphless_decode_s(
    runs: &[(&str, &VllmRun)],
    fixed: &[Fixed<'_>],
    nonuniform: &[(u32, u64)],
    evidence: &mut BTreeMap<String, String>,
) -> f64 {
    if nonuniform.is_empty() {
        return 0.0;
    }
    let (decode, _) = decode_bursts(runs, fixed, true);
    let points = decode_table(runs, decode, (false, true), evidence);
    let per_request = points
        .iter()
        .map(|&(b, period)| {
            (period as f64 - interpolate(nonuniform, b) as f64) / 1e9 / f64::from(b.max(1))
        })
        .collect();
    median(per_request).unwrap_or(0.0).max(0.0)
}

/// The uniform decode period by batch: the probe's streamed bursts (or, where the same batch's
/// unstreamed pairs show the engine well faster than the stream, theirs: the stream was the front
/// end's pace), then `vllm bench serve`'s own calibration runs where they are engine-bound
/// ([`bench_decode_s`]), made non-decreasing in the batch, each batch weighted by its servers.
/// Bursts and bench runs pool as the step tables do, every server once ([`median_over_servers`]):
/// an eager decode step is its host's, and one server's two rounds of bursts are one draw of its
/// loan's level, not two (docs/fidelity.md, "The twenty-ninth batch").
fn decode_table(
    runs: &[(&str, &VllmRun)],
    decode: ByBatch,
    (host_bound, graphless): (bool, bool),
    evidence: &mut BTreeMap<String, String>,
) -> Vec<(u32, u64)> {
    let key = evidence_prefix(graphless);
    let unstreamed = unstreamed_period_s(runs, graphless);
    for (b, gaps) in &decode {
        evidence.insert(format!("{key}{b}"), evidence_list(records(gaps)));
    }
    let mut by_batch: BTreeMap<u32, (f64, f64)> = decode
        .into_iter()
        .filter_map(|(b, gaps)| {
            let (streamed, weight) = pooled(records(&gaps))?;
            let period = match unstreamed.get(&b).and_then(|u| median(u.clone())) {
                Some(engine) if streamed > FRONTEND_BOUND_RATIO * engine => {
                    evidence.insert(format!("{key}{b}_unstreamed"), "unstreamed pairs".into());
                    engine
                }
                // Past the probe's streaming reach a graph step's pace is the client's unless an
                // unstreamed pair says otherwise (eager host steps are slower than any stream).
                None if !host_bound && b > PROBE_STREAM_MAX_BATCH => return None,
                _ => streamed,
            };
            Some((b, (period, weight)))
        })
        .collect();
    for (b, periods) in unstreamed {
        if let (std::collections::btree_map::Entry::Vacant(slot), Some(engine)) =
            (by_batch.entry(b), median(periods))
        {
            evidence.insert(format!("{key}{b}_unstreamed"), "unstreamed pairs".into());
            slot.insert((engine, 1.0));
        }
    }
    let probe: Vec<(u32, u64)> = by_batch
        .iter()
        .map(|(&b, &(p, _))| (b, (p * 1e9).round() as u64))
        .collect();
    for (b, seen) in bench_decode_s(runs, graphless) {
        let Some((bench, servers)) = pooled(records(&seen)) else {
            continue;
        };
        // Above the probe's figure by more than the ratio, the front end set the bench run's pace
        // (the stream-token term prices it) — except in eager mode, whose 60-80 ms host steps no
        // front end of these batches keeps up with less than (256 tokens × about 55 µs is 14 ms).
        if !host_bound
            && (probe.is_empty()
                || bench > FRONTEND_BOUND_RATIO * interpolate(&probe, b) as f64 / 1e9)
        {
            continue;
        }
        evidence.insert(format!("{key}{b}_bench"), evidence_list(records(&seen)));
        let weight = by_batch.get(&b).map_or(0.0, |p| p.1) + servers;
        by_batch.insert(b, (bench, weight));
    }
    // A larger batch never steps faster: measurements that say so are noise (the eager host path
    // varies by tens of percent between bursts), pooled with their neighbours.
    let points = by_batch
        .into_iter()
        .map(|(b, (p, w))| (f64::from(b), p, w))
        .collect();
    pool_adjacent_violators(points)
        .iter()
        .flat_map(|(xs, period, _)| {
            xs.iter()
                .map(move |&b| (b.round() as u32, (period * 1e9).round() as u64))
        })
        .collect()
}

/// What `vllm bench serve`'s own client sees of a uniform decode step, by batch: the mean time per
/// output token of every calibration bench run that sent its prompts at once with a prefill of at
/// most a quarter of its decode steps, with the run it came from. The judged runs use that client,
/// and on the lent H200 a host-bound step ran slower beside it than beside the probe's (eager, one
/// server, interleaved: 14 % and 34 % at 64 streams, cal2-eager), a difference no fixed burst of the
/// probe's own can see.
fn bench_decode_s(runs: &[(&str, &VllmRun)], graphless: bool) -> ByBatch {
    let mut out = ByBatch::new();
    for (name, run) in runs {
        for r in &run.records {
            let w = &r.workload;
            if !few_prefill_steps(run, w) || past_capture(run, w.num_prompts) != graphless {
                continue;
            }
            if let Some(tpot_s) = calibration_tpot_s(r) {
                out.entry(w.num_prompts)
                    .or_default()
                    .push((tpot_s, format!("{name}:{}", w.name)));
            }
        }
    }
    out
}

/// A calibration bench run that sent its prompts at once (no request rate) and finished.
fn calibration_at_once(r: &WorkloadRecord) -> bool {
    r.workload.calibration && r.workload.request_rate.is_none() && r.failure.is_none()
}

/// The mean time per output token of a calibration bench run that sent its prompts at once and
/// finished, seconds.
fn calibration_tpot_s(r: &WorkloadRecord) -> Option<f64> {
    if !calibration_at_once(r) || r.workload.max_concurrency.is_some() {
        return None;
    }
    r.bench_result
        .as_ref()?
        .get("mean_tpot_ms")?
        .as_f64()
        .filter(|t| t.is_finite() && *t > 0.0)
        .map(|ms| ms / 1e3)
}

/// The non-uniform step tables of one mode.
#[derive(Default)]
struct StepTables {
    nonuniform: Vec<(u32, u64)>,
    mixed_decode_s: f64,
    prefill_extra: Vec<(u32, u64)>,
    piecewise: Vec<(u32, u64)>,
    piecewise_max_tokens: u32,
    piecewise_decode_s: f64,
}

/// The non-uniform step tables of a mode. Graph modes: the period by scheduled tokens, from bursts'
/// non-uniform spans and from requests injected into standing decode batches ([`injected_steps`]);
/// under `FULL_AND_PIECEWISE` the steps within the largest capture size make their own table.
/// Eager: every step is the host's, so an injected request's step is priced as what it adds to the
/// standing batch's own period, by its prefill tokens (one burst: the drift between bursts cancels).
fn step_tables(
    mode: &str,
    runs: &[(&str, &VllmRun)],
    injected: &[Injected],
    decode_period_ns: &[(u32, u64)],
    frontend_s: f64,
    (pure_prefill, pure_piecewise): (Option<idle::PureRatio>, Option<idle::PureRatio>),
    evidence: &mut BTreeMap<String, String>,
) -> StepTables {
    let mut tables = StepTables::default();
    if mode == EAGER {
        let points = injected
            .iter()
            .filter(|i| i.period_s <= COMPILE_STALL_RATIO * i.standing_s)
            .map(|i| {
                let extra = (i.period_s - i.standing_s).max(0.0);
                (f64::from(i.prefill), extra, i.evidence.clone(), false)
            })
            .collect();
        tables.prefill_extra = grouped_table(points, "prefill_extra_t", evidence);
        return tables;
    }
    let (graphless, within): (Vec<&Injected>, Vec<&Injected>) = injected
        .iter()
        .partition(|i| !(mode == FULL_AND_PIECEWISE && i.tokens <= i.max_capture));
    // What each decode beside the prefill adds to a step (without graphs, and within the piecewise
    // graphs): one prompt length injected beside two batches of one server, the difference of their
    // steps over the difference of decodes.
    tables.mixed_decode_s = decode_slope_s(&graphless, "mixed_decode", evidence);
    tables.piecewise_decode_s = decode_slope_s(&within, "piecewise_decode", evidence);
    let per_decode = tables.mixed_decode_s;
    let piecewise_per_decode = tables.piecewise_decode_s;
    let mut points: Vec<TablePoint> = Vec::new();
    let mut piecewise = Vec::new();
    // A span's steps that prefilled beside no decode cost the mode's pure-prefill ratio times the
    // table in the model (`EngineModel::step_cost`), the others the table and their decodes' term:
    // the table's step is the span's period less the decode term, over the ratio's share of it.
    let on_table = |period_s: f64, span: &Span, pure: Option<idle::PureRatio>| {
        let ratio = pure.map_or(1.0, |p| p.at(span.tokens.round() as u32));
        period_s / (1.0 + span.pure_share * (ratio - 1.0))
    };
    for span in span_points(runs, decode_period_ns, frontend_s) {
        // A span whose steps mostly prefilled beside no decode measures the table only through the
        // pure-prefill ratio, whose pairs scatter across servers (0.57-1.21): `grouped_table`
        // takes it where no step beside decodes measured the table at its size.
        let converted = span.pure_share > 0.5;
        // Under FULL_AND_PIECEWISE a burst's steps within the largest capture size replayed the
        // piecewise graphs (a lone prompt chunked at 64 tokens): they belong to that table.
        if mode == FULL_AND_PIECEWISE && span.tokens <= f64::from(span.max_capture) {
            tables.piecewise_max_tokens = tables.piecewise_max_tokens.max(span.max_capture);
            let period = span.period_s - piecewise_per_decode * span.decodes;
            let period = on_table(period, &span, pure_piecewise);
            piecewise.push((span.tokens, period, span.evidence, converted));
        } else {
            let period = span.period_s - per_decode * span.decodes;
            let period = on_table(period, &span, pure_prefill);
            points.push((span.tokens, period, span.evidence, converted));
        }
    }
    for i in graphless {
        let period = i.period_s - per_decode * f64::from(i.decoding);
        points.push((f64::from(i.tokens), period, i.evidence.clone(), false));
    }
    for i in within {
        tables.piecewise_max_tokens = tables.piecewise_max_tokens.max(i.max_capture);
        let period = i.period_s - piecewise_per_decode * f64::from(i.decoding);
        piecewise.push((f64::from(i.tokens), period, i.evidence.clone(), false));
    }
    tables.nonuniform = grouped_table(points, "nonuniform_t", evidence);
    tables.piecewise = grouped_table(piecewise, "piecewise_t", evidence);
    tables
}

/// What each standing decode adds to an injected request's mixed step: over pairs of injections of
/// one prompt length into bursts of one server with different batches, the difference of their
/// steps over the difference of their decodes (0 when no pair, never below 0). A pair's slope errs
/// by its steps' noise over its decodes' difference, so within a server each pair weighs that
/// difference squared, the inverse of its error's variance (cal12's pairs 3-15 decodes apart, host
/// noise of 10-20 ms a step, slopes of ±3 ms a decode, weigh 1/160 to 1/4,000 of cal2's pair 192
/// apart), and the server's slope is their weighted median. Across servers every server counts
/// once, as in the tables ([`median_over_servers`]): the term is the median of the servers' own
/// slopes. (Weighting each server by its widest pair squared, as once chosen, let one server's
/// regime set the term: `cal22`'s pairs 64 apart beside 2,048-token prompts outweigh every 64/64
/// server's pairs 6 apart 114 to 1. With the twenty-third batch the leave-one-server-out check of
/// the calibration runs prefers the plain median: median 11.3 % either way, mean 19.5 → 16.7 %,
/// 100 → 103 of 135 within 25 %.) Each server's pairs, their spread of decodes apart and their
/// own weighted median go in the evidence under `key`: a server whose steps moved between levels
/// while its pairs ran shows as a slope of milliseconds a decode either way.
fn decode_slope_s(
    injected: &[&Injected],
    key: &str,
    evidence: &mut BTreeMap<String, String>,
) -> f64 {
    // Per server, each pair's (slope, decodes apart); its weight is the square of the latter.
    let mut by_run: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for (k, a) in injected.iter().enumerate() {
        for b in &injected[k + 1..] {
            if a.run == b.run && a.input_len == b.input_len && a.decoding != b.decoding {
                let apart = f64::from(b.decoding) - f64::from(a.decoding);
                by_run
                    .entry(a.run.as_str())
                    .or_default()
                    .push(((b.period_s - a.period_s) / apart, apart.abs()));
            }
        }
    }
    // Per server: its own slope (the pairs' median weighted by decodes apart squared), computed once.
    let mut servers = Vec::new();
    let mut slopes = Vec::new();
    for (run, pairs) in &by_run {
        let weighted = pairs.iter().map(|&(slope, apart)| (slope, apart * apart));
        let own = weighted_median(weighted.collect());
        let low = pairs.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let high = pairs.iter().map(|p| p.1).fold(0.0, f64::max);
        servers.push(format!(
            "{run}: {} pairs {low:.0}-{high:.0} decodes apart, {:.3} ms a decode",
            pairs.len(),
            own.unwrap_or(0.0) * 1e3
        ));
        slopes.extend(own);
    }
    if !servers.is_empty() {
        evidence.insert(key.to_owned(), servers.join("; "));
    }
    median(slopes).unwrap_or(0.0).max(0.0)
}

/// The mixed step a request injected into a standing decode burst was prefilled in.
struct Injected {
    /// Tokens the step scheduled: the prompt's chunk beside the standing decodes, at most the budget.
    tokens: u32,
    /// Prefill tokens of the step.
    prefill: u32,
    /// The step's period: over the standing requests decoding while it ran, the median of each one's
    /// longest gap between the injected request's sending and its first token.
    period_s: f64,
    /// The standing requests' own median gap over the burst.
    standing_s: f64,
    /// The injected request's first token, from its sending, seconds.
    ttft_s: f64,
    /// The standing burst's requests.
    batch: u32,
    /// Whether the prompt was prefilled in one step (it fit the budget beside the decodes).
    one_step: bool,
    /// The server's largest capture size (piecewise graphs serve steps up to it).
    max_capture: u32,
    /// Standing requests decoding beside the prefill.
    decoding: u32,
    /// The injected prompt's length and the file it came from: two injections of one length into
    /// bursts of one server with different batches price what a decode adds to the step.
    input_len: u32,
    run: String,
    evidence: String,
}

/// Every injected request of the runs' streamed fixed-shape bursts that reached the engine while the
/// whole standing batch decoded, on a burst the engine (not the front end) paced: its standing gap
/// within [`FRONTEND_BOUND_RATIO`] of the decode table at its batch (always, for `host_bound` eager
/// steps). Past that the front end's backlog hides the engine's stall from the streams.
fn injected_steps(
    runs: &[(&str, &VllmRun)],
    decode_period_ns: &[(u32, u64)],
    host_bound: bool,
) -> Vec<Injected> {
    let mut out = Vec::new();
    for (name, run) in runs {
        let Some((seqs, budget)) = serve_limits(run) else {
            continue;
        };
        let max_capture = max_capture(run, seqs, budget);
        for r in &run.records {
            let w = &r.workload;
            let Some(fixed) = &r.fixed else { continue };
            let n = w.num_prompts as usize;
            if w.inject.is_empty() || !w.stream || r.failure.is_some() || fixed.requests.len() <= n
            {
                continue;
            }
            let (standing, injected) = fixed.requests.split_at(n);
            let Some(standing_s) = median_gap(standing) else {
                continue;
            };
            if !host_bound
                && (decode_period_ns.is_empty()
                    || standing_s
                        > FRONTEND_BOUND_RATIO
                            * interpolate(decode_period_ns, w.num_prompts) as f64
                            / 1e9)
            {
                continue;
            }
            let decoding_from = standing
                .iter()
                .filter_map(|q| q.chunk_s.first().copied())
                .fold(0.0, f64::max);
            for (spec, q) in w.inject.iter().zip(injected) {
                let Some(&first) = q.chunk_s.first() else {
                    continue;
                };
                if q.sent_s <= decoding_from || crowded(&w.inject, spec) {
                    continue;
                }
                let windows: Vec<Vec<f64>> = standing
                    .iter()
                    .map(|s| {
                        s.chunk_s
                            .windows(2)
                            .filter(|p| p[1] > q.sent_s && p[0] < first)
                            .map(|p| p[1] - p[0])
                            .collect::<Vec<f64>>()
                    })
                    .filter(|gaps| !gaps.is_empty())
                    .collect();
                let decoding = windows.len() as u32;
                let prefill = spec.input_len.min(budget.saturating_sub(decoding).max(1));
                // A prompt prefilled over three or more full chunks (a chunk is what the budget
                // leaves beside the decodes) stalls the streams once a step: the median of those
                // stalls, not the longest (a shorter tail chunk is the one step that differs).
                // One token a step is a uniform decode batch: no mixed step to price.
                let several = spec.input_len >= 3 * prefill;
                if several && prefill == 1 {
                    continue;
                }
                let Some(period_s) = stall_s(windows, several, standing_s) else {
                    continue;
                };
                out.push(Injected {
                    tokens: prefill + decoding,
                    prefill,
                    period_s,
                    standing_s,
                    ttft_s: first - q.sent_s,
                    batch: w.num_prompts,
                    one_step: spec.input_len == prefill,
                    max_capture,
                    decoding,
                    input_len: spec.input_len,
                    run: (*name).to_owned(),
                    evidence: format!("{name}:{}+{}@{}", w.name, spec.input_len, spec.at_s),
                });
            }
        }
    }
    out
}

/// Whether another request of the burst was injected within [`CASCADE_S`] of `spec`: the two share
/// their stalls (the first one's tokens leave only once the second one's step is issued, the
/// eighth batch's cascades), so neither prices a step alone.
fn crowded(
    inject: &[afd_traces::vllm_run::Injection],
    spec: &afd_traces::vllm_run::Injection,
) -> bool {
    inject
        .iter()
        .any(|other| !std::ptr::eq(other, spec) && (other.at_s - spec.at_s).abs() < CASCADE_S)
}

/// An injected request's step from the standing streams' gaps while it waited: per stream the
/// longest gap, or for a prompt prefilled over `several` chunks the median of its stalls (gaps over
/// [`MIXED_GAP_RATIO`] standing periods); the median over streams.
fn stall_s(windows: Vec<Vec<f64>>, several: bool, standing_s: f64) -> Option<f64> {
    let per_stream: Vec<f64> = windows
        .into_iter()
        .filter_map(|gaps| {
            if several {
                median(
                    gaps.into_iter()
                        .filter(|&g| g > MIXED_GAP_RATIO * standing_s)
                        .collect(),
                )
            } else {
                gaps.into_iter().reduce(f64::max)
            }
        })
        .collect();
    median(per_stream)
}

/// The front end's latency on a running engine, one figure per request injected into a standing
/// decode burst of at most [`STEPPING_FRONTEND_MAX_BATCH`] requests and prefilled in one step: its
/// first token less the intake, less half the standing period (it reaches the engine at a random
/// point of a step and is planned at the step's end, after asynchronous scheduling's issue of the
/// next), less its step (the standing streams' gap). Under asynchronous scheduling the step before
/// the injected one leaves only once that one is issued and its own tokens 2-5 ms later
/// (`cal2-graph` and `cal2-piecewise`: gaps of 59 then 2 ms beside 8 decodes): what is left is that
/// and the way to the client, 2-6 ms, where a lone prompt on an idle engine met 10-15 ms.
/// `next_issues`: the standing periods the next step's issue holds the token back beyond that (0 in
/// the graph modes, whose next step replays a graph; 1 on eager servers, [`eager_split_s`]).
fn stepping_frontend_s(injected: &[Injected], intake_s: f64, next_issues: f64) -> Vec<(&str, f64)> {
    injected
        .iter()
        .filter(|i| i.one_step && i.batch <= STEPPING_FRONTEND_MAX_BATCH)
        .map(|i| {
            (
                i.run.as_str(),
                i.ttft_s - intake_s - i.standing_s * (0.5 + next_issues) - i.period_s,
            )
        })
        .collect()
}

/// What a decode step adds per context token beyond the table's reference context: over streamed
/// token-id bursts of 8 or more prompts longer than the table's, with 32 or more output tokens and a
/// prefill of at most a quarter of their decode steps, (median gap − the table's period at the batch) / (batch × extra context a
/// sequence), the median; zero when no burst measured it or the host floor hid it (below zero).
fn context_slope_s(
    runs: &[(&str, &VllmRun)],
    decode_period_ns: &[(u32, u64)],
    reference_context: u32,
    evidence: &mut BTreeMap<String, String>,
) -> f64 {
    let slopes: Vec<f64> = fixed_records(runs)
        .iter()
        .filter_map(|(name, r, q)| {
            let w = &r.workload;
            let (_, run) = runs.iter().find(|(n, _)| n == name)?;
            if w.input_len <= DECODE_TABLE_MAX_INPUT
                || w.num_prompts < 8
                || w.output_len < 32
                || !few_prefill_steps(run, w)
            {
                return None;
            }
            let gap = median_gap(q)?;
            let table = interpolate(decode_period_ns, w.num_prompts) as f64 / 1e9;
            let extra = f64::from(w.input_len) + f64::from(w.output_len) / 2.0
                - f64::from(reference_context);
            evidence.insert(
                format!("decode_context_{}", w.name),
                format!("{name}:{}", w.name),
            );
            Some((gap - table) / (f64::from(w.num_prompts) * extra))
        })
        .collect();
    median(slopes).unwrap_or(0.0).max(0.0)
}

/// Whether a burst's prefill takes at most a quarter as many steps as its decode (so the median gap
/// between its tokens is a uniform decode step's); false when the server's budget is not given.
fn few_prefill_steps(run: &VllmRun, w: &afd_traces::vllm_run::Workload) -> bool {
    budget(run).is_some_and(|b| {
        let steps = (u64::from(w.num_prompts) * u64::from(w.input_len)).div_ceil(u64::from(b));
        steps * 4 <= u64::from(w.output_len)
    })
}

/// The median gap between consecutive streamed tokens of a burst's requests, seconds.
fn median_gap(requests: &[FixedShapeRequest]) -> Option<f64> {
    median(
        requests
            .iter()
            .flat_map(|q| q.chunk_s.windows(2).map(|p| p[1] - p[0]))
            .collect(),
    )
}

/// The tokens one step of the server may schedule: `--max-num-batched-tokens`, or vLLM's default
/// for the run's GPU when the serve words leave it out ([`serve_limits`]).
fn budget(run: &VllmRun) -> Option<u32> {
    serve_limits(run).map(|(_, budget)| budget)
}

/// `(max_num_seqs, max_num_batched_tokens)` of a run: its serve flags, each absent one vLLM's default
/// for `vllm serve` on the run's GPU (`GpuClass::serve_batch_defaults`, from the memory the
/// provenance records, "NVIDIA H200, 580.159.04, 143771 MiB"). None when a flag does not parse or the
/// GPU line says no memory and a default is needed.
fn serve_limits(run: &VllmRun) -> Option<(u32, u32)> {
    limits_of(run, &serve_role(run).ok()?)
}

/// [`serve_limits`] from the run's parsed words.
fn limits_of(run: &VllmRun, role: &RoleConfig) -> Option<(u32, u32)> {
    let (seqs, budget) = (
        role.max_num_seqs.as_ref().map(|v| v.value),
        role.max_num_batched_tokens.as_ref().map(|v| v.value),
    );
    let defaults = || {
        let gpu = run.provenance.gpus.first()?;
        let mib: u64 = gpu
            .split(',')
            .nth(2)?
            .trim()
            .strip_suffix("MiB")?
            .trim()
            .parse()
            .ok()?;
        let a100 = gpu.to_ascii_lowercase().contains("a100");
        Some(GpuClass::of(mib << 20, a100).serve_batch_defaults())
    };
    let seqs = match seqs {
        Some(v) => v,
        None => defaults()?.0,
    };
    let budget = match budget {
        Some(v) => v,
        None => defaults()?.1,
    };
    Some((seqs, budget))
}

/// The front end's latency from lone prompts that one piecewise-graph step prefills (a
/// FULL_AND_PIECEWISE server, the prompt within its budget and largest capture size): each one's
/// first token less that step's period in `piecewise` (the table of steps injected requests made
/// beside standing bursts, which the front end does not enter), the median over them. A lone
/// 256-token prompt of vLLM's default server got its first token 24-29 ms after it was sent, its
/// step included: no chunk-count intercept of the graph-less modes (-294 to 166 ms over servers)
/// says as much.
fn one_step_frontend_s(runs: &[(&str, &VllmRun)], piecewise: &[(u32, u64)]) -> Option<f64> {
    if piecewise.is_empty() {
        return None;
    }
    let seen = runs
        .iter()
        .filter_map(|(_, run)| Some((run, serve_limits(run)?)))
        .flat_map(|(run, (seqs, budget))| {
            let capture = max_capture(run, seqs, budget);
            run.records.iter().filter_map(move |r| {
                let w = &r.workload;
                if r.failure.is_some()
                    || !plain_burst(w)
                    || w.num_prompts != 1
                    || !w.inject.is_empty()
                    || w.input_len > budget.min(capture)
                {
                    return None;
                }
                let ttft = isolated_ttft(&r.fixed.as_ref()?.requests)?;
                Some(ttft - interpolate(piecewise, w.input_len) as f64 / 1e9)
            })
        })
        .collect();
    median(seen)
}

/// A run's largest CUDA-graph capture size at its limits, as vLLM resolves its capture sizes
/// ([`RoleConfig::capture_sizes_at`]: explicit sizes, `max_cudagraph_capture_size`, or the
/// default for the limits).
fn max_capture(run: &VllmRun, seqs: u32, budget: u32) -> u32 {
    capture_of(serve_role(run).ok().as_ref(), seqs, budget)
}

/// [`max_capture`] from the run's parsed words (`None`: words that do not parse, vLLM's default).
fn capture_of(role: Option<&RoleConfig>, seqs: u32, budget: u32) -> u32 {
    role.and_then(|role| role.capture_sizes_at(seqs, budget).last().copied())
        .unwrap_or_else(|| default_max_capture(seqs, budget))
}

/// The front end's latency on one server: the intercept of the isolated prefills' first tokens
/// against the number of budget-sized chunks each prompt needs (each chunk is one step), when the
/// server measured prompts of two or more chunk counts. A prompt of one chunk alone cannot tell its
/// step from the front end; two chunk counts can.
fn chunked_frontend_s(run: &VllmRun) -> Option<f64> {
    let budget = budget(run)?;
    let points: Vec<(f64, f64)> = run
        .records
        .iter()
        .filter(|r| r.failure.is_none() && plain_burst(&r.workload) && r.workload.num_prompts == 1)
        .filter(|r| r.workload.input_len >= CHUNK_REGRESSION_MIN_INPUT)
        .filter_map(|r| {
            let ttft = isolated_ttft(&r.fixed.as_ref()?.requests)?;
            Some((f64::from(r.workload.input_len.div_ceil(budget)), ttft))
        })
        .collect();
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), p| (a + p.0 / n, b + p.1 / n));
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if points.len() < 2 || sxx == 0.0 {
        return None;
    }
    let slope = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>() / sxx;
    Some((my - slope * mx).max(0.0))
}

/// The front end's intake per request, one figure per burst of at least [`INTAKE_MIN_BURST`]
/// token-id prompts that the prefix cache already holds (its step log computes under a tenth of the
/// prompt tokens, so the engine's steps are short): the spread of first tokens per request after
/// the first. The profile takes the median over every server's bursts.
fn intake_s(run: &VllmRun) -> Vec<f64> {
    run.records
        .iter()
        .filter(|r| {
            r.failure.is_none()
                && plain_burst(&r.workload)
                && r.workload.num_prompts >= INTAKE_MIN_BURST
        })
        .filter_map(cached_spread_s)
        .collect()
}

/// A cached burst's spread of first tokens per request after the first, when the record is a
/// burst whose prompts the prefix cache held (its step log computed under a tenth of its prompt
/// tokens; a record without a step log shows nothing).
fn cached_spread_s(r: &WorkloadRecord) -> Option<f64> {
    let computed: u64 = r.steps.iter().map(|s| u64::from(s.ctx_tokens)).sum();
    if r.steps.is_empty()
        || computed * 10 >= u64::from(r.workload.num_prompts) * u64::from(r.workload.input_len)
    {
        return None;
    }
    let q = &r.fixed.as_ref()?.requests;
    let firsts: Vec<f64> = q
        .iter()
        .filter_map(|x| x.chunk_s.first().copied())
        .collect();
    let lo = firsts.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = firsts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (firsts.len() >= 2).then(|| (hi - lo) / (firsts.len() - 1) as f64)
}

/// What `vllm bench serve`'s client spends opening a connection, one figure per calibration bench
/// run of at least [`CONNECT_MIN_BURST`] prompts sent at once (or that many at its concurrency
/// limit) whose step lines are stamped. The client's one idle connection carries the first request,
/// which the engine steps alone until the others, each on a connection opened for it, reach it
/// together. Under asynchronous scheduling a step's line is written once the step after it is
/// issued, so the first step holding two requests, `k`, was planned at its predecessor's stamp and
/// the one before it at the stamp before: the second request reached the engine between the two.
/// The figure is the middle of that window, from the first step's stamp, over the connections
/// opened. A burst whose second request reached the engine before its first step was issued
/// (`k < 2`) bounds nothing from below and gives none. The first request's own way to its first
/// step is not added, so the figure is low by that over the connections.
fn connect_s(run: &VllmRun) -> Vec<f64> {
    run.records
        .iter()
        .filter(|r| calibration_at_once(r))
        .filter_map(|r| {
            let burst = r
                .workload
                .num_prompts
                .min(r.workload.max_concurrency.unwrap_or(u32::MAX));
            if burst < CONNECT_MIN_BURST {
                return None;
            }
            let stamps: Vec<f64> = r.steps.iter().map(|s| s.logged_s).collect::<Option<_>>()?;
            let k = r
                .steps
                .iter()
                .position(|s| s.ctx_requests + s.gen_requests >= 2)?;
            if k < 2 {
                return None;
            }
            let reached = (stamps[k - 2] + stamps[k - 1]) / 2.0 - stamps[0];
            Some(reached / f64::from(burst - 1))
        })
        .collect()
}

/// What a text prompt adds to the intake per prompt token, one figure per pair of cached streamed
/// bursts of one server with the same shape, one sent as text and one as token ids: the difference
/// of their per-request spreads over the prompt length (never below zero).
fn text_token_s(run: &VllmRun) -> Vec<f64> {
    let cached = |form: PromptForm| {
        run.records
            .iter()
            .filter(move |r| {
                r.failure.is_none()
                    && r.workload.stream
                    && r.workload.prompt_form == form
                    && r.workload.num_prompts >= TEXT_PAIR_MIN_BURST
            })
            .filter_map(|r| Some((&r.workload, cached_spread_s(r)?)))
    };
    cached(PromptForm::Text)
        .filter_map(|(text, text_s)| {
            let (_, ids_s) = cached(PromptForm::Ids).find(|(ids, _)| {
                (ids.num_prompts, ids.input_len, ids.output_len)
                    == (text.num_prompts, text.input_len, text.output_len)
            })?;
            Some((text_s - ids_s).max(0.0) / f64::from(text.input_len))
        })
        .collect()
}

/// The front end's serial cost per streamed token: over the calibration bench runs (all prompts at
/// once, one shape, a prefill of at most a quarter of their decode steps), their mean time per
/// output token less what their prefill steps add to it (the time a request spends in prefill
/// steps after its first token, [`prefill_after_first_token_s`], over its later tokens); where that
/// is more than [`FRONTEND_BOUND_RATIO`] times the engine's decode period at their batch, it over
/// the batch; the median of them. Below that ratio the engine sets the pace and the run tells
/// nothing of the front end. A run's prefill steps count by time, not number: 8 full 8,192-token
/// steps (about 90 ms each) beside 32 decode steps of 8 ms set most of `cal16`'s 23-30 ms a token,
/// not its front end. The mean time per output token, not the median inter-token latency: `vllm
/// bench serve` stamps each server-sent event as it parses it, so events read together show gaps
/// near zero (vllm/benchmarks/lib/endpoint_request_func.py). Each mode's evidence names its runs
/// that gave a figure, with the figure (`stream_token`).
fn stream_token_s(
    by_mode: &BTreeMap<&'static str, Vec<(&str, &VllmRun)>>,
    modes: &mut [EngineModeCosts],
) -> Option<f64> {
    let mut per_token = Vec::new();
    for ((mode, runs), costs) in by_mode.iter().zip(modes) {
        // Eager steps (60-80 ms) are slower than the front end at any batch measured.
        if *mode == EAGER {
            continue;
        }
        let mut read = Vec::new();
        for (name, run) in runs {
            for r in &run.records {
                if !few_prefill_steps(run, &r.workload) {
                    continue;
                }
                let Some(tpot_s) = calibration_tpot_s(r) else {
                    continue;
                };
                let after_s = prefill_after_first_token_s(r, &costs.nonuniform_period_ns);
                let front_s = tpot_s - after_s / f64::from(r.workload.output_len.max(2) - 1);
                let batch = r.workload.num_prompts;
                let engine_s = interpolate(&costs.decode_period_ns, batch) as f64 / 1e9;
                if front_s > FRONTEND_BOUND_RATIO * engine_s {
                    let token_s = front_s / f64::from(batch);
                    per_token.push(token_s);
                    read.push(format!(
                        "{name}:{} ({:.1} µs)",
                        r.workload.name,
                        token_s * 1e6
                    ));
                }
            }
        }
        if !read.is_empty() {
            costs
                .evidence
                .insert("stream_token".into(), read.join(", "));
        }
    }
    median(per_token)
}

/// How long a request of a bench run spends, after its first token, in the run's later prefill
/// steps, on average over its requests, seconds: the run's step log in order, each step that
/// prefilled priced at the non-uniform table for its tokens, each such step's prefilling requests
/// waiting through the steps after it (0 without a table or a step log).
fn prefill_after_first_token_s(r: &WorkloadRecord, nonuniform: &[(u32, u64)]) -> f64 {
    if nonuniform.is_empty() {
        return 0.0;
    }
    let prefills: Vec<(f64, f64)> = r
        .steps
        .iter()
        .filter(|s| s.ctx_tokens > 0)
        .map(|s| {
            let period = interpolate(nonuniform, s.ctx_tokens + s.gen_tokens) as f64 / 1e9;
            (f64::from(s.ctx_requests), period)
        })
        .collect();
    let (mut waited, mut requests, mut later) = (0.0, 0.0, 0.0);
    for &(n, period) in prefills.iter().rev() {
        waited += n * later;
        requests += n;
        later += period;
    }
    if requests > 0.0 {
        waited / requests
    } else {
        0.0
    }
}

/// The engine's own decode period by batch, from pairs of unstreamed bursts of one server with the
/// same batch and prompt and two output lengths: the difference of their mean times to the whole
/// answer over the difference of lengths (no server-sent event is made, so the front end cannot
/// set the pace).
fn unstreamed_period_s(runs: &[(&str, &VllmRun)], graphless: bool) -> BTreeMap<u32, Vec<f64>> {
    let mut out: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
    for (_, run) in runs {
        let whole: Vec<(&afd_traces::vllm_run::Workload, f64)> = run
            .records
            .iter()
            .filter(|r| r.failure.is_none() && !r.workload.stream)
            .filter(|r| past_capture(run, r.workload.num_prompts) == graphless)
            .filter_map(|r| {
                let q = &r.fixed.as_ref()?.requests;
                let done: Vec<f64> = q
                    .iter()
                    .filter_map(|x| Some(x.done_s? - x.sent_s))
                    .collect();
                (done.len() == q.len() && !done.is_empty())
                    .then(|| (&r.workload, done.iter().sum::<f64>() / done.len() as f64))
            })
            .collect();
        for (long, long_s) in &whole {
            for (short, short_s) in &whole {
                if (long.num_prompts, long.input_len) == (short.num_prompts, short.input_len)
                    && long.output_len > short.output_len
                {
                    let period = (long_s - short_s) / f64::from(long.output_len - short.output_len);
                    if period > 0.0 {
                        out.entry(long.num_prompts).or_default().push(period);
                    }
                }
            }
        }
    }
    out
}

/// One burst's non-uniform steps as its span prices them.
struct Span {
    /// Mean scheduled tokens of the non-uniform steps.
    tokens: f64,
    /// Mean decodes beside the prefill in them.
    decodes: f64,
    /// The share of them that scheduled no decode.
    pure_share: f64,
    /// Period of one such step.
    period_s: f64,
    /// The server's largest capture size.
    max_capture: u32,
    evidence: String,
}

/// Non-uniform step periods read from bursts' spans, one `(tokens, period, evidence)` per fixed-shape
/// record with at least [`TABLE_MIN_STEPS`] non-uniform steps in its step log (no injected requests):
/// its span (to the last token of a burst, to the first token of a lone prompt) less the front end and
/// its uniform decode steps (priced from the decode table), over its non-uniform steps, at their mean
/// scheduled tokens and mean decodes.
fn span_points(
    runs: &[(&str, &VllmRun)],
    decode_period_ns: &[(u32, u64)],
    frontend_s: f64,
) -> Vec<Span> {
    fixed_records(runs)
        .iter()
        .filter_map(|(name, r, q)| {
            let (_, run) = runs.iter().find(|(n, _)| n == name)?;
            let (seqs, budget) = serve_limits(run)?;
            let non: Vec<_> = r.steps.iter().filter(|s| s.ctx_requests > 0).collect();
            let w = &r.workload;
            let computed: u64 = r.steps.iter().map(|s| u64::from(s.ctx_tokens)).sum();
            let nominal = u64::from(w.num_prompts) * u64::from(w.input_len);
            // Prompts served from the prefix cache, or more requests than the front end takes in
            // within a step or two, make the span the front end's, not the steps'.
            if non.len() < TABLE_MIN_STEPS
                || q.is_empty()
                || !w.inject.is_empty()
                || w.num_prompts > TABLE_MAX_BURST
                || computed * 10 < nominal * 9
            {
                return None;
            }
            let start = q.iter().map(|x| x.sent_s).fold(f64::INFINITY, f64::min);
            let (end, uniform_s) = if let [only] = q {
                (*only.chunk_s.first()?, 0.0)
            } else {
                let end = q
                    .iter()
                    .filter_map(|x| x.chunk_s.last().copied())
                    .fold(f64::NEG_INFINITY, f64::max);
                let uniform: u64 = r
                    .steps
                    .iter()
                    .filter(|s| s.ctx_requests == 0 && s.gen_requests > 0)
                    .map(|s| interpolate(decode_period_ns, s.gen_requests))
                    .sum();
                (end, uniform as f64 / 1e9)
            };
            let period = (end - start - frontend_s - uniform_s) / non.len() as f64;
            let mean = |f: fn(&afd_traces::vllm_run::EngineStep) -> u32| {
                non.iter().map(|s| f64::from(f(s))).sum::<f64>() / non.len() as f64
            };
            let tokens = mean(|s| s.ctx_tokens + s.gen_tokens);
            let decodes = mean(|s| s.gen_requests);
            let pure_share = mean(|s| u32::from(s.gen_requests == 0));
            (period.is_finite() && period > 0.0).then(|| Span {
                tokens,
                decodes,
                pure_share,
                period_s: period,
                max_capture: max_capture(run, seqs, budget),
                evidence: format!("{name}:{}", r.workload.name),
            })
        })
        .collect()
}

/// One measured step for a table: `(tokens, seconds, evidence, converted)`, `converted` when the
/// period was read through the pure-prefill ratio from steps beside no decode.
type TablePoint = (f64, f64, String, bool);

/// A table by tokens from points: points within a factor [`TABLE_GROUP_RATIO`] of tokens are one
/// group (the median tokens, and of its points measured beside decodes, or of all of them where
/// none was, the median over servers of each server's median period, [`median_over_servers`]; the
/// points priced under `{key}{tokens}`); the groups are then made non-decreasing by pooling
/// adjacent violators, weighted by their servers. Nanoseconds.
fn grouped_table(
    mut points: Vec<TablePoint>,
    key: &str,
    evidence: &mut BTreeMap<String, String>,
) -> Vec<(u32, u64)> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    // (tokens, period, weight) per group.
    let mut groups: Vec<(f64, f64, f64)> = Vec::new();
    let mut i = 0;
    while i < points.len() {
        let j = points[i..]
            .iter()
            .position(|p| p.0 > points[i].0 * TABLE_GROUP_RATIO)
            .map_or(points.len(), |k| i + k);
        let group = &points[i..j];
        let tokens = median(group.iter().map(|p| p.0).collect()).unwrap_or(0.0);
        let direct = group.iter().any(|p| !p.3);
        let priced = group
            .iter()
            .filter(|p| !direct || !p.3)
            .map(|p| (p.1, p.2.as_str()));
        let (period, servers) = pooled(priced.clone()).unwrap_or((0.0, 0.0));
        evidence.insert(
            format!("{key}{}", tokens.round() as u64),
            evidence_list(priced),
        );
        groups.push((tokens, period, servers));
        i = j;
    }
    // Pool adjacent violators: a step with more tokens never costs less.
    let pooled = pool_adjacent_violators(groups);
    let mut table: Vec<(u32, u64)> = pooled
        .iter()
        .flat_map(|(tokens, period, _)| {
            tokens
                .iter()
                .map(move |&t| (t.round() as u32, (period * 1e9).round() as u64))
        })
        .collect();
    table.dedup_by_key(|p| p.0);
    table
}

/// The median over servers of each server's median of what `figures` reads from its run file (each
/// file is one server); zero where no server measured any.
fn pooled_by_server(runs: &[VllmRun], names: &[String], figures: fn(&VllmRun) -> Vec<f64>) -> f64 {
    median_over_servers(
        runs.iter()
            .zip(names)
            .flat_map(|(run, name)| figures(run).into_iter().map(move |s| (name.as_str(), s))),
    )
    .unwrap_or(0.0)
}

/// The median over servers of each server's own median: every server counts once, however many
/// values it gave. A host-bound cost is a property of the loan it was measured on (the lent
/// machines' cores sat at levels 1.7× apart, docs/fidelity.md "The twenty-second batch"), so a
/// server's forty injections are one draw of it, not forty: pooled, four calibration servers of
/// two sessions set FULL_DECODE_ONLY's 64-token entry (60 of its 70 points). Chosen by
/// `sim/scripts/calibration_loso.py` (median 12.2 → 11.3 %, mean 19.9 → 19.6 %, 84 → 85 of 117
/// within 25 %).
fn median_over_servers<'a>(values: impl IntoIterator<Item = (&'a str, f64)>) -> Option<f64> {
    let mut by_server: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (server, value) in values {
        by_server.entry(server).or_default().push(value);
    }
    median(by_server.into_values().filter_map(median).collect())
}

/// Values with their evidence (`file:workload`) pooled as the tables pool them: the median over
/// servers ([`median_over_servers`]), and how many servers gave them (the value's weight).
fn pooled<'a>(seen: impl Iterator<Item = (f64, &'a str)> + Clone) -> Option<(f64, f64)> {
    let period = median_over_servers(seen.clone().map(|(v, e)| (server_of(e), v)))?;
    let servers = seen.map(|(_, e)| server_of(e)).collect::<BTreeSet<_>>();
    Some((period, servers.len() as f64))
}

/// Every record a figure pooled, as its evidence entry lists them.
fn evidence_list<'a>(seen: impl Iterator<Item = (f64, &'a str)>) -> String {
    seen.map(|(_, e)| e).collect::<Vec<_>>().join(", ")
}

/// The values of `(seconds, evidence)` pairs as [`pooled`] and [`evidence_list`] read them.
fn records(seen: &[(f64, String)]) -> impl Iterator<Item = (f64, &str)> + Clone {
    seen.iter().map(|(v, e)| (*v, e.as_str()))
}

/// The run file a table point's evidence (`file:workload[…]`) names (a workload's name has no
/// colon; a path may).
fn server_of(evidence: &str) -> &str {
    evidence.rsplit_once(':').map_or(evidence, |(file, _)| file)
}

/// `(x, y, weight)` points in ascending `x`, made non-decreasing in `y` by pooling adjacent
/// violators (weighted means): blocks of the `x`s they cover, each with its pooled `y` and weight.
fn pool_adjacent_violators(points: Vec<(f64, f64, f64)>) -> Vec<(Vec<f64>, f64, f64)> {
    let mut pooled: Vec<(Vec<f64>, f64, f64)> = Vec::new();
    for (x, y, weight) in points {
        pooled.push((vec![x], y, weight));
        while pooled.len() > 1 && pooled[pooled.len() - 2].1 > pooled[pooled.len() - 1].1 {
            let (x2, y2, w2) = pooled.pop().expect("two blocks");
            let last = pooled.last_mut().expect("two blocks");
            last.1 = (last.1 * last.2 + y2 * w2) / (last.2 + w2);
            last.2 += w2;
            last.0.extend(x2);
        }
    }
    pooled
}

/// The weighted median of `(value, weight)` pairs: the value at which the sorted values' cumulative
/// weight first passes half the total, or the mean of it and the next where it lands on half exactly
/// (so equal weights give [`median`]).
fn weighted_median(mut pairs: Vec<(f64, f64)>) -> Option<f64> {
    pairs.retain(|(v, w)| v.is_finite() && w.is_finite() && *w > 0.0);
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let half = pairs.iter().map(|p| p.1).sum::<f64>() / 2.0;
    let mut reached = 0.0;
    for (i, &(value, weight)) in pairs.iter().enumerate() {
        reached += weight;
        if reached > half {
            return Some(value);
        }
        if reached == half {
            return Some((value + pairs.get(i + 1).map_or(value, |p| p.0)) / 2.0);
        }
    }
    None
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// Engine step costs of one GPU kind, model and vLLM version, ready to price steps.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineModel {
    profile: VllmEngineProfile,
    /// What a trained model's replayed decode step adds over the dummy model's measured one, by
    /// batch (`trained.rs`); empty where the profile's decode steps are the deployment's own (both
    /// dummy weights, or both loaded).
    trained_growth: Vec<(u32, u64)>,
}

impl EngineModel {
    pub fn new(profile: VllmEngineProfile) -> EngineModel {
        EngineModel {
            profile,
            trained_growth: Vec::new(),
        }
    }

    /// The engine serving a deployment that loads its weights (`dummy` false) or fills them at
    /// random (`--load-format dummy`). Where the profile measured dummy weights and the deployment
    /// loads trained ones, a replayed decode step costs the measured one with its routed experts
    /// swapped (`trained.rs`): the dummy model sends every token of a layer to the same six
    /// experts, a trained model's tokens reach nearly all of them, priced by `cost`'s table. A
    /// profile of loaded weights prices every server as measured: how few experts a dummy model's
    /// tokens reach is not in it.
    /// `popularity` is how the trained model's tokens pick experts (`--routing`; even by default).
    pub fn serving(
        mut self,
        dummy: bool,
        cost: &crate::model::cost::CostModel,
        popularity: crate::model::workload::ExpertPopularity,
    ) -> EngineModel {
        self.trained_growth = if self.measured_dummy_for(dummy) {
            trained::decode_growth(cost, popularity)
        } else {
            Vec::new()
        };
        self
    }

    /// Whether the profile measured dummy weights where a deployment (`dummy` false) loads its own:
    /// then [`EngineModel::serving`] prices its replayed decode steps for a trained router.
    pub fn measured_dummy_for(&self, dummy: bool) -> bool {
        self.profile.dummy_weights && !dummy
    }

    /// Whether replayed decode steps are priced for trained weights the profile did not measure
    /// ([`EngineModel::serving`]).
    pub fn prices_trained_weights(&self) -> bool {
        !self.trained_growth.is_empty()
    }

    pub fn profile(&self) -> &VllmEngineProfile {
        &self.profile
    }

    /// What the first step after the engine sat idle costs beyond its period in the deployment's
    /// graph mode, nanoseconds: the profile's figure, or none where the mode prices a step that
    /// prefills beside no decode from its own paired measurements (that step is the idle engine's
    /// first; [`EngineModeCosts::pure_prefill_ratio`]).
    pub fn idle_start_ns(&self, graph: &GraphMode) -> u64 {
        match self.mode(graph) {
            Some(m) if m.pure_prefill_ratio.is_some() || m.pure_piecewise_ratio.is_some() => 0,
            _ => self.profile.idle_start_ns,
        }
    }

    /// The modes the profile prices, as vLLM names them.
    pub fn mode_names(&self) -> Vec<&'static str> {
        self.profile
            .modes
            .iter()
            .filter_map(|m| match m.mode.as_str() {
                EAGER => Some("--enforce-eager"),
                FULL_DECODE_ONLY => Some("FULL_DECODE_ONLY"),
                FULL_AND_PIECEWISE => Some("FULL_AND_PIECEWISE"),
                _ => None,
            })
            .collect()
    }

    /// Whether the profile prices the deployment's graph mode.
    pub fn prices(&self, graph: &GraphMode) -> bool {
        self.mode(graph).is_some()
    }

    fn mode(&self, graph: &GraphMode) -> Option<&EngineModeCosts> {
        let name = match graph {
            GraphMode::Eager => EAGER,
            // The compiled model without graphs is what FULL_DECODE_ONLY runs for every batch it
            // replays no graph for: its steps without graphs price every step.
            GraphMode::FullDecodeOnly { .. } | GraphMode::Compiled => FULL_DECODE_ONLY,
            GraphMode::FullAndPiecewise { .. } => FULL_AND_PIECEWISE,
        };
        self.profile.modes.iter().find(|m| m.mode == name)
    }

    /// What a planned step costs the engine, or `None` when the profile has no costs for the
    /// deployment's mode. Every engine of the step is priced and the slowest counts.
    pub fn step_cost(&self, graph: &GraphMode, shape: &StepShape) -> Option<EngineStepCost> {
        self.cost_of(graph, shape, shape.graph)
    }

    /// What the step of `shape` costs the engine run without graphs in mode `graph` (a uniform
    /// decode batch as one past the largest capture size), or `None` as [`Self::step_cost`].
    pub fn step_cost_without_graphs(
        &self,
        graph: &GraphMode,
        shape: &StepShape,
    ) -> Option<EngineStepCost> {
        self.cost_of(graph, shape, false)
    }

    fn cost_of(
        &self,
        graph: &GraphMode,
        shape: &StepShape,
        replays: bool,
    ) -> Option<EngineStepCost> {
        let costs = self.mode(graph)?;
        let mut cost = EngineStepCost::default();
        for e in 0..shape.tokens.len() {
            let (period, host) =
                engine_cost(costs, &self.trained_growth, (graph, replays), shape, e);
            cost.period_ns = cost.period_ns.max(period);
            cost.host_ns = cost.host_ns.max(host);
        }
        cost.host_ns = cost.host_ns.min(cost.period_ns);
        Some(cost)
    }
}

/// What engine `e` of a planned step costs in mode `costs`: `(period, host)`, nanoseconds; a
/// uniform decode step replays its graph where `replays` (the step's own `graph` flag, or false to
/// price it without graphs); with a `trained` growth (empty: none), a replayed decode step is a
/// trained model's (`trained.rs`).
fn engine_cost(
    costs: &EngineModeCosts,
    trained: &[(u32, u64)],
    (graph, replays): (&GraphMode, bool),
    shape: &StepShape,
    e: usize,
) -> (u64, u64) {
    let EngineWork {
        decodes,
        prefill,
        prefill_requests,
        context,
        continues,
    } = EngineWork::of(shape, e);
    let tokens = shape.tokens[e].max(1);
    // Long contexts cost a decode step more than the table's bursts paid.
    let extra =
        context.saturating_sub(u64::from(decodes) * u64::from(costs.decode_reference_context));
    let attend = (costs.decode_context_ns * extra as f64).round() as u64;
    // vLLM's uniform decode: every request schedules exactly one token, so a one-token
    // prefill chunk beside decodes is a decode (`gpu_model_runner.py:3857-3875`).
    let uniform = decodes + prefill_requests > 0 && prefill == prefill_requests;
    let decodes = decodes + if uniform { prefill_requests } else { 0 };
    let kernels = (costs.nonuniform_token_ns * f64::from(tokens)).round() as u64;
    // A non-uniform step priced by a table of its tokens, what each decode beside the prefill
    // adds, and the step kind's pure-prefill ratio where it schedules no decode.
    let on_table = |table: &[(u32, u64)], per_decode_ns: f64, (ratio, max_tokens)| {
        let period =
            interpolate(table, tokens) + (per_decode_ns * f64::from(decodes)).round() as u64;
        pure(period, decodes, ratio, max_tokens, tokens)
    };
    // (period, host): a replayed graph leaves the host nothing to wait for; a step issued
    // op by op is the host's for as long as its dispatch takes.
    match graph {
        GraphMode::FullDecodeOnly { .. } | GraphMode::FullAndPiecewise { .. }
            if uniform && replays =>
        {
            let batch = shape.padded.get(e).copied().unwrap_or(tokens).max(decodes);
            let period = trained_decode(costs, trained, batch) + attend;
            (period, 0)
        }
        GraphMode::Eager if uniform => {
            let period = interpolate(&costs.decode_period_ns, decodes) + attend;
            (period, period)
        }
        // Every eager step is the host's: a non-uniform one costs its requests' decode
        // period and what its prefill adds, unless its tokens' floor is larger.
        GraphMode::Eager if !costs.prefill_extra_ns.is_empty() => {
            let whole = prefill_requests == 1 && !continues;
            eager_mixed(costs, (decodes + prefill_requests, prefill), whole, kernels)
        }
        // Within the largest capture size a non-uniform batch replays piecewise graphs,
        // with attention issued from Python between them: the host holds the step too (the
        // standing streams of `cal2-piecewise` show the decode step before it leaving only
        // as it is issued, and its own tokens 2-3 ms later).
        GraphMode::FullAndPiecewise { .. }
            if !costs.piecewise_period_ns.is_empty() && graph.piecewise_size(tokens).is_some() =>
        {
            let ratio = (costs.pure_piecewise_ratio, costs.pure_piecewise_max_tokens);
            let period = on_table(&costs.piecewise_period_ns, costs.piecewise_decode_ns, ratio);
            (period, period)
        }
        // A uniform decode batch past the largest capture size (every one, for the
        // compiled model without graphs) runs the compiled model without graphs: the
        // table at its tokens and what each of its requests adds.
        GraphMode::FullDecodeOnly { .. }
        | GraphMode::FullAndPiecewise { .. }
        | GraphMode::Compiled
            if uniform
                && costs.graphless_decode_ns > 0.0
                && !costs.nonuniform_period_ns.is_empty() =>
        {
            let period = interpolate(&costs.nonuniform_period_ns, tokens)
                + (costs.graphless_decode_ns * f64::from(decodes)).round() as u64
                + attend;
            (period, period)
        }
        // The torch.compile'd model without graphs: host-bound up to thousands of tokens
        // (the table is flat where the kernels are a fraction of it).
        _ if !costs.nonuniform_period_ns.is_empty() => {
            let ratio = (costs.pure_prefill_ratio, costs.pure_prefill_max_tokens);
            let period = on_table(&costs.nonuniform_period_ns, costs.mixed_decode_ns, ratio);
            (period, period)
        }
        _ => (
            costs.nonuniform_floor_ns.max(kernels),
            costs.nonuniform_floor_ns,
        ),
    }
}

/// An eager non-uniform step of `requests` (decodes and prefills) and `prefill` tokens, `(period,
/// host)`: the requests' decode period and what the prefill adds, or the tokens' floor (`kernels`)
/// if larger. The floor is read from bursts whose full steps held many prompts, one of them
/// continuing a chunked prompt; one `whole` prompt (nothing computed before it) of up to 8,000
/// tokens stepped at the host's price beside 1-64 decodes (`cal39`, docs/fidelity.md "The
/// thirty-fourth batch"), so it is not floored within the reach of the injections that priced the
/// prefill extra (its last group, widened as every table's groups are).
fn eager_mixed(
    costs: &EngineModeCosts,
    (requests, prefill): (u32, u32),
    whole: bool,
    kernels: u64,
) -> (u64, u64) {
    let host = interpolate(&costs.decode_period_ns, requests)
        + interpolate(&costs.prefill_extra_ns, prefill);
    let reach = costs
        .prefill_extra_ns
        .last()
        .map_or(0.0, |p| f64::from(p.0) * TABLE_GROUP_RATIO);
    let floored = !(whole && f64::from(prefill) <= reach);
    (host.max(if floored { kernels } else { 0 }), host)
}

/// A replayed uniform decode step of `batch` requests: the measured period, and with a `trained`
/// growth what a trained model's routed experts cost beyond the dummy model's (`trained.rs`).
fn trained_decode(costs: &EngineModeCosts, trained: &[(u32, u64)], batch: u32) -> u64 {
    let measured = interpolate(&costs.decode_period_ns, batch);
    if trained.is_empty() {
        measured
    } else {
        measured + interpolate(trained, batch)
    }
}

/// What one engine of a planned step schedules, over its pipeline stages.
struct EngineWork {
    /// Decode requests.
    decodes: u32,
    /// Prefill tokens.
    prefill: u32,
    /// Requests with a prefill chunk.
    prefill_requests: u32,
    /// Context tokens the decodes attend to.
    context: u64,
    /// A prefill chunk attends to context computed before it.
    continues: bool,
}

impl EngineWork {
    fn of(shape: &StepShape, engine: usize) -> EngineWork {
        let mut work = EngineWork {
            decodes: 0,
            prefill: 0,
            prefill_requests: 0,
            context: 0,
            continues: false,
        };
        for w in shape.work.iter().filter_map(|stage| stage.get(engine)) {
            work.decodes += w.decode_seqs;
            work.prefill += w.prefill.iter().map(|&(t, _)| t).sum::<u32>();
            work.prefill_requests += w.prefill.len() as u32;
            work.context += w.decode_context;
            work.continues |= w.prefill.iter().any(|&(_, cached)| cached > 0);
        }
        work
    }
}

/// What one planned step costs a real vLLM engine.
///
/// Under asynchronous scheduling the engine core's one thread plans step n+1 and issues it
/// (`execute_model` runs the forward's Python on the host, vllm/v1/executor/uniproc_executor.py)
/// before it waits for step n's tokens (vllm/v1/engine/core.py `step_with_batch_queue`). A step
/// whose forward the host issues op by op (`--enforce-eager`, the compiled model without graphs)
/// holds the host for `host_ns`: the next step is planned only once it is issued, and the tokens of
/// the step before leave only then. A replayed full graph holds it for a launch (0 here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStepCost {
    /// The step's period: the larger of its host path and its kernels, nanoseconds.
    pub period_ns: u64,
    /// How long the host issues the step, nanoseconds, at most `period_ns`.
    pub host_ns: u64,
}

/// A non-uniform step's period: `ratio` times the table's when it prefills beside no decode (the
/// mode's measured [`EngineModeCosts::pure_prefill_ratio`] or `pure_piecewise_ratio`) and schedules
/// at most the tokens its pairs reach (`pure_prefill_max_tokens`, `pure_piecewise_max_tokens`),
/// else as is.
fn pure(
    period: u64,
    decodes: u32,
    ratio: Option<f64>,
    max_tokens: Option<u32>,
    tokens: u32,
) -> u64 {
    if decodes > 0 {
        return period;
    }
    let ratio = idle::PureRatio::of(ratio, max_tokens).map_or(1.0, |p| p.at(tokens));
    (period as f64 * ratio).round() as u64
}

/// Piecewise-linear in batch size; flat below the first point, the last segment's slope above.
fn interpolate(points: &[(u32, u64)], batch: u32) -> u64 {
    let x = f64::from(batch);
    let at = |i: usize| (f64::from(points[i].0), points[i].1 as f64);
    let (x0, y0) = at(0);
    if points.len() == 1 || x <= x0 {
        return y0 as u64;
    }
    let i = points
        .iter()
        .position(|p| f64::from(p.0) >= x)
        .unwrap_or(points.len() - 1)
        .max(1);
    let ((xa, ya), (xb, yb)) = (at(i - 1), at(i));
    (ya + (yb - ya) * (x - xa) / (xb - xa)).max(0.0).round() as u64
}

mod idle;
mod jit;
mod roles;
#[cfg(test)]
pub(crate) mod tests;
mod trained;
mod unmeasured;

pub use jit::{JitCache, MoeKernelKey, moe_kernel_key};
pub use roles::{division_at, division_words, role_division};
pub use unmeasured::unmeasured_terms;
