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
//!
//! Reuse of identical runs: candidates whose configurations are equal once the scheduler limits
//! (`--max-num-seqs`, `--max-num-batched-tokens`) are erased form a group, evaluated in candidate
//! order by one task. A member whose limits (and KV capacity) lie inside the limit spans of an
//! earlier simulated member's run (`model/limits.rs`) would run identically, event for event, so
//! it takes that member's simulated columns instead of running ([`evaluate::reuse`]). The rows are
//! the same bytes with reuse on or off, on any thread count and in any shard.

pub mod candidate;
pub mod capacity;
pub mod evaluate;
pub mod frontier;
pub mod space;

use std::collections::BTreeMap;

use afd_traces::sweep::SweepRow;
use rayon::prelude::*;
use xxhash_rust::xxh3::Xxh3;

use crate::cluster::StepMemo;
use crate::model::limits::LimitSpans;
use crate::planner::candidate::{Candidate, Context, judge};
use crate::planner::evaluate::{Inputs, limit_values, reuse, simulate};
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
            // A cross-node AFD candidate runs once per NIC count of the `nics` dimension.
            Ok(candidate)
                if candidate.cross_node
                    && candidate.config.placement == crate::serving::Placement::Disaggregated
                    && !dimensions.nics.is_empty() =>
            {
                for &nics in &dimensions.nics {
                    plan.candidates.push(Candidate {
                        nics: Some(nics),
                        ..candidate.clone()
                    });
                }
            }
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
        // Only when set, so that sweeps without the dimension keep their fingerprints.
        if let Some(nics) = candidate.nics {
            add(&format!("nics={nics}"));
        }
    }
    add(&format!("{:?}", inputs.model));
    add(&format!("{:?}", inputs.calibration));
    add(&format!("{:?}", inputs.workload));
    add(inputs.dataset);
    add(&format!("{:?}", inputs.options));
    add(&format!("{:?}", inputs.slo));
    // Only when given, so that sweeps without one keep their fingerprints.
    if let Some(between) = &inputs.cross_node_link {
        add(&format!("{between:?}"));
    }
    if let Some(search) = &inputs.capacity {
        add(&format!("capacity {search:?}"));
    }
    // Only when priced as real vLLM, so that kernel-model sweeps keep their fingerprints.
    if let Some(engine) = &inputs.engine {
        add(&format!("engine {:?}", engine.profile()));
    }
    format!("{:016x}", hash.digest())
}

/// Simulates the candidates of `plan` in `shard` on `threads` threads (at least one) and returns
/// their rows in candidate order; `done` is called once per finished candidate, from any thread.
/// With [`Shard::WHOLE`] the rows are finalized (rank and frontiers); a shard's are not. Identical
/// runs are reused ([`run_counted`] says how many, and can turn reuse off).
pub fn run(
    plan: &Plan,
    inputs: &Inputs<'_>,
    shard: Shard,
    threads: usize,
    done: &(dyn Fn() + Sync),
) -> Vec<SweepRow> {
    run_counted(plan, inputs, shard, threads, true, done).rows
}

/// The rows of a sweep run and how they were obtained.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRun {
    pub rows: Vec<SweepRow>,
    /// Candidates whose simulation ran.
    pub simulated: u64,
    /// Candidates that took the rows of an identical run instead.
    pub reused: u64,
}

/// [`run`], with reuse of identical runs on or off (the rows are the same bytes either way).
pub fn run_counted(
    plan: &Plan,
    inputs: &Inputs<'_>,
    shard: Shard,
    threads: usize,
    reuse_runs: bool,
    done: &(dyn Fn() + Sync),
) -> SweepRun {
    let sweep = fingerprint(plan, inputs);
    let total = plan.candidates.len() as u64;
    let chosen: Vec<u64> = (0..total).filter(|&i| shard.contains(i)).collect();
    let groups = if reuse_runs {
        reuse_groups(plan, &chosen)
    } else {
        chosen.iter().map(|&i| vec![i]).collect()
    };
    // One task per pipeline (the layouts of both roles, and the NICs its hand-offs share, which
    // price its steps): its groups run one after another and hand the step memo on, so a step
    // shared by several candidates is priced once. Largest first, so the last tasks are short.
    let mut pipelines = group_in_order(groups, |group| {
        let candidate = &plan.candidates[group[0] as usize];
        let config = &candidate.config;
        format!(
            "{:?} {:?} {:?} {:?}",
            config.placement, config.attention, config.ffn, candidate.nics
        )
    });
    pipelines.sort_by_key(|groups| std::cmp::Reverse(groups.iter().map(Vec::len).sum::<usize>()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .expect("a thread pool of a positive size builds");
    let evaluated: Vec<(SweepRow, bool)> = pool.install(|| {
        pipelines
            .par_iter()
            .flat_map_iter(|groups| {
                let mut memo: Option<StepMemo> = None;
                groups
                    .iter()
                    .flat_map(|group| {
                        evaluate_group(plan, inputs, group, total, &sweep, &mut memo, done)
                    })
                    .collect::<Vec<_>>()
            })
            .collect()
    });
    let mut flat = evaluated;
    flat.sort_by_key(|(row, _)| row.candidate);
    let reused = flat.iter().filter(|(_, reused)| *reused).count() as u64;
    let mut rows: Vec<SweepRow> = flat.into_iter().map(|(row, _)| row).collect();
    if shard.count == 1 {
        frontier::finalize(&mut rows);
    }
    SweepRun {
        simulated: rows.len() as u64 - reused,
        reused,
        rows,
    }
}

/// Evaluates one reuse group in candidate order: a member whose limits lie inside the spans of
/// an earlier simulated member takes that run's results; the others are simulated, carrying
/// `memo` from run to run.
fn evaluate_group(
    plan: &Plan,
    inputs: &Inputs<'_>,
    group: &[u64],
    total: u64,
    sweep: &str,
    memo: &mut Option<StepMemo>,
    done: &(dyn Fn() + Sync),
) -> Vec<(SweepRow, bool)> {
    // Simulated members so far: their spans and rows, in candidate order.
    let mut runs: Vec<(LimitSpans, usize)> = Vec::new();
    let mut rows: Vec<(SweepRow, bool)> = Vec::with_capacity(group.len());
    for &index in group {
        let candidate = &plan.candidates[index as usize];
        let values = limit_values(candidate, inputs);
        let source = runs.iter().find(|(spans, _)| spans.contains(values));
        let row = match source {
            Some(&(_, at)) => (
                reuse(candidate, index, total, sweep, inputs, &rows[at].0),
                true,
            ),
            None => {
                let evaluated = simulate(candidate, index, total, sweep, inputs, memo);
                if let Some(spans) = evaluated.spans {
                    runs.push((spans, rows.len()));
                }
                (evaluated.row, false)
            }
        };
        rows.push(row);
        done();
    }
    rows
}

/// The candidates `chosen` (in order) grouped by their configuration with the scheduler limits
/// erased: only members of one group can run identically. Groups come in order of their first
/// member, members in candidate order.
pub fn reuse_groups(plan: &Plan, chosen: &[u64]) -> Vec<Vec<u64>> {
    group_in_order(chosen.iter().copied(), |&index| {
        let candidate = &plan.candidates[index as usize];
        let config = &candidate.config;
        // Everything but the two limits decides the run (the KV capacity follows from the rest
        // and is checked against the spans with them). `ServingConfig` holds an f64, so its
        // Debug text is the key.
        let erased = crate::serving::ServingConfig {
            max_num_seqs: 0,
            max_num_batched_tokens: 0,
            ..config.clone()
        };
        format!("{erased:?} nics={:?}", candidate.nics)
    })
}

/// `items` grouped by `key`: groups in order of their first member, members in their order.
fn group_in_order<T, K: Ord>(
    items: impl IntoIterator<Item = T>,
    key: impl Fn(&T) -> K,
) -> Vec<Vec<T>> {
    let mut groups: Vec<Vec<T>> = Vec::new();
    let mut by_key: BTreeMap<K, usize> = BTreeMap::new();
    for item in items {
        let at = *by_key.entry(key(&item)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[at].push(item);
    }
    groups
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
