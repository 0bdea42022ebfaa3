//! How a command picks its cost model: profile files (`--calibration`, repeatable), else the
//! built-in profiles of the GPU kind (`afd_sim::model::profiles`), else the datasheet roofline.

use std::path::PathBuf;

use anyhow::Context;

use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel};
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::profiles::{self, LoadedProfile};
use afd_traces::calibration::CalibrationProfile;

/// Where a command's costs come from.
pub(crate) enum CostSource<'a> {
    /// Profile files, merged in order.
    Files(&'a [PathBuf]),
    /// The built-in profile of the GPU kind, or the roofline when it has none.
    Default,
    /// The datasheet roofline alone.
    Roofline,
}

/// Reads the profiles `source` selects for `gpu`; `None` means the roofline prices everything.
pub(crate) fn load_profile(
    source: &CostSource<'_>,
    gpu: GpuKind,
) -> anyhow::Result<Option<LoadedProfile>> {
    match source {
        CostSource::Roofline => Ok(None),
        CostSource::Default => Ok(profiles::builtin(gpu)?),
        CostSource::Files(paths) => {
            let mut parts = Vec::new();
            for path in *paths {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading calibration profile {}", path.display()))?;
                let profile = CalibrationProfile::from_json(&text)
                    .with_context(|| format!("calibration profile {}", path.display()))?;
                parts.push((path.display().to_string(), profile));
            }
            Ok(profiles::merge_named(parts, ""))
        }
    }
}

/// The cost model for `model` on `gpu` with `layout`, from the profile `source` selects.
pub(crate) fn cost_model(
    source: &CostSource<'_>,
    model: &ModelArch,
    gpu: GpuKind,
    layout: CostLayout,
) -> anyhow::Result<CostModel> {
    let loaded = load_profile(source, gpu)?;
    Ok(profiles::cost_model(model, gpu, layout, loaded.as_ref())?)
}
