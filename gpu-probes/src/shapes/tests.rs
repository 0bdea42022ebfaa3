//! Sizing decisions.

use proptest::prelude::*;

use super::*;

#[test]
fn graph_reps_cover_time_and_rotation() {
    assert_eq!(graph_reps(5.0, 500.0, 1, 1024), 100);
    assert_eq!(graph_reps(5.0, 500.0, 300, 1024), 300);
    assert_eq!(graph_reps(2000.0, 500.0, 2, 1024), 2);
    assert_eq!(graph_reps(0.001, 500.0, 1, 1024), 1024);
    assert_eq!(graph_reps(f64::NAN, 500.0, 3, 1024), 3);
}

#[test]
fn rotation_exceeds_l2() {
    // One DeepSeek-V2-Lite expert (17.3 MB) against the H200's 60 MB L2, three times over.
    assert_eq!(rotation(17_301_504, 62_914_560, 3), 11);
    assert_eq!(rotation(10 << 30, 62_914_560, 3), 1);
    assert_eq!(rotation(0, 62_914_560, 3), 1);
}

#[test]
fn mla_splits_fill_the_gpu_but_stay_long() {
    assert_eq!(
        MlaSplit::choose(1, 1, 8192, 792),
        MlaSplit {
            chunk: 128,
            splits: 64
        }
    );
    assert_eq!(
        MlaSplit::choose(512, 1, 8192, 792),
        MlaSplit {
            chunk: 4096,
            splits: 2
        }
    );
    assert_eq!(
        MlaSplit::choose(64, 1, 4096, 792),
        MlaSplit {
            chunk: 320,
            splits: 13
        }
    );
    assert_eq!(
        MlaSplit::choose(4, 1, 100, 792),
        MlaSplit {
            chunk: 128,
            splits: 1
        }
    );
    assert_eq!(
        MlaSplit::with_chunk(300, 100),
        MlaSplit {
            chunk: 128,
            splits: 3
        }
    );
}

#[test]
fn mla_bytes_count_kv_rows() {
    assert_eq!(mla_bytes(1, 16, 512), 512 * 1152 + 16 * 1152 + 16 * 1024);
}

proptest! {
    #[test]
    fn every_token_falls_in_a_split(queries in 1usize..600, groups in 1usize..8, len in 1usize..20000) {
        let split = MlaSplit::choose(queries, groups, len, 792);
        prop_assert_eq!(split.chunk % 32, 0);
        prop_assert!(split.chunk * split.splits >= len);
        prop_assert!(split.chunk * (split.splits - 1) < len, "no empty trailing split");
    }
}
