//! A file's JSON read into its format's types, the first error placed: the field path, line and
//! column, with serde's message. Every format reader of this crate that parses a whole document
//! reads through it, so their errors name the place alike.

use serde::de::DeserializeOwned;

/// Where and why a file's JSON did not read as its format's types.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at {path} (line {line}, column {column}): {message}")]
pub struct JsonAt {
    /// The field path (`flags[3].options`; `.` for the document).
    pub path: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// `text` as a `T`, its first error placed.
pub(crate) fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, JsonAt> {
    let deserializer = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(deserializer).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        JsonAt {
            path,
            line: inner.line(),
            column: inner.column(),
            message: inner.to_string(),
        }
    })
}
