//! The optional terms a derived profile left unmeasured. A term no run measured adds nothing (the
//! tables price those steps alone), which is right only where the term is small on the user's host:
//! `engine-profile` names each one, what its absence means and the plan that measures it, so a
//! profile derived from a few servers on another GPU says what it lacks (docs/probes.md, "Pricing
//! your own host").

use afd_traces::vllm_run::{EngineModeCosts, VllmEngineProfile};

use super::{EAGER, FULL_AND_PIECEWISE, FULL_DECODE_ONLY};

/// A term of a mode's costs: whether a mode has it, whether the derivation measured it (its figure
/// or its evidence), what it is and the committed plan whose workloads measure it on a server of the
/// mode (a plan holds workloads only; `gpu-probes/scripts/vllm-engine.sh` starts the server).
struct Term {
    modes: &'static [&'static str],
    measured: fn(&EngineModeCosts) -> bool,
    what: &'static str,
    /// What the profile does without it.
    absent: &'static str,
    plan: fn(&str) -> &'static str,
}

/// Whether any of a mode's evidence keys starts with `prefix` (a term read as zero still names its
/// records; one never read names none).
fn evidence_has(costs: &EngineModeCosts, prefix: &str) -> bool {
    costs.evidence.keys().any(|k| k.starts_with(prefix))
}

const GRAPH_MODES: &[&str] = &[FULL_DECODE_ONLY, FULL_AND_PIECEWISE];

const TERMS: &[Term] = &[
    Term {
        modes: &[EAGER, FULL_DECODE_ONLY, FULL_AND_PIECEWISE],
        measured: |c| evidence_has(c, "decode_context"),
        what: "the decode step's context slope (streamed decode bursts of 2,048- and 4,096-token \
               prompts)",
        absent: "a decode step costs its table's period at any context",
        plan: |mode| {
            if mode == EAGER {
                "engine-dsv2l-cal-eager-256-8192.json"
            } else {
                "engine-dsv2l-cal-graph-256-8192.json"
            }
        },
    },
    Term {
        modes: GRAPH_MODES,
        measured: |c| evidence_has(c, "graphless_decode"),
        what: "the graph-less decode term (uniform decode bursts past the server's largest capture \
               size, which needs more requests than that: vLLM's default limits take 1,024 over a \
               capture size of 512)",
        absent: "a decode batch past the capture size adds nothing to its step's table price",
        plan: |_| "engine-dsv2l-cal14-piecewise-1024-8192.json",
    },
    Term {
        modes: GRAPH_MODES,
        measured: |c| c.pure_prefill_ratio.is_some(),
        what: "the pure-prefill ratio (lone prompts on an idle engine beside prompts of the same \
               length injected into a small standing decode batch)",
        absent: "a step that prefills beside no decode costs the table's period",
        plan: |mode| {
            if mode == FULL_AND_PIECEWISE {
                "engine-dsv2l-cal8-piecewise-1024-8192.json"
            } else {
                "engine-dsv2l-cal27-graph-256-2048.json"
            }
        },
    },
];

/// A term no run of the derivation measured: the mode it is missing from (none for the front end's
/// stream cost, which every graph mode shares), what it is and the plan that measures it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmeasured {
    pub mode: Option<String>,
    pub what: &'static str,
    pub absent: &'static str,
    pub plan: &'static str,
}

impl std::fmt::Display for Unmeasured {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (prefix, server) = match &self.mode {
            Some(mode) => (format!("{mode}: "), "a server of this mode"),
            None => (String::new(), "a graph mode's server"),
        };
        write!(
            f,
            "{prefix}no run measured {}, so {}; gpu-probes/plans/{}, run on {server}, measures it",
            self.what, self.absent, self.plan
        )
    }
}

const STREAM: &str = "the stream's per-token cost (calibration bench runs of 256 prompts at once \
                      whose pace the front end set)";

/// Every unmeasured term of `profile`, in its mode order, then the front end's stream cost where
/// a graph mode is priced and no run read it.
pub fn unmeasured_terms(profile: &VllmEngineProfile) -> Vec<Unmeasured> {
    let mut out = Vec::new();
    for costs in &profile.modes {
        for term in TERMS {
            if term.modes.contains(&costs.mode.as_str()) && !(term.measured)(costs) {
                out.push(Unmeasured {
                    mode: Some(costs.mode.clone()),
                    what: term.what,
                    absent: term.absent,
                    plan: (term.plan)(&costs.mode),
                });
            }
        }
    }
    let graph = profile.modes.iter().any(|m| m.mode != EAGER);
    if graph && profile.stream_token_ns == 0 {
        out.push(Unmeasured {
            mode: None,
            what: STREAM,
            absent: "every token reaches the client as its step emits it",
            plan: "engine-dsv2l-cal29-graph-256-2048.json",
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use afd_traces::vllm_run::{VllmEngineProfile, builtin_engine_profile};

    use super::unmeasured_terms;

    fn shipped(gpu: &str) -> VllmEngineProfile {
        serde_json::from_str(builtin_engine_profile(gpu).expect("shipped")).expect("reads")
    }

    #[test]
    fn the_h200_profile_measured_every_term_and_the_h100s_names_what_it_lacks() {
        assert_eq!(unmeasured_terms(&shipped("h200")), []);
        let h100 = shipped("h100");
        let terms = unmeasured_terms(&h100);
        let missing: Vec<(Option<&str>, &str)> =
            terms.iter().map(|u| (u.mode.as_deref(), u.plan)).collect();
        assert_eq!(
            missing,
            [
                (Some("eager"), "engine-dsv2l-cal-eager-256-8192.json"),
                (
                    Some("full-decode-only"),
                    "engine-dsv2l-cal-graph-256-8192.json"
                ),
                (
                    Some("full-decode-only"),
                    "engine-dsv2l-cal14-piecewise-1024-8192.json"
                ),
                (
                    Some("full-decode-only"),
                    "engine-dsv2l-cal27-graph-256-2048.json"
                ),
            ]
        );
        let said = terms[3].to_string();
        assert!(
            said.starts_with("full-decode-only: no run measured the pure-prefill ratio"),
            "{said}"
        );
        assert!(said.contains("costs the table's period"), "{said}");
        // A graph mode's profile without the stream's cost says so, once, for no one mode.
        let mut quiet = h100.clone();
        quiet.stream_token_ns = 0;
        let last = unmeasured_terms(&quiet).pop().expect("a term");
        assert_eq!(last.mode, None);
        assert!(
            last.to_string()
                .starts_with("no run measured the stream's per-token cost")
        );
        // An eager-only profile has no stream term to miss.
        quiet.modes.retain(|m| m.mode == "eager");
        assert_eq!(unmeasured_terms(&quiet).len(), 1);
    }
}
