//! The planner's output (`afd-sim sweep`): one CSV row per candidate deployment, and the JSON
//! summary printed with `--json`.
//!
//! A row names its sweep (a fingerprint of the sweep's inputs), its index in the sweep's
//! enumeration and the number of candidates, so shard files (`--shard k/n`) can be checked and
//! joined (`afd-sim sweep-merge`) into exactly the file a single run writes. Columns follow the
//! field order of [`SweepRow`]; every metric a `predict` report has is a column under the same
//! name. This module defines, writes, reads and checks the format; it computes nothing.

use serde::{Deserialize, Serialize};

/// Schema version written by this build; readers accept exactly this version.
pub const SWEEP_SCHEMA_VERSION: u32 = 4;

/// The `format` tag of the JSON summary.
pub const SWEEP_FORMAT: &str = "afd-sim-sweep";

/// One candidate deployment of a sweep and what its simulation gave.
///
/// Options are empty CSV fields: metrics of a candidate that could not run, cross-checks that do
/// not apply (the colocated baseline), frontier flags of a shard file (filled when the shards are
/// merged).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepRow {
    /// Always [`SWEEP_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Fingerprint of the sweep's inputs, 16 hex digits.
    pub sweep: String,
    /// Index in the sweep's enumeration, from 0.
    pub candidate: u64,
    /// Candidates in the whole sweep.
    pub candidates: u64,

    /// `afd` (disaggregated) or `colocated` (the vLLM DP×TP+EP baseline on the same GPUs).
    pub kind: String,
    pub gpus: u32,
    pub nodes: u32,
    /// `A`: Attention ranks (for `colocated`, every GPU).
    pub attention_ranks: u32,
    /// `F`: FFN ranks (0 for `colocated`).
    pub ffn_ranks: u32,
    pub attention_dp: u32,
    pub attention_tp: u32,
    pub ffn_dp: Option<u32>,
    pub ffn_tp: Option<u32>,
    /// `--enable-expert-parallel` on the role that runs the experts.
    pub expert_parallel: bool,
    /// Set when DBO is on.
    pub dbo_decode_token_threshold: Option<u32>,
    pub dbo_prefill_token_threshold: Option<u32>,
    /// `FULL_DECODE_ONLY` or `eager`.
    pub cudagraph_mode: String,
    /// Capture sizes as vLLM resolves them, `;`-separated (empty when eager).
    pub cudagraph_capture_sizes: String,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    /// Some Attention↔FFN (or all-to-all) traffic crosses a node boundary.
    pub cross_node: bool,
    /// NICs per host an AFD candidate's cross-node hand-offs shared (the sweep's `--link`, or its
    /// `nics` dimension); empty when no hand-off crossed a network.
    pub nics: Option<u32>,
    /// Ids of the deployment rules that warned, `;`-separated.
    pub warnings: String,

    /// `ok`, or `infeasible` when the simulator cannot run the deployment (see `error`).
    pub status: String,
    pub error: String,
    /// How the run ended: `completed`, `event_limit` or `horizon`.
    pub outcome: Option<String>,
    pub completed: Option<u64>,
    pub failed: Option<u64>,
    pub duration: Option<f64>,
    pub request_throughput: Option<f64>,
    pub output_throughput: Option<f64>,
    pub total_token_throughput: Option<f64>,
    pub mean_ttft_ms: Option<f64>,
    pub median_ttft_ms: Option<f64>,
    pub std_ttft_ms: Option<f64>,
    pub p99_ttft_ms: Option<f64>,
    pub mean_tpot_ms: Option<f64>,
    pub median_tpot_ms: Option<f64>,
    pub std_tpot_ms: Option<f64>,
    pub p99_tpot_ms: Option<f64>,
    pub mean_itl_ms: Option<f64>,
    pub median_itl_ms: Option<f64>,
    pub std_itl_ms: Option<f64>,
    pub p99_itl_ms: Option<f64>,
    pub mean_e2el_ms: Option<f64>,
    pub median_e2el_ms: Option<f64>,
    pub std_e2el_ms: Option<f64>,
    pub p99_e2el_ms: Option<f64>,
    pub output_tokens_per_s_per_gpu: Option<f64>,
    pub total_tokens_per_s_per_gpu: Option<f64>,
    pub attention_utilisation: Option<f64>,
    pub ffn_utilisation: Option<f64>,
    pub link_utilisation: Option<f64>,
    pub steps: Option<u64>,
    pub graph_steps: Option<u64>,
    pub eager_steps: Option<u64>,
    pub dbo_steps: Option<u64>,
    pub dbo_overlap: Option<f64>,
    pub attention_bound_share: Option<f64>,
    pub ffn_bound_share: Option<f64>,
    pub transfer_bound_share: Option<f64>,
    /// Share of steps the host's issue bound (since schema 4; the device shares exclude them).
    pub host_bound_share: Option<f64>,
    pub padded_row_share: Option<f64>,
    pub preemptions: Option<u64>,
    pub kv_blocks_per_engine: Option<u64>,
    pub event_log_hash: Option<String>,

    /// The SLO thresholds the verdict used, and the statistic (`mean`, `median` or `p99`).
    pub ttft_slo_ms: Option<f64>,
    pub tpot_slo_ms: Option<f64>,
    pub slo_stat: String,
    /// `pass` or `fail` (a run that did not complete every request fails).
    pub slo: String,
    /// `rate` or `concurrency` when the sweep searched each candidate's capacity under the SLO
    /// (the row's metrics are then those of the run at its capacity); empty at a fixed load.
    pub capacity_by: String,
    /// The highest request rate (requests/s) or concurrency at which the SLO held, with the next
    /// step up (5 % more, or one more stream) failing it; 0 when even the lightest load failed.
    pub capacity: Option<f64>,
    /// Simulations the search ran for this candidate.
    pub capacity_probes: Option<u32>,
    /// Requests/s and output tokens/s per GPU served within the SLO at the capacity.
    pub goodput_requests_per_s: Option<f64>,
    pub goodput_tokens_per_s_per_gpu: Option<f64>,
    /// Rank by output tokens/s per GPU among the candidates that pass (1 = best).
    pub rank: Option<u64>,
    /// On the Pareto frontier of output tokens/s per GPU vs the TPOT (TTFT) statistic.
    pub frontier_tpot: Option<bool>,
    pub frontier_ttft: Option<bool>,

    /// Closed forms (research/sim-anchors.md §2.8) over the decode steps, per layer and ubatch:
    /// attention side, FFN side and the round trip of transfers, in microseconds.
    pub cf_t_attention_us: Option<f64>,
    pub cf_t_ffn_us: Option<f64>,
    pub cf_t_transfer_us: Option<f64>,
    /// Ubatches per decode step (`m`).
    pub cf_ubatches: Option<f64>,
    /// MegaScale-Infer's overlap condition `m ≥ 2·(1 + T_c/T_f)`: `holds` or `violated`.
    pub cf_pipeline_condition: Option<String>,
    /// Mean decode step: closed form (fill + cycle·(m·L − 1)) and simulated, milliseconds.
    pub cf_step_ms: Option<f64>,
    pub sim_step_ms: Option<f64>,
    /// `cf_step_ms / sim_step_ms − 1`.
    pub cf_step_error: Option<f64>,
    /// `A / F`, and the A:F ratio rule of arXiv 2601.21351 (`r* = max{r_A, r_C, r_peak}`).
    pub af_ratio: Option<f64>,
    pub af_ratio_optimal: Option<f64>,
    /// Which term of the ratio rule wins: `attention`, `communication` or `ffn`.
    pub af_regime: Option<String>,
    /// Decode tokens/s per GPU at the observed batch: the ratio paper's throughput
    /// `r·B / ((r + 1)·τ)` and the simulation's.
    pub cf_decode_tokens_per_s_per_gpu: Option<f64>,
    pub sim_decode_tokens_per_s_per_gpu: Option<f64>,
    pub cf_throughput_error: Option<f64>,
    /// `ok`, or `disagree` when a closed form is off by more than 15 %.
    pub cross_check: Option<String>,
    /// Why, `;`-separated categories (see docs/planner.md).
    pub cross_check_reason: String,

    /// The two `vllm serve` command lines (environment prefix, then the flags), as
    /// `afd-sim predict --attention-args … --ffn-args …` takes them; the baseline has one.
    pub attention_args: String,
    pub ffn_args: String,
}

/// The JSON summary of a sweep (`--json`): what was searched, the frontier and the best points.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepSummary {
    /// Always [`SWEEP_FORMAT`].
    pub format: String,
    pub schema_version: u32,
    pub sweep: String,
    pub candidates: u64,
    /// Rows this file holds (all candidates, or one shard's).
    pub rows: u64,
    /// Candidates that ran (`status` ok), and those that passed the SLO.
    pub simulated: u64,
    pub passing: u64,
    /// Candidates with a closed-form disagreement above 15 %.
    pub disagreements: u64,
    pub slo_stat: String,
    pub ttft_slo_ms: Option<f64>,
    pub tpot_slo_ms: Option<f64>,
    /// The best passing candidate overall, of each kind, and the top of the ranking.
    pub best: Option<SweepRow>,
    pub best_afd: Option<SweepRow>,
    pub best_colocated: Option<SweepRow>,
    pub top: Vec<SweepRow>,
    /// Candidate indices on each frontier, by increasing latency.
    pub frontier_tpot: Vec<u64>,
    pub frontier_ttft: Vec<u64>,
}

/// Why sweep rows cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("{source_name}: {message}")]
    Csv {
        source_name: String,
        message: String,
    },
    #[error(
        "{source_name}:{line}: schema_version {found}, this build reads {SWEEP_SCHEMA_VERSION}"
    )]
    SchemaVersion {
        source_name: String,
        line: u64,
        found: u32,
    },
    #[error("{source_name}: no rows")]
    Empty { source_name: String },
    #[error(
        "{source_name}:{line}: column {column} is {value:?}; a metric must be a finite number >= 0"
    )]
    BadMetric {
        source_name: String,
        line: u64,
        column: String,
        value: String,
    },
}

/// Columns that hold a simulated metric: finite and never negative in a sweep file, so an `inf`,
/// `NaN` or negative value there is a damaged or hand-edited file, refused rather than ranked.
const METRIC_COLUMNS: &[&str] = &[
    "duration",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p99_itl_ms",
    "mean_e2el_ms",
    "median_e2el_ms",
    "std_e2el_ms",
    "p99_e2el_ms",
    "output_tokens_per_s_per_gpu",
    "total_tokens_per_s_per_gpu",
    "attention_utilisation",
    "ffn_utilisation",
    "link_utilisation",
    "dbo_overlap",
    "attention_bound_share",
    "ffn_bound_share",
    "transfer_bound_share",
    "host_bound_share",
    "padded_row_share",
    "ttft_slo_ms",
    "tpot_slo_ms",
];

/// CSV bytes of `rows` with the header line (columns in [`SweepRow`] order).
pub fn write_sweep_csv(rows: &[SweepRow]) -> Result<Vec<u8>, csv::Error> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row)?;
    }
    writer
        .into_inner()
        .map_err(|err| csv::Error::from(err.into_error()))
}

/// Reads sweep rows from CSV `text`; `source_name` (a path) names the input in errors, with the line
/// and the column at fault.
pub fn read_sweep_csv(text: &str, source_name: &str) -> Result<Vec<SweepRow>, SweepError> {
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader
        .headers()
        .map_err(|err| csv_error(source_name, &err, None))?
        .clone();
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|err| csv_error(source_name, &err, Some(&headers)))?;
        let line = record.position().map_or(0, csv::Position::line);
        for (column, value) in headers.iter().zip(record.iter()) {
            let value = value.trim();
            if value.is_empty() || !METRIC_COLUMNS.contains(&column) {
                continue;
            }
            if value
                .parse::<f64>()
                .is_ok_and(|v| !v.is_finite() || v < 0.0)
            {
                return Err(SweepError::BadMetric {
                    source_name: source_name.to_owned(),
                    line,
                    column: column.to_owned(),
                    value: value.to_owned(),
                });
            }
        }
        let row: SweepRow = record
            .deserialize(Some(&headers))
            .map_err(|err| csv_error(source_name, &err, Some(&headers)))?;
        if row.schema_version != SWEEP_SCHEMA_VERSION {
            return Err(SweepError::SchemaVersion {
                source_name: source_name.to_owned(),
                line,
                found: row.schema_version,
            });
        }
        rows.push(row);
    }
    if rows.is_empty() {
        return Err(SweepError::Empty {
            source_name: source_name.to_owned(),
        });
    }
    Ok(rows)
}

fn csv_error(
    source_name: &str,
    err: &csv::Error,
    headers: Option<&csv::StringRecord>,
) -> SweepError {
    let column = match err.kind() {
        csv::ErrorKind::Deserialize { err, .. } => err.field(),
        _ => None,
    };
    let mut message = match err.position() {
        Some(position) => format!("line {}", position.line()),
        None => "header".to_owned(),
    };
    if let Some(column) = column {
        let name = headers.and_then(|h| h.get(column as usize)).unwrap_or("?");
        message.push_str(&format!(", column {} ({name})", column + 1));
    }
    let detail = match err.kind() {
        csv::ErrorKind::Deserialize { err, .. } => err.kind().to_string(),
        _ => err.to_string(),
    };
    message.push_str(&format!(": {detail}"));
    SweepError::Csv {
        source_name: source_name.to_owned(),
        message,
    }
}

impl SweepSummary {
    /// Pretty JSON with a trailing newline; the same summary always gives the same bytes.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("summaries hold only plain data");
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests;
