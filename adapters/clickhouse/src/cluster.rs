//! [`ClickHouseCluster`]: the engine's authority, inventory, member catalog and cluster DDL
//! ports over the `clickhouse` crate (HTTP).
//!
//! One coordinator endpoint serves `system.clusters`, the KeeperMap authority facade, `ON
//! CLUSTER` DDL and queue observation; every member is reached directly through its own client
//! built from the already-resolved credential. Mutations (create, load, drop, authority writes,
//! cluster DDL) go through one-shot clients whose HTTP layer never retries or replays a request
//! and keeps no idle connections. The adapter owns a single-threaded Tokio runtime and blocks
//! on it, so the engine stays synchronous; do not call it from inside another Tokio runtime.
//!
//! ## TLS
//!
//! An `https://` endpoint is reached over rustls 0.23 (the host's one TLS stack, the aws-lc-rs
//! provider passed explicitly) through `hyper-rustls`, HTTP/1.1 only, and its clients speak
//! nothing but TLS: the server's certificate must chain to the endpoint's pinned CA bundle
//! (`sslrootcert`, PEM, read once through the bounded reader of regular files, at most
//! [`MAX_CA_BUNDLE_BYTES`]) when one is given, else to the system's roots, and must name the
//! URL's host. There is no option to skip verification and no client certificate. An
//! `http://` endpoint's clients never negotiate TLS (which plaintext URLs the credential may
//! travel to is the registry's rule). A CA bundle that cannot be used refuses the set-up
//! ([`class::TLS_ROOT_CERT`]); a server certificate that does not verify refuses the request
//! before anything is sent ([`class::TLS_CERTIFICATE`], rejected); another TLS failure is
//! [`class::TLS`], like a broken connection. Errors never carry the path or the endpoint.
//!
//! ## Body bytes sent
//!
//! Every member load records a [`BodyObservation`]: the HTTP request body bytes of its `INSERT
//! … FORMAT RowBinary`, counted at the sender as each chunk is accepted by the client's body
//! stream, and whether the server acknowledged the end of the insert. The `clickhouse` crate
//! is built without its compression features, so the body is the artifact's `RowBinary`
//! bytes exactly as sent (not compressed; the chunked transfer coding's framing is not body).
//! This is a measurement separate from the source's COPY payload bytes (the spec's "source
//! bytes and actual HTTP payload bytes remain separate measurements"). A failed or ambiguous
//! send keeps its observation with `complete: false`: its count is what was handed to the
//! body stream, an upper bound of what the server received. Read them with
//! [`ClickHouseCluster::body_observations`].

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use clickhouse::Client;
use dpone_engine_clickhouse::canonical::{BucketDigest, rowset};
pub use dpone_engine_clickhouse::contracts::manifest::ClickHouseEndpoint;
use dpone_engine_clickhouse::contracts::{
    ClusterStatement, Column, Digest, MemberId, Schema, TargetKey, Uuid, member_id,
};
use dpone_engine_clickhouse::ports::{
    AuthorityStore, CandidateSpec, ClusterDdl, DdlCorrelation, InventoryPort, InventoryRow,
    LoadTokens, MEMBER_IDENTITY_UNPROVEN, MemberCatalog, MemberProbe, PortError, QueueEntry,
    QueueHostStatus, TableObservation, Versioned,
};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::rt::TokioExecutor;
use serde::Deserialize;

use crate::error::{class, port_error};
use crate::sql::{self, Statement};

/// A user name and password resolved once by the composition root. `Debug` never shows the
/// password.
#[derive(Clone)]
pub struct Credential {
    /// User.
    pub user: String,
    /// Password.
    pub password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Where and how to connect.
#[derive(Clone, Debug)]
pub struct ClickHouseConfig {
    /// The coordinator endpoint (`http://` or `https://`, with its pinned CA).
    pub coordinator_url: ClickHouseEndpoint,
    /// Each member's endpoint, keyed by (shard_num, replica_num).
    pub member_urls: BTreeMap<(u32, u32), ClickHouseEndpoint>,
    /// The resolved credential, copied into every member client.
    pub credential: Credential,
    /// Database of the KeeperMap authority facade.
    pub authority_database: String,
    /// Table of the KeeperMap authority facade.
    pub authority_table: String,
    /// The cluster whose `system.clusters` rows identify the members. Empty: one server
    /// (local publication) — its only member is `(1, 1)` at the coordinator URL, the inventory
    /// is that one row (no `system.clusters` is read), and DDL runs on it without `ON CLUSTER`.
    pub cluster: String,
    /// `distributed_ddl_task_timeout` for cluster DDL, in seconds.
    pub ddl_task_timeout_secs: u64,
    /// Client-side bound on one request (and on each chunk of a streamed response), in
    /// seconds. A mutation that exceeds it is ambiguous (its effect may still land); a read
    /// that exceeds it is unavailable.
    pub request_timeout_secs: u64,
}

struct Clients {
    read: Client,
    once: Client,
}

/// One member load's HTTP body, as measured at the sender.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyObservation {
    /// The member loaded.
    pub member: MemberId,
    /// Request body bytes accepted by the client's body stream (uncompressed: see the module
    /// docs).
    pub body_bytes: u64,
    /// The server acknowledged the insert (`false`: failed or ambiguous; an upper bound).
    pub complete: bool,
}

/// The real cluster behind the engine's ports.
pub struct ClickHouseCluster {
    rt: tokio::runtime::Runtime,
    coordinator: Clients,
    members: BTreeMap<MemberId, Clients>,
    cluster: String,
    authority: (String, String),
    ddl_timeout: u64,
    request_timeout: Duration,
    hosts: Mutex<BTreeMap<(String, u16), MemberId>>,
    sent: Mutex<Vec<BodyObservation>>,
    /// The verification-time budget of one content proof, in seconds, enforced by the member
    /// (`max_execution_time`); `None`: only the request timeout bounds it.
    proof_time_limit: Option<Duration>,
}

/// The largest `sslrootcert` CA bundle read (a full system bundle is about 220 KB).
pub const MAX_CA_BUNDLE_BYTES: u64 = 1 << 20;

/// TCP keepalive of every connection (the `clickhouse` crate's default).
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);
/// Idle timeout of the read clients' pooled connections (the `clickhouse` crate's default,
/// below the server's 3 s keep-alive).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(2);

/// A `clickhouse` client over `connector`. `one_shot`: its HTTP layer never retries a request
/// (not even one it believes was not sent) and keeps no idle connection that a later mutation
/// could be replayed on; otherwise the `clickhouse` crate's default pool (reads).
fn client_over<C>(connector: C, one_shot: bool) -> Client
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let mut builder = HttpClient::builder(TokioExecutor::new());
    if one_shot {
        builder
            .retry_canceled_requests(false)
            .pool_max_idle_per_host(0);
    } else {
        builder.pool_idle_timeout(POOL_IDLE_TIMEOUT);
    }
    Client::with_http_client(builder.build(connector))
}

/// A client for an `http://` endpoint (no TLS) or, with `tls`, an `https://` one (TLS only).
fn http_client(tls: Option<&rustls::ClientConfig>, one_shot: bool) -> Client {
    let mut connector = HttpConnector::new();
    connector.set_keepalive(Some(TCP_KEEPALIVE));
    match tls {
        None => client_over(connector, one_shot),
        Some(config) => {
            // The TLS layer takes the `https://` URL; the TCP layer below it may not refuse it.
            connector.enforce_http(false);
            let https = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(config.clone())
                .https_only()
                .enable_http1()
                .wrap_connector(connector);
            client_over(https, one_shot)
        }
    }
}

/// The TLS configurations of a cluster's `https://` endpoints, one per distinct pinned CA
/// (each bundle, or the system's roots, is read once).
#[derive(Default)]
struct TlsConfigs(BTreeMap<Option<String>, Arc<rustls::ClientConfig>>);

impl TlsConfigs {
    fn for_endpoint(
        &mut self,
        endpoint: &ClickHouseEndpoint,
    ) -> Result<Option<Arc<rustls::ClientConfig>>, PortError> {
        if !endpoint.is_tls() {
            return Ok(None);
        }
        if let Some(c) = self.0.get(&endpoint.sslrootcert) {
            return Ok(Some(c.clone()));
        }
        let c = Arc::new(tls_config(endpoint.sslrootcert.as_deref())?);
        self.0.insert(endpoint.sslrootcert.clone(), c.clone());
        Ok(Some(c))
    }
}

/// Chain and host name verified against `ca_file`'s certificates, else the system's roots.
fn tls_config(ca_file: Option<&str>) -> Result<rustls::ClientConfig, PortError> {
    let invalid = || PortError::rejected(class::TLS_ROOT_CERT);
    let certs: Vec<rustls::pki_types::CertificateDer<'static>> = match ca_file {
        Some(path) => {
            use rustls::pki_types::pem::PemObject as _;
            let pem = dpone_boundary::read::read_regular(Path::new(path), MAX_CA_BUNDLE_BYTES)
                .map_err(|_| invalid())?;
            rustls::pki_types::CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|_| invalid())?
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() && !found.errors.is_empty() {
                return Err(invalid());
            }
            found.certs
        }
    };
    let mut roots = rustls::RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(invalid());
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| invalid())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn clients(
    endpoint: &ClickHouseEndpoint,
    c: &Credential,
    tls: &mut TlsConfigs,
) -> Result<Clients, PortError> {
    let config = tls.for_endpoint(endpoint)?;
    let build = |one_shot: bool| {
        http_client(config.as_deref(), one_shot)
            .with_url(endpoint.url.as_str())
            .with_user(c.user.clone())
            .with_password(c.password.clone())
            .with_validation(false)
    };
    Ok(Clients {
        read: build(false),
        once: build(true),
    })
}

#[derive(clickhouse::Row, Deserialize)]
struct ClusterRow {
    shard_num: u32,
    replica_num: u32,
    host_name: String,
    port: u16,
    internal_replication: u8,
}

#[derive(clickhouse::Row, Deserialize)]
struct AuthorityRow {
    value: String,
    version: u64,
}

#[derive(clickhouse::Row, Deserialize)]
struct TableRow {
    uuid: String,
    engine: String,
}

#[derive(clickhouse::Row, Deserialize)]
struct BucketRow {
    bucket: u8,
    rows: u64,
    digest: String,
}

#[derive(clickhouse::Row, Deserialize)]
struct PartRow {
    name: String,
    hash: String,
    rows: u64,
}

#[derive(clickhouse::Row, Deserialize)]
struct ColumnRow {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
}

#[derive(clickhouse::Row, Deserialize)]
struct QueueRow {
    entry: String,
    host: String,
    port: u16,
    status: String,
    exception_code: i64,
}

fn build(client: &Client, s: &Statement) -> clickhouse::query::Query {
    let mut q = client.query_raw(&s.sql);
    for (k, v) in &s.settings {
        q = q.with_setting(*k, v.clone());
    }
    for (k, v) in &s.params {
        q = q.param(k, v.as_str());
    }
    q
}

fn stmt(r: Result<Statement, sql::SqlError>) -> Result<Statement, PortError> {
    r.map_err(|_| PortError::rejected(class::STATEMENT))
}

impl ClickHouseCluster {
    /// Builds every client (reading each pinned CA bundle, or the system's roots, once for the
    /// `https://` endpoints); connects lazily.
    pub fn new(config: &ClickHouseConfig) -> Result<Self, PortError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|_| PortError::unavailable("DPONE_CLICKHOUSE_RUNTIME"))?;
        let mut tls = TlsConfigs::default();
        let coordinator = clients(&config.coordinator_url, &config.credential, &mut tls)?;
        let members = config
            .member_urls
            .iter()
            .map(|((s, r), endpoint)| {
                Ok((
                    member_id(*s, *r),
                    clients(endpoint, &config.credential, &mut tls)?,
                ))
            })
            .collect::<Result<_, PortError>>()?;
        Ok(Self {
            rt,
            coordinator,
            members,
            cluster: config.cluster.clone(),
            authority: (
                config.authority_database.clone(),
                config.authority_table.clone(),
            ),
            ddl_timeout: config.ddl_task_timeout_secs,
            request_timeout: Duration::from_secs(config.request_timeout_secs.max(1)),
            hosts: Mutex::new(BTreeMap::new()),
            sent: Mutex::new(Vec::new()),
            proof_time_limit: None,
        })
    }

    /// The verification-time budget: each content proof a member computes (the rowset query)
    /// or streams (the canonical read) is stopped by the member itself once `limit` has
    /// elapsed (`max_execution_time`, to the millisecond, at least 1 ms;
    /// `timeout_overflow_mode = 'throw'`), and reported as
    /// [`dpone_engine_clickhouse::ports::PROOF_BUDGET_EXCEEDED`] — never as an outage to
    /// retry. The request timeout still bounds every request.
    pub fn set_proof_time_limit(&mut self, limit: Duration) {
        self.proof_time_limit = Some(limit.max(Duration::from_millis(1)));
    }

    /// `s` under the verification-time budget.
    fn proof_statement(&self, s: Statement) -> Statement {
        match self.proof_time_limit {
            None => s,
            Some(limit) => s
                .with_setting(
                    "max_execution_time",
                    format!("{}.{:03}", limit.as_secs(), limit.subsec_millis()),
                )
                .with_setting("timeout_overflow_mode", "throw".to_owned()),
        }
    }

    /// A proof's failure: the member's own time limit is the budget, not an outage.
    fn proof_failure(&self, e: PortError) -> PortError {
        if self.proof_time_limit.is_some() && e.class == class::SERVER_TIMEOUT {
            PortError::rejected(dpone_engine_clickhouse::ports::PROOF_BUDGET_EXCEEDED)
        } else {
            e
        }
    }

    /// The body of every member load so far, in order (one per `INSERT` started).
    pub fn body_observations(&self) -> Vec<BodyObservation> {
        self.sent.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn member(&self, id: &MemberId) -> Result<&Clients, PortError> {
        self.members
            .get(id)
            .ok_or(PortError::unavailable(class::UNKNOWN_MEMBER))
    }

    fn fetch<T>(&self, client: &Client, s: &Statement) -> Result<Vec<T>, PortError>
    where
        T: clickhouse::RowOwned + clickhouse::RowRead,
    {
        self.bounded(build(client, s).fetch_all::<T>(), false)
    }

    fn execute_once(&self, client: &Client, s: &Statement) -> Result<(), PortError> {
        self.bounded(build(client, s).execute(), true)
    }

    /// Runs one client future under the request timeout.
    fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = clickhouse::error::Result<T>>,
        mutation: bool,
    ) -> Result<T, PortError> {
        let timeout = self.request_timeout;
        self.rt
            .block_on(async move { tokio::time::timeout(timeout, fut).await })
            .unwrap_or(Err(clickhouse::error::Error::TimedOut))
            .map_err(|e| port_error(&e, mutation))
    }

    fn scalar_u64(&self, client: &Client, s: &Statement) -> Result<u64, PortError> {
        #[derive(clickhouse::Row, Deserialize)]
        struct N {
            n: u64,
        }
        Ok(self.fetch::<N>(client, s)?.first().map_or(0, |r| r.n))
    }

    fn table_uuid(
        &self,
        client: &Client,
        database: &str,
        name: &str,
    ) -> Result<Option<(Uuid, String)>, PortError> {
        let rows: Vec<TableRow> = self.fetch(client, &sql::table_info(database, name))?;
        match rows.first() {
            None => Ok(None),
            Some(r) => Ok(Some((
                Uuid::parse(&r.uuid).ok_or(PortError::rejected(class::DECODE))?,
                r.engine.clone(),
            ))),
        }
    }
}

impl AuthorityStore for ClickHouseCluster {
    fn read(&self, key: &TargetKey) -> Result<Option<Versioned>, PortError> {
        let s = stmt(sql::authority_read(
            &self.authority.0,
            &self.authority.1,
            &key.to_string(),
        ))?;
        let rows: Vec<AuthorityRow> = self.fetch(&self.coordinator.read, &s)?;
        Ok(rows.into_iter().next().map(|r| Versioned {
            version: r.version,
            value: r.value,
        }))
    }

    fn insert(&self, key: &TargetKey, value: &str) -> Result<(), PortError> {
        let s = stmt(sql::authority_insert(
            &self.authority.0,
            &self.authority.1,
            &key.to_string(),
            value,
        ))?;
        self.execute_once(&self.coordinator.once, &s)
    }

    fn update(&self, key: &TargetKey, expected: u64, value: &str) -> Result<(), PortError> {
        let s = stmt(sql::authority_update(
            &self.authority.0,
            &self.authority.1,
            &key.to_string(),
            expected,
            value,
        ))?;
        self.execute_once(&self.coordinator.once, &s)
    }
}

impl InventoryPort for ClickHouseCluster {
    fn observe(&self, cluster: &str) -> Result<(Vec<InventoryRow>, bool), PortError> {
        if self.cluster.is_empty() {
            return self.local_inventory(cluster);
        }
        let rows: Vec<ClusterRow> = self.fetch(&self.coordinator.read, &sql::inventory(cluster))?;
        let mut hosts = BTreeMap::new();
        let mut out = Vec::new();
        for r in &rows {
            let id = member_id(r.shard_num, r.replica_num);
            hosts.insert((r.host_name.clone(), r.port), id);
            out.push(InventoryRow {
                shard_num: r.shard_num,
                replica_num: r.replica_num,
                internal_replication: r.internal_replication != 0,
                endpoint_digest: Digest::of(format!("{}:{}", r.host_name, r.port).as_bytes()),
            });
        }
        // Complete only when every row has a configured direct member connection.
        let complete = !out.is_empty()
            && out.iter().all(|r| {
                self.members
                    .contains_key(&member_id(r.shard_num, r.replica_num))
            });
        // A configured member the cluster does not list is refused: the registry and the
        // topology disagree, and no member may be guessed.
        if complete {
            let listed: std::collections::BTreeSet<MemberId> = out
                .iter()
                .map(|r| member_id(r.shard_num, r.replica_num))
                .collect();
            if self.members.keys().any(|id| !listed.contains(id)) {
                return Err(PortError::rejected(class::MEMBER_EXTRA));
            }
        }
        *self.hosts.lock().unwrap_or_else(|p| p.into_inner()) = hosts;
        Ok((out, complete))
    }
}

impl ClickHouseCluster {
    /// One server's inventory: the one member `(1, 1)` the connection configures, without
    /// replication, once the server answers (an unreachable server is an outage, not an empty
    /// inventory). Its endpoint digest is the server's own `serverUUID()`, so a URL that comes
    /// to reach another server drifts the inventory and fences the operation.
    fn local_inventory(&self, cluster: &str) -> Result<(Vec<InventoryRow>, bool), PortError> {
        #[derive(clickhouse::Row, Deserialize)]
        struct Server {
            server_uuid: String,
        }
        if !cluster.is_empty() {
            return Err(PortError::rejected(class::MEMBER_EXTRA));
        }
        let id = member_id(1, 1);
        let c = self.member(&id)?;
        let found: Vec<Server> = self.fetch(&c.read, &sql::server_uuid())?;
        let [server] = found.as_slice() else {
            return Err(PortError::rejected(MEMBER_IDENTITY_UNPROVEN));
        };
        Ok((
            vec![InventoryRow {
                shard_num: 1,
                replica_num: 1,
                internal_replication: false,
                endpoint_digest: Digest::of(server.server_uuid.as_bytes()),
            }],
            self.members.len() == 1,
        ))
    }

    /// Proves that a member's connection reaches the replica it is configured as: the server's
    /// own `system.clusters` must mark exactly one row of the cluster `is_local`, and that row
    /// must be the configured `(shard_num, replica_num)`. Swapped URLs, two members on one
    /// server, or a server that calls several replicas (or none) itself are refused.
    fn verify_identity(
        &self,
        member: &MemberId,
        c: &Clients,
        cluster: &str,
    ) -> Result<(), PortError> {
        // One server: the connection is the server; there is no replica to prove.
        if self.cluster.is_empty() {
            return Ok(());
        }
        #[derive(clickhouse::Row, Deserialize)]
        struct Local {
            shard_num: u32,
            replica_num: u32,
        }
        let local: Vec<Local> = self.fetch(&c.read, &sql::local_replica(cluster))?;
        match local.as_slice() {
            [one] if member_id(one.shard_num, one.replica_num) == *member => Ok(()),
            _ => Err(PortError::rejected(MEMBER_IDENTITY_UNPROVEN)),
        }
    }
}

/// One member's physical identity of a participant database, as the member itself reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedMember {
    /// The shard the member's own `system.clusters` marks local.
    pub shard_num: u32,
    /// The replica the member's own `system.clusters` marks local.
    pub replica_num: u32,
    /// `serverUUID()`, as the member renders it.
    pub server_uuid: String,
    /// `system.databases.uuid` of the database, as the member renders it.
    pub database_uuid: String,
}

impl ClickHouseCluster {
    /// The physical identity of `database` on every member of the cluster, for enrollment and
    /// for a run's binding: the cluster's inventory must be complete (every member it lists has
    /// a configured connection, and no configured one is unlisted), each member's connection
    /// must reach the replica it is configured as (its own `system.clusters`), and each member
    /// reports its `serverUUID()` and the database's UUID (exactly one database of that name).
    /// Ordered by `(shard_num, replica_num)`.
    pub fn observe_participant(&self, database: &str) -> Result<Vec<ObservedMember>, PortError> {
        #[derive(clickhouse::Row, Deserialize)]
        struct Identity {
            server_uuid: String,
            database_uuid: String,
        }
        let (rows, complete) = self.observe(&self.cluster)?;
        if !complete {
            // A member the cluster lists has no configured connection: it cannot be observed.
            return Err(PortError::rejected(class::UNKNOWN_MEMBER));
        }
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let id = member_id(r.shard_num, r.replica_num);
            let c = self.member(&id)?;
            self.verify_identity(&id, c, &self.cluster)?;
            let found: Vec<Identity> = self.fetch(&c.read, &sql::database_identity(database))?;
            let [one] = found.as_slice() else {
                return Err(PortError::rejected(MEMBER_IDENTITY_UNPROVEN));
            };
            out.push(ObservedMember {
                shard_num: r.shard_num,
                replica_num: r.replica_num,
                server_uuid: one.server_uuid.clone(),
                database_uuid: one.database_uuid.clone(),
            });
        }
        out.sort_by_key(|m| (m.shard_num, m.replica_num));
        Ok(out)
    }
}

/// A blocking `Read` over a streaming `RowBinary` response.
struct StreamReader<'a> {
    rt: &'a tokio::runtime::Runtime,
    timeout: Duration,
    cursor: clickhouse::query::BytesCursor,
    chunk: Bytes,
    done: bool,
}

impl Read for StreamReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.chunk.is_empty() && !self.done {
            let next = self
                .rt
                .block_on(async { tokio::time::timeout(self.timeout, self.cursor.next()).await });
            match next {
                Ok(Ok(Some(b))) => self.chunk = b,
                Ok(Ok(None)) => self.done = true,
                Ok(Err(_)) => return Err(io::Error::other("row stream failed")),
                Err(_) => return Err(io::Error::other("row stream timed out")),
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk[..n]);
        let _ = self.chunk.split_to(n);
        Ok(n)
    }
}

impl MemberCatalog for ClickHouseCluster {
    fn probe(
        &self,
        member: &MemberId,
        database: &str,
        target: &str,
    ) -> Result<MemberProbe, PortError> {
        let c = self.member(member)?;
        self.verify_identity(member, c, &self.cluster)?;
        #[derive(clickhouse::Row, Deserialize)]
        struct Engine {
            engine: String,
        }
        #[derive(clickhouse::Row, Deserialize)]
        struct Facade {
            engine_full: String,
        }
        let db: Vec<Engine> = self.fetch(&c.read, &sql::database_engine(database))?;
        let facade: Vec<Facade> = self.fetch(
            &c.read,
            &sql::keeper_map_facade(&self.authority.0, &self.authority.1),
        )?;
        let facade = facade.into_iter().next().map(|f| f.engine_full);
        let rowset = self.scalar_u64(&c.read, &sql::rowset_function())?;
        Ok(MemberProbe {
            database_engine: db.into_iter().next().map(|e| e.engine).unwrap_or_default(),
            keeper_map_available: facade.is_some(),
            target_engine: self.table_uuid(&c.read, database, target)?.map(|(_, e)| e),
            rowset_proof_supported: rowset == 1,
            authority_facade: facade,
        })
    }

    fn observe_table(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
    ) -> Result<Option<TableObservation>, PortError> {
        let c = self.member(member)?;
        let Some((uuid, engine)) = self.table_uuid(&c.read, database, name)? else {
            return Ok(None);
        };
        let columns: Vec<ColumnRow> = self.fetch(&c.read, &sql::table_columns(database, name))?;
        let row_count = self.scalar_u64(&c.read, &stmt(sql::table_count(database, name))?)?;
        // The table must still be the one observed.
        match self.table_uuid(&c.read, database, name)? {
            Some((u, _)) if u == uuid => {}
            _ => return Err(PortError::ambiguous(class::UUID_MISMATCH)),
        }
        Ok(Some(TableObservation {
            uuid,
            engine,
            columns: columns
                .into_iter()
                .map(|c| Column {
                    name: c.name,
                    type_name: c.type_name,
                })
                .collect(),
            row_count,
        }))
    }

    fn read_rows<'a>(
        &'a self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        schema: &Schema,
    ) -> Result<Box<dyn Read + 'a>, PortError> {
        let c = self.member(member)?;
        match self.table_uuid(&c.read, database, name)? {
            Some((u, _)) if u == uuid => {}
            _ => return Err(PortError::rejected(class::UUID_MISMATCH)),
        }
        let s = self.proof_statement(stmt(sql::read_rows(database, name, schema))?);
        let cursor = build(&c.read, &s)
            .fetch_bytes("RowBinary")
            .map_err(|e| self.proof_failure(port_error(&e, false)))?;
        Ok(Box::new(StreamReader {
            rt: &self.rt,
            timeout: self.request_timeout,
            cursor,
            chunk: Bytes::new(),
            done: false,
        }))
    }

    fn rowset_buckets(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        schema: &Schema,
    ) -> Result<Vec<BucketDigest>, PortError> {
        let c = self.member(member)?;
        match self.table_uuid(&c.read, database, name)? {
            Some((u, _)) if u == uuid => {}
            _ => return Err(PortError::rejected(class::UUID_MISMATCH)),
        }
        let s = self.proof_statement(stmt(sql::rowset_buckets(database, name, schema))?);
        let rows: Vec<BucketRow> = self.fetch(&c.read, &s).map_err(|e| self.proof_failure(e))?;
        // The engine checks order, emptiness and the total.
        if rows.len() > rowset::MAX_BUCKETS {
            return Err(PortError::rejected(class::DECODE));
        }
        rows.into_iter()
            .map(|r| {
                rowset::bucket_from_reply(r.bucket, r.rows, &r.digest)
                    .map_err(|_| PortError::rejected(class::DECODE))
            })
            .collect()
    }

    fn create_candidate(
        &self,
        member: &MemberId,
        spec: &CandidateSpec<'_>,
    ) -> Result<(), PortError> {
        let c = self.member(member)?;
        self.execute_once(&c.once, &stmt(sql::create_candidate(spec))?)
    }

    fn load(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        artifact: &mut dyn Read,
        tokens: &LoadTokens,
    ) -> Result<(), PortError> {
        let c = self.member(member)?;
        match self.table_uuid(&c.read, database, name)? {
            Some((u, _)) if u == uuid => {}
            _ => return Err(PortError::rejected(class::UUID_MISMATCH)),
        }
        let columns: Vec<ColumnRow> = self.fetch(&c.read, &sql::table_columns(database, name))?;
        let schema = Schema {
            columns: columns
                .into_iter()
                .map(|c| Column {
                    name: c.name,
                    type_name: c.type_name,
                })
                .collect(),
        };
        let s = stmt(sql::load(database, name, &schema, tokens))?;
        let mut insert = c.once.insert_formatted_with(s.sql.clone());
        for (k, v) in &s.settings {
            insert = insert.with_setting(*k, v.clone());
        }
        let mut buf = vec![0u8; 1 << 20];
        let timeout = self.request_timeout;
        let bounded = |r: Result<clickhouse::error::Result<()>, tokio::time::error::Elapsed>| {
            r.unwrap_or(Err(clickhouse::error::Error::TimedOut))
                .map_err(|e| port_error(&e, true))
        };
        let mut body_bytes: u64 = 0;
        let result = self.rt.block_on(async {
            loop {
                let n = artifact
                    .read(&mut buf)
                    .map_err(|_| PortError::ambiguous(class::ARTIFACT_READ))?;
                if n == 0 {
                    break;
                }
                bounded(
                    tokio::time::timeout(timeout, insert.send(Bytes::copy_from_slice(&buf[..n])))
                        .await,
                )?;
                body_bytes += n as u64;
            }
            bounded(tokio::time::timeout(timeout, insert.end()).await)
        });
        self.sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(BodyObservation {
                member: *member,
                body_bytes,
                complete: result.is_ok(),
            });
        result
    }

    fn drop_exact(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
    ) -> Result<(), PortError> {
        let c = self.member(member)?;
        match self.table_uuid(&c.read, database, name)? {
            None => Ok(()),
            Some((u, _)) if u == uuid => {
                self.execute_once(&c.once, &stmt(sql::drop_candidate(database, name))?)
            }
            Some(_) => Err(PortError::rejected(class::UUID_MISMATCH)),
        }
    }

    fn sync_replica(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
        bound: Duration,
    ) -> Result<(), PortError> {
        let c = self.member(member)?;
        match self.table_uuid(&c.read, database, name)? {
            Some((u, engine)) if u == uuid && engine.starts_with("Replicated") => {}
            _ => return Err(PortError::rejected(class::UUID_MISMATCH)),
        }
        // The server bounds the wait; the HTTP request is allowed a little longer, and both
        // stay inside the configured request timeout.
        let secs = bound
            .min(self.request_timeout.saturating_sub(Duration::from_secs(5)))
            .as_secs()
            .max(1);
        let s = stmt(sql::sync_replica(database, name, secs))?;
        match self.bounded(build(&c.read, &s).execute(), false) {
            Ok(()) => {}
            Err(e) if e.class == class::SERVER_TIMEOUT || e.class == class::TIMEOUT => {
                return Err(PortError::unavailable(
                    dpone_engine_clickhouse::ports::REPLICA_NOT_CONVERGED,
                ));
            }
            Err(e) => return Err(e),
        }
        // The table synced is still the exact replica.
        match self.table_uuid(&c.read, database, name)? {
            Some((u, _)) if u == uuid => Ok(()),
            _ => Err(PortError::rejected(class::UUID_MISMATCH)),
        }
    }

    fn parts_fingerprint(
        &self,
        member: &MemberId,
        database: &str,
        name: &str,
        uuid: Uuid,
    ) -> Result<Option<Digest>, PortError> {
        let c = self.member(member)?;
        let exact = |found: Option<(Uuid, String)>| {
            found.is_some_and(|(u, engine)| u == uuid && engine.ends_with("MergeTree"))
        };
        if !exact(self.table_uuid(&c.read, database, name)?) {
            return Ok(None);
        }
        let pending = sql::table_pending_mutations(database, name);
        let before = self.scalar_u64(&c.read, &pending)?;
        let parts: Vec<PartRow> = self.fetch(&c.read, &sql::table_parts(database, name))?;
        let after = self.scalar_u64(&c.read, &pending)?;
        // Still the same table, and no mutation that a read might already apply on the fly.
        if !exact(self.table_uuid(&c.read, database, name)?) || before != 0 || after != 0 {
            return Ok(None);
        }
        let mut h = dpone_engine_clickhouse::contracts::IdentityHasher::new(
            "dpone.clickhouse.parts-fingerprint.v1",
        )
        .str(&uuid.to_string())
        .u64(parts.len() as u64);
        for p in &parts {
            h = h.str(&p.name).str(&p.hash).u64(p.rows);
        }
        Ok(Some(h.finish()))
    }
}

impl ClusterDdl for ClickHouseCluster {
    fn dispatch(
        &self,
        cluster: &str,
        statement: &ClusterStatement,
        correlation: &DdlCorrelation,
    ) -> Result<(), PortError> {
        if self.cluster.is_empty() {
            // One server: the statement itself, once, with the correlation bound.
            let s = stmt(sql::local_ddl(statement, correlation))?;
            return self.execute_once(&self.coordinator.once, &s);
        }
        let s = stmt(sql::cluster_ddl(
            cluster,
            statement,
            correlation,
            self.ddl_timeout,
        ))?;
        self.execute_once(&self.coordinator.once, &s)
    }

    fn observe_queue(&self, cluster: &str, query_id: &str) -> Result<Vec<QueueEntry>, PortError> {
        if self.cluster.is_empty() {
            // One server has no DDL queue: a statement still running is in its process list
            // (by the bound query id); a finished one is not observable here (the engine
            // proves it by the physical tables).
            #[derive(clickhouse::Row, Deserialize)]
            struct Running {
                n: u64,
            }
            let found: Vec<Running> =
                self.fetch(&self.coordinator.read, &sql::running_query(query_id))?;
            let running = found.first().is_some_and(|r| r.n > 0);
            return Ok(if running {
                vec![QueueEntry {
                    entry: query_id.to_owned(),
                    members: vec![(member_id(1, 1), QueueHostStatus::Active)],
                    unmapped_hosts: 0,
                }]
            } else {
                Vec::new()
            });
        }
        let rows: Vec<QueueRow> =
            self.fetch(&self.coordinator.read, &sql::ddl_queue(cluster, query_id))?;
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut entries: BTreeMap<String, QueueEntry> = BTreeMap::new();
        for r in rows {
            let e = entries
                .entry(r.entry.clone())
                .or_insert_with(|| QueueEntry {
                    entry: r.entry.clone(),
                    members: Vec::new(),
                    unmapped_hosts: 0,
                });
            let status = match (r.status.as_str(), r.exception_code) {
                ("Finished", 0) => QueueHostStatus::Finished,
                ("Finished", _) => QueueHostStatus::Failed,
                ("Active", _) | ("Removing", _) => QueueHostStatus::Active,
                _ => QueueHostStatus::Queued,
            };
            match hosts.get(&(r.host, r.port)) {
                Some(id) => e.members.push((*id, status)),
                None => e.unmapped_hosts += 1,
            }
        }
        Ok(entries.into_values().collect())
    }
}
