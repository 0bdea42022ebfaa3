//! `afd-traces`: every on-disk format of afd-timing, and nothing else.
//!
//! Workload traces come in; calibration profiles, pipeline results, reports and timelines go out.
//! Only this crate derives serde, and every format carries a `schema_version` (ARCHITECTURE.md).
//! It has no workspace dependencies and does no arithmetic beyond checking what it reads.

pub mod calibration;
pub mod report;
pub mod timeline;
