//! The JSON report (`--json FILE`): the run's seed, target, counts and one object per invariant with its
//! catalog entry and outcome. Field names are stable; [`crate::report::SCHEMA_VERSION`] changes when they
//! do.
//!
//! Built as a `serde_json::Value` by hand (only `afd-traces` types derive serde, ARCHITECTURE.md).

use serde_json::{Value, json};

use crate::report::{Report, SCHEMA_VERSION};

/// The report as JSON.
pub fn render(report: &Report) -> Value {
    let counts = report.counts();
    let results: Vec<Value> = report
        .results
        .iter()
        .map(|result| {
            let invariant = &result.invariant;
            let outcome = &result.outcome;
            json!({
                "id": invariant.id,
                "kind": invariant.kind.as_str(),
                "area": invariant.area.as_str(),
                "source": invariant.source,
                "statement": invariant.statement,
                "status": outcome.status.as_str(),
                "message": outcome.message,
                "counterexample": outcome.counterexample,
                "warnings": outcome.warnings,
                "duration_s": result.duration.as_secs_f64(),
            })
        })
        .collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "tool": concat!("afd-conformance ", env!("CARGO_PKG_VERSION")),
        "seed": report.seed,
        "started_unix_s": report.started_unix_s,
        "duration_s": report.duration.as_secs_f64(),
        "exit_code": report.exit_code(),
        "aborted": report.aborted,
        "rerun": report.rerun,
        "target": {
            "attention_url": report.target.attention_url,
            "ffn_url": report.target.ffn_url,
            "deployment": report.target.deployment,
            "rules": report.target.rules,
        },
        "counts": {
            "total": counts.total(),
            "pass": counts.pass,
            "fail": counts.fail,
            "indeterminate": counts.indeterminate,
            "skipped": counts.skipped,
        },
        "failed": report.failed_ids(),
        "results": results,
    })
}
