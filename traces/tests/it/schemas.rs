//! Every on-disk format this crate reads carries a `schema_version`, and its reader refuses any
//! other (ARCHITECTURE.md's invariant; the calibration profile and the sweep CSV have their own
//! tests beside their code). Each committed file is read as shipped, then with its version bumped.

use std::path::Path;

use afd_traces::hardware::Datasheets;
use afd_traces::input::{InputKind, read_text};
use afd_traces::pipeline::PipelineResults;
use afd_traces::vllm_cli::ServeFlags;
use afd_traces::vllm_run::{VllmEngineProfile, VllmPlan, VllmRun};

fn committed(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
    read_text(&path, InputKind::CALIBRATION).unwrap()
}

/// The text with its first `"schema_version": 1` made 99 (pretty-printed or compact JSON).
fn bumped(text: &str) -> String {
    for from in ["\"schema_version\": 1", "\"schema_version\":1"] {
        if text.contains(from) {
            return text.replacen(from, "\"schema_version\": 99", 1);
        }
    }
    panic!("no schema_version 1 in the committed file");
}

#[track_caller]
fn refused<T, E: std::fmt::Display>(result: Result<T, E>) {
    match result {
        Ok(_) => panic!("schema_version 99 was accepted"),
        Err(err) => assert!(err.to_string().contains("99"), "{err}"),
    }
}

#[test]
fn each_reader_refuses_another_schema_version() {
    let sheets = committed("data/hardware/datasheets.json");
    Datasheets::from_json(&sheets).unwrap();
    refused(Datasheets::from_json(&bumped(&sheets)));

    let pipeline = committed("data/pipeline/h200x2-deepseek-v2-lite.json");
    PipelineResults::from_json(&pipeline).unwrap();
    refused(PipelineResults::from_json(&bumped(&pipeline)));

    let engine = committed("data/engine/h200-dsv2l-vllm-engine.json");
    VllmEngineProfile::from_json(&engine).unwrap();
    refused(VllmEngineProfile::from_json(&bumped(&engine)));

    let run = committed("data/vllm/h200-dsv2l-graph-64-64-r2.json.xz");
    VllmRun::from_json(&run).unwrap();
    refused(VllmRun::from_json(&bumped(&run)));

    let plan = committed("../gpu-probes/plans/engine-dsv2l-graph-64-64.json");
    VllmPlan::from_json(&plan).unwrap();
    refused(VllmPlan::from_json(&bumped(&plan)));

    let flags = committed("data/vllm-cli/serve-flags-0.26.0.json");
    ServeFlags::from_json(&flags).unwrap();
    refused(ServeFlags::from_json(&bumped(&flags)));
}

/// Every committed engine-probe plan reads as a plan (a plan that does not costs a device call),
/// each with its warm-ups and at least one workload.
#[test]
fn every_committed_engine_plan_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../gpu-probes/plans");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("engine-dsv2l-") && name.ends_with(".json")) {
            continue;
        }
        let text = read_text(&path, InputKind::CALIBRATION).unwrap();
        let plan = VllmPlan::from_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!plan.workloads.is_empty(), "{name} has no workload");
        read += 1;
    }
    assert!(read >= 21, "{read} plans read");
}
