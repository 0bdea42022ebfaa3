//! Parsing of `--fault` values and the catalogue's completeness.

use expect_test::{Expect, expect};

use super::*;

#[track_caller]
fn check(input: &str, expect: Expect) {
    let out = match Fault::parse(input) {
        Ok(fault) => format!("ok {fault:?} displayed as {fault}"),
        Err(err) => format!("error: {err}"),
    };
    expect.assert_eq(&out);
}

#[test]
fn plain_fault_parses() {
    check(
        "wrong-usage",
        expect!["ok WrongUsage displayed as wrong-usage"],
    );
}

#[test]
fn parameter_defaults_and_overrides() {
    check(
        "drop-response",
        expect!["ok DropResponse { every: 3 } displayed as drop-response=3"],
    );
    check(
        "hang-after-n-requests=5",
        expect!["ok HangAfterNRequests { n: 5 } displayed as hang-after-n-requests=5"],
    );
    check(
        "slow-ffn-step=250",
        expect!["ok SlowFfnStep { delay_ms: 250 } displayed as slow-ffn-step=250"],
    );
}

#[test]
fn bad_values_are_named() {
    check(
        "slow-ffn-step=0",
        expect!["error: fault 'slow-ffn-step': delay_ms must be a positive integer, got '0'"],
    );
    check(
        "health-lies=1",
        expect!["error: fault 'health-lies' takes no value, got '1'"],
    );
    check(
        "hang",
        expect![
            "error: unknown fault 'hang'; known faults: misroute-to-wrong-engine, drop-response, duplicate-response, wrong-usage, stream-without-done, ffn-accepts-requests, ffn-hangs-requests, wrong-engine-labels, metrics-not-conserved, ignore-pinning, wrong-rank-mapping-log, rendezvous-mismatch-accepted, hang-after-n-requests, health-lies, slow-ffn-step"
        ],
    );
}

#[test]
fn every_catalog_entry_parses_and_round_trips() {
    for info in CATALOG {
        let fault = Fault::parse(info.name).expect("catalog names parse");
        assert_eq!(fault.name(), info.name);
        assert_eq!(Fault::parse(&fault.to_string()), Ok(fault));
        assert_eq!(fault.info().name, info.name);
    }
    assert_eq!(CATALOG.len(), 15, "issue 6 item 5 names fifteen faults");
}

#[test]
fn a_fault_given_twice_keeps_its_last_value() {
    let set = FaultSet::new([
        Fault::DropResponse { every: 2 },
        Fault::WrongUsage,
        Fault::DropResponse { every: 7 },
    ]);
    assert_eq!(set.drop_every(), Some(7));
    assert_eq!(set.iter().count(), 2);
    assert!(set.has(Fault::WrongUsage));
    assert!(!set.has(Fault::HealthLies));
}

proptest::proptest! {
    #[test]
    fn parse_never_panics(text in "\\PC{0,40}") {
        let _ = Fault::parse(&text);
    }
}
