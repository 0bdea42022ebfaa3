//! Replays measured AFD pipeline steps (`afd-traces` pipeline results, written by `afd-probe
//! pipeline`) through the simulator's own step model and compares predicted with measured step
//! times (issue "Fidelity").
//!
//! Each record is one configuration: one Attention rank and one FFN rank, `tokens` decode tokens
//! over KV caches of `context` tokens, the recorded DBO split, eager or whole-step CUDA graphs, and
//! the routing the FFN's GEMMs saw in every MoE layer and ubatch. It is priced by the same
//! [`price_step`] and swept by the same [`run_step`] that `predict` uses, in the
//! [`StepScope::Forward`] scope (the probe runs no scheduler and no LM head); the recorded routing
//! takes the place of sampled ones. Nothing here knows a measured step time before comparing.
//!
//! It does not read files: the caller hands it parsed results and a cost model.

use afd_traces::pipeline::{PipelineModel, PipelineRecord, PipelineResults};

use crate::cluster::Regime;
use crate::model::arch::ModelArch;
use crate::model::cost::{CostModel, OpClass, PriceBook, UsageCounts, median};
use crate::pipeline::{PipelineLayout, PipelineState, StepCosts, StepTiming, Sweep, run_step};
use crate::pricing::{FfnRows, PriceScratch, StepInputs, StepScope, price_step, routed_index};
use crate::step::{AttentionWork, StepShape};
use crate::time::SimDuration;

/// One configuration, predicted and measured.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplayedStep {
    pub tokens: u32,
    pub context: u32,
    pub dbo: bool,
    pub graph: bool,
    /// Simulated step time, µs (control message to the last receive, as the probe times it).
    pub predicted_us: f64,
    /// Median measured step time, µs.
    pub measured_us: f64,
    /// `(predicted − measured) / measured`.
    pub error: f64,
    /// Device-busy time of the Attention rank, the FFN rank and the links in the simulated step, µs.
    pub attention_busy_us: f64,
    pub ffn_busy_us: f64,
    pub link_busy_us: f64,
    /// The busiest resource of the simulated step.
    pub bound: Regime,
    /// The operation class with the most device time on that resource, and its share of it.
    pub bound_class: OpClass,
    pub bound_share: f64,
}

/// A measured and a predicted ratio of two configurations' step times.
#[derive(Clone, Debug, PartialEq)]
pub struct Gain {
    pub kind: GainKind,
    pub tokens: u32,
    pub context: u32,
    pub measured: f64,
    pub predicted: f64,
}

impl Gain {
    /// `predicted − measured`, in percentage points of the ratio.
    pub fn error_pp(&self) -> f64 {
        100.0 * (self.predicted - self.measured)
    }
}

/// Which ratio a [`Gain`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GainKind {
    /// Step time without DBO over step time with DBO, in the given graph mode.
    Dbo { graph: bool },
    /// Eager step time over graph step time, with or without DBO.
    Graph { dbo: bool },
}

/// Every configuration of a results file replayed, with the summary figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Replay {
    pub steps: Vec<ReplayedStep>,
    /// Median and largest `|error|` over the steps.
    pub median_abs_error: f64,
    pub worst_abs_error: f64,
    /// DBO and graph gains of every (tokens, context) where both configurations were measured.
    pub gains: Vec<Gain>,
    /// Largest `|predicted − measured|` of a gain, percentage points.
    pub worst_gain_pp: f64,
    /// What the replay asked the cost model, per operation class.
    pub usage: UsageCounts,
}

/// Why a results file cannot be replayed; each variant names the field at fault.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReplayError {
    #[error("pipeline results field model.{field} is {results}, but model {model} has {expected}")]
    Model {
        field: &'static str,
        results: u64,
        model: String,
        expected: u64,
    },
    #[error("pipeline results have no records")]
    Empty,
    #[error("pipeline results field records[{record}].{field}: {problem}")]
    Record {
        record: usize,
        field: &'static str,
        problem: String,
    },
}

/// Replays every record of `results` for `model`, priced by `cost` (a cost model for one Attention
/// and one FFN rank without tensor parallelism, experts all on the FFN rank).
pub fn replay(
    results: &PipelineResults,
    model: &ModelArch,
    cost: &CostModel,
) -> Result<Replay, ReplayError> {
    check_model(&results.model, model)?;
    if results.records.is_empty() {
        return Err(ReplayError::Empty);
    }
    let layout = PipelineLayout::single_pair(
        (0..model.layers())
            .map(|l| model.is_dense_layer(l))
            .collect(),
    );
    let mut run = StepRun::default();
    let mut book = PriceBook::new();
    let mut steps = Vec::with_capacity(results.records.len());
    for (index, record) in results.records.iter().enumerate() {
        let routing = recorded_routing(index, record, &layout)?;
        steps.push(replay_record(
            record, &routing, &layout, cost, &mut book, &mut run,
        ));
    }
    let errors: Vec<f64> = steps.iter().map(|s| s.error.abs()).collect();
    let gains = gains(&steps);
    let worst_gain_pp = gains.iter().map(|g| g.error_pp().abs()).fold(0.0, f64::max);
    Ok(Replay {
        worst_abs_error: errors.iter().copied().fold(0.0, f64::max),
        median_abs_error: median(errors).unwrap_or(0.0),
        steps,
        gains,
        worst_gain_pp,
        usage: *book.usage(),
    })
}

/// Buffers reused between records.
#[derive(Default)]
struct StepRun {
    scratch: PriceScratch,
    ffn: FfnRows,
    routed: Vec<SimDuration>,
    costs: StepCosts,
    sweep: Sweep,
    timing: StepTiming,
}

/// `(active experts, max tokens per expert)` of every `[stage][MoE layer]`.
type Routing = Vec<Vec<(u32, u32)>>;

fn replay_record(
    record: &PipelineRecord,
    routing: &Routing,
    layout: &PipelineLayout,
    cost: &CostModel,
    book: &mut PriceBook,
    run: &mut StepRun,
) -> ReplayedStep {
    let shape = shape_of(record);
    let moe_layers = routing.first().map_or(0, Vec::len);
    let routed = &mut run.routed;
    routed.clear();
    routed.resize(shape.stages * moe_layers, SimDuration::ZERO);
    for (s, layers) in routing.iter().enumerate() {
        for (moe, &(active, tpe)) in layers.iter().enumerate() {
            routed[routed_index(true, moe_layers, 1, s, moe, 0)] =
                cost.routed_experts(book, active, tpe);
        }
    }
    run.ffn.fill(layout, &shape);
    let step = StepInputs {
        layout,
        expert_parallel: true,
        shape: &shape,
        ffn: &run.ffn,
        scope: StepScope::Forward,
    };
    price_step(
        cost,
        book,
        step,
        &mut run.scratch,
        &run.routed,
        &mut run.costs,
    );
    let mut state = PipelineState::new(layout);
    run_step(
        layout,
        &run.costs,
        &mut state,
        0,
        &mut run.sweep,
        &mut run.timing,
        None,
        true,
    );
    let timing = &run.timing;
    let us = |ns: u64| ns as f64 / 1e3;
    let predicted_us = us(timing.end - timing.forward_start);
    let measured_us = record.step_us.median_us;
    let (attention, ffn, link) = (
        timing.attention_busy[0],
        timing.ffn_busy[0],
        timing.link_busy[0],
    );
    let bound = if attention >= ffn && attention >= link {
        Regime::Attention
    } else if ffn >= link {
        Regime::Ffn
    } else {
        Regime::Transfer
    };
    let (bound_class, bound_share) = dominant_class(bound, record, routing, cost, book);
    ReplayedStep {
        tokens: record.tokens,
        context: record.context,
        dbo: record.dbo,
        graph: record.graph,
        predicted_us,
        measured_us,
        error: (predicted_us - measured_us) / measured_us,
        attention_busy_us: us(attention),
        ffn_busy_us: us(ffn),
        link_busy_us: us(link),
        bound,
        bound_class,
        bound_share,
    }
}

/// The step as the probe ran it: every ubatch's rows are decode tokens over `context` cached ones.
fn shape_of(record: &PipelineRecord) -> StepShape {
    let mut shape = StepShape {
        graph: record.graph,
        ffn_graph: record.graph,
        stages: record.ubatch_tokens.len(),
        tokens: vec![record.tokens],
        padded: vec![record.tokens],
        sampled: vec![record.tokens],
        ..StepShape::default()
    };
    for (s, &rows) in record.ubatch_tokens.iter().enumerate() {
        shape.work[s] = vec![AttentionWork {
            rows,
            real: rows,
            decode_seqs: rows,
            decode_context: u64::from(rows) * u64::from(record.context),
            prefill: Vec::new(),
        }];
    }
    shape
}

/// The recorded routing of every MoE layer and ubatch, checked complete.
fn recorded_routing(
    index: usize,
    record: &PipelineRecord,
    layout: &PipelineLayout,
) -> Result<Routing, ReplayError> {
    let problem = |field: &'static str, problem: String| ReplayError::Record {
        record: index,
        field,
        problem,
    };
    if record.layers as usize != layout.layers {
        return Err(problem(
            "layers",
            format!(
                "{} layers, but the model has {}",
                record.layers, layout.layers
            ),
        ));
    }
    if !(1..=2).contains(&record.ubatch_tokens.len()) {
        return Err(problem(
            "ubatch_tokens",
            format!("{} ubatches, expected 1 or 2", record.ubatch_tokens.len()),
        ));
    }
    let moe_of: Vec<Option<usize>> = layout
        .dense
        .iter()
        .scan(0, |next, &dense| {
            Some((!dense).then(|| {
                *next += 1;
                *next - 1
            }))
        })
        .collect();
    let moe_layers = moe_of.iter().flatten().count();
    let mut routing = vec![vec![None; moe_layers]; record.ubatch_tokens.len()];
    for (i, entry) in record.routing.iter().enumerate() {
        let Some(Some(moe)) = moe_of.get(entry.layer as usize) else {
            return Err(problem(
                "routing",
                format!(
                    "entry {i} is for layer {}, which has no MoE block",
                    entry.layer
                ),
            ));
        };
        let rows = record.ubatch_tokens[entry.ubatch as usize];
        if entry.active_experts == 0 || entry.max_tokens_per_expert == 0 {
            return Err(problem(
                "routing",
                format!(
                    "entry {i} (layer {}, ubatch {}) has no active expert",
                    entry.layer, entry.ubatch
                ),
            ));
        }
        if entry.max_tokens_per_expert > rows {
            return Err(problem(
                "routing",
                format!(
                    "entry {i} (layer {}, ubatch {}) gives an expert {} tokens of a {rows}-token ubatch",
                    entry.layer, entry.ubatch, entry.max_tokens_per_expert
                ),
            ));
        }
        let slot = &mut routing[entry.ubatch as usize][*moe];
        if slot.is_some() {
            return Err(problem(
                "routing",
                format!(
                    "layer {} ubatch {} appears twice (entry {i})",
                    entry.layer, entry.ubatch
                ),
            ));
        }
        *slot = Some((entry.active_experts, entry.max_tokens_per_expert));
    }
    routing
        .into_iter()
        .enumerate()
        .map(|(ubatch, layers)| {
            layers
                .into_iter()
                .enumerate()
                .map(|(moe, slot)| {
                    slot.ok_or_else(|| {
                        let layer = moe_of.iter().position(|m| *m == Some(moe)).unwrap_or(0);
                        problem(
                            "routing",
                            format!("has no entry for layer {layer} ubatch {ubatch}"),
                        )
                    })
                })
                .collect()
        })
        .collect()
}

/// The class with the most device time on the bounding resource, over the whole step.
fn dominant_class(
    bound: Regime,
    record: &PipelineRecord,
    routing: &Routing,
    cost: &CostModel,
    book: &mut PriceBook,
) -> (OpClass, f64) {
    let layers = f64::from(record.layers);
    let mut totals: Vec<(OpClass, f64)> = Vec::new();
    let mut add = |class: OpClass, us: f64| match totals.iter_mut().find(|(c, _)| *c == class) {
        Some((_, total)) => *total += us,
        None => totals.push((class, us)),
    };
    let us = |d: SimDuration| d.as_us_f64();
    for (s, &rows) in record.ubatch_tokens.iter().enumerate() {
        match bound {
            Regime::Attention => {
                add(
                    OpClass::AttentionProj,
                    layers * us(cost.attention_proj(book, rows)),
                );
                let context = u64::from(rows) * u64::from(record.context);
                add(
                    OpClass::AttentionMlaDecode,
                    layers * us(cost.attention_decode(book, rows, context)),
                );
                add(
                    OpClass::P2p,
                    layers * us(cost.transfer_rows(book, rows).total()),
                );
            }
            Regime::Ffn => {
                let moe_layers = routing[s].len() as f64;
                let dense = layers - moe_layers;
                add(OpClass::MlpDense, dense * us(cost.dense_mlp(book, rows)));
                add(OpClass::MoeRouter, moe_layers * us(cost.router(book, rows)));
                add(
                    OpClass::MoeDispatch,
                    moe_layers * us(cost.moe_dispatch(book, rows)),
                );
                add(
                    OpClass::MoeSharedExperts,
                    moe_layers * us(cost.shared_experts(book, rows)),
                );
                add(
                    OpClass::MoeLayer,
                    moe_layers * (cost.moe_composition_ns(book, rows) as f64 / 1e3).max(0.0),
                );
                for &(active, tpe) in &routing[s] {
                    add(
                        OpClass::MoeRoutedExperts,
                        us(cost.routed_experts(book, active, tpe)),
                    );
                }
            }
            Regime::Transfer => add(
                OpClass::P2p,
                layers * us(cost.transfer_rows(book, rows).total()),
            ),
        }
    }
    let total: f64 = totals.iter().map(|(_, t)| t).sum();
    totals
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map_or((OpClass::P2p, 0.0), |(class, t)| {
            (class, if total > 0.0 { t / total } else { 0.0 })
        })
}

/// DBO gains (no DBO over DBO) per graph mode and graph gains (eager over graph) per DBO mode, for
/// every (tokens, context) where both sides were measured, in record order.
fn gains(steps: &[ReplayedStep]) -> Vec<Gain> {
    let find = |tokens: u32, context: u32, dbo: bool, graph: bool| {
        steps
            .iter()
            .find(|s| (s.tokens, s.context, s.dbo, s.graph) == (tokens, context, dbo, graph))
    };
    let mut out = Vec::new();
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for step in steps {
        if seen.contains(&(step.tokens, step.context)) {
            continue;
        }
        seen.push((step.tokens, step.context));
        let (t, c) = (step.tokens, step.context);
        let pairs = [
            (
                GainKind::Dbo { graph: false },
                (false, false),
                (true, false),
            ),
            (GainKind::Dbo { graph: true }, (false, true), (true, true)),
            (
                GainKind::Graph { dbo: false },
                (false, false),
                (false, true),
            ),
            (GainKind::Graph { dbo: true }, (true, false), (true, true)),
        ];
        for (kind, (dbo_a, graph_a), (dbo_b, graph_b)) in pairs {
            if let (Some(a), Some(b)) = (find(t, c, dbo_a, graph_a), find(t, c, dbo_b, graph_b)) {
                out.push(Gain {
                    kind,
                    tokens: t,
                    context: c,
                    measured: a.measured_us / b.measured_us,
                    predicted: a.predicted_us / b.predicted_us,
                });
            }
        }
    }
    out
}

/// Checks that the model the results were measured with has the dimensions of `model`.
fn check_model(results: &PipelineModel, model: &ModelArch) -> Result<(), ReplayError> {
    let config = &model.config;
    let mla = match &config.attention {
        afd_traces::model_config::Attention::Mla(mla) => Some(mla),
        afd_traces::model_config::Attention::Gqa(_) => None,
    };
    let mla_field = |f: fn(&afd_traces::model_config::MlaAttention) -> u32| mla.map_or(0, f);
    let fields: [(&'static str, u32, u32); 14] = [
        ("hidden_size", results.hidden_size, config.hidden_size),
        ("num_layers", results.num_layers, model.layers()),
        (
            "dense_layers",
            results.dense_layers,
            config.n_dense_layers(),
        ),
        (
            "n_routed_experts",
            results.n_routed_experts,
            config.moe.n_routed_experts,
        ),
        (
            "experts_per_token",
            results.experts_per_token,
            config.moe.experts_per_token,
        ),
        (
            "moe_intermediate_size",
            results.moe_intermediate_size,
            config.moe.intermediate_size,
        ),
        (
            "dense_intermediate_size",
            results.dense_intermediate_size,
            config.dense_intermediate_size,
        ),
        (
            "shared_intermediate_size",
            results.shared_intermediate_size,
            config.moe.shared_intermediate_size,
        ),
        ("num_heads", results.num_heads, mla_field(|m| m.num_heads)),
        (
            "kv_lora_rank",
            results.kv_lora_rank,
            mla_field(|m| m.kv_lora_rank),
        ),
        (
            "qk_nope_head_dim",
            results.qk_nope_head_dim,
            mla_field(|m| m.qk_nope_head_dim),
        ),
        (
            "qk_rope_head_dim",
            results.qk_rope_head_dim,
            mla_field(|m| m.qk_rope_head_dim),
        ),
        (
            "v_head_dim",
            results.v_head_dim,
            mla_field(|m| m.v_head_dim),
        ),
        (
            "dense_layers (leading)",
            results.dense_layers,
            (0..model.layers())
                .take_while(|&l| model.is_dense_layer(l))
                .count() as u32,
        ),
    ];
    for (field, found, expected) in fields {
        if found != expected {
            return Err(ReplayError::Model {
                field,
                results: u64::from(found),
                model: model.name.clone(),
                expected: u64::from(expected),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
