//! The committed P2P evidence files parse as calibration profiles and hold the tables PROVENANCE.md describes.

use afd_traces::calibration::CalibrationProfile;

fn read(name: &str) -> CalibrationProfile {
    let path = format!("{}/data/p2p/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("committed file");
    CalibrationProfile::from_json(&text).unwrap_or_else(|err| panic!("{path}: {err}"))
}

#[test]
fn fan_in_profile_has_two_and_three_senders_in_both_modes() {
    let profile = read("h200x4-fan-in.json");
    assert_eq!(profile.provenance.gpus.len(), 4);
    for senders in ["2", "3"] {
        for graph in ["false", "true"] {
            let table = profile
                .find("p2p.fan_in", &[("senders", senders), ("graph", graph)])
                .unwrap_or_else(|| panic!("fan-in senders={senders} graph={graph}"));
            assert!(table.points.len() > 20);
        }
    }
}

#[test]
fn launcher_mode_profile_is_from_two_processes() {
    let profile = read("h200x2-launcher-mode.json");
    assert!(profile.find("p2p.one_way", &[("graph", "true")]).is_some());
    assert!(
        profile
            .provenance
            .notes
            .values()
            .any(|n| n.contains("processes")),
        "{:?}",
        profile.provenance.notes
    );
}
