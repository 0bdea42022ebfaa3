//! The exchange list: unique, file-safe names in a fixed order, the load and the too-long prompt sized
//! from the plan.

use super::*;

fn plan() -> Plan {
    Plan {
        model: "m".to_owned(),
        max_model_len: 32,
        chat_template: Some("{{ messages }}".to_owned()),
        load: 3,
    }
}

#[test]
fn names_are_unique_numbered_and_file_safe() {
    let list = plan().exchanges();
    let mut names: Vec<&str> = list.iter().map(|e| e.name.as_str()).collect();
    for (i, name) in names.iter().enumerate() {
        assert!(name.starts_with(&format!("{i:02}-")), "{name}");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
            "{name}"
        );
    }
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), list.len());
}

#[test]
fn the_list_ends_with_the_load_then_metrics() {
    let list = plan().exchanges();
    let tail: Vec<&str> = list[list.len() - 4..]
        .iter()
        .map(|e| e.name.split_once('-').expect("numbered").1)
        .collect();
    assert_eq!(tail, ["load-00", "load-01", "load-02", "metrics"]);
    assert_eq!(plan().load_tokens(), (24, 24));
}

#[test]
fn the_too_long_prompt_has_max_model_len_plus_one_ids() {
    let list = plan().exchanges();
    let long = list
        .iter()
        .find(|e| e.name.ends_with("error-prompt-too-long"))
        .expect("listed");
    let body: Value = serde_json::from_slice(&long.request.body).expect("json");
    assert_eq!(body["prompt"].as_array().expect("ids").len(), 33);
}

#[test]
fn chat_requests_carry_the_template_and_completions_do_not() {
    for exchange in plan().exchanges() {
        let Ok(body) = serde_json::from_slice::<Value>(&exchange.request.body) else {
            continue;
        };
        let chat = exchange.request.path == "/v1/chat/completions";
        let valid_messages = body.get("messages").is_some_and(Value::is_array);
        assert_eq!(
            body.get("chat_template").is_some(),
            chat && valid_messages,
            "{}",
            exchange.name
        );
    }
}

#[test]
fn served_model_reads_id_and_context_length() {
    let models = json!({"object": "list", "data": [{"id": "x", "max_model_len": 2048}]});
    assert_eq!(served_model(&models), Some(("x".to_owned(), Some(2048))));
    assert_eq!(served_model(&json!({"data": []})), None);
}

fn exchange(status: u16, headers: &[(&str, &str)], body: Value) -> Value {
    json!({"response": {
        "status": status,
        "headers": headers.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
        "body": body,
    }})
}

#[test]
fn ids_text_and_dates_are_left_aside_but_keys_and_values_are_compared() {
    let real = exchange(
        200,
        &[("date", "Mon"), ("content-type", "application/json")],
        json!({"json": {"id": "cmpl-1", "created": 1, "object": "text_completion",
                        "choices": [{"text": "a b", "finish_reason": "length"}]}}),
    );
    let same = exchange(
        200,
        &[("Date", "Tue"), ("content-type", "application/json")],
        json!({"json": {"id": "cmpl-2", "created": 2, "object": "text_completion",
                        "choices": [{"text": "c", "finish_reason": "length"}]}}),
    );
    assert_eq!(compare::differences(&real, &same), Vec::<String>::new());
    let other = exchange(
        400,
        &[("content-type", "text/plain")],
        json!({"json": {"id": "cmpl-2", "created": 2, "object": "completion",
                        "choices": [{"text": "c", "finish_reason": "stop", "extra": 1}]}}),
    );
    expect_test::expect![[r#"
        [
            "status: real 200, twin 400",
            "header content-type: real [\"application/json\"], twin [\"text/plain\"]",
            "header date: real [\"Mon\"], twin has none",
            "body.choices[0].finish_reason: real \"length\", twin \"stop\"",
            "body.choices[0].extra: twin 1, real has no such key",
            "body.object: real \"text_completion\", twin \"completion\"",
        ]
    "#]]
    .assert_debug_eq(&compare::differences(&real, &other));
}

#[test]
fn metrics_are_compared_by_family_type_help_and_label_names() {
    let real = "# HELP vllm:a Requests.\n# TYPE vllm:a counter\nvllm:a_total{engine=\"0\",model_name=\"m\"} 3.0\n# HELP vllm:b Gauge.\n# TYPE vllm:b gauge\nvllm:b{engine=\"0\"} 1.0\n";
    let twin = "# HELP vllm:a Requests.\n# TYPE vllm:a counter\nvllm:a_total{model_name=\"m\",engine=\"0\"} 9.0\n# HELP afd_twin_timing_info x\n# TYPE afd_twin_timing_info gauge\nafd_twin_timing_info 1\n";
    let doc = |text: &str| exchange(200, &[], json!({"text": text}));
    expect_test::expect![[r#"
        [
            "metrics vllm:b: real has it (gauge), twin does not",
        ]
    "#]]
    .assert_debug_eq(&compare::differences(&doc(real), &doc(twin)));
}
