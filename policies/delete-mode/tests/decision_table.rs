//! Runs `fixtures/decision-tables/delete-mode.json` through the native policy core.

use dpone_decision_table::DecisionTable;
use dpone_policy_delete_mode::plan;
use dpone_policy_model::delete_mode::{DeleteModeFacts, KeyState, PlanDecision};

const TABLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/decision-tables/delete-mode.json"
));

fn table() -> DecisionTable {
    DecisionTable::from_json(TABLE).expect("delete-mode decision table parses")
}

fn decide(input: &serde_json::Value) -> Result<serde_json::Value, String> {
    let facts: DeleteModeFacts =
        serde_json::from_value(input.clone()).map_err(|e| format!("bad input: {e}"))?;
    serde_json::to_value(plan(&facts)).map_err(|e| format!("bad output: {e}"))
}

#[test]
fn every_row_of_the_decision_table_passes() {
    let table = table();
    assert_eq!(table.kind, "delete-mode");
    assert_eq!(table.function, "plan");
    let outcomes = table.run(decide);
    let failures: Vec<String> = outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(|o| {
            format!(
                "{}: {}\n  actual: {}",
                o.name,
                o.mismatch.as_deref().unwrap_or("?"),
                o.actual
            )
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        outcomes.len(),
        failures.join("\n")
    );
}

#[test]
fn row_names_are_unique() {
    let table = table();
    let mut names: Vec<&str> = table.rows.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "duplicate row names");
}

#[test]
fn every_reject_code_is_covered_by_the_table() {
    let table = table();
    let text = serde_json::to_string(&table.rows.iter().map(|r| &r.expect).collect::<Vec<_>>())
        .expect("serializes");
    for code in [
        dpone_policy_delete_mode::codes::UNKNOWN_DELETE_POLICY,
        dpone_policy_delete_mode::codes::UNKNOWN_SOFT_DELETE_MODE,
        dpone_policy_delete_mode::codes::SOFT_DELETE_MODE_WITH_HARD_DELETE,
        dpone_policy_delete_mode::codes::EMPTY_COLUMN_NAME,
        dpone_policy_delete_mode::codes::RESERVED_COLUMN_PREFIX,
        dpone_policy_delete_mode::codes::DUPLICATE_COLUMN,
    ] {
        assert!(
            text.contains(&format!("\"{code}\"")),
            "no row expects {code}"
        );
    }
}

#[test]
fn every_plan_has_exactly_one_rule_per_key_state() {
    let mut plans = 0;
    for row in table().rows {
        let facts: DeleteModeFacts = serde_json::from_value(row.input).expect("valid input");
        if let PlanDecision::Plan(p) = plan(&facts) {
            plans += 1;
            let states: Vec<KeyState> = p.rules.iter().map(|r| r.state).collect();
            assert_eq!(
                states,
                KeyState::ALL,
                "{}: rules must follow KeyState::ALL",
                row.name
            );
        }
    }
    // All four modes (and their defaults) are exercised by plan rows.
    assert!(plans >= 4, "only {plans} plan rows");
    for (policy, mode) in [
        (None, None),
        (Some("soft_delete"), Some("timestamp_and_flag")),
        (Some("soft_delete"), Some("flag_only")),
        (Some("hard_delete"), None),
    ] {
        let facts = DeleteModeFacts {
            delete_policy: policy.map(Into::into),
            soft_delete_mode: mode.map(Into::into),
            business_columns: vec!["id".into()],
        };
        match plan(&facts) {
            PlanDecision::Plan(p) => {
                assert_eq!(p.rules.len(), KeyState::ALL.len());
                for state in KeyState::ALL {
                    assert_eq!(p.rules.iter().filter(|r| r.state == state).count(), 1);
                }
            }
            PlanDecision::Reject(r) => panic!("{policy:?}/{mode:?} rejected: {}", r.code),
        }
    }
}
