//! The FFN twin: hosts the rendezvous, counts the steps the Attention twin drives (rows per FFN rank as
//! afd-spec §3.5 derives them), and exits with the pair. Its HTTP port behaves as afd-spec §6.4 says the
//! real FFN server's does: bound, never listening (`refuse`, the default), or, when asked, listening and
//! answering every request with a vLLM-shaped 503 (`reject`).
//!
//! The faults `ffn-accepts-requests`, `ffn-hangs-requests` and `slow-ffn-step` act here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio::net::TcpSocket;
use tokio::sync::watch;

use afd_sim::topology::Topology;

use crate::attention::error_response;
use crate::faults::{Fault, FaultSet};
use crate::openai::{ApiError, Endpoint, FinishReason, GenerationRequest, ResponseHead, Usage};
use crate::rendezvous::{FfnEvent, FfnLink, LinkError};
use crate::text::Generator;

/// What the FFN twin's HTTP port does (afd-spec §6.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FfnHttp {
    /// Bound but never listening: connections are refused. What §6.4 infers of the real server.
    #[default]
    Refuse,
    /// Listening and answering every request with 503 and vLLM's error body.
    Reject,
}

impl FfnHttp {
    pub fn parse(text: &str) -> Option<FfnHttp> {
        match text {
            "refuse" => Some(FfnHttp::Refuse),
            "reject" => Some(FfnHttp::Reject),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            FfnHttp::Refuse => "refuse",
            FfnHttp::Reject => "reject",
        }
    }
}

/// How the HTTP port ends up, decided once the Attention twin's HTTP address is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpPlan {
    /// Bound, not listening.
    Silent,
    Reject,
    Accept,
    Hang,
}

/// The plan for the FFN's HTTP port. A `reject` port that shares the Attention role's host:port stays
/// silent, so every connection on it reaches Attention as §6.4 says; the FFN faults listen regardless,
/// which is how they break it.
pub fn http_plan(mode: FfnHttp, faults: &FaultSet, own: SocketAddr, attention: &str) -> HttpPlan {
    if faults.has(Fault::FfnAcceptsRequests) {
        return HttpPlan::Accept;
    }
    if faults.has(Fault::FfnHangsRequests) {
        return HttpPlan::Hang;
    }
    match mode {
        FfnHttp::Refuse => HttpPlan::Silent,
        FfnHttp::Reject if own.to_string() == attention => HttpPlan::Silent,
        FfnHttp::Reject => HttpPlan::Reject,
    }
}

/// The router for a listening FFN port under `plan` (not `Silent`).
pub fn router(plan: HttpPlan, model_name: String, twin_seed: u64) -> Router {
    match plan {
        HttpPlan::Silent | HttpPlan::Reject => Router::new().fallback(reject),
        HttpPlan::Hang => Router::new().fallback(hang),
        HttpPlan::Accept => Router::new()
            .route("/v1/completions", post(accept_completion))
            .route("/v1/chat/completions", post(accept_chat))
            .route("/health", get(|| async { StatusCode::OK }))
            .fallback(reject)
            .with_state(Arc::new((model_name, twin_seed))),
    }
}

async fn reject() -> Response {
    error_response(&ApiError::unavailable(
        "this is the FFN server of an AFD pair: it never serves client requests (afd-spec §6.4); send them to the Attention server",
    ))
}

async fn hang() -> Response {
    futures::future::pending::<()>().await;
    StatusCode::OK.into_response()
}

async fn accept_completion(State(state): State<Arc<(String, u64)>>, body: Bytes) -> Response {
    accept_generation(&state, Endpoint::Completions, &body)
}

async fn accept_chat(State(state): State<Arc<(String, u64)>>, body: Bytes) -> Response {
    accept_generation(&state, Endpoint::ChatCompletions, &body)
}

/// `ffn-accepts-requests`: a plausible completion, at once and without any engine.
fn accept_generation(state: &(String, u64), endpoint: Endpoint, body: &[u8]) -> Response {
    let request = match GenerationRequest::parse(endpoint, body) {
        Ok(request) => request,
        Err(error) => return error_response(&error),
    };
    let n = request.max_tokens.unwrap_or(16);
    let text = Generator::new(request.prompt_key, 0, state.1).text(0..n);
    let head = ResponseHead {
        id: "cmpl-ffn".to_owned(),
        created: 0,
        model: state.0.clone(),
        endpoint,
    };
    let usage = Usage {
        prompt_tokens: request.prompt_tokens,
        completion_tokens: n,
        total_skew: 0,
    };
    axum::Json(head.full(&text, FinishReason::Length, usage)).into_response()
}

/// Serves the FFN port under `plan` on the already bound `socket` (or keeps it bound, silent).
pub fn start_http(
    socket: TcpSocket,
    plan: HttpPlan,
    model_name: String,
    twin_seed: u64,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<Option<TcpSocket>> {
    if plan == HttpPlan::Silent {
        return Ok(Some(socket));
    }
    let listener = socket.listen(1024)?;
    tokio::spawn(crate::http::serve(
        listener,
        router(plan, model_name, twin_seed),
        false,
        shutdown,
    ));
    Ok(None)
}

/// What the step loop saw before it ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StepTally {
    pub steps: u64,
    /// Steps the Attention side split into two DBO stages.
    pub split_steps: u64,
    /// Rows received per FFN rank over all steps and stages (afd-spec §3.5: `max(1, count)` per peer).
    pub rows_per_ffn_rank: Vec<u64>,
}

/// How the step loop ended.
#[derive(Debug)]
pub enum StepLoopEnd {
    /// The Attention twin said goodbye.
    Bye(String),
    /// The Attention twin refused to serve the pair.
    Abort(String),
    Gone(LinkError),
    Shutdown,
}

/// Serves steps until the Attention twin leaves or `shutdown` turns true.
pub async fn step_loop(
    link: &mut FfnLink,
    topology: &Topology,
    faults: &FaultSet,
    tally: &mut StepTally,
    mut shutdown: watch::Receiver<bool>,
) -> StepLoopEnd {
    tally.rows_per_ffn_rank = vec![0; topology.ffn_ranks() as usize];
    let delay = faults.ffn_step_delay_ms().map(Duration::from_millis);
    loop {
        let event = tokio::select! {
            event = link.next() => event,
            _ = shutdown.changed() => return StepLoopEnd::Shutdown,
        };
        match event {
            Ok(FfnEvent::Step(step)) => {
                tally.steps += 1;
                if step.stages > 1 {
                    tally.split_steps += 1;
                }
                for stage in stage_tokens(&step.tokens, step.stages) {
                    for (f, total) in tally.rows_per_ffn_rank.iter_mut().enumerate() {
                        let f = u32::try_from(f).expect("FFN rank count is a u32");
                        if let Some(rows) = topology.ffn_receive_rows(f, &stage) {
                            *total += rows.iter().map(|&r| u64::from(r)).sum::<u64>();
                        }
                    }
                }
                // The FFN side of the step takes `delay` longer than the simulator says it does.
                if let Some(delay) = delay {
                    tokio::time::sleep(step.duration + delay).await;
                }
                if let Err(err) = link.ack(step.step).await {
                    return StepLoopEnd::Gone(err);
                }
            }
            Ok(FfnEvent::Bye(reason)) => return StepLoopEnd::Bye(reason),
            Ok(FfnEvent::Abort(reason)) => return StepLoopEnd::Abort(reason),
            Err(err) => return StepLoopEnd::Gone(err),
        }
    }
}

/// Per-stage token vectors: one stage as sent, or a DBO split of each engine's tokens into `T // 2` and
/// `T - T // 2` (afd-spec §4.2).
pub fn stage_tokens(tokens: &[u32], stages: u32) -> Vec<Vec<u32>> {
    if stages < 2 {
        return vec![tokens.to_vec()];
    }
    let first: Vec<u32> = tokens.iter().map(|t| t / 2).collect();
    let second: Vec<u32> = tokens.iter().map(|t| t - t / 2).collect();
    vec![first, second]
}

/// The JSON the FFN twin logs when it exits (also useful to tests).
pub fn tally_json(tally: &StepTally) -> serde_json::Value {
    json!({
        "steps": tally.steps,
        "split_steps": tally.split_steps,
        "rows_per_ffn_rank": tally.rows_per_ffn_rank,
    })
}
