//! The plugin's aliases and coercions (afd-spec §1.2, §1.3) on JSON values.

use expect_test::{Expect, expect};
use serde_json::{Value, json};

use super::*;

fn render(value: &Value) -> String {
    let (config, findings) = parse_afd_block(value, &|_| Location::START);
    let mut out = String::new();
    for finding in &findings {
        let subject = finding
            .subject
            .as_ref()
            .map_or_else(String::new, ToString::to_string);
        out.push_str(&format!(
            "{} {subject}: {}\n",
            finding.rule.id(),
            finding.message
        ));
    }
    if let Some(c) = config {
        out.push_str(&format!(
            "connector={} role={} host={:?} truthy={} port={:?} A={:?} F={:?} async={:?} gate={:?} extra={:?} keys={:?}\n",
            c.connector.value,
            c.role.value,
            c.host.value,
            c.host_is_truthy,
            c.port.value,
            c.num_attention_ranks.value,
            c.num_ffn_ranks.value,
            c.async_dp.value,
            c.compute_gate_on_attention.value,
            c.connector_extra_config.value.as_ref().map(|m| m.len()),
            [c.role.key.as_deref(), c.port.key.as_deref(), c.host.key.as_deref()],
        ));
    }
    out
}

#[track_caller]
fn check(value: Value, expect: Expect) {
    expect.assert_eq(&render(&value));
}

#[test]
fn an_empty_block_takes_the_dataclass_defaults() {
    check(
        json!({"afd": {}}),
        expect![[r#"
            connector=P2pNcclAFDConnector role=attention host="127.0.0.1" truthy=true port=Some(1239) A=Some(1) F=Some(1) async=Some(false) gate=Some(false) extra=Some(0) keys=[None, None, None]
        "#]],
    );
}

#[test]
fn aliases_map_to_canonical_keys_and_strings_coerce() {
    check(
        json!({"afd": {"afd_role": "ffn", "afd_port": " 6_269 ", "afd_host": "h", "afd_connector": "X",
                       "async": "Yes", "compute_gate_on_attention": 0, "num_attention_ranks": "+4",
                       "num_ffn_ranks": 2}}),
        expect![[r#"
            connector=X role=ffn host="h" truthy=true port=Some(6269) A=Some(4) F=Some(2) async=Some(true) gate=Some(false) extra=Some(0) keys=[Some("afd_role"), Some("afd_port"), Some("afd_host")]
        "#]],
    );
}

#[test]
fn bad_values_are_all_reported_and_kept_as_none() {
    check(
        json!({"afd": {"port": 6269.0, "num_attention_ranks": true, "num_ffn_ranks": "2.0",
                       "async": 2, "compute_gate_on_attention": "maybe", "connector_extra_config": [],
                       "role": 7, "host": ""}}),
        expect![[r#"
            afd.int-field --additional-config afd.port: port must be an integer, got float 6269.0
            afd.int-field --additional-config afd.num_attention_ranks: num_attention_ranks must be an integer, got bool true
            afd.int-field --additional-config afd.num_ffn_ranks: num_ffn_ranks must be an integer, got str "2.0"
            afd.bool-field --additional-config afd.async: async must be a boolean, got int 2
            afd.bool-field --additional-config afd.compute_gate_on_attention: compute_gate_on_attention must be a boolean, got str "maybe"
            afd.extra-config-mapping --additional-config afd.connector_extra_config: connector_extra_config must be a mapping, got list []
            connector=P2pNcclAFDConnector role=7 host="" truthy=false port=None A=None F=None async=None gate=None extra=None keys=[Some("role"), Some("port"), Some("host")]
        "#]],
    );
}

#[test]
fn unknown_removed_and_duplicate_keys_are_reported() {
    check(
        json!({"afd": {"role": "ffn", "afd_role": "ffn", "enabled": true, "afd_role_rank": 0,
                       "num_attention_servers": 1}}),
        expect![[r#"
            afd.unknown-field --additional-config afd.afd_role_rank: unknown AFD config field 'afd_role_rank'; put connector-specific values under 'connector_extra_config'
            afd.unknown-field --additional-config afd.enabled: unknown AFD config field 'enabled'; put connector-specific values under 'connector_extra_config'
            afd.unknown-field --additional-config afd.num_attention_servers: unknown AFD config field 'num_attention_servers'; put connector-specific values under 'connector_extra_config'
            afd.duplicate-field --additional-config afd.role: duplicate AFD config field: 'afd_role' and 'role' both set 'role'
            connector=P2pNcclAFDConnector role=ffn host="127.0.0.1" truthy=true port=Some(1239) A=Some(1) F=Some(1) async=Some(false) gate=Some(false) extra=Some(0) keys=[Some("afd_role"), None, None]
        "#]],
    );
}

#[test]
fn non_mappings_and_a_missing_block_stop_the_parse() {
    check(
        json!([1]),
        expect![[r#"
            afd.config-mapping --additional-config: --additional-config must be a JSON object, got list [1]
        "#]],
    );
    check(
        json!({"afd": null}),
        expect![[r#"
            afd.config-mapping --additional-config afd: AFD config must be a mapping, got null
        "#]],
    );
    check(
        json!({"other": 1}),
        expect![[r#"
            afd.missing-block --additional-config: --additional-config has no "afd" block, so AFD is off for this server
        "#]],
    );
}

#[test]
fn coercions_follow_python() {
    let ints = [
        ("\"  -7 \"", Some(-7)),
        ("\"1_000\"", Some(1000)),
        ("\"1__0\"", None),
        ("\"_1\"", None),
        ("\"0x10\"", None),
        ("\"\"", None),
        ("18446744073709551615", Some(i64::MAX)),
        ("-9223372036854775808", Some(i64::MIN)),
        ("\"99999999999999999999999\"", Some(i64::MAX)),
        ("null", None),
        ("1e3", None),
    ];
    for (text, want) in ints {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(coerce_int(&value), want, "{text}");
    }
    let bools = [
        ("true", Some(true)),
        ("1", Some(true)),
        ("1.0", None),
        ("2", None),
        ("\" OFF \"", Some(false)),
        ("\"y\"", None),
        ("[]", None),
    ];
    for (text, want) in bools {
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(coerce_bool(&value), want, "{text}");
    }
}

#[test]
fn accessors_reject_out_of_range_values() {
    let (config, _) = parse_afd_block(
        &json!({"afd": {"port": 70000, "num_attention_ranks": 0, "num_ffn_ranks": -1, "role": "Attention"}}),
        &|_| Location::START,
    );
    let config = config.unwrap();
    assert_eq!(
        (
            config.port(),
            config.attention_ranks(),
            config.ffn_ranks(),
            config.role()
        ),
        (None, None, None, None)
    );
}

#[test]
fn long_values_are_shortened_in_messages() {
    let long = Value::String("x".repeat(100));
    assert_eq!(describe(&long).chars().count(), 4 + 60);
}
