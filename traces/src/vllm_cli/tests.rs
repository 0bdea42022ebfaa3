//! The shipped `vllm serve` options read and checked; bad files refused with the place named.

use super::*;

#[test]
fn the_shipped_flags_read_and_hold_the_options_the_simulator_interprets() {
    let flags = builtin_serve_flags();
    assert_eq!(flags.provenance.vllm_version, "0.26.0");
    for option in [
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "-tp",
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "-cc",
        "--additional-config",
    ] {
        assert!(flags.option(option).is_some(), "{option}");
    }
    assert_eq!(
        flags.option("--enforce-eager").map(|f| f.values),
        Some(FlagValues::None)
    );
    assert_eq!(
        flags.option("--cudagraph-capture-sizes").map(|f| f.values),
        Some(FlagValues::OneOrMore)
    );
    assert_eq!(
        flags.option("--help").map(|f| f.values),
        Some(FlagValues::Help)
    );
    // Gone from vLLM 0.26.0: its parser refuses them.
    for gone in [
        "--swap-space",
        "--disable-log-requests",
        "--cuda-graph-sizes",
    ] {
        assert!(flags.option(gone).is_none(), "{gone}");
    }
    assert!(flags.is_attention_backend("FLASH_ATTN_MLA") && flags.is_attention_backend("flashmla"));
    assert!(flags.is_attention_backend("Auto") && !flags.is_attention_backend("FLASH"));
    assert!(flags.samples.iter().any(|s| s.accepted));
    assert!(flags.samples.iter().any(|s| !s.accepted));
}

fn shipped_json() -> serde_json::Value {
    serde_json::from_str(include_str!("../../data/vllm-cli/serve-flags-0.26.0.json"))
        .expect("shipped JSON")
}

fn error_of(value: &serde_json::Value) -> String {
    ServeFlags::from_json(&value.to_string())
        .expect_err("refused")
        .to_string()
}

#[test]
fn bad_files_are_refused_with_the_place_named() {
    let mut value = shipped_json();
    value["format"] = "other".into();
    assert!(error_of(&value).contains("format \"other\""));

    let mut value = shipped_json();
    value["schema_version"] = 2.into();
    assert!(error_of(&value).contains("schema_version 2"));

    let mut value = shipped_json();
    value["flags"][0]["options"][0] = "tp".into();
    assert!(error_of(&value).contains("flags[0].options[0]"));

    let mut value = shipped_json();
    let first = value["flags"][0]["options"][0].clone();
    value["flags"][1]["options"][0] = first;
    assert!(error_of(&value).contains("flags[1].options[0]: spelt by two options"));

    let mut value = shipped_json();
    value["flags"][0]["values"] = "two".into();
    assert!(error_of(&value).contains("flags[0].values"));

    let mut value = shipped_json();
    value["samples"][0]["accepted"] =
        (!value["samples"][0]["accepted"].as_bool().expect("bool")).into();
    assert!(error_of(&value).contains("samples[0]"));

    assert!(ServeFlags::from_json("{").is_err());
}
