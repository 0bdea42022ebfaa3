//! Worked tables of afd-spec §2.4 and the unit-test facts of §2.8, rendered as text.

use expect_test::{Expect, expect};

use super::*;

fn render(attention: u32, ffn: u32, rules: RuleSet) -> String {
    let topology = match Topology::new(attention, ffn, rules, 6269) {
        Ok(topology) => topology,
        Err(err) => return format!("error: {err}\n"),
    };
    let mut out = String::new();
    for rank in topology.ranks() {
        let tag = match rank.role {
            Role::Attention => 'A',
            Role::Ffn => 'F',
        };
        let p2p = rank
            .p2p_rank
            .map_or_else(|| "-".to_owned(), |r| r.to_string());
        out.push_str(&format!(
            "{tag}{} world={} p2p={} sg={} ris={} subgroup={:?} dst={:?} ports={:?}\n",
            rank.role_rank,
            rank.world_rank,
            p2p,
            rank.subgroup_index,
            rank.rank_in_subgroup,
            rank.subgroup_world_ranks,
            rank.control_destinations,
            rank.ports,
        ));
    }
    out
}

#[track_caller]
fn check(attention: u32, ffn: u32, rules: RuleSet, expect: Expect) {
    expect.assert_eq(&render(attention, ffn, rules));
}

#[test]
fn one_attention_one_ffn_v026() {
    check(
        1,
        1,
        RuleSet::V026,
        expect![[r#"
            F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0, 1] dst=[] ports=[6269, 6270]
            A0 world=1 p2p=1 sg=0 ris=1 subgroup=[0, 1] dst=[0] ports=[6269, 6270]
        "#]],
    );
}

#[test]
fn two_attention_one_ffn_v026() {
    check(
        2,
        1,
        RuleSet::V026,
        expect![[r#"
            F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0, 1, 2] dst=[] ports=[6269, 6270]
            A0 world=1 p2p=1 sg=0 ris=1 subgroup=[0, 1, 2] dst=[0] ports=[6269, 6270]
            A1 world=2 p2p=- sg=0 ris=2 subgroup=[0, 1, 2] dst=[] ports=[6269, 6270]
        "#]],
    );
}

#[test]
fn two_attention_two_ffn_latest_has_no_derived_ports() {
    check(
        2,
        2,
        RuleSet::Latest,
        expect![[r#"
            F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0, 2] dst=[] ports=[6269]
            F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1, 3] dst=[] ports=[6269]
            A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0, 2] dst=[0] ports=[6269]
            A1 world=3 p2p=3 sg=1 ris=1 subgroup=[1, 3] dst=[1] ports=[6269]
        "#]],
    );
}

#[test]
fn four_attention_two_ffn_pairs_control_by_index_not_subgroup() {
    check(
        4,
        2,
        RuleSet::V026,
        expect![[r#"
            F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0, 2, 3] dst=[] ports=[6269, 6270]
            F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1, 4, 5] dst=[] ports=[6269, 6271]
            A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0, 2, 3] dst=[0] ports=[6269, 6270]
            A1 world=3 p2p=3 sg=0 ris=2 subgroup=[0, 2, 3] dst=[1] ports=[6269, 6270]
            A2 world=4 p2p=- sg=1 ris=1 subgroup=[1, 4, 5] dst=[] ports=[6269, 6271]
            A3 world=5 p2p=- sg=1 ris=2 subgroup=[1, 4, 5] dst=[] ports=[6269, 6271]
        "#]],
    );
}

#[test]
fn three_attention_two_ffn_is_a_block_partition_under_latest_only() {
    check(
        3,
        2,
        RuleSet::Latest,
        expect![[r#"
            F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0, 2, 3] dst=[] ports=[6269]
            F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1, 4] dst=[] ports=[6269]
            A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0, 2, 3] dst=[0] ports=[6269]
            A1 world=3 p2p=3 sg=0 ris=2 subgroup=[0, 2, 3] dst=[1] ports=[6269]
            A2 world=4 p2p=- sg=1 ris=1 subgroup=[1, 4] dst=[] ports=[6269]
        "#]],
    );
    check(
        3,
        2,
        RuleSet::V026,
        expect![[r#"
            error: P2pNcclAFDConnector under rule set v0.26 requires num_attention_ranks to be a multiple of num_ffn_ranks, got 3 % 2 = 1 (afd-spec §1.4 rule 6)
        "#]],
    );
}

#[test]
fn fewer_attention_than_ffn_is_rejected_by_both_rule_sets() {
    for rules in [RuleSet::V026, RuleSet::Latest] {
        check(
            1,
            2,
            rules,
            expect![[r#"
                error: P2pNcclAFDConnector requires num_attention_ranks >= num_ffn_ranks, got 1 < 2 (afd-spec §1.4 rule 5)
            "#]],
        );
    }
}

#[test]
fn literal_partitions_of_the_newer_snapshot() {
    // afd-spec §2.8: 5A2F [(0,2,3,4),(1,5,6)], 5A3F [(0,3,4),(1,5,6),(2,7)], 6A4F [(0,4,5),(1,6),(2,7,8),(3,9)].
    let partition = |a, f| {
        let topology = Topology::new(a, f, RuleSet::Latest, 1239).unwrap();
        (0..f)
            .map(|g| topology.subgroup_world_ranks(g))
            .collect::<Vec<_>>()
    };
    assert_eq!(partition(5, 2), vec![vec![0, 2, 3, 4], vec![1, 5, 6]]);
    assert_eq!(
        partition(5, 3),
        vec![vec![0, 3, 4], vec![1, 5, 6], vec![2, 7]]
    );
    assert_eq!(
        partition(6, 4),
        vec![vec![0, 4, 5], vec![1, 6], vec![2, 7, 8], vec![3, 9]]
    );
}

#[test]
fn ffn_receive_rows_clamp_idle_peers_to_one_row() {
    // afd-spec §2.8, test_p2p_connector.py:130-182.
    let t21 = Topology::new(2, 1, RuleSet::V026, 1239).unwrap();
    assert_eq!(t21.ffn_receive_rows(0, &[3, 5]), Some(vec![3, 5]));
    let t42 = Topology::new(4, 2, RuleSet::V026, 1239).unwrap();
    assert_eq!(t42.ffn_receive_rows(0, &[3, 5, 7, 11]), Some(vec![3, 5]));
    assert_eq!(t42.ffn_receive_rows(1, &[3, 5, 7, 0]), Some(vec![7, 1]));
    let t63 = Topology::new(6, 3, RuleSet::V026, 1239).unwrap();
    assert_eq!(
        t63.ffn_receive_rows(2, &[1, 2, 3, 5, 11, 13]),
        Some(vec![11, 13])
    );
    // A DP2 vector for 4 Attention ranks (TP 2) is expanded before use.
    assert_eq!(t42.ffn_receive_rows(1, &[8, 13]), Some(vec![13, 13]));
    assert_eq!(t42.ffn_receive_rows(1, &[1, 2, 3]), None);
}

#[test]
fn role_rank_matches_the_plugin_unit_tests() {
    // afd-spec §2.1: DP3/PCP8 dp_rank 2 → 16 and 23; DP2,PCP2,TP2 (1,1,1) → 7.
    assert_eq!(role_rank(2, 0, 0, 8, 1), 16);
    assert_eq!(role_rank(2, 7, 0, 8, 1), 23);
    assert_eq!(role_rank(1, 1, 1, 2, 2), 7);
    let t22 = Topology::new(2, 2, RuleSet::Latest, 1239).unwrap();
    assert!(t22.rank(Role::Attention, 3).is_err());
    let t44 = Topology::new(4, 4, RuleSet::V026, 1239).unwrap();
    let a3 = t44.rank(Role::Attention, 3).unwrap();
    assert_eq!((a3.world_rank, a3.p2p_rank), (7, Some(7)));
}

/// Checks every property afd-spec §2.8 lists (plus the port rule of §2.3) for one legal pair.
fn assert_mapping_properties(attention: u32, ffn: u32, rules: RuleSet, port: u16) {
    let t = Topology::new(attention, ffn, rules, port).unwrap();
    let (a, f) = (attention, ffn);
    let ranks = t.ranks();
    assert_eq!(ranks.len() as u32, a + f);
    let mut attention_members = Vec::new();
    let mut destinations = Vec::new();
    for (index, rank) in ranks.iter().enumerate() {
        // World order is FFN first, then Attention, each by role rank.
        assert_eq!(rank.world_rank as usize, index, "{a}A{f}F");
        match rank.role {
            Role::Ffn => {
                assert_eq!(rank.world_rank, rank.role_rank);
                assert_eq!(rank.p2p_rank, Some(rank.role_rank));
                assert_eq!(rank.subgroup_index, rank.role_rank);
                assert_eq!(rank.rank_in_subgroup, 0);
                assert_eq!(
                    rank.subgroup_world_ranks[0], rank.role_rank,
                    "head is the FFN rank"
                );
                assert!(rank.control_destinations.is_empty());
                let block = rank.subgroup_world_ranks.len() as u32 - 1;
                // Block sizes differ by at most one: each is floor(A/F) or ceil(A/F).
                assert!(
                    block == a / f || block == a.div_ceil(f),
                    "{a}A{f}F block {block}"
                );
                if rules == RuleSet::V026 {
                    assert_eq!(block, a / f, "ratio == len(subgroup) - 1 == A / F");
                }
                attention_members.extend_from_slice(&rank.subgroup_world_ranks[1..]);
            }
            Role::Attention => {
                assert_eq!(rank.world_rank, f + rank.role_rank);
                let in_control = rank.role_rank < f;
                assert_eq!(rank.p2p_rank, in_control.then_some(rank.world_rank));
                // Both roles agree on the shared subgroup.
                let head = &ranks[rank.subgroup_index as usize];
                assert_eq!(head.subgroup_world_ranks, rank.subgroup_world_ranks);
                assert_eq!(
                    rank.subgroup_world_ranks[rank.rank_in_subgroup as usize],
                    rank.world_rank
                );
                if rules == RuleSet::V026 {
                    assert_eq!(rank.subgroup_index, rank.role_rank / (a / f), "a // ratio");
                }
                assert_eq!(rank.control_destinations.is_empty(), !in_control);
                destinations.extend_from_slice(&rank.control_destinations);
            }
        }
        let expected_ports: Vec<u16> = match rules {
            RuleSet::Latest => vec![port],
            RuleSet::V026 => std::iter::once(port)
                .chain(u16::try_from(u32::from(port) + rank.subgroup_index + 1).ok())
                .collect(),
        };
        assert_eq!(rank.ports, expected_ports);
    }
    // Attention members partition [F, F + A) in order.
    assert_eq!(attention_members, (f..f + a).collect::<Vec<_>>());
    // The metadata destinations cover range(F) exactly once, paired by index.
    assert_eq!(destinations, (0..f).collect::<Vec<_>>());
    assert_eq!(t.control_group_size(), 2 * f);
}

#[test]
fn every_legal_pair_up_to_64_has_the_mapping_properties_under_both_rule_sets() {
    for rules in [RuleSet::V026, RuleSet::Latest] {
        for a in 1..=64 {
            for f in 1..=64 {
                let legal = f <= a && (rules == RuleSet::Latest || a % f == 0);
                match Topology::new(a, f, rules, 6269) {
                    Ok(_) => {
                        assert!(legal, "{a}A{f}F accepted under {rules}");
                        assert_mapping_properties(a, f, rules, 6269);
                    }
                    Err(_) => assert!(!legal, "{a}A{f}F rejected under {rules}"),
                }
            }
        }
    }
}

#[test]
fn parallel_coordinates_invert_role_rank() {
    for (pcp, tp) in [(1, 1), (1, 2), (2, 2), (8, 1), (3, 4)] {
        for role in 0..48 {
            let c = parallel_coordinates(role, pcp, tp);
            assert_eq!(
                role_rank(c.dp_rank, c.pcp_rank, c.tp_rank, pcp, tp),
                u64::from(role)
            );
            assert!(c.pcp_rank < pcp && c.tp_rank < tp);
        }
    }
    assert_eq!(parallel_coordinates(5, 0, 0).dp_rank, 5);
}

mod properties {
    //! The §2.8 properties on random pairs (legal or not), rule sets and base ports.

    use proptest::prelude::*;

    use super::super::*;
    use super::assert_mapping_properties;

    fn rule_set() -> impl Strategy<Value = RuleSet> {
        prop_oneof![Just(RuleSet::V026), Just(RuleSet::Latest)]
    }

    proptest! {
        #[test]
        fn legal_pairs_map_with_the_properties_and_illegal_ones_are_refused(
            a in 0u32..=64,
            f in 0u32..=64,
            rules in rule_set(),
            port in 1u16..=u16::MAX,
        ) {
            let legal = f >= 1 && f <= a && (rules == RuleSet::Latest || a % f == 0);
            let topology = Topology::new(a, f, rules, port);
            prop_assert_eq!(topology.is_ok(), legal, "{}A{}F under {}", a, f, rules);
            if legal {
                assert_mapping_properties(a, f, rules, port);
            }
        }

        #[test]
        fn receive_rows_sum_over_each_subgroup_and_clamp_idle_ranks(
            (a, f) in (1u32..=16).prop_flat_map(|a| (Just(a), 1..=a)),
            counts in proptest::collection::vec(0u32..100, 16),
        ) {
            let t = Topology::new(a, f, RuleSet::Latest, 1239).unwrap();
            let counts = &counts[..a as usize];
            let mut total = 0;
            for g in 0..f {
                let rows = t.ffn_receive_rows(g, counts).unwrap();
                prop_assert_eq!(rows.len(), t.attention_block(g).len());
                prop_assert!(rows.iter().all(|&r| r >= 1));
                total += rows.len();
            }
            prop_assert_eq!(total, a as usize);
        }
    }
}
