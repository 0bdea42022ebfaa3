//! The start-up log lines that state the rank mapping, one per rank of the role (afd-spec §2), in a stable
//! `key=value` format the conformance suite parses:
//!
//! ```text
//! AFD rank mapping: role=attention role_rank=1 dp_rank=0 tp_rank=1 world_rank=3 p2p_rank=3 subgroup_index=1 rank_in_subgroup=1 subgroup_world_ranks=[1,3] control_destinations=[1] ports=[6269]
//! ```
//!
//! Keys are those of `afd-sim topology --json` plus `dp_rank` and `tp_rank`; `p2p_rank=none` for a rank
//! outside the control group; lists have no spaces. The line may carry a log prefix before `AFD rank
//! mapping: `. Only formatting lives here; the mapping is `afd_sim::topology`'s.

use afd_sim::topology::{Role, Topology};

/// The marker every mapping line contains.
pub const MARKER: &str = "AFD rank mapping: ";

fn list(values: &[impl ToString]) -> String {
    let items: Vec<String> = values.iter().map(ToString::to_string).collect();
    format!("[{}]", items.join(","))
}

/// One line per rank of `role`, by role rank. `wrong_world_order` (fault `wrong-rank-mapping-log`) prints
/// world ranks in the Attention-first order of CAMAsync (afd-spec §2.7) instead of the P2P order.
pub fn lines(
    topology: &Topology,
    role: Role,
    tensor_parallel_size: u32,
    wrong_world_order: bool,
) -> Vec<String> {
    let size = match role {
        Role::Attention => topology.attention_ranks(),
        Role::Ffn => topology.ffn_ranks(),
    };
    let tp = tensor_parallel_size.max(1);
    (0..size)
        .map(|role_rank| {
            let rank = topology
                .rank(role, role_rank)
                .expect("role ranks below the role size are in range");
            let world_rank = if wrong_world_order {
                match role {
                    Role::Attention => role_rank,
                    Role::Ffn => topology.attention_ranks() + role_rank,
                }
            } else {
                rank.world_rank
            };
            let p2p = rank
                .p2p_rank
                .map_or_else(|| "none".to_owned(), |r| r.to_string());
            format!(
                "{MARKER}role={role} role_rank={role_rank} dp_rank={} tp_rank={} world_rank={world_rank} p2p_rank={p2p} subgroup_index={} rank_in_subgroup={} subgroup_world_ranks={} control_destinations={} ports={}",
                role_rank / tp,
                role_rank % tp,
                rank.subgroup_index,
                rank.rank_in_subgroup,
                list(&rank.subgroup_world_ranks),
                list(&rank.control_destinations),
                list(&rank.ports),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests;
