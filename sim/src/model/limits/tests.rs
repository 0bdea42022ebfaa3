//! Spans narrow to exactly the values that agree with each comparison, and a run redone with any
//! limits inside its spans is the same run (scheduler decisions, event log, spans).

use proptest::prelude::*;

use super::*;
use crate::engine::{RunOptions, run};
use crate::model::arch::ModelArch;
use crate::model::cost::CostModel;
use crate::model::hardware::GpuKind;
use crate::model::kv_cache::KvCache;
use crate::model::scheduler::{
    EngineBatch, EngineScheduler, RequestId, RequestState, SchedulerLimits,
};
use crate::model::workload::{Arrivals, RandomDataset, random_workload};
use crate::rng::Seed;
use crate::serving::ServingConfig;

/// Values around `anchor` (and the extremes) to check a span against, by brute force.
fn probes(anchor: u64) -> impl Iterator<Item = u64> {
    (anchor.saturating_sub(4)..=anchor.saturating_add(4)).chain([0, u64::MAX])
}

#[test]
fn outcomes_narrow_the_span_from_the_right_side() {
    let mut span = Span::ALL;
    assert!(span.at_least(10, 7));
    assert_eq!(
        span,
        Span {
            lo: 7,
            hi: u64::MAX
        }
    );
    assert!(!span.above(10, 12));
    assert_eq!(span, Span { lo: 7, hi: 12 });
    assert!(span.above(10, 8));
    assert_eq!(span, Span { lo: 9, hi: 12 });
    // A chunk that fits leaves room; one cut by the budget pins the limit.
    assert_eq!(span.chunk(10, 2, 5), 5);
    assert_eq!(span, Span { lo: 9, hi: 12 });
    assert_eq!(span.chunk(10, 4, 5), 5);
    assert_eq!(span, Span { lo: 9, hi: 12 });
    assert_eq!(span.chunk(10, 4, 7), 6);
    assert_eq!(span, Span { lo: 10, hi: 10 });
    assert!(span.contains(10) && !span.contains(9) && !span.contains(11));
    let mut all = Span::ALL;
    assert!(!all.above(u64::MAX, u64::MAX));
    let spans = LimitSpans {
        kv_blocks: Span { lo: 3, hi: 5 },
        ..LimitSpans::ALL
    };
    let values = |kv_blocks| LimitValues {
        max_num_seqs: 1,
        max_num_batched_tokens: 1,
        kv_blocks,
    };
    assert!(spans.contains(values(4)) && !spans.contains(values(6)));
    assert_eq!(
        spans.intersect(LimitSpans {
            kv_blocks: Span { lo: 5, hi: 9 },
            ..LimitSpans::ALL
        }),
        LimitSpans {
            kv_blocks: Span { lo: 5, hi: 5 },
            ..LimitSpans::ALL
        }
    );
}

proptest! {
    /// After one comparison, the span holds exactly the limits that compare the same way.
    #[test]
    fn a_span_holds_exactly_the_limits_that_agree(
        limit in 0u64..64,
        other in 0u64..64,
        need in 0u64..64,
    ) {
        let mut span = Span::ALL;
        let got = span.at_least(limit, other);
        for v in probes(limit).chain(probes(other)) {
            prop_assert_eq!(span.contains(v), (v >= other) == got, "at_least v={}", v);
        }
        let mut span = Span::ALL;
        let got = span.above(limit, other);
        for v in probes(limit).chain(probes(other)) {
            prop_assert_eq!(span.contains(v), (v > other) == got, "above v={}", v);
        }
        let used = other.min(limit);
        let mut span = Span::ALL;
        let got = span.chunk(limit, used, need);
        prop_assert_eq!(got, need.min(limit - used));
        for v in probes(limit).chain(probes(used + need)).filter(|&v| v >= used) {
            prop_assert_eq!(span.contains(v), need.min(v - used) == got, "chunk v={}", v);
        }
    }
}

/// A value of `span` chosen by `pick`, kept inside `[floor, ceiling]` (the span holds `actual`).
fn inside(span: Span, actual: u64, floor: u64, ceiling: u64, pick: u64) -> u64 {
    let lo = span.lo.max(floor);
    let hi = span.hi.min(ceiling.max(actual));
    assert!(lo <= actual && actual <= hi, "{span:?} lost {actual}");
    lo + pick % (hi - lo + 1)
}

/// One engine fed `requests` (prompt, output) a few per step: every batch and token as text, and
/// the spans at the end.
fn drive(requests: &[(u32, u32)], seqs: u32, tokens: u32, blocks: u64) -> (String, LimitSpans) {
    let mut states: Vec<RequestState> = requests
        .iter()
        .map(|&(p, o)| RequestState::new(p, o))
        .collect();
    let limits = SchedulerLimits {
        max_num_seqs: seqs,
        max_num_batched_tokens: tokens,
    };
    let mut engine = EngineScheduler::new(limits, KvCache::new(4, blocks));
    let mut batch = EngineBatch::default();
    let mut out = String::new();
    for step in 0..80 {
        for id in (step * 2..step * 2 + 2).filter(|&i| i < requests.len()) {
            if engine.fits(requests[id].0 + requests[id].1) {
                engine.add(RequestId(id as u32));
            }
        }
        engine.schedule(&mut states, &mut batch);
        for item in &batch.items {
            out.push_str(&format!(
                "r{}+{}@{} ",
                item.request.0, item.new_tokens, item.context_before
            ));
        }
        out.push_str(&format!("p{:?} |", batch.preempted_ids));
        engine.finish_step(&mut states, &batch, |t| {
            out.push_str(&format!(" {}#{}", t.request.0, t.token_index));
        });
        out.push('\n');
    }
    (out, engine.spans())
}

fn small_run(config: &ServingConfig, concurrency: Option<u32>, seed: u64) -> (u64, LimitSpans) {
    let model = ModelArch::deepseek_v2_lite();
    let cost = CostModel::roofline(&model, GpuKind::H200, config.cost_layout());
    let dataset = RandomDataset {
        num_prompts: 10,
        input_len: 60,
        output_len: 5,
        range_ratio: 0.5,
    };
    let arrivals = Arrivals::Gamma {
        rate: 200.0,
        burstiness: 1.0,
    };
    let workload = random_workload(dataset, arrivals, concurrency, Seed(seed)).unwrap();
    let result = run(config, cost, &workload, &RunOptions::new(Seed(seed))).unwrap();
    (result.event_log_hash, result.summary.limit_spans)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Scheduling with any limits inside the spans (KV capacity, preemptions included) makes the
    /// same decisions and ends with the same spans.
    #[test]
    fn an_engine_with_limits_inside_its_spans_schedules_the_same(
        requests in proptest::collection::vec((1u32..40, 1u32..6), 1..24),
        seqs in 1u32..8,
        tokens in 1u32..48,
        blocks in 1u64..40,
        picks in (any::<u64>(), any::<u64>(), any::<u64>()),
    ) {
        let (log, spans) = drive(&requests, seqs, tokens, blocks);
        let seqs2 = inside(spans.max_num_seqs, seqs.into(), 1, 64, picks.0);
        let tokens2 = inside(spans.max_num_batched_tokens, tokens.into(), 1, 256, picks.1);
        let blocks2 = inside(spans.kv_blocks, blocks, 1, 200, picks.2);
        let (again, spans2) = drive(
            &requests,
            u32::try_from(seqs2).unwrap(),
            u32::try_from(tokens2).unwrap(),
            blocks2,
        );
        prop_assert_eq!(again, log);
        prop_assert_eq!(spans2, spans);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    /// A whole run redone with `--max-num-seqs` and `--max-num-batched-tokens` anywhere inside
    /// its spans has the same event log.
    #[test]
    fn a_run_with_limits_inside_its_spans_has_the_same_event_log(
        seqs in 1u32..12,
        tokens in 1u32..160,
        concurrency in proptest::option::of(1u32..8),
        dp in 1u32..3,
        seed in 0u64..1000,
        picks in (any::<u64>(), any::<u64>()),
    ) {
        let mut config = ServingConfig::seed_recipe();
        config.attention.dp = dp;
        config.attention.tp = 2 / dp;
        config.max_num_seqs = seqs;
        config.max_num_batched_tokens = tokens;
        let (hash, spans) = small_run(&config, concurrency, seed);
        config.max_num_seqs =
            u32::try_from(inside(spans.max_num_seqs, seqs.into(), 1, 64, picks.0)).unwrap();
        config.max_num_batched_tokens =
            u32::try_from(inside(spans.max_num_batched_tokens, tokens.into(), 1, 512, picks.1))
                .unwrap();
        let (again, spans2) = small_run(&config, concurrency, seed);
        prop_assert_eq!(again, hash);
        prop_assert_eq!(spans2, spans);
    }
}
