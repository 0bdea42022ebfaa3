//! The FFN side of a layer: router GEMM + top-k, token gather, routed experts (gate/up GEMMs with
//! SiLU·mul, then down GEMMs, over the active experts, each run the way `expert_gemm` chose for its
//! shape), shared experts, weighted combine; and the dense MLP of the leading layers. Used by the `moe`
//! probe and by the FFN rank of `pipeline`, so both run exactly the same kernels.

use std::rc::Rc;

use super::blas::{Blas, Mat};
use super::expert_gemm::{Activations, Engines, ExpertGemms, Operands, StageRun};
use super::gpu::{Buffer, Gpu, Stream};
use super::kernels::Kernels;
use super::timing::time_op;
use crate::assemble::{derived, point, table};
use crate::error::ProbeError;
use crate::gemm_choice::{Family, PathSet, StageShape};
use crate::model::ModelShape;
use crate::reference;
use crate::routing::{Routing, RoutingPlan, draw};
use crate::shapes::rotation;
use crate::spec::{Measured, MoeSpec};

const BF16: usize = 2;

/// Weights of one MoE layer (bf16, row-major `[out, in]` as in a PyTorch `Linear`).
pub(super) struct MoeLayerWeights {
    /// `[experts, hidden]`.
    router: Buffer,
    /// `[experts, 2·inter, hidden]`: gate rows then up rows per expert.
    gate_up: Buffer,
    /// `[experts, hidden, inter]`.
    down: Buffer,
    /// `[2·shared_inter, hidden]` and `[hidden, shared_inter]`, when the model has shared experts.
    shared: Option<(Buffer, Buffer)>,
}

/// Weights of one dense MLP.
pub(super) struct DenseWeights {
    gate_up: Buffer,
    down: Buffer,
}

/// Every weight the FFN side holds.
pub(super) struct FfnWeights {
    pub(super) layers: Vec<MoeLayerWeights>,
    pub(super) dense: Vec<DenseWeights>,
}

/// Scratch buffers sized for the largest batch and routed-row count.
pub(super) struct FfnWorkspace {
    pub(super) tokens_cap: usize,
    pub(super) rows_cap: usize,
    logits: Buffer,
    topk_w: Buffer,
    topk_id: Buffer,
    xg: Buffer,
    gu: Buffer,
    act: Buffer,
    y: Buffer,
    act_ref: Buffer,
    y_ref: Buffer,
    s_gu: Buffer,
    s_act: Buffer,
    s_y: Buffer,
    d_gu: Buffer,
    d_act: Buffer,
}

/// A routing plan of one layer, uploaded: gather and slot indices and the GEMM pointer arrays.
pub(super) struct DevicePlan {
    pub(super) plan: RoutingPlan,
    pub(super) layer: usize,
    gather: Buffer,
    slots: Buffer,
    /// `[w; A], [x; A], [y; A]` device pointers of the gate/up GEMM, then the same for down.
    ptrs: Buffer,
    strided: bool,
    /// How the gate/up and down stages run (set by [`Ffn::plan`]; `None` for plans that only gather
    /// and combine).
    runs: Option<[Rc<StageRun>; 2]>,
}

fn scale_for(fan_in: usize) -> f32 {
    // Uniform(-a, a) with a = sqrt(3 / fan_in) keeps unit variance through a layer.
    (3.0 / fan_in as f32).sqrt()
}

impl FfnWeights {
    /// Allocates and fills `moe_layers` MoE layers and `dense_copies` dense MLPs with random weights.
    pub(super) fn new(
        gpu: &Gpu,
        kernels: &Kernels,
        stream: &Stream,
        shape: &ModelShape,
        moe_layers: usize,
        dense_copies: usize,
        seed: u64,
    ) -> Result<FfnWeights, ProbeError> {
        let (h, e, i) = (
            shape.hidden_size,
            shape.n_routed_experts,
            shape.moe_intermediate_size,
        );
        let mut n = 0u64;
        let mut filled = |len: usize, fan_in: usize, what: &str| -> Result<Buffer, ProbeError> {
            let buffer = gpu.alloc(len * BF16, what)?;
            n += 1;
            kernels.fill_bf16(
                stream,
                buffer.ptr,
                len as u64,
                seed ^ (n << 32),
                scale_for(fan_in),
            )?;
            Ok(buffer)
        };
        let mut layers = Vec::with_capacity(moe_layers);
        for _ in 0..moe_layers {
            let shared = if shape.shared_intermediate_size > 0 {
                let si = shape.shared_intermediate_size;
                Some((
                    filled(2 * si * h, h, "shared-expert gate/up weights")?,
                    filled(h * si, si, "shared-expert down weights")?,
                ))
            } else {
                None
            };
            layers.push(MoeLayerWeights {
                router: filled(e * h, h, "router weights")?,
                gate_up: filled(e * 2 * i * h, h, "expert gate/up weights")?,
                down: filled(e * h * i, i, "expert down weights")?,
                shared,
            });
        }
        let mut dense = Vec::with_capacity(dense_copies);
        for _ in 0..dense_copies {
            let di = shape.dense_intermediate_size;
            dense.push(DenseWeights {
                gate_up: filled(2 * di * h, h, "dense MLP gate/up weights")?,
                down: filled(h * di, di, "dense MLP down weights")?,
            });
        }
        stream.sync()?;
        Ok(FfnWeights { layers, dense })
    }
}

impl FfnWorkspace {
    /// Buffers for `tokens_cap` tokens and `rows_cap` routed rows; the routed-expert inputs are filled
    /// with random data (GEMM paths are chosen on them before any token is gathered).
    pub(super) fn new(
        gpu: &Gpu,
        kernels: &Kernels,
        stream: &Stream,
        shape: &ModelShape,
        tokens_cap: usize,
        rows_cap: usize,
        seed: u64,
    ) -> Result<FfnWorkspace, ProbeError> {
        let (h, e, k) = (
            shape.hidden_size,
            shape.n_routed_experts,
            shape.experts_per_token,
        );
        let (i, si, di) = (
            shape.moe_intermediate_size,
            shape.shared_intermediate_size.max(1),
            shape.dense_intermediate_size,
        );
        let t = tokens_cap.max(1);
        let r = rows_cap.max(1);
        let ws = FfnWorkspace {
            tokens_cap: t,
            rows_cap: r,
            logits: gpu.alloc(t * e * 4, "router logits")?,
            topk_w: gpu.alloc(t * k * 4, "top-k weights")?,
            topk_id: gpu.alloc(t * k * 4, "top-k ids")?,
            xg: gpu.alloc(r * h * BF16, "gathered tokens")?,
            gu: gpu.alloc(r * 2 * i * BF16, "expert gate/up output")?,
            act: gpu.alloc(r * i * BF16, "expert activations")?,
            y: gpu.alloc(r * h * BF16, "expert outputs")?,
            act_ref: gpu.alloc(r * i * BF16, "expert activations (GEMM choice reference)")?,
            y_ref: gpu.alloc(r * h * BF16, "expert outputs (GEMM choice reference)")?,
            s_gu: gpu.alloc(t * 2 * si * BF16, "shared gate/up output")?,
            s_act: gpu.alloc(t * si * BF16, "shared activations")?,
            s_y: gpu.alloc(t * h * BF16, "shared output")?,
            d_gu: gpu.alloc(t * 2 * di * BF16, "dense gate/up output")?,
            d_act: gpu.alloc(t * di * BF16, "dense activations")?,
        };
        kernels.fill_bf16(stream, ws.xg.ptr, (r * h) as u64, seed, 1.0)?;
        kernels.fill_bf16(stream, ws.act.ptr, (r * i) as u64, seed ^ 1, 1.0)?;
        stream.sync()?;
        Ok(ws)
    }

    fn activations(&self) -> Activations {
        Activations {
            xg: self.xg.ptr,
            gu: self.gu.ptr,
            act: self.act.ptr,
            y: self.y.ptr,
            act_ref: self.act_ref.ptr,
            y_ref: self.y_ref.ptr,
        }
    }
}

/// `[w; A], [x; A], [y; A]` device pointers of the gate/up GEMM, then the same for down, for `plan`
/// over `layer`'s weights.
fn pointer_table(
    shape: &ModelShape,
    weights: &FfnWeights,
    ws: &FfnWorkspace,
    layer: usize,
    plan: &RoutingPlan,
) -> Vec<u64> {
    let (h, i) = (shape.hidden_size, shape.moe_intermediate_size);
    let m = plan.max_tokens_per_expert;
    let a = plan.active.len();
    let w = &weights.layers[layer];
    let mut ptrs: Vec<u64> = Vec::with_capacity(6 * a);
    ptrs.extend(
        plan.active
            .iter()
            .map(|&e| w.gate_up.at(e as usize * 2 * i * h * BF16)),
    );
    ptrs.extend((0..a).map(|x| ws.xg.at(x * m * h * BF16)));
    ptrs.extend((0..a).map(|x| ws.gu.at(x * m * 2 * i * BF16)));
    ptrs.extend(
        plan.active
            .iter()
            .map(|&e| w.down.at(e as usize * h * i * BF16)),
    );
    ptrs.extend((0..a).map(|x| ws.act.at(x * m * i * BF16)));
    ptrs.extend((0..a).map(|x| ws.y.at(x * m * h * BF16)));
    ptrs
}

impl DevicePlan {
    /// Uploads `plan`'s gather and slot indices and pointer arrays (no GEMM choice: see [`Ffn::plan`]).
    pub(super) fn new(
        gpu: &Gpu,
        shape: &ModelShape,
        weights: &FfnWeights,
        ws: &FfnWorkspace,
        layer: usize,
        plan: RoutingPlan,
    ) -> Result<DevicePlan, ProbeError> {
        assert!(
            plan.rows() <= ws.rows_cap,
            "plan needs {} rows, workspace has {}",
            plan.rows(),
            ws.rows_cap
        );
        let ptrs = pointer_table(shape, weights, ws, layer, &plan);
        let gather = gpu.alloc(plan.gather.len() * 4, "gather indices")?;
        gather.upload(&plan.gather)?;
        let slots = gpu.alloc(plan.slots.len() * 4, "combine slots")?;
        slots.upload(&plan.slots)?;
        let ptr_buf = gpu.alloc(ptrs.len() * 8, "GEMM pointer arrays")?;
        ptr_buf.upload(&ptrs)?;
        Ok(DevicePlan {
            strided: plan.is_all_experts(shape.n_routed_experts),
            plan,
            layer,
            gather,
            slots,
            ptrs: ptr_buf,
            runs: None,
        })
    }

    fn operands(&self, weights: &FfnWeights) -> Operands {
        let w = &weights.layers[self.layer];
        Operands {
            ptrs: self.ptrs.ptr,
            gate_up: w.gate_up.ptr,
            down: w.down.ptr,
        }
    }

    fn stage_runs(&self) -> &[Rc<StageRun>; 2] {
        self.runs
            .as_ref()
            .expect("routed experts run only on plans made by Ffn::plan")
    }

    /// Launches of the routed experts (a cuBLAS or cuBLASLt call counts once).
    pub(super) fn routed_launches(&self) -> usize {
        self.stage_runs().iter().map(|r| r.launches()).sum()
    }

    /// How the routed experts run, for `derived` columns: family codes of both stages, whether SiLU·mul
    /// is fused, the chosen stages' times when chosen and each family's best time then (where it had a
    /// correct candidate), and the activation bytes the paths move.
    fn path_derived(&self) -> Vec<(&'static str, f64)> {
        let [gate_up, down] = self.stage_runs();
        let mut by_family = Vec::new();
        for (run, names) in [
            (
                gate_up,
                ["gate_up_us_cublas", "gate_up_us_cublaslt", "gate_up_us_own"],
            ),
            (down, ["down_us_cublas", "down_us_cublaslt", "down_us_own"]),
        ] {
            for (family, name) in [Family::Cublas, Family::CublasLt, Family::Own]
                .into_iter()
                .zip(names)
            {
                let us = run.best_of(family);
                if us.is_finite() {
                    by_family.push((name, us));
                }
            }
        }
        let mut pairs = vec![
            ("gate_up_path", gate_up.path.family().code()),
            ("down_path", down.path.family().code()),
            ("fused_silu", f64::from(u8::from(gate_up.path.is_fused()))),
            ("gate_up_us", gate_up.us),
            ("down_us", down.us),
            (
                "activation_bytes",
                (gate_up.shape.activation_bytes(gate_up.path.is_fused())
                    + down.shape.activation_bytes(false)) as f64,
            ),
        ];
        pairs.extend(by_family);
        pairs
    }
}

/// Kernel launches (cuBLAS calls counted once) of each FFN operation but the routed experts, whose
/// count depends on the chosen paths ([`DevicePlan::routed_launches`]).
pub(super) fn kernels_of(shape: &ModelShape) -> FfnKernelCounts {
    let shared = if shape.shared_intermediate_size > 0 {
        3
    } else {
        0
    };
    FfnKernelCounts {
        router: 2,
        dispatch: 2,
        shared,
        dense: 3,
    }
}

pub(super) struct FfnKernelCounts {
    pub(super) router: usize,
    pub(super) dispatch: usize,
    pub(super) shared: usize,
    pub(super) dense: usize,
}

impl FfnKernelCounts {
    /// A whole MoE layer: router, gather, routed experts, shared experts, combine.
    pub(super) fn layer(&self, routed: usize) -> usize {
        self.router + 1 + routed + self.shared + 1
    }
}

/// The FFN side's operations over borrowed handles.
pub(super) struct Ffn<'a> {
    pub(super) gpu: &'a Gpu,
    pub(super) shape: &'a ModelShape,
    pub(super) kernels: &'a Kernels,
    pub(super) blas: &'a Blas,
    pub(super) stream: &'a Stream,
    pub(super) weights: &'a FfnWeights,
    pub(super) ws: &'a FfnWorkspace,
    pub(super) gemms: &'a ExpertGemms,
}

impl Ffn<'_> {
    fn engines(&self) -> Engines<'_> {
        Engines {
            blas: self.blas,
            kernels: self.kernels,
            stream: self.stream,
        }
    }

    /// Uploads `plan` for `layer` and chooses how its two GEMM stages run (timing candidates for shapes
    /// not seen before; synchronises the stream).
    pub(super) fn plan(&self, layer: usize, plan: RoutingPlan) -> Result<DevicePlan, ProbeError> {
        let mut device = DevicePlan::new(self.gpu, self.shape, self.weights, self.ws, layer, plan)?;
        let shapes = StageShape::of_plan(
            self.shape.hidden_size,
            self.shape.moe_intermediate_size,
            device.plan.max_tokens_per_expert,
            device.plan.active.len(),
            device.strided,
        );
        let mut runs = Vec::with_capacity(2);
        for shape in shapes {
            if let Some(run) = self.gemms.lookup(&shape) {
                runs.push(run);
                continue;
            }
            // Further layers' operands to rotate through while timing, so L2 holds no weights.
            let n_layers = self.weights.layers.len();
            let wanted = self.gemms.rotation_wanted(&shape).min(n_layers).max(1);
            let mut layers = vec![device.operands(self.weights)];
            let mut tables = Vec::with_capacity(wanted);
            for r in 1..wanted {
                let other = (layer + r) % n_layers;
                let table = pointer_table(self.shape, self.weights, self.ws, other, &device.plan);
                let buffer = self
                    .gpu
                    .alloc(table.len() * 8, "GEMM pointer arrays (choice timing)")?;
                buffer.upload(&table)?;
                let w = &self.weights.layers[other];
                layers.push(Operands {
                    ptrs: buffer.ptr,
                    gate_up: w.gate_up.ptr,
                    down: w.down.ptr,
                });
                tables.push(buffer);
            }
            let run = self
                .gemms
                .choose(self.engines(), shape, &layers, &self.ws.activations())?;
            self.stream.sync()?;
            drop(tables);
            runs.push(run);
        }
        let down = runs.pop().expect("two stages");
        let gate_up = runs.pop().expect("two stages");
        device.runs = Some([gate_up, down]);
        Ok(device)
    }

    /// Router GEMM (fp32 logits) and top-k.
    pub(super) fn router(&self, layer: usize, x: u64, tokens: usize) -> Result<(), ProbeError> {
        assert!(
            tokens <= self.ws.tokens_cap,
            "{tokens} tokens exceed the workspace's {}",
            self.ws.tokens_cap
        );
        let s = self.shape;
        let (h, e) = (s.hidden_size, s.n_routed_experts);
        self.blas.linear(
            Mat::new(x, h),
            Mat::new(self.weights.layers[layer].router.ptr, h),
            Mat::new(self.ws.logits.ptr, e),
            tokens,
            h,
            e,
            true,
        )?;
        self.kernels.router_topk(
            self.stream,
            self.ws.logits.ptr,
            tokens,
            e,
            s.experts_per_token,
            self.ws.topk_w.ptr,
            self.ws.topk_id.ptr,
        )
    }

    pub(super) fn gather(&self, plan: &DevicePlan, x: u64) -> Result<(), ProbeError> {
        self.kernels.moe_gather(
            self.stream,
            x,
            plan.gather.ptr,
            self.ws.xg.ptr,
            plan.plan.rows(),
            self.shape.hidden_size,
        )
    }

    /// Gate/up GEMMs with SiLU·mul, then down GEMMs, over the plan's active experts.
    pub(super) fn routed(&self, plan: &DevicePlan) -> Result<(), ProbeError> {
        let operands = plan.operands(self.weights);
        let activations = self.ws.activations();
        for run in plan.stage_runs() {
            self.gemms
                .run(self.engines(), run, &operands, &activations)?;
        }
        Ok(())
    }

    /// Shared-expert MLP into the shared output buffer (no-op without shared experts).
    pub(super) fn shared(&self, layer: usize, x: u64, tokens: usize) -> Result<(), ProbeError> {
        let Some((gate_up, down)) = &self.weights.layers[layer].shared else {
            return Ok(());
        };
        let (h, si) = (self.shape.hidden_size, self.shape.shared_intermediate_size);
        self.blas.linear(
            Mat::new(x, h),
            Mat::new(gate_up.ptr, h),
            Mat::new(self.ws.s_gu.ptr, 2 * si),
            tokens,
            h,
            2 * si,
            false,
        )?;
        self.kernels
            .silu_mul(self.stream, self.ws.s_gu.ptr, self.ws.s_act.ptr, tokens, si)?;
        self.blas.linear(
            Mat::new(self.ws.s_act.ptr, si),
            Mat::new(down.ptr, si),
            Mat::new(self.ws.s_y.ptr, h),
            tokens,
            si,
            h,
            false,
        )
    }

    pub(super) fn combine(&self, plan: &DevicePlan, out: u64) -> Result<(), ProbeError> {
        let has_shared = self.weights.layers[plan.layer].shared.is_some();
        self.kernels.moe_combine(
            self.stream,
            self.ws.y.ptr,
            if has_shared { self.ws.s_y.ptr } else { 0 },
            plan.slots.ptr,
            self.ws.topk_w.ptr,
            out,
            plan.plan.tokens,
            self.shape.experts_per_token,
            self.shape.hidden_size,
        )
    }

    /// One whole MoE layer: `out = shared(x) + Σ_j w_j · expert_j(x)`.
    pub(super) fn moe_layer(&self, plan: &DevicePlan, x: u64, out: u64) -> Result<(), ProbeError> {
        let tokens = plan.plan.tokens;
        self.router(plan.layer, x, tokens)?;
        self.gather(plan, x)?;
        self.routed(plan)?;
        self.shared(plan.layer, x, tokens)?;
        self.combine(plan, out)
    }

    /// The dense MLP (copy `copy` of its weights).
    pub(super) fn dense(
        &self,
        copy: usize,
        x: u64,
        out: u64,
        tokens: usize,
    ) -> Result<(), ProbeError> {
        let (h, di) = (self.shape.hidden_size, self.shape.dense_intermediate_size);
        let w = &self.weights.dense[copy];
        self.blas.linear(
            Mat::new(x, h),
            Mat::new(w.gate_up.ptr, h),
            Mat::new(self.ws.d_gu.ptr, 2 * di),
            tokens,
            h,
            2 * di,
            false,
        )?;
        self.kernels
            .silu_mul(self.stream, self.ws.d_gu.ptr, self.ws.d_act.ptr, tokens, di)?;
        self.blas.linear(
            Mat::new(self.ws.d_act.ptr, di),
            Mat::new(w.down.ptr, di),
            Mat::new(out, h),
            tokens,
            di,
            h,
            false,
        )
    }

    /// Checks token 0 of the last `moe_layer` run against a CPU reference; returns the relative error.
    pub(super) fn check_token0(
        &self,
        plan: &DevicePlan,
        x: u64,
        out: u64,
    ) -> Result<f64, ProbeError> {
        self.stream.sync()?;
        let s = self.shape;
        let (h, i, k) = (s.hidden_size, s.moe_intermediate_size, s.experts_per_token);
        let gpu = self.stream.gpu;
        let x0: Vec<u16> = super::gpu::download_raw(gpu, x, h)?;
        let got: Vec<u16> = super::gpu::download_raw(gpu, out, h)?;
        let weights: Vec<f32> = super::gpu::download_raw(gpu, self.ws.topk_w.ptr, k)?;
        let w = &self.weights.layers[plan.layer];
        let mut want = vec![0.0f64; h];
        if let Some((gate_up, down)) = &w.shared {
            let si = s.shared_intermediate_size;
            let gu: Vec<u16> = super::gpu::download_raw(gpu, gate_up.ptr, 2 * si * h)?;
            let dn: Vec<u16> = super::gpu::download_raw(gpu, down.ptr, h * si)?;
            let shared = reference::gated_mlp(&x0, &gu, &dn, h, si);
            // The GPU rounds the shared output to bf16 before the combine.
            for (acc, v) in want.iter_mut().zip(shared) {
                *acc += f64::from(reference::bf16_to_f32(reference::f32_to_bf16(v as f32)));
            }
        }
        for (j, &weight) in weights.iter().enumerate() {
            let row = plan.plan.slots[j] as usize;
            let expert = plan.plan.active[row / plan.plan.max_tokens_per_expert] as usize;
            let gu: Vec<u16> =
                super::gpu::download_raw(gpu, w.gate_up.at(expert * 2 * i * h * BF16), 2 * i * h)?;
            let dn: Vec<u16> =
                super::gpu::download_raw(gpu, w.down.at(expert * h * i * BF16), h * i)?;
            let y = reference::gated_mlp(&x0, &gu, &dn, h, i);
            for (acc, v) in want.iter_mut().zip(y) {
                *acc += f64::from(weight)
                    * f64::from(reference::bf16_to_f32(reference::f32_to_bf16(v as f32)));
            }
        }
        let got: Vec<f32> = got.into_iter().map(reference::bf16_to_f32).collect();
        Ok(reference::relative_error(&got, &want))
    }
}

/// Device-to-device copy bandwidth (read + write) of one 1 GiB copy, median of 10, for the
/// "fraction of HBM" columns.
pub(super) fn hbm_gbps(gpu: &Gpu, stream: &Stream) -> Result<f64, ProbeError> {
    let bytes = 1usize << 30;
    let src = gpu.alloc(bytes, "hbm reference source")?;
    let dst = gpu.alloc(bytes, "hbm reference destination")?;
    let events = super::gpu::EventPairs::new(gpu, 10)?;
    for i in 0..12 {
        if i >= 2 {
            events.start[i - 2].record(stream)?;
        }
        super::gpu::copy_async(stream, dst.ptr, src.ptr, bytes)?;
        if i >= 2 {
            events.end[i - 2].record(stream)?;
        }
    }
    stream.sync()?;
    let median = crate::stats::median(&events.elapsed_us(10)?).unwrap_or(f64::NAN);
    Ok(2.0 * bytes as f64 / (median * 1e3))
}

/// The `moe` probe.
pub(super) fn run(spec: &MoeSpec, progress: &dyn Fn(&str)) -> Result<Measured, ProbeError> {
    let shape = &spec.model;
    let gpu = Gpu::open(spec.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let blas = Blas::new(&gpu, &stream)?;
    let e = shape.n_routed_experts;
    let k = shape.experts_per_token;
    let n_layers = spec
        .layers
        .unwrap_or(shape.moe_layers())
        .clamp(1, shape.moe_layers().max(1));
    let dense_bytes = 3 * shape.hidden_size * shape.dense_intermediate_size * BF16;
    let dense_copies = if shape.dense_layers > 0 && spec.parts {
        rotation(dense_bytes, gpu.l2_bytes, 3).min(4)
    } else {
        0
    };
    let counts = kernels_of(shape);
    let hbm = hbm_gbps(&gpu, &stream)?;

    // Routing plans decide the workspace size: draw them all first.
    let draws: Vec<(Routing, usize, Vec<RoutingPlan>)> = spec
        .routings
        .iter()
        .flat_map(|&routing| spec.tokens.iter().map(move |&t| (routing, t as usize)))
        .map(|(routing, t)| {
            let plans = (0..n_layers)
                .map(|layer| RoutingPlan::new(&draw(routing, e, k, t, spec.seed, layer as u64), e))
                .collect();
            (routing, t, plans)
        })
        .collect();
    let max_tokens = spec.tokens.iter().copied().max().unwrap_or(1) as usize;
    let grid_rows = spec
        .grid_active
        .iter()
        .flat_map(|&a| {
            spec.grid_tokens_per_expert
                .iter()
                .map(move |&m| (a * m) as usize)
        })
        .max()
        .unwrap_or(0);
    let rows_cap = draws
        .iter()
        .flat_map(|(_, _, plans)| plans.iter().map(RoutingPlan::rows))
        .chain([grid_rows, max_tokens])
        .max()
        .unwrap_or(1);
    let weights = FfnWeights::new(
        &gpu,
        &kernels,
        &stream,
        shape,
        n_layers,
        dense_copies,
        spec.seed ^ 0xffe0,
    )?;
    let ws = FfnWorkspace::new(
        &gpu,
        &kernels,
        &stream,
        shape,
        max_tokens,
        rows_cap,
        spec.seed ^ 0x52,
    )?;
    let x = gpu.alloc(max_tokens * shape.hidden_size * BF16, "FFN input")?;
    let out = gpu.alloc(max_tokens * shape.hidden_size * BF16, "FFN output")?;
    kernels.fill_bf16(
        &stream,
        x.ptr,
        (max_tokens * shape.hidden_size) as u64,
        spec.seed ^ 0x51,
        1.0,
    )?;
    stream.sync()?;
    let sets: Vec<PathSet> = if spec.gemm_paths.is_empty() {
        vec![PathSet::Auto]
    } else {
        spec.gemm_paths.clone()
    };
    let gemms = ExpertGemms::new(&gpu, sets[0])?;
    let ffn = Ffn {
        gpu: &gpu,
        shape,
        kernels: &kernels,
        blas: &blas,
        stream: &stream,
        weights: &weights,
        ws: &ws,
        gemms: &gemms,
    };
    let model = shape.name.clone();
    let mut measured = Measured::default();
    let timing = spec.timing;
    let (h, i) = (shape.hidden_size, shape.moe_intermediate_size);

    if spec.parts {
        let mut router_points = Vec::new();
        let mut shared_points = Vec::new();
        let mut dense_points = Vec::new();
        let mut dispatch_points = Vec::new();
        for &t in &spec.tokens {
            let t = t as usize;
            progress(&format!("moe parts, {t} tokens"));
            let samples = time_op(&gpu, &stream, &timing, 1, |rep| {
                ffn.router(rep % n_layers, x.ptr, t)
            })?;
            let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
            let mut d = samples.derived(counts.router);
            d.push(("tflops", 2.0 * (t * h * e) as f64 / (median * 1e6)));
            router_points.push(point(vec![t as f64], samples.graph_us, derived(&d))?);

            if shape.shared_intermediate_size > 0 {
                let si = shape.shared_intermediate_size;
                let bytes = 3 * h * si * BF16;
                let samples = time_op(
                    &gpu,
                    &stream,
                    &timing,
                    rotation(bytes, gpu.l2_bytes, 3),
                    |rep| ffn.shared(rep % n_layers, x.ptr, t),
                )?;
                let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
                let mut d = samples.derived(counts.shared);
                d.push(("weight_bytes", bytes as f64));
                d.push(("gbps", bytes as f64 / (median * 1e3)));
                d.push(("tflops", 2.0 * (t * 3 * h * si) as f64 / (median * 1e6)));
                shared_points.push(point(vec![t as f64], samples.graph_us, derived(&d))?);
            }

            if dense_copies > 0 {
                let samples = time_op(&gpu, &stream, &timing, dense_copies, |rep| {
                    ffn.dense(rep % dense_copies, x.ptr, out.ptr, t)
                })?;
                let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
                let mut d = samples.derived(counts.dense);
                d.push(("weight_bytes", dense_bytes as f64));
                d.push(("gbps", dense_bytes as f64 / (median * 1e3)));
                d.push((
                    "tflops",
                    2.0 * (t * 3 * h * shape.dense_intermediate_size) as f64 / (median * 1e6),
                ));
                dense_points.push(point(vec![t as f64], samples.graph_us, derived(&d))?);
            }

            let plans: Vec<DevicePlan> = (0..n_layers)
                .map(|layer| {
                    let plan = RoutingPlan::new(
                        &draw(Routing::Uniform, e, k, t, spec.seed, layer as u64),
                        e,
                    );
                    DevicePlan::new(&gpu, shape, &weights, &ws, layer, plan)
                })
                .collect::<Result<_, _>>()?;
            ffn.router(0, x.ptr, t)?;
            let samples = time_op(&gpu, &stream, &timing, 1, |rep| {
                let plan = &plans[rep % n_layers];
                ffn.gather(plan, x.ptr)?;
                ffn.combine(plan, out.ptr)
            })?;
            dispatch_points.push(point(
                vec![t as f64],
                samples.graph_us.clone(),
                derived(&samples.derived(counts.dispatch)),
            )?);
        }
        let variant = [("model", model.clone())];
        measured
            .tables
            .push(table("moe.router", &variant, &["tokens"], router_points));
        if !shared_points.is_empty() {
            measured.tables.push(table(
                "moe.shared_experts",
                &variant,
                &["tokens"],
                shared_points,
            ));
        }
        if !dense_points.is_empty() {
            measured
                .tables
                .push(table("mlp.dense", &variant, &["tokens"], dense_points));
        }
        measured.tables.push(table(
            "moe.dispatch",
            &variant,
            &["tokens"],
            dispatch_points,
        ));
    }

    let mut set_notes = Vec::new();
    if !spec.grid_active.is_empty() && !spec.grid_tokens_per_expert.is_empty() {
        for (index, &set) in sets.iter().enumerate() {
            // The first set is the probe's own (its choices serve every table); the others are
            // measured on the grid only, for comparison.
            let other;
            let ffn_set = if index == 0 {
                &ffn
            } else {
                other = ExpertGemms::new(&gpu, set)?;
                &Ffn {
                    gemms: &other,
                    ..ffn
                }
            };
            let points = routed_grid(spec, ffn_set, hbm, &gpu, &stream, n_layers, progress)?;
            let op = if index == 0 {
                "moe.routed_experts"
            } else {
                "moe.routed_experts_by_path"
            };
            let mut variant = vec![("model", model.clone()), ("experts_local", e.to_string())];
            if index > 0 {
                variant.push(("gemm_paths", set.to_string()));
            }
            measured.tables.push(table(
                op,
                &variant,
                &["active_experts", "tokens_per_expert"],
                points,
            ));
            if index > 0 {
                set_notes.push((format!("expert_gemm.{set}"), ffn_set.gemms.summary()));
            }
        }
    }

    let mut worst_check = 0.0f64;
    for (routing, t, plans) in draws {
        progress(&format!("moe.layer, {routing}, {t} tokens"));
        let device_plans: Vec<DevicePlan> = plans
            .into_iter()
            .enumerate()
            .map(|(layer, plan)| ffn.plan(layer, plan))
            .collect::<Result<_, _>>()?;
        let samples = time_op(&gpu, &stream, &timing, 1, |rep| {
            ffn.moe_layer(&device_plans[rep % n_layers], x.ptr, out.ptr)
        })?;
        let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
        let mean = |f: &dyn Fn(&RoutingPlan) -> f64| {
            device_plans.iter().map(|p| f(&p.plan)).sum::<f64>() / device_plans.len() as f64
        };
        let active = mean(&|p| p.active.len() as f64);
        let max_tpe = mean(&|p| p.max_tokens_per_expert as f64);
        let bytes = active * (3 * h * i * BF16) as f64
            + (3 * h * shape.shared_intermediate_size * BF16 + e * h * BF16) as f64;
        // Layers of one routing may differ in shape and so in path (fused SiLU·mul or not).
        let routed_launches = device_plans
            .iter()
            .map(|p| p.routed_launches() as f64)
            .sum::<f64>()
            / device_plans.len() as f64;
        let mut d = samples.derived_launches(counts.layer(0) as f64 + routed_launches);
        d.push(("active_experts_mean", active));
        d.push(("max_tokens_per_expert_mean", max_tpe));
        d.push(("weight_bytes", bytes));
        d.push(("gbps", bytes / (median * 1e3)));
        d.push(("hbm_fraction", bytes / (median * 1e3) / hbm));
        if let Some(parts) = parts_sum_us(&measured, &device_plans, t) {
            d.push(("parts_sum_us", parts));
        }
        // Data check on this routing: token 0 of layer 0 against the CPU.
        ffn.moe_layer(&device_plans[0], x.ptr, out.ptr)?;
        let error = ffn.check_token0(&device_plans[0], x.ptr, out.ptr)?;
        worst_check = worst_check.max(error);
        if error > 3e-2 {
            return Err(ProbeError::DataCheck {
                what: format!("moe.layer ({routing}, {t} tokens)"),
                detail: format!(
                    "token 0 differs from the CPU reference by {error:.3e} (relative L2)"
                ),
            });
        }
        measured.tables.push(table(
            "moe.layer",
            &[
                ("model", model.clone()),
                ("routing", routing.to_string()),
                ("experts_local", e.to_string()),
            ],
            &["tokens"],
            vec![point(vec![t as f64], samples.graph_us, derived(&d))?],
        ));
    }
    merge_layer_tables(&mut measured);
    measured.notes.insert(
        "moe".to_owned(),
        format!(
            "GPU {} ({}), model {model}: {n_layers} MoE layers of distinct weights ({:.1} GB) rotated per repetition, \
             {dense_copies} dense-MLP copies; routing drawn on the host (seed {}); routed experts: gate/up GEMM with SiLU·mul, \
             then down GEMM, each padded to the busiest expert's tokens; every stage shape runs the fastest of the GEMM \
             paths of set {} (auto: cuBLAS batched GEMMs over device pointer arrays, strided when all {e} experts are active, \
             and the cuBLASLt algorithms its heuristic offers; own: this crate's grouped GEMM kernel, SiLU·mul fused or not), \
             each checked against cuBLAS and timed as graph replays over rotated layers when the shape is first met (note \
             expert_gemm; derived gate_up_path/down_path: 0 cuBLAS, 1 cuBLASLt, 2 own kernel); samples are per-operation \
             times of graph replays; \
             derived eager_us and host_us come from eager runs; {} warm-ups, {} samples per point; \
             HBM copy reference {hbm:.0} GB/s; worst token-0 check vs CPU {worst_check:.2e}",
            gpu.ordinal,
            gpu.name,
            n_layers as f64 * (e * shape.expert_bytes() + 3 * h * shape.shared_intermediate_size * BF16) as f64 / 1e9,
            spec.seed,
            gemms.set,
            timing.warmup,
            timing.iters,
        ),
    );
    measured
        .notes
        .insert("hbm_copy_gbps".to_owned(), format!("{hbm:.1}"));
    measured
        .notes
        .insert("expert_gemm".to_owned(), gemms.summary());
    measured.notes.extend(set_notes);
    Ok(measured)
}

/// The `moe.routed_experts` grid (active experts × tokens per expert) with `ffn`'s path choices.
fn routed_grid(
    spec: &MoeSpec,
    ffn: &Ffn<'_>,
    hbm: f64,
    gpu: &Gpu,
    stream: &Stream,
    n_layers: usize,
    progress: &dyn Fn(&str),
) -> Result<Vec<afd_traces::calibration::CostPoint>, ProbeError> {
    let shape = ffn.shape;
    let (e, h, i) = (
        shape.n_routed_experts,
        shape.hidden_size,
        shape.moe_intermediate_size,
    );
    let mut points = Vec::new();
    for &active in &spec.grid_active {
        let active = (active as usize).clamp(1, e);
        progress(&format!(
            "moe.routed_experts (GEMM paths {}), {active} active experts",
            ffn.gemms.set
        ));
        for &m in &spec.grid_tokens_per_expert {
            let m = m as usize;
            let plans: Vec<DevicePlan> = (0..n_layers)
                .map(|layer| ffn.plan(layer, RoutingPlan::uniform_grid(e, active, m)))
                .collect::<Result<_, _>>()?;
            let bytes = active * 3 * h * i * BF16;
            let samples = time_op(
                gpu,
                stream,
                &spec.timing,
                rotation(bytes, gpu.l2_bytes, 3),
                |rep| ffn.routed(&plans[rep % n_layers]),
            )?;
            let median = crate::stats::median(&samples.graph_us).unwrap_or(f64::NAN);
            let gbps = bytes as f64 / (median * 1e3);
            let paths = plans[0].path_derived();
            let activation_bytes = paths
                .iter()
                .find(|(k, _)| *k == "activation_bytes")
                .map_or(0.0, |(_, v)| *v);
            let mut d = samples.derived(plans[0].routed_launches());
            d.push(("weight_bytes", bytes as f64));
            d.push(("gbps", gbps));
            d.push(("hbm_fraction", gbps / hbm));
            d.push((
                "all_gbps",
                (bytes as f64 + activation_bytes) / (median * 1e3),
            ));
            d.push((
                "tflops",
                2.0 * (active * m * 3 * h * i) as f64 / (median * 1e6),
            ));
            d.push(("strided", f64::from(u8::from(active == e))));
            d.extend(paths);
            points.push(point(
                vec![active as f64, m as f64],
                samples.graph_us,
                derived(&d),
            )?);
        }
    }
    Ok(points)
}

/// Router + dispatch + routed experts (interpolated on the grid) + shared experts at `tokens`, from
/// the tables measured so far, averaged over the layers' routings.
fn parts_sum_us(measured: &Measured, plans: &[DevicePlan], tokens: usize) -> Option<f64> {
    let at = |op: &str| -> Option<f64> {
        let t = measured.tables.iter().find(|t| t.op == op)?;
        let points: Vec<(f64, f64)> = t
            .points
            .iter()
            .map(|p| (p.at[0], p.stats.median_us))
            .collect();
        crate::fit::interpolate(&points, tokens as f64)
    };
    let grid = measured
        .tables
        .iter()
        .find(|t| t.op == "moe.routed_experts")?;
    let routed: f64 = plans
        .iter()
        .map(|p| {
            crate::fit::grid_lookup(
                grid,
                p.plan.active.len() as f64,
                p.plan.max_tokens_per_expert as f64,
            )
        })
        .sum::<Option<f64>>()?
        / plans.len() as f64;
    Some(at("moe.router")? + at("moe.dispatch")? + routed + at("moe.shared_experts").unwrap_or(0.0))
}

/// One `moe.layer` table per (model, routing), points in token order.
fn merge_layer_tables(measured: &mut Measured) {
    let mut merged: Vec<afd_traces::calibration::CostTable> = Vec::new();
    for t in std::mem::take(&mut measured.tables) {
        if t.op == "moe.layer"
            && let Some(existing) = merged
                .iter_mut()
                .find(|m| m.op == t.op && m.variant == t.variant)
        {
            existing.points.extend(t.points);
            continue;
        }
        merged.push(t);
    }
    measured.tables = merged;
}
