//! Integration tests of `afd-sim`: the binary on every recipe fixture and on the topology tables,
//! and property tests that feed random and mangled input to the deployment parsers.

mod check_cli;
mod fixtures;
mod parsers;
mod support;
mod topology_cli;
