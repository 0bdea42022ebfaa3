//! `afd-sim warm-up`: the lone prompts that leave a fresh vLLM server nothing to compile on first use.

use crate::support::{afd_sim, json};

const FDO: &str = r#"--compilation-config '{"cudagraph_mode": "FULL_DECODE_ONLY"}'"#;

fn serve(limits: &str, mode: &str) -> String {
    format!("vllm serve /root/model/dsv2l --load-format dummy {limits} {mode}")
}

fn prompts(args: &[&str]) -> Vec<u64> {
    let run = afd_sim(args);
    assert_eq!(run.code, 0, "{}", run.stderr);
    json(&run)["prompts"]
        .as_array()
        .expect("prompts")
        .iter()
        .map(|p| p.as_u64().expect("a length"))
        .collect()
}

/// The w4 plans' `warm-jit-N` warm-ups are the command's list for their servers (the plan generator
/// copies it, gpu-probes/scripts/make-engine-plans.py `JIT_PROMPTS`).
#[test]
fn the_w4_plans_warm_up_with_the_commands_list() {
    let limits = "--max-num-seqs 128 --max-num-batched-tokens 4096";
    for (label, mode) in [
        ("graph-128-4096-w4", FDO),
        ("eager-128-4096-w4", "--enforce-eager"),
    ] {
        let path = format!(
            "{}/../gpu-probes/plans/engine-dsv2l-{label}.json",
            crate::support::SIM_DIR
        );
        let plan: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("the plan")).expect("JSON");
        let planned: Vec<u64> = plan["warmup"]
            .as_array()
            .expect("warm-ups")
            .iter()
            .filter(|w| {
                w["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("warm-jit-"))
            })
            .map(|w| w["input_len"].as_u64().expect("a length"))
            .collect();
        let line = serve(limits, mode);
        assert_eq!(
            planned,
            prompts(&["warm-up", "--serve-args", &line, "--json"]),
            "{label}"
        );
    }
}

/// An eager server captures nothing, so it needs the aligned token counts too; vLLM's default
/// FULL_AND_PIECEWISE server only one count past its largest piecewise size.
#[test]
fn the_list_follows_the_graph_mode() {
    let limits = "--max-num-seqs 256 --max-num-batched-tokens 2048";
    let graph = prompts(&["warm-up", "--serve-args", &serve(limits, FDO), "--json"]);
    assert_eq!(graph, [11, 33, 65, 97, 129, 513]);
    let eager = prompts(&[
        "warm-up",
        "--serve-args",
        &serve(limits, "--enforce-eager"),
        "--json",
    ]);
    assert!(eager.len() > graph.len() && graph.iter().all(|p| eager.contains(p)));
    assert_eq!(prompts(&["warm-up", "--json"]), [513]);
    let text = afd_sim(&["warm-up", "--serve-args", &serve(limits, FDO)]);
    assert_eq!(text.code, 0);
    assert!(
        text.stdout.contains("11 33 65 97 129 513"),
        "{}",
        text.stdout
    );
}

#[test]
fn bad_serve_words_and_afd_roles_are_refused() {
    let bad = afd_sim(&[
        "warm-up",
        "--serve-args",
        "vllm serve m --max-num-seqs zero",
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--max-num-seqs"), "{}", bad.stderr);
    assert!(bad.stdout.is_empty());
    let role = afd_sim(&[
        "warm-up",
        "--serve-args",
        r#"vllm serve m --afd-config '{"afd_role": "attention", "num_afd_stages": 2}'"#,
    ]);
    assert_eq!(role.code, 2, "{}", role.stderr);
    let dense = afd_sim(&["warm-up", "--model", "no-such-model"]);
    assert_eq!(dense.code, 2);
    assert!(dense.stderr.contains("no-such-model"), "{}", dense.stderr);
}
