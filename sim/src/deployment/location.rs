//! Where a value came from: a line and column of a recipe or argument string, or the index of a word
//! in an argument list. Every flag, JSON key and environment variable the deployment model reads
//! carries one, so findings can point at their cause.
//!
//! Rendering needs the source's name (a file path, `--attention-args`, …), which callers supply.

use std::fmt;

/// A position in the user's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Location {
    /// 1-based line and column (counted in characters) of a recipe script or argument string.
    Text { line: u32, column: u32 },
    /// 0-based index of a word in an argument list (the words after `vllm serve`).
    Argument { index: u32 },
}

impl Location {
    /// The start of a text.
    pub const START: Location = Location::Text { line: 1, column: 1 };

    /// `recipe.sh:12:5` for text, `args: word 3` for argument lists.
    pub fn render(&self, source: &str) -> String {
        match self {
            Location::Text { line, column } => format!("{source}:{line}:{column}"),
            Location::Argument { index } => format!("{source}: word {index}"),
        }
    }

    /// Line of a text position (`None` for an argument index).
    pub fn line(&self) -> Option<u32> {
        match self {
            Location::Text { line, .. } => Some(*line),
            Location::Argument { .. } => None,
        }
    }

    /// Column of a text position (`None` for an argument index).
    pub fn column(&self) -> Option<u32> {
        match self {
            Location::Text { column, .. } => Some(*column),
            Location::Argument { .. } => None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Text { line, column } => write!(f, "{line}:{column}"),
            Location::Argument { index } => write!(f, "word {index}"),
        }
    }
}

/// A value and the place in the input it was read from.
#[derive(Clone, Debug, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub location: Location,
}

impl<T> Located<T> {
    pub fn new(value: T, location: Location) -> Located<T> {
        Located { value, location }
    }
}
