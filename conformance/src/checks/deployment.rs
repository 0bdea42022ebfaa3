//! Static invariants: every rule of the deployment catalogue (`afd_sim::deployment::rules`) judged on the
//! deployment as launched. An error finding fails its rule's invariant; a warning passes it with the
//! warning attached; a rule the rule set does not apply is skipped.
//!
//! The rules themselves live in `afd-sim` (DESIGN §3); this module only maps findings to outcomes.

use afd_sim::deployment::{Finding, Severity, rules};

use crate::checks::Outcomes;
use crate::report::Outcome;
use crate::target::Target;

/// One outcome per rule of the catalogue.
pub fn check(target: &Target) -> Outcomes {
    let report = target.check_deployment();
    rules()
        .iter()
        .map(|rule| {
            let outcome = match &report {
                None => Outcome::skipped(
                    "no deployment given (--recipe or --attention-args/--ffn-args)",
                ),
                Some(_) if !rule.applies_to(target.rules) => Outcome::skipped(format!(
                    "rule set {} does not apply this rule",
                    target.rules
                )),
                Some(report) => {
                    let findings: Vec<&Finding> = report
                        .findings()
                        .iter()
                        .filter(|f| f.rule == rule.rule)
                        .collect();
                    judge(&findings)
                }
            };
            (rule.id, outcome)
        })
        .collect()
}

fn judge(findings: &[&Finding]) -> Outcome {
    let errors: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .map(|f| describe(f))
        .collect();
    if !errors.is_empty() {
        return Outcome::fail(errors[0].clone()).with_counterexample(errors.join("\n"));
    }
    let mut outcome = Outcome::pass("holds on the deployment as launched");
    for finding in findings {
        match finding.severity {
            Severity::Warning => outcome = outcome.with_warning(describe(finding)),
            Severity::Note => outcome.message = format!("holds (note: {})", describe(finding)),
            Severity::Error => {}
        }
    }
    outcome
}

/// `attention role, --max-num-seqs (line 7, column 3): message`.
pub fn describe(finding: &Finding) -> String {
    let mut where_ = Vec::new();
    if let Some(role) = finding.role {
        where_.push(format!("{role} role"));
    }
    if let Some(subject) = &finding.subject {
        where_.push(subject.to_string());
    }
    if let Some(location) = &finding.location {
        where_.push(format!("at {location}"));
    }
    if where_.is_empty() {
        finding.message.clone()
    } else {
        format!("{}: {}", where_.join(", "), finding.message)
    }
}
