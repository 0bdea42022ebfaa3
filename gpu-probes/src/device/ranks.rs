//! Runs one body per rank: as threads of this process (one per GPU, the default on one machine) or as
//! this process being one rank of a launcher-started job. Rank 0 gets every rank's result blob.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use super::nccl;
use crate::error::ProbeError;
use crate::rendezvous::{ID_BYTES, RootListener, join};
use crate::spec::RankLayout;

/// What one rank's body is given.
#[derive(Clone, Debug)]
pub(super) struct RankSetup {
    pub(super) rank: usize,
    pub(super) world: usize,
    /// GPU ordinal this rank drives.
    pub(super) gpu: usize,
    /// NCCL unique id shared by all ranks.
    pub(super) id: [u8; ID_BYTES],
}

/// How long ranks wait for each other to join or to deliver results.
const RENDEZVOUS_TIMEOUT: Duration = Duration::from_secs(300);
/// After one rank failed, how long the others get to finish before the failure is reported.
const GRACE: Duration = Duration::from_secs(20);

/// Runs `body` on every rank of `layout`. Returns `Some(blobs)` (rank order) on rank 0 and `None` on
/// the other ranks of a multi-process job.
pub(super) fn run_ranks<F>(layout: &RankLayout, body: F) -> Result<Option<Vec<Vec<u8>>>, ProbeError>
where
    F: Fn(RankSetup) -> Result<Vec<u8>, ProbeError> + Send + Sync + 'static,
{
    match layout {
        RankLayout::Threads { gpus } => run_threads(gpus, Arc::new(body)).map(Some),
        RankLayout::Processes(env) => {
            let addr = format!("{}:{}", env.master_addr, env.master_port);
            if env.rank == 0 {
                let listener = RootListener::bind(&format!("0.0.0.0:{}", env.master_port))?;
                let id = nccl::unique_id()?;
                let mut link = listener.serve(env.world_size, &id, RENDEZVOUS_TIMEOUT)?;
                let blob = body(RankSetup {
                    rank: 0,
                    world: env.world_size,
                    gpu: env.local_rank,
                    id,
                })?;
                Ok(link.gather(blob, RENDEZVOUS_TIMEOUT)?)
            } else {
                let (id, mut link) = join(&addr, env.rank, env.world_size, RENDEZVOUS_TIMEOUT)?;
                let blob = body(RankSetup {
                    rank: env.rank,
                    world: env.world_size,
                    gpu: env.local_rank,
                    id,
                })?;
                Ok(link.gather(blob, RENDEZVOUS_TIMEOUT)?)
            }
        }
    }
}

type Body = Arc<dyn Fn(RankSetup) -> Result<Vec<u8>, ProbeError> + Send + Sync>;

fn run_threads(gpus: &[usize], body: Body) -> Result<Vec<Vec<u8>>, ProbeError> {
    let id = nccl::unique_id()?;
    let world = gpus.len();
    let (tx, rx) = mpsc::channel();
    for (rank, &gpu) in gpus.iter().enumerate() {
        let tx = tx.clone();
        let body = body.clone();
        let setup = RankSetup {
            rank,
            world,
            gpu,
            id,
        };
        std::thread::Builder::new()
            .name(format!("rank{rank}-gpu{gpu}"))
            .spawn(move || {
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(setup)))
                    .unwrap_or_else(|panic| {
                        let message = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "panicked".to_owned());
                        Err(ProbeError::Rank { rank, message })
                    });
                let _ = tx.send((rank, result));
            })
            .map_err(|err| ProbeError::Rank {
                rank,
                message: format!("cannot start its thread: {err}"),
            })?;
    }
    drop(tx);
    let mut blobs: Vec<Option<Vec<u8>>> = vec![None; world];
    let mut first_error: Option<ProbeError> = None;
    let mut received = 0;
    while received < world {
        let next = if first_error.is_some() {
            match rx.recv_timeout(GRACE) {
                Ok(item) => item,
                // The other ranks hang in NCCL waiting for the failed one; the process exits with the
                // error and takes them down.
                Err(_) => break,
            }
        } else {
            match rx.recv() {
                Ok(item) => item,
                Err(_) => break,
            }
        };
        received += 1;
        match next {
            (rank, Ok(blob)) => blobs[rank] = Some(blob),
            (_, Err(err)) => {
                if first_error.is_none() {
                    first_error = Some(err);
                }
            }
        }
    }
    if let Some(err) = first_error {
        return Err(err);
    }
    blobs
        .into_iter()
        .enumerate()
        .map(|(rank, blob)| {
            blob.ok_or(ProbeError::Rank {
                rank,
                message: "ended without a result".to_owned(),
            })
        })
        .collect()
}
