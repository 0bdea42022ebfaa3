//! Integration tests of `afd-sim`: the binary on every recipe fixture and on the topology tables,
//! property tests that feed random and mangled input to the deployment parsers, and whole
//! `predict` runs through the public API and the binary, and the fidelity check of the simulator
//! against the committed H200 pipeline measurements.

mod check_cli;
mod fidelity;
mod fixtures;
mod golden;
mod hosts_cli;
mod parsers;
mod predict_cli;
mod reliability_cli;
mod scenarios;
mod support;
mod sweep_cli;
mod topology_cli;
mod vllm_fidelity;
