//! Read-only status evidence: the authority record, each member's physical pair, the bound queue
//! entry, and the exact safe recovery action. Status never mutates anything.

use serde::Serialize;

use super::authority::Held;
use super::publish::CleanupState;
use super::{Coordinator, Op, OperationRequest, RecoveryAction};
use crate::contracts::{
    self, DdlBinding, GenerationId, MemberId, OperationId, Phase, PublicationMode,
    PublicationRecord, TargetKey, Uuid,
};
use crate::error::{EngineError, codes};
use crate::ports::{PortErrorKind, QueueHostStatus};

/// What the target-key slot holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SlotStatus {
    /// Nothing.
    Absent,
    /// A V1 (internal mode) record.
    V1(Box<RecordSlot>),
    /// An external record.
    External(Box<RecordSlot>),
    /// A local (one server) record.
    Local(Box<RecordSlot>),
}

/// The evidence of a record (either mode).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecordSlot {
    /// Its operation id.
    pub operation_id: OperationId,
    /// Whether it is this request's operation.
    pub same_operation: bool,
    /// Phase.
    pub phase: Phase,
    /// Dispatch epoch.
    pub dispatch_epoch: u64,
    /// Keeper version.
    pub keeper_version: u64,
    /// Generation.
    pub generation_id: Option<GenerationId>,
    /// Publication binding.
    pub publication: Option<DdlBinding>,
    /// Cleanup binding.
    pub cleanup: Option<DdlBinding>,
    /// Stored error class.
    pub error_class: Option<String>,
}

/// One member's observed state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemberObservation {
    /// Opaque member id.
    pub member_id: MemberId,
    /// Stage state in authority.
    pub stage: String,
    /// Physical UUID of the target, if observed.
    pub target_uuid: Option<Uuid>,
    /// Physical UUID under the candidate name, if observed.
    pub candidate_uuid: Option<Uuid>,
    /// Whether the member answered.
    pub reachable: bool,
    /// Bound-pair state: `unchanged` (target still the predecessor, candidate in place),
    /// `published` (target is the committed UUID, the candidate name holds the predecessor or,
    /// without one, nothing), `cleaned` (after the commit: target is the committed UUID and the
    /// predecessor was dropped), `foreign` (anything else) or `unknown` (no answer).
    pub pair: &'static str,
    /// Queue status of the bound DDL on this member, if any.
    pub queue: Option<&'static str>,
}

/// Read-only status evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    /// Slot key.
    pub target_key: TargetKey,
    /// This request's operation id.
    pub operation_id: OperationId,
    /// Slot content.
    pub slot: SlotStatus,
    /// Per-member evidence (external records only).
    pub members: Vec<MemberObservation>,
    /// The bound queue entry, when one was observed.
    pub queue_entry: Option<String>,
    /// The exact safe recovery action.
    pub recovery: RecoveryAction,
    /// The stable code explaining the action, when it is not routine.
    pub reason: Option<&'static str>,
}

fn queue_name(s: QueueHostStatus) -> &'static str {
    match s {
        QueueHostStatus::Queued => "queued",
        QueueHostStatus::Active => "active",
        QueueHostStatus::Finished => "finished",
        QueueHostStatus::Failed => "failed",
    }
}

impl Coordinator<'_> {
    /// Read-only evidence of the authority record, candidates and queue for `req`'s target,
    /// naming the exact safe recovery action. Runs no admission and mutates nothing.
    pub fn status(&self, req: &OperationRequest) -> Result<StatusReport, EngineError> {
        let f = &req.static_facts;
        let target_key =
            contracts::target_key(&f.cluster_name, &f.target_database, &req.target_table);
        let operation_id =
            contracts::operation_id(&req.scheduler_invocation, &target_key, &req.plan_digest);
        let mut report = StatusReport {
            target_key,
            operation_id,
            slot: SlotStatus::Absent,
            members: Vec::new(),
            queue_entry: None,
            recovery: RecoveryAction::Run,
            reason: None,
        };
        let Some((version, slot)) = self.read_slot(&target_key)? else {
            return Ok(report);
        };
        let slot_mode = slot.mode();
        let record = slot.into_record();
        let request_mode = super::static_mode(f);
        let same = record.operation_id == operation_id && slot_mode == request_mode;
        let evidence = Box::new(RecordSlot {
            operation_id: record.operation_id,
            same_operation: same,
            phase: record.phase,
            dispatch_epoch: record.dispatch_epoch,
            keeper_version: version,
            generation_id: record.generation_id,
            publication: record.publication.clone(),
            cleanup: record.cleanup.clone(),
            error_class: record.error_class.clone(),
        });
        report.slot = match slot_mode {
            PublicationMode::Internal => SlotStatus::V1(evidence),
            PublicationMode::External => SlotStatus::External(evidence),
            PublicationMode::Local => SlotStatus::Local(evidence),
        };
        // An unresolved V1 record blocks external mode: resolve it (as its own, internal-mode
        // operation) first.
        if slot_mode == PublicationMode::Internal
            && request_mode == PublicationMode::External
            && !record.phase.is_resolved()
        {
            report.recovery = RecoveryAction::ResolveV1First;
            report.reason = Some(codes::V1_AUTHORITY_UNRESOLVED);
            return Ok(report);
        }
        let op = Op {
            req,
            mode: slot_mode,
            cluster: &f.cluster_name,
            database: &f.target_database,
            target: &req.target_table,
            engine: &f.engine,
            max_bytes: 0,
            target_key,
            operation_id: record.operation_id,
            candidate: contracts::candidate_name(&req.target_table, &record.operation_id),
            schema_digest: contracts::schema_digest(&req.schema),
            members: record
                .members
                .iter()
                .map(|m| (m.member_id, m.shard_num, m.replica_num))
                .collect(),
            inventory_digest: record.inventory_digest,
            admission: record
                .admission
                .clone()
                .unwrap_or(contracts::AdmissionEvidence {
                    component_sha256: String::new(),
                    input_sha256: String::new(),
                }),
        };
        let held = Held {
            version,
            record: record.clone(),
        };
        let binding = match record.phase {
            Phase::PublicationDispatching => record.publication.clone(),
            Phase::CleanupDispatching => record.cleanup.clone(),
            _ => None,
        };
        // A read ClickHouse refuses deterministically (e.g. a response that does not decode)
        // is not an outage: `run` stops on it too, so status must not suggest a resume.
        let mut any_rejected = false;
        let entries = match &binding {
            Some(b) => match self
                .ports
                .ddl
                .observe_queue(op.cluster, &contracts::ddl_query_id(b.kind, &b.token))
            {
                Ok(e) => Some(e),
                Err(e) => {
                    any_rejected |= e.kind == PortErrorKind::Rejected;
                    None
                }
            },
            None => Some(Vec::new()),
        };
        if let Some([e]) = entries.as_deref() {
            report.queue_entry = Some(e.entry.clone());
        }
        let mut any_unreachable = false;
        for m in &record.members {
            let t = self
                .ports
                .catalog
                .observe_table(&m.member_id, op.database, op.target);
            let c = self
                .ports
                .catalog
                .observe_table(&m.member_id, op.database, &op.candidate);
            let reachable = t.is_ok() && c.is_ok();
            any_rejected |= [&t, &c]
                .iter()
                .any(|r| r.as_ref().is_err_and(|e| e.kind == PortErrorKind::Rejected));
            any_unreachable |= !reachable;
            let target_uuid = t.ok().flatten().map(|x| x.uuid);
            let candidate_uuid = c.ok().flatten().map(|x| x.uuid);
            let pair = match (reachable, m.candidate_uuid) {
                (false, _) | (true, None) => "unknown",
                (true, Some(cand)) => {
                    let pred = m.predecessor.map(|p| p.uuid);
                    // After the commit, the cleanup drops the predecessor that the exchange
                    // left under the candidate name: the committed UUID as target with the
                    // name empty is the expected end state, not foreign evidence.
                    let cleanup_phase = matches!(
                        record.phase,
                        Phase::Committed | Phase::CleanupDispatching | Phase::Completed
                    );
                    if target_uuid == Some(cand) && candidate_uuid == pred {
                        "published"
                    } else if cleanup_phase
                        && pred.is_some()
                        && target_uuid == Some(cand)
                        && candidate_uuid.is_none()
                    {
                        "cleaned"
                    } else if target_uuid == pred && candidate_uuid == Some(cand) {
                        "unchanged"
                    } else {
                        "foreign"
                    }
                }
            };
            let queue = entries.as_deref().and_then(|es| match es {
                [e] => e
                    .members
                    .iter()
                    .find(|(id, _)| *id == m.member_id)
                    .map(|(_, s)| queue_name(*s)),
                _ => None,
            });
            report.members.push(MemberObservation {
                member_id: m.member_id,
                stage: format!("{:?}", m.stage).to_lowercase(),
                target_uuid,
                candidate_uuid,
                reachable,
                pair,
                queue,
            });
        }
        // Read-only inventory comparison: drift fences an unresolved operation.
        let drifted = !record.phase.is_resolved()
            && match self.ports.inventory.observe(op.cluster) {
                Ok((rows, complete)) => {
                    let entries: Vec<contracts::InventoryEntry> = rows
                        .into_iter()
                        .map(|r| contracts::InventoryEntry {
                            shard_num: r.shard_num,
                            replica_num: r.replica_num,
                            internal_replication: r.internal_replication,
                            endpoint_digest: r.endpoint_digest,
                        })
                        .collect();
                    !complete || contracts::inventory_digest(&entries) != record.inventory_digest
                }
                Err(_) => false,
            };
        let (recovery, reason) = if same && drifted {
            (
                RecoveryAction::RestoreInventoryThenResume,
                Some(codes::INVENTORY_DRIFT),
            )
        } else if same && any_rejected && !record.phase.is_resolved() {
            (
                RecoveryAction::HoldForOperator,
                Some(codes::STATEMENT_REJECTED),
            )
        } else {
            self.recovery_for(
                &op,
                &held,
                same,
                entries.as_deref(),
                any_unreachable,
                &report,
            )
        };
        report.recovery = recovery;
        report.reason = reason;
        Ok(report)
    }

    fn recovery_for(
        &self,
        _op: &Op<'_>,
        held: &Held,
        same: bool,
        entries: Option<&[crate::ports::QueueEntry]>,
        any_unreachable: bool,
        report: &StatusReport,
    ) -> (RecoveryAction, Option<&'static str>) {
        let r: &PublicationRecord = &held.record;
        if !same {
            return if r.phase.is_resolved() {
                (RecoveryAction::Run, None)
            } else {
                (
                    RecoveryAction::WaitForOwningOperation,
                    Some(codes::OPERATION_FENCED),
                )
            };
        }
        if any_unreachable {
            return (
                RecoveryAction::ResumeSameOperation,
                Some(codes::MEMBER_UNAVAILABLE),
            );
        }
        let pairs: Vec<&str> = report.members.iter().map(|m| m.pair).collect();
        match r.phase {
            // Completed: every member held the committed UUID when it completed. A pair that
            // no longer does means the target changed since (an outside writer): still nothing
            // for this operation to do, but the evidence says so.
            Phase::Completed if pairs.iter().any(|p| !matches!(*p, "published" | "cleaned")) => {
                (RecoveryAction::None, Some(codes::TARGET_DRIFT))
            }
            Phase::Completed => (RecoveryAction::None, None),
            Phase::Aborted => (
                RecoveryAction::StartNewOperation,
                Some(codes::OPERATION_ABORTED),
            ),
            Phase::Locked | Phase::Staging
                if report.members.iter().any(|m| {
                    let owned = r.member(&m.member_id).and_then(|x| x.candidate_uuid);
                    m.candidate_uuid.is_some() && m.candidate_uuid != owned
                }) =>
            {
                // A candidate this operation never reserved: the next run stops on it.
                (
                    RecoveryAction::HoldForOperator,
                    Some(codes::CANDIDATE_FOREIGN),
                )
            }
            Phase::Locked | Phase::Staging | Phase::Staged | Phase::Committed => {
                match r.error_class.as_deref() {
                    Some(c) if held_class(c) => (RecoveryAction::HoldForOperator, static_code(c)),
                    _ => (RecoveryAction::ResumeSameOperation, None),
                }
            }
            Phase::PublicationDispatching => {
                if pairs.contains(&"foreign") {
                    return (
                        RecoveryAction::HoldForOperator,
                        Some(codes::PUBLICATION_FOREIGN_UUID),
                    );
                }
                match entries {
                    None => (
                        RecoveryAction::ResumeSameOperation,
                        Some(codes::DDL_UNAVAILABLE),
                    ),
                    Some([e]) => {
                        let active = e.members.iter().any(|(_, s)| {
                            matches!(s, QueueHostStatus::Queued | QueueHostStatus::Active)
                        });
                        if pairs.iter().all(|p| *p == "published") {
                            (RecoveryAction::ResumeSameOperation, None)
                        } else if active {
                            (RecoveryAction::WaitThenResume, None)
                        } else {
                            (
                                RecoveryAction::HoldForOperator,
                                Some(codes::PUBLICATION_TERMINAL_MIXED),
                            )
                        }
                    }
                    Some(_) => (
                        RecoveryAction::HoldForOperator,
                        Some(codes::PUBLICATION_EVIDENCE_MISSING),
                    ),
                }
            }
            Phase::CleanupDispatching => {
                let states: Vec<CleanupState> = report
                    .members
                    .iter()
                    .map(|m| {
                        let pred = r
                            .member(&m.member_id)
                            .and_then(|x| x.predecessor)
                            .map(|p| p.uuid);
                        match (m.candidate_uuid, pred) {
                            (None, _) => CleanupState::Absent,
                            (Some(u), Some(p)) if u == p => CleanupState::Present,
                            _ => CleanupState::Foreign,
                        }
                    })
                    .collect();
                if states.contains(&CleanupState::Foreign) {
                    return (
                        RecoveryAction::HoldForOperator,
                        Some(codes::CLEANUP_UNRESOLVED),
                    );
                }
                match entries {
                    Some([e])
                        if e.members.iter().any(|(_, s)| {
                            matches!(s, QueueHostStatus::Queued | QueueHostStatus::Active)
                        }) =>
                    {
                        (RecoveryAction::WaitThenResume, None)
                    }
                    Some([_]) if !states.iter().all(|s| *s == CleanupState::Absent) => (
                        RecoveryAction::HoldForOperator,
                        Some(codes::CLEANUP_UNRESOLVED),
                    ),
                    _ => (RecoveryAction::ResumeSameOperation, None),
                }
            }
        }
    }
}

/// Error classes that no same-operation retry resolves.
fn held_class(code: &str) -> bool {
    [
        codes::CANDIDATE_FOREIGN,
        codes::CANDIDATE_DIVERGENT,
        codes::PUBLICATION_EVIDENCE_MISSING,
        codes::PUBLICATION_TERMINAL_MIXED,
        codes::PUBLICATION_FOREIGN_UUID,
        codes::CLEANUP_UNRESOLVED,
        codes::TARGET_DIVERGENT,
        codes::STATEMENT_REJECTED,
    ]
    .contains(&code)
}

fn static_code(code: &str) -> Option<&'static str> {
    [
        codes::CANDIDATE_FOREIGN,
        codes::CANDIDATE_DIVERGENT,
        codes::PUBLICATION_EVIDENCE_MISSING,
        codes::PUBLICATION_TERMINAL_MIXED,
        codes::PUBLICATION_FOREIGN_UUID,
        codes::CLEANUP_UNRESOLVED,
        codes::TARGET_DIVERGENT,
        codes::STATEMENT_REJECTED,
    ]
    .into_iter()
    .find(|c| *c == code)
}
