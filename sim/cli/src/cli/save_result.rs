//! The fields `vllm bench serve --save-result` writes that the simulator's report does not carry
//! itself, added to `predict --json` at the top level so the file is a drop-in for vLLM's: the run's
//! `date`, `model_id`, `num_prompts`, `request_rate`, `burstiness`, `max_concurrency`, and the
//! metrics `request_goodput`, `max_output_tokens_per_s`, `max_concurrent_requests` and
//! `p{P}_{metric}_ms` for each `--metric-percentiles` entry.
//!
//! Names, units and rules follow vLLM 0.26.0 `vllm/benchmarks/serve.py`: `main` sets `date`
//! (`%Y%m%d-%H%M%S`), `model_id`, `num_prompts`, `request_rate` (`"inf"` for infinity), `burstiness`
//! and `max_concurrency`; `calculate_metrics` counts a request good when every `--goodput` metric is
//! within its objective (`request_goodput` is `null` without `--goodput`), and buckets output tokens
//! and running requests into whole seconds from the first send for the two maxima; percentiles are
//! NumPy's linear interpolation and are keyed `p{int(P) if P is whole else P}`.
//!
//! The simulator records each request's first and last token, not every token: inter-token times
//! are taken as the request's TPOT, evenly spaced, for `max_output_tokens_per_s` and ITL percentiles.
//! This module reads only the request rows and the wall clock (for `date`); it changes no metric the
//! simulator's report already has.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use afd_sim::model::workload::RampUp;
use afd_traces::report::RequestRow;

/// The client settings vLLM records, as given on the command line.
pub(crate) struct SaveResultInputs<'a> {
    pub(crate) model_id: &'a str,
    pub(crate) num_prompts: usize,
    /// `--request-rate` as given (`inf` or a number).
    pub(crate) request_rate: &'a str,
    pub(crate) burstiness: f64,
    pub(crate) max_concurrency: Option<u32>,
    /// `--ramp-up-strategy`, `--ramp-up-start-rps`, `--ramp-up-end-rps`, when given.
    pub(crate) ramp_up: Option<RampUp>,
    pub(crate) percentiles: &'a Percentiles,
    pub(crate) goodput: &'a [Objective],
}

/// A metric vLLM reports per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

impl Metric {
    fn parse(text: &str) -> Option<Metric> {
        match text.trim() {
            "ttft" => Some(Metric::Ttft),
            "tpot" => Some(Metric::Tpot),
            "itl" => Some(Metric::Itl),
            "e2el" => Some(Metric::E2el),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
        }
    }
}

/// `--percentile-metrics` × `--metric-percentiles`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Percentiles {
    metrics: Vec<Metric>,
    percentiles: Vec<f64>,
}

impl Percentiles {
    /// Parses vLLM's two flags (comma-separated); every entry must be valid.
    pub(crate) fn parse(metrics: &str, percentiles: &str) -> anyhow::Result<Percentiles> {
        let metrics = metrics
            .split(',')
            .map(|m| {
                Metric::parse(m).with_context(|| {
                    format!("--percentile-metrics: {m:?} is not one of ttft, tpot, itl, e2el")
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let percentiles = percentiles
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| (0.0..=100.0).contains(v))
                    .with_context(|| {
                        format!("--metric-percentiles: {p:?} is not a number from 0 to 100")
                    })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Percentiles {
            metrics,
            percentiles,
        })
    }
}

/// One `--goodput` objective, `METRIC:MS` (vLLM's `--goodput ttft:500 tpot:50`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Objective {
    metric: Metric,
    ms: f64,
}

impl Objective {
    pub(crate) fn parse(text: &str) -> anyhow::Result<Objective> {
        let Some((name, value)) = text.split_once(':') else {
            bail!("--goodput {text:?}: expected METRIC:MS, e.g. ttft:500");
        };
        let metric = match Metric::parse(name) {
            Some(Metric::Itl) | None => {
                bail!("--goodput {text:?}: the metric must be ttft, tpot or e2el")
            }
            Some(metric) => metric,
        };
        let ms: f64 = value
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .with_context(|| {
                format!("--goodput {text:?}: the objective must be a positive number of ms")
            })?;
        Ok(Objective { metric, ms })
    }
}

/// `report_json` (the simulator's report) with vLLM's remaining `--save-result` fields added; fields
/// the report already has keep their value.
pub(crate) fn add_save_result_fields(
    report_json: &str,
    rows: &[RequestRow],
    inputs: &SaveResultInputs<'_>,
    now: SystemTime,
) -> anyhow::Result<String> {
    let mut report: Map<String, Value> =
        serde_json::from_str(report_json).context("re-reading the report JSON")?;
    let duration_s = report
        .get("duration")
        .and_then(Value::as_f64)
        .unwrap_or(0.0);
    let mut fields = Map::new();
    fields.insert("date".to_owned(), json!(date(now)));
    fields.insert("model_id".to_owned(), json!(inputs.model_id));
    fields.insert("num_prompts".to_owned(), json!(inputs.num_prompts));
    let rate = inputs.request_rate.trim();
    fields.insert(
        "request_rate".to_owned(),
        match rate.parse::<f64>() {
            Ok(value) if value.is_finite() => json!(value),
            _ => json!("inf"),
        },
    );
    fields.insert("burstiness".to_owned(), json!(inputs.burstiness));
    fields.insert("max_concurrency".to_owned(), json!(inputs.max_concurrency));
    if let Some(ramp) = inputs.ramp_up {
        fields.insert("ramp_up_strategy".to_owned(), json!(ramp.strategy()));
        fields.insert("ramp_up_start_rps".to_owned(), json!(ramp.start_rps));
        fields.insert("ramp_up_end_rps".to_owned(), json!(ramp.end_rps));
    }
    let served: Vec<&RequestRow> = rows.iter().filter(|r| is_served(r)).collect();
    fields.insert(
        "request_goodput".to_owned(),
        if inputs.goodput.is_empty() {
            Value::Null
        } else {
            let good = served
                .iter()
                .filter(|r| {
                    inputs
                        .goodput
                        .iter()
                        .all(|o| value(r, o.metric).is_some_and(|v| v <= o.ms))
                })
                .count();
            json!(if duration_s > 0.0 {
                good as f64 / duration_s
            } else {
                0.0
            })
        },
    );
    let (tokens_per_s, concurrent) = peaks(&served);
    fields.insert("max_output_tokens_per_s".to_owned(), json!(tokens_per_s));
    fields.insert("max_concurrent_requests".to_owned(), json!(concurrent));
    for &metric in &inputs.percentiles.metrics {
        let mut values = samples(&served, metric);
        values.sort_by(f64::total_cmp);
        for &p in &inputs.percentiles.percentiles {
            let key = format!("p{}_{}_ms", percentile_word(p), metric.name());
            fields.insert(key, json!(percentile(&values, p)));
        }
    }
    for (key, value) in fields {
        report.entry(key).or_insert(value);
    }
    let mut text =
        serde_json::to_string_pretty(&Value::Object(report)).context("writing the report JSON")?;
    text.push('\n');
    Ok(text)
}

fn is_served(row: &RequestRow) -> bool {
    row.error.is_empty() && row.first_token_ms.is_some() && row.finish_ms.is_some()
}

fn value(row: &RequestRow, metric: Metric) -> Option<f64> {
    match metric {
        Metric::Ttft => row.ttft_ms,
        Metric::Tpot | Metric::Itl => row.tpot_ms,
        Metric::E2el => row.e2el_ms,
    }
}

/// Every sample of `metric`: one per request, or for ITL one per gap (the request's TPOT each).
fn samples(served: &[&RequestRow], metric: Metric) -> Vec<f64> {
    let mut out = Vec::new();
    for row in served {
        let Some(v) = value(row, metric) else {
            continue;
        };
        let n = if metric == Metric::Itl {
            row.output_tokens.saturating_sub(1) as usize
        } else {
            1
        };
        out.extend(std::iter::repeat_n(v, n));
    }
    out
}

/// NumPy's default (linear) percentile of sorted `values`; 0 when empty, as vLLM's `or 0`.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = p / 100.0 * (n - 1) as f64;
            let below = rank.floor() as usize;
            let above = (below + 1).min(n - 1);
            let weight = rank - below as f64;
            sorted[below] + (sorted[above] - sorted[below]) * weight
        }
    }
}

/// `99` for 99.0, `99.9` otherwise (vLLM: `str(int(p)) if int(p) == p else str(p)`).
fn percentile_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as u64)
    } else {
        format!("{p}")
    }
}

/// vLLM's `max_output_tokens_per_s` and `max_concurrent_requests`: tokens and running requests per
/// whole second since the first send.
fn peaks(served: &[&RequestRow]) -> (f64, u64) {
    let start_s = |r: &RequestRow| r.send_ms / 1e3;
    let Some(first) = served.iter().map(|r| start_s(r)).reduce(f64::min) else {
        return (0.0, 0);
    };
    let last = served
        .iter()
        .filter_map(|r| r.finish_ms)
        .map(|ms| ms / 1e3)
        .fold(first, f64::max);
    let seconds = (last - first).ceil() as usize + 1;
    let mut tokens = vec![0u64; seconds];
    let mut running = vec![0u64; seconds];
    for row in served {
        let (Some(first_token), Some(finish)) = (row.first_token_ms, row.finish_ms) else {
            continue;
        };
        let gap = row.tpot_ms.unwrap_or(0.0);
        for k in 0..row.output_tokens.max(1) {
            let at = (first_token + gap * f64::from(k)) / 1e3;
            let bucket = (at - first).floor();
            if bucket >= 0.0 && (bucket as usize) < seconds {
                tokens[bucket as usize] += 1;
            }
        }
        let from = ((start_s(row) - first).floor().max(0.0)) as usize;
        let to = ((finish / 1e3 - first).floor().max(0.0)) as usize;
        for slot in running.iter_mut().take(to.min(seconds - 1) + 1).skip(from) {
            *slot += 1;
        }
    }
    let max_tokens = tokens.iter().copied().max().unwrap_or(0);
    (
        max_tokens as f64,
        running.iter().copied().max().unwrap_or(0),
    )
}

/// `now` as vLLM's `datetime.now().strftime("%Y%m%d-%H%M%S")`, in UTC.
fn date(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's civil_from_days.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests;
