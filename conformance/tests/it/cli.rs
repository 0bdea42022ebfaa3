//! The `afd-conformance` binary: exit codes, errors that name the bad input, the catalog listing, and
//! report files from a real run against a twin pair.

use std::io::BufRead as _;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::junit_schema;
use crate::suite::{SEED, recipe, start};
use crate::twin_bin::twin_bin;

fn conformance(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_afd-conformance"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[track_caller]
fn fails_with(args: &[&str], needle: &str) {
    let out = conformance(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected '{needle}' in:\n{stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?} printed a partial report");
}

#[test]
fn list_prints_the_catalog_and_its_counts() {
    let out = conformance(&["list"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(text.contains("routing.request-conservation") && text.contains("afd.port-range"));
    assert!(
        text.trim_end()
            .ends_with("invariants (63 static, 36 live, 4 stateful)"),
        "{text}"
    );
    let out = conformance(&["list", "--json", "--kind", "stateful"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(json["count"], 4);
    fails_with(
        &["list", "--kind", "nope"],
        "--kind nope: expected static, live or stateful",
    );
}

#[test]
fn bad_input_exits_2_naming_what_was_wrong() {
    fails_with(&["run"], "no Attention URL");
    fails_with(
        &["run", "--attention-url", "ftp://x"],
        "invalid URL 'ftp://x': expected http://HOST:PORT",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--time-budget",
            "5x",
        ],
        "'5x' is not a duration",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--only",
            "bogus",
        ],
        "--only 'bogus' names no invariant",
    );
    fails_with(
        &["run", "--recipe", "/nonexistent/recipe.sh"],
        "cannot read recipe /nonexistent/recipe.sh",
    );
    fails_with(
        &[
            "run",
            "--attention-args",
            "vllm serve m --port x",
            "--ffn-args",
            "vllm serve m",
        ],
        "--attention-args",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--load-rate",
            "0",
        ],
        "--load-rate 0",
    );
    fails_with(&["run", "--rules", "v9"], "unknown rule set 'v9'");
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--time-budget",
            "1e20s",
        ],
        "is not a duration between 0 and 10^9 s",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--attention-dp",
            "0",
        ],
        "--attention-dp 0: must be at least 1",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--max-itl-ms=-3",
        ],
        "--max-itl-ms must be a positive number",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--greedy-prefix",
            "2",
        ],
        "--greedy-prefix 2 must lie in 0..1",
    );
    let twin = twin_bin();
    let twin = twin.to_str().expect("UTF-8 path");
    fails_with(
        &["up", "/nonexistent/recipe.sh", "--twin-bin", twin],
        "cannot read recipe",
    );
    fails_with(
        &[
            "up",
            "/nonexistent/recipe.sh",
            "--twin-bin",
            twin,
            "--time-scale=-1",
        ],
        "--time-scale -1: expected a number from 0 to 1000",
    );
    let recipe = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(recipe.path(), "vllm serve $(whoami)\n").expect("write");
    let path = recipe.path().to_str().expect("UTF-8 path");
    fails_with(&["run", "--recipe", path], path);
}

#[test]
fn an_unreachable_pair_still_writes_reports_and_exits_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let json = dir.path().join("r.json");
    let junit = dir.path().join("r.xml");
    let out = conformance(&[
        "run",
        "--attention-url",
        "http://127.0.0.1:1",
        "--attention-dp",
        "1",
        "--ready-timeout",
        "300ms",
        "--json",
        json.to_str().expect("UTF-8"),
        "--junit",
        junit.to_str().expect("UTF-8"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("COULD NOT RUN"), "{text}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("JSON");
    assert_eq!(report["exit_code"], 2);
    junit_schema::validate(&std::fs::read_to_string(&junit).expect("junit")).expect("valid JUnit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_the_seed_pair_exits_0_with_valid_reports() {
    let (pair, logs) = start(crate::suite::SEED, &[], &[]).await;
    let json = logs.path().join("report.json");
    let junit = logs.path().join("report.xml");
    let out = tokio::task::spawn_blocking({
        let args: Vec<String> = [
            "run",
            "--attention-url",
            &pair.attention_url,
            "--ffn-url",
            &pair.ffn_url,
            "--attention-log",
            pair.attention_log.to_str().expect("UTF-8"),
            "--ffn-log",
            pair.ffn_log.to_str().expect("UTF-8"),
            "--attention-dp",
            "1",
            "--seed",
            "3",
            "--cases",
            "4",
            "--requests",
            "16",
            "--load-rate",
            "inf",
            "--json",
            json.to_str().expect("UTF-8"),
            "--junit",
            junit.to_str().expect("UTF-8"),
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        move || {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            conformance(&refs)
        }
    })
    .await
    .expect("joined");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("result: ok."), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("seed 3"));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("JSON");
    assert_eq!(report["seed"], 3);
    assert!(
        report["rerun"]
            .as_str()
            .expect("rerun")
            .ends_with("--seed 3")
    );
    let summary = junit_schema::validate(&std::fs::read_to_string(&junit).expect("junit"))
        .expect("valid JUnit");
    assert_eq!(summary.failures, 0);
    assert_eq!(
        summary.tests,
        report["counts"]["total"].as_u64().expect("count") as usize
    );
    pair.stop().await;
}

/// An `afd-conformance up` process, stopped with SIGTERM (then killed) when dropped.
struct Up(Child);

impl Up {
    /// SIGTERM, as Ctrl-C would, then waits up to `within` for the exit status.
    fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let pid = rustix::process::Pid::from_child(&self.0);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.0.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if self.terminate(Duration::from_secs(25)).is_none() {
            let _ = self.0.kill();
        }
    }
}

#[test]
fn up_starts_a_real_time_pair_by_default_and_stops_it_on_sigterm() {
    let logs = tempfile::tempdir().expect("temp dir");
    let child = Command::new(env!("CARGO_BIN_EXE_afd-conformance"))
        .args(["up", recipe(SEED, logs.path()).to_str().expect("UTF-8")])
        .arg("--twin-bin")
        .arg(twin_bin())
        .arg("--free-ports")
        .args(["--log-dir", logs.path().to_str().expect("UTF-8")])
        .args(["--twin-arg=--rendezvous-timeout", "--twin-arg=20"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("afd-conformance up starts");
    let mut up = Up(child);
    let (lines_tx, lines) = mpsc::channel();
    let stdout = up.0.stdout.take().expect("piped stdout");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.starts_with("Ctrl-C")) {
        match lines.recv_timeout(Duration::from_secs(30)) {
            Ok(line) => seen.push(line),
            Err(_) => panic!("up did not report a serving pair; stdout so far:\n{seen:#?}"),
        }
    }
    let log = seen
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("attention "))
        .and_then(|l| l.split_once("  log "))
        .map(|(_, path)| path.to_owned())
        .expect("up names the attention log");
    let text = std::fs::read_to_string(&log).expect("the attention log is readable");
    assert!(
        text.contains("; time scale 1\n"),
        "the attention twin runs in real time by default:\n{text}"
    );
    // The README's flow: the printed run line works as written, its --recipe the moved ports.
    let run_line = seen
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("afd-conformance run "))
        .expect("up prints the run line");
    let words: Vec<&str> = run_line.split_whitespace().collect();
    let recipe = words
        .windows(2)
        .find(|w| w[0] == "--recipe")
        .map(|w| w[1])
        .expect("the run line names a recipe");
    assert!(recipe.ends_with(".free-ports.sh"), "{run_line}");
    let mut args = vec!["run"];
    args.extend(&words);
    args.extend(["--only", "static,api.models-ready", "--seed", "1"]);
    let checked = conformance(&args);
    assert_eq!(
        checked.status.code(),
        Some(0),
        "{run_line}:\n{}",
        String::from_utf8_lossy(&checked.stdout)
    );
    let status = up
        .terminate(Duration::from_secs(25))
        .expect("up exits on SIGTERM");
    assert_eq!(status.code(), Some(0));
    let rest: Vec<String> = lines.try_iter().collect();
    assert!(
        rest.iter()
            .any(|l| l == "attention twin stopped: exit status: 0"),
        "{rest:#?}"
    );
}

/// Issue 18: an endless recipe is refused at its size limit, absurd durations and scales are exit 2
/// (never a panic, exit 101), and `--version` names the commit.
#[test]
fn endless_inputs_and_absurd_flags_exit_2_without_panicking() {
    fails_with(
        &[
            "run",
            "--recipe",
            "/dev/zero",
            "--attention-url",
            "http://127.0.0.1:1",
        ],
        "/dev/zero:1: recipe is not text (a NUL byte at column 1)",
    );
    fails_with(
        &["up", "/dev/zero"],
        "/dev/zero:1: recipe is not text (a NUL byte at column 1)",
    );
    fails_with(
        &["up", "/dev/null", "--time-scale", "1e300"],
        "--time-scale 1e300: expected a number from 0 to 1000",
    );
    fails_with(
        &[
            "run",
            "--attention-url",
            "http://127.0.0.1:1",
            "--time-budget",
            "1e30",
        ],
        "not a duration between 0 and 10^9 s",
    );
    let out = conformance(&["--version"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("(commit "), "{text}");
}
