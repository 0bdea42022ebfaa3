//! Starting twin processes with the seed recipe's flags, reading their logs, and small HTTP helpers.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Generous bound on start-up; a pair normally forms in well under a second.
pub(crate) const STARTUP: Duration = Duration::from_secs(20);

/// Every port this test process handed out, with its span: the kernel may give a just-released
/// ephemeral port again, so two calls in a row could return the same port (a pair whose HTTP port is
/// its rendezvous port, which `cross.http-port-vs-rendezvous` refuses).
static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// A currently free loopback port with `span` free ports after it, none handed out before by this
/// process.
pub(crate) fn free_port(span: u16) -> u16 {
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("has an address").port();
        drop(listener);
        let Some(last) = port.checked_add(span) else {
            continue;
        };
        let mut handed = HANDED_OUT.lock().expect("port registry");
        if handed.range(port..=last).next().is_some() {
            continue;
        }
        if (1..=span).all(|k| std::net::TcpListener::bind(("127.0.0.1", port + k)).is_ok()) {
            handed.extend(port..=last);
            return port;
        }
    }
}

/// Which role an argument list is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    Attention,
    Ffn,
}

/// The seed recipe's `vllm serve` words for one role (2A2F, DP1 x TP2, graph + DBO), on the given ports.
pub(crate) fn seed_args(role: Role, afd_port: u16, http_port: u16) -> Vec<String> {
    shape_args(role, afd_port, http_port, 1, 2, 2, 2)
}

/// A recipe-shaped command line with the given parallel sizes and AFD rank counts.
pub(crate) fn shape_args(
    role: Role,
    afd_port: u16,
    http_port: u16,
    dp: u32,
    tp: u32,
    attention_ranks: u32,
    ffn_ranks: u32,
) -> Vec<String> {
    let role_name = match role {
        Role::Attention => "attention",
        Role::Ffn => "ffn",
    };
    let afd = format!(
        r#"{{ "afd": {{ "role": "{role_name}", "connector": "P2pNcclAFDConnector", "host": "127.0.0.1", "port": {afd_port}, "num_attention_ranks": {attention_ranks}, "num_ffn_ranks": {ffn_ranks} }} }}"#
    );
    let words = [
        "/path/model_weights/DeepSeek-V2-Lite".to_owned(),
        "--data-parallel-size".to_owned(),
        dp.to_string(),
        "--tensor-parallel-size".to_owned(),
        tp.to_string(),
        "--enable-expert-parallel".to_owned(),
        "--additional-config".to_owned(),
        afd,
        "--max-num-seqs".to_owned(),
        "64".to_owned(),
        "--max-num-batched-tokens".to_owned(),
        "64".to_owned(),
        "--enable-dbo".to_owned(),
        "--dbo-decode-token-threshold".to_owned(),
        "2".to_owned(),
        "--dbo-prefill-token-threshold".to_owned(),
        "12".to_owned(),
        "--max-cudagraph-capture-size".to_owned(),
        "64".to_owned(),
        "--compilation-config".to_owned(),
        r#"{ "cudagraph_mode": "FULL_DECODE_ONLY", "cudagraph_capture_sizes":[64] }"#.to_owned(),
        "--host".to_owned(),
        "127.0.0.1".to_owned(),
        "--port".to_owned(),
        http_port.to_string(),
        "--trust-remote-code".to_owned(),
    ];
    words.to_vec()
}

/// One running `afd-twin` process with its combined output captured.
pub(crate) struct Twin {
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Twin {
    /// Starts `afd-twin WORDS… --time-scale 0 --rendezvous-timeout 20` plus `extra`.
    pub(crate) fn spawn(words: &[String], extra: &[&str]) -> Twin {
        Twin::spawn_with_env(words, extra, &[])
    }

    /// As [`Twin::spawn`], with extra environment variables (e.g. `CUDA_VISIBLE_DEVICES`).
    pub(crate) fn spawn_with_env(words: &[String], extra: &[&str], env: &[(&str, &str)]) -> Twin {
        let mut command = Command::new(env!("CARGO_BIN_EXE_afd-twin"));
        // The seed recipe exports the V2 model runner, which the latest plugin requires.
        command.env("VLLM_USE_V2_MODEL_RUNNER", "1");
        command.envs(env.iter().copied());
        command
            .args(words)
            .args(["--time-scale", "0", "--rendezvous-timeout", "20"])
            .args(extra)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("the afd-twin binary starts");
        let output = Arc::new(Mutex::new(String::new()));
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let mut text = output.lock().expect("log lock");
                    text.push_str(&line);
                    text.push('\n');
                }
            });
        }
        Twin { child, output }
    }

    pub(crate) fn log(&self) -> String {
        self.output.lock().expect("log lock").clone()
    }

    /// Waits until the log contains `needle`; panics with the log after `timeout`.
    pub(crate) async fn wait_for(&self, needle: &str, timeout: Duration) {
        let start = Instant::now();
        while !self.log().contains(needle) {
            assert!(
                start.elapsed() < timeout,
                "no '{needle}' within {timeout:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for the process to exit; `None` if it is still running after `timeout`.
    pub(crate) async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait works") {
                // Give the reader threads a moment to drain the pipes.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Some(status);
            }
            if start.elapsed() > timeout {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sends SIGTERM, as the e2e runner does (afd-spec §7.4 R11).
    pub(crate) fn terminate(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
    }
}

impl Drop for Twin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start order of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Order {
    AttentionFirst,
    FfnFirst,
}

/// A running pair; `base_url` is the Attention server.
pub(crate) struct Pair {
    pub(crate) attention: Twin,
    pub(crate) ffn: Twin,
    pub(crate) base_url: String,
    pub(crate) http_port: u16,
    pub(crate) ffn_http_port: u16,
}

/// Starts the seed recipe's pair (both roles on one HTTP port, as the recipe does).
pub(crate) async fn seed_pair(order: Order, attention_extra: &[&str], ffn_extra: &[&str]) -> Pair {
    let afd_port = free_port(0);
    let http_port = free_port(0);
    start_pair(
        order,
        seed_args(Role::Attention, afd_port, http_port),
        seed_args(Role::Ffn, afd_port, http_port),
        attention_extra,
        ffn_extra,
    )
    .await
}

/// The seed recipe's pair with the FFN on its own HTTP port, so the FFN port can be probed.
pub(crate) async fn dedicated_ffn_pair(ffn_extra: &[&str]) -> Pair {
    let afd_port = free_port(0);
    let (http, ffn_http) = (free_port(0), free_port(0));
    start_pair(
        Order::AttentionFirst,
        seed_args(Role::Attention, afd_port, http),
        seed_args(Role::Ffn, afd_port, ffn_http),
        &[],
        ffn_extra,
    )
    .await
}

/// Starts a pair from two argument lists, the second role 150 ms after the first.
pub(crate) async fn start_pair(
    order: Order,
    attention_words: Vec<String>,
    ffn_words: Vec<String>,
    attention_extra: &[&str],
    ffn_extra: &[&str],
) -> Pair {
    let port_of = |words: &[String]| -> u16 {
        let i = words
            .iter()
            .position(|w| w == "--port")
            .expect("--port given");
        words[i + 1].parse().expect("numeric port")
    };
    let http_port = port_of(&attention_words);
    let ffn_http_port = port_of(&ffn_words);
    let (attention, ffn) = match order {
        Order::AttentionFirst => {
            let attention = Twin::spawn(&attention_words, attention_extra);
            tokio::time::sleep(Duration::from_millis(150)).await;
            (attention, Twin::spawn(&ffn_words, ffn_extra))
        }
        Order::FfnFirst => {
            let ffn = Twin::spawn(&ffn_words, ffn_extra);
            tokio::time::sleep(Duration::from_millis(150)).await;
            (Twin::spawn(&attention_words, attention_extra), ffn)
        }
    };
    attention
        .wait_for("Application startup complete.", STARTUP)
        .await;
    ffn.wait_for("step loop started", STARTUP).await;
    Pair {
        attention,
        ffn,
        base_url: format!("http://127.0.0.1:{http_port}"),
        http_port,
        ffn_http_port,
    }
}

/// A client with a per-request timeout and no connection reuse surprises.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client builds")
}

/// POSTs JSON and returns status and body (as JSON when it parses, else a string).
pub(crate) async fn post(
    client: &reqwest::Client,
    url: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut request = client.post(url).json(&body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("request answered");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body read");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// A greedy completion of `max_tokens` tokens.
pub(crate) fn completion(prompt: &str, max_tokens: u32) -> Value {
    serde_json::json!({
        "model": "/path/model_weights/DeepSeek-V2-Lite",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": true,
    })
}

/// `/metrics`, parsed strictly (the twin's exposition must be well-formed).
pub(crate) async fn metrics(
    client: &reqwest::Client,
    base_url: &str,
) -> afd_conformance::prometheus::Scrape {
    let text = client
        .get(format!("{base_url}/metrics"))
        .send()
        .await
        .expect("metrics answered")
        .text()
        .await
        .expect("metrics body");
    afd_conformance::prometheus::Scrape::parse(&text).expect("the twin's /metrics parses strictly")
}

/// Reads a raw SSE stream body.
pub(crate) async fn stream_text(client: &reqwest::Client, url: &str, body: Value) -> String {
    client
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("stream answered")
        .text()
        .await
        .expect("stream body")
}
