//! The engine loop against an in-process FFN end: tokens arrive in order, the last is marked, statistics
//! are conserved, clients that leave are aborted, a frozen engine stops stepping, and at a time scale
//! above zero tokens arrive when the simulator says they do.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use afd_sim::topology::{Role, RuleSet, Topology};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::*;
use crate::metrics::{Metrics, MetricsSkew};
use crate::rendezvous::tests::{free_port, words};
use crate::rendezvous::{self, FfnEvent, PeerConfig, RendezvousOptions};
use crate::timing::sim::tests::dp2_source;

fn peer(role: Role, port: u16) -> PeerConfig {
    PeerConfig {
        role,
        connector: "P2pNcclAFDConnector".to_owned(),
        afd_host: "127.0.0.1".to_owned(),
        afd_port: port,
        num_attention_ranks: 2,
        num_ffn_ranks: 1,
        async_dp: false,
        compute_gate_on_attention: false,
        rules: RuleSet::Latest,
        data_parallel_size: 2,
        tensor_parallel_size: 1,
        http_addr: "127.0.0.1:1".to_owned(),
        model: "m".to_owned(),
        args: words(role, port, 2, 1)
            .into_iter()
            .map(|w| w.replace("--tensor-parallel-size", "--data-parallel-size"))
            .collect(),
        env: std::collections::BTreeMap::new(),
    }
}

struct Harness {
    submissions: mpsc::UnboundedSender<Submission>,
    metrics: Arc<Metrics>,
    shutdown: watch::Sender<bool>,
    frozen: Arc<AtomicBool>,
    engine: tokio::task::JoinHandle<EngineExit>,
    ffn_steps: tokio::task::JoinHandle<u64>,
}

async fn start() -> Harness {
    start_scaled(0.0).await
}

async fn start_scaled(time_scale: f64) -> Harness {
    let port = free_port(0);
    let topology = Topology::new(2, 1, RuleSet::Latest, port).expect("legal");
    let options = RendezvousOptions {
        timeout: Duration::from_secs(5),
        accept_mismatch: false,
    };
    let (a, f) = (peer(Role::Attention, port), peer(Role::Ffn, port));
    let (link, ffn_link) = tokio::join!(
        rendezvous::attention(&a, &topology, options),
        rendezvous::ffn(&f, &topology, options)
    );
    let mut ffn_link = ffn_link.expect("ffn paired");
    let ffn_steps = tokio::spawn(async move {
        let mut steps = 0;
        while let Ok(FfnEvent::Step(step)) = ffn_link.next().await {
            steps += 1;
            if ffn_link.ack(step.step).await.is_err() {
                break;
            }
        }
        steps
    });
    let metrics = Arc::new(Metrics::new("m", 2, MetricsSkew::default()));
    let (submissions, receiver) = mpsc::unbounded_channel();
    let (shutdown, shutdown_rx) = watch::channel(false);
    let frozen = Arc::new(AtomicBool::new(false));
    let engine = tokio::spawn(run(
        Box::new(dp2_source()),
        link.expect("attention paired"),
        metrics.clone(),
        receiver,
        shutdown_rx,
        EngineOptions {
            time_scale,
            frozen: frozen.clone(),
        },
    ));
    Harness {
        submissions,
        metrics,
        shutdown,
        frozen,
        engine,
        ffn_steps,
    }
}

fn submit(h: &Harness, id: u64, engine: u32, output: u32) -> mpsc::UnboundedReceiver<TokenEvent> {
    let (events, receiver) = mpsc::unbounded_channel();
    h.metrics.with(|e| e[engine as usize].waiting += 1);
    h.submissions
        .send(Submission {
            request: TimedRequest {
                id: RequestId(id),
                engine,
                prompt_tokens: 20,
                output_tokens: output,
            },
            finish: FinishReason::Length,
            arrived: Instant::now(),
            events,
        })
        .expect("engine is running");
    receiver
}

async fn drain(mut receiver: mpsc::UnboundedReceiver<TokenEvent>) -> Vec<TokenEvent> {
    let mut out = Vec::new();
    while let Some(event) = receiver.recv().await {
        out.push(event);
        if event.last {
            break;
        }
    }
    out
}

#[tokio::test]
async fn tokens_arrive_in_order_and_statistics_are_conserved() {
    let h = start().await;
    let receivers: Vec<_> = (0..6)
        .map(|i| submit(&h, i, (i % 2) as u32, 3 + i as u32))
        .collect();
    for (i, receiver) in receivers.into_iter().enumerate() {
        let events = drain(receiver).await;
        let indices: Vec<u32> = events.iter().map(|e| e.index).collect();
        assert_eq!(indices, (0..3 + i as u32).collect::<Vec<_>>());
        assert!(events.last().expect("some tokens").last);
    }
    h.metrics.with(|engines| {
        let success: u64 = engines.iter().map(|e| e.success.iter().sum::<u64>()).sum();
        let generated: u64 = engines.iter().map(|e| e.generation_tokens).sum();
        assert_eq!(success, 6);
        assert_eq!(generated, (3..9).sum::<u64>());
        assert_eq!(engines[0].success[1], 3);
        for e in engines.iter() {
            assert_eq!((e.running, e.waiting), (0, 0));
            assert_eq!(e.prompt_tokens, 60);
        }
    });
    h.shutdown.send(true).expect("engine listens");
    assert!(matches!(
        h.engine.await.expect("no panic"),
        EngineExit::Shutdown(_)
    ));
}

#[tokio::test]
async fn a_client_that_leaves_is_counted_as_aborted() {
    let h = start().await;
    let long = submit(&h, 1, 0, 100_000);
    drop(long);
    let short = submit(&h, 2, 0, 2);
    assert_eq!(drain(short).await.len(), 2);
    // The abort is noticed before the next step; give the loop a moment to take another turn.
    let _ = drain(submit(&h, 3, 0, 1)).await;
    h.metrics.with(|engines| {
        assert_eq!(engines[0].success[2], 1, "one abort");
        assert_eq!((engines[0].running, engines[0].waiting), (0, 0));
    });
}

#[tokio::test]
async fn a_frozen_engine_stops_stepping() {
    let h = start().await;
    h.frozen.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut receiver = submit(&h, 1, 1, 2);
    let waited = tokio::time::timeout(Duration::from_millis(200), receiver.recv()).await;
    assert!(waited.is_err(), "no token may arrive from a frozen engine");
    h.metrics.with(|engines| assert_eq!(engines[1].waiting, 1));
}

#[tokio::test]
async fn the_ffn_end_sees_one_message_per_step_and_the_engine_notices_it_leaving() {
    let h = start().await;
    let _ = drain(submit(&h, 1, 0, 5)).await;
    h.ffn_steps.abort();
    let exit = tokio::time::timeout(Duration::from_secs(5), h.engine)
        .await
        .expect("the engine ends when the FFN end goes")
        .expect("no panic");
    assert!(matches!(exit, EngineExit::FfnGone(_)));
}

#[tokio::test]
async fn at_a_time_scale_tokens_arrive_when_the_simulator_says() {
    const SCALE: f64 = 0.5;
    const OUTPUT: u32 = 24;
    // The simulator's own answer for the same request on an idle pair: when each token is out.
    let mut reference = dp2_source();
    reference
        .submit(TimedRequest {
            id: RequestId(1),
            engine: 1,
            prompt_tokens: 20,
            output_tokens: OUTPUT,
        })
        .expect("admitted");
    let mut predicted = Vec::new();
    while let Some(step) = reference.next_step(Duration::ZERO) {
        if step.emitted.contains(&RequestId(1)) {
            predicted.push((step.start + step.duration).mul_f64(SCALE));
        }
    }
    assert_eq!(predicted.len(), OUTPUT as usize);

    let h = start_scaled(SCALE).await;
    let sent = Instant::now();
    let mut receiver = submit(&h, 1, 1, OUTPUT);
    let mut arrived = Vec::new();
    while let Some(event) = receiver.recv().await {
        arrived.push(sent.elapsed());
        if event.last {
            break;
        }
    }
    assert_eq!(arrived.len(), predicted.len());
    for (i, (got, want)) in arrived.iter().zip(&predicted).enumerate() {
        // Never early: a token is out at its step's deadline, measured from the request's arrival.
        assert!(
            *got + Duration::from_micros(50) >= *want,
            "token {i} at {got:?}, before the simulator's {want:?}"
        );
    }
    let (got, want) = (arrived[arrived.len() - 1], predicted[predicted.len() - 1]);
    // Late only by the loop's own overhead, which open-loop timing does not accumulate.
    assert!(
        got <= want.mul_f64(1.25) + Duration::from_millis(30),
        "last token at {got:?}, the simulator says {want:?}"
    );
}
