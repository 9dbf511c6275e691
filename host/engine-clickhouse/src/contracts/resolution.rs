//! Operator resolutions recorded in the external authority record.
//!
//! A resolution is the one sanctioned way out of a fail-closed hold: `dpone-host resolve`
//! re-observes every member and, only when physical truth proves a safe outcome, records the
//! transition by a version-checked CAS. Each one appends a [`ResolutionEvidence`] to the record:
//! what was observed (opaque member ids, physical UUIDs, canonical content digests, queue and
//! artifact facts), never endpoints, credentials or row values. The authority row is never
//! deleted.

use serde::{Deserialize, Serialize};

use super::hash::{Digest, Uuid};
use super::identity::MemberId;
use super::record::{DdlBinding, Phase};

/// Most resolutions one record may carry (bounds the record's size).
pub const MAX_RESOLUTIONS: usize = 16;

/// Which transition an operator resolution recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResolutionKind {
    /// PUBLICATION_DISPATCHING → STAGED: the bound DDL provably never changed any member; the
    /// next `run` authorises a new dispatch under a new epoch and token.
    ReturnToStaged,
    /// PUBLICATION_DISPATCHING → COMMITTED: every member holds the desired generation although
    /// the queue entry is gone.
    Commit,
    /// CLEANUP_DISPATCHING → COMPLETED: every exact predecessor is absent (after exact,
    /// UUID-verified member-local drops of any that remained).
    Complete,
    /// LOCKED/STAGING → ABORTED: publication never started, the bound artifact cannot be
    /// replayed here, every exact owned candidate was dropped and its absence proven.
    Abort,
}

impl ResolutionKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReturnToStaged => "return_to_staged",
            Self::Commit => "commit",
            Self::Complete => "complete",
            Self::Abort => "abort",
        }
    }
}

/// What the DDL queue showed for the bound correlation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueEvidence {
    /// No DDL is bound in this phase.
    NotBound,
    /// No queue entry carries the bound correlation (never enqueued, or purged by retention).
    Absent,
    /// The one bound entry finished with a failure on every member.
    TerminalFailed,
    /// The one bound entry is terminal (finished or failed) on every member.
    Terminal,
}

/// What this worker's artifact store holds for the bound artifact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactFact {
    /// No artifact is bound (LOCKED) or the phase does not need it.
    NotBound,
    /// Present and revalidated.
    Present,
    /// The store has no such artifact.
    Missing,
    /// The stored bytes no longer match the bound identity.
    Tampered,
    /// The store did not answer; nothing can be concluded.
    Unavailable,
}

/// One member as the resolution observed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolvedMember {
    /// Opaque member id.
    pub member_id: MemberId,
    /// Physical UUID under the target name, if any.
    pub target_uuid: Option<Uuid>,
    /// Canonical content digest of the target, when it holds this operation's candidate.
    pub target_content_digest: Option<Digest>,
    /// Physical UUID under the candidate name, if any.
    pub candidate_uuid: Option<Uuid>,
    /// Canonical content digest of the candidate, when it is this operation's candidate.
    pub candidate_content_digest: Option<Digest>,
    /// The exact UUID this resolution dropped on this member (absence proven afterwards).
    pub dropped_uuid: Option<Uuid>,
}

/// One recorded operator resolution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolutionEvidence {
    /// The transition.
    pub kind: ResolutionKind,
    /// Phase before.
    pub from_phase: Phase,
    /// Phase after.
    pub to_phase: Phase,
    /// Keeper version the resolution observed and replaced.
    pub from_keeper_version: u64,
    /// Dispatch epoch at resolution (the next dispatch uses a higher one).
    pub dispatch_epoch: u64,
    /// The DDL binding this resolution closed without a queue entry (publication or cleanup).
    pub closed_binding: Option<DdlBinding>,
    /// What the queue showed for the bound correlation.
    pub queue: QueueEvidence,
    /// What the artifact store held.
    pub artifact: ArtifactFact,
    /// Every member, in member-id order.
    pub members: Vec<ResolvedMember>,
    /// Unix seconds of the resolution.
    pub resolved_at: i64,
}
