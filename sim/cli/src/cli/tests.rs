//! Tests of the command line as clap sees it: every flag of every subcommand has help text.

use clap::CommandFactory;

use super::Cli;

#[test]
fn every_flag_has_help_text() {
    let mut missing = Vec::new();
    let command = Cli::command();
    for sub in command.get_subcommands() {
        for arg in sub.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!(
                    "{} --{}",
                    sub.get_name(),
                    arg.get_long().unwrap_or(id)
                ));
            }
        }
    }
    assert!(missing.is_empty(), "flags without help: {missing:?}");
}
