//! A step that prefills beside no decode (every first step of an idle engine), per graph mode and
//! step kind: lone prompts on one server's idle engine set against prompts of the same length
//! injected beside a small standing decode batch of the same server. One server means one host, so
//! the host's speed (which moves these steps by tens of per cent between loans of the same GPU
//! kind) cancels out of the comparison.

use std::collections::BTreeMap;

use afd_traces::vllm_run::VllmRun;

use super::{
    EAGER, FULL_AND_PIECEWISE, Injected, STEPPING_FRONTEND_MAX_BATCH, StepTables,
    TABLE_GROUP_RATIO, isolated_ttft, median, median_over_servers, plain_burst, serve_limits,
};

/// What a step that prefills beside no decode costs against the same step beside decodes in this
/// mode, as ratios `(without graphs, piecewise graphs)` with the most tokens each prices (1.5× the
/// longest prompt of its pairs), each `None` where no server of the mode measured a pair. Eager
/// steps take none: the pairs of the one eager server that measured them
/// (`cal9-eager-256-2048`) give 0.40-1.52, each from one or two running prompts, which meet an eager
/// step of 40-50 ms at a random point of it, and its lone prompts' first tokens (about 2.2 of the
/// request's own decode gaps, 87-127 ms) are what the eager model already gives a step beside no
/// decode: the host's issue of that step and of the next.
///
/// The model gives a lone prompt of `L` tokens on an idle engine `intake + r × step(L, no decode) +
/// rest` and one injected beside a standing batch `intake + standing period / 2 + step(L, decodes) +
/// rest` ([`super::stepping_frontend_s`]), where `step(L, decodes)` is the standing streams' gap
/// while it ran. So one pair (a server and a prompt length measured both ways, each side its
/// median) gives `r = (idle first token − running first token + standing period / 2 + step) /
/// (step − what the standing decodes add to it in the model)`. Of each kind's pairs, the median over
/// servers of each server's median ([`super::median_over_servers`]: a server's pairs ran on one
/// loan; the calibration runs' leave-one-server-out check, 10.6 → 10.2 %).
pub(super) fn pure_prefill_ratios(
    mode: &str,
    runs: &[(&str, &VllmRun)],
    injected: &[Injected],
    tables: &StepTables,
    evidence: &mut BTreeMap<String, String>,
) -> (Option<PureRatio>, Option<PureRatio>) {
    if mode == EAGER {
        return (None, None);
    }
    let (mut graphless, mut piecewise) = (Vec::new(), Vec::new());
    let mut sources: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, run) in runs {
        for (length, lone) in idle_first_tokens(run) {
            let running: Vec<&Injected> = injected
                .iter()
                .filter(|i| {
                    i.run == *name
                        && i.input_len == length
                        && i.one_step
                        && i.batch <= STEPPING_FRONTEND_MAX_BATCH
                })
                .collect();
            let of = |f: &dyn Fn(&Injected) -> f64| median(running.iter().map(|i| f(i)).collect());
            let (Some(idle_s), Some(running_s), Some(standing_s), Some(step_s), Some(decodes_s)) = (
                median(lone.iter().map(|(ttft, _)| *ttft).collect()),
                of(&|i| i.ttft_s),
                of(&|i| i.standing_s),
                of(&|i| i.period_s),
                of(&|i| decodes_add_s(mode, i, tables)),
            ) else {
                continue;
            };
            let alone_s = step_s - decodes_s;
            if alone_s <= 0.0 {
                continue;
            }
            let (figures, key) = if is_piecewise(mode, running[0], tables) {
                (&mut piecewise, "pure_piecewise")
            } else {
                (&mut graphless, "pure_prefill")
            };
            figures.push((
                (idle_s - running_s + standing_s / 2.0 + step_s) / alone_s,
                length,
                *name,
            ));
            sources
                .entry(format!("{key}_p{length}"))
                .or_default()
                .extend(
                    lone.iter()
                        .map(|(_, workload)| format!("{name}:{workload}"))
                        .chain(running.iter().map(|i| i.evidence.clone())),
                );
        }
    }
    for (key, list) in sources {
        evidence.insert(key, list.join(", "));
    }
    // Four decimals: the profile is read and diffed by people.
    let ratio = |figures: Vec<(f64, u32, &str)>| {
        let longest = figures.iter().map(|&(_, length, _)| length).max()?;
        let ratio = median_over_servers(figures.into_iter().map(|(r, _, n)| (n, r)))
            .filter(|r| *r > 0.0)?;
        Some(PureRatio {
            ratio: (ratio * 1e4).round() / 1e4,
            max_tokens: (f64::from(longest) * TABLE_GROUP_RATIO).floor() as u32,
        })
    };
    (ratio(graphless), ratio(piecewise))
}

/// A measured pure-prefill ratio and the most tokens a step it prices schedules (the longest prompt
/// of its pairs, within the tables' grouping reach).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct PureRatio {
    pub(super) ratio: f64,
    pub(super) max_tokens: u32,
}

impl PureRatio {
    /// A profile's ratio and reach; a profile written before the reach existed prices every step.
    pub(super) fn of(ratio: Option<f64>, max_tokens: Option<u32>) -> Option<PureRatio> {
        ratio.map(|ratio| PureRatio {
            ratio,
            max_tokens: max_tokens.unwrap_or(u32::MAX),
        })
    }

    /// The ratio a non-uniform step of `tokens` that prefills beside no decode takes: 1 past the
    /// reach of the pairs that measured it.
    pub(super) fn at(self, tokens: u32) -> f64 {
        if tokens <= self.max_tokens {
            self.ratio
        } else {
            1.0
        }
    }
}

/// Whether the step an injected prompt was prefilled in replayed piecewise graphs.
fn is_piecewise(mode: &str, i: &Injected, tables: &StepTables) -> bool {
    mode == FULL_AND_PIECEWISE
        && !tables.piecewise.is_empty()
        && i.tokens <= tables.piecewise_max_tokens
}

/// What the standing decodes beside an injected prompt add to its step in a graph mode's model,
/// seconds: the decode term of its step kind times the decodes.
fn decodes_add_s(mode: &str, i: &Injected, tables: &StepTables) -> f64 {
    let decodes = f64::from(i.decoding);
    if is_piecewise(mode, i, tables) {
        return tables.piecewise_decode_s * decodes;
    }
    tables.mixed_decode_s * decodes
}

/// By prompt length, `(first token seconds, workload)` of every request that met the server's
/// engine idle and was prefilled in one step: a burst's only request with nothing injected, and an
/// injected request sent once every other request of its burst was done and before any other was
/// sent.
fn idle_first_tokens(run: &VllmRun) -> BTreeMap<u32, Vec<(f64, String)>> {
    let mut out: BTreeMap<u32, Vec<(f64, String)>> = BTreeMap::new();
    let Some((_, budget)) = serve_limits(run) else {
        return out;
    };
    for r in &run.records {
        let w = &r.workload;
        let Some(fixed) = &r.fixed else { continue };
        if r.failure.is_some() || !plain_burst(w) {
            continue;
        }
        let requests = &fixed.requests;
        let n = w.num_prompts as usize;
        if n == 1 && w.inject.is_empty() {
            if let Some(ttft) = isolated_ttft(requests).filter(|_| w.input_len <= budget) {
                out.entry(w.input_len)
                    .or_default()
                    .push((ttft, w.name.clone()));
            }
            continue;
        }
        for (k, (spec, q)) in w.inject.iter().zip(requests.iter().skip(n)).enumerate() {
            let Some(&first) = q.chunk_s.first() else {
                continue;
            };
            let alone = requests.iter().enumerate().all(|(j, other)| {
                j == n + k
                    || other.sent_s >= first
                    || other.done_s.is_some_and(|done| done <= q.sent_s)
            });
            if alone && spec.input_len <= budget {
                out.entry(spec.input_len).or_default().push((
                    first - q.sent_s,
                    format!("{}+{}@{}", w.name, spec.input_len, spec.at_s),
                ));
            }
        }
    }
    out
}
