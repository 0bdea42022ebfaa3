//! The product [`StepSource`]: the simulator's live engine (`afd_sim::live::LiveEngine`), the same
//! `cluster.rs` model `afd-sim predict` runs, stepped by the twin's engine loop in real time.
//!
//! The adapter keeps the twin in charge of routing: every request is submitted pinned to the engine the
//! twin's router (and its routing faults) chose, so the simulator's own DP balancer never runs. It maps
//! the twin's request ids to the simulator's and back, and converts between the twin's `Duration`s and
//! `SimTime`. [`SimPricing`] picks what the steps are priced with: the model behind the served path and
//! the GPU, by the same defaults as `afd-sim predict`; the simulated pair is the deployment's
//! `ServingConfig` on that GPU, and [`TimingInfo`] the `/metrics` series through which the twin tells a
//! client how it times tokens (the conformance suite's `timing.simulator` check reads it and asks
//! `afd-sim` for the same prediction). Nothing here sleeps or reads a clock.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use afd_sim::deployment::{Deployment, RoleConfig};
use afd_sim::launch::Launch;
use afd_sim::live::{
    ClusterError, LiveEngine, LiveRequest, ModelOptions, RequestId as SimRequestId,
};
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::CostModel;
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::profiles::{ProfileError, builtin, default_cost_model};
use afd_sim::rng::Seed;
use afd_sim::serving::{ServingConfig, ServingConfigError};
use afd_sim::time::SimTime;
use afd_sim::topology::Role;
use afd_traces::input::InputKind;
use afd_traces::model_config::ModelConfig;

use crate::launch::LaunchedRole;
use crate::metrics::escape_label;
use crate::timing::{Rejection, RequestId, StepOutcome, StepSource, TimedRequest};

/// The model `afd-sim predict` prices by default, used when the served model is not recognised.
pub const DEFAULT_MODEL: &str = "deepseek-v2-lite";

/// What the simulated pair is priced with.
#[derive(Clone, Debug, PartialEq)]
pub struct SimPricing {
    pub model: ModelArch,
    /// How `model` was chosen, for the start-up log.
    pub model_source: ModelSource,
    pub gpu: GpuKind,
    /// Real vLLM's engine, where the GPU's built-in engine profile measured the model: the pair's
    /// steps without graphs are issued at its host pace, as `afd-sim predict` prices a pair.
    pub engine: Option<std::sync::Arc<afd_sim::model::engine::EngineModel>>,
}

/// Where the priced model came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// `<model>/config.json`.
    ConfigFile(String),
    /// A config shipped with afd-traces, matched by the model path's last component.
    Shipped(String),
    /// Neither: [`DEFAULT_MODEL`], with the reason.
    Default(String),
}

impl std::fmt::Display for ModelSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSource::ConfigFile(path) => write!(f, "from {path}"),
            ModelSource::Shipped(name) => write!(f, "the shipped config of {name}"),
            ModelSource::Default(why) => {
                write!(
                    f,
                    "the shipped config of {DEFAULT_MODEL}, the default ({why})"
                )
            }
        }
    }
}

impl SimPricing {
    /// Prices `model` (the served path or name) on `gpu`: the architecture in `<model>/config.json` when
    /// it is one the simulator models, else the shipped config whose name is the path's last component
    /// (`/models/DeepSeek-V2-Lite` → `deepseek-v2-lite`), else [`DEFAULT_MODEL`]. Costs are the GPU's
    /// built-in calibration profile, else its datasheet roofline, with each role's issue of a step
    /// without graphs at real vLLM's host pace where the GPU's built-in engine profile measured the
    /// model, as `afd-sim predict` prices by default.
    pub fn new(model: &str, gpu: GpuKind) -> SimPricing {
        let (model, model_source) = resolve_model(model);
        let engine = afd_sim::vllm_compare::builtin_engine(&model, gpu);
        SimPricing {
            model,
            model_source,
            gpu,
            engine,
        }
    }

    /// The same pricing without real vLLM's host pace: the pair's steps priced from kernels alone,
    /// as `afd-sim predict --kernel-model` prices them (`afd-twin --kernel-model`).
    pub fn kernels_only(self) -> SimPricing {
        SimPricing {
            engine: None,
            ..self
        }
    }

    /// The cost model for a configuration's layout: the GPU's built-in calibration profile where one
    /// exists, else its datasheet roofline, and the engine's host pace
    /// (`vllm_compare::pair_at_vllm_pace`), exactly as `afd-sim predict` prices a pair without flags.
    pub fn cost(&self, config: &ServingConfig) -> Result<CostModel, ProfileError> {
        let cost = default_cost_model(&self.model, self.gpu, config.cost_layout())?;
        Ok(afd_sim::vllm_compare::pair_at_vllm_pace(
            cost,
            config,
            self.engine.as_ref(),
        ))
    }

    /// What [`SimPricing::cost`] prices with, for the start-up log: the built-in profile's name and
    /// provenance, or `<gpu> roofline`, and real vLLM's host pace where the engine profile prices
    /// the model, with how a plain step's issue is divided between the roles.
    pub fn cost_source(&self) -> String {
        let kernels = match builtin(self.gpu) {
            Ok(Some(loaded)) => loaded.name,
            _ => format!("{} roofline", self.gpu.as_str()),
        };
        match &self.engine {
            Some(engine) => format!(
                "{kernels}, steps without graphs at real vLLM {}'s host pace (built-in {} engine profile), each role issuing its part of a plain step {}",
                engine.profile().vllm_version,
                engine.profile().gpu,
                afd_sim::model::engine::division_words(engine.profile())
            ),
            None => kernels,
        }
    }
}

fn resolve_model(model: &str) -> (ModelArch, ModelSource) {
    let path = Path::new(model);
    let config_path = path.join("config.json");
    let mut why = "no config.json and no shipped config of that name".to_owned();
    if let Ok(text) = afd_traces::input::read_text(&config_path, InputKind::MODEL_CONFIG) {
        match ModelConfig::from_json(&text) {
            Ok(config) => {
                let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(model);
                return (
                    ModelArch::from_config(name, config),
                    ModelSource::ConfigFile(config_path.display().to_string()),
                );
            }
            Err(err) => why = format!("{}: {err}", config_path.display()),
        }
    }
    // Named as `afd-sim predict --model NAME` names it, which is how calibration tables match it.
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(model)
        .to_ascii_lowercase();
    if let Some(Ok(arch)) = ModelArch::builtin(&name) {
        return (arch, ModelSource::Shipped(name));
    }
    (
        ModelArch::builtin(DEFAULT_MODEL)
            .expect("the default model is shipped")
            .expect("the shipped config is valid"),
        ModelSource::Default(why),
    )
}

/// The `/metrics` series carrying [`TimingInfo`] (not a vLLM metric): the name afd-conformance reads
/// it by, so the two cannot drift apart.
pub const TIMING_INFO_METRIC: &str = afd_conformance::checks::simulator::TWIN_TIMING_METRIC;

/// How the Attention twin times tokens: what `afd-sim` needs, besides the deployment, to predict the
/// latencies a client of this twin measures.
#[derive(Clone, Debug, PartialEq)]
pub struct TimingInfo {
    /// The priced model's name ([`SimPricing::model`]).
    pub model: String,
    pub gpu: GpuKind,
    /// The live engine's seed (`--seed` of the serve words).
    pub seed: u64,
    /// Real seconds per simulated second (`--time-scale`).
    pub time_scale: f64,
    /// The pair priced from kernels alone (`--kernel-model`), not at real vLLM's host pace: the
    /// series' `pricing` label, `kernel-model` or `vllm-host-pace`.
    pub kernel_model: bool,
}

impl TimingInfo {
    /// An info-style gauge (value 1, the facts in labels), in the text exposition format.
    pub fn render(&self) -> String {
        let name = TIMING_INFO_METRIC;
        format!(
            "# HELP {name} How afd-twin times tokens: afd-sim's model of the pair, priced as model on gpu (from kernels alone or at real vLLM's host pace, as pricing says) and seeded with seed, at time_scale real seconds per simulated second.\n\
             # TYPE {name} gauge\n\
             {name}{{gpu=\"{}\",model=\"{}\",pricing=\"{}\",seed=\"{}\",time_scale=\"{}\"}} 1.0\n",
            self.gpu.as_str(),
            escape_label(&self.model),
            if self.kernel_model {
                afd_conformance::checks::simulator::PRICING_KERNEL_MODEL
            } else {
                afd_conformance::checks::simulator::PRICING_VLLM_HOST_PACE
            },
            self.seed,
            self.time_scale
        )
    }
}

/// Why the simulated pair cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SimSourceError {
    #[error("the peer's vllm serve words: {0}")]
    PeerArgs(String),
    #[error("the simulator cannot model this pair: {0}")]
    Serving(#[from] ServingConfigError),
    #[error("the simulator cannot model this pair: {0}")]
    Cluster(#[from] ClusterError),
    #[error("the simulator cannot price this pair: {0}")]
    Pricing(#[from] ProfileError),
}

/// The live engine behind a twin, with the id maps.
#[derive(Debug)]
pub struct SimSource {
    engine: LiveEngine,
    /// Requests the engine holds, both ways. Invariant: the two maps are inverse.
    sim_of: BTreeMap<RequestId, SimRequestId>,
    twin_of: BTreeMap<SimRequestId, RequestId>,
}

impl SimSource {
    /// The simulated pair for this twin and its peer (`peer_args`/`peer_env`: the peer's `vllm serve`
    /// words as exchanged at the rendezvous), seeded with the twin's `--seed`. `max_model_len` is the
    /// context length the twin enforces (`--max-model-len`, else the priced model's); like vLLM, a pair
    /// whose KV cache cannot hold one request that long is refused.
    pub fn for_pair(
        local: &LaunchedRole,
        peer_args: &[String],
        peer_env: &BTreeMap<String, String>,
        pricing: &SimPricing,
    ) -> Result<SimSource, SimSourceError> {
        let peer = RoleConfig::from_serve_args_with_env(peer_args, peer_env).map_err(|err| {
            SimSourceError::PeerArgs(
                err.errors
                    .iter()
                    .map(|e| format!("{}: {}", e.location.render("args"), e.message))
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        let (attention, ffn) = match local.role {
            Role::Attention => (local.config.clone(), peer),
            Role::Ffn => (peer, local.config.clone()),
        };
        // The launch's timing view: `--max-model-len auto` fitted to the KV cache as vLLM does.
        let config = Launch::Afd(Deployment::new(attention, ffn, local.rules))
            .serving_config(pricing.gpu, &pricing.model)?;
        let engine = LiveEngine::new(
            &config,
            pricing.cost(&config)?,
            ModelOptions::default(),
            Seed(local.seed),
        )?;
        // The engine refuses, as vLLM does, a KV cache that cannot hold one request of
        // max_model_len tokens (the simulator's `memory.max-model-len-fits`).
        Ok(SimSource::new(engine))
    }

    pub fn new(engine: LiveEngine) -> SimSource {
        SimSource {
            engine,
            sim_of: BTreeMap::new(),
            twin_of: BTreeMap::new(),
        }
    }

    /// The longest request (prompt plus output) the engine accepts.
    pub fn max_model_len(&self) -> u32 {
        self.engine.max_model_len()
    }

    pub fn kv_tokens_per_engine(&self) -> u64 {
        self.engine.kv_tokens_per_engine()
    }

    fn forget(&mut self, sim: SimRequestId) -> Option<RequestId> {
        let twin = self.twin_of.remove(&sim)?;
        self.sim_of.remove(&twin);
        Some(twin)
    }
}

impl StepSource for SimSource {
    fn n_engines(&self) -> u32 {
        self.engine.engines()
    }

    fn submit(&mut self, request: TimedRequest) -> Result<(), Rejection> {
        let sim = self.engine.submit(LiveRequest {
            input_tokens: request.prompt_tokens.max(1),
            output_tokens: request.output_tokens.max(1),
            // Pinned: the twin's router (and its faults) decided the engine.
            data_parallel_rank: Some(request.engine),
        })?;
        self.sim_of.insert(request.id, sim);
        self.twin_of.insert(sim, request.id);
        Ok(())
    }

    fn abort(&mut self, id: RequestId) {
        if let Some(sim) = self.sim_of.get(&id).copied() {
            self.engine.abort(sim);
            self.forget(sim);
        }
    }

    fn next_step(&mut self, now: Duration) -> Option<StepOutcome> {
        let now = SimTime::from_ns(u64::try_from(now.as_nanos()).unwrap_or(u64::MAX));
        let step = self.engine.next_step(now)?;
        let twin = |ids: &mut dyn Iterator<Item = SimRequestId>| -> Vec<RequestId> {
            ids.filter_map(|sim| self.twin_of.get(&sim).copied())
                .collect()
        };
        let scheduled = twin(&mut step.scheduled.iter().copied());
        let preempted = twin(&mut step.preempted.iter().copied());
        let emitted = twin(&mut step.tokens.iter().map(|t| t.request));
        for &sim in &step.finished {
            self.forget(sim);
        }
        Some(StepOutcome {
            start: Duration::from_nanos(step.start.as_ns()),
            duration: Duration::from_nanos(step.duration.as_ns()),
            scheduled,
            emitted,
            preempted,
            tokens_per_engine: step.tokens_per_engine,
            stages: step.stages,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
