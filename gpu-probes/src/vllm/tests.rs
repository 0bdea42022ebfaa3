//! Tests of the engine probe without vLLM: words, refusals and servers that die or never get healthy.

use super::*;

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn plan() -> VllmPlan {
    VllmPlan::from_json(
        r#"{"format":"afd-vllm-plan","schema_version":1,"workloads":[
            {"name":"b1","kind":"fixed-shape","input_len":16,"output_len":4,"num_prompts":1,"timeout_s":5}]}"#,
    )
    .unwrap()
}

fn spec(vllm: &[&str], python: &str, out: &Path) -> VllmSpec {
    VllmSpec {
        vllm_command: words(vllm),
        python: python.into(),
        serve_args: words(&["/m", "--enforce-eager"]),
        port: 1,
        label: "t".into(),
        plan: plan(),
        out_dir: out.to_owned(),
        ready_timeout: Duration::from_secs(5),
        command_line: "test".into(),
        notes: BTreeMap::new(),
        hook: None,
        hook_timeout: Duration::from_secs(5),
    }
}

#[test]
fn server_words_add_loopback_port_and_step_logging_only_when_missing() {
    let added = server_words(&words(&["/m", "--enforce-eager"]), 8123);
    assert_eq!(
        added,
        words(&[
            "/m",
            "--enforce-eager",
            "--host",
            "127.0.0.1",
            "--port",
            "8123",
            "--enable-logging-iteration-details"
        ])
    );
    let given = words(&[
        "/m",
        "--host=0.0.0.0",
        "--port",
        "9",
        "--enable-logging-iteration-details",
    ]);
    assert_eq!(server_words(&given, 8123), given);
}

#[test]
fn bench_words_fix_lengths_and_leave_out_an_unset_concurrency() {
    let mut w = plan().workloads[0].clone();
    w.kind = WorkloadKind::BenchServe;
    w.request_rate = Some(2.5);
    let b = bench_words(&w, "http://127.0.0.1:1", "m", "/m", Path::new("/tmp/x"));
    let joined = b.join(" ");
    assert!(
        joined.starts_with("bench serve --base-url http://127.0.0.1:1 --model m --tokenizer /m"),
        "{joined}"
    );
    for part in [
        "--random-range-ratio 0",
        "--ignore-eos",
        "--request-rate 2.5",
        "--random-input-len 16",
        "--result-filename bench-b1.json",
    ] {
        assert!(joined.contains(part), "{part} missing from {joined}");
    }
    assert!(!joined.contains("--max-concurrency"));
    w.request_rate = None;
    w.max_concurrency = Some(8);
    let joined = bench_words(&w, "u", "m", "/m", Path::new("d")).join(" ");
    assert!(
        joined.contains("--request-rate inf") && joined.contains("--max-concurrency 8"),
        "{joined}"
    );
}

#[test]
fn a_missing_vllm_is_an_error_naming_the_python() {
    let dir = tempfile::tempdir().unwrap();
    let err = run(&spec(&["vllm"], "/nonexistent/python3", dir.path()), |_| {}).unwrap_err();
    assert!(matches!(err, VllmError::NotInstalled { .. }), "{err}");
    assert!(err.to_string().contains("/nonexistent/python3"), "{err}");
    assert!(!dir.path().join("run.json").exists());
}

#[test]
fn a_server_that_dies_at_start_is_an_error_with_its_log_tail() {
    let dir = tempfile::tempdir().unwrap();
    // `echo` stands in for Python (provenance reads whatever it prints); the "server" exits at once.
    let vllm = ["sh", "-c", "echo 'CUDA out of memory'; exit 3", "sh"];
    let err = run(&spec(&vllm, "echo", dir.path()), |_| {}).unwrap_err();
    assert!(matches!(err, VllmError::ServerDied { .. }), "{err}");
    assert!(err.to_string().contains("CUDA out of memory"), "{err}");
    assert!(!dir.path().join("run.json").exists());
}

#[test]
fn a_server_that_never_gets_healthy_is_stopped_after_the_ready_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(
        &["sh", "-c", "echo loading; sleep 30", "sh"],
        "echo",
        dir.path(),
    );
    s.ready_timeout = Duration::from_millis(800);
    let t0 = Instant::now();
    let err = run(&s, |_| {}).unwrap_err();
    assert!(matches!(err, VllmError::NotReady { .. }), "{err}");
    assert!(err.to_string().contains("loading"), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the group was not stopped promptly"
    );
}

#[test]
fn serve_words_must_start_with_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = spec(&["vllm"], "echo", dir.path());
    s.serve_args = words(&["--enforce-eager"]);
    assert!(matches!(run(&s, |_| {}), Err(VllmError::Setting(_))));
}

#[test]
fn a_text_prompt_is_the_words_the_dummy_tokenizer_reads_back() {
    assert_eq!(text_prompt(&[1000, 7, 59_999]), "t1000 t7 t59999");
    assert_eq!(text_prompt(&[]), "");
}

#[test]
fn a_command_that_cannot_start_leaves_no_scratch_folder() {
    let mut used = None;
    let err = in_scratch_dir(|dir| {
        used = Some(dir.to_owned());
        assert!(dir.is_dir());
        command_output_in(
            dir,
            "/nonexistent/afd-probe-test-program",
            &[],
            Duration::from_secs(5),
        )
    })
    .unwrap_err();
    assert!(err.contains("cannot run"), "{err}");
    assert!(!used.unwrap().exists());
    let out = command_output("sh", &["-c", "echo ok"], Duration::from_secs(5)).unwrap();
    assert_eq!(out.trim(), "ok");
}

#[test]
fn the_engine_cores_pid_is_read_from_its_log_prefix() {
    let log = "(APIServer pid=831) INFO 12-04 21:25:13 [api_server.py:1] start\n\
               (EngineCore pid=958) 1796414638.093284 INFO 12-04 [core.py:95] Initializing\n\
               (EngineCore pid=959) INFO later";
    assert_eq!(log::engine_core_pid(log), Some(958));
    assert_eq!(
        log::engine_core_pid("(EngineCore_DP0 pid=4242) INFO x"),
        Some(4242)
    );
    assert_eq!(log::engine_core_pid("(APIServer pid=831) INFO only"), None);
    assert_eq!(log::engine_core_pid("(EngineCore pid=x) INFO"), None);
}

#[test]
fn proc_readings_parse_schedstat_and_the_cpu_line() {
    assert_eq!(
        procstat::schedstat("246687320 11903033 31\n"),
        Some((246_687_320, 11_903_033))
    );
    assert_eq!(procstat::schedstat("12\n"), None);
    assert_eq!(procstat::schedstat("a b c"), None);
    // user nice system idle iowait irq softirq steal guest guest_nice
    let stat = "cpu  100 2 30 4000 5 6 7 80 0 0\ncpu0 50 1 15 2000 2 3 3 40 0 0\nintr 1\n";
    assert_eq!(procstat::cpu_line(stat), Some((80, 100 + 2 + 30 + 6 + 7)));
    assert_eq!(procstat::cpu_line("cpu0 1 2 3 4 5 6 7 8\n"), None);
    assert_eq!(procstat::cpu_line("cpu 1 2 3\n"), None);
}

#[test]
fn a_busy_process_shows_its_time_on_a_cpu_between_two_readings() {
    if !std::path::Path::new("/proc/self/task").is_dir() {
        return; // no /proc here: the probe records no `host` either
    }
    // A shell spinning on its main thread stands in for the engine core.
    let mut child = std::process::Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("sh");
    let before = procstat::Reading::take(child.id());
    std::thread::sleep(Duration::from_millis(200));
    let share = before.share_until(&before.again());
    child.kill().ok();
    child.wait().ok();
    let share = share.expect("readings of a running process");
    assert_eq!(share.engine_core_pid, child.id());
    assert!(share.wall_s >= 0.2, "{share:?}");
    assert!(
        share.engine_core_on_cpu_s > 0.0 && share.engine_core_on_cpu_s <= share.wall_s + 0.01,
        "{share:?}"
    );
    assert!(share.engine_core_waited_s >= 0.0, "{share:?}");
    assert!(share.busy_s > 0.0 && share.steal_s >= 0.0, "{share:?}");
    // A pid that is not running has no thread to read.
    let gone = procstat::Reading::take(u32::MAX);
    assert!(gone.share_until(&gone.again()).is_none());
}

/// A server on 127.0.0.1 that reads one request and answers `response`, then closes.
fn answer_once(response: &'static str) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        if let Ok((mut conn, _)) = listener.accept() {
            conn.set_read_timeout(Some(Duration::from_secs(5))).ok();
            // The whole request (its body is `{}`), so closing leaves nothing unread.
            let (mut seen, mut buf) = (Vec::new(), [0u8; 4096]);
            while !seen.ends_with(b"\r\n\r\n{}") {
                match conn.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let _ = conn.write_all(response.as_bytes());
        }
    });
    addr
}

#[test]
fn a_request_keeps_the_text_it_generated_whole_or_streamed() {
    let timeout = Duration::from_secs(5);
    const WHOLE: &str = "HTTP/1.1 200 OK\r\nContent-Length: 74\r\n\r\n{\"choices\":[{\"text\":\" t91516 t8 t91516\"}],\"usage\":{\"completion_tokens\":3}}";
    let whole = answer_once(WHOLE);
    let to = |addr, keep_text| Target {
        addr,
        timeout,
        epoch: Instant::now(),
        keep_text,
        keep_experts: false,
    };
    let (record, _) = one_request(to(whole, true), "{}", false);
    assert_eq!(record.error, None);
    assert_eq!(record.text.as_deref(), Some(" t91516 t8 t91516"));
    assert_eq!(record.completion_tokens, Some(3));
    // Unless the workload keeps its text, none is kept.
    let again = answer_once(WHOLE);
    let (record, _) = one_request(to(again, false), "{}", false);
    assert_eq!((record.error, record.text), (None, None));
    let streamed = answer_once(
        "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\ndata: {\"choices\":[{\"text\":\" t5\"}]}\n\ndata: {\"choices\":[{\"text\":\"\"}]}\n\ndata: {\"choices\":[{\"text\":\" t9\"}]}\n\ndata: [DONE]\n\n",
    );
    let (record, _) = one_request(to(streamed, true), "{}", true);
    assert_eq!(record.error, None);
    assert_eq!(record.text.as_deref(), Some(" t5 t9"));
    assert_eq!(record.chunk_s.len(), 2);
}

/// A `.npy` array as numpy writes it (format 1.0): `descr`, C order, `shape`, then the data.
fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

#[test]
fn a_routing_is_read_from_npy_and_malformed_ones_are_named() {
    // Two tokens, two layers, top-2, as uint8 and as little-endian uint16.
    let ids = [1u8, 2, 3, 4, 1, 2, 5, 6];
    let r = routed::Routing::from_npy(&npy("|u1", "(2, 2, 2)", &ids)).unwrap();
    assert_eq!((r.rows, r.layers, r.top_k), (2, 2, 2));
    assert_eq!(r.experts, vec![1, 2, 3, 4, 1, 2, 5, 6]);
    let wide: Vec<u8> = ids
        .iter()
        .flat_map(|&i| u16::from(i).to_le_bytes())
        .collect();
    assert_eq!(
        routed::Routing::from_npy(&npy("<u2", "(2, 2, 2)", &wide)).unwrap(),
        r
    );
    for (bytes, says) in [
        (b"NUMPY".to_vec(), "magic"),
        (npy("|u1", "(2, 2, 2)", &ids[..7]), "7 data bytes"),
        (npy("|u1", "(8,)", &ids), "want (tokens, layers, top-k)"),
        (npy("<f4", "(2, 1, 1)", &ids), "dtype <f4"),
        (npy("|i1", "(1, 1, 1)", &[0xff]), "negative"),
        (npy("|u1", "(2, 2, 2)", &ids)[..12].to_vec(), "cut short"),
    ] {
        let err = routed::Routing::from_npy(&bytes).unwrap_err();
        assert!(err.contains(says), "{says}: {err}");
    }
    let mut fortran = npy("|u1", "(2, 2, 2)", &ids);
    let at = fortran.windows(5).position(|w| w == b"False").unwrap();
    fortran[at..at + 5].copy_from_slice(b"True ");
    let err = routed::Routing::from_npy(&fortran).unwrap_err();
    assert!(err.contains("Fortran"), "{err}");
}

#[test]
fn a_bursts_routing_counts_distinct_experts_by_decode_step_and_prompt() {
    // Prompt of 2 tokens, then 2 forwarded generated tokens; one layer, top-2.
    let a = routed::Routing {
        rows: 4,
        layers: 1,
        top_k: 2,
        experts: vec![0, 1, 2, 3, 4, 5, 6, 7],
    };
    let b = routed::Routing {
        rows: 4,
        layers: 1,
        top_k: 2,
        experts: vec![0, 1, 0, 1, 4, 5, 9, 10],
    };
    let s = routed::summarise(&[a.clone(), b], 2).expect("two routings of one shape");
    assert_eq!((s.requests, s.layers, s.top_k), (2, 1, 2));
    // Step 0: {4, 5} from both; step 1: {6, 7, 9, 10}.
    assert_eq!(s.decode_distinct, vec![2.0, 4.0]);
    // Prompts: a reached {0, 1, 2, 3}, b {0, 1}: median 3; together 4.
    assert_eq!((s.prompt_distinct, s.prompt_union_distinct), (3.0, 4.0));
    // Routings of different shapes, or none, count nothing.
    let other = routed::Routing {
        rows: 4,
        layers: 2,
        top_k: 1,
        experts: vec![0; 8],
    };
    let mixed = routed::summarise(&[a.clone(), other], 2).unwrap_err();
    assert!(mixed.contains("1 × 2 and of 2 × 1"), "{mixed}");
    // A dense layer's placeholder (one repeated id) is not a routed layer: only layer 1 counts.
    let dense_first = routed::Routing {
        rows: 3,
        layers: 2,
        top_k: 2,
        experts: vec![0, 0, 3, 4, 0, 0, 3, 5, 0, 0, 6, 7],
    };
    let s = routed::summarise(std::slice::from_ref(&dense_first), 2).expect("one routed layer");
    assert_eq!(s.layers, 1);
    assert_eq!(s.decode_distinct, vec![2.0]);
    assert_eq!((s.prompt_distinct, s.prompt_union_distinct), (3.0, 3.0));
    let unrouted = routed::Routing {
        experts: vec![0; 12],
        ..dense_first
    };
    let err = routed::summarise(&[unrouted], 2).unwrap_err();
    assert!(err.contains("nothing was routed"), "{err}");
    let none = routed::summarise(&[], 2).unwrap_err();
    assert!(none.contains("no answer carried"), "{none}");
    let short = routed::summarise(&[a], 5).unwrap_err();
    assert!(short.contains("4 tokens for a 5-token prompt"), "{short}");
}

#[test]
fn a_whole_answer_keeps_its_routing_and_one_without_it_is_an_error() {
    use base64::Engine as _;
    let encoded =
        base64::engine::general_purpose::STANDARD.encode(npy("|u1", "(1, 1, 2)", &[3, 7]));
    let body = format!(r#"{{"choices":[{{"text":" t1","routed_experts":"{encoded}"}}]}}"#);
    let response: &'static str = Box::leak(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_boxed_str(),
    );
    let to = |addr| Target {
        addr,
        timeout: Duration::from_secs(5),
        epoch: Instant::now(),
        keep_text: false,
        keep_experts: true,
    };
    let (record, routing) = one_request(to(answer_once(response)), "{}", false);
    assert_eq!(record.error, None);
    assert_eq!(routing.map(|r| r.experts), Some(vec![3, 7]));
    const BARE: &str =
        "HTTP/1.1 200 OK\r\nContent-Length: 28\r\n\r\n{\"choices\":[{\"text\":\" t1\"}]}";
    let (record, routing) = one_request(to(answer_once(BARE)), "{}", false);
    assert!(routing.is_none());
    let err = record.error.unwrap();
    assert!(err.contains("--enable-return-routed-experts"), "{err}");
}

#[test]
fn a_plan_that_counts_routed_experts_needs_a_server_that_returns_them() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut s = spec(&["vllm"], "echo", &out);
    s.plan = VllmPlan::from_json(
        r#"{"format":"afd-vllm-plan","schema_version":1,"workloads":[
            {"name":"r1","kind":"fixed-shape","input_len":16,"output_len":4,"num_prompts":2,
             "timeout_s":5,"stream":false,"routed_experts":true}]}"#,
    )
    .unwrap();
    let Err(VllmError::Setting(says)) = run(&s, |_| {}) else {
        panic!("a plan counting routed experts ran against a server that returns none");
    };
    assert!(
        says.contains("\"r1\"") && says.contains("--enable-return-routed-experts"),
        "{says}"
    );
    assert!(!out.exists(), "nothing is written");
}
