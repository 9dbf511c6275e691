//! Authority: fencing, one-shot CAS confirmed by exact version + 1 read-back.
//!
//! On KeeperMap an update with a stale `_version` is a silent no-op, so no write is trusted
//! until a read-back shows the exact value at exactly `expected + 1`. A lost acknowledgement
//! whose write did land is recognised by that read-back (the value carries a fresh random
//! token or a fresh `keeper_version`, so only this writer could have produced it); a write
//! that did not land is reported, never assumed.

use super::{Coordinator, Op};
use crate::contracts::{
    self, AuthoritySlot, MemberCleanup, MemberPublication, MemberRecord, Phase, PreviousOperation,
    PublicationMode, PublicationRecord, StageState, TargetKey, Token,
};
use crate::error::EngineError;
use crate::ports::PortErrorKind;

/// The record this run holds, at the version it was read or written at.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub version: u64,
    pub record: PublicationRecord,
}

impl Coordinator<'_> {
    /// Runs one authority-store call, timing it for the run's evidence.
    fn authority_timed<T>(&self, call: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let out = call();
        self.clock.add_authority(started.elapsed());
        out
    }

    pub(crate) fn read_slot(
        &self,
        key: &TargetKey,
    ) -> Result<Option<(u64, AuthoritySlot)>, EngineError> {
        let v = self
            .authority_timed(|| self.ports.authority.read(key))
            .map_err(|e| {
                super::port_failure(
                    e,
                    "authority read",
                    || super::COORDINATOR_SCOPE.into(),
                    |source| EngineError::AuthorityUnconfirmed {
                        phase: "read",
                        source,
                    },
                )
            })?;
        match v {
            None => Ok(None),
            Some(v) => {
                let slot =
                    contracts::decode_slot(&v.value).map_err(EngineError::AuthorityCorrupt)?;
                Ok(Some((v.version, slot)))
            }
        }
    }

    /// Creates or resumes this operation's record in LOCKED (spec section 2).
    ///
    /// The slot may hold a record of either mode. This operation's own record is resumed only
    /// in the mode it was written in. A resolved record of another operation is replaced by one
    /// version-checked CAS that names it as `previous`; when its mode is the other one, that CAS
    /// is the mode migration, and the new operation adopts the members' current physical truth
    /// as its baseline (observed and proven at STAGING) before any candidate is created. An
    /// unresolved V1 record blocks external mode; any other unresolved record fences this one.
    pub(crate) fn lock(&self, op: &Op<'_>) -> Result<Held, EngineError> {
        let Some((version, slot)) = self.read_slot(&op.target_key)? else {
            return self.write(op, None, self.fresh_record(op, None), "LOCKED");
        };
        let slot_mode = slot.mode();
        let r = slot.into_record();
        if r.operation_id == op.operation_id && slot_mode == op.mode {
            if r.target_key != op.target_key || r.plan_digest != op.req.plan_digest {
                return Err(EngineError::AuthorityMismatch("target or plan"));
            }
            if r.phase == Phase::Aborted {
                return Err(EngineError::OperationAborted);
            }
            if r.phase != Phase::Completed && r.inventory_digest != op.inventory_digest {
                return Err(EngineError::InventoryDrift);
            }
            let ids: Vec<_> = r.members.iter().map(|m| m.member_id).collect();
            let want: Vec<_> = op.members.iter().map(|m| m.0).collect();
            if ids != want && r.phase != Phase::Completed {
                return Err(EngineError::InventoryDrift);
            }
            return Ok(Held { version, record: r });
        }
        if r.operation_id == op.operation_id {
            // The same operation id under the other mode: the plan changed its mode, which the
            // plan digest (and so the id) should have changed; never reinterpret a record.
            return Err(EngineError::AuthorityMismatch("replication mode"));
        }
        if !r.phase.is_resolved() {
            if slot_mode == PublicationMode::Internal && op.mode == PublicationMode::External {
                return Err(EngineError::V1Unresolved);
            }
            return Err(EngineError::OperationFenced {
                other: r.operation_id.0.hex_prefix(16),
            });
        }
        let previous = PreviousOperation {
            schema_version: r.schema_version.clone(),
            operation_id: r.operation_id.to_string(),
            phase: r.phase.as_str().into(),
            keeper_version: version,
        };
        self.write(
            op,
            Some(version),
            self.fresh_record(op, Some(previous)),
            "LOCKED",
        )
    }

    fn fresh_record(&self, op: &Op<'_>, previous: Option<PreviousOperation>) -> PublicationRecord {
        let now = self.ports.env.now_unix();
        PublicationRecord {
            schema_version: op.mode.authority_schema().into(),
            replication_mode: op.mode.as_str().into(),
            target_key: op.target_key,
            operation_id: op.operation_id,
            fence_token: Token(self.ports.env.random16()),
            phase: Phase::Locked,
            dispatch_epoch: 0,
            keeper_version: 0,
            inventory_digest: op.inventory_digest,
            plan_digest: op.req.plan_digest,
            admission: Some(op.admission.clone()),
            previous,
            artifact: None,
            content_proof: self.config.content_proof,
            artifact_content_digest: None,
            generation_id: None,
            target_present: None,
            members: op
                .members
                .iter()
                .map(|(id, s, r)| MemberRecord {
                    member_id: *id,
                    shard_num: *s,
                    replica_num: *r,
                    predecessor: None,
                    stage: StageState::Pending,
                    candidate_uuid: None,
                    candidate_content_digest: None,
                    rebuilds: 0,
                    publication: MemberPublication::Pending,
                    cleanup: MemberCleanup::Pending,
                })
                .collect(),
            publication: None,
            cleanup: None,
            receipt: None,
            error_class: None,
            created_at: now,
            updated_at: now,
            resolutions: Vec::new(),
        }
    }

    /// One CAS from `held` to `next`, confirmed by read-back.
    pub(crate) fn cas(
        &self,
        op: &Op<'_>,
        held: &Held,
        next: PublicationRecord,
    ) -> Result<Held, EngineError> {
        if !held.record.phase.may_move_to(next.phase) {
            return Err(EngineError::AuthorityMismatch("illegal phase transition"));
        }
        let label = next.phase.as_str();
        self.write(op, Some(held.version), next, label)
    }

    pub(super) fn write(
        &self,
        op: &Op<'_>,
        expected: Option<u64>,
        mut next: PublicationRecord,
        label: &'static str,
    ) -> Result<Held, EngineError> {
        let version = expected.map_or(0, |v| v + 1);
        next.keeper_version = version;
        next.updated_at = self.ports.env.now_unix();
        contracts::validate_record(&next).map_err(EngineError::AuthorityCorrupt)?;
        if next.mode() != Some(op.mode) {
            return Err(EngineError::AuthorityMismatch("replication mode"));
        }
        let text = contracts::encode_record(&next);
        let sent = match expected {
            None => self.authority_timed(|| self.ports.authority.insert(&op.target_key, &text)),
            Some(v) => {
                self.authority_timed(|| self.ports.authority.update(&op.target_key, v, &text))
            }
        };
        if let Err(e) = &sent
            && e.kind == PortErrorKind::Interrupted
        {
            return Err(EngineError::Interrupted { step: label });
        }
        // Read back: only the exact value at exactly version + 1 confirms the write.
        let back = self
            .authority_timed(|| self.ports.authority.read(&op.target_key))
            .map_err(|e| {
                super::port_failure(
                    e,
                    label,
                    || super::COORDINATOR_SCOPE.into(),
                    |e| EngineError::AuthorityUnconfirmed {
                        phase: label,
                        source: sent.clone().err().unwrap_or(e),
                    },
                )
            })?;
        match back {
            Some(v) if v.version == version => match contracts::decode_slot(&v.value) {
                Ok(slot) if *slot.record() == next => Ok(Held {
                    version,
                    record: next,
                }),
                _ => Err(EngineError::AuthorityConflict { phase: label }),
            },
            Some(v) if expected == Some(v.version) => match sent {
                // Unchanged: the write did not land. With an ack, the version was stale.
                Ok(()) => Err(EngineError::AuthorityConflict { phase: label }),
                Err(e) => Err(EngineError::AuthorityUnconfirmed {
                    phase: label,
                    source: e,
                }),
            },
            None => match sent {
                Err(e) => Err(EngineError::AuthorityUnconfirmed {
                    phase: label,
                    source: e,
                }),
                Ok(()) => Err(EngineError::AuthorityConflict { phase: label }),
            },
            Some(_) => Err(EngineError::AuthorityConflict { phase: label }),
        }
    }

    /// Re-reads the record and requires it unchanged since `held` (same version, same fence).
    pub(crate) fn reread(&self, op: &Op<'_>, held: &Held) -> Result<Held, EngineError> {
        match self
            .read_slot(&op.target_key)?
            .map(|(v, slot)| (v, slot.into_record()))
        {
            Some((version, r))
                if version == held.version
                    && r.schema_version == held.record.schema_version
                    && r.operation_id == held.record.operation_id
                    && r.fence_token == held.record.fence_token
                    && r.inventory_digest == held.record.inventory_digest
                    && r.artifact == held.record.artifact
                    && r.phase == held.record.phase =>
            {
                Ok(Held { version, record: r })
            }
            _ => Err(EngineError::AuthorityConflict {
                phase: held.record.phase.as_str(),
            }),
        }
    }

    /// This operation's record as it is now, if the slot still holds it.
    pub(crate) fn current(&self, op: &Op<'_>) -> Option<Held> {
        match self.read_slot(&op.target_key) {
            Ok(Some((version, slot)))
                if slot.mode() == op.mode && slot.record().operation_id == op.operation_id =>
            {
                Some(Held {
                    version,
                    record: slot.into_record(),
                })
            }
            _ => None,
        }
    }

    /// Best effort: stores a stable error class on the record (same phase) for status evidence.
    pub(crate) fn record_error(&self, op: &Op<'_>, held: &Held, err: &EngineError) {
        if held.record.error_class.as_deref() == Some(err.code()) {
            return;
        }
        let mut next = held.record.clone();
        next.error_class = Some(err.code().into());
        if held.record.phase.may_move_to(held.record.phase) {
            let _ = self.cas(op, held, next);
        }
    }
}
