//! Per-engine serving statistics of the Attention twin and their Prometheus text rendering with vLLM's
//! metric names and labels (`engine`, `model_name`; afd-spec §7.4, probe-conformance-anchors §5).
//!
//! The engine loop and the HTTP handlers update one [`Metrics`] behind a mutex; `/metrics` renders it.
//! Histogram buckets are vLLM's. Nothing here decides routing or timing.

use std::fmt::Write as _;
use std::sync::Mutex;

use crate::openai::FinishReason;
use crate::timing::sim::TimingInfo;

/// `vllm:time_to_first_token_seconds` buckets (vLLM v1 `loggers.py`).
pub const TTFT_BUCKETS_S: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// `vllm:inter_token_latency_seconds` buckets.
pub const ITL_BUCKETS_S: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// `vllm:e2e_request_latency_seconds` and `vllm:request_queue_time_seconds` buckets.
pub const REQUEST_LATENCY_BUCKETS_S: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// A Prometheus histogram with fixed upper bounds.
#[derive(Clone, Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Non-cumulative counts per bound, then the `+Inf` overflow.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, value_s: f64) {
        let slot = self
            .bounds
            .iter()
            .position(|&b| value_s <= b)
            .unwrap_or(self.bounds.len());
        self.counts[slot] += 1;
        self.sum += value_s;
        self.count += 1;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

/// Counters and gauges of one Attention DP engine.
#[derive(Clone, Debug)]
pub struct EngineMetrics {
    pub running: u64,
    pub waiting: u64,
    /// Finished requests per reason (stop, length, abort).
    pub success: [u64; 3],
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    pub preemptions: u64,
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub queue: Histogram,
}

impl EngineMetrics {
    fn new() -> EngineMetrics {
        EngineMetrics {
            running: 0,
            waiting: 0,
            success: [0; 3],
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            ttft: Histogram::new(TTFT_BUCKETS_S),
            itl: Histogram::new(ITL_BUCKETS_S),
            e2e: Histogram::new(REQUEST_LATENCY_BUCKETS_S),
            queue: Histogram::new(REQUEST_LATENCY_BUCKETS_S),
        }
    }

    /// `4·waiting + running`, the internal DP load balancer's score (afd-spec §7.2); the balancer itself
    /// is afd-sim's `DpRouter`, and `misroute-to-wrong-engine` picks by the opposite of this score.
    pub fn score(&self) -> u64 {
        4 * self.waiting + self.running
    }
}

/// A counter's name, help text and reader.
type CounterSpec = (&'static str, &'static str, fn(&EngineMetrics) -> u64);
/// A histogram's name, help text and reader.
type HistogramSpec = (&'static str, &'static str, fn(&EngineMetrics) -> &Histogram);

fn reason_slot(reason: FinishReason) -> usize {
    match reason {
        FinishReason::Stop => 0,
        FinishReason::Length => 1,
        FinishReason::Abort => 2,
    }
}

/// How `/metrics` is skewed by faults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricsSkew {
    /// Render one engine more than exist (`wrong-engine-labels`).
    pub extra_engine: bool,
    /// Count each finished request twice in `request_success_total` (`metrics-not-conserved`).
    pub double_success: bool,
}

/// All engines' statistics.
#[derive(Debug)]
pub struct Metrics {
    model_name: String,
    skew: MetricsSkew,
    /// Rendered after vLLM's series, so a client can tell a twin and predict its timing.
    timing: Option<TimingInfo>,
    engines: Mutex<Vec<EngineMetrics>>,
}

impl Metrics {
    pub fn new(model_name: &str, n_engines: u32, skew: MetricsSkew) -> Metrics {
        Metrics {
            model_name: model_name.to_owned(),
            skew,
            timing: None,
            engines: Mutex::new((0..n_engines).map(|_| EngineMetrics::new()).collect()),
        }
    }

    /// The same metrics, also stating how the twin times tokens ([`TimingInfo`]).
    pub fn with_timing(mut self, timing: TimingInfo) -> Metrics {
        self.timing = Some(timing);
        self
    }

    pub fn n_engines(&self) -> u32 {
        u32::try_from(self.lock().len()).expect("engine count came from a u32")
    }

    /// Runs `f` on the engines under the lock.
    pub fn with<T>(&self, f: impl FnOnce(&mut [EngineMetrics]) -> T) -> T {
        f(&mut self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<EngineMetrics>> {
        // A panic while holding the lock cannot leave the counters half-updated in a way that matters
        // more than losing /metrics altogether, so a poisoned lock is entered anyway.
        self.engines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a finished (or aborted) request on `engine`.
    pub fn record_finished(&self, engine: u32, reason: FinishReason) {
        let increment = if self.skew.double_success { 2 } else { 1 };
        self.with(|engines| engines[engine as usize].success[reason_slot(reason)] += increment);
    }

    /// Prometheus text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let mut engines = self.lock().clone();
        if self.skew.extra_engine {
            engines.push(EngineMetrics::new());
        }
        let model = escape_label(&self.model_name);
        let labels = |engine: usize| format!("engine=\"{engine}\",model_name=\"{model}\"");
        let mut out = String::new();
        let gauge =
            |out: &mut String, name: &str, help: &str, value: &dyn Fn(&EngineMetrics) -> f64| {
                let _ = writeln!(out, "# HELP {name} {help}");
                let _ = writeln!(out, "# TYPE {name} gauge");
                for (i, e) in engines.iter().enumerate() {
                    let _ = writeln!(out, "{name}{{{}}} {}", labels(i), float(value(e)));
                }
            };
        gauge(
            &mut out,
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            &|e| e.running as f64,
        );
        gauge(
            &mut out,
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            &|e| e.waiting as f64,
        );
        let name = "vllm:request_success_total";
        let _ = writeln!(
            out,
            "# HELP {name} Count of successfully processed requests."
        );
        let _ = writeln!(out, "# TYPE {name} counter");
        for (i, e) in engines.iter().enumerate() {
            for reason in [
                FinishReason::Stop,
                FinishReason::Length,
                FinishReason::Abort,
            ] {
                let _ = writeln!(
                    out,
                    "{name}{{engine=\"{i}\",finished_reason=\"{}\",model_name=\"{model}\"}} {}",
                    reason.as_str(),
                    float(e.success[reason_slot(reason)] as f64)
                );
            }
        }
        let counters: [CounterSpec; 3] = [
            (
                "vllm:prompt_tokens_total",
                "Number of prefill tokens processed.",
                |e| e.prompt_tokens,
            ),
            (
                "vllm:generation_tokens_total",
                "Number of generation tokens processed.",
                |e| e.generation_tokens,
            ),
            (
                "vllm:num_preemptions_total",
                "Cumulative number of preemption from the engine.",
                |e| e.preemptions,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} counter");
            for (i, e) in engines.iter().enumerate() {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(i), float(value(e) as f64));
            }
        }
        let histograms: [HistogramSpec; 4] = [
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                |e| &e.ttft,
            ),
            (
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                |e| &e.itl,
            ),
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                |e| &e.e2e,
            ),
            (
                "vllm:request_queue_time_seconds",
                "Histogram of time spent in WAITING phase for request.",
                |e| &e.queue,
            ),
        ];
        for (name, help, histogram) in histograms {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} histogram");
            for (i, e) in engines.iter().enumerate() {
                let h = histogram(e);
                let mut cumulative = 0;
                for (slot, bound) in h.bounds.iter().enumerate() {
                    cumulative += h.counts[slot];
                    let _ = writeln!(
                        out,
                        "{name}_bucket{{engine=\"{i}\",le=\"{}\",model_name=\"{model}\"}} {}",
                        float(*bound),
                        float(cumulative as f64)
                    );
                }
                let _ = writeln!(
                    out,
                    "{name}_bucket{{engine=\"{i}\",le=\"+Inf\",model_name=\"{model}\"}} {}",
                    float(h.count as f64)
                );
                let _ = writeln!(
                    out,
                    "{name}_count{{{}}} {}",
                    labels(i),
                    float(h.count as f64)
                );
                let _ = writeln!(out, "{name}_sum{{{}}} {}", labels(i), float(h.sum));
            }
        }
        render_untracked(&mut out, &model, engines.len());
        if let Some(timing) = &self.timing {
            out.push_str(&timing.render());
        }
        out
    }
}

/// The families of vLLM 0.26.0's `/metrics` the twin does not model (the Python process, the HTTP
/// instrumentator, caches, per-request histograms, `_created` series), as the recorded server names,
/// types, documents and labels them, with zero values (one for `_info` gauges).
const UNTRACKED_FAMILIES: &str = include_str!("metrics/vllm_0_26_untracked.prom");

fn render_untracked(out: &mut String, model: &str, n_engines: usize) {
    for line in UNTRACKED_FAMILIES.lines() {
        if line.starts_with('#') && !line.starts_with("# HELP ") && !line.starts_with("# TYPE ") {
            continue;
        }
        if line.contains("{engine}") {
            for engine in 0..n_engines {
                out.push_str(
                    &line
                        .replace("{model}", model)
                        .replace("{engine}", &engine.to_string()),
                );
                out.push('\n');
            }
        } else {
            out.push_str(&line.replace("{model}", model));
            out.push('\n');
        }
    }
}

/// Python's float repr for the values we print (`3.0`, `0.25`).
fn float(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// A label value in the exposition format: backslash, double quote and newline escaped.
pub(crate) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
