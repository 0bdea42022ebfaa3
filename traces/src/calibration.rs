//! Calibration profiles: cost tables measured by `afd-probe calibrate` on real GPUs, with provenance.
//!
//! A profile is a list of [`CostTable`]s, each the measured time of one operation class over a grid of
//! coordinates (message bytes, tokens, batch × context, …). The simulator interpolates these tables; it
//! never links the probes. This module only defines, reads, writes and checks the format: fitting and
//! interpolation live with their users.
//!
//! # Operation catalogue
//!
//! `op` names are stable strings shared by the probes (producer) and the simulator (consumer). A table
//! is identified by `op` plus its `variant` map; `axes` name the coordinates of each point, in order.
//! Times are microseconds of GPU time per operation, taken from CUDA events or graph replays.
//!
//! | op | axes | variant keys | what one point is |
//! | --- | --- | --- | --- |
//! | `hbm.copy` | `bytes` | – | device-to-device copy; `derived.gbps` counts bytes read + written |
//! | `p2p.one_way` | `bytes` | `graph` | NCCL send on one GPU, recv on the other, one direction |
//! | `p2p.ping_pong` | `bytes` | `graph` | send then send back; time is per one-way leg |
//! | `p2p.bidirectional` | `bytes` | `graph` | both GPUs send and receive at once (nccl-tests `sendrecv_perf` at 2 ranks) |
//! | `p2p.fan_in` | `bytes` | `graph`, `senders` | `senders` GPUs send to one receiver at once; time until the last arrives |
//! | `nccl.all_reduce` | `bytes` | `graph`, `ranks` | sum all-reduce (FFN TP) |
//! | `nccl.all_to_all` | `bytes` | `graph`, `ranks` | all-to-all by grouped send/recv (FFN DP + EP); bytes per rank |
//! | `moe.router` | `tokens` | `model` | router (gate) GEMM + top-k for one MoE layer |
//! | `moe.routed_experts` | `active_experts`, `tokens_per_expert` | `model`, `experts_local` | gate/up + activation + down GEMMs over the active experts, each padded to `tokens_per_expert` rows |
//! | `moe.shared_experts` | `tokens` | `model` | fused shared-expert MLP |
//! | `moe.layer` | `tokens` | `model`, `routing`, `experts_local` | one whole MoE layer (router, routed, shared, combine) with routing drawn from `routing` |
//! | `mlp.dense` | `tokens` | `model` | the dense MLP of the first `first_k_dense_replace` layers |
//! | `attention.proj` | `tokens` | `model` | one layer's Attention-side projections and norms (everything but the attention kernel) |
//! | `attention.mla_decode` | `batch`, `context` | `model` | MLA decode over a KV cache of `context` tokens for each of `batch` sequences |
//! | `attention.prefill` | `tokens`, `context` | `model` | a prefill chunk of `tokens` tokens on top of `context` cached tokens |
//! | `launch.eager` | `kernels` | – | host time to launch `kernels` small kernels one by one, until the last has run |
//! | `launch.graph` | `kernels` | – | the same kernel sequence replayed as one CUDA graph |
//!
//! Producers may add tables with other `op` names; consumers ignore what they do not know.
//!
//! Two `derived` keys carry what the simulator needs to price eager execution (launch gaps):
//! `kernels`, the number of kernel launches (and NCCL calls) one operation issues, and `host_us`, the
//! median host time to enqueue one operation. Producers record both wherever they are meaningful.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::json_at::{self, JsonAt};

/// Schema version written by this build; readers accept exactly this version.
pub const CALIBRATION_SCHEMA_VERSION: u32 = 1;

/// The `format` tag of a calibration profile file.
pub const CALIBRATION_FORMAT: &str = "afd-calibration";

/// A calibration profile as stored on disk (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibrationProfile {
    /// Always [`CALIBRATION_FORMAT`].
    pub format: String,
    /// Always [`CALIBRATION_SCHEMA_VERSION`] for files this build reads.
    pub schema_version: u32,
    pub provenance: Provenance,
    pub tables: Vec<CostTable>,
}

/// Where and how a profile was measured. Every field is what the probe read at run time, never a
/// value typed in by hand.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Provenance {
    /// `afd-probe <version>`.
    pub tool: String,
    /// The command line that produced the file.
    pub command: String,
    /// UTC start time, RFC 3339.
    pub date_utc: String,
    pub hostname: String,
    /// GPU names as the driver reports them (`NVIDIA H200`), one per GPU used.
    pub gpus: Vec<String>,
    pub driver_version: String,
    /// CUDA driver API version, `major.minor`.
    pub cuda_version: String,
    /// NCCL version actually loaded (`ncclGetVersion`), empty when NCCL was not used.
    pub nccl_version: String,
    /// File the NCCL library was loaded from.
    pub nccl_library: String,
    /// cuBLAS version actually loaded, empty when cuBLAS was not used.
    pub cublas_version: String,
    /// GPU-to-GPU link matrix as the driver reports it (e.g. `NV18`), one line per GPU.
    pub topology: Vec<String>,
    /// `NCCL_*` and `CUDA_*` environment variables in effect.
    pub env: BTreeMap<String, String>,
    /// Free-form notes the probe adds (warm-up and iteration counts, thread layout, …).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

/// Measured time of one operation class over a grid of coordinates.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostTable {
    /// Operation class, see the catalogue in the module docs.
    pub op: String,
    /// Distinguishes tables of one `op` (`graph`, `model`, `senders`, …); values are strings.
    #[serde(default)]
    pub variant: BTreeMap<String, String>,
    /// Coordinate names, one per entry of [`CostPoint::at`].
    pub axes: Vec<String>,
    pub points: Vec<CostPoint>,
}

/// One measured coordinate of a table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostPoint {
    /// Coordinates, in the order of [`CostTable::axes`].
    pub at: Vec<f64>,
    pub stats: SampleStats,
    /// Every timed sample, microseconds, in measurement order.
    pub samples_us: Vec<f64>,
    /// Figures computed from the time (`algbw_gbps`, `busbw_gbps`, `tflops`, `gbps`, …).
    #[serde(default)]
    pub derived: BTreeMap<String, f64>,
}

/// Summary of the samples of one point, microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SampleStats {
    pub n: u32,
    pub min_us: f64,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

/// Why a calibration profile could not be read. Every variant names the place in the file.
#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("calibration profile is not valid JSON for this schema {0}")]
    Json(#[from] JsonAt),
    #[error("calibration profile has format {found:?}, expected {expected:?}")]
    Format {
        found: String,
        expected: &'static str,
    },
    #[error("calibration profile has schema_version {found}, this build reads {expected}")]
    SchemaVersion { found: u32, expected: u32 },
    #[error("calibration profile field {path}: {problem}")]
    Invalid { path: String, problem: String },
}

impl Provenance {
    /// The kind of link between the first two GPUs the probe ran on, read from the driver's
    /// topology matrix (`nvidia-smi topo -m`): `nvlink` for `NV#`, `pcie` for `PIX`, `PXB`, `PHB`,
    /// `NODE` or `SYS`; `None` with fewer than two GPUs or an entry this reader does not know.
    pub fn link_kind(&self) -> Option<&'static str> {
        link_kind_of_topology(&self.topology)
    }
}

/// [`Provenance::link_kind`] of a topology matrix, one line per row as the driver prints them.
pub fn link_kind_of_topology(lines: &[String]) -> Option<&'static str> {
    let row = lines.iter().find_map(|line| {
        let fields: Vec<&str> = line.split('\t').map(str::trim).collect();
        (fields.first() == Some(&"GPU0")).then_some(fields)
    })?;
    // `GPU0 | X | <GPU0-GPU1> | ...`: the entry after the diagonal.
    let entry = *row.get(2)?;
    match entry {
        "PIX" | "PXB" | "PHB" | "NODE" | "SYS" => Some("pcie"),
        _ if entry.len() > 2
            && entry.starts_with("NV")
            && entry[2..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            Some("nvlink")
        }
        _ => None,
    }
}

impl CalibrationProfile {
    /// A new, empty profile of the current schema.
    pub fn new(provenance: Provenance) -> CalibrationProfile {
        CalibrationProfile {
            format: CALIBRATION_FORMAT.to_owned(),
            schema_version: CALIBRATION_SCHEMA_VERSION,
            provenance,
            tables: Vec::new(),
        }
    }

    /// Parses and checks a profile; errors name the offending field path.
    pub fn from_json(text: &str) -> Result<CalibrationProfile, CalibrationError> {
        let profile: CalibrationProfile = json_at::from_str(text)?;
        profile.check()?;
        Ok(profile)
    }

    /// Pretty JSON with a trailing newline; stable for the same profile.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self)
            .expect("profiles hold only strings, numbers and maps");
        text.push('\n');
        text
    }

    /// Checks the invariants serde cannot: format tag, version, axis counts, finite ordered stats.
    pub fn check(&self) -> Result<(), CalibrationError> {
        if self.format != CALIBRATION_FORMAT {
            return Err(CalibrationError::Format {
                found: self.format.clone(),
                expected: CALIBRATION_FORMAT,
            });
        }
        if self.schema_version != CALIBRATION_SCHEMA_VERSION {
            return Err(CalibrationError::SchemaVersion {
                found: self.schema_version,
                expected: CALIBRATION_SCHEMA_VERSION,
            });
        }
        for (t, table) in self.tables.iter().enumerate() {
            table.check(&format!("tables[{t}]"))?;
        }
        Ok(())
    }

    /// The table with this `op` whose variant contains every `(key, value)` of `want`.
    pub fn find(&self, op: &str, want: &[(&str, &str)]) -> Option<&CostTable> {
        self.tables.iter().find(|table| {
            table.op == op
                && want
                    .iter()
                    .all(|(k, v)| table.variant.get(*k).map(String::as_str) == Some(*v))
        })
    }
}

impl CostTable {
    fn check(&self, path: &str) -> Result<(), CalibrationError> {
        let invalid = |at: String, problem: String| CalibrationError::Invalid { path: at, problem };
        if self.op.trim().is_empty() {
            return Err(invalid(
                format!("{path}.op"),
                "must not be empty".to_owned(),
            ));
        }
        if self.axes.is_empty() {
            return Err(invalid(
                format!("{path}.axes"),
                "must name at least one coordinate".to_owned(),
            ));
        }
        if self.points.is_empty() {
            return Err(invalid(
                format!("{path}.points"),
                format!("table {:?} has no points", self.op),
            ));
        }
        for (p, point) in self.points.iter().enumerate() {
            let here = format!("{path}.points[{p}]");
            if point.at.len() != self.axes.len() {
                return Err(invalid(
                    format!("{here}.at"),
                    format!(
                        "has {} coordinates but the table has {} axes {:?}",
                        point.at.len(),
                        self.axes.len(),
                        self.axes
                    ),
                ));
            }
            if let Some(i) = point.at.iter().position(|x| !x.is_finite() || *x < 0.0) {
                return Err(invalid(
                    format!("{here}.at[{i}]"),
                    format!("coordinate {} must be finite and >= 0", point.at[i]),
                ));
            }
            point.stats.check(&format!("{here}.stats"))?;
            if let Some(i) = point
                .samples_us
                .iter()
                .position(|x| !x.is_finite() || *x < 0.0)
            {
                return Err(invalid(
                    format!("{here}.samples_us[{i}]"),
                    format!("sample {} must be finite and >= 0", point.samples_us[i]),
                ));
            }
        }
        Ok(())
    }
}

impl SampleStats {
    fn check(&self, path: &str) -> Result<(), CalibrationError> {
        let fields = [
            ("min_us", self.min_us),
            ("median_us", self.median_us),
            ("p99_us", self.p99_us),
            ("max_us", self.max_us),
            ("mean_us", self.mean_us),
        ];
        for (name, value) in fields {
            if !value.is_finite() || value < 0.0 {
                return Err(CalibrationError::Invalid {
                    path: format!("{path}.{name}"),
                    problem: format!("{value} must be finite and >= 0"),
                });
            }
        }
        if self.n == 0 {
            return Err(CalibrationError::Invalid {
                path: format!("{path}.n"),
                problem: "must count at least one sample".to_owned(),
            });
        }
        if !(self.min_us <= self.median_us
            && self.median_us <= self.p99_us
            && self.p99_us <= self.max_us)
        {
            return Err(CalibrationError::Invalid {
                path: path.to_owned(),
                problem: format!(
                    "expected min <= median <= p99 <= max, got {} / {} / {} / {}",
                    self.min_us, self.median_us, self.p99_us, self.max_us
                ),
            });
        }
        Ok(())
    }
}

/// The committed calibration profiles of a GPU kind (`h200`), as `(file name, JSON text)` in merge
/// order: the `afd-probe calibrate` run of DeepSeek-V2-Lite on 2 × H200, then the hand-off tables
/// measured after it (`data/calibration/PROVENANCE.md`). Empty for kinds without a measured profile.
pub fn builtin_profiles(gpu: &str) -> &'static [(&'static str, &'static str)] {
    const H200: [(&str, &str); 2] = [
        (
            "h200x2-deepseek-v2-lite.json",
            include_str!("../data/calibration/h200x2-deepseek-v2-lite.json"),
        ),
        (
            "h200x2-handoff.json",
            include_str!("../data/calibration/h200x2-handoff.json"),
        ),
    ];
    match gpu {
        "h200" => &H200,
        _ => &[],
    }
}

#[cfg(test)]
mod tests;
