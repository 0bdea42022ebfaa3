//! Derived sizes of the built-in models match the arithmetic of afd-spec §3.1/§3.3 and sim-anchors §4.

use super::*;

#[test]
fn deepseek_v2_lite_derived_sizes_match_the_spec() {
    let model = ModelArch::deepseek_v2_lite();
    // 4096 B per row per direction (afd-spec §3.3).
    assert_eq!(model.row_bytes(), 4096);
    // (512 + 64) x 2 B x 27 = 31,104 B of MLA KV per token (sim-anchors §4).
    assert_eq!(model.kv_bytes_per_token_layer(2), 1152);
    assert_eq!(model.kv_bytes_per_token(1), 31_104);
    // 3 x 2048 x 1408 = 8.65M parameters per expert.
    assert_eq!(model.expert_params(), 8_650_752);
    assert!(model.is_dense_layer(0) && !model.is_dense_layer(1));
    // Attention ~13.76M parameters per layer (sim-anchors §4 consistency check).
    let attention = model.attention_params_per_layer();
    assert!((13_000_000..14_500_000).contains(&attention), "{attention}");
}

#[test]
fn gqa_kv_heads_split_across_tensor_parallel_ranks() {
    let model = ModelArch::qwen3_30b_a3b();
    assert_eq!(model.kv_bytes_per_token_layer(1), 2 * 4 * 128 * 2);
    assert_eq!(model.kv_bytes_per_token_layer(4), 2 * 128 * 2);
    assert_eq!(model.kv_bytes_per_token_layer(8), 2 * 128 * 2);
}
