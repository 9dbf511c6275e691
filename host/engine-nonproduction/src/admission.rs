//! Protected admission (spec 004, "Shared protected ownership" and "Scope, phases and limits"):
//! the protocol that admits one scheduler attempt against the protected control store, behind
//! two ports the composition root fills — the store ([`ControlStorePort`], an adapter) and the
//! grant's verification and the scope decision ([`Verifier`], [`ScopeDecider`]: the signature
//! adapter and the pinned scope component).
//!
//! 1. **Validate** every value before anything is contacted (keys, route, attempt, bound).
//! 2. **Authenticate in the revision bracket**: the store reads the current trust revision,
//!    the verifier verifies the grant under it (its revocation epoch), the store reads again;
//!    the two reads must agree ([`ControlStorePort::authenticate`]).
//! 3. **Read, decide and reserve in one transaction, possibly another scheduler's**: the
//!    request (with the scope facts, the pool left for the store to fill) is queued in the
//!    store; whichever scheduler holds the environment lock begins a SERIALIZABLE transaction,
//!    re-checks the revision, the exact original bytes, the database clock, revocation and
//!    ownership, reads the pool's charges, and decides every queued request naming the same
//!    decider identity (the pinned component's digest) in arrival order, each on the pool as
//!    the ones before it left it ([`ControlStorePort::admit_decided`], group admission). The
//!    reservations are written in the same transaction; a serialization retry decides again on
//!    its own read. So concurrent schedulers get exactly the answers one-at-a-time schedulers
//!    get, for every limit layer (policy, grant, workload) and dimension (attempts, rows,
//!    bytes, membership, unresolved attempts).
//! 4. **Trust no other decider**: the outcome names the pool it was decided on
//!    (`pool_before`). This scheduler keeps its own decision when it decided, and otherwise
//!    decides again on that pool in its own sandbox: a different answer is refused as stored
//!    state that is not valid. The evidence returned is always this scheduler's own decision
//!    on the pool that was committed.
//! 5. **A lost acknowledgement** is resolved inside the store by reading the request's outcome
//!    (the original backend is ended first); the outcome returned says so
//!    (`resolved_by_probe`).
//!
//! Pure: no driver and no runtime; the futures are the store's. The whole admission runs in
//! one `admit` phase span (target `dpone::phase`, see [`crate::phase_span`]).

use crate::control_store::{
    self as store, Admission, AdmissionRequest, ControlStorePort, PoolDecider, PoolStatus,
    StoreError, TrustRevision, mapping,
};
use crate::error::NpError;
use crate::facts::{self, ScopeTarget};
use crate::{ActivationRequest, Authority, AuthorityPolicy, Composition};
use dpone_policy_model::scope::{Limits, ScopeDecision, ScopeFacts};
use dpone_policy_model::types::Reason;
use std::sync::Mutex;
use tracing::Instrument as _;

/// The grant's verification under a trust revision (signature, reopen, stateless scope): the
/// signature adapter and the pinned component, filled by the composition root.
pub trait Verifier {
    /// What a successful verification reports.
    type Evidence: Send;
    /// What a refused verification reports.
    type Refusal: Send;
    /// Verifies the grant under `trust` (its policy bytes and revocation epoch).
    fn verify(&self, trust: &TrustRevision) -> Result<Self::Evidence, Self::Refusal>;
}

/// One scope decision by the pinned scope component.
pub trait ScopeDecider {
    /// The decision's evidence (component digest, input digest, output, fuel).
    type Evidence: Clone + Send;
    /// A component that failed to decide (trap, limit, malformed output): fails closed.
    type Failure: Send;
    /// Names the decision function for group admission ([`PoolDecider::identity`]): the
    /// pinned component's digest, so schedulers decide each other's queued requests only with
    /// the same component.
    fn identity(&self) -> &str;
    /// Decides `facts`.
    fn decide(&self, facts: &ScopeFacts) -> Result<(ScopeDecision, Self::Evidence), Self::Failure>;
}

/// The largest queued facts a decider reads (the documents' own bound).
pub const MAX_QUEUED_FACTS: usize = 256 * 1024;

/// A queued request's facts (the [`ScopeFacts`] JSON its requester queued) with `pool` put in;
/// `None` when they do not parse (untrusted input: another scheduler wrote them).
pub fn facts_with_pool(bytes: &[u8], pool: &PoolStatus) -> Option<ScopeFacts> {
    if bytes.len() > MAX_QUEUED_FACTS {
        return None;
    }
    let mut facts: ScopeFacts = serde_json::from_slice(bytes).ok()?;
    facts.pool = mapping::pool_usage_of(
        &facts.pool.environment_id,
        &facts.pool.campaign_id,
        facts.pool.phase,
        pool,
    );
    Some(facts)
}

/// The engine's [`PoolDecider`]: the scope decider over a queued request's facts with the pool
/// put in ([`facts_with_pool`]). The decision of this scheduler's own facts is kept, so the
/// outcome it committed is reported with its own evidence.
struct FactsDecider<'a, D: ScopeDecider> {
    decider: &'a D,
    own: &'a [u8],
    kept: Mutex<Option<Kept<D>>>,
}

/// This scheduler's own decision: the pool it was made on and what the component answered.
type Kept<D> = (
    PoolStatus,
    Result<(ScopeDecision, <D as ScopeDecider>::Evidence), <D as ScopeDecider>::Failure>,
);

impl<D> PoolDecider for FactsDecider<'_, D>
where
    D: ScopeDecider + Sync,
{
    fn identity(&self) -> &str {
        self.decider.identity()
    }

    fn admits(&self, facts: &[u8], pool: &PoolStatus) -> bool {
        let Some(decided) = facts_with_pool(facts, pool) else {
            return false;
        };
        let outcome = self.decider.decide(&decided);
        let admit = matches!(&outcome, Ok((ScopeDecision::Admit(_), _)));
        if facts == self.own
            && let Ok(mut kept) = self.kept.lock()
        {
            *kept = Some((pool.clone(), outcome));
        }
        admit
    }
}

/// One attempt's admission, as the scheduler asks for it.
#[derive(Clone, Copy, Debug)]
pub struct AdmitInputs<'a> {
    /// The pinned policy.
    pub policy: &'a AuthorityPolicy,
    /// The grant.
    pub grant: &'a Authority,
    /// The grant's exact canonical bytes (must equal the registered original).
    pub grant_bytes: &'a [u8],
    /// The composition the grant was verified with.
    pub composition: &'a Composition,
    /// The scoped activation request (execution only).
    pub request: Option<&'a ActivationRequest>,
    /// The workload.
    pub workload: &'a str,
    /// The scheduler attempt.
    pub attempt: &'a str,
    /// The attempt's complete source-row bound.
    pub source_rows: u64,
    /// The attempt's complete source-byte bound.
    pub source_bytes: u64,
    /// The attempt's duration bound in seconds.
    pub attempt_seconds: u64,
    /// The caller's clock (unix seconds); the store checks windows by the database clock too.
    pub now: u64,
}

/// The committed decision.
#[derive(Clone, Debug)]
pub struct Decision<E> {
    /// The component's decision.
    pub decision: ScopeDecision,
    /// Its evidence.
    pub evidence: E,
    /// The pool's charges it was made on, as the committing transaction read them.
    pub pool_before: PoolStatus,
}

/// How an admission ended.
#[derive(Debug)]
pub enum Admitted<V, E> {
    /// Reserved.
    Reserved {
        /// The reservation.
        reservation: store::Reservation,
        /// The trust revision the bracket saw.
        trust_revision: i64,
        /// The verification's evidence.
        verification: V,
        /// The effective limits the component applied.
        effective_limits: Limits,
        /// The decision that was committed.
        decision: Decision<E>,
    },
    /// The component denied on the committing transaction's read; nothing was written.
    Denied {
        /// The denial.
        reason: Reason,
        /// The trust revision the bracket saw.
        trust_revision: i64,
        /// The decision that was made (and nothing committed).
        decision: Decision<E>,
    },
}

/// Why an admission failed before a decision was committed.
#[derive(Debug)]
pub enum AdmitError<R, F> {
    /// The grant's verification refused inside the bracket.
    Verification(R),
    /// The documents do not map to the facts or the store's values (stable `DPONE_NP_*` code).
    Facts(NpError),
    /// The scope component failed to decide (fails closed).
    Decider(F),
    /// The store refused or failed (stable `DPONE_NP_STORE_*` code).
    Store(StoreError),
}

impl<R, F> From<StoreError> for AdmitError<R, F> {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// What a port's callback leaves for the protocol to read after the store returns.
type Slot<T> = Mutex<Option<T>>;
/// The verification inside the bracket, with the revision's revocation epoch.
type Verified<V> = Slot<(
    Result<<V as Verifier>::Evidence, <V as Verifier>::Refusal>,
    i64,
)>;

/// The store's admission request for `i`, validated before anything is contacted.
pub fn admission_request(i: &AdmitInputs<'_>) -> Result<AdmissionRequest, StoreError> {
    let int = |field: &str, v: u64| {
        i64::try_from(v).map_err(|_| {
            StoreError::new(
                store::StoreCode::LimitAboveCeiling,
                format!("{field} is above the spec's ceiling"),
            )
        })
    };
    let request = AdmissionRequest {
        grant: mapping::grant_key(i.grant)?,
        original_bytes: i.grant_bytes.to_vec(),
        workload: store::WorkloadId::new(i.workload)?,
        attempt: store::AttemptId::new(i.attempt)?,
        source_rows: int("source_rows", i.source_rows)?,
        source_bytes: int("source_bytes", i.source_bytes)?,
        attempt_seconds: int("attempt_seconds", i.attempt_seconds)?,
    };
    request.validate()?;
    Ok(request)
}

/// The scope facts of `i` on `pool` under revocation epoch `epoch`.
fn facts_on(i: &AdmitInputs<'_>, pool: &PoolStatus, epoch: i64) -> Result<ScopeFacts, NpError> {
    let target = match i.request {
        Some(request) => ScopeTarget::Execution {
            request,
            composition: i.composition,
        },
        None => ScopeTarget::Qualification(i.composition),
    };
    facts::scope_facts(
        i.policy,
        i.grant,
        target,
        i.workload,
        facts::Reservation {
            workloads: 0,
            attempts: 1,
            source_rows: i.source_rows,
            source_bytes: i.source_bytes,
        },
        &mapping::pool_usage(i.grant, pool),
        i.now,
        u64::try_from(epoch).unwrap_or(u64::MAX),
    )
}

/// Why an authentication in the revision bracket failed.
#[derive(Debug)]
pub enum Bracket<R> {
    /// The verification refused under the current revision.
    Refused(R),
    /// The store refused (no revision, the revision changed during verification) or failed.
    Store(StoreError),
}

/// Authenticates in the store's revision bracket: `verifier` verifies under the current trust
/// revision, read before and after. Returns the proof, the verification's evidence and the
/// revision's revocation epoch. Every protected operation (registration, admission) starts so.
pub async fn authenticate<S, V>(
    store: &S,
    environment: &store::Uuid,
    verifier: &V,
) -> Result<(store::Authenticated, V::Evidence, i64), Bracket<V::Refusal>>
where
    S: ControlStorePort + Sync,
    V: Verifier + Sync,
{
    let verified: Verified<V> = Mutex::new(None);
    let auth = store
        .authenticate(environment, |trust| {
            let result = verifier.verify(trust);
            let ok = result.is_ok();
            if let Ok(mut slot) = verified.lock() {
                *slot = Some((result, trust.revocation_epoch));
            }
            if ok {
                Ok(())
            } else {
                Err("refused".to_owned())
            }
        })
        .await;
    match (auth, verified.into_inner().ok().flatten()) {
        (Ok(auth), Some((Ok(evidence), epoch))) => Ok((auth, evidence, epoch)),
        (Err(e), Some((Err(refusal), _))) if e.code == store::StoreCode::AuthenticationFailed => {
            Err(Bracket::Refused(refusal))
        }
        (Err(e), _) => Err(Bracket::Store(e)),
        (Ok(_), _) => Err(Bracket::Store(StoreError::new(
            store::StoreCode::StoredStateInvalid,
            "the authentication bracket returned without a verification",
        ))),
    }
}

/// Admits one attempt: validate, authenticate in the bracket, then read, decide and reserve in
/// one transaction (see the module docs).
pub async fn admit<S, V, D>(
    store: &S,
    verifier: &V,
    decider: &D,
    i: &AdmitInputs<'_>,
) -> Result<Admitted<V::Evidence, D::Evidence>, AdmitError<V::Refusal, D::Failure>>
where
    S: ControlStorePort + Sync,
    V: Verifier + Sync,
    D: ScopeDecider + Sync,
{
    // One `admit` phase span over the whole admission (the bracket and the transaction); every
    // decision made inside it, a serialization retry's included, is a span of its own under it.
    admit_in_phase(store, verifier, decider, i)
        .instrument(crate::phase_span("admit"))
        .await
}

async fn admit_in_phase<S, V, D>(
    store: &S,
    verifier: &V,
    decider: &D,
    i: &AdmitInputs<'_>,
) -> Result<Admitted<V::Evidence, D::Evidence>, AdmitError<V::Refusal, D::Failure>>
where
    S: ControlStorePort + Sync,
    V: Verifier + Sync,
    D: ScopeDecider + Sync,
{
    let request = admission_request(i)?;
    let environment = mapping::environment(i.policy)?;
    // Everything the facts need but the pool is fixed now: a mapping refusal comes before any I/O.
    facts_on(i, &PoolStatus::default(), 0).map_err(AdmitError::Facts)?;

    let (auth, verification, epoch) =
        authenticate(store, &environment, verifier)
            .await
            .map_err(|e| match e {
                Bracket::Refused(r) => AdmitError::Verification(r),
                Bracket::Store(e) => AdmitError::Store(e),
            })?;
    // The facts queued with the request: everything but the pool, which whoever decides puts in.
    let queued = facts_on(i, &PoolStatus::default(), epoch).map_err(AdmitError::Facts)?;
    let own = serde_json::to_vec(&queued).map_err(|_| {
        AdmitError::Store(StoreError::new(
            store::StoreCode::InvalidInput,
            "the scope facts do not serialize",
        ))
    })?;
    if own.len() > MAX_QUEUED_FACTS {
        return Err(AdmitError::Store(StoreError::new(
            store::StoreCode::InvalidInput,
            "the scope facts exceed the queue's bound",
        )));
    }
    let group = FactsDecider {
        decider,
        own: &own,
        kept: Mutex::new(None),
    };
    let admission = store.admit_decided(&auth, &request, &own, &group).await?;
    let pool_before = match &admission {
        Admission::Admitted { pool_before, .. } | Admission::Denied { pool_before } => {
            pool_before.clone()
        }
    };
    // The outcome may have been decided by another scheduler holding the lock: this scheduler's
    // own component decides on the same pool (unless it decided this very pool itself), and a
    // different answer is refused. The decision reported is always this scheduler's own.
    let kept = group
        .kept
        .into_inner()
        .ok()
        .flatten()
        .filter(|(pool, _)| *pool == pool_before)
        .map(|(_, outcome)| outcome);
    let outcome = match kept {
        Some(outcome) => outcome,
        None => {
            let facts = facts_on(i, &pool_before, epoch).map_err(AdmitError::Facts)?;
            decider.decide(&facts)
        }
    };
    let (decision, evidence) = outcome.map_err(AdmitError::Decider)?;
    let decision = Decision {
        decision,
        evidence,
        pool_before,
    };
    let trust_revision = auth.revision();
    match (admission, &decision.decision) {
        (Admission::Admitted { reservation, .. }, ScopeDecision::Admit(a)) => {
            Ok(Admitted::Reserved {
                reservation,
                trust_revision,
                verification,
                effective_limits: a.effective_limits,
                decision,
            })
        }
        (Admission::Denied { .. }, ScopeDecision::Deny(reason)) => Ok(Admitted::Denied {
            reason: reason.clone(),
            trust_revision,
            decision,
        }),
        (Admission::Admitted { reservation, .. }, ScopeDecision::Deny(_)) => {
            Err(AdmitError::Store(StoreError {
                code: store::StoreCode::StoredStateInvalid,
                message: "the queued attempt was admitted, but this scheduler's scope component \
                          denies it on the pool it was admitted on; settle the reservation"
                    .to_owned(),
                reservation_id: Some(reservation.reservation_id),
            }))
        }
        (Admission::Denied { .. }, ScopeDecision::Admit(_)) => {
            Err(AdmitError::Store(StoreError::new(
                store::StoreCode::StoredStateInvalid,
                "the queued attempt was denied, but this scheduler's scope component admits it \
                 on the pool it was denied on",
            )))
        }
    }
}
