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
fn ridge_points_match_the_derived_anchors() {
    // sim-anchors §3: dense bf16 / HBM ridge point H100 ~295 FLOP/B, H200 ~206 FLOP/B.
    let ridge = |kind: GpuKind| kind.spec().bf16_flops / kind.spec().hbm_bytes_per_s;
    assert!((ridge(GpuKind::H100) - 295.0).abs() < 2.0);
    assert!((ridge(GpuKind::H200) - 206.0).abs() < 2.0);
}
