//! The mapping lines of the seed recipe's pair and of the fault that skews them.

use afd_sim::topology::{Role, RuleSet, Topology};
use expect_test::expect;

use super::*;

#[test]
fn seed_recipe_pair_lines() {
    let topology = Topology::new(2, 2, RuleSet::Latest, 6269).expect("2A2F is legal");
    let mut out = lines(&topology, Role::Ffn, 2, false);
    out.extend(lines(&topology, Role::Attention, 2, false));
    expect![[r#"
        AFD rank mapping: role=ffn role_rank=0 dp_rank=0 tp_rank=0 world_rank=0 p2p_rank=0 subgroup_index=0 rank_in_subgroup=0 subgroup_world_ranks=[0,2] control_destinations=[] ports=[6269]
        AFD rank mapping: role=ffn role_rank=1 dp_rank=0 tp_rank=1 world_rank=1 p2p_rank=1 subgroup_index=1 rank_in_subgroup=0 subgroup_world_ranks=[1,3] control_destinations=[] ports=[6269]
        AFD rank mapping: role=attention role_rank=0 dp_rank=0 tp_rank=0 world_rank=2 p2p_rank=2 subgroup_index=0 rank_in_subgroup=1 subgroup_world_ranks=[0,2] control_destinations=[0] ports=[6269]
        AFD rank mapping: role=attention role_rank=1 dp_rank=0 tp_rank=1 world_rank=3 p2p_rank=3 subgroup_index=1 rank_in_subgroup=1 subgroup_world_ranks=[1,3] control_destinations=[1] ports=[6269]"#]]
    .assert_eq(&out.join("\n"));
}

#[test]
fn four_attention_two_ffn_v026_has_ranks_outside_the_control_group() {
    let topology = Topology::new(4, 2, RuleSet::V026, 7000).expect("4A2F is legal at v0.26");
    expect![[r#"
        AFD rank mapping: role=attention role_rank=0 dp_rank=0 tp_rank=0 world_rank=2 p2p_rank=2 subgroup_index=0 rank_in_subgroup=1 subgroup_world_ranks=[0,2,3] control_destinations=[0] ports=[7000,7001]
        AFD rank mapping: role=attention role_rank=1 dp_rank=1 tp_rank=0 world_rank=3 p2p_rank=3 subgroup_index=0 rank_in_subgroup=2 subgroup_world_ranks=[0,2,3] control_destinations=[1] ports=[7000,7001]
        AFD rank mapping: role=attention role_rank=2 dp_rank=2 tp_rank=0 world_rank=4 p2p_rank=none subgroup_index=1 rank_in_subgroup=1 subgroup_world_ranks=[1,4,5] control_destinations=[] ports=[7000,7002]
        AFD rank mapping: role=attention role_rank=3 dp_rank=3 tp_rank=0 world_rank=5 p2p_rank=none subgroup_index=1 rank_in_subgroup=2 subgroup_world_ranks=[1,4,5] control_destinations=[] ports=[7000,7002]"#]]
    .assert_eq(&lines(&topology, Role::Attention, 1, false).join("\n"));
}

#[test]
fn wrong_order_fault_changes_only_world_ranks() {
    let topology = Topology::new(2, 2, RuleSet::Latest, 6269).expect("2A2F is legal");
    let right = lines(&topology, Role::Attention, 2, false);
    let wrong = lines(&topology, Role::Attention, 2, true);
    assert_ne!(right, wrong);
    for (r, w) in right.iter().zip(&wrong) {
        let differing: Vec<_> = r
            .split(' ')
            .zip(w.split(' '))
            .filter(|(a, b)| a != b)
            .collect();
        assert_eq!(differing.len(), 1, "{r}\n{w}");
        assert!(differing[0].0.starts_with("world_rank="));
    }
}
