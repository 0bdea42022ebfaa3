//! Unit tests of the bounded reads: an endless file is refused after the limit, a small one is read,
//! bad UTF-8 names its line and column.

use std::path::Path;

use super::*;

#[test]
fn dev_zero_is_refused_at_its_first_byte() {
    let err =
        read_text(Path::new("/dev/zero"), InputKind::TRACE).expect_err("/dev/zero has no end");
    assert_eq!(
        err.to_string(),
        "/dev/zero:1: trace is not text (a NUL byte at column 1)"
    );
}

#[test]
fn an_endless_text_stream_is_refused_after_the_limit() {
    // A pipe has no size to check up front: the read stops one byte past the limit.
    let mut child = std::process::Command::new("yes")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("yes runs");
    let stdout = child.stdout.take().expect("piped");
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&stdout));
    let err = read_text(Path::new(&path), InputKind::new("recipe", 4096)).expect_err("endless");
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        err.to_string(),
        format!("recipe {path} exceeds the size limit of 4096 bytes")
    );
}

#[test]
fn a_file_within_the_limit_is_read_and_one_over_is_not() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("r.sh");
    std::fs::write(&path, "a\nb\n").expect("write");
    assert_eq!(
        read_text(&path, InputKind::new("recipe", 4)).expect("fits"),
        "a\nb\n"
    );
    assert!(matches!(
        read_text(&path, InputKind::new("recipe", 3)),
        Err(InputError::TooLarge { limit_bytes: 3, .. })
    ));
}

#[test]
fn invalid_utf8_names_line_and_column() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("m.json");
    std::fs::write(&path, b"{\n  \xff}").expect("write");
    let err = read_text(&path, InputKind::MODEL_CONFIG).expect_err("not UTF-8");
    assert!(
        err.to_string()
            .ends_with("m.json:2: model config is not UTF-8 text (invalid byte at column 3)"),
        "{err}"
    );
}

#[test]
fn limits_are_stated_in_mib() {
    let err = InputError::TooLarge {
        kind: "trace",
        file: "t.csv".to_owned(),
        limit_bytes: InputKind::TRACE.limit_bytes,
    };
    assert_eq!(
        err.to_string(),
        "trace t.csv exceeds the size limit of 2048 MiB"
    );
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("gzip in memory");
    encoder.finish().expect("gzip in memory")
}

fn xz(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 6);
    encoder.write_all(bytes).expect("xz in memory");
    encoder.finish().expect("xz in memory")
}

/// Compresses bytes in memory.
type Encoder = fn(&[u8]) -> Vec<u8>;

/// Each compressed form `read_text` knows: the file name's extension and its encoder.
const COMPRESSED: [(&str, Encoder); 2] = [("gz", gzip), ("xz", xz)];

#[test]
fn a_compressed_file_is_read_as_its_text_and_the_limit_holds_for_the_text() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (extension, compress) in COMPRESSED {
        let path = dir.path().join(format!("run.json.{extension}"));
        std::fs::write(&path, compress(b"{\"a\": 1}\n")).expect("write");
        assert_eq!(
            read_text(&path, InputKind::VLLM_RUN).expect("decompresses"),
            "{\"a\": 1}\n",
            "{extension}"
        );
        // A few hundred bytes that inflate past the limit are refused after the limit, not
        // inflated whole.
        std::fs::write(&path, compress(&vec![b' '; 1 << 20])).expect("write");
        assert!(std::fs::metadata(&path).expect("written").len() < 4096);
        assert!(
            matches!(
                read_text(&path, InputKind::new("vLLM run", 4096)),
                Err(InputError::TooLarge {
                    limit_bytes: 4096,
                    ..
                })
            ),
            "{extension}"
        );
    }
}

#[test]
fn a_file_named_compressed_that_is_not_is_an_error_naming_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for extension in ["gz", "xz"] {
        let path = dir.path().join(format!("run.json.{extension}"));
        std::fs::write(&path, "{}").expect("write");
        let err = read_text(&path, InputKind::VLLM_RUN).expect_err("not compressed");
        assert!(
            err.to_string().contains(&format!("run.json.{extension}")),
            "{err}"
        );
    }
    // A gzip stream named `.xz` is read as xz, and refused.
    let path = dir.path().join("run.json.xz");
    std::fs::write(&path, gzip(b"{}")).expect("write");
    assert!(read_text(&path, InputKind::VLLM_RUN).is_err());
}
