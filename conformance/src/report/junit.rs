//! JUnit XML for CI dashboards, in the shape they read: `<testsuites>` holding one `<testsuite>` per
//! invariant area, one `<testcase>` per invariant, `<failure>` for a failed one and `<skipped>` for a
//! skipped or indeterminate one; the counts on every suite and on the root add up.
//!
//! Only writing lives here; the suite's tests read the file back with an XML parser.

use std::fmt::Write as _;

use crate::catalog::Area;
use crate::report::{CheckResult, Report, Status};

/// The report as a JUnit XML document.
pub fn render(report: &Report) -> String {
    let mut areas: Vec<Area> = report.results.iter().map(|r| r.invariant.area).collect();
    areas.sort();
    areas.dedup();
    let counts = report.counts();
    let mut out = String::new();
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"afd-conformance\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
        counts.total(),
        counts.fail,
        counts.skipped + counts.indeterminate,
        report.duration.as_secs_f64(),
    );
    for area in areas {
        let results: Vec<&CheckResult> = report
            .results
            .iter()
            .filter(|r| r.invariant.area == area)
            .collect();
        let fails = results
            .iter()
            .filter(|r| r.outcome.status == Status::Fail)
            .count();
        let skips = results
            .iter()
            .filter(|r| matches!(r.outcome.status, Status::Skipped | Status::Indeterminate))
            .count();
        let time: f64 = results.iter().map(|r| r.duration.as_secs_f64()).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"afd-conformance.{area}\" tests=\"{}\" failures=\"{fails}\" errors=\"0\" skipped=\"{skips}\" time=\"{time:.3}\">",
            results.len(),
        );
        // A run that could not proceed says why here; its unjudged invariants are skipped test cases.
        let aborted = report.aborted.as_ref().map_or_else(String::new, |reason| {
            format!("<property name=\"aborted\" value=\"{}\"/>", escape(reason))
        });
        let _ = writeln!(
            out,
            "    <properties><property name=\"seed\" value=\"{}\"/><property name=\"rerun\" value=\"{}\"/>{aborted}</properties>",
            report.seed,
            escape(&report.rerun)
        );
        for result in results {
            write_case(&mut out, area, result);
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

fn write_case(out: &mut String, area: Area, result: &CheckResult) {
    let invariant = &result.invariant;
    let _ = write!(
        out,
        "    <testcase classname=\"afd-conformance.{area}\" name=\"{}\" time=\"{:.3}\">",
        escape(invariant.id),
        result.duration.as_secs_f64()
    );
    let outcome = &result.outcome;
    match outcome.status {
        Status::Pass => {}
        Status::Fail => {
            let _ = write!(
                out,
                "\n      <failure message=\"{}\" type=\"{}\">{}</failure>",
                escape(&outcome.message),
                escape(invariant.source),
                escape_text(
                    outcome
                        .counterexample
                        .as_deref()
                        .unwrap_or(&outcome.message)
                )
            );
        }
        Status::Indeterminate => {
            let _ = write!(
                out,
                "\n      <skipped message=\"indeterminate: {}\"/>",
                escape(&outcome.message)
            );
        }
        Status::Skipped => {
            let _ = write!(
                out,
                "\n      <skipped message=\"{}\"/>",
                escape(&outcome.message)
            );
        }
    }
    let mut system_out = format!("{}\n{}", invariant.statement, outcome.message);
    for warning in &outcome.warnings {
        system_out.push_str("\nwarning: ");
        system_out.push_str(warning);
    }
    let _ = write!(
        out,
        "\n      <system-out>{}</system-out>\n    </testcase>\n",
        escape_text(&system_out)
    );
}

/// Escapes text for an XML attribute value; replaces characters XML 1.0 cannot carry.
pub fn escape(text: &str) -> String {
    escape_with(text, true)
}

/// Escapes text for XML element content, keeping line breaks.
pub fn escape_text(text: &str) -> String {
    escape_with(text, false)
}

fn escape_with(text: &str, attribute: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' if !attribute => out.push('\n'),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}
