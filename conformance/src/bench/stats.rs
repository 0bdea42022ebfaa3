//! The summary of a benchmark run as `vllm bench serve` computes and names it: throughputs, and
//! mean / median / std / percentiles of TTFT, TPOT, ITL and E2EL in milliseconds (numpy's linear
//! percentile), plus the conservation check of a run against `/metrics`.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use crate::bench::BenchResult;

/// The per-request metrics vllm bench serve reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

    pub fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
        }
    }

    pub fn parse(text: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == text.trim())
    }

    fn title(self) -> &'static str {
        match self {
            Metric::Ttft => "Time to First Token",
            Metric::Tpot => "Time per Output Token (excl. 1st token)",
            Metric::Itl => "Inter-token Latency",
            Metric::E2el => "End-to-end Latency",
        }
    }
}

/// numpy's default (linear) percentile of sorted values; 0 for none.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = p.clamp(0.0, 100.0) / 100.0 * (n - 1) as f64;
            let low = rank.floor() as usize;
            let high = rank.ceil() as usize;
            sorted[low] + (sorted[high] - sorted[low]) * (rank - low as f64)
        }
    }
}

/// The arithmetic mean; 0 for none.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

fn std(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let m = mean(values);
    (values.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / values.len() as f64).sqrt()
}

/// Values of one metric in milliseconds, sorted.
pub fn samples_ms(result: &BenchResult, metric: Metric) -> Vec<f64> {
    let ok = result.records.iter().filter(|r| r.success);
    let mut values: Vec<f64> = match metric {
        Metric::Ttft => ok.map(|r| r.ttft_s * 1e3).collect(),
        Metric::Tpot => ok
            .filter(|r| r.output_tokens() > 1)
            .map(|r| (r.latency_s - r.ttft_s) / (r.output_tokens() - 1) as f64 * 1e3)
            .collect(),
        Metric::Itl => ok.flat_map(|r| r.itls_s.iter().map(|s| s * 1e3)).collect(),
        Metric::E2el => ok.map(|r| r.latency_s * 1e3).collect(),
    };
    values.sort_by(f64::total_cmp);
    values
}

fn percentile_key(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("p{}", p as u64)
    } else {
        format!("p{p}")
    }
}

/// Peak output tokens per second over 1-second buckets of token arrival times.
fn max_output_tokens_per_s(result: &BenchResult) -> f64 {
    let mut buckets: Vec<u64> = Vec::new();
    for r in result.records.iter().filter(|r| r.success) {
        let mut t = r.intended_start_s + r.ttft_s;
        let mut times = vec![t];
        for gap in &r.itls_s {
            t += gap;
            times.push(t);
        }
        for t in times {
            let slot = t.max(0.0) as usize;
            if buckets.len() <= slot {
                buckets.resize(slot + 1, 0);
            }
            buckets[slot] += 1;
        }
    }
    buckets.into_iter().max().unwrap_or(0) as f64
}

/// The JSON vllm bench serve saves (`--save-result`), plus `conservation` when `/metrics` was scraped.
pub fn summary(result: &BenchResult, percentiles: &[f64], detailed: bool) -> Value {
    let completed = result.records.iter().filter(|r| r.success).count();
    let failed = result.records.len() - completed;
    let total_input: u64 = result
        .records
        .iter()
        .filter(|r| r.success)
        .map(|r| r.prompt_tokens.unwrap_or(u64::from(r.input_len)))
        .sum();
    let total_output: u64 = result
        .records
        .iter()
        .filter(|r| r.success)
        .map(|r| r.output_tokens())
        .sum();
    let duration = result.duration_s.max(f64::MIN_POSITIVE);
    let config = &result.config;
    let mut out = Map::new();
    out.insert("date".into(), json!(chrono_free_now()));
    out.insert("endpoint_type".into(), json!("openai"));
    out.insert("backend".into(), json!("vllm"));
    out.insert("label".into(), Value::Null);
    out.insert("model_id".into(), json!(result.model));
    out.insert("tokenizer_id".into(), json!("afd-twin words"));
    out.insert("num_prompts".into(), json!(config.num_prompts));
    out.insert(
        "request_rate".into(),
        if config.request_rate.is_infinite() {
            json!("inf")
        } else {
            json!(config.request_rate)
        },
    );
    out.insert("burstiness".into(), json!(config.burstiness));
    out.insert("max_concurrency".into(), json!(config.max_concurrency));
    out.insert("duration".into(), json!(result.duration_s));
    out.insert("completed".into(), json!(completed));
    out.insert("failed".into(), json!(failed));
    out.insert("total_input_tokens".into(), json!(total_input));
    out.insert("total_output_tokens".into(), json!(total_output));
    out.insert(
        "request_throughput".into(),
        json!(completed as f64 / duration),
    );
    out.insert("request_goodput".into(), Value::Null);
    out.insert(
        "output_throughput".into(),
        json!(total_output as f64 / duration),
    );
    out.insert(
        "total_token_throughput".into(),
        json!((total_input + total_output) as f64 / duration),
    );
    out.insert(
        "max_output_tokens_per_s".into(),
        json!(max_output_tokens_per_s(result)),
    );
    out.insert(
        "max_concurrent_requests".into(),
        json!(result.max_concurrent_requests),
    );
    for metric in Metric::ALL {
        let values = samples_ms(result, metric);
        let key = metric.key();
        out.insert(format!("mean_{key}_ms"), json!(mean(&values)));
        out.insert(format!("median_{key}_ms"), json!(percentile(&values, 50.0)));
        out.insert(format!("std_{key}_ms"), json!(std(&values)));
        for &p in percentiles {
            out.insert(
                format!("{}_{key}_ms", percentile_key(p)),
                json!(percentile(&values, p)),
            );
        }
    }
    if detailed {
        let records = &result.records;
        out.insert(
            "input_lens".into(),
            json!(records.iter().map(|r| r.input_len).collect::<Vec<_>>()),
        );
        out.insert(
            "output_lens".into(),
            json!(
                records
                    .iter()
                    .map(|r| r.output_tokens())
                    .collect::<Vec<_>>()
            ),
        );
        out.insert(
            "ttfts".into(),
            json!(records.iter().map(|r| r.ttft_s).collect::<Vec<_>>()),
        );
        out.insert(
            "itls".into(),
            json!(records.iter().map(|r| r.itls_s.clone()).collect::<Vec<_>>()),
        );
        out.insert(
            "generated_texts".into(),
            json!(
                records
                    .iter()
                    .map(|r| r.generated_text.clone())
                    .collect::<Vec<_>>()
            ),
        );
        out.insert(
            "errors".into(),
            json!(records.iter().map(|r| r.error.clone()).collect::<Vec<_>>()),
        );
    }
    if let Some(conservation) = conservation(result) {
        out.insert("conservation".into(), conservation);
    }
    Value::Object(out)
}

/// Requests and tokens the client saw against the change in `/metrics` (afd-spec §7.4 R8).
pub fn conservation(result: &BenchResult) -> Option<Value> {
    let (before, after) = (
        result.metrics_before.as_ref()?,
        result.metrics_after.as_ref()?,
    );
    let total = |scrape: &crate::prometheus::Scrape, name: &str| scrape.sum(name).unwrap_or(0.0);
    let delta = |name: &str| total(after, name) - total(before, name);
    let ok = result.records.iter().filter(|r| r.success);
    let client_requests = ok.clone().count() as f64;
    let client_prompt: u64 = ok.clone().filter_map(|r| r.prompt_tokens).sum();
    let client_generated: u64 = ok.map(|r| r.output_tokens()).sum();
    let success = delta("vllm:request_success_total");
    let prompt = delta("vllm:prompt_tokens_total");
    let generated = delta("vllm:generation_tokens_total");
    let running = total(after, "vllm:num_requests_running");
    let waiting = total(after, "vllm:num_requests_waiting");
    let conserved = success == client_requests
        && prompt == client_prompt as f64
        && generated == client_generated as f64
        && running == 0.0
        && waiting == 0.0;
    Some(json!({
        "client_completed": client_requests,
        "metrics_request_success": success,
        "client_prompt_tokens": client_prompt,
        "metrics_prompt_tokens": prompt,
        "client_completion_tokens": client_generated,
        "metrics_generation_tokens": generated,
        "running_after": running,
        "waiting_after": waiting,
        "engines": after.label_values("vllm:num_requests_running", "engine"),
        "conserved": conserved,
    }))
}

/// `YYYYMMDD-HHMMSS` in UTC, computed without a date crate.
fn chrono_free_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The human table vllm bench serve prints.
pub fn table(summary: &Value, metrics: &[Metric], percentiles: &[f64]) -> String {
    let mut out = String::new();
    let get = |key: &str| summary.get(key).cloned().unwrap_or(Value::Null);
    let num = |key: &str| get(key).as_f64().unwrap_or(0.0);
    let _ = writeln!(out, "{:=^50}", " Serving Benchmark Result ");
    let _ = writeln!(
        out,
        "{:<40}{:<10}",
        "Successful requests:",
        get("completed")
    );
    let _ = writeln!(out, "{:<40}{:<10}", "Failed requests:", get("failed"));
    let _ = writeln!(
        out,
        "{:<40}{:<10}",
        "Maximum request concurrency:",
        get("max_concurrency")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10.2}",
        "Benchmark duration (s):",
        num("duration")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10}",
        "Total input tokens:",
        get("total_input_tokens")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10}",
        "Total generated tokens:",
        get("total_output_tokens")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10.2}",
        "Request throughput (req/s):",
        num("request_throughput")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10.2}",
        "Output token throughput (tok/s):",
        num("output_throughput")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10.2}",
        "Peak output token throughput (tok/s):",
        num("max_output_tokens_per_s")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10}",
        "Peak concurrent requests:",
        get("max_concurrent_requests")
    );
    let _ = writeln!(
        out,
        "{:<40}{:<10.2}",
        "Total Token throughput (tok/s):",
        num("total_token_throughput")
    );
    for metric in metrics {
        let key = metric.key();
        let _ = writeln!(out, "{:-^50}", format!("{}", metric.title()));
        let upper = key.to_uppercase();
        let _ = writeln!(
            out,
            "{:<40}{:<10.2}",
            format!("Mean {upper} (ms):"),
            num(&format!("mean_{key}_ms"))
        );
        let _ = writeln!(
            out,
            "{:<40}{:<10.2}",
            format!("Median {upper} (ms):"),
            num(&format!("median_{key}_ms"))
        );
        for &p in percentiles {
            let pk = percentile_key(p);
            let _ = writeln!(
                out,
                "{:<40}{:<10.2}",
                format!("P{} {upper} (ms):", &pk[1..]),
                num(&format!("{pk}_{key}_ms"))
            );
        }
    }
    if let Some(c) = summary.get("conservation") {
        let _ = writeln!(out, "{:-^50}", "Conservation (/metrics)");
        let _ = writeln!(
            out,
            "{:<40}{:<10}",
            "Requests (client / metrics):",
            format!(
                "{} / {}",
                c["client_completed"], c["metrics_request_success"]
            )
        );
        let _ = writeln!(
            out,
            "{:<40}{:<10}",
            "Generated tokens (client / metrics):",
            format!(
                "{} / {}",
                c["client_completion_tokens"], c["metrics_generation_tokens"]
            )
        );
        let _ = writeln!(out, "{:<40}{:<10}", "Conserved:", c["conserved"]);
    }
    let _ = writeln!(out, "{}", "=".repeat(50));
    out
}
