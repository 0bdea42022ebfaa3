//! The twin against golden transcripts of real servers: every recording under
//! `conformance/tests/transcripts/<name>/` (written by `afd-conformance record`, provenance in its
//! `PROVENANCE.md` and `index.json`) is replayed against a twin pair serving the same model and context
//! length, and every exchange must agree field by field (`transcript::compare`: ids, timestamps,
//! generated text and metric values aside). No GPU: the real side is the committed files.
//!
//! Differences the twin does not (yet) remove are listed, one a line, in the recording's
//! `twin-differences.txt`; the test fails on any difference not listed and on any listed one that is
//! gone, so the list only shrinks (`UPDATE_EXPECT=1` rewrites it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use afd_conformance::client::{Client, Endpoint};
use afd_conformance::transcript::{self, Plan, compare};
use serde_json::Value;

use crate::support::*;

fn recordings() -> Vec<PathBuf> {
    // The recordings sit with afd-conformance, whose `record` writes them.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/transcripts");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("index.json").is_file())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|err| panic!("reading {}: {err}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// The plan the recording was made with, and the model path `/v1/models` reported as `root`.
fn plan_of(dir: &Path) -> (Plan, String) {
    let index = read_json(&dir.join("index.json"));
    let plan = &index["plan"];
    let model = plan["model"].as_str().expect("plan.model").to_owned();
    let models = read_json(&dir.join("00-models.json"));
    let root = models["response"]["body"]["json"]["data"][0]["root"]
        .as_str()
        .unwrap_or(&model)
        .to_owned();
    (
        Plan {
            model,
            max_model_len: plan["max_model_len"].as_u64().expect("plan.max_model_len"),
            chat_template: plan["chat_template"].as_str().map(str::to_owned),
            load: u32::try_from(plan["load"].as_u64().expect("plan.load")).expect("small load"),
        },
        root,
    )
}

/// A twin pair serving `root` as `plan.model` with the plan's context length, one DP engine.
async fn twin_for(plan: &Plan, root: &str) -> Pair {
    let afd_port = free_port(0);
    let http_port = free_port(0);
    let words = |role: Role| {
        let mut words = seed_args(role, afd_port, http_port);
        words[0] = root.to_owned();
        words.extend(["--max-model-len".to_owned(), plan.max_model_len.to_string()]);
        if plan.model != root {
            words.extend(["--served-model-name".to_owned(), plan.model.clone()]);
        }
        words
    };
    start_pair(
        Order::AttentionFirst,
        words(Role::Attention),
        words(Role::Ffn),
        &[],
        &[],
    )
    .await
}

/// Every difference between the recording in `dir` and the twin's answers to the same exchanges.
pub(crate) async fn differences_against_twin(dir: &Path) -> Vec<String> {
    let (plan, root) = plan_of(dir);
    let pair = twin_for(&plan, &root).await;
    let endpoint = Endpoint::parse(&pair.base_url).expect("twin URL");
    let client = Client {
        timeout: Duration::from_secs(10),
        ..Client::default()
    };
    let replayed = transcript::record(&client, &endpoint, &plan).await;
    let mut out = Vec::new();
    for exchange in &replayed {
        let file = dir.join(format!("{}.json", exchange.exchange.name));
        if !file.is_file() {
            out.push(format!("{}: not in the recording", exchange.exchange.name));
            continue;
        }
        let real = read_json(&file);
        let twin = transcript::exchange_json(exchange);
        out.extend(
            compare::differences(&real, &twin)
                .into_iter()
                .map(|d| format!("{}: {d}", exchange.exchange.name)),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_twin_answers_every_recorded_exchange_as_the_real_server_did() {
    let dirs = recordings();
    if dirs.is_empty() {
        eprintln!("skipped: no recordings under conformance/tests/transcripts");
        return;
    }
    for dir in dirs {
        let differences = differences_against_twin(&dir).await;
        let listed_path = dir.join("twin-differences.txt");
        if std::env::var_os("UPDATE_EXPECT").is_some() {
            if differences.is_empty() {
                let _ = std::fs::remove_file(&listed_path);
            } else {
                let text = differences.join("\n") + "\n";
                std::fs::write(&listed_path, text).expect("twin-differences.txt written");
            }
            continue;
        }
        let listed_text = std::fs::read_to_string(&listed_path).unwrap_or_default();
        let listed: Vec<&str> = listed_text.lines().filter(|l| !l.is_empty()).collect();
        let new: Vec<&String> = differences
            .iter()
            .filter(|d| !listed.contains(&d.as_str()))
            .collect();
        let gone: Vec<&&str> = listed
            .iter()
            .filter(|l| !differences.iter().any(|d| d == **l))
            .collect();
        assert!(
            new.is_empty() && gone.is_empty(),
            "{}: the twin's answers changed against the recording (UPDATE_EXPECT=1 rewrites twin-differences.txt)\nnew differences:\n{}\nlisted but gone:\n{}",
            dir.display(),
            new.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            gone.iter().map(|s| **s).collect::<Vec<_>>().join("\n"),
        );
    }
}
