//! The protected control store's port: plain typed keys and values (UUIDs, `sha256:` digests,
//! the phase, the six-dimensional route, limits as integers, canonical document bytes) and the
//! [`ControlStorePort`] trait the engine's protected admission ([`crate::admission`]) drives.
//! Implementations live in adapters (`dpone-adapter-np-control-store` on PostgreSQL). Nothing
//! here parses a signed document: the engine verifies documents and hands the store their exact
//! canonical bytes and the typed facts it derived from them; the store keeps the bytes immutable
//! and re-checks them.
//!
//! Every constructor validates its input before anything is stored, and every refusal carries a
//! stable [`StoreCode`]; messages name fields and relations only (never bytes, endpoints,
//! credentials or paths).

pub mod mapping;

use sha2::{Digest as _, Sha256};
use std::fmt;
use std::future::Future;

/// A stable refusal code of the store (`DPONE_NP_STORE_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StoreCode {
    /// A typed input is malformed (UUID, digest, route, identifier, bytes, time window).
    InvalidInput,
    /// A limit is negative or above the spec's ceiling.
    LimitAboveCeiling,
    /// The reviewed DDL is missing or differs (columns, unique indexes, triggers).
    CatalogInvalid,
    /// The store session's role could change the store around the protocol (a superuser, a
    /// member of an owner of the schema, a table or a function, or a holder of `UPDATE`,
    /// `DELETE`, `TRUNCATE`, `TRIGGER`, `REFERENCES` or the schema's `CREATE`).
    SessionPrivileged,
    /// The database cannot be reached or failed outside the protocol (SQLSTATE only).
    Unavailable,
    /// Serialization failures outlasted the bounded retries.
    SerializationRetriesExhausted,
    /// A commit acknowledgement was lost and the probe could not settle the outcome; ownership
    /// is kept, the caller probes again by the deterministic reservation id.
    OutcomeUnknown,
    /// No trust revision is recorded for the environment.
    TrustMissing,
    /// The trust revision changed between the bracket reads or before the transaction.
    TrustRevisionChanged,
    /// A new policy record lowers the revocation epoch.
    RevocationEpochBackwards,
    /// The caller's verification inside the bracket refused.
    AuthenticationFailed,
    /// The database clock is earlier than the newest trust revision.
    ClockBackwards,
    /// Changed original bytes under an existing grant/phase key.
    RegistrationBytesChanged,
    /// The grant/phase key is not registered.
    GrantNotRegistered,
    /// The presented bytes differ from the registered original.
    GrantBytesMismatch,
    /// The grant's revocation epoch is below the current one.
    GrantRevoked,
    /// The grant's validity window has ended.
    GrantExpired,
    /// The grant's validity window has not started.
    GrantNotYetValid,
    /// The grant's validity window exceeds the policy's.
    ValidityAbovePolicy,
    /// The operation needs the other phase's grant.
    PhaseMismatch,
    /// The qualification run was already consumed by this grant.
    QualificationReplayed,
    /// The qualification run was consumed by another grant.
    QualificationRebound,
    /// The qualification run has not been consumed by this grant.
    QualificationNotConsumed,
    /// The activation already has another selected request.
    ActivationAlreadySelected,
    /// The activation has no selected request bound to this grant.
    ActivationNotSelected,
    /// The request names another activation than the grant.
    ActivationMismatch,
    /// The workload is not in the grant's membership.
    WorkloadNotInGrant,
    /// Distinct workload membership would exceed the effective ceiling.
    MembershipExceeded,
    /// The attempt count would exceed the effective ceiling.
    AttemptsExceeded,
    /// Reserved source rows would exceed the effective ceiling.
    SourceRowsExceeded,
    /// Reserved source bytes would exceed the effective ceiling.
    SourceBytesExceeded,
    /// The attempt's duration bound exceeds the effective ceiling.
    AttemptSecondsExceeded,
    /// The attempt was already admitted.
    AttemptDuplicate,
    /// Another attempt of the workload is still running (unresolved).
    AttemptRunning,
    /// No reservation has this id.
    ReservationUnknown,
    /// The reservation already has a settlement: it is no longer RUNNING, so no source read may
    /// start under it.
    ReservationResolved,
    /// The attempt's duration bound (from its reservation time) has elapsed.
    AttemptWindowElapsed,
    /// A run already claimed the reservation: one reservation bounds one run's reads, so a
    /// second run (concurrent or later) may not read under it.
    ReservationRunClaimed,
    /// A participant is already enrolled under this enrollment with another physical identity
    /// (enrollment records are never replaced).
    EnrollmentConflict,
    /// Measured usage exceeds the reservation.
    SettleExceedsReservation,
    /// The reservation was already settled with other measurements.
    SettlementConflict,
    /// A stored row violates the store's own invariants.
    StoredStateInvalid,
}

impl StoreCode {
    /// Every code, for documentation checks.
    pub const ALL: [StoreCode; 42] = [
        Self::InvalidInput,
        Self::LimitAboveCeiling,
        Self::CatalogInvalid,
        Self::SessionPrivileged,
        Self::Unavailable,
        Self::SerializationRetriesExhausted,
        Self::OutcomeUnknown,
        Self::TrustMissing,
        Self::TrustRevisionChanged,
        Self::RevocationEpochBackwards,
        Self::AuthenticationFailed,
        Self::ClockBackwards,
        Self::RegistrationBytesChanged,
        Self::GrantNotRegistered,
        Self::GrantBytesMismatch,
        Self::GrantRevoked,
        Self::GrantExpired,
        Self::GrantNotYetValid,
        Self::ValidityAbovePolicy,
        Self::PhaseMismatch,
        Self::QualificationReplayed,
        Self::QualificationRebound,
        Self::QualificationNotConsumed,
        Self::ActivationAlreadySelected,
        Self::ActivationNotSelected,
        Self::ActivationMismatch,
        Self::WorkloadNotInGrant,
        Self::MembershipExceeded,
        Self::AttemptsExceeded,
        Self::SourceRowsExceeded,
        Self::SourceBytesExceeded,
        Self::AttemptSecondsExceeded,
        Self::AttemptDuplicate,
        Self::AttemptRunning,
        Self::ReservationUnknown,
        Self::ReservationResolved,
        Self::AttemptWindowElapsed,
        Self::ReservationRunClaimed,
        Self::EnrollmentConflict,
        Self::SettleExceedsReservation,
        Self::SettlementConflict,
        Self::StoredStateInvalid,
    ];

    /// The stable text of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidInput => "DPONE_NP_STORE_INVALID_INPUT",
            Self::LimitAboveCeiling => "DPONE_NP_STORE_LIMIT_ABOVE_CEILING",
            Self::CatalogInvalid => "DPONE_NP_STORE_CATALOG_INVALID",
            Self::SessionPrivileged => "DPONE_NP_STORE_SESSION_PRIVILEGED",
            Self::Unavailable => "DPONE_NP_STORE_UNAVAILABLE",
            Self::SerializationRetriesExhausted => "DPONE_NP_STORE_SERIALIZATION_RETRIES_EXHAUSTED",
            Self::OutcomeUnknown => "DPONE_NP_STORE_OUTCOME_UNKNOWN",
            Self::TrustMissing => "DPONE_NP_STORE_TRUST_MISSING",
            Self::TrustRevisionChanged => "DPONE_NP_STORE_TRUST_REVISION_CHANGED",
            Self::RevocationEpochBackwards => "DPONE_NP_STORE_REVOCATION_EPOCH_BACKWARDS",
            Self::AuthenticationFailed => "DPONE_NP_STORE_AUTHENTICATION_FAILED",
            Self::ClockBackwards => "DPONE_NP_STORE_CLOCK_BACKWARDS",
            Self::RegistrationBytesChanged => "DPONE_NP_STORE_REGISTRATION_BYTES_CHANGED",
            Self::GrantNotRegistered => "DPONE_NP_STORE_GRANT_NOT_REGISTERED",
            Self::GrantBytesMismatch => "DPONE_NP_STORE_GRANT_BYTES_MISMATCH",
            Self::GrantRevoked => "DPONE_NP_STORE_GRANT_REVOKED",
            Self::GrantExpired => "DPONE_NP_STORE_GRANT_EXPIRED",
            Self::GrantNotYetValid => "DPONE_NP_STORE_GRANT_NOT_YET_VALID",
            Self::ValidityAbovePolicy => "DPONE_NP_STORE_VALIDITY_ABOVE_POLICY",
            Self::PhaseMismatch => "DPONE_NP_STORE_PHASE_MISMATCH",
            Self::QualificationReplayed => "DPONE_NP_STORE_QUALIFICATION_REPLAYED",
            Self::QualificationRebound => "DPONE_NP_STORE_QUALIFICATION_REBOUND",
            Self::QualificationNotConsumed => "DPONE_NP_STORE_QUALIFICATION_NOT_CONSUMED",
            Self::ActivationAlreadySelected => "DPONE_NP_STORE_ACTIVATION_ALREADY_SELECTED",
            Self::ActivationNotSelected => "DPONE_NP_STORE_ACTIVATION_NOT_SELECTED",
            Self::ActivationMismatch => "DPONE_NP_STORE_ACTIVATION_MISMATCH",
            Self::WorkloadNotInGrant => "DPONE_NP_STORE_WORKLOAD_NOT_IN_GRANT",
            Self::MembershipExceeded => "DPONE_NP_STORE_MEMBERSHIP_EXCEEDED",
            Self::AttemptsExceeded => "DPONE_NP_STORE_ATTEMPTS_EXCEEDED",
            Self::SourceRowsExceeded => "DPONE_NP_STORE_SOURCE_ROWS_EXCEEDED",
            Self::SourceBytesExceeded => "DPONE_NP_STORE_SOURCE_BYTES_EXCEEDED",
            Self::AttemptSecondsExceeded => "DPONE_NP_STORE_ATTEMPT_SECONDS_EXCEEDED",
            Self::AttemptDuplicate => "DPONE_NP_STORE_ATTEMPT_DUPLICATE",
            Self::AttemptRunning => "DPONE_NP_STORE_ATTEMPT_RUNNING",
            Self::ReservationUnknown => "DPONE_NP_STORE_RESERVATION_UNKNOWN",
            Self::ReservationResolved => "DPONE_NP_STORE_RESERVATION_RESOLVED",
            Self::AttemptWindowElapsed => "DPONE_NP_STORE_ATTEMPT_WINDOW_ELAPSED",
            Self::ReservationRunClaimed => "DPONE_NP_STORE_RESERVATION_RUN_CLAIMED",
            Self::EnrollmentConflict => "DPONE_NP_STORE_ENROLLMENT_CONFLICT",
            Self::SettleExceedsReservation => "DPONE_NP_STORE_SETTLE_EXCEEDS_RESERVATION",
            Self::SettlementConflict => "DPONE_NP_STORE_SETTLEMENT_CONFLICT",
            Self::StoredStateInvalid => "DPONE_NP_STORE_STORED_STATE_INVALID",
        }
    }
}

impl fmt::Display for StoreCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal: a stable code and a message that names fields and relations only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreError {
    /// The stable code.
    pub code: StoreCode,
    /// What was refused (no values, endpoints, credentials or paths).
    pub message: String,
    /// For [`StoreCode::OutcomeUnknown`]: the deterministic reservation id to probe.
    pub reservation_id: Option<Sha256Digest>,
}

impl StoreError {
    /// A refusal with a code and a message.
    pub fn new(code: StoreCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            reservation_id: None,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for StoreError {}

/// The store's result.
pub type Result<T> = std::result::Result<T, StoreError>;

fn invalid(field: &str, why: &str) -> StoreError {
    StoreError::new(StoreCode::InvalidInput, format!("{field}: {why}"))
}

/// A UUID in canonical lower-case hyphenated form (`8-4-4-4-12` hex digits).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(String);

impl Uuid {
    /// Parses the canonical form; anything else (upper case, braces, no hyphens) refuses.
    pub fn parse(field: &str, s: &str) -> Result<Self> {
        let ok = s.len() == 36
            && s.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
            });
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(invalid(field, "not a canonical lower-case UUID"))
        }
    }

    /// The canonical text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A `sha256:` digest over canonical bytes (64 lower-case hex digits).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Sha256Digest(String);

impl Sha256Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// Parses `sha256:<64 lower-case hex>`.
    pub fn parse(field: &str, s: &str) -> Result<Self> {
        let ok = s.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok {
            Ok(Self(s.to_owned()))
        } else {
            Err(invalid(field, "not a sha256: digest"))
        }
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The phase of a grant; neither phase grants the other's authority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Route qualification (one-time run).
    Qualification,
    /// Campaign execution (one activation).
    Execution,
}

impl Phase {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Qualification => "qualification",
            Self::Execution => "execution",
        }
    }
}

/// Longest accepted identifier (route dimension, workload, attempt).
pub const MAX_IDENTIFIER: usize = 128;

fn identifier(field: &str, s: &str) -> Result<String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_IDENTIFIER
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:/-".contains(&b));
    if ok {
        Ok(s.to_owned())
    } else {
        Err(invalid(
            field,
            "not an identifier (1-128 of [A-Za-z0-9._:/-], alphanumeric first)",
        ))
    }
}

/// The exact six-dimensional route, in the contract's dimension order.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Route([String; 6]);

impl Route {
    /// Validates each dimension as an identifier.
    pub fn new(dims: [&str; 6]) -> Result<Self> {
        let mut out: [String; 6] = Default::default();
        for (i, d) in dims.iter().enumerate() {
            out[i] = identifier(&format!("route[{i}]"), d)?;
        }
        Ok(Self(out))
    }

    /// The dimensions.
    pub fn dims(&self) -> &[String; 6] {
        &self.0
    }
}

/// A workload identifier.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadId(String);

impl WorkloadId {
    /// Validates an identifier.
    pub fn new(s: &str) -> Result<Self> {
        identifier("workload_id", s).map(Self)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A scheduler attempt identifier (unique per pool and workload).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(String);

impl AttemptId {
    /// Validates an identifier.
    pub fn new(s: &str) -> Result<Self> {
        identifier("attempt_id", s).map(Self)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Resource limits (all non-negative integers). The same shape serves the policy, a grant and
/// each workload; the effective limit is their minimum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Limits {
    /// Distinct workload membership of the pool.
    pub workloads: i64,
    /// Attempts (reservations) of the pool, or of the workload.
    pub attempts: i64,
    /// Reserved source rows.
    pub source_rows: i64,
    /// Reserved source bytes.
    pub source_bytes: i64,
    /// Seconds per attempt.
    pub attempt_seconds: i64,
}

/// The spec's initial ceilings: 64 workloads, 128 attempts, 100,000 source rows, 1 GiB source
/// bytes, 3,600 s per attempt.
pub const CEILINGS: Limits = Limits {
    workloads: 64,
    attempts: 128,
    source_rows: 100_000,
    source_bytes: 1 << 30,
    attempt_seconds: 3_600,
};

/// The spec's validity ceiling: 24 hours.
pub const MAX_VALIDITY_SECONDS: i64 = 86_400;

/// Largest accepted original document (policy, grant, request) in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;

impl Limits {
    /// Refuses a negative limit or one above [`CEILINGS`].
    pub fn validate(&self, field: &str) -> Result<()> {
        let pairs = [
            ("workloads", self.workloads, CEILINGS.workloads),
            ("attempts", self.attempts, CEILINGS.attempts),
            ("source_rows", self.source_rows, CEILINGS.source_rows),
            ("source_bytes", self.source_bytes, CEILINGS.source_bytes),
            (
                "attempt_seconds",
                self.attempt_seconds,
                CEILINGS.attempt_seconds,
            ),
        ];
        for (name, v, max) in pairs {
            if !(0..=max).contains(&v) {
                return Err(StoreError::new(
                    StoreCode::LimitAboveCeiling,
                    format!("{field}.{name} is outside 0..={max}"),
                ));
            }
        }
        Ok(())
    }

    /// The component-wise minimum.
    pub fn min(&self, o: &Limits) -> Limits {
        Limits {
            workloads: self.workloads.min(o.workloads),
            attempts: self.attempts.min(o.attempts),
            source_rows: self.source_rows.min(o.source_rows),
            source_bytes: self.source_bytes.min(o.source_bytes),
            attempt_seconds: self.attempt_seconds.min(o.attempt_seconds),
        }
    }
}

fn document(field: &str, bytes: &[u8]) -> Result<()> {
    if bytes.is_empty() || bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(invalid(field, "empty or above 1 MiB"));
    }
    Ok(())
}

/// An externally pinned policy to record as a new trust revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRecord {
    /// The protected environment the trust applies to.
    pub environment: Uuid,
    /// The policy's canonical bytes.
    pub policy_bytes: Vec<u8>,
    /// The digest of the trusted-root bytes the policy pins.
    pub root_digest: Sha256Digest,
    /// The revocation epoch (never decreases).
    pub revocation_epoch: i64,
    /// The policy's resource ceilings.
    pub limits: Limits,
    /// The policy's validity ceiling for grants.
    pub max_validity_seconds: i64,
}

impl PolicyRecord {
    /// Validates before anything is stored.
    pub fn validate(&self) -> Result<()> {
        document("policy_bytes", &self.policy_bytes)?;
        self.limits.validate("policy.limits")?;
        if self.revocation_epoch < 0 {
            return Err(invalid("revocation_epoch", "negative"));
        }
        if !(1..=MAX_VALIDITY_SECONDS).contains(&self.max_validity_seconds) {
            return Err(StoreError::new(
                StoreCode::LimitAboveCeiling,
                "policy.max_validity_seconds is outside 1..=86400",
            ));
        }
        Ok(())
    }
}

/// One append-only trust revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustRevision {
    /// The environment.
    pub environment: Uuid,
    /// Monotonic revision number (1, 2, …); restoring old bytes makes a new one.
    pub revision: i64,
    /// `sha256:` of the policy bytes.
    pub policy_digest: Sha256Digest,
    /// The policy bytes.
    pub policy_bytes: Vec<u8>,
    /// The pinned trusted-root digest.
    pub root_digest: Sha256Digest,
    /// The revocation epoch.
    pub revocation_epoch: i64,
    /// The policy's ceilings.
    pub limits: Limits,
    /// The policy's validity ceiling.
    pub max_validity_seconds: i64,
    /// When it was recorded (database clock, unix seconds).
    pub recorded_at_unix: i64,
}

/// Proof that a verification ran bracketed by two equal reads of the current trust revision.
/// Only a store makes one ([`ControlStorePort::authenticate`], through [`Authenticated::bracketed`]);
/// every protected transaction re-checks that its revision is still current, so holding one
/// grants nothing by itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Authenticated {
    environment: Uuid,
    revision: i64,
}

impl Authenticated {
    /// For [`ControlStorePort`] implementations: the verification ran and the two reads around
    /// it saw `revision` of `environment`.
    pub fn bracketed(environment: Uuid, revision: i64) -> Self {
        Self {
            environment,
            revision,
        }
    }

    /// The environment.
    pub fn environment(&self) -> &Uuid {
        &self.environment
    }

    /// The trust revision the verification ran under.
    pub fn revision(&self) -> i64 {
        self.revision
    }
}

/// A grant's registration key: one original per grant UUID and phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GrantKey {
    /// The grant UUID.
    pub grant_id: Uuid,
    /// The phase.
    pub phase: Phase,
}

/// What only one phase names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PhaseSubject {
    /// Qualification: the one-time run and the exact route.
    Qualification {
        /// The one-time qualification run.
        run_id: Uuid,
        /// The exact route.
        route: Route,
    },
    /// Execution: the activation the grant is bound to.
    Execution {
        /// The activation UUID.
        activation_id: Uuid,
    },
}

impl PhaseSubject {
    /// The phase.
    pub fn phase(&self) -> Phase {
        match self {
            Self::Qualification { .. } => Phase::Qualification,
            Self::Execution { .. } => Phase::Execution,
        }
    }
}

/// A workload of a grant's exact membership, with its lower signed ceilings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadLimits {
    /// The workload.
    pub workload: WorkloadId,
    /// `sha256:` of its execution pack as the composition declares it: a run under a
    /// reservation of the workload executes a manifest of exactly these bytes.
    pub pack_digest: Sha256Digest,
    /// Its ceilings (cumulative attempts/rows/bytes in the pool; membership of the grant).
    pub limits: Limits,
}

/// A verified grant to register: its exact original bytes and the typed facts the engine
/// derived from them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRegistration {
    /// The grant UUID.
    pub grant_id: Uuid,
    /// The protected environment.
    pub environment: Uuid,
    /// The campaign.
    pub campaign: Uuid,
    /// The exact original canonical bytes.
    pub original_bytes: Vec<u8>,
    /// The grant's revocation epoch.
    pub revocation_epoch: i64,
    /// Validity start (unix seconds).
    pub not_before_unix: i64,
    /// Validity end (unix seconds, exclusive).
    pub not_after_unix: i64,
    /// The grant's ceilings.
    pub limits: Limits,
    /// The phase and what only it names.
    pub subject: PhaseSubject,
    /// The exact workload membership with each workload's lower ceilings.
    pub workloads: Vec<WorkloadLimits>,
}

impl GrantRegistration {
    /// The registration key.
    pub fn key(&self) -> GrantKey {
        GrantKey {
            grant_id: self.grant_id.clone(),
            phase: self.subject.phase(),
        }
    }

    /// Validates before anything is stored.
    pub fn validate(&self) -> Result<()> {
        document("original_bytes", &self.original_bytes)?;
        self.limits.validate("grant.limits")?;
        if self.revocation_epoch < 0 {
            return Err(invalid("revocation_epoch", "negative"));
        }
        if self.not_after_unix <= self.not_before_unix {
            return Err(invalid("validity", "not_after is not after not_before"));
        }
        if self.not_after_unix - self.not_before_unix > MAX_VALIDITY_SECONDS {
            return Err(StoreError::new(
                StoreCode::LimitAboveCeiling,
                "grant validity exceeds 24 hours",
            ));
        }
        if self.workloads.is_empty() || self.workloads.len() > CEILINGS.workloads as usize {
            return Err(invalid("workloads", "empty or above 64"));
        }
        let mut seen = std::collections::BTreeSet::new();
        for w in &self.workloads {
            w.limits.validate("workload.limits")?;
            if !seen.insert(&w.workload) {
                return Err(invalid("workloads", "a workload is listed twice"));
            }
        }
        Ok(())
    }
}

/// The outcome of a registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Registered {
    /// First registration of the key.
    New {
        /// Workloads that joined the pool's distinct membership now.
        membership_charged: i64,
        /// Whether an executor may be started (execution phase only).
        executor_permit: bool,
    },
    /// The identical original was already registered: reopened as history, nothing charged,
    /// no executor permit.
    Reopened,
}

/// A stored registration, readable after expiry and revocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistrationHistory {
    /// The key.
    pub key: GrantKey,
    /// The original bytes' digest.
    pub grant_digest: Sha256Digest,
    /// The original bytes.
    pub original_bytes: Vec<u8>,
    /// The trust revision it was registered under, as recorded then.
    pub trust: TrustRevision,
    /// Registration time (database clock, unix seconds).
    pub registered_at_unix: i64,
    /// The grant's validity end.
    pub not_after_unix: i64,
    /// The grant's revocation epoch.
    pub revocation_epoch: i64,
}

/// One attempt's admission: its complete finite bound, reserved before any source read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionRequest {
    /// The grant.
    pub grant: GrantKey,
    /// The exact original bytes the caller verified (must equal the registered original).
    pub original_bytes: Vec<u8>,
    /// The workload.
    pub workload: WorkloadId,
    /// The scheduler attempt.
    pub attempt: AttemptId,
    /// Reserved source rows.
    pub source_rows: i64,
    /// Reserved source bytes.
    pub source_bytes: i64,
    /// Reserved seconds.
    pub attempt_seconds: i64,
}

impl AdmissionRequest {
    /// Validates before anything is stored.
    pub fn validate(&self) -> Result<()> {
        document("original_bytes", &self.original_bytes)?;
        for (name, v, max) in [
            ("source_rows", self.source_rows, CEILINGS.source_rows),
            ("source_bytes", self.source_bytes, CEILINGS.source_bytes),
            (
                "attempt_seconds",
                self.attempt_seconds,
                CEILINGS.attempt_seconds,
            ),
        ] {
            if !(0..=max).contains(&v) {
                return Err(StoreError::new(
                    StoreCode::LimitAboveCeiling,
                    format!("request.{name} is outside 0..={max}"),
                ));
            }
        }
        Ok(())
    }
}

/// The deterministic reservation id of an attempt: `sha256:` over the pool key, workload and
/// attempt (length-prefixed), so a lost acknowledgement can be probed without assuming.
pub fn reservation_id(
    environment: &Uuid,
    campaign: &Uuid,
    phase: Phase,
    workload: &WorkloadId,
    attempt: &AttemptId,
) -> Sha256Digest {
    let mut bytes = b"dpone.np-control-store.reservation.v1".to_vec();
    for part in [
        environment.as_str(),
        campaign.as_str(),
        phase.as_str(),
        workload.as_str(),
        attempt.as_str(),
    ] {
        bytes.extend_from_slice(&(part.len() as u32).to_be_bytes());
        bytes.extend_from_slice(part.as_bytes());
    }
    Sha256Digest::of(&bytes)
}

/// An issued reservation (immutable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The deterministic id.
    pub reservation_id: Sha256Digest,
    /// The grant.
    pub grant: GrantKey,
    /// The grant's original digest.
    pub grant_digest: Sha256Digest,
    /// The trust revision it was admitted under.
    pub trust_revision: i64,
    /// The workload.
    pub workload: WorkloadId,
    /// The attempt.
    pub attempt: AttemptId,
    /// Reserved source rows.
    pub source_rows: i64,
    /// Reserved source bytes.
    pub source_bytes: i64,
    /// Reserved seconds.
    pub attempt_seconds: i64,
    /// Whether the commit acknowledgement was lost and the outcome was settled by a probe.
    pub resolved_by_probe: bool,
}

/// The attempt's end as measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// Completed.
    Succeeded,
    /// Failed.
    Failed,
    /// Ended without a complete observation (e.g. a failed send).
    Incomplete,
}

impl AttemptOutcome {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Incomplete => "incomplete",
        }
    }
}

/// Measured usage of one reservation, recorded separately from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settlement {
    /// The reservation.
    pub reservation_id: Sha256Digest,
    /// Source rows read.
    pub measured_source_rows: i64,
    /// Source bytes read (COPY payload before compression, BCP file bytes).
    pub measured_source_bytes: i64,
    /// HTTP body bytes sent (measured separately at the sender).
    pub measured_http_bytes: i64,
    /// The outcome.
    pub outcome: AttemptOutcome,
}

/// The outcome of a settlement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// Recorded now.
    Recorded,
    /// The identical settlement was already recorded.
    Reopened,
}

/// The decision a queued admission waits for, as any scheduler of the environment can make it:
/// the pinned scope component over the request's own facts (the bytes its requester queued)
/// and a pool. Group admission asks the holder of the environment lock to decide the requests
/// of the sessions queued behind it; a holder asks its decider only about requests that name
/// the same [`PoolDecider::identity`].
pub trait PoolDecider: Sync {
    /// Names the decision function (for the scope component, its pinned digest): at most 128
    /// characters of `[a-z0-9.:_-]`, starting with a letter or digit.
    fn identity(&self) -> &str;
    /// Whether `facts` are admitted on `pool`; `false` for a denial and for facts that cannot
    /// be decided (malformed, or a component that fails): fails closed.
    fn admits(&self, facts: &[u8], pool: &PoolStatus) -> bool;
}

/// The facts [`StoreChecksOnly`] admissions queue: it reads none.
pub const STORE_CHECKS_FACTS: &[u8] = b"{}";

/// The decider of [`ControlStorePort::admit`]: admits every request, so only the store's own
/// checks decide. It decides only requests that name it (store-only admissions).
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreChecksOnly;

impl PoolDecider for StoreChecksOnly {
    fn identity(&self) -> &str {
        "dpone.np.store-checks-only.v1"
    }

    fn admits(&self, _facts: &[u8], _pool: &PoolStatus) -> bool {
        true
    }
}

/// Whether `identity` is a valid [`PoolDecider::identity`].
pub fn valid_decider_identity(identity: &str) -> bool {
    let b = identity.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b':' | b'_' | b'-')
        })
}

/// A scoped activation request: its exact bytes and the two facts the engine read from them
/// (the activation it names and the mandatory execution-grant digest it binds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActivationRequest {
    /// The activation the request names.
    pub activation_id: Uuid,
    /// The execution-grant digest the request binds.
    pub grant_digest: Sha256Digest,
    /// The exact request bytes.
    pub request_bytes: Vec<u8>,
}

impl ActivationRequest {
    /// Validates before anything is stored.
    pub fn validate(&self) -> Result<()> {
        document("request_bytes", &self.request_bytes)
    }
}

/// The outcome of the activation coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selected {
    /// This request is now the activation's single exact request.
    Selected,
    /// This exact request was already selected.
    Reopened,
}

/// A pool's charges: what the protected counters say. Charges never decrease. (Serialized as
/// the pool an outcome of the admission queue was decided on.)
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolStatus {
    /// Distinct workload membership charged.
    pub members: i64,
    /// Attempts charged (every reservation).
    pub attempts: i64,
    /// Reserved source rows (the row/byte pool: the route for qualification, the campaign for
    /// execution).
    pub reserved_source_rows: i64,
    /// Reserved source bytes.
    pub reserved_source_bytes: i64,
    /// Reservations without a settlement (still RUNNING, still charged).
    pub unresolved: i64,
    /// Measured source rows of settled attempts.
    pub measured_source_rows: i64,
    /// Measured source bytes of settled attempts.
    pub measured_source_bytes: i64,
    /// Measured HTTP body bytes of settled attempts.
    pub measured_http_bytes: i64,
}

/// A reservation as listed with its pool: the reservation and, once recorded, its measured
/// usage (which never frees it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedReservation {
    /// The reservation (charged forever).
    pub reservation: Reservation,
    /// Reservation time (database clock, unix seconds).
    pub reserved_at_unix: i64,
    /// The settlement, if any; `None` is an unresolved (RUNNING) attempt.
    pub settlement: Option<Settlement>,
    /// When a run claimed the reservation ([`ControlStore::claim_run`], database clock, unix
    /// seconds); `None` while no run has.
    pub run_claimed_at_unix: Option<i64>,
    /// The enrolled participants the claiming run was bound to (by id and identity digest,
    /// one per connection role); empty while no run has claimed it.
    pub run_participants: Vec<crate::enrollment::RunParticipant>,
}

/// Most reservations one listing returns (a pool holds at most 128 attempts).
pub const MAX_LISTED_RESERVATIONS: u32 = 256;

/// The current trust revision as a run under a reservation re-reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentTrust {
    /// The revision number.
    pub revision: i64,
    /// `sha256:` of its policy bytes.
    pub policy_digest: Sha256Digest,
    /// Its revocation epoch.
    pub revocation_epoch: i64,
}

/// What a source read under an admitted reservation re-checks before it starts, read in one
/// statement (one snapshot, database clock): the reservation with its settlement, its grant's
/// registration, the trust revision it was admitted under and the current one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservationAuthority {
    /// The reservation, its time and its settlement (`None`: unresolved, RUNNING).
    pub listed: ListedReservation,
    /// The environment of the reservation.
    pub environment: Uuid,
    /// The registered grant's revocation epoch.
    pub grant_revocation_epoch: i64,
    /// The grant's validity window has ended (database clock).
    pub grant_expired: bool,
    /// The grant's validity window has not started (database clock).
    pub grant_not_yet_valid: bool,
    /// The attempt's duration bound has elapsed since the reservation (database clock).
    pub attempt_window_elapsed: bool,
    /// Milliseconds left of the attempt's duration bound, computed in the same statement by
    /// the same clock (zero or negative once elapsed): the run's deadline.
    pub attempt_millis_remaining: i64,
    /// The reserved workload's registered pack digest (`sha256:` of the manifest it runs).
    pub pack_digest: Sha256Digest,
    /// The policy digest of the trust revision the reservation was admitted under.
    pub admitted_policy_digest: Sha256Digest,
    /// The environment's current trust revision (`None`: none recorded).
    pub current_trust: Option<CurrentTrust>,
    /// The database clock is earlier than the newest trust revision.
    pub clock_backwards: bool,
}

impl ReservationAuthority {
    /// Refuses a read under this reservation unless it is RUNNING (unsettled), current
    /// authority still holds (a trust revision is recorded, the clock has not gone back, the
    /// grant's epoch is not below the current one, the current revision pins the policy the
    /// reservation was admitted under, the grant's window holds) and the attempt's duration
    /// bound has not elapsed. The first failing check names the code.
    pub fn check(&self) -> Result<()> {
        if self.listed.settlement.is_some() {
            return Err(StoreError::new(
                StoreCode::ReservationResolved,
                "the reservation is already settled; admit a new attempt",
            ));
        }
        let Some(current) = &self.current_trust else {
            return Err(StoreError::new(
                StoreCode::TrustMissing,
                "no trust revision is recorded",
            ));
        };
        if self.clock_backwards {
            return Err(StoreError::new(
                StoreCode::ClockBackwards,
                "the database clock is earlier than the newest trust revision",
            ));
        }
        if self.grant_revocation_epoch < current.revocation_epoch {
            return Err(StoreError::new(
                StoreCode::GrantRevoked,
                "the reservation's grant is revoked by the current trust revision",
            ));
        }
        if current.policy_digest != self.admitted_policy_digest {
            return Err(StoreError::new(
                StoreCode::TrustRevisionChanged,
                "the current trust revision pins another policy than the reservation was \
                 admitted under",
            ));
        }
        if self.grant_expired {
            return Err(StoreError::new(
                StoreCode::GrantExpired,
                "the grant's validity window has ended",
            ));
        }
        if self.grant_not_yet_valid {
            return Err(StoreError::new(
                StoreCode::GrantNotYetValid,
                "the grant's validity window has not started",
            ));
        }
        if self.attempt_window_elapsed {
            return Err(StoreError::new(
                StoreCode::AttemptWindowElapsed,
                "the attempt's duration bound has elapsed since its reservation",
            ));
        }
        Ok(())
    }
}

/// What an admission transaction decided on the pool it read: the decision is made inside the
/// transaction that commits it (after the environment lock, in its snapshot), so concurrent
/// schedulers see each other's reservations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// The decision admitted and the store reserved.
    Admitted {
        /// The issued reservation.
        reservation: Reservation,
        /// The pool's charges the decision was made on.
        pool_before: PoolStatus,
    },
    /// The decision denied; nothing was written.
    Denied {
        /// The pool's charges the decision was made on.
        pool_before: PoolStatus,
    },
}

/// The pool a status is read for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolKey {
    /// The environment.
    pub environment: Uuid,
    /// The campaign.
    pub campaign: Uuid,
    /// The phase.
    pub phase: Phase,
    /// The route (qualification rows/bytes pool); `None` for execution.
    pub route: Option<Route>,
}

/// The protected control store as the engine drives it. One implementation per database; the
/// PostgreSQL one is [`crate::PgControlStore`].
pub trait ControlStorePort {
    /// Verifies the reviewed DDL (never creates it).
    fn verify_catalog(&self) -> impl Future<Output = Result<()>> + Send;

    /// Appends a trust revision unless the record equals the current one (then returns it).
    fn record_trust(
        &self,
        record: &PolicyRecord,
    ) -> impl Future<Output = Result<TrustRevision>> + Send;

    /// The current trust revision.
    fn current_trust(
        &self,
        environment: &Uuid,
    ) -> impl Future<Output = Result<Option<TrustRevision>>> + Send;

    /// Runs `verify` against the current revision, bracketed by two reads that must agree.
    fn authenticate<F>(
        &self,
        environment: &Uuid,
        verify: F,
    ) -> impl Future<Output = Result<Authenticated>> + Send
    where
        F: FnOnce(&TrustRevision) -> std::result::Result<(), String> + Send;

    /// Registers a grant's immutable original (and charges execution membership).
    fn register(
        &self,
        auth: &Authenticated,
        grant: &GrantRegistration,
    ) -> impl Future<Output = Result<Registered>> + Send;

    /// Consumes a qualification grant's one-time run.
    fn consume_qualification(
        &self,
        auth: &Authenticated,
        grant: &GrantKey,
        original_bytes: &[u8],
    ) -> impl Future<Output = Result<()>> + Send;

    /// Records a documentary activation candidate (never replaces the selected request);
    /// `true` when it was new.
    fn record_activation_candidate(
        &self,
        request: &ActivationRequest,
    ) -> impl Future<Output = Result<bool>> + Send;

    /// Selects the activation's single exact request, bound to an execution grant.
    fn select_activation_request(
        &self,
        auth: &Authenticated,
        grant: &GrantKey,
        original_bytes: &[u8],
        request: &ActivationRequest,
    ) -> impl Future<Output = Result<Selected>> + Send;

    /// Reserves RUNNING plus the attempt's complete bound in one SERIALIZABLE transaction,
    /// after `decider` admitted `facts` (the attempt's scope facts, as the decider reads them)
    /// on the pool's charges as that transaction reads them. The request is queued first, and
    /// whichever scheduler holds the environment lock decides every queued request of a waiting
    /// session in arrival order, each on the pool as the requests before it left it (group
    /// admission): a decider is asked only about requests that name its
    /// [`PoolDecider::identity`], and decides again on every try (a serialization retry decides
    /// again on the new read). The store's own checks (duplicate and running attempts,
    /// ownership, the effective ceilings of policy, grant and workload applied to the pool) run
    /// around it and can only refuse more. The outcome returned may have been decided by another
    /// scheduler: the caller decides again on its `pool_before` and refuses a difference.
    fn admit_decided<D>(
        &self,
        auth: &Authenticated,
        request: &AdmissionRequest,
        facts: &[u8],
        decider: &D,
    ) -> impl Future<Output = Result<Admission>> + Send
    where
        D: PoolDecider;

    /// [`ControlStorePort::admit_decided`] with the store's own checks only
    /// ([`StoreChecksOnly`]).
    fn admit(
        &self,
        auth: &Authenticated,
        request: &AdmissionRequest,
    ) -> impl Future<Output = Result<Reservation>> + Send
    where
        Self: Sync,
    {
        async move {
            match self
                .admit_decided(auth, request, STORE_CHECKS_FACTS, &StoreChecksOnly)
                .await?
            {
                Admission::Admitted { reservation, .. } => Ok(reservation),
                Admission::Denied { .. } => Err(StoreError::new(
                    StoreCode::StoredStateInvalid,
                    "an admission that always admits was denied",
                )),
            }
        }
    }

    /// Reads a reservation by its deterministic id.
    fn probe(
        &self,
        reservation_id: &Sha256Digest,
    ) -> impl Future<Output = Result<Option<Reservation>>> + Send;

    /// Records measured usage; never frees a reservation.
    fn settle(&self, settlement: &Settlement) -> impl Future<Output = Result<Settled>> + Send;

    /// A pool's charges.
    fn pool_status(&self, pool: &PoolKey) -> impl Future<Output = Result<PoolStatus>> + Send;

    /// The pool's reservations, oldest first, at most `limit`
    /// ([`MAX_LISTED_RESERVATIONS`] at most), each with its settlement.
    fn reservations(
        &self,
        pool: &PoolKey,
        limit: u32,
    ) -> impl Future<Output = Result<Vec<ListedReservation>>> + Send;

    /// What a run under the reservation re-checks before any source read
    /// ([`ReservationAuthority::check`]), in one snapshot; `None` for an unknown id.
    fn reservation_authority(
        &self,
        reservation_id: &Sha256Digest,
    ) -> impl Future<Output = Result<Option<ReservationAuthority>>> + Send;

    /// Claims reservation `reservation_id` for the one run it bounds, atomically (one insert
    /// into the claim table, unique per reservation): `true` for the claim, `false` when a
    /// run already holds it. A claim is never released.
    /// The run's enrolled participants (one per connection role) are recorded with the claim,
    /// in its statement.
    fn claim_run(
        &self,
        reservation_id: &Sha256Digest,
        participants: &[crate::enrollment::RunParticipant],
    ) -> impl Future<Output = Result<bool>> + Send;

    /// A registration as recorded, under its original trust revision.
    fn history(
        &self,
        grant: &GrantKey,
    ) -> impl Future<Output = Result<Option<RegistrationHistory>>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values_refuse_malformed_input_with_the_input_code() {
        // Tier: unit (pure).
        assert!(Uuid::parse("u", "00000000-0000-4000-8000-000000000001").is_ok());
        for bad in [
            "00000000-0000-4000-8000-00000000000G",
            "00000000-0000-4000-8000-00000000000A",
            "000000000000-4000-8000-000000000001",
            "",
        ] {
            assert_eq!(
                Uuid::parse("u", bad).unwrap_err().code,
                StoreCode::InvalidInput
            );
        }
        let d = Sha256Digest::of(b"x");
        assert_eq!(Sha256Digest::parse("d", d.as_str()), Ok(d.clone()));
        assert!(Sha256Digest::parse("d", &d.as_str().to_uppercase()).is_err());
        assert!(Route::new(["a", "b", "c", "d", "e", ""]).is_err());
        assert!(Route::new(["a", "b", "c", "d", "e", "f g"]).is_err());
        assert!(WorkloadId::new(&"w".repeat(129)).is_err());
        let mut l = CEILINGS;
        assert!(l.validate("x").is_ok());
        l.source_bytes += 1;
        assert_eq!(
            l.validate("x").unwrap_err().code,
            StoreCode::LimitAboveCeiling
        );
        l = CEILINGS;
        l.attempts = -1;
        assert_eq!(
            l.validate("x").unwrap_err().code,
            StoreCode::LimitAboveCeiling
        );
    }

    #[test]
    fn reservation_ids_are_deterministic_and_separate_every_part() {
        // Tier: unit (pure).
        let e = Uuid::parse("e", "00000000-0000-4000-8000-000000000001").unwrap();
        let c = Uuid::parse("c", "00000000-0000-4000-8000-000000000002").unwrap();
        let w = WorkloadId::new("w1").unwrap();
        let a = AttemptId::new("a1").unwrap();
        let id = reservation_id(&e, &c, Phase::Execution, &w, &a);
        assert_eq!(id, reservation_id(&e, &c, Phase::Execution, &w, &a));
        assert_ne!(id, reservation_id(&e, &c, Phase::Qualification, &w, &a));
        assert_ne!(id, reservation_id(&c, &e, Phase::Execution, &w, &a));
        let (w2, a2) = (
            WorkloadId::new("w").unwrap(),
            AttemptId::new("1a1").unwrap(),
        );
        assert_ne!(id, reservation_id(&e, &c, Phase::Execution, &w2, &a2));
    }

    #[test]
    fn a_run_under_a_reservation_refuses_with_the_first_failing_check() {
        // Tier: unit (pure).
        let uuid = Uuid::parse("u", "00000000-0000-4000-8000-000000000001").unwrap();
        let policy = Sha256Digest::of(b"policy");
        let running = ReservationAuthority {
            listed: ListedReservation {
                reservation: Reservation {
                    reservation_id: Sha256Digest::of(b"r"),
                    grant: GrantKey {
                        grant_id: uuid.clone(),
                        phase: Phase::Execution,
                    },
                    grant_digest: Sha256Digest::of(b"g"),
                    trust_revision: 1,
                    workload: WorkloadId::new("w").unwrap(),
                    attempt: AttemptId::new("a").unwrap(),
                    source_rows: 10,
                    source_bytes: 100,
                    attempt_seconds: 60,
                    resolved_by_probe: false,
                },
                reserved_at_unix: 1,
                settlement: None,
                run_claimed_at_unix: None,
                run_participants: Vec::new(),
            },
            environment: uuid,
            grant_revocation_epoch: 3,
            grant_expired: false,
            grant_not_yet_valid: false,
            attempt_window_elapsed: false,
            attempt_millis_remaining: 60_000,
            pack_digest: Sha256Digest::of(b"manifest"),
            admitted_policy_digest: policy.clone(),
            current_trust: Some(CurrentTrust {
                revision: 2,
                policy_digest: policy,
                revocation_epoch: 3,
            }),
            clock_backwards: false,
        };
        assert_eq!(
            running.check(),
            Ok(()),
            "a new revision that revokes nothing"
        );
        let code = |edit: &dyn Fn(&mut ReservationAuthority)| {
            let mut a = running.clone();
            edit(&mut a);
            a.check().unwrap_err().code
        };
        assert_eq!(
            code(&|a| {
                a.listed.settlement = Some(Settlement {
                    reservation_id: a.listed.reservation.reservation_id.clone(),
                    measured_source_rows: 0,
                    measured_source_bytes: 0,
                    measured_http_bytes: 0,
                    outcome: AttemptOutcome::Failed,
                });
                a.grant_expired = true;
            }),
            StoreCode::ReservationResolved
        );
        assert_eq!(code(&|a| a.current_trust = None), StoreCode::TrustMissing);
        assert_eq!(
            code(&|a| a.clock_backwards = true),
            StoreCode::ClockBackwards
        );
        assert_eq!(
            code(&|a| a.grant_revocation_epoch = 2),
            StoreCode::GrantRevoked
        );
        assert_eq!(
            code(&|a| a.admitted_policy_digest = Sha256Digest::of(b"old")),
            StoreCode::TrustRevisionChanged
        );
        assert_eq!(code(&|a| a.grant_expired = true), StoreCode::GrantExpired);
        assert_eq!(
            code(&|a| a.grant_not_yet_valid = true),
            StoreCode::GrantNotYetValid
        );
        assert_eq!(
            code(&|a| a.attempt_window_elapsed = true),
            StoreCode::AttemptWindowElapsed
        );
    }

    #[test]
    fn every_code_is_distinct_and_in_the_family() {
        // Tier: unit (pure).
        let set: std::collections::BTreeSet<_> =
            StoreCode::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(set.len(), StoreCode::ALL.len());
        assert!(set.iter().all(|c| c.starts_with("DPONE_NP_STORE_")));
    }
}
