//! For every fault switch of the twin, the whole suite run against a pair with that fault fails and
//! names the invariant the fault breaks (the fault → invariant table of docs/conformance.md).

use std::time::Duration;

use afd_conformance::report::Status;
use afd_conformance::run::{RunOptions, run};

use crate::suite::{DP2, FFN_PORT, MISMATCHED, SEED, options, start};

/// Starts the pair, runs the whole suite (with `tune` applied to the options) and checks that every id
/// of `expected` failed; returns the failed ids.
async fn fails(
    recipe: &str,
    attention: &[&str],
    ffn: &[&str],
    tune: fn(&mut RunOptions),
    expected: &[&str],
) -> Vec<&'static str> {
    let (pair, _logs) = start(recipe, attention, ffn).await;
    let mut options = options(&pair, 7);
    tune(&mut options);
    let report = run(options, &|_| {}).await.expect("the run starts");
    let failed = report.failed_ids();
    for id in expected {
        let result = report.result(id).expect("every invariant is reported");
        assert_eq!(
            result.outcome.status,
            Status::Fail,
            "faults {attention:?}/{ffn:?} should fail {id}: {:?}\nfailed: {failed:?}",
            result.outcome
        );
        assert!(result.outcome.counterexample.is_some() || !result.outcome.message.is_empty());
    }
    assert_eq!(report.exit_code(), 1);
    pair.stop().await;
    failed
}

/// No tuning.
fn defaults(_: &mut RunOptions) {}

/// Short request deadlines, for a pair where half the connections hang.
fn quick(options: &mut RunOptions) {
    options.settings.request_timeout = Duration::from_secs(1);
}

/// An inter-token latency objective the slow FFN step breaks.
fn itl_objective(options: &mut RunOptions) {
    options.settings.max_itl_ms = Some(15.0);
}

/// One test per fault: `name: recipe, attention faults, ffn faults, tuning => invariants it must fail`.
macro_rules! fault_tests {
    ($($name:ident: $recipe:expr, $attention:expr, $ffn:expr, $tune:expr => $expected:expr;)+) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                fails($recipe, &$attention, &$ffn, $tune, &$expected).await;
            }
        )+
    };
}

const NONE: [&str; 0] = [];

fault_tests! {
    misroute_to_wrong_engine: DP2, ["misroute-to-wrong-engine"], NONE, defaults => ["routing.spread"];
    drop_response: SEED, ["drop-response"], NONE, defaults => ["api.one-response"];
    duplicate_response: SEED, ["duplicate-response"], NONE, defaults => ["api.one-response"];
    wrong_usage: SEED, ["wrong-usage"], NONE, defaults => ["api.usage-arithmetic"];
    stream_without_done: SEED, ["stream-without-done"], NONE, defaults => ["sse.single-done"];
    ffn_accepts_requests_on_the_shared_port: SEED, NONE, ["ffn-accepts-requests"], defaults => ["ffn.never-completes"];
    ffn_accepts_requests_on_its_own_port: FFN_PORT, NONE, ["ffn-accepts-requests"], defaults => ["ffn.never-completes"];
    ffn_hangs_requests_on_the_shared_port: SEED, NONE, ["ffn-hangs-requests"], quick => ["ffn.fails-fast"];
    ffn_hangs_requests_on_its_own_port: FFN_PORT, NONE, ["ffn-hangs-requests"], defaults => ["ffn.fails-fast"];
    wrong_engine_labels: SEED, ["wrong-engine-labels"], NONE, defaults => ["mapping.engine-labels"];
    metrics_not_conserved: SEED, ["metrics-not-conserved"], NONE, defaults => ["routing.request-conservation", "stateful.conservation"];
    ignore_pinning: DP2, ["ignore-pinning"], NONE, defaults => ["routing.pinning"];
    wrong_rank_mapping_log: SEED, ["wrong-rank-mapping-log"], ["wrong-rank-mapping-log"], defaults => ["mapping.log-attention", "mapping.log-ffn"];
    rendezvous_mismatch_accepted: MISMATCHED, ["rendezvous-mismatch-accepted"], ["rendezvous-mismatch-accepted"], defaults => ["liveness.invalid-deployment-refused", "cross.rank-counts-match"];
    hang_after_n_requests: SEED, ["hang-after-n-requests"], NONE, defaults => ["liveness.completes"];
    health_lies: SEED, ["health-lies"], NONE, defaults => ["api.health"];
    slow_ffn_step: SEED, NONE, ["slow-ffn-step=30"], itl_objective => ["timing.itl"];
}

/// Issue 18's reproduction: a hung pair under request timeouts longer than the budget. The requests the
/// budget cuts short have waited far longer than a live pair takes, so liveness fails (it never passes
/// on no evidence), and the run still ends within the budget and its grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_pair_fails_liveness_when_its_requests_outlast_the_budget() {
    let (pair, _logs) = start(SEED, &["hang-after-n-requests"], &NONE).await;
    let mut options = options(&pair, 11);
    options.settings.request_timeout = Duration::from_secs(120);
    options.time_budget = Duration::from_secs(15);
    let started = std::time::Instant::now();
    let report = run(options, &|_| {}).await.expect("the run starts");
    let took = started.elapsed();
    let liveness = report.result("liveness.completes").expect("reported");
    assert_eq!(
        liveness.outcome.status,
        Status::Fail,
        "{}",
        liveness.outcome.message
    );
    assert_eq!(report.exit_code(), 1);
    assert!(
        took < Duration::from_secs(15)
            + afd_conformance::run::BUDGET_GRACE
            + Duration::from_secs(1),
        "took {took:?} on a 15 s budget"
    );
    pair.stop().await;
}
