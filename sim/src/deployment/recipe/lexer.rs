//! Lexing a recipe: text → tokens of raw (unexpanded) words, with quoting, escapes,
//! continuations, redirections and command separators, each located; and grouping the tokens into
//! commands.

use super::*;

#[derive(Clone, Debug)]
pub(super) enum Piece {
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
pub(super) struct RawWord {
    pub(super) pieces: Vec<Piece>,
    pub(super) start: Location,
    /// Some part was quoted, so an empty expansion still yields an (empty) word.
    pub(super) has_quotes: bool,
}

impl RawWord {
    /// The literal text if the word has no expansions.
    pub(super) fn literal(&self) -> Option<String> {
        self.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Char { ch, .. } => Some(*ch),
                Piece::Param { .. } => None,
            })
            .collect()
    }

    /// `NAME` and the value pieces when the word is an assignment `NAME=value`.
    pub(super) fn as_assignment(&self) -> Option<(String, &[Piece])> {
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
pub(super) enum RawRedirectKind {
    Truncate(RawWord),
    Append(RawWord),
    Duplicate(u32),
}

#[derive(Clone, Debug)]
pub(super) enum Token {
    Word(RawWord),
    Redirect {
        fd: u32,
        kind: RawRedirectKind,
        at: Location,
    },
    Newline,
    Amp(Location),
}

pub(super) fn is_name_char(ch: char, first: bool) -> bool {
    ch == '_' || ch.is_ascii_alphabetic() || (!first && ch.is_ascii_digit())
}

pub(super) fn is_blank(ch: char) -> bool {
    ch == ' ' || ch == '\t' || ch == '\r'
}

/// Characters that end an unquoted word.
pub(super) fn is_delimiter(ch: char) -> bool {
    is_blank(ch) || matches!(ch, '\n' | '&' | '|' | ';' | '<' | '>' | '(' | ')')
}

/// Deepest `${A:-${B:-…}}` nesting accepted; deeper input is an error rather than a deep recursion.
pub(super) const MAX_NESTING: u32 = 32;

/// Longest expanded word or assignment value, in characters; `A=$A$A` doubling past it is an error.
pub(super) const MAX_EXPANDED_CHARS: usize = 1 << 20;

pub(super) struct Lexer {
    pub(super) chars: Vec<char>,
    pub(super) pos: usize,
    pub(super) line: u32,
    pub(super) column: u32,
    /// Current `${…:-…}` nesting.
    pub(super) depth: u32,
}

/// Where a word is being read: plain, or the default of `${X:-…}` (ends at `}`), in or out of
/// double quotes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Context {
    Plain,
    Default { quoted: bool },
}

impl Lexer {
    pub(super) fn new(text: &str) -> Lexer {
        Lexer {
            chars: text.chars().collect(),
            pos: 0,
            line: 1,
            column: 1,
            depth: 0,
        }
    }

    pub(super) fn here(&self) -> Location {
        Location::Text {
            line: self.line,
            column: self.column,
        }
    }

    pub(super) fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    pub(super) fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    pub(super) fn bump(&mut self) -> Option<char> {
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

    pub(super) fn error<T>(&self, message: impl Into<String>) -> Result<T, RecipeError> {
        Err(RecipeError::at(self.here(), message))
    }

    pub(super) fn tokens(mut self) -> Result<Vec<Token>, RecipeError> {
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

    pub(super) fn skip_blanks(&mut self) {
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
    pub(super) fn redirect(&mut self, fd: u32, at: Location) -> Result<Token, RecipeError> {
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
    pub(super) fn word(&mut self, context: Context) -> Result<RawWord, RecipeError> {
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
                self.default_quoted_char(ch, &mut pieces, &mut has_quotes)?;
                continue;
            }
            if context == Context::Plain && is_delimiter(ch) {
                break;
            }
            self.unquoted_char(ch, &mut pieces, &mut has_quotes)?;
        }
        Ok(RawWord {
            pieces,
            start,
            has_quotes,
        })
    }

    /// One character of a word outside quotes (`\\`, quotes and `$` start their own readers);
    /// patterns, brace groups, tilde and backticks are refused.
    fn unquoted_char(
        &mut self,
        ch: char,
        pieces: &mut Vec<Piece>,
        has_quotes: &mut bool,
    ) -> Result<(), RecipeError> {
        let at = self.here();
        match ch {
            '\\' => self.escaped(pieces)?,
            '\'' => {
                *has_quotes = true;
                self.single_quoted(pieces)?;
            }
            '"' => {
                *has_quotes = true;
                self.double_quoted(pieces)?;
            }
            '$' => self.dollar(pieces, false)?,
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
        Ok(())
    }

    /// One character of the default of `"${X:-…}"`: double-quote rules, `'` is literal, `"` opens
    /// a nested section.
    fn default_quoted_char(
        &mut self,
        ch: char,
        pieces: &mut Vec<Piece>,
        has_quotes: &mut bool,
    ) -> Result<(), RecipeError> {
        match ch {
            '"' => {
                *has_quotes = true;
                self.double_quoted(pieces)
            }
            '\\' | '$' | '`' => self.double_quoted_char(pieces),
            _ => {
                let at = self.here();
                self.bump();
                pieces.push(Piece::Char {
                    ch,
                    at,
                    quoted: true,
                });
                Ok(())
            }
        }
    }

    /// At `\\` outside quotes: the next character, literal and quoted; a line continuation is
    /// dropped.
    fn escaped(&mut self, pieces: &mut Vec<Piece>) -> Result<(), RecipeError> {
        let at = self.here();
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
        Ok(())
    }

    /// At `'`: reads through the closing quote, every character literal.
    fn single_quoted(&mut self, pieces: &mut Vec<Piece>) -> Result<(), RecipeError> {
        let open = self.here();
        self.bump();
        loop {
            let at = self.here();
            match self.bump() {
                Some('\'') => return Ok(()),
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

    /// At `"`: reads through the closing quote.
    pub(super) fn double_quoted(&mut self, pieces: &mut Vec<Piece>) -> Result<(), RecipeError> {
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
    pub(super) fn double_quoted_char(
        &mut self,
        pieces: &mut Vec<Piece>,
    ) -> Result<(), RecipeError> {
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
    pub(super) fn dollar(
        &mut self,
        pieces: &mut Vec<Piece>,
        quoted: bool,
    ) -> Result<(), RecipeError> {
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
            Some('{') => self.braced_param(at, quoted, pieces),
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

    /// After `$` at `at`, at `{`: `${NAME}` or `${NAME:-default}`; other operators and special
    /// names are refused.
    fn braced_param(
        &mut self,
        at: Location,
        quoted: bool,
        pieces: &mut Vec<Piece>,
    ) -> Result<(), RecipeError> {
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
            (Some(':'), Some('-')) => self.param_default(at, name, quoted, pieces),
            (found, _) => {
                let found = found.map_or_else(|| "end of input".to_owned(), |c| format!("`{c}`"));
                Err(RecipeError::at(
                    at,
                    format!(
                        "parameter expansion operator {found} in ${{{name}…}} is not modelled: only ${{{name}}} and ${{{name}:-default}} are"
                    ),
                ))
            }
        }
    }

    /// After `${NAME` at `:-`: reads the default up to the closing `}` (nesting bounded by
    /// `MAX_NESTING`).
    fn param_default(
        &mut self,
        at: Location,
        name: String,
        quoted: bool,
        pieces: &mut Vec<Piece>,
    ) -> Result<(), RecipeError> {
        self.bump();
        self.bump();
        if self.depth >= MAX_NESTING {
            return Err(RecipeError::at(
                at,
                format!("`${{…:-…}}` expansions nested deeper than {MAX_NESTING} are not modelled"),
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

    /// At `[`: the word is `[` or `[[` alone.
    pub(super) fn is_standalone_bracket(&self) -> bool {
        let width = if self.peek_at(1) == Some('[') { 2 } else { 1 };
        self.peek_at(width).is_none_or(is_delimiter)
    }

    pub(super) fn name(&mut self) -> String {
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

pub(super) struct RawCommand {
    pub(super) location: Location,
    pub(super) words: Vec<RawWord>,
    pub(super) redirects: Vec<(u32, RawRedirectKind, Location)>,
    pub(super) background: bool,
}

pub(super) fn group_commands(tokens: Vec<Token>) -> Result<Vec<RawCommand>, RecipeError> {
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
