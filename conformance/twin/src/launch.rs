//! What a twin is launched as: one role's `vllm serve` words read by `afd-sim`'s deployment model
//! (`afd_sim::deployment::RoleConfig`, the reader `afd-sim check` uses), checked by the same rules, and
//! the pair checked again once the peer's words arrive at the rendezvous.
//!
//! Before the rendezvous only the rules about this role can be judged (the cross-role rules need the
//! peer); after it, [`judge_pair`] runs `afd-sim check` on the two command lines exactly. Errors refuse
//! the start; warnings and notes are logged by the caller.

use std::collections::BTreeMap;

use afd_sim::deployment::{Deployment, Finding, RoleConfig, ServeArgsError, Severity};
use afd_sim::topology::{Role, RuleSet, Topology, TopologyError};

/// Environment variables the deployment model reads and the peer is told about; nothing else of the
/// environment leaves the process.
pub fn relevant_env(env: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    env.into_iter()
        .filter(|(name, _)| {
            name == "CUDA_VISIBLE_DEVICES" || name.starts_with("VLLM_") || name.starts_with("AFD_")
        })
        .collect()
}

/// One role ready to run: its parsed command line and the facts the twin needs from it.
#[derive(Clone, Debug)]
pub struct LaunchedRole {
    pub config: RoleConfig,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub rules: RuleSet,
    pub role: Role,
    pub topology: Topology,
    /// Names the server answers to; the first is used in responses.
    pub model_names: Vec<String>,
    pub model: String,
    pub afd_host: String,
    pub afd_port: u16,
    pub connector: String,
    pub async_dp: bool,
    pub compute_gate_on_attention: bool,
    pub seed: u64,
    /// Findings that do not stop the start (warnings and notes about this role).
    pub findings: Vec<String>,
}

/// Why a role cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("{}", render_args_error(.0))]
    Arguments(ServeArgsError),
    #[error("the deployment breaks {} rule(s) of afd-sim check:\n  {}", .0.len(), .0.join("\n  "))]
    Violations(Vec<String>),
    #[error("{0}")]
    Topology(#[from] TopologyError),
    #[error("--seed: expected a non-negative integer, got '{0}'")]
    Seed(String),
}

fn render_args_error(err: &ServeArgsError) -> String {
    err.errors
        .iter()
        .map(|e| format!("{}: {}", e.location.render("args"), e.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `afd-sim check`'s rendering of one finding, with the source name `source`.
pub fn render_finding(finding: &Finding, source: &str) -> String {
    let place = finding
        .location
        .map_or_else(|| source.to_owned(), |l| l.render(source));
    let role = finding.role.map_or_else(String::new, |r| format!(" {r}"));
    let subject = finding
        .subject
        .as_ref()
        .map_or_else(String::new, |s| format!(" {s}"));
    format!(
        "{place}: {}[{}]{role}{subject}: {}",
        finding.severity.as_str(),
        finding.rule.info().id,
        finding.message
    )
}

impl LaunchedRole {
    /// Reads and checks one role. The rules about this role run on a deployment that pairs it with a
    /// copy of itself; cross-role findings and findings about the copy are left for [`judge_pair`].
    pub fn new(
        args: &[String],
        env: BTreeMap<String, String>,
        rules: RuleSet,
    ) -> Result<LaunchedRole, LaunchError> {
        let config =
            RoleConfig::from_serve_args_with_env(args, &env).map_err(LaunchError::Arguments)?;
        let declared = config.declared_role();
        let role = declared.unwrap_or(Role::Attention);
        // Findings about the copy in the other slot are dropped below, so the slot order is irrelevant.
        let deployment = Deployment::new(config.clone(), config.clone(), rules);
        let report = deployment.check();
        let mut errors = Vec::new();
        let mut findings = Vec::new();
        for finding in report.findings() {
            let id = finding.rule.info().id;
            if id.starts_with("cross.") || finding.role.is_some_and(|r| r != role) {
                continue;
            }
            let text = render_finding(finding, "args");
            if finding.severity == Severity::Error {
                errors.push(text);
            } else {
                findings.push(text);
            }
        }
        if declared.is_none() && errors.is_empty() {
            errors.push("args: error[afd.role] the afd block declares no valid role (\"attention\" or \"ffn\")".to_owned());
        }
        if !errors.is_empty() {
            return Err(LaunchError::Violations(errors));
        }
        let afd = config
            .afd()
            .expect("a clean check means the afd block is present");
        let topology = deployment.topology()?;
        // Judged here rather than at the rendezvous: a twin whose HTTP socket holds a rendezvous port
        // could never meet its peer.
        let ports = topology.rendezvous_ports();
        if ports.contains(&config.http_port()) {
            return Err(LaunchError::Violations(vec![format!(
                "args: error[cross.http-port-vs-rendezvous] {role} --port: HTTP port {} collides with the AFD rendezvous ports {ports:?} (afd-spec §2.3)",
                config.http_port()
            )]));
        }
        let seed = match config
            .unknown_flags
            .iter()
            .rev()
            .find(|f| f.flag == "--seed")
        {
            None => 0,
            Some(flag) => {
                let text = flag.value.clone().unwrap_or_default();
                text.parse::<u64>().map_err(|_| LaunchError::Seed(text))?
            }
        };
        Ok(LaunchedRole {
            model_names: config
                .served_model_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            model: config.model().unwrap_or("").to_owned(),
            afd_host: afd.host.value.clone(),
            afd_port: afd
                .port()
                .unwrap_or(afd_sim::deployment::afd_config::DEFAULT_AFD_PORT),
            connector: afd.connector.value.clone(),
            async_dp: afd.async_dp.value.unwrap_or(false),
            compute_gate_on_attention: afd.compute_gate_on_attention.value.unwrap_or(false),
            seed,
            findings,
            args: args.to_vec(),
            env,
            rules,
            role,
            topology,
            config,
        })
    }

    pub fn model_name(&self) -> &str {
        self.model_names.first().map_or("", String::as_str)
    }
}

/// `afd-sim check` on the pair, from both roles' words: the error findings, rendered (empty when the
/// pair may run), and the warnings.
pub fn judge_pair(
    local: (&[String], &BTreeMap<String, String>),
    peer: (&[String], &BTreeMap<String, String>),
    rules: RuleSet,
) -> (Vec<String>, Vec<String>) {
    let parse = |(args, env): (&[String], &BTreeMap<String, String>), source: &str| {
        RoleConfig::from_serve_args_with_env(args, env)
            .map_err(|err| format!("{source}: {}", render_args_error(&err)))
    };
    let (first, second) = match (
        parse(local, "this twin's args"),
        parse(peer, "the peer's args"),
    ) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return (vec![e], Vec::new()),
    };
    let deployment = Deployment::from_roles(first, second, rules);
    let report = deployment.check();
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    for finding in report.findings() {
        match finding.severity {
            Severity::Error => errors.push(render_finding(finding, "pair")),
            Severity::Warning => warnings.push(render_finding(finding, "pair")),
            Severity::Note => {}
        }
    }
    (errors, warnings)
}

#[cfg(test)]
mod tests;
