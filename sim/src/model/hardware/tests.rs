//! GPU names and datasheet sanity.

use super::*;

#[test]
fn every_kind_parses_back_from_its_name() {
    for kind in GpuKind::ALL {
        assert_eq!(GpuKind::parse(kind.as_str()), Some(kind));
        assert_eq!(GpuKind::parse(&kind.as_str().to_uppercase()), Some(kind));
    }
    assert_eq!(GpuKind::parse("b200"), None);
}

#[test]
fn a_driver_name_gives_the_part_its_figures_describe() {
    for (name, kind) in [
        ("NVIDIA H200, 580.159.04, 143771 MiB", Some(GpuKind::H200)),
        ("NVIDIA H100 80GB HBM3", Some(GpuKind::H100)),
        ("nvidia h100 pcie", Some(GpuKind::H100Pcie)),
        ("NVIDIA A100 80GB PCIe", Some(GpuKind::A100Pcie)),
        ("NVIDIA A100-SXM4-80GB", Some(GpuKind::A100)),
        ("NVIDIA L4", Some(GpuKind::L4)),
        (
            "NVIDIA RTX PRO 6000 Blackwell Server Edition",
            Some(GpuKind::RtxPro6000),
        ),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA A100-SXM4-40GB", None),
        ("", None),
    ] {
        assert_eq!(GpuKind::of_device_name(name), kind, "{name}");
    }
}

#[test]
fn ridge_points_match_the_derived_anchors() {
    // sim-anchors §3: dense bf16 / HBM ridge point H100 ~295 FLOP/B, H200 ~206 FLOP/B.
    let ridge = |kind: GpuKind| kind.spec().bf16_flops / kind.spec().hbm_bytes_per_s;
    assert!((ridge(GpuKind::H100) - 295.0).abs() < 2.0);
    assert!((ridge(GpuKind::H200) - 206.0).abs() < 2.0);
}

#[test]
fn pcie_kinds_come_from_the_shipped_datasheets() {
    let l4 = GpuKind::L4.spec();
    assert_eq!(
        (l4.bf16_flops, l4.hbm_bytes_per_s, l4.memory_bytes),
        (121e12, 300e9, 24 << 30)
    );
    assert_eq!(
        (l4.link_bytes_per_s, l4.link_latency_s, l4.nvlink),
        (32e9, 10e-6, false)
    );
    let h100 = GpuKind::H100Pcie.spec();
    // H100 PCIe: Gen5 x16, 64 GB/s one way; 1,513 sparse = 756 dense TFLOP/s; 2 TB/s.
    assert_eq!(
        (h100.link_bytes_per_s, h100.bf16_flops, h100.hbm_bytes_per_s),
        (64e9, 756e12, 2e12)
    );
    assert_eq!(GpuKind::A100Pcie.spec().hbm_bytes_per_s, 1935e9);
    assert_eq!(pcie_link_kind(GpuKind::L20).as_deref(), Some("pcie-gen4"));
    assert_eq!(
        pcie_link_kind(GpuKind::H100Pcie).as_deref(),
        Some("pcie-gen5")
    );
    assert_eq!(pcie_link_kind(GpuKind::H200), None);
    assert_eq!(GpuKind::parse("A100-PCIE"), Some(GpuKind::A100Pcie));
}

#[test]
fn an_a100_pcie_takes_vllms_a100_batch_defaults() {
    assert_eq!(GpuKind::A100Pcie.batch_class(), GpuKind::A100.batch_class());
}
