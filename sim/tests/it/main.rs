//! Integration tests of the `afd-sim` library through its public API: property tests that feed
//! random and mangled input to the deployment parsers, whole runs against golden event logs, and
//! scenarios over generated cost tables. The binary's tests are in sim/cli/tests.

mod golden;
mod parsers;
mod scenarios;
mod support;
mod topology;
