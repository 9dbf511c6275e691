//! The facts [`super::decide`] reads and the decision it returns. Pure data.

use serde::Serialize;

use crate::contracts::{
    ArtifactFact, Digest, MemberId, Phase, PublicationRecord, QueueEvidence, ResolutionKind, Uuid,
};
use crate::coordinator::RecoveryAction;
use crate::ports::QueueEntry;

/// A table observed by name on one member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObservedTable {
    /// Physical UUID.
    pub uuid: Uuid,
    /// `count()`.
    pub row_count: u64,
    /// Whether its columns equal the request's schema.
    pub schema_matches: bool,
    /// Canonical content digest, computed only for a table holding this operation's candidate
    /// UUID where content matters; none when not computed or when the rows do not decode.
    pub content_digest: Option<Digest>,
    /// Rows the canonical digest covered (with `content_digest`).
    pub content_rows: Option<u64>,
}

/// One member as resolve observed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ObservedMember {
    /// Opaque member id.
    pub member_id: MemberId,
    /// Whether every read on this member answered.
    pub reachable: bool,
    /// The table under the target name.
    pub target: Option<ObservedTable>,
    /// The table under the candidate name.
    pub candidate: Option<ObservedTable>,
}

/// The inventory against the one bound in authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InventoryFact {
    /// Complete and equal to the bound digest.
    Bound,
    /// Complete but different (or incomplete).
    Drifted,
    /// Not observed.
    Unavailable,
}

/// The queue for the bound correlation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QueueFact {
    /// No DDL is bound in this phase.
    NotBound,
    /// The queue did not answer.
    Unavailable,
    /// The entries carrying the bound correlation.
    Entries(Vec<QueueEntry>),
}

/// Everything [`decide`] needs: the record as read, and what was observed afterwards.
#[derive(Clone, Debug)]
pub struct ResolveFacts<'a> {
    /// The operation's record.
    pub record: &'a PublicationRecord,
    /// Unix seconds now.
    pub now: i64,
    /// Required seconds since the record's last write before `return_to_staged` or `abort`.
    pub quiet_seconds: u64,
    /// Inventory.
    pub inventory: InventoryFact,
    /// Queue.
    pub queue: QueueFact,
    /// Artifact store of this worker.
    pub artifact: ArtifactFact,
    /// Every member of the record, in member-id order.
    pub members: Vec<ObservedMember>,
}

/// A proven resolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Proposal {
    /// The transition.
    pub kind: ResolutionKind,
    /// Phase before.
    pub from: Phase,
    /// Phase after.
    pub to: Phase,
    /// Exact owned objects to drop member-locally (by UUID) before the CAS.
    pub drops: Vec<(MemberId, Uuid)>,
    /// What the queue proved.
    pub queue: QueueEvidence,
    /// One sentence naming the proof.
    pub proof: &'static str,
}

/// A refusal: nothing is changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// Stable code.
    pub code: &'static str,
    /// Why, without values.
    pub reason: &'static str,
    /// The first member concerned, if any.
    pub member: Option<MemberId>,
    /// Whether resolving again later may succeed without anything else changing.
    pub retryable: bool,
    /// The safe action.
    pub recovery: RecoveryAction,
}

/// What [`decide`] concluded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Physical truth proves this outcome.
    Resolve(Proposal),
    /// No safe outcome is proven.
    Refuse(Refusal),
}
