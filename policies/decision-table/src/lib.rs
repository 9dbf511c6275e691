//! Decision tables: the policy author's test format.
//!
//! A table is a JSON document naming one policy kind and one exported function, with rows of
//! `input` (the function's facts record) and `expect` (the decision). `expect` is matched as a
//! *subset*: every object key it names must match, keys it omits are not compared, arrays must
//! have the same length and match element by element. Tables therefore pin codes and outcomes
//! without pinning the wording of messages. See `docs/policy-authors.md`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub mod conformance;

/// One decision table.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionTable {
    /// Policy kind: `admission`, `guard`, `delete-mode` or `scope`.
    pub kind: String,
    /// Exported function in WIT spelling, e.g. `decide` or `admit-static`.
    pub function: String,
    /// What the table covers.
    #[serde(default)]
    pub description: String,
    /// The rows, run in order.
    pub rows: Vec<Row>,
}

/// One row of a decision table.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    /// Unique, descriptive row name.
    pub name: String,
    /// The rule the row exercises (spec reference or rule id).
    #[serde(default)]
    pub rule: String,
    /// The facts record passed to the function.
    pub input: Value,
    /// The expected decision (subset match).
    pub expect: Value,
}

/// The outcome of one row.
#[derive(Clone, Debug, Serialize)]
pub struct RowOutcome {
    /// Row name.
    pub name: String,
    /// Whether the decision matched the expectation.
    pub passed: bool,
    /// The decision actually produced, or the error that replaced it.
    pub actual: Value,
    /// Where the first mismatch is, when the row failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mismatch: Option<String>,
}

impl DecisionTable {
    /// Parses a table from JSON text.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Refuses rows whose expectation cannot fail: every `expect` must be an object naming
    /// exactly one decision variant of the table's kind (`{"deny": {…}}`, `{"allow": {}}`).
    /// `expect: {}` matches every decision, and a misspelt variant never matches, so a table
    /// with either proves nothing about the component. The error names the first such row.
    pub fn check_expectations(&self) -> Result<(), String> {
        let known = conformance::outcomes(&self.kind)
            .ok_or_else(|| format!("unknown policy kind {:?}", self.kind))?;
        for row in &self.rows {
            match conformance::outcome_of(&row.expect) {
                Some(variant) if known.contains(&variant) => {}
                _ => {
                    return Err(format!(
                        "row {:?} expects nothing a decision can fail: `expect` must name one of {known:?}",
                        row.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Runs every row through `decide`, which returns the decision as JSON or an error text.
    pub fn run(&self, mut decide: impl FnMut(&Value) -> Result<Value, String>) -> Vec<RowOutcome> {
        self.rows
            .iter()
            .map(|row| match decide(&row.input) {
                Ok(actual) => {
                    let mismatch = first_mismatch(&row.expect, &actual, "$");
                    RowOutcome {
                        name: row.name.clone(),
                        passed: mismatch.is_none(),
                        actual,
                        mismatch,
                    }
                }
                Err(error) => RowOutcome {
                    name: row.name.clone(),
                    passed: false,
                    actual: Value::String(error.clone()),
                    mismatch: Some(format!("$: decision failed: {error}")),
                },
            })
            .collect()
    }
}

/// Returns where `actual` first fails to match the subset pattern `expected`, if anywhere.
pub fn first_mismatch(expected: &Value, actual: &Value, path: &str) -> Option<String> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, want)| {
            let at = format!("{path}.{key}");
            match have.get(key) {
                Some(have) => first_mismatch(want, have, &at),
                None if want.is_null() => None,
                None => Some(format!("{at}: missing")),
            }
        }),
        (Value::Array(want), Value::Array(have)) => {
            if want.len() != have.len() {
                return Some(format!(
                    "{path}: expected {} elements, got {}",
                    want.len(),
                    have.len()
                ));
            }
            want.iter()
                .zip(have)
                .enumerate()
                .find_map(|(i, (w, h))| first_mismatch(w, h, &format!("{path}[{i}]")))
        }
        (want, have) if want == have => None,
        (want, have) => Some(format!("{path}: expected {want}, got {have}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_match_ignores_omitted_keys_but_not_values() {
        let actual = json!({"deny": {"code": "x", "message": "words"}});
        assert_eq!(
            first_mismatch(&json!({"deny": {"code": "x"}}), &actual, "$"),
            None
        );
        assert!(first_mismatch(&json!({"deny": {"code": "y"}}), &actual, "$").is_some());
        assert!(first_mismatch(&json!({"allow": {}}), &actual, "$").is_some());
    }

    #[test]
    fn arrays_must_have_equal_length() {
        let actual = json!([{"code": "a"}, {"code": "b"}]);
        assert_eq!(
            first_mismatch(&json!([{"code": "a"}, {}]), &actual, "$"),
            None
        );
        assert!(first_mismatch(&json!([{"code": "a"}]), &actual, "$").is_some());
    }

    #[test]
    fn empty_or_unknown_expectations_are_refused() {
        let table = |expect: Value| DecisionTable {
            kind: "guard".into(),
            function: "decide".into(),
            description: String::new(),
            rows: vec![Row {
                name: "r".into(),
                rule: String::new(),
                input: json!({}),
                expect,
            }],
        };
        assert!(table(json!({})).check_expectations().is_err());
        assert!(table(Value::Null).check_expectations().is_err());
        assert!(table(json!({"admit": {}})).check_expectations().is_err());
        assert!(
            table(json!({"deny": {}, "allow": {}}))
                .check_expectations()
                .is_err()
        );
        assert!(table(json!({"allow": {}})).check_expectations().is_ok());
        assert!(
            table(json!({"deny": {"code": "X"}}))
                .check_expectations()
                .is_ok()
        );
    }

    #[test]
    fn failed_decision_fails_the_row() {
        let table = DecisionTable {
            kind: "guard".into(),
            function: "decide".into(),
            description: String::new(),
            rows: vec![Row {
                name: "r".into(),
                rule: String::new(),
                input: json!({}),
                expect: json!({}),
            }],
        };
        let outcomes = table.run(|_| Err("trap".into()));
        assert!(!outcomes[0].passed);
    }
}
