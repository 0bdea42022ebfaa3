//! The prediction report of `afd-sim predict`: a `vllm bench serve`-shaped summary (the same JSON
//! field names, flattened at the top level) plus what only a simulator can say (per-GPU throughput,
//! per-role utilisation, regimes, DBO overlap, graph vs eager steps, cost sources, bounds outcome,
//! seed and event-log hash), and the per-request and per-step CSV rows.
//!
//! This module defines, renders and checks the format; it computes nothing.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Schema version written by this build.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// The `format` tag of a prediction report.
pub const REPORT_FORMAT: &str = "afd-sim-predict";

/// A prediction report (JSON with `--json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PredictReport {
    pub format: String,
    pub schema_version: u32,
    pub seed: u64,
    /// xxh3-64 of the event log, 16 hex digits.
    pub event_log_hash: String,
    /// `completed`, `event_limit` or `horizon`.
    pub outcome: String,
    pub events: u64,
    pub model: String,
    pub deployment: DeploymentSummary,
    pub workload: WorkloadSummary,
    /// The `vllm bench serve` fields, at the top level as vLLM writes them.
    #[serde(flatten)]
    pub benchmark: BenchSummary,
    pub per_gpu: PerGpu,
    pub utilisation: Utilisation,
    pub steps: StepSummary,
    /// The calibration profile used, if any.
    pub calibration: Option<String>,
    /// Which source priced each operation class.
    pub costs: Vec<CostSource>,
    /// The link A↔F hand-offs took and where its figures came from, when it is not the GPUs' own
    /// (roles on different hosts, or `--link`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub afd_link: Option<String>,
}

/// The deployment, as simulated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeploymentSummary {
    /// `disaggregated` (an AFD pair) or `colocated` (one plain vLLM server, whose attention and
    /// FFN layouts are the same GPUs'). Files written before the field are pairs.
    #[serde(default = "disaggregated")]
    pub placement: String,
    pub attention_dp: u32,
    pub attention_tp: u32,
    pub ffn_dp: u32,
    pub ffn_tp: u32,
    pub expert_parallel: bool,
    pub attention_ranks: u32,
    pub ffn_ranks: u32,
    pub gpus: u32,
    pub gpu: String,
    pub rules: String,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// Whether the deployment ran with dual-batch overlap (`--enable-dbo`, or `--ubatch-size 2`);
    /// the thresholds below are `null` when it did not.
    #[serde(default)]
    pub dbo: bool,
    pub dbo_decode_token_threshold: Option<u32>,
    pub dbo_prefill_token_threshold: Option<u32>,
    /// `FULL_DECODE_ONLY`, `FULL_AND_PIECEWISE` (a plain server), `PIECEWISE` or `eager`.
    pub cudagraph_mode: String,
    pub cudagraph_capture_sizes: Vec<u32>,
    pub gpu_memory_utilization: f64,
    /// Tokens of one KV block: `--block-size`, or vLLM's larger attention block for a hybrid
    /// linear-attention model (one page holds a layer's state).
    pub block_size: u32,
    pub kv_blocks_per_engine: u64,
}

fn disaggregated() -> String {
    "disaggregated".to_owned()
}

/// The client side, as `vllm bench serve` reports it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSummary {
    pub num_prompts: u64,
    /// Requests per second; `null` for `inf`.
    pub request_rate: Option<f64>,
    pub burstiness: f64,
    pub max_concurrency: Option<u32>,
    /// `random` or the trace file name.
    pub dataset: String,
}

/// The fields of `vllm bench serve --save-result`, same names and units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchSummary {
    pub completed: u64,
    pub failed: u64,
    /// Seconds from the first intended send to the last completion.
    pub duration: f64,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub total_token_throughput: f64,
    pub mean_ttft_ms: f64,
    pub median_ttft_ms: f64,
    pub std_ttft_ms: f64,
    pub p99_ttft_ms: f64,
    pub mean_tpot_ms: f64,
    pub median_tpot_ms: f64,
    pub std_tpot_ms: f64,
    pub p99_tpot_ms: f64,
    pub mean_itl_ms: f64,
    pub median_itl_ms: f64,
    pub std_itl_ms: f64,
    pub p99_itl_ms: f64,
    pub mean_e2el_ms: f64,
    pub median_e2el_ms: f64,
    pub std_e2el_ms: f64,
    pub p99_e2el_ms: f64,
}

/// Throughput per GPU of the pair (Attention + FFN GPUs).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PerGpu {
    pub output_tokens_per_s_per_gpu: f64,
    pub total_tokens_per_s_per_gpu: f64,
}

/// Busy fraction of each role's devices over the run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Utilisation {
    pub attention: f64,
    pub ffn: f64,
    /// Fraction of time the FFN ranks' links carry data.
    pub links: f64,
}

/// Step-level facts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepSummary {
    pub total: u64,
    pub graph: u64,
    pub eager: u64,
    /// Steps where the FFN replayed a graph (more than `graph` under rule set v0.26, issue #261).
    pub ffn_graph: u64,
    pub dbo: u64,
    /// Steps where DP ranks disagreed on the DBO split (run unsplit).
    pub dbo_hazards: u64,
    /// Shares of steps bound by each device kind (the busiest device of a step its devices set
    /// the pace of) and by the host's issue (a step a host issues for longer than any device
    /// works, or an engine profile prices as its host's); they sum to 1 over a run with steps.
    pub attention_bound_share: f64,
    pub ffn_bound_share: f64,
    pub transfer_bound_share: f64,
    /// Absent from reports written before it was counted (their device shares include such steps).
    #[serde(default)]
    pub host_bound_share: f64,
    /// Mean fraction of overlappable time hidden, over DBO steps and over single-stage steps.
    pub dbo_overlap: f64,
    pub single_stage_overlap: f64,
    /// Share of rows sent A→F that are padding (CUDA-graph capture sizes, idle dummies).
    pub padded_row_share: f64,
    pub preemptions: u64,
    /// Sends larger than NCCL's default 4 MiB buffer (modelled as buffered anyway).
    pub oversized_messages: u64,
    /// Layers the periodic shortcut skipped (exact).
    pub shortcut_layers: u64,
}

/// Which source priced an operation class.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostSource {
    pub op: String,
    /// `calibration`, `roofline`, `calibration+roofline` or `unused`.
    pub source: String,
    pub calibrated_queries: u64,
    pub roofline_queries: u64,
    /// Calibrated queries outside the measured range (clamped).
    pub out_of_range: u64,
}

/// One row of `--requests-csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRow {
    pub request: u64,
    pub engine: Option<u32>,
    pub input_tokens: u32,
    pub output_tokens: u32,
    pub intended_send_ms: f64,
    pub send_ms: f64,
    pub first_token_ms: Option<f64>,
    pub finish_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub e2el_ms: Option<f64>,
    pub preemptions: u32,
    /// Empty when served; the reason otherwise.
    pub error: String,
}

/// One row of `--steps-csv`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRow {
    pub step: u64,
    pub start_ms: f64,
    pub duration_us: f64,
    pub mode: String,
    pub ffn_graph: bool,
    pub ubatches: u32,
    /// Real tokens per engine, `;`-separated.
    pub tokens: String,
    /// Padded tokens per engine, `;`-separated.
    pub padded: String,
    pub regime: String,
    pub overlap: f64,
    pub attention_busy_us: f64,
    pub ffn_busy_us: f64,
    pub transfer_busy_us: f64,
}

impl PredictReport {
    /// Pretty JSON with a trailing newline; the same report always gives the same bytes.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("reports hold only plain data");
        text.push('\n');
        text
    }

    /// The human table: vLLM's `Serving Benchmark Result` block, then the AFD block.
    pub fn to_table(&self) -> String {
        let b = &self.benchmark;
        let mut out = String::new();
        let line = |out: &mut String, label: &str, value: String| {
            let _ = writeln!(out, "{label:<40} {value:<10}");
        };
        let _ = writeln!(out, "{:=^50}", " Serving Benchmark Result ");
        line(&mut out, "Successful requests:", b.completed.to_string());
        if b.failed > 0 {
            line(&mut out, "Failed requests:", b.failed.to_string());
        }
        line(
            &mut out,
            "Benchmark duration (s):",
            format!("{:.2}", b.duration),
        );
        line(
            &mut out,
            "Total input tokens:",
            b.total_input_tokens.to_string(),
        );
        line(
            &mut out,
            "Total generated tokens:",
            b.total_output_tokens.to_string(),
        );
        line(
            &mut out,
            "Request throughput (req/s):",
            format!("{:.2}", b.request_throughput),
        );
        line(
            &mut out,
            "Output token throughput (tok/s):",
            format!("{:.2}", b.output_throughput),
        );
        line(
            &mut out,
            "Total Token throughput (tok/s):",
            format!("{:.2}", b.total_token_throughput),
        );
        let block = |out: &mut String, title: &str, name: &str, m: [f64; 3]| {
            let _ = writeln!(out, "{title:-^50}");
            line(out, &format!("Mean {name} (ms):"), format!("{:.2}", m[0]));
            line(out, &format!("Median {name} (ms):"), format!("{:.2}", m[1]));
            line(out, &format!("P99 {name} (ms):"), format!("{:.2}", m[2]));
        };
        block(
            &mut out,
            "Time to First Token",
            "TTFT",
            [b.mean_ttft_ms, b.median_ttft_ms, b.p99_ttft_ms],
        );
        block(
            &mut out,
            "Time per Output Token (excl. 1st token)",
            "TPOT",
            [b.mean_tpot_ms, b.median_tpot_ms, b.p99_tpot_ms],
        );
        block(
            &mut out,
            "Inter-token Latency",
            "ITL",
            [b.mean_itl_ms, b.median_itl_ms, b.p99_itl_ms],
        );
        block(
            &mut out,
            "End-to-end Latency",
            "E2EL",
            [b.mean_e2el_ms, b.median_e2el_ms, b.p99_e2el_ms],
        );
        let d = &self.deployment;
        let ep = if d.expert_parallel { " EP" } else { "" };
        if d.placement == "colocated" {
            let _ = writeln!(out, "{:-^50}", "Plain vLLM");
            line(
                &mut out,
                "Deployment:",
                format!(
                    "one server DP{}xTP{}{ep} on {} x {}",
                    d.attention_dp, d.attention_tp, d.gpus, d.gpu
                ),
            );
        } else {
            let _ = writeln!(out, "{:-^50}", "AFD");
            line(
                &mut out,
                "Deployment:",
                format!(
                    "{}A{}F attention DP{}xTP{}, ffn DP{}xTP{}{ep} on {}",
                    d.attention_ranks,
                    d.ffn_ranks,
                    d.attention_dp,
                    d.attention_tp,
                    d.ffn_dp,
                    d.ffn_tp,
                    d.gpu
                ),
            );
        }
        line(
            &mut out,
            "Output tok/s per GPU:",
            format!("{:.2}", self.per_gpu.output_tokens_per_s_per_gpu),
        );
        line(
            &mut out,
            "Total tok/s per GPU:",
            format!("{:.2}", self.per_gpu.total_tokens_per_s_per_gpu),
        );
        let u = &self.utilisation;
        line(
            &mut out,
            "Utilisation attn/ffn/links (%):",
            format!(
                "{:.1} / {:.1} / {:.1}",
                100.0 * u.attention,
                100.0 * u.ffn,
                100.0 * u.links
            ),
        );
        let d = &self.deployment;
        let dbo = match (d.dbo_decode_token_threshold, d.dbo_prefill_token_threshold) {
            (Some(decode), Some(prefill)) if d.dbo => format!("on ({decode} / {prefill})"),
            _ => "off".to_owned(),
        };
        line(&mut out, "DBO (decode / prefill threshold):", dbo);
        let s = &self.steps;
        line(
            &mut out,
            "Steps (graph / eager):",
            format!("{} ({} / {})", s.total, s.graph, s.eager),
        );
        line(
            &mut out,
            "DBO steps:",
            format!("{} (overlap {:.1}%)", s.dbo, 100.0 * s.dbo_overlap),
        );
        line(
            &mut out,
            "Bound by attn/ffn/transfer/host (%):",
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1}",
                100.0 * s.attention_bound_share,
                100.0 * s.ffn_bound_share,
                100.0 * s.transfer_bound_share,
                100.0 * s.host_bound_share
            ),
        );
        line(
            &mut out,
            "Padded rows (%):",
            format!("{:.1}", 100.0 * s.padded_row_share),
        );
        line(&mut out, "Preemptions:", s.preemptions.to_string());
        line(
            &mut out,
            "Costs from:",
            self.calibration
                .clone()
                .unwrap_or_else(|| format!("{} datasheet roofline", d.gpu)),
        );
        if let Some(link) = &self.afd_link {
            line(&mut out, "A-F link:", link.clone());
        }
        line(
            &mut out,
            "Seed / event-log hash:",
            format!("{} / {}", self.seed, self.event_log_hash),
        );
        if self.outcome != "completed" {
            line(&mut out, "Stopped early:", self.outcome.clone());
        }
        let _ = writeln!(out, "{:=^50}", "");
        out
    }
}

#[cfg(test)]
mod tests;
