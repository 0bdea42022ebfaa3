//! The shape every rank agrees on for one global step: graph or eager, padding, DBO split, and
//! the rows and attention work of each engine's ubatches.
//!
//! Rules, all from afd-spec:
//! - Every FFN rank steps whenever any Attention DP engine has work; an idle engine runs a dummy
//!   one-token uniform-decode batch and sends one row (§3.8, §3.5).
//! - Graph iff the mode has full decode graphs, every engine is uniform decode and the largest token
//!   count fits the largest decode graph; then every engine is padded to the smallest decode graph
//!   size ≥ that count, agreed across DP (§5.1). Otherwise eager with real counts (Appendix A), or,
//!   under a plain server's `FULL_AND_PIECEWISE`, padded to the next piecewise size when one fits.
//!   Uniform decode is vLLM 0.26.0's test: every request schedules exactly one token, so a
//!   one-token prefill chunk counts as decode (`vllm/v1/worker/gpu_model_runner.py:3857-3875`;
//!   the V2 runner's `get_uniform_token_count`, `vllm/v1/worker/gpu/cudagraph_utils.py:91-105`,
//!   agrees for query length 1). The decode graph sizes are those ≤ `max_num_seqs` (see
//!   `serving::GraphMode`). Across DP the lowest mode wins and the padding is the DP maximum
//!   (`vllm/v1/worker/dp_utils.py:164-225`; `vllm/v1/worker/gpu/dp_utils.py:31-86`).
//! - DBO (§4.2): a rank votes to split when `T ≥ decode threshold` (uniform decode) or
//!   `T ≥ prefill threshold` (otherwise); at DP 1 the split also needs `T ≥ 2` and
//!   `padded // 2 < T`; at DP > 1 every rank must vote yes and keep a non-empty last ubatch, then
//!   AFD forces no split on a rank with `T < 2` — if that leaves ranks disagreeing, the step is
//!   counted as a hazard and run unsplit [inferred]. Eager split steps at DP > 1 are padded to the
//!   DP maximum [upstream, inferred]. Ubatch 0 holds tokens `[0, padded/2)`, ubatch 1 the rest,
//!   cutting a request that straddles the split.
//! - The FFN replays a graph when the Attention replays one; under rule set `v0.26` it also replays
//!   whenever the step's token vector equals a captured key, even for an eager Attention step
//!   (issue #261, §5.3).

use crate::model::scheduler::{EngineBatch, RequestState};
use crate::serving::{GraphMode, ServingConfig};
use crate::topology::RuleSet;

/// Attention-side work of one engine's ubatch on one rank, for one layer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttentionWork {
    /// Rows sent to the FFN (padded, ≥ 1).
    pub rows: u32,
    /// Real tokens among `rows`.
    pub real: u32,
    /// Single-token (decode) sequences and the sum of the contexts they attend to, each rounded up
    /// to whole KV pages (the block size) as the decode kernel reads them.
    pub decode_seqs: u32,
    pub decode_context: u64,
    /// Prefill chunks as `(tokens, cached context before the chunk)`.
    pub prefill: Vec<(u32, u32)>,
}

/// The agreed shape of a global step.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepShape {
    pub graph: bool,
    pub ffn_graph: bool,
    /// 1 or 2 ubatches (stages).
    pub stages: usize,
    /// `work[stage][engine]`.
    pub work: [Vec<AttentionWork>; 2],
    /// Real scheduled tokens per engine.
    pub tokens: Vec<u32>,
    /// Padded tokens per engine (the control payload's count).
    pub padded: Vec<u32>,
    /// Sequences sampled per engine (LM head rows).
    pub sampled: Vec<u32>,
    /// DP ranks disagreed on the split after AFD's `T < 2` veto.
    pub dbo_hazard: bool,
}

impl StepShape {
    /// Rows engine `engine` sends in stage `stage`.
    pub fn rows(&self, stage: usize, engine: usize) -> u32 {
        self.work[stage][engine].rows
    }
}

/// Decides the shape of a step from each engine's batch. `shape` is overwritten (buffers reused).
pub fn plan_step(
    config: &ServingConfig,
    batches: &[EngineBatch],
    requests: &[RequestState],
    shape: &mut StepShape,
) {
    let engines = batches.len();
    shape.tokens.clear();
    shape.tokens.extend(batches.iter().map(|b| b.tokens));
    let uniform = batches.iter().all(EngineBatch::is_uniform_decode);
    // Idle engines run a one-token dummy batch.
    let effective = |e: usize| shape.tokens[e].max(1);
    let max_tokens = (0..engines).map(effective).max().unwrap_or(1);
    let graph_size = if uniform {
        config.graph.padded_size(max_tokens)
    } else {
        None
    };
    shape.graph = graph_size.is_some();
    shape.padded.clear();
    match graph_size.or_else(|| config.graph.piecewise_size(max_tokens)) {
        Some(size) => shape.padded.extend(std::iter::repeat_n(size, engines)),
        None => shape.padded.extend((0..engines).map(effective)),
    }

    let split = decide_split(config, shape, batches, uniform, engines);
    shape.stages = if split { 2 } else { 1 };
    if split && !shape.graph && engines > 1 {
        // Ubatched eager steps are padded to the DP maximum so every rank's ubatches agree.
        shape.padded.iter_mut().for_each(|p| *p = max_tokens);
    }

    for stage in 0..2 {
        shape.work[stage].resize_with(engines, AttentionWork::default);
    }
    shape.sampled.clear();
    for (e, batch) in batches.iter().enumerate() {
        let padded = shape.padded[e];
        let bounds = if split {
            [(0, padded / 2), (padded / 2, padded)]
        } else {
            [(0, padded), (padded, padded)]
        };
        let mut sampled = 0;
        for (stage, &(lo, hi)) in bounds.iter().enumerate().take(shape.stages) {
            let work = &mut shape.work[stage][e];
            fill_work(batch, requests, lo, hi, config.block_size, work);
            work.rows = (hi - lo).max(1);
        }
        for item in &batch.items {
            let state = &requests[item.request.index()];
            if item.context_before + item.new_tokens >= state.known_tokens() {
                sampled += 1;
            }
        }
        shape.sampled.push(sampled);
    }
    shape.ffn_graph =
        shape.graph || (config.rules == RuleSet::V026 && aliases_captured_key(config, shape));
}

fn decide_split(
    config: &ServingConfig,
    shape: &mut StepShape,
    batches: &[EngineBatch],
    uniform: bool,
    engines: usize,
) -> bool {
    shape.dbo_hazard = false;
    let Some(dbo) = config.dbo else { return false };
    let threshold = if uniform {
        dbo.decode_threshold
    } else {
        dbo.prefill_threshold
    };
    let vote = |e: usize| {
        let t = shape.tokens[e].max(1);
        let local_uniform = batches[e].is_uniform_decode();
        let thr = if local_uniform {
            dbo.decode_threshold
        } else {
            dbo.prefill_threshold
        };
        t >= thr
    };
    if engines == 1 {
        let t = shape.tokens[0];
        return t >= 2 && t >= threshold && shape.padded[0] / 2 < t;
    }
    let padded_max = shape.padded.iter().copied().max().unwrap_or(1);
    let agreed = (0..engines).all(|e| vote(e) && padded_max / 2 < shape.tokens[e].max(1));
    if !agreed {
        return false;
    }
    let vetoed = (0..engines).filter(|&e| shape.tokens[e] < 2).count();
    if vetoed > 0 {
        shape.dbo_hazard = vetoed < engines;
        return false;
    }
    true
}

/// Collects the attention work of token positions `[lo, hi)` of an engine's batch.
fn fill_work(
    batch: &EngineBatch,
    requests: &[RequestState],
    lo: u32,
    hi: u32,
    block_size: u32,
    work: &mut AttentionWork,
) {
    work.real = 0;
    work.decode_seqs = 0;
    work.decode_context = 0;
    work.prefill.clear();
    let mut position = 0u32;
    for item in &batch.items {
        let start = position.max(lo);
        let end = (position + item.new_tokens).min(hi);
        if start < end {
            let tokens = end - start;
            work.real += tokens;
            let offset = start - position;
            if item.new_tokens == 1 {
                work.decode_seqs += 1;
                // The decode kernel reads the KV cache a whole page at a time (FlashMLA's 64-token
                // blocks), so a sequence costs what its pages hold.
                let context = item.context_before + 1;
                work.decode_context += u64::from(context.next_multiple_of(block_size.max(1)));
            } else {
                work.prefill.push((tokens, item.context_before + offset));
            }
        }
        position += item.new_tokens;
        if position >= hi {
            break;
        }
    }
    debug_assert!(
        batch
            .items
            .iter()
            .all(|i| requests.len() > i.request.index()),
        "batch refers to a request outside the arena"
    );
}

/// Whether an eager step's per-stage token vector equals a key the FFN captured a graph for.
fn aliases_captured_key(config: &ServingConfig, shape: &StepShape) -> bool {
    let GraphMode::FullDecodeOnly { capture_sizes } = &config.graph else {
        return false;
    };
    let engines = shape.padded.len();
    let all_rows = |stage: usize, value: u32| (0..engines).all(|e| shape.rows(stage, e) == value);
    capture_sizes.iter().any(|&c| {
        if shape.stages == 1 {
            all_rows(0, c)
        } else {
            let splits = config
                .dbo
                .is_some_and(|dbo| c >= 2 && c >= dbo.decode_threshold);
            splits && all_rows(0, c / 2) && all_rows(1, c - c / 2)
        }
    })
}

#[cfg(test)]
mod tests;
