//! Rank mapping of an AFD deployment (afd-spec §2): role ranks, the FFN-first NCCL world, subgroups,
//! the control-plane (p2p) group, metadata destinations and rendezvous ports, as pure functions.
//!
//! Only the `P2pNcclAFDConnector` mapping is modelled (§2.2–§2.5); the fan-out fork (§2.6) and the
//! NPU connectors (§2.7) are out of scope. Nothing here reads configuration files or flags: callers
//! hand in rank counts and get a [`Topology`] back, or the reason the counts are illegal.

use std::fmt;

/// Which of the two `vllm serve` processes a rank belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Attention,
    Ffn,
}

impl Role {
    /// The spelling the plugin uses in `"role"` (`"attention"` or `"ffn"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Attention => "attention",
            Role::Ffn => "ffn",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The plugin version whose rules a deployment is judged by (DESIGN §3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleSet {
    /// Plugin HEAD `2e4378f` (vLLM 0.26): `A % F == 0`, subgroup stores on `port + k + 1` (§2.2, §2.3).
    V026,
    /// The newer plugin the seed recipe was written for: block partition of §2.5, no derived ports.
    #[default]
    Latest,
}

impl RuleSet {
    /// The name used on the command line and in JSON (`v0.26` or `latest`).
    pub fn as_str(self) -> &'static str {
        match self {
            RuleSet::V026 => "v0.26",
            RuleSet::Latest => "latest",
        }
    }

    /// Parses `v0.26` / `0.26` / `latest`.
    pub fn parse(text: &str) -> Option<RuleSet> {
        match text.trim() {
            "v0.26" | "0.26" | "v026" => Some(RuleSet::V026),
            "latest" => Some(RuleSet::Latest),
            _ => None,
        }
    }
}

impl fmt::Display for RuleSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a pair of rank counts has no mapping under a rule set (afd-spec §1.4 rules 5, 6, 9, 10).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    #[error("num_attention_ranks must be positive, got {0}")]
    NoAttentionRanks(u32),
    #[error("num_ffn_ranks must be positive, got {0}")]
    NoFfnRanks(u32),
    #[error(
        "P2pNcclAFDConnector requires num_attention_ranks >= num_ffn_ranks, got {attention} < {ffn} (afd-spec §1.4 rule 5)"
    )]
    FewerAttentionThanFfn { attention: u32, ffn: u32 },
    #[error(
        "P2pNcclAFDConnector under rule set v0.26 requires num_attention_ranks to be a multiple of num_ffn_ranks, got {attention} % {ffn} = {remainder} (afd-spec §1.4 rule 6)"
    )]
    NotAMultiple {
        attention: u32,
        ffn: u32,
        remainder: u32,
    },
    #[error("role rank {rank} is out of range for a {role} role of {size} ranks (afd-spec §2.1)")]
    RoleRankOutOfRange { role: Role, rank: u32, size: u32 },
}

/// The place of one process in the AFD groups (one row of the worked tables in afd-spec §2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RankInfo {
    pub role: Role,
    /// Rank inside its role, `0..A` or `0..F` (§2.1).
    pub role_rank: u32,
    /// Rank in the `afd` NCCL world of size `A + F`, FFN ranks first (§2.2).
    pub world_rank: u32,
    /// Rank in the `p2p` control group, or `None` for an Attention rank outside it (§2.2).
    pub p2p_rank: Option<u32>,
    /// The data-plane subgroup this rank belongs to; equals the FFN rank that heads it.
    pub subgroup_index: u32,
    /// Position inside the subgroup: 0 for the FFN head, 1.. for Attention peers in order.
    pub rank_in_subgroup: u32,
    /// World ranks of the subgroup, FFN head first.
    pub subgroup_world_ranks: Vec<u32>,
    /// FFN role ranks this rank sends the per-step control payload to (§2.2, §3.4).
    pub control_destinations: Vec<u32>,
    /// TCP ports on the rendezvous host this rank uses: the world/control store first, then (v0.26 only)
    /// its subgroup store at `port + k + 1` (§2.3).
    pub ports: Vec<u16>,
}

/// The full rank mapping for `A` Attention and `F` FFN ranks under one rule set.
///
/// Invariant: `1 <= F <= A`, and under [`RuleSet::V026`] `A % F == 0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    attention_ranks: u32,
    ffn_ranks: u32,
    rules: RuleSet,
    base_port: u16,
}

impl Topology {
    /// Checks the counts against the rule set's connector rules (afd-spec §1.4, §1.9, §2.5).
    pub fn new(
        attention_ranks: u32,
        ffn_ranks: u32,
        rules: RuleSet,
        base_port: u16,
    ) -> Result<Topology, TopologyError> {
        // Rule order follows `validate_afd_config` (§1.4): rule 5 (A >= F) is checked before the
        // positivity rules, so 0A1F reports rule 5 as the plugin does. F == 0 would divide by zero
        // in the plugin's rule 6; we report it as rule 10 instead.
        if attention_ranks < ffn_ranks {
            return Err(TopologyError::FewerAttentionThanFfn {
                attention: attention_ranks,
                ffn: ffn_ranks,
            });
        }
        if attention_ranks == 0 {
            return Err(TopologyError::NoAttentionRanks(attention_ranks));
        }
        if ffn_ranks == 0 {
            return Err(TopologyError::NoFfnRanks(ffn_ranks));
        }
        if rules == RuleSet::V026 && !attention_ranks.is_multiple_of(ffn_ranks) {
            return Err(TopologyError::NotAMultiple {
                attention: attention_ranks,
                ffn: ffn_ranks,
                remainder: attention_ranks % ffn_ranks,
            });
        }
        Ok(Topology {
            attention_ranks,
            ffn_ranks,
            rules,
            base_port,
        })
    }

    pub fn attention_ranks(&self) -> u32 {
        self.attention_ranks
    }

    pub fn ffn_ranks(&self) -> u32 {
        self.ffn_ranks
    }

    pub fn rules(&self) -> RuleSet {
        self.rules
    }

    pub fn base_port(&self) -> u16 {
        self.base_port
    }

    /// Subgroup (= FFN rank) that Attention rank `a` joins: `a // ratio` at v0.26, `a·F // A` in the
    /// block partition of §2.5; both agree when `F` divides `A`.
    pub fn subgroup_of_attention(&self, attention_rank: u32) -> u32 {
        let (a, f) = (u64::from(self.attention_ranks), u64::from(self.ffn_ranks));
        let rank = u64::from(attention_rank);
        u32::try_from(rank * f / a).expect("subgroup index is below F, which fits in u32")
    }

    /// Attention role ranks of subgroup `g`, as the half-open range `[ceil(g·A/F), ceil((g+1)·A/F))`.
    pub fn attention_block(&self, subgroup: u32) -> std::ops::Range<u32> {
        let (a, f) = (u64::from(self.attention_ranks), u64::from(self.ffn_ranks));
        let g = u64::from(subgroup);
        let start = (g * a).div_ceil(f);
        let end = ((g + 1) * a).div_ceil(f);
        let narrow =
            |x: u64| u32::try_from(x).expect("block bounds are at most A, which fits in u32");
        narrow(start)..narrow(end)
    }

    /// Size of the control (`p2p`) group: all FFN ranks plus Attention ranks `0..F` (§2.2).
    pub fn control_group_size(&self) -> u32 {
        2 * self.ffn_ranks
    }

    /// Ports of the rendezvous host the pair listens on during connector init (§2.3): the base port,
    /// then `port + k + 1` for each subgroup under v0.26. Ports past 65535 are left out.
    pub fn rendezvous_ports(&self) -> Vec<u16> {
        let mut ports = vec![self.base_port];
        if self.rules == RuleSet::V026 {
            ports.extend((0..self.ffn_ranks).filter_map(|k| self.subgroup_port(k)));
        }
        ports
    }

    /// Port of subgroup `k`'s store under v0.26 (`port + k + 1`), `None` under `latest` or on overflow.
    pub fn subgroup_port(&self, subgroup: u32) -> Option<u16> {
        match self.rules {
            RuleSet::V026 => u16::try_from(u32::from(self.base_port) + subgroup + 1).ok(),
            RuleSet::Latest => None,
        }
    }

    /// The row for one process.
    pub fn rank(&self, role: Role, role_rank: u32) -> Result<RankInfo, TopologyError> {
        let size = match role {
            Role::Attention => self.attention_ranks,
            Role::Ffn => self.ffn_ranks,
        };
        if role_rank >= size {
            return Err(TopologyError::RoleRankOutOfRange {
                role,
                rank: role_rank,
                size,
            });
        }
        let f = self.ffn_ranks;
        let (world_rank, p2p_rank, subgroup_index, rank_in_subgroup, control_destinations) =
            match role {
                Role::Ffn => (role_rank, Some(role_rank), role_rank, 0, Vec::new()),
                Role::Attention => {
                    let subgroup = self.subgroup_of_attention(role_rank);
                    let position = role_rank - self.attention_block(subgroup).start + 1;
                    // Only Attention ranks 0..F join the control group; rank r pairs with FFN rank r,
                    // independent of its data-plane subgroup (§2.2 "Consequences").
                    let (p2p, destinations) = if role_rank < f {
                        (Some(f + role_rank), vec![role_rank])
                    } else {
                        (None, Vec::new())
                    };
                    (f + role_rank, p2p, subgroup, position, destinations)
                }
            };
        let mut ports = vec![self.base_port];
        ports.extend(self.subgroup_port(subgroup_index));
        Ok(RankInfo {
            role,
            role_rank,
            world_rank,
            p2p_rank,
            subgroup_index,
            rank_in_subgroup,
            subgroup_world_ranks: self.subgroup_world_ranks(subgroup_index),
            control_destinations,
            ports,
        })
    }

    /// World ranks of subgroup `g`: FFN rank `g`, then its Attention block shifted by `F`.
    pub fn subgroup_world_ranks(&self, subgroup: u32) -> Vec<u32> {
        let f = self.ffn_ranks;
        std::iter::once(subgroup)
            .chain(self.attention_block(subgroup).map(|a| f + a))
            .collect()
    }

    /// Every process, FFN ranks first then Attention ranks, each by role rank (the world order).
    pub fn ranks(&self) -> Vec<RankInfo> {
        let ffn = (0..self.ffn_ranks).map(|r| (Role::Ffn, r));
        let attention = (0..self.attention_ranks).map(|r| (Role::Attention, r));
        ffn.chain(attention)
            .map(|(role, r)| {
                self.rank(role, r)
                    .expect("role ranks enumerated below the role size are in range")
            })
            .collect()
    }

    /// Rows FFN rank `ffn` receives from each subgroup peer per stage (§3.5): the per-Attention-rank
    /// token vector is first expanded across TP when shorter than `A`, then each peer contributes
    /// `max(1, count)` rows (an idle rank still sends one dummy row, §3.8).
    ///
    /// Returns `None` when `counts` can be neither used as is nor expanded (its length must equal `A`
    /// or divide it).
    pub fn ffn_receive_rows(&self, ffn: u32, counts: &[u32]) -> Option<Vec<u32>> {
        let expanded = expand_across_tp(counts, self.attention_ranks)?;
        Some(
            self.attention_block(ffn)
                .map(|a| expanded[a as usize].max(1))
                .collect(),
        )
    }
}

/// Expands a per-DP token vector to one entry per Attention rank by repeating each entry `A / len`
/// times (TP peers of one DP engine share its count, afd-spec §3.5).
pub fn expand_across_tp(counts: &[u32], attention_ranks: u32) -> Option<Vec<u32>> {
    let len = u32::try_from(counts.len()).ok()?;
    if len == attention_ranks {
        return Some(counts.to_vec());
    }
    if len == 0 || !attention_ranks.is_multiple_of(len) {
        return None;
    }
    let repeat = (attention_ranks / len) as usize;
    Some(
        counts
            .iter()
            .flat_map(|&c| std::iter::repeat_n(c, repeat))
            .collect(),
    )
}

/// A process's coordinates inside its role (afd-spec §2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParallelCoordinates {
    pub dp_rank: u32,
    pub pcp_rank: u32,
    pub tp_rank: u32,
}

/// Inverse of [`role_rank`]: the DP, PCP and TP ranks of `role_rank` for the given PCP and TP sizes
/// (a size of 0 is treated as 1).
pub fn parallel_coordinates(role_rank: u32, pcp_size: u32, tp_size: u32) -> ParallelCoordinates {
    let (pcp_size, tp_size) = (pcp_size.max(1), tp_size.max(1));
    ParallelCoordinates {
        dp_rank: role_rank / tp_size / pcp_size,
        pcp_rank: role_rank / tp_size % pcp_size,
        tp_rank: role_rank % tp_size,
    }
}

/// Role rank from the process's parallel coordinates: `(dp·PCP + pcp)·TP + tp` (afd-spec §2.1).
pub fn role_rank(dp_rank: u32, pcp_rank: u32, tp_rank: u32, pcp_size: u32, tp_size: u32) -> u64 {
    (u64::from(dp_rank) * u64::from(pcp_size) + u64::from(pcp_rank)) * u64::from(tp_size)
        + u64::from(tp_rank)
}

#[cfg(test)]
mod tests;
