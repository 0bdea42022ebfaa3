//! At a time scale above zero the pair times tokens as the simulator does: a streamed request's TTFT and
//! E2EL, measured by the load generator, against `afd_sim::live::LiveEngine`'s prediction for the seed
//! recipe (never earlier, and late only by the twin's own overhead).

use std::collections::BTreeMap;
use std::time::Duration;

use afd_conformance::bench::{self, BenchConfig};
use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::RuleSet;
use afd_twin::launch::LaunchedRole;
use afd_twin::timing::sim::{SimPricing, SimSource};
use afd_twin::timing::{RequestId, StepSource as _, TimedRequest};

use crate::support::*;

/// Real time: the seed pair's replayed decode steps last 3–10 ms (its chunk steps about 70 ms at
/// real vLLM's host pace), so a smaller scale would time the twin's overhead rather than the
/// simulator (about 290 ms to the first token, 590 ms to the last).
const SCALE: f64 = 1.0;
const PROMPT: u32 = 256;
const OUTPUT: u32 = 64;

/// The simulator's TTFT and E2EL for one request on the idle seed pair, in simulated time.
fn predicted() -> (Duration, Duration) {
    // The seed recipe exports the V2 model runner, which the latest plugin requires.
    let env = BTreeMap::from([("VLLM_USE_V2_MODEL_RUNNER".to_owned(), "1".to_owned())]);
    let attention = LaunchedRole::new(
        &seed_args(Role::Attention, 6269, 18305),
        env.clone(),
        RuleSet::Latest,
    )
    .expect("the seed recipe's attention role");
    let mut source = SimSource::for_pair(
        &attention,
        &seed_args(Role::Ffn, 6269, 18305),
        &env,
        &SimPricing::new("/path/model_weights/DeepSeek-V2-Lite", GpuKind::H200),
    )
    .expect("the seed pair simulates");
    source
        .submit(TimedRequest {
            id: RequestId(0),
            engine: 0,
            prompt_tokens: PROMPT,
            output_tokens: OUTPUT,
        })
        .expect("admitted");
    let mut token_times = Vec::new();
    while let Some(step) = source.next_step(Duration::ZERO) {
        if !step.emitted.is_empty() {
            token_times.push(step.start + step.duration);
        }
    }
    assert_eq!(token_times.len(), OUTPUT as usize);
    (token_times[0], token_times[token_times.len() - 1])
}

#[tokio::test]
async fn time_scaled_ttft_and_e2el_follow_the_simulator() {
    let (ttft, e2el) = predicted();
    let (ttft, e2el) = (ttft.mul_f64(SCALE), e2el.mul_f64(SCALE));
    let scale = SCALE.to_string();
    let pair = seed_pair(Order::FfnFirst, &["--time-scale", &scale], &[]).await;
    let mut config = BenchConfig::new(&pair.base_url);
    config.num_prompts = 1;
    config.random_input_len = PROMPT;
    config.random_output_len = OUTPUT;
    config.ignore_eos = true;
    let result = bench::run(config, false, || {}).await.expect("bench runs");
    let record = &result.records[0];
    assert!(record.success, "{record:?}");
    assert_eq!(record.completion_tokens, Some(u64::from(OUTPUT)));
    for (name, got, want) in [
        ("TTFT", record.ttft_s, ttft),
        ("E2EL", record.latency_s, e2el),
    ] {
        let got = Duration::from_secs_f64(got);
        // The client's clock starts before the twin's: a correct twin is never early.
        assert!(
            got >= want,
            "{name} {got:?} is shorter than the simulator's {want:?} at time scale {SCALE}"
        );
        assert!(
            got <= want.mul_f64(1.25) + Duration::from_millis(40),
            "{name} {got:?} is much longer than the simulator's {want:?} at time scale {SCALE}"
        );
    }
}
