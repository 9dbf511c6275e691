//! Runs the guard decision table (`fixtures/decision-tables/guard.json`) through the native
//! policy core, plus focused checks of properties a table cannot state directly.
#![allow(missing_docs, clippy::print_stdout)]

use dpone_decision_table::DecisionTable;
use dpone_policy_guard::{codes, decide};
use dpone_policy_model::guard::{GuardDecision, GuardFacts, LoadKind};
use serde_json::{Value, json};

/// Loads the shared guard decision table.
fn table() -> DecisionTable {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/decision-tables/guard.json"
    );
    let text = std::fs::read_to_string(path).expect("read guard.json");
    DecisionTable::from_json(&text).expect("parse guard.json")
}

/// Decodes a facts row, decides, and encodes the decision.
fn run_row(input: &Value) -> Result<Value, String> {
    let facts: GuardFacts = serde_json::from_value(input.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(decide(&facts)).map_err(|e| e.to_string())
}

#[test]
fn decision_table_rows_all_pass() {
    let table = table();
    assert_eq!(table.kind, "guard");
    assert_eq!(table.function, "decide");
    let outcomes = table.run(run_row);
    let failures: Vec<_> = outcomes.iter().filter(|o| !o.passed).collect();
    for f in &failures {
        println!(
            "FAIL {}: {}\n  actual: {}",
            f.name,
            f.mismatch.as_deref().unwrap_or("?"),
            f.actual
        );
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed",
        failures.len(),
        outcomes.len()
    );
}

#[test]
fn decision_table_row_names_are_unique_and_expectations_pin_a_code() {
    let table = table();
    let mut names = std::collections::BTreeSet::new();
    for row in &table.rows {
        assert!(
            names.insert(row.name.clone()),
            "duplicate row name {}",
            row.name
        );
        let code = row
            .expect
            .pointer("/deny/code")
            .or_else(|| row.expect.pointer("/allow/reason/code"))
            .and_then(Value::as_str);
        let code = code.unwrap_or_else(|| panic!("row {} pins no reason code", row.name));
        assert!(
            code.starts_with("DPONE_GUARD_"),
            "row {}: code {code}",
            row.name
        );
    }
}

/// Every documented code, deny and allow.
const ALL_CODES: &[&str] = &[
    codes::FACTS_INCONSISTENT,
    codes::GUARDS_INVALID,
    codes::AUTHORITY_MALFORMED,
    codes::AUTHORITY_DIGEST_DRIFT,
    codes::AUTHORITY_ALREADY_CONSUMED,
    codes::AUTHORITY_NOT_YET_VALID,
    codes::AUTHORITY_EXPIRED,
    codes::AUTHORITY_STATE_KEY_DRIFT,
    codes::AUTHORITY_SCOPE_DRIFT,
    codes::AUTHORITY_CHECKPOINT_DRIFT,
    codes::TRANSFER_REQUIRES_ABSENT_CHECKPOINT,
    codes::TRANSFER_REQUIRES_FULL_BASELINE,
    codes::EMPTY_SNAPSHOT_REFUSED,
    codes::AUTHORITY_EMPTY_SNAPSHOT_NOT_COVERED,
    codes::BASELINE_REQUIRES_AUTHORITY,
    codes::AUTHORITY_BASELINE_NOT_ALLOWED,
    codes::AUTHORITY_UNUSED,
    codes::MAX_DELETE_ROWS_EXCEEDED,
    codes::MAX_DELETE_RATIO_EXCEEDED,
    codes::AUTHORITY_MAX_DELETE_ROWS_EXCEEDED,
    codes::AUTHORITY_MAX_DELETE_RATIO_EXCEEDED,
    codes::TARGET_OWNED_BY_OTHER_STATE,
    codes::TRANSFER_MISMATCH,
    codes::TRANSFER_UNNECESSARY,
    codes::ALLOWED_WITHIN_GUARDS,
    codes::ALLOWED_FIRST_BASELINE,
    codes::ALLOWED_EMPTY_SNAPSHOT_WITHIN_GUARDS,
    codes::ALLOWED_AUTHORIZED_DELETES,
    codes::ALLOWED_AUTHORIZED_ALL_DELETE,
    codes::ALLOWED_AUTHORIZED_FULL_BASELINE,
    codes::ALLOWED_AUTHORIZED_TRANSFER,
];

#[test]
fn every_code_is_stable_upper_snake_and_covered_by_the_table() {
    let table = table();
    let text = serde_json::to_string(&table.rows.iter().map(|r| &r.expect).collect::<Vec<_>>())
        .expect("encode expectations");
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/policies/guard.md"
    ))
    .expect("read docs/policies/guard.md");
    let mut seen = std::collections::BTreeSet::new();
    for code in ALL_CODES {
        assert!(seen.insert(*code), "duplicate code {code}");
        assert!(code.starts_with("DPONE_GUARD_"), "{code}");
        assert!(
            code.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "{code} is not UPPER_SNAKE"
        );
        assert!(
            text.contains(&format!("\"{code}\"")),
            "no table row expects {code}"
        );
        assert!(
            docs.contains(code),
            "docs/policies/guard.md does not document {code}"
        );
    }
}

/// A realistic incremental run: 1,000 active keys, checkpoint present, nothing else.
fn base() -> GuardFacts {
    serde_json::from_value(json!({
        "now": 1_000,
        "state_key": "sk-new",
        "scope_hash": "scope-1",
        "checkpoint": {"xmin": 500, "revision": 7},
        "target_active_keys": 1_000,
        "target_total_rows": 1_200,
        "snapshot_keys": 1_000,
        "missing_keys": 0,
        "guards": {"max_delete_rows": null, "max_delete_ratio": null},
        "empty_snapshot": "fail",
        "other_owner": null,
        "authority": null
    }))
    .expect("base facts")
}

fn code(d: &GuardDecision) -> &str {
    match d {
        GuardDecision::Allow(a) => &a.reason.code,
        GuardDecision::Deny(r) => &r.code,
    }
}

#[test]
fn ratio_comparison_is_exact_at_extreme_counts() {
    // u64::MAX active keys, half of them missing: exactly 500,000 ppm passes, 499,999 fails.
    let mut f = base();
    f.target_active_keys = u64::MAX;
    f.target_total_rows = u64::MAX;
    f.snapshot_keys = u64::MAX;
    f.missing_keys = u64::MAX / 2 + 1; // 0.5 + 2^-64 of the population
    f.guards.max_delete_ratio = Some(500_000);
    assert_eq!(code(&decide(&f)), codes::MAX_DELETE_RATIO_EXCEEDED);
    f.missing_keys = u64::MAX / 2; // just below one half
    assert_eq!(code(&decide(&f)), codes::ALLOWED_WITHIN_GUARDS);
    f.guards.max_delete_ratio = Some(499_999);
    assert_eq!(code(&decide(&f)), codes::MAX_DELETE_RATIO_EXCEEDED);
}

#[test]
fn decision_is_deterministic_and_messages_carry_no_identities() {
    let mut f = base();
    f.missing_keys = 60;
    f.guards.max_delete_rows = Some(50);
    let first = decide(&f);
    assert_eq!(first, decide(&f));
    let GuardDecision::Deny(reason) = first else {
        panic!("expected deny")
    };
    assert_eq!(reason.code, codes::MAX_DELETE_ROWS_EXCEEDED);
    assert!(!reason.message.contains("sk-new") && !reason.message.contains("scope-1"));
    assert!(reason.message.contains("60") && reason.message.contains("50"));
}

#[test]
fn no_checkpoint_always_means_full_baseline() {
    let mut f = base();
    f.checkpoint = None;
    f.target_active_keys = 0;
    f.target_total_rows = 0;
    match decide(&f) {
        GuardDecision::Allow(a) => {
            assert_eq!(a.load, LoadKind::FullBaseline);
            assert_eq!(a.authority_used, None);
        }
        GuardDecision::Deny(r) => panic!("denied: {}", r.code),
    }
}

#[test]
fn total_over_arbitrary_counts() {
    // Any combination of extreme counts yields a decision (no panic), and impossible ones deny.
    let values = [0, 1, 2, u64::MAX - 1, u64::MAX];
    for active in values {
        for total in values {
            for snapshot in values {
                for missing in values {
                    let mut f = base();
                    f.target_active_keys = active;
                    f.target_total_rows = total;
                    f.snapshot_keys = snapshot;
                    f.missing_keys = missing;
                    f.guards.max_delete_ratio = Some(1_000_000);
                    f.guards.max_delete_rows = Some(u64::MAX);
                    let d = decide(&f);
                    let impossible =
                        active > total || missing > active || active - missing > snapshot;
                    if impossible {
                        assert_eq!(code(&d), codes::FACTS_INCONSISTENT);
                    }
                }
            }
        }
    }
}
