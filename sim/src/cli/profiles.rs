//! Calibration profiles built into the binary, and how a command picks its cost model: profile
//! files (`--calibration`, repeatable), else the built-in profiles of the GPU kind, else the
//! datasheet roofline.
//!
//! Several profiles are merged in order: a table whose `op` and `variant` an earlier profile already
//! has is left out, so the first profile wins and later ones only add what it lacks. The built-in
//! H200 profiles are the committed `afd-probe` files, included at build time; the name a report
//! shows cites each one's provenance (tool and commit, GPUs, NCCL, date).

use std::path::PathBuf;

use anyhow::Context;

use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel, merge_profiles};
use afd_sim::model::hardware::GpuKind;
use afd_traces::calibration::CalibrationProfile;

/// The committed H200 profiles (traces/data/calibration/PROVENANCE.md): the `calibrate` run of
/// DeepSeek-V2-Lite on 2 × H200, then the hand-off tables measured after it.
const H200: [(&str, &str); 2] = [
    (
        "h200x2-deepseek-v2-lite.json",
        include_str!("../../../traces/data/calibration/h200x2-deepseek-v2-lite.json"),
    ),
    (
        "h200x2-handoff.json",
        include_str!("../../../traces/data/calibration/h200x2-handoff.json"),
    ),
];

/// The built-in profiles of a GPU kind: file names and texts, in merge order.
pub(crate) fn builtin_profiles(gpu: GpuKind) -> &'static [(&'static str, &'static str)] {
    match gpu {
        GpuKind::H200 => &H200,
        _ => &[],
    }
}

/// Where a command's costs come from.
pub(crate) enum CostSource<'a> {
    /// Profile files, merged in order.
    Files(&'a [PathBuf]),
    /// The built-in profile of the GPU kind, or the roofline when it has none.
    Default,
    /// The datasheet roofline alone.
    Roofline,
}

/// Profiles read, checked and merged, with the name reports give them and each one's provenance.
pub(crate) struct LoadedProfile {
    pub(crate) profile: CalibrationProfile,
    pub(crate) name: String,
    /// `(file, provenance line)` of every merged profile, in order.
    pub(crate) sources: Vec<(String, String)>,
}

/// Reads the profiles `source` selects for `gpu`; `None` means the roofline prices everything.
pub(crate) fn load_profile(
    source: &CostSource<'_>,
    gpu: GpuKind,
) -> anyhow::Result<Option<LoadedProfile>> {
    let mut parts: Vec<(String, CalibrationProfile)> = Vec::new();
    let prefix = match source {
        CostSource::Roofline => return Ok(None),
        CostSource::Files(paths) => {
            for path in *paths {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading calibration profile {}", path.display()))?;
                let profile = CalibrationProfile::from_json(&text)
                    .with_context(|| format!("calibration profile {}", path.display()))?;
                parts.push((path.display().to_string(), profile));
            }
            String::new()
        }
        CostSource::Default => {
            for (file, text) in builtin_profiles(gpu) {
                let profile = CalibrationProfile::from_json(text)
                    .with_context(|| format!("built-in calibration profile {file}"))?;
                parts.push(((*file).to_owned(), profile));
            }
            format!("built-in {gpu} profile ")
        }
    };
    let sources: Vec<(String, String)> = parts
        .iter()
        .map(|(file, profile)| (file.clone(), provenance(profile)))
        .collect();
    let merged = merge_profiles(parts.into_iter().map(|(_, profile)| profile));
    Ok(merged.map(|profile| {
        let files: Vec<String> = sources.iter().map(|(file, _)| file.clone()).collect();
        LoadedProfile {
            profile,
            name: format!("{prefix}{} ({})", files.join(" + "), sources[0].1),
            sources,
        }
    }))
}

/// The cost model for `model` on `gpu` with `layout`, from the profile `source` selects.
pub(crate) fn cost_model(
    source: &CostSource<'_>,
    model: &ModelArch,
    gpu: GpuKind,
    layout: CostLayout,
) -> anyhow::Result<CostModel> {
    match load_profile(source, gpu)? {
        None => Ok(CostModel::roofline(model, gpu, layout)),
        Some(loaded) => CostModel::calibrated(model, gpu, layout, &loaded.profile, &loaded.name)
            .with_context(|| format!("calibration profile {}", loaded.name)),
    }
}

/// One line of a profile's provenance: tool, GPUs, NCCL and date.
pub(crate) fn provenance(profile: &CalibrationProfile) -> String {
    let p = &profile.provenance;
    let gpus = match p.gpus.first() {
        Some(name) if p.gpus.iter().all(|g| g == name) => format!("{} x {name}", p.gpus.len()),
        _ => p.gpus.join(", "),
    };
    let mut parts = vec![p.tool.clone(), gpus];
    if !p.nccl_version.is_empty() {
        parts.push(format!("NCCL {}", p.nccl_version));
    }
    parts.push(p.date_utc.clone());
    parts.retain(|s| !s.is_empty());
    parts.join(", ")
}
