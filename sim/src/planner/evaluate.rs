//! One candidate simulated in full (every request of the workload, every layer of every step) and
//! turned into its CSV row: the deployment, every metric of the `predict` report, the SLO verdict
//! and the closed-form cross-checks.
//!
//! A candidate whose limits lie inside the limit spans of a simulated candidate's run (and whose
//! configuration is otherwise the same) runs identically (`model/limits.rs`): [`reuse`] builds its
//! row from that run's row and its own configuration, without simulating.
//!
//! The cross-check flags a closed form that is more than [`DISAGREEMENT`] off the simulation and
//! names why, from what the simulation saw (docs/planner.md lists the categories).

use afd_traces::calibration::CalibrationProfile;
use afd_traces::sweep::{SWEEP_SCHEMA_VERSION, SweepRow};

use crate::closed_form::ClosedFormSummary;
use crate::cluster::StepMemo;
use crate::cluster::kv_capacity;
use crate::engine::{RunOptions, run_sharing_memo};
use crate::model::arch::ModelArch;
use crate::model::cost::{AfdLink, CostModel};
use crate::model::limits::{LimitSpans, LimitValues};
use crate::model::routing::LoadsCache;
use crate::model::workload::Workload;
use crate::planner::candidate::Candidate;
use crate::planner::capacity::{self, CapacitySearch};
use crate::planner::frontier::{Slo, verdict};
use crate::report::{ReportContext, build_report};
use crate::serving::{Placement, ServingConfig};

/// Relative error above which a closed form and the simulation disagree.
pub const DISAGREEMENT: f64 = 0.15;

/// What every candidate's simulation shares.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    pub model: &'a ModelArch,
    /// A calibration profile and the name it is reported under.
    pub calibration: Option<(&'a CalibrationProfile, &'a str)>,
    pub workload: &'a Workload,
    /// `random` or the trace's name.
    pub dataset: &'a str,
    pub options: RunOptions,
    pub slo: Slo,
    /// The network between nodes, for candidates whose Attention and FFN ranks sit on different
    /// nodes (`Candidate::cross_node`); `None` prices them over the GPUs' own link.
    pub cross_node_link: Option<CrossNodeLink>,
    /// The routing pools' cache every candidate's run draws through (a pure cache; it changes no
    /// row, and is not part of the sweep's fingerprint).
    pub loads: LoadsCache,
    /// Search each candidate's capacity under the SLO (`capacity.rs`) instead of running it once
    /// at the workload's load; `workload` is then the base the probes rescale.
    pub capacity: Option<CapacitySearch>,
    /// Real vLLM's engine, when the sweep prices its candidates as vLLM runs them
    /// (`vllm_compare::price_as_vllm`, as `predict` does by default): each candidate a server that
    /// loads trained weights, past its first fused-MoE compiles; `None` prices from kernels alone.
    pub engine: Option<std::sync::Arc<crate::model::engine::EngineModel>>,
}

/// The link between nodes and how many GPUs of a node share its NICs.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossNodeLink {
    pub link: crate::model::link::Link,
    pub gpus_per_node: u32,
}

/// The cost model of `config` (calibrated where the profile has a table, else the roofline).
pub fn cost_model(config: &ServingConfig, inputs: &Inputs<'_>) -> CostModel {
    let layout = config.cost_layout();
    match inputs.calibration {
        None => CostModel::roofline(inputs.model, config.gpu, layout),
        Some((profile, name)) => {
            CostModel::calibrated(inputs.model, config.gpu, layout, profile, name)
                .expect("the profile was checked against the model before the sweep")
        }
    }
}

/// The cost model of a candidate: [`cost_model`], with its A↔F hand-offs over the network when its
/// roles sit on different nodes and a cross-node link was given.
pub fn candidate_cost_model(candidate: &Candidate, inputs: &Inputs<'_>) -> CostModel {
    let cost = cost_model(&candidate.config, inputs);
    match &inputs.cross_node_link {
        Some(between) if candidate.cross_node => {
            let config = &candidate.config;
            // The ranks of a role on one node share its NICs.
            let ranks_on_host = config
                .attention_ranks()
                .max(config.ffn_ranks())
                .min(between.gpus_per_node.max(1));
            let mut link = between.link.clone();
            if let Some(nics) = candidate.nics {
                link.nics = nics;
            }
            cost.with_afd_link(AfdLink {
                link,
                ranks_on_host,
            })
        }
        _ => cost,
    }
}

/// What a candidate's run is priced with: [`candidate_cost_model`] and the sweep's options, both as
/// real vLLM runs the candidate where the sweep has an engine (`vllm_compare::price_as_vllm`: a
/// server of trained weights, scheduling asynchronously as vLLM's default does, past its first
/// fused-MoE compiles, as `predict --warm-kernels` prices it).
pub fn candidate_pricing(
    candidate: &Candidate,
    inputs: &Inputs<'_>,
    workload: &Workload,
) -> (CostModel, RunOptions) {
    let cost = candidate_cost_model(candidate, inputs);
    let mut options = inputs.options.clone();
    let Some(engine) = &inputs.engine else {
        return (cost, options);
    };
    let config = &candidate.config;
    let server = crate::vllm_compare::RealServer {
        config,
        pair: config.placement == Placement::Disaggregated,
        dummy_weights: false,
        async_scheduling: true,
        popularity: options.model.popularity,
        warm_kernels: true,
    };
    let (cost, _) =
        crate::vllm_compare::price_as_vllm(cost, server, engine, workload, &mut options);
    (cost, options)
}

/// NICs per host a candidate's A↔F hand-offs share when they cross the network: its own count
/// (the `nics` dimension) or the link's; `None` when they stay on the GPUs' own link.
fn afd_nics(candidate: &Candidate, inputs: &Inputs<'_>) -> Option<u32> {
    let between = inputs.cross_node_link.as_ref()?;
    (candidate.cross_node && candidate.config.placement == Placement::Disaggregated)
        .then(|| candidate.nics.unwrap_or(between.link.nics))
}

/// A simulated candidate: its row and, when it ran, the limit spans of its run.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluated {
    pub row: SweepRow,
    pub spans: Option<LimitSpans>,
}

/// Simulates `candidate` and returns its row (frontier and rank left empty: they need every row).
pub fn evaluate(
    candidate: &Candidate,
    index: u64,
    candidates: u64,
    sweep: &str,
    inputs: &Inputs<'_>,
) -> SweepRow {
    simulate(candidate, index, candidates, sweep, inputs, &mut None).row
}

/// The scheduler limits `candidate` runs with, the KV capacity per engine included.
pub fn limit_values(candidate: &Candidate, inputs: &Inputs<'_>) -> LimitValues {
    let config = &candidate.config;
    LimitValues {
        max_num_seqs: u64::from(config.max_num_seqs),
        max_num_batched_tokens: u64::from(config.max_num_batched_tokens),
        kv_blocks: kv_capacity(config, inputs.model, config.gpu.spec().memory_bytes).0,
    }
}

/// The row of `candidate` when its run is proven identical to the run that gave `source` (same
/// configuration but for limits inside that run's spans): every simulated column comes from
/// `source`, every configuration column (command lines, limits, KV capacity, …) is its own.
pub fn reuse(
    candidate: &Candidate,
    index: u64,
    candidates: u64,
    sweep: &str,
    inputs: &Inputs<'_>,
    source: &SweepRow,
) -> SweepRow {
    let own = config_row(candidate, index, candidates, sweep, inputs);
    SweepRow {
        schema_version: own.schema_version,
        sweep: own.sweep,
        candidate: own.candidate,
        candidates: own.candidates,
        kind: own.kind,
        gpus: own.gpus,
        nodes: own.nodes,
        attention_ranks: own.attention_ranks,
        ffn_ranks: own.ffn_ranks,
        attention_dp: own.attention_dp,
        attention_tp: own.attention_tp,
        ffn_dp: own.ffn_dp,
        ffn_tp: own.ffn_tp,
        expert_parallel: own.expert_parallel,
        dbo_decode_token_threshold: own.dbo_decode_token_threshold,
        dbo_prefill_token_threshold: own.dbo_prefill_token_threshold,
        cudagraph_mode: own.cudagraph_mode,
        cudagraph_capture_sizes: own.cudagraph_capture_sizes,
        max_num_seqs: own.max_num_seqs,
        max_num_batched_tokens: own.max_num_batched_tokens,
        cross_node: own.cross_node,
        nics: own.nics,
        warnings: own.warnings,
        kv_blocks_per_engine: Some(limit_values(candidate, inputs).kv_blocks),
        ttft_slo_ms: own.ttft_slo_ms,
        tpot_slo_ms: own.tpot_slo_ms,
        slo_stat: own.slo_stat,
        attention_args: own.attention_args,
        ffn_args: own.ffn_args,
        ..source.clone()
    }
}

/// Simulates `candidate`: its row and the limit spans of its run. `memo` carries the step memo
/// between runs of one pipeline (`cluster/memo.rs`): the row is the same with or without it.
pub fn simulate(
    candidate: &Candidate,
    index: u64,
    candidates: u64,
    sweep: &str,
    inputs: &Inputs<'_>,
    memo: &mut Option<StepMemo>,
) -> Evaluated {
    match inputs.capacity {
        Some(search) => capacity::search(candidate, index, candidates, sweep, inputs, search, memo),
        None => simulate_with(
            candidate,
            index,
            candidates,
            sweep,
            inputs,
            inputs.workload,
            memo,
        ),
    }
}

/// Simulates `candidate` under `workload` (the sweep's, or one load of a capacity search).
pub fn simulate_with(
    candidate: &Candidate,
    index: u64,
    candidates: u64,
    sweep: &str,
    inputs: &Inputs<'_>,
    workload: &Workload,
    memo: &mut Option<StepMemo>,
) -> Evaluated {
    let config = &candidate.config;
    let mut row = config_row(candidate, index, candidates, sweep, inputs);
    let (cost, options) = candidate_pricing(candidate, inputs, workload);
    let result = match run_sharing_memo(config, cost, workload, &options, memo, &inputs.loads) {
        Ok(result) => result,
        Err(err) => {
            row.status = "infeasible".to_owned();
            row.error = err.to_string();
            return Evaluated { row, spans: None };
        }
    };
    let report = build_report(
        &result,
        &ReportContext {
            config,
            workload,
            seed: inputs.options.seed,
            dataset: inputs.dataset,
        },
    );
    let b = &report.benchmark;
    row.outcome = Some(report.outcome.clone());
    row.completed = Some(b.completed);
    row.failed = Some(b.failed);
    row.duration = Some(b.duration);
    row.request_throughput = Some(b.request_throughput);
    row.output_throughput = Some(b.output_throughput);
    row.total_token_throughput = Some(b.total_token_throughput);
    row.mean_ttft_ms = Some(b.mean_ttft_ms);
    row.median_ttft_ms = Some(b.median_ttft_ms);
    row.std_ttft_ms = Some(b.std_ttft_ms);
    row.p99_ttft_ms = Some(b.p99_ttft_ms);
    row.mean_tpot_ms = Some(b.mean_tpot_ms);
    row.median_tpot_ms = Some(b.median_tpot_ms);
    row.std_tpot_ms = Some(b.std_tpot_ms);
    row.p99_tpot_ms = Some(b.p99_tpot_ms);
    row.mean_itl_ms = Some(b.mean_itl_ms);
    row.median_itl_ms = Some(b.median_itl_ms);
    row.std_itl_ms = Some(b.std_itl_ms);
    row.p99_itl_ms = Some(b.p99_itl_ms);
    row.mean_e2el_ms = Some(b.mean_e2el_ms);
    row.median_e2el_ms = Some(b.median_e2el_ms);
    row.std_e2el_ms = Some(b.std_e2el_ms);
    row.p99_e2el_ms = Some(b.p99_e2el_ms);
    row.output_tokens_per_s_per_gpu = Some(report.per_gpu.output_tokens_per_s_per_gpu);
    row.total_tokens_per_s_per_gpu = Some(report.per_gpu.total_tokens_per_s_per_gpu);
    row.attention_utilisation = Some(report.utilisation.attention);
    row.ffn_utilisation = Some(report.utilisation.ffn);
    row.link_utilisation = Some(report.utilisation.links);
    let steps = &report.steps;
    row.steps = Some(steps.total);
    row.graph_steps = Some(steps.graph);
    row.eager_steps = Some(steps.eager);
    row.dbo_steps = Some(steps.dbo);
    row.dbo_overlap = Some(steps.dbo_overlap);
    row.attention_bound_share = Some(steps.attention_bound_share);
    row.ffn_bound_share = Some(steps.ffn_bound_share);
    row.transfer_bound_share = Some(steps.transfer_bound_share);
    row.host_bound_share = Some(steps.host_bound_share);
    row.padded_row_share = Some(steps.padded_row_share);
    row.preemptions = Some(steps.preemptions);
    row.kv_blocks_per_engine = Some(report.deployment.kv_blocks_per_engine);
    row.event_log_hash = Some(report.event_log_hash.clone());
    row.slo = verdict(&row, &inputs.slo).to_owned();
    if let Some(summary) = result.summary.totals.closed_form.summary() {
        cross_check(&mut row, &summary);
    }
    Evaluated {
        row,
        spans: Some(result.summary.limit_spans),
    }
}

/// The warning of a capacity search whose workload is too small for the candidate (the sweep's
/// summary counts them): fewer requests than twice its request slots (engines × `max_num_seqs`), so
/// the saturated probe that bounds the search never fills every engine twice and the capacity is
/// partly the workload's, not the deployment's. Measured on 16 H200s (docs/planner.md): the best
/// goodput rose 10 % from 1,024 to 2,048 prompts and 8 % more to 4,096.
pub const WORKLOAD_BOUND: &str = "capacity.workload-bound";

/// The prompts that fill twice the request slots of `engines` engines of `max_num_seqs` each: fewer
/// make a capacity [`WORKLOAD_BOUND`].
pub fn filling_prompts(engines: u32, max_num_seqs: u32) -> u64 {
    2 * u64::from(engines) * u64::from(max_num_seqs)
}

/// The rule warnings of `candidate`, and [`WORKLOAD_BOUND`] where it applies, `;`-separated.
fn row_warnings(candidate: &Candidate, inputs: &Inputs<'_>) -> String {
    let mut warnings = candidate.warnings.clone();
    let filling = filling_prompts(candidate.config.attention.dp, candidate.point.max_num_seqs);
    if inputs.capacity.is_some() && (inputs.workload.requests.len() as u64) < filling {
        warnings.push(WORKLOAD_BOUND.to_owned());
    }
    warnings.join(";")
}

/// The configuration columns of `candidate`'s row; every simulated column empty.
fn config_row(
    candidate: &Candidate,
    index: u64,
    candidates: u64,
    sweep: &str,
    inputs: &Inputs<'_>,
) -> SweepRow {
    let config = &candidate.config;
    let point = &candidate.point;
    let colocated = config.placement == Placement::Colocated;
    SweepRow {
        schema_version: SWEEP_SCHEMA_VERSION,
        sweep: sweep.to_owned(),
        candidate: index,
        candidates,
        kind: if colocated { "colocated" } else { "afd" }.to_owned(),
        gpus: config.gpus(),
        nodes: candidate.nodes,
        attention_ranks: config.attention_ranks(),
        ffn_ranks: if colocated { 0 } else { config.ffn_ranks() },
        attention_dp: config.attention.dp,
        attention_tp: config.attention.tp,
        ffn_dp: (!colocated).then_some(config.ffn.dp),
        ffn_tp: (!colocated).then_some(config.ffn.tp),
        expert_parallel: config.ffn.expert_parallel,
        dbo_decode_token_threshold: config.dbo.map(|d| d.decode_threshold),
        dbo_prefill_token_threshold: config.dbo.map(|d| d.prefill_threshold),
        cudagraph_mode: config.graph.name().to_owned(),
        cudagraph_capture_sizes: candidate
            .capture_sizes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(";"),
        max_num_seqs: point.max_num_seqs,
        max_num_batched_tokens: point.max_num_batched_tokens,
        cross_node: candidate.cross_node,
        nics: afd_nics(candidate, inputs),
        warnings: row_warnings(candidate, inputs),
        status: "ok".to_owned(),
        ttft_slo_ms: inputs.slo.ttft_ms,
        tpot_slo_ms: inputs.slo.tpot_ms,
        slo_stat: inputs.slo.stat.as_str().to_owned(),
        slo: "fail".to_owned(),
        attention_args: candidate.attention_args.clone(),
        ffn_args: candidate.ffn_args.clone(),
        // Every simulated column stays empty until the run fills it.
        ..SweepRow::default()
    }
}

/// Fills the closed-form columns and the disagreement flag.
fn cross_check(row: &mut SweepRow, summary: &ClosedFormSummary) {
    let relative = |closed: f64, simulated: f64| {
        if simulated > 0.0 {
            closed / simulated - 1.0
        } else {
            0.0
        }
    };
    let step_error = relative(summary.closed_form_step_ms, summary.simulated_step_ms);
    let throughput_error = relative(
        summary.closed_form_tokens_per_s_per_gpu,
        summary.simulated_tokens_per_s_per_gpu,
    );
    row.cf_t_attention_us = Some(summary.times.attention_us);
    row.cf_t_ffn_us = Some(summary.times.ffn_us);
    row.cf_t_transfer_us = Some(summary.times.transfer_us);
    row.cf_ubatches = Some(summary.stages);
    row.cf_pipeline_condition = Some(
        if summary.condition_holds {
            "holds"
        } else {
            "violated"
        }
        .to_owned(),
    );
    row.cf_step_ms = Some(summary.closed_form_step_ms);
    row.sim_step_ms = Some(summary.simulated_step_ms);
    row.cf_step_error = Some(step_error);
    row.af_ratio = Some(summary.ratio);
    row.af_ratio_optimal = summary.optimal_ratio.map(|(r, _)| r);
    row.af_regime = summary
        .optimal_ratio
        .map(|(_, regime)| regime.as_str().to_owned());
    row.cf_decode_tokens_per_s_per_gpu = Some(summary.closed_form_tokens_per_s_per_gpu);
    row.sim_decode_tokens_per_s_per_gpu = Some(summary.simulated_tokens_per_s_per_gpu);
    row.cf_throughput_error = Some(throughput_error);
    let mut reasons = Vec::new();
    if step_error.abs() > DISAGREEMENT {
        reasons.extend(categories(summary, false).map(|c| format!("step:{c}")));
    }
    if throughput_error.abs() > DISAGREEMENT {
        reasons.extend(categories(summary, true).map(|c| format!("throughput:{c}")));
    }
    row.cross_check = Some(if reasons.is_empty() { "ok" } else { "disagree" }.to_owned());
    row.cross_check_reason = reasons.join(";");
}

/// Why a closed form may miss what the simulation saw: the effects it leaves out that this run
/// showed, or `other`.
fn categories(summary: &ClosedFormSummary, throughput: bool) -> impl Iterator<Item = &'static str> {
    let mut out = Vec::new();
    if throughput && summary.stages < 1.5 {
        // The ratio paper's cycle assumes Attention and FFN work overlap; one ubatch cannot.
        out.push("no-ubatch-overlap");
    }
    if summary.stages >= 1.5 && !summary.condition_holds {
        out.push("overlap-condition");
    }
    if summary.eager_share > 0.5 {
        out.push("eager-launch");
    }
    if summary.ffn_imbalance > DISAGREEMENT {
        out.push("expert-imbalance");
    }
    if summary.attention_imbalance > DISAGREEMENT {
        out.push("attention-imbalance");
    }
    if out.is_empty() {
        out.push("other");
    }
    out.into_iter()
}
