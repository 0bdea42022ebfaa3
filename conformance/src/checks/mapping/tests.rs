//! Tests of the live rank-mapping checks: logged lines are compared field by field with
//! `afd_sim::topology`'s mapping.

use std::io::Write as _;

use afd_sim::topology::RuleSet;

use super::*;

/// The line the twin prints for 2A2F rank A1 (its `rank_log` format).
const TWIN_LINE: &str = "2026-01-01T00:00:00Z  INFO afd_twin: AFD rank mapping: role=attention role_rank=1 dp_rank=0 tp_rank=1 world_rank=3 p2p_rank=3 subgroup_index=1 rank_in_subgroup=1 subgroup_world_ranks=[1,3] control_destinations=[1] ports=[6269]";

#[test]
fn log_lines_parse_into_fields() {
    let logged = parse_log(&format!("noise\n\u{1b}[32m{TWIN_LINE}\u{1b}[0m\n"));
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].line, 2);
    let topology = Topology::new(2, 2, RuleSet::Latest, 6269).expect("2A2F");
    let expected = expected_fields(&topology.rank(Role::Attention, 1).expect("A1"), 2);
    assert_eq!(logged[0].fields, expected);
}

fn log_file(lines: &[&str]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    for line in lines {
        writeln!(file, "{line}").expect("write");
    }
    file
}

#[test]
fn log_check_names_the_wrong_field_and_missing_ranks() {
    let topology = Ok(Topology::new(2, 2, RuleSet::Latest, 6269).expect("2A2F"));
    let wrong = TWIN_LINE.replace("world_rank=3", "world_rank=1");
    let file = log_file(&[&wrong]);
    let outcome = log_check(
        Some(file.path()),
        Role::Attention,
        2,
        &topology,
        "--attention-log",
    );
    assert_eq!(outcome.status, crate::report::Status::Fail);
    assert!(
        outcome
            .message
            .contains("logs world_rank=1, the mapping gives world_rank=3"),
        "{}",
        outcome.message
    );
    assert!(
        outcome.message.ends_with("(and 1 more)"),
        "{}",
        outcome.message
    );

    let file = log_file(&["Application startup complete."]);
    let outcome = log_check(
        Some(file.path()),
        Role::Attention,
        2,
        &topology,
        "--attention-log",
    );
    assert_eq!(outcome.status, crate::report::Status::Indeterminate);
    let outcome = log_check(None, Role::Ffn, 1, &topology, "--ffn-log");
    assert_eq!(outcome.status, crate::report::Status::Skipped);
}

#[test]
fn a_full_correct_log_passes() {
    let topology = Topology::new(4, 2, RuleSet::V026, 6269).expect("4A2F");
    let lines: Vec<String> = (0..4)
        .map(|r| {
            let fields = expected_fields(&topology.rank(Role::Attention, r).expect("rank"), 1);
            let order = [
                "role",
                "role_rank",
                "dp_rank",
                "tp_rank",
                "world_rank",
                "p2p_rank",
                "subgroup_index",
                "rank_in_subgroup",
                "subgroup_world_ranks",
                "control_destinations",
                "ports",
            ];
            let pairs: Vec<String> = order
                .iter()
                .map(|k| format!("{k}={}", fields[*k]))
                .collect();
            format!("{LOG_MARKER}{}", pairs.join(" "))
        })
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let file = log_file(&refs);
    let outcome = log_check(
        Some(file.path()),
        Role::Attention,
        1,
        &Ok(topology),
        "--attention-log",
    );
    assert_eq!(outcome.status, crate::report::Status::Pass, "{outcome:?}");
}

proptest::proptest! {
    #[test]
    fn mangled_logs_never_panic(text in "([ -~\u{1b}]{0,60}(AFD rank mapping: )?[ -~=\\[\\],]{0,60}\n){0,8}") {
        let topology = Ok(Topology::new(2, 2, RuleSet::Latest, 6269).expect("2A2F"));
        let file = log_file(&[&text]);
        let _ = parse_log(&text);
        let _ = log_check(Some(file.path()), Role::Attention, 2, &topology, "--attention-log");
    }
}
