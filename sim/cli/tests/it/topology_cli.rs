//! `afd-sim topology` reproduces the worked tables of afd-spec §2.4 (HEAD formulas, and the block
//! partition of §2.5 under `latest`), shows parallel coordinates, and refuses illegal pairs.

use expect_test::{Expect, expect};

use crate::support::{afd_sim, json};

/// The JSON mapping as one line per process, in the spec's table columns.
fn table(attention: u32, ffn: u32, rules: &str) -> String {
    let run = afd_sim(&[
        "topology",
        "--attention-ranks",
        &attention.to_string(),
        "--ffn-ranks",
        &ffn.to_string(),
        "--rules",
        rules,
        "--port",
        "6269",
        "--json",
    ]);
    if run.code != 0 {
        return format!("exit {}: {}", run.code, run.stderr);
    }
    let mapping = json(&run);
    assert_eq!(mapping["attention_ranks"], attention);
    assert_eq!(mapping["ffn_ranks"], ffn);
    assert_eq!(mapping["rules"], rules);
    let mut out = String::new();
    for rank in mapping["ranks"].as_array().expect("ranks is an array") {
        let tag = if rank["role"] == "ffn" { "F" } else { "A" };
        let p2p = if rank["p2p_rank"].is_null() {
            "-".to_owned()
        } else {
            rank["p2p_rank"].to_string()
        };
        out.push_str(&format!(
            "{tag}{} world={} p2p={p2p} sg={} ris={} subgroup={} dst={} ports={}\n",
            rank["role_rank"],
            rank["world_rank"],
            rank["subgroup_index"],
            rank["rank_in_subgroup"],
            rank["subgroup_world_ranks"],
            rank["control_destinations"],
            rank["ports"],
        ));
    }
    out
}

#[track_caller]
fn check(attention: u32, ffn: u32, rules: &str, expect: Expect) {
    expect.assert_eq(&table(attention, ffn, rules));
}

#[test]
fn one_attention_one_ffn() {
    check(
        1,
        1,
        "v0.26",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,1] dst=[] ports=[6269,6270]
        A0 world=1 p2p=1 sg=0 ris=1 subgroup=[0,1] dst=[0] ports=[6269,6270]
    "#]],
    );
    check(
        1,
        1,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,1] dst=[] ports=[6269]
        A0 world=1 p2p=1 sg=0 ris=1 subgroup=[0,1] dst=[0] ports=[6269]
    "#]],
    );
}

#[test]
fn two_attention_one_ffn() {
    check(
        2,
        1,
        "v0.26",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,1,2] dst=[] ports=[6269,6270]
        A0 world=1 p2p=1 sg=0 ris=1 subgroup=[0,1,2] dst=[0] ports=[6269,6270]
        A1 world=2 p2p=- sg=0 ris=2 subgroup=[0,1,2] dst=[] ports=[6269,6270]
    "#]],
    );
    check(
        2,
        1,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,1,2] dst=[] ports=[6269]
        A0 world=1 p2p=1 sg=0 ris=1 subgroup=[0,1,2] dst=[0] ports=[6269]
        A1 world=2 p2p=- sg=0 ris=2 subgroup=[0,1,2] dst=[] ports=[6269]
    "#]],
    );
}

#[test]
fn two_attention_two_ffn() {
    check(
        2,
        2,
        "v0.26",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,2] dst=[] ports=[6269,6270]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,3] dst=[] ports=[6269,6271]
        A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0,2] dst=[0] ports=[6269,6270]
        A1 world=3 p2p=3 sg=1 ris=1 subgroup=[1,3] dst=[1] ports=[6269,6271]
    "#]],
    );
    check(
        2,
        2,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,2] dst=[] ports=[6269]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,3] dst=[] ports=[6269]
        A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0,2] dst=[0] ports=[6269]
        A1 world=3 p2p=3 sg=1 ris=1 subgroup=[1,3] dst=[1] ports=[6269]
    "#]],
    );
}

#[test]
fn four_attention_two_ffn() {
    check(
        4,
        2,
        "v0.26",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,2,3] dst=[] ports=[6269,6270]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,4,5] dst=[] ports=[6269,6271]
        A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0,2,3] dst=[0] ports=[6269,6270]
        A1 world=3 p2p=3 sg=0 ris=2 subgroup=[0,2,3] dst=[1] ports=[6269,6270]
        A2 world=4 p2p=- sg=1 ris=1 subgroup=[1,4,5] dst=[] ports=[6269,6271]
        A3 world=5 p2p=- sg=1 ris=2 subgroup=[1,4,5] dst=[] ports=[6269,6271]
    "#]],
    );
    check(
        4,
        2,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,2,3] dst=[] ports=[6269]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,4,5] dst=[] ports=[6269]
        A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0,2,3] dst=[0] ports=[6269]
        A1 world=3 p2p=3 sg=0 ris=2 subgroup=[0,2,3] dst=[1] ports=[6269]
        A2 world=4 p2p=- sg=1 ris=1 subgroup=[1,4,5] dst=[] ports=[6269]
        A3 world=5 p2p=- sg=1 ris=2 subgroup=[1,4,5] dst=[] ports=[6269]
    "#]],
    );
}

#[test]
fn four_attention_four_ffn() {
    check(
        4,
        4,
        "v0.26",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,4] dst=[] ports=[6269,6270]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,5] dst=[] ports=[6269,6271]
        F2 world=2 p2p=2 sg=2 ris=0 subgroup=[2,6] dst=[] ports=[6269,6272]
        F3 world=3 p2p=3 sg=3 ris=0 subgroup=[3,7] dst=[] ports=[6269,6273]
        A0 world=4 p2p=4 sg=0 ris=1 subgroup=[0,4] dst=[0] ports=[6269,6270]
        A1 world=5 p2p=5 sg=1 ris=1 subgroup=[1,5] dst=[1] ports=[6269,6271]
        A2 world=6 p2p=6 sg=2 ris=1 subgroup=[2,6] dst=[2] ports=[6269,6272]
        A3 world=7 p2p=7 sg=3 ris=1 subgroup=[3,7] dst=[3] ports=[6269,6273]
    "#]],
    );
    check(
        4,
        4,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,4] dst=[] ports=[6269]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,5] dst=[] ports=[6269]
        F2 world=2 p2p=2 sg=2 ris=0 subgroup=[2,6] dst=[] ports=[6269]
        F3 world=3 p2p=3 sg=3 ris=0 subgroup=[3,7] dst=[] ports=[6269]
        A0 world=4 p2p=4 sg=0 ris=1 subgroup=[0,4] dst=[0] ports=[6269]
        A1 world=5 p2p=5 sg=1 ris=1 subgroup=[1,5] dst=[1] ports=[6269]
        A2 world=6 p2p=6 sg=2 ris=1 subgroup=[2,6] dst=[2] ports=[6269]
        A3 world=7 p2p=7 sg=3 ris=1 subgroup=[3,7] dst=[3] ports=[6269]
    "#]],
    );
}

#[test]
fn three_attention_two_ffn_only_under_latest() {
    check(
        3,
        2,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,2,3] dst=[] ports=[6269]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,4] dst=[] ports=[6269]
        A0 world=2 p2p=2 sg=0 ris=1 subgroup=[0,2,3] dst=[0] ports=[6269]
        A1 world=3 p2p=3 sg=0 ris=2 subgroup=[0,2,3] dst=[1] ports=[6269]
        A2 world=4 p2p=- sg=1 ris=1 subgroup=[1,4] dst=[] ports=[6269]
    "#]],
    );
    check(
        3,
        2,
        "v0.26",
        expect![[r#"
        exit 2: error: 3A2F has no mapping under rule set v0.26: P2pNcclAFDConnector under rule set v0.26 requires num_attention_ranks to be a multiple of num_ffn_ranks, got 3 % 2 = 1 (afd-spec §1.4 rule 6)
    "#]],
    );
}

#[test]
fn five_attention_three_ffn_only_under_latest() {
    check(
        5,
        3,
        "latest",
        expect![[r#"
        F0 world=0 p2p=0 sg=0 ris=0 subgroup=[0,3,4] dst=[] ports=[6269]
        F1 world=1 p2p=1 sg=1 ris=0 subgroup=[1,5,6] dst=[] ports=[6269]
        F2 world=2 p2p=2 sg=2 ris=0 subgroup=[2,7] dst=[] ports=[6269]
        A0 world=3 p2p=3 sg=0 ris=1 subgroup=[0,3,4] dst=[0] ports=[6269]
        A1 world=4 p2p=4 sg=0 ris=2 subgroup=[0,3,4] dst=[1] ports=[6269]
        A2 world=5 p2p=5 sg=1 ris=1 subgroup=[1,5,6] dst=[2] ports=[6269]
        A3 world=6 p2p=- sg=1 ris=2 subgroup=[1,5,6] dst=[] ports=[6269]
        A4 world=7 p2p=- sg=2 ris=1 subgroup=[2,7] dst=[] ports=[6269]
    "#]],
    );
    check(
        5,
        3,
        "v0.26",
        expect![[r#"
        exit 2: error: 5A3F has no mapping under rule set v0.26: P2pNcclAFDConnector under rule set v0.26 requires num_attention_ranks to be a multiple of num_ffn_ranks, got 5 % 3 = 2 (afd-spec §1.4 rule 6)
    "#]],
    );
}

#[test]
fn fewer_attention_than_ffn_ranks_is_refused() {
    check(
        1,
        2,
        "latest",
        expect![[r#"
        exit 2: error: 1A2F has no mapping under rule set latest: P2pNcclAFDConnector requires num_attention_ranks >= num_ffn_ranks, got 1 < 2 (afd-spec §1.4 rule 5)
    "#]],
    );
}

#[test]
fn dp_and_tp_give_each_process_its_coordinates() {
    let run = afd_sim(&[
        "topology",
        "--attention-dp",
        "1",
        "--attention-tp",
        "2",
        "--ffn-dp",
        "2",
        "--json",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let coordinates: Vec<String> = json(&run)["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{}{} dp{} tp{}",
                r["role"], r["role_rank"], r["dp_rank"], r["tp_rank"]
            )
        })
        .collect();
    assert_eq!(
        coordinates,
        [
            "\"ffn\"0 dp0 tp0",
            "\"ffn\"1 dp1 tp0",
            "\"attention\"0 dp0 tp0",
            "\"attention\"1 dp0 tp1"
        ]
    );
    let text = afd_sim(&[
        "topology",
        "--attention-dp",
        "2",
        "--attention-tp",
        "2",
        "--ffn-ranks",
        "2",
    ]);
    expect![[r#"
        4A2F under rule set latest: control group of 4 ranks, rendezvous port 1239 (world, control and subgroup stores share it)

        proc  dp  tp  world  p2p  subgroup  rank-in-sg  subgroup-world-ranks  control-dst  ports
        F0    -   -   0      0    0         0           (0,2,3)               -            1239
        F1    -   -   1      1    1         0           (1,4,5)               -            1239
        A0    0   0   2      2    0         1           (0,2,3)               F0           1239
        A1    0   1   3      3    0         2           (0,2,3)               F1           1239
        A2    1   0   4      -    1         1           (1,4,5)               -            1239
        A3    1   1   5      -    1         2           (1,4,5)               -            1239
    "#]].assert_eq(&text.stdout);
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["topology"][..],
        &["topology", "--attention-ranks", "2"],
        &[
            "topology",
            "--attention-ranks",
            "2",
            "--attention-dp",
            "2",
            "--ffn-ranks",
            "1",
        ],
        &["topology", "--attention-dp", "0", "--ffn-ranks", "1"],
        &[
            "topology",
            "--attention-ranks",
            "2",
            "--ffn-ranks",
            "1",
            "--rules",
            "0.25",
        ],
        &[
            "topology",
            "--attention-ranks",
            "600000",
            "--ffn-ranks",
            "600000",
        ],
        &["topology", "--attention-ranks", "-1", "--ffn-ranks", "1"],
    ] {
        let run = afd_sim(args);
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stdout.is_empty(), "{args:?}");
        assert!(!run.stderr.is_empty(), "{args:?}");
    }
}
