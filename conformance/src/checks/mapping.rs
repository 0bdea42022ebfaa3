//! Rank-mapping invariants (afd-spec §2): the pure properties of §2.8 checked over generated shapes with
//! proptest (seeded by the run, shrunk to the smallest failing shape), the worked tables of §2.4, and what
//! a live pair exposes: listeners on the rendezvous ports, logged mapping lines, `/metrics` engine labels.
//!
//! The mapping under test is `afd_sim::topology`, the same one the simulator and the twin use; the live
//! checks compare the pair against it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

use afd_sim::topology::{RankInfo, Role, RuleSet, Topology, TopologyError, role_rank};

use crate::checks::{Outcomes, Session};
use crate::client::Connect;
use crate::report::Outcome;

/// The marker of a mapping line (the twin's start-up log format).
pub const LOG_MARKER: &str = "AFD rank mapping: ";
/// Largest log file read.
pub const MAX_LOG_BYTES: u64 = 256 << 20;
/// Largest rank count the generated shapes use.
pub const MAX_RANKS: u32 = 64;

type Property = fn(&Topology) -> Result<(), String>;

/// The §2.8 properties, one per invariant id.
const PROPERTIES: &[(&str, Property)] = &[
    ("mapping.world-order", world_order),
    ("mapping.p2p-ranks", p2p_ranks),
    ("mapping.subgroup-head", subgroup_head),
    ("mapping.subgroup-partition", subgroup_partition),
    ("mapping.roles-agree", roles_agree),
    ("mapping.control-destinations", control_destinations),
    ("mapping.ports", ports),
];

/// Runs the pure properties: `cases` generated shapes per property and rule set.
pub fn properties(seed: u64, cases: u32) -> Outcomes {
    let mut out: Outcomes = PROPERTIES
        .iter()
        .map(|&(id, property)| (id, check_shapes(id, seed, cases, property)))
        .collect();
    out.push((
        "mapping.role-rank-bijection",
        role_rank_bijection(seed, cases),
    ));
    out.push(("mapping.worked-tables", worked_tables()));
    out.push(("mapping.receive-rows", receive_rows(seed, cases)));
    out
}

fn runner(seed: u64, id: &str, cases: u32) -> TestRunner {
    let config = Config {
        cases: cases.max(1),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&crate::stable_hash(id.as_bytes()).to_le_bytes());
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

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

fn check_shapes(id: &str, seed: u64, cases: u32, property: Property) -> Outcome {
    for rules in [RuleSet::V026, RuleSet::Latest] {
        let mut runner = runner(seed, id, cases);
        let result = runner.run(&(shapes(rules), 1000u16..60000), |((a, f), port)| {
            let topology = Topology::new(a, f, rules, port)
                .map_err(|err| TestCaseError::fail(format!("no mapping: {err}")))?;
            property(&topology).map_err(TestCaseError::fail)
        });
        match result {
            Ok(()) => {}
            Err(TestError::Fail(reason, ((a, f), port))) => {
                return Outcome::fail(format!("{a}A{f}F under {rules}: {reason}"))
                    .with_counterexample(format!(
                        "num_attention_ranks={a} num_ffn_ranks={f} port={port} rules={rules} (shrunk; seed {seed}): {reason}"
                    ));
            }
            Err(TestError::Abort(reason)) => {
                return Outcome::indeterminate(format!("property run aborted: {reason}"));
            }
        }
    }
    Outcome::pass(format!(
        "{cases} generated shapes (A, F <= {MAX_RANKS}) under v0.26 and latest"
    ))
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

fn role_rank_bijection(seed: u64, cases: u32) -> Outcome {
    let mut runner = runner(seed, "mapping.role-rank-bijection", cases);
    let result = runner.run(&(1u32..=8, 1u32..=8, 1u32..=8), |(dp, pcp, tp)| {
        let size = u64::from(dp * pcp * tp);
        let mut seen = BTreeSet::new();
        for d in 0..dp {
            for p in 0..pcp {
                for t in 0..tp {
                    let rank = role_rank(d, p, t, pcp, tp);
                    if rank >= size {
                        return Err(TestCaseError::fail(format!(
                            "(dp {d}, pcp {p}, tp {t}) maps to {rank}, outside 0..{size}"
                        )));
                    }
                    if !seen.insert(rank) {
                        return Err(TestCaseError::fail(format!(
                            "(dp {d}, pcp {p}, tp {t}) maps to {rank}, already taken"
                        )));
                    }
                }
            }
        }
        Ok(())
    });
    match result {
        Ok(()) => Outcome::pass(format!(
            "{cases} generated DP x PCP x TP shapes up to 8 x 8 x 8"
        )),
        Err(TestError::Fail(reason, (dp, pcp, tp))) => Outcome::fail(reason.to_string())
            .with_counterexample(format!(
                "DP={dp} PCP={pcp} TP={tp} (shrunk; seed {seed}): {reason}"
            )),
        Err(TestError::Abort(reason)) => {
            Outcome::indeterminate(format!("property run aborted: {reason}"))
        }
    }
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

fn worked_tables() -> Outcome {
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
    Outcome::from_failures(
        "1A1F, 2A1F, 2A2F, 4A2F, 4A4F under both rule sets; 3A2F, 5A2F, 5A3F, 6A4F partitions; 1A2F rejected",
        &failures,
    )
}

fn receive_rows(seed: u64, cases: u32) -> Outcome {
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
        if got.as_deref() != Some(expected) {
            return Outcome::fail(format!(
                "{a}A{f}F FFN {k} with counts {counts:?} receives {got:?}, §2.8 says {expected:?}"
            ));
        }
    }
    let mut runner = runner(seed, "mapping.receive-rows", cases);
    let strategy = (
        shapes(RuleSet::Latest),
        proptest::collection::vec(0u32..100, 1..=64),
    );
    let result = runner.run(&strategy, |((a, f), raw)| {
        let topology = Topology::new(a, f, RuleSet::Latest, 6269)
            .map_err(|err| TestCaseError::fail(err.to_string()))?;
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
            if rows.len() != block.len() {
                return Err(TestCaseError::fail(format!(
                    "FFN {k} receives {} tensors from a block of {}",
                    rows.len(),
                    block.len()
                )));
            }
            for (row, peer) in rows.iter().zip(block) {
                let expected = counts[peer as usize / repeat].max(1);
                if *row != expected {
                    return Err(TestCaseError::fail(format!(
                        "FFN {k} receives {row} rows from Attention {peer}, expected max(1, {}) = {expected}",
                        counts[peer as usize / repeat]
                    )));
                }
                total += u64::from(*row);
            }
        }
        let expected_total: u64 = (0..a as usize)
            .map(|p| u64::from(counts[p / repeat].max(1)))
            .sum();
        if total != expected_total {
            return Err(TestCaseError::fail(format!(
                "FFN ranks receive {total} rows in all, expected {expected_total}"
            )));
        }
        Ok(())
    });
    match result {
        Ok(()) => Outcome::pass(format!("§2.8 examples and {cases} generated token vectors")),
        Err(TestError::Fail(reason, ((a, f), counts))) => Outcome::fail(reason.to_string())
            .with_counterexample(format!(
                "{a}A{f}F counts {counts:?} (shrunk; seed {seed}): {reason}"
            )),
        Err(TestError::Abort(reason)) => {
            Outcome::indeterminate(format!("property run aborted: {reason}"))
        }
    }
}

/// The live mapping checks: listeners, logs, engine labels.
pub async fn live(session: &Session) -> Outcomes {
    let topology = match &session.target.expect.topology {
        None => Err("no deployment given, so the mapping is unknown".to_owned()),
        Some(Err(err)) => Err(format!("the deployment has no rank mapping: {err}")),
        Some(Ok(t)) => Ok(t.clone()),
    };
    let mut out = Vec::new();
    out.push((
        "mapping.rendezvous-listeners",
        listeners(session, &topology).await,
    ));
    let expect = &session.target.expect;
    out.push((
        "mapping.log-attention",
        log_check(
            session.target.attention_log.as_deref(),
            Role::Attention,
            expect.attention_tp,
            &topology,
            "--attention-log",
        ),
    ));
    out.push((
        "mapping.log-ffn",
        log_check(
            session.target.ffn_log.as_deref(),
            Role::Ffn,
            expect.ffn_tp,
            &topology,
            "--ffn-log",
        ),
    ));
    out.push(("mapping.engine-labels", engine_labels(session).await));
    out
}

async fn listeners(session: &Session, topology: &Result<Topology, String>) -> Outcome {
    let topology = match topology {
        Ok(t) => t,
        Err(reason) => return Outcome::skipped(reason.clone()),
    };
    let host = session
        .target
        .expect
        .afd_host
        .clone()
        .unwrap_or_else(|| "127.0.0.1".to_owned());
    let mut refused = Vec::new();
    let mut unreachable = Vec::new();
    let ports = topology.rendezvous_ports();
    for &port in &ports {
        match session.client.probe_tcp(&host, port).await {
            Connect::Accepted => {}
            Connect::Refused => refused.push(port),
            Connect::TimedOut => unreachable.push(format!("{port} (timed out)")),
            Connect::Failed(err) => unreachable.push(format!("{port} ({err})")),
        }
    }
    if !refused.is_empty() {
        return Outcome::fail(format!(
            "nothing listens on rendezvous port(s) {refused:?} of {host} (expected {ports:?} under {})",
            topology.rules()
        ))
        .with_counterexample(format!(
            "TCP connect to {host}:{} was refused; the AFD store of world rank 0 (FFN rank 0) should listen there (afd-spec §2.3)",
            refused[0]
        ));
    }
    if !unreachable.is_empty() {
        return Outcome::indeterminate(format!(
            "cannot reach {host} on {}",
            unreachable.join(", ")
        ));
    }
    Outcome::pass(format!("{host} accepts connections on {ports:?}"))
}

/// A parsed mapping line: its key=value fields and where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRank {
    pub line: usize,
    pub fields: BTreeMap<String, String>,
}

/// Reads the mapping lines of a log (ANSI colour codes removed).
pub fn parse_log(text: &str) -> Vec<LoggedRank> {
    text.lines()
        .enumerate()
        .filter_map(|(n, line)| {
            let clean = strip_ansi(line);
            let at = clean.find(LOG_MARKER)?;
            let fields = clean[at + LOG_MARKER.len()..]
                .split_whitespace()
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            Some(LoggedRank {
                line: n + 1,
                fields,
            })
        })
        .collect()
}

fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn list(values: &[impl ToString]) -> String {
    let items: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(","))
}

/// The fields a correct line for `rank` carries.
pub fn expected_fields(rank: &RankInfo, tp: u32) -> BTreeMap<String, String> {
    let tp = tp.max(1);
    let mut fields = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        fields.insert(k.to_owned(), v);
    };
    put("role", rank.role.as_str().to_owned());
    put("role_rank", rank.role_rank.to_string());
    put("dp_rank", (rank.role_rank / tp).to_string());
    put("tp_rank", (rank.role_rank % tp).to_string());
    put("world_rank", rank.world_rank.to_string());
    put(
        "p2p_rank",
        rank.p2p_rank
            .map_or_else(|| "none".to_owned(), |r| r.to_string()),
    );
    put("subgroup_index", rank.subgroup_index.to_string());
    put("rank_in_subgroup", rank.rank_in_subgroup.to_string());
    put("subgroup_world_ranks", list(&rank.subgroup_world_ranks));
    put("control_destinations", list(&rank.control_destinations));
    put("ports", list(&rank.ports));
    fields
}

fn log_check(
    path: Option<&Path>,
    role: Role,
    tp: u32,
    topology: &Result<Topology, String>,
    flag: &str,
) -> Outcome {
    let Some(path) = path else {
        return Outcome::skipped(format!("no {flag} given"));
    };
    let topology = match topology {
        Ok(t) => t,
        Err(reason) => return Outcome::skipped(reason.clone()),
    };
    let text = match read_log(path) {
        Ok(text) => text,
        Err(err) => {
            return Outcome::indeterminate(format!("cannot read {}: {err}", path.display()));
        }
    };
    let logged: Vec<LoggedRank> = parse_log(&text)
        .into_iter()
        .filter(|l| l.fields.get("role").map(String::as_str) == Some(role.as_str()))
        .collect();
    if logged.is_empty() {
        return Outcome::indeterminate(format!(
            "{} has no `{}role={role}` lines (vLLM does not print them; the twin does)",
            path.display(),
            LOG_MARKER
        ));
    }
    let size = match role {
        Role::Attention => topology.attention_ranks(),
        Role::Ffn => topology.ffn_ranks(),
    };
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for entry in &logged {
        let rank_text = entry.fields.get("role_rank").cloned().unwrap_or_default();
        let Ok(role_rank) = rank_text.parse::<u32>() else {
            failures.push(format!(
                "{}:{}: role_rank '{rank_text}' is not a rank",
                path.display(),
                entry.line
            ));
            continue;
        };
        let Ok(rank) = topology.rank(role, role_rank) else {
            failures.push(format!(
                "{}:{}: {role} role_rank {role_rank} does not exist ({size} {role} ranks)",
                path.display(),
                entry.line
            ));
            continue;
        };
        if !seen.insert(role_rank) {
            failures.push(format!(
                "{}:{}: {role} rank {role_rank} logged twice",
                path.display(),
                entry.line
            ));
        }
        for (key, expected) in expected_fields(&rank, tp) {
            let got = entry.fields.get(&key);
            if got != Some(&expected) {
                failures.push(format!(
                    "{}:{}: {role} rank {role_rank} logs {key}={}, the mapping gives {key}={expected} (afd-spec §2.2, rules {})",
                    path.display(),
                    entry.line,
                    got.map_or("(missing)", String::as_str),
                    topology.rules()
                ));
            }
        }
    }
    let missing: Vec<u32> = (0..size).filter(|r| !seen.contains(r)).collect();
    if !missing.is_empty() {
        failures.push(format!(
            "{}: no line for {role} rank(s) {missing:?}",
            path.display()
        ));
    }
    Outcome::from_failures(
        format!(
            "{} {role} rank lines equal the computed mapping",
            logged.len()
        ),
        &failures,
    )
}

fn read_log(path: &Path) -> std::io::Result<String> {
    use std::io::Read as _;
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_LOG_BYTES).read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

async fn engine_labels(session: &Session) -> Outcome {
    let scrape = match session.scrape().await {
        Ok(scrape) => scrape,
        Err(err) => return Outcome::fail(format!("cannot read /metrics: {err}")),
    };
    let labels = scrape.engine_labels();
    let Some(n) = session.target.expect.attention_dp else {
        return Outcome::indeterminate(format!(
            "engine labels {labels:?}, but the Attention DP size is unknown (give a deployment or --attention-dp)"
        ));
    };
    let expected: BTreeSet<String> = (0..n).map(|e| e.to_string()).collect();
    if labels == expected {
        Outcome::pass(format!(
            "engine labels are 0..{} for Attention DP {n}",
            n.saturating_sub(1)
        ))
    } else {
        Outcome::fail(format!(
            "engine labels {labels:?} on vllm: series, expected {expected:?} for Attention DP {n}"
        ))
        .with_counterexample(format!(
            "GET /metrics: engine label values {labels:?}; Attention DP size {n} from the deployment"
        ))
    }
}

#[cfg(test)]
mod tests;
