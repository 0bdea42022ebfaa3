//! The checks of the rule catalogue (`rules.rs`) on a [`Deployment`]: per-role rules of afd-spec
//! §1.3–§1.9, vLLM's own limits on the flags this model reads, and the cross-role rules of
//! DESIGN §3. Every violation is reported, none stops the others.
//!
//! Each check names the role, the flag/key/variable and the place it was written; a cross-role
//! finding names the role whose command it points at (the FFN's, where the two disagree). Rules outside the
//! deployment's rule set are dropped at the end, so a check never needs to test the rule set itself
//! except where the two sets disagree on a value (the supported connector list).

use crate::deployment::Deployment;
use crate::deployment::afd_config::{
    AfdConfig, CAM_ASYNC_CONNECTOR, CAM_P2P_CONNECTOR, DEFAULT_AFD_PORT, GPU_ASYNC_CONNECTOR,
    P2P_NCCL_CONNECTOR,
};
use crate::deployment::compilation::CudaGraphMode;
use crate::deployment::findings::{Finding, Report, Subject};
use crate::deployment::location::{Located, Location};
use crate::deployment::role_config::{GpuId, RoleConfig};
use crate::deployment::rules::Rule;
use crate::topology::{Role, RuleSet};

/// Runs every rule of the deployment's rule set.
pub(crate) fn check(deployment: &Deployment) -> Report {
    let mut checker = Checker {
        rules: deployment.rules,
        findings: Vec::new(),
    };
    let nodes = deployment
        .nodes
        .iter()
        .filter_map(|n| Some((n.declared_role()?, n)));
    for (role, config) in [
        (Role::Attention, &deployment.attention),
        (Role::Ffn, &deployment.ffn),
    ]
    .into_iter()
    .chain(nodes)
    {
        for finding in config.parse_findings() {
            let mut finding = finding.clone();
            finding.role = Some(role);
            checker.push(finding);
        }
        checker.role(role, config);
        if let Some(afd) = config.afd() {
            checker.afd_block(role, config, afd);
        }
    }
    checker.cross(deployment);
    checker.dp_nodes(deployment);
    let rules = deployment.rules;
    let findings = checker
        .findings
        .into_iter()
        .filter(|f| f.rule.info().applies_to(rules))
        .collect();
    Report::new(rules, findings)
}

/// Runs vLLM 0.26.0's own rules on one plain `vllm serve` command (no `afd` block): the limits on
/// the flags this model reads, GPUs for its ranks, ubatching's all2all backend and the V2 runner's
/// missing features. Findings carry no role.
pub(crate) fn check_plain(server: &RoleConfig, rules: RuleSet) -> Report {
    let mut checker = Checker {
        rules,
        findings: server.parse_findings().to_vec(),
    };
    checker.vllm_limits(None, server);
    checker.plain(server);
    let findings = checker
        .findings
        .into_iter()
        .filter(|f| f.rule.info().applies_to(rules))
        .collect();
    Report::new(rules, findings)
}

/// Connectors the plugin accepts under each rule set (afd-spec §1.2, §1.9).
fn supported_connectors(rules: RuleSet) -> &'static [&'static str] {
    match rules {
        RuleSet::V026 => &[P2P_NCCL_CONNECTOR, CAM_P2P_CONNECTOR, CAM_ASYNC_CONNECTOR],
        RuleSet::Latest => &[
            P2P_NCCL_CONNECTOR,
            CAM_P2P_CONNECTOR,
            CAM_ASYNC_CONNECTOR,
            GPU_ASYNC_CONNECTOR,
        ],
    }
}

fn async_connectors(rules: RuleSet) -> &'static [&'static str] {
    match rules {
        RuleSet::V026 => &[CAM_ASYNC_CONNECTOR],
        RuleSet::Latest => &[CAM_ASYNC_CONNECTOR, GPU_ASYNC_CONNECTOR],
    }
}

fn role_title(role: Role) -> &'static str {
    match role {
        Role::Attention => "Attention",
        Role::Ffn => "FFN",
    }
}

struct Checker {
    rules: RuleSet,
    findings: Vec<Finding>,
}

impl Checker {
    fn push(&mut self, finding: Finding) {
        self.findings.push(finding);
    }

    fn report(
        &mut self,
        rule: Rule,
        role: Option<Role>,
        subject: Subject,
        location: Location,
        message: String,
    ) {
        self.push(
            Finding::new(rule, role, message)
                .with_subject(subject)
                .at(Some(location)),
        );
    }

    /// Rules on one role's flags and environment (afd-spec §1.5, §1.6, §1.9; vLLM limits).
    fn role(&mut self, role: Role, config: &RoleConfig) {
        self.runtime_stack(role, config);
        self.role_parallelism(role, config);
        self.cudagraph_mode(role, config);
        self.role_experts(role, config);
        if config.uses_model_runner_v2() {
            self.model_runner_v2(role, config);
        } else {
            self.model_runner_v1(role, config);
        }
        self.vllm_limits(Some(role), config);
    }

    /// The plugin's runtime stack on one role: an afd block, the plugin loaded, its worker class
    /// (afd-spec §1.5).
    fn runtime_stack(&mut self, role: Role, config: &RoleConfig) {
        let r = Some(role);
        let title = role_title(role);
        if config.afd.is_none() && config.additional_config.is_none() {
            self.report(
                Rule::AfdMissingBlock,
                r,
                Subject::flag("--additional-config"),
                config.location,
                format!("the {title} command has no --additional-config, so AFD is off for it"),
            );
        }
        if let Some(plugins) = config.env.get("VLLM_PLUGINS")
            && !plugins.value.split(',').any(|p| p.trim() == "afd")
        {
            self.report(
                Rule::AfdPluginLoaded,
                r,
                Subject::env("VLLM_PLUGINS"),
                plugins.location,
                format!(
                    "VLLM_PLUGINS='{}' does not load the afd plugin; add afd",
                    plugins.value
                ),
            );
        }
        if let Some(worker) = &config.worker_cls {
            let normalised = worker.value.replace(':', ".");
            let expected = match role {
                Role::Attention => "afd_plugin.v1.worker.AFDAttentionWorker",
                Role::Ffn => "afd_plugin.v1.worker.AFDFFNWorker",
            };
            if normalised != "auto" && normalised != expected {
                self.report(
                    Rule::AfdWorkerCls,
                    r,
                    Subject::flag("--worker-cls"),
                    worker.location,
                    format!(
                        "invalid worker class for AFD runtime stack: got={} expected={expected}; remove --worker-cls",
                        worker.value
                    ),
                );
            }
        }
    }

    /// Parallelism AFD does not support on a role: pipeline stages, and ubatch counts other than
    /// two (afd-spec §1.6).
    fn role_parallelism(&mut self, role: Role, config: &RoleConfig) {
        let r = Some(role);
        if let Some(pp) = config
            .pipeline_parallel_size
            .as_ref()
            .filter(|p| p.value > 1)
        {
            self.report(
                Rule::AfdPipelineParallel,
                r,
                Subject::flag("--pipeline-parallel-size"),
                pp.location,
                format!(
                    "--pipeline-parallel-size {} is not supported: PP stages would share AFD role ranks",
                    pp.value
                ),
            );
        }
        if config.uses_ubatching() && config.num_ubatches() != 2 {
            let location = config
                .ubatch_size
                .as_ref()
                .map_or(config.location, |u| u.location);
            self.report(
                Rule::AfdUbatchCount,
                r,
                Subject::flag("--ubatch-size"),
                location,
                format!(
                    "AFD ubatching currently supports exactly two ubatches, got --ubatch-size {}",
                    config.num_ubatches()
                ),
            );
        }
    }

    /// AFD captures only full decode graphs: `FULL_DECODE_ONLY`, or no graphs at all
    /// (`--enforce-eager`).
    fn cudagraph_mode(&mut self, role: Role, config: &RoleConfig) {
        let r = Some(role);
        let mode = config.cudagraph_mode();
        if !config.enforce_eager() && mode != CudaGraphMode::FullDecodeOnly {
            let (location, subject, how) = match (
                &config.compilation.cudagraph_mode,
                &config.optimization_level,
            ) {
                (Some(m), _) if m.value == mode => (
                    m.location,
                    Subject::compilation_key("cudagraph_mode"),
                    format!("got {mode}"),
                ),
                (Some(m), _) => (
                    m.location,
                    Subject::compilation_key("cudagraph_mode"),
                    format!(
                        "got {}, which vLLM turns into {mode} without its compiled model (compilation mode {})",
                        m.value,
                        config.compile_mode()
                    ),
                ),
                (None, Some(level)) => (
                    level.location,
                    Subject::flag("--optimization-level"),
                    format!(
                        "optimization level {} without cudagraph_mode or --enforce-eager gives {mode}",
                        level.value
                    ),
                ),
                (None, None) => (
                    config.location,
                    Subject::compilation_key("cudagraph_mode"),
                    format!(
                        "neither cudagraph_mode nor --enforce-eager is given, so vLLM uses {mode}"
                    ),
                ),
            };
            self.report(
                Rule::AfdCudagraphMode,
                r,
                subject,
                location,
                format!(
                    "AFD only supports CUDA graph mode FULL_DECODE_ONLY (or --enforce-eager) for {role}; {how}"
                ),
            );
        }
    }

    /// Expert features AFD refuses on a role: EPLB on the Attention role, and sequence-parallel
    /// MoE (which expert parallelism implies on some all2all backends).
    fn role_experts(&mut self, role: Role, config: &RoleConfig) {
        let r = Some(role);
        if role == Role::Attention
            && let Some(eplb) = config.enable_eplb.as_ref().filter(|e| e.value)
        {
            self.report(
                Rule::AfdAttentionEplb,
                r,
                Subject::flag("--enable-eplb"),
                eplb.location,
                "CUDA remote experts do not support EPLB on the Attention role".to_owned(),
            );
        }
        if config.uses_sequence_parallel_moe() {
            let location = flag_location(&config.enable_expert_parallel, config.location);
            self.report(
                Rule::AfdSequenceParallelMoe,
                r,
                Subject::flag("--enable-expert-parallel"),
                location,
                format!(
                    "AFD DeepSeek does not support sequence-parallel MoE: expert parallel with TP {} and DP {} on all2all backend {} implies it",
                    config.tp_size(),
                    config.dp_size(),
                    config.all2all_backend()
                ),
            );
        }
    }

    /// The V1 runner: refused by the latest plugin's GPU workers (afd-spec §1.9).
    fn model_runner_v1(&mut self, role: Role, config: &RoleConfig) {
        let env_location = config
            .env
            .get("VLLM_USE_V2_MODEL_RUNNER")
            .map_or(config.location, |v| v.location);
        let why = if config.sets_model_runner() {
            "VLLM_USE_V2_MODEL_RUNNER turns it off".to_owned()
        } else {
            "VLLM_USE_V2_MODEL_RUNNER is unset and vLLM 0.26.0 falls back to V1 for a feature V2 lacks (--enable-dbo, --enable-elastic-ep or sequence parallelism)".to_owned()
        };
        self.report(
            Rule::Mrv2ModelRunnerOff,
            Some(role),
            Subject::env("VLLM_USE_V2_MODEL_RUNNER"),
            env_location,
            format!(
                "the latest plugin's {role} worker requires the vLLM ModelRunnerV2, but {why}; set VLLM_USE_V2_MODEL_RUNNER=1"
            ),
        );
    }

    fn model_runner_v2(&mut self, role: Role, config: &RoleConfig) {
        let r = Some(role);
        let env_location = config
            .env
            .get("VLLM_USE_V2_MODEL_RUNNER")
            .map_or(config.location, |v| v.location);
        let why = if config.sets_model_runner() {
            ""
        } else {
            " (VLLM_USE_V2_MODEL_RUNNER is unset and vLLM 0.26.0 picks V2 for DeepseekV2ForCausalLM without DBO)"
        };
        self.report(
            Rule::V026ModelRunnerV2,
            r,
            Subject::env("VLLM_USE_V2_MODEL_RUNNER"),
            env_location,
            format!(
                "the {role} worker supports only the vLLM v1 GPUModelRunner at v0.26{why}; set VLLM_USE_V2_MODEL_RUNNER=0"
            ),
        );
        for (size, flag) in [
            (
                &config.prefill_context_parallel_size,
                "--prefill-context-parallel-size",
            ),
            (
                &config.decode_context_parallel_size,
                "--decode-context-parallel-size",
            ),
        ] {
            if let Some(size) = size.as_ref().filter(|s| s.value > 1) {
                self.report(
                    Rule::Mrv2ContextParallel,
                    r,
                    Subject::flag(flag),
                    size.location,
                    format!("AFD ModelRunnerV2 requires {flag} 1, got {}", size.value),
                );
            }
        }
        if !config.expert_parallel() {
            let location = flag_location(&config.enable_expert_parallel, config.location);
            self.report(
                Rule::Mrv2StaticExpertParallel,
                r,
                Subject::flag("--enable-expert-parallel"),
                location,
                "AFD ModelRunnerV2 requires static expert parallelism: add --enable-expert-parallel".to_owned(),
            );
        }
        for (flag, value) in [
            ("--enable-eplb", &config.enable_eplb),
            ("--enable-elastic-ep", &config.enable_elastic_ep),
        ] {
            if let Some(on) = value.as_ref().filter(|v| v.value) {
                self.report(
                    Rule::Mrv2StaticExpertParallel,
                    r,
                    Subject::flag(flag),
                    on.location,
                    format!("AFD ModelRunnerV2 requires static expert parallelism: remove {flag}"),
                );
            }
        }
        if let Some(sp) = config.compilation.enable_sp.as_ref().filter(|s| s.value) {
            self.report(
                Rule::Mrv2StaticExpertParallel,
                r,
                Subject::compilation_key("pass_config.enable_sp"),
                sp.location,
                "AFD ModelRunnerV2 does not support pass_config.enable_sp".to_owned(),
            );
        }
        if role == Role::Attention && config.dbo().is_some() && config.dp_size() == 1 {
            let location = flag_location(&config.enable_dbo, config.location);
            self.report(
                Rule::Mrv2DboAttentionDp,
                r,
                Subject::flag("--enable-dbo"),
                location,
                "DBO with Attention DP 1 under model runner V2: the 4c98691 validator raises 'AFD ModelRunnerV2 DBO/ubatching requires Attention DP > 1'; the seed recipe's plugin accepts it".to_owned(),
            );
        }
    }

    /// vLLM's own limits on the flags this model reads, and capture-size advice (§4, §5).
    fn vllm_limits(&mut self, role: Option<Role>, config: &RoleConfig) {
        self.scheduler_limits(role, config);
        self.dbo_decode_threshold(role, config);
        if config.uses_cuda_graphs() {
            self.capture_sizes(role, config);
        }
    }

    /// vLLM's checks of the batch limits and the memory fraction (`vllm/config/scheduler.py`,
    /// `vllm/config/cache.py`).
    fn scheduler_limits(&mut self, role: Option<Role>, config: &RoleConfig) {
        let r = role;
        // vLLM 0.26.0 raises on the resolved values (`vllm/config/scheduler.py:286-291`), so a
        // `--max-num-seqs` above the default batched-token budget fails as well.
        let (seqs, batched) = (config.max_num_seqs(), config.max_num_batched_tokens());
        if batched < seqs {
            let (flag, location) = match (&config.max_num_batched_tokens, &config.max_num_seqs) {
                (Some(b), _) => ("--max-num-batched-tokens", b.location),
                (None, Some(s)) => ("--max-num-seqs", s.location),
                (None, None) => ("--max-num-batched-tokens", config.location),
            };
            let given = |explicit: bool| if explicit { "" } else { " (vLLM's default)" };
            self.report(
                Rule::VllmBatchedTokensAtLeastSeqs,
                r,
                Subject::flag(flag),
                location,
                format!(
                    "max_num_batched_tokens ({batched}){} must be greater than or equal to max_num_seqs ({seqs}){}",
                    given(config.max_num_batched_tokens.is_some()),
                    given(config.max_num_seqs.is_some()),
                ),
            );
        }
        if let Some(fraction) = &config.gpu_memory_utilization
            && !(fraction.value > 0.0 && fraction.value <= 1.0)
        {
            self.report(
                Rule::VllmGpuMemoryUtilization,
                r,
                Subject::flag("--gpu-memory-utilization"),
                fraction.location,
                format!(
                    "--gpu-memory-utilization must be in (0, 1], got {}",
                    fraction.value
                ),
            );
        }
    }

    /// A decode threshold of one token with Attention DP above one: ranks may disagree on
    /// splitting a step (afd-spec §4.2).
    fn dbo_decode_threshold(&mut self, role: Option<Role>, config: &RoleConfig) {
        let r = role;
        if role == Some(Role::Attention)
            && config.dp_size() > 1
            && let Some(dbo) = config.dbo()
            && dbo.decode_token_threshold <= 1
        {
            let location = config
                .dbo_decode_token_threshold
                .as_ref()
                .map_or(config.location, |t| t.location);
            self.report(
                Rule::DboDecodeThresholdHazard,
                r,
                Subject::flag("--dbo-decode-token-threshold"),
                location,
                format!(
                    "decode threshold {} with Attention DP {}: vLLM may agree to split while AFD vetoes on a rank with one token, sending 1-stage and 2-stage payloads (afd-spec §4.2, unverified)",
                    dbo.decode_token_threshold,
                    config.dp_size()
                ),
            );
        }
    }

    /// Capture sizes of a role that replays CUDA graphs: the explicit maximum agrees with the
    /// sizes, and sizes above `--max-num-seqs` or `--max-num-batched-tokens` are never replayed
    /// or are dropped (§5.1).
    fn capture_sizes(&mut self, role: Option<Role>, config: &RoleConfig) {
        let r = role;
        let explicit_sizes = config.compilation.cudagraph_capture_sizes.as_ref();
        let explicit_max = config.compilation.max_cudagraph_capture_size.as_ref();
        if let (Some(sizes), Some(max)) = (explicit_sizes, explicit_max) {
            let usable = config.max_capture_size().unwrap_or(0);
            if max.value != usable {
                self.report(
                    Rule::VllmCaptureSizeConsistency,
                    r,
                    Subject::flag("--max-cudagraph-capture-size"),
                    max.location,
                    format!(
                        "customized max_cudagraph_capture_size (={}) should be consistent with the max value of cudagraph_capture_sizes (={usable}; given {:?})",
                        max.value, sizes.value
                    ),
                );
            }
        }
        let max_num_seqs = config.max_num_seqs();
        let mut above_seqs: Vec<(u32, Location, Subject)> = Vec::new();
        if let Some(sizes) = explicit_sizes {
            let over: Vec<u32> = sizes
                .value
                .iter()
                .copied()
                .filter(|&s| s > max_num_seqs)
                .collect();
            if let Some(&largest) = over.iter().max() {
                above_seqs.push((
                    largest,
                    sizes.location,
                    Subject::compilation_key("cudagraph_capture_sizes"),
                ));
            }
        }
        if let Some(max) = explicit_max.filter(|m| m.value > max_num_seqs) {
            above_seqs.push((
                max.value,
                max.location,
                Subject::flag("--max-cudagraph-capture-size"),
            ));
        }
        for (size, location, subject) in above_seqs {
            self.report(
                Rule::GraphCaptureAboveMaxNumSeqs,
                r,
                subject,
                location,
                format!(
                    "capture size {size} exceeds --max-num-seqs {max_num_seqs}: a uniform decode step has at most {max_num_seqs} tokens per DP rank, so that graph is captured but never replayed"
                ),
            );
        }
        if let Some(sizes) = explicit_sizes {
            let limit = config.max_num_batched_tokens();
            let dropped: Vec<u32> = sizes.value.iter().copied().filter(|&s| s > limit).collect();
            if !dropped.is_empty() {
                self.report(
                    Rule::GraphCaptureAboveBatchedTokens,
                    r,
                    Subject::compilation_key("cudagraph_capture_sizes"),
                    sizes.location,
                    format!(
                        "capture sizes {dropped:?} exceed --max-num-batched-tokens {limit}; vLLM drops them"
                    ),
                );
            }
        }
    }

    /// The rules of afd-spec §1.4 and §1.8 on one role's afd block.
    fn afd_block(&mut self, role: Role, config: &RoleConfig, afd: &AfdConfig) {
        self.afd_role_and_connector(role, afd);
        self.afd_rank_ratio(role, afd);
        self.afd_values_in_range(role, afd);
        self.afd_p2p_extra_config(role, afd);
        self.afd_role_ranks(role, config, afd);
        self.afd_subgroup_ports(role, afd);
        if config.uses_model_runner_v2() && afd.compute_gate_on_attention.value == Some(true) {
            self.report(
                Rule::Mrv2GateOnAttention,
                Some(role),
                afd.compute_gate_on_attention
                    .subject("compute_gate_on_attention"),
                afd.compute_gate_on_attention.location,
                "AFD ModelRunnerV2 requires compute_gate_on_attention=false".to_owned(),
            );
        }
    }

    /// The block's role name, its connector (one the rule set knows, and one that serves CUDA),
    /// and async mode on a connector that has it (afd-spec §1.4).
    fn afd_role_and_connector(&mut self, role: Role, afd: &AfdConfig) {
        let r = Some(role);
        let rules = self.rules;
        if afd.role().is_none() {
            self.report(
                Rule::AfdRole,
                r,
                afd.role.subject("role"),
                afd.role.location,
                format!(
                    "AFD role must be one of attention, ffn; got '{}'",
                    afd.role.value
                ),
            );
        }
        let connector = afd.connector.value.as_str();
        let supported = supported_connectors(rules);
        if !supported.contains(&connector) {
            self.report(
                Rule::AfdConnector,
                r,
                afd.connector.subject("connector"),
                afd.connector.location,
                format!(
                    "AFD connector must be one of {}; got '{connector}'",
                    supported.join(", ")
                ),
            );
        } else if connector != P2P_NCCL_CONNECTOR {
            let why = if connector == GPU_ASYNC_CONNECTOR {
                "its rank mapping is not modelled here"
            } else {
                "it is an Ascend NPU connector"
            };
            self.report(
                Rule::AfdGpuConnector,
                r,
                afd.connector.subject("connector"),
                afd.connector.location,
                format!(
                    "{connector} cannot serve this CUDA deployment: {why}; use {P2P_NCCL_CONNECTOR}"
                ),
            );
        }
        if afd.async_dp.value == Some(true) && !async_connectors(rules).contains(&connector) {
            self.report(
                Rule::AfdAsyncConnector,
                r,
                afd.async_dp.subject("async_dp"),
                afd.async_dp.location,
                format!(
                    "AFD async mode requires connector='{}'; got '{connector}'",
                    async_connectors(rules).join("' or '")
                ),
            );
        }
    }

    /// The P2P NCCL connector's rank ratio: at least as many Attention ranks as FFN ranks, and
    /// (at v0.26) a multiple of them.
    fn afd_rank_ratio(&mut self, role: Role, afd: &AfdConfig) {
        let r = Some(role);
        let attention = afd.num_attention_ranks.value;
        let ffn = afd.num_ffn_ranks.value;
        if afd.is_p2p_nccl()
            && let (Some(a), Some(f)) = (attention, ffn)
        {
            if a < f {
                self.report(
                    Rule::AfdAttentionAtLeastFfn,
                    r,
                    afd.num_attention_ranks.subject("num_attention_ranks"),
                    afd.num_attention_ranks.location,
                    format!(
                        "P2pNcclAFDConnector currently requires num_attention_ranks >= num_ffn_ranks, got {a} < {f}"
                    ),
                );
            } else if f != 0 && a.rem_euclid(f) != 0 {
                self.report(
                    Rule::V026DivisibleRanks,
                    r,
                    afd.num_attention_ranks.subject("num_attention_ranks"),
                    afd.num_attention_ranks.location,
                    format!(
                        "P2pNcclAFDConnector at v0.26 requires num_attention_ranks to be a multiple of num_ffn_ranks, got {a} % {f} = {}",
                        a.rem_euclid(f)
                    ),
                );
            }
        }
    }

    /// The block's values in their ranges: a host, a port in 1..65535, positive rank counts.
    fn afd_values_in_range(&mut self, role: Role, afd: &AfdConfig) {
        let r = Some(role);
        let rules = self.rules;
        let attention = afd.num_attention_ranks.value;
        let ffn = afd.num_ffn_ranks.value;
        if !afd.host_is_truthy {
            self.report(
                Rule::AfdHostNonEmpty,
                r,
                afd.host.subject("host"),
                afd.host.location,
                format!("AFD host must be non-empty, got {}", afd.host.value),
            );
        }
        if let Some(port) = afd.port.value
            && !(1..=65535).contains(&port)
        {
            self.report(
                Rule::AfdPortRange,
                r,
                afd.port.subject("port"),
                afd.port.location,
                format!("AFD port must be in 1..65535, got {port}"),
            );
        }
        if let Some(a) = attention.filter(|&a| a <= 0) {
            self.report(
                Rule::AfdAttentionRanksPositive,
                r,
                afd.num_attention_ranks.subject("num_attention_ranks"),
                afd.num_attention_ranks.location,
                format!("num_attention_ranks must be positive, got {a}"),
            );
        }
        if let Some(f) = ffn.filter(|&f| f <= 0) {
            let crash = if f == 0 && afd.is_p2p_nccl() && rules == RuleSet::V026 {
                " (at v0.26 the divisibility check divides by it first and raises ZeroDivisionError)"
            } else {
                ""
            };
            self.report(
                Rule::AfdFfnRanksPositive,
                r,
                afd.num_ffn_ranks.subject("num_ffn_ranks"),
                afd.num_ffn_ranks.location,
                format!("num_ffn_ranks must be positive, got {f}{crash}"),
            );
        }
    }

    /// The P2P NCCL connector takes no `connector_extra_config`.
    fn afd_p2p_extra_config(&mut self, role: Role, afd: &AfdConfig) {
        if afd.is_p2p_nccl()
            && let Some(extra) = afd
                .connector_extra_config
                .value
                .as_ref()
                .filter(|m| !m.is_empty())
        {
            let keys: Vec<&str> = extra.keys().map(String::as_str).collect();
            self.report(
                Rule::AfdP2pExtraConfig,
                Some(role),
                afd.connector_extra_config.subject("connector_extra_config"),
                afd.connector_extra_config.location,
                format!("P2pNcclAFDConnector does not support connector_extra_config (got keys {keys:?})"),
            );
        }
    }

    /// The block's rank count for this role is the role's own DP × PCP × TP.
    fn afd_role_ranks(&mut self, role: Role, config: &RoleConfig, afd: &AfdConfig) {
        let (own_ranks, own_key) = match role {
            Role::Attention => (&afd.num_attention_ranks, "num_attention_ranks"),
            Role::Ffn => (&afd.num_ffn_ranks, "num_ffn_ranks"),
        };
        if let Some(n) = own_ranks.value.filter(|&n| n > 0)
            && u64::try_from(n).ok() != Some(config.rank_count())
        {
            self.report(
                Rule::AfdRoleRanks,
                Some(role),
                own_ranks.subject(own_key),
                own_ranks.location,
                format!(
                    "{own_key} is {n} but the {} role runs --data-parallel-size {} x --prefill-context-parallel-size {} x --tensor-parallel-size {} = {} ranks",
                    role_title(role),
                    config.dp_size(),
                    config.pcp_size(),
                    config.tp_size(),
                    config.rank_count()
                ),
            );
        }
    }

    /// The P2P NCCL connector's subgroup stores listen on the ports after the AFD port, one per
    /// FFN rank; they must stay within 65535.
    fn afd_subgroup_ports(&mut self, role: Role, afd: &AfdConfig) {
        if afd.is_p2p_nccl()
            && let (Some(port), Some(f)) = (afd.port(), afd.ffn_ranks())
            && u64::from(port) + u64::from(f) > 65535
        {
            self.report(
                Rule::V026SubgroupPortRange,
                Some(role),
                afd.port.subject("port"),
                afd.port.location,
                format!(
                    "subgroup stores listen on port+1 .. port+{f} = {} .. {}, past 65535",
                    u64::from(port) + 1,
                    u64::from(port) + u64::from(f)
                ),
            );
        }
    }

    /// vLLM's own rules on a plain server that the AFD checks above do not cover.
    fn plain(&mut self, config: &RoleConfig) {
        if let Some(gpus) = &config.gpus {
            let need = config.gpu_count();
            if (gpus.value.len() as u64) < need {
                self.report(
                    Rule::VllmGpuCount,
                    None,
                    Subject::env("CUDA_VISIBLE_DEVICES"),
                    gpus.location,
                    format!(
                        "CUDA_VISIBLE_DEVICES lists {} GPUs but the server runs DP {} x PCP {} x TP {} x PP {} = {need} ranks",
                        gpus.value.len(),
                        config.dp_size_local(),
                        config.pcp_size(),
                        config.tp_size(),
                        config.pp_size()
                    ),
                );
            }
        }
        if config.uses_ubatching()
            && !matches!(
                config.all2all_backend(),
                "deepep_low_latency" | "deepep_high_throughput" | "nixl_ep"
            )
        {
            let location = flag_location(&config.enable_dbo, config.location);
            self.report(
                Rule::VllmUbatchAll2allBackend,
                None,
                Subject::flag("--all2all-backend"),
                location,
                format!(
                    "Microbatching currently only supports the deepep_low_latency, deepep_high_throughput, and nixl_ep all2all backends. {} is not supported",
                    config.all2all_backend()
                ),
            );
        }
        if config.uses_model_runner_v2() {
            let mut missing = Vec::new();
            if let Some(dbo) = config.enable_dbo.as_ref().filter(|d| d.value) {
                missing.push(("dual batch overlap", "--enable-dbo", dbo.location));
            }
            if let Some(ep) = config.enable_elastic_ep.as_ref().filter(|e| e.value) {
                missing.push((
                    "elastic expert parallelism",
                    "--enable-elastic-ep",
                    ep.location,
                ));
            }
            for (feature, flag, location) in missing {
                self.report(
                    Rule::VllmModelRunnerV2Features,
                    None,
                    Subject::flag(flag),
                    location,
                    format!(
                        "Model Runner V2 does not yet support: {feature} (VLLM_USE_V2_MODEL_RUNNER=1); unset it or set it to 0"
                    ),
                );
            }
        }
    }

    /// The cross-role rules of DESIGN §3.
    fn cross(&mut self, deployment: &Deployment) {
        let attention = &deployment.attention;
        let ffn = &deployment.ffn;
        self.roles_differ(attention, ffn);
        if let (Some(a), Some(f)) = (attention.afd(), ffn.afd()) {
            self.blocks_agree(a, f);
        }
        self.gpus(attention, ffn);
        self.hosts(attention, ffn);
        self.http_ports(deployment);
        if let (Some(a), Some(f)) = (&attention.model, &ffn.model)
            && a.value != f.value
        {
            self.report(
                Rule::CrossModelMatch,
                Some(Role::Ffn),
                Subject::flag("model"),
                f.location,
                format!(
                    "the roles load different model paths ('{}' and '{}'); each must load its half of the same checkpoint",
                    a.value, f.value
                ),
            );
        }
        // afd-spec §3.7: at v0.26 the FFN forward context carries the Attention token vector.
        let blocks = attention.afd().or(ffn.afd());
        if let Some(block) = blocks
            && let (Some(a), Some(f)) = (block.attention_ranks(), block.ffn_ranks())
            && a != f
            && ffn.dp_size() > 1
        {
            let location = flag_location(&ffn.data_parallel_size, ffn.location);
            self.report(
                Rule::V026FfnDpTokenVector,
                Some(Role::Ffn),
                Subject::flag("--data-parallel-size"),
                location,
                format!(
                    "FFN DP {} with {a} Attention and {f} FFN ranks: at v0.26 the FFN puts the Attention token vector in its forward context and the EP all2all asserts (issue #218)",
                    ffn.dp_size()
                ),
            );
        }
    }

    fn roles_differ(&mut self, attention: &RoleConfig, ffn: &RoleConfig) {
        let declared = [(Role::Attention, attention), (Role::Ffn, ffn)];
        let (da, df) = (attention.declared_role(), ffn.declared_role());
        if let Some(role) = da.filter(|_| da == df) {
            let at = ffn.afd().map_or(ffn.location, |b| b.role.location);
            self.report(
                Rule::CrossRolesDiffer,
                Some(Role::Ffn),
                Subject::afd_key("role"),
                at,
                format!(
                    "both commands declare role '{role}'; one must be attention and the other ffn"
                ),
            );
            return;
        }
        for (slot, config) in declared {
            if let Some(found) = config.declared_role().filter(|&d| d != slot) {
                let at = config.afd().map_or(config.location, |b| b.role.location);
                self.report(
                    Rule::CrossRolesDiffer,
                    Some(slot),
                    Subject::afd_key("role"),
                    at,
                    format!("the {slot} command declares role '{found}'"),
                );
            }
        }
    }

    fn blocks_agree(&mut self, a: &AfdConfig, f: &AfdConfig) {
        let ffn = Some(Role::Ffn);
        if a.host.value != f.host.value {
            self.report(
                Rule::CrossRendezvousMatch,
                ffn,
                f.host.subject("host"),
                f.host.location,
                format!(
                    "the FFN names AFD host '{}', the Attention role '{}'",
                    f.host.value, a.host.value
                ),
            );
        }
        if let (Some(pa), Some(pf)) = (a.port.value, f.port.value)
            && pa != pf
        {
            self.report(
                Rule::CrossRendezvousMatch,
                ffn,
                f.port.subject("port"),
                f.port.location,
                format!("the FFN names AFD port {pf}, the Attention role {pa}"),
            );
        }
        for (fa, ff, key) in [
            (
                &a.num_attention_ranks,
                &f.num_attention_ranks,
                "num_attention_ranks",
            ),
            (&a.num_ffn_ranks, &f.num_ffn_ranks, "num_ffn_ranks"),
        ] {
            if let (Some(va), Some(vf)) = (fa.value, ff.value)
                && va != vf
            {
                self.report(
                    Rule::CrossRankCountsMatch,
                    ffn,
                    ff.subject(key),
                    ff.location,
                    format!("the FFN says {key} {vf}, the Attention role {va}"),
                );
            }
        }
        if a.connector.value != f.connector.value {
            self.report(
                Rule::CrossProtocolMatch,
                ffn,
                f.connector.subject("connector"),
                f.connector.location,
                format!(
                    "the FFN uses connector '{}', the Attention role '{}'",
                    f.connector.value, a.connector.value
                ),
            );
        }
        for (fa, ff, key) in [
            (&a.async_dp, &f.async_dp, "async_dp"),
            (
                &a.compute_gate_on_attention,
                &f.compute_gate_on_attention,
                "compute_gate_on_attention",
            ),
        ] {
            if let (Some(va), Some(vf)) = (fa.value, ff.value)
                && va != vf
            {
                self.report(
                    Rule::CrossProtocolMatch,
                    ffn,
                    ff.subject(key),
                    ff.location,
                    format!("the FFN sets {key} {vf}, the Attention role {va}"),
                );
            }
        }
    }

    fn gpus(&mut self, attention: &RoleConfig, ffn: &RoleConfig) {
        for (role, config) in [(Role::Attention, attention), (Role::Ffn, ffn)] {
            let Some(gpus) = &config.gpus else {
                self.report(
                    Rule::CrossGpusUnspecified,
                    Some(role),
                    Subject::env("CUDA_VISIBLE_DEVICES"),
                    config.location,
                    format!(
                        "the {} command sets no CUDA_VISIBLE_DEVICES, so it starts on GPU 0 and placement cannot be checked",
                        role_title(role)
                    ),
                );
                continue;
            };
            let need = config.gpu_count();
            if gpus.value.len() as u64 != need {
                self.report(
                    Rule::CrossGpuCount,
                    Some(role),
                    Subject::env("CUDA_VISIBLE_DEVICES"),
                    gpus.location,
                    format!(
                        "CUDA_VISIBLE_DEVICES lists {} GPUs but the {} role needs DP {} x PCP {} x TP {} x PP {} = {need}",
                        gpus.value.len(),
                        role_title(role),
                        config.dp_size_local(),
                        config.pcp_size(),
                        config.tp_size(),
                        config.pp_size()
                    ),
                );
            }
        }
        // GPU indices name GPUs of one machine: roles on different hosts cannot share one.
        if let (Some(a), Some(f)) = (&attention.gpus, &ffn.gpus)
            && !on_different_hosts(attention, ffn)
        {
            let list = shared_gpus(&a.value, &f.value);
            if !list.is_empty() {
                self.report(
                    Rule::CrossGpuOverlap,
                    Some(Role::Ffn),
                    Subject::env("CUDA_VISIBLE_DEVICES"),
                    f.location,
                    format!("GPU {} is given to both roles", list.join(", ")),
                );
            }
        }
    }

    /// Placement on hosts (afd-spec §2.3): `VLLM_HOST_IP` on both roles or neither, and the
    /// rendezvous host where the TCP store runs, the FFN role's host.
    fn hosts(&mut self, attention: &RoleConfig, ffn: &RoleConfig) {
        match (attention.machine_host(), ffn.machine_host()) {
            (Some(_), None) | (None, Some(_)) => {
                let (role, config, other) = if attention.machine_host().is_some() {
                    (Role::Ffn, ffn, Role::Attention)
                } else {
                    (Role::Attention, attention, Role::Ffn)
                };
                self.report(
                    Rule::CrossHostPartial,
                    Some(role),
                    Subject::env("VLLM_HOST_IP"),
                    config.location,
                    format!(
                        "the {} command sets VLLM_HOST_IP but the {} command does not; both are judged as on one host",
                        role_title(other),
                        role_title(role)
                    ),
                );
            }
            (Some(a), Some(f)) if a.value != f.value => {
                let Some(block) = ffn.afd().or(attention.afd()) else {
                    return;
                };
                let afd_host = block.host.value.trim();
                let loopback =
                    afd_host == "localhost" || afd_host == "::1" || afd_host.starts_with("127.");
                let an_address = afd_host.parse::<std::net::IpAddr>().is_ok();
                if loopback || (an_address && afd_host != f.value.trim()) {
                    self.report(
                        Rule::CrossAfdHostOnFfnHost,
                        Some(Role::Ffn),
                        block.host.subject("host"),
                        block.host.location,
                        format!(
                            "the roles run on hosts {} (attention) and {} (ffn), but the AFD host is {afd_host}; FFN rank 0 serves the TCP store (afd-spec §2.3), so name the FFN host {}",
                            a.value, f.value, f.value
                        ),
                    );
                }
            }
            _ => {}
        }
    }

    /// A role whose DP ranks are spread over hosts, one command per host (vLLM multi-node data
    /// parallelism; the plugin's role rank is global, `resolve_role_rank`): the commands tile the
    /// DP ranks, agree on the role's shape and dial one address; no two commands on one host share
    /// a GPU.
    fn dp_nodes(&mut self, deployment: &Deployment) {
        for role in [Role::Attention, Role::Ffn] {
            let parts = deployment.parts(role);
            let primary = parts[0];
            let title = role_title(role);
            for &node in &parts[1..] {
                let shape = |c: &RoleConfig| (c.dp_size(), c.pcp_size(), c.tp_size(), c.pp_size());
                if shape(node) != shape(primary) {
                    let (dp, pcp, tp, pp) = shape(node);
                    let (pdp, ppcp, ptp, ppp) = shape(primary);
                    self.report(
                        Rule::CrossDpNodes,
                        Some(role),
                        Subject::flag("--data-parallel-size"),
                        flag_location(&node.data_parallel_size, node.location),
                        format!(
                            "this {title} command runs DP {dp} x PCP {pcp} x TP {tp} x PP {pp} but the role's primary command runs DP {pdp} x PCP {ppcp} x TP {ptp} x PP {ppp}; every host of one role gives the same sizes"
                        ),
                    );
                }
                if node.model() != primary.model() {
                    self.report(
                        Rule::CrossDpNodes,
                        Some(role),
                        Subject::flag("model"),
                        node.model.as_ref().map_or(node.location, |m| m.location),
                        format!(
                            "this {title} command loads '{}' but the role's primary command loads '{}'",
                            node.model().unwrap_or("(none)"),
                            primary.model().unwrap_or("(none)")
                        ),
                    );
                }
                let ranks = |c: &RoleConfig| c.afd().map(|b| (b.attention_ranks(), b.ffn_ranks()));
                if ranks(node) != ranks(primary) {
                    self.report(
                        Rule::CrossDpNodes,
                        Some(role),
                        Subject::afd_key("num_attention_ranks"),
                        node.additional_config.unwrap_or(node.location),
                        format!(
                            "this {title} command's afd block gives other rank counts than the role's primary command; every host of one role passes the same block"
                        ),
                    );
                }
            }
            self.dp_tiling(role, &parts);
            if parts.len() > 1 {
                self.dp_address(role, &parts);
            }
        }
        self.node_gpu_overlap(deployment);
    }

    /// The commands of one role start DP ranks 0..DP, each once.
    fn dp_tiling(&mut self, role: Role, parts: &[&RoleConfig]) {
        let dp = parts[0].dp_size();
        let mut order: Vec<&RoleConfig> = parts.to_vec();
        order.sort_by_key(|p| p.dp_start_rank());
        let mut next = 0u32;
        for part in order {
            let start = part.dp_start_rank();
            let end = start.saturating_add(part.dp_size_local());
            let last = end.saturating_sub(1);
            if start != next || end > dp {
                let message = if start < next {
                    format!(
                        "this {} command starts {} but {} already started by another command of the role",
                        role_title(role),
                        dp_ranks(start, last),
                        dp_ranks_are(start, (next - 1).min(last))
                    )
                } else if start > next {
                    format!(
                        "{} of the {} role {} started by no command (this one starts at {start})",
                        dp_ranks(next, start - 1),
                        role_title(role),
                        is_are(next, start - 1)
                    )
                } else {
                    format!(
                        "this {} command starts {} but the role has DP {dp}",
                        role_title(role),
                        dp_ranks(start, last)
                    )
                };
                self.report(
                    Rule::CrossDpNodes,
                    Some(role),
                    Subject::flag("--data-parallel-start-rank"),
                    flag_location(&part.data_parallel_start_rank, part.location),
                    message,
                );
                return;
            }
            next = end;
        }
        if next < dp {
            let last = parts[0];
            self.report(
                Rule::CrossDpNodes,
                Some(role),
                Subject::flag("--data-parallel-size-local"),
                flag_location(&last.data_parallel_size_local, last.location),
                format!(
                    "{} of the {} role {} started by no command: its commands start {next} of DP {dp} (--data-parallel-size-local); give each other host its command (--headless --data-parallel-start-rank {next} ...)",
                    dp_ranks(next, dp - 1),
                    role_title(role),
                    is_are(next, dp - 1)
                ),
            );
        }
    }

    /// Every command of a role spread over hosts names one `--data-parallel-address`, the
    /// primary's host (vLLM's default is 127.0.0.1, where no other host reaches it).
    fn dp_address(&mut self, role: Role, parts: &[&RoleConfig]) {
        let primary = parts[0];
        let wanted = primary
            .data_parallel_address
            .as_ref()
            .map(|a| a.value.trim())
            .or_else(|| primary.machine_host().map(|h| h.value.trim()));
        for &part in parts {
            let given = part.data_parallel_address.as_ref().map(|a| a.value.trim());
            let problem = match (given, wanted) {
                (None, _) => Some(format!(
                    "the {} role runs on {} hosts but this command sets no --data-parallel-address; vLLM then uses 127.0.0.1 and the other hosts never reach the primary",
                    role_title(role),
                    parts.len()
                )),
                (Some(g), Some(w)) if g != w => Some(format!(
                    "this {} command dials --data-parallel-address {g} but the role's primary command runs on {w}",
                    role_title(role)
                )),
                _ => None,
            };
            if let Some(message) = problem {
                self.report(
                    Rule::CrossDpNodes,
                    Some(role),
                    Subject::flag("--data-parallel-address"),
                    flag_location(&part.data_parallel_address, part.location),
                    message,
                );
            }
        }
    }

    /// No two commands on one host share a GPU, where one of them is a role's secondary node (the
    /// two primaries are judged by `cross.gpu-overlap`).
    fn node_gpu_overlap(&mut self, deployment: &Deployment) {
        // The primaries first: the pair of the two (indices 0 and 1) is `cross.gpu-overlap`'s.
        let all: Vec<&RoleConfig> = [&deployment.attention, &deployment.ffn]
            .into_iter()
            .chain(&deployment.nodes)
            .collect();
        let host = |c: &RoleConfig| c.machine_host().map(|h| h.value.trim().to_owned());
        for (i, a) in all.iter().enumerate() {
            for (j, b) in all.iter().enumerate().skip(i + 1) {
                let (Some(ga), Some(gb)) = (&a.gpus, &b.gpus) else {
                    continue;
                };
                if (i, j) == (0, 1) || host(a) != host(b) {
                    continue;
                }
                let shared = shared_gpus(&ga.value, &gb.value);
                if !shared.is_empty() {
                    self.report(
                        Rule::CrossDpNodes,
                        b.declared_role(),
                        Subject::env("CUDA_VISIBLE_DEVICES"),
                        gb.location,
                        format!(
                            "GPU {} of host {} is given to two commands",
                            shared.join(", "),
                            host(b).unwrap_or_else(|| "(unnamed)".to_owned())
                        ),
                    );
                }
            }
        }
    }

    fn http_ports(&mut self, deployment: &Deployment) {
        let attention = &deployment.attention;
        let ffn = &deployment.ffn;
        // Rendezvous ports of afd-spec §2.3, from whichever block has a usable port.
        let block = attention
            .afd()
            .filter(|b| b.port().is_some())
            .or_else(|| ffn.afd().filter(|b| b.port().is_some()));
        if let Some(block) = block {
            let base = u32::from(block.port().unwrap_or(DEFAULT_AFD_PORT));
            // Subgroup k's store listens on base + k + 1 at v0.26 (afd-spec §2.3).
            let subgroups = match self.rules {
                RuleSet::V026 => block.ffn_ranks().unwrap_or(0),
                RuleSet::Latest => 0,
            };
            for (role, config) in [(Role::Attention, attention), (Role::Ffn, ffn)] {
                // The stores listen on the FFN role's host; an Attention server elsewhere is free.
                if role == Role::Attention && on_different_hosts(attention, ffn) {
                    continue;
                }
                let http = u32::from(config.http_port());
                let which = if http == base {
                    "the AFD rendezvous port".to_owned()
                } else if http > base && http - base <= subgroups {
                    let k = http - base - 1;
                    format!("subgroup {k}'s store port (port+{})", k + 1)
                } else {
                    continue;
                };
                self.report(
                    Rule::CrossHttpPortVsRendezvous,
                    Some(role),
                    Subject::flag("--port"),
                    http_port_location(config),
                    format!(
                        "HTTP port {http} of the {} server is {which} on the AFD host; the TCP store and the HTTP server cannot both listen on it",
                        role_title(role)
                    ),
                );
            }
        }
        let (ha, hf) = (attention.http_host(), ffn.http_host());
        if attention.http_port() == ffn.http_port()
            && hosts_overlap(ha, hf)
            && !on_different_hosts(attention, ffn)
        {
            let host = ha.or(hf).unwrap_or("0.0.0.0");
            self.report(
                Rule::CrossSharedHttpPort,
                Some(Role::Ffn),
                Subject::flag("--port"),
                http_port_location(ffn),
                format!(
                    "both roles serve HTTP on {host}:{}; with SO_REUSEPORT both binds succeed and client connections may reach the FFN server, which never answers (afd-spec §6.4); send traffic to the Attention server only",
                    ffn.http_port()
                ),
            );
        }
    }
}

/// The GPUs both lists name, as the user wrote them.
fn shared_gpus(a: &[GpuId], b: &[GpuId]) -> Vec<String> {
    a.iter()
        .filter(|g| b.contains(g))
        .map(ToString::to_string)
        .collect()
}

/// `DP rank 2` or `DP ranks 2-3`.
fn dp_ranks(first: u32, last: u32) -> String {
    if first >= last {
        format!("DP rank {first}")
    } else {
        format!("DP ranks {first}-{last}")
    }
}

/// `DP rank 2 is` or `DP ranks 2-3 are`.
fn dp_ranks_are(first: u32, last: u32) -> String {
    format!("{} {}", dp_ranks(first, last), is_are(first, last))
}

fn is_are(first: u32, last: u32) -> &'static str {
    if first >= last { "is" } else { "are" }
}

fn flag_location<T>(flag: &Option<Located<T>>, fallback: Location) -> Location {
    flag.as_ref().map_or(fallback, |f| f.location)
}

fn http_port_location(config: &RoleConfig) -> Location {
    flag_location(&config.http_port, config.location)
}

/// True when both roles name their machine (`VLLM_HOST_IP`) and the names differ
/// ([`Deployment::on_different_hosts`]).
fn on_different_hosts(attention: &RoleConfig, ffn: &RoleConfig) -> bool {
    match (attention.machine_host(), ffn.machine_host()) {
        (Some(a), Some(f)) => a.value.trim() != f.value.trim(),
        _ => false,
    }
}

/// True when two `--host` values can accept on the same address (absent = all interfaces).
fn hosts_overlap(a: Option<&str>, b: Option<&str>) -> bool {
    let normalise = |host: Option<&str>| match host {
        None | Some("" | "0.0.0.0" | "::" | "[::]") => None,
        Some("localhost") => Some("127.0.0.1".to_owned()),
        Some(other) => Some(other.to_owned()),
    };
    match (normalise(a), normalise(b)) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

#[cfg(test)]
mod tests;
