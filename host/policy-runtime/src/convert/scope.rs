//! Conversions between the scope model and the generated `scope-policy` bindings.
//!
//! One-to-one and exhaustive: every record field is named and every enum/variant arm is listed,
//! so a change to the WIT or the model fails to compile here instead of silently dropping data.

use crate::bindings::scope::exports::dpone::policy::types::Reason as WitReason;
use dpone_policy_model::scope as model;
use dpone_policy_model::types::Reason;

use crate::bindings::scope::exports::dpone::policy::scope as wit;

/// Converts model facts into the record passed to the component.
pub(crate) fn facts_to_wit(f: &model::ScopeFacts) -> wit::ScopeFacts {
    wit::ScopeFacts {
        now: f.now,
        policy: wit::AuthorityPolicy {
            policy_digest: f.policy.policy_digest.clone(),
            environment_id: f.policy.environment_id.clone(),
            enrolled_participants: participants_to_wit(&f.policy.enrolled_participants),
            current_revocation_epoch: f.policy.current_revocation_epoch,
            ceilings: limits_to_wit(&f.policy.ceilings),
        },
        grant: wit::Grant {
            grant_id: f.grant.grant_id.clone(),
            purpose: f.grant.purpose.clone(),
            trust_tier: f.grant.trust_tier.clone(),
            environment_id: f.grant.environment_id.clone(),
            campaign_id: f.grant.campaign_id.clone(),
            policy_digest: f.grant.policy_digest.clone(),
            not_before: f.grant.not_before,
            not_after: f.grant.not_after,
            revocation_epoch: f.grant.revocation_epoch,
            participants: participants_to_wit(&f.grant.participants),
            subjects: subjects_to_wit(&f.grant.subjects),
            limits: limits_to_wit(&f.grant.limits),
            claims: claims_to_wit(&f.grant.claims),
        },
        request: wit::WorkloadRequest {
            phase: phase_to_wit(f.request.phase),
            workload_id: f.request.workload_id.clone(),
            activation_id: f.request.activation_id.clone(),
            participants: participants_to_wit(&f.request.participants),
            subjects: subjects_to_wit(&f.request.subjects),
            limits: limits_to_wit(&f.request.limits),
            reserve_workloads: f.request.reserve_workloads,
            reserve_attempts: f.request.reserve_attempts,
            reserve_source_rows: f.request.reserve_source_rows,
            reserve_source_bytes: f.request.reserve_source_bytes,
        },
        pool: wit::PoolUsage {
            environment_id: f.pool.environment_id.clone(),
            campaign_id: f.pool.campaign_id.clone(),
            phase: phase_to_wit(f.pool.phase),
            workloads: f.pool.workloads,
            attempts: f.pool.attempts,
            source_rows: f.pool.source_rows,
            source_bytes: f.pool.source_bytes,
            reserved_workloads: f.pool.reserved_workloads,
            reserved_attempts: f.pool.reserved_attempts,
            reserved_source_rows: f.pool.reserved_source_rows,
            reserved_source_bytes: f.pool.reserved_source_bytes,
        },
    }
}

/// Converts the component's decision back into the model.
pub(crate) fn decision_from_wit(d: wit::ScopeDecision) -> model::ScopeDecision {
    match d {
        wit::ScopeDecision::Admit(a) => model::ScopeDecision::Admit(model::Admitted {
            effective_limits: limits_from_wit(a.effective_limits),
            reason: reason_from_wit(a.reason),
        }),
        wit::ScopeDecision::Deny(r) => model::ScopeDecision::Deny(reason_from_wit(r)),
    }
}

fn reason_from_wit(r: WitReason) -> Reason {
    Reason {
        code: r.code,
        message: r.message,
    }
}

fn limits_to_wit(l: &model::Limits) -> wit::Limits {
    wit::Limits {
        max_workloads: l.max_workloads,
        max_attempts: l.max_attempts,
        max_source_rows: l.max_source_rows,
        max_source_bytes: l.max_source_bytes,
        max_attempt_seconds: l.max_attempt_seconds,
    }
}

fn limits_from_wit(l: wit::Limits) -> model::Limits {
    model::Limits {
        max_workloads: l.max_workloads,
        max_attempts: l.max_attempts,
        max_source_rows: l.max_source_rows,
        max_source_bytes: l.max_source_bytes,
        max_attempt_seconds: l.max_attempt_seconds,
    }
}

fn participants_to_wit(list: &[model::Participant]) -> Vec<wit::Participant> {
    list.iter()
        .map(|p| wit::Participant {
            participant_id: p.participant_id.clone(),
            access: p.access.clone(),
            trust_tier: p.trust_tier.clone(),
        })
        .collect()
}

fn subjects_to_wit(list: &[model::Subject]) -> Vec<wit::Subject> {
    list.iter()
        .map(|s| wit::Subject {
            participant_id: s.participant_id.clone(),
            relation: s.relation.clone(),
        })
        .collect()
}

fn phase_to_wit(p: model::Phase) -> wit::Phase {
    match p {
        model::Phase::Qualification => wit::Phase::Qualification,
        model::Phase::Execution => wit::Phase::Execution,
    }
}

fn claims_to_wit(c: &model::PhaseClaims) -> wit::PhaseClaims {
    match c {
        model::PhaseClaims::Qualification(q) => {
            wit::PhaseClaims::Qualification(wit::QualificationClaims {
                run_id: q.run_id.clone(),
                fixture_plan_digest: q.fixture_plan_digest.clone(),
                qualification_plan_digest: q.qualification_plan_digest.clone(),
            })
        }
        model::PhaseClaims::Execution(e) => wit::PhaseClaims::Execution(wit::ExecutionClaims {
            qualified_set_digest: e.qualified_set_digest.clone(),
            native_release_digest: e.native_release_digest.clone(),
            parent_release_digest: e.parent_release_digest.clone(),
            deployment_digest: e.deployment_digest.clone(),
            activation_id: e.activation_id.clone(),
            workload_membership: e.workload_membership.clone(),
        }),
    }
}
