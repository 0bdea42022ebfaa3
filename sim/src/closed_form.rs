//! Closed forms of AFD decode timing (research/sim-anchors.md §2.8), evaluated on the costs the
//! simulator itself priced, so the planner can say where the simulation and the formulas agree.
//!
//! - MegaScale-Infer's ping-pong pipeline (arXiv 2504.02263 §4, reproduced in AIConfigurator's AFD
//!   mode): with per-layer, per-ubatch attention time `t_A`, FFN time `t_F` and transfer round trip
//!   `t_c`, the overlap condition `m ≥ 2 + t_c / max(t_A, t_F)` (equivalently
//!   `m ≥ 2·(1 + T_c/T_f)` with one-way `T_c = t_c/2`), and the decode step
//!   `fill + cycle·(m·L − 1)`, `fill = t_A + t_F + t_c`, `cycle = max(t_A, t_F, t_c)` when the
//!   condition holds and `max(t_A, t_F) + t_c/2` otherwise (AIC's "optimistic" and "conservative"
//!   cycles); one ubatch cannot overlap at all, so `m = 1` is serial, `L·fill`.
//! - The A:F ratio rule of arXiv 2601.21351 (Theorem 4.4): with `t_F(rB) = α_F·rB + β_F`,
//!   `r* = max{r_A, r_C, r_peak}`, `r_A = (t̄_A − β_F)/(α_F·B)`, `r_C = (t̄_C − β_F)/(α_F·B)`,
//!   `r_peak = sqrt(β_F/(α_F·B))`, and the bundle's throughput `r·B / ((r + 1)·τ)` with
//!   `τ = max(t_A, t_C, t_F)`. `α_F` and `β_F` are fitted by least squares over the run's decode
//!   steps, as the paper fits them over measured steps.
//!
//! [`ClosedFormTotals`] accumulates, per decode step of a run, the simulated step and the closed
//! forms; [`ClosedFormTotals::summary`] turns the sums into the planner's cross-check figures. It
//! does not decide what a disagreement means (the planner does).

/// What one simulated decode step gives the closed forms, in nanoseconds. Per-rank busy times are
/// whole-step sums over every layer and ubatch.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DecodeStep {
    pub layers: u32,
    /// Ubatches `m` (1, or 2 with DBO).
    pub stages: u32,
    /// Simulated forward: from the end of the host's step preparation to the last LM head.
    pub span_ns: u64,
    /// Attention busy time of the busiest rank, without its LM head.
    pub attention_busy_max_ns: u64,
    pub attention_busy_mean_ns: f64,
    pub ffn_busy_max_ns: u64,
    pub ffn_busy_mean_ns: f64,
    /// Port time (A→F occupancy and latency, F→A sends) of the busiest FFN rank.
    pub link_busy_max_ns: u64,
    /// Work outside the layers: control payload and LM head.
    pub fixed_ns: u64,
    /// Real tokens decoded, over every engine.
    pub tokens: u32,
    /// Rows an Attention rank sends per ubatch (mean over ranks), and the rows the busiest FFN
    /// rank receives per ubatch.
    pub rows_per_attention_rank: f64,
    pub rows_per_ffn_rank: f64,
    pub attention_ranks: u32,
    pub ffn_ranks: u32,
    /// The step ran eagerly (each op pays its launch on the host).
    pub eager: bool,
}

/// Per-layer, per-ubatch times of one decode step, microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerTimes {
    pub attention_us: f64,
    pub ffn_us: f64,
    /// Round trip of transfers through the busiest FFN rank's port.
    pub transfer_us: f64,
}

/// MegaScale-Infer / AIConfigurator decode-step latency, microseconds, and whether the overlap
/// condition held.
pub fn pipeline_step_us(t: LayerTimes, layers: u32, stages: u32) -> (f64, bool) {
    let layers = f64::from(layers.max(1));
    let m = f64::from(stages.max(1));
    let fill = t.attention_us + t.ffn_us + t.transfer_us;
    let slowest = t.attention_us.max(t.ffn_us);
    if stages <= 1 {
        return (layers * fill, false);
    }
    let holds = slowest > 0.0 && m >= 2.0 + t.transfer_us / slowest;
    let cycle = if holds {
        slowest.max(t.transfer_us)
    } else {
        slowest + t.transfer_us / 2.0
    };
    (fill + cycle * (m * layers - 1.0), holds)
}

/// The A:F ratio rule: `(r*, regime)` from the mean attention time `t_a`, mean transfer time `t_c`,
/// the FFN line `t_F(x) = alpha·x + beta` (µs per row, µs) and `b` rows per Attention rank.
/// `None` when the line is not increasing or `b` is not positive.
pub fn optimal_ratio(t_a: f64, t_c: f64, alpha: f64, beta: f64, b: f64) -> Option<(f64, Regime)> {
    if !(alpha > 0.0 && b > 0.0 && beta >= 0.0 && t_a.is_finite() && t_c.is_finite()) {
        return None;
    }
    let r_a = (t_a - beta) / (alpha * b);
    let r_c = (t_c - beta) / (alpha * b);
    let r_peak = (beta / (alpha * b)).sqrt();
    let mut best = (r_a, Regime::Attention);
    if r_c > best.0 {
        best = (r_c, Regime::Communication);
    }
    if r_peak > best.0 {
        best = (r_peak, Regime::Ffn);
    }
    Some(best)
}

/// Which term of the ratio rule is the largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Regime {
    Attention,
    Communication,
    Ffn,
}

impl Regime {
    pub fn as_str(self) -> &'static str {
        match self {
            Regime::Attention => "attention",
            Regime::Communication => "communication",
            Regime::Ffn => "ffn",
        }
    }
}

/// Sums over a run's decode steps. Invariant: every field is a sum over the same `steps` steps.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClosedFormTotals {
    pub steps: u64,
    pub eager_steps: u64,
    /// Steps with `m ≥ 2` whose overlap condition failed.
    pub condition_violated: u64,
    pub stages: u64,
    pub span_ns: u64,
    /// Closed-form step, nanoseconds (fractional sums).
    pub closed_form_ns: f64,
    pub attention_us: f64,
    pub ffn_us: f64,
    pub transfer_us: f64,
    /// Rows per Attention rank per ubatch.
    pub rows_per_attention_rank: f64,
    pub tokens: u64,
    /// `Σ L·m·τ` (ns): the ratio paper's steady-state step.
    pub cycle_ns: f64,
    /// Σ (busiest / mean − 1) of the FFN and Attention ranks' busy times.
    pub ffn_imbalance: f64,
    pub attention_imbalance: f64,
    /// Least-squares sums of `t_F` (µs) on FFN rows per ubatch.
    pub fit_n: f64,
    pub fit_x: f64,
    pub fit_y: f64,
    pub fit_xx: f64,
    pub fit_xy: f64,
    pub attention_ranks: u32,
    pub ffn_ranks: u32,
    pub layers: u32,
}

/// The cross-check figures of a run (means over decode steps).
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedFormSummary {
    pub times: LayerTimes,
    pub stages: f64,
    pub condition_holds: bool,
    pub closed_form_step_ms: f64,
    pub simulated_step_ms: f64,
    /// `A / F`, the rule's `r*` and which term won (`None` when the FFN line cannot be fitted).
    pub ratio: f64,
    pub optimal_ratio: Option<(f64, Regime)>,
    pub closed_form_tokens_per_s_per_gpu: f64,
    pub simulated_tokens_per_s_per_gpu: f64,
    /// Share of decode steps that ran eagerly.
    pub eager_share: f64,
    /// Mean busiest-over-mean excess of FFN and Attention busy times.
    pub ffn_imbalance: f64,
    pub attention_imbalance: f64,
}

impl ClosedFormTotals {
    /// Adds one decode step.
    pub fn record(&mut self, step: &DecodeStep) {
        let per = f64::from(step.layers.max(1) * step.stages.max(1)) * 1e3;
        let times = LayerTimes {
            attention_us: step.attention_busy_max_ns as f64 / per,
            ffn_us: step.ffn_busy_max_ns as f64 / per,
            transfer_us: step.link_busy_max_ns as f64 / per,
        };
        let (layers_us, holds) = pipeline_step_us(times, step.layers, step.stages);
        self.steps += 1;
        self.eager_steps += u64::from(step.eager);
        self.condition_violated += u64::from(step.stages >= 2 && !holds);
        self.stages += u64::from(step.stages);
        self.span_ns += step.span_ns;
        self.closed_form_ns += layers_us * 1e3 + step.fixed_ns as f64;
        self.attention_us += times.attention_us;
        self.ffn_us += times.ffn_us;
        self.transfer_us += times.transfer_us;
        self.rows_per_attention_rank += step.rows_per_attention_rank;
        self.tokens += u64::from(step.tokens);
        let tau_us = times.attention_us.max(times.ffn_us).max(times.transfer_us);
        self.cycle_ns += tau_us * per;
        let excess = |max: u64, mean: f64| {
            if mean > 0.0 {
                max as f64 / mean - 1.0
            } else {
                0.0
            }
        };
        self.ffn_imbalance += excess(step.ffn_busy_max_ns, step.ffn_busy_mean_ns);
        self.attention_imbalance += excess(step.attention_busy_max_ns, step.attention_busy_mean_ns);
        let x = step.rows_per_ffn_rank;
        let y = times.ffn_us;
        self.fit_n += 1.0;
        self.fit_x += x;
        self.fit_y += y;
        self.fit_xx += x * x;
        self.fit_xy += x * y;
        self.attention_ranks = step.attention_ranks;
        self.ffn_ranks = step.ffn_ranks;
        self.layers = step.layers;
    }

    /// Means over the recorded steps, or `None` when the run had no decode step.
    pub fn summary(&self) -> Option<ClosedFormSummary> {
        if self.steps == 0 {
            return None;
        }
        let n = self.steps as f64;
        let times = LayerTimes {
            attention_us: self.attention_us / n,
            ffn_us: self.ffn_us / n,
            transfer_us: self.transfer_us / n,
        };
        let gpus = f64::from(self.attention_ranks + self.ffn_ranks).max(1.0);
        let ratio = f64::from(self.attention_ranks) / f64::from(self.ffn_ranks.max(1));
        let b = self.rows_per_attention_rank / n;
        let optimal_ratio = self.ffn_line().and_then(|(alpha, beta)| {
            optimal_ratio(times.attention_us, times.transfer_us, alpha, beta, b)
        });
        let per_s = |ns: f64| {
            if ns > 0.0 {
                self.tokens as f64 / (ns / 1e9) / gpus
            } else {
                0.0
            }
        };
        Some(ClosedFormSummary {
            times,
            stages: self.stages as f64 / n,
            condition_holds: self.condition_violated * 2 <= self.steps,
            closed_form_step_ms: self.closed_form_ns / n / 1e6,
            simulated_step_ms: self.span_ns as f64 / n / 1e6,
            ratio,
            optimal_ratio,
            closed_form_tokens_per_s_per_gpu: per_s(self.cycle_ns),
            simulated_tokens_per_s_per_gpu: per_s(self.span_ns as f64),
            eager_share: self.eager_steps as f64 / n,
            ffn_imbalance: self.ffn_imbalance / n,
            attention_imbalance: self.attention_imbalance / n,
        })
    }

    /// Least-squares `(α_F, β_F)` of FFN time on FFN rows, when the rows varied.
    fn ffn_line(&self) -> Option<(f64, f64)> {
        let n = self.fit_n;
        let variance = n * self.fit_xx - self.fit_x * self.fit_x;
        if n < 2.0 || variance <= 1e-9 * n * self.fit_xx.max(1.0) {
            return None;
        }
        let alpha = (n * self.fit_xy - self.fit_x * self.fit_y) / variance;
        let beta = (self.fit_y - alpha * self.fit_x) / n;
        Some((alpha, beta.max(0.0)))
    }
}

#[cfg(test)]
mod tests;
