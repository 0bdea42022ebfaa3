//! Tests of the datasheets reader: the shipped file and one bad file per check.

use super::*;

#[test]
fn shipped_datasheets_hold_every_pcie_gpu_and_link_kind() {
    let sheets = builtin_datasheets();
    for kind in ["l4", "l20", "a100-pcie", "h100-pcie", "rtx-pro-6000"] {
        let gpu = sheets.gpu(kind).unwrap_or_else(|| panic!("{kind} missing"));
        assert_eq!(gpu.nvlink_gb_per_s, None, "{kind} is PCIe-only");
        let link = format!("pcie-gen{}", gpu.pcie_gen);
        assert!(sheets.link(&link).is_some(), "{kind} names missing {link}");
    }
    for kind in ["pcie-gen4", "pcie-gen5", "ib", "roce", "tcp"] {
        assert!(sheets.link(kind).is_some(), "{kind} missing");
    }
    assert_eq!(sheets.gpu("L4").map(|g| g.memory_gb_per_s), Some(300.0));
    assert_eq!(sheets.link("pcie-gen5").map(|l| l.gb_per_s), Some(64.0));
    // PR #274's cards: 97,887 MiB as nvidia-smi reports them; the bf16 figure is derived (basis).
    let rtx = sheets.gpu("rtx-pro-6000").unwrap();
    assert_eq!(rtx.memory_gib * 1024.0, 97_887.0);
    assert!(rtx.basis.as_deref().unwrap_or("").contains("500 TFLOPS"));
    assert!(sheets.gpu("l4").unwrap().basis.is_none());
}

fn shipped_with(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut value: serde_json::Value =
        serde_json::from_str(include_str!("../../data/hardware/datasheets.json")).unwrap();
    edit(&mut value);
    value.to_string()
}

#[track_caller]
fn check_error(text: &str, expected: &str) {
    let err = Datasheets::from_json(text).unwrap_err().to_string();
    assert!(err.contains(expected), "{err:?} lacks {expected:?}");
}

#[test]
fn a_negative_bandwidth_is_refused_naming_its_field() {
    let text = shipped_with(|v| v["gpus"][1]["memory_gb_per_s"] = (-1.0).into());
    check_error(
        &text,
        "gpus[1].memory_gb_per_s: -1 is not a positive finite number",
    );
}

#[test]
fn a_link_kind_listed_twice_is_refused() {
    let text = shipped_with(|v| v["links"][1]["kind"] = "PCIE-GEN4".into());
    check_error(&text, "links[1].kind: kind \"PCIE-GEN4\" is listed twice");
}

#[test]
fn an_efficiency_above_one_is_refused() {
    let text = shipped_with(|v| v["links"][2]["efficiency"] = 1.5.into());
    check_error(&text, "links[2].efficiency: 1.5 is above 1");
}

#[test]
fn a_figure_without_source_is_refused() {
    let text = shipped_with(|v| v["links"][0]["basis"] = " ".into());
    check_error(&text, "links[0].basis: empty");
}

#[test]
fn another_format_or_version_is_refused() {
    check_error(
        &shipped_with(|v| v["format"] = "afd-calibration".into()),
        "format \"afd-calibration\"",
    );
    check_error(
        &shipped_with(|v| v["schema_version"] = 2.into()),
        "schema_version 2, this build reads 1",
    );
}

#[test]
fn an_unknown_key_is_refused_with_its_path() {
    let text = shipped_with(|v| v["gpus"][0]["nvlink"] = true.into());
    check_error(&text, "at gpus[0]");
}
