//! A scheduling-only source for `--time-scale 0`: vLLM V1's continuous batching per DP engine
//! (`max_num_seqs`, `max_num_batched_tokens`, decode first, then chunked prefill) with zero-length
//! steps. It decides the order tokens come out in and nothing about time, which is why the twin uses it
//! only when time is scaled to zero.
//!
//! TODO(#3): retire this once the simulator's live engine schedules at every time scale.

use std::collections::VecDeque;
use std::time::Duration;

use crate::twin::timing::{RequestId, StepOutcome, StepSource, TimedRequest};

#[derive(Clone, Debug)]
struct Sequence {
    id: RequestId,
    prompt_left: u32,
    output_left: u32,
}

#[derive(Clone, Debug, Default)]
struct EngineQueue {
    running: Vec<Sequence>,
    waiting: VecDeque<Sequence>,
}

/// Continuous batching without a clock.
#[derive(Clone, Debug)]
pub struct ScheduleOnly {
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
    engines: Vec<EngineQueue>,
}

impl ScheduleOnly {
    pub fn new(n_engines: u32, max_num_seqs: u32, max_num_batched_tokens: u32) -> ScheduleOnly {
        ScheduleOnly {
            max_num_seqs: max_num_seqs.max(1),
            max_num_batched_tokens: max_num_batched_tokens.max(1),
            engines: (0..n_engines.max(1))
                .map(|_| EngineQueue::default())
                .collect(),
        }
    }
}

impl StepSource for ScheduleOnly {
    fn n_engines(&self) -> u32 {
        u32::try_from(self.engines.len()).expect("built from a u32 count")
    }

    fn submit(&mut self, request: TimedRequest) {
        self.engines[request.engine as usize]
            .waiting
            .push_back(Sequence {
                id: request.id,
                prompt_left: request.prompt_tokens.max(1),
                output_left: request.output_tokens.max(1),
            });
    }

    fn abort(&mut self, id: RequestId) {
        for engine in &mut self.engines {
            engine.running.retain(|s| s.id != id);
            engine.waiting.retain(|s| s.id != id);
        }
    }

    fn next_step(&mut self) -> Option<StepOutcome> {
        if self
            .engines
            .iter()
            .all(|e| e.running.is_empty() && e.waiting.is_empty())
        {
            return None;
        }
        let mut outcome = StepOutcome {
            duration: Duration::ZERO,
            stages: 1,
            ..StepOutcome::default()
        };
        for engine in &mut self.engines {
            while engine.running.len() < self.max_num_seqs as usize {
                match engine.waiting.pop_front() {
                    Some(seq) => engine.running.push(seq),
                    None => break,
                }
            }
            let mut budget = self.max_num_batched_tokens;
            let mut tokens = 0;
            // Decodes first, then prefill chunks, as vLLM V1's scheduler orders them.
            let (decoding, prefilling): (Vec<usize>, Vec<usize>) =
                (0..engine.running.len()).partition(|&i| engine.running[i].prompt_left == 0);
            for i in decoding.into_iter().chain(prefilling) {
                if budget == 0 {
                    break;
                }
                let seq = &mut engine.running[i];
                outcome.scheduled.push(seq.id);
                if seq.prompt_left > 0 {
                    let chunk = seq.prompt_left.min(budget);
                    seq.prompt_left -= chunk;
                    budget -= chunk;
                    tokens += chunk;
                    if seq.prompt_left > 0 {
                        continue;
                    }
                } else {
                    budget -= 1;
                    tokens += 1;
                }
                // A finished prefill samples the first token in the same step, like vLLM.
                outcome.emitted.push(seq.id);
                seq.output_left -= 1;
            }
            engine.running.retain(|s| s.output_left > 0);
            outcome.tokens_per_engine.push(tokens);
        }
        Some(outcome)
    }
}
