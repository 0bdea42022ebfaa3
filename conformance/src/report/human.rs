//! The summary `afd-conformance run` prints on stdout, test-runner style: one line per invariant grouped by
//! area, then every failure with its counterexample, then the totals, the seed and the command that
//! reruns the failures.
//!
//! Returns text; the binary prints it.

use std::fmt::Write as _;

use crate::catalog::Area;
use crate::report::{Report, Status};

/// Renders the summary. `verbose` also lists passes and skips one per line (otherwise only counts).
pub fn render(report: &Report, verbose: bool) -> String {
    let mut out = String::new();
    let target = &report.target;
    let _ = writeln!(
        out,
        "afd-conformance: attention {} · ffn {} · deployment {} · rules {} · seed {}",
        target.attention_url.as_deref().unwrap_or("-"),
        target.ffn_url.as_deref().unwrap_or("-"),
        target.deployment.as_deref().unwrap_or("-"),
        target.rules,
        report.seed
    );
    let mut areas: Vec<Area> = report.results.iter().map(|r| r.invariant.area).collect();
    areas.sort();
    areas.dedup();
    for area in areas {
        let results: Vec<_> = report
            .results
            .iter()
            .filter(|r| r.invariant.area == area)
            .collect();
        let count = |status: Status| {
            results
                .iter()
                .filter(|r| r.outcome.status == status)
                .count()
        };
        let _ = writeln!(
            out,
            "\n{area}: {} passed, {} failed, {} indeterminate, {} skipped",
            count(Status::Pass),
            count(Status::Fail),
            count(Status::Indeterminate),
            count(Status::Skipped)
        );
        for result in results {
            let status = result.outcome.status;
            let shown = verbose || matches!(status, Status::Fail | Status::Indeterminate);
            let warned = !result.outcome.warnings.is_empty();
            if !shown && !warned {
                continue;
            }
            let label = match status {
                Status::Pass if warned => "WARN",
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Indeterminate => "INDET",
                Status::Skipped => "SKIP",
            };
            let _ = writeln!(
                out,
                "  {label:<5} {:<38} {}",
                result.invariant.id, result.outcome.message
            );
            for warning in &result.outcome.warnings {
                let _ = writeln!(out, "        warning: {warning}");
            }
        }
    }
    let failures: Vec<_> = report
        .results
        .iter()
        .filter(|r| r.outcome.status == Status::Fail)
        .collect();
    if !failures.is_empty() {
        out.push_str("\nfailures:\n");
        for result in &failures {
            let _ = writeln!(
                out,
                "\n--- {} ({}; {})\n    {}\n    {}",
                result.invariant.id,
                result.invariant.kind,
                result.invariant.source,
                result.invariant.statement,
                result.outcome.message
            );
            if let Some(counterexample) = &result.outcome.counterexample {
                for line in counterexample.lines() {
                    let _ = writeln!(out, "    | {line}");
                }
            }
        }
    }
    let counts = report.counts();
    let verdict = match report.exit_code() {
        0 => "ok",
        1 => "FAILED",
        _ => "COULD NOT RUN",
    };
    if let Some(reason) = &report.aborted {
        let _ = writeln!(out, "\nthe run could not proceed: {reason}");
    }
    let _ = writeln!(
        out,
        "\nresult: {verdict}. {} passed; {} failed; {} indeterminate; {} skipped; {} invariants in {:.1} s (seed {})",
        counts.pass,
        counts.fail,
        counts.indeterminate,
        counts.skipped,
        counts.total(),
        report.duration.as_secs_f64(),
        report.seed
    );
    if !failures.is_empty() {
        let ids: Vec<&str> = failures.iter().map(|r| r.invariant.id).collect();
        let _ = writeln!(
            out,
            "rerun the failures: {} --only {}",
            report.rerun,
            ids.join(",")
        );
    }
    out
}
