//! For every fault switch of the twin, the whole suite run against a pair with that fault fails and
//! names the invariant the fault breaks (the fault → invariant table of docs/conformance.md).

use afd_conformance::report::Status;
use afd_conformance::run::run;

use crate::suite::{DP2, FFN_PORT, MISMATCHED, SEED, options, start};

/// Starts the pair, runs the whole suite (with `tune` applied to the options) and checks that every id
/// of `expected` failed; returns the failed ids.
async fn fails(
    recipe: &str,
    attention: &[&str],
    ffn: &[&str],
    tune: impl FnOnce(&mut afd_conformance::run::RunOptions),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misroute_to_wrong_engine() {
    fails(
        DP2,
        &["misroute-to-wrong-engine"],
        &[],
        |_| {},
        &["routing.spread"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_response() {
    fails(SEED, &["drop-response"], &[], |_| {}, &["api.one-response"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_response() {
    fails(
        SEED,
        &["duplicate-response"],
        &[],
        |_| {},
        &["api.one-response"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_usage() {
    fails(
        SEED,
        &["wrong-usage"],
        &[],
        |_| {},
        &["api.usage-arithmetic"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_without_done() {
    fails(
        SEED,
        &["stream-without-done"],
        &[],
        |_| {},
        &["sse.single-done"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ffn_accepts_requests_on_the_shared_port() {
    fails(
        SEED,
        &[],
        &["ffn-accepts-requests"],
        |_| {},
        &["ffn.never-completes"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ffn_hangs_requests_on_the_shared_port() {
    // Half the connections to the shared port hang: short deadlines keep the run quick.
    let quick = |o: &mut afd_conformance::run::RunOptions| {
        o.settings.request_timeout = std::time::Duration::from_secs(1)
    };
    fails(
        SEED,
        &[],
        &["ffn-hangs-requests"],
        quick,
        &["ffn.fails-fast"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_engine_labels() {
    fails(
        SEED,
        &["wrong-engine-labels"],
        &[],
        |_| {},
        &["mapping.engine-labels"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_not_conserved() {
    fails(
        SEED,
        &["metrics-not-conserved"],
        &[],
        |_| {},
        &["routing.request-conservation", "stateful.conservation"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_pinning() {
    fails(DP2, &["ignore-pinning"], &[], |_| {}, &["routing.pinning"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_rank_mapping_log() {
    fails(
        SEED,
        &["wrong-rank-mapping-log"],
        &["wrong-rank-mapping-log"],
        |_| {},
        &["mapping.log-attention", "mapping.log-ffn"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendezvous_mismatch_accepted() {
    let both = ["rendezvous-mismatch-accepted"];
    fails(
        MISMATCHED,
        &both,
        &both,
        |_| {},
        &[
            "liveness.invalid-deployment-refused",
            "cross.rank-counts-match",
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_after_n_requests() {
    fails(
        SEED,
        &["hang-after-n-requests"],
        &[],
        |_| {},
        &["liveness.completes"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_lies() {
    fails(SEED, &["health-lies"], &[], |_| {}, &["api.health"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_ffn_step() {
    fails(
        SEED,
        &[],
        &["slow-ffn-step=30"],
        |o| o.settings.max_itl_ms = Some(15.0),
        &["timing.itl"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ffn_accepts_requests_on_its_own_port() {
    fails(
        FFN_PORT,
        &[],
        &["ffn-accepts-requests"],
        |_| {},
        &["ffn.never-completes"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ffn_hangs_requests_on_its_own_port() {
    fails(
        FFN_PORT,
        &[],
        &["ffn-hangs-requests"],
        |_| {},
        &["ffn.fails-fast"],
    )
    .await;
}
