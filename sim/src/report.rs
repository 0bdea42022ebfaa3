//! The report built from a run's metrics (`metrics.rs`): the `vllm bench serve` summary (same
//! fields, same definitions), plus the simulator's own figures.

use afd_traces::report::{
    BenchSummary, CostSource, DeploymentSummary, PerGpu, PredictReport, REPORT_FORMAT,
    REPORT_SCHEMA_VERSION, RequestRow, StepRow, StepSummary, Utilisation, WorkloadSummary,
};

use std::collections::BTreeMap;

use afd_traces::timeline::ChromeTrace;

use crate::cluster::{ClusterTotals, Regime, RunSummary, StepRecord};
use crate::engine::RunResult;
use crate::model::cost::{OpClass, UsageCounts};
use crate::model::workload::Workload;
use crate::pipeline::{PipelineLayout, SpanKind, SpanSink, Track};
use crate::rng::Seed;
use crate::serving::{Placement, ServingConfig};
use crate::time::SimTime;

/// What a report says about its inputs beyond the run itself.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportContext<'a> {
    pub config: &'a ServingConfig,
    pub workload: &'a Workload,
    pub seed: Seed,
    /// `random` or the trace's file name.
    pub dataset: &'a str,
}

/// Builds the prediction report of a run.
pub fn build_report(result: &RunResult, context: &ReportContext<'_>) -> PredictReport {
    let config = context.config;
    let benchmark = bench_summary(result);
    let gpus = f64::from(config.gpus());
    let summary = &result.summary;
    let totals = &summary.totals;
    let span_ns = result.end.as_ns().max(1) as f64;
    let cost = &summary.cost;
    PredictReport {
        format: REPORT_FORMAT.to_owned(),
        schema_version: REPORT_SCHEMA_VERSION,
        seed: context.seed.0,
        event_log_hash: format!("{:016x}", result.event_log_hash),
        outcome: result.outcome.as_str().to_owned(),
        events: result.events,
        model: summary.model().name.clone(),
        deployment: deployment_summary(config, summary),
        workload: WorkloadSummary {
            num_prompts: context.workload.requests.len() as u64,
            request_rate: context.workload.request_rate,
            burstiness: context.workload.burstiness,
            max_concurrency: context.workload.max_concurrency,
            dataset: context.dataset.to_owned(),
        },
        per_gpu: PerGpu {
            output_tokens_per_s_per_gpu: benchmark.output_throughput / gpus,
            total_tokens_per_s_per_gpu: benchmark.total_token_throughput / gpus,
        },
        benchmark,
        utilisation: Utilisation {
            attention: totals.attention_busy_ns as f64
                / (span_ns * f64::from(config.attention_ranks())),
            ffn: totals.ffn_busy_ns as f64 / (span_ns * f64::from(config.ffn_ranks())),
            links: totals.link_busy_ns as f64 / (span_ns * f64::from(config.ffn_ranks())),
        },
        steps: step_summary(totals),
        calibration: cost.calibration_name().map(str::to_owned),
        costs: cost_sources(&summary.usage),
        afd_link: cost.afd_link().map(|afd| afd.link.describe()),
    }
}

/// The `vllm bench serve` fields of a run: counts, throughputs over the benchmark's duration
/// (from its start to the last completion, as vLLM measures), and latency statistics.
fn bench_summary(result: &RunResult) -> BenchSummary {
    let m = &result.metrics;
    // vLLM measures from the benchmark start to the last completion.
    let duration = if m.completed > 0 {
        m.last_finish
    } else {
        result.end
    }
    .as_secs_f64();
    let per_s = |x: f64| if duration > 0.0 { x / duration } else { 0.0 };
    let [mean_ttft_ms, median_ttft_ms, std_ttft_ms, p99_ttft_ms] = m.ttft.summary_ms();
    let [mean_tpot_ms, median_tpot_ms, std_tpot_ms, p99_tpot_ms] = m.tpot.summary_ms();
    let [mean_itl_ms, median_itl_ms, std_itl_ms, p99_itl_ms] = m.itl.summary_ms();
    let [mean_e2el_ms, median_e2el_ms, std_e2el_ms, p99_e2el_ms] = m.e2el.summary_ms();
    BenchSummary {
        completed: m.completed,
        failed: m.failed,
        duration,
        total_input_tokens: m.input_tokens,
        total_output_tokens: m.output_tokens,
        request_throughput: per_s(m.completed as f64),
        output_throughput: per_s(m.output_tokens as f64),
        total_token_throughput: per_s((m.input_tokens + m.output_tokens) as f64),
        mean_ttft_ms,
        median_ttft_ms,
        std_ttft_ms,
        p99_ttft_ms,
        mean_tpot_ms,
        median_tpot_ms,
        std_tpot_ms,
        p99_tpot_ms,
        mean_itl_ms,
        median_itl_ms,
        std_itl_ms,
        p99_itl_ms,
        mean_e2el_ms,
        median_e2el_ms,
        std_e2el_ms,
        p99_e2el_ms,
    }
}

/// The deployment as the run served it: layout, limits, DBO, graphs and the KV cache's size.
fn deployment_summary(config: &ServingConfig, summary: &RunSummary) -> DeploymentSummary {
    DeploymentSummary {
        placement: match config.placement {
            Placement::Disaggregated => "disaggregated",
            Placement::Colocated => "colocated",
        }
        .to_owned(),
        attention_dp: config.attention.dp,
        attention_tp: config.attention.tp,
        ffn_dp: config.ffn.dp,
        ffn_tp: config.ffn.tp,
        expert_parallel: config.ffn.expert_parallel,
        attention_ranks: config.attention_ranks(),
        ffn_ranks: config.ffn_ranks(),
        gpus: config.gpus(),
        gpu: config.gpu.as_str().to_owned(),
        rules: config.rules.as_str().to_owned(),
        max_num_seqs: config.max_num_seqs,
        max_num_batched_tokens: config.max_num_batched_tokens,
        dbo: config.dbo.is_some(),
        dbo_decode_token_threshold: config.dbo.map(|d| d.decode_threshold),
        dbo_prefill_token_threshold: config.dbo.map(|d| d.prefill_threshold),
        cudagraph_mode: config.graph.name().to_owned(),
        cudagraph_capture_sizes: config.graph.capture_sizes().to_vec(),
        gpu_memory_utilization: config.gpu_memory_utilization,
        block_size: summary.kv_block_size,
        kv_blocks_per_engine: summary.kv_blocks_per_engine,
    }
}

/// The run's steps: counts by kind, bounding-resource shares, overlap, padding, preemptions.
fn step_summary(totals: &ClusterTotals) -> StepSummary {
    let share = |n: u64| {
        if totals.steps > 0 {
            n as f64 / totals.steps as f64
        } else {
            0.0
        }
    };
    let mean = |sum: f64, n: u64| if n > 0 { sum / n as f64 } else { 0.0 };
    let rows = totals.real_rows + totals.padded_rows;
    StepSummary {
        total: totals.steps,
        graph: totals.graph_steps,
        eager: totals.eager_steps,
        ffn_graph: totals.ffn_graph_steps,
        dbo: totals.dbo_steps,
        dbo_hazards: totals.dbo_hazards,
        attention_bound_share: share(totals.regime_attention),
        ffn_bound_share: share(totals.regime_ffn),
        transfer_bound_share: share(totals.regime_transfer),
        host_bound_share: share(totals.regime_host),
        dbo_overlap: mean(totals.overlap_sum_dbo, totals.dbo_steps),
        single_stage_overlap: mean(totals.overlap_sum_single, totals.steps - totals.dbo_steps),
        padded_row_share: if rows > 0 {
            totals.padded_rows as f64 / rows as f64
        } else {
            0.0
        },
        preemptions: totals.preemptions,
        oversized_messages: totals.oversized_messages,
        shortcut_layers: totals.shortcut_layers,
    }
}

/// Where each operation class was priced from, and how often, in [`OpClass::ALL`] order.
fn cost_sources(usage: &UsageCounts) -> Vec<CostSource> {
    OpClass::ALL
        .iter()
        .map(|&class| {
            let counts = usage.of(class);
            CostSource {
                op: class.as_str().to_owned(),
                source: usage.source_of(class).to_owned(),
                calibrated_queries: counts.calibrated,
                roofline_queries: counts.roofline,
                out_of_range: counts.out_of_range,
            }
        })
        .collect()
}

/// Per-request rows for `--requests-csv`, in workload order.
pub fn request_rows(result: &RunResult, workload: &Workload) -> Vec<RequestRow> {
    let ms = |t: SimTime| t.as_ns() as f64 / 1e6;
    result
        .requests
        .iter()
        .zip(&workload.requests)
        .enumerate()
        .map(|(i, (trace, spec))| {
            let send = trace.send;
            let since = |t: Option<SimTime>| match (t, send) {
                (Some(t), Some(s)) => Some((t - s).as_ms_f64()),
                _ => None,
            };
            let ttft = since(trace.first_token);
            let e2el = since(trace.finish);
            let tpot = match (ttft, e2el) {
                (Some(first), Some(total)) if trace.tokens > 1 => {
                    Some((total - first) / f64::from(trace.tokens - 1))
                }
                _ => None,
            };
            RequestRow {
                request: i as u64,
                engine: trace.engine,
                input_tokens: spec.input_tokens,
                output_tokens: trace.tokens,
                intended_send_ms: ms(spec.intended_send),
                send_ms: send.map_or(f64::NAN, ms),
                first_token_ms: trace.first_token.map(ms),
                finish_ms: trace.finish.map(ms),
                ttft_ms: ttft,
                tpot_ms: tpot,
                e2el_ms: e2el,
                preemptions: trace.id.map_or(0, |id| result.summary.preemptions_of(id)),
                error: trace.rejection.map_or_else(String::new, |r| r.to_string()),
            }
        })
        .collect()
}

/// Per-step rows for `--steps-csv`.
pub fn step_rows(steps: &[StepRecord]) -> Vec<StepRow> {
    let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(";");
    steps
        .iter()
        .map(|s| StepRow {
            step: s.index,
            start_ms: s.start.as_ns() as f64 / 1e6,
            duration_us: (s.end - s.start).as_ns() as f64 / 1e3,
            mode: if s.graph { "graph" } else { "eager" }.to_owned(),
            ffn_graph: s.ffn_graph,
            ubatches: s.stages,
            tokens: join(&s.tokens),
            padded: join(&s.padded),
            regime: match s.regime {
                _ if s.host_bound => "host",
                Regime::Attention => "attention",
                Regime::Ffn => "ffn",
                Regime::Transfer => "transfer",
            }
            .to_owned(),
            overlap: s.overlap,
            attention_busy_us: s.attention_busy_ns as f64 / 1e3,
            ffn_busy_us: s.ffn_busy_ns as f64 / 1e3,
            transfer_busy_us: s.transfer_busy_ns as f64 / 1e3,
        })
        .collect()
}

/// The recorded spans as a Chrome trace: process 1 holds one track per Attention rank, process 2
/// one per FFN rank, process 3 one per link direction of each Attention rank.
pub fn timeline(sink: &SpanSink, layout: &PipelineLayout) -> ChromeTrace {
    let us = |ns: u64| ns as f64 / 1e3;
    let mut trace = ChromeTrace::new(us(sink.window.0), us(sink.window.1));
    let track_id = |track: Track| -> (u32, u32) {
        match track {
            Track::Attention(a) => (1, a as u32 + 1),
            Track::Ffn(f) => (2, f as u32 + 1),
            Track::LinkToFfn(a) => (3, 2 * a as u32 + 1),
            Track::LinkToAttention(a) => (3, 2 * a as u32 + 2),
        }
    };
    for a in 0..layout.attention_ranks {
        let f = layout.subgroup_of[a];
        let (pid, tid) = track_id(Track::Attention(a));
        trace.name_track(pid, "attention", tid, &format!("A{a} stream"));
        let (pid, tid) = track_id(Track::LinkToFfn(a));
        trace.name_track(pid, "links", tid, &format!("A{a}→F{f}"));
        let (pid, tid) = track_id(Track::LinkToAttention(a));
        trace.name_track(pid, "links", tid, &format!("F{f}→A{a}"));
    }
    for f in 0..layout.ffn_ranks {
        let (pid, tid) = track_id(Track::Ffn(f));
        trace.name_track(pid, "ffn", tid, &format!("F{f} stream"));
    }
    for span in &sink.spans {
        let (pid, tid) = track_id(span.track);
        let (name, cat) = match span.kind {
            SpanKind::Control => ("control payload", "p2p"),
            SpanKind::AttentionCompute => ("attention", "compute"),
            SpanKind::AttentionAllReduce => ("attention all-reduce", "collective"),
            SpanKind::Send => ("send A→F", "p2p"),
            SpanKind::Recv => ("recv F→A", "p2p"),
            SpanKind::FfnRecv => ("recv A→F", "p2p"),
            SpanKind::FfnCompute => ("ffn", "compute"),
            SpanKind::FfnCollective => ("ffn collective", "collective"),
            SpanKind::FfnSend => ("send F→A", "p2p"),
            SpanKind::LmHead => ("lm head + sampling", "compute"),
        };
        let args = BTreeMap::from([
            ("layer".to_owned(), span.layer.to_string()),
            ("ubatch".to_owned(), span.stage.to_string()),
        ]);
        trace.span(
            pid,
            tid,
            &format!("{name} L{} u{}", span.layer, span.stage),
            cat,
            (us(span.start), us(span.end - span.start)),
            args,
        );
    }
    trace
}
