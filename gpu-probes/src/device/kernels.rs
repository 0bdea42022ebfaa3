//! The probe's own kernels (`kernels.cu`), compiled once per process with NVRTC for the GPU's
//! architecture and loaded into each GPU's context, with typed launchers.

use std::ffi::{CString, c_void};
use std::sync::{Mutex, OnceLock};

use cudarc::driver::sys;
use cudarc::nvrtc::{CompileOptions, compile_ptx_with_opts};

use super::gpu::{Gpu, Stream, check};
use crate::error::ProbeError;
use crate::gemm_choice::{TILES, Tile};
use crate::shapes::MlaSplit;

const SOURCE: &str = include_str!("kernels.cu");

/// Dynamic shared memory of one MLA decode block, bytes (see the layout in `kernels.cu`).
pub(super) const MLA_SMEM_BYTES: u32 = 59_584;

/// Which MLA decode kernel a GPU uses (chosen by a self-test against a CPU reference).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum MlaVariant {
    /// Tensor-core `mma.sync` m16n8k16 bf16, next tile prefetched into registers.
    MmaPrefetch,
    /// Tensor-core `mma.sync` m16n8k16 bf16, each tile loaded when needed.
    Mma,
    /// CUDA-core fallback.
    Simple,
}

impl MlaVariant {
    pub(super) fn name(self) -> &'static str {
        match self {
            MlaVariant::MmaPrefetch => {
                "mla_decode_mma_prefetch (tensor cores, mma.sync m16n8k16 bf16, register-prefetched KV tiles)"
            }
            MlaVariant::Mma => "mla_decode_mma (tensor cores, mma.sync m16n8k16 bf16)",
            MlaVariant::Simple => "mla_decode_simple (CUDA cores)",
        }
    }
}

/// Loaded kernels of one GPU.
pub(super) struct Kernels {
    gpu: usize,
    pub(super) fill_bf16: sys::CUfunction,
    pub(super) fill_u32: sys::CUfunction,
    pub(super) check_u32: sys::CUfunction,
    pub(super) check_const_u32: sys::CUfunction,
    pub(super) count_nonfinite: sys::CUfunction,
    pub(super) add_one: sys::CUfunction,
    pub(super) add_rmsnorm: sys::CUfunction,
    pub(super) mla_prep: sys::CUfunction,
    pub(super) mla_decode_mma_prefetch: sys::CUfunction,
    pub(super) mla_decode_mma: sys::CUfunction,
    pub(super) mla_decode_simple: sys::CUfunction,
    pub(super) mla_combine: sys::CUfunction,
    pub(super) router_topk: sys::CUfunction,
    pub(super) moe_gather: sys::CUfunction,
    pub(super) moe_combine: sys::CUfunction,
    pub(super) silu_mul: sys::CUfunction,
    pub(super) compare_bf16: sys::CUfunction,
    /// `expert_gemm_*` of every tile in [`TILES`]: `(plain, SiLU·mul fused)`, in that order.
    expert_gemm: Vec<(sys::CUfunction, sys::CUfunction)>,
    pub(super) sm_count: u32,
}

/// One launch of the grouped expert GEMM (see `kernels.cu`): `experts` GEMMs `y_a = x_a · W_aᵀ`
/// with `W_a` (`n × k`, row-major) listed in the device array `w_ptrs`, `x_a = x + a·x_stride` and
/// `y_a = y + a·y_stride` (elements; `m` rows each, result row stride `ldy`). With `fused`, `W_a` is
/// the gate/up matrix (`n = 2·inter`) and `y` receives `silu(gate)·up` (`inter` columns).
#[derive(Clone, Copy, Debug)]
pub(super) struct ExpertGemmArgs {
    pub(super) w_ptrs: u64,
    pub(super) x: u64,
    pub(super) y: u64,
    pub(super) m: usize,
    pub(super) n: usize,
    pub(super) k: usize,
    pub(super) ldy: usize,
    pub(super) x_stride: usize,
    pub(super) y_stride: usize,
    pub(super) experts: usize,
}

// SAFETY: CUfunction handles are immutable after loading and valid in their context on any thread.
unsafe impl Send for Kernels {}
// SAFETY: as above.
unsafe impl Sync for Kernels {}

/// PTX per architecture, compiled once per process.
pub(super) fn ptx_for(arch: &'static str) -> Result<String, ProbeError> {
    static CACHE: OnceLock<Mutex<Vec<(&'static str, String)>>> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(Vec::new()));
    let mut cache = cache
        .lock()
        .expect("the PTX cache lock is never poisoned by a panic while held");
    if let Some((_, ptx)) = cache.iter().find(|(a, _)| *a == arch) {
        return Ok(ptx.clone());
    }
    let opts = CompileOptions {
        arch: Some(arch),
        options: vec!["--std=c++17".to_owned()],
        ..CompileOptions::default()
    };
    let ptx = compile_ptx_with_opts(SOURCE, opts)
        .map_err(|err| ProbeError::Nvrtc {
            log: format!("{err:?}"),
        })?
        .to_src();
    cache.push((arch, ptx.clone()));
    Ok(ptx)
}

fn arch_of(gpu: &Gpu) -> Result<&'static str, ProbeError> {
    Ok(match gpu.compute_capability {
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        (major, minor) => {
            return Err(ProbeError::setting(
                "GPU",
                format!(
                    "{} has compute capability {major}.{minor}; the probe kernels need 8.0, 8.6, 8.7, 8.9, 9.0, 10.0 or 12.0",
                    gpu.name
                ),
            ));
        }
    })
}

impl Kernels {
    /// Compiles (once per process) and loads the kernels into `gpu`'s context.
    pub(super) fn load(gpu: &Gpu) -> Result<Kernels, ProbeError> {
        let arch = arch_of(gpu)?;
        let ptx = ptx_for(arch)?;
        gpu.bind()?;
        let image = CString::new(ptx).map_err(|_| ProbeError::Nvrtc {
            log: "NVRTC returned PTX with an interior NUL byte".to_owned(),
        })?;
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `image` is a NUL-terminated PTX string that outlives the call.
        check(gpu.ordinal, "cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, image.as_ptr().cast::<c_void>())
        })?;
        let function = |name: &str| -> Result<sys::CUfunction, ProbeError> {
            let cname = CString::new(name).expect("kernel names have no NUL");
            let mut f: sys::CUfunction = std::ptr::null_mut();
            // SAFETY: module is loaded; cname is NUL-terminated.
            check(gpu.ordinal, "cuModuleGetFunction", unsafe {
                sys::cuModuleGetFunction(&mut f, module, cname.as_ptr())
            })?;
            Ok(f)
        };
        let kernels = Kernels {
            gpu: gpu.ordinal,
            fill_bf16: function("fill_bf16")?,
            fill_u32: function("fill_u32")?,
            check_u32: function("check_u32")?,
            check_const_u32: function("check_const_u32")?,
            count_nonfinite: function("count_nonfinite")?,
            add_one: function("add_one")?,
            add_rmsnorm: function("add_rmsnorm")?,
            mla_prep: function("mla_prep")?,
            mla_decode_mma_prefetch: function("mla_decode_mma_prefetch")?,
            mla_decode_mma: function("mla_decode_mma")?,
            mla_decode_simple: function("mla_decode_simple")?,
            mla_combine: function("mla_combine")?,
            router_topk: function("router_topk")?,
            moe_gather: function("moe_gather")?,
            moe_combine: function("moe_combine")?,
            silu_mul: function("silu_mul")?,
            compare_bf16: function("compare_bf16")?,
            expert_gemm: TILES
                .iter()
                .map(|t| {
                    Ok((
                        function(&t.kernel_name(false))?,
                        function(&t.kernel_name(true))?,
                    ))
                })
                .collect::<Result<_, ProbeError>>()?,
            sm_count: gpu.sm_count as u32,
        };
        for f in [
            kernels.mla_decode_mma_prefetch,
            kernels.mla_decode_mma,
            kernels.mla_decode_simple,
        ] {
            // SAFETY: f is a loaded function of the bound context.
            check(gpu.ordinal, "cuFuncSetAttribute", unsafe {
                sys::cuFuncSetAttribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    MLA_SMEM_BYTES as i32,
                )
            })?;
        }
        for (tile, &(plain, fused)) in TILES.iter().zip(&kernels.expert_gemm) {
            for f in [plain, fused] {
                // SAFETY: f is a loaded function of the bound context. The carveout asks for all of
                // L1 as shared memory so two pipelined blocks fit on one SM.
                unsafe {
                    check(gpu.ordinal, "cuFuncSetAttribute", sys::cuFuncSetAttribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        tile.smem_bytes() as i32,
                    ))?;
                    check(gpu.ordinal, "cuFuncSetAttribute", sys::cuFuncSetAttribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                        100,
                    ))?;
                }
            }
        }
        Ok(kernels)
    }

    /// Launches `f`; `args` point at values whose types match the kernel's parameters exactly.
    pub(super) fn launch(
        &self,
        f: sys::CUfunction,
        stream: &Stream,
        grid: (u32, u32, u32),
        block: u32,
        smem: u32,
        args: &mut [*mut c_void],
    ) -> Result<(), ProbeError> {
        // SAFETY: f belongs to the context the stream lives in; args match the kernel signature (each
        // call site below passes locals of the declared C types).
        check(self.gpu, "cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                f,
                grid.0,
                grid.1,
                grid.2,
                block,
                1,
                1,
                smem,
                stream.raw,
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }

    /// Grid size of a grid-stride kernel over `n` elements.
    fn stride_grid(&self, n: u64) -> u32 {
        n.div_ceil(256).clamp(1, u64::from(self.sm_count) * 8) as u32
    }

    /// Fills `n` bf16 values at `dst` with uniform values in `[-scale, scale)` drawn from `seed`.
    pub(super) fn fill_bf16(
        &self,
        stream: &Stream,
        dst: u64,
        n: u64,
        seed: u64,
        scale: f32,
    ) -> Result<(), ProbeError> {
        let (mut dst, mut n, mut seed, mut scale) = (dst, n, seed, scale);
        self.launch(
            self.fill_bf16,
            stream,
            (self.stride_grid(n), 1, 1),
            256,
            0,
            &mut [arg(&mut dst), arg(&mut n), arg(&mut seed), arg(&mut scale)],
        )
    }

    /// Fills `words` u32 at `dst` with the check pattern of `seed`.
    pub(super) fn fill_u32(
        &self,
        stream: &Stream,
        dst: u64,
        words: u64,
        seed: u64,
    ) -> Result<(), ProbeError> {
        let (mut dst, mut n, mut seed) = (dst, words, seed);
        self.launch(
            self.fill_u32,
            stream,
            (self.stride_grid(n), 1, 1),
            256,
            0,
            &mut [arg(&mut dst), arg(&mut n), arg(&mut seed)],
        )
    }

    /// Adds to `*wrong` the number of words at `src` that differ from the pattern of `seed` starting at
    /// pattern index `offset`.
    pub(super) fn check_u32(
        &self,
        stream: &Stream,
        src: u64,
        words: u64,
        seed: u64,
        offset: u64,
        wrong: u64,
    ) -> Result<(), ProbeError> {
        let (mut src, mut n, mut seed, mut offset, mut wrong) = (src, words, seed, offset, wrong);
        self.launch(
            self.check_u32,
            stream,
            (self.stride_grid(n), 1, 1),
            256,
            0,
            &mut [
                arg(&mut src),
                arg(&mut n),
                arg(&mut seed),
                arg(&mut offset),
                arg(&mut wrong),
            ],
        )
    }

    /// Adds to `*wrong` the number of words at `src` that differ from `value`.
    pub(super) fn check_const_u32(
        &self,
        stream: &Stream,
        src: u64,
        words: u64,
        value: u32,
        wrong: u64,
    ) -> Result<(), ProbeError> {
        let (mut src, mut n, mut value, mut wrong) = (src, words, value, wrong);
        self.launch(
            self.check_const_u32,
            stream,
            (self.stride_grid(n), 1, 1),
            256,
            0,
            &mut [arg(&mut src), arg(&mut n), arg(&mut value), arg(&mut wrong)],
        )
    }

    /// Adds to `*count` the number of non-finite bf16 values at `x`.
    pub(super) fn count_nonfinite(
        &self,
        stream: &Stream,
        x: u64,
        n: u64,
        count: u64,
    ) -> Result<(), ProbeError> {
        let (mut x, mut n, mut count) = (x, n, count);
        self.launch(
            self.count_nonfinite,
            stream,
            (self.stride_grid(n), 1, 1),
            256,
            0,
            &mut [arg(&mut x), arg(&mut n), arg(&mut count)],
        )
    }

    pub(super) fn add_one(&self, stream: &Stream, x: u64) -> Result<(), ProbeError> {
        let mut x = x;
        self.launch(self.add_one, stream, (1, 1, 1), 32, 0, &mut [arg(&mut x)])
    }

    /// `residual += add` (unless `add` is 0), `out = RMSNorm(residual) · weight`, for `tokens` rows.
    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel signature")]
    pub(super) fn add_rmsnorm(
        &self,
        stream: &Stream,
        add: u64,
        residual: u64,
        out: u64,
        weight: u64,
        tokens: usize,
        hidden: usize,
        eps: f32,
    ) -> Result<(), ProbeError> {
        let (mut add, mut residual, mut out, mut weight) = (add, residual, out, weight);
        let (mut hidden, mut eps) = (hidden as i32, eps);
        self.launch(
            self.add_rmsnorm,
            stream,
            (tokens as u32, 1, 1),
            256,
            0,
            &mut [
                arg(&mut add),
                arg(&mut residual),
                arg(&mut out),
                arg(&mut weight),
                arg(&mut hidden),
                arg(&mut eps),
            ],
        )
    }

    /// KV-cache append (RMSNorm + RoPE) and query RoPE for `tokens` tokens.
    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel signature")]
    pub(super) fn mla_prep(
        &self,
        stream: &Stream,
        q: u64,
        kva: u64,
        norm_w: u64,
        q_pe: u64,
        kv_cache: u64,
        seq_stride: i64,
        pos: i32,
        tok_step: i32,
        tokens: usize,
        heads: usize,
        nope: usize,
        eps: f32,
    ) -> Result<(), ProbeError> {
        let (mut q, mut kva, mut norm_w, mut q_pe, mut kv_cache) = (q, kva, norm_w, q_pe, kv_cache);
        let (mut seq_stride, mut pos, mut tok_step) = (seq_stride, pos, tok_step);
        let (mut heads, mut nope, mut eps) = (heads as i32, nope as i32, eps);
        self.launch(
            self.mla_prep,
            stream,
            (tokens as u32, 1, 1),
            128,
            0,
            &mut [
                arg(&mut q),
                arg(&mut kva),
                arg(&mut norm_w),
                arg(&mut q_pe),
                arg(&mut kv_cache),
                arg(&mut seq_stride),
                arg(&mut pos),
                arg(&mut tok_step),
                arg(&mut heads),
                arg(&mut nope),
                arg(&mut eps),
            ],
        )
    }

    /// The split MLA decode kernel over `queries` queries (see `kernels.cu`).
    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel signature")]
    pub(super) fn mla_decode(
        &self,
        variant: MlaVariant,
        stream: &Stream,
        q_lat: u64,
        q_pe: u64,
        kv: u64,
        kv_seq_stride: i64,
        len_base: i32,
        len_step: i32,
        split: MlaSplit,
        queries: usize,
        heads: usize,
        scale: f32,
        part_o: u64,
        part_ml: u64,
    ) -> Result<(), ProbeError> {
        let f = match variant {
            MlaVariant::MmaPrefetch => self.mla_decode_mma_prefetch,
            MlaVariant::Mma => self.mla_decode_mma,
            MlaVariant::Simple => self.mla_decode_simple,
        };
        let (mut q_lat, mut q_pe, mut kv, mut kv_seq_stride) = (q_lat, q_pe, kv, kv_seq_stride);
        let (mut len_base, mut len_step) = (len_base, len_step);
        let (mut chunk, mut splits, mut heads_i, mut scale) =
            (split.chunk as i32, split.splits as i32, heads as i32, scale);
        let (mut part_o, mut part_ml) = (part_o, part_ml);
        self.launch(
            f,
            stream,
            (split.splits as u32, queries as u32, (heads / 16) as u32),
            128,
            MLA_SMEM_BYTES,
            &mut [
                arg(&mut q_lat),
                arg(&mut q_pe),
                arg(&mut kv),
                arg(&mut kv_seq_stride),
                arg(&mut len_base),
                arg(&mut len_step),
                arg(&mut chunk),
                arg(&mut splits),
                arg(&mut heads_i),
                arg(&mut scale),
                arg(&mut part_o),
                arg(&mut part_ml),
            ],
        )
    }

    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel signature")]
    pub(super) fn mla_combine(
        &self,
        stream: &Stream,
        part_o: u64,
        part_ml: u64,
        out: u64,
        split: MlaSplit,
        queries: usize,
        heads: usize,
    ) -> Result<(), ProbeError> {
        let (mut part_o, mut part_ml, mut out) = (part_o, part_ml, out);
        let (mut splits, mut heads_i) = (split.splits as i32, heads as i32);
        self.launch(
            self.mla_combine,
            stream,
            ((queries * heads) as u32, 1, 1),
            128,
            0,
            &mut [
                arg(&mut part_o),
                arg(&mut part_ml),
                arg(&mut out),
                arg(&mut splits),
                arg(&mut heads_i),
            ],
        )
    }

    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel signature")]
    pub(super) fn router_topk(
        &self,
        stream: &Stream,
        logits: u64,
        tokens: usize,
        n_experts: usize,
        k: usize,
        topk_w: u64,
        topk_id: u64,
    ) -> Result<(), ProbeError> {
        let (mut logits, mut tokens_i, mut n_experts, mut k) =
            (logits, tokens as i32, n_experts as i32, k as i32);
        let (mut topk_w, mut topk_id) = (topk_w, topk_id);
        // 8 warps (tokens) per block.
        self.launch(
            self.router_topk,
            stream,
            (tokens.div_ceil(8) as u32, 1, 1),
            256,
            0,
            &mut [
                arg(&mut logits),
                arg(&mut tokens_i),
                arg(&mut n_experts),
                arg(&mut k),
                arg(&mut topk_w),
                arg(&mut topk_id),
            ],
        )
    }

    pub(super) fn moe_gather(
        &self,
        stream: &Stream,
        x: u64,
        gather: u64,
        xg: u64,
        rows: usize,
        hidden: usize,
    ) -> Result<(), ProbeError> {
        let (mut x, mut gather, mut xg, mut hidden) = (x, gather, xg, hidden as i32);
        self.launch(
            self.moe_gather,
            stream,
            (rows as u32, 1, 1),
            256,
            0,
            &mut [
                arg(&mut x),
                arg(&mut gather),
                arg(&mut xg),
                arg(&mut hidden),
            ],
        )
    }

    #[expect(clippy::too_many_arguments, reason = "mirrors the kernel signature")]
    pub(super) fn moe_combine(
        &self,
        stream: &Stream,
        y: u64,
        shared_y: u64,
        slots: u64,
        weights: u64,
        out: u64,
        tokens: usize,
        k: usize,
        hidden: usize,
    ) -> Result<(), ProbeError> {
        let (mut y, mut shared_y, mut slots, mut weights, mut out) =
            (y, shared_y, slots, weights, out);
        let (mut k, mut hidden) = (k as i32, hidden as i32);
        self.launch(
            self.moe_combine,
            stream,
            (tokens as u32, 1, 1),
            256,
            0,
            &mut [
                arg(&mut y),
                arg(&mut shared_y),
                arg(&mut slots),
                arg(&mut weights),
                arg(&mut out),
                arg(&mut k),
                arg(&mut hidden),
            ],
        )
    }

    /// `out[r, c] = silu(gu[r, c]) · gu[r, inter + c]` for `rows` rows.
    pub(super) fn silu_mul(
        &self,
        stream: &Stream,
        gu: u64,
        out: u64,
        rows: usize,
        inter: usize,
    ) -> Result<(), ProbeError> {
        let (mut gu, mut out, mut rows_u, mut inter_i) = (gu, out, rows as u64, inter as i32);
        let threads = if inter.is_multiple_of(8) {
            rows as u64 * (inter / 8) as u64
        } else {
            rows as u64 * inter as u64
        };
        self.launch(
            self.silu_mul,
            stream,
            (self.stride_grid(threads), 1, 1),
            256,
            0,
            &mut [
                arg(&mut gu),
                arg(&mut out),
                arg(&mut rows_u),
                arg(&mut inter_i),
            ],
        )
    }

    /// Adds `Σ (a − reference)²` and `Σ reference²` over `n` bf16 values to the two f64 at `sums`.
    pub(super) fn compare_bf16(
        &self,
        stream: &Stream,
        a: u64,
        reference: u64,
        n: usize,
        sums: u64,
    ) -> Result<(), ProbeError> {
        let (mut a, mut reference, mut n_u, mut sums) = (a, reference, n as u64, sums);
        self.launch(
            self.compare_bf16,
            stream,
            (self.stride_grid(n as u64), 1, 1),
            256,
            0,
            &mut [
                arg(&mut a),
                arg(&mut reference),
                arg(&mut n_u),
                arg(&mut sums),
            ],
        )
    }

    /// Launches the grouped expert GEMM with `tile` (see [`ExpertGemmArgs`]). The caller checked
    /// [`Tile::fits`] for the shape.
    pub(super) fn expert_gemm(
        &self,
        stream: &Stream,
        tile: Tile,
        fused: bool,
        args: &ExpertGemmArgs,
    ) -> Result<(), ProbeError> {
        let index = TILES
            .iter()
            .position(|t| *t == tile)
            .expect("tiles come from gemm_choice::TILES");
        let (plain, silu) = self.expert_gemm[index];
        let columns = if fused { args.n / 2 } else { args.n };
        let per_block = if fused { tile.rows / 2 } else { tile.rows };
        let blocks = args.m.div_ceil(tile.tokens) * (columns / per_block) * args.experts;
        let (mut w_ptrs, mut x, mut y) = (args.w_ptrs, args.x, args.y);
        let (mut m, mut n, mut k, mut ldy) =
            (args.m as i32, args.n as i32, args.k as i32, args.ldy as i32);
        let (mut x_stride, mut y_stride) = (args.x_stride as i64, args.y_stride as i64);
        self.launch(
            if fused { silu } else { plain },
            stream,
            (blocks as u32, 1, 1),
            tile.threads() as u32,
            tile.smem_bytes() as u32,
            &mut [
                arg(&mut w_ptrs),
                arg(&mut x),
                arg(&mut y),
                arg(&mut m),
                arg(&mut n),
                arg(&mut k),
                arg(&mut ldy),
                arg(&mut x_stride),
                arg(&mut y_stride),
            ],
        )
    }
}

fn arg<T>(value: &mut T) -> *mut c_void {
    (value as *mut T).cast::<c_void>()
}
