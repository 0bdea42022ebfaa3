//! The suite run end to end against the fake server of `fake.rs`: a well-behaved server passes, each
//! misbehaviour fails the invariant that names it, nothing hangs the run, and an unreachable pair is
//! exit code 2.

use std::time::Duration;

use afd_conformance::checks::Settings;
use afd_conformance::report::{Report, Status};
use afd_conformance::run::{RunOptions, run};
use afd_conformance::target::TargetOptions;
use tokio::net::TcpListener;

use crate::fake::{self, Misbehaviour};
use crate::junit_schema;
use crate::suite::failures;

fn options(attention: &str, ffn: Option<String>, seed: u64, only: &[&str]) -> RunOptions {
    RunOptions {
        target: TargetOptions {
            attention_url: Some(attention.to_owned()),
            ffn_url: ffn,
            attention_dp: Some(2),
            ..TargetOptions::default()
        },
        settings: Settings {
            request_timeout: Duration::from_secs(1),
            probe_timeout: Duration::from_secs(1),
            ffn_deadline: Duration::from_millis(500),
            settle_timeout: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(2),
            requests: 12,
            load_rate: f64::INFINITY,
            concurrency: 6,
            max_tokens: 8,
            breaker_timeouts: 3,
            max_itl_ms: None,
            max_ttft_ms: None,
            max_sim_deviation: None,
            greedy_prefix: 0.5,
            chat_template: None,
        },
        seed,
        cases: 3,
        max_steps: 6,
        time_budget: Duration::from_secs(60),
        ready_timeout: Duration::from_secs(5),
        only: only.iter().map(|s| (*s).to_owned()).collect(),
        rerun: format!("afd-conformance run --seed {seed}"),
    }
}

async fn closed_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    drop(listener);
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_well_behaved_server_passes_over_two_seeds() {
    let server = fake::start(2, Misbehaviour::None).await;
    for seed in [1, 2] {
        let mut options = options(
            &server.url,
            Some(closed_port().await),
            seed,
            &["live", "stateful"],
        );
        options.settings.max_sim_deviation = Some(0.25);
        let report = run(options, &|_| {}).await.expect("the run starts");
        assert_eq!(report.exit_code(), 0, "seed {seed}:\n{}", failures(&report));
        // Not a twin: nothing tells the suite how its tokens are timed.
        let simulator = report.result("timing.simulator").expect("selected");
        assert_eq!(simulator.outcome.status, Status::Indeterminate);
        assert!(
            simulator
                .outcome
                .message
                .starts_with("the pair is not an afd-twin"),
            "{}",
            simulator.outcome.message
        );
        for id in [
            "api.one-response",
            "routing.pinning",
            "routing.spread",
            "routing.request-conservation",
            "routing.token-conservation",
            "sse.single-done",
            "stateful.conservation",
            "stateful.pinning",
            "ffn.never-completes",
            "ffn.fails-fast",
            "greedy.fixed-load",
        ] {
            let result = report.result(id).expect("selected");
            assert_eq!(
                result.outcome.status,
                Status::Pass,
                "seed {seed} {id}: {}",
                result.outcome.message
            );
        }
        let summary = junit_schema::validate(&afd_conformance::report::junit::render(&report))
            .expect("valid JUnit");
        assert_eq!(summary.tests, report.results.len());
        assert_eq!(summary.failures, 0);
    }
}

async fn caught(misbehaviour: Misbehaviour, expected: &[&str]) -> Report {
    let server = fake::start(2, misbehaviour).await;
    let only = ["api", "sse", "routing", "liveness", "stateful"];
    let report = run(options(&server.url, None, 5, &only), &|_| {})
        .await
        .expect("the run starts");
    let failed = report.failed_ids();
    for id in expected {
        assert!(
            failed.contains(id),
            "{misbehaviour:?} should fail {id}; failed: {failed:?}\n{}",
            failures(&report)
        );
    }
    assert_eq!(report.exit_code(), 1);
    let junit = afd_conformance::report::junit::render(&report);
    let summary = junit_schema::validate(&junit).expect("valid JUnit");
    for id in expected {
        assert_eq!(
            summary.cases.get(*id).map(String::as_str),
            Some("failure"),
            "{id}"
        );
    }
    report
}

#[tokio::test]
async fn garbage_responses_are_caught() {
    caught(Misbehaviour::Garbage, &["api.one-response"]).await;
}

#[tokio::test]
async fn resets_are_caught() {
    caught(Misbehaviour::Reset, &["api.one-response"]).await;
}

#[tokio::test]
async fn a_slow_drip_is_a_liveness_failure() {
    caught(Misbehaviour::SlowDrip, &["liveness.completes"]).await;
}

#[tokio::test]
async fn double_counting_breaks_conservation() {
    let report = caught(
        Misbehaviour::DoubleCount,
        &["routing.request-conservation", "stateful.conservation"],
    )
    .await;
    // Any request breaks it, so proptest shrinks the sequence to a single step.
    let stateful = report.result("stateful.conservation").expect("selected");
    let counterexample = stateful.outcome.counterexample.as_deref().unwrap_or("");
    assert!(
        counterexample.contains("minimal sequence of 1 step(s)"),
        "{counterexample}"
    );
    assert!(
        counterexample.starts_with("seed 5 case "),
        "{counterexample}"
    );
}

#[tokio::test]
async fn a_stream_without_done_is_caught() {
    caught(Misbehaviour::NoDone, &["sse.single-done"]).await;
}

#[tokio::test]
async fn wrong_usage_is_caught() {
    caught(
        Misbehaviour::WrongUsage,
        &["api.usage-arithmetic", "stateful.responses"],
    )
    .await;
}

#[tokio::test]
async fn garbage_metrics_fail_the_labels_and_leave_conservation_undecided() {
    let server = fake::start(2, Misbehaviour::GarbageMetrics).await;
    let report = run(
        options(
            &server.url,
            None,
            4,
            &["mapping.engine-labels", "routing", "stateful"],
        ),
        &|_| {},
    )
    .await
    .expect("the run starts");
    assert_eq!(
        report.failed_ids(),
        ["mapping.engine-labels"],
        "{}",
        failures(&report)
    );
    let labels = report.result("mapping.engine-labels").expect("selected");
    assert!(
        labels.outcome.message.contains("/metrics line 1"),
        "{}",
        labels.outcome.message
    );
    for id in [
        "routing.request-conservation",
        "routing.drain",
        "stateful.conservation",
    ] {
        let result = report.result(id).expect("selected");
        assert_eq!(
            result.outcome.status,
            Status::Indeterminate,
            "{id}: {:?}",
            result.outcome
        );
    }
}

#[tokio::test]
async fn an_unreachable_pair_cannot_run() {
    let mut options = options(&closed_port().await, None, 9, &[]);
    options.ready_timeout = Duration::from_millis(300);
    let report = run(options, &|_| {}).await.expect("the run starts");
    assert_eq!(report.exit_code(), 2);
    assert!(
        report
            .aborted
            .as_deref()
            .is_some_and(|a| a.contains("did not become ready")),
        "{:?}",
        report.aborted
    );
    let live = report.result("api.health").expect("selected");
    assert_eq!(live.outcome.status, Status::Indeterminate);
    // The static phase still judged the deployment rules: skipped for want of a deployment, not "not run".
    let rule = report.result("afd.port-range").expect("selected");
    assert_eq!(rule.outcome.status, Status::Skipped, "{:?}", rule.outcome);
    assert!(
        rule.outcome.message.starts_with("no deployment given"),
        "static invariants still run: {:?}",
        rule.outcome
    );
}

#[tokio::test]
async fn an_ffn_that_hangs_or_serves_fails() {
    let attention = fake::start(1, Misbehaviour::None).await;
    // A listener that accepts and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let silent_url = format!("http://{}", silent.local_addr().expect("addr"));
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let report = run(
        options(&attention.url, Some(silent_url), 3, &["ffn"]),
        &|_| {},
    )
    .await
    .expect("starts");
    assert_eq!(
        report.failed_ids(),
        ["ffn.fails-fast"],
        "{}",
        failures(&report)
    );
    // An "FFN" that completes requests.
    let serving = fake::start(1, Misbehaviour::None).await;
    let report = run(
        options(&attention.url, Some(serving.url.clone()), 3, &["ffn"]),
        &|_| {},
    )
    .await
    .expect("starts");
    assert_eq!(
        report.failed_ids(),
        ["ffn.never-completes"],
        "{}",
        failures(&report)
    );
}

#[tokio::test]
async fn bad_input_is_an_error_not_a_report() {
    let err = run(options("ftp://x", None, 1, &[]), &|_| {})
        .await
        .expect_err("bad URL");
    assert_eq!(
        err.to_string(),
        "invalid URL 'ftp://x': expected http://HOST:PORT"
    );
    let err = run(options("http://127.0.0.1:1", None, 1, &["nope"]), &|_| {})
        .await
        .expect_err("bad --only");
    assert!(
        err.to_string()
            .starts_with("--only 'nope' names no invariant"),
        "{err}"
    );
}

/// A server that answers `/v1/models`, `/health` and `/metrics` but never a POST, under request
/// timeouts longer than the budget: the run ends within the budget plus its grace, liveness fails
/// (the server stopped answering), and what was not reached is indeterminate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_a_post_is_judged_within_the_budget() {
    let server = fake::start(2, Misbehaviour::SilentPost).await;
    let mut options = options(&server.url, None, 3, &[]);
    options.settings.request_timeout = Duration::from_secs(120);
    options.settings.probe_timeout = Duration::from_secs(10);
    options.ready_timeout = Duration::from_secs(60);
    options.time_budget = Duration::from_secs(6);
    let started = std::time::Instant::now();
    let report = run(options, &|_| {}).await.expect("the run starts");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(6) + afd_conformance::run::BUDGET_GRACE + Duration::from_secs(1),
        "the run took {took:?} on a 6 s budget"
    );
    let liveness = report.result("liveness.completes").expect("reported");
    assert_eq!(
        liveness.outcome.status,
        Status::Fail,
        "{}",
        liveness.outcome.message
    );
    assert_eq!(report.exit_code(), 1);
    assert!(
        report
            .results
            .iter()
            .any(|r| r.outcome.status == Status::Indeterminate),
        "phases the budget cut are indeterminate"
    );
}

/// The binary under the same server: `--time-budget` holds for the process, readiness included, and
/// the JSON and JUnit reports are written although the budget cut the run short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_writes_its_reports_when_the_budget_cuts_the_run() {
    let server = fake::start(1, Misbehaviour::SilentPost).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let json = dir.path().join("report.json");
    let junit = dir.path().join("report.xml");
    let started = std::time::Instant::now();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_afd-conformance"));
    command.args([
        "run",
        "--attention-url",
        &server.url,
        "--attention-dp",
        "1",
        "--time-budget",
        "5s",
        "--ready-timeout",
        "60s",
        "--seed",
        "1",
        "--json",
        json.to_str().expect("utf-8"),
        "--junit",
        junit.to_str().expect("utf-8"),
    ]);
    command.kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the binary ends")
        .expect("the binary runs");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(9),
        "took {took:?} on a 5 s budget"
    );
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON report"))
            .expect("JSON");
    assert!(report.is_object());
    junit_schema::validate(&std::fs::read_to_string(&junit).expect("the JUnit report"))
        .expect("valid JUnit");
}
