//! The result of one run: an outcome per invariant (pass, fail with a counterexample, indeterminate,
//! skipped), the run's seed and target, and the exit code they imply.
//!
//! Rendering lives in the submodules: [`human`] (the summary on stdout), [`json`] and [`junit`] (the
//! files CI reads). Nothing here runs a check.

use std::time::Duration;

use crate::catalog::{self, Invariant};

pub mod human;
pub mod json;
pub mod junit;

/// Version of the JSON report format; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// How an invariant fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    Pass,
    Fail,
    /// The run could not tell (a timeout, an unreachable peer): neither pass nor fail.
    Indeterminate,
    /// Not applicable to this target or not asked for.
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Indeterminate => "indeterminate",
            Status::Skipped => "skipped",
        }
    }
}

/// The verdict on one invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub status: Status,
    /// One line: what was seen (for a pass, what was checked).
    pub message: String,
    /// For a failure: the smallest input that shows it (a request, a sequence, a log line).
    pub counterexample: Option<String>,
    /// Warnings that do not fail the invariant (a deployment rule of severity warning).
    pub warnings: Vec<String>,
}

impl Outcome {
    pub fn pass(message: impl Into<String>) -> Outcome {
        Outcome::new(Status::Pass, message)
    }

    pub fn fail(message: impl Into<String>) -> Outcome {
        Outcome::new(Status::Fail, message)
    }

    pub fn indeterminate(message: impl Into<String>) -> Outcome {
        Outcome::new(Status::Indeterminate, message)
    }

    pub fn skipped(message: impl Into<String>) -> Outcome {
        Outcome::new(Status::Skipped, message)
    }

    fn new(status: Status, message: impl Into<String>) -> Outcome {
        Outcome {
            status,
            message: message.into(),
            counterexample: None,
            warnings: Vec::new(),
        }
    }

    pub fn with_counterexample(mut self, counterexample: impl Into<String>) -> Outcome {
        self.counterexample = Some(counterexample.into());
        self
    }

    pub fn with_warning(mut self, warning: impl Into<String>) -> Outcome {
        self.warnings.push(warning.into());
        self
    }

    /// Pass when `failures` is empty, else a failure whose counterexample is the first one.
    pub fn from_failures(checked: impl Into<String>, failures: &[String]) -> Outcome {
        match failures.first() {
            None => Outcome::pass(checked),
            Some(first) => {
                let more = match failures.len() {
                    1 => String::new(),
                    n => format!(" (and {} more)", n - 1),
                };
                Outcome::fail(format!("{}{more}", first_line(first)))
                    .with_counterexample(first.clone())
            }
        }
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

/// One invariant's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckResult {
    pub invariant: Invariant,
    pub outcome: Outcome,
    /// Time spent on the phase that judged it, shared among the invariants judged together.
    pub duration: Duration,
}

/// What was tested, for the report header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetSummary {
    pub attention_url: Option<String>,
    pub ffn_url: Option<String>,
    /// Where the deployment came from (`recipe PATH`, `flags`) and its rule set.
    pub deployment: Option<String>,
    pub rules: String,
}

/// A whole run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub seed: u64,
    pub target: TargetSummary,
    /// In catalog order.
    pub results: Vec<CheckResult>,
    pub duration: Duration,
    /// Unix seconds at the start of the run.
    pub started_unix_s: u64,
    /// The command line that reproduces the run (seed included).
    pub rerun: String,
    /// Set when the run could not proceed (the pair never became ready): exit code 2.
    pub aborted: Option<String>,
}

/// Counts per status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub indeterminate: usize,
    pub skipped: usize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.pass + self.fail + self.indeterminate + self.skipped
    }
}

impl Report {
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for result in &self.results {
            match result.outcome.status {
                Status::Pass => counts.pass += 1,
                Status::Fail => counts.fail += 1,
                Status::Indeterminate => counts.indeterminate += 1,
                Status::Skipped => counts.skipped += 1,
            }
        }
        counts
    }

    /// 2 when the run could not proceed, 1 when an invariant failed, else 0.
    pub fn exit_code(&self) -> i32 {
        if self.aborted.is_some() {
            2
        } else if self.counts().fail > 0 {
            1
        } else {
            0
        }
    }

    /// Ids of the failed invariants, in report order.
    pub fn failed_ids(&self) -> Vec<&'static str> {
        self.results
            .iter()
            .filter(|r| r.outcome.status == Status::Fail)
            .map(|r| r.invariant.id)
            .collect()
    }

    /// The result for one invariant.
    pub fn result(&self, id: &str) -> Option<&CheckResult> {
        self.results.iter().find(|r| r.invariant.id == id)
    }

    /// Orders results as the catalog does.
    pub fn sort(&mut self) {
        let order: Vec<&'static str> = catalog::catalog().iter().map(|i| i.id).collect();
        self.results.sort_by_key(|r| {
            order
                .iter()
                .position(|id| *id == r.invariant.id)
                .unwrap_or(usize::MAX)
        });
    }
}

#[cfg(test)]
mod tests;
