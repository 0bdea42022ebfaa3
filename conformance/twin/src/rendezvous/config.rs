//! What the two twins compare at the rendezvous: each role's configuration as it tells the
//! other ([`PeerConfig`], with its JSON form), and the fields that must agree ([`compare`]). Pure:
//! no sockets here.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Value, json};

use afd_sim::topology::{Role, RuleSet};

use super::PROTOCOL_VERSION;
use crate::launch::LaunchedRole;

/// What each twin tells the other about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerConfig {
    pub role: Role,
    pub connector: String,
    pub afd_host: String,
    pub afd_port: u16,
    pub num_attention_ranks: u32,
    pub num_ffn_ranks: u32,
    pub async_dp: bool,
    pub compute_gate_on_attention: bool,
    pub rules: RuleSet,
    pub data_parallel_size: u32,
    pub tensor_parallel_size: u32,
    /// HTTP bind address as the process resolved it (`host:port`).
    pub http_addr: String,
    pub model: String,
    /// The role's `vllm serve` words and the environment the deployment model reads, so the peer can
    /// run `afd-sim check` on the pair.
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

impl PeerConfig {
    pub fn new(launched: &LaunchedRole, http_addr: String) -> PeerConfig {
        PeerConfig {
            role: launched.role,
            connector: launched.connector.clone(),
            afd_host: launched.afd_host.clone(),
            afd_port: launched.afd_port,
            num_attention_ranks: launched.topology.attention_ranks(),
            num_ffn_ranks: launched.topology.ffn_ranks(),
            async_dp: launched.async_dp,
            compute_gate_on_attention: launched.compute_gate_on_attention,
            rules: launched.rules,
            data_parallel_size: launched.config.dp_size(),
            tensor_parallel_size: launched.config.tp_size(),
            http_addr,
            model: launched.model.clone(),
            args: launched.args.clone(),
            env: launched.env.clone(),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "type": "hello",
            "protocol": PROTOCOL_VERSION,
            "role": self.role.as_str(),
            "connector": self.connector,
            "host": self.afd_host,
            "port": self.afd_port,
            "num_attention_ranks": self.num_attention_ranks,
            "num_ffn_ranks": self.num_ffn_ranks,
            "async_dp": self.async_dp,
            "compute_gate_on_attention": self.compute_gate_on_attention,
            "rules": self.rules.as_str(),
            "data_parallel_size": self.data_parallel_size,
            "tensor_parallel_size": self.tensor_parallel_size,
            "http_addr": self.http_addr,
            "model": self.model,
            "args": self.args,
            "env": self.env,
        })
    }

    pub(super) fn from_json(value: &Value) -> Result<PeerConfig, String> {
        let text = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| format!("hello lacks string field '{key}'"))
        };
        let number = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_u64)
                .ok_or_else(|| format!("hello lacks integer field '{key}'"))
        };
        let flag = |key: &str| {
            value
                .get(key)
                .and_then(Value::as_bool)
                .ok_or_else(|| format!("hello lacks boolean field '{key}'"))
        };
        let small = |key: &str| {
            number(key).and_then(|n| u32::try_from(n).map_err(|_| format!("'{key}' out of range")))
        };
        let protocol = number("protocol")?;
        if protocol != PROTOCOL_VERSION {
            return Err(format!(
                "peer speaks rendezvous protocol {protocol}, this twin speaks {PROTOCOL_VERSION}"
            ));
        }
        let role = match text("role")?.as_str() {
            "attention" => Role::Attention,
            "ffn" => Role::Ffn,
            other => return Err(format!("hello has unknown role '{other}'")),
        };
        let rules = RuleSet::parse(&text("rules")?).ok_or("hello has unknown rule set")?;
        let args = value
            .get("args")
            .and_then(Value::as_array)
            .ok_or("hello lacks 'args'")?
            .iter()
            .map(|a| {
                a.as_str()
                    .map(str::to_owned)
                    .ok_or("hello 'args' must be strings")
            })
            .collect::<Result<Vec<_>, _>>()?;
        let env = match value.get("env") {
            Some(Value::Object(env)) => env
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|v| (k.clone(), v.to_owned()))
                        .ok_or("hello 'env' values must be strings")
                })
                .collect::<Result<BTreeMap<_, _>, _>>()?,
            _ => return Err("hello lacks 'env'".to_owned()),
        };
        Ok(PeerConfig {
            role,
            connector: text("connector")?,
            afd_host: text("host")?,
            afd_port: u16::try_from(number("port")?).map_err(|_| "'port' out of range")?,
            num_attention_ranks: small("num_attention_ranks")?,
            num_ffn_ranks: small("num_ffn_ranks")?,
            async_dp: flag("async_dp")?,
            compute_gate_on_attention: flag("compute_gate_on_attention")?,
            rules,
            data_parallel_size: small("data_parallel_size")?,
            tensor_parallel_size: small("tensor_parallel_size")?,
            http_addr: text("http_addr")?,
            model: text("model")?,
            args,
            env,
        })
    }
}

/// One field on which the two roles disagree.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// The `afd` key (or `role`, `rules`) at fault.
    pub field: &'static str,
    pub local_role: Role,
    pub local: String,
    pub peer_role: Role,
    pub peer: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field == "role" {
            return write!(
                f,
                "role: both processes have role {} (role clash; one must be attention and one ffn)",
                self.local
            );
        }
        write!(
            f,
            "{}: the {} twin has {}, the {} twin has {}",
            self.field, self.local_role, self.local, self.peer_role, self.peer
        )
    }
}

/// Fields that must agree between the roles (afd-spec §1.2, DESIGN §3 cross-role rules), role first.
pub fn compare(local: &PeerConfig, peer: &PeerConfig) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let mut check = |field: &'static str, a: String, b: String, equal: bool| {
        if !equal {
            out.push(Mismatch {
                field,
                local_role: local.role,
                local: a,
                peer_role: peer.role,
                peer: b,
            });
        }
    };
    check(
        "role",
        local.role.to_string(),
        peer.role.to_string(),
        local.role != peer.role,
    );
    let same = |a: &dyn fmt::Display, b: &dyn fmt::Display| (a.to_string(), b.to_string());
    for (field, (a, b)) in [
        ("connector", same(&local.connector, &peer.connector)),
        ("host", same(&local.afd_host, &peer.afd_host)),
        ("port", same(&local.afd_port, &peer.afd_port)),
        (
            "num_attention_ranks",
            same(&local.num_attention_ranks, &peer.num_attention_ranks),
        ),
        (
            "num_ffn_ranks",
            same(&local.num_ffn_ranks, &peer.num_ffn_ranks),
        ),
        ("async_dp", same(&local.async_dp, &peer.async_dp)),
        (
            "compute_gate_on_attention",
            same(
                &local.compute_gate_on_attention,
                &peer.compute_gate_on_attention,
            ),
        ),
        ("rules", same(&local.rules, &peer.rules)),
    ] {
        let equal = a == b;
        check(field, a, b, equal);
    }
    out
}
