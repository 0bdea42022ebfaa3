//! `afd-sim replay-pipeline`: simulate every configuration of an `afd-probe pipeline` results file
//! from a calibration profile and compare predicted with measured step times.
//!
//! The library's `replay` does the work through the same pricing and layer pipeline as `predict`;
//! this module reads the files, picks the model and the cost model, and prints the comparison.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use afd_sim::cluster::Regime;
use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel, OpClass, UsageCounts};
use afd_sim::model::hardware::GpuKind;
use afd_sim::replay::{GainKind, Replay, replay};
use afd_traces::pipeline::PipelineResults;

use crate::cli::inputs::read_model;
use crate::cli::output::{emit, json_text, table};
use crate::cli::profiles::{CostSource, load_profile};

/// The acceptance bars of issue "Fidelity", checked by `--check`.
const MEDIAN_BAR: f64 = 0.05;
const WORST_BAR: f64 = 0.10;
const GAIN_BAR_PP: f64 = 3.0;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim replay-pipeline traces/data/pipeline/h200x2-deepseek-v2-lite.json
  afd-sim replay-pipeline traces/data/pipeline/h200x2-deepseek-v2-lite.json \\
      --calibration traces/data/calibration/h200x2-deepseek-v2-lite.json \\
      --calibration traces/data/calibration/h200x2-handoff.json --json
  afd-sim replay-pipeline traces/data/pipeline/h200x2-deepseek-v2-lite.json --roofline
  afd-sim replay-pipeline traces/data/pipeline/h200x2-deepseek-v2-lite.json --check   # exit 1 when a bar is missed

Each configuration of the results file (one Attention rank, one FFN rank, T decode tokens over
KV caches of the configured context, the recorded DBO split, eager or whole-step CUDA graphs and
the recorded routing of every MoE layer and ubatch) is priced by the calibration profile alone and
swept by the same layer pipeline as `afd-sim predict`. The table gives predicted and measured
median step times, the error, and the resource and operation class that bound the simulated step;
then the median and worst |error| and the DBO and graph gains, measured vs predicted.
Costs come from --calibration, else the GPU's built-in profile, else its datasheet roofline; the
roofline prices what a profile lacks.

Exit status: 0, or 1 with --check when the median |error| exceeds 5 %, the worst 10 %, or a gain
misses by more than 3 percentage points; 2 for bad input.")]
pub(crate) struct ReplayArgs {
    /// Pipeline results written by `afd-probe pipeline`.
    #[arg(value_name = "RESULTS.json")]
    results: PathBuf,
    /// Calibration profile written by `afd-probe` (repeatable: merged in order, the first wins a
    /// table both have; default: the GPU's built-in profiles).
    #[arg(
        long,
        value_name = "PROFILE.json",
        num_args = 1,
        conflicts_with = "roofline"
    )]
    calibration: Option<Vec<PathBuf>>,
    /// Price everything from the GPU's datasheet roofline.
    #[arg(long)]
    roofline: bool,
    /// GPU kind of the roofline and of the built-in profile: h200, h100, h800, h20, a100, l4, l20, a100-pcie, h100-pcie, rtx-pro-6000.
    #[arg(long, default_value = "h200")]
    gpu: String,
    /// Model config or shipped model name (default: the model named in the results file).
    #[arg(long)]
    model: Option<String>,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Exit 1 when an acceptance bar is missed.
    #[arg(long)]
    check: bool,
}

/// Runs `afd-sim replay-pipeline`.
pub(crate) fn run(args: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let results = read_results(&args.results)?;
    let gpu = GpuKind::parse(&args.gpu).with_context(|| {
        let names: Vec<&str> = GpuKind::ALL.iter().map(|g| g.as_str()).collect();
        format!("--gpu {:?} is not one of {}", args.gpu, names.join(", "))
    })?;
    let model = match &args.model {
        Some(spec) => read_model(spec)?,
        None => ModelArch::builtin(&results.model.name)
            .with_context(|| {
                format!(
                    "{}: model {:?} is not a shipped model; pass --model CONFIG",
                    args.results.display(),
                    results.model.name
                )
            })?
            .with_context(|| format!("shipped model {}", results.model.name))?,
    };
    let source = match (&args.calibration, args.roofline) {
        (Some(paths), _) => CostSource::Files(paths),
        (None, true) => CostSource::Roofline,
        (None, false) => CostSource::Default,
    };
    let layout = CostLayout {
        attention_tp: 1,
        ffn_dp: 1,
        ffn_tp: 1,
        expert_parallel: true,
    };
    let loaded = load_profile(&source, gpu, &model)?;
    let cost = match &loaded {
        None => CostModel::roofline(&model, gpu, layout),
        Some(loaded) => CostModel::calibrated(&model, gpu, layout, &loaded.profile, &loaded.name)
            .with_context(|| format!("calibration profile {}", loaded.name))?,
    };
    let outcome =
        replay(&results, &model, &cost).with_context(|| args.results.display().to_string())?;
    let profile = loaded.as_ref().map(|l| {
        let lines: Vec<String> = l
            .sources
            .iter()
            .map(|(file, provenance)| format!("{file}: {provenance}"))
            .collect();
        (l.name.as_str(), lines.join("; "))
    });
    let sources = sources(&outcome.usage);
    let text = if args.json {
        json_text(&to_json(
            &outcome,
            &results,
            profile.as_ref(),
            &sources,
            gpu,
        ))
    } else {
        to_table(&outcome, &results, profile.as_ref(), &sources, gpu)
    };
    emit(&text)?;
    let passed = outcome.median_abs_error <= MEDIAN_BAR
        && outcome.worst_abs_error <= WORST_BAR
        && outcome.worst_gain_pp <= GAIN_BAR_PP;
    Ok(if args.check && !passed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn read_results(path: &Path) -> anyhow::Result<PipelineResults> {
    let text = afd_traces::input::read_text(path, afd_traces::input::InputKind::PIPELINE)?;
    let results = PipelineResults::from_json(&text)
        .with_context(|| format!("pipeline results {}", path.display()))?;
    if results.records.is_empty() {
        bail!("pipeline results {} have no records", path.display());
    }
    Ok(results)
}

/// `(class, source)` of every class the replay priced.
fn sources(usage: &UsageCounts) -> Vec<(OpClass, &'static str)> {
    OpClass::ALL
        .iter()
        .map(|&class| (class, usage.source_of(class)))
        .filter(|(_, source)| *source != "unused")
        .collect()
}

fn regime(bound: Regime) -> &'static str {
    match bound {
        Regime::Attention => "attention",
        Regime::Ffn => "ffn",
        Regime::Transfer => "transfer",
    }
}

fn gain_name(kind: GainKind) -> String {
    match kind {
        GainKind::Dbo { graph } => format!("DBO (graph={graph})"),
        GainKind::Graph { dbo } => format!("graph (dbo={dbo})"),
    }
}

fn to_table(
    outcome: &Replay,
    results: &PipelineResults,
    profile: Option<&(&str, String)>,
    sources: &[(OpClass, &'static str)],
    gpu: GpuKind,
) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{} on {}: {} configurations measured by {} ({})\n",
        results.model.name,
        results.provenance.gpus.join(" + "),
        outcome.steps.len(),
        results.provenance.tool,
        results.provenance.date_utc,
    ));
    match profile {
        Some((name, _)) => out.push_str(&format!("priced by {name}\n\n")),
        None => out.push_str(&format!("priced by the {gpu} datasheet roofline\n\n")),
    }
    let mut rows = vec![vec![
        "tokens".to_owned(),
        "context".to_owned(),
        "dbo".to_owned(),
        "graph".to_owned(),
        "predicted µs".to_owned(),
        "measured µs".to_owned(),
        "error".to_owned(),
        "bound by".to_owned(),
    ]];
    for s in &outcome.steps {
        rows.push(vec![
            s.tokens.to_string(),
            s.context.to_string(),
            s.dbo.to_string(),
            s.graph.to_string(),
            format!("{:.1}", s.predicted_us),
            format!("{:.1}", s.measured_us),
            format!("{:+.2} %", 100.0 * s.error),
            format!(
                "{} ({} {:.0} %)",
                regime(s.bound),
                s.bound_class.as_str(),
                100.0 * s.bound_share
            ),
        ]);
    }
    out.push_str(&table(&rows));
    out.push_str(&format!(
        "\nmedian |error| {:.2} %, worst |error| {:.2} % (bars: 5 %, 10 %)\n\n",
        100.0 * outcome.median_abs_error,
        100.0 * outcome.worst_abs_error
    ));
    let mut rows = vec![vec![
        "tokens".to_owned(),
        "context".to_owned(),
        "gain".to_owned(),
        "measured".to_owned(),
        "predicted".to_owned(),
        "difference".to_owned(),
    ]];
    for g in &outcome.gains {
        rows.push(vec![
            g.tokens.to_string(),
            g.context.to_string(),
            gain_name(g.kind),
            format!("{:.3}", g.measured),
            format!("{:.3}", g.predicted),
            format!("{:+.1} pp", g.error_pp()),
        ]);
    }
    out.push_str(&table(&rows));
    out.push_str(&format!(
        "\nworst gain difference {:.1} pp (bar: 3 pp)\n\ncosts from:\n",
        outcome.worst_gain_pp
    ));
    let rows: Vec<Vec<String>> = sources
        .iter()
        .map(|(class, source)| vec![format!("  {}", class.as_str()), (*source).to_owned()])
        .collect();
    out.push_str(&table(&rows));
    if let Some((_, provenance)) = profile {
        out.push_str(&format!("profile provenance: {provenance}\n"));
    }
    out
}

fn to_json(
    outcome: &Replay,
    results: &PipelineResults,
    profile: Option<&(&str, String)>,
    sources: &[(OpClass, &'static str)],
    gpu: GpuKind,
) -> Value {
    json!({
        "model": results.model.name,
        "results_provenance": {
            "tool": results.provenance.tool,
            "gpus": results.provenance.gpus,
            "date_utc": results.provenance.date_utc,
        },
        "profile": profile.map(|(name, _)| *name),
        "profile_provenance": profile.map(|(_, p)| p.as_str()),
        "gpu": gpu.as_str(),
        "configurations": outcome.steps.iter().map(|s| json!({
            "tokens": s.tokens,
            "context": s.context,
            "dbo": s.dbo,
            "graph": s.graph,
            "predicted_us": s.predicted_us,
            "measured_us": s.measured_us,
            "error": s.error,
            "attention_busy_us": s.attention_busy_us,
            "ffn_busy_us": s.ffn_busy_us,
            "link_busy_us": s.link_busy_us,
            "bound": regime(s.bound),
            "bound_class": s.bound_class.as_str(),
            "bound_share": s.bound_share,
        })).collect::<Vec<_>>(),
        "median_abs_error": outcome.median_abs_error,
        "worst_abs_error": outcome.worst_abs_error,
        "gains": outcome.gains.iter().map(|g| {
            let (kind, mode) = match g.kind {
                GainKind::Dbo { graph } => ("dbo", json!({"graph": graph})),
                GainKind::Graph { dbo } => ("graph", json!({"dbo": dbo})),
            };
            json!({
                "kind": kind,
                "mode": mode,
                "tokens": g.tokens,
                "context": g.context,
                "measured": g.measured,
                "predicted": g.predicted,
                "error_pp": g.error_pp(),
            })
        }).collect::<Vec<_>>(),
        "worst_gain_pp": outcome.worst_gain_pp,
        "bars": {
            "median_abs_error": MEDIAN_BAR,
            "worst_abs_error": WORST_BAR,
            "gain_pp": GAIN_BAR_PP,
            "passed": outcome.median_abs_error <= MEDIAN_BAR
                && outcome.worst_abs_error <= WORST_BAR
                && outcome.worst_gain_pp <= GAIN_BAR_PP,
        },
        "costs": sources.iter().map(|(class, source)| json!({
            "op": class.as_str(),
            "source": source,
        })).collect::<Vec<_>>(),
    })
}
