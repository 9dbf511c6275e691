//! The reports of `policy …`: each command's JSON contract and its terminal summary. Reports
//! first printed as untyped JSON values keep their keys sorted ([`Report::SORTED_KEYS`]);
//! `policy inspect` and a written `policy lock` print their typed structs as they are.

use crate::render::{Report, Summary, Verdict, decision_outcome};
use dpone_decision_table::RowOutcome;
use dpone_policy_build::ComponentLock;
use dpone_policy_runtime::{ComponentSurface, DecisionEvidence, PolicyKind, Sha256Digest};
use serde::Serialize;
use serde_json::Value;

/// Reports whose summary is the plain listing of their fields ([`Summary::of_fields`]).
macro_rules! listed_reports {
    ($sorted:literal: $($report:ty),* $(,)?) => {$(
        impl Report for $report {
            const SORTED_KEYS: bool = $sorted;
            fn summary(&self) -> Summary {
                Summary::of_fields(self)
            }
        }
    )*};
}

listed_reports!(true: Scaffolded, Built, LockChecked, Bench);
listed_reports!(false: LockWritten, Inspection);

/// `policy new`: the scaffolded crate.
#[derive(Serialize)]
pub struct Scaffolded {
    /// The crate's package name.
    pub created: String,
    /// Its policy kind.
    pub kind: PolicyKind,
    /// The WIT package it targets.
    pub wit_package: &'static str,
    /// Files written, relative to the crate.
    pub files: Vec<String>,
}

/// `policy build`: the component written.
#[derive(Serialize)]
pub struct Built {
    /// The package built.
    pub built: String,
    /// Digest of the component.
    pub sha256: Sha256Digest,
    /// Size in bytes.
    pub size: usize,
    /// Its top-level imports and exports.
    pub surface: ComponentSurface,
}

/// `policy lock --check`: how many components were compared and which differ from the lock.
#[derive(Serialize)]
pub struct LockChecked {
    /// Components compared.
    pub checked: usize,
    /// Names of those whose digest differs from (or is absent in) the lock.
    pub differing: Vec<String>,
}

/// `policy lock`: the lock file written, as written.
#[derive(Serialize)]
#[serde(transparent)]
pub struct LockWritten(pub ComponentLock);

/// `policy inspect`: a component's surface.
#[derive(Serialize)]
pub struct Inspection {
    /// Digest of the component.
    pub sha256: Sha256Digest,
    /// Size in bytes.
    pub size: usize,
    /// Top-level imports.
    pub imports: Vec<String>,
    /// Top-level exports.
    pub exports: Vec<String>,
    /// Kinds whose interface the component exports at the supported version.
    pub serves: Vec<PolicyKind>,
    /// The supported WIT package.
    pub wit_package: &'static str,
}

/// `policy eval`: one decision with its evidence.
#[derive(Serialize)]
pub struct Evaluated {
    /// The decision, as the component returned it.
    pub decision: Value,
    /// Its evidence.
    pub evidence: DecisionEvidence,
    /// Verification evidence of the signed bundle the component came from; `null` for a
    /// shipped or explicit component.
    pub bundle: Option<Value>,
}

impl Report for Evaluated {
    const SORTED_KEYS: bool = true;
    /// The decision is the component's output, so its outcome is read from that JSON.
    fn summary(&self) -> Summary {
        let e = &self.evidence;
        let mut s = Summary::new(Verdict::Done, decision_outcome(&self.decision));
        s.fact("policy", e.kind)
            .fact("function", e.function)
            .fact("fuel used", e.fuel_used)
            .fact("component", e.component_sha256);
        s
    }
}

/// `policy test`: every table row (and conformance row) run against the component.
#[derive(Serialize)]
pub struct Tested {
    /// The component's pin (given, or the digest of the bytes read).
    pub component_sha256: Sha256Digest,
    /// Kind of the first table; `null` without tables.
    pub kind: Option<PolicyKind>,
    /// Function of the first table; `null` without tables.
    pub function: Option<String>,
    /// Rows run.
    pub rows: usize,
    /// Rows that agreed.
    pub passed: usize,
    /// Rows that disagreed.
    pub failed: usize,
    /// The rows that disagreed.
    pub failures: Vec<RowOutcome>,
    /// Each table's counts.
    pub tables: Vec<TestedTable>,
    /// The host conformance tables' evidence (as the activation gate records it); `null`
    /// without `--conformance`.
    pub conformance: Value,
    /// Conformance rows that failed.
    pub conformance_failed: usize,
}

/// One decision table of a `policy test`.
#[derive(Serialize)]
pub struct TestedTable {
    /// The table's file name.
    pub table: String,
    /// Its kind.
    pub kind: PolicyKind,
    /// Its function.
    pub function: String,
    /// Rows in it.
    pub rows: usize,
    /// Rows that disagreed.
    pub failed: usize,
}

impl Report for Tested {
    const SORTED_KEYS: bool = true;
    fn summary(&self) -> Summary {
        let failed = self.failed + self.conformance_failed;
        let mut s = if failed == 0 {
            Summary::new(
                Verdict::Done,
                format!("{} of {} rows passed", self.passed, self.rows),
            )
        } else {
            Summary::new(
                Verdict::Refused,
                format!("{failed} of {} rows failed", self.rows),
            )
        };
        s.fact_if("policy", self.kind)
            .fact_if("function", self.function.as_ref())
            .fact("component", self.component_sha256);
        for t in &self.tables {
            s.line(
                &format!("table {}", crate::render::clean(&t.table)),
                format!("{} rows, {} failed", t.rows, t.failed),
            );
        }
        s
    }
}

/// `policy bench`: load and decision times of a shipped component.
#[derive(Serialize)]
pub struct Bench {
    /// Policy kind.
    pub kind: PolicyKind,
    /// Function measured.
    pub function: String,
    /// Decisions measured.
    pub iterations: u32,
    /// Decision time in a fresh sandbox, nanoseconds.
    pub fresh_sandbox_decision_ns: DecisionTimes,
    /// Fuel of the last decision.
    pub fuel_per_decision: u64,
    /// Compile time without a cache, microseconds (rounded).
    pub cold_compile_us: f64,
    /// Load time from a warm precompiled cache, microseconds.
    pub warm_cache_load_us: LoadTimes,
    /// What the decision time includes.
    pub note: &'static str,
}

/// Percentiles and extremes of the decision times; `min` and `max` are `null` without samples.
#[derive(Serialize)]
pub struct DecisionTimes {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Fastest.
    pub min: Option<u64>,
    /// Slowest.
    pub max: Option<u64>,
}

/// Percentiles of the warm cache load times.
#[derive(Serialize)]
pub struct LoadTimes {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::golden::{assert_pinned, assert_prints_as};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn digest(byte: u8) -> Sha256Digest {
        Sha256Digest::from([byte; 32])
    }

    fn evidence(kind: PolicyKind, function: &'static str, output: Value) -> DecisionEvidence {
        DecisionEvidence {
            kind,
            function,
            component_sha256: digest(1),
            wit_package: "dpone:policy@0.1.0",
            input_sha256: digest(2),
            output,
            fuel_used: 3307,
        }
    }

    fn scaffolded() -> Scaffolded {
        Scaffolded {
            created: "my-guard".into(),
            kind: PolicyKind::Guard,
            wit_package: "dpone:policy@0.1.0",
            files: vec!["Cargo.toml".into(), "src/lib.rs".into()],
        }
    }

    fn built() -> Built {
        Built {
            built: "my-guard".into(),
            sha256: digest(1),
            size: 4096,
            surface: ComponentSurface {
                imports: Vec::new(),
                exports: vec!["dpone:policy/guard@0.1.0".into()],
            },
        }
    }

    fn lock() -> ComponentLock {
        let mut components = BTreeMap::new();
        components.insert("guard".to_owned(), vec![1u8, 2, 3]);
        ComponentLock::pin("dpone:policy@0.1.0", &components)
    }

    fn inspection() -> Inspection {
        Inspection {
            sha256: digest(1),
            size: 4096,
            imports: Vec::new(),
            exports: vec!["dpone:policy/guard@0.1.0".into()],
            serves: vec![PolicyKind::Guard],
            wit_package: "dpone:policy@0.1.0",
        }
    }

    fn evaluated(bundle: Option<Value>) -> Evaluated {
        Evaluated {
            decision: json!({"allow": {}}),
            evidence: evidence(PolicyKind::Guard, "decide", json!({"allow": {}})),
            bundle,
        }
    }

    fn tested(failing: bool, conformance: bool) -> Tested {
        let failures = if failing {
            vec![RowOutcome {
                name: "deletes over the limit".into(),
                passed: false,
                actual: json!({"allow": {}}),
                mismatch: Some("$: expected deny".into()),
            }]
        } else {
            Vec::new()
        };
        Tested {
            component_sha256: digest(1),
            kind: Some(PolicyKind::Guard),
            function: Some("decide".into()),
            rows: 4,
            passed: 4 - failures.len(),
            failed: failures.len(),
            failures,
            tables: vec![TestedTable {
                table: "guard.json".into(),
                kind: PolicyKind::Guard,
                function: "decide".into(),
                rows: 4,
                failed: usize::from(failing),
            }],
            conformance: if conformance {
                json!({"wit_package": "dpone:policy@0.1.0", "tables": [{"kind": "guard",
                    "function": "decide", "passed": 6, "failed": 1}]})
            } else {
                Value::Null
            },
            conformance_failed: usize::from(conformance),
        }
    }

    fn bench(samples: bool) -> Bench {
        Bench {
            kind: PolicyKind::Guard,
            function: "decide".into(),
            iterations: 100,
            fresh_sandbox_decision_ns: DecisionTimes {
                p50: 51_000,
                p99: 80_000,
                min: samples.then_some(40_000),
                max: samples.then_some(90_000),
            },
            fuel_per_decision: 3307,
            cold_compile_us: 120_000.0,
            warm_cache_load_us: LoadTimes {
                p50: 812.5,
                p99: 1_000.25,
            },
            note: "decision time includes JSON parsing of the input; see the runtime bench for the typed path",
        }
    }

    #[test]
    fn policy_reports_print_the_bytes_of_the_values_they_replace() {
        let r = scaffolded();
        assert_prints_as(
            &r,
            &json!({"created": r.created, "kind": r.kind, "wit_package": r.wit_package,
                    "files": r.files}),
        );
        let r = built();
        assert_prints_as(
            &r,
            &json!({"built": r.built, "sha256": r.sha256, "size": r.size, "surface": r.surface}),
        );
        for differing in [Vec::new(), vec!["guard".to_owned()]] {
            let r = LockChecked {
                checked: 2,
                differing: differing.clone(),
            };
            assert_prints_as(&r, &json!({ "checked": 2, "differing": differing }));
        }
        assert_prints_as(&LockWritten(lock()), &lock());
        // `policy inspect` printed its struct itself, in field order.
        let r = inspection();
        assert_prints_as(&r, &r);
        for bundle in [None, Some(json!({"bundle": {"name": "shipped"}}))] {
            let r = evaluated(bundle.clone());
            assert_prints_as(
                &r,
                &json!({"decision": r.decision, "evidence": r.evidence, "bundle": bundle}),
            );
        }
        for (failing, conformance) in [(false, false), (true, false), (false, true)] {
            let r = tested(failing, conformance);
            assert_prints_as(
                &r,
                &json!({
                    "component_sha256": r.component_sha256,
                    "kind": r.kind,
                    "function": r.function,
                    "rows": r.rows,
                    "passed": r.passed,
                    "failed": r.failed,
                    "failures": r.failures,
                    "tables": r.tables.iter().map(|t| json!({"table": t.table, "kind": t.kind,
                        "function": t.function, "rows": t.rows, "failed": t.failed}))
                        .collect::<Vec<_>>(),
                    "conformance": r.conformance,
                    "conformance_failed": r.conformance_failed,
                }),
            );
        }
        for samples in [true, false] {
            let r = bench(samples);
            let t = &r.fresh_sandbox_decision_ns;
            assert_prints_as(
                &r,
                &json!({
                    "kind": r.kind,
                    "function": r.function,
                    "iterations": r.iterations,
                    "fresh_sandbox_decision_ns": {"p50": t.p50, "p99": t.p99, "min": t.min,
                                                  "max": t.max},
                    "fuel_per_decision": r.fuel_per_decision,
                    "cold_compile_us": r.cold_compile_us,
                    "warm_cache_load_us": {"p50": r.warm_cache_load_us.p50,
                                           "p99": r.warm_cache_load_us.p99},
                    "note": r.note,
                }),
            );
        }
    }

    #[test]
    fn policy_reports_are_pinned() {
        assert_pinned("policy_new", &scaffolded());
        assert_pinned("policy_build", &built());
        assert_pinned(
            "policy_lock_check",
            &LockChecked {
                checked: 2,
                differing: vec!["guard".into()],
            },
        );
        assert_pinned("policy_lock", &LockWritten(lock()));
        assert_pinned("policy_inspect", &inspection());
        assert_pinned("policy_eval", &evaluated(None));
        assert_pinned("policy_test", &tested(false, false));
        assert_pinned("policy_test_failed", &tested(true, true));
        assert_pinned("policy_bench", &bench(true));
    }
}
