//! The `afd-sim` command line: parses flags, reads files, runs the library, writes reports.
//!
//! All I/O and all of clap/anyhow live here and in `cli/`; the library stays pure.

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::run()
}
