//! Fenced one-shot publication, reconciliation, commit and cleanup (spec sections 5 and 6).

use super::authority::Held;
use super::timing::{MemberStep, RunPhase};
use super::{Coordinator, Op, RunOutcome};
use crate::contracts::{
    self, ClusterStatement, DdlBinding, MemberCleanup, MemberId, MemberPublication, Phase,
    PublicationReceipt, ReceiptMember, Token, Uuid,
};
use crate::error::EngineError;
use crate::ports::{DdlCorrelation, PortErrorKind, QueueEntry, QueueHostStatus};

/// A member's physical state against the bound pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PairState {
    /// Still the pre-publication pair.
    Unchanged,
    /// The target holds the candidate UUID.
    Published,
    /// Anything else.
    Foreign,
}

/// A cleanup member state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CleanupState {
    Present,
    Absent,
    Foreign,
}

impl Coordinator<'_> {
    fn statement(op: &Op<'_>, present: bool) -> ClusterStatement {
        if present {
            ClusterStatement::Exchange {
                database: op.database.into(),
                target: op.target.into(),
                candidate: op.candidate.clone(),
            }
        } else {
            ClusterStatement::Rename {
                database: op.database.into(),
                candidate: op.candidate.clone(),
                target: op.target.into(),
            }
        }
    }

    fn binding(&self, op: &Op<'_>, statement: &ClusterStatement, epoch: u64) -> DdlBinding {
        let token = Token(self.ports.env.random16());
        DdlBinding {
            kind: statement.kind(),
            epoch,
            token,
            query_digest: contracts::query_digest(op.cluster, statement, &token),
            queue_entry: None,
        }
    }

    fn correlation(b: &DdlBinding) -> DdlCorrelation {
        DdlCorrelation {
            token: b.token,
            query_id: contracts::ddl_query_id(b.kind, &b.token),
            query_digest: b.query_digest,
        }
    }

    /// Dispatches once. Only `Interrupted` stops the run; any other outcome is reconciled by
    /// observation, never by a second dispatch.
    fn dispatch_once(
        &self,
        op: &Op<'_>,
        statement: &ClusterStatement,
        b: &DdlBinding,
    ) -> Result<(), EngineError> {
        match self
            .ports
            .ddl
            .dispatch(op.cluster, statement, &Self::correlation(b))
        {
            Err(e) if e.kind == PortErrorKind::Interrupted => {
                Err(EngineError::Interrupted { step: "dispatch" })
            }
            _ => Ok(()),
        }
    }

    fn queue(&self, op: &Op<'_>, b: &DdlBinding) -> Result<Vec<QueueEntry>, EngineError> {
        self.ports
            .ddl
            .observe_queue(op.cluster, &contracts::ddl_query_id(b.kind, &b.token))
            .map_err(|e| {
                super::port_failure(
                    e,
                    "queue",
                    || super::COORDINATOR_SCOPE.into(),
                    EngineError::DdlUnavailable,
                )
            })
    }

    /// Each member's pair state (target and candidate UUIDs against the bound pair).
    pub(crate) fn pair_states(
        &self,
        op: &Op<'_>,
        held: &Held,
    ) -> Result<Vec<(MemberId, PairState)>, EngineError> {
        self.for_members(&held.record.members, |m| {
            let cand = m
                .candidate_uuid
                .ok_or(EngineError::AuthorityMismatch("no candidate uuid"))?;
            let target = self.observe(op, &m.member_id, op.target)?.map(|t| t.uuid);
            let candidate = self
                .observe(op, &m.member_id, &op.candidate)?
                .map(|t| t.uuid);
            let pred = m.predecessor.map(|p| p.uuid);
            let state = if target == Some(cand) && candidate == pred {
                PairState::Published
            } else if target == pred && candidate == Some(cand) {
                PairState::Unchanged
            } else {
                PairState::Foreign
            };
            Ok((m.member_id, state))
        })
        .into_iter()
        .collect()
    }

    /// STAGED → PUBLICATION_DISPATCHING, then one dispatch.
    pub(crate) fn authorize_publication(
        &self,
        op: &Op<'_>,
        held: Held,
    ) -> Result<Held, EngineError> {
        // Re-observe everything against the bound maps: the inventory beside the members (reads
        // only, none depending on another), judged inventory first, as one after another.
        let (inventory, members) = Self::beside(
            || self.require_inventory(op),
            || self.authorize_members(op, &held),
        );
        inventory?;
        members?;
        let present = held.record.target_present.unwrap_or(false);
        let statement = Self::statement(op, present);
        let mut next = held.record.clone();
        next.phase = Phase::PublicationDispatching;
        next.dispatch_epoch += 1;
        let b = self.binding(op, &statement, next.dispatch_epoch);
        next.publication = Some(b.clone());
        // Only an acknowledged CAS confirmed at exactly version + 1 yields the permit.
        let held = self.cas(op, &held, next)?;
        self.dispatch_once(op, &statement, &b)?;
        Ok(held)
    }

    /// Before the permit: every member's target is still the bound predecessor and its
    /// candidate the bound, proven generation (members concurrently; the first failure in
    /// member-id order is reported).
    fn authorize_members(&self, op: &Op<'_>, held: &Held) -> Result<(), EngineError> {
        let content = held.record.artifact_content_digest;
        let artifact = held
            .record
            .artifact
            .ok_or(EngineError::AuthorityMismatch("no artifact"))?;
        // Members are re-observed and proven concurrently (reads only); the first failure in
        // member-id order is reported.
        let checked = self.for_members(&held.record.members, |m| {
            let short = m.member_id.0.hex_prefix(16);
            let target = self.observe(op, &m.member_id, op.target)?;
            if target.as_ref().map(|t| t.uuid) != m.predecessor.map(|p| p.uuid) {
                return Err(EngineError::TargetDrift { member: short });
            }
            let cand_uuid = m
                .candidate_uuid
                .ok_or(EngineError::AuthorityMismatch("no candidate uuid"))?;
            let missing = || EngineError::CandidateMissing {
                member: m.member_id.0.hex_prefix(16),
            };
            let cand = self
                .observe(op, &m.member_id, &op.candidate)?
                .ok_or_else(missing)?;
            if cand.uuid != cand_uuid || cand.row_count != artifact.row_count {
                return Err(missing());
            }
            let s = self
                .clock
                .member(&m.member_id, MemberStep::AuthorizeProof, || {
                    self.reprove(
                        op,
                        held.record.content_proof,
                        &m.member_id,
                        &op.candidate,
                        cand_uuid,
                    )
                })?;
            if Some(s.digest) != content || m.candidate_content_digest != content {
                return Err(missing());
            }
            Ok(())
        });
        checked.into_iter().collect::<Result<(), EngineError>>()
    }

    /// Reconciles the one bound queue entry and every member's UUID pair.
    /// `Ok(Ok(held))` moves on; `Ok(Err(outcome))` waits on the cluster.
    pub(crate) fn reconcile_publication(
        &self,
        op: &Op<'_>,
        held: Held,
    ) -> Result<Result<Held, RunOutcome>, EngineError> {
        let b = held
            .record
            .publication
            .clone()
            .ok_or(EngineError::AuthorityMismatch("no publication binding"))?;
        // The queue entry and every member's pair are observed at once (reads only, none
        // depending on another), judged queue first, as one after another.
        let (entries, states) = Self::beside(|| self.queue(op, &b), || self.pair_states(op, &held));
        let (entries, states) = (entries?, states?);
        let fail = |e: EngineError| {
            self.record_error(op, &held, &e);
            Err(e)
        };
        if let Some((id, _)) = states.iter().find(|(_, s)| *s == PairState::Foreign) {
            return fail(EngineError::PublicationForeignUuid {
                member: id.0.hex_prefix(16),
            });
        }
        let all_published = states.iter().all(|(_, s)| *s == PairState::Published);
        if op.mode == crate::contracts::PublicationMode::Local {
            // One server, one statement without ON CLUSTER: there is no queue. The evidence is
            // the server itself. The exact published pair (target = the candidate's UUID, the
            // candidate name = the predecessor's) can only come from the one statement this
            // operation sent, exactly once (a second EXCHANGE would have swapped back, and it
            // is never sent); a statement still running is in the server's process list
            // (`observe_queue` reports it active); anything else cannot be proven.
            if !all_published {
                let running = entries.iter().any(|e| {
                    e.members.iter().any(|(_, s)| {
                        matches!(s, QueueHostStatus::Queued | QueueHostStatus::Active)
                    })
                });
                if running {
                    return Ok(Err(RunOutcome::InProgress {
                        phase: Phase::PublicationDispatching,
                        waiting: states.iter().map(|(id, _)| *id).collect(),
                    }));
                }
                return fail(EngineError::PublicationEvidenceMissing);
            }
            return self.commit_publication(op, held, b, None).map(Ok);
        }
        let [entry] = entries.as_slice() else {
            // No entry (or several): the dispatch cannot be proven; never redispatch.
            return fail(EngineError::PublicationEvidenceMissing);
        };
        if entry.unmapped_hosts > 0 || !covers_members(entry, &held) {
            return fail(EngineError::PublicationEvidenceMissing);
        }
        if !all_published {
            let active = entry
                .members
                .iter()
                .any(|(_, s)| matches!(s, QueueHostStatus::Queued | QueueHostStatus::Active));
            if active {
                let waiting = states
                    .iter()
                    .filter(|(_, s)| *s != PairState::Published)
                    .map(|(id, _)| *id)
                    .collect();
                return Ok(Err(RunOutcome::InProgress {
                    phase: Phase::PublicationDispatching,
                    waiting,
                }));
            }
            return fail(EngineError::PublicationTerminalMixed);
        }
        self.commit_publication(op, held, b, Some(entry.entry.clone()))
            .map(Ok)
    }

    /// Every member holds the candidate UUID as target: proves every member's published
    /// target is the generation, then PUBLICATION_DISPATCHING → COMMITTED with the receipt.
    fn commit_publication(
        &self,
        op: &Op<'_>,
        held: Held,
        b: DdlBinding,
        queue_entry: Option<String>,
    ) -> Result<Held, EngineError> {
        let fail = |e: EngineError| {
            self.record_error(op, &held, &e);
            Err(e)
        };
        let artifact = held
            .record
            .artifact
            .ok_or(EngineError::AuthorityMismatch("no artifact"))?;
        let content = held
            .record
            .artifact_content_digest
            .ok_or(EngineError::AuthorityMismatch("no content digest"))?;
        // Every member's published target is proven concurrently; the results are judged in
        // member-id order, exactly as one after another.
        let proofs = self.for_members(&held.record.members, |m| {
            let uuid = m
                .candidate_uuid
                .ok_or(EngineError::AuthorityMismatch("no candidate uuid"))?;
            let s = self
                .clock
                .member(&m.member_id, MemberStep::TargetProof, || {
                    self.reprove(op, held.record.content_proof, &m.member_id, op.target, uuid)
                })?;
            Ok((uuid, s))
        });
        let mut members = Vec::new();
        for (m, proof) in held.record.members.iter().zip(proofs) {
            let (uuid, s) = proof?;
            if s.digest != content || s.row_count != artifact.row_count {
                return fail(EngineError::PublicationTerminalMixed);
            }
            members.push(ReceiptMember {
                member_id: m.member_id,
                target_uuid: uuid,
                content_digest: s.digest,
                row_count: s.row_count,
                predecessor_uuid: m.predecessor.map(|p| p.uuid),
            });
        }
        let mut bound = b;
        bound.queue_entry = queue_entry;
        let mut next = held.record.clone();
        next.phase = Phase::Committed;
        next.error_class = None;
        next.publication = Some(bound.clone());
        for m in &mut next.members {
            m.publication = MemberPublication::Published;
        }
        next.receipt = Some(PublicationReceipt {
            schema_version: op.mode.receipt_schema().into(),
            target_key: op.target_key,
            operation_id: op.operation_id,
            generation_id: held
                .record
                .generation_id
                .ok_or(EngineError::AuthorityMismatch("no generation"))?,
            inventory_digest: held.record.inventory_digest,
            plan_digest: held.record.plan_digest,
            artifact,
            content_proof: held.record.content_proof,
            content_digest: content,
            publication: bound,
            members,
            committed_at: self.ports.env.now_unix(),
        });
        self.clock
            .phase(RunPhase::Commit, || self.cas(op, &held, next))
    }

    /// Each member's predecessor state under the candidate name after an exchange.
    pub(crate) fn cleanup_states(
        &self,
        op: &Op<'_>,
        held: &Held,
    ) -> Result<Vec<(MemberId, CleanupState)>, EngineError> {
        self.for_members(&held.record.members, |m| {
            let pred: Option<Uuid> = m.predecessor.map(|p| p.uuid);
            let obs = self
                .observe(op, &m.member_id, &op.candidate)?
                .map(|t| t.uuid);
            let state = match (obs, pred) {
                (None, _) => CleanupState::Absent,
                (Some(u), Some(p)) if u == p => CleanupState::Present,
                _ => CleanupState::Foreign,
            };
            Ok((m.member_id, state))
        })
        .into_iter()
        .collect()
    }

    /// COMMITTED → CLEANUP_DISPATCHING (exact predecessors) or COMPLETED (nothing to drop).
    pub(crate) fn start_cleanup(&self, op: &Op<'_>, held: Held) -> Result<Held, EngineError> {
        let present = held.record.target_present.unwrap_or(false);
        if !present {
            let mut next = held.record.clone();
            next.phase = Phase::Completed;
            return self.cas(op, &held, next);
        }
        // Every target must hold the committed UUID and every candidate name the bound
        // predecessor UUID.
        let states = self.pair_states(op, &held)?;
        if states.iter().any(|(_, s)| *s != PairState::Published) {
            return Err(EngineError::CleanupUnresolved);
        }
        let cleanup = self.cleanup_states(op, &held)?;
        if cleanup.iter().any(|(_, s)| *s == CleanupState::Foreign) {
            return Err(EngineError::CleanupUnresolved);
        }
        if cleanup.iter().all(|(_, s)| *s == CleanupState::Absent) {
            return self.complete(op, &held, None);
        }
        self.authorize_cleanup(op, &held)
    }

    fn authorize_cleanup(&self, op: &Op<'_>, held: &Held) -> Result<Held, EngineError> {
        let statement = ClusterStatement::Drop {
            database: op.database.into(),
            name: op.candidate.clone(),
        };
        let mut next = held.record.clone();
        next.phase = Phase::CleanupDispatching;
        next.dispatch_epoch += 1;
        let b = self.binding(op, &statement, next.dispatch_epoch);
        next.cleanup = Some(b.clone());
        let held = self.cas(op, held, next)?;
        self.dispatch_once(op, &statement, &b)?;
        Ok(held)
    }

    fn complete(
        &self,
        op: &Op<'_>,
        held: &Held,
        entry: Option<String>,
    ) -> Result<Held, EngineError> {
        let mut next = held.record.clone();
        next.phase = Phase::Completed;
        next.error_class = None;
        if let (Some(b), Some(e)) = (next.cleanup.as_mut(), entry) {
            b.queue_entry = Some(e);
        }
        for m in &mut next.members {
            if m.cleanup == MemberCleanup::Pending {
                m.cleanup = MemberCleanup::Absent;
            }
        }
        self.cas(op, held, next)
    }

    /// CLEANUP_DISPATCHING → COMPLETED once predecessor absence is proven on every member.
    pub(crate) fn reconcile_cleanup(
        &self,
        op: &Op<'_>,
        held: Held,
        may_reauthorize: bool,
    ) -> Result<Result<Held, RunOutcome>, EngineError> {
        let b = held
            .record
            .cleanup
            .clone()
            .ok_or(EngineError::AuthorityMismatch("no cleanup binding"))?;
        let entries = self.queue(op, &b)?;
        let states = self.cleanup_states(op, &held)?;
        if states.iter().any(|(_, s)| *s == CleanupState::Foreign) {
            self.record_error(op, &held, &EngineError::CleanupUnresolved);
            return Err(EngineError::CleanupUnresolved);
        }
        if states.iter().all(|(_, s)| *s == CleanupState::Absent) {
            let entry = match entries.as_slice() {
                [e] => Some(e.entry.clone()),
                _ => None,
            };
            return self.complete(op, &held, entry).map(Ok);
        }
        match entries.as_slice() {
            [entry] => {
                let active = entry
                    .members
                    .iter()
                    .any(|(_, s)| matches!(s, QueueHostStatus::Queued | QueueHostStatus::Active));
                if active {
                    let waiting = states
                        .iter()
                        .filter(|(_, s)| *s != CleanupState::Absent)
                        .map(|(id, _)| *id)
                        .collect();
                    return Ok(Err(RunOutcome::InProgress {
                        phase: Phase::CleanupDispatching,
                        waiting,
                    }));
                }
                self.record_error(op, &held, &EngineError::CleanupUnresolved);
                Err(EngineError::CleanupUnresolved)
            }
            [] if may_reauthorize && states.iter().all(|(_, s)| *s == CleanupState::Present) => {
                // No queue entry and every exact predecessor still present: the drop never
                // reached the cluster. A drop of UUID-verified predecessors under this
                // operation's unique name is idempotent in effect, so it is re-authorised
                // under a new epoch and token (publication is never redispatched).
                self.authorize_cleanup(op, &held).map(Ok)
            }
            [] if states.iter().all(|(_, s)| *s == CleanupState::Present) => {
                Err(EngineError::DdlUnavailable(
                    crate::ports::PortError::ambiguous("DPONE_CLEANUP_NOT_OBSERVED"),
                ))
            }
            _ => {
                self.record_error(op, &held, &EngineError::CleanupUnresolved);
                Err(EngineError::CleanupUnresolved)
            }
        }
    }
}

fn covers_members(entry: &QueueEntry, held: &Held) -> bool {
    held.record
        .members
        .iter()
        .all(|m| entry.members.iter().any(|(id, _)| *id == m.member_id))
}
