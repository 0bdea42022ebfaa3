//! `afd-sim check` on every recipe under `tests/fixtures/recipes/`: the good recipes under both
//! rule sets, each broken variant (named after the rule it breaks), each warning variant, and the
//! exact report of the seed recipe.

use std::collections::BTreeSet;
use std::path::Path;

use expect_test::expect;

use afd_sim::deployment::{Severity, rules};

use crate::support::{afd_sim, json};

const RECIPES: &str = "tests/fixtures/recipes";

/// Good recipes: (file, errors under latest, errors under v0.26). An empty list means exit 0. The
/// latest plugin needs model runner V2 and v0.26 needs V1 (afd-spec §1.6, §1.9), so a recipe
/// passes under the rule set whose runner it exports.
const GOOD: &[(&str, &[&str], &[&str])] = &[
    ("2a2f_graph_dbo_dp1tp2.sh", &[], &["v026.model-runner-v2"]),
    ("2a2f_graph_dbo_dp2tp1.sh", &[], &["v026.model-runner-v2"]),
    ("2a2f_eager_dbo_dp1tp2.sh", &["mrv2.model-runner-off"], &[]),
    ("2a2f_eager_dbo_dp2tp1.sh", &["mrv2.model-runner-off"], &[]),
    ("4a4f_graph_dbo_dp2tp2.sh", &["mrv2.model-runner-off"], &[]),
    (
        "4a2f_eager_dbo_dp4_dp2.sh",
        &["mrv2.model-runner-off"],
        &["v026.ffn-dp-token-vector"],
    ),
    (
        "3a2f_eager_dp3_tp2.sh",
        &["mrv2.model-runner-off"],
        &["v026.divisible-ranks"],
    ),
    (
        "2a2f_two_hosts_l4_graph_dbo_dp2tp1.sh",
        &[],
        &["v026.model-runner-v2"],
    ),
    (
        "2a2f_two_hosts_l4_eager_dbo_dp2tp1.sh",
        &[],
        &["v026.model-runner-v2"],
    ),
    ("4a4f_pcie_eager_dp4tp1.sh", &[], &["v026.model-runner-v2"]),
    (
        "4a2f_attention_two_hosts_dp4tp1.sh",
        &[],
        &["v026.model-runner-v2", "v026.ffn-dp-token-vector"],
    ),
    ("plain_pcie_eager_dp8tp1_ep8.sh", &[], &[]),
    ("1a1f_eager_plain_vllm.sh", &["mrv2.model-runner-off"], &[]),
    ("plain_vllm_tp2.sh", &[], &[]),
];

/// Broken variants whose one change also trips another rule, and which.
const ALSO: &[(&str, &[&str])] = &[
    (
        "afd.attention-ranks-positive",
        // Rule 5 (A >= F) runs before rule 9 in the plugin; 0 < F trips it too.
        &["afd.attention-ge-ffn"],
    ),
    // EPLB and the gate flag are checked on the V1 runner (V2 rejects both by its own rules),
    // which the latest plugin refuses.
    ("afd.attention-eplb", &["mrv2.model-runner-off"]),
    ("cross.protocol-match", &["mrv2.model-runner-off"]),
];

/// Broken variants judged for another model than `check`'s default, and which (named in each
/// fixture's header).
const MODEL_FOR: &[(&str, &str)] = &[("memory.state-blocks", "qwen3.5-122b-a10b")];

/// `check`'s arguments for the broken variant of `rule` at `path`, as JSON.
fn check_broken<'a>(rule: &str, path: &'a str, rules: &'a str) -> Vec<&'a str> {
    let mut args = vec!["check", path, "--rules", rules];
    if let Some((_, model)) = MODEL_FOR.iter().find(|(fixture, _)| *fixture == rule) {
        args.extend(["--model", model]);
    }
    args
}

fn rule_set_for(rule: &str) -> &'static str {
    if rule.starts_with("v026.") {
        "v0.26"
    } else {
        "latest"
    }
}

/// Rule ids of the findings of one severity in a `--json` report.
fn ids(report: &serde_json::Value, severity: &str) -> BTreeSet<String> {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["severity"] == severity)
        .map(|f| f["rule"].as_str().expect("rule id").to_owned())
        .collect()
}

fn fixture_names(folder: &str) -> Vec<String> {
    let dir = Path::new(crate::support::SIM_DIR)
        .join(RECIPES)
        .join(folder);
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("fixture folder")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".sh"))
        .collect();
    names.sort();
    names
}

#[test]
fn good_recipes_pass_or_fail_as_their_rule_set_says() {
    for (file, latest, v026) in GOOD {
        for (rules, expected) in [("latest", latest), ("v0.26", v026)] {
            let path = format!("{RECIPES}/{file}");
            let run = afd_sim(&["check", &path, "--rules", rules, "--json"]);
            let report = json(&run);
            let errors = ids(&report, "error");
            let want: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(errors, want, "{file} under {rules}: {}", run.stdout);
            assert_eq!(
                run.code,
                if want.is_empty() { 0 } else { 2 },
                "{file} {rules}"
            );
            assert_eq!(report["ok"], want.is_empty());
        }
    }
}

#[test]
fn every_broken_variant_exits_2_naming_its_rule_and_flag() {
    let names = fixture_names("broken");
    assert!(names.len() >= 20, "only {} broken fixtures", names.len());
    for name in &names {
        let rule = name.trim_end_matches(".sh");
        let path = format!("{RECIPES}/broken/{name}");
        let rules = rule_set_for(rule);
        let mut args = check_broken(rule, &path, rules);
        args.push("--json");
        let run = afd_sim(&args);
        assert_eq!(run.code, 2, "{name}: {}", run.stdout);
        let report = json(&run);
        let errors = ids(&report, "error");
        let mut allowed: BTreeSet<String> = BTreeSet::from([rule.to_owned()]);
        for (fixture, extra) in ALSO {
            if *fixture == rule {
                allowed.extend(extra.iter().map(|s| (*s).to_owned()));
            }
        }
        assert!(
            errors.contains(rule),
            "{name} does not report {rule}: {errors:?}"
        );
        assert!(
            errors.is_subset(&allowed),
            "{name} reports more than {rule}: {errors:?}"
        );
        for finding in report["findings"].as_array().unwrap() {
            if finding["rule"] == rule {
                assert!(
                    finding["subject"].is_string(),
                    "{name}: no flag or key named"
                );
                assert!(finding["role"].is_string(), "{name}: no role named");
                assert!(finding["location"]["line"].is_u64(), "{name}: not located");
            }
        }
        // The text report names the rule and its flag or key on the same line.
        let text = afd_sim(&check_broken(rule, &path, rules));
        assert_eq!(text.code, 2);
        assert!(
            text.stdout
                .lines()
                .any(|l| l.contains(&format!("error[{rule}]"))),
            "{name}: {}",
            text.stdout
        );
    }
}

#[test]
fn every_warning_variant_exits_0_with_its_warning() {
    for name in fixture_names("warnings") {
        let rule = name.trim_end_matches(".sh");
        let run = afd_sim(&["check", &format!("{RECIPES}/warnings/{name}"), "--json"]);
        assert_eq!(run.code, 0, "{name}: {}", run.stdout);
        let report = json(&run);
        assert!(
            ids(&report, "warning").contains(rule),
            "{name}: {}",
            run.stdout
        );
        assert!(ids(&report, "error").is_empty());
    }
}

#[test]
fn every_error_and_warning_rule_has_a_fixture() {
    let broken: BTreeSet<String> = fixture_names("broken")
        .into_iter()
        .map(|n| n.trim_end_matches(".sh").to_owned())
        .collect();
    let warnings: BTreeSet<String> = fixture_names("warnings")
        .into_iter()
        .map(|n| n.trim_end_matches(".sh").to_owned())
        .collect();
    for info in rules() {
        match info.severity {
            Severity::Error => assert!(
                broken.contains(info.id),
                "no broken fixture for {}",
                info.id
            ),
            Severity::Warning => {
                assert!(
                    warnings.contains(info.id),
                    "no warning fixture for {}",
                    info.id
                );
            }
            Severity::Note => {}
        }
    }
}

#[test]
fn the_seed_recipe_passes_with_the_shared_port_warning() {
    let run = afd_sim(&["check", "tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh"]);
    assert_eq!(run.code, 0);
    expect![[r#"
        tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh: 2A2F deployment under rule set latest
          attention  DP 1 x TP 2 = 2 ranks, GPUs 0,1, FULL_DECODE_ONLY [64], DBO 2/12, max-num-seqs 64, max-num-batched-tokens 64, HTTP 127.0.0.1:18305
          ffn        DP 1 x TP 2 = 2 ranks, GPUs 2,3, FULL_DECODE_ONLY [64], DBO 2/12, max-num-seqs 64, max-num-batched-tokens 64, HTTP 127.0.0.1:18305

        tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh:24:5: warning[mrv2.dbo-attention-dp] attention --enable-dbo: DBO with Attention DP 1 under model runner V2: the 4c98691 validator raises 'AFD ModelRunnerV2 DBO/ubatching requires Attention DP > 1'; the seed recipe's plugin accepts it
        tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh:59:12: warning[cross.shared-http-port] ffn --port: both roles serve HTTP on 127.0.0.1:18305; with SO_REUSEPORT both binds succeed and client connections may reach the FFN server, which never answers (afd-spec §6.4); send traffic to the Attention server only
        tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh:33:5: note[note.unknown-flag] attention --trust-remote-code: kept but not interpreted by this model
        tests/fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh:60:5: note[note.unknown-flag] ffn --trust-remote-code: kept but not interpreted by this model
        ok: 0 errors, 2 warnings, 2 notes
    "#]]
    .assert_eq(&run.stdout);
}

#[test]
fn the_same_gpu_indices_are_legal_on_two_hosts_and_overlap_on_one() {
    let path = format!("{RECIPES}/2a2f_two_hosts_l4_graph_dbo_dp2tp1.sh");
    let two_hosts = json(&afd_sim(&["check", &path, "--json"]));
    assert_eq!(ids(&two_hosts, "error"), BTreeSet::new());
    let human = afd_sim(&["check", &path]).stdout;
    assert!(human.contains("GPUs 0,1 on host 10.0.0.1"), "{human}");
    assert!(human.contains("GPUs 0,1 on host 10.0.0.2"), "{human}");
    let text =
        std::fs::read_to_string(Path::new(crate::support::SIM_DIR).join(&path)).expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    // The same commands on one host: both roles on GPUs 0,1.
    let one_host = dir.path().join("one_host.sh");
    std::fs::write(
        &one_host,
        text.replace("VLLM_HOST_IP=10.0.0.2 ", "VLLM_HOST_IP=10.0.0.1 "),
    )
    .expect("write");
    let run = afd_sim(&["check", one_host.to_str().expect("utf-8"), "--json"]);
    assert_eq!(run.code, 2, "{}", run.stdout);
    let errors = ids(&json(&run), "error");
    assert!(errors.contains("cross.gpu-overlap"), "{errors:?}");
    // Still on one host, the AFD host 10.0.0.2 is no longer the FFN's: not judged (no second host).
    assert!(!errors.contains("cross.afd-host-on-ffn-host"), "{errors:?}");
}
