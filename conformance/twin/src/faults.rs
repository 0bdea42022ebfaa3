//! Fault switches of the twin (`--fault NAME[=VALUE]`): each breaks exactly one invariant the conformance
//! suite checks, so the suite's own tests can prove that every invariant can fail.
//!
//! This module only names, parses and describes faults; the Attention and FFN modules consult a
//! [`FaultSet`] where the behaviour changes. docs/twin.md carries the same table for users.

use std::fmt;

use afd_sim::topology::Role;

/// One fault switch, with its parameter where it has one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Unpinned requests go to the most loaded Attention DP engine instead of the least (afd-spec §7.2).
    MisrouteToWrongEngine,
    /// Every `every`-th completion request (1-based: `every`, `2·every`, …) gets its connection closed
    /// without any HTTP response; the engine never sees it.
    DropResponse { every: u64 },
    /// Every completion response is written twice on its connection (keep-alive is switched off so the
    /// copy sits between the response and the end of the stream).
    DuplicateResponse,
    /// `usage.total_tokens` is one more than `prompt_tokens + completion_tokens`.
    WrongUsage,
    /// Streams end after the final chunk without `data: [DONE]`.
    StreamWithoutDone,
    /// The FFN twin listens on its HTTP port and completes requests with 200 (afd-spec §6.4 says it never does).
    FfnAcceptsRequests,
    /// The FFN twin listens on its HTTP port, reads each request and never answers.
    FfnHangsRequests,
    /// `/metrics` carries one engine label too many (`engine="N"` for an Attention DP size of N).
    WrongEngineLabels,
    /// `vllm:request_success_total` counts every finished request twice.
    MetricsNotConserved,
    /// An in-range `X-data-parallel-rank` header is ignored (the request is routed by load); out-of-range
    /// values are still rejected.
    IgnorePinning,
    /// The start-up rank-mapping lines use the Attention-first world order of CAMAsync (afd-spec §2.7).
    WrongRankMappingLog,
    /// The rendezvous accepts a peer whose AFD configuration differs (give it to both roles).
    RendezvousMismatchAccepted,
    /// The first `n` completion requests are served; from request `n + 1` on the engine stops stepping, so
    /// everything in flight and everything later hangs while `/health` still answers 200.
    HangAfterNRequests { n: u64 },
    /// `/health` answers 503 while the twin serves normally.
    HealthLies,
    /// The FFN twin acknowledges each step `delay_ms` late, so every Attention step takes that much longer.
    SlowFfnStep { delay_ms: u64 },
}

/// Static description of one fault, for `--help`, `afd-twin faults` and docs/twin.md.
#[derive(Clone, Copy, Debug)]
pub struct FaultInfo {
    pub name: &'static str,
    /// Parameter name and default, when the fault takes `NAME=VALUE`.
    pub parameter: Option<(&'static str, u64)>,
    /// The role whose behaviour changes.
    pub role: Role,
    /// The one invariant it breaks, as the suite states it.
    pub breaks: &'static str,
    /// What a client observes.
    pub observable: &'static str,
}

/// Every fault, in the order of issue 6 item 5.
pub const CATALOG: &[FaultInfo] = &[
    FaultInfo {
        name: "misroute-to-wrong-engine",
        parameter: None,
        role: Role::Attention,
        breaks: "unpinned requests go to the engine with the least 4*waiting+running (afd-spec §7.2, R8)",
        observable: "a burst of unpinned requests lands entirely on one engine while others stay idle (needs Attention DP >= 2)",
    },
    FaultInfo {
        name: "drop-response",
        parameter: Some(("every", 3)),
        role: Role::Attention,
        breaks: "every request yields exactly one HTTP response (R2)",
        observable: "every EVERY-th completion request has its connection closed with no response at all",
    },
    FaultInfo {
        name: "duplicate-response",
        parameter: None,
        role: Role::Attention,
        breaks: "every request yields exactly one HTTP response (R2)",
        observable: "a raw HTTP/1.1 client reads the same complete response twice on one connection",
    },
    FaultInfo {
        name: "wrong-usage",
        parameter: None,
        role: Role::Attention,
        breaks: "usage.total_tokens = prompt_tokens + completion_tokens (R2)",
        observable: "total_tokens is one too large in every response and in the usage chunk of streams",
    },
    FaultInfo {
        name: "stream-without-done",
        parameter: None,
        role: Role::Attention,
        breaks: "an SSE stream ends with exactly one data: [DONE]",
        observable: "streams end after the finish_reason (and usage) chunks with no [DONE]",
    },
    FaultInfo {
        name: "ffn-accepts-requests",
        parameter: None,
        role: Role::Ffn,
        breaks: "the FFN server never completes a client request (afd-spec §6.4, R7)",
        observable: "the FFN HTTP port answers completions with 200 and a text",
    },
    FaultInfo {
        name: "ffn-hangs-requests",
        parameter: None,
        role: Role::Ffn,
        breaks: "a request sent to the FFN fails within the deadline (afd-spec §6.4, R7)",
        observable: "the FFN HTTP port accepts connections and never answers",
    },
    FaultInfo {
        name: "wrong-engine-labels",
        parameter: None,
        role: Role::Attention,
        breaks: "/metrics engine labels are exactly 0..N-1 for Attention DP size N (R8)",
        observable: "/metrics also carries an idle engine=\"N\"",
    },
    FaultInfo {
        name: "metrics-not-conserved",
        parameter: None,
        role: Role::Attention,
        breaks: "sum over engines of vllm:request_success_total = requests completed (R8)",
        observable: "the success counter grows by 2 per finished request; token counters stay right",
    },
    FaultInfo {
        name: "ignore-pinning",
        parameter: None,
        role: Role::Attention,
        breaks: "a request with X-data-parallel-rank: k runs on engine k (afd-spec §7.2)",
        observable: "pinned requests are routed by load; an out-of-range rank is still rejected with 400",
    },
    FaultInfo {
        name: "wrong-rank-mapping-log",
        parameter: None,
        role: Role::Attention,
        breaks: "the logged rank mapping equals the computed one (afd-spec §2.2, §2.4)",
        observable: "AFD rank mapping lines give world ranks in Attention-first order (both roles when given to both)",
    },
    FaultInfo {
        name: "rendezvous-mismatch-accepted",
        parameter: None,
        role: Role::Attention,
        breaks: "a pair whose AFD configurations differ refuses to start (DESIGN §3 cross-role rules)",
        observable: "a mismatched pair (both roles given the fault) serves instead of aborting",
    },
    FaultInfo {
        name: "hang-after-n-requests",
        parameter: Some(("n", 10)),
        role: Role::Attention,
        breaks: "every accepted request finishes and the queues drain to zero (liveness)",
        observable: "from request N+1 on nothing completes; running/waiting stay above zero; /health stays 200",
    },
    FaultInfo {
        name: "health-lies",
        parameter: None,
        role: Role::Attention,
        breaks: "/health returns 200 while the engine is alive (R9)",
        observable: "/health answers 503 although completions succeed",
    },
    FaultInfo {
        name: "slow-ffn-step",
        parameter: Some(("delay_ms", 50)),
        role: Role::Ffn,
        breaks: "token timing follows the simulator's prediction of the deployment (TPOT/ITL within tolerance)",
        observable: "every inter-token gap grows by DELAY_MS",
    },
];

/// Why a `--fault` value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FaultError {
    #[error("unknown fault '{name}'; known faults: {known}")]
    Unknown { name: String, known: String },
    #[error("fault '{name}' takes no value, got '{value}'")]
    UnexpectedValue { name: String, value: String },
    #[error("fault '{name}': {parameter} must be a positive integer, got '{value}'")]
    BadValue {
        name: String,
        parameter: &'static str,
        value: String,
    },
}

impl Fault {
    /// Parses `NAME` or `NAME=VALUE`.
    pub fn parse(text: &str) -> Result<Fault, FaultError> {
        let (name, value) = match text.split_once('=') {
            Some((name, value)) => (name.trim(), Some(value.trim())),
            None => (text.trim(), None),
        };
        let Some(info) = CATALOG.iter().find(|info| info.name == name) else {
            return Err(FaultError::Unknown {
                name: name.to_owned(),
                known: CATALOG
                    .iter()
                    .map(|info| info.name)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let parameter = match (info.parameter, value) {
            (None, None) => 0,
            (None, Some(value)) => {
                return Err(FaultError::UnexpectedValue {
                    name: name.to_owned(),
                    value: value.to_owned(),
                });
            }
            (Some((_, default)), None) => default,
            (Some((parameter, _)), Some(value)) => match value.parse::<u64>() {
                Ok(v) if v > 0 => v,
                _ => {
                    return Err(FaultError::BadValue {
                        name: name.to_owned(),
                        parameter,
                        value: value.to_owned(),
                    });
                }
            },
        };
        Ok(match info.name {
            "misroute-to-wrong-engine" => Fault::MisrouteToWrongEngine,
            "drop-response" => Fault::DropResponse { every: parameter },
            "duplicate-response" => Fault::DuplicateResponse,
            "wrong-usage" => Fault::WrongUsage,
            "stream-without-done" => Fault::StreamWithoutDone,
            "ffn-accepts-requests" => Fault::FfnAcceptsRequests,
            "ffn-hangs-requests" => Fault::FfnHangsRequests,
            "wrong-engine-labels" => Fault::WrongEngineLabels,
            "metrics-not-conserved" => Fault::MetricsNotConserved,
            "ignore-pinning" => Fault::IgnorePinning,
            "wrong-rank-mapping-log" => Fault::WrongRankMappingLog,
            "rendezvous-mismatch-accepted" => Fault::RendezvousMismatchAccepted,
            "hang-after-n-requests" => Fault::HangAfterNRequests { n: parameter },
            "health-lies" => Fault::HealthLies,
            "slow-ffn-step" => Fault::SlowFfnStep {
                delay_ms: parameter,
            },
            other => unreachable!("catalog entry {other} has no Fault variant"),
        })
    }

    /// The catalogue entry of this fault.
    pub fn info(self) -> &'static FaultInfo {
        let name = self.name();
        CATALOG
            .iter()
            .find(|info| info.name == name)
            .expect("every Fault variant has a catalog entry")
    }

    /// The switch name, without its value.
    pub fn name(self) -> &'static str {
        match self {
            Fault::MisrouteToWrongEngine => "misroute-to-wrong-engine",
            Fault::DropResponse { .. } => "drop-response",
            Fault::DuplicateResponse => "duplicate-response",
            Fault::WrongUsage => "wrong-usage",
            Fault::StreamWithoutDone => "stream-without-done",
            Fault::FfnAcceptsRequests => "ffn-accepts-requests",
            Fault::FfnHangsRequests => "ffn-hangs-requests",
            Fault::WrongEngineLabels => "wrong-engine-labels",
            Fault::MetricsNotConserved => "metrics-not-conserved",
            Fault::IgnorePinning => "ignore-pinning",
            Fault::WrongRankMappingLog => "wrong-rank-mapping-log",
            Fault::RendezvousMismatchAccepted => "rendezvous-mismatch-accepted",
            Fault::HangAfterNRequests { .. } => "hang-after-n-requests",
            Fault::HealthLies => "health-lies",
            Fault::SlowFfnStep { .. } => "slow-ffn-step",
        }
    }

    /// Whether this fault changes the behaviour of the given role. `wrong-rank-mapping-log` and
    /// `rendezvous-mismatch-accepted` act on whichever role is given them.
    pub fn acts_on(self, role: Role) -> bool {
        match self {
            Fault::WrongRankMappingLog | Fault::RendezvousMismatchAccepted => true,
            other => other.info().role == role,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Fault::DropResponse { every } => write!(f, "drop-response={every}"),
            Fault::HangAfterNRequests { n } => write!(f, "hang-after-n-requests={n}"),
            Fault::SlowFfnStep { delay_ms } => write!(f, "slow-ffn-step={delay_ms}"),
            other => f.write_str(other.name()),
        }
    }
}

/// The faults switched on for one twin process. Empty for a correct twin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultSet {
    faults: Vec<Fault>,
}

impl FaultSet {
    /// Builds the set; a fault given twice keeps its last value.
    pub fn new(faults: impl IntoIterator<Item = Fault>) -> FaultSet {
        let mut set = FaultSet::default();
        for fault in faults {
            set.faults.retain(|f| f.name() != fault.name());
            set.faults.push(fault);
        }
        set
    }

    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = Fault> + '_ {
        self.faults.iter().copied()
    }

    /// Whether the fault named like `fault` is on (its value is ignored).
    pub fn has(&self, fault: Fault) -> bool {
        self.faults.iter().any(|f| f.name() == fault.name())
    }

    pub fn drop_every(&self) -> Option<u64> {
        self.faults.iter().find_map(|f| match f {
            Fault::DropResponse { every } => Some(*every),
            _ => None,
        })
    }

    pub fn hang_after(&self) -> Option<u64> {
        self.faults.iter().find_map(|f| match f {
            Fault::HangAfterNRequests { n } => Some(*n),
            _ => None,
        })
    }

    pub fn ffn_step_delay_ms(&self) -> Option<u64> {
        self.faults.iter().find_map(|f| match f {
            Fault::SlowFfnStep { delay_ms } => Some(*delay_ms),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests;
