//! The `afd-twin` command line: absurd flags exit 2 naming the flag (never a panic, exit 101), and
//! `--version` names the commit.

use std::process::{Command, Output};

use crate::support::{Role, seed_args};

fn twin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_afd-twin"))
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Issue 18: absurd durations and scales are exit 2 (never a panic, exit 101), and `--version` names
/// the commit.
#[test]
fn absurd_flags_exit_2_without_panicking() {
    let serve = seed_args(Role::Attention, 1, 1);
    for (flag, value, needle) in [
        (
            "--rendezvous-timeout",
            "1e30",
            "--rendezvous-timeout 1e30: expected a positive number of seconds up to 604800",
        ),
        (
            "--time-scale",
            "1e300",
            "--time-scale 1e300: expected a number from 0 to 1000",
        ),
    ] {
        let mut args = vec![flag, value];
        args.extend(serve.iter().map(String::as_str));
        let out = twin(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(needle), "{flag} {value}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = twin(&[
        "bench",
        "--base-url",
        "http://127.0.0.1:1",
        "--timeout",
        "1e30",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--timeout 1e30"), "{stderr}");
    let out = twin(&["--version"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && text.contains("(commit "), "{text}");
}
