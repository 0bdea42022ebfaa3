//! The periodic shortcut of the layer sweep (the module comment of `pipeline.rs` says why it is
//! exact): snapshots of the lanes, the uniform-shift test and the jump over layers of equal costs.

use super::*;

/// Device times that must shift uniformly for the shortcut: streams, ports, pending arrivals.
pub(super) fn snapshot_device(lanes: &Lanes<'_>, stages: usize, out: &mut Vec<u64>) {
    out.clear();
    out.extend_from_slice(lanes.stream);
    out.extend_from_slice(lanes.fstream);
    out.extend_from_slice(lanes.port_free);
    if stages == 2 {
        out.extend_from_slice(lanes.to_attention[0]);
        out.extend_from_slice(lanes.to_attention[1]);
    }
}

/// Host issue times, Attention ranks first.
pub(super) fn snapshot_hosts(lanes: &Lanes<'_>, out: &mut Vec<u64>) {
    out.clear();
    out.extend_from_slice(lanes.host);
    out.extend_from_slice(lanes.fhost);
}

/// Busy counters, Attention then FFN then links.
pub(super) fn snapshot_busy(lanes: &Lanes<'_>, out: &mut Vec<u64>) {
    out.clear();
    out.extend_from_slice(lanes.attention_busy);
    out.extend_from_slice(lanes.ffn_busy);
    out.extend_from_slice(lanes.link_busy);
}

/// Whether every host timeline either advanced with the devices (by exactly `lambda`, so the
/// whole state shifted uniformly) or advanced more slowly without ever delaying an op this layer
/// (so its lead only shrinks and it never delays one later). Either way the next layers with the
/// same costs repeat this one shifted by `lambda`.
pub(super) fn hosts_never_overtake(
    lanes: &Lanes<'_>,
    previous: &[u64],
    attention_ranks: usize,
    lambda: u64,
) -> bool {
    lanes
        .host
        .iter()
        .chain(lanes.fhost.iter())
        .zip(previous)
        .enumerate()
        .all(|(i, (now, before))| {
            let delta = now - before;
            let won = if i < attention_ranks {
                lanes.attention_host_won
            } else {
                lanes.ffn_host_won
            };
            delta == lambda || (delta < lambda && !won)
        })
}

pub(super) fn uniform_delta(before: &[u64], after: &[u64]) -> Option<u64> {
    let lambda = after[0].checked_sub(before[0])?;
    before
        .iter()
        .zip(after)
        .all(|(b, a)| a.checked_sub(*b) == Some(lambda))
        .then_some(lambda)
}

pub(super) fn advance(lanes: &mut Lanes<'_>, stages: usize, by: u64) {
    lanes.stream.iter_mut().for_each(|t| *t += by);
    lanes.fstream.iter_mut().for_each(|t| *t += by);
    lanes.port_free.iter_mut().for_each(|t| *t += by);
    if stages == 2 {
        for s in 0..2 {
            lanes.to_attention[s].iter_mut().for_each(|t| *t += by);
        }
    }
}

pub(super) fn add_busy(lanes: &mut Lanes<'_>, before: &[u64], now: &[u64], k: u64) {
    let all = lanes
        .attention_busy
        .iter_mut()
        .chain(lanes.ffn_busy.iter_mut())
        .chain(lanes.link_busy.iter_mut());
    for (i, b) in all.enumerate() {
        *b += (now[i] - before[i]) * k;
    }
}

/// Number of layers after `layer` whose FFN costs equal `layer`'s, provided `layer`'s equal
/// `layer - 1`'s (otherwise 0).
pub(super) fn same_cost_run(layout: &PipelineLayout, costs: &StepCosts, layer: usize) -> usize {
    let same = |x: usize, y: usize| {
        if layout.dense[x] != layout.dense[y] {
            return false;
        }
        let width = costs.stages * layout.ffn_ranks;
        let slots = costs.stages;
        costs.ffn_pre[x * width..(x + 1) * width] == costs.ffn_pre[y * width..(y + 1) * width]
            && costs.ffn_post[x * width..(x + 1) * width]
                == costs.ffn_post[y * width..(y + 1) * width]
            && costs.ffn_collective_1[x * slots..(x + 1) * slots]
                == costs.ffn_collective_1[y * slots..(y + 1) * slots]
            && costs.ffn_collective_2[x * slots..(x + 1) * slots]
                == costs.ffn_collective_2[y * slots..(y + 1) * slots]
    };
    if !same(layer, layer - 1) {
        return 0;
    }
    let mut run = 0;
    while layer + run + 1 < layout.layers && same(layer + run + 1, layer) {
        run += 1;
    }
    run
}
