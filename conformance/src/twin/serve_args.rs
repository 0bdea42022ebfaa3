//! The `vllm serve` command line of one role, as far as the twin needs it: model, parallel sizes, the
//! `--additional-config` `afd` block (afd-spec §1.2), batch limits, DBO and CUDA-graph flags, HTTP host
//! and port, served model names.
//!
//! TODO(#2): this is the twin's interim reader; the deployment model of `afd-sim` (branch `foundation`)
//! replaces it, with every validation rule of `afd-sim check`. Until then only the rules the twin cannot
//! run without are checked here (role, connector, rank counts, ranks = DP x TP, ports).

use serde_json::Value;

use afd_sim::topology::{Role, RuleSet, Topology, TopologyError};

/// Connectors the plugin accepts (afd-spec §1.2, §1.9).
pub const CONNECTORS: &[&str] = &[
    "P2pNcclAFDConnector",
    "CAMP2pAFDConnector",
    "CAMAsyncAFDConnector",
    "GpuAsyncAFDConnector",
];

/// One role's command line, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleConfig {
    pub model: String,
    pub served_model_names: Vec<String>,
    pub data_parallel_size: u32,
    pub tensor_parallel_size: u32,
    pub enable_expert_parallel: bool,
    pub afd: AfdBlock,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub max_model_len: Option<u32>,
    pub enable_dbo: bool,
    pub dbo_decode_token_threshold: u32,
    pub dbo_prefill_token_threshold: u32,
    pub enforce_eager: bool,
    pub max_cudagraph_capture_size: Option<u32>,
    pub compilation_config: Option<Value>,
    /// HTTP bind address; vLLM binds all interfaces when `--host` is absent, the twin binds loopback.
    pub host: Option<String>,
    pub port: u16,
    pub seed: u64,
    /// The arguments as given, for the peer and the simulator.
    pub args: Vec<String>,
}

/// `additional_config["afd"]` after alias resolution and coercion (afd-spec §1.2, §1.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AfdBlock {
    pub role: Role,
    pub connector: String,
    pub host: String,
    pub port: u16,
    pub num_attention_ranks: u32,
    pub num_ffn_ranks: u32,
    pub async_dp: bool,
    pub compute_gate_on_attention: bool,
}

/// A refused command line, naming the flag or key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ServeArgsError {
    #[error("missing the model (the first positional argument of `vllm serve`)")]
    MissingModel,
    #[error("unexpected positional argument '{0}' (the model is already given)")]
    ExtraPositional(String),
    #[error(
        "unknown flag {0} (afd-twin reads the vllm serve flags of the AFD recipes; see docs/twin.md)"
    )]
    UnknownFlag(String),
    #[error("flag {0} needs a value")]
    MissingValue(String),
    #[error("flag {flag}: {message}")]
    BadValue { flag: String, message: String },
    #[error("--additional-config {key}: {message}")]
    BadAfdKey { key: String, message: String },
    #[error("{role} role: {rule} (afd-spec {section})")]
    Rule {
        role: Role,
        rule: String,
        section: &'static str,
    },
    #[error("{role} role: {source}")]
    Topology {
        role: Role,
        #[source]
        source: TopologyError,
    },
}

const VALUE_FLAGS: &[&str] = &[
    "--data-parallel-size",
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--additional-config",
    "--max-num-seqs",
    "--max-num-batched-tokens",
    "--max-model-len",
    "--dbo-decode-token-threshold",
    "--dbo-prefill-token-threshold",
    "--max-cudagraph-capture-size",
    "--compilation-config",
    "--host",
    "--port",
    "--seed",
    "--gpu-memory-utilization",
    "--dtype",
    "--block-size",
    "--kv-cache-dtype",
    "--ubatch-size",
    "--api-server-count",
    "--uvicorn-log-level",
    "--kv-transfer-config",
    "--tokenizer",
    "--worker-cls",
    "--all2all-backend",
];

const BOOL_FLAGS: &[&str] = &[
    "--enable-expert-parallel",
    "--enable-dbo",
    "--enforce-eager",
    "--trust-remote-code",
    "--disable-log-requests",
    "--enable-request-id-headers",
    "--disable-log-stats",
    "--no-enable-prefix-caching",
    "--enable-prefix-caching",
];

fn canonical(flag: &str) -> String {
    let flag = match flag {
        "-dp" => "--data-parallel-size",
        "-tp" => "--tensor-parallel-size",
        "-pp" => "--pipeline-parallel-size",
        other => other,
    };
    // vLLM accepts underscores in flag names as dashes.
    flag.replace('_', "-")
}

impl RoleConfig {
    /// Parses the words after `vllm serve` (`--flag value` and `--flag=value` both work).
    pub fn from_serve_args(args: &[String]) -> Result<RoleConfig, ServeArgsError> {
        let mut model = None;
        let mut served = Vec::new();
        let mut values: Vec<(String, String)> = Vec::new();
        let mut bools: Vec<String> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let word = &args[i];
            i += 1;
            if !word.starts_with('-') || word == "-" {
                if model.is_none() {
                    model = Some(word.clone());
                    continue;
                }
                return Err(ServeArgsError::ExtraPositional(word.clone()));
            }
            let (flag, inline) = match word.split_once('=') {
                Some((flag, value)) => (canonical(flag), Some(value.to_owned())),
                None => (canonical(word), None),
            };
            if flag == "--served-model-name" {
                if let Some(value) = inline {
                    served.push(value);
                } else {
                    while i < args.len() && !args[i].starts_with("--") {
                        served.push(args[i].clone());
                        i += 1;
                    }
                }
                if served.is_empty() {
                    return Err(ServeArgsError::MissingValue(flag));
                }
            } else if flag == "--model" {
                let value = take_value(&flag, inline, args, &mut i)?;
                model = Some(value);
            } else if VALUE_FLAGS.contains(&flag.as_str()) {
                let value = take_value(&flag, inline, args, &mut i)?;
                values.push((flag, value));
            } else if BOOL_FLAGS.contains(&flag.as_str()) {
                if inline.is_some() {
                    return Err(ServeArgsError::BadValue {
                        flag,
                        message: "takes no value".to_owned(),
                    });
                }
                bools.push(flag);
            } else {
                return Err(ServeArgsError::UnknownFlag(flag));
            }
        }
        let model = model.ok_or(ServeArgsError::MissingModel)?;
        let value = |flag: &str| {
            values
                .iter()
                .rev()
                .find(|(f, _)| f == flag)
                .map(|(_, v)| v.as_str())
        };
        let number = |flag: &str, default: u32| -> Result<u32, ServeArgsError> {
            match value(flag) {
                None => Ok(default),
                Some(text) => text.parse::<u32>().map_err(|_| ServeArgsError::BadValue {
                    flag: flag.to_owned(),
                    message: format!("expected a non-negative integer, got '{text}'"),
                }),
            }
        };
        let positive = |flag: &str, default: u32| -> Result<u32, ServeArgsError> {
            let n = number(flag, default)?;
            if n == 0 {
                return Err(ServeArgsError::BadValue {
                    flag: flag.to_owned(),
                    message: "must be at least 1".to_owned(),
                });
            }
            Ok(n)
        };
        let data_parallel_size = positive("--data-parallel-size", 1)?;
        let tensor_parallel_size = positive("--tensor-parallel-size", 1)?;
        if positive("--pipeline-parallel-size", 1)? != 1 {
            return Err(ServeArgsError::BadValue {
                flag: "--pipeline-parallel-size".to_owned(),
                message: "AFD runs with pipeline parallel size 1 (afd-spec §1.9)".to_owned(),
            });
        }
        let afd_text = value("--additional-config").ok_or_else(|| ServeArgsError::BadAfdKey {
            key: "afd".to_owned(),
            message: "AFD config requires additional_config[\"afd\"]; the twin stands in for an AFD role only (afd-spec §1.4)".to_owned(),
        })?;
        let afd = parse_afd_block(afd_text)?;
        let compilation_config = match value("--compilation-config") {
            None => None,
            Some(text) => Some(serde_json::from_str::<Value>(text).map_err(|err| {
                ServeArgsError::BadValue {
                    flag: "--compilation-config".to_owned(),
                    message: format!("not valid JSON: {err}"),
                }
            })?),
        };
        let port = match value("--port") {
            None => 8000,
            Some(text) => text.parse::<u16>().map_err(|_| ServeArgsError::BadValue {
                flag: "--port".to_owned(),
                message: format!("expected a port 0..=65535, got '{text}'"),
            })?,
        };
        let max_num_seqs = positive("--max-num-seqs", 256)?;
        let max_model_len = match value("--max-model-len") {
            None => None,
            Some(_) => Some(positive("--max-model-len", 1)?),
        };
        let max_cudagraph_capture_size = match value("--max-cudagraph-capture-size") {
            None => None,
            Some(_) => Some(positive("--max-cudagraph-capture-size", 1)?),
        };
        let seed = match value("--seed") {
            None => 0,
            Some(text) => text.parse::<u64>().map_err(|_| ServeArgsError::BadValue {
                flag: "--seed".to_owned(),
                message: format!("expected a non-negative integer, got '{text}'"),
            })?,
        };
        if served.is_empty() {
            served.push(model.clone());
        }
        Ok(RoleConfig {
            served_model_names: served,
            data_parallel_size,
            tensor_parallel_size,
            enable_expert_parallel: bools.iter().any(|b| b == "--enable-expert-parallel"),
            max_num_seqs,
            max_num_batched_tokens: positive("--max-num-batched-tokens", 8192)?,
            max_model_len,
            enable_dbo: bools.iter().any(|b| b == "--enable-dbo"),
            dbo_decode_token_threshold: number("--dbo-decode-token-threshold", 32)?,
            dbo_prefill_token_threshold: number("--dbo-prefill-token-threshold", 512)?,
            enforce_eager: bools.iter().any(|b| b == "--enforce-eager"),
            max_cudagraph_capture_size,
            compilation_config,
            host: value("--host").map(str::to_owned),
            port,
            seed,
            afd,
            model,
            args: args.to_vec(),
        })
    }

    pub fn role(&self) -> Role {
        self.afd.role
    }

    /// Role ranks this process stands for: DP x TP (PCP is 1 in every recipe).
    pub fn n_ranks(&self) -> u32 {
        self.data_parallel_size * self.tensor_parallel_size
    }

    /// The name responses carry (the first `--served-model-name`, else the model path).
    pub fn model_name(&self) -> &str {
        &self.served_model_names[0]
    }

    /// The rules the twin needs to run this role, in the order the plugin checks them.
    pub fn validate(&self, rules: RuleSet) -> Result<Topology, ServeArgsError> {
        let role = self.role();
        let topology = Topology::new(
            self.afd.num_attention_ranks,
            self.afd.num_ffn_ranks,
            rules,
            self.afd.port,
        )
        .map_err(|source| ServeArgsError::Topology { role, source })?;
        let configured = match role {
            Role::Attention => self.afd.num_attention_ranks,
            Role::Ffn => self.afd.num_ffn_ranks,
        };
        if self.n_ranks() != configured {
            return Err(ServeArgsError::Rule {
                role,
                rule: format!(
                    "--additional-config afd.num_{role}_ranks = {configured} but --data-parallel-size x --tensor-parallel-size = {} x {} = {}",
                    self.data_parallel_size,
                    self.tensor_parallel_size,
                    self.n_ranks()
                ),
                section: "§1.9, §2.1",
            });
        }
        if self.afd.connector != "P2pNcclAFDConnector" {
            return Err(ServeArgsError::Rule {
                role,
                rule: format!(
                    "--additional-config afd.connector = {}: afd-twin models the P2pNcclAFDConnector only",
                    self.afd.connector
                ),
                section: "§2.2",
            });
        }
        let ports = topology.rendezvous_ports();
        if ports.contains(&self.port) {
            return Err(ServeArgsError::Rule {
                role,
                rule: format!(
                    "--port {} collides with the AFD rendezvous ports {ports:?}",
                    self.port
                ),
                section: "§2.3",
            });
        }
        Ok(topology)
    }
}

fn take_value(
    flag: &str,
    inline: Option<String>,
    args: &[String],
    i: &mut usize,
) -> Result<String, ServeArgsError> {
    if let Some(value) = inline {
        return Ok(value);
    }
    match args.get(*i) {
        Some(value) if !value.starts_with("--") => {
            *i += 1;
            Ok(value.clone())
        }
        _ => Err(ServeArgsError::MissingValue(flag.to_owned())),
    }
}

/// Reads `--additional-config` and its `afd` block with the plugin's aliases and coercions (§1.3).
pub fn parse_afd_block(text: &str) -> Result<AfdBlock, ServeArgsError> {
    let bad = |key: &str, message: String| ServeArgsError::BadAfdKey {
        key: key.to_owned(),
        message,
    };
    let config: Value = serde_json::from_str(text).map_err(|err| ServeArgsError::BadValue {
        flag: "--additional-config".to_owned(),
        message: format!("not valid JSON: {err}"),
    })?;
    let Value::Object(config) = config else {
        return Err(ServeArgsError::BadValue {
            flag: "--additional-config".to_owned(),
            message: "additional_config must be a mapping".to_owned(),
        });
    };
    let Some(afd) = config.get("afd") else {
        return Err(bad(
            "afd",
            "AFD config requires additional_config[\"afd\"]; the twin stands in for an AFD role only".to_owned(),
        ));
    };
    let Value::Object(afd) = afd else {
        return Err(bad("afd", "AFD config must be a mapping".to_owned()));
    };
    const ALIASES: &[(&str, &str)] = &[
        ("afd_connector", "connector"),
        ("async", "async_dp"),
        ("afd_role", "role"),
        ("afd_port", "port"),
        ("afd_host", "host"),
    ];
    const KEYS: &[&str] = &[
        "connector",
        "async_dp",
        "role",
        "port",
        "host",
        "num_attention_ranks",
        "num_ffn_ranks",
        "compute_gate_on_attention",
        "connector_extra_config",
    ];
    let mut fields: Vec<(&str, &Value)> = Vec::new();
    for (key, value) in afd {
        let canonical = ALIASES
            .iter()
            .find(|(alias, _)| alias == key)
            .map_or(key.as_str(), |(_, c)| c);
        if !KEYS.contains(&canonical) {
            return Err(bad(
                &format!("afd.{key}"),
                format!(
                    "unknown AFD config field '{key}'; put connector-specific values under 'connector_extra_config'"
                ),
            ));
        }
        if fields.iter().any(|(k, _)| *k == canonical) {
            return Err(bad(
                &format!("afd.{key}"),
                format!("duplicate AFD config field '{canonical}'"),
            ));
        }
        fields.push((canonical, value));
    }
    let get = |key: &str| fields.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let string = |key: &str, default: &str| -> Result<String, ServeArgsError> {
        match get(key) {
            None => Ok(default.to_owned()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(bad(
                &format!("afd.{key}"),
                format!("must be a string, got {other}"),
            )),
        }
    };
    let integer = |key: &str, default: i64| -> Result<i64, ServeArgsError> {
        match get(key) {
            None => Ok(default),
            Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64().expect("checked is_i64")),
            Some(Value::String(s)) => s
                .trim()
                .parse::<i64>()
                .map_err(|_| bad(&format!("afd.{key}"), format!("{key} must be an integer"))),
            Some(_) => Err(bad(
                &format!("afd.{key}"),
                format!("{key} must be an integer"),
            )),
        }
    };
    let boolean = |key: &str| -> Result<bool, ServeArgsError> {
        let err = || bad(&format!("afd.{key}"), format!("{key} must be a boolean"));
        match get(key) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::Number(n)) => match n.as_i64() {
                Some(0) => Ok(false),
                Some(1) => Ok(true),
                _ => Err(err()),
            },
            Some(Value::String(s)) => match s.trim().to_ascii_lowercase().as_str() {
                "1" | "true" | "yes" | "on" => Ok(true),
                "0" | "false" | "no" | "off" => Ok(false),
                _ => Err(err()),
            },
            Some(_) => Err(err()),
        }
    };
    match get("connector_extra_config") {
        None => {}
        Some(Value::Object(extra)) if extra.is_empty() => {}
        Some(Value::Object(_)) => {
            return Err(bad(
                "afd.connector_extra_config",
                "P2pNcclAFDConnector does not support connector_extra_config".to_owned(),
            ));
        }
        Some(_) => {
            return Err(bad(
                "afd.connector_extra_config",
                "connector_extra_config must be a mapping".to_owned(),
            ));
        }
    }
    let role = match string("role", "attention")?.as_str() {
        "attention" => Role::Attention,
        "ffn" => Role::Ffn,
        other => {
            return Err(bad(
                "afd.role",
                format!("AFD role must be one of ('attention', 'ffn'), got '{other}'"),
            ));
        }
    };
    let connector = string("connector", "P2pNcclAFDConnector")?;
    if !CONNECTORS.contains(&connector.as_str()) {
        return Err(bad(
            "afd.connector",
            format!("AFD connector must be one of {CONNECTORS:?}, got '{connector}'"),
        ));
    }
    let host = string("host", "127.0.0.1")?;
    if host.is_empty() {
        return Err(bad("afd.host", "AFD host must be non-empty".to_owned()));
    }
    let port = integer("port", 1239)?;
    let port = u16::try_from(port).ok().filter(|p| *p > 0).ok_or_else(|| {
        bad(
            "afd.port",
            format!("AFD port must be in 1..65535, got {port}"),
        )
    })?;
    let ranks = |key: &str| -> Result<u32, ServeArgsError> {
        let n = integer(key, 1)?;
        u32::try_from(n).map_err(|_| {
            bad(
                &format!("afd.{key}"),
                format!("{key} must be positive, got {n}"),
            )
        })
    };
    Ok(AfdBlock {
        role,
        connector,
        host,
        port,
        num_attention_ranks: ranks("num_attention_ranks")?,
        num_ffn_ranks: ranks("num_ffn_ranks")?,
        async_dp: boolean("async_dp")?,
        compute_gate_on_attention: boolean("compute_gate_on_attention")?,
    })
}
