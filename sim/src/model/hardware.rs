//! Datasheet figures of the GPUs the roofline can price, and the efficiency factors applied to them.
//!
//! These are vendor datasheet numbers, not measurements: the NVLink parts' are typed in with their
//! source, the PCIe parts' (L4, L20, A100 PCIe, H100 PCIe) come from the shipped
//! `afd-hardware-datasheets` file with their link kind (`afd_traces::hardware`). A measured
//! calibration profile replaces them operation by operation (`model/cost.rs`). The efficiency
//! factors and launch costs are documented assumptions, each with the public measurement it leans
//! on (research/sim-anchors.md §3).

use std::fmt;
use std::sync::OnceLock;

/// A GPU model the roofline knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GpuKind {
    H200,
    H100,
    H800,
    H20,
    A100,
    L4,
    L20,
    A100Pcie,
    H100Pcie,
    RtxPro6000,
}

/// Peak figures of one GPU and the link between two of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GpuSpec {
    pub kind: GpuKind,
    /// Dense (no 2:4 sparsity) bf16 tensor-core throughput, FLOP/s.
    pub bf16_flops: f64,
    /// Memory bandwidth, bytes/s.
    pub hbm_bytes_per_s: f64,
    /// Memory capacity, bytes.
    pub memory_bytes: u64,
    /// GPU-to-GPU bandwidth in one direction, bytes/s (NVLink, or PCIe where there is none).
    pub link_bytes_per_s: f64,
    /// Small-message one-way latency of an NCCL send/recv over that link, seconds.
    pub link_latency_s: f64,
    /// Whether GPUs talk over NVLink (false: PCIe).
    pub nvlink: bool,
}

/// Fractions of peak the roofline assumes, and launch costs, until a calibration profile says better.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Efficiency {
    /// Fraction of peak HBM bandwidth a streaming kernel reaches. AIConfigurator's H200 system file
    /// scales HBM by 0.8 (sim-anchors §1.2); DeepGEMM decode GEMMs reach 50–80 % (sim-anchors §3).
    pub hbm: f64,
    /// Fraction of dense bf16 peak a large GEMM reaches (DeepGEMM grouped GEMMs 41–66 % of FP8 peak).
    pub compute: f64,
    /// Fraction of link bandwidth an NCCL send/recv reaches. nccl-tests `sendrecv_perf` between two
    /// NVLink H100s plateaus near 180 GB/s of 450 (nccl-tests #268, sim-anchors §3).
    pub link: f64,
    /// Shortest device time of one kernel, seconds (launch + tail on an idle GPU).
    pub kernel_floor_s: f64,
    /// Host time to issue one kernel or NCCL call from PyTorch eager mode, seconds.
    pub eager_host_per_kernel_s: f64,
    /// Host time to launch one captured CUDA graph, seconds.
    pub graph_launch_s: f64,
    /// Device-side gap between consecutive kernels inside a graph replay, seconds.
    pub graph_kernel_gap_s: f64,
    /// Extra device-side gap of an eagerly launched kernel over the same kernel in a graph when the
    /// host has queued it ahead, seconds.
    pub eager_kernel_gap_s: f64,
    /// Host time of one engine step outside the forward pass (scheduler, input preparation,
    /// sampling, output processing), seconds; plus `step_host_per_request_s` per scheduled request.
    pub step_host_s: f64,
    pub step_host_per_request_s: f64,
    /// Host time of the FFN worker loop between steps (synchronise, receive and decode the control
    /// payload, afd-spec §6.2), seconds.
    pub ffn_loop_host_s: f64,
}

impl GpuKind {
    pub const ALL: [GpuKind; 10] = [
        GpuKind::H200,
        GpuKind::H100,
        GpuKind::H800,
        GpuKind::H20,
        GpuKind::A100,
        GpuKind::L4,
        GpuKind::L20,
        GpuKind::A100Pcie,
        GpuKind::H100Pcie,
        GpuKind::RtxPro6000,
    ];

    /// The name on the command line (`h200`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            GpuKind::H200 => "h200",
            GpuKind::H100 => "h100",
            GpuKind::H800 => "h800",
            GpuKind::H20 => "h20",
            GpuKind::A100 => "a100",
            GpuKind::L4 => "l4",
            GpuKind::L20 => "l20",
            GpuKind::A100Pcie => "a100-pcie",
            GpuKind::H100Pcie => "h100-pcie",
            GpuKind::RtxPro6000 => "rtx-pro-6000",
        }
    }

    /// Parses a name case-insensitively (`H200`, `h200`).
    pub fn parse(text: &str) -> Option<GpuKind> {
        let lower = text.trim().to_ascii_lowercase();
        GpuKind::ALL.into_iter().find(|kind| kind.as_str() == lower)
    }

    /// The kind of a GPU named as the driver names it (`nvidia-smi --query-gpu=name`, the first
    /// field of a run file's provenance line `NVIDIA H200, 580.159.04, 143771 MiB`). Only the
    /// exact part each kind's figures describe: an H200 NVL, an H100 NVL or a 40 GB A100 has other
    /// clocks, power or memory, and is `None`. The PCIe parts' names are their datasheets'.
    pub fn of_device_name(name: &str) -> Option<GpuKind> {
        let name = name.split(',').next().unwrap_or_default().trim();
        let sxm = [
            ("NVIDIA H200", GpuKind::H200),
            ("NVIDIA H100 80GB HBM3", GpuKind::H100),
            ("NVIDIA H800", GpuKind::H800),
            ("NVIDIA H20", GpuKind::H20),
            ("NVIDIA A100-SXM4-80GB", GpuKind::A100),
        ];
        if let Some(&(_, kind)) = sxm.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)) {
            return Some(kind);
        }
        let sheets = afd_traces::hardware::builtin_datasheets();
        GpuKind::ALL.into_iter().find(|kind| {
            sheets
                .gpu(kind.as_str())
                .is_some_and(|gpu| gpu.name.eq_ignore_ascii_case(name))
        })
    }

    /// The class vLLM 0.26.0 picks `vllm serve`'s batch defaults by: at least 70 GiB and not an
    /// A100 (`vllm/engine/arg_utils.py:2449-2460`).
    pub fn batch_class(self) -> crate::deployment::GpuClass {
        crate::deployment::GpuClass::of(
            self.spec().memory_bytes,
            matches!(self, GpuKind::A100 | GpuKind::A100Pcie),
        )
    }

    /// Datasheet figures.
    pub fn spec(self) -> GpuSpec {
        const GB: f64 = 1e9;
        const TB: f64 = 1e12;
        const GIB: u64 = 1 << 30;
        match self {
            // NVIDIA H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s; bf16 989 TFLOPS dense (1,979 is the
            // sparse figure); NVLink4 900 GB/s bidirectional = 450 GB/s per direction.
            GpuKind::H200 => GpuSpec {
                kind: self,
                bf16_flops: 989.4 * TB,
                hbm_bytes_per_s: 4.8 * TB,
                memory_bytes: 141 * 1_000_000_000,
                link_bytes_per_s: 450.0 * GB,
                link_latency_s: 3e-6,
                nvlink: true,
            },
            // NVIDIA H100 SXM5 datasheet: 80 GB HBM3 at 3.35 TB/s, bf16 989 TFLOPS dense, NVLink4 450 GB/s
            // per direction. NCCL small-message send/recv ~3 µs over NVLink (nccl #1487).
            GpuKind::H100 => GpuSpec {
                kind: self,
                bf16_flops: 989.4 * TB,
                hbm_bytes_per_s: 3.35 * TB,
                memory_bytes: 80 * GIB,
                link_bytes_per_s: 450.0 * GB,
                link_latency_s: 3e-6,
                nvlink: true,
            },
            // H800 SXM5: H100 compute and memory, NVLink cut to 400 GB/s bidirectional = 200 per
            // direction; NCCL sendrecv 3.7 µs (sim-anchors §3).
            GpuKind::H800 => GpuSpec {
                kind: self,
                bf16_flops: 989.4 * TB,
                hbm_bytes_per_s: 3.35 * TB,
                memory_bytes: 80 * GIB,
                link_bytes_per_s: 200.0 * GB,
                link_latency_s: 3.7e-6,
                nvlink: true,
            },
            // H20: 96 GB HBM3 at 4.0 TB/s, bf16 148 TFLOPS dense, NVLink 900 GB/s class.
            GpuKind::H20 => GpuSpec {
                kind: self,
                bf16_flops: 148.0 * TB,
                hbm_bytes_per_s: 4.0 * TB,
                memory_bytes: 96 * GIB,
                link_bytes_per_s: 450.0 * GB,
                link_latency_s: 3e-6,
                nvlink: true,
            },
            // A100 SXM4 80GB datasheet: HBM2e 2,039 GB/s, bf16 312 TFLOPS dense, NVLink3 600 GB/s
            // bidirectional = 300 per direction.
            GpuKind::A100 => GpuSpec {
                kind: self,
                bf16_flops: 312.0 * TB,
                hbm_bytes_per_s: 2.039 * TB,
                memory_bytes: 80 * GIB,
                link_bytes_per_s: 300.0 * GB,
                link_latency_s: 4e-6,
                nvlink: true,
            },
            // PCIe-only parts: figures and link kind from the shipped datasheets.
            GpuKind::L4
            | GpuKind::L20
            | GpuKind::A100Pcie
            | GpuKind::H100Pcie
            | GpuKind::RtxPro6000 => pcie_spec(self),
        }
    }
}

/// The spec of a PCIe-only GPU kind from `traces/data/hardware/datasheets.json`: its figures, and
/// its `pcie-gen{n}` link kind's rate and latency as the GPU-to-GPU link.
fn pcie_spec(kind: GpuKind) -> GpuSpec {
    static SPECS: OnceLock<Vec<GpuSpec>> = OnceLock::new();
    let specs = SPECS.get_or_init(|| {
        let sheets = afd_traces::hardware::builtin_datasheets();
        GpuKind::ALL
            .into_iter()
            .filter_map(|kind| {
                let gpu = sheets.gpu(kind.as_str())?;
                let link = sheets.link(&format!("pcie-gen{}", gpu.pcie_gen)).expect(
                    "every shipped GPU names a shipped PCIe link kind (tests of afd-traces)",
                );
                Some(GpuSpec {
                    kind,
                    bf16_flops: gpu.bf16_dense_tflops * 1e12,
                    hbm_bytes_per_s: gpu.memory_gb_per_s * 1e9,
                    memory_bytes: (gpu.memory_gib * f64::from(1u32 << 30)) as u64,
                    link_bytes_per_s: link.gb_per_s * 1e9,
                    link_latency_s: link.latency_us / 1e6,
                    nvlink: false,
                })
            })
            .collect()
    });
    *specs
        .iter()
        .find(|spec| spec.kind == kind)
        .unwrap_or_else(|| panic!("the shipped datasheets have no GPU {kind}"))
}

/// The PCIe link kind a GPU kind's datasheet names (`pcie-gen4`), `None` for NVLink parts.
pub fn pcie_link_kind(kind: GpuKind) -> Option<String> {
    afd_traces::hardware::builtin_datasheets()
        .gpu(kind.as_str())
        .map(|gpu| format!("pcie-gen{}", gpu.pcie_gen))
}

impl fmt::Display for GpuKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Efficiency {
    /// The defaults used by the roofline for every GPU kind.
    ///
    /// Launch costs: a PyTorch eager op costs a few µs of host time per kernel; CUDA-graph replay
    /// removes it and leaves ~1 µs gaps; an NCCL all-reduce of 1 KB is 0.5 µs in a graph vs 3.5 µs
    /// eager (nccl #1984, sim-anchors §3). Without a profile the device-side cost of an eager launch
    /// over a graph's is unknown and taken as zero (a profile measures it: `eager_kernel_gap`). The
    /// step host time of a vLLM V1 engine is an assumption to be replaced by a measured `host.step`
    /// table.
    pub fn defaults() -> Efficiency {
        Efficiency {
            hbm: 0.8,
            compute: 0.6,
            link: 0.4,
            kernel_floor_s: 2e-6,
            eager_host_per_kernel_s: 6e-6,
            graph_launch_s: 12e-6,
            graph_kernel_gap_s: 1e-6,
            eager_kernel_gap_s: 0.0,
            step_host_s: 300e-6,
            step_host_per_request_s: 2e-6,
            ffn_loop_host_s: 30e-6,
        }
    }
}

#[cfg(test)]
mod tests;
