//! The links a transfer really takes (NVLink or PCIe within a host, InfiniBand, RoCE or TCP sockets
//! between hosts) and how long an NCCL send/recv over one lasts.
//!
//! A message of `b` bytes over a link of latency `L`, per-rank rate `r`, chunk `c` and `s`
//! store-and-forward stages takes `L + b/r + (s − 1)·min(b, c)/r`: NCCL cuts large messages into
//! chunks and pipelines them through the stages, so only the first chunk pays every stage
//! (docs/hosts-links.md). The ranks of one host share its NICs: each rank gets
//! `rate / ceil(ranks_on_host / nics)`. Figures come from the shipped datasheets
//! (`afd_traces::hardware`) or from `--link` flags ([`LinkSpec::parse`]); on the GPUs' own link a
//! measured profile's hand-off curves price transfers instead (`model/cost.rs`).
//!
//! Not here: congestion beyond the NIC (switch oversubscription), adaptive routing, NCCL's choice
//! of protocol (LL/LL128/Simple) by size; which link a pair of ranks takes is the caller's.

use std::fmt;

use afd_traces::hardware::{Datasheets, LinkDatasheet};

use crate::time::SimDuration;

/// One link as the timing model sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The kind's name (`pcie-gen4`, `ib`, …, or `nvlink`).
    pub kind: String,
    /// Line rate one way, bytes/s.
    pub bytes_per_s: f64,
    /// Fraction of the line rate an NCCL send/recv reaches, in (0, 1].
    pub efficiency: f64,
    /// Small-message one-way latency, seconds.
    pub latency_s: f64,
    /// NCCL chunk size, bytes (≥ 1).
    pub chunk_bytes: u64,
    /// Store-and-forward stages a chunk crosses (≥ 1).
    pub stages: u32,
    /// NICs per host the ranks share (≥ 1); 1 for links inside a host.
    pub nics: u32,
    /// Where the figures come from.
    pub source: LinkSource,
}

/// Where a link's figures come from, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkSource {
    /// The shipped datasheets (`traces/data/hardware/datasheets.json`).
    Datasheet,
    /// The datasheet kind with `--link` overrides (the keys given).
    Flag { keys: Vec<String> },
    /// The roles run on different hosts and no `--link` names the network: the datasheet `tcp`
    /// kind, NCCL's socket transport, which works without RDMA NICs.
    AssumedBetweenHosts,
}

/// A `--link` value: `KIND[,gbps=..,latency-us=..,chunk-kib=..,efficiency=..,nics=..]`.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkSpec {
    pub kind: String,
    /// Line rate, 10^9 bits/s (network convention: `gbps=400` for NDR InfiniBand).
    pub gbps: Option<f64>,
    pub latency_us: Option<f64>,
    pub chunk_kib: Option<f64>,
    pub efficiency: Option<f64>,
    pub nics: Option<u32>,
}

/// Why a `--link` value or link figure was refused.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum LinkError {
    #[error("unknown link kind {kind:?}; known: {known}")]
    UnknownKind { kind: String, known: String },
    #[error(
        "link key {key:?} in {text:?} is not one of gbps, latency-us, chunk-kib, efficiency, nics"
    )]
    UnknownKey { key: String, text: String },
    #[error("link key {key} needs a value (`{key}=..`) in {text:?}")]
    MissingValue { key: String, text: String },
    #[error("link key {key} is given twice in {text:?}")]
    RepeatedKey { key: String, text: String },
    #[error("link {key}={value} is not {wanted}")]
    BadValue {
        key: &'static str,
        value: String,
        wanted: &'static str,
    },
}

impl Link {
    /// A link of a datasheet kind, with one NIC.
    pub fn from_datasheet(sheet: &LinkDatasheet) -> Link {
        Link {
            kind: sheet.kind.clone(),
            bytes_per_s: sheet.gb_per_s * 1e9,
            efficiency: sheet.efficiency,
            latency_s: sheet.latency_us / 1e6,
            chunk_bytes: (sheet.chunk_kib * 1024.0).round().max(1.0) as u64,
            stages: sheet.stages.max(1),
            nics: 1,
            source: LinkSource::Datasheet,
        }
    }

    /// The link a `--link` value describes: its datasheet kind with the given keys replaced.
    pub fn from_spec(spec: &LinkSpec, sheets: &Datasheets) -> Result<Link, LinkError> {
        let sheet = sheets
            .link(&spec.kind)
            .ok_or_else(|| LinkError::UnknownKind {
                kind: spec.kind.clone(),
                known: sheets
                    .links
                    .iter()
                    .map(|l| l.kind.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })?;
        let mut link = Link::from_datasheet(sheet);
        let mut keys = Vec::new();
        if let Some(gbps) = spec.gbps {
            link.bytes_per_s = gbps * 1e9 / 8.0;
            keys.push("gbps".to_owned());
        }
        if let Some(us) = spec.latency_us {
            link.latency_s = us / 1e6;
            keys.push("latency-us".to_owned());
        }
        if let Some(kib) = spec.chunk_kib {
            link.chunk_bytes = (kib * 1024.0).round().max(1.0) as u64;
            keys.push("chunk-kib".to_owned());
        }
        if let Some(efficiency) = spec.efficiency {
            link.efficiency = efficiency;
            keys.push("efficiency".to_owned());
        }
        if let Some(nics) = spec.nics {
            link.nics = nics;
            keys.push("nics".to_owned());
        }
        link.source = if keys.is_empty() {
            LinkSource::Datasheet
        } else {
            LinkSource::Flag { keys }
        };
        Ok(link)
    }

    /// What one rank gets of the line rate when `ranks_on_host` ranks share the host's NICs,
    /// bytes/s: `rate × efficiency / ceil(ranks_on_host / nics)`.
    pub fn rate_per_rank(&self, ranks_on_host: u32) -> f64 {
        self.bytes_per_s * self.efficiency / f64::from(nic_sharers(ranks_on_host, self.nics))
    }

    /// One NCCL send/recv of `bytes` by one of `ranks_on_host` ranks sending at once.
    pub fn transfer_time(&self, bytes: u64, ranks_on_host: u32) -> SimDuration {
        SimDuration::from_secs_f64(self.latency_s + self.wire_s(bytes, 1, ranks_on_host))
    }

    /// `senders` messages of `bytes` each meeting at one receiving rank (fan-in; fan-out is the same
    /// sum): they cross that rank's share of its NIC one after another, the pipeline fill once.
    pub fn fan_in_time(&self, bytes: u64, senders: u32, ranks_on_host: u32) -> SimDuration {
        SimDuration::from_secs_f64(self.latency_s + self.wire_s(bytes, senders, ranks_on_host))
    }

    /// The time a transfer occupies the wire, seconds (without the latency).
    fn wire_s(&self, bytes: u64, messages: u32, ranks_on_host: u32) -> f64 {
        let rate = self.rate_per_rank(ranks_on_host);
        let body = f64::from(messages) * bytes as f64 / rate;
        let fill = f64::from(self.stages.max(1) - 1) * bytes.min(self.chunk_bytes) as f64 / rate;
        body + fill
    }

    /// One line for the report: kind, rate, latency, NICs and where the figures come from.
    pub fn describe(&self) -> String {
        let source = match &self.source {
            LinkSource::Datasheet => "datasheet".to_owned(),
            LinkSource::Flag { keys } => format!("datasheet with --link {}", keys.join(", ")),
            LinkSource::AssumedBetweenHosts => {
                "datasheet; roles on different hosts and no --link, NCCL sockets assumed".to_owned()
            }
        };
        format!(
            "{} {:.1} GB/s x {:.2}, {:.1} us, {} NIC(s) per host ({source})",
            self.kind,
            self.bytes_per_s / 1e9,
            self.efficiency,
            self.latency_s * 1e6,
            self.nics
        )
    }
}

/// The link A↔F hand-offs take: the `--link` spec when given, else the datasheet `tcp` kind when
/// the roles run on different hosts ([`LinkSource::AssumedBetweenHosts`]), else `None` (the GPUs'
/// own NVLink or PCIe, priced by the GPU's spec or profile).
pub fn afd_link(
    spec: Option<&LinkSpec>,
    on_different_hosts: bool,
    sheets: &Datasheets,
) -> Result<Option<Link>, LinkError> {
    match spec {
        Some(spec) => Link::from_spec(spec, sheets).map(Some),
        None if on_different_hosts => {
            let tcp = LinkSpec::parse("tcp")?;
            let mut link = Link::from_spec(&tcp, sheets)?;
            link.source = LinkSource::AssumedBetweenHosts;
            Ok(Some(link))
        }
        None => Ok(None),
    }
}

/// How many ranks share each NIC: `ceil(ranks_on_host / nics)`, at least 1.
pub fn nic_sharers(ranks_on_host: u32, nics: u32) -> u32 {
    ranks_on_host.max(1).div_ceil(nics.max(1))
}

impl LinkSpec {
    /// Parses `KIND[,key=value,...]`; the kind is checked against the datasheets later
    /// ([`Link::from_spec`]).
    pub fn parse(text: &str) -> Result<LinkSpec, LinkError> {
        let mut parts = text.split(',').map(str::trim);
        let kind = parts.next().unwrap_or_default().to_ascii_lowercase();
        let mut spec = LinkSpec {
            kind,
            gbps: None,
            latency_us: None,
            chunk_kib: None,
            efficiency: None,
            nics: None,
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| LinkError::MissingValue {
                    key: part.to_owned(),
                    text: text.to_owned(),
                })?;
            let (key, value) = (key.trim(), value.trim());
            let repeated = || LinkError::RepeatedKey {
                key: key.to_owned(),
                text: text.to_owned(),
            };
            match key {
                "gbps" => set_once(&mut spec.gbps, positive("gbps", value)?, repeated)?,
                "latency-us" => set_once(
                    &mut spec.latency_us,
                    non_negative("latency-us", value)?,
                    repeated,
                )?,
                "chunk-kib" => {
                    set_once(&mut spec.chunk_kib, positive("chunk-kib", value)?, repeated)?
                }
                "efficiency" => {
                    let efficiency = positive("efficiency", value)?;
                    if efficiency > 1.0 {
                        return Err(bad("efficiency", value, "in (0, 1]"));
                    }
                    set_once(&mut spec.efficiency, efficiency, repeated)?
                }
                "nics" => {
                    let nics = value
                        .parse::<u32>()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| bad("nics", value, "a whole number of at least 1"))?;
                    set_once(&mut spec.nics, nics, repeated)?
                }
                _ => {
                    return Err(LinkError::UnknownKey {
                        key: key.to_owned(),
                        text: text.to_owned(),
                    });
                }
            }
        }
        Ok(spec)
    }
}

impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.kind)?;
        if let Some(v) = self.gbps {
            write!(f, ",gbps={v}")?;
        }
        if let Some(v) = self.latency_us {
            write!(f, ",latency-us={v}")?;
        }
        if let Some(v) = self.chunk_kib {
            write!(f, ",chunk-kib={v}")?;
        }
        if let Some(v) = self.efficiency {
            write!(f, ",efficiency={v}")?;
        }
        if let Some(v) = self.nics {
            write!(f, ",nics={v}")?;
        }
        Ok(())
    }
}

fn set_once<T>(
    slot: &mut Option<T>,
    value: T,
    repeated: impl Fn() -> LinkError,
) -> Result<(), LinkError> {
    if slot.is_some() {
        return Err(repeated());
    }
    *slot = Some(value);
    Ok(())
}

fn bad(key: &'static str, value: &str, wanted: &'static str) -> LinkError {
    LinkError::BadValue {
        key,
        value: value.to_owned(),
        wanted,
    }
}

fn positive(key: &'static str, value: &str) -> Result<f64, LinkError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .ok_or_else(|| bad(key, value, "a positive number"))
}

fn non_negative(key: &'static str, value: &str) -> Result<f64, LinkError> {
    value
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| bad(key, value, "a non-negative number"))
}

#[cfg(test)]
mod tests;
