//! Nonproduction composition authority scope (`dpone:policy/scope`).

use crate::types::{Reason, UnixSeconds};
use alloc::string::String;
use alloc::vec::Vec;
use serde::{Deserialize, Serialize};

/// Resource ceilings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Distinct workloads.
    pub max_workloads: u32,
    /// Scheduler attempts.
    pub max_attempts: u32,
    /// Cumulative source rows.
    pub max_source_rows: u64,
    /// Cumulative source bytes.
    pub max_source_bytes: u64,
    /// Seconds per attempt.
    pub max_attempt_seconds: u32,
}

/// A database or service that takes part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Participant {
    /// Enrolled participant id.
    pub participant_id: String,
    /// `read` or `write`.
    pub access: String,
    /// `non_production` for anything a grant may name.
    pub trust_tier: String,
}

/// A physical subject and the participant that holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    /// Participant holding the subject.
    pub participant_id: String,
    /// Canonical relation scope.
    pub relation: String,
}

/// Mandatory subjects of a qualification grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QualificationClaims {
    /// One-time qualification run.
    pub run_id: String,
    /// Fixture plan digest.
    pub fixture_plan_digest: String,
    /// Qualification plan digest.
    pub qualification_plan_digest: String,
}

/// Mandatory subjects of an execution grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionClaims {
    /// Qualified set digest.
    pub qualified_set_digest: String,
    /// Native release digest.
    pub native_release_digest: String,
    /// Parent release digest.
    pub parent_release_digest: String,
    /// Sealed deployment digest.
    pub deployment_digest: String,
    /// Activation id.
    pub activation_id: String,
    /// Exact workload and pack membership.
    pub workload_membership: Vec<String>,
}

/// The closed phase variants of a grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseClaims {
    /// Qualification grant.
    Qualification(QualificationClaims),
    /// Execution grant.
    Execution(ExecutionClaims),
}

/// The external authority policy document.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorityPolicy {
    /// Digest of the pinned policy document.
    pub policy_digest: String,
    /// Environment the policy governs.
    pub environment_id: String,
    /// Independently enrolled participants.
    pub enrolled_participants: Vec<Participant>,
    /// Current revocation epoch.
    pub current_revocation_epoch: u64,
    /// Policy ceilings.
    pub ceilings: Limits,
}

/// A verified grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grant {
    /// Grant id.
    pub grant_id: String,
    /// Must be `synthetic_composition_validation`.
    pub purpose: String,
    /// Must be `non_production`.
    pub trust_tier: String,
    /// Environment the grant is for.
    pub environment_id: String,
    /// Campaign the grant is for.
    pub campaign_id: String,
    /// Digest of the policy the grant was issued under.
    pub policy_digest: String,
    /// Start of validity.
    pub not_before: UnixSeconds,
    /// End of validity (exclusive).
    pub not_after: UnixSeconds,
    /// Revocation epoch the grant was issued in.
    pub revocation_epoch: u64,
    /// Participants the grant covers.
    pub participants: Vec<Participant>,
    /// Subjects the grant covers.
    pub subjects: Vec<Subject>,
    /// Grant ceilings.
    pub limits: Limits,
    /// Phase-specific claims.
    pub claims: PhaseClaims,
}

/// Phase of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Qualification.
    Qualification,
    /// Execution.
    Execution,
}

/// What the caller asks to do now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadRequest {
    /// Requested phase.
    pub phase: Phase,
    /// Workload id.
    pub workload_id: String,
    /// Activation of an execution request.
    pub activation_id: Option<String>,
    /// Participants the workload touches.
    pub participants: Vec<Participant>,
    /// Subjects the workload touches.
    pub subjects: Vec<Subject>,
    /// Workload ceilings.
    pub limits: Limits,
    /// Workloads to reserve.
    pub reserve_workloads: u32,
    /// Attempts to reserve.
    pub reserve_attempts: u32,
    /// Source rows to reserve.
    pub reserve_source_rows: u64,
    /// Source bytes to reserve.
    pub reserve_source_bytes: u64,
}

/// Consumption of the environment/campaign/phase pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolUsage {
    /// Pool environment.
    pub environment_id: String,
    /// Pool campaign.
    pub campaign_id: String,
    /// Pool phase.
    pub phase: Phase,
    /// Measured workloads.
    pub workloads: u32,
    /// Measured attempts.
    pub attempts: u32,
    /// Measured source rows.
    pub source_rows: u64,
    /// Measured source bytes.
    pub source_bytes: u64,
    /// Unresolved reserved workloads.
    pub reserved_workloads: u32,
    /// Unresolved reserved attempts.
    pub reserved_attempts: u32,
    /// Unresolved reserved source rows.
    pub reserved_source_rows: u64,
    /// Unresolved reserved source bytes.
    pub reserved_source_bytes: u64,
}

/// Facts for one scope decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScopeFacts {
    /// The host's clock, passed in as data.
    pub now: UnixSeconds,
    /// Pinned authority policy.
    pub policy: AuthorityPolicy,
    /// Verified grant.
    pub grant: Grant,
    /// The request.
    pub request: WorkloadRequest,
    /// Pool consumption.
    pub pool: PoolUsage,
}

/// A successful admission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Admitted {
    /// Minimum of policy, grant and workload limits.
    pub effective_limits: Limits,
    /// Why the request is admitted.
    pub reason: Reason,
}

/// The scope policy's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeDecision {
    /// Admitted with effective limits.
    Admit(Admitted),
    /// Refused.
    Deny(Reason),
}
