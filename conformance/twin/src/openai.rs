//! The OpenAI-compatible wire format as vLLM serves it: request parsing (completions and chat
//! completions), response and SSE chunk bodies, and vLLM's nested error shape
//! (`{"error": {"message", "type", "param", "code"}}`, vLLM >= 0.10.1; probe-conformance-anchors §4.5).
//!
//! Requests are read from `serde_json::Value` by hand rather than derived, so every rejection names the
//! field at fault and only `afd-traces` types derive serde (ARCHITECTURE.md). Nothing here does I/O.

use serde_json::{Value, json};

use crate::text::{count_tokens, fingerprint};

/// An HTTP error in vLLM's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub param: Option<String>,
    /// `type` when it is not the status's SDK class: FastAPI's request validation answers with the
    /// status phrase, "Bad Request" (vllm/entrypoints/serve/utils/server_utils.py:488-531).
    pub kind: Option<&'static str>,
}

impl ApiError {
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            param: None,
            kind: None,
        }
    }

    pub fn bad_param(param: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            param: Some(param.to_owned()),
            kind: None,
        }
    }

    /// A `VLLMValidationError` raised by `SamplingParams` or the renderer: the message ends with
    /// `(parameter=P, value=V)` (vllm/exceptions.py) and `param` names the field.
    pub fn vllm_validation(param: &str, value: &str, message: &str) -> ApiError {
        ApiError::bad_param(
            param,
            format!("{message} (parameter={param}, value={value})"),
        )
    }

    /// FastAPI's `RequestValidationError` as vLLM renders it: `1 validation error:` and pydantic's
    /// error dict, `type` "Bad Request", `param` the cleaned location
    /// (vllm/entrypoints/serve/utils/server_utils.py:488-531).
    pub fn request_validation(param: &str, error: &str) -> ApiError {
        ApiError {
            status: 400,
            message: format!("1 validation error:\n  {error}"),
            param: Some(param.to_owned()),
            kind: Some("Bad Request"),
        }
    }

    /// A model validator's `VLLMValidationError` inside a request validation error: pydantic's
    /// `value_error` at `('body',)` with the input body, `param` the validator's parameter
    /// (server_utils.py:498-504).
    pub fn body_value_error(param: &str, message: &str, body: &Value) -> ApiError {
        ApiError::request_validation(
            param,
            &format!(
                "{{'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, {message} (parameter={param})', 'input': {}, 'ctx': {{'error': VLLMValidationError({})}}}}",
                python_repr(body),
                python_str(message)
            ),
        )
    }

    /// vLLM's answer for a model name it does not serve.
    pub fn unknown_model(model: &str) -> ApiError {
        ApiError {
            status: 404,
            message: format!("The model `{model}` does not exist."),
            param: Some("model".to_owned()),
            kind: None,
        }
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 503,
            message: message.into(),
            param: None,
            kind: None,
        }
    }

    /// The OpenAI SDK class name vLLM puts in `type`.
    pub fn kind(&self) -> &'static str {
        if let Some(kind) = self.kind {
            return kind;
        }
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

/// A Python string literal as `repr` writes it (single quotes unless the text holds one), with file
/// paths replaced as vLLM's `sanitize_message` does (vllm/entrypoints/serve/utils/api_utils.py:312).
pub fn python_str(text: &str) -> String {
    const ROOTS: [&str; 9] = [
        "/home/", "/usr/", "/opt/", "/var/", "/tmp/", "/root/", "/lib/", "/mnt/", "/srv/",
    ];
    if ROOTS.iter().any(|r| text.starts_with(r))
        && text[1..]
            .chars()
            .all(|c| c.is_alphanumeric() || "_.-/".contains(c))
    {
        return "'<path>'".to_owned();
    }
    if text.contains('\'') && !text.contains('"') {
        return format!("\"{text}\"");
    }
    let mut out = String::from("'");
    for c in text.chars() {
        match c {
            '\'' => out.push_str("\\'"),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// A JSON value as Python's `repr` of its parsed form writes it (keys in the order sent).
pub fn python_repr(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => python_number(n),
        Value::String(s) => python_str(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(python_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", python_str(k), python_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// A number as Python prints it: integers bare, floats with a fraction (`-1.0`, `0.5`).
pub fn python_number(n: &serde_json::Number) -> String {
    if n.is_f64() {
        python_float(n.as_f64().unwrap_or(0.0))
    } else {
        n.to_string()
    }
}

/// A float as Python's `repr` writes it.
pub fn python_float(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e16 {
        format!("{x:.1}")
    } else {
        format!("{x}")
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
    /// Characters of a text prompt (`None` for token ids and chat), for vLLM's length pre-check.
    pub prompt_chars: Option<u64>,
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
        let value: Value = serde_json::from_slice(body).map_err(|err| json_invalid(body, &err))?;
        let Value::Object(object) = &value else {
            return Err(not_an_object(endpoint, &value));
        };
        let model = match object.get("model") {
            Some(Value::String(model)) => model.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(ApiError::bad_param("model", "model must be a string")),
        };
        // Pydantic's field validation first, then the model validators, then SamplingParams, as
        // vLLM validates (vllm/entrypoints/openai/completion/protocol.py, vllm/sampling_params.py).
        if let Some(Value::String(text)) = object.get("max_tokens")
            && text.trim().parse::<i64>().is_err()
        {
            return Err(ApiError::request_validation(
                "body.max_tokens",
                &format!(
                    "{{'type': 'int_parsing', 'loc': ('body', 'max_tokens'), 'msg': 'Input should be a valid integer, unable to parse string as an integer', 'input': {}}}",
                    python_str(text)
                ),
            ));
        }
        if endpoint == Endpoint::ChatCompletions
            && let Some(messages) = object.get("messages")
            && !messages.is_array()
        {
            return Err(ApiError::request_validation(
                "body.messages",
                &format!(
                    "{{'type': 'list_type', 'loc': ('body', 'messages'), 'msg': 'Input should be a valid list', 'input': {}}}",
                    python_repr(messages)
                ),
            ));
        }
        let streaming = matches!(object.get("stream"), Some(Value::Bool(true)));
        if !streaming && !matches!(object.get("stream_options"), None | Some(Value::Null)) {
            return Err(ApiError::body_value_error(
                "stream_options",
                "Stream options can only be defined when `stream=True`.",
                &value,
            ));
        }
        if endpoint == Endpoint::Completions
            && matches!(object.get("prompt"), None | Some(Value::Null))
        {
            return Err(ApiError::body_value_error(
                "prompt",
                "Either prompt or prompt_embeds must be provided and non-empty.",
                &value,
            ));
        }
        let (prompt_tokens, prompt_key) = match endpoint {
            Endpoint::Completions => parse_prompt(object.get("prompt"))?,
            // A request's own template is taken to add no tokens of its own (the recorded one,
            // `{% for message in messages %}{{ message['content'] }} {% endfor %}`, adds none).
            Endpoint::ChatCompletions => parse_messages(
                object.get("messages"),
                !matches!(object.get("chat_template"), Some(Value::String(_))),
            )?,
        };
        let prompt_chars = match (endpoint, object.get("prompt")) {
            (Endpoint::Completions, Some(Value::String(text))) => Some(text.chars().count() as u64),
            _ => None,
        };
        match object.get("n") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_u64() == Some(1) => {}
            Some(Value::Number(n)) if n.as_i64().is_some_and(|n| n < 1) => {
                return Err(ApiError::bad_request(format!(
                    "n must be at least 1, got {n}."
                )));
            }
            Some(other) => {
                return Err(ApiError::bad_param(
                    "n",
                    format!("afd-twin serves n = 1 only, got n = {other}"),
                ));
            }
        }
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
            // vLLM bounds temperature below only (vllm/sampling_params.py _verify_args).
            Some(Value::Number(n)) => match n.as_f64() {
                Some(t) if t >= 0.0 => t,
                _ => {
                    let shown = python_float(n.as_f64().unwrap_or(f64::NAN));
                    return Err(ApiError::vllm_validation(
                        "temperature",
                        &shown,
                        &format!("temperature must be non-negative, got {shown}."),
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
        if let Some(Value::Number(p)) = object.get("top_p") {
            let top_p = p.as_f64().unwrap_or(f64::NAN);
            if !(top_p > 0.0 && top_p <= 1.0) {
                let shown = python_float(top_p);
                return Err(ApiError::vllm_validation(
                    "top_p",
                    &shown,
                    &format!("top_p must be in (0, 1], got {shown}."),
                ));
            }
        }
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
        Ok(GenerationRequest {
            endpoint,
            model,
            prompt_tokens,
            prompt_chars,
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

/// A body that is not JSON, as FastAPI reports it: pydantic's `json_invalid` at the byte offset
/// where Python's decoder stopped (vllm/entrypoints/serve/utils/server_utils.py:488).
fn json_invalid(body: &[u8], err: &serde_json::Error) -> ApiError {
    let text = String::from_utf8_lossy(body);
    let before: usize = text
        .split_inclusive('\n')
        .take(err.line().saturating_sub(1))
        .map(|l| l.chars().count())
        .sum();
    let column = if err.is_eof() {
        err.column()
    } else {
        err.column().saturating_sub(1)
    };
    let pos = before + column;
    ApiError::request_validation(
        &format!("body.{pos}"),
        &format!(
            "{{'type': 'json_invalid', 'loc': ('body', {pos}), 'msg': 'JSON decode error', 'input': {{}}, 'ctx': {{'error': 'Expecting value'}}}}"
        ),
    )
}

/// A JSON body that is not an object. vLLM 0.26's completions validator reads it as a dict and
/// fails with an AttributeError, which it answers as a 500 (vllm/entrypoints/openai/completion/
/// protocol.py:558, serve/utils/server_utils.py:382); chat rejects it as a bad request.
fn not_an_object(endpoint: Endpoint, value: &Value) -> ApiError {
    match endpoint {
        Endpoint::Completions => {
            let name = match value {
                Value::Array(_) => "list",
                Value::String(_) => "str",
                Value::Number(n) if n.is_f64() => "float",
                Value::Number(_) => "int",
                Value::Bool(_) => "bool",
                Value::Null | Value::Object(_) => "NoneType",
            };
            ApiError {
                status: 500,
                message: format!("'{name}' object has no attribute 'get'"),
                param: None,
                kind: None,
            }
        }
        Endpoint::ChatCompletions => ApiError::bad_request("request body must be a JSON object"),
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
        Some(v) => Err(ApiError::vllm_validation(
            field,
            &v.to_string(),
            &format!("{field} must be at least 1, got {v}."),
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
fn parse_messages(messages: Option<&Value>, template_tokens: bool) -> Result<(u32, u64), ApiError> {
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
    let (per_conversation, per_message) = if template_tokens {
        (CHAT_TOKENS_PER_CONVERSATION, CHAT_TOKENS_PER_MESSAGE)
    } else {
        (0, 0)
    };
    let mut tokens = per_conversation;
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
            .saturating_add(per_message)
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

/// vLLM 0.26's `system_fingerprint`: `vllm-<version>-<hash>`, `nohash` without a config hash
/// (as the recorded server sends it, conformance/tests/transcripts/vllm-0.26.0-h200-dsv2l-dummy).
pub const SYSTEM_FINGERPRINT: &str = "vllm-0.26.0-nohash";

impl ResponseHead {
    /// The whole non-streaming response, with every field vLLM 0.26 serialises
    /// (vllm/entrypoints/openai/completion/protocol.py:575-620, chat_completion/protocol.py:55-137; chat's
    /// empty `tool_calls` is dropped by its serializer, protocol.py:67).
    pub fn full(&self, text: &str, finish: FinishReason, usage: Usage) -> Value {
        match self.endpoint {
            Endpoint::Completions => json!({
                "id": self.id,
                "object": self.object(false),
                "created": self.created,
                "model": self.model,
                "choices": [{
                    "index": 0,
                    "text": text,
                    "logprobs": null,
                    "finish_reason": finish.as_str(),
                    "stop_reason": null,
                    "token_ids": null,
                    "prompt_logprobs": null,
                    "prompt_token_ids": null,
                    "routed_experts": null,
                }],
                "service_tier": null,
                "system_fingerprint": SYSTEM_FINGERPRINT,
                "usage": usage.body(),
                "kv_transfer_params": null,
                "ec_transfer_params": null,
                "metrics": null,
            }),
            Endpoint::ChatCompletions => json!({
                "id": self.id,
                "object": self.object(false),
                "created": self.created,
                "model": self.model,
                "choices": [{
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": text,
                        "refusal": null,
                        "annotations": null,
                        "audio": null,
                        "function_call": null,
                        "reasoning": null,
                    },
                    "logprobs": null,
                    "finish_reason": finish.as_str(),
                    "stop_reason": null,
                    "token_ids": null,
                    "routed_experts": null,
                }],
                "service_tier": null,
                "system_fingerprint": SYSTEM_FINGERPRINT,
                "usage": usage.body(),
                "prompt_logprobs": null,
                "prompt_token_ids": null,
                "prompt_text": null,
                "kv_transfer_params": null,
                "ec_transfer_params": null,
                "metrics": null,
            }),
        }
    }

    /// The first chunk of a chat stream carries the role and empty content, and the prompt fields
    /// (vllm/entrypoints/openai/chat_completion/serving.py:533, `exclude_unset`).
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
            "prompt_token_ids": null,
            "prompt_text": null,
        })
    }

    /// One streamed text delta; the last one carries `finish`, and `system_fingerprint` when no usage
    /// chunk follows (vLLM sets it on the final chunk only; completion/protocol.py:649).
    pub fn chunk(&self, text: &str, finish: Option<FinishReason>, fingerprint: bool) -> Value {
        let reason = finish.map(FinishReason::as_str);
        let choice = match self.endpoint {
            Endpoint::Completions => json!({
                "index": 0,
                "text": text,
                "logprobs": null,
                "finish_reason": reason,
                "stop_reason": null,
                "prompt_token_ids": null,
                "token_ids": null,
            }),
            // Chat sets stop_reason only on the finishing chunk (chat_completion/serving.py:752).
            Endpoint::ChatCompletions if finish.is_some() => json!({
                "index": 0,
                "delta": {"content": text},
                "logprobs": null,
                "finish_reason": reason,
                "stop_reason": null,
                "token_ids": null,
            }),
            Endpoint::ChatCompletions => json!({
                "index": 0,
                "delta": {"content": text},
                "logprobs": null,
                "finish_reason": null,
                "token_ids": null,
            }),
        };
        let mut chunk = json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        });
        if fingerprint {
            chunk["system_fingerprint"] = json!(SYSTEM_FINGERPRINT);
        }
        chunk
    }

    /// The usage-only chunk sent before `[DONE]` when `stream_options.include_usage` is set, dumped with
    /// `exclude_none` (completion/serving.py:484), so `prompt_tokens_details` is absent.
    pub fn usage_chunk(&self, usage: Usage) -> Value {
        let mut body = usage.body();
        body.as_object_mut()
            .expect("usage is an object")
            .remove("prompt_tokens_details");
        json!({
            "id": self.id,
            "object": self.object(true),
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": body,
            "system_fingerprint": SYSTEM_FINGERPRINT,
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
