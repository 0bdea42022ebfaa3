//! A point of the space as a deployment: the `vllm serve` command lines it stands for, judged by
//! the deployment model's rules (docs/foundation.md) exactly as `afd-sim check` judges them, and
//! the timing view the simulator runs.
//!
//! The AFD pair is two command lines with an `afd` block (P2pNcclAFDConnector), the model runner
//! the rule set's plugin needs (`VLLM_USE_V2_MODEL_RUNNER=1` under latest, `=0` under v0.26),
//! `--enable-expert-parallel` on both roles (as the recipes do; the V2 runner requires it), and the
//! same batch, DBO and graph flags on both roles; its GPUs are numbered consecutively, Attention
//! first. Beyond the deployment rules the planner checks what its placement needs: a TP group never
//! straddles a node, and Attention TP divides the attention heads (`planner.*` ids). The baseline is
//! one plain `vllm serve` command with expert parallelism (and the DeepEP low-latency all2all
//! backend when it ubatches, as vLLM requires), judged by vLLM's own rules exactly as
//! `afd-sim check --serve-args` judges it, and simulated as `predict --serve-args` simulates it.

use crate::deployment::{Deployment, RecipeOptions, Report, RoleConfig, Severity};
use crate::launch::PlainServer;
use crate::model::arch::ModelArch;
use crate::model::hardware::GpuKind;
use crate::planner::space::{Budget, Capture, Point};
use crate::serving::{Placement, ServingConfig};
use crate::topology::RuleSet;

/// Rule id: a TP group would span two nodes, or TP exceeds a node.
pub const RULE_TP_NODE: &str = "planner.tp-node";
/// Rule id: Attention TP does not divide the model's attention heads.
pub const RULE_TP_HEADS: &str = "planner.tp-heads";
/// Rule id: the simulator's timing view refuses the deployment.
pub const RULE_SERVING: &str = "planner.serving";
/// Rule id: vLLM's `max_num_batched_tokens >= max_num_seqs` (checked for both placements by the
/// deployment rules, under this id).
pub const RULE_BATCHED_TOKENS: &str = "vllm.batched-tokens-ge-seqs";

/// The Attention server's HTTP port, the FFN server's, and the AFD rendezvous port of the
/// generated command lines (distinct, so no cross-role port rule fires).
const ATTENTION_HTTP_PORT: u16 = 8000;
const FFN_HTTP_PORT: u16 = 8001;
const AFD_PORT: u16 = 6269;

/// What every candidate of a sweep shares.
#[derive(Clone, Debug, PartialEq)]
pub struct Context<'a> {
    pub model: &'a ModelArch,
    /// The model as the command lines name it (a path or a Hugging Face id).
    pub model_path: &'a str,
    pub gpu: GpuKind,
    pub rules: RuleSet,
    pub budget: Budget,
}

/// A legal point: its command lines, the simulator's view of it and what the rules warned about.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    pub point: Point,
    /// Environment prefix then flags, as `afd-sim predict --attention-args` reads them.
    pub attention_args: String,
    /// Empty for the baseline.
    pub ffn_args: String,
    pub config: ServingConfig,
    /// Capture sizes as vLLM resolves them (empty when eager).
    pub capture_sizes: Vec<u32>,
    /// Ids of the rules that warned.
    pub warnings: Vec<String>,
    pub nodes: u32,
    pub cross_node: bool,
    /// NICs per host the A↔F hand-offs of a cross-node AFD candidate share (the `nics` dimension);
    /// `None`: the link's own count, or no network at all.
    pub nics: Option<u32>,
}

/// Judges `point`: the candidate, or the ids of every rule it breaks.
pub fn judge(point: &Point, context: &Context<'_>) -> Result<Candidate, Vec<String>> {
    let mut broken = placement_findings(point, context);
    let built = match point.placement {
        Placement::Disaggregated => afd(point, context),
        Placement::Colocated => colocated(point, context),
    };
    match built {
        Ok(candidate) if broken.is_empty() => Ok(candidate),
        Ok(_) => Err(broken),
        Err(mut ids) => {
            broken.append(&mut ids);
            broken.sort();
            broken.dedup();
            Err(broken)
        }
    }
}

/// TP groups inside nodes, Attention TP dividing the heads.
fn placement_findings(point: &Point, context: &Context<'_>) -> Vec<String> {
    let node = context.budget.gpus_per_node.max(1);
    let mut broken = Vec::new();
    let mut offset = 0;
    for layout in std::iter::once(point.attention).chain(point.ffn) {
        let straddles = (0..layout.dp).any(|d| {
            let first = offset + d * layout.tp;
            first / node != (first + layout.tp - 1) / node
        });
        if layout.tp > node || straddles {
            broken.push(RULE_TP_NODE.to_owned());
        }
        offset += layout.ranks();
    }
    let heads = match &context.model.config.attention {
        afd_traces::model_config::Attention::Mla(mla) => mla.num_heads,
        afd_traces::model_config::Attention::Gqa(gqa) => gqa.num_heads,
    };
    if !heads.is_multiple_of(point.attention.tp) {
        broken.push(RULE_TP_HEADS.to_owned());
    }
    broken.sort();
    broken.dedup();
    broken
}

/// `CUDA_VISIBLE_DEVICES` of GPUs `first..first + count`.
fn devices(first: u32, count: u32) -> String {
    (first..first + count)
        .map(|g| g.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Flags every server of the candidate shares: batch limits, DBO, graphs.
fn shared_flags(point: &Point) -> String {
    let mut flags = format!(
        " --max-num-seqs {} --max-num-batched-tokens {}",
        point.max_num_seqs, point.max_num_batched_tokens
    );
    if let Some(dbo) = point.dbo {
        flags.push_str(&format!(
            " --enable-dbo --dbo-decode-token-threshold {} --dbo-prefill-token-threshold {}",
            dbo.decode_threshold, dbo.prefill_threshold
        ));
    }
    match &point.capture {
        Capture::Eager => flags.push_str(" --enforce-eager"),
        Capture::Auto => {
            flags.push_str(" --compilation-config '{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}'");
        }
        Capture::Max(max) => flags.push_str(&format!(
            " --max-cudagraph-capture-size {max} --compilation-config '{{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}}'"
        )),
        Capture::Sizes(sizes) => {
            let list: Vec<String> = sizes.iter().map(u32::to_string).collect();
            flags.push_str(&format!(
                " --compilation-config '{{\"cudagraph_mode\": \"FULL_DECODE_ONLY\", \"cudagraph_capture_sizes\": [{}]}}'",
                list.join(", ")
            ));
        }
    }
    flags
}

fn afd(point: &Point, context: &Context<'_>) -> Result<Candidate, Vec<String>> {
    let attention = point.attention;
    let ffn = point.ffn.expect("an AFD point has an FFN layout");
    let (a, f) = (attention.ranks(), ffn.ranks());
    let block = |role: &str| {
        format!(
            "--additional-config '{{\"afd\": {{\"role\": \"{role}\", \"connector\": \"P2pNcclAFDConnector\", \"host\": \"127.0.0.1\", \"port\": {AFD_PORT}, \"num_attention_ranks\": {a}, \"num_ffn_ranks\": {f}}}}}'"
        )
    };
    let shared = shared_flags(point);
    let runner = match context.rules {
        RuleSet::Latest => 1,
        RuleSet::V026 => 0,
    };
    let attention_args = format!(
        "CUDA_VISIBLE_DEVICES={} VLLM_USE_V2_MODEL_RUNNER={runner} vllm serve {} --data-parallel-size {} --tensor-parallel-size {} --enable-expert-parallel {}{shared} --host 127.0.0.1 --port {ATTENTION_HTTP_PORT}",
        devices(0, a),
        context.model_path,
        attention.dp,
        attention.tp,
        block("attention"),
    );
    let ffn_args = format!(
        "CUDA_VISIBLE_DEVICES={} VLLM_USE_V2_MODEL_RUNNER={runner} vllm serve {} --data-parallel-size {} --tensor-parallel-size {}{} {}{shared} --host 127.0.0.1 --port {FFN_HTTP_PORT}",
        devices(a, f),
        context.model_path,
        ffn.dp,
        ffn.tp,
        if ffn.expert_parallel {
            " --enable-expert-parallel"
        } else {
            ""
        },
        block("ffn"),
    );
    let role = |text: &str| {
        RoleConfig::from_command_line(text, &RecipeOptions::default())
            .expect("generated command lines parse")
    };
    let class = context.gpu.batch_class();
    let deployment = Deployment::new(
        role(&attention_args).on_gpu(class),
        role(&ffn_args).on_gpu(class),
        context.rules,
    );
    let report = deployment.check();
    if !report.is_clean() {
        return Err(rule_ids(&report, Severity::Error));
    }
    let config = ServingConfig::from_deployment(&deployment, context.gpu)
        .map_err(|_| vec![RULE_SERVING.to_owned()])?;
    let topology = config
        .topology()
        .map_err(|_| vec![RULE_SERVING.to_owned()])?;
    let node = context.budget.gpus_per_node.max(1);
    let cross_node = (0..a).any(|r| r / node != (a + topology.subgroup_of_attention(r)) / node)
        || (f > 1 && a / node != (a + f - 1) / node);
    Ok(Candidate {
        point: point.clone(),
        capture_sizes: deployment.attention.capture_sizes(),
        warnings: rule_ids(&report, Severity::Warning),
        attention_args,
        ffn_args,
        config,
        nodes: (a + f).div_ceil(node),
        cross_node,
        nics: None,
    })
}

fn colocated(point: &Point, context: &Context<'_>) -> Result<Candidate, Vec<String>> {
    let layout = point.attention;
    let gpus = layout.ranks();
    // vLLM 0.26.0 ubatches only with a DeepEP or NIXL-EP all2all backend
    // (`vllm/config/vllm.py:1531-1544`).
    let backend = if point.dbo.is_some() {
        " --all2all-backend deepep_low_latency"
    } else {
        ""
    };
    let args = format!(
        "CUDA_VISIBLE_DEVICES={} vllm serve {} --data-parallel-size {} --tensor-parallel-size {} --enable-expert-parallel{backend}{} --port {ATTENTION_HTTP_PORT}",
        devices(0, gpus),
        context.model_path,
        layout.dp,
        layout.tp,
        shared_flags(point),
    );
    let role = RoleConfig::from_command_line(&args, &RecipeOptions::default())
        .expect("generated command lines parse")
        .on_gpu(context.gpu.batch_class());
    let plain = PlainServer {
        server: role.clone(),
        rules: context.rules,
    };
    let report = plain.check();
    if !report.is_clean() {
        return Err(rule_ids(&report, Severity::Error));
    }
    let config = ServingConfig::from_plain(&role, context.rules, context.gpu, context.model)
        .map_err(|_| vec![RULE_SERVING.to_owned()])?;
    let node = context.budget.gpus_per_node.max(1);
    Ok(Candidate {
        point: point.clone(),
        capture_sizes: role.capture_sizes(),
        attention_args: args,
        ffn_args: String::new(),
        config,
        warnings: rule_ids(&report, Severity::Warning),
        nodes: gpus.div_ceil(node),
        cross_node: gpus > node,
        nics: None,
    })
}

/// The sorted, distinct ids of the findings of one severity.
fn rule_ids(report: &Report, severity: Severity) -> Vec<String> {
    let mut ids: Vec<String> = report
        .findings()
        .iter()
        .filter(|f| f.severity == severity)
        .map(|f| f.rule.id().to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}
