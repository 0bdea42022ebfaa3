//! A trained model's replayed decode step, where the engine profile measured dummy weights.
//!
//! Every committed real-vLLM run served `--load-format dummy`, and that model's router sends every
//! token of a layer, prompt or decode, to the same six experts at any batch: counted from vLLM's
//! own routing (`cal25`, traces/data/vllm/routing/; docs/fidelity.md, "The twenty-fifth batch"),
//! though each step feeds as many distinct tokens as requests (`cal23`, `cal24`). A trained
//! model's router spreads its picks, so its step reads nearly every expert from a dozen requests on.
//!
//! The measured step at the table's smallest batch reads what a trained model's would (one token's
//! experts). From there a trained model's step grows by what the cost model's parts of it grow by
//! with the batch under even routing: the routed experts of the expected active experts, the
//! router, shared experts and dispatch of every MoE layer, every layer's projections, the dense
//! layers. And it costs at least the measured step. What else grows with the batch in vLLM's step
//! (decode attention, the sampler's rows) is left to that floor: counted as the dummy model's
//! experts, it makes the difference the least the measurements allow (the calibration grid's decode
//! attention starts at 512 tokens of context, above the decode tables' bursts).

use crate::model::cost::{CostModel, PriceBook};
use crate::model::workload::{ExpertPopularity, ExpertSampler};
use crate::rng::{RngStream, Seed, stream};

/// Batches the growth is tabulated at; [`super::interpolate`] goes between and past them.
const BATCHES: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

/// Batches of tokens drawn to average the experts a skewed popularity activates.
const DRAWS: u32 = 32;

/// What a uniform decode step of each of [`BATCHES`] requests costs a trained model's parts
/// beyond batch 1's, nanoseconds, its tokens picking experts by `popularity` (the run's
/// `--routing`; even by default).
pub(super) fn decode_growth(cost: &CostModel, popularity: ExpertPopularity) -> Vec<(u32, u64)> {
    let mut book = PriceBook::new();
    let base = step_parts_ns(cost, &mut book, popularity, 1);
    BATCHES
        .iter()
        .map(|&b| {
            let ns = step_parts_ns(cost, &mut book, popularity, b);
            (b, ns.saturating_sub(base))
        })
        .collect()
}

/// The parts of a uniform decode step of `batch` requests that the batch moves, with the routed
/// experts its tokens activate, nanoseconds.
fn step_parts_ns(
    cost: &CostModel,
    book: &mut PriceBook,
    popularity: ExpertPopularity,
    batch: u32,
) -> u64 {
    let model = cost.model();
    let layers = model.layers();
    let dense_layers = (0..layers).filter(|&l| model.is_dense_layer(l)).count() as u64;
    let moe_layers = if model.has_moe() {
        u64::from(layers) - dense_layers
    } else {
        0
    };
    let mut moe = 0;
    if moe_layers > 0 {
        let (experts, top_k) = (model.routed_experts(), model.experts_per_token());
        let active = match popularity {
            ExpertPopularity::Uniform => even_active(experts, top_k, batch),
            ExpertPopularity::PowerLaw { .. } => drawn_active(popularity, experts, top_k, batch),
        };
        let per_expert = (model.experts_per_token() * batch).div_ceil(active.max(1));
        moe = (cost.routed_experts(book, active, per_expert)
            + cost.router(book, batch)
            + cost.moe_dispatch(book, batch)
            + cost.shared_experts(book, batch))
        .as_ns();
    }
    let layer = cost.attention_proj(book, batch).as_ns();
    moe * moe_layers
        + layer * u64::from(layers)
        + cost.dense_mlp(book, batch).as_ns() * dense_layers
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

    /// The H200 profile's parts: at 64 requests even routing reads all 64 experts of each of the
    /// 26 MoE layers where one token reads 6 (`sim/scripts/decode_experts.py` prints the same
    /// figures from the same tables).
    #[test]
    fn a_trained_step_grows_by_the_experts_an_even_routing_reads() {
        let cost = super::super::tests::h200_cost();
        let growth = decode_growth(&cost, ExpertPopularity::Uniform);
        assert_eq!(growth[0], (1, 0));
        assert!(growth.windows(2).all(|w| w[0].1 <= w[1].1), "{growth:?}");
        let at = |b: u32| growth.iter().find(|g| g.0 == b).expect("tabulated").1 as f64 / 1e6;
        // 26 layers of 64 experts against one token's 6: about 6 ms of routed experts more.
        assert!((5.5..7.5).contains(&at(64)), "{}", at(64));
        assert!(at(16) > 0.6 * at(64), "{} {}", at(16), at(64));
    }
}
