//! Memory per role: weights per rank by placement, and the error naming a role that does not fit.

use crate::memory::{plan, weight_bytes_per_rank};
use crate::model::arch::ModelArch;
use crate::model::hardware::GpuKind;
use crate::serving::{RoleLayout, ServingConfig};

fn one_by_one() -> ServingConfig {
    let role = RoleLayout {
        dp: 1,
        tp: 1,
        expert_parallel: true,
    };
    ServingConfig {
        attention: role,
        ffn: role,
        ..ServingConfig::seed_recipe()
    }
}

#[test]
fn ffn_ranks_share_the_routed_experts_under_expert_parallelism() {
    let model = ModelArch::deepseek_v2_lite();
    let one = weight_bytes_per_rank(&one_by_one(), &model).1;
    let two = weight_bytes_per_rank(&ServingConfig::seed_recipe(), &model).1;
    // Every FFN weight is split across the two ranks (experts by EP, the rest by TP).
    assert!(two * 2 >= one && two * 2 <= one + 16, "{one} vs {two}");
    // DeepSeek-V2-Lite's 64 × 26 experts alone are about 28.8 GB (afd-spec §3.1).
    assert!(one > 28_000_000_000, "{one}");
}

#[test]
fn the_attention_role_holds_only_the_attention_side() {
    let model = ModelArch::deepseek_v2_lite();
    let (attention, ffn) = weight_bytes_per_rank(&one_by_one(), &model);
    assert!(attention < ffn / 5, "{attention} vs {ffn}");
    assert_eq!(attention, model.attention_weight_bytes(1));
}

#[test]
fn an_ffn_role_that_does_not_fit_on_a_24_gb_card_names_role_rank_and_bytes() {
    let model = ModelArch::deepseek_v2_lite();
    let config = ServingConfig {
        gpu: GpuKind::L4,
        ..one_by_one()
    };
    let err = plan(&config, &model, GpuKind::L4.spec().memory_bytes).unwrap_err();
    assert_eq!(err.role, "ffn");
    assert_eq!(err.rank, 0);
    assert!(err.needed_bytes > err.available_bytes);
    let text = err.to_string();
    assert!(
        text.starts_with("the ffn role does not fit on its GPU (rank 0): it needs "),
        "{text}"
    );
    assert!(text.contains(&err.available_bytes.to_string()), "{text}");
}

#[test]
fn the_seed_recipe_fits_on_h200_with_room_for_kv() {
    let model = ModelArch::deepseek_v2_lite();
    let plans = plan(
        &ServingConfig::seed_recipe(),
        &model,
        GpuKind::H200.spec().memory_bytes,
    )
    .unwrap();
    assert_eq!(plans.len(), 2);
    assert!(plans.iter().all(|p| p.free_bytes > 100 << 30), "{plans:?}");
}

/// A hybrid model's Attention role keeps a linear-attention state for each of its `max_num_seqs`
/// requests: the room for them comes out of the KV cache and is named in the role's reserve.
#[test]
fn linear_attention_states_for_max_num_seqs_come_before_the_kv_cache() {
    let model = ModelArch::builtin("qwen3-next-80b-a3b").unwrap().unwrap();
    let layout = RoleLayout {
        dp: 1,
        tp: 4,
        expert_parallel: true,
    };
    let config = |seqs: u32| ServingConfig {
        attention: layout,
        ffn: layout,
        max_num_seqs: seqs,
        ..ServingConfig::seed_recipe()
    };
    let memory = GpuKind::H200.spec().memory_bytes;
    let blocks = |seqs| crate::cluster::kv_capacity(&config(seqs), &model, memory).0;
    let per_sequence = model.linear_state_bytes_per_sequence(4);
    let block_bytes = model.kv_bytes_per_token(4) * u64::from(config(64).block_size);
    let freed = (blocks(64) - blocks(128)) * block_bytes;
    // 64 more states, give or take one block of rounding.
    assert!(freed.abs_diff(64 * per_sequence) <= block_bytes, "{freed}");
    let roles = plan(&config(64), &model, memory).unwrap();
    assert_eq!(
        roles[0].reserve_bytes,
        config(64).kv_reserve_bytes + 64 * per_sequence
    );
    assert_eq!(roles[1].reserve_bytes, config(64).kv_reserve_bytes);
}
