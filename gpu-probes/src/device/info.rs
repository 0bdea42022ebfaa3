//! Pre-flight checks (driver, GPU count, libraries) and what the driver and libraries report about
//! the machine, for every result's provenance.

use std::process::Command;

use cudarc::driver::sys;

use super::nccl;
use crate::assemble::SystemInfo;
use crate::error::ProbeError;

/// What a probe needs before it starts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements {
    /// GPU ordinals the probe drives (each must exist).
    pub gpus: Vec<usize>,
    /// At least this many GPUs must be visible.
    pub min_gpus: usize,
    pub nccl: bool,
    pub cublas: bool,
    pub nvrtc: bool,
}

fn candidates(name: &str) -> String {
    cudarc::get_lib_name_candidates(name).join(", ")
}

/// Checks the driver, GPU count and libraries, then reads the machine's description.
pub fn preflight(req: &Requirements) -> Result<SystemInfo, ProbeError> {
    // SAFETY: only tries to dlopen the driver library.
    if !unsafe { sys::is_culib_present() } {
        return Err(ProbeError::NoDriver {
            searched: candidates("cuda"),
        });
    }
    // SAFETY: plain driver calls after the library was found.
    let init = unsafe { sys::cuInit(0) };
    if init != sys::CUresult::CUDA_SUCCESS {
        return Err(ProbeError::DriverInit {
            call: "cuInit",
            code: format!("{init:?}"),
        });
    }
    let mut count = 0i32;
    // SAFETY: plain query after cuInit.
    let r = unsafe { sys::cuDeviceGetCount(&mut count) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(ProbeError::DriverInit {
            call: "cuDeviceGetCount",
            code: format!("{r:?}"),
        });
    }
    let found = count.max(0) as usize;
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "unset".to_owned());
    let needed = req.min_gpus.max(req.gpus.len()).max(1);
    if found < needed {
        return Err(ProbeError::TooFewGpus {
            needed,
            found,
            visible,
        });
    }
    if let Some(&ordinal) = req.gpus.iter().find(|&&g| g >= found) {
        return Err(ProbeError::NoSuchGpu { ordinal, found });
    }
    // SAFETY: only tries to dlopen the libraries.
    let (has_nvrtc, has_cublas, has_nccl) = unsafe {
        (
            cudarc::nvrtc::sys::is_culib_present(),
            cudarc::cublas::sys::is_culib_present(),
            cudarc::nccl::sys::is_culib_present(),
        )
    };
    if req.nvrtc && !has_nvrtc {
        return Err(ProbeError::NoLibrary {
            library: "NVRTC",
            searched: candidates("nvrtc"),
            why: "the probe compiles its kernels at run time",
        });
    }
    if req.cublas && !has_cublas {
        return Err(ProbeError::NoLibrary {
            library: "cuBLAS",
            searched: candidates("cublas"),
            why: "the GEMMs run through cuBLAS",
        });
    }
    if req.nccl && !has_nccl {
        return Err(ProbeError::NoLibrary {
            library: "NCCL",
            searched: candidates("nccl"),
            why: "transfers between GPUs run through NCCL (a pip wheel's libnccl.so.2 needs a libnccl.so link on LD_LIBRARY_PATH)",
        });
    }
    describe(req, found)
}

fn describe(req: &Requirements, found: usize) -> Result<SystemInfo, ProbeError> {
    let ordinals: Vec<usize> = if req.gpus.is_empty() {
        (0..found).collect()
    } else {
        req.gpus.clone()
    };
    let mut gpus = Vec::new();
    let mut handles = Vec::new();
    for &ordinal in &ordinals {
        let mut dev: sys::CUdevice = 0;
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: plain queries after cuInit; the buffer is large enough and NUL-terminated by the driver.
        unsafe {
            super::gpu::check(
                ordinal,
                "cuDeviceGet",
                sys::cuDeviceGet(&mut dev, ordinal as i32),
            )?;
            super::gpu::check(
                ordinal,
                "cuDeviceGetName",
                sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, dev),
            )?;
            gpus.push(
                std::ffi::CStr::from_ptr(name.as_ptr())
                    .to_string_lossy()
                    .into_owned(),
            );
        }
        handles.push((ordinal, dev));
    }
    let mut version = 0i32;
    // SAFETY: plain query.
    unsafe {
        super::gpu::check(
            0,
            "cuDriverGetVersion",
            sys::cuDriverGetVersion(&mut version),
        )?
    };
    let cuda_version = format!("{}.{}", version / 1000, (version % 1000) / 10);
    let (nccl_version, nccl_library) = if req.nccl {
        let v = nccl::version()?;
        (v, loaded_library("libnccl"))
    } else {
        (String::new(), String::new())
    };
    let cublas_version = if req.cublas {
        cublas_version()?
    } else {
        String::new()
    };
    let mut topology = nvidia_smi(&["topo", "-m"]).map_or_else(Vec::new, |text| {
        text.lines()
            .map(|l| l.trim_end().to_owned())
            .filter(|l| !l.is_empty())
            .collect()
    });
    for &(a, dev_a) in &handles {
        for &(b, dev_b) in &handles {
            if a == b {
                continue;
            }
            let attr = |attrib| -> i32 {
                let mut value = -1i32;
                // SAFETY: plain query on two valid devices.
                let _ = unsafe { sys::cuDeviceGetP2PAttribute(&mut value, attrib, dev_a, dev_b) };
                value
            };
            topology.push(format!(
                "cuDeviceGetP2PAttribute GPU{a}->GPU{b}: access_supported={} performance_rank={} native_atomics={}",
                attr(sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED),
                attr(sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK),
                attr(sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED),
            ));
        }
    }
    Ok(SystemInfo {
        gpus,
        driver_version: driver_version(version),
        cuda_version,
        nccl_version,
        nccl_library,
        cublas_version,
        topology,
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default(),
    })
}

fn cublas_version() -> Result<String, ProbeError> {
    use cudarc::cublas::sys as blas;
    let mut parts = [0i32; 3];
    for (slot, kind) in parts.iter_mut().zip([
        blas::libraryPropertyType::MAJOR_VERSION,
        blas::libraryPropertyType::MINOR_VERSION,
        blas::libraryPropertyType::PATCH_LEVEL,
    ]) {
        // SAFETY: plain query.
        let status = unsafe { blas::cublasGetProperty(kind, slot) };
        if status != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(ProbeError::Cublas {
                call: "cublasGetProperty",
                gpu: 0,
                status: format!("{status:?}"),
            });
        }
    }
    Ok(format!(
        "{}.{}.{} ({})",
        parts[0],
        parts[1],
        parts[2],
        loaded_library("libcublas.")
    ))
}

/// The file a library was loaded from, read from this process's memory map.
pub(crate) fn loaded_library(prefix: &str) -> String {
    std::fs::read_to_string("/proc/self/maps")
        .ok()
        .and_then(|maps| {
            maps.lines()
                .filter_map(|line| line.split_whitespace().nth(5))
                .find(|path| {
                    path.rsplit('/')
                        .next()
                        .is_some_and(|file| file.starts_with(prefix))
                })
                .map(str::to_owned)
        })
        .unwrap_or_else(|| format!("unknown ({prefix}* not in /proc/self/maps)"))
}

fn driver_version(cuda: i32) -> String {
    if let Ok(text) = std::fs::read_to_string("/proc/driver/nvidia/version")
        && let Some(version) = text.lines().next().and_then(|line| {
            line.split_whitespace().find(|w| {
                w.chars().filter(|c| *c == '.').count() >= 1
                    && w.chars().next().is_some_and(|c| c.is_ascii_digit())
            })
        })
    {
        return version.to_owned();
    }
    if let Some(text) = nvidia_smi(&["--query-gpu=driver_version", "--format=csv,noheader"])
        && let Some(line) = text.lines().next()
    {
        return line.trim().to_owned();
    }
    format!("unknown (CUDA driver API {cuda})")
}

fn nvidia_smi(args: &[&str]) -> Option<String> {
    let output = Command::new("nvidia-smi").args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}
