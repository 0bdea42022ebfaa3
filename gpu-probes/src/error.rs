//! Everything that can stop a probe, with the exit code the command line gives it.

/// Why a probe could not run or could not be trusted.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "no CUDA driver found (searched {searched}): afd-probe needs an NVIDIA GPU and its driver"
    )]
    NoDriver { searched: String },
    #[error("CUDA driver present but unusable: {call} failed with {code}")]
    DriverInit { call: &'static str, code: String },
    #[error("this probe needs {needed} GPU(s), {found} visible (CUDA_VISIBLE_DEVICES={visible:?})")]
    TooFewGpus {
        needed: usize,
        found: usize,
        visible: String,
    },
    #[error("GPU ordinal {ordinal} does not exist: {found} GPU(s) visible")]
    NoSuchGpu { ordinal: usize, found: usize },
    #[error("the {library} library cannot be loaded (searched {searched}): {why}")]
    NoLibrary {
        library: &'static str,
        searched: String,
        why: &'static str,
    },
    #[error("{call} failed on GPU {gpu}: {code}")]
    Cuda {
        call: &'static str,
        gpu: usize,
        code: String,
    },
    #[error("cuBLAS {call} failed on GPU {gpu}: {status}")]
    Cublas {
        call: &'static str,
        gpu: usize,
        status: String,
    },
    #[error("NCCL {call} failed on rank {rank}: {code} ({message})")]
    Nccl {
        call: &'static str,
        rank: usize,
        code: String,
        message: String,
    },
    #[error("compiling the probe kernels with NVRTC failed: {log}")]
    Nvrtc { log: String },
    #[error("{what} did not finish within {seconds} s on rank {rank} (communicators aborted)")]
    Timeout {
        what: String,
        rank: usize,
        seconds: u64,
    },
    #[error("out of GPU memory on GPU {gpu}: {what} needs {needed_bytes} bytes, {free_bytes} free")]
    OutOfMemory {
        gpu: usize,
        what: String,
        needed_bytes: usize,
        free_bytes: usize,
    },
    #[error("data check failed after timing {what}: {detail}")]
    DataCheck { what: String, detail: String },
    #[error(transparent)]
    Model(#[from] crate::model::ModelError),
    #[error(transparent)]
    Rendezvous(#[from] crate::rendezvous::RendezvousError),
    #[error("invalid probe setting {setting}: {problem}")]
    Setting { setting: String, problem: String },
    #[error("rank {rank} failed: {message}")]
    Rank { rank: usize, message: String },
}

impl ProbeError {
    /// 1 when the run finished but its data check failed; 2 for everything that kept it from running.
    pub fn exit_code(&self) -> u8 {
        match self {
            ProbeError::DataCheck { .. } => 1,
            _ => 2,
        }
    }

    /// A setting error.
    pub fn setting(setting: impl Into<String>, problem: impl Into<String>) -> ProbeError {
        ProbeError::Setting {
            setting: setting.into(),
            problem: problem.into(),
        }
    }
}
