//! The shipped scope policy: the nonproduction composition authority (spec 004, "Scope, phases
//! and limits" and "Identity and execution algorithm").
//!
//! [`decide`] is the whole policy as plain Rust; it compiles natively (for decision-table parity
//! tests) and, on `wasm32`, is exported as the `dpone:policy/scope-policy` world by `component`.
//!
//! The policy is pure, deterministic and total: checks run in one fixed order and the first
//! failure denies with a stable `DPONE_SCOPE_*` code. Messages are fixed texts and never echo
//! input. The rules, their order and the choices made where the spec is silent are documented in
//! `docs/policies/scope.md`.

use std::collections::{BTreeMap, BTreeSet};

use dpone_policy_model::scope::{
    Admitted, Grant, Limits, Participant, Phase, PhaseClaims, ScopeDecision, ScopeFacts, Subject,
    WorkloadRequest,
};
use dpone_policy_model::types::Reason;

#[cfg(target_arch = "wasm32")]
mod component;

/// The only purpose this authority serves.
pub const PURPOSE: &str = "synthetic_composition_validation";

/// The only trust tier a grant or any participant it names may carry.
pub const TRUST_TIER: &str = "non_production";

/// Longest validity window a grant may carry: 24 hours.
pub const MAX_VALIDITY_SECONDS: i64 = 86_400;

/// Built-in initial ceilings (spec 004). Policy, grant and request limits can only lower them.
pub const BUILT_IN_CEILINGS: Limits = Limits {
    max_workloads: 64,
    max_attempts: 128,
    max_source_rows: 100_000,
    max_source_bytes: 1_073_741_824,
    max_attempt_seconds: 3_600,
};

/// Stable reason codes.
pub mod codes {
    /// The request is admitted.
    pub const ADMITTED: &str = "DPONE_SCOPE_ADMITTED";
    /// Grant purpose is not `synthetic_composition_validation`.
    pub const PURPOSE_MISMATCH: &str = "DPONE_SCOPE_PURPOSE_MISMATCH";
    /// Grant trust tier is not `non_production`.
    pub const TRUST_TIER_MISMATCH: &str = "DPONE_SCOPE_TRUST_TIER_MISMATCH";
    /// A participant is (or is enrolled as) anything other than `non_production`.
    pub const PRODUCTION_ESCALATION: &str = "DPONE_SCOPE_PRODUCTION_ESCALATION";
    /// One participant id appears with two accesses in the enrolment, the grant or the request.
    pub const ACCESS_CONFLICT: &str = "DPONE_SCOPE_ACCESS_CONFLICT";
    /// A participant id is granted with another access than it is enrolled with, or requested
    /// with another access than it is granted with (e.g. a write on a read participant).
    pub const ACCESS_MISMATCH: &str = "DPONE_SCOPE_ACCESS_MISMATCH";
    /// Grant identity, participants or subjects are missing.
    pub const GRANT_INCOMPLETE: &str = "DPONE_SCOPE_GRANT_INCOMPLETE";
    /// Grant environment differs from the pinned policy's.
    pub const ENVIRONMENT_MISMATCH: &str = "DPONE_SCOPE_ENVIRONMENT_MISMATCH";
    /// Grant was issued under another policy digest.
    pub const POLICY_DIGEST_MISMATCH: &str = "DPONE_SCOPE_POLICY_DIGEST_MISMATCH";
    /// Grant epoch is older than the current revocation epoch.
    pub const GRANT_REVOKED: &str = "DPONE_SCOPE_GRANT_REVOKED";
    /// Grant epoch is newer than the pinned policy's current epoch.
    pub const REVOCATION_EPOCH_AHEAD: &str = "DPONE_SCOPE_REVOCATION_EPOCH_AHEAD";
    /// `not_before` is not strictly before `not_after`.
    pub const VALIDITY_WINDOW_INVALID: &str = "DPONE_SCOPE_VALIDITY_WINDOW_INVALID";
    /// Validity window is longer than 24 hours.
    pub const VALIDITY_TOO_LONG: &str = "DPONE_SCOPE_VALIDITY_TOO_LONG";
    /// `now` is before `not_before`.
    pub const NOT_YET_VALID: &str = "DPONE_SCOPE_NOT_YET_VALID";
    /// `now` is at or after `not_after`.
    pub const EXPIRED: &str = "DPONE_SCOPE_EXPIRED";
    /// Request phase differs from the grant's claims variant.
    pub const PHASE_MISMATCH: &str = "DPONE_SCOPE_PHASE_MISMATCH";
    /// A phase claim is empty.
    pub const CLAIMS_INCOMPLETE: &str = "DPONE_SCOPE_CLAIMS_INCOMPLETE";
    /// A list holds the same entry twice.
    pub const DUPLICATE_ENTRY: &str = "DPONE_SCOPE_DUPLICATE_ENTRY";
    /// Request names no workload.
    pub const WORKLOAD_ID_MISSING: &str = "DPONE_SCOPE_WORKLOAD_ID_MISSING";
    /// Execution request is absent from or differs from the grant's activation.
    pub const ACTIVATION_MISMATCH: &str = "DPONE_SCOPE_ACTIVATION_MISMATCH";
    /// Qualification request names an activation.
    pub const ACTIVATION_UNEXPECTED: &str = "DPONE_SCOPE_ACTIVATION_UNEXPECTED";
    /// Execution workload is not in the grant's workload membership.
    pub const WORKLOAD_NOT_MEMBER: &str = "DPONE_SCOPE_WORKLOAD_NOT_MEMBER";
    /// Pool is not the grant's environment/campaign/phase pool.
    pub const POOL_MISMATCH: &str = "DPONE_SCOPE_POOL_MISMATCH";
    /// A participant has an empty id or an access other than `read`/`write`.
    pub const PARTICIPANT_INVALID: &str = "DPONE_SCOPE_PARTICIPANT_INVALID";
    /// A subject has an empty participant id or relation.
    pub const SUBJECT_INVALID: &str = "DPONE_SCOPE_SUBJECT_INVALID";
    /// A grant participant is not enrolled in the policy exactly.
    pub const PARTICIPANT_NOT_ENROLLED: &str = "DPONE_SCOPE_PARTICIPANT_NOT_ENROLLED";
    /// A grant subject is held by a participant the grant does not name.
    pub const GRANT_SUBJECT_UNBOUND: &str = "DPONE_SCOPE_GRANT_SUBJECT_UNBOUND";
    /// Request names no participant.
    pub const PARTICIPANTS_EMPTY: &str = "DPONE_SCOPE_PARTICIPANTS_EMPTY";
    /// Request names no subject.
    pub const SUBJECTS_EMPTY: &str = "DPONE_SCOPE_SUBJECTS_EMPTY";
    /// A request participant is not covered by the grant exactly.
    pub const PARTICIPANT_OUT_OF_SCOPE: &str = "DPONE_SCOPE_PARTICIPANT_OUT_OF_SCOPE";
    /// A request subject is not covered by the grant exactly.
    pub const SUBJECT_OUT_OF_SCOPE: &str = "DPONE_SCOPE_SUBJECT_OUT_OF_SCOPE";
    /// A request subject is held by a participant the request does not name.
    pub const SUBJECT_PARTICIPANT_ABSENT: &str = "DPONE_SCOPE_SUBJECT_PARTICIPANT_ABSENT";
    /// A grant participant holds no grant subject.
    pub const GRANT_PARTICIPANT_UNSCOPED: &str = "DPONE_SCOPE_GRANT_PARTICIPANT_UNSCOPED";
    /// A request participant holds no request subject.
    pub const PARTICIPANT_UNSCOPED: &str = "DPONE_SCOPE_PARTICIPANT_UNSCOPED";
    /// A policy, grant or request limit is above the built-in ceiling.
    pub const LIMIT_ABOVE_CEILING: &str = "DPONE_SCOPE_LIMIT_ABOVE_CEILING";
    /// Execution membership is larger than the effective workload limit.
    pub const MEMBERSHIP_EXCEEDS_LIMIT: &str = "DPONE_SCOPE_MEMBERSHIP_EXCEEDS_LIMIT";
    /// Workload reservation is larger than the request may register (one workload for
    /// qualification, the granted membership for execution).
    pub const RESERVATION_WORKLOADS_INVALID: &str = "DPONE_SCOPE_RESERVATION_WORKLOADS_INVALID";
    /// An effective workload, attempt or attempt-seconds limit is zero.
    pub const LIMIT_ZERO: &str = "DPONE_SCOPE_LIMIT_ZERO";
    /// Request reserves no attempt.
    pub const RESERVATION_ATTEMPTS_ZERO: &str = "DPONE_SCOPE_RESERVATION_ATTEMPTS_ZERO";
    /// One reservation alone exceeds an effective limit.
    pub const RESERVATION_EXCEEDS_LIMIT: &str = "DPONE_SCOPE_RESERVATION_EXCEEDS_LIMIT";
    /// Workload pool would exceed its effective limit.
    pub const BUDGET_WORKLOADS_EXHAUSTED: &str = "DPONE_SCOPE_BUDGET_WORKLOADS_EXHAUSTED";
    /// Attempt pool would exceed its effective limit.
    pub const BUDGET_ATTEMPTS_EXHAUSTED: &str = "DPONE_SCOPE_BUDGET_ATTEMPTS_EXHAUSTED";
    /// Source-row pool would exceed its effective limit.
    pub const BUDGET_SOURCE_ROWS_EXHAUSTED: &str = "DPONE_SCOPE_BUDGET_SOURCE_ROWS_EXHAUSTED";
    /// Source-byte pool would exceed its effective limit.
    pub const BUDGET_SOURCE_BYTES_EXHAUSTED: &str = "DPONE_SCOPE_BUDGET_SOURCE_BYTES_EXHAUSTED";
}

/// A denial: a stable code and a fixed, short message.
type Denied = (&'static str, &'static str);

/// Decides whether a nonproduction composition request may be admitted now.
///
/// Checks run in a fixed order and the first failure denies; see `docs/policies/scope.md`.
pub fn decide(facts: &ScopeFacts) -> ScopeDecision {
    match evaluate(facts) {
        Ok(effective_limits) => ScopeDecision::Admit(Admitted {
            effective_limits,
            reason: Reason::new(
                codes::ADMITTED,
                "request is within nonproduction scope, limits and budget",
            ),
        }),
        Err((code, message)) => ScopeDecision::Deny(Reason::new(code, message)),
    }
}

fn evaluate(facts: &ScopeFacts) -> Result<Limits, Denied> {
    let grant = &facts.grant;
    let request = &facts.request;
    check_identity(facts)?;
    check_binding(facts)?;
    check_validity(facts.now, grant)?;
    check_phase(grant, request)?;
    check_pool(facts)?;
    check_grant_scope(facts)?;
    check_request_scope(grant, request)?;
    check_ceilings(facts)?;
    let limits = effective_limits(facts);
    check_membership(&limits, grant)?;
    check_reservation(&limits, grant, request)?;
    check_budget(facts, &limits)?;
    Ok(limits)
}

/// Purpose, trust tier, production escalation (tier and access) and grant completeness.
fn check_identity(facts: &ScopeFacts) -> Result<(), Denied> {
    let grant = &facts.grant;
    if grant.purpose != PURPOSE {
        return Err((
            codes::PURPOSE_MISMATCH,
            "grant purpose is not synthetic_composition_validation",
        ));
    }
    if grant.trust_tier != TRUST_TIER {
        return Err((
            codes::TRUST_TIER_MISMATCH,
            "grant trust tier is not non_production",
        ));
    }
    if grant
        .participants
        .iter()
        .any(|p| p.trust_tier != TRUST_TIER)
    {
        return Err((
            codes::PRODUCTION_ESCALATION,
            "grant names a participant that is not non_production",
        ));
    }
    if facts
        .request
        .participants
        .iter()
        .any(|p| p.trust_tier != TRUST_TIER)
    {
        return Err((
            codes::PRODUCTION_ESCALATION,
            "request names a participant that is not non_production",
        ));
    }
    // A nonproduction authority policy enrols nothing else, under any id or access.
    if facts
        .policy
        .enrolled_participants
        .iter()
        .any(|e| e.trust_tier != TRUST_TIER)
    {
        return Err((
            codes::PRODUCTION_ESCALATION,
            "the policy enrols a participant that is not non_production",
        ));
    }
    check_access(facts)?;
    if grant.grant_id.is_empty()
        || grant.environment_id.is_empty()
        || grant.campaign_id.is_empty()
        || grant.policy_digest.is_empty()
    {
        return Err((codes::GRANT_INCOMPLETE, "grant identity is incomplete"));
    }
    if grant.participants.is_empty() || grant.subjects.is_empty() {
        return Err((
            codes::GRANT_INCOMPLETE,
            "grant names no participants or no subjects",
        ));
    }
    Ok(())
}

/// One access per participant id in each list, and the same access down the chain
/// enrolment -> grant -> request: a read participant never becomes a write one.
fn check_access(facts: &ScopeFacts) -> Result<(), Denied> {
    let enrolled = access_by_id(&facts.policy.enrolled_participants)?;
    let granted = access_by_id(&facts.grant.participants)?;
    access_by_id(&facts.request.participants)?;
    if facts
        .grant
        .participants
        .iter()
        .any(|p| access_differs(&enrolled, p))
    {
        return Err((
            codes::ACCESS_MISMATCH,
            "a granted participant is enrolled with another access",
        ));
    }
    if facts
        .request
        .participants
        .iter()
        .any(|p| access_differs(&granted, p) || access_differs(&enrolled, p))
    {
        return Err((
            codes::ACCESS_MISMATCH,
            "a request participant is granted or enrolled with another access",
        ));
    }
    Ok(())
}

/// The access of each participant id; an id with two different accesses is a conflict.
fn access_by_id(participants: &[Participant]) -> Result<BTreeMap<&str, &str>, Denied> {
    let mut by_id = BTreeMap::new();
    // An unknown access is no access at all; it is refused as invalid later.
    for p in participants.iter().filter(|p| valid_access(p)) {
        let previous = by_id.insert(p.participant_id.as_str(), p.access.as_str());
        if previous.is_some_and(|access| access != p.access) {
            return Err((
                codes::ACCESS_CONFLICT,
                "a participant id appears with two accesses",
            ));
        }
    }
    Ok(by_id)
}

/// True when `p`'s id is known with another access (an unknown id is judged later).
fn access_differs(known: &BTreeMap<&str, &str>, p: &Participant) -> bool {
    valid_access(p)
        && known
            .get(p.participant_id.as_str())
            .is_some_and(|access| *access != p.access)
}

/// `read` or `write`, the only accesses a participant may have.
fn valid_access(p: &Participant) -> bool {
    matches!(p.access.as_str(), "read" | "write")
}

/// Environment, policy digest and revocation epoch.
fn check_binding(facts: &ScopeFacts) -> Result<(), Denied> {
    let grant = &facts.grant;
    let policy = &facts.policy;
    if grant.environment_id != policy.environment_id {
        return Err((
            codes::ENVIRONMENT_MISMATCH,
            "grant is for another environment",
        ));
    }
    if grant.policy_digest != policy.policy_digest {
        return Err((
            codes::POLICY_DIGEST_MISMATCH,
            "grant was issued under another policy",
        ));
    }
    if grant.revocation_epoch < policy.current_revocation_epoch {
        return Err((codes::GRANT_REVOKED, "grant epoch has been revoked"));
    }
    if grant.revocation_epoch > policy.current_revocation_epoch {
        return Err((
            codes::REVOCATION_EPOCH_AHEAD,
            "grant epoch is ahead of the pinned policy",
        ));
    }
    Ok(())
}

/// `not_before < not_after`, window at most 24 h, `not_before <= now < not_after`.
fn check_validity(now: i64, grant: &Grant) -> Result<(), Denied> {
    if grant.not_before >= grant.not_after {
        return Err((
            codes::VALIDITY_WINDOW_INVALID,
            "grant validity window is empty or inverted",
        ));
    }
    let window = i128::from(grant.not_after) - i128::from(grant.not_before);
    if window > i128::from(MAX_VALIDITY_SECONDS) {
        return Err((
            codes::VALIDITY_TOO_LONG,
            "grant validity window exceeds 24 hours",
        ));
    }
    if now < grant.not_before {
        return Err((codes::NOT_YET_VALID, "grant is not yet valid"));
    }
    if now >= grant.not_after {
        return Err((codes::EXPIRED, "grant has expired"));
    }
    Ok(())
}

/// Phase separation, complete claims, workload, activation and membership.
fn check_phase(grant: &Grant, request: &WorkloadRequest) -> Result<(), Denied> {
    match (&grant.claims, request.phase) {
        (PhaseClaims::Qualification(claims), Phase::Qualification) => {
            if claims.run_id.is_empty()
                || claims.fixture_plan_digest.is_empty()
                || claims.qualification_plan_digest.is_empty()
            {
                return Err((
                    codes::CLAIMS_INCOMPLETE,
                    "qualification claims are incomplete",
                ));
            }
            if request.workload_id.is_empty() {
                return Err((codes::WORKLOAD_ID_MISSING, "request names no workload"));
            }
            if request.activation_id.is_some() {
                return Err((
                    codes::ACTIVATION_UNEXPECTED,
                    "qualification request names an activation",
                ));
            }
            Ok(())
        }
        (PhaseClaims::Execution(claims), Phase::Execution) => {
            if claims.qualified_set_digest.is_empty()
                || claims.native_release_digest.is_empty()
                || claims.parent_release_digest.is_empty()
                || claims.deployment_digest.is_empty()
                || claims.activation_id.is_empty()
                || claims.workload_membership.is_empty()
                || claims.workload_membership.iter().any(String::is_empty)
            {
                return Err((codes::CLAIMS_INCOMPLETE, "execution claims are incomplete"));
            }
            if has_duplicates(claims.workload_membership.iter().map(String::as_str)) {
                return Err((
                    codes::DUPLICATE_ENTRY,
                    "workload membership repeats an entry",
                ));
            }
            if request.workload_id.is_empty() {
                return Err((codes::WORKLOAD_ID_MISSING, "request names no workload"));
            }
            if request.activation_id.as_deref() != Some(claims.activation_id.as_str()) {
                return Err((
                    codes::ACTIVATION_MISMATCH,
                    "request is not for the granted activation",
                ));
            }
            if !claims.workload_membership.contains(&request.workload_id) {
                return Err((
                    codes::WORKLOAD_NOT_MEMBER,
                    "workload is not in the granted membership",
                ));
            }
            Ok(())
        }
        (PhaseClaims::Qualification(_), Phase::Execution) => Err((
            codes::PHASE_MISMATCH,
            "a qualification grant never authorizes execution",
        )),
        (PhaseClaims::Execution(_), Phase::Qualification) => Err((
            codes::PHASE_MISMATCH,
            "an execution grant never authorizes qualification",
        )),
    }
}

/// The pool must be the grant's environment/campaign pool for the request's phase.
fn check_pool(facts: &ScopeFacts) -> Result<(), Denied> {
    let pool = &facts.pool;
    if pool.environment_id != facts.grant.environment_id
        || pool.campaign_id != facts.grant.campaign_id
        || pool.phase != facts.request.phase
    {
        return Err((
            codes::POOL_MISMATCH,
            "pool is not the grant's environment/campaign/phase pool",
        ));
    }
    Ok(())
}

/// The grant's own participants and subjects: well formed, unique, enrolled and bound.
fn check_grant_scope(facts: &ScopeFacts) -> Result<(), Denied> {
    let grant = &facts.grant;
    check_participants(&grant.participants)?;
    for p in &grant.participants {
        if !facts.policy.enrolled_participants.contains(p) {
            return Err((
                codes::PARTICIPANT_NOT_ENROLLED,
                "a granted participant is not enrolled",
            ));
        }
    }
    check_subjects(&grant.subjects)?;
    let granted_ids: BTreeSet<&str> = grant
        .participants
        .iter()
        .map(|p| p.participant_id.as_str())
        .collect();
    if grant
        .subjects
        .iter()
        .any(|s| !granted_ids.contains(s.participant_id.as_str()))
    {
        return Err((
            codes::GRANT_SUBJECT_UNBOUND,
            "a granted subject has no granted participant",
        ));
    }
    if !every_participant_scoped(&grant.participants, &grant.subjects) {
        return Err((
            codes::GRANT_PARTICIPANT_UNSCOPED,
            "a granted participant holds no granted subject",
        ));
    }
    Ok(())
}

/// Every participant holds at least one subject: no effect without a physical scope.
fn every_participant_scoped(participants: &[Participant], subjects: &[Subject]) -> bool {
    let held: BTreeSet<&str> = subjects.iter().map(|s| s.participant_id.as_str()).collect();
    participants
        .iter()
        .all(|p| held.contains(p.participant_id.as_str()))
}

/// The request's participants and subjects: present, well formed, unique and covered exactly.
fn check_request_scope(grant: &Grant, request: &WorkloadRequest) -> Result<(), Denied> {
    if request.participants.is_empty() {
        return Err((codes::PARTICIPANTS_EMPTY, "request names no participants"));
    }
    check_participants(&request.participants)?;
    if request
        .participants
        .iter()
        .any(|p| !grant.participants.contains(p))
    {
        return Err((
            codes::PARTICIPANT_OUT_OF_SCOPE,
            "a request participant is not granted",
        ));
    }
    if request.subjects.is_empty() {
        return Err((codes::SUBJECTS_EMPTY, "request names no subjects"));
    }
    check_subjects(&request.subjects)?;
    if request.subjects.iter().any(|s| !grant.subjects.contains(s)) {
        return Err((
            codes::SUBJECT_OUT_OF_SCOPE,
            "a request subject is not granted",
        ));
    }
    let request_ids: BTreeSet<&str> = request
        .participants
        .iter()
        .map(|p| p.participant_id.as_str())
        .collect();
    if request
        .subjects
        .iter()
        .any(|s| !request_ids.contains(s.participant_id.as_str()))
    {
        return Err((
            codes::SUBJECT_PARTICIPANT_ABSENT,
            "a request subject's participant is not in the request",
        ));
    }
    if !every_participant_scoped(&request.participants, &request.subjects) {
        return Err((
            codes::PARTICIPANT_UNSCOPED,
            "a request participant holds no request subject",
        ));
    }
    Ok(())
}

/// Every participant has an id and a `read`/`write` access; no (id, access) repeats.
fn check_participants(participants: &[Participant]) -> Result<(), Denied> {
    let valid = |p: &Participant| !p.participant_id.is_empty() && valid_access(p);
    if !participants.iter().all(valid) {
        return Err((
            codes::PARTICIPANT_INVALID,
            "a participant has no id or an unknown access",
        ));
    }
    if has_duplicates(
        participants
            .iter()
            .map(|p| (p.participant_id.as_str(), p.access.as_str())),
    ) {
        return Err((codes::DUPLICATE_ENTRY, "a participant is listed twice"));
    }
    Ok(())
}

/// Every subject has a participant and a relation; no (participant, relation) repeats.
fn check_subjects(subjects: &[Subject]) -> Result<(), Denied> {
    if subjects
        .iter()
        .any(|s| s.participant_id.is_empty() || s.relation.is_empty())
    {
        return Err((
            codes::SUBJECT_INVALID,
            "a subject has no participant or no relation",
        ));
    }
    if has_duplicates(
        subjects
            .iter()
            .map(|s| (s.participant_id.as_str(), s.relation.as_str())),
    ) {
        return Err((codes::DUPLICATE_ENTRY, "a subject is listed twice"));
    }
    Ok(())
}

fn has_duplicates<T: Ord>(items: impl Iterator<Item = T>) -> bool {
    let mut seen = BTreeSet::new();
    for item in items {
        if !seen.insert(item) {
            return true;
        }
    }
    false
}

/// Field-wise minimum of built-in ceilings, policy ceilings, grant limits and request limits.
pub fn effective_limits(facts: &ScopeFacts) -> Limits {
    [
        facts.policy.ceilings,
        facts.grant.limits,
        facts.request.limits,
    ]
    .iter()
    .fold(BUILT_IN_CEILINGS, |acc, l| Limits {
        max_workloads: acc.max_workloads.min(l.max_workloads),
        max_attempts: acc.max_attempts.min(l.max_attempts),
        max_source_rows: acc.max_source_rows.min(l.max_source_rows),
        max_source_bytes: acc.max_source_bytes.min(l.max_source_bytes),
        max_attempt_seconds: acc.max_attempt_seconds.min(l.max_attempt_seconds),
    })
}

/// No layer (policy, grant, request) may carry a limit above the built-in ceilings.
fn check_ceilings(facts: &ScopeFacts) -> Result<(), Denied> {
    let above = |l: &Limits| {
        l.max_workloads > BUILT_IN_CEILINGS.max_workloads
            || l.max_attempts > BUILT_IN_CEILINGS.max_attempts
            || l.max_source_rows > BUILT_IN_CEILINGS.max_source_rows
            || l.max_source_bytes > BUILT_IN_CEILINGS.max_source_bytes
            || l.max_attempt_seconds > BUILT_IN_CEILINGS.max_attempt_seconds
    };
    if above(&facts.policy.ceilings) || above(&facts.grant.limits) || above(&facts.request.limits) {
        return Err((
            codes::LIMIT_ABOVE_CEILING,
            "a limit is above the built-in ceiling",
        ));
    }
    Ok(())
}

/// Complete execution membership obeys the effective workload limit.
fn check_membership(limits: &Limits, grant: &Grant) -> Result<(), Denied> {
    if let PhaseClaims::Execution(claims) = &grant.claims {
        let members = u64::try_from(claims.workload_membership.len()).unwrap_or(u64::MAX);
        if members > u64::from(limits.max_workloads) {
            return Err((
                codes::MEMBERSHIP_EXCEEDS_LIMIT,
                "workload membership exceeds the effective workload limit",
            ));
        }
    }
    Ok(())
}

/// Non-zero count limits; one reservation, on its own, within the effective limits and within
/// what the request may register (one workload for qualification, the membership for execution).
fn check_reservation(
    limits: &Limits,
    grant: &Grant,
    request: &WorkloadRequest,
) -> Result<(), Denied> {
    if limits.max_workloads == 0 || limits.max_attempts == 0 || limits.max_attempt_seconds == 0 {
        return Err((
            codes::LIMIT_ZERO,
            "an effective workload, attempt or time limit is zero",
        ));
    }
    if request.reserve_attempts == 0 {
        return Err((
            codes::RESERVATION_ATTEMPTS_ZERO,
            "request reserves no attempt",
        ));
    }
    let registrable = match &grant.claims {
        PhaseClaims::Qualification(_) => 1,
        PhaseClaims::Execution(claims) => {
            u64::try_from(claims.workload_membership.len()).unwrap_or(u64::MAX)
        }
    };
    if u64::from(request.reserve_workloads) > registrable {
        return Err((
            codes::RESERVATION_WORKLOADS_INVALID,
            "reservation names more workloads than the request may register",
        ));
    }
    if request.reserve_workloads > limits.max_workloads
        || request.reserve_attempts > limits.max_attempts
        || request.reserve_source_rows > limits.max_source_rows
        || request.reserve_source_bytes > limits.max_source_bytes
    {
        return Err((
            codes::RESERVATION_EXCEEDS_LIMIT,
            "reservation alone exceeds an effective limit",
        ));
    }
    Ok(())
}

/// Measured usage + unresolved reservations + this reservation <= effective limit, per pool.
fn check_budget(facts: &ScopeFacts, limits: &Limits) -> Result<(), Denied> {
    let pool = &facts.pool;
    let request = &facts.request;
    let dimensions: [(u128, u128, u128, u128, Denied); 4] = [
        (
            pool.workloads.into(),
            pool.reserved_workloads.into(),
            request.reserve_workloads.into(),
            limits.max_workloads.into(),
            (
                codes::BUDGET_WORKLOADS_EXHAUSTED,
                "workload budget of the pool is exhausted",
            ),
        ),
        (
            pool.attempts.into(),
            pool.reserved_attempts.into(),
            request.reserve_attempts.into(),
            limits.max_attempts.into(),
            (
                codes::BUDGET_ATTEMPTS_EXHAUSTED,
                "attempt budget of the pool is exhausted",
            ),
        ),
        (
            pool.source_rows.into(),
            pool.reserved_source_rows.into(),
            request.reserve_source_rows.into(),
            limits.max_source_rows.into(),
            (
                codes::BUDGET_SOURCE_ROWS_EXHAUSTED,
                "source-row budget of the pool is exhausted",
            ),
        ),
        (
            pool.source_bytes.into(),
            pool.reserved_source_bytes.into(),
            request.reserve_source_bytes.into(),
            limits.max_source_bytes.into(),
            (
                codes::BUDGET_SOURCE_BYTES_EXHAUSTED,
                "source-byte budget of the pool is exhausted",
            ),
        ),
    ];
    for (used, reserved, asked, limit, denied) in dimensions {
        // Three values below 2^64 each: the sum cannot overflow u128.
        let total = used.saturating_add(reserved).saturating_add(asked);
        if total > limit {
            return Err(denied);
        }
    }
    Ok(())
}
