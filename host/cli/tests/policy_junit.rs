//! `policy test --junit FILE` through the binary: the report has one test case per table row
//! and per conformance row, failures carry the mismatch, hostile row names stay well-formed, and
//! every report validates against `fixtures/junit/junit.xsd` with `xmllint` (libxml2; `.ci/run`
//! installs it). The component is the committed shipped guard.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dpone(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(workspace())
        .args(args)
        .output()
        .expect("the binary runs")
}

/// Validates `report` against the schema; panics with xmllint's words when it does not.
fn assert_valid(report: &Path) {
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(workspace().join("fixtures/junit/junit.xsd"))
        .arg(report)
        .output()
        .expect("xmllint runs (Debian libxml2-utils; .ci/run installs it)");
    assert!(
        out.status.success(),
        "the report does not validate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn count(xml: &str, needle: &str) -> usize {
    xml.matches(needle).count()
}

#[test]
fn a_passing_table_and_the_conformance_rows_are_one_case_each_and_validate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report.xml");
    let table = workspace().join("fixtures/decision-tables/guard.json");
    let rows = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&table).expect("table"))
        .expect("json")["rows"]
        .as_array()
        .expect("rows")
        .len();
    let out = dpone(&[
        "policy",
        "test",
        "policies/components/guard.wasm",
        "fixtures/decision-tables/guard.json",
        "--conformance",
        "--junit",
        report.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let conformance_rows: usize = json["conformance"]["tables"]
        .as_array()
        .expect("conformance tables")
        .iter()
        .map(|t| t["rows"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(conformance_rows > 0);
    assert_valid(&report);
    let xml = std::fs::read_to_string(&report).expect("report");
    assert_eq!(count(&xml, "<testcase "), rows + conformance_rows, "{xml}");
    assert_eq!(count(&xml, "<failure "), 0);
    assert!(xml.contains(&format!(
        "<testsuites name=\"dpone-host policy test\" tests=\"{}\" failures=\"0\"",
        rows + conformance_rows
    )));
    assert!(xml.contains("<testsuite name=\"guard.json\""), "{xml}");
    assert!(
        xml.contains("<testsuite name=\"conformance/guard/decide\""),
        "{xml}"
    );
    assert!(
        !xml.contains(&workspace().display().to_string()),
        "no local paths"
    );
}

#[test]
fn a_failing_row_is_a_failure_with_its_mismatch_and_hostile_names_stay_well_formed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let report = dir.path().join("report.xml");
    let table = serde_json::json!({
        "kind": "delete-mode",
        "function": "plan",
        "rows": [
            {
                "name": "hard delete is not timestamp_only <&> \"quoted\" \u{1}\u{1b}]]>",
                "input": {"delete_policy": "hard_delete", "business_columns": ["a"]},
                "expect": {"plan": {"mode": "timestamp_only"}}
            },
            {
                "name": "hard delete plans hard_delete",
                "input": {"delete_policy": "hard_delete", "business_columns": ["a"]},
                "expect": {"plan": {"mode": "hard_delete"}}
            }
        ]
    });
    let path = dir.path().join("table.json");
    std::fs::write(&path, table.to_string()).expect("write table");
    let out = dpone(&[
        "policy",
        "test",
        "policies/components/delete-mode.wasm",
        path.to_str().expect("utf-8"),
        "--junit",
        report.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(1), "the table fails");
    assert_valid(&report);
    let xml = std::fs::read_to_string(&report).expect("report written though rows failed");
    assert_eq!(count(&xml, "<testcase "), 2, "{xml}");
    assert_eq!(count(&xml, "<failure "), 1, "{xml}");
    assert!(xml.contains("tests=\"2\" failures=\"1\""), "{xml}");
    assert!(
        xml.contains("$.plan.mode"),
        "the mismatch is the message: {xml}"
    );
    assert!(
        xml.contains("&lt;&amp;&gt; &quot;quoted&quot; \u{FFFD}\u{FFFD}]]&gt;"),
        "{xml}"
    );
}

#[test]
fn an_unwritable_report_path_is_refused_with_its_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-dir/report.xml");
    let out = dpone(&[
        "policy",
        "test",
        "policies/components/guard.wasm",
        "fixtures/decision-tables/guard.json",
        "--junit",
        missing.to_str().expect("utf-8"),
    ]);
    assert_ne!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DPONE_CLI_OUTPUT_UNWRITABLE"), "{stderr}");
    assert!(
        !stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
}
