//! `calibrate`: the whole set the simulator needs, in one profile. NCCL point-to-point and collectives
//! first (every GPU), then the Attention-side set on rank 0's GPU and the FFN-side set on rank 1's GPU
//! at the same time, each on the GPU the `pipeline` probe gives that role.

use std::collections::BTreeMap;
use std::sync::Arc;

use afd_traces::calibration::CostTable;

use crate::device;
use crate::error::ProbeError;
use crate::spec::{AttentionSpec, HbmSpec, LaunchSpec, Measured, MoeSpec, P2pSpec, RankLayout};

/// Every probe of a calibration run; the single-GPU specs' `gpu` is replaced by the rank's GPU.
#[derive(Clone, Debug)]
pub struct CalibrateSpec {
    pub layout: RankLayout,
    pub p2p: P2pSpec,
    pub attention: AttentionSpec,
    pub moe: MoeSpec,
    pub hbm: HbmSpec,
    pub launch: LaunchSpec,
}

/// Runs everything; rank 0 gets the merged tables.
pub fn run(
    spec: &CalibrateSpec,
    progress: Arc<dyn Fn(&str) + Send + Sync>,
) -> Result<Option<Measured>, ProbeError> {
    progress("p2p and collectives");
    let p2p = device::p2p(&spec.p2p)?;
    let per_rank = spec.clone();
    let blobs = device::on_ranks(&spec.layout, move |rank, gpu| {
        let mut measured = Measured::default();
        let report = |what: &str| progress(&format!("rank {rank} (GPU {gpu}): {what}"));
        match rank {
            0 => {
                let attention = AttentionSpec {
                    gpu,
                    ..per_rank.attention.clone()
                };
                measured.extend(device::attention(&attention, &report)?);
                report("hbm");
                measured.extend(device::hbm(&HbmSpec {
                    gpu,
                    ..per_rank.hbm.clone()
                })?);
                report("launch");
                measured.extend(device::launch(&LaunchSpec {
                    gpu,
                    ..per_rank.launch.clone()
                })?);
            }
            1 => {
                let moe = MoeSpec {
                    gpu,
                    ..per_rank.moe.clone()
                };
                measured.extend(device::moe(&moe, &report)?);
            }
            _ => {}
        }
        let notes: BTreeMap<String, String> = measured
            .notes
            .into_iter()
            .map(|(k, v)| (format!("rank{rank}.{k}"), v))
            .collect();
        serde_json::to_vec(&(measured.tables, notes)).map_err(|err| ProbeError::Rank {
            rank,
            message: format!("cannot encode results: {err}"),
        })
    })?;
    let (Some(p2p), Some(blobs)) = (p2p, blobs) else {
        return Ok(None);
    };
    let mut merged = p2p;
    for (rank, blob) in blobs.iter().enumerate() {
        let (tables, notes): (Vec<CostTable>, BTreeMap<String, String>) =
            serde_json::from_slice(blob).map_err(|err| ProbeError::Rank {
                rank,
                message: format!("sent unreadable results: {err}"),
            })?;
        merged.extend(Measured { tables, notes });
    }
    Ok(Some(merged))
}
