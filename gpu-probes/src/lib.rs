//! `afd-gpu-probes`: times on real GPUs what the simulator prices, and writes calibration profiles and
//! pipeline results (`afd-traces` formats).
//!
//! All unsafe CUDA code lives in [`device`]; everything else (statistics, fits, routing draws, the
//! rendezvous, sizing, CPU references, file assembly) is pure and tested on machines without a GPU.

pub mod assemble;
pub mod calibrate;
pub mod device;
pub mod error;
pub mod fit;
pub mod gemm_choice;
pub mod model;
pub mod pipeline_plan;
pub mod reference;
pub mod render;
pub mod rendezvous;
pub mod routing;
pub mod shapes;
pub mod spec;
pub mod stats;
pub mod sweep;
pub mod vllm;
