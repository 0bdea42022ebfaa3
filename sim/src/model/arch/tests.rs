//! Derived sizes of the shipped models match the arithmetic of afd-spec §3.1/§3.3 and sim-anchors §4.

use super::*;

#[test]
fn deepseek_v2_lite_derived_sizes_match_the_spec() {
    let model = ModelArch::deepseek_v2_lite();
    assert_eq!((model.hidden(), model.layers()), (2048, 27));
    // 4096 B per row per direction (afd-spec §3.3).
    assert_eq!(model.row_bytes(), 4096);
    // (512 + 64) x 2 B x 27 = 31,104 B of MLA KV per token, replicated across TP (sim-anchors §4).
    assert_eq!(model.kv_bytes_per_token_layer(2), 1152);
    assert_eq!(model.kv_bytes_per_token(1), 31_104);
    // 3 x 2048 x 1408 = 8.65M parameters per expert.
    assert_eq!(model.expert_params(), 8_650_752);
    assert!(model.is_dense_layer(0) && !model.is_dense_layer(1));
    assert_eq!((model.routed_experts(), model.experts_per_token()), (64, 6));
}

#[test]
fn gqa_kv_heads_split_across_tensor_parallel_ranks() {
    let model = ModelArch::builtin("qwen3-30b-a3b").unwrap().unwrap();
    let full = model.kv_bytes_per_token_layer(1);
    assert_eq!(model.kv_bytes_per_token_layer(2), full / 2);
    // Never below one KV head per rank.
    assert_eq!(
        model.kv_bytes_per_token_layer(64),
        model.kv_bytes_per_token_layer(1024)
    );
    assert!(ModelArch::builtin("gpt-2").is_none());
}
