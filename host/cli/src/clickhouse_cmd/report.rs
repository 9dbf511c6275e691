//! The terminal summaries of the ClickHouse publication route's reports (`check`, `plan`,
//! `run`, `status`), written against the typed reports of the parent module.

use super::{
    BodySent, Measurements, ROUTE, RunReport, SettledBeforeRun, StaticReport, StatusOutput,
};
use crate::render::{Report, Summary, Verdict, clean, shown};
use crate::run_gate::RunSettlement;
use dpone_engine_clickhouse::SlotStatus;
use dpone_engine_clickhouse::admission::Blocker;

/// The facts every ClickHouse summary closes with: what blocks it, the recovery and, under a
/// reservation, which one.
fn blockers(s: &mut Summary, blockers: &[Blocker]) {
    for b in blockers.iter().take(5) {
        s.fact("blocker", &b.code);
    }
}

fn reservation(s: &mut Summary, r: Option<&Option<RunSettlement>>) {
    if let Some(Some(r)) = r {
        s.fact("reservation", &r.reservation_id);
        s.fact("settled", &r.settlement.outcome);
    }
}

fn measured(s: &mut Summary, m: Option<&Measurements>) {
    if let Some(m) = m {
        s.line(
            "read",
            match &m.source {
                Some(src) => format!("{} rows, {} bytes", src.rows, src.source_bytes),
                None => "- rows, - bytes".to_owned(),
            },
        );
        let loads: &[BodySent] = &m.http_body;
        s.line("members loaded", loads.len().to_string());
    }
}

impl Report for StaticReport<'_> {
    fn summary(&self) -> Summary {
        let mut s = if !self.admitted || !self.blockers.is_empty() {
            Summary::new(
                Verdict::Refused,
                format!("{} blocker(s)", self.blockers.len()),
            )
        } else {
            Summary::new(Verdict::Done, self.command)
        };
        s.fact("workload", self.workload);
        if let Some(r) = self.replication {
            s.value_fact("replication", &r.replication_mode);
        }
        blockers(&mut s, self.blockers);
        s
    }
}

impl Report for RunReport<'_> {
    fn summary(&self) -> Summary {
        let mut s = match self.outcome {
            "completed" => Summary::new(Verdict::Done, "published"),
            "in_progress" => Summary::new(
                Verdict::NotFinished,
                format!(
                    "members still executing ({})",
                    self.phase.map_or_else(|| "-".to_owned(), |p| shown(&p))
                ),
            ),
            "blocked" if self.error.is_none() => Summary::new(
                Verdict::Refused,
                format!("{} blocker(s)", self.blockers.map_or(0, <[Blocker]>::len)),
            ),
            other => Summary::new(Verdict::Refused, clean(self.error.unwrap_or(other))),
        };
        s.fact("workload", self.workload);
        if let Some(r) = self.replication {
            s.value_fact("replication", &r.replication_mode);
        }
        if let Some(op) = &self.operation_id {
            s.fact("operation", shown(op));
        }
        if let Some(r) = self.receipt {
            s.value_fact("publication", &r.publication.kind);
            s.line(
                "artifact",
                format!(
                    "{} rows, {} bytes",
                    r.artifact.row_count, r.artifact.byte_size
                ),
            );
        }
        measured(&mut s, self.measurements.as_ref());
        if let Some(w) = self.waiting {
            s.line("waiting on", format!("{} member(s)", w.len()));
        }
        blockers(&mut s, self.blockers.unwrap_or_default());
        s.value_fact("recovery", &self.recovery);
        if self.outcome == "in_progress" {
            s.line("next", "run again with the same --invocation");
        }
        reservation(&mut s, self.np_reservation.as_ref());
        s
    }
}

impl Report for SettledBeforeRun<'_> {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        debug_assert_eq!(self.route, ROUTE);
        let mut s = Summary::new(Verdict::Refused, clean(self.failure.code));
        s.fact("workload", self.workload);
        s.fact("reason", self.failure.message);
        reservation(&mut s, Some(&self.np_reservation));
        s.line(
            "next",
            "nothing was read or published; the reservation was settled as failed",
        );
        s
    }
}

impl Report for StatusOutput<'_> {
    fn summary(&self) -> Summary {
        let status = &self.status;
        let mut s = match &status.slot {
            SlotStatus::Absent => Summary::new(Verdict::Done, "no operation recorded"),
            SlotStatus::V1(slot) | SlotStatus::External(slot) | SlotStatus::Local(slot) => {
                Summary::new(
                    Verdict::Done,
                    format!(
                        "{} in {}{}",
                        if slot.same_operation {
                            "this operation"
                        } else {
                            "another operation"
                        },
                        shown(&slot.phase),
                        match status.slot {
                            SlotStatus::V1(_) => " (V1 record, internal mode)",
                            SlotStatus::Local(_) => " (one server)",
                            _ => "",
                        }
                    ),
                )
            }
        };
        s.fact("workload", self.workload);
        s.fact("operation", shown(&status.operation_id));
        if !status.members.is_empty() {
            let reachable = status.members.iter().filter(|m| m.reachable).count();
            s.line(
                "members",
                format!("{reachable} of {} reachable", status.members.len()),
            );
        }
        s.value_fact("recovery", &status.recovery);
        s.fact_if("reason", status.reason);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Manifest, RunReport, SetupFailure, SourceMeasured};
    use super::*;
    use crate::render::golden::assert_pinned;
    use crate::run_gate::{ReservationBound, SettlementRecord};
    use dpone_engine_clickhouse::contracts::{Phase, PublicationReceipt};
    use dpone_engine_clickhouse::{RecoveryAction, StatusReport};

    const MANIFEST: &str = include_str!("../../../../fixtures/clickhouse/manifest.yaml");
    const RECEIPT: &str =
        include_str!("../../../../fixtures/nonproduction/compat/clickhouse-receipt.json");

    fn manifest() -> Manifest {
        Manifest::parse(MANIFEST).expect("manifest")
    }

    fn settlement() -> RunSettlement {
        RunSettlement {
            attempt_id: "attempt-1".into(),
            bound: ReservationBound {
                attempt_seconds: 600,
                source_bytes: 1 << 20,
                source_rows: 1000,
            },
            grant_id: "grant-1".into(),
            participants: Vec::new(),
            phase: "execution".into(),
            reservation_id: "sha256:11".into(),
            settlement: SettlementRecord {
                clamped_to_reservation: false,
                code: None,
                complete: false,
                measured_http_bytes: 0,
                measured_source_bytes: 0,
                measured_source_rows: 0,
                outcome: "failed".into(),
                recovery: None,
                reservation_freed: false,
                result: "recorded",
            },
            trust_revision: 3,
            workload_id: "ch-orders".into(),
        }
    }

    fn external() -> dpone_policy_model::admission::ReplicationDecision {
        use dpone_policy_model::admission::{ReplicationDecision, ReplicationMode};
        ReplicationDecision {
            requested: "external".into(),
            selected: "external".into(),
            replication_mode: ReplicationMode::External,
            runtime_admission_required: true,
            no_fallback: true,
        }
    }

    #[test]
    fn a_settlement_prints_its_keys_sorted_as_the_value_it_replaces_did() {
        // Inside the run report (printed in field order) the settlement keeps the bytes of the
        // JSON value it was before: declared in sorted order at every depth.
        let s = settlement();
        assert_eq!(
            serde_json::to_string_pretty(&s).expect("json"),
            serde_json::to_string_pretty(&serde_json::to_value(&s).expect("value")).expect("json")
        );
    }

    #[test]
    fn run_reports_are_pinned() {
        let m = manifest();
        let replication = external();
        let receipt: PublicationReceipt = serde_json::from_str(RECEIPT).expect("receipt");
        let completed = RunReport {
            outcome: "completed",
            receipt: Some(&receipt),
            measurements: Some(Measurements {
                source: Some(SourceMeasured {
                    rows: 1000,
                    source_bytes: 52_000,
                    complete: true,
                }),
                http_body: Vec::new(),
            }),
            np_reservation: Some(Some(settlement())),
            ..RunReport::new(&m, Some(&replication))
        };
        assert_pinned("clickhouse_run_completed", &completed);
        let text = completed.summary().finish(false);
        assert!(text.starts_with("done: published\n"), "{text}");
        assert!(text.contains("52000 bytes"), "{text}");

        let waiting = [receipt.members[0].member_id];
        let in_progress = RunReport {
            outcome: "in_progress",
            phase: Some(Phase::PublicationDispatching),
            waiting: Some(&waiting),
            recovery: Some(RecoveryAction::WaitThenResume),
            ..RunReport::new(&m, None)
        };
        assert_pinned("clickhouse_run_in_progress", &in_progress);
        let text = in_progress.summary().finish(false);
        assert!(
            text.starts_with("not finished: members still executing (PUBLICATION_DISPATCHING)\n")
                && text.contains("run again with the same --invocation"),
            "{text}"
        );

        let blockers = [Blocker {
            code: "DPONE_CLICKHOUSE_X".into(),
            message: "m".into(),
            by: "host",
        }];
        let blocked = RunReport {
            outcome: "blocked",
            recovery: Some(RecoveryAction::FixManifest),
            blockers: Some(&blockers),
            ..RunReport::new(&m, None)
        };
        assert_pinned("clickhouse_run_blocked", &blocked);
        assert!(
            blocked
                .summary()
                .finish(false)
                .starts_with("refused: 1 blocker(s)\n  workload")
        );

        let before_run = SettledBeforeRun {
            command: "run",
            failure: SetupFailure {
                code: "DPONE_CLI_X",
                message: "the target could not be wired",
            },
            np_reservation: Some(settlement()),
            outcome: "failed",
            route: ROUTE,
            workload: &m.name,
        };
        let value = serde_json::json!({
            "route": ROUTE, "command": "run", "workload": m.name, "outcome": "failed",
            "failure": {"code": "DPONE_CLI_X", "message": "the target could not be wired"},
            "np_reservation": settlement(),
        });
        crate::render::golden::assert_prints_as(&before_run, &value);
        assert_pinned("clickhouse_run_settled_before_run", &before_run);
    }

    #[test]
    fn check_reports_are_pinned() {
        use dpone_policy_model::admission::{ReplicationDecision, ReplicationMode};
        use dpone_policy_runtime::{DecisionEvidence, PolicyKind, Sha256Digest};
        let m = manifest();
        let evidence = DecisionEvidence {
            kind: PolicyKind::Admission,
            function: "admit",
            component_sha256: Sha256Digest::of(b"component"),
            wit_package: "dpone:admission@1.0.0",
            input_sha256: Sha256Digest::of(b"input"),
            output: serde_json::json!({"admit": {}}),
            fuel_used: 2048,
        };
        let replication = ReplicationDecision {
            requested: "external".into(),
            selected: "external".into(),
            replication_mode: ReplicationMode::External,
            runtime_admission_required: true,
            no_fallback: true,
        };
        let admitted = StaticReport {
            route: ROUTE,
            command: "check",
            workload: &m.name,
            admitted: true,
            replication: Some(&replication),
            blockers: &[],
            requires: super::super::REQUIRES,
            evidence: &evidence,
            bundle: None,
            connections: None,
            plan: None,
        };
        assert_pinned("clickhouse_check", &admitted);
        assert!(
            admitted
                .summary()
                .finish(false)
                .starts_with("done: check\n")
        );
        let blockers = [Blocker {
            code: "DPONE_CLICKHOUSE_X".into(),
            message: "m".into(),
            by: "admission_policy",
        }];
        let refused = StaticReport {
            admitted: false,
            replication: None,
            blockers: &blockers,
            ..admitted
        };
        assert_pinned("clickhouse_check_blocked", &refused);
    }

    #[test]
    fn the_status_report_is_pinned() {
        let m = manifest();
        let receipt: PublicationReceipt = serde_json::from_str(RECEIPT).expect("receipt");
        let status = StatusOutput {
            route: ROUTE,
            command: "status",
            workload: &m.name,
            status: StatusReport {
                target_key: receipt.target_key,
                operation_id: receipt.operation_id,
                slot: SlotStatus::Absent,
                members: Vec::new(),
                queue_entry: None,
                recovery: RecoveryAction::Run,
                reason: None,
            },
        };
        assert_pinned("clickhouse_status", &status);
        assert!(
            status
                .summary()
                .finish(false)
                .starts_with("done: no operation recorded\n")
        );
    }
}
