//! `afd-probe vllm`: measure a real vLLM engine. Starts `vllm serve` with the given words, waits for
//! `/health`, runs a plan's workloads (`vllm bench serve` runs and fixed-shape bursts of the probe's own
//! streaming client), keeps the engine's per-step log lines, `/metrics` and the backends it chose, and
//! writes one `afd-vllm-run` file with provenance.
//!
//! No CUDA here: vLLM owns the GPU. Every wait is bounded; a server that dies or never becomes healthy
//! is an error carrying its log tail, and the server's whole process group is stopped on every path.

pub mod http;
pub mod log;
pub mod procstat;
pub mod routed;

use std::collections::BTreeMap;
use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use afd_traces::vllm_run::{
    FixedShapeRequest, FixedShapeResult, PromptForm, VLLM_RUN_FORMAT, VLLM_RUN_SCHEMA_VERSION,
    VllmPlan, VllmProvenance, VllmRun, Workload, WorkloadKind, WorkloadRecord, serve_flag,
    serve_switch,
};
use rand::{RngExt, SeedableRng};

use crate::assemble::{rfc3339, tool_name};

/// What to measure and where to write it.
#[derive(Clone, Debug)]
pub struct VllmSpec {
    /// The `vllm` command, split into words (`vllm`, or `python3 -m vllm.entrypoints.cli.main`).
    pub vllm_command: Vec<String>,
    /// The Python that has vLLM, for provenance (versions of vLLM and torch).
    pub python: String,
    /// `vllm serve` words after `serve`, model path first.
    pub serve_args: Vec<String>,
    pub port: u16,
    pub label: String,
    pub plan: VllmPlan,
    /// Folder for the run file, the server log and each bench result.
    pub out_dir: PathBuf,
    pub ready_timeout: Duration,
    /// The probe's own command line, for provenance.
    pub command_line: String,
    /// Free-form provenance notes (`key=value` from the command line).
    pub notes: BTreeMap<String, String>,
    /// A shell command run after the workloads while the server is still up (`VLLM_URL` and
    /// `VLLM_MODEL` set, output in `out_dir/hook.log`), bounded by `hook_timeout`.
    pub hook: Option<String>,
    pub hook_timeout: Duration,
}

/// Why a vLLM run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum VllmError {
    #[error("vLLM is not usable with {python:?}: {why}")]
    NotInstalled { python: String, why: String },
    #[error("`vllm serve` exited with {status} before answering /health; last log lines:\n{tail}")]
    ServerDied { status: String, tail: String },
    #[error("`vllm serve` did not answer /health within {seconds} s; last log lines:\n{tail}")]
    NotReady { seconds: u64, tail: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Setting(String),
}

impl VllmError {
    fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
}

/// The words `vllm serve` is started with: the user's, plus loopback host, port and per-step logging
/// where the user did not give them.
pub fn server_words(serve_args: &[String], port: u16) -> Vec<String> {
    let mut words = serve_args.to_vec();
    if serve_flag(&words, "--host").is_none() {
        words.extend(["--host".into(), "127.0.0.1".into()]);
    }
    if serve_flag(&words, "--port").is_none() {
        words.extend(["--port".into(), port.to_string()]);
    }
    if !words
        .iter()
        .any(|w| w == "--enable-logging-iteration-details")
    {
        words.push("--enable-logging-iteration-details".into());
    }
    words
}

/// Runs the plan against one server and writes `out_dir/run.json`; `progress` gets one line per stage.
pub fn run(spec: &VllmSpec, mut progress: impl FnMut(&str)) -> Result<VllmRun, VllmError> {
    if spec.serve_args.is_empty() || spec.serve_args[0].starts_with('-') {
        return Err(VllmError::Setting(
            "the `vllm serve` words must start with the model path".into(),
        ));
    }
    // Before anything is written: a plan that counts routed experts needs a server that returns them.
    let returns_routing = serve_switch(&spec.serve_args, "--enable-return-routed-experts");
    if let Some(w) = spec
        .plan
        .warmup
        .iter()
        .chain(&spec.plan.workloads)
        .find(|w| w.routed_experts && !returns_routing)
    {
        return Err(VllmError::Setting(format!(
            "workload {:?} counts routed experts: the serve words need \
             --enable-return-routed-experts",
            w.name
        )));
    }
    std::fs::create_dir_all(&spec.out_dir).map_err(VllmError::io(format!(
        "creating {}",
        spec.out_dir.display()
    )))?;
    let started = SystemTime::now();
    progress("checking vLLM and the machine");
    let provenance = provenance(spec, started)?;
    let words = server_words(&spec.serve_args, spec.port);
    let port: u16 = serve_flag(&words, "--port")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| VllmError::Setting("--port in the serve words is not a port".into()))?;
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let log_path = spec.out_dir.join("server.log");
    progress(&format!(
        "starting vllm serve {} (log {})",
        words.join(" "),
        log_path.display()
    ));
    let t0 = Instant::now();
    let mut server = Server::start(&spec.vllm_command, &words, &log_path)?;
    let path = spec.out_dir.join("run.json");
    let snapshot = |startup_s: f64, records: &[WorkloadRecord]| -> Result<VllmRun, VllmError> {
        let run = VllmRun {
            format: VLLM_RUN_FORMAT.into(),
            schema_version: VLLM_RUN_SCHEMA_VERSION,
            label: spec.label.clone(),
            provenance: provenance.clone(),
            serve_args: words.clone(),
            server_env: std::env::vars()
                .filter(|(k, _)| {
                    ["VLLM_", "CUDA_", "NCCL_", "TORCH_"]
                        .iter()
                        .any(|p| k.starts_with(p))
                })
                .chain(server_env().into_iter().map(|(k, v)| (k.to_owned(), v)))
                .collect(),
            backends: log::backends(&read_lossy(&log_path)),
            startup_s,
            records: records.to_vec(),
        };
        // Written after every workload, so a run stopped from outside keeps what it measured.
        crate::assemble::write_atomic(&path, &run.to_json())
            .map_err(VllmError::io(format!("writing {}", path.display())))?;
        Ok(run)
    };
    let outcome = (|| {
        server.wait_ready(addr, spec.ready_timeout)?;
        let startup_s = t0.elapsed().as_secs_f64();
        progress(&format!("server healthy after {startup_s:.1} s"));
        let model = served_model(addr).unwrap_or_else(|| spec.serve_args[0].clone());
        let context = Context {
            vllm_command: &spec.vllm_command,
            addr,
            model: &model,
            tokenizer: &spec.serve_args[0],
            out_dir: &spec.out_dir,
            max_num_seqs: serve_flag(&words, "--max-num-seqs").and_then(|v| v.parse().ok()),
            engine_pid: log::engine_core_pid(&read_lossy(&log_path)),
        };
        for w in &spec.plan.warmup {
            progress(&format!("warm-up {}", w.name));
            let record = run_workload(&context, w, &mut server, &log_path);
            if let Some(why) = &record.failure {
                progress(&format!("warm-up {} failed: {why}", w.name));
            }
        }
        let mut records = Vec::new();
        let total = spec.plan.workloads.len();
        for (i, w) in spec.plan.workloads.iter().enumerate() {
            if let (Some(need), Some(have)) = (w.min_max_num_seqs, context.max_num_seqs)
                && have < need
            {
                progress(&format!(
                    "[{}/{total}] {}: skipped (max-num-seqs {have} < {need})",
                    i + 1,
                    w.name
                ));
                continue;
            }
            let record = run_workload(&context, w, &mut server, &log_path);
            progress(&format!(
                "[{}/{total}] {}: {:.1} s, {} steps logged{}",
                i + 1,
                w.name,
                record.wall_s,
                record.steps.len(),
                record
                    .failure
                    .as_deref()
                    .map(|f| format!(", FAILED: {}", first_line(f)))
                    .unwrap_or_default()
            ));
            let died = server.exited().is_some();
            records.push(record);
            snapshot(startup_s, &records)?;
            if died {
                progress("the server died; the remaining workloads are not run");
                break;
            }
        }
        if let Some(hook) = &spec.hook {
            progress(&format!("running the hook: {hook}"));
            let status = run_hook(hook, addr, &model, &spec.out_dir, spec.hook_timeout);
            progress(&format!("hook ended: {status}"));
        }
        Ok((startup_s, records))
    })();
    server.stop();
    let (startup_s, records) = outcome?;
    snapshot(startup_s, &records)
}

/// What every workload needs to reach the server.
struct Context<'a> {
    vllm_command: &'a [String],
    addr: SocketAddr,
    model: &'a str,
    tokenizer: &'a str,
    out_dir: &'a Path,
    max_num_seqs: Option<u32>,
    /// vLLM's engine core, read from /proc around every workload (`WorkloadRecord::host`).
    engine_pid: Option<u32>,
}

fn run_workload(
    context: &Context<'_>,
    w: &Workload,
    server: &mut Server,
    log_path: &Path,
) -> WorkloadRecord {
    let offset = std::fs::metadata(log_path).map_or(0, |m| m.len());
    let reading = context.engine_pid.map(procstat::Reading::take);
    let t0 = Instant::now();
    let (bench_result, fixed, failure) = match w.kind {
        WorkloadKind::BenchServe => match bench_serve(context, w) {
            Ok(value) => (Some(value), None, None),
            Err(why) => (None, None, Some(why)),
        },
        WorkloadKind::FixedShape => {
            let (result, uncounted) = fixed_shape(context, w);
            let errors: Vec<&str> = result
                .requests
                .iter()
                .filter_map(|r| r.error.as_deref())
                .collect();
            let failure = if errors.is_empty() {
                uncounted.map(|why| format!("the routed experts were not counted: {why}"))
            } else {
                Some(format!(
                    "{} of {} requests failed: {}",
                    errors.len(),
                    w.num_prompts,
                    errors[0]
                ))
            };
            (None, Some(result), failure)
        }
    };
    let wall_s = t0.elapsed().as_secs_f64();
    let host = reading.and_then(|r| r.share_until(&r.again()));
    // The engine logs a step after its output reached the front end: give the last lines a moment.
    std::thread::sleep(Duration::from_millis(300));
    let new_text = read_from(log_path, offset);
    let failure = match (failure, server.exited()) {
        (f, Some(status)) => Some(format!(
            "{}the server exited with {status}; last log lines:\n{}",
            f.map(|f| format!("{f}; ")).unwrap_or_default(),
            log::tail(&read_lossy(log_path), 40)
        )),
        (f, None) => f,
    };
    let metrics_after = http::get(context.addr, "/metrics", Duration::from_secs(10))
        .map(|r| r.body)
        .unwrap_or_default();
    WorkloadRecord {
        workload: w.clone(),
        failure,
        wall_s,
        bench_result,
        fixed,
        steps: afd_traces::vllm_run::engine_steps(&new_text),
        metrics_after,
        host,
    }
}

/// The words after `vllm` that run one bench-serve workload (random dataset, fixed lengths, `ignore_eos`).
pub fn bench_words(
    w: &Workload,
    base_url: &str,
    model: &str,
    tokenizer: &str,
    result_dir: &Path,
) -> Vec<String> {
    let mut words: Vec<String> = [
        "bench",
        "serve",
        "--base-url",
        base_url,
        "--model",
        model,
        "--tokenizer",
        tokenizer,
        "--dataset-name",
        "random",
        "--random-range-ratio",
        "0",
        "--ignore-eos",
        "--save-result",
        "--disable-tqdm",
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let rate = w.request_rate.map_or("inf".to_owned(), |r| r.to_string());
    for (flag, value) in [
        ("--random-input-len", w.input_len.to_string()),
        ("--random-output-len", w.output_len.to_string()),
        ("--num-prompts", w.num_prompts.to_string()),
        ("--request-rate", rate),
        ("--seed", w.seed.to_string()),
        ("--result-dir", result_dir.display().to_string()),
        ("--result-filename", format!("bench-{}.json", w.name)),
    ] {
        words.extend([flag.to_owned(), value]);
    }
    if let Some(c) = w.max_concurrency {
        words.extend(["--max-concurrency".to_owned(), c.to_string()]);
    }
    words
}

fn bench_serve(context: &Context<'_>, w: &Workload) -> Result<serde_json::Value, String> {
    let base_url = format!("http://{}", context.addr);
    let words = bench_words(
        w,
        &base_url,
        context.model,
        context.tokenizer,
        context.out_dir,
    );
    let log = context.out_dir.join(format!("bench-{}.log", w.name));
    let result = context.out_dir.join(format!("bench-{}.json", w.name));
    let _ = std::fs::remove_file(&result);
    let mut child =
        spawn_logged(context.vllm_command, &words, &log, &[]).map_err(|e| e.to_string())?;
    let status = wait_bounded(&mut child, Duration::from_secs_f64(w.timeout_s));
    match status {
        Some(s) if s.success() => {}
        Some(s) => {
            return Err(format!(
                "vllm bench serve exited with {s}; last lines:\n{}",
                log::tail(&read_lossy(&log), 20)
            ));
        }
        None => {
            return Err(format!(
                "vllm bench serve did not finish within {} s; last lines:\n{}",
                w.timeout_s,
                log::tail(&read_lossy(&log), 20)
            ));
        }
    }
    let text = std::fs::read_to_string(&result)
        .map_err(|e| format!("reading {}: {e}", result.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", result.display()))
}

/// A burst of `num_prompts` requests sent together, each on its own thread: streamed (every token's
/// arrival kept) or, with `stream: false`, answered once at the end. Injected requests follow, each
/// streamed on its own thread from its offset; the record lists the burst's requests first, then the
/// injected ones in plan order. Where the workload counts routed experts and they could not be
/// counted, the second value says why.
fn fixed_shape(context: &Context<'_>, w: &Workload) -> (FixedShapeResult, Option<String>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(w.seed);
    let mut body = |input_len: u32, output_len: u32, stream: bool| {
        // Distinct random token ids: no two prompts share a prefix block, so prefix caching finds
        // nothing (ids below 1000 are left to special tokens).
        let ids: Vec<u32> = (0..input_len)
            .map(|_| rng.random_range(1000..60_000))
            .collect();
        let prompt = match w.prompt_form {
            PromptForm::Ids => serde_json::json!(ids),
            PromptForm::Text => serde_json::json!(text_prompt(&ids)),
        };
        let mut body = serde_json::json!({
            "model": context.model,
            "prompt": prompt,
            "max_tokens": output_len,
            "min_tokens": output_len,
            "ignore_eos": true,
            "stream": stream,
        });
        if let Some(t) = w.temperature {
            body["temperature"] = serde_json::json!(t);
        }
        if stream {
            body["stream_options"] = serde_json::json!({"include_usage": true});
        }
        body.to_string()
    };
    // (body, streamed, offset)
    let mut sends: Vec<(String, bool, Duration)> = (0..w.num_prompts)
        .map(|_| {
            (
                body(w.input_len, w.output_len, w.stream),
                w.stream,
                Duration::ZERO,
            )
        })
        .collect();
    for i in &w.inject {
        let offset = Duration::from_secs_f64(i.at_s);
        sends.push((body(i.input_len, i.output_len, true), true, offset));
    }
    let timeout = Duration::from_secs_f64(w.timeout_s);
    let epoch = Instant::now();
    let to = Target {
        addr: context.addr,
        timeout,
        epoch,
        keep_text: w.keep_text,
        keep_experts: w.routed_experts,
    };
    let answers: Vec<(FixedShapeRequest, Option<routed::Routing>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = sends
            .iter()
            .map(|(body, stream, offset)| {
                scope.spawn(move || {
                    if let Some(wait) = offset.checked_sub(epoch.elapsed()) {
                        std::thread::sleep(wait);
                    }
                    one_request(to, body, *stream)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    let record = FixedShapeRequest {
                        error: Some("client thread panicked".into()),
                        ..Default::default()
                    };
                    (record, None)
                })
            })
            .collect()
    });
    let (requests, routings): (Vec<_>, Vec<_>) = answers.into_iter().unzip();
    // The burst's own requests (not those injected into it), each one's routing where it came.
    let routings: Vec<routed::Routing> = routings
        .into_iter()
        .take(w.num_prompts as usize)
        .flatten()
        .collect();
    let (routed, uncounted) = if w.routed_experts {
        match routed::summarise(&routings, w.input_len as usize) {
            Ok(counts) => (Some(counts), None),
            Err(why) => (None, Some(why)),
        }
    } else {
        (None, None)
    };
    (FixedShapeResult { requests, routed }, uncounted)
}

/// A prompt as the dummy model's word-level tokenizer reads it: token `i` is the word `t<i>`
/// (../shared/vllm/make_model.py), so the server's tokenizer gives back exactly `ids`.
pub fn text_prompt(ids: &[u32]) -> String {
    let mut text = String::with_capacity(ids.len() * 7);
    for (k, id) in ids.iter().enumerate() {
        if k > 0 {
            text.push(' ');
        }
        text.push('t');
        text.push_str(&id.to_string());
    }
    text
}

fn usage_into(record: &mut FixedShapeRequest, value: &serde_json::Value) {
    if let Some(usage) = value.get("usage").filter(|u| u.is_object()) {
        record.completion_tokens = usage["completion_tokens"].as_u64().map(|n| n as u32);
        record.prompt_tokens = usage["prompt_tokens"].as_u64().map(|n| n as u32);
    }
}

/// Where and how a fixed shape's requests go: the server, each request's time limit, the burst's
/// start, and whether a request keeps the text it generated and the routing of its tokens.
#[derive(Clone, Copy)]
struct Target {
    addr: SocketAddr,
    timeout: Duration,
    epoch: Instant,
    keep_text: bool,
    keep_experts: bool,
}

/// One request of a fixed shape: streamed (every chunk's time) or answered whole (the time the
/// answer arrived), with the text it generated where the target keeps it, and for a whole answer
/// the experts its tokens were routed to where the target keeps them.
fn one_request(
    to: Target,
    body: &str,
    stream: bool,
) -> (FixedShapeRequest, Option<routed::Routing>) {
    let mut record = FixedShapeRequest {
        sent_s: to.epoch.elapsed().as_secs_f64(),
        ..Default::default()
    };
    let routing = if stream {
        streamed_into(&mut record, to, body);
        None
    } else {
        whole_into(&mut record, to, body)
    };
    (record, routing)
}

/// A streamed answer: each chunk that carried text, timed; the end of the stream.
fn streamed_into(record: &mut FixedShapeRequest, to: Target, body: &str) {
    let outcome = http::post_stream(
        to.addr,
        "/v1/completions",
        body,
        to.timeout,
        to.epoch,
        |data, at| {
            if data == "[DONE]" {
                return;
            }
            let Ok(value) = serde_json::from_str::<serde_json::Value>(data) else {
                return;
            };
            let text = value["choices"]
                .as_array()
                .and_then(|c| c.first())
                .and_then(|c| c["text"].as_str())
                .filter(|t| !t.is_empty());
            if let Some(text) = text {
                record.chunk_s.push(at.as_secs_f64());
                if to.keep_text {
                    record.text.get_or_insert_with(String::new).push_str(text);
                }
            }
            usage_into(record, &value);
        },
    );
    record.done_s = Some(to.epoch.elapsed().as_secs_f64());
    if let Err(e) = outcome {
        record.error = Some(e.to_string());
    }
}

/// An answer in one piece: its only time is when it arrived; its routing where the target keeps it.
fn whole_into(record: &mut FixedShapeRequest, to: Target, body: &str) -> Option<routed::Routing> {
    match http::post(to.addr, "/v1/completions", body, to.timeout) {
        Ok(response) if response.status == 200 => {
            record.done_s = Some(to.epoch.elapsed().as_secs_f64());
            match serde_json::from_str::<serde_json::Value>(&response.body) {
                Ok(value) => {
                    usage_into(record, &value);
                    if to.keep_text {
                        record.text = value["choices"][0]["text"].as_str().map(str::to_owned);
                    }
                    if to.keep_experts {
                        match routed::Routing::from_answer(&value) {
                            Ok(routing) => return Some(routing),
                            Err(e) => record.error = Some(e),
                        }
                    }
                }
                Err(e) => record.error = Some(format!("the answer is not JSON: {e}")),
            }
        }
        Ok(response) => {
            record.error = Some(format!(
                "HTTP {}: {}",
                response.status,
                response.body.chars().take(400).collect::<String>()
            ));
        }
        Err(e) => record.error = Some(e.to_string()),
    }
    None
}

/// A started `vllm serve`, leading its own process group so every process it forks is stopped with it.
struct Server {
    child: Child,
    log_path: PathBuf,
}

impl Server {
    fn start(
        vllm_command: &[String],
        words: &[String],
        log_path: &Path,
    ) -> Result<Self, VllmError> {
        let mut all = vec!["serve".to_owned()];
        all.extend_from_slice(words);
        let child = spawn_logged(vllm_command, &all, log_path, &server_env()).map_err(
            VllmError::io(format!("starting {}", vllm_command.join(" "))),
        )?;
        Ok(Self {
            child,
            log_path: log_path.to_owned(),
        })
    }

    fn wait_ready(&mut self, addr: SocketAddr, timeout: Duration) -> Result<(), VllmError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited() {
                return Err(VllmError::ServerDied {
                    status,
                    tail: log::tail(&read_lossy(&self.log_path), 40),
                });
            }
            if http::get(addr, "/health", Duration::from_secs(2)).is_ok_and(|r| r.status == 200) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(VllmError::NotReady {
                    seconds: timeout.as_secs(),
                    tail: log::tail(&read_lossy(&self.log_path), 40),
                });
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// `Some(exit status)` once the server process has ended.
    fn exited(&mut self) -> Option<String> {
        self.child.try_wait().ok().flatten().map(|s| s.to_string())
    }

    /// SIGTERM to the group, SIGKILL after 30 s.
    fn stop(&mut self) {
        signal_group(&self.child, rustix::process::Signal::TERM);
        if wait_bounded(&mut self.child, Duration::from_secs(30)).is_none() {
            signal_group(&self.child, rustix::process::Signal::KILL);
            let _ = self.child.wait();
        }
        // The engine core may outlive the front end briefly: make sure the group is gone.
        signal_group(&self.child, rustix::process::Signal::KILL);
    }
}

fn run_hook(
    hook: &str,
    addr: SocketAddr,
    model: &str,
    out_dir: &Path,
    timeout: Duration,
) -> String {
    use std::os::unix::process::CommandExt;
    let log = out_dir.join("hook.log");
    let spawned = File::create(&log).and_then(|out| {
        let err = out.try_clone()?;
        Command::new("sh")
            .args(["-c", hook])
            .env("VLLM_URL", format!("http://{addr}"))
            .env("VLLM_MODEL", model)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
    });
    match spawned {
        Ok(mut child) => match wait_bounded(&mut child, timeout) {
            Some(status) => status.to_string(),
            None => format!("stopped after {} s", timeout.as_secs()),
        },
        Err(e) => format!("could not start: {e}"),
    }
}

/// What the probe adds to the server's environment: every log line stamped with the wall-clock
/// second it was written, to the microsecond (`VLLM_LOGGING_PREFIX` is put in front of vLLM's log
/// format, vllm/logger.py, so a `%(created)` field there is a logging field), unless the caller set a
/// prefix of their own. The per-step lines then say when the front end learned of each step's end,
/// where vLLM's own stamp has whole seconds ([`afd_traces::vllm_run::EngineStep::from_log_line`] reads it into `logged_s`).
fn server_env() -> Vec<(&'static str, String)> {
    if std::env::var_os(LOG_PREFIX_VAR).is_some() {
        return Vec::new();
    }
    vec![(LOG_PREFIX_VAR, log::STAMP_PREFIX.to_owned())]
}

const LOG_PREFIX_VAR: &str = "VLLM_LOGGING_PREFIX";

fn spawn_logged(
    command: &[String],
    args: &[String],
    log: &Path,
    env: &[(&str, String)],
) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    let (program, rest) = command
        .split_first()
        .ok_or_else(|| std::io::Error::other("empty vllm command"))?;
    let out = File::create(log)?;
    let err = out.try_clone()?;
    Command::new(program)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .args(rest)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0)
        .spawn()
}

/// Waits for `child` at most `timeout`; on time-out kills its group and returns `None`.
fn wait_bounded(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            signal_group(child, rustix::process::Signal::KILL);
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn signal_group(child: &Child, signal: rustix::process::Signal) {
    let Some(pid) = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    let _ = rustix::process::kill_process_group(pid, signal);
}

fn served_model(addr: SocketAddr) -> Option<String> {
    let response = http::get(addr, "/v1/models", Duration::from_secs(10)).ok()?;
    let value: serde_json::Value = serde_json::from_str(&response.body).ok()?;
    value["data"][0]["id"].as_str().map(str::to_owned)
}

fn provenance(spec: &VllmSpec, started: SystemTime) -> Result<VllmProvenance, VllmError> {
    let script = "import sys, torch, vllm; print(vllm.__version__); print(torch.__version__); \
                  print(torch.version.cuda); print(sys.version.split()[0])";
    let versions = command_output(&spec.python, &["-c", script], Duration::from_secs(180))
        .map_err(|why| VllmError::NotInstalled {
            python: spec.python.clone(),
            why,
        })?;
    let mut lines = versions.lines().map(str::to_owned);
    let mut next = || lines.next().unwrap_or_default();
    let (vllm_version, torch_version, torch_cuda, python) = (next(), next(), next(), next());
    let smi = command_output(
        "nvidia-smi",
        &[
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ],
        Duration::from_secs(30),
    )
    .unwrap_or_default();
    let gpus: Vec<String> = smi
        .lines()
        .map(|l| l.trim().to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    let driver_version = gpus
        .first()
        .and_then(|g| g.split(',').nth(1))
        .map(|d| d.trim().to_owned())
        .unwrap_or_default();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .and_then(|r| r.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    Ok(VllmProvenance {
        tool: tool_name(),
        command: spec.command_line.clone(),
        date_utc: rfc3339(started),
        hostname: std::fs::read_to_string("/etc/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned(),
        vllm_version,
        torch_version,
        torch_cuda,
        gpus,
        driver_version,
        cpu_model,
        cpu_cores: std::thread::available_parallelism().map_or(0, |n| n.get() as u32),
        python,
        notes: spec.notes.clone(),
    })
}

/// A command's stdout, or why it failed (its stderr tail), within `timeout`.
fn command_output(program: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    in_scratch_dir(|dir| command_output_in(dir, program, args, timeout))
}

/// Runs `f` with a scratch folder of its own (one per call: commands may run on several threads),
/// removed afterwards however `f` ends.
fn in_scratch_dir<T>(f: impl FnOnce(&Path) -> Result<T, String>) -> Result<T, String> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("afd-probe-cmd-{}-{call}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = f(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn command_output_in(
    dir: &Path,
    program: &str,
    args: &[&str],
    timeout: Duration,
) -> Result<String, String> {
    let (out_path, err_path) = (dir.join("out"), dir.join("err"));
    let out = File::create(&out_path).map_err(|e| e.to_string())?;
    let err = File::create(&err_path).map_err(|e| e.to_string())?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .map_err(|e| format!("cannot run {program}: {e}"))?;
    let status = {
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                _ if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    };
    let stdout = read_lossy(&out_path);
    let stderr = read_lossy(&err_path);
    match status {
        Some(s) if s.success() => Ok(stdout),
        Some(s) => Err(format!(
            "{program} exited with {s}: {}",
            log::tail(&stderr, 5)
        )),
        None => Err(format!(
            "{program} did not finish within {} s",
            timeout.as_secs()
        )),
    }
}

fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn read_from(path: &Path, offset: u64) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let mut text = Vec::new();
    if let Ok(mut f) = File::open(path)
        && f.seek(SeekFrom::Start(offset)).is_ok()
    {
        let _ = f.read_to_end(&mut text);
    }
    String::from_utf8_lossy(&text).into_owned()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

#[cfg(test)]
mod tests;
