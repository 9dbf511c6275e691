//! Runs the admission decision tables in `fixtures/decision-tables/` through the native core.
//!
//! The same tables run against the built WebAssembly component in the host's policy harness;
//! passing here and there is the parity the policy contract asks for.

use std::path::{Path, PathBuf};

use dpone_decision_table::DecisionTable;
use dpone_policy_model::admission::{RuntimeFacts, StaticFacts};
use serde_json::Value;

const TABLES: &[&str] = &["admission-static.json", "admission-runtime.json"];

fn tables_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/decision-tables")
}

fn admit_static(input: &Value) -> Result<Value, String> {
    let facts: StaticFacts =
        serde_json::from_value(input.clone()).map_err(|e| format!("bad input: {e}"))?;
    serde_json::to_value(dpone_policy_admission::admit_static(&facts))
        .map_err(|e| format!("bad decision: {e}"))
}

fn admit_runtime(input: &Value) -> Result<Value, String> {
    let facts: RuntimeFacts =
        serde_json::from_value(input.clone()).map_err(|e| format!("bad input: {e}"))?;
    serde_json::to_value(dpone_policy_admission::admit_runtime(&facts))
        .map_err(|e| format!("bad decision: {e}"))
}

fn run_table(file: &str) -> Result<usize, String> {
    let path = tables_dir().join(file);
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let table = DecisionTable::from_json(&text).map_err(|e| format!("{file}: {e}"))?;
    if table.kind != "admission" {
        return Err(format!(
            "{file}: kind is {:?}, expected \"admission\"",
            table.kind
        ));
    }
    if table.rows.is_empty() {
        return Err(format!("{file}: no rows"));
    }
    let outcomes = match table.function.as_str() {
        "admit-static" => table.run(admit_static),
        "admit-runtime" => table.run(admit_runtime),
        other => return Err(format!("{file}: unknown admission function {other:?}")),
    };
    let failures: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| {
            format!(
                "  {file} / {}: {}\n    actual: {}",
                o.name,
                o.mismatch.as_deref().unwrap_or("mismatch"),
                o.actual
            )
        })
        .collect();
    if failures.is_empty() {
        Ok(outcomes.len())
    } else {
        Err(format!(
            "{} of {} rows failed:\n{}",
            failures.len(),
            outcomes.len(),
            failures.join("\n")
        ))
    }
}

#[test]
fn admission_decision_tables_pass() {
    let mut errors = Vec::new();
    for file in TABLES {
        match run_table(file) {
            Ok(rows) => eprintln!("{file}: {rows} rows passed"),
            Err(e) => errors.push(e),
        }
    }
    assert!(errors.is_empty(), "\n{}", errors.join("\n"));
}

#[test]
fn row_names_are_unique() {
    for file in TABLES {
        let text = std::fs::read_to_string(tables_dir().join(file)).expect("table is readable");
        let table = DecisionTable::from_json(&text).expect("table parses");
        let mut names: Vec<&str> = table.rows.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "{file}: duplicate row names");
    }
}

#[test]
fn every_code_is_exercised_by_some_row() {
    let mut text = String::new();
    for file in TABLES {
        text.push_str(
            &std::fs::read_to_string(tables_dir().join(file)).expect("table is readable"),
        );
    }
    let codes = dpone_policy_admission::codes::STATIC
        .iter()
        .chain(dpone_policy_admission::codes::RUNTIME);
    let missing: Vec<&&str> = codes
        .filter(|c| !text.contains(&format!("\"{c}\"")))
        .collect();
    assert!(
        missing.is_empty(),
        "codes without a decision-table row: {missing:?}"
    );
}
