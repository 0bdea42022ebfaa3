//! `afd-gpu-probes`: times on real GPUs what the simulator prices, and writes calibration profiles.
//!
//! All unsafe CUDA code lives in one module; everything else (statistics, fitting, rendezvous,
//! profile writing) is pure and tested on machines without a GPU.
