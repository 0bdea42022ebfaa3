//! The single model of an AFD deployment shared by the simulator, the twin and the conformance
//! suite (DESIGN §3): two `vllm serve` roles read from a recipe script or from raw argument lists,
//! validated under a rule set, and mapped onto ranks by [`crate::topology`].
//!
//! Building one:
//! - [`Deployment::from_recipe`] reads a recipe script (the shell subset of [`recipe`]);
//! - [`RoleConfig::from_command_line`] reads one role's command line (`--attention-args`), and
//!   [`Deployment::new`] pairs two roles;
//! - [`RoleConfig::from_serve_args`] reads the words after `vllm serve` (what the twin receives).
//!
//! Checking one: [`Deployment::check`] runs every rule of [`rules::rules`] that the deployment's
//! [`RuleSet`] applies and returns a [`Report`] with every finding at once; [`Report::is_clean`]
//! says whether it may run. Bad input (recipe syntax, a non-integer `--max-num-seqs`, malformed
//! JSON) is a [`DeploymentError`] instead, located as precisely as the input allows.
//!
//! What the simulator reads, per role ([`RoleConfig`]; defaults documented on each accessor):
//! `dp_size`, `tp_size`, `pcp_size`, `pp_size`, `rank_count` (DP×PCP×TP), `gpu_count`,
//! `expert_parallel`, `eplb`, `max_num_seqs`, `max_num_batched_tokens`, `max_model_len`,
//! `gpu_memory_utilization`, `dbo` (thresholds when DBO is on), `num_ubatches`, `enforce_eager`,
//! `cudagraph_mode`, `uses_cuda_graphs`, `capture_sizes` (sorted, as vLLM resolves them),
//! `max_capture_size`, `padded_graph_size(tokens)`; and for the pair, [`Deployment::topology`].
//! What the twin reads: `model`, `served_model_names`, `http_host`, `http_port`, `afd()` (host,
//! port, role, rank counts), `declared_role`, `gpus`, `env_value`.

pub mod afd_config;
pub mod compilation;
pub mod findings;
pub(crate) mod json_keys;
pub mod location;
pub mod recipe;
pub mod role_config;
pub mod rules;
pub mod serve_args;
mod validate;

pub use afd_config::{AfdConfig, AfdField};
pub use compilation::{CompilationConfig, CudaGraphMode};
pub use findings::{Finding, Report, Severity, Subject};
pub use location::{Located, Location};
pub use recipe::{Recipe, RecipeError, RecipeOptions, ServeCommand, Word, parse_recipe};
pub use role_config::{Dbo, GpuClass, GpuId, ModelRunner, RoleConfig, UnknownFlag, padded_size};
pub use rules::{Rule, RuleInfo, rules, rules_of};
pub use serve_args::{ArgError, ServeArgsError};
pub(crate) use validate::check_plain;

use std::collections::BTreeMap;

use crate::topology::{Role, RuleSet, Topology, TopologyError};

/// An Attention and an FFN `vllm serve` command, judged by one rule set.
#[derive(Clone, Debug, PartialEq)]
pub struct Deployment {
    /// The Attention role's primary command: the one that starts DP rank 0 and the API server.
    pub attention: RoleConfig,
    /// The FFN role's primary command (DP rank 0: FFN rank 0, world rank 0, afd-spec §2.1).
    pub ffn: RoleConfig,
    /// The other commands of roles whose DP ranks are spread over hosts (vLLM's multi-node data
    /// parallelism: `--data-parallel-size-local`, `--data-parallel-start-rank`, usually
    /// `--headless`), each one host's share of its declared role; empty when each role is one
    /// command.
    pub nodes: Vec<RoleConfig>,
    pub rules: RuleSet,
}

/// Input that does not describe a deployment at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeploymentError {
    /// The recipe is outside the accepted shell subset.
    #[error(transparent)]
    Recipe(#[from] RecipeError),
    /// Flags, JSON or environment values of one or more commands do not parse.
    #[error(transparent)]
    Arguments(#[from] ServeArgsError),
    /// The recipe does not start exactly one Attention and one FFN server.
    #[error("{location}: {message}")]
    Shape { location: Location, message: String },
}

impl DeploymentError {
    /// Every problem as (location, subject, message), in input order.
    pub fn problems(&self) -> Vec<(Location, Option<&Subject>, String)> {
        match self {
            DeploymentError::Recipe(err) => vec![(err.location(), None, err.message.clone())],
            DeploymentError::Arguments(err) => err
                .errors
                .iter()
                .map(|e| (e.location, e.subject.as_ref(), e.message.clone()))
                .collect(),
            DeploymentError::Shape { location, message } => {
                vec![(*location, None, message.clone())]
            }
        }
    }
}

impl RoleConfig {
    /// Reads one role's command line: optional `NAME=value` prefixes (the environment), then
    /// `vllm serve ARGS`, `uv run vllm serve ARGS` or bare `ARGS`, quoted as in a shell.
    pub fn from_command_line(
        text: &str,
        options: &RecipeOptions,
    ) -> Result<RoleConfig, DeploymentError> {
        let command = recipe::parse_command_line(text, options)?;
        Ok(serve_args::parse_words(
            &command.args,
            command.env,
            command.location,
        )?)
    }

    /// Reads a `vllm serve` command of a parsed recipe.
    pub fn from_serve_command(command: &ServeCommand) -> Result<RoleConfig, ServeArgsError> {
        serve_args::parse_words(&command.args, command.env.clone(), command.location)
    }
}

impl Deployment {
    /// Whether some command of each role names its host (`VLLM_HOST_IP`) and an Attention host
    /// differs from an FFN host: those A↔F hand-offs then cross the network between hosts.
    pub fn on_different_hosts(&self) -> bool {
        let ffn = self.role_hosts(Role::Ffn);
        self.role_hosts(Role::Attention)
            .iter()
            .any(|a| ffn.iter().any(|f| a != f))
    }

    /// Pairs two roles as given (`attention` is judged as the Attention server).
    pub fn new(attention: RoleConfig, ffn: RoleConfig, rules: RuleSet) -> Deployment {
        Deployment {
            attention,
            ffn,
            nodes: Vec::new(),
            rules,
        }
    }

    /// Every command of one role: its primary first, then its other nodes in recipe order.
    pub fn parts(&self, role: Role) -> Vec<&RoleConfig> {
        let primary = self.role(role);
        std::iter::once(primary)
            .chain(
                self.nodes
                    .iter()
                    .filter(|n| n.declared_role() == Some(role)),
            )
            .collect()
    }

    /// The most ranks of one role on any one host (commands without `VLLM_HOST_IP` count as one
    /// host): the ranks that share that host's NICs.
    pub fn max_ranks_per_host(&self, role: Role) -> u64 {
        let mut by_host: BTreeMap<&str, u64> = BTreeMap::new();
        for part in self.parts(role) {
            let host = part.machine_host().map_or("", |h| h.value.trim());
            *by_host.entry(host).or_default() += u64::from(part.dp_size_local())
                * u64::from(part.pcp_size())
                * u64::from(part.tp_size());
        }
        by_host.into_values().max().unwrap_or(0)
    }

    /// The distinct hosts one role's commands name (`VLLM_HOST_IP`), in recipe order.
    pub fn role_hosts(&self, role: Role) -> Vec<&str> {
        let mut hosts: Vec<&str> = Vec::new();
        for part in self.parts(role) {
            if let Some(h) = part.machine_host() {
                let h = h.value.trim();
                if !hosts.contains(&h) {
                    hosts.push(h);
                }
            }
        }
        hosts
    }

    /// Pairs two roles in either order, by the role their afd blocks declare; when that does not
    /// decide (both the same, or invalid), `first` is taken as the Attention server.
    pub fn from_roles(first: RoleConfig, second: RoleConfig, rules: RuleSet) -> Deployment {
        let swap = match (first.declared_role(), second.declared_role()) {
            (Some(Role::Ffn), other) => other != Some(Role::Ffn),
            (other, Some(Role::Attention)) => other != Some(Role::Attention),
            _ => false,
        };
        if swap {
            Deployment::new(second, first, rules)
        } else {
            Deployment::new(first, second, rules)
        }
    }

    /// Parses a recipe script. It must start exactly two `vllm serve` commands with an afd block
    /// (other servers, such as the prefill instances of a P/D recipe, are allowed beside them); a
    /// recipe with exactly two servers is taken as the pair even if a block is missing, so the
    /// check can say so.
    pub fn from_recipe(
        text: &str,
        options: &RecipeOptions,
        rules: RuleSet,
    ) -> Result<Deployment, DeploymentError> {
        let recipe = recipe::parse_recipe(text, options)?;
        let mut roles = Vec::new();
        let mut errors = Vec::new();
        for server in &recipe.servers {
            match RoleConfig::from_serve_command(server) {
                Ok(role) => roles.push(role),
                Err(err) => errors.extend(err.errors),
            }
        }
        if !errors.is_empty() {
            return Err(DeploymentError::Arguments(ServeArgsError { errors }));
        }
        let total = recipe.servers.len();
        if total > 2 {
            roles.retain(|role| role.afd.is_some());
        }
        let nodes = split_nodes(&mut roles, |r| r)?;
        if roles.len() != 2 {
            let location = recipe
                .servers
                .first()
                .map_or(Location::START, |s| s.location);
            let message = if total < 2 {
                format!(
                    "found {total} vllm serve command(s); an AFD recipe starts two (Attention and FFN)"
                )
            } else {
                format!(
                    "found {} vllm serve commands with an afd block among {total}; an AFD deployment has exactly two (Attention and FFN)",
                    roles.len()
                )
            };
            return Err(DeploymentError::Shape { location, message });
        }
        let second = roles.pop().expect("two roles");
        let first = roles.pop().expect("two roles");
        let mut deployment = Deployment::from_roles(first, second, rules);
        deployment.nodes = nodes;
        Ok(deployment)
    }

    pub fn role(&self, role: Role) -> &RoleConfig {
        match role {
            Role::Attention => &self.attention,
            Role::Ffn => &self.ffn,
        }
    }

    /// Every finding of the rule set's rules, errors first.
    pub fn check(&self) -> Report {
        validate::check(self)
    }

    /// The rank mapping (afd-spec §2) from the Attention role's afd block: its rank counts and
    /// rendezvous port under this deployment's rule set. Meant for deployments whose
    /// [`Deployment::check`] is clean; missing or invalid counts map to 0 and fail here.
    pub fn topology(&self) -> Result<Topology, TopologyError> {
        let block = self.attention.afd().or(self.ffn.afd());
        let attention = block.and_then(AfdConfig::attention_ranks).unwrap_or(0);
        let ffn = block.and_then(AfdConfig::ffn_ranks).unwrap_or(0);
        let port = block
            .and_then(AfdConfig::port)
            .unwrap_or(afd_config::DEFAULT_AFD_PORT);
        Topology::new(attention, ffn, self.rules, port)
    }
}

/// Takes out of `items` the commands that are not a role's primary node: where a declared role has
/// several commands (its DP ranks spread over hosts), the one that starts DP rank 0 with an API
/// server stays and the others are returned, in recipe order. `role_of` reads an item's
/// configuration, so a recipe's roles and a launch's server words are split alike.
pub(crate) fn split_nodes<T>(
    items: &mut Vec<T>,
    role_of: impl Fn(&T) -> &RoleConfig,
) -> Result<Vec<T>, DeploymentError> {
    let mut nodes = Vec::new();
    for role in [Role::Attention, Role::Ffn] {
        let of_role: Vec<usize> = (0..items.len())
            .filter(|&i| role_of(&items[i]).declared_role() == Some(role))
            .collect();
        let is_primary = |i: usize| {
            let r = role_of(&items[i]);
            r.dp_start_rank() == 0 && !r.headless()
        };
        let primaries: Vec<usize> = of_role.iter().copied().filter(|&i| is_primary(i)).collect();
        // Fewer than two commands, or several whole servers of one role (not one role over
        // hosts: the caller's shape error says so).
        if of_role.len() < 2 || primaries.len() == of_role.len() {
            continue;
        }
        if primaries.len() != 1 {
            let location = role_of(&items[of_role[0]]).location;
            let message = format!(
                "the {} role is started by {} commands and {} of them start DP rank 0 with an API server; a role spread over hosts has one primary command (no --data-parallel-start-rank, no --headless) and one command per other host (--headless --data-parallel-start-rank N)",
                role.as_str(),
                of_role.len(),
                primaries.len()
            );
            return Err(DeploymentError::Shape { location, message });
        }
        for &i in of_role.iter().rev() {
            if i != primaries[0] {
                nodes.push(items.remove(i));
            }
        }
    }
    nodes.sort_by_key(|n| role_of(n).location);
    Ok(nodes)
}

#[cfg(test)]
mod tests;
