//! Integration tests of `afd-conformance`, in one binary (STYLE.md §7): the conformance suite run end to
//! end against small servers of its own (well-behaved and misbehaving) and against pairs of `afd-twin`
//! processes (built by [`twin_bin`]), with the JUnit schema shape of its reports. The twin's own tests
//! are in conformance/twin/tests/it/.

mod cli;
mod fake;
mod fake_pair;
mod junit_schema;
mod record;
mod suite;
mod suite_faults;
mod twin_bin;
