//! Subcommand dispatch, shared flags and exit codes of `afd-sim`.
//!
//! Exit codes: 0 when the command succeeded (warnings allowed), 2 for bad input or a failed check
//! (`check` with any error finding, `topology` with an illegal rank pair). With no subcommand,
//! `afd-sim` runs `predict` on the seed recipe.

pub(crate) mod check;
mod inputs;
mod output;
mod predict;
mod profiles;
mod replay;
mod rules;
mod save_result;
mod sweep;
mod topology;
mod vllm;
mod warm_up;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use afd_sim::topology::RuleSet;

/// Predict, check and plan Attention-FFN disaggregated (AFD) vLLM deployments.
#[derive(Parser, Debug)]
#[command(name = "afd-sim", version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("AFD_GIT_COMMIT"), ")"), after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

const EXAMPLES: &str = "\
Examples:
  afd-sim                                   # predict the seed recipe's benchmark on H200
  afd-sim predict --json > report.json
  afd-sim check sim/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh
  afd-sim check --attention-args \"$ATTENTION_CMD\" --ffn-args \"$FFN_CMD\"
  afd-sim topology --attention-ranks 4 --ffn-ranks 2 --rules v0.26
  afd-sim topology --attention-dp 2 --attention-tp 2 --ffn-dp 2 --ffn-tp 1 --json
  afd-sim rules --rules v0.26
  afd-sim replay-pipeline traces/data/pipeline/h200x2-deepseek-v2-lite.json
  afd-sim sweep --gpus 16 --tpot-slo 50 --out results.csv --svg frontier.svg";

#[derive(Subcommand, Debug)]
enum Command {
    /// Simulate a deployment serving a workload and print a vllm bench serve-style summary.
    Predict(Box<predict::PredictArgs>),
    /// Validate a recipe script or two vllm serve command lines against the plugin's rules.
    Check(check::CheckArgs),
    /// Print the rank mapping (world, control group, subgroups, ports) of A Attention and F FFN ranks.
    Topology(topology::TopologyArgs),
    /// List the rules `check` applies, with their ids, severities and afd-spec sources.
    Rules(rules::RulesArgs),
    /// Simulate every configuration of `afd-probe pipeline` results and compare with the measured
    /// step times.
    ReplayPipeline(replay::ReplayArgs),
    /// Search the deployments of a GPU budget, simulating each, and report the Pareto frontier.
    Sweep(Box<sweep::SweepArgs>),
    /// Join the shard CSVs of one sweep into the result a single run gives.
    SweepMerge(sweep::MergeArgs),
    /// Derive a real vLLM engine's step costs from `afd-probe vllm` fixed-shape records.
    EngineProfile(vllm::EngineProfileArgs),
    /// Simulate the deployment and workload of a real `vllm bench serve` result; real vs predicted.
    Compare(vllm::CompareArgs),
    /// `compare` every bench record of the afd-probe vllm runs in a folder, against the bars.
    ReplayVllm(vllm::ReplayVllmArgs),
    /// List the lone prompts that spare a fresh vLLM server its first-use Triton compiles.
    WarmUp(warm_up::WarmUpArgs),
}

/// Parses `v0.26` / `latest` for `--rules`.
pub(crate) fn parse_rule_set(text: &str) -> Result<RuleSet, String> {
    RuleSet::parse(text)
        .ok_or_else(|| format!("unknown rule set '{text}' (expected v0.26 or latest)"))
}

pub(crate) fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Predict(args)) => predict::run(&args),
        Some(Command::Check(args)) => check::run(&args),
        Some(Command::Topology(args)) => topology::run(&args),
        Some(Command::Rules(args)) => rules::run(&args),
        Some(Command::ReplayPipeline(args)) => replay::run(&args),
        Some(Command::Sweep(args)) => sweep::run(&args),
        Some(Command::SweepMerge(args)) => sweep::merge_shards(&args),
        Some(Command::EngineProfile(args)) => vllm::engine_profile(&args),
        Some(Command::Compare(args)) => vllm::compare(&args),
        Some(Command::ReplayVllm(args)) => vllm::replay(&args),
        Some(Command::WarmUp(args)) => warm_up::run(&args),
        None => match Cli::parse_from(["afd-sim", "predict"]).command {
            Some(Command::Predict(args)) => predict::run(&args),
            _ => unreachable!("`afd-sim predict` parses as the predict subcommand"),
        },
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests;
