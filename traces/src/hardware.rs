//! Hardware datasheets (`afd-hardware-datasheets`): vendor figures of PCIe GPUs and of the links
//! between GPUs and hosts (PCIe generations, InfiniBand, RoCE, TCP sockets), each with its source.
//!
//! The shipped file is `data/hardware/datasheets.json` ([`builtin_datasheets`]); its
//! `PROVENANCE.md` names every datasheet. This module only reads and checks the figures: how a
//! transfer is timed over a link (chunked pipelining, NIC sharing) is `afd-sim`'s `model/link.rs`.

use serde::{Deserialize, Serialize};

use crate::json_at::{self, JsonAt};

/// The `format` tag of a datasheets file.
pub const DATASHEETS_FORMAT: &str = "afd-hardware-datasheets";
/// The schema this build reads and writes.
pub const DATASHEETS_SCHEMA_VERSION: u32 = 1;

/// A datasheets file: GPU kinds and link kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Datasheets {
    pub format: String,
    pub schema_version: u32,
    pub gpus: Vec<GpuDatasheet>,
    pub links: Vec<LinkDatasheet>,
}

/// One GPU kind's datasheet figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuDatasheet {
    /// The name on the command line (`l4`, `a100-pcie`).
    pub kind: String,
    /// The vendor's product name.
    pub name: String,
    /// Memory capacity, GiB.
    pub memory_gib: f64,
    /// Memory bandwidth, 10^9 bytes/s.
    pub memory_gb_per_s: f64,
    /// Dense (no 2:4 sparsity) bf16 tensor throughput, 10^12 FLOP/s.
    pub bf16_dense_tflops: f64,
    /// PCIe generation of the host interface (x16); names the link kind `pcie-gen{n}`.
    pub pcie_gen: u32,
    /// NVLink bandwidth one way, 10^9 bytes/s; `None` for PCIe-only GPUs.
    pub nvlink_gb_per_s: Option<f64>,
    /// Where the figures come from.
    pub source: String,
    /// How a figure no datasheet states was derived, where one was (an assumption until a profile
    /// measures it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basis: Option<String>,
}

/// One link kind's figures: what NCCL's point-to-point transfers over it see.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDatasheet {
    /// The name `--link` takes (`pcie-gen4`, `ib`, `roce`, `tcp`).
    pub kind: String,
    /// Line rate one way, 10^9 bytes/s.
    pub gb_per_s: f64,
    /// Small-message one-way latency of an NCCL send/recv, µs.
    pub latency_us: f64,
    /// NCCL's chunk size for this transport, KiB.
    pub chunk_kib: f64,
    /// Store-and-forward stages a chunk crosses (1: direct).
    pub stages: u32,
    /// Fraction of the line rate an NCCL send/recv reaches, in (0, 1].
    pub efficiency: f64,
    /// Where the line rate comes from.
    pub source: String,
    /// What no datasheet states (latency, chunking, stages, efficiency) and why the value was taken.
    pub basis: String,
}

/// Why a datasheets file could not be read; every variant names the place in the file.
#[derive(Debug, thiserror::Error)]
pub enum DatasheetsError {
    #[error("hardware datasheets are not valid JSON for this schema {0}")]
    Json(#[from] JsonAt),
    #[error("hardware datasheets have format {found:?}, expected {expected:?}")]
    Format {
        found: String,
        expected: &'static str,
    },
    #[error("hardware datasheets have schema_version {found}, this build reads {expected}")]
    SchemaVersion { found: u32, expected: u32 },
    #[error("hardware datasheets field {path}: {problem}")]
    Invalid { path: String, problem: String },
}

/// The shipped datasheets (`traces/data/hardware/datasheets.json`), checked.
pub fn builtin_datasheets() -> Datasheets {
    Datasheets::from_json(include_str!("../data/hardware/datasheets.json"))
        .expect("the shipped datasheets are checked by the tests of this module")
}

impl Datasheets {
    /// Parses and checks a datasheets file; errors name the offending field path.
    pub fn from_json(text: &str) -> Result<Datasheets, DatasheetsError> {
        let sheets: Datasheets = json_at::from_str(text)?;
        sheets.check()?;
        Ok(sheets)
    }

    /// The GPU kind named `kind` (case-insensitive).
    pub fn gpu(&self, kind: &str) -> Option<&GpuDatasheet> {
        self.gpus.iter().find(|g| g.kind.eq_ignore_ascii_case(kind))
    }

    /// The link kind named `kind` (case-insensitive).
    pub fn link(&self, kind: &str) -> Option<&LinkDatasheet> {
        self.links
            .iter()
            .find(|l| l.kind.eq_ignore_ascii_case(kind))
    }

    /// Checks what serde cannot: format tag, version, unique kinds, positive finite figures.
    pub fn check(&self) -> Result<(), DatasheetsError> {
        if self.format != DATASHEETS_FORMAT {
            return Err(DatasheetsError::Format {
                found: self.format.clone(),
                expected: DATASHEETS_FORMAT,
            });
        }
        if self.schema_version != DATASHEETS_SCHEMA_VERSION {
            return Err(DatasheetsError::SchemaVersion {
                found: self.schema_version,
                expected: DATASHEETS_SCHEMA_VERSION,
            });
        }
        let invalid = |path: String, problem: String| DatasheetsError::Invalid { path, problem };
        for (i, gpu) in self.gpus.iter().enumerate() {
            let at = |field: &str| format!("gpus[{i}].{field}");
            unique_kind(&gpu.kind, self.gpus[..i].iter().map(|g| g.kind.as_str()))
                .map_err(|p| invalid(at("kind"), p))?;
            for (field, value) in [
                ("memory_gib", gpu.memory_gib),
                ("memory_gb_per_s", gpu.memory_gb_per_s),
                ("bf16_dense_tflops", gpu.bf16_dense_tflops),
            ] {
                positive(value).map_err(|p| invalid(at(field), p))?;
            }
            if let Some(nvlink) = gpu.nvlink_gb_per_s {
                positive(nvlink).map_err(|p| invalid(at("nvlink_gb_per_s"), p))?;
            }
            if !(3..=6).contains(&gpu.pcie_gen) {
                return Err(invalid(
                    at("pcie_gen"),
                    format!("PCIe generation {} is not 3 to 6", gpu.pcie_gen),
                ));
            }
            nonempty(&gpu.source).map_err(|p| invalid(at("source"), p))?;
        }
        for (i, link) in self.links.iter().enumerate() {
            let at = |field: &str| format!("links[{i}].{field}");
            unique_kind(&link.kind, self.links[..i].iter().map(|l| l.kind.as_str()))
                .map_err(|p| invalid(at("kind"), p))?;
            for (field, value) in [
                ("gb_per_s", link.gb_per_s),
                ("latency_us", link.latency_us),
                ("chunk_kib", link.chunk_kib),
                ("efficiency", link.efficiency),
            ] {
                positive(value).map_err(|p| invalid(at(field), p))?;
            }
            if link.efficiency > 1.0 {
                return Err(invalid(
                    at("efficiency"),
                    format!("{} is above 1", link.efficiency),
                ));
            }
            if link.stages == 0 {
                return Err(invalid(
                    at("stages"),
                    "0 stages; a link has at least 1".into(),
                ));
            }
            nonempty(&link.source).map_err(|p| invalid(at("source"), p))?;
            nonempty(&link.basis).map_err(|p| invalid(at("basis"), p))?;
        }
        Ok(())
    }
}

fn unique_kind<'a>(kind: &str, earlier: impl Iterator<Item = &'a str>) -> Result<(), String> {
    if kind.is_empty() {
        return Err("empty kind".into());
    }
    if earlier.into_iter().any(|k| k.eq_ignore_ascii_case(kind)) {
        return Err(format!("kind {kind:?} is listed twice"));
    }
    Ok(())
}

fn positive(value: f64) -> Result<(), String> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(format!("{value} is not a positive finite number"))
    }
}

fn nonempty(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        Err("empty; every figure needs its source".into())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
