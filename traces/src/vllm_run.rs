//! Real vLLM engine runs: what `afd-probe vllm` measured on a live `vllm serve`, and the plan it ran.
//!
//! A run file holds one server configuration (every `vllm serve` word), the machine and software it ran
//! on, the backends vLLM reported choosing, and one record per workload: either an end-to-end
//! `vllm bench serve` result kept verbatim (the figures the simulator is judged by), or a fixed-shape
//! measurement (a burst of identical requests whose decode steps all have one batch size and context),
//! used for calibration. The engine's own per-step lines (`--enable-logging-iteration-details`) are
//! kept per workload.
//!
//! This module defines, reads, writes and checks the format; it fits nothing.
//! Deriving step costs from the fixed-shape records is the simulator's job (`afd-sim`'s engine model).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Schema version written by this build; readers accept exactly this version.
pub const VLLM_RUN_SCHEMA_VERSION: u32 = 1;
/// The `format` tag of a run file.
pub const VLLM_RUN_FORMAT: &str = "afd-vllm-run";
/// Schema version of a plan file.
pub const VLLM_PLAN_SCHEMA_VERSION: u32 = 1;
/// The `format` tag of a plan file.
pub const VLLM_PLAN_FORMAT: &str = "afd-vllm-plan";

/// A plan: the workloads `afd-probe vllm` runs against one server, in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VllmPlan {
    /// Always [`VLLM_PLAN_FORMAT`].
    pub format: String,
    /// Always [`VLLM_PLAN_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// Workloads run first and not recorded (Triton compiles kernels on a shape's first use).
    #[serde(default)]
    pub warmup: Vec<Workload>,
    pub workloads: Vec<Workload>,
}

/// One workload of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Unique within the plan; names the record and the result file.
    pub name: String,
    pub kind: WorkloadKind,
    /// Prompt length in tokens, every request.
    pub input_len: u32,
    /// Output length in tokens, every request (`ignore_eos`).
    pub output_len: u32,
    pub num_prompts: u32,
    /// Requests per second (Poisson, `burstiness` 1); `None` sends all at once (`inf`).
    #[serde(default)]
    pub request_rate: Option<f64>,
    /// Client-side limit on requests in flight; `None` for no limit.
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    /// Seed of `vllm bench serve`'s random dataset, or of the fixed-shape prompts.
    #[serde(default)]
    pub seed: u64,
    /// Seconds the workload may take before it is stopped and recorded as failed.
    pub timeout_s: f64,
    /// Skip the workload when the server's `max_num_seqs` is below this (fixed shapes larger than the batch).
    #[serde(default)]
    pub min_max_num_seqs: Option<u32>,
    /// Fixed shapes: how the prompts travel. Token ids (the default) skip the API server's tokenizer;
    /// text (`t<id>` words, which the dummy model's word-level tokenizer maps back to the same ids) is
    /// what `vllm bench serve` sends, and prices the tokenizer's share of the front end.
    #[serde(default, skip_serializing_if = "PromptForm::is_ids")]
    pub prompt_form: PromptForm,
    /// Fixed shapes: `false` asks for one response at the end (`"stream": false`), so the time to the
    /// last token is the engine's and not the streaming path's.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub stream: bool,
    /// Bench-serve workloads run at a fixed shape to price a term (the client's own cost, say): kept
    /// with the run, never judged by `afd-sim replay-vllm`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub calibration: bool,
    /// Fixed shapes: requests sent later, while the burst's own requests decode, each streamed. The
    /// step that prefills one beside a standing decode batch is a mixed step; the gap it leaves in
    /// the standing requests' streams is that step's period (the engine model's non-uniform table).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<Injection>,
    /// Fixed shapes: the sampling temperature every request asks for (0 is greedy). `None` sends
    /// none, so vLLM's default applies (1.0 unless the model's generation config sets one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Fixed shapes: keep each request's generated text in its record
    /// ([`FixedShapeRequest::text`]). With the dummy model's word-level tokenizer (token `i` is the
    /// word `t<i>`) it is the generated token ids, which say how many distinct tokens a decode step
    /// feeds the experts.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_text: bool,
    /// Unstreamed fixed shapes on a server started with `--enable-return-routed-experts`: count
    /// the experts each of the burst's decode steps and prompts routed to, from the routing vLLM
    /// returns with each whole answer ([`FixedShapeResult::routed`]; only the counts are kept).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub routed_experts: bool,
}

/// One request sent into a running fixed-shape burst.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Injection {
    /// Seconds after the burst's start.
    pub at_s: f64,
    pub input_len: u32,
    pub output_len: u32,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

/// How a fixed-shape workload sends its prompts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PromptForm {
    /// A JSON array of token ids.
    #[default]
    Ids,
    /// A string of `t<id>` words.
    Text,
}

impl PromptForm {
    fn is_ids(&self) -> bool {
        *self == PromptForm::Ids
    }
}

/// How a workload is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// `vllm bench serve` with the random dataset; its `--save-result` JSON is the record.
    BenchServe,
    /// The probe's own client: `num_prompts` identical-length requests sent together, streamed,
    /// every token's arrival time kept.
    FixedShape,
}

/// A run file as stored on disk (JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VllmRun {
    /// Always [`VLLM_RUN_FORMAT`].
    pub format: String,
    /// Always [`VLLM_RUN_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// A short name for the server configuration (`graph-256-8192`).
    pub label: String,
    pub provenance: VllmProvenance,
    /// The `vllm serve` words after `serve`, model path first, exactly as started (host and port included).
    pub serve_args: Vec<String>,
    /// Environment variables set for the server (`VLLM_*`, `CUDA_*`, `NCCL_*`).
    pub server_env: BTreeMap<String, String>,
    /// What vLLM logged choosing: key → the first log line that says it (model runner, attention backend,
    /// MoE kernel and config, async scheduling, KV cache size, capture sizes, ...).
    pub backends: BTreeMap<String, String>,
    /// Seconds from starting the server to `/health` answering 200.
    pub startup_s: f64,
    pub records: Vec<WorkloadRecord>,
}

/// Where and with what a run was measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VllmProvenance {
    /// `afd-probe <version>`.
    pub tool: String,
    /// The probe's command line.
    pub command: String,
    /// UTC start time, RFC 3339.
    pub date_utc: String,
    pub hostname: String,
    pub vllm_version: String,
    pub torch_version: String,
    /// CUDA version torch was built with.
    pub torch_cuda: String,
    /// `nvidia-smi`: name, driver, memory per GPU, one line each.
    pub gpus: Vec<String>,
    pub driver_version: String,
    pub cpu_model: String,
    /// Logical CPUs the probe could use.
    pub cpu_cores: u32,
    pub python: String,
    /// Anything else worth keeping (plugin commit, notes).
    #[serde(default)]
    pub notes: BTreeMap<String, String>,
}

/// One workload's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadRecord {
    pub workload: Workload,
    /// `None` when it completed; else why not (timeout, client error, server died), with the log tail.
    #[serde(default)]
    pub failure: Option<String>,
    /// Wall seconds the workload took, as the probe saw it.
    pub wall_s: f64,
    /// `vllm bench serve --save-result` JSON, verbatim (bench-serve workloads).
    #[serde(default)]
    pub bench_result: Option<serde_json::Value>,
    /// Per-request timing (fixed-shape workloads).
    #[serde(default)]
    pub fixed: Option<FixedShapeResult>,
    /// The engine's per-step lines logged while the workload ran, in order.
    pub steps: Vec<EngineStep>,
    /// `/metrics` text read after the workload.
    pub metrics_after: String,
    /// Where the engine core's main thread and the host's CPUs spent the workload (probes since the
    /// twelfth session, where Linux's /proc and the engine core's pid were found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostShare>,
}

/// Read from Linux's /proc at a workload's start and end: vLLM's engine core runs the scheduler, the
/// input preparation and every launch of a single-GPU model on its main thread, so a step without
/// graphs is that thread's time; whether it ran, waited for a CPU, or the hypervisor took the CPUs
/// says whose time a slow step was (docs/fidelity.md, "The twenty-second batch").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostShare {
    /// The engine core's pid (`(EngineCore pid=N)` in the server log).
    pub engine_core_pid: u32,
    /// Seconds between the two readings.
    pub wall_s: f64,
    /// Seconds the engine core's main thread ran on a CPU (`/proc/PID/task/PID/schedstat`).
    pub engine_core_on_cpu_s: f64,
    /// Seconds it was runnable and waited for a CPU.
    pub engine_core_waited_s: f64,
    /// CPU-seconds, summed over the host's CPUs, the hypervisor took (`steal` in `/proc/stat`).
    pub steal_s: f64,
    /// CPU-seconds, summed over the host's CPUs, spent busy (user, nice, system, irq, softirq).
    pub busy_s: f64,
}

/// Token arrival times of a fixed-shape burst.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedShapeResult {
    /// One entry per request, in sending order.
    pub requests: Vec<FixedShapeRequest>,
    /// How many experts the burst's tokens reached, where the workload asked (`routed_experts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routed: Option<RoutedExperts>,
}

/// The experts a fixed-shape burst's tokens were routed to, counted from the routing vLLM returns
/// with each whole answer (`--enable-return-routed-experts`: every forwarded token's top-k experts
/// in every MoE layer). A burst's requests start together, so their k-th generated tokens are
/// forwarded in one decode step or a few neighbouring ones (as many as the burst's prefill took).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutedExperts {
    /// The burst's requests whose answers carried routing.
    pub requests: u32,
    /// The routed layers (each token picked `top_k` distinct experts in every one; a dense layer's
    /// placeholder row is not counted) and the experts a token picks in each. Files written before
    /// the probe left the placeholder out count every layer of the routing's shape (cal25: 27).
    pub layers: u32,
    pub top_k: u32,
    /// Per decode position k (each request's k-th forwarded generated token): the distinct experts
    /// the burst's tokens at k reached in a layer, the mean over layers.
    pub decode_distinct: Vec<f64>,
    /// Per request, the distinct experts its prompt's tokens reached in a layer, the mean over
    /// layers; the median over the burst.
    pub prompt_distinct: f64,
    /// The distinct experts all the burst's prompt tokens reached in a layer, the mean over layers.
    pub prompt_union_distinct: f64,
}

/// One request of a fixed-shape burst.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedShapeRequest {
    /// Seconds from the burst's start to this request being sent.
    pub sent_s: f64,
    /// Seconds from the burst's start to each streamed chunk that carried text, in order.
    pub chunk_s: Vec<f64>,
    /// Output tokens the server reported (`usage.completion_tokens`), when it did.
    #[serde(default)]
    pub completion_tokens: Option<u32>,
    /// Prompt tokens the server reported.
    #[serde(default)]
    pub prompt_tokens: Option<u32>,
    /// Seconds from the burst's start to the end of the response (the only time a non-streamed
    /// request has).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_s: Option<f64>,
    #[serde(default)]
    pub error: Option<String>,
    /// The generated text, when the workload asked to keep it (`keep_text`): the streamed chunks
    /// joined, or the whole answer's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// One engine step as `--enable-logging-iteration-details` logs it.
///
/// `elapsed_ms` is the time the engine core blocked waiting for the step's model output, not the step's
/// period: with async scheduling (vLLM 0.26's default) the next step is scheduled and launched while this
/// one runs (vllm/v1/engine/core.py, `capture_iteration_details`). Use it for step shapes, not durations.
/// `logged_s` is when the front end wrote the line (Unix seconds, to the microsecond; the probe stamps
/// every log line through `VLLM_LOGGING_PREFIX`): it learns of each step's end once the engine core
/// hands the step's outputs over, so the gaps between consecutive steps' stamps are their periods as
/// the front end saw them. Absent in runs made before the stamp.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineStep {
    pub iteration: u64,
    pub ctx_requests: u32,
    pub ctx_tokens: u32,
    pub gen_requests: u32,
    pub gen_tokens: u32,
    pub elapsed_ms: f64,
    pub kv_usage_pct: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logged_s: Option<f64>,
}

/// Every iteration line of a `vllm serve` log, in order.
pub fn engine_steps(text: &str) -> Vec<EngineStep> {
    text.lines().filter_map(EngineStep::from_log_line).collect()
}

impl EngineStep {
    /// One `Iteration(N): a context requests, b context tokens, c generation requests, d generation
    /// tokens, iteration elapsed time: x ms, GPU KV cache usage: y%` line (vllm/v1/metrics/loggers.py,
    /// `_log_iteration_details`); dummy DP iterations are skipped.
    pub fn from_log_line(line: &str) -> Option<EngineStep> {
        let at = line.find("Iteration(")?;
        let rest = &line[at + "Iteration(".len()..];
        if rest.contains("(dummy)") {
            return None;
        }
        // The probe's stamp: the first word before the level that reads as Unix seconds with a fraction
        // (vLLM's own `12-01 21:00:00` stamp and the `(APIServer pid=7)` tag never do).
        let logged_s = line[..at]
            .split_whitespace()
            .take_while(|w| !matches!(*w, "DEBUG" | "INFO" | "WARNING" | "ERROR"))
            .find_map(|w| {
                let (whole, frac) = w.split_once('.')?;
                (whole.len() >= 9
                    && whole.bytes().all(|b| b.is_ascii_digit())
                    && !frac.is_empty()
                    && frac.bytes().all(|b| b.is_ascii_digit()))
                .then(|| w.parse::<f64>().ok())?
            });
        let (iteration, rest) = rest.split_once("):")?;
        let numbers: Vec<f64> = rest
            .split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|s| !s.is_empty() && s != &".")
            .filter_map(|s| s.parse().ok())
            .collect();
        let [
            ctx_requests,
            ctx_tokens,
            gen_requests,
            gen_tokens,
            elapsed_ms,
            kv_usage_pct,
            ..,
        ] = numbers[..]
        else {
            return None;
        };
        Some(EngineStep {
            iteration: iteration.trim().parse().ok()?,
            ctx_requests: ctx_requests as u32,
            ctx_tokens: ctx_tokens as u32,
            gen_requests: gen_requests as u32,
            gen_tokens: gen_tokens as u32,
            elapsed_ms,
            kv_usage_pct,
            logged_s,
        })
    }
}

/// Schema version of an engine profile.
pub const VLLM_ENGINE_SCHEMA_VERSION: u32 = 1;
/// The `format` tag of an engine profile.
pub const VLLM_ENGINE_FORMAT: &str = "afd-vllm-engine-profile";

/// What a real vLLM engine's step costs beyond its kernels, derived from fixed-shape records
/// (`afd-sim engine-profile`): one entry per execution mode measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VllmEngineProfile {
    /// Always [`VLLM_ENGINE_FORMAT`].
    pub format: String,
    /// Always [`VLLM_ENGINE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// GPU name as the runs' provenance gives it (`NVIDIA H200`).
    pub gpu: String,
    /// The model folder served (its config names the architecture).
    pub model: String,
    pub vllm_version: String,
    /// The GPU host's CPU, which prices every host-side cost here.
    pub cpu_model: String,
    pub cpu_cores: u32,
    /// The run files derived from, with each one's start time.
    pub sources: Vec<String>,
    /// Latency the front end (HTTP, input processing, the hop to the engine core and back) adds to a
    /// request's first token without delaying any step, nanoseconds, on an engine that is stepping
    /// (requests injected beside a standing decode burst).
    pub frontend_ns: u64,
    /// What the first step after the engine sat idle costs beyond its period, nanoseconds: lone
    /// prompts' first tokens against requests injected into a running engine. A mode with a
    /// pure-prefill ratio ([`EngineModeCosts::pure_prefill_ratio`]) prices that step by the ratio
    /// instead and adds none. Zero when not measured, and in profiles written before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub idle_start_ns: u64,
    pub modes: Vec<EngineModeCosts>,
    /// The front end's serial intake per request, nanoseconds: the spread of first tokens over a
    /// large burst whose prompts are all in the prefix cache (so its steps are short), per request.
    /// Zero in profiles written before it existed.
    #[serde(default)]
    pub intake_ns: u64,
    /// The front end's serial cost per streamed token, nanoseconds: calibration bench runs' mean
    /// time per output token over their batch, where that is well above the engine's own decode
    /// period (the API server and `vllm bench serve`'s client, not the engine, set the pace), the
    /// median of them (each run and its figure in its mode's evidence, `stream_token`). Zero when
    /// no run showed it, and in profiles written before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stream_token_ns: u64,
    /// What a text prompt adds to the intake per prompt token (the API server's tokenizer),
    /// nanoseconds: cached text bursts against cached token-id bursts of the same shape. Zero when
    /// not measured.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub text_token_ns: f64,
    /// What `vllm bench serve`'s client spends opening one connection, nanoseconds: a burst's
    /// requests after the first (the only one its one idle keep-alive connection carries) reach
    /// the server only once the client has opened a connection for each. Calibration bench runs
    /// that sent their prompts at once, from their stamped step lines: the time from the burst's
    /// first step to the step its second request reached, over the connections opened; the median
    /// over servers of each server's median. Zero when not measured, and in profiles written
    /// before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub connect_ns: u64,
    /// The runs served dummy weights (`--load-format dummy`): their replayed decode steps route as
    /// that model's few distinct tokens do, not as a trained model's spread ones. False in profiles
    /// written before it existed.
    #[serde(default, skip_serializing_if = "is_false")]
    pub dummy_weights: bool,
    /// What a step costs beyond its period the first time it needs a fused-MoE Triton kernel
    /// specialization its server has not compiled (vLLM JIT-compiles the gate-up and the down GEMM
    /// kernels before the step runs), nanoseconds: each stamped server's first-use steps in its
    /// warm-ups and fixed-shape records, each step's period less the median period of the same
    /// server's other steps of half to twice its tokens, the median over servers of each server's
    /// median. Zero when not measured (no server log beside the runs), and in profiles written
    /// before it existed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jit_compile_ns: u64,
    /// How an eager step's host time divides between the parts an AFD pair splits (afd-spec §5.3):
    /// by the step's scheduled tokens, ascending, the shares vLLM's torch profiler measured on a
    /// plain eager server (`gpu-probes/scripts/profile-modules.py`, `sim/scripts/module_shares.py`).
    /// Empty when not measured: the roles then divide a step as the lean costs do.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub role_division: Vec<RoleShare>,
}

/// One step size's division of an eager step's host time, measured by vLLM's torch profiler (its
/// Python tracer's `nn.Module` events inside the worker's `execute_context_…` annotation), the
/// median over the profiled steps of that size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleShare {
    /// Tokens the step scheduled (prefill tokens plus decode requests).
    pub tokens: u32,
    /// Steps of this size the medians are over.
    pub steps: u32,
    /// What lies outside the decoder layers (input preparation, embedding, final norm, LM head,
    /// sampler, output handling inside `execute_model`), as a share of the step's host time: the
    /// Attention server's, which schedules and samples.
    pub outside_of_step: f64,
    /// The layers' MLP and MoE blocks as a share of the layers' host time: the FFN server's
    /// (`compute_ffn_output`); the rest of each layer (norms, attention, the layer's own code) is
    /// the Attention server's.
    pub ffn_of_layers: f64,
    /// The profile's trace extracts these steps came from (`file:shape`).
    pub evidence: String,
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn is_zero_u32(v: &u32) -> bool {
    *v == 0
}

fn is_zero_f64(v: &f64) -> bool {
    *v == 0.0
}

/// One execution mode's step costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineModeCosts {
    /// `eager` (`--enforce-eager`), `full-decode-only` (CUDA graphs for uniform decode batches,
    /// torch.compile without graphs for every other batch) or `full-and-piecewise` (vLLM's default:
    /// full graphs for uniform decode, piecewise graphs for other batches up to the largest capture
    /// size, torch.compile without graphs above it).
    pub mode: String,
    /// Period of a uniform decode step by batch size (median inter-token time of a fixed-shape
    /// burst), nanoseconds, ascending batch.
    pub decode_period_ns: Vec<(u32, u64)>,
    /// Least period of a non-uniform (prefill or mixed) step: an isolated prefill of 1,024 to
    /// 4,096 tokens, its time to first token less the front end's latency, nanoseconds.
    pub nonuniform_floor_ns: u64,
    /// Marginal time per scheduled token of a large non-uniform step, nanoseconds: the slope of the
    /// time to first token between the shortest and the longest isolated prefill of 1,024 or more.
    pub nonuniform_token_ns: f64,
    /// Period of a non-uniform step by the tokens it schedules, nanoseconds, ascending tokens and
    /// never falling (a step with more tokens is never cheaper): the median over fixed-shape bursts
    /// and chunked prefills of their non-uniform steps' mean time, at their mean scheduled tokens.
    /// Empty in profiles written before it existed: the floor and per-token cost price them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nonuniform_period_ns: Vec<(u32, u64)>,
    /// What each decode request beside the prefill adds to a non-uniform step that runs without
    /// graphs, nanoseconds (`nonuniform_period_ns` holds the step less it): one prompt length
    /// injected beside two standing batches of one server, the difference of the two steps over
    /// the difference of their decodes, the median. Zero when not measured.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub mixed_decode_ns: f64,
    /// What each request of a uniform decode batch adds to a step that runs without graphs because
    /// the batch is past the largest capture size, nanoseconds (`nonuniform_period_ns` at its
    /// tokens holds the step less it): decode bursts past the capture size, their period less the
    /// table over their batch, the median. Zero when not measured (the mixed step's term prices it).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub graphless_decode_ns: f64,
    /// What a uniform decode step adds per context token its sequences attend to beyond the decode
    /// table's own bursts' (`decode_reference_context` a sequence), nanoseconds: streamed bursts of
    /// long prompts against the table at their batch. Zero when not measured (or not seen above the
    /// host floor).
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub decode_context_ns: f64,
    /// The mean context a sequence of the decode table's bursts attends to, tokens.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub decode_reference_context: u32,
    /// Eager mode: what a non-uniform step adds to the decode period of its requests, by the prefill
    /// tokens it schedules, nanoseconds, ascending tokens and never falling: a request injected into
    /// a standing decode batch, the gap its step leaves in the standing streams less their own gap
    /// (one burst, so the host's drift between bursts cancels). Empty when not measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefill_extra_ns: Vec<(u32, u64)>,
    /// `FULL_AND_PIECEWISE`: the period of a non-uniform step that replays piecewise graphs (at most
    /// `piecewise_max_tokens` scheduled tokens), by tokens, nanoseconds, ascending and never falling.
    /// Larger steps run without graphs and take `nonuniform_period_ns`. Empty for other modes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub piecewise_period_ns: Vec<(u32, u64)>,
    /// The largest capture size of the server that measured `piecewise_period_ns`, tokens.
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub piecewise_max_tokens: u32,
    /// `FULL_AND_PIECEWISE`: what each decode request beside the prefill adds to a step that replays
    /// piecewise graphs (attention runs between the pieces, per request), nanoseconds
    /// (`piecewise_period_ns` holds the step less it): one prompt length injected beside standing
    /// batches of one server, the difference of their mixed steps over the difference of their
    /// decodes, the median. Zero when not measured.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub piecewise_decode_ns: f64,
    /// What a step without graphs that prefills beside no decode (every first step of an idle
    /// engine) costs, as a ratio to the table's step of its tokens: lone prompts on one server's idle
    /// engine against prompts of the same length injected beside a small standing decode batch of
    /// the same server (one host, so its speed cancels), the median over such pairs. Absent when no
    /// server of the mode measured a pair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pure_prefill_ratio: Option<f64>,
    /// The same for a step that replays piecewise graphs (`FULL_AND_PIECEWISE` within the largest
    /// capture size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pure_piecewise_ratio: Option<f64>,
    /// The most tokens a step priced by `pure_prefill_ratio` schedules: the longest prompt of its
    /// pairs, times the tables' grouping reach (a measured point stands for steps within 1.5× of
    /// its tokens). Larger steps that prefill beside no decode cost the table. Absent (in profiles
    /// written before it existed): the ratio prices every such step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pure_prefill_max_tokens: Option<u32>,
    /// The same for `pure_piecewise_ratio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pure_piecewise_max_tokens: Option<u32>,
    /// The records each figure came from (`file:workload`).
    pub evidence: BTreeMap<String, String>,
}

impl VllmEngineProfile {
    /// Parses and checks an engine profile.
    pub fn from_json(text: &str) -> Result<Self, VllmRunError> {
        let profile: VllmEngineProfile = parse(text)?;
        check_tag(
            "engine profile",
            &profile.format,
            VLLM_ENGINE_FORMAT,
            profile.schema_version,
            VLLM_ENGINE_SCHEMA_VERSION,
        )?;
        for m in &profile.modes {
            if m.decode_period_ns.is_empty()
                || m.decode_period_ns.windows(2).any(|w| w[0].0 >= w[1].0)
            {
                return Err(VllmRunError::Invalid(format!(
                    "mode {:?}: decode_period_ns must be non-empty with ascending batch sizes",
                    m.mode
                )));
            }
            for (name, table) in [
                ("nonuniform_period_ns", &m.nonuniform_period_ns),
                ("prefill_extra_ns", &m.prefill_extra_ns),
                ("piecewise_period_ns", &m.piecewise_period_ns),
            ] {
                if table
                    .windows(2)
                    .any(|w| w[0].0 >= w[1].0 || w[0].1 > w[1].1)
                {
                    return Err(VllmRunError::Invalid(format!(
                        "mode {:?}: {name} must have ascending token counts and periods that never fall",
                        m.mode
                    )));
                }
            }
            for (name, value) in [
                ("pure_prefill_ratio", m.pure_prefill_ratio),
                ("pure_piecewise_ratio", m.pure_piecewise_ratio),
            ] {
                if value.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                    return Err(VllmRunError::Invalid(format!(
                        "mode {:?}: {name} is not a finite positive ratio",
                        m.mode
                    )));
                }
            }
            for (name, value) in [
                ("mixed_decode_ns", m.mixed_decode_ns),
                ("piecewise_decode_ns", m.piecewise_decode_ns),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(VllmRunError::Invalid(format!(
                        "mode {:?}: {name} is not a finite non-negative number",
                        m.mode
                    )));
                }
            }
            if !(m.nonuniform_token_ns.is_finite() && m.nonuniform_token_ns >= 0.0) {
                return Err(VllmRunError::Invalid(format!(
                    "mode {:?}: nonuniform_token_ns is not a finite non-negative number",
                    m.mode
                )));
            }
        }
        if profile
            .role_division
            .windows(2)
            .any(|w| w[0].tokens >= w[1].tokens)
        {
            return Err(VllmRunError::Invalid(
                "role_division must have ascending token counts".into(),
            ));
        }
        for r in &profile.role_division {
            for (name, value) in [
                ("outside_of_step", r.outside_of_step),
                ("ffn_of_layers", r.ffn_of_layers),
            ] {
                if !(value.is_finite() && (0.0..1.0).contains(&value)) {
                    return Err(VllmRunError::Invalid(format!(
                        "role_division at {} tokens: {name} is not a share in [0, 1)",
                        r.tokens
                    )));
                }
            }
        }
        Ok(profile)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a profile serialises");
        text.push('\n');
        text
    }
}

/// The engine profile shipped for `gpu`, derived by `afd-sim engine-profile` from the committed
/// runs: `h200` from every H200 run under `data/vllm/` (eager, FULL_DECODE_ONLY and
/// FULL_AND_PIECEWISE), `h100` from every H100 server under `data/vllm/h100/` (eager and
/// FULL_DECODE_ONLY).
pub fn builtin_engine_profile(gpu: &str) -> Option<&'static str> {
    match gpu {
        "h200" => Some(include_str!("../data/engine/h200-dsv2l-vllm-engine.json")),
        "h100" => Some(include_str!("../data/engine/h100-dsv2l-vllm-engine.json")),
        _ => None,
    }
}

/// Why a run or plan file was refused.
#[derive(Debug, thiserror::Error)]
pub enum VllmRunError {
    #[error("{0}")]
    Json(String),
    #[error("{what}: format is {found:?}, expected {expected:?}")]
    Format {
        what: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("{what}: schema_version {found}, this build reads {expected}")]
    Schema {
        what: &'static str,
        found: u32,
        expected: u32,
    },
    #[error("{0}")]
    Invalid(String),
}

impl VllmPlan {
    /// Parses and checks a plan file's text.
    pub fn from_json(text: &str) -> Result<Self, VllmRunError> {
        let plan: VllmPlan = parse(text)?;
        check_tag(
            "plan",
            &plan.format,
            VLLM_PLAN_FORMAT,
            plan.schema_version,
            VLLM_PLAN_SCHEMA_VERSION,
        )?;
        let mut seen = std::collections::BTreeSet::new();
        for (i, w) in plan.warmup.iter().chain(&plan.workloads).enumerate() {
            w.check()
                .map_err(|e| VllmRunError::Invalid(format!("workload {i} ({:?}): {e}", w.name)))?;
            if i >= plan.warmup.len() && !seen.insert(w.name.as_str()) {
                return Err(VllmRunError::Invalid(format!(
                    "workload name {:?} appears twice",
                    w.name
                )));
            }
        }
        if plan.workloads.is_empty() {
            return Err(VllmRunError::Invalid("the plan has no workloads".into()));
        }
        Ok(plan)
    }
}

impl Workload {
    /// Checks the numbers a server would otherwise refuse or a run could not finish with.
    pub fn check(&self) -> Result<(), String> {
        self.check_recordable()?;
        self.check_sampling()
    }

    /// The sampling a vLLM 0.26.0 server accepts: it answers HTTP 400 to every request whose
    /// temperature is outside [0, 2] (`SamplingParams._verify_args`).
    fn check_sampling(&self) -> Result<(), String> {
        match self.temperature {
            Some(t) if !(t.is_finite() && (0.0..=2.0).contains(&t)) => Err(format!(
                "temperature {t} must be in [0, 2], the range vLLM accepts"
            )),
            _ => Ok(()),
        }
    }

    /// What every workload a run file records must satisfy, refused by the server or not.
    fn check_recordable(&self) -> Result<(), String> {
        let name_ok = !self.name.is_empty()
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !name_ok {
            return Err("name must be non-empty letters, digits, '-', '_' or '.'".into());
        }
        if self.input_len == 0 || self.output_len == 0 || self.num_prompts == 0 {
            return Err("input_len, output_len and num_prompts must be at least 1".into());
        }
        if let Some(rate) = self.request_rate
            && !(rate.is_finite() && rate > 0.0)
        {
            return Err(format!(
                "request_rate {rate} must be a positive finite number (omit it for inf)"
            ));
        }
        if self.max_concurrency == Some(0) {
            return Err("max_concurrency must be at least 1".into());
        }
        match self.kind {
            WorkloadKind::BenchServe if self.prompt_form != PromptForm::Ids || !self.stream => {
                return Err(
                    "prompt_form and stream are for fixed-shape workloads; vllm bench serve always \
                     streams text"
                        .into(),
                );
            }
            WorkloadKind::FixedShape if self.calibration => {
                return Err(
                    "calibration marks bench-serve workloads; fixed shapes are never judged".into(),
                );
            }
            _ => {}
        }
        if !self.inject.is_empty() && self.kind != WorkloadKind::FixedShape {
            return Err("inject is for fixed-shape workloads".into());
        }
        if self.routed_experts && (self.kind != WorkloadKind::FixedShape || self.stream) {
            return Err(
                "routed_experts is for unstreamed fixed-shape workloads (\"stream\": false): vLLM \
                 returns the routing with a whole answer"
                    .into(),
            );
        }
        if (self.temperature.is_some() || self.keep_text) && self.kind != WorkloadKind::FixedShape {
            return Err(
                "temperature and keep_text are for fixed-shape workloads; vllm bench serve sets its \
                 own sampling"
                    .into(),
            );
        }
        for (k, i) in self.inject.iter().enumerate() {
            if !(i.at_s.is_finite() && i.at_s >= 0.0 && i.at_s < self.timeout_s) {
                return Err(format!(
                    "inject[{k}].at_s {} must be in [0, timeout_s {})",
                    i.at_s, self.timeout_s
                ));
            }
            if i.input_len == 0 || i.output_len == 0 {
                return Err(format!(
                    "inject[{k}]: input_len and output_len must be at least 1"
                ));
            }
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0 && self.timeout_s <= 86_400.0) {
            return Err(format!(
                "timeout_s {} must be in (0, 86400]",
                self.timeout_s
            ));
        }
        Ok(())
    }
}

impl VllmRun {
    /// Parses and checks a run file's text.
    pub fn from_json(text: &str) -> Result<Self, VllmRunError> {
        let run: VllmRun = parse(text)?;
        check_tag(
            "run",
            &run.format,
            VLLM_RUN_FORMAT,
            run.schema_version,
            VLLM_RUN_SCHEMA_VERSION,
        )?;
        if run.serve_args.is_empty() {
            return Err(VllmRunError::Invalid("serve_args is empty".into()));
        }
        for r in &run.records {
            // A workload the server refused is history: its record keeps what was asked (cal23's
            // temperature 1000) beside the failure; one that ran must have asked what vLLM accepts.
            r.workload
                .check_recordable()
                .and_then(|()| match &r.failure {
                    Some(_) => Ok(()),
                    None => r.workload.check_sampling(),
                })
                .map_err(|e| VllmRunError::Invalid(format!("record {:?}: {e}", r.workload.name)))?;
        }
        Ok(run)
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).expect("a run serialises");
        text.push('\n');
        text
    }

    /// The value of a `vllm serve` flag (`--max-num-seqs 64` or `--max-num-seqs=64`), last one wins.
    pub fn serve_flag(&self, flag: &str) -> Option<&str> {
        serve_flag(&self.serve_args, flag)
    }
}

/// The value of a flag in `vllm serve` words, last occurrence winning as argparse does.
pub fn serve_flag<'a>(words: &'a [String], flag: &str) -> Option<&'a str> {
    let mut found = None;
    let mut iter = words.iter().peekable();
    while let Some(w) = iter.next() {
        if w == flag {
            found = iter.peek().map(|v| v.as_str());
        } else if let Some(v) = w.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
            found = Some(v);
        }
    }
    found
}

/// Whether a `vllm serve` switch (`--enable-return-routed-experts`) is on: the last of it and its
/// `--no-` form wins, in either spelling (vLLM's argument parser reads `_` in a flag as `-`); off
/// when neither is there.
pub fn serve_switch(words: &[String], switch: &str) -> bool {
    let name = switch.trim_start_matches('-');
    words
        .iter()
        .rev()
        .find_map(|w| {
            let flag = w.strip_prefix("--")?.replace('_', "-");
            if flag == name {
                Some(true)
            } else {
                (flag.strip_prefix("no-") == Some(name)).then_some(false)
            }
        })
        .unwrap_or(false)
}

fn parse<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, VllmRunError> {
    let de = &mut serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de)
        .map_err(|e| VllmRunError::Json(format!("at {}: {}", e.path(), e.inner())))
}

fn check_tag(
    what: &'static str,
    format: &str,
    expected: &'static str,
    version: u32,
    expected_version: u32,
) -> Result<(), VllmRunError> {
    if format != expected {
        return Err(VllmRunError::Format {
            what,
            found: format.to_owned(),
            expected,
        });
    }
    if version != expected_version {
        return Err(VllmRunError::Schema {
            what,
            found: version,
            expected: expected_version,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
