//! Graph/eager choice, capture-size padding and the DBO split rules of afd-spec §4.2 and §5.1.

use expect_test::{Expect, expect};

use super::*;
use crate::model::scheduler::{RequestId, ScheduledItem};
use crate::serving::DboConfig;

/// Builds one batch per engine from `(new_tokens, context_before)` items and renders the shape.
fn render(config: &ServingConfig, engines: &[&[(u32, u32)]]) -> String {
    let mut requests = Vec::new();
    let batches: Vec<EngineBatch> = engines
        .iter()
        .map(|items| {
            let mut batch = EngineBatch::default();
            for &(new_tokens, context_before) in *items {
                let id = RequestId(requests.len() as u32);
                requests.push(RequestState::new(context_before + new_tokens, 4));
                batch.items.push(ScheduledItem {
                    request: id,
                    new_tokens,
                    context_before,
                });
                batch.tokens += new_tokens;
            }
            batch
        })
        .collect();
    let mut shape = StepShape::default();
    plan_step(config, &batches, &requests, &mut shape);
    let mut out = format!(
        "graph={} ffn_graph={} stages={} padded={:?} hazard={}\n",
        shape.graph, shape.ffn_graph, shape.stages, shape.padded, shape.dbo_hazard
    );
    for stage in 0..shape.stages {
        for (e, w) in shape.work[stage].iter().enumerate() {
            out.push_str(&format!(
                "  u{stage} e{e}: rows={} real={} decode={}@{} prefill={:?}\n",
                w.rows, w.real, w.decode_seqs, w.decode_context, w.prefill
            ));
        }
    }
    out
}

#[track_caller]
fn check(config: &ServingConfig, engines: &[&[(u32, u32)]], expect: Expect) {
    expect.assert_eq(&render(config, engines));
}

fn decodes(n: usize) -> Vec<(u32, u32)> {
    (0..n).map(|i| (1, 100 + i as u32)).collect()
}

#[test]
fn small_decode_batch_pads_to_the_capture_size_without_split() {
    // 32 decodes padded to 64: padded//2 = 32 is not < 32, so no DBO (afd-spec §4.2 table).
    let d = decodes(32);
    check(
        &ServingConfig::seed_recipe(),
        &[&d],
        expect![[r#"
            graph=true ffn_graph=true stages=1 padded=[64] hazard=false
              u0 e0: rows=64 real=32 decode=32@3968 prefill=[]
        "#]],
    );
}

#[test]
fn thirty_three_decodes_split_into_two_padded_ubatches() {
    let d = decodes(33);
    check(
        &ServingConfig::seed_recipe(),
        &[&d],
        expect![[r#"
            graph=true ffn_graph=true stages=2 padded=[64] hazard=false
              u0 e0: rows=32 real=32 decode=32@3968 prefill=[]
              u1 e0: rows=32 real=1 decode=1@144 prefill=[]
        "#]],
    );
}

#[test]
fn mixed_batch_runs_eager_and_cuts_the_prefill_at_the_split() {
    // 4 decodes + a 60-token prefill chunk: eager, 64 >= prefill threshold 12, split at 32.
    let mut items = decodes(4);
    items.push((60, 120));
    check(
        &ServingConfig::seed_recipe(),
        &[&items],
        expect![[r#"
            graph=false ffn_graph=false stages=2 padded=[64] hazard=false
              u0 e0: rows=32 real=32 decode=4@448 prefill=[(28, 120)]
              u1 e0: rows=32 real=32 decode=0@0 prefill=[(32, 148)]
        "#]],
    );
}

#[test]
fn an_eager_step_aliasing_a_capture_key_replays_the_ffn_graph_under_v026() {
    let mut config = ServingConfig::seed_recipe();
    config.rules = RuleSet::V026;
    let mut items = decodes(4);
    items.push((60, 120));
    let text = render(&config, &[&items]);
    assert!(
        text.starts_with("graph=false ffn_graph=true stages=2"),
        "{text}"
    );
}

#[test]
fn an_idle_dp_engine_sends_one_row_and_blocks_dbo() {
    let mut config = ServingConfig::seed_recipe();
    config.attention.dp = 2;
    config.attention.tp = 1;
    config.dbo = Some(DboConfig {
        decode_threshold: 2,
        prefill_threshold: 12,
    });
    let d = decodes(40);
    check(
        &config,
        &[&d, &[]],
        expect![[r#"
            graph=true ffn_graph=true stages=1 padded=[64, 64] hazard=false
              u0 e0: rows=64 real=40 decode=40@5120 prefill=[]
              u0 e1: rows=64 real=0 decode=0@0 prefill=[]
        "#]],
    );
}

#[test]
fn eager_mode_keeps_real_counts_and_idle_ranks_send_one_row() {
    let mut config = ServingConfig::seed_recipe();
    config.attention.dp = 2;
    config.attention.tp = 1;
    config.graph = GraphMode::Eager;
    config.dbo = None;
    let d = decodes(5);
    check(
        &config,
        &[&d, &[]],
        expect![[r#"
            graph=false ffn_graph=false stages=1 padded=[5, 1] hazard=false
              u0 e0: rows=5 real=5 decode=5@560 prefill=[]
              u0 e1: rows=1 real=0 decode=0@0 prefill=[]
        "#]],
    );
}

#[test]
fn a_one_token_prefill_chunk_keeps_the_batch_uniform_decode() {
    // vLLM's test is "every request schedules one token" (gpu_model_runner.py:3857-3875): the last
    // token of a prompt (context 40 of 41) replays the decode graph with the decodes.
    let mut batch = decodes(3);
    batch.push((1, 40));
    check(
        &ServingConfig::seed_recipe(),
        &[&batch],
        expect![[r#"
            graph=true ffn_graph=true stages=1 padded=[64] hazard=false
              u0 e0: rows=64 real=4 decode=4@384 prefill=[]
        "#]],
    );
}

#[test]
fn decode_graphs_stop_at_max_num_seqs_and_pad_to_the_next_size() {
    // Capture sizes [4, 8, 16] with max_num_seqs 8 keep [4, 8] as decode graphs (the 16 graph is
    // never keyed for decode, cudagraph_dispatcher.py:204-232; `serving::GraphMode`), so 5 decodes
    // pad to 8 and a 12-token mixed step is eager.
    let config = ServingConfig {
        max_num_seqs: 8,
        dbo: None,
        graph: GraphMode::FullDecodeOnly {
            capture_sizes: vec![4, 8],
        },
        ..ServingConfig::seed_recipe()
    };
    check(
        &config,
        &[&decodes(5)],
        expect![[r#"
            graph=true ffn_graph=true stages=1 padded=[8] hazard=false
              u0 e0: rows=8 real=5 decode=5@560 prefill=[]
        "#]],
    );
    check(
        &config,
        &[&[(1, 10), (11, 0)]],
        expect![[r#"
            graph=false ffn_graph=false stages=1 padded=[12] hazard=false
              u0 e0: rows=12 real=12 decode=1@16 prefill=[(11, 0)]
        "#]],
    );
}

#[test]
fn a_plain_server_pads_mixed_steps_to_its_piecewise_graphs() {
    let config = ServingConfig {
        dbo: None,
        graph: GraphMode::FullAndPiecewise {
            capture_sizes: vec![4, 8],
            piecewise_sizes: vec![4, 8, 16],
        },
        ..ServingConfig::seed_recipe()
    };
    check(
        &config,
        &[&[(1, 10), (11, 0)]],
        expect![[r#"
            graph=false ffn_graph=false stages=1 padded=[16] hazard=false
              u0 e0: rows=16 real=12 decode=1@16 prefill=[(11, 0)]
        "#]],
    );
}
