//! The Attention twin's engine loop: one task that owns the [`StepSource`], runs its steps in real time,
//! drives the FFN twin with one message per step, and hands each generated token to the request's HTTP
//! handler.
//!
//! Time is open-loop: simulated time `t` happens at `epoch + t · --time-scale` ([`SimClock`]). A step that
//! follows another back to back starts where the previous one ended in simulated time, so step k of a
//! busy period ends at `start + Σ durations · scale` however long the loop itself took; a step that finds
//! the pair idle starts at the simulated time its earliest request arrived at the HTTP handler. A step
//! ends at its deadline or when the FFN twin acknowledges it, whichever is later.
//!
//! Statistics (`/metrics`) are updated here, under one lock per step, before a request's last token is
//! delivered, so a client that has its full response always finds it counted. The loop never generates
//! text; handlers do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::error;

use crate::metrics::Metrics;
use crate::openai::FinishReason;
use crate::rendezvous::{AttentionLink, LinkError, StepMessage};
use crate::timing::{RequestId, SimClock, StepOutcome, StepSource, TimedRequest};

/// A request as a handler hands it to the engine.
#[derive(Debug)]
pub struct Submission {
    pub request: TimedRequest,
    /// How the request ends once it has `output_tokens` tokens.
    pub finish: FinishReason,
    pub arrived: Instant,
    pub events: mpsc::UnboundedSender<TokenEvent>,
}

/// What a handler receives: one event per generated token, the last one marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenEvent {
    /// 0-based index of the token in the output.
    pub index: u32,
    pub last: bool,
}

/// Why the loop ended.
#[derive(Debug)]
pub enum EngineExit {
    /// Shutdown was asked for; the link is handed back so the FFN twin can be told.
    Shutdown(Box<AttentionLink>),
    /// The FFN twin went away (afd-spec §6.5: the real pair would hang or fail in NCCL).
    FfnGone(LinkError),
}

#[derive(Debug)]
struct Live {
    engine: u32,
    events: mpsc::UnboundedSender<TokenEvent>,
    output_tokens: u32,
    prompt_tokens: u32,
    generated: u32,
    finish: FinishReason,
    arrived: Instant,
    running: bool,
    scheduled_before: bool,
    last_token: Instant,
}

/// Knobs of the loop.
#[derive(Clone, Debug)]
pub struct EngineOptions {
    /// Real seconds per simulated second; 0 runs steps back to back.
    pub time_scale: f64,
    /// Set by the `hang-after-n-requests` fault: once true, no further step runs.
    pub frozen: Arc<AtomicBool>,
}

/// When the next step may start, in the loop's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ready {
    /// The source had no work at its last turn and nothing has arrived since.
    Idle,
    /// The source was idle; the earliest request since arrived at this instant.
    Since(Instant),
    /// The last step left work behind: the next one follows it back to back.
    Busy,
}

/// Runs until `shutdown` turns true or the FFN twin goes away.
pub async fn run(
    mut source: Box<dyn StepSource>,
    mut link: AttentionLink,
    metrics: Arc<Metrics>,
    mut submissions: mpsc::UnboundedReceiver<Submission>,
    mut shutdown: watch::Receiver<bool>,
    options: EngineOptions,
) -> EngineExit {
    let mut live: BTreeMap<RequestId, Live> = BTreeMap::new();
    let mut step_no: u64 = 0;
    let clock = SimClock::new(Instant::now(), options.time_scale);
    let mut ready = Ready::Idle;
    loop {
        if *shutdown.borrow() {
            return EngineExit::Shutdown(Box::new(link));
        }
        while let Ok(submission) = submissions.try_recv() {
            accept(&mut source, &mut live, &metrics, &mut ready, submission);
        }
        drop_abandoned(&mut source, &mut live, &metrics);
        let step = if options.frozen.load(Ordering::Relaxed) {
            None
        } else {
            let now = match ready {
                Ready::Busy => Duration::ZERO,
                Ready::Since(arrived) => clock.simulated(arrived),
                Ready::Idle => clock.simulated(Instant::now()),
            };
            source.next_step(now)
        };
        let Some(step) = step else {
            ready = Ready::Idle;
            tokio::select! {
                submission = submissions.recv() => match submission {
                    Some(submission) => accept(&mut source, &mut live, &metrics, &mut ready, submission),
                    None => return EngineExit::Shutdown(Box::new(link)),
                },
                _ = shutdown.changed() => {}
                err = link.closed() => return EngineExit::FfnGone(err),
            }
            continue;
        };
        let started = Instant::now();
        let deadline = clock.real(step.start + step.duration);
        let message = StepMessage {
            step: step_no,
            stages: step.stages,
            tokens: step.tokens_per_engine.clone(),
            duration: deadline.saturating_duration_since(started),
        };
        if let Err(err) = link.send_step(&message).await {
            return EngineExit::FfnGone(err);
        }
        let acked = async {
            let ack = link.await_ack(step_no).await;
            (ack, Instant::now())
        };
        let (_, (ack, acked_at)) = tokio::join!(sleep_until_precisely(deadline), acked);
        if let Err(err) = ack {
            return EngineExit::FfnGone(err);
        }
        step_no += 1;
        ready = Ready::Busy;
        // The step ends at its deadline (not when the timer fired, so timer slack is not charged to the
        // tokens), or when a late FFN answered.
        apply(
            &mut source,
            &mut live,
            &metrics,
            &step,
            started,
            deadline.max(acked_at),
        );
    }
}

/// Sleeps until `deadline`, waking within tens of microseconds of it rather than the millisecond of
/// tokio's timer wheel, whose rounding would smear every inter-token gap by up to a millisecond: the last
/// stretch is slept on a blocking-pool thread (`nanosleep`).
async fn sleep_until_precisely(deadline: Instant) {
    if let Some(coarse) = deadline.checked_sub(TIMER_TICK * 2) {
        tokio::time::sleep_until(coarse).await;
    }
    let rest = deadline.saturating_duration_since(Instant::now());
    if !rest.is_zero() {
        // A blocking-pool thread that panicked would only make this wake early; there is nothing to do.
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest)).await;
    }
}

/// tokio's timer resolution.
const TIMER_TICK: Duration = Duration::from_millis(1);

fn accept(
    source: &mut Box<dyn StepSource>,
    live: &mut BTreeMap<RequestId, Live>,
    metrics: &Metrics,
    ready: &mut Ready,
    submission: Submission,
) {
    let request = submission.request;
    if let Err(rejection) = source.submit(request) {
        // The handler checked the context length against the source's, so this is a bug; the handler
        // sees its token channel close and answers with vLLM's engine error.
        error!(
            "the step source refused request {} on engine {}: {rejection}",
            request.id.0, request.engine
        );
        metrics.with(|engines| {
            let e = &mut engines[request.engine as usize];
            e.waiting = e.waiting.saturating_sub(1);
        });
        return;
    }
    *ready = match *ready {
        Ready::Busy => Ready::Busy,
        Ready::Idle => Ready::Since(submission.arrived),
        Ready::Since(earliest) => Ready::Since(earliest.min(submission.arrived)),
    };
    live.insert(
        request.id,
        Live {
            engine: request.engine,
            events: submission.events,
            output_tokens: request.output_tokens,
            prompt_tokens: request.prompt_tokens,
            generated: 0,
            finish: submission.finish,
            arrived: submission.arrived,
            running: false,
            scheduled_before: false,
            last_token: submission.arrived,
        },
    );
}

/// Aborts requests whose client has gone (its handler dropped the receiver), as vLLM does on disconnect.
fn drop_abandoned(
    source: &mut Box<dyn StepSource>,
    live: &mut BTreeMap<RequestId, Live>,
    metrics: &Metrics,
) {
    let gone: Vec<RequestId> = live
        .iter()
        .filter(|(_, l)| l.events.is_closed())
        .map(|(id, _)| *id)
        .collect();
    if gone.is_empty() {
        return;
    }
    for id in &gone {
        source.abort(*id);
    }
    let removed: Vec<Live> = gone.iter().filter_map(|id| live.remove(id)).collect();
    metrics.with(|engines| {
        for l in &removed {
            let e = &mut engines[l.engine as usize];
            if l.running {
                e.running = e.running.saturating_sub(1);
            } else {
                e.waiting = e.waiting.saturating_sub(1);
            }
        }
    });
    for l in removed {
        metrics.record_finished(l.engine, FinishReason::Abort);
    }
}

/// Applies one step's outcome: state changes and statistics first, then token delivery.
fn apply(
    source: &mut Box<dyn StepSource>,
    live: &mut BTreeMap<RequestId, Live>,
    metrics: &Metrics,
    step: &StepOutcome,
    started: Instant,
    now: Instant,
) {
    let mut deliveries: Vec<(mpsc::UnboundedSender<TokenEvent>, TokenEvent)> = Vec::new();
    let mut finished: Vec<(u32, FinishReason)> = Vec::new();
    metrics.with(|engines| {
        for id in &step.scheduled {
            if let Some(l) = live.get_mut(id)
                && !l.running
            {
                l.running = true;
                let e = &mut engines[l.engine as usize];
                e.waiting = e.waiting.saturating_sub(1);
                e.running += 1;
                // A preempted request is scheduled again later; vLLM counts its prompt and queue time once.
                if !l.scheduled_before {
                    l.scheduled_before = true;
                    e.prompt_tokens += u64::from(l.prompt_tokens);
                    e.queue
                        .observe(started.saturating_duration_since(l.arrived).as_secs_f64());
                }
            }
        }
        for id in &step.preempted {
            if let Some(l) = live.get_mut(id)
                && l.running
            {
                l.running = false;
                let e = &mut engines[l.engine as usize];
                e.running = e.running.saturating_sub(1);
                e.waiting += 1;
                e.preemptions += 1;
            }
        }
        for id in &step.emitted {
            let Some(l) = live.get_mut(id) else {
                continue;
            };
            let e = &mut engines[l.engine as usize];
            if l.generated == 0 {
                e.ttft.observe((now - l.arrived).as_secs_f64());
            } else {
                e.itl.observe((now - l.last_token).as_secs_f64());
            }
            e.generation_tokens += 1;
            l.last_token = now;
            let index = l.generated;
            l.generated += 1;
            let last = l.generated >= l.output_tokens;
            if last {
                e.e2e.observe((now - l.arrived).as_secs_f64());
                if l.running {
                    e.running = e.running.saturating_sub(1);
                } else {
                    e.waiting = e.waiting.saturating_sub(1);
                }
                finished.push((l.engine, l.finish));
            }
            deliveries.push((l.events.clone(), TokenEvent { index, last }));
        }
    });
    for (engine, reason) in finished {
        metrics.record_finished(engine, reason);
    }
    for (events, event) in deliveries {
        // A closed receiver means the client left; the request is aborted before the next step.
        let _ = events.send(event);
    }
    live.retain(|id, l| {
        let done = l.generated >= l.output_tokens;
        if done {
            source.abort(*id);
        }
        !done
    });
}

#[cfg(test)]
mod tests;
