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

// ---------------------------------------------------------------------------------------------
// Lexing: text → tokens of raw (unexpanded) words.

#[derive(Clone, Debug)]
enum Piece {
    Char {
        ch: char,
        at: Location,
        quoted: bool,
    },
    Param {
        name: String,
        default: Option<Vec<Piece>>,
        quoted: bool,
        at: Location,
    },
}

#[derive(Clone, Debug)]
struct RawWord {
    pieces: Vec<Piece>,
    start: Location,
    /// Some part was quoted, so an empty expansion still yields an (empty) word.
    has_quotes: bool,
}

impl RawWord {
    /// The literal text if the word has no expansions.
    fn literal(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Char { ch, .. } => Some(*ch),
                Piece::Param { .. } => None,
            })
            .collect()
    }

    /// `NAME` and the value pieces when the word is an assignment `NAME=value`.
    fn as_assignment(&self) -> Option<(String, &[Piece])> {
        let mut name = String::new();
        for (i, piece) in self.pieces.iter().enumerate() {
            match piece {
                Piece::Char {
                    ch: '=',
                    quoted: false,
                    ..
                } if !name.is_empty() => return Some((name, &self.pieces[i + 1..])),
                Piece::Char {
                    ch, quoted: false, ..
                } if is_name_char(*ch, name.is_empty()) => name.push(*ch),
                _ => return None,
            }
        }
        None
    }
}

#[derive(Clone, Debug)]
enum RawRedirectKind {
    Truncate(RawWord),
    Append(RawWord),
    Duplicate(u32),
}

#[derive(Clone, Debug)]
enum Token {
    Word(RawWord),
    Redirect {
        fd: u32,
        kind: RawRedirectKind,
        at: Location,
    },
    Newline,
    Amp(Location),
}

fn is_name_char(ch: char, first: bool) -> bool {
    ch == '_' || ch.is_ascii_alphabetic() || (!first && ch.is_ascii_digit())
}

fn is_blank(ch: char) -> bool {
    ch == ' ' || ch == '\t' || ch == '\r'
}

/// Characters that end an unquoted word.
fn is_delimiter(ch: char) -> bool {
    is_blank(ch) || matches!(ch, '\n' | '&' | '|' | ';' | '<' | '>' | '(' | ')')
}

/// Deepest `${A:-${B:-…}}` nesting accepted; deeper input is an error rather than a deep recursion.
const MAX_NESTING: u32 = 32;

/// Longest expanded word or assignment value, in characters; `A=$A$A` doubling past it is an error.
const MAX_EXPANDED_CHARS: usize = 1 << 20;

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    line: u32,
    column: u32,
    /// Current `${…:-…}` nesting.
    depth: u32,
}

/// Where a word is being read: plain, or the default of `${X:-…}` (ends at `}`), in or out of
/// double quotes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    Plain,
    Default { quoted: bool },
}

impl Lexer {
    fn new(text: &str) -> Lexer {
        Lexer {
            chars: text.chars().collect(),
            pos: 0,
            line: 1,
            column: 1,
            depth: 0,
        }
    }

    fn here(&self) -> Location {
        Location::Text {
            line: self.line,
            column: self.column,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let ch = self.peek()?;
        self.pos += 1;
        if ch == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(ch)
    }

    fn error<T>(&self, message: impl Into<String>) -> Result<T, RecipeError> {
        Err(RecipeError::at(self.here(), message))
    }

    fn tokens(mut self) -> Result<Vec<Token>, RecipeError> {
        let mut tokens = Vec::new();
        loop {
            self.skip_blanks();
            let at = self.here();
            let Some(ch) = self.peek() else { break };
            match ch {
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                '\n' => {
                    self.bump();
                    tokens.push(Token::Newline);
                }
                '&' => match self.peek_at(1) {
                    Some('&') => {
                        return self.error(
                            "`&&` lists are not modelled; put each command on its own line",
                        );
                    }
                    Some('>') => {
                        return self.error("`&>` redirection is not modelled; write `> file 2>&1`");
                    }
                    _ => {
                        self.bump();
                        tokens.push(Token::Amp(at));
                    }
                },
                '|' => {
                    let what = if self.peek_at(1) == Some('|') {
                        "`||` lists are"
                    } else {
                        "pipes (`|`) are"
                    };
                    return self.error(format!(
                        "{what} not modelled; a recipe runs vllm serve commands only"
                    ));
                }
                ';' => {
                    return self.error(
                        "`;` command separators are not modelled; put each command on its own line",
                    );
                }
                '(' | ')' => {
                    return self.error(format!("`{ch}` (subshells and functions) is not modelled"));
                }
                '<' => return self.error("input redirection `<` is not modelled"),
                '>' => tokens.push(self.redirect(1, at)?),
                _ => {
                    let word = self.word(Context::Plain)?;
                    let fd = word.literal().filter(|text| {
                        !text.is_empty()
                            && text.chars().all(|c| c.is_ascii_digit())
                            && !word.has_quotes
                    });
                    match fd {
                        Some(digits) if self.peek() == Some('>') => {
                            let fd = digits.parse::<u32>().map_err(|_| {
                                RecipeError::at(
                                    at,
                                    format!("file descriptor `{digits}` is too large"),
                                )
                            })?;
                            tokens.push(self.redirect(fd, at)?);
                        }
                        _ => tokens.push(Token::Word(word)),
                    }
                }
            }
        }
        Ok(tokens)
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(c) if is_blank(c) => {
                    self.bump();
                }
                Some('\\') if self.peek_at(1) == Some('\n') => {
                    self.bump();
                    self.bump();
                }
                _ => break,
            }
        }
    }

    /// At `>`: `> file`, `>> file` or `>&N`.
    fn redirect(&mut self, fd: u32, at: Location) -> Result<Token, RecipeError> {
        self.bump();
        let append = if self.peek() == Some('>') {
            self.bump();
            true
        } else {
            false
        };
        if !append && self.peek() == Some('&') {
            self.bump();
            let start = self.here();
            let mut digits = String::new();
            while let Some(c) = self.peek().filter(char::is_ascii_digit) {
                digits.push(c);
                self.bump();
            }
            if digits.is_empty() || self.peek().is_some_and(|c| !is_delimiter(c)) {
                return Err(RecipeError::at(
                    start,
                    "`>&` must be followed by a file descriptor number (as in `2>&1`)",
                ));
            }
            let target = digits.parse::<u32>().map_err(|_| {
                RecipeError::at(start, format!("file descriptor `{digits}` is too large"))
            })?;
            return Ok(Token::Redirect {
                fd,
                kind: RawRedirectKind::Duplicate(target),
                at,
            });
        }
        self.skip_blanks();
        match self.peek() {
            Some(c) if !is_delimiter(c) && c != '#' => {}
            found => {
                let found = found.map_or_else(|| "end of input".to_owned(), |c| format!("{c:?}"));
                return self.error(format!("redirection needs a file name, found {found}"));
            }
        }
        let target = self.word(Context::Plain)?;
        let kind = if append {
            RawRedirectKind::Append(target)
        } else {
            RawRedirectKind::Truncate(target)
        };
        Ok(Token::Redirect { fd, kind, at })
    }

    /// Reads one word (plain) or the default of `${X:-…}` up to its closing `}` (not consumed).
    fn word(&mut self, context: Context) -> Result<RawWord, RecipeError> {
        let start = self.here();
        let mut pieces = Vec::new();
        let mut has_quotes = false;
        let in_default_quoted = context == Context::Default { quoted: true };
        loop {
            let Some(ch) = self.peek() else {
                if matches!(context, Context::Default { .. }) {
                    return self.error("unterminated `${…:-…}` expansion: missing `}`");
                }
                break;
            };
            if let Context::Default { .. } = context
                && ch == '}'
            {
                break;
            }
            if in_default_quoted {
                // Inside `"${X:-…}"`: double-quote rules, `'` is literal, `"` opens a nested section.
                match ch {
                    '"' => {
                        has_quotes = true;
                        self.double_quoted(&mut pieces)?;
                    }
                    '\\' | '$' | '`' => self.double_quoted_char(&mut pieces)?,
                    _ => {
                        let at = self.here();
                        self.bump();
                        pieces.push(Piece::Char {
                            ch,
                            at,
                            quoted: true,
                        });
                    }
                }
                continue;
            }
            if context == Context::Plain && is_delimiter(ch) {
                break;
            }
            let at = self.here();
            match ch {
                '\\' => {
                    self.bump();
                    match self.bump() {
                        Some('\n') => {}
                        Some(escaped) => pieces.push(Piece::Char {
                            ch: escaped,
                            at,
                            quoted: true,
                        }),
                        None => return Err(RecipeError::at(at, "backslash at end of input")),
                    }
                }
                '\'' => {
                    has_quotes = true;
                    let open = self.here();
                    self.bump();
                    loop {
                        let at = self.here();
                        match self.bump() {
                            Some('\'') => break,
                            Some(c) => pieces.push(Piece::Char {
                                ch: c,
                                at,
                                quoted: true,
                            }),
                            None => {
                                return Err(RecipeError::at(
                                    open,
                                    "unterminated single quote: no closing `'` before the end of input",
                                ));
                            }
                        }
                    }
                }
                '"' => {
                    has_quotes = true;
                    self.double_quoted(&mut pieces)?;
                }
                '$' => self.dollar(&mut pieces, false)?,
                '`' => return self.error("command substitution with backticks is not modelled: the parser never runs commands"),
                '[' if pieces.is_empty() && self.is_standalone_bracket() => {
                    // `[` / `[[` as a word (the test command) is literal; the command check rejects it.
                    while self.peek() == Some('[') {
                        let at = self.here();
                        self.bump();
                        pieces.push(Piece::Char {
                            ch: '[',
                            at,
                            quoted: false,
                        });
                    }
                }
                '*' | '?' | '[' => {
                    return self.error(format!(
                        "unquoted `{ch}` would be a filename pattern (globbing is not modelled); quote the word"
                    ));
                }
                '{' | '}' => {
                    return self.error(format!(
                        "unquoted `{ch}` (brace expansion or a command group) is not modelled; quote the word"
                    ));
                }
                '~' if pieces.is_empty() => {
                    return self.error("tilde expansion `~` is not modelled; write the path out or quote it");
                }
                _ => {
                    self.bump();
                    pieces.push(Piece::Char {
                        ch,
                        at,
                        quoted: false,
                    });
                }
            }
        }
        Ok(RawWord {
            pieces,
            start,
            has_quotes,
        })
    }

    /// At `"`: reads through the closing quote.
    fn double_quoted(&mut self, pieces: &mut Vec<Piece>) -> Result<(), RecipeError> {
        let open = self.here();
        self.bump();
        loop {
            match self.peek() {
                None => {
                    return Err(RecipeError::at(
                        open,
                        "unterminated double quote: no closing `\"` before the end of input",
                    ));
                }
                Some('"') => {
                    self.bump();
                    return Ok(());
                }
                Some(_) => self.double_quoted_char(pieces)?,
            }
        }
    }

    /// One character (or escape, or expansion) inside double quotes.
    fn double_quoted_char(&mut self, pieces: &mut Vec<Piece>) -> Result<(), RecipeError> {
        let at = self.here();
        let Some(ch) = self.peek() else {
            return self.error("unexpected end of input inside double quotes");
        };
        match ch {
            '\\' => {
                self.bump();
                match self.peek() {
                    Some('\n') => {
                        self.bump();
                    }
                    Some(c @ ('$' | '`' | '"' | '\\')) => {
                        self.bump();
                        pieces.push(Piece::Char { ch: c, at, quoted: true });
                    }
                    _ => pieces.push(Piece::Char {
                        ch: '\\',
                        at,
                        quoted: true,
                    }),
                }
            }
            '$' => self.dollar(pieces, true)?,
            '`' => return self.error("command substitution with backticks is not modelled: the parser never runs commands"),
            _ => {
                self.bump();
                pieces.push(Piece::Char { ch, at, quoted: true });
            }
        }
        Ok(())
    }

    /// At `$`: `$NAME`, `${NAME}`, `${NAME:-default}`, or a literal `$`.
    fn dollar(&mut self, pieces: &mut Vec<Piece>, quoted: bool) -> Result<(), RecipeError> {
        let at = self.here();
        self.bump();
        match self.peek() {
            Some('(') => {
                let what = if self.peek_at(1) == Some('(') {
                    "arithmetic expansion `$((…))` is"
                } else {
                    "command substitution `$(…)` is"
                };
                Err(RecipeError::at(
                    at,
                    format!("{what} not modelled: the parser never runs commands"),
                ))
            }
            Some('{') => {
                self.bump();
                let name = self.name();
                if name.is_empty() {
                    let found = self
                        .peek()
                        .map_or_else(|| "end of input".to_owned(), |c| format!("`{c}`"));
                    return Err(RecipeError::at(
                        at,
                        format!(
                            "parameter expansion `${{{}…` is not modelled: only ${{NAME}} and ${{NAME:-default}} are",
                            found.trim_matches('`')
                        ),
                    ));
                }
                match (self.peek(), self.peek_at(1)) {
                    (Some('}'), _) => {
                        self.bump();
                        pieces.push(Piece::Param {
                            name,
                            default: None,
                            quoted,
                            at,
                        });
                        Ok(())
                    }
                    (Some(':'), Some('-')) => {
                        self.bump();
                        self.bump();
                        if self.depth >= MAX_NESTING {
                            return Err(RecipeError::at(
                                at,
                                format!(
                                    "`${{…:-…}}` expansions nested deeper than {MAX_NESTING} are not modelled"
                                ),
                            ));
                        }
                        self.depth += 1;
                        let default = self.word(Context::Default { quoted });
                        self.depth -= 1;
                        let default = default?;
                        self.bump(); // the closing `}`
                        pieces.push(Piece::Param {
                            name,
                            default: Some(default.pieces),
                            quoted,
                            at,
                        });
                        Ok(())
                    }
                    (found, _) => {
                        let found =
                            found.map_or_else(|| "end of input".to_owned(), |c| format!("`{c}`"));
                        Err(RecipeError::at(
                            at,
                            format!(
                                "parameter expansion operator {found} in ${{{name}…}} is not modelled: only ${{{name}}} and ${{{name}:-default}} are"
                            ),
                        ))
                    }
                }
            }
            Some(c) if is_name_char(c, true) => {
                let name = self.name();
                pieces.push(Piece::Param {
                    name,
                    default: None,
                    quoted,
                    at,
                });
                Ok(())
            }
            Some(c)
                if c.is_ascii_digit() || matches!(c, '@' | '*' | '#' | '?' | '$' | '!' | '-') =>
            {
                Err(RecipeError::at(
                    at,
                    format!(
                        "special parameter `${c}` is not modelled: a recipe has no arguments, exit codes or process ids"
                    ),
                ))
            }
            _ => {
                pieces.push(Piece::Char {
                    ch: '$',
                    at,
                    quoted,
                });
                Ok(())
            }
        }
    }

    /// At `[`: the word is `[` or `[[` alone.
    fn is_standalone_bracket(&self) -> bool {
        let width = if self.peek_at(1) == Some('[') { 2 } else { 1 };
        self.peek_at(width).is_none_or(is_delimiter)
    }

    fn name(&mut self) -> String {
        let mut name = String::new();
        while let Some(c) = self.peek().filter(|&c| is_name_char(c, name.is_empty())) {
            name.push(c);
            self.bump();
        }
        name
    }
}

// ---------------------------------------------------------------------------------------------
// Grouping tokens into commands.

struct RawCommand {
    location: Location,
    words: Vec<RawWord>,
    redirects: Vec<(u32, RawRedirectKind, Location)>,
    background: bool,
}

fn group_commands(tokens: Vec<Token>) -> Result<Vec<RawCommand>, RecipeError> {
    let mut commands = Vec::new();
    let mut current: Option<RawCommand> = None;
    for token in tokens {
        match token {
            Token::Word(word) => {
                let command = current.get_or_insert_with(|| RawCommand {
                    location: word.start,
                    words: Vec::new(),
                    redirects: Vec::new(),
                    background: false,
                });
                command.words.push(word);
            }
            Token::Redirect { fd, kind, at } => {
                let command = current.get_or_insert_with(|| RawCommand {
                    location: at,
                    words: Vec::new(),
                    redirects: Vec::new(),
                    background: false,
                });
                command.redirects.push((fd, kind, at));
            }
            Token::Newline => commands.extend(current.take()),
            Token::Amp(at) => match current.take() {
                Some(mut command) => {
                    command.background = true;
                    commands.push(command);
                }
                None => return Err(RecipeError::at(at, "`&` without a command before it")),
            },
        }
    }
    commands.extend(current);
    Ok(commands)
}

// ---------------------------------------------------------------------------------------------
// Evaluation: assignments, expansions, commands.

#[derive(Clone, Debug)]
struct Variable {
    value: String,
    exported: bool,
    location: Location,
}

struct Shell {
    variables: BTreeMap<String, Variable>,
    /// Names marked by `export NAME` before they had a value.
    exported_unset: Vec<String>,
}

/// One character of an expanded word.
#[derive(Clone, Copy)]
struct Expanded {
    ch: char,
    at: Location,
    /// Came from an unquoted expansion, so whitespace here splits fields.
    splits: bool,
}

const COMPOUND_KEYWORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "[[", "[", "!", "time", "coproc",
];

impl Shell {
    fn new(options: &RecipeOptions) -> Shell {
        let variables = options
            .env
            .iter()
            .map(|(name, value)| {
                let variable = Variable {
                    value: value.clone(),
                    exported: true,
                    location: Location::START,
                };
                (name.clone(), variable)
            })
            .collect();
        Shell {
            variables,
            exported_unset: Vec::new(),
        }
    }

    fn exported_env(&self, fallback: Location) -> BTreeMap<String, Located<String>> {
        self.variables
            .iter()
            .filter(|(_, variable)| variable.exported)
            .map(|(name, variable)| {
                let location = if variable.location == Location::START {
                    fallback
                } else {
                    variable.location
                };
                (name.clone(), Located::new(variable.value.clone(), location))
            })
            .collect()
    }

    fn assign(&mut self, name: String, value: String, location: Location, export: bool) {
        let exported = export
            || self.variables.get(&name).is_some_and(|v| v.exported)
            || self.exported_unset.contains(&name);
        self.exported_unset.retain(|n| n != &name);
        self.variables.insert(
            name,
            Variable {
                value,
                exported,
                location,
            },
        );
    }

    /// Runs one command; returns the `vllm serve` it describes, if it is one.
    fn run(&mut self, command: RawCommand) -> Result<Option<ServeCommand>, RecipeError> {
        let (prefix, rest) = split_prefix(&command.words);
        let Some(head) = rest.first() else {
            if let Some(&(_, _, at)) = command.redirects.first() {
                return Err(RecipeError::at(at, "redirection without a command"));
            }
            if command.background {
                return Err(RecipeError::at(
                    command.location,
                    "`&` after an assignment runs nothing",
                ));
            }
            let values = self.evaluate_assignments(prefix)?;
            for (name, value, location) in values {
                self.assign(name, value, location, false);
            }
            return Ok(None);
        };
        let name = head.literal().ok_or_else(|| {
            RecipeError::at(
                head.start,
                "the command name comes from an expansion; write the command (vllm serve) out",
            )
        })?;
        match name.as_str() {
            "export" => {
                self.no_decorations(&command, prefix, "export")?;
                self.export(&rest[1..])?;
                Ok(None)
            }
            "set" => {
                self.no_decorations(&command, prefix, "set")?;
                check_set_options(&rest[1..])?;
                Ok(None)
            }
            "wait" => {
                self.no_decorations(&command, prefix, "wait")?;
                if let Some(arg) = rest.get(1) {
                    return Err(RecipeError::at(
                        arg.start,
                        "`wait` with arguments is not modelled (process ids are not tracked); use a bare `wait`",
                    ));
                }
                Ok(None)
            }
            "vllm" | "uv" => {
                let skip = serve_prefix_len(rest)?;
                self.serve(&command, prefix, &rest[skip..]).map(Some)
            }
            keyword if COMPOUND_KEYWORDS.contains(&keyword) => Err(RecipeError::at(
                head.start,
                format!(
                    "`{keyword}` (conditionals, loops and tests) is not modelled; a recipe is a straight list of commands"
                ),
            )),
            other => Err(RecipeError::at(
                head.start,
                format!(
                    "unknown command `{other}`: a recipe may only assign and export variables, `set` shell options, run `vllm serve` or `uv run vllm serve`, and `wait`"
                ),
            )),
        }
    }

    /// For `--attention-args`: prefixes, then `vllm serve …` or bare arguments.
    fn run_bare_arguments(&mut self, command: RawCommand) -> Result<ServeCommand, RecipeError> {
        let (prefix, rest) = split_prefix(&command.words);
        let skip = match rest.first().and_then(RawWord::literal).as_deref() {
            Some("vllm" | "uv") => serve_prefix_len(rest)?,
            _ => 0,
        };
        self.serve(&command, prefix, &rest[skip..])
    }

    fn no_decorations(
        &self,
        command: &RawCommand,
        prefix: &[RawWord],
        what: &str,
    ) -> Result<(), RecipeError> {
        if let Some(word) = prefix.first() {
            return Err(RecipeError::at(
                word.start,
                format!("an environment prefix before `{what}` is not modelled"),
            ));
        }
        if let Some(&(_, _, at)) = command.redirects.first() {
            return Err(RecipeError::at(
                at,
                format!("redirecting `{what}` is not modelled"),
            ));
        }
        if command.background {
            return Err(RecipeError::at(
                command.location,
                format!("running `{what}` in the background is not modelled"),
            ));
        }
        Ok(())
    }

    fn export(&mut self, args: &[RawWord]) -> Result<(), RecipeError> {
        for arg in args {
            if let Some((name, value)) = arg.as_assignment() {
                let value = self.expand_joined(value)?;
                self.assign(name, value, arg.start, true);
                continue;
            }
            match arg.literal() {
                Some(name)
                    if !name.is_empty()
                        && name
                            .chars()
                            .enumerate()
                            .all(|(i, c)| is_name_char(c, i == 0)) =>
                {
                    match self.variables.get_mut(&name) {
                        Some(variable) => variable.exported = true,
                        None => self.exported_unset.push(name),
                    }
                }
                Some(option) if option.starts_with('-') => {
                    return Err(RecipeError::at(
                        arg.start,
                        format!("`export {option}` is not modelled; use `export NAME=value`"),
                    ));
                }
                _ => {
                    return Err(RecipeError::at(
                        arg.start,
                        "`export` expects NAME or NAME=value",
                    ));
                }
            }
        }
        Ok(())
    }

    fn serve(
        &mut self,
        command: &RawCommand,
        prefix: &[RawWord],
        args: &[RawWord],
    ) -> Result<ServeCommand, RecipeError> {
        // Prefix values expand against the shell's variables, not each other (bash semantics).
        let assignments = self.evaluate_assignments(prefix)?;
        let mut env = self.exported_env(command.location);
        for (name, value, location) in assignments {
            env.insert(name, Located::new(value, location));
        }
        let mut words = Vec::new();
        for arg in args {
            words.extend(self.expand_fields(arg)?);
        }
        let mut redirections = Vec::new();
        for (fd, kind, at) in &command.redirects {
            let kind = match kind {
                RawRedirectKind::Duplicate(target) => RedirectionKind::Duplicate(*target),
                RawRedirectKind::Truncate(word) => {
                    RedirectionKind::Truncate(self.redirect_target(word)?)
                }
                RawRedirectKind::Append(word) => {
                    RedirectionKind::Append(self.redirect_target(word)?)
                }
            };
            redirections.push(Redirection {
                fd: *fd,
                kind,
                location: *at,
            });
        }
        Ok(ServeCommand {
            location: command.location,
            env,
            args: words,
            redirections,
            background: command.background,
        })
    }

    fn redirect_target(&self, word: &RawWord) -> Result<String, RecipeError> {
        let mut fields = self.expand_fields(word)?;
        if fields.len() != 1 {
            return Err(RecipeError::at(
                word.start,
                format!(
                    "ambiguous redirect: the target expands to {} words",
                    fields.len()
                ),
            ));
        }
        Ok(fields.remove(0).text)
    }

    fn evaluate_assignments(
        &self,
        words: &[RawWord],
    ) -> Result<Vec<(String, String, Location)>, RecipeError> {
        words
            .iter()
            .map(|word| {
                let (name, value) = word
                    .as_assignment()
                    .expect("split_prefix only returns assignments");
                Ok((name, self.expand_joined(value)?, word.start))
            })
            .collect()
    }

    /// Expands without field splitting (assignment values).
    fn expand_joined(&self, pieces: &[Piece]) -> Result<String, RecipeError> {
        let mut out = Vec::new();
        self.expand(pieces, false, &mut out)?;
        Ok(out.iter().map(|e| e.ch).collect())
    }

    /// Expands a word into fields, splitting unquoted expansions at whitespace.
    fn expand_fields(&self, word: &RawWord) -> Result<Vec<Word>, RecipeError> {
        let mut chars = Vec::new();
        self.expand(&word.pieces, false, &mut chars)?;
        let mut fields = Vec::new();
        let mut current: Vec<Expanded> = Vec::new();
        for expanded in chars {
            if expanded.splits && matches!(expanded.ch, ' ' | '\t' | '\n') {
                if !current.is_empty() {
                    fields.push(make_word(&current, word.start));
                    current.clear();
                }
            } else {
                current.push(expanded);
            }
        }
        if !current.is_empty() {
            fields.push(make_word(&current, word.start));
        }
        if fields.is_empty() && word.has_quotes {
            fields.push(Word::new(String::new(), word.start));
        }
        Ok(fields)
    }

    fn expand(
        &self,
        pieces: &[Piece],
        in_unquoted_expansion: bool,
        out: &mut Vec<Expanded>,
    ) -> Result<(), RecipeError> {
        for piece in pieces {
            match piece {
                Piece::Char { ch, at, quoted } => out.push(Expanded {
                    ch: *ch,
                    at: *at,
                    splits: in_unquoted_expansion && !quoted,
                }),
                Piece::Param {
                    name,
                    default,
                    quoted,
                    at,
                } => {
                    let value = self.variables.get(name).map(|v| v.value.as_str());
                    match (value, default) {
                        (Some(value), None) => self.push_value(name, value, *quoted, *at, out)?,
                        (Some(value), Some(_)) if !value.is_empty() => {
                            self.push_value(name, value, *quoted, *at, out)?;
                        }
                        (_, Some(default)) => {
                            self.expand(default, in_unquoted_expansion || !quoted, out)?;
                        }
                        (None, None) => {
                            return Err(RecipeError::at(
                                *at,
                                format!(
                                    "variable `{name}` is not set here; assign it earlier, write ${{{name}:-default}}, or pass it as an environment variable"
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn push_value(
        &self,
        name: &str,
        value: &str,
        quoted: bool,
        at: Location,
        out: &mut Vec<Expanded>,
    ) -> Result<(), RecipeError> {
        if !quoted && value.contains(['*', '?', '[']) {
            return Err(RecipeError::at(
                at,
                format!(
                    "unquoted ${name} expands to a filename pattern (globbing is not modelled); quote it"
                ),
            ));
        }
        if out.len() + value.len() > MAX_EXPANDED_CHARS {
            return Err(RecipeError::at(
                at,
                format!(
                    "expanding ${name} makes a word longer than {MAX_EXPANDED_CHARS} characters"
                ),
            ));
        }
        out.extend(value.chars().map(|ch| Expanded {
            ch,
            at,
            splits: !quoted,
        }));
        Ok(())
    }
}

fn make_word(chars: &[Expanded], fallback: Location) -> Word {
    Word {
        text: chars.iter().map(|e| e.ch).collect(),
        location: chars.first().map_or(fallback, |e| e.at),
        char_locations: chars.iter().map(|e| e.at).collect(),
    }
}

/// Leading `NAME=value` words, and the rest.
fn split_prefix(words: &[RawWord]) -> (&[RawWord], &[RawWord]) {
    let count = words
        .iter()
        .take_while(|word| word.as_assignment().is_some())
        .count();
    words.split_at(count)
}

/// Number of words in `vllm serve` (2) or `uv run vllm serve` (4); anything else is an error.
fn serve_prefix_len(words: &[RawWord]) -> Result<usize, RecipeError> {
    let expected: &[&str] = match words.first().and_then(RawWord::literal).as_deref() {
        Some("uv") => &["uv", "run", "vllm", "serve"],
        _ => &["vllm", "serve"],
    };
    for (i, want) in expected.iter().enumerate() {
        let Some(word) = words.get(i) else {
            let at = words.last().map_or(Location::START, |w| w.start);
            return Err(RecipeError::at(
                at,
                format!(
                    "expected `{}`, found the end of the command",
                    expected.join(" ")
                ),
            ));
        };
        if word.literal().as_deref() != Some(*want) {
            let found = word.literal().unwrap_or_else(|| "an expansion".to_owned());
            return Err(RecipeError::at(
                word.start,
                format!(
                    "expected `{}`, found `{found}` here: only `vllm serve` and `uv run vllm serve` are modelled",
                    expected.join(" ")
                ),
            ));
        }
    }
    Ok(expected.len())
}

fn check_set_options(args: &[RawWord]) -> Result<(), RecipeError> {
    let mut expect_option_name = false;
    for arg in args {
        let text = arg.literal().unwrap_or_default();
        if expect_option_name {
            if !matches!(text.as_str(), "pipefail" | "errexit" | "nounset" | "xtrace") {
                return Err(RecipeError::at(
                    arg.start,
                    format!(
                        "`set -o {text}` is not modelled; accepted: pipefail, errexit, nounset, xtrace"
                    ),
                ));
            }
            expect_option_name = false;
            continue;
        }
        let mut chars = text.chars();
        match chars.next() {
            Some('-' | '+') if text.len() > 1 => {
                for flag in chars {
                    match flag {
                        'e' | 'u' | 'x' => {}
                        'o' => expect_option_name = true,
                        other => {
                            return Err(RecipeError::at(
                                arg.start,
                                format!(
                                    "`set` option `{other}` is not modelled; accepted: -e, -u, -x, -o pipefail"
                                ),
                            ));
                        }
                    }
                }
            }
            _ => {
                return Err(RecipeError::at(
                    arg.start,
                    format!(
                        "`set {text}` is not modelled: only shell options such as `set -euo pipefail` are accepted"
                    ),
                ));
            }
        }
    }
    if expect_option_name {
        let at = args.last().map_or(Location::START, |w| w.start);
        return Err(RecipeError::at(at, "`set -o` needs an option name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
