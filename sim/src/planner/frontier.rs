//! SLO verdicts, the ranking and the Pareto frontiers of a sweep, computed from its rows alone, so
//! a merged set of shard files gives exactly what a single run gives.
//!
//! Objective: output tokens/s per GPU (higher is better) against the SLO statistic of TPOT or TTFT
//! (lower is better). A candidate is on a frontier when no other completed candidate is at least as
//! good on both and better on one. Only candidates that ran every request (`status` ok, outcome
//! `completed`, no failed request) take part.

use std::cmp::Ordering;

use afd_traces::sweep::{SWEEP_FORMAT, SWEEP_SCHEMA_VERSION, SweepRow, SweepSummary};

/// Which statistic of TTFT and TPOT the SLO and the frontiers use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SloStat {
    Mean,
    Median,
    P99,
}

impl SloStat {
    pub fn parse(text: &str) -> Option<SloStat> {
        match text {
            "mean" => Some(SloStat::Mean),
            "median" => Some(SloStat::Median),
            "p99" => Some(SloStat::P99),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SloStat::Mean => "mean",
            SloStat::Median => "median",
            SloStat::P99 => "p99",
        }
    }
}

/// The service-level objective of a sweep.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Slo {
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub stat: SloStat,
}

/// Which latency a frontier is drawn against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Latency {
    Tpot,
    Ttft,
}

impl Latency {
    pub fn as_str(self) -> &'static str {
        match self {
            Latency::Tpot => "TPOT",
            Latency::Ttft => "TTFT",
        }
    }
}

/// The statistic named by the row's `slo_stat` (mean when unknown) of TPOT or TTFT.
pub fn latency_ms(row: &SweepRow, latency: Latency) -> Option<f64> {
    let stat = SloStat::parse(&row.slo_stat).unwrap_or(SloStat::Mean);
    match (latency, stat) {
        (Latency::Tpot, SloStat::Mean) => row.mean_tpot_ms,
        (Latency::Tpot, SloStat::Median) => row.median_tpot_ms,
        (Latency::Tpot, SloStat::P99) => row.p99_tpot_ms,
        (Latency::Ttft, SloStat::Mean) => row.mean_ttft_ms,
        (Latency::Ttft, SloStat::Median) => row.median_ttft_ms,
        (Latency::Ttft, SloStat::P99) => row.p99_ttft_ms,
    }
}

/// Whether the row ran every request of the workload.
pub fn is_complete(row: &SweepRow) -> bool {
    row.status == "ok" && row.outcome.as_deref() == Some("completed") && row.failed == Some(0)
}

/// `pass` when the row ran every request and meets each given threshold, else `fail`.
pub fn verdict(row: &SweepRow, slo: &Slo) -> &'static str {
    let within = |limit: Option<f64>, latency| match limit {
        None => true,
        Some(limit) => latency_ms(row, latency).is_some_and(|v| v <= limit),
    };
    if is_complete(row) && within(slo.ttft_ms, Latency::Ttft) && within(slo.tpot_ms, Latency::Tpot)
    {
        "pass"
    } else {
        "fail"
    }
}

fn throughput(row: &SweepRow) -> f64 {
    row.output_tokens_per_s_per_gpu.unwrap_or(0.0)
}

/// Best first: higher tokens/s per GPU, then lower TPOT statistic, then lower candidate index.
fn better(a: &SweepRow, b: &SweepRow) -> Ordering {
    throughput(b)
        .total_cmp(&throughput(a))
        .then_with(|| {
            let tpot = |r: &SweepRow| latency_ms(r, Latency::Tpot).unwrap_or(f64::INFINITY);
            tpot(a).total_cmp(&tpot(b))
        })
        .then(a.candidate.cmp(&b.candidate))
}

/// Indices (into `rows`) of the frontier against `latency`, by increasing latency.
pub fn frontier(rows: &[SweepRow], latency: Latency) -> Vec<usize> {
    let mut points: Vec<(f64, f64, u64, usize)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| is_complete(r))
        .filter_map(|(i, r)| Some((latency_ms(r, latency)?, throughput(r), r.candidate, i)))
        .collect();
    points.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(b.1.total_cmp(&a.1))
            .then(a.2.cmp(&b.2))
    });
    let mut out = Vec::new();
    let mut best: Option<(f64, f64)> = None;
    for (x, y, _, i) in points {
        let keep = match best {
            None => true,
            // Equal on both counts is not dominated; otherwise only a higher throughput is.
            Some((bx, by)) => y > by || (x == bx && y == by),
        };
        if keep {
            out.push(i);
            if best.is_none_or(|(_, by)| y > by) {
                best = Some((x, y));
            }
        }
    }
    out
}

/// Fills `rank`, `frontier_tpot` and `frontier_ttft` of a complete sweep's rows.
pub fn finalize(rows: &mut [SweepRow]) {
    let mut passing: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].slo == "pass").collect();
    passing.sort_by(|&a, &b| better(&rows[a], &rows[b]));
    for row in rows.iter_mut() {
        row.rank = None;
        let complete = is_complete(row);
        row.frontier_tpot = Some(false).filter(|_| complete);
        row.frontier_ttft = Some(false).filter(|_| complete);
    }
    for (rank, &i) in passing.iter().enumerate() {
        rows[i].rank = Some(rank as u64 + 1);
    }
    for i in frontier(rows, Latency::Tpot) {
        rows[i].frontier_tpot = Some(true);
    }
    for i in frontier(rows, Latency::Ttft) {
        rows[i].frontier_ttft = Some(true);
    }
}

/// The summary of finalized rows: counts, the best passing candidates, the top `top` and the
/// frontiers.
pub fn summary(rows: &[SweepRow], top: usize) -> SweepSummary {
    let mut ranked: Vec<&SweepRow> = rows.iter().filter(|r| r.rank.is_some()).collect();
    ranked.sort_by_key(|r| r.rank);
    let best_of = |kind: &str| ranked.iter().find(|r| r.kind == kind).map(|r| (*r).clone());
    let first = rows.first();
    let on = |latency| -> Vec<u64> {
        frontier(rows, latency)
            .into_iter()
            .map(|i| rows[i].candidate)
            .collect()
    };
    SweepSummary {
        format: SWEEP_FORMAT.to_owned(),
        schema_version: SWEEP_SCHEMA_VERSION,
        sweep: first.map(|r| r.sweep.clone()).unwrap_or_default(),
        candidates: first.map_or(0, |r| r.candidates),
        rows: rows.len() as u64,
        simulated: rows.iter().filter(|r| r.status == "ok").count() as u64,
        passing: ranked.len() as u64,
        disagreements: rows
            .iter()
            .filter(|r| r.cross_check.as_deref() == Some("disagree"))
            .count() as u64,
        slo_stat: first.map(|r| r.slo_stat.clone()).unwrap_or_default(),
        ttft_slo_ms: first.and_then(|r| r.ttft_slo_ms),
        tpot_slo_ms: first.and_then(|r| r.tpot_slo_ms),
        best: ranked.first().map(|r| (*r).clone()),
        best_afd: best_of("afd"),
        best_colocated: best_of("colocated"),
        top: ranked.iter().take(top).map(|r| (*r).clone()).collect(),
        frontier_tpot: on(Latency::Tpot),
        frontier_ttft: on(Latency::Ttft),
    }
}
