//! Group admission: the queue of admissions behind the environment lock.
//!
//! A request is appended to `np_admission_request` by its requester before it takes the
//! environment lock. This store queues admissions only (a settlement is one insert without the
//! lock); a queued settlement (an earlier release queued them) is still decided here. Whoever
//! holds the lock decides, in one SERIALIZABLE transaction, its own request and the newest
//! undecided request of every other live session, in arrival order: each on the pool as the
//! requests before it left it, by the store's checks and (an admission) by a [`PoolDecider`] of
//! the same identity as the one the request names; it writes their reservations and
//! settlements and each request's outcome (`np_admission_outcome`) in that transaction. A waiter that finds its outcome when it gets
//! the lock releases it in the same statement and leaves.
//!
//! This module holds what the queue carries and what a holder computes, without I/O: the
//! request and outcome records ([`QueuedRequest`], [`QueuedOutcome`]; JSON another scheduler
//! wrote, so parsed with bounds and refused whole when malformed), and the decisions over the
//! rows a holder read ([`Batch`]), which apply exactly the checks, in exactly the order, of one
//! admission or settlement at a time, on the charges as the earlier requests of the batch left
//! them. The pool's charges are aggregated here from the pool's reservation rows the way the
//! store's pool statement aggregates them, so a batch can carry them forward in memory.

use crate::port::{
    AttemptId, AttemptOutcome, Limits, Phase, PoolDecider, PoolStatus, Reservation, Sha256Digest,
    StoreCode, StoreError, TrustRevision, Uuid, WorkloadId, reservation_id,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use std::collections::{HashMap, HashSet};

/// The request record's schema.
pub const REQUEST_SCHEMA: &str = "dpone.np-queued-request.v1";
/// The outcome record's schema.
pub const OUTCOME_SCHEMA: &str = "dpone.np-queued-outcome.v1";
/// The largest request record (the table's CHECK).
pub const MAX_REQUEST_BYTES: usize = 262_144;
/// The largest outcome record (the table's CHECK).
pub const MAX_OUTCOME_BYTES: usize = 65_536;
/// The `decider` of a queued settlement (no component decides one).
pub const SETTLEMENT_DECIDER: &str = "dpone.np.settlement.v1";
/// The most requests one holder decides in one transaction.
pub const MAX_BATCH: i64 = 256;

/// A queued request, as its requester wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedRequest {
    /// [`REQUEST_SCHEMA`].
    pub schema: String,
    /// What is asked.
    pub ask: Ask,
}

/// What a queued request asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Ask {
    /// An admission.
    Admit(QueuedAdmission),
    /// A settlement.
    Settle(QueuedSettlement),
}

/// A queued admission: the store's request, the trust revision its requester authenticated
/// under, and the facts its decider reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedAdmission {
    /// The grant.
    pub grant_id: String,
    /// The grant's phase.
    pub phase: String,
    /// `sha256:` of the grant bytes the requester presented (the registered original must
    /// have the same digest).
    pub original_digest: String,
    /// The trust revision of the requester's authentication bracket.
    pub trust_revision: i64,
    /// The workload.
    pub workload: String,
    /// The scheduler attempt.
    pub attempt: String,
    /// The attempt's source-row bound.
    pub source_rows: i64,
    /// The attempt's source-byte bound.
    pub source_bytes: i64,
    /// The attempt's duration bound in seconds.
    pub attempt_seconds: i64,
    /// The decider's facts, hex.
    pub facts_hex: String,
}

/// A queued settlement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedSettlement {
    /// The reservation.
    pub reservation_id: String,
    /// Source rows read.
    pub measured_source_rows: i64,
    /// Source bytes read.
    pub measured_source_bytes: i64,
    /// HTTP body bytes sent.
    pub measured_http_bytes: i64,
    /// `succeeded`, `failed` or `incomplete`.
    pub outcome: String,
}

/// A request's outcome, as the holder that decided it wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuedOutcome {
    /// [`OUTCOME_SCHEMA`].
    pub schema: String,
    /// How many requests the holder decided in the transaction (1: the requester's own).
    pub batch: u32,
    /// The decision.
    pub verdict: Verdict,
}

/// A decision of the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Verdict {
    /// Admitted: the reservation (its row was written in the same transaction).
    Admitted {
        /// The reservation's deterministic id.
        reservation_id: String,
        /// The charges the decision was made on.
        pool_before: PoolStatus,
    },
    /// The decider denied; nothing was written.
    Denied {
        /// The charges the decision was made on.
        pool_before: PoolStatus,
    },
    /// Settled: recorded now, or the identical settlement was already recorded.
    Settled {
        /// `true` when it was already recorded.
        reopened: bool,
    },
    /// The store's checks refused.
    Refused {
        /// The stable code (`DPONE_NP_STORE_*`).
        code: String,
        /// Why.
        message: String,
    },
}

fn malformed(what: &str) -> StoreError {
    StoreError::new(
        StoreCode::StoredStateInvalid,
        format!("the queued {what} is not a valid record"),
    )
}

/// Parses a request record another scheduler wrote: bounded, exact schema, no unknown field.
pub fn parse_request(bytes: &[u8]) -> Result<QueuedRequest, StoreError> {
    if bytes.len() > MAX_REQUEST_BYTES {
        return Err(malformed("request"));
    }
    let r: QueuedRequest = serde_json::from_slice(bytes).map_err(|_| malformed("request"))?;
    if r.schema != REQUEST_SCHEMA {
        return Err(malformed("request"));
    }
    Ok(r)
}

/// Parses an outcome record another scheduler wrote: bounded, exact schema, no unknown field.
pub fn parse_outcome(bytes: &[u8]) -> Result<QueuedOutcome, StoreError> {
    if bytes.len() > MAX_OUTCOME_BYTES {
        return Err(malformed("outcome"));
    }
    let o: QueuedOutcome = serde_json::from_slice(bytes).map_err(|_| malformed("outcome"))?;
    if o.schema != OUTCOME_SCHEMA || o.batch == 0 || o.batch > MAX_BATCH as u32 {
        return Err(malformed("outcome"));
    }
    Ok(o)
}

/// The record's bytes (a record always serializes).
pub fn to_bytes<T: Serialize>(record: &T) -> Vec<u8> {
    serde_json::to_vec(record).unwrap_or_default()
}

/// A refusal a holder wrote, as this store's error: the code when it is one of the store's,
/// and the message when it is short printable text (another scheduler wrote it).
pub fn refusal(code: &str, message: &str) -> StoreError {
    let Some(code) = StoreCode::ALL.iter().copied().find(|c| c.as_str() == code) else {
        return malformed("outcome");
    };
    let printable = message.len() <= 200 && message.bytes().all(|b| (0x20..0x7f).contains(&b));
    StoreError::new(
        code,
        if printable {
            message.to_owned()
        } else {
            "refused by the store's checks in the admission queue".to_owned()
        },
    )
}

/// The trust revision and clock a holder read under the lock.
pub struct TrustView {
    /// The current revision.
    pub current: Option<TrustRevision>,
    /// The database clock is earlier than the newest revision.
    pub clock_back: bool,
}

/// A grant's registration as a holder read it.
pub struct GrantRow {
    /// Environment.
    pub environment: String,
    /// Campaign.
    pub campaign: String,
    /// Phase.
    pub phase: Phase,
    /// The stored digest column.
    pub digest: String,
    /// `sha256:` of the stored original bytes.
    pub bytes_digest: String,
    /// Revocation epoch.
    pub revocation_epoch: i64,
    /// Ceilings.
    pub limits: Limits,
    /// Route (qualification).
    pub route: Option<Vec<String>>,
    /// Past its validity window by the database clock.
    pub expired: bool,
    /// Before its validity window by the database clock.
    pub not_yet_valid: bool,
}

/// What a holder read for one grant: its registration, ownership and workload ceilings.
pub struct GrantView {
    /// The registration, if any.
    pub row: Option<GrantRow>,
    /// 1 when the grant owns its run or activation.
    pub owned: i64,
    /// The workloads' ceilings.
    pub workloads: HashMap<String, Limits>,
}

/// One reservation of a pool, with its settlement if recorded.
#[derive(Clone, Debug)]
pub struct PoolRow {
    /// Reservation id.
    pub reservation_id: String,
    /// Workload.
    pub workload: String,
    /// Attempt.
    pub attempt: String,
    /// Route.
    pub route: Option<Vec<String>>,
    /// Reserved rows.
    pub rows: i64,
    /// Reserved bytes.
    pub bytes: i64,
    /// Measured rows, bytes and HTTP bytes, once settled.
    pub settled: Option<(i64, i64, i64)>,
}

/// A pool (environment, campaign, phase) as a holder read it, carried forward by the batch.
#[derive(Clone, Debug, Default)]
pub struct PoolView {
    /// The workloads charged to the pool's membership.
    pub members: HashSet<String>,
    /// Every reservation of the pool.
    pub rows: Vec<PoolRow>,
}

impl PoolView {
    /// The charges as the store's pool statement aggregates them for `route` (rows and bytes
    /// per exact route; attempts and membership per pool).
    pub fn status(&self, route: Option<&Vec<String>>) -> PoolStatus {
        let mut p = PoolStatus {
            members: i64::try_from(self.members.len()).unwrap_or(i64::MAX),
            ..PoolStatus::default()
        };
        for r in &self.rows {
            p.attempts += 1;
            let same = r.route.as_ref() == route;
            if same {
                p.reserved_source_rows += r.rows;
                p.reserved_source_bytes += r.bytes;
            }
            match r.settled {
                None => p.unresolved += 1,
                Some((rows, bytes, http)) if same => {
                    p.measured_source_rows += rows;
                    p.measured_source_bytes += bytes;
                    p.measured_http_bytes += http;
                }
                Some(_) => {}
            }
        }
        p
    }
}

/// A reservation a settlement names, as a holder read it (or as the batch admitted it).
#[derive(Clone, Debug)]
pub struct ReservationRow {
    /// Environment.
    pub environment: String,
    /// Pool key: campaign and phase.
    pub campaign: String,
    /// Phase.
    pub phase: String,
    /// Reserved rows.
    pub rows: i64,
    /// Reserved bytes.
    pub bytes: i64,
    /// The recorded settlement: rows, bytes, HTTP bytes, outcome.
    pub settled: Option<(i64, i64, i64, String)>,
}

/// A write a decision asks for, in the batch's order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// The reservation row.
    Reservation {
        /// Its id.
        id: String,
        /// Campaign.
        campaign: String,
        /// Phase.
        phase: Phase,
        /// Route.
        route: Option<Vec<String>>,
        /// Grant.
        grant_id: String,
        /// The registration's digest.
        grant_digest: String,
        /// Trust revision.
        trust_revision: i64,
        /// Workload.
        workload: String,
        /// Attempt.
        attempt: String,
        /// Rows.
        rows: i64,
        /// Bytes.
        bytes: i64,
        /// Seconds.
        seconds: i64,
    },
    /// The settlement row.
    Settlement(QueuedSettlement),
}

/// One holder's batch: what it read, carried forward request by request.
pub struct Batch {
    /// The environment (the lock's).
    pub environment: String,
    /// Trust and clock.
    pub trust: TrustView,
    /// Per grant (`grant_id`, phase).
    pub grants: HashMap<(String, String), GrantView>,
    /// Per pool (campaign, phase).
    pub pools: HashMap<(String, String), PoolView>,
    /// Reservations named by the batch's settlements, and those the batch admitted.
    pub reservations: HashMap<String, ReservationRow>,
}

fn refuse(code: StoreCode, message: &str) -> Result<(Verdict, Option<Write>), StoreError> {
    Err(StoreError::new(code, message))
}

fn parse_phase(s: &str) -> Option<Phase> {
    match s {
        "qualification" => Some(Phase::Qualification),
        "execution" => Some(Phase::Execution),
        _ => None,
    }
}

/// A registered grant's standing, as every protected operation checks it, in this order: the
/// environment, the exact original bytes, revocation, the validity window (by the database
/// clock). `Err` is the refusal.
pub(crate) fn grant_standing(
    same_environment: bool,
    same_bytes: bool,
    revoked: bool,
    expired: bool,
    not_yet_valid: bool,
) -> Result<(), StoreError> {
    let (code, message) = if !same_environment {
        (
            StoreCode::GrantNotRegistered,
            "the grant is registered for another environment",
        )
    } else if !same_bytes {
        (
            StoreCode::GrantBytesMismatch,
            "the presented grant bytes differ from the registered original",
        )
    } else if revoked {
        (
            StoreCode::GrantRevoked,
            "the grant's revocation epoch is revoked",
        )
    } else if expired {
        (
            StoreCode::GrantExpired,
            "the grant's validity window has ended",
        )
    } else if not_yet_valid {
        (
            StoreCode::GrantNotYetValid,
            "the grant's validity window has not started",
        )
    } else {
        return Ok(());
    };
    Err(StoreError::new(code, message))
}

impl Batch {
    /// Decides one queued admission on the batch's state and carries its reservation forward.
    /// `Err` is a refusal (the outcome records it); `decider` is asked only after every check
    /// that comes before the decision in one-at-a-time admission passed.
    pub fn admit(
        &mut self,
        a: &QueuedAdmission,
        decider: &dyn PoolDecider,
    ) -> Result<(Verdict, Option<Write>), StoreError> {
        // The request's own values, re-validated (another scheduler wrote them).
        let (Some(phase), Ok(grant_uuid), Ok(workload), Ok(attempt), Ok(facts)) = (
            parse_phase(&a.phase),
            Uuid::parse("grant_id", &a.grant_id),
            WorkloadId::new(&a.workload),
            AttemptId::new(&a.attempt),
            hex::decode(&a.facts_hex),
        ) else {
            return Err(malformed("admission"));
        };
        if a.source_rows < 0
            || a.source_bytes < 0
            || a.attempt_seconds < 0
            || Sha256Digest::parse("original_digest", &a.original_digest).is_err()
        {
            return Err(malformed("admission"));
        }
        // The revision bracket's revision is still current, and the clock has not gone back.
        let Some(trust) = self.trust.current.clone() else {
            return refuse(StoreCode::TrustMissing, "no trust revision is recorded");
        };
        if trust.revision != a.trust_revision {
            return refuse(
                StoreCode::TrustRevisionChanged,
                "the trust revision changed after authentication; authenticate again",
            );
        }
        if self.trust.clock_back {
            return refuse(
                StoreCode::ClockBackwards,
                "the database clock is earlier than the newest trust revision",
            );
        }
        let key = (grant_uuid.as_str().to_owned(), phase.as_str().to_owned());
        let Some(view) = self.grants.get(&key) else {
            return Err(malformed("admission"));
        };
        // The registered original: same environment, exact bytes, not revoked, in its window.
        let Some(g) = view.row.as_ref() else {
            return refuse(
                StoreCode::GrantNotRegistered,
                "the grant/phase key is not registered",
            );
        };
        grant_standing(
            g.environment == self.environment,
            g.bytes_digest == a.original_digest,
            g.revocation_epoch < trust.revocation_epoch,
            g.expired,
            g.not_yet_valid,
        )?;
        if view.owned != 1 {
            return match g.phase {
                Phase::Qualification => refuse(
                    StoreCode::QualificationNotConsumed,
                    "the grant has not consumed its qualification run",
                ),
                Phase::Execution => refuse(
                    StoreCode::ActivationNotSelected,
                    "the activation's selected request is not bound to this grant",
                ),
            };
        }
        let Some(workload_limits) = view.workloads.get(workload.as_str()).copied() else {
            return refuse(
                StoreCode::WorkloadNotInGrant,
                "the workload is not in the grant's membership",
            );
        };
        let membership_ceiling = view.workloads.values().map(|l| l.workloads).min();
        let Ok(campaign) = Uuid::parse("campaign", &g.campaign) else {
            return Err(malformed("registration"));
        };
        let Ok(environment) = Uuid::parse("environment", &self.environment) else {
            return Err(malformed("registration"));
        };
        let id = reservation_id(&environment, &campaign, g.phase, &workload, &attempt);
        let pool_key = (g.campaign.clone(), g.phase.as_str().to_owned());
        let pool_view = self.pools.entry(pool_key.clone()).or_default();
        let pool = pool_view.status(g.route.as_ref());
        let is_member = pool_view.members.contains(workload.as_str());
        let running = pool_view
            .rows
            .iter()
            .any(|r| r.workload == workload.as_str() && r.settled.is_none());
        let duplicate = self.reservations.contains_key(id.as_str())
            || pool_view.rows.iter().any(|r| {
                r.reservation_id == id.as_str()
                    || (r.workload == workload.as_str() && r.attempt == attempt.as_str())
            });
        if duplicate {
            return refuse(
                StoreCode::AttemptDuplicate,
                "the attempt was already admitted",
            );
        }
        if running {
            return refuse(
                StoreCode::AttemptRunning,
                "another attempt of the workload is still running",
            );
        }
        // The decision, on the pool as the batch left it.
        if !decider.admits(&facts, &pool) {
            return Ok((
                Verdict::Denied {
                    pool_before: pool.clone(),
                },
                None,
            ));
        }
        // The store's own ceilings, the same the scope component applies.
        let effective = trust.limits.min(&g.limits).min(&workload_limits);
        if a.attempt_seconds > effective.attempt_seconds {
            return refuse(
                StoreCode::AttemptSecondsExceeded,
                "the attempt's duration bound exceeds the effective ceiling",
            );
        }
        if !is_member || pool.members > effective.workloads.min(membership_ceiling.unwrap_or(0)) {
            return refuse(
                StoreCode::MembershipExceeded,
                "the pool's membership exceeds the current effective workload ceiling",
            );
        }
        if pool.attempts + 1 > effective.attempts {
            return refuse(
                StoreCode::AttemptsExceeded,
                "the attempt would exceed the effective attempt ceiling",
            );
        }
        if pool.reserved_source_rows + a.source_rows > effective.source_rows {
            return refuse(
                StoreCode::SourceRowsExceeded,
                "the reservation would exceed the effective source-row ceiling",
            );
        }
        if pool.reserved_source_bytes + a.source_bytes > effective.source_bytes {
            return refuse(
                StoreCode::SourceBytesExceeded,
                "the reservation would exceed the effective source-byte ceiling",
            );
        }
        // Admitted: carried forward for the requests after it.
        pool_view.rows.push(PoolRow {
            reservation_id: id.as_str().to_owned(),
            workload: workload.as_str().to_owned(),
            attempt: attempt.as_str().to_owned(),
            route: g.route.clone(),
            rows: a.source_rows,
            bytes: a.source_bytes,
            settled: None,
        });
        self.reservations.insert(
            id.as_str().to_owned(),
            ReservationRow {
                environment: self.environment.clone(),
                campaign: g.campaign.clone(),
                phase: g.phase.as_str().to_owned(),
                rows: a.source_rows,
                bytes: a.source_bytes,
                settled: None,
            },
        );
        let write = Write::Reservation {
            id: id.as_str().to_owned(),
            campaign: g.campaign.clone(),
            phase: g.phase,
            route: g.route.clone(),
            grant_id: grant_uuid.as_str().to_owned(),
            grant_digest: g.digest.clone(),
            trust_revision: trust.revision,
            workload: workload.as_str().to_owned(),
            attempt: attempt.as_str().to_owned(),
            rows: a.source_rows,
            bytes: a.source_bytes,
            seconds: a.attempt_seconds,
        };
        Ok((
            Verdict::Admitted {
                reservation_id: id.as_str().to_owned(),
                pool_before: pool.clone(),
            },
            Some(write),
        ))
    }

    /// Decides one queued settlement on the batch's state and carries it forward.
    pub fn settle(&mut self, s: &QueuedSettlement) -> Result<(Verdict, Option<Write>), StoreError> {
        if Sha256Digest::parse("reservation_id", &s.reservation_id).is_err()
            || ![
                AttemptOutcome::Succeeded,
                AttemptOutcome::Failed,
                AttemptOutcome::Incomplete,
            ]
            .iter()
            .any(|o| o.as_str() == s.outcome)
            || s.measured_source_rows < 0
            || s.measured_source_bytes < 0
            || s.measured_http_bytes < 0
        {
            return Err(malformed("settlement"));
        }
        let Some(res) = self
            .reservations
            .get_mut(&s.reservation_id)
            .filter(|r| r.environment == self.environment)
        else {
            return refuse(StoreCode::ReservationUnknown, "no reservation has this id");
        };
        if s.measured_source_rows > res.rows || s.measured_source_bytes > res.bytes {
            return refuse(
                StoreCode::SettleExceedsReservation,
                "measured source usage exceeds the reservation",
            );
        }
        if let Some((rows, bytes, http, outcome)) = &res.settled {
            let same = *rows == s.measured_source_rows
                && *bytes == s.measured_source_bytes
                && *http == s.measured_http_bytes
                && *outcome == s.outcome;
            return if same {
                Ok((Verdict::Settled { reopened: true }, None))
            } else {
                refuse(
                    StoreCode::SettlementConflict,
                    "the reservation was settled with other measurements",
                )
            };
        }
        let measured = (
            s.measured_source_rows,
            s.measured_source_bytes,
            s.measured_http_bytes,
        );
        res.settled = Some((measured.0, measured.1, measured.2, s.outcome.clone()));
        if let Some(pool) = self
            .pools
            .get_mut(&(res.campaign.clone(), res.phase.clone()))
            && let Some(row) = pool
                .rows
                .iter_mut()
                .find(|r| r.reservation_id == s.reservation_id)
        {
            row.settled = Some(measured);
        }
        Ok((
            Verdict::Settled { reopened: false },
            Some(Write::Settlement(s.clone())),
        ))
    }
}

/// `sha256:` of `bytes`, as the stored digests are written.
pub fn digest_of(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Whether `found` is the reservation `a` asked for (an admitted outcome is checked against
/// the row before it is believed).
pub fn is_reservation_of(found: &Reservation, a: &QueuedAdmission) -> bool {
    found.grant.grant_id.as_str() == a.grant_id
        && found.grant.phase.as_str() == a.phase
        && found.trust_revision == a.trust_revision
        && found.workload.as_str() == a.workload
        && found.attempt.as_str() == a.attempt
        && found.source_rows == a.source_rows
        && found.source_bytes == a.source_bytes
        && found.attempt_seconds == a.attempt_seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission() -> QueuedAdmission {
        QueuedAdmission {
            grant_id: "00000001-0000-4000-8000-000000000001".into(),
            phase: "execution".into(),
            original_digest: digest_of(b"grant"),
            trust_revision: 1,
            workload: "w0".into(),
            attempt: "a0".into(),
            source_rows: 1,
            source_bytes: 1,
            attempt_seconds: 60,
            facts_hex: hex::encode(b"{}"),
        }
    }

    #[test]
    fn records_round_trip_and_refuse_unknown_fields_and_other_schemas() {
        let r = QueuedRequest {
            schema: REQUEST_SCHEMA.into(),
            ask: Ask::Admit(admission()),
        };
        assert_eq!(parse_request(&to_bytes(&r)).expect("parses"), r);
        let mut v: serde_json::Value = serde_json::from_slice(&to_bytes(&r)).expect("json");
        v["extra"] = serde_json::json!(1);
        assert!(parse_request(&serde_json::to_vec(&v).expect("json")).is_err());
        let other = QueuedRequest {
            schema: "dpone.np-queued-request.v2".into(),
            ..r
        };
        assert!(parse_request(&to_bytes(&other)).is_err());
        let o = QueuedOutcome {
            schema: OUTCOME_SCHEMA.into(),
            batch: 3,
            verdict: Verdict::Refused {
                code: "DPONE_NP_STORE_ATTEMPTS_EXCEEDED".into(),
                message: "x".into(),
            },
        };
        assert_eq!(parse_outcome(&to_bytes(&o)).expect("parses"), o);
        let zero = QueuedOutcome { batch: 0, ..o };
        assert!(parse_outcome(&to_bytes(&zero)).is_err());
        assert!(parse_outcome(&vec![b' '; MAX_OUTCOME_BYTES + 1]).is_err());
        assert!(parse_request(&vec![b' '; MAX_REQUEST_BYTES + 1]).is_err());
    }

    #[test]
    fn a_refusal_keeps_only_a_known_code_and_printable_short_text() {
        let e = refusal(
            "DPONE_NP_STORE_ATTEMPTS_EXCEEDED",
            "the attempt would exceed",
        );
        assert_eq!(e.code, StoreCode::AttemptsExceeded);
        assert_eq!(e.message, "the attempt would exceed");
        let e = refusal("DPONE_NP_STORE_ATTEMPTS_EXCEEDED", "postgres://u:p@host\n");
        assert_eq!(e.code, StoreCode::AttemptsExceeded);
        assert!(!e.message.contains("postgres://"));
        assert_eq!(
            refusal("SOMETHING_ELSE", "x").code,
            StoreCode::StoredStateInvalid
        );
    }

    fn row(id: &str, workload: &str, route: Option<Vec<String>>, settled: bool) -> PoolRow {
        PoolRow {
            reservation_id: id.into(),
            workload: workload.into(),
            attempt: format!("a-{id}"),
            route,
            rows: 10,
            bytes: 100,
            settled: settled.then_some((3, 30, 7)),
        }
    }

    #[test]
    fn the_pool_is_aggregated_as_the_pool_statement_aggregates_it() {
        let r1 = Some(vec!["a".to_owned()]);
        let r2 = Some(vec!["b".to_owned()]);
        let view = PoolView {
            members: ["w0".to_owned(), "w1".to_owned()].into_iter().collect(),
            rows: vec![
                row("1", "w0", r1.clone(), true),
                row("2", "w0", r1.clone(), false),
                row("3", "w1", r2.clone(), true),
            ],
        };
        let p = view.status(r1.as_ref());
        assert_eq!(
            p,
            PoolStatus {
                members: 2,
                attempts: 3,
                reserved_source_rows: 20,
                reserved_source_bytes: 200,
                unresolved: 1,
                measured_source_rows: 3,
                measured_source_bytes: 30,
                measured_http_bytes: 7,
            }
        );
        assert_eq!(view.status(None).reserved_source_rows, 0);
        assert_eq!(view.status(None).attempts, 3);
    }
}
