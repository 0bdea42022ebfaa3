//! Decode first, chunked prefill, limits, preemption by recompute.

use expect_test::{Expect, expect};

use super::*;

fn render(batch: &EngineBatch) -> String {
    batch
        .items
        .iter()
        .map(|i| format!("r{}+{}@{}", i.request.0, i.new_tokens, i.context_before))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Runs `steps` steps of one engine and renders each batch, one line per step.
#[track_caller]
fn check(requests: &[(u32, u32)], limits: (u32, u32), blocks: u64, steps: usize, expect: Expect) {
    let mut states: Vec<RequestState> = requests
        .iter()
        .map(|&(p, o)| RequestState::new(p, o))
        .collect();
    let mut scheduler = EngineScheduler::new(
        SchedulerLimits {
            max_num_seqs: limits.0,
            max_num_batched_tokens: limits.1,
        },
        KvCache::new(4, blocks),
    );
    for i in 0..requests.len() {
        scheduler.add(RequestId(i as u32));
    }
    let mut out = String::new();
    let mut batch = EngineBatch::default();
    for _ in 0..steps {
        scheduler.schedule(&mut states, &mut batch);
        let mut tokens = Vec::new();
        scheduler.finish_step(&mut states, &batch, |t| {
            tokens.push(format!(
                "r{}#{}{}",
                t.request.0,
                t.token_index,
                if t.finished { "!" } else { "" }
            ))
        });
        assert!(scheduler.invariants_hold(&states));
        out.push_str(&format!(
            "{} | preempted {} | {}\n",
            render(&batch),
            batch.preempted,
            tokens.join(" ")
        ));
    }
    expect.assert_eq(&out);
}

#[test]
fn prefill_is_chunked_and_decodes_go_first() {
    check(
        &[(6, 2), (10, 1)],
        (8, 8),
        100,
        4,
        expect![[r#"
            r0+6@0 r1+2@0 | preempted 0 | r0#0
            r0+1@6 r1+7@2 | preempted 0 | r0#1!
            r1+1@9 | preempted 0 | r1#0!
             | preempted 0 | 
        "#]],
    );
}

#[test]
fn max_num_seqs_caps_admission() {
    check(
        &[(1, 2), (1, 2), (1, 2)],
        (2, 64),
        100,
        3,
        expect![[r#"
            r0+1@0 r1+1@0 | preempted 0 | r0#0 r1#0
            r0+1@1 r1+1@1 | preempted 0 | r0#1! r1#1!
            r2+1@0 | preempted 0 | r2#0
        "#]],
    );
}

#[test]
fn running_out_of_blocks_preempts_the_last_running_request() {
    // 3 blocks of 4 tokens: two 4-token prompts fit, the first decode needs a third block, the second
    // request's decode finds none left and preempts itself (it is the last running request).
    check(
        &[(4, 3), (4, 3)],
        (4, 64),
        3,
        4,
        expect![[r#"
            r0+4@0 r1+4@0 | preempted 0 | r0#0 r1#0
            r0+1@4 | preempted 1 | r0#1
            r0+1@5 | preempted 0 | r0#2!
            r1+5@0 | preempted 0 | r1#1
        "#]],
    );
}
