//! The `afd-probe` command line.

use std::process::ExitCode;

use clap::Parser;

/// Measure NCCL P2P, MoE GEMMs, attention and launch costs on the GPUs of this machine.
#[derive(Parser, Debug)]
#[command(name = "afd-probe", version, about)]
struct Cli {}

fn main() -> ExitCode {
    let _cli = Cli::parse();
    ExitCode::SUCCESS
}
