//! The OpenAI API contract of the Attention server (afd-spec §7.4 R1–R3, R9): readiness, health, error
//! answers to unknown models and malformed requests, `ignore_eos` lengths, and a mix of completions,
//! chat completions and streams whose responses the ledger judges later.
//!
//! Error bodies are accepted in vLLM's nested shape (>= 0.10.1) and the older flat one
//! (probe-conformance-anchors §4.5).

use std::time::Duration;

use serde_json::{Value, json};

use crate::checks::{Api, Completion, Outcomes, RequestSpec, Session};
use crate::client::{Request, Response};
use crate::report::Outcome;

/// How many requests of each kind the mix sends.
const MIX: &[(Api, bool, bool)] = &[
    (Api::Completions, false, false),
    (Api::Completions, false, false),
    (Api::Completions, false, false),
    (Api::Chat, false, false),
    (Api::Chat, false, false),
    (Api::Completions, true, true),
    (Api::Completions, true, true),
    (Api::Chat, true, true),
    (Api::Chat, true, true),
    (Api::Completions, true, false),
    (Api::Chat, true, false),
];

/// R1: `/v1/models` names the served model. Returns the outcome and, when it answered, the first id.
pub async fn models_ready(session: &Session) -> (Outcome, Option<String>) {
    let response = match session.get("/v1/models").await {
        Ok(response) => response,
        Err(err) if err.is_timeout() => {
            return (
                Outcome::indeterminate(format!("GET /v1/models: {err}")),
                None,
            );
        }
        Err(err) => return (Outcome::fail(format!("GET /v1/models: {err}")), None),
    };
    if response.status() != 200 {
        return (
            Outcome::fail(format!("GET /v1/models answered {}", response.status())),
            None,
        );
    }
    let ids: Vec<String> = response
        .json()
        .and_then(|v| v.get("data").and_then(Value::as_array).cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    let first = ids.first().cloned();
    let outcome = match (&session.target.expect.served_model, ids.is_empty()) {
        (_, true) => Outcome::fail("GET /v1/models answered 200 without a data list of model ids")
            .with_counterexample(format!(
                "body {}",
                crate::client::wire::printable_prefix(&response.body, 200)
            )),
        (Some(name), false) if !ids.contains(name) => Outcome::fail(format!(
            "GET /v1/models lists {ids:?}, not the served model '{name}'"
        )),
        (_, false) => Outcome::pass(format!("GET /v1/models lists {ids:?}")),
    };
    (outcome, first)
}

/// The API phase: health, errors, ignore_eos, and the request mix for the ledger.
pub async fn check(session: &Session) -> Outcomes {
    let mut out = Vec::new();
    out.push(("api.health", health(session).await));
    out.push(("api.unknown-model", unknown_model(session).await));
    out.push(("api.error-shape", malformed(session).await));
    out.push(("api.ignore-eos-length", ignore_eos(session).await));
    let mut rng = session.rng("api");
    let max_tokens = session.settings.max_tokens;
    let specs: Vec<RequestSpec> = MIX
        .iter()
        .map(|&(api, stream, usage)| {
            let spec = RequestSpec::new("api", api, session.prompt(&mut rng), max_tokens);
            if stream { spec.streaming(usage) } else { spec }
        })
        .collect();
    session.generate_all(specs, 4).await;
    out
}

async fn health(session: &Session) -> Outcome {
    match session.get("/health").await {
        Ok(r) if r.status() == 200 => Outcome::pass("GET /health answered 200"),
        Ok(r) => Outcome::fail(format!(
            "GET /health answered {} while the server serves",
            r.status()
        ))
        .with_counterexample(format!(
            "GET /health → HTTP {}: {}",
            r.status(),
            crate::client::wire::printable_prefix(&r.body, 200)
        )),
        Err(err) if err.is_timeout() => Outcome::indeterminate(format!("GET /health: {err}")),
        Err(err) => Outcome::fail(format!("GET /health: {err}")),
    }
}

/// Checks an error body: nested `{"error": {message, type, param, code}}` or flat
/// `{"object": "error", message, type, param, code}`; `code`, when an integer, equals the status.
pub fn error_shape(response: &Response) -> Result<(), String> {
    let Some(body) = response.json() else {
        return Err(format!(
            "error body is not JSON: {}",
            crate::client::wire::printable_prefix(&response.body, 120)
        ));
    };
    let error = match body.get("error") {
        Some(error) if error.is_object() => error,
        Some(other) => return Err(format!("\"error\" is {other}, not an object")),
        None if body.get("object").and_then(Value::as_str) == Some("error") => &body,
        None => return Err(format!("no \"error\" object in {body}")),
    };
    if error.get("message").and_then(Value::as_str).is_none() {
        return Err(format!("error {error} has no string message"));
    }
    if error.get("type").and_then(Value::as_str).is_none() {
        return Err(format!("error {error} has no string type"));
    }
    if error.get("param").is_none() {
        return Err(format!("error {error} has no param field"));
    }
    match error.get("code") {
        None => Err(format!("error {error} has no code field")),
        Some(Value::Number(code)) if code.as_u64() != Some(u64::from(response.status())) => {
            Err(format!(
                "error code {code} differs from the HTTP status {}",
                response.status()
            ))
        }
        Some(_) => Ok(()),
    }
}

async fn unknown_model(session: &Session) -> Outcome {
    let model = format!("afd-conformance-no-such-model-{:x}", session.seed);
    let mut failures = Vec::new();
    let mut timeouts = 0;
    for (stream, api) in [
        (false, Api::Completions),
        (true, Api::Completions),
        (false, Api::Chat),
    ] {
        let mut spec = RequestSpec::new("api", api, "Hello".to_owned(), 4);
        if stream {
            spec = spec.streaming(false);
        }
        let request = Request::post_json(api.path(), &session.body(&spec, &model));
        match session.probe(&session.target.attention, &request).await {
            Ok(r) if r.status() == 404 => {
                if let Err(problem) = error_shape(&r) {
                    failures.push(format!(
                        "{} with model '{model}'{}: 404 but {problem}",
                        api.path(),
                        stream_note(stream)
                    ));
                }
            }
            Ok(r) => failures.push(format!(
                "{} with model '{model}'{}: HTTP {}, expected 404; body {}",
                api.path(),
                stream_note(stream),
                r.status(),
                crate::client::wire::printable_prefix(&r.body, 160)
            )),
            Err(err) if err.is_timeout() => timeouts += 1,
            Err(err) => failures.push(format!("{} with model '{model}': {err}", api.path())),
        }
    }
    if failures.is_empty() && timeouts > 0 {
        return Outcome::indeterminate(format!("{timeouts} of 3 requests timed out"));
    }
    Outcome::from_failures(
        "unknown model answered 404 in the error shape (completions, stream, chat)",
        &failures,
    )
}

fn stream_note(stream: bool) -> &'static str {
    if stream { " (stream)" } else { "" }
}

/// The malformed case vLLM answers with a 500 rather than a 400.
const JSON_ARRAY_CASE: &str = "a JSON array body";

async fn malformed(session: &Session) -> Outcome {
    let model = session.model.clone();
    let cases: Vec<(&str, Request)> = vec![
        (
            "a body that is not JSON",
            Request::post_raw(
                "/v1/completions",
                "application/json",
                b"{\"model\": \"x\", \"prompt\": ",
            ),
        ),
        (
            JSON_ARRAY_CASE,
            Request::post_raw("/v1/completions", "application/json", b"[1, 2, 3]"),
        ),
        (
            "max_tokens as a string",
            Request::post_json(
                "/v1/completions",
                &json!({"model": model, "prompt": "Hello", "max_tokens": "many"}),
            ),
        ),
        (
            "max_tokens 0",
            Request::post_json(
                "/v1/completions",
                &json!({"model": model, "prompt": "Hello", "max_tokens": 0}),
            ),
        ),
        (
            "chat messages that are not a list",
            Request::post_json(
                "/v1/chat/completions",
                &json!({"model": model, "messages": "Hello", "max_tokens": 4}),
            ),
        ),
    ];
    let mut failures = Vec::new();
    let mut timeouts = 0;
    let n = cases.len();
    for (what, request) in cases {
        // vLLM 0.26 answers a JSON body that is not an object with a 500: the completions request's
        // `check_cache_salt_support` validator calls `data.get` on it (vllm/entrypoints/openai/
        // completion/protocol.py:558) and the AttributeError becomes an InternalServerError
        // (vllm/entrypoints/serve/utils/server_utils.py:382). An error in the error shape is what
        // matters there, not its class.
        let accepted = if what == JSON_ARRAY_CASE {
            400..600
        } else {
            400..500
        };
        match session.probe(&session.target.attention, &request).await {
            Ok(r) if accepted.contains(&r.status()) => {
                if let Err(problem) = error_shape(&r) {
                    failures.push(format!(
                        "{} with {what}: HTTP {} but {problem}",
                        request.path,
                        r.status()
                    ));
                }
            }
            Ok(r) => failures.push(format!(
                "{} with {what}: HTTP {}, expected a 400-class error; body {}",
                request.path,
                r.status(),
                crate::client::wire::printable_prefix(&r.body, 160)
            )),
            Err(err) if err.is_timeout() => timeouts += 1,
            Err(err) => failures.push(format!("{} with {what}: {err}", request.path)),
        }
    }
    if failures.is_empty() && timeouts > 0 {
        return Outcome::indeterminate(format!("{timeouts} of {n} requests timed out"));
    }
    Outcome::from_failures(
        format!("{n} malformed requests answered 400-class in the error shape"),
        &failures,
    )
}

async fn ignore_eos(session: &Session) -> Outcome {
    let mut rng = session.rng("api.ignore-eos");
    let lengths = [1u32, 7, session.settings.max_tokens.max(2) * 2];
    let mut failures = Vec::new();
    let mut missing = 0;
    for (i, &n) in lengths.iter().enumerate() {
        let mut spec =
            RequestSpec::new("api", Api::Completions, session.prompt(&mut rng), n).ignoring_eos();
        if i == 2 {
            spec = spec.streaming(true);
        }
        let index = session.generate(spec).await;
        session.with_call(index, |call| {
            let Some(response) = call.ok() else {
                missing += 1;
                return;
            };
            let (usage, finish) = if call.spec.stream {
                let view = crate::checks::StreamView::parse(call.spec.api, response);
                (view.usage, view.finishes.last().map(|(_, r)| r.clone()))
            } else {
                let parsed = Completion::parse(call.spec.api, response);
                (parsed.usage, parsed.finish_reason)
            };
            let tokens = usage.map(|u| u.completion_tokens);
            if tokens != Some(i64::from(n)) || finish.as_deref() != Some("length") {
                failures.push(format!(
                    "{}: completion_tokens {tokens:?}, finish_reason {finish:?}; expected {n} and \"length\"",
                    call.spec.describe()
                ));
            }
        });
    }
    if failures.is_empty() && missing > 0 {
        return Outcome::indeterminate(format!(
            "{missing} of {} requests got no response",
            lengths.len()
        ));
    }
    Outcome::from_failures(
        format!("ignore_eos with max_tokens {lengths:?} gave exactly that many tokens"),
        &failures,
    )
}

/// Waits until `/v1/models` answers 200 (R1, the runners' readiness signal) or `within` passes.
pub async fn wait_ready(session: &Session, within: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + within;
    // Short attempts: on a shared host:port one connection may reach a listener that never answers.
    let client = session
        .client
        .clone()
        .with_timeout(session.settings.probe_timeout.min(Duration::from_secs(1)));
    loop {
        let last = match client
            .send(&session.target.attention, &Request::get("/v1/models"))
            .await
        {
            Ok(r) if r.status() == 200 => return Ok(()),
            Ok(r) => format!("GET /v1/models answered {}", r.status()),
            Err(err) => format!("GET /v1/models: {err}"),
        };
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "{} did not become ready within {:.0?}: {last}",
                session.target.attention.url(),
                within
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
