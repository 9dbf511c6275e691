//! The reports of the protected `campaign` commands (`policy register`, `enroll`,
//! `grant register`, `admit`, `settle`, `status`): their JSON contracts, built from the store's
//! values, and their terminal summaries. Every report was first printed as an untyped JSON
//! value and keeps its sorted keys ([`Report::SORTED_KEYS`]).

use crate::campaign::pipeline::{ComponentRef, ScopeDenied, Verified};
use crate::render::{Report, Summary, Verdict, clean, clean_or_dash};
use dpone_adapter_np_control_store as store;
use dpone_policy_model::scope::Limits;
use dpone_policy_runtime::DecisionEvidence;
use serde::Serialize;

/// A trust revision as recorded.
#[derive(Debug, Serialize)]
pub(super) struct TrustView {
    environment_id: String,
    revision: i64,
    policy_digest: String,
    root_digest: String,
    revocation_epoch: i64,
    recorded_at_unix: i64,
}

impl TrustView {
    pub(super) fn of(t: &store::TrustRevision) -> Self {
        Self {
            environment_id: t.environment.as_str().to_owned(),
            revision: t.revision,
            policy_digest: t.policy_digest.as_str().to_owned(),
            root_digest: t.root_digest.as_str().to_owned(),
            revocation_epoch: t.revocation_epoch,
            recorded_at_unix: t.recorded_at_unix,
        }
    }
}

/// A reservation as recorded.
#[derive(Debug, Serialize)]
pub(super) struct ReservationView {
    reservation_id: String,
    grant_id: String,
    phase: &'static str,
    grant_digest: String,
    trust_revision: i64,
    workload_id: String,
    attempt_id: String,
    source_rows: i64,
    source_bytes: i64,
    attempt_seconds: i64,
    resolved_by_probe: bool,
}

impl ReservationView {
    pub(super) fn of(r: &store::Reservation) -> Self {
        Self {
            reservation_id: r.reservation_id.as_str().to_owned(),
            grant_id: r.grant.grant_id.as_str().to_owned(),
            phase: r.grant.phase.as_str(),
            grant_digest: r.grant_digest.as_str().to_owned(),
            trust_revision: r.trust_revision,
            workload_id: r.workload.as_str().to_owned(),
            attempt_id: r.attempt.as_str().to_owned(),
            source_rows: r.source_rows,
            source_bytes: r.source_bytes,
            attempt_seconds: r.attempt_seconds,
            resolved_by_probe: r.resolved_by_probe,
        }
    }
}

/// A pool's key and charges.
#[derive(Debug, Serialize)]
pub(super) struct PoolView {
    environment_id: String,
    campaign_id: String,
    phase: &'static str,
    route: Option<Vec<String>>,
    members: i64,
    attempts: i64,
    reserved_source_rows: i64,
    reserved_source_bytes: i64,
    unresolved: i64,
    measured_source_rows: i64,
    measured_source_bytes: i64,
    measured_http_bytes: i64,
}

impl PoolView {
    pub(super) fn of(key: &store::PoolKey, p: &store::PoolStatus) -> Self {
        Self {
            environment_id: key.environment.as_str().to_owned(),
            campaign_id: key.campaign.as_str().to_owned(),
            phase: key.phase.as_str(),
            route: key.route.as_ref().map(|r| r.dims().to_vec()),
            members: p.members,
            attempts: p.attempts,
            reserved_source_rows: p.reserved_source_rows,
            reserved_source_bytes: p.reserved_source_bytes,
            unresolved: p.unresolved,
            measured_source_rows: p.measured_source_rows,
            measured_source_bytes: p.measured_source_bytes,
            measured_http_bytes: p.measured_http_bytes,
        }
    }
}

/// `campaign policy register`: the recorded trust revision.
#[derive(Debug, Serialize)]
pub(super) struct PolicyRecorded {
    pub(super) result: &'static str,
    pub(super) trust: TrustView,
}

impl Report for PolicyRecorded {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        Summary::of_fields(self)
    }
}

/// A participant's physical identity, by engine (its record's fields).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum IdentityView {
    /// `dpone.np-physical-identity.v1`.
    Postgresql {
        schema: &'static str,
        system_identifier: String,
        database_name: String,
        database_oid: u32,
    },
    /// `dpone.np-physical-identity.sqlserver.v1`.
    Sqlserver {
        schema: &'static str,
        database_name: String,
        database_id: i32,
        create_token: String,
        database_guid: String,
    },
    /// `dpone.np-physical-identity.clickhouse.v1`.
    Clickhouse {
        schema: &'static str,
        database_name: String,
        members: Vec<dpone_engine_nonproduction::enrollment::ClickhouseMember>,
    },
}

/// `campaign enroll`: the recorded (or reopened) enrollment.
#[derive(Debug, Serialize)]
pub(super) struct Enrolled {
    pub(super) result: &'static str,
    pub(super) environment_id: String,
    pub(super) enrollment_digest: String,
    pub(super) trust_revision: i64,
    pub(super) participant_id: String,
    pub(super) engine: &'static str,
    pub(super) identity: IdentityView,
    pub(super) identity_digest: String,
    pub(super) append_only: bool,
}

impl Report for Enrolled {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        Summary::of_fields(self)
    }
}

/// The activation request an execution grant's registration selected.
#[derive(Debug, Serialize)]
pub(super) struct ActivationSelection {
    pub(super) activation_id: String,
    pub(super) request_digest: String,
    pub(super) selection: &'static str,
}

/// What a registration did to the protected state beyond the registration itself (each key
/// only where it applies).
#[derive(Debug, Default, Serialize)]
pub(super) struct Protected {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) activation_request: Option<ActivationSelection>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) qualification_run: Option<&'static str>,
}

/// `campaign grant register`: the registration and the verification it was made under.
#[derive(Debug, Serialize)]
pub(super) struct GrantRegistered {
    pub(super) result: &'static str,
    pub(super) grant_id: String,
    pub(super) phase: &'static str,
    pub(super) grant_digest: String,
    pub(super) trust_revision: i64,
    pub(super) membership_charged: i64,
    pub(super) executor_permit: bool,
    pub(super) protected: Protected,
    pub(super) verification: Verified,
}

impl Report for GrantRegistered {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        Summary::of_fields(self)
    }
}

/// `campaign grant register`: the scope component denied a workload during the verification.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(super) struct RegisterRefused<'a>(pub(super) &'a ScopeDenied);

impl Report for RegisterRefused<'_> {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        Summary::of_fields(self)
    }
}

/// `campaign admit` refused: the code, the workload and the scope decision.
fn admit_refused(code: &str, workload: &str, decision: &str) -> Summary {
    let mut s = Summary::new(Verdict::Refused, clean(code));
    s.fact("workload", workload)
        .fact("scope decision", decision)
        .line("next", "nothing was reserved");
    s
}

/// `campaign admit`: the scope component denied a workload during the grant's verification.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(super) struct AdmitVerificationRefused<'a>(pub(super) &'a ScopeDenied);

impl Report for AdmitVerificationRefused<'_> {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        admit_refused(&self.0.code, &self.0.workload_id, self.0.decision)
    }
}

/// What the admission's authentication bracket guarantees.
pub(super) const BRACKET: &str = "equal trust revisions before and after verification";
/// Where an admitted attempt's scope decision was made.
pub(super) const ADMITTED_IN: &str =
    "the admission transaction, on the pool it read and committed against";
/// Where a denied attempt's scope decision was made.
pub(super) const DENIED_IN: &str = "the admission transaction, on the pool it read";
/// What the admission transaction re-checks.
pub(super) const TRANSACTION: &str = "SERIALIZABLE under the environment lock: trust revision, exact original bytes, database clock, revocation and ownership re-checked; the scope decision made on the transaction's own read";

/// The bracket the admission authenticated in.
#[derive(Debug, Serialize)]
pub(super) struct Authentication {
    pub(super) bracket: &'static str,
    pub(super) trust_revision: i64,
    pub(super) verification: Verified,
}

/// The scope decision committed with the reservation.
#[derive(Debug, Serialize)]
pub(super) struct AdmittedScope {
    pub(super) component: ComponentRef,
    pub(super) decision: &'static str,
    pub(super) decided_in: &'static str,
    pub(super) effective_limits: Limits,
    pub(super) pool_before: PoolView,
    pub(super) evidence: DecisionEvidence,
}

/// The evidence of an admission.
#[derive(Debug, Serialize)]
pub(super) struct AdmissionEvidence {
    pub(super) authentication: Authentication,
    pub(super) scope: AdmittedScope,
    pub(super) transaction: &'static str,
}

/// `campaign admit`: the reservation and its evidence.
#[derive(Debug, Serialize)]
pub(super) struct Admitted {
    pub(super) result: &'static str,
    pub(super) reservation: ReservationView,
    pub(super) evidence: AdmissionEvidence,
}

impl Report for Admitted {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        let r = &self.reservation;
        let mut s = Summary::new(Verdict::Done, "admitted");
        s.fact("reservation", &r.reservation_id)
            .fact("workload", &r.workload_id)
            .fact("attempt", &r.attempt_id)
            .fact("phase", r.phase)
            .line(
                "reserved",
                format!(
                    "{} rows, {} bytes, {} s",
                    clean(r.source_rows),
                    clean(r.source_bytes),
                    clean(r.attempt_seconds)
                ),
            )
            .fact("scope decision", self.evidence.scope.decision);
        s
    }
}

/// `campaign admit`: the scope component denied the attempt on the transaction's read.
#[derive(Debug, Serialize)]
pub(super) struct AdmitDenied {
    pub(super) result: &'static str,
    pub(super) workload_id: String,
    pub(super) decision: &'static str,
    pub(super) code: String,
    pub(super) decided_in: &'static str,
    pub(super) component: ComponentRef,
    pub(super) pool: PoolView,
    pub(super) evidence: DecisionEvidence,
}

impl Report for AdmitDenied {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        admit_refused(&self.code, &self.workload_id, self.decision)
    }
}

/// `campaign settle`: the recorded measurement.
#[derive(Debug, Serialize)]
pub(super) struct SettleRecorded {
    pub(super) result: &'static str,
    pub(super) reservation_id: String,
    pub(super) measured_source_rows: i64,
    pub(super) measured_source_bytes: i64,
    pub(super) measured_http_bytes: i64,
    pub(super) outcome: &'static str,
    pub(super) reservation_freed: bool,
}

impl Report for SettleRecorded {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        Summary::of_fields(self)
    }
}

/// A registration as recorded.
#[derive(Debug, Serialize)]
pub(super) struct RegistrationView {
    pub(super) grant_id: String,
    pub(super) phase: &'static str,
    pub(super) grant_digest: String,
    pub(super) original_size_bytes: usize,
    pub(super) registered_at_unix: i64,
    pub(super) not_after_unix: i64,
    pub(super) revocation_epoch: i64,
    pub(super) original_trust: TrustView,
}

impl RegistrationView {
    pub(super) fn of(h: &store::RegistrationHistory) -> Self {
        Self {
            grant_id: h.key.grant_id.as_str().to_owned(),
            phase: h.key.phase.as_str(),
            grant_digest: h.grant_digest.as_str().to_owned(),
            original_size_bytes: h.original_bytes.len(),
            registered_at_unix: h.registered_at_unix,
            not_after_unix: h.not_after_unix,
            revocation_epoch: h.revocation_epoch,
            original_trust: TrustView::of(&h.trust),
        }
    }
}

/// Whether the registration's authority still admits new work.
#[derive(Debug, Serialize)]
pub(super) struct AuthorityView {
    pub(super) expired: bool,
    pub(super) revoked: bool,
    pub(super) admits_new_work: bool,
    pub(super) note: &'static str,
}

impl AuthorityView {
    /// The authority of a registration that is or is not expired and revoked.
    pub(super) fn of(expired: bool, revoked: bool) -> Self {
        Self {
            expired,
            revoked,
            admits_new_work: !expired && !revoked,
            note: "history is read as recorded; new admission re-verifies current authority",
        }
    }
}

/// A run participant bound to a reservation.
#[derive(Debug, Serialize)]
pub(super) struct ParticipantView {
    role: &'static str,
    participant_id: String,
    identity_digest: String,
}

/// A settlement as recorded.
#[derive(Debug, Serialize)]
pub(super) struct SettlementView {
    measured_source_rows: i64,
    measured_source_bytes: i64,
    measured_http_bytes: i64,
    outcome: &'static str,
}

/// A reservation of the pool, settled or unresolved.
#[derive(Debug, Serialize)]
pub(super) struct ListedView {
    #[serde(flatten)]
    reservation: ReservationView,
    reserved_at_unix: i64,
    run_claimed_at_unix: Option<i64>,
    participants: Vec<ParticipantView>,
    state: &'static str,
    settlement: Option<SettlementView>,
}

impl ListedView {
    pub(super) fn of(l: &store::ListedReservation) -> Self {
        Self {
            reservation: ReservationView::of(&l.reservation),
            reserved_at_unix: l.reserved_at_unix,
            run_claimed_at_unix: l.run_claimed_at_unix,
            participants: l
                .run_participants
                .iter()
                .map(|p| ParticipantView {
                    role: p.role.as_str(),
                    participant_id: p.participant_id.clone(),
                    identity_digest: p.identity_digest.as_str().to_owned(),
                })
                .collect(),
            state: if l.settlement.is_some() {
                "settled"
            } else {
                "unresolved"
            },
            settlement: l.settlement.as_ref().map(|s| SettlementView {
                measured_source_rows: s.measured_source_rows,
                measured_source_bytes: s.measured_source_bytes,
                measured_http_bytes: s.measured_http_bytes,
                outcome: s.outcome.as_str(),
            }),
        }
    }
}

/// A reservation asked for by id: as recorded, or not found.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(super) enum Probed {
    /// Found.
    Found(ReservationView),
    /// No reservation has this id (`"found": false`).
    Missing {
        /// The id asked for.
        reservation_id: String,
        /// `false`.
        found: bool,
    },
}

/// `campaign status`: a registration's history, its pool and reservations.
#[derive(Debug, Serialize)]
pub(super) struct Status {
    pub(super) result: &'static str,
    pub(super) registration: RegistrationView,
    pub(super) current_trust: Option<TrustView>,
    pub(super) current_authority: AuthorityView,
    pub(super) pool: PoolView,
    pub(super) reservations: Vec<ListedView>,
    pub(super) probed: Vec<Probed>,
}

impl Report for Status {
    const SORTED_KEYS: bool = true;

    fn summary(&self) -> Summary {
        let a = &self.current_authority;
        let mut s = if a.admits_new_work {
            Summary::new(Verdict::Done, "admits new work")
        } else if a.revoked {
            Summary::new(Verdict::Refused, "revoked: admits no new work")
        } else {
            Summary::new(Verdict::Refused, "expired: admits no new work")
        };
        let r = &self.registration;
        let p = &self.pool;
        s.fact("grant", &r.grant_id)
            .fact("phase", r.phase)
            .line(
                "trust revision",
                format!(
                    "{} registered, {} current",
                    clean(r.original_trust.revision),
                    clean_or_dash(self.current_trust.as_ref().map(|t| t.revision))
                ),
            )
            .line(
                "attempts",
                format!("{} ({} unresolved)", clean(p.attempts), clean(p.unresolved)),
            )
            .line(
                "reserved",
                format!(
                    "{} rows, {} bytes",
                    clean(p.reserved_source_rows),
                    clean(p.reserved_source_bytes)
                ),
            )
            .line(
                "measured",
                format!(
                    "{} rows, {} bytes, {} http bytes",
                    clean(p.measured_source_rows),
                    clean(p.measured_source_bytes),
                    clean(p.measured_http_bytes)
                ),
            )
            .line("reservations", self.reservations.len().to_string());
        for probed in self.probed.iter().take(5) {
            let (id, found) = match probed {
                Probed::Found(r) => (&r.reservation_id, true),
                Probed::Missing {
                    reservation_id,
                    found,
                } => (reservation_id, *found),
            };
            s.line(
                "probed",
                format!(
                    "{} {}",
                    clean(id),
                    if found { "found" } else { "not found" }
                ),
            );
        }
        if p.unresolved > 0 {
            s.line(
                "next",
                "an unresolved reservation blocks its workload's next attempt: settle it (campaign settle)",
            );
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::pipeline::samples;
    use crate::render::golden::{assert_pinned, assert_prints_as};
    use dpone_engine_nonproduction::enrollment::{ConnectionRole, RunParticipant};
    use serde_json::{Value, json};

    fn digest(hex: char) -> store::Sha256Digest {
        store::Sha256Digest::parse("digest", &format!("sha256:{}", hex.to_string().repeat(64)))
            .expect("digest")
    }

    fn uuid(s: &str) -> store::Uuid {
        store::Uuid::parse("uuid", s).expect("uuid")
    }

    const ENVIRONMENT: &str = "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d";
    const CAMPAIGN: &str = "0d9e8f7a-6b5c-4d3e-9f2a-1b0c9d8e7f6a";
    const GRANT: &str = "6f1c2a9e-3b4d-4e5f-8a6b-7c8d9e0f1a2b";

    fn trust(revision: i64, epoch: i64) -> store::TrustRevision {
        store::TrustRevision {
            environment: uuid(ENVIRONMENT),
            revision,
            policy_digest: digest('a'),
            policy_bytes: b"{}".to_vec(),
            root_digest: digest('e'),
            revocation_epoch: epoch,
            limits: store::Limits {
                workloads: 3,
                attempts: 6,
                source_rows: 1_000_000,
                source_bytes: 50_000_000,
                attempt_seconds: 900,
            },
            max_validity_seconds: 86_400,
            recorded_at_unix: 1_796_000_000 + revision,
        }
    }

    fn grant_key(phase: store::Phase) -> store::GrantKey {
        store::GrantKey {
            grant_id: uuid(GRANT),
            phase,
        }
    }

    fn reservation(hex: char, workload: &str, attempt: &str) -> store::Reservation {
        store::Reservation {
            reservation_id: digest(hex),
            grant: grant_key(store::Phase::Execution),
            grant_digest: digest('b'),
            trust_revision: 2,
            workload: store::WorkloadId::new(workload).expect("workload"),
            attempt: store::AttemptId::new(attempt).expect("attempt"),
            source_rows: 10_000,
            source_bytes: 2_000_000,
            attempt_seconds: 600,
            resolved_by_probe: false,
        }
    }

    fn pool_key(route: bool) -> store::PoolKey {
        store::PoolKey {
            environment: uuid(ENVIRONMENT),
            campaign: uuid(CAMPAIGN),
            phase: if route {
                store::Phase::Qualification
            } else {
                store::Phase::Execution
            },
            route: route.then(|| {
                store::Route::new(["postgresql", "16", "xmin", "clickhouse", "24", "rowbinary"])
                    .expect("route")
            }),
        }
    }

    fn pool(unresolved: i64) -> store::PoolStatus {
        store::PoolStatus {
            members: 2,
            attempts: 3,
            reserved_source_rows: 30_000,
            reserved_source_bytes: 6_000_000,
            unresolved,
            measured_source_rows: 18_250,
            measured_source_bytes: 3_100_000,
            measured_http_bytes: 1_200_000,
        }
    }

    fn old_trust(t: &store::TrustRevision) -> Value {
        json!({
            "environment_id": t.environment.as_str(),
            "revision": t.revision,
            "policy_digest": t.policy_digest.as_str(),
            "root_digest": t.root_digest.as_str(),
            "revocation_epoch": t.revocation_epoch,
            "recorded_at_unix": t.recorded_at_unix,
        })
    }

    fn old_reservation(r: &store::Reservation) -> Value {
        json!({
            "reservation_id": r.reservation_id.as_str(),
            "grant_id": r.grant.grant_id.as_str(),
            "phase": r.grant.phase.as_str(),
            "grant_digest": r.grant_digest.as_str(),
            "trust_revision": r.trust_revision,
            "workload_id": r.workload.as_str(),
            "attempt_id": r.attempt.as_str(),
            "source_rows": r.source_rows,
            "source_bytes": r.source_bytes,
            "attempt_seconds": r.attempt_seconds,
            "resolved_by_probe": r.resolved_by_probe,
        })
    }

    fn old_pool(key: &store::PoolKey, p: &store::PoolStatus) -> Value {
        json!({
            "environment_id": key.environment.as_str(),
            "campaign_id": key.campaign.as_str(),
            "phase": key.phase.as_str(),
            "route": key.route.as_ref().map(|r| r.dims().to_vec()),
            "members": p.members,
            "attempts": p.attempts,
            "reserved_source_rows": p.reserved_source_rows,
            "reserved_source_bytes": p.reserved_source_bytes,
            "unresolved": p.unresolved,
            "measured_source_rows": p.measured_source_rows,
            "measured_source_bytes": p.measured_source_bytes,
            "measured_http_bytes": p.measured_http_bytes,
        })
    }

    #[test]
    fn policy_register_keeps_its_json_and_summary() {
        let t = trust(2, 4);
        let r = PolicyRecorded {
            result: "recorded",
            trust: TrustView::of(&t),
        };
        assert_prints_as(&r, &json!({"result": "recorded", "trust": old_trust(&t)}));
        assert_pinned("campaign_policy_register", &r);
    }

    #[test]
    fn enroll_keeps_its_json_and_summary() {
        let r = Enrolled {
            result: "enrolled",
            environment_id: ENVIRONMENT.to_owned(),
            enrollment_digest: digest('f').as_str().to_owned(),
            trust_revision: 2,
            participant_id: "pg-source".to_owned(),
            engine: "postgresql",
            identity: IdentityView::Postgresql {
                schema: dpone_engine_nonproduction::enrollment::IDENTITY_SCHEMA,
                system_identifier: "7301234567890123456".to_owned(),
                database_name: "shop".to_owned(),
                database_oid: 16_384,
            },
            identity_digest: digest('9').as_str().to_owned(),
            append_only: true,
        };
        let old = json!({
            "result": "enrolled",
            "environment_id": ENVIRONMENT,
            "enrollment_digest": digest('f').as_str(),
            "trust_revision": 2,
            "participant_id": "pg-source",
            "engine": "postgresql",
            "identity": {
                "schema": dpone_engine_nonproduction::enrollment::IDENTITY_SCHEMA,
                "system_identifier": "7301234567890123456",
                "database_name": "shop",
                "database_oid": 16_384,
            },
            "identity_digest": digest('9').as_str(),
            "append_only": true,
        });
        assert_prints_as(&r, &old);
        assert_pinned("campaign_enroll", &r);
    }

    #[test]
    fn grant_register_keeps_its_json_and_summary() {
        let verification = samples::verified();
        let old_verification = serde_json::to_value(&verification).expect("evidence");
        let r = GrantRegistered {
            result: "registered",
            grant_id: GRANT.to_owned(),
            phase: "execution",
            grant_digest: digest('b').as_str().to_owned(),
            trust_revision: 2,
            membership_charged: 2,
            executor_permit: true,
            protected: Protected {
                activation_request: Some(ActivationSelection {
                    activation_id: "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716".to_owned(),
                    request_digest: digest('d').as_str().to_owned(),
                    selection: "selected",
                }),
                qualification_run: None,
            },
            verification,
        };
        let old = json!({
            "result": "registered",
            "grant_id": GRANT,
            "phase": "execution",
            "grant_digest": digest('b').as_str(),
            "trust_revision": 2,
            "membership_charged": 2,
            "executor_permit": true,
            "protected": {"activation_request": {
                "activation_id": "5e4d3c2b-1a09-4f8e-9d7c-6b5a49382716",
                "request_digest": digest('d').as_str(),
                "selection": "selected",
            }},
            "verification": old_verification,
        });
        assert_prints_as(&r, &old);
        assert_pinned("campaign_grant_register", &r);

        let mut q = GrantRegistered {
            result: "reopened_as_history",
            phase: "qualification",
            membership_charged: 0,
            executor_permit: false,
            protected: Protected {
                activation_request: None,
                qualification_run: Some("consumed"),
            },
            ..r
        };
        q.verification.phase = "qualification";
        let mut old = old;
        old["result"] = json!("reopened_as_history");
        old["phase"] = json!("qualification");
        old["membership_charged"] = json!(0);
        old["executor_permit"] = json!(false);
        old["protected"] = json!({"qualification_run": "consumed"});
        old["verification"]["phase"] = json!("qualification");
        assert_prints_as(&q, &old);
        assert_pinned("campaign_grant_reopened", &q);
        q.protected.qualification_run = None;
        old["protected"] = json!({});
        assert_prints_as(&q, &old);
    }

    #[test]
    fn a_verification_refusal_keeps_its_json_and_each_commands_summary() {
        let d = samples::denied();
        let old = serde_json::to_value(&d).expect("evidence");
        assert_prints_as(&RegisterRefused(&d), &old);
        assert_pinned("campaign_grant_refused", &RegisterRefused(&d));
        assert_prints_as(&AdmitVerificationRefused(&d), &old);
        assert_pinned(
            "campaign_admit_verification_refused",
            &AdmitVerificationRefused(&d),
        );
    }

    fn component() -> ComponentRef {
        ComponentRef {
            kind: "scope",
            sha256: format!("sha256:{}", "1".repeat(64)),
            pinned: true,
        }
    }

    #[test]
    fn admit_keeps_its_json_and_summary() {
        let reservation = reservation('7', "pg-customers", "attempt-1");
        let key = pool_key(false);
        let before = pool(0);
        let verification = samples::verified();
        let old_verification = serde_json::to_value(&verification).expect("evidence");
        let effective = samples::verified().scope.decisions[0].effective_limits;
        let evidence = samples::evidence(json!({"admit": {}}), 5123);
        let old_evidence = serde_json::to_value(&evidence).expect("evidence");
        let r = Admitted {
            result: "admitted",
            reservation: ReservationView::of(&reservation),
            evidence: AdmissionEvidence {
                authentication: Authentication {
                    bracket: BRACKET,
                    trust_revision: 2,
                    verification,
                },
                scope: AdmittedScope {
                    component: component(),
                    decision: "admit",
                    decided_in: ADMITTED_IN,
                    effective_limits: effective,
                    pool_before: PoolView::of(&key, &before),
                    evidence,
                },
                transaction: TRANSACTION,
            },
        };
        let old = json!({
            "result": "admitted",
            "reservation": old_reservation(&reservation),
            "evidence": {
                "authentication": {
                    "bracket": "equal trust revisions before and after verification",
                    "trust_revision": 2,
                    "verification": old_verification,
                },
                "scope": {
                    "component": {"kind": "scope", "sha256": format!("sha256:{}", "1".repeat(64)), "pinned": true},
                    "decision": "admit",
                    "decided_in": "the admission transaction, on the pool it read and committed against",
                    "effective_limits": {
                        "max_workloads": effective.max_workloads,
                        "max_attempts": effective.max_attempts,
                        "max_source_rows": effective.max_source_rows,
                        "max_source_bytes": effective.max_source_bytes,
                        "max_attempt_seconds": effective.max_attempt_seconds,
                    },
                    "pool_before": old_pool(&key, &before),
                    "evidence": old_evidence,
                },
                "transaction": "SERIALIZABLE under the environment lock: trust revision, exact original bytes, database clock, revocation and ownership re-checked; the scope decision made on the transaction's own read",
            },
        });
        assert_prints_as(&r, &old);
        assert_pinned("campaign_admit_admitted", &r);
    }

    #[test]
    fn an_admission_denial_keeps_its_json_and_summary() {
        let key = pool_key(true);
        let before = pool(1);
        let evidence = samples::evidence(
            json!({"deny": {"code": "DPONE_SCOPE_POOL_EXHAUSTED"}}),
            4870,
        );
        let old_evidence = serde_json::to_value(&evidence).expect("evidence");
        let r = AdmitDenied {
            result: "refused",
            workload_id: "pg-orders".to_owned(),
            decision: "deny",
            code: "DPONE_SCOPE_POOL_EXHAUSTED".to_owned(),
            decided_in: DENIED_IN,
            component: component(),
            pool: PoolView::of(&key, &before),
            evidence,
        };
        let old = json!({
            "result": "refused",
            "workload_id": "pg-orders",
            "decision": "deny",
            "code": "DPONE_SCOPE_POOL_EXHAUSTED",
            "decided_in": "the admission transaction, on the pool it read",
            "component": {"kind": "scope", "sha256": format!("sha256:{}", "1".repeat(64)), "pinned": true},
            "pool": old_pool(&key, &before),
            "evidence": old_evidence,
        });
        assert_prints_as(&r, &old);
        assert_pinned("campaign_admit_denied", &r);
    }

    #[test]
    fn settle_keeps_its_json_and_summary() {
        let r = SettleRecorded {
            result: "recorded",
            reservation_id: digest('7').as_str().to_owned(),
            measured_source_rows: 9_120,
            measured_source_bytes: 1_750_000,
            measured_http_bytes: 640_000,
            outcome: store::AttemptOutcome::Succeeded.as_str(),
            reservation_freed: false,
        };
        let old = json!({
            "result": "recorded",
            "reservation_id": digest('7').as_str(),
            "measured_source_rows": 9_120,
            "measured_source_bytes": 1_750_000,
            "measured_http_bytes": 640_000,
            "outcome": store::AttemptOutcome::Succeeded.as_str(),
            "reservation_freed": false,
        });
        assert_prints_as(&r, &old);
        assert_pinned("campaign_settle", &r);
    }

    /// `status` of a registration with one settled and one unresolved reservation, and two
    /// reservations asked for by id (one found, one not).
    fn status_inputs() -> (
        store::RegistrationHistory,
        Vec<store::ListedReservation>,
        Vec<Option<store::Reservation>>,
    ) {
        let history = store::RegistrationHistory {
            key: grant_key(store::Phase::Execution),
            grant_digest: digest('b'),
            original_bytes: vec![b'{'; 1_234],
            trust: trust(1, 3),
            registered_at_unix: 1_796_001_000,
            not_after_unix: 1_796_500_000,
            revocation_epoch: 3,
        };
        let settled = store::ListedReservation {
            reservation: reservation('7', "pg-customers", "attempt-1"),
            reserved_at_unix: 1_796_002_000,
            settlement: Some(store::Settlement {
                reservation_id: digest('7'),
                measured_source_rows: 9_120,
                measured_source_bytes: 1_750_000,
                measured_http_bytes: 640_000,
                outcome: store::AttemptOutcome::Succeeded,
            }),
            run_claimed_at_unix: Some(1_796_002_010),
            run_participants: vec![RunParticipant {
                role: ConnectionRole::Source,
                participant_id: "pg-source".to_owned(),
                identity_digest: digest('9'),
            }],
        };
        let unresolved = store::ListedReservation {
            reservation: reservation('8', "pg-orders", "attempt-1"),
            reserved_at_unix: 1_796_003_000,
            settlement: None,
            run_claimed_at_unix: None,
            run_participants: Vec::new(),
        };
        let probed = vec![Some(reservation('8', "pg-orders", "attempt-1")), None];
        (history, vec![settled, unresolved], probed)
    }

    fn status_report(
        history: &store::RegistrationHistory,
        listed: &[store::ListedReservation],
        probed: &[Option<store::Reservation>],
        current: Option<&store::TrustRevision>,
        (expired, revoked): (bool, bool),
        unresolved: i64,
    ) -> (Status, Value) {
        let key = pool_key(false);
        let pool = pool(unresolved);
        let missing = digest('0');
        let report = Status {
            result: "history",
            registration: RegistrationView::of(history),
            current_trust: current.map(TrustView::of),
            current_authority: AuthorityView::of(expired, revoked),
            pool: PoolView::of(&key, &pool),
            reservations: listed.iter().map(ListedView::of).collect(),
            probed: probed
                .iter()
                .map(|p| match p {
                    Some(r) => Probed::Found(ReservationView::of(r)),
                    None => Probed::Missing {
                        reservation_id: missing.as_str().to_owned(),
                        found: false,
                    },
                })
                .collect(),
        };
        // The value the command built before its report was typed.
        let old_probed: Vec<Value> = probed
            .iter()
            .map(|p| match p {
                Some(r) => old_reservation(r),
                None => json!({"reservation_id": missing.as_str(), "found": false}),
            })
            .collect();
        let reservations: Vec<Value> = listed
            .iter()
            .map(|l| {
                let mut v = old_reservation(&l.reservation);
                v["reserved_at_unix"] = json!(l.reserved_at_unix);
                v["run_claimed_at_unix"] = json!(l.run_claimed_at_unix);
                v["participants"] = l
                    .run_participants
                    .iter()
                    .map(|p| {
                        json!({
                            "role": p.role.as_str(),
                            "participant_id": p.participant_id,
                            "identity_digest": p.identity_digest.as_str(),
                        })
                    })
                    .collect();
                v["state"] = json!(if l.settlement.is_some() {
                    "settled"
                } else {
                    "unresolved"
                });
                v["settlement"] = match &l.settlement {
                    Some(s) => json!({
                        "measured_source_rows": s.measured_source_rows,
                        "measured_source_bytes": s.measured_source_bytes,
                        "measured_http_bytes": s.measured_http_bytes,
                        "outcome": s.outcome.as_str(),
                    }),
                    None => Value::Null,
                };
                v
            })
            .collect();
        let old = json!({
            "result": "history",
            "registration": {
                "grant_id": history.key.grant_id.as_str(),
                "phase": history.key.phase.as_str(),
                "grant_digest": history.grant_digest.as_str(),
                "original_size_bytes": history.original_bytes.len(),
                "registered_at_unix": history.registered_at_unix,
                "not_after_unix": history.not_after_unix,
                "revocation_epoch": history.revocation_epoch,
                "original_trust": old_trust(&history.trust),
            },
            "current_trust": current.map(old_trust),
            "current_authority": {
                "expired": expired,
                "revoked": revoked,
                "admits_new_work": !expired && !revoked,
                "note": "history is read as recorded; new admission re-verifies current authority",
            },
            "pool": old_pool(&key, &pool),
            "reservations": reservations,
            "probed": old_probed,
        });
        (report, old)
    }

    #[test]
    fn status_keeps_its_json_and_summary() {
        let (history, listed, probed) = status_inputs();
        let current = trust(2, 3);
        let (r, old) = status_report(
            &history,
            &listed,
            &probed,
            Some(&current),
            (false, false),
            1,
        );
        assert_prints_as(&r, &old);
        assert_pinned("campaign_status_admits", &r);

        let revoked = trust(3, 4);
        let (r, old) = status_report(&history, &listed, &[], Some(&revoked), (false, true), 0);
        assert_prints_as(&r, &old);
        assert_pinned("campaign_status_revoked", &r);

        let (r, old) = status_report(&history, &[], &probed, None, (true, false), 0);
        assert_prints_as(&r, &old);
        assert_pinned("campaign_status_expired", &r);
    }
}
