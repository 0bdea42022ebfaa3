//! `afd-conformance`: the invariant catalog and live checks for an Attention+FFN pair, and `bench`, a
//! `vllm bench serve`-style load generator (the suite's load, and `afd-twin bench`'s).
//!
//! - [`catalog`]: every invariant with its id, statement, source, kind and how it can be indeterminate.
//! - [`run`]: one run of the suite against a target ([`target`]), producing a [`report::Report`].
//! - [`checks`]: the phases of a run; [`stateful`] with [`model`]: random sequences against the reference
//!   model.
//! - [`client`], [`sse`], [`prometheus`]: the wire the suite reads (HTTP/1.1, event streams, `/metrics`).
//! - [`up`]: a pair of `afd-twin` processes started from a recipe, for rehearsal and for the suite's own
//!   tests.
//! - [`bench`]: the load generator.
//!
//! The twin itself is the crate `afd-twin` (conformance/twin/), which this crate never links: the suite
//! meets a twin only over the wire, as it meets vLLM. The library prints nothing; the binaries do.

pub mod bench;
pub mod catalog;
pub mod checks;
pub mod client;
pub mod model;
pub mod prometheus;
pub mod report;
pub mod run;
pub mod sse;
pub mod stateful;
pub mod target;
pub mod transcript;
pub mod up;

/// FNV-1a over `bytes`: a fixed hash that names random streams and seeds (stable across platforms and
/// releases, unlike `std`'s hasher).
pub fn stable_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
