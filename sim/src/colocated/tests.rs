//! Weights per GPU of the baseline.

use super::*;

#[test]
fn expert_parallelism_spreads_the_routed_experts_over_every_gpu() {
    let model = ModelArch::deepseek_v2_lite();
    let roles = model.config.params_by_role();
    let total = (roles.attention + roles.ffn) * model.weight_bytes();
    assert_eq!(weight_bytes_per_gpu(&model, 1, 1, true), total);
    let ep16 = weight_bytes_per_gpu(&model, 16, 1, true);
    let tp16 = weight_bytes_per_gpu(&model, 1, 16, false);
    let dp16 = weight_bytes_per_gpu(&model, 16, 1, false);
    assert_eq!(dp16, total);
    // EP over 16 GPUs keeps the dense part whole; TP 16 shards it too.
    assert!(ep16 < total / 4 && tp16 < ep16, "{ep16} {tp16} {total}");
    // DeepSeek-V2-Lite is ~15.7 B parameters in bf16.
    assert!((31_000_000_000..32_000_000_000).contains(&total), "{total}");
}
