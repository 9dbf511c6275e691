//! The mapping from verified nonproduction documents to the plain values of the control store's
//! port ([`crate::control_store`]); the store adapter never parses a signed document.
//!
//! Every value goes through the port's validating constructors, so a mapping that could store
//! something malformed refuses with `DPONE_NP_STORE_INVALID_INPUT` before anything is written.

use crate::authority::PhaseSubjects;
use crate::common;
use crate::control_store as store;
use crate::{Authority, AuthorityPolicy, Composition, Document};
use store::{StoreCode, StoreError};

fn int(field: &str, v: u64) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| {
        StoreError::new(
            StoreCode::InvalidInput,
            format!("{field}: out of the store's range"),
        )
    })
}

/// The document's limits as the store's.
pub fn limits(l: &common::Limits) -> Result<store::Limits, StoreError> {
    Ok(store::Limits {
        workloads: i64::from(l.max_workloads),
        attempts: i64::from(l.max_attempts),
        source_rows: int("max_source_rows", l.max_source_rows)?,
        source_bytes: int("max_source_bytes", l.max_source_bytes)?,
        attempt_seconds: i64::from(l.max_attempt_seconds),
    })
}

/// The exact route in the contract's dimension order: source engine, source participant,
/// target engine, target participant, mode, workload kind.
pub fn route(r: &common::Route) -> Result<store::Route, StoreError> {
    store::Route::new([
        r.source_engine.as_str(),
        r.source_participant.as_str(),
        r.target_engine.as_str(),
        r.target_participant.as_str(),
        r.mode.as_str(),
        r.workload_kind.as_str(),
    ])
}

/// The environment the policy enrolls (the trust revisions' key).
pub fn environment(policy: &AuthorityPolicy) -> Result<store::Uuid, StoreError> {
    store::Uuid::parse("environment_id", policy.enrollment.environment_id.as_str())
}

/// A trust revision to record: the pinned policy's canonical bytes, the trusted-root digest it
/// pins, the revocation epoch (at least the policy's floor; checked by the caller), its
/// ceilings and validity ceiling.
pub fn policy_record(
    policy: &AuthorityPolicy,
    revocation_epoch: u64,
) -> Result<store::PolicyRecord, StoreError> {
    let record = store::PolicyRecord {
        environment: environment(policy)?,
        policy_bytes: policy.canonical_bytes(),
        root_digest: store::Sha256Digest::parse(
            "trusted_root_digest",
            policy.signer.trusted_root_digest.as_str(),
        )?,
        revocation_epoch: int("revocation_epoch", revocation_epoch)?,
        limits: limits(&policy.ceilings)?,
        max_validity_seconds: int("max_validity_seconds", policy.max_validity_seconds)?,
    };
    record.validate()?;
    Ok(record)
}

/// The grant's registration key.
pub fn grant_key(grant: &Authority) -> Result<store::GrantKey, StoreError> {
    Ok(store::GrantKey {
        grant_id: store::Uuid::parse("grant_id", grant.grant_id.as_str())?,
        phase: match grant.phase_subjects {
            PhaseSubjects::Qualification(_) => store::Phase::Qualification,
            PhaseSubjects::Execution(_) => store::Phase::Execution,
        },
    })
}

/// The pool a grant charges: environment/campaign/phase, plus the exact route for a
/// qualification grant's rows and bytes.
pub fn pool_key(grant: &Authority) -> Result<store::PoolKey, StoreError> {
    let key = grant_key(grant)?;
    let route = match &grant.phase_subjects {
        PhaseSubjects::Qualification(_) => Some(route(single_route(grant)?)?),
        PhaseSubjects::Execution(_) => None,
    };
    Ok(store::PoolKey {
        environment: store::Uuid::parse("environment_id", grant.environment_id.as_str())?,
        campaign: store::Uuid::parse("campaign_id", grant.campaign_id.as_str())?,
        phase: key.phase,
        route,
    })
}

fn single_route(grant: &Authority) -> Result<&common::Route, StoreError> {
    match grant.routes.as_slice() {
        [one] => Ok(one),
        _ => Err(StoreError::new(
            StoreCode::InvalidInput,
            "routes: a qualification grant names exactly one route",
        )),
    }
}

/// The immutable registration of a verified grant: its exact original bytes and the typed facts
/// read from it. The workload membership with each workload's lower signed ceilings comes from
/// the composition the grant was verified with: for execution the grant's exact membership; for
/// qualification the composition's workloads on the grant's one route. Each workload is
/// registered with the composition's `pack_digest` for it, which binds a run under its
/// reservation to a manifest of exactly those bytes.
pub fn registration(
    grant: &Authority,
    original_bytes: &[u8],
    composition: &Composition,
) -> Result<store::GrantRegistration, StoreError> {
    let (subject, ids): (store::PhaseSubject, Vec<&str>) = match &grant.phase_subjects {
        PhaseSubjects::Qualification(q) => {
            let r = single_route(grant)?;
            (
                store::PhaseSubject::Qualification {
                    run_id: store::Uuid::parse("run_id", q.run_id.as_str())?,
                    route: route(r)?,
                },
                composition
                    .workloads
                    .iter()
                    .filter(|w| &w.route == r)
                    .map(|w| w.workload_id.as_str())
                    .collect(),
            )
        }
        PhaseSubjects::Execution(e) => (
            store::PhaseSubject::Execution {
                activation_id: store::Uuid::parse("activation_id", e.activation_id.as_str())?,
            },
            e.membership
                .iter()
                .map(|m| m.workload_id.as_str())
                .collect(),
        ),
    };
    let mut workloads = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(w) = composition.workload(id) else {
            return Err(StoreError::new(
                StoreCode::InvalidInput,
                "membership: a member is not in the composition",
            ));
        };
        workloads.push(store::WorkloadLimits {
            workload: store::WorkloadId::new(id)?,
            pack_digest: store::Sha256Digest::parse("pack_digest", w.pack_digest.as_str())?,
            limits: limits(&w.limits)?,
        });
    }
    let registration = store::GrantRegistration {
        grant_id: store::Uuid::parse("grant_id", grant.grant_id.as_str())?,
        environment: store::Uuid::parse("environment_id", grant.environment_id.as_str())?,
        campaign: store::Uuid::parse("campaign_id", grant.campaign_id.as_str())?,
        original_bytes: original_bytes.to_vec(),
        revocation_epoch: int("revocation_epoch", grant.revocation_epoch)?,
        not_before_unix: int("validity.not_before", grant.validity.not_before)?,
        not_after_unix: int("validity.not_after", grant.validity.not_after)?,
        limits: limits(&grant.limits)?,
        subject,
        workloads,
    };
    registration.validate()?;
    Ok(registration)
}

/// The scoped activation request as the activation coordinator records it.
pub fn activation_request(
    request: &crate::ActivationRequest,
) -> Result<store::ActivationRequest, StoreError> {
    let r = store::ActivationRequest {
        activation_id: store::Uuid::parse("activation_id", request.activation_id.as_str())?,
        grant_digest: store::Sha256Digest::parse(
            "execution_grant_digest",
            request.execution_grant_digest.as_str(),
        )?,
        request_bytes: request.canonical_bytes(),
    };
    r.validate()?;
    Ok(r)
}

/// The pool as the scope component sees it. The store charges every reservation its complete
/// bound forever (a settlement never lowers a charge), so every reserved row and byte counts as
/// used; attempts split into settled (used) and unresolved (reserved); membership was charged
/// at registration.
pub fn pool_usage(
    grant: &Authority,
    status: &store::PoolStatus,
) -> dpone_policy_model::scope::PoolUsage {
    use dpone_policy_model::scope::Phase;
    pool_usage_of(
        grant.environment_id.as_str(),
        grant.campaign_id.as_str(),
        match grant.phase_subjects {
            PhaseSubjects::Qualification(_) => Phase::Qualification,
            PhaseSubjects::Execution(_) => Phase::Execution,
        },
        status,
    )
}

/// [`pool_usage`] of the pool named by `environment`, `campaign` and `phase` (a queued
/// request's facts name it already).
pub fn pool_usage_of(
    environment: &str,
    campaign: &str,
    phase: dpone_policy_model::scope::Phase,
    status: &store::PoolStatus,
) -> dpone_policy_model::scope::PoolUsage {
    use dpone_policy_model::scope::PoolUsage;
    let u32_of = |v: i64| u32::try_from(v.max(0)).unwrap_or(u32::MAX);
    let u64_of = |v: i64| u64::try_from(v.max(0)).unwrap_or(u64::MAX);
    PoolUsage {
        environment_id: environment.to_owned(),
        campaign_id: campaign.to_owned(),
        phase,
        workloads: u32_of(status.members),
        attempts: u32_of(status.attempts - status.unresolved),
        source_rows: u64_of(status.reserved_source_rows),
        source_bytes: u64_of(status.reserved_source_bytes),
        reserved_workloads: 0,
        reserved_attempts: u32_of(status.unresolved),
        reserved_source_rows: 0,
        reserved_source_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &[u8] = include_bytes!("../../../../fixtures/nonproduction/policy.json");
    const EXECUTION: &[u8] =
        include_bytes!("../../../../fixtures/nonproduction/authority-execution.json");
    const QUALIFICATION: &[u8] =
        include_bytes!("../../../../fixtures/nonproduction/authority-qualification.json");
    const COMPOSITION: &[u8] =
        include_bytes!("../../../../fixtures/nonproduction/composition.json");

    fn trimmed(b: &[u8]) -> &[u8] {
        b.strip_suffix(b"\n").unwrap_or(b)
    }

    fn doc<T: Document>(b: &[u8]) -> T {
        T::parse(trimmed(b)).expect("frozen fixture parses")
    }

    #[test]
    fn an_execution_grant_registers_its_exact_membership_with_the_compositions_ceilings() {
        // Tier: unit (pure).
        let grant: Authority = doc(EXECUTION);
        let composition: Composition = doc(COMPOSITION);
        let r = registration(&grant, trimmed(EXECUTION), &composition).expect("maps");
        assert_eq!(r.original_bytes, trimmed(EXECUTION));
        assert_eq!(r.key().phase, store::Phase::Execution);
        assert_eq!(r.grant_id.as_str(), "f1c8e5a3-7d2b-4e96-8a3f-2b9d4c6e0a17");
        assert_eq!(
            r.subject,
            store::PhaseSubject::Execution {
                activation_id: store::Uuid::parse("a", "d6a3f8b2-5e1c-4b79-9c04-3a7e2d8f1b65")
                    .expect("uuid"),
            }
        );
        let ids: Vec<&str> = r.workloads.iter().map(|w| w.workload.as_str()).collect();
        assert_eq!(
            ids,
            ["dbt-orders-mart", "export-orders-mart", "pg-customers"]
        );
        let pg = &r.workloads[2].limits;
        assert_eq!((pg.source_rows, pg.attempt_seconds), (20_000, 900));
        for w in &r.workloads {
            assert_eq!(
                w.pack_digest.as_str(),
                composition
                    .workload(w.workload.as_str())
                    .expect("in the composition")
                    .pack_digest
                    .as_str(),
                "each workload is registered with the composition's pack digest"
            );
        }
        assert_eq!(r.limits.attempts, 24);
        assert_eq!(r.not_after_unix - r.not_before_unix, 86_400);
        assert_eq!(pool_key(&grant).expect("pool").route, None);
    }

    #[test]
    fn a_qualification_grant_registers_the_workloads_on_its_one_route_in_dimension_order() {
        // Tier: unit (pure).
        let grant: Authority = doc(QUALIFICATION);
        let composition: Composition = doc(COMPOSITION);
        let r = registration(&grant, trimmed(QUALIFICATION), &composition).expect("maps");
        let ids: Vec<&str> = r.workloads.iter().map(|w| w.workload.as_str()).collect();
        assert_eq!(ids, ["export-orders-mart"]);
        let store::PhaseSubject::Qualification { run_id, route } = &r.subject else {
            panic!("a qualification subject");
        };
        assert_eq!(run_id.as_str(), "7a1c4e93-2f5b-4d80-96e3-1b8c0d7f2a45");
        assert_eq!(
            route.dims(),
            &[
                "sqlserver",
                "synth-mssql-read",
                "clickhouse",
                "synth-ch-write",
                "full_refresh",
                "generated_export"
            ]
            .map(str::to_owned)
        );
        assert_eq!(pool_key(&grant).expect("pool").route.as_ref(), Some(route));
    }

    #[test]
    fn a_policy_record_carries_the_pinned_bytes_root_and_epoch() {
        // Tier: unit (pure).
        let policy: AuthorityPolicy = doc(POLICY);
        let r = policy_record(&policy, 5).expect("maps");
        assert_eq!(r.policy_bytes, trimmed(POLICY));
        assert_eq!(r.revocation_epoch, 5);
        assert_eq!(
            r.root_digest.as_str(),
            policy.signer.trusted_root_digest.as_str()
        );
        assert_eq!(r.limits, store::CEILINGS);
        assert_eq!(r.max_validity_seconds, 86_400);
        assert_eq!(
            policy_record(&policy, u64::MAX).unwrap_err().code,
            StoreCode::InvalidInput
        );
    }

    #[test]
    fn the_component_sees_every_reservation_charged_and_only_unresolved_attempts_reserved() {
        // Tier: unit (pure).
        let grant: Authority = doc(EXECUTION);
        let status = store::PoolStatus {
            members: 3,
            attempts: 5,
            reserved_source_rows: 700,
            reserved_source_bytes: 9_000,
            unresolved: 2,
            measured_source_rows: 10,
            measured_source_bytes: 20,
            measured_http_bytes: 30,
        };
        let u = pool_usage(&grant, &status);
        assert_eq!((u.workloads, u.reserved_workloads), (3, 0));
        assert_eq!((u.attempts, u.reserved_attempts), (3, 2));
        assert_eq!((u.source_rows, u.reserved_source_rows), (700, 0));
        assert_eq!((u.source_bytes, u.reserved_source_bytes), (9_000, 0));
        assert_eq!(u.phase, dpone_policy_model::scope::Phase::Execution);
        assert_eq!(u.campaign_id, grant.campaign_id.as_str());
    }
}
