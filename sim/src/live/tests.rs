//! The live engine streams every token of every request, one step at a time.

use super::*;
use crate::model::arch::ModelArch;
use crate::model::cost::CostLayout;
use crate::model::hardware::GpuKind;

fn seed_engine() -> LiveEngine {
    let config = ServingConfig::seed_recipe();
    let layout = CostLayout {
        attention_tp: 2,
        ffn_dp: 1,
        ffn_tp: 2,
        expert_parallel: true,
    };
    let cost = CostModel::roofline(&ModelArch::deepseek_v2_lite(), GpuKind::H200, layout);
    LiveEngine::new(&config, cost, ModelOptions::default(), Seed(1)).unwrap()
}

#[test]
fn live_engine_streams_every_token_and_finishes_every_request() {
    let mut engine = seed_engine();
    let a = engine
        .submit(LiveRequest {
            input_tokens: 100,
            output_tokens: 3,
            data_parallel_rank: None,
        })
        .unwrap();
    let b = engine
        .submit(LiveRequest {
            input_tokens: 10,
            output_tokens: 2,
            data_parallel_rank: Some(0),
        })
        .unwrap();
    assert!(
        engine
            .submit(LiveRequest {
                input_tokens: 1,
                output_tokens: 1,
                data_parallel_rank: Some(1)
            })
            .is_err()
    );
    let mut now = SimTime::ZERO;
    let mut streamed = Vec::new();
    let mut finished = Vec::new();
    while let Some(step) = engine.next_step(now) {
        assert!(step.start >= now && step.duration > SimDuration::ZERO);
        now = step.start + step.duration;
        streamed.extend(step.tokens.iter().map(|t| (t.request, t.index)));
        finished.extend(step.finished);
    }
    assert_eq!(streamed.iter().filter(|t| t.0 == a).count(), 3);
    assert_eq!(streamed.iter().filter(|t| t.0 == b).count(), 2);
    finished.sort();
    assert_eq!(finished, vec![a, b]);
    assert!(!engine.has_work());
}

#[test]
fn aborted_requests_leave_their_engine_and_free_their_blocks() {
    let mut engine = seed_engine();
    let a = engine
        .submit(LiveRequest {
            input_tokens: 100,
            output_tokens: 50,
            data_parallel_rank: None,
        })
        .unwrap();
    let step = engine.next_step(SimTime::ZERO).unwrap();
    assert_eq!(
        (
            step.scheduled.clone(),
            step.tokens_per_engine.clone(),
            step.stages
        ),
        (vec![a], vec![64], 2)
    );
    assert!(engine.abort(a));
    assert!(!engine.abort(a));
    assert!(!engine.has_work());
    assert_eq!(engine.queue_lengths(), vec![(0, 0)]);
    assert_eq!(engine.engines(), 1);
}

#[test]
fn live_engine_can_move_to_a_server_thread() {
    fn assert_send<T: Send>() {}
    assert_send::<LiveEngine>();
}

#[test]
fn admission_limits_are_the_ones_submit_enforces() {
    let mut engine = seed_engine();
    let max = engine.max_model_len();
    assert_eq!(max, ModelArch::deepseek_v2_lite().max_position_embeddings());
    let kv = engine.kv_tokens_per_engine();
    assert!(
        kv >= u64::from(max),
        "{kv} KV tokens for max_model_len {max}"
    );
    assert_eq!(
        kv % 16,
        0,
        "whole KV blocks of vLLM 0.26.0's default 16 tokens"
    );
    let too_long = LiveRequest {
        input_tokens: max,
        output_tokens: 1,
        data_parallel_rank: None,
    };
    assert!(matches!(
        engine.submit(too_long),
        Err(Rejection::TooLong { .. })
    ));
    let longest = LiveRequest {
        input_tokens: max - 1,
        output_tokens: 1,
        data_parallel_rank: None,
    };
    assert!(engine.submit(longest).is_ok());

    let mut config = ServingConfig::seed_recipe();
    config.max_model_len = Some(100);
    config.gpu_memory_utilization = 0.2;
    let layout = config.cost_layout();
    let cost = CostModel::roofline(&ModelArch::deepseek_v2_lite(), GpuKind::H200, layout);
    let small = LiveEngine::new(&config, cost, ModelOptions::default(), Seed(1)).unwrap();
    assert_eq!(small.max_model_len(), 100);
    assert!(small.kv_tokens_per_engine() < kv);
}
