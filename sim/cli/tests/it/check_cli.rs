//! `afd-sim check` on command lines and on input that is not a deployment, `afd-sim rules`, and
//! the help texts.

use expect_test::expect;

use crate::support::{afd_sim, json};

// Model runner V2 with expert parallelism on both roles: what the latest plugin requires.
const ATTENTION: &str = r#"CUDA_VISIBLE_DEVICES=0 VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --port 8000 --additional-config '{"afd": {"role": "attention"}}' --enable-expert-parallel"#;
const FFN: &str = r#"CUDA_VISIBLE_DEVICES=1 VLLM_USE_V2_MODEL_RUNNER=1 vllm serve /m --enforce-eager --port 8001 --additional-config '{"afd": {"role": "ffn"}}' --enable-expert-parallel"#;

#[test]
fn command_lines_are_checked_like_a_recipe() {
    let run = afd_sim(&["check", "--attention-args", ATTENTION, "--ffn-args", FFN]);
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.stdout.ends_with("ok: 0 errors, 0 warnings, 0 notes\n"));
    // v0.26 needs the V1 runner.
    let v1 = |line: &str| line.replace("VLLM_USE_V2_MODEL_RUNNER=1", "VLLM_USE_V2_MODEL_RUNNER=0");
    let ffn = v1(FFN).replace("--port 8001", "--port 1239");
    let run = afd_sim(&[
        "check",
        "--attention-args",
        &v1(ATTENTION),
        "--ffn-args",
        &ffn,
        "--rules",
        "v0.26",
    ]);
    assert_eq!(run.code, 2);
    expect![[r#"
        --ffn-args:1:88: error[cross.http-port-vs-rendezvous] ffn --port: HTTP port 1239 of the FFN server is the AFD rendezvous port on the AFD host; the TCP store and the HTTP server cannot both listen on it
    "#]]
    .assert_eq(&run.stdout.lines().filter(|l| l.contains("error[")).map(|l| format!("{l}\n")).collect::<String>());
}

#[test]
fn a_bad_command_line_is_located_in_its_own_flag() {
    let ffn = FFN.replace("--port 8001", "--port eighty");
    let run = afd_sim(&["check", "--attention-args", ATTENTION, "--ffn-args", &ffn]);
    assert_eq!(run.code, 2);
    expect![[r#"
        --ffn-args:1:88: error: --port expects a TCP port 1..65535, got 'eighty'
        failed: the input does not describe a deployment (nothing was checked)
    "#]]
    .assert_eq(&run.stdout);
}

#[test]
fn recipe_syntax_errors_exit_2_with_file_line_and_column() {
    let run = afd_sim(&[
        "check",
        "tests/fixtures/recipes/input/command-substitution.sh",
    ]);
    assert_eq!(run.code, 2);
    expect![[r#"
        tests/fixtures/recipes/input/command-substitution.sh:3:12: error: command substitution `$(…)` is not modelled: the parser never runs commands
        failed: the input does not describe a deployment (nothing was checked)
    "#]]
    .assert_eq(&run.stdout);
}

#[test]
fn every_bad_flag_value_of_both_commands_is_reported_at_once() {
    let run = afd_sim(&[
        "check",
        "tests/fixtures/recipes/input/bad-flag-values.sh",
        "--json",
    ]);
    assert_eq!(run.code, 2);
    let report = json(&run);
    assert_eq!(report["ok"], false);
    let errors: Vec<String> = report["input_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            format!(
                "{}:{} {} {}",
                e["location"]["line"], e["location"]["column"], e["subject"], e["message"]
            )
        })
        .collect();
    expect![[r#"
        [
            "3:53 \"--max-num-seqs\" \"--max-num-seqs expects a positive integer, got 'sixty-four'\"",
            "5:61 \"--tensor-parallel-size\" \"--tensor-parallel-size expects a positive integer, got '0'\"",
            "7:31 \"--additional-config\" \"--additional-config is not valid JSON: trailing comma\"",
        ]
    "#]]
    .assert_debug_eq(&errors);
}

#[test]
fn environment_variables_can_be_supplied() {
    let path = "tests/fixtures/recipes/input/needs-env.sh";
    let without = afd_sim(&["check", path]);
    assert_eq!(without.code, 2);
    assert!(
        without
            .stdout
            .contains("needs-env.sh:3:36: error: variable `MODEL` is not set here")
    );
    let with = afd_sim(&["check", path, "--env", "MODEL=/models/x"]);
    assert_eq!(with.code, 0, "{}", with.stdout);
    let malformed = afd_sim(&["check", path, "--env", "MODEL"]);
    assert_eq!(malformed.code, 2);
    assert!(malformed.stderr.contains("--env expects NAME=VALUE"));
}

#[test]
fn input_that_is_not_a_deployment_exits_2() {
    let one = afd_sim(&["check", "tests/fixtures/recipes/input/one-server.sh"]);
    assert_eq!(one.code, 2);
    assert!(
        one.stdout.contains("found 1 vllm serve command(s)"),
        "{}",
        one.stdout
    );
    let missing = afd_sim(&["check", "tests/fixtures/recipes/no-such-recipe.sh"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing
            .stderr
            .starts_with("error: cannot read recipe tests/fixtures/recipes/no-such-recipe.sh")
    );
    let nothing = afd_sim(&["check"]);
    assert_eq!(nothing.code, 2);
    let half = afd_sim(&["check", "--attention-args", ATTENTION]);
    assert_eq!(half.code, 2);
    let both = afd_sim(&[
        "check",
        "x.sh",
        "--attention-args",
        ATTENTION,
        "--ffn-args",
        FFN,
    ]);
    assert_eq!(both.code, 2);
    let unknown_set = afd_sim(&["check", "x.sh", "--rules", "v0.27"]);
    assert_eq!(unknown_set.code, 2);
    assert!(unknown_set.stderr.contains("unknown rule set 'v0.27'"));
}

#[test]
fn the_rules_command_lists_the_catalogue() {
    let all = json(&afd_sim(&["rules", "--json"]));
    let v026 = json(&afd_sim(&["rules", "--rules", "v0.26", "--json"]));
    let latest = json(&afd_sim(&["rules", "--rules", "latest", "--json"]));
    let count = |v: &serde_json::Value| v["rules"].as_array().unwrap().len();
    assert_eq!((count(&all), count(&v026), count(&latest)), (63, 58, 59));
    let text = afd_sim(&["rules"]);
    assert!(text.stdout.contains("afd.port-range"));
    assert!(text.stdout.ends_with("63 rules\n"));
}

#[test]
fn help_teaches_with_examples() {
    // `afd-sim` alone runs `predict` on the seed recipe (issue 3); `--help` shows the usage.
    let help = afd_sim(&["--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("Usage: afd-sim [COMMAND]"));
    let bare = afd_sim(&[]);
    assert_eq!(bare.code, 0);
    assert!(
        bare.stdout
            .starts_with("============ Serving Benchmark Result")
    );
    for command in ["predict", "check", "topology", "rules"] {
        let help = afd_sim(&[command, "--help"]);
        assert_eq!(help.code, 0);
        assert!(help.stdout.contains("Examples:"), "{command}");
    }
}

#[test]
fn the_user_guide_lists_every_rule() {
    let guide = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/foundation.md"
    ))
    .expect("docs/foundation.md");
    for info in afd_sim::deployment::rules() {
        assert!(
            guide.contains(&format!("| `{}` |", info.id)),
            "docs/foundation.md misses {}",
            info.id
        );
    }
    let counts = |severity| {
        afd_sim::deployment::rules()
            .iter()
            .filter(|r| r.severity == severity)
            .count()
    };
    use afd_sim::deployment::Severity;
    let sentence = format!(
        "{} are errors, {} warnings and {} notes",
        counts(Severity::Error),
        counts(Severity::Warning),
        counts(Severity::Note)
    );
    assert!(
        guide.contains(&sentence),
        "docs/foundation.md should say: {sentence}"
    );
}
