//! Top-k routing drawn on the host, and the GEMM plan it fixes.
//!
//! The probes do not route by the router's logits: the expert choice of every token is drawn here from
//! a seeded distribution (uniform, or a power law over a per-layer random ranking of the experts), so
//! the routed GEMM shapes are known before launch and a whole layer can be captured as a CUDA graph.
//! The router GEMM and top-k still run on the GPU so their cost is real.

use std::fmt;
use std::str::FromStr;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How tokens choose experts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Routing {
    /// Every expert equally likely.
    Uniform,
    /// Expert of popularity rank `r` (0-based, a random ranking per layer) weighted `(r + 1)^-alpha`.
    PowerLaw { alpha: f64 },
}

/// Why a routing name could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("unknown routing {0:?}: expected `uniform` or `power-law:ALPHA` with 0 < ALPHA <= 8")]
pub struct RoutingParseError(String);

impl FromStr for Routing {
    type Err = RoutingParseError;

    fn from_str(text: &str) -> Result<Routing, RoutingParseError> {
        if text == "uniform" {
            return Ok(Routing::Uniform);
        }
        let alpha = text
            .strip_prefix("power-law:")
            .and_then(|alpha| alpha.parse::<f64>().ok())
            .filter(|alpha| alpha.is_finite() && *alpha > 0.0 && *alpha <= 8.0)
            .ok_or_else(|| RoutingParseError(text.to_owned()))?;
        Ok(Routing::PowerLaw { alpha })
    }
}

impl fmt::Display for Routing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Routing::Uniform => write!(f, "uniform"),
            Routing::PowerLaw { alpha } => write!(f, "power-law:{alpha}"),
        }
    }
}

/// The routed-expert work of one layer for one batch of tokens.
///
/// Active experts are listed in ascending id order; every active expert's GEMM is padded to
/// `max_tokens_per_expert` rows. Row `a * max_tokens_per_expert + r` of the gathered activations holds
/// token `gather[a * max_tokens_per_expert + r]` (or zeros where that is -1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoutingPlan {
    pub tokens: usize,
    pub experts_per_token: usize,
    /// Expert ids with at least one token, ascending.
    pub active: Vec<u32>,
    /// Tokens per active expert, in the order of `active`.
    pub counts: Vec<u32>,
    pub max_tokens_per_expert: usize,
    /// `active.len() * max_tokens_per_expert` token indices, -1 for padding rows.
    pub gather: Vec<i32>,
    /// `tokens * experts_per_token` gathered-row indices: where token `t`'s `j`-th expert output lies.
    pub slots: Vec<i32>,
}

/// Draws `experts_per_token` distinct experts for each of `tokens` tokens.
///
/// `stream` separates independent draws (layers, ubatches) of one seed.
pub fn draw(
    routing: Routing,
    n_experts: usize,
    experts_per_token: usize,
    tokens: usize,
    seed: u64,
    stream: u64,
) -> Vec<Vec<u32>> {
    assert!(
        experts_per_token <= n_experts,
        "top-{experts_per_token} of {n_experts} experts"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    let weights: Vec<f64> = match routing {
        Routing::Uniform => vec![1.0; n_experts],
        Routing::PowerLaw { alpha } => {
            let mut ranking: Vec<usize> = (0..n_experts).collect();
            shuffle(&mut ranking, &mut rng);
            let mut weights = vec![0.0; n_experts];
            for (rank, &expert) in ranking.iter().enumerate() {
                weights[expert] = ((rank + 1) as f64).powf(-alpha);
            }
            weights
        }
    };
    (0..tokens)
        .map(|_| {
            let mut left = weights.clone();
            let mut chosen = Vec::with_capacity(experts_per_token);
            for _ in 0..experts_per_token {
                let total: f64 = left.iter().sum();
                let mut target = rng.random::<f64>() * total;
                let mut pick = left
                    .iter()
                    .rposition(|&w| w > 0.0)
                    .expect("a choice remains");
                for (expert, &w) in left.iter().enumerate() {
                    if w > 0.0 && target < w {
                        pick = expert;
                        break;
                    }
                    target -= w;
                }
                left[pick] = 0.0;
                chosen.push(pick as u32);
            }
            chosen
        })
        .collect()
}

impl RoutingPlan {
    /// The plan for the given per-token choices over `n_experts` experts.
    pub fn new(choices: &[Vec<u32>], n_experts: usize) -> RoutingPlan {
        let tokens = choices.len();
        let experts_per_token = choices.first().map_or(0, Vec::len);
        let mut per_expert: Vec<Vec<usize>> = vec![Vec::new(); n_experts];
        for (token, experts) in choices.iter().enumerate() {
            assert_eq!(
                experts.len(),
                experts_per_token,
                "ragged top-k at token {token}"
            );
            for &expert in experts {
                per_expert[expert as usize].push(token);
            }
        }
        let active: Vec<u32> = (0..n_experts)
            .filter(|&e| !per_expert[e].is_empty())
            .map(|e| e as u32)
            .collect();
        let counts: Vec<u32> = active
            .iter()
            .map(|&e| per_expert[e as usize].len() as u32)
            .collect();
        let max_tokens_per_expert = counts.iter().copied().max().unwrap_or(0) as usize;
        let mut gather = vec![-1i32; active.len() * max_tokens_per_expert];
        let mut row_of = vec![Vec::new(); tokens];
        for (a, &expert) in active.iter().enumerate() {
            for (r, &token) in per_expert[expert as usize].iter().enumerate() {
                let row = a * max_tokens_per_expert + r;
                gather[row] = token as i32;
                row_of[token].push((expert, row as i32));
            }
        }
        let slots = choices
            .iter()
            .zip(&row_of)
            .flat_map(|(experts, rows)| {
                experts.iter().map(move |expert| {
                    rows.iter()
                        .find(|(e, _)| e == expert)
                        .map(|&(_, row)| row)
                        .expect("every choice has a row")
                })
            })
            .collect();
        RoutingPlan {
            tokens,
            experts_per_token,
            active,
            counts,
            max_tokens_per_expert,
            gather,
            slots,
        }
    }

    /// A synthetic plan with `active` experts spread evenly over `n_experts`, each holding
    /// exactly `tokens_per_expert` rows (the `moe.routed_experts` calibration grid).
    pub fn uniform_grid(n_experts: usize, active: usize, tokens_per_expert: usize) -> RoutingPlan {
        assert!(
            active >= 1 && active <= n_experts,
            "{active} of {n_experts} experts"
        );
        let ids: Vec<u32> = (0..active)
            .map(|a| (a * n_experts / active) as u32)
            .collect();
        RoutingPlan {
            tokens: active * tokens_per_expert,
            experts_per_token: 1,
            counts: vec![tokens_per_expert as u32; active],
            gather: (0..(active * tokens_per_expert) as i32).collect(),
            slots: (0..(active * tokens_per_expert) as i32).collect(),
            active: ids,
            max_tokens_per_expert: tokens_per_expert,
        }
    }

    /// Rows of the padded routed GEMMs (`active × max_tokens_per_expert`).
    pub fn rows(&self) -> usize {
        self.active.len() * self.max_tokens_per_expert
    }

    /// Whether the active experts are exactly `0..n_experts`, so a strided-batched GEMM can run them.
    pub fn is_all_experts(&self, n_experts: usize) -> bool {
        self.active.len() == n_experts
    }
}

fn shuffle(items: &mut [usize], rng: &mut ChaCha8Rng) {
    for i in (1..items.len()).rev() {
        let j = rng.random_range(0..=i);
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests;
