//! Rank-mapping invariants (afd-spec §2) on what a live pair exposes: listeners on the rendezvous ports,
//! logged mapping lines, `/metrics` engine labels.
//!
//! The expected mapping is `afd_sim::topology`'s for the deployment as launched, the same one the
//! simulator and the twin use; the live checks compare the pair against it. The mapping's own pure
//! properties (afd-spec §2.1, §2.4, §2.8) are afd-sim's tests (sim/tests/it/topology.rs), not
//! invariants of a pair.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use afd_sim::topology::{RankInfo, Role, Topology};

use crate::checks::{Outcomes, Session};
use crate::client::Connect;
use crate::report::Outcome;

/// The marker of a mapping line (the twin's start-up log format).
pub const LOG_MARKER: &str = "AFD rank mapping: ";
/// Largest log file read.
pub const MAX_LOG_BYTES: u64 = 256 << 20;

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
