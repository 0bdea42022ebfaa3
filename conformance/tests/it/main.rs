//! Integration tests of `afd-twin`: real processes on 127.0.0.1 with ephemeral ports, driven by a real
//! HTTP client. One binary for the crate (STYLE.md §7).

mod faults;
mod pair;
mod refusals;
mod support;
mod timing;
