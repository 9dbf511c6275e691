//! WebAssembly export of [`crate::decide`]: generated bindings and conversions to the model.
// The canonical-ABI glue that wit-bindgen generates is unsafe by nature; nothing else here is.
#![allow(missing_docs, unsafe_code)]

use dpone_policy_model::scope as model;
use dpone_policy_model::types::Reason;

wit_bindgen::generate!({ path: "../../wit", world: "scope-policy" });

use exports::dpone::policy::scope as wit;
use exports::dpone::policy::types::Reason as WitReason;

struct Component;

impl wit::Guest for Component {
    fn decide(facts: wit::ScopeFacts) -> wit::ScopeDecision {
        crate::decide(&facts.into()).into()
    }
}

export!(Component);

impl From<Reason> for WitReason {
    fn from(r: Reason) -> Self {
        Self {
            code: r.code,
            message: r.message,
        }
    }
}

impl From<wit::Limits> for model::Limits {
    fn from(l: wit::Limits) -> Self {
        Self {
            max_workloads: l.max_workloads,
            max_attempts: l.max_attempts,
            max_source_rows: l.max_source_rows,
            max_source_bytes: l.max_source_bytes,
            max_attempt_seconds: l.max_attempt_seconds,
        }
    }
}

impl From<model::Limits> for wit::Limits {
    fn from(l: model::Limits) -> Self {
        Self {
            max_workloads: l.max_workloads,
            max_attempts: l.max_attempts,
            max_source_rows: l.max_source_rows,
            max_source_bytes: l.max_source_bytes,
            max_attempt_seconds: l.max_attempt_seconds,
        }
    }
}

impl From<wit::Participant> for model::Participant {
    fn from(p: wit::Participant) -> Self {
        Self {
            participant_id: p.participant_id,
            access: p.access,
            trust_tier: p.trust_tier,
        }
    }
}

impl From<wit::Subject> for model::Subject {
    fn from(s: wit::Subject) -> Self {
        Self {
            participant_id: s.participant_id,
            relation: s.relation,
        }
    }
}

impl From<wit::Phase> for model::Phase {
    fn from(p: wit::Phase) -> Self {
        match p {
            wit::Phase::Qualification => Self::Qualification,
            wit::Phase::Execution => Self::Execution,
        }
    }
}

impl From<wit::PhaseClaims> for model::PhaseClaims {
    fn from(c: wit::PhaseClaims) -> Self {
        match c {
            wit::PhaseClaims::Qualification(q) => Self::Qualification(model::QualificationClaims {
                run_id: q.run_id,
                fixture_plan_digest: q.fixture_plan_digest,
                qualification_plan_digest: q.qualification_plan_digest,
            }),
            wit::PhaseClaims::Execution(e) => Self::Execution(model::ExecutionClaims {
                qualified_set_digest: e.qualified_set_digest,
                native_release_digest: e.native_release_digest,
                parent_release_digest: e.parent_release_digest,
                deployment_digest: e.deployment_digest,
                activation_id: e.activation_id,
                workload_membership: e.workload_membership,
            }),
        }
    }
}

fn participants(list: Vec<wit::Participant>) -> Vec<model::Participant> {
    list.into_iter().map(Into::into).collect()
}

fn subjects(list: Vec<wit::Subject>) -> Vec<model::Subject> {
    list.into_iter().map(Into::into).collect()
}

impl From<wit::ScopeFacts> for model::ScopeFacts {
    fn from(f: wit::ScopeFacts) -> Self {
        Self {
            now: f.now,
            policy: model::AuthorityPolicy {
                policy_digest: f.policy.policy_digest,
                environment_id: f.policy.environment_id,
                enrolled_participants: participants(f.policy.enrolled_participants),
                current_revocation_epoch: f.policy.current_revocation_epoch,
                ceilings: f.policy.ceilings.into(),
            },
            grant: model::Grant {
                grant_id: f.grant.grant_id,
                purpose: f.grant.purpose,
                trust_tier: f.grant.trust_tier,
                environment_id: f.grant.environment_id,
                campaign_id: f.grant.campaign_id,
                policy_digest: f.grant.policy_digest,
                not_before: f.grant.not_before,
                not_after: f.grant.not_after,
                revocation_epoch: f.grant.revocation_epoch,
                participants: participants(f.grant.participants),
                subjects: subjects(f.grant.subjects),
                limits: f.grant.limits.into(),
                claims: f.grant.claims.into(),
            },
            request: model::WorkloadRequest {
                phase: f.request.phase.into(),
                workload_id: f.request.workload_id,
                activation_id: f.request.activation_id,
                participants: participants(f.request.participants),
                subjects: subjects(f.request.subjects),
                limits: f.request.limits.into(),
                reserve_workloads: f.request.reserve_workloads,
                reserve_attempts: f.request.reserve_attempts,
                reserve_source_rows: f.request.reserve_source_rows,
                reserve_source_bytes: f.request.reserve_source_bytes,
            },
            pool: model::PoolUsage {
                environment_id: f.pool.environment_id,
                campaign_id: f.pool.campaign_id,
                phase: f.pool.phase.into(),
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
}

impl From<model::ScopeDecision> for wit::ScopeDecision {
    fn from(d: model::ScopeDecision) -> Self {
        match d {
            model::ScopeDecision::Admit(a) => Self::Admit(wit::Admitted {
                effective_limits: a.effective_limits.into(),
                reason: a.reason.into(),
            }),
            model::ScopeDecision::Deny(r) => Self::Deny(r.into()),
        }
    }
}
