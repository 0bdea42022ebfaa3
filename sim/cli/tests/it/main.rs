//! Integration tests of the `afd-sim` binary: every recipe fixture, the topology tables, whole
//! `predict`, `check` and `sweep` runs, bad input of every kind, and the fidelity checks of the
//! simulator against the committed H200 pipeline measurements and real vLLM runs.
//!
//! The binary runs from the library's directory (`sim/`), so fixture paths such as
//! `tests/fixtures/recipes/...` read as they do in the docs.

mod check_cli;
mod fidelity;
mod fixtures;
mod hosts_cli;
mod predict_cli;
mod reliability_cli;
mod support;
mod sweep_cli;
mod topology_cli;
mod vllm_fidelity;
mod warm_up_cli;
