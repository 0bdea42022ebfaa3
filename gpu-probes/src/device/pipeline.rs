//! `pipeline`: real AFD steps on two GPUs. Rank 0 is the Attention rank, rank 1 the FFN rank; per
//! step the Attention rank sends the control message (8-byte size, then the JSON payload; afd-spec
//! §3.4), then for every layer runs its Attention work, sends `rows × hidden` bf16 to the FFN rank and
//! receives the FFN result (afd-spec §3.6, with the two-ubatch DBO issue order on one stream when
//! enabled). The FFN rank receives, runs the dense MLP (layer 0) or the MoE layer, and sends back,
//! ubatch 0 then 1 per layer, then synchronises (afd-spec §6.2). Eager, or the whole step (control
//! message excluded) captured as one CUDA graph per side. Step time: CUDA events on the Attention stream
//! from before the control message to after the last receive.

use std::sync::Arc;
use std::time::Duration;

use afd_traces::pipeline::PipelineRecord;

use super::attention::{Attn, AttnWeights, AttnWorkspace, KV_ROW_BYTES, KvView, select_variant};
use super::blas::Blas;
use super::expert_gemm::ExpertGemms;
use super::gpu::{
    EventPairs, Gpu, Graph, Stream, download_async, download_raw, upload_async, zero_async,
};
use super::kernels::Kernels;
use super::moe::{DevicePlan, Ffn, FfnWeights, FfnWorkspace};
use super::nccl::{Comm, Dtype};
use super::ranks::{RankSetup, run_ranks};
use crate::error::ProbeError;
use crate::gemm_choice::PathSet;
use crate::pipeline_plan::{
    Config, checksum, configs, control_payload, parse_control_payload, routing_plans,
    routing_record,
};
use crate::shapes::MlaSplit;
use crate::spec::PipelineSpec;

const BF16: usize = 2;
const CONTROL_MAX_BYTES: usize = 4096;
const ATTENTION: usize = 0;
const FFN: usize = 1;

/// What rank 0 hands back: one record per configuration and the notes of the run.
pub struct PipelineOutcome {
    pub records: Vec<PipelineRecord>,
    pub mla_kernel: String,
    pub worst_ffn_check: f64,
    /// How the FFN rank ran its routed-expert GEMMs (path choices per stage shape).
    pub expert_gemm: String,
}

pub(super) type Progress = Arc<dyn Fn(&str) + Send + Sync>;

pub(super) fn run(
    spec: &PipelineSpec,
    progress: Progress,
) -> Result<Option<PipelineOutcome>, ProbeError> {
    if spec.layout.world_size() != 2 {
        return Err(ProbeError::setting(
            "ranks",
            format!(
                "the pipeline runs on exactly 2 ranks (Attention, FFN), got {}",
                spec.layout.world_size()
            ),
        ));
    }
    let body_spec = spec.clone();
    let blobs = run_ranks(&spec.layout, move |setup| match setup.rank {
        ATTENTION => attention_rank(&body_spec, &setup, &progress),
        _ => ffn_rank(&body_spec, &setup),
    })?;
    let Some(blobs) = blobs else {
        return Ok(None);
    };
    let (records, attention_hashes, mla_kernel): (Vec<PipelineRecord>, Vec<u32>, String) =
        serde_json::from_slice(&blobs[ATTENTION]).map_err(|err| ProbeError::Rank {
            rank: ATTENTION,
            message: format!("sent unreadable results: {err}"),
        })?;
    let (ffn_hashes, ffn_errors, expert_gemm): (Vec<u32>, Vec<f64>, String) =
        serde_json::from_slice(&blobs[FFN]).map_err(|err| ProbeError::Rank {
            rank: FFN,
            message: format!("sent unreadable results: {err}"),
        })?;
    for (i, record) in records.iter().enumerate() {
        if attention_hashes.get(i) != ffn_hashes.get(i) {
            return Err(ProbeError::DataCheck {
                what: format!(
                    "pipeline T={} context={} dbo={} graph={}",
                    record.tokens, record.context, record.dbo, record.graph
                ),
                detail: "the last FFN result the Attention rank received differs from what the FFN rank sent".to_owned(),
            });
        }
    }
    Ok(Some(PipelineOutcome {
        records,
        mla_kernel,
        worst_ffn_check: ffn_errors.iter().copied().fold(0.0, f64::max),
        expert_gemm,
    }))
}

struct Channel<'a> {
    comm: &'a Comm,
    stream: &'a Stream,
    rank: usize,
    timeout: Duration,
}

impl Channel<'_> {
    fn wait(&self, what: &str) -> Result<(), ProbeError> {
        self.stream.sync_or_timeout(
            self.timeout,
            what,
            self.rank,
            || self.comm.async_error(),
            || self.comm.abort(),
        )
    }
}

fn attention_rank(
    spec: &PipelineSpec,
    setup: &RankSetup,
    progress: &Progress,
) -> Result<Vec<u8>, ProbeError> {
    let shape = &spec.model;
    let mla = shape.require_mla()?;
    let gpu = Gpu::open(setup.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let blas = Blas::new(&gpu, &stream)?;
    let weights = AttnWeights::new(&gpu, &kernels, &stream, shape, &mla, 0xa77e)?;
    let (variant, _) = select_variant(&gpu, &kernels, &blas, &stream, shape, &mla, &weights)?;
    let comm = Comm::init(&setup.id, setup.rank, setup.world)?;
    let all = configs(
        &spec.tokens,
        &spec.contexts,
        &spec.dbo_modes,
        &spec.graph_modes,
    );
    let h = shape.hidden_size;
    let n_layers = shape.num_layers;
    let target_blocks = 6 * gpu.sm_count;
    let tokens_cap = all.iter().map(|c| c.tokens).max().unwrap_or(1);
    let part_cap = all
        .iter()
        .flat_map(|c| c.ubatches().into_iter().map(move |rows| (rows, c.context)))
        .map(|(rows, ctx)| {
            rows * MlaSplit::choose(rows, shape.num_heads / 16, ctx, target_blocks).splits
        })
        .max()
        .unwrap_or(1);
    let ws = [
        AttnWorkspace::new(
            &gpu, &kernels, &stream, shape, &mla, tokens_cap, part_cap, 0xa700,
        )?,
        AttnWorkspace::new(
            &gpu, &kernels, &stream, shape, &mla, tokens_cap, part_cap, 0xa701,
        )?,
    ];
    let recv = [
        gpu.alloc(tokens_cap * h * BF16, "FFN result, ubatch 0")?,
        gpu.alloc(tokens_cap * h * BF16, "FFN result, ubatch 1")?,
    ];
    let control = gpu.alloc(256 + CONTROL_MAX_BYTES, "control message")?;
    let pool_bytes = all
        .iter()
        .map(|c| n_layers * c.tokens * c.context * KV_ROW_BYTES)
        .max()
        .unwrap_or(KV_ROW_BYTES);
    let pool = gpu.alloc(pool_bytes, "KV caches of every layer")?;
    let nonfinite = gpu.alloc(8, "non-finite counter")?;
    let attn = Attn {
        shape,
        mla,
        kernels: &kernels,
        blas: &blas,
        stream: &stream,
        weights: &weights,
        variant,
        target_blocks,
    };
    let channel = Channel {
        comm: &comm,
        stream: &stream,
        rank: setup.rank,
        timeout: Duration::from_secs(spec.step_timeout_s),
    };
    let events = EventPairs::new(&gpu, spec.steps.max(1))?;
    let mut records = Vec::new();
    let mut hashes = Vec::new();
    for (index, config) in all.iter().enumerate() {
        progress(&format!(
            "pipeline {}/{}: T={} context={} dbo={} graph={}",
            index + 1,
            all.len(),
            config.tokens,
            config.context,
            config.dbo,
            config.graph
        ));
        let ubatches = config.ubatches();
        let layer_bytes = config.tokens * config.context * KV_ROW_BYTES;
        kernels.fill_bf16(
            &stream,
            pool.ptr,
            (n_layers * layer_bytes / BF16) as u64,
            0xcafe ^ index as u64,
            1.0,
        )?;
        let offsets: Vec<usize> = ubatches
            .iter()
            .scan(0, |acc, &rows| {
                let start = *acc;
                *acc += rows;
                Some(start)
            })
            .collect();
        let kv = |layer: usize, u: usize| {
            KvView::decode(
                pool.at(layer * layer_bytes + offsets[u] * config.context * KV_ROW_BYTES),
                config.context,
                config.context,
            )
        };
        let payload = control_payload(&ubatches);
        let size = (payload.len() as i64).to_le_bytes();
        let send_control = || -> Result<(), ProbeError> {
            upload_async(&stream, control.ptr, &size)?;
            comm.send(control.ptr, 8, Dtype::U8, FFN, &stream)?;
            upload_async(&stream, control.at(256), payload.as_bytes())?;
            comm.send(control.at(256), payload.len(), Dtype::U8, FFN, &stream)
        };
        let a = |u: usize, layer: usize| -> Result<(), ProbeError> {
            let add = if layer > 0 { recv[u].ptr } else { 0 };
            attn.layer(&ws[u], layer, add, ubatches[u], &kv(layer, u))
        };
        let s = |u: usize| comm.send(ws[u].out.ptr, ubatches[u] * h, Dtype::Bf16, FFN, &stream);
        let r = |u: usize| comm.recv(recv[u].ptr, ubatches[u] * h, Dtype::Bf16, FFN, &stream);
        let layers = || -> Result<(), ProbeError> {
            if config.dbo {
                // A0(L) S0(L) | A1(L) S1(L) | R0(L) A0(L+1) S0(L+1) | R1(L) A1(L+1) S1(L+1) | … (afd-spec §3.6)
                for layer in 0..n_layers {
                    if layer > 0 {
                        r(0)?;
                    }
                    a(0, layer)?;
                    s(0)?;
                    if layer > 0 {
                        r(1)?;
                    }
                    a(1, layer)?;
                    s(1)?;
                }
                r(0)?;
                r(1)
            } else {
                for layer in 0..n_layers {
                    a(0, layer)?;
                    s(0)?;
                    r(0)?;
                }
                Ok(())
            }
        };
        drive_steps(
            spec,
            config.graph,
            &stream,
            &channel,
            "Attention",
            send_control,
            layers,
            Some(&events),
        )?;
        let samples = events.elapsed_us(spec.steps)?;
        zero_async(&stream, nonfinite.ptr, 8)?;
        let mut words: Vec<u16> = Vec::new();
        for (u, &rows) in ubatches.iter().enumerate() {
            kernels.count_nonfinite(&stream, recv[u].ptr, (rows * h) as u64, nonfinite.ptr)?;
        }
        stream.sync()?;
        for (u, &rows) in ubatches.iter().enumerate() {
            words.extend(download_raw::<u16>(gpu.ordinal, recv[u].ptr, rows * h)?);
        }
        let mut bad = [0u64];
        nonfinite.download(&mut bad)?;
        if bad[0] != 0 {
            return Err(ProbeError::DataCheck {
                what: format!("pipeline T={} context={}", config.tokens, config.context),
                detail: format!("{} non-finite values in the FFN results", bad[0]),
            });
        }
        hashes.push(checksum(&words));
        let plans = routing_plans(shape, spec.routing, spec.seed, config);
        records.push(record(
            config,
            &ubatches,
            n_layers,
            payload.len(),
            samples,
            routing_record(shape, &plans),
        )?);
    }
    serde_json::to_vec(&(records, hashes, variant.name())).map_err(|err| ProbeError::Rank {
        rank: setup.rank,
        message: format!("cannot encode results: {err}"),
    })
}

/// One configuration on one rank: warm-up steps, the capture (graph mode) with two untimed replays,
/// then the timed steps. Each step is `control` then the layers (eager, or the captured graph), then a
/// host wait: both ranks synchronise after every step (afd-spec §6.2). `events` time each timed step.
#[expect(
    clippy::too_many_arguments,
    reason = "the step's parts differ per rank; the driver is shared"
)]
fn drive_steps(
    spec: &PipelineSpec,
    graph_mode: bool,
    stream: &Stream,
    channel: &Channel<'_>,
    side: &str,
    control: impl Fn() -> Result<(), ProbeError>,
    layers: impl Fn() -> Result<(), ProbeError> + Copy,
    events: Option<&EventPairs>,
) -> Result<(), ProbeError> {
    for _ in 0..spec.warmup_steps.max(1) {
        control()?;
        layers()?;
        channel.wait(&format!("pipeline warm-up step ({side})"))?;
    }
    let graph = if graph_mode {
        let graph = Graph::capture(stream, layers)?;
        for _ in 0..2 {
            control()?;
            graph.launch(stream)?;
            channel.wait(&format!("pipeline graph warm-up ({side})"))?;
        }
        Some(graph)
    } else {
        None
    };
    for i in 0..spec.steps {
        if let Some(events) = events {
            events.start[i].record(stream)?;
        }
        control()?;
        match &graph {
            Some(graph) => graph.launch(stream)?,
            None => layers()?,
        }
        if let Some(events) = events {
            events.end[i].record(stream)?;
        }
        channel.wait(&format!("pipeline step ({side})"))?;
    }
    Ok(())
}

fn record(
    config: &Config,
    ubatches: &[usize],
    layers: usize,
    payload_bytes: usize,
    samples: Vec<f64>,
    routing: Vec<afd_traces::pipeline::LayerRouting>,
) -> Result<PipelineRecord, ProbeError> {
    let stats = crate::stats::summarize(&samples).ok_or_else(|| ProbeError::DataCheck {
        what: format!("pipeline T={} context={}", config.tokens, config.context),
        detail: "no finite step times".to_owned(),
    })?;
    Ok(PipelineRecord {
        tokens: config.tokens as u32,
        context: config.context as u32,
        dbo: config.dbo,
        graph: config.graph,
        ubatch_tokens: ubatches.iter().map(|&r| r as u32).collect(),
        layers: layers as u32,
        steps: samples.len() as u32,
        control_payload_bytes: payload_bytes as u32,
        step_us: stats,
        samples_us: samples,
        attention_busy_us: None,
        ffn_busy_us: None,
        routing,
    })
}

fn ffn_rank(spec: &PipelineSpec, setup: &RankSetup) -> Result<Vec<u8>, ProbeError> {
    let shape = &spec.model;
    let gpu = Gpu::open(setup.gpu)?;
    let kernels = Kernels::load(&gpu)?;
    let stream = gpu.stream()?;
    let blas = Blas::new(&gpu, &stream)?;
    let all = configs(
        &spec.tokens,
        &spec.contexts,
        &spec.dbo_modes,
        &spec.graph_modes,
    );
    let h = shape.hidden_size;
    let n_layers = shape.num_layers;
    let dense = shape.dense_layers;
    let weights = FfnWeights::new(
        &gpu,
        &kernels,
        &stream,
        shape,
        shape.moe_layers(),
        dense.min(1),
        0xf0f0,
    )?;
    let comm = Comm::init(&setup.id, setup.rank, setup.world)?;
    let tokens_cap = all.iter().map(|c| c.tokens).max().unwrap_or(1);
    // The routing of every configuration fixes the workspace size.
    let mut rows_cap = tokens_cap;
    for config in &all {
        for stages in routing_plans(shape, spec.routing, spec.seed, config) {
            for plan in stages {
                rows_cap = rows_cap.max(plan.rows());
            }
        }
    }
    let ws = FfnWorkspace::new(
        &gpu,
        &kernels,
        &stream,
        shape,
        tokens_cap,
        rows_cap,
        spec.seed ^ 0x52,
    )?;
    let gemms = ExpertGemms::new(&gpu, PathSet::Auto)?;
    let input = [
        gpu.alloc(tokens_cap * h * BF16, "received activations, ubatch 0")?,
        gpu.alloc(tokens_cap * h * BF16, "received activations, ubatch 1")?,
    ];
    let output = [
        gpu.alloc(tokens_cap * h * BF16, "FFN output, ubatch 0")?,
        gpu.alloc(tokens_cap * h * BF16, "FFN output, ubatch 1")?,
    ];
    let control = gpu.alloc(256 + CONTROL_MAX_BYTES, "control message")?;
    let ffn = Ffn {
        gpu: &gpu,
        shape,
        kernels: &kernels,
        blas: &blas,
        stream: &stream,
        weights: &weights,
        ws: &ws,
        gemms: &gemms,
    };
    let channel = Channel {
        comm: &comm,
        stream: &stream,
        rank: setup.rank,
        timeout: Duration::from_secs(spec.step_timeout_s),
    };
    let mut hashes = Vec::new();
    let mut errors = Vec::new();
    for config in &all {
        let ubatches = config.ubatches();
        let plans: Vec<Vec<DevicePlan>> = routing_plans(shape, spec.routing, spec.seed, config)
            .into_iter()
            .enumerate()
            .map(|(i, stages)| {
                stages
                    .into_iter()
                    .map(|plan| ffn.plan(i, plan))
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<_, _>>()?;
        let receive_control = || -> Result<(), ProbeError> {
            let mut size = [0u8; 8];
            comm.recv(control.ptr, 8, Dtype::U8, ATTENTION, &stream)?;
            download_async(&stream, &mut size, control.ptr)?;
            channel.wait("control message size (FFN)")?;
            let len = i64::from_le_bytes(size);
            if len <= 0 || len as usize > CONTROL_MAX_BYTES {
                return Err(ProbeError::DataCheck {
                    what: "control message".to_owned(),
                    detail: format!("announced size {len} B is outside 1..={CONTROL_MAX_BYTES}"),
                });
            }
            let mut payload = vec![0u8; len as usize];
            comm.recv(
                control.at(256),
                payload.len(),
                Dtype::U8,
                ATTENTION,
                &stream,
            )?;
            download_async(&stream, &mut payload, control.at(256))?;
            channel.wait("control message payload (FFN)")?;
            let stages = parse_control_payload(&payload).map_err(|err| ProbeError::DataCheck {
                what: "control message".to_owned(),
                detail: err.to_string(),
            })?;
            if stages != ubatches {
                return Err(ProbeError::DataCheck {
                    what: "control message".to_owned(),
                    detail: format!(
                        "announces ubatches {stages:?}, this configuration has {ubatches:?}"
                    ),
                });
            }
            Ok(())
        };
        let layers = || -> Result<(), ProbeError> {
            for layer in 0..n_layers {
                for (s, &rows) in ubatches.iter().enumerate() {
                    comm.recv(input[s].ptr, rows * h, Dtype::Bf16, ATTENTION, &stream)?;
                    if layer < dense {
                        ffn.dense(0, input[s].ptr, output[s].ptr, rows)?;
                    } else {
                        ffn.moe_layer(&plans[layer - dense][s], input[s].ptr, output[s].ptr)?;
                    }
                    comm.send(output[s].ptr, rows * h, Dtype::Bf16, ATTENTION, &stream)?;
                }
            }
            Ok(())
        };
        drive_steps(
            spec,
            config.graph,
            &stream,
            &channel,
            "FFN",
            receive_control,
            layers,
            None,
        )?;
        let mut words: Vec<u16> = Vec::new();
        for (s, &rows) in ubatches.iter().enumerate() {
            words.extend(download_raw::<u16>(gpu.ordinal, output[s].ptr, rows * h)?);
        }
        hashes.push(checksum(&words));
        // The last MoE layer's last ubatch, token 0, against the CPU.
        if n_layers > dense {
            let last = ubatches.len() - 1;
            let plan = &plans[n_layers - dense - 1][last];
            let error = ffn.check_token0(plan, input[last].ptr, output[last].ptr)?;
            if error > 3e-2 {
                return Err(ProbeError::DataCheck {
                    what: format!("pipeline FFN T={} dbo={}", config.tokens, config.dbo),
                    detail: format!(
                        "token 0 of the last layer differs from the CPU reference by {error:.3e}"
                    ),
                });
            }
            errors.push(error);
        }
    }
    serde_json::to_vec(&(hashes, errors, gemms.summary())).map_err(|err| ProbeError::Rank {
        rank: setup.rank,
        message: format!("cannot encode results: {err}"),
    })
}
