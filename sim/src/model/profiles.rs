//! Calibration profiles as the simulator uses them: the built-in profiles of a GPU kind, merging
//! several profiles into one, the name a report gives them, and the default cost model.
//!
//! The profile texts come from `afd-traces` (committed `afd-probe` files, included at build time);
//! nothing here reads files. The binary adds `--calibration FILE` on top of these functions.
//!
//! Several profiles are merged in order: a table whose `op` and `variant` an earlier profile already
//! has is left out, so the first profile wins and later ones only add what it lacks.

use afd_traces::calibration::{CalibrationError, CalibrationProfile, builtin_profiles};

use crate::model::arch::ModelArch;
use crate::model::cost::{CostError, CostLayout, CostModel, merge_profiles};
use crate::model::hardware::GpuKind;

/// One or more profiles merged, with the name reports give them and each one's provenance.
#[derive(Clone, Debug)]
pub struct LoadedProfile {
    pub profile: CalibrationProfile,
    /// What a report's "Costs from" line shows: the files and the first one's provenance.
    pub name: String,
    /// `(file, provenance line)` of every merged profile, in order.
    pub sources: Vec<(String, String)>,
}

/// Why the default cost model could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("built-in calibration profile {file}")]
    Builtin {
        file: &'static str,
        #[source]
        source: CalibrationError,
    },
    #[error("calibration profile {name}")]
    Cost {
        name: String,
        #[source]
        source: CostError,
    },
}

/// Merges named profiles in order; `prefix` starts the report name (e.g. `built-in h200 profile `).
/// `None` when `parts` is empty.
pub fn merge_named(
    parts: Vec<(String, CalibrationProfile)>,
    prefix: &str,
) -> Option<LoadedProfile> {
    let sources: Vec<(String, String)> = parts
        .iter()
        .map(|(file, profile)| (file.clone(), provenance(profile)))
        .collect();
    let merged = merge_profiles(parts.into_iter().map(|(_, profile)| profile))?;
    let files: Vec<&str> = sources.iter().map(|(file, _)| file.as_str()).collect();
    Some(LoadedProfile {
        name: format!("{prefix}{} ({})", files.join(" + "), sources[0].1),
        profile: merged,
        sources,
    })
}

/// The built-in profiles of `gpu`, merged; `None` when the kind has no measured profile.
pub fn builtin(gpu: GpuKind) -> Result<Option<LoadedProfile>, ProfileError> {
    let mut parts = Vec::new();
    for (file, text) in builtin_profiles(gpu.as_str()) {
        let profile = CalibrationProfile::from_json(text)
            .map_err(|source| ProfileError::Builtin { file, source })?;
        parts.push(((*file).to_owned(), profile));
    }
    Ok(merge_named(parts, &format!("built-in {gpu} profile ")))
}

/// The cost model for `model` on `gpu` priced from `loaded`, or the datasheet roofline when `None`.
pub fn cost_model(
    model: &ModelArch,
    gpu: GpuKind,
    layout: CostLayout,
    loaded: Option<&LoadedProfile>,
) -> Result<CostModel, ProfileError> {
    match loaded {
        None => Ok(CostModel::roofline(model, gpu, layout)),
        Some(loaded) => CostModel::calibrated(model, gpu, layout, &loaded.profile, &loaded.name)
            .map_err(|source| ProfileError::Cost {
                name: loaded.name.clone(),
                source,
            }),
    }
}

/// How many of `profile`'s tables are for `model` (tables that name no model count for every model):
/// zero means the profile would price nothing and every cost would come from the roofline.
pub fn tables_for(profile: &CalibrationProfile, model: &ModelArch) -> usize {
    profile
        .tables
        .iter()
        .filter(|table| crate::model::cost::model_matches(table, model))
        .count()
}

/// What `afd-sim predict` uses without flags: the built-in profile of `gpu` where one exists, else
/// the roofline. The twin prices its tokens the same way.
pub fn default_cost_model(
    model: &ModelArch,
    gpu: GpuKind,
    layout: CostLayout,
) -> Result<CostModel, ProfileError> {
    cost_model(model, gpu, layout, builtin(gpu)?.as_ref())
}

/// One line of a profile's provenance: tool, GPUs, NCCL and date.
pub fn provenance(profile: &CalibrationProfile) -> String {
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
