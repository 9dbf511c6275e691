//! Runs `fixtures/decision-tables/scope.json` through the native scope policy.
#![allow(missing_docs)]

use dpone_decision_table::DecisionTable;
use dpone_policy_model::scope::ScopeFacts;

const TABLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/decision-tables/scope.json"
));

#[test]
fn scope_decision_table_passes() {
    let table = DecisionTable::from_json(TABLE).expect("scope.json parses as a decision table");
    assert_eq!(table.kind, "scope");
    assert_eq!(table.function, "decide");
    assert!(!table.rows.is_empty(), "scope.json has no rows");

    let mut names = std::collections::BTreeSet::new();
    for row in &table.rows {
        assert!(
            names.insert(row.name.as_str()),
            "duplicate row name: {}",
            row.name
        );
    }

    let outcomes = table.run(|input| {
        let facts: ScopeFacts =
            serde_json::from_value(input.clone()).map_err(|e| format!("bad input: {e}"))?;
        serde_json::to_value(dpone_policy_scope::decide(&facts)).map_err(|e| e.to_string())
    });

    let failures: Vec<_> = outcomes.iter().filter(|o| !o.passed).collect();
    for failure in &failures {
        eprintln!(
            "FAIL {}: {}\n  actual: {}",
            failure.name,
            failure.mismatch.as_deref().unwrap_or("?"),
            failure.actual
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} scope rows failed",
        failures.len(),
        outcomes.len()
    );
}

#[test]
fn decide_is_deterministic_over_the_table() {
    let table = DecisionTable::from_json(TABLE).expect("scope.json parses as a decision table");
    for row in &table.rows {
        let facts: ScopeFacts = serde_json::from_value(row.input.clone()).expect("row input");
        assert_eq!(
            dpone_policy_scope::decide(&facts),
            dpone_policy_scope::decide(&facts),
            "row {}",
            row.name
        );
    }
}

#[test]
fn every_scope_code_has_a_row_that_expects_it() {
    let source = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs"));
    let codes: std::collections::BTreeSet<&str> = source
        .split('"')
        .filter(|s| {
            s.starts_with("DPONE_SCOPE_") && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
        })
        .collect();
    assert!(codes.len() >= 40, "found only {} codes", codes.len());
    let table = DecisionTable::from_json(TABLE).expect("scope.json parses as a decision table");
    let expected: std::collections::BTreeSet<String> = table
        .rows
        .iter()
        .filter_map(|row| {
            let outcome = row.expect.get("deny").or_else(|| {
                row.expect
                    .get("admit")
                    .and_then(|admit| admit.get("reason"))
            })?;
            outcome.get("code")?.as_str().map(str::to_owned)
        })
        .collect();
    let missing: Vec<_> = codes
        .iter()
        .filter(|code| !expected.contains(**code))
        .collect();
    assert!(missing.is_empty(), "codes without a row: {missing:?}");
}

#[test]
fn scope_table_holds_at_least_sixty_rows() {
    let table = DecisionTable::from_json(TABLE).expect("scope.json parses as a decision table");
    assert!(
        table.rows.len() >= 60,
        "scope.json has {} rows, fewer than 60",
        table.rows.len()
    );
}

#[test]
fn messages_never_echo_input_strings() {
    // Words of the contract's own vocabulary may appear in fixed messages; nothing else may.
    const VOCABULARY: [&str; 6] = [
        "read",
        "write",
        "production",
        "non_production",
        "qualification",
        "execution",
    ];
    fn strings<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match value {
            serde_json::Value::String(s) => out.push(s),
            serde_json::Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| strings(v, out)),
            _ => {}
        }
    }
    let table = DecisionTable::from_json(TABLE).expect("scope.json parses as a decision table");
    let mut checked = 0;
    for row in &table.rows {
        let facts: ScopeFacts = serde_json::from_value(row.input.clone()).expect("row input");
        let message = match dpone_policy_scope::decide(&facts) {
            dpone_policy_model::scope::ScopeDecision::Admit(a) => a.reason.message,
            dpone_policy_model::scope::ScopeDecision::Deny(r) => r.message,
        };
        let mut inputs = Vec::new();
        strings(&row.input, &mut inputs);
        for input in inputs {
            if input.len() >= 6 && !VOCABULARY.contains(&input) {
                assert!(
                    !message.contains(input),
                    "row {}: message echoes {input:?}",
                    row.name
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "only {checked} input strings checked");
}
