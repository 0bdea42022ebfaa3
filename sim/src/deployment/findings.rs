//! What validation reports: findings (a rule, its severity, the role, the flag or key, the place in
//! the input and a message) and the report that collects them.
//!
//! Rendering to text or JSON is the binary's job; this module only orders findings stably.

use crate::deployment::location::Location;
use crate::deployment::rules::Rule;
use crate::topology::{Role, RuleSet};

/// How bad a finding is. Errors fail `afd-sim check`; warnings and notes do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

impl Severity {
    /// `error`, `warning` or `note`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// What a finding is about: a `vllm serve` flag, a JSON key, an environment variable.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Subject {
    /// A flag as the user spelt it, normalised to dashes (`--max-num-seqs`).
    Flag(String),
    /// A key of a JSON flag, as `<flag> <path>` (`--additional-config afd.port`).
    Key { flag: String, path: String },
    /// An environment variable (`CUDA_VISIBLE_DEVICES`).
    Env(String),
}

impl Subject {
    pub fn flag(name: &str) -> Subject {
        Subject::Flag(name.to_owned())
    }

    /// A key inside `--additional-config`.
    pub fn afd_key(key: &str) -> Subject {
        Subject::Key {
            flag: "--additional-config".to_owned(),
            path: format!("afd.{key}"),
        }
    }

    /// A key inside `--compilation-config`.
    pub fn compilation_key(key: &str) -> Subject {
        Subject::Key {
            flag: "--compilation-config".to_owned(),
            path: key.to_owned(),
        }
    }

    pub fn env(name: &str) -> Subject {
        Subject::Env(name.to_owned())
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Flag(flag) => f.write_str(flag),
            Subject::Key { flag, path } => write!(f, "{flag} {path}"),
            Subject::Env(name) => write!(f, "{name}"),
        }
    }
}

/// One violated rule, warning or note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub rule: Rule,
    /// Copied from the rule's catalogue entry.
    pub severity: Severity,
    /// The role the finding is about; `None` for the deployment as a whole.
    pub role: Option<Role>,
    pub subject: Option<Subject>,
    pub location: Option<Location>,
    /// Lowercase, no final period; names the offending value.
    pub message: String,
}

impl Finding {
    pub fn new(rule: Rule, role: Option<Role>, message: impl Into<String>) -> Finding {
        Finding {
            rule,
            severity: rule.info().severity,
            role,
            subject: None,
            location: None,
            message: message.into(),
        }
    }

    pub fn with_subject(mut self, subject: Subject) -> Finding {
        self.subject = Some(subject);
        self
    }

    pub fn at(mut self, location: Option<Location>) -> Finding {
        self.location = location;
        self
    }
}

/// Every finding of one check, errors first, then by input position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub rules: RuleSet,
    findings: Vec<Finding>,
}

impl Report {
    /// Sorts by severity, then location (unlocated last), role, rule and message, so the output
    /// does not depend on the order rules ran in.
    pub fn new(rules: RuleSet, mut findings: Vec<Finding>) -> Report {
        findings.sort_by(|a, b| {
            let key = |f: &Finding| {
                (
                    f.severity,
                    f.location.is_none(),
                    f.location,
                    f.role,
                    f.rule.info().id,
                    f.message.clone(),
                )
            };
            key(a).cmp(&key(b))
        });
        findings.dedup();
        Report { rules, findings }
    }

    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    pub fn count(&self, severity: Severity) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == severity)
            .count()
    }

    /// True when no finding is an error (warnings and notes allowed).
    pub fn is_clean(&self) -> bool {
        self.count(Severity::Error) == 0
    }

    /// True when some finding names `rule`.
    pub fn has(&self, rule: Rule) -> bool {
        self.findings.iter().any(|f| f.rule == rule)
    }
}
