//! The conformance suite against twin pairs started with `afd-conformance up`'s library from the
//! foundation's recipe fixtures: a correct pair of the seed recipe passes the whole suite over several
//! seeds, and every fault switch of the twin fails the whole suite naming the invariant it breaks.
//!
//! Pairs run at `--time-scale 0` on free ports, so tests run side by side.

use std::path::PathBuf;
use std::time::Duration;

use afd_conformance::checks::Settings;
use afd_conformance::report::{Report, Status, json, junit};
use afd_conformance::run::{RunOptions, run};
use afd_conformance::up::{Pair, UpOptions};
use afd_sim::topology::RuleSet;

use crate::junit_schema;
use crate::twin_bin::twin_bin;

/// The seed recipe (2A2F, each role DP1 x TP2, both on HTTP port 18305).
pub(crate) const SEED: &str = "2a2f_graph_dbo_dp1tp2.sh";
/// The same pair with Attention DP 2 (routing and pinning have two engines to tell apart).
pub(crate) const DP2: &str = "2a2f_graph_dbo_dp2tp1.sh";
/// The FFN believes there are 4 Attention ranks: a pair that must refuse to start.
pub(crate) const MISMATCHED: &str = "broken/cross.rank-counts-match.sh";

/// The seed recipe with the FFN server on its own HTTP port (18306, as the plugin's e2e runner
/// places it), written next to the logs by [`start_with`].
pub(crate) const FFN_PORT: &str = "seed with a dedicated FFN port";

/// The path of recipe fixture `name` ([`FFN_PORT`] is written into `dir`).
pub(crate) fn recipe(name: &str, dir: &std::path::Path) -> PathBuf {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sim/tests/fixtures/recipes");
    if name != FFN_PORT {
        return fixtures.join(name);
    }
    let seed = std::fs::read_to_string(fixtures.join(SEED)).expect("the seed recipe is readable");
    let (attention, ffn) = seed
        .split_once("CUDA_VISIBLE_DEVICES=2,3")
        .expect("the seed starts the FFN on GPUs 2,3");
    let path = dir.join("recipe.sh");
    let text = format!(
        "{attention}CUDA_VISIBLE_DEVICES=2,3{}",
        ffn.replacen("--port 18305", "--port 18306", 1)
    );
    std::fs::write(&path, text).expect("the recipe is written");
    path
}

/// Starts a twin pair of `recipe_name` with faults per role; logs go to a temporary directory that
/// lives as long as the returned guard.
pub(crate) async fn start(
    recipe_name: &str,
    attention_faults: &[&str],
    ffn_faults: &[&str],
) -> (Pair, tempfile::TempDir) {
    start_with(recipe_name, attention_faults, ffn_faults, &[]).await
}

/// As [`start`], with extra `afd-twin` flags for both twins (a `--time-scale` among them replaces the
/// default 0).
pub(crate) async fn start_with(
    recipe_name: &str,
    attention_faults: &[&str],
    ffn_faults: &[&str],
    twin_flags: &[&str],
) -> (Pair, tempfile::TempDir) {
    let logs = tempfile::tempdir().expect("a temporary directory");
    let scaled = twin_flags.iter().any(|f| f.starts_with("--time-scale"));
    let defaults: &[&str] = if scaled {
        &["--rendezvous-timeout", "20"]
    } else {
        &["--time-scale", "0", "--rendezvous-timeout", "20"]
    };
    let options = UpOptions {
        recipe: recipe(recipe_name, logs.path()),
        twin_bin: twin_bin(),
        log_dir: logs.path().to_path_buf(),
        rules: RuleSet::Latest,
        twin_args: defaults
            .iter()
            .chain(twin_flags)
            .map(|s| (*s).to_owned())
            .collect(),
        attention_faults: attention_faults.iter().map(|f| (*f).to_owned()).collect(),
        ffn_faults: ffn_faults.iter().map(|f| (*f).to_owned()).collect(),
        free_ports: true,
        ready_timeout: Duration::from_secs(20),
        env: Default::default(),
    };
    let pair = Pair::start(&options).await.expect("the twin pair starts");
    (pair, logs)
}

/// Small budgets so the crate's tests stay bounded; the nightly defaults are larger.
pub(crate) fn options(pair: &Pair, seed: u64) -> RunOptions {
    RunOptions {
        target: pair.target_options(),
        settings: Settings {
            request_timeout: Duration::from_secs(3),
            probe_timeout: Duration::from_secs(1),
            ffn_deadline: Duration::from_secs(1),
            settle_timeout: Duration::from_secs(3),
            drain_timeout: Duration::from_secs(3),
            requests: 16,
            load_rate: f64::INFINITY,
            concurrency: 8,
            max_tokens: 8,
            breaker_timeouts: 3,
            max_itl_ms: None,
            max_ttft_ms: None,
            max_sim_deviation: None,
            greedy_prefix: 0.5,
            chat_template: None,
        },
        seed,
        cases: 4,
        max_steps: 6,
        time_budget: Duration::from_secs(60),
        ready_timeout: Duration::from_secs(10),
        only: Vec::new(),
        rerun: format!("afd-conformance run --seed {seed}"),
    }
}

/// Every failed invariant with its message and counterexample, for assertion messages.
pub(crate) fn failures(report: &Report) -> String {
    report
        .results
        .iter()
        .filter(|r| r.outcome.status == Status::Fail)
        .map(|r| {
            format!(
                "{}: {}\n    {}",
                r.invariant.id,
                r.outcome.message,
                r.outcome.counterexample.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seed_pair_passes_the_whole_suite_over_two_seeds() {
    let (pair, _logs) = start(SEED, &[], &[]).await;
    for seed in [11, 12] {
        let mut options = options(&pair, seed);
        options.settings.max_sim_deviation = Some(0.25);
        let report = run(options, &|_| {}).await.expect("the run starts");
        assert_eq!(report.exit_code(), 0, "seed {seed}:\n{}", failures(&report));
        let simulator = report.result("timing.simulator").expect("reported");
        assert_eq!(
            (simulator.outcome.status, simulator.outcome.message.as_str()),
            (
                Status::Indeterminate,
                "the twin runs at --time-scale 0 (steps back to back): no simulated time passes"
            )
        );
        for id in [
            "cross.shared-http-port",
            "mapping.rendezvous-listeners",
            "mapping.log-attention",
            "mapping.log-ffn",
            "mapping.engine-labels",
            "api.one-response",
            "routing.request-conservation",
            "routing.token-conservation",
            "routing.pinning",
            "ffn.never-completes",
            "ffn.fails-fast",
            "stateful.conservation",
        ] {
            let result = report.result(id).expect("every invariant is reported");
            assert_eq!(
                result.outcome.status,
                Status::Pass,
                "seed {seed} {id}: {:?}",
                result.outcome
            );
        }
        let shared = report.result("cross.shared-http-port").expect("reported");
        assert!(
            !shared.outcome.warnings.is_empty(),
            "the seed's shared port is a warning"
        );
        let summary = junit_schema::validate(&junit::render(&report)).expect("valid JUnit");
        assert_eq!((summary.tests, summary.failures), (report.results.len(), 0));
        let json = json::render(&report);
        assert_eq!(json["counts"]["fail"], 0);
        assert_eq!(json["seed"], seed);
    }
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pair_with_two_attention_engines_passes() {
    let (pair, _logs) = start(DP2, &[], &[]).await;
    let report = run(options(&pair, 21), &|_| {})
        .await
        .expect("the run starts");
    assert_eq!(report.exit_code(), 0, "{}", failures(&report));
    for id in [
        "routing.spread",
        "routing.pinning",
        "routing.pin-out-of-range",
        "mapping.engine-labels",
    ] {
        let result = report.result(id).expect("reported");
        assert_eq!(
            result.outcome.status,
            Status::Pass,
            "{id}: {:?}",
            result.outcome
        );
    }
    pair.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ffn_on_its_own_port_passes_refusing_or_rejecting() {
    for mode in ["refuse", "reject"] {
        let (pair, _logs) = start_with(FFN_PORT, &[], &[], &["--ffn-http", mode]).await;
        let mut options = options(&pair, 31);
        options.only = vec!["ffn".to_owned(), "static".to_owned()];
        let report = run(options, &|_| {}).await.expect("the run starts");
        assert_eq!(
            report.exit_code(),
            0,
            "--ffn-http {mode}:\n{}",
            failures(&report)
        );
        let never = report.result("ffn.never-completes").expect("reported");
        assert_eq!(
            never.outcome.status,
            Status::Pass,
            "{mode}: {:?}",
            never.outcome
        );
        let expected = if mode == "refuse" {
            "refused"
        } else {
            "HTTP 503"
        };
        assert!(
            never.outcome.message.contains(expected),
            "{mode}: {}",
            never.outcome.message
        );
        pair.stop().await;
    }
}

/// Runs only `timing.simulator` against the seed pair at time scale 1 with `ffn_faults`.
async fn simulator_timing(ffn_faults: &[&str], seed: u64) -> afd_conformance::report::CheckResult {
    let (pair, _logs) = start_with(SEED, &[], ffn_faults, &["--time-scale", "1"]).await;
    let mut options = options(&pair, seed);
    options.only = vec!["timing.simulator".to_owned()];
    // A quarter, as docs/conformance.md runs the check: a correct pair's means lie within a few
    // percent of the prediction at vLLM's host pace ("Timing against the simulator" there).
    options.settings.max_sim_deviation = Some(0.25);
    // Spread arrivals, as the nightly load has them.
    options.settings.load_rate = 20.0;
    let report = run(options, &|_| {}).await.expect("the run starts");
    pair.stop().await;
    report.result("timing.simulator").expect("reported").clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_time_twin_meets_the_simulators_prediction() {
    let result = simulator_timing(&[], 41).await;
    assert_eq!(result.outcome.status, Status::Pass, "{:?}", result.outcome);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_ffn_step_misses_the_simulators_prediction() {
    // A correct pair meets the prediction of this load within 1 % (mean TTFT +0.5 %, TPOT -0.1 %);
    // 20 ms more on every FFN step, under a third of a chunk step at vLLM's host pace but four times
    // a replayed decode step, puts the mean TPOT far past a quarter (+74 % when measured).
    let result = simulator_timing(&["slow-ffn-step=20"], 42).await;
    assert_eq!(result.outcome.status, Status::Fail, "{:?}", result.outcome);
    assert!(
        result.outcome.message.starts_with("mean TPOT differs")
            || result.outcome.message.starts_with("mean TTFT differs"),
        "{}",
        result.outcome.message
    );
}
