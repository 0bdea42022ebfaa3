//! Integration tests of `afd-twin`, in one binary (STYLE.md §7): twins as real processes on 127.0.0.1
//! with ephemeral ports, driven by a real HTTP client and afd-conformance's load generator; their
//! refusals, fault switches, timing against the simulator, golden transcripts of real vLLM, and the
//! command line.

mod cli;
mod faults;
mod pair;
mod refusals;
mod support;
mod timing;
mod transcripts;
