//! `policy test --junit FILE`: the results as JUnit XML, the per-case report CI systems render.
//!
//! One `<testsuite>` per decision table (and per host conformance table with `--conformance`),
//! one `<testcase>` per row, a `<failure>` on each row that disagrees, under one
//! `<testsuites>`; the element and attribute names are the common JUnit XML ones
//! (`fixtures/junit/junit.xsd` is the schema the tests validate against). Names and messages come
//! from the tables, which are the author's input: the XML writer escapes them, and characters
//! XML 1.0 cannot carry at all (most control characters) are replaced by U+FFFD. The file is
//! written whole (temporary file, then renamed) or not at all.

use crate::exit::Failure;
use quick_xml::Writer;
use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
use std::path::Path;
use std::time::Duration;

/// One row's result.
pub struct Case {
    /// The row's name.
    pub name: String,
    /// How long its decision took.
    pub time: Duration,
    /// Why it failed, if it did.
    pub failure: Option<String>,
}

/// One table's results.
pub struct Suite {
    /// The suite's name: the table's file name, or `conformance/<kind>/<function>`.
    pub name: String,
    /// Its rows, in table order.
    pub cases: Vec<Case>,
}

/// Text XML 1.0 can carry: every character it does not allow becomes U+FFFD.
fn xml_safe(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\t' | '\n' | '\r' => c,
            '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}' => c,
            _ => '\u{FFFD}',
        })
        .collect()
}

fn seconds(d: Duration) -> String {
    format!("{:.6}", d.as_secs_f64())
}

/// The JUnit XML document of `suites` (UTF-8).
pub fn render(suites: &[Suite]) -> Vec<u8> {
    let mut w = Writer::new_with_indent(Vec::new(), b' ', 2);
    let count = |f: &dyn Fn(&Case) -> bool| -> usize {
        suites
            .iter()
            .map(|s| s.cases.iter().filter(|c| f(c)).count())
            .sum()
    };
    let total = count(&|_| true);
    let failed = count(&|c| c.failure.is_some());
    let time: Duration = suites.iter().flat_map(|s| &s.cases).map(|c| c.time).sum();
    // Writing into a Vec cannot fail.
    let _ = w.write_event(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
    let mut root = BytesStart::new("testsuites");
    root.push_attribute(("name", "dpone-host policy test"));
    root.push_attribute(("tests", total.to_string().as_str()));
    root.push_attribute(("failures", failed.to_string().as_str()));
    root.push_attribute(("errors", "0"));
    root.push_attribute(("time", seconds(time).as_str()));
    let _ = w.write_event(Event::Start(root));
    for suite in suites {
        let name = xml_safe(&suite.name);
        let failures = suite.cases.iter().filter(|c| c.failure.is_some()).count();
        let time: Duration = suite.cases.iter().map(|c| c.time).sum();
        let mut start = BytesStart::new("testsuite");
        start.push_attribute(("name", name.as_str()));
        start.push_attribute(("tests", suite.cases.len().to_string().as_str()));
        start.push_attribute(("failures", failures.to_string().as_str()));
        start.push_attribute(("errors", "0"));
        start.push_attribute(("skipped", "0"));
        start.push_attribute(("time", seconds(time).as_str()));
        let _ = w.write_event(Event::Start(start));
        for case in &suite.cases {
            let mut tc = BytesStart::new("testcase");
            tc.push_attribute(("name", xml_safe(&case.name).as_str()));
            tc.push_attribute(("classname", name.as_str()));
            tc.push_attribute(("time", seconds(case.time).as_str()));
            match &case.failure {
                None => {
                    let _ = w.write_event(Event::Empty(tc));
                }
                Some(why) => {
                    let why = xml_safe(why);
                    let _ = w.write_event(Event::Start(tc));
                    let mut failure = BytesStart::new("failure");
                    failure.push_attribute(("message", why.as_str()));
                    failure.push_attribute(("type", "decision-mismatch"));
                    let _ = w.write_event(Event::Start(failure));
                    let _ = w.write_event(Event::Text(BytesText::new(&why)));
                    let _ = w.write_event(Event::End(BytesEnd::new("failure")));
                    let _ = w.write_event(Event::End(BytesEnd::new("testcase")));
                }
            }
        }
        let _ = w.write_event(Event::End(BytesEnd::new("testsuite")));
    }
    let _ = w.write_event(Event::End(BytesEnd::new("testsuites")));
    let mut out = w.into_inner();
    out.push(b'\n');
    out
}

/// Writes `suites` to `path`: a temporary file beside it, synced, then renamed over it.
pub fn write(path: &Path, suites: &[Suite]) -> Result<(), Failure> {
    let unwritable = |e: std::io::Error| {
        Failure::bad_input(
            "DPONE_CLI_OUTPUT_UNWRITABLE",
            format!("cannot write the --junit file: {}", e.kind()),
        )
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(unwritable)?;
    std::io::Write::write_all(&mut temp, &render(suites)).map_err(unwritable)?;
    temp.as_file().sync_all().map_err(unwritable)?;
    temp.persist(path).map_err(|e| unwritable(e.error))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_messages_are_escaped_and_control_characters_replaced() {
        let xml = render(&[Suite {
            name: "t<&>\"'.json".into(),
            cases: vec![Case {
                name: "row \u{1}\u{1b} é".into(),
                time: Duration::from_micros(1500),
                failure: Some("$.deny: expected <x> & \"y\"".into()),
            }],
        }]);
        let text = String::from_utf8(xml).expect("utf-8");
        assert!(text.contains("t&lt;&amp;&gt;&quot;&apos;.json"), "{text}");
        assert!(text.contains("row \u{FFFD}\u{FFFD} é"), "{text}");
        assert!(
            !text.contains('\u{1}') && !text.contains('\u{1b}'),
            "{text}"
        );
        assert!(text.contains("time=\"0.001500\""), "{text}");
        assert!(
            text.contains(r#"<testsuites name="dpone-host policy test" tests="1" failures="1""#),
            "{text}"
        );
    }
}
