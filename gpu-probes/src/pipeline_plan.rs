//! The pure parts of the `pipeline` probe: which configurations run, how a step splits into ubatches,
//! the control message (afd-spec §3.4), the routing each FFN layer sees, and a checksum to compare
//! what the FFN sent with what the Attention rank received.

use std::collections::BTreeMap;

use afd_traces::pipeline::LayerRouting;

use crate::model::ModelShape;
use crate::routing::{Routing, RoutingPlan, draw};

/// One measured configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub tokens: usize,
    pub context: usize,
    pub dbo: bool,
    pub graph: bool,
}

impl Config {
    /// Rows of each ubatch: `[T]`, or with DBO `[T/2, T − T/2]` (split at padded/2, afd-spec §4.2).
    pub fn ubatches(&self) -> Vec<usize> {
        if self.dbo {
            vec![self.tokens / 2, self.tokens - self.tokens / 2]
        } else {
            vec![self.tokens]
        }
    }
}

/// Every configuration, context-major; DBO is skipped where it cannot split (T < 2, afd-spec §4.2).
pub fn configs(
    tokens: &[u64],
    contexts: &[u64],
    dbo_modes: &[bool],
    graph_modes: &[bool],
) -> Vec<Config> {
    let mut out = Vec::new();
    for &context in contexts {
        for &t in tokens {
            for &dbo in dbo_modes {
                if dbo && t < 2 {
                    continue;
                }
                for &graph in graph_modes {
                    out.push(Config {
                        tokens: t as usize,
                        context: context as usize,
                        dbo,
                        graph,
                    });
                }
            }
        }
    }
    out
}

/// The control payload's JSON: per stage the token vector and its maximum, plus the warm-up and
/// capture flags, compact with sorted keys as the plugin encodes it (afd-spec §3.4, DP = 1).
pub fn control_payload(ubatches: &[usize]) -> String {
    let mut map = serde_json::Map::new();
    for (stage, &rows) in ubatches.iter().enumerate() {
        map.insert(
            stage.to_string(),
            serde_json::json!({
                "max_tokens_across_dp_cpu": rows,
                "num_tokens_across_dp_cpu": [rows],
            }),
        );
    }
    map.insert(
        "is_graph_capturing".to_owned(),
        serde_json::Value::Bool(false),
    );
    map.insert("is_warmup".to_owned(), serde_json::Value::Bool(false));
    serde_json::Value::Object(map).to_string()
}

/// Why a received control payload is unusable.
#[derive(Debug, thiserror::Error)]
#[error("control payload {payload:?}: {problem}")]
pub struct ControlError {
    payload: String,
    problem: String,
}

/// The rows per stage a control payload announces (what the FFN rank reads before a step).
pub fn parse_control_payload(bytes: &[u8]) -> Result<Vec<usize>, ControlError> {
    let payload = String::from_utf8_lossy(bytes).into_owned();
    let error = |problem: &str| ControlError {
        payload: payload.clone(),
        problem: problem.to_owned(),
    };
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| error(&e.to_string()))?;
    let object = value
        .as_object()
        .ok_or_else(|| error("not a JSON object"))?;
    let mut stages: BTreeMap<usize, usize> = BTreeMap::new();
    for (key, entry) in object {
        let Ok(stage) = key.parse::<usize>() else {
            continue;
        };
        let rows = entry
            .get("num_tokens_across_dp_cpu")
            .and_then(|v| v.as_array())
            .and_then(|v| v.first())
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| error(&format!("stage {stage} has no num_tokens_across_dp_cpu")))?;
        stages.insert(stage, rows as usize);
    }
    if stages.is_empty() || stages.keys().enumerate().any(|(i, &k)| i != k) {
        return Err(error("stages must be numbered 0, 1, …"));
    }
    Ok(stages.into_values().collect())
}

/// Seed of a configuration's routing draws (independent of context and graph mode, so those variants
/// see the same routing).
pub fn routing_seed(seed: u64, config: &Config) -> u64 {
    seed ^ ((config.tokens as u64) << 32) ^ (u64::from(config.dbo) << 63)
}

/// Routing plans of every MoE layer (index `layer - dense_layers`) and ubatch of a configuration.
pub fn routing_plans(
    shape: &ModelShape,
    routing: Routing,
    seed: u64,
    config: &Config,
) -> Vec<Vec<RoutingPlan>> {
    let seed = routing_seed(seed, config);
    let ubatches = config.ubatches();
    (shape.dense_layers..shape.num_layers)
        .map(|layer| {
            ubatches
                .iter()
                .enumerate()
                .map(|(stage, &rows)| {
                    let choices = draw(
                        routing,
                        shape.n_routed_experts,
                        shape.experts_per_token,
                        rows,
                        seed,
                        (layer * 4 + stage) as u64,
                    );
                    RoutingPlan::new(&choices, shape.n_routed_experts)
                })
                .collect()
        })
        .collect()
}

/// The routing record of a configuration.
pub fn routing_record(shape: &ModelShape, plans: &[Vec<RoutingPlan>]) -> Vec<LayerRouting> {
    plans
        .iter()
        .enumerate()
        .flat_map(|(i, stages)| {
            stages
                .iter()
                .enumerate()
                .map(move |(stage, plan)| LayerRouting {
                    layer: (shape.dense_layers + i) as u32,
                    ubatch: stage as u32,
                    active_experts: plan.active.len() as u32,
                    max_tokens_per_expert: plan.max_tokens_per_expert as u32,
                })
        })
        .collect()
}

/// FNV-1a over 16-bit words, folded to 32 bits (exact in an f64).
pub fn checksum(words: &[u16]) -> u32 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for w in words {
        for byte in w.to_le_bytes() {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (hash ^ (hash >> 32)) as u32
}

#[cfg(test)]
mod tests;
