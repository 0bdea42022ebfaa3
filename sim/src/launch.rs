//! `vllm serve` command lines into what the simulator runs. Every path into the simulator (a recipe,
//! command lines, `predict`'s deployment flags, planner candidates, the twin) goes through here or
//! through [`Deployment`] directly, so what runs is what vLLM 0.26.0 and the plugin would run:
//! - [`ServerWords`]: one server's environment and the words after `vllm serve`; [`Overrides`]
//!   renders `predict`'s deployment flags into them (so the rules judge the flags as `check` would
//!   judge the same words);
//! - [`Launch`]: an AFD pair ([`Deployment`]) or one plain server ([`PlainServer`], judged by
//!   vLLM's own rules and simulated as the colocated deployment users run today);
//! - [`serving_config_from_command_lines`]: command lines → checked launch → memory → timing view,
//!   the one entry for callers that hold command lines.
//!
//! Nothing here runs a command or reads a file; the seed recipe is compiled in.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::deployment::serve_args::{self, ServeArgsError};
use crate::deployment::{
    AfdConfig, Deployment, DeploymentError, Finding, GpuClass, Location, RecipeOptions, Report,
    RoleConfig, Rule, ServeCommand, Subject, parse_recipe,
};
use crate::memory::{self, MemoryError};
use crate::model::arch::ModelArch;
use crate::model::hardware::GpuKind;
use crate::serving::{ServingConfig, ServingConfigError};
use crate::topology::{Role, RuleSet};

/// The seed recipe `2a2f_graph_dbo_dp1tp2.sh` (both roles DP1 TP2 with expert parallelism,
/// max-num-seqs 64, max-num-batched-tokens 64, DBO 2/12, FULL_DECODE_ONLY [64], model runner V2),
/// what `afd-sim predict` runs when no deployment is given.
pub const SEED_RECIPE: &str = include_str!("../tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh");

/// One server: its process environment and the words after `vllm serve`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerWords {
    pub env: BTreeMap<String, String>,
    pub args: Vec<String>,
}

impl ServerWords {
    pub fn from_serve_command(command: &ServeCommand) -> ServerWords {
        ServerWords {
            env: command
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.value.clone()))
                .collect(),
            args: command.args.iter().map(|w| w.text.clone()).collect(),
        }
    }

    /// Reads `[NAME=value ...] [vllm serve] ARGS`, quoted as in a shell.
    pub fn from_command_line(
        text: &str,
        options: &RecipeOptions,
    ) -> Result<ServerWords, DeploymentError> {
        let command = crate::deployment::recipe::parse_command_line(text, options)?;
        Ok(ServerWords::from_serve_command(&command))
    }

    /// The role these words configure (locations are word indices).
    pub fn to_role(&self) -> Result<RoleConfig, ServeArgsError> {
        RoleConfig::from_serve_args_with_env(&self.args, &self.env)
    }

    /// `NAME=value ... vllm serve ARGS`, each word quoted for a POSIX shell where it needs it; read
    /// back by [`ServerWords::from_command_line`] to the same words.
    pub fn to_command_line(&self) -> String {
        let mut words: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}={}", shell_quote(v)))
            .collect();
        words.push("vllm serve".to_owned());
        words.extend(self.args.iter().map(|w| shell_quote(w)));
        words.join(" ")
    }

    /// Sets flag `canonical` (vLLM's spelling) to `value` (`None`: a switch), replacing every
    /// earlier occurrence in any spelling.
    pub fn set_flag(&mut self, canonical: &str, value: Option<&str>) {
        self.remove_flag(canonical);
        self.args.push(canonical.to_owned());
        if let Some(value) = value {
            self.args.push(value.to_owned());
        }
    }

    /// Removes every occurrence of flag `canonical` and its values.
    pub fn remove_flag(&mut self, canonical: &str) {
        self.args = serve_args::remove_flag(&self.args, canonical);
    }

    /// Edits the JSON object of `--compilation-config` or `--additional-config`.
    fn edit_json(
        &mut self,
        canonical: &str,
        edit: &mut dyn FnMut(&mut serde_json::Map<String, Value>),
    ) {
        // Dotted keys (`-cc.cudagraph_mode=…`) become the flag's JSON object first, as vLLM folds
        // them, so the edit reaches them too.
        self.args = serve_args::fold_dotted_args(&self.args);
        serve_args::edit_json_flag(&mut self.args, canonical, edit);
    }
}

/// Single-quotes `word` unless every character is shell-safe.
fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./,:=@%+".contains(c));
    if safe {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `predict`'s deployment flags, rendered into the servers' words with vLLM's flag names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `--data-parallel-size` of the Attention role (of the server, for a plain deployment).
    pub attention_dp: Option<u32>,
    /// `--tensor-parallel-size` of the Attention role (of the server, for a plain deployment).
    pub attention_tp: Option<u32>,
    pub ffn_dp: Option<u32>,
    pub ffn_tp: Option<u32>,
    /// Drop `--enable-expert-parallel` from every server.
    pub no_expert_parallel: bool,
    pub max_num_seqs: Option<u32>,
    pub max_num_batched_tokens: Option<u32>,
    /// Add `--enable-dbo`.
    pub enable_dbo: bool,
    /// Drop `--enable-dbo` and `--ubatch-size`.
    pub no_dbo: bool,
    pub dbo_decode_token_threshold: Option<u32>,
    pub dbo_prefill_token_threshold: Option<u32>,
    pub ubatch_size: Option<u32>,
    pub enforce_eager: bool,
    /// Replaces every capture-size setting (flags and compilation-config keys) with these sizes.
    pub cudagraph_capture_sizes: Option<Vec<u32>>,
    pub max_cudagraph_capture_size: Option<u32>,
    pub gpu_memory_utilization: Option<f64>,
    pub max_model_len: Option<u32>,
    pub block_size: Option<u32>,
}

/// Overrides that contradict themselves or the deployment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverrideError {
    #[error("{0} conflicts with {1}")]
    Conflict(&'static str, &'static str),
    #[error(
        "{0} needs an AFD deployment (a plain server has no FFN role); use --attention-dp/--attention-tp for its layout"
    )]
    NoFfnRole(&'static str),
}

impl Overrides {
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }

    /// Renders the overrides into `servers` (`[attention, ffn]` of a pair, or `[server]`).
    pub fn apply(&self, servers: &mut [ServerWords]) -> Result<(), OverrideError> {
        if self.enable_dbo && self.no_dbo {
            return Err(OverrideError::Conflict("--enable-dbo", "--no-dbo"));
        }
        if self.enforce_eager && self.cudagraph_capture_sizes.is_some() {
            return Err(OverrideError::Conflict(
                "--enforce-eager",
                "--cudagraph-capture-sizes",
            ));
        }
        let plain = servers.len() == 1;
        if plain {
            if self.ffn_dp.is_some() {
                return Err(OverrideError::NoFfnRole("--ffn-dp"));
            }
            if self.ffn_tp.is_some() {
                return Err(OverrideError::NoFfnRole("--ffn-tp"));
            }
        }
        let layouts = [
            (self.attention_dp, self.attention_tp),
            (self.ffn_dp, self.ffn_tp),
        ];
        let mut relaid = false;
        for (server, (dp, tp)) in servers.iter_mut().zip(layouts) {
            if let Some(dp) = dp {
                server.set_flag("--data-parallel-size", Some(&dp.to_string()));
                relaid = true;
            }
            if let Some(tp) = tp {
                server.set_flag("--tensor-parallel-size", Some(&tp.to_string()));
                relaid = true;
            }
        }
        if relaid {
            relay_ranks(servers);
        }
        for server in servers.iter_mut() {
            self.apply_shared(server);
        }
        Ok(())
    }

    /// The flags every server gets alike.
    fn apply_shared(&self, server: &mut ServerWords) {
        let number = |server: &mut ServerWords, flag: &str, value: Option<u32>| {
            if let Some(value) = value {
                server.set_flag(flag, Some(&value.to_string()));
            }
        };
        if self.no_expert_parallel {
            server.remove_flag("--enable-expert-parallel");
        }
        number(server, "--max-num-seqs", self.max_num_seqs);
        number(
            server,
            "--max-num-batched-tokens",
            self.max_num_batched_tokens,
        );
        if self.no_dbo {
            server.remove_flag("--enable-dbo");
            server.remove_flag("--ubatch-size");
        }
        if self.enable_dbo {
            server.set_flag("--enable-dbo", None);
        }
        number(server, "--ubatch-size", self.ubatch_size);
        number(
            server,
            "--dbo-decode-token-threshold",
            self.dbo_decode_token_threshold,
        );
        number(
            server,
            "--dbo-prefill-token-threshold",
            self.dbo_prefill_token_threshold,
        );
        if self.enforce_eager {
            server.set_flag("--enforce-eager", None);
        }
        if let Some(sizes) = &self.cudagraph_capture_sizes {
            server.remove_flag("--max-cudagraph-capture-size");
            server.remove_flag("--cudagraph-capture-sizes");
            server.edit_json("--compilation-config", &mut |config| {
                for key in [
                    "cudagraph_capture_sizes",
                    "cuda_graph_sizes",
                    "max_cudagraph_capture_size",
                ] {
                    config.remove(key);
                }
            });
            server.args.push("--cudagraph-capture-sizes".to_owned());
            server.args.extend(sizes.iter().map(u32::to_string));
        }
        if let Some(max) = self.max_cudagraph_capture_size {
            server.edit_json("--compilation-config", &mut |config| {
                config.remove("max_cudagraph_capture_size");
            });
            server.set_flag("--max-cudagraph-capture-size", Some(&max.to_string()));
        }
        if let Some(fraction) = self.gpu_memory_utilization {
            server.set_flag("--gpu-memory-utilization", Some(&fraction.to_string()));
        }
        number(server, "--max-model-len", self.max_model_len);
        number(server, "--block-size", self.block_size);
    }
}

/// After a layout change: the afd blocks' rank counts follow the servers' DP × PCP × TP, and a
/// server that lists its GPUs gets consecutive ones (Attention first), as many as it needs.
fn relay_ranks(servers: &mut [ServerWords]) {
    let roles: Vec<Option<RoleConfig>> = servers.iter().map(|s| s.to_role().ok()).collect();
    let ranks: Vec<u64> = roles
        .iter()
        .map(|r| r.as_ref().map_or(1, RoleConfig::rank_count))
        .collect();
    if servers.len() == 2 {
        let (a, f) = (ranks[0], ranks[1]);
        for server in servers.iter_mut() {
            server.edit_json("--additional-config", &mut |config| {
                if let Some(Value::Object(afd)) = config.get_mut("afd") {
                    afd.insert("num_attention_ranks".to_owned(), Value::from(a));
                    afd.insert("num_ffn_ranks".to_owned(), Value::from(f));
                }
            });
        }
    }
    let mut next = 0u64;
    for (server, role) in servers.iter_mut().zip(&roles) {
        let count = role.as_ref().map_or(1, RoleConfig::gpu_count);
        if server.env.contains_key("CUDA_VISIBLE_DEVICES") {
            let list: Vec<String> = (next..next + count).map(|g| g.to_string()).collect();
            server
                .env
                .insert("CUDA_VISIBLE_DEVICES".to_owned(), list.join(","));
        }
        next += count;
    }
}

/// One plain `vllm serve` command (no `afd` block), judged by vLLM's own rules.
#[derive(Clone, Debug, PartialEq)]
pub struct PlainServer {
    pub server: RoleConfig,
    pub rules: RuleSet,
}

impl PlainServer {
    /// vLLM 0.26.0's own rules on the command (`afd-sim rules` lists them under `vllm.`, `graph.`).
    pub fn check(&self) -> Report {
        crate::deployment::check_plain(&self.server, self.rules)
    }
}

/// What a set of `vllm serve` commands starts: an AFD pair or one plain server.
#[derive(Clone, Debug, PartialEq)]
#[expect(
    clippy::large_enum_variant,
    reason = "one launch per command, built once; boxing the pair buys nothing"
)]
pub enum Launch {
    Afd(Deployment),
    Plain(PlainServer),
}

impl Launch {
    /// Reads a recipe: one server without an `afd` block is a plain deployment; anything else is
    /// read as an AFD pair ([`Deployment::from_recipe`]).
    pub fn from_recipe(
        text: &str,
        options: &RecipeOptions,
        rules: RuleSet,
    ) -> Result<Launch, DeploymentError> {
        let recipe = parse_recipe(text, options)?;
        if let [only] = recipe.servers.as_slice() {
            let server = RoleConfig::from_serve_command(only)?;
            if server.afd().is_none() && server.additional_config.is_none() {
                return Ok(Launch::Plain(PlainServer { server, rules }));
            }
        }
        Ok(Launch::Afd(Deployment::from_recipe(text, options, rules)?))
    }

    /// The servers' words of a recipe in the order [`Launch::from_recipe`] reads them (`[attention,
    /// ffn]` or `[server]`, then the other hosts' commands of a role spread over hosts), for
    /// rendering overrides into.
    pub fn recipe_words(
        text: &str,
        options: &RecipeOptions,
    ) -> Result<Vec<ServerWords>, DeploymentError> {
        let recipe = parse_recipe(text, options)?;
        let mut servers = Vec::new();
        let mut errors = Vec::new();
        for command in &recipe.servers {
            match RoleConfig::from_serve_command(command) {
                Ok(role) => servers.push((ServerWords::from_serve_command(command), role)),
                Err(err) => errors.extend(err.errors),
            }
        }
        if !errors.is_empty() {
            return Err(DeploymentError::Arguments(ServeArgsError { errors }));
        }
        if servers.len() > 2 {
            servers.retain(|(_, role)| role.afd.is_some());
        }
        let nodes = crate::deployment::split_nodes(&mut servers, |(_, role)| role)?;
        if servers.len() == 2 {
            let swap = match (servers[0].1.declared_role(), servers[1].1.declared_role()) {
                (Some(Role::Ffn), other) => other != Some(Role::Ffn),
                (other, Some(Role::Attention)) => other != Some(Role::Attention),
                _ => false,
            };
            if swap {
                servers.swap(0, 1);
            }
        }
        if servers.is_empty() || servers.len() > 2 {
            let location = recipe
                .servers
                .first()
                .map_or(Location::START, |s| s.location);
            return Err(DeploymentError::Shape {
                location,
                message: format!(
                    "found {} vllm serve commands to run; a deployment is one plain server or an Attention and an FFN server",
                    servers.len()
                ),
            });
        }
        Ok(servers
            .into_iter()
            .chain(nodes)
            .map(|(words, _)| words)
            .collect())
    }

    /// Servers as words: one is a plain server, two an AFD pair (in either order, by their blocks),
    /// more an AFD pair with the other hosts' commands of a role spread over hosts. On bad words,
    /// the index of the server at fault.
    pub fn from_servers(
        servers: &[ServerWords],
        rules: RuleSet,
    ) -> Result<Launch, (usize, DeploymentError)> {
        let role = |i: usize| {
            servers[i]
                .to_role()
                .map_err(|e| (i, DeploymentError::Arguments(e)))
        };
        match servers.len() {
            1 => Ok(Launch::Plain(PlainServer {
                server: role(0)?,
                rules,
            })),
            n => {
                let mut roles = (0..n).map(role).collect::<Result<Vec<_>, _>>()?;
                let nodes =
                    crate::deployment::split_nodes(&mut roles, |r| r).map_err(|e| (0, e))?;
                let [attention, ffn] = <[RoleConfig; 2]>::try_from(roles).map_err(|roles| {
                    let message = format!(
                        "{} servers given besides the other hosts of a role; a deployment is one plain server or an Attention and an FFN server",
                        roles.len()
                    );
                    (0, DeploymentError::Shape { location: Location::START, message })
                })?;
                let mut deployment = Deployment::from_roles(attention, ffn, rules);
                deployment.nodes = nodes;
                Ok(Launch::Afd(deployment))
            }
        }
    }

    pub fn rules(&self) -> RuleSet {
        match self {
            Launch::Afd(deployment) => deployment.rules,
            Launch::Plain(plain) => plain.rules,
        }
    }

    /// The same commands judged on GPUs of `gpu` (vLLM's batch defaults depend on the GPU class).
    pub fn on_gpu(self, gpu: GpuKind) -> Launch {
        let class: GpuClass = gpu.batch_class();
        match self {
            Launch::Afd(d) => Launch::Afd(Deployment {
                attention: d.attention.on_gpu(class),
                ffn: d.ffn.on_gpu(class),
                nodes: d.nodes.into_iter().map(|n| n.on_gpu(class)).collect(),
                rules: d.rules,
            }),
            Launch::Plain(p) => Launch::Plain(PlainServer {
                server: p.server.on_gpu(class),
                rules: p.rules,
            }),
        }
    }

    /// Every rule's findings (errors first).
    pub fn check(&self) -> Report {
        match self {
            Launch::Afd(deployment) => deployment.check(),
            Launch::Plain(plain) => plain.check(),
        }
    }

    /// [`Launch::check`] plus, when no rule is broken, whether every role fits on a `gpu` serving
    /// `model` (rules `memory.role-fits`, `memory.state-blocks` and `memory.max-model-len-fits`).
    pub fn check_on(&self, gpu: GpuKind, model: &ModelArch) -> Report {
        let report = self.check();
        if !report.is_clean() {
            return report;
        }
        let Ok(config) = self.serving_config(gpu, model) else {
            return report;
        };
        match memory::plan(&config, model, gpu.spec().memory_bytes) {
            Ok(_) => report,
            Err(err) => {
                let role = match err.role() {
                    "attention" => Some(Role::Attention),
                    "ffn" => Some(Role::Ffn),
                    _ => None,
                };
                let (rule, flag) = match err {
                    MemoryError::RoleFits(_) => (Rule::MemoryRoleFits, "--gpu-memory-utilization"),
                    MemoryError::StateBlocks(_) => (Rule::MemoryStateBlocks, "--max-num-seqs"),
                    MemoryError::MaxLenFits(_) => (Rule::MemoryMaxLenFits, "--max-model-len"),
                };
                let mut findings = report.findings().to_vec();
                let finding =
                    Finding::new(rule, role, err.to_string()).with_subject(Subject::flag(flag));
                findings.push(finding.at(Some(match (self, role) {
                    (Launch::Afd(d), Some(r)) => d.role(r).location,
                    (Launch::Plain(p), _) => p.server.location,
                    _ => Location::START,
                })));
                Report::new(report.rules, findings)
            }
        }
    }

    /// The timing view on GPUs of `gpu` serving `model` (meant for a launch whose check is clean;
    /// the model's attention decides how vLLM resolves a plain server's `FULL` graphs).
    pub fn serving_config(
        &self,
        gpu: GpuKind,
        model: &ModelArch,
    ) -> Result<ServingConfig, ServingConfigError> {
        let (mut config, auto) = match self {
            Launch::Afd(deployment) => (
                ServingConfig::from_deployment(deployment, gpu)?,
                deployment.attention.max_model_len_auto(),
            ),
            Launch::Plain(plain) => (
                ServingConfig::from_plain(&plain.server, plain.rules, gpu, model)?,
                plain.server.max_model_len_auto(),
            ),
        };
        if auto {
            // vLLM fits the length to the KV cache once it has sized it; where nothing fits, the
            // memory plan refuses the model's maximum, as vLLM refuses to auto-fit.
            config.max_model_len =
                memory::auto_fit_max_model_len(&config, model, gpu.spec().memory_bytes);
        }
        Ok(config)
    }

    /// Whether the deployment fills its weights at random (`--load-format dummy`,
    /// [`RoleConfig::dummy_weights`]). The FFN role holds the router and the experts, the Attention
    /// role samples the tokens: a pair with either role's weights at random does not route as a
    /// trained model does.
    pub fn dummy_weights(&self) -> bool {
        match self {
            Launch::Plain(plain) => plain.server.dummy_weights(),
            Launch::Afd(d) => d.attention.dummy_weights() || d.ffn.dummy_weights(),
        }
    }

    /// Whether the server that schedules requests (a plain server, or a pair's Attention server)
    /// schedules one step ahead ([`RoleConfig::async_scheduling`]).
    pub fn async_scheduling(&self) -> bool {
        match self {
            Launch::Plain(plain) => plain.server.async_scheduling(),
            Launch::Afd(d) => d.attention.async_scheduling(),
        }
    }

    /// What a prediction of this launch leaves out, one line each, for `predict` and `compare` to
    /// print beside it: every warning of `report` (this launch's check), then, per server, the flags
    /// it keeps that the timing model does not read ([`RoleConfig::flags_not_modelled`]). A
    /// deployment that only `check`'s notes mention gives none.
    pub fn caveats(&self, report: &Report) -> Vec<String> {
        let mut lines: Vec<String> = report
            .findings()
            .iter()
            .filter(|f| f.severity == crate::deployment::Severity::Warning)
            .map(|f| {
                let about = [
                    f.role.map(|r| r.as_str().to_owned()),
                    f.subject.as_ref().map(ToString::to_string),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
                format!("warning[{}] {about}: {}", f.rule.id(), f.message)
            })
            .collect();
        let servers: Vec<(&str, &RoleConfig)> = match self {
            Launch::Plain(plain) => vec![("the server", &plain.server)],
            Launch::Afd(d) => vec![
                ("the Attention server", &d.attention),
                ("the FFN server", &d.ffn),
            ],
        };
        for (name, server) in servers {
            let flags = server.flags_not_modelled();
            if flags.is_empty() {
                continue;
            }
            let (verb, pronoun) = if flags.len() == 1 {
                ("is", "it")
            } else {
                ("are", "them")
            };
            lines.push(format!(
                "note: {name}'s {} {verb} not modelled: the prediction prices {name} without {pronoun}",
                flags.join(", ")
            ));
        }
        lines
    }

    /// The afd block of a pair, if any.
    pub fn afd(&self) -> Option<&AfdConfig> {
        match self {
            Launch::Afd(d) => d.attention.afd().or(d.ffn.afd()),
            Launch::Plain(_) => None,
        }
    }
}

/// A launch that may run, with its findings (warnings, notes) and timing view.
#[derive(Clone, Debug, PartialEq)]
pub struct Launched {
    pub launch: Launch,
    pub report: Report,
    pub config: ServingConfig,
}

/// Why command lines cannot be simulated.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum LaunchError {
    /// A command line does not parse (server index, error).
    #[error("server {0}: {1}")]
    Input(usize, DeploymentError),
    /// A rule refuses the deployment: vLLM or the plugin would not start it.
    #[error("the deployment breaks {} rule(s): {}", .0.count(crate::deployment::Severity::Error), first_errors(.0))]
    Refused(Report),
    #[error(transparent)]
    Serving(#[from] ServingConfigError),
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

fn first_errors(report: &Report) -> String {
    report
        .findings()
        .iter()
        .filter(|f| f.severity == crate::deployment::Severity::Error)
        .map(|f| format!("{}: {}", f.rule.id(), f.message))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Turns `vllm serve` command lines (one plain server, or the Attention and FFN servers of an AFD
/// pair, each `[NAME=value ...] [vllm serve] ARGS`) into the timing view the simulator runs on GPUs
/// of `gpu` serving `model`, after judging them by `rules` exactly as `afd-sim check` does and
/// checking that every role fits in memory. Defaults the commands leave out are vLLM 0.26.0's.
///
/// ```
/// use afd_sim::launch::serving_config_from_command_lines;
/// use afd_sim::model::{arch::ModelArch, hardware::GpuKind};
/// use afd_sim::serving::Placement;
/// use afd_sim::topology::RuleSet;
///
/// let line = "vllm serve /root/model/dsv2l --load-format dummy --max-num-seqs 256 --max-num-batched-tokens 8192";
/// let launched = serving_config_from_command_lines(
///     &[line], RuleSet::Latest, GpuKind::H200, &ModelArch::deepseek_v2_lite(),
/// ).unwrap();
/// assert_eq!(launched.config.placement, Placement::Colocated);
/// assert_eq!(launched.config.graph.name(), "FULL_AND_PIECEWISE");
/// assert!(launched.config.dbo.is_none());
/// ```
pub fn serving_config_from_command_lines(
    lines: &[&str],
    rules: RuleSet,
    gpu: GpuKind,
    model: &ModelArch,
) -> Result<Launched, LaunchError> {
    let options = RecipeOptions::default();
    let servers = lines
        .iter()
        .enumerate()
        .map(|(i, line)| {
            ServerWords::from_command_line(line, &options).map_err(|e| LaunchError::Input(i, e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let launch = Launch::from_servers(&servers, rules)
        .map_err(|(i, e)| LaunchError::Input(i, e))?
        .on_gpu(gpu);
    let report = launch.check();
    if !report.is_clean() {
        return Err(LaunchError::Refused(report));
    }
    let config = launch.serving_config(gpu, model)?;
    memory::plan(&config, model, gpu.spec().memory_bytes)?;
    Ok(Launched {
        launch,
        report,
        config,
    })
}

#[cfg(test)]
mod tests;
