//! Tests of the parsed views of responses and streams, of counter arithmetic, and of the timing
//! objectives' medians.

use std::time::Duration;

use crate::client::wire::ResponseHead;
use crate::client::{Response, TimedEvent};
use crate::prometheus::Scrape;
use crate::sse::SseParser;

use super::*;

fn response(status: u16, content_type: &str, body: &str) -> Response {
    let events = SseParser::new()
        .push(body.as_bytes())
        .into_iter()
        .enumerate()
        .map(|(i, event)| TimedEvent {
            event,
            at: Duration::from_millis(10 * i as u64),
        })
        .collect();
    Response {
        head: ResponseHead {
            status,
            reason: String::new(),
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
        },
        body: body.as_bytes().to_vec(),
        trailing: Vec::new(),
        elapsed: Duration::from_millis(5),
        events,
        sse_problems: Vec::new(),
        cancelled: false,
    }
}

#[test]
fn a_vllm_completion_parses_cleanly() {
    let body = r#"{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" hi","logprobs":null,"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#;
    let parsed = Completion::parse(Api::Completions, &response(200, "application/json", body));
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    assert_eq!(parsed.text.as_deref(), Some(" hi"));
    assert_eq!(parsed.finish_reason.as_deref(), Some("length"));
    assert_eq!(
        parsed.usage,
        Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 2,
            total_tokens: 5
        })
    );
}

#[test]
fn shape_problems_are_listed() {
    let body = r#"{"id":"","object":"chat.completion","model":"m","choices":[{"index":1,"message":{"role":"user","content":""}},{}]}"#;
    let parsed = Completion::parse(Api::Chat, &response(200, "application/json", body));
    assert_eq!(
        parsed.problems,
        [
            "no string id",
            "no usage",
            "2 choices, expected 1 (n = 1)",
            "choice index is not 0",
            "message role is Some(\"user\"), expected \"assistant\"",
            "choice text is empty",
        ]
    );
    let garbage = Completion::parse(
        Api::Chat,
        &response(200, "application/json", "\u{0}garbage"),
    );
    assert_eq!(garbage.problems, ["body is not JSON"]);
}

#[test]
fn a_stream_is_read_event_by_event() {
    let chunk = |text: &str, finish: &str| {
        format!(
            r#"data: {{"id":"c1","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":{finish}}}]}}"#
        )
    };
    let body = format!(
        "{}\n\n{}\n\n{}\n\ndata: {{\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":2,\"total_tokens\":6}}}}\n\ndata: [DONE]\n\n",
        chunk("", "null"),
        chunk("a", "null"),
        chunk("b", "\"stop\"")
    );
    let view = StreamView::parse(
        Api::Chat,
        &response(200, "text/event-stream; charset=utf-8", &body),
    );
    assert!(view.problems.is_empty(), "{:?}", view.problems);
    assert_eq!(view.text, "ab");
    assert_eq!(view.text_chunks, 2);
    assert_eq!(view.finishes, [(2, "stop".to_owned())]);
    assert_eq!(view.done_positions, [4]);
    assert_eq!(view.n_events, 5);
    assert_eq!(view.usage.map(|u| u.total_tokens), Some(6));
    assert!(!view.usage_chunk_with_choices);
    assert_eq!(view.ids, ["c1"]);
    assert_eq!(
        view.text_times,
        [Duration::from_millis(10), Duration::from_millis(20)]
    );
}

#[test]
fn stream_problems_are_listed() {
    let body = "data: not json\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\ndata: [DONE]\n\ndata: [DONE]\n\n";
    let view = StreamView::parse(Api::Completions, &response(200, "application/json", body));
    assert_eq!(view.done_positions, [2, 3]);
    assert!(view.error_event.is_some());
    assert_eq!(
        view.problems,
        [
            "content-type is 'application/json', not text/event-stream",
            "event 0 is neither JSON nor [DONE]: \"not json\""
        ]
    );
}

#[test]
fn counters_subtract_per_engine() {
    let scrape = |s0: u32, s1: u32, abort: u32| {
        Scrape::parse(&format!(
            "vllm:request_success_total{{engine=\"0\",finished_reason=\"stop\"}} {s0}\n\
             vllm:request_success_total{{engine=\"1\",finished_reason=\"stop\"}} {s1}\n\
             vllm:request_success_total{{engine=\"1\",finished_reason=\"abort\"}} {abort}\n\
             vllm:prompt_tokens_total{{engine=\"0\"}} 10\nvllm:generation_tokens_total{{engine=\"0\"}} 7\n\
             vllm:num_requests_running{{engine=\"0\"}} 0\nvllm:num_requests_waiting{{engine=\"1\"}} {abort}\n"
        ))
        .expect("valid")
    };
    let before = Counters::read(&scrape(1, 2, 0)).expect("counters");
    let after = Counters::read(&scrape(4, 2, 1)).expect("counters");
    let delta = after.since(&before);
    assert_eq!(delta.success, 4.0);
    assert_eq!(delta.aborted, 1.0);
    assert_eq!(delta.success_by_engine["0"], 3.0);
    assert_eq!(delta.success_by_engine["1"], 1.0);
    assert!(queues(&scrape(0, 0, 0)).1);
    let (per, idle) = queues(&scrape(0, 0, 2));
    assert!(!idle);
    assert_eq!(show_engines(&per), "{0: 0, 1: 2}");
    let missing = Counters::read(&Scrape::parse("x 1").expect("valid")).expect_err("no series");
    assert_eq!(missing, "/metrics has no vllm:request_success_total series");
}

#[test]
fn request_bodies_follow_the_spec() {
    let spec = RequestSpec::new("t", Api::Chat, "hi".to_owned(), 5)
        .streaming(true)
        .ignoring_eos();
    assert_eq!(
        spec.body("m").to_string(),
        r#"{"ignore_eos":true,"max_tokens":5,"messages":[{"content":"hi","role":"user"}],"model":"m","stream":true,"stream_options":{"include_usage":true},"temperature":0}"#
    );
}

#[test]
fn timing_objectives_judge_the_median_of_the_samples() {
    use crate::report::Status;
    let judge = |samples: &[f64], slo: Option<f64>| {
        let mut samples = samples.to_vec();
        timing::judge("inter-token latency", &mut samples, slo, "--max-itl-ms")
    };
    // An even count: the median is the mean of the middle two (4 and 6), whatever the order.
    let at = judge(&[9.0, 1.0, 6.0, 4.0], Some(5.0));
    assert_eq!(at.status, Status::Pass, "{}", at.message);
    assert_eq!(
        at.message,
        "median inter-token latency 5.00 ms <= 5 ms over 4 samples (max 9.00 ms)"
    );
    let over = judge(&[9.0, 1.0, 6.0, 4.1], Some(5.0));
    assert_eq!(
        over.message,
        "median inter-token latency 5.05 ms exceeds --max-itl-ms 5 ms"
    );
    assert_eq!(judge(&[3.0, 7.0, 5.0], Some(5.0)).status, Status::Pass);
    assert_eq!(judge(&[], Some(5.0)).status, Status::Indeterminate);
    assert_eq!(judge(&[1.0], None).status, Status::Skipped);
}

fn liveness(ledger: &[Call], silent: &[(String, Duration)]) -> Outcome {
    let outcomes = ledger::judge(ledger, false, Duration::from_secs(6), silent);
    outcomes
        .into_iter()
        .find(|(id, _)| *id == "liveness.completes")
        .expect("judged")
        .1
}

fn call(result: CallResult) -> Call {
    let mut spec = RequestSpec::new("api", Api::Completions, "Hello".to_owned(), 4);
    spec.request_id = "conf-1-0".to_owned();
    Call { spec, result }
}

#[test]
fn liveness_without_evidence_is_never_a_pass() {
    use crate::report::Status;
    let empty = liveness(&[], &[]);
    assert_eq!(empty.status, Status::Indeterminate, "{}", empty.message);
    let not_sent = liveness(
        &[call(CallResult::OutOfBudget {
            waited: Duration::ZERO,
        })],
        &[],
    );
    assert_eq!(not_sent.status, Status::Indeterminate);
    let cut_early = liveness(
        &[call(CallResult::OutOfBudget {
            waited: Duration::from_secs(2),
        })],
        &[],
    );
    assert_eq!(cut_early.status, Status::Indeterminate);
    assert!(
        cut_early.message.contains("1 waited"),
        "{}",
        cut_early.message
    );
}

#[test]
fn a_request_unanswered_when_the_budget_ran_out_fails_liveness() {
    use crate::report::Status;
    let hung = liveness(
        &[
            call(CallResult::Response(response(
                200,
                "application/json",
                "{}",
            ))),
            call(CallResult::OutOfBudget {
                waited: Duration::from_secs(40),
            }),
        ],
        &[],
    );
    assert_eq!(hung.status, Status::Fail, "{}", hung.message);
    let silent = liveness(
        &[],
        &[(
            "POST /v1/completions (an API probe)".to_owned(),
            Duration::from_secs(10),
        )],
    );
    assert_eq!(silent.status, Status::Fail, "{}", silent.message);
}
