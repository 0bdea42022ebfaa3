//! Tests of selection and of phase coverage: every invariant of the catalog has a phase that judges it.

use std::collections::BTreeSet;

use super::*;

#[test]
fn every_own_invariant_is_judged_by_a_phase() {
    let mut judged: BTreeSet<&str> = BTreeSet::new();
    for ids in [
        READY_IDS,
        API_IDS,
        LEDGER_IDS,
        FFN_IDS,
        GREEDY_IDS,
        TIMING_IDS,
        checks::routing::ids(),
        &stateful::IDS[..],
    ] {
        judged.extend(ids.iter().copied());
    }
    let own: BTreeSet<&str> = catalog::OWN.iter().map(|i| i.id).collect();
    assert_eq!(judged, own);
}

#[test]
fn only_selects_ids_areas_kinds_and_prefixes() {
    let select = |entries: &[&str]| {
        Selection::parse(&entries.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>())
    };
    let all = select(&[]).expect("empty selects all");
    assert!(all.has("routing.spread") && all.has("afd.port-range"));
    let some = select(&["routing.spread,sse", "ffn.*"]).expect("valid");
    assert!(
        some.has("routing.spread") && some.has("sse.single-done") && some.has("ffn.fails-fast")
    );
    assert!(!some.has("routing.drain"));
    let kind = select(&["stateful"]).expect("valid");
    assert!(kind.has("stateful.drain") && !kind.has("api.health"));
    let area = select(&["deployment"]).expect("valid");
    assert!(area.has("afd.port-range") && !area.has("mapping.engine-labels"));
    assert_eq!(
        select(&["routing.nope"]).expect_err("unknown"),
        "'routing.nope' names no invariant, area or kind (see `afd-conformance list`)"
    );
}
