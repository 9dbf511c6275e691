//! `dpone-host run --np-reservation ID`: a route run under an admitted nonproduction
//! reservation (spec 004, issue 12 §3 connected to §2, issue 21 §4). `campaign admit` reserved
//! the attempt's complete finite bound in the protected control store; this module connects
//! that reservation to either route's run and settles what the run measured. The decisions on
//! plain values (the manifest binding, the deadline, the settlement plan) are
//! [`dpone_engine_nonproduction::reservation_run`]; this module is the wiring.
//!
//! 1. Before anything is contacted: the reservation id is a `sha256:` digest, the manifest file
//!    is read once (those exact bytes are digested and parsed; the route never reads the file
//!    again), and the manifest, registry and policy components are prepared as for any run
//!    (for the ClickHouse route also static admission).
//! 2. Before any source or target access, one read of the store
//!    ([`ControlStorePort::reservation_authority`], one statement, database clock) and its
//!    checks ([`store::ReservationAuthority::check`]): the reservation exists, is RUNNING
//!    (unsettled), its grant is not revoked by the current trust revision, the current revision
//!    pins the policy it was admitted under, the grant's window holds and the attempt's duration
//!    bound has not elapsed. Then the manifest is bound to the admitted workload: its `name`
//!    must be the reservation's `workload_id` (`DPONE_CLI_NP_RESERVATION_WORKLOAD_MISMATCH`) and
//!    `sha256:` of its exact bytes the workload's registered `pack_digest`
//!    (`DPONE_CLI_NP_RESERVATION_MANIFEST_MISMATCH`). Any refusal reads nothing and settles
//!    nothing.
//! 3. The route runs with the reservation's rows and bytes as the source's bound (the XMin
//!    route's `PgSource`, the ClickHouse route's `PgRowBinarySource`): exactly N pass, N+1
//!    fails closed with the source's bound code and nothing is committed or published.
//! 4. The attempt's deadline: the same statement returns the milliseconds left of
//!    `attempt_seconds` counted from the reservation time by the database clock; the deadline
//!    is anchored when that statement was sent (never later than the database's). How each
//!    route stops at it, safely ([`deadline`]):
//!    - *XMin*: the source read runs under Tokio timeouts at the deadline (the connection, the
//!      extraction, and each wait for the next COPY chunk, so chunks received stay counted);
//!      the target is wrapped so that every boundary of the run transaction checks the
//!      deadline first and `commit` is never sent after it: the transaction is rolled back
//!      (`DPONE_XMIN_ATTEMPT_DEADLINE_EXCEEDED`). A target statement already running is not
//!      cancelled; the next boundary refuses. Cancelling the engine's future instead could drop
//!      a `COMMIT` in flight and leave its outcome unknown, so this route does not.
//!    - *ClickHouse*: the rowbinary source's extraction runs under a Tokio timeout at the
//!      deadline (port kind `Interrupted`; nothing is sealed), and every authority write (each
//!      phase transition of the publication protocol, including the one into
//!      `PUBLICATION_DISPATCHING` that precedes the one-shot dispatch) is refused once the
//!      deadline passed, before it is sent. The coordinator then stops with `Interrupted` at
//!      that phase boundary: nothing is dispatched after the deadline and the operation stays
//!      resumable with the same `--invocation` (under a new reservation). A member load or
//!      statement in flight is not cancelled (its own request timeout bounds it).
//!
//!    A run stopped by its deadline settles `incomplete` with what was read and fails with
//!    `DPONE_CLI_NP_ATTEMPT_DEADLINE_EXCEEDED` (exit 1); the run's JSON carries the route's own
//!    failure.
//! 5. After the run the measured usage is settled automatically
//!    ([`reservation_run::settlement_of`]): a completed run with a complete read (or no read at
//!    all: an XMin replay, a resumed ClickHouse publication whose artifact an earlier attempt
//!    sealed) settles `succeeded`; a run stopped unfinished (deadline, publication still in
//!    progress) and a failure after the read started (a bound breach included) settle
//!    `incomplete` with what was read; a failure before any read settles `failed` with zero.
//!    The HTTP body bytes the ClickHouse sender measured are settled as `measured_http_bytes`
//!    (zero for the XMin route). Source reads are charged to the attempt that read them: a
//!    resumed publication settles zero source usage, and it cannot read more than reserved
//!    because the bound applies to any read it does. The store never frees a reservation. A
//!    breach's measurement includes the chunk that crossed the bound, so the settled values are
//!    clamped to the reservation (the store refuses more than reserved) and the output says so;
//!    the raw measurement stays in the run's own measurement. If the process dies before
//!    settling, the reservation stays unresolved and charged and blocks another attempt of the
//!    workload until an operator settles it with `campaign settle`. A settlement the store did
//!    not record is reported with the measurements to settle by hand
//!    (`DPONE_CLI_NP_SETTLEMENT_UNRECORDED`, exit 75).
//!
//! The route identity of the manifest (its engines and participants) is not compared with the
//! workload's route in the composition; the pack digest binds the exact manifest instead.
//! The store's URL is read from the variable `--store-url-env` names and never printed.

pub mod deadline;

use crate::campaign_store_cmd::{self, StoreArgs, store_failure};
use crate::exit::{Failure, RETRY};
use crate::route::{self, RouteArgs};
use crate::shipped;
use clap::Args;
use dpone_adapter_np_control_store::{self as store, PgControlStore, Settled};
use dpone_engine_nonproduction::reservation_run::{
    self, ManifestMismatch, OpenRefusal, Outcome, Read, RunEnd,
};
use serde_json::{Value, json};
use std::time::Instant;

/// Code: the measured usage could not be recorded; the reservation stays unresolved (exit 75).
pub const SETTLEMENT_UNRECORDED: &str = "DPONE_CLI_NP_SETTLEMENT_UNRECORDED";

/// The options of `run` that put it under a nonproduction reservation.
#[derive(Args)]
pub struct NpRunArgs {
    /// Run under this admitted reservation (`sha256:<hex>`, printed by `campaign admit`): its
    /// rows and bytes bound the source read, its duration bound stops the run, and the
    /// measured usage is settled after the run. The `--store-*` options say where the control
    /// store is.
    #[arg(long)]
    pub np_reservation: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
}

/// What a run under a reservation may do: read at most `max_rows` / `max_bytes` from the
/// source, and stop by `deadline`.
#[derive(Clone, Copy, Debug)]
pub struct Admitted {
    /// The reservation's source rows.
    pub max_rows: u64,
    /// The reservation's source bytes.
    pub max_bytes: u64,
    /// The attempt's deadline.
    pub deadline: Instant,
}

/// A route run under an admitted reservation, as the routes see it: the manifest bytes the
/// route must parse, the checks before any source or target access, and the settlement.
pub trait RunGate {
    /// The manifest's exact bytes (read once; digested by [`RunGate::admit`]).
    fn manifest(&self) -> &[u8];

    /// Called once with the parsed manifest's workload name before any source or target
    /// access; a refusal ends the command and nothing is read.
    fn admit(&mut self, workload: &str) -> Result<Admitted, Failure>;

    /// Called once after the run, also after a failure before the read (`read: None`): the
    /// settlement's JSON for the run's output, and the failure to report when it could not be
    /// recorded.
    fn settle(
        &mut self,
        end: RunEnd,
        read: Option<Read>,
        http_bytes: u64,
    ) -> (Value, Option<Failure>);
}

/// The failure of a run its reservation's deadline stopped (exit 1): settled `incomplete`;
/// admit a new attempt (the ClickHouse operation resumes with the same `--invocation`).
pub fn deadline_exceeded() -> Failure {
    Failure::refused(
        "DPONE_CLI_NP_ATTEMPT_DEADLINE_EXCEEDED",
        "the reservation's attempt_seconds elapsed: the run was stopped before it committed or \
         published and is settled incomplete; admit a new attempt",
    )
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
    let manifest = shipped::read_input(args.manifest_path()?, crate::input::InputKind::Manifest)?;
    let route = route::detect(&String::from_utf8_lossy(&manifest))?;
    let mut gate = Gate {
        store: campaign_store_cmd::open(&np.store)?,
        rt: campaign_store_cmd::runtime()?,
        id,
        manifest,
        reservation: None,
    };
    match route {
        route::Route::XminReconciliation => crate::xmin_cmd::run_gated(&args, Some(&mut gate)),
        route::Route::ClickhousePublication => {
            crate::clickhouse_cmd::run_gated(&args, Some(&mut gate))
        }
    }
}

/// The reservation behind a route's [`RunGate`].
struct Gate {
    store: PgControlStore,
    rt: tokio::runtime::Runtime,
    id: store::Sha256Digest,
    manifest: Vec<u8>,
    /// Set once the checks passed.
    reservation: Option<store::Reservation>,
}

impl RunGate for Gate {
    fn manifest(&self) -> &[u8] {
        &self.manifest
    }

    fn admit(&mut self, workload: &str) -> Result<Admitted, Failure> {
        let opened = self
            .rt
            .block_on(reservation_run::open(
                &self.store,
                &self.id,
                &self.manifest,
                workload,
            ))
            .map_err(|refusal| match refusal {
                OpenRefusal::Store(e) => store_failure(e),
                OpenRefusal::Manifest(ManifestMismatch::Workload) => Failure::refused(
                    "DPONE_CLI_NP_RESERVATION_WORKLOAD_MISMATCH",
                    "the manifest's workload (its name) is not the reservation's workload",
                ),
                OpenRefusal::Binding { code, message } => Failure::refused(code, message),
                OpenRefusal::Manifest(ManifestMismatch::PackDigest) => Failure::refused(
                    "DPONE_CLI_NP_RESERVATION_MANIFEST_MISMATCH",
                    "the manifest's bytes are not the admitted workload's pack (sha256 differs \
                     from its registered pack_digest)",
                ),
            })?;
        let admitted = Admitted {
            max_rows: opened.max_rows,
            max_bytes: opened.max_bytes,
            deadline: opened.clock.deadline,
        };
        self.reservation = Some(opened.reservation);
        Ok(admitted)
    }

    fn settle(
        &mut self,
        end: RunEnd,
        read: Option<Read>,
        http_bytes: u64,
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
        let (plan, recorded) = self.rt.block_on(reservation_run::settle(
            &self.store,
            r,
            read,
            http_bytes,
            end,
        ));
        let mut out = json!({
            "reservation_id": r.reservation_id.as_str(),
            "grant_id": r.grant.grant_id.as_str(),
            "phase": r.grant.phase.as_str(),
            "workload_id": r.workload.as_str(),
            "attempt_id": r.attempt.as_str(),
            "trust_revision": r.trust_revision,
            "bound": {
                "source_rows": r.source_rows,
                "source_bytes": r.source_bytes,
                "attempt_seconds": r.attempt_seconds,
            },
        });
        let mut settled = json!({
            "measured_source_rows": plan.rows,
            "measured_source_bytes": plan.bytes,
            "measured_http_bytes": plan.http_bytes,
            "outcome": plan.outcome.as_str(),
            "complete": plan.outcome == Outcome::Succeeded,
            "clamped_to_reservation": plan.clamped,
            "reservation_freed": false,
        });
        match recorded {
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
