//! The OpenAI-compatible wire format as vLLM serves it: request parsing (completions and chat
//! completions), response and SSE chunk bodies, and vLLM's nested error shape
//! (`{"error": {"message", "type", "param", "code"}}`, vLLM >= 0.10.1; probe-conformance-anchors §4.5).
//!
//! Requests are read from `serde_json::Value` by hand rather than derived, so every rejection names the
//! field at fault and only `afd-traces` types derive serde (ARCHITECTURE.md). Nothing here does I/O.

use serde_json::{Value, json};

use crate::twin::text::{count_tokens, fingerprint};

/// An HTTP error in vLLM's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub param: Option<String>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            param: None,
        }
    }

    pub fn bad_param(param: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            param: Some(param.to_owned()),
        }
    }

    /// vLLM's answer for a model name it does not serve.
    pub fn unknown_model(model: &str) -> ApiError {
        ApiError {
            status: 404,
            message: format!("The model `{model}` does not exist."),
            param: Some("model".to_owned()),
        }
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 503,
            message: message.into(),
            param: None,
        }
    }

    /// The OpenAI SDK class name vLLM puts in `type`.
    pub fn kind(&self) -> &'static str {
        match self.status {
            400 => "BadRequestError",
            401 => "AuthenticationError",
            404 => "NotFoundError",
            405 => "MethodNotAllowedError",
            422 => "UnprocessableEntityError",
            429 => "RateLimitError",
            503 => "ServiceUnavailableError",
            _ => "InternalServerError",
        }
    }

    /// `{"error": {...}}`.
    pub fn body(&self) -> Value {
        json!({
            "error": {
                "message": self.message,
                "type": self.kind(),
                "param": self.param,
                "code": self.status,
            }
        })
    }
}

/// Which endpoint a request came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    ChatCompletions,
}

/// The parts of a completion or chat request the twin honours; everything else is accepted and ignored.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerationRequest {
    pub endpoint: Endpoint,
    pub model: String,
    pub prompt_tokens: u32,
    /// Identifies the prompt for the text generator.
    pub prompt_key: u64,
    /// `None`: until the context is full (`max_model_len - prompt_tokens`).
    pub max_tokens: Option<u32>,
    pub temperature: f64,
    pub seed: Option<u64>,
    pub stream: bool,
    pub include_usage: bool,
    pub ignore_eos: bool,
}

/// Tokens the chat template adds per message and once per conversation (the twin's stand-in template).
pub const CHAT_TOKENS_PER_MESSAGE: u32 = 3;
pub const CHAT_TOKENS_PER_CONVERSATION: u32 = 1;

/// Default `max_tokens` of `/v1/completions` when the request gives none (OpenAI's and vLLM's 16).
pub const COMPLETIONS_DEFAULT_MAX_TOKENS: u32 = 16;

impl GenerationRequest {
    /// Reads a request body. `body` is the raw bytes so malformed JSON is reported like vLLM does.
    pub fn parse(endpoint: Endpoint, body: &[u8]) -> Result<GenerationRequest, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|err| {
            ApiError::bad_request(format!("request body is not valid JSON: {err}"))
        })?;
        let Value::Object(object) = &value else {
            return Err(ApiError::bad_request("request body must be a JSON object"));
        };
        let model = match object.get("model") {
            Some(Value::String(model)) => model.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(ApiError::bad_param("model", "model must be a string")),
        };
        let (prompt_tokens, prompt_key) = match endpoint {
            Endpoint::Completions => parse_prompt(object.get("prompt"))?,
            Endpoint::ChatCompletions => parse_messages(object.get("messages"))?,
        };
        let max_tokens_field = match endpoint {
            Endpoint::ChatCompletions if object.contains_key("max_completion_tokens") => {
                "max_completion_tokens"
            }
            _ => "max_tokens",
        };
        let max_tokens = match object.get(max_tokens_field) {
            None | Some(Value::Null) => match endpoint {
                Endpoint::Completions => Some(COMPLETIONS_DEFAULT_MAX_TOKENS),
                Endpoint::ChatCompletions => None,
            },
            Some(value) => Some(positive_u32(max_tokens_field, value)?),
        };
        let temperature = match object.get("temperature") {
            None | Some(Value::Null) => 1.0,
            Some(Value::Number(n)) => match n.as_f64() {
                Some(t) if (0.0..=2.0).contains(&t) => t,
                _ => {
                    return Err(ApiError::bad_param(
                        "temperature",
                        format!("temperature must be in [0, 2], got {n}"),
                    ));
                }
            },
            Some(_) => {
                return Err(ApiError::bad_param(
                    "temperature",
                    "temperature must be a number",
                ));
            }
        };
        let seed = match object.get("seed") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(
                n.as_i64()
                    .map_or_else(|| n.as_u64().unwrap_or(0), |v| v as u64),
            ),
            Some(_) => return Err(ApiError::bad_param("seed", "seed must be an integer")),
        };
        let stream = optional_bool(object.get("stream"), "stream")?;
        let include_usage = match object.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(Value::Object(options)) => {
                if !stream {
                    return Err(ApiError::bad_param(
                        "stream_options",
                        "Stream options can only be defined when `stream=True`.",
                    ));
                }
                optional_bool(options.get("include_usage"), "stream_options.include_usage")?
            }
            Some(_) => {
                return Err(ApiError::bad_param(
                    "stream_options",
                    "stream_options must be an object",
                ));
            }
        };
        let ignore_eos = optional_bool(object.get("ignore_eos"), "ignore_eos")?;
        match object.get("n") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
            Some(other) => {
                return Err(ApiError::bad_param(
                    "n",
                    format!("afd-twin serves n = 1 only, got n = {other}"),
                ));
            }
        }
        Ok(GenerationRequest {
            endpoint,
            model,
            prompt_tokens,
            prompt_key,
            max_tokens,
            temperature,
            seed,
            stream,
            include_usage,
            ignore_eos,
        })
    }

    /// Greedy requests (temperature 0) and seeded requests generate the same text every time.
    pub fn is_repeatable(&self) -> bool {
        self.temperature == 0.0 || self.seed.is_some()
    }
}

fn optional_bool(value: Option<&Value>, field: &str) -> Result<bool, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ApiError::bad_param(
            field,
            format!("{field} must be a boolean"),
        )),
    }
}

fn positive_u32(field: &str, value: &Value) -> Result<u32, ApiError> {
    match value.as_i64() {
        Some(v) if v >= 1 => u32::try_from(v).map_err(|_| {
            ApiError::bad_param(
                field,
                format!("{field} must be at most {}, got {v}", u32::MAX),
            )
        }),
        Some(v) => Err(ApiError::bad_param(
            field,
            format!("{field} must be at least 1, got {v}"),
        )),
        None => Err(ApiError::bad_param(
            field,
            format!("{field} must be an integer, got {value}"),
        )),
    }
}

/// `prompt`: a string, a list of one string, a list of token ids or a list of one list of token ids.
fn parse_prompt(prompt: Option<&Value>) -> Result<(u32, u64), ApiError> {
    let invalid = || {
        ApiError::bad_param(
            "prompt",
            "prompt must be a string, a list of token ids, or a list holding one of them",
        )
    };
    let (tokens, key) = match prompt {
        None | Some(Value::Null) => {
            return Err(ApiError::bad_param("prompt", "prompt is required"));
        }
        Some(Value::String(text)) => (count_tokens(text), fingerprint(text.as_bytes())),
        Some(Value::Array(items)) => match items.as_slice() {
            [Value::String(text)] => (count_tokens(text), fingerprint(text.as_bytes())),
            [Value::Array(ids)] => token_ids(ids).ok_or_else(invalid)?,
            [] => return Err(ApiError::bad_param("prompt", "prompt must not be empty")),
            ids if ids.iter().all(Value::is_u64) => token_ids(ids).ok_or_else(invalid)?,
            [_, _, ..] if items.iter().all(|v| v.is_string() || v.is_array()) => {
                return Err(ApiError::bad_param(
                    "prompt",
                    "afd-twin serves one prompt per request (batched prompts are not supported)",
                ));
            }
            _ => return Err(invalid()),
        },
        Some(_) => return Err(invalid()),
    };
    if tokens == 0 {
        return Err(ApiError::bad_param("prompt", "prompt must not be empty"));
    }
    Ok((tokens, key))
}

fn token_ids(ids: &[Value]) -> Option<(u32, u64)> {
    let mut bytes = Vec::with_capacity(ids.len() * 8);
    for id in ids {
        bytes.extend_from_slice(&id.as_u64()?.to_le_bytes());
    }
    Some((u32::try_from(ids.len()).ok()?, fingerprint(&bytes)))
}

/// `messages`: a non-empty list of `{role, content}` with string content or a list of text parts.
fn parse_messages(messages: Option<&Value>) -> Result<(u32, u64), ApiError> {
    let Some(Value::Array(messages)) = messages else {
        return Err(ApiError::bad_param(
            "messages",
            "messages must be a non-empty list",
        ));
    };
    if messages.is_empty() {
        return Err(ApiError::bad_param(
            "messages",
            "messages must be a non-empty list",
        ));
    }
    let mut tokens = CHAT_TOKENS_PER_CONVERSATION;
    let mut transcript = String::new();
    for (i, message) in messages.iter().enumerate() {
        let field = |name: &str| format!("messages[{i}].{name}");
        let Some(role) = message.get("role").and_then(Value::as_str) else {
            return Err(ApiError::bad_param(
                &field("role"),
                format!("{} must be a string", field("role")),
            ));
        };
        let content = match message.get("content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => {
                let mut text = String::new();
                for (j, part) in parts.iter().enumerate() {
                    match part.get("text").and_then(Value::as_str) {
                        Some(t) => {
                            text.push(' ');
                            text.push_str(t);
                        }
                        None => {
                            return Err(ApiError::bad_param(
                                &format!("messages[{i}].content[{j}]"),
                                "afd-twin reads text content parts only",
                            ));
                        }
                    }
                }
                text
            }
            Some(_) => {
                return Err(ApiError::bad_param(
                    &field("content"),
                    format!("{} must be a string or a list of parts", field("content")),
                ));
            }
        };
        tokens = tokens
            .saturating_add(CHAT_TOKENS_PER_MESSAGE)
            .saturating_add(count_tokens(&content));
        transcript.push_str(role);
        transcript.push('\u{1}');
        transcript.push_str(&content);
        transcript.push('\u{2}');
    }
    Ok((tokens, fingerprint(transcript.as_bytes())))
}

/// `finish_reason` of a finished request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FinishReason {
    Stop,
    Length,
    Abort,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
        }
    }
}

/// Token counts of a finished request; `total_tokens` is computed unless a fault skews it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    /// Added to `total_tokens` (0 for a correct twin; 1 under `wrong-usage`).
    pub total_skew: u32,
}

impl Usage {
    pub fn body(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens + self.total_skew,
            "completion_tokens": self.completion_tokens,
            "prompt_tokens_details": null,
        })
    }
}

/// Fields shared by every body of one response.
#[derive(Clone, Debug)]
pub struct ResponseHead {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub endpoint: Endpoint,
}

impl ResponseHead {
    /// The whole non-streaming response.
    pub fn full(&self, text: &str, finish: FinishReason, usage: Usage) -> Value {
        let choice = match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish.as_str(),
                "stop_reason": null,
                "prompt_logprobs": null,
            }),
            Endpoint::ChatCompletions => json!({
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "refusal": null,
                    "annotations": null,
                    "audio": null,
                    "function_call": null,
                    "tool_calls": [],
                    "reasoning_content": null,
                },
                "logprobs": null,
                "finish_reason": finish.as_str(),
                "stop_reason": null,
            }),
        };
        json!({
            "id": self.id,
            "object": self.object(false),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage.body(),
            "service_tier": null,
            "system_fingerprint": null,
            "prompt_logprobs": null,
            "kv_transfer_params": null,
        })
    }

    /// The first chunk of a chat stream carries the role and empty content (vLLM does the same).
    pub fn chat_role_chunk(&self) -> Value {
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": null,
                "finish_reason": null,
            }],
        })
    }

    /// One streamed text delta; the last one carries `finish`.
    pub fn chunk(&self, text: &str, finish: Option<FinishReason>) -> Value {
        let finish = finish.map(FinishReason::as_str);
        let choice = match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": finish,
                "stop_reason": null,
            }),
            Endpoint::ChatCompletions => json!({
                "index": 0,
                "delta": {"content": text},
                "logprobs": null,
                "finish_reason": finish,
                "stop_reason": null,
            }),
        };
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        })
    }

    /// The usage-only chunk sent before `[DONE]` when `stream_options.include_usage` is set.
    pub fn usage_chunk(&self, usage: Usage) -> Value {
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage.body(),
        })
    }

    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Completions, _) => "text_completion",
            (Endpoint::ChatCompletions, false) => "chat.completion",
            (Endpoint::ChatCompletions, true) => "chat.completion.chunk",
        }
    }
}

#[cfg(test)]
mod tests;
