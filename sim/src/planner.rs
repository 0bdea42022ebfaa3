//! Planning (DESIGN §4): search the deployment space of a GPU budget by simulating every legal
//! candidate in full, in parallel, and report the Pareto frontier.
//!
//! - `space.rs`: the dimensions and the points they span;
//! - `candidate.rs`: each point as `vllm serve` command lines, judged by the deployment rules;
//! - `evaluate.rs`: one candidate simulated (every request, every layer) into its CSV row, with
//!   the closed-form cross-checks (`closed_form.rs`);
//! - `frontier.rs`: SLO verdicts, ranking, frontiers and the summary, from the rows alone.
//!
//! [`plan`] enumerates and judges; [`run`] simulates one shard (or all) of the plan with a rayon
//! pool of a given size. Rows come back in candidate order and each candidate's simulation is a
//! pure function of its inputs, so the rows are the same bytes whatever the thread count; shards
//! partition the candidates round-robin, and [`merge`] joins shard rows into exactly the rows of a
//! single run. The pool is the only threading in the library; each simulation stays
//! single-threaded.

pub mod candidate;
pub mod evaluate;
pub mod frontier;
pub mod space;

use std::collections::BTreeMap;

use afd_traces::sweep::SweepRow;
use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use crate::planner::candidate::{Candidate, Context, judge};
use crate::planner::evaluate::{Inputs, evaluate};
use crate::planner::space::{Dimensions, points};

/// The legal candidates of a sweep and what the rules refused.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub candidates: Vec<Candidate>,
    /// Points enumerated before judging.
    pub enumerated: u64,
    /// Refused points per rule id (a point breaking several rules counts under each).
    pub rejected: BTreeMap<String, u64>,
    pub rejected_points: u64,
}

/// Enumerates the points of `dimensions` in the budget and keeps the legal ones, in order.
pub fn plan(dimensions: &Dimensions, context: &Context<'_>) -> Plan {
    let all = points(dimensions, context.budget);
    let judged: Vec<Result<Candidate, Vec<String>>> =
        all.iter().map(|point| judge(point, context)).collect();
    let mut plan = Plan {
        candidates: Vec::new(),
        enumerated: all.len() as u64,
        rejected: BTreeMap::new(),
        rejected_points: 0,
    };
    for verdict in judged {
        match verdict {
            Ok(candidate) => plan.candidates.push(candidate),
            Err(ids) => {
                plan.rejected_points += 1;
                for id in ids {
                    *plan.rejected.entry(id).or_default() += 1;
                }
            }
        }
    }
    plan
}

/// A deterministic slice of a sweep: candidates `i` with `i % count == index - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// From 1 to `count`.
    pub index: u64,
    pub count: u64,
}

/// A `--shard K/N` that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--shard must be K/N with 1 <= K <= N (e.g. 3/8), got {0:?}")]
pub struct ShardError(pub String);

impl Shard {
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    pub fn parse(text: &str) -> Result<Shard, ShardError> {
        let parse = || {
            let (k, n) = text.trim().split_once('/')?;
            let (index, count): (u64, u64) = (k.trim().parse().ok()?, n.trim().parse().ok()?);
            (count >= 1 && (1..=count).contains(&index)).then_some(Shard { index, count })
        };
        parse().ok_or_else(|| ShardError(text.to_owned()))
    }

    pub fn contains(self, candidate: u64) -> bool {
        candidate % self.count == self.index - 1
    }
}

/// A fingerprint of everything that decides a sweep's rows: the candidates' command lines and
/// timing views, the model, workload, costs, run bounds and SLO. Shards of one sweep share it.
pub fn fingerprint(plan: &Plan, inputs: &Inputs<'_>) -> String {
    let mut hash = Xxh3::new();
    let mut add = |text: &str| {
        hash.update(&(text.len() as u64).to_le_bytes());
        hash.update(text.as_bytes());
    };
    for candidate in &plan.candidates {
        add(&candidate.attention_args);
        add(&candidate.ffn_args);
        add(&format!("{:?}", candidate.config));
    }
    add(&format!("{:?}", inputs.model));
    add(&format!("{:?}", inputs.calibration));
    add(&format!("{:?}", inputs.workload));
    add(inputs.dataset);
    add(&format!("{:?}", inputs.options));
    add(&format!("{:?}", inputs.slo));
    format!("{:016x}", hash.digest())
}

/// Simulates the candidates of `plan` in `shard` on `threads` threads (at least one) and returns
/// their rows in candidate order; `done` is called once per finished candidate, from any thread.
/// With [`Shard::WHOLE`] the rows are finalized (rank and frontiers); a shard's are not.
pub fn run(
    plan: &Plan,
    inputs: &Inputs<'_>,
    shard: Shard,
    threads: usize,
    done: &(dyn Fn() + Sync),
) -> Vec<SweepRow> {
    let sweep = fingerprint(plan, inputs);
    let total = plan.candidates.len() as u64;
    let chosen: Vec<(u64, &Candidate)> = plan
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u64, c))
        .filter(|(i, _)| shard.contains(*i))
        .collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .expect("a thread pool of a positive size builds");
    let mut rows: Vec<SweepRow> = pool.install(|| {
        chosen
            .par_iter()
            .map(|&(index, candidate)| {
                let row = evaluate(candidate, index, total, &sweep, inputs);
                done();
                row
            })
            .collect()
    });
    if shard.count == 1 {
        frontier::finalize(&mut rows);
    }
    rows
}

/// Why shard files cannot be joined.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("{source_name} is from sweep {found}, {first} is from sweep {expected}")]
    OtherSweep {
        source_name: String,
        found: String,
        first: String,
        expected: String,
    },
    #[error("{source_name} says the sweep has {found} candidates, {first} says {expected}")]
    Count {
        source_name: String,
        found: u64,
        first: String,
        expected: u64,
    },
    #[error("candidate {candidate} appears in both {first} and {second}")]
    Duplicate {
        candidate: u64,
        first: String,
        second: String,
    },
    #[error("{source_name}: candidate {candidate} is outside the sweep's {candidates} candidates")]
    OutOfRange {
        source_name: String,
        candidate: u64,
        candidates: u64,
    },
    #[error("the files hold {found} of the sweep's {candidates} candidates; missing {missing}")]
    Missing {
        found: u64,
        candidates: u64,
        missing: String,
    },
    #[error("no shard files given")]
    Nothing,
}

/// Joins the rows of shard files (each named for errors) into the finalized rows of the whole
/// sweep, in candidate order.
pub fn merge(files: Vec<(String, Vec<SweepRow>)>) -> Result<Vec<SweepRow>, MergeError> {
    let (first_name, sweep, candidates) = match files.iter().find_map(|(name, rows)| {
        rows.first()
            .map(|r| (name.clone(), r.sweep.clone(), r.candidates))
    }) {
        Some(first) => first,
        None => return Err(MergeError::Nothing),
    };
    let mut slots: BTreeMap<u64, (&SweepRow, usize)> = BTreeMap::new();
    for (file, (name, rows)) in files.iter().enumerate() {
        for row in rows {
            if row.sweep != sweep {
                return Err(MergeError::OtherSweep {
                    source_name: name.clone(),
                    found: row.sweep.clone(),
                    first: first_name.clone(),
                    expected: sweep.clone(),
                });
            }
            if row.candidates != candidates {
                return Err(MergeError::Count {
                    source_name: name.clone(),
                    found: row.candidates,
                    first: first_name.clone(),
                    expected: candidates,
                });
            }
            if row.candidate >= candidates {
                return Err(MergeError::OutOfRange {
                    source_name: name.clone(),
                    candidate: row.candidate,
                    candidates,
                });
            }
            if let Some((_, other)) = slots.insert(row.candidate, (row, file)) {
                return Err(MergeError::Duplicate {
                    candidate: row.candidate,
                    first: files[other].0.clone(),
                    second: name.clone(),
                });
            }
        }
    }
    if slots.len() as u64 != candidates {
        // The first gaps in 0..candidates, without walking a huge range.
        let mut missing = Vec::new();
        let mut next = 0;
        for &present in slots.keys().chain(std::iter::once(&candidates)) {
            while next < present && missing.len() <= 10 {
                missing.push(next);
                next += 1;
            }
            next = present + 1;
            if missing.len() > 10 {
                break;
            }
        }
        let mut list: Vec<String> = missing.iter().take(10).map(u64::to_string).collect();
        if missing.len() > 10 {
            list.push("…".to_owned());
        }
        return Err(MergeError::Missing {
            found: slots.len() as u64,
            candidates,
            missing: list.join(", "),
        });
    }
    let mut rows: Vec<SweepRow> = slots.into_values().map(|(row, _)| row.clone()).collect();
    frontier::finalize(&mut rows);
    Ok(rows)
}

#[cfg(test)]
mod tests;
