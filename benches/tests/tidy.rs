//! Repository hygiene that no compiler checks (STYLE.md §3, §8): every Rust file opens with a `//!`
//! comment, no fix-me markers or `dbg!` anywhere, and no `println!` in library code (binaries print; the
//! libraries return values). Binary code is `src/main.rs`, `src/bin/**` and `src/cli/**`.

use std::fs;
use std::path::{Path, PathBuf};

const CRATES: &[&str] = &["traces", "sim", "gpu-probes", "conformance", "benches"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ sits in the workspace root")
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && name != "fixtures" && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn is_binary_code(relative: &Path) -> bool {
    let text = relative.to_string_lossy().replace('\\', "/");
    text.ends_with("src/main.rs")
        || text.contains("/src/bin/")
        || text.contains("/src/cli/")
        || text.contains("/src/cli.rs")
        || !text.contains("/src/")
}

#[test]
fn every_rust_file_is_tidy() {
    let root = workspace_root();
    let mut files = Vec::new();
    for krate in CRATES {
        rust_files(&root.join(krate), &mut files);
    }
    assert!(
        files.len() >= 5,
        "found only {} Rust files under {root:?}",
        files.len()
    );
    let mut problems = Vec::new();
    for path in &files {
        let relative = path
            .strip_prefix(&root)
            .expect("files are found under the root");
        let text = fs::read_to_string(path).expect("Rust sources are UTF-8");
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if !first.starts_with("//!") {
            problems.push(format!(
                "{}: does not open with a `//!` module comment",
                relative.display()
            ));
        }
        let fixme = ["FIX", "ME"].concat();
        let dbg = ["dbg", "!("].concat();
        let println = ["println", "!("].concat();
        for (n, line) in text.lines().enumerate() {
            let at = || format!("{}:{}", relative.display(), n + 1);
            if line.contains(&fixme) {
                problems.push(format!(
                    "{}: {fixme} blocks a merge; use TODO(#issue)",
                    at()
                ));
            }
            if line.contains(&dbg) {
                problems.push(format!("{}: leftover {dbg}", at()));
            }
            if line.contains(&println)
                && !is_binary_code(relative)
                && !line.trim_start().starts_with("//")
            {
                problems.push(format!(
                    "{}: {println} in library code; return the text instead",
                    at()
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "tidy problems:\n{}",
        problems.join("\n")
    );
}
