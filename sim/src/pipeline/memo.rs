//! Exact memoisation of the layer sweep: a step's layers as transitions between canonical states.
//!
//! Every operation of the sweep depends only on differences of times (it is a max-plus recurrence
//! with shift-invariant receive and issue rules), so a layer maps the state `S + x` to
//! `F(S) + x`. Between layers the state is put in a canonical form, exactly:
//! - values no later operation can read are dropped (the arrivals at the FFN, and without DBO the
//!   arrivals back at the Attention ranks, are written before they are read again);
//! - values no later operation can notice are raised to the least value that keeps them
//!   unnoticeable: in graph mode a host timeline never advances, so a host behind its stream is
//!   raised to the stream; a port free before every stream of its subgroup is raised to the
//!   earliest of them (every later send to it starts no earlier);
//! - in eager mode a host so far behind its stream that the issue time of a whole step cannot bring
//!   it level can never delay an operation again: it is marked dead, and a dead host is
//!   materialised as time zero (it stays behind every stream for the rest of the step). The bound
//!   is the whole step's, not the layers left, so a transition means the same at every layer;
//! - what is left is written relative to the latest device time `x`.
//!
//! A layer's transition from a canonical state depends only on the state, the layer's FFN costs
//! (its routed experts) and, with DBO, whether it is the first layer (which receives nothing),
//! given everything else the step's costs hold (the context). Transitions
//! are kept per context, so a step whose context was seen before (or a layer whose FFN costs and
//! state repeat within a step) is a table lookup; a transition not seen yet is computed by the
//! reference layer code, from the materialised state. Busy times do not depend on when operations
//! run, only on their costs, so they are summed from the costs. The control payload, the last
//! receives and the LM head run as in the reference sweep.
//!
//! `memo_matches_reference_sweep` (pipeline tests) proves the equality on generated steps, and the
//! integration tests compare whole runs.

use crate::pipeline::{
    FfnCollective, LaneBuffers, Lanes, PipelineLayout, PipelineState, StepCosts, StepTiming, begin,
    control_payload, finish, run_layer,
};

/// States and contexts kept before the memo starts afresh (bounds memory; results never depend on
/// what is kept).
const STATE_BUDGET: usize = 1 << 14;
const CONTEXT_BUDGET: usize = 64;

/// A dead host in a canonical state.
const DEAD: i64 = i64::MIN;

/// Steps through the memo with almost no layer taken from it, in a row, before it is bypassed.
const USELESS_STREAK: u32 = 16;

/// Steps the reference sweep runs alone once the memo is bypassed, before the memo is tried again.
const BYPASS_STEPS: u32 = 256;

/// The memo of one deployment's layer sweep (its layout never changes), with its scratch buffers.
#[derive(Debug, Default)]
pub struct LayerMemo {
    buffers: LaneBuffers,
    contexts: Vec<Automaton>,
    /// Context hash → indices into `contexts`.
    context_index: Index,
    /// The context used last (tried first).
    last: Option<usize>,
    states_kept: usize,
    context: Vec<u64>,
    key: Vec<u64>,
    canonical: Vec<i64>,
    layer_keys: Vec<u32>,
    /// Host issue time a rank has left at a layer boundary: per remaining layer, and after the
    /// last layer (Attention ranks, then FFN ranks).
    issue_per_layer: Vec<u64>,
    issue_final: Vec<u64>,
    /// Steps in a row that took (almost) nothing from the memo, and steps left to bypass it.
    useless: u32,
    bypass: u32,
    /// Run every computed layer from its materialised canonical state (tests: so every layer
    /// depends on the canonical form being exact).
    #[cfg(test)]
    pub(crate) always_materialise: bool,
    /// Layers taken from the memo and layers computed, over the memo's life.
    pub hits: u64,
    pub misses: u64,
}

/// The transitions of one context.
#[derive(Debug, Default)]
struct Automaton {
    context: Vec<u64>,
    states: Interner<i64>,
    keys: Interner<u64>,
    /// Per state: `(layer key, next state, advance of x)`.
    transitions: Vec<Vec<(u32, u32, u64)>>,
}

/// Equal-length vectors stored once each, numbered in order of arrival.
#[derive(Debug, Default)]
struct Interner<T> {
    width: usize,
    data: Vec<T>,
    index: Index,
}

/// Hash → ids; a lookup structure only (never iterated, so no order reaches a result).
#[expect(
    clippy::disallowed_types,
    reason = "a lookup table keyed by a content hash; it is never iterated"
)]
type Index = std::collections::HashMap<u64, Vec<u32>, std::hash::BuildHasherDefault<Identity>>;

/// The content hashes are already uniform; use them as they are.
#[derive(Debug, Default)]
struct Identity(u64);

impl std::hash::Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

impl<T: Copy + PartialEq> Interner<T> {
    fn len(&self) -> usize {
        self.data.len().checked_div(self.width).unwrap_or(0)
    }

    fn get(&self, id: u32) -> &[T] {
        let at = id as usize * self.width;
        &self.data[at..at + self.width]
    }

    /// The id of `value`, adding it when new; `hash` is its content hash.
    fn intern(&mut self, value: &[T], hash: u64) -> (u32, bool) {
        if self.data.is_empty() {
            self.width = value.len();
        }
        debug_assert_eq!(value.len(), self.width, "interned vectors have one width");
        if let Some(ids) = self.index.get(&hash) {
            for &id in ids {
                if self.get(id) == value {
                    return (id, false);
                }
            }
        }
        let id = u32::try_from(self.len()).expect("fewer than 4 billion states");
        self.data.extend_from_slice(value);
        self.index.entry(hash).or_default().push(id);
        (id, true)
    }
}

/// A fast content hash for lookups (equality is always checked after it).
fn hash_u64s(values: &[u64]) -> u64 {
    let mut h = values.len() as u64;
    for &v in values {
        h = (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 29)
}

fn hash_i64s(values: &[i64]) -> u64 {
    let mut h = values.len() as u64;
    for &v in values {
        h = (h.rotate_left(5) ^ v as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    h ^ (h >> 29)
}

impl LayerMemo {
    pub fn new() -> LayerMemo {
        LayerMemo::default()
    }

    /// Whether the next step should go through the memo. When steps keep finding nothing in it
    /// (costs that never repeat, states that never recur), it stands aside for a while and then
    /// tries again; either way the results are the reference sweep's.
    pub fn should_try(&mut self) -> bool {
        if self.bypass > 0 {
            self.bypass -= 1;
            return false;
        }
        true
    }
}

/// Runs one step as [`crate::pipeline::run_step`] does (with the same results), taking layers from
/// `memo` where it can. `timing.shortcut_layers` counts the layers taken from the memo.
pub fn run_step_memo(
    layout: &PipelineLayout,
    costs: &StepCosts,
    state: &mut PipelineState,
    start: u64,
    memo: &mut LayerMemo,
    timing: &mut StepTiming,
) {
    let forward_start = begin(layout, costs, state, start, &mut memo.buffers, timing);
    let PipelineState {
        ffn_ready,
        port_free,
    } = state;
    let LayerMemo {
        buffers,
        contexts,
        context_index,
        last,
        states_kept,
        context,
        key,
        canonical,
        layer_keys,
        issue_per_layer,
        issue_final,
        useless,
        bypass,
        #[cfg(test)]
        always_materialise,
        hits,
        misses,
    } = memo;
    let mut lanes = Lanes::new(buffers, port_free, timing);
    control_payload(layout, costs, ffn_ready, &mut lanes, &mut None);

    if *states_kept > STATE_BUDGET || contexts.len() >= CONTEXT_BUDGET {
        contexts.clear();
        context_index.clear();
        *last = None;
        *states_kept = 0;
    }
    context_of(costs, context);
    let automaton = find_context(contexts, context_index, last, context);
    let automaton = &mut contexts[automaton];
    layer_keys.clear();
    for layer in 0..layout.layers {
        layer_key(layout, costs, layer, key);
        let hash = hash_u64s(key);
        layer_keys.push(automaton.keys.intern(key, hash).0);
    }

    remaining_issue(layout, costs, issue_per_layer, issue_final);
    let issue = Issue {
        per_layer: issue_per_layer,
        last: issue_final,
    };
    let mut x = canonicalise(layout, costs, &mut lanes, &issue, canonical);
    let (mut current, new) = automaton.states.intern(canonical, hash_i64s(canonical));
    if new {
        automaton.transitions.push(Vec::new());
        *states_kept += 1;
    }
    // Whether the lanes hold the current state (they do not after a transition from the memo).
    let mut materialised = true;
    let mut skipped = 0u32;
    for (layer, &key_id) in layer_keys.iter().enumerate() {
        let known = automaton.transitions[current as usize]
            .iter()
            .find(|(k, _, _)| *k == key_id)
            .map(|&(_, next, advance)| (next, advance));
        if let Some((next, advance)) = known {
            current = next;
            x += advance;
            materialised = false;
            skipped += 1;
            *hits += 1;
            continue;
        }
        #[cfg(test)]
        if *always_materialise {
            materialised = false;
        }
        if !materialised {
            materialise(layout, costs, &mut lanes, automaton.states.get(current), x);
        }
        run_layer(layout, costs, &mut lanes, layer, &mut None);
        let after = canonicalise(layout, costs, &mut lanes, &issue, canonical);
        let (next, new) = automaton.states.intern(canonical, hash_i64s(canonical));
        if new {
            automaton.transitions.push(Vec::new());
            *states_kept += 1;
        }
        automaton.transitions[current as usize].push((key_id, next, after - x));
        current = next;
        x = after;
        materialised = true;
        *misses += 1;
    }
    if !materialised {
        materialise(layout, costs, &mut lanes, automaton.states.get(current), x);
    }
    layer_busy(layout, costs, &mut lanes);
    let end = finish(
        layout,
        costs,
        ffn_ready,
        &mut lanes,
        forward_start,
        &mut None,
    );
    timing.shortcut_layers = skipped;
    timing.end = end;
    // Bypass the memo after a streak of steps that took less than half their layers from it (a
    // layer the memo computes costs more than one the reference sweep computes).
    if (skipped as usize) * 2 < layout.layers {
        *useless += 1;
        if *useless >= USELESS_STREAK {
            *useless = 0;
            *bypass = BYPASS_STEPS;
        }
    } else {
        *useless = 0;
    }
}

/// Host issue time left per rank, for the dead-host test of [`canonicalise`].
struct Issue<'a> {
    per_layer: &'a [u64],
    last: &'a [u64],
}

/// An upper bound of the host issue time each rank spends per layer and after the last layer, in
/// eager mode (zero in graph mode, where hosts do not advance).
fn remaining_issue(
    layout: &PipelineLayout,
    costs: &StepCosts,
    per_layer: &mut Vec<u64>,
    last: &mut Vec<u64>,
) {
    let host = &costs.host;
    let stages = costs.stages as u64;
    per_layer.clear();
    last.clear();
    let attention = if costs.attention_graph {
        (0, 0)
    } else {
        (
            stages * (host.attention_compute + 2 * host.p2p + host.collective),
            2 * host.p2p + host.attention_compute,
        )
    };
    for _ in 0..layout.attention_ranks {
        per_layer.push(attention.0);
        last.push(attention.1);
    }
    for block in &layout.blocks {
        let ffn = if costs.ffn_graph {
            0
        } else {
            stages
                * (2 * block.len() as u64 * host.p2p + 2 * host.ffn_compute + 2 * host.collective)
        };
        per_layer.push(ffn);
        last.push(0);
    }
}

/// Everything of `costs` a layer's transition depends on besides its own FFN costs.
fn context_of(costs: &StepCosts, out: &mut Vec<u64>) {
    out.clear();
    let host = &costs.host;
    out.extend_from_slice(&[
        costs.stages as u64,
        u64::from(costs.attention_graph),
        u64::from(costs.ffn_graph),
        host.attention_compute,
        host.p2p,
        host.collective,
        host.ffn_compute,
        host.attention_kernels,
        host.ffn_kernels,
    ]);
    for s in 0..costs.stages {
        for v in [
            &costs.attention_compute[s],
            &costs.attention_all_reduce[s],
            &costs.send_occupancy[s],
            &costs.send_latency[s],
            &costs.send_busy[s],
            &costs.send_back[s],
            &costs.send_back_busy[s],
            &costs.recv_busy[s],
        ] {
            out.push(v.len() as u64);
            out.extend_from_slice(v);
        }
        for curve in &costs.recv_extra[s] {
            out.extend(curve.words());
        }
    }
}

/// A layer's own costs: whether it is dense and, per stage, every FFN rank's compute before and
/// after the dispatch and the collectives.
fn layer_key(layout: &PipelineLayout, costs: &StepCosts, layer: usize, out: &mut Vec<u64>) {
    let f_n = layout.ffn_ranks;
    let stages = costs.stages;
    out.clear();
    out.push(u64::from(layout.dense[layer]) | (u64::from(stages == 2 && layer == 0) << 1));
    let slots = layer * stages..(layer + 1) * stages;
    out.extend_from_slice(&costs.ffn_pre[slots.start * f_n..slots.end * f_n]);
    out.extend_from_slice(&costs.ffn_post[slots.start * f_n..slots.end * f_n]);
    out.extend_from_slice(&costs.ffn_collective_1[slots.clone()]);
    out.extend_from_slice(&costs.ffn_collective_2[slots]);
}

fn find_context(
    contexts: &mut Vec<Automaton>,
    index: &mut Index,
    last: &mut Option<usize>,
    context: &[u64],
) -> usize {
    if let Some(i) = *last
        && contexts[i].context == context
    {
        return i;
    }
    let hash = hash_u64s(context);
    let found = index.get(&hash).and_then(|ids| {
        ids.iter()
            .map(|&i| i as usize)
            .find(|&i| contexts[i].context == context)
    });
    let i = found.unwrap_or_else(|| {
        contexts.push(Automaton {
            context: context.to_vec(),
            ..Automaton::default()
        });
        let i = contexts.len() - 1;
        index
            .entry(hash)
            .or_default()
            .push(u32::try_from(i).expect("fewer than 4 billion contexts"));
        i
    });
    *last = Some(i);
    i
}

/// Puts the lanes in canonical form in place (see the module header) and writes the state, relative
/// to the latest device time, into `out`; returns that time.
fn canonicalise(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    issue: &Issue<'_>,
    out: &mut Vec<i64>,
) -> u64 {
    if costs.attention_graph {
        for (h, &s) in lanes.host.iter_mut().zip(lanes.stream.iter()) {
            *h = (*h).max(s);
        }
    }
    if costs.ffn_graph {
        for (h, &s) in lanes.fhost.iter_mut().zip(lanes.fstream.iter()) {
            *h = (*h).max(s);
        }
    }
    crate::pipeline::raise_ports(layout, lanes);
    let x = lanes
        .stream
        .iter()
        .chain(lanes.fstream.iter())
        .copied()
        .max()
        .unwrap_or(0);
    let rel = |v: u64| v as i64 - x as i64;
    let a_n = layout.attention_ranks;
    let left = layout.layers as u64;
    // A host is dead when even a whole step's issue cannot bring it level with its stream.
    let dead = |rank: usize, host: u64, stream: u64| {
        host.saturating_add(left * issue.per_layer[rank] + issue.last[rank]) <= stream
    };
    out.clear();
    out.extend(lanes.stream.iter().map(|&v| rel(v)));
    for (a, (&h, &s)) in lanes.host.iter().zip(lanes.stream.iter()).enumerate() {
        out.push(if !costs.attention_graph && dead(a, h, s) {
            DEAD
        } else {
            rel(h)
        });
    }
    out.extend(lanes.fstream.iter().map(|&v| rel(v)));
    for (f, (&h, &s)) in lanes.fhost.iter().zip(lanes.fstream.iter()).enumerate() {
        out.push(if !costs.ffn_graph && dead(a_n + f, h, s) {
            DEAD
        } else {
            rel(h)
        });
    }
    out.extend(lanes.port_free.iter().map(|&v| rel(v)));
    if costs.stages == 2 {
        for s in 0..2 {
            out.extend(lanes.to_attention[s].iter().map(|&v| rel(v)));
        }
    }
    x
}

/// Writes the state `state` (relative to `x`) back into the lanes.
fn materialise(
    layout: &PipelineLayout,
    costs: &StepCosts,
    lanes: &mut Lanes<'_>,
    state: &[i64],
    x: u64,
) {
    let a_n = layout.attention_ranks;
    let f_n = layout.ffn_ranks;
    let abs = |v: i64| if v == DEAD { 0 } else { (x as i64 + v) as u64 };
    let mut at = 0;
    let mut fill = |lane: &mut [u64], n: usize| {
        for (slot, &v) in lane.iter_mut().zip(&state[at..at + n]) {
            *slot = abs(v);
        }
        at += n;
    };
    fill(lanes.stream, a_n);
    fill(lanes.host, a_n);
    fill(lanes.fstream, f_n);
    fill(lanes.fhost, f_n);
    fill(lanes.port_free, f_n);
    if costs.stages == 2 {
        let [first, second] = &mut lanes.to_attention;
        fill(first, a_n);
        fill(second, a_n);
    }
}

/// Busy time of every layer, from the costs alone (operations hold their resources for their own
/// durations, whenever they run): what the reference sweep adds up op by op.
fn layer_busy(layout: &PipelineLayout, costs: &StepCosts, lanes: &mut Lanes<'_>) {
    let layers = layout.layers as u64;
    let f_n = layout.ffn_ranks;
    let stages = costs.stages;
    for a in 0..layout.attention_ranks {
        let e = layout.engine_of(a);
        let mut per_layer = 0;
        for s in 0..stages {
            per_layer += costs.attention_compute[s][e];
            if layout.attention_tp > 1 {
                per_layer += costs.attention_all_reduce[s][e];
            }
        }
        lanes.attention_busy[a] = layers * per_layer;
    }
    for (f, block) in layout.blocks.iter().enumerate() {
        let mut per_layer = 0;
        for s in 0..stages {
            for &a in block {
                per_layer +=
                    costs.send_occupancy[s][a] + costs.send_latency[s][a] + costs.send_back[s][a];
            }
        }
        lanes.link_busy[f] = layers * per_layer;
    }
    lanes.ffn_busy.iter_mut().for_each(|b| *b = 0);
    for layer in 0..layout.layers {
        let collective = layout.collective(layer);
        for s in 0..stages {
            let slot = layer * stages + s;
            let shared = match collective {
                FfnCollective::None => 0,
                FfnCollective::AllReduce => costs.ffn_collective_2[slot],
                FfnCollective::AllToAll => {
                    costs.ffn_collective_1[slot] + costs.ffn_collective_2[slot]
                }
            };
            let pre = &costs.ffn_pre[slot * f_n..(slot + 1) * f_n];
            let post = &costs.ffn_post[slot * f_n..(slot + 1) * f_n];
            for ((busy, &pre), &post) in lanes.ffn_busy.iter_mut().zip(pre).zip(post) {
                *busy += pre + post + shared;
            }
        }
    }
}
