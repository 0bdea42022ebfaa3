//! `afd-sim check`: validate a recipe script, the two roles' `vllm serve` command lines, or one
//! plain `vllm serve` command line, and print every error, warning and note with its place in the
//! input. The same reading (and, for `predict`, its deployment flags rendered into the words)
//! feeds `predict`, so nothing the rules refuse is ever simulated.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use afd_sim::deployment::{
    DeploymentError, Finding, Location, RecipeOptions, Report, RoleConfig, Severity, Subject,
};
use afd_sim::launch::{Launch, Overrides, SEED_RECIPE, ServerWords};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::{Role, RuleSet};

use crate::cli::inputs::read_model;
use crate::cli::output::{emit, json_text};
use crate::cli::parse_rule_set;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim check sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh
  afd-sim check sim/tests/fixtures/recipes/2a2f_graph_dbo_dp2tp1.sh --rules v0.26 --json
  afd-sim check sim/tests/fixtures/recipes/4a4f_graph_dbo_dp2tp2.sh --env MODEL_PATH=/models/DeepSeek-V2-Lite
  afd-sim check sim/tests/fixtures/recipes/4a2f_attention_two_hosts_dp4tp1.sh
  afd-sim check --serve-args 'CUDA_VISIBLE_DEVICES=0,1 vllm serve /m --tensor-parallel-size 2'
  afd-sim check \\
    --attention-args 'CUDA_VISIBLE_DEVICES=0 vllm serve /m --enforce-eager --additional-config '\\''{\"afd\":{\"role\":\"attention\"}}'\\''' \\
    --ffn-args 'CUDA_VISIBLE_DEVICES=1 vllm serve /m --enforce-eager --port 8001 --additional-config '\\''{\"afd\":{\"role\":\"ffn\"}}'\\'''

A command line or recipe with one `vllm serve` and no afd block is a plain vLLM deployment, judged
by vLLM 0.26.0's own rules. Flags a command leaves out take vLLM 0.26.0's defaults for `vllm
serve` on the --gpu class (max-num-seqs 1024 / max-num-batched-tokens 8192 on H100/H200/H800/H20,
256 / 2048 on A100/L4/L20; capture sizes from max-num-seqs; the V2 model runner where vLLM picks
it). Memory (rules memory.role-fits and memory.state-blocks) is checked for --model on --gpu.

A recipe may place the roles on hosts (each command's VLLM_HOST_IP; GPU indices are per host) and
spread one role's DP ranks over hosts, one command per host: the primary, then on each other host
`--headless --data-parallel-start-rank N` with the primary's --data-parallel-address
(docs/hosts-links.md).

Exit status: 0 when no rule is violated (warnings and notes allowed), 2 on any violation or on
input that does not parse. `afd-sim rules` lists the rules.")]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    input: DeploymentArgs,
    /// GPU kind the commands run on (vLLM's batch defaults and the memory check depend on it).
    #[arg(long, default_value = "h200")]
    gpu: String,
    /// Model whose weights the memory check sizes: a config.json or a shipped model name.
    #[arg(long, default_value = "deepseek-v2-lite")]
    model: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Where a deployment comes from: a recipe, or both roles' command lines (shared with `predict`).
#[derive(Args, Debug, Clone)]
pub(crate) struct DeploymentArgs {
    /// Recipe script (the shell subset of the afd-plugin recipes; never executed).
    #[arg(value_name = "RECIPE.sh", conflicts_with_all = ["attention_args", "ffn_args", "serve_args"])]
    pub(crate) recipe: Option<PathBuf>,
    /// One plain server's command line (no afd block): [NAME=value ...] [vllm serve] ARGS.
    #[arg(
        long,
        value_name = "ARGS",
        conflicts_with_all = ["attention_args", "ffn_args"],
        allow_hyphen_values = true
    )]
    pub(crate) serve_args: Option<String>,
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
        self.recipe.is_some() || self.attention_args.is_some() || self.serve_args.is_some()
    }
}

/// A deployment read from its input, or why it could not be read (with the role at fault).
pub(crate) struct Loaded {
    sources: Sources,
    built: Result<Launch, (Option<Role>, DeploymentError)>,
}

/// Where the input came from: names used in `file:line:col` positions.
enum Sources {
    Recipe(String),
    /// A recipe (or the seed) with one plain server.
    Plain(String),
    CommandLines,
    ServeArgs,
}

impl Sources {
    fn name(&self, role: Option<Role>) -> &str {
        match self {
            Sources::Recipe(path) | Sources::Plain(path) => path,
            Sources::CommandLines => match role {
                Some(Role::Attention) => "--attention-args",
                _ => "--ffn-args",
            },
            Sources::ServeArgs => "--serve-args",
        }
    }
}

/// Reads the recipe or command lines of `input` (the seed recipe when none is given), with
/// `overrides` rendered into the servers' words, judged for GPUs of `gpu`; file and flag problems
/// are errors, parse problems of the deployment itself come back in [`Loaded`].
pub(crate) fn load(
    input: &DeploymentArgs,
    overrides: &Overrides,
    gpu: GpuKind,
) -> anyhow::Result<Loaded> {
    let mut options = RecipeOptions::default();
    for pair in &input.env {
        let Some((name, value)) = pair.split_once('=') else {
            bail!("--env expects NAME=VALUE, got '{pair}'");
        };
        options.env.insert(name.to_owned(), value.to_owned());
    }
    let rules = input.rules;
    let seed = !input.is_given();
    // The seed recipe runs model runner V2; the v0.26 plugin needs V1, so the seed is judged there
    // with VLLM_USE_V2_MODEL_RUNNER=0 (what its v0.26 recipes export).
    let seed_v026 = seed && rules == RuleSet::V026;
    let (mut sources, built) = match (&input.recipe, &input.attention_args, &input.serve_args) {
        (Some(_), _, _) | (None, None, None) => {
            let (name, text) = match &input.recipe {
                Some(path) => (
                    path.display().to_string(),
                    afd_traces::input::read_text(path, afd_traces::input::InputKind::RECIPE)?,
                ),
                None => (
                    "seed recipe 2a2f_graph_dbo_dp1tp2.sh".to_owned(),
                    SEED_RECIPE.to_owned(),
                ),
            };
            let built = if overrides.is_empty() && !seed_v026 {
                Launch::from_recipe(&text, &options, rules).map_err(|e| (None, e))
            } else {
                match Launch::recipe_words(&text, &options) {
                    Ok(mut servers) => {
                        if seed_v026 {
                            for server in &mut servers {
                                server
                                    .env
                                    .insert("VLLM_USE_V2_MODEL_RUNNER".to_owned(), "0".to_owned());
                            }
                        }
                        overrides.apply(&mut servers)?;
                        Launch::from_servers(&servers, rules).map_err(|(_, e)| (None, e))
                    }
                    Err(e) => Err((None, e)),
                }
            };
            (Sources::Recipe(name), built)
        }
        (None, Some(attention), None) => {
            let ffn = input
                .ffn_args
                .as_ref()
                .context("--attention-args needs --ffn-args")?;
            let built = if overrides.is_empty() {
                RoleConfig::from_command_line(attention, &options)
                    .map_err(|e| (Some(Role::Attention), e))
                    .and_then(|a| {
                        RoleConfig::from_command_line(ffn, &options)
                            .map(|f| Launch::Afd(afd_sim::deployment::Deployment::new(a, f, rules)))
                            .map_err(|e| (Some(Role::Ffn), e))
                    })
            } else {
                let words = |text: &str, role: Role| {
                    ServerWords::from_command_line(text, &options).map_err(|e| (Some(role), e))
                };
                match (words(attention, Role::Attention), words(ffn, Role::Ffn)) {
                    (Ok(a), Ok(f)) => {
                        let mut servers = [a, f];
                        overrides.apply(&mut servers)?;
                        let roles = [Some(Role::Attention), Some(Role::Ffn)];
                        Launch::from_servers(&servers, rules).map_err(|(i, e)| (roles[i], e))
                    }
                    (Err(e), _) | (_, Err(e)) => Err(e),
                }
            };
            (Sources::CommandLines, built)
        }
        (None, None, Some(line)) => {
            let built = ServerWords::from_command_line(line, &options)
                .map_err(|e| (None, e))
                .and_then(|mut server| {
                    let mut servers = [std::mem::take(&mut server)];
                    overrides
                        .apply(&mut servers)
                        .map_err(|e| (None, shape_error(e.to_string())))?;
                    match Launch::from_servers(&servers, rules).map_err(|(_, e)| (None, e))? {
                        Launch::Plain(plain) if plain.server.afd().is_some() => Err((
                            None,
                            shape_error(
                                "--serve-args has an afd block: an AFD deployment needs both roles (--attention-args and --ffn-args)".to_owned(),
                            ),
                        )),
                        launch => Ok(launch),
                    }
                });
            (Sources::ServeArgs, built)
        }
        _ => bail!("give a RECIPE.sh, both --attention-args and --ffn-args, or --serve-args"),
    };
    if let (Sources::Recipe(name), Ok(Launch::Plain(_))) = (&sources, &built) {
        sources = Sources::Plain(name.clone());
    }
    let built = built.map(|launch| launch.on_gpu(gpu));
    Ok(Loaded { sources, built })
}

fn shape_error(message: String) -> DeploymentError {
    DeploymentError::Shape {
        location: Location::START,
        message,
    }
}

/// The launch and its findings when it parses, passes every error rule and fits in memory (for
/// `model` on `gpu`); otherwise the text `check` would print about it, for the caller to show before
/// exiting 2.
pub(crate) fn checked(
    loaded: Loaded,
    gpu: GpuKind,
    model: &ModelArch,
) -> Result<(Launch, Report), String> {
    let launch = match loaded.built {
        Ok(launch) => launch,
        Err((role, error)) => return Err(input_errors_text(&loaded.sources, role, &error)),
    };
    let report = launch.check_on(gpu, model);
    if report.is_clean() {
        Ok((launch, report))
    } else {
        Err(report_text(&loaded.sources, &launch, &report))
    }
}

pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    if !args.input.is_given() {
        bail!("give a RECIPE.sh, both --attention-args and --ffn-args, or --serve-args");
    }
    let gpu = crate::cli::inputs::parse_gpu(&args.gpu)?;
    let model = read_model(&args.model)?;
    let Loaded { sources, built } = load(&args.input, &Overrides::default(), gpu)?;
    let rules = args.input.rules;
    let launch = match built {
        Ok(launch) => launch,
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
    let report = launch.check_on(gpu, &model);
    let text = if args.json {
        json_text(&report_json(&sources, &launch, &report))
    } else {
        report_text(&sources, &launch, &report)
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
    let role = match (finding.role, sources) {
        (Some(role), _) => Some(role.as_str()),
        (None, Sources::ServeArgs | Sources::Plain(_)) => Some("server"),
        (None, _) => None,
    };
    json!({
        "severity": finding.severity.as_str(),
        "rule": finding.rule.id(),
        "role": role,
        "subject": subject_json(finding.subject.as_ref()),
        "source": sources.name(finding.role),
        "location": location_json(finding.location),
        "message": finding.message,
    })
}

fn report_json(sources: &Sources, launch: &Launch, report: &Report) -> Value {
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
        "deployment": match launch {
            Launch::Afd(deployment) => {
                let mut value = json!({
                    "attention": role_json(&deployment.attention),
                    "ffn": role_json(&deployment.ffn),
                });
                for (key, role) in [("attention", Role::Attention), ("ffn", Role::Ffn)] {
                    let parts = deployment.parts(role);
                    if parts.len() > 1 {
                        value[key]["hosts"] = parts.iter().map(|p| part_json(p)).collect();
                    }
                }
                value
            }
            Launch::Plain(plain) => json!({ "server": role_json(&plain.server) }),
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
        "block_size": config.block_size(),
        "prefix_caching": config.prefix_caching(),
        "chunked_prefill": config.chunked_prefill(),
    })
}

/// One host's share of a role spread over hosts: its DP ranks, GPUs and host.
fn part_json(part: &RoleConfig) -> Value {
    json!({
        "host": part.machine_host().map(|h| h.value.clone()),
        "data_parallel_start_rank": part.dp_start_rank(),
        "data_parallel_size_local": part.dp_size_local(),
        "gpus": part.gpus().map(|g| g.iter().map(ToString::to_string).collect::<Vec<_>>()),
        "headless": part.headless(),
    })
}

/// The line of one host's share of a role spread over hosts, under the role's line.
fn part_line(part: &RoleConfig) -> String {
    let first = part.dp_start_rank();
    let last = first + part.dp_size_local().saturating_sub(1);
    let ranks = if first == last {
        format!("DP rank {first}")
    } else {
        format!("DP ranks {first}-{last}")
    };
    let gpus = part.gpus().map_or_else(
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
    let host = part.machine_host().map_or_else(
        || "an unnamed host".to_owned(),
        |h| format!("host {}", h.value),
    );
    let api = if part.headless() { ", headless" } else { "" };
    format!("  {:<9}    {ranks}: {gpus} on {host}{api}\n", "")
}

fn role_line(role: &str, config: &RoleConfig) -> String {
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
    let gpus = match config.machine_host() {
        Some(host) => format!("{gpus} on host {}", host.value),
        None => gpus,
    };
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
        role,
        config.dp_size(),
        config.tp_size(),
        config.rank_count(),
        config.max_num_seqs(),
        config.max_num_batched_tokens(),
        config.http_host().unwrap_or("0.0.0.0"),
        config.http_port(),
    )
}

fn report_text(sources: &Sources, launch: &Launch, report: &Report) -> String {
    let block = launch.afd();
    let shape = block.map_or_else(
        || match launch {
            Launch::Plain(_) => "plain vLLM".to_owned(),
            Launch::Afd(_) => "AFD".to_owned(),
        },
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
        Sources::Recipe(path) | Sources::Plain(path) => path.as_str(),
        Sources::CommandLines => "--attention-args/--ffn-args",
        Sources::ServeArgs => "--serve-args",
    };
    let mut out = format!(
        "{title}: {shape} deployment under rule set {}\n",
        report.rules
    );
    match launch {
        Launch::Afd(deployment) => {
            for (name, role) in [("attention", Role::Attention), ("ffn", Role::Ffn)] {
                out.push_str(&role_line(name, deployment.role(role)));
                let parts = deployment.parts(role);
                if parts.len() > 1 {
                    for part in parts {
                        out.push_str(&part_line(part));
                    }
                }
            }
        }
        Launch::Plain(plain) => out.push_str(&role_line("server", &plain.server)),
    }
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
