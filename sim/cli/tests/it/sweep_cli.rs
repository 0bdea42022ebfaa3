//! `afd-sim sweep` and `sweep-merge` through the binary: outputs, shards that merge byte for byte,
//! rows that `predict` reproduces from their command lines, and bad input that exits 2 naming the
//! flag or file without writing anything.

use std::path::Path;

use crate::support::{afd_sim, json};

const SMALL: &[&str] = &[
    "--gpus",
    "3",
    "--gpus-per-node",
    "4",
    "--dimensions",
    "dbo=off,2;capture=eager,auto;max-num-seqs=16;max-num-batched-tokens=64",
    "--num-prompts",
    "8",
    "--input-len",
    "64",
    "--output-len",
    "4",
    "--request-rate",
    "50",
    "--tpot-slo",
    "9",
    "--slo-stat",
    "mean",
];

fn sweep(extra: &[&str]) -> crate::support::Run {
    let mut args = vec!["sweep"];
    args.extend_from_slice(SMALL);
    args.extend_from_slice(extra);
    afd_sim(&args)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("temporary paths are UTF-8")
}

#[test]
fn a_sweep_writes_rows_a_figure_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("results.csv");
    let svg = dir.path().join("frontier.svg");
    let run = sweep(&["--out", path(&csv), "--svg", path(&svg), "--threads", "2"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    for needle in [
        "Candidates: ",
        "Top ",
        "Pareto frontier, output tokens/s per GPU vs mean TPOT:",
        "Pareto frontier, output tokens/s per GPU vs mean TTFT:",
        "colocated",
    ] {
        assert!(run.stdout.contains(needle), "{needle:?} in {}", run.stdout);
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows = afd_traces::sweep::read_sweep_csv(&text, "results.csv").unwrap();
    assert_eq!(rows.len() as u64, rows[0].candidates);
    let figure = std::fs::read_to_string(&svg).unwrap();
    for needle in [
        "<svg",
        "output tokens/s per GPU",
        "mean TPOT (ms",
        "mean TTFT (ms",
        "Pareto frontier",
        "best",
    ] {
        assert!(figure.contains(needle), "{needle:?} missing from the SVG");
    }
    let summary = json(&sweep(&["--out", path(&csv), "--json"]));
    assert_eq!(summary["format"], "afd-sim-sweep");
    assert_eq!(summary["rows"], rows.len());
    assert!(
        summary["frontier_tpot"]
            .as_array()
            .is_some_and(|f| !f.is_empty())
    );
    // The same inputs give the same bytes (here on one thread).
    let again = dir.path().join("again.csv");
    assert_eq!(sweep(&["--out", path(&again), "--threads", "1"]).code, 0);
    assert_eq!(std::fs::read(&again).unwrap(), text.as_bytes());

    // Every simulated row's command lines, fed back to `predict` (a baseline row's one command
    // through --serve-args), give the same run: the same event log and the same figures. Both
    // price as real vLLM runs the deployment, a plain server past its first fused-MoE compiles.
    let mut checked = 0;
    for row in rows.iter().filter(|r| r.event_log_hash.is_some()) {
        let mut args = vec!["predict", "--json", "--warm-kernels"];
        if row.ffn_args.is_empty() {
            args.extend(["--serve-args", &row.attention_args]);
        } else {
            args.extend([
                "--attention-args",
                &row.attention_args,
                "--ffn-args",
                &row.ffn_args,
            ]);
        }
        args.extend([
            "--num-prompts",
            "8",
            "--input-len",
            "64",
            "--output-len",
            "4",
            "--request-rate",
            "50",
        ]);
        let run = afd_sim(&args);
        assert_eq!(run.code, 0, "{}: {}", row.attention_args, run.stderr);
        let report = json(&run);
        assert_eq!(
            report["event_log_hash"].as_str(),
            row.event_log_hash.as_deref(),
            "{} {}",
            row.kind,
            row.attention_args
        );
        // serde_json reads a float to within one ulp (no `float_roundtrip`), the CSV exactly.
        let same = |json: Option<f64>, csv: Option<f64>| match (json, csv) {
            (Some(a), Some(b)) => (a - b).abs() <= 1e-12 * b.abs(),
            (a, b) => a == b,
        };
        assert!(
            same(report["output_throughput"].as_f64(), row.output_throughput),
            "{report} {row:?}"
        );
        assert!(
            same(report["mean_tpot_ms"].as_f64(), row.mean_tpot_ms),
            "{report} {row:?}"
        );
        assert_eq!(
            report["deployment"]["dbo"],
            row.dbo_decode_token_threshold.is_some()
        );
        checked += 1;
    }
    assert!(checked >= 2, "only {checked} rows checked");
    assert!(
        rows.iter()
            .any(|r| r.kind == "colocated" && r.event_log_hash.is_some())
    );
}

#[test]
fn shards_merge_into_the_single_run_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("single.csv");
    assert_eq!(sweep(&["--out", path(&single)]).code, 0);
    let mut shards = Vec::new();
    for k in 1..=3 {
        let out = dir.path().join(format!("shard-{k}.csv"));
        let run = sweep(&["--shard", &format!("{k}/3"), "--out", path(&out)]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        shards.push(out);
    }
    let merged = dir.path().join("merged.csv");
    let svg = dir.path().join("merged.svg");
    let mut args = vec!["sweep-merge"];
    args.extend(shards.iter().map(|p| path(p)));
    args.extend(["--out", path(&merged), "--svg", path(&svg)]);
    let run = afd_sim(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        std::fs::read(&merged).unwrap(),
        std::fs::read(&single).unwrap()
    );
    // Two of three shards: refused, naming what is missing, and nothing written.
    let partial = dir.path().join("partial.csv");
    let run = afd_sim(&[
        "sweep-merge",
        path(&shards[0]),
        path(&shards[1]),
        "--out",
        path(&partial),
    ]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("missing 2, 5"), "{}", run.stderr);
    assert!(!partial.exists());
    // A mangled shard names its file and line.
    let text = std::fs::read_to_string(&shards[0]).unwrap();
    let bad = dir.path().join("bad.csv");
    let version = format!("\n{},", afd_traces::sweep::SWEEP_SCHEMA_VERSION);
    std::fs::write(&bad, text.replacen(&version, "\nx,", 1)).unwrap();
    let run = afd_sim(&["sweep-merge", path(&bad), "--out", path(&partial)]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr
            .contains("bad.csv: line 2, column 1 (schema_version)"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"));
}

#[test]
fn bad_sweep_flags_exit_2_naming_the_flag_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("never.csv");
    let out = path(&out);
    let cases: &[(&[&str], &str)] = &[
        (&["--gpus", "1", "--out", out], "--gpus"),
        (
            &["--gpus", "8", "--min-gpus", "9", "--out", out],
            "--min-gpus",
        ),
        (
            &["--gpus", "8", "--gpus-per-node", "0", "--out", out],
            "--gpus-per-node",
        ),
        (
            &["--gpus", "8", "--dimensions", "tp=2", "--out", out],
            "unknown dimension \"tp\"",
        ),
        (
            &["--gpus", "8", "--dimensions", "dbo=maybe", "--out", out],
            "--dimensions",
        ),
        (&["--gpus", "8", "--shard", "0/2", "--out", out], "--shard"),
        (
            &["--gpus", "8", "--slo-stat", "p50", "--out", out],
            "--slo-stat",
        ),
        (
            &["--gpus", "8", "--tpot-slo=-1", "--out", out],
            "--tpot-slo",
        ),
        (
            &["--gpus", "8", "--threads", "0", "--out", out],
            "--threads",
        ),
        (
            &["--gpus", "8", "--model", "gpt-9", "--out", out],
            "--model",
        ),
        (
            &["--gpus", "8", "--request-rate", "fast", "--out", out],
            "--request-rate",
        ),
        (
            &["--gpus", "8", "--capacity-by", "rate", "--out", out],
            "give --tpot-slo and/or --ttft-slo",
        ),
        (
            &[
                "--gpus",
                "8",
                "--tpot-slo",
                "50",
                "--capacity-by",
                "qps",
                "--out",
                out,
            ],
            "--capacity-by must be rate or concurrency",
        ),
        (
            &[
                "--gpus",
                "8",
                "--tpot-slo",
                "50",
                "--capacity-by",
                "rate",
                "--request-rate",
                "5",
                "--out",
                out,
            ],
            "--request-rate 5: --capacity-by rate searches that load itself",
        ),
        (
            &[
                "--gpus",
                "8",
                "--dimensions",
                "split=1:7;baseline=off",
                "--out",
                out,
            ],
            "no legal candidate",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["sweep"];
        full.extend_from_slice(args);
        let run = afd_sim(&full);
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(needle), "{args:?}: {}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
        assert!(!Path::new(out).exists(), "{args:?} wrote {out}");
    }
}

#[test]
fn reused_runs_are_counted_and_change_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let limits = [
        "--dimensions",
        "max-num-seqs=8,16;max-num-batched-tokens=64,512",
    ];
    let reused = dir.path().join("reused.csv");
    let mut args = limits.to_vec();
    args.extend(["--out", path(&reused), "--json"]);
    let summary = json(&sweep(&args));
    let every = dir.path().join("every.csv");
    let mut args = limits.to_vec();
    args.extend(["--out", path(&every), "--json", "--no-reuse"]);
    let plain = json(&sweep(&args));
    assert_eq!(
        std::fs::read(&reused).unwrap(),
        std::fs::read(&every).unwrap()
    );
    let rows = summary["rows"].as_u64().unwrap();
    let (simulated, count) = (&summary["runs"]["simulated"], &summary["runs"]["reused"]);
    assert!(count.as_u64().unwrap() > 0, "{}", summary["runs"]);
    assert_eq!(simulated.as_u64().unwrap() + count.as_u64().unwrap(), rows);
    assert_eq!(plain["runs"]["simulated"].as_u64(), Some(rows));
    assert_eq!(plain["runs"]["reused"].as_u64(), Some(0));
    // The table says it too, and a dry run counts the groups.
    let mut args = limits.to_vec();
    args.extend(["--out", path(&reused)]);
    let run = sweep(&args);
    assert!(
        run.stdout.contains(&format!(
            "Runs: {simulated} simulated, {count} reused an identical run"
        )),
        "{}",
        run.stdout
    );
    let mut args = limits.to_vec();
    args.push("--dry-run");
    let run = sweep(&args);
    assert!(
        run.stdout
            .contains("groups equal but for their scheduler limits"),
        "{}",
        run.stdout
    );
}

/// NICs per host price hand-offs over a network: without `--link` the dimension is refused, with
/// it each cross-node AFD candidate runs once per count and the CSV says which.
#[test]
fn the_nics_dimension_needs_a_link_and_fills_the_nics_column() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nics.csv");
    let dims = "split=2:2;attention-tp=1;ffn-tp=1;dbo=off;capture=auto;max-num-seqs=16;max-num-batched-tokens=64;baseline=off;nics=1,4";
    let common = [
        "sweep",
        "--gpus",
        "4",
        "--gpus-per-node",
        "2",
        "--num-prompts",
        "16",
        "--dimensions",
        dims,
        "--out",
        out.to_str().unwrap(),
    ];
    let refused = afd_sim(&common);
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("--link"), "{}", refused.stderr);
    assert!(!out.exists());
    let mut args = common.to_vec();
    args.extend(["--link", "attention-ffn=tcp"]);
    let run = afd_sim(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let rows =
        afd_traces::sweep::read_sweep_csv(&std::fs::read_to_string(&out).unwrap(), "nics.csv")
            .unwrap();
    let nics: Vec<Option<u32>> = rows.iter().map(|r| r.nics).collect();
    assert_eq!(nics, [Some(1), Some(4)]);
    assert!(rows.iter().all(|r| r.cross_node));
}

#[test]
fn an_objective_without_a_load_searches_each_candidates_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("capacity.csv");
    let mut args: Vec<&str> = vec!["sweep"];
    // SMALL without its --request-rate: an objective and no load is a capacity sweep by rate.
    let rate = SMALL.iter().position(|w| *w == "--request-rate").unwrap();
    args.extend(
        SMALL
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != rate && i != rate + 1)
            .map(|(_, w)| *w),
    );
    args.extend(["--out", path(&csv), "--json"]);
    let run = afd_sim(&args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let text = std::fs::read_to_string(&csv).unwrap();
    let rows = afd_traces::sweep::read_sweep_csv(&text, "capacity.csv").unwrap();
    assert!(
        rows.iter()
            .all(|r| r.capacity_by == "rate" && r.capacity_probes.is_some())
    );
    // Every candidate with a positive capacity passes at it, and its goodput is the capacity in
    // steady state: that rate, with its run's output tokens per request.
    for r in rows.iter().filter(|r| r.capacity.is_some_and(|c| c > 0.0)) {
        assert_eq!(r.slo, "pass");
        let capacity = r.capacity.unwrap();
        assert_eq!(r.goodput_requests_per_s, Some(capacity));
        let per_request = r.output_tokens_per_s_per_gpu.unwrap() / r.request_throughput.unwrap();
        let tokens = r.goodput_tokens_per_s_per_gpu.unwrap();
        assert!(
            (tokens - capacity * per_request).abs() <= 1e-9 * tokens.max(1.0),
            "{tokens} vs {capacity} x {per_request}"
        );
    }
    assert!(rows.iter().any(|r| r.rank == Some(1)));
    let summary = json(&run);
    assert!(summary["passing"].as_u64().unwrap() > 0);
}
