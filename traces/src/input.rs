//! Bounded reads of input files: every file a tool reads (recipe, model config, trace, calibration
//! profile, pipeline results, sweep shard) is read through [`read_text`] with a stated size limit per
//! kind, so a runaway file is refused after at most `limit + 1` bytes instead of growing without
//! bound, and `/dev/zero` (a NUL byte, which no text format has) at its first read.
//!
//! A path ending in `.gz` is read through a gzip decoder and one ending in `.xz` through an xz
//! decoder, the limit applying to the text it gives (so a small file that inflates without bound is
//! refused too): measured data is stored that way (the committed run files as `.xz`).
//!
//! It does not parse anything; the caller's format module does that with the text it gets back.

use std::io::Read as _;
use std::path::Path;

const MIB: u64 = 1 << 20;

/// What a file is, with the largest size accepted for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputKind {
    /// Names the kind in messages: `recipe`, `model config`, `trace`.
    pub name: &'static str,
    /// Largest accepted size in bytes.
    pub limit_bytes: u64,
}

impl InputKind {
    /// A recipe script (`afd-sim check`, `afd-conformance --recipe` and `up`): 1 MiB.
    pub const RECIPE: InputKind = InputKind::new("recipe", MIB);
    /// A model config (`config.json` or DeepSeek `ModelArgs`): 4 MiB.
    pub const MODEL_CONFIG: InputKind = InputKind::new("model config", 4 * MIB);
    /// A calibration profile: 64 MiB (the shipped ones are about 1 MiB).
    pub const CALIBRATION: InputKind = InputKind::new("calibration profile", 64 * MIB);
    /// `afd-probe pipeline` results for `replay-pipeline`: 64 MiB.
    pub const PIPELINE: InputKind = InputKind::new("pipeline results", 64 * MIB);
    /// A real vLLM run, bench result or plan (`vllm_run.rs`).
    pub const VLLM_RUN: InputKind = InputKind::new("vLLM run", 64 * MIB);
    /// An engine profile (`afd-sim engine-profile`, `vllm_run.rs`): 64 MiB (the shipped one is
    /// about 80 KiB).
    pub const ENGINE_PROFILE: InputKind = InputKind::new("engine profile", 64 * MIB);
    /// A profiled eager server's module summary (`sim/scripts/module_shares.py --json`, read by
    /// `afd-sim engine-profile --modules`): 16 MiB.
    pub const MODULE_SUMMARY: InputKind = InputKind::new("module summary", 16 * MIB);
    /// A `vllm serve` log kept beside a run file (`NAME.server.log[.xz|.gz]`): 256 MiB (the
    /// committed ones are at most about 8 MiB).
    pub const SERVER_LOG: InputKind = InputKind::new("vLLM server log", 256 * MIB);
    /// A sweep shard CSV for `sweep-merge`: 256 MiB.
    pub const SWEEP_SHARD: InputKind = InputKind::new("sweep shard", 256 * MIB);
    /// A workload trace: 2 GiB by default (`--max-trace-mib` changes it).
    pub const TRACE: InputKind = InputKind::new("trace", 2048 * MIB);

    pub const fn new(name: &'static str, limit_bytes: u64) -> InputKind {
        InputKind { name, limit_bytes }
    }

    /// The same kind with another limit (in MiB), for a flag that overrides it.
    pub const fn with_limit_mib(self, mib: u64) -> InputKind {
        InputKind {
            name: self.name,
            limit_bytes: mib.saturating_mul(MIB),
        }
    }
}

/// Why an input file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("cannot read {kind} {file}")]
    Io {
        kind: &'static str,
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{kind} {file} exceeds the size limit of {}", show_bytes(*limit_bytes))]
    TooLarge {
        kind: &'static str,
        file: String,
        limit_bytes: u64,
    },
    #[error("{file}:{line}: {kind} is not text (a NUL byte at column {column})")]
    Binary {
        kind: &'static str,
        file: String,
        line: u64,
        column: u64,
    },
    #[error("{file}:{line}: {kind} is not UTF-8 text (invalid byte at column {column})")]
    NotUtf8 {
        kind: &'static str,
        file: String,
        line: u64,
        column: u64,
    },
}

/// Reads at most `kind.limit_bytes` of `path`; a longer file (or an endless one) is an error after
/// `limit + 1` bytes, a regular file's size is checked before reading, and a NUL byte (no text format
/// has one: `/dev/zero`, a binary file) ends the read at once.
pub fn read_text(path: &Path, kind: InputKind) -> Result<String, InputError> {
    let file = path.display().to_string();
    let io = |source| InputError::Io {
        kind: kind.name,
        file: file.clone(),
        source,
    };
    let too_large = || InputError::TooLarge {
        kind: kind.name,
        file: file.clone(),
        limit_bytes: kind.limit_bytes,
    };
    let file_handle = std::fs::File::open(path).map_err(io)?;
    let compression = Compression::of(path);
    if let Ok(metadata) = file_handle.metadata() {
        if metadata.is_dir() {
            return Err(io(std::io::Error::other("is a directory")));
        }
        if compression == Compression::None
            && metadata.is_file()
            && metadata.len() > kind.limit_bytes
        {
            return Err(too_large());
        }
    }
    let mut handle: Box<dyn std::io::Read> = match compression {
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(file_handle)),
        Compression::Xz => Box::new(liblzma::read::XzDecoder::new(file_handle)),
        Compression::None => Box::new(file_handle),
    };
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = match handle.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(io(err)),
        };
        if let Some(at) = chunk[..n].iter().position(|&b| b == 0) {
            bytes.extend_from_slice(&chunk[..at]);
            let (line, column) = position(&bytes);
            return Err(InputError::Binary {
                kind: kind.name,
                file,
                line,
                column,
            });
        }
        if (bytes.len() + n) as u64 > kind.limit_bytes {
            return Err(too_large());
        }
        bytes.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8(bytes).map_err(|err| {
        let (line, column) = position(&err.as_bytes()[..err.utf8_error().valid_up_to()]);
        InputError::NotUtf8 {
            kind: kind.name,
            file,
            line,
            column,
        }
    })
}

/// How a file's bytes are stored, from its name's last extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compression {
    None,
    Gzip,
    Xz,
}

impl Compression {
    fn of(path: &Path) -> Self {
        match path.extension().and_then(|x| x.to_str()) {
            Some("gz") => Self::Gzip,
            Some("xz") => Self::Xz,
            _ => Self::None,
        }
    }
}

/// The 1-based line and column of the byte after `before`.
fn position(before: &[u8]) -> (u64, u64) {
    let line = before.iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    (line, (before.len() - line_start) as u64 + 1)
}

fn show_bytes(bytes: u64) -> String {
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests;
