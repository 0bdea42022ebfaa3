//! The routed experts' two GEMM stages over a routing plan (gate/up with SiLU·mul, then down) and the
//! start-up choice of how each stage shape runs. For a shape seen for the first time every candidate of
//! [`gemm_choice::candidates`] (cuBLAS, the algorithms cuBLASLt's heuristic offers, this crate's grouped
//! kernel in each fitting tile, fused with SiLU·mul or not) is run once on the plan's layer and its output
//! compared with cuBLAS's, then timed as graph replays over rotated layers' weights (as the probes time
//! everything); the fastest correct one runs that shape for the rest of the process. Choosing needs
//! synchronisation, so it happens when a plan is made, never inside a graph capture.
//!
//! [`gemm_choice::candidates`]: crate::gemm_choice::candidates

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use super::blas::{Blas, Mat};
use super::gpu::{
    Buffer, EventPairs, Gpu, Graph, Stream, copy_async, download_async, memset_u32_async,
    zero_async,
};
use super::kernels::{ExpertGemmArgs, Kernels};
use super::lt::{Lt, LtBatch, LtShape};
use crate::error::ProbeError;
use crate::gemm_choice::{self, Family, Path, PathSet, Stage, StageShape, Trial};

const BF16: usize = 2;
/// cuBLASLt heuristic algorithms tried per shape.
const LT_ALGOS: usize = 32;
/// Timed graph replays per candidate (after one warm-up replay); the median counts.
const TIMED_REPLAYS: usize = 3;
/// Shortest graph replay worth timing, µs.
const MIN_REPLAY_US: f64 = 300.0;
/// Most stage runs in one timing graph.
const MAX_RUNS: usize = 16;

/// One layer's routed-expert operands for one plan.
#[derive(Clone, Copy, Debug)]
pub(super) struct Operands {
    /// Device array `[w_gate_up; A], [x; A], [gu; A], [w_down; A], [act; A], [y; A]` of pointers.
    pub(super) ptrs: u64,
    /// The layer's first expert's gate/up and down weights (strided batches).
    pub(super) gate_up: u64,
    pub(super) down: u64,
}

/// The FFN workspace's routed-expert buffers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Activations {
    pub(super) xg: u64,
    pub(super) gu: u64,
    pub(super) act: u64,
    pub(super) y: u64,
    /// Reference results of a shape being chosen (as large as `act` and `y`).
    pub(super) act_ref: u64,
    pub(super) y_ref: u64,
}

/// Borrowed handles a stage runs with.
#[derive(Clone, Copy)]
pub(super) struct Engines<'a> {
    pub(super) blas: &'a Blas,
    pub(super) kernels: &'a Kernels,
    pub(super) stream: &'a Stream,
}

/// How one stage shape runs, and what choosing it measured.
pub(super) struct StageRun {
    pub(super) shape: StageShape,
    pub(super) path: Path,
    lt: Option<Rc<LtShape>>,
    /// Median time per run of the chosen path when it was chosen, µs (NaN when nothing was timed).
    pub(super) us: f64,
    /// Every candidate tried, in candidate order.
    trials: Vec<Trial>,
}

impl StageRun {
    /// Launches one run of the stage makes.
    pub(super) fn launches(&self) -> usize {
        self.path.launches(self.shape.stage)
    }

    /// Fastest valid time of `family` among the trials, µs (NaN when it had none).
    pub(super) fn best_of(&self, family: Family) -> f64 {
        self.trials
            .iter()
            .filter(|t| t.is_valid() && t.path.family() == family)
            .map(|t| t.us)
            .fold(f64::NAN, f64::min)
    }
}

/// The per-process choices of one path set.
pub(super) struct ExpertGemms {
    pub(super) set: PathSet,
    lt: Option<Lt>,
    sums: Buffer,
    events: EventPairs,
    l2_bytes: usize,
    cache: RefCell<BTreeMap<StageShape, Rc<StageRun>>>,
    /// Candidates that failed or differed from the reference, and shapes cuBLASLt offered nothing
    /// for (the first few), for the notes.
    trouble: RefCell<Vec<String>>,
}

/// Most trouble lines kept for the notes.
const MAX_TROUBLE: usize = 6;

impl ExpertGemms {
    pub(super) fn new(gpu: &Gpu, set: PathSet) -> Result<ExpertGemms, ProbeError> {
        let wants_lt = matches!(set, PathSet::Auto | PathSet::Only(Family::CublasLt));
        let lt = if wants_lt { Lt::new(gpu)? } else { None };
        let mut trouble = Vec::new();
        if wants_lt && lt.is_none() {
            trouble.push("cuBLASLt could not be loaded".to_owned());
        }
        Ok(ExpertGemms {
            set,
            lt,
            sums: gpu.alloc(16, "GEMM check sums")?,
            events: EventPairs::new(gpu, TIMED_REPLAYS)?,
            l2_bytes: gpu.l2_bytes,
            cache: RefCell::new(BTreeMap::new()),
            trouble: RefCell::new(trouble),
        })
    }

    /// The choice already made for `shape`, if any.
    pub(super) fn lookup(&self, shape: &StageShape) -> Option<Rc<StageRun>> {
        self.cache.borrow().get(shape).cloned()
    }

    /// Layers of distinct weights a choice for `shape` wants to rotate over while timing: enough runs
    /// per graph replay to be timed well, and twice the L2 between two uses of one layer's weights.
    pub(super) fn rotation_wanted(&self, shape: &StageShape) -> usize {
        let bytes = shape.weight_bytes() + shape.activation_bytes(false);
        let estimate_us = bytes as f64 / 3.5e3 + 5.0;
        let by_time = (MIN_REPLAY_US / estimate_us).ceil() as usize;
        let by_l2 = crate::shapes::rotation(shape.weight_bytes(), self.l2_bytes, 2);
        by_time.max(by_l2).clamp(1, MAX_RUNS)
    }

    /// Runs one stage as `run` says, on the operands of one layer.
    pub(super) fn run(
        &self,
        e: Engines<'_>,
        run: &StageRun,
        ops: &Operands,
        acts: &Activations,
    ) -> Result<(), ProbeError> {
        self.run_path(e, &run.shape, run.path, run.lt.as_deref(), ops, acts)
    }

    fn run_path(
        &self,
        e: Engines<'_>,
        s: &StageShape,
        path: Path,
        lt_shape: Option<&LtShape>,
        ops: &Operands,
        acts: &Activations,
    ) -> Result<(), ProbeError> {
        let (a, m, n, k) = (s.experts, s.tokens, s.out_features, s.in_features);
        let table = |slot: usize| ops.ptrs + (8 * a * slot) as u64;
        // Weights, inputs and GEMM outputs: pointer arrays and first operands.
        let (w_ptrs, x_ptrs, y_ptrs, w, x, y) = match s.stage {
            Stage::GateUp => (table(0), table(1), table(2), ops.gate_up, acts.xg, acts.gu),
            Stage::Down => (table(3), table(4), table(5), ops.down, acts.act, acts.y),
        };
        match path {
            Path::Cublas if s.strided => e.blas.linear_strided(
                Mat::new(x, k),
                m * k,
                Mat::new(w, k),
                n * k,
                Mat::new(y, n),
                m * n,
                m,
                k,
                n,
                a,
            )?,
            Path::Cublas => e
                .blas
                .linear_pointers(x_ptrs, k, w_ptrs, k, y_ptrs, n, m, k, n, a)?,
            Path::CublasLt { algo } => {
                let (lt, shape) = self
                    .lt
                    .as_ref()
                    .zip(lt_shape)
                    .expect("cuBLASLt paths exist only with a handle and a shape");
                if s.strided {
                    lt.run(shape, algo, w, x, y, e.stream)?;
                } else {
                    lt.run(shape, algo, w_ptrs, x_ptrs, y_ptrs, e.stream)?;
                }
            }
            Path::Own { tile, fused } => {
                let ldy = if fused { n / 2 } else { n };
                e.kernels.expert_gemm(
                    e.stream,
                    tile,
                    fused,
                    &ExpertGemmArgs {
                        w_ptrs,
                        x,
                        y: if fused { acts.act } else { y },
                        m,
                        n,
                        k,
                        ldy,
                        x_stride: m * k,
                        y_stride: m * ldy,
                        experts: a,
                    },
                )?;
            }
        }
        if s.stage == Stage::GateUp && !path.is_fused() {
            e.kernels
                .silu_mul(e.stream, acts.gu, acts.act, a * m, n / 2)?;
        }
        Ok(())
    }

    /// The choice for `shape`, made now if it is new. `layers[0]` is the plan's own layer (outputs
    /// are checked there); the others are rotated through while timing. Synchronises the stream.
    pub(super) fn choose(
        &self,
        e: Engines<'_>,
        shape: StageShape,
        layers: &[Operands],
        acts: &Activations,
    ) -> Result<Rc<StageRun>, ProbeError> {
        if let Some(run) = self.lookup(&shape) {
            return Ok(run);
        }
        let lt_shape = self.lt_shape(&shape).map(Rc::new);
        let lt_algos = lt_shape.as_ref().map_or(0, |s| s.algos());
        let candidates = gemm_choice::candidates(&shape, self.set, lt_algos);
        let (result, result_ref, columns) = match shape.stage {
            Stage::GateUp => (acts.act, acts.act_ref, shape.out_features / 2),
            Stage::Down => (acts.y, acts.y_ref, shape.out_features),
        };
        let elements = shape.experts * shape.tokens * columns;

        // The reference: cuBLAS on the plan's layer (down reads the activations gate/up made there).
        if shape.stage == Stage::Down {
            let gate_up = StageShape {
                stage: Stage::GateUp,
                out_features: 2 * shape.in_features,
                in_features: shape.out_features,
                ..shape
            };
            self.run_path(e, &gate_up, Path::Cublas, None, &layers[0], acts)?;
        }
        self.run_path(e, &shape, Path::Cublas, None, &layers[0], acts)?;
        copy_async(e.stream, result_ref, result, elements * BF16)?;

        let runs = self.rotation_wanted(&shape).min(MAX_RUNS);
        let mut trials = Vec::with_capacity(candidates.len());
        for &path in &candidates {
            let lt = if path.family() == Family::CublasLt {
                lt_shape.as_deref()
            } else {
                None
            };
            // Poison the result (bf16 NaN) so a path that writes nothing cannot pass.
            memset_u32_async(e.stream, result, 0xffff_ffff, elements / 2)?;
            let error = match self.run_path(e, &shape, path, lt, &layers[0], acts) {
                Ok(()) => self.relative_error(e, result, result_ref, elements)?,
                Err(err) => {
                    self.note(format!("{path} failed on {}: {err}", describe(&shape)));
                    f64::INFINITY
                }
            };
            if error.is_finite() && error > gemm_choice::MAX_RELATIVE_ERROR {
                self.note(format!(
                    "{path} differed from cuBLAS by {error:.2e} on {}",
                    describe(&shape)
                ));
            }
            let mut trial = Trial {
                path,
                error,
                us: f64::NAN,
            };
            if error <= gemm_choice::MAX_RELATIVE_ERROR {
                match time_path(e, &self.events, runs, |r| {
                    self.run_path(e, &shape, path, lt, &layers[r % layers.len()], acts)
                }) {
                    Ok(us) => trial.us = us,
                    Err(err) => self.note(format!(
                        "{path} could not be timed on {}: {err}",
                        describe(&shape)
                    )),
                }
            }
            trials.push(trial);
        }
        let best = gemm_choice::fastest(&trials).ok_or_else(|| ProbeError::DataCheck {
            what: format!("routed-expert GEMMs, {}", describe(&shape)),
            detail: "no candidate, cuBLAS included, matched the cuBLAS reference".to_owned(),
        })?;
        let path = trials[best].path;
        let run = Rc::new(StageRun {
            shape,
            path,
            lt: if path.family() == Family::CublasLt {
                lt_shape
            } else {
                None
            },
            us: trials[best].us,
            trials,
        });
        self.cache.borrow_mut().insert(shape, run.clone());
        Ok(run)
    }

    /// cuBLASLt descriptors and heuristic algorithms for `shape`, when the set allows cuBLASLt.
    fn lt_shape(&self, shape: &StageShape) -> Option<LtShape> {
        if !matches!(self.set, PathSet::Auto | PathSet::Only(Family::CublasLt)) {
            return None;
        }
        let lt = self.lt.as_ref()?;
        let (n, k, m) = (shape.out_features, shape.in_features, shape.tokens);
        let batch = if shape.strided {
            LtBatch::Strided {
                w: n * k,
                x: m * k,
                y: m * n,
            }
        } else {
            LtBatch::Pointers
        };
        match lt.shape(
            m,
            k,
            n,
            shape.experts,
            batch,
            shape.operand_alignment(),
            LT_ALGOS,
        ) {
            Ok(lt_shape) => {
                if lt_shape.algos() == 0 {
                    self.note(format!(
                        "cuBLASLt's heuristic offered no algorithm for {}",
                        describe(shape)
                    ));
                }
                Some(lt_shape)
            }
            Err(err) => {
                self.note(format!(
                    "cuBLASLt descriptors failed for {}: {err}",
                    describe(shape)
                ));
                None
            }
        }
    }

    fn note(&self, line: String) {
        let mut trouble = self.trouble.borrow_mut();
        if trouble.len() < MAX_TROUBLE {
            trouble.push(line);
        }
    }

    /// Relative L2 difference of `elements` bf16 values at `a` from those at `reference`.
    fn relative_error(
        &self,
        e: Engines<'_>,
        a: u64,
        reference: u64,
        elements: usize,
    ) -> Result<f64, ProbeError> {
        zero_async(e.stream, self.sums.ptr, 16)?;
        e.kernels
            .compare_bf16(e.stream, a, reference, elements, self.sums.ptr)?;
        let mut sums = [0.0f64; 2];
        download_async(e.stream, &mut sums, self.sums.ptr)?;
        e.stream.sync()?;
        let [diff, norm] = sums;
        Ok(if norm > 0.0 {
            (diff / norm).sqrt()
        } else if diff == 0.0 {
            0.0
        } else {
            f64::INFINITY
        })
    }

    /// One line for a probe's notes: which path each stage shape chose, counted.
    pub(super) fn summary(&self) -> String {
        let choices: Vec<(StageShape, Path)> = self
            .cache
            .borrow()
            .values()
            .map(|run| (run.shape, run.path))
            .collect();
        let mut text = format!(
            "paths {}: {} stage shapes chosen ({})",
            self.set,
            choices.len(),
            gemm_choice::summarize(&choices)
        );
        for line in self.trouble.borrow().iter() {
            text.push_str("; ");
            text.push_str(line);
        }
        text
    }
}

/// "gate/up, 64 tokens × 64 experts (strided)".
fn describe(shape: &StageShape) -> String {
    format!(
        "{}, {} tokens × {} experts ({})",
        shape.stage,
        shape.tokens,
        shape.experts,
        if shape.strided {
            "strided"
        } else {
            "pointer arrays"
        }
    )
}

/// Median time of one `op` run, µs: `runs` runs (rotating `op(r)`) captured as one graph, one warm-up
/// replay, then [`TIMED_REPLAYS`] timed replays.
fn time_path(
    e: Engines<'_>,
    events: &EventPairs,
    runs: usize,
    mut op: impl FnMut(usize) -> Result<(), ProbeError>,
) -> Result<f64, ProbeError> {
    let graph = Graph::capture(e.stream, || {
        for r in 0..runs {
            op(r)?;
        }
        Ok(())
    })?;
    graph.launch(e.stream)?;
    for i in 0..TIMED_REPLAYS {
        events.start[i].record(e.stream)?;
        graph.launch(e.stream)?;
        events.end[i].record(e.stream)?;
    }
    e.stream.sync()?;
    let times: Vec<f64> = events
        .elapsed_us(TIMED_REPLAYS)?
        .into_iter()
        .map(|t| t / runs as f64)
        .collect();
    Ok(crate::stats::median(&times).unwrap_or(f64::NAN))
}
