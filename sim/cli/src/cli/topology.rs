//! `afd-sim topology`: the rank mapping of afd-spec §2 for A Attention and F FFN ranks, given as
//! counts or as DP × TP per role (then each process also shows its dp_rank and tp_rank).

use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

use afd_sim::deployment::afd_config::DEFAULT_AFD_PORT;
use afd_sim::topology::{RankInfo, Role, RuleSet, Topology, parallel_coordinates};

use crate::cli::output::{emit, json_text, table};
use crate::cli::parse_rule_set;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  afd-sim topology --attention-ranks 2 --ffn-ranks 2
  afd-sim topology --attention-ranks 4 --ffn-ranks 2 --rules v0.26 --port 6269
  afd-sim topology --attention-dp 1 --attention-tp 2 --ffn-dp 2 --ffn-tp 1 --json

Rows are FFN ranks first, then Attention ranks, each by role rank (the order of the afd world).
p2p is '-' for an Attention rank outside the control group. An illegal pair exits 2 with the reason.")]
pub(crate) struct TopologyArgs {
    /// Number of Attention ranks A (num_attention_ranks).
    #[arg(long, value_name = "A", conflicts_with_all = ["attention_dp", "attention_tp"])]
    attention_ranks: Option<u32>,
    /// Number of FFN ranks F (num_ffn_ranks).
    #[arg(long, value_name = "F", conflicts_with_all = ["ffn_dp", "ffn_tp"])]
    ffn_ranks: Option<u32>,
    /// Attention --data-parallel-size (with --attention-tp instead of --attention-ranks).
    #[arg(long, value_name = "DP")]
    attention_dp: Option<u32>,
    /// Attention --tensor-parallel-size.
    #[arg(long, value_name = "TP")]
    attention_tp: Option<u32>,
    /// FFN --data-parallel-size (with --ffn-tp instead of --ffn-ranks).
    #[arg(long, value_name = "DP")]
    ffn_dp: Option<u32>,
    /// FFN --tensor-parallel-size.
    #[arg(long, value_name = "TP")]
    ffn_tp: Option<u32>,
    /// Plugin version whose rules apply: v0.26 (A % F == 0, subgroup ports port+k+1) or latest.
    #[arg(long, value_name = "SET", default_value = "latest", value_parser = parse_rule_set)]
    rules: RuleSet,
    /// AFD rendezvous base port (the afd block's "port").
    #[arg(long, value_name = "PORT", default_value_t = DEFAULT_AFD_PORT)]
    port: u16,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// One role's size: a count, or DP × TP (then rows show coordinates).
#[derive(Clone, Copy, Debug)]
struct RoleShape {
    ranks: u32,
    dp_tp: Option<(u32, u32)>,
}

fn role_shape(
    role: &str,
    ranks: Option<u32>,
    dp: Option<u32>,
    tp: Option<u32>,
) -> anyhow::Result<RoleShape> {
    if let Some(ranks) = ranks {
        return Ok(RoleShape { ranks, dp_tp: None });
    }
    if dp.is_none() && tp.is_none() {
        bail!("give --{role}-ranks, or --{role}-dp and/or --{role}-tp");
    }
    let (dp, tp) = (dp.unwrap_or(1), tp.unwrap_or(1));
    if dp == 0 || tp == 0 {
        bail!("--{role}-dp and --{role}-tp must be positive, got {dp} and {tp}");
    }
    let ranks = dp
        .checked_mul(tp)
        .with_context(|| format!("--{role}-dp {dp} x --{role}-tp {tp} overflows"))?;
    Ok(RoleShape {
        ranks,
        dp_tp: Some((dp, tp)),
    })
}

pub(crate) fn run(args: &TopologyArgs) -> anyhow::Result<ExitCode> {
    let attention = role_shape(
        "attention",
        args.attention_ranks,
        args.attention_dp,
        args.attention_tp,
    )?;
    let ffn = role_shape("ffn", args.ffn_ranks, args.ffn_dp, args.ffn_tp)?;
    // The rows are enumerated, so bound them before building the mapping.
    if u64::from(attention.ranks) + u64::from(ffn.ranks) > 1 << 20 {
        bail!(
            "{} + {} ranks is more than this command prints (at most 1048576)",
            attention.ranks,
            ffn.ranks
        );
    }
    let topology =
        Topology::new(attention.ranks, ffn.ranks, args.rules, args.port).with_context(|| {
            format!(
                "{}A{}F has no mapping under rule set {}",
                attention.ranks, ffn.ranks, args.rules
            )
        })?;
    let ranks = topology.ranks();
    let shape_of = |role: Role| match role {
        Role::Attention => attention,
        Role::Ffn => ffn,
    };
    let text = if args.json {
        json_text(&to_json(&topology, &ranks, &shape_of))
    } else {
        to_table(&topology, &ranks, &shape_of)
    };
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn coordinates(shape: RoleShape, role_rank: u32) -> Option<(u32, u32)> {
    let (_, tp) = shape.dp_tp?;
    let c = parallel_coordinates(role_rank, 1, tp);
    Some((c.dp_rank, c.tp_rank))
}

fn to_json(topology: &Topology, ranks: &[RankInfo], shape_of: &dyn Fn(Role) -> RoleShape) -> Value {
    let rows: Vec<Value> = ranks
        .iter()
        .map(|rank| {
            let mut row = json!({
                "role": rank.role.as_str(),
                "role_rank": rank.role_rank,
                "world_rank": rank.world_rank,
                "p2p_rank": rank.p2p_rank,
                "subgroup_index": rank.subgroup_index,
                "rank_in_subgroup": rank.rank_in_subgroup,
                "subgroup_world_ranks": rank.subgroup_world_ranks,
                "control_destinations": rank.control_destinations,
                "ports": rank.ports,
            });
            if let Some((dp, tp)) = coordinates(shape_of(rank.role), rank.role_rank) {
                row["dp_rank"] = json!(dp);
                row["tp_rank"] = json!(tp);
            }
            row
        })
        .collect();
    json!({
        "attention_ranks": topology.attention_ranks(),
        "ffn_ranks": topology.ffn_ranks(),
        "rules": topology.rules().as_str(),
        "ranks": rows,
    })
}

fn to_table(
    topology: &Topology,
    ranks: &[RankInfo],
    shape_of: &dyn Fn(Role) -> RoleShape,
) -> String {
    let with_coordinates =
        shape_of(Role::Attention).dp_tp.is_some() || shape_of(Role::Ffn).dp_tp.is_some();
    let ports = topology.rendezvous_ports();
    let port_note = match topology.rules() {
        RuleSet::V026 => format!(
            "ports {} (world and control store on {}, subgroup k on port+k+1)",
            list(&ports),
            topology.base_port()
        ),
        RuleSet::Latest => format!(
            "port {} (world, control and subgroup stores share it)",
            topology.base_port()
        ),
    };
    let mut out = format!(
        "{}A{}F under rule set {}: control group of {} ranks, rendezvous {port_note}\n\n",
        topology.attention_ranks(),
        topology.ffn_ranks(),
        topology.rules(),
        topology.control_group_size(),
    );
    let mut header = vec!["proc".to_owned()];
    if with_coordinates {
        header.extend(["dp".to_owned(), "tp".to_owned()]);
    }
    header.extend(
        [
            "world",
            "p2p",
            "subgroup",
            "rank-in-sg",
            "subgroup-world-ranks",
            "control-dst",
            "ports",
        ]
        .map(str::to_owned),
    );
    let mut rows = vec![header];
    for rank in ranks {
        let tag = match rank.role {
            Role::Attention => 'A',
            Role::Ffn => 'F',
        };
        let mut row = vec![format!("{tag}{}", rank.role_rank)];
        if with_coordinates {
            match coordinates(shape_of(rank.role), rank.role_rank) {
                Some((dp, tp)) => row.extend([dp.to_string(), tp.to_string()]),
                None => row.extend(["-".to_owned(), "-".to_owned()]),
            }
        }
        let destinations = if rank.control_destinations.is_empty() {
            "-".to_owned()
        } else {
            rank.control_destinations
                .iter()
                .map(|f| format!("F{f}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        row.extend([
            rank.world_rank.to_string(),
            rank.p2p_rank
                .map_or_else(|| "-".to_owned(), |p| p.to_string()),
            rank.subgroup_index.to_string(),
            rank.rank_in_subgroup.to_string(),
            format!("({})", list(&rank.subgroup_world_ranks)),
            destinations,
            list(&rank.ports),
        ]);
        rows.push(row);
    }
    out.push_str(&table(&rows));
    out
}

fn list<T: ToString>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}
