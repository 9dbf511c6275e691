//! Tier: policy parity. Every decision table in `fixtures/` runs natively (the plain Rust cores)
//! and through the shipped WebAssembly components at their locked pins; both must pass every row
//! and produce byte-identical decisions.

use dpone_decision_table::first_mismatch;
use dpone_integration_tests::{decision_tables, load_shipped};
use dpone_policy_runtime::{PolicyKind, PolicyRuntime, SandboxConfig};
use serde_json::Value;

fn native(kind: PolicyKind, function: &str, input: &Value) -> Result<Value, String> {
    fn call<I: serde::de::DeserializeOwned, O: serde::Serialize>(
        input: &Value,
        f: impl Fn(&I) -> O,
    ) -> Result<Value, String> {
        let facts: I = serde_json::from_value(input.clone()).map_err(|e| e.to_string())?;
        serde_json::to_value(f(&facts)).map_err(|e| e.to_string())
    }
    match (kind, function) {
        (PolicyKind::Guard, "decide") => call(input, dpone_policy_guard::decide),
        (PolicyKind::DeleteMode, "plan") => call(input, dpone_policy_delete_mode::plan),
        (PolicyKind::Scope, "decide") => call(input, dpone_policy_scope::decide),
        (PolicyKind::Admission, "admit-static") => {
            call(input, dpone_policy_admission::admit_static)
        }
        (PolicyKind::Admission, "admit-runtime") => {
            call(input, dpone_policy_admission::admit_runtime)
        }
        (kind, function) => Err(format!("no native {kind} {function}")),
    }
}

#[test]
fn every_table_agrees_natively_and_in_the_sandbox() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let tables = decision_tables();
    let kinds: std::collections::BTreeSet<_> = tables.iter().map(|(_, t)| t.kind.clone()).collect();
    assert_eq!(
        kinds.len(),
        PolicyKind::ALL.len(),
        "every policy kind has a decision table: {kinds:?}"
    );
    let mut rows = 0;
    // Rows of each kind that both the native core and the pinned component decided.
    let mut decided: std::collections::BTreeMap<String, usize> = Default::default();
    let mut problems = Vec::new();
    for (name, table) in &tables {
        let kind: PolicyKind = table.kind.parse().expect("table kind");
        let loaded = load_shipped(&runtime, kind);
        for row in &table.rows {
            rows += 1;
            let native = native(kind, &table.function, &row.input);
            let sandboxed = loaded
                .decide_json(&table.function, &row.input)
                .map(|d| d.decision)
                .map_err(|e| e.code().to_owned());
            match (&native, &sandboxed) {
                (Ok(n), Ok(s)) => {
                    *decided.entry(table.kind.clone()).or_default() += 1;
                    if n != s {
                        problems.push(format!("{name} / {}: native {n} != wasm {s}", row.name));
                    } else if let Some(m) = first_mismatch(&row.expect, n, "$") {
                        problems.push(format!("{name} / {}: {m}", row.name));
                    }
                }
                _ => problems.push(format!(
                    "{name} / {}: native {native:?}, wasm {sandboxed:?}",
                    row.name
                )),
            }
        }
    }
    eprintln!(
        "parity: {rows} rows across {} tables, decided per kind: {decided:?}",
        tables.len()
    );
    assert!(rows > 0, "decision tables have rows");
    // Issue 11: the scope decisions are checked on a table of at least 60 rows, every row
    // decided by both the native core and the pinned component.
    let scope_rows: usize = tables
        .iter()
        .filter(|(_, t)| t.kind == "scope")
        .map(|(_, t)| t.rows.len())
        .sum();
    let scope_decided = decided.get("scope").copied().unwrap_or(0);
    assert!(
        scope_rows >= 60,
        "the scope decision tables hold {scope_rows} rows, fewer than 60"
    );
    assert!(
        problems.is_empty(),
        "{} disagreements:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(
        scope_decided, scope_rows,
        "every scope row is decided natively and in the sandbox"
    );
}
