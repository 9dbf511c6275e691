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
//! Physical binding (both routes, spec 004 "actual nonproduction enrollment"): after the checks
//! of 2. and before the run's claim, every connection the manifest uses is bound by its role to
//! the participant the workload's route names in the composition the grant binds
//! (`--np-composition`, required; an execution grant binds it by `parent_release_digest`): the
//! source to `source_participant`, the target and the state to `target_participant` (the XMin
//! route writes its state through the target's connection; the ClickHouse route's state is its
//! KeeperMap authority facade on the same cluster). Each connection's engine must be the
//! route's, its participant enrolled (`campaign enroll`) under the grant's `enrollment_digest`,
//! and the identity observed live on it now exactly the enrolled one (PostgreSQL: system
//! identifier, database name and OID, [`enrollment::OBSERVE_SQL`]; ClickHouse: every member's
//! proven replica, server UUID and the database's UUID); every relation the run reads or writes
//! must be one of the workload's effects of that participant, byte-exactly (a manifest
//! relation that reaches its registry pin only as an ASCII-case alias is refused:
//! `DPONE_CLI_NP_RELATION_CASE_ALIAS`; a ClickHouse run uses one database, the participant's).
//! A refusal reads nothing, writes nothing, leaves the reservation unclaimed and settles
//! nothing; the participants bound are recorded with the claim and listed by `campaign status`.
//! A reservation is never opened unbound: the gate has no other way in.
//! The store's URL is read from the variable `--store-url-env` names and never printed.

use crate::campaign;
use crate::control_store::{self, store_failure};
use crate::exit::{Failure, RETRY};
use crate::route::{self, RouteArgs};
use crate::run_gate::{
    Admitted, BoundParticipant, NpRunArgs, ReservationBound, RunGate, RunSettlement,
    SettlementRecord,
};
use crate::shipped;
use dpone_adapter_np_control_store::{self as store, PgControlStore, Settled};
use dpone_engine_clickhouse::contracts::manifest::{
    ClickHouseConnection as ChConnection, Manifest as ChManifest, Registry as ChRegistry,
};
use dpone_engine_nonproduction::enrollment::{
    self, ConnectionRole, ObservedConnection, RunParticipant,
};
use dpone_engine_nonproduction::reservation_run::{
    self, ManifestMismatch, OpenRefusal, Outcome, Read, RunEnd,
};
use dpone_engine_nonproduction::{Authority, Composition, Document as _};
use dpone_engine_xmin::manifest::TargetKind;
use dpone_engine_xmin::registry::Endpoint;
use dpone_engine_xmin::{ErrorCode, Route as XminRoute};
use std::cell::RefCell;

/// Code: the measured usage could not be recorded; the reservation stays unresolved (exit 75).
pub const SETTLEMENT_UNRECORDED: &str = "DPONE_CLI_NP_SETTLEMENT_UNRECORDED";

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
    let composition = match &np.np_composition {
        Some(path) => campaign::parse::<Composition>(
            "composition",
            &shipped::read_input(path, crate::input::InputKind::NonproductionDocument)?,
        )?,
        None => {
            return Err(Failure::bad_input(
                "DPONE_CLI_NP_COMPOSITION_REQUIRED",
                "a run under a reservation needs --np-composition: the composition its grant \
                 binds names the route whose enrolled participants the run must use",
            ));
        }
    };
    let mut gate = Gate {
        store: control_store::open(&np.store)?,
        rt: control_store::runtime()?,
        id,
        manifest,
        composition,
        reservation: None,
        participants: Vec::new(),
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
    /// The composition `--np-composition` named (parsed; bound to the grant when used).
    composition: Composition,
    /// Set once the checks passed.
    reservation: Option<store::Reservation>,
    /// The participants the run was bound to (recorded with the claim).
    participants: Vec<RunParticipant>,
}

/// One connection of a run to observe and bind.
struct Planned {
    role: ConnectionRole,
    engine: dpone_engine_nonproduction::common::Engine,
    /// Where its identity is observed.
    observe: Observe,
    relations: Vec<String>,
}

/// Where a connection's physical identity is observed.
enum Observe {
    /// On a session of the PostgreSQL endpoint.
    Postgresql(Endpoint),
    /// On a session of the SQL Server endpoint: its pinned database.
    Sqlserver {
        endpoint: Endpoint,
        database: String,
        trust_server_certificate: bool,
    },
    /// On every member of a ClickHouse cluster: the participant database.
    Clickhouse {
        connection: ChConnection,
        cluster: String,
        database: String,
    },
    /// The target role's connection itself (the XMin route's PostgreSQL state, the ClickHouse
    /// route's authority facade): the target's observation serves, so it is made once.
    AsTarget,
    /// An engine whose identity this host does not observe (refused).
    Unobservable,
}

/// The connections an XMin run uses, by role, with the relations it names on each: the
/// source relation (its registry key: what the run reads), the target table, and the state
/// tables, which the run writes through the target's connection. A manifest relation that
/// reaches its pin only as an ASCII-case alias of the registry key is refused here.
fn xmin_connections(route: &XminRoute) -> Result<Vec<Planned>, Failure> {
    use dpone_engine_nonproduction::common::Engine;
    let m = &route.manifest;
    let r = &route.resolved;
    let read = r.source_authority.relation_key();
    if m.source_relation != read {
        return Err(Failure::refused(
            "DPONE_CLI_NP_RELATION_CASE_ALIAS",
            "the manifest's source relation reaches its registry pin only as an ASCII-case \
             alias; under a reservation the relation read must be named byte-exactly",
        ));
    }
    let target_engine = match m.target_kind {
        TargetKind::Postgres => Engine::Postgresql,
        TargetKind::Mssql => Engine::Sqlserver,
    };
    // A SQL Server target is observed per role on the pinned database the route uses for it
    // (the state on the state connection); the staging database must be the target's, the
    // participant's one database.
    let (target_observe, state_observe) = match m.target_kind {
        TargetKind::Postgres => (Observe::Postgresql(r.target.clone()), Observe::AsTarget),
        TargetKind::Mssql => match r.target_pins.sql_server() {
            None => (Observe::Unobservable, Observe::Unobservable),
            Some(pins) => {
                use dpone_engine_xmin::registry::MssqlRole;
                let target_db = &pins.pin(MssqlRole::Target).name;
                if pins.pin(MssqlRole::Staging).name != *target_db {
                    return Err(Failure::refused(
                        "DPONE_CLI_NP_RELATION_OUT_OF_SCOPE",
                        "under a reservation a SQL Server target uses one database, its \
                         participant's: the staging database must be the target's",
                    ));
                }
                (
                    Observe::Sqlserver {
                        endpoint: r.target.clone(),
                        database: target_db.clone(),
                        trust_server_certificate: pins.trust_server_certificate,
                    },
                    Observe::Sqlserver {
                        endpoint: pins.state_endpoint.clone(),
                        database: pins.pin(MssqlRole::State).name.clone(),
                        trust_server_certificate: pins.trust_server_certificate,
                    },
                )
            }
        },
    };
    let s = &m.state;
    Ok(vec![
        Planned {
            role: ConnectionRole::Source,
            engine: Engine::Postgresql,
            observe: Observe::Postgresql(r.source.clone()),
            relations: vec![read],
        },
        Planned {
            role: ConnectionRole::Target,
            engine: target_engine,
            observe: target_observe,
            relations: vec![format!("{}.{}", m.target_schema, m.target_table)],
        },
        Planned {
            role: ConnectionRole::State,
            engine: target_engine,
            observe: state_observe,
            relations: [
                &s.source_state,
                &s.run,
                &s.receipt,
                &s.repair_authority,
                &s.repair_consumption,
            ]
            .iter()
            .map(|t| format!("{}.{t}", r.state_schema))
            .collect(),
        },
    ])
}

/// The connections a ClickHouse run uses, by role: the PostgreSQL source (the relation it
/// reads), the ClickHouse target (the table it publishes; its candidates are derived from that
/// name in the same database and become the target by `EXCHANGE`) and the state (the KeeperMap
/// authority facade, written through the same cluster). The route must use one ClickHouse
/// database, the participant's: a staging or authority database other than the target's is
/// refused here, before anything is contacted.
fn clickhouse_connections(m: &ChManifest, registry: &ChRegistry) -> Result<Vec<Planned>, Failure> {
    use dpone_engine_nonproduction::common::Engine;
    let pg = registry
        .postgres(&m.source.connection_ref, "source.connection_ref")
        .map_err(|e| crate::clickhouse_cmd::registry_failure(&e))?;
    let ch = registry
        .clickhouse_for(
            &m.target.connection_ref,
            "target.connection_ref",
            m.clickhouse.cluster.is_local(),
        )
        .map_err(|e| crate::clickhouse_cmd::registry_failure(&e))?;
    let database = &m.target.database;
    if m.clickhouse.staging_database != *database || ch.authority_database != *database {
        return Err(Failure::refused(
            "DPONE_CLI_NP_RELATION_OUT_OF_SCOPE",
            "under a reservation the ClickHouse route uses one database, its participant's: \
             the staging database and the authority facade's database must be the target's",
        ));
    }

    Ok(vec![
        Planned {
            role: ConnectionRole::Source,
            engine: Engine::Postgresql,
            observe: Observe::Postgresql(crate::clickhouse_cmd::source_endpoint(pg)?),
            relations: vec![format!(
                "{}.{}",
                m.source.relation.schema, m.source.relation.table
            )],
        },
        Planned {
            role: ConnectionRole::Target,
            engine: Engine::Clickhouse,
            observe: Observe::Clickhouse {
                connection: ch.clone(),
                cluster: m.clickhouse.cluster.name.clone(),
                database: database.clone(),
            },
            relations: vec![m.target.table.clone()],
        },
        Planned {
            role: ConnectionRole::State,
            engine: Engine::Clickhouse,
            observe: Observe::AsTarget,
            relations: vec![ch.authority_table.clone()],
        },
    ])
}

/// The failure of a binding refusal, each code raised literally (`docs/cli.md`).
fn binding_failure(code: &str, message: String) -> Failure {
    match code {
        "DPONE_CLI_NP_ROUTE_ENGINE_MISMATCH" => {
            Failure::refused("DPONE_CLI_NP_ROUTE_ENGINE_MISMATCH", message)
        }
        "DPONE_CLI_NP_PARTICIPANT_NOT_ENROLLED" => {
            Failure::refused("DPONE_CLI_NP_PARTICIPANT_NOT_ENROLLED", message)
        }
        "DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE" => {
            Failure::refused("DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE", message)
        }
        "DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH" => {
            Failure::refused("DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH", message)
        }
        "DPONE_CLI_NP_RELATION_OUT_OF_SCOPE" => {
            Failure::refused("DPONE_CLI_NP_RELATION_OUT_OF_SCOPE", message)
        }
        "DPONE_CLI_NP_COMPOSITION_MISMATCH" => {
            Failure::refused("DPONE_CLI_NP_COMPOSITION_MISMATCH", message)
        }
        "DPONE_CLI_NP_WORKLOAD_UNBOUND" => {
            Failure::refused("DPONE_CLI_NP_WORKLOAD_UNBOUND", message)
        }
        _ => Failure::internal("DPONE_CLI_INTERNAL", "an unknown binding refusal"),
    }
}

fn stored(what: &str) -> OpenRefusal {
    OpenRefusal::Store(store::StoreError::new(
        store::StoreCode::StoredStateInvalid,
        format!("the registered grant's {what} is not usable"),
    ))
}

/// The binding of a run under reservation `r`: the registered grant (the reservation's),
/// the workload of the composition it binds, the enrollment under its `enrollment_digest`, the
/// identities observed now, then [`enrollment::bind_run`]. A failure that is not a refusal of
/// the binding (a connection that fails) is left in `failed`.
async fn bind_connections(
    store: &PgControlStore,
    r: &store::Reservation,
    composition: &Composition,
    planned: &[Planned],
    failed: &RefCell<Option<Failure>>,
) -> Result<Vec<RunParticipant>, OpenRefusal> {
    use dpone_adapter_np_control_store::ControlStorePort as _;
    let refusal = |code: &'static str, message: String| OpenRefusal::Binding { code, message };
    let history = store
        .history(&r.grant)
        .await
        .map_err(OpenRefusal::Store)?
        .ok_or_else(|| stored("registration"))?;
    if history.grant_digest != r.grant_digest {
        return Err(stored("digest"));
    }
    let grant = Authority::parse(&history.original_bytes).map_err(|_| stored("original"))?;
    let workload = enrollment::reserved_workload(&grant, composition, r.workload.as_str())
        .map_err(|w| {
            refusal(
                w.code(),
                "the composition given is not the one the reservation's grant binds, or does \
                 not route the workload within the grant's signed routes and scope"
                    .to_owned(),
            )
        })?;
    let environment = store::Uuid::parse("environment_id", grant.environment_id.as_str())
        .map_err(|_| stored("environment"))?;
    let digest = store::Sha256Digest::parse("enrollment_digest", grant.enrollment_digest.as_str())
        .map_err(|_| stored("enrollment digest"))?;
    let enrolled = store
        .enrolled(&environment, &digest)
        .await
        .map_err(OpenRefusal::Store)?;
    let mut observed = Vec::with_capacity(planned.len());
    for p in planned {
        let code = match p.role {
            ConnectionRole::Source => ErrorCode::SourceConnect,
            _ => ErrorCode::TargetConnect,
        };
        let observed_identity = match &p.observe {
            // The target's own connection: its identity, observed once.
            Observe::AsTarget => Ok(observed
                .iter()
                .find(|o: &&ObservedConnection| o.role == ConnectionRole::Target)
                .and_then(|o| o.identity.clone())),
            Observe::Postgresql(ep) => control_store::observe(ep, code)
                .await
                .map(|i| Some(i.into())),
            // The ClickHouse adapter blocks on a runtime of its own, so it runs on a thread of
            // its own, never inside this runtime.
            Observe::Clickhouse {
                connection,
                cluster,
                database,
            } => std::thread::scope(|t| {
                t.spawn(|| {
                    crate::clickhouse_cmd::observe_participant(connection, cluster, database)
                })
                .join()
            })
            .unwrap_or_else(|_| {
                Err(Failure::internal(
                    "DPONE_CLI_INTERNAL",
                    "the ClickHouse observation panicked",
                ))
            })
            .map(|i| Some(i.into())),
            Observe::Sqlserver {
                endpoint,
                database,
                trust_server_certificate,
            } => control_store::observe_sqlserver(endpoint, database, *trust_server_certificate)
                .await
                .map(|i| Some(i.into())),
            Observe::Unobservable => Ok(None),
        };
        let identity = match observed_identity {
            Ok(i) => i,
            Err(f) => {
                let message = f.message.clone();
                *failed.borrow_mut() = Some(f);
                return Err(refusal("", message));
            }
        };
        observed.push(ObservedConnection {
            role: p.role,
            engine: p.engine,
            identity,
            relations: p.relations.clone(),
        });
    }
    enrollment::bind_run(&workload, &observed, &enrolled).map_err(|b| {
        let what = match b {
            enrollment::BindRefusal::RouteEngineMismatch(_) => {
                "its engine is not the route's engine for this role"
            }
            enrollment::BindRefusal::NotEnrolled(_) => {
                "the route's participant for it is not enrolled under the grant's enrollment"
            }
            enrollment::BindRefusal::Unobservable(_) => {
                "this host does not observe the physical identity of its engine"
            }
            enrollment::BindRefusal::IdentityMismatch(_) => {
                "the database it reaches is not the enrolled participant (another server, \
                 database or a recreated database)"
            }
            enrollment::BindRefusal::RelationOutOfScope(_) => {
                "a relation it names is not one of the workload's effects of its participant"
            }
        };
        refusal(
            b.code(),
            format!(
                "the run's {} connection is refused before any read or write: {what}",
                b.role().as_str()
            ),
        )
    })
}

impl Gate {
    /// Opens the reservation with the run's `planned` connections bound to the enrolled
    /// participants of its workload's route ([`bind_connections`]), before the claim.
    fn admit_bound(&mut self, workload: &str, planned: &[Planned]) -> Result<Admitted, Failure> {
        let composition = &self.composition;
        let failed = RefCell::new(None);
        let bound = RefCell::new(Vec::new());
        let store = &self.store;
        let opened = self.rt.block_on(reservation_run::open_bound(
            store,
            &self.id,
            &self.manifest,
            workload,
            |r| {
                let (r, failed, bound) = (r.clone(), &failed, &bound);
                async move {
                    let p = bind_connections(store, &r, composition, planned, failed).await?;
                    bound.borrow_mut().clone_from(&p);
                    Ok(p)
                }
            },
        ));
        self.participants = bound.into_inner();
        self.opened(opened, failed.into_inner())
    }

    /// The outcome of opening the reservation: the bound and deadline, or the failure (`failed`:
    /// a failure of the binding that is not a refusal, reported as itself).
    fn opened(
        &mut self,
        opened: Result<reservation_run::Opened, OpenRefusal>,
        failed: Option<Failure>,
    ) -> Result<Admitted, Failure> {
        let opened = opened.map_err(|refusal| match refusal {
            OpenRefusal::Store(e) => store_failure(e),
            OpenRefusal::Manifest(ManifestMismatch::Workload) => Failure::refused(
                "DPONE_CLI_NP_RESERVATION_WORKLOAD_MISMATCH",
                "the manifest's workload (its name) is not the reservation's workload",
            ),
            OpenRefusal::Binding { code, message } => {
                failed.unwrap_or_else(|| binding_failure(code, message))
            }
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
}

impl RunGate for Gate {
    fn manifest(&self) -> &[u8] {
        &self.manifest
    }

    fn admit_xmin(&mut self, route: &XminRoute) -> Result<Admitted, Failure> {
        let planned = xmin_connections(route)?;
        self.admit_bound(&route.manifest.name, &planned)
    }

    fn admit_clickhouse(
        &mut self,
        m: &ChManifest,
        registry: &ChRegistry,
    ) -> Result<Admitted, Failure> {
        let planned = clickhouse_connections(m, registry)?;
        self.admit_bound(&m.name, &planned)
    }

    fn settle(
        &mut self,
        end: RunEnd,
        read: Option<Read>,
        http_bytes: u64,
    ) -> (Option<RunSettlement>, Option<Failure>) {
        let Some(r) = &self.reservation else {
            return (
                None,
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
        let mut settlement = SettlementRecord {
            clamped_to_reservation: plan.clamped,
            code: None,
            complete: plan.outcome == Outcome::Succeeded,
            measured_http_bytes: plan.http_bytes,
            measured_source_bytes: plan.bytes,
            measured_source_rows: plan.rows,
            outcome: plan.outcome.as_str().to_owned(),
            recovery: None,
            reservation_freed: false,
            result: "unrecorded",
        };
        let unrecorded = match recorded {
            Ok(s) => {
                settlement.result = match s {
                    Settled::Recorded => "recorded",
                    Settled::Reopened => "reopened",
                };
                None
            }
            Err(e) => {
                let code = e.code.as_str().to_owned();
                settlement.code = Some(code.clone());
                settlement.recovery = Some(
                    "record these measurements with campaign settle; the reservation stays charged",
                );
                Some(Failure {
                    code: SETTLEMENT_UNRECORDED.to_owned(),
                    message: format!(
                        "the run's measured usage was not recorded ({code}); the reservation \
                         stays unresolved and charged: settle it with campaign settle"
                    ),
                    exit: RETRY,
                })
            }
        };
        let out = RunSettlement {
            attempt_id: r.attempt.as_str().to_owned(),
            bound: ReservationBound {
                attempt_seconds: r.attempt_seconds,
                source_bytes: r.source_bytes,
                source_rows: r.source_rows,
            },
            grant_id: r.grant.grant_id.as_str().to_owned(),
            participants: self
                .participants
                .iter()
                .map(|p| BoundParticipant {
                    identity_digest: p.identity_digest.as_str().to_owned(),
                    participant_id: p.participant_id.clone(),
                    role: p.role.as_str().to_owned(),
                })
                .collect(),
            phase: r.grant.phase.as_str().to_owned(),
            reservation_id: r.reservation_id.as_str().to_owned(),
            settlement,
            trust_revision: r.trust_revision,
            workload_id: r.workload.as_str().to_owned(),
        };
        (Some(out), unrecorded)
    }
}
