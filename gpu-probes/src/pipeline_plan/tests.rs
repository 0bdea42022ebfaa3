//! Pipeline configurations and the control message.

use expect_test::expect;
use proptest::prelude::*;

use super::*;

#[test]
fn dbo_splits_at_half_and_skips_single_tokens() {
    let all = configs(&[1, 5], &[512], &[false, true], &[false, true]);
    assert_eq!(all.len(), 6, "T = 1 runs without DBO only");
    let c = Config {
        tokens: 5,
        context: 512,
        dbo: true,
        graph: false,
    };
    assert_eq!(c.ubatches(), vec![2, 3]);
    assert_eq!(Config { dbo: false, ..c }.ubatches(), vec![5]);
}

#[test]
fn control_payload_is_compact_sorted_json() {
    expect![[r#"{"0":{"max_tokens_across_dp_cpu":64,"num_tokens_across_dp_cpu":[64]},"is_graph_capturing":false,"is_warmup":false}"#]]
        .assert_eq(&control_payload(&[64]));
    let two = control_payload(&[32, 32]);
    assert_eq!(parse_control_payload(two.as_bytes()).unwrap(), vec![32, 32]);
}

#[test]
fn bad_payloads_are_named() {
    let err = parse_control_payload(b"{\"1\":{\"num_tokens_across_dp_cpu\":[3]}}").unwrap_err();
    assert!(
        err.to_string().contains("stages must be numbered 0, 1"),
        "{err}"
    );
    let err = parse_control_payload(b"{\"0\":{}}").unwrap_err();
    assert!(
        err.to_string()
            .contains("stage 0 has no num_tokens_across_dp_cpu"),
        "{err}"
    );
    assert!(parse_control_payload(b"\xff").is_err());
}

#[test]
fn routing_covers_every_moe_layer_and_ubatch() {
    let shape = ModelShape::deepseek_v2_lite();
    let config = Config {
        tokens: 32,
        context: 512,
        dbo: true,
        graph: true,
    };
    let plans = routing_plans(&shape, Routing::Uniform, 7, &config);
    assert_eq!(plans.len(), 26);
    assert!(
        plans
            .iter()
            .all(|stages| stages.len() == 2 && stages[0].tokens == 16)
    );
    let record = routing_record(&shape, &plans);
    assert_eq!(record.len(), 52);
    assert_eq!(record[0].layer, 1);
    assert_eq!(record[51].layer, 26);
    let same = routing_plans(
        &shape,
        Routing::Uniform,
        7,
        &Config {
            context: 4096,
            graph: false,
            ..config
        },
    );
    assert_eq!(
        plans, same,
        "context and graph mode do not change the routing"
    );
}

#[test]
fn checksum_sees_every_word() {
    assert_ne!(checksum(&[1, 2, 3]), checksum(&[1, 2, 4]));
    assert_ne!(checksum(&[1, 2]), checksum(&[2, 1]));
    assert_eq!(checksum(&[]), checksum(&[]));
}

proptest! {
    #[test]
    fn payloads_round_trip(rows in prop::collection::vec(1usize..100_000, 1..3)) {
        prop_assert_eq!(parse_control_payload(control_payload(&rows).as_bytes()).unwrap(), rows);
    }

    #[test]
    fn arbitrary_payloads_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_control_payload(&bytes);
    }
}
