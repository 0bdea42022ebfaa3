//! The `afd-twin` binary the suite's end-to-end tests start. afd-conformance never links the twin, not
//! even as a dev-dependency (which would not build its binary anyway), so the tests ask the cargo that
//! built them to build package `afd-twin` into the same target directory and profile, once per test
//! process: a no-op when it is fresh, and never a stale binary. `AFD_TWIN_BIN` names a prebuilt one
//! instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The path of a fresh `afd-twin` binary.
pub(crate) fn twin_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(build).clone()
}

fn build() -> PathBuf {
    if let Some(path) = std::env::var_os("AFD_TWIN_BIN") {
        return PathBuf::from(path);
    }
    // The test binary is `<target dir>[/<triple>]/<profile dir>/deps/it-<hash>`.
    let exe = std::env::current_exe().expect("the test binary has a path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lies in <profile dir>/deps");
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a profile directory name");
    let mut target_dir = profile_dir.parent().expect("a target directory");
    let mut command = Command::new(env!("CARGO"));
    command
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["build", "--quiet", "-p", "afd-twin", "--bin", "afd-twin"]);
    // Cargo marks its target directory; a directory without the mark is a `--target <triple>` one.
    if !target_dir.join("CACHEDIR.TAG").exists()
        && let (Some(triple), Some(parent)) = (
            target_dir.file_name().and_then(|n| n.to_str()),
            target_dir.parent(),
        )
    {
        command.args(["--target", triple]);
        target_dir = parent;
    }
    command.arg("--target-dir").arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            command.arg("--release");
        }
        other => {
            command.args(["--profile", other]);
        }
    }
    let output = command.output().expect("cargo runs");
    assert!(
        output.status.success(),
        "cargo build -p afd-twin failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bin = profile_dir.join(format!("afd-twin{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.is_file(), "cargo built no {}", bin.display());
    bin
}
