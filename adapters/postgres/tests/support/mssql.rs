//! The SQL Server side of the shared suites: scratch target, staging and state databases on the
//! server named by `DPONE_TEST_MSSQL_URL` (an ADO.NET connection string for a principal that may
//! create and drop databases), provisioned with the reviewed scripts, their pins discovered
//! from the catalog, and the target-side reads the suites compare with the source.
//!
//! Without `DPONE_TEST_MSSQL_URL` at build time every SQL Server variant is reported `ignored`
//! with its SKIP reason (`cfg(dpone_live_mssql)`); when the variant runs, a missing, malformed
//! or unreachable server fails it, so a variant that did not run is never a pass.
//!
//! Hygiene: [`MssqlDb`] drops its three databases when it goes out of scope (panics included),
//! and the first fixture of a process sweeps scratch databases (`dpone_t_*`) older than an
//! hour, left by a killed process. Names are unique per process and call, so the variants run
//! in parallel safely.

use dpone_adapter_mssql::conn::{self, MssqlClient};
use dpone_adapter_mssql::provision;
use dpone_adapter_mssql::sql::{self, BusinessColumn, KeyColumn, KeyType, ThreePart};
use dpone_adapter_mssql::target::MssqlTargetSpec;
use dpone_engine_xmin::Route;
use dpone_engine_xmin::identity::sha256_hex;
use dpone_engine_xmin::state::AuthorityDocument;
use dpone_policy_model::guard::Checkpoint;
use tiberius::Row;

/// Environment variable of the SQL Server password in the fixture's registry environment.
pub const PASSWORD_VAR: &str = "DPONE_TEST_MSSQL_PASSWORD";
/// Schema of the target table (as on PostgreSQL).
pub const TARGET_SCHEMA: &str = "dwh";
/// Schema of the state tables (the reviewed script's).
pub const STATE_SCHEMA: &str = "dpone";

/// A SQL Server variant runs only when `DPONE_TEST_MSSQL_URL` was set at build time, so a
/// server it cannot use is a failure, never a skip counted as a pass.
pub fn skip(reason: &str) -> ! {
    panic!("SQL Server variant cannot run: {reason}");
}

/// Minutes after which a scratch database is taken to be left behind by a dead process.
const SWEEP_AFTER_MINUTES: i32 = 60;
static SWEPT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Coordinates parsed from the ADO.NET string (for the registry the route reads).
#[derive(Clone, Debug)]
pub struct Server {
    ado: String,
    host: String,
    port: u16,
    user: String,
    password: String,
    trust_cert: bool,
}

impl Server {
    /// Reads `DPONE_TEST_MSSQL_URL`; fails the variant when it is unset or malformed (the
    /// `Option` keeps the fixture's `?` chain).
    pub fn from_env() -> Option<Self> {
        let ado = match conn::test_url() {
            Ok(u) => u,
            Err(reason) => skip(&reason),
        };
        let mut s = Self {
            ado: ado.clone(),
            host: String::new(),
            port: 1433,
            user: String::new(),
            password: String::new(),
            trust_cert: false,
        };
        for part in ado.split(';') {
            let Some((k, v)) = part.split_once('=') else {
                continue;
            };
            let v = v.trim();
            match k.trim().to_ascii_lowercase().as_str() {
                "server" | "data source" | "address" => {
                    let v = v.strip_prefix("tcp:").unwrap_or(v);
                    let (h, p) = v.split_once(',').unwrap_or((v, "1433"));
                    s.host = h.trim().to_owned();
                    s.port = p.trim().parse().unwrap_or(1433);
                }
                "user" | "user id" | "uid" => s.user = v.to_owned(),
                "password" | "pwd" => s.password = v.to_owned(),
                "trustservercertificate" => s.trust_cert = v.eq_ignore_ascii_case("true"),
                _ => {}
            }
        }
        if s.host.is_empty() || s.user.is_empty() {
            skip("DPONE_TEST_MSSQL_URL needs server=, user= and password= (SQL authentication)");
        }
        Some(s)
    }

    /// The password (for the registry environment).
    pub fn password(&self) -> &str {
        &self.password
    }

    async fn admin(&self) -> MssqlClient {
        conn::connect(&self.ado)
            .await
            .expect("connect to SQL Server")
    }

    /// A session whose current database is `db`.
    pub async fn client(&self, db: &str) -> MssqlClient {
        let mut c = self.admin().await;
        conn::execute(&mut c, "use", &format!("USE {};", sql::ident(db)))
            .await
            .expect("use database");
        c
    }
}

/// Scratch target, staging and state databases, dropped with this value.
pub struct MssqlDb {
    /// The server.
    pub server: Server,
    /// Target database.
    pub target: String,
    /// Staging database.
    pub staging: String,
    /// State database.
    pub state: String,
}

/// One scratch name (`dpone_t_*`), unique per process and call.
fn scratch(prefix: &str, role: &str) -> String {
    format!("{}_{role}", super::unique(prefix))
}

impl MssqlDb {
    /// Creates the three databases and provisions the state script in the state database and
    /// the staging schema; `None` (SKIP printed) without a server.
    pub async fn create(prefix: &str) -> Option<Self> {
        let server = Server::from_env()?;
        let db = Self {
            target: scratch(prefix, "tgt"),
            staging: scratch(prefix, "stg"),
            state: scratch(prefix, "st"),
            server,
        };
        let mut admin = db.server.admin().await;
        if !SWEPT.swap(true, std::sync::atomic::Ordering::SeqCst) {
            conn::sweep_scratch(&mut admin, SWEEP_AFTER_MINUTES)
                .await
                .expect("sweep stale scratch databases");
        }
        for name in [&db.target, &db.staging, &db.state] {
            conn::execute(
                &mut admin,
                "create database",
                &format!("CREATE DATABASE {};", sql::ident(name)),
            )
            .await
            .expect("create database");
        }
        db.provision_state().await;
        let mut t = db.server.client(&db.target).await;
        conn::execute(
            &mut t,
            "target schema",
            &format!("CREATE SCHEMA {};", sql::ident(TARGET_SCHEMA)),
        )
        .await
        .expect("target schema");
        Some(db)
    }

    /// Runs the reviewed state script (v2) in the state database.
    pub async fn provision_state(&self) {
        let mut s = self.server.client(&self.state).await;
        for batch in provision::batches(provision::STATE_DDL) {
            conn::execute(&mut s, "state ddl", &batch)
                .await
                .expect("state ddl");
        }
    }

    /// Drops every state object and provisions the script again: state lost, pins unchanged.
    pub async fn reset_state(&self) {
        let mut s = self.server.client(&self.state).await;
        let statement = [
            "dpone_repair_authority_consumption",
            "dpone_commit_receipt",
            "dpone_repair_authority",
            "dpone_run_state",
            "dpone_source_state",
        ]
        .iter()
        .map(|t| format!("DROP TABLE {}.{};", sql::ident(STATE_SCHEMA), sql::ident(t)))
        .collect::<String>();
        conn::execute(&mut s, "drop state", &statement)
            .await
            .expect("drop state");
        conn::execute(
            &mut s,
            "drop schema",
            &format!("DROP SCHEMA {};", sql::ident(STATE_SCHEMA)),
        )
        .await
        .expect("drop schema");
        drop(s);
        self.provision_state().await;
    }

    /// Creates the target table for a route with the reviewed DDL of its delete mode, plus a
    /// `rowversion` column that proves strict no-ops (every write changes it).
    pub async fn provision_target(&self, route: &Route) {
        let spec = MssqlTargetSpec::from_route(route).expect("sql server route");
        let (mode, _) = spec.delete_shape();
        let table = ThreePart::new(&self.target, TARGET_SCHEMA, "items");
        let keys = [KeyColumn {
            name: "id".into(),
            ty: KeyType::BigInt,
        }];
        let business = [
            ("name", "nvarchar(200)"),
            ("qty", "int"),
            ("price", "decimal(10,2)"),
        ]
        .map(|(n, t)| BusinessColumn {
            name: n.into(),
            type_sql: t.into(),
            collation: None,
        });
        let mut t = self.server.client(&self.target).await;
        conn::execute(
            &mut t,
            "target ddl",
            &sql::target_ddl(&table, &keys, &business, mode),
        )
        .await
        .expect("target ddl");
        conn::execute(
            &mut t,
            "rowversion",
            &format!(
                "ALTER TABLE {} ADD [test_row_version] rowversion;",
                table.sql()
            ),
        )
        .await
        .expect("rowversion");
    }

    /// The `database_authorities` entry of one database, read from the catalog (the
    /// environment owner's review step).
    async fn authority_yaml(&self, name: &str) -> String {
        let mut c = self.server.admin().await;
        let rows = conn::catalog_rows(&mut c, name)
            .await
            .expect("catalog rows");
        let row = rows
            .iter()
            .find(|r| r.name == name)
            .expect("catalog row of a scratch database");
        format!(
            "      {name}: {{database_id: {}, create_token: '{}', database_guid: '{}'}}\n",
            row.database_id,
            row.create_token,
            row.database_guid.clone().unwrap_or_default()
        )
    }

    /// The two SQL Server connections of the registry (target pins target and staging; state
    /// pins state).
    pub async fn registry_connections(&self) -> String {
        let s = &self.server;
        let endpoint = |db: &str| {
            format!(
                "    endpoint: {{host: '{}', port: {}, database: '{db}', user: '{}'}}\n    password_env: {PASSWORD_VAR}\n    trust_server_certificate: {}\n",
                s.host, s.port, s.user, s.trust_cert
            )
        };
        format!(
            "  mssql_target:\n    kind: mssql_target\n{}    database_authorities:\n{}{}  mssql_state:\n    kind: mssql_target\n{}    default_schema: {STATE_SCHEMA}\n    database_authorities:\n{}",
            endpoint(&self.target),
            self.authority_yaml(&self.target).await,
            self.authority_yaml(&self.staging).await,
            endpoint(&self.state),
            self.authority_yaml(&self.state).await,
        )
    }

    /// The manifest's `target:` block.
    pub fn target_yaml(&self) -> String {
        format!(
            "target:\n  type: mssql\n  connection_ref: mssql_target\n  database: {}\n  schema: {TARGET_SCHEMA}\n  table: items\n  staging_database: {}\n",
            self.target, self.staging
        )
    }

    async fn rows(&self, db: &str, statement: &str, params: &[&dyn tiberius::ToSql]) -> Vec<Row> {
        let mut c = self.server.client(db).await;
        c.query(statement, params)
            .await
            .expect("query")
            .into_first_result()
            .await
            .expect("rows")
    }

    fn table(&self) -> String {
        ThreePart::new(&self.target, TARGET_SCHEMA, "items").sql()
    }

    fn state_table(&self, name: &str) -> String {
        ThreePart::new(&self.state, STATE_SCHEMA, name).sql()
    }

    /// Sorted keys of target rows matching `predicate`.
    pub async fn keys(&self, predicate: &str) -> Vec<i64> {
        let rows = self
            .rows(
                &self.target,
                &format!(
                    "SELECT id FROM {} WHERE {predicate} ORDER BY id;",
                    self.table()
                ),
                &[],
            )
            .await;
        rows.iter()
            .map(|r| r.get::<i64, _>(0).expect("id"))
            .collect()
    }

    /// Rows of the given keys in PostgreSQL's record text form `(id,name,qty,price)`, so they
    /// compare with the source's `(id, name, qty, price)::text`.
    pub async fn record_texts(&self, keys: &[i64]) -> Vec<String> {
        let rows = self
            .rows(
                &self.target,
                &format!(
                    "SELECT id, name, CONVERT(nvarchar(20), qty), CONVERT(nvarchar(40), price) FROM {} ORDER BY id;",
                    self.table()
                ),
                &[],
            )
            .await;
        rows.iter()
            .filter(|r| keys.contains(&r.get::<i64, _>(0).expect("id")))
            .map(|r| {
                let field = |i: usize| r.get::<&str, _>(i).map(record_field).unwrap_or_default();
                format!(
                    "({},{},{},{})",
                    r.get::<i64, _>(0).expect("id"),
                    field(1),
                    field(2),
                    field(3)
                )
            })
            .collect()
    }

    /// Every target row with its lineage and row version, as JSON text per row.
    pub async fn fingerprint(&self) -> Vec<String> {
        let rows = self
            .rows(
                &self.target,
                &format!(
                    "SELECT (SELECT t.*, CONVERT(bigint, t.[test_row_version]) AS rv FOR JSON PATH, INCLUDE_NULL_VALUES, WITHOUT_ARRAY_WRAPPER) FROM {} AS t ORDER BY t.id;",
                    self.table()
                ),
                &[],
            )
            .await;
        rows.iter()
            .map(|r| r.get::<&str, _>(0).unwrap_or_default().to_owned())
            .collect()
    }

    /// `__dpone__deleted_at` of a key as ISO 8601 text (sortable), if set.
    pub async fn deleted_at(&self, id: i64) -> Option<String> {
        let rows = self
            .rows(
                &self.target,
                &format!(
                    "SELECT CONVERT(varchar(27), [__dpone__deleted_at], 126) FROM {} WHERE id = @P1;",
                    self.table()
                ),
                &[&id],
            )
            .await;
        rows.first()
            .and_then(|r| r.get::<&str, _>(0).map(str::to_owned))
    }

    /// The stored checkpoint of a state key.
    pub async fn checkpoint(&self, state_key: &str) -> Option<Checkpoint> {
        let rows = self
            .rows(
                &self.state,
                &format!(
                    "SELECT safe_xmin, revision FROM {} WHERE state_key = @P1;",
                    self.state_table("dpone_source_state")
                ),
                &[&state_key],
            )
            .await;
        rows.first().map(|r| Checkpoint {
            xmin: u64::try_from(r.get::<i64, _>(0).expect("xmin")).expect("xmin"),
            revision: u64::try_from(r.get::<i64, _>(1).expect("revision")).expect("revision"),
        })
    }

    /// A count over a state table with one string parameter.
    pub async fn state_count(&self, table: &str, predicate: &str, param: &str) -> i64 {
        let rows = self
            .rows(
                &self.state,
                &format!(
                    "SELECT COUNT_BIG(*) FROM {} WHERE {predicate};",
                    self.state_table(table)
                ),
                &[&param],
            )
            .await;
        rows.first()
            .and_then(|r| r.get::<i64, _>(0))
            .expect("count")
    }

    /// Inserts an authority as the environment owner does; returns its recorded digest.
    pub async fn insert_authority(&self, doc: &AuthorityDocument) -> String {
        doc.check().expect("valid authority");
        let text = doc.to_text();
        let digest = sha256_hex(text.as_bytes());
        let mut c = self.server.client(&self.state).await;
        c.execute(
            format!(
                "INSERT INTO {} (authority_id, recorded_digest, document, created_at_utc) VALUES (@P1, @P2, @P3, SYSUTCDATETIME());",
                self.state_table("dpone_repair_authority")
            ),
            &[&doc.authority_id.as_str(), &digest.as_str(), &text.as_str()],
        )
        .await
        .expect("insert authority");
        digest
    }

    /// Rewrites a stored authority document behind the immutability trigger (a tamper test).
    pub async fn tamper_authority(&self, id: &str, from: &str, to: &str) {
        let table = self.state_table("dpone_repair_authority");
        let trigger = format!(
            "{}.{}",
            sql::ident(STATE_SCHEMA),
            sql::ident("dpone_repair_authority_immutable")
        );
        let mut c = self.server.client(&self.state).await;
        conn::execute(
            &mut c,
            "disable trigger",
            &format!("DISABLE TRIGGER {trigger} ON {table};"),
        )
        .await
        .expect("disable trigger");
        c.execute(
            format!("UPDATE {table} SET document = REPLACE(document, @P1, @P2) WHERE authority_id = @P3;"),
            &[&from, &to, &id],
        )
        .await
        .expect("tamper");
        conn::execute(
            &mut c,
            "enable trigger",
            &format!("ENABLE TRIGGER {trigger} ON {table};"),
        )
        .await
        .expect("enable trigger");
    }
}

/// PostgreSQL's record-output quoting of one field.
fn record_field(v: &str) -> String {
    let needs = v.is_empty()
        || v.chars()
            .any(|c| matches!(c, '"' | '\\' | '(' | ')' | ',') || c.is_whitespace());
    if needs {
        format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\"\""))
    } else {
        v.to_owned()
    }
}

impl Drop for MssqlDb {
    fn drop(&mut self) {
        let server = self.server.clone();
        let names = [
            self.target.clone(),
            self.staging.clone(),
            self.state.clone(),
        ];
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(rt) = rt {
                rt.block_on(async move {
                    if let Ok(mut c) = conn::connect(&server.ado).await {
                        for n in names {
                            let _ = conn::execute(
                                &mut c,
                                "drop database",
                                &sql::drop_scratch_database(&n),
                            )
                            .await;
                        }
                    }
                });
            }
        })
        .join();
    }
}
