//! `afd-traces`: every on-disk format of afd-timing, and nothing else.
//!
//! Workload traces and model architectures come in; calibration profiles, pipeline results, reports,
//! sweep results and timelines go out.
//! Only this crate derives serde, and every format carries a `schema_version` (ARCHITECTURE.md).
//! It has no workspace dependencies and does no modelling: beyond checking what it reads, it only
//! derives figures that follow from a file alone (trace statistics, parameter and byte counts).

pub mod calibration;
pub mod hardware;
pub mod input;
pub mod json_at;
pub mod model_config;
pub mod pipeline;
pub mod report;
pub mod sweep;
pub mod timeline;
pub mod vllm_cli;
pub mod vllm_run;
pub mod workload;
