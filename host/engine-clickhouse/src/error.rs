//! The engine's error type and its stable `DPONE_CLICKHOUSE_CLUSTER_*` codes.
//!
//! Messages name members only by opaque member id and objects only by digest or UUID; they never
//! carry hostnames, credentials, SQL values, row data or local paths.

use dpone_policy_model::types::Reason;
use thiserror::Error;

use crate::contracts::CodecError;
use crate::ports::PortError;

/// Stable error codes of the engine (the admission policy owns the admission blocker codes).
pub mod codes {
    /// Admission blocked the operation; the reasons carry the policy's own codes.
    pub const ADMISSION_BLOCKED: &str = "DPONE_CLICKHOUSE_CLUSTER_ADMISSION_BLOCKED";
    /// The admission gate could not produce a decision.
    pub const ADMISSION_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_CLUSTER_ADMISSION_UNAVAILABLE";
    /// The inventory holds more members than the member-count budget allows.
    pub const MEMBER_BUDGET_EXCEEDED: &str = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_BUDGET_EXCEEDED";
    /// A member's content proof ran past the verification-time budget.
    pub const VERIFICATION_BUDGET_EXCEEDED: &str =
        "DPONE_CLICKHOUSE_CLUSTER_VERIFICATION_BUDGET_EXCEEDED";
    /// Internal mode: a replica did not hold the staged candidate's content within the bound
    /// (`SYSTEM SYNC REPLICA` timed out); retryable.
    pub const REPLICA_NOT_CONVERGED: &str = "DPONE_CLICKHOUSE_CLUSTER_REPLICA_NOT_CONVERGED";
    /// The admitted member set differs from the observed inventory.
    pub const ADMISSION_INCONSISTENT: &str = "DPONE_CLICKHOUSE_CLUSTER_ADMISSION_INCONSISTENT";
    /// A request field is malformed (table name, schema, bounds).
    pub const REQUEST_INVALID: &str = "DPONE_CLICKHOUSE_CLUSTER_REQUEST_INVALID";
    /// The inventory differs from the one bound in authority; the operation is fenced.
    pub const INVENTORY_DRIFT: &str = "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_DRIFT";
    /// A different unresolved operation holds the target.
    pub const OPERATION_FENCED: &str = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_FENCED";
    /// An unresolved V1 (internal) record holds the target.
    pub const V1_AUTHORITY_UNRESOLVED: &str = "DPONE_CLICKHOUSE_CLUSTER_V1_AUTHORITY_UNRESOLVED";
    /// This operation was aborted; a new scheduler invocation is needed.
    pub const OPERATION_ABORTED: &str = "DPONE_CLICKHOUSE_CLUSTER_OPERATION_ABORTED";
    /// A CAS read-back found another writer's value.
    pub const AUTHORITY_CONFLICT: &str = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CONFLICT";
    /// A CAS could not be confirmed by read-back (the store did not answer).
    pub const AUTHORITY_UNCONFIRMED: &str = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_UNCONFIRMED";
    /// The stored authority value does not decode under any supported schema.
    pub const AUTHORITY_CORRUPT: &str = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_CORRUPT";
    /// The stored authority record does not match the operation's bound identity.
    pub const AUTHORITY_MISMATCH: &str = "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_MISMATCH";
    /// The bound artifact cannot be reopened.
    pub const ARTIFACT_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNAVAILABLE";
    /// The artifact exceeds `max_source_bytes`.
    pub const ARTIFACT_TOO_LARGE: &str = "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_TOO_LARGE";
    /// The artifact failed revalidation or does not decode under the schema.
    pub const ARTIFACT_INVALID: &str = "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_INVALID";
    /// A column type is outside the canonical content-digest profile.
    pub const UNSUPPORTED_COLUMN_TYPE: &str = "DPONE_CLICKHOUSE_CLUSTER_UNSUPPORTED_COLUMN_TYPE";
    /// A typed row stream does not decode under its schema.
    pub const CONTENT_DECODE: &str = "DPONE_CLICKHOUSE_CLUSTER_CONTENT_DECODE";
    /// The canonical sort needed more memory than its budget.
    pub const DIGEST_BUDGET_EXCEEDED: &str = "DPONE_CLICKHOUSE_CLUSTER_DIGEST_BUDGET_EXCEEDED";
    /// The target exists on some members only.
    pub const TARGET_PRESENCE_MIXED: &str = "DPONE_CLICKHOUSE_CLUSTER_TARGET_PRESENCE_MIXED";
    /// Existing targets differ in schema or content across members; adoption refused.
    pub const TARGET_DIVERGENT: &str = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DIVERGENT";
    /// A target changed since its baseline was bound.
    pub const TARGET_DRIFT: &str = "DPONE_CLICKHOUSE_CLUSTER_TARGET_DRIFT";
    /// A candidate exists that this operation did not create.
    pub const CANDIDATE_FOREIGN: &str = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_FOREIGN";
    /// An owned candidate holds more or other rows than the artifact.
    pub const CANDIDATE_DIVERGENT: &str = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_DIVERGENT";
    /// A candidate bound as READY is missing or changed.
    pub const CANDIDATE_MISSING: &str = "DPONE_CLICKHOUSE_CLUSTER_CANDIDATE_MISSING";
    /// A member operation did not answer; the same operation may be retried.
    pub const MEMBER_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_UNAVAILABLE";
    /// A member's connection reaches a server that does not prove itself the configured
    /// replica: the connections registry maps this member to the wrong server.
    pub const MEMBER_IDENTITY_UNPROVEN: &str = crate::ports::MEMBER_IDENTITY_UNPROVEN;
    /// A member lacks what the operation's content proof needs (`formatRow` for the rowset
    /// proof); found at admission, before the authority is locked.
    pub const MEMBER_PROOF_UNSUPPORTED: &str = "DPONE_CLICKHOUSE_CLUSTER_MEMBER_PROOF_UNSUPPORTED";
    /// The members' KeeperMap authority facades name different Keeper paths: they do not share
    /// one authority; found at admission, before the authority is locked.
    pub const AUTHORITY_FACADE_DIVERGENT: &str =
        "DPONE_CLICKHOUSE_CLUSTER_AUTHORITY_FACADE_DIVERGENT";
    /// The cluster DDL transport did not answer; the same operation may be retried.
    pub const DDL_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_CLUSTER_DDL_UNAVAILABLE";
    /// The `system.clusters` inventory could not be read; the same operation may be retried.
    pub const INVENTORY_UNAVAILABLE: &str = "DPONE_CLICKHOUSE_CLUSTER_INVENTORY_UNAVAILABLE";
    /// ClickHouse refused a statement deterministically (bad type, engine or syntax, data that
    /// does not parse, access denied, a response that does not decode): never retried.
    pub const STATEMENT_REJECTED: &str = "DPONE_CLICKHOUSE_CLUSTER_STATEMENT_REJECTED";
    /// The declared engine is not one whose content the canonical digest can prove exactly.
    pub const ENGINE_CONTENT_UNVERIFIABLE: &str =
        "DPONE_CLICKHOUSE_CLUSTER_ENGINE_CONTENT_UNVERIFIABLE";
    /// Publication was authorised but no queue entry is bound to it; objects are retained.
    pub const PUBLICATION_EVIDENCE_MISSING: &str =
        "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_EVIDENCE_MISSING";
    /// The publication DDL finished with members on different generations.
    pub const PUBLICATION_TERMINAL_MIXED: &str =
        "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_TERMINAL_MIXED";
    /// A member holds a physical UUID that belongs to neither side of the bound pair.
    pub const PUBLICATION_FOREIGN_UUID: &str = "DPONE_CLICKHOUSE_CLUSTER_PUBLICATION_FOREIGN_UUID";
    /// Cleanup could not prove predecessor absence; objects are retained.
    pub const CLEANUP_UNRESOLVED: &str = "DPONE_CLICKHOUSE_CLUSTER_CLEANUP_UNRESOLVED";
    /// The run was interrupted (cancellation or process stop); resume the same operation.
    pub const INTERRUPTED: &str = "DPONE_CLICKHOUSE_CLUSTER_INTERRUPTED";
}

/// Every failure of the engine. Each variant has a stable [`EngineError::code`].
#[derive(Debug, Error)]
pub enum EngineError {
    /// Admission blocked the operation.
    #[error("admission blocked the operation ({} reason(s))", .0.len())]
    AdmissionBlocked(Vec<Reason>),
    /// The admission gate failed.
    #[error("the admission gate produced no decision")]
    AdmissionUnavailable(#[source] PortError),
    /// More members than the member-count budget.
    #[error("the inventory holds {members} members; the member-count budget allows {max}")]
    MemberBudgetExceeded {
        /// Members in the inventory.
        members: usize,
        /// The budget.
        max: usize,
    },
    /// A content proof ran past the verification-time budget.
    #[error(
        "member {member}: the content proof ran past the verification-time budget; nothing was decided on it"
    )]
    VerificationBudgetExceeded {
        /// Opaque member id prefix.
        member: String,
    },
    /// Internal mode: a replica did not converge within the bound.
    #[error("replica {member} did not converge on the staged candidate within the bound")]
    ReplicaNotConverged {
        /// Opaque member id prefix.
        member: String,
    },
    /// The admitted members differ from the inventory.
    #[error("the admitted member set differs from the observed inventory")]
    AdmissionInconsistent,
    /// A malformed request.
    #[error("invalid request: {0}")]
    RequestInvalid(&'static str),
    /// Inventory drift.
    #[error("the cluster inventory differs from the one bound to this operation")]
    InventoryDrift,
    /// Another operation holds the target.
    #[error("another unresolved operation ({other}) holds the target")]
    OperationFenced {
        /// The other operation's id prefix.
        other: String,
    },
    /// A V1 record is unresolved.
    #[error("an unresolved V1 authority record holds the target")]
    V1Unresolved,
    /// This operation was aborted.
    #[error("this operation was aborted; a new scheduler invocation is required")]
    OperationAborted,
    /// Another writer won a CAS.
    #[error("authority compare-and-set lost to another writer at {phase}")]
    AuthorityConflict {
        /// The phase the CAS tried to write.
        phase: &'static str,
    },
    /// A CAS could not be confirmed.
    #[error("authority compare-and-set at {phase} could not be confirmed by read-back")]
    AuthorityUnconfirmed {
        /// The phase the CAS tried to write.
        phase: &'static str,
        /// The store's failure.
        #[source]
        source: PortError,
    },
    /// Undecodable authority value.
    #[error("the authority record does not decode")]
    AuthorityCorrupt(#[source] CodecError),
    /// Authority mismatch.
    #[error("the authority record does not match this operation: {0}")]
    AuthorityMismatch(&'static str),
    /// The artifact cannot be reopened.
    #[error("the bound artifact cannot be reopened")]
    ArtifactUnavailable(#[source] PortError),
    /// The artifact is too large.
    #[error("the artifact exceeds max_source_bytes {max}")]
    ArtifactTooLarge {
        /// Bound.
        max: u64,
    },
    /// Invalid artifact.
    #[error("the artifact is invalid: {0}")]
    ArtifactInvalid(&'static str),
    /// Unsupported column type.
    #[error("column {column} has a type outside the canonical digest profile")]
    UnsupportedColumnType {
        /// Column position (0-based); names are not echoed.
        column: usize,
    },
    /// Row stream decode failure.
    #[error("a typed row stream does not decode: {0}")]
    ContentDecode(&'static str),
    /// Sort budget exceeded.
    #[error("the canonical sort needs more than {budget} bytes")]
    DigestBudgetExceeded {
        /// Bound in bytes.
        budget: u64,
    },
    /// Target presence differs across members.
    #[error("the target exists on some members only")]
    TargetPresenceMixed,
    /// Existing targets diverge.
    #[error("existing targets differ across members ({member})")]
    TargetDivergent {
        /// First divergent member id.
        member: String,
    },
    /// Target changed since baseline.
    #[error("member {member}: the target changed since its baseline was bound")]
    TargetDrift {
        /// Member id.
        member: String,
    },
    /// Foreign candidate.
    #[error("member {member}: a candidate exists that this operation did not create")]
    CandidateForeign {
        /// Member id.
        member: String,
    },
    /// Divergent owned candidate.
    #[error("member {member}: the owned candidate holds more or other rows than the artifact")]
    CandidateDivergent {
        /// Member id.
        member: String,
    },
    /// A READY candidate is missing or changed.
    #[error("member {member}: a READY candidate is missing or changed")]
    CandidateMissing {
        /// Member id.
        member: String,
    },
    /// A member did not answer.
    #[error("member {member}: {step} did not complete")]
    MemberUnavailable {
        /// Member id.
        member: String,
        /// Step name.
        step: &'static str,
        /// The port's failure.
        #[source]
        source: PortError,
    },
    /// A member URL reaches a server that is not the configured replica.
    #[error("member {member}: its connection does not reach the configured replica")]
    MemberIdentityUnproven {
        /// Member id.
        member: String,
    },
    /// A member cannot compute the operation's content proof.
    #[error("member {member} cannot compute the {proof} content proof (it lacks {function})")]
    MemberProofUnsupported {
        /// Member id prefix.
        member: String,
        /// The proof.
        proof: &'static str,
        /// The missing function.
        function: &'static str,
    },
    /// The members' authority facades do not share one Keeper path.
    #[error(
        "the KeeperMap authority facade of member {member} names another Keeper path than the other members'"
    )]
    AuthorityFacadeDivergent {
        /// Member id prefix of the first member that differs.
        member: String,
    },
    /// Cluster DDL transport failure.
    #[error("cluster DDL observation did not complete")]
    DdlUnavailable(#[source] PortError),
    /// The inventory read did not complete.
    #[error("the cluster inventory could not be read")]
    InventoryUnavailable(#[source] PortError),
    /// A statement was refused deterministically; retrying would fail the same way.
    #[error("{scope}: {step} was rejected{}", if *.aborted { "; the operation was aborted before publication after its exact candidates were removed" } else { "" })]
    StatementRejected {
        /// `member <id>` or `coordinator`.
        scope: String,
        /// Step name.
        step: &'static str,
        /// Whether the operation was moved to ABORTED (staging only, after exact cleanup).
        aborted: bool,
        /// The port's failure (its class names the refusal).
        #[source]
        source: PortError,
    },
    /// The engine cannot prove exact content for candidates of the declared engine.
    #[error(
        "the table engine is not one whose content the canonical digest can prove (allowed: {allowed})"
    )]
    EngineContentUnverifiable {
        /// The allow-list, comma-separated.
        allowed: String,
    },
    /// Publication authorised without queue evidence.
    #[error(
        "publication was authorised but no queue entry carries its token; all objects are retained"
    )]
    PublicationEvidenceMissing,
    /// Terminal mixed publication.
    #[error(
        "the publication DDL finished with members on different generations; all objects are retained"
    )]
    PublicationTerminalMixed,
    /// Foreign UUID during publication.
    #[error("member {member}: a physical UUID outside the bound pair; all objects are retained")]
    PublicationForeignUuid {
        /// Member id.
        member: String,
    },
    /// Cleanup could not be resolved.
    #[error("cleanup could not prove predecessor absence; objects are retained")]
    CleanupUnresolved,
    /// The run was interrupted.
    #[error("the run was interrupted at {step}; resume the same operation")]
    Interrupted {
        /// Step name.
        step: &'static str,
    },
}

impl EngineError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        use EngineError as E;
        match self {
            E::AdmissionBlocked(_) => codes::ADMISSION_BLOCKED,
            E::AdmissionUnavailable(_) => codes::ADMISSION_UNAVAILABLE,
            E::ReplicaNotConverged { .. } => codes::REPLICA_NOT_CONVERGED,
            E::MemberBudgetExceeded { .. } => codes::MEMBER_BUDGET_EXCEEDED,
            E::VerificationBudgetExceeded { .. } => codes::VERIFICATION_BUDGET_EXCEEDED,
            E::AdmissionInconsistent => codes::ADMISSION_INCONSISTENT,
            E::RequestInvalid(_) => codes::REQUEST_INVALID,
            E::InventoryDrift => codes::INVENTORY_DRIFT,
            E::OperationFenced { .. } => codes::OPERATION_FENCED,
            E::V1Unresolved => codes::V1_AUTHORITY_UNRESOLVED,
            E::OperationAborted => codes::OPERATION_ABORTED,
            E::AuthorityConflict { .. } => codes::AUTHORITY_CONFLICT,
            E::AuthorityUnconfirmed { .. } => codes::AUTHORITY_UNCONFIRMED,
            E::AuthorityCorrupt(_) => codes::AUTHORITY_CORRUPT,
            E::AuthorityMismatch(_) => codes::AUTHORITY_MISMATCH,
            E::ArtifactUnavailable(_) => codes::ARTIFACT_UNAVAILABLE,
            E::ArtifactTooLarge { .. } => codes::ARTIFACT_TOO_LARGE,
            E::ArtifactInvalid(_) => codes::ARTIFACT_INVALID,
            E::UnsupportedColumnType { .. } => codes::UNSUPPORTED_COLUMN_TYPE,
            E::ContentDecode(_) => codes::CONTENT_DECODE,
            E::DigestBudgetExceeded { .. } => codes::DIGEST_BUDGET_EXCEEDED,
            E::TargetPresenceMixed => codes::TARGET_PRESENCE_MIXED,
            E::TargetDivergent { .. } => codes::TARGET_DIVERGENT,
            E::TargetDrift { .. } => codes::TARGET_DRIFT,
            E::CandidateForeign { .. } => codes::CANDIDATE_FOREIGN,
            E::CandidateDivergent { .. } => codes::CANDIDATE_DIVERGENT,
            E::CandidateMissing { .. } => codes::CANDIDATE_MISSING,
            E::MemberUnavailable { .. } => codes::MEMBER_UNAVAILABLE,
            E::MemberIdentityUnproven { .. } => codes::MEMBER_IDENTITY_UNPROVEN,
            E::MemberProofUnsupported { .. } => codes::MEMBER_PROOF_UNSUPPORTED,
            E::AuthorityFacadeDivergent { .. } => codes::AUTHORITY_FACADE_DIVERGENT,
            E::DdlUnavailable(_) => codes::DDL_UNAVAILABLE,
            E::InventoryUnavailable(_) => codes::INVENTORY_UNAVAILABLE,
            E::StatementRejected { .. } => codes::STATEMENT_REJECTED,
            E::EngineContentUnverifiable { .. } => codes::ENGINE_CONTENT_UNVERIFIABLE,
            E::PublicationEvidenceMissing => codes::PUBLICATION_EVIDENCE_MISSING,
            E::PublicationTerminalMixed => codes::PUBLICATION_TERMINAL_MIXED,
            E::PublicationForeignUuid { .. } => codes::PUBLICATION_FOREIGN_UUID,
            E::CleanupUnresolved => codes::CLEANUP_UNRESOLVED,
            E::Interrupted { .. } => codes::INTERRUPTED,
        }
    }

    /// Whether a same-operation retry may make progress without an operator.
    pub fn is_retryable(&self) -> bool {
        use EngineError as E;
        matches!(
            self,
            E::AdmissionUnavailable(_)
                | E::AuthorityUnconfirmed { .. }
                | E::MemberUnavailable { .. }
                | E::ReplicaNotConverged { .. }
                | E::DdlUnavailable(_)
                | E::InventoryUnavailable(_)
                | E::Interrupted { .. }
                | E::InventoryDrift
                | E::OperationFenced { .. }
        )
    }

    /// The safe recovery action for this error.
    pub fn recovery(&self) -> crate::RecoveryAction {
        use crate::RecoveryAction as R;
        use EngineError as E;
        match self {
            E::AdmissionBlocked(_)
            | E::RequestInvalid(_)
            | E::UnsupportedColumnType { .. }
            | E::EngineContentUnverifiable { .. }
            | E::MemberIdentityUnproven { .. }
            | E::MemberProofUnsupported { .. }
            | E::AuthorityFacadeDivergent { .. }
            | E::MemberBudgetExceeded { .. }
            | E::VerificationBudgetExceeded { .. }
            | E::ArtifactTooLarge { .. } => R::FixManifest,
            E::StatementRejected { aborted: true, .. } => R::StartNewOperation,
            E::InventoryDrift => R::RestoreInventoryThenResume,
            E::OperationFenced { .. } => R::WaitForOwningOperation,
            E::V1Unresolved => R::ResolveV1First,
            E::OperationAborted => R::StartNewOperation,
            E::AdmissionUnavailable(_)
            | E::AuthorityUnconfirmed { .. }
            | E::MemberUnavailable { .. }
            | E::ReplicaNotConverged { .. }
            | E::DdlUnavailable(_)
            | E::InventoryUnavailable(_)
            | E::Interrupted { .. } => R::ResumeSameOperation,
            _ => R::HoldForOperator,
        }
    }
}
