//! Turning measured samples into `afd-traces` files: cost points and tables, provenance, pipeline
//! records, and writing files atomically.
//!
//! Pure code: the device layer hands in samples and what the driver reported; this module computes
//! statistics, names things and formats dates. It never measures.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use afd_traces::calibration::{CostPoint, CostTable, Provenance};

use crate::error::ProbeError;
use crate::stats::summarize;

/// What the driver and libraries reported about the machine (filled by the device layer).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemInfo {
    pub gpus: Vec<String>,
    pub driver_version: String,
    pub cuda_version: String,
    pub nccl_version: String,
    pub nccl_library: String,
    pub cublas_version: String,
    pub topology: Vec<String>,
    pub hostname: String,
}

/// A cost point from raw samples; fails when there are none or one is not finite.
pub fn point(
    at: Vec<f64>,
    samples_us: Vec<f64>,
    derived: BTreeMap<String, f64>,
) -> Result<CostPoint, ProbeError> {
    let stats = summarize(&samples_us).ok_or_else(|| ProbeError::DataCheck {
        what: format!("point {at:?}"),
        detail: format!("{} samples, none or some not finite", samples_us.len()),
    })?;
    Ok(CostPoint {
        at,
        stats,
        samples_us,
        derived: derived.into_iter().filter(|(_, v)| v.is_finite()).collect(),
    })
}

/// A cost table with string variant values.
pub fn table(
    op: &str,
    variant: &[(&str, String)],
    axes: &[&str],
    points: Vec<CostPoint>,
) -> CostTable {
    CostTable {
        op: op.to_owned(),
        variant: variant
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
        axes: axes.iter().map(|a| (*a).to_owned()).collect(),
        points,
    }
}

/// `derived` map from pairs.
pub fn derived(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
}

/// The provenance block of a file written now by this build. Its notes gain `link_kind` (`nvlink`
/// or `pcie`, between the first two GPUs, from the topology matrix) unless the probe set one, so
/// a profile says which link its transfer tables measured.
pub fn provenance(
    info: &SystemInfo,
    command: String,
    now: SystemTime,
    vars: impl IntoIterator<Item = (String, String)>,
    mut notes: BTreeMap<String, String>,
) -> Provenance {
    if let Some(kind) = afd_traces::calibration::link_kind_of_topology(&info.topology) {
        notes
            .entry("link_kind".to_owned())
            .or_insert_with(|| kind.to_owned());
    }
    Provenance {
        tool: tool_name(),
        command,
        date_utc: rfc3339(now),
        hostname: info.hostname.clone(),
        gpus: info.gpus.clone(),
        driver_version: info.driver_version.clone(),
        cuda_version: info.cuda_version.clone(),
        nccl_version: info.nccl_version.clone(),
        nccl_library: info.nccl_library.clone(),
        cublas_version: info.cublas_version.clone(),
        topology: info.topology.clone(),
        env: relevant_env(vars),
        notes,
    }
}

/// `afd-probe <version>`, with the git commit when the build recorded one (`AFD_GIT_COMMIT`).
pub fn tool_name() -> String {
    match option_env!("AFD_GIT_COMMIT") {
        Some(commit) if !commit.is_empty() => {
            format!("afd-probe {} (git {commit})", env!("CARGO_PKG_VERSION"))
        }
        _ => format!("afd-probe {}", env!("CARGO_PKG_VERSION")),
    }
}

/// The `NCCL_*` and `CUDA_*` variables, sorted.
pub fn relevant_env(vars: impl IntoIterator<Item = (String, String)>) -> BTreeMap<String, String> {
    vars.into_iter()
        .filter(|(k, _)| k.starts_with("NCCL_") || k.starts_with("CUDA_"))
        .collect()
}

/// UTC date and time in RFC 3339 with seconds (`2026-11-29T08:15:00Z`).
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Writes `text` to `path` through a temporary file in the same folder and a rename, so a reader never
/// sees a partial file and a failed run leaves none.
pub fn write_atomic(path: &Path, text: &str) -> std::io::Result<()> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("the output path names no file"))?;
    let temp = folder.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&temp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

#[cfg(test)]
mod tests;
