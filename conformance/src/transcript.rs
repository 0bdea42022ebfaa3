//! Golden transcripts of a server's wire behaviour: the fixed list of exchanges `afd-conformance record`
//! sends, and each exchange's request and response as JSON (status, every header, body; for a stream
//! every event in order).
//!
//! The list lives here and only here, so a recording of real vLLM and a replay against `afd-twin` send
//! the very same requests. This module sends and records; it writes no files and compares nothing (the
//! binary writes, the twin's tests compare).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::{BodyMode, Client, Endpoint, HttpError, Request, Response};

pub mod compare;

/// Version of the transcript file format; bumped on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Request bodies longer than this are stored as their length and a prefix (the too-long prompt).
pub const STORED_BODY_BYTES: usize = 64 * 1024;

/// The context length assumed when `/v1/models` does not report `max_model_len`.
pub const DEFAULT_MAX_MODEL_LEN: u64 = 163_840;

/// What the exchange list depends on: the served model and its context length, the chat template and
/// the size of the known load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub model: String,
    /// Context length (vLLM's `max_model_len`), for the too-long prompt.
    pub max_model_len: u64,
    /// Sent as `chat_template` in every chat request when given (vLLM takes it only with
    /// `--trust-request-chat-template`: vllm/renderers/online_renderer.py:266).
    pub chat_template: Option<String>,
    /// Completions in the known load sent before the last `/metrics`.
    pub load: u32,
}

/// Tokens of each completion in the known load (prompt and output: `ignore_eos`, `max_tokens`).
pub const LOAD_PROMPT_TOKENS: u32 = 8;
pub const LOAD_OUTPUT_TOKENS: u32 = 8;

/// One request of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange {
    /// Unique, file-name safe: `NN-name` is the file.
    pub name: String,
    /// What the exchange probes, one line.
    pub about: &'static str,
    pub request: Request,
    /// Read the body as an event stream.
    pub stream: bool,
}

/// One exchange as it went.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub exchange: Exchange,
    pub result: Result<Response, String>,
    pub elapsed: Duration,
}

fn words(from: u32, n: u32) -> String {
    (from..from + n)
        .map(|i| format!("t{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl Plan {
    fn chat(&self, mut body: Value) -> Value {
        if let Some(template) = &self.chat_template {
            body.as_object_mut()
                .expect("chat bodies are objects")
                .insert("chat_template".to_owned(), json!(template));
        }
        body
    }

    /// The fixed list, in the order it is sent. Names are unique.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let model = self.model.as_str();
        let mut list: Vec<(&str, &'static str, Request, bool)> = Vec::new();
        let completions = "/v1/completions";
        let chat = "/v1/chat/completions";
        let user = |content: &str| json!([{"role": "user", "content": content}]);
        list.push((
            "models",
            "the model list",
            Request::get("/v1/models"),
            false,
        ));
        list.push(("health", "liveness", Request::get("/health"), false));
        list.push(("version", "server version", Request::get("/version"), false));
        list.push((
            "metrics-before",
            "/metrics before any generation",
            Request::get("/metrics"),
            false,
        ));
        list.push((
            "completion",
            "a non-streaming completion",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "max_tokens": 8, "temperature": 0}),
            ),
            false,
        ));
        list.push((
            "completion-stream-usage",
            "a streaming completion with include_usage",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "max_tokens": 8, "temperature": 0,
                        "stream": true, "stream_options": {"include_usage": true}}),
            ),
            true,
        ));
        list.push((
            "completion-stream",
            "a streaming completion without usage",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "max_tokens": 8, "temperature": 0, "stream": true}),
            ),
            true,
        ));
        list.push((
            "chat",
            "a non-streaming chat completion",
            Request::post_json(
                chat,
                &self.chat(json!({"model": model, "messages": user(&words(1, 3)), "max_tokens": 8, "temperature": 0})),
            ),
            false,
        ));
        list.push((
            "chat-stream-usage",
            "a streaming chat completion with include_usage",
            Request::post_json(
                chat,
                &self.chat(json!({"model": model, "messages": user(&words(1, 3)), "max_tokens": 8, "temperature": 0,
                        "stream": true, "stream_options": {"include_usage": true}})),
            ),
            true,
        ));
        list.push((
            "chat-stream",
            "a streaming chat completion without usage",
            Request::post_json(
                chat,
                &self.chat(json!({"model": model, "messages": user(&words(1, 3)), "max_tokens": 8, "temperature": 0, "stream": true})),
            ),
            true,
        ));
        for k in 1..=2 {
            let name = if k == 1 { "greedy-1" } else { "greedy-2" };
            list.push((
                name,
                "the same greedy completion, twice",
                Request::post_json(
                    completions,
                    &json!({"model": model, "prompt": words(5, 4), "max_tokens": 16, "temperature": 0}),
                ),
                false,
            ));
        }
        list.push((
            "completion-ignore-eos",
            "ignore_eos with max_tokens 12 over a prompt of 8 token ids",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": (1..=8).collect::<Vec<u32>>(), "max_tokens": 12,
                        "temperature": 0, "ignore_eos": true}),
            ),
            false,
        ));
        list.push((
            "completion-ignore-eos-stream",
            "ignore_eos streamed with usage",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": (1..=8).collect::<Vec<u32>>(), "max_tokens": 6,
                        "temperature": 0, "ignore_eos": true, "stream": true,
                        "stream_options": {"include_usage": true}}),
            ),
            true,
        ));
        list.push((
            "chat-ignore-eos",
            "a chat completion with ignore_eos",
            Request::post_json(
                chat,
                &self.chat(
                    json!({"model": model, "messages": user(&words(1, 3)), "max_tokens": 6,
                        "temperature": 0, "ignore_eos": true}),
                ),
            ),
            false,
        ));
        list.push((
            "completion-default-max-tokens",
            "a completion without max_tokens (vLLM's default)",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "temperature": 0, "ignore_eos": true}),
            ),
            false,
        ));
        list.push((
            "completion-request-id",
            "a completion with an X-Request-Id header",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "max_tokens": 4, "temperature": 0}),
            )
            .with_header("X-Request-Id", "afd-record-1"),
            false,
        ));
        list.push((
            "error-malformed-json",
            "a completion body that is not JSON",
            Request::post_raw(completions, "application/json", b"{\"model\": "),
            false,
        ));
        list.push((
            "error-malformed-json-chat",
            "a chat body that is not JSON",
            Request::post_raw(chat, "application/json", b"{\"model\": "),
            false,
        ));
        list.push((
            "error-unknown-model",
            "a completion naming a model not served",
            Request::post_json(
                completions,
                &json!({"model": "afd-no-such-model", "prompt": words(1, 4), "max_tokens": 4}),
            ),
            false,
        ));
        list.push((
            "error-unknown-model-stream",
            "a streaming completion naming a model not served",
            Request::post_json(
                completions,
                &json!({"model": "afd-no-such-model", "prompt": words(1, 4), "max_tokens": 4, "stream": true}),
            ),
            true,
        ));
        list.push((
            "error-unknown-model-chat",
            "a chat completion naming a model not served",
            Request::post_json(
                chat,
                &self.chat(json!({"model": "afd-no-such-model", "messages": user(&words(1, 3)), "max_tokens": 4})),
            ),
            false,
        ));
        let too_long = usize::try_from(self.max_model_len + 1).unwrap_or(usize::MAX >> 8);
        list.push((
            "error-prompt-too-long",
            "a prompt of max_model_len + 1 token ids",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": vec![1u32; too_long], "max_tokens": 1}),
            ),
            false,
        ));
        list.push((
            "error-max-tokens-over-context",
            "a short prompt with max_tokens = max_model_len",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "max_tokens": self.max_model_len}),
            ),
            false,
        ));
        let bad: [(&str, &'static str, Value); 8] = [
            (
                "error-negative-max-tokens",
                "max_tokens -1",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": -1}),
            ),
            (
                "error-zero-max-tokens",
                "max_tokens 0",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": 0}),
            ),
            (
                "error-negative-temperature",
                "temperature -1",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": 4, "temperature": -1}),
            ),
            (
                "error-n-zero",
                "n 0",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": 4, "n": 0}),
            ),
            (
                "error-top-p-zero",
                "top_p 0",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": 4, "top_p": 0}),
            ),
            (
                "error-max-tokens-string",
                "max_tokens of the wrong type",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": "ten"}),
            ),
            (
                "error-missing-prompt",
                "a completion without a prompt",
                json!({"model": model, "max_tokens": 4}),
            ),
            (
                "error-stream-options-without-stream",
                "stream_options on a non-streaming request",
                json!({"model": model, "prompt": words(1, 4), "max_tokens": 4,
                       "stream_options": {"include_usage": true}}),
            ),
        ];
        for (name, about, body) in bad {
            list.push((name, about, Request::post_json(completions, &body), false));
        }
        list.push((
            "error-chat-messages-string",
            "chat messages that are a string, not a list",
            Request::post_json(
                chat,
                &json!({"model": model, "messages": "Hello", "max_tokens": 4}),
            ),
            false,
        ));
        list.push((
            "error-dp-rank-out-of-range",
            "X-data-parallel-rank outside the DP size",
            Request::post_json(
                completions,
                &json!({"model": model, "prompt": words(1, 4), "max_tokens": 4}),
            )
            .with_header("X-data-parallel-rank", "5"),
            false,
        ));
        list.push((
            "error-unknown-route",
            "a route the server does not have",
            Request::get("/v1/no-such-route"),
            false,
        ));
        list.push((
            "error-wrong-method",
            "GET on a POST route",
            Request::get(completions),
            false,
        ));
        list.push((
            "error-wrong-method-models",
            "POST on a GET route",
            Request::post_json("/v1/models", &json!({})),
            false,
        ));
        let mut named: Vec<(String, &'static str, Request, bool)> = list
            .into_iter()
            .map(|(name, about, request, stream)| (name.to_owned(), about, request, stream))
            .collect();
        for k in 0..self.load {
            named.push((
                format!("load-{k:02}"),
                "the known load: a completion of fixed length",
                Request::post_json(
                    completions,
                    &json!({"model": model, "prompt": words(1, LOAD_PROMPT_TOKENS),
                            "max_tokens": LOAD_OUTPUT_TOKENS, "temperature": 0, "ignore_eos": true}),
                ),
                false,
            ));
        }
        named.push((
            "metrics".to_owned(),
            "/metrics after the known load",
            Request::get("/metrics"),
            false,
        ));
        named
            .into_iter()
            .enumerate()
            .map(|(i, (name, about, request, stream))| Exchange {
                name: format!("{i:02}-{name}"),
                about,
                request,
                stream,
            })
            .collect()
    }

    /// Tokens the known load adds to `vllm:prompt_tokens_total` and `vllm:generation_tokens_total`.
    pub fn load_tokens(&self) -> (u64, u64) {
        (
            u64::from(self.load) * u64::from(LOAD_PROMPT_TOKENS),
            u64::from(self.load) * u64::from(LOAD_OUTPUT_TOKENS),
        )
    }
}

/// The model and context length `/v1/models` reports (`data[0].id`, `data[0].max_model_len`).
pub fn served_model(models: &Value) -> Option<(String, Option<u64>)> {
    let first = models.get("data")?.as_array()?.first()?;
    let id = first.get("id")?.as_str()?.to_owned();
    Some((id, first.get("max_model_len").and_then(Value::as_u64)))
}

/// Sends every exchange in order, one at a time, each under the client's deadline.
pub async fn record(client: &Client, endpoint: &Endpoint, plan: &Plan) -> Vec<Recorded> {
    let mut out = Vec::new();
    for exchange in plan.exchanges() {
        let start = Instant::now();
        let mode = if exchange.stream {
            BodyMode::Sse { cancel_after: None }
        } else {
            BodyMode::Whole
        };
        let result = client
            .call(endpoint, &exchange.request, mode)
            .await
            .map_err(|err: HttpError| err.to_string());
        out.push(Recorded {
            exchange,
            result,
            elapsed: start.elapsed(),
        });
    }
    out
}

/// A body as JSON when it is JSON, else as text.
fn body_value(bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) if !bytes.is_empty() => json!({"json": value}),
        _ => json!({"text": String::from_utf8_lossy(bytes)}),
    }
}

/// The request as sent (headers the client adds itself are listed in `client_headers`).
pub fn request_json(request: &Request) -> Value {
    let mut value = json!({
        "method": request.method,
        "path": request.path,
        "headers": request.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        // What `client::wire::encode_request` adds to every request.
        "client_headers": ["Host", "User-Agent: afd-conformance", "Accept: */*", "Connection: close", "Content-Length"],
    });
    let object = value.as_object_mut().expect("built as an object");
    if request.body.len() > STORED_BODY_BYTES {
        object.insert("body_bytes".to_owned(), json!(request.body.len()));
        object.insert(
            "body_prefix".to_owned(),
            json!(String::from_utf8_lossy(&request.body[..256])),
        );
    } else if !request.body.is_empty() {
        object.insert("body".to_owned(), body_value(&request.body));
    }
    value
}

/// The response: status, reason, headers in order, body; for a stream every event in order.
pub fn response_json(response: &Response) -> Value {
    let mut value = json!({
        "status": response.head.status,
        "reason": response.head.reason,
        "headers": response.head.headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
    });
    let object = value.as_object_mut().expect("built as an object");
    let is_stream = response
        .head
        .header("content-type")
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if is_stream {
        let events: Vec<Value> = response
            .events
            .iter()
            .map(|e| {
                let data = match serde_json::from_str::<Value>(&e.event.data) {
                    Ok(v) => json!({"json": v}),
                    Err(_) => json!({"text": e.event.data}),
                };
                match &e.event.event {
                    Some(name) => json!({"event": name, "data": data}),
                    None => json!({"data": data}),
                }
            })
            .collect();
        object.insert("events".to_owned(), Value::Array(events));
        object.insert(
            "raw".to_owned(),
            json!(String::from_utf8_lossy(&response.body)),
        );
        if !response.sse_problems.is_empty() {
            object.insert("sse_problems".to_owned(), json!(response.sse_problems));
        }
    } else {
        object.insert("body".to_owned(), body_value(&response.body));
    }
    if !response.trailing.is_empty() {
        object.insert(
            "trailing".to_owned(),
            json!(String::from_utf8_lossy(&response.trailing)),
        );
    }
    value
}

/// One exchange's file.
pub fn exchange_json(recorded: &Recorded) -> Value {
    let mut value = json!({
        "schema_version": SCHEMA_VERSION,
        "name": recorded.exchange.name,
        "about": recorded.exchange.about,
        "stream": recorded.exchange.stream,
        "request": request_json(&recorded.exchange.request),
        "elapsed_ms": recorded.elapsed.as_secs_f64() * 1e3,
    });
    let object = value.as_object_mut().expect("built as an object");
    match &recorded.result {
        Ok(response) => object.insert("response".to_owned(), response_json(response)),
        Err(err) => object.insert("error".to_owned(), json!(err)),
    };
    value
}

#[cfg(test)]
mod tests;
