//! Pricing of a step by hand arithmetic: eager launch gaps, forward-only scope, composition.

use super::*;
use crate::model::arch::ModelArch;
use crate::model::cost::CostLayout;
use crate::model::hardware::GpuKind;
use crate::step::AttentionWork;

fn one_by_one(model: &ModelArch) -> PipelineLayout {
    PipelineLayout::single_pair(
        (0..model.layers())
            .map(|l| model.is_dense_layer(l))
            .collect(),
    )
}

fn decode_shape(rows: u32, graph: bool) -> StepShape {
    StepShape {
        graph,
        ffn_graph: graph,
        stages: 1,
        work: [
            vec![AttentionWork {
                rows,
                real: rows,
                decode_seqs: rows,
                decode_context: u64::from(rows) * 1024,
                prefill: Vec::new(),
            }],
            Vec::new(),
        ],
        tokens: vec![rows],
        padded: vec![rows],
        sampled: vec![rows],
        dbo_hazard: false,
    }
}

fn price(cost: &CostModel, shape: &StepShape, scope: StepScope) -> StepCosts {
    let model = cost.model().clone();
    let layout = one_by_one(&model);
    let mut costs = StepCosts::default();
    let moe_layers = layout.dense.iter().filter(|&&d| !d).count();
    let routed = vec![SimDuration::from_us(100); shape.stages * moe_layers];
    let mut ffn = FfnRows::default();
    ffn.fill(&layout, shape);
    let step = StepInputs {
        layout: &layout,
        expert_parallel: true,
        shape,
        ffn: &ffn,
        scope,
    };
    price_step(
        cost,
        &mut PriceBook::new(),
        step,
        &mut PriceScratch::default(),
        &routed,
        &mut costs,
    );
    costs
}

#[test]
fn a_forward_pass_has_no_scheduler_time_and_no_lm_head() {
    let model = ModelArch::deepseek_v2_lite();
    let layout = CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: true,
    };
    let cost = CostModel::roofline(&model, GpuKind::H200, layout);
    let shape = decode_shape(8, true);
    let forward = price(&cost, &shape, StepScope::Forward);
    assert_eq!((forward.host.step, forward.lm_head.len()), (0, 0));
    let serving = price(&cost, &shape, StepScope::Serving { scheduled: 8 });
    assert!(serving.host.step > 0 && serving.lm_head.len() == 1);
    // The routed experts the caller priced appear in every MoE layer's FFN time.
    let moe = forward.ffn_post[1];
    assert!(moe > 100_000, "{moe}");
    assert_eq!(forward.ffn_post[1], forward.ffn_post[26]);
}

/// An engine profile measuring an eager step of 50-56 ms by batch (a 64-token prefill adding 4 ms)
/// and the `torch.compile`d model's non-uniform steps (`FULL_DECODE_ONLY` without graphs) at a
/// flat 70 ms.
fn vllm_host(attention_mode: crate::serving::GraphMode) -> crate::model::cost::VllmHost {
    use crate::model::engine::tests::{mode_costs, profile_of};
    use crate::model::engine::{EAGER, EngineModel, FULL_DECODE_ONLY};
    let mut eager = mode_costs(EAGER, vec![(1, 50_000_000), (256, 56_000_000)], 0, 0.0);
    eager.prefill_extra_ns = vec![(64, 4_000_000)];
    let compiled = mode_costs(FULL_DECODE_ONLY, vec![(1, 3_000_000)], 70_000_000, 0.0);
    crate::model::cost::VllmHost {
        engine: std::sync::Arc::new(EngineModel::new(profile_of(vec![eager, compiled], 0))),
        attention_mode,
    }
}

fn one_rank_cost() -> CostModel {
    let layout = CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: true,
    };
    CostModel::roofline(&ModelArch::deepseek_v2_lite(), GpuKind::H200, layout)
}

/// What a plain step issues on its host, as `ColocatedModel::sweep` issues it: the scheduler, an
/// attention block per layer and for the LM head, an FFN block per layer.
fn plain_issue(host: &HostCosts, layers: u64) -> u64 {
    host.step + (layers + 1) * host.attention_compute + layers * host.ffn_compute
}

/// The eager step `vllm_host`'s profile measured at 128 requests (53 ms between its 1- and
/// 256-request points), ns.
const EAGER_STEP_AT_128: f64 = 50_000_000.0 + 6_000_000.0 * 127.0 / 255.0;

/// A 128-request decode step's host costs priced lean and with `host`, and the model's layers;
/// asserts that the parts a plain step issues add up to the profile's step, to rounding.
fn host_costs_at_128(host: crate::model::cost::VllmHost) -> (HostCosts, HostCosts, u64) {
    let lean = one_rank_cost();
    let layers = u64::from(lean.model().layers());
    let shape = decode_shape(128, false);
    let scope = StepScope::Serving { scheduled: 128 };
    let before = price(&lean, &shape, scope).host;
    let after = price(&one_rank_cost().with_vllm_host(host), &shape, scope).host;
    let issued = plain_issue(&after, layers) as f64;
    assert!(
        (issued - EAGER_STEP_AT_128).abs() < 100.0,
        "{issued} against {EAGER_STEP_AT_128}"
    );
    (before, after, layers)
}

#[test]
fn an_afd_step_without_graphs_issues_at_the_pace_vllm_measured_for_its_shape() {
    let (before, after, layers) = host_costs_at_128(vllm_host(crate::serving::GraphMode::Eager));
    let issued = plain_issue(&after, layers);
    assert!(plain_issue(&before, layers) * 10 < issued, "{before:?}");
    // Every part grows by the same factor; what no plain step measured keeps its lean price.
    let ratio = |a: u64, b: u64| a as f64 / b as f64;
    let f = ratio(after.attention_compute, before.attention_compute);
    assert!((ratio(after.ffn_compute, before.ffn_compute) - f).abs() < 0.01 * f);
    assert!((ratio(after.step, before.step) - f).abs() < 0.01 * f);
    assert_eq!(
        (
            after.p2p,
            after.collective,
            after.ffn_loop,
            after.graph_launch
        ),
        (
            before.p2p,
            before.collective,
            before.ffn_loop,
            before.graph_launch
        )
    );
}

#[test]
fn a_measured_division_gives_each_role_its_profiled_part_of_the_plain_step() {
    use afd_traces::vllm_run::RoleShare;
    let mut host = vllm_host(crate::serving::GraphMode::Eager);
    let mut profile = host.engine.profile().clone();
    let share = |tokens, outside_of_step, ffn_of_layers| RoleShare {
        tokens,
        steps: 5,
        outside_of_step,
        ffn_of_layers,
        evidence: "test".into(),
    };
    // At 128 tokens: halfway between 0.2 / 0.3 at 64 and 0.4 / 0.5 at 192.
    profile.role_division = vec![share(64, 0.2, 0.3), share(192, 0.4, 0.5)];
    host.engine = std::sync::Arc::new(crate::model::engine::EngineModel::new(profile));
    let (before, after, layers) = host_costs_at_128(host);
    let measured = EAGER_STEP_AT_128;
    // The FFN role's layers take 0.4 of the 0.7 inside the layers, whatever the lean split says.
    let ffn = (layers * after.ffn_compute) as f64;
    assert!(
        (ffn - measured * 0.7 * 0.4).abs() < 100.0,
        "{ffn} against {}",
        measured * 0.28
    );
    let attention = (layers * after.attention_compute) as f64;
    assert!((attention - measured * 0.7 * 0.6).abs() < 100.0);
    assert!(after.ffn_compute > before.ffn_compute && after.step > before.step);
    assert_eq!(after.ffn_loop, before.ffn_loop);
}

#[test]
fn each_role_issues_in_its_own_mode_and_a_replayed_graph_keeps_its_price() {
    let lean = one_rank_cost();
    let layers = u64::from(lean.model().layers());
    let scope = StepScope::Serving { scheduled: 1 };
    let mode = crate::serving::GraphMode::FullDecodeOnly {
        capture_sizes: vec![64],
    };
    let vllm = one_rank_cost().with_vllm_host(vllm_host(mode));
    // A step without graphs: the Attention role runs the compiled model (70 ms a step), the FFN
    // role `compute_ffn_output` op by op (the eager step: 50 ms at one request, 4 ms for its
    // 64-token prefill).
    let mut shape = decode_shape(1, false);
    shape.work[0][0] = AttentionWork {
        rows: 64,
        real: 64,
        decode_seqs: 0,
        decode_context: 0,
        prefill: vec![(64, 0)],
    };
    shape.tokens = vec![64];
    shape.padded = vec![64];
    let before = price(&lean, &shape, scope).host;
    let after = price(&vllm, &shape, scope).host;
    let lean_sum = plain_issue(&before, layers) as f64;
    let f_attention = after.attention_compute as f64 / before.attention_compute as f64;
    let f_ffn = after.ffn_compute as f64 / before.ffn_compute as f64;
    assert!(
        (f_attention - 70e6 / lean_sum).abs() < 1e-3 * f_attention,
        "{f_attention}"
    );
    assert!((f_ffn - 54e6 / lean_sum).abs() < 1e-3 * f_ffn, "{f_ffn}");
    // The FFN role replays its graph for this shape (afd-spec §5.3, the key aliases a decode
    // graph's): its issue keeps the lean price, the Attention role's does not.
    shape.ffn_graph = true;
    let aliased = price(&vllm, &shape, scope).host;
    assert_eq!(aliased.ffn_compute, before.ffn_compute);
    assert_eq!(aliased.attention_compute, after.attention_compute);
    // A replayed decode step on both sides issues nothing op by op.
    let replayed = decode_shape(8, true);
    let scope = StepScope::Serving { scheduled: 8 };
    assert_eq!(
        price(&vllm, &replayed, scope).host,
        price(&lean, &replayed, scope).host
    );
}

#[test]
fn vllms_host_never_issues_faster_than_the_lean_costs() {
    use crate::model::engine::tests::{mode_costs, profile_of};
    use crate::model::engine::{EAGER, EngineModel};
    let lean = one_rank_cost();
    let quick = mode_costs(EAGER, vec![(1, 1_000)], 0, 0.0);
    let vllm = one_rank_cost().with_vllm_host(crate::model::cost::VllmHost {
        engine: std::sync::Arc::new(EngineModel::new(profile_of(vec![quick], 0))),
        attention_mode: crate::serving::GraphMode::Eager,
    });
    let shape = decode_shape(4, false);
    let scope = StepScope::Serving { scheduled: 4 };
    assert_eq!(
        price(&vllm, &shape, scope).host,
        price(&lean, &shape, scope).host
    );
}
