//! `afd-twin`: a GPU-free stand-in for one role of an AFD pair, started with that role's `vllm serve`
//! command line (DESIGN §6).
//!
//! [`run`] is the whole life of one twin process: read and check the command line, bind the HTTP socket,
//! meet the peer twin on the AFD rendezvous port(s), log the rank mapping, then serve (Attention: the
//! OpenAI API with token timing from a [`timing::StepSource`]; FFN: steps driven by the Attention twin)
//! until a signal or the peer goes away. Logging goes through `tracing`; the binary picks the output.
//!
//! Its own crate, apart from the conformance suite that checks it: afd-conformance meets a twin only
//! over the wire, and never links this crate (`.ci/run`). The twin uses afd-conformance's load generator
//! for `afd-twin bench`, and afd-sim's deployment model, live engine and DP router for everything else.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::{Role, RuleSet, Topology};

pub mod attention;
pub mod engine;
pub mod faults;
pub mod ffn;
pub mod http;
pub mod launch;
pub mod metrics;
pub mod openai;
pub mod rank_log;
pub mod rendezvous;
pub mod text;
pub mod timing;

use crate::faults::{Fault, FaultSet};
use crate::ffn::FfnHttp;
use crate::launch::{LaunchError, LaunchedRole};
use crate::metrics::{Metrics, MetricsSkew};
use crate::rendezvous::{PeerConfig, RendezvousError, RendezvousOptions};
use crate::timing::StepSource as _;
use crate::timing::sim::{SimPricing, SimSource, SimSourceError, TimingInfo};

/// The plugin's world rendezvous timeout (afd-spec §2.3).
pub const DEFAULT_RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(120);
/// HTTP bind host when `--host` is absent (vLLM binds every interface; the twin stays on loopback).
pub const DEFAULT_HTTP_HOST: &str = "127.0.0.1";

/// Everything `afd-twin` was told.
#[derive(Clone, Debug)]
pub struct TwinOptions {
    /// The words after `vllm serve`.
    pub serve_args: Vec<String>,
    /// The environment the deployment model reads (see [`launch::relevant_env`]).
    pub env: std::collections::BTreeMap<String, String>,
    pub rules: RuleSet,
    /// Real seconds per simulated second (1 = real time; 0 = steps back to back).
    pub time_scale: f64,
    /// The GPU the simulated steps are priced on (`--gpu`).
    pub gpu: GpuKind,
    pub faults: FaultSet,
    pub rendezvous_timeout: Duration,
    pub ffn_http: FfnHttp,
    /// Price the pair from kernels alone (`--kernel-model`), not at real vLLM's host pace.
    pub kernel_model: bool,
}

/// Why a twin stopped with an error. [`TwinError::exit_code`] maps it to the process status.
#[derive(Debug, thiserror::Error)]
pub enum TwinError {
    #[error("invalid vllm serve command line: {0}")]
    Args(#[from] LaunchError),
    #[error("{0}")]
    Rendezvous(#[from] RendezvousError),
    #[error("cannot bind the HTTP socket {addr}: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    /// The simulator cannot serve the pair (a KV cache too small for max_model_len, or none at all).
    Unservable(String),
    #[error("{0}")]
    PeerGone(String),
}

impl TwinError {
    /// 2 for input the user must fix (flags, a mismatched pair, ports in use), 1 for a run that failed.
    pub fn exit_code(&self) -> i32 {
        match self {
            TwinError::Args(_) | TwinError::Bind { .. } | TwinError::Unservable(_) => 2,
            TwinError::Rendezvous(
                RendezvousError::Mismatch { .. } | RendezvousError::Busy { .. },
            ) => 2,
            TwinError::Rendezvous(_) | TwinError::PeerGone(_) => 1,
        }
    }
}

/// Runs one twin until `stop` resolves (a signal) or the pair comes apart.
pub async fn run(
    options: TwinOptions,
    stop: impl Future<Output = ()> + Send,
) -> Result<(), TwinError> {
    let config = LaunchedRole::new(&options.serve_args, options.env.clone(), options.rules)?;
    for finding in &config.findings {
        warn!("{finding}");
    }
    let topology = config.topology.clone();
    let role = config.role;
    for fault in options.faults.iter() {
        if fault.acts_on(role) {
            warn!("fault switch on: {fault} (breaks: {})", fault.info().breaks);
        } else {
            warn!(
                "fault switch {fault} acts on the {} role; it has no effect on this {role} twin",
                fault.info().role
            );
        }
    }
    let host = config
        .config
        .http_host()
        .unwrap_or(DEFAULT_HTTP_HOST)
        .to_owned();
    let port = config.config.http_port();
    let addr = http::resolve(&host, port)
        .await
        .map_err(|source| TwinError::Bind {
            addr: format!("{host}:{port}"),
            source,
        })?;
    // Bound before the rendezvous, as vLLM binds its API socket before building the engine (§6.4).
    let socket = http::bind_reuseport(addr).map_err(|source| TwinError::Bind {
        addr: addr.to_string(),
        source,
    })?;
    let local_addr = socket.local_addr().map_err(|source| TwinError::Bind {
        addr: addr.to_string(),
        source,
    })?;
    let local = PeerConfig::new(&config, local_addr.to_string());
    let rendezvous_options = RendezvousOptions {
        timeout: options.rendezvous_timeout,
        accept_mismatch: options.faults.has(Fault::RendezvousMismatchAccepted),
    };
    info!(
        "AFD {role} twin: rendezvous on {}:{} (rules {}, timeout {:.0} s)",
        config.afd_host,
        config.afd_port,
        options.rules,
        options.rendezvous_timeout.as_secs_f64()
    );
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    match role {
        Role::Attention => {
            let link = rendezvous::attention(&local, &topology, rendezvous_options).await?;
            log_mapping(&topology, &config, &options.faults);
            serve_attention(
                &options,
                &config,
                &topology,
                link,
                socket,
                local_addr,
                shutdown_tx,
                shutdown_rx,
                stop,
            )
            .await
        }
        Role::Ffn => {
            let mut link = rendezvous::ffn(&local, &topology, rendezvous_options).await?;
            log_mapping(&topology, &config, &options.faults);
            let plan = ffn::http_plan(
                options.ffn_http,
                &options.faults,
                local_addr,
                &link.peer.http_addr,
            );
            let _silent = ffn::start_http(
                socket,
                plan,
                config.model_name().to_owned(),
                config.seed,
                shutdown_rx.clone(),
            )
            .map_err(|source| TwinError::Bind {
                addr: local_addr.to_string(),
                source,
            })?;
            match plan {
                ffn::HttpPlan::Silent if local_addr.to_string() == link.peer.http_addr => info!(
                    "FFN HTTP socket {local_addr} is bound but not listening; it shares the Attention role's host:port, so every connection reaches Attention (afd-spec §6.4)"
                ),
                ffn::HttpPlan::Silent => info!(
                    "FFN HTTP socket {local_addr} is bound but not listening: connections are refused (afd-spec §6.4)"
                ),
                plan => info!("FFN HTTP socket {local_addr} is listening ({plan:?})"),
            }
            info!(
                "AFD FFN twin step loop started; paired with the attention twin (HTTP {})",
                link.peer.http_addr
            );
            let mut tally = ffn::StepTally::default();
            let end = tokio::select! {
                end = ffn::step_loop(&mut link, &topology, &options.faults, &mut tally, shutdown_rx) => end,
                () = stop => ffn::StepLoopEnd::Shutdown,
            };
            let _ = shutdown_tx.send(true);
            let summary = ffn::tally_json(&tally);
            match end {
                ffn::StepLoopEnd::Bye(reason) => {
                    info!("the attention twin shut down ({reason}); FFN steps: {summary}");
                    Ok(())
                }
                ffn::StepLoopEnd::Shutdown => {
                    info!("shutting down; FFN steps: {summary}");
                    Ok(())
                }
                ffn::StepLoopEnd::Abort(reason) => Err(TwinError::Unservable(format!(
                    "the attention twin refused to serve this pair: {reason}"
                ))),
                ffn::StepLoopEnd::Gone(err) => {
                    error!("{err}; FFN steps: {summary}");
                    Err(TwinError::PeerGone(err.to_string()))
                }
            }
        }
    }
}

fn log_mapping(topology: &Topology, config: &LaunchedRole, faults: &FaultSet) {
    let wrong = faults.has(Fault::WrongRankMappingLog);
    for line in rank_log::lines(topology, config.role, config.config.tp_size(), wrong) {
        info!("{line}");
    }
}

/// The simulated pair that times the Attention twin's steps: this twin's command line and its peer's,
/// priced by `pricing`. With `rendezvous-mismatch-accepted` a pair the simulator cannot model falls back
/// to this role paired with a copy of itself, so the pair still serves.
fn step_source(
    config: &LaunchedRole,
    peer: &PeerConfig,
    pricing: &SimPricing,
    faults: &FaultSet,
) -> Result<SimSource, SimSourceError> {
    match SimSource::for_pair(config, &peer.args, &peer.env, pricing) {
        Err(err) if faults.has(Fault::RendezvousMismatchAccepted) => {
            warn!("{err}; timing this attention twin as if its peer had its own shape");
            SimSource::for_pair(config, &config.args, &config.env, pricing)
        }
        result => result,
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "the pieces run() assembled, handed over once"
)]
async fn serve_attention(
    options: &TwinOptions,
    config: &LaunchedRole,
    topology: &Topology,
    link: rendezvous::AttentionLink,
    socket: tokio::net::TcpSocket,
    local_addr: SocketAddr,
    shutdown_tx: watch::Sender<bool>,
    shutdown_rx: watch::Receiver<bool>,
    stop: impl Future<Output = ()> + Send,
) -> Result<(), TwinError> {
    let mut pricing = SimPricing::new(&config.model, options.gpu);
    if options.kernel_model {
        pricing = pricing.kernels_only();
    }
    let source = match step_source(config, &link.peer, &pricing, &options.faults) {
        Ok(source) => source,
        Err(err) => {
            // The real pair would fail here too, after its rendezvous (vLLM sizes the KV cache then).
            error!("{err}");
            link.abort(&err.to_string()).await;
            return Err(TwinError::Unservable(err.to_string()));
        }
    };
    info!(
        "AFD attention twin: steps timed by afd-sim's model of this pair: {} ({}), priced by the {}, seed {}, max_model_len {}, {} KV tokens per engine",
        pricing.model.name,
        pricing.model_source,
        pricing.cost_source(),
        config.seed,
        source.max_model_len(),
        source.kv_tokens_per_engine()
    );
    let n_engines = source.n_engines();
    let skew = MetricsSkew {
        extra_engine: options.faults.has(Fault::WrongEngineLabels),
        double_success: options.faults.has(Fault::MetricsNotConserved),
    };
    let timing = TimingInfo {
        model: pricing.model.name.clone(),
        gpu: pricing.gpu,
        seed: config.seed,
        time_scale: options.time_scale,
        kernel_model: options.kernel_model,
    };
    let metrics = Arc::new(Metrics::new(config.model_name(), n_engines, skew).with_timing(timing));
    let max_model_len = source.max_model_len();
    let (submissions_tx, submissions_rx) = mpsc::unbounded_channel();
    let frozen = Arc::new(AtomicBool::new(false));
    let mut attention_state = attention::AttentionState::new(
        config.model_names.clone(),
        config.model.clone(),
        max_model_len,
        metrics.clone(),
        submissions_tx,
        options.faults.clone(),
        config.seed,
        frozen.clone(),
    );
    attention_state.request_id_headers = config
        .config
        .unknown_flags
        .iter()
        .any(|flag| flag.flag == "--enable-request-id-headers");
    let state = Arc::new(attention_state);
    let engine_options = engine::EngineOptions {
        time_scale: options.time_scale,
        frozen,
    };
    let engine_task = tokio::spawn(engine::run(
        Box::new(source),
        link,
        metrics,
        submissions_rx,
        shutdown_rx.clone(),
        engine_options,
    ));
    let listener = socket.listen(4096).map_err(|source| TwinError::Bind {
        addr: local_addr.to_string(),
        source,
    })?;
    let server = tokio::spawn(http::serve(
        listener,
        attention::router(state.clone()),
        options.faults.has(Fault::DuplicateResponse),
        shutdown_rx,
    ));
    info!(
        "AFD attention twin: {} ranks as DP {} x TP {}, {n_engines} DP engine(s), FFN {} ranks; time scale {}",
        topology.attention_ranks(),
        config.config.dp_size(),
        config.config.tp_size(),
        topology.ffn_ranks(),
        options.time_scale
    );
    info!("Starting vLLM API server 0 on http://{local_addr}");
    info!("Application startup complete.");
    tokio::pin!(engine_task);
    let exit = tokio::select! {
        () = stop => {
            info!("Shutting down");
            let _ = shutdown_tx.send(true);
            engine_task.await
        }
        exit = &mut engine_task => exit,
    };
    let _ = shutdown_tx.send(true);
    server.abort();
    match exit {
        Ok(engine::EngineExit::Shutdown(link)) => {
            (*link).bye("attention twin shut down").await;
            Ok(())
        }
        Ok(engine::EngineExit::FfnGone(err)) => {
            state.engine_alive.store(false, Ordering::Relaxed);
            error!("{err}: the engine is dead (afd-spec §6.5); shutting down");
            Err(TwinError::PeerGone(err.to_string()))
        }
        Err(join) => Err(TwinError::PeerGone(format!("engine loop failed: {join}"))),
    }
}
