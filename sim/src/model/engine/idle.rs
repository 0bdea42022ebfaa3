//! The idle engine's first step, per graph mode: lone prompts on one server's idle engine set
//! against prompts of the same length injected beside a small standing decode batch of the same
//! server. One server means one host, so the host's speed (which moves these steps by tens of
//! per cent between loans of the same GPU kind) cancels out of the difference.

use std::collections::BTreeMap;

use afd_traces::vllm_run::VllmRun;

use super::{
    EAGER, FULL_AND_PIECEWISE, Injected, STEPPING_FRONTEND_MAX_BATCH, StepTables, interpolate,
    isolated_ttft, median, plain_burst, serve_limits,
};

/// What the first step after an idle spell costs beyond its period in this mode, seconds, at least
/// zero, or `None` when no server of the mode measured a pair.
///
/// The model gives a lone prompt on an idle engine `intake + idle start + step(L, no decode) + rest`
/// and a prompt injected beside a standing batch `intake + standing period / 2 + step(L, decodes) +
/// rest` ([`super::stepping_frontend_s`]). So one pair (a server and a prompt length `L` measured
/// both ways, each side its median) gives `idle start = idle first token − running first token +
/// standing period / 2 + what the standing decodes add to the step in the model`. The median over
/// pairs.
pub(super) fn paired_idle_start_s(
    mode: &str,
    runs: &[(&str, &VllmRun)],
    injected: &[Injected],
    tables: &StepTables,
    decode_period_ns: &[(u32, u64)],
    evidence: &mut BTreeMap<String, String>,
) -> Option<f64> {
    let mut figures = Vec::new();
    for (name, run) in runs {
        let idle = idle_first_tokens(run);
        let mut lengths: Vec<u32> = idle.iter().map(|(l, _, _)| *l).collect();
        lengths.sort_unstable();
        lengths.dedup();
        for length in lengths {
            let running: Vec<&Injected> = injected
                .iter()
                .filter(|i| {
                    i.run == *name
                        && i.input_len == length
                        && i.one_step
                        && i.batch <= STEPPING_FRONTEND_MAX_BATCH
                })
                .collect();
            let (Some(idle_s), Some(running_s), Some(standing_s), Some(decodes_s)) = (
                median(
                    idle.iter()
                        .filter(|(l, _, _)| *l == length)
                        .map(|(_, t, _)| *t)
                        .collect(),
                ),
                median(running.iter().map(|i| i.ttft_s).collect()),
                median(running.iter().map(|i| i.standing_s).collect()),
                median(
                    running
                        .iter()
                        .map(|i| decodes_add_s(mode, i, tables, decode_period_ns))
                        .collect(),
                ),
            ) else {
                continue;
            };
            figures.push(idle_s - running_s + standing_s / 2.0 + decodes_s);
            let sources = idle
                .iter()
                .filter(|(l, _, _)| *l == length)
                .map(|(_, _, workload)| format!("{name}:{workload}"))
                .chain(running.iter().map(|i| i.evidence.clone()));
            let entry = evidence.entry(format!("idle_start_p{length}")).or_default();
            for source in sources {
                if !entry.is_empty() {
                    entry.push_str(", ");
                }
                entry.push_str(&source);
            }
        }
    }
    median(figures).map(|s| s.max(0.0))
}

/// What the standing decodes beside an injected prompt add to its step in the model, seconds: the
/// difference between the step the model prices for it and the same step alone.
fn decodes_add_s(
    mode: &str,
    i: &Injected,
    tables: &StepTables,
    decode_period_ns: &[(u32, u64)],
) -> f64 {
    let decodes = f64::from(i.decoding);
    if mode == EAGER {
        let with = interpolate(decode_period_ns, i.decoding + 1);
        let alone = interpolate(decode_period_ns, 1);
        return with.saturating_sub(alone) as f64 / 1e9;
    }
    if mode == FULL_AND_PIECEWISE && i.tokens <= tables.piecewise_max_tokens {
        return tables.piecewise_decode_s * decodes;
    }
    tables.mixed_decode_s * decodes
}

/// `(prompt length, first token seconds, workload)` of every request that met the server's engine
/// idle and was prefilled in one step: a burst's only request with nothing injected, and an injected
/// request sent once every other request of its burst was done and before any other was sent.
fn idle_first_tokens(run: &VllmRun) -> Vec<(u32, f64, String)> {
    let Some((_, budget)) = serve_limits(run) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for r in &run.records {
        let w = &r.workload;
        let Some(fixed) = &r.fixed else { continue };
        if r.failure.is_some() || !plain_burst(w) {
            continue;
        }
        let requests = &fixed.requests;
        let n = w.num_prompts as usize;
        if n == 1 && w.inject.is_empty() {
            if let Some(ttft) = isolated_ttft(requests) {
                out.push((w.input_len, ttft, w.name.clone()));
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
            if alone {
                out.push((
                    spec.input_len,
                    first - q.sent_s,
                    format!("{}+{}@{}", w.name, spec.input_len, spec.at_s),
                ));
            }
        }
    }
    out.retain(|(length, _, _)| *length <= budget);
    out
}
