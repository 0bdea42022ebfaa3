//! The seed recipe's pair as twins, in both start orders, driven by a real HTTP client: the OpenAI API,
//! vLLM's shapes and headers, metrics conservation, the FFN port and the logged rank mapping.

use std::time::Duration;

use afd_sim::topology::{Role as TopologyRole, RuleSet, Topology};
use serde_json::json;

use crate::support::*;

/// Everything a client sees of a correct pair.
async fn serves_like_vllm(pair: &Pair) {
    let client = client();
    let url = format!("{}/v1/completions", pair.base_url);

    let models: serde_json::Value = client
        .get(format!("{}/v1/models", pair.base_url))
        .send()
        .await
        .expect("models answered")
        .json()
        .await
        .expect("models JSON");
    assert_eq!(
        models["data"][0]["id"],
        "/path/model_weights/DeepSeek-V2-Lite"
    );

    let response = client
        .post(&url)
        .header("X-Request-Id", "twin-test-1")
        .json(&completion("San Francisco is a", 7))
        .send()
        .await
        .expect("completion answered");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-request-id"], "twin-test-1");
    let body: serde_json::Value = response.json().await.expect("completion JSON");
    assert_eq!(body["object"], "text_completion");
    assert_eq!(body["id"], "cmpl-twin-test-1");
    assert_eq!(body["choices"].as_array().expect("choices").len(), 1);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    let text = body["choices"][0]["text"].as_str().expect("text");
    assert_eq!(text.split_whitespace().count(), 7);
    let usage = &body["usage"];
    assert_eq!(usage["prompt_tokens"], 4);
    assert_eq!(usage["completion_tokens"], 7);
    assert_eq!(usage["total_tokens"], 11);

    // Greedy output repeats.
    let (_, again) = post(&client, &url, completion("San Francisco is a", 7), &[]).await;
    assert_eq!(again["choices"][0]["text"], body["choices"][0]["text"]);

    // Chat streaming: role chunk, one delta per token, finish_reason, usage, exactly one [DONE].
    let stream = stream_text(
        &client,
        &format!("{}/v1/chat/completions", pair.base_url),
        json!({"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 5,
               "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let events: Vec<&str> = stream.split("\n\n").filter(|e| !e.is_empty()).collect();
    assert_eq!(
        events.iter().filter(|e| **e == "data: [DONE]").count(),
        1,
        "{stream}"
    );
    assert_eq!(*events.last().expect("events"), "data: [DONE]");
    assert_eq!(events.len(), 1 + 5 + 1 + 1, "{stream}");
    assert!(
        events[5].contains(r#""finish_reason":"length""#),
        "{stream}"
    );
    assert!(events[6].contains(r#""completion_tokens":5"#), "{stream}");

    // vLLM's error shapes.
    let (status, error) = post(&client, &url, json!({"model": "nope", "prompt": "x"}), &[]).await;
    assert_eq!(status, 404);
    assert_eq!(error["error"]["type"], "NotFoundError");
    assert_eq!(error["error"]["code"], 404);
    let (status, error) = post(
        &client,
        &url,
        completion("x", 1),
        &[("X-data-parallel-rank", "1")],
    )
    .await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(
        error["error"]["message"],
        "data_parallel_rank 1 is out of range [0, 1)."
    );
    let (status, _) = post(&client, &url, json!({"prompt": "x", "max_tokens": -1}), &[]).await;
    assert_eq!(status, 400);

    let health = client
        .get(format!("{}/health", pair.base_url))
        .send()
        .await
        .expect("health answered");
    assert_eq!(health.status(), 200);

    // One engine (DP 1), and every request the client saw counted once.
    let scrape = metrics(&client, &pair.base_url).await;
    assert_eq!(
        scrape.label_values("vllm:num_requests_running", "engine"),
        vec!["0"]
    );
    assert_eq!(scrape.sum("vllm:request_success_total"), Some(3.0));
    assert_eq!(scrape.sum("vllm:generation_tokens_total"), Some(19.0));
    assert_eq!(
        (
            scrape.sum("vllm:num_requests_running"),
            scrape.sum("vllm:num_requests_waiting")
        ),
        (Some(0.0), Some(0.0))
    );
}

#[tokio::test]
async fn seed_pair_serves_when_attention_starts_first() {
    // vLLM echoes X-Request-Id only with this flag (the recorded vLLM 0.26.0 transcripts).
    let pair = seed_pair(Order::AttentionFirst, &["--enable-request-id-headers"], &[]).await;
    serves_like_vllm(&pair).await;
}

#[tokio::test]
async fn seed_pair_serves_when_ffn_starts_first() {
    let pair = seed_pair(Order::FfnFirst, &["--enable-request-id-headers"], &[]).await;
    serves_like_vllm(&pair).await;
}

#[tokio::test]
async fn logged_rank_mapping_matches_the_topology() {
    let pair = seed_pair(Order::FfnFirst, &[], &[]).await;
    let topology = Topology::new(2, 2, RuleSet::Latest, 0).expect("2A2F");
    for (twin, role) in [
        (&pair.attention, TopologyRole::Attention),
        (&pair.ffn, TopologyRole::Ffn),
    ] {
        let logged: Vec<String> = twin
            .log()
            .lines()
            .filter_map(|l| l.find("AFD rank mapping: ").map(|i| l[i..].to_owned()))
            .collect();
        assert_eq!(logged.len(), 2, "{}", twin.log());
        for (line, rank) in logged.iter().zip(0..) {
            let info = topology.rank(role, rank).expect("in range");
            assert!(
                line.contains(&format!(" world_rank={} ", info.world_rank)),
                "{line}"
            );
            assert!(
                line.contains(&format!(" subgroup_index={} ", info.subgroup_index)),
                "{line}"
            );
        }
    }
}

#[tokio::test]
async fn shared_http_port_sends_every_request_to_attention() {
    // The seed recipe gives both roles --port P; afd-spec §6.4: every connection reaches Attention.
    let pair = seed_pair(Order::AttentionFirst, &[], &["--ffn-http", "reject"]).await;
    assert_eq!(pair.http_port, pair.ffn_http_port);
    assert!(
        pair.ffn
            .log()
            .contains("shares the Attention role's host:port"),
        "{}",
        pair.ffn.log()
    );
    let client = client();
    for i in 0..20 {
        // A fresh connection each time so the kernel chooses a listener each time.
        let fresh = reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()
            .expect("client");
        let (status, body) = post(
            &fresh,
            &format!("{}/v1/completions", pair.base_url),
            completion(&format!("p{i}"), 1),
            &[],
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        metrics(&client, &pair.base_url)
            .await
            .sum("vllm:request_success_total"),
        Some(20.0)
    );
}

#[tokio::test]
async fn dedicated_ffn_port_refuses_connections_by_default() {
    let pair = dedicated_ffn_pair(&[]).await;
    let err = client()
        .post(format!(
            "http://127.0.0.1:{}/v1/completions",
            pair.ffn_http_port
        ))
        .json(&completion("x", 1))
        .send()
        .await
        .expect_err("nothing listens on the FFN port");
    assert!(err.is_connect(), "{err:?}");
}

#[tokio::test]
async fn reject_mode_answers_every_request_with_a_vllm_error() {
    let pair = dedicated_ffn_pair(&["--ffn-http", "reject"]).await;
    let url = format!("http://127.0.0.1:{}", pair.ffn_http_port);
    let (status, body) = post(
        &client(),
        &format!("{url}/v1/completions"),
        completion("x", 1),
        &[],
    )
    .await;
    assert_eq!(status, 503);
    assert_eq!(body["error"]["type"], "ServiceUnavailableError");
    let models = client()
        .get(format!("{url}/v1/models"))
        .send()
        .await
        .expect("answered");
    assert_eq!(
        models.status(),
        503,
        "the FFN never reports readiness (R10)"
    );
}

#[tokio::test]
async fn concurrent_requests_spread_over_dp_engines_and_pinning_holds() {
    let afd_port = free_port(0);
    let http = free_port(0);
    let pair = start_pair(
        Order::FfnFirst,
        shape_args(Role::Attention, afd_port, http, 2, 1, 2, 2),
        shape_args(Role::Ffn, afd_port, http, 2, 1, 2, 2),
        &[],
        &[],
    )
    .await;
    let client = client();
    let url = format!("{}/v1/completions", pair.base_url);
    let burst = (0..8).map(|i| {
        let client = client.clone();
        let url = url.clone();
        async move { post(&client, &url, completion(&format!("burst {i}"), 400), &[]).await }
    });
    for (status, body) in futures::future::join_all(burst).await {
        assert_eq!(status, 200, "{body}");
    }
    let by_engine = metrics(&client, &pair.base_url)
        .await
        .sum_by("vllm:request_success_total", "engine");
    assert_eq!(by_engine.len(), 2);
    assert!(
        by_engine.iter().all(|(_, n)| *n >= 1.0),
        "a burst spreads: {by_engine:?}"
    );
    let before = by_engine;
    let (status, _) = post(
        &client,
        &url,
        completion("pinned", 2),
        &[("X-data-parallel-rank", "1")],
    )
    .await;
    assert_eq!(status, 200);
    let after = metrics(&client, &pair.base_url)
        .await
        .sum_by("vllm:request_success_total", "engine");
    assert_eq!(after[0].1, before[0].1, "engine 0 untouched");
    assert_eq!(
        after[1].1,
        before[1].1 + 1.0,
        "engine 1 served the pinned request"
    );
}

#[tokio::test]
async fn ffn_exits_cleanly_when_attention_shuts_down_and_reports_its_steps() {
    let mut pair = seed_pair(Order::FfnFirst, &[], &[]).await;
    let (status, _) = post(
        &client(),
        &format!("{}/v1/completions", pair.base_url),
        completion("x", 3),
        &[],
    )
    .await;
    assert_eq!(status, 200);
    pair.attention.terminate();
    let attention = pair
        .attention
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("attention exits");
    assert!(attention.success(), "{}", pair.attention.log());
    let ffn = pair
        .ffn
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("ffn exits");
    assert!(ffn.success(), "{}", pair.ffn.log());
    assert!(pair.ffn.log().contains(r#""steps":"#), "{}", pair.ffn.log());
    assert!(
        !pair.ffn.log().contains(r#""steps":0"#),
        "{}",
        pair.ffn.log()
    );
}

#[tokio::test]
async fn ffn_exits_with_an_error_when_attention_dies() {
    let mut pair = seed_pair(Order::AttentionFirst, &[], &[]).await;
    pair.attention.kill();
    let status = pair
        .ffn
        .wait_exit(Duration::from_secs(10))
        .await
        .expect("ffn exits");
    assert_eq!(status.code(), Some(1), "{}", pair.ffn.log());
    assert!(pair.ffn.log().contains("went away"), "{}", pair.ffn.log());
}

#[tokio::test]
async fn bench_against_the_pair_conserves_requests_and_tokens() {
    let pair = seed_pair(Order::FfnFirst, &[], &[]).await;
    let mut config = afd_conformance::bench::BenchConfig::new(&pair.base_url);
    config.num_prompts = 200;
    config.random_input_len = 16;
    config.random_output_len = 8;
    config.max_concurrency = Some(50);
    config.ignore_eos = true;
    let result = afd_conformance::bench::run(config, true, || {})
        .await
        .expect("bench runs");
    let summary = afd_conformance::bench::stats::summary(&result, &[99.0], false);
    assert_eq!(summary["completed"], 200, "{summary}");
    assert_eq!(summary["total_output_tokens"], 1600);
    assert_eq!(summary["conservation"]["conserved"], true, "{summary}");
    assert!(result.records.iter().all(|r| r.done_markers == 1));
}
