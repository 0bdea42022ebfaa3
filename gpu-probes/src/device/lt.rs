//! cuBLASLt matmuls in the row-major "linear layer" form of `blas.rs` (`y[T, out] = x[T, in] ·
//! w[out, in]ᵀ`, column-major view `Yᵀ = op(W) · Xᵀ` with `W` transposed), batched over experts with
//! fixed strides or device arrays of pointers, and the algorithms cuBLASLt's heuristic offers for a
//! shape. Descriptors live as long as the shape is in use; the workspace is this handle's own, so
//! graph capture never allocates.

use std::ffi::c_void;

use cudarc::cublaslt::sys as lt;

use super::blas::check_status;
use super::gpu::{Buffer, Gpu, Stream};
use crate::error::ProbeError;

const WORKSPACE_BYTES: usize = 64 << 20;
const OP_N: i32 = 0;
const OP_T: i32 = 1;
/// `CUBLASLT_BATCH_MODE_POINTER_ARRAY`.
const BATCH_MODE_POINTER_ARRAY: i32 = 1;

fn status(gpu: usize, call: &'static str, s: lt::cublasStatus_t) -> Result<(), ProbeError> {
    check_status(gpu, call, s, lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS)
}

/// A cuBLASLt handle with its workspace.
pub(super) struct Lt {
    handle: lt::cublasLtHandle_t,
    gpu: usize,
    workspace: Buffer,
}

/// How the batch's operands are found.
#[derive(Clone, Copy, Debug)]
pub(super) enum LtBatch {
    /// Operands at fixed strides (elements) from the first: weights, inputs, outputs.
    Strided { w: usize, x: usize, y: usize },
    /// Device arrays of pointers.
    Pointers,
}

/// Descriptors of one batched linear shape and the algorithms the heuristic offered for it.
pub(super) struct LtShape {
    desc: lt::cublasLtMatmulDesc_t,
    a: lt::cublasLtMatrixLayout_t,
    b: lt::cublasLtMatrixLayout_t,
    d: lt::cublasLtMatrixLayout_t,
    /// Heuristic results, best estimate first.
    algos: Vec<lt::cublasLtMatmulHeuristicResult_t>,
}

impl Lt {
    /// `None` when the library cannot be loaded (then no cuBLASLt candidates are offered).
    pub(super) fn new(gpu: &Gpu) -> Result<Option<Lt>, ProbeError> {
        // SAFETY: only tries to dlopen the library.
        if !unsafe { lt::is_culib_present() } {
            return Ok(None);
        }
        gpu.bind()?;
        let workspace = gpu.alloc(WORKSPACE_BYTES, "cuBLASLt workspace")?;
        let mut handle: lt::cublasLtHandle_t = std::ptr::null_mut();
        // SAFETY: creates a handle in the bound context.
        status(gpu.ordinal, "cublasLtCreate", unsafe {
            lt::cublasLtCreate(&mut handle)
        })?;
        Ok(Some(Lt {
            handle,
            gpu: gpu.ordinal,
            workspace,
        }))
    }

    /// Descriptors for `experts` linear layers of `tokens` rows, `in_features` → `out_features`
    /// (output row stride `out_features`), and up to `max_algos` heuristic algorithms for them.
    /// `align` is the smallest alignment (bytes) of any operand address. An empty algorithm list means
    /// cuBLASLt offers nothing for this shape.
    #[expect(
        clippy::too_many_arguments,
        reason = "a batched GEMM has this many dimensions"
    )]
    pub(super) fn shape(
        &self,
        tokens: usize,
        in_features: usize,
        out_features: usize,
        experts: usize,
        batch: LtBatch,
        align: u32,
        max_algos: usize,
    ) -> Result<LtShape, ProbeError> {
        let g = self.gpu;
        let mut shape = LtShape {
            desc: std::ptr::null_mut(),
            a: std::ptr::null_mut(),
            b: std::ptr::null_mut(),
            d: std::ptr::null_mut(),
            algos: Vec::new(),
        };
        let bf16 = lt::cudaDataType::CUDA_R_16BF;
        // SAFETY: plain descriptor calls; every attribute buffer is a live local of the documented type
        // and size; `shape` owns (and drops) what is created, also on an early return.
        unsafe {
            status(
                g,
                "cublasLtMatmulDescCreate",
                lt::cublasLtMatmulDescCreate(
                    &mut shape.desc,
                    lt::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                    lt::cudaDataType::CUDA_R_32F,
                ),
            )?;
            for (attr, value) in [
                (
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSA,
                    OP_T,
                ),
                (
                    lt::cublasLtMatmulDescAttributes_t::CUBLASLT_MATMUL_DESC_TRANSB,
                    OP_N,
                ),
            ] {
                status(
                    g,
                    "cublasLtMatmulDescSetAttribute",
                    lt::cublasLtMatmulDescSetAttribute(
                        shape.desc,
                        attr,
                        (&value as *const i32).cast(),
                        4,
                    ),
                )?;
            }
            // Column-major: A = W stored [in, out] (transposed by the op), B = X [in, T], D = Y [out, T].
            let layouts = [
                (in_features, out_features, in_features),
                (in_features, tokens, in_features),
                (out_features, tokens, out_features),
            ];
            let strides = match batch {
                LtBatch::Strided { w, x, y } => Some([w, x, y]),
                LtBatch::Pointers => None,
            };
            let mut made = [std::ptr::null_mut(); 3];
            for (i, &(rows, cols, ld)) in layouts.iter().enumerate() {
                status(
                    g,
                    "cublasLtMatrixLayoutCreate",
                    lt::cublasLtMatrixLayoutCreate(
                        &mut made[i],
                        bf16,
                        rows as u64,
                        cols as u64,
                        ld as i64,
                    ),
                )?;
                match i {
                    0 => shape.a = made[0],
                    1 => shape.b = made[1],
                    _ => shape.d = made[2],
                }
                let count = experts as i32;
                set_layout(
                    g,
                    made[i],
                    lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                    &count,
                )?;
                match strides {
                    Some(s) => {
                        let stride = s[i] as i64;
                        set_layout(
                            g,
                            made[i],
                            lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                            &stride,
                        )?;
                    }
                    None => set_layout(
                        g,
                        made[i],
                        lt::cublasLtMatrixLayoutAttribute_t::CUBLASLT_MATRIX_LAYOUT_BATCH_MODE,
                        &BATCH_MODE_POINTER_ARRAY,
                    )?,
                }
            }
            let mut pref: lt::cublasLtMatmulPreference_t = std::ptr::null_mut();
            status(
                g,
                "cublasLtMatmulPreferenceCreate",
                lt::cublasLtMatmulPreferenceCreate(&mut pref),
            )?;
            let workspace = WORKSPACE_BYTES as u64;
            let mut result = status(
                g,
                "cublasLtMatmulPreferenceSetAttribute",
                lt::cublasLtMatmulPreferenceSetAttribute(
                    pref,
                    lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                    (&workspace as *const u64).cast(),
                    8,
                ),
            );
            for attr in [
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                lt::cublasLtMatmulPreferenceAttributes_t::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            ] {
                if result.is_ok() {
                    result = status(
                        g,
                        "cublasLtMatmulPreferenceSetAttribute",
                        lt::cublasLtMatmulPreferenceSetAttribute(
                            pref,
                            attr,
                            (&align as *const u32).cast(),
                            4,
                        ),
                    );
                }
            }
            if result.is_ok() && max_algos > 0 {
                let mut results =
                    vec![std::mem::zeroed::<lt::cublasLtMatmulHeuristicResult_t>(); max_algos];
                let mut returned = 0i32;
                let heuristic = lt::cublasLtMatmulAlgoGetHeuristic(
                    self.handle,
                    shape.desc,
                    shape.a,
                    shape.b,
                    shape.d,
                    shape.d,
                    pref,
                    max_algos as i32,
                    results.as_mut_ptr(),
                    &mut returned,
                );
                // NOT_SUPPORTED (no algorithm for this layout) leaves the list empty.
                if heuristic == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
                    results.truncate(returned.max(0) as usize);
                    results.retain(|r| {
                        r.state == lt::cublasStatus_t::CUBLAS_STATUS_SUCCESS
                            && r.workspaceSize <= WORKSPACE_BYTES
                    });
                    shape.algos = results;
                }
            }
            let _ = lt::cublasLtMatmulPreferenceDestroy(pref);
            result?;
        }
        Ok(shape)
    }

    /// Runs `shape` with its `algo`-th algorithm. Strided: `w`, `x`, `y` are the first operands;
    /// pointer arrays: device arrays of `experts` pointers each.
    pub(super) fn run(
        &self,
        shape: &LtShape,
        algo: usize,
        w: u64,
        x: u64,
        y: u64,
        stream: &Stream,
    ) -> Result<(), ProbeError> {
        let result = shape
            .algos
            .get(algo)
            .expect("algorithm indices come from the shape's own heuristic list");
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the descriptors are alive; the caller passes device ranges (or pointer arrays) that
        // hold the shape's operands; the workspace is this handle's and large enough for the algorithm.
        status(self.gpu, "cublasLtMatmul", unsafe {
            lt::cublasLtMatmul(
                self.handle,
                shape.desc,
                (&alpha as *const f32).cast(),
                w as *const c_void,
                shape.a,
                x as *const c_void,
                shape.b,
                (&beta as *const f32).cast(),
                y as *const c_void,
                shape.d,
                y as *mut c_void,
                shape.d,
                &result.algo,
                self.workspace.ptr as *mut c_void,
                WORKSPACE_BYTES,
                stream.raw as lt::cudaStream_t,
            )
        })
    }
}

impl LtShape {
    /// Algorithms the heuristic offered.
    pub(super) fn algos(&self) -> usize {
        self.algos.len()
    }
}

/// Sets one layout attribute from a plain value.
///
/// # Safety
/// `layout` is a live layout and `T` the attribute's documented type.
unsafe fn set_layout<T>(
    gpu: usize,
    layout: lt::cublasLtMatrixLayout_t,
    attr: lt::cublasLtMatrixLayoutAttribute_t,
    value: &T,
) -> Result<(), ProbeError> {
    // SAFETY: as the caller promises; `value` outlives the call.
    status(gpu, "cublasLtMatrixLayoutSetAttribute", unsafe {
        lt::cublasLtMatrixLayoutSetAttribute(
            layout,
            attr,
            (value as *const T).cast(),
            std::mem::size_of::<T>(),
        )
    })
}

impl Drop for LtShape {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created by this owner (or is null) and is destroyed once.
        unsafe {
            for layout in [self.a, self.b, self.d] {
                if !layout.is_null() {
                    let _ = lt::cublasLtMatrixLayoutDestroy(layout);
                }
            }
            if !self.desc.is_null() {
                let _ = lt::cublasLtMatmulDescDestroy(self.desc);
            }
        }
    }
}

impl Drop for Lt {
    fn drop(&mut self) {
        // SAFETY: created by this owner, destroyed once, after its streams were synchronised; the
        // workspace is freed after the handle (field order).
        let _ = unsafe { lt::cublasLtDestroy(self.handle) };
    }
}
