//! Integration tests of `afd-traces` against the data files shipped under `traces/data/`.

#![expect(
    clippy::unwrap_used,
    reason = "test helpers panic on failure, like the tests that call them"
)]

mod models;
mod workloads;
