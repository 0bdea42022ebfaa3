//! Running the `afd-sim` binary from the library's directory (so fixture paths are stable).

use std::process::Command;

/// The `afd-sim` library's directory, where the fixtures and committed data sit.
pub(crate) const SIM_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// What one run of the binary produced.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

pub(crate) fn afd_sim(args: &[&str]) -> Run {
    let output = Command::new(env!("CARGO_BIN_EXE_afd-sim"))
        .args(args)
        .current_dir(SIM_DIR)
        .output()
        .expect("the afd-sim binary runs");
    Run {
        code: output.status.code().expect("afd-sim exits normally"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// stdout parsed as JSON.
pub(crate) fn json(run: &Run) -> serde_json::Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|err| panic!("{err}: {}", run.stdout))
}
