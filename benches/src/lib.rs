//! Shared fixtures for the criterion benchmarks under `benches/benches/`.
