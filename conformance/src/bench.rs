//! A load generator with `vllm bench serve` semantics (probe-conformance-anchors §4.3): random prompts of
//! a given token length, an open-loop Poisson or gamma arrival schedule, an optional concurrency cap,
//! streaming requests, and TTFT / TPOT / ITL / E2EL per request, summarised under vllm bench serve's JSON
//! field names.
//!
//! Lengths and arrival times are drawn by `afd_sim::model::workload::random_workload`, the generator
//! behind `afd-sim predict`: the same flags and seed give the client the very workload the simulator
//! predicts for (arrivals as current `vllm bench serve` draws them: cumulative gamma delays rescaled so
//! the last falls at `n / rate`).
//!
//! Latency clocks start at a request's intended start: its scheduled arrival, or, under
//! `--max-concurrency`, the moment it got a slot. A client that falls behind its schedule therefore
//! charges the delay to the server instead of hiding it (no coordinated omission). Prompt lengths are
//! counted in the twin's tokens (one word each); against a real vLLM the server's `usage` is reported.
//! The conformance suite reuses [`run`] and the per-request [`RequestRecord`]s.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use afd_sim::model::workload::{Arrivals, RandomDataset, WorkloadError, random_workload};
use afd_sim::rng::{RngStream, Seed, stream};
use futures::StreamExt as _;
use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::time::Instant;

pub mod stats;

use crate::prometheus::Scrape;

/// Which API the requests use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `/v1/completions` with `prompt`.
    Completions,
    /// `/v1/chat/completions` with one user message.
    Chat,
}

/// One benchmark run's settings; field names follow `vllm bench serve`'s flags.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// `http://host:port`, without a trailing path.
    pub base_url: String,
    pub endpoint: String,
    pub api: Api,
    /// `None`: the first model `/v1/models` lists.
    pub model: Option<String>,
    pub num_prompts: usize,
    pub random_input_len: u32,
    pub random_output_len: u32,
    /// Lengths are drawn uniformly from `[len·(1−r), len·(1+r)]`.
    pub random_range_ratio: f64,
    /// Requests per second; infinite sends everything at once.
    pub request_rate: f64,
    /// Gamma shape of inter-arrival times; 1 is Poisson.
    pub burstiness: f64,
    pub max_concurrency: Option<usize>,
    pub ignore_eos: bool,
    pub seed: u64,
    /// Longest time one request may take, start to last byte.
    pub request_timeout: Duration,
    /// Extra headers on every request (e.g. `X-data-parallel-rank`).
    pub headers: Vec<(String, String)>,
}

impl BenchConfig {
    /// `vllm bench serve`'s defaults, against `base_url`.
    pub fn new(base_url: &str) -> BenchConfig {
        BenchConfig {
            base_url: base_url.trim_end_matches('/').to_owned(),
            endpoint: "/v1/completions".to_owned(),
            api: Api::Completions,
            model: None,
            num_prompts: 1000,
            random_input_len: 1024,
            random_output_len: 128,
            random_range_ratio: 0.0,
            request_rate: f64::INFINITY,
            burstiness: 1.0,
            max_concurrency: None,
            ignore_eos: false,
            seed: 0,
            request_timeout: Duration::from_secs(600),
            headers: Vec::new(),
        }
    }
}

/// What happened to one request.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestRecord {
    pub index: usize,
    /// Prompt length as generated (the twin's tokens).
    pub input_len: u32,
    /// `max_tokens` asked for.
    pub max_tokens: u32,
    pub success: bool,
    pub error: String,
    pub status: Option<u16>,
    /// Seconds from the run's start to the request's intended start.
    pub intended_start_s: f64,
    pub ttft_s: f64,
    /// Gaps between content chunks after the first.
    pub itls_s: Vec<f64>,
    pub latency_s: f64,
    pub generated_text: String,
    pub response_id: String,
    pub finish_reason: Option<String>,
    /// From the server's `usage`, when it sent one.
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
    /// Number of `data: [DONE]` lines seen.
    pub done_markers: u32,
}

impl RequestRecord {
    /// Output tokens as vllm bench serve counts them: the server's usage, else the content chunks.
    pub fn output_tokens(&self) -> u64 {
        self.completion_tokens.unwrap_or(if self.success {
            self.itls_s.len() as u64 + 1
        } else {
            0
        })
    }
}

/// A finished run.
#[derive(Clone, Debug)]
pub struct BenchResult {
    pub config: BenchConfig,
    pub model: String,
    pub duration_s: f64,
    pub records: Vec<RequestRecord>,
    pub max_concurrent_requests: usize,
    /// `/metrics` before and after, when asked for.
    pub metrics_before: Option<Scrape>,
    pub metrics_after: Option<Scrape>,
}

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("GET {url}: {message}")]
    Discovery { url: String, message: String },
    #[error("invalid setting {flag}: {message}")]
    Config { flag: &'static str, message: String },
    #[error(transparent)]
    Workload(#[from] WorkloadError),
}

/// Vocabulary for random prompts: one twin token per word.
const PROMPT_WORDS: &[&str] = &[
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango",
    "uniform", "victor", "whiskey", "xray", "yankee", "zulu", "one", "two", "three", "four",
    "five", "six", "seven", "eight", "nine", "ten", "red", "green", "blue", "amber", "violet",
    "silver", "copper", "iron", "cobalt", "nickel", "zinc", "argon", "neon", "xenon",
];

/// A prompt of exactly `len` twin tokens.
pub fn random_prompt(rng: &mut ChaCha8Rng, len: u32) -> String {
    let mut out = String::with_capacity(len as usize * 7);
    for i in 0..len.max(1) {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(PROMPT_WORDS[rng.random_range(0..PROMPT_WORDS.len())]);
    }
    out
}

/// The random dataset as `afd-sim predict` draws it for the same settings: per request its intended
/// start (seconds from the run's start), prompt length and `max_tokens`.
pub fn random_requests(config: &BenchConfig) -> Result<Vec<(f64, u32, u32)>, BenchError> {
    let num_prompts = u32::try_from(config.num_prompts).map_err(|_| BenchError::Config {
        flag: "--num-prompts",
        message: format!("must be at most {}, got {}", u32::MAX, config.num_prompts),
    })?;
    let dataset = RandomDataset {
        num_prompts,
        input_len: config.random_input_len,
        output_len: config.random_output_len,
        range_ratio: config.random_range_ratio,
    };
    let arrivals = arrivals(config.request_rate, config.burstiness)?;
    let workload = random_workload(dataset, arrivals, None, Seed(config.seed))
        .map_err(BenchError::Workload)?;
    Ok(workload
        .requests
        .iter()
        .map(|r| {
            (
                r.intended_send.as_secs_f64(),
                r.input_tokens,
                r.output_tokens,
            )
        })
        .collect())
}

fn arrivals(rate: f64, burstiness: f64) -> Result<Arrivals, BenchError> {
    if rate.is_infinite() && rate > 0.0 {
        return Ok(Arrivals::AllAtOnce);
    }
    if rate.is_nan() || rate <= 0.0 {
        return Err(BenchError::Config {
            flag: "--request-rate",
            message: format!("must be positive or inf, got {rate}"),
        });
    }
    if !(burstiness.is_finite() && burstiness > 0.0) {
        return Err(BenchError::Config {
            flag: "--burstiness",
            message: format!("must be positive and finite, got {burstiness}"),
        });
    }
    Ok(Arrivals::Gamma { rate, burstiness })
}

/// Intended start times (seconds from the run's start) of `n` requests, open loop: cumulative gamma
/// delays with shape `burstiness` and mean `1 / rate`, rescaled so the last is at `n / rate` (all zero for
/// an infinite rate), exactly as `afd-sim predict` draws them for `seed`.
pub fn arrival_schedule(
    n: usize,
    rate: f64,
    burstiness: f64,
    seed: u64,
) -> Result<Vec<f64>, BenchError> {
    let arrivals = arrivals(rate, burstiness)?;
    Ok(arrivals
        .send_times(n, &mut stream(Seed(seed), RngStream::Arrivals))
        .into_iter()
        .map(|t| t.as_secs_f64())
        .collect())
}

/// Finds the served model name.
pub async fn discover_model(
    client: &reqwest::Client,
    base_url: &str,
) -> Result<String, BenchError> {
    let url = format!("{base_url}/v1/models");
    let fail = |message: String| BenchError::Discovery {
        url: url.clone(),
        message,
    };
    let response = client
        .get(&url)
        .timeout(Duration::from_secs(30))
        .send()
        .await
        .map_err(|err| fail(err.to_string()))?;
    let status = response.status();
    let body: Value = response
        .json()
        .await
        .map_err(|err| fail(format!("status {status}: {err}")))?;
    body.get("data")
        .and_then(Value::as_array)
        .and_then(|d| d.first())
        .and_then(|m| m.get("id"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| fail(format!("status {status}: no model in {body}")))
}

/// Builds the client: no proxy, no pool limit, connections kept.
pub fn client() -> Result<reqwest::Client, BenchError> {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(usize::MAX)
        .tcp_nodelay(true)
        .build()
        .map_err(BenchError::Client)
}

/// Runs the benchmark; `on_done` is called once per finished request (for a progress bar).
pub async fn run(
    config: BenchConfig,
    check_metrics: bool,
    on_done: impl Fn() + Send + Sync + 'static,
) -> Result<BenchResult, BenchError> {
    if config.num_prompts == 0 {
        return Err(BenchError::Config {
            flag: "--num-prompts",
            message: "must be at least 1".to_owned(),
        });
    }
    let client = client()?;
    let model = match &config.model {
        Some(model) => model.clone(),
        None => discover_model(&client, &config.base_url).await?,
    };
    let drawn = random_requests(&config)?;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let (schedule, requests): (Vec<f64>, Vec<(String, u32, u32)>) = drawn
        .into_iter()
        .map(|(at, input, output)| (at, (random_prompt(&mut rng, input), input, output)))
        .unzip();
    let metrics_before = if check_metrics {
        Some(scrape(&client, &config.base_url).await?)
    } else {
        None
    };
    let semaphore = config
        .max_concurrency
        .map(|c| Arc::new(Semaphore::new(c.max(1))));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let on_done = Arc::new(on_done);
    let config = Arc::new(config);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(requests.len());
    for (index, ((prompt, input_len, max_tokens), at)) in
        requests.into_iter().zip(schedule).enumerate()
    {
        // A schedule past a year (a vanishing rate) is clamped rather than overflowing the clock.
        let intended = start
            + Duration::try_from_secs_f64(at)
                .unwrap_or(Duration::MAX)
                .min(Duration::from_secs(365 * 86_400));
        tokio::time::sleep_until(intended).await;
        let client = client.clone();
        let config = config.clone();
        let model = model.clone();
        let semaphore = semaphore.clone();
        let in_flight = in_flight.clone();
        let peak = peak.clone();
        let on_done = on_done.clone();
        tasks.push(tokio::spawn(async move {
            let _permit = match &semaphore {
                Some(s) => Some(
                    s.clone()
                        .acquire_owned()
                        .await
                        .expect("the semaphore is never closed"),
                ),
                None => None,
            };
            let clock = if semaphore.is_some() {
                Instant::now().max(intended)
            } else {
                intended
            };
            let now_in_flight = in_flight.fetch_add(1, Ordering::Relaxed) + 1;
            peak.fetch_max(now_in_flight, Ordering::Relaxed);
            let mut record = send(&client, &config, &model, &prompt, max_tokens, clock).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
            record.index = index;
            record.input_len = input_len;
            record.max_tokens = max_tokens;
            record.intended_start_s = (clock - start).as_secs_f64();
            on_done();
            record
        }));
    }
    let mut records = Vec::with_capacity(tasks.len());
    for task in tasks {
        match task.await {
            Ok(record) => records.push(record),
            Err(err) => records.push(RequestRecord {
                error: format!("request task failed: {err}"),
                ..RequestRecord::default()
            }),
        }
    }
    let duration_s = start.elapsed().as_secs_f64();
    let metrics_after = if check_metrics {
        Some(scrape(&client, &config.base_url).await?)
    } else {
        None
    };
    Ok(BenchResult {
        config: Arc::unwrap_or_clone(config),
        model,
        duration_s,
        records,
        max_concurrent_requests: peak.load(Ordering::Relaxed),
        metrics_before,
        metrics_after,
    })
}

/// Reads `/metrics`.
pub async fn scrape(client: &reqwest::Client, base_url: &str) -> Result<Scrape, BenchError> {
    let url = format!("{base_url}/metrics");
    let text = async {
        client
            .get(&url)
            .timeout(Duration::from_secs(30))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
    }
    .await
    .map_err(|err| BenchError::Discovery {
        url: url.clone(),
        message: err.to_string(),
    })?;
    // Lenient: one odd line must not cost the report its conservation figures.
    Ok(Scrape::parse_lenient(&text))
}

/// The request body vllm bench serve sends for the random dataset.
pub fn request_body(
    api: Api,
    model: &str,
    prompt: &str,
    max_tokens: u32,
    ignore_eos: bool,
) -> Value {
    match api {
        Api::Completions => json!({
            "model": model,
            "prompt": prompt,
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "logprobs": null,
            "stream": true,
            "stream_options": {"include_usage": true},
            "ignore_eos": ignore_eos,
        }),
        Api::Chat => json!({
            "model": model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
            "max_completion_tokens": max_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
            "ignore_eos": ignore_eos,
        }),
    }
}

async fn send(
    client: &reqwest::Client,
    config: &BenchConfig,
    model: &str,
    prompt: &str,
    max_tokens: u32,
    clock: Instant,
) -> RequestRecord {
    let mut record = RequestRecord::default();
    let url = format!("{}{}", config.base_url, config.endpoint);
    let mut request = client.post(&url).json(&request_body(
        config.api,
        model,
        prompt,
        max_tokens,
        config.ignore_eos,
    ));
    for (name, value) in &config.headers {
        request = request.header(name, value);
    }
    let outcome = tokio::time::timeout(config.request_timeout, async {
        let response = request.send().await.map_err(|err| format!("{err:#}"))?;
        let status = response.status();
        record.status = Some(status.as_u16());
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(format!("HTTP {status}: {body}"));
        }
        let mut stream = response.bytes_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut last_content: Option<Instant> = None;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|err| format!("stream: {err:#}"))?;
            let now = Instant::now();
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_event_end(&buffer) {
                let event: Vec<u8> = buffer.drain(..end).collect();
                for line in String::from_utf8_lossy(&event).lines() {
                    let Some(data) = line.strip_prefix("data:") else {
                        continue;
                    };
                    let data = data.trim();
                    if data == "[DONE]" {
                        record.done_markers += 1;
                        continue;
                    }
                    let value: Value = serde_json::from_str(data)
                        .map_err(|err| format!("bad SSE data {data:?}: {err}"))?;
                    if let Some(error) = value.get("error") {
                        return Err(format!("streamed error: {error}"));
                    }
                    absorb_chunk(
                        &mut record,
                        &value,
                        config.api,
                        now,
                        clock,
                        &mut last_content,
                    );
                }
            }
        }
        record.latency_s = (Instant::now() - clock).as_secs_f64();
        Ok(())
    })
    .await;
    match outcome {
        // As vllm bench serve: a stream that delivered content succeeded ([DONE] is counted, not required).
        Ok(Ok(())) if !record.generated_text.is_empty() => record.success = true,
        Ok(Ok(())) => record.error = "Never received a valid chunk to calculate TTFT.".to_owned(),
        Ok(Err(err)) => record.error = err,
        Err(_) => {
            record.error = format!(
                "timed out after {:.0} s",
                config.request_timeout.as_secs_f64()
            )
        }
    }
    record
}

fn find_event_end(buffer: &[u8]) -> Option<usize> {
    buffer.windows(2).position(|w| w == b"\n\n").map(|p| p + 2)
}

fn absorb_chunk(
    record: &mut RequestRecord,
    value: &Value,
    api: Api,
    now: Instant,
    clock: Instant,
    last_content: &mut Option<Instant>,
) {
    if record.response_id.is_empty()
        && let Some(id) = value.get("id").and_then(Value::as_str)
    {
        record.response_id = id.to_owned();
    }
    if let Some(usage) = value.get("usage").filter(|u| !u.is_null()) {
        record.prompt_tokens = usage.get("prompt_tokens").and_then(Value::as_u64);
        record.completion_tokens = usage.get("completion_tokens").and_then(Value::as_u64);
        record.total_tokens = usage.get("total_tokens").and_then(Value::as_u64);
    }
    let Some(choice) = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        return;
    };
    if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
        record.finish_reason = Some(reason.to_owned());
    }
    let content = match api {
        Api::Completions => choice.get("text").and_then(Value::as_str),
        Api::Chat => choice
            .get("delta")
            .and_then(|d| d.get("content"))
            .and_then(Value::as_str),
    };
    let Some(content) = content.filter(|c| !c.is_empty()) else {
        return;
    };
    match *last_content {
        None => record.ttft_s = (now - clock).as_secs_f64(),
        Some(previous) => record.itls_s.push((now - previous).as_secs_f64()),
    }
    *last_content = Some(now);
    record.generated_text.push_str(content);
}

#[cfg(test)]
mod tests;
