//! `afd-conformance record` and `run --plain` against a twin pair: one file per exchange plus an index,
//! error answers recorded (exit 0), the known load on `/metrics`; a plain target's AFD-only invariants
//! end indeterminate and nothing fails.

use std::process::{Command, Output};

use serde_json::Value;

use crate::suite::start;

fn conformance_blocking(args: Vec<String>) -> impl FnOnce() -> Output {
    move || {
        Command::new(env!("CARGO_BIN_EXE_afd-conformance"))
            .args(&args)
            .output()
            .expect("the binary runs")
    }
}

fn owned(words: &[&str]) -> Vec<String> {
    words.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_writes_every_exchange_and_an_index() {
    let (pair, logs) = start(crate::suite::SEED, &[], &[]).await;
    let out_dir = logs.path().join("transcripts");
    let template = logs.path().join("template.jinja");
    std::fs::write(
        &template,
        "{% for m in messages %}{{ m.content }}{% endfor %}",
    )
    .expect("write");
    let out = tokio::task::spawn_blocking(conformance_blocking(owned(&[
        "record",
        "--url",
        &pair.attention_url,
        "--out",
        out_dir.to_str().expect("UTF-8"),
        "--chat-template",
        template.to_str().expect("UTF-8"),
        "--load",
        "4",
        "--max-model-len",
        "4096",
        "--provenance-note",
        "afd-twin test",
        "--request-timeout",
        "10s",
    ])))
    .await
    .expect("joined");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("recorded "), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("index.json")).expect("index"))
            .expect("JSON");
    assert_eq!(index["provenance_note"], "afd-twin test");
    assert_eq!(index["plan"]["max_model_len"], 4096);
    let exchanges = index["exchanges"].as_array().expect("list");
    for entry in exchanges {
        let file = out_dir.join(entry["file"].as_str().expect("file"));
        let doc: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("exchange")).expect("JSON");
        assert!(doc["response"].is_object(), "{}: {doc}", file.display());
    }
    let status = |suffix: &str| {
        exchanges
            .iter()
            .find(|e| e["name"].as_str().expect("name").ends_with(suffix))
            .unwrap_or_else(|| panic!("{suffix} recorded"))["status"]
            .as_u64()
            .expect("status")
    };
    assert_eq!(status("-completion"), 200);
    assert_eq!(status("-error-unknown-model"), 404);
    assert_eq!(status("-error-malformed-json"), 400);
    let stream: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join(format!(
            "{}.json",
            exchanges
                .iter()
                .map(|e| e["name"].as_str().expect("name"))
                .find(|n| n.ends_with("-completion-stream-usage"))
                .expect("listed")
        )))
        .expect("stream"),
    )
    .expect("JSON");
    let events = stream["response"]["events"].as_array().expect("events");
    assert_eq!(events.last().expect("an event")["data"]["text"], "[DONE]");
    let metrics = exchanges.last().expect("metrics last");
    assert!(
        metrics["name"]
            .as_str()
            .expect("name")
            .ends_with("-metrics")
    );
    pair.stop().await;
}

#[test]
fn record_against_nothing_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = conformance_blocking(owned(&[
        "record",
        "--url",
        "http://127.0.0.1:1",
        "--out",
        dir.path().to_str().expect("UTF-8"),
        "--ready-timeout",
        "300ms",
    ]))();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/v1/models"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_target_passes_with_afd_only_invariants_indeterminate() {
    let (pair, logs) = start(crate::suite::SEED, &[], &[]).await;
    let json = logs.path().join("plain.json");
    let serve_args = format!(
        "vllm serve /path/model_weights/DeepSeek-V2-Lite --load-format dummy --port {}",
        pair.attention_url.rsplit(':').next().expect("a port")
    );
    let out = tokio::task::spawn_blocking(conformance_blocking(owned(&[
        "run",
        "--url",
        &pair.attention_url,
        "--serve-args",
        &serve_args,
        "--seed",
        "5",
        "--cases",
        "4",
        "--requests",
        "16",
        "--load-rate",
        "inf",
        "--json",
        json.to_str().expect("UTF-8"),
    ])))
    .await
    .expect("joined");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("JSON");
    let results = report["results"].as_array().expect("results");
    let outcome = |id: &str| {
        results
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("{id} reported"))
            .clone()
    };
    for id in [
        "ffn.never-completes",
        "mapping.rendezvous-listeners",
        "afd.missing-block",
    ] {
        let r = outcome(id);
        assert_eq!(r["status"], "indeterminate", "{id}: {r}");
        assert!(
            r["message"]
                .as_str()
                .expect("message")
                .contains("plain vLLM server"),
            "{id}: {r}"
        );
    }
    for id in [
        "api.completion-shape",
        "sse.usage",
        "routing.request-conservation",
    ] {
        assert_eq!(outcome(id)["status"], "pass", "{id}");
    }
    pair.stop().await;
}
