//! Choice bookkeeping of the routed-expert GEMMs: shapes, tile fitting, candidates, picking.

use expect_test::{Expect, expect};
use proptest::prelude::*;

use super::*;

/// DeepSeek-V2-Lite: hidden 2048, expert width 1408, 64 experts.
fn deepseek(tokens: usize, experts: usize) -> [StageShape; 2] {
    StageShape::of_plan(2048, 1408, tokens, experts, experts == 64)
}

/// Qwen3-30B-A3B: hidden 2048, expert width 768, 128 experts.
fn qwen3(tokens: usize, experts: usize) -> [StageShape; 2] {
    StageShape::of_plan(2048, 768, tokens, experts, experts == 128)
}

#[track_caller]
fn check_candidates(shape: &StageShape, set: PathSet, lt_algos: usize, want: Expect) {
    let got: Vec<String> = candidates(shape, set, lt_algos)
        .iter()
        .map(ToString::to_string)
        .collect();
    want.assert_eq(&got.join(", "));
}

#[test]
fn plan_shapes_follow_the_model() {
    let [gate_up, down] = deepseek(64, 64);
    assert_eq!((gate_up.out_features, gate_up.in_features), (2816, 2048));
    assert_eq!((down.out_features, down.in_features), (2048, 1408));
    // 64 experts × 3 × 2048 × 1408 bf16 = the routed-expert weight traffic of one layer.
    assert_eq!(
        gate_up.weight_bytes() + down.weight_bytes(),
        64 * 3 * 2048 * 1408 * 2
    );
    assert!(gate_up.strided && down.strided);
    assert!(!deepseek(64, 48)[0].strided);
}

#[test]
fn activation_bytes_count_the_unfused_round_trip() {
    let [gate_up, down] = deepseek(64, 64);
    let rows = 64 * 64;
    // Fused: x read, act written.
    assert_eq!(gate_up.activation_bytes(true), rows * (2048 + 1408) * 2);
    // Unfused: also gate/up written and read back.
    assert_eq!(
        gate_up.activation_bytes(false),
        rows * (2048 + 1408 + 2 * 2816) * 2
    );
    // Down: act read, y written; fusion does not apply.
    assert_eq!(down.activation_bytes(false), rows * (1408 + 2048) * 2);
    assert_eq!(down.activation_bytes(true), down.activation_bytes(false));
}

#[test]
fn alignment_is_the_largest_common_power_of_two() {
    assert_eq!(alignment_bytes(&[]), 256);
    assert_eq!(alignment_bytes(&[0, 4096]), 256);
    assert_eq!(alignment_bytes(&[4096, 48]), 16);
    assert_eq!(alignment_bytes(&[2]), 2);
    assert_eq!(alignment_bytes(&[3]), 1);
    // DeepSeek-V2-Lite at any token count: 2816-wide gate/up rows are 5632 = 22 × 256 bytes.
    assert_eq!(deepseek(63, 64)[0].operand_alignment(), 256);
    assert_eq!(qwen3(7, 128)[1].operand_alignment(), 256);
    // A 1400-wide expert at an odd token count: rows of 2800 bytes.
    assert_eq!(
        StageShape::of_plan(2048, 1400, 3, 8, false)[1].operand_alignment(),
        16
    );
}

#[test]
fn tiles_fit_by_columns_depth_and_tokens() {
    let t128x64 = Tile::new(128, 64, 4, 2);
    let [gate_up, down] = deepseek(64, 64);
    assert!(t128x64.fits(&gate_up, true));
    assert!(t128x64.fits(&gate_up, false));
    assert!(t128x64.fits(&down, false));
    assert!(!t128x64.fits(&down, true), "down has no activation to fuse");
    // Half the tile wasted or worse: 64 tokens per expert on a 128-token tile is not offered.
    assert!(!Tile::new(128, 128, 4, 2).fits(&gate_up, true));
    // More than four token tiles per expert.
    assert!(!Tile::new(128, 16, 4, 1).fits(&deepseek(65, 64)[0], true));
    assert!(Tile::new(128, 16, 4, 1).fits(&deepseek(1, 64)[0], true));
    // Beyond the kernel's token range.
    assert!(!t128x64.fits(&deepseek(OWN_MAX_TOKENS + 1, 64)[0], false));
    // Columns: an expert width of 1400 is no multiple of the 64 gate rows a fused block writes.
    let odd = StageShape::of_plan(2048, 1400, 64, 8, false);
    assert!(!t128x64.fits(&odd[0], true));
    assert!(!t128x64.fits(&odd[0], false));
    // K must be a multiple of the 64-wide slice.
    let shallow = StageShape::of_plan(2000, 1408, 64, 8, false);
    assert!(!t128x64.fits(&shallow[0], false));
}

#[test]
fn every_tile_fits_both_models_somewhere() {
    for tile in TILES {
        let tokens = tile.tokens;
        for [gate_up, down] in [deepseek(tokens, 64), qwen3(tokens, 128)] {
            assert!(tile.fits(&gate_up, true), "{tile} fused gate/up");
            assert!(tile.fits(&down, false), "{tile} down");
        }
        assert_eq!(tile.threads() % 32, 0);
        assert!(tile.threads() <= 1024);
        // Two blocks per SM need at most 113 KiB each (228 KiB per H100/H200 SM, 1 KiB reserved per block).
        assert!(tile.smem_bytes() <= 227 * 1024, "{tile}");
        // The loaders give every thread the same number of 16-byte copies.
        assert_eq!((tile.rows * TILE_K / 8) % tile.threads(), 0, "{tile}");
        assert_eq!((tile.tokens * TILE_K / 8) % tile.threads(), 0, "{tile}");
        // A fused block needs gate and up tiles of 16 rows in every row-warp.
        assert!(tile.rows / tile.warps_rows >= 32, "{tile}");
        assert_eq!(tile.tokens % (8 * tile.warps_tokens), 0, "{tile}");
    }
}

#[test]
fn blocks_cover_the_output() {
    let [gate_up, down] = deepseek(64, 64);
    let tile = Tile::new(128, 64, 4, 2);
    // Fused: 1408 act columns / 64 per block × 64 experts.
    assert_eq!(tile.blocks(&gate_up, true), 22 * 64);
    assert_eq!(tile.blocks(&gate_up, false), 22 * 64);
    assert_eq!(tile.blocks(&down, false), 16 * 64);
    // 100 tokens need two token tiles of 64.
    assert_eq!(tile.blocks(&deepseek(100, 64)[1], false), 2 * 16 * 64);
}

#[test]
fn kernel_names_match_kernels_cu() {
    let names: Vec<String> = TILES
        .iter()
        .flat_map(|t| [t.kernel_name(false), t.kernel_name(true)])
        .collect();
    expect![[r#"expert_gemm_128x16 expert_gemm_silu_128x16 expert_gemm_128x32 expert_gemm_silu_128x32 expert_gemm_128x64 expert_gemm_silu_128x64 expert_gemm_64x64 expert_gemm_silu_64x64 expert_gemm_64x128 expert_gemm_silu_64x128 expert_gemm_128x128 expert_gemm_silu_128x128"#]]
    .assert_eq(&names.join(" "));
    let source = include_str!("../device/kernels.cu");
    for t in TILES {
        let line = format!(
            "EXPERT_GEMM({}, {}, {}, {},",
            t.rows, t.tokens, t.warps_rows, t.warps_tokens
        );
        assert!(source.contains(&line), "kernels.cu lacks `{line}`");
    }
}

#[test]
fn candidates_at_decode_sizes() {
    check_candidates(
        &deepseek(64, 64)[0],
        PathSet::Auto,
        3,
        expect!["cuBLAS, cuBLASLt #0, cuBLASLt #1, cuBLASLt #2"],
    );
    check_candidates(
        &deepseek(64, 64)[0],
        PathSet::Only(Family::Own),
        3,
        expect![[
            "own 128x16 +SiLU, own 128x32 +SiLU, own 128x64 +SiLU, own 64x64 +SiLU, own 128x16, own 128x32, own 128x64, own 64x64"
        ]],
    );
    check_candidates(
        &deepseek(64, 64)[1],
        PathSet::Only(Family::Own),
        2,
        expect!["own 128x16, own 128x32, own 128x64, own 64x64"],
    );
    check_candidates(
        &qwen3(128, 128)[1],
        PathSet::Only(Family::Own),
        5,
        expect!["own 128x32, own 128x64, own 64x64, own 64x128, own 128x128"],
    );
    check_candidates(
        &qwen3(4, 20)[0],
        PathSet::Only(Family::Own),
        0,
        expect!["own 128x16 +SiLU, own 128x16"],
    );
}

#[test]
fn candidates_fall_back_to_cublas() {
    // Compute-bound sizes: no own tile; cuBLASLt's heuristic offered nothing.
    check_candidates(
        &deepseek(1024, 64)[0],
        PathSet::Only(Family::Own),
        0,
        expect!["cuBLAS"],
    );
    check_candidates(
        &deepseek(64, 64)[0],
        PathSet::Only(Family::CublasLt),
        0,
        expect!["cuBLAS"],
    );
    check_candidates(
        &deepseek(1024, 64)[0],
        PathSet::Auto,
        1,
        expect!["cuBLAS, cuBLASLt #0"],
    );
    // Compute-bound sizes try only the heuristic's first few cuBLASLt algorithms.
    check_candidates(
        &deepseek(1024, 64)[1],
        PathSet::Auto,
        12,
        expect!["cuBLAS, cuBLASLt #0, cuBLASLt #1, cuBLASLt #2, cuBLASLt #3"],
    );
}

#[test]
fn path_sets_parse_and_name_themselves() {
    for text in ["auto", "cublas", "cublaslt", "own"] {
        let set: PathSet = text.parse().unwrap();
        assert_eq!(set.to_string(), text);
    }
    let err = "cutlass".parse::<PathSet>().unwrap_err();
    assert!(err.contains("\"cutlass\""), "{err}");
}

#[test]
fn launches_and_codes() {
    let fused = Path::Own {
        tile: TILES[2],
        fused: true,
    };
    let plain = Path::Own {
        tile: TILES[2],
        fused: false,
    };
    assert_eq!(fused.launches(Stage::GateUp), 1);
    assert_eq!(plain.launches(Stage::GateUp), 2);
    assert_eq!(Path::Cublas.launches(Stage::GateUp), 2);
    assert_eq!(Path::CublasLt { algo: 3 }.launches(Stage::Down), 1);
    assert_eq!(fused.launches(Stage::Down), 1);
    assert_eq!(Family::Cublas.code(), 0.0);
    assert_eq!(Path::CublasLt { algo: 0 }.family().code(), 1.0);
    assert_eq!(fused.family().code(), 2.0);
}

fn trial(path: Path, error: f64, us: f64) -> Trial {
    Trial { path, error, us }
}

#[test]
fn fastest_skips_wrong_and_untimed_trials() {
    let own = Path::Own {
        tile: TILES[2],
        fused: true,
    };
    let trials = [
        trial(Path::Cublas, 0.0, 300.0),
        trial(Path::CublasLt { algo: 0 }, 1e-3, 290.0),
        trial(own, 0.5, 100.0),
        trial(Path::CublasLt { algo: 1 }, f64::NAN, 50.0),
        trial(Path::CublasLt { algo: 2 }, 1e-3, f64::NAN),
        trial(Path::CublasLt { algo: 3 }, f64::INFINITY, 40.0),
    ];
    assert_eq!(fastest(&trials), Some(1));
    assert_eq!(fastest(&trials[2..]), None);
    assert_eq!(fastest(&[]), None);
    // Equal times, or times within the tie fraction, keep the earlier trial.
    let tie = [
        trial(Path::Cublas, 0.0, 10.0),
        trial(Path::CublasLt { algo: 0 }, 0.0, 10.0),
    ];
    assert_eq!(fastest(&tie), Some(0));
    let near = [
        trial(Path::Cublas, 0.0, 300.0),
        trial(Path::CublasLt { algo: 0 }, 0.0, 299.0),
        trial(Path::CublasLt { algo: 1 }, 0.0, 290.0),
        trial(Path::CublasLt { algo: 2 }, 0.0, 289.0),
    ];
    assert_eq!(fastest(&near), Some(2), "290 is within 0.5 % of 289");
    let clear = [
        trial(Path::Cublas, 0.0, 300.0),
        trial(Path::CublasLt { algo: 0 }, 0.0, 290.0),
    ];
    assert_eq!(fastest(&clear), Some(1));
}

#[test]
fn summary_counts_choices_per_stage() {
    let own = Path::Own {
        tile: TILES[2],
        fused: true,
    };
    let [g64, d64] = deepseek(64, 64);
    let [g32, d32] = deepseek(32, 64);
    let [g1, d1] = deepseek(1, 64);
    let choices = [
        (g64, own),
        (d64, Path::CublasLt { algo: 2 }),
        (g32, own),
        (
            d32,
            Path::Own {
                tile: TILES[1],
                fused: false,
            },
        ),
        (g1, Path::Cublas),
        (d1, Path::CublasLt { algo: 2 }),
    ];
    expect!["gate/up: own 128x64 +SiLU ×2, cuBLAS ×1; down: cuBLASLt #2 ×2, own 128x32 ×1"]
        .assert_eq(&summarize(&choices));
    assert_eq!(summarize(&[]), "");
}

fn best(trials: &[Trial]) -> f64 {
    trials
        .iter()
        .filter(|t| t.is_valid())
        .map(|t| t.us)
        .fold(f64::INFINITY, f64::min)
}

fn arb_shape() -> impl Strategy<Value = StageShape> {
    (
        prop_oneof![Just(Stage::GateUp), Just(Stage::Down)],
        1usize..600,
        prop_oneof![
            Just(64usize),
            Just(128),
            Just(1408),
            Just(2816),
            Just(2048),
            Just(1400),
            Just(96)
        ],
        prop_oneof![Just(64usize), Just(768), Just(2048), Just(1408), Just(2000)],
        1usize..160,
        any::<bool>(),
    )
        .prop_map(
            |(stage, tokens, out_features, in_features, experts, strided)| StageShape {
                stage,
                tokens,
                out_features,
                in_features,
                experts,
                strided,
            },
        )
}

proptest! {
    #[test]
    fn candidates_are_never_empty_and_only_fitting(
        shape in arb_shape(),
        lt in 0usize..20,
        set in prop_oneof![
            Just(PathSet::Auto),
            Just(PathSet::Only(Family::Cublas)),
            Just(PathSet::Only(Family::CublasLt)),
            Just(PathSet::Only(Family::Own)),
        ],
    ) {
        let paths = candidates(&shape, set, lt);
        prop_assert!(!paths.is_empty());
        for path in &paths {
            match set {
                PathSet::Only(family) => {
                    prop_assert!(path.family() == family || *path == Path::Cublas);
                }
                PathSet::Auto => prop_assert!(path.family() != Family::Own),
            }
            match path {
                Path::Own { tile, fused } => {
                    prop_assert!(tile.fits(&shape, *fused));
                    prop_assert!(shape.tokens <= OWN_MAX_TOKENS);
                    prop_assert!(shape.in_features % TILE_K == 0);
                    prop_assert!(!*fused || shape.stage == Stage::GateUp);
                    // Blocks tile the result exactly (no partial column tiles).
                    let (columns, per_block) = if *fused {
                        (shape.out_features / 2, tile.rows / 2)
                    } else {
                        (shape.out_features, tile.rows)
                    };
                    prop_assert_eq!(columns % per_block, 0);
                    prop_assert!(tile.blocks(&shape, *fused) >= shape.experts);
                }
                Path::CublasLt { algo } => {
                    prop_assert!(*algo < lt);
                    prop_assert!(shape.tokens <= OWN_MAX_TOKENS || *algo < LARGE_LT_ALGOS);
                }
                Path::Cublas => {}
            }
        }
        let mut sorted = paths.clone();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), paths.len(), "no duplicates");
    }

    #[test]
    fn fastest_is_minimal_among_valid(
        entries in proptest::collection::vec((0.0f64..0.05, 1.0f64..500.0, any::<bool>()), 0..12),
    ) {
        let trials: Vec<Trial> = entries
            .iter()
            .enumerate()
            .map(|(i, &(error, us, timed))| trial(
                Path::CublasLt { algo: i },
                error,
                if timed { us } else { f64::NAN },
            ))
            .collect();
        match fastest(&trials) {
            None => prop_assert!(trials.iter().all(|t| !t.is_valid())),
            Some(i) => {
                prop_assert!(trials[i].is_valid());
                for (j, t) in trials.iter().enumerate() {
                    if t.is_valid() {
                        // Never more than the tie fraction slower than any valid trial, and no
                        // earlier valid trial was within it.
                        prop_assert!(trials[i].us <= t.us * (1.0 + TIE_FRACTION));
                        if j < i {
                            prop_assert!(t.us > best(&trials) * (1.0 + TIE_FRACTION));
                        }
                    }
                }
            }
        }
    }
}
