//! `afd-sim rules`: the catalogue `check` applies (the conformance suite's static invariants).

use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use afd_sim::deployment::rules::{rules, rules_of};
use afd_sim::topology::RuleSet;

use crate::cli::output::{emit, json_text, table};
use crate::cli::parse_rule_set;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim rules
  afd-sim rules --rules v0.26 --json")]
pub(crate) struct RulesArgs {
    /// Only the rules of this rule set (v0.26 or latest); all rules when absent.
    #[arg(long, value_name = "SET", value_parser = parse_rule_set)]
    rules: Option<RuleSet>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &RulesArgs) -> anyhow::Result<ExitCode> {
    let selected: Vec<_> = match args.rules {
        Some(set) => rules_of(set).collect(),
        None => rules().iter().collect(),
    };
    let text = if args.json {
        let rows: Vec<_> = selected
            .iter()
            .map(|info| {
                json!({
                    "id": info.id,
                    "severity": info.severity.as_str(),
                    "rule_sets": info.rule_sets.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                    "source": info.source,
                    "statement": info.statement,
                })
            })
            .collect();
        json_text(&json!({ "rules": rows }))
    } else {
        let mut rows = vec![vec![
            "id".to_owned(),
            "severity".to_owned(),
            "rule sets".to_owned(),
            "statement".to_owned(),
        ]];
        for info in &selected {
            rows.push(vec![
                info.id.to_owned(),
                info.severity.as_str().to_owned(),
                info.rule_sets
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(","),
                format!("{} ({})", info.statement, info.source),
            ]);
        }
        let mut text = table(&rows);
        text.push_str(&format!("\n{} rules\n", selected.len()));
        text
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
