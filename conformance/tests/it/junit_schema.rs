//! A checker for the JUnit XML shape CI dashboards read (Jenkins, GitLab, GitHub test reporters):
//! `testsuites` > `testsuite` > (`properties` > `property`)? then `testcase` > (`failure` | `error` |
//! `skipped`)? `system-out`? `system-err`?, with the required attributes and counts that add up.

use std::collections::BTreeMap;

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// What a valid document holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Summary {
    pub tests: usize,
    pub failures: usize,
    pub skipped: usize,
    /// `testcase name` → `failure`, `skipped` or `pass`.
    pub cases: BTreeMap<String, String>,
}

fn attributes(element: &BytesStart<'_>) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for attribute in element.attributes() {
        let attribute = attribute.map_err(|e| format!("bad attribute: {e}"))?;
        let key = attribute.key.as_ref().to_owned();
        let value = attribute
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| format!("bad attribute value: {e}"))?
            .into_owned();
        out.insert(key, value);
    }
    Ok(out)
}

fn number(attrs: &BTreeMap<String, String>, key: &str, element: &str) -> Result<usize, String> {
    attrs
        .get(key)
        .ok_or_else(|| format!("<{element}> lacks {key}"))?
        .parse()
        .map_err(|_| format!("<{element}> {key} is not a count"))
}

fn time(attrs: &BTreeMap<String, String>, element: &str) -> Result<(), String> {
    let value = attrs
        .get("time")
        .ok_or_else(|| format!("<{element}> lacks time"))?;
    value
        .parse::<f64>()
        .ok()
        .filter(|t| *t >= 0.0)
        .map(|_| ())
        .ok_or_else(|| format!("<{element}> time '{value}' is not a non-negative number"))
}

#[derive(Default)]
struct Suite {
    declared: (usize, usize, usize),
    tests: usize,
    failures: usize,
    skipped: usize,
    seen_case: bool,
}

/// Validates `xml`; returns what it holds or the first problem.
pub(crate) fn validate(xml: &str) -> Result<Summary, String> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().trim_text(true);
    let mut stack: Vec<String> = Vec::new();
    let mut root: Option<(usize, usize, usize)> = None;
    let mut suite: Option<Suite> = None;
    let mut case: Option<(String, Option<String>)> = None;
    let mut summary = Summary::default();
    loop {
        let event = reader.read_event().map_err(|e| format!("not XML: {e}"))?;
        let (element, empty) = match &event {
            Event::Start(e) => (Some(e.clone()), false),
            Event::Empty(e) => (Some(e.clone()), true),
            _ => (None, false),
        };
        if let Some(element) = element {
            let name = element.name().as_ref().to_owned();
            let parent = stack.last().map(String::as_str);
            let attrs = attributes(&element)?;
            match (parent, name.as_str()) {
                (None, "testsuites") => {
                    root = Some((
                        number(&attrs, "tests", &name)?,
                        number(&attrs, "failures", &name)?,
                        number(&attrs, "skipped", &name)?,
                    ));
                    number(&attrs, "errors", &name)?;
                }
                (Some("testsuites"), "testsuite") => {
                    if !attrs.contains_key("name") {
                        return Err("<testsuite> lacks name".to_owned());
                    }
                    time(&attrs, &name)?;
                    number(&attrs, "errors", &name)?;
                    suite = Some(Suite {
                        declared: (
                            number(&attrs, "tests", &name)?,
                            number(&attrs, "failures", &name)?,
                            number(&attrs, "skipped", &name)?,
                        ),
                        ..Suite::default()
                    });
                }
                (Some("testsuite"), "properties") => {
                    if suite.as_ref().is_some_and(|s| s.seen_case) {
                        return Err("<properties> after a <testcase>".to_owned());
                    }
                }
                (Some("properties"), "property") => {
                    if !attrs.contains_key("name") || !attrs.contains_key("value") {
                        return Err("<property> lacks name or value".to_owned());
                    }
                }
                (Some("testsuite"), "testcase") => {
                    for key in ["name", "classname"] {
                        if !attrs.contains_key(key) {
                            return Err(format!("<testcase> lacks {key}"));
                        }
                    }
                    time(&attrs, &name)?;
                    let s = suite.as_mut().ok_or("testcase outside a testsuite")?;
                    s.seen_case = true;
                    s.tests += 1;
                    case = Some((attrs["name"].clone(), None));
                }
                (Some("testcase"), kind @ ("failure" | "error" | "skipped")) => {
                    let current = case.as_mut().ok_or("result outside a testcase")?;
                    if current.1.is_some() {
                        return Err(format!("<testcase {}> has two results", current.0));
                    }
                    if kind != "skipped" && !attrs.contains_key("message") {
                        return Err(format!("<{kind}> lacks message"));
                    }
                    current.1 = Some(kind.to_owned());
                    let s = suite.as_mut().ok_or("result outside a testsuite")?;
                    match kind {
                        "skipped" => s.skipped += 1,
                        _ => s.failures += 1,
                    }
                }
                (Some("testcase"), "system-out" | "system-err") => {}
                (parent, other) => {
                    return Err(format!("<{other}> is not allowed inside {parent:?}"));
                }
            }
            if empty {
                close(&name, &mut suite, &mut case, &mut summary)?;
            } else {
                stack.push(name);
            }
            continue;
        }
        match event {
            Event::End(end) => {
                let name = end.name().as_ref().to_owned();
                stack.pop();
                close(&name, &mut suite, &mut case, &mut summary)?;
            }
            Event::Text(text)
                if !text.is_empty()
                    && !matches!(
                        stack.last().map(String::as_str),
                        Some("system-out" | "system-err" | "failure" | "error")
                    ) =>
            {
                return Err(format!("stray text inside {:?}", stack.last()));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    let (tests, failures, skipped) = root.ok_or("no <testsuites> root")?;
    if (tests, failures, skipped) != (summary.tests, summary.failures, summary.skipped) {
        return Err(format!(
            "root declares tests/failures/skipped {tests}/{failures}/{skipped}, the suites hold {}/{}/{}",
            summary.tests, summary.failures, summary.skipped
        ));
    }
    Ok(summary)
}

fn close(
    name: &str,
    suite: &mut Option<Suite>,
    case: &mut Option<(String, Option<String>)>,
    summary: &mut Summary,
) -> Result<(), String> {
    match name {
        "testcase" => {
            let (name, result) = case.take().ok_or("unbalanced testcase")?;
            summary
                .cases
                .insert(name, result.unwrap_or_else(|| "pass".to_owned()));
        }
        "testsuite" => {
            let s = suite.take().ok_or("unbalanced testsuite")?;
            if s.declared != (s.tests, s.failures, s.skipped) {
                return Err(format!(
                    "a testsuite declares tests/failures/skipped {:?}, holds {}/{}/{}",
                    s.declared, s.tests, s.failures, s.skipped
                ));
            }
            summary.tests += s.tests;
            summary.failures += s.failures;
            summary.skipped += s.skipped;
        }
        _ => {}
    }
    Ok(())
}

#[test]
fn the_checker_rejects_inconsistent_counts_and_stray_elements() {
    let ok = r#"<testsuites tests="1" failures="1" errors="0" skipped="0"><testsuite name="a" tests="1" failures="1" errors="0" skipped="0" time="0.1"><testcase classname="a" name="x" time="0"><failure message="m">detail</failure></testcase></testsuite></testsuites>"#;
    assert_eq!(validate(ok).expect("valid").failures, 1);
    let bad_counts = ok.replace(
        "failures=\"1\" errors=\"0\" skipped=\"0\" time",
        "failures=\"0\" errors=\"0\" skipped=\"0\" time",
    );
    assert!(
        validate(&bad_counts)
            .expect_err("inconsistent")
            .contains("declares")
    );
    let stray = ok.replace("<failure", "<oops/><failure");
    assert!(validate(&stray).expect_err("stray").contains("<oops>"));
    assert!(validate("<testsuites").is_err());
}
