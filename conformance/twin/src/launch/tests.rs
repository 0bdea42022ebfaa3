//! Reading and checking one role, and judging a pair, through afd-sim's deployment model.

use std::collections::BTreeMap;

use super::*;

fn words(role: &str, attention: u32, ffn: u32, tp: u32) -> Vec<String> {
    let afd = format!(
        r#"{{"afd": {{"role": "{role}", "host": "127.0.0.1", "port": 6269, "num_attention_ranks": {attention}, "num_ffn_ranks": {ffn}}}}}"#
    );
    [
        "/m",
        "--tensor-parallel-size",
        &tp.to_string(),
        "--enable-expert-parallel",
        "--additional-config",
        &afd,
        "--port",
        "18305",
        "--seed",
        "7",
        "--enforce-eager",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect()
}

#[test]
fn the_seed_shape_launches_with_its_facts() {
    let role =
        LaunchedRole::new(&words("ffn", 2, 2, 2), BTreeMap::new(), RuleSet::Latest).expect("clean");
    assert_eq!(role.role, Role::Ffn);
    assert_eq!(
        (role.topology.attention_ranks(), role.topology.ffn_ranks()),
        (2, 2)
    );
    assert_eq!(role.model_name(), "/m");
    assert_eq!(role.seed, 7);
    assert_eq!(role.afd_port, 6269);
}

#[test]
fn a_role_rule_violation_is_refused_naming_the_rule() {
    let err = LaunchedRole::new(
        &words("attention", 2, 2, 1),
        BTreeMap::new(),
        RuleSet::Latest,
    )
    .expect_err("2 ranks declared, 1 run");
    let text = err.to_string();
    assert!(text.contains("error[afd.role-ranks]"), "{text}");
}

#[test]
fn v026_refuses_model_runner_v2_from_the_environment() {
    let env = BTreeMap::from([("VLLM_USE_V2_MODEL_RUNNER".to_owned(), "1".to_owned())]);
    let err = LaunchedRole::new(&words("attention", 2, 2, 2), env, RuleSet::V026)
        .expect_err("MRV2 at v0.26");
    assert!(err.to_string().contains("v026.model-runner-v2"), "{err}");
}

#[test]
fn judging_a_pair_finds_cross_role_errors() {
    let env = BTreeMap::new();
    let (a, f) = (words("attention", 2, 2, 2), words("ffn", 2, 2, 2));
    let (errors, warnings) = judge_pair((&a, &env), (&f, &env), RuleSet::Latest);
    assert!(errors.is_empty(), "{errors:?}");
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("cross.shared-http-port")),
        "{warnings:?}"
    );
    let overlap_a = BTreeMap::from([("CUDA_VISIBLE_DEVICES".to_owned(), "0,1".to_owned())]);
    let (errors, _) = judge_pair((&a, &overlap_a), (&f, &overlap_a), RuleSet::Latest);
    assert!(
        errors.iter().any(|e| e.contains("cross.gpu-overlap")),
        "{errors:?}"
    );
}

#[test]
fn only_relevant_environment_is_kept() {
    let env = relevant_env([
        ("CUDA_VISIBLE_DEVICES".to_owned(), "0".to_owned()),
        ("VLLM_PLUGINS".to_owned(), "afd".to_owned()),
        ("HOME".to_owned(), "/root".to_owned()),
        ("SECRET_TOKEN".to_owned(), "x".to_owned()),
    ]);
    assert_eq!(
        env.keys().collect::<Vec<_>>(),
        vec!["CUDA_VISIBLE_DEVICES", "VLLM_PLUGINS"]
    );
}
