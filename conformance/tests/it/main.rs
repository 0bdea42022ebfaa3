//! Integration tests of `afd-conformance`, in one binary (STYLE.md §7): `afd-twin` as real processes on
//! 127.0.0.1 with ephemeral ports driven by a real HTTP client; and the conformance suite run end to end
//! against small servers of its own (well-behaved and misbehaving) and against twin pairs, with the JUnit
//! schema shape of its reports.

mod cli;
mod fake;
mod fake_pair;
mod faults;
mod junit_schema;
mod pair;
mod record;
mod refusals;
mod suite;
mod suite_faults;
mod support;
mod timing;
mod transcripts;
