//! Host-owned conformance tables: properties every component of a kind must have, whoever wrote
//! it and whatever tables its author ships.
//!
//! A bundle's decision tables are written by the bundle's author and matched as subsets, so they
//! prove only what the author chose to test. The tables here belong to the host: they are
//! compiled into every binary that links this crate (from `fixtures/conformance-tables/`), one
//! set per supported WIT package, and the activation gate and `dpone-host policy test
//! --conformance` run them against every component of their kind.
//!
//! A row is a facts record and a *required property* of the decision, never a pinned wording or
//! a policy's private code:
//!
//! - `outcomes`: the decision variants that are acceptable (e.g. `["deny"]`: any denial code
//!   will do, an allow will not);
//! - `match` (optional): a subset pattern (the decision-table matcher) the decision must match;
//! - `checks` (optional): named predicates over the input and the decision that a subset
//!   pattern cannot state (every key state classified exactly once, effective limits within
//!   every input limit, admitted members exactly the inventory, …). A check that concerns one
//!   variant holds vacuously for the others.
//!
//! See `docs/policy-authors.md` ("Host conformance tables").

use crate::first_mismatch;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The format identifier every host conformance table carries.
pub const FORMAT: &str = "dpone.conformance-table.v1";

/// The decision variants of each kind (WIT spelling of the kind), as they appear in decision
/// JSON: the first is the permissive one (allow, admit, plan).
pub fn outcomes(kind: &str) -> Option<&'static [&'static str]> {
    match kind {
        "admission" => Some(&["admitted", "blocked"]),
        "guard" => Some(&["allow", "deny"]),
        "delete-mode" => Some(&["plan", "reject"]),
        "scope" => Some(&["admit", "deny"]),
        _ => None,
    }
}

/// The variant tag of a decision: the only key of its JSON object.
pub fn outcome_of(decision: &Value) -> Option<&str> {
    match decision.as_object() {
        Some(map) if map.len() == 1 => map.keys().next().map(String::as_str),
        _ => None,
    }
}

/// One host conformance table: one kind, one function, one WIT package.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformanceTable {
    /// Always [`FORMAT`].
    pub format: String,
    /// The WIT package whose contract the rows are written in, e.g. `dpone:policy@0.1.0`.
    pub wit_package: String,
    /// Version of this table; raised whenever a row is added, removed or changed.
    pub table_version: u32,
    /// Policy kind.
    pub kind: String,
    /// Exported function in WIT spelling.
    pub function: String,
    /// What the table covers.
    pub description: String,
    /// The rows, run in order.
    pub rows: Vec<ConformanceRow>,
}

/// One row: facts and the property the decision must have.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConformanceRow {
    /// Stable id, unique across every host table, e.g. `guard.max-delete-rows.no-authority`.
    pub id: String,
    /// The property in words.
    pub property: String,
    /// The facts record passed to the function.
    pub input: Value,
    /// What the decision must satisfy.
    pub require: Requirement,
}

/// The property a decision must have.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirement {
    /// Acceptable decision variants (non-empty).
    pub outcomes: Vec<String>,
    /// A subset pattern the decision must match, when present.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub pattern: Option<Value>,
    /// Named predicates over the input and the decision.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
}

/// A named predicate over a row's input and the decision.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
pub enum Check {
    /// Guard: an allow names no authority (none was usable).
    NoAuthorityUsed,
    /// Delete-mode: a plan classifies each of the six key states exactly once.
    EveryKeyStateOnce,
    /// Delete-mode: the plan's rule for `state` matches the subset pattern `expect`.
    RuleForState {
        /// Key state (snake_case).
        state: String,
        /// Subset pattern for the classification.
        expect: Value,
    },
    /// Delete-mode: no rule of the plan has this action.
    NoRuleAction {
        /// Row action (snake_case).
        action: String,
    },
    /// Scope: every effective limit is at most the policy ceiling, the grant limit and the
    /// request limit of its kind.
    LimitsWithinInputs,
    /// Admission (runtime): the admitted members are exactly the inventory's members, each
    /// once, with their shard and replica numbers.
    MembersAreTheInventory,
}

/// The outcome of one conformance row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ConformanceOutcome {
    /// Row id.
    pub id: String,
    /// Whether the decision had the required property.
    pub passed: bool,
    /// The decision variant produced, or `error` when the decision failed.
    pub outcome: String,
    /// Why the row failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Why the host's tables cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConformanceError {
    /// The host has no conformance tables for this WIT package.
    UnsupportedPackage(String),
    /// The host has no conformance table for this kind.
    NoTable(String),
    /// A compiled-in table does not parse or breaks the format's rules (a host defect).
    Malformed(String),
}

impl std::fmt::Display for ConformanceError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnsupportedPackage(p) => {
                write!(
                    f,
                    "the host has no conformance tables for WIT package {p:?}"
                )
            }
            Self::NoTable(k) => write!(f, "the host has no conformance table for kind {k:?}"),
            Self::Malformed(d) => write!(f, "a host conformance table is malformed: {d}"),
        }
    }
}

impl std::error::Error for ConformanceError {}

/// The compiled-in tables: (WIT package, file name, JSON text).
const HOST_TABLES: &[(&str, &str, &str)] = &[
    (
        "dpone:policy@0.1.0",
        "admission-static.json",
        include_str!("../../../fixtures/conformance-tables/0.1.0/admission-static.json"),
    ),
    (
        "dpone:policy@0.1.0",
        "admission-runtime.json",
        include_str!("../../../fixtures/conformance-tables/0.1.0/admission-runtime.json"),
    ),
    (
        "dpone:policy@0.1.0",
        "delete-mode.json",
        include_str!("../../../fixtures/conformance-tables/0.1.0/delete-mode.json"),
    ),
    (
        "dpone:policy@0.1.0",
        "guard.json",
        include_str!("../../../fixtures/conformance-tables/0.1.0/guard.json"),
    ),
    (
        "dpone:policy@0.1.0",
        "scope.json",
        include_str!("../../../fixtures/conformance-tables/0.1.0/scope.json"),
    ),
];

/// Every host conformance table of `wit_package` for `kind`, parsed and checked. Fails closed:
/// an unknown package, a kind without a table or a malformed table is an error, never an empty
/// list.
pub fn host_tables(
    wit_package: &str,
    kind: &str,
) -> Result<Vec<ConformanceTable>, ConformanceError> {
    if !HOST_TABLES.iter().any(|(p, _, _)| *p == wit_package) {
        return Err(ConformanceError::UnsupportedPackage(wit_package.to_owned()));
    }
    let mut tables = Vec::new();
    for (package, file, text) in HOST_TABLES {
        if *package != wit_package {
            continue;
        }
        let table = ConformanceTable::from_json(text)
            .map_err(|e| ConformanceError::Malformed(format!("{file}: {e}")))?;
        if table.wit_package != wit_package {
            return Err(ConformanceError::Malformed(format!(
                "{file}: written for {}",
                table.wit_package
            )));
        }
        if table.kind == kind {
            tables.push(table);
        }
    }
    if tables.is_empty() {
        return Err(ConformanceError::NoTable(kind.to_owned()));
    }
    Ok(tables)
}

impl ConformanceTable {
    /// Parses a table and checks the format's rules: the format id, a known kind, at least one
    /// row, unique non-empty ids, and every row naming at least one outcome of the kind.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let table: Self = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if table.format != FORMAT {
            return Err(format!("format is not {FORMAT}"));
        }
        let known =
            outcomes(&table.kind).ok_or_else(|| format!("unknown kind {:?}", table.kind))?;
        if table.rows.is_empty() {
            return Err("the table has no rows".into());
        }
        let mut seen = std::collections::BTreeSet::new();
        for row in &table.rows {
            if row.id.is_empty() || !seen.insert(row.id.as_str()) {
                return Err(format!("row id {:?} is empty or repeated", row.id));
            }
            if row.require.outcomes.is_empty()
                || row
                    .require
                    .outcomes
                    .iter()
                    .any(|o| !known.contains(&o.as_str()))
            {
                return Err(format!("row {:?} names no outcome of its kind", row.id));
            }
        }
        Ok(table)
    }

    /// Runs every row through `decide`, which returns the decision as JSON or an error text.
    /// A failed decision fails its row: a component that cannot decide has no property.
    pub fn run(
        &self,
        mut decide: impl FnMut(&Value) -> Result<Value, String>,
    ) -> Vec<ConformanceOutcome> {
        self.rows
            .iter()
            .map(|row| match decide(&row.input) {
                Ok(decision) => {
                    let failure = row.judge(&decision).err();
                    ConformanceOutcome {
                        id: row.id.clone(),
                        passed: failure.is_none(),
                        outcome: outcome_of(&decision).unwrap_or("malformed").to_owned(),
                        failure,
                    }
                }
                Err(error) => ConformanceOutcome {
                    id: row.id.clone(),
                    passed: false,
                    outcome: "error".into(),
                    failure: Some(format!("decision failed: {error}")),
                },
            })
            .collect()
    }
}

impl ConformanceRow {
    /// Whether `decision` has the row's required property; the error says which part failed.
    pub fn judge(&self, decision: &Value) -> Result<(), String> {
        let outcome = outcome_of(decision).ok_or("the decision is not one variant")?;
        if !self.require.outcomes.iter().any(|o| o == outcome) {
            return Err(format!(
                "outcome {outcome:?}, required one of {:?}",
                self.require.outcomes
            ));
        }
        if let Some(mismatch) = self
            .require
            .pattern
            .as_ref()
            .and_then(|pattern| first_mismatch(pattern, decision, "$"))
        {
            return Err(mismatch);
        }
        for check in &self.require.checks {
            check.holds(&self.input, decision)?;
        }
        Ok(())
    }
}

const KEY_STATES: [&str; 6] = [
    "new_in_source",
    "changed",
    "identical",
    "reappeared",
    "missing",
    "still_missing",
];

const LIMITS: [&str; 5] = [
    "max_workloads",
    "max_attempts",
    "max_source_rows",
    "max_source_bytes",
    "max_attempt_seconds",
];

impl Check {
    /// Whether the predicate holds; the error names the first violation.
    pub fn holds(&self, input: &Value, decision: &Value) -> Result<(), String> {
        match self {
            Self::NoAuthorityUsed => match decision.get("allow") {
                Some(allowed) if !allowed["authority_used"].is_null() => {
                    Err("the allow consumes an authority".into())
                }
                _ => Ok(()),
            },
            Self::EveryKeyStateOnce => {
                let Some(plan) = decision.get("plan") else {
                    return Ok(());
                };
                let rules = plan["rules"].as_array().ok_or("the plan has no rules")?;
                for state in KEY_STATES {
                    let n = rules.iter().filter(|r| r["state"] == state).count();
                    if n != 1 {
                        return Err(format!("key state {state} is classified {n} times"));
                    }
                }
                if rules.len() != KEY_STATES.len() {
                    return Err(format!("the plan has {} rules, not 6", rules.len()));
                }
                Ok(())
            }
            Self::RuleForState { state, expect } => {
                let Some(plan) = decision.get("plan") else {
                    return Ok(());
                };
                let rule = plan["rules"]
                    .as_array()
                    .and_then(|rules| rules.iter().find(|r| r["state"] == state.as_str()))
                    .ok_or_else(|| format!("no rule for key state {state}"))?;
                match first_mismatch(expect, rule, &format!("rule[{state}]")) {
                    Some(mismatch) => Err(mismatch),
                    None => Ok(()),
                }
            }
            Self::NoRuleAction { action } => {
                let Some(plan) = decision.get("plan") else {
                    return Ok(());
                };
                let used = plan["rules"]
                    .as_array()
                    .is_some_and(|rules| rules.iter().any(|r| r["action"] == action.as_str()));
                if used {
                    Err(format!("a rule has action {action}"))
                } else {
                    Ok(())
                }
            }
            Self::LimitsWithinInputs => {
                let Some(admitted) = decision.get("admit") else {
                    return Ok(());
                };
                let effective = &admitted["effective_limits"];
                for limit in LIMITS {
                    let got = effective[limit]
                        .as_u64()
                        .ok_or_else(|| format!("effective {limit} is missing"))?;
                    for (source, bound) in [
                        ("policy ceiling", &input["policy"]["ceilings"][limit]),
                        ("grant limit", &input["grant"]["limits"][limit]),
                        ("request limit", &input["request"]["limits"][limit]),
                    ] {
                        let bound = bound
                            .as_u64()
                            .ok_or_else(|| format!("the input has no {source} {limit}"))?;
                        if got > bound {
                            return Err(format!(
                                "effective {limit} {got} exceeds the {source} {bound}"
                            ));
                        }
                    }
                }
                Ok(())
            }
            Self::MembersAreTheInventory => {
                let Some(admitted) = decision.get("admitted") else {
                    return Ok(());
                };
                let key = |m: &Value| {
                    (
                        m["member_id"].as_str().map(str::to_owned),
                        m["shard_num"].as_u64(),
                        m["replica_num"].as_u64(),
                    )
                };
                let mut have: Vec<_> = admitted["members"]
                    .as_array()
                    .ok_or("no admitted members")?
                    .iter()
                    .map(key)
                    .collect();
                let mut want: Vec<_> = input["members"]
                    .as_array()
                    .ok_or("the input has no members")?
                    .iter()
                    .map(key)
                    .collect();
                have.sort();
                want.sort();
                if have == want {
                    Ok(())
                } else {
                    Err("the admitted members are not exactly the inventory".into())
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_host_table_parses_and_ids_are_unique_across_tables() {
        let mut ids = std::collections::BTreeSet::new();
        for kind in ["admission", "guard", "delete-mode", "scope"] {
            let tables = host_tables("dpone:policy@0.1.0", kind).expect("tables");
            let rows: usize = tables.iter().map(|t| t.rows.len()).sum();
            assert!(rows >= 10, "{kind} has {rows} host rows");
            for row in tables.iter().flat_map(|t| &t.rows) {
                assert!(ids.insert(row.id.clone()), "{} twice", row.id);
                assert!(row.id.starts_with(kind), "{} is not under {kind}", row.id);
            }
        }
    }

    #[test]
    fn unknown_packages_and_kinds_have_no_tables() {
        assert!(matches!(
            host_tables("dpone:policy@0.2.0", "guard"),
            Err(ConformanceError::UnsupportedPackage(_))
        ));
        assert!(matches!(
            host_tables("dpone:policy@0.1.0", "billing"),
            Err(ConformanceError::NoTable(_))
        ));
    }

    #[test]
    fn a_permissive_guard_fails_the_host_table() {
        let tables = host_tables("dpone:policy@0.1.0", "guard").expect("tables");
        let outcomes = tables[0].run(|_| {
            Ok(
                json!({"allow": {"load": "incremental", "authority_used": null,
                "transfer_from": null, "reason": {"code": "OK", "message": ""}}}),
            )
        });
        assert!(outcomes.iter().filter(|o| !o.passed).count() >= 10);
    }

    /// Failing rows when `decide` answers every row of every host table of `kind`.
    fn failures(kind: &str, decide: impl Fn(&Value) -> Value) -> Vec<String> {
        host_tables("dpone:policy@0.1.0", kind)
            .expect("tables")
            .iter()
            .flat_map(|t| t.run(|input| Ok(decide(input))))
            .filter(|o| !o.passed)
            .map(|o| o.id)
            .collect()
    }

    #[test]
    fn a_wrong_policy_of_every_kind_fails_its_host_tables() {
        // Admission that admits everything, naming no member.
        let admits = failures("admission", |_| {
            json!({"admitted": {"requested": "cluster", "selected": "cluster_external",
                "replication_mode": "external", "runtime_admission_required": true,
                "no_fallback": true, "members": []}})
        });
        assert!(admits.len() >= 10, "{admits:?}");
        assert!(admits.contains(&"admission.runtime.partial-inventory".to_owned()));
        assert!(admits.contains(&"admission.static.replicated-engine-external".to_owned()));

        // Scope that admits whatever the request asks for.
        let generous = failures("scope", |input| {
            json!({"admit": {"effective_limits": input["request"]["limits"],
                "reason": {"code": "OK", "message": ""}}})
        });
        assert!(generous.len() >= 10, "{generous:?}");
        assert!(generous.contains(&"scope.request-above-grant.limits-within-inputs".to_owned()));
        assert!(generous.contains(&"scope.expired".to_owned()));

        // Delete-mode that hard-deletes missing keys whatever the configuration says.
        let states = [
            ("new_in_source", "insert"),
            ("changed", "update"),
            ("identical", "unchanged"),
            ("reappeared", "reactivate"),
            ("missing", "hard_delete"),
            ("still_missing", "keep_deleted"),
        ];
        let rules: Vec<Value> = states
            .iter()
            .map(|(state, action)| {
                json!({"state": state, "action": action, "write_business_columns": false,
                    "deleted_at": "none", "deleted_flag": "none"})
            })
            .collect();
        let hard = failures("delete-mode", |_| {
            json!({"plan": {"mode": "hard_delete", "columns": [],
                "active_predicate": "every_row", "rules": rules}})
        });
        assert!(hard.len() >= 10, "{hard:?}");
        assert!(hard.contains(&"delete-mode.timestamp-only.soft".to_owned()));
        assert!(!hard.contains(&"delete-mode.hard-delete".to_owned()));
    }

    #[test]
    fn a_denying_row_fails_on_error_and_on_allow() {
        let row = ConformanceRow {
            id: "guard.x".into(),
            property: String::new(),
            input: json!({}),
            require: Requirement {
                outcomes: vec!["deny".into()],
                pattern: None,
                checks: Vec::new(),
            },
        };
        assert!(row.judge(&json!({"deny": {"code": "X"}})).is_ok());
        assert!(row.judge(&json!({"allow": {}})).is_err());
        assert!(row.judge(&json!({"deny": {}, "allow": {}})).is_err());
    }

    #[test]
    fn checks_catch_what_subset_patterns_cannot() {
        let rule = |state: &str, action: &str| json!({"state": state, "action": action});
        let mut rules: Vec<Value> = KEY_STATES.iter().map(|s| rule(s, "unchanged")).collect();
        let plan = json!({"plan": {"rules": rules.clone()}});
        assert!(Check::EveryKeyStateOnce.holds(&json!({}), &plan).is_ok());
        rules[5] = rule("missing", "soft_delete");
        let twice = json!({"plan": {"rules": rules}});
        assert!(Check::EveryKeyStateOnce.holds(&json!({}), &twice).is_err());
        let no_hard = Check::NoRuleAction {
            action: "soft_delete".into(),
        };
        assert!(no_hard.holds(&json!({}), &twice).is_err());
        assert!(no_hard.holds(&json!({}), &plan).is_ok());

        let limits = |n: u64| {
            json!({"max_workloads": n, "max_attempts": n, "max_source_rows": n,
                "max_source_bytes": n, "max_attempt_seconds": n})
        };
        let input = json!({"policy": {"ceilings": limits(9)}, "grant": {"limits": limits(5)},
            "request": {"limits": limits(7)}});
        let within = json!({"admit": {"effective_limits": limits(5)}});
        let beyond = json!({"admit": {"effective_limits": limits(6)}});
        assert!(Check::LimitsWithinInputs.holds(&input, &within).is_ok());
        assert!(Check::LimitsWithinInputs.holds(&input, &beyond).is_err());
        assert!(
            Check::LimitsWithinInputs
                .holds(&input, &json!({"deny": {}}))
                .is_ok()
        );

        let member = |id: &str, r: u64| json!({"member_id": id, "shard_num": 1, "replica_num": r});
        let input = json!({"members": [member("a", 1), member("b", 2)]});
        let exact = json!({"admitted": {"members": [member("b", 2), member("a", 1)]}});
        let outsider = json!({"admitted": {"members": [member("a", 1), member("c", 2)]}});
        let short = json!({"admitted": {"members": [member("a", 1)]}});
        assert!(Check::MembersAreTheInventory.holds(&input, &exact).is_ok());
        assert!(
            Check::MembersAreTheInventory
                .holds(&input, &outsider)
                .is_err()
        );
        assert!(Check::MembersAreTheInventory.holds(&input, &short).is_err());
    }

    #[test]
    fn malformed_tables_are_refused() {
        let table = |outcomes: &str| {
            format!(
                r#"{{"format": "{FORMAT}", "wit_package": "dpone:policy@0.1.0",
                "table_version": 1, "kind": "guard", "function": "decide",
                "description": "", "rows": [{{"id": "guard.a", "property": "",
                "input": {{}}, "require": {{"outcomes": {outcomes}}}}}]}}"#
            )
        };
        assert!(ConformanceTable::from_json(&table(r#"["deny"]"#)).is_ok());
        assert!(ConformanceTable::from_json(&table("[]")).is_err());
        assert!(ConformanceTable::from_json(&table(r#"["admit"]"#)).is_err());
    }
}
