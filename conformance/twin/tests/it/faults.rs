//! Every fault switch changes what a client can observe, and only in the way its catalogue entry says.
//! The correct behaviour each one breaks is asserted in `pair.rs`.

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::*;

fn completions(pair: &Pair) -> String {
    format!("{}/v1/completions", pair.base_url)
}

async fn dp2_pair(attention_extra: &[&str]) -> Pair {
    let afd_port = free_port(0);
    let http = free_port(0);
    start_pair(
        Order::FfnFirst,
        shape_args(Role::Attention, afd_port, http, 2, 1, 2, 2),
        shape_args(Role::Ffn, afd_port, http, 2, 1, 2, 2),
        attention_extra,
        &[],
    )
    .await
}

#[tokio::test]
async fn misroute_sends_unpinned_requests_to_the_busiest_engine() {
    let pair = dp2_pair(&["--fault", "misroute-to-wrong-engine"]).await;
    let client = client();
    let burst = (0..6).map(|i| {
        let client = client.clone();
        let url = completions(&pair);
        async move { post(&client, &url, completion(&format!("burst {i}"), 200), &[]).await }
    });
    for (status, _) in futures::future::join_all(burst).await {
        assert_eq!(status, 200);
    }
    let by_engine = metrics(&client, &pair.base_url)
        .await
        .sum_by("vllm:request_success_total", "engine");
    assert_eq!(
        by_engine,
        vec![("0".to_owned(), 0.0), ("1".to_owned(), 6.0)]
    );
}

#[tokio::test]
async fn drop_response_closes_every_kth_connection_without_an_answer() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "drop-response=2"], &[]).await;
    let client = client();
    let mut outcomes = Vec::new();
    for i in 0..4 {
        let sent = client
            .post(completions(&pair))
            .json(&completion(&format!("q{i}"), 2))
            .send()
            .await;
        outcomes.push(
            sent.map(|r| r.status().as_u16())
                .map_err(|e| e.is_timeout()),
        );
    }
    assert_eq!(outcomes, vec![Ok(200), Err(false), Ok(200), Err(false)]);
    assert_eq!(
        metrics(&client, &pair.base_url)
            .await
            .sum("vllm:request_success_total"),
        Some(2.0)
    );
}

/// Sends one HTTP/1.1 request on a fresh connection and reads until the server closes it.
fn raw_exchange(port: u16, body: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout set");
    let request = format!(
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .expect("request written");
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn duplicate_response_writes_the_response_twice() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "duplicate-response"], &[]).await;
    let body = completion("dup", 2).to_string();
    let port = pair.http_port;
    let raw = tokio::task::spawn_blocking(move || raw_exchange(port, &body))
        .await
        .expect("no panic");
    assert_eq!(raw.matches("HTTP/1.1 200 OK").count(), 2, "{raw}");
    assert_eq!(
        raw.matches("\"object\":\"text_completion\"").count(),
        2,
        "{raw}"
    );
}

#[tokio::test]
async fn wrong_usage_breaks_the_total() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "wrong-usage"], &[]).await;
    let (status, body) = post(&client(), &completions(&pair), completion("a b c", 5), &[]).await;
    assert_eq!(status, 200);
    let usage = &body["usage"];
    assert_eq!(
        (
            usage["prompt_tokens"].as_u64(),
            usage["completion_tokens"].as_u64()
        ),
        (Some(3), Some(5))
    );
    assert_eq!(usage["total_tokens"], 9, "one too many");
}

#[tokio::test]
async fn stream_without_done_omits_the_terminator() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "stream-without-done"], &[]).await;
    let mut body = completion("s", 3);
    body["stream"] = json!(true);
    let text = stream_text(&client(), &completions(&pair), body).await;
    assert!(text.contains(r#""finish_reason":"length""#), "{text}");
    assert!(!text.contains("[DONE]"), "{text}");
}

#[tokio::test]
async fn ffn_accepts_requests_completes_on_the_ffn_port() {
    let pair = dedicated_ffn_pair(&["--fault", "ffn-accepts-requests"]).await;
    let url = format!("http://127.0.0.1:{}/v1/completions", pair.ffn_http_port);
    let (status, body) = post(&client(), &url, completion("to the ffn", 4), &[]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn ffn_hangs_requests_never_answers() {
    let pair = dedicated_ffn_pair(&["--fault", "ffn-hangs-requests"]).await;
    let url = format!("http://127.0.0.1:{}/v1/completions", pair.ffn_http_port);
    let started = Instant::now();
    let err = client()
        .post(&url)
        .timeout(Duration::from_millis(500))
        .json(&completion("x", 1))
        .send()
        .await
        .expect_err("no answer");
    assert!(err.is_timeout(), "{err:?}");
    assert!(started.elapsed() >= Duration::from_millis(450));
}

#[tokio::test]
async fn wrong_engine_labels_adds_an_engine() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "wrong-engine-labels"], &[]).await;
    let scrape = metrics(&client(), &pair.base_url).await;
    assert_eq!(
        scrape.label_values("vllm:num_requests_running", "engine"),
        vec!["0", "1"]
    );
}

#[tokio::test]
async fn metrics_not_conserved_double_counts_successes() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "metrics-not-conserved"], &[]).await;
    let client = client();
    let (status, _) = post(&client, &completions(&pair), completion("x", 3), &[]).await;
    assert_eq!(status, 200);
    let scrape = metrics(&client, &pair.base_url).await;
    assert_eq!(scrape.sum("vllm:request_success_total"), Some(2.0));
    assert_eq!(
        scrape.sum("vllm:generation_tokens_total"),
        Some(3.0),
        "tokens stay right"
    );
}

#[tokio::test]
async fn ignore_pinning_routes_pinned_requests_by_load() {
    let pair = dp2_pair(&["--fault", "ignore-pinning"]).await;
    let client = client();
    let (status, _) = post(
        &client,
        &completions(&pair),
        completion("x", 2),
        &[("X-data-parallel-rank", "1")],
    )
    .await;
    assert_eq!(status, 200);
    let by_engine = metrics(&client, &pair.base_url)
        .await
        .sum_by("vllm:request_success_total", "engine");
    assert_eq!(
        by_engine,
        vec![("0".to_owned(), 1.0), ("1".to_owned(), 0.0)]
    );
    let (status, _) = post(
        &client,
        &completions(&pair),
        completion("x", 2),
        &[("X-data-parallel-rank", "2")],
    )
    .await;
    assert_eq!(status, 400, "out of range is still rejected");
}

#[tokio::test]
async fn wrong_rank_mapping_log_prints_attention_first_world_ranks() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "wrong-rank-mapping-log"], &[]).await;
    let log = pair.attention.log();
    assert!(
        log.contains("role=attention role_rank=0 dp_rank=0 tp_rank=0 world_rank=0 "),
        "{log}"
    );
    assert!(
        log.contains("role=attention role_rank=1 dp_rank=0 tp_rank=1 world_rank=1 "),
        "{log}"
    );
}

#[tokio::test]
async fn rendezvous_mismatch_accepted_lets_a_mismatched_pair_serve() {
    let afd_port = free_port(0);
    let http = free_port(0);
    let fault = ["--fault", "rendezvous-mismatch-accepted"];
    let pair = start_pair(
        Order::FfnFirst,
        shape_args(Role::Attention, afd_port, http, 1, 2, 2, 2),
        shape_args(Role::Ffn, afd_port, http, 1, 2, 4, 2),
        &fault,
        &fault,
    )
    .await;
    let (status, _) = post(&client(), &completions(&pair), completion("x", 2), &[]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn hang_after_n_requests_stops_the_engine_but_not_health() {
    let pair = seed_pair(
        Order::FfnFirst,
        &["--fault", "hang-after-n-requests=2"],
        &[],
    )
    .await;
    let client = client();
    for i in 0..2 {
        let (status, _) = post(
            &client,
            &completions(&pair),
            completion(&format!("q{i}"), 2),
            &[],
        )
        .await;
        assert_eq!(status, 200);
    }
    let err = client
        .post(completions(&pair))
        .timeout(Duration::from_millis(500))
        .json(&completion("third", 2))
        .send()
        .await
        .expect_err("the third request hangs");
    assert!(err.is_timeout(), "{err:?}");
    let health = client
        .get(format!("{}/health", pair.base_url))
        .send()
        .await
        .expect("health answers");
    assert_eq!(health.status(), 200);
    let scrape = metrics(&client, &pair.base_url).await;
    assert_eq!(scrape.sum("vllm:request_success_total"), Some(2.0));
}

#[tokio::test]
async fn health_lies_reports_503_while_serving() {
    let pair = seed_pair(Order::FfnFirst, &["--fault", "health-lies"], &[]).await;
    let client = client();
    let health = client
        .get(format!("{}/health", pair.base_url))
        .send()
        .await
        .expect("health answers");
    assert_eq!(health.status(), 503);
    let (status, _) = post(&client, &completions(&pair), completion("x", 2), &[]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn slow_ffn_step_stretches_every_token_gap() {
    let pair = seed_pair(Order::FfnFirst, &[], &["--fault", "slow-ffn-step=100"]).await;
    let started = Instant::now();
    let (status, _) = post(&client(), &completions(&pair), completion("slow", 3), &[]).await;
    assert_eq!(status, 200);
    // Prefill plus decodes: at least three steps of 100 ms at time scale 0.
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
}
