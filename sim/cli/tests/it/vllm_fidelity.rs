//! Issue "Real vLLM as the ground truth": the committed real vLLM 0.26.0 runs on 1 × H200, replayed
//! with the built-in engine profile, and the engine profile derived again from the committed runs.
//!
//! The issue's bars (median |error| ≤ 10 %, worst ≤ 25 %, graph/eager TPOT ratio within 10 %) are
//! not met yet (docs/fidelity.md, "Real vLLM"); these tests hold the figures the model reaches now
//! so that a change cannot make them worse unnoticed, and check the command's refusals.

use std::path::PathBuf;
use std::process::Command;

fn data(path: &str) -> PathBuf {
    PathBuf::from(crate::support::SIM_DIR)
        .join("../traces/data")
        .join(path)
}

fn afd_sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_afd-sim"))
        .args(args)
        .output()
        .expect("afd-sim runs")
}

/// The committed files of `folder` (under traces/data) whose names `keep` takes, as paths in name
/// order (as the shell's glob gives them).
fn committed(folder: &str, keep: impl Fn(&str) -> bool) -> Vec<String> {
    let mut paths: Vec<String> = std::fs::read_dir(data(folder))
        .expect("a committed folder")
        .filter_map(|e| {
            let path = e.ok()?.path();
            let name = path.file_name()?.to_str()?;
            keep(name).then(|| path.to_str().map(str::to_owned))?
        })
        .collect();
    paths.sort();
    paths
}

/// `afd-sim engine-profile` of `runs` as the built-in profiles are derived: beside the profiled
/// servers' module summaries (the AFD roles' division, in name order), written to `out`.
fn engine_profile_as_shipped(runs: &[String], out: &std::path::Path) -> std::process::Output {
    let modules = committed("vllm/modules", |name| {
        name.contains(".modules-") && name.ends_with(".json")
    });
    assert_eq!(modules.len(), 10, "{modules:?}");
    let mut args: Vec<&str> = vec!["engine-profile"];
    args.extend(runs.iter().map(String::as_str));
    args.push("--modules");
    args.extend(modules.iter().map(String::as_str));
    args.extend(["--out", out.to_str().expect("a UTF-8 path")]);
    afd_sim(&args)
}

/// Every committed run file under `traces/data/{folder}` (there must be `files`), in name order as
/// the shell's glob gives them, derived as the built-in profiles are: it must succeed and write
/// byte for byte `traces/data/engine/{gpu}-dsv2l-vllm-engine.json`. Returns what `engine-profile`
/// said on stderr and the profile's text.
fn rederive_shipped_profile(folder: &str, gpu: &str, files: usize) -> (String, String) {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out_path = dir.path().join("engine.json");
    let runs = committed(folder, |name| name.ends_with(".json.xz"));
    assert_eq!(runs.len(), files, "{runs:?}");
    let out = engine_profile_as_shipped(&runs, &out_path);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{said}");
    let derived = std::fs::read_to_string(&out_path).expect("the profile was written");
    let shipped = std::fs::read_to_string(data(&format!("engine/{gpu}-dsv2l-vllm-engine.json")))
        .expect("the shipped profile");
    assert_eq!(
        derived, shipped,
        "run `afd-sim engine-profile traces/data/{folder}/{gpu}-dsv2l-*.json.xz --modules traces/data/vllm/modules/*.modules-*.json --out traces/data/engine/{gpu}-dsv2l-vllm-engine.json`"
    );
    (said, derived)
}

/// A plain result of the ramp test's shape sent all at once, written into `dir`.
fn plain_inf(dir: &tempfile::TempDir) -> String {
    let path = dir.path().join("inf.json");
    std::fs::write(&path, r#"{"completed": 8, "total_input_tokens": 1024, "total_output_tokens": 64, "request_rate": "inf", "mean_ttft_ms": 50.0}"#).expect("the temporary folder takes a file");
    path.to_string_lossy().into_owned()
}

/// `afd-sim` with `args` must exit 2 with an error that names `what`.
fn refused(args: &[&str], what: &str) {
    let out = afd_sim(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(stderr.contains(what), "{args:?} names no {what}: {stderr}");
}

/// `afd-sim` with `args` then `extra`, which must succeed and print JSON: that JSON and its stderr.
fn afd_sim_json(args: &[&str], extra: &[&str]) -> (serde_json::Value, String) {
    let all: Vec<&str> = args.iter().chain(extra).copied().collect();
    let out = afd_sim(&all);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let json = serde_json::from_slice(&out.stdout).expect("afd-sim printed JSON");
    (json, stderr)
}

#[test]
fn the_committed_vllm_runs_are_predicted_no_worse_than_recorded() {
    let dir = data("vllm");
    let out = afd_sim(&["replay-vllm", dir.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let records = value["records"].as_array().unwrap();
    assert_eq!(
        records.len(),
        96,
        "every judged bench record of the committed runs"
    );
    let median = value["median_abs_error"].as_f64().unwrap();
    let worst = value["worst_abs_error"].as_f64().unwrap();
    // Recorded at this commit, each arrival-bound run simulated once at the send times its bench
    // client drew (numpy's generator from the run's recorded --seed; docs/fidelity.md, "The bench's
    // own send times"): median 9.83 %, worst 68.1 % (the first graph 256/2048 server's e2e-pre-r4
    // mean TPOT); 255 of 288 values within 25 %; 15 of 49 ratios within 10 %.
    // The thirty-third batch (cal39 x2: eager steps of 3,072-8,000 tokens beside 1-64 decodes and
    // the eager decode bursts; cal13 x2: eager 64/64 injections; calibration only, rules unchanged)
    // moved them from 10.02 %, 72.9 % (the fast eager 256/8192 repeat's e2e-dec-r8 mean TTFT),
    // 254 and 14 (the model on repeats 12.2 -> 11.5 %).
    // The bench client's connections (a burst's requests after the first reach the server once
    // the client has opened a connection for each, 0.73 ms a connection from the calibration
    // bursts' stamped steps; calibration_loso.py median 16.6 -> 14.2 %, mean 27.1 -> 26.2 %, 105
    // -> 111 of 147 within 25 %) moved them from 11.34 %, 74.4 % (graph 256/8192 e2e-pre-sat
    // output throughput on the first server) and 248 (the model on repeats 12.8 -> 12.2 %).
    // The decode table counting every server once, as the step tables do (calibration_loso.py
    // with the twenty-ninth batch: median 17.3 -> 16.6 %, mean 28.3 -> 27.1 %, 100 -> 105 of 147
    // within 25 %), moved them from 11.74 %, 244 and 12 (the model on repeats 14.1 -> 12.8 %).
    // The batch's eager calibration server (cal33, a fast loan: decode steps of 41-48 ms where the
    // earlier eager calibration servers' bench runs stepped at 61-87) had moved the median from
    // 10.44 % (eager TPOT +7.9 -> -6.2 % signed at the median with both, TTFT -1.5 -> -13.6 %).
    // Each request's prefix-cache hit laid out as the random dataset shares prompts across runs of
    // one seed (request i's first min(L, L_earlier) tokens; the logs' uncomputed totals agree on
    // every such run) instead of as full hits in request order moved them from 10.28 %, 85.9 %, 247:
    // the first graph 256/8192 server's e2e-pre-r4 TTFT +85.9 -> -12.3 % (its simulated fully
    // cached prompts made 17-token steps that met a new kernel specialization). cal32's warm-up
    // first uses moved jit_compile_ns 863 -> 855 ms and the worst value from 87.1 %; the derivation's
    // graph modes resolved as the simulator's (FULL_DECODE_ONLY captured up to max-num-seqs) took it
    // back to 863 ms.
    // The twenty-seventh batch's 12 runs (graph and eager at 128/4096, limits and workloads no
    // earlier run used, after the warm-up `afd-sim warm-up` lists) were predicted before they ran
    // (traces/data/vllm/blind/): median 10.6 %, worst 57.2 % (graph e2e-pre-sat throughput), 29 of
    // 36 values within 25 %; their servers logged no fused_moe_kernel compile in a bench run. Before
    // them the 84 earlier runs gave 10.21 %, 87.1 %, 218 of 252 and 10 of 43 ratios.
    // The twenty-sixth batch (cal29, cal31 on an H100: the judged order, every JIT compile logged)
    // found the stalls behind the worst values: a step that first needs a fused_moe_kernel
    // specialization waits for Triton to compile two kernels. Pricing it (jit_compile_ns, 863 ms,
    // from the stamped calibration servers' warm-ups and fixed shapes; each record starting with
    // what its server ran before it) moved them from 10.46 %, 89.2 %, 215 and 9 (the repeat's
    // e2e-pre-r4 TPOT -66.9 -> +0.2 %, graph 64/64 w3 e2e-dec-r2 -40.7 -> -23.3 %).
    // The twenty-fifth batch (cal27, cal28 and their repeats, calibration only: small prefills
    // beside 1-64 decodes and 64-token chunks beside 1-56, flat in the decodes, on fast hosts)
    // moved them from 10.56 %, 88.9 %, 212 and 11 (the model on repeats 14.0 -> 12.7 %): the
    // servers' median slope took the decode term from 0.100 ms to none, FULL_DECODE_ONLY's
    // pure-prefill ratio went 0.918 -> 1.004 and its 64-token entry 71.0 -> 65.5 ms.
    // The twenty-fourth batch (cal26, calibration only: 1,024- and 256-token prompts beside 1-64
    // decodes, flat in the decodes at 86-101 and 76-88 ms on a slow host) moved them from 9.90 %,
    // 90.6 %, 210 and 9 (the model on repeats 15.7 -> 14.0 %): its slope (-0.036 ms a decode) took
    // the decode term, the median of ten servers' slopes, from 0.232 to 0.100 ms, and its steps
    // the table's 1,032- and 2,048-token entries from 74.2 and 75.6 to 82.0 and 87.3 ms.
    // The decode term beside a prefill as the plain median of the servers' own slopes (chosen by
    // calibration_loso.py: median 11.3 % either way, mean 19.5 -> 16.7 %, 100 -> 103 of 135) moved
    // them from 10.66 %, 88.5 %, 207 and 9 (the model on repeats 13.9 -> 15.7 %): FULL_DECODE_ONLY's
    // term 0 -> 0.232 ms a decode, its table 71.8-96.3 -> 68.8-92.3 ms.
    // The twenty-third batch (cal21-cal24, calibration only) had moved them from 10.04 %, 89.5 %,
    // 208 and 8: cal22's 2,048-token steps beside 64 and 128 decodes (35 pairs 64 apart, the widest
    // of any server) put the decode term, weighted by each server's widest pair, at zero (was
    // 0.288 ms), so judged graph 256/2048 dec-sat, whose mixed steps hold 127 decodes, was priced
    // faster (+0.8 -> +15.0 %; the same shape on cal22's fresh server ran 11,152 tok/s, the judged
    // servers 8,907 and 9,090); the model on repeats went from 14.3 to 13.9 %.
    // The decode term beside a prefill taken with every server once (each server's own slope,
    // weighted by its widest pair; calibration_loso.py 11.3 -> 10.6 %) moved the median from
    // 11.13 % and the ratios from 11 (graph 256/2048 dec-sat +20-23 % -> within 1.2 %); the
    // pure-prefill ratio taken the same way (0.850 -> 0.943; 10.6 -> 10.2 %) moved it from 10.03 %.
    // Every server counting once in a table entry and the front end's terms (the median over
    // servers of each one's median, chosen by calibration_loso.py: 12.2 -> 11.3 %) moved the
    // median from 10.88 % and the ratios from 7 (the model on repeats 15.5 -> 14.1 %).
    // The twenty-second batch (cal20: cal19's steps beside proc-sampler.py's readings of the engine
    // core's thread) took the 64-token entry on to 73.5 ms and the median from 10.84 %.
    // The twenty-first batch (cal19: the same steps for minutes beside a CPU-speed sampler) took
    // the 64-token entry on to 72.8 ms and the median from 10.69 % (207 of 252).
    // The twentieth batch (cal18 on two servers: FULL_DECODE_ONLY's 64-token steps without graphs,
    // lone and beside 2 and 8 decodes, 52-130 ms seconds apart) moved the table's 64-token entry
    // from 60.1 to 70.4 ms and with it the median from 9.71 % (210 of 252, 8 ratios): the earlier
    // 64/64 servers' saturated runs are now priced dear, the w3 server's low-load runs nearer.
    // The nineteenth batch's 8 runs (graph and eager 64/64, workloads no earlier run used) were
    // predicted before they ran (traces/data/vllm/blind/): median 11.3 %, worst 47.3 %, 18 of 24
    // values within 25 %; without them the 76 earlier runs give 9.33 %, 192 of 228, 8 of 39.
    // The eighteenth batch (cal17, FULL_DECODE_ONLY's fixed shapes on a slow host) with a table
    // entry taken from steps beside decodes where any measured its size (docs/fidelity.md, "The
    // eighteenth batch") moved the median from 9.08 % (the rule alone: 8.75 %; the batch alone:
    // 10.67 %) and the ratios from 12. The fifteenth batch (cal14: decode batches past the capture size) left them as they were;
    // the sixteenth and seventeenth (cal15, cal16: the probe's text and token-id bursts of 256
    // prompts, cold and cached) moved the front end's intake (1.70 -> 1.58 ms a request) and text
    // term (1.30 -> 1.16 us a token), and the median from 8.69 to 9.08 %.
    // The steps: the bench's own send times moved facb078's 9.23 % (mean over 32 simulator draws)
    // to 9.83 %; the thirteenth batch's fixed shapes (cal12, calibration only) with a decode's cost
    // in a mixed step weighted by how far apart each pair's decodes are (docs/fidelity.md, "The
    // thirteenth batch") to 8.73 %; the fourteenth batch's (cal13, eager chunked prefill at 64/64)
    // to 8.69 %. Earlier: the eleventh batch's fixed shapes (cal6-cal8) moved
    // the median from 10.0 to 9.46 %, pricing a prefill beside no decode from paired idle and
    // running prompts to 9.40 %; the ninth batch's 5 runs (vLLM's defaults, workloads no earlier
    // run used) were predicted blind at 13.3 % (worst 43.4 %); the twelfth batch (cal9-cal11) and
    // the pure-prefill ratio's footing to 9.23 %.
    assert!(median <= 0.0985, "median |error| {median}");
    assert!(worst <= 0.685, "worst |error| {worst}");
    let within_25 = records
        .iter()
        .flat_map(|r| r["metrics"].as_array().unwrap())
        .filter(|m| {
            matches!(
                m["metric"].as_str(),
                Some("output_throughput" | "mean_tpot_ms" | "mean_ttft_ms")
            )
        })
        .filter(|m| m["error"].as_f64().unwrap().abs() <= 0.25)
        .count();
    assert!(within_25 >= 255, "{within_25} of 288 values within 25 %");
    // The repeated servers: one real run as the prediction of the other (the committed data's own
    // reproducibility), median 17.2 %, worst 206 % over 16 workloads on five repeated servers.
    let real = &value["real_against_real"];
    assert_eq!(real["repeats"].as_array().unwrap().len(), 16);
    let real_median = real["median_abs_error"].as_f64().unwrap();
    assert!((0.17..0.19).contains(&real_median), "{real_median}");
    assert!(real["worst_abs_error"].as_f64().unwrap() > 2.0);
    // One prediction of both runs of a repeat errs on their mean by at least half their
    // difference: 7.7 % at the median; the model, 11.5 % at the median (docs/fidelity.md, "How far
    // two real runs of one workload lie apart").
    let floor = real["one_prediction_floor_median"].as_f64().unwrap();
    let on_repeats = real["model_on_repeats_median"].as_f64().unwrap();
    assert!((0.07..0.085).contains(&floor), "{floor}");
    assert!(on_repeats >= floor && on_repeats <= 0.1155, "{on_repeats}");
    // Of the repeats' 48 values, 4 lie more than (1 + 0.25) / (1 − 0.25) apart: no prediction
    // meets the worst-value bar on both runs (graph 256/2048 `pre-r4` TPOT, 3.06 times).
    assert_eq!(real["values_beyond_worst_bar"].as_u64(), Some(4));
    // A repeated graph server's two real graph/eager ratios (over one eager run): one predicts the
    // other within the ratio bar in 3 of 12 (docs/fidelity.md, "How far two real ratios lie apart").
    let ratio_repeats = real["ratios"].as_array().unwrap();
    assert_eq!(ratio_repeats.len(), 12);
    let mut agree = 0;
    for r in ratio_repeats {
        let (a, b) = (
            r["real"][0].as_f64().unwrap(),
            r["real"][1].as_f64().unwrap(),
        );
        let first = r["first_as_prediction"].as_f64().unwrap();
        assert!((first - ((a - b) / b).abs()).abs() < 1e-12, "{r}");
        agree += usize::from(((a - b) / b).abs().min(((b - a) / a).abs()) <= 0.10);
    }
    assert_eq!(real["ratios_within_bar"].as_u64(), Some(agree as u64));
    assert_eq!(agree, 3);
    // In 5 of the 12 the two lie more than (1 + 0.1) / (1 − 0.1) apart: no prediction meets both.
    assert_eq!(real["ratios_one_prediction_can_meet"].as_u64(), Some(7));
    let ratios = value["graph_over_eager_tpot"].as_array().unwrap();
    assert_eq!(ratios.len(), 49);
    let within = ratios
        .iter()
        .filter(|r| r["error"].as_f64().unwrap().abs() <= 0.10)
        .count();
    // 15 of 49: eager TPOTs vary with the host by about as much as the bar between servers.
    assert!(
        within >= 15,
        "graph/eager TPOT ratios within 10 %: {within} of 49"
    );
}

#[test]
fn the_builtin_engine_profile_is_what_the_committed_runs_give() {
    let (said, _) = rederive_shipped_profile("vllm", "h200", 58);
    // Every optional term was measured on the H200.
    assert!(!said.contains("no run measured"), "{said}");
}

/// The model on a GPU no term was read from: the built-in H100 profile is derived from the H100
/// servers' fixed shapes and calibration bench runs alone (traces/data/vllm/h100/, twelve eager and
/// seven FULL_DECODE_ONLY servers), and prices the judged plans run there (eager 256/2048 and
/// 256/8192, FULL_DECODE_ONLY 64/64, 256/2048 and 256/8192: 29 runs) within the median bar (6.2 %
/// when committed; docs/fidelity.md, "The thirty-seventh batch").
#[test]
fn a_profile_of_h100_runs_alone_prices_the_h100_judged_runs() {
    let (said, text) = rederive_shipped_profile("vllm/h100", "h100", 19);
    // Three of FULL_DECODE_ONLY's optional terms were never measured on the H100, and the note
    // names the plan that would measure each.
    assert_eq!(
        said.matches("note: full-decode-only: no run measured")
            .count(),
        3,
        "{said}"
    );
    assert!(
        said.contains("engine-dsv2l-cal27-graph-256-2048.json"),
        "{said}"
    );
    let derived: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(derived["gpu"], "NVIDIA H100 80GB HBM3");
    let modes: Vec<&str> = derived["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, ["eager", "full-decode-only"]);
    // The built-in profile of the GPU the run files name prices every judged run of the folder.
    let (report, _) = afd_sim_json(
        &["replay-vllm", data("vllm/h100").to_str().unwrap()],
        &["--json"],
    );
    assert_eq!(report["records"].as_array().unwrap().len(), 29, "{report}");
    let median = report["median_abs_error"].as_f64().unwrap();
    assert!(median <= 0.10, "median |error| {median}");
    // Both modes are judged, and the graph/eager ratios are set where both ran.
    assert_eq!(report["by_mode"].as_array().unwrap().len(), 2, "{report}");
    assert_eq!(
        report["graph_over_eager_tpot"].as_array().unwrap().len(),
        12,
        "{report}"
    );
}

/// An eager-only profile on the H100 (its eager servers alone): with no graph mode among the runs
/// the front end is read from the eager servers' injected requests; from the judged eager 256/8192
/// plan's server alone, from lone prompts, which `engine-profile` says; without that server no
/// burst prices the per-token floor, and the refusal names the plan that holds one. That server's
/// six runs are priced within the median bar by the built-in profile (7.0 % from the eager servers
/// alone; docs/fidelity.md, "The thirty-sixth batch").
#[test]
fn the_h100_eager_servers_alone_read_the_front_end_and_price_their_judged_runs() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("h100.json");
    let runs = committed("vllm/h100", |n| {
        n.contains("eager") && n.ends_with(".json.xz")
    });
    assert_eq!(runs.len(), 12, "{runs:?}");
    let out = engine_profile_as_shipped(&runs, &profile);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("read from lone prompts"), "{said}");
    let derived: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    assert_eq!(derived["modes"].as_array().unwrap().len(), 1);
    // No graph mode: the front end is read from the eager servers' injected requests, the next
    // step's issue taken off (62.6 ms when it was a lone prompt's first token less the floor's step).
    let read = derived["modes"][0]["evidence"]["frontend"]
        .as_str()
        .unwrap();
    assert!(
        read.starts_with("eager servers' injected requests"),
        "{read}"
    );
    let frontend_ms = derived["frontend_ns"].as_f64().unwrap() / 1e6;
    assert!((1.0..20.0).contains(&frontend_ms), "{frontend_ms} ms");
    // The judged plan's server alone injects nothing: its lone prompts give the figure, and
    // `engine-profile` says what that reading holds.
    let lone = dir.path().join("lone.json");
    let mut args: Vec<&str> = vec!["engine-profile"];
    args.extend(
        runs.iter()
            .map(String::as_str)
            .filter(|r| r.contains("8192-r2")),
    );
    args.extend(["--out", lone.to_str().unwrap()]);
    let out = afd_sim(&args);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("read from lone prompts"), "{said}");
    // Without the judged plan's full-budget bursts the H100 servers price no per-token floor, and
    // the refusal names the plan that holds them (no file written).
    let without = dir.path().join("without.json");
    let mut args: Vec<&str> = vec!["engine-profile"];
    args.extend(
        runs.iter()
            .map(String::as_str)
            .filter(|r| !r.contains("8192-r2")),
    );
    args.extend(["--out", without.to_str().unwrap()]);
    let out = afd_sim(&args);
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("full-budget steps"), "{said}");
    assert!(
        said.contains("engine-dsv2l-eager-256-8192-r2.json"),
        "{said}"
    );
    assert!(!without.exists());
    // The judged server's files alone in a folder: replay prices every bench run it holds.
    let judged = dir.path().join("judged");
    std::fs::create_dir(&judged).unwrap();
    for name in [
        "h100-dsv2l-eager-256-8192-r2.json.xz",
        "h100-dsv2l-eager-256-8192-r2.server.log.xz",
    ] {
        std::fs::copy(data("vllm/h100").join(name), judged.join(name)).unwrap();
    }
    let (report, _) = afd_sim_json(&["replay-vllm", judged.to_str().unwrap()], &["--json"]);
    assert_eq!(report["records"].as_array().unwrap().len(), 6, "{report}");
    let median = report["median_abs_error"].as_f64().unwrap();
    assert!(median <= 0.10, "median |error| {median}");
}

/// Two servers' files under one name (`afd-probe vllm --out DIR` writes every run as
/// `DIR/run.json`) stay two servers: `cal17` and `cal2-graph` copied to `a/run.json.xz` and
/// `b/run.json.xz`, each with its server log as `server.log.xz` beside it (as the probe keeps it),
/// give the shipped profile's every figure, where one name would have paired their injections and
/// counted them as one server.
#[test]
fn two_run_files_of_one_name_are_two_servers() {
    let dir = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec!["engine-profile".into()];
    for entry in std::fs::read_dir(data("vllm")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_owned();
        if !name.ends_with(".json.xz") {
            continue;
        }
        let copy = match name.as_str() {
            "h200-dsv2l-cal17-graph-256-8192.json.xz" => Some("a"),
            "h200-dsv2l-cal2-graph-256-2048.json.xz" => Some("b"),
            _ => None,
        };
        match copy {
            Some(folder) => {
                let to = dir.path().join(folder).join("run.json.xz");
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::copy(&path, &to).unwrap();
                let log = path.with_file_name(name.replace(".json.xz", ".server.log.xz"));
                std::fs::copy(&log, to.with_file_name("server.log.xz")).unwrap();
                args.push(to.to_str().unwrap().to_owned());
            }
            None => args.push(path.to_str().unwrap().to_owned()),
        }
    }
    let out = afd_sim(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let derived: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shipped: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data("engine/h200-dsv2l-vllm-engine.json")).unwrap(),
    )
    .unwrap();
    let figures = |profile: &serde_json::Value| {
        let mut p = profile.clone();
        p.as_object_mut().unwrap().remove("sources");
        // The division comes from the profiled servers' module summaries, not the run files.
        p.as_object_mut().unwrap().remove("role_division");
        for mode in p["modes"].as_array_mut().unwrap() {
            mode.as_object_mut().unwrap().remove("evidence");
        }
        p
    };
    assert_eq!(figures(&derived), figures(&shipped));
    let sources = derived["sources"].to_string();
    assert!(
        sources.contains("a/run.json.xz") && sources.contains("b/run.json.xz"),
        "{sources}"
    );
}

#[test]
fn compare_refuses_a_plain_result_without_its_server_and_bad_words() {
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    std::fs::write(&result, r#"{"completed": 4, "total_input_tokens": 400, "total_output_tokens": 40, "request_rate": "inf"}"#).unwrap();
    let path = result.to_str().unwrap();
    let out = afd_sim(&["compare", path]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--serve-args"));
    let out = afd_sim(&[
        "compare",
        path,
        "--serve-args",
        "vllm serve --enforce-eager",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // A profile that measured only eager servers refuses a graph server and says what it prices.
    let shipped = std::fs::read_to_string(data("engine/h200-dsv2l-vllm-engine.json")).unwrap();
    let mut eager_only: serde_json::Value = serde_json::from_str(&shipped).unwrap();
    eager_only["modes"]
        .as_array_mut()
        .unwrap()
        .retain(|m| m["mode"] == "eager");
    let profile = dir.path().join("eager-only.json");
    std::fs::write(&profile, eager_only.to_string()).unwrap();
    let out = afd_sim(&[
        "compare",
        path,
        "--engine",
        profile.to_str().unwrap(),
        "--serve-args",
        r#"vllm serve /m --max-num-seqs 256 -cc '{"cudagraph_mode":"FULL_DECODE_ONLY"}'"#,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("FULL_DECODE_ONLY") && stderr.contains("it prices --enforce-eager"),
        "the refusal names the mode and what the profile prices: {stderr}"
    );
    // vLLM's default, FULL_AND_PIECEWISE, is priced since the fourth batch measured it.
    let default_mode = afd_sim(&[
        "compare",
        path,
        "--serve-args",
        "vllm serve /m --max-num-seqs 256",
        "--json",
    ]);
    assert!(
        default_mode.status.success(),
        "{}",
        String::from_utf8_lossy(&default_mode.stderr)
    );
    let ok = afd_sim(&[
        "compare",
        path,
        "--serve-args",
        "vllm serve /m --enforce-eager --max-num-seqs 4",
        "--json",
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let zero = afd_sim(&["replay-vllm", "/nonexistent-folder"]);
    assert_eq!(zero.status.code(), Some(2));
    let zero = afd_sim(&[
        "compare",
        "/dev/zero",
        "--serve-args",
        "vllm serve /m --enforce-eager",
    ]);
    assert_eq!(
        zero.status.code(),
        Some(2),
        "an endless file is refused, not read"
    );
    std::fs::write(&result, "[1, 2").unwrap();
    assert_eq!(
        afd_sim(&[
            "compare",
            path,
            "--serve-args",
            "vllm serve /m --enforce-eager"
        ])
        .status
        .code(),
        Some(2)
    );
}

/// `afd-sim predict` of the plain server `line` at 16 prompts of 128 tokens, 32 output tokens, with
/// `extra`: its JSON report and stderr.
fn predict_sixteen(line: &str, extra: &[&str]) -> (serde_json::Value, String) {
    let args = [
        "predict",
        "--serve-args",
        line,
        "--input-len",
        "128",
        "--output-len",
        "32",
        "--num-prompts",
        "16",
        "--json",
    ];
    afd_sim_json(&args, extra)
}

#[test]
fn predict_prices_a_plain_server_the_profile_measured_as_real_vllm_runs_it() {
    let tpot = |extra: &[&str]| {
        let (v, stderr) = predict_sixteen(
            "vllm serve deepseek-ai/DeepSeek-V2-Lite --enforce-eager --max-num-seqs 64",
            extra,
        );
        (v["mean_tpot_ms"].as_f64().unwrap(), stderr)
    };
    // The engine's eager decode step is host-bound: about 56 ms at 16 requests in the built-in
    // profile, the median of loans that stepped at 43-87 ms; the kernels alone are a few ms.
    let (engine, note) = tpot(&["--real-engine", "--warm-kernels"]);
    assert!((40.0..100.0).contains(&engine), "{engine}");
    // So every one of its steps is bound by the host, whichever device is busiest.
    let (report, _) = predict_sixteen(
        "vllm serve deepseek-ai/DeepSeek-V2-Lite --enforce-eager --max-num-seqs 64",
        &["--warm-kernels"],
    );
    assert_eq!(
        report["steps"]["host_bound_share"], 1.0,
        "{}",
        report["steps"]
    );
    assert!(note.contains("priced as real vLLM 0.26.0"), "{note}");
    assert!(!note.contains("freshly started"), "{note}");
    // Freshly started, the eager server compiles the fused-MoE kernel at its first prompt's and
    // first decode's token counts: about a second each, over 31 tokens a request.
    let (fresh, said) = tpot(&["--real-engine"]);
    assert!(fresh > engine + 20.0, "{fresh} against {engine}");
    assert!(said.contains("freshly started"), "{said}");
    // The engine is the default; --kernel-model prices from kernels alone.
    let (default, _) = tpot(&["--warm-kernels"]);
    assert_eq!(default, engine);
    let (kernels, quiet) = tpot(&["--kernel-model"]);
    assert!(kernels < 30.0, "{kernels}");
    assert!(!quiet.contains("priced as real vLLM"), "{quiet}");
    // A model the profile did not measure keeps the kernel model, and says so; so does a GPU no
    // engine profile measured.
    let (_, other) = tpot(&["--real-engine", "--model", "qwen3-30b-a3b"]);
    assert!(other.contains("measured DeepSeek-V2-Lite"), "{other}");
    let (a100, said) = tpot(&["--gpu", "a100"]);
    assert!(said.contains("no engine profile measured a100"), "{said}");
    let (a100_kernels, _) = tpot(&["--gpu", "a100", "--kernel-model"]);
    assert_eq!(a100, a100_kernels);
    // The H100 has a profile of its own servers: host-bound steps there too, at its host's pace
    // (its eager decode table at 16 requests is 64.0 ms where the H200's is 61.5).
    let (h100, said) = tpot(&["--gpu", "h100", "--warm-kernels"]);
    assert!(
        said.contains("built-in NVIDIA H100 80GB HBM3 engine profile"),
        "{said}"
    );
    assert!(
        (40.0..100.0).contains(&h100) && h100 != engine,
        "{h100} against {engine}"
    );
    // An AFD pair (the seed recipe) takes the profile's front end for its Attention server, vLLM's
    // own API server and engine core, and real vLLM's host pace for the steps its roles issue op
    // by op: one 1,024-token prompt at a rate that queues nothing is prefilled in 16 chunks of 64
    // tokens, none a graph, each issued at about a plain vLLM step's pace for its shape (a
    // compiled-model step of 64 tokens is 65.5 ms in the built-in profile) where the lean issue
    // costs priced a few ms; its decode steps replay graphs and cost what they did.
    let light = [
        "predict",
        "--request-rate",
        "1",
        "--num-prompts",
        "1",
        "--json",
    ];
    let (kernels, quiet) = afd_sim_json(&light, &["--kernel-model"]);
    let (front, note) = afd_sim_json(&light, &[]);
    assert!(
        note.contains("front end") && note.contains("host issue") && note.contains("kernel model"),
        "{note}"
    );
    assert!(!quiet.contains("front end"), "{quiet}");
    let ms = |v: &serde_json::Value, key: &str| v[key].as_f64().unwrap();
    let later = ms(&front, "mean_ttft_ms") - ms(&kernels, "mean_ttft_ms");
    assert!(
        (16.0 * 40.0..16.0 * 100.0).contains(&later),
        "first tokens {later} ms later"
    );
    let tpot = ms(&front, "mean_tpot_ms") / ms(&kernels, "mean_tpot_ms");
    assert!((0.99..1.01).contains(&tpot), "decode steps moved: {tpot}");
    // Those chunk steps are their hosts': the report counts them as bound by the host, not by
    // the busiest device, and from kernels alone none is.
    let steps = |v: &serde_json::Value, key: &str| v["steps"][key].as_f64().unwrap();
    let eager_share = steps(&front, "eager") / steps(&front, "total");
    assert_eq!(steps(&front, "eager"), 16.0);
    assert!(
        (steps(&front, "host_bound_share") - eager_share).abs() < 1e-12,
        "{}",
        front["steps"]
    );
    assert_eq!(
        steps(&kernels, "host_bound_share"),
        0.0,
        "{}",
        kernels["steps"]
    );
    let shares = ["attention", "ffn", "transfer", "host"]
        .map(|who| steps(&front, &format!("{who}_bound_share")))
        .iter()
        .sum::<f64>();
    assert!((shares - 1.0).abs() < 1e-12, "shares sum to {shares}");
}

/// `predict --real-engine --engine FILE` prices with a profile the user derived on their own host
/// (`afd-sim engine-profile`): the shipped profile's file gives the built-in figures to the digit,
/// an edited one moves them, and a profile of another GPU kind (for `compare` too), a broken file
/// or `--engine` without `--real-engine` exits 2.
#[test]
fn predict_prices_with_an_engine_profile_of_your_own() {
    let line = "vllm serve deepseek-ai/DeepSeek-V2-Lite --load-format dummy --enforce-eager";
    let shipped = data("engine/h200-dsv2l-vllm-engine.json");
    let shipped = shipped.to_str().expect("a UTF-8 path");
    let (builtin, _) = predict_sixteen(line, &["--real-engine", "--warm-kernels"]);
    let (own, note) = predict_sixteen(
        line,
        &["--real-engine", "--warm-kernels", "--engine", shipped],
    );
    assert_eq!(builtin["mean_tpot_ms"], own["mean_tpot_ms"]);
    assert_eq!(builtin["mean_ttft_ms"], own["mean_ttft_ms"]);
    assert!(note.contains("(the engine profile "), "{note}");
    // A host whose eager steps are twice as long: every decode period doubled.
    let mut profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(shipped).expect("the shipped profile"))
            .expect("JSON");
    let eager = profile["modes"]
        .as_array_mut()
        .expect("modes")
        .iter_mut()
        .find(|m| m["mode"] == "eager")
        .expect("an eager mode");
    for point in eager["decode_period_ns"].as_array_mut().expect("a table") {
        point[1] = serde_json::json!(point[1].as_u64().expect("ns") * 2);
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let slow = dir.path().join("slow.json");
    std::fs::write(&slow, profile.to_string()).expect("written");
    let (slower, _) = predict_sixteen(
        line,
        &[
            "--real-engine",
            "--warm-kernels",
            "--engine",
            slow.to_str().expect("UTF-8"),
        ],
    );
    let ratio = slower["mean_tpot_ms"].as_f64().expect("TPOT")
        / builtin["mean_tpot_ms"].as_f64().expect("TPOT");
    assert!((1.6..2.1).contains(&ratio), "TPOT x{ratio}");
    fn predict<'a>(line: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec!["predict", "--serve-args", line];
        args.extend(extra);
        args
    }
    refused(
        &predict(
            line,
            &["--real-engine", "--engine", shipped, "--gpu", "h100"],
        ),
        "the profile measured NVIDIA H200 (h200), the deployment runs on h100",
    );
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"format\": 3}").expect("written");
    refused(
        &predict(
            line,
            &["--real-engine", "--engine", broken.to_str().expect("UTF-8")],
        ),
        "broken.json",
    );
    refused(
        &predict(line, &["--kernel-model", "--engine", shipped]),
        "--kernel-model",
    );
    // compare holds a given profile to the runs' GPU kind too.
    let inf = plain_inf(&dir);
    refused(
        &[
            "compare",
            &inf,
            "--serve-args",
            line,
            "--gpu",
            "h100",
            "--engine",
            shipped,
        ],
        "the profile measured NVIDIA H200, the runs are priced on h100",
    );
}

#[test]
fn compare_takes_a_run_files_calibration_bench_runs_on_request() {
    let file = data("vllm/h200-dsv2l-cal8-piecewise-1024-8192.json.xz");
    let path = file.to_str().unwrap();
    let out = afd_sim(&["compare", path, "--calibration", "--json", "--draws", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for workload in ["cal-bench-p256-r4", "cal-bench-p1024-r2"] {
        assert!(text.contains(workload), "{workload} missing: {text}");
    }
    // Without the flag the file has no judged bench run to compare, and says so.
    refused(
        &["compare", path, "--json"],
        "no judged bench run to compare",
    );
    // A plain bench result marks nothing as calibration.
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    std::fs::write(&result, r#"{"completed": 4, "total_input_tokens": 400, "total_output_tokens": 40, "request_rate": "inf"}"#).unwrap();
    let out = afd_sim(&[
        "compare",
        result.to_str().unwrap(),
        "--calibration",
        "--serve-args",
        "vllm serve /m",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--calibration"));
}

#[test]
fn compare_says_where_the_engine_core_spent_a_run_the_probe_read_from_proc() {
    // A committed run file, its calibration records given the readings a probe since 7f271e5 takes.
    let file = data("vllm/h200-dsv2l-cal8-piecewise-1024-8192.json.xz");
    let text = afd_traces::input::read_text(&file, afd_traces::input::InputKind::VLLM_RUN).unwrap();
    let mut run = afd_traces::vllm_run::VllmRun::from_json(&text).unwrap();
    for record in run.records.iter_mut().filter(|r| r.workload.calibration) {
        record.host = Some(afd_traces::vllm_run::HostShare {
            engine_core_pid: 958,
            wall_s: 40.0,
            engine_core_on_cpu_s: 12.0,
            engine_core_waited_s: 2.0,
            steal_s: 0.0,
            busy_s: 60.0,
        });
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.json");
    std::fs::write(&path, run.to_json()).unwrap();
    let path = path.to_str().unwrap();
    let out = afd_sim(&["compare", path, "--calibration", "--draws", "2"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("run cal-bench-p256-r4: the engine core's thread was on a CPU 30% of the real run and waited for one 5.0%; the host's CPUs were busy 1.50 and stolen 0.000 CPUs' worth"),
        "{text}"
    );
    let (cases, _) = afd_sim_json(
        &["compare", path, "--calibration", "--json", "--draws", "2"],
        &[],
    );
    let host = &cases.as_array().unwrap()[0]["host"];
    assert_eq!(host["engine_core_on_cpu_s"].as_f64(), Some(12.0), "{cases}");
    // The committed file, without readings, prints none.
    let out = afd_sim(&[
        "compare",
        file.to_str().unwrap(),
        "--calibration",
        "--draws",
        "2",
    ]);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("engine core's thread"));
}

#[test]
fn an_arrival_bound_run_is_simulated_at_its_own_bench_clients_send_times() {
    let file = data("vllm/h200-dsv2l-graph-256-2048-r2.json.xz");
    let path = file.to_str().unwrap();
    let (cases, _) = afd_sim_json(&["compare", path, "--json"], &[]);
    let case = |name: &str| {
        cases
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["workload"] == name)
            .unwrap()
            .clone()
    };
    // The run file's recorded bench seed, one simulation; a run sent all at once has no draw.
    let pre = case("e2e-pre-r4");
    assert_eq!(pre["bench_seed"], 92292);
    assert_eq!(pre["draws"], 1);
    assert!(case("e2e-pre-sat")["bench_seed"].is_number());
    // --draws asks for the simulator's own draws instead.
    let (drawn, _) = afd_sim_json(&["compare", path, "--json", "--draws", "2"], &[]);
    let drawn_pre = drawn
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["workload"] == "e2e-pre-r4")
        .unwrap();
    assert!(drawn_pre["bench_seed"].is_null());
    assert_eq!(drawn_pre["draws"], 2);
    // A run file carries its seeds: --bench-seed is refused, by name.
    refused(&["compare", path, "--bench-seed", "1"], "--bench-seed");
    // A plain result: the bench's seed given, or vLLM's default 0; predict sends the same way.
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.json");
    std::fs::write(&result, r#"{"completed": 8, "total_input_tokens": 1024, "total_output_tokens": 64, "request_rate": 4.0, "mean_ttft_ms": 50.0}"#).unwrap();
    let ttft = |extra: &[&str]| {
        let args = [
            "compare",
            result.to_str().unwrap(),
            "--serve-args",
            "vllm serve /m --enforce-eager",
            "--json",
        ];
        let (v, _) = afd_sim_json(&args, extra);
        (
            v[0]["bench_seed"].clone(),
            v[0]["metrics"][0]["predicted"].as_f64().unwrap(),
        )
    };
    let (seed, default) = ttft(&[]);
    assert_eq!(seed, 0);
    assert_eq!(ttft(&["--bench-seed", "0"]).1, default);
    assert_ne!(ttft(&["--bench-seed", "7"]).1, default);
    // A ramped run is paced as the bench paced it; one the bench would refuse is refused.
    let ramped = dir.path().join("ramped.json");
    std::fs::write(&ramped, r#"{"completed": 8, "total_input_tokens": 1024, "total_output_tokens": 64, "request_rate": "inf", "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8, "mean_ttft_ms": 50.0}"#).unwrap();
    let ramped = ramped.to_str().unwrap();
    let words = ["--serve-args", "vllm serve /m --enforce-eager", "--json"];
    let (v, _) = afd_sim_json(&["compare", ramped], &words);
    assert_eq!(v[0]["draws"], 1);
    let (all_at_once, _) = afd_sim_json(&["compare", plain_inf(&dir).as_str()], &words);
    assert_ne!(v[0]["metrics"], all_at_once[0]["metrics"]);
    std::fs::write(dir.path().join("bad.json"), r#"{"completed": 8, "total_input_tokens": 1024, "total_output_tokens": 64, "request_rate": 2.0, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 8}"#).unwrap();
    let bad = dir.path().join("bad.json");
    refused(
        &[
            "compare",
            bad.to_str().unwrap(),
            "--serve-args",
            "vllm serve /m",
        ],
        "--ramp-up-strategy",
    );
    // numpy's seeds are 0..=2**32 - 1; a trace brings its own arrivals.
    let plain = result.to_str().unwrap();
    refused(
        &[
            "compare",
            plain,
            "--serve-args",
            "vllm serve /m",
            "--bench-seed=-1",
        ],
        "--bench-seed",
    );
    refused(
        &[
            "compare",
            plain,
            "--serve-args",
            "vllm serve /m",
            "--bench-seed",
            "4294967296",
        ],
        "--bench-seed",
    );
    refused(
        &["predict", "--bench-seed", "3", "--trace", "t.csv"],
        "--bench-seed",
    );
}

/// A run file with nothing of the asked kind to compare is refused by name, with what it holds and
/// the switch that compares the other kind.
#[test]
fn a_run_file_without_the_asked_bench_runs_is_refused() {
    let cal16 = data("vllm/h200-dsv2l-cal16-graph-256-8192.json.xz");
    let cal16 = cal16.to_str().unwrap();
    refused(
        &["compare", cal16],
        "no judged bench run to compare (8 records: 4 fixed-shape, 0 failed, 4 calibration bench); --calibration compares its calibration runs",
    );
    let cal14 = data("vllm/h200-dsv2l-cal14-piecewise-1024-8192.json.xz");
    refused(
        &["compare", cal14.to_str().unwrap(), "--calibration"],
        "no calibration bench run to compare (12 records: 12 fixed-shape, 0 failed, 0 judged bench)",
    );
}

/// Every committed run served dummy weights, whose decode tokens route to few experts; a server
/// that loads its weights is priced with the experts an even routing reads (docs/fidelity.md, "Why
/// a replayed decode step is cheap here"), by `predict --real-engine` and by `compare` alike.
#[test]
fn a_server_that_loads_its_weights_replays_dearer_decode_steps_than_the_dummy_runs_measured() {
    let server = |dummy: bool| {
        format!(
            "vllm serve /m {}--max-num-seqs 64 --compilation-config '{{\"cudagraph_mode\": \"FULL_DECODE_ONLY\"}}'",
            if dummy { "--load-format dummy " } else { "" }
        )
    };
    let predict = |dummy: bool| {
        let line = server(dummy);
        let args = [
            "predict",
            "--serve-args",
            &line,
            "--real-engine",
            "--warm-kernels",
            "--input-len",
            "16",
            "--output-len",
            "256",
            "--num-prompts",
            "64",
            "--json",
        ];
        let (v, stderr) = afd_sim_json(&args, &[]);
        (v["median_tpot_ms"].as_f64().unwrap(), stderr)
    };
    let (dummy, quiet) = predict(true);
    let (trained, note) = predict(false);
    // The kernel model prices a dummy-weight server by even routing, and says it is dearer so.
    let line = server(true);
    let kernels = [
        "predict",
        "--serve-args",
        &line,
        "--kernel-model",
        "--num-prompts",
        "4",
        "--json",
    ];
    let (_, said) = afd_sim_json(&kernels, &[]);
    assert!(said.contains("reach few experts"), "{said}");
    assert!(!quiet.contains("reach few experts"), "{quiet}");
    // An AFD pair whose FFN role (router and experts) fills its weights at random, likewise.
    let seed = PathBuf::from(crate::support::SIM_DIR)
        .join("tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh");
    let text = std::fs::read_to_string(&seed).expect("the seed recipe");
    let ffn_at = text
        .rfind("vllm serve \"$MODEL_PATH\"")
        .expect("an FFN command");
    let (head, tail) = text.split_at(ffn_at);
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("dummy-ffn.sh");
    std::fs::write(
        &recipe,
        format!(
            "{head}{}",
            tail.replacen("\"$MODEL_PATH\"", "\"$MODEL_PATH\" --load-format dummy", 1)
        ),
    )
    .unwrap();
    let notes_of = |recipe: &std::path::Path| {
        let args = ["predict", recipe.to_str().unwrap(), "--num-prompts", "4"];
        afd_sim_json(&args, &["--json"]).1
    };
    let said = notes_of(&recipe);
    assert!(said.contains("reach few experts"), "{said}");
    let seed_notes = notes_of(&seed);
    assert!(!seed_notes.contains("reach few experts"), "{seed_notes}");
    // 64 decodes replay a 4.5 ms graph on the dummy model; reading all 64 experts of 26 layers
    // where it reads a few takes several ms more.
    assert!((4.0..6.0).contains(&dummy), "{dummy}");
    assert!(trained > dummy + 3.0, "{trained} against {dummy}");
    assert!(note.contains("dummy weights"), "{note}");
    assert!(!quiet.contains("dummy weights"), "{quiet}");

    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("dec.json");
    std::fs::write(
        &result,
        r#"{"completed": 64, "total_input_tokens": 1024, "total_output_tokens": 16384, "request_rate": "inf", "mean_tpot_ms": 5.0}"#,
    )
    .unwrap();
    let compare = |dummy: bool| {
        let line = server(dummy);
        let args = [
            "compare",
            result.to_str().unwrap(),
            "--serve-args",
            &line,
            "--json",
        ];
        let (v, stderr) = afd_sim_json(&args, &[]);
        assert_eq!(stderr.contains("loads its weights"), !dummy, "{stderr}");
        let metrics = v[0]["metrics"].as_array().unwrap().clone();
        metrics
            .iter()
            .find(|m| m["metric"] == "mean_tpot_ms")
            .and_then(|m| m["predicted"].as_f64())
            .unwrap()
    };
    let (dummy, trained) = (compare(true), compare(false));
    assert!(trained > dummy + 3.0, "{trained} against {dummy}");
}

/// A run file of one eager server, with or without `--load-format dummy`, and no records.
fn bare_run(dir: &tempfile::TempDir, dummy: bool) -> String {
    let words = if dummy {
        r#""/m", "--load-format", "dummy", "--enforce-eager""#
    } else {
        r#""/m", "--enforce-eager""#
    };
    let text = format!(
        r#"{{"format": "afd-vllm-run", "schema_version": 1, "label": "x", "provenance": {{"tool": "t",
        "command": "c", "date_utc": "2026-12-05T00:00:00Z", "hostname": "h", "vllm_version": "0.26.0",
        "torch_version": "2", "torch_cuda": "13", "gpus": ["NVIDIA H200, 580, 143771 MiB"],
        "driver_version": "580", "cpu_model": "x", "cpu_cores": 16, "python": "3"}},
        "serve_args": [{words}], "server_env": {{}}, "backends": {{}}, "startup_s": 1, "records": []}}"#
    );
    let path = dir
        .path()
        .join(format!("{}.json", if dummy { "dummy" } else { "loaded" }));
    std::fs::write(&path, text).expect("the temporary folder takes a file");
    path.to_string_lossy().into_owned()
}

#[test]
fn engine_profile_refuses_to_mix_dummy_and_loaded_weights() {
    let dir = tempfile::tempdir().unwrap();
    let (dummy, loaded) = (bare_run(&dir, true), bare_run(&dir, false));
    let out_file = dir.path().join("engine.json");
    let out = out_file.to_str().unwrap();
    refused(
        &["engine-profile", &dummy, &loaded, "--out", out],
        "--load-format dummy against loaded ones",
    );
    assert!(!out_file.exists(), "no partial profile");
    // A server that returned every token's routed experts paid for it each step: it prices none.
    let counting = std::fs::read_to_string(&dummy)
        .expect("the run just written")
        .replace(
            r#""--enforce-eager""#,
            r#""--enforce-eager", "--enable-return-routed-experts""#,
        );
    let counting_path = dir.path().join("counting.json");
    std::fs::write(&counting_path, counting).expect("the temporary folder takes a file");
    refused(
        &[
            "engine-profile",
            counting_path.to_str().unwrap(),
            "--out",
            out,
        ],
        "counting.json: its server ran with --enable-return-routed-experts",
    );
    assert!(!out_file.exists(), "no partial profile");
}

/// A run file of one server (`words`, JSON strings) measured on `gpus` under vLLM `version`, with
/// one small bench run at 4 requests a second (8 prompts of 256 tokens, 32 output tokens).
fn bench_run(
    dir: &tempfile::TempDir,
    name: &str,
    words: &str,
    gpus: &str,
    version: &str,
) -> String {
    let text = format!(
        r#"{{"format": "afd-vllm-run", "schema_version": 1, "label": "{name}", "provenance": {{"tool": "t",
        "command": "c", "date_utc": "2026-12-05T00:00:00Z", "hostname": "h", "vllm_version": "{version}",
        "torch_version": "2", "torch_cuda": "13", "gpus": [{gpus}],
        "driver_version": "580", "cpu_model": "x", "cpu_cores": 16, "python": "3"}},
        "serve_args": ["/m", "--load-format", "dummy", {words}], "server_env": {{}}, "backends": {{}},
        "startup_s": 1, "records": [{{"workload": {{"name": "e2e-small", "kind": "bench-serve",
        "input_len": 256, "output_len": 32, "num_prompts": 8, "request_rate": 4.0,
        "max_concurrency": null, "seed": 7, "timeout_s": 60.0, "min_max_num_seqs": null}},
        "failure": null, "wall_s": 3.0, "fixed": null, "steps": [], "metrics_after": "", "bench_result": {{
        "backend": "openai", "burstiness": 1.0, "completed": 8, "failed": 0, "num_prompts": 8,
        "duration": 2.5, "max_concurrency": null, "request_rate": 4.0, "total_input_tokens": 2048,
        "total_output_tokens": 256, "output_throughput": 100.0, "request_throughput": 3.2,
        "mean_ttft_ms": 150.0, "median_ttft_ms": 150.0, "p99_ttft_ms": 200.0, "mean_tpot_ms": 70.0,
        "median_tpot_ms": 70.0, "mean_itl_ms": 70.0, "mean_e2el_ms": 2300.0, "median_e2el_ms": 2300.0}}}}]}}"#
    );
    let path = dir.path().join(format!("{name}.json"));
    std::fs::write(&path, text).expect("the temporary folder takes a file");
    path.to_string_lossy().into_owned()
}

#[test]
fn compare_prices_the_gpu_a_run_used_and_says_what_it_leaves_out() {
    let dir = tempfile::tempdir().unwrap();
    let h200 = r#""NVIDIA H200, 580.159.04, 143771 MiB""#;
    let eager = r#""--enforce-eager", "--max-num-seqs", "8""#;
    // A run of `words` on one H200 under vLLM 0.26.0.
    let on_h200 = |name: &str, words: &str| bench_run(&dir, name, words, h200, "0.26.0");
    let plain = on_h200("plain", eager);
    // The GPU comes from the provenance; another one asked is refused, as is a GPU afd-sim does not
    // know unless --gpu names one.
    let (cases, stderr) = afd_sim_json(&["compare", &plain, "--json"], &[]);
    assert_eq!(cases[0]["caveats"], serde_json::json!([]), "{stderr}");
    assert_eq!(cases[0]["failed"]["predicted"], 0.0);
    refused(
        &["compare", &plain, "--gpu", "h100"],
        "was measured on NVIDIA H200 (h200)",
    );
    let nvl = bench_run(
        &dir,
        "nvl",
        eager,
        r#""NVIDIA H200 NVL, 580, 143771 MiB""#,
        "0.26.0",
    );
    refused(&["compare", &nvl], "not a GPU kind afd-sim knows");
    afd_sim_json(&["compare", &nvl, "--gpu", "h200", "--json"], &[]);
    // Two ranks on a host of one GPU could not have run.
    let tp2 = on_h200("tp2", r#""--enforce-eager", "--tensor-parallel-size", "2""#);
    refused(&["compare", &tp2], "provenance lists 1 GPU");
    let two_gpus = format!("{h200}, {h200}");
    let tp2_on_two = bench_run(
        &dir,
        "tp2-on-two",
        r#""--enforce-eager", "--tensor-parallel-size", "2""#,
        &two_gpus,
        "0.26.0",
    );
    // Two GPUs may run it; the engine profile measured one-GPU servers, and says so.
    let (cases, stderr) = afd_sim_json(&["compare", &tp2_on_two, "--json"], &[]);
    assert!(
        stderr.contains("the engine profile measured servers of one GPU"),
        "{stderr}"
    );
    assert_eq!(cases[0]["caveats"].as_array().unwrap().len(), 1, "{cases}");
    // A flag the model does not read is named once, on stderr and in each record; one that changes
    // no step is not.
    let fp8 = bench_run(
        &dir,
        "fp8",
        r#""--enforce-eager", "--kv-cache-dtype", "fp8", "--trust-remote-code""#,
        h200,
        "0.27.0",
    );
    let (cases, stderr) = afd_sim_json(&["compare", &fp8, "--json"], &[]);
    assert!(
        stderr.contains("--kv-cache-dtype fp8 is not modelled") && !stderr.contains("trust-remote"),
        "{stderr}"
    );
    assert!(stderr.contains("the run served vLLM 0.27.0"), "{stderr}");
    let caveats = cases[0]["caveats"].as_array().unwrap();
    assert_eq!(caveats.len(), 2, "{caveats:?}");
    // Requests vLLM would refuse are refused, and the refusal is said beside the metrics.
    let short = on_h200("short", r#""--enforce-eager", "--max-model-len", "280""#);
    let (cases, stderr) = afd_sim_json(&["compare", &short, "--json"], &[]);
    assert_eq!(cases[0]["failed"]["predicted"], 8.0);
    assert!(
        cases[0]["failed"]["predicted_reason"]
            .as_str()
            .unwrap()
            .contains("max_model_len 280"),
        "{cases}"
    );
    assert!(
        stderr.contains("refused 8 of 8 requests") && stderr.contains("counted 0 failed"),
        "{stderr}"
    );
    // A bench run that failed in the real run is named, not compared.
    let mut run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    let mut failed = run["records"][0].clone();
    failed["workload"]["name"] = "e2e-failed".into();
    failed["failure"] = "timeout after 60 s\nlog tail".into();
    failed["bench_result"] = serde_json::Value::Null;
    run["records"].as_array_mut().unwrap().push(failed);
    let with_failed = dir.path().join("with-failed.json");
    std::fs::write(&with_failed, run.to_string()).unwrap();
    let (cases, stderr) = afd_sim_json(&["compare", with_failed.to_str().unwrap(), "--json"], &[]);
    assert_eq!(cases.as_array().unwrap().len(), 1);
    assert!(
        stderr.contains(
            "e2e-failed: the real bench run failed and is not compared (timeout after 60 s)"
        ),
        "{stderr}"
    );
    // A folder of runs of one GPU replays; a folder inside it named like a run is skipped.
    let folder = tempfile::tempdir().unwrap();
    bench_run(&folder, "one", eager, h200, "0.26.0");
    std::fs::create_dir(folder.path().join("sub.json")).unwrap();
    let replay = afd_sim(&["replay-vllm", folder.path().to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("sub.json is a folder; skipped"), "{stderr}");
    // Runs of two GPU kinds are not judged as one.
    bench_run(
        &folder,
        "other",
        eager,
        r#""NVIDIA H100 80GB HBM3""#,
        "0.26.0",
    );
    refused(
        &["replay-vllm", folder.path().to_str().unwrap()],
        "compare the runs of each GPU apart",
    );
}

#[test]
fn predict_names_the_serve_flags_it_leaves_out_and_reads_asynchronous_scheduling() {
    let predict = |extra: &str| {
        let line = format!(
            "vllm serve deepseek-ai/DeepSeek-V2-Lite --enforce-eager --max-num-seqs 64 \
             --kv-cache-dtype fp8 --trust-remote-code --seed 1 {extra}"
        );
        let (v, stderr) = predict_sixteen(&line, &["--real-engine"]);
        (v["mean_ttft_ms"].as_f64().unwrap(), stderr)
    };
    let (on, stderr) = predict("");
    assert!(
        stderr.contains("the server's --kv-cache-dtype fp8 is not modelled"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("--trust-remote-code") && !stderr.contains("--seed"),
        "flags that change no step are not named: {stderr}"
    );
    // `--no-async-scheduling` is read, not named: the engine then hands each step's tokens back
    // before it plans the next, so a first token leaves a step earlier.
    let (off, stderr) = predict("--no-async-scheduling");
    assert!(!stderr.contains("async"), "{stderr}");
    assert!(
        off < on,
        "TTFT {off} ms without asynchronous scheduling, {on} ms with"
    );
    // The seed recipe's warnings are said beside its prediction, as `check` says them.
    let seed = crate::support::afd_sim(&["predict", "--num-prompts", "8", "--json"]);
    assert_eq!(seed.code, 0, "{}", seed.stderr);
    assert!(
        seed.stderr.contains("warning[cross.shared-http-port]"),
        "{}",
        seed.stderr
    );
}

#[test]
fn compare_takes_an_afd_pairs_recipe_or_both_roles_command_lines() {
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("pair.json");
    std::fs::write(
        &result,
        r#"{"completed": 32, "failed": 0, "num_prompts": 32, "total_input_tokens": 32768,
        "total_output_tokens": 4096, "request_rate": "inf", "burstiness": 1.0,
        "output_throughput": 600.0, "mean_ttft_ms": 2000.0, "mean_tpot_ms": 12.0}"#,
    )
    .unwrap();
    let result = result.to_str().unwrap();
    let recipe = |name: &str| format!("{}/tests/fixtures/recipes/{name}", crate::support::SIM_DIR);
    let seed = recipe("2a2f_graph_dbo_dp1tp2.sh");
    let (cases, stderr) = afd_sim_json(&["compare", result, &seed, "--json"], &[]);
    let tpot = |cases: &serde_json::Value| {
        cases[0]["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["metric"] == "mean_tpot_ms")
            .unwrap()["predicted"]
            .as_f64()
            .unwrap()
    };
    // The pair's kernels keep the kernel model, its host issue takes vLLM's pace: the 32 prompts
    // sent at once fill its batch with 64-token chunk steps issued op by op, each at about a plain
    // vLLM step's pace for its shape, between the replayed decode steps.
    let pair = tpot(&cases);
    assert!((40.0..150.0).contains(&pair), "{pair}");
    let (lean, _) = afd_sim_json(&["compare", result, &seed, "--json", "--no-engine"], &[]);
    assert!(tpot(&lean) < pair / 3.0, "{lean}");
    assert!(
        stderr.contains("an AFD pair's steps were never measured"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warning[cross.shared-http-port]"),
        "{stderr}"
    );
    assert!(
        cases[0]["caveats"].as_array().unwrap().len() >= 3,
        "{cases}"
    );
    // Both roles' command lines give the same pair as the recipe that writes them.
    let line = |role: &str, port: u32| {
        format!(
            "CUDA_VISIBLE_DEVICES={} vllm serve /m --tensor-parallel-size 1 --enable-expert-parallel --max-num-seqs 64 \
             --max-num-batched-tokens 64 --enforce-eager --port {port} --additional-config \
             '{{\"afd\": {{\"role\": \"{role}\", \"num_attention_ranks\": 1, \"num_ffn_ranks\": 1, \
             \"afd_host\": \"127.0.0.1\", \"afd_port\": 29500}}}}'",
            if role == "attention" { 0 } else { 1 }
        )
    };
    let (attention, ffn) = (line("attention", 8000), line("ffn", 8001));
    let out = afd_sim(&[
        "compare",
        result,
        "--attention-args",
        &attention,
        "--ffn-args",
        &ffn,
        "--json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("an AFD pair's steps"), "{stderr}");
    // A pair the plugin would refuse is refused with check's findings, before any simulation.
    let refused_pair =
        line("attention", 8000).replace("\"num_ffn_ranks\": 1", "\"num_ffn_ranks\": 0");
    refused(
        &[
            "compare",
            result,
            "--attention-args",
            &refused_pair,
            "--ffn-args",
            &ffn,
        ],
        "error[",
    );
    // A run file carries its own serve words.
    let run = data("vllm/h200-dsv2l-graph-256-2048-r2.json.xz");
    refused(
        &["compare", run.to_str().unwrap(), &seed],
        "carries its own serve words",
    );
}

#[test]
fn compare_of_predicts_own_result_is_exact_for_a_server_and_a_pair() {
    // `predict --json` writes a `vllm bench serve --save-result` drop-in; compared against the
    // deployment that predicted it, every metric must come back to the last digit: compare and
    // predict price a deployment alike.
    let dir = tempfile::tempdir().unwrap();
    let seed = format!(
        "{}/tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh",
        crate::support::SIM_DIR
    );
    let plain = "vllm serve /m --load-format dummy --enforce-eager --max-num-seqs 64".to_owned();
    let workload = [
        "--real-engine",
        "--request-rate",
        "inf",
        "--num-prompts",
        "32",
        "--input-len",
        "512",
        "--output-len",
        "32",
        "--json",
    ];
    for (name, deployment) in [
        ("pair", vec![seed.as_str()]),
        ("server", vec!["--serve-args", plain.as_str()]),
    ] {
        let args: Vec<&str> = ["predict"]
            .into_iter()
            .chain(deployment.iter().copied())
            .chain(workload)
            .collect();
        let out = afd_sim(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result = dir.path().join(format!("{name}.json"));
        std::fs::write(&result, &out.stdout).unwrap();
        let compare: Vec<&str> = ["compare", result.to_str().unwrap()]
            .into_iter()
            .chain(deployment.iter().copied())
            .chain(["--json"])
            .collect();
        let (cases, _) = afd_sim_json(&compare, &[]);
        let metrics = cases[0]["metrics"].as_array().unwrap();
        assert_eq!(metrics.len(), 14, "{name}: every metric of the issue");
        for m in metrics {
            let error = m["error"].as_f64().unwrap();
            assert!(error.abs() < 1e-9, "{name}: {m}");
        }
    }
}

/// Without the server logs beside the run files the profile prices no first-use compile and every
/// other figure is the shipped one's: the logs price `jit_compile_ns` alone.
#[test]
fn the_server_logs_price_the_first_use_compile_alone() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut args: Vec<String> = vec!["engine-profile".into()];
    for from in committed("vllm", |name| name.ends_with(".json.xz")) {
        let to = dir
            .path()
            .join(PathBuf::from(&from).file_name().expect("a file name"));
        std::fs::copy(&from, &to).expect("the run copies");
        args.push(to.to_str().expect("a UTF-8 path").to_owned());
    }
    let (derived, _) = afd_sim_json(&args.iter().map(String::as_str).collect::<Vec<_>>(), &[]);
    let shipped: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data("engine/h200-dsv2l-vllm-engine.json"))
            .expect("the shipped profile"),
    )
    .expect("the shipped profile parses");
    let compile_ns = shipped["jit_compile_ns"]
        .as_u64()
        .expect("the shipped profile prices a first-use compile");
    // The stamped calibration servers' first uses took 0.6-1.6 s where their other steps took
    // 50-100 ms (sim/scripts/jit_first_use.py).
    assert!(
        (500_000_000..1_500_000_000).contains(&compile_ns),
        "{compile_ns}"
    );
    assert!(derived.get("jit_compile_ns").is_none(), "{derived}");
    let figures = |profile: &serde_json::Value| {
        let mut p = profile.clone();
        let map = p.as_object_mut().expect("a profile is an object");
        map.remove("sources");
        map.remove("jit_compile_ns");
        map.remove("role_division");
        p
    };
    assert_eq!(figures(&derived), figures(&shipped));
}

/// The judged FULL_DECODE_ONLY 256/2048 repeat's `e2e-pre-r4` (23.1 ms mean TPOT where its
/// steps alone give about 7.7): its server met two fused-MoE kernel specializations in that run,
/// each a Triton compile of about a second. Priced from what the server ran before it (its log
/// beside the run file), the prediction meets it within 10 %; with no compile priced it is 60 % low.
#[test]
fn a_first_use_compile_stalls_the_run_that_meets_it() {
    let run = data("vllm/h200-dsv2l-graph-256-2048-r2.json.xz");
    let tpot = |extra: &[&str]| {
        let (json, _) = afd_sim_json(&["compare", run.to_str().expect("UTF-8"), "--json"], extra);
        let case = json
            .as_array()
            .expect("an array of records")
            .iter()
            .find(|c| c["workload"] == "e2e-pre-r4")
            .expect("the record")
            .clone();
        let row = case["metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .find(|m| m["metric"] == "mean_tpot_ms")
            .expect("mean TPOT")
            .clone();
        (
            row["real"].as_f64().expect("real"),
            row["predicted"].as_f64().expect("predicted"),
        )
    };
    let (real, priced) = tpot(&[]);
    assert!(
        (priced / real - 1.0).abs() < 0.10,
        "{priced} against {real}"
    );
    let dir = tempfile::tempdir().expect("a temporary folder");
    let mut profile: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(data("engine/h200-dsv2l-vllm-engine.json"))
            .expect("the shipped profile"),
    )
    .expect("parses");
    profile
        .as_object_mut()
        .expect("an object")
        .remove("jit_compile_ns");
    let path = dir.path().join("no-jit.json");
    std::fs::write(&path, profile.to_string()).expect("writes");
    let (_, unpriced) = tpot(&["--engine", path.to_str().expect("UTF-8")]);
    assert!(unpriced < 0.4 * real, "{unpriced} against {real}");
}

/// `engine-profile --modules` puts a profiled eager server's division of its steps into the
/// profile (per step size, the median shares), and a summary that does not read is refused by name
/// with nothing written.
#[test]
fn engine_profile_reads_the_roles_division_from_module_summaries() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    // The committed runs (a profile needs every mode's tables).
    let runs = committed("vllm", |name| name.ends_with(".json.xz"));
    let step = |decodes: u32, host: f64, layers: f64, ffn: f64| {
        format!(
            r#"{{"prefill_tokens": 0, "decode_requests": {decodes}, "host_us": {host}, "decoder_layers": 27, "layers_us": {layers}, "ffn_us": {ffn}, "outside_layers_us": {}}}"#,
            host - layers
        )
    };
    let summary = dir.path().join("modules-decode-b16.json");
    let steps = [
        step(16, 1000.0, 800.0, 200.0),
        step(16, 1000.0, 600.0, 300.0),
        step(16, 2000.0, 1000.0, 400.0),
        step(64, 1000.0, 500.0, 100.0),
    ];
    std::fs::write(&summary, format!(r#"{{"steps": [{}]}}"#, steps.join(","))).expect("written");
    let summary = summary.to_str().expect("a UTF-8 path");
    let mut args: Vec<&str> = vec!["engine-profile"];
    args.extend(runs.iter().map(String::as_str));
    let (profile, _) = afd_sim_json(&args, &["--modules", summary]);
    let division = profile["role_division"].as_array().expect("a division");
    assert_eq!(division.len(), 2, "{division:?}");
    assert_eq!(division[0]["tokens"], 16);
    assert_eq!(division[0]["steps"], 3);
    assert_eq!(division[0]["outside_of_step"], 0.4);
    assert_eq!(division[0]["ffn_of_layers"], 0.4);
    assert_eq!(division[1]["ffn_of_layers"], 0.2);
    assert_eq!(division[0]["evidence"], "modules-decode-b16.json");

    let bad = dir.path().join("modules-bad.json");
    std::fs::write(&bad, r#"{"steps": [{"prefill_tokens": 0}]}"#).expect("written");
    let out_path = dir.path().join("profile.json");
    args.extend([
        "--modules",
        bad.to_str().expect("a UTF-8 path"),
        "--out",
        out_path.to_str().expect("a UTF-8 path"),
    ]);
    refused(
        &args,
        "modules-bad.json: not a module_shares.py --json summary",
    );
    assert!(!out_path.exists(), "no profile is written");
}

/// An AFD pair's note says how its roles' host issue was divided: by the measured division the
/// shipped profile carries (vLLM's profiler on a plain eager server), or by the lean costs where a
/// profile of one's own has none; and the division moves the prediction.
#[test]
fn a_pairs_note_says_how_the_roles_issue_was_divided() {
    let shipped = data("engine/h200-dsv2l-vllm-engine.json");
    let args = ["predict", "--num-prompts", "16", "--json"];
    let (measured, note) = afd_sim_json(&args, &[]);
    assert!(
        note.contains("divided as vLLM's profiler divided a plain eager step"),
        "{note}"
    );
    let mut profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&shipped).expect("the shipped profile"))
            .expect("JSON");
    assert!(
        profile["role_division"]
            .as_array()
            .is_some_and(|d| !d.is_empty()),
        "the shipped profile carries the measured division"
    );
    profile
        .as_object_mut()
        .expect("a profile is an object")
        .remove("role_division");
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("undivided.json");
    std::fs::write(&path, profile.to_string()).expect("the temporary folder takes a file");
    let (lean, note) = afd_sim_json(
        &args,
        &[
            "--real-engine",
            "--engine",
            path.to_str().expect("a UTF-8 path"),
        ],
    );
    assert!(
        note.contains(
            "as the lean per-operation costs divide it: the profile measured no division"
        ),
        "{note}"
    );
    assert_ne!(measured["mean_tpot_ms"], lean["mean_tpot_ms"]);
}
