//! The `afd` block of `--additional-config` (afd-spec §1.2), parsed with the plugin's aliases and
//! coercions (§1.3).
//!
//! Problems the plugin itself reports while parsing (not a mapping, unknown or duplicate keys,
//! values that do not coerce) become findings here, all at once, instead of stopping at the first.
//! The semantic rules of §1.4 (role names, port range, rank counts, …) run in `validate.rs`, since
//! they depend on the rule set. A value that fails to coerce is kept as `None`.

use serde_json::{Map, Value};

use crate::deployment::findings::{Finding, Subject};
use crate::deployment::location::Location;
use crate::deployment::rules::Rule;
use crate::topology::Role;

/// The plugin's connector names (afd-spec §1.2, §1.9).
pub const P2P_NCCL_CONNECTOR: &str = "P2pNcclAFDConnector";
pub const CAM_P2P_CONNECTOR: &str = "CAMP2pAFDConnector";
pub const CAM_ASYNC_CONNECTOR: &str = "CAMAsyncAFDConnector";
pub const GPU_ASYNC_CONNECTOR: &str = "GpuAsyncAFDConnector";

/// Defaults of `AFDConfig` (afd-spec §1.2).
pub const DEFAULT_AFD_PORT: u16 = 1239;
pub const DEFAULT_AFD_HOST: &str = "127.0.0.1";

/// One key of the block: its value after coercion, where it was written, and the key as spelt
/// (`None` when absent and defaulted).
#[derive(Clone, Debug, PartialEq)]
pub struct AfdField<T> {
    pub value: T,
    pub location: Location,
    pub key: Option<String>,
}

impl<T> AfdField<T> {
    /// The key as spelt, or its canonical name when defaulted.
    pub fn key_or<'a>(&'a self, canonical: &'a str) -> &'a str {
        self.key.as_deref().unwrap_or(canonical)
    }

    /// The subject a finding about this key names.
    pub fn subject(&self, canonical: &str) -> Subject {
        Subject::afd_key(self.key_or(canonical))
    }
}

/// `additional_config["afd"]` after alias resolution and coercion.
#[derive(Clone, Debug, PartialEq)]
pub struct AfdConfig {
    /// Where the `"afd"` key is.
    pub location: Location,
    /// Connector name; a non-string value is kept as its JSON text.
    pub connector: AfdField<String>,
    /// `"attention"` or `"ffn"` when valid; a non-string value is kept as its JSON text.
    pub role: AfdField<String>,
    /// Rendezvous host; a non-string value is kept as its JSON text.
    pub host: AfdField<String>,
    /// Python truthiness of the host value (afd-spec §1.4 rule 7 checks only this).
    pub host_is_truthy: bool,
    pub port: AfdField<Option<i64>>,
    pub num_attention_ranks: AfdField<Option<i64>>,
    pub num_ffn_ranks: AfdField<Option<i64>>,
    /// `async_dp` (alias `async`).
    pub async_dp: AfdField<Option<bool>>,
    pub compute_gate_on_attention: AfdField<Option<bool>>,
    pub connector_extra_config: AfdField<Option<Map<String, Value>>>,
}

impl AfdConfig {
    /// The role when it is one of the two the plugin accepts.
    pub fn role(&self) -> Option<Role> {
        match self.role.value.as_str() {
            "attention" => Some(Role::Attention),
            "ffn" => Some(Role::Ffn),
            _ => None,
        }
    }

    /// The rendezvous port when it coerced and lies in 1..=65535.
    pub fn port(&self) -> Option<u16> {
        self.port
            .value
            .and_then(|port| u16::try_from(port).ok())
            .filter(|&port| port > 0)
    }

    /// `num_attention_ranks` when it coerced and is positive.
    pub fn attention_ranks(&self) -> Option<u32> {
        positive(self.num_attention_ranks.value)
    }

    /// `num_ffn_ranks` when it coerced and is positive.
    pub fn ffn_ranks(&self) -> Option<u32> {
        positive(self.num_ffn_ranks.value)
    }

    pub fn is_p2p_nccl(&self) -> bool {
        self.connector.value == P2P_NCCL_CONNECTOR
    }
}

fn positive(value: Option<i64>) -> Option<u32> {
    value.and_then(|v| u32::try_from(v).ok()).filter(|&v| v > 0)
}

/// Canonical key for each accepted spelling (afd-spec §1.2 alias table).
fn canonical(key: &str) -> Option<&'static str> {
    Some(match key {
        "connector" | "afd_connector" => "connector",
        "async_dp" | "async" => "async_dp",
        "role" | "afd_role" => "role",
        "port" | "afd_port" => "port",
        "host" | "afd_host" => "host",
        "num_attention_ranks" => "num_attention_ranks",
        "num_ffn_ranks" => "num_ffn_ranks",
        "compute_gate_on_attention" => "compute_gate_on_attention",
        "connector_extra_config" => "connector_extra_config",
        _ => return None,
    })
}

/// Parses the `--additional-config` value. Returns `None` when there is no usable `afd` block
/// (absent, or not a mapping; the findings say which), plus every parse-time finding.
///
/// `locate` maps a dotted key path (`afd.port`) to its place in the input.
pub(crate) fn parse_afd_block(
    additional_config: &Value,
    locate: &dyn Fn(&str) -> Location,
) -> (Option<AfdConfig>, Vec<Finding>) {
    let mut findings = Vec::new();
    let Some(block) = afd_mapping(additional_config, locate, &mut findings) else {
        return (None, findings);
    };
    let fields = BlockFields {
        fields: resolve_aliases(block, locate, &mut findings),
        block_location: locate("afd"),
        locate,
    };
    let connector = fields.text("connector", P2P_NCCL_CONNECTOR);
    let role = fields.text("role", "attention");
    let host = fields.text("host", DEFAULT_AFD_HOST);
    let host_is_truthy = fields
        .field("host")
        .is_none_or(|(_, _, value)| is_truthy(value));
    let port = fields.integer("port", i64::from(DEFAULT_AFD_PORT), &mut findings);
    let num_attention_ranks = fields.integer("num_attention_ranks", 1, &mut findings);
    let num_ffn_ranks = fields.integer("num_ffn_ranks", 1, &mut findings);
    let async_dp = fields.boolean("async_dp", &mut findings);
    let compute_gate_on_attention = fields.boolean("compute_gate_on_attention", &mut findings);
    let connector_extra_config = fields.extra_config(&mut findings);
    let config = AfdConfig {
        location: fields.block_location,
        connector,
        role,
        host,
        host_is_truthy,
        port,
        num_attention_ranks,
        num_ffn_ranks,
        async_dp,
        compute_gate_on_attention,
        connector_extra_config,
    };
    (Some(config), findings)
}

/// The `afd` mapping of `--additional-config`, or `None` with a finding when the value is not an
/// object, has no `afd` key, or its `afd` value is not a mapping.
fn afd_mapping<'a>(
    additional_config: &'a Value,
    locate: &dyn Fn(&str) -> Location,
    findings: &mut Vec<Finding>,
) -> Option<&'a Map<String, Value>> {
    let top = locate("");
    let Some(object) = additional_config.as_object() else {
        findings.push(
            Finding::new(
                Rule::AfdConfigMapping,
                None,
                format!(
                    "--additional-config must be a JSON object, got {}",
                    describe(additional_config)
                ),
            )
            .with_subject(Subject::flag("--additional-config"))
            .at(Some(top)),
        );
        return None;
    };
    let Some(block) = object.get("afd") else {
        findings.push(
            Finding::new(
                Rule::AfdMissingBlock,
                None,
                "--additional-config has no \"afd\" block, so AFD is off for this server",
            )
            .with_subject(Subject::flag("--additional-config"))
            .at(Some(top)),
        );
        return None;
    };
    let Some(block) = block.as_object() else {
        findings.push(
            Finding::new(
                Rule::AfdConfigMapping,
                None,
                format!("AFD config must be a mapping, got {}", describe(block)),
            )
            .with_subject(Subject::Key {
                flag: "--additional-config".to_owned(),
                path: "afd".to_owned(),
            })
            .at(Some(locate("afd"))),
        );
        return None;
    };
    Some(block)
}

/// A key of the block under its canonical name: `(canonical name, key as written, value)`.
type BlockField<'a> = (&'static str, &'a str, &'a Value);

/// The block's keys under their canonical names (afd-spec §1.2 aliases), in the order written;
/// unknown keys and a second spelling of one name become findings and are dropped.
fn resolve_aliases<'a>(
    block: &'a Map<String, Value>,
    locate: &dyn Fn(&str) -> Location,
    findings: &mut Vec<Finding>,
) -> Vec<BlockField<'a>> {
    let mut fields: Vec<BlockField<'a>> = Vec::new();
    for (key, value) in block {
        let location = locate(&format!("afd.{key}"));
        let Some(name) = canonical(key) else {
            findings.push(
                Finding::new(
                    Rule::AfdUnknownField,
                    None,
                    format!(
                        "unknown AFD config field '{key}'; put connector-specific values under 'connector_extra_config'"
                    ),
                )
                .with_subject(Subject::afd_key(key))
                .at(Some(location)),
            );
            continue;
        };
        if let Some((_, first, _)) = fields.iter().find(|(n, _, _)| *n == name) {
            findings.push(
                Finding::new(
                    Rule::AfdDuplicateField,
                    None,
                    format!("duplicate AFD config field: '{first}' and '{key}' both set '{name}'"),
                )
                .with_subject(Subject::afd_key(key))
                .at(Some(location)),
            );
            continue;
        }
        fields.push((name, key.as_str(), value));
    }
    fields
}

/// The resolved keys of one `afd` block and where they are, read field by field into
/// [`AfdField`]s: present keys where they were written, absent ones defaulted at the block.
struct BlockFields<'a> {
    fields: Vec<BlockField<'a>>,
    block_location: Location,
    locate: &'a dyn Fn(&str) -> Location,
}

impl BlockFields<'_> {
    /// The key whose canonical name is `name`, if written.
    fn field(&self, name: &str) -> Option<BlockField<'_>> {
        self.fields.iter().find(|(n, _, _)| *n == name).copied()
    }

    /// Where a key written as `key` is.
    fn location(&self, key: &str) -> Location {
        (self.locate)(&format!("afd.{key}"))
    }

    /// A field absent from the block: `value` at the block's location.
    fn defaulted<T>(&self, value: T) -> AfdField<T> {
        AfdField {
            value,
            location: self.block_location,
            key: None,
        }
    }

    /// A text field: a string as written, any other JSON value as its text, else `default`.
    fn text(&self, name: &str, default: &str) -> AfdField<String> {
        match self.field(name) {
            Some((_, key, value)) => AfdField {
                value: value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_owned),
                location: self.location(key),
                key: Some(key.to_owned()),
            },
            None => self.defaulted(default.to_owned()),
        }
    }

    /// An integer field by the plugin's coercion, else `default`.
    fn integer(
        &self,
        name: &str,
        default: i64,
        findings: &mut Vec<Finding>,
    ) -> AfdField<Option<i64>> {
        self.coerced(name, Coercion::Int, findings)
            .unwrap_or_else(|| self.defaulted(Some(default)))
    }

    /// A boolean field by the plugin's coercion, else `false`.
    fn boolean(&self, name: &str, findings: &mut Vec<Finding>) -> AfdField<Option<bool>> {
        let field = self
            .coerced(name, Coercion::Bool, findings)
            .unwrap_or_else(|| self.defaulted(Some(0)));
        AfdField {
            value: field.value.map(|v| v != 0),
            location: field.location,
            key: field.key,
        }
    }

    /// The field `name` coerced as the plugin does (`None` when absent); a value that does not
    /// coerce is kept as `None` with a finding.
    fn coerced(
        &self,
        name: &str,
        coercion: Coercion,
        findings: &mut Vec<Finding>,
    ) -> Option<AfdField<Option<i64>>> {
        let (_, key, value) = self.field(name)?;
        let location = self.location(key);
        let result = match coercion {
            Coercion::Int => coerce_int(value),
            Coercion::Bool => coerce_bool(value).map(i64::from),
        };
        if result.is_none() {
            // The plugin names `async_dp` by its alias `async` in this message (afd-spec §1.3).
            let shown = if name == "async_dp" { "async" } else { key };
            let (rule, noun) = match coercion {
                Coercion::Int => (Rule::AfdIntField, "an integer"),
                Coercion::Bool => (Rule::AfdBoolField, "a boolean"),
            };
            findings.push(
                Finding::new(
                    rule,
                    None,
                    format!("{shown} must be {noun}, got {}", describe(value)),
                )
                .with_subject(Subject::afd_key(key))
                .at(Some(location)),
            );
        }
        Some(AfdField {
            value: result,
            location,
            key: Some(key.to_owned()),
        })
    }

    /// `connector_extra_config`: a mapping (empty when absent); any other value is kept as `None`
    /// with a finding.
    fn extra_config(&self, findings: &mut Vec<Finding>) -> AfdField<Option<Map<String, Value>>> {
        let Some((_, key, value)) = self.field("connector_extra_config") else {
            return self.defaulted(Some(Map::new()));
        };
        let location = self.location(key);
        let map = value.as_object().cloned();
        if map.is_none() {
            findings.push(
                Finding::new(
                    Rule::AfdExtraConfigMapping,
                    None,
                    format!(
                        "connector_extra_config must be a mapping, got {}",
                        describe(value)
                    ),
                )
                .with_subject(Subject::afd_key(key))
                .at(Some(location)),
            );
        }
        AfdField {
            value: map,
            location,
            key: Some(key.to_owned()),
        }
    }
}

/// Which of the plugin's coercions a key gets (afd-spec §1.3).
#[derive(Clone, Copy)]
enum Coercion {
    Int,
    Bool,
}

/// Python truthiness of a JSON value.
fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The plugin's bool coercion (afd-spec §1.3): bool, integer 0/1, or a trimmed case-insensitive
/// `1,true,yes,on` / `0,false,no,off`.
pub(crate) fn coerce_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match (n.as_i64(), n.is_f64()) {
            (Some(0), false) => Some(false),
            (Some(1), false) => Some(true),
            _ => None,
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Some(true),
            "0" | "false" | "no" | "off" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// The plugin's int coercion (afd-spec §1.3): bool and float rejected, otherwise what Python's
/// `int()` accepts. Values beyond `i64` saturate, which every range rule then rejects.
pub(crate) fn coerce_int(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) if !n.is_f64() => Some(n.as_i64().unwrap_or(if n.as_u64().is_some() {
            i64::MAX
        } else {
            i64::MIN
        })),
        Value::String(s) => parse_python_int(s),
        _ => None,
    }
}

/// Python `int(text)` for ASCII input: surrounding whitespace, an optional sign, digits with single
/// underscores between them. Saturates beyond `i64`.
pub(crate) fn parse_python_int(text: &str) -> Option<i64> {
    let text = text.trim();
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let mut value: i64 = 0;
    for c in digits.chars().filter(char::is_ascii_digit) {
        let digit = i64::from(c as u8 - b'0');
        value = value.saturating_mul(10).saturating_add(digit);
    }
    Some(if negative {
        value.saturating_neg()
    } else {
        value
    })
}

/// A short description of a JSON value for messages: its type and text.
pub(crate) fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_owned(),
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    };
    let mut text = value.to_string();
    if text.chars().count() > 60 {
        text = text.chars().take(57).collect::<String>() + "...";
    }
    format!("{kind} {text}")
}

#[cfg(test)]
mod tests;
