//! The rule catalogue: every check `afd-sim check` runs, with a stable id, its severity, the rule
//! sets it belongs to, the afd-spec section it comes from and a one-line statement.
//!
//! The conformance suite lists these as its static invariants, so ids never change meaning; a rule
//! that is retired keeps its id out of use. The checks themselves live in `validate.rs`.

use crate::deployment::findings::Severity;
use crate::topology::RuleSet;

/// One entry of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleInfo {
    pub rule: Rule,
    /// Stable id, `area.name` (`afd.port-range`, `v026.model-runner-v2`, `cross.gpu-overlap`).
    pub id: &'static str,
    pub severity: Severity,
    /// The rule sets that apply the rule.
    pub rule_sets: &'static [RuleSet],
    /// Where the rule comes from (afd-spec §, DESIGN §, or the upstream vLLM file).
    pub source: &'static str,
    /// What must hold, in one line.
    pub statement: &'static str,
}

impl RuleInfo {
    pub fn applies_to(&self, rules: RuleSet) -> bool {
        self.rule_sets.contains(&rules)
    }
}

macro_rules! catalogue {
    ($($variant:ident {
        id: $id:literal,
        severity: $severity:ident,
        sets: [$($set:ident),+],
        source: $source:literal,
        statement: $statement:literal $(,)?
    }),+ $(,)?) => {
        /// A rule of the catalogue; [`Rule::info`] gives its entry.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Rule {
            $($variant),+
        }

        static RULES: &[RuleInfo] = &[
            $(RuleInfo {
                rule: Rule::$variant,
                id: $id,
                severity: Severity::$severity,
                rule_sets: &[$(RuleSet::$set),+],
                source: $source,
                statement: $statement,
            }),+
        ];
    };
}

catalogue! {
    AfdMissingBlock {
        id: "afd.missing-block", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.1, §1.4",
        statement: "each role passes --additional-config with an \"afd\" block (without it AFD is off)",
    },
    AfdConfigMapping {
        id: "afd.config-mapping", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.1",
        statement: "--additional-config is a JSON object and its \"afd\" value is an object",
    },
    AfdUnknownField {
        id: "afd.unknown-field", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.2, §1.3",
        statement: "the afd block has only the keys of §1.2 and their aliases (removed keys are unknown)",
    },
    AfdDuplicateField {
        id: "afd.duplicate-field", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.3",
        statement: "a key and its alias are not both present in the afd block",
    },
    AfdBoolField {
        id: "afd.bool-field", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.3",
        statement: "async/async_dp and compute_gate_on_attention coerce to a boolean (bool, 0/1, true/false/yes/no/on/off)",
    },
    AfdIntField {
        id: "afd.int-field", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.3",
        statement: "port, num_attention_ranks and num_ffn_ranks coerce to an integer (no bool, no float)",
    },
    AfdExtraConfigMapping {
        id: "afd.extra-config-mapping", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.3",
        statement: "connector_extra_config is a JSON object",
    },
    AfdRole {
        id: "afd.role", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 1",
        statement: "role is \"attention\" or \"ffn\"",
    },
    AfdConnector {
        id: "afd.connector", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 3, §1.9",
        statement: "connector is one the plugin supports (GpuAsyncAFDConnector only under latest)",
    },
    AfdAsyncConnector {
        id: "afd.async-connector", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 4, §1.9",
        statement: "async_dp is only on with an async connector (CAMAsyncAFDConnector; also GpuAsyncAFDConnector under latest)",
    },
    AfdAttentionAtLeastFfn {
        id: "afd.attention-ge-ffn", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 5",
        statement: "with P2pNcclAFDConnector, num_attention_ranks >= num_ffn_ranks",
    },
    V026DivisibleRanks {
        id: "v026.divisible-ranks", severity: Error, sets: [V026],
        source: "afd-spec §1.4 rule 6, §2.2",
        statement: "with P2pNcclAFDConnector at v0.26, num_attention_ranks is a multiple of num_ffn_ranks",
    },
    AfdHostNonEmpty {
        id: "afd.host-nonempty", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 7",
        statement: "host is non-empty",
    },
    AfdPortRange {
        id: "afd.port-range", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 8",
        statement: "0 < port < 65536",
    },
    AfdAttentionRanksPositive {
        id: "afd.attention-ranks-positive", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 9",
        statement: "num_attention_ranks > 0",
    },
    AfdFfnRanksPositive {
        id: "afd.ffn-ranks-positive", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.4 rule 10",
        statement: "num_ffn_ranks > 0",
    },
    AfdP2pExtraConfig {
        id: "afd.p2p-extra-config", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.8",
        statement: "P2pNcclAFDConnector takes no connector_extra_config (an empty object at most)",
    },
    AfdGpuConnector {
        id: "afd.gpu-connector", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.6, §1.9, §2.7",
        statement: "a CUDA deployment uses P2pNcclAFDConnector, the one GPU connector whose mapping (§2.2-§2.5) is modelled",
    },
    AfdPluginLoaded {
        id: "afd.plugin-loaded", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.1, §9.1",
        statement: "VLLM_PLUGINS, when set, includes afd (the plugin loads as a vLLM general plugin)",
    },
    AfdWorkerCls {
        id: "afd.worker-cls", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.5",
        statement: "--worker-cls is auto or the role's AFD worker (afd_plugin.v1.worker.AFDAttentionWorker / AFDFFNWorker)",
    },
    AfdRoleRanks {
        id: "afd.role-ranks", severity: Error, sets: [V026, Latest],
        source: "afd-spec §2.1, §1.9, §9.1",
        statement: "the role's rank count in the afd block equals its DP x PCP x TP (every role rank exists exactly once)",
    },
    AfdPipelineParallel {
        id: "afd.pipeline-parallel", severity: Error, sets: [V026, Latest],
        source: "afd-spec §2.1, §1.9",
        statement: "pipeline parallel size is 1 (the role-rank formula has no PP term, so PP stages would share role ranks)",
    },
    AfdUbatchCount {
        id: "afd.ubatch-count", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.6, §1.9, §4.4",
        statement: "when ubatching is on (--enable-dbo or --ubatch-size > 1) there are exactly two ubatches",
    },
    AfdCudagraphMode {
        id: "afd.cudagraph-mode", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.6, §1.9, §5.1",
        statement: "each role runs --enforce-eager or cudagraph_mode FULL_DECODE_ONLY (vLLM's default FULL_AND_PIECEWISE is rejected)",
    },
    AfdAttentionEplb {
        id: "afd.attention-eplb", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.6",
        statement: "the Attention role does not enable EPLB (CUDA remote experts)",
    },
    AfdSequenceParallelMoe {
        id: "afd.sequence-parallel-moe", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.6",
        statement: "no role uses sequence-parallel MoE (expert parallel with TP > 1 and DP > 1 on an all2all backend that implies it)",
    },
    V026ModelRunnerV2 {
        id: "v026.model-runner-v2", severity: Error, sets: [V026],
        source: "afd-spec §1.6",
        statement: "at v0.26 the AFD workers support only the V1 GPUModelRunner: the runner resolves to V1 (VLLM_USE_V2_MODEL_RUNNER=0, or unset where vLLM 0.26.0 picks V1)",
    },
    Mrv2ModelRunnerOff {
        id: "mrv2.model-runner-off", severity: Error, sets: [Latest],
        source: "afd-spec §1.9; vllm/config/vllm.py:549-591 (vLLM 0.26.0)",
        statement: "under latest the AFD GPU workers run model runner V2: it must not resolve to V1 (VLLM_USE_V2_MODEL_RUNNER=0, or unset with a feature V2 lacks, such as --enable-dbo)",
    },
    V026SubgroupPortRange {
        id: "v026.subgroup-port-range", severity: Error, sets: [V026],
        source: "afd-spec §2.3",
        statement: "at v0.26 the derived subgroup ports port+1 .. port+F stay below 65536",
    },
    V026FfnDpTokenVector {
        id: "v026.ffn-dp-token-vector", severity: Error, sets: [V026],
        source: "afd-spec §3.7 (issue #218)",
        statement: "at v0.26 FFN DP > 1 needs num_attention_ranks == num_ffn_ranks (the FFN reuses the Attention token vector)",
    },
    Mrv2GateOnAttention {
        id: "mrv2.gate-on-attention", severity: Error, sets: [Latest],
        source: "afd-spec §1.9",
        statement: "with model runner V2, compute_gate_on_attention is false",
    },
    Mrv2ContextParallel {
        id: "mrv2.context-parallel", severity: Error, sets: [Latest],
        source: "afd-spec §1.9",
        statement: "with model runner V2, prefill and decode context parallel sizes are 1",
    },
    Mrv2StaticExpertParallel {
        id: "mrv2.static-expert-parallel", severity: Error, sets: [Latest],
        source: "afd-spec §1.9",
        statement: "with model runner V2, expert parallelism is on and static: no EPLB, no elastic EP, no pass_config.enable_sp",
    },
    Mrv2DboAttentionDp {
        id: "mrv2.dbo-attention-dp", severity: Warning, sets: [Latest],
        source: "afd-spec §1.9, §4.4",
        statement: "with model runner V2, DBO on the Attention role wants Attention DP > 1 (the 4c98691 validator rejects DP 1; the seed's version accepts it)",
    },
    VllmBatchedTokensAtLeastSeqs {
        id: "vllm.batched-tokens-ge-seqs", severity: Error, sets: [V026, Latest],
        source: "vllm/config/scheduler.py:286-291 (vLLM 0.26.0); DESIGN §3",
        statement: "max_num_batched_tokens >= max_num_seqs, given or as vLLM defaults them",
    },
    VllmGpuMemoryUtilization {
        id: "vllm.gpu-memory-utilization", severity: Error, sets: [V026, Latest],
        source: "upstream vllm/config/cache.py",
        statement: "0 < --gpu-memory-utilization <= 1",
    },
    VllmCaptureSizeConsistency {
        id: "vllm.capture-size-consistency", severity: Error, sets: [V026, Latest],
        source: "afd-spec §5.1; upstream vllm/config/vllm.py _set_cudagraph_sizes",
        statement: "when both are given, --max-cudagraph-capture-size equals the largest usable cudagraph_capture_sizes entry",
    },
    VllmGpuCount {
        id: "vllm.gpu-count", severity: Error, sets: [V026, Latest],
        source: "vllm/v1/executor (world size vs visible devices), vLLM 0.26.0",
        statement: "a plain server's CUDA_VISIBLE_DEVICES lists at least DP(local) x PCP x TP x PP GPUs",
    },
    VllmUbatchAll2allBackend {
        id: "vllm.ubatch-all2all-backend", severity: Error, sets: [V026, Latest],
        source: "vllm/config/vllm.py:1531-1544 (vLLM 0.26.0); afd-spec §1.7",
        statement: "a plain server that ubatches (--enable-dbo or --ubatch-size > 1) uses the deepep_low_latency, deepep_high_throughput or nixl_ep all2all backend (the plugin patches this check only for AFD)",
    },
    VllmModelRunnerV2Features {
        id: "vllm.model-runner-v2-features", severity: Error, sets: [V026, Latest],
        source: "vllm/config/vllm.py:2127-2225 (vLLM 0.26.0)",
        statement: "a plain server forced onto model runner V2 (VLLM_USE_V2_MODEL_RUNNER=1) uses no feature V2 lacks (--enable-dbo, --enable-elastic-ep)",
    },
    MemoryRoleFits {
        id: "memory.role-fits", severity: Error, sets: [V026, Latest],
        source: "afd-spec §3.2, §6.1; vllm/v1/worker/gpu_worker.py determine_available_memory",
        statement: "every rank holds its role's weights plus vLLM's activation and CUDA-graph reserve within --gpu-memory-utilization of its GPU (checked for the model and GPU given to check)",
    },
    MemoryStateBlocks {
        id: "memory.state-blocks", severity: Error, sets: [V026, Latest],
        source: "vllm/config/compilation.py:1476-1497, vllm/v1/core/kv_cache_utils.py (vLLM 0.26.0)",
        statement: "a hybrid linear-attention model that replays full CUDA graphs has at least --max-num-seqs KV blocks, one state block per decode sequence (checked for the model and GPU given to check)",
    },
    GraphCaptureAboveMaxNumSeqs {
        id: "graph.capture-above-max-num-seqs", severity: Warning, sets: [V026, Latest],
        source: "afd-spec §5.1, §9.1; DESIGN §3",
        statement: "capture sizes do not exceed --max-num-seqs (a uniform decode batch never has more tokens than sequences)",
    },
    GraphCaptureAboveBatchedTokens {
        id: "graph.capture-above-batched-tokens", severity: Warning, sets: [V026, Latest],
        source: "afd-spec §5.1; upstream vllm/config/vllm.py _set_cudagraph_sizes",
        statement: "capture sizes do not exceed --max-num-batched-tokens (vLLM drops those sizes)",
    },
    DboDecodeThresholdHazard {
        id: "dbo.decode-threshold-hazard", severity: Warning, sets: [V026, Latest],
        source: "afd-spec §4.2",
        statement: "with Attention DP > 1 and DBO, --dbo-decode-token-threshold is at least 2 (threshold 1 risks a 1-stage/2-stage disagreement)",
    },
    CrossRolesDiffer {
        id: "cross.roles-differ", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3; afd-spec §1.4",
        statement: "one command is the attention role and the other the ffn role",
    },
    CrossRendezvousMatch {
        id: "cross.rendezvous-match", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3; afd-spec §2.3",
        statement: "both roles name the same AFD host and port",
    },
    CrossRankCountsMatch {
        id: "cross.rank-counts-match", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3; afd-spec §2.2",
        statement: "both roles give the same num_attention_ranks and num_ffn_ranks",
    },
    CrossProtocolMatch {
        id: "cross.protocol-match", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.2 (compute_hash), §3.2",
        statement: "both roles agree on connector, async_dp and compute_gate_on_attention",
    },
    CrossGpuCount {
        id: "cross.gpu-count", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3; afd-spec §9.1",
        statement: "a role's CUDA_VISIBLE_DEVICES lists DP(local) x PCP x TP x PP GPUs",
    },
    CrossGpuList {
        id: "cross.gpu-list", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3",
        statement: "CUDA_VISIBLE_DEVICES is a comma-separated list of distinct GPU indices or UUIDs",
    },
    CrossGpuOverlap {
        id: "cross.gpu-overlap", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3",
        statement: "the two roles' GPU sets are disjoint",
    },
    CrossHostPartial {
        id: "cross.host-partial", severity: Warning, sets: [V026, Latest],
        source: "afd-spec §2.3; DESIGN §3",
        statement: "either both roles set VLLM_HOST_IP or neither (with one only, both are judged as on one host)",
    },
    CrossAfdHostOnFfnHost {
        id: "cross.afd-host-on-ffn-host", severity: Error, sets: [V026, Latest],
        source: "afd-spec §1.2 (host), §2.3",
        statement: "when the roles run on different hosts, the AFD host is the FFN role's host (FFN rank 0 is world rank 0 and serves the TCP store), not a loopback address",
    },
    CrossDpNodes {
        id: "cross.dp-nodes", severity: Error, sets: [V026, Latest],
        source: "vLLM 0.26.0 engine/arg_utils.py (--data-parallel-size-local, --data-parallel-start-rank, --data-parallel-address); afd_plugin/distributed/topology.py resolve_role_rank",
        statement: "a role's commands start each of its DP ranks once (--data-parallel-start-rank and --data-parallel-size-local tile 0..DP), agree with its primary command on DP, PCP, TP, PP, model and afd ranks, dial one --data-parallel-address (the primary's host), and share no GPU with a command on the same host",
    },
    CrossGpusUnspecified {
        id: "cross.gpus-unspecified", severity: Warning, sets: [V026, Latest],
        source: "DESIGN §3",
        statement: "each role sets CUDA_VISIBLE_DEVICES, so GPU placement can be checked (without it both roles start at GPU 0)",
    },
    CrossHttpPortVsRendezvous {
        id: "cross.http-port-vs-rendezvous", severity: Error, sets: [V026, Latest],
        source: "DESIGN §3; afd-spec §2.3",
        statement: "no role's HTTP --port is an AFD rendezvous port (port, and port+1 .. port+F at v0.26)",
    },
    CrossSharedHttpPort {
        id: "cross.shared-http-port", severity: Warning, sets: [V026, Latest],
        source: "afd-spec §6.4",
        statement: "the roles do not share one HTTP host:port (with SO_REUSEPORT client connections may reach the FFN server)",
    },
    CrossModelMatch {
        id: "cross.model-match", severity: Warning, sets: [V026, Latest],
        source: "afd-spec §3.2",
        statement: "both roles load the same model path (each loads its half of the same checkpoint)",
    },
    MemoryMaxLenFits {
        id: "memory.max-model-len-fits", severity: Error, sets: [V026, Latest],
        source: "vllm/v1/core/kv_cache_utils.py (_check_enough_kv_cache_memory)",
        statement: "the KV cache of a role that keeps one holds one request of --max-model-len tokens (the model's maximum by default)",
    },
    NoteUnknownFlag {
        id: "note.unknown-flag", severity: Note, sets: [V026, Latest],
        source: "DESIGN §3",
        statement: "vllm serve flags this model does not interpret are kept and listed",
    },
    NoteRepeatedFlag {
        id: "note.repeated-flag", severity: Note, sets: [V026, Latest],
        source: "DESIGN §3",
        statement: "a flag given twice takes its last value, as argparse does",
    },
    NoteAbbreviatedFlag {
        id: "note.abbreviated-flag", severity: Note, sets: [V026, Latest],
        source: "vllm/utils/argparse_utils.py (argparse's allow_abbrev)",
        statement: "a flag written as the beginning of one vllm serve option is read as that option, as vLLM reads it",
    },
}

impl Rule {
    /// The catalogue entry of this rule.
    pub fn info(self) -> &'static RuleInfo {
        &RULES[self as usize]
    }

    /// The stable id (`afd.port-range`).
    pub fn id(self) -> &'static str {
        self.info().id
    }

    /// Looks a rule up by its id.
    pub fn from_id(id: &str) -> Option<Rule> {
        RULES
            .iter()
            .find(|info| info.id == id)
            .map(|info| info.rule)
    }
}

/// The whole catalogue, in a stable order.
pub fn rules() -> &'static [RuleInfo] {
    RULES
}

/// The rules one rule set applies.
pub fn rules_of(rules: RuleSet) -> impl Iterator<Item = &'static RuleInfo> {
    RULES.iter().filter(move |info| info.applies_to(rules))
}
