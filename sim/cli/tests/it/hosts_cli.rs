//! `predict` on deployments across hosts and over other links (issue 15): the RFC #308 two-host L4
//! fixtures run, their A↔F link is named in the report, `--link` answers what-if questions and a
//! slower link never makes the run faster.

use crate::support::{Run, afd_sim, json};

const RECIPES: &str = "tests/fixtures/recipes";

fn two_hosts(mode: &str) -> String {
    format!("{RECIPES}/2a2f_two_hosts_l4_{mode}_dbo_dp2tp1.sh")
}

/// The RFC #308 workload: 1024 in / 32 out at saturation (everything sent at once, no client cap).
fn rfc_308(recipe: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "predict",
        recipe,
        "--gpu",
        "l4",
        "--input-len",
        "1024",
        "--output-len",
        "32",
        "--request-rate",
        "inf",
        "--max-concurrency",
        "none",
        "--num-prompts",
        "256",
        "--json",
    ];
    args.extend_from_slice(extra);
    let run = afd_sim(&args);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    json(&run)
}

fn mean_tpot(report: &serde_json::Value) -> f64 {
    report["mean_tpot_ms"].as_f64().expect("mean_tpot_ms")
}

#[test]
fn the_two_host_l4_pair_runs_eager_and_with_graphs_over_assumed_sockets() {
    for mode in ["eager", "graph"] {
        let report = rfc_308(&two_hosts(mode), &[]);
        assert_eq!(report["completed"], 256, "{mode}");
        assert_eq!(report["deployment"]["gpu"], "l4");
        let link = report["afd_link"].as_str().expect("afd_link");
        assert!(link.starts_with("tcp 12.5 GB/s"), "{link}");
        assert!(link.contains("NCCL sockets assumed"), "{link}");
    }
    let graph = rfc_308(&two_hosts("graph"), &[]);
    assert!(graph["steps"]["graph"].as_u64().expect("graph steps") > 0);
    let eager = rfc_308(&two_hosts("eager"), &[]);
    assert_eq!(eager["steps"]["graph"], 0);
}

#[test]
fn a_link_flag_names_its_source_and_a_faster_network_is_never_slower() {
    let recipe = two_hosts("graph");
    let tcp = rfc_308(&recipe, &[]);
    let hdr = rfc_308(&recipe, &["--link", "attention-ffn=ib"]);
    let ndr = rfc_308(&recipe, &["--link", "attention-ffn=ib,gbps=400,nics=2"]);
    assert_eq!(
        ndr["afd_link"],
        "ib 50.0 GB/s x 0.90, 5.0 us, 2 NIC(s) per host (datasheet with --link gbps, nics)"
    );
    assert_eq!(
        hdr["afd_link"],
        "ib 25.0 GB/s x 0.90, 5.0 us, 1 NIC(s) per host (datasheet)"
    );
    assert!(
        mean_tpot(&ndr) <= mean_tpot(&hdr),
        "{} > {}",
        mean_tpot(&ndr),
        mean_tpot(&hdr)
    );
    assert!(
        mean_tpot(&hdr) <= mean_tpot(&tcp),
        "{} > {}",
        mean_tpot(&hdr),
        mean_tpot(&tcp)
    );
    // A network far slower than the GPUs' work shows up in the step time.
    let slow = rfc_308(
        &recipe,
        &["--link", "attention-ffn=tcp,gbps=1,latency-us=500"],
    );
    assert!(
        mean_tpot(&slow) > mean_tpot(&tcp),
        "{} <= {}",
        mean_tpot(&slow),
        mean_tpot(&tcp)
    );
}

#[test]
fn one_host_keeps_the_gpus_own_link_and_reports_none() {
    let run = afd_sim(&["predict", "--json", "--num-prompts", "8"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(json(&run).get("afd_link").is_none());
    let what_if = afd_sim(&[
        "predict",
        "--num-prompts",
        "8",
        "--link",
        "attention-ffn=pcie-gen5",
    ]);
    assert_eq!(what_if.code, 0, "{}", what_if.stderr);
    assert!(
        what_if
            .stdout
            .contains("A-F link:                                pcie-gen5 64.0 GB/s"),
        "{}",
        what_if.stdout
    );
}

#[track_caller]
fn refused(args: &[&str], needle: &str) {
    let run = afd_sim(args);
    assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
    assert!(
        run.stderr.contains(needle),
        "{args:?}: {:?} lacks {needle:?}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn bad_link_flags_exit_2_naming_what_is_wrong() {
    refused(
        &["predict", "--link", "ib"],
        "--link expects attention-ffn=KIND",
    );
    refused(
        &["predict", "--link", "ffn-ffn=ib"],
        "the one path it can set is attention-ffn",
    );
    refused(
        &["predict", "--link", "attention-ffn=infiniband"],
        "unknown link kind \"infiniband\"",
    );
    refused(
        &["predict", "--link", "attention-ffn=ib,nics=zero"],
        "link nics=zero is not a whole number of at least 1",
    );
    refused(
        &[
            "predict",
            "--serve-args",
            "vllm serve /m --tensor-parallel-size 2 --enable-expert-parallel",
            "--link",
            "attention-ffn=ib",
        ],
        "needs an AFD deployment",
    );
}

/// The PR #274 workload: 1024 in / 128 out at 5 req/s, concurrency 32, on its 8 RTX PRO 6000
/// Blackwell GPUs over PCIe, serving `model` (`qwen3.5-122b-a10b` is the PR's model).
fn pr_274_with(recipe: &str, gpu: &str, model: &str) -> Run {
    let path = format!("{RECIPES}/{recipe}");
    afd_sim(&[
        "predict",
        &path,
        "--gpu",
        gpu,
        "--model",
        model,
        "--input-len",
        "1024",
        "--output-len",
        "128",
        "--request-rate",
        "5",
        "--max-concurrency",
        "32",
        "--num-prompts",
        "256",
        "--json",
    ])
}

fn pr_274(recipe: &str) -> serde_json::Value {
    let path = format!("{RECIPES}/{recipe}");
    let check = afd_sim(&[
        "check",
        &path,
        "--gpu",
        "rtx-pro-6000",
        "--model",
        "qwen3.5-122b-a10b",
    ]);
    assert_eq!(check.code, 0, "{}", check.stdout);
    let run = pr_274_with(recipe, "rtx-pro-6000", "qwen3.5-122b-a10b");
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)
}

#[test]
fn the_pcie_4a4f_pair_and_its_dp8_baseline_run_qwen3_5_122b_on_eight_rtx_pro_6000s() {
    let afd = pr_274("4a4f_pcie_eager_dp4tp1.sh");
    let plain = pr_274("plain_pcie_eager_dp8tp1_ep8.sh");
    for (report, attention, ffn) in [(&afd, 4, 4), (&plain, 8, 8)] {
        assert_eq!(report["completed"], 256);
        assert_eq!(report["deployment"]["gpu"], "rtx-pro-6000");
        assert_eq!(report["model"], "qwen3.5-122b-a10b");
        assert_eq!(report["deployment"]["gpus"], 8);
        assert_eq!(report["deployment"]["attention_ranks"], attention);
        assert_eq!(report["deployment"]["ffn_ranks"], ffn);
        assert_eq!(report["steps"]["graph"], 0, "eager");
        // One host, PCIe GPUs: the hand-offs take the GPUs' own PCIe link.
        assert!(report.get("afd_link").is_none());
        // vLLM's hybrid layout: attention blocks grown to hold a Gated DeltaNet state a page.
        assert_eq!(report["deployment"]["block_size"], 1072);
        assert!(report["mean_tpot_ms"].as_f64().unwrap() > 0.0);
    }
}

/// BF16 Qwen3.5-122B-A10B needs the 96 GB cards: on 48 GB L20s an FFN rank of 4A4F cannot hold a
/// quarter of the routed experts (about 59 GB), and `check` says so.
#[test]
fn the_122b_pair_does_not_fit_on_l20s() {
    let run = pr_274_with("4a4f_pcie_eager_dp4tp1.sh", "l20", "qwen3.5-122b-a10b");
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let path = format!("{RECIPES}/4a4f_pcie_eager_dp4tp1.sh");
    let check = afd_sim(&[
        "check",
        &path,
        "--gpu",
        "l20",
        "--model",
        "qwen3.5-122b-a10b",
    ]);
    assert_eq!(check.code, 2);
    assert!(
        check.stdout.contains("error[memory.role-fits] ffn"),
        "{}",
        check.stdout
    );
}

/// The same shapes with other Qwen MoE models: Qwen3-30B-A3B (no linear attention) and
/// Qwen3-Next-80B-A3B (the hybrid layout of Qwen3.5), both smaller, run faster per token.
#[test]
fn the_pcie_shapes_run_other_qwen_moe_models() {
    let big = pr_274("4a4f_pcie_eager_dp4tp1.sh");
    for model in ["qwen3-30b-a3b", "qwen3-next-80b-a3b"] {
        for recipe in [
            "4a4f_pcie_eager_dp4tp1.sh",
            "plain_pcie_eager_dp8tp1_ep8.sh",
        ] {
            let run = pr_274_with(recipe, "rtx-pro-6000", model);
            assert_eq!(run.code, 0, "{model} {recipe}: {}", run.stderr);
            let report = json(&run);
            assert_eq!(report["completed"], 256);
            if recipe.starts_with("4a4f") {
                assert!(
                    mean_tpot(&report) < mean_tpot(&big),
                    "{model}: {} vs {}",
                    mean_tpot(&report),
                    mean_tpot(&big)
                );
            }
        }
    }
}

#[test]
fn a_pcie_pair_is_slower_over_gen4_than_over_gen5() {
    let path = format!("{RECIPES}/4a4f_pcie_eager_dp4tp1.sh");
    let tpot = |gpu: &str| {
        let run = afd_sim(&[
            "predict",
            &path,
            "--gpu",
            gpu,
            "--model",
            "qwen3-30b-a3b",
            "--num-prompts",
            "64",
            "--json",
        ]);
        assert_eq!(run.code, 0, "{gpu}: {}", run.stderr);
        mean_tpot(&json(&run))
    };
    // Same GPU figures, only the hand-off link differs: H100 PCIe with its Gen5 link vs Gen4.
    let gen5 = tpot("h100-pcie");
    let run = afd_sim(&[
        "predict",
        &path,
        "--gpu",
        "h100-pcie",
        "--model",
        "qwen3-30b-a3b",
        "--num-prompts",
        "64",
        "--link",
        "attention-ffn=pcie-gen4",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let gen4 = mean_tpot(&json(&run));
    assert!(gen4 >= gen5, "gen4 {gen4} < gen5 {gen5}");
}

/// A 4-GPU sweep on nodes of 2 GPUs: every AFD candidate puts its roles on different nodes.
fn sweep_rows(
    dir: &std::path::Path,
    name: &str,
    extra: &[&str],
) -> Vec<afd_traces::sweep::SweepRow> {
    let out = dir.join(name);
    let out = out.to_str().expect("temporary paths are UTF-8");
    let mut args = vec![
        "sweep",
        "--gpus",
        "4",
        "--gpus-per-node",
        "2",
        "--dimensions",
        "dbo=off;capture=eager;max-num-seqs=16;max-num-batched-tokens=64",
        "--num-prompts",
        "8",
        "--input-len",
        "64",
        "--output-len",
        "4",
        "--request-rate",
        "50",
        "--out",
        out,
    ];
    args.extend_from_slice(extra);
    let run = afd_sim(&args);
    assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    let text = std::fs::read_to_string(out).expect("the sweep wrote its rows");
    afd_traces::sweep::read_sweep_csv(&text, name).expect("rows")
}

#[test]
fn the_planner_prices_cross_node_pairs_over_the_network_given() {
    let dir = tempfile::tempdir().unwrap();
    let own = sweep_rows(dir.path(), "own.csv", &[]);
    let slow = sweep_rows(
        dir.path(),
        "slow.csv",
        &["--link", "attention-ffn=tcp,gbps=1,latency-us=500"],
    );
    assert_eq!(own.len(), slow.len());
    assert_ne!(
        own[0].sweep, slow[0].sweep,
        "the link is part of the fingerprint"
    );
    let mut crossing = 0;
    for (a, b) in own.iter().zip(&slow) {
        let (ta, tb) = (a.mean_tpot_ms.expect("tpot"), b.mean_tpot_ms.expect("tpot"));
        if a.kind == "afd" && a.cross_node {
            crossing += 1;
            assert!(
                tb > ta,
                "candidate {}: {tb} <= {ta} over a 1 Gb/s link",
                a.candidate
            );
        } else {
            assert_eq!(
                ta, tb,
                "candidate {} does not hand off between nodes",
                a.candidate
            );
        }
    }
    assert!(crossing >= 2, "only {crossing} cross-node AFD candidates");
    let bad = afd_sim(&["sweep", "--gpus", "4", "--link", "attention-ffn=ib,gbps=-3"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(
        bad.stderr.contains("link gbps=-3 is not a positive number"),
        "{}",
        bad.stderr
    );
}

#[test]
fn two_hosts_can_be_written_as_command_lines() {
    let role = |host: &str, role: &str, afd_host: &str| {
        format!(
            r#"VLLM_HOST_IP={host} CUDA_VISIBLE_DEVICES=0 VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --port 8000 --additional-config '{{"afd": {{"role": "{role}", "host": "{afd_host}"}}}}' --enable-expert-parallel"#
        )
    };
    let attention = role("10.1.0.1", "attention", "10.1.0.2");
    let ffn = role("10.1.0.2", "ffn", "10.1.0.2");
    let run = afd_sim(&[
        "predict",
        "--attention-args",
        &attention,
        "--ffn-args",
        &ffn,
        "--gpu",
        "l20",
        "--num-prompts",
        "8",
        "--link",
        "attention-ffn=roce,gbps=100",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        json(&run)["afd_link"],
        "roce 12.5 GB/s x 0.85, 8.0 us, 1 NIC(s) per host (datasheet with --link gbps)"
    );
    // The same GPU 0 on one host is an overlap.
    let one_host = role("10.1.0.1", "ffn", "10.1.0.2");
    let run = afd_sim(&[
        "check",
        "--attention-args",
        &attention,
        "--ffn-args",
        &one_host,
    ]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    assert!(
        run.stdout.contains("error[cross.gpu-overlap]"),
        "{}",
        run.stdout
    );
}

/// The Attention role of `4a2f_attention_two_hosts_dp4tp1.sh` spread over two hosts (2 ranks on
/// each), against the same 4A2F pair with the Attention role whole on one host (4 ranks sharing
/// its NICs): both run, and fewer ranks per NIC never make a step slower.
#[test]
fn a_role_spread_over_hosts_runs_and_shares_each_host_s_nics_among_fewer_ranks() {
    let spread = format!("{RECIPES}/4a2f_attention_two_hosts_dp4tp1.sh");
    let text = std::fs::read_to_string(std::path::Path::new(crate::support::SIM_DIR).join(&spread))
        .expect("the fixture");
    // The one-host variant: the primary starts all four DP ranks on GPUs 0-3, and the second
    // host's command (from its VLLM_HOST_IP to the next blank line) goes.
    let start = text
        .find("VLLM_HOST_IP=10.0.0.3")
        .expect("the second host's command");
    let end = start + text[start..].find("\n\n").expect("a blank line after it") + 2;
    let whole = format!("{}{}", &text[..start], &text[end..])
        .replace(
            "VLLM_HOST_IP=10.0.0.1 CUDA_VISIBLE_DEVICES=0,1",
            "VLLM_HOST_IP=10.0.0.1 CUDA_VISIBLE_DEVICES=0,1,2,3",
        )
        .replacen("    --data-parallel-size-local 2 \\\n", "", 1);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let one_host = dir.path().join("4a2f_attention_one_host.sh");
    std::fs::write(&one_host, whole).expect("the variant is written");
    let link = ["--link", "attention-ffn=ib,gbps=100,nics=1"];
    // Deployment flags reach every host's command of the spread role (the recipe read as words).
    let relimited = rfc_308(&spread, &["--max-num-seqs", "32"]);
    assert_eq!(relimited["completed"], 256);
    assert_eq!(relimited["deployment"]["max_num_seqs"], 32);
    let spread = rfc_308(&spread, &link);
    let whole = rfc_308(one_host.to_str().expect("UTF-8"), &link);
    for report in [&spread, &whole] {
        assert_eq!(report["completed"], 256);
        let afd_link = report["afd_link"].as_str().expect("afd_link");
        assert!(afd_link.starts_with("ib "), "{afd_link}");
    }
    assert!(
        mean_tpot(&spread) <= mean_tpot(&whole),
        "2 ranks per NIC {} ms, 4 ranks per NIC {} ms",
        mean_tpot(&spread),
        mean_tpot(&whole)
    );
    // `check --json` lists each host's share of the spread role.
    let run = afd_sim(&[
        "check",
        &format!("{RECIPES}/4a2f_attention_two_hosts_dp4tp1.sh"),
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let hosts = &json(&run)["deployment"]["attention"]["hosts"];
    assert_eq!(hosts[1]["host"], "10.0.0.3");
    assert_eq!(hosts[1]["data_parallel_start_rank"], 2);
    assert_eq!(hosts[1]["headless"], true);
    assert!(json(&run)["deployment"]["ffn"].get("hosts").is_none());
}
