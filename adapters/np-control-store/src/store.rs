//! The PostgreSQL implementation of [`ControlStorePort`].
//!
//! Every protected operation is one SERIALIZABLE transaction. Before `BEGIN` the connection
//! takes a session advisory lock on the environment (every operation but recording a
//! documentary candidate), so contenders queue instead of failing serialization en masse (and
//! the snapshot is taken after the lock, so it sees the previous holder's commit); correctness
//! rests on SERIALIZABLE alone, the lock only reduces retries. (Measured with the race test:
//! without the lock its attempt round still admitted exactly the ceiling, but 64 clients then
//! exhausted their retries; under READ COMMITTED without the lock it admitted 25 attempts
//! against a ceiling of 10.)
//! Serialization failures (`40001`, `40P01`) and unique violations (`23505`, re-read and
//! classified on retry) retry up to a bound; then
//! `DPONE_NP_STORE_SERIALIZATION_RETRIES_EXHAUSTED`.
//!
//! Admissions go through the admission queue instead (group admission, `queued`): its holder
//! decides every waiting request in one such transaction. A settlement takes neither: its
//! checks read only what is immutable once written (the reservation's bounds), and the
//! settlement's primary key decides between two settlements of one reservation, so it is one
//! read and one autocommit insert (`ON CONFLICT DO NOTHING`, then the recorded one compared);
//! its backstop trigger re-checks the bounds. An admission's SERIALIZABLE snapshot sees a
//! committed settlement whole or not at all, and one that returned before the admission was
//! queued always: each answer is one-at-a-time admission's with the settlement before or
//! after it. The insert runs at the session's default isolation: READ COMMITTED, unless an
//! operator made it stricter, so it takes no part in the admissions' conflict tracking and
//! never aborts a batch (under a stricter default, a serialization failure retries it).
//!
//! COMMIT goes through a [`CommitBoundary`]. When its acknowledgement is lost (the connection
//! closed after COMMIT was sent), a queued admission is resolved by its request:
//! a fresh connection terminates the original backend and waits until it has ended, so its
//! transaction is final, then reads the request's outcome. Found: that is the answer (an
//! admission marked `resolved_by_probe`); absent: the transaction did not commit and the request
//! is decided again (a reservation keeps its deterministic id, so it is charged once); the probe
//! itself failing: `DPONE_NP_STORE_OUTCOME_UNKNOWN`. Other operations report
//! `DPONE_NP_STORE_OUTCOME_UNKNOWN` after a lost acknowledgement (a settlement's too: settling
//! again is safe).
//!
//! The reviewed DDL is verified on the store's first connection (and on demand with
//! `verify_catalog`): a store over a missing or deviating catalog refuses every operation with
//! `DPONE_NP_STORE_CATALOG_INVALID` and creates nothing. So is the session's role: one that
//! could change the store around the protocol (a superuser, an owner's member, a holder of
//! `UPDATE`, `DELETE`, `TRUNCATE`, `TRIGGER`, `REFERENCES` or `CREATE`: the database backstop
//! holds only against roles that cannot disable it) is refused with
//! `DPONE_NP_STORE_SESSION_PRIVILEGED`, unless the endpoint accepts it
//! ([`StoreEndpoint::accept_privileged_session`], a single-user development store).
//!
//! Errors carry a code and the SQLSTATE or a classified TLS reason only (no endpoint, no
//! credential, no value).

use crate::catalog::{
    BACKSTOP, BackstopConfigs, CONTRACT, TableFacts, verify_backstop, verify_table,
};
use crate::port::*;

mod queued;
use dpone_engine_nonproduction::enrollment::{
    CLICKHOUSE_IDENTITY_SCHEMA, ClickhouseIdentity, ConnectionRole, Enrollment,
    ParticipantIdentity, PhysicalIdentity, RunParticipant, SQLSERVER_IDENTITY_SCHEMA,
    SqlserverIdentity,
};
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::Mutex as StdMutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::task::JoinHandle;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Row, Statement};

/// Where the store connects: the driver config (credentials stay in it), the TLS mode and the
/// pinned CA bundle, and the schema the reviewed DDL was provisioned in.
#[derive(Clone)]
pub struct StoreEndpoint {
    /// The driver configuration.
    pub config: Config,
    /// TLS per `sslmode`.
    pub tls: dpone_pg_tls::Mode,
    /// The pinned CA bundle (`sslrootcert`), if any.
    pub root_cert: Option<String>,
    /// The schema of the reviewed DDL (`[a-z_][a-z0-9_]{0,62}`).
    pub schema: String,
    /// Accept a session whose role could change the store around the protocol (see
    /// [`SESSION_PRIVILEGES_SQL`]): a single-user development store only. `false` (what a
    /// deployment uses) refuses such a session with `DPONE_NP_STORE_SESSION_PRIVILEGED`.
    pub accept_privileged_session: bool,
}

/// What the session's role could do to the store beyond reading it and inserting rows the
/// `np_backstop` triggers check: be a superuser; be a member (`MEMBER`: may `SET ROLE` to it) of
/// the role owning the schema, a table or a function of it (an owner can disable a trigger,
/// replace its function or drop the table); hold `UPDATE`, `DELETE`, `TRUNCATE`, `TRIGGER` or
/// `REFERENCES` on a table (`UPDATE` and `REFERENCES` on any column); hold `CREATE` on the
/// schema. `$1` is the schema. One row: superuser, owns the schema, may create in it, the owned
/// tables, the owned functions, and `table privilege` pairs held.
pub const SESSION_PRIVILEGES_SQL: &str = "\
WITH s AS (SELECT n.oid, n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = $1), \
     t AS (SELECT c.oid, c.relname::text AS name, c.relowner FROM pg_catalog.pg_class c, s \
           WHERE c.relnamespace = s.oid AND c.relkind IN ('r', 'p')) \
SELECT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), true), \
       coalesce((SELECT pg_catalog.pg_has_role(current_user, s.nspowner, 'MEMBER') FROM s), false), \
       coalesce((SELECT pg_catalog.has_schema_privilege(current_user, s.oid, 'CREATE') FROM s), false), \
       ARRAY(SELECT t.name FROM t WHERE pg_catalog.pg_has_role(current_user, t.relowner, 'MEMBER') \
             ORDER BY 1), \
       ARRAY(SELECT DISTINCT p.proname::text FROM pg_catalog.pg_proc p, s \
             WHERE p.pronamespace = s.oid AND pg_catalog.pg_has_role(current_user, p.proowner, 'MEMBER') \
             ORDER BY 1), \
       ARRAY(SELECT t.name || ' ' || v.privilege FROM t, \
             (VALUES ('UPDATE'), ('DELETE'), ('TRUNCATE'), ('TRIGGER'), ('REFERENCES')) v(privilege) \
             WHERE CASE WHEN v.privilege IN ('UPDATE', 'REFERENCES') \
                        THEN pg_catalog.has_any_column_privilege(current_user, t.oid, v.privilege) \
                        ELSE pg_catalog.has_table_privilege(current_user, t.oid, v.privilege) END \
             ORDER BY 1)";

/// What [`SESSION_PRIVILEGES_SQL`] found, as the refusal's message: what the role could do,
/// naming tables, functions and privileges only (never the role). `None`: least privilege.
fn privileged_session(
    superuser: bool,
    owns_schema: bool,
    creates: bool,
    owned_tables: &[String],
    owned_functions: &[String],
    held: &[String],
) -> Option<String> {
    let mut found = Vec::new();
    if superuser {
        found.push("it is a superuser".to_owned());
    }
    if owns_schema {
        found.push("it is a member of the schema's owner".to_owned());
    }
    if creates {
        found.push("it holds CREATE on the schema".to_owned());
    }
    if !owned_tables.is_empty() {
        found.push(format!(
            "it is a member of the owner of {}",
            owned_tables.join(", ")
        ));
    }
    if !owned_functions.is_empty() {
        found.push(format!(
            "it is a member of the owner of the functions {}",
            owned_functions.join(", ")
        ));
    }
    if !held.is_empty() {
        found.push(format!("it holds {}", held.join(", ")));
    }
    (!found.is_empty()).then(|| {
        format!(
            "the store session's role could change the store around the protocol ({}): log in \
             as a member of one runtime role of control-store-roles.sql",
            found.join("; ")
        )
    })
}

/// What the server said to COMMIT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitAck {
    /// Committed.
    Acknowledged,
    /// Refused with a SQLSTATE (the transaction rolled back).
    Refused(String),
    /// No acknowledgement: the outcome is unknown.
    Lost,
}

/// The commit boundary: sends COMMIT and reports the acknowledgement. Tests wrap it to lose the
/// acknowledgement after COMMIT was sent.
pub trait CommitBoundary: Send + Sync {
    /// Sends COMMIT on `client`.
    fn commit<'a>(
        &'a self,
        client: &'a Client,
    ) -> Pin<Box<dyn Future<Output = CommitAck> + Send + 'a>>;
}

/// The real boundary.
#[derive(Clone, Copy, Debug, Default)]
pub struct HonestCommit;

impl CommitBoundary for HonestCommit {
    fn commit<'a>(
        &'a self,
        client: &'a Client,
    ) -> Pin<Box<dyn Future<Output = CommitAck> + Send + 'a>> {
        Box::pin(async move {
            match client.batch_execute("COMMIT").await {
                Ok(()) => CommitAck::Acknowledged,
                Err(e) => match e.code() {
                    Some(state) => CommitAck::Refused(state.code().to_owned()),
                    None => CommitAck::Lost,
                },
            }
        })
    }
}

struct Conn {
    client: Client,
    /// Statements prepared on this connection, by SQL text.
    cache: StdMutex<HashMap<String, Statement>>,
    task: JoinHandle<()>,
    pid: i32,
    backend_start: String,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A connection's client with the statements prepared on it: each SQL text is prepared once
/// per connection, so a protected transaction costs one round trip per statement.
struct Db<'a> {
    client: &'a Client,
    cache: &'a StdMutex<HashMap<String, Statement>>,
}

type Params<'p> = &'p [&'p (dyn ToSql + Sync)];
type PgResult<T> = std::result::Result<T, tokio_postgres::Error>;

impl Db<'_> {
    async fn statement(&self, sql: &str) -> PgResult<Statement> {
        let cached = self.cache.lock().ok().and_then(|m| m.get(sql).cloned());
        if let Some(s) = cached {
            return Ok(s);
        }
        let s = self.client.prepare(sql).await?;
        if let Ok(mut m) = self.cache.lock() {
            m.insert(sql.to_owned(), s.clone());
        }
        Ok(s)
    }

    async fn query_one(&self, sql: &str, p: Params<'_>) -> PgResult<Row> {
        let s = self.statement(sql).await?;
        self.client.query_one(&s, p).await
    }

    async fn query_opt(&self, sql: &str, p: Params<'_>) -> PgResult<Option<Row>> {
        let s = self.statement(sql).await?;
        self.client.query_opt(&s, p).await
    }

    async fn query(&self, sql: &str, p: Params<'_>) -> PgResult<Vec<Row>> {
        let s = self.statement(sql).await?;
        self.client.query(&s, p).await
    }

    async fn execute(&self, sql: &str, p: Params<'_>) -> PgResult<u64> {
        let s = self.statement(sql).await?;
        self.client.execute(&s, p).await
    }
}

/// Table names, quoted with the schema.
struct Names {
    trust: String,
    registration: String,
    workload: String,
    membership: String,
    consumption: String,
    candidate: String,
    selection: String,
    reservation: String,
    settlement: String,
    run_claim: String,
    enrollment: String,
    run_participant: String,
    identity: String,
    request: String,
    outcome: String,
}

/// The PostgreSQL control store: one connection, reopened when lost.
pub struct PgControlStore {
    endpoint: StoreEndpoint,
    t: Names,
    conn: Mutex<Option<Conn>>,
    commit: Arc<dyn CommitBoundary>,
    max_retries: u32,
    /// Whether the reviewed DDL was verified (on the first connection; again on demand).
    verified: AtomicBool,
}

enum TxError {
    Refuse(StoreError),
    Db(tokio_postgres::Error),
}

impl From<tokio_postgres::Error> for TxError {
    fn from(e: tokio_postgres::Error) -> Self {
        Self::Db(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        Self::Refuse(e)
    }
}

type Tx<T> = std::result::Result<T, TxError>;

fn refuse<T>(code: StoreCode, message: &str) -> Tx<T> {
    Err(TxError::Refuse(StoreError::new(code, message)))
}

/// The refusals of the database backstop (`control-store.sql`'s `np_backstop` triggers, SQLSTATE
/// class `NP`) as the store's own codes: the client checks the same rules first, so seeing one
/// means a client and the database disagree, never a normal refusal.
pub fn backstop_code(state: &str) -> Option<StoreCode> {
    Some(match state {
        "NP001" => StoreCode::GrantNotRegistered,
        "NP002" => StoreCode::TrustRevisionChanged,
        "NP003" => StoreCode::GrantRevoked,
        "NP004" => StoreCode::GrantExpired,
        "NP005" => StoreCode::GrantNotYetValid,
        "NP006" => StoreCode::QualificationNotConsumed,
        "NP007" => StoreCode::ActivationNotSelected,
        "NP008" => StoreCode::WorkloadNotInGrant,
        "NP009" => StoreCode::AttemptRunning,
        "NP010" => StoreCode::AttemptSecondsExceeded,
        "NP011" => StoreCode::MembershipExceeded,
        "NP012" => StoreCode::AttemptsExceeded,
        "NP013" => StoreCode::SourceRowsExceeded,
        "NP014" => StoreCode::SourceBytesExceeded,
        "NP015" => StoreCode::SettleExceedsReservation,
        "NP016" => StoreCode::Unavailable,
        "NP017" => StoreCode::InvalidInput,
        _ => return None,
    })
}

fn db_error(step: &str, e: &tokio_postgres::Error) -> StoreError {
    if let Some(code) = e.code().and_then(|s| backstop_code(s.code())) {
        return StoreError::new(
            code,
            format!(
                "{step}: the database backstop refused (SQLSTATE {})",
                e.code().map_or("", |s| s.code())
            ),
        );
    }
    let how = match e.code() {
        Some(s) => format!("SQLSTATE {}", s.code()),
        None if e.is_closed() => "connection closed".to_owned(),
        None => match dpone_pg_tls::failure(e) {
            Some(why) => format!("TLS: {why}"),
            None => "no SQLSTATE".to_owned(),
        },
    };
    StoreError::new(StoreCode::Unavailable, format!("{step} failed ({how})"))
}

/// The pause before try `attempt` of a retried operation (none before the first; one more
/// millisecond per try, at most 20).
async fn retry_pause(attempt: u32) {
    if attempt > 0 {
        tokio::time::sleep(Duration::from_millis(u64::from(attempt.min(20)))).await;
    }
}

fn retryable(state: &str) -> bool {
    matches!(state, "40001" | "40P01" | "23505")
}

enum Op<'r> {
    Trust(&'r PolicyRecord),
    Register(&'r Authenticated, &'r GrantRegistration),
    Consume(&'r Authenticated, &'r GrantKey, &'r [u8]),
    Candidate(&'r ActivationRequest),
    Select(
        &'r Authenticated,
        &'r GrantKey,
        &'r [u8],
        &'r ActivationRequest,
    ),
    /// An admission, queued with its facts and decided by the environment lock's holder
    /// (`queued`), with a decider for the queued requests of the same identity.
    Admit(
        &'r Authenticated,
        &'r AdmissionRequest,
        &'r [u8],
        &'r dyn PoolDecider,
    ),
}

enum Out {
    Trust(TrustRevision),
    /// An admission the decision denied on the pool it read (nothing written).
    Denied(PoolStatus),
    Registered(Registered),
    Unit,
    New(bool),
    Selected(Selected),
    /// An admitted reservation and the pool it was decided on.
    Reservation(Reservation, PoolStatus),
}

/// A write a transaction's body decided on and left for the commit flight: a statement
/// prepared on this connection (so sending it is one message, queued before COMMIT) and its
/// parameters.
struct DeferredWrite {
    statement: Statement,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
}

/// A registration as stored, with the clock checks done by the database.
struct StoredGrant {
    environment: String,
    campaign: String,
    phase: Phase,
    digest: String,
    bytes: Vec<u8>,
    revocation_epoch: i64,
    limits: Limits,
    run_id: Option<String>,
    route: Option<Vec<String>>,
    activation_id: Option<String>,
    expired: bool,
    not_yet_valid: bool,
}

const LIMIT_COLUMNS: &str =
    "max_workloads, max_attempts, max_source_rows, max_source_bytes, max_attempt_seconds";

fn limits_at(row: &Row, first: usize) -> Limits {
    Limits {
        workloads: row.get(first),
        attempts: row.get(first + 1),
        source_rows: row.get(first + 2),
        source_bytes: row.get(first + 3),
        attempt_seconds: row.get(first + 4),
    }
}

/// A pool's key as SQL: `$1` environment, `$2` campaign, `$3` phase.
const POOL: &str =
    "environment_id = $1::text::uuid AND campaign_id = $2::text::uuid AND phase = $3";

/// A statement whose first eight columns are a [`PoolStatus`] (`$4` is the route of the
/// row/byte pool: a qualification's exact route, `NULL` for execution), read by [`pool_at`],
/// followed by the select-list items `more` (each a leading `, …`; they may use the pool's
/// parameters). The pool's reservations and their settlements are read in one pass (one index
/// range of the reservations, each settlement by its key) and aggregated with filters.
fn pool_select(t: &Names, more: &str) -> String {
    let route = "route IS NOT DISTINCT FROM $4::text[]";
    format!(
        "SELECT (SELECT count(*) FROM {m} WHERE {p}), \
         a.attempts, a.reserved_rows, a.reserved_bytes, a.unresolved, \
         a.measured_rows, a.measured_bytes, a.measured_http{more} \
         FROM (SELECT count(*) AS attempts, \
           coalesce(sum(x.reserved_source_rows) FILTER (WHERE {route}), 0)::bigint \
             AS reserved_rows, \
           coalesce(sum(x.reserved_source_bytes) FILTER (WHERE {route}), 0)::bigint \
             AS reserved_bytes, \
           count(*) FILTER (WHERE s.reservation_id IS NULL) AS unresolved, \
           coalesce(sum(s.measured_source_rows) FILTER (WHERE {route}), 0)::bigint \
             AS measured_rows, \
           coalesce(sum(s.measured_source_bytes) FILTER (WHERE {route}), 0)::bigint \
             AS measured_bytes, \
           coalesce(sum(s.measured_http_bytes) FILTER (WHERE {route}), 0)::bigint \
             AS measured_http \
           FROM {r} x LEFT JOIN {s} s ON s.reservation_id = x.reservation_id \
           WHERE {p}) a",
        m = t.membership,
        r = t.reservation,
        s = t.settlement,
        p = POOL,
    )
}

/// The [`PoolStatus`] in the first eight columns of `row` ([`pool_select`]).
fn pool_at(row: &Row) -> PoolStatus {
    PoolStatus {
        members: row.get(0),
        attempts: row.get(1),
        reserved_source_rows: row.get(2),
        reserved_source_bytes: row.get(3),
        unresolved: row.get(4),
        measured_source_rows: row.get(5),
        measured_source_bytes: row.get(6),
        measured_http_bytes: row.get(7),
    }
}

fn env_lock_key(environment: &str) -> i64 {
    let d = Sha256::digest(format!("dpone.np-control-store.lock:{environment}").as_bytes());
    i64::from_be_bytes(d[..8].try_into().unwrap_or([0; 8]))
}

fn phase_of(s: &str) -> Tx<Phase> {
    match s {
        "qualification" => Ok(Phase::Qualification),
        "execution" => Ok(Phase::Execution),
        _ => refuse(StoreCode::StoredStateInvalid, "stored phase is not a phase"),
    }
}

fn stored<T>(r: Result<T>) -> Tx<T> {
    r.map_err(|e| {
        TxError::Refuse(StoreError::new(
            StoreCode::StoredStateInvalid,
            format!("stored value does not validate ({})", e.code),
        ))
    })
}

impl PgControlStore {
    /// A store over `endpoint`; validates the schema name. Connects lazily.
    pub fn new(endpoint: StoreEndpoint) -> Result<Self> {
        Self::with_commit_boundary(endpoint, Arc::new(HonestCommit))
    }

    /// A store whose COMMIT goes through `commit` (fault injection in tests).
    pub fn with_commit_boundary(
        endpoint: StoreEndpoint,
        commit: Arc<dyn CommitBoundary>,
    ) -> Result<Self> {
        let s = endpoint.schema.as_str();
        let ok = !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .next()
                .is_some_and(|b| b == b'_' || b.is_ascii_lowercase())
            && s.bytes()
                .all(|b| b == b'_' || b.is_ascii_lowercase() || b.is_ascii_digit());
        if !ok {
            return Err(StoreError::new(
                StoreCode::InvalidInput,
                "schema: not a lower-case identifier of at most 63 characters",
            ));
        }
        let q = |t: &str| format!("\"{s}\".\"{t}\"");
        let t = Names {
            trust: q("np_trust_revision"),
            registration: q("np_registration"),
            workload: q("np_grant_workload"),
            membership: q("np_membership"),
            consumption: q("np_qualification_consumption"),
            candidate: q("np_activation_candidate"),
            selection: q("np_activation_selection"),
            reservation: q("np_reservation"),
            settlement: q("np_settlement"),
            run_claim: q("np_run_claim"),
            enrollment: q("np_participant_enrollment"),
            run_participant: q("np_run_participant"),
            identity: q("np_participant_identity"),
            request: q("np_admission_request"),
            outcome: q("np_admission_outcome"),
        };
        Ok(Self {
            endpoint,
            t,
            conn: Mutex::new(None),
            commit,
            max_retries: 16,
            verified: AtomicBool::new(false),
        })
    }

    /// Sets the bound on serialization retries (default 16).
    pub fn set_max_retries(&mut self, retries: u32) {
        self.max_retries = retries;
    }

    async fn open(&self) -> Result<Conn> {
        // The one opener: the driver's TLS mode follows `tls` (never a plaintext fallback) and
        // channel binding is required under TLS.
        let (client, task) = dpone_pg_tls::connect(
            &self.endpoint.config,
            self.endpoint.tls,
            self.endpoint.root_cert.as_deref(),
        )
        .await
        .map_err(|e| match e {
            dpone_pg_tls::ConnectError::Db(e) => db_error("connect", &e),
            other => StoreError::new(StoreCode::Unavailable, format!("connect failed ({other})")),
        })?;
        let row = client
            .query_one(
                "SELECT pg_backend_pid(), backend_start::text FROM pg_catalog.pg_stat_activity \
                 WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .map_err(|e| db_error("identify backend", &e))?;
        // The session's own start identifies it after a lost commit acknowledgement. The server
        // hides it (NULL) from a role that is not the session's login (`SET ROLE`, or `-c role=`
        // in the options): such a session could not be told apart from its successor, so it is
        // refused here rather than probed later.
        let (pid, backend_start): (i32, Option<String>) = (
            row.try_get(0)
                .map_err(|e| db_error("identify backend", &e))?,
            row.try_get(1)
                .map_err(|e| db_error("identify backend", &e))?,
        );
        let Some(backend_start) = backend_start else {
            return Err(StoreError::new(
                StoreCode::Unavailable,
                "the store session cannot see its own start in pg_stat_activity: log in as a \
                 member of the runtime role instead of switching to it with SET ROLE",
            ));
        };
        if !self.verified.load(Ordering::SeqCst) {
            self.verify(&client).await?;
            self.verified.store(true, Ordering::SeqCst);
        }
        Ok(Conn {
            pid,
            backend_start,
            cache: StdMutex::new(HashMap::new()),
            client,
            task,
        })
    }

    /// The catalog, then (unless the endpoint accepts it) the session's role, on `c`.
    async fn verify(&self, c: &Client) -> Result<()> {
        self.check_catalog(c).await?;
        if !self.endpoint.accept_privileged_session {
            self.check_session(c).await?;
        }
        Ok(())
    }

    /// The session's role holds nothing that could change the store around the protocol
    /// ([`SESSION_PRIVILEGES_SQL`]), on `c`.
    async fn check_session(&self, c: &Client) -> Result<()> {
        let row = c
            .query_one(SESSION_PRIVILEGES_SQL, &[&self.endpoint.schema])
            .await
            .map_err(|e| db_error("read the session's privileges", &e))?;
        let texts = |i: usize| -> Vec<String> { row.get(i) };
        match privileged_session(
            row.get(0),
            row.get(1),
            row.get(2),
            &texts(3),
            &texts(4),
            &texts(5),
        ) {
            Some(message) => Err(StoreError::new(StoreCode::SessionPrivileged, message)),
            None => Ok(()),
        }
    }

    /// The reviewed DDL against the catalog, on `c`.
    async fn check_catalog(&self, c: &Client) -> Result<()> {
        let mut all = Vec::new();
        for table in &CONTRACT {
            let facts = Self::table_facts(c, &self.endpoint.schema, table.name)
                .await
                .map_err(|e| match e {
                    TxError::Refuse(e) => e,
                    TxError::Db(e) => db_error("read the control catalog", &e),
                })?;
            all.push(facts);
        }
        let names: Vec<&str> = BACKSTOP.iter().map(|(_, f)| *f).collect();
        let configs = BackstopConfigs(
            c.query(
                "SELECT p.proname::text, coalesce(p.proconfig, '{}') FROM pg_catalog.pg_proc p \
                 JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace \
                 WHERE n.nspname = $1 AND p.proname = ANY($2::text[])",
                &[&self.endpoint.schema, &names],
            )
            .await
            .map_err(|e| db_error("read the control catalog", &e))?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect(),
        );
        for (table, facts) in CONTRACT.iter().zip(&all) {
            verify_table(table, facts)
                .and_then(|()| verify_backstop(&self.endpoint.schema, table.name, facts, &configs))
                .map_err(|m| StoreError::new(StoreCode::CatalogInvalid, m))?;
        }
        Ok(())
    }

    /// The store's connection, opened when missing.
    async fn connected(&self) -> Result<tokio::sync::MutexGuard<'_, Option<Conn>>> {
        let mut guard = self.conn.lock().await;
        if guard.is_none() {
            *guard = Some(self.open().await?);
        }
        Ok(guard)
    }

    async fn transact(&self, op: Op<'_>) -> Result<Out> {
        let lock = match &op {
            Op::Trust(r) => Some(r.environment.as_str()),
            Op::Register(a, _) | Op::Consume(a, _, _) | Op::Select(a, _, _, _) => {
                Some(a.environment().as_str())
            }
            // Admissions queue (group admission).
            Op::Admit(..) => return self.queued(op).await,
            Op::Candidate(_) => None,
        }
        .map(env_lock_key);
        let mut guard = self.conn.lock().await;
        for attempt in 0..=self.max_retries {
            retry_pause(attempt).await;
            if guard.is_none() {
                *guard = Some(self.open().await?);
            }
            let Some(conn) = guard.as_ref() else {
                return Err(StoreError::new(StoreCode::Unavailable, "no connection"));
            };
            let c = &conn.client;
            let db = Db {
                client: c,
                cache: &conn.cache,
            };
            // The lock and BEGIN as two queries pipelined in one round trip (each its own
            // statement, so BEGIN starts a fresh transaction whose snapshot is taken by its first
            // statement, after the lock is held). The key is computed, never input: a literal.
            // Under the environment lock the body's first reads go in the same flight: the
            // server runs them after the lock is held, inside the transaction. `biased` polls in
            // this order, so the lock, BEGIN and the first reads are queued on the connection in
            // this order; and if the lock or BEGIN fails, `try_join` drops the body before it
            // can send anything that depends on what it read (it has to be polled again to see
            // its reads, and the failure is seen first), so nothing is written outside a locked
            // transaction. (Every locked body starts with reads; the one unlocked operation,
            // which starts with its write, waits for BEGIN.)
            let begin = "BEGIN ISOLATION LEVEL SERIALIZABLE";
            let opened = match lock {
                Some(key) => {
                    let take = format!("SELECT pg_advisory_lock({key})");
                    tokio::try_join!(
                        biased;
                        c.batch_execute(&take),
                        c.batch_execute(begin),
                        async { Ok(self.body(&db, &op).await) }
                    )
                    .map(|((), (), body)| body)
                }
                None => match c.batch_execute(begin).await {
                    Ok(()) => Ok(self.body(&db, &op).await),
                    Err(e) => Err(e),
                },
            };
            let body = match opened {
                Ok(body) => body,
                Err(e) => {
                    // Whether the lock was taken is unknown: the connection is not reused.
                    *guard = None;
                    return Err(db_error("take the environment lock", &e));
                }
            };
            match body {
                Ok(out) => {
                    match commit_and_unlock(&*self.commit, c, lock, Vec::new()).await {
                        (Flight::WriteRefused(e), _) => {
                            // The deferred write was refused by the server: the transaction aborted
                            // there, so the COMMIT behind it rolled back and wrote nothing.
                            if !release(c, lock).await {
                                *guard = None;
                            }
                            let state = e.code().map(|s| s.code().to_owned());
                            if !state.as_deref().is_some_and(retryable) {
                                return Err(db_error("protected transaction", &e));
                            }
                        }
                        (Flight::Ack(CommitAck::Acknowledged), unlocked) => {
                            if !unlocked {
                                *guard = None;
                            }
                            return Ok(out);
                        }
                        (Flight::Ack(CommitAck::Refused(state)), _) if retryable(&state) => {
                            if !release(c, lock).await {
                                *guard = None;
                            }
                        }
                        (Flight::Ack(CommitAck::Refused(state)), _) => {
                            if !release(c, lock).await {
                                *guard = None;
                            }
                            return Err(StoreError::new(
                                StoreCode::Unavailable,
                                format!("commit failed (SQLSTATE {state})"),
                            ));
                        }
                        (Flight::Ack(CommitAck::Lost), _) => {
                            *guard = None;
                            return Err(StoreError::new(
                                StoreCode::OutcomeUnknown,
                                "the commit acknowledgement was lost; probe before retrying",
                            ));
                        }
                    }
                }
                Err(TxError::Refuse(e)) => {
                    if !release(c, lock).await {
                        *guard = None;
                    }
                    return Err(e);
                }
                Err(TxError::Db(e)) => match e.code() {
                    Some(state) if retryable(state.code()) => {
                        if !release(c, lock).await {
                            *guard = None;
                        }
                    }
                    Some(_) => {
                        if !release(c, lock).await {
                            *guard = None;
                        }
                        return Err(db_error("protected transaction", &e));
                    }
                    None => {
                        // COMMIT was never sent: the server rolls the transaction back.
                        *guard = None;
                        return Err(db_error("protected transaction", &e));
                    }
                },
            }
        }
        Err(StoreError::new(
            StoreCode::SerializationRetriesExhausted,
            format!(
                "serialization conflicts outlasted {} retries",
                self.max_retries
            ),
        ))
    }

    async fn body(&self, c: &Db<'_>, op: &Op<'_>) -> Tx<Out> {
        match *op {
            Op::Trust(r) => self.trust_body(c, r).await.map(Out::Trust),
            Op::Register(a, g) => self.register_body(c, a, g).await.map(Out::Registered),
            Op::Consume(a, k, b) => self.consume_body(c, a, k, b).await.map(|()| Out::Unit),
            Op::Candidate(r) => self.candidate_body(c, r).await.map(Out::New),
            Op::Select(a, k, b, r) => self.select_body(c, a, k, b, r).await.map(Out::Selected),
            Op::Admit(..) => Err(TxError::Refuse(StoreError::new(
                StoreCode::StoredStateInvalid,
                "a queued operation outside the queue",
            ))),
        }
    }

    async fn trust_at(
        c: &Db<'_>,
        t: &Names,
        environment: &str,
        revision: Option<i64>,
    ) -> Tx<Option<TrustRevision>> {
        let sql = format!(
            "SELECT revision, policy_digest, policy_bytes, root_digest, revocation_epoch, \
             {LIMIT_COLUMNS}, max_validity_seconds, \
             extract(epoch FROM recorded_at_utc)::bigint \
             FROM {} WHERE environment_id = $1::text::uuid AND ($2::bigint IS NULL OR revision = $2) \
             ORDER BY revision DESC LIMIT 1",
            t.trust
        );
        let Some(row) = c.query_opt(&sql, &[&environment, &revision]).await? else {
            return Ok(None);
        };
        Ok(Some(TrustRevision {
            environment: stored(Uuid::parse("environment", environment))?,
            revision: row.get(0),
            policy_digest: stored(Sha256Digest::parse("policy_digest", row.get(1)))?,
            policy_bytes: row.get(2),
            root_digest: stored(Sha256Digest::parse("root_digest", row.get(3)))?,
            revocation_epoch: row.get(4),
            limits: limits_at(&row, 5),
            max_validity_seconds: row.get(10),
            recorded_at_unix: row.get(11),
        }))
    }

    /// Inside the transaction: the authenticated revision is still current, and the database
    /// clock has not gone back behind it.
    /// (The two reads are pipelined: one round trip.)
    async fn check_current(&self, c: &Db<'_>, auth: &Authenticated) -> Tx<TrustRevision> {
        let env = auth.environment().as_str();
        let (current, clock) = tokio::join!(
            Self::trust_at(c, &self.t, env, None),
            self.check_clock(c, env)
        );
        let Some(current) = current? else {
            return refuse(StoreCode::TrustMissing, "no trust revision is recorded");
        };
        if current.revision != auth.revision() {
            return refuse(
                StoreCode::TrustRevisionChanged,
                "the trust revision changed after authentication; authenticate again",
            );
        }
        clock?;
        Ok(current)
    }

    async fn check_clock(&self, c: &Db<'_>, environment: &str) -> Tx<()> {
        let sql = format!(
            "SELECT clock_timestamp() < coalesce(max(recorded_at_utc), '-infinity') \
             FROM {} WHERE environment_id = $1::text::uuid",
            self.t.trust
        );
        let back: bool = c.query_one(&sql, &[&environment]).await?.get(0);
        if back {
            return refuse(
                StoreCode::ClockBackwards,
                "the database clock is earlier than the newest trust revision",
            );
        }
        Ok(())
    }

    async fn load_grant(&self, c: &Db<'_>, key: &GrantKey) -> Tx<Option<StoredGrant>> {
        let sql = format!(
            "SELECT environment_id::text, campaign_id::text, phase, grant_digest, original_bytes, \
             revocation_epoch, {LIMIT_COLUMNS}, qualification_run_id::text, route, \
             activation_id::text, clock_timestamp() >= not_after_utc, \
             clock_timestamp() < not_before_utc \
             FROM {} WHERE grant_id = $1::text::uuid AND phase = $2",
            self.t.registration
        );
        let Some(row) = c
            .query_opt(&sql, &[&key.grant_id.as_str(), &key.phase.as_str()])
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(StoredGrant {
            environment: row.get(0),
            campaign: row.get(1),
            phase: phase_of(row.get(2))?,
            digest: row.get(3),
            bytes: row.get(4),
            revocation_epoch: row.get(5),
            limits: limits_at(&row, 6),
            run_id: row.get(11),
            route: row.get(12),
            activation_id: row.get(13),
            expired: row.get(14),
            not_yet_valid: row.get(15),
        }))
    }

    /// The registered original, re-checked: same environment, exact bytes, not revoked, inside
    /// its validity window by the database clock.
    async fn current_grant(
        &self,
        c: &Db<'_>,
        auth: &Authenticated,
        trust: &TrustRevision,
        key: &GrantKey,
        bytes: &[u8],
    ) -> Tx<StoredGrant> {
        let loaded = self.load_grant(c, key).await?;
        Self::checked_grant(auth, trust, loaded, bytes)
    }

    /// [`Self::current_grant`]'s checks on a registration already read.
    fn checked_grant(
        auth: &Authenticated,
        trust: &TrustRevision,
        loaded: Option<StoredGrant>,
        bytes: &[u8],
    ) -> Tx<StoredGrant> {
        let Some(g) = loaded else {
            return refuse(
                StoreCode::GrantNotRegistered,
                "the grant/phase key is not registered",
            );
        };
        crate::queue::grant_standing(
            g.environment == auth.environment().as_str(),
            g.bytes == bytes,
            g.revocation_epoch < trust.revocation_epoch,
            g.expired,
            g.not_yet_valid,
        )?;
        Ok(g)
    }

    async fn trust_body(&self, c: &Db<'_>, r: &PolicyRecord) -> Tx<TrustRevision> {
        let env = r.environment.as_str();
        let digest = Sha256Digest::of(&r.policy_bytes);
        let current = Self::trust_at(c, &self.t, env, None).await?;
        self.check_clock(c, env).await?;
        if let Some(cur) = &current {
            if cur.policy_digest == digest
                && cur.root_digest == r.root_digest
                && cur.revocation_epoch == r.revocation_epoch
                && cur.limits == r.limits
                && cur.max_validity_seconds == r.max_validity_seconds
            {
                return Ok(cur.clone());
            }
            if r.revocation_epoch < cur.revocation_epoch {
                return refuse(
                    StoreCode::RevocationEpochBackwards,
                    "the revocation epoch is below the current revision's",
                );
            }
        }
        let next = current.as_ref().map_or(1, |c| c.revision + 1);
        let sql = format!(
            "INSERT INTO {} (environment_id, revision, policy_digest, policy_bytes, root_digest, \
             revocation_epoch, {LIMIT_COLUMNS}, max_validity_seconds, recorded_at_utc) \
             VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, clock_timestamp())",
            self.t.trust
        );
        let l = &r.limits;
        c.execute(
            &sql,
            &[
                &env,
                &next,
                &digest.as_str(),
                &r.policy_bytes,
                &r.root_digest.as_str(),
                &r.revocation_epoch,
                &l.workloads,
                &l.attempts,
                &l.source_rows,
                &l.source_bytes,
                &l.attempt_seconds,
                &r.max_validity_seconds,
            ],
        )
        .await?;
        Self::trust_at(c, &self.t, env, Some(next))
            .await?
            .ok_or_else(|| {
                TxError::Refuse(StoreError::new(
                    StoreCode::StoredStateInvalid,
                    "the new trust revision cannot be read back",
                ))
            })
    }

    async fn register_body(
        &self,
        c: &Db<'_>,
        auth: &Authenticated,
        g: &GrantRegistration,
    ) -> Tx<Registered> {
        if &g.environment != auth.environment() {
            return refuse(
                StoreCode::InvalidInput,
                "the registration names another environment than the authentication",
            );
        }
        let trust = self.check_current(c, auth).await?;
        let key = g.key();
        if let Some(existing) = self.load_grant(c, &key).await? {
            if existing.bytes == g.original_bytes && existing.environment == g.environment.as_str()
            {
                return Ok(Registered::Reopened);
            }
            return refuse(
                StoreCode::RegistrationBytesChanged,
                "another original is registered under this grant/phase key",
            );
        }
        if g.not_after_unix - g.not_before_unix > trust.max_validity_seconds {
            return refuse(
                StoreCode::ValidityAbovePolicy,
                "the grant's validity exceeds the policy's",
            );
        }
        if g.revocation_epoch < trust.revocation_epoch {
            return refuse(
                StoreCode::GrantRevoked,
                "the grant's revocation epoch is revoked",
            );
        }
        let window: (bool, bool) = {
            let r = c
                .query_one(
                    "SELECT clock_timestamp() >= to_timestamp($1::bigint), \
                     clock_timestamp() < to_timestamp($2::bigint)",
                    &[&g.not_after_unix, &g.not_before_unix],
                )
                .await?;
            (r.get(0), r.get(1))
        };
        if window.0 {
            return refuse(
                StoreCode::GrantExpired,
                "the grant's validity window has ended",
            );
        }
        if window.1 {
            return refuse(
                StoreCode::GrantNotYetValid,
                "the grant's validity window has not started",
            );
        }
        let (run_id, route, activation_id): (Option<&str>, Option<Vec<String>>, Option<&str>) =
            match &g.subject {
                PhaseSubject::Qualification { run_id, route } => {
                    (Some(run_id.as_str()), Some(route.dims().to_vec()), None)
                }
                PhaseSubject::Execution { activation_id } => {
                    (None, None, Some(activation_id.as_str()))
                }
            };
        let l = &g.limits;
        let digest = Sha256Digest::of(&g.original_bytes);
        let phase = key.phase.as_str();
        c.execute(
            &format!(
                "INSERT INTO {} (grant_id, phase, environment_id, campaign_id, grant_digest, \
                 original_bytes, trust_revision, revocation_epoch, not_before_utc, not_after_utc, \
                 {LIMIT_COLUMNS}, qualification_run_id, route, activation_id, registered_at_utc) \
                 VALUES ($1::text::uuid, $2, $3::text::uuid, $4::text::uuid, $5, $6, $7, $8, \
                 to_timestamp($9::bigint), to_timestamp($10::bigint), $11, $12, $13, $14, $15, \
                 $16::text::uuid, $17, $18::text::uuid, clock_timestamp())",
                self.t.registration
            ),
            &[
                &g.grant_id.as_str(),
                &phase,
                &g.environment.as_str(),
                &g.campaign.as_str(),
                &digest.as_str(),
                &g.original_bytes,
                &trust.revision,
                &g.revocation_epoch,
                &g.not_before_unix,
                &g.not_after_unix,
                &l.workloads,
                &l.attempts,
                &l.source_rows,
                &l.source_bytes,
                &l.attempt_seconds,
                &run_id,
                &route,
                &activation_id,
            ],
        )
        .await?;
        let insert_workload = format!(
            "INSERT INTO {} (grant_id, phase, workload_id, pack_digest, {LIMIT_COLUMNS}) \
             VALUES ($1::text::uuid, $2, $3, $4, $5, $6, $7, $8, $9)",
            self.t.workload
        );
        let insert_member = format!(
            "INSERT INTO {} (environment_id, campaign_id, phase, workload_id, grant_id, \
             charged_at_utc) VALUES ($1::text::uuid, $2::text::uuid, $3, $4, $5::text::uuid, \
             clock_timestamp()) ON CONFLICT DO NOTHING",
            self.t.membership
        );
        let mut charged = 0i64;
        let mut membership_ceiling = trust.limits.workloads.min(l.workloads);
        for w in &g.workloads {
            let wl = &w.limits;
            membership_ceiling = membership_ceiling.min(wl.workloads);
            c.execute(
                &insert_workload,
                &[
                    &g.grant_id.as_str(),
                    &phase,
                    &w.workload.as_str(),
                    &w.pack_digest.as_str(),
                    &wl.workloads,
                    &wl.attempts,
                    &wl.source_rows,
                    &wl.source_bytes,
                    &wl.attempt_seconds,
                ],
            )
            .await?;
            charged += i64::try_from(
                c.execute(
                    &insert_member,
                    &[
                        &g.environment.as_str(),
                        &g.campaign.as_str(),
                        &phase,
                        &w.workload.as_str(),
                        &g.grant_id.as_str(),
                    ],
                )
                .await?,
            )
            .unwrap_or(i64::MAX);
        }
        let members: i64 = c
            .query_one(
                &format!(
                    "SELECT count(*) FROM {} WHERE environment_id = $1::text::uuid \
                     AND campaign_id = $2::text::uuid AND phase = $3",
                    self.t.membership
                ),
                &[&g.environment.as_str(), &g.campaign.as_str(), &phase],
            )
            .await?
            .get(0);
        if members > membership_ceiling {
            return refuse(
                StoreCode::MembershipExceeded,
                "the grant's membership would exceed the pool's effective workload ceiling",
            );
        }
        Ok(Registered::New {
            membership_charged: charged,
            executor_permit: key.phase == Phase::Execution,
        })
    }

    async fn consume_body(
        &self,
        c: &Db<'_>,
        auth: &Authenticated,
        key: &GrantKey,
        bytes: &[u8],
    ) -> Tx<()> {
        if key.phase != Phase::Qualification {
            return refuse(
                StoreCode::PhaseMismatch,
                "only a qualification grant is consumed",
            );
        }
        let trust = self.check_current(c, auth).await?;
        let g = self.current_grant(c, auth, &trust, key, bytes).await?;
        let Some(run) = g.run_id else {
            return refuse(
                StoreCode::StoredStateInvalid,
                "a qualification grant lacks its run",
            );
        };
        let existing = c
            .query_opt(
                &format!(
                    "SELECT grant_id::text FROM {} WHERE run_id = $1::text::uuid",
                    self.t.consumption
                ),
                &[&run],
            )
            .await?;
        if let Some(row) = existing {
            let by: String = row.get(0);
            return if by == key.grant_id.as_str() {
                refuse(
                    StoreCode::QualificationReplayed,
                    "the qualification run was already consumed",
                )
            } else {
                refuse(
                    StoreCode::QualificationRebound,
                    "the qualification run was consumed by another grant",
                )
            };
        }
        c.execute(
            &format!(
                "INSERT INTO {} (run_id, grant_id, phase, grant_digest, trust_revision, \
                 consumed_at_utc) VALUES ($1::text::uuid, $2::text::uuid, 'qualification', $3, $4, \
                 clock_timestamp())",
                self.t.consumption
            ),
            &[&run, &key.grant_id.as_str(), &g.digest, &trust.revision],
        )
        .await?;
        Ok(())
    }

    async fn candidate_body(&self, c: &Db<'_>, r: &ActivationRequest) -> Tx<bool> {
        let digest = Sha256Digest::of(&r.request_bytes);
        let n = c
            .execute(
                &format!(
                    "INSERT INTO {} (activation_id, request_digest, request_bytes, \
                     recorded_at_utc) VALUES ($1::text::uuid, $2, $3, clock_timestamp()) \
                     ON CONFLICT DO NOTHING",
                    self.t.candidate
                ),
                &[
                    &r.activation_id.as_str(),
                    &digest.as_str(),
                    &r.request_bytes,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn select_body(
        &self,
        c: &Db<'_>,
        auth: &Authenticated,
        key: &GrantKey,
        bytes: &[u8],
        r: &ActivationRequest,
    ) -> Tx<Selected> {
        if key.phase != Phase::Execution {
            return refuse(
                StoreCode::PhaseMismatch,
                "only an execution grant selects a request",
            );
        }
        let trust = self.check_current(c, auth).await?;
        let g = self.current_grant(c, auth, &trust, key, bytes).await?;
        if g.activation_id.as_deref() != Some(r.activation_id.as_str()) {
            return refuse(
                StoreCode::ActivationMismatch,
                "the request names another activation than the grant",
            );
        }
        if r.grant_digest.as_str() != g.digest {
            return refuse(
                StoreCode::GrantBytesMismatch,
                "the request binds another execution-grant digest",
            );
        }
        let digest = Sha256Digest::of(&r.request_bytes);
        let existing = c
            .query_opt(
                &format!(
                    "SELECT request_digest, grant_id::text FROM {} \
                     WHERE activation_id = $1::text::uuid",
                    self.t.selection
                ),
                &[&r.activation_id.as_str()],
            )
            .await?;
        if let Some(row) = existing {
            let (d, by): (String, String) = (row.get(0), row.get(1));
            if d == digest.as_str() && by == key.grant_id.as_str() {
                return Ok(Selected::Reopened);
            }
            return refuse(
                StoreCode::ActivationAlreadySelected,
                "the activation already has its single exact request",
            );
        }
        c.execute(
            &format!(
                "INSERT INTO {} (activation_id, request_digest, request_bytes, grant_id, phase, \
                 grant_digest, trust_revision, selected_at_utc) VALUES ($1::text::uuid, $2, $3, \
                 $4::text::uuid, 'execution', $5, $6, clock_timestamp())",
                self.t.selection
            ),
            &[
                &r.activation_id.as_str(),
                &digest.as_str(),
                &r.request_bytes,
                &key.grant_id.as_str(),
                &g.digest,
                &trust.revision,
            ],
        )
        .await?;
        Ok(Selected::Selected)
    }

    /// The settlement of reservation `id`, if one is recorded: its measurements and outcome.
    async fn settlement_by_id(c: &Db<'_>, t: &Names, id: &str) -> Tx<Option<RecordedSettlement>> {
        let sql = format!(
            "SELECT measured_source_rows, measured_source_bytes, measured_http_bytes, outcome \
             FROM {} WHERE reservation_id = $1",
            t.settlement
        );
        Ok(c.query_opt(&sql, &[&id])
            .await?
            .map(|r| RecordedSettlement {
                source_rows: r.get(0),
                source_bytes: r.get(1),
                http_bytes: r.get(2),
                outcome: r.get(3),
            }))
    }

    async fn reservation_by_id(c: &Db<'_>, t: &Names, id: &str) -> Tx<Option<Reservation>> {
        let row = c
            .query_opt(
                &format!(
                    "SELECT reservation_id, grant_id::text, phase, grant_digest, trust_revision, \
                     workload_id, attempt_id, reserved_source_rows, reserved_source_bytes, \
                     reserved_seconds FROM {} WHERE reservation_id = $1",
                    t.reservation
                ),
                &[&id],
            )
            .await?;
        let Some(row) = row else { return Ok(None) };
        Ok(Some(Reservation {
            reservation_id: stored(Sha256Digest::parse("reservation_id", row.get(0)))?,
            grant: GrantKey {
                grant_id: stored(Uuid::parse("grant_id", row.get(1)))?,
                phase: phase_of(row.get(2))?,
            },
            grant_digest: stored(Sha256Digest::parse("grant_digest", row.get(3)))?,
            trust_revision: row.get(4),
            workload: stored(WorkloadId::new(row.get(5)))?,
            attempt: stored(AttemptId::new(row.get(6)))?,
            source_rows: row.get(7),
            source_bytes: row.get(8),
            attempt_seconds: row.get(9),
            resolved_by_probe: false,
        }))
    }

    async fn table_facts(c: &Client, schema: &str, name: &str) -> Tx<TableFacts> {
        // Related tables are named as the contract names them: only the store's own tables.
        let own = |t: &str| CONTRACT.iter().any(|c| c.name == t).then(|| t.to_owned());
        Ok(dpone_pg_catalog::table_facts(c, schema, name, own).await?)
    }

    fn expect<T>(out: Out, pick: impl FnOnce(Out) -> Option<T>) -> Result<T> {
        pick(out).ok_or_else(|| {
            StoreError::new(StoreCode::StoredStateInvalid, "unexpected operation result")
        })
    }
}

/// Ends a protected transaction that did not commit and releases the environment lock; `false`
/// when the connection can no longer be trusted (then it is dropped).
async fn release(c: &Client, lock: Option<i64>) -> bool {
    let sql = match lock {
        Some(key) => format!("ROLLBACK; SELECT pg_advisory_unlock({key})"),
        None => "ROLLBACK".to_owned(),
    };
    c.batch_execute(&sql).await.is_ok()
}

/// What the commit flight reports.
enum Flight {
    /// The deferred write (if any) was accepted; the COMMIT's acknowledgement.
    Ack(CommitAck),
    /// The server refused the deferred write: the transaction aborted there, and the COMMIT
    /// queued behind it rolled back (PostgreSQL answers COMMIT of an aborted transaction with
    /// `ROLLBACK`, not an error, so the write's own answer is what tells).
    WriteRefused(tokio_postgres::Error),
}

/// The transaction's deferred writes, COMMIT and the unlock pipelined in one flight: the server
/// runs them in this order (they are polled, and so queued, in order; each write is one message
/// of a statement prepared earlier on this connection), so the next contender starts as soon as
/// this transaction commits. (After a refused COMMIT the lock is already free; `release` then
/// rolls back nothing and unlocks nothing, harmlessly.) Returns the outcome and whether the
/// unlock succeeded. A write whose answer was lost with the connection is an unknown outcome
/// ([`CommitAck::Lost`]): the caller probes.
async fn commit_and_unlock(
    commit: &dyn CommitBoundary,
    c: &Client,
    lock: Option<i64>,
    writes: Vec<DeferredWrite>,
) -> (Flight, bool) {
    let params: Vec<Vec<&(dyn ToSql + Sync)>> = writes
        .iter()
        .map(|w| {
            w.params
                .iter()
                .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                .collect()
        })
        .collect();
    let sent = writes
        .iter()
        .zip(&params)
        .map(|(w, p)| c.execute(&w.statement, p));
    let (wrote, ack, unlocked) = tokio::join!(
        biased;
        in_order(sent),
        commit.commit(c),
        unlock(c, lock)
    );
    let mut flight = Flight::Ack(ack);
    for w in wrote {
        match w {
            Ok(_) => {}
            Err(e) if e.code().is_some() => {
                flight = Flight::WriteRefused(e);
                break;
            }
            // No answer to a write: whether the COMMIT behind it committed it is unknown.
            Err(_) => {
                flight = Flight::Ack(CommitAck::Lost);
                break;
            }
        }
    }
    (flight, unlocked)
}

/// Polls `futures` in order until all are ready: a future of the driver queues its statement
/// when first polled, so the statements go out in one flight, in this order. Returns their
/// results in the same order.
async fn in_order<F: Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (f, d) in pending.iter_mut().zip(done.iter_mut()) {
            if d.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *d = Some(v),
                    std::task::Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// Releases the environment lock after a commit; `false` when the connection failed.
async fn unlock(c: &Client, lock: Option<i64>) -> bool {
    match lock {
        // A literal integer (the key is computed, never input): one round trip, no prepare.
        Some(key) => c
            .batch_execute(&format!("SELECT pg_advisory_unlock({key})"))
            .await
            .is_ok(),
        None => true,
    }
}

/// A settlement as recorded (`np_settlement`).
struct RecordedSettlement {
    source_rows: i64,
    source_bytes: i64,
    http_bytes: i64,
    outcome: String,
}

/// Whether the recorded settlement is `s` (the same measurements and outcome reopen it; any
/// other is `SettlementConflict`).
fn same_settlement(s: &Settlement, found: &RecordedSettlement) -> Result<()> {
    if found.source_rows == s.measured_source_rows
        && found.source_bytes == s.measured_source_bytes
        && found.http_bytes == s.measured_http_bytes
        && found.outcome == s.outcome.as_str()
    {
        Ok(())
    } else {
        Err(StoreError::new(
            StoreCode::SettlementConflict,
            "the reservation was settled with other measurements",
        ))
    }
}

/// Ends a read: a lost connection is dropped so the next call reopens it.
fn finish<T>(guard: &mut Option<Conn>, step: &str, r: Tx<T>) -> Result<T> {
    match r {
        Ok(v) => Ok(v),
        Err(TxError::Refuse(e)) => Err(e),
        Err(TxError::Db(e)) => {
            if e.code().is_none() {
                *guard = None;
            }
            Err(db_error(step, &e))
        }
    }
}

/// Runs one read (outside any protected transaction) on the store's connection.
macro_rules! read {
    ($self:ident, $step:expr, |$c:ident, $t:ident| $body:expr) => {{
        let mut guard = $self.connected().await?;
        let r = match guard.as_ref() {
            Some(conn) => {
                let $c = &Db {
                    client: &conn.client,
                    cache: &conn.cache,
                };
                let $t = &$self.t;
                $body.await
            }
            None => Err(TxError::Refuse(StoreError::new(
                StoreCode::Unavailable,
                "no connection",
            ))),
        };
        finish(&mut guard, $step, r)
    }};
}

/// Whether an enrollment was recorded or already held with the same identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enrolled {
    /// Recorded now.
    Recorded,
    /// The same participant was already enrolled with the same identity.
    Reopened,
}

impl PgControlStore {
    /// Records participant `e` of enrollment `enrollment_digest` in `environment`, under the
    /// current trust revision, which must be `trust_revision` and pin a policy whose enrollment
    /// is `enrollment_digest` (the caller checked the policy bytes; the revision is re-checked
    /// here). Append-only: the same identity again reopens, another identity refuses
    /// (`EnrollmentConflict`).
    pub async fn enroll(
        &self,
        environment: &Uuid,
        enrollment_digest: &Sha256Digest,
        trust_revision: i64,
        e: &Enrollment,
    ) -> Result<Enrolled> {
        let env = environment.as_str().to_owned();
        let digest = enrollment_digest.as_str().to_owned();
        let id = e.participant_id.clone();
        let identity = e.identity_digest.as_str().to_owned();
        if e.identity.digest() != e.identity_digest {
            return Err(StoreError::new(
                StoreCode::InvalidInput,
                "the identity digest is not the identity's",
            ));
        }
        // The columns of the engine's table, and its values after the five common ones.
        let (table, columns, values): (&str, &str, Vec<Box<dyn ToSql + Sync + Send>>) = match &e
            .identity
        {
            ParticipantIdentity::Postgresql(i) => (
                &self.t.enrollment,
                "engine, system_identifier, database_name, database_oid",
                vec![
                    Box::new("postgresql".to_owned()),
                    Box::new(i.system_identifier.clone()),
                    Box::new(i.database_name.clone()),
                    Box::new(i64::from(i.database_oid)),
                ],
            ),
            // Another engine: its canonical record, which the table's CHECK re-digests.
            other => {
                let record = String::from_utf8(other.record())
                    .map_err(|_| StoreError::new(StoreCode::InvalidInput, "a record not UTF-8"))?;
                (
                    &self.t.identity,
                    "engine, identity_schema, identity_record",
                    vec![
                        Box::new(other.engine().as_str().to_owned()),
                        Box::new(other.schema().to_owned()),
                        Box::new(record),
                    ],
                )
            }
        };
        read!(self, "record the enrollment", |c, t| async {
            // One statement: the insert happens only under the current revision; the primary
            // key decides between concurrent enrollments; a participant already enrolled in
            // the other engine's table is never enrolled again.
            let other = if table == t.enrollment.as_str() {
                &t.identity
            } else {
                &t.enrollment
            };
            let placeholders: Vec<String> =
                (0..values.len()).map(|i| format!("${}", i + 6)).collect();
            let sql = format!(
                "WITH cur AS (SELECT revision FROM {tr} WHERE environment_id = $1::text::uuid \
                 ORDER BY revision DESC LIMIT 1), \
                 elsewhere AS (SELECT 1 FROM {other} WHERE environment_id = $1::text::uuid \
                    AND enrollment_digest = $2 AND participant_id = $3), \
                 ins AS (INSERT INTO {table} (environment_id, enrollment_digest, participant_id, \
                 identity_digest, trust_revision, {columns}, enrolled_at_utc) \
                 SELECT $1::text::uuid, $2, $3, $4, $5, {vals}, clock_timestamp() \
                 FROM cur WHERE cur.revision = $5 AND NOT EXISTS (SELECT 1 FROM elsewhere) \
                 ON CONFLICT (environment_id, enrollment_digest, participant_id) DO NOTHING \
                 RETURNING 1) \
                 SELECT (SELECT revision FROM cur), (SELECT count(*) FROM ins), \
                 (SELECT identity_digest FROM {table} WHERE environment_id = $1::text::uuid \
                    AND enrollment_digest = $2 AND participant_id = $3)",
                tr = t.trust,
                vals = placeholders.join(", "),
            );
            let mut params: Vec<&(dyn ToSql + Sync)> =
                vec![&env, &digest, &id, &identity, &trust_revision];
            params.extend(values.iter().map(|v| v.as_ref() as &(dyn ToSql + Sync)));
            let row = c.query_one(&sql, &params).await?;
            let current: Option<i64> = row.get(0);
            if current != Some(trust_revision) {
                return refuse(
                    StoreCode::TrustRevisionChanged,
                    "the trust revision moved since the policy was checked",
                );
            }
            if row.get::<_, i64>(1) == 1 {
                return Ok(Enrolled::Recorded);
            }
            match row.get::<_, Option<String>>(2) {
                Some(held) if held == identity => Ok(Enrolled::Reopened),
                _ => refuse(
                    StoreCode::EnrollmentConflict,
                    "the participant is already enrolled under this enrollment with another \
                     physical identity; enrollment records are never replaced",
                ),
            }
        })
    }

    /// Every participant enrolled under `enrollment_digest` in `environment`, of every engine:
    /// each record re-read and its digest re-computed; a stored record that is not exactly a
    /// valid identity, or a participant enrolled twice, is `StoredStateInvalid`.
    pub async fn enrolled(
        &self,
        environment: &Uuid,
        enrollment_digest: &Sha256Digest,
    ) -> Result<Vec<Enrollment>> {
        let env = environment.as_str().to_owned();
        let digest = enrollment_digest.as_str().to_owned();
        read!(self, "read the enrollment", |c, t| async {
            let sql = format!(
                "SELECT participant_id, system_identifier, database_name, database_oid, \
                 identity_digest FROM {e} WHERE environment_id = $1::text::uuid \
                 AND enrollment_digest = $2 ORDER BY participant_id",
                e = t.enrollment,
            );
            let rows = c.query(&sql, &[&env, &digest]).await?;
            let mut out: Vec<(String, ParticipantIdentity, String)> =
                Vec::with_capacity(rows.len());
            for row in rows {
                let oid: i64 = row.get(3);
                let Ok(database_oid) = u32::try_from(oid) else {
                    return refuse(
                        StoreCode::StoredStateInvalid,
                        "an enrolled OID is out of range",
                    );
                };
                let identity = PhysicalIdentity {
                    system_identifier: row.get(1),
                    database_name: row.get(2),
                    database_oid,
                };
                out.push((row.get(0), identity.into(), row.get(4)));
            }
            let sql = format!(
                "SELECT participant_id, engine, identity_schema, identity_record, identity_digest \
                 FROM {i} WHERE environment_id = $1::text::uuid AND enrollment_digest = $2 \
                 ORDER BY participant_id",
                i = t.identity,
            );
            for row in c.query(&sql, &[&env, &digest]).await? {
                let (engine, schema, record): (String, String, String) =
                    (row.get(1), row.get(2), row.get(3));
                let identity = match (engine.as_str(), schema.as_str()) {
                    ("clickhouse", CLICKHOUSE_IDENTITY_SCHEMA) => {
                        ClickhouseIdentity::from_record(record.as_bytes())
                            .map(ParticipantIdentity::Clickhouse)
                            .ok()
                    }
                    ("sqlserver", SQLSERVER_IDENTITY_SCHEMA) => {
                        SqlserverIdentity::from_record(record.as_bytes())
                            .map(ParticipantIdentity::Sqlserver)
                            .ok()
                    }
                    _ => None,
                };
                let Some(identity) = identity else {
                    return refuse(
                        StoreCode::StoredStateInvalid,
                        "an enrolled identity record is not one this host reads",
                    );
                };
                out.push((row.get(0), identity, row.get(4)));
            }
            out.sort_by(|a, b| a.0.cmp(&b.0));
            if out.windows(2).any(|w| w[0].0 == w[1].0) {
                return refuse(
                    StoreCode::StoredStateInvalid,
                    "a participant is enrolled twice under one enrollment",
                );
            }
            let mut enrolled = Vec::with_capacity(out.len());
            for (participant_id, identity, stored_digest) in out {
                let identity_digest =
                    stored(Sha256Digest::parse("identity_digest", &stored_digest))?;
                if identity.digest() != identity_digest {
                    return refuse(
                        StoreCode::StoredStateInvalid,
                        "an enrolled identity does not match its digest",
                    );
                }
                enrolled.push(Enrollment {
                    participant_id,
                    identity,
                    identity_digest,
                });
            }
            Ok(enrolled)
        })
    }
}

impl ControlStorePort for PgControlStore {
    async fn verify_catalog(&self) -> Result<()> {
        let guard = self.connected().await?;
        let Some(conn) = guard.as_ref() else {
            return Err(StoreError::new(StoreCode::Unavailable, "no connection"));
        };
        self.verify(&conn.client).await
    }

    async fn record_trust(&self, record: &PolicyRecord) -> Result<TrustRevision> {
        record.validate()?;
        let out = self.transact(Op::Trust(record)).await?;
        Self::expect(out, |o| match o {
            Out::Trust(t) => Some(t),
            _ => None,
        })
    }

    async fn current_trust(&self, environment: &Uuid) -> Result<Option<TrustRevision>> {
        let env = environment.as_str().to_owned();
        read!(self, "read the trust revision", |c, t| async {
            Self::trust_at(c, t, &env, None).await
        })
    }

    async fn authenticate<F>(&self, environment: &Uuid, verify: F) -> Result<Authenticated>
    where
        F: FnOnce(&TrustRevision) -> std::result::Result<(), String> + Send,
    {
        let before = self.current_trust(environment).await?.ok_or_else(|| {
            StoreError::new(StoreCode::TrustMissing, "no trust revision is recorded")
        })?;
        if verify(&before).is_err() {
            return Err(StoreError::new(
                StoreCode::AuthenticationFailed,
                "verification refused under the current trust revision",
            ));
        }
        let after = self.current_trust(environment).await?;
        if after.as_ref().map(|t| t.revision) != Some(before.revision) {
            return Err(StoreError::new(
                StoreCode::TrustRevisionChanged,
                "the trust revision changed during verification; authenticate again",
            ));
        }
        Ok(Authenticated::bracketed(
            environment.clone(),
            before.revision,
        ))
    }

    async fn register(
        &self,
        auth: &Authenticated,
        grant: &GrantRegistration,
    ) -> Result<Registered> {
        grant.validate()?;
        let out = self.transact(Op::Register(auth, grant)).await?;
        Self::expect(out, |o| match o {
            Out::Registered(r) => Some(r),
            _ => None,
        })
    }

    async fn consume_qualification(
        &self,
        auth: &Authenticated,
        grant: &GrantKey,
        original_bytes: &[u8],
    ) -> Result<()> {
        let out = self
            .transact(Op::Consume(auth, grant, original_bytes))
            .await?;
        Self::expect(out, |o| match o {
            Out::Unit => Some(()),
            _ => None,
        })
    }

    async fn record_activation_candidate(&self, request: &ActivationRequest) -> Result<bool> {
        request.validate()?;
        let out = self.transact(Op::Candidate(request)).await?;
        Self::expect(out, |o| match o {
            Out::New(b) => Some(b),
            _ => None,
        })
    }

    async fn select_activation_request(
        &self,
        auth: &Authenticated,
        grant: &GrantKey,
        original_bytes: &[u8],
        request: &ActivationRequest,
    ) -> Result<Selected> {
        request.validate()?;
        let out = self
            .transact(Op::Select(auth, grant, original_bytes, request))
            .await?;
        Self::expect(out, |o| match o {
            Out::Selected(s) => Some(s),
            _ => None,
        })
    }

    async fn admit_decided<D>(
        &self,
        auth: &Authenticated,
        request: &AdmissionRequest,
        facts: &[u8],
        decider: &D,
    ) -> Result<Admission>
    where
        D: PoolDecider,
    {
        request.validate()?;
        if !valid_decider_identity(decider.identity()) {
            return Err(StoreError::new(
                StoreCode::InvalidInput,
                "the decider's identity is not a valid name",
            ));
        }
        match self
            .transact(Op::Admit(auth, request, facts, decider))
            .await?
        {
            Out::Reservation(reservation, pool_before) => Ok(Admission::Admitted {
                reservation,
                pool_before,
            }),
            Out::Denied(pool_before) => Ok(Admission::Denied { pool_before }),
            _ => Err(StoreError::new(
                StoreCode::StoredStateInvalid,
                "unexpected operation result",
            )),
        }
    }

    async fn probe(&self, reservation_id: &Sha256Digest) -> Result<Option<Reservation>> {
        let id = reservation_id.as_str().to_owned();
        read!(self, "probe the reservation", |c, t| async {
            Self::reservation_by_id(c, t, &id).await
        })
    }

    async fn settle(&self, settlement: &Settlement) -> Result<Settled> {
        for v in [
            settlement.measured_source_rows,
            settlement.measured_source_bytes,
            settlement.measured_http_bytes,
        ] {
            if v < 0 {
                return Err(StoreError::new(
                    StoreCode::InvalidInput,
                    "measured usage is negative",
                ));
            }
        }
        // Neither the environment lock nor the queue (module docs): what a settlement checks
        // is immutable once written (the reservation's bounds) or decided by the settlement's
        // primary key, so it is one read and one autocommit insert, like a run's claim.
        let id = settlement.reservation_id.as_str().to_owned();
        let (reservation, existing) = read!(self, "read the reservation", |c, t| async {
            let (reservation, existing) = tokio::join!(
                Self::reservation_by_id(c, t, &id),
                Self::settlement_by_id(c, t, &id)
            );
            Ok((reservation?, existing?))
        })?;
        let Some(reservation) = reservation else {
            return Err(StoreError::new(
                StoreCode::ReservationUnknown,
                "no reservation has this id",
            ));
        };
        if settlement.measured_source_rows > reservation.source_rows
            || settlement.measured_source_bytes > reservation.source_bytes
        {
            return Err(StoreError::new(
                StoreCode::SettleExceedsReservation,
                "measured source usage exceeds the reservation",
            ));
        }
        if let Some(found) = existing {
            return same_settlement(settlement, &found).map(|()| Settled::Reopened);
        }
        let sql = format!(
            "INSERT INTO {} (reservation_id, measured_source_rows, measured_source_bytes, \
             measured_http_bytes, outcome, settled_at_utc) \
             VALUES ($1, $2, $3, $4, $5, clock_timestamp()) \
             ON CONFLICT (reservation_id) DO NOTHING",
            self.t.settlement
        );
        let mut recorded = None;
        for attempt in 0..=self.max_retries {
            retry_pause(attempt).await;
            let mut guard = self.connected().await?;
            let Some(conn) = guard.as_ref() else {
                return Err(StoreError::new(StoreCode::Unavailable, "no connection"));
            };
            let sent = conn
                .client
                .execute(
                    &sql,
                    &[
                        &id,
                        &settlement.measured_source_rows,
                        &settlement.measured_source_bytes,
                        &settlement.measured_http_bytes,
                        &settlement.outcome.as_str(),
                    ],
                )
                .await;
            match sent {
                Ok(n) => {
                    recorded = Some(n == 1);
                    break;
                }
                // A serialization failure or deadlock (a session whose default isolation is
                // stricter than READ COMMITTED) wrote nothing: try again.
                Err(e) if e.code().is_some_and(|s| retryable(s.code())) => continue,
                // The insert went out and its answer did not come back: it may have committed.
                // Settling again is safe (the same settlement reopens).
                Err(e) if e.code().is_none() => {
                    *guard = None;
                    return Err(StoreError::new(
                        StoreCode::OutcomeUnknown,
                        "the settlement's acknowledgement was lost; settle again (the same \
                         settlement reopens)",
                    ));
                }
                Err(e) => return Err(db_error("record the settlement", &e)),
            }
        }
        let Some(recorded) = recorded else {
            return Err(StoreError::new(
                StoreCode::SerializationRetriesExhausted,
                "the settlement's insert kept failing serialization",
            ));
        };
        if recorded {
            return Ok(Settled::Recorded);
        }
        // Another settlement of the reservation won the primary key between the read and the
        // insert: the same measurements reopen, others conflict.
        let found = read!(self, "read the settlement", |c, t| async {
            Self::settlement_by_id(c, t, &id).await
        })?;
        match found {
            Some(found) => same_settlement(settlement, &found).map(|()| Settled::Reopened),
            None => Err(StoreError::new(
                StoreCode::StoredStateInvalid,
                "the settlement's insert was skipped but no settlement is recorded",
            )),
        }
    }

    async fn pool_status(&self, pool: &PoolKey) -> Result<PoolStatus> {
        let (env, campaign, phase) = (
            pool.environment.as_str().to_owned(),
            pool.campaign.as_str().to_owned(),
            pool.phase.as_str(),
        );
        let route: Option<Vec<String>> = pool.route.as_ref().map(|r| r.dims().to_vec());
        read!(self, "read the pool", |c, t| async {
            let sql = pool_select(t, "");
            let row = c
                .query_one(&sql, &[&env, &campaign, &phase, &route])
                .await?;
            Ok(pool_at(&row))
        })
    }

    async fn reservations(&self, pool: &PoolKey, limit: u32) -> Result<Vec<ListedReservation>> {
        let (env, campaign, phase) = (
            pool.environment.as_str().to_owned(),
            pool.campaign.as_str().to_owned(),
            pool.phase.as_str(),
        );
        let route: Option<Vec<String>> = pool.route.as_ref().map(|r| r.dims().to_vec());
        let limit = i64::from(limit.min(MAX_LISTED_RESERVATIONS));
        read!(self, "list the pool's reservations", |c, t| async {
            let sql = format!(
                "SELECT r.reservation_id, r.grant_id::text, r.phase, r.grant_digest, \
                 r.trust_revision, r.workload_id, r.attempt_id, r.reserved_source_rows, \
                 r.reserved_source_bytes, r.reserved_seconds, \
                 extract(epoch FROM r.reserved_at_utc)::bigint, s.measured_source_rows, \
                 s.measured_source_bytes, s.measured_http_bytes, s.outcome, \
                 extract(epoch FROM k.claimed_at_utc)::bigint, \
                 (SELECT coalesce(array_agg(p.connection_role || ' ' || p.participant_id \
                    || ' ' || p.identity_digest ORDER BY p.connection_role), '{{}}') \
                    FROM {rp} p WHERE p.reservation_id = r.reservation_id) \
                 FROM {r} r LEFT JOIN {s} s USING (reservation_id) \
                 LEFT JOIN {k} k ON k.reservation_id = r.reservation_id \
                 WHERE r.environment_id = $1::text::uuid AND r.campaign_id = $2::text::uuid \
                 AND r.phase = $3 AND r.route IS NOT DISTINCT FROM $4::text[] \
                 ORDER BY r.reserved_at_utc, r.reservation_id LIMIT $5",
                r = t.reservation,
                s = t.settlement,
                k = t.run_claim,
                rp = t.run_participant,
            );
            let rows = c
                .query(&sql, &[&env, &campaign, &phase, &route, &limit])
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for row in rows {
                let id = stored(Sha256Digest::parse("reservation_id", row.get(0)))?;
                let settlement = settlement_columns(&row, &id)?;
                out.push(ListedReservation {
                    reservation: Reservation {
                        reservation_id: id,
                        grant: GrantKey {
                            grant_id: stored(Uuid::parse("grant_id", row.get(1)))?,
                            phase: phase_of(row.get(2))?,
                        },
                        grant_digest: stored(Sha256Digest::parse("grant_digest", row.get(3)))?,
                        trust_revision: row.get(4),
                        workload: stored(WorkloadId::new(row.get(5)))?,
                        attempt: stored(AttemptId::new(row.get(6)))?,
                        source_rows: row.get(7),
                        source_bytes: row.get(8),
                        attempt_seconds: row.get(9),
                        resolved_by_probe: false,
                    },
                    reserved_at_unix: row.get(10),
                    settlement,
                    run_claimed_at_unix: row.get(15),
                    run_participants: run_participants(row.get(16))?,
                });
            }
            Ok(out)
        })
    }

    async fn claim_run(
        &self,
        reservation_id: &Sha256Digest,
        participants: &[RunParticipant],
    ) -> Result<bool> {
        let id = reservation_id.as_str().to_owned();
        let roles: Vec<&str> = participants.iter().map(|p| p.role.as_str()).collect();
        let ids: Vec<&str> = participants
            .iter()
            .map(|p| p.participant_id.as_str())
            .collect();
        let digests: Vec<&str> = participants
            .iter()
            .map(|p| p.identity_digest.as_str())
            .collect();
        read!(self, "claim the reservation's run", |c, t| async {
            // One statement: the primary key decides between concurrent claims, and the run's
            // participants are recorded only with the claim that won.
            let sql = format!(
                "WITH k AS (INSERT INTO {k} (reservation_id, claimed_at_utc) \
                 VALUES ($1, clock_timestamp()) ON CONFLICT (reservation_id) DO NOTHING \
                 RETURNING reservation_id), \
                 p AS (INSERT INTO {p} (reservation_id, connection_role, participant_id, \
                 identity_digest) SELECT k.reservation_id, u.role, u.participant, u.digest \
                 FROM k, unnest($2::text[], $3::text[], $4::text[]) AS u(role, participant, digest)) \
                 SELECT count(*) FROM k",
                k = t.run_claim,
                p = t.run_participant,
            );
            let row = c.query_one(&sql, &[&id, &roles, &ids, &digests]).await?;
            Ok(row.get::<_, i64>(0) == 1)
        })
    }

    async fn reservation_authority(
        &self,
        reservation_id: &Sha256Digest,
    ) -> Result<Option<ReservationAuthority>> {
        let id = reservation_id.as_str().to_owned();
        read!(self, "read the reservation's authority", |c, t| async {
            // One statement: one snapshot and one database clock for every check.
            let sql = format!(
                "SELECT r.reservation_id, r.grant_id::text, r.phase, r.grant_digest, \
                 r.trust_revision, r.workload_id, r.attempt_id, r.reserved_source_rows, \
                 r.reserved_source_bytes, r.reserved_seconds, \
                 extract(epoch FROM r.reserved_at_utc)::bigint, s.measured_source_rows, \
                 s.measured_source_bytes, s.measured_http_bytes, s.outcome, \
                 r.environment_id::text, g.revocation_epoch, g.grant_digest, \
                 clock_timestamp() >= g.not_after_utc, clock_timestamp() < g.not_before_utc, \
                 clock_timestamp() >= r.reserved_at_utc + r.reserved_seconds * interval '1 second', \
                 a.policy_digest, cur.revision, cur.policy_digest, cur.revocation_epoch, \
                 clock_timestamp() < (SELECT max(recorded_at_utc) FROM {tr} \
                    WHERE environment_id = r.environment_id), \
                 w.pack_digest, \
                 floor(extract(epoch FROM r.reserved_at_utc \
                    + r.reserved_seconds * interval '1 second' - clock_timestamp()) * 1000)::bigint, \
                 extract(epoch FROM k.claimed_at_utc)::bigint \
                 FROM {r} r LEFT JOIN {s} s USING (reservation_id) \
                 LEFT JOIN {k} k ON k.reservation_id = r.reservation_id \
                 LEFT JOIN {g} g ON g.grant_id = r.grant_id AND g.phase = r.phase \
                 LEFT JOIN {w} w ON w.grant_id = r.grant_id AND w.phase = r.phase \
                    AND w.workload_id = r.workload_id \
                 LEFT JOIN {tr} a ON a.environment_id = r.environment_id \
                    AND a.revision = r.trust_revision \
                 LEFT JOIN LATERAL (SELECT revision, policy_digest, revocation_epoch FROM {tr} \
                    WHERE environment_id = r.environment_id ORDER BY revision DESC LIMIT 1) cur \
                    ON true \
                 WHERE r.reservation_id = $1",
                r = t.reservation,
                s = t.settlement,
                g = t.registration,
                tr = t.trust,
                w = t.workload,
                k = t.run_claim,
            );
            let Some(row) = c.query_opt(&sql, &[&id]).await? else {
                return Ok(None);
            };
            let Some(pack_digest) = row.get::<_, Option<String>>(26) else {
                return refuse(
                    StoreCode::StoredStateInvalid,
                    "a reservation's workload is not in its grant's registered membership",
                );
            };
            let rid = stored(Sha256Digest::parse("reservation_id", row.get(0)))?;
            let grant_digest: String = row.get(3);
            let registered_digest: Option<String> = row.get(17);
            let admitted_policy: Option<String> = row.get(21);
            let (Some(registered_digest), Some(admitted_policy)) =
                (registered_digest, admitted_policy)
            else {
                return refuse(
                    StoreCode::StoredStateInvalid,
                    "a reservation's registration or trust revision is missing",
                );
            };
            if registered_digest != grant_digest {
                return refuse(
                    StoreCode::StoredStateInvalid,
                    "a reservation names another grant digest than its registration",
                );
            }
            let settlement = settlement_columns(&row, &rid)?;
            let current_revision: Option<i64> = row.get(22);
            let current_trust = match current_revision {
                None => None,
                Some(revision) => Some(CurrentTrust {
                    revision,
                    policy_digest: stored(Sha256Digest::parse("policy_digest", row.get(23)))?,
                    revocation_epoch: row.get(24),
                }),
            };
            Ok(Some(ReservationAuthority {
                listed: ListedReservation {
                    reservation: Reservation {
                        reservation_id: rid,
                        grant: GrantKey {
                            grant_id: stored(Uuid::parse("grant_id", row.get(1)))?,
                            phase: phase_of(row.get(2))?,
                        },
                        grant_digest: stored(Sha256Digest::parse("grant_digest", &grant_digest))?,
                        trust_revision: row.get(4),
                        workload: stored(WorkloadId::new(row.get(5)))?,
                        attempt: stored(AttemptId::new(row.get(6)))?,
                        source_rows: row.get(7),
                        source_bytes: row.get(8),
                        attempt_seconds: row.get(9),
                        resolved_by_probe: false,
                    },
                    reserved_at_unix: row.get(10),
                    settlement,
                    run_claimed_at_unix: row.get(28),
                    run_participants: Vec::new(),
                },
                environment: stored(Uuid::parse("environment", row.get(15)))?,
                grant_revocation_epoch: row.get(16),
                grant_expired: row.get(18),
                grant_not_yet_valid: row.get(19),
                attempt_window_elapsed: row.get(20),
                attempt_millis_remaining: row.get(27),
                pack_digest: stored(Sha256Digest::parse("pack_digest", &pack_digest))?,
                admitted_policy_digest: stored(Sha256Digest::parse(
                    "policy_digest",
                    &admitted_policy,
                ))?,
                current_trust,
                clock_backwards: row.get::<_, Option<bool>>(25).unwrap_or(false),
            }))
        })
    }

    async fn history(&self, grant: &GrantKey) -> Result<Option<RegistrationHistory>> {
        let (id, phase) = (grant.grant_id.as_str().to_owned(), grant.phase);
        read!(self, "read the registration", |c, t| async {
            let Some(row) = c
                .query_opt(
                    &format!(
                        "SELECT environment_id::text, trust_revision, grant_digest, \
                         original_bytes, extract(epoch FROM registered_at_utc)::bigint, \
                         extract(epoch FROM not_after_utc)::bigint, revocation_epoch \
                         FROM {} WHERE grant_id = $1::text::uuid AND phase = $2",
                        t.registration
                    ),
                    &[&id, &phase.as_str()],
                )
                .await?
            else {
                return Ok(None);
            };
            let env: String = row.get(0);
            let Some(trust) = Self::trust_at(c, t, &env, Some(row.get(1))).await? else {
                return refuse(
                    StoreCode::StoredStateInvalid,
                    "a registration's trust revision is missing",
                );
            };
            Ok(Some(RegistrationHistory {
                key: GrantKey {
                    grant_id: stored(Uuid::parse("grant_id", &id))?,
                    phase,
                },
                grant_digest: stored(Sha256Digest::parse("grant_digest", row.get(2)))?,
                original_bytes: row.get(3),
                trust,
                registered_at_unix: row.get(4),
                not_after_unix: row.get(5),
                revocation_epoch: row.get(6),
            }))
        })
    }
}

/// The settlement columns of a reservation row (measured rows, bytes and HTTP bytes at 11..=13,
/// the outcome at 14), shared by every query that lists reservations with their settlement.
fn settlement_columns(
    row: &tokio_postgres::Row,
    reservation_id: &Sha256Digest,
) -> Tx<Option<Settlement>> {
    let Some(outcome) = row.get::<_, Option<&str>>(14) else {
        return Ok(None);
    };
    let outcome = match outcome {
        "succeeded" => AttemptOutcome::Succeeded,
        "failed" => AttemptOutcome::Failed,
        "incomplete" => AttemptOutcome::Incomplete,
        _ => {
            return refuse(
                StoreCode::StoredStateInvalid,
                "stored outcome is not an outcome",
            );
        }
    };
    Ok(Some(Settlement {
        reservation_id: reservation_id.clone(),
        measured_source_rows: row.get(11),
        measured_source_bytes: row.get(12),
        measured_http_bytes: row.get(13),
        outcome,
    }))
}

/// The run participants of a listing (`role participant digest` per element).
fn run_participants(rows: Vec<String>) -> Tx<Vec<RunParticipant>> {
    rows.iter()
        .map(|r| {
            let mut it = r.split(' ');
            let (Some(role), Some(id), Some(digest), None) =
                (it.next(), it.next(), it.next(), it.next())
            else {
                return refuse(
                    StoreCode::StoredStateInvalid,
                    "a run participant row is malformed",
                );
            };
            let role = match role {
                "source" => ConnectionRole::Source,
                "target" => ConnectionRole::Target,
                "state" => ConnectionRole::State,
                _ => {
                    return refuse(
                        StoreCode::StoredStateInvalid,
                        "a run participant has an unknown role",
                    );
                }
            };
            Ok(RunParticipant {
                role,
                participant_id: id.to_owned(),
                identity_digest: stored(Sha256Digest::parse("identity_digest", digest))?,
            })
        })
        .collect()
}
