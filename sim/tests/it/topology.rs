//! The rank-mapping properties of afd-spec §2 on `afd_sim::topology`, through its public API: the pure
//! properties of §2.8 over generated shapes under both rule sets, the role-rank bijection of §2.1, the
//! worked tables of §2.4 and the FFN receive rows of §3.5. They test the mapping itself, so they live
//! here; afd-conformance keeps only what a live pair exposes (listeners, logged lines, engine labels).

use std::collections::{BTreeMap, BTreeSet};

use afd_sim::topology::{RankInfo, Role, RuleSet, Topology, TopologyError, role_rank};
use proptest::prelude::*;

/// Largest rank count the generated shapes use.
const MAX_RANKS: u32 = 64;

/// Legal `(A, F)` under a rule set, up to [`MAX_RANKS`].
fn shapes(rules: RuleSet) -> BoxedStrategy<(u32, u32)> {
    match rules {
        RuleSet::V026 => (1..=MAX_RANKS)
            .prop_flat_map(|f| (1..=MAX_RANKS / f).prop_map(move |m| (f * m, f)))
            .boxed(),
        RuleSet::Latest => (1..=MAX_RANKS)
            .prop_flat_map(|f| (f..=MAX_RANKS).prop_map(move |a| (a, f)))
            .boxed(),
    }
}

fn rule_set() -> impl Strategy<Value = RuleSet> {
    prop_oneof![Just(RuleSet::V026), Just(RuleSet::Latest)]
}

/// A legal shape under either rule set, and the rule set.
fn legal_shape() -> impl Strategy<Value = ((u32, u32), RuleSet)> {
    rule_set().prop_flat_map(|rules| (shapes(rules), Just(rules)))
}

type Property = fn(&Topology) -> Result<(), String>;

/// The §2.8 properties, each with the conformance invariant id it was checked under before.
const PROPERTIES: &[(&str, Property)] = &[
    ("mapping.world-order", world_order),
    ("mapping.p2p-ranks", p2p_ranks),
    ("mapping.subgroup-head", subgroup_head),
    ("mapping.subgroup-partition", subgroup_partition),
    ("mapping.roles-agree", roles_agree),
    ("mapping.control-destinations", control_destinations),
    ("mapping.ports", ports),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn generated_shapes_have_every_mapping_property(
        ((a, f), rules) in legal_shape(),
        port in 1000u16..60000,
    ) {
        let topology = Topology::new(a, f, rules, port).expect("a legal shape maps");
        for (id, property) in PROPERTIES {
            if let Err(reason) = property(&topology) {
                return Err(TestCaseError::fail(format!("{id}: {a}A{f}F under {rules}: {reason}")));
            }
        }
    }

    #[test]
    fn role_rank_maps_dp_pcp_tp_one_to_one(dp in 1u32..=8, pcp in 1u32..=8, tp in 1u32..=8) {
        let size = u64::from(dp * pcp * tp);
        let mut seen = BTreeSet::new();
        for d in 0..dp {
            for p in 0..pcp {
                for t in 0..tp {
                    let rank = role_rank(d, p, t, pcp, tp);
                    prop_assert!(rank < size, "(dp {d}, pcp {p}, tp {t}) maps to {rank}, outside 0..{size}");
                    prop_assert!(seen.insert(rank), "(dp {d}, pcp {p}, tp {t}) maps to {rank}, already taken");
                }
            }
        }
    }

    #[test]
    fn ffn_ranks_receive_max_1_count_rows_from_each_peer_after_tp_expansion(
        (a, f) in shapes(RuleSet::Latest),
        raw in proptest::collection::vec(0u32..100, 1..=64),
    ) {
        let topology = Topology::new(a, f, RuleSet::Latest, 6269).expect("a legal shape maps");
        // A per-DP vector: its length divides A (TP peers share their engine's count).
        let len = (1..=a).rev().find(|l| a % l == 0 && *l as usize <= raw.len()).unwrap_or(1);
        let counts = &raw[..len as usize];
        let repeat = (a / len) as usize;
        let mut total = 0u64;
        for k in 0..f {
            let rows = topology
                .ffn_receive_rows(k, counts)
                .ok_or_else(|| TestCaseError::fail(format!("no rows for FFN {k}, counts {counts:?}")))?;
            let block = topology.attention_block(k);
            prop_assert_eq!(rows.len(), block.len(), "FFN {} receives from a block of {}", k, block.len());
            for (row, peer) in rows.iter().zip(block) {
                let expected = counts[peer as usize / repeat].max(1);
                prop_assert_eq!(*row, expected, "FFN {} receives from Attention {}", k, peer);
                total += u64::from(*row);
            }
        }
        let expected_total: u64 = (0..a as usize)
            .map(|p| u64::from(counts[p / repeat].max(1)))
            .sum();
        prop_assert_eq!(total, expected_total);
    }
}

#[test]
fn the_worked_tables_of_2_4_hold_under_both_rule_sets() {
    let failures = worked_tables();
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn ffn_receive_rows_match_the_plugin_examples() {
    // Fixed examples of afd-spec §2.8 (`test_p2p_connector.py:130-182`).
    type Example = (u32, u32, u32, &'static [u32], &'static [u32]);
    let examples: &[Example] = &[
        (2, 1, 0, &[3, 5], &[3, 5]),
        (4, 2, 0, &[3, 5, 7, 11], &[3, 5]),
        (4, 2, 1, &[3, 5, 7, 0], &[7, 1]),
    ];
    for &(a, f, k, counts, expected) in examples {
        let got = Topology::new(a, f, RuleSet::V026, 6269)
            .ok()
            .and_then(|t| t.ffn_receive_rows(k, counts));
        assert_eq!(
            got.as_deref(),
            Some(expected),
            "{a}A{f}F FFN {k} with counts {counts:?}"
        );
    }
}

fn world_order(t: &Topology) -> Result<(), String> {
    let f = t.ffn_ranks();
    for (position, rank) in t.ranks().iter().enumerate() {
        let expected = match rank.role {
            Role::Ffn => rank.role_rank,
            Role::Attention => f + rank.role_rank,
        };
        if rank.world_rank != expected {
            return Err(format!(
                "{} rank {} has world rank {}, expected {expected}",
                rank.role, rank.role_rank, rank.world_rank
            ));
        }
        if rank.world_rank as usize != position {
            return Err(format!(
                "ranks() lists world rank {} at position {position}",
                rank.world_rank
            ));
        }
    }
    Ok(())
}

fn p2p_ranks(t: &Topology) -> Result<(), String> {
    let f = t.ffn_ranks();
    let mut members = 0;
    for rank in t.ranks() {
        let expected = match rank.role {
            Role::Ffn => Some(rank.world_rank),
            Role::Attention if rank.role_rank < f => Some(rank.world_rank),
            Role::Attention => None,
        };
        if rank.p2p_rank != expected {
            return Err(format!(
                "{} rank {} has p2p rank {:?}, expected {expected:?}",
                rank.role, rank.role_rank, rank.p2p_rank
            ));
        }
        members += u32::from(rank.p2p_rank.is_some());
    }
    if members != t.control_group_size() || members != 2 * f {
        return Err(format!(
            "control group has {members} members, control_group_size() says {}, expected 2F = {}",
            t.control_group_size(),
            2 * f
        ));
    }
    Ok(())
}

fn subgroup_head(t: &Topology) -> Result<(), String> {
    for rank in t.ranks() {
        let members = &rank.subgroup_world_ranks;
        if members.first() != Some(&rank.subgroup_index) {
            return Err(format!(
                "subgroup {} starts with {:?}, not FFN rank {}",
                rank.subgroup_index,
                members.first(),
                rank.subgroup_index
            ));
        }
        match rank.role {
            Role::Ffn if rank.rank_in_subgroup != 0 || rank.subgroup_index != rank.role_rank => {
                return Err(format!(
                    "FFN rank {} is in subgroup {} at position {}, expected subgroup {} position 0",
                    rank.role_rank, rank.subgroup_index, rank.rank_in_subgroup, rank.role_rank
                ));
            }
            Role::Attention if rank.rank_in_subgroup == 0 => {
                return Err(format!(
                    "Attention rank {} holds subgroup position 0",
                    rank.role_rank
                ));
            }
            _ => {}
        }
        if members.get(rank.rank_in_subgroup as usize) != Some(&rank.world_rank) {
            return Err(format!(
                "{} rank {} (world {}) says it is at position {} of {members:?}",
                rank.role, rank.role_rank, rank.world_rank, rank.rank_in_subgroup
            ));
        }
    }
    Ok(())
}

fn subgroup_partition(t: &Topology) -> Result<(), String> {
    let (a, f) = (t.attention_ranks(), t.ffn_ranks());
    let mut all = Vec::new();
    let mut sizes = Vec::new();
    for k in 0..f {
        let members = t.subgroup_world_ranks(k);
        sizes.push(members.len() - 1);
        all.extend_from_slice(&members[1..]);
    }
    let expected: Vec<u32> = (f..f + a).collect();
    if all != expected {
        return Err(format!(
            "Attention members in subgroup order are {all:?}, expected world ranks {f}..{}",
            f + a
        ));
    }
    let (min, max) = (
        sizes.iter().min().copied().unwrap_or(0),
        sizes.iter().max().copied().unwrap_or(0),
    );
    if min == 0 || max - min > 1 {
        return Err(format!(
            "block sizes {sizes:?} are empty or differ by more than one"
        ));
    }
    if t.rules() == RuleSet::V026 && sizes.iter().any(|&s| s as u32 != a / f) {
        return Err(format!(
            "block sizes {sizes:?} are not all A/F = {} at v0.26",
            a / f
        ));
    }
    Ok(())
}

fn roles_agree(t: &Topology) -> Result<(), String> {
    let ranks = t.ranks();
    let by_world: BTreeMap<u32, &RankInfo> = ranks.iter().map(|r| (r.world_rank, r)).collect();
    for rank in &ranks {
        for member in &rank.subgroup_world_ranks {
            let Some(other) = by_world.get(member) else {
                return Err(format!(
                    "subgroup of world rank {} names unknown world rank {member}",
                    rank.world_rank
                ));
            };
            if other.subgroup_world_ranks != rank.subgroup_world_ranks {
                return Err(format!(
                    "world rank {} sees subgroup {:?}, its member {member} sees {:?}",
                    rank.world_rank, rank.subgroup_world_ranks, other.subgroup_world_ranks
                ));
            }
        }
    }
    Ok(())
}

fn control_destinations(t: &Topology) -> Result<(), String> {
    let f = t.ffn_ranks();
    let mut seen = vec![0u32; f as usize];
    for rank in t.ranks() {
        if rank.role == Role::Ffn && !rank.control_destinations.is_empty() {
            return Err(format!(
                "FFN rank {} sends control payloads",
                rank.role_rank
            ));
        }
        for &d in &rank.control_destinations {
            let Some(slot) = seen.get_mut(d as usize) else {
                return Err(format!(
                    "Attention rank {} sends to FFN rank {d} of {f}",
                    rank.role_rank
                ));
            };
            *slot += 1;
        }
        if rank.role == Role::Attention {
            let expected: Vec<u32> = if rank.role_rank < f {
                vec![rank.role_rank]
            } else {
                Vec::new()
            };
            if rank.control_destinations != expected {
                return Err(format!(
                    "Attention rank {} sends to {:?}, expected {expected:?}",
                    rank.role_rank, rank.control_destinations
                ));
            }
        }
    }
    if let Some(k) = seen.iter().position(|&n| n != 1) {
        return Err(format!(
            "FFN rank {k} receives from {} Attention ranks, expected 1",
            seen[k]
        ));
    }
    Ok(())
}

fn ports(t: &Topology) -> Result<(), String> {
    let allowed = t.rendezvous_ports();
    if allowed.first() != Some(&t.base_port()) {
        return Err(format!(
            "rendezvous ports {allowed:?} do not start at the base port {}",
            t.base_port()
        ));
    }
    for rank in t.ranks() {
        let expected: Vec<u16> = match t.rules() {
            RuleSet::Latest => vec![t.base_port()],
            RuleSet::V026 => std::iter::once(t.base_port())
                .chain(u16::try_from(u32::from(t.base_port()) + rank.subgroup_index + 1).ok())
                .collect(),
        };
        if rank.ports != expected {
            return Err(format!(
                "{} rank {} uses ports {:?}, expected {expected:?}",
                rank.role, rank.role_rank, rank.ports
            ));
        }
        if let Some(p) = rank.ports.iter().find(|p| !allowed.contains(p)) {
            return Err(format!(
                "{} rank {} uses port {p}, not a rendezvous port",
                rank.role, rank.role_rank
            ));
        }
    }
    Ok(())
}

/// One row of a §2.4 table: role, role rank, world, p2p, subgroup, position, members, destinations.
type Row = (
    Role,
    u32,
    u32,
    Option<u32>,
    u32,
    u32,
    &'static [u32],
    &'static [u32],
);

const A: Role = Role::Attention;
const F: Role = Role::Ffn;

/// The worked tables of afd-spec §2.4 (HEAD formulas; identical under latest because F divides A).
const TABLES: &[(u32, u32, &[Row])] = &[
    (
        1,
        1,
        &[
            (F, 0, 0, Some(0), 0, 0, &[0, 1], &[]),
            (A, 0, 1, Some(1), 0, 1, &[0, 1], &[0]),
        ],
    ),
    (
        2,
        1,
        &[
            (F, 0, 0, Some(0), 0, 0, &[0, 1, 2], &[]),
            (A, 0, 1, Some(1), 0, 1, &[0, 1, 2], &[0]),
            (A, 1, 2, None, 0, 2, &[0, 1, 2], &[]),
        ],
    ),
    (
        2,
        2,
        &[
            (F, 0, 0, Some(0), 0, 0, &[0, 2], &[]),
            (F, 1, 1, Some(1), 1, 0, &[1, 3], &[]),
            (A, 0, 2, Some(2), 0, 1, &[0, 2], &[0]),
            (A, 1, 3, Some(3), 1, 1, &[1, 3], &[1]),
        ],
    ),
    (
        4,
        2,
        &[
            (F, 0, 0, Some(0), 0, 0, &[0, 2, 3], &[]),
            (F, 1, 1, Some(1), 1, 0, &[1, 4, 5], &[]),
            (A, 0, 2, Some(2), 0, 1, &[0, 2, 3], &[0]),
            (A, 1, 3, Some(3), 0, 2, &[0, 2, 3], &[1]),
            (A, 2, 4, None, 1, 1, &[1, 4, 5], &[]),
            (A, 3, 5, None, 1, 2, &[1, 4, 5], &[]),
        ],
    ),
    (
        4,
        4,
        &[
            (F, 0, 0, Some(0), 0, 0, &[0, 4], &[]),
            (F, 1, 1, Some(1), 1, 0, &[1, 5], &[]),
            (F, 2, 2, Some(2), 2, 0, &[2, 6], &[]),
            (F, 3, 3, Some(3), 3, 0, &[3, 7], &[]),
            (A, 0, 4, Some(4), 0, 1, &[0, 4], &[0]),
            (A, 1, 5, Some(5), 1, 1, &[1, 5], &[1]),
            (A, 2, 6, Some(6), 2, 1, &[2, 6], &[2]),
            (A, 3, 7, Some(7), 3, 1, &[3, 7], &[3]),
        ],
    ),
];

/// Subgroup partitions of shapes only the block partition accepts (afd-spec §2.4, §2.8).
const LATEST_PARTITIONS: &[(u32, u32, &[&[u32]])] = &[
    (3, 2, &[&[0, 2, 3], &[1, 4]]),
    (5, 2, &[&[0, 2, 3, 4], &[1, 5, 6]]),
    (5, 3, &[&[0, 3, 4], &[1, 5, 6], &[2, 7]]),
    (6, 4, &[&[0, 4, 5], &[1, 6], &[2, 7, 8], &[3, 9]]),
];

fn worked_tables() -> Vec<String> {
    let mut failures = Vec::new();
    for rules in [RuleSet::V026, RuleSet::Latest] {
        for &(a, f, rows) in TABLES {
            let topology = match Topology::new(a, f, rules, 6269) {
                Ok(t) => t,
                Err(err) => {
                    failures.push(format!("{a}A{f}F under {rules}: rejected ({err})"));
                    continue;
                }
            };
            for &(role, rr, world, p2p, sg, ris, members, dst) in rows {
                let Ok(rank) = topology.rank(role, rr) else {
                    failures.push(format!("{a}A{f}F under {rules}: no {role} rank {rr}"));
                    continue;
                };
                let got = (
                    rank.world_rank,
                    rank.p2p_rank,
                    rank.subgroup_index,
                    rank.rank_in_subgroup,
                );
                if got != (world, p2p, sg, ris)
                    || rank.subgroup_world_ranks != members
                    || rank.control_destinations != dst
                {
                    failures.push(format!(
                        "{a}A{f}F under {rules}, {role} {rr}: computed world {} p2p {:?} subgroup {} position {} members {:?} destinations {:?}; §2.4 says world {world} p2p {p2p:?} subgroup {sg} position {ris} members {members:?} destinations {dst:?}",
                        rank.world_rank, rank.p2p_rank, rank.subgroup_index, rank.rank_in_subgroup,
                        rank.subgroup_world_ranks, rank.control_destinations
                    ));
                }
            }
        }
    }
    for &(a, f, partition) in LATEST_PARTITIONS {
        match Topology::new(a, f, RuleSet::Latest, 6269) {
            Ok(topology) => {
                let got: Vec<Vec<u32>> = (0..f).map(|k| topology.subgroup_world_ranks(k)).collect();
                if got != partition {
                    failures.push(format!(
                        "{a}A{f}F under latest: subgroups {got:?}, §2.8 says {partition:?}"
                    ));
                }
            }
            Err(err) => failures.push(format!("{a}A{f}F under latest: rejected ({err})")),
        }
        if !matches!(
            Topology::new(a, f, RuleSet::V026, 6269),
            Err(TopologyError::NotAMultiple { .. })
        ) {
            failures.push(format!(
                "{a}A{f}F is not rejected as a non-multiple under v0.26"
            ));
        }
    }
    if !matches!(
        Topology::new(1, 2, RuleSet::Latest, 6269),
        Err(TopologyError::FewerAttentionThanFfn { .. })
    ) {
        failures.push("1A2F is not rejected (afd-spec §1.4 rule 5)".to_owned());
    }
    failures
}
