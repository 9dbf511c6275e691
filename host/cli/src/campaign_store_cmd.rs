//! `dpone-host campaign policy register | enroll | grant register | admit | settle | status`: the
//! protected part of the nonproduction composition authority (spec 004, issue 12 §2 and §4) on
//! the PostgreSQL control store (`dpone-adapter-np-control-store`).
//!
//! - `policy register` records the pinned policy (checked against `--policy-digest`, its
//!   trusted root against the policy's pin) as an append-only trust revision with the current
//!   revocation epoch. Recording the current record again returns the current revision;
//!   restoring older bytes appends a new one.
//! - `enroll` records a participant's physical identity observed live (see [`enroll`]).
//! - `grant register` authenticates inside the store's revision bracket
//!   (`ControlStorePort::authenticate`: the current trust revision is read before and after):
//!   inside it the grant is verified exactly as `campaign verify` does (signature, reopen, scope
//!   through the pinned component, [`crate::campaign::pipeline`]) against the stored policy
//!   and its revocation epoch. Then the immutable original is registered in one SERIALIZABLE
//!   transaction; a qualification grant consumes its one-time run, an execution grant has its
//!   activation request selected by the activation coordinator. An identical registration
//!   reopens as history (nothing charged, no executor permit); a consumed run refuses.
//! - `admit` authenticates the same way, reads the pool from the store, decides the workload's
//!   scope through the pinned component with that usage and the attempt's complete bound, then
//!   reserves the bound in one SERIALIZABLE transaction that re-checks the revision, the exact
//!   original bytes, the database clock, revocation and ownership. It prints the reservation and
//!   its evidence.
//! - `settle` records measured usage; it never frees a reservation.
//! - `status` reads a registration as recorded (under its original trust revision, after expiry
//!   and revocation too), its pool with every reservation of the pool (settled or unresolved),
//!   and the reservations asked for by id (`--reservation`, e.g. after a lost acknowledgement).
//!
//! The connection URL is read from the environment variable `--store-url-env` names and never
//! printed; errors carry a stable code (`DPONE_NP_STORE_*` with the exit status of
//! `docs/cli.md`) and name no endpoint, credential, value or path. The mapping from documents to
//! the port's values is [`mapping`].

use crate::campaign::pipeline::{self, Refusal};
use crate::campaign::{failure, now, np_failure, parse};
use crate::control_store::{self, StoreArgs, open, runtime, store_failure};
use crate::exit::{Failure, REFUSED, print_report};
use crate::input::{InputKind, read};
use crate::shipped;
use clap::{Args, Subcommand, ValueEnum};
use dpone_adapter_np_control_store::{
    self as store, AttemptOutcome, ControlStorePort, PgControlStore, Registered, Selected, Settled,
    StoreCode, StoreError,
};
use dpone_engine_nonproduction::admission::{
    self, AdmitError, AdmitInputs, Admitted, Bracket, ScopeDecider, Verifier,
};
use dpone_engine_nonproduction::authority::PhaseSubjects;
use dpone_engine_nonproduction::common::Engine;
use dpone_engine_nonproduction::control_store::mapping;
use dpone_engine_nonproduction::{
    ActivationRequest, Authority, AuthorityPolicy, Composition, Document,
};
use dpone_policy_model::scope::{ScopeDecision, ScopeFacts};
use dpone_policy_runtime::{DecisionEvidence, LoadedPolicy, PolicyKind};
use std::path::PathBuf;
use tracing::Instrument as _;

mod report;
use report::{
    ActivationSelection, AdmissionEvidence, AdmitDenied, AdmitVerificationRefused, AdmittedScope,
    Authentication, AuthorityView, Enrolled, GrantRegistered, IdentityView, ListedView,
    PolicyRecorded, PoolView, Probed, Protected, RegisterRefused, RegistrationView,
    ReservationView, SettleRecorded, Status, TrustView,
};

/// The pinned policy is not the store's current trust revision (exit 1).
pub const POLICY_NOT_CURRENT: &str = "DPONE_CLI_CAMPAIGN_POLICY_NOT_CURRENT";

/// `campaign policy` subcommands.
#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Record the pinned policy as the environment's current trust revision.
    Register(PolicyRegisterArgs),
}

/// `campaign grant` subcommands.
#[derive(Subcommand)]
pub enum GrantCommand {
    /// Verify a grant as `campaign verify` does and register its immutable original.
    Register(Box<GrantArgs>),
}

/// `campaign policy register` options.
#[derive(Args)]
pub struct PolicyRegisterArgs {
    /// The `dpone.nonproduction-authority-policy.v1` document.
    #[arg(long)]
    policy: PathBuf,
    /// The external pin of the policy, `sha256:<hex>`.
    #[arg(long)]
    policy_digest: String,
    /// `trusted_root.json`; its sha256 must be the policy's `signer.trusted_root_digest`.
    #[arg(long)]
    trusted_root: PathBuf,
    /// The current revocation epoch (default: the policy's floor; never below it).
    #[arg(long)]
    revocation_epoch: Option<u64>,
    #[command(flatten)]
    store: StoreArgs,
}

/// The verification inputs of `grant register` and `admit` (those of `campaign verify`).
#[derive(Args)]
pub struct GrantArgs {
    /// The grant's files; the policy must be the store's current trust revision.
    #[command(flatten)]
    files: crate::campaign::GrantFileArgs,
    /// Directory of the shipped components (still checked against the embedded pins).
    #[arg(long)]
    components_dir: Option<PathBuf>,
    /// Precompiled-code cache directory.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
}

/// `campaign enroll` options.
#[derive(Args)]
pub struct EnrollArgs {
    /// The `dpone.nonproduction-authority-policy.v1` document; it must be the store's current
    /// trust revision, and its enrollment must name the participant.
    #[arg(long)]
    policy: PathBuf,
    /// The external pin of the policy, `sha256:<hex>`.
    #[arg(long)]
    policy_digest: String,
    /// The participant id (of the policy's `enrollment.participants`).
    #[arg(long)]
    participant: String,
    /// The connection registry holding the connection that reaches the participant.
    #[arg(long, env = "DPONE_CONNECTIONS")]
    connections: PathBuf,
    /// The registry connection that reaches the participant (its credential is read from the
    /// variable the registry names): a PostgreSQL connection of an XMin registry, or a
    /// `clickhouse_cluster` connection of a ClickHouse route's registry.
    #[arg(long)]
    connection: String,
    /// ClickHouse participants: the participant's database (the one database the route uses
    /// on it: target, staging and authority facade).
    #[arg(long)]
    database: Option<String>,
    /// ClickHouse participants: the cluster whose every member is observed.
    #[arg(long)]
    cluster: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

/// `campaign admit` options.
#[derive(Args)]
pub struct AdmitArgs {
    #[command(flatten)]
    grant: GrantArgs,
    /// The workload the attempt runs.
    #[arg(long)]
    workload: String,
    /// The scheduler attempt (unique per pool and workload).
    #[arg(long)]
    attempt: String,
    /// The attempt's complete source-row bound, reserved before any read.
    #[arg(long)]
    source_rows: u64,
    /// The attempt's complete source-byte bound.
    #[arg(long)]
    source_bytes: u64,
    /// The attempt's duration bound in seconds.
    #[arg(long)]
    attempt_seconds: u64,
}

/// How an attempt ended.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Outcome {
    /// Completed.
    Succeeded,
    /// Failed.
    Failed,
    /// Ended without a complete observation.
    Incomplete,
}

/// `campaign settle` options.
#[derive(Args)]
pub struct SettleArgs {
    /// The reservation id `admit` printed (`sha256:<hex>`).
    #[arg(long)]
    reservation: String,
    /// Source rows read.
    #[arg(long)]
    source_rows: u64,
    /// Source bytes read (COPY payload before compression, BCP file bytes).
    #[arg(long)]
    source_bytes: u64,
    /// HTTP body bytes sent, measured separately at the sender.
    #[arg(long, default_value_t = 0)]
    http_bytes: u64,
    /// How the attempt ended.
    #[arg(long, value_enum)]
    outcome: Outcome,
    #[command(flatten)]
    store: StoreArgs,
}

/// The phase of a registration key.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum PhaseArg {
    /// A qualification grant.
    Qualification,
    /// An execution grant.
    Execution,
}

/// `campaign status` options.
#[derive(Args)]
pub struct StatusArgs {
    /// The grant UUID.
    #[arg(long)]
    grant_id: String,
    /// The grant's phase.
    #[arg(long, value_enum)]
    phase: PhaseArg,
    /// Reservations to read by id (repeatable).
    #[arg(long)]
    reservation: Vec<String>,
    /// The clock the history is read at (default: the system clock).
    #[arg(long)]
    now: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
}

fn sha256_of(bytes: &[u8]) -> String {
    store::Sha256Digest::of(bytes).as_str().to_owned()
}

/// Runs a protected `campaign` subcommand.
pub fn run_policy(command: PolicyCommand) -> Result<(), Failure> {
    match command {
        PolicyCommand::Register(args) => policy_register(&args),
    }
}

/// Runs `campaign grant …`.
pub fn run_grant(command: GrantCommand) -> Result<(), Failure> {
    match command {
        GrantCommand::Register(args) => grant_register(&args),
    }
}

/// The policy file's bytes and document, checked against its external pin.
fn pinned_policy(
    path: &std::path::Path,
    digest: &str,
) -> Result<(Vec<u8>, AuthorityPolicy), Failure> {
    let bytes = read(path, InputKind::NonproductionDocument)?;
    let policy: AuthorityPolicy = parse("policy", &bytes)?;
    let pin = dpone_engine_nonproduction::fields::Digest::parse("--policy-digest", digest)
        .map_err(|e| np_failure("pin", &e))?;
    if policy.digest() != pin {
        return Err(Failure::refused(
            dpone_engine_nonproduction::codes::REOPEN_POLICY_UNPINNED,
            "policy: the policy is not the pinned policy",
        ));
    }
    Ok((bytes, policy))
}

fn policy_register(args: &PolicyRegisterArgs) -> Result<(), Failure> {
    let (_, policy) = pinned_policy(&args.policy, &args.policy_digest)?;
    let root = dpone_trust::trusted_root::read_trusted_root_file(&args.trusted_root)?;
    if sha256_of(&root) != policy.signer.trusted_root_digest.as_str() {
        return Err(Failure::refused(
            dpone_engine_nonproduction::codes::REOPEN_ROOT_STALE,
            "trusted root: not the root the policy pins",
        ));
    }
    let epoch = args.revocation_epoch.unwrap_or(policy.revocation_epoch);
    if epoch < policy.revocation_epoch {
        return Err(Failure::bad_input(
            "DPONE_CLI_CAMPAIGN_EPOCH_BELOW_POLICY",
            "--revocation-epoch is below the policy's revocation floor",
        ));
    }
    let record = mapping::policy_record(&policy, epoch).map_err(store_failure)?;
    let store = open(&args.store)?;
    let trust = runtime()?
        .block_on(store.record_trust(&record))
        .map_err(store_failure)?;
    print_report(&PolicyRecorded {
        result: "recorded",
        trust: TrustView::of(&trust),
    })
}

/// `campaign enroll`: the platform role records a participant's physical identity, observed
/// live on the connection that reaches it, under the current policy's enrollment (append-only).
/// The participant must be one of the pinned policy's enrolled participants, observed live and
/// reached through a connection of its engine (PostgreSQL: system identifier, database name and
/// OID; SQL Server: the database's id, create token and GUID; ClickHouse: on every member of
/// `--cluster`, its proven replica, server UUID and the UUID of `--database`); the policy must
/// be the store's current trust revision, which the store re-checks in the
/// statement that records it. The same identity again reopens the record; another identity is
/// `DPONE_NP_STORE_ENROLLMENT_CONFLICT`. Nothing names the endpoint or a credential.
pub fn enroll(args: &EnrollArgs) -> Result<(), Failure> {
    use dpone_engine_nonproduction::enrollment::{Enrollment, ParticipantIdentity};
    let (bytes, policy) = pinned_policy(&args.policy, &args.policy_digest)?;
    let Some(participant) = policy
        .enrollment
        .participants
        .iter()
        .find(|p| p.participant_id.as_str() == args.participant)
    else {
        return Err(Failure::refused(
            "DPONE_CLI_CAMPAIGN_ENROLL_PARTICIPANT_UNKNOWN",
            "the participant is not one of the pinned policy's enrolled participants",
        ));
    };
    let observe = match (participant.engine, &args.database, &args.cluster) {
        (Engine::Postgresql | Engine::Sqlserver, None, None) => {
            registry_observation(args, participant.engine)?
        }
        (Engine::Postgresql | Engine::Sqlserver, _, _) => {
            return Err(Failure::bad_input(
                "DPONE_CLI_ARGUMENT",
                "--database and --cluster are for ClickHouse participants; a PostgreSQL or SQL \
                 Server participant's database is its connection's",
            ));
        }
        // A cluster's participant names its cluster; one server's (a `clickhouse_server`
        // connection) names none.
        (Engine::Clickhouse, Some(database), cluster) => {
            let registry = dpone_engine_clickhouse::contracts::manifest::Registry::parse(
                &crate::input::read_text(&args.connections, InputKind::ConnectionRegistry)?,
            )
            .map_err(|e| crate::clickhouse_cmd::registry_failure(&e))?;
            let single_server = cluster.is_none();
            let Some(ch) = registry
                .clickhouse_for(&args.connection, "--connection", single_server)
                .ok()
                .cloned()
            else {
                return Err(Failure::bad_input(
                    "DPONE_CLI_CAMPAIGN_ENROLL_CONNECTION_UNKNOWN",
                    if single_server {
                        "--connection names no clickhouse_server connection of the registry (a cluster's participant is enrolled with --cluster)"
                    } else {
                        "--connection names no clickhouse_cluster connection of the registry"
                    },
                ));
            };
            Observe::Clickhouse {
                connection: ch,
                database: database.clone(),
                cluster: cluster.clone().unwrap_or_default(),
            }
        }
        (Engine::Clickhouse, _, _) => {
            return Err(Failure::bad_input(
                "DPONE_CLI_ARGUMENT",
                "a ClickHouse participant is enrolled with --database (and --cluster for a cluster)",
            ));
        }
    };
    let environment = mapping::environment(&policy).map_err(store_failure)?;
    let enrollment_digest =
        store::Sha256Digest::parse("enrollment_digest", policy.enrollment_digest().as_str())
            .map_err(store_failure)?;
    let store = open(&args.store)?;
    let rt = runtime()?;
    let current = rt
        .block_on(store.current_trust(&environment))
        .map_err(store_failure)?;
    let Some(trust) = current.filter(|t| t.policy_bytes == bytes) else {
        return Err(Failure::refused(
            POLICY_NOT_CURRENT,
            "the pinned policy is not the store's current trust revision (campaign policy register)",
        ));
    };
    // The ClickHouse adapter blocks on a runtime of its own: it is observed outside `rt`.
    let identity: ParticipantIdentity = match observe {
        Observe::Postgresql((endpoint, code)) => {
            rt.block_on(control_store::observe(&endpoint, code))?.into()
        }
        Observe::Clickhouse {
            connection,
            database,
            cluster,
        } => crate::clickhouse_cmd::observe_participant(&connection, &cluster, &database)?.into(),
        Observe::Sqlserver {
            endpoint,
            database,
            trust_server_certificate,
        } => rt
            .block_on(control_store::observe_sqlserver(
                &endpoint,
                &database,
                trust_server_certificate,
            ))?
            .into(),
    };
    let record = Enrollment {
        participant_id: args.participant.clone(),
        identity_digest: identity.digest(),
        identity,
    };
    let enrolled = rt
        .block_on(store.enroll(&environment, &enrollment_digest, trust.revision, &record))
        .map_err(store_failure)?;
    let (engine, identity) = match &record.identity {
        ParticipantIdentity::Postgresql(i) => (
            "postgresql",
            IdentityView::Postgresql {
                schema: record.identity.schema(),
                system_identifier: i.system_identifier.clone(),
                database_name: i.database_name.clone(),
                database_oid: i.database_oid,
            },
        ),
        ParticipantIdentity::Clickhouse(i) => (
            "clickhouse",
            IdentityView::Clickhouse {
                schema: record.identity.schema(),
                database_name: i.database_name.clone(),
                members: i.members.clone(),
            },
        ),
        ParticipantIdentity::Sqlserver(i) => (
            "sqlserver",
            IdentityView::Sqlserver {
                schema: record.identity.schema(),
                database_name: i.database_name.clone(),
                database_id: i.database_id,
                create_token: i.create_token.clone(),
                database_guid: i.database_guid.clone(),
            },
        ),
    };
    print_report(&Enrolled {
        result: match enrolled {
            store::Enrolled::Recorded => "enrolled",
            store::Enrolled::Reopened => "reopened",
        },
        environment_id: environment.as_str().to_owned(),
        enrollment_digest: enrollment_digest.as_str().to_owned(),
        trust_revision: trust.revision,
        participant_id: record.participant_id,
        engine,
        identity,
        identity_digest: record.identity_digest.as_str().to_owned(),
        append_only: true,
    })
}

/// How `campaign enroll` observes its participant.
enum Observe {
    /// On the PostgreSQL endpoint, with the connect failure's code.
    Postgresql(
        (
            dpone_engine_xmin::registry::Endpoint,
            dpone_engine_xmin::ErrorCode,
        ),
    ),
    /// On a session of the SQL Server endpoint, its database.
    Sqlserver {
        endpoint: dpone_engine_xmin::registry::Endpoint,
        database: String,
        trust_server_certificate: bool,
    },
    /// On every member of the cluster `connection` reaches.
    Clickhouse {
        connection: dpone_engine_clickhouse::contracts::manifest::ClickHouseConnection,
        database: String,
        cluster: String,
    },
}

/// Where `--connection` of the registry observes a PostgreSQL (`engine` `postgresql`) or SQL
/// Server participant: a connection of that engine, else
/// `DPONE_CLI_CAMPAIGN_ENROLL_CONNECTION_UNKNOWN`.
fn registry_observation(args: &EnrollArgs, engine: Engine) -> Result<Observe, Failure> {
    use dpone_engine_xmin::registry::ConnectionKind;
    let text = crate::input::read_text(&args.connections, InputKind::ConnectionRegistry)?;
    let unknown = || {
        Failure::bad_input(
            "DPONE_CLI_CAMPAIGN_ENROLL_CONNECTION_UNKNOWN",
            match engine {
                Engine::Sqlserver => "--connection names no SQL Server connection of the registry",
                _ => "--connection names no PostgreSQL connection of the registry",
            },
        )
    };
    // A registry of either route: the XMin route's, or the ClickHouse route's, whose
    // `postgres_source` connections are the PostgreSQL participants its runs read.
    let registry = match dpone_engine_xmin::Registry::from_yaml(&text) {
        Ok(r) => r,
        Err(xmin) => {
            let Ok(r) = dpone_engine_clickhouse::contracts::manifest::Registry::parse(&text) else {
                return Err(Failure::from(xmin));
            };
            if engine != Engine::Postgresql {
                return Err(unknown());
            }
            let pg = r
                .postgres(&args.connection, "--connection")
                .map_err(|_| unknown())?;
            return Ok(Observe::Postgresql((
                crate::clickhouse_cmd::source_endpoint(pg)?,
                dpone_engine_xmin::ErrorCode::SourceConnect,
            )));
        }
    };
    let connection = registry
        .connections
        .get(&args.connection)
        .ok_or_else(unknown)?;
    let endpoint = || {
        connection
            .endpoint(&dpone_engine_xmin::ProcessEnvironment)
            .map_err(Failure::from)
    };
    match (engine, connection.kind) {
        (Engine::Postgresql, ConnectionKind::PostgresSource) => Ok(Observe::Postgresql((
            endpoint()?,
            dpone_engine_xmin::ErrorCode::SourceConnect,
        ))),
        (Engine::Postgresql, ConnectionKind::PostgresTarget) => Ok(Observe::Postgresql((
            endpoint()?,
            dpone_engine_xmin::ErrorCode::TargetConnect,
        ))),
        (Engine::Sqlserver, ConnectionKind::MssqlTarget) => {
            let endpoint = endpoint()?;
            Ok(Observe::Sqlserver {
                database: endpoint.spec.database.clone(),
                endpoint,
                trust_server_certificate: connection.trust_server_certificate,
            })
        }
        _ => Err(unknown()),
    }
}

/// Everything read and parsed for an authentication, before the store is touched.
struct Prepared {
    policy_bytes: Vec<u8>,
    grant_bytes: Vec<u8>,
    attestation: Vec<u8>,
    trusted_root: Vec<u8>,
    composition_bytes: Vec<u8>,
    request_bytes: Option<Vec<u8>>,
    release_set: Option<Vec<u8>>,
    policy: AuthorityPolicy,
    grant: Authority,
    composition: Composition,
    request: Option<ActivationRequest>,
    now: u64,
}

fn prepare(args: &GrantArgs) -> Result<Prepared, Failure> {
    // A protected command reads the system clock; it takes no caller-supplied time (the store
    // checks the grant's window against the database clock as well).
    let now = now(None)?;
    let crate::campaign::GrantFiles {
        policy: policy_bytes,
        grant: grant_bytes,
        attestation,
        trusted_root,
        composition: composition_bytes,
        request: request_bytes,
        release_set,
    } = args.files.read()?;
    let policy = parse("policy", &policy_bytes)?;
    let grant = parse("document", &grant_bytes)?;
    let composition = parse("composition", &composition_bytes)?;
    let request = request_bytes
        .as_deref()
        .map(|b| parse("activation request", b))
        .transpose()?;
    Ok(Prepared {
        policy_bytes,
        grant_bytes,
        attestation,
        trusted_root,
        composition_bytes,
        request_bytes,
        release_set,
        policy,
        grant,
        composition,
        request,
        now,
    })
}

/// The grant's verification under a trust revision, exactly as `campaign verify` does it: the
/// pinned policy must be the revision's exact bytes, then signature, reopen and the stateless
/// scope decision, with the revision's revocation epoch. A refusal keeps its own code.
struct GrantVerifier<'a> {
    p: &'a Prepared,
    args: &'a GrantArgs,
    scope: &'a LoadedPolicy,
    workload: Option<&'a str>,
}

impl Verifier for GrantVerifier<'_> {
    type Evidence = pipeline::Verified;
    type Refusal = Refusal;

    fn verify(&self, trust: &store::TrustRevision) -> Result<pipeline::Verified, Refusal> {
        let p = self.p;
        if trust.policy_bytes != p.policy_bytes {
            return Err(Refusal {
                code: POLICY_NOT_CURRENT.to_owned(),
                message: "the pinned policy is not the store's current trust revision \
                          (campaign policy register)"
                    .to_owned(),
                class: pipeline::Class::Refused,
                evidence: None,
            });
        }
        let inputs = pipeline::Inputs {
            policy: &p.policy_bytes,
            policy_digest: &self.args.files.policy_digest,
            grant: &p.grant_bytes,
            attestation: &p.attestation,
            trusted_root: &p.trusted_root,
            composition: &p.composition_bytes,
            request: p.request_bytes.as_deref(),
            release_set: p.release_set.as_deref(),
            workload: self.workload,
            now: p.now,
            revocation_epoch: u64::try_from(trust.revocation_epoch).ok(),
        };
        pipeline::verify_grant(&inputs, self.scope)
    }
}

/// The pinned scope component as the engine's decision port; its identity for group
/// admission is the component's digest.
struct ComponentDecider<'a> {
    scope: &'a LoadedPolicy,
    identity: String,
}

impl<'a> ComponentDecider<'a> {
    fn new(scope: &'a LoadedPolicy) -> Self {
        Self {
            scope,
            identity: format!("scope.{}", scope.digest()),
        }
    }
}

impl ScopeDecider for ComponentDecider<'_> {
    type Evidence = DecisionEvidence;
    type Failure = Failure;

    fn identity(&self) -> &str {
        &self.identity
    }

    fn decide(&self, facts: &ScopeFacts) -> Result<(ScopeDecision, DecisionEvidence), Failure> {
        // Called inside the admission transaction, once per try: each decision is a `decide`
        // span of its own under the engine's `admit` phase span.
        let decided = crate::telemetry::decide(PolicyKind::Scope, "decide", || {
            self.scope.scope_decide(facts)
        })?;
        Ok((decided.decision, decided.evidence))
    }
}

/// The command a verification ran for: its refusal's evidence is summarised as that command's.
#[derive(Clone, Copy)]
enum VerifiedFor {
    /// `grant register`.
    Register,
    /// `admit`.
    Admit,
}

/// A refused verification: its evidence (a stateless scope denial's) is printed, its code kept.
fn verification_refused(mut refusal: Refusal, command: VerifiedFor) -> Failure {
    if let Some(evidence) = refusal.evidence.take() {
        let printed = match command {
            VerifiedFor::Register => print_report(&RegisterRefused(&evidence)),
            VerifiedFor::Admit => print_report(&AdmitVerificationRefused(&evidence)),
        };
        if let Err(f) = printed {
            return f;
        }
    }
    failure(refusal)
}

/// Authenticates inside the store's revision bracket with [`GrantVerifier`]
/// ([`admission::authenticate`]).
fn authenticate(
    rt: &tokio::runtime::Runtime,
    store: &PgControlStore,
    verifier: &GrantVerifier<'_>,
) -> Result<(store::Authenticated, pipeline::Verified), Failure> {
    let environment = mapping::environment(&verifier.p.policy).map_err(store_failure)?;
    match rt.block_on(admission::authenticate(store, &environment, verifier)) {
        Ok((auth, evidence, _)) => Ok((auth, evidence)),
        Err(Bracket::Refused(refusal)) => Err(verification_refused(refusal, VerifiedFor::Register)),
        Err(Bracket::Store(e)) => Err(store_failure(e)),
    }
}

fn grant_register(args: &GrantArgs) -> Result<(), Failure> {
    let p = prepare(args)?;
    // Validate every value before anything is written.
    let registration =
        mapping::registration(&p.grant, &p.grant_bytes, &p.composition).map_err(store_failure)?;
    let selection = match (&p.grant.phase_subjects, &p.request) {
        (PhaseSubjects::Execution(_), Some(r)) => {
            Some(mapping::activation_request(r).map_err(store_failure)?)
        }
        _ => None,
    };
    let runtime = shipped::runtime(args.cache_dir.as_deref())?;
    let scope = shipped::load(&runtime, args.components_dir.as_deref(), PolicyKind::Scope)?;
    let store = open(&args.store)?;
    let rt = control_store::runtime()?;
    let verifier = GrantVerifier {
        p: &p,
        args,
        scope: &scope,
        workload: None,
    };
    let (auth, evidence) = authenticate(&rt, &store, &verifier)?;
    let key = registration.key();
    let registered = rt
        .block_on(store.register(&auth, &registration))
        .map_err(store_failure)?;
    let mut protected = Protected::default();
    match &selection {
        Some(request) => {
            let selected = rt
                .block_on(store.select_activation_request(&auth, &key, &p.grant_bytes, request))
                .map_err(store_failure)?;
            protected.activation_request = Some(ActivationSelection {
                activation_id: request.activation_id.as_str().to_owned(),
                request_digest: sha256_of(&request.request_bytes),
                selection: match selected {
                    Selected::Selected => "selected",
                    Selected::Reopened => "reopened",
                },
            });
        }
        None if key.phase == store::Phase::Qualification => {
            rt.block_on(store.consume_qualification(&auth, &key, &p.grant_bytes))
                .map_err(store_failure)?;
            protected.qualification_run = Some("consumed");
        }
        None => {}
    }
    let (outcome, charged, permit) = match registered {
        Registered::New {
            membership_charged,
            executor_permit,
        } => ("registered", membership_charged, executor_permit),
        Registered::Reopened => ("reopened_as_history", 0, false),
    };
    print_report(&GrantRegistered {
        result: outcome,
        grant_id: key.grant_id.as_str().to_owned(),
        phase: key.phase.as_str(),
        grant_digest: sha256_of(&p.grant_bytes),
        trust_revision: auth.revision(),
        membership_charged: charged,
        executor_permit: permit,
        protected,
        verification: evidence,
    })
}

/// `campaign admit`: the engine's protected admission ([`admission::admit`]) over the store
/// adapter, the grant's verification and the pinned scope component, which decides inside the
/// transaction that commits the reservation.
pub fn admit(args: &AdmitArgs) -> Result<(), Failure> {
    let p = prepare(&args.grant)?;
    let inputs = AdmitInputs {
        policy: &p.policy,
        grant: &p.grant,
        grant_bytes: &p.grant_bytes,
        composition: &p.composition,
        request: p.request.as_ref(),
        workload: &args.workload,
        attempt: &args.attempt,
        source_rows: args.source_rows,
        source_bytes: args.source_bytes,
        attempt_seconds: args.attempt_seconds,
        now: p.now,
    };
    // Every value is validated before a component is loaded or the store contacted.
    admission::admission_request(&inputs).map_err(store_failure)?;
    let pool_key = mapping::pool_key(&p.grant).map_err(store_failure)?;
    let runtime = shipped::runtime(args.grant.cache_dir.as_deref())?;
    let scope = shipped::load(
        &runtime,
        args.grant.components_dir.as_deref(),
        PolicyKind::Scope,
    )?;
    let store = open(&args.grant.store)?;
    let verifier = GrantVerifier {
        p: &p,
        args: &args.grant,
        scope: &scope,
        workload: Some(&args.workload),
    };
    let decider = ComponentDecider::new(&scope);
    let outcome =
        control_store::runtime()?.block_on(admission::admit(&store, &verifier, &decider, &inputs));
    let component = pipeline::ComponentRef::scope(&scope);
    match outcome {
        Ok(Admitted::Reserved {
            reservation,
            trust_revision,
            verification,
            effective_limits,
            decision,
        }) => print_report(&report::Admitted {
            result: "admitted",
            reservation: ReservationView::of(&reservation),
            evidence: AdmissionEvidence {
                authentication: Authentication {
                    bracket: report::BRACKET,
                    trust_revision,
                    verification,
                },
                scope: AdmittedScope {
                    component,
                    decision: "admit",
                    decided_in: report::ADMITTED_IN,
                    effective_limits,
                    pool_before: PoolView::of(&pool_key, &decision.pool_before),
                    evidence: decision.evidence,
                },
                transaction: report::TRANSACTION,
            },
        }),
        Ok(Admitted::Denied {
            reason, decision, ..
        }) => {
            print_report(&AdmitDenied {
                result: "refused",
                workload_id: args.workload.clone(),
                decision: "deny",
                code: reason.code.clone(),
                decided_in: report::DENIED_IN,
                component,
                pool: PoolView::of(&pool_key, &decision.pool_before),
                evidence: decision.evidence,
            })?;
            Err(Failure {
                code: reason.code.clone(),
                message: format!(
                    "the scope component denied the attempt's reservation: {}",
                    reason.message
                ),
                exit: REFUSED,
            })
        }
        Err(AdmitError::Verification(refusal)) => {
            Err(verification_refused(refusal, VerifiedFor::Admit))
        }
        Err(AdmitError::Facts(e)) => Err(np_failure("scope facts", &e)),
        Err(AdmitError::Decider(f)) => Err(f),
        Err(AdmitError::Store(e)) => Err(store_failure(e)),
    }
}

/// `campaign settle`.
pub fn settle(args: &SettleArgs) -> Result<(), Failure> {
    let id =
        store::Sha256Digest::parse("--reservation", &args.reservation).map_err(store_failure)?;
    let int = |field: &str, v: u64| {
        i64::try_from(v).map_err(|_| {
            store_failure(StoreError::new(
                StoreCode::InvalidInput,
                format!("{field} is out of range"),
            ))
        })
    };
    let settlement = store::Settlement {
        reservation_id: id,
        measured_source_rows: int("--source-rows", args.source_rows)?,
        measured_source_bytes: int("--source-bytes", args.source_bytes)?,
        measured_http_bytes: int("--http-bytes", args.http_bytes)?,
        outcome: match args.outcome {
            Outcome::Succeeded => AttemptOutcome::Succeeded,
            Outcome::Failed => AttemptOutcome::Failed,
            Outcome::Incomplete => AttemptOutcome::Incomplete,
        },
    };
    let store = open(&args.store)?;
    let settled = runtime()?
        .block_on(
            store
                .settle(&settlement)
                .instrument(dpone_engine_nonproduction::phase_span("settle")),
        )
        .map_err(store_failure)?;
    print_report(&SettleRecorded {
        result: match settled {
            Settled::Recorded => "recorded",
            Settled::Reopened => "reopened",
        },
        reservation_id: settlement.reservation_id.as_str().to_owned(),
        measured_source_rows: settlement.measured_source_rows,
        measured_source_bytes: settlement.measured_source_bytes,
        measured_http_bytes: settlement.measured_http_bytes,
        outcome: settlement.outcome.as_str(),
        reservation_freed: false,
    })
}

/// `campaign status`.
pub fn status(args: &StatusArgs) -> Result<(), Failure> {
    let now = i64::try_from(now(args.now.as_deref())?).unwrap_or(i64::MAX);
    let key = store::GrantKey {
        grant_id: store::Uuid::parse("--grant-id", &args.grant_id).map_err(store_failure)?,
        phase: match args.phase {
            PhaseArg::Qualification => store::Phase::Qualification,
            PhaseArg::Execution => store::Phase::Execution,
        },
    };
    let ids = args
        .reservation
        .iter()
        .map(|r| store::Sha256Digest::parse("--reservation", r))
        .collect::<Result<Vec<_>, _>>()
        .map_err(store_failure)?;
    let store = open(&args.store)?;
    let rt = runtime()?;
    let Some(history) = rt.block_on(store.history(&key)).map_err(store_failure)? else {
        return Err(store_failure(StoreError::new(
            StoreCode::GrantNotRegistered,
            "the grant/phase key is not registered",
        )));
    };
    // The original bytes were verified when they were registered; read them again for the
    // pool key (the store's own values, never trusted for a new admission).
    let grant: Authority = Authority::parse(&history.original_bytes).map_err(|_| {
        store_failure(StoreError::new(
            StoreCode::StoredStateInvalid,
            "the registered original does not parse as a grant",
        ))
    })?;
    let pool_key = mapping::pool_key(&grant).map_err(store_failure)?;
    let pool = rt
        .block_on(store.pool_status(&pool_key))
        .map_err(store_failure)?;
    let current = rt
        .block_on(store.current_trust(&history.trust.environment))
        .map_err(store_failure)?;
    let mut probed = Vec::with_capacity(ids.len());
    for id in &ids {
        let found = rt.block_on(store.probe(id)).map_err(store_failure)?;
        probed.push(match found {
            Some(r) => Probed::Found(ReservationView::of(&r)),
            None => Probed::Missing {
                reservation_id: id.as_str().to_owned(),
                found: false,
            },
        });
    }
    let listed = rt
        .block_on(store.reservations(&pool_key, store::MAX_LISTED_RESERVATIONS))
        .map_err(store_failure)?;
    let reservations = listed.iter().map(ListedView::of).collect();
    let revoked = current
        .as_ref()
        .is_some_and(|t| history.revocation_epoch < t.revocation_epoch);
    let expired = now >= history.not_after_unix;
    print_report(&Status {
        result: "history",
        registration: RegistrationView::of(&history),
        current_trust: current.as_ref().map(TrustView::of),
        current_authority: AuthorityView::of(expired, revoked),
        pool: PoolView::of(&pool_key, &pool),
        reservations,
        probed,
    })
}
