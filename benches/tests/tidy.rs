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

/// Every Rust file of the workspace's crates, in path order.
fn workspace_rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for krate in CRATES {
        rust_files(&root.join(krate), &mut files);
    }
    files
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
    let files = workspace_rust_files(&root);
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

/// Candidate paths a backticked word of ARCHITECTURE.md names: the word under its section's crate
/// directory, under that crate's `src/`, and under the workspace root; `{a,b}` expands.
fn expand(word: &str) -> Vec<String> {
    match (word.find('{'), word.find('}')) {
        (Some(open), Some(close)) if open < close => word[open + 1..close]
            .split(',')
            .flat_map(|part| expand(&format!("{}{part}{}", &word[..open], &word[close + 1..])))
            .collect(),
        _ => vec![word.to_owned()],
    }
}

/// A backticked word that names a file or folder of the repository (not a type, flag or command).
fn names_a_path(word: &str) -> bool {
    const EXTENSIONS: &[&str] = &[
        ".rs", ".sh", ".py", ".json", ".md", ".toml", ".prom", ".txt",
    ];
    !word.contains(' ')
        && !word.contains('*')
        && !word.contains("::")
        && !word.starts_with('-')
        && !word.starts_with("../")
        && (EXTENSIONS.iter().any(|e| word.ends_with(e)) || word.ends_with('/'))
}

/// Every file and folder under `dir` (no build outputs, VCS or device folders), as paths relative
/// to the workspace root with `/` separators; folders end with `/`.
fn all_paths(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name == "target" || name.starts_with('.') {
            continue;
        }
        let relative = path
            .strip_prefix(root)
            .expect("under the root")
            .to_string_lossy()
            .replace('\\', "/");
        if path.is_dir() {
            out.push(format!("{relative}/"));
            all_paths(root, &path, out);
        } else {
            out.push(relative);
        }
    }
}

/// Every file and folder ARCHITECTURE.md's codemap names exists (rust-analyzer's rule: the codemap
/// holds facts that rarely change, and a stale one is a bug). A word is found under its section's
/// crate, under that crate's `src/`, under the root, or, for a name given relative to the module
/// its bullet describes (`arch.rs` under `model.rs`), as the end of some path in the section's crate.
#[test]
fn architecture_names_only_files_that_exist() {
    let root = workspace_root();
    let mut every = Vec::new();
    all_paths(&root, &root, &mut every);
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let mut krate = root.clone();
    let mut missing = Vec::new();
    let mut checked = 0;
    for (n, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("### `") {
            let dir = rest.split('`').next().unwrap_or("");
            krate = root.join(dir);
            continue;
        }
        for (i, word) in line.split('`').enumerate() {
            if i % 2 == 0 || !names_a_path(word) {
                continue;
            }
            for path in expand(word) {
                checked += 1;
                let prefix = krate
                    .strip_prefix(&root)
                    .map(|p| p.to_string_lossy().replace('\\', "/"))
                    .unwrap_or_default();
                let found = [
                    krate.join(&path),
                    krate.join("src").join(&path),
                    root.join(&path),
                ]
                .iter()
                .any(|p| p.exists())
                    || every.iter().any(|p| {
                        p.starts_with(prefix.as_str()) && p.ends_with(&format!("/{path}"))
                    });
                if !found {
                    missing.push(format!("ARCHITECTURE.md:{}: `{path}`", n + 1));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} paths found in ARCHITECTURE.md"
    );
    assert!(
        missing.is_empty(),
        "paths that do not exist:\n{}",
        missing.join("\n")
    );
}

/// Every `Type::item` path ARCHITECTURE.md names still exists: its last segment is an identifier
/// of some Rust file.
#[test]
fn architecture_names_only_items_that_exist() {
    let root = workspace_root();
    let text = fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let files = workspace_rust_files(&root);
    let sources: String = files
        .iter()
        .map(|p| fs::read_to_string(p).expect("Rust sources are UTF-8"))
        .collect();
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let defined = |name: &str| {
        sources.match_indices(name).any(|(at, _)| {
            let before = sources[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !is_ident(c));
            let after = sources[at + name.len()..]
                .chars()
                .next()
                .is_none_or(|c| !is_ident(c));
            before && after
        })
    };
    let mut missing = Vec::new();
    for (i, word) in text.split('`').enumerate() {
        let path_like = word.contains("::")
            && word
                .split("::")
                .all(|s| !s.is_empty() && s.chars().all(is_ident));
        if i % 2 == 1 && path_like {
            let last = word.rsplit("::").next().expect("a segment");
            if !defined(last) {
                missing.push(word.to_owned());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "items ARCHITECTURE.md names that no code defines: {missing:?}"
    );
}

/// The simulator library stays pure (ARCHITECTURE.md): no wall clock, environment, file system or
/// OS randomness in `sim/src`, and no serde derive in library code outside `traces/`.
#[test]
fn the_libraries_keep_their_purity_rules() {
    let root = workspace_root();
    let files = workspace_rust_files(&root);
    let impure = [
        "std::time::Instant",
        "SystemTime",
        "std::env",
        "std::fs",
        "OsRng",
        "thread_rng",
        "from_entropy",
    ];
    let mut problems = Vec::new();
    for path in &files {
        let relative = path
            .strip_prefix(&root)
            .expect("files are found under the root")
            .to_string_lossy()
            .replace('\\', "/");
        let library = !is_binary_code(Path::new(&relative));
        let test_code = relative.contains("/tests/") || relative.ends_with("tests.rs");
        let text = fs::read_to_string(path).expect("Rust sources are UTF-8");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            if relative.starts_with("sim/src/") && !test_code {
                for word in impure.iter().filter(|w| line.contains(*w)) {
                    problems.push(format!(
                        "{relative}:{}: {word} in the simulator library",
                        n + 1
                    ));
                }
            }
            let derives_serde = line.contains("derive(")
                && (line.contains("Serialize") || line.contains("Deserialize"));
            if derives_serde && library && !test_code && !relative.starts_with("traces/") {
                problems.push(format!(
                    "{relative}:{}: a serde derive outside afd-traces",
                    n + 1
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
