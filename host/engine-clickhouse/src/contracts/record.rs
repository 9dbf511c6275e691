//! Versioned authority and receipt records of the three publication modes.
//!
//! One record shape serves every mode; the schema version names the mode:
//! `dpone.clickhouse.cluster-external-full-refresh.v1` (external mode, spec 000),
//! `dpone.clickhouse.cluster-full-refresh.v1` (V1: internal mode, `Replicated*MergeTree`) and
//! `dpone.clickhouse.local-full-refresh.v1` (one server, one member). The V1 field set is decided
//! from the spec's list of what a retained target slot stores and is written down in
//! `docs/clickhouse-internal-publication.md` ("V1 records"). The two cluster modes share one
//! target-key slot (a local target's key has an empty cluster name, so it is its own);
//! [`super::codec::decode_slot`] tells them apart by `schema_version` and checks that
//! `replication_mode` agrees. Every record and receipt rejects unknown fields. Records carry
//! opaque member ids, digests, UUIDs, tokens and stable error codes only: never hostnames,
//! credentials, SQL values, row data or local paths.

use serde::{Deserialize, Serialize};

use super::hash::{Digest, Token, Uuid};
use super::identity::{DdlKind, GenerationId, MemberId, OperationId, TargetKey};

/// Schema version of the external authority record.
pub const EXTERNAL_AUTHORITY_SCHEMA: &str = "dpone.clickhouse.cluster-external-full-refresh.v1";
/// Schema version of the external commit receipt.
pub const EXTERNAL_RECEIPT_SCHEMA: &str =
    "dpone.clickhouse.cluster-external-full-refresh-receipt.v1";
/// Schema version of the V1 (internal mode) authority record.
pub const V1_AUTHORITY_SCHEMA: &str = "dpone.clickhouse.cluster-full-refresh.v1";
/// Schema version of the V1 (internal mode) commit receipt.
pub const V1_RECEIPT_SCHEMA: &str = "dpone.clickhouse.cluster-full-refresh-receipt.v1";
/// Schema version of the local (one server) authority record.
pub const LOCAL_AUTHORITY_SCHEMA: &str = "dpone.clickhouse.local-full-refresh.v1";
/// Schema version of the local (one server) commit receipt.
pub const LOCAL_RECEIPT_SCHEMA: &str = "dpone.clickhouse.local-full-refresh-receipt.v1";

/// The replication mode a record (and the run that writes it) belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PublicationMode {
    /// `Replicated*MergeTree` members (`internal_replication = true`): the artifact is loaded
    /// through one replica and ClickHouse replicates it; V1 records.
    Internal,
    /// Independent non-replicated members (`internal_replication = false`): the artifact is
    /// loaded into every member; external records.
    External,
    /// One server, no cluster: the artifact is loaded into its candidate and published by a
    /// local `EXCHANGE`/`RENAME`; local records (one member).
    Local,
}

impl PublicationMode {
    /// Every mode.
    pub const ALL: [Self; 3] = [Self::Internal, Self::External, Self::Local];

    /// How many members a record of this mode binds at least (exactly one for `Local`).
    pub fn min_members(self) -> usize {
        match self {
            Self::Local => 1,
            Self::Internal | Self::External => 2,
        }
    }

    /// The record's `replication_mode` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Internal => "internal",
            Self::External => "external",
            Self::Local => "local",
        }
    }

    /// The authority record's schema version.
    pub fn authority_schema(self) -> &'static str {
        match self {
            Self::Internal => V1_AUTHORITY_SCHEMA,
            Self::External => EXTERNAL_AUTHORITY_SCHEMA,
            Self::Local => LOCAL_AUTHORITY_SCHEMA,
        }
    }

    /// The commit receipt's schema version.
    pub fn receipt_schema(self) -> &'static str {
        match self {
            Self::Internal => V1_RECEIPT_SCHEMA,
            Self::External => EXTERNAL_RECEIPT_SCHEMA,
            Self::Local => LOCAL_RECEIPT_SCHEMA,
        }
    }

    /// The mode whose authority record has `schema`.
    pub fn of_authority_schema(schema: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.authority_schema() == schema)
    }

    /// The mode whose receipt has `schema`.
    pub fn of_receipt_schema(schema: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.receipt_schema() == schema)
    }
}

/// The phase machine (both modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Phase {
    /// Target fenced; nothing mutated.
    Locked,
    /// Artifact, generation and baseline bound; members staging.
    Staging,
    /// Every member READY.
    Staged,
    /// One correlated publication DDL authorised.
    PublicationDispatching,
    /// Every member holds the desired generation; receipt stored.
    Committed,
    /// One correlated cleanup DDL authorised.
    CleanupDispatching,
    /// Predecessors absent everywhere.
    Completed,
    /// Terminal, never success; reusable by a new operation.
    Aborted,
}

impl Phase {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Locked => "LOCKED",
            Self::Staging => "STAGING",
            Self::Staged => "STAGED",
            Self::PublicationDispatching => "PUBLICATION_DISPATCHING",
            Self::Committed => "COMMITTED",
            Self::CleanupDispatching => "CLEANUP_DISPATCHING",
            Self::Completed => "COMPLETED",
            Self::Aborted => "ABORTED",
        }
    }

    /// `COMPLETED` or `ABORTED`: a new operation may take the slot.
    pub fn is_resolved(self) -> bool {
        matches!(self, Self::Completed | Self::Aborted)
    }

    /// Whether any member may have entered publication.
    pub fn publication_started(self) -> bool {
        matches!(
            self,
            Self::PublicationDispatching
                | Self::Committed
                | Self::CleanupDispatching
                | Self::Completed
        )
    }

    /// The phases a record in `self` may move to.
    pub fn may_move_to(self, next: Phase) -> bool {
        use Phase as P;
        matches!(
            (self, next),
            (P::Locked, P::Staging)
                | (P::Locked, P::Aborted)
                | (P::Staging, P::Staging)
                | (P::Staging, P::Staged)
                | (P::Staging, P::Aborted)
                | (P::Staged, P::PublicationDispatching)
                | (P::PublicationDispatching, P::PublicationDispatching)
                | (P::PublicationDispatching, P::Committed)
                | (P::Committed, P::CleanupDispatching)
                | (P::Committed, P::Completed)
                | (P::CleanupDispatching, P::CleanupDispatching)
                | (P::CleanupDispatching, P::Completed)
                | (P::Completed, P::Locked)
                | (P::Aborted, P::Locked)
        )
    }
}

/// The byte-receipted artifact identity (no path, no location).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArtifactIdentity {
    /// SHA-256 of the artifact bytes.
    pub sha256: Digest,
    /// Size in bytes.
    pub byte_size: u64,
    /// Rows in the artifact.
    pub row_count: u64,
    /// Schema digest of the artifact's wire schema.
    pub schema_digest: Digest,
}

/// One physical table observed on one member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PhysicalTable {
    /// Physical table UUID.
    pub uuid: Uuid,
    /// Row count.
    pub row_count: u64,
    /// Canonical content digest.
    pub content_digest: Digest,
}

/// Per-member staging state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageState {
    /// Nothing done on this member.
    Pending,
    /// A candidate UUID is reserved; the candidate may or may not exist.
    Intent,
    /// The candidate exists with the bound UUID; a load may have started.
    Created,
    /// The candidate holds exactly the desired generation.
    Ready,
}

/// Per-member publication state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberPublication {
    /// Not yet observed published.
    Pending,
    /// The target holds the candidate UUID.
    Published,
}

/// Per-member cleanup state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberCleanup {
    /// Predecessor still to be removed.
    Pending,
    /// No predecessor (absent target at baseline).
    NotRequired,
    /// Predecessor absence proven.
    Absent,
}

/// One member of the ordered member map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberRecord {
    /// Opaque member id.
    pub member_id: MemberId,
    /// Shard number.
    pub shard_num: u32,
    /// Replica number.
    pub replica_num: u32,
    /// Baseline target on this member (none when the target was absent).
    pub predecessor: Option<PhysicalTable>,
    /// Staging state.
    pub stage: StageState,
    /// Owned candidate UUID (intent or bound).
    pub candidate_uuid: Option<Uuid>,
    /// Content digest observed on the READY candidate.
    pub candidate_content_digest: Option<Digest>,
    /// How many times the owned candidate was dropped and rebuilt.
    pub rebuilds: u32,
    /// Publication state.
    pub publication: MemberPublication,
    /// Cleanup state.
    pub cleanup: MemberCleanup,
}

/// A bound, correlated cluster DDL.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DdlBinding {
    /// Statement kind.
    pub kind: DdlKind,
    /// Dispatch epoch at authorisation.
    pub epoch: u64,
    /// Random correlation token.
    pub token: Token,
    /// Normalized query digest.
    pub query_digest: Digest,
    /// The queue entry, once observed.
    pub queue_entry: Option<String>,
}

/// The admission decision's evidence, bound at lock time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionEvidence {
    /// SHA-256 of the admission component that decided.
    pub component_sha256: String,
    /// SHA-256 of the canonical runtime-admission input.
    pub input_sha256: String,
}

/// The resolved record a new operation replaced (versioned next operation or V1 migration).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreviousOperation {
    /// Schema version of the replaced record.
    pub schema_version: String,
    /// Its operation id.
    pub operation_id: String,
    /// Its terminal phase.
    pub phase: String,
    /// The Keeper version it had.
    pub keeper_version: u64,
}

/// Which content proof every content digest of a record (and of its receipt) is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContentProof {
    /// The canonical content digest (`dpone.clickhouse.content.v1`, [`crate::canonical::digest`])
    /// of the whole table read back by the host. Every record and receipt written before proofs
    /// were versioned is this one (the field is absent there).
    #[default]
    Canonical,
    /// The rowset digest (`dpone.clickhouse.rowset.v1`, [`crate::canonical::rowset`]), which each
    /// member computes over its own table and returns as 256 bucket digests.
    Rowset,
}

impl ContentProof {
    /// Every proof.
    pub const ALL: [Self; 2] = [Self::Canonical, Self::Rowset];

    /// The proof's name, as records, receipts and manifests write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Canonical => "canonical",
            Self::Rowset => "rowset",
        }
    }

    /// True for [`Self::Canonical`] (the field is then omitted, so such records encode exactly
    /// as before).
    pub fn is_canonical(&self) -> bool {
        *self == Self::Canonical
    }
}

/// The authority record of one operation: external (`dpone.clickhouse.cluster-external-full-refresh.v1`)
/// or V1 internal (`dpone.clickhouse.cluster-full-refresh.v1`), the same fields. In internal
/// mode every member's `candidate_uuid` is the one shared replicated candidate's UUID (the
/// replicas of one `Replicated*MergeTree` table), loaded through the first member in member-id
/// order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicationRecord {
    /// [`EXTERNAL_AUTHORITY_SCHEMA`] or [`V1_AUTHORITY_SCHEMA`].
    pub schema_version: String,
    /// `external` or `internal`, as the schema version says.
    pub replication_mode: String,
    /// Slot key.
    pub target_key: TargetKey,
    /// Scheduler-stable operation id.
    pub operation_id: OperationId,
    /// Random fence token chosen when the operation locked the slot.
    pub fence_token: Token,
    /// Phase.
    pub phase: Phase,
    /// Incremented by every dispatch authorisation.
    pub dispatch_epoch: u64,
    /// The Keeper version this value is written at (read-back proof).
    pub keeper_version: u64,
    /// Inventory digest bound at lock.
    pub inventory_digest: Digest,
    /// Normalized plan digest.
    pub plan_digest: Digest,
    /// Runtime admission evidence.
    pub admission: Option<AdmissionEvidence>,
    /// The resolved record this operation replaced.
    pub previous: Option<PreviousOperation>,
    /// Artifact identity (from STAGING).
    pub artifact: Option<ArtifactIdentity>,
    /// Which proof every content digest in this record is; omitted when canonical.
    #[serde(default, skip_serializing_if = "ContentProof::is_canonical")]
    pub content_proof: ContentProof,
    /// Content digest of the artifact (from STAGING), of the record's [`ContentProof`].
    pub artifact_content_digest: Option<Digest>,
    /// Logical generation (from STAGING).
    pub generation_id: Option<GenerationId>,
    /// Whether a target existed at baseline (from STAGING).
    pub target_present: Option<bool>,
    /// Members in stable member-id order.
    pub members: Vec<MemberRecord>,
    /// Publication binding (from PUBLICATION_DISPATCHING).
    pub publication: Option<DdlBinding>,
    /// Cleanup binding (from CLEANUP_DISPATCHING).
    pub cleanup: Option<DdlBinding>,
    /// Commit receipt (from COMMITTED).
    pub receipt: Option<PublicationReceipt>,
    /// Stable, redacted error class of the last fail-closed stop.
    pub error_class: Option<String>,
    /// Unix seconds when this operation locked the slot.
    pub created_at: i64,
    /// Unix seconds of this write.
    pub updated_at: i64,
    /// Operator resolutions recorded on this operation (`dpone-host resolve`), oldest first.
    /// Omitted when empty, so records without one encode exactly as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolutions: Vec<super::resolution::ResolutionEvidence>,
}

impl PublicationRecord {
    /// The record's mode, from its schema version.
    pub fn mode(&self) -> Option<PublicationMode> {
        PublicationMode::of_authority_schema(&self.schema_version)
    }

    /// The member record of `id`.
    pub fn member(&self, id: &MemberId) -> Option<&MemberRecord> {
        self.members.iter().find(|m| &m.member_id == id)
    }

    /// The mutable member record of `id`.
    pub fn member_mut(&mut self, id: &MemberId) -> Option<&mut MemberRecord> {
        self.members.iter_mut().find(|m| &m.member_id == id)
    }
}

/// One member of a commit receipt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptMember {
    /// Opaque member id.
    pub member_id: MemberId,
    /// Physical UUID of the published target.
    pub target_uuid: Uuid,
    /// Canonical content digest of the published target.
    pub content_digest: Digest,
    /// Row count of the published target.
    pub row_count: u64,
    /// UUID of the predecessor (none when the target was absent).
    pub predecessor_uuid: Option<Uuid>,
}

/// The commit receipt: external (`dpone.clickhouse.cluster-external-full-refresh-receipt.v1`)
/// or V1 internal (`dpone.clickhouse.cluster-full-refresh-receipt.v1`), the same fields.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublicationReceipt {
    /// [`EXTERNAL_RECEIPT_SCHEMA`] or [`V1_RECEIPT_SCHEMA`].
    pub schema_version: String,
    /// Slot key.
    pub target_key: TargetKey,
    /// Operation id.
    pub operation_id: OperationId,
    /// Published generation.
    pub generation_id: GenerationId,
    /// Inventory digest.
    pub inventory_digest: Digest,
    /// Normalized plan digest.
    pub plan_digest: Digest,
    /// Artifact identity.
    pub artifact: ArtifactIdentity,
    /// Which proof the content digests are; omitted when canonical.
    #[serde(default, skip_serializing_if = "ContentProof::is_canonical")]
    pub content_proof: ContentProof,
    /// Content digest every member holds, of the receipt's [`ContentProof`].
    pub content_digest: Digest,
    /// The publication DDL binding.
    pub publication: DdlBinding,
    /// Every member, in member-id order.
    pub members: Vec<ReceiptMember>,
    /// Unix seconds of the commit.
    pub committed_at: i64,
}

/// What a target-key slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthoritySlot {
    /// A V1 (internal mode) record.
    V1(Box<PublicationRecord>),
    /// An external record.
    External(Box<PublicationRecord>),
    /// A local (one server) record.
    Local(Box<PublicationRecord>),
}

impl AuthoritySlot {
    /// The record, whatever its mode.
    pub fn record(&self) -> &PublicationRecord {
        match self {
            Self::V1(r) | Self::External(r) | Self::Local(r) => r,
        }
    }

    /// The record, whatever its mode.
    pub fn into_record(self) -> PublicationRecord {
        match self {
            Self::V1(r) | Self::External(r) | Self::Local(r) => *r,
        }
    }

    /// The slot's mode.
    pub fn mode(&self) -> PublicationMode {
        match self {
            Self::V1(_) => PublicationMode::Internal,
            Self::External(_) => PublicationMode::External,
            Self::Local(_) => PublicationMode::Local,
        }
    }
}

/// A decoded receipt of either version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Receipt {
    /// V1 (internal mode) receipt.
    V1(Box<PublicationReceipt>),
    /// External receipt.
    External(Box<PublicationReceipt>),
    /// Local (one server) receipt.
    Local(Box<PublicationReceipt>),
}
