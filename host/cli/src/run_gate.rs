//! The gate a route run passes under a nonproduction reservation, as the routes see it: the
//! options that put `run` under a reservation ([`NpRunArgs`]), what the admitted reservation
//! allows ([`Admitted`]), the [`RunGate`] the routes call before any source or target access and
//! after the run, and the attempt's [`deadline`] at each route's safe stopping points. The gate
//! itself (the control store behind it, the physical binding, the settlement) is
//! `crate::np_run`; the routes (`xmin_cmd`, `clickhouse_cmd`) know only this module.

pub mod deadline;

use crate::control_store::StoreArgs;
use crate::exit::Failure;
use clap::Args;
use dpone_engine_clickhouse::contracts::manifest::{
    Manifest as ChManifest, Registry as ChRegistry,
};
use dpone_engine_nonproduction::reservation_run::{Read, RunEnd};
use dpone_engine_xmin::Route as XminRoute;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

/// The options of `run` that put it under a nonproduction reservation.
#[derive(Args)]
pub struct NpRunArgs {
    /// Run under this admitted reservation (`sha256:<hex>`, printed by `campaign admit`): its
    /// rows and bytes bound the source read, its duration bound stops the run, and the
    /// measured usage is settled after the run. The `--store-*` options say where the control
    /// store is.
    #[arg(long)]
    pub np_reservation: Option<String>,
    /// The composition the reservation's grant binds (an execution grant by its
    /// `parent_release_digest`): its entry for the workload names the route whose enrolled
    /// participants the run's connections must be. Required for the XMin route.
    #[arg(long, requires = "np_reservation")]
    pub np_composition: Option<PathBuf>,
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
    /// The manifest's exact bytes (read once; digested when the reservation is admitted).
    fn manifest(&self) -> &[u8];

    /// Called once by the XMin route with the prepared route before any source or target
    /// access: the reservation's checks, then its connections physically bound to the enrolled
    /// participants of the workload's route before the claim (see `crate::np_run`); a refusal
    /// ends the command and nothing is read or written.
    fn admit_xmin(&mut self, route: &XminRoute) -> Result<Admitted, Failure>;

    /// The same for the ClickHouse route, with its connections (the PostgreSQL source, the
    /// ClickHouse target and its authority facade).
    fn admit_clickhouse(
        &mut self,
        m: &ChManifest,
        registry: &ChRegistry,
    ) -> Result<Admitted, Failure>;

    /// Called once after the run, also after a failure before the read (`read: None`): the
    /// settlement for the run's report (none without an admitted reservation), and the failure
    /// to report when it could not be recorded.
    fn settle(
        &mut self,
        end: RunEnd,
        read: Option<Read>,
        http_bytes: u64,
    ) -> (Option<RunSettlement>, Option<Failure>);
}

/// A gated run's reservation and its settlement, printed as the run report's `np_reservation`
/// (fields in sorted order: the shape first printed as a JSON value).
#[derive(Clone, Debug, Serialize)]
pub struct RunSettlement {
    /// The attempt the reservation was admitted for.
    pub attempt_id: String,
    /// The reservation's bounds.
    pub bound: ReservationBound,
    /// The grant it was admitted under.
    pub grant_id: String,
    /// The enrolled participants the run's connections were bound to.
    pub participants: Vec<BoundParticipant>,
    /// The grant's phase.
    pub phase: String,
    /// The reservation.
    pub reservation_id: String,
    /// What was measured and recorded.
    pub settlement: SettlementRecord,
    /// The trust revision the reservation was admitted under.
    pub trust_revision: i64,
    /// The workload.
    pub workload_id: String,
}

/// What a reservation allowed.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ReservationBound {
    /// Seconds of the attempt.
    pub attempt_seconds: i64,
    /// Source bytes.
    pub source_bytes: i64,
    /// Source rows.
    pub source_rows: i64,
}

/// An enrolled participant a run's connection was bound to.
#[derive(Clone, Debug, Serialize)]
pub struct BoundParticipant {
    /// Its enrolled identity's digest.
    pub identity_digest: String,
    /// The participant.
    pub participant_id: String,
    /// The connection role (`source`, `target`, `state`).
    pub role: String,
}

/// A run's measured usage and whether the store recorded it.
#[derive(Clone, Debug, Serialize)]
pub struct SettlementRecord {
    /// The measurement was clamped to the reservation's bounds.
    pub clamped_to_reservation: bool,
    /// The store's code when the settlement was not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The run succeeded.
    pub complete: bool,
    /// Measured HTTP bytes.
    pub measured_http_bytes: i64,
    /// Measured source bytes.
    pub measured_source_bytes: i64,
    /// Measured source rows.
    pub measured_source_rows: i64,
    /// The settled outcome (`succeeded`, `failed`, `incomplete`).
    pub outcome: String,
    /// What to do when the settlement was not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<&'static str>,
    /// Always false: a settled reservation stays charged to its pool.
    pub reservation_freed: bool,
    /// `recorded`, `reopened` or `unrecorded`.
    pub result: &'static str,
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
