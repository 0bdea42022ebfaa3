//! The live-engine source: steps back to back, twin ids in and out, pinning kept, aborts, the model the
//! served path picks, and the pairs it refuses.

use std::collections::BTreeMap;
use std::time::Duration;

use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::{Role, RuleSet};

use super::*;
use crate::launch::LaunchedRole;
use crate::rendezvous::tests::words;

/// One role's words of a DP2 × TP1 Attention side with one eager FFN rank, plus `extra`.
fn dp2_words(role: Role, extra: &[&str]) -> Vec<String> {
    let mut words: Vec<String> = words(role, 6269, 2, 1)
        .into_iter()
        .map(|w| w.replace("--tensor-parallel-size", "--data-parallel-size"))
        .collect();
    if role == Role::Ffn {
        let i = words
            .iter()
            .position(|w| w == "--data-parallel-size")
            .expect("the words set a parallel size");
        words[i + 1] = "1".to_owned();
    }
    words.extend(extra.iter().map(|w| (*w).to_owned()));
    words
}

fn launched(words: &[String]) -> LaunchedRole {
    LaunchedRole::new(words, BTreeMap::new(), RuleSet::Latest).expect("a valid role")
}

fn pair(attention_extra: &[&str], model: &str, gpu: GpuKind) -> Result<SimSource, SimSourceError> {
    let mut attention = dp2_words(Role::Attention, attention_extra);
    attention[0] = model.to_owned();
    SimSource::for_pair(
        &launched(&attention),
        &dp2_words(Role::Ffn, &[]),
        &BTreeMap::new(),
        &SimPricing::new(model, gpu),
    )
}

/// A DP2 Attention side (one eager FFN rank) priced as DeepSeek-V2-Lite on H200.
pub(crate) fn dp2_source() -> SimSource {
    pair(&[], "/models/DeepSeek-V2-Lite", GpuKind::H200).expect("the pair simulates")
}

fn request(id: u64, engine: u32, prompt_tokens: u32, output_tokens: u32) -> TimedRequest {
    TimedRequest {
        id: RequestId(id),
        engine,
        prompt_tokens,
        output_tokens,
    }
}

/// Runs every step back to back; the steps and every token per request.
fn drain(source: &mut SimSource) -> (Vec<StepOutcome>, BTreeMap<RequestId, u32>) {
    let mut steps = Vec::new();
    let mut tokens = BTreeMap::new();
    while let Some(step) = source.next_step(Duration::ZERO) {
        for id in &step.emitted {
            *tokens.entry(*id).or_insert(0) += 1;
        }
        steps.push(step);
    }
    (steps, tokens)
}

#[test]
fn steps_run_back_to_back_and_stream_every_token_under_twin_ids() {
    let mut source = dp2_source();
    assert_eq!(source.n_engines(), 2);
    source.submit(request(10, 1, 100, 3)).expect("admitted");
    source.submit(request(11, 0, 20, 2)).expect("admitted");
    let (steps, tokens) = drain(&mut source);
    assert_eq!(
        tokens,
        BTreeMap::from([(RequestId(10), 3), (RequestId(11), 2)])
    );
    let mut end = Duration::ZERO;
    for step in &steps {
        assert_eq!(step.start, end, "steps follow each other back to back");
        assert!(step.duration > Duration::ZERO);
        assert_eq!(step.tokens_per_engine.len(), 2);
        assert!(step.stages == 1 || step.stages == 2);
        end = step.start + step.duration;
    }
    // The first step prefills both prompts, each on the engine the twin chose.
    assert_eq!(steps[0].tokens_per_engine, vec![20, 100]);
    assert_eq!(steps[0].scheduled.len(), 2);
    assert!(source.sim_of.is_empty() && source.twin_of.is_empty());
}

#[test]
fn an_idle_source_starts_its_next_step_when_asked() {
    let mut source = dp2_source();
    source.submit(request(1, 0, 8, 1)).expect("admitted");
    let first = source.next_step(Duration::from_secs(2)).expect("a step");
    assert_eq!(first.start, Duration::from_secs(2));
    assert!(source.next_step(Duration::ZERO).is_none());
    source.submit(request(2, 1, 8, 1)).expect("admitted");
    let early = source.next_step(Duration::ZERO).expect("a step");
    assert_eq!(
        early.start,
        first.start + first.duration,
        "never before the previous step's end"
    );
}

#[test]
fn aborted_requests_emit_nothing_more_and_unknown_ids_are_ignored() {
    let mut source = dp2_source();
    source.submit(request(1, 0, 8, 50)).expect("admitted");
    source.submit(request(2, 0, 8, 2)).expect("admitted");
    let first = source.next_step(Duration::ZERO).expect("a step");
    assert_eq!(first.emitted, vec![RequestId(1), RequestId(2)]);
    source.abort(RequestId(1));
    source.abort(RequestId(99));
    let (_, tokens) = drain(&mut source);
    assert_eq!(tokens, BTreeMap::from([(RequestId(2), 1)]));
}

#[test]
fn the_source_is_the_same_from_either_role() {
    let ffn = dp2_words(Role::Ffn, &[]);
    let attention = dp2_words(Role::Attention, &[]);
    let pricing = SimPricing::new("/models/DeepSeek-V2-Lite", GpuKind::H200);
    let mut from_ffn = SimSource::for_pair(&launched(&ffn), &attention, &BTreeMap::new(), &pricing)
        .expect("simulates");
    let mut from_attention = dp2_source();
    for source in [&mut from_ffn, &mut from_attention] {
        source.submit(request(1, 1, 300, 4)).expect("admitted");
    }
    assert_eq!(drain(&mut from_ffn).0, drain(&mut from_attention).0);
}

#[test]
fn the_served_path_picks_the_priced_model() {
    let shipped = SimPricing::new("/models/DeepSeek-V2-Lite", GpuKind::H200);
    assert_eq!(
        shipped.model_source,
        ModelSource::Shipped("deepseek-v2-lite".to_owned())
    );
    let qwen = SimPricing::new("Qwen3-30B-A3B", GpuKind::H100);
    assert_eq!(qwen.model.name, "qwen3-30b-a3b");
    assert_eq!(qwen.gpu, GpuKind::H100);
    let unknown = SimPricing::new("/models/some-dense-model", GpuKind::H200);
    assert_eq!(unknown.model, shipped.model);
    assert!(matches!(unknown.model_source, ModelSource::Default(_)));

    let dir = std::env::temp_dir().join(format!("afd-twin-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let qwen_text =
        afd_traces::model_config::builtin_model("qwen3-30b-a3b").expect("shipped config");
    std::fs::write(dir.join("config.json"), qwen_text).expect("config written");
    let from_file = SimPricing::new(dir.to_str().expect("utf-8 temp dir"), GpuKind::H200);
    assert!(
        matches!(from_file.model_source, ModelSource::ConfigFile(ref p) if p.ends_with("config.json"))
    );
    assert_eq!(from_file.model.config, qwen.model.config);
    std::fs::write(dir.join("config.json"), "{ not json").expect("config written");
    let broken = SimPricing::new(dir.to_str().expect("utf-8 temp dir"), GpuKind::H200);
    let _ = std::fs::remove_dir_all(&dir);
    match broken.model_source {
        ModelSource::Default(why) => assert!(why.contains("config.json"), "{why}"),
        other => panic!("a broken config.json falls back to the default, got {other:?}"),
    }
}

#[test]
fn the_context_length_is_the_flag_or_the_models() {
    assert_eq!(dp2_source().max_model_len(), 163_840);
    let source = pair(
        &["--max-model-len", "4096"],
        "/models/DeepSeek-V2-Lite",
        GpuKind::H200,
    )
    .expect("simulates");
    assert_eq!(source.max_model_len(), 4096);
    // `auto` fits the length to the KV cache: the model's own where it fits, less where not.
    let auto = |utilization: &str| {
        pair(
            &[
                "--max-model-len",
                "auto",
                "--gpu-memory-utilization",
                utilization,
            ],
            "/models/DeepSeek-V2-Lite",
            GpuKind::H200,
        )
        .expect("auto fits the cache")
    };
    assert_eq!(auto("0.9").max_model_len(), 163_840);
    let short = auto("0.05");
    assert!(short.max_model_len() < 163_840, "{}", short.max_model_len());
    assert!(u64::from(short.max_model_len()) <= short.kv_tokens_per_engine());
}

#[test]
fn pairs_the_simulator_cannot_serve_are_refused_naming_the_cause() {
    let err = pair(
        &["--max-model-len", "100000000"],
        "/models/DeepSeek-V2-Lite",
        GpuKind::H200,
    )
    .expect_err("no KV cache holds that");
    assert!(matches!(err, SimSourceError::Cluster(_)), "{err}");
    assert!(
        err.to_string()
            .contains("cannot hold one request of max_model_len 100000000 tokens"),
        "{err}"
    );
    assert!(err.to_string().contains("--max-model-len"), "{err}");
    let err = pair(
        &["--gpu-memory-utilization", "0.02"],
        "/models/DeepSeek-V2-Lite",
        GpuKind::L4,
    )
    .expect_err("the weights fill the allowed memory");
    assert!(matches!(err, SimSourceError::Cluster(_)), "{err}");
}

fn timing_info(model: &str) -> TimingInfo {
    TimingInfo {
        model: model.to_owned(),
        gpu: GpuKind::H100,
        seed: 7,
        time_scale: 0.25,
        kernel_model: true,
    }
}

#[test]
fn the_timing_info_reads_back_as_the_conformance_suite_reads_it() {
    use afd_conformance::checks::simulator::{TWIN_TIMING_METRIC, TwinTiming};
    use afd_conformance::prometheus::Scrape;

    assert_eq!(TIMING_INFO_METRIC, TWIN_TIMING_METRIC);
    let info = timing_info("deepseek \"v2\" lite");
    let text = format!(
        "vllm:num_requests_running{{engine=\"0\"}} 0.0\n{}",
        info.render()
    );
    let scrape = Scrape::parse(&text).expect("the rendering is a valid exposition");
    let read = TwinTiming::from_scrape(&scrape)
        .expect("the series is there")
        .expect("every label reads");
    assert_eq!(
        (read.model, read.gpu, read.seed, read.time_scale),
        (info.model, info.gpu, info.seed, info.time_scale)
    );
    // A `--kernel-model` twin says so, and the suite predicts it from kernels alone.
    assert!(info.kernel_model && read.kernel_model);
}

#[test]
fn the_cost_source_names_the_profile_or_the_roofline() {
    let h200 = SimPricing::new("/models/DeepSeek-V2-Lite", GpuKind::H200).cost_source();
    assert!(h200.starts_with("built-in h200 profile "), "{h200}");
    assert!(
        h200.ends_with(
            "host pace (built-in NVIDIA H200 engine profile), each role issuing its part of a plain step as vLLM's profiler divided a plain eager step between the layers' attention and MoE blocks"
        ),
        "{h200}"
    );
    let qwen = SimPricing::new("/models/Qwen3-30B-A3B", GpuKind::H200).cost_source();
    assert!(!qwen.contains("host pace"), "{qwen}");
    // `--kernel-model`: the profile's kernels, no host pace.
    let kernels = SimPricing::new("/models/DeepSeek-V2-Lite", GpuKind::H200).kernels_only();
    let source = kernels.cost_source();
    assert!(
        source.starts_with("built-in h200 profile ") && !source.contains("host pace"),
        "{source}"
    );
    // The H100 prices its kernels by its roofline and its steps without graphs by its own eager
    // servers' engine profile; the A100 has neither measured.
    let h100 = SimPricing::new("/models/DeepSeek-V2-Lite", GpuKind::H100).cost_source();
    assert!(
        h100.starts_with("h100 roofline, steps without graphs at real vLLM")
            && h100.contains("built-in NVIDIA H100 80GB HBM3 engine profile"),
        "{h100}"
    );
    let a100 = SimPricing::new("/models/DeepSeek-V2-Lite", GpuKind::A100).cost_source();
    assert_eq!(a100, "a100 roofline");
}
