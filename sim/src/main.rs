//! The `afd-sim` command line: parses flags, reads files, runs the library, writes reports.

use std::process::ExitCode;

use clap::Parser;

/// Predict, check and plan Attention-FFN disaggregated (AFD) vLLM deployments.
#[derive(Parser, Debug)]
#[command(name = "afd-sim", version, about)]
struct Cli {}

fn main() -> ExitCode {
    let _cli = Cli::parse();
    ExitCode::SUCCESS
}
