//! The immutability guards of the XMin state catalog on a real PostgreSQL server, checked the
//! way the target's preflight checks them (`dpone_pg_catalog::table_facts` and
//! `catalog::verify_table` per state role): a trigger made inert (replica-only, disabled,
//! `WHEN (false)`, a column list), a trigger function rewritten so it no longer raises, an
//! immutable table without its `BEFORE TRUNCATE` guard, row security and rules are each refused
//! with their own reason code, naming the table and no row values; on the reviewed DDL
//! PostgreSQL itself refuses deleting or truncating a one-shot consumption; the truncate-guard
//! migration (`fixtures/xmin/migrate-add-truncate-guard.sql`) brings an older catalog to the
//! contract.
//!
//! Tier: real PostgreSQL integration (`cfg(dpone_live_pg)`).

use dpone_adapter_postgres::catalog::{STATE_CONTRACT, verify_table};
use dpone_adapter_postgres::ddl::{
    default_state_tables, render_state_ddl, render_state_truncate_guard_migration,
};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::{Client, Config, NoTls};

const TEST_DB: &str = "dpone_xmin_state_catalog_tests";

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn server_url() -> String {
    if let Ok(v) = std::env::var("DPONE_TEST_PG_URL")
        && !v.is_empty()
    {
        return v;
    }
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).expect("DPONE_TEST_PG_URL or the env file");
    text.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("export DPONE_TEST_PG_URL=")
                .map(str::to_owned)
        })
        .expect("DPONE_TEST_PG_URL in the env file")
}

async fn connect(cfg: &Config) -> Client {
    let (client, conn) = cfg
        .connect(NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// A fresh schema holding the reviewed state DDL (default table names).
struct Env {
    client: Client,
    schema: String,
}

impl Env {
    async fn new() -> Env {
        let mut cfg = Config::from_str(&server_url()).expect("a valid URL");
        cfg.dbname("postgres");
        let root = connect(&cfg).await;
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
            assert!(
                matches!(e.code().map(|c| c.code()), Some("42P04" | "23505")),
                "create the test database: {e}"
            );
        }
        cfg.dbname(TEST_DB);
        let client = connect(&cfg).await;
        let schema = format!(
            "xs_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        client
            .batch_execute(&render_state_ddl(&schema, &default_state_tables()))
            .await
            .expect("the reviewed state DDL applies");
        Env { client, schema }
    }

    /// `sql` with `"S"` naming this schema.
    fn sql(&self, sql: &str) -> String {
        sql.replace("\"S\"", &format!("\"{}\"", self.schema))
    }

    async fn exec(&self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.client.batch_execute(&self.sql(sql)).await
    }

    /// The state catalog check, role by role, as the target's preflight runs it.
    async fn verify(&self) -> Result<(), String> {
        let t = default_state_tables();
        let names = [
            t.source_state,
            t.run,
            t.receipt,
            t.repair_authority,
            t.repair_consumption,
        ];
        let roles: Vec<(&str, String)> =
            STATE_CONTRACT.iter().map(|(r, _)| *r).zip(names).collect();
        for (role, name) in &roles {
            let facts = dpone_pg_catalog::table_facts(&self.client, &self.schema, name, |t| {
                roles
                    .iter()
                    .find(|(_, n)| n == t)
                    .map(|(r, _)| (*r).to_owned())
            })
            .await
            .expect("read the state catalog");
            verify_table(role, name, &facts)?;
        }
        Ok(())
    }

    async fn drop_schema(self) {
        let _ = self
            .client
            .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
            .await;
    }
}

async fn refused_with(e: &Env, reason: &str, table: &str, what: &str) {
    let m = e.verify().await.expect_err(what);
    assert!(m.starts_with(&format!("{reason}: ")), "{what}: {m}");
    assert!(m.contains(&format!("{table:?}")), "{what}: {m}");
    assert!(
        !m.contains("auth-1") && !m.contains("load-1"),
        "{what}: {m}"
    );
}

const REVIEWED_FUNCTION: &str = "CREATE OR REPLACE FUNCTION \"S\".\"dpone_forbid_mutation\"() \
     RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\nRAISE EXCEPTION 'dpone state rows are \
     immutable' USING ERRCODE = 'P0001';\nEND\n$$";

/// One authority, its receipt and its consumption.
const ROWS: &str = "INSERT INTO \"S\".dpone_repair_authority VALUES ('auth-1', repeat('a', 64), 'doc', now()); \
     INSERT INTO \"S\".dpone_commit_receipt VALUES ('rc-1', 'load-1', 'inv-1', 'k', NULL, NULL, 1, 1, '{}', now()); \
     INSERT INTO \"S\".dpone_repair_authority_consumption VALUES ('auth-1', 'd', 'k', 'load-1', 'rc-1', now())";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn an_inert_or_rewritten_state_guard_row_security_and_rules_are_refused_with_their_codes() {
    let e = Env::new().await;
    e.verify().await.expect("the reviewed DDL is the contract");
    e.exec(ROWS).await.expect("rows");
    let recreate = "DROP TRIGGER dpone_immutable ON \"S\".dpone_repair_authority_consumption; \
         CREATE TRIGGER dpone_immutable BEFORE UPDATE OR DELETE ON \"S\".dpone_repair_authority_consumption \
         FOR EACH ROW EXECUTE FUNCTION \"S\".dpone_forbid_mutation()";
    let consumption = "dpone_repair_authority_consumption";
    let cases: Vec<(&str, String, String, &str, &str)> = vec![
        (
            "ENABLE REPLICA TRIGGER",
            "ALTER TABLE \"S\".dpone_repair_authority_consumption ENABLE REPLICA TRIGGER dpone_immutable".into(),
            "ALTER TABLE \"S\".dpone_repair_authority_consumption ENABLE TRIGGER dpone_immutable".into(),
            "DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING",
            consumption,
        ),
        (
            "DISABLE TRIGGER",
            "ALTER TABLE \"S\".dpone_repair_authority_consumption DISABLE TRIGGER dpone_immutable".into(),
            "ALTER TABLE \"S\".dpone_repair_authority_consumption ENABLE TRIGGER dpone_immutable".into(),
            "DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING",
            consumption,
        ),
        (
            "WHEN (false)",
            "DROP TRIGGER dpone_immutable ON \"S\".dpone_repair_authority_consumption; \
             CREATE TRIGGER dpone_immutable BEFORE UPDATE OR DELETE ON \"S\".dpone_repair_authority_consumption \
             FOR EACH ROW WHEN (false) EXECUTE FUNCTION \"S\".dpone_forbid_mutation()"
                .into(),
            recreate.into(),
            "DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING",
            consumption,
        ),
        (
            "a column list",
            "DROP TRIGGER dpone_immutable ON \"S\".dpone_repair_authority_consumption; \
             CREATE TRIGGER dpone_immutable BEFORE UPDATE OF load_id OR DELETE ON \"S\".dpone_repair_authority_consumption \
             FOR EACH ROW EXECUTE FUNCTION \"S\".dpone_forbid_mutation()"
                .into(),
            recreate.into(),
            "DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING",
            consumption,
        ),
        (
            "the function's RAISE commented out",
            "CREATE OR REPLACE FUNCTION \"S\".\"dpone_forbid_mutation\"() RETURNS trigger \
             LANGUAGE plpgsql AS $$\nBEGIN\n-- RAISE EXCEPTION 'dpone state rows are immutable' \
             USING ERRCODE = 'P0001';\nRETURN OLD;\nEND\n$$"
                .into(),
            REVIEWED_FUNCTION.into(),
            "DPONE_XMIN_STATE_TRIGGER_FUNCTION_NOT_REVIEWED",
            "dpone_commit_receipt",
        ),
        (
            "the function STABLE",
            "ALTER FUNCTION \"S\".dpone_forbid_mutation() STABLE".into(),
            "ALTER FUNCTION \"S\".dpone_forbid_mutation() VOLATILE".into(),
            "DPONE_XMIN_STATE_TRIGGER_FUNCTION_NOT_REVIEWED",
            "dpone_commit_receipt",
        ),
        (
            "no TRUNCATE guard",
            "DROP TRIGGER dpone_no_truncate ON \"S\".dpone_repair_authority_consumption".into(),
            "CREATE TRIGGER dpone_no_truncate BEFORE TRUNCATE ON \"S\".dpone_repair_authority_consumption \
             FOR EACH STATEMENT EXECUTE FUNCTION \"S\".dpone_forbid_mutation()"
                .into(),
            "DPONE_XMIN_STATE_TRUNCATE_UNGUARDED",
            consumption,
        ),
        (
            "row level security",
            "ALTER TABLE \"S\".dpone_repair_authority_consumption ENABLE ROW LEVEL SECURITY".into(),
            "ALTER TABLE \"S\".dpone_repair_authority_consumption DISABLE ROW LEVEL SECURITY".into(),
            "DPONE_XMIN_STATE_ROW_SECURITY_PRESENT",
            consumption,
        ),
        (
            "forced row level security on the checkpoint table",
            "ALTER TABLE \"S\".dpone_source_state FORCE ROW LEVEL SECURITY".into(),
            "ALTER TABLE \"S\".dpone_source_state NO FORCE ROW LEVEL SECURITY".into(),
            "DPONE_XMIN_STATE_ROW_SECURITY_PRESENT",
            "dpone_source_state",
        ),
        (
            "a row security policy",
            "CREATE POLICY hide ON \"S\".dpone_repair_authority_consumption USING (false)".into(),
            "DROP POLICY hide ON \"S\".dpone_repair_authority_consumption".into(),
            "DPONE_XMIN_STATE_ROW_SECURITY_PRESENT",
            consumption,
        ),
        (
            "a rule",
            "CREATE RULE keep AS ON DELETE TO \"S\".dpone_repair_authority_consumption DO INSTEAD NOTHING".into(),
            "DROP RULE keep ON \"S\".dpone_repair_authority_consumption".into(),
            "DPONE_XMIN_STATE_RULE_PRESENT",
            consumption,
        ),
        (
            "a rule on the checkpoint table",
            "CREATE RULE keep AS ON UPDATE TO \"S\".dpone_source_state DO INSTEAD NOTHING".into(),
            "DROP RULE keep ON \"S\".dpone_source_state".into(),
            "DPONE_XMIN_STATE_RULE_PRESENT",
            "dpone_source_state",
        ),
    ];
    for (what, change, undo, reason, table) in &cases {
        e.exec(change)
            .await
            .unwrap_or_else(|err| panic!("{what}: {err}"));
        refused_with(&e, reason, table, what).await;
        e.exec(undo)
            .await
            .unwrap_or_else(|err| panic!("undo {what}: {err}"));
        e.verify()
            .await
            .unwrap_or_else(|m| panic!("restored after {what}: {m}"));
    }
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn deleting_or_truncating_a_one_shot_consumption_is_refused_by_the_database() {
    let e = Env::new().await;
    e.exec(ROWS).await.expect("rows");
    for sql in [
        "DELETE FROM \"S\".dpone_repair_authority_consumption",
        "UPDATE \"S\".dpone_repair_authority_consumption SET load_id = 'load-2'",
        "TRUNCATE \"S\".dpone_repair_authority_consumption",
        "TRUNCATE \"S\".dpone_repair_authority CASCADE",
        "TRUNCATE \"S\".dpone_commit_receipt CASCADE",
    ] {
        let err = e.exec(sql).await.expect_err(sql);
        assert_eq!(err.code().map(|c| c.code()), Some("P0001"), "{sql}");
    }
    let left: i64 = e
        .client
        .query_one(
            &e.sql("SELECT count(*) FROM \"S\".dpone_repair_authority_consumption"),
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(left, 1, "the consumption stays");
    // Without the statement trigger, TRUNCATE empties it (row triggers never fire): the check
    // refuses such a catalog.
    e.exec("DROP TRIGGER dpone_no_truncate ON \"S\".dpone_repair_authority_consumption")
        .await
        .expect("drop the guard");
    refused_with(
        &e,
        "DPONE_XMIN_STATE_TRUNCATE_UNGUARDED",
        "dpone_repair_authority_consumption",
        "unguarded",
    )
    .await;
    e.exec("TRUNCATE \"S\".dpone_repair_authority_consumption")
        .await
        .expect("an unguarded table truncates");
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn the_truncate_guard_migration_brings_an_older_state_catalog_to_the_contract() {
    let e = Env::new().await;
    e.exec(
        "DROP TRIGGER dpone_no_truncate ON \"S\".dpone_commit_receipt; \
         DROP TRIGGER dpone_no_truncate ON \"S\".dpone_repair_authority; \
         DROP TRIGGER dpone_no_truncate ON \"S\".dpone_repair_authority_consumption",
    )
    .await
    .expect("an older catalog");
    refused_with(
        &e,
        "DPONE_XMIN_STATE_TRUNCATE_UNGUARDED",
        "dpone_commit_receipt",
        "older catalog",
    )
    .await;
    let migration = render_state_truncate_guard_migration(&e.schema, &default_state_tables());
    e.client
        .batch_execute(&migration)
        .await
        .expect("the migration applies");
    e.verify().await.expect("migrated catalog verifies");
    e.client
        .batch_execute(&migration)
        .await
        .expect("the migration applies again");
    e.verify().await.expect("still verifies");
    e.drop_schema().await;
}

#[test]
fn the_truncate_guard_migration_fixture_is_current() {
    // Tier: unit (pure). `DPONE_BLESS=1` rewrites the fixture.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/xmin/migrate-add-truncate-guard.sql");
    let rendered = render_state_truncate_guard_migration("dpone_state", &default_state_tables());
    if std::env::var("DPONE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &rendered).expect("write fixture");
    }
    let fixture = std::fs::read_to_string(&path).expect("fixture");
    assert_eq!(
        fixture, rendered,
        "fixtures/xmin/migrate-add-truncate-guard.sql is stale: rerun with DPONE_BLESS=1"
    );
    // Its CREATE statements are the reviewed DDL's.
    let ddl = render_state_ddl("dpone_state", &default_state_tables());
    let creates: Vec<&str> = rendered
        .split(";\n")
        .filter(|s| s.trim_start().starts_with("CREATE"))
        .collect();
    assert_eq!(creates.len(), 3);
    for c in creates {
        assert!(ddl.contains(c.trim_start()), "the DDL holds {c}");
    }
}
