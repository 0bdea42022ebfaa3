//! Writing to stdout without panicking on a closed pipe, and the small formatting helpers the
//! subcommands share.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Writes `text` to stdout; a closed pipe (`afd-sim … | head`) is not an error.
pub(crate) fn emit(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(err).context("writing to stdout"),
    }
}

/// Writes every file or none, so a failed run never leaves a partial file behind: each goes to a
/// temporary file beside it first, and only when all of them are written are they renamed into
/// place; on any failure the temporary files are removed.
pub(crate) fn write_all_atomically(files: &[(&Path, &[u8])]) -> anyhow::Result<()> {
    let mut written: Vec<(PathBuf, &Path)> = Vec::new();
    let cleanup = |written: &[(PathBuf, &Path)]| {
        for (temporary, _) in written {
            let _ = std::fs::remove_file(temporary);
        }
    };
    for &(path, bytes) in files {
        let temporary = temporary_beside(path)?;
        let result = (|| -> std::io::Result<()> {
            let mut file = std::fs::File::create(&temporary)?;
            file.write_all(bytes)?;
            file.sync_all()
        })();
        if let Err(err) = result {
            let _ = std::fs::remove_file(&temporary);
            cleanup(&written);
            return Err(err).with_context(|| format!("writing {}", path.display()));
        }
        written.push((temporary, path));
    }
    for (index, (temporary, path)) in written.iter().enumerate() {
        if let Err(err) = std::fs::rename(temporary, path) {
            cleanup(&written[index..]);
            return Err(err).with_context(|| format!("writing {}", path.display()));
        }
    }
    Ok(())
}

/// Checks, before any work, that each output path can be written: its folder exists and it is not a
/// folder itself. `outputs` pairs each path with the flag that named it, for the message.
pub(crate) fn check_outputs(outputs: &[(&str, Option<&Path>)]) -> anyhow::Result<()> {
    for &(flag, path) in outputs {
        let Some(path) = path else { continue };
        let folder = folder_of(path);
        if path.file_name().is_none() || path.is_dir() {
            bail!("{flag} {}: names a folder, not a file", path.display());
        }
        if !folder.is_dir() {
            bail!(
                "{flag} {}: folder {} does not exist",
                path.display(),
                folder.display()
            );
        }
    }
    Ok(())
}

fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

fn temporary_beside(path: &Path) -> anyhow::Result<PathBuf> {
    let name = path
        .file_name()
        .with_context(|| format!("output path {} has no file name", path.display()))?;
    Ok(folder_of(path).join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    )))
}

/// Serialises rows as CSV with a header.
pub(crate) fn csv_bytes<T: serde::Serialize>(rows: &[T]) -> anyhow::Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    for row in rows {
        writer.serialize(row).context("formatting a CSV row")?;
    }
    writer.into_inner().context("finishing CSV output")
}

/// Pretty JSON with a trailing newline.
pub(crate) fn json_text(value: &serde_json::Value) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("a JSON value always serialises");
    text.push('\n');
    text
}

/// Left-aligned columns separated by two spaces, from rows of cells.
pub(crate) fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|row| row.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}
