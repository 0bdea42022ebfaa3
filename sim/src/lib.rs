//! `afd-sim`: the shared model of an AFD deployment and the discrete-event simulator of it serving a
//! workload.
//!
//! The library is pure: it never reads the wall clock, the environment, files or OS randomness, and
//! it links no async runtime, HTTP stack or CUDA crate, nor any command-line crate (ARCHITECTURE.md,
//! checked by `.ci/run`). The `afd-sim` binary, package `afd-sim-cli` in `sim/cli/`, does all I/O.

pub mod closed_form;
pub mod cluster;
pub mod colocated;
pub mod deployment;
pub mod engine;
pub mod event;
pub mod launch;
pub mod live;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod pipeline;
pub mod planner;
pub mod pricing;
pub mod queue;
pub mod replay;
pub mod report;
pub mod rng;
pub mod serving;
pub mod step;
pub mod time;
pub mod topology;
pub mod vllm_compare;
