//! Request parsing and response shapes of the OpenAI wire format.

use expect_test::{Expect, expect};

use super::*;

#[track_caller]
fn check(endpoint: Endpoint, body: &str, expect: Expect) {
    let out = match GenerationRequest::parse(endpoint, body.as_bytes()) {
        Ok(r) => format!(
            "ok prompt_tokens={} max_tokens={:?} temperature={} seed={:?} stream={} include_usage={} ignore_eos={}",
            r.prompt_tokens,
            r.max_tokens,
            r.temperature,
            r.seed,
            r.stream,
            r.include_usage,
            r.ignore_eos
        ),
        Err(e) => format!("{} {}", e.status, e.body()),
    };
    expect.assert_eq(&out);
}

#[test]
fn completion_defaults() {
    check(
        Endpoint::Completions,
        r#"{"model": "m", "prompt": "San Francisco is a"}"#,
        expect![
            "ok prompt_tokens=4 max_tokens=Some(16) temperature=1 seed=None stream=false include_usage=false ignore_eos=false"
        ],
    );
}

#[test]
fn completion_with_token_ids_and_options() {
    check(
        Endpoint::Completions,
        r#"{"prompt": [[1, 2, 3]], "max_tokens": 5, "temperature": 0, "seed": 7, "stream": true,
            "stream_options": {"include_usage": true}, "ignore_eos": true}"#,
        expect![
            "ok prompt_tokens=3 max_tokens=Some(5) temperature=0 seed=Some(7) stream=true include_usage=true ignore_eos=true"
        ],
    );
}

#[test]
fn chat_counts_template_tokens() {
    check(
        Endpoint::ChatCompletions,
        r#"{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi there"}]}]}"#,
        expect![
            "ok prompt_tokens=11 max_tokens=None temperature=1 seed=None stream=false include_usage=false ignore_eos=false"
        ],
    );
}

#[test]
fn errors_name_the_field() {
    check(
        Endpoint::Completions,
        r#"{"prompt": "x", "max_tokens": 0}"#,
        expect![[
            r#"400 {"error":{"code":400,"message":"max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)","param":"max_tokens","type":"BadRequestError"}}"#
        ]],
    );
    check(
        Endpoint::Completions,
        r#"{"max_tokens": 3}"#,
        expect![[
            r#"400 {"error":{"code":400,"message":"1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)', 'input': {'max_tokens': 3}, 'ctx': {'error': VLLMValidationError('Either prompt or prompt_embeds must be provided and non-empty.')}}","param":"prompt","type":"Bad Request"}}"#
        ]],
    );
    check(
        Endpoint::Completions,
        r#"{"prompt": "x", "stream_options": {"include_usage": true}}"#,
        expect![[
            r#"400 {"error":{"code":400,"message":"1 validation error:\n  {'type': 'value_error', 'loc': ('body',), 'msg': 'Value error, Stream options can only be defined when `stream=True`. (parameter=stream_options)', 'input': {'prompt': 'x', 'stream_options': {'include_usage': True}}, 'ctx': {'error': VLLMValidationError('Stream options can only be defined when `stream=True`.')}}","param":"stream_options","type":"Bad Request"}}"#
        ]],
    );
    check(
        Endpoint::ChatCompletions,
        r#"{"messages": [{"content": "x"}]}"#,
        expect![[
            r#"400 {"error":{"code":400,"message":"messages[0].role must be a string","param":"messages[0].role","type":"BadRequestError"}}"#
        ]],
    );
    check(
        Endpoint::Completions,
        "{not json",
        expect![[
            r#"400 {"error":{"code":400,"message":"1 validation error:\n  {'type': 'json_invalid', 'loc': ('body', 1), 'msg': 'JSON decode error', 'input': {}, 'ctx': {'error': 'Expecting value'}}","param":"body.1","type":"Bad Request"}}"#
        ]],
    );
    check(
        Endpoint::Completions,
        r#"{"prompt": "x", "n": 2}"#,
        expect![[
            r#"400 {"error":{"code":400,"message":"afd-twin serves n = 1 only, got n = 2","param":"n","type":"BadRequestError"}}"#
        ]],
    );
}

#[test]
fn unknown_model_is_vllms_404() {
    expect![[r#"{"error":{"code":404,"message":"The model `nope` does not exist.","param":"model","type":"NotFoundError"}}"#]]
        .assert_eq(&ApiError::unknown_model("nope").body().to_string());
}

#[test]
fn usage_adds_up_unless_skewed() {
    let usage = Usage {
        prompt_tokens: 4,
        completion_tokens: 7,
        total_skew: 0,
    };
    assert_eq!(usage.body()["total_tokens"], 11);
    let skewed = Usage {
        total_skew: 1,
        ..usage
    };
    assert_eq!(skewed.body()["total_tokens"], 12);
}

proptest::proptest! {
    #[test]
    fn parse_never_panics(body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        let _ = GenerationRequest::parse(Endpoint::Completions, &body);
        let _ = GenerationRequest::parse(Endpoint::ChatCompletions, &body);
    }

    #[test]
    fn parse_never_panics_on_json_shaped_input(
        max_tokens in proptest::prelude::any::<i64>(),
        temperature in proptest::prelude::any::<f64>(),
        prompt in "\\PC{0,30}",
    ) {
        let body = serde_json::json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": temperature});
        let _ = GenerationRequest::parse(Endpoint::Completions, body.to_string().as_bytes());
    }
}
