//! ClickHouse external-replication full-refresh publication on the command line (spec 000):
//! `check`, `plan`, `run` and `status` for a manifest with a `physical_design` block.
//!
//! - `check`: strict manifest parse, static admission through the admission policy component,
//!   and the host's static rules, which live in the engine
//!   ([`dpone_engine_clickhouse::admission`]: canonical type profile, types the PostgreSQL
//!   source can produce, engines whose content the digest proves, nullable sort keys); this
//!   module only supplies the component's decision and the source's profile. Prints the replication decision
//!   exactly as the spec shows it plus the policy evidence; any blocker exits 1 with the first
//!   blocker's code on stderr and every blocker in the JSON. With `--connections`, also checks
//!   that the registry resolves both refs to the right kinds and that the named credential
//!   variables are set (their values are never read into output).
//! - `plan`: `check` plus the deterministic identities (`target_key`, plan and schema digests,
//!   and for `--invocation` the `operation_id` and candidate name). Touches no server.
//! - `run`: wires the [`Coordinator`] with the ClickHouse cluster adapter, the component gate,
//!   and the PostgreSQL source streaming into the artifact store; prints the commit receipt.
//! - `status`: read-only evidence of the authority record, candidates and queue, with the safe
//!   recovery action.
//!
//! Output carries digests, opaque member ids, stable codes and manifest names only: never
//! endpoints, credentials, local paths or row values.

mod report;
mod resolve;
mod wiring;

pub use resolve::{ResolveArgs, resolve};

use dpone_adapter_clickhouse::{
    ClickHouseCluster, ClickHouseConfig, Credential, StoreArtifactSource,
};
use dpone_adapter_postgres_rowbinary::{
    PgRowBinarySource, SourceBound, SourceError, TlsMode, pg_config, types::producible,
};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::admission::{self, Blocker, SourceProfile};
use dpone_engine_clickhouse::contracts::manifest::{
    ClickHouseConnection, Manifest, PgSslMode, PostgresConnection, Registry,
};
use dpone_engine_clickhouse::contracts::{
    ContentProof, Digest, MemberId, OperationId, Phase, PublicationReceipt, TargetKey,
    candidate_name, identity::PROTOCOL_VERSION, operation_id, schema_digest,
};
use dpone_engine_clickhouse::ports::{AuthorityStore, InventoryPort, SystemEnvironment};
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, EngineError, OperationRequest, Ports, RecoveryAction,
    RunOutcome, RunTimings, StatusReport,
};
use dpone_engine_nonproduction::enrollment::{ClickhouseIdentity, ClickhouseMember};
use dpone_engine_nonproduction::reservation_run::{Read, RunEnd};
use dpone_policy_model::admission::ReplicationDecision;
use dpone_policy_runtime::{DecisionEvidence, LoadedPolicy, PolicyKind, PolicyRuntime};
use serde::Serialize;
use serde_json::Value;

use crate::exit::{Failure, print_report};
use crate::input::InputKind;
use crate::route::RouteArgs;
use crate::run_gate::deadline::DeadlineAuthority;
use crate::run_gate::{RunGate, RunSettlement};
use crate::shipped;
use wiring::{ComponentGate, NoAdmission, NoArtifacts, TerminalProgress};

const ROUTE: &str = "clickhouse_cluster_publication";

/// `run`: the cluster is still executing the bound DDL.
const IN_PROGRESS: &str = "DPONE_CLICKHOUSE_ROUTE_IN_PROGRESS";

/// What `check` and `plan` decided.
struct Admission {
    decision: Option<ReplicationDecision>,
    blockers: Vec<Blocker>,
    evidence: DecisionEvidence,
}

fn read_manifest(args: &RouteArgs) -> Result<Manifest, Failure> {
    let bytes = shipped::read_input(args.manifest_path()?, InputKind::Manifest)?;
    parse_manifest(&bytes)
}

fn parse_manifest(bytes: &[u8]) -> Result<Manifest, Failure> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        Failure::bad_input(
            "DPONE_CLICKHOUSE_MANIFEST_YAML_NON_ASCII",
            "the manifest is not UTF-8",
        )
    })?;
    Manifest::parse(text).map_err(|e| Failure::bad_input(e.code(), e.to_string()))
}

fn read_registry(args: &RouteArgs) -> Result<Option<Registry>, Failure> {
    let Some(path) = &args.connections else {
        return Ok(None);
    };
    let bytes = shipped::read_input(path, InputKind::ConnectionRegistry)?;
    let text = std::str::from_utf8(&bytes).map_err(|_| {
        Failure::bad_input(
            "DPONE_CLICKHOUSE_REGISTRY_YAML_NON_ASCII",
            "the connection registry is not UTF-8",
        )
    })?;
    Registry::parse(text)
        .map(Some)
        .map_err(|e| Failure::bad_input(e.code(), e.to_string()))
}

fn require_registry(args: &RouteArgs) -> Result<Registry, Failure> {
    read_registry(args)?.ok_or_else(|| {
        Failure::bad_input(
            "DPONE_CLI_CONNECTIONS_REQUIRED",
            "this command needs the connection registry (--connections or DPONE_CONNECTIONS)",
        )
    })
}

fn require_invocation(args: &RouteArgs) -> Result<&str, Failure> {
    match args.invocation.as_deref() {
        Some(i) if !i.is_empty() && i.len() <= 512 && !i.chars().any(char::is_control) => Ok(i),
        Some(_) => Err(Failure::bad_input(
            "DPONE_CLI_INVOCATION_INVALID",
            "--invocation must be 1 to 512 printable characters",
        )),
        None => Err(Failure::bad_input(
            "DPONE_CLI_INVOCATION_REQUIRED",
            "this command needs the scheduler invocation id (--invocation or DPONE_INVOCATION_ID)",
        )),
    }
}

pub(crate) fn registry_failure(
    e: &dpone_engine_clickhouse::contracts::manifest::ManifestError,
) -> Failure {
    Failure::bad_input(e.code(), e.to_string())
}

/// The PostgreSQL source's profile for the engine's static rules.
fn source_profile() -> SourceProfile<'static> {
    SourceProfile {
        code: dpone_adapter_postgres_rowbinary::codes::DECLARED_TYPE_UNSUPPORTED,
        producible: &producible,
    }
}

/// Where the admission component comes from (a configured trust policy is honoured).
fn policy_source<'r>(
    runtime: &'r PolicyRuntime,
    args: &RouteArgs,
) -> Result<shipped::PolicySource<'r>, Failure> {
    shipped::PolicySource::resolve(runtime, args.components_dir.as_deref(), &args.source)
}

/// Static admission through the component, then the engine's host rules.
fn static_admission(policy: &LoadedPolicy, m: &Manifest) -> Result<Admission, Failure> {
    let decided = policy.admission_static(&m.static_facts())?;
    let a = admission::assess(decided.decision, m, &source_profile());
    Ok(Admission {
        decision: a.decision,
        blockers: a.blockers,
        evidence: decided.evidence,
    })
}

/// With a registry: both refs resolve to the right kinds, and the credential variables are set.
/// What `check` and `plan` report about the registry (kinds and counts, never endpoints).
#[derive(Serialize)]
struct ConnectionsCheck {
    target: &'static str,
    source: &'static str,
    members: usize,
    credentials: &'static str,
}

fn check_connections(m: &Manifest, registry: &Registry) -> Result<ConnectionsCheck, Failure> {
    let ch = registry
        .clickhouse_for(
            &m.target.connection_ref,
            "target.connection_ref",
            m.clickhouse.cluster.is_local(),
        )
        .map_err(|e| registry_failure(&e))?;
    let pg = registry
        .postgres(&m.source.connection_ref, "source.connection_ref")
        .map_err(|e| registry_failure(&e))?;
    let lookup = |n: &str| std::env::var(n).ok();
    Registry::password(&ch.password_env, lookup).map_err(|e| registry_failure(&e))?;
    if let Some(var) = &pg.password_env {
        Registry::password(var, lookup).map_err(|e| registry_failure(&e))?;
    }
    Ok(ConnectionsCheck {
        target: "clickhouse_cluster",
        source: "postgres_source",
        members: ch.member_urls.len(),
        credentials: "present",
    })
}

/// What a run needs beyond the static decision (spec journey step 3).
#[derive(Serialize)]
struct Requires {
    runtime_admission: bool,
    keeper_authority: bool,
    replayable_artifact: bool,
}

const REQUIRES: Requires = Requires {
    runtime_admission: true,
    keeper_authority: true,
    replayable_artifact: true,
};

/// The deterministic identities `plan` prints.
#[derive(Serialize)]
struct PlanIdentities {
    protocol_version: &'static str,
    target_key: TargetKey,
    plan_digest: Digest,
    /// The proof a new operation of this plan is proven by (the manifest's, or the default).
    content_proof: ContentProof,
    schema_digest: Digest,
    columns: usize,
    invocation_given: bool,
    operation_id: Option<OperationId>,
    candidate_name: Option<String>,
    phases: [Phase; 7],
}

impl PlanIdentities {
    fn of(m: &Manifest, invocation: Option<&str>) -> Self {
        let key = m.target_key();
        let plan_digest = m.plan_digest();
        let operation = invocation.map(|i| operation_id(i, &key, &plan_digest));
        Self {
            protocol_version: PROTOCOL_VERSION,
            target_key: key,
            plan_digest,
            content_proof: coordinator_config(m).content_proof,
            schema_digest: schema_digest(&m.schema()),
            columns: m.source.columns.len(),
            invocation_given: invocation.is_some(),
            operation_id: operation,
            candidate_name: operation.map(|o| candidate_name(&m.target.table, &o)),
            phases: [
                Phase::Locked,
                Phase::Staging,
                Phase::Staged,
                Phase::PublicationDispatching,
                Phase::Committed,
                Phase::CleanupDispatching,
                Phase::Completed,
            ],
        }
    }
}

/// The JSON of `check` and `plan`; fields print in this order.
#[derive(Serialize)]
struct StaticReport<'a> {
    route: &'static str,
    command: &'static str,
    workload: &'a str,
    admitted: bool,
    /// The replication decision, exactly the spec's five fields; null when blocked.
    replication: Option<&'a ReplicationDecision>,
    blockers: &'a [Blocker],
    requires: Requires,
    /// Evidence of the admission component's decision.
    evidence: &'a DecisionEvidence,
    /// Verification evidence of the signed bundle the component came from, if any.
    bundle: Option<&'a Value>,
    /// Registry resolution, when `--connections` was given.
    connections: Option<ConnectionsCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<PlanIdentities>,
}

fn blocked(blockers: &[Blocker]) -> Result<(), Failure> {
    match blockers.first() {
        None => Ok(()),
        Some(first) => Err(Failure::refused(
            &first.code,
            format!("{} blocker(s); first: {}", blockers.len(), first.message),
        )),
    }
}

fn static_report(command: &'static str, args: &RouteArgs) -> Result<(), Failure> {
    let invocation = match (command, &args.invocation) {
        ("plan", Some(_)) => Some(require_invocation(args)?),
        _ => None,
    };
    let m = read_manifest(args)?;
    let connections = match read_registry(args)? {
        None => None,
        Some(r) => Some(check_connections(&m, &r)?),
    };
    let runtime = shipped::runtime(None)?;
    let source = policy_source(&runtime, args)?;
    let a = static_admission(&*source.policy(PolicyKind::Admission)?, &m)?;
    print_report(&StaticReport {
        route: ROUTE,
        command,
        workload: &m.name,
        admitted: a.blockers.is_empty(),
        replication: a.decision.as_ref(),
        blockers: &a.blockers,
        requires: REQUIRES,
        evidence: &a.evidence,
        bundle: source.bundle_evidence(),
        connections,
        plan: (command == "plan").then(|| PlanIdentities::of(&m, invocation)),
    })?;
    blocked(&a.blockers)
}

/// `check`.
pub fn check(args: &RouteArgs) -> Result<(), Failure> {
    static_report("check", args)
}

/// `plan`.
pub fn plan(args: &RouteArgs) -> Result<(), Failure> {
    static_report("plan", args)
}

/// The JSON of `run`; absent fields are omitted.
#[derive(Serialize)]
struct RunReport<'a> {
    route: &'static str,
    command: &'static str,
    workload: &'a str,
    /// `completed`, `in_progress`, `blocked` or `failed`.
    outcome: &'static str,
    /// The replication decision static admission made (the spec's five fields, as `check`
    /// and `plan` print it); absent when static admission blocked.
    #[serde(skip_serializing_if = "Option::is_none")]
    replication: Option<&'a ReplicationDecision>,
    #[serde(skip_serializing_if = "Option::is_none")]
    receipt: Option<&'a PublicationReceipt>,
    #[serde(skip_serializing_if = "Option::is_none")]
    phase: Option<Phase>,
    #[serde(skip_serializing_if = "Option::is_none")]
    waiting: Option<&'a [MemberId]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
    /// The port class behind the engine error (adapter or source code).
    #[serde(skip_serializing_if = "Option::is_none")]
    cause: Option<&'static str>,
    /// The PostgreSQL source's own description (column position and row ordinal, no values).
    #[serde(skip_serializing_if = "Option::is_none")]
    source_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retryable: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    recovery: Option<RecoveryAction>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blockers: Option<&'a [Blocker]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    target_key: Option<TargetKey>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation_id: Option<OperationId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bundle: Option<&'a Value>,
    /// What `run` measured: source rows and COPY bytes, and each member load's HTTP body bytes
    /// (separate measurements; see docs/clickhouse-external-publication.md). Absent when
    /// nothing was read or sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    measurements: Option<Measurements>,
    /// Wall time of each phase of this run (seal, artifact digest, baseline, staging,
    /// authorization, publication, commit, cleanup) and of each member's steps (create, load,
    /// content proofs), in seconds; absent when the coordinator did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    phase_timings: Option<RunTimings>,
    /// `run --np-reservation`: the reservation and what was settled ([`crate::np_run`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    np_reservation: Option<Option<RunSettlement>>,
}

/// The JSON of a gated `run` that failed after its reservation was admitted and before the
/// coordinator ran (keys sorted: the shape first printed as a JSON value).
#[derive(Serialize)]
struct SettledBeforeRun<'a> {
    command: &'static str,
    failure: SetupFailure<'a>,
    np_reservation: Option<RunSettlement>,
    outcome: &'static str,
    route: &'static str,
    workload: &'a str,
}

#[derive(Serialize)]
struct SetupFailure<'a> {
    code: &'a str,
    message: &'a str,
}

/// The two separate measurements of one `run`.
#[derive(Serialize)]
struct Measurements {
    /// Rows and binary COPY payload bytes the source read (`complete: false` for a failed or
    /// refused read); absent when the source was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<SourceMeasured>,
    /// One entry per member load, in order: HTTP request body bytes as sent.
    http_body: Vec<BodySent>,
}

#[derive(Serialize)]
struct SourceMeasured {
    rows: u64,
    source_bytes: u64,
    complete: bool,
}

#[derive(Serialize)]
struct BodySent {
    member: MemberId,
    body_bytes: u64,
    complete: bool,
}

fn measurements(source: &PgRowBinarySource, cluster: &ClickHouseCluster) -> Option<Measurements> {
    let source = source.last_measurement().map(|m| SourceMeasured {
        rows: m.rows,
        source_bytes: m.source_bytes,
        complete: m.complete,
    });
    let http_body: Vec<BodySent> = cluster
        .body_observations()
        .into_iter()
        .map(|b| BodySent {
            member: b.member,
            body_bytes: b.body_bytes,
            complete: b.complete,
        })
        .collect();
    (source.is_some() || !http_body.is_empty()).then_some(Measurements { source, http_body })
}

impl<'a> RunReport<'a> {
    fn new(m: &'a Manifest, replication: Option<&'a ReplicationDecision>) -> Self {
        Self {
            route: ROUTE,
            command: "run",
            workload: &m.name,
            outcome: "",
            replication,
            receipt: None,
            phase: None,
            waiting: None,
            error: None,
            cause: None,
            source_error: None,
            retryable: None,
            recovery: None,
            blockers: None,
            target_key: None,
            operation_id: None,
            bundle: None,
            measurements: None,
            phase_timings: None,
            np_reservation: None,
        }
    }
}

/// The JSON of `status`.
#[derive(Serialize)]
struct StatusOutput<'a> {
    route: &'static str,
    command: &'static str,
    workload: &'a str,
    status: StatusReport,
}

fn request(m: &Manifest, invocation: &str) -> OperationRequest {
    OperationRequest {
        static_facts: m.static_facts(),
        target_table: m.target.table.clone(),
        scheduler_invocation: invocation.to_owned(),
        plan_digest: m.plan_digest(),
        schema: m.schema(),
        order_by: m.clickhouse.order_by.clone(),
    }
}

/// The coordinator's configuration for this manifest: its `content_proof` when written, the
/// default otherwise (it decides new operations only; a recorded operation keeps its proof).
fn coordinator_config(m: &Manifest) -> CoordinatorConfig {
    let default = CoordinatorConfig::default();
    CoordinatorConfig {
        content_proof: m.clickhouse.content_proof.unwrap_or(default.content_proof),
        ..default
    }
}

/// The cluster adapter from the registry, with the credential resolved from the environment.
fn cluster(m: &Manifest, registry: &Registry) -> Result<ClickHouseCluster, Failure> {
    let ch = registry
        .clickhouse_for(
            &m.target.connection_ref,
            "target.connection_ref",
            m.clickhouse.cluster.is_local(),
        )
        .map_err(|e| registry_failure(&e))?;
    let mut cluster = ClickHouseCluster::new(&cluster_config(ch, &m.clickhouse.cluster.name)?)
        .map_err(|e| wiring::port_failure(&e, "the ClickHouse client set-up"))?;
    cluster.set_proof_time_limit(std::time::Duration::from_secs(ch.verification_timeout_secs));
    // The first read admission makes anyway; a connection failure is reported with the
    // adapter's own code before anything else happens.
    cluster
        .observe(&m.clickhouse.cluster.name)
        .map_err(|e| wiring::port_failure(&e, "reading the cluster inventory"))?;
    Ok(cluster)
}

/// The client configuration of connection `ch` for cluster `cluster_name` (its credential read
/// from the variable the registry names).
fn cluster_config(
    ch: &ClickHouseConnection,
    cluster_name: &str,
) -> Result<ClickHouseConfig, Failure> {
    let password = Registry::password(&ch.password_env, |n| std::env::var(n).ok())
        .map_err(|e| registry_failure(&e))?;
    Ok(ClickHouseConfig {
        coordinator_url: ch.coordinator_url.clone(),
        member_urls: ch.member_urls.clone(),
        credential: Credential {
            user: ch.user.clone(),
            password: password.expose().to_owned(),
        },
        authority_database: ch.authority_database.clone(),
        authority_table: ch.authority_table.clone(),
        cluster: cluster_name.to_owned(),
        ddl_task_timeout_secs: ch.ddl_task_timeout_secs,
        request_timeout_secs: ch.request_timeout_secs,
    })
}

/// The PostgreSQL source connection `pg` as an endpoint of the PostgreSQL adapter: the same
/// host, port, database, login, TLS mode (as in effect) and pinned CA the route's source uses,
/// its password read from the variable the registry names. The identity of the source is
/// observed through it.
pub(crate) fn source_endpoint(
    pg: &PostgresConnection,
) -> Result<dpone_engine_xmin::registry::Endpoint, Failure> {
    use dpone_engine_xmin::registry::{Endpoint, EndpointSpec, Secret, SslMode};
    let password = match &pg.password_env {
        None => None,
        Some(var) => Some(Secret::new(
            Registry::password(var, |n| std::env::var(n).ok())
                .map_err(|e| registry_failure(&e))?
                .expose(),
        )),
    };
    Ok(Endpoint {
        spec: EndpointSpec {
            host: pg.host.clone(),
            port: pg.port,
            database: pg.database.clone(),
            user: pg.user.clone(),
            sslmode: Some(match pg.effective_sslmode() {
                PgSslMode::Disable => SslMode::Disable,
                PgSslMode::Require => SslMode::Require,
                PgSslMode::VerifyCa => SslMode::VerifyCa,
                PgSslMode::VerifyFull => SslMode::VerifyFull,
            }),
            sslrootcert: pg.sslrootcert.clone(),
        },
        password,
    })
}

/// The physical identity of ClickHouse participant database `database` on every member of
/// cluster `cluster_name`, observed through connection `ch` exactly as a run connects
/// (endpoints, TLS, credential): each member's proven replica, `serverUUID()` and the
/// database's UUID ([`ClickHouseCluster::observe_participant`]). Blocking (the adapter runs
/// its own runtime): never call it from inside an async context. Failures carry codes only.
pub(crate) fn observe_participant(
    ch: &ClickHouseConnection,
    cluster_name: &str,
    database: &str,
) -> Result<ClickhouseIdentity, Failure> {
    let cluster = ClickHouseCluster::new(&cluster_config(ch, cluster_name)?)
        .map_err(|e| wiring::port_failure(&e, "the ClickHouse client set-up"))?;
    let members = cluster
        .observe_participant(database)
        .map_err(|e| wiring::port_failure(&e, "observing the participant's identity"))?;
    ClickhouseIdentity::new(
        database.to_owned(),
        members
            .into_iter()
            .map(|m| ClickhouseMember {
                shard_num: m.shard_num,
                replica_num: m.replica_num,
                server_uuid: m.server_uuid,
                database_uuid: m.database_uuid,
            })
            .collect(),
    )
    .map_err(|_| {
        Failure::refused(
            "DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE",
            "the participant's identity could not be observed (a member reported no database \
             UUID, one not in the canonical form, or no member at all)",
        )
    })
}

/// Prints the failed run's report (`base`: what the run knows whatever happened — its
/// replication decision, measurements, timings, settlement) and returns its failure.
fn fail_closed(
    args: &RouteArgs,
    m: &Manifest,
    e: &EngineError,
    source_detail: Option<String>,
    base: RunReport<'_>,
) -> Result<(), Failure> {
    let blockers: Vec<Blocker> = match e {
        EngineError::AdmissionBlocked(reasons) => {
            reasons.iter().cloned().map(Blocker::policy).collect()
        }
        _ => Vec::new(),
    };
    let key = m.target_key();
    let operation = args
        .invocation
        .as_deref()
        .map(|i| operation_id(i, &key, &m.plan_digest()));
    print_report(&RunReport {
        outcome: if blockers.is_empty() {
            "failed"
        } else {
            "blocked"
        },
        error: Some(e.code()),
        cause: wiring::cause(e),
        source_error: source_detail,
        retryable: Some(e.is_retryable()),
        recovery: Some(e.recovery()),
        blockers: Some(&blockers),
        target_key: Some(key),
        operation_id: operation,
        ..base
    })?;
    let mut failure = wiring::engine_failure(e);
    if let Some(first) = blockers.first() {
        failure.code.clone_from(&first.code);
        failure.message = format!("{} blocker(s); first: {}", blockers.len(), first.message);
    }
    Err(failure)
}

/// `run`.
pub fn run(args: &RouteArgs) -> Result<(), Failure> {
    run_gated(args, None)
}

/// The source rows and bytes a run read, for its settlement.
fn read_of(source: &PgRowBinarySource) -> Option<Read> {
    source.last_measurement().map(|m| Read {
        rows: m.rows,
        bytes: m.source_bytes,
        complete: m.complete,
    })
}

/// HTTP body bytes the sender measured over every member load (complete or not).
fn http_bytes(cluster: &ClickHouseCluster) -> u64 {
    cluster
        .body_observations()
        .iter()
        .fold(0u64, |sum, b| sum.saturating_add(b.body_bytes))
}

/// A failure after the reservation was admitted and before the coordinator ran (nothing
/// read): settled `failed`, printed with the settlement.
fn settle_before_run(m: &Manifest, gate: &mut dyn RunGate, f: Failure) -> Result<(), Failure> {
    let (settlement, unrecorded) = gate.settle(RunEnd::Failed, None, 0);
    print_report(&SettledBeforeRun {
        command: "run",
        failure: SetupFailure {
            code: &f.code,
            message: &f.message,
        },
        np_reservation: settlement,
        outcome: "failed",
        route: ROUTE,
        workload: &m.name,
    })?;
    Err(unrecorded.unwrap_or(f))
}

/// `run`, optionally under a reservation's [`RunGate`] ([`crate::np_run`]): the gate's manifest
/// bytes are the ones parsed; after static admission (no server touched) the gate is asked,
/// before any source or ClickHouse access; its bound and deadline bind the source and the
/// authority writes ([`crate::np_run::deadline`]); the settlement is printed as
/// `np_reservation`.
pub fn run_gated(args: &RouteArgs, mut gate: Option<&mut dyn RunGate>) -> Result<(), Failure> {
    let m = match gate.as_deref() {
        Some(g) => parse_manifest(g.manifest())?,
        None => read_manifest(args)?,
    };
    let invocation = require_invocation(args)?;
    let registry = require_registry(args)?;
    let pg = registry
        .postgres(&m.source.connection_ref, "source.connection_ref")
        .map_err(|e| registry_failure(&e))?;
    let pg_password = match &pg.password_env {
        None => None,
        Some(var) => Some(
            Registry::password(var, |n| std::env::var(n).ok()).map_err(|e| registry_failure(&e))?,
        ),
    };
    // Static admission and the host's rules first: no server is touched for a manifest this
    // host cannot publish (the coordinator repeats static admission through the same gate).
    let runtime = shipped::runtime(None)?;
    let source = policy_source(&runtime, args)?;
    let policy = source.policy(PolicyKind::Admission)?;
    let admission = static_admission(&policy, &m)?;
    let replication = admission.decision.as_ref();
    if !admission.blockers.is_empty() {
        print_report(&RunReport {
            outcome: "blocked",
            recovery: Some(RecoveryAction::FixManifest),
            blockers: Some(&admission.blockers),
            ..RunReport::new(&m, replication)
        })?;
        return blocked(&admission.blockers);
    }
    let admitted = match gate.as_deref_mut() {
        Some(g) => Some(g.admit_clickhouse(&m, &registry)?),
        None => None,
    };
    let gate_ports = ComponentGate { policy: &policy };

    let cluster = match (cluster(&m, &registry), gate.as_deref_mut()) {
        (Ok(c), _) => c,
        (Err(f), Some(g)) => return settle_before_run(&m, g, f),
        (Err(f), None) => return Err(f),
    };
    let max = m.clickhouse.max_source_bytes.unwrap_or(0).max(1) as u64;
    let store = match ArtifactStore::open_path(&args.artifact_dir, max) {
        Ok(s) => s,
        Err(e) => {
            let f =
                Failure::bad_input(e.code(), format!("cannot open the artifact directory: {e}"));
            return match gate.as_deref_mut() {
                Some(g) => settle_before_run(&m, g, f),
                None => Err(f),
            };
        }
    };
    let mut pg_source = PgRowBinarySource::new(
        pg_config(
            &pg.host,
            pg.port,
            &pg.database,
            &pg.user,
            pg_password.as_ref().map(|s| s.expose()),
        ),
        &m.source.relation.schema,
        &m.source.relation.table,
    )
    .with_tls(
        match pg.effective_sslmode() {
            PgSslMode::Disable => TlsMode::Disable,
            PgSslMode::Require => TlsMode::Require,
            PgSslMode::VerifyCa => TlsMode::VerifyCa,
            PgSslMode::VerifyFull => TlsMode::VerifyFull,
        },
        pg.sslrootcert.as_deref(),
    );
    if let Some(a) = admitted {
        pg_source = pg_source
            .with_bound(SourceBound {
                max_rows: a.max_rows,
                max_bytes: a.max_bytes,
            })
            .with_deadline(a.deadline);
    }
    let deadline_authority = admitted.map(|a| DeadlineAuthority::new(&cluster, a.deadline));
    let authority: &(dyn AuthorityStore + Sync) = match &deadline_authority {
        Some(d) => d,
        None => &cluster,
    };
    let artifacts = StoreArtifactSource::new(&store, &pg_source);
    let progress = TerminalProgress::detect();
    let coordinator = Coordinator::new(
        Ports {
            authority,
            inventory: &cluster,
            catalog: &cluster,
            ddl: &cluster,
            artifacts: &artifacts,
            admission: &gate_ports,
            env: &SystemEnvironment,
            progress: &progress,
        },
        coordinator_config(&m),
    );
    let req = request(&m, invocation);
    let outcome = coordinator.run(&req);
    let phase_timings = Some(coordinator.timings());
    // Rows applied: the publication's rows, counted once per publication, by the run that
    // brought it to COMPLETED (every member then serves the same artifact; not per member).
    let applied = match &outcome {
        Ok(RunOutcome::Completed { receipt }) if progress.completed_here() => {
            Some(receipt.artifact.row_count)
        }
        _ => None,
    };
    let read = read_of(&pg_source);
    if read.is_some() || applied.is_some() {
        crate::telemetry::record_io(
            "clickhouse",
            read.as_ref().map_or(0, |r| r.rows),
            read.as_ref().map_or(0, |r| r.bytes),
            applied,
        );
    }
    // The deadline stopped the run: the coordinator stopped as interrupted because the source
    // read was abandoned or a phase transition was refused before it was sent (a best-effort
    // write refused after another failure does not make that failure a deadline stop).
    let stopped = matches!(outcome, Err(EngineError::Interrupted { .. }))
        && (deadline_authority
            .as_ref()
            .is_some_and(DeadlineAuthority::refused)
            || pg_source.last_error() == Some(SourceError::DeadlineExceeded));
    let gated = gate.is_some();
    let (np_reservation, unrecorded) = match gate {
        None => (None, None),
        Some(g) => {
            let end = match &outcome {
                Ok(RunOutcome::Completed { .. }) => RunEnd::Completed,
                Ok(RunOutcome::InProgress { .. }) => RunEnd::Unfinished,
                Err(_) if stopped => RunEnd::Unfinished,
                Err(_) => RunEnd::Failed,
            };
            let (s, f) = g.settle(end, read_of(&pg_source), http_bytes(&cluster));
            (Some(s), f)
        }
    };
    match outcome {
        Ok(RunOutcome::Completed { receipt }) => {
            print_report(&RunReport {
                outcome: "completed",
                receipt: Some(&receipt),
                bundle: source.bundle_evidence(),
                measurements: measurements(&pg_source, &cluster),
                phase_timings,
                np_reservation,
                ..RunReport::new(&m, replication)
            })?;
            unrecorded.map_or(Ok(()), Err)
        }
        Ok(RunOutcome::InProgress { phase, waiting }) => {
            print_report(&RunReport {
                outcome: "in_progress",
                phase: Some(phase),
                waiting: Some(&waiting),
                recovery: Some(RecoveryAction::WaitThenResume),
                measurements: measurements(&pg_source, &cluster),
                phase_timings,
                np_reservation,
                ..RunReport::new(&m, replication)
            })?;
            Err(Failure {
                code: IN_PROGRESS.to_owned(),
                message: format!(
                    "{} member(s) still executing the bound DDL in {}; run again with the same --invocation",
                    waiting.len(),
                    phase.as_str()
                ),
                exit: crate::exit::RETRY,
            })
        }
        Err(e) => {
            let detail = match &e {
                EngineError::ArtifactUnavailable(_) | EngineError::Interrupted { .. } => {
                    pg_source.last_error().map(|s| s.to_string())
                }
                _ => None,
            };
            let failed = fail_closed(
                args,
                &m,
                &e,
                detail,
                RunReport {
                    measurements: measurements(&pg_source, &cluster),
                    phase_timings,
                    np_reservation,
                    ..RunReport::new(&m, replication)
                },
            );
            if stopped {
                return Err(crate::run_gate::deadline_exceeded());
            }
            // Under a reservation a bound breach reports the source's bound code, as the XMin
            // route does (the engine's code and the cause stay in the JSON).
            match wiring::cause(&e) {
                Some(
                    c @ (dpone_adapter_postgres_rowbinary::codes::SOURCE_ROW_BOUND_EXCEEDED
                    | dpone_adapter_postgres_rowbinary::codes::SOURCE_BYTE_BOUND_EXCEEDED),
                ) if gated => Err(Failure {
                    code: c.to_owned(),
                    message: format!(
                        "the source read exceeded the reservation's bound; nothing was sealed or \
                         published ({})",
                        e.code()
                    ),
                    exit: crate::exit::REFUSED,
                }),
                _ => failed,
            }
        }
    }
}

/// `status`.
pub fn status(args: &RouteArgs) -> Result<(), Failure> {
    let m = read_manifest(args)?;
    let invocation = require_invocation(args)?;
    let registry = require_registry(args)?;
    let cluster = cluster(&m, &registry)?;
    let progress = dpone_engine_clickhouse::ports::NoProgress;
    let coordinator = Coordinator::new(
        Ports {
            authority: &cluster,
            inventory: &cluster,
            catalog: &cluster,
            ddl: &cluster,
            artifacts: &NoArtifacts,
            admission: &NoAdmission,
            env: &SystemEnvironment,
            progress: &progress,
        },
        coordinator_config(&m),
    );
    let report = coordinator
        .status(&request(&m, invocation))
        .map_err(|e| wiring::engine_failure(&e))?;
    print_report(&StatusOutput {
        route: ROUTE,
        command: "status",
        workload: &m.name,
        status: report,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = include_str!("../../../fixtures/clickhouse/manifest.yaml");

    #[test]
    fn the_wired_source_profile_is_the_postgres_sources() {
        // The rules themselves are the engine's (`dpone_engine_clickhouse::admission`); the CLI
        // supplies the PostgreSQL source's profile and code.
        let m = Manifest::parse(&MANIFEST.replace("type: String\n", "type: Enum8('a' = 1)\n"))
            .expect("parses");
        let codes: Vec<String> = admission::host_rules(&m, &[], &source_profile())
            .into_iter()
            .map(|b| b.code)
            .collect();
        assert_eq!(codes, ["DPONE_PG_ROWBINARY_DECLARED_TYPE_UNSUPPORTED"]);
    }
}
