//! The Attention side of a DeepSeek-style MLA layer: input RMSNorm (+ residual add of the FFN result),
//! q and kv_a projections, KV-cache append with RMSNorm and RoPE, absorbed W_UK, the MLA decode kernel
//! (`kernels.cu`, flash-decoding splits + merge), absorbed W_UV, o_proj and the post-attention RMSNorm
//! whose output is what crosses the wire (afd-spec §3.2). Used by the `attention` probe and by the
//! Attention rank of `pipeline`.

use super::blas::{Blas, Mat};
use super::gpu::{Buffer, Gpu, Stream, download_raw};
use super::kernels::{Kernels, MlaVariant};
use super::timing::time_op;
use crate::assemble::{derived, point, table};
use crate::error::ProbeError;
use crate::model::{MlaShape, ModelShape};
use crate::reference;
use crate::shapes::{MlaSplit, mla_bytes, rotation};
use crate::spec::{AttentionSpec, Measured};

const BF16: usize = 2;
/// Bytes of one KV-cache row (latent 512 + rope 64, bf16).
pub(super) const KV_ROW_BYTES: usize = 576 * BF16;

/// Weights of one Attention layer.
pub(super) struct AttnLayer {
    in_norm: Buffer,
    /// `[heads·(nope+rope), hidden]`.
    w_q: Buffer,
    /// `[576, hidden]`.
    w_kva: Buffer,
    kv_norm: Buffer,
    /// `[heads, nope, 512]`.
    w_uk: Buffer,
    /// `[heads, 512, v]`.
    w_uv: Buffer,
    /// `[hidden, heads·v]`.
    w_o: Buffer,
    post_norm: Buffer,
}

/// Scratch of one batch (or ubatch) of tokens.
pub(super) struct AttnWorkspace {
    pub(super) tokens_cap: usize,
    pub(super) part_cap: usize,
    /// `[T, hidden]` residual stream.
    pub(super) residual: Buffer,
    x_norm: Buffer,
    q: Buffer,
    kva: Buffer,
    q_pe: Buffer,
    q_lat: Buffer,
    lat: Buffer,
    v: Buffer,
    o: Buffer,
    /// `[T, hidden]` post-attention RMSNorm output: what is sent to the FFN.
    pub(super) out: Buffer,
    part_o: Buffer,
    part_ml: Buffer,
}

/// Where a layer's KV rows are and how long each query's context is (see `mla_prep`/`mla_decode`).
#[derive(Clone, Copy, Debug)]
pub(super) struct KvView {
    pub(super) base: u64,
    /// Elements between consecutive queries' sequences (0: all queries share one sequence).
    pub(super) seq_stride: i64,
    /// Cache position of the first new token.
    pub(super) pos: i32,
    /// Position step between consecutive new tokens (1 for a prefill chunk, 0 for decode).
    pub(super) tok_step: i32,
    pub(super) len_base: i32,
    pub(super) len_step: i32,
    /// The longest context any query attends to.
    pub(super) max_len: usize,
}

impl KvView {
    /// Decode of `batch` sequences each holding `context` tokens (the newest written this step) in a
    /// buffer laid out `[batch, capacity, 576]`.
    pub(super) fn decode(base: u64, capacity: usize, context: usize) -> KvView {
        KvView {
            base,
            seq_stride: (capacity * 576) as i64,
            pos: context as i32 - 1,
            tok_step: 0,
            len_base: context as i32,
            len_step: 0,
            max_len: context,
        }
    }

    /// A prefill chunk of `tokens` tokens after `context` cached ones, one sequence, causal.
    pub(super) fn prefill(base: u64, context: usize, tokens: usize) -> KvView {
        KvView {
            base,
            seq_stride: 0,
            pos: context as i32,
            tok_step: 1,
            len_base: context as i32 + 1,
            len_step: 1,
            max_len: context + tokens,
        }
    }
}

/// Every Attention-side weight.
pub(super) struct AttnWeights {
    pub(super) layers: Vec<AttnLayer>,
}

impl AttnWeights {
    pub(super) fn new(
        gpu: &Gpu,
        kernels: &Kernels,
        stream: &Stream,
        shape: &ModelShape,
        mla: &MlaShape,
        seed: u64,
    ) -> Result<AttnWeights, ProbeError> {
        let h = shape.hidden_size;
        let heads = shape.num_heads;
        let qd = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
        let mut n = 0u64;
        let mut filled = |len: usize, fan_in: usize, what: &str| -> Result<Buffer, ProbeError> {
            let buffer = gpu.alloc(len * BF16, what)?;
            n += 1;
            kernels.fill_bf16(
                stream,
                buffer.ptr,
                len as u64,
                seed ^ (n << 32),
                (3.0 / fan_in as f32).sqrt(),
            )?;
            Ok(buffer)
        };
        let layers = (0..shape.num_layers)
            .map(|_| {
                Ok(AttnLayer {
                    in_norm: filled(h, 3, "input RMSNorm weight")?,
                    w_q: filled(heads * qd * h, h, "q_proj weights")?,
                    w_kva: filled(576 * h, h, "kv_a_proj weights")?,
                    kv_norm: filled(512, 3, "kv_a RMSNorm weight")?,
                    w_uk: filled(
                        heads * mla.qk_nope_head_dim * 512,
                        mla.qk_nope_head_dim,
                        "W_UK",
                    )?,
                    w_uv: filled(heads * 512 * mla.v_head_dim, 512, "W_UV")?,
                    w_o: filled(
                        h * heads * mla.v_head_dim,
                        heads * mla.v_head_dim,
                        "o_proj weights",
                    )?,
                    post_norm: filled(h, 3, "post-attention RMSNorm weight")?,
                })
            })
            .collect::<Result<_, ProbeError>>()?;
        stream.sync()?;
        Ok(AttnWeights { layers })
    }

    /// Weight bytes of one layer.
    pub(super) fn layer_bytes(shape: &ModelShape, mla: &MlaShape) -> usize {
        let (h, heads) = (shape.hidden_size, shape.num_heads);
        let qd = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
        BF16 * (heads * qd * h
            + 576 * h
            + heads * mla.qk_nope_head_dim * 512
            + heads * 512 * mla.v_head_dim
            + h * heads * mla.v_head_dim)
    }
}

impl AttnWorkspace {
    /// Scratch for up to `tokens_cap` tokens and `part_cap` (query × split) MLA partials.
    #[expect(
        clippy::too_many_arguments,
        reason = "handles, shapes and sizes of one workspace"
    )]
    pub(super) fn new(
        gpu: &Gpu,
        kernels: &Kernels,
        stream: &Stream,
        shape: &ModelShape,
        mla: &MlaShape,
        tokens_cap: usize,
        part_cap: usize,
        seed: u64,
    ) -> Result<AttnWorkspace, ProbeError> {
        let (h, heads) = (shape.hidden_size, shape.num_heads);
        let qd = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
        let t = tokens_cap.max(1);
        let p = part_cap.max(1);
        let ws = AttnWorkspace {
            tokens_cap: t,
            part_cap: p,
            residual: gpu.alloc(t * h * BF16, "residual")?,
            x_norm: gpu.alloc(t * h * BF16, "normed input")?,
            q: gpu.alloc(t * heads * qd * BF16, "queries")?,
            kva: gpu.alloc(t * 576 * BF16, "kv_a output")?,
            q_pe: gpu.alloc(t * heads * 64 * BF16, "query rope part")?,
            q_lat: gpu.alloc(t * heads * 512 * BF16, "absorbed queries")?,
            lat: gpu.alloc(t * heads * 512 * BF16, "latent attention output")?,
            v: gpu.alloc(t * heads * mla.v_head_dim * BF16, "attention values")?,
            o: gpu.alloc(t * h * BF16, "o_proj output")?,
            out: gpu.alloc(t * h * BF16, "post-attention output")?,
            part_o: gpu.alloc(p * heads * 512 * 4, "MLA partial outputs")?,
            part_ml: gpu.alloc(p * heads * 2 * 4, "MLA partial max/sum")?,
        };
        for (i, b) in [&ws.residual, &ws.q, &ws.q_pe, &ws.q_lat, &ws.lat]
            .into_iter()
            .enumerate()
        {
            kernels.fill_bf16(
                stream,
                b.ptr,
                (b.bytes / BF16) as u64,
                seed ^ ((i as u64 + 1) << 40),
                1.0,
            )?;
        }
        Ok(ws)
    }
}

/// Kernel launches of each Attention operation.
pub(super) const PROJ_KERNELS: usize = 8;
pub(super) const DECODE_KERNELS: usize = 2;

/// The Attention side's operations over borrowed handles.
pub(super) struct Attn<'a> {
    pub(super) shape: &'a ModelShape,
    pub(super) mla: MlaShape,
    pub(super) kernels: &'a Kernels,
    pub(super) blas: &'a Blas,
    pub(super) stream: &'a Stream,
    pub(super) weights: &'a AttnWeights,
    pub(super) variant: MlaVariant,
    /// Blocks the MLA decode launch aims for (3 per SM fit; twice that hides tails).
    pub(super) target_blocks: usize,
}

impl Attn<'_> {
    fn heads(&self) -> usize {
        self.shape.num_heads
    }

    fn scale(&self) -> f32 {
        1.0 / ((self.mla.qk_nope_head_dim + self.mla.qk_rope_head_dim) as f32).sqrt()
    }

    /// The split an MLA decode over `queries` queries and `kv` uses.
    pub(super) fn split(&self, queries: usize, kv: &KvView) -> MlaSplit {
        MlaSplit::choose(queries, self.heads() / 16, kv.max_len, self.target_blocks)
    }

    /// Input RMSNorm (adding `add`, the FFN result of the previous layer, unless 0), q and kv_a
    /// projections, KV append and RoPE, absorbed W_UK.
    pub(super) fn proj_pre(
        &self,
        ws: &AttnWorkspace,
        layer: usize,
        add: u64,
        tokens: usize,
        kv: &KvView,
    ) -> Result<(), ProbeError> {
        assert!(
            tokens <= ws.tokens_cap,
            "{tokens} tokens exceed the workspace's {}",
            ws.tokens_cap
        );
        let w = &self.weights.layers[layer];
        let (h, heads) = (self.shape.hidden_size, self.heads());
        let nope = self.mla.qk_nope_head_dim;
        let qd = nope + self.mla.qk_rope_head_dim;
        let eps = self.shape.rms_norm_eps as f32;
        self.kernels.add_rmsnorm(
            self.stream,
            add,
            ws.residual.ptr,
            ws.x_norm.ptr,
            w.in_norm.ptr,
            tokens,
            h,
            eps,
        )?;
        self.blas.linear(
            Mat::new(ws.x_norm.ptr, h),
            Mat::new(w.w_q.ptr, h),
            Mat::new(ws.q.ptr, heads * qd),
            tokens,
            h,
            heads * qd,
            false,
        )?;
        self.blas.linear(
            Mat::new(ws.x_norm.ptr, h),
            Mat::new(w.w_kva.ptr, h),
            Mat::new(ws.kva.ptr, 576),
            tokens,
            h,
            576,
            false,
        )?;
        self.kernels.mla_prep(
            self.stream,
            ws.q.ptr,
            ws.kva.ptr,
            w.kv_norm.ptr,
            ws.q_pe.ptr,
            kv.base,
            kv.seq_stride,
            kv.pos,
            kv.tok_step,
            tokens,
            heads,
            nope,
            eps,
        )?;
        // q_lat[t, h, :] = q_nope[t, h, :] · W_UK[h] (column-major: C[512, T] = A[512, nope] · B[nope, T]).
        self.blas.bmm_col_major(
            w.w_uk.ptr,
            512,
            nope * 512,
            ws.q.ptr,
            heads * qd,
            qd,
            ws.q_lat.ptr,
            heads * 512,
            512,
            512,
            tokens,
            nope,
            heads,
        )
    }

    /// MLA decode + split merge into the latent output.
    pub(super) fn decode(
        &self,
        ws: &AttnWorkspace,
        tokens: usize,
        kv: &KvView,
        split: MlaSplit,
    ) -> Result<(), ProbeError> {
        assert!(
            tokens * split.splits <= ws.part_cap,
            "MLA partials overflow the workspace"
        );
        self.kernels.mla_decode(
            self.variant,
            self.stream,
            ws.q_lat.ptr,
            ws.q_pe.ptr,
            kv.base,
            kv.seq_stride,
            kv.len_base,
            kv.len_step,
            split,
            tokens,
            self.heads(),
            self.scale(),
            ws.part_o.ptr,
            ws.part_ml.ptr,
        )?;
        self.kernels.mla_combine(
            self.stream,
            ws.part_o.ptr,
            ws.part_ml.ptr,
            ws.lat.ptr,
            split,
            tokens,
            self.heads(),
        )
    }

    /// Absorbed W_UV, o_proj, residual add and post-attention RMSNorm into `ws.out`.
    pub(super) fn proj_post(
        &self,
        ws: &AttnWorkspace,
        layer: usize,
        tokens: usize,
    ) -> Result<(), ProbeError> {
        let w = &self.weights.layers[layer];
        let (h, heads, vd) = (self.shape.hidden_size, self.heads(), self.mla.v_head_dim);
        // v[t, h, :] = lat[t, h, :] · W_UV[h] (column-major: C[v, T] = A[v, 512] · B[512, T]).
        self.blas.bmm_col_major(
            w.w_uv.ptr,
            vd,
            512 * vd,
            ws.lat.ptr,
            heads * 512,
            512,
            ws.v.ptr,
            heads * vd,
            vd,
            vd,
            tokens,
            512,
            heads,
        )?;
        self.blas.linear(
            Mat::new(ws.v.ptr, heads * vd),
            Mat::new(w.w_o.ptr, heads * vd),
            Mat::new(ws.o.ptr, h),
            tokens,
            heads * vd,
            h,
            false,
        )?;
        self.kernels.add_rmsnorm(
            self.stream,
            ws.o.ptr,
            ws.residual.ptr,
            ws.out.ptr,
            w.post_norm.ptr,
            tokens,
            h,
            self.shape.rms_norm_eps as f32,
        )
    }

    /// One whole layer.
    pub(super) fn layer(
        &self,
        ws: &AttnWorkspace,
        layer: usize,
        add: u64,
        tokens: usize,
        kv: &KvView,
    ) -> Result<(), ProbeError> {
        let split = self.split(tokens, kv);
        self.proj_pre(ws, layer, add, tokens, kv)?;
        self.decode(ws, tokens, kv, split)?;
        self.proj_post(ws, layer, tokens)
    }

    /// Compares the latent output of the last `decode` for the first `queries` queries with the CPU;
    /// returns the relative L2 error.
    pub(super) fn check_decode(
        &self,
        ws: &AttnWorkspace,
        kv: &KvView,
        queries: usize,
    ) -> Result<f64, ProbeError> {
        self.stream.sync()?;
        let gpu = self.stream.gpu;
        let heads = self.heads();
        let q_lat: Vec<u16> = download_raw(gpu, ws.q_lat.ptr, queries * heads * 512)?;
        let q_pe: Vec<u16> = download_raw(gpu, ws.q_pe.ptr, queries * heads * 64)?;
        let got: Vec<u16> = download_raw(gpu, ws.lat.ptr, queries * heads * 512)?;
        let mut want = Vec::with_capacity(queries * heads * 512);
        for query in 0..queries {
            let len = (kv.len_base + query as i32 * kv.len_step) as usize;
            let base = kv.base + (query as i64 * kv.seq_stride) as u64 * BF16 as u64;
            let rows: Vec<u16> = download_raw(gpu, base, len * 576)?;
            want.extend(reference::mla_decode(
                &q_lat[query * heads * 512..(query + 1) * heads * 512],
                &q_pe[query * heads * 64..(query + 1) * heads * 64],
                &rows,
                heads,
                len,
                f64::from(self.scale()),
            ));
        }
        let got: Vec<f32> = got.into_iter().map(reference::bf16_to_f32).collect();
        Ok(reference::relative_error(&got, &want))
    }
}

/// Picks the MLA decode kernel: the first of prefetching tensor-core, plain tensor-core and CUDA-core
/// that matches the CPU reference on a small case with several splits and a ragged tail.
pub(super) fn select_variant(
    gpu: &Gpu,
    kernels: &Kernels,
    blas: &Blas,
    stream: &Stream,
    shape: &ModelShape,
    mla: &MlaShape,
    weights: &AttnWeights,
) -> Result<(MlaVariant, f64), ProbeError> {
    let (queries, capacity, context) = (3usize, 320usize, 300usize);
    let ws = AttnWorkspace::new(
        gpu,
        kernels,
        stream,
        shape,
        mla,
        queries,
        queries * 8,
        0x5e1f,
    )?;
    let cache = gpu.alloc(queries * capacity * KV_ROW_BYTES, "MLA self-test cache")?;
    kernels.fill_bf16(
        stream,
        cache.ptr,
        (queries * capacity * 576) as u64,
        0x5e20,
        1.0,
    )?;
    let kv = KvView::decode(cache.ptr, capacity, context);
    let mut errors = Vec::new();
    for variant in [MlaVariant::MmaPrefetch, MlaVariant::Mma, MlaVariant::Simple] {
        let attn = Attn {
            shape,
            mla: *mla,
            kernels,
            blas,
            stream,
            weights,
            variant,
            target_blocks: 6 * gpu.sm_count,
        };
        attn.decode(&ws, queries, &kv, MlaSplit::with_chunk(context, 64))?;
        let error = attn.check_decode(&ws, &kv, queries)?;
        if error < 2e-2 {
            return Ok((variant, error));
        }
        errors.push(format!("{}: relative error {error:.3e}", variant.name()));
    }
    Err(ProbeError::DataCheck {
        what: "MLA decode self-test".to_owned(),
        detail: errors.join("; "),
    })
}

/// The `attention` probe.
pub(super) fn run(spec: &AttentionSpec, progress: &dyn Fn(&str)) -> Result<Measured, ProbeError> {
    let shape = &spec.model;
    let mla = shape.require_mla()?;
    let gpu = Gpu::open(spec.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let blas = Blas::new(&gpu, &stream)?;
    let weights = AttnWeights::new(&gpu, &kernels, &stream, shape, &mla, 0xa77e)?;
    let (variant, self_test_error) =
        select_variant(&gpu, &kernels, &blas, &stream, shape, &mla, &weights)?;
    let heads = shape.num_heads;
    let target_blocks = 6 * gpu.sm_count;
    let n_layers = shape.num_layers;

    // Size the workspace and the KV pool for every point.
    let mut tokens_cap = 1usize;
    let mut part_cap = 1usize;
    let mut pool_bytes = 0usize;
    let kv_budget = {
        let (free, _) = gpu.memory()?;
        free.saturating_sub(16 << 30)
    };
    let kv_copies = |bytes: usize| rotation(bytes, gpu.l2_bytes, 3).max(2);
    for &t in &spec.tokens {
        tokens_cap = tokens_cap.max(t as usize);
    }
    for &b in &spec.batches {
        for &c in &spec.contexts {
            let (b, c) = (b as usize, c as usize);
            tokens_cap = tokens_cap.max(b);
            let split = MlaSplit::choose(b, heads / 16, c, target_blocks);
            part_cap = part_cap.max(b * split.splits);
            let bytes = b * c * KV_ROW_BYTES;
            pool_bytes = pool_bytes.max((kv_copies(bytes) * bytes).min(kv_budget.max(bytes)));
        }
    }
    for &t in &spec.prefill_tokens {
        for &c in &spec.prefill_contexts {
            let (t, c) = (t as usize, c as usize);
            tokens_cap = tokens_cap.max(t);
            let split = MlaSplit::choose(t, heads / 16, c + t, target_blocks);
            part_cap = part_cap.max(t * split.splits);
            let bytes = (c + t) * KV_ROW_BYTES;
            pool_bytes =
                pool_bytes.max((kv_copies(bytes).min(n_layers) * bytes).min(kv_budget.max(bytes)));
        }
    }
    pool_bytes = pool_bytes.max(tokens_cap * KV_ROW_BYTES);
    let ws = AttnWorkspace::new(
        &gpu, &kernels, &stream, shape, &mla, tokens_cap, part_cap, 0xa77f,
    )?;
    let pool = gpu.alloc(pool_bytes, "KV-cache pool")?;
    kernels.fill_bf16(&stream, pool.ptr, (pool_bytes / BF16) as u64, 0xcafe, 1.0)?;
    stream.sync()?;
    let attn = Attn {
        shape,
        mla,
        kernels: &kernels,
        blas: &blas,
        stream: &stream,
        weights: &weights,
        variant,
        target_blocks,
    };
    let timing = spec.timing;
    let model = shape.name.clone();
    let variant_pairs = [("model", model.clone())];
    let mut measured = Measured::default();
    let layer_bytes = AttnWeights::layer_bytes(shape, &mla);

    // Projections: rotate over every layer's weights; the new KV rows go to the start of the pool.
    let mut points = Vec::new();
    for &t in &spec.tokens {
        let t = t as usize;
        progress(&format!("attention.proj, {t} tokens"));
        let kv = KvView::decode(pool.ptr, 1, 1);
        let samples = time_op(&gpu, &stream, &timing, 1, |rep| {
            attn.proj_pre(&ws, rep % n_layers, 0, t, &kv)?;
            attn.proj_post(&ws, rep % n_layers, t)
        })?;
        let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
        let mut d = samples.derived(PROJ_KERNELS);
        d.push(("weight_bytes", layer_bytes as f64));
        d.push(("gbps", layer_bytes as f64 / (median * 1e3)));
        points.push(point(vec![t as f64], samples.graph_us, derived(&d))?);
    }
    if !points.is_empty() {
        measured
            .tables
            .push(table("attention.proj", &variant_pairs, &["tokens"], points));
    }

    // MLA decode over batch × context, rotating distinct KV buffers so L2 cannot hold them.
    let mut points = Vec::new();
    let mut checked = false;
    let mut check_error = 0.0;
    for &c in &spec.contexts {
        let c = c as usize;
        progress(&format!("attention.mla_decode, context {c}"));
        for &b in &spec.batches {
            let b = b as usize;
            let bytes = b * c * KV_ROW_BYTES;
            let copies = (pool_bytes / bytes).clamp(1, kv_copies(bytes));
            let views: Vec<KvView> = (0..copies)
                .map(|i| KvView::decode(pool.at(i * bytes), c, c))
                .collect();
            let split = attn.split(b, &views[0]);
            let samples = time_op(&gpu, &stream, &timing, copies, |rep| {
                attn.decode(&ws, b, &views[rep % copies], split)
            })?;
            if !checked {
                let queries = b.min(2);
                attn.decode(&ws, b, &views[0], split)?;
                check_error = attn.check_decode(&ws, &views[0], queries)?;
                if check_error > 2e-2 {
                    return Err(ProbeError::DataCheck {
                        what: format!("attention.mla_decode (batch {b}, context {c})"),
                        detail: format!(
                            "differs from the CPU reference by {check_error:.3e} (relative L2)"
                        ),
                    });
                }
                checked = true;
            }
            let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
            let moved = mla_bytes(b, heads, c);
            let mut d = samples.derived(DECODE_KERNELS);
            d.push(("bytes", moved as f64));
            d.push(("gbps", moved as f64 / (median * 1e3)));
            d.push(("splits", split.splits as f64));
            d.push(("kv_copies", copies as f64));
            points.push(point(
                vec![b as f64, c as f64],
                samples.graph_us,
                derived(&d),
            )?);
        }
    }
    if !points.is_empty() {
        measured.tables.push(table(
            "attention.mla_decode",
            &variant_pairs,
            &["batch", "context"],
            points,
        ));
    }

    // Prefill chunks: a whole layer over `tokens` new tokens of one sequence after `context` cached.
    let mut points = Vec::new();
    for &c in &spec.prefill_contexts {
        for &t in &spec.prefill_tokens {
            let (c, t) = (c as usize, t as usize);
            progress(&format!("attention.prefill, {t} tokens after {c}"));
            let bytes = (c + t) * KV_ROW_BYTES;
            let copies = (pool_bytes / bytes).clamp(1, n_layers);
            let views: Vec<KvView> = (0..copies)
                .map(|i| KvView::prefill(pool.at(i * bytes), c, t))
                .collect();
            let samples = time_op(&gpu, &stream, &timing, copies, |rep| {
                attn.layer(&ws, rep % n_layers, 0, t, &views[rep % copies])
            })?;
            let d = samples.derived(PROJ_KERNELS + DECODE_KERNELS);
            points.push(point(
                vec![t as f64, c as f64],
                samples.graph_us,
                derived(&d),
            )?);
        }
    }
    if !points.is_empty() {
        measured.tables.push(table(
            "attention.prefill",
            &variant_pairs,
            &["tokens", "context"],
            points,
        ));
    }

    // Whole-layer output must be finite.
    let count = gpu.alloc(8, "non-finite counter")?;
    super::gpu::zero_async(&stream, count.ptr, 8)?;
    let kv = KvView::decode(pool.ptr, 1, 1);
    attn.layer(&ws, 0, 0, 1, &kv)?;
    kernels.count_nonfinite(&stream, ws.out.ptr, shape.hidden_size as u64, count.ptr)?;
    stream.sync()?;
    let mut bad = [0u64];
    count.download(&mut bad)?;
    if bad[0] != 0 {
        return Err(ProbeError::DataCheck {
            what: "attention layer".to_owned(),
            detail: format!("{} non-finite outputs", bad[0]),
        });
    }
    measured.notes.insert(
        "attention".to_owned(),
        format!(
            "GPU {} ({}), model {model}: {} layers of distinct weights rotated per repetition; MLA decode kernel {} \
             (self-test error {self_test_error:.2e}, post-timing check {check_error:.2e}); KV buffers rotated so \
             L2 cannot hold them; prefill uses the absorbed decode kernel with causal lengths over one sequence; \
             samples are per-operation times of graph replays; {} warm-ups, {} samples per point",
            gpu.ordinal,
            gpu.name,
            n_layers,
            variant.name(),
            timing.warmup,
            timing.iters
        ),
    );
    measured
        .notes
        .insert("mla_kernel".to_owned(), variant.name().to_owned());
    Ok(measured)
}
