//! Everything that touches CUDA, cuBLAS, cuBLASLt, NCCL or NVRTC: the only module with unsafe code.
//!
//! Libraries are loaded at run time (cudarc `dynamic-loading`), so this compiles everywhere and
//! [`preflight`] turns a missing driver, GPU or library into a clear error before anything runs.
//! Each probe takes a spec from [`crate::spec`] and returns `afd-traces` tables; device objects never
//! leave this module.
#![expect(
    unsafe_code,
    reason = "CUDA driver, cuBLAS, NCCL and kernel launches are C APIs; every unsafe block says why it is sound"
)]

mod attention;
mod blas;
mod expert_gemm;
mod gpu;
mod hbm;
mod info;
mod kernels;
mod launch;
mod lt;
mod moe;
mod nccl;
mod p2p;
mod pipeline;
mod ranks;
mod timing;

use std::sync::Arc;

pub use info::{Requirements, preflight};
pub use pipeline::PipelineOutcome;

use crate::error::ProbeError;
use crate::spec::{
    AttentionSpec, HbmSpec, LaunchSpec, Measured, MoeSpec, P2pSpec, PipelineSpec, RankLayout,
};

/// Device-to-device copy bandwidth over the spec's sizes.
pub fn hbm(spec: &HbmSpec) -> Result<Measured, ProbeError> {
    hbm::run(spec)
}

/// Eager versus graph launch cost of tiny kernels.
pub fn launch(spec: &LaunchSpec) -> Result<Measured, ProbeError> {
    launch::run(spec)
}

/// NCCL point-to-point and collectives; `Some` on rank 0.
pub fn p2p(spec: &P2pSpec) -> Result<Option<Measured>, ProbeError> {
    p2p::run(spec)
}

/// One MoE layer's FFN work and its parts.
pub fn moe(spec: &MoeSpec, progress: &dyn Fn(&str)) -> Result<Measured, ProbeError> {
    moe::run(spec, progress)
}

/// One layer's Attention work: projections, MLA decode grid, prefill chunks.
pub fn attention(spec: &AttentionSpec, progress: &dyn Fn(&str)) -> Result<Measured, ProbeError> {
    attention::run(spec, progress)
}

/// Real Attention→FFN→Attention steps on two GPUs; `Some` on rank 0.
pub fn pipeline(
    spec: &PipelineSpec,
    progress: Arc<dyn Fn(&str) + Send + Sync>,
) -> Result<Option<PipelineOutcome>, ProbeError> {
    pipeline::run(spec, progress)
}

/// Runs `body(rank, gpu)` on every rank of `layout` (threads run concurrently); rank 0 gets every
/// rank's blob in rank order.
pub fn on_ranks<F>(layout: &RankLayout, body: F) -> Result<Option<Vec<Vec<u8>>>, ProbeError>
where
    F: Fn(usize, usize) -> Result<Vec<u8>, ProbeError> + Send + Sync + 'static,
{
    ranks::run_ranks(layout, move |setup| body(setup.rank, setup.gpu))
}

#[cfg(test)]
mod tests;

/// The NCCL version actually loaded (empty when NCCL cannot be loaded).
pub fn nccl_version() -> String {
    // SAFETY: only tries to dlopen the library.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        nccl::version().unwrap_or_default()
    } else {
        String::new()
    }
}
