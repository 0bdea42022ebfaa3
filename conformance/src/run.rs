//! One run of the suite: build the target, judge the static invariants, wait for the pair, run the live
//! phases and the stateful sequences within the time budget, and collect a [`Report`].
//!
//! `--only` selects invariants by id, area or kind; a phase runs when it judges something selected. The
//! run never exits the process: the binary maps the report (or a [`RunError`]) to an exit code.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::catalog::{self, Invariant, Kind};
use crate::checks::{self, Outcomes, Session, Settings};
use crate::client::Client;
use crate::report::{CheckResult, Outcome, Report, TargetSummary};
use crate::stateful::{self, StatefulOptions};
use crate::target::{Target, TargetError, TargetOptions};

/// Everything a run needs.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub target: TargetOptions,
    pub settings: Settings,
    pub seed: u64,
    /// Stateful sequences to run at most.
    pub cases: u32,
    /// Longest stateful sequence.
    pub max_steps: usize,
    /// The whole run's budget; the stateful phase gets what the others leave.
    pub time_budget: Duration,
    /// How long to wait for `/v1/models` to answer before giving up (exit 2).
    pub ready_timeout: Duration,
    /// `--only` entries (ids, areas, kinds, `prefix*`); empty means everything.
    pub only: Vec<String>,
    /// The command that reproduces the run, for the report.
    pub rerun: String,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            target: TargetOptions::default(),
            settings: Settings::default(),
            seed: 0,
            cases: 32,
            max_steps: 12,
            time_budget: Duration::from_secs(300),
            ready_timeout: Duration::from_secs(60),
            only: Vec::new(),
            rerun: String::new(),
        }
    }
}

/// Why a run could not start: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("--only {0}")]
    Only(String),
}

/// The invariants `--only` selects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    ids: BTreeSet<&'static str>,
}

impl Selection {
    /// Resolves `--only` entries: an id, an area (`routing`), a kind (`static`, `live`, `stateful`), or a
    /// prefix ending in `*`. Every entry must select something.
    pub fn parse(only: &[String]) -> Result<Selection, String> {
        let all = catalog::catalog();
        if only.is_empty() {
            return Ok(Selection {
                ids: all.iter().map(|i| i.id).collect(),
            });
        }
        let mut ids = BTreeSet::new();
        for entry in only
            .iter()
            .flat_map(|e| e.split(','))
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let matches: Vec<&'static str> = all
                .iter()
                .filter(|i| selects(entry, i))
                .map(|i| i.id)
                .collect();
            if matches.is_empty() {
                return Err(format!(
                    "'{entry}' names no invariant, area or kind (see `afd-conformance list`)"
                ));
            }
            ids.extend(matches);
        }
        Ok(Selection { ids })
    }

    pub fn has(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    pub fn any(&self, ids: &[&str]) -> bool {
        ids.iter().any(|id| self.has(id))
    }

    fn any_kind(&self, kind: Kind) -> bool {
        catalog::catalog()
            .iter()
            .any(|i| i.kind == kind && self.has(i.id))
    }
}

fn selects(entry: &str, invariant: &Invariant) -> bool {
    if let Some(prefix) = entry.strip_suffix('*') {
        return invariant.id.starts_with(prefix);
    }
    entry == invariant.id
        || entry == invariant.area.as_str()
        || entry == invariant.kind.as_str()
        || invariant.id.split('.').next() == Some(entry)
}

/// Ids each live phase judges.
const READY_IDS: &[&str] = &[
    "api.models-ready",
    "mapping.rendezvous-listeners",
    "mapping.log-attention",
    "mapping.log-ffn",
    "mapping.engine-labels",
    "liveness.invalid-deployment-refused",
];
const API_IDS: &[&str] = &[
    "api.health",
    "api.unknown-model",
    "api.error-shape",
    "api.ignore-eos-length",
];
const LEDGER_IDS: &[&str] = &[
    "api.completion-shape",
    "api.chat-shape",
    "api.usage-arithmetic",
    "api.finish-reason",
    "api.request-id-echo",
    "api.one-response",
    "liveness.completes",
    "sse.framing",
    "sse.single-done",
    "sse.finish-once",
    "sse.usage",
];
const FFN_IDS: &[&str] = &["ffn.never-completes", "ffn.fails-fast"];
const GREEDY_IDS: &[&str] = &[
    "greedy.fixed-load",
    "greedy.stream-equals-full",
    "greedy.across-load",
];
const TIMING_IDS: &[&str] = &["timing.itl", "timing.ttft", "timing.simulator"];
/// Live ids that only an AFD pair can satisfy; with every static id they end indeterminate against a
/// plain vLLM server ([`crate::target::PLAIN_REASON`]).
const AFD_ONLY_LIVE_IDS: &[&str] = &[
    "mapping.rendezvous-listeners",
    "mapping.log-attention",
    "mapping.log-ffn",
    "ffn.never-completes",
    "ffn.fails-fast",
    "timing.simulator",
    "liveness.invalid-deployment-refused",
];

/// The invariants that say nothing about a plain (non-AFD) vLLM server.
pub fn afd_only_ids() -> Vec<&'static str> {
    catalog::catalog()
        .iter()
        .map(|i| i.id)
        .filter(|id| {
            AFD_ONLY_LIVE_IDS.contains(id)
                || catalog::find(id).is_some_and(|i| i.kind == Kind::Static)
        })
        .collect()
}

/// How long after the time budget a phase still cut short may take to hand back: the run ends within
/// `--time-budget` plus this (and the reports' writing).
pub const BUDGET_GRACE: Duration = Duration::from_secs(1);

/// Collects results with the time their phase took.
struct Collector {
    selection: Selection,
    results: Vec<CheckResult>,
}

impl Collector {
    fn add(&mut self, outcomes: Outcomes, duration: Duration) {
        for (id, outcome) in outcomes {
            if !self.selection.has(id) || self.results.iter().any(|r| r.invariant.id == id) {
                continue;
            }
            let invariant = catalog::find(id)
                .unwrap_or_else(|| panic!("check reported id '{id}', which the catalog lacks"));
            self.results.push(CheckResult {
                invariant,
                outcome,
                duration,
            });
        }
    }

    /// Gives every selected id of `ids` without a result the same outcome.
    fn fill(&mut self, ids: &[&'static str], outcome: &Outcome) {
        let outcomes = ids.iter().map(|&id| (id, outcome.clone())).collect();
        self.add(outcomes, Duration::ZERO);
    }
}

/// Runs the suite.
pub async fn run(
    options: RunOptions,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<Report, RunError> {
    let started = Instant::now();
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let selection = Selection::parse(&options.only).map_err(RunError::Only)?;
    let target = Target::build(&options.target)?;
    let summary = TargetSummary {
        attention_url: Some(target.attention.url()),
        ffn_url: target.ffn.as_ref().map(crate::client::Endpoint::url),
        deployment: target.deployment_origin.clone(),
        rules: target.rules.to_string(),
    };
    let mut collector = Collector {
        selection: selection.clone(),
        results: Vec::new(),
    };

    if target.plain {
        collector.fill(
            &afd_only_ids(),
            &Outcome::indeterminate(format!(
                "{}: this invariant is about an AFD pair",
                crate::target::PLAIN_REASON
            )),
        );
    }
    progress("static invariants");
    let phase = Instant::now();
    collector.add(checks::deployment::check(&target), phase.elapsed());
    let deployment_errors: Vec<String> = target
        .check_deployment()
        .map(|report| {
            report
                .findings()
                .iter()
                .filter(|f| f.severity == afd_sim::deployment::Severity::Error)
                .map(checks::deployment::describe)
                .collect()
        })
        .unwrap_or_default();

    let mut aborted = None;
    if selection.any_kind(Kind::Live) || selection.any_kind(Kind::Stateful) {
        aborted = live(
            &options,
            target,
            &selection,
            &mut collector,
            &deployment_errors,
            started,
            progress,
        )
        .await;
    }
    // Anything selected that no phase judged (a phase skipped for the budget or an abort).
    let leftover: Vec<&'static str> = catalog::catalog()
        .iter()
        .map(|i| i.id)
        .filter(|id| selection.has(id))
        .collect();
    let reason = aborted.as_ref().map_or_else(
        || "not run: the time budget was spent".to_owned(),
        |a| format!("not run: {a}"),
    );
    collector.fill(&leftover, &Outcome::indeterminate(reason));

    let mut report = Report {
        seed: options.seed,
        target: summary,
        results: collector.results,
        duration: started.elapsed(),
        started_unix_s,
        rerun: options.rerun.clone(),
        aborted,
    };
    report.sort();
    Ok(report)
}

/// The live and stateful phases. Returns why the run could not proceed, if it could not.
async fn live(
    options: &RunOptions,
    target: Target,
    selection: &Selection,
    collector: &mut Collector,
    deployment_errors: &[String],
    started: Instant,
    progress: &(dyn Fn(&str) + Sync),
) -> Option<String> {
    let client = Client {
        timeout: options.settings.request_timeout,
        ..Client::default()
    };
    let provisional_model = target.expect.served_model.clone().unwrap_or_default();
    // The budget covers the whole run, readiness included: every call ends by `deadline`, and each
    // phase is dropped `BUDGET_GRACE` after it at the latest.
    let deadline = tokio::time::Instant::from_std(started + options.time_budget);
    let backstop = deadline + BUDGET_GRACE;
    let session = Session::new(
        client,
        target,
        options.settings.clone(),
        options.seed,
        provisional_model,
    )
    .with_deadline(deadline, options.time_budget);

    progress("waiting for the pair");
    let phase = Instant::now();
    let within = options.ready_timeout.min(session.remaining());
    if let Err(reason) = checks::api::wait_ready(&session, within).await {
        let reason = if within < options.ready_timeout {
            format!("{reason} (the time budget allowed no longer)")
        } else {
            reason
        };
        let refused = if deployment_errors.is_empty() {
            Outcome::skipped("the deployment has no rule errors")
        } else {
            Outcome::pass(format!(
                "the pair does not serve; its deployment breaks rules: {}",
                deployment_errors[0]
            ))
        };
        collector.add(
            vec![("liveness.invalid-deployment-refused", refused)],
            phase.elapsed(),
        );
        return Some(reason);
    }
    let Ok((models, first)) =
        tokio::time::timeout_at(backstop, checks::api::models_ready(&session)).await
    else {
        return None;
    };
    let model = session
        .target
        .expect
        .served_model
        .clone()
        .or(first)
        .unwrap_or_else(|| "default".to_owned());
    let session = Arc::new(session.with_model(model));
    let mut ready = vec![("api.models-ready", models)];
    ready.push((
        "liveness.invalid-deployment-refused",
        if session.target.deployment.is_none() {
            Outcome::skipped("no deployment given")
        } else if deployment_errors.is_empty() {
            Outcome::skipped("the deployment breaks no rule")
        } else {
            Outcome::fail(format!(
                "the pair serves although its deployment breaks {} rule(s): {}",
                deployment_errors.len(),
                deployment_errors[0]
            ))
            .with_counterexample(format!(
                "GET /v1/models answered 200 on {}; deployment errors:\n{}",
                session.target.attention.url(),
                deployment_errors.join("\n")
            ))
        },
    ));
    if selection.any(READY_IDS)
        && let Ok(outcomes) =
            tokio::time::timeout_at(backstop, checks::mapping::live(&session)).await
    {
        ready.extend(outcomes);
    }
    collector.add(ready, phase.elapsed());

    let budget_left = |reserve: Duration| {
        options
            .time_budget
            .saturating_sub(started.elapsed())
            .saturating_sub(reserve)
    };
    let needs_traffic = selection.any(LEDGER_IDS);
    type Phase = (&'static str, &'static [&'static str]);
    // The FFN port first: on a shared host:port its probes need a pair that has not been loaded yet.
    let phases: [Phase; 5] = [
        ("ffn", FFN_IDS),
        ("api", API_IDS),
        ("routing", checks::routing::ids()),
        ("greedy", GREEDY_IDS),
        ("timing", TIMING_IDS),
    ];
    for (name, ids) in phases {
        if !(selection.any(ids) || (name == "api" && needs_traffic)) {
            continue;
        }
        if budget_left(Duration::ZERO).is_zero() {
            break;
        }
        progress(name);
        let phase = Instant::now();
        let checked = async {
            match name {
                "api" => checks::api::check(&session).await,
                "routing" => checks::routing::check(&session).await,
                "ffn" => checks::ffn::check(&session).await,
                "greedy" => checks::greedy::check(&session).await,
                _ => checks::timing::check(&session).await,
            }
        };
        // A phase the budget cuts short reports nothing; its ids end indeterminate below.
        let Ok(outcomes) = tokio::time::timeout_at(backstop, checked).await else {
            break;
        };
        collector.add(outcomes, phase.elapsed());
    }

    if selection.any(&stateful::IDS) {
        progress("stateful sequences");
        let phase = Instant::now();
        let engines = session.target.expect.attention_dp.unwrap_or(1);
        let stateful_options = StatefulOptions {
            cases: options.cases,
            // Keep a little for the ledger and the reports.
            budget: budget_left(Duration::from_secs(2)),
            max_steps: options.max_steps,
            seed: options.seed,
            engines,
        };
        let handle = tokio::runtime::Handle::current();
        let shared = Arc::clone(&session);
        let task =
            tokio::task::spawn_blocking(move || stateful::run(&shared, &handle, &stateful_options));
        let outcomes = tokio::time::timeout_at(backstop, task)
            .await
            .unwrap_or_else(|_| {
                Ok(stateful::IDS
                    .iter()
                    .map(|&id| {
                        (
                            id,
                            Outcome::indeterminate("the time budget ran out during the phase"),
                        )
                    })
                    .collect())
            })
            .unwrap_or_else(|err| {
                stateful::IDS
                    .iter()
                    .map(|&id| {
                        (
                            id,
                            Outcome::indeterminate(format!("the stateful phase crashed: {err}")),
                        )
                    })
                    .collect()
            });
        collector.add(outcomes, phase.elapsed());
    }

    if needs_traffic {
        let phase = Instant::now();
        let outcomes = session.with_ledger(|ledger| {
            checks::ledger::judge(
                ledger,
                session.target.expect.request_id_headers,
                session.stall(),
                &session.silent_posts(),
            )
        });
        collector.add(outcomes, phase.elapsed());
    }
    None
}

#[cfg(test)]
mod tests;
