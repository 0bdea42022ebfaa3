//! Capacity under the SLO: for one candidate, the highest load (request rate, or concurrency) at
//! which its run still meets the sweep's objectives, found by simulating the candidate at a handful
//! of loads.
//!
//! Every probe replays the same requests (lengths and the order of their arrivals come from the
//! sweep's seed): a rate probe rescales the base workload's send times by `base_rate / rate`, so a
//! higher rate is the same arrivals squeezed closer; a concurrency probe sends everything at once
//! through `max_concurrency` streams. The first probe sends everything at once: the candidate's
//! saturated request throughput brackets the search (no rate above it is sustainable). The search
//! then probes that rate (for concurrency: 8 streams) and halves or doubles until it holds a
//! passing and a failing load (a candidate that passes at its saturated rate is done in two
//! probes), bisects
//! (geometrically for rates) until they are one step apart (5 %, or one stream), and finally
//! probes one step above the passing load until that fails: the capacity `c` it reports always
//! passed at `c` and failed at one step above `c`. Probes of one candidate share the step memo
//! (`cluster/memo.rs`), so a step that recurs between loads is priced once.
//!
//! What this does not do: assume the SLO verdict is monotone in the load. It is not guaranteed
//! (a denser arrival pattern can batch better), so the search reports what it proved, a passing
//! load with a failing step above it, not the largest passing load there is.

use afd_traces::sweep::SweepRow;

use crate::cluster::StepMemo;
use crate::model::limits::LimitSpans;
use crate::model::workload::Workload;
use crate::planner::candidate::Candidate;
use crate::planner::evaluate::{Evaluated, Inputs, simulate_with};
use crate::time::SimTime;

/// Which load the capacity is a level of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapacityBy {
    /// Requests per second of an open-loop arrival process (the sweep's burstiness).
    Rate,
    /// Requests in flight of a closed loop (`--max-concurrency`), everything sent at once.
    Concurrency,
}

impl CapacityBy {
    pub fn parse(text: &str) -> Option<CapacityBy> {
        match text {
            "rate" => Some(CapacityBy::Rate),
            "concurrency" => Some(CapacityBy::Concurrency),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            CapacityBy::Rate => "rate",
            CapacityBy::Concurrency => "concurrency",
        }
    }
}

/// How a sweep searches each candidate's capacity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacitySearch {
    pub by: CapacityBy,
    /// Ratio between the reported capacity and the failing load above it, for rates (> 1).
    pub step: f64,
    /// Most simulations one candidate may take; a search that runs out reports its best passing
    /// load so far.
    pub max_probes: u32,
}

impl CapacitySearch {
    /// A 5 % step and at most 24 probes.
    pub fn new(by: CapacityBy) -> CapacitySearch {
        CapacitySearch {
            by,
            step: 1.05,
            max_probes: 24,
        }
    }
}

/// The load of one probe.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Load {
    /// Everything at once, no concurrency limit.
    Saturated,
    Level(f64),
}

/// The highest rate a search probes, relative to the saturated request throughput: no higher rate
/// is sustained (its requests only queue), so an objective that still holds there (a TPOT bound
/// alone) reports the saturated throughput as the capacity.
const RATE_CEILING: f64 = 1.0;
/// The least a rate search halves to before it reports a capacity of 0, relative to the saturated
/// throughput. A deployment that meets the objective only below 1/64 of what it can serve carries
/// almost nothing within it, and each halving below doubles the simulated span of sparse arrivals
/// (at 64 GPUs, a 62A2F candidate that missed a TPOT bound alone took 12 probes to X/1024, 15,000
/// simulated seconds at the last, and half a 64-GPU sweep's time).
const RATE_FLOOR: f64 = 1.0 / 64.0;

/// The workload of `load`: `base` (whose send times are at `base.request_rate`) rescaled to `rate`,
/// or sent at once through `level` streams.
pub(crate) fn workload_at(base: &Workload, by: CapacityBy, load: Load) -> Workload {
    let mut w = base.clone();
    match (load, by) {
        (Load::Saturated, _) => {
            for r in &mut w.requests {
                r.intended_send = SimTime::ZERO;
            }
            w.request_rate = None;
            w.max_concurrency = None;
        }
        (Load::Level(rate), CapacityBy::Rate) => {
            let base_rate = base.request_rate.unwrap_or(1.0);
            let scale = base_rate / rate;
            for r in &mut w.requests {
                let ns = (r.intended_send.as_ns() as f64 * scale).round() as u64;
                r.intended_send = SimTime::from_ns(ns);
            }
            w.request_rate = Some(rate);
            w.max_concurrency = None;
        }
        (Load::Level(streams), CapacityBy::Concurrency) => {
            for r in &mut w.requests {
                r.intended_send = SimTime::ZERO;
            }
            w.request_rate = None;
            w.max_concurrency = Some(streams as u32);
        }
    }
    w
}

/// Searches `candidate`'s capacity and returns its row at the capacity (with the capacity columns)
/// and the limit spans that hold for every probe's run: a candidate inside them would probe the
/// same loads with the same results, so it can take the row.
pub fn search(
    candidate: &Candidate,
    index: u64,
    candidates: u64,
    sweep: &str,
    inputs: &Inputs<'_>,
    search: CapacitySearch,
    memo: &mut Option<StepMemo>,
) -> Evaluated {
    let mut prober = Prober {
        candidate,
        index,
        candidates,
        sweep,
        inputs,
        search,
        memo,
        probes: 0,
        spans: None,
    };
    let saturated = prober.probe(Load::Saturated);
    if saturated.row.status != "ok" {
        return saturated;
    }
    let x = saturated.row.request_throughput.unwrap_or(0.0);
    let range = match search.by {
        CapacityBy::Rate => Range {
            start: (x * RATE_CEILING).max(f64::MIN_POSITIVE),
            floor: x * RATE_FLOOR,
            ceiling: x * RATE_CEILING,
        },
        CapacityBy::Concurrency => {
            let ceiling = inputs.workload.requests.len() as f64;
            Range {
                start: 8.0_f64.min(ceiling).max(1.0),
                floor: 1.0,
                ceiling,
            }
        }
    };
    let mut bracket = Bracket::default();
    prober.bracket(&mut bracket, &range);
    prober.bisect(&mut bracket);
    prober.prove_step_above(&mut bracket, &range);
    let (capacity, mut evaluated) = match (bracket.lo, bracket.hi) {
        (Some((c, e)), _) => (c, e),
        (None, Some((_, e))) => (0.0, e),
        (None, None) => (0.0, saturated),
    };
    fill_capacity(&mut evaluated.row, search.by, capacity, prober.probes);
    Evaluated {
        row: evaluated.row,
        spans: prober.spans,
    }
}

/// Where a search starts and the loads it never goes past.
struct Range {
    start: f64,
    floor: f64,
    ceiling: f64,
}

/// The highest load known to pass and the lowest known to fail, with their runs.
#[derive(Default)]
struct Bracket {
    lo: Option<(f64, Evaluated)>,
    hi: Option<(f64, Evaluated)>,
}

/// One candidate's probes: what every simulation shares, and what the probes so far proved.
struct Prober<'a, 'm> {
    candidate: &'a Candidate,
    index: u64,
    candidates: u64,
    sweep: &'a str,
    inputs: &'a Inputs<'a>,
    search: CapacitySearch,
    memo: &'m mut Option<StepMemo>,
    probes: u32,
    /// The limit spans every probe's run holds for (their intersection).
    spans: Option<LimitSpans>,
}

impl Prober<'_, '_> {
    fn probe(&mut self, load: Load) -> Evaluated {
        self.probes += 1;
        let workload = workload_at(self.inputs.workload, self.search.by, load);
        let evaluated = simulate_with(
            self.candidate,
            self.index,
            self.candidates,
            self.sweep,
            self.inputs,
            &workload,
            self.memo,
        );
        self.spans = match (self.spans.take(), evaluated.spans) {
            (Some(a), Some(b)) => Some(a.intersect(b)),
            (None, b) => b,
            (a, None) => a,
        };
        evaluated
    }

    fn has_probes_left(&self) -> bool {
        self.probes < self.search.max_probes
    }

    /// The next load one step above `v`: 5 % more, or at least one more stream.
    fn up(&self, v: f64) -> f64 {
        match self.search.by {
            CapacityBy::Rate => v * self.search.step,
            CapacityBy::Concurrency => (v * self.search.step).ceil().max(v + 1.0),
        }
    }

    /// Doubles from `range.start` while the load passes and halves while it fails, until it holds
    /// both (or reaches the ceiling passing, or the floor failing).
    fn bracket(&mut self, bracket: &mut Bracket, range: &Range) {
        let concurrency = self.search.by == CapacityBy::Concurrency;
        let mut v = range.start;
        while self.has_probes_left() && (bracket.lo.is_none() || bracket.hi.is_none()) {
            let e = self.probe(Load::Level(v));
            if e.row.slo == "pass" {
                bracket.lo = Some((v, e));
                if v >= range.ceiling {
                    break;
                }
                v = (v * 2.0).min(range.ceiling);
            } else {
                bracket.hi = Some((v, e));
                if v <= range.floor {
                    break;
                }
                v = if concurrency {
                    (v / 2.0).floor().max(1.0)
                } else {
                    v / 2.0
                };
            }
        }
    }

    /// Halves the bracket (geometrically for rates) until its failing load is one step above its
    /// passing one.
    fn bisect(&mut self, bracket: &mut Bracket) {
        while self.has_probes_left() {
            let (Some((a, _)), Some((b, _))) = (&bracket.lo, &bracket.hi) else {
                return;
            };
            let (a, b) = (*a, *b);
            if b <= self.up(a) {
                return;
            }
            let mid = match self.search.by {
                CapacityBy::Rate => (a * b).sqrt(),
                CapacityBy::Concurrency => ((a + b) / 2.0).floor(),
            };
            let e = self.probe(Load::Level(mid));
            if e.row.slo == "pass" {
                bracket.lo = Some((mid, e));
            } else {
                bracket.hi = Some((mid, e));
            }
        }
    }

    /// Probes one step above the passing load until that step fails, so the reported capacity
    /// passed and the step above it did not.
    fn prove_step_above(&mut self, bracket: &mut Bracket, range: &Range) {
        while self.has_probes_left() {
            let Some((a, _)) = &bracket.lo else { return };
            let next = self.up(*a);
            if bracket.hi.as_ref().is_some_and(|(b, _)| *b == next) || next > range.ceiling {
                return;
            }
            let e = self.probe(Load::Level(next));
            if e.row.slo == "pass" {
                bracket.lo = Some((next, e));
            } else {
                bracket.hi = Some((next, e));
                return;
            }
        }
    }
}

/// The capacity columns of a row whose metrics are its run at `capacity`.
///
/// Goodput is what the candidate carries in steady state within the objectives. By rate, that is
/// the capacity itself (requests/s arriving and served), with the run's output tokens per request:
/// the run's own request throughput (completed requests over its duration, as `vllm bench serve`
/// counts it) also holds the ramp and the drain of a finite workload, which would rank candidates
/// by their tails. By concurrency there is no arrival rate: the run's throughput at that many
/// streams.
fn fill_capacity(row: &mut SweepRow, by: CapacityBy, capacity: f64, probes: u32) {
    let passed = capacity > 0.0 && row.slo == "pass";
    row.capacity_by = by.as_str().to_owned();
    row.capacity = Some(capacity);
    row.capacity_probes = Some(probes);
    let measured = row.request_throughput.unwrap_or(0.0);
    let tokens_per_gpu = row.output_tokens_per_s_per_gpu.unwrap_or(0.0);
    let (requests, tokens) = match by {
        CapacityBy::Rate if measured > 0.0 => (capacity, capacity * tokens_per_gpu / measured),
        CapacityBy::Rate => (0.0, 0.0),
        CapacityBy::Concurrency => (measured, tokens_per_gpu),
    };
    row.goodput_requests_per_s = Some(if passed { requests } else { 0.0 });
    row.goodput_tokens_per_s_per_gpu = Some(if passed { tokens } else { 0.0 });
}

#[cfg(test)]
mod tests;
