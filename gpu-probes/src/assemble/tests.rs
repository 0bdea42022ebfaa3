//! Assembling profiles from recorded samples.

use std::time::Duration;

use afd_traces::calibration::CalibrationProfile;

use super::*;

#[test]
fn dates_are_rfc3339_utc() {
    assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    // 2026-11-29 08:15:30 UTC.
    let t = UNIX_EPOCH + Duration::from_secs(1_795_940_130);
    assert_eq!(rfc3339(t), "2026-11-29T08:15:30Z");
    // A leap day.
    let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
    assert_eq!(rfc3339(t), "2000-02-29T00:00:00Z");
}

#[test]
fn only_nccl_and_cuda_variables_are_kept() {
    let env = relevant_env([
        ("NCCL_NVLS_ENABLE".to_owned(), "0".to_owned()),
        ("HOME".to_owned(), "/root".to_owned()),
        ("CUDA_VISIBLE_DEVICES".to_owned(), "0,1".to_owned()),
    ]);
    assert_eq!(env.len(), 2);
    assert_eq!(env["NCCL_NVLS_ENABLE"], "0");
}

#[test]
fn a_profile_of_recorded_points_passes_the_format_check() {
    // One-way 8-byte sends recorded on 2×H200 (µs).
    let samples = vec![10.6, 10.9, 11.4, 10.2, 25.0];
    let p = point(
        vec![8.0],
        samples,
        derived(&[("algbw_gbps", 0.0007), ("bad", f64::NAN)]),
    )
    .unwrap();
    assert_eq!(p.stats.median_us, 10.9);
    assert!(
        !p.derived.contains_key("bad"),
        "non-finite derived values are dropped"
    );
    let mut profile = CalibrationProfile::new(provenance(
        &SystemInfo {
            gpus: vec!["NVIDIA H200".to_owned(); 2],
            ..SystemInfo::default()
        },
        "afd-probe p2p".to_owned(),
        UNIX_EPOCH,
        Vec::new(),
        BTreeMap::new(),
    ));
    profile.tables.push(table(
        "p2p.one_way",
        &[("graph", "false".to_owned())],
        &["bytes"],
        vec![p],
    ));
    let text = profile.to_json();
    assert_eq!(CalibrationProfile::from_json(&text).unwrap(), profile);
}

#[test]
fn points_without_samples_are_refused() {
    let err = point(vec![1.0], Vec::new(), BTreeMap::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "data check failed after timing point [1.0]: 0 samples, none or some not finite"
    );
}

#[test]
fn atomic_writes_leave_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("profile.json");
    write_atomic(&path, "{}\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "{}\n");
    let missing = dir.path().join("no/such/folder/profile.json");
    assert!(write_atomic(&missing, "{}").is_err());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1);
}

#[test]
fn the_provenance_names_the_link_its_gpus_share() {
    let info = |topology: &[&str]| SystemInfo {
        gpus: vec!["NVIDIA L4".to_owned(); 2],
        topology: topology.iter().map(|l| (*l).to_owned()).collect(),
        ..SystemInfo::default()
    };
    let notes = |info: &SystemInfo, given: BTreeMap<String, String>| {
        provenance(
            info,
            "afd-probe p2p".to_owned(),
            UNIX_EPOCH,
            Vec::new(),
            given,
        )
        .notes
    };
    let pcie = info(&["\tGPU0\tGPU1", "GPU0\t X \tPHB", "GPU1\tPHB\t X "]);
    assert_eq!(notes(&pcie, BTreeMap::new())["link_kind"], "pcie");
    let nvlink = info(&["\tGPU0\tGPU1", "GPU0\t X \tNV18", "GPU1\tNV18\t X "]);
    assert_eq!(notes(&nvlink, BTreeMap::new())["link_kind"], "nvlink");
    // One GPU, no matrix: nothing is claimed.
    assert!(!notes(&info(&[]), BTreeMap::new()).contains_key("link_kind"));
    // A probe that knows better (ranks on two hosts) keeps its own.
    let given = BTreeMap::from([("link_kind".to_owned(), "ib".to_owned())]);
    assert_eq!(notes(&pcie, given)["link_kind"], "ib");
}
