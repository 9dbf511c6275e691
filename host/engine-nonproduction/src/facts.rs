//! Gathering the scope facts: a pure mapping from the verified documents, the workload, the
//! pool usage and the clock to [`ScopeFacts`], the input of the scope policy component
//! (`dpone:policy/scope`). The host gathers facts; the component decides purpose, tier, phase
//! separation, participant and subject coverage, validity, revocation, limits and budget.
//!
//! The request's participants and subjects are *every* effect of the workload in the
//! composition: one effect outside the grant is one participant or subject outside the grant,
//! which the component denies.
//!
//! The phase of the request comes from what is offered, never from the grant: a composition
//! alone (the qualification plan's workloads) asks for `qualification`; an activation request
//! with its composition asks for `execution` with the request's activation id. A grant of the
//! other phase is therefore denied by the component (phase swap).
//!
//! A few bindings have no field in the facts, so they are refused here, each with its own code:
//! the activation request must name this grant's digest, its composition, and the grant's parent
//! release, native release, deployment and exact membership; composition and request must be of
//! the grant's campaign and environment; the workload must be in the composition (and the
//! request). [`bind_release_set`] and [`bind_route_qualification`] check the grant against the
//! release set and route qualification it names.

use crate::activation::ActivationRequest;
use crate::authority::{Authority, PhaseSubjects};
use crate::codes;
use crate::common::{Participant, Phase, Subject};
use crate::composition::Composition;
use crate::document::Document;
use crate::error::{NpError, Result};
use crate::policy::AuthorityPolicy;
use crate::qualification::RouteQualification;
use crate::release_set::DbtReleaseSet;
use dpone_policy_model::scope::{self as model, ScopeFacts};
use std::collections::BTreeSet;

/// What is offered for the decision.
#[derive(Clone, Copy, Debug)]
pub enum ScopeTarget<'a> {
    /// Qualification: the qualification plan's workloads, written as a composition.
    Qualification(&'a Composition),
    /// Execution: the scoped activation request and the parent composition it activates.
    Execution {
        /// The activation request.
        request: &'a ActivationRequest,
        /// Its parent composition.
        composition: &'a Composition,
    },
}

/// The reservation the caller asks for with this admission.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reservation {
    /// Workloads.
    pub workloads: u32,
    /// Attempts.
    pub attempts: u32,
    /// Source rows.
    pub source_rows: u64,
    /// Source bytes.
    pub source_bytes: u64,
}

fn refuse(code: &'static str, detail: &str) -> NpError {
    NpError::new(code, detail.to_owned())
}

fn seconds(v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| refuse(codes::SCOPE_TIME_INVALID, "a time is out of range"))
}

fn participant(p: &Participant) -> model::Participant {
    model::Participant {
        participant_id: p.participant_id.as_str().to_owned(),
        access: p.access.as_str().to_owned(),
        trust_tier: crate::common::TRUST_TIER.to_owned(),
    }
}

fn subject(s: &Subject) -> model::Subject {
    model::Subject {
        participant_id: s.participant_id.as_str().to_owned(),
        relation: s.relation.as_str().to_owned(),
    }
}

/// The policy as the component sees it (`current_revocation_epoch` from the host's store).
pub fn policy_facts(
    policy: &AuthorityPolicy,
    current_revocation_epoch: u64,
) -> model::AuthorityPolicy {
    model::AuthorityPolicy {
        policy_digest: policy.digest().as_str().to_owned(),
        environment_id: policy.enrollment.environment_id.as_str().to_owned(),
        enrolled_participants: policy
            .enrollment
            .participants
            .iter()
            .map(participant)
            .collect(),
        current_revocation_epoch,
        ceilings: policy.ceilings.to_model(),
    }
}

/// The grant as the component sees it.
pub fn grant_facts(grant: &Authority) -> Result<model::Grant> {
    let claims = match &grant.phase_subjects {
        PhaseSubjects::Qualification(q) => {
            model::PhaseClaims::Qualification(model::QualificationClaims {
                run_id: q.run_id.as_str().to_owned(),
                fixture_plan_digest: q.fixture_plan_digest.as_str().to_owned(),
                qualification_plan_digest: q.qualification_plan_digest.as_str().to_owned(),
            })
        }
        PhaseSubjects::Execution(e) => model::PhaseClaims::Execution(model::ExecutionClaims {
            qualified_set_digest: e.qualified_set_digest.as_str().to_owned(),
            native_release_digest: e.native_release_digest.as_str().to_owned(),
            parent_release_digest: e.parent_release_digest.as_str().to_owned(),
            deployment_digest: e.deployment_digest.as_str().to_owned(),
            activation_id: e.activation_id.as_str().to_owned(),
            workload_membership: e
                .membership
                .iter()
                .map(|m| m.workload_id.as_str().to_owned())
                .collect(),
        }),
    };
    Ok(model::Grant {
        grant_id: grant.grant_id.as_str().to_owned(),
        purpose: crate::common::PURPOSE.to_owned(),
        trust_tier: crate::common::TRUST_TIER.to_owned(),
        environment_id: grant.environment_id.as_str().to_owned(),
        campaign_id: grant.campaign_id.as_str().to_owned(),
        policy_digest: grant.policy_digest.as_str().to_owned(),
        not_before: seconds(grant.validity.not_before)?,
        not_after: seconds(grant.validity.not_after)?,
        revocation_epoch: grant.revocation_epoch,
        participants: grant.scope.participants.iter().map(participant).collect(),
        subjects: grant.scope.subjects.iter().map(subject).collect(),
        limits: grant.limits.to_model(),
        claims,
    })
}

/// Refuses an activation request that does not bind this grant, this composition and the
/// grant's releases, deployment and membership.
fn bind_activation(
    grant: &Authority,
    request: &ActivationRequest,
    composition: &Composition,
) -> Result<()> {
    if request.execution_grant_digest != grant.digest() {
        return Err(refuse(
            codes::SCOPE_GRANT_DIGEST_MISMATCH,
            "the activation request names another execution grant",
        ));
    }
    if request.parent_release_digest != composition.digest()
        || request.native_release_digest != composition.native_release_digest
    {
        return Err(refuse(
            codes::SCOPE_COMPOSITION_MISMATCH,
            "the activation request is for another composition",
        ));
    }
    if request.campaign_id != grant.campaign_id || request.environment_id != grant.environment_id {
        return Err(refuse(
            codes::SCOPE_CAMPAIGN_MISMATCH,
            "the activation request is for another campaign or environment",
        ));
    }
    if let PhaseSubjects::Execution(e) = &grant.phase_subjects {
        if e.parent_release_digest != request.parent_release_digest
            || e.native_release_digest != request.native_release_digest
            || e.deployment_digest != request.deployment_digest
        {
            return Err(refuse(
                codes::SCOPE_RELEASE_MISMATCH,
                "the grant is for another parent release, native release or deployment",
            ));
        }
        if e.membership != request.workloads {
            return Err(refuse(
                codes::SCOPE_MEMBERSHIP_MISMATCH,
                "the request's workloads are not exactly the grant's membership",
            ));
        }
    }
    for m in &request.workloads {
        let in_composition = composition
            .workload(m.workload_id.as_str())
            .is_some_and(|w| w.pack_digest == m.pack_digest);
        if !in_composition {
            return Err(refuse(
                codes::SCOPE_MEMBERSHIP_MISMATCH,
                "a requested workload or pack is not in the composition",
            ));
        }
    }
    Ok(())
}

/// Gathers the facts of one scope decision.
///
/// `current_revocation_epoch` and `now` come from the host; `pool` is the protected
/// environment/campaign/phase pool as read from the control store.
#[allow(clippy::too_many_arguments)]
pub fn scope_facts(
    policy: &AuthorityPolicy,
    grant: &Authority,
    target: ScopeTarget<'_>,
    workload_id: &str,
    reservation: Reservation,
    pool: &model::PoolUsage,
    now: u64,
    current_revocation_epoch: u64,
) -> Result<ScopeFacts> {
    let (phase, composition, activation_id) = match target {
        ScopeTarget::Qualification(composition) => (Phase::Qualification, composition, None),
        ScopeTarget::Execution {
            request,
            composition,
        } => {
            bind_activation(grant, request, composition)?;
            if !request
                .workloads
                .iter()
                .any(|m| m.workload_id.as_str() == workload_id)
            {
                return Err(refuse(
                    codes::SCOPE_WORKLOAD_NOT_REQUESTED,
                    "the workload is not in the activation request",
                ));
            }
            (
                Phase::Execution,
                composition,
                Some(request.activation_id.as_str().to_owned()),
            )
        }
    };
    if composition.campaign_id != grant.campaign_id
        || composition.environment_id != grant.environment_id
    {
        return Err(refuse(
            codes::SCOPE_CAMPAIGN_MISMATCH,
            "the composition is for another campaign or environment",
        ));
    }
    let Some(workload) = composition.workload(workload_id) else {
        return Err(refuse(
            codes::SCOPE_WORKLOAD_UNKNOWN,
            "the workload is not in the composition",
        ));
    };
    let participants: BTreeSet<(String, String)> = workload
        .effects
        .iter()
        .map(|e| {
            (
                e.participant_id.as_str().to_owned(),
                e.access.as_str().to_owned(),
            )
        })
        .collect();
    let request = model::WorkloadRequest {
        phase: match phase {
            Phase::Qualification => model::Phase::Qualification,
            Phase::Execution => model::Phase::Execution,
        },
        workload_id: workload.workload_id.as_str().to_owned(),
        activation_id,
        participants: participants
            .into_iter()
            .map(|(participant_id, access)| model::Participant {
                participant_id,
                access,
                trust_tier: crate::common::TRUST_TIER.to_owned(),
            })
            .collect(),
        subjects: workload.subjects().iter().map(subject).collect(),
        limits: workload.limits.to_model(),
        reserve_workloads: reservation.workloads,
        reserve_attempts: reservation.attempts,
        reserve_source_rows: reservation.source_rows,
        reserve_source_bytes: reservation.source_bytes,
    };
    Ok(ScopeFacts {
        now: seconds(now)?,
        policy: policy_facts(policy, current_revocation_epoch),
        grant: grant_facts(grant)?,
        request,
        pool: pool.clone(),
    })
}

/// Refuses a release set the execution grant does not name: another digest, qualified set,
/// source, fixture, generator, compilation intent or toolchain, campaign or environment.
pub fn bind_release_set(grant: &Authority, release: &DbtReleaseSet) -> Result<()> {
    let PhaseSubjects::Execution(e) = &grant.phase_subjects else {
        return Err(refuse(
            codes::SCOPE_INTENT_MISMATCH,
            "only an execution grant names a release set",
        ));
    };
    if release.campaign_id != grant.campaign_id || release.environment_id != grant.environment_id {
        return Err(refuse(
            codes::SCOPE_CAMPAIGN_MISMATCH,
            "the release set is for another campaign or environment",
        ));
    }
    if e.native_release_digest != release.digest() {
        return Err(refuse(
            codes::SCOPE_RELEASE_MISMATCH,
            "the grant names another native release",
        ));
    }
    if e.qualified_set_digest != release.qualified_set_digest()
        || release.provenance != grant.provenance
        || release.authority.policy_digest != grant.policy_digest
        || release.authority.enrollment_digest != grant.enrollment_digest
    {
        return Err(refuse(
            codes::SCOPE_INTENT_MISMATCH,
            "the release set is for another intent, provenance or qualified set",
        ));
    }
    Ok(())
}

/// Refuses a route qualification that is not the outcome of this qualification grant: its
/// digest, one-time run, route, provenance, campaign or environment differ.
pub fn bind_route_qualification(grant: &Authority, q: &RouteQualification) -> Result<()> {
    let PhaseSubjects::Qualification(claims) = &grant.phase_subjects else {
        return Err(refuse(
            codes::SCOPE_RUN_MISMATCH,
            "only a qualification grant names a qualification run",
        ));
    };
    if q.campaign_id != grant.campaign_id || q.environment_id != grant.environment_id {
        return Err(refuse(
            codes::SCOPE_CAMPAIGN_MISMATCH,
            "the qualification is for another campaign or environment",
        ));
    }
    if q.grant_digest != grant.digest()
        || q.run_id != claims.run_id
        || !grant.routes.contains(&q.route)
    {
        return Err(refuse(
            codes::SCOPE_RUN_MISMATCH,
            "the qualification is not this grant's run or route",
        ));
    }
    if q.provenance != grant.provenance || q.policy_digest != grant.policy_digest {
        return Err(refuse(
            codes::SCOPE_INTENT_MISMATCH,
            "the qualification is for another intent or provenance",
        ));
    }
    Ok(())
}
