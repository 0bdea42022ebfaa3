//! `afd-sim`: the shared model of an AFD deployment and the discrete-event simulator of it serving a
//! workload.
//!
//! The library is pure: it never reads the wall clock, the environment, files or OS randomness, and
//! it links no async runtime, HTTP stack or CUDA crate (ARCHITECTURE.md). The `afd-sim` binary
//! (`src/main.rs`) does all I/O.

pub mod deployment;
pub mod topology;
