//! A trained model's replayed decode step, where the engine profile measured dummy weights.
//!
//! Every committed real-vLLM run served `--load-format dummy`, and that model's router sends every
//! token of a layer, prompt or decode, to the same six experts at any batch: counted from vLLM's
//! own routing (`cal25`, traces/data/vllm/routing/; docs/fidelity.md, "The twenty-fifth batch"),
//! though each step feeds as many distinct tokens as requests (`cal23`, `cal24`). A trained
//! model's router spreads its picks, so its step reads nearly every expert from a dozen requests on.
//!
//! Only the routed experts depend on where the tokens go. The measured step of B requests already
//! holds what vLLM spends on everything else (attention, the router, shared experts, projections,
//! the dense layer, the sampler), and its routed experts are six experts of B tokens each in every
//! MoE layer. A trained model's step is that step with those experts swapped for the ones its
//! tokens activate (an even routing's, or `--routing`'s popularity), both priced by the same
//! calibration table (`moe.routed_experts`), so the difference carries the table's experts and not
//! its kernel's level. At batch 1 the two are the same six experts of one token: the measured step.

use crate::model::cost::{CostModel, PriceBook};
use crate::model::workload::{ExpertPopularity, ExpertSampler};
use crate::rng::{RngStream, Seed, stream};

/// Batches the growth is tabulated at; [`super::interpolate`] goes between and past them.
const BATCHES: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// Batches of tokens drawn to average the experts a skewed popularity activates.
const DRAWS: u32 = 32;

/// What a uniform decode step of each of [`BATCHES`] requests costs a trained model beyond what the
/// dummy model's measured one does, nanoseconds: in every MoE layer, the routed experts its tokens
/// activate by `popularity` (the run's `--routing`; even by default) less the dummy model's six
/// experts of `batch` tokens each; never below zero.
pub(super) fn decode_growth(cost: &CostModel, popularity: ExpertPopularity) -> Vec<(u32, u64)> {
    let model = cost.model();
    if !model.has_moe() {
        return BATCHES.iter().map(|&b| (b, 0)).collect();
    }
    let layers = model.layers();
    let moe_layers = (0..layers).filter(|&l| !model.is_dense_layer(l)).count() as u64;
    let (experts, top_k) = (model.routed_experts(), model.experts_per_token());
    let mut book = PriceBook::new();
    BATCHES
        .iter()
        .map(|&b| {
            let active = match popularity {
                ExpertPopularity::Uniform => even_active(experts, top_k, b),
                ExpertPopularity::PowerLaw { .. } => drawn_active(popularity, experts, top_k, b),
            };
            let per_expert = (top_k * b).div_ceil(active.max(1));
            let trained = cost.routed_experts(&mut book, active, per_expert).as_ns();
            let dummy = cost
                .routed_experts(&mut book, top_k.min(experts), b)
                .as_ns();
            (b, trained.saturating_sub(dummy) * moe_layers)
        })
        .collect()
}

/// The experts `batch` tokens activate on average when each picks `top_k` of `experts` evenly at
/// random, rounded, at least one token's.
fn even_active(experts: u32, top_k: u32, batch: u32) -> u32 {
    if experts == 0 {
        return 0;
    }
    let idle = (1.0 - f64::from(top_k.min(experts)) / f64::from(experts)).powi(batch as i32);
    let active = (f64::from(experts) * (1.0 - idle)).round() as u32;
    active.clamp(top_k.min(experts), experts)
}

/// The experts `batch` tokens activate under `popularity`, averaged over [`DRAWS`] batches drawn
/// as the kernel model draws its routings ([`ExpertSampler`]), rounded, at least one token's.
fn drawn_active(popularity: ExpertPopularity, experts: u32, top_k: u32, batch: u32) -> u32 {
    if experts == 0 || top_k == 0 {
        return 0;
    }
    let top_k = top_k.min(experts);
    let sampler = ExpertSampler::new(popularity, experts, top_k);
    let mut rng = stream(Seed(0), RngStream::TrainedRouting);
    let (mut hit, mut picks, mut total) = (vec![false; experts as usize], Vec::new(), 0u64);
    for _ in 0..DRAWS {
        hit.iter_mut().for_each(|h| *h = false);
        for _ in 0..batch {
            sampler.sample_token(&mut rng, &mut picks);
            for &e in &picks {
                hit[e as usize] = true;
            }
        }
        total += hit.iter().filter(|&&h| h).count() as u64;
    }
    let mean = total as f64 / f64::from(DRAWS);
    (mean.round() as u32).clamp(top_k, experts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn even_routing_leaves_almost_no_expert_idle_from_a_dozen_tokens() {
        assert_eq!(even_active(64, 6, 1), 6);
        assert_eq!(even_active(64, 6, 4), 21);
        assert_eq!(even_active(64, 6, 16), 51);
        assert_eq!(even_active(64, 6, 64), 64);
        assert_eq!(even_active(0, 6, 64), 0);
    }

    #[test]
    fn a_skewed_popularity_activates_fewer_experts_than_an_even_one() {
        let skewed = ExpertPopularity::PowerLaw { exponent: 1.2 };
        assert_eq!(drawn_active(skewed, 64, 6, 1), 6);
        // The draws agree with the closed form where it holds.
        let even = drawn_active(ExpertPopularity::Uniform, 64, 6, 16);
        assert!(even.abs_diff(even_active(64, 6, 16)) <= 1, "{even}");
        for b in [4, 16, 64] {
            assert!(
                drawn_active(skewed, 64, 6, b) < even_active(64, 6, b),
                "{b}"
            );
        }
        assert_eq!(
            drawn_active(skewed, 64, 6, 16),
            drawn_active(skewed, 64, 6, 16)
        );
    }

    /// The H200 profile's table: at 64 requests even routing reads all 64 experts of each of the
    /// 26 MoE layers where the dummy model's tokens read the same six; from a few hundred requests
    /// on the dummy model's six experts carry so many tokens each that the difference narrows.
    #[test]
    fn a_trained_step_costs_the_experts_an_even_routing_reads_beyond_the_dummy_models_six() {
        let cost = super::super::tests::h200_cost();
        let growth = decode_growth(&cost, ExpertPopularity::Uniform);
        // One token: the same six experts either way.
        assert_eq!(growth[0], (1, 0));
        let at = |b: u32| growth.iter().find(|g| g.0 == b).expect("tabulated").1 as f64 / 1e6;
        // 26 layers of 64 experts of 6 tokens against six of 64: about 6 ms more.
        assert!((5.0..7.5).contains(&at(64)), "{growth:?}");
        assert!(at(4) < at(16) && at(16) < at(64), "{growth:?}");
        assert!(at(1024) > 0.0 && at(1024) < at(64), "{growth:?}");
    }
}
