//! Test support: a real PostgreSQL server, the reviewed DDL created from
//! `fixtures/nonproduction/control-store.sql` in a fresh schema (as an operator would), stores
//! connected through `dpone-pg-tls` (verify-full against the test CA when `.ci/start-postgres`
//! provided one), and builders for policies, grants and requests.
//!
//! The crate's `build.rs` sets `cfg(dpone_live_pg)` when a server is configured; without it every
//! test here is compiled as ignored with its SKIP reason, never passed. With it, a server that
//! cannot be reached or refuses the login fails the test.
#![allow(dead_code)]

use dpone_adapter_np_control_store::*;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::{Client, Config, NoTls};

/// The database the tests provision their schemas in.
pub const TEST_DB: &str = "dpone_np_store_tests";

/// A value of `.ci/start-postgres`'s env file (`export NAME=value`), or the variable itself.
pub fn env_value(name: &str) -> Option<String> {
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

fn unusable(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

async fn connect_plain(cfg: &Config) -> Client {
    let (client, conn) = match cfg.connect(NoTls).await {
        Ok(x) => x,
        Err(e) if e.code().is_some() => unusable("the server refused the login"),
        Err(_) => unusable("the server is not reachable"),
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh schema holding the reviewed DDL; dropped by [`Env::drop_schema`].
pub struct Env {
    /// Admin client on the test database.
    pub admin: Client,
    /// The schema.
    pub schema: String,
    cfg: Config,
}

/// The reviewed DDL with the schema renamed.
pub fn fixture_ddl(schema: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/nonproduction/control-store.sql");
    std::fs::read_to_string(path)
        .expect("the reviewed DDL fixture")
        .replace("\"dpone_np_control\"", &format!("\"{schema}\""))
}

impl Env {
    /// Creates the test database when missing and a fresh schema from the fixture.
    pub async fn new() -> Env {
        let Some(url) = env_value("DPONE_TEST_PG_URL") else {
            unusable("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let Ok(mut cfg) = Config::from_str(&url) else {
            unusable("DPONE_TEST_PG_URL is not a valid connection URL");
        };
        cfg.dbname("postgres");
        let root = connect_plain(&cfg).await;
        let exists = root
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&TEST_DB])
            .await
            .expect("look up the test database")
            .is_some();
        if !exists
            && let Err(e) = root
                .batch_execute(&format!("CREATE DATABASE \"{TEST_DB}\""))
                .await
        {
            // A concurrent test created it first (42P04, or 23505 from the catalog's index).
            assert!(
                matches!(e.code().map(|c| c.code()), Some("42P04" | "23505")),
                "create the test database: {e}"
            );
        }
        cfg.dbname(TEST_DB);
        let admin = connect_plain(&cfg).await;
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).expect("random");
        let schema = format!(
            "np_t_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            r.iter().map(|b| format!("{b:02x}")).collect::<String>()
        );
        admin
            .batch_execute(&fixture_ddl(&schema))
            .await
            .expect("the reviewed DDL applies");
        Env { admin, schema, cfg }
    }

    /// Attaches to a schema another process provisioned (the crash test's child).
    pub async fn attach(schema: &str) -> Env {
        let Some(url) = env_value("DPONE_TEST_PG_URL") else {
            unusable("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let Ok(mut cfg) = Config::from_str(&url) else {
            unusable("DPONE_TEST_PG_URL is not a valid connection URL");
        };
        cfg.dbname(TEST_DB);
        let admin = connect_plain(&cfg).await;
        Env {
            admin,
            schema: schema.to_owned(),
            cfg,
        }
    }

    /// The store endpoint: verify-full against the test CA when one is configured.
    pub fn endpoint(&self) -> StoreEndpoint {
        let mut config = self.cfg.clone();
        let (tls, root_cert) = match env_value("DPONE_TEST_PG_CA") {
            Some(ca) => {
                config.host("localhost");
                (dpone_pg_tls::Mode::VerifyFull, Some(ca))
            }
            None => (dpone_pg_tls::Mode::Disable, None),
        };
        StoreEndpoint {
            config,
            tls,
            root_cert,
            schema: self.schema.clone(),
            // The tests' admin login owns the schemas it creates; the role tests connect as
            // least-privilege logins with the check on (`backstop.rs`).
            accept_privileged_session: true,
        }
    }

    /// A store with the honest commit boundary.
    pub fn store(&self) -> PgControlStore {
        PgControlStore::new(self.endpoint()).expect("store")
    }

    /// A store whose COMMIT goes through `boundary`.
    pub fn store_with(&self, boundary: Arc<dyn CommitBoundary>) -> PgControlStore {
        PgControlStore::with_commit_boundary(self.endpoint(), boundary).expect("store")
    }

    /// Another session on the test database, as the admin login (a rogue or a lock holder).
    pub async fn session(&self) -> Client {
        connect_plain(&self.cfg).await
    }

    /// Drops the schema (end of test).
    pub async fn drop_schema(self) {
        let _ = self
            .admin
            .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
            .await;
    }
}

/// A UUID from two numbers (tests only).
pub fn uuid(a: u32, b: u64) -> Uuid {
    Uuid::parse("test", &format!("{a:08x}-0000-4000-8000-{b:012x}")).expect("uuid")
}

/// The spec's ceilings, with some fields overridden.
pub fn limits(f: impl FnOnce(&mut Limits)) -> Limits {
    let mut l = CEILINGS;
    f(&mut l);
    l
}

/// A policy record for `env`.
pub fn policy(env: &Uuid, bytes: &[u8], epoch: i64, limits: Limits) -> PolicyRecord {
    PolicyRecord {
        environment: env.clone(),
        policy_bytes: bytes.to_vec(),
        root_digest: Sha256Digest::of(b"trusted-root"),
        revocation_epoch: epoch,
        limits,
        max_validity_seconds: MAX_VALIDITY_SECONDS,
    }
}

/// Current unix time.
pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

/// Workloads `w{from}..w{to}` with the given limits.
pub fn workloads(range: std::ops::Range<u32>, l: Limits) -> Vec<WorkloadLimits> {
    range
        .map(|i| WorkloadLimits {
            workload: WorkloadId::new(&format!("w{i}")).expect("workload"),
            pack_digest: Sha256Digest::of(format!("pack w{i}").as_bytes()),
            limits: l,
        })
        .collect()
}

/// An execution grant bound to `activation`.
pub fn execution_grant(
    env: &Uuid,
    campaign: &Uuid,
    grant: &Uuid,
    activation: &Uuid,
    limits: Limits,
    members: Vec<WorkloadLimits>,
) -> GrantRegistration {
    GrantRegistration {
        grant_id: grant.clone(),
        environment: env.clone(),
        campaign: campaign.clone(),
        original_bytes: format!(
            "{{\"schema\":\"dpone.nonproduction-authority.v1\",\"phase\":\"execution\",\"grant\":\"{}\"}}",
            grant.as_str()
        )
        .into_bytes(),
        revocation_epoch: 1,
        not_before_unix: now() - 60,
        not_after_unix: now() + 3_600,
        limits,
        subject: PhaseSubject::Execution {
            activation_id: activation.clone(),
        },
        workloads: members,
    }
}

/// A qualification grant for `run` on `route`.
pub fn qualification_grant(
    env: &Uuid,
    campaign: &Uuid,
    grant: &Uuid,
    run: &Uuid,
    route: &Route,
    limits: Limits,
    members: Vec<WorkloadLimits>,
) -> GrantRegistration {
    GrantRegistration {
        grant_id: grant.clone(),
        environment: env.clone(),
        campaign: campaign.clone(),
        original_bytes: format!(
            "{{\"schema\":\"dpone.nonproduction-authority.v1\",\"phase\":\"qualification\",\"grant\":\"{}\"}}",
            grant.as_str()
        )
        .into_bytes(),
        revocation_epoch: 1,
        not_before_unix: now() - 60,
        not_after_unix: now() + 3_600,
        limits,
        subject: PhaseSubject::Qualification {
            run_id: run.clone(),
            route: route.clone(),
        },
        workloads: members,
    }
}

/// The activation request that binds `grant`.
pub fn request(grant: &GrantRegistration, tag: &str) -> ActivationRequest {
    let PhaseSubject::Execution { activation_id } = &grant.subject else {
        panic!("an execution grant");
    };
    ActivationRequest {
        activation_id: activation_id.clone(),
        grant_digest: Sha256Digest::of(&grant.original_bytes),
        request_bytes: format!(
            "{{\"schema\":\"dpone.composition-activation-request.nonproduction.v1\",\"tag\":\"{tag}\"}}"
        )
        .into_bytes(),
    }
}

/// An admission for `workload`/`attempt` under `grant`.
pub fn admission(
    grant: &GrantRegistration,
    workload: &str,
    attempt: &str,
    rows: i64,
    bytes: i64,
) -> AdmissionRequest {
    AdmissionRequest {
        grant: grant.key(),
        original_bytes: grant.original_bytes.clone(),
        workload: WorkloadId::new(workload).expect("workload"),
        attempt: AttemptId::new(attempt).expect("attempt"),
        source_rows: rows,
        source_bytes: bytes,
        attempt_seconds: 60,
    }
}

/// Authenticates with a verification that accepts.
pub async fn auth(store: &PgControlStore, env: &Uuid) -> Authenticated {
    store
        .authenticate(env, |_| Ok(()))
        .await
        .expect("authenticate")
}

/// Registers an execution grant and selects its request (the usual setup before admission).
pub async fn register_and_select(
    store: &PgControlStore,
    a: &Authenticated,
    g: &GrantRegistration,
) -> Registered {
    let r = store.register(a, g).await.expect("register");
    let sel = store
        .select_activation_request(a, &g.key(), &g.original_bytes, &request(g, "selected"))
        .await
        .expect("select");
    assert_eq!(sel, Selected::Selected);
    r
}

/// The error code of a result that must be a refusal.
pub fn code<T: std::fmt::Debug>(r: Result<T>) -> StoreCode {
    match r {
        Ok(v) => panic!("expected a refusal, got {v:?}"),
        Err(e) => {
            assert!(
                !e.message.contains("127.0.0.1") && !e.message.contains("localhost"),
                "a message names an endpoint: {e}"
            );
            e.code
        }
    }
}

/// The pool of an execution campaign.
pub fn execution_pool(env: &Uuid, campaign: &Uuid) -> PoolKey {
    PoolKey {
        environment: env.clone(),
        campaign: campaign.clone(),
        phase: Phase::Execution,
        route: None,
    }
}

/// The statements of a reviewed SQL file, `;\n`-separated, without their comment lines.
pub fn statements(sql: &str) -> Vec<String> {
    sql.split(";\n")
        .map(|s| {
            s.lines()
                .filter(|l| !l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|s| !s.trim().is_empty())
        .collect()
}
