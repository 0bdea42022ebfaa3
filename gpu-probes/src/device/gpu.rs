//! Thin owners of CUDA driver objects: a GPU's context, streams, timing events, plain device
//! allocations, captured graphs, and a watchdog wait.
//!
//! cudarc's context is used for what it does well (primary context, thread binding); everything else is
//! driven through `cudarc::driver::result`/`sys` so no event tracking or stream-ordered allocation sneaks
//! into timed code or graph captures.

use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::result::DriverError;
use cudarc::driver::{CudaContext, result, sys};

use crate::error::ProbeError;

/// Maps a driver result to a probe error naming the call and GPU.
pub(super) fn cu<T>(
    gpu: usize,
    call: &'static str,
    r: Result<T, DriverError>,
) -> Result<T, ProbeError> {
    r.map_err(|e| ProbeError::Cuda {
        call,
        gpu,
        code: format!("{:?}", e.0),
    })
}

/// Maps a raw `CUresult`.
pub(super) fn check(gpu: usize, call: &'static str, r: sys::CUresult) -> Result<(), ProbeError> {
    cu(gpu, call, r.result())
}

/// One GPU with its primary context bound to the calling thread.
pub(super) struct Gpu {
    pub(super) ordinal: usize,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) name: String,
    pub(super) sm_count: usize,
    pub(super) l2_bytes: usize,
    pub(super) compute_capability: (i32, i32),
}

impl Gpu {
    /// Opens GPU `ordinal`, binds its context to this thread and turns cudarc's event tracking off
    /// before anything is allocated (it breaks NCCL graph capture; device.md).
    pub(super) fn open(ordinal: usize) -> Result<Gpu, ProbeError> {
        let ctx = cu(ordinal, "cuCtxCreate (primary)", CudaContext::new(ordinal))?;
        // SAFETY: nothing has been allocated in this context through cudarc; this crate synchronises
        // its streams explicitly.
        unsafe { ctx.disable_event_tracking() };
        let name = cu(ordinal, "cuDeviceGetName", ctx.name())?;
        let sm_count = cu(
            ordinal,
            "cuDeviceGetAttribute",
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        )? as usize;
        let l2_bytes = cu(
            ordinal,
            "cuDeviceGetAttribute",
            ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        )? as usize;
        let compute_capability = cu(
            ordinal,
            "cuDeviceComputeCapability",
            ctx.compute_capability(),
        )?;
        Ok(Gpu {
            ordinal,
            ctx,
            name,
            sm_count,
            l2_bytes,
            compute_capability,
        })
    }

    /// Makes this GPU's context current on the calling thread.
    pub(super) fn bind(&self) -> Result<(), ProbeError> {
        cu(self.ordinal, "cuCtxSetCurrent", self.ctx.bind_to_thread())
    }

    /// Free and total device memory, bytes.
    pub(super) fn memory(&self) -> Result<(usize, usize), ProbeError> {
        cu(self.ordinal, "cuMemGetInfo", self.ctx.mem_get_info())
    }

    pub(super) fn stream(&self) -> Result<Stream, ProbeError> {
        Stream::new(self)
    }

    pub(super) fn event(&self) -> Result<Event, ProbeError> {
        Event::new(self)
    }

    /// A plain device allocation (`cuMemAlloc`) of `bytes`, rounded up to 256 bytes.
    pub(super) fn alloc(&self, bytes: usize, what: &str) -> Result<Buffer, ProbeError> {
        Buffer::new(self, bytes, what)
    }
}

/// A non-blocking stream.
pub(super) struct Stream {
    pub(super) raw: sys::CUstream,
    pub(super) gpu: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: a CUstream handle may be used from any thread that has its context current.
unsafe impl Send for Stream {}

impl Stream {
    fn new(gpu: &Gpu) -> Result<Stream, ProbeError> {
        gpu.bind()?;
        let raw = cu(
            gpu.ordinal,
            "cuStreamCreate",
            result::stream::create(result::stream::StreamKind::NonBlocking),
        )?;
        Ok(Stream {
            raw,
            gpu: gpu.ordinal,
            ctx: gpu.ctx.clone(),
        })
    }

    /// Blocks until all work on the stream has finished.
    pub(super) fn sync(&self) -> Result<(), ProbeError> {
        // SAFETY: the stream is alive and its context is bound by the owner's thread.
        cu(self.gpu, "cuStreamSynchronize", unsafe {
            result::stream::synchronize(self.raw)
        })
    }

    /// Waits for the stream like `sync`, but gives up after `timeout` and calls `on_timeout` (which
    /// aborts NCCL communicators) so a hung collective cannot hang the probe; `poll` is called while
    /// waiting and may return an error (an asynchronous NCCL failure).
    pub(super) fn sync_or_timeout(
        &self,
        timeout: Duration,
        what: &str,
        rank: usize,
        mut poll: impl FnMut() -> Result<(), ProbeError>,
        on_timeout: impl FnOnce(),
    ) -> Result<(), ProbeError> {
        let deadline = Instant::now() + timeout;
        let mut spins = 0u32;
        loop {
            // SAFETY: the stream is alive.
            let status = unsafe { sys::cuStreamQuery(self.raw) };
            match status {
                sys::CUresult::CUDA_SUCCESS => return Ok(()),
                sys::CUresult::CUDA_ERROR_NOT_READY => {}
                other => return check(self.gpu, "cuStreamQuery", other),
            }
            poll()?;
            if Instant::now() > deadline {
                on_timeout();
                return Err(ProbeError::Timeout {
                    what: what.to_owned(),
                    rank,
                    seconds: timeout.as_secs(),
                });
            }
            spins += 1;
            if spins > 1000 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the stream was created by this owner and is destroyed once.
        let _ = unsafe { result::stream::destroy(self.raw) };
    }
}

/// A timing event (`CU_EVENT_DEFAULT`: events made with cudarc's default cannot time; device.md).
pub(super) struct Event {
    raw: sys::CUevent,
    gpu: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: event handles may be used from any thread with the context current.
unsafe impl Send for Event {}

impl Event {
    fn new(gpu: &Gpu) -> Result<Event, ProbeError> {
        gpu.bind()?;
        let raw = cu(
            gpu.ordinal,
            "cuEventCreate",
            result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
        )?;
        Ok(Event {
            raw,
            gpu: gpu.ordinal,
            ctx: gpu.ctx.clone(),
        })
    }

    pub(super) fn record(&self, stream: &Stream) -> Result<(), ProbeError> {
        // SAFETY: both handles are alive and belong to the bound context.
        cu(self.gpu, "cuEventRecord", unsafe {
            result::event::record(self.raw, stream.raw)
        })
    }

    /// Microseconds from `self` to `end`; both must have completed.
    pub(super) fn elapsed_us(&self, end: &Event) -> Result<f64, ProbeError> {
        // SAFETY: both events are alive; the caller synchronised the stream they were recorded on.
        cu(self.gpu, "cuEventSynchronize", unsafe {
            result::event::synchronize(end.raw)
        })?;
        // SAFETY: as above; both events have completed.
        let ms = cu(self.gpu, "cuEventElapsedTime", unsafe {
            result::event::elapsed(self.raw, end.raw)
        })?;
        Ok(f64::from(ms) * 1e3)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: created by this owner, destroyed once.
        let _ = unsafe { result::event::destroy(self.raw) };
    }
}

/// `n` pairs of timing events, recorded around each of `n` operations.
pub(super) struct EventPairs {
    pub(super) start: Vec<Event>,
    pub(super) end: Vec<Event>,
}

impl EventPairs {
    pub(super) fn new(gpu: &Gpu, n: usize) -> Result<EventPairs, ProbeError> {
        Ok(EventPairs {
            start: (0..n).map(|_| gpu.event()).collect::<Result<_, _>>()?,
            end: (0..n).map(|_| gpu.event()).collect::<Result<_, _>>()?,
        })
    }

    /// Elapsed microseconds of the first `n` pairs (after the stream was synchronised).
    pub(super) fn elapsed_us(&self, n: usize) -> Result<Vec<f64>, ProbeError> {
        (0..n)
            .map(|i| self.start[i].elapsed_us(&self.end[i]))
            .collect()
    }
}

/// A plain device allocation.
pub(super) struct Buffer {
    pub(super) ptr: u64,
    pub(super) bytes: usize,
    gpu: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: a device pointer is plain data; its lifetime is tied to this owner.
unsafe impl Send for Buffer {}
// SAFETY: shared references only read the pointer value.
unsafe impl Sync for Buffer {}

impl Buffer {
    fn new(gpu: &Gpu, bytes: usize, what: &str) -> Result<Buffer, ProbeError> {
        gpu.bind()?;
        let bytes = bytes.max(1).div_ceil(256) * 256;
        let (free, _) = gpu.memory()?;
        if bytes > free {
            return Err(ProbeError::OutOfMemory {
                gpu: gpu.ordinal,
                what: what.to_owned(),
                needed_bytes: bytes,
                free_bytes: free,
            });
        }
        // SAFETY: plain allocation in the bound context; freed in Drop.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            if e.0 == sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
                ProbeError::OutOfMemory {
                    gpu: gpu.ordinal,
                    what: what.to_owned(),
                    needed_bytes: bytes,
                    free_bytes: free,
                }
            } else {
                ProbeError::Cuda {
                    call: "cuMemAlloc",
                    gpu: gpu.ordinal,
                    code: format!("{:?}", e.0),
                }
            }
        })?;
        Ok(Buffer {
            ptr,
            bytes,
            gpu: gpu.ordinal,
            ctx: gpu.ctx.clone(),
        })
    }

    /// Device address `offset` bytes in.
    pub(super) fn at(&self, offset: usize) -> u64 {
        debug_assert!(
            offset <= self.bytes,
            "offset {offset} past {} bytes",
            self.bytes
        );
        self.ptr + offset as u64
    }

    /// Copies host values into the start of the buffer (synchronous).
    pub(super) fn upload<T: Copy>(&self, values: &[T]) -> Result<(), ProbeError> {
        self.upload_at(0, values)
    }

    /// Copies host values to `offset` bytes into the buffer (synchronous).
    pub(super) fn upload_at<T: Copy>(&self, offset: usize, values: &[T]) -> Result<(), ProbeError> {
        let bytes = std::mem::size_of_val(values);
        assert!(
            offset + bytes <= self.bytes,
            "upload of {bytes} B at {offset} overflows {} B",
            self.bytes
        );
        if bytes == 0 {
            return Ok(());
        }
        let _ = self.ctx.bind_to_thread();
        // SAFETY: the range lies inside this allocation; the host slice is valid for `bytes`.
        check(self.gpu, "cuMemcpyHtoD", unsafe {
            sys::cuMemcpyHtoD_v2(
                self.ptr + offset as u64,
                values.as_ptr().cast::<c_void>(),
                bytes,
            )
        })
    }

    /// Copies the start of the buffer to host values (synchronous).
    pub(super) fn download<T: Copy>(&self, values: &mut [T]) -> Result<(), ProbeError> {
        self.download_at(0, values)
    }

    /// Copies from `offset` bytes into the buffer to host values (synchronous).
    pub(super) fn download_at<T: Copy>(
        &self,
        offset: usize,
        values: &mut [T],
    ) -> Result<(), ProbeError> {
        let bytes = std::mem::size_of_val(values);
        assert!(
            offset + bytes <= self.bytes,
            "download of {bytes} B at {offset} overflows {} B",
            self.bytes
        );
        if bytes == 0 {
            return Ok(());
        }
        let _ = self.ctx.bind_to_thread();
        // SAFETY: as for upload.
        check(self.gpu, "cuMemcpyDtoH", unsafe {
            sys::cuMemcpyDtoH_v2(
                values.as_mut_ptr().cast::<c_void>(),
                self.ptr + offset as u64,
                bytes,
            )
        })
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: allocated by this owner; every stream using it was synchronised by the probe.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// Downloads `n` values starting at a raw device address.
pub(super) fn download_raw<T: Copy + Default>(
    gpu: usize,
    ptr: u64,
    n: usize,
) -> Result<Vec<T>, ProbeError> {
    let mut values = vec![T::default(); n];
    if n == 0 {
        return Ok(values);
    }
    // SAFETY: the caller passes an address range it owns.
    check(gpu, "cuMemcpyDtoH", unsafe {
        sys::cuMemcpyDtoH_v2(
            values.as_mut_ptr().cast::<c_void>(),
            ptr,
            std::mem::size_of_val(values.as_slice()),
        )
    })?;
    Ok(values)
}

/// Asynchronous device-to-device copy.
pub(super) fn copy_async(
    stream: &Stream,
    dst: u64,
    src: u64,
    bytes: usize,
) -> Result<(), ProbeError> {
    // SAFETY: the caller owns both ranges.
    check(stream.gpu, "cuMemcpyDtoDAsync", unsafe {
        sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, stream.raw)
    })
}

/// Asynchronous host-to-device copy from pageable memory (as `tensor.cuda()` does).
pub(super) fn upload_async<T: Copy>(
    stream: &Stream,
    dst: u64,
    values: &[T],
) -> Result<(), ProbeError> {
    // SAFETY: the caller owns the device range; the host slice outlives the call (pageable copies are
    // staged before the call returns).
    check(stream.gpu, "cuMemcpyHtoDAsync", unsafe {
        sys::cuMemcpyHtoDAsync_v2(
            dst,
            values.as_ptr().cast::<c_void>(),
            std::mem::size_of_val(values),
            stream.raw,
        )
    })
}

/// Asynchronous device-to-host copy into pageable memory; the caller synchronises before reading.
pub(super) fn download_async<T: Copy>(
    stream: &Stream,
    values: &mut [T],
    src: u64,
) -> Result<(), ProbeError> {
    // SAFETY: as above; the host slice must stay alive until the stream is synchronised, which the
    // caller does before touching it.
    check(stream.gpu, "cuMemcpyDtoHAsync", unsafe {
        sys::cuMemcpyDtoHAsync_v2(
            values.as_mut_ptr().cast::<c_void>(),
            src,
            std::mem::size_of_val(values),
            stream.raw,
        )
    })
}

/// Zeroes `bytes` (a multiple of 4) at `dst`.
pub(super) fn zero_async(stream: &Stream, dst: u64, bytes: usize) -> Result<(), ProbeError> {
    memset_u32_async(stream, dst, 0, bytes / 4)
}

/// Sets `words` u32 at `dst` to `value`.
pub(super) fn memset_u32_async(
    stream: &Stream,
    dst: u64,
    value: u32,
    words: usize,
) -> Result<(), ProbeError> {
    // SAFETY: the caller owns the range.
    check(stream.gpu, "cuMemsetD32Async", unsafe {
        sys::cuMemsetD32Async(dst, value, words, stream.raw)
    })
}

/// An instantiated CUDA graph.
pub(super) struct Graph {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    gpu: usize,
    ctx: Arc<CudaContext>,
}

// SAFETY: graph handles are used by the thread that owns them, with the context bound.
unsafe impl Send for Graph {}

impl Graph {
    /// Captures what `body` enqueues on `stream` (thread-local capture mode, so two threads of one
    /// process can capture at once), instantiates and uploads it.
    pub(super) fn capture(
        stream: &Stream,
        body: impl FnOnce() -> Result<(), ProbeError>,
    ) -> Result<Graph, ProbeError> {
        // SAFETY: the stream is alive and not already capturing.
        check(stream.gpu, "cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(
                stream.raw,
                sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            )
        })?;
        let body_result = body();
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: ends the capture begun above, whatever the body did.
        let end = unsafe { sys::cuStreamEndCapture(stream.raw, &mut graph) };
        body_result?;
        check(stream.gpu, "cuStreamEndCapture", end)?;
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: graph is a valid captured graph.
        check(stream.gpu, "cuGraphInstantiate", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
        })?;
        // SAFETY: exec and stream are valid.
        check(stream.gpu, "cuGraphUpload", unsafe {
            sys::cuGraphUpload(exec, stream.raw)
        })?;
        Ok(Graph {
            graph,
            exec,
            gpu: stream.gpu,
            ctx: stream.ctx.clone(),
        })
    }

    pub(super) fn launch(&self, stream: &Stream) -> Result<(), ProbeError> {
        // SAFETY: both handles are alive.
        check(self.gpu, "cuGraphLaunch", unsafe {
            sys::cuGraphLaunch(self.exec, stream.raw)
        })
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: created by this owner and destroyed once, after the probe synchronised its stream.
        unsafe {
            let _ = sys::cuGraphExecDestroy(self.exec);
            let _ = sys::cuGraphDestroy(self.graph);
        }
    }
}
