//! What the client measures of a run: the `vllm bench serve` definitions (TTFT and E2EL from the
//! actual send, TPOT = (E2EL − TTFT) / (output − 1) for requests with more than one output token,
//! ITL between consecutive tokens of a request). Quantiles come from HdrHistograms of integer
//! nanoseconds (3 significant digits); means and standard deviations (population, as numpy) from
//! exact sums. The engine records them; `report.rs` renders them.

use hdrhistogram::Histogram;

use crate::time::{SimDuration, SimTime};

/// One latency metric: a histogram plus exact sums.
#[derive(Debug, Clone)]
pub struct Latency {
    histogram: Histogram<u64>,
    count: u64,
    sum_ns: f64,
    sum_sq_ms: f64,
}

impl Latency {
    fn new() -> Latency {
        Latency {
            // 1 µs resolution up to ~3 hours, 3 significant digits.
            histogram: Histogram::new_with_bounds(1_000, 10_000_000_000_000, 3)
                .expect("static histogram bounds are valid"),
            count: 0,
            sum_ns: 0.0,
            sum_sq_ms: 0.0,
        }
    }

    fn record(&mut self, value: SimDuration) {
        let ns = value.as_ns();
        self.histogram.saturating_record(ns.max(1_000));
        self.count += 1;
        self.sum_ns += ns as f64;
        let ms = ns as f64 / 1e6;
        self.sum_sq_ms += ms * ms;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// `[mean, median, std, p99]` in milliseconds; zeros when empty.
    pub fn summary_ms(&self) -> [f64; 4] {
        if self.count == 0 {
            return [0.0; 4];
        }
        let n = self.count as f64;
        let mean = self.sum_ns / n / 1e6;
        let variance = (self.sum_sq_ms / n - mean * mean).max(0.0);
        let q = |quantile: f64| self.histogram.value_at_quantile(quantile) as f64 / 1e6;
        [mean, q(0.5), variance.sqrt(), q(0.99)]
    }
}

/// Everything the client measures.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub ttft: Latency,
    pub tpot: Latency,
    pub itl: Latency,
    pub e2el: Latency,
    pub completed: u64,
    pub failed: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Time of the last completion.
    pub last_finish: SimTime,
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics {
            ttft: Latency::new(),
            tpot: Latency::new(),
            itl: Latency::new(),
            e2el: Latency::new(),
            completed: 0,
            failed: 0,
            input_tokens: 0,
            output_tokens: 0,
            last_finish: SimTime::ZERO,
        }
    }

    pub fn record_ttft(&mut self, ttft: SimDuration) {
        self.ttft.record(ttft);
    }

    pub fn record_itl(&mut self, itl: SimDuration) {
        self.itl.record(itl);
    }

    /// A request completed with `output_tokens` tokens, `e2el` after its send, first token `ttft`.
    pub fn record_finished(
        &mut self,
        input_tokens: u32,
        output_tokens: u32,
        e2el: SimDuration,
        ttft: SimDuration,
        now: SimTime,
    ) {
        self.completed += 1;
        self.input_tokens += u64::from(input_tokens);
        self.output_tokens += u64::from(output_tokens);
        self.e2el.record(e2el);
        if output_tokens > 1 {
            let decode = e2el.as_ns() - ttft.as_ns();
            self.tpot
                .record(SimDuration::from_ns(decode / u64::from(output_tokens - 1)));
        }
        self.last_finish = self.last_finish.max(now);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests;
