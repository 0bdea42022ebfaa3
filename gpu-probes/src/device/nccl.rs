//! NCCL through its C API: the loaded version and library file, communicators, send/recv, groups and
//! the collectives the FFN side uses. cudarc's safe layer lacks all-to-all, async-error queries and
//! access to the raw communicator, so this wraps `cudarc::nccl::sys` directly.

use std::ffi::{CStr, c_void};

use cudarc::nccl::sys as nccl;

use super::gpu::Stream;
use crate::error::ProbeError;
use crate::rendezvous::ID_BYTES;

fn code_of(rank: usize, call: &'static str, r: nccl::ncclResult_t) -> Result<(), ProbeError> {
    if r == nccl::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any result code.
    let message = unsafe { CStr::from_ptr(nccl::ncclGetErrorString(r)) }
        .to_string_lossy()
        .into_owned();
    Err(ProbeError::Nccl {
        call,
        rank,
        code: format!("{r:?}"),
        message,
    })
}

/// `major.minor.patch` of the NCCL library actually loaded.
pub(super) fn version() -> Result<String, ProbeError> {
    let mut v = 0i32;
    // SAFETY: plain query.
    code_of(0, "ncclGetVersion", unsafe { nccl::ncclGetVersion(&mut v) })?;
    // NCCL ≥ 2.9 encodes major*10000 + minor*100 + patch.
    Ok(format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100))
}

/// A fresh unique id (rank 0 makes it and hands it out).
pub(super) fn unique_id() -> Result<[u8; ID_BYTES], ProbeError> {
    let mut id = nccl::ncclUniqueId {
        internal: [0; ID_BYTES],
    };
    // SAFETY: writes 128 bytes into `id`.
    code_of(0, "ncclGetUniqueId", unsafe {
        nccl::ncclGetUniqueId(&mut id)
    })?;
    Ok(id.internal.map(|c| c as u8))
}

/// Element types the probes send.
#[derive(Clone, Copy, Debug)]
pub(super) enum Dtype {
    U8,
    Bf16,
}

impl Dtype {
    fn raw(self) -> nccl::ncclDataType_t {
        match self {
            Dtype::U8 => nccl::ncclDataType_t::ncclUint8,
            Dtype::Bf16 => nccl::ncclDataType_t::ncclBfloat16,
        }
    }
}

/// One rank's communicator; aborted on drop (nothing may be in flight by then).
pub(super) struct Comm {
    raw: nccl::ncclComm_t,
    pub(super) rank: usize,
    pub(super) world: usize,
    aborted: std::cell::Cell<bool>,
}

// SAFETY: a communicator is used by the one thread that owns this value.
unsafe impl Send for Comm {}

impl Comm {
    /// Joins the communicator `id` as `rank` of `world` (blocks until every rank joins). The GPU's
    /// context must be current.
    pub(super) fn init(id: &[u8; ID_BYTES], rank: usize, world: usize) -> Result<Comm, ProbeError> {
        let id = nccl::ncclUniqueId {
            internal: id.map(|b| b as std::ffi::c_char),
        };
        let mut raw: nccl::ncclComm_t = std::ptr::null_mut();
        // SAFETY: id holds 128 bytes from ncclGetUniqueId; the context is bound by the caller.
        code_of(rank, "ncclCommInitRank", unsafe {
            nccl::ncclCommInitRank(&mut raw, world as i32, id, rank as i32)
        })?;
        Ok(Comm {
            raw,
            rank,
            world,
            aborted: std::cell::Cell::new(false),
        })
    }

    fn s(stream: &Stream) -> nccl::cudaStream_t {
        stream.raw as nccl::cudaStream_t
    }

    pub(super) fn send(
        &self,
        buf: u64,
        count: usize,
        dtype: Dtype,
        peer: usize,
        stream: &Stream,
    ) -> Result<(), ProbeError> {
        // SAFETY: buf holds `count` elements on this rank's GPU.
        code_of(self.rank, "ncclSend", unsafe {
            nccl::ncclSend(
                buf as *const c_void,
                count,
                dtype.raw(),
                peer as i32,
                self.raw,
                Self::s(stream),
            )
        })
    }

    pub(super) fn recv(
        &self,
        buf: u64,
        count: usize,
        dtype: Dtype,
        peer: usize,
        stream: &Stream,
    ) -> Result<(), ProbeError> {
        // SAFETY: buf has room for `count` elements on this rank's GPU.
        code_of(self.rank, "ncclRecv", unsafe {
            nccl::ncclRecv(
                buf as *mut c_void,
                count,
                dtype.raw(),
                peer as i32,
                self.raw,
                Self::s(stream),
            )
        })
    }

    pub(super) fn group_start(&self) -> Result<(), ProbeError> {
        // SAFETY: plain call.
        code_of(self.rank, "ncclGroupStart", unsafe {
            nccl::ncclGroupStart()
        })
    }

    pub(super) fn group_end(&self) -> Result<(), ProbeError> {
        // SAFETY: paired with group_start.
        code_of(self.rank, "ncclGroupEnd", unsafe { nccl::ncclGroupEnd() })
    }

    /// In-place sum all-reduce of `count` f32.
    pub(super) fn all_reduce_f32(
        &self,
        buf: u64,
        count: usize,
        stream: &Stream,
    ) -> Result<(), ProbeError> {
        // SAFETY: buf holds `count` f32 on this rank's GPU.
        code_of(self.rank, "ncclAllReduce", unsafe {
            nccl::ncclAllReduce(
                buf as *const c_void,
                buf as *mut c_void,
                count,
                nccl::ncclDataType_t::ncclFloat32,
                nccl::ncclRedOp_t::ncclSum,
                self.raw,
                Self::s(stream),
            )
        })
    }

    /// All-to-all by grouped send/recv: `bytes_per_peer` from `send + p·bytes_per_peer` to every rank p
    /// (itself included), received at `recv + p·bytes_per_peer` (as nccl-tests' alltoall).
    pub(super) fn all_to_all(
        &self,
        send: u64,
        recv: u64,
        bytes_per_peer: usize,
        stream: &Stream,
    ) -> Result<(), ProbeError> {
        self.group_start()?;
        let mut result = Ok(());
        for peer in 0..self.world {
            let offset = (peer * bytes_per_peer) as u64;
            result = result
                .and_then(|()| self.send(send + offset, bytes_per_peer, Dtype::U8, peer, stream))
                .and_then(|()| self.recv(recv + offset, bytes_per_peer, Dtype::U8, peer, stream));
        }
        let end = self.group_end();
        result.and(end)
    }

    /// An asynchronous error NCCL has recorded on this communicator, if any.
    pub(super) fn async_error(&self) -> Result<(), ProbeError> {
        let mut r = nccl::ncclResult_t::ncclSuccess;
        // SAFETY: the communicator is alive.
        code_of(self.rank, "ncclCommGetAsyncError", unsafe {
            nccl::ncclCommGetAsyncError(self.raw, &mut r)
        })?;
        if r == nccl::ncclResult_t::ncclInProgress {
            return Ok(());
        }
        code_of(self.rank, "asynchronous NCCL operation", r)
    }

    /// Aborts the communicator so a hung operation returns (used by the watchdog).
    pub(super) fn abort(&self) {
        if self.aborted.replace(true) {
            return;
        }
        // SAFETY: the communicator is alive; abort may be called while operations hang.
        let _ = unsafe { nccl::ncclCommAbort(self.raw) };
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // Abort rather than destroy: it is local and never waits for the other ranks (cudarc does the
        // same); every stream using the communicator was synchronised before.
        self.abort();
    }
}
