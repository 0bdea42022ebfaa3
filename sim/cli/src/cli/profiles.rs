//! How a command picks its cost model: profile files (`--calibration`, repeatable), else the
//! built-in profiles of the GPU kind (`afd_sim::model::profiles`), else the datasheet roofline.

use std::path::PathBuf;

use anyhow::{Context, bail};

use afd_sim::model::arch::ModelArch;
use afd_sim::model::cost::{CostLayout, CostModel};
use afd_sim::model::hardware::GpuKind;
use afd_sim::model::profiles::{self, LoadedProfile};
use afd_traces::calibration::CalibrationProfile;
use afd_traces::input::{InputKind, read_text};

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
///
/// A `--calibration` file with no table for `model` (another model's profile, or no tables at all) is
/// an error rather than a silent fall-back to the roofline under the file's name.
pub(crate) fn load_profile(
    source: &CostSource<'_>,
    gpu: GpuKind,
    model: &ModelArch,
) -> anyhow::Result<Option<LoadedProfile>> {
    match source {
        CostSource::Roofline => Ok(None),
        CostSource::Default => Ok(profiles::builtin(gpu)?),
        CostSource::Files(paths) => {
            let mut parts = Vec::new();
            for path in *paths {
                let text = read_text(path, InputKind::CALIBRATION)?;
                let profile = CalibrationProfile::from_json(&text)
                    .with_context(|| format!("calibration profile {}", path.display()))?;
                if profiles::tables_for(&profile, model) == 0 {
                    let mut models: Vec<&str> = profile
                        .tables
                        .iter()
                        .filter_map(|t| t.variant.get("model").map(String::as_str))
                        .collect();
                    models.sort_unstable();
                    models.dedup();
                    let has = if models.is_empty() {
                        "it has no tables".to_owned()
                    } else {
                        format!("its tables are for {}", models.join(", "))
                    };
                    bail!(
                        "--calibration {}: prices nothing for model {} ({has}); every cost would come from the roofline. Pass a profile measured for this model, or --roofline",
                        path.display(),
                        model.name
                    );
                }
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
    let loaded = load_profile(source, gpu, model)?;
    Ok(profiles::cost_model(model, gpu, layout, loaded.as_ref())?)
}
