//! Tests of the report: counts, exit codes, and the three renderings.

use std::time::Duration;

use expect_test::expect;

use super::*;
use crate::catalog::find;

pub(crate) fn sample_report() -> Report {
    let result = |id: &str, outcome: Outcome| CheckResult {
        invariant: find(id).expect("catalog id"),
        outcome,
        duration: Duration::from_millis(1500),
    };
    Report {
        seed: 42,
        target: TargetSummary {
            attention_url: Some("http://127.0.0.1:18305".to_owned()),
            ffn_url: Some("http://127.0.0.1:18305".to_owned()),
            deployment: Some("recipe seed.sh".to_owned()),
            rules: "latest".to_owned(),
        },
        results: vec![
            result(
                "afd.port-range",
                Outcome::pass("holds").with_warning("a <warning> & more"),
            ),
            result(
                "api.usage-arithmetic",
                Outcome::fail("usage.total_tokens 9 != 3 + 5")
                    .with_counterexample("POST /v1/completions\n\"quoted\" <xml>"),
            ),
            result("routing.spread", Outcome::skipped("Attention DP 1")),
            result(
                "routing.request-conservation",
                Outcome::indeterminate("a request timed out"),
            ),
        ],
        duration: Duration::from_secs(3),
        started_unix_s: 1_700_000_000,
        rerun: "afd-conformance run --recipe seed.sh --seed 42".to_owned(),
        aborted: None,
    }
}

#[test]
fn counts_and_exit_codes() {
    let mut report = sample_report();
    let counts = report.counts();
    assert_eq!(
        (
            counts.pass,
            counts.fail,
            counts.indeterminate,
            counts.skipped
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(report.exit_code(), 1);
    assert_eq!(report.failed_ids(), ["api.usage-arithmetic"]);
    report.results.retain(|r| r.outcome.status != Status::Fail);
    assert_eq!(
        report.exit_code(),
        0,
        "indeterminate and skipped do not fail a run"
    );
    report.aborted = Some("unreachable".to_owned());
    assert_eq!(report.exit_code(), 2);
}

#[test]
fn from_failures_keeps_the_first_as_counterexample() {
    assert_eq!(Outcome::from_failures("3 ok", &[]).status, Status::Pass);
    let outcome = Outcome::from_failures("", &["first\ndetail".to_owned(), "second".to_owned()]);
    assert_eq!(outcome.status, Status::Fail);
    assert_eq!(outcome.message, "first (and 1 more)");
    assert_eq!(outcome.counterexample.as_deref(), Some("first\ndetail"));
}

#[test]
fn sort_follows_the_catalog() {
    let mut report = sample_report();
    report.results.reverse();
    report.sort();
    let ids: Vec<&str> = report.results.iter().map(|r| r.invariant.id).collect();
    assert_eq!(
        ids,
        [
            "afd.port-range",
            "api.usage-arithmetic",
            "routing.request-conservation",
            "routing.spread"
        ]
    );
}

#[test]
fn junit_escapes_and_counts() {
    let xml = junit::render(&sample_report());
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"afd-conformance\" tests=\"4\" failures=\"1\" errors=\"0\" skipped=\"2\""));
    assert!(xml.contains("&lt;xml&gt;"));
    assert!(xml.contains("&quot;quoted&quot;"));
    assert!(!xml.contains("<warning>"));
    assert_eq!(junit::escape("a\u{1}b\nc"), "a\u{FFFD}b&#10;c");
    assert_eq!(junit::escape_text("a\nb<"), "a\nb&lt;");
}

#[test]
fn json_names_every_result() {
    let json = json::render(&sample_report());
    assert_eq!(json["schema_version"], SCHEMA_VERSION);
    assert_eq!(json["seed"], 42);
    assert_eq!(json["exit_code"], 1);
    assert_eq!(json["counts"]["fail"], 1);
    assert_eq!(json["failed"][0], "api.usage-arithmetic");
    let first = &json["results"][1];
    expect![[r#"{"area":"api","counterexample":"POST /v1/completions\n\"quoted\" <xml>","duration_s":1.5,"id":"api.usage-arithmetic","kind":"live","message":"usage.total_tokens 9 != 3 + 5","source":"afd-spec §7.4 R2","statement":"usage.total_tokens = prompt_tokens + completion_tokens with completion_tokens > 0, in every response and usage chunk","status":"fail","warnings":[]}"#]]
        .assert_eq(&first.to_string());
}

#[test]
fn human_summary_lists_failures_with_counterexamples() {
    let text = human::render(&sample_report(), false);
    expect![[r#"
        afd-conformance: attention http://127.0.0.1:18305 · ffn http://127.0.0.1:18305 · deployment recipe seed.sh · rules latest · seed 42

        deployment: 1 passed, 0 failed, 0 indeterminate, 0 skipped
          WARN  afd.port-range                         holds
                warning: a <warning> & more

        api: 0 passed, 1 failed, 0 indeterminate, 0 skipped
          FAIL  api.usage-arithmetic                   usage.total_tokens 9 != 3 + 5

        routing: 0 passed, 0 failed, 1 indeterminate, 1 skipped
          INDET routing.request-conservation           a request timed out

        failures:

        --- api.usage-arithmetic (live; afd-spec §7.4 R2)
            usage.total_tokens = prompt_tokens + completion_tokens with completion_tokens > 0, in every response and usage chunk
            usage.total_tokens 9 != 3 + 5
            | POST /v1/completions
            | "quoted" <xml>

        result: FAILED. 1 passed; 1 failed; 1 indeterminate; 1 skipped; 4 invariants in 3.0 s (seed 42)
        rerun the failures: afd-conformance run --recipe seed.sh --seed 42 --only api.usage-arithmetic
    "#]]
    .assert_eq(&text);
}
