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

#[test]
fn a_hybrid_model_keeps_kv_in_its_full_layers_and_a_state_per_sequence_in_the_others() {
    let model = ModelArch::builtin("qwen3-next-80b-a3b").unwrap().unwrap();
    assert!(model.is_hybrid());
    assert_eq!(model.full_attention_share(), 0.25);
    // 2 KV heads split over TP 2: one head a rank, 12 full layers.
    assert_eq!(model.kv_bytes_per_token_layer(2), 2 * 256 * 2);
    assert_eq!(model.kv_bytes_per_token(2), 12 * 2 * 256 * 2);
    // The state of one layer (1,097,728 B) split over 4 ranks, 36 linear layers.
    assert_eq!(model.linear_state_bytes_per_layer(4), 1_097_728 / 4);
    assert_eq!(model.linear_state_bytes_per_sequence(4), 36 * 1_097_728 / 4);
    // 8 × 32 × 128 × 128 for the delta rule, 2 × 8192 × 4 for the convolution.
    assert_eq!(
        model.linear_attention_flops_per_token(),
        8 * 32 * 128 * 128 + 2 * 8192 * 4
    );
    // The mean attention block of a layer: three linear to one full.
    let c = &model.config;
    let mean = (36 * c.mixer_params(afd_traces::model_config::MixerKind::Linear)
        + 12 * c.mixer_params(afd_traces::model_config::MixerKind::Full))
        / 48;
    assert_eq!(model.attention_params_per_layer(), mean);
    let dense = ModelArch::deepseek_v2_lite();
    assert!(!dense.is_hybrid());
    assert_eq!(dense.full_attention_share(), 1.0);
    assert_eq!(dense.linear_state_bytes_per_sequence(1), 0);
}
