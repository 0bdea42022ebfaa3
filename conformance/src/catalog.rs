//! The invariant catalog: every property `afd-conformance run` checks, each with a stable id, a one-line
//! statement, where it comes from, its kind and how it can end indeterminate.
//!
//! Two sources make up the catalog: the suite's own invariants ([`OWN`]), and the deployment rules of
//! `afd_sim::deployment` (one static invariant per rule id, run on the deployment as launched). Ids never
//! change meaning; a retired invariant keeps its id out of use. Nothing here checks anything.

use std::fmt;

use afd_sim::deployment::rules as deployment_rules;

/// When an invariant can be judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// On the deployment as launched: no server needed.
    Static,
    /// On the live pair, from a fixed set of requests and scrapes.
    Live,
    /// On the live pair, after every step of random sequences checked against the reference model.
    Stateful,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Static => "static",
            Kind::Live => "live",
            Kind::Stateful => "stateful",
        }
    }

    pub const ALL: [Kind; 3] = [Kind::Static, Kind::Live, Kind::Stateful];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an invariant is about; one JUnit test suite per area.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Area {
    /// Deployment rules of the recipe or flags (afd-spec §1, DESIGN §3).
    Deployment,
    /// Rank mapping (afd-spec §2).
    RankMapping,
    /// OpenAI API contract of the Attention server (afd-spec §7.4).
    Api,
    /// SSE streaming framing.
    Streaming,
    /// Data-parallel routing and metric conservation (afd-spec §7.2).
    Routing,
    /// The FFN server's HTTP port (afd-spec §6.4).
    Ffn,
    /// Greedy-output repeatability.
    Greedy,
    /// Token timing against a service-level objective or the simulator's prediction.
    Timing,
    /// Requests finish; broken launches do not serve.
    Liveness,
    /// Random sequences against the reference model.
    Stateful,
}

impl Area {
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Deployment => "deployment",
            Area::RankMapping => "rank-mapping",
            Area::Api => "api",
            Area::Streaming => "streaming",
            Area::Routing => "routing",
            Area::Ffn => "ffn",
            Area::Greedy => "greedy",
            Area::Timing => "timing",
            Area::Liveness => "liveness",
            Area::Stateful => "stateful",
        }
    }
}

impl fmt::Display for Area {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invariant {
    /// Stable id, `area.name` (`routing.request-conservation`; deployment rules keep their rule id).
    pub id: &'static str,
    /// What must hold, in one line.
    pub statement: &'static str,
    /// Where it comes from: an afd-spec §, an R-number of afd-spec §7.4, or the vLLM/OpenAI behaviour.
    pub source: &'static str,
    pub kind: Kind,
    pub area: Area,
    /// How a run can end neither pass nor fail on it (and when it is skipped).
    pub indeterminate: &'static str,
}

macro_rules! own {
    ($($id:literal, $kind:ident, $area:ident, $source:literal, $statement:literal, $indeterminate:literal;)+) => {
        /// The suite's own invariants, in report order.
        pub const OWN: &[Invariant] = &[
            $(Invariant {
                id: $id,
                statement: $statement,
                source: $source,
                kind: Kind::$kind,
                area: Area::$area,
                indeterminate: $indeterminate,
            }),+
        ];
    };
}

own! {
    "mapping.rendezvous-listeners", Live, RankMapping, "afd-spec §2.3, §7.4",
    "the AFD host accepts TCP connections on every rendezvous port the deployment's mapping names",
    "indeterminate when the AFD host cannot be reached at all (timeouts, no route); skipped without a deployment";
    "mapping.log-attention", Live, RankMapping, "afd-spec §2.2, §2.4, §7.4",
    "the Attention log's rank-mapping lines, one per Attention rank, equal the computed mapping",
    "skipped without --attention-log; indeterminate when the log has no `AFD rank mapping:` lines (vLLM does not print them)";
    "mapping.log-ffn", Live, RankMapping, "afd-spec §2.2, §2.4, §7.4",
    "the FFN log's rank-mapping lines, one per FFN rank, equal the computed mapping",
    "skipped without --ffn-log; indeterminate when the log has no `AFD rank mapping:` lines (vLLM does not print them)";
    "mapping.engine-labels", Live, RankMapping, "afd-spec §7.2, §7.4 R8",
    "the engine labels on vllm: series of /metrics are exactly 0..N-1 for Attention DP size N",
    "indeterminate when /metrics cannot be scraped or the DP size is unknown (no deployment, no --attention-dp)";
    "api.models-ready", Live, Api, "afd-spec §7.4 R1",
    "GET /v1/models answers 200 with a model list that names the served model",
    "indeterminate when the request times out";
    "api.health", Live, Api, "afd-spec §7.4 R9",
    "GET /health answers 200 while the engine serves completions",
    "indeterminate when the request times out";
    "api.completion-shape", Live, Api, "afd-spec §7.4 R2; OpenAI completions",
    "a non-streaming completion is a text_completion with one choice (index 0, non-empty text) and integer usage",
    "indeterminate when no completion came back (see api.one-response)";
    "api.chat-shape", Live, Api, "OpenAI chat completions as vLLM serves them",
    "a non-streaming chat completion is a chat.completion with one choice whose message is an assistant message with non-empty content",
    "indeterminate when no chat completion came back";
    "api.usage-arithmetic", Live, Api, "afd-spec §7.4 R2",
    "usage.total_tokens = prompt_tokens + completion_tokens with completion_tokens > 0, in every response and usage chunk",
    "indeterminate when no response carried usage";
    "api.finish-reason", Live, Api, "afd-spec §7.4 R2; OpenAI finish_reason",
    "finish_reason is stop or length, completion_tokens never exceeds max_tokens, and length means max_tokens was reached",
    "indeterminate when no response came back";
    "api.ignore-eos-length", Live, Api, "vLLM ignore_eos; MLPerf TEST09",
    "with ignore_eos and max_tokens n, completion_tokens is exactly n and finish_reason is length",
    "indeterminate when no response came back";
    "api.unknown-model", Live, Api, "afd-spec §7.4 R3",
    "a request naming a model the server does not serve is answered 404 in the error shape (streaming or not)",
    "indeterminate when the request times out";
    "api.error-shape", Live, Api, "vLLM >= 0.10.1 error format; probe-conformance-anchors §4.5; vllm/entrypoints/openai/completion/protocol.py:558",
    "a malformed request (bad JSON, wrong types, max_tokens < 1) is answered 400 in the {error: {message, type, param, code}} shape (a non-object JSON body: 4xx or 5xx)",
    "indeterminate when the requests time out";
    "api.request-id-echo", Live, Api, "vLLM --enable-request-id-headers",
    "an X-Request-Id header on a response equals the one sent, and with --enable-request-id-headers every response carries it",
    "indeterminate when no response came back";
    "api.one-response", Live, Api, "afd-spec §7.4 R2",
    "every request gets exactly one complete HTTP response: never a connection closed without one, never bytes after it (a duplicate)",
    "requests that timed out are not judged here (see liveness.completes)";
    "sse.framing", Live, Streaming, "OpenAI streaming; text/event-stream",
    "a stream is text/event-stream of `data: <json>` events separated by blank lines, each a chunk of the endpoint's object type with one id",
    "indeterminate when no stream came back";
    "sse.single-done", Live, Streaming, "OpenAI streaming; probe-conformance-anchors §4.5",
    "a stream ends with exactly one `data: [DONE]`, as its last event",
    "indeterminate when no stream came back";
    "sse.finish-once", Live, Streaming, "OpenAI streaming",
    "exactly one chunk of a stream carries a finish_reason (stop or length) and no text follows it",
    "indeterminate when no stream came back";
    "sse.usage", Live, Streaming, "OpenAI stream_options.include_usage",
    "with include_usage the stream's usage chunk has no choices, consistent arithmetic and completion_tokens >= the chunks that carried text",
    "indeterminate when no stream came back";
    "routing.request-conservation", Live, Routing, "afd-spec §7.4 R8; probe-conformance-anchors §5",
    "the sum over engines of the change in vllm:request_success_total equals the responses the client completed",
    "indeterminate when some request timed out (it may or may not have finished) or /metrics cannot be scraped";
    "routing.token-conservation", Live, Routing, "probe-conformance-anchors §5",
    "the changes in vllm:prompt_tokens_total and vllm:generation_tokens_total equal the sums of usage.prompt_tokens and usage.completion_tokens",
    "indeterminate when some request timed out or /metrics cannot be scraped";
    "routing.pinning", Live, Routing, "afd-spec §7.2",
    "requests pinned with X-data-parallel-rank: k change only engine k's counters",
    "indeterminate when a pinned request timed out or /metrics cannot be scraped";
    "routing.pin-out-of-range", Live, Routing, "afd-spec §7.2; vLLM data_parallel_rank check",
    "an X-data-parallel-rank outside 0..N is rejected with a 400-class error in the error shape and counts nowhere",
    "indeterminate when the DP size is unknown or the request times out";
    "routing.spread", Live, Routing, "afd-spec §7.2",
    "a concurrent burst of unpinned requests with Attention DP N >= 2 does not land entirely on one engine",
    "skipped at Attention DP 1; indeterminate when the burst did not complete";
    "routing.drain", Live, Routing, "probe-conformance-anchors §5",
    "after the load stops, every engine's running and waiting gauges return to 0 within --drain-timeout",
    "indeterminate when /metrics cannot be scraped";
    "routing.abort-accounting", Live, Routing, "probe-conformance-anchors §5",
    "a cancelled stream is counted once, as abort or as finished: the change in abort counts is at most the streams cancelled",
    "cancelled requests are indeterminate by nature (they may finish first); only the bounds are judged";
    "ffn.never-completes", Live, Ffn, "afd-spec §6.4, §7.4 R7",
    "the FFN server never completes a client request; on a shared host:port every response is one the Attention server counted",
    "skipped without an FFN URL";
    "ffn.fails-fast", Live, Ffn, "afd-spec §6.4; DESIGN §6",
    "a request sent to the FFN server is refused or answered with an error within --ffn-deadline; a hang is a failure",
    "skipped without an FFN URL";
    "greedy.fixed-load", Live, Greedy, "afd-spec §7.4 R4; MLPerf TEST01",
    "the same greedy (temperature 0) request repeated alone gives the same text every time",
    "indeterminate when a response is missing";
    "greedy.across-load", Live, Greedy, "MLPerf TEST01/TEST06; vLLM batch invariance",
    "a greedy request inside a concurrent burst gives the text it gives alone: identical when the server is batch-invariant, else a common prefix of at least --greedy-prefix",
    "indeterminate when a response is missing";
    "greedy.stream-equals-full", Live, Greedy, "OpenAI streaming",
    "the concatenated text of a greedy stream equals the non-streaming text of the same request",
    "indeterminate when a response is missing";
    "timing.itl", Live, Timing, "DESIGN §6; MLPerf server-scenario latency limits",
    "the median inter-token latency of a lone stream is at most --max-itl-ms",
    "skipped without --max-itl-ms";
    "timing.ttft", Live, Timing, "DESIGN §6; MLPerf server-scenario latency limits",
    "the median time to first token of a lone stream is at most --max-ttft-ms",
    "skipped without --max-ttft-ms";
    "timing.simulator", Live, Timing, "DESIGN §6; afd-sim predict (docs/sim.md) and afd-twin's timing (docs/twin.md)",
    "the open-loop load's mean TTFT and TPOT lie within --max-sim-deviation of afd-sim's prediction for the same deployment and requests",
    "skipped without --max-sim-deviation; indeterminate when the pair is not an afd-twin, runs at time scale 0, no deployment was given, or a load request failed";
    "liveness.completes", Live, Liveness, "afd-spec §7.4 R10; probe-conformance-anchors §4.6",
    "every request the Attention server accepted finishes within --request-timeout, and none is left unanswered for a tenth of the budget when it runs out",
    "when no valid request ended (none sent, or all cut by the budget before they had waited that long): liveness is never passed on no evidence";
    "liveness.invalid-deployment-refused", Live, Liveness, "DESIGN §3, §6; afd-spec §2.3",
    "a pair whose launch breaks a deployment rule (an error) does not serve",
    "skipped when no deployment was given or it has no errors";
    "stateful.responses", Stateful, Stateful, "DESIGN §6; the reference model",
    "every step's requests get the response the reference model predicts (200 with shape and usage, 400 for an out-of-range pin, a stream closed on cancel)",
    "a timed-out request is recorded as indeterminate and widens the model's bounds";
    "stateful.conservation", Stateful, Stateful, "afd-spec §7.4 R8; the reference model",
    "after every step, the changes in success and token counters lie within the model's bounds",
    "bounds widen for cancelled and timed-out requests (Jepsen's indeterminate operations)";
    "stateful.pinning", Stateful, Stateful, "afd-spec §7.2; the reference model",
    "after every step, each engine's change in success count lies between the requests pinned to it and those plus every unpinned one",
    "bounds widen for cancelled and timed-out requests";
    "stateful.drain", Stateful, Stateful, "probe-conformance-anchors §5",
    "after every step, every engine's running and waiting gauges return to 0",
    "indeterminate when /metrics cannot be scraped";
}

/// The static invariant for one deployment rule.
fn rule_invariant(rule: &'static deployment_rules::RuleInfo) -> Invariant {
    Invariant {
        id: rule.id,
        statement: rule.statement,
        source: rule.source,
        kind: Kind::Static,
        area: Area::Deployment,
        indeterminate: "skipped without a recipe or flags, or when the rule set does not apply the rule",
    }
}

/// The whole catalog: deployment rules first (in the rule catalogue's order), then [`OWN`].
pub fn catalog() -> Vec<Invariant> {
    deployment_rules::rules()
        .iter()
        .map(rule_invariant)
        .chain(OWN.iter().copied())
        .collect()
}

/// Ids the catalog no longer uses, kept out of use so an id never changes meaning. The pure properties
/// of the rank mapping were invariants until issue 16 moved them to afd-sim's tests
/// (sim/tests/it/topology.rs), since they test `afd_sim::topology` rather than a pair.
pub const RETIRED: &[&str] = &[
    "mapping.role-rank-bijection",
    "mapping.world-order",
    "mapping.p2p-ranks",
    "mapping.subgroup-head",
    "mapping.subgroup-partition",
    "mapping.roles-agree",
    "mapping.control-destinations",
    "mapping.ports",
    "mapping.worked-tables",
    "mapping.receive-rows",
];

/// Looks an invariant up by id.
pub fn find(id: &str) -> Option<Invariant> {
    OWN.iter().copied().find(|i| i.id == id).or_else(|| {
        deployment_rules::rules()
            .iter()
            .find(|rule| rule.id == id)
            .map(rule_invariant)
    })
}

/// How many invariants of each kind the catalog has.
pub fn count_by_kind() -> Vec<(Kind, usize)> {
    let all = catalog();
    Kind::ALL
        .iter()
        .map(|&kind| (kind, all.iter().filter(|i| i.kind == kind).count()))
        .collect()
}

#[cfg(test)]
mod tests;
