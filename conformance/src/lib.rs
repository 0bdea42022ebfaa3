//! `afd-conformance`: the invariant catalog and live checks for an Attention+FFN pair, `afd-twin` (a
//! GPU-free stand-in for the pair) and `bench`, a `vllm bench serve`-style load generator both use.

pub mod bench;
pub mod twin;
