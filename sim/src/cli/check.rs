//! `afd-sim check`: validate a recipe script, or the two roles' `vllm serve` command lines, and
//! print every error, warning and note with its place in the input.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use clap::Args;
use serde_json::{Value, json};

use afd_sim::deployment::{
    Deployment, DeploymentError, Finding, Location, RecipeOptions, Report, RoleConfig, Severity,
    Subject,
};
use afd_sim::topology::{Role, RuleSet};

use crate::cli::output::{emit, json_text};
use crate::cli::parse_rule_set;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim check sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh
  afd-sim check sim/tests/fixtures/recipes/2a2f_graph_dbo_dp2tp1.sh --rules v0.26 --json
  afd-sim check sim/tests/fixtures/recipes/4a4f_graph_dbo_dp2tp2.sh --env MODEL_PATH=/models/DeepSeek-V2-Lite
  afd-sim check \\
    --attention-args 'CUDA_VISIBLE_DEVICES=0 vllm serve /m --enforce-eager --additional-config '\\''{\"afd\":{\"role\":\"attention\"}}'\\''' \\
    --ffn-args 'CUDA_VISIBLE_DEVICES=1 vllm serve /m --enforce-eager --port 8001 --additional-config '\\''{\"afd\":{\"role\":\"ffn\"}}'\\'''

Exit status: 0 when no rule is violated (warnings and notes allowed), 2 on any violation or on
input that does not parse. `afd-sim rules` lists the rules.")]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    input: DeploymentArgs,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Where a deployment comes from: a recipe, or both roles' command lines (shared with `predict`).
#[derive(Args, Debug, Clone)]
pub(crate) struct DeploymentArgs {
    /// Recipe script (the shell subset of the afd-plugin recipes; never executed).
    #[arg(value_name = "RECIPE.sh", conflicts_with_all = ["attention_args", "ffn_args"])]
    pub(crate) recipe: Option<PathBuf>,
    /// The Attention server's command line: [NAME=value ...] [vllm serve] ARGS, shell-quoted.
    #[arg(
        long,
        value_name = "ARGS",
        requires = "ffn_args",
        allow_hyphen_values = true
    )]
    pub(crate) attention_args: Option<String>,
    /// The FFN server's command line, as --attention-args.
    #[arg(
        long,
        value_name = "ARGS",
        requires = "attention_args",
        allow_hyphen_values = true
    )]
    pub(crate) ffn_args: Option<String>,
    /// Plugin version whose rules apply: v0.26 or latest.
    #[arg(long, value_name = "SET", default_value = "latest", value_parser = parse_rule_set)]
    pub(crate) rules: RuleSet,
    /// An environment variable the recipe sees before its first line (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub(crate) env: Vec<String>,
}

impl DeploymentArgs {
    /// Whether a recipe or command lines were given at all.
    pub(crate) fn is_given(&self) -> bool {
        self.recipe.is_some() || self.attention_args.is_some()
    }
}

/// A deployment read from its input, or why it could not be read (with the role at fault).
pub(crate) struct Loaded {
    sources: Sources,
    built: Result<Deployment, (Option<Role>, DeploymentError)>,
}

/// Where the input came from: names used in `file:line:col` positions.
enum Sources {
    Recipe(String),
    CommandLines,
}

impl Sources {
    fn name(&self, role: Option<Role>) -> &str {
        match self {
            Sources::Recipe(path) => path,
            Sources::CommandLines => match role {
                Some(Role::Attention) => "--attention-args",
                _ => "--ffn-args",
            },
        }
    }
}

/// Reads the recipe or command lines of `input`; file and flag problems are errors, parse
/// problems of the deployment itself come back in [`Loaded`].
pub(crate) fn load(input: &DeploymentArgs) -> anyhow::Result<Loaded> {
    let mut options = RecipeOptions::default();
    for pair in &input.env {
        let Some((name, value)) = pair.split_once('=') else {
            bail!("--env expects NAME=VALUE, got '{pair}'");
        };
        options.env.insert(name.to_owned(), value.to_owned());
    }
    let (sources, built) = match (&input.recipe, &input.attention_args, &input.ffn_args) {
        (Some(path), _, _) => {
            let text = afd_traces::input::read_text(path, afd_traces::input::InputKind::RECIPE)?;
            let sources = Sources::Recipe(path.display().to_string());
            (
                sources,
                Deployment::from_recipe(&text, &options, input.rules).map_err(|e| (None, e)),
            )
        }
        (None, Some(attention), Some(ffn)) => {
            let built = RoleConfig::from_command_line(attention, &options)
                .map_err(|e| (Some(Role::Attention), e))
                .and_then(|a| {
                    RoleConfig::from_command_line(ffn, &options)
                        .map(|f| Deployment::new(a, f, input.rules))
                        .map_err(|e| (Some(Role::Ffn), e))
                });
            (Sources::CommandLines, built)
        }
        _ => bail!("give a RECIPE.sh, or both --attention-args and --ffn-args"),
    };
    Ok(Loaded { sources, built })
}

/// The deployment when it parses and passes every error rule; otherwise the text `check` would
/// print about it, for the caller to show before exiting 2.
pub(crate) fn checked(loaded: Loaded) -> Result<Deployment, String> {
    let deployment = match loaded.built {
        Ok(deployment) => deployment,
        Err((role, error)) => return Err(input_errors_text(&loaded.sources, role, &error)),
    };
    let report = deployment.check();
    if report.is_clean() {
        Ok(deployment)
    } else {
        Err(report_text(&loaded.sources, &deployment, &report))
    }
}

pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let Loaded { sources, built } = load(&args.input)?;
    let rules = args.input.rules;
    let deployment = match built {
        Ok(deployment) => deployment,
        Err((role, error)) => {
            let text = if args.json {
                json_text(&input_errors_json(&sources, role, rules, &error))
            } else {
                input_errors_text(&sources, role, &error)
            };
            emit(&text)?;
            return Ok(ExitCode::from(2));
        }
    };
    let report = deployment.check();
    let text = if args.json {
        json_text(&report_json(&sources, &deployment, &report))
    } else {
        report_text(&sources, &deployment, &report)
    };
    emit(&text)?;
    Ok(if report.is_clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn location_json(location: Option<Location>) -> Value {
    match location {
        Some(Location::Text { line, column }) => json!({ "line": line, "column": column }),
        Some(Location::Argument { index }) => json!({ "argument": index }),
        None => Value::Null,
    }
}

fn subject_json(subject: Option<&Subject>) -> Value {
    subject.map_or(Value::Null, |s| json!(s.to_string()))
}

fn input_errors_json(
    sources: &Sources,
    role: Option<Role>,
    rules: RuleSet,
    error: &DeploymentError,
) -> Value {
    let errors: Vec<Value> = error
        .problems()
        .into_iter()
        .map(|(location, subject, message)| {
            json!({
                "source": sources.name(role),
                "location": location_json(Some(location)),
                "subject": subject_json(subject),
                "message": message,
            })
        })
        .collect();
    json!({ "rules": rules.as_str(), "ok": false, "input_errors": errors, "findings": [] })
}

fn input_errors_text(sources: &Sources, role: Option<Role>, error: &DeploymentError) -> String {
    let mut out = String::new();
    for (location, _, message) in error.problems() {
        out.push_str(&format!(
            "{}: error: {message}\n",
            location.render(sources.name(role))
        ));
    }
    out.push_str("failed: the input does not describe a deployment (nothing was checked)\n");
    out
}

fn finding_json(sources: &Sources, finding: &Finding) -> Value {
    json!({
        "severity": finding.severity.as_str(),
        "rule": finding.rule.id(),
        "role": finding.role.map(Role::as_str),
        "subject": subject_json(finding.subject.as_ref()),
        "source": sources.name(finding.role),
        "location": location_json(finding.location),
        "message": finding.message,
    })
}

fn report_json(sources: &Sources, deployment: &Deployment, report: &Report) -> Value {
    let findings: Vec<Value> = report
        .findings()
        .iter()
        .map(|f| finding_json(sources, f))
        .collect();
    json!({
        "rules": report.rules.as_str(),
        "ok": report.is_clean(),
        "errors": report.count(Severity::Error),
        "warnings": report.count(Severity::Warning),
        "notes": report.count(Severity::Note),
        "findings": findings,
        "deployment": {
            "attention": role_json(&deployment.attention),
            "ffn": role_json(&deployment.ffn),
        },
    })
}

fn role_json(config: &RoleConfig) -> Value {
    let dbo = config.dbo().map(|d| {
        json!({
            "decode_token_threshold": d.decode_token_threshold,
            "prefill_token_threshold": d.prefill_token_threshold,
        })
    });
    json!({
        "model": config.model(),
        "data_parallel_size": config.dp_size(),
        "tensor_parallel_size": config.tp_size(),
        "prefill_context_parallel_size": config.pcp_size(),
        "ranks": config.rank_count(),
        "gpus": config.gpus().map(|g| g.iter().map(ToString::to_string).collect::<Vec<_>>()),
        "expert_parallel": config.expert_parallel(),
        "max_num_seqs": config.max_num_seqs(),
        "max_num_batched_tokens": config.max_num_batched_tokens(),
        "cudagraph_mode": config.cudagraph_mode().as_str(),
        "capture_sizes": config.capture_sizes(),
        "dbo": dbo,
        "http": format!("{}:{}", config.http_host().unwrap_or("0.0.0.0"), config.http_port()),
        "model_runner_v2": config.uses_model_runner_v2(),
    })
}

fn role_line(role: Role, config: &RoleConfig) -> String {
    let gpus = config.gpus().map_or_else(
        || "GPUs unset".to_owned(),
        |g| {
            format!(
                "GPUs {}",
                g.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        },
    );
    let graphs = if config.uses_cuda_graphs() {
        format!("{} {:?}", config.cudagraph_mode(), config.capture_sizes())
    } else {
        "eager".to_owned()
    };
    let dbo = config.dbo().map_or_else(
        || "DBO off".to_owned(),
        |d| {
            format!(
                "DBO {}/{}",
                d.decode_token_threshold, d.prefill_token_threshold
            )
        },
    );
    format!(
        "  {:<9}  DP {} x TP {} = {} ranks, {gpus}, {graphs}, {dbo}, max-num-seqs {}, max-num-batched-tokens {}, HTTP {}:{}\n",
        role.as_str(),
        config.dp_size(),
        config.tp_size(),
        config.rank_count(),
        config.max_num_seqs(),
        config.max_num_batched_tokens(),
        config.http_host().unwrap_or("0.0.0.0"),
        config.http_port(),
    )
}

fn report_text(sources: &Sources, deployment: &Deployment, report: &Report) -> String {
    let block = deployment.attention.afd().or(deployment.ffn.afd());
    let shape = block.map_or_else(
        || "AFD".to_owned(),
        |b| {
            let count = |v: Option<i64>| v.map_or_else(|| "?".to_owned(), |n| n.to_string());
            format!(
                "{}A{}F",
                count(b.num_attention_ranks.value),
                count(b.num_ffn_ranks.value)
            )
        },
    );
    let title = match sources {
        Sources::Recipe(path) => path.as_str(),
        Sources::CommandLines => "--attention-args/--ffn-args",
    };
    let mut out = format!(
        "{title}: {shape} deployment under rule set {}\n",
        report.rules
    );
    out.push_str(&role_line(Role::Attention, &deployment.attention));
    out.push_str(&role_line(Role::Ffn, &deployment.ffn));
    out.push('\n');
    for finding in report.findings() {
        let source = sources.name(finding.role);
        let place = finding
            .location
            .map_or_else(|| source.to_owned(), |l| l.render(source));
        let mut about = finding
            .role
            .map_or_else(String::new, |r| r.as_str().to_owned());
        if let Some(subject) = &finding.subject {
            if !about.is_empty() {
                about.push(' ');
            }
            about.push_str(&subject.to_string());
        }
        out.push_str(&format!(
            "{place}: {}[{}] {about}: {}\n",
            finding.severity.as_str(),
            finding.rule.id(),
            finding.message
        ));
    }
    let counts = BTreeMap::from([
        ("error", report.count(Severity::Error)),
        ("note", report.count(Severity::Note)),
        ("warning", report.count(Severity::Warning)),
    ]);
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    out.push_str(&format!(
        "{}: {}, {}, {}\n",
        if report.is_clean() { "ok" } else { "failed" },
        plural(counts["error"], "error"),
        plural(counts["warning"], "warning"),
        plural(counts["note"], "note"),
    ));
    out
}
