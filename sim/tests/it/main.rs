//! Integration tests of `afd-sim`: whole runs through the public API and the binary.

mod cli;
mod golden;
mod scenarios;
mod support;
