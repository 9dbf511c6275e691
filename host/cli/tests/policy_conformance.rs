//! Tier: CLI end-to-end. `dpone-host policy test --conformance` runs the host's conformance
//! tables: every shipped component passes them, a permissive guard (a hostile fixture that
//! allows everything) fails them, and author tables whose expectations prove nothing are
//! refused. Components come from `target/components/` (`cargo xtask policies`, `cargo xtask
//! hostile`); a missing one fails the test.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn component(name: &str) -> String {
    let path = format!("target/components/{name}.wasm");
    assert!(
        root().join(&path).is_file(),
        "{path} is not built: run `cargo xtask policies` and `cargo xtask hostile`"
    );
    path
}

fn dpone(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .args(args)
        .output()
        .expect("dpone-host runs")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn stderr_code(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let line = text.lines().last().unwrap_or_default();
    let report: Value = serde_json::from_str(line)
        .unwrap_or_else(|e| panic!("stderr ends with a JSON report ({e}): {text}"));
    report["error"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn every_shipped_component_passes_the_host_conformance_tables() {
    for (kind, functions) in [
        ("admission", &["admit-static", "admit-runtime"][..]),
        ("guard", &["decide"][..]),
        ("delete-mode", &["plan"][..]),
        ("scope", &["decide"][..]),
    ] {
        let out = dpone(&["policy", "test", &component(kind), "--conformance"]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let json = stdout_json(&out);
        assert_eq!(json["conformance_failed"], 0);
        let tables = json["conformance"]["tables"].as_array().expect("tables");
        let ran: Vec<&str> = tables
            .iter()
            .filter_map(|t| t["function"].as_str())
            .collect();
        assert_eq!(ran, functions, "{kind}");
        let rows: usize = tables
            .iter()
            .map(|t| t["rows"].as_array().map_or(0, Vec::len))
            .sum();
        assert!(rows >= 10, "{kind} ran {rows} host rows");
    }
}

#[test]
fn a_permissive_guard_fails_the_host_conformance_tables() {
    let out = dpone(&[
        "policy",
        "test",
        &component("hostile-permissive"),
        "--conformance",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_code(&out), "DPONE_POLICY_CONFORMANCE_FAILED");
    let json = stdout_json(&out);
    let failed: Vec<&str> = json["conformance"]["tables"][0]["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["passed"] == false)
        .filter_map(|r| r["id"].as_str())
        .collect();
    for id in [
        "guard.max-delete-rows.no-authority",
        "guard.authority.expired",
        "guard.authority.consumed",
    ] {
        assert!(failed.contains(&id), "{id} not among {failed:?}");
    }
}

#[test]
fn tables_that_expect_nothing_are_refused_and_nothing_to_test_is_bad_input() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("vacuous.json");
    let table = serde_json::json!({
        "kind": "delete-mode",
        "function": "plan",
        "rows": [{"name": "anything goes", "input": {"business_columns": ["a"]}, "expect": {}}]
    });
    std::fs::write(&path, table.to_string()).expect("write table");
    let out = dpone(&[
        "policy",
        "test",
        &component("delete-mode"),
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_TABLE_EXPECTATION_EMPTY");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains(dir.path().to_str().expect("utf-8")),
        "no local paths in errors"
    );

    let out = dpone(&["policy", "test", &component("delete-mode")]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_TABLE_REQUIRED");
}
