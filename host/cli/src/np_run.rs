//! `dpone-host run --np-reservation ID`: a route run under an admitted nonproduction
//! reservation (spec 004, issue 12 §3 connected to §2). `campaign admit` reserved the attempt's
//! complete finite bound in the protected control store; this module connects that reservation
//! to the source read and settles what the read measured.
//!
//! 1. Before anything is contacted: the reservation id is a `sha256:` digest, the manifest is
//!    for the XMin route (the ClickHouse route does not take a reservation yet:
//!    `DPONE_CLI_NP_RESERVATION_ROUTE_UNSUPPORTED`), and the manifest, registry and policy
//!    components are prepared as for any run.
//! 2. Before any source or target access, one read of the store
//!    ([`ControlStorePort::reservation_authority`], one statement, database clock) and its
//!    checks ([`store::ReservationAuthority::check`]): the reservation exists, is RUNNING
//!    (unsettled), its grant is not revoked by the current trust revision, the current revision
//!    pins the policy it was admitted under, the grant's window holds and the attempt's duration
//!    bound has not elapsed. The manifest's workload identity — its `name` — must be exactly the
//!    reservation's `workload_id` (`DPONE_CLI_NP_RESERVATION_WORKLOAD_MISMATCH`). Any refusal
//!    reads nothing and settles nothing.
//! 3. The route runs with the reservation's rows and bytes as the source's bound
//!    (`SourceBound`): exactly N pass, N+1 fails closed with the source's bound code and the
//!    target is not touched.
//! 4. After the run the measured usage is settled automatically: a successful run with a
//!    complete read (or no read at all: a replay) settles `succeeded`; a failure after the read
//!    started (a bound breach included) settles `incomplete` with what was read; a failure
//!    before any read settles `failed` with zero. The store never frees a reservation: it stays
//!    charged either way. A breach's measurement includes the chunk that crossed the bound, so
//!    the settled values are clamped to the reservation (the store refuses more than reserved)
//!    and the output says so; the raw measurement stays in `source_measurement`. If the process
//!    dies before settling, the reservation stays unresolved and charged (the store needs no
//!    cooperation for that) and blocks another attempt of the workload until an operator
//!    settles it with `campaign settle`. A settlement the store did not record is reported with
//!    the measurements to settle by hand (`DPONE_CLI_NP_SETTLEMENT_UNRECORDED`, exit 75).
//!
//! The store's URL is read from the variable `--store-url-env` names and never printed.

use crate::campaign_store_cmd::{self, StoreArgs, store_failure};
use crate::exit::{Failure, RETRY};
use crate::route::{self, RouteArgs};
use crate::shipped;
use crate::xmin_cmd::{self, RunGate};
use clap::Args;
use dpone_adapter_np_control_store::{
    self as store, AttemptOutcome, ControlStorePort, PgControlStore, Settled, StoreCode, StoreError,
};
use dpone_adapter_postgres::source::{SourceBound, SourceMeasurement};
use dpone_engine_xmin::Route;
use serde_json::{Value, json};

/// Code: the measured usage could not be recorded; the reservation stays unresolved (exit 75).
pub const SETTLEMENT_UNRECORDED: &str = "DPONE_CLI_NP_SETTLEMENT_UNRECORDED";

/// The options of `run` that put it under a nonproduction reservation.
#[derive(Args)]
pub struct NpRunArgs {
    /// Run under this admitted reservation (`sha256:<hex>`, printed by `campaign admit`): its
    /// rows and bytes bound the source read, and the measured usage is settled after the run.
    /// The `--store-*` options say where the control store is.
    #[arg(long)]
    pub np_reservation: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `run --np-reservation`: the reservation's checks, the bounded run, the settlement.
pub fn run(
    mut args: RouteArgs,
    np: &NpRunArgs,
    source: &shipped::PolicySourceArgs,
) -> Result<(), Failure> {
    let Some(id) = &np.np_reservation else {
        return Err(Failure::internal(
            "DPONE_CLI_INTERNAL",
            "a reservation run without a reservation",
        ));
    };
    let id = store::Sha256Digest::parse("--np-reservation", id).map_err(store_failure)?;
    args.source = source.clone();
    let text = shipped::read_input(args.manifest_path()?, crate::input::InputKind::Manifest)?;
    if route::detect(&String::from_utf8_lossy(&text))? != route::Route::XminReconciliation {
        return Err(Failure::bad_input(
            "DPONE_CLI_NP_RESERVATION_ROUTE_UNSUPPORTED",
            "--np-reservation is supported for the XMin route only; the ClickHouse route does \
             not take a reservation yet",
        ));
    }
    let mut gate = Gate {
        store: campaign_store_cmd::open(&np.store)?,
        rt: campaign_store_cmd::runtime()?,
        id,
        reservation: None,
    };
    xmin_cmd::run_gated(&args, Some(&mut gate))
}

/// The reservation behind the XMin run's [`RunGate`].
struct Gate {
    store: PgControlStore,
    rt: tokio::runtime::Runtime,
    id: store::Sha256Digest,
    /// Set once the checks passed.
    reservation: Option<store::Reservation>,
}

fn non_negative(v: i64) -> Result<u64, Failure> {
    u64::try_from(v).map_err(|_| {
        store_failure(StoreError::new(
            StoreCode::StoredStateInvalid,
            "a stored reservation bound is negative",
        ))
    })
}

impl RunGate for Gate {
    fn admit(&mut self, route: &Route) -> Result<SourceBound, Failure> {
        let authority = self
            .rt
            .block_on(self.store.reservation_authority(&self.id))
            .map_err(store_failure)?
            .ok_or_else(|| {
                store_failure(StoreError::new(
                    StoreCode::ReservationUnknown,
                    "no reservation has this id",
                ))
            })?;
        authority.check().map_err(store_failure)?;
        let reservation = authority.listed.reservation;
        if route.manifest.name != reservation.workload.as_str() {
            return Err(Failure::refused(
                "DPONE_CLI_NP_RESERVATION_WORKLOAD_MISMATCH",
                "the manifest's workload (its name) is not the reservation's workload",
            ));
        }
        let bound = SourceBound {
            max_rows: non_negative(reservation.source_rows)?,
            max_bytes: non_negative(reservation.source_bytes)?,
        };
        self.reservation = Some(reservation);
        Ok(bound)
    }

    fn settle(
        &mut self,
        read: Option<SourceMeasurement>,
        succeeded: bool,
    ) -> (Value, Option<Failure>) {
        let Some(r) = &self.reservation else {
            return (
                Value::Null,
                Some(Failure::internal(
                    "DPONE_CLI_INTERNAL",
                    "settlement without an admitted reservation",
                )),
            );
        };
        let plan = settlement_of(r, read, succeeded);
        let settlement = store::Settlement {
            reservation_id: r.reservation_id.clone(),
            measured_source_rows: plan.rows,
            measured_source_bytes: plan.bytes,
            measured_http_bytes: 0,
            outcome: plan.outcome,
        };
        let mut out = json!({
            "reservation_id": r.reservation_id.as_str(),
            "grant_id": r.grant.grant_id.as_str(),
            "phase": r.grant.phase.as_str(),
            "workload_id": r.workload.as_str(),
            "attempt_id": r.attempt.as_str(),
            "trust_revision": r.trust_revision,
            "bound": {"source_rows": r.source_rows, "source_bytes": r.source_bytes},
        });
        let mut settled = json!({
            "measured_source_rows": plan.rows,
            "measured_source_bytes": plan.bytes,
            "measured_http_bytes": 0,
            "outcome": plan.outcome.as_str(),
            "complete": plan.outcome == AttemptOutcome::Succeeded,
            "clamped_to_reservation": plan.clamped,
            "reservation_freed": false,
        });
        match self.rt.block_on(self.store.settle(&settlement)) {
            Ok(s) => {
                settled["result"] = json!(match s {
                    Settled::Recorded => "recorded",
                    Settled::Reopened => "reopened",
                });
                out["settlement"] = settled;
                (out, None)
            }
            Err(e) => {
                let code = e.code.as_str().to_owned();
                settled["result"] = json!("unrecorded");
                settled["code"] = json!(code);
                settled["recovery"] = json!(
                    "record these measurements with campaign settle; the reservation stays charged"
                );
                out["settlement"] = settled;
                (
                    out,
                    Some(Failure {
                        code: SETTLEMENT_UNRECORDED.to_owned(),
                        message: format!(
                            "the run's measured usage was not recorded ({code}); the reservation \
                             stays unresolved and charged: settle it with campaign settle"
                        ),
                        exit: RETRY,
                    }),
                )
            }
        }
    }
}

/// What is settled for a run's end.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    rows: i64,
    bytes: i64,
    outcome: AttemptOutcome,
    clamped: bool,
}

/// The settlement of a run: `succeeded` for a successful run whose read (if any) completed,
/// `incomplete` for any other run that read, `failed` (zero) for a run that read nothing and
/// failed. Measurements above the reservation (the breaching chunk) are clamped to it.
fn settlement_of(r: &store::Reservation, read: Option<SourceMeasurement>, succeeded: bool) -> Plan {
    let (rows, bytes) = read.map_or((0, 0), |m| {
        (
            i64::try_from(m.rows).unwrap_or(i64::MAX),
            i64::try_from(m.source_bytes).unwrap_or(i64::MAX),
        )
    });
    let outcome = match read {
        Some(m) if succeeded && m.complete => AttemptOutcome::Succeeded,
        None if succeeded => AttemptOutcome::Succeeded,
        Some(_) => AttemptOutcome::Incomplete,
        None => AttemptOutcome::Failed,
    };
    Plan {
        rows: rows.min(r.source_rows),
        bytes: bytes.min(r.source_bytes),
        outcome,
        clamped: rows > r.source_rows || bytes > r.source_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(rows: i64, bytes: i64) -> store::Reservation {
        let uuid = store::Uuid::parse("u", "00000000-0000-4000-8000-000000000001").unwrap();
        store::Reservation {
            reservation_id: store::Sha256Digest::of(b"r"),
            grant: store::GrantKey {
                grant_id: uuid,
                phase: store::Phase::Execution,
            },
            grant_digest: store::Sha256Digest::of(b"g"),
            trust_revision: 1,
            workload: store::WorkloadId::new("w").unwrap(),
            attempt: store::AttemptId::new("a").unwrap(),
            source_rows: rows,
            source_bytes: bytes,
            attempt_seconds: 60,
            resolved_by_probe: false,
        }
    }

    fn read(rows: u64, bytes: u64, complete: bool) -> Option<SourceMeasurement> {
        Some(SourceMeasurement {
            rows,
            source_bytes: bytes,
            complete,
        })
    }

    #[test]
    fn a_run_settles_complete_only_when_it_succeeded_with_a_complete_read() {
        let r = reservation(10, 1000);
        let ok = settlement_of(&r, read(10, 1000, true), true);
        assert_eq!(
            ok,
            Plan {
                rows: 10,
                bytes: 1000,
                outcome: AttemptOutcome::Succeeded,
                clamped: false
            }
        );
        assert_eq!(
            settlement_of(&r, None, true).outcome,
            AttemptOutcome::Succeeded,
            "a replay read nothing and succeeded"
        );
        assert_eq!(
            settlement_of(&r, read(3, 100, true), false).outcome,
            AttemptOutcome::Incomplete,
            "a failure after a complete read (e.g. the target refused) is incomplete"
        );
        assert_eq!(
            settlement_of(&r, read(3, 100, false), true).outcome,
            AttemptOutcome::Incomplete
        );
        let before = settlement_of(&r, None, false);
        assert_eq!((before.rows, before.bytes), (0, 0));
        assert_eq!(before.outcome, AttemptOutcome::Failed);
    }

    #[test]
    fn a_breach_is_settled_incomplete_and_clamped_to_the_reservation() {
        let r = reservation(10, 1000);
        let breach = settlement_of(&r, read(11, 1100, false), false);
        assert_eq!(
            breach,
            Plan {
                rows: 10,
                bytes: 1000,
                outcome: AttemptOutcome::Incomplete,
                clamped: true
            }
        );
        let within = settlement_of(&r, read(4, 1000, false), false);
        assert!(!within.clamped);
        assert_eq!((within.rows, within.bytes), (4, 1000));
    }
}
