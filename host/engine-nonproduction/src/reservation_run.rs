//! A route run under an admitted nonproduction reservation (`dpone-host run --np-reservation`):
//! the protocol around either route, behind the control store's port. [`open`] reads the
//! reservation's authority in one statement, checks it, binds the manifest and yields the bound
//! and the deadline before any source or target access; [`settle`] records what the run
//! measured. The route itself (its source bound, its safe stopping points at the deadline) is
//! the cli's to wire. The pure parts:
//!
//! - [`check_manifest`]: the manifest a run executes is the admitted workload's. Its `name` must
//!   be the reservation's workload id, and `sha256:` of the manifest file's exact bytes must be
//!   the workload's `pack_digest` as the composition declared it and the store registered it
//!   with the grant. The name is checked first, then the bytes; both before any source or
//!   target access.
//! - [`AttemptClock`]: the attempt's deadline. The store computes, in the same statement and by
//!   the same database clock that decides `attempt_window_elapsed`, the milliseconds left of
//!   `attempt_seconds` counted from the reservation time; the host anchors them at the moment
//!   it *sent* that statement (never later than the database's reading), so the local deadline
//!   is never later than the database's.
//! - [`settlement_of`]: what a run's end settles — outcome, source rows and bytes (clamped to
//!   the reservation, which the store refuses to exceed) and the HTTP body bytes the sender
//!   measured.
//!
//! Source reads are charged to the attempt that read them. A resumed ClickHouse publication
//! whose artifact an earlier attempt sealed reads nothing: when it completes it settles
//! `succeeded` with zero source rows and bytes and the HTTP body bytes it sent. It cannot read
//! more than reserved either, because the reservation's bound applies to any read it does.

use crate::control_store::{
    AttemptOutcome, ControlStorePort, Reservation, Settled, Settlement, Sha256Digest, StoreCode,
    StoreError,
};
use crate::fields::Digest;
use std::time::{Duration, Instant};
use tracing::Instrument as _;

/// A reservation opened for a run: what bounds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The reservation (RUNNING, current authority checked).
    pub reservation: Reservation,
    /// The source-row bound.
    pub max_rows: u64,
    /// The source-byte bound.
    pub max_bytes: u64,
    /// The attempt's deadline.
    pub clock: AttemptClock,
}

/// Why a run may not start under a reservation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpenRefusal {
    /// The store refused (unknown, settled, revoked, expired, window elapsed, …) or failed.
    Store(StoreError),
    /// The manifest is not the admitted workload's.
    Manifest(ManifestMismatch),
    /// The run's connections are not the enrolled participants its workload's route names, or
    /// a relation is outside their subjects ([`crate::enrollment::bind_run`]); `code` is stable.
    Binding {
        /// The stable code.
        code: &'static str,
        /// What is wrong, naming no endpoint, path or value.
        message: String,
    },
}

fn bound(v: i64) -> Result<u64, OpenRefusal> {
    u64::try_from(v).map_err(|_| {
        OpenRefusal::Store(StoreError::new(
            StoreCode::StoredStateInvalid,
            "a stored reservation bound is negative",
        ))
    })
}

/// Opens reservation `id` for a run of the manifest `manifest_bytes` named `manifest_name`:
/// one read of the store (database clock), its checks, the manifest's binding, the bound and
/// the deadline, then the run's claim on the reservation (one run per reservation, even when
/// several start at once). Nothing is read from a source or written to a target before this
/// returns `Ok`, and a refusal settles nothing.
pub async fn open<S: ControlStorePort>(
    store: &S,
    id: &Sha256Digest,
    manifest_bytes: &[u8],
    manifest_name: &str,
) -> Result<Opened, OpenRefusal> {
    open_bound(store, id, manifest_bytes, manifest_name, |_| async {
        Ok(Vec::new())
    })
    .await
}

/// [`open`] with the run's physical binding: after the store's checks and the manifest's
/// binding and before the claim, `bind` observes the run's connections and binds them to the
/// enrolled participants ([`crate::enrollment::bind_run`]); its participants are recorded with
/// the claim. A refusal of `bind` leaves the reservation unclaimed and runnable.
pub async fn open_bound<S, B, F>(
    store: &S,
    id: &Sha256Digest,
    manifest_bytes: &[u8],
    manifest_name: &str,
    bind: B,
) -> Result<Opened, OpenRefusal>
where
    S: ControlStorePort,
    B: FnOnce(&Reservation) -> F,
    F: std::future::Future<Output = Result<Vec<crate::enrollment::RunParticipant>, OpenRefusal>>,
{
    // Anchored before the statement is sent: the database computes the time left later, so
    // this deadline is never later than the database's.
    let asked_at = Instant::now();
    let authority = store
        .reservation_authority(id)
        .await
        .map_err(OpenRefusal::Store)?
        .ok_or_else(|| {
            OpenRefusal::Store(StoreError::new(
                StoreCode::ReservationUnknown,
                "no reservation has this id",
            ))
        })?;
    authority.check().map_err(OpenRefusal::Store)?;
    let reservation = authority.listed.reservation;
    check_manifest(
        manifest_bytes,
        manifest_name,
        reservation.workload.as_str(),
        authority.pack_digest.as_str(),
    )
    .map_err(OpenRefusal::Manifest)?;
    // The same statement decided the window holds; the time left may still round to zero.
    let clock =
        AttemptClock::anchored(asked_at, authority.attempt_millis_remaining).ok_or_else(|| {
            OpenRefusal::Store(StoreError::new(
                StoreCode::AttemptWindowElapsed,
                "the attempt's duration bound has elapsed since its reservation",
            ))
        })?;
    let (max_rows, max_bytes) = (
        bound(reservation.source_rows)?,
        bound(reservation.source_bytes)?,
    );
    // Last, once everything else holds, so a refused open leaves the reservation runnable:
    // the claim makes this the reservation's only run.
    let participants = bind(&reservation).await?;
    if !store
        .claim_run(id, &participants)
        .await
        .map_err(OpenRefusal::Store)?
    {
        return Err(OpenRefusal::Store(StoreError::new(
            StoreCode::ReservationRunClaimed,
            "a run already started under this reservation; settle it and admit another attempt",
        )));
    }
    Ok(Opened {
        max_rows,
        max_bytes,
        reservation,
        clock,
    })
}

/// Settles a run of `reservation`: the plan ([`settlement_of`]) and whether the store recorded
/// it. The reservation stays charged either way; a settlement the store did not record leaves
/// it unresolved, for an operator to settle with the plan's values.
pub async fn settle<S: ControlStorePort>(
    store: &S,
    reservation: &Reservation,
    read: Option<Read>,
    http_bytes: u64,
    end: RunEnd,
) -> (Plan, Result<Settled, StoreError>) {
    let plan = settlement_of(
        reservation.source_rows,
        reservation.source_bytes,
        read,
        http_bytes,
        end,
    );
    let settlement = Settlement {
        reservation_id: reservation.reservation_id.clone(),
        measured_source_rows: plan.rows,
        measured_source_bytes: plan.bytes,
        measured_http_bytes: plan.http_bytes,
        outcome: match plan.outcome {
            Outcome::Succeeded => AttemptOutcome::Succeeded,
            Outcome::Failed => AttemptOutcome::Failed,
            Outcome::Incomplete => AttemptOutcome::Incomplete,
        },
    };
    let recorded = store
        .settle(&settlement)
        .instrument(crate::phase_span("settle"))
        .await;
    (plan, recorded)
}

/// Why a manifest is not the reservation's workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManifestMismatch {
    /// The manifest's `name` is not the reservation's workload id.
    Workload,
    /// The manifest's bytes are not the workload's admitted pack (`sha256:` differs).
    PackDigest,
}

/// Binds the manifest to the admitted workload: its `name` is `workload_id`, and `sha256:` of
/// its exact bytes is `pack_digest` (`sha256:<hex>`, as stored). Name first, then bytes.
pub fn check_manifest(
    manifest_bytes: &[u8],
    manifest_name: &str,
    workload_id: &str,
    pack_digest: &str,
) -> Result<(), ManifestMismatch> {
    if manifest_name != workload_id {
        return Err(ManifestMismatch::Workload);
    }
    if Digest::of(manifest_bytes).as_str() != pack_digest {
        return Err(ManifestMismatch::PackDigest);
    }
    Ok(())
}

/// The attempt's deadline on the host's monotonic clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttemptClock {
    /// The instant the attempt's `attempt_seconds` end (never later than the database's).
    pub deadline: Instant,
}

impl AttemptClock {
    /// `remaining_millis` of the attempt as the store computed them in the statement sent at
    /// `asked_at`; `None` when nothing remains (the window has elapsed).
    pub fn anchored(asked_at: Instant, remaining_millis: i64) -> Option<Self> {
        let millis = u64::try_from(remaining_millis).ok().filter(|m| *m > 0)?;
        Some(Self {
            deadline: asked_at.checked_add(Duration::from_millis(millis))?,
        })
    }

    /// Whether the deadline has passed at `now`.
    pub fn passed(&self, now: Instant) -> bool {
        now >= self.deadline
    }

    /// Time left at `now` (zero once passed).
    pub fn left(&self, now: Instant) -> Duration {
        self.deadline.saturating_duration_since(now)
    }
}

/// What the source read, as the route's source measured it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read {
    /// Tuples.
    pub rows: u64,
    /// Source bytes (binary COPY payload).
    pub bytes: u64,
    /// The read completed.
    pub complete: bool,
}

/// How the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunEnd {
    /// The route's run completed (committed, published, or replayed a committed run).
    Completed,
    /// It failed (refused, failed closed, or nothing ran).
    Failed,
    /// It stopped unfinished and stays resumable by the route's own protocol: the attempt's
    /// deadline stopped it, or the cluster is still executing a publication.
    Unfinished,
}

/// The attempt's outcome as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `succeeded`.
    Succeeded,
    /// `failed`.
    Failed,
    /// `incomplete`.
    Incomplete,
}

impl Outcome {
    /// The stored text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Incomplete => "incomplete",
        }
    }
}

/// What is settled for a run's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Source rows (clamped to the reservation).
    pub rows: i64,
    /// Source bytes (clamped to the reservation).
    pub bytes: i64,
    /// HTTP body bytes sent (ClickHouse member loads; zero for the XMin route).
    pub http_bytes: i64,
    /// The outcome.
    pub outcome: Outcome,
    /// The source measurement exceeded the reservation (the breaching chunk) and was clamped.
    pub clamped: bool,
}

fn signed(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The settlement of a run of a reservation of `reserved_rows` / `reserved_bytes`:
///
/// - `succeeded` for a completed run whose read (if any) completed; a completed run that read
///   nothing (an XMin replay, a resumed ClickHouse publication) settles zero source usage;
/// - `incomplete` for a run that stopped unfinished, and for a failed run that read;
/// - `failed` (zero) for a failed run that read nothing.
///
/// Source measurements above the reservation (the chunk that crossed the bound) are clamped to
/// it; `http_bytes` is what the sender measured.
pub fn settlement_of(
    reserved_rows: i64,
    reserved_bytes: i64,
    read: Option<Read>,
    http_bytes: u64,
    end: RunEnd,
) -> Plan {
    let (rows, bytes) = read.map_or((0, 0), |m| (signed(m.rows), signed(m.bytes)));
    let outcome = match (end, read) {
        (RunEnd::Completed, Some(m)) if m.complete => Outcome::Succeeded,
        (RunEnd::Completed, None) => Outcome::Succeeded,
        (RunEnd::Failed, None) => Outcome::Failed,
        _ => Outcome::Incomplete,
    };
    Plan {
        rows: rows.min(reserved_rows.max(0)),
        bytes: bytes.min(reserved_bytes.max(0)),
        http_bytes: signed(http_bytes),
        outcome,
        clamped: rows > reserved_rows || bytes > reserved_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(rows: u64, bytes: u64, complete: bool) -> Option<Read> {
        Some(Read {
            rows,
            bytes,
            complete,
        })
    }

    #[test]
    fn a_run_settles_succeeded_only_when_it_completed_with_a_complete_read_or_none() {
        // Tier: unit (pure).
        let ok = settlement_of(10, 1000, read(10, 1000, true), 0, RunEnd::Completed);
        assert_eq!(
            ok,
            Plan {
                rows: 10,
                bytes: 1000,
                http_bytes: 0,
                outcome: Outcome::Succeeded,
                clamped: false
            }
        );
        assert_eq!(
            settlement_of(10, 1000, None, 0, RunEnd::Completed).outcome,
            Outcome::Succeeded,
            "a replay read nothing and succeeded"
        );
        assert_eq!(
            settlement_of(10, 1000, read(3, 100, true), 0, RunEnd::Failed).outcome,
            Outcome::Incomplete,
            "a failure after a complete read (e.g. the target refused) is incomplete"
        );
        assert_eq!(
            settlement_of(10, 1000, read(3, 100, false), 0, RunEnd::Completed).outcome,
            Outcome::Incomplete
        );
        let before = settlement_of(10, 1000, None, 0, RunEnd::Failed);
        assert_eq!((before.rows, before.bytes), (0, 0));
        assert_eq!(before.outcome, Outcome::Failed);
    }

    #[test]
    fn a_breach_is_settled_incomplete_and_clamped_to_the_reservation() {
        // Tier: unit (pure).
        let breach = settlement_of(10, 1000, read(11, 1100, false), 0, RunEnd::Failed);
        assert_eq!(
            breach,
            Plan {
                rows: 10,
                bytes: 1000,
                http_bytes: 0,
                outcome: Outcome::Incomplete,
                clamped: true
            }
        );
        let within = settlement_of(10, 1000, read(4, 1000, false), 0, RunEnd::Failed);
        assert!(!within.clamped);
        assert_eq!((within.rows, within.bytes), (4, 1000));
    }

    #[test]
    fn a_resumed_publication_settles_succeeded_with_no_source_usage_and_its_http_bytes() {
        // Tier: unit (pure). The artifact was sealed by an earlier attempt: this one read
        // nothing, loaded the members and completed.
        let resumed = settlement_of(10, 1000, None, 4242, RunEnd::Completed);
        assert_eq!(
            resumed,
            Plan {
                rows: 0,
                bytes: 0,
                http_bytes: 4242,
                outcome: Outcome::Succeeded,
                clamped: false
            }
        );
        // The HTTP body bytes are settled as measured, whatever the end.
        let fresh = settlement_of(10, 1000, read(10, 900, true), 777, RunEnd::Completed);
        assert_eq!((fresh.rows, fresh.bytes, fresh.http_bytes), (10, 900, 777));
        assert_eq!(fresh.outcome, Outcome::Succeeded);
    }

    #[test]
    fn a_run_stopped_unfinished_settles_incomplete_with_what_it_read() {
        // Tier: unit (pure): the deadline stopped it, or the cluster is still publishing.
        let stopped = settlement_of(10, 1000, read(4, 300, false), 0, RunEnd::Unfinished);
        assert_eq!(stopped.outcome, Outcome::Incomplete);
        assert_eq!((stopped.rows, stopped.bytes), (4, 300));
        let nothing = settlement_of(10, 1000, None, 0, RunEnd::Unfinished);
        assert_eq!(nothing.outcome, Outcome::Incomplete, "not a failure");
        assert_eq!((nothing.rows, nothing.bytes), (0, 0));
        // A complete read stopped before commit or publication is still incomplete.
        assert_eq!(
            settlement_of(10, 1000, read(10, 1000, true), 50, RunEnd::Unfinished).outcome,
            Outcome::Incomplete
        );
    }

    #[test]
    fn the_deadline_is_anchored_where_the_statement_was_sent_and_never_later() {
        // Tier: unit (pure).
        let t0 = Instant::now();
        assert_eq!(AttemptClock::anchored(t0, 0), None, "nothing remains");
        assert_eq!(AttemptClock::anchored(t0, -5), None, "already elapsed");
        let c = AttemptClock::anchored(t0, 1500).expect("remains");
        assert_eq!(c.deadline, t0 + Duration::from_millis(1500));
        assert!(!c.passed(t0));
        assert!(!c.passed(t0 + Duration::from_millis(1499)));
        assert!(c.passed(t0 + Duration::from_millis(1500)));
        assert_eq!(
            c.left(t0 + Duration::from_millis(500)),
            Duration::from_secs(1)
        );
        assert_eq!(c.left(t0 + Duration::from_secs(9)), Duration::ZERO);
    }

    #[test]
    fn a_manifest_is_the_workload_by_name_and_by_the_digest_of_its_exact_bytes() {
        // Tier: unit (pure).
        let bytes = b"version: 1\nname: pg-customers\n";
        let pack = Digest::of(bytes).as_str().to_owned();
        assert_eq!(
            check_manifest(bytes, "pg-customers", "pg-customers", &pack),
            Ok(())
        );
        assert_eq!(
            check_manifest(bytes, "pg-customers", "export-orders-mart", &pack),
            Err(ManifestMismatch::Workload),
            "the name is checked first"
        );
        let other = b"version: 1\nname: pg-customers\n# edited\n";
        assert_eq!(
            check_manifest(other, "pg-customers", "pg-customers", &pack),
            Err(ManifestMismatch::PackDigest),
            "the right name with other bytes"
        );
        assert_eq!(
            check_manifest(bytes, "pg-customers", "pg-customers", &pack.to_uppercase()),
            Err(ManifestMismatch::PackDigest),
            "digests compare exactly"
        );
    }
}
