//! Test support: a real PostgreSQL server, a fresh pair of databases per test, and a harness
//! that wires the engine with the PostgreSQL adapter and the native policy cores.
//!
//! The server URL comes from `DPONE_TEST_PG_URL`, or from the env file `.ci/start-postgres`
//! writes (`target/dpone-test-pg.env`). The crate's `build.rs` sets `cfg(dpone_live_pg)` when
//! either is there; without it every PostgreSQL-backed test is compiled as ignored with its
//! `SKIP: <reason>` (`#[cfg_attr(not(dpone_live_pg), ignore = "SKIP: ...")]`), never passed. With it, a server that cannot be reached or
//! refuses the login fails the test.
//!
//! The engine's suites (lifecycle, guards, fault matrix, concurrency, transfer) are written
//! once against [`Fixture`] and run on every target dialect (`on_every_target!`): PostgreSQL
//! always, SQL Server when `DPONE_TEST_MSSQL_URL` is set (see [`mssql`]); the source is this
//! PostgreSQL server in both.
//!
//! Tier: *real database integration* with the guard and delete-mode decisions made by the
//! policies' native cores through the same `PolicyPort` the WebAssembly components fill.
#![allow(dead_code)]

pub mod any_target;
pub mod mssql;

pub use any_target::AnyTarget;

/// The target dialect a suite variant runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// PostgreSQL (always run).
    Postgres,
    /// SQL Server (run when `DPONE_TEST_MSSQL_URL` is set; ignored with SKIP otherwise).
    SqlServer,
}

/// Generates, for each scenario `async fn name(on: Dialect)`, a module `name` with the tests
/// `postgres` and `sql_server`, so one scenario body runs unchanged on both targets.
#[macro_export]
macro_rules! on_every_target {
    ($($scenario:ident),* $(,)?) => {
        $(
            mod $scenario {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(dpone_live_pg),
                    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
                )]
                async fn postgres() {
                    super::$scenario(super::support::Dialect::Postgres).await
                }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[cfg_attr(
                    not(all(dpone_live_mssql, dpone_live_pg)),
                    ignore = "SKIP: DPONE_TEST_MSSQL_URL (SQL Server) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
                )]
                async fn sql_server() {
                    super::$scenario(super::support::Dialect::SqlServer).await
                }
            }
        )*
    };
}

use dpone_adapter_postgres::artifacts::DirArtifactStore;
use dpone_adapter_postgres::ddl::{default_state_tables, render_state_ddl, render_target_ddl};
use dpone_adapter_postgres::discover::{discover_database_pin, discover_source_authority};
use dpone_adapter_postgres::source::PgSource;
use dpone_adapter_postgres::target::PgTarget;
use dpone_engine_xmin::engine::{RunFailure, RunOutcome, RunRequest};
use dpone_engine_xmin::ports::{Judged, PolicyPort, TargetPort};
use dpone_engine_xmin::registry::{AuthorityProfile, Endpoint, EndpointSpec, Secret, SslMode};
use dpone_engine_xmin::state::{AUTHORITY_SCHEMA, AuthorityDocument};
use dpone_engine_xmin::{Manifest, Registry, Route};
use dpone_policy_model::delete_mode::{DeleteModeFacts, PlanDecision};
use dpone_policy_model::guard::{
    AuthorityAllow, Checkpoint, GuardDecision, GuardFacts, TransferBinding,
};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::{Client, Config, NoTls};

/// Environment variable holding the test password in the map environment.
pub const PASSWORD_VAR: &str = "DPONE_TEST_PG_PASSWORD";

/// A value `.ci/start-postgres` writes to its env file (`export NAME=value`), or the variable
/// itself when set.
pub fn env_file_value(name: &str) -> Option<String> {
    if let Ok(v) = std::env::var(name)
        && !v.is_empty()
    {
        return Some(v);
    }
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).ok()?;
    let prefix = format!("export {name}=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()).map(str::to_owned))
}

/// The server URL, if configured.
pub fn server_url() -> Option<String> {
    if let Ok(u) = std::env::var("DPONE_TEST_PG_URL")
        && !u.is_empty()
    {
        return Some(u);
    }
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("export DPONE_TEST_PG_URL=")
            .map(str::to_owned)
    })
}

/// A PostgreSQL-backed test runs only when a server is configured (`cfg(dpone_live_pg)`), so a
/// server that cannot be used is a failure, never a skip.
pub fn skip(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

/// Connects with a URL's settings to a given database.
pub async fn connect_to(cfg: &Config, db: &str) -> Client {
    let mut c = cfg.clone();
    c.dbname(db);
    let (client, conn) = c.connect(NoTls).await.expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A uniquely named database, dropped (with FORCE) when this value is dropped.
pub struct TestDb {
    /// Database name.
    pub name: String,
    /// Server config (admin).
    pub cfg: Config,
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique(prefix: &str) -> String {
    let mut r = [0u8; 4];
    getrandom::fill(&mut r).expect("random");
    format!(
        "dpone_t_{prefix}_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst),
        hex::encode(r)
    )
}

impl TestDb {
    /// Creates a database on the test server; panics when the server is not usable (the test
    /// runs only when one is configured). Always `Some`; the `Option` keeps the callers shared
    /// with the SQL Server variants.
    pub async fn create(prefix: &str) -> Option<Self> {
        let Some(url) = server_url() else {
            skip("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let Ok(cfg) = Config::from_str(&url) else {
            skip("DPONE_TEST_PG_URL is not a valid connection URL");
        };
        let mut admin = cfg.clone();
        admin.dbname("postgres");
        let (client, conn) = match admin.connect(NoTls).await {
            Ok(x) => x,
            Err(e) if e.code().is_some() => skip(
                "PostgreSQL server in DPONE_TEST_PG_URL refused the login (rerun .ci/start-postgres)",
            ),
            Err(_) => skip("PostgreSQL server in DPONE_TEST_PG_URL is not reachable"),
        };
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let name = unique(prefix);
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create database");
        Some(Self { name, cfg })
    }

    /// A client on this database.
    pub async fn client(&self) -> Client {
        connect_to(&self.cfg, &self.name).await
    }

    /// The registry endpoint of this database.
    pub fn endpoint_spec(&self) -> EndpointSpec {
        let host = match self.cfg.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.to_string_lossy().into_owned(),
            None => "127.0.0.1".into(),
        };
        EndpointSpec {
            host,
            port: self.cfg.get_ports().first().copied().unwrap_or(5432),
            database: self.name.clone(),
            user: self.cfg.get_user().unwrap_or("postgres").to_owned(),
            // The suites run without TLS (the TLS tests set their own modes).
            sslmode: Some(SslMode::Disable),
            sslrootcert: None,
        }
    }

    /// The endpoint with its credential.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint {
            spec: self.endpoint_spec(),
            password: self.password().map(Secret::new),
        }
    }

    /// The password of the URL, if any.
    pub fn password(&self) -> Option<String> {
        self.cfg
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        let cfg = self.cfg.clone();
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async move {
                    let mut admin = cfg.clone();
                    admin.dbname("postgres");
                    if let Ok((client, conn)) = admin.connect(NoTls).await {
                        tokio::spawn(async move {
                            let _ = conn.await;
                        });
                        let _ = client
                            .batch_execute(&format!(
                                "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                            ))
                            .await;
                    }
                });
            }
        })
        .join();
    }
}

/// Native policy cores behind the policy port (tier: native policies).
pub struct NativePolicies;

impl PolicyPort for NativePolicies {
    fn guard(&self, facts: &GuardFacts) -> dpone_engine_xmin::Result<Judged<GuardDecision>> {
        let decision = dpone_policy_guard::decide(facts);
        Ok(Judged {
            evidence: serde_json::json!({"tier": "native", "kind": "guard", "output": &decision}),
            decision,
        })
    }
    fn delete_mode(
        &self,
        facts: &DeleteModeFacts,
    ) -> dpone_engine_xmin::Result<Judged<PlanDecision>> {
        let decision = dpone_policy_delete_mode::plan(facts);
        Ok(Judged {
            evidence: serde_json::json!({"tier": "native", "kind": "delete_mode", "output": &decision}),
            decision,
        })
    }
}

/// Options of a fixture.
#[derive(Clone, Debug)]
pub struct Options {
    /// `delete_policy` line content (None = omitted).
    pub delete_policy: Option<&'static str>,
    /// `soft_delete_mode`.
    pub soft_delete_mode: Option<&'static str>,
    /// Extra YAML under `reconciliation:` (indented 2 spaces), e.g. guards.
    pub reconciliation_extra: String,
    /// Profile of the source authority.
    pub profile: AuthorityProfile,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            delete_policy: None,
            soft_delete_mode: None,
            reconciliation_extra: String::new(),
            profile: AuthorityProfile::CatalogIdentity,
        }
    }
}

/// The target side of a fixture (one per test: size is no concern).
#[allow(clippy::large_enum_variant)]
pub enum TargetDb {
    /// A PostgreSQL database holding target and state.
    Postgres {
        /// The database.
        db: TestDb,
        /// A client on it.
        client: Client,
    },
    /// SQL Server target, staging and state databases.
    SqlServer(mssql::MssqlDb),
}

/// Source table, target table, state tables, registry and manifest on fresh databases.
pub struct Fixture {
    /// Source database.
    pub src: TestDb,
    /// Source client.
    pub sc: Client,
    /// Target (and state) databases.
    pub target_db: TargetDb,
    /// Artifact directory.
    pub artifacts_dir: tempfile::TempDir,
    /// Artifact store.
    pub store: DirArtifactStore,
    /// Registry YAML.
    pub registry_yaml: String,
    /// Manifest YAML.
    pub manifest_yaml: String,
    /// Credentials.
    pub env: BTreeMap<String, String>,
    /// Prepared route.
    pub route: Route,
    /// Options used.
    pub options: Options,
}

/// Source DDL used by every fixture.
pub const SOURCE_DDL: &str = "CREATE TABLE public.items (id bigint PRIMARY KEY, name text NOT NULL, qty integer, price numeric(10,2));";

impl Fixture {
    /// Builds a PostgreSQL-target fixture (panics when the configured server is not usable).
    pub async fn new(prefix: &str, options: Options) -> Option<Self> {
        Self::new_on(Dialect::Postgres, prefix, options).await
    }

    /// Builds a fixture on a target dialect, or `None` (SKIP printed) without SQL Server.
    pub async fn new_on(on: Dialect, prefix: &str, options: Options) -> Option<Self> {
        // Without SQL Server, say so before touching PostgreSQL.
        if on == Dialect::SqlServer {
            mssql::Server::from_env()?;
        }
        let src = TestDb::create(&format!("{prefix}_s")).await?;
        let sc = src.client().await;
        sc.batch_execute(SOURCE_DDL).await.expect("source ddl");
        let mut env = BTreeMap::new();
        if let Some(pw) = src.password() {
            env.insert(PASSWORD_VAR.to_owned(), pw);
        }
        let (target_db, registry_yaml, manifest_yaml, route) = match on {
            Dialect::Postgres => {
                let tgt = TestDb::create(&format!("{prefix}_t")).await?;
                let tc = tgt.client().await;
                let registry_yaml = registry_yaml(&src, &tgt, options.profile).await;
                let manifest_yaml = manifest_yaml(&options);
                let route = prepare(&manifest_yaml, &registry_yaml, &env).expect("route");
                // Provision target table and state (reviewed DDL; the runtime never creates them).
                let cols = [
                    ("id", "bigint"),
                    ("name", "text"),
                    ("qty", "integer"),
                    ("price", "numeric(10,2)"),
                ];
                tc.batch_execute(&render_target_ddl("dwh", "items", &cols, 1, &route.plan))
                    .await
                    .expect("target ddl");
                tc.batch_execute(&render_state_ddl("dpone_state", &default_state_tables()))
                    .await
                    .expect("state ddl");
                let target_db = TargetDb::Postgres {
                    db: tgt,
                    client: tc,
                };
                (target_db, registry_yaml, manifest_yaml, route)
            }
            Dialect::SqlServer => {
                let db = mssql::MssqlDb::create(prefix).await?;
                env.insert(
                    mssql::PASSWORD_VAR.to_owned(),
                    db.server.password().to_owned(),
                );
                let registry_yaml = format!(
                    "{}{}",
                    source_registry_yaml(&src, options.profile).await,
                    db.registry_connections().await
                );
                let manifest_yaml = manifest_yaml(&options)
                    .replace(PG_TARGET_BLOCK, &db.target_yaml())
                    .replace(PG_STATE_BLOCK, MSSQL_STATE_BLOCK);
                let route = prepare(&manifest_yaml, &registry_yaml, &env).expect("route");
                db.provision_target(&route).await;
                (TargetDb::SqlServer(db), registry_yaml, manifest_yaml, route)
            }
        };
        let artifacts_dir = tempfile::tempdir().expect("tempdir");
        let store = DirArtifactStore::open(artifacts_dir.path()).expect("store");
        Some(Self {
            src,
            sc,
            target_db,
            artifacts_dir,
            store,
            registry_yaml,
            manifest_yaml,
            env,
            route,
            options,
        })
    }

    /// The PostgreSQL target client (PostgreSQL-only tests).
    pub fn pg_target(&self) -> &Client {
        match &self.target_db {
            TargetDb::Postgres { client, .. } => client,
            TargetDb::SqlServer(_) => panic!("a PostgreSQL-only test on a SQL Server fixture"),
        }
    }

    /// The PostgreSQL target database (PostgreSQL-only tests and benches).
    pub fn pg_target_db(&self) -> &TestDb {
        match &self.target_db {
            TargetDb::Postgres { db, .. } => db,
            TargetDb::SqlServer(_) => panic!("a PostgreSQL-only test on a SQL Server fixture"),
        }
    }

    /// A target port for the fixture's route.
    pub fn target(&self) -> AnyTarget {
        self.target_for(&self.route)
    }

    /// A target port for another route on the same target.
    pub fn target_for(&self, route: &Route) -> AnyTarget {
        match &self.target_db {
            TargetDb::Postgres { .. } => {
                AnyTarget::Postgres(PgTarget::for_route(route).expect("target"))
            }
            TargetDb::SqlServer(_) => AnyTarget::SqlServer(
                dpone_adapter_mssql::target::MssqlTarget::for_route(route).expect("target"),
            ),
        }
    }

    /// Runs once with a fresh invocation id.
    pub async fn run(&self) -> Result<RunOutcome, RunFailure> {
        self.run_with(None).await
    }

    /// Runs once selecting an authority.
    pub async fn run_with(&self, authority: Option<&str>) -> Result<RunOutcome, RunFailure> {
        let mut target = self.target();
        self.run_on(&mut target, &new_invocation(), authority).await
    }

    /// Runs on a given target port and invocation.
    pub async fn run_on<T: TargetPort>(
        &self,
        target: &mut T,
        invocation: &str,
        authority: Option<&str>,
    ) -> Result<RunOutcome, RunFailure> {
        let req = RunRequest {
            invocation_id: invocation.to_owned(),
            repair_authority_ref: authority.map(str::to_owned),
        };
        // Boxed: in a debug build the engine's run over both targets' futures is large, and a
        // scenario awaiting it several times inline outgrows the test thread's 2 MiB stack.
        Box::pin(dpone_engine_xmin::run(
            &self.route,
            &req,
            &mut PgSource::new(),
            target,
            &self.store,
            &NativePolicies,
        ))
        .await
    }

    /// Executes SQL on the source.
    pub async fn src_sql(&self, sql: &str) {
        self.sc.batch_execute(sql).await.expect("source sql");
    }

    /// Sorted source keys.
    pub async fn source_keys(&self) -> Vec<i64> {
        let rows = self
            .sc
            .query("SELECT id FROM public.items ORDER BY id", &[])
            .await
            .expect("keys");
        rows.iter().map(|r| r.get(0)).collect()
    }

    /// The xid that wrote the source row with key `id` (its `xmin`, as a full 64-bit xid of the
    /// current epoch).
    pub async fn source_row_xid(&self, id: i64) -> u64 {
        let row = self
            .sc
            .query_one(
                "SELECT (txid_current() >> 32 << 32) + xmin::text::bigint FROM public.items WHERE id = $1",
                &[&id],
            )
            .await
            .expect("source row");
        u64::try_from(row.get::<_, i64>(0)).expect("xid")
    }

    /// Sorted active target keys.
    pub async fn active_keys(&self) -> Vec<i64> {
        use dpone_policy_model::delete_mode::ActivePredicate;
        let predicate = self.route.plan.active_predicate;
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                let pred = match predicate {
                    ActivePredicate::DeletedAtIsNull => "__dpone__deleted_at IS NULL",
                    ActivePredicate::FlagIsFalse => "NOT __dpone__is_deleted",
                    ActivePredicate::EveryRow => "true",
                };
                let rows = client
                    .query(
                        &format!("SELECT id FROM dwh.items WHERE {pred} ORDER BY id"),
                        &[],
                    )
                    .await
                    .expect("active");
                rows.iter().map(|r| r.get(0)).collect()
            }
            TargetDb::SqlServer(db) => {
                let pred = match predicate {
                    ActivePredicate::DeletedAtIsNull => "[__dpone__deleted_at] IS NULL",
                    ActivePredicate::FlagIsFalse => "[__dpone__is_deleted] = 0",
                    ActivePredicate::EveryRow => "1 = 1",
                };
                db.keys(pred).await
            }
        }
    }
    /// Source rows as text, sorted by key.
    pub async fn source_rows(&self) -> Vec<String> {
        let rows = self
            .sc
            .query(
                "SELECT (id, name, qty, price)::text FROM public.items ORDER BY id",
                &[],
            )
            .await
            .expect("rows");
        rows.iter().map(|r| r.get(0)).collect()
    }

    /// Active target business rows as text, sorted by key.
    pub async fn active_rows(&self) -> Vec<String> {
        let keys = self.active_keys().await;
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                let rows = client
                    .query(
                        "SELECT (id, name, qty, price)::text FROM dwh.items WHERE id = ANY($1) ORDER BY id",
                        &[&keys],
                    )
                    .await
                    .expect("rows");
                rows.iter().map(|r| r.get(0)).collect()
            }
            TargetDb::SqlServer(db) => db.record_texts(&keys).await,
        }
    }

    /// Target rows with lineage and row version (for strict no-op checks).
    pub async fn target_fingerprint(&self) -> Vec<String> {
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                let rows = client
                    .query(
                        "SELECT (t.*)::text || '|' || t.xmin::text FROM dwh.items t ORDER BY id",
                        &[],
                    )
                    .await
                    .expect("fingerprint");
                rows.iter().map(|r| r.get(0)).collect()
            }
            TargetDb::SqlServer(db) => db.fingerprint().await,
        }
    }

    /// The stored checkpoint.
    pub async fn checkpoint(&self) -> Option<Checkpoint> {
        let key = &self.route.identity.state_key;
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                let row = client
                    .query_opt(
                        "SELECT safe_xmin, revision FROM dpone_state.dpone_source_state WHERE state_key = $1",
                        &[key],
                    )
                    .await
                    .expect("checkpoint");
                row.map(|r| Checkpoint {
                    xmin: r.get::<_, i64>(0) as u64,
                    revision: r.get::<_, i64>(1) as u64,
                })
            }
            TargetDb::SqlServer(db) => db.checkpoint(key).await,
        }
    }

    /// Number of receipts for the state key.
    pub async fn receipt_count(&self) -> i64 {
        let key = &self.route.identity.state_key;
        match &self.target_db {
            TargetDb::Postgres { client, .. } => client
                .query_one(
                    "SELECT count(*) FROM dpone_state.dpone_commit_receipt WHERE state_key = $1",
                    &[key],
                )
                .await
                .expect("receipts")
                .get(0),
            TargetDb::SqlServer(db) => {
                db.state_count("dpone_commit_receipt", "state_key = @P1", key)
                    .await
            }
        }
    }

    /// Consumption rows of an authority (bound to a receipt, if given).
    pub async fn consumption_count(&self, authority_id: &str, receipt_id: Option<&str>) -> i64 {
        match (&self.target_db, receipt_id) {
            (TargetDb::Postgres { client, .. }, None) => client
                .query_one(
                    "SELECT count(*) FROM dpone_state.dpone_repair_authority_consumption WHERE authority_id = $1",
                    &[&authority_id],
                )
                .await
                .expect("consumption")
                .get(0),
            (TargetDb::Postgres { client, .. }, Some(receipt)) => client
                .query_one(
                    "SELECT count(*) FROM dpone_state.dpone_repair_authority_consumption WHERE authority_id = $1 AND receipt_id = $2",
                    &[&authority_id, &receipt],
                )
                .await
                .expect("consumption")
                .get(0),
            (TargetDb::SqlServer(db), None) => {
                db.state_count(
                    "dpone_repair_authority_consumption",
                    "authority_id = @P1",
                    authority_id,
                )
                .await
            }
            (TargetDb::SqlServer(db), Some(receipt)) => {
                let n = db
                    .state_count(
                        "dpone_repair_authority_consumption",
                        "receipt_id = @P1",
                        receipt,
                    )
                    .await;
                let m = db
                    .state_count(
                        "dpone_repair_authority_consumption",
                        "authority_id = @P1",
                        authority_id,
                    )
                    .await;
                n.min(m)
            }
        }
    }

    /// Whether a state key's row is superseded.
    pub async fn superseded(&self, state_key: &str) -> bool {
        match &self.target_db {
            TargetDb::Postgres { client, .. } => client
                .query_one(
                    "SELECT superseded_at_utc IS NOT NULL FROM dpone_state.dpone_source_state WHERE state_key = $1",
                    &[&state_key],
                )
                .await
                .expect("old state")
                .get(0),
            TargetDb::SqlServer(db) => {
                db.state_count(
                    "dpone_source_state",
                    "state_key = @P1 AND superseded_at_utc IS NOT NULL",
                    state_key,
                )
                .await
                    == 1
            }
        }
    }

    /// `__dpone__deleted_at` of a key as sortable text, if the plan has the column and it is set.
    pub async fn deleted_at(&self, id: i64) -> Option<String> {
        if self
            .route
            .plan
            .columns
            .iter()
            .all(|c| c.name != "__dpone__deleted_at")
        {
            return None;
        }
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                let row = client
                    .query_opt(
                        "SELECT __dpone__deleted_at::text FROM dwh.items WHERE id = $1",
                        &[&id],
                    )
                    .await
                    .expect("deleted_at");
                row.and_then(|r| r.get(0))
            }
            TargetDb::SqlServer(db) => db.deleted_at(id).await,
        }
    }

    /// Loses the state: every state object dropped and provisioned empty again (pins kept).
    pub async fn reset_state(&self) {
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                client
                    .batch_execute("DROP SCHEMA dpone_state CASCADE")
                    .await
                    .expect("drop state");
                let ddl = render_state_ddl("dpone_state", &default_state_tables());
                client
                    .batch_execute(&ddl)
                    .await
                    .expect("re-provision state");
            }
            TargetDb::SqlServer(db) => db.reset_state().await,
        }
    }

    /// Rewrites a stored authority document behind its immutability trigger (tamper tests).
    pub async fn tamper_authority(&self, id: &str, from: &str, to: &str) {
        match &self.target_db {
            TargetDb::Postgres { client, .. } => {
                client
                    .execute(
                        "ALTER TABLE dpone_state.dpone_repair_authority DISABLE TRIGGER dpone_immutable",
                        &[],
                    )
                    .await
                    .expect("disable trigger");
                client
                    .execute(
                        "UPDATE dpone_state.dpone_repair_authority SET document = replace(document, $1, $2) WHERE authority_id = $3",
                        &[&from, &to, &id],
                    )
                    .await
                    .expect("tamper");
                client
                    .execute(
                        "ALTER TABLE dpone_state.dpone_repair_authority ENABLE TRIGGER dpone_immutable",
                        &[],
                    )
                    .await
                    .expect("enable trigger");
            }
            TargetDb::SqlServer(db) => db.tamper_authority(id, from, to).await,
        }
    }

    /// Inserts an authority document as the environment owner; returns its recorded digest.
    pub async fn insert_authority(&self, doc: &AuthorityDocument) -> String {
        match &self.target_db {
            TargetDb::Postgres { .. } => PgTarget::for_route(&self.route)
                .expect("target")
                .create_authority(doc)
                .await
                .expect("create authority"),
            TargetDb::SqlServer(db) => db.insert_authority(doc).await,
        }
    }

    /// Creates an authority bound to this route.
    pub async fn create_authority(
        &self,
        id: &str,
        checkpoint: Option<Checkpoint>,
        allow: AuthorityAllow,
        window: (i64, i64),
        transfer: Option<TransferBinding>,
    ) -> String {
        let doc = AuthorityDocument {
            schema: AUTHORITY_SCHEMA.into(),
            authority_id: id.into(),
            state_key: self.route.identity.state_key.clone(),
            scope_hash: self.route.identity.scope_hash.clone(),
            checkpoint,
            not_before: window.0,
            expires_at: window.1,
            allow,
            transfer,
            approved_by: "environment-owner".into(),
            reason: "test".into(),
        };
        self.insert_authority(&doc).await
    }
}

/// A fresh invocation id.
pub fn new_invocation() -> String {
    let mut r = [0u8; 8];
    getrandom::fill(&mut r).expect("random");
    format!("inv-{}", hex::encode(r))
}

/// Prepares a route from YAML texts.
pub fn prepare(
    manifest: &str,
    registry: &str,
    env: &BTreeMap<String, String>,
) -> dpone_engine_xmin::Result<Route> {
    let m = Manifest::from_yaml(manifest)?;
    let r = Registry::from_yaml(registry)?;
    Route::prepare(m, &r, env, &NativePolicies)
}

/// The PostgreSQL target block of [`manifest_yaml`].
pub const PG_TARGET_BLOCK: &str =
    "target:\n  type: postgres\n  connection_ref: pg_target\n  schema: dwh\n  table: items\n";
/// The PostgreSQL state block head of [`manifest_yaml`].
pub const PG_STATE_BLOCK: &str = "state:\n  type: postgres\n  connection_ref: pg_state\n";
/// The SQL Server state block head.
pub const MSSQL_STATE_BLOCK: &str = "state:\n  type: mssql\n  connection_ref: mssql_state\n";

/// The manifest of a fixture.
pub fn manifest_yaml(o: &Options) -> String {
    let mut rec = String::new();
    if let Some(p) = o.delete_policy {
        rec.push_str(&format!("  delete_policy: {p}\n"));
    }
    if let Some(m) = o.soft_delete_mode {
        rec.push_str(&format!("  soft_delete_mode: {m}\n"));
    }
    rec.push_str(&o.reconciliation_extra);
    format!(
        "version: 1
name: items_to_dwh
source:
  connection_ref: pg_source
  relation: public.items
  columns: [id, name, qty, price]
  unique_key: [id]
target:
  type: postgres
  connection_ref: pg_target
  schema: dwh
  table: items
reconciliation:
  enabled: true
  mode: key_snapshot
  cadence: every_run
  consistency: same_source_snapshot
{rec}state:
  type: postgres
  connection_ref: pg_state
  atomicity: target_atomic
  table: {{name: dpone_source_state}}
  run_table: {{name: dpone_run_state}}
  receipt_table: {{name: dpone_commit_receipt}}
  repair_authority_table: {{name: dpone_repair_authority}}
  repair_consumption_table: {{name: dpone_repair_authority_consumption}}
"
    )
}

fn endpoint_yaml(db: &TestDb) -> String {
    let e = db.endpoint_spec();
    let pw = if db.password().is_some() {
        format!("    password_env: {PASSWORD_VAR}\n")
    } else {
        String::new()
    };
    format!(
        "    endpoint: {{host: '{}', port: {}, database: '{}', user: '{}', sslmode: disable}}\n{pw}",
        e.host, e.port, e.database, e.user
    )
}

/// A registry with pins discovered from the live databases (the environment owner's review step).
pub async fn registry_yaml(src: &TestDb, tgt: &TestDb, profile: AuthorityProfile) -> String {
    let pin = discover_database_pin(&tgt.endpoint())
        .await
        .expect("discover pin");
    let tpin = format!(
        "    database_pin: {{name: '{}', oid: {}, system_identifier: '{}'}}\n",
        pin.name, pin.oid, pin.system_identifier
    );
    format!(
        "{}  pg_target:
    kind: postgres_target
{tgt_ep}    default_schema: dpone_state
{tpin}  pg_state:
    kind: postgres_target
{tgt_ep}    default_schema: dpone_state
{tpin}",
        source_registry_yaml(src, profile).await,
        tgt_ep = endpoint_yaml(tgt),
    )
}

/// The registry header and the source connection, pins discovered live.
pub async fn source_registry_yaml(src: &TestDb, profile: AuthorityProfile) -> String {
    let a = discover_source_authority(&src.endpoint(), profile, &["public.items"])
        .await
        .expect("discover source");
    let rel = &a.relations["public.items"];
    let v1 = match profile {
        AuthorityProfile::PhysicalCluster => format!(
            "      system_identifier: '{}'\n      timeline: {}\n",
            a.system_identifier.clone().unwrap_or_default(),
            a.timeline.unwrap_or(0)
        ),
        AuthorityProfile::CatalogIdentity => String::new(),
    };
    let (version, prof) = match profile {
        AuthorityProfile::PhysicalCluster => (1, "physical_cluster"),
        AuthorityProfile::CatalogIdentity => (2, "catalog_identity"),
    };
    format!(
        "version: 1
environment: test
connections:
  pg_source:
    kind: postgres_source
{src_ep}    postgres_source_authority:
      version: {version}
      profile: {prof}
      recovery_role: primary
      database: {{name: '{db}', oid: {dboid}}}
      effective_principal: {{name: '{eu}', oid: {euoid}}}
      session_principal: {{name: '{su}', oid: {suoid}}}
      relations:
        public.items: {{schema_oid: {so}, relation_oid: {ro}}}
{v1}",
        src_ep = endpoint_yaml(src),
        db = a.database.name,
        dboid = a.database.oid,
        eu = a.effective_principal.name,
        euoid = a.effective_principal.oid,
        su = a.session_principal.name,
        suoid = a.session_principal.oid,
        so = rel.schema_oid,
        ro = rel.relation_oid,
    )
}
