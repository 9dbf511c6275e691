//! Operator resolution of a fail-closed hold (`dpone-host resolve`): a **pure** decision over
//! observed facts, and the record it would write.
//!
//! The protocol never guesses: a crash between the PUBLICATION_DISPATCHING CAS and the send, a
//! queue entry purged by retention after a complete publication, or an artifact that exists on
//! another worker only, each end in `hold_for_operator`. [`decide`] names the one safe outcome
//! that physical truth proves, or refuses with a stable code and changes nothing:
//!
//! | phase | proof | resolution |
//! |---|---|---|
//! | PUBLICATION_DISPATCHING | no queue entry for the bound correlation (or one that failed on every member); every target still the bound predecessor (or absent), every candidate the bound owned UUID with exact content | `return_to_staged` (the next `run` dispatches once, under a new epoch and token) |
//! | PUBLICATION_DISPATCHING | no queue entry; every target is the bound candidate UUID with the generation's content digest, every candidate name the bound predecessor | `commit` (with the commit receipt) |
//! | CLEANUP_DISPATCHING | no queue entry (or a terminal one); every target the committed UUID; every candidate name absent or the exact predecessor UUID (dropped member-locally by UUID, absence proven) | `complete` |
//! | LOCKED / STAGING | publication never started; the bound artifact is missing (or tampered) on this worker; every candidate name absent or the exact owned UUID (dropped, absence proven) | `abort` (terminal, never success) |
//!
//! Everything else — a member that does not answer, inventory drift, a UUID outside the bound
//! pair, divergent content, members on different sides without queue evidence, a DDL still
//! executing — is refused. `return_to_staged` and `abort` also require the record to have been
//! quiet for `quiet_seconds`, so a live worker of the same operation is never overtaken. The
//! write is a version-checked CAS confirmed by read-back; the authority row is never deleted.

mod apply;
mod facts;
mod record;

pub use apply::{CandidateDrop, ResolveOptions, ResolveOutcome, ResolveReport};
pub use facts::{
    Decision, InventoryFact, ObservedMember, ObservedTable, Proposal, QueueFact, Refusal,
    ResolveFacts,
};
pub use record::resolved_record;

use super::RecoveryAction;
use crate::contracts::{
    ArtifactFact, MAX_RESOLUTIONS, MemberId, Phase, PublicationRecord, QueueEvidence,
    ResolutionKind,
};
use crate::error::codes as engine;
use crate::ports::{QueueEntry, QueueHostStatus};

/// Stable codes of the resolve command (the engine's own codes are reused where they fit).
pub mod codes {
    /// Nothing to resolve: the record is resolved, or `run` makes progress on its own.
    pub const NOT_NEEDED: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_NOT_NEEDED";
    /// No operator resolution is defined for the record's phase.
    pub const PHASE_UNSUPPORTED: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_PHASE_UNSUPPORTED";
    /// The slot holds no record of this operation (absent, V1, or another operation).
    pub const NO_RECORD: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_NO_RECORD";
    /// The record changed within the quiet period; a worker may still be running it.
    pub const QUIET_PERIOD: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_QUIET_PERIOD";
    /// Members stand on different sides of the bound pair and no queue entry proves why.
    pub const MIXED: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_MIXED";
    /// A table with the bound UUID holds other rows or another schema than the generation.
    pub const CONTENT_MISMATCH: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_CONTENT_MISMATCH";
    /// Several queue entries, unmapped hosts, or an entry not covering every member.
    pub const QUEUE_AMBIGUOUS: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_QUEUE_AMBIGUOUS";
    /// The record already carries the maximum number of resolutions.
    pub const LIMIT: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_LIMIT";
    /// The error class an `abort` resolution stores on the ABORTED record.
    pub const ABORTED_BY_OPERATOR: &str = "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_ABORTED";
}

fn refuse(code: &'static str, reason: &'static str, recovery: RecoveryAction) -> Decision {
    Decision::Refuse(Refusal {
        code,
        reason,
        member: None,
        retryable: false,
        recovery,
    })
}

fn refuse_member(code: &'static str, reason: &'static str, m: MemberId) -> Decision {
    Decision::Refuse(Refusal {
        code,
        reason,
        member: Some(m),
        retryable: false,
        recovery: RecoveryAction::HoldForOperator,
    })
}

fn retry(code: &'static str, reason: &'static str, member: Option<MemberId>) -> Decision {
    Decision::Refuse(Refusal {
        code,
        reason,
        member,
        retryable: true,
        recovery: RecoveryAction::ResumeSameOperation,
    })
}

fn quiet(f: &ResolveFacts<'_>) -> bool {
    f.now.saturating_sub(f.record.updated_at) >= i64::try_from(f.quiet_seconds).unwrap_or(i64::MAX)
}

/// The pure decision. Observation facts in, one proven outcome or one refusal out.
pub fn decide(f: &ResolveFacts<'_>) -> Decision {
    use RecoveryAction as R;
    let r = f.record;
    match r.phase {
        Phase::Completed => {
            return refuse(codes::NOT_NEEDED, "the operation completed", R::None);
        }
        Phase::Aborted => {
            return refuse(
                codes::NOT_NEEDED,
                "the operation is aborted; a new invocation may take the slot",
                R::StartNewOperation,
            );
        }
        Phase::Staged | Phase::Committed => {
            return refuse(
                codes::PHASE_UNSUPPORTED,
                "no operator resolution is defined in this phase; run resumes it and status names the evidence",
                R::ResumeSameOperation,
            );
        }
        _ => {}
    }
    if r.resolutions.len() >= MAX_RESOLUTIONS {
        return refuse(
            codes::LIMIT,
            "the record carries the maximum number of resolutions",
            R::HoldForOperator,
        );
    }
    let same_members = f.members.len() == r.members.len()
        && f.members
            .iter()
            .zip(&r.members)
            .all(|(o, m)| o.member_id == m.member_id);
    if !same_members {
        return refuse(
            engine::AUTHORITY_MISMATCH,
            "the observed members differ from the record's member map",
            R::HoldForOperator,
        );
    }
    match f.inventory {
        InventoryFact::Bound => {}
        InventoryFact::Drifted => {
            return Decision::Refuse(Refusal {
                code: engine::INVENTORY_DRIFT,
                reason: "the cluster inventory differs from the one bound to this operation",
                member: None,
                retryable: true,
                recovery: R::RestoreInventoryThenResume,
            });
        }
        InventoryFact::Unavailable => {
            return retry(
                engine::MEMBER_UNAVAILABLE,
                "the cluster inventory could not be read",
                None,
            );
        }
    }
    if let Some(m) = f.members.iter().find(|m| !m.reachable) {
        return retry(
            engine::MEMBER_UNAVAILABLE,
            "a member did not answer; every member must be observed",
            Some(m.member_id),
        );
    }
    match r.phase {
        Phase::Locked | Phase::Staging => decide_abort(f),
        Phase::PublicationDispatching => decide_publication(f),
        _ => decide_cleanup(f),
    }
}

fn decide_abort(f: &ResolveFacts<'_>) -> Decision {
    let r = f.record;
    match (r.phase, f.artifact) {
        (Phase::Locked, _) | (_, ArtifactFact::Missing | ArtifactFact::Tampered) => {}
        (_, ArtifactFact::Present) => {
            return refuse(
                codes::NOT_NEEDED,
                "the bound artifact is available on this worker: run resumes staging",
                RecoveryAction::ResumeSameOperation,
            );
        }
        (_, ArtifactFact::Unavailable | ArtifactFact::NotBound) => {
            return retry(
                engine::ARTIFACT_UNAVAILABLE,
                "the artifact store did not say whether the bound artifact exists",
                None,
            );
        }
    }
    let mut drops = Vec::new();
    for (rec, obs) in r.members.iter().zip(&f.members) {
        let owned = rec.candidate_uuid;
        if owned.is_some() && obs.target.as_ref().map(|t| t.uuid) == owned {
            return refuse_member(
                codes::MIXED,
                "a target holds this operation's candidate although publication never started",
                rec.member_id,
            );
        }
        match &obs.candidate {
            None => {}
            Some(c) if Some(c.uuid) == owned => drops.push((rec.member_id, c.uuid)),
            Some(_) => {
                return refuse_member(
                    engine::CANDIDATE_FOREIGN,
                    "a candidate exists that this operation did not create",
                    rec.member_id,
                );
            }
        }
    }
    if !quiet(f) {
        return retry(
            codes::QUIET_PERIOD,
            "the record changed within the quiet period; a worker may still be running this operation",
            None,
        );
    }
    Decision::Resolve(Proposal {
        kind: ResolutionKind::Abort,
        from: r.phase,
        to: Phase::Aborted,
        drops,
        queue: QueueEvidence::NotBound,
        proof: "publication never started and the bound artifact cannot be replayed on this worker; only exact owned candidates are dropped",
    })
}

/// Where a member stands against the bound pair.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Unchanged,
    Published,
}

fn exact(t: Option<&ObservedTable>, r: &PublicationRecord) -> bool {
    let rows = r.artifact.map(|a| a.row_count);
    t.is_some_and(|t| {
        t.schema_matches
            && Some(t.row_count) == rows
            && t.content_digest.is_some()
            && t.content_digest == r.artifact_content_digest
            && t.content_rows == rows
    })
}

/// One entry covering every member, every host mapped.
fn single_entry<'q>(q: &'q [QueueEntry], r: &PublicationRecord) -> Option<&'q QueueEntry> {
    match q {
        [e] if e.unmapped_hosts == 0
            && r.members
                .iter()
                .all(|m| e.members.iter().any(|(id, _)| *id == m.member_id)) =>
        {
            Some(e)
        }
        _ => None,
    }
}

fn active(e: &QueueEntry) -> bool {
    e.members
        .iter()
        .any(|(_, s)| matches!(s, QueueHostStatus::Queued | QueueHostStatus::Active))
}

fn decide_publication(f: &ResolveFacts<'_>) -> Decision {
    let r = f.record;
    if r.publication.is_none() || r.artifact.is_none() || r.artifact_content_digest.is_none() {
        return refuse(
            engine::AUTHORITY_MISMATCH,
            "publication phase without a bound DDL or generation",
            RecoveryAction::HoldForOperator,
        );
    }
    let mut sides = Vec::new();
    for (rec, obs) in r.members.iter().zip(&f.members) {
        let pred = rec.predecessor.map(|p| p.uuid);
        let target = obs.target.as_ref().map(|t| t.uuid);
        let cand = obs.candidate.as_ref().map(|t| t.uuid);
        let side = match rec.candidate_uuid {
            Some(owned) if target == pred && cand == Some(owned) => Side::Unchanged,
            Some(owned) if target == Some(owned) && cand == pred => Side::Published,
            _ => {
                return refuse_member(
                    engine::PUBLICATION_FOREIGN_UUID,
                    "a physical UUID outside the bound pair",
                    rec.member_id,
                );
            }
        };
        let holder = match side {
            Side::Unchanged => obs.candidate.as_ref(),
            Side::Published => obs.target.as_ref(),
        };
        if !exact(holder, r) {
            return refuse_member(
                codes::CONTENT_MISMATCH,
                "the bound candidate UUID does not hold exactly the generation's content",
                rec.member_id,
            );
        }
        sides.push(side);
    }
    let all = |s: Side| sides.iter().all(|x| *x == s);
    let queue = match &f.queue {
        QueueFact::Unavailable => {
            return retry(
                engine::DDL_UNAVAILABLE,
                "the DDL queue could not be read",
                None,
            );
        }
        QueueFact::NotBound => QueueEvidence::NotBound,
        QueueFact::Entries(es) if es.is_empty() => QueueEvidence::Absent,
        QueueFact::Entries(es) => {
            let Some(e) = single_entry(es, r) else {
                return refuse(
                    codes::QUEUE_AMBIGUOUS,
                    "the queue holds several entries, unmapped hosts, or an entry not covering every member",
                    RecoveryAction::HoldForOperator,
                );
            };
            if active(e) {
                return refuse(
                    codes::NOT_NEEDED,
                    "the bound DDL is still executing: wait, then run",
                    RecoveryAction::WaitThenResume,
                );
            }
            if all(Side::Published) {
                return refuse(
                    codes::NOT_NEEDED,
                    "the bound queue entry is present and every member is published: run commits",
                    RecoveryAction::ResumeSameOperation,
                );
            }
            let all_failed = e.members.iter().all(|(_, s)| *s == QueueHostStatus::Failed);
            if !(all(Side::Unchanged) && all_failed) {
                return refuse(
                    engine::PUBLICATION_TERMINAL_MIXED,
                    "the bound DDL finished with members on different generations",
                    RecoveryAction::HoldForOperator,
                );
            }
            QueueEvidence::TerminalFailed
        }
    };
    if queue == QueueEvidence::NotBound {
        return refuse(
            engine::AUTHORITY_MISMATCH,
            "publication phase without queue observation",
            RecoveryAction::HoldForOperator,
        );
    }
    if all(Side::Unchanged) {
        if !quiet(f) {
            return retry(
                codes::QUIET_PERIOD,
                "the record changed within the quiet period; a worker may still be dispatching",
                None,
            );
        }
        return Decision::Resolve(Proposal {
            kind: ResolutionKind::ReturnToStaged,
            from: r.phase,
            to: Phase::Staged,
            drops: Vec::new(),
            queue,
            proof: "the bound DDL changed no member: every target is the bound predecessor and every candidate the exact owned generation",
        });
    }
    if all(Side::Published) {
        return Decision::Resolve(Proposal {
            kind: ResolutionKind::Commit,
            from: r.phase,
            to: Phase::Committed,
            drops: Vec::new(),
            queue,
            proof: "every member's target is the bound candidate UUID with the generation's content digest",
        });
    }
    refuse(
        codes::MIXED,
        "members stand on different sides of the bound pair and no queue entry proves where the DDL stands",
        RecoveryAction::HoldForOperator,
    )
}

fn decide_cleanup(f: &ResolveFacts<'_>) -> Decision {
    let r = f.record;
    let (Some(receipt), Some(_)) = (&r.receipt, &r.cleanup) else {
        return refuse(
            engine::AUTHORITY_MISMATCH,
            "cleanup phase without a receipt or bound DDL",
            RecoveryAction::HoldForOperator,
        );
    };
    let mut drops = Vec::new();
    for (rec, obs) in r.members.iter().zip(&f.members) {
        let committed = receipt
            .members
            .iter()
            .find(|m| m.member_id == rec.member_id)
            .map(|m| m.target_uuid);
        if committed.is_none() || obs.target.as_ref().map(|t| t.uuid) != committed {
            return refuse_member(
                engine::TARGET_DRIFT,
                "a target no longer holds the committed UUID",
                rec.member_id,
            );
        }
        match (&obs.candidate, rec.predecessor.map(|p| p.uuid)) {
            (None, _) => {}
            (Some(c), Some(p)) if c.uuid == p => drops.push((rec.member_id, p)),
            _ => {
                return refuse_member(
                    engine::PUBLICATION_FOREIGN_UUID,
                    "the candidate name holds a UUID other than the exact predecessor",
                    rec.member_id,
                );
            }
        }
    }
    let queue = match &f.queue {
        QueueFact::Unavailable => {
            return retry(
                engine::DDL_UNAVAILABLE,
                "the DDL queue could not be read",
                None,
            );
        }
        QueueFact::Entries(es) if es.is_empty() => QueueEvidence::Absent,
        QueueFact::Entries(es) => match single_entry(es, r) {
            Some(e) if active(e) => {
                return refuse(
                    codes::NOT_NEEDED,
                    "the bound cleanup DDL is still executing: wait, then run",
                    RecoveryAction::WaitThenResume,
                );
            }
            Some(_) => QueueEvidence::Terminal,
            None => {
                return refuse(
                    codes::QUEUE_AMBIGUOUS,
                    "the queue holds several entries, unmapped hosts, or an entry not covering every member",
                    RecoveryAction::HoldForOperator,
                );
            }
        },
        QueueFact::NotBound => {
            return refuse(
                engine::AUTHORITY_MISMATCH,
                "cleanup phase without queue observation",
                RecoveryAction::HoldForOperator,
            );
        }
    };
    Decision::Resolve(Proposal {
        kind: ResolutionKind::Complete,
        from: r.phase,
        to: Phase::Completed,
        drops,
        queue,
        proof: "every target holds the committed UUID and every remaining predecessor is the exact bound UUID (dropped by UUID, absence proven)",
    })
}
