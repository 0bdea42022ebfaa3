//! Tests of the vLLM run, plan and engine-profile formats.

use super::*;

fn plan_text(workloads: &str) -> String {
    format!(r#"{{"format":"afd-vllm-plan","schema_version":1,"workloads":[{workloads}]}}"#)
}

/// Why a plan of `workloads` is refused.
fn plan_refusal(workloads: &str) -> String {
    VllmPlan::from_json(&plan_text(workloads))
        .unwrap_err()
        .to_string()
}

const ONE: &str = r#"{"name":"b8","kind":"fixed-shape","input_len":128,"output_len":64,"num_prompts":8,"timeout_s":60}"#;

#[test]
fn a_plan_with_one_fixed_shape_workload_reads() {
    let plan = VllmPlan::from_json(&plan_text(ONE)).unwrap();
    assert_eq!(plan.workloads[0].kind, WorkloadKind::FixedShape);
    assert_eq!(plan.workloads[0].request_rate, None);
}

#[test]
fn a_plan_names_the_field_that_is_wrong() {
    let bad = ONE.replace("\"input_len\":128", "\"input_len\":\"x\"");
    let err = VllmPlan::from_json(&plan_text(&bad))
        .unwrap_err()
        .to_string();
    assert!(err.contains("workloads[0].input_len"), "{err}");
}

#[test]
fn a_plan_refuses_duplicate_names_zero_lengths_and_infinite_rates() {
    let twice = format!("{ONE},{ONE}");
    assert!(
        VllmPlan::from_json(&plan_text(&twice))
            .unwrap_err()
            .to_string()
            .contains("twice")
    );
    let zero = ONE.replace("\"output_len\":64", "\"output_len\":0");
    assert!(
        VllmPlan::from_json(&plan_text(&zero))
            .unwrap_err()
            .to_string()
            .contains("at least 1")
    );
    let rate = ONE.replace("\"timeout_s\":60", "\"timeout_s\":60,\"request_rate\":-1");
    assert!(
        VllmPlan::from_json(&plan_text(&rate))
            .unwrap_err()
            .to_string()
            .contains("request_rate")
    );
    let empty = plan_text("");
    assert!(
        VllmPlan::from_json(&empty)
            .unwrap_err()
            .to_string()
            .contains("no workloads")
    );
}

#[test]
fn a_plan_of_another_format_or_version_is_refused() {
    let other = plan_text(ONE).replace("afd-vllm-plan", "afd-vllm-run");
    assert!(matches!(
        VllmPlan::from_json(&other),
        Err(VllmRunError::Format { .. })
    ));
    let newer = plan_text(ONE).replace("\"schema_version\":1", "\"schema_version\":2");
    assert!(matches!(
        VllmPlan::from_json(&newer),
        Err(VllmRunError::Schema { .. })
    ));
}

#[test]
fn serve_flags_read_both_spellings_and_the_last_wins() {
    let words: Vec<String> = [
        "/m",
        "--max-num-seqs",
        "64",
        "--enforce-eager",
        "--max-num-seqs=128",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(serve_flag(&words, "--max-num-seqs"), Some("128"));
    assert_eq!(serve_flag(&words, "--max-num-batched-tokens"), None);
}

#[test]
fn serve_switches_read_both_spellings_and_their_no_form() {
    let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let on = "--enable-return-routed-experts";
    assert!(serve_switch(&words(&["/m", on]), on));
    assert!(serve_switch(
        &words(&["/m", "--enable_return_routed_experts", "--enforce-eager"]),
        on
    ));
    assert!(!serve_switch(&words(&["/m"]), on));
    assert!(!serve_switch(
        &words(&["/m", on, "--no-enable-return-routed-experts"]),
        on
    ));
    assert!(serve_switch(
        &words(&["/m", "--no-enable-return-routed-experts", on]),
        on
    ));
    // A value that happens to spell the switch is not the switch.
    assert!(!serve_switch(
        &words(&["/m", "--served-model-name", "enable-return-routed-experts"]),
        on
    ));
}

#[test]
fn a_run_round_trips() {
    let plan = VllmPlan::from_json(&plan_text(ONE)).unwrap();
    let run = VllmRun {
        format: VLLM_RUN_FORMAT.into(),
        schema_version: VLLM_RUN_SCHEMA_VERSION,
        label: "eager-64-64".into(),
        provenance: VllmProvenance::default(),
        serve_args: vec!["/m".into()],
        server_env: BTreeMap::new(),
        backends: BTreeMap::new(),
        startup_s: 61.0,
        records: vec![WorkloadRecord {
            workload: plan.workloads[0].clone(),
            failure: None,
            wall_s: 1.5,
            bench_result: None,
            fixed: Some(FixedShapeResult {
                requests: vec![FixedShapeRequest {
                    sent_s: 0.0,
                    chunk_s: vec![0.1, 0.11],
                    ..Default::default()
                }],
                routed: Some(RoutedExperts {
                    requests: 1,
                    layers: 26,
                    top_k: 6,
                    decode_distinct: vec![6.0, 5.5],
                    prompt_distinct: 30.5,
                    prompt_union_distinct: 30.5,
                }),
            }),
            steps: vec![
                EngineStep {
                    iteration: 3,
                    gen_requests: 8,
                    gen_tokens: 8,
                    ..Default::default()
                },
                EngineStep {
                    iteration: 4,
                    logged_s: Some(1_796_193_253.123_456),
                    ..Default::default()
                },
            ],
            metrics_after: String::new(),
            host: Some(HostShare {
                engine_core_pid: 958,
                wall_s: 2.5,
                engine_core_on_cpu_s: 2.49,
                engine_core_waited_s: 0.0,
                steal_s: 0.01,
                busy_s: 2.9,
            }),
        }],
    };
    assert_eq!(VllmRun::from_json(&run.to_json()).unwrap(), run);
    // A record of the probes before it has no `host`, and a run without one writes none.
    let mut older = run.clone();
    older.records[0].host = None;
    assert!(!older.to_json().contains("\"host\""));
    assert_eq!(VllmRun::from_json(&older.to_json()).unwrap(), older);
    // A workload vLLM refused keeps what it asked beside its failure; one that ran cannot have
    // asked what vLLM refuses.
    let mut refused = run.clone();
    refused.records[0].workload.temperature = Some(1000.0);
    let err = VllmRun::from_json(&refused.to_json())
        .unwrap_err()
        .to_string();
    assert!(err.contains("temperature 1000 must be in [0, 2]"), "{err}");
    refused.records[0].failure = Some("HTTP 400: temperature must be in [0, 2]".into());
    assert_eq!(VllmRun::from_json(&refused.to_json()).unwrap(), refused);
}

#[test]
fn text_prompts_and_unstreamed_answers_are_for_fixed_shapes_and_calibration_for_bench_runs() {
    let text = ONE.replace(
        "\"timeout_s\":60",
        "\"timeout_s\":60,\"prompt_form\":\"text\",\"stream\":false",
    );
    let plan = VllmPlan::from_json(&plan_text(&text)).unwrap();
    assert_eq!(plan.workloads[0].prompt_form, PromptForm::Text);
    assert!(!plan.workloads[0].stream);
    // Defaults are left out when written, so files from before these fields read and write the same.
    let plain = VllmPlan::from_json(&plan_text(ONE)).unwrap();
    let written = serde_json::to_string(&plain.workloads[0]).unwrap();
    assert!(
        !written.contains("prompt_form")
            && !written.contains("stream")
            && !written.contains("calibration")
    );
    let bench_text = text.replace("fixed-shape", "bench-serve");
    let err = VllmPlan::from_json(&plan_text(&bench_text))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("prompt_form and stream are for fixed-shape"),
        "{err}"
    );
    let fixed_cal = ONE.replace("\"timeout_s\":60", "\"timeout_s\":60,\"calibration\":true");
    let err = VllmPlan::from_json(&plan_text(&fixed_cal))
        .unwrap_err()
        .to_string();
    assert!(err.contains("calibration marks bench-serve"), "{err}");
    let bad_form = ONE.replace(
        "\"timeout_s\":60",
        "\"timeout_s\":60,\"prompt_form\":\"words\"",
    );
    let err = VllmPlan::from_json(&plan_text(&bad_form))
        .unwrap_err()
        .to_string();
    assert!(err.contains("prompt_form"), "{err}");
}

#[test]
fn injected_requests_are_for_fixed_shapes_within_the_timeout() {
    let inject = |list: &str| {
        ONE.replace(
            "\"timeout_s\":60",
            &format!("\"timeout_s\":60,\"inject\":[{list}]"),
        )
    };
    let plan = VllmPlan::from_json(&plan_text(&inject(
        r#"{"at_s":0.5,"input_len":64,"output_len":4},{"at_s":0.8,"input_len":2048,"output_len":4}"#,
    )))
    .unwrap();
    assert_eq!(plan.workloads[0].inject.len(), 2);
    assert_eq!(plan.workloads[0].inject[1].input_len, 2048);
    let written =
        serde_json::to_string(&VllmPlan::from_json(&plan_text(ONE)).unwrap().workloads[0]).unwrap();
    assert!(
        !written.contains("inject"),
        "an empty list is left out: {written}"
    );
    for (list, says) in [
        (
            r#"{"at_s":60,"input_len":64,"output_len":4}"#,
            "inject[0].at_s 60 must be in [0, timeout_s 60)",
        ),
        (
            r#"{"at_s":-1,"input_len":64,"output_len":4}"#,
            "inject[0].at_s -1",
        ),
        (
            r#"{"at_s":1,"input_len":0,"output_len":4}"#,
            "inject[0]: input_len and output_len",
        ),
        (r#"{"at_s":1,"input_len":8}"#, "output_len"),
    ] {
        let err = plan_refusal(&inject(list));
        assert!(err.contains(says), "{list}: {err}");
    }
    let bench =
        inject(r#"{"at_s":1,"input_len":8,"output_len":4}"#).replace("fixed-shape", "bench-serve");
    let err = plan_refusal(&bench);
    assert!(err.contains("inject is for fixed-shape"), "{err}");
}

#[test]
fn an_engine_profile_refuses_a_pure_prefill_ratio_that_is_not_positive() {
    let shipped = builtin_engine_profile("h200").unwrap();
    let profile = VllmEngineProfile::from_json(shipped).unwrap();
    assert!(profile.modes.iter().any(|m| m.pure_prefill_ratio.is_some()));
    for (field, bad) in [("pure_prefill_ratio", 0.0), ("pure_piecewise_ratio", -0.5)] {
        let mut value: serde_json::Value = serde_json::from_str(shipped).unwrap();
        value["modes"][0][field] = serde_json::json!(bad);
        let err = VllmEngineProfile::from_json(&value.to_string()).unwrap_err();
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn sampling_temperature_and_kept_text_are_for_fixed_shapes() {
    let with = |extra: &str| ONE.replace("\"timeout_s\":60", &format!("\"timeout_s\":60,{extra}"));
    let plan =
        VllmPlan::from_json(&plan_text(&with(r#""temperature":0,"keep_text":true"#))).unwrap();
    assert_eq!(plan.workloads[0].temperature, Some(0.0));
    let hottest = VllmPlan::from_json(&plan_text(&with(r#""temperature":2"#))).unwrap();
    assert_eq!(
        hottest.workloads[0].temperature,
        Some(2.0),
        "vLLM's own bound is accepted"
    );
    assert!(plan.workloads[0].keep_text);
    let written =
        serde_json::to_string(&VllmPlan::from_json(&plan_text(ONE)).unwrap().workloads[0]).unwrap();
    assert!(
        !written.contains("temperature") && !written.contains("keep_text"),
        "unset, they are left out: {written}"
    );
    for (extra, says) in [
        (r#""temperature":-1"#, "temperature -1 must be in [0, 2]"),
        // cal23 asked for 1000 and vLLM answered HTTP 400 to every request.
        (
            r#""temperature":1000"#,
            "temperature 1000 must be in [0, 2]",
        ),
        (
            r#""temperature":2.01"#,
            "temperature 2.01 must be in [0, 2]",
        ),
        (r#""temperature":"hot""#, "temperature"),
    ] {
        let err = plan_refusal(&with(extra));
        assert!(err.contains(says), "{extra}: {err}");
    }
    // Routed experts come back with whole answers only, of fixed shapes.
    let counted =
        VllmPlan::from_json(&plan_text(&with(r#""stream":false,"routed_experts":true"#))).unwrap();
    assert!(counted.workloads[0].routed_experts);
    for extra in [
        r#""routed_experts":true"#,
        r#""stream":true,"routed_experts":true"#,
    ] {
        let err = plan_refusal(&with(extra));
        assert!(
            err.contains("routed_experts is for unstreamed fixed-shape"),
            "{extra}: {err}"
        );
    }
    let bench = with(r#""keep_text":true"#).replace("fixed-shape", "bench-serve");
    let err = plan_refusal(&bench);
    assert!(
        err.contains("temperature and keep_text are for fixed-shape"),
        "{err}"
    );
}

/// A `vllm serve` log's per-step line.
const LINE: &str = "(APIServer pid=7) INFO 12-01 21:00:00 [loggers.py:193] Engine 000: Iteration(41): \
    1 context requests, 64 context tokens, 0 generation requests, 0 generation tokens, iteration elapsed \
    time: 12.34 ms, GPU KV cache usage: 0.5%";

#[test]
fn an_iteration_line_reads_every_number() {
    let s = EngineStep::from_log_line(LINE).unwrap();
    assert_eq!(
        (
            s.iteration,
            s.ctx_requests,
            s.ctx_tokens,
            s.gen_requests,
            s.gen_tokens
        ),
        (41, 1, 64, 0, 0)
    );
    assert_eq!((s.elapsed_ms, s.kv_usage_pct), (12.34, 0.5));
}

#[test]
fn the_probes_stamp_gives_the_line_its_microsecond() {
    assert_eq!(EngineStep::from_log_line(LINE).unwrap().logged_s, None);
    let stamped = LINE.replace(") INFO", ") 1796193253.123456 INFO");
    let s = EngineStep::from_log_line(&stamped).unwrap();
    assert_eq!(s.logged_s, Some(1_796_193_253.123_456));
    assert_eq!((s.iteration, s.ctx_tokens, s.elapsed_ms), (41, 64, 12.34));
    // A number that is not a Unix second, or one after the level, is no stamp.
    assert_eq!(
        EngineStep::from_log_line(&LINE.replace(") INFO", ") 12.5 INFO"))
            .unwrap()
            .logged_s,
        None
    );
    assert_eq!(
        EngineStep::from_log_line(&LINE.replace("INFO ", "INFO 1796193253.1 "))
            .unwrap()
            .logged_s,
        None
    );
}

#[test]
fn dummy_and_unrelated_lines_are_not_steps() {
    assert!(EngineStep::from_log_line(&LINE.replace(" ms,", " ms (dummy),")).is_none());
    assert!(EngineStep::from_log_line("INFO [api_server.py:1] Started server process").is_none());
    assert_eq!(engine_steps(&format!("x\n{LINE}\ny\n{LINE}")).len(), 2);
}
