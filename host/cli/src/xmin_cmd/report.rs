//! The XMin route's reports — `check`, `plan`, `run`, `status` / `state show`, `authority
//! create` and `authority list` — and their terminal summaries, written against the typed
//! reports (the engine's `CheckReport`, `PlanReport`, `StateReport` and `RunOutcome`).

use crate::render::{Report, Summary, Verdict, clean, clean_or_dash, decision_outcome, shown};
use crate::run_gate::RunSettlement;
use dpone_engine_xmin::engine::Phase;
use dpone_engine_xmin::state::AuthoritySummary;
use dpone_engine_xmin::{CheckReport, PlanReport, RunFailure, RunOutcome, StateReport};
use serde::Serialize;

impl Report for CheckReport {
    fn summary(&self) -> Summary {
        route_summary(self, None)
    }
}

impl Report for PlanReport {
    fn summary(&self) -> Summary {
        route_summary(&self.check, Some(self))
    }
}

/// `check` and `plan` (no server contacted): the route, what it moves where, the delete plan
/// and, for `plan`, the guards and the number of run steps.
fn route_summary(check: &CheckReport, plan: Option<&PlanReport>) -> Summary {
    let conflict = check.state_schema_conflict.is_some();
    let mut s = if check.status == "ok" && !conflict {
        Summary::new(
            Verdict::Done,
            if plan.is_some() {
                "plan ready"
            } else {
                "route checked"
            },
        )
    } else if conflict {
        Summary::new(Verdict::Refused, "state schema conflict")
    } else {
        Summary::new(Verdict::Refused, clean(check.status))
    };
    s.fact("workload", &check.workload);
    s.fact("route", check.route);
    s.line(
        "moves",
        format!(
            "{} -> {}",
            clean(&check.source_relation),
            clean(&check.target)
        ),
    );
    s.line(
        "unique key",
        check
            .unique_key
            .iter()
            .map(clean)
            .collect::<Vec<_>>()
            .join(", "),
    );
    s.value_fact("delete mode", &check.delete_mode);
    s.fact("state key", &check.identity.state_key);
    if let Some(plan) = plan {
        // The evidence is the delete-mode component's decision evidence, kept as the engine
        // recorded it (a JSON value): its output's shape is the component's.
        if plan.delete_plan_evidence.is_object() {
            s.line(
                "delete plan",
                format!(
                    "{} rules (delete-mode {}, fuel {})",
                    plan.delete_plan.rules.len(),
                    decision_outcome(&plan.delete_plan_evidence["output"]),
                    crate::render::clean_json(&plan.delete_plan_evidence["fuel_used"])
                ),
            );
        }
        // The ratio is kept in millionths (the manifest's six-digit decimal).
        let ratio = plan
            .guards
            .max_delete_ratio
            .map_or_else(|| "-".to_owned(), |m| format!("{}", f64::from(m) / 1e6));
        s.line(
            "guards",
            format!(
                "at most {} deletes, delete ratio at most {ratio}",
                clean_or_dash(plan.guards.max_delete_rows)
            ),
        );
        s.line("run steps", plan.steps.len().to_string());
    }
    if !check.not_checked.is_empty() {
        s.line(
            "not verified",
            format!(
                "{} item(s): no server was contacted",
                check.not_checked.len()
            ),
        );
    }
    for d in check.deprecations.iter().take(3) {
        s.fact("deprecated", d);
    }
    s.line(
        "next",
        if conflict {
            "nothing was changed; resolve the state schema conflict first"
        } else {
            "check --connections verifies the pins; run verifies the rest before any source I/O"
        },
    );
    s
}

impl Report for StateReport {
    fn summary(&self) -> Summary {
        let mut s = match &self.state {
            None => Summary::new(
                Verdict::Done,
                "no state yet (the first run is a full baseline)",
            ),
            Some(state) if state.superseded => {
                Summary::new(Verdict::Refused, "state superseded by a transfer")
            }
            Some(_) => Summary::new(Verdict::Done, "state ok"),
        };
        s.fact("state key", &self.state_key);
        if let Some(state) = &self.state {
            s.line(
                "checkpoint",
                format!(
                    "xmin {} revision {}",
                    state.checkpoint.xmin, state.checkpoint.revision
                ),
            );
        }
        s.line("receipts", self.receipts.len().to_string());
        if let Some(latest) = self.receipts.first() {
            s.fact("latest receipt", &latest.receipt_id);
            s.fact("latest invocation", &latest.invocation_id);
        }
        s
    }
}

/// What the source read: rows and binary COPY payload bytes (the envelope's payload counts;
/// also for a failed read, `complete: false`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SourceMeasurement {
    /// The read reached the snapshot's end.
    pub complete: bool,
    /// Rows read.
    pub rows: u64,
    /// Payload bytes read.
    pub source_bytes: u64,
}

/// Why a run did not commit: the engine's failure, or a failure of the wiring before anything
/// ran (artifact directory, target), reported by its code and message.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum RunFailed<'a> {
    /// The engine's failure, with its phase.
    Run(&'a RunFailure),
    /// Nothing ran.
    Setup {
        /// The stable code.
        code: &'a str,
        /// The message.
        message: &'a str,
    },
}

/// `run`: the invocation, its outcome or failure, what the source read and, under a
/// reservation, the settlement (keys sorted: the shape first printed as a JSON value).
#[derive(Debug, Serialize)]
pub struct RunReport<'a> {
    /// The run's failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<RunFailed<'a>>,
    /// The invocation.
    pub invocation_id: &'a str,
    /// The reservation and its settlement, under `--np-reservation` (`null` when none was
    /// admitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub np_reservation: Option<Option<RunSettlement>>,
    /// The run's evidence when it committed (or replayed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'a RunOutcome>,
    /// What the source read, when it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_measurement: Option<SourceMeasurement>,
}

impl Report for RunReport<'_> {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        let mut s = if let Some(outcome) = self.outcome {
            committed(self.invocation_id, outcome)
        } else if let Some(failure) = &self.failure {
            failed(self.invocation_id, failure)
        } else {
            return Summary::of_fields(self);
        };
        if let Some(m) = self.source_measurement {
            s.line(
                "read",
                format!(
                    "{} rows, {} bytes{}",
                    m.rows,
                    m.source_bytes,
                    if m.complete { "" } else { " (incomplete)" }
                ),
            );
        }
        if let Some(Some(r)) = &self.np_reservation {
            s.fact("reservation", &r.reservation_id);
            s.fact("settled", &r.settlement.outcome);
        }
        s
    }
}

fn committed(invocation: &str, outcome: &RunOutcome) -> Summary {
    let mut s = Summary::new(Verdict::Done, shown(&outcome.status));
    let m = &outcome.receipt.metrics;
    s.fact("invocation", invocation);
    s.value_fact("load", &outcome.load);
    s.value_fact("delete mode", &outcome.delete_mode);
    for (key, n) in [
        ("inserted", m.inserted),
        ("updated", m.updated),
        ("reactivated", m.reactivated),
        ("soft deleted", m.soft_deleted),
        ("hard deleted", m.hard_deleted),
    ] {
        if n > 0 {
            s.fact(key, n);
        }
    }
    s.fact("active", m.active);
    // The guard's decision evidence as the engine recorded it (a JSON value): its output's
    // shape is the guard component's.
    if let Some(e) = outcome.guard_evidence.as_ref().filter(|e| e.is_object()) {
        s.line(
            "guard",
            format!(
                "{} ({}, fuel {})",
                decision_outcome(&e["output"]),
                clean_or_dash(outcome.guard_reason.as_deref()),
                crate::render::clean_json(&e["fuel_used"])
            ),
        );
    }
    s.fact("receipt", &outcome.receipt.receipt_id);
    s
}

fn failed(invocation: &str, failure: &RunFailed<'_>) -> Summary {
    let (code, message, phase) = match failure {
        RunFailed::Run(f) => (f.code().as_str(), f.error.message(), Some(f)),
        RunFailed::Setup { code, message } => (*code, *message, None),
    };
    let unknown = phase.is_some_and(|f| f.phase == Phase::Commit || !f.rolled_back);
    let mut s = Summary::new(
        if unknown {
            Verdict::NotFinished
        } else {
            Verdict::Refused
        },
        clean(code),
    );
    s.fact("invocation", invocation);
    if let Some(f) = phase {
        s.value_fact("phase", &f.phase);
    }
    s.fact("reason", message);
    s.line(
        "next",
        if unknown {
            "retry the same invocation (--invocation); the commit outcome is probed first"
        } else if phase.is_some_and(|f| f.full_repair_required) {
            "nothing was changed; a full-baseline repair authority is required"
        } else {
            "nothing was changed; fix the cause and run again"
        },
    );
    s
}

/// `authority create`: the authority inserted and its digest.
#[derive(Debug, Serialize)]
pub struct AuthorityCreated {
    /// The authority's id.
    pub created: String,
    /// Its digest.
    pub digest: String,
}

impl Report for AuthorityCreated {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        let mut s = Summary::new(Verdict::Done, "created");
        s.fact("authority", &self.created);
        s.fact("digest", &self.digest);
        s
    }
}

/// `authority list`: the route's repair authorities.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct AuthorityList(pub Vec<AuthoritySummary>);

impl Report for AuthorityList {
    fn summary(&self) -> Summary {
        let refused = self.0.iter().filter(|a| !a.digest_ok).count();
        let mut s = if refused == 0 {
            Summary::new(
                Verdict::Done,
                format!("{} repair authorities", self.0.len()),
            )
        } else {
            Summary::new(
                Verdict::Refused,
                format!("{refused} authority record(s) no longer match their digest"),
            )
        };
        for a in self.0.iter().take(10) {
            s.line(
                &clean(&a.authority_id),
                format!(
                    "{}{}",
                    if a.consumed { "consumed" } else { "unused" },
                    if a.digest_ok { "" } else { ", digest mismatch" }
                ),
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::golden::assert_pinned;
    use crate::run_gate::{BoundParticipant, ReservationBound, SettlementRecord};
    use dpone_engine_xmin::RunStatus;
    use dpone_engine_xmin::identity::RouteIdentity;
    use dpone_engine_xmin::state::{CommitReceipt, SourceState};
    use dpone_policy_model::delete_mode::Mode;
    use serde_json::json;

    fn check() -> CheckReport {
        CheckReport {
            status: "ok",
            workload: "customers".into(),
            route: "postgres_to_postgres",
            identity: RouteIdentity {
                state_key: "5e".repeat(32),
                scope_hash: "a1".repeat(32),
                schema_hash: "b2".repeat(32),
                target_identity: [7; 32],
                source_authority_digest: "c3".repeat(32),
                target_pin_digest: "d4".repeat(32),
                route_fingerprint: "e5".repeat(32),
            },
            source_relation: "public.customers".into(),
            source_authority: "v2".into(),
            unique_key: vec!["id".into(), "region".into()],
            delete_mode: Mode::TimestampOnly,
            target: "public.customers_copy".into(),
            state_location: "target database".into(),
            checked: vec!["manifest", "registry"],
            not_checked: vec!["pins"],
            state_schema_conflict: None,
            deprecations: vec!["registry v1".into()],
        }
    }

    fn receipt() -> CommitReceipt {
        serde_json::from_value(json!({
            "receipt_id": "receipt-1", "load_id": "load-1", "invocation_id": "run-1",
            "state_key": "5e", "previous": null, "checkpoint": {"xmin": 900, "revision": 1},
            "visible_horizon": 901, "replay_amplification_xids": 0, "envelope_digest": "ed",
            "route_fingerprint": "rf", "authority_id": null, "authority_digest": null,
            "metrics": {"inserted": 120, "updated": 0, "reactivated": 0, "unchanged": 0,
                "soft_deleted": 3, "hard_deleted": 0, "active": 117, "total": 120,
                "staged_rows": 120, "staged_keys": 120},
            "detected_at_micros": 1, "source_lineage": {"system_identifier": "7", "timeline": null}
        }))
        .expect("receipt")
    }

    fn outcome() -> RunOutcome {
        RunOutcome {
            status: RunStatus::Committed,
            receipt: receipt(),
            load: None,
            delete_mode: Mode::TimestampOnly,
            guard_evidence: Some(json!({"output": {"allow": {}}, "fuel_used": 3307})),
            delete_mode_evidence: json!({"output": {"plan": {}}, "fuel_used": 12}),
            guard_reason: Some("GUARD_OK".into()),
            snapshot_token: None,
            cleanup_errors: Vec::new(),
        }
    }

    fn settlement(result: &'static str) -> RunSettlement {
        RunSettlement {
            attempt_id: "attempt-1".into(),
            bound: ReservationBound {
                attempt_seconds: 600,
                source_bytes: 1 << 20,
                source_rows: 1000,
            },
            grant_id: "grant-1".into(),
            participants: vec![BoundParticipant {
                identity_digest: "sha256:00".into(),
                participant_id: "synth-pg-read".into(),
                role: "source".into(),
            }],
            phase: "execution".into(),
            reservation_id: "sha256:11".into(),
            settlement: SettlementRecord {
                clamped_to_reservation: false,
                code: (result == "unrecorded").then(|| "DPONE_NP_STORE_UNAVAILABLE".into()),
                complete: true,
                measured_http_bytes: 0,
                measured_source_bytes: 5000,
                measured_source_rows: 120,
                outcome: "succeeded".into(),
                recovery: (result == "unrecorded").then_some("record these measurements"),
                reservation_freed: false,
                result,
            },
            trust_revision: 3,
            workload_id: "pg-customers".into(),
        }
    }

    #[test]
    fn check_status_and_authority_reports_are_pinned() {
        assert_pinned("xmin_check", &check());
        let mut conflict = check();
        conflict.state_schema_conflict = Some("legacy state table".into());
        assert_pinned("xmin_check_conflict", &conflict);
        let state = StateReport {
            state_key: "5e".into(),
            state: Some(SourceState {
                state_key: "5e".into(),
                target_identity: "ti".into(),
                scope_hash: "sh".into(),
                checkpoint: dpone_policy_model::guard::Checkpoint {
                    xmin: 900,
                    revision: 1,
                },
                visible_horizon: 901,
                last_receipt_id: "receipt-1".into(),
                superseded: false,
            }),
            receipts: vec![receipt()],
        };
        assert_pinned("xmin_state_show", &state);
        let empty = StateReport {
            state_key: "5e".into(),
            state: None,
            receipts: Vec::new(),
        };
        assert_pinned("xmin_state_show_empty", &empty);
        let created = AuthorityCreated {
            created: "repair-1".into(),
            digest: "sha256:22".into(),
        };
        // Keys sorted, as the JSON value first printed had them.
        crate::render::golden::assert_prints_as(
            &created,
            &json!({"created": "repair-1", "digest": "sha256:22"}),
        );
        assert_pinned("xmin_authority_create", &created);
        let listed = AuthorityList(vec![
            AuthoritySummary {
                authority_id: "repair-1".into(),
                recorded_digest: "sha256:22".into(),
                digest_ok: true,
                consumed: true,
                document: None,
            },
            AuthoritySummary {
                authority_id: "repair-2".into(),
                recorded_digest: "sha256:33".into(),
                digest_ok: false,
                consumed: false,
                document: None,
            },
        ]);
        assert_pinned("xmin_authority_list", &listed);
        assert!(
            listed
                .summary()
                .finish(false)
                .starts_with("refused: 1 authority record(s)")
        );
    }

    #[test]
    fn run_reports_keep_the_bytes_of_the_value_they_replace() {
        let done = outcome();
        let settled = settlement("recorded");
        let report = RunReport {
            failure: None,
            invocation_id: "run-1",
            np_reservation: Some(Some(settled.clone())),
            outcome: Some(&done),
            source_measurement: Some(SourceMeasurement {
                complete: true,
                rows: 120,
                source_bytes: 5000,
            }),
        };
        // The value the run printed before it was typed.
        let before = json!({
            "invocation_id": "run-1",
            "outcome": &done,
            "source_measurement": {"rows": 120, "source_bytes": 5000, "complete": true},
            "np_reservation": &settled,
        });
        crate::render::golden::assert_prints_as(&report, &before);
        assert_pinned("xmin_run_committed", &report);
        let text = report.summary().finish(false);
        assert!(text.starts_with("done: committed\n"), "{text}");
        assert!(text.contains("  allow (GUARD_OK, fuel 3307)\n"), "{text}");
        assert!(text.contains("  settled       succeeded\n"), "{text}");
        assert!(
            !text.contains("updated"),
            "zero counts are left out: {text}"
        );

        let unrecorded = settlement("unrecorded");
        let setup = RunReport {
            failure: Some(RunFailed::Setup {
                code: "DPONE_CLI_ARTIFACT_DIR",
                message: "the artifact directory is not usable",
            }),
            invocation_id: "run-2",
            np_reservation: Some(Some(unrecorded.clone())),
            outcome: None,
            source_measurement: None,
        };
        let before = json!({
            "invocation_id": "run-2",
            "failure": {"code": "DPONE_CLI_ARTIFACT_DIR", "message": "the artifact directory is not usable"},
            "np_reservation": &unrecorded,
        });
        crate::render::golden::assert_prints_as(&setup, &before);
        assert_pinned("xmin_run_setup_failed", &setup);
        assert!(
            setup
                .summary()
                .finish(false)
                .starts_with("refused: DPONE_CLI_ARTIFACT_DIR\n")
        );
    }

    #[test]
    fn the_plan_report_is_pinned() {
        let plan = PlanReport {
            check: check(),
            business_columns: vec!["name".into(), "region".into()],
            delete_plan: dpone_policy_delete_mode::plan_for(Mode::TimestampOnly),
            delete_plan_evidence: json!({"output": {"plan": {}}, "fuel_used": 1234}),
            guards: dpone_policy_model::guard::DeleteGuards {
                max_delete_rows: Some(100),
                max_delete_ratio: Some(50_000),
            },
            empty_snapshot: Default::default(),
            steps: dpone_engine_xmin::route::POSTGRES_RUN_STEPS.to_vec(),
        };
        assert_pinned("xmin_plan", &plan);
        let text = plan.summary().finish(false);
        assert!(text.starts_with("done: plan ready\n"), "{text}");
        assert!(
            text.contains("at most 100 deletes, delete ratio at most 0.05"),
            "{text}"
        );
    }

    #[test]
    fn a_failed_run_leads_with_its_code_and_an_unknown_commit_is_not_finished() {
        use dpone_engine_xmin::{ErrorCode, XminError};
        let failure = |phase: Phase, rolled_back: bool| RunFailure {
            error: XminError::new(ErrorCode::GuardDenied, "too many deletes"),
            phase,
            rolled_back,
            full_repair_required: false,
            guard_evidence: None,
        };
        let denied = failure(Phase::TargetTransaction, true);
        let report = RunReport {
            failure: Some(RunFailed::Run(&denied)),
            invocation_id: "run-3",
            np_reservation: None,
            outcome: None,
            source_measurement: Some(SourceMeasurement {
                complete: false,
                rows: 7,
                source_bytes: 70,
            }),
        };
        let before = json!({
            "invocation_id": "run-3",
            "failure": &denied,
            "source_measurement": {"rows": 7, "source_bytes": 70, "complete": false},
        });
        crate::render::golden::assert_prints_as(&report, &before);
        assert_pinned("xmin_run_refused", &report);
        let unknown = failure(Phase::Commit, false);
        let report = RunReport {
            failure: Some(RunFailed::Run(&unknown)),
            invocation_id: "run-4",
            np_reservation: None,
            outcome: None,
            source_measurement: None,
        };
        let text = report.summary().finish(false);
        assert!(
            text.starts_with(&format!(
                "not finished: {}\n",
                ErrorCode::GuardDenied.as_str()
            )),
            "{text}"
        );
        assert!(text.contains("retry the same invocation"), "{text}");
    }

    #[test]
    fn values_in_a_report_cannot_drive_the_terminal() {
        let mut c = check();
        c.workload = "w\u{1b}[2J\nx".into();
        let text = c.summary().finish(false);
        assert!(
            !text.contains('\u{1b}') && text.contains("w?[2J?x"),
            "{text}"
        );
    }
}
