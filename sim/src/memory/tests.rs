//! Memory per role: weights per rank by placement, and the error naming a role that does not fit.

use crate::memory::{MemoryError, plan, weight_bytes_per_rank};
use crate::model::arch::{KvLayout, ModelArch};
use crate::model::hardware::GpuKind;
use crate::serving::{GraphMode, RoleLayout, ServingConfig};

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
    assert_eq!(err.role(), "ffn");
    let MemoryError::RoleFits(err) = err else {
        panic!("{err}")
    };
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

fn qwen3_5_122b() -> ModelArch {
    ModelArch::builtin("qwen3.5-122b-a10b").unwrap().unwrap()
}

/// vLLM's hybrid layout by hand for Qwen3.5-122B-A10B on one Attention rank: a full-attention
/// layer keeps 2 KV heads of 256 in bf16, 2,048 bytes a token; a Gated DeltaNet layer's state is
/// 64 value heads × 128 × 128 in bf16 (2,097,152 bytes) plus 3 convolution inputs of
/// 2 × 16 × 128 + 64 × 128 = 12,288 channels (73,728 bytes): 2,170,880 bytes. The attention block
/// grows to 16 × ceil(2,170,880 / (16 × 2,048)) = 1,072 tokens, a page of 2,195,456 bytes; 12 full
/// and 36 linear layers group by 12, so a block id is 12 pages, and a request holds 3 for its states.
#[test]
fn a_hybrid_model_cuts_its_kv_cache_as_vllm_s_hybrid_allocator_does() {
    let model = qwen3_5_122b();
    assert_eq!(model.kv_bytes_per_token_layer(1), 2_048);
    assert_eq!(model.linear_state_bytes_per_layer(1), 2_170_880);
    assert_eq!(
        model.kv_layout(1, 16),
        KvLayout {
            block_size: 1_072,
            block_bytes: 12 * 1_072 * 2_048,
            token_groups: 1,
            state_groups: 3,
        }
    );
    // A user block size above the state's needs stays.
    assert_eq!(model.kv_layout(1, 2_048).block_size, 2_048);
    // A model without linear attention keeps every layer in one group.
    let deepseek = ModelArch::deepseek_v2_lite();
    assert_eq!(
        deepseek.kv_layout(1, 64),
        KvLayout {
            block_size: 64,
            block_bytes: 64 * deepseek.kv_bytes_per_token(1),
            token_groups: 1,
            state_groups: 0,
        }
    );
}

fn qwen_on_h200(seqs: u32, graph: GraphMode, utilization: f64) -> ServingConfig {
    let layout = RoleLayout {
        dp: 1,
        tp: 4,
        expert_parallel: true,
    };
    ServingConfig {
        attention: layout,
        ffn: layout,
        max_num_seqs: seqs,
        graph,
        gpu_memory_utilization: utilization,
        ..ServingConfig::seed_recipe()
    }
}

/// The states of running requests come out of the KV pool as requests hold them, so
/// `--max-num-seqs` sets nothing aside; only a role that replays full graphs needs a state block
/// for each of `--max-num-seqs` sequences, which vLLM checks before capturing.
#[test]
fn full_graphs_of_a_hybrid_model_need_a_block_per_sequence_eager_does_not() {
    let model = qwen3_5_122b();
    let memory = GpuKind::H200.spec().memory_bytes;
    let graphs = GraphMode::FullDecodeOnly {
        capture_sizes: vec![1, 2, 4, 8],
    };
    let blocks = |config: &ServingConfig| crate::cluster::kv_capacity(config, &model, memory).0;
    let roomy = qwen_on_h200(64, graphs.clone(), 0.9);
    assert_eq!(
        blocks(&roomy),
        blocks(&qwen_on_h200(1024, graphs.clone(), 0.9))
    );
    let roles = plan(&roomy, &model, memory).unwrap();
    assert_eq!(roles[0].reserve_bytes, roomy.kv_reserve_bytes);
    let layout = crate::cluster::kv_layout(&roomy, &model);
    assert_eq!(blocks(&roomy), roles[0].free_bytes / layout.block_bytes);
    // Find a utilization that leaves fewer blocks than 256 sequences need, but the few that one
    // short request takes (a block per full-attention and per linear-attention group).
    let tight = (10..900)
        .map(|permille| qwen_on_h200(256, graphs.clone(), f64::from(permille) / 1000.0))
        .find(|config| {
            let b = blocks(config);
            (8..256).contains(&b)
        })
        .expect("some utilization leaves between 8 and 255 blocks");
    let err = plan(&tight, &model, memory).unwrap_err();
    let MemoryError::StateBlocks(short) = &err else {
        panic!("{err}")
    };
    assert_eq!(short.role, "attention");
    assert_eq!(short.blocks, blocks(&tight));
    let text = err.to_string();
    assert!(
        text.contains("--max-num-seqs 256 exceeds the") && text.contains("FULL_DECODE_ONLY"),
        "{text}"
    );
    // The same memory serves eagerly, and with as many sequences as it has blocks.
    // (With requests as short as the blocks hold: vLLM refuses a max_model_len they cannot.)
    let eager = ServingConfig {
        graph: GraphMode::Eager,
        max_model_len: Some(1),
        ..tight.clone()
    };
    let eager_plan = plan(&eager, &model, memory);
    assert!(eager_plan.is_ok(), "{eager_plan:?}");
    let fewer = ServingConfig {
        max_num_seqs: u32::try_from(short.blocks).unwrap(),
        max_model_len: Some(1),
        ..tight
    };
    assert!(plan(&fewer, &model, memory).is_ok());
}
