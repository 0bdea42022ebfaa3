//! The live checks' shared machinery: a [`Session`] that sends generation requests to the Attention
//! server, records every one in a ledger, trips a breaker when the pair stops answering, and scrapes
//! `/metrics` until it settles; plus the parsed views of responses and streams the checks judge.
//!
//! Each submodule is one phase of the run and returns outcomes for the invariant ids it owns.
//! Invariants judged over every request of the run (response shapes, usage, framing, exactly-one
//! response, liveness) are computed from the ledger at the end, in [`ledger`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use rand::{RngExt as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::bench::{BenchConfig, BenchResult};
use crate::client::{Client, Endpoint, HttpError, Request, Response};
use crate::prometheus::Scrape;
use crate::report::Outcome;
use crate::target::Target;

pub mod api;
pub mod deployment;
pub mod ffn;
pub mod greedy;
pub mod ledger;
pub mod mapping;
pub mod routing;
pub mod simulator;
pub mod streaming;
pub mod timing;

/// Outcomes of one phase, by invariant id.
pub type Outcomes = Vec<(&'static str, Outcome)>;

/// The header vLLM reads a DP rank from (afd-spec §7.2).
pub const DP_RANK_HEADER: &str = "X-data-parallel-rank";
pub const REQUEST_ID_HEADER: &str = "X-Request-Id";

/// Knobs of the live checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Deadline of one generation request.
    pub request_timeout: Duration,
    /// Deadline of small requests (`/health`, `/metrics`, `/v1/models`).
    pub probe_timeout: Duration,
    /// Deadline for the FFN server to refuse or answer (afd-spec §6.4).
    pub ffn_deadline: Duration,
    /// How long metrics may take to reflect finished requests, and the queues to drain.
    pub settle_timeout: Duration,
    pub drain_timeout: Duration,
    /// Requests of the routing load.
    pub requests: u32,
    /// Arrival rate of the open-loop load (requests per second; infinite sends all at once).
    pub load_rate: f64,
    /// Largest concurrency the suite uses.
    pub concurrency: u32,
    /// `max_tokens` of the suite's ordinary requests.
    pub max_tokens: u32,
    /// Consecutive timeouts after which the pair is taken as hung and further requests are not sent.
    pub breaker_timeouts: u32,
    pub max_itl_ms: Option<f64>,
    pub max_ttft_ms: Option<f64>,
    /// Largest relative difference between the open-loop load's mean TTFT/TPOT and `afd-sim`'s
    /// prediction for it (`timing.simulator`; skipped when `None`).
    pub max_sim_deviation: Option<f64>,
    /// Least common-prefix fraction for greedy text across load when not batch-invariant.
    pub greedy_prefix: f64,
    /// A Jinja chat template sent as `chat_template` in every chat request (`--chat-template`; vLLM
    /// takes it only with `--trust-request-chat-template`, vllm/renderers/online_renderer.py:266).
    pub chat_template: Option<String>,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            request_timeout: Duration::from_secs(120),
            probe_timeout: Duration::from_secs(10),
            ffn_deadline: Duration::from_secs(10),
            settle_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(30),
            requests: 64,
            load_rate: 20.0,
            concurrency: 16,
            max_tokens: 16,
            breaker_timeouts: 3,
            max_itl_ms: None,
            max_ttft_ms: None,
            max_sim_deviation: None,
            greedy_prefix: 0.5,
            chat_template: None,
        }
    }
}

/// The generation endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    Completions,
    Chat,
}

impl Api {
    pub fn path(self) -> &'static str {
        match self {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }

    /// The `object` of a full response.
    pub fn object(self) -> &'static str {
        match self {
            Api::Completions => "text_completion",
            Api::Chat => "chat.completion",
        }
    }

    /// The `object` of a stream chunk (vLLM streams completions as `text_completion`).
    pub fn chunk_object(self) -> &'static str {
        match self {
            Api::Completions => "text_completion",
            Api::Chat => "chat.completion.chunk",
        }
    }
}

/// One generation request as the suite means it.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestSpec {
    pub api: Api,
    pub prompt: String,
    pub max_tokens: u32,
    pub stream: bool,
    pub include_usage: bool,
    pub ignore_eos: bool,
    /// Value of `X-data-parallel-rank`, verbatim (so out-of-range and garbage can be sent).
    pub pin: Option<String>,
    /// Close the stream after this many events.
    pub cancel_after: Option<usize>,
    /// The request is invalid on purpose (an out-of-range pin): a 400-class error is the right answer.
    pub expect_error: bool,
    /// Set by the session; sent as `X-Request-Id`.
    pub request_id: String,
    /// Which phase sent it, for counterexamples.
    pub phase: &'static str,
}

impl RequestSpec {
    pub fn new(phase: &'static str, api: Api, prompt: String, max_tokens: u32) -> RequestSpec {
        RequestSpec {
            api,
            prompt,
            max_tokens,
            stream: false,
            include_usage: false,
            ignore_eos: false,
            pin: None,
            cancel_after: None,
            expect_error: false,
            request_id: String::new(),
            phase,
        }
    }

    pub fn streaming(mut self, include_usage: bool) -> RequestSpec {
        self.stream = true;
        self.include_usage = include_usage;
        self
    }

    pub fn pinned(mut self, rank: impl ToString) -> RequestSpec {
        self.pin = Some(rank.to_string());
        self
    }

    /// Marks the request as one the server must reject.
    pub fn invalid(mut self) -> RequestSpec {
        self.expect_error = true;
        self
    }

    pub fn ignoring_eos(mut self) -> RequestSpec {
        self.ignore_eos = true;
        self
    }

    pub fn cancelled_after(mut self, events: usize) -> RequestSpec {
        self.stream = true;
        self.cancel_after = Some(events);
        self
    }

    /// The JSON body.
    pub fn body(&self, model: &str) -> Value {
        let mut body = match self.api {
            Api::Completions => json!({"model": model, "prompt": self.prompt}),
            Api::Chat => json!({
                "model": model,
                "messages": [{"role": "user", "content": self.prompt}],
            }),
        };
        let object = body.as_object_mut().expect("built as an object");
        object.insert("max_tokens".to_owned(), json!(self.max_tokens));
        object.insert("temperature".to_owned(), json!(0));
        if self.stream {
            object.insert("stream".to_owned(), json!(true));
            if self.include_usage {
                object.insert("stream_options".to_owned(), json!({"include_usage": true}));
            }
        }
        if self.ignore_eos {
            object.insert("ignore_eos".to_owned(), json!(true));
        }
        body
    }

    /// One line naming the request, for counterexamples.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "POST {} (X-Request-Id {}, phase {}): max_tokens {}",
            self.api.path(),
            self.request_id,
            self.phase,
            self.max_tokens
        );
        if self.stream {
            text.push_str(", stream");
        }
        if self.include_usage {
            text.push_str(" with usage");
        }
        if self.ignore_eos {
            text.push_str(", ignore_eos");
        }
        if let Some(pin) = &self.pin {
            let _ = write!(text, ", {DP_RANK_HEADER}: {pin}");
        }
        if let Some(k) = self.cancel_after {
            let _ = write!(text, ", cancelled after {k} events");
        }
        let prompt: String = self.prompt.chars().take(60).collect();
        let _ = write!(text, ", prompt {prompt:?}");
        text
    }
}

/// How one call ended.
#[derive(Debug)]
pub enum CallResult {
    Response(Response),
    Failed(HttpError),
    /// Not sent: the breaker had tripped (the pair stopped answering).
    NotSent(String),
    /// The run's time budget ran out: before the request could be sent (`waited` zero), or while it
    /// waited `waited` for its answer.
    OutOfBudget {
        waited: Duration,
    },
}

/// One generation request and its fate.
#[derive(Debug)]
pub struct Call {
    pub spec: RequestSpec,
    pub result: CallResult,
}

impl Call {
    pub fn response(&self) -> Option<&Response> {
        match &self.result {
            CallResult::Response(response) => Some(response),
            _ => None,
        }
    }

    /// The response when it is a 200 that was not cancelled.
    pub fn ok(&self) -> Option<&Response> {
        self.response()
            .filter(|r| r.status() == 200 && !r.cancelled)
    }

    /// Usage of a successful response: from the body, or from a stream's usage chunk.
    pub fn usage(&self) -> Option<Usage> {
        let response = self.ok()?;
        if self.spec.stream {
            StreamView::parse(self.spec.api, response).usage
        } else {
            Completion::parse(self.spec.api, response).usage
        }
    }

    /// Generated text of a successful response.
    pub fn text(&self) -> Option<String> {
        let response = self.ok()?;
        if self.spec.stream {
            Some(StreamView::parse(self.spec.api, response).text)
        } else {
            Completion::parse(self.spec.api, response).text
        }
    }

    /// A short account of the outcome, for counterexamples.
    pub fn describe_result(&self) -> String {
        match &self.result {
            CallResult::Response(r) => {
                let mut text =
                    format!("HTTP {} after {:.3} s", r.status(), r.elapsed.as_secs_f64());
                if r.cancelled {
                    text.push_str(" (cancelled by the client)");
                }
                if !r.trailing.is_empty() {
                    let _ = write!(
                        text,
                        ", then {} more bytes: {}",
                        r.trailing.len(),
                        crate::client::wire::printable_prefix(&r.trailing, 60)
                    );
                }
                let body = crate::client::wire::printable_prefix(&r.body, 160);
                let _ = write!(text, "; body {body}");
                text
            }
            CallResult::Failed(err) => err.to_string(),
            CallResult::NotSent(reason) => format!("not sent: {reason}"),
            CallResult::OutOfBudget { waited } if waited.is_zero() => {
                "not sent: the time budget was spent".to_owned()
            }
            CallResult::OutOfBudget { waited } => format!(
                "no answer after {:.1} s, when the time budget ran out",
                waited.as_secs_f64()
            ),
        }
    }
}

/// `usage` of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub total_tokens: i64,
}

impl Usage {
    fn parse(value: &Value) -> Option<Usage> {
        Some(Usage {
            prompt_tokens: value.get("prompt_tokens")?.as_i64()?,
            completion_tokens: value.get("completion_tokens")?.as_i64()?,
            total_tokens: value.get("total_tokens")?.as_i64()?,
        })
    }
}

/// A non-streaming response, read leniently; what does not fit the OpenAI shape is listed in `problems`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Completion {
    pub id: Option<String>,
    pub text: Option<String>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    pub problems: Vec<String>,
}

impl Completion {
    pub fn parse(api: Api, response: &Response) -> Completion {
        let mut out = Completion::default();
        let Some(value) = response.json() else {
            out.problems.push("body is not JSON".to_owned());
            return out;
        };
        let object = value.get("object").and_then(Value::as_str);
        if object != Some(api.object()) {
            out.problems.push(format!(
                "object is {object:?}, expected \"{}\"",
                api.object()
            ));
        }
        out.id = value.get("id").and_then(Value::as_str).map(str::to_owned);
        if out.id.as_deref().is_none_or(str::is_empty) {
            out.problems.push("no string id".to_owned());
        }
        if value.get("model").and_then(Value::as_str).is_none() {
            out.problems.push("no string model".to_owned());
        }
        match value.get("usage") {
            Some(usage) => match Usage::parse(usage) {
                Some(parsed) => out.usage = Some(parsed),
                None => out.problems.push(format!(
                    "usage {usage} lacks integer prompt/completion/total tokens"
                )),
            },
            None => out.problems.push("no usage".to_owned()),
        }
        let choices = value.get("choices").and_then(Value::as_array);
        let Some(choices) = choices else {
            out.problems.push("no choices array".to_owned());
            return out;
        };
        if choices.len() != 1 {
            out.problems
                .push(format!("{} choices, expected 1 (n = 1)", choices.len()));
        }
        let Some(choice) = choices.first() else {
            return out;
        };
        if choice.get("index").and_then(Value::as_u64) != Some(0) {
            out.problems.push("choice index is not 0".to_owned());
        }
        out.finish_reason = choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        out.text = match api {
            Api::Completions => choice
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_owned),
            Api::Chat => {
                let message = choice.get("message");
                let role = message.and_then(|m| m.get("role")).and_then(Value::as_str);
                if role != Some("assistant") {
                    out.problems
                        .push(format!("message role is {role:?}, expected \"assistant\""));
                }
                message
                    .and_then(|m| m.get("content"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            }
        };
        match &out.text {
            None => out.problems.push("choice has no text".to_owned()),
            Some(text) if text.is_empty() => out.problems.push("choice text is empty".to_owned()),
            Some(_) => {}
        }
        out
    }
}

/// A stream, read event by event.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamView {
    /// Events that were `[DONE]`, by position.
    pub done_positions: Vec<usize>,
    pub n_events: usize,
    /// Concatenated text of all chunks.
    pub text: String,
    /// Chunks that carried non-empty text.
    pub text_chunks: usize,
    /// (event position, finish_reason) of chunks with a non-null finish_reason.
    pub finishes: Vec<(usize, String)>,
    /// Position of the last chunk with text.
    pub last_text_position: Option<usize>,
    /// From the usage chunk (choices empty).
    pub usage: Option<Usage>,
    /// The usage chunk had choices.
    pub usage_chunk_with_choices: bool,
    /// Chunk ids seen.
    pub ids: Vec<String>,
    /// Arrival of each chunk with text, since the request was sent.
    pub text_times: Vec<Duration>,
    /// Framing and shape problems.
    pub problems: Vec<String>,
    /// An error object arrived inside the stream.
    pub error_event: Option<String>,
}

impl StreamView {
    pub fn parse(api: Api, response: &Response) -> StreamView {
        let mut view = StreamView {
            problems: response.sse_problems.clone(),
            n_events: response.events.len(),
            ..StreamView::default()
        };
        let content_type = response.head.header("content-type").unwrap_or("");
        if !content_type
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
        {
            view.problems.push(format!(
                "content-type is '{content_type}', not text/event-stream"
            ));
        }
        for (position, timed) in response.events.iter().enumerate() {
            let data = timed.event.data.trim();
            if data == "[DONE]" {
                view.done_positions.push(position);
                continue;
            }
            let value: Value = match serde_json::from_str(data) {
                Ok(value) => value,
                Err(_) => {
                    view.problems.push(format!(
                        "event {position} is neither JSON nor [DONE]: {}",
                        crate::client::wire::printable_prefix(data.as_bytes(), 60)
                    ));
                    continue;
                }
            };
            if let Some(error) = value.get("error") {
                view.error_event = Some(error.to_string());
                continue;
            }
            let object = value.get("object").and_then(Value::as_str);
            if object != Some(api.chunk_object()) {
                view.problems.push(format!(
                    "event {position} has object {object:?}, expected \"{}\"",
                    api.chunk_object()
                ));
            }
            if let Some(id) = value.get("id").and_then(Value::as_str)
                && !view.ids.iter().any(|seen| seen == id)
            {
                view.ids.push(id.to_owned());
            }
            let choices = value.get("choices").and_then(Value::as_array);
            if let Some(usage) = value.get("usage").filter(|u| !u.is_null()) {
                if choices.is_some_and(|c| c.is_empty()) {
                    view.usage = Usage::parse(usage);
                    if view.usage.is_none() {
                        view.problems
                            .push(format!("usage chunk {usage} lacks integer token counts"));
                    }
                    continue;
                }
                view.usage_chunk_with_choices = true;
                view.usage = Usage::parse(usage);
            }
            let Some(choice) = choices.and_then(|c| c.first()) else {
                view.problems
                    .push(format!("event {position} has no choices and no usage"));
                continue;
            };
            let text = match api {
                Api::Completions => choice.get("text").and_then(Value::as_str),
                Api::Chat => choice
                    .get("delta")
                    .and_then(|d| d.get("content"))
                    .and_then(Value::as_str),
            };
            if let Some(text) = text.filter(|t| !t.is_empty()) {
                view.text.push_str(text);
                view.text_chunks += 1;
                view.last_text_position = Some(position);
                view.text_times.push(timed.at);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                view.finishes.push((position, reason.to_owned()));
            }
        }
        view
    }
}

/// The suite's view of the pair during a run.
#[derive(Debug)]
pub struct Session {
    pub client: Client,
    pub target: Target,
    pub settings: Settings,
    pub seed: u64,
    /// The model name requests carry.
    pub model: String,
    ledger: Mutex<Vec<Call>>,
    next_request: AtomicU64,
    consecutive_timeouts: AtomicU32,
    hung: Mutex<Option<String>>,
    run_tag: String,
    /// The run's open-loop load, sent once by whichever phase needs it first.
    open_loop: tokio::sync::OnceCell<Result<BenchResult, String>>,
    /// When the run's time budget ends: no call outlasts it (`None`: no budget).
    deadline: Option<Instant>,
    /// An unanswered request that waited this long when the budget ran out fails liveness.
    stall: Duration,
    /// POSTs to the Attention server outside the ledger (the API phase's error probes) that got no
    /// answer in time: what each was and how long it waited. Liveness evidence, as ledger timeouts.
    silent_posts: Mutex<Vec<(String, Duration)>>,
}

impl Session {
    pub fn new(
        client: Client,
        target: Target,
        settings: Settings,
        seed: u64,
        model: String,
    ) -> Session {
        Session {
            client,
            target,
            settings,
            seed,
            model,
            ledger: Mutex::new(Vec::new()),
            next_request: AtomicU64::new(0),
            consecutive_timeouts: AtomicU32::new(0),
            hung: Mutex::new(None),
            run_tag: format!("{seed:x}"),
            open_loop: tokio::sync::OnceCell::new(),
            deadline: None,
            stall: settings_stall(Duration::MAX, Duration::MAX),
            silent_posts: Mutex::new(Vec::new()),
        }
    }

    /// The same session with every call ending by `deadline`, the end of a `budget`-long run.
    pub fn with_deadline(mut self, deadline: Instant, budget: Duration) -> Session {
        self.deadline = Some(deadline);
        self.stall = settings_stall(self.settings.request_timeout, budget);
        self
    }

    /// When the run's budget ends, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// How long an unanswered request may have waited when the budget ran out without failing
    /// liveness: the request timeout, or a tenth of the budget (at least 1 s) when that is shorter.
    pub fn stall(&self) -> Duration {
        self.stall
    }

    /// Time left of the budget (`Duration::MAX` without one).
    pub fn remaining(&self) -> Duration {
        self.deadline.map_or(Duration::MAX, |deadline| {
            deadline.saturating_duration_since(Instant::now())
        })
    }

    /// `timeout`, shortened to what is left of the budget; and whether the budget shortened it.
    fn capped(&self, timeout: Duration) -> (Duration, bool) {
        let remaining = self.remaining();
        if remaining < timeout {
            (remaining, true)
        } else {
            (timeout, false)
        }
    }

    /// The same session with requests naming `model`.
    pub fn with_model(mut self, model: String) -> Session {
        self.model = model;
        self
    }

    /// A random generator for one phase: the run's seed and the phase name pick its stream, so adding a
    /// phase never shifts another's draws.
    pub fn rng(&self, phase: &str) -> ChaCha8Rng {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(crate::stable_hash(phase.as_bytes()));
        rng
    }

    /// A prompt of a few words drawn from `rng`.
    pub fn prompt(&self, rng: &mut ChaCha8Rng) -> String {
        const WORDS: &[&str] = &[
            "attention",
            "expert",
            "token",
            "layer",
            "river",
            "mountain",
            "signal",
            "harbor",
            "quiet",
            "bright",
            "measure",
            "garden",
            "engine",
            "window",
            "orbit",
            "lantern",
        ];
        let n = rng.random_range(3..12);
        let words: Vec<&str> = (0..n)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect();
        format!("Conformance probe: {}", words.join(" "))
    }

    /// The open-loop load of the twin's `vllm bench serve`-style generator ([`crate::bench`]): Poisson
    /// arrivals at `--load-rate`, streaming with usage, `ignore_eos`. Routing judges its counts, the
    /// simulator check its latencies; it is sent once, by the first phase that asks.
    pub async fn open_loop(&self) -> &Result<BenchResult, String> {
        self.open_loop
            .get_or_init(|| async {
                crate::bench::run(self.open_loop_config(), false, || {})
                    .await
                    .map_err(|err| format!("the load generator could not start: {err}"))
            })
            .await
    }

    /// The settings of [`Session::open_loop`].
    pub fn open_loop_config(&self) -> BenchConfig {
        let settings = &self.settings;
        let mut config = BenchConfig::new(&self.target.attention.url());
        config.model = Some(self.model.clone());
        config.num_prompts = settings.requests as usize;
        config.random_input_len = 16;
        config.random_output_len = settings.max_tokens;
        config.random_range_ratio = 0.5;
        config.request_rate = settings.load_rate;
        config.max_concurrency = Some(settings.concurrency as usize);
        config.ignore_eos = true;
        config.seed = self.seed;
        config.request_timeout = self.capped(settings.request_timeout).0;
        config
    }

    /// `spec`'s JSON body for `model`, with the chat template in chat requests.
    pub fn body(&self, spec: &RequestSpec, model: &str) -> Value {
        let mut body = spec.body(model);
        if let (Api::Chat, Some(template)) = (spec.api, &self.settings.chat_template) {
            body.as_object_mut()
                .expect("request bodies are objects")
                .insert("chat_template".to_owned(), json!(template));
        }
        body
    }

    /// Why requests are no longer sent, once the breaker has tripped.
    pub fn hung(&self) -> Option<String> {
        self.hung.lock().expect("hung lock").clone()
    }

    /// Sends one generation request to the Attention server and records it in the ledger.
    pub async fn generate(&self, mut spec: RequestSpec) -> usize {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        spec.request_id = format!("conf-{}-{n}", self.run_tag);
        let (timeout, cut) = self.capped(self.settings.request_timeout);
        let result = match self.hung() {
            Some(reason) => CallResult::NotSent(reason),
            None if timeout.is_zero() => CallResult::OutOfBudget {
                waited: Duration::ZERO,
            },
            None => {
                let mut request =
                    Request::post_json(spec.api.path(), &self.body(&spec, &self.model))
                        .with_header(REQUEST_ID_HEADER, &spec.request_id);
                if let Some(pin) = &spec.pin {
                    request = request.with_header(DP_RANK_HEADER, pin);
                }
                let client = self.client.clone().with_timeout(timeout);
                let sent = Instant::now();
                let result = if spec.stream {
                    client
                        .stream(&self.target.attention, &request, spec.cancel_after)
                        .await
                } else {
                    client.send(&self.target.attention, &request).await
                };
                match result {
                    // Cut by the budget, not by the request timeout: the breaker does not count it.
                    Err(err) if cut && err.is_timeout() => CallResult::OutOfBudget {
                        waited: sent.elapsed(),
                    },
                    result => {
                        self.note_timeout(&result, &spec);
                        match result {
                            Ok(response) => CallResult::Response(response),
                            Err(err) => CallResult::Failed(err),
                        }
                    }
                }
            }
        };
        let mut ledger = self.ledger.lock().expect("ledger lock");
        ledger.push(Call { spec, result });
        ledger.len() - 1
    }

    fn note_timeout(&self, result: &Result<Response, HttpError>, spec: &RequestSpec) {
        match result {
            Err(err) if err.is_timeout() => {
                let n = self.consecutive_timeouts.fetch_add(1, Ordering::Relaxed) + 1;
                if n >= self.settings.breaker_timeouts {
                    let mut hung = self.hung.lock().expect("hung lock");
                    if hung.is_none() {
                        *hung = Some(format!(
                            "the Attention server answered none of {n} consecutive requests within {:.1?} (last: {})",
                            self.settings.request_timeout,
                            spec.describe()
                        ));
                    }
                }
            }
            _ => self.consecutive_timeouts.store(0, Ordering::Relaxed),
        }
    }

    /// Sends `specs` with at most `concurrency` in flight; returns their ledger indices in input order.
    pub async fn generate_all(&self, specs: Vec<RequestSpec>, concurrency: usize) -> Vec<usize> {
        use futures::StreamExt as _;
        futures::stream::iter(specs.into_iter().map(|spec| self.generate(spec)))
            .buffered(concurrency.max(1))
            .collect()
            .await
    }

    /// Runs `f` on a ledger entry.
    pub fn with_call<T>(&self, index: usize, f: impl FnOnce(&Call) -> T) -> T {
        let ledger = self.ledger.lock().expect("ledger lock");
        f(&ledger[index])
    }

    /// Runs `f` on the whole ledger.
    pub fn with_ledger<T>(&self, f: impl FnOnce(&[Call]) -> T) -> T {
        let ledger = self.ledger.lock().expect("ledger lock");
        f(&ledger)
    }

    /// A GET to the Attention server under the probe timeout (within the budget).
    pub async fn get(&self, path: &str) -> Result<Response, HttpError> {
        self.client
            .clone()
            .with_timeout(self.capped(self.settings.probe_timeout).0)
            .send(&self.target.attention, &Request::get(path))
            .await
    }

    /// A request to any endpoint under the probe timeout (within the budget). A POST to the Attention
    /// server that gets no answer is noted for liveness.
    pub async fn probe(
        &self,
        endpoint: &Endpoint,
        request: &Request,
    ) -> Result<Response, HttpError> {
        let sent = Instant::now();
        let result = self
            .client
            .clone()
            .with_timeout(self.capped(self.settings.probe_timeout).0)
            .send(endpoint, request)
            .await;
        if let Err(err) = &result
            && err.is_timeout()
            && request.method == "POST"
            && *endpoint == self.target.attention
        {
            self.note_silent_post(
                format!("POST {} (an API probe)", request.path),
                sent.elapsed(),
            );
        }
        result
    }

    /// Notes a POST to the Attention server's host:port, outside the ledger, that got no answer
    /// after `waited`: liveness evidence (see [`Session::silent_posts`]).
    pub fn note_silent_post(&self, what: String, waited: Duration) {
        self.silent_posts
            .lock()
            .expect("silent posts lock")
            .push((what, waited));
    }

    /// `timeout`, cut to what is left of the run's budget.
    pub fn within_budget(&self, timeout: Duration) -> Duration {
        self.capped(timeout).0
    }

    /// The POSTs of [`Session::probe`] that got no answer, with how long each waited.
    pub fn silent_posts(&self) -> Vec<(String, Duration)> {
        self.silent_posts.lock().expect("silent posts lock").clone()
    }

    /// Scrapes the Attention server's `/metrics`. Tries three times: on a host:port shared with the
    /// FFN server (afd-spec §6.4) a fresh connection may reach a listener that is not the Attention one.
    pub async fn scrape(&self) -> Result<Scrape, String> {
        let mut last = String::new();
        for _ in 0..3 {
            match self.scrape_once().await {
                Ok(scrape) => return Ok(scrape),
                Err(err) => last = err,
            }
        }
        Err(last)
    }

    async fn scrape_once(&self) -> Result<Scrape, String> {
        let response = self
            .get("/metrics")
            .await
            .map_err(|err| format!("GET /metrics: {err}"))?;
        if response.status() != 200 {
            return Err(format!("GET /metrics answered {}", response.status()));
        }
        let text = String::from_utf8(response.body)
            .map_err(|_| "GET /metrics: body is not UTF-8".to_owned())?;
        Scrape::parse(&text).map_err(|err| err.to_string())
    }

    /// Scrapes until `done` holds or `within` passes; returns the last scrape and whether `done` held.
    pub async fn settle(
        &self,
        within: Duration,
        done: impl Fn(&Scrape) -> bool,
    ) -> Result<(Scrape, bool), String> {
        let deadline = Instant::now() + self.capped(within).0;
        let mut pause = Duration::from_millis(20);
        loop {
            let scrape = self.scrape().await?;
            if done(&scrape) {
                return Ok((scrape, true));
            }
            if Instant::now() >= deadline {
                return Ok((scrape, false));
            }
            tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now()))).await;
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    }
}

/// See [`Session::stall`].
fn settings_stall(request_timeout: Duration, budget: Duration) -> Duration {
    request_timeout.min((budget / 10).max(Duration::from_secs(1)))
}

/// Counter names of vLLM's `/metrics` the routing checks read (afd-spec §7.4).
pub mod metric {
    pub const SUCCESS: &str = "vllm:request_success_total";
    pub const PROMPT_TOKENS: &str = "vllm:prompt_tokens_total";
    pub const GENERATION_TOKENS: &str = "vllm:generation_tokens_total";
    pub const RUNNING: &str = "vllm:num_requests_running";
    pub const WAITING: &str = "vllm:num_requests_waiting";
    pub const FINISHED_REASON: &str = "finished_reason";
}

/// The counters conservation compares, summed over engines, and per engine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    pub success: f64,
    pub aborted: f64,
    pub prompt_tokens: f64,
    pub generation_tokens: f64,
    pub success_by_engine: BTreeMap<String, f64>,
}

impl Counters {
    /// Reads the counters; an error names the series that is missing.
    pub fn read(scrape: &Scrape) -> Result<Counters, String> {
        let need = |name: &str| {
            scrape
                .sum(name)
                .ok_or_else(|| format!("/metrics has no {name} series"))
        };
        Ok(Counters {
            success: need(metric::SUCCESS)?,
            aborted: scrape
                .sum_where(metric::SUCCESS, |labels| {
                    labels.get(metric::FINISHED_REASON).map(String::as_str) == Some("abort")
                })
                .unwrap_or(0.0),
            prompt_tokens: need(metric::PROMPT_TOKENS)?,
            generation_tokens: need(metric::GENERATION_TOKENS)?,
            success_by_engine: scrape.per_engine(metric::SUCCESS),
        })
    }

    /// `self - before`, per field.
    pub fn since(&self, before: &Counters) -> Counters {
        let mut by_engine = self.success_by_engine.clone();
        for (engine, value) in &before.success_by_engine {
            *by_engine.entry(engine.clone()).or_insert(0.0) -= value;
        }
        Counters {
            success: self.success - before.success,
            aborted: self.aborted - before.aborted,
            prompt_tokens: self.prompt_tokens - before.prompt_tokens,
            generation_tokens: self.generation_tokens - before.generation_tokens,
            success_by_engine: by_engine,
        }
    }
}

/// `running + waiting` per engine, and whether all are zero.
pub fn queues(scrape: &Scrape) -> (BTreeMap<String, f64>, bool) {
    let mut per = scrape.per_engine(metric::RUNNING);
    for (engine, waiting) in scrape.per_engine(metric::WAITING) {
        *per.entry(engine).or_insert(0.0) += waiting;
    }
    let idle = per.values().all(|v| *v == 0.0);
    (per, idle)
}

/// Renders a per-engine map as `{0: 3, 1: 5}`.
pub fn show_engines(map: &BTreeMap<String, f64>) -> String {
    let items: Vec<String> = map.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{{}}}", items.join(", "))
}

#[cfg(test)]
mod tests;
