//! How the routed experts' GEMMs run, as pure bookkeeping: the shape a choice is made for, the
//! candidate paths (cuBLAS, the algorithms cuBLASLt's heuristic offers, this crate's grouped GEMM
//! kernel in its tile catalogue, with or without SiLU·mul fused into its epilogue), which candidates
//! apply to a shape, the bytes each path moves, and picking the fastest candidate whose output matched
//! the reference. Timing and launching live in `device`; nothing here touches a GPU.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// bf16 bytes per element.
const BF16: usize = 2;

/// The two GEMM stages of the routed experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// `act = silu(x · W_gateᵀ) ⊙ (x · W_upᵀ)`: the fused gate/up GEMM and the activation.
    GateUp,
    /// `y = act · W_downᵀ`.
    Down,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::GateUp => "gate/up",
            Stage::Down => "down",
        })
    }
}

/// One stage over one routing plan: what a choice is made for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StageShape {
    pub stage: Stage,
    /// Rows per expert (tokens per expert after padding): M of every GEMM in the batch.
    pub tokens: usize,
    /// GEMM output features: 2 × expert width (gate rows then up rows) for gate/up, hidden for down.
    pub out_features: usize,
    /// GEMM input features: hidden for gate/up, expert width for down.
    pub in_features: usize,
    /// Active experts: GEMMs in the batch.
    pub experts: usize,
    /// Every expert of the layer is active, so the weights lie at a fixed stride.
    pub strided: bool,
}

impl StageShape {
    /// Both stages of a plan with `experts` active experts padded to `tokens` rows each.
    pub fn of_plan(
        hidden: usize,
        expert_width: usize,
        tokens: usize,
        experts: usize,
        strided: bool,
    ) -> [StageShape; 2] {
        [
            StageShape {
                stage: Stage::GateUp,
                tokens,
                out_features: 2 * expert_width,
                in_features: hidden,
                experts,
                strided,
            },
            StageShape {
                stage: Stage::Down,
                tokens,
                out_features: hidden,
                in_features: expert_width,
                experts,
                strided,
            },
        ]
    }

    /// Weight bytes the stage streams (each active expert's matrix once).
    pub fn weight_bytes(&self) -> usize {
        self.experts * self.out_features * self.in_features * BF16
    }

    /// Columns of the stage's result rows: the expert width for gate/up (after the activation),
    /// hidden for down.
    pub fn result_columns(&self) -> usize {
        match self.stage {
            Stage::GateUp => self.out_features / 2,
            Stage::Down => self.out_features,
        }
    }

    /// Activation bytes a path moves besides the weights: the input rows read and the result
    /// written; an unfused gate/up also writes the GEMM output and reads it back for SiLU·mul.
    pub fn activation_bytes(&self, fused: bool) -> usize {
        let rows = self.experts * self.tokens;
        let mut elements = rows * (self.in_features + self.result_columns());
        if self.stage == Stage::GateUp && !fused {
            elements += 2 * rows * self.out_features;
        }
        elements * BF16
    }

    /// Alignment (bytes, at most 256) of every operand of the batch, given 256-byte aligned buffers:
    /// expert `a`'s weights, inputs and GEMM outputs start `a` strides from the first.
    pub fn operand_alignment(&self) -> u32 {
        alignment_bytes(&[
            self.out_features * self.in_features * BF16,
            self.tokens * self.in_features * BF16,
            self.tokens * self.out_features * BF16,
        ])
    }

    /// Multiply-add FLOPs of the stage's GEMMs (padding rows included).
    pub fn flops(&self) -> f64 {
        2.0 * (self.experts * self.tokens) as f64 * (self.out_features * self.in_features) as f64
    }
}

/// Largest power of two up to 256 that divides every offset (bytes).
pub fn alignment_bytes(offsets: &[usize]) -> u32 {
    let mut align = 256usize;
    for &offset in offsets {
        while align > 1 && offset % align != 0 {
            align /= 2;
        }
    }
    align as u32
}

/// A tile of this crate's grouped GEMM kernel (`expert_gemm_*` in `kernels.cu`): a block computes
/// `rows` weight rows × `tokens` tokens, its warps arranged `warps_rows` × `warps_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tile {
    pub rows: usize,
    pub tokens: usize,
    pub warps_rows: usize,
    pub warps_tokens: usize,
}

/// K slice staged per pipeline step, elements.
pub const TILE_K: usize = 64;
/// Pipeline depth (K slices in flight).
pub const TILE_STAGES: usize = 4;
/// Shared-memory row of one staged K slice, elements (padded against bank conflicts).
pub const TILE_SMEM_ROW: usize = 72;
/// The kernel is offered up to this many tokens per expert (beyond it, GEMMs are compute-bound and
/// cuBLAS's Hopper kernels win).
pub const OWN_MAX_TOKENS: usize = 256;

/// Every tile `kernels.cu` instantiates, smallest token count first.
pub const TILES: [Tile; 6] = [
    Tile::new(128, 16, 4, 1),
    Tile::new(128, 32, 4, 1),
    Tile::new(128, 64, 4, 2),
    Tile::new(64, 64, 2, 2),
    Tile::new(64, 128, 2, 4),
    Tile::new(128, 128, 4, 2),
];

impl Tile {
    pub const fn new(rows: usize, tokens: usize, warps_rows: usize, warps_tokens: usize) -> Tile {
        Tile {
            rows,
            tokens,
            warps_rows,
            warps_tokens,
        }
    }

    pub fn threads(&self) -> usize {
        32 * self.warps_rows * self.warps_tokens
    }

    /// Dynamic shared memory of one block: the pipeline's stages of weight and token slices.
    pub fn smem_bytes(&self) -> usize {
        TILE_STAGES * (self.rows + self.tokens) * TILE_SMEM_ROW * BF16
    }

    /// The kernel's entry point in `kernels.cu`.
    pub fn kernel_name(&self, fused: bool) -> String {
        let silu = if fused { "silu_" } else { "" };
        format!("expert_gemm_{silu}{}x{}", self.rows, self.tokens)
    }

    /// Whether the kernel can run `shape` (`fused`: with SiLU·mul in the epilogue, gate/up only) and
    /// the tile suits its token count: no more than half the tile's tokens wasted, at most four
    /// token tiles per expert, at most [`OWN_MAX_TOKENS`].
    pub fn fits(&self, shape: &StageShape, fused: bool) -> bool {
        let columns = match (shape.stage, fused) {
            (Stage::Down, true) => return false,
            (Stage::GateUp, true) => {
                shape.out_features.is_multiple_of(2)
                    && (shape.out_features / 2).is_multiple_of(self.rows / 2)
            }
            (_, false) => shape.out_features.is_multiple_of(self.rows),
        };
        let m = shape.tokens;
        let tokens = (1..=OWN_MAX_TOKENS).contains(&m)
            && (self.tokens <= 16 || self.tokens < 2 * m)
            && 4 * self.tokens >= m;
        columns && tokens && shape.in_features > 0 && shape.in_features.is_multiple_of(TILE_K)
    }

    /// Blocks of one launch over `shape`.
    pub fn blocks(&self, shape: &StageShape, fused: bool) -> usize {
        let columns = if fused {
            shape.out_features / 2
        } else {
            shape.out_features
        };
        let per_block = if fused { self.rows / 2 } else { self.rows };
        shape.tokens.div_ceil(self.tokens) * (columns / per_block) * shape.experts
    }
}

impl fmt::Display for Tile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.rows, self.tokens)
    }
}

/// Where a path comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// `cublasGemmBatchedEx` / `cublasGemmStridedBatchedEx`, default algorithm.
    Cublas,
    /// `cublasLtMatmul`, strided or pointer-array batch, an algorithm from its heuristic.
    CublasLt,
    /// This crate's grouped GEMM kernel.
    Own,
}

impl Family {
    /// Stable numeric code for `derived` columns (0 cuBLAS, 1 cuBLASLt, 2 own kernel).
    pub fn code(self) -> f64 {
        match self {
            Family::Cublas => 0.0,
            Family::CublasLt => 1.0,
            Family::Own => 2.0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Cublas => "cublas",
            Family::CublasLt => "cublaslt",
            Family::Own => "own",
        }
    }
}

/// One way to run a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Path {
    /// cuBLAS batched GEMM (then the SiLU·mul kernel for gate/up).
    Cublas,
    /// cuBLASLt with the `algo`-th algorithm its heuristic returned for the shape (then SiLU·mul).
    CublasLt { algo: usize },
    /// This crate's kernel; `fused`: SiLU·mul in its epilogue (gate/up only), else the SiLU·mul kernel
    /// follows.
    Own { tile: Tile, fused: bool },
}

impl Path {
    pub fn family(&self) -> Family {
        match self {
            Path::Cublas => Family::Cublas,
            Path::CublasLt { .. } => Family::CublasLt,
            Path::Own { .. } => Family::Own,
        }
    }

    /// Whether the activation is fused into the GEMM.
    pub fn is_fused(&self) -> bool {
        matches!(self, Path::Own { fused: true, .. })
    }

    /// Launches of the stage on this path (a cuBLAS or cuBLASLt call counts once).
    pub fn launches(&self, stage: Stage) -> usize {
        match stage {
            Stage::GateUp if !self.is_fused() => 2,
            _ => 1,
        }
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Cublas => f.write_str("cuBLAS"),
            Path::CublasLt { algo } => write!(f, "cuBLASLt #{algo}"),
            Path::Own { tile, fused } => {
                write!(f, "own {tile}{}", if *fused { " +SiLU" } else { "" })
            }
        }
    }
}

/// Which paths a probe may choose from (`--gemm-path`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PathSet {
    /// cuBLAS and cuBLASLt; the fastest wins. The own kernel is left out: on the H200 it was slower
    /// than cuBLASLt at every decode size of both models measured (docs/probes.md), so trying it only
    /// lengthens start-up.
    Auto,
    /// One family only (cuBLAS where it offers nothing for a shape).
    Only(Family),
}

impl PathSet {
    pub fn name(self) -> &'static str {
        match self {
            PathSet::Auto => "auto",
            PathSet::Only(family) => family.name(),
        }
    }
}

impl fmt::Display for PathSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PathSet {
    type Err = String;

    fn from_str(text: &str) -> Result<PathSet, String> {
        Ok(match text.trim() {
            "auto" => PathSet::Auto,
            "cublas" => PathSet::Only(Family::Cublas),
            "cublaslt" => PathSet::Only(Family::CublasLt),
            "own" => PathSet::Only(Family::Own),
            other => {
                return Err(format!(
                    "unknown GEMM path set {other:?}: expected auto, cublas, cublaslt or own"
                ));
            }
        })
    }
}

/// cuBLASLt algorithms tried beyond [`OWN_MAX_TOKENS`] tokens per expert, where GEMMs are
/// compute-bound, cuBLAS's own choice is good and each try costs milliseconds.
pub const LARGE_LT_ALGOS: usize = 4;

/// The paths to try for `shape` within `set`, given that cuBLASLt's heuristic offered `lt_algos`
/// algorithms: cuBLAS, then cuBLASLt's in heuristic order (the first [`LARGE_LT_ALGOS`] only for
/// compute-bound token counts), then every fitting tile of the own kernel (fused first for gate/up).
/// Never empty: cuBLAS stands in where the set offers nothing.
pub fn candidates(shape: &StageShape, set: PathSet, lt_algos: usize) -> Vec<Path> {
    let wants = |family: Family| match set {
        PathSet::Auto => family != Family::Own,
        PathSet::Only(only) => family == only,
    };
    let mut paths = Vec::new();
    if wants(Family::Cublas) {
        paths.push(Path::Cublas);
    }
    if wants(Family::CublasLt) {
        let lt_algos = if shape.tokens > OWN_MAX_TOKENS {
            lt_algos.min(LARGE_LT_ALGOS)
        } else {
            lt_algos
        };
        paths.extend((0..lt_algos).map(|algo| Path::CublasLt { algo }));
    }
    if wants(Family::Own) {
        for fused in [true, false] {
            for tile in TILES {
                if tile.fits(shape, fused) {
                    paths.push(Path::Own { tile, fused });
                }
            }
        }
    }
    if paths.is_empty() {
        paths.push(Path::Cublas);
    }
    paths
}

/// Largest relative L2 difference from the cuBLAS reference a candidate may show (bf16 outputs of
/// fp32 sums in another order differ by about 1e-3).
pub const MAX_RELATIVE_ERROR: f64 = 2e-2;

/// What trying one candidate on one shape gave.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trial {
    pub path: Path,
    /// Relative L2 difference of its output from the reference (NaN or infinite: failed or not run).
    pub error: f64,
    /// Median time per run, µs (NaN when it was not timed).
    pub us: f64,
}

impl Trial {
    /// Matched the reference and has a usable time.
    pub fn is_valid(&self) -> bool {
        self.error <= MAX_RELATIVE_ERROR && self.us.is_finite() && self.us > 0.0
    }
}

/// Times within this fraction of the fastest count as a tie: timing noise must not swap a path for
/// another that is no faster.
pub const TIE_FRACTION: f64 = 0.005;

/// Index of the first valid trial within [`TIE_FRACTION`] of the fastest valid time (candidates come
/// in order of preference: cuBLAS, then cuBLASLt by heuristic rank).
pub fn fastest(trials: &[Trial]) -> Option<usize> {
    let best_us = trials
        .iter()
        .filter(|t| t.is_valid())
        .map(|t| t.us)
        .fold(f64::INFINITY, f64::min);
    trials
        .iter()
        .position(|t| t.is_valid() && t.us <= best_us * (1.0 + TIE_FRACTION))
}

/// "gate/up: own 128x64 +SiLU ×12, cuBLAS ×1; down: …": how often each path was chosen per stage,
/// most frequent first (ties by name), for a probe's notes.
pub fn summarize(choices: &[(StageShape, Path)]) -> String {
    let mut per_stage: BTreeMap<Stage, BTreeMap<String, usize>> = BTreeMap::new();
    for (shape, path) in choices {
        *per_stage
            .entry(shape.stage)
            .or_default()
            .entry(path.to_string())
            .or_default() += 1;
    }
    per_stage
        .into_iter()
        .map(|(stage, counts)| {
            let mut counts: Vec<(String, usize)> = counts.into_iter().collect();
            counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            let list: Vec<String> = counts
                .into_iter()
                .map(|(path, n)| format!("{path} ×{n}"))
                .collect();
            format!("{stage}: {}", list.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
