//! Build script: records the git commit the binary is built from as `AFD_GIT_COMMIT`, for
//! `--version`; `unknown` when there is no git or no checkout (a source tarball).
//!
//! It reads nothing else and generates no code.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    if !output.status.success() {
        return None;
    }
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    // A commit or checkout moves HEAD's log; rebuild then so the version stays true.
    for name in ["HEAD", "logs/HEAD"] {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-env=AFD_GIT_COMMIT={commit}");
}
