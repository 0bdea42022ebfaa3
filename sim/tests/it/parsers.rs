//! Property tests: random and mangled recipes, flag lists and JSON never panic the parsers, and
//! every error points inside the input (a line and column that exist, or a word index in range).
//! Whatever parses is also checked, which must not panic either.

use proptest::prelude::*;
use serde_json::Value;

use afd_sim::deployment::{Deployment, Location, RecipeOptions, RoleConfig, parse_recipe};
use afd_sim::topology::RuleSet;

const SEED: &str = include_str!("../fixtures/recipes/2a2f_graph_dbo_dp1tp2.sh");
const PLAIN: &str = include_str!("../fixtures/recipes/1a1f_eager_plain_vllm.sh");
const FOUR: &str = include_str!("../fixtures/recipes/4a4f_graph_dbo_dp2tp2.sh");

/// True when `location` names a character of `text` or the position just after a line's end.
fn inside_text(text: &str, location: Location) -> bool {
    let Location::Text { line, column } = location else {
        return false;
    };
    let lines: Vec<&str> = text.split('\n').collect();
    let Some(content) = lines.get(line as usize - 1) else {
        return false;
    };
    line >= 1 && column >= 1 && column as usize <= content.chars().count() + 1
}

fn inside_arguments(count: usize, location: Location) -> bool {
    matches!(location, Location::Argument { index } if (index as usize) < count.max(1))
}

/// Parses and checks a recipe; asserts every located problem or finding is inside the text.
fn parse_and_check(text: &str) -> Result<(), TestCaseError> {
    for rules in [RuleSet::Latest, RuleSet::V026] {
        match Deployment::from_recipe(text, &RecipeOptions::default(), rules) {
            Ok(deployment) => {
                for finding in deployment.check().findings() {
                    if let Some(location) = finding.location {
                        prop_assert!(inside_text(text, location), "{location} {finding:?}");
                    }
                }
                let _ = deployment.topology();
            }
            Err(err) => {
                let problems = err.problems();
                prop_assert!(!problems.is_empty());
                for (location, _, message) in problems {
                    prop_assert!(inside_text(text, location), "{location}: {message}");
                    prop_assert!(!message.is_empty());
                }
            }
        }
    }
    Ok(())
}

/// Text biased towards the characters the recipe lexer treats specially.
fn shell_text() -> impl Strategy<Value = String> {
    let pieces = prop_oneof![
        4 => "[a-zA-Z0-9_./,:=-]{1,8}",
        1 => Just(" ".to_owned()),
        1 => Just("\n".to_owned()),
        1 => Just("\\\n".to_owned()),
        1 => prop::sample::select(vec![
            "'", "\"", "$", "${", "}", "{", ":-", "$(", "`", "\\", "#", "&", "|", ";", ">", ">>",
            "2>&1", "<", "(", ")", "*", "?", "[", "~", "vllm serve ", "uv run vllm serve ",
            "export ", "set -e", "wait", "CUDA_VISIBLE_DEVICES=0,1 ", "\t", "\r", "é", "\u{0}",
        ])
        .prop_map(str::to_owned),
    ];
    prop::collection::vec(pieces, 0..60).prop_map(|parts| parts.concat())
}

/// One edit of a text: delete a span, duplicate a span, or insert a special string.
#[derive(Clone, Debug)]
enum Edit {
    Delete { at: usize, len: usize },
    Duplicate { at: usize, len: usize },
    Insert { at: usize, what: &'static str },
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        (any::<usize>(), 1usize..20).prop_map(|(at, len)| Edit::Delete { at, len }),
        (any::<usize>(), 1usize..40).prop_map(|(at, len)| Edit::Duplicate { at, len }),
        (
            any::<usize>(),
            prop::sample::select(vec![
                "'",
                "\"",
                "\\",
                "$",
                "$(",
                "&",
                "|",
                ";",
                "\n",
                "}",
                "{",
                "=",
                "--",
                "-1",
                " ",
                "\"port\": 0,",
                "[",
                "]",
                ",",
                "null",
                "x",
                "${Q:-",
                "#",
                ">",
                "0",
                "65536",
            ])
        )
            .prop_map(|(at, what)| Edit::Insert { at, what }),
    ];
    prop::collection::vec(edit, 1..6)
}

fn apply(text: &str, edits: &[Edit]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for edit in edits {
        let n = chars.len().max(1);
        match *edit {
            Edit::Delete { at, len } => {
                let at = at % n;
                let end = (at + len).min(chars.len());
                if at < end {
                    chars.drain(at..end);
                }
            }
            Edit::Duplicate { at, len } => {
                let at = at % n;
                let end = (at + len).min(chars.len());
                let copy: Vec<char> = chars.get(at..end).unwrap_or_default().to_vec();
                let insert_at = end.min(chars.len());
                chars.splice(insert_at..insert_at, copy);
            }
            Edit::Insert { at, what } => {
                let at = at % (chars.len() + 1);
                chars.splice(at..at, what.chars());
            }
        }
    }
    chars.into_iter().collect()
}

/// Flag-list words: interpreted flags in every form, unknown flags, values good and bad.
fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::sample::select(vec![
            "--data-parallel-size", "-dp", "--tensor-parallel-size", "-tp", "-tp2", "--pipeline-parallel-size",
            "--prefill-context-parallel-size", "--decode-context-parallel-size", "--data-parallel-size-local",
            "--max-num-seqs", "--max-num-batched-tokens", "--max-model-len", "--gpu-memory-utilization",
            "--dbo-decode-token-threshold", "--dbo-prefill-token-threshold", "--ubatch-size",
            "--enable-expert-parallel", "--no-enable-expert-parallel", "--enable-eplb", "--enable-dbo",
            "--enforce-eager", "--enable-elastic-ep", "--all2all-backend", "--worker-cls", "--host", "--port",
            "--additional-config", "--compilation-config", "-O", "-O3", "-cc", "--max-cudagraph-capture-size",
            "--cudagraph-capture-sizes", "--served-model-name", "--model", "--config", "--afd-config",
            "--trust-remote-code", "--kv-transfer-config", "--seed", "--", "-", "--max_num_seqs=8",
            "--port=", "--enable-dbo=1", "--compilation-config.level", "--max-model-len=4k",
        ])
        .prop_map(str::to_owned),
        3 => prop::sample::select(vec![
            "0", "1", "2", "64", "-1", "+3", "1_0", "4294967296", "4000000000", "99999999999999999999", "0.9", "1.5",
            "nan", "inf", "abc", "", " ", "4K", "2m", "/m", "127.0.0.1", "auto",
            "afd_plugin.v1.worker.AFDFFNWorker", "{}", "[]", "null", "{\"afd\": {}}", "{\"afd\": 1}",
            "{\"afd\": {\"role\": \"ffn\", \"port\": 70000, \"num_ffn_ranks\": \"2\", \"async\": \"x\"}}",
            "{\"cudagraph_mode\": \"FULL_DECODE_ONLY\", \"cudagraph_capture_sizes\": [64, 8]}",
            "{\"cudagraph_mode\": 1}", "{\"pass_config\": {\"enable_sp\": true}, \"level\": 3}", "{\"a\":",
            "8,16", "é",
        ])
        .prop_map(str::to_owned),
        1 => ".{0,12}",
    ]
}

/// Arbitrary JSON values, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        prop::sample::select(vec![
            "attention",
            "ffn",
            "P2pNcclAFDConnector",
            "GpuAsyncAFDConnector",
            "FULL_DECODE_ONLY",
            "yes",
            "0",
            " 7 ",
            "",
            "127.0.0.1",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop::sample::select(vec![
                    "afd",
                    "role",
                    "afd_role",
                    "port",
                    "afd_port",
                    "host",
                    "connector",
                    "async",
                    "async_dp",
                    "num_attention_ranks",
                    "num_ffn_ranks",
                    "compute_gate_on_attention",
                    "connector_extra_config",
                    "cudagraph_mode",
                    "cudagraph_capture_sizes",
                    "max_cudagraph_capture_size",
                    "pass_config",
                    "enable_sp",
                    "level",
                    "other",
                ])
                .prop_map(str::to_owned),
                inner,
                0..5,
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_shell_text_never_panics_and_errors_point_inside(text in shell_text()) {
        if let Err(err) = parse_recipe(&text, &RecipeOptions::default()) {
            prop_assert!(inside_text(&text, err.location()), "{err}");
        }
        parse_and_check(&text)?;
    }

    #[test]
    fn mangled_recipes_never_panic_and_errors_point_inside(
        base in prop::sample::select(vec![SEED, PLAIN, FOUR]),
        edits in edits(),
    ) {
        let text = apply(base, &edits);
        parse_and_check(&text)?;
    }

    #[test]
    fn random_flag_lists_never_panic_and_errors_name_a_word(
        words in prop::collection::vec(word(), 0..16),
        other in prop::collection::vec(word(), 0..16),
    ) {
        match RoleConfig::from_serve_args(&words) {
            Err(err) => {
                prop_assert!(!err.errors.is_empty());
                for error in &err.errors {
                    prop_assert!(inside_arguments(words.len(), error.location), "{error}");
                }
            }
            Ok(config) => {
                let sizes = config.capture_sizes();
                prop_assert!(sizes.windows(2).all(|w| w[0] < w[1]));
                if let Some(&largest) = sizes.last() {
                    prop_assert_eq!(config.padded_graph_size(largest), Some(largest));
                    prop_assert_eq!(config.padded_graph_size(largest.saturating_add(1)), None);
                }
                if let Ok(second) = RoleConfig::from_serve_args(&other) {
                    for rules in [RuleSet::Latest, RuleSet::V026] {
                        let deployment = Deployment::new(config.clone(), second.clone(), rules);
                        for finding in deployment.check().findings() {
                            if let Some(location) = finding.location {
                                let count = words.len().max(other.len());
                                prop_assert!(inside_arguments(count, location), "{finding:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn random_json_values_never_panic_and_findings_point_at_the_json_word(
        additional in json_value(),
        compilation in json_value(),
    ) {
        let words = vec![
            "/m".to_owned(),
            "--additional-config".to_owned(),
            additional.to_string(),
            "--compilation-config".to_owned(),
            compilation.to_string(),
        ];
        match RoleConfig::from_serve_args(&words) {
            Err(err) => {
                for error in &err.errors {
                    prop_assert_eq!(error.location, Location::Argument { index: 4 }, "{}", error);
                }
            }
            Ok(config) => {
                for finding in config.parse_findings() {
                    let location = finding.location.expect("parse findings are located");
                    prop_assert!(
                        location == Location::Argument { index: 2 } || location == Location::Argument { index: 4 },
                        "{:?}", finding
                    );
                }
            }
        }
    }

    #[test]
    fn mangled_json_is_located_inside_its_multiline_argument(
        edits in edits(),
    ) {
        let json = "{\n  \"afd\": {\n    \"role\": \"ffn\",\n    \"port\": 6269\n  }\n}";
        let mangled = apply(json, &edits);
        let quoted = mangled.replace('\'', "'\\''");
        let line = format!("vllm serve /m --additional-config '{quoted}'");
        match RoleConfig::from_command_line(&line, &RecipeOptions::default()) {
            Err(err) => {
                for (location, _, message) in err.problems() {
                    prop_assert!(inside_text(&line, location), "{location}: {message}");
                }
            }
            Ok(config) => {
                for finding in config.parse_findings() {
                    if let Some(location) = finding.location {
                        prop_assert!(inside_text(&line, location), "{finding:?}");
                    }
                }
            }
        }
    }
}
