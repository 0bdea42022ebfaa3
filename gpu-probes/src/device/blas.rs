//! cuBLAS bf16 GEMMs in the row-major "linear layer" form the model code uses: `y[T, out] = x[T, in] ·
//! w[out, in]ᵀ`, single, strided-batched and pointer-array batched (device arrays of pointers: cudarc's
//! safe grouped GEMM passes host arrays and faults; device.md).

use std::ffi::c_void;

use cudarc::cublas::sys as blas;

use super::gpu::{Buffer, Gpu, Stream};
use crate::error::ProbeError;

/// A cuBLAS handle bound to one stream, with its own workspace so graph capture never allocates.
pub(super) struct Blas {
    handle: blas::cublasHandle_t,
    gpu: usize,
    _workspace: Buffer,
}

// SAFETY: the handle is used only by the thread that owns this value.
unsafe impl Send for Blas {}

const WORKSPACE_BYTES: usize = 64 << 20;

/// Maps a cuBLAS or cuBLASLt status (distinct binding types) to a probe error naming the call.
pub(super) fn check_status<S: PartialEq + std::fmt::Debug>(
    gpu: usize,
    call: &'static str,
    s: S,
    success: S,
) -> Result<(), ProbeError> {
    if s == success {
        Ok(())
    } else {
        Err(ProbeError::Cublas {
            call,
            gpu,
            status: format!("{s:?}"),
        })
    }
}

fn status(gpu: usize, call: &'static str, s: blas::cublasStatus_t) -> Result<(), ProbeError> {
    check_status(gpu, call, s, blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
}

/// A row-major bf16 operand: device address and row stride (elements).
#[derive(Clone, Copy, Debug)]
pub(super) struct Mat {
    pub(super) ptr: u64,
    pub(super) ld: usize,
}

impl Mat {
    pub(super) fn new(ptr: u64, ld: usize) -> Mat {
        Mat { ptr, ld }
    }
}

impl Blas {
    pub(super) fn new(gpu: &Gpu, stream: &Stream) -> Result<Blas, ProbeError> {
        gpu.bind()?;
        let workspace = gpu.alloc(WORKSPACE_BYTES, "cuBLAS workspace")?;
        let mut handle: blas::cublasHandle_t = std::ptr::null_mut();
        // SAFETY: creates a handle in the bound context.
        status(gpu.ordinal, "cublasCreate", unsafe {
            blas::cublasCreate_v2(&mut handle)
        })?;
        let blas = Blas {
            handle,
            gpu: gpu.ordinal,
            _workspace: workspace,
        };
        // SAFETY: handle and stream are alive; the workspace outlives the handle (dropped after it).
        unsafe {
            status(
                gpu.ordinal,
                "cublasSetStream",
                blas::cublasSetStream_v2(handle, stream.raw as blas::cudaStream_t),
            )?;
            status(
                gpu.ordinal,
                "cublasSetWorkspace",
                blas::cublasSetWorkspace_v2(
                    handle,
                    blas._workspace.ptr as *mut c_void,
                    blas._workspace.bytes,
                ),
            )?;
        }
        Ok(blas)
    }

    /// `y[t, o] = Σ_i x[t, i] · w[o, i]` for `tokens × out` outputs; `y_f32` writes fp32 output.
    #[expect(clippy::too_many_arguments, reason = "a GEMM has this many dimensions")]
    pub(super) fn linear(
        &self,
        x: Mat,
        w: Mat,
        y: Mat,
        tokens: usize,
        in_features: usize,
        out_features: usize,
        y_f32: bool,
    ) -> Result<(), ProbeError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        let c_type = if y_f32 {
            blas::cudaDataType::CUDA_R_32F
        } else {
            blas::cudaDataType::CUDA_R_16BF
        };
        // Column-major view: Yᵀ[out, T] = W[out, in] · Xᵀ[in, T]; W row-major is (in × out) column-major.
        // SAFETY: the caller passes device ranges that hold these shapes.
        status(self.gpu, "cublasGemmEx", unsafe {
            blas::cublasGemmEx(
                self.handle,
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                out_features as i32,
                tokens as i32,
                in_features as i32,
                (&alpha as *const f32).cast(),
                w.ptr as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                w.ld as i32,
                x.ptr as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                x.ld as i32,
                (&beta as *const f32).cast(),
                y.ptr as *mut c_void,
                c_type,
                y.ld as i32,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        })
    }

    /// `batch` independent linear layers whose operands lie at fixed strides (elements).
    #[expect(
        clippy::too_many_arguments,
        reason = "a batched GEMM has this many dimensions"
    )]
    pub(super) fn linear_strided(
        &self,
        x: Mat,
        x_stride: usize,
        w: Mat,
        w_stride: usize,
        y: Mat,
        y_stride: usize,
        tokens: usize,
        in_features: usize,
        out_features: usize,
        batch: usize,
    ) -> Result<(), ProbeError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: as for `linear`, for each of `batch` strided operands.
        status(self.gpu, "cublasGemmStridedBatchedEx", unsafe {
            blas::cublasGemmStridedBatchedEx(
                self.handle,
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                out_features as i32,
                tokens as i32,
                in_features as i32,
                (&alpha as *const f32).cast(),
                w.ptr as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                w.ld as i32,
                w_stride as i64,
                x.ptr as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                x.ld as i32,
                x_stride as i64,
                (&beta as *const f32).cast(),
                y.ptr as *mut c_void,
                blas::cudaDataType::CUDA_R_16BF,
                y.ld as i32,
                y_stride as i64,
                batch as i32,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        })
    }

    /// `batch` linear layers whose operands are listed in device arrays of device pointers
    /// (`w_ptrs`, `x_ptrs`, `y_ptrs`, each `batch` u64).
    #[expect(
        clippy::too_many_arguments,
        reason = "a batched GEMM has this many dimensions"
    )]
    pub(super) fn linear_pointers(
        &self,
        x_ptrs: u64,
        x_ld: usize,
        w_ptrs: u64,
        w_ld: usize,
        y_ptrs: u64,
        y_ld: usize,
        tokens: usize,
        in_features: usize,
        out_features: usize,
        batch: usize,
    ) -> Result<(), ProbeError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the pointer arrays live in device memory and list `batch` valid operands each.
        status(self.gpu, "cublasGemmBatchedEx", unsafe {
            blas::cublasGemmBatchedEx(
                self.handle,
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                out_features as i32,
                tokens as i32,
                in_features as i32,
                (&alpha as *const f32).cast(),
                w_ptrs as *const *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                w_ld as i32,
                x_ptrs as *const *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                x_ld as i32,
                (&beta as *const f32).cast(),
                y_ptrs as *const *mut c_void,
                blas::cudaDataType::CUDA_R_16BF,
                y_ld as i32,
                batch as i32,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        })
    }

    /// Per-head matrix products of MLA's absorbed projections, column-major view: for each of
    /// `batch` heads, `C[m, n] = A[m, k] · B[k, n]` with A non-transposed (`lda`), B non-transposed.
    #[expect(
        clippy::too_many_arguments,
        reason = "a batched GEMM has this many dimensions"
    )]
    pub(super) fn bmm_col_major(
        &self,
        a: u64,
        lda: usize,
        a_stride: usize,
        b: u64,
        ldb: usize,
        b_stride: usize,
        c: u64,
        ldc: usize,
        c_stride: usize,
        m: usize,
        n: usize,
        k: usize,
        batch: usize,
    ) -> Result<(), ProbeError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the caller passes device ranges holding these strided shapes.
        status(self.gpu, "cublasGemmStridedBatchedEx", unsafe {
            blas::cublasGemmStridedBatchedEx(
                self.handle,
                blas::cublasOperation_t::CUBLAS_OP_N,
                blas::cublasOperation_t::CUBLAS_OP_N,
                m as i32,
                n as i32,
                k as i32,
                (&alpha as *const f32).cast(),
                a as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                lda as i32,
                a_stride as i64,
                b as *const c_void,
                blas::cudaDataType::CUDA_R_16BF,
                ldb as i32,
                b_stride as i64,
                (&beta as *const f32).cast(),
                c as *mut c_void,
                blas::cudaDataType::CUDA_R_16BF,
                ldc as i32,
                c_stride as i64,
                batch as i32,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT,
            )
        })
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: created by this owner, destroyed once, after its stream was synchronised.
        let _ = unsafe { blas::cublasDestroy_v2(self.handle) };
    }
}
