//! Tests of the catalog: size, unique ids, and that every entry is complete.

use std::collections::BTreeSet;

use super::*;

#[test]
fn catalog_has_at_least_thirty_invariants_with_unique_ids() {
    let all = catalog();
    assert!(all.len() >= 30, "only {} invariants", all.len());
    let ids: BTreeSet<&str> = all.iter().map(|i| i.id).collect();
    assert_eq!(ids.len(), all.len(), "duplicate ids");
}

#[test]
fn no_invariant_takes_a_retired_id() {
    for invariant in catalog() {
        assert!(
            !RETIRED.contains(&invariant.id),
            "{} is retired",
            invariant.id
        );
    }
}

#[test]
fn every_deployment_rule_is_a_static_invariant() {
    for rule in deployment_rules::rules() {
        let invariant = find(rule.id).expect("every rule is in the catalog");
        assert_eq!(invariant.kind, Kind::Static);
        assert_eq!(invariant.area, Area::Deployment);
    }
}

#[test]
fn own_ids_name_their_area_and_say_how_they_end_indeterminate() {
    for invariant in OWN {
        let prefix = invariant.id.split('.').next().expect("ids have a prefix");
        let expected = match invariant.area {
            Area::RankMapping => "mapping",
            Area::Streaming => "sse",
            other => other.as_str(),
        };
        assert_eq!(prefix, expected, "{}", invariant.id);
        assert!(!invariant.statement.is_empty() && !invariant.source.is_empty());
        assert!(!invariant.indeterminate.is_empty(), "{}", invariant.id);
        assert!(
            invariant.statement.len() < 200,
            "{} is not one line",
            invariant.id
        );
    }
}

#[test]
fn every_kind_is_represented() {
    let counts = count_by_kind();
    assert_eq!(
        counts.iter().map(|(_, n)| n).sum::<usize>(),
        catalog().len()
    );
    for (kind, n) in counts {
        assert!(n >= 4, "{kind}: {n}");
    }
}

#[test]
fn the_user_guide_lists_every_invariant() {
    let guide = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../docs/conformance.md"
    ))
    .expect("docs/conformance.md is readable");
    let missing: Vec<&str> = catalog()
        .iter()
        .map(|i| i.id)
        .filter(|id| !guide.contains(&format!("`{id}`")))
        .collect();
    assert!(missing.is_empty(), "docs/conformance.md lacks {missing:?}");
    let (total, by_kind) = (catalog().len(), count_by_kind());
    let line = format!(
        "{total} invariants: {} static",
        by_kind
            .iter()
            .find(|(k, _)| *k == Kind::Static)
            .map_or(0, |(_, n)| *n)
    );
    assert!(
        guide.contains(&line),
        "docs/conformance.md should say '{line}'"
    );
}
