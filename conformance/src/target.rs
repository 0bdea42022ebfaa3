//! What a run checks: the pair's endpoints, the deployment as launched (from a recipe or the two roles'
//! flags, parsed by `afd_sim::deployment`), its logs, and the [`Expectations`] derived from them once.
//!
//! This is the only module that reads the deployment model; the checks see plain expectations (DP size,
//! served name, rank mapping, rendezvous host), except `checks::simulator`, which hands the deployment to
//! `afd-sim` whole. Building a target reads files and parses; it never contacts a server.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use afd_sim::deployment::{
    Deployment, DeploymentError, RecipeOptions, Report as DeploymentReport, RoleConfig,
};
use afd_sim::topology::{RuleSet, Topology};
use afd_traces::input::InputKind;

use crate::client::{Endpoint, UrlError};

/// Where the deployment came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeploymentInput {
    /// No deployment: only URLs (static invariants are skipped).
    None,
    /// A recipe script, read as text and never executed.
    Recipe(PathBuf),
    /// Each role's `vllm serve` command line (`--attention-args`, `--ffn-args`).
    Args { attention: String, ffn: String },
    /// Each role's words after `vllm serve` and its environment, already split (what `up` launched).
    Words {
        attention: ServeWords,
        ffn: ServeWords,
        origin: String,
    },
}

/// The words after `vllm serve` and the environment of one process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServeWords {
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

/// Input the suite cannot run with: exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The recipe file could not be read, or is larger than [`InputKind::RECIPE`] allows.
    #[error(transparent)]
    ReadRecipe(#[from] afd_traces::input::InputError),
    #[error("{origin}: {message}")]
    Deployment { origin: String, message: String },
    #[error("{0}")]
    Url(#[from] UrlError),
    #[error(
        "no Attention URL: give --attention-url, or a recipe or --attention-args whose Attention command has --port"
    )]
    NoAttentionUrl,
    #[error("--serve-args: {message}")]
    ServeArgs { message: String },
}

/// Why the AFD-only invariants end indeterminate against a plain server.
pub const PLAIN_REASON: &str = "target is a plain vLLM server (no AFD block, no FFN role)";

/// What the checks expect of the pair, derived from the deployment (and flags where it is absent).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expectations {
    /// The model name requests use; `None` means "whatever /v1/models lists first".
    pub served_model: Option<String>,
    /// Attention DP size: the number of DP engines behind the Attention URL.
    pub attention_dp: Option<u32>,
    pub attention_tp: u32,
    pub ffn_tp: u32,
    /// The rank mapping, or why the deployment has none.
    pub topology: Option<Result<Topology, String>>,
    /// The AFD rendezvous host.
    pub afd_host: Option<String>,
    /// The server runs vLLM's batch-invariant mode (`VLLM_BATCH_INVARIANT=1`).
    pub batch_invariant: bool,
    /// The Attention server echoes `X-Request-Id` on every response (`--enable-request-id-headers`).
    pub request_id_headers: bool,
}

/// Everything a run checks.
#[derive(Debug)]
pub struct Target {
    pub attention: Endpoint,
    pub ffn: Option<Endpoint>,
    pub deployment: Option<Deployment>,
    /// `recipe PATH` or `flags`, for reports.
    pub deployment_origin: Option<String>,
    pub rules: RuleSet,
    pub attention_log: Option<PathBuf>,
    pub ffn_log: Option<PathBuf>,
    pub expect: Expectations,
    /// A plain vLLM server (`--plain`, `--serve-args`): no FFN role, no AFD block; the AFD-only
    /// invariants end indeterminate with [`PLAIN_REASON`].
    pub plain: bool,
}

/// Flags that shape a target besides the deployment.
#[derive(Clone, Debug, Default)]
pub struct TargetOptions {
    pub deployment: Option<DeploymentInput>,
    pub rules: RuleSet,
    pub attention_url: Option<String>,
    pub ffn_url: Option<String>,
    pub attention_log: Option<PathBuf>,
    pub ffn_log: Option<PathBuf>,
    /// Attention DP size when no deployment says it.
    pub attention_dp: Option<u32>,
    /// Overrides the deployment's batch-invariance.
    pub batch_invariant: Option<bool>,
    /// Overrides the deployment's served model name.
    pub model: Option<String>,
    /// The target is one plain vLLM server (no AFD pair).
    pub plain: bool,
    /// The plain server's `vllm serve` command line (implies `plain`): served name, DP size, URL.
    pub serve_args: Option<String>,
}

impl fmt::Display for DeploymentInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeploymentInput::None => f.write_str("none"),
            DeploymentInput::Recipe(path) => write!(f, "recipe {}", path.display()),
            DeploymentInput::Args { .. } => f.write_str("flags"),
            DeploymentInput::Words { origin, .. } => f.write_str(origin),
        }
    }
}

impl Target {
    /// Reads and parses the deployment, resolves the URLs and derives the expectations.
    pub fn build(options: &TargetOptions) -> Result<Target, TargetError> {
        if let Some(words) = &options.serve_args {
            return Target::build_plain(options, Some(words));
        }
        if options.plain {
            return Target::build_plain(options, None);
        }
        let input = options.deployment.clone().unwrap_or(DeploymentInput::None);
        let deployment = load_deployment(&input, options.rules)?;
        let origin = deployment.as_ref().map(|_| input.to_string());
        let attention = match (&options.attention_url, &deployment) {
            (Some(url), _) => Endpoint::parse(url)?,
            (None, Some(deployment)) => role_endpoint(&deployment.attention)?,
            (None, None) => return Err(TargetError::NoAttentionUrl),
        };
        let ffn = match (&options.ffn_url, &deployment) {
            (Some(url), _) => Some(Endpoint::parse(url)?),
            (None, Some(deployment)) => Some(role_endpoint(&deployment.ffn)?),
            (None, None) => None,
        };
        let mut expect = deployment
            .as_ref()
            .map(expectations)
            .unwrap_or_else(|| Expectations {
                attention_tp: 1,
                ffn_tp: 1,
                ..Expectations::default()
            });
        if let Some(dp) = options.attention_dp {
            expect.attention_dp = Some(dp);
        }
        if let Some(batch_invariant) = options.batch_invariant {
            expect.batch_invariant = batch_invariant;
        }
        if let Some(model) = &options.model {
            expect.served_model = Some(model.clone());
        }
        Ok(Target {
            attention,
            ffn,
            deployment,
            deployment_origin: origin,
            rules: options.rules,
            attention_log: options.attention_log.clone(),
            ffn_log: options.ffn_log.clone(),
            expect,
            plain: false,
        })
    }

    /// One plain vLLM server: no deployment, no FFN; expectations from its command line when given.
    fn build_plain(options: &TargetOptions, words: Option<&str>) -> Result<Target, TargetError> {
        let role = match words {
            None => None,
            Some(text) => Some(
                RoleConfig::from_command_line(text, &RecipeOptions::default()).map_err(|err| {
                    TargetError::ServeArgs {
                        message: deployment_error("--serve-args", &err).to_string(),
                    }
                })?,
            ),
        };
        let attention = match (&options.attention_url, &role) {
            (Some(url), _) => Endpoint::parse(url)?,
            (None, Some(role)) => role_endpoint(role)?,
            (None, None) => return Err(TargetError::NoAttentionUrl),
        };
        let mut expect = match &role {
            Some(role) => role_expectations(role),
            None => Expectations {
                attention_dp: Some(1),
                ..Expectations::default()
            },
        };
        expect.attention_tp = expect.attention_tp.max(1);
        expect.ffn_tp = 1;
        if let Some(dp) = options.attention_dp {
            expect.attention_dp = Some(dp);
        }
        if let Some(batch_invariant) = options.batch_invariant {
            expect.batch_invariant = batch_invariant;
        }
        if let Some(model) = &options.model {
            expect.served_model = Some(model.clone());
        }
        Ok(Target {
            attention,
            ffn: None,
            deployment: None,
            deployment_origin: Some(if words.is_some() {
                "plain vLLM server (--serve-args)".to_owned()
            } else {
                "plain vLLM server".to_owned()
            }),
            rules: options.rules,
            attention_log: options.attention_log.clone(),
            ffn_log: None,
            expect,
            plain: true,
        })
    }

    /// The deployment rules' verdict on the deployment as launched.
    pub fn check_deployment(&self) -> Option<DeploymentReport> {
        self.deployment.as_ref().map(Deployment::check)
    }

    /// Whether the FFN shares the Attention server's host:port (the colocation recipes, afd-spec §6.4).
    pub fn ffn_shares_port(&self) -> bool {
        self.ffn
            .as_ref()
            .is_some_and(|ffn| ffn.same_socket(&self.attention))
    }
}

fn load_deployment(
    input: &DeploymentInput,
    rules: RuleSet,
) -> Result<Option<Deployment>, TargetError> {
    let options = RecipeOptions::default();
    let result = match input {
        DeploymentInput::None => return Ok(None),
        DeploymentInput::Recipe(path) => {
            let text = afd_traces::input::read_text(path, InputKind::RECIPE)?;
            Deployment::from_recipe(&text, &options, rules)
                .map_err(|err| deployment_error(&path.display().to_string(), &err))
        }
        DeploymentInput::Args { attention, ffn } => {
            let attention = RoleConfig::from_command_line(attention, &options)
                .map_err(|err| deployment_error("--attention-args", &err))?;
            let ffn = RoleConfig::from_command_line(ffn, &options)
                .map_err(|err| deployment_error("--ffn-args", &err))?;
            Ok(Deployment::new(attention, ffn, rules))
        }
        DeploymentInput::Words {
            attention,
            ffn,
            origin,
        } => {
            let parse = |words: &ServeWords, role: &str| {
                RoleConfig::from_serve_args_with_env(&words.args, &words.env).map_err(|err| {
                    deployment_error(
                        &format!("{origin} ({role})"),
                        &DeploymentError::Arguments(err),
                    )
                })
            };
            Ok(Deployment::new(
                parse(attention, "attention")?,
                parse(ffn, "ffn")?,
                rules,
            ))
        }
    };
    result.map(Some)
}

fn deployment_error(origin: &str, err: &DeploymentError) -> TargetError {
    let message = err
        .problems()
        .iter()
        .map(|(location, subject, message)| match subject {
            Some(subject) => format!("{location}: {subject}: {message}"),
            None => format!("{location}: {message}"),
        })
        .collect::<Vec<_>>()
        .join("; ");
    TargetError::Deployment {
        origin: origin.to_owned(),
        message,
    }
}

/// `http://HOST:PORT` of a role as launched (all interfaces or no `--host` → loopback).
fn role_endpoint(role: &RoleConfig) -> Result<Endpoint, TargetError> {
    let host = match role.http_host() {
        None | Some("" | "0.0.0.0") => "127.0.0.1",
        Some("::") => "::1",
        Some(host) => host,
    };
    let url = if host.contains(':') {
        format!("http://[{host}]:{}", role.http_port())
    } else {
        format!("http://{host}:{}", role.http_port())
    };
    Ok(Endpoint::parse(&url)?)
}

/// What one role's command line says of the server behind it (no AFD pair).
fn role_expectations(attention: &RoleConfig) -> Expectations {
    let truthy = |value: Option<&str>| {
        value.is_some_and(|v| {
            let v = v.trim().to_ascii_lowercase();
            !v.is_empty() && v != "0" && v != "false" && v != "no" && v != "off"
        })
    };
    Expectations {
        served_model: attention
            .served_model_names()
            .first()
            .map(|s| (*s).to_owned()),
        attention_dp: Some(attention.dp_size()),
        attention_tp: attention.tp_size().max(1),
        ffn_tp: 1,
        topology: None,
        afd_host: None,
        batch_invariant: truthy(attention.env_value("VLLM_BATCH_INVARIANT")),
        request_id_headers: attention
            .unknown_flags
            .iter()
            .any(|flag| flag.flag == "--enable-request-id-headers"),
    }
}

fn expectations(deployment: &Deployment) -> Expectations {
    let attention = &deployment.attention;
    Expectations {
        ffn_tp: deployment.ffn.tp_size().max(1),
        topology: Some(deployment.topology().map_err(|err| err.to_string())),
        afd_host: attention
            .afd()
            .or(deployment.ffn.afd())
            .map(|afd| afd.host.value.clone()),
        ..role_expectations(attention)
    }
}

/// A path shown relative to the working directory when it is below it.
pub fn display_path(path: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| path.strip_prefix(cwd).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| path.to_path_buf())
        .display()
        .to_string()
}
