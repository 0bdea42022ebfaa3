//! A small fake of vLLM's OpenAI server with data-parallel engines, written on raw TCP so it can also
//! misbehave below HTTP (garbage, resets, slow drips). The suite's run is tested against it before and
//! besides the twin.
//!
//! It serves `/v1/models`, `/health`, `/metrics` (vLLM names and `engine` labels), completions and chat
//! completions (plain and SSE), `X-data-parallel-rank` pinning and least-loaded routing. Each request
//! "runs" for a short time per token so that concurrent requests overlap.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Ways the fake breaks the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Misbehaviour {
    None,
    /// Every third generation request gets bytes that are not HTTP.
    Garbage,
    /// Every third generation request's connection is reset without a response.
    Reset,
    /// Every third generation request gets its response one byte per 200 ms.
    SlowDrip,
    /// `request_success_total` counts each request twice.
    DoubleCount,
    /// Streams end without `data: [DONE]`.
    NoDone,
    /// Every response's total_tokens is one too many.
    WrongUsage,
    /// `/metrics` answers 200 with HTML instead of the exposition format.
    GarbageMetrics,
    /// `/v1/models`, `/health` and `/metrics` answer; a POST is read and never answered.
    SilentPost,
}

#[derive(Default, Clone, Debug)]
struct Engine {
    stop: u64,
    length: u64,
    abort: u64,
    prompt: u64,
    generation: u64,
    running: u64,
}

struct State {
    model: String,
    engines: Mutex<Vec<Engine>>,
    misbehaviour: Misbehaviour,
    served: Mutex<u64>,
}

/// A running fake; dropped with the test's runtime.
pub(crate) struct Fake {
    pub url: String,
}

pub(crate) async fn start(engines: usize, misbehaviour: Misbehaviour) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let state = Arc::new(State {
        model: "fake-model".to_owned(),
        engines: Mutex::new(vec![Engine::default(); engines]),
        misbehaviour,
        served: Mutex::new(0),
    });
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let state = state.clone();
            tokio::spawn(async move { serve(stream, state).await });
        }
    });
    Fake { url }
}

struct Incoming {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

async fn read_request(stream: &mut TcpStream) -> Option<Incoming> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut request = httparse::Request::new(&mut headers);
        if let Ok(httparse::Status::Complete(used)) = request.parse(&buf) {
            let headers: Vec<(String, String)> = request
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect();
            let length: usize = headers
                .iter()
                .find(|(n, _)| n == "content-length")
                .and_then(|(_, v)| v.parse().ok())
                .unwrap_or(0);
            let method = request.method.unwrap_or("").to_owned();
            let path = request.path.unwrap_or("").to_owned();
            let mut body = buf[used..].to_vec();
            while body.len() < length {
                let n = stream.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                body.extend_from_slice(&chunk[..n]);
            }
            return Some(Incoming {
                method,
                path,
                headers,
                body,
            });
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn respond(status: u16, content_type: &str, body: &str, request_id: Option<&str>) -> Vec<u8> {
    let id = request_id
        .map(|id| format!("X-Request-Id: {id}\r\n"))
        .unwrap_or_default();
    format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{id}Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn error(status: u16, message: &str) -> Vec<u8> {
    let kind = if status == 404 {
        "NotFoundError"
    } else {
        "BadRequestError"
    };
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": status}});
    respond(status, "application/json", &body.to_string(), None)
}

async fn serve(mut stream: TcpStream, state: Arc<State>) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    if state.misbehaviour == Misbehaviour::SilentPost && request.method == "POST" {
        // Hold the connection open without a byte until the client gives up.
        let mut sink = [0u8; 1024];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
        return;
    }
    let reply = match (request.method.as_str(), request.path.as_str()) {
        ("GET", "/v1/models") => respond(
            200,
            "application/json",
            &json!({"object": "list", "data": [{"id": state.model, "object": "model"}]})
                .to_string(),
            None,
        ),
        ("GET", "/health") => respond(200, "text/plain", "", None),
        ("GET", "/metrics") if state.misbehaviour == Misbehaviour::GarbageMetrics => respond(
            200,
            "text/html",
            "<html><body>metrics moved</body></html>",
            None,
        ),
        ("GET", "/metrics") => respond(200, "text/plain; version=0.0.4", &metrics(&state), None),
        ("POST", "/v1/completions") => return generate(stream, state, request, false).await,
        ("POST", "/v1/chat/completions") => return generate(stream, state, request, true).await,
        _ => respond(404, "application/json", "{\"detail\":\"Not Found\"}", None),
    };
    let _ = stream.write_all(&reply).await;
}

fn metrics(state: &State) -> String {
    let engines = state.engines.lock().expect("lock");
    let double = if state.misbehaviour == Misbehaviour::DoubleCount {
        2
    } else {
        1
    };
    let mut out = String::from("# TYPE vllm:request_success_total counter\n");
    for (i, e) in engines.iter().enumerate() {
        let l = format!("engine=\"{i}\",model_name=\"{}\"", state.model);
        for (reason, n) in [("stop", e.stop), ("length", e.length), ("abort", e.abort)] {
            out.push_str(&format!(
                "vllm:request_success_total{{{l},finished_reason=\"{reason}\"}} {}\n",
                n * double
            ));
        }
        out.push_str(&format!("vllm:prompt_tokens_total{{{l}}} {}\n", e.prompt));
        out.push_str(&format!(
            "vllm:generation_tokens_total{{{l}}} {}\n",
            e.generation
        ));
        out.push_str(&format!("vllm:num_requests_running{{{l}}} {}\n", e.running));
        out.push_str(&format!("vllm:num_requests_waiting{{{l}}} 0\n"));
    }
    out
}

const WORDS: &[&str] = &[
    " the", " river", " runs", " north", " past", " stone", " and", " light",
];

async fn generate(mut stream: TcpStream, state: Arc<State>, request: Incoming, chat: bool) {
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let request_id = header("x-request-id");
    let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
        let _ = stream.write_all(&error(400, "invalid JSON")).await;
        return;
    };
    if !body.is_object() {
        let _ = stream
            .write_all(&error(400, "body must be an object"))
            .await;
        return;
    }
    if body.get("model").and_then(Value::as_str) != Some(state.model.as_str()) {
        let _ = stream
            .write_all(&error(404, "The model does not exist."))
            .await;
        return;
    }
    let max_tokens = match body.get("max_tokens") {
        None => 16,
        Some(v) => match v.as_u64() {
            Some(n) if n >= 1 => n,
            _ => {
                let _ = stream
                    .write_all(&error(400, "max_tokens must be at least 1"))
                    .await;
                return;
            }
        },
    };
    let prompt = if chat {
        match body.get("messages").and_then(Value::as_array) {
            Some(messages) => messages
                .iter()
                .filter_map(|m| m.get("content").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            None => {
                let _ = stream
                    .write_all(&error(400, "messages must be a list"))
                    .await;
                return;
            }
        }
    } else {
        body.get("prompt")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let n_engines = state.engines.lock().expect("lock").len();
    let pinned = match header("x-data-parallel-rank").map(|v| v.parse::<i64>()) {
        None => None,
        Some(Ok(rank)) if rank >= 0 && (rank as usize) < n_engines => Some(rank as usize),
        Some(_) => {
            let _ = stream
                .write_all(&error(
                    400,
                    &format!("data_parallel_rank out of range [0, {n_engines})"),
                ))
                .await;
            return;
        }
    };
    let serial = {
        let mut served = state.served.lock().expect("lock");
        *served += 1;
        *served
    };
    let misbehaving = serial % 3 == 0;
    match state.misbehaviour {
        Misbehaviour::Garbage if misbehaving => {
            let _ = stream
                .write_all(b"\x00\x01\x02 not http at all\r\n\r\n")
                .await;
            return;
        }
        Misbehaviour::Reset if misbehaving => {
            // SO_LINGER 0: the close sends a reset instead of a FIN.
            let _ = stream.set_zero_linger();
            return;
        }
        _ => {}
    }
    let hash = prompt
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    let ignore_eos = body.get("ignore_eos").and_then(Value::as_bool) == Some(true);
    let natural = 3 + hash % 20;
    let (tokens, reason) = if !ignore_eos && natural < max_tokens {
        (natural, "stop")
    } else {
        (max_tokens, "length")
    };
    let prompt_tokens = prompt.split_whitespace().count() as u64 + 1;
    let engine = {
        let mut engines = state.engines.lock().expect("lock");
        let engine = pinned.unwrap_or_else(|| {
            (0..engines.len())
                .min_by_key(|&i| engines[i].running)
                .expect("an engine")
        });
        engines[engine].running += 1;
        engines[engine].prompt += prompt_tokens;
        engine
    };
    let words: Vec<&str> = (0..tokens)
        .map(|i| WORDS[((hash + i) % WORDS.len() as u64) as usize])
        .collect();
    let stream_mode = body.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    let skew = u64::from(state.misbehaviour == Misbehaviour::WrongUsage);
    let usage = json!({"prompt_tokens": prompt_tokens, "completion_tokens": tokens, "total_tokens": prompt_tokens + tokens + skew});
    let id = format!("cmpl-{}", request_id.clone().unwrap_or_default());
    let (object, chunk_object) = if chat {
        ("chat.completion", "chat.completion.chunk")
    } else {
        ("text_completion", "text_completion")
    };
    let finish = |aborted: bool| {
        let mut engines = state.engines.lock().expect("lock");
        let e = &mut engines[engine];
        e.running -= 1;
        match (aborted, reason) {
            (true, _) => e.abort += 1,
            (false, "stop") => e.stop += 1,
            _ => e.length += 1,
        }
    };
    if stream_mode {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n{}Connection: close\r\n\r\n",
            request_id
                .as_ref()
                .map(|id| format!("X-Request-Id: {id}\r\n"))
                .unwrap_or_default()
        );
        if stream.write_all(head.as_bytes()).await.is_err() {
            finish(true);
            return;
        }
        // (event, whether it carries a token)
        let mut events: Vec<(String, bool)> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            let last = i + 1 == words.len();
            let choice = if chat {
                json!({"index": 0, "delta": {"content": word}, "finish_reason": if last { Value::from(reason) } else { Value::Null }})
            } else {
                json!({"index": 0, "text": word, "finish_reason": if last { Value::from(reason) } else { Value::Null }})
            };
            events.push((json!({"id": id, "object": chunk_object, "model": state.model, "choices": [choice]}).to_string(), true));
        }
        if include_usage {
            events.push((json!({"id": id, "object": chunk_object, "model": state.model, "choices": [], "usage": usage}).to_string(), false));
        }
        if state.misbehaviour != Misbehaviour::NoDone {
            events.push(("[DONE]".to_owned(), false));
        }
        for (event, token) in events {
            if token {
                state.engines.lock().expect("lock")[engine].generation += 1;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
            let data = format!("data: {event}\n\n");
            if stream
                .write_all(format!("{:x}\r\n{data}\r\n", data.len()).as_bytes())
                .await
                .is_err()
            {
                finish(true);
                return;
            }
        }
        finish(false);
        let _ = stream.write_all(b"0\r\n\r\n").await;
        return;
    }
    tokio::time::sleep(Duration::from_millis(tokens)).await;
    let text: String = words.concat();
    let choice = if chat {
        json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": reason})
    } else {
        json!({"index": 0, "text": text, "finish_reason": reason})
    };
    let body = json!({"id": id, "object": object, "created": 0, "model": state.model, "choices": [choice], "usage": usage}).to_string();
    state.engines.lock().expect("lock")[engine].generation += tokens;
    finish(false);
    let reply = respond(200, "application/json", &body, request_id.as_deref());
    if state.misbehaviour == Misbehaviour::SlowDrip && misbehaving {
        for byte in reply {
            if stream.write_all(&[byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        return;
    }
    let _ = stream.write_all(&reply).await;
}
