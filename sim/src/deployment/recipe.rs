//! A parser for the small shell subset the afd-plugin recipes are written in. It reads a script as
//! text and never runs anything.
//!
//! Accepted, exactly:
//! - comments, blank lines and a `#!` shebang;
//! - `set` lines with the options `-e`, `-u`, `-x` and `-o pipefail|errexit|nounset|xtrace` (in any
//!   combination, `-` or `+`): they only change how a shell reacts to errors or traces, never which
//!   commands run or with what arguments, so they are accepted and ignored;
//! - assignments `NAME=word`, `export NAME=word …` and `export NAME …`;
//! - `vllm serve …` and `uv run vllm serve …` with per-command environment prefixes
//!   (`CUDA_VISIBLE_DEVICES=0,1 uv run vllm serve …`);
//! - words made of unquoted text, `'…'` (may span lines, so multi-line JSON works), `"…"`, `\x`
//!   escapes and backslash-newline continuations;
//! - the expansions `$NAME`, `${NAME}` and `${NAME:-default}` (the default may itself quote and
//!   expand), with bash's field splitting of unquoted expansions;
//! - redirections `> file`, `>> file`, `N> file`, `N>> file`, `N>&M` (`2>&1`), a trailing `&`, and `wait`.
//!
//! Everything else is an error with its line and column and what was found: command substitution,
//! arithmetic, pipes, `;`, `&&`, `||`, subshells, `if`/loops/functions, input redirection, globs,
//! brace and tilde expansion, special parameters (`$1`, `$@`, …), other `${…}` operators, variables
//! that are not set, and any command other than the ones above. A foreground `vllm serve` followed by
//! another command is an error too: the shell would never get past it.
//!
//! Variables start from [`RecipeOptions::env`] (the caller's stand-in for the environment); the
//! library never reads the real one.

use std::collections::BTreeMap;
use std::fmt;

use crate::deployment::location::{Located, Location};

mod expand;
mod lexer;

use expand::Shell;
use lexer::{Lexer, group_commands};

/// A recipe the parser does not accept, with the 1-based line and column of the cause.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}:{column}: {message}")]
pub struct RecipeError {
    pub line: u32,
    pub column: u32,
    /// Lowercase, names what was found.
    pub message: String,
}

impl RecipeError {
    fn at(location: Location, message: impl Into<String>) -> RecipeError {
        let (line, column) = match location {
            Location::Text { line, column } => (line, column),
            Location::Argument { .. } => (1, 1),
        };
        RecipeError {
            line,
            column,
            message: message.into(),
        }
    }

    pub fn location(&self) -> Location {
        Location::Text {
            line: self.line,
            column: self.column,
        }
    }

    /// `recipe.sh:12:5: message`.
    pub fn render(&self, source: &str) -> String {
        format!("{}: {}", self.location().render(source), self.message)
    }
}

/// What the parser starts from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecipeOptions {
    /// Exported variables visible before the first line (the script's environment).
    pub env: BTreeMap<String, String>,
}

/// A recipe after parsing and evaluating its assignments.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    /// Every `vllm serve` command, in script order.
    pub servers: Vec<ServeCommand>,
}

/// One `vllm serve` command with everything the process would see.
#[derive(Clone, Debug, PartialEq)]
pub struct ServeCommand {
    /// Where the command starts (its first environment prefix, or `uv`/`vllm`).
    pub location: Location,
    /// The process environment: exported variables plus this command's prefix assignments.
    pub env: BTreeMap<String, Located<String>>,
    /// The words after `vllm serve`, expanded and split as the shell would.
    pub args: Vec<Word>,
    pub redirections: Vec<Redirection>,
    /// Ends with `&`.
    pub background: bool,
}

/// One argument word after expansion, with the source position of each of its characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    pub location: Location,
    // Invariant: one entry per `char` of `text`.
    char_locations: Vec<Location>,
}

impl Word {
    /// A word with no finer positions than its own (tests, or words from an argument list).
    pub fn new(text: impl Into<String>, location: Location) -> Word {
        let text = text.into();
        let char_locations = vec![location; text.chars().count()];
        Word {
            text,
            location,
            char_locations,
        }
    }

    /// A word whose characters come from several places (`char_locations` one per `char`; the
    /// word's start for any it lacks).
    pub(crate) fn with_char_locations(
        text: impl Into<String>,
        location: Location,
        mut char_locations: Vec<Location>,
    ) -> Word {
        let text = text.into();
        char_locations.resize(text.chars().count(), location);
        Word {
            text,
            location,
            char_locations,
        }
    }

    /// Source position of the character at `char_index` (the word's start when out of range).
    pub fn location_of_char(&self, char_index: usize) -> Location {
        self.char_locations
            .get(char_index)
            .copied()
            .unwrap_or(self.location)
    }
}

/// An output redirection; recorded, never performed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirection {
    pub fd: u32,
    pub kind: RedirectionKind,
    pub location: Location,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectionKind {
    /// `> file`
    Truncate(String),
    /// `>> file`
    Append(String),
    /// `>&M`
    Duplicate(u32),
}

impl fmt::Display for Redirection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            RedirectionKind::Truncate(path) => write!(f, "{}> {path}", self.fd),
            RedirectionKind::Append(path) => write!(f, "{}>> {path}", self.fd),
            RedirectionKind::Duplicate(target) => write!(f, "{}>&{target}", self.fd),
        }
    }
}

/// Parses and evaluates a recipe script.
pub fn parse_recipe(text: &str, options: &RecipeOptions) -> Result<Recipe, RecipeError> {
    let tokens = Lexer::new(text).tokens()?;
    let commands = group_commands(tokens)?;
    let mut shell = Shell::new(options);
    let mut servers = Vec::new();
    let mut foreground_server: Option<Location> = None;
    for command in commands {
        if let Some(server) = foreground_server {
            return Err(RecipeError::at(
                command.location,
                format!(
                    "this line is never reached: the vllm serve at {server} runs in the foreground (no `&`) and does not return"
                ),
            ));
        }
        if let Some(server) = shell.run(command)? {
            if !server.background {
                foreground_server = Some(server.location);
            }
            servers.push(server);
        }
    }
    Ok(Recipe { servers })
}

/// Parses one command line such as `--attention-args` takes: optional `NAME=value` prefixes, then
/// either `vllm serve ARGS` / `uv run vllm serve ARGS` or the bare `ARGS`. Quoting and
/// continuations work as in a recipe; expansions see only `options.env`; `&` and redirections are
/// accepted and recorded.
pub fn parse_command_line(
    text: &str,
    options: &RecipeOptions,
) -> Result<ServeCommand, RecipeError> {
    let tokens = Lexer::new(text).tokens()?;
    let mut commands = group_commands(tokens)?;
    if commands.len() > 1 {
        return Err(RecipeError::at(
            commands[1].location,
            "expected a single command line, found a second command",
        ));
    }
    let mut shell = Shell::new(options);
    let Some(command) = commands.pop() else {
        return Ok(ServeCommand {
            location: Location::START,
            env: shell.exported_env(Location::START),
            args: Vec::new(),
            redirections: Vec::new(),
            background: false,
        });
    };
    shell.run_bare_arguments(command)
}

#[cfg(test)]
mod tests;
