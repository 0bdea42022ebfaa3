//! Subcommands of the `afd-sim` binary and the file helpers they share.

pub(crate) mod predict;

use std::io::Write;
use std::path::Path;

use anyhow::Context;

/// Writes `bytes` to `path` through a temporary file in the same folder and a rename, so a failed
/// run never leaves a partial file behind.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let folder = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("output path {} has no file name", path.display()))?;
    let temporary = folder.join(format!(".{}.tmp", name.to_string_lossy()));
    let result = (|| -> std::io::Result<()> {
        let mut file = std::fs::File::create(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    result.with_context(|| format!("writing {}", path.display()))
}

/// Serialises rows as CSV with a header.
pub(crate) fn csv_bytes<T: serde::Serialize>(rows: &[T]) -> anyhow::Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row).context("formatting a CSV row")?;
    }
    writer.into_inner().context("finishing CSV output")
}
