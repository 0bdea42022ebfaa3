//! The Attention twin's HTTP API: OpenAI completions and chat completions (plain and SSE), `/v1/models`,
//! `/health`, `/metrics`, `/version`, with vLLM's error shapes, `X-Request-Id` echo, `X-data-parallel-rank`
//! pinning and DP routing by afd-sim's load balancer, `4·waiting + running` (afd-spec §7.2, §7.4).
//!
//! Handlers validate, route and hand requests to the engine loop ([`crate::engine`]); they turn the
//! tokens it delivers into text with the request's [`Generator`]. Faults that act on responses are applied
//! here.

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use afd_sim::model::router::DpRouter;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::engine::{Submission, TokenEvent};
use crate::faults::{Fault, FaultSet};
use crate::http::{DropConnection, DuplicateResponse};
use crate::metrics::Metrics;
use crate::openai::{ApiError, Endpoint, FinishReason, GenerationRequest, ResponseHead, Usage};
use crate::text::Generator;
use crate::timing::{RequestId, TimedRequest};

/// The header vLLM reads a DP rank from (any case; afd-spec §7.2).
pub const DP_RANK_HEADER: &str = "x-data-parallel-rank";
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Everything the handlers share.
#[derive(Debug)]
pub struct AttentionState {
    /// Names the server answers to; the first is used in responses.
    pub model_names: Vec<String>,
    /// The model path (`root` in `/v1/models`).
    pub model_root: String,
    pub max_model_len: u32,
    pub metrics: Arc<Metrics>,
    pub submissions: mpsc::UnboundedSender<Submission>,
    pub faults: FaultSet,
    pub twin_seed: u64,
    /// Set by `hang-after-n-requests`; read by the engine loop.
    pub frozen: Arc<AtomicBool>,
    /// Cleared when the engine loop ends (the FFN twin went away).
    pub engine_alive: AtomicBool,
    pub started_unix_s: u64,
    /// `--enable-request-id-headers`: echo `X-Request-Id` on responses; vLLM does only then
    /// (vllm/entrypoints/openai/cli_args.py:288, the recorded transcript 16-completion-request-id).
    pub request_id_headers: bool,
    /// afd-sim's DP load balancer (afd-spec §7.2), the one the simulator routes with.
    router: Mutex<DpRouter>,
    next_id: AtomicU64,
    accepted: AtomicU64,
}

impl AttentionState {
    #[expect(
        clippy::too_many_arguments,
        reason = "a constructor for a struct of independent settings"
    )]
    pub fn new(
        model_names: Vec<String>,
        model_root: String,
        max_model_len: u32,
        metrics: Arc<Metrics>,
        submissions: mpsc::UnboundedSender<Submission>,
        faults: FaultSet,
        twin_seed: u64,
        frozen: Arc<AtomicBool>,
    ) -> AttentionState {
        let router = Mutex::new(DpRouter::new(metrics.n_engines()));
        AttentionState {
            model_names,
            model_root,
            max_model_len,
            metrics,
            submissions,
            faults,
            twin_seed,
            frozen,
            engine_alive: AtomicBool::new(true),
            started_unix_s: unix_now(),
            request_id_headers: false,
            router,
            next_id: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The router of the Attention twin.
pub fn router(state: Arc<AttentionState>) -> Router {
    Router::new()
        .route("/v1/completions", post(completions))
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/version", get(version))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::map_response(uvicorn_headers))
        .with_state(state)
}

/// The headers vLLM's server adds to every response: uvicorn's `server`, and `vary: Origin` from its
/// CORS middleware (vllm/entrypoints/openai/api_server.py:280).
async fn uvicorn_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::SERVER, header::HeaderValue::from_static("uvicorn"));
    headers.insert(header::VARY, header::HeaderValue::from_static("Origin"));
    response
}

async fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"detail": "Not Found"})),
    )
        .into_response()
}

async fn method_not_allowed() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        axum::Json(json!({"detail": "Method Not Allowed"})),
    )
        .into_response()
}

/// An error response in vLLM's shape.
pub fn error_response(error: &ApiError) -> Response {
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(error.body())).into_response()
}

async fn models(State(state): State<Arc<AttentionState>>) -> Response {
    let data: Vec<Value> = state
        .model_names
        .iter()
        .map(|name| {
            json!({
                "id": name,
                "object": "model",
                "created": state.started_unix_s,
                "owned_by": "vllm",
                "root": state.model_root,
                "parent": null,
                "max_model_len": state.max_model_len,
                // vllm/entrypoints/openai/engine/protocol.py:74 ModelPermission, with its defaults.
                "permission": [{
                    "id": format!("modelperm-{:016x}", afd_conformance::stable_hash(name.as_bytes()) ^ state.started_unix_s),
                    "object": "model_permission",
                    "created": state.started_unix_s,
                    "allow_create_engine": false,
                    "allow_sampling": true,
                    "allow_logprobs": true,
                    "allow_search_indices": false,
                    "allow_view": true,
                    "allow_fine_tuning": false,
                    "organization": "*",
                    "group": null,
                    "is_blocking": false,
                }],
            })
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn health(State(state): State<Arc<AttentionState>>) -> Response {
    let alive = state.engine_alive.load(Ordering::Relaxed);
    if alive && !state.faults.has(Fault::HealthLies) {
        StatusCode::OK.into_response()
    } else {
        error_response(&ApiError::unavailable("engine is not healthy"))
    }
}

async fn metrics(State(state): State<Arc<AttentionState>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            // prometheus_client 0.2x serves the 1.0.0 text format (as the recorded vLLM 0.26.0 does).
            "text/plain; version=1.0.0; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// The vLLM version whose API the twin speaks (a client tells a twin by `afd_twin_timing_info` on
/// `/metrics`).
pub const VLLM_VERSION: &str = "0.26.0";

async fn version() -> Response {
    axum::Json(json!({"version": VLLM_VERSION})).into_response()
}

async fn completions(
    State(state): State<Arc<AttentionState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(state, Endpoint::Completions, headers, body).await
}

async fn chat_completions(
    State(state): State<Arc<AttentionState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    generate(state, Endpoint::ChatCompletions, headers, body).await
}

/// The pinned DP rank, if the header asks for one; an unreadable or out-of-range rank is a 400 as in vLLM.
fn pinned_rank(headers: &HeaderMap, n_engines: u32) -> Result<Option<u32>, ApiError> {
    let Some(value) = headers.get(DP_RANK_HEADER) else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("").trim();
    let rank: i64 = text.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "X-data-parallel-rank must be an integer, got '{text}'"
        ))
    })?;
    if rank < 0 || rank >= i64::from(n_engines) {
        return Err(ApiError::bad_request(format!(
            "data_parallel_rank {rank} is out of range [0, {n_engines})."
        )));
    }
    Ok(Some(
        u32::try_from(rank).expect("checked against the engine count"),
    ))
}

/// Picks the engine and counts the request as waiting there, under one lock.
fn route(state: &AttentionState, pinned: Option<u32>) -> u32 {
    let misroute = state.faults.has(Fault::MisrouteToWrongEngine);
    let pinned = pinned.filter(|_| !state.faults.has(Fault::IgnorePinning));
    state.metrics.with(|engines| {
        let engine = match pinned {
            Some(rank) => rank as usize,
            None if misroute => {
                // Highest score, ties to the last engine: the opposite of the balancer.
                let mut best = 0;
                for (i, e) in engines.iter().enumerate() {
                    if e.score() >= engines[best].score() {
                        best = i;
                    }
                }
                best
            }
            None => {
                // afd-sim's balancer: lowest score, ties to the first engine in scan order (afd-spec
                // §7.2). The twin knows its engines' counts at once, so it publishes them before every
                // choice and routes as the one API-server client it is.
                let counts: Vec<(u64, u64)> =
                    engines.iter().map(|e| (e.waiting, e.running)).collect();
                let mut router = state.router.lock().unwrap_or_else(PoisonError::into_inner);
                router.publish(&counts);
                router.route(0) as usize
            }
        };
        engines[engine].waiting += 1;
        u32::try_from(engine).expect("engine index came from a u32 count")
    })
}

fn with_request_id(mut response: Response, request_id: Option<&HeaderValue>) -> Response {
    if let Some(id) = request_id {
        response.headers_mut().insert(REQUEST_ID_HEADER, id.clone());
    }
    response
}

async fn generate(
    state: Arc<AttentionState>,
    endpoint: Endpoint,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request_id = headers
        .get(REQUEST_ID_HEADER)
        .cloned()
        .filter(|_| state.request_id_headers);
    let response = match prepare(&state, endpoint, &headers, &body) {
        Ok(prepared) => respond(state, prepared).await,
        Err(error) => error_response(&error),
    };
    with_request_id(response, request_id.as_ref())
}

/// A validated, routed request.
struct Prepared {
    request: GenerationRequest,
    head: ResponseHead,
    generator: Generator,
    output_tokens: u32,
    finish: FinishReason,
    engine: u32,
    id: RequestId,
    arrived: Instant,
    drop_response: bool,
}

fn prepare(
    state: &AttentionState,
    endpoint: Endpoint,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Prepared, ApiError> {
    let arrived = Instant::now();
    let request = GenerationRequest::parse(endpoint, body)?;
    let model = if request.model.is_empty() {
        state.model_names[0].clone()
    } else if state.model_names.contains(&request.model) {
        request.model.clone()
    } else {
        return Err(ApiError::unknown_model(&request.model));
    };
    let pinned = pinned_rank(headers, state.metrics.n_engines())?;
    let room = state.max_model_len.saturating_sub(request.prompt_tokens);
    let max_tokens = request.max_tokens.unwrap_or(room);
    if room == 0 || max_tokens > room {
        return Err(context_exceeded(state.max_model_len, &request, max_tokens));
    }
    let serial = state.next_id.fetch_add(1, Ordering::Relaxed);
    let sample_key = match (request.temperature == 0.0, request.seed) {
        (true, _) => 0,
        (false, Some(seed)) => seed ^ 0x5eed_0000_0000_0000,
        (false, None) => serial.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
    };
    let generator = Generator::new(request.prompt_key, sample_key, state.twin_seed);
    let natural = generator.natural_length();
    let (output_tokens, finish) = if !request.ignore_eos && natural <= max_tokens {
        (natural, FinishReason::Stop)
    } else {
        (max_tokens, FinishReason::Length)
    };
    // Counted from 1: with drop-response=K requests K, 2K, ... lose their response.
    let accepted = state.accepted.fetch_add(1, Ordering::Relaxed) + 1;
    let drop_response = state
        .faults
        .drop_every()
        .is_some_and(|k| accepted.is_multiple_of(k));
    if let Some(n) = state.faults.hang_after()
        && accepted > n
    {
        state.frozen.store(true, Ordering::Relaxed);
    }
    let client_id = headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let base = client_id.unwrap_or_else(|| {
        let bytes = serial.to_le_bytes();
        let salt = state.started_unix_s.to_le_bytes();
        format!(
            "{:016x}{:016x}",
            crate::text::fingerprint(&[&salt[..], &bytes[..]].concat()),
            crate::text::fingerprint(&[&bytes[..], &salt[..]].concat())
        )
    });
    let prefix = match endpoint {
        Endpoint::Completions => "cmpl",
        Endpoint::ChatCompletions => "chatcmpl",
    };
    let head = ResponseHead {
        id: format!("{prefix}-{base}"),
        created: unix_now(),
        model,
        endpoint,
    };
    let engine = if drop_response {
        0
    } else {
        route(state, pinned)
    };
    Ok(Prepared {
        request,
        head,
        generator,
        output_tokens,
        finish,
        engine,
        id: RequestId(serial),
        arrived,
        drop_response,
    })
}

async fn respond(state: Arc<AttentionState>, prepared: Prepared) -> Response {
    if prepared.drop_response {
        let mut response = StatusCode::OK.into_response();
        response.extensions_mut().insert(DropConnection);
        return response;
    }
    let (events, receiver) = mpsc::unbounded_channel();
    let submission = Submission {
        request: TimedRequest {
            id: prepared.id,
            engine: prepared.engine,
            prompt_tokens: prepared.request.prompt_tokens,
            output_tokens: prepared.output_tokens,
        },
        finish: prepared.finish,
        arrived: prepared.arrived,
        events,
    };
    if state.submissions.send(submission).is_err() {
        state.metrics.with(|engines| {
            let e = &mut engines[prepared.engine as usize];
            e.waiting = e.waiting.saturating_sub(1);
        });
        return error_response(&engine_dead());
    }
    let usage = Usage {
        prompt_tokens: prepared.request.prompt_tokens,
        completion_tokens: prepared.output_tokens,
        total_skew: u32::from(state.faults.has(Fault::WrongUsage)),
    };
    let mut response = if prepared.request.stream {
        stream_response(&state, prepared, receiver, usage)
    } else {
        full_response(prepared, receiver, usage).await
    };
    if state.faults.has(Fault::DuplicateResponse) {
        response.extensions_mut().insert(DuplicateResponse);
    }
    response
}

/// The longest token of the recorded model's word-level vocabulary (`t102399`), vLLM's
/// `max_chars_per_token` for the pre-tokenisation length check.
pub const MAX_CHARS_PER_TOKEN: u64 = 7;

/// vLLM 0.26's answer to a prompt plus `max_tokens` over the context: a text prompt longer than the
/// input budget in characters is refused before tokenising, else the token count is (vllm/renderers/
/// params.py:334-352 and 433-455; `max_input_tokens = max_model_len - max_tokens`).
fn context_exceeded(max_model_len: u32, request: &GenerationRequest, max_tokens: u32) -> ApiError {
    let max_input_tokens = u64::from(max_model_len.saturating_sub(max_tokens));
    let head = format!(
        "This model's maximum context length is {max_model_len} tokens. However, you requested {max_tokens} output tokens and your prompt contains"
    );
    let tail =
        "Please reduce the length of the input prompt or the number of requested output tokens.";
    if let Some(chars) = request.prompt_chars
        && chars > max_input_tokens * MAX_CHARS_PER_TOKEN
    {
        return ApiError::vllm_validation(
            "input_text",
            &chars.to_string(),
            &format!(
                "{head} {chars} characters (more than {} characters, which is the upper bound for {max_input_tokens} input tokens). {tail}",
                max_input_tokens * MAX_CHARS_PER_TOKEN
            ),
        );
    }
    let tokens = request.prompt_tokens;
    let qualifier = if u64::from(tokens) == max_input_tokens + 1 {
        "at least "
    } else {
        ""
    };
    ApiError::vllm_validation(
        "input_tokens",
        &tokens.to_string(),
        &format!(
            "{head} {qualifier}{tokens} input tokens, for a total of {qualifier}{} tokens. {tail}",
            u64::from(tokens) + u64::from(max_tokens)
        ),
    )
}

fn engine_dead() -> ApiError {
    ApiError {
        status: 500,
        message: "EngineCore encountered an issue: the FFN twin went away (afd-spec §6.5)"
            .to_owned(),
        param: None,
        kind: None,
    }
}

async fn full_response(
    prepared: Prepared,
    mut receiver: mpsc::UnboundedReceiver<TokenEvent>,
    usage: Usage,
) -> Response {
    loop {
        match receiver.recv().await {
            Some(event) if event.last => break,
            Some(_) => {}
            None => return error_response(&engine_dead()),
        }
    }
    let text = prepared.generator.text(0..prepared.output_tokens);
    axum::Json(prepared.head.full(&text, prepared.finish, usage)).into_response()
}

fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

fn stream_response(
    state: &AttentionState,
    prepared: Prepared,
    receiver: mpsc::UnboundedReceiver<TokenEvent>,
    usage: Usage,
) -> Response {
    let Prepared {
        request,
        head,
        generator,
        finish,
        ..
    } = prepared;
    let with_done = !state.faults.has(Fault::StreamWithoutDone);
    let opening = match head.endpoint {
        Endpoint::ChatCompletions => Some(sse(&head.chat_role_chunk())),
        Endpoint::Completions => None,
    };
    let head = Arc::new(head);
    let token_head = head.clone();
    let tokens = tokio_stream_from(receiver).flat_map(move |event: Option<TokenEvent>| {
        let chunks: Vec<Bytes> = match event {
            Some(event) => {
                let text = generator.token(event.index);
                let fingerprint = event.last && !request.include_usage;
                let mut chunks = vec![sse(&token_head.chunk(
                    &text,
                    event.last.then_some(finish),
                    fingerprint,
                ))];
                if event.last {
                    if request.include_usage {
                        chunks.push(sse(&token_head.usage_chunk(usage)));
                    }
                    if with_done {
                        chunks.push(Bytes::from_static(b"data: [DONE]\n\n"));
                    }
                }
                chunks
            }
            // The engine died mid-stream: vLLM sends the error as one data line, then [DONE].
            None => vec![
                sse(&engine_dead().body()),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ],
        };
        futures::stream::iter(chunks.into_iter().map(Ok::<Bytes, Infallible>))
    });
    let body =
        futures::stream::iter(opening.into_iter().map(Ok::<Bytes, Infallible>)).chain(tokens);
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .body(Body::from_stream(body))
        .expect("static headers are valid")
}

/// Token events until the last one; `None` once if the engine ends before it.
fn tokio_stream_from(
    receiver: mpsc::UnboundedReceiver<TokenEvent>,
) -> impl futures::Stream<Item = Option<TokenEvent>> {
    futures::stream::unfold((receiver, false), |(mut receiver, finished)| async move {
        if finished {
            return None;
        }
        match receiver.recv().await {
            Some(event) => Some((Some(event), (receiver, event.last))),
            None => Some((None, (receiver, true))),
        }
    })
}
