//! What the client sends and how experts are picked: every random distribution of the simulator
//! is sampled here (STYLE.md §4).
//!
//! - `vllm bench serve` semantics: the random dataset's prompt and output lengths (`--random-input-len`,
//!   `--random-output-len`, `--random-range-ratio`, `ignore_eos` so every request generates exactly
//!   its output length), intended send times from `--request-rate` and `--burstiness` (gamma
//!   inter-arrivals rescaled so the last request is sent at `N / rate`, as `get_request` in
//!   `vllm/benchmarks/serve.py` does), and `--max-concurrency`, applied later by the client model.
//! - Trace replay: arrivals and lengths from a trace; a trace without arrivals gets the synthetic
//!   process.
//! - Expert routing: per-token top-k over a uniform or power-law expert popularity.

use rand::{Rng, RngExt};
use rand_distr::{Distribution, Gamma};

use crate::rng::{RngStream, Seed, SimRng, stream};
use crate::time::{SimDuration, SimTime};

mod vllm_bench;
pub use vllm_bench::NumpyRandomState;

/// One request as the client will send it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestSpec {
    /// When the client means to send it (before the concurrency limit).
    pub intended_send: SimTime,
    pub input_tokens: u32,
    /// Tokens generated before the request finishes (`max_tokens` with `ignore_eos`).
    pub output_tokens: u32,
}

/// Everything the client does: the requests in send order and the concurrency limit.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    pub requests: Vec<RequestSpec>,
    /// `--max-concurrency`: at most this many requests in flight; `None` is unlimited.
    pub max_concurrency: Option<u32>,
    /// `--request-rate` in requests/s; infinite when `None` (reported as `inf`).
    pub request_rate: Option<f64>,
    pub burstiness: f64,
}

/// `--dataset-name random` lengths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomDataset {
    pub num_prompts: u32,
    pub input_len: u32,
    pub output_len: u32,
    /// `--random-range-ratio`: lengths uniform in `[len·(1−r), len·(1+r)]`, `0 ≤ r < 1`.
    pub range_ratio: f64,
}

/// The client's intended send process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arrivals {
    /// `--request-rate inf`: everything at time zero.
    AllAtOnce,
    /// Gamma inter-arrivals with shape `burstiness` and mean `1 / rate` (Poisson at burstiness 1).
    Gamma { rate: f64, burstiness: f64 },
    /// `--ramp-up-strategy` (with `--request-rate inf`): request i's gap has shape `burstiness` and
    /// the mean of the rate the ramp gives request i, and the send times are not rescaled.
    RampUp { ramp: RampUp, burstiness: f64 },
}

/// `vllm bench serve --ramp-up-strategy linear|exponential --ramp-up-start-rps S --ramp-up-end-rps E`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RampUp {
    pub exponential: bool,
    pub start_rps: f64,
    pub end_rps: f64,
}

impl RampUp {
    /// `--ramp-up-strategy`'s values, as `vllm bench serve` spells them.
    pub const STRATEGIES: [&'static str; 2] = ["linear", "exponential"];

    /// The ramp `strategy` (one of [`RampUp::STRATEGIES`]) gives from `start_rps` to `end_rps`.
    pub fn of(strategy: &str, start_rps: f64, end_rps: f64) -> Option<RampUp> {
        let exponential = match strategy {
            "linear" => false,
            "exponential" => true,
            _ => return None,
        };
        Some(RampUp {
            exponential,
            start_rps,
            end_rps,
        })
    }

    /// The strategy's name, as `vllm bench serve` records it.
    pub fn strategy(self) -> &'static str {
        Self::STRATEGIES[usize::from(self.exponential)]
    }

    /// The rate of request `index` of `total` (`_get_current_request_rate` in serve.py): from the
    /// start to the end rate in steps of the request's progress, linearly or geometrically.
    pub fn rate(self, index: usize, total: usize) -> f64 {
        let progress = index as f64 / total.saturating_sub(1).max(1) as f64;
        if self.exponential {
            self.start_rps * (self.end_rps / self.start_rps).powf(progress)
        } else {
            self.start_rps + (self.end_rps - self.start_rps) * progress
        }
    }
}

/// Whose generator draws the gaps of [`Arrivals::Gamma`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArrivalDraw {
    /// The simulator's own arrivals stream of the run's seed.
    Simulator,
    /// Exactly the gaps `vllm bench serve --seed SEED` draws (numpy's legacy generator; see
    /// `vllm_bench.rs`), so a simulated run sends when the real client sent.
    VllmBench { seed: u32 },
}

/// One request of a replayed trace (converted from `afd-traces` records by the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// Arrival offset in microseconds, when the trace has arrivals.
    pub arrival_us: Option<u64>,
    pub input_tokens: u32,
    pub output_tokens: u32,
}

/// Why a workload cannot be built.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum WorkloadError {
    #[error("--num-prompts must be at least 1")]
    NoPrompts,
    #[error("--random-input-len must be at least 1")]
    EmptyInput,
    #[error("--random-output-len must be at least 1")]
    EmptyOutput,
    #[error("--random-range-ratio must be in [0, 1), got {0}")]
    RangeRatio(f64),
    #[error("--request-rate must be positive and finite (or inf), got {0}")]
    Rate(f64),
    #[error("--burstiness must be positive and finite, got {0}")]
    Burstiness(f64),
    #[error(
        "--request-rate {rate} with --burstiness {burstiness} gives gamma inter-arrivals of scale {scale} s, which cannot be sampled"
    )]
    GammaScale {
        rate: f64,
        burstiness: f64,
        scale: f64,
    },
    #[error(
        "a ramp-up from {start} to {end} req/s: vllm bench serve needs a positive start no larger than the end"
    )]
    RampUp { start: f64, end: f64 },
    #[error("--max-concurrency must be at least 1")]
    Concurrency,
    #[error("trace has no requests")]
    EmptyTrace,
    #[error("trace request {index} has {field} = 0; every request needs at least one token")]
    ZeroTokens { index: usize, field: &'static str },
}

impl Arrivals {
    /// Checks rate and burstiness.
    pub fn validate(self) -> Result<Arrivals, WorkloadError> {
        if let Arrivals::RampUp { ramp, burstiness } = self {
            let RampUp {
                start_rps: start,
                end_rps: end,
                ..
            } = ramp;
            if !(start.is_finite() && end.is_finite() && start > 0.0 && end >= start) {
                return Err(WorkloadError::RampUp { start, end });
            }
            // Every rate of the ramp lies within [start, end]: the end's gamma is the one to check.
            Arrivals::Gamma {
                rate: end,
                burstiness,
            }
            .validate()?;
        }
        if let Arrivals::Gamma { rate, burstiness } = self {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(WorkloadError::Rate(rate));
            }
            if !(burstiness.is_finite() && burstiness > 0.0) {
                return Err(WorkloadError::Burstiness(burstiness));
            }
            let scale = 1.0 / (rate * burstiness);
            if !(scale.is_finite() && scale > 0.0) || Gamma::new(burstiness, scale).is_err() {
                return Err(WorkloadError::GammaScale {
                    rate,
                    burstiness,
                    scale,
                });
            }
        }
        Ok(self)
    }

    /// Intended send times of `n` requests (`get_request` of `vllm bench serve`): cumulative gamma
    /// delays, rescaled so the last one is at `n / rate`.
    pub fn send_times(self, n: usize, rng: &mut SimRng) -> Vec<SimTime> {
        self.times_from(n, |shape, scale| {
            Gamma::new(shape, scale)
                .expect("validated: shape and scale are positive and finite")
                .sample(rng)
        })
    }

    /// The send times `draw` gives `n` requests.
    pub fn drawn_send_times(self, n: usize, draw: ArrivalDraw, seed: Seed) -> Vec<SimTime> {
        match draw {
            ArrivalDraw::VllmBench { seed } => {
                let mut numpy = NumpyRandomState::new(seed);
                self.times_from(n, |shape, scale| numpy.gamma(shape, scale))
            }
            ArrivalDraw::Simulator => self.send_times(n, &mut stream(seed, RngStream::Arrivals)),
        }
    }

    /// The send times of `n` requests whose gaps `gamma(shape, scale)` draws, in request order:
    /// rescaled to `n / rate` at a fixed rate, as sent along a ramp.
    fn times_from(self, n: usize, mut gamma: impl FnMut(f64, f64) -> f64) -> Vec<SimTime> {
        match self {
            Arrivals::AllAtOnce => vec![SimTime::ZERO; n],
            Arrivals::Gamma { rate, burstiness } => {
                rescaled(n, rate, || gamma(burstiness, 1.0 / (rate * burstiness)))
            }
            Arrivals::RampUp { ramp, burstiness } => cumulated(n, |i| {
                gamma(burstiness, 1.0 / (ramp.rate(i, n) * burstiness))
            }),
        }
    }

    fn rate(self) -> Option<f64> {
        match self {
            Arrivals::AllAtOnce => None,
            Arrivals::Gamma { rate, .. } => Some(rate),
            // vLLM reports a ramped run's rate as `inf` (it ran with `--request-rate inf`).
            Arrivals::RampUp { .. } => None,
        }
    }

    fn burstiness(self) -> f64 {
        match self {
            Arrivals::AllAtOnce => 1.0,
            Arrivals::Gamma { burstiness, .. } | Arrivals::RampUp { burstiness, .. } => burstiness,
        }
    }
}

/// `n` gaps from `gap`, summed and rescaled so the last send is at `n / rate` (`get_request`).
fn rescaled(n: usize, rate: f64, mut gap: impl FnMut() -> f64) -> Vec<SimTime> {
    let sums = sums(n, |_| gap());
    let total = sums.last().copied().unwrap_or(0.0);
    let scale = if total > 0.0 {
        n as f64 / rate / total
    } else {
        1.0
    };
    sums.into_iter()
        .map(|secs| SimTime::ZERO + SimDuration::from_secs_f64(secs * scale))
        .collect()
}

/// `n` gaps from `gap` (given each request's index), summed as sent: a ramp-up is not rescaled.
fn cumulated(n: usize, gap: impl FnMut(usize) -> f64) -> Vec<SimTime> {
    sums(n, gap)
        .into_iter()
        .map(|secs| SimTime::ZERO + SimDuration::from_secs_f64(secs))
        .collect()
}

fn sums(n: usize, mut gap: impl FnMut(usize) -> f64) -> Vec<f64> {
    let mut total = 0.0f64;
    (0..n)
        .map(|i| {
            total += gap(i);
            total
        })
        .collect()
}

fn check_concurrency(max_concurrency: Option<u32>) -> Result<(), WorkloadError> {
    if max_concurrency == Some(0) {
        return Err(WorkloadError::Concurrency);
    }
    Ok(())
}

/// Builds the `vllm bench serve` random-dataset workload, its gaps from the simulator's stream.
pub fn random_workload(
    dataset: RandomDataset,
    arrivals: Arrivals,
    max_concurrency: Option<u32>,
    seed: Seed,
) -> Result<Workload, WorkloadError> {
    random_workload_drawn(
        dataset,
        arrivals,
        ArrivalDraw::Simulator,
        max_concurrency,
        seed,
    )
}

/// Builds the `vllm bench serve` random-dataset workload, its gaps drawn by `draw`.
pub fn random_workload_drawn(
    dataset: RandomDataset,
    arrivals: Arrivals,
    gaps: ArrivalDraw,
    max_concurrency: Option<u32>,
    seed: Seed,
) -> Result<Workload, WorkloadError> {
    if dataset.num_prompts == 0 {
        return Err(WorkloadError::NoPrompts);
    }
    if dataset.input_len == 0 {
        return Err(WorkloadError::EmptyInput);
    }
    if dataset.output_len == 0 {
        return Err(WorkloadError::EmptyOutput);
    }
    if !(0.0..1.0).contains(&dataset.range_ratio) {
        return Err(WorkloadError::RangeRatio(dataset.range_ratio));
    }
    let arrivals = arrivals.validate()?;
    check_concurrency(max_concurrency)?;
    let n = dataset.num_prompts as usize;
    let mut lengths = stream(seed, RngStream::Lengths);
    let draw = |rng: &mut SimRng, len: u32| -> u32 {
        let r = dataset.range_ratio;
        let lo = ((f64::from(len) * (1.0 - r)).floor() as u32).max(1);
        let hi = ((f64::from(len) * (1.0 + r)).floor() as u32).max(lo);
        if lo == hi {
            lo
        } else {
            rng.random_range(lo..=hi)
        }
    };
    let inputs: Vec<u32> = (0..n)
        .map(|_| draw(&mut lengths, dataset.input_len))
        .collect();
    let outputs: Vec<u32> = (0..n)
        .map(|_| draw(&mut lengths, dataset.output_len))
        .collect();
    let times = arrivals.drawn_send_times(n, gaps, seed);
    let requests = (0..n)
        .map(|i| RequestSpec {
            intended_send: times[i],
            input_tokens: inputs[i],
            output_tokens: outputs[i],
        })
        .collect();
    Ok(Workload {
        requests,
        max_concurrency,
        request_rate: arrivals.rate(),
        burstiness: arrivals.burstiness(),
    })
}

/// Builds a workload from a trace. Arrivals come from the trace (offset so the first is at zero)
/// when every entry has one; otherwise `arrivals` generates them.
pub fn trace_workload(
    entries: &[TraceEntry],
    arrivals: Arrivals,
    max_concurrency: Option<u32>,
    seed: Seed,
) -> Result<Workload, WorkloadError> {
    if entries.is_empty() {
        return Err(WorkloadError::EmptyTrace);
    }
    check_concurrency(max_concurrency)?;
    for (index, entry) in entries.iter().enumerate() {
        if entry.input_tokens == 0 {
            return Err(WorkloadError::ZeroTokens {
                index,
                field: "input_tokens",
            });
        }
        if entry.output_tokens == 0 {
            return Err(WorkloadError::ZeroTokens {
                index,
                field: "output_tokens",
            });
        }
    }
    let arrivals = arrivals.validate()?;
    let replayed = entries.iter().all(|e| e.arrival_us.is_some());
    let times: Vec<SimTime> = if replayed {
        let first = entries
            .iter()
            .filter_map(|e| e.arrival_us)
            .min()
            .unwrap_or(0);
        entries
            .iter()
            .map(|e| SimTime::ZERO + SimDuration::from_us(e.arrival_us.unwrap_or(first) - first))
            .collect()
    } else {
        arrivals.send_times(entries.len(), &mut stream(seed, RngStream::Arrivals))
    };
    let mut requests: Vec<RequestSpec> = entries
        .iter()
        .zip(times)
        .map(|(e, t)| RequestSpec {
            intended_send: t,
            input_tokens: e.input_tokens,
            output_tokens: e.output_tokens,
        })
        .collect();
    // The client sends in time order; a stable sort keeps trace order among equal timestamps.
    requests.sort_by_key(|r| r.intended_send);
    let (request_rate, burstiness) = if replayed {
        let span = requests
            .last()
            .map_or(0.0, |r| r.intended_send.as_secs_f64());
        ((span > 0.0).then(|| requests.len() as f64 / span), 1.0)
    } else {
        (arrivals.rate(), arrivals.burstiness())
    };
    Ok(Workload {
        requests,
        max_concurrency,
        request_rate,
        burstiness,
    })
}

/// How tokens pick experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExpertPopularity {
    /// Every expert equally likely.
    Uniform,
    /// Expert `i` (in id order) has weight `(i + 1)^-exponent` (AIConfigurator's power-law MoE
    /// tables use exponents 1.01 and 1.2, sim-anchors §1.2).
    PowerLaw { exponent: f64 },
}

/// Samples top-k expert sets for tokens.
#[derive(Clone, Debug)]
pub struct ExpertSampler {
    /// Cumulative weights, normalised to end at 1 (empty for uniform).
    cumulative: Vec<f64>,
    experts: u32,
    top_k: u32,
}

impl ExpertSampler {
    /// Panics when `top_k > experts` or `experts == 0`: the caller validates the model first.
    pub fn new(popularity: ExpertPopularity, experts: u32, top_k: u32) -> ExpertSampler {
        assert!(
            experts > 0 && top_k <= experts,
            "top-{top_k} of {experts} experts"
        );
        let cumulative = match popularity {
            ExpertPopularity::Uniform => Vec::new(),
            ExpertPopularity::PowerLaw { exponent } => {
                let weights: Vec<f64> = (0..experts)
                    .map(|i| f64::from(i + 1).powf(-exponent))
                    .collect();
                let total: f64 = weights.iter().sum();
                let mut acc = 0.0;
                weights
                    .iter()
                    .map(|w| {
                        acc += w / total;
                        acc
                    })
                    .collect()
            }
        };
        ExpertSampler {
            cumulative,
            experts,
            top_k,
        }
    }

    pub fn experts(&self) -> u32 {
        self.experts
    }

    /// A digest of everything that decides the sampler's draws.
    pub fn fingerprint(&self) -> u64 {
        let mut bytes = Vec::with_capacity(8 + 8 * self.cumulative.len());
        bytes.extend_from_slice(&self.experts.to_le_bytes());
        bytes.extend_from_slice(&self.top_k.to_le_bytes());
        for c in &self.cumulative {
            bytes.extend_from_slice(&c.to_bits().to_le_bytes());
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }

    pub fn top_k(&self) -> u32 {
        self.top_k
    }

    fn draw_one(&self, rng: &mut SimRng) -> u32 {
        if self.cumulative.is_empty() {
            return rng.random_range(0..self.experts);
        }
        let u: f64 = rng.random();
        let i = self.cumulative.partition_point(|&c| c < u);
        u32::try_from(i.min(self.cumulative.len() - 1)).expect("expert index fits u32")
    }

    /// Fills `out` with `top_k` distinct experts for one token (weighted sampling without
    /// replacement by rejection; after many rejections the least-indexed free experts are used).
    pub fn sample_token(&self, rng: &mut SimRng, out: &mut Vec<u32>) {
        out.clear();
        if self.cumulative.is_empty() && self.experts.is_power_of_two() && self.experts > 1 {
            self.sample_uniform_pow2(rng, out);
            return;
        }
        let mut attempts = 0u32;
        while out.len() < self.top_k as usize {
            let e = self.draw_one(rng);
            if !out.contains(&e) {
                out.push(e);
            }
            attempts += 1;
            if attempts > 64 * self.top_k {
                let mut e = 0;
                while out.len() < self.top_k as usize {
                    if !out.contains(&e) {
                        out.push(e);
                    }
                    e += 1;
                }
            }
        }
    }

    /// Uniform top-k of a power-of-two number of experts: each draw is `log2(experts)` bits of a
    /// 64-bit word (exactly uniform), repeats rejected as in the general path.
    fn sample_uniform_pow2(&self, rng: &mut SimRng, out: &mut Vec<u32>) {
        let bits = self.experts.trailing_zeros();
        let mask = u64::from(self.experts - 1);
        let per_word = 64 / bits;
        let mut seen = [0u64; 4];
        let wide = self.experts > 256;
        while out.len() < self.top_k as usize {
            let mut word = rng.next_u64();
            for _ in 0..per_word {
                let e = (word & mask) as u32;
                word >>= bits;
                let fresh = if wide {
                    !out.contains(&e)
                } else {
                    let (slot, bit) = ((e / 64) as usize, 1u64 << (e % 64));
                    let fresh = seen[slot] & bit == 0;
                    seen[slot] |= bit;
                    fresh
                };
                if fresh {
                    out.push(e);
                    if out.len() == self.top_k as usize {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
