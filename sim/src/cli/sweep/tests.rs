//! Sweep CLI helpers.
