//! Repository hygiene that no compiler checks (STYLE.md §3, §8): every Rust file opens with a `//!`
//! comment, no fix-me markers or `dbg!` anywhere, and no `println!` in library code (binaries print; the
//! libraries return values). Binary code is `src/main.rs`, `src/bin/**` and `src/cli/**`. No function
//! of the simulator library outside tests is longer than 100 lines, and the cost model holds no
//! interior mutability.

use std::fs;
use std::path::{Path, PathBuf};

const CRATES: &[&str] = &["traces", "sim", "gpu-probes", "conformance", "benches"];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("benches/ sits in the workspace root")
        .to_path_buf()
}

/// `path` below `root`, with `/` separators.
fn relative_path(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .expect("files are found under the root")
        .to_string_lossy()
        .replace('\\', "/")
}

/// Whether a workspace-relative path is test code (a `tests/` folder or a `tests.rs` module).
fn is_test_code(relative: &str) -> bool {
    relative.contains("/tests/") || relative.ends_with("tests.rs")
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
        let relative = relative_path(&root, path);
        let library = !is_binary_code(Path::new(&relative));
        let test_code = is_test_code(&relative);
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

/// Longest a function of the simulator library may be, in lines from its `fn` line to its closing
/// brace (issue 16, item 5): a longer one is split along its concerns, one concept per function.
const MAX_FN_LINES: usize = 100;

/// Functions of `sim/src` allowed past [`MAX_FN_LINES`], as `path:name`. Nothing else belongs here.
const LONG_FNS_ALLOWED: &[&str] = &[];

/// A function of `text`: its name, the 1-based line of its `fn`, and its length in lines.
#[derive(Debug, PartialEq, Eq)]
struct FnSpan {
    name: String,
    line: usize,
    lines: usize,
}

/// The indentation and name of a line that starts a function item (`pub(crate) const fn x(`…).
fn fn_item(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    let indent = &line[..line.len() - rest.len()];
    let mut rest = rest;
    loop {
        let before = rest;
        if rest.starts_with("pub(") {
            rest = rest[rest.find(')')? + 1..].trim_start();
        }
        for qualifier in ["pub ", "const ", "async ", "unsafe ", "extern \"C\" "] {
            if let Some(after) = rest.strip_prefix(qualifier) {
                rest = after.trim_start();
            }
        }
        if rest == before {
            break;
        }
    }
    let rest = rest.strip_prefix("fn ")?;
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    (end > 0).then(|| (indent, &rest[..end]))
}

/// Where the item starting at `lines[start]` (indented by `indent`) ends: the line that is its
/// indentation followed by `}`, or the line itself for a one-line item; `None` for an item without
/// a body (`fn f();`, `mod m;`).
fn item_end(lines: &[&str], start: usize, indent: &str) -> Option<usize> {
    let first = lines[start].trim_end();
    if first.contains('{') && first.ends_with('}') {
        return Some(start);
    }
    let mut opened = false;
    for (i, line) in lines.iter().enumerate().skip(start) {
        if line.trim_end() == format!("{indent}}}") {
            return Some(i);
        }
        opened |= line.contains('{');
        if !opened && line.trim_end().ends_with(';') {
            return None;
        }
    }
    None
}

/// Every function of a Rust source outside `#[cfg(test)]` items, nested functions included.
fn functions(text: &str) -> Vec<FnSpan> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut test_item = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            test_item = true;
            i += 1;
            continue;
        }
        if test_item && !trimmed.starts_with("#[") && !trimmed.starts_with("//") {
            test_item = false;
            let indent = &line[..line.len() - trimmed.len()];
            i = item_end(&lines, i, indent).unwrap_or(i) + 1;
            continue;
        }
        if let Some((indent, name)) = fn_item(line)
            && let Some(end) = item_end(&lines, i, indent)
        {
            out.push(FnSpan {
                name: name.to_owned(),
                line: i + 1,
                lines: end - i + 1,
            });
        }
        i += 1;
    }
    out
}

#[test]
fn the_function_length_check_measures_bodies_and_skips_tests() {
    let body = |name: &str, n: usize| {
        let mut text = format!("    pub(crate) fn {name}(\n        x: u32,\n    ) -> u32 {{\n");
        for _ in 0..n {
            text.push_str("        let _ = x;\n");
        }
        text.push_str("        x\n    }\n");
        text
    };
    let text = format!(
        "//! m\nimpl A {{\n{}{}    fn declared(&self);\n    fn one() -> u32 {{ 1 }}\n}}\n\n#[cfg(test)]\nmod tests {{\n{}}}\n",
        body("long", 96),
        body("short", 3),
        body("in_test", 200),
    );
    let found = functions(&text);
    let lengths: Vec<(&str, usize)> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
    assert_eq!(lengths, [("long", 101), ("short", 8), ("one", 1)]);
    assert_eq!(found[0].line, 3);
}

/// No function of the simulator library outside tests is longer than [`MAX_FN_LINES`] (issue 16,
/// item 5), but those [`LONG_FNS_ALLOWED`] names, and each of those still is.
#[test]
fn simulator_functions_stay_short() {
    let root = workspace_root();
    let mut problems = Vec::new();
    let mut allowed_found = Vec::new();
    for path in workspace_rust_files(&root) {
        let relative = relative_path(&root, &path);
        let test_code = is_test_code(&relative);
        if !relative.starts_with("sim/src/") || test_code {
            continue;
        }
        let text = fs::read_to_string(&path).expect("Rust sources are UTF-8");
        for function in functions(&text) {
            if function.lines <= MAX_FN_LINES {
                continue;
            }
            let key = format!("{relative}:{}", function.name);
            if LONG_FNS_ALLOWED.contains(&key.as_str()) {
                allowed_found.push(key);
                continue;
            }
            problems.push(format!(
                "{relative}:{}: fn {} is {} lines (at most {MAX_FN_LINES}); split it along its concerns",
                function.line, function.name, function.lines
            ));
        }
    }
    for allowed in LONG_FNS_ALLOWED {
        if !allowed_found.iter().any(|found| found == allowed) {
            problems.push(format!(
                "{allowed} is allowed to be long but is not (or is gone): remove it from LONG_FNS_ALLOWED"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Types that give shared references a way to change what they point at.
const INTERIOR_MUTABILITY: &[&str] = &[
    "Cell<",
    "RefCell<",
    "OnceCell<",
    "UnsafeCell<",
    "Mutex<",
    "RwLock<",
    "OnceLock<",
    "Atomic",
];

/// The cost model is an immutable value (issue 16, item 3): no file of it (`model/cost.rs`,
/// `model/cost/*.rs`, tests aside) holds state behind a shared reference. What a run asked is
/// counted, and prices memoised, in the caller's `PriceBook`, which is changed only through
/// `&mut`. `CostModel: Sync` is also asserted where the type is defined.
#[test]
fn the_cost_model_keeps_no_state() {
    let root = workspace_root();
    let mut files = vec![root.join("sim/src/model/cost.rs")];
    rust_files(&root.join("sim/src/model/cost"), &mut files);
    let mut problems = Vec::new();
    for path in &files {
        let relative = relative_path(&root, path);
        if is_test_code(&relative) {
            continue;
        }
        let text = fs::read_to_string(path).expect("Rust sources are UTF-8");
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            for word in INTERIOR_MUTABILITY.iter().filter(|w| line.contains(*w)) {
                problems.push(format!(
                    "{relative}:{}: {word} in the cost model; count and memoise in the caller's PriceBook",
                    n + 1
                ));
            }
        }
    }
    assert!(files.len() >= 4, "found only {files:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
