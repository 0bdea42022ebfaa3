//! Rules on small command-line pairs: the branches the recipe fixtures do not reach (host overlap,
//! connector lists per rule set, model runner V2 combinations, port arithmetic), and the catalogue.

use expect_test::{Expect, expect};

use crate::deployment::rules::{rules, rules_of};
use crate::deployment::{Deployment, Located, RecipeOptions, RoleConfig, Severity};
use crate::topology::RuleSet;

const ATTENTION: &str = r#"CUDA_VISIBLE_DEVICES=0 vllm serve /m --enforce-eager --port 8000 --additional-config '{"afd": {"role": "attention", "port": 6269}}'"#;
const FFN: &str = r#"CUDA_VISIBLE_DEVICES=1 vllm serve /m --enforce-eager --port 8001 --additional-config '{"afd": {"role": "ffn", "port": 6269}}'"#;

/// The pair of two command lines. A command that leaves `VLLM_USE_V2_MODEL_RUNNER` unset gets the
/// runner its rule set's plugin needs (V2 with expert parallelism under latest, V1 under v0.26),
/// so the tests below see only the findings they are about.
fn deployment(attention: &str, ffn: &str, rules: RuleSet) -> Deployment {
    let options = RecipeOptions::default();
    let runner = |line: &str| {
        let mut config = RoleConfig::from_command_line(line, &options).unwrap();
        if !config.sets_model_runner() {
            let value = match rules {
                RuleSet::Latest => "1",
                RuleSet::V026 => "0",
            };
            config.env.insert(
                "VLLM_USE_V2_MODEL_RUNNER".to_owned(),
                Located::new(value.to_owned(), config.location),
            );
            if rules == RuleSet::Latest && config.enable_expert_parallel.is_none() {
                config.enable_expert_parallel = Some(Located::new(true, config.location));
            }
        }
        config
    };
    Deployment::new(runner(attention), runner(ffn), rules)
}

fn render(deployment: &Deployment) -> String {
    let report = deployment.check();
    let mut out = String::new();
    for f in report.findings() {
        if f.severity == Severity::Note {
            continue;
        }
        let role = f.role.map_or("-", |r| r.as_str());
        let subject = f
            .subject
            .as_ref()
            .map_or_else(String::new, ToString::to_string);
        let at = f.location.map_or_else(|| "-".to_owned(), |l| l.to_string());
        out.push_str(&format!(
            "{} {} {role} {subject} @{at}: {}\n",
            f.severity.as_str(),
            f.rule.id(),
            f.message
        ));
    }
    out
}

#[track_caller]
fn check(attention: &str, ffn: &str, rules: RuleSet, expect: Expect) {
    expect.assert_eq(&render(&deployment(attention, ffn, rules)));
}

/// `base` with `from` replaced by `to` (which must occur).
fn with(base: &str, from: &str, to: &str) -> String {
    assert!(base.contains(from), "{from}");
    base.replacen(from, to, 1)
}

#[test]
fn the_minimal_eager_pair_is_clean_under_both_rule_sets() {
    for rules in [RuleSet::V026, RuleSet::Latest] {
        let report = deployment(ATTENTION, FFN, rules).check();
        assert!(
            report.is_clean(),
            "{}",
            render(&deployment(ATTENTION, FFN, rules))
        );
        assert_eq!(report.count(Severity::Warning), 0);
    }
}

#[test]
fn shared_http_ports_warn_only_when_the_hosts_overlap() {
    let same_port = with(FFN, "--port 8001", "--port 8000");
    let cases = [
        ("", "", true),
        ("--host 0.0.0.0", "--host 127.0.0.1", true),
        ("--host localhost", "--host 127.0.0.1", true),
        ("--host 10.0.0.1", "--host 127.0.0.1", false),
        ("--host ::", "--host 10.0.0.2", true),
    ];
    for (host_a, host_f, warns) in cases {
        let attention = with(ATTENTION, "--port 8000", &format!("--port 8000 {host_a}"));
        let ffn = with(&same_port, "--port 8000", &format!("--port 8000 {host_f}"));
        let report = deployment(&attention, &ffn, RuleSet::Latest).check();
        let warned = report
            .findings()
            .iter()
            .any(|f| f.rule.id() == "cross.shared-http-port");
        assert_eq!(warned, warns, "{host_a} / {host_f}");
    }
}

#[test]
fn http_ports_on_derived_subgroup_ports_collide_only_at_v026() {
    let ffn = with(FFN, "--port 8001", "--port 6270");
    check(
        ATTENTION,
        &ffn,
        RuleSet::V026,
        expect![[r#"
            error cross.http-port-vs-rendezvous ffn --port @1:61: HTTP port 6270 of the FFN server is subgroup 0's store port (port+1) on the AFD host; the TCP store and the HTTP server cannot both listen on it
        "#]],
    );
    check(ATTENTION, &ffn, RuleSet::Latest, expect![""]);
}

#[test]
fn zero_ffn_ranks_crash_the_v026_divisibility_check_first() {
    let attention = with(
        ATTENTION,
        r#""port": 6269"#,
        r#""port": 6269, "num_ffn_ranks": 0"#,
    );
    let ffn = with(
        FFN,
        r#""port": 6269"#,
        r#""port": 6269, "num_ffn_ranks": 0"#,
    );
    check(
        &attention,
        &ffn,
        RuleSet::V026,
        expect![[r#"
            error afd.ffn-ranks-positive ffn --additional-config afd.num_ffn_ranks @1:125: num_ffn_ranks must be positive, got 0 (at v0.26 the divisibility check divides by it first and raises ZeroDivisionError)
            error afd.ffn-ranks-positive attention --additional-config afd.num_ffn_ranks @1:131: num_ffn_ranks must be positive, got 0 (at v0.26 the divisibility check divides by it first and raises ZeroDivisionError)
        "#]],
    );
}

#[test]
fn the_connector_lists_differ_between_rule_sets() {
    let gpu_async = |line: &str| {
        with(
            line,
            r#""port": 6269"#,
            r#""port": 6269, "connector": "GpuAsyncAFDConnector", "async": "on""#,
        )
    };
    check(
        &gpu_async(ATTENTION),
        &gpu_async(FFN),
        RuleSet::Latest,
        expect![[r#"
            error afd.gpu-connector ffn --additional-config afd.connector @1:125: GpuAsyncAFDConnector cannot serve this CUDA deployment: its rank mapping is not modelled here; use P2pNcclAFDConnector
            error afd.gpu-connector attention --additional-config afd.connector @1:131: GpuAsyncAFDConnector cannot serve this CUDA deployment: its rank mapping is not modelled here; use P2pNcclAFDConnector
        "#]],
    );
    check(
        &gpu_async(ATTENTION),
        &gpu_async(FFN),
        RuleSet::V026,
        expect![[r#"
            error afd.connector ffn --additional-config afd.connector @1:125: AFD connector must be one of P2pNcclAFDConnector, CAMP2pAFDConnector, CAMAsyncAFDConnector; got 'GpuAsyncAFDConnector'
            error afd.connector attention --additional-config afd.connector @1:131: AFD connector must be one of P2pNcclAFDConnector, CAMP2pAFDConnector, CAMAsyncAFDConnector; got 'GpuAsyncAFDConnector'
            error afd.async-connector ffn --additional-config afd.async @1:162: AFD async mode requires connector='CAMAsyncAFDConnector'; got 'GpuAsyncAFDConnector'
            error afd.async-connector attention --additional-config afd.async @1:168: AFD async mode requires connector='CAMAsyncAFDConnector'; got 'GpuAsyncAFDConnector'
        "#]],
    );
}

#[test]
fn accepted_spellings_of_worker_and_plugin_settings() {
    let attention = format!(
        "VLLM_PLUGINS='lora, afd' {} --worker-cls afd_plugin.v1.worker:AFDAttentionWorker",
        ATTENTION
    );
    let ffn = format!("{FFN} --worker-cls auto");
    check(&attention, &ffn, RuleSet::Latest, expect![""]);
}

#[test]
fn model_runner_v2_demands_static_expert_parallelism_and_no_context_parallelism() {
    let attention = format!(
        "VLLM_USE_V2_MODEL_RUNNER=1 {} --enable-eplb --enable-elastic-ep -pcp 2 -dcp 2 --compilation-config '{{\"pass_config\": {{\"enable_sp\": true}}}}'",
        with(
            ATTENTION,
            "CUDA_VISIBLE_DEVICES=0",
            "CUDA_VISIBLE_DEVICES=0,2"
        )
    );
    let attention = with(
        &attention,
        r#""port": 6269"#,
        r#""port": 6269, "num_attention_ranks": 2"#,
    );
    let ffn = with(
        FFN,
        r#""port": 6269"#,
        r#""port": 6269, "num_attention_ranks": 2"#,
    );
    check(
        &attention,
        &ffn,
        RuleSet::Latest,
        expect![[r#"
            error mrv2.static-expert-parallel attention --enable-expert-parallel @1:1: AFD ModelRunnerV2 requires static expert parallelism: add --enable-expert-parallel
            error afd.attention-eplb attention --enable-eplb @1:188: CUDA remote experts do not support EPLB on the Attention role
            error mrv2.static-expert-parallel attention --enable-eplb @1:188: AFD ModelRunnerV2 requires static expert parallelism: remove --enable-eplb
            error mrv2.static-expert-parallel attention --enable-elastic-ep @1:202: AFD ModelRunnerV2 requires static expert parallelism: remove --enable-elastic-ep
            error mrv2.context-parallel attention --prefill-context-parallel-size @1:227: AFD ModelRunnerV2 requires --prefill-context-parallel-size 1, got 2
            error mrv2.context-parallel attention --decode-context-parallel-size @1:234: AFD ModelRunnerV2 requires --decode-context-parallel-size 1, got 2
            error mrv2.static-expert-parallel attention --compilation-config pass_config.enable_sp @1:275: AFD ModelRunnerV2 does not support pass_config.enable_sp
        "#]],
    );
}

#[test]
fn commands_given_for_the_wrong_roles_are_named() {
    check(
        FFN,
        ATTENTION,
        RuleSet::Latest,
        expect![[r#"
            error cross.roles-differ attention --additional-config afd.role @1:96: the attention command declares role 'ffn'
            error cross.roles-differ ffn --additional-config afd.role @1:96: the ffn command declares role 'attention'
        "#]],
    );
}

#[test]
fn invalid_values_are_not_compared_across_roles() {
    let ffn = with(FFN, r#""port": 6269"#, r#""port": "x""#);
    let report = deployment(ATTENTION, &ffn, RuleSet::Latest).check();
    let ids: Vec<&str> = report.findings().iter().map(|f| f.rule.id()).collect();
    assert_eq!(ids, ["afd.int-field"]);
    assert!(!report.is_clean());
    assert!(report.has(crate::deployment::Rule::AfdIntField));
}

#[test]
fn the_catalogue_has_stable_unique_ids_for_both_rule_sets() {
    let mut ids: Vec<&str> = rules().iter().map(|r| r.id).collect();
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "duplicate rule ids");
    for info in rules() {
        assert_eq!(info.rule.info().id, info.id);
        assert_eq!(crate::deployment::Rule::from_id(info.id), Some(info.rule));
        let (area, name) = info.id.split_once('.').expect("area.name");
        assert!(
            [
                "afd", "v026", "mrv2", "vllm", "graph", "dbo", "cross", "memory", "note"
            ]
            .contains(&area)
        );
        assert!(
            name.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        );
        assert!(
            !info.rule_sets.is_empty() && !info.statement.is_empty() && !info.source.is_empty()
        );
        if area == "v026" {
            assert_eq!(info.rule_sets, [RuleSet::V026]);
        }
        if area == "mrv2" {
            assert_eq!(info.rule_sets, [RuleSet::Latest]);
        }
    }
    let counts = (
        rules_of(RuleSet::V026).count(),
        rules_of(RuleSet::Latest).count(),
    );
    assert_eq!(counts, (58, 59));
}

#[test]
fn huge_rank_counts_are_checked_by_arithmetic() {
    let huge = |line: &str| {
        with(
            line,
            r#""port": 6269"#,
            r#""port": 65000, "num_attention_ranks": 4000000000, "num_ffn_ranks": 4000000000"#,
        )
    };
    let ffn = with(&huge(FFN), "--port 8001", "--port 65100");
    let report = deployment(&huge(ATTENTION), &ffn, RuleSet::V026).check();
    let ids: std::collections::BTreeSet<&str> =
        report.findings().iter().map(|f| f.rule.id()).collect();
    assert!(ids.contains("cross.http-port-vs-rendezvous"), "{ids:?}");
    assert!(ids.contains("v026.subgroup-port-range"), "{ids:?}");
    assert!(ids.contains("afd.role-ranks"), "{ids:?}");
}
