//! Workload generation follows `vllm bench serve`; routing samples distinct experts.

use proptest::prelude::*;

use super::*;

fn dataset(n: u32) -> RandomDataset {
    RandomDataset {
        num_prompts: n,
        input_len: 1024,
        output_len: 128,
        range_ratio: 0.0,
    }
}

#[test]
fn fixed_lengths_and_rescaled_poisson_arrivals() {
    let workload = random_workload(
        dataset(100),
        Arrivals::Gamma {
            rate: 5.0,
            burstiness: 1.0,
        },
        Some(32),
        Seed(0),
    )
    .unwrap();
    assert!(
        workload
            .requests
            .iter()
            .all(|r| r.input_tokens == 1024 && r.output_tokens == 128)
    );
    // The last request is sent at exactly N / rate = 20 s (vllm's normalisation).
    let last = workload.requests.last().unwrap().intended_send;
    assert_eq!(last, SimTime::ZERO + SimDuration::from_secs_f64(20.0));
    assert!(
        workload
            .requests
            .windows(2)
            .all(|w| w[0].intended_send <= w[1].intended_send)
    );
}

#[test]
fn a_vllm_bench_draw_sends_when_the_real_client_sent() {
    let cases = vllm_bench::numpy_fixture("send_times");
    assert_eq!(cases.len(), 5);
    for case in &cases {
        let seed = u32::try_from(case["seed"].as_u64().unwrap()).unwrap();
        let n = u32::try_from(case["num_prompts"].as_u64().unwrap()).unwrap();
        let burstiness = case["burstiness"].as_f64().unwrap();
        let arrivals = match case["ramp_up_strategy"].as_str() {
            None => Arrivals::Gamma {
                rate: case["request_rate"].as_f64().unwrap(),
                burstiness,
            },
            Some(strategy) => Arrivals::RampUp {
                ramp: RampUp {
                    exponential: strategy == "exponential",
                    start_rps: case["ramp_up_start_rps"].as_f64().unwrap(),
                    end_rps: case["ramp_up_end_rps"].as_f64().unwrap(),
                },
                burstiness,
            },
        };
        // The simulator's seed plays no part in a vllm-bench draw.
        let workload = random_workload_drawn(
            dataset(n),
            arrivals,
            ArrivalDraw::VllmBench { seed },
            None,
            Seed(99),
        )
        .unwrap();
        let want = case["send_s"].as_array().unwrap();
        assert_eq!(workload.requests.len(), want.len());
        for (r, w) in workload.requests.iter().zip(want) {
            let want = SimTime::ZERO + SimDuration::from_secs_f64(w.as_f64().unwrap());
            let gap = r.intended_send.as_ns().abs_diff(want.as_ns());
            assert!(
                gap <= 1,
                "seed {seed}: sent at {:?}, numpy {want:?}",
                r.intended_send
            );
        }
        // The simulator's own draw is another one.
        let own = random_workload(dataset(n), arrivals, None, Seed(99)).unwrap();
        assert_ne!(own.requests, workload.requests);
    }
}

#[test]
fn a_ramp_goes_from_its_start_to_its_end_rate_and_refuses_what_vllm_refuses() {
    let ramp = |exponential, start_rps, end_rps| RampUp {
        exponential,
        start_rps,
        end_rps,
    };
    let linear = ramp(false, 2.0, 10.0);
    assert_eq!(
        (linear.rate(0, 5), linear.rate(2, 5), linear.rate(4, 5)),
        (2.0, 6.0, 10.0)
    );
    let geometric = ramp(true, 1.0, 16.0);
    assert!((geometric.rate(2, 5) - 4.0).abs() < 1e-12);
    assert_eq!(linear.rate(0, 1), 2.0, "one request takes the start rate");
    let ramped = |r| Arrivals::RampUp {
        ramp: r,
        burstiness: 1.0,
    };
    for bad in [
        ramp(false, 0.0, 5.0),
        ramp(true, 4.0, 2.0),
        ramp(false, 1.0, f64::NAN),
    ] {
        let err = random_workload(dataset(3), ramped(bad), None, Seed(0)).unwrap_err();
        assert!(err.to_string().contains("ramp-up"), "{err}");
    }
    // The simulator's own ramp: rates rise, so gaps shrink on average, and nothing is rescaled.
    let w = random_workload(dataset(400), ramped(ramp(false, 1.0, 100.0)), None, Seed(3)).unwrap();
    let at = |i: usize| w.requests[i].intended_send.as_secs_f64();
    assert!(
        at(199) - at(0) > 3.0 * (at(399) - at(200)),
        "{} {}",
        at(199),
        at(399)
    );
    assert_eq!(w.request_rate, None);
}

#[test]
fn infinite_rate_sends_everything_at_once() {
    let workload = random_workload(dataset(3), Arrivals::AllAtOnce, None, Seed(1)).unwrap();
    assert!(
        workload
            .requests
            .iter()
            .all(|r| r.intended_send == SimTime::ZERO)
    );
    assert_eq!(workload.request_rate, None);
}

#[test]
fn bad_parameters_name_the_flag() {
    let err = |d: RandomDataset, a: Arrivals, c: Option<u32>| {
        random_workload(d, a, c, Seed(0)).unwrap_err().to_string()
    };
    let poisson = Arrivals::Gamma {
        rate: 1.0,
        burstiness: 1.0,
    };
    assert!(err(dataset(0), poisson, None).contains("--num-prompts"));
    assert!(
        err(
            dataset(1),
            Arrivals::Gamma {
                rate: -1.0,
                burstiness: 1.0
            },
            None
        )
        .contains("--request-rate")
    );
    assert!(
        err(
            dataset(1),
            Arrivals::Gamma {
                rate: 1.0,
                burstiness: 0.0
            },
            None
        )
        .contains("--burstiness")
    );
    assert!(err(dataset(1), poisson, Some(0)).contains("--max-concurrency"));
    let ratio = RandomDataset {
        range_ratio: 1.5,
        ..dataset(1)
    };
    assert!(err(ratio, poisson, None).contains("--random-range-ratio"));
}

#[test]
fn trace_arrivals_are_offset_to_zero_and_sorted() {
    let entries = [
        TraceEntry {
            arrival_us: Some(5_000_000),
            input_tokens: 10,
            output_tokens: 2,
        },
        TraceEntry {
            arrival_us: Some(3_000_000),
            input_tokens: 20,
            output_tokens: 3,
        },
    ];
    let workload = trace_workload(&entries, Arrivals::AllAtOnce, None, Seed(0)).unwrap();
    assert_eq!(workload.requests[0].input_tokens, 20);
    assert_eq!(workload.requests[0].intended_send, SimTime::ZERO);
    assert_eq!(workload.requests[1].intended_send.as_ns(), 2_000_000_000);
    let zero = [TraceEntry {
        arrival_us: None,
        input_tokens: 0,
        output_tokens: 1,
    }];
    let message = trace_workload(&zero, Arrivals::AllAtOnce, None, Seed(0))
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "trace request 0 has input_tokens = 0; every request needs at least one token"
    );
}

#[test]
fn power_law_favours_low_expert_ids() {
    let sampler = ExpertSampler::new(ExpertPopularity::PowerLaw { exponent: 1.2 }, 64, 6);
    let mut rng = stream(Seed(3), RngStream::RoutingPools);
    let mut counts = [0u32; 64];
    let mut token = Vec::new();
    for _ in 0..2000 {
        sampler.sample_token(&mut rng, &mut token);
        for &e in &token {
            counts[e as usize] += 1;
        }
    }
    assert!(counts[0] > 4 * counts[63], "{counts:?}");
}

proptest! {
    #[test]
    fn tokens_get_k_distinct_experts(seed in any::<u64>(), k in 1u32..9, exponent in 0.0f64..3.0) {
        let sampler = ExpertSampler::new(ExpertPopularity::PowerLaw { exponent }, 16, k);
        let mut rng = stream(Seed(seed), RngStream::RoutingPools);
        let mut token = Vec::new();
        sampler.sample_token(&mut rng, &mut token);
        let mut sorted = token.clone();
        sorted.sort_unstable();
        sorted.dedup();
        prop_assert_eq!(sorted.len(), k as usize);
        prop_assert!(token.iter().all(|&e| e < 16));
    }

    #[test]
    fn random_lengths_stay_in_range(seed in any::<u64>(), ratio in 0.0f64..0.99) {
        let d = RandomDataset { num_prompts: 20, input_len: 100, output_len: 10, range_ratio: ratio };
        let w = random_workload(d, Arrivals::AllAtOnce, None, Seed(seed)).unwrap();
        for r in &w.requests {
            prop_assert!(r.input_tokens >= 1 && f64::from(r.input_tokens) <= 100.0 * (1.0 + ratio) + 1.0);
            prop_assert!(r.output_tokens >= 1);
        }
    }
}

proptest! {
    #[test]
    fn any_trace_or_parameters_give_a_workload_or_a_named_error(
        entries in proptest::collection::vec((proptest::option::of(0u64..u64::MAX / 4), 0u32..100_000, 0u32..10_000), 0..20),
        rate in proptest::num::f64::ANY,
        burstiness in proptest::num::f64::ANY,
        concurrency in proptest::option::of(0u32..100),
    ) {
        let entries: Vec<TraceEntry> = entries
            .into_iter()
            .map(|(arrival_us, input_tokens, output_tokens)| TraceEntry { arrival_us, input_tokens, output_tokens })
            .collect();
        let arrivals = Arrivals::Gamma { rate, burstiness };
        match trace_workload(&entries, arrivals, concurrency, Seed(0)) {
            Ok(workload) => {
                prop_assert_eq!(workload.requests.len(), entries.len());
                prop_assert!(workload.requests.windows(2).all(|w| w[0].intended_send <= w[1].intended_send));
            }
            Err(err) => prop_assert!(!err.to_string().is_empty()),
        }
    }
}
