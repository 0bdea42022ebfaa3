//! The `afd-sim` command line: parses flags, reads files, runs the library, writes reports.

mod cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Predict, check and plan Attention-FFN disaggregated (AFD) vLLM deployments.
#[derive(Parser, Debug)]
#[command(
    name = "afd-sim",
    version,
    about,
    after_help = "With no subcommand, `afd-sim` runs `afd-sim predict` on the seed recipe \
                  (2a2f_graph_dbo_dp1tp2 on H200, DeepSeek-V2-Lite, 1024 prompts of 1024 in / 128 out \
                  at 5 req/s, concurrency 32)."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    Predict(cli::predict::PredictArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let command =
        cli.command
            .unwrap_or_else(|| match Cli::parse_from(["afd-sim", "predict"]).command {
                Some(command) => command,
                None => unreachable!("the predict subcommand parses"),
            });
    let result = match command {
        Command::Predict(args) => cli::predict::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
