//! `afd-sim warm-up`: the lone prompts that spare a freshly started vLLM server its first-use
//! Triton compiles of the fused-MoE kernel (`model::engine::jit`; docs/sim.md).

use std::process::ExitCode;

use afd_sim::launch::{Launch, serving_config_from_command_lines};
use afd_sim::model::engine::JitCache;
use afd_sim::model::hardware::GpuKind;
use afd_sim::topology::RuleSet;
use anyhow::bail;
use clap::Args;
use serde::Serialize;

use crate::cli::inputs::{parse_gpu, read_model};
use crate::cli::output::emit;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim warm-up --serve-args 'vllm serve /models/dsv2l --max-num-seqs 256 --max-num-batched-tokens 2048 -cc.cudagraph_mode=FULL_DECODE_ONLY'
  afd-sim warm-up --serve-args 'vllm serve /models/dsv2l --enforce-eager' --json
  afd-sim warm-up                                  vLLM's own defaults on an H200

vLLM 0.26 runs a bf16 MoE model's routed experts through a Triton kernel that it compiles in the
server, the first time a step needs each specialization: the tile config its default MoE config
picks for the step's token count, and which of the kernel's sizes are multiples of 16. Start-up
compiles the profile run's, the sampler warm-up's and every CUDA-graph capture size's; the first
step off those (most often a prefill or mixed step of an odd token count) then waits for the
compile, about 0.9 s on an H200 (the engine profile's jit_compile_ns; docs/fidelity.md, \"The
twenty-sixth batch\"), and the server logs \"Triton kernel JIT compilation during inference\".
This command lists, by the same rule the simulator prices, one prompt length for each
specialization start-up leaves out. Send each as a lone request (any output length), one at a time,
waiting for its answer, after the server is up and before the traffic you measure; after them no
step of up to --max-num-batched-tokens tokens compiles. Prefix caching must not shorten them: use
prompts that share no leading tokens with each other or with earlier traffic.
Checked on two fresh H200 servers at 128/4096 (docs/fidelity.md, \"The twenty-seventh batch\"): after
the listed prompts, no fused-MoE compile fell in a bench run. The list covers the fused-MoE kernel
only: MLA's mask_empty_context_kernel still compiled (0.1-0.6 s) at the first step that continued a
chunked prompt beside a fresh one.
The rule holds where vLLM has no tuned config for the experts' shape and GPU (the server logs
\"Using default MoE config\", as DeepSeek-V2-Lite's does on H100 and H200); another model is listed
by the same rule with a note.
Exit status: 0, or 2 for bad input (the message names the flag or word at fault).")]
pub(crate) struct WarmUpArgs {
    /// The server's command line: [NAME=value ...] [vllm serve] ARGS, shell-quoted (default: `vllm
    /// serve MODEL` with vLLM's own defaults).
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    serve_args: Option<String>,
    /// GPU kind the server runs on (vLLM's default limits depend on it).
    #[arg(long, value_name = "GPU", default_value = "h200", value_parser = parse_gpu)]
    gpu: GpuKind,
    /// Model architecture (a shipped name or a Hugging Face config.json).
    #[arg(
        long,
        value_name = "NAME_OR_CONFIG",
        default_value = "deepseek-v2-lite"
    )]
    model: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// What `--json` prints.
#[derive(Serialize)]
struct WarmUpReport {
    serve_args: String,
    gpu: &'static str,
    model: String,
    graph_mode: &'static str,
    max_num_seqs: u32,
    max_num_batched_tokens: u32,
    engines: u32,
    /// Specializations a step of up to the budget can need.
    specializations: usize,
    /// Of those, what start-up compiles.
    compiled_at_start: usize,
    /// Prompt lengths (tokens), one lone request each, ascending.
    prompts: Vec<u32>,
    /// What each first use costs a step by the GPU's built-in engine profile, ms (none without one).
    compile_ms: Option<f64>,
    notes: Vec<String>,
}

pub(crate) fn run(args: &WarmUpArgs) -> anyhow::Result<ExitCode> {
    let model = read_model(&args.model)?;
    if !model.has_moe() {
        bail!(
            "--model {}: the model has no MoE layer, so no fused-MoE kernel compiles on first use",
            args.model
        );
    }
    let line = match &args.serve_args {
        Some(line) => line.clone(),
        None => format!("vllm serve {}", model.name),
    };
    let launched = serving_config_from_command_lines(&[&line], RuleSet::Latest, args.gpu, &model)
        .map_err(|e| anyhow::anyhow!("--serve-args: {e}"))?;
    if !matches!(launched.launch, Launch::Plain(_)) {
        bail!(
            "--serve-args: the command line is one role of an AFD pair; warm-up lists a plain server's prompts"
        );
    }
    let config = &launched.config;
    let (experts, top_k) = (model.routed_experts(), model.experts_per_token());
    let budget = config.max_num_batched_tokens;
    let start = JitCache::at_start(&config.graph, config.max_num_seqs, budget, experts, top_k);
    let reachable = JitCache::reachable(&config.graph, budget, experts, top_k);
    let compiled_at_start = reachable.iter().filter(|k| start.holds(k)).count();
    let prompts = start.clone().covering_prompts(&config.graph, budget);
    let compile_ms = crate::cli::predict::engine_profile(None, args.gpu)?
        .map(|p| p.profile.jit_compile_ns as f64 / 1e6)
        .filter(|&ms| ms > 0.0);
    let mut notes = Vec::new();
    if model.name != "deepseek-v2-lite" {
        notes.push(format!(
            "{} is listed by vLLM's default MoE config; where vLLM ships a tuned config for its experts' shape on this GPU, the tiles differ (check the server log for \"Using default MoE config\")",
            model.name
        ));
    }
    let report = WarmUpReport {
        serve_args: line,
        gpu: args.gpu.as_str(),
        model: model.name.clone(),
        graph_mode: config.graph.name(),
        max_num_seqs: config.max_num_seqs,
        max_num_batched_tokens: budget,
        engines: config.attention.dp,
        specializations: reachable.len(),
        compiled_at_start,
        prompts,
        compile_ms,
        notes,
    };
    let text = if args.json {
        format!("{}\n", serde_json::to_string_pretty(&report)?)
    } else {
        render_text(&report)
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn render_text(r: &WarmUpReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "{}", r.serve_args);
    let _ = writeln!(
        out,
        "  {} on {}: {}, {} seqs, {} tokens a step{}",
        r.model,
        r.gpu,
        r.graph_mode,
        r.max_num_seqs,
        r.max_num_batched_tokens,
        if r.engines > 1 {
            format!(", {} engines (each compiles its own)", r.engines)
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        out,
        "  start-up compiles {} of the {} fused-MoE kernel specializations its steps can need",
        r.compiled_at_start, r.specializations
    );
    if r.prompts.is_empty() {
        let _ = writeln!(
            out,
            "  nothing to warm: no step of up to {} tokens meets a new one",
            r.max_num_batched_tokens
        );
    } else {
        let cost = r
            .compile_ms
            .map(|ms| {
                format!(", each about {ms:.0} ms (the built-in engine profile's jit_compile_ns)")
            })
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {} more can be needed; without a warm-up, the first step that needs one waits for its compile{cost}",
            r.specializations - r.compiled_at_start
        );
        let _ = writeln!(
            out,
            "Send one lone prompt of each length (tokens), waiting for each answer, before the traffic you measure:"
        );
        let lengths: Vec<String> = r.prompts.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "  {}", lengths.join(" "));
        if r.engines > 1 {
            let _ = writeln!(
                out,
                "  with {} engines each compiles its own: send each length as {} requests at once so that vLLM's DP router can spread them (no DP server has been measured warmed this way)",
                r.engines, r.engines
            );
        }
    }
    for note in &r.notes {
        let _ = writeln!(out, "note: {note}");
    }
    out
}
