//! Calibrated tables: a profile's cost tables made interpolable for one model and layout
//! ([`Calibrated::from_profile`]), profile merging and the eager launch-gap fit.

use afd_traces::calibration::{CalibrationProfile, CostTable};

use super::{CostError, CostLayout, KernelCounts, OpClass};
use crate::model::arch::ModelArch;
use crate::model::cost::interp::{Curve, Grid};

/// The calibrated tables this model can use, already made interpolable.
#[derive(Debug, Default)]
pub(super) struct Calibrated {
    pub(super) name: String,
    pub(super) p2p_eager: Option<Curve>,
    pub(super) p2p_graph: Option<Curve>,
    /// `p2p.ping_pong` in graph mode: one dependent leg between NCCL kernels.
    pub(super) p2p_ping_pong: Option<Curve>,
    /// `p2p.handoff` in graph mode: one leg between compute kernels, per compute time before the
    /// send (`derived.work_us`), in increasing order of it.
    pub(super) handoff: Vec<(f64, Curve)>,
    pub(super) fan_in: Vec<(u32, Curve)>,
    pub(super) all_reduce: Vec<(u32, Curve)>,
    pub(super) all_to_all: Vec<(u32, Curve)>,
    pub(super) router: Option<Curve>,
    pub(super) dispatch: Option<Curve>,
    pub(super) routed: Option<Grid>,
    pub(super) shared: Option<Curve>,
    /// `moe.layer − parts_sum_us` over tokens, signed.
    pub(super) composition: Option<Curve>,
    /// Routing of the table `composition` came from (a `uniform` table is preferred).
    pub(super) composition_routing: Option<String>,
    pub(super) dense: Option<Curve>,
    pub(super) proj: Option<Curve>,
    pub(super) mla_decode: Option<Grid>,
    pub(super) prefill: Option<Grid>,
    pub(super) launch_eager: Option<Curve>,
    pub(super) launch_graph: Option<Curve>,
    pub(super) host_step: Option<Curve>,
    pub(super) lm_head: Option<Curve>,
    /// Median `derived.host_us` of each class's table.
    pub(super) host_us: [Option<f64>; OpClass::ALL.len()],
    /// Extra device time per eagerly launched kernel, µs (see [`eager_gap_fit`]).
    pub(super) eager_gap_us: Option<f64>,
}

impl Calibrated {
    /// The tables of `profile` that price `model` (in the profile's order; for most operations a
    /// later table replaces an earlier one), made interpolable; `kernels` takes the kernel counts
    /// the tables measured.
    pub(super) fn from_profile(
        model: &ModelArch,
        layout: CostLayout,
        profile: &CalibrationProfile,
        source: &str,
        kernels: &mut KernelCounts,
    ) -> Result<Calibrated, CostError> {
        let mut out = Calibrated {
            name: source.to_owned(),
            eager_gap_us: eager_gap_fit(profile),
            ..Calibrated::default()
        };
        let experts_local = model.has_moe().then(|| {
            if layout.expert_parallel {
                model.routed_experts() / (layout.ffn_dp * layout.ffn_tp).max(1)
            } else {
                model.routed_experts()
            }
        });
        for (index, table) in profile.tables.iter().enumerate() {
            if !model_matches(table, model) {
                continue;
            }
            let known = out.add_transfer_table(index, table)?
                || out.add_compute_table(index, table, experts_local)?;
            if !known {
                continue;
            }
            out.add_host_us(table);
            measured_kernels(table, kernels);
        }
        Ok(out)
    }

    /// Takes a hand-off or collective table (`p2p.*`, `nccl.*`); false for any other operation.
    fn add_transfer_table(&mut self, index: usize, table: &CostTable) -> Result<bool, CostError> {
        let curve = |axis: &'static str| curve_of(index, table, axis);
        let graph = table.variant.get("graph").map(String::as_str);
        let count = |key: &str| table.variant.get(key).and_then(|v| v.parse::<u32>().ok());
        match table.op.as_str() {
            "p2p.one_way" => match graph {
                Some("true") => self.p2p_graph = Some(curve("bytes")?),
                _ => self.p2p_eager = Some(curve("bytes")?),
            },
            "p2p.ping_pong" => {
                if graph == Some("true") {
                    self.p2p_ping_pong = Some(curve("bytes")?);
                }
            }
            "p2p.handoff" => {
                let work_us = table
                    .points
                    .first()
                    .and_then(|p| p.derived.get("work_us").copied())
                    .filter(|w| w.is_finite() && *w >= 0.0);
                if let (Some("true"), Some(work_us)) = (graph, work_us)
                    && !self.handoff.iter().any(|(w, _)| *w == work_us)
                {
                    self.handoff.push((work_us, curve("bytes")?));
                    self.handoff.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
            }
            "p2p.fan_in" => {
                if let Some(n) = count("senders") {
                    self.fan_in.push((n, curve("bytes")?));
                }
            }
            "nccl.all_reduce" => {
                if let Some(n) = count("ranks") {
                    self.all_reduce.push((n, curve("bytes")?));
                }
            }
            "nccl.all_to_all" => {
                if let Some(n) = count("ranks") {
                    self.all_to_all.push((n, curve("bytes")?));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Takes a compute, launch or host table (`moe.*`, `mlp.dense`, `attention.*`, `launch.*`,
    /// `host.step`); false for any other operation. A routed-experts table measured at another
    /// local expert count is taken only when no other is; the MoE composition prefers a
    /// uniform-routing table.
    fn add_compute_table(
        &mut self,
        index: usize,
        table: &CostTable,
        experts_local: Option<u32>,
    ) -> Result<bool, CostError> {
        let curve = |axis: &'static str| curve_of(index, table, axis);
        let grid = |x: &'static str, y: &'static str| grid_of(index, table, x, y);
        let count = |key: &str| table.variant.get(key).and_then(|v| v.parse::<u32>().ok());
        match table.op.as_str() {
            "moe.router" => self.router = Some(curve("tokens")?),
            "moe.dispatch" => self.dispatch = Some(curve("tokens")?),
            "moe.routed_experts" => {
                let local = count("experts_local");
                if local.is_none() || local == experts_local || self.routed.is_none() {
                    self.routed = Some(grid("active_experts", "tokens_per_expert")?);
                }
            }
            "moe.layer" => {
                // The composition overhead is taken from the uniform-routing table when there
                // is one; it prices the layer's kernels following one another, not routing.
                let routing = table.variant.get("routing").cloned();
                let better = self.composition.is_none()
                    || (routing.as_deref() == Some("uniform")
                        && self.composition_routing.as_deref() != Some("uniform"));
                if better && let Some(composition) = composition_of(index, table)? {
                    self.composition = Some(composition);
                    self.composition_routing = routing;
                }
            }
            "moe.shared_experts" => self.shared = Some(curve("tokens")?),
            "mlp.dense" => self.dense = Some(curve("tokens")?),
            "attention.proj" => self.proj = Some(curve("tokens")?),
            "attention.mla_decode" => self.mla_decode = Some(grid("batch", "context")?),
            "attention.prefill" => self.prefill = Some(grid("tokens", "context")?),
            "launch.eager" => self.launch_eager = Some(curve("kernels")?),
            "launch.graph" => self.launch_graph = Some(curve("kernels")?),
            "host.step" => self.host_step = Some(curve("requests")?),
            "attention.lm_head" => self.lm_head = Some(curve("tokens")?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The median `derived.host_us` of `table`'s points, as its operation class's host issue
    /// time, when it has any.
    fn add_host_us(&mut self, table: &CostTable) {
        if let Some(class) = class_of_op(&table.op) {
            let host: Vec<f64> = table
                .points
                .iter()
                .filter_map(|p| p.derived.get("host_us").copied())
                .filter(|v| v.is_finite() && *v >= 0.0)
                .collect();
            if let Some(median) = median(host) {
                self.host_us[class.index()] = Some(median);
            }
        }
    }
}

/// The kernel count `table` measured (its first point's `derived.kernels`), in place of the
/// default of its operation.
fn measured_kernels(table: &CostTable, kernels: &mut KernelCounts) {
    if let Some(n) = table
        .points
        .first()
        .and_then(|p| p.derived.get("kernels"))
        .filter(|n| n.is_finite() && **n >= 1.0 && **n <= 1e4)
    {
        let n = *n as u32;
        match table.op.as_str() {
            "attention.proj" => kernels.attention_proj = n,
            "attention.mla_decode" => kernels.attention_decode = n,
            "moe.router" => kernels.router = n,
            "moe.dispatch" => kernels.dispatch = n,
            "moe.routed_experts" => kernels.routed = n,
            "moe.shared_experts" => kernels.shared = n,
            "mlp.dense" => kernels.dense = n,
            _ => {}
        }
    }
}

/// Merges profiles in order: a table whose `op` and `variant` an earlier profile already has is left
/// out, so the first profile wins and later ones only add what it lacks. The provenance is the
/// first profile's; `None` for no profiles.
pub fn merge_profiles(
    profiles: impl IntoIterator<Item = CalibrationProfile>,
) -> Option<CalibrationProfile> {
    let mut merged: Option<CalibrationProfile> = None;
    for profile in profiles {
        match &mut merged {
            None => merged = Some(profile),
            Some(merged) => {
                for table in profile.tables {
                    let known = merged
                        .tables
                        .iter()
                        .any(|t| t.op == table.op && t.variant == table.variant);
                    if !known {
                        merged.tables.push(table);
                    }
                }
            }
        }
    }
    merged
}

/// The extra device time per eagerly launched kernel, µs, from every point of `profile` that
/// carries `eager_us`, `host_us` and `kernels` and whose eager run was device-bound (`host_us` below
/// the graph time `median_us`: the host enqueued each operation faster than the GPU ran it, so
/// `eager_us` is device time). `eager_us − median_us = event pair + gap × kernels`; the gap is the
/// Theil–Sen slope (median of pairwise slopes), robust to the noise of long operations. `None`
/// without two distinct kernel counts.
pub fn eager_gap_fit(profile: &CalibrationProfile) -> Option<f64> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    for table in &profile.tables {
        for point in &table.points {
            let derived = |key: &str| point.derived.get(key).copied().filter(|v| v.is_finite());
            let (Some(eager), Some(host), Some(kernels)) =
                (derived("eager_us"), derived("host_us"), derived("kernels"))
            else {
                continue;
            };
            let graph = point.stats.median_us;
            if kernels >= 1.0 && host < graph {
                points.push((kernels, eager - graph));
            }
        }
    }
    let mut slopes = Vec::new();
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if a.0 != b.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    median(slopes).map(|slope| slope.max(0.0))
}

/// Median of finite values (mean of the middle two for an even count); `None` when empty.
pub(crate) fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len().is_multiple_of(2) {
        (values[mid - 1] + values[mid]) / 2.0
    } else {
        values[mid]
    })
}

/// `moe.layer` minus its `derived.parts_sum_us` over tokens; `None` when no point has the parts.
fn composition_of(index: usize, table: &CostTable) -> Result<Option<Curve>, CostError> {
    if table.axes.len() != 1 || table.axes[0] != "tokens" {
        return Err(CostError::Axes {
            index,
            op: table.op.clone(),
            found: table.axes.clone(),
            expected: vec!["tokens"],
        });
    }
    let points: Vec<(f64, f64)> = table
        .points
        .iter()
        .filter_map(|p| {
            let parts = p.derived.get("parts_sum_us").copied()?;
            parts
                .is_finite()
                .then(|| (p.at[0], p.stats.median_us - parts))
        })
        .collect();
    if points.is_empty() {
        return Ok(None);
    }
    Curve::new(points)
        .map(Some)
        .map_err(|problem| CostError::Table {
            index,
            op: table.op.clone(),
            problem,
        })
}

fn class_of_op(op: &str) -> Option<OpClass> {
    Some(match op {
        "p2p.one_way" => OpClass::P2p,
        "nccl.all_reduce" => OpClass::AllReduce,
        "nccl.all_to_all" => OpClass::AllToAll,
        "moe.router" => OpClass::MoeRouter,
        "moe.dispatch" => OpClass::MoeDispatch,
        "moe.routed_experts" => OpClass::MoeRoutedExperts,
        "moe.shared_experts" => OpClass::MoeSharedExperts,
        "mlp.dense" => OpClass::MlpDense,
        "attention.proj" => OpClass::AttentionProj,
        "attention.mla_decode" => OpClass::AttentionMlaDecode,
        "attention.prefill" => OpClass::AttentionPrefill,
        _ => return None,
    })
}

/// A table without a `model` variant applies to every model; otherwise the names must agree
/// (case-insensitively, ignoring an organisation prefix such as `deepseek-ai/`).
pub(crate) fn model_matches(table: &CostTable, model: &ModelArch) -> bool {
    match table.variant.get("model") {
        None => true,
        Some(name) => {
            let short = name.rsplit('/').next().unwrap_or(name);
            short.eq_ignore_ascii_case(&model.name)
        }
    }
}

fn curve_of(index: usize, table: &CostTable, axis: &'static str) -> Result<Curve, CostError> {
    if table.axes.len() != 1 || table.axes[0] != axis {
        return Err(CostError::Axes {
            index,
            op: table.op.clone(),
            found: table.axes.clone(),
            expected: vec![axis],
        });
    }
    Curve::new(
        table
            .points
            .iter()
            .map(|p| (p.at[0], p.stats.median_us))
            .collect(),
    )
    .map_err(|problem| CostError::Table {
        index,
        op: table.op.clone(),
        problem,
    })
}

fn grid_of(
    index: usize,
    table: &CostTable,
    x: &'static str,
    y: &'static str,
) -> Result<Grid, CostError> {
    if table.axes.len() != 2 || table.axes[0] != x || table.axes[1] != y {
        return Err(CostError::Axes {
            index,
            op: table.op.clone(),
            found: table.axes.clone(),
            expected: vec![x, y],
        });
    }
    let points: Vec<(f64, f64, f64)> = table
        .points
        .iter()
        .map(|p| (p.at[0], p.at[1], p.stats.median_us))
        .collect();
    Grid::new(&points).map_err(|problem| CostError::Table {
        index,
        op: table.op.clone(),
        problem,
    })
}
