//! The impure half of resolve: observe every member, the queue, the inventory and this worker's
//! artifact store; hand the facts to [`super::decide`]; with `apply`, drop exact owned objects
//! (UUID-verified, absence proven) and record the outcome by one version-checked CAS confirmed
//! by read-back. Nothing here decides.

use serde::Serialize;

use super::{
    Decision, InventoryFact, ObservedMember, ObservedTable, Proposal, QueueFact, Refusal,
    ResolveFacts, codes, decide, resolved_record,
};
use crate::contracts::{
    self, AdmissionEvidence, ArtifactFact, ArtifactIdentity, ContentProof, MemberId, MemberRecord,
    OperationId, Phase, PublicationRecord, ResolutionKind, TargetKey, Uuid,
};
use crate::coordinator::{Coordinator, Op, OperationRequest, RecoveryAction};
use crate::error::{EngineError, codes as engine};
use crate::ports::{ARTIFACT_TAMPERED, PortError, PortErrorKind};

/// The class an artifact store reports when it holds no artifact with the identity.
const ARTIFACT_NOT_FOUND: &str = "DPONE_ARTIFACT_NOT_FOUND";

/// How to resolve.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResolveOptions {
    /// Record the proven outcome (default: dry run, nothing changes).
    pub apply: bool,
    /// Seconds the record must have been unchanged before `return_to_staged` or `abort`.
    pub quiet_seconds: u64,
}

/// What resolve did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolveOutcome {
    /// A safe outcome is proven (dry run: nothing changed).
    Proposed,
    /// The proven outcome was recorded by CAS.
    Recorded,
    /// No safe outcome is proven, or recording it did not complete; nothing was recorded.
    Refused,
}

/// One exact drop of the proposal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CandidateDrop {
    /// Member.
    pub member_id: MemberId,
    /// The exact UUID under the candidate name.
    pub uuid: Uuid,
    /// Whether it was dropped and its absence proven (only with `apply`).
    pub dropped: bool,
}

/// The DDL queue as resolve saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueSummary {
    /// `not_bound`, `unavailable`, `absent` or `present`.
    pub state: &'static str,
    /// Entries carrying the bound correlation.
    pub entries: usize,
}

/// Resolve's evidence: what was observed, what is proven, what was recorded.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResolveReport {
    /// Slot key.
    pub target_key: TargetKey,
    /// This invocation's operation id.
    pub operation_id: OperationId,
    /// Whether `--apply` was requested.
    pub apply: bool,
    /// Keeper version of the record observed.
    pub keeper_version: Option<u64>,
    /// Its phase.
    pub phase: Option<Phase>,
    /// Inventory against the bound digest.
    pub inventory: Option<InventoryFact>,
    /// Queue of the bound correlation.
    pub queue: Option<QueueSummary>,
    /// This worker's artifact store.
    pub artifact: Option<ArtifactFact>,
    /// Every member: reachability, UUIDs and content digests (no endpoints, no rows).
    pub members: Vec<ObservedMember>,
    /// Outcome.
    pub outcome: ResolveOutcome,
    /// The proven resolution.
    pub resolution: Option<ResolutionKind>,
    /// Phase before.
    pub from: Option<Phase>,
    /// Phase after.
    pub to: Option<Phase>,
    /// The proof, in one sentence.
    pub proof: Option<&'static str>,
    /// Exact drops the resolution needs.
    pub drops: Vec<CandidateDrop>,
    /// Stable code of a refusal.
    pub code: Option<&'static str>,
    /// Why it was refused.
    pub reason: Option<&'static str>,
    /// The member concerned.
    pub member: Option<MemberId>,
    /// Whether resolving again later may succeed.
    pub retryable: bool,
    /// The safe next action.
    pub recovery: RecoveryAction,
    /// Keeper version written by `apply`.
    pub recorded_version: Option<u64>,
}

impl ResolveReport {
    fn new(target_key: TargetKey, operation_id: OperationId, apply: bool) -> Self {
        Self {
            target_key,
            operation_id,
            apply,
            keeper_version: None,
            phase: None,
            inventory: None,
            queue: None,
            artifact: None,
            members: Vec::new(),
            outcome: ResolveOutcome::Refused,
            resolution: None,
            from: None,
            to: None,
            proof: None,
            drops: Vec::new(),
            code: None,
            reason: None,
            member: None,
            retryable: false,
            recovery: RecoveryAction::HoldForOperator,
            recorded_version: None,
        }
    }

    fn refuse(&mut self, r: Refusal) {
        self.outcome = ResolveOutcome::Refused;
        self.code = Some(r.code);
        self.reason = Some(r.reason);
        self.member = r.member;
        self.retryable = r.retryable;
        self.recovery = r.recovery;
    }

    fn propose(&mut self, p: &Proposal) {
        self.outcome = ResolveOutcome::Proposed;
        self.resolution = Some(p.kind);
        self.from = Some(p.from);
        self.to = Some(p.to);
        self.proof = Some(p.proof);
        self.drops = p
            .drops
            .iter()
            .map(|(m, u)| CandidateDrop {
                member_id: *m,
                uuid: *u,
                dropped: false,
            })
            .collect();
        self.recovery = match p.kind {
            ResolutionKind::ReturnToStaged | ResolutionKind::Commit => {
                RecoveryAction::ResumeSameOperation
            }
            ResolutionKind::Complete => RecoveryAction::None,
            ResolutionKind::Abort => RecoveryAction::StartNewOperation,
        };
    }
}

fn refusal(
    code: &'static str,
    reason: &'static str,
    member: Option<MemberId>,
    retryable: bool,
) -> Refusal {
    Refusal {
        code,
        reason,
        member,
        retryable,
        recovery: if retryable {
            RecoveryAction::ResumeSameOperation
        } else {
            RecoveryAction::HoldForOperator
        },
    }
}

impl Coordinator<'_> {
    /// Operator resolution of this invocation's operation (`dpone-host resolve`): re-observes
    /// every member and, only when physical truth proves a safe outcome, records it (with
    /// `apply`) by a version-checked CAS with evidence appended to the record. Runs no
    /// admission, reads no source, never deletes the authority row and never dispatches DDL.
    pub fn resolve(
        &self,
        req: &OperationRequest,
        opts: ResolveOptions,
    ) -> Result<ResolveReport, EngineError> {
        let f = &req.static_facts;
        let key = contracts::target_key(&f.cluster_name, &f.target_database, &req.target_table);
        let operation = contracts::operation_id(&req.scheduler_invocation, &key, &req.plan_digest);
        let mut report = ResolveReport::new(key, operation, opts.apply);
        // A record of either mode (a V1 internal record is resolved exactly as an external
        // one: the same fields, the same evidence).
        let (version, record) = match self.read_slot(&key)? {
            Some((v, slot)) if slot.record().operation_id == operation => (v, slot.into_record()),
            other => {
                let reason = match other {
                    None => "the target slot holds no authority record",
                    Some(_) => {
                        "another operation holds the slot; resolve it with that operation's invocation"
                    }
                };
                report.refuse(refusal(codes::NO_RECORD, reason, None, false));
                return Ok(report);
            }
        };
        report.keeper_version = Some(version);
        report.phase = Some(record.phase);
        let op = resolve_op(req, &record);
        let facts = self.observe_for_resolve(&op, &record, opts.quiet_seconds)?;
        report.inventory = Some(facts.inventory);
        report.queue = Some(match &facts.queue {
            QueueFact::NotBound => QueueSummary {
                state: "not_bound",
                entries: 0,
            },
            QueueFact::Unavailable => QueueSummary {
                state: "unavailable",
                entries: 0,
            },
            QueueFact::Entries(es) => QueueSummary {
                state: if es.is_empty() { "absent" } else { "present" },
                entries: es.len(),
            },
        });
        report.artifact = Some(facts.artifact);
        report.members.clone_from(&facts.members);
        match decide(&facts) {
            Decision::Refuse(r) => report.refuse(r),
            Decision::Resolve(p) => {
                report.propose(&p);
                if opts.apply {
                    self.record_resolution(&op, &facts, &p, version, &mut report)?;
                }
            }
        }
        Ok(report)
    }

    fn record_resolution(
        &self,
        op: &Op<'_>,
        facts: &ResolveFacts<'_>,
        p: &Proposal,
        version: u64,
        report: &mut ResolveReport,
    ) -> Result<(), EngineError> {
        // The record must still be exactly the one observed before anything is dropped.
        match self.read_slot(&op.target_key)? {
            Some((v, slot)) if v == version && *slot.record() == *facts.record => {}
            _ => {
                report.refuse(refusal(
                    engine::AUTHORITY_CONFLICT,
                    "the authority record changed after it was observed; nothing was recorded",
                    None,
                    false,
                ));
                return Ok(());
            }
        }
        let mut dropped = Vec::new();
        for (i, (member, uuid)) in p.drops.iter().enumerate() {
            let interrupted = |e: &PortError| e.kind == PortErrorKind::Interrupted;
            let sent = self
                .ports
                .catalog
                .drop_exact(member, op.database, &op.candidate, *uuid);
            let absent = match sent {
                Err(e) if interrupted(&e) => {
                    return Err(EngineError::Interrupted {
                        step: "resolve drop",
                    });
                }
                Err(_) => false,
                Ok(()) => match self
                    .ports
                    .catalog
                    .observe_table(member, op.database, &op.candidate)
                {
                    Err(e) if interrupted(&e) => {
                        return Err(EngineError::Interrupted {
                            step: "resolve drop",
                        });
                    }
                    Ok(None) => true,
                    _ => false,
                },
            };
            if !absent {
                report.refuse(refusal(
                    engine::MEMBER_UNAVAILABLE,
                    "an exact drop did not complete or its absence is not proven; nothing was recorded",
                    Some(*member),
                    true,
                ));
                return Ok(());
            }
            if let Some(d) = report.drops.get_mut(i) {
                d.dropped = true;
            }
            dropped.push((*member, *uuid));
        }
        let next = resolved_record(facts, p, version, &dropped);
        match self.write(op, Some(version), next, p.to.as_str()) {
            Ok(held) => {
                report.outcome = ResolveOutcome::Recorded;
                report.recorded_version = Some(held.version);
                Ok(())
            }
            Err(e @ EngineError::AuthorityConflict { .. }) => {
                report.refuse(refusal(
                    e.code(),
                    "the authority record changed between observation and record; nothing was recorded",
                    None,
                    false,
                ));
                Ok(())
            }
            Err(e @ EngineError::AuthorityUnconfirmed { .. }) => {
                report.refuse(refusal(
                    e.code(),
                    "the record write could not be confirmed; resolve again to observe what landed",
                    None,
                    true,
                ));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn observe_for_resolve<'r>(
        &self,
        op: &Op<'_>,
        r: &'r PublicationRecord,
        quiet_seconds: u64,
    ) -> Result<ResolveFacts<'r>, EngineError> {
        let inventory = match self.observe_inventory(op.cluster)? {
            (e, true) if contracts::inventory_digest(&e) == r.inventory_digest => {
                InventoryFact::Bound
            }
            (e, false) if e.is_empty() => InventoryFact::Unavailable,
            _ => InventoryFact::Drifted,
        };
        let binding = match r.phase {
            Phase::PublicationDispatching => r.publication.as_ref(),
            Phase::CleanupDispatching => r.cleanup.as_ref(),
            _ => None,
        };
        let queue = match binding {
            None => QueueFact::NotBound,
            Some(b) => match self
                .ports
                .ddl
                .observe_queue(op.cluster, &contracts::ddl_query_id(b.kind, &b.token))
            {
                Ok(es) => QueueFact::Entries(es),
                Err(e) if e.kind == PortErrorKind::Interrupted => {
                    return Err(EngineError::Interrupted { step: "queue" });
                }
                Err(_) => QueueFact::Unavailable,
            },
        };
        let artifact = match (r.phase, r.artifact) {
            (Phase::Staging, Some(id)) => self.probe_artifact(&id)?,
            _ => ArtifactFact::NotBound,
        };
        let digest = (r.phase == Phase::PublicationDispatching).then_some(r.content_proof);
        let members = r
            .members
            .iter()
            .map(|m| self.observe_member(op, m, digest))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResolveFacts {
            record: r,
            now: self.ports.env.now_unix(),
            quiet_seconds,
            inventory,
            queue,
            artifact,
            members,
        })
    }

    fn observe_member(
        &self,
        op: &Op<'_>,
        m: &MemberRecord,
        digest: Option<ContentProof>,
    ) -> Result<ObservedMember, EngineError> {
        let mut reachable = true;
        let mut table = |name: &str| -> Result<Option<ObservedTable>, EngineError> {
            let t = match self
                .ports
                .catalog
                .observe_table(&m.member_id, op.database, name)
            {
                Ok(Some(t)) => t,
                Ok(None) => return Ok(None),
                Err(e) if e.kind == PortErrorKind::Interrupted => {
                    return Err(EngineError::Interrupted { step: "observe" });
                }
                Err(_) => {
                    reachable = false;
                    return Ok(None);
                }
            };
            let schema_matches = t.columns == op.req.schema.columns;
            let mut content = None;
            if let Some(proof) = digest
                && schema_matches
                && Some(t.uuid) == m.candidate_uuid
            {
                match self.digest_table(op, proof, &m.member_id, name, t.uuid) {
                    Ok(s) => content = Some(s),
                    Err(EngineError::MemberUnavailable { .. }) => reachable = false,
                    // Rows that do not decode under the schema are not the generation.
                    Err(EngineError::ContentDecode(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(Some(ObservedTable {
                uuid: t.uuid,
                row_count: t.row_count,
                schema_matches,
                content_digest: content.as_ref().map(|s| s.digest),
                content_rows: content.as_ref().map(|s| s.row_count),
            }))
        };
        let target = table(op.target)?;
        let candidate = table(&op.candidate)?;
        Ok(ObservedMember {
            member_id: m.member_id,
            reachable,
            target,
            candidate,
        })
    }

    fn probe_artifact(&self, id: &ArtifactIdentity) -> Result<ArtifactFact, EngineError> {
        let fact = |e: PortError| {
            if e.kind == PortErrorKind::Interrupted {
                return Err(EngineError::Interrupted { step: "artifact" });
            }
            Ok(match e.class {
                ARTIFACT_NOT_FOUND => ArtifactFact::Missing,
                ARTIFACT_TAMPERED => ArtifactFact::Tampered,
                _ => ArtifactFact::Unavailable,
            })
        };
        match self.ports.artifacts.open(id) {
            Err(e) => fact(e),
            Ok(_) => match self.ports.artifacts.revalidate(id) {
                Ok(()) => Ok(ArtifactFact::Present),
                Err(e) => fact(e),
            },
        }
    }
}

/// The run context of the record's operation, for observation only (no admission).
fn resolve_op<'r>(req: &'r OperationRequest, r: &PublicationRecord) -> Op<'r> {
    let f = &req.static_facts;
    Op {
        req,
        mode: r
            .mode()
            .unwrap_or(crate::contracts::PublicationMode::External),
        cluster: &f.cluster_name,
        database: &f.target_database,
        target: &req.target_table,
        engine: &f.engine,
        max_bytes: 0,
        target_key: r.target_key,
        operation_id: r.operation_id,
        candidate: contracts::candidate_name(&req.target_table, &r.operation_id),
        schema_digest: contracts::schema_digest(&req.schema),
        members: r
            .members
            .iter()
            .map(|m| (m.member_id, m.shard_num, m.replica_num))
            .collect(),
        inventory_digest: r.inventory_digest,
        admission: r.admission.clone().unwrap_or(AdmissionEvidence {
            component_sha256: String::new(),
            input_sha256: String::new(),
        }),
    }
}
