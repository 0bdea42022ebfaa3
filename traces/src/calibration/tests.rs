//! Round trips and error messages of the calibration format.

use super::*;

fn sample_profile() -> CalibrationProfile {
    let mut profile = CalibrationProfile::new(Provenance {
        tool: "afd-probe test".to_owned(),
        gpus: vec!["Test GPU".to_owned(), "Test GPU".to_owned()],
        ..Provenance::default()
    });
    profile.tables.push(CostTable {
        op: "p2p.one_way".to_owned(),
        variant: BTreeMap::from([("graph".to_owned(), "false".to_owned())]),
        axes: vec!["bytes".to_owned()],
        points: vec![CostPoint {
            at: vec![8.0],
            stats: SampleStats {
                n: 3,
                min_us: 9.0,
                median_us: 10.0,
                p99_us: 11.0,
                max_us: 11.0,
                mean_us: 10.0,
            },
            samples_us: vec![9.0, 10.0, 11.0],
            derived: BTreeMap::new(),
        }],
    });
    profile
}

#[test]
fn profile_round_trips_through_json() {
    let profile = sample_profile();
    let text = profile.to_json();
    assert_eq!(CalibrationProfile::from_json(&text).unwrap(), profile);
    assert!(profile.find("p2p.one_way", &[("graph", "false")]).is_some());
    assert!(profile.find("p2p.one_way", &[("graph", "true")]).is_none());
}

#[test]
fn wrong_axis_count_names_the_point() {
    let mut profile = sample_profile();
    profile.tables[0].points[0].at.push(1.0);
    let err = CalibrationProfile::from_json(&profile.to_json()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "calibration profile field tables[0].points[0].at: has 2 coordinates but the table has 1 axes [\"bytes\"]"
    );
}

#[test]
fn unordered_stats_are_rejected() {
    let mut profile = sample_profile();
    profile.tables[0].points[0].stats.median_us = 20.0;
    let err = CalibrationProfile::from_json(&profile.to_json()).unwrap_err();
    assert!(
        err.to_string().contains("tables[0].points[0].stats"),
        "{err}"
    );
}

#[test]
fn type_errors_carry_the_json_path() {
    let text = sample_profile()
        .to_json()
        .replace("\"median_us\": 10.0", "\"median_us\": \"ten\"");
    let err = CalibrationProfile::from_json(&text).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("tables[0].points[0].stats.median_us"),
        "{message}"
    );
}

#[test]
fn other_schema_versions_are_refused() {
    let text = sample_profile()
        .to_json()
        .replace("\"schema_version\": 1", "\"schema_version\": 99");
    let err = CalibrationProfile::from_json(&text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "calibration profile has schema_version 99, this build reads 1"
    );
}

proptest::proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = CalibrationProfile::from_json(&text);
    }
}

#[test]
fn committed_profiles_parse_and_carry_provenance() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/calibration");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let profile = CalibrationProfile::from_json(&text)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let p = &profile.provenance;
        assert!(
            p.tool.contains("(git "),
            "{}: tool names its commit",
            path.display()
        );
        assert!(!p.gpus.is_empty() && !p.driver_version.is_empty() && !p.cuda_version.is_empty());
        assert!(!p.date_utc.is_empty() && !p.command.is_empty());
        for table in &profile.tables {
            for point in &table.points {
                assert_eq!(
                    point.samples_us.len(),
                    point.stats.n as usize,
                    "{} keeps every sample",
                    table.op
                );
            }
        }
        seen += 1;
    }
    assert!(
        seen >= 2,
        "the H200 profiles are committed under {}",
        dir.display()
    );
}

#[test]
fn builtin_h200_profiles_parse_and_carry_provenance() {
    let profiles = builtin_profiles("h200");
    assert_eq!(profiles.len(), 2);
    for (file, text) in profiles {
        let profile =
            CalibrationProfile::from_json(text).unwrap_or_else(|err| panic!("{file}: {err}"));
        assert!(
            profile.provenance.gpus.iter().all(|g| g.contains("H200")),
            "{file}"
        );
        assert!(!profile.provenance.date_utc.is_empty(), "{file}");
    }
    assert!(builtin_profiles("l4").is_empty());
}

#[test]
fn the_link_kind_is_read_from_the_topology_matrix() {
    let (_, text) = builtin_profiles("h200")
        .iter()
        .find(|(name, _)| name.contains("handoff"))
        .expect("the built-in hand-off profile");
    let profile = CalibrationProfile::from_json(text).expect("the built-in profile parses");
    // 2 x H200 joined by 18 NVLinks (`NV18`).
    assert_eq!(profile.provenance.link_kind(), Some("nvlink"));
    let matrix = |entry: &str| {
        vec![
            "\tGPU0\tGPU1\tCPU Affinity".to_owned(),
            format!("GPU0\t X \t{entry}\t0-31"),
            format!("GPU1\t{entry}\t X \t0-31"),
        ]
    };
    for entry in ["PIX", "PXB", "PHB", "NODE", "SYS"] {
        assert_eq!(
            link_kind_of_topology(&matrix(entry)),
            Some("pcie"),
            "{entry}"
        );
    }
    assert_eq!(link_kind_of_topology(&matrix("NV4")), Some("nvlink"));
    assert_eq!(link_kind_of_topology(&matrix("NVX")), None);
    assert_eq!(link_kind_of_topology(&["GPU0\t X \t0-31".to_owned()]), None);
    assert_eq!(link_kind_of_topology(&[]), None);
}
