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
