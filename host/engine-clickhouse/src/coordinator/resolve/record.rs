//! The record a proven resolution writes: the transition, the commit receipt of a `commit`, and
//! the evidence appended to `resolutions`. Pure.

use super::{ObservedTable, Proposal, ResolveFacts, codes};
use crate::contracts::{
    MemberCleanup, MemberId, MemberPublication, PublicationReceipt, PublicationRecord,
    ReceiptMember, ResolutionEvidence, ResolutionKind, ResolvedMember, Uuid,
};

/// The record a proven resolution writes (the CAS sets `keeper_version` and `updated_at`).
/// `dropped` lists the UUIDs actually dropped, per member.
pub fn resolved_record(
    f: &ResolveFacts<'_>,
    p: &Proposal,
    version: u64,
    dropped: &[(MemberId, Uuid)],
) -> PublicationRecord {
    let r = f.record;
    let mut next = r.clone();
    next.phase = p.to;
    next.error_class = None;
    let mut closed = None;
    match p.kind {
        ResolutionKind::ReturnToStaged => {
            closed = next.publication.take();
        }
        ResolutionKind::Commit => {
            closed = r.publication.clone();
            for m in &mut next.members {
                m.publication = MemberPublication::Published;
            }
            next.receipt = commit_receipt(f);
        }
        ResolutionKind::Complete => {
            closed = r.cleanup.clone();
            for m in &mut next.members {
                if m.cleanup == MemberCleanup::Pending {
                    m.cleanup = MemberCleanup::Absent;
                }
            }
        }
        ResolutionKind::Abort => {
            next.error_class = Some(codes::ABORTED_BY_OPERATOR.into());
        }
    }
    let digest = |t: &Option<ObservedTable>| t.as_ref().and_then(|t| t.content_digest);
    next.resolutions.push(ResolutionEvidence {
        kind: p.kind,
        from_phase: p.from,
        to_phase: p.to,
        from_keeper_version: version,
        dispatch_epoch: r.dispatch_epoch,
        closed_binding: closed,
        queue: p.queue,
        artifact: f.artifact,
        members: f
            .members
            .iter()
            .map(|o| ResolvedMember {
                member_id: o.member_id,
                target_uuid: o.target.as_ref().map(|t| t.uuid),
                target_content_digest: digest(&o.target),
                candidate_uuid: o.candidate.as_ref().map(|t| t.uuid),
                candidate_content_digest: digest(&o.candidate),
                dropped_uuid: dropped
                    .iter()
                    .find(|(id, _)| *id == o.member_id)
                    .map(|(_, u)| *u),
            })
            .collect(),
        resolved_at: f.now,
    });
    next
}

/// The commit receipt of a `commit` resolution: every member's observed target.
fn commit_receipt(f: &ResolveFacts<'_>) -> Option<PublicationReceipt> {
    let r = f.record;
    let members = r
        .members
        .iter()
        .zip(&f.members)
        .map(|(rec, obs)| {
            let t = obs.target.as_ref()?;
            Some(ReceiptMember {
                member_id: rec.member_id,
                target_uuid: t.uuid,
                content_digest: t.content_digest?,
                row_count: t.content_rows?,
                predecessor_uuid: rec.predecessor.map(|p| p.uuid),
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(PublicationReceipt {
        schema_version: r
            .mode()
            .map_or(crate::contracts::EXTERNAL_RECEIPT_SCHEMA, |m| {
                m.receipt_schema()
            })
            .into(),
        target_key: r.target_key,
        operation_id: r.operation_id,
        generation_id: r.generation_id?,
        inventory_digest: r.inventory_digest,
        plan_digest: r.plan_digest,
        artifact: r.artifact?,
        content_proof: r.content_proof,
        content_digest: r.artifact_content_digest?,
        publication: r.publication.clone()?,
        members,
        committed_at: f.now,
    })
}
