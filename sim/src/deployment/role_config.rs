//! One role's `vllm serve` command as the deployment model sees it: every flag it interprets (with
//! the place it was written), the `afd` block, the environment, and the accessors the simulator and
//! the twin read.
//!
//! Fields hold what the user wrote (`None` when absent); accessors apply vLLM's defaults, which are
//! listed on each accessor with their source. Parsing lives in `serve_args.rs`.

use std::collections::BTreeMap;
use std::fmt;

use crate::deployment::afd_config::AfdConfig;
use crate::deployment::compilation::{
    CompilationConfig, CudaGraphMode, DEFAULT_CUDAGRAPH_MODE, SizeInputs, resolve_capture_sizes,
};
use crate::deployment::findings::Finding;
use crate::deployment::location::{Located, Location};
use crate::deployment::serve_args::{self, ServeArgsError};
use crate::topology::Role;

/// vLLM 0.26.0's `max_num_seqs` for `vllm serve` (usage context OPENAI_API_SERVER) on a GPU with
/// at least 70 GiB that is not an A100 (H100, H200, H800, H20):
/// `vllm/engine/arg_utils.py:2460-2469` (`EngineArgs.get_batch_defaults`).
pub const DEFAULT_MAX_NUM_SEQS: u32 = 1024;
/// `CompilationMode.NONE`: the model runs as plain PyTorch (`vllm/config/compilation.py:41`).
pub const COMPILE_MODE_NONE: i64 = 0;
/// `CompilationMode.VLLM_COMPILE`: vLLM's Inductor backend, split at attention for piecewise graphs
/// (`vllm/config/compilation.py:48`).
pub const COMPILE_MODE_VLLM: i64 = 3;
/// vLLM 0.26.0's `max_num_batched_tokens` for the same case (`vllm/engine/arg_utils.py:2462-2465`).
pub const DEFAULT_MAX_NUM_BATCHED_TOKENS: u32 = 8192;
/// `max_num_seqs` for `vllm serve` on every other GPU (A100, L4, L20):
/// `vllm/engine/arg_utils.py:2470-2479`.
pub const SMALL_GPU_MAX_NUM_SEQS: u32 = 256;
/// `max_num_batched_tokens` for `vllm serve` on those GPUs (`vllm/engine/arg_utils.py:2472-2475`).
pub const SMALL_GPU_MAX_NUM_BATCHED_TOKENS: u32 = 2048;
/// `max_num_batched_tokens` when vLLM batches DP MoE (DeepEP low-latency or NIXL-EP all2all, expert
/// parallel, DP > 1): `SchedulerConfig.DEFAULT_MAX_NUM_BATCHED_TOKENS_FOR_BATCHED_DP`,
/// `vllm/config/scheduler.py:43`, applied at `vllm/engine/arg_utils.py:2645-2648`.
pub const BATCHED_DP_MOE_MAX_NUM_BATCHED_TOKENS: u32 = 256;
/// vLLM 0.26.0's KV-cache block size when neither `--block-size` nor the backend says otherwise
/// (`CacheConfig.DEFAULT_BLOCK_SIZE`, `vllm/config/cache.py:47`). On Hopper (SM90) vLLM picks
/// FLASH_ATTN_MLA first for MLA models (`vllm/platforms/cuda.py:135-142`), whose kernels take any
/// multiple of 16 (`vllm/v1/attention/backends/mla/flashattn_mla.py:52-53`), so the default is
/// kept (`vllm/v1/attention/backend.py:195-203`, `vllm/platforms/interface.py:628-640`); so does
/// FLASH_ATTN for GQA models (`vllm/v1/attention/backends/flash_attn.py:80-81`) and TRITON_MLA on
/// the other GPUs (`vllm/v1/attention/backends/mla/triton_mla.py:98-99`).
pub const DEFAULT_BLOCK_SIZE: u32 = 16;
/// The block size of `--attention-backend FLASHMLA`, the only size its kernels take
/// (`vllm/v1/attention/backends/mla/flashmla.py:58-59`).
pub const FLASHMLA_BLOCK_SIZE: u32 = 64;
/// `--gpu-memory-utilization` default of vLLM 0.26.0 (`CacheConfig`, `vllm/config/cache.py:68`).
pub const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.92;
/// `--dbo-decode-token-threshold` default (afd-spec §4.1; `vllm/config/parallel.py:214`).
pub const DEFAULT_DBO_DECODE_TOKEN_THRESHOLD: u32 = 32;
/// `--dbo-prefill-token-threshold` default (same sources).
pub const DEFAULT_DBO_PREFILL_TOKEN_THRESHOLD: u32 = 512;
/// `vllm serve --port` default.
pub const DEFAULT_HTTP_PORT: u16 = 8000;
/// vLLM's default all2all backend (upstream `vllm/config/parallel.py`).
pub const DEFAULT_ALL2ALL_BACKEND: &str = "allgather_reducescatter";

/// The GPU class vLLM picks its batch defaults by: at least 70 GiB and not an A100, or any other
/// (`vllm/engine/arg_utils.py:2449-2460`, `get_batch_defaults`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuClass {
    /// H100, H200, H800, H20 and other GPUs of at least 70 GiB that are not A100s; also what a
    /// command is judged on when no GPU is named (the plugin's recipes run on H-class GPUs).
    #[default]
    Large,
    /// A100, L4, L20 and smaller GPUs.
    Other,
}

impl GpuClass {
    /// The class of a GPU of `memory_bytes` whose device name does (`is_a100`) or does not contain
    /// "a100".
    pub fn of(memory_bytes: u64, is_a100: bool) -> GpuClass {
        if memory_bytes >= 70 << 30 && !is_a100 {
            GpuClass::Large
        } else {
            GpuClass::Other
        }
    }

    /// `(max_num_seqs, max_num_batched_tokens)` for `vllm serve` (usage context
    /// OPENAI_API_SERVER) before the caps of `_set_default_max_num_seqs_and_batched_tokens_args`.
    pub fn serve_batch_defaults(self) -> (u32, u32) {
        match self {
            GpuClass::Large => (DEFAULT_MAX_NUM_SEQS, DEFAULT_MAX_NUM_BATCHED_TOKENS),
            GpuClass::Other => (SMALL_GPU_MAX_NUM_SEQS, SMALL_GPU_MAX_NUM_BATCHED_TOKENS),
        }
    }
}

/// The GPU model runner a role's workers build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelRunner {
    /// `vllm/v1/worker/gpu_model_runner.py`.
    V1,
    /// `vllm/v1/worker/gpu/model_runner.py`.
    V2,
}

impl ModelRunner {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelRunner::V1 => "v1",
            ModelRunner::V2 => "v2",
        }
    }
}

/// One entry of `CUDA_VISIBLE_DEVICES`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GpuId {
    Index(u32),
    /// `GPU-…` or `MIG-…`.
    Uuid(String),
}

impl fmt::Display for GpuId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuId::Index(i) => write!(f, "{i}"),
            GpuId::Uuid(u) => f.write_str(u),
        }
    }
}

/// A `vllm serve` flag this model does not interpret, kept as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownFlag {
    pub flag: String,
    pub value: Option<String>,
    pub location: Location,
}

/// `vllm serve` flags of vLLM 0.26.0 that the timing model does not interpret and need not: they
/// change no step of the engine (where the model's code and tokenizer come from, request logging,
/// the API key, the sampling seed: `vllm bench serve` sends `ignore_eos`, so a request decodes its
/// full length whatever it samples), or the engine profile's prices hold their cost (the per-step
/// log, which every `afd-probe vllm` measurement ran with). A prediction leaves out every other flag
/// it does not read, and says so.
pub const TIMING_NEUTRAL_FLAGS: &[&str] = &[
    "--trust-remote-code",
    "--tokenizer",
    "--tokenizer-mode",
    "--revision",
    "--code-revision",
    "--tokenizer-revision",
    "--download-dir",
    "--chat-template",
    "--api-key",
    "--seed",
    "--enable-log-requests",
    "--disable-log-stats",
    "--uvicorn-log-level",
    "--disable-uvicorn-access-log",
    "--enable-logging-iteration-details",
];

/// DBO settings of a role with `--enable-dbo` (afd-spec §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dbo {
    pub decode_token_threshold: u32,
    pub prefill_token_threshold: u32,
}

/// One role's `vllm serve` configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleConfig {
    /// Where the command (or argument list) starts.
    pub location: Location,
    /// Positional model (or `--model`).
    pub model: Option<Located<String>>,
    pub served_model_names: Vec<Located<String>>,
    pub data_parallel_size: Option<Located<u32>>,
    pub data_parallel_size_local: Option<Located<u32>>,
    /// `--data-parallel-start-rank`: the first global DP rank this command starts (a role spread
    /// over several hosts, one command per host).
    pub data_parallel_start_rank: Option<Located<u32>>,
    /// `--data-parallel-address`: the primary node's address every node of the role dials.
    pub data_parallel_address: Option<Located<String>>,
    /// `--headless`: engines only, no API server (the secondary nodes of a multi-node DP role).
    pub headless: Option<Located<bool>>,
    pub tensor_parallel_size: Option<Located<u32>>,
    pub pipeline_parallel_size: Option<Located<u32>>,
    pub prefill_context_parallel_size: Option<Located<u32>>,
    pub decode_context_parallel_size: Option<Located<u32>>,
    pub enable_expert_parallel: Option<Located<bool>>,
    pub enable_eplb: Option<Located<bool>>,
    pub enable_elastic_ep: Option<Located<bool>>,
    pub all2all_backend: Option<Located<String>>,
    pub worker_cls: Option<Located<String>>,
    /// Where `--additional-config` was given.
    pub additional_config: Option<Location>,
    /// The `afd` block, when present and a mapping.
    pub afd: Option<AfdConfig>,
    pub max_num_seqs: Option<Located<u32>>,
    pub max_num_batched_tokens: Option<Located<u32>>,
    pub max_model_len: Option<Located<u32>>,
    /// `--max-model-len auto` (or `-1`) was the flag's last value: vLLM fits the length to the KV
    /// cache (`_auto_fit_max_model_len`, `vllm/v1/core/kv_cache_utils.py`).
    pub max_model_len_auto: bool,
    pub gpu_memory_utilization: Option<Located<f64>>,
    pub enable_dbo: Option<Located<bool>>,
    pub dbo_decode_token_threshold: Option<Located<u32>>,
    pub dbo_prefill_token_threshold: Option<Located<u32>>,
    pub ubatch_size: Option<Located<u32>>,
    pub enforce_eager: Option<Located<bool>>,
    /// `--enable-prefix-caching` / `--no-enable-prefix-caching`.
    pub enable_prefix_caching: Option<Located<bool>>,
    /// `--enable-chunked-prefill` / `--no-enable-chunked-prefill`.
    pub enable_chunked_prefill: Option<Located<bool>>,
    /// `--block-size` (KV-cache tokens per block).
    pub block_size: Option<Located<u32>>,
    /// `--attention-backend`.
    pub attention_backend: Option<Located<String>>,
    /// The GPU class the batch defaults are taken for (not a flag: set by [`RoleConfig::on_gpu`]).
    pub gpu_class: GpuClass,
    /// `--compilation-config`, with `--max-cudagraph-capture-size` and `--cudagraph-capture-sizes`
    /// folded in.
    pub compilation: CompilationConfig,
    /// `--optimization-level` / `-O<n>` (0-3; vLLM's default is 2).
    pub optimization_level: Option<Located<u8>>,
    pub http_host: Option<Located<String>>,
    pub http_port: Option<Located<u16>>,
    /// The process environment (exported recipe variables and prefixes, or what the caller gave).
    pub env: BTreeMap<String, Located<String>>,
    /// `CUDA_VISIBLE_DEVICES` entries that parsed; `None` when the variable is absent.
    pub gpus: Option<Located<Vec<GpuId>>>,
    pub unknown_flags: Vec<UnknownFlag>,
    /// Findings made while parsing (afd-block coercions of afd-spec §1.3, notes), role unset.
    pub(crate) parse_findings: Vec<Finding>,
}

impl RoleConfig {
    /// Parses the words after `vllm serve` (as the twin receives them); locations are word indices.
    pub fn from_serve_args(args: &[String]) -> Result<RoleConfig, ServeArgsError> {
        RoleConfig::from_serve_args_with_env(args, &BTreeMap::new())
    }

    /// As [`RoleConfig::from_serve_args`], with the process environment (`CUDA_VISIBLE_DEVICES`,
    /// `VLLM_USE_V2_MODEL_RUNNER`, `VLLM_PLUGINS`, …).
    pub fn from_serve_args_with_env(
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> Result<RoleConfig, ServeArgsError> {
        serve_args::parse_argument_list(args, env)
    }

    /// The role the afd block declares, when valid.
    pub fn declared_role(&self) -> Option<Role> {
        self.afd.as_ref().and_then(AfdConfig::role)
    }

    pub fn afd(&self) -> Option<&AfdConfig> {
        self.afd.as_ref()
    }

    pub fn model(&self) -> Option<&str> {
        self.model.as_ref().map(|m| m.value.as_str())
    }

    /// `--served-model-name` values, or the model path when absent (vLLM's default).
    pub fn served_model_names(&self) -> Vec<&str> {
        if self.served_model_names.is_empty() {
            self.model().into_iter().collect()
        } else {
            self.served_model_names
                .iter()
                .map(|n| n.value.as_str())
                .collect()
        }
    }

    /// `--data-parallel-size` (default 1).
    pub fn dp_size(&self) -> u32 {
        value_or(&self.data_parallel_size, 1)
    }

    /// `--data-parallel-size-local` (default: the DP size); DP engines started by this process.
    pub fn dp_size_local(&self) -> u32 {
        self.data_parallel_size_local
            .as_ref()
            .map_or_else(|| self.dp_size(), |d| d.value)
    }

    /// `--data-parallel-start-rank` (default 0): this command's first global DP rank.
    pub fn dp_start_rank(&self) -> u32 {
        value_or(&self.data_parallel_start_rank, 0)
    }

    /// `--headless`: this command starts engines but no API server.
    pub fn headless(&self) -> bool {
        flag_on(&self.headless)
    }

    /// `--tensor-parallel-size` (default 1).
    pub fn tp_size(&self) -> u32 {
        value_or(&self.tensor_parallel_size, 1)
    }

    /// `--pipeline-parallel-size` (default 1).
    pub fn pp_size(&self) -> u32 {
        value_or(&self.pipeline_parallel_size, 1)
    }

    /// `--prefill-context-parallel-size` (default 1).
    pub fn pcp_size(&self) -> u32 {
        value_or(&self.prefill_context_parallel_size, 1)
    }

    /// `--decode-context-parallel-size` (default 1).
    pub fn dcp_size(&self) -> u32 {
        value_or(&self.decode_context_parallel_size, 1)
    }

    /// AFD ranks of this role: DP × PCP × TP (afd-spec §2.1), saturating.
    pub fn rank_count(&self) -> u64 {
        u64::from(self.dp_size()) * u64::from(self.pcp_size()) * u64::from(self.tp_size())
    }

    /// GPUs this process uses: DP(local) × PCP × TP × PP.
    pub fn gpu_count(&self) -> u64 {
        u64::from(self.dp_size_local())
            * u64::from(self.pcp_size())
            * u64::from(self.tp_size())
            * u64::from(self.pp_size())
    }

    /// The machine this role runs on, as its `VLLM_HOST_IP` names it (vLLM's address of this node
    /// for its distributed groups); `None` when the command does not set it. Two roles with
    /// different values run on different hosts, so their GPU indices name different GPUs.
    pub fn machine_host(&self) -> Option<&Located<String>> {
        self.env
            .get("VLLM_HOST_IP")
            .filter(|host| !host.value.trim().is_empty())
    }

    /// `--enable-expert-parallel` (default off).
    pub fn expert_parallel(&self) -> bool {
        flag_on(&self.enable_expert_parallel)
    }

    /// `--enable-eplb` (default off).
    pub fn eplb(&self) -> bool {
        flag_on(&self.enable_eplb)
    }

    /// `--all2all-backend`, else `VLLM_ALL2ALL_BACKEND`, else vLLM's default.
    pub fn all2all_backend(&self) -> &str {
        self.all2all_backend
            .as_ref()
            .map(|b| b.value.as_str())
            .or_else(|| self.env_value("VLLM_ALL2ALL_BACKEND"))
            .unwrap_or(DEFAULT_ALL2ALL_BACKEND)
    }

    /// vLLM's `use_sequence_parallel_moe`: expert parallel, TP > 1, DP > 1 and an all2all backend
    /// that implies it (upstream `vllm/config/parallel.py`).
    pub fn uses_sequence_parallel_moe(&self) -> bool {
        const BACKENDS: &[&str] = &[
            "allgather_reducescatter",
            "naive",
            "deepep_high_throughput",
            "deepep_low_latency",
            "mori_high_throughput",
            "mori_low_latency",
            "nixl_ep",
        ];
        self.expert_parallel()
            && self.tp_size() > 1
            && self.dp_size() > 1
            && BACKENDS.contains(&self.all2all_backend())
    }

    /// The same command judged for a GPU of class `class` (the batch defaults depend on it).
    pub fn on_gpu(mut self, class: GpuClass) -> RoleConfig {
        self.gpu_class = class;
        self
    }

    /// vLLM's `use_batched_dp_moe`: all2all backend `deepep_low_latency` or `nixl_ep`, expert
    /// parallel and DP > 1 (`vllm/config/parallel.py:671-680`).
    pub fn uses_batched_dp_moe(&self) -> bool {
        matches!(self.all2all_backend(), "deepep_low_latency" | "nixl_ep")
            && self.expert_parallel()
            && self.dp_size() > 1
    }

    /// `--max-num-seqs`, else vLLM 0.26.0's default for `vllm serve` on the role's GPU class
    /// ([`GpuClass::serve_batch_defaults`]) capped at [`RoleConfig::max_num_batched_tokens`]
    /// (`vllm/engine/arg_utils.py:2654-2658, 2709-2711`).
    pub fn max_num_seqs(&self) -> u32 {
        match &self.max_num_seqs {
            Some(seqs) => seqs.value,
            None => self
                .gpu_class
                .serve_batch_defaults()
                .0
                .min(self.max_num_batched_tokens()),
        }
    }

    /// `--max-num-batched-tokens`, else vLLM 0.26.0's default (`vllm/engine/arg_utils.py:2644-2701`):
    /// [`BATCHED_DP_MOE_MAX_NUM_BATCHED_TOKENS`] when DP MoE is batched, else the GPU class's
    /// `vllm serve` default; raised to `--max-model-len` without chunked prefill, and capped at
    /// `max_num_seqs × --max-model-len` (both only when `--max-model-len` is given; the model's own
    /// length is far above these defaults for every shipped model).
    pub fn max_num_batched_tokens(&self) -> u32 {
        if let Some(tokens) = &self.max_num_batched_tokens {
            return tokens.value;
        }
        let (default_seqs, default_tokens) = self.gpu_class.serve_batch_defaults();
        let mut tokens = if self.uses_batched_dp_moe() {
            BATCHED_DP_MOE_MAX_NUM_BATCHED_TOKENS
        } else {
            default_tokens
        };
        if let Some(len) = self.max_model_len() {
            if !self.chunked_prefill() {
                tokens = tokens.max(len);
            }
            let seqs = value_or(&self.max_num_seqs, default_seqs);
            let cap = u64::from(seqs) * u64::from(len);
            tokens = u32::try_from(cap.min(u64::from(tokens))).expect("at most a u32");
        }
        tokens
    }

    /// Chunked prefill: on unless `--no-enable-chunked-prefill` (vLLM 0.26.0 turns it on for every
    /// model that supports it, `vllm/engine/arg_utils.py:2517, 2524-2525`).
    pub fn chunked_prefill(&self) -> bool {
        self.enable_chunked_prefill.as_ref().is_none_or(|c| c.value)
    }

    /// Prefix caching: on unless `--no-enable-prefix-caching` (`vllm/config/cache.py:93`; vLLM
    /// 0.26.0 keeps it on for non-hybrid models, `vllm/engine/arg_utils.py:2520-2522, 2552-2553`).
    pub fn prefix_caching(&self) -> bool {
        self.enable_prefix_caching.as_ref().is_none_or(|c| c.value)
    }

    /// `--load-format dummy`: vLLM fills every weight at random instead of loading the model's
    /// (`vllm/model_executor/model_loader/dummy_loader.py`), as every committed real-vLLM run did.
    /// Such a model's decode tokens route to few experts (docs/fidelity.md, "Why a replayed decode
    /// step is cheap here"); a trained one's do not.
    pub fn dummy_weights(&self) -> bool {
        self.unknown_flags
            .iter()
            .any(|f| f.flag == "--load-format" && f.value.as_deref() == Some("dummy"))
    }

    /// `--enable-return-routed-experts` (the last of it and `--no-enable-return-routed-experts`):
    /// the server copies every token's routed experts to the host each step and returns them with
    /// each completion (vLLM 0.26.0 `ModelConfig.enable_return_routed_experts`).
    pub fn returns_routed_experts(&self) -> bool {
        self.kept_switch("--enable-return-routed-experts")
            .unwrap_or(false)
    }

    /// A kept switch this model does not interpret as a field (`--async-scheduling`): on or off as
    /// the last of it and its `--no-` form says (argparse's `BooleanOptionalAction`), `None` when
    /// neither is given.
    fn kept_switch(&self, switch: &str) -> Option<bool> {
        let negated = format!("--no-{}", switch.trim_start_matches("--"));
        self.unknown_flags.iter().rev().find_map(|f| {
            if f.flag == switch {
                Some(true)
            } else {
                (f.flag == negated).then_some(false)
            }
        })
    }

    /// Asynchronous scheduling: on unless `--no-async-scheduling` is the last of it and
    /// `--async-scheduling` (vLLM 0.26.0 turns it on for a generating model without speculative
    /// decoding on the default executor, `vllm/config/vllm.py:1059-1107`, which is every deployment
    /// the simulator accepts).
    pub fn async_scheduling(&self) -> bool {
        self.kept_switch("--async-scheduling").unwrap_or(true)
    }

    /// The flags the role keeps but the timing model does not read, each as `--flag value` (or
    /// `--flag`), in the order written: every flag this model does not interpret but those read
    /// from the kept words ([`RoleConfig::dummy_weights`], [`RoleConfig::async_scheduling`]) and
    /// those that change no step of the engine ([`TIMING_NEUTRAL_FLAGS`]); and every
    /// `--compilation-config` key it does not read. What a prediction of the role leaves out.
    pub fn flags_not_modelled(&self) -> Vec<String> {
        let read = [
            "--load-format",
            "--async-scheduling",
            "--no-async-scheduling",
        ];
        let flags = self
            .unknown_flags
            .iter()
            .filter(|f| {
                !read.contains(&f.flag.as_str()) && !TIMING_NEUTRAL_FLAGS.contains(&f.flag.as_str())
            })
            .map(|f| match &f.value {
                Some(value) => format!("{} {value}", f.flag),
                None => f.flag.clone(),
            });
        let keys = self
            .compilation
            .other_keys
            .iter()
            .map(|key| format!("--compilation-config key {}", key.value));
        flags.chain(keys).collect()
    }

    /// KV-cache block size in tokens: `--block-size`, else 64 for `--attention-backend FLASHMLA`,
    /// else [`DEFAULT_BLOCK_SIZE`] (see there for the vLLM 0.26.0 sources).
    pub fn block_size(&self) -> u32 {
        if let Some(size) = &self.block_size {
            return size.value;
        }
        match &self.attention_backend {
            Some(backend) if backend.value.eq_ignore_ascii_case("FLASHMLA") => FLASHMLA_BLOCK_SIZE,
            _ => DEFAULT_BLOCK_SIZE,
        }
    }

    /// `--max-model-len`; `None` means the model's own maximum (its config.json), or with
    /// [`Self::max_model_len_auto`] the most the KV cache holds, up to that maximum.
    pub fn max_model_len(&self) -> Option<u32> {
        self.max_model_len.as_ref().map(|m| m.value)
    }

    /// Whether `--max-model-len auto` (or `-1`) asks vLLM to fit the length to the KV cache.
    pub fn max_model_len_auto(&self) -> bool {
        self.max_model_len_auto
    }

    /// `--gpu-memory-utilization`, default [`DEFAULT_GPU_MEMORY_UTILIZATION`].
    pub fn gpu_memory_utilization(&self) -> f64 {
        self.gpu_memory_utilization
            .as_ref()
            .map_or(DEFAULT_GPU_MEMORY_UTILIZATION, |g| g.value)
    }

    /// DBO thresholds when the role splits batches into two ubatches: `--enable-dbo`, or
    /// `--ubatch-size 2` without it (vLLM's `use_ubatching` with `num_ubatches == 2`,
    /// `vllm/config/parallel.py:535-540`); `None` otherwise. Defaults 32 / 512 (afd-spec §4.1).
    pub fn dbo(&self) -> Option<Dbo> {
        (self.uses_ubatching() && self.num_ubatches() == 2).then(|| Dbo {
            decode_token_threshold: value_or(
                &self.dbo_decode_token_threshold,
                DEFAULT_DBO_DECODE_TOKEN_THRESHOLD,
            ),
            prefill_token_threshold: value_or(
                &self.dbo_prefill_token_threshold,
                DEFAULT_DBO_PREFILL_TOKEN_THRESHOLD,
            ),
        })
    }

    /// vLLM's `use_ubatching`: DBO on or `--ubatch-size` > 1 (`vllm/config/parallel.py:535-536`).
    pub fn uses_ubatching(&self) -> bool {
        flag_on(&self.enable_dbo) || value_or(&self.ubatch_size, 0) > 1
    }

    /// vLLM's `num_ubatches`: 2 with DBO whatever `--ubatch-size` says, else `--ubatch-size` (at
    /// least 1) (`vllm/config/parallel.py:539-540`).
    pub fn num_ubatches(&self) -> u32 {
        if flag_on(&self.enable_dbo) {
            2
        } else {
            value_or(&self.ubatch_size, 0).max(1)
        }
    }

    /// `--enforce-eager` (default off).
    pub fn enforce_eager(&self) -> bool {
        flag_on(&self.enforce_eager)
    }

    /// The optimization level (`-O<n>`): vLLM's default `-O2` when absent
    /// (`vllm/config/vllm.py:381`).
    pub fn optimization_level(&self) -> u8 {
        self.optimization_level.as_ref().map_or(2, |l| l.value)
    }

    /// The torch.compile mode (`CompilationMode`: 0 none, 3 vLLM's piecewise Inductor backend):
    /// none under `--enforce-eager` (`vllm/config/vllm.py:1164-1169`), else the compilation
    /// config's `mode` (or old `level`), else vLLM's piecewise backend above `-O0`
    /// (`vllm/config/vllm.py:1237-1241`).
    pub fn compile_mode(&self) -> i64 {
        if self.enforce_eager() {
            return COMPILE_MODE_NONE;
        }
        match &self.compilation.level {
            Some(mode) => mode.value,
            None if self.optimization_level() > 0 => COMPILE_MODE_VLLM,
            None => COMPILE_MODE_NONE,
        }
    }

    /// The CUDA-graph mode vLLM's config settles on (`VllmConfig.__post_init__`): `NONE` when
    /// eager; else `cudagraph_mode`, or the optimization level's (`-O0` NONE, `-O1` PIECEWISE,
    /// `-O2`/`-O3` [`DEFAULT_CUDAGRAPH_MODE`], `vllm/config/vllm.py:205-296`); a mode with
    /// piecewise graphs becomes `NONE` unless the model is compiled piecewise
    /// (`vllm/config/vllm.py:1278-1288`). `FULL` is resolved later, by the attention backend
    /// ([`crate::serving::ServingConfig::from_plain`]).
    pub fn cudagraph_mode(&self) -> CudaGraphMode {
        if self.enforce_eager() {
            return CudaGraphMode::None;
        }
        let mode = match &self.compilation.cudagraph_mode {
            Some(m) => m.value,
            None => match self.optimization_level() {
                0 => CudaGraphMode::None,
                1 => CudaGraphMode::Piecewise,
                _ => DEFAULT_CUDAGRAPH_MODE,
            },
        };
        let piecewise = matches!(
            mode,
            CudaGraphMode::Piecewise | CudaGraphMode::FullAndPiecewise
        );
        if piecewise && self.compile_mode() != COMPILE_MODE_VLLM {
            return CudaGraphMode::None;
        }
        mode
    }

    /// True when the role captures and replays CUDA graphs.
    pub fn uses_cuda_graphs(&self) -> bool {
        self.cudagraph_mode() != CudaGraphMode::None
    }

    /// Capture sizes as vLLM resolves them from the current fields (see `compilation.rs`),
    /// ascending; empty when eager. Computed on each call: a hot loop should keep the result.
    pub fn capture_sizes(&self) -> Vec<u32> {
        self.capture_sizes_at(self.max_num_seqs(), self.max_num_batched_tokens())
    }

    /// [`Self::capture_sizes`] of a server whose limits are `max_num_seqs` and
    /// `max_num_batched_tokens` (a recorded run's, whose defaults came from its GPU).
    pub fn capture_sizes_at(&self, max_num_seqs: u32, max_num_batched_tokens: u32) -> Vec<u32> {
        let compilation = &self.compilation;
        let sequence_parallel_tp = compilation
            .enable_sp
            .as_ref()
            .is_some_and(|sp| sp.value)
            .then(|| self.tp_size());
        resolve_capture_sizes(SizeInputs {
            graphs_on: self.uses_cuda_graphs(),
            explicit_sizes: compilation
                .cudagraph_capture_sizes
                .as_ref()
                .map(|s| s.value.as_slice()),
            explicit_max: compilation
                .max_cudagraph_capture_size
                .as_ref()
                .map(|m| m.value),
            max_num_seqs,
            max_num_batched_tokens,
            sequence_parallel_tp,
        })
    }

    /// The largest capture size, `None` when no graph is captured.
    pub fn max_capture_size(&self) -> Option<u32> {
        self.capture_sizes().last().copied()
    }

    /// The graph a uniform-decode step of `tokens` tokens replays: the smallest capture size
    /// ≥ `tokens` (afd-spec §5.1). `None` when graphs are off or `tokens` exceeds the largest size,
    /// so the step runs eagerly. Resolves the sizes on each call (see [`RoleConfig::capture_sizes`]).
    pub fn padded_graph_size(&self, tokens: u32) -> Option<u32> {
        padded_size(&self.capture_sizes(), tokens)
    }

    /// `--host`; `None` means all interfaces.
    pub fn http_host(&self) -> Option<&str> {
        self.http_host.as_ref().map(|h| h.value.as_str())
    }

    /// `--port`, default [`DEFAULT_HTTP_PORT`].
    pub fn http_port(&self) -> u16 {
        self.http_port
            .as_ref()
            .map_or(DEFAULT_HTTP_PORT, |p| p.value)
    }

    /// GPUs from `CUDA_VISIBLE_DEVICES`, `None` when unset.
    pub fn gpus(&self) -> Option<&[GpuId]> {
        self.gpus.as_ref().map(|g| g.value.as_slice())
    }

    /// An environment variable of the process.
    pub fn env_value(&self, name: &str) -> Option<&str> {
        self.env.get(name).map(|v| v.value.as_str())
    }

    /// The model runner vLLM 0.26.0 builds for this command (`VllmConfig.use_v2_model_runner`,
    /// `vllm/config/vllm.py:549-591`): `VLLM_USE_V2_MODEL_RUNNER` when set (read as
    /// `bool(int(value))`, `vllm/envs.py:320-323, 1921-1924`); otherwise V2 for a default-V2
    /// architecture unless the command uses a feature V2 lacks (DBO, elastic EP, sequence
    /// parallelism with TP > 1: `vllm/config/vllm.py:2127-2213`), V1 for the rest. The
    /// architecture is judged as `DeepseekV2ForCausalLM`, a default-V2 architecture
    /// (`vllm/config/vllm.py:68-77`) and the model of every GPU recipe (afd-spec §3.1).
    pub fn model_runner(&self) -> ModelRunner {
        if let Some(value) = self
            .env_value("VLLM_USE_V2_MODEL_RUNNER")
            .and_then(crate::deployment::afd_config::parse_python_int)
        {
            return if value != 0 {
                ModelRunner::V2
            } else {
                ModelRunner::V1
            };
        }
        let sequence_parallel = self
            .compilation
            .enable_sp
            .as_ref()
            .is_some_and(|sp| sp.value)
            && self.tp_size() > 1;
        if flag_on(&self.enable_dbo) || flag_on(&self.enable_elastic_ep) || sequence_parallel {
            ModelRunner::V1
        } else {
            ModelRunner::V2
        }
    }

    /// Whether [`RoleConfig::model_runner`] resolves to V2.
    pub fn uses_model_runner_v2(&self) -> bool {
        self.model_runner() == ModelRunner::V2
    }

    /// Whether `VLLM_USE_V2_MODEL_RUNNER` is set at all (else vLLM decides, see above).
    pub fn sets_model_runner(&self) -> bool {
        self.env_value("VLLM_USE_V2_MODEL_RUNNER").is_some()
    }

    /// Findings made while parsing (afd-spec §1.3 coercions, notes).
    pub fn parse_findings(&self) -> &[Finding] {
        &self.parse_findings
    }
}

/// The smallest of ascending `sizes` that is ≥ `tokens`, for callers that keep the sizes.
pub fn padded_size(sizes: &[u32], tokens: u32) -> Option<u32> {
    let index = sizes.partition_point(|&size| size < tokens);
    sizes.get(index).copied()
}

fn value_or<T: Copy>(value: &Option<Located<T>>, default: T) -> T {
    value.as_ref().map_or(default, |v| v.value)
}

fn flag_on(value: &Option<Located<bool>>) -> bool {
    value.as_ref().is_some_and(|v| v.value)
}
