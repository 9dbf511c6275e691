//! Live SQL Server tests, gated on `DPONE_TEST_MSSQL_URL` (an ADO.NET connection string for a
//! principal that may create and drop scratch databases; see docs/mssql-target.md). Without it
//! at build time every test here is reported `ignored` with its SKIP reason (`build.rs` sets
//! `cfg(dpone_live_mssql)` only when it is set); with it, a server that cannot be reached is a
//! failure, never an early return counted as a pass.
//!
//! Hygiene: every scratch database (`dpone_t_*`) is owned by a [`Scratch`] guard that drops it
//! when the test ends, panics included; the first test of a process also sweeps scratch
//! databases older than an hour (left by a killed process). Names are unique per process, test
//! and instant, so the tests run in parallel safely.
//!
//! Scope: pin capture and verification against the real catalog (including the typed create
//! token), the server classification, the staging lease check, the state provisioning scripts
//! and the v1 -> v2 migration (clean, duplicate-digest abort, rerun), and one finalizer pass
//! (insert, update, soft delete, reactivate) with exact `OUTPUT` counts.

mod common;

use dpone_adapter_mssql::catalog;
use dpone_adapter_mssql::conn::{self, MssqlClient};
use dpone_adapter_mssql::pins::{DatabaseAuthority, Role, verify_database, verify_lease};
use dpone_adapter_mssql::provision;
use dpone_adapter_mssql::server;
use dpone_adapter_mssql::session::RunTransaction;
use dpone_adapter_mssql::sql::{self, DeleteMode, MissingAction, ThreePart};
use dpone_engine_xmin::ports::ApplyStep;
use std::sync::atomic::{AtomicBool, Ordering};

/// Minutes after which a scratch database is taken to be left behind by a dead process.
const SWEEP_AFTER_MINUTES: i32 = 60;
static SWEPT: AtomicBool = AtomicBool::new(false);

/// The test server. These tests only run when `DPONE_TEST_MSSQL_URL` was set at build time, so
/// an unset or unreachable server here fails the test.
async fn server() -> (String, MssqlClient) {
    let url = conn::test_url().unwrap_or_else(|reason| panic!("{reason}"));
    let mut c = conn::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {}: {e}", conn::TEST_URL_ENV));
    // The route refuses anything but a supported SQL Server, and so do the live tests.
    let facts = conn::server_facts(&mut c).await.expect("server facts");
    if let Err(e) = server::classify(&facts) {
        panic!("DPONE_XMIN_TARGET_SERVER_UNSUPPORTED: {e}");
    }
    if !SWEPT.swap(true, Ordering::SeqCst) {
        conn::sweep_scratch(&mut c, SWEEP_AFTER_MINUTES)
            .await
            .expect("sweep stale scratch databases");
    }
    (url, c)
}

fn scratch_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!(
        "{}{tag}_{}_{nanos}",
        sql::SCRATCH_PREFIX,
        std::process::id()
    )
}

/// A scratch database, dropped when the guard goes out of scope (also on panic).
struct Scratch {
    url: String,
    name: String,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let url = self.url.clone();
        let name = self.name.clone();
        // A fresh runtime on its own thread: the test's runtime may be the one unwinding.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut c) = conn::connect(&url).await {
                    let _ = conn::execute(&mut c, "use", "USE master;").await;
                    let _ = conn::execute(&mut c, "drop", &sql::drop_scratch_database(&name)).await;
                }
            });
        })
        .join();
    }
}

/// Creates a scratch database, makes it the session's database and returns its guard.
async fn create_db(url: &str, c: &mut MssqlClient, name: &str) -> Scratch {
    conn::execute(
        c,
        "create",
        &format!("CREATE DATABASE {};", sql::ident(name)),
    )
    .await
    .expect("create database");
    let guard = Scratch {
        url: url.to_owned(),
        name: name.to_owned(),
    };
    conn::execute(c, "use", &format!("USE {};", sql::ident(name)))
        .await
        .expect("use");
    guard
}

/// Leaves the database so the guard can drop it.
async fn leave(c: &mut MssqlClient) {
    let _ = conn::execute(c, "use", "USE master;").await;
}

/// Runs the migration script batch by batch, as `sqlcmd -I -b` does.
async fn migrate(c: &mut MssqlClient) -> Result<(), conn::ConnError> {
    for b in provision::batches(provision::MIGRATE_V1_TO_V2) {
        conn::execute(c, "migrate", &b).await?;
    }
    Ok(())
}

/// `sqlcmd` without `-I` runs with `QUOTED_IDENTIFIER OFF`: the scripts must succeed anyway.
async fn sqlcmd_defaults(c: &mut MssqlClient) {
    conn::execute(c, "sqlcmd defaults", "SET QUOTED_IDENTIFIER OFF;")
        .await
        .unwrap();
}

async fn count(c: &mut MssqlClient, statement: &str, at: &str) -> i64 {
    let rows = c
        .query(statement, &[&at])
        .await
        .expect("query")
        .into_results()
        .await
        .expect("results");
    let last = rows.last().and_then(|r| r.first()).expect("count row");
    last.get::<i64, _>(0).expect("count")
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_pins_match_the_catalog() {
    let (url, mut c) = server().await;
    let name = scratch_name("pins");
    let guard = create_db(&url, &mut c, &name).await;
    assert_eq!(conn::metadata_permission(&mut c).await.unwrap(), Some(1));
    let rows = conn::catalog_rows(&mut c, &name).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].create_token.len(), 27, "canonical create token");
    let pin = DatabaseAuthority {
        database_id: rows[0].database_id,
        create_token: rows[0].create_token.clone(),
        database_guid: rows[0].database_guid.clone().unwrap(),
    };
    verify_database(Role::Target, &name, &pin, &rows).unwrap();
    let (id, db) = conn::current_database(&mut c).await.unwrap();
    verify_lease(&name, &pin, id, &db).unwrap();
    let me = conn::session_identity(&mut c).await.unwrap();
    assert!(!me.principal_sid.is_empty());
    // Recreate under the same name: the old pin must fail.
    leave(&mut c).await;
    drop(guard);
    let _guard = create_db(&url, &mut c, &name).await;
    let rows = conn::catalog_rows(&mut c, &name).await.unwrap();
    assert!(verify_database(Role::Target, &name, &pin, &rows).is_err());
    leave(&mut c).await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_state_ddl_and_migration() {
    let (url, mut c) = server().await;
    // Clean v1 -> v2, then an exact rerun.
    let name = scratch_name("mig");
    let _mig = create_db(&url, &mut c, &name).await;
    sqlcmd_defaults(&mut c).await;
    for b in provision::state_ddl_v1() {
        conn::execute(&mut c, "state_ddl_v1", &b).await.unwrap();
    }
    // The runtime's catalog verification reads the real catalog: v1 lacks the v2 constraint.
    let facts_sql = sql::StateNames::defaults(&name, "dpone").catalog_facts();
    let facts = conn::state_catalog_facts(&mut c, &facts_sql).await.unwrap();
    let e = catalog::verify_state_catalog(&facts).unwrap_err();
    assert!(e.contains("invocation_digest"), "{e}");
    migrate(&mut c).await.unwrap();
    migrate(&mut c)
        .await
        .expect("an exact rerun changes nothing");
    let facts = conn::state_catalog_facts(&mut c, &facts_sql).await.unwrap();
    catalog::verify_state_catalog(&facts).expect("the reviewed script is the v2 contract");

    // CHECK constraints and foreign keys the reviewed script does not have, or without one it
    // has: each refused on the real catalog, and accepted again once undone.
    for (change, undo, reason) in [
        (
            "ALTER TABLE [dpone].[dpone_commit_receipt] ADD CONSTRAINT [sneaky] CHECK ([new_revision] < 1000);",
            "ALTER TABLE [dpone].[dpone_commit_receipt] DROP CONSTRAINT [sneaky];",
            "CHECK constraint sneaky is not in the contract",
        ),
        (
            "ALTER TABLE [dpone].[dpone_run_state] NOCHECK CONSTRAINT [dpone_run_state_status_ck];",
            "ALTER TABLE [dpone].[dpone_run_state] WITH CHECK CHECK CONSTRAINT [dpone_run_state_status_ck];",
            "disabled or not trusted",
        ),
        (
            "ALTER TABLE [dpone].[dpone_repair_authority_consumption] DROP CONSTRAINT [dpone_repair_authority_consumption_receipt_fk];",
            "ALTER TABLE [dpone].[dpone_repair_authority_consumption] ADD CONSTRAINT [dpone_repair_authority_consumption_receipt_fk] FOREIGN KEY ([receipt_id]) REFERENCES [dpone].[dpone_commit_receipt] ([receipt_id]);",
            "the foreign key on receipt_id",
        ),
        (
            "CREATE TABLE [dbo].[outside] ([receipt_id] nvarchar(128) NOT NULL CONSTRAINT [outside_fk] REFERENCES [dpone].[dpone_commit_receipt] ([receipt_id]) ON DELETE CASCADE);",
            "DROP TABLE [dbo].[outside];",
            "outside_fk of a table outside the state tables",
        ),
    ] {
        conn::execute(&mut c, "change", change).await.unwrap();
        let facts = conn::state_catalog_facts(&mut c, &facts_sql).await.unwrap();
        let e = catalog::verify_state_catalog(&facts).unwrap_err();
        assert!(e.contains(reason), "{change}: {e}");
        conn::execute(&mut c, "undo", undo).await.unwrap();
        let facts = conn::state_catalog_facts(&mut c, &facts_sql).await.unwrap();
        catalog::verify_state_catalog(&facts).expect("undone");
    }
    leave(&mut c).await;

    // Duplicate historical digests: abort with 51005 and no constraint.
    let name = scratch_name("dup");
    let _dup = create_db(&url, &mut c, &name).await;
    sqlcmd_defaults(&mut c).await;
    for b in provision::state_ddl_v1() {
        conn::execute(&mut c, "state_ddl_v1", &b).await.unwrap();
    }
    let insert = "INSERT INTO [dpone].[dpone_commit_receipt] (receipt_id, load_id, invocation_id, \
invocation_digest, state_key, new_xmin, new_revision, body, committed_at_utc) VALUES \
(N'r1', N'l1', N'i1', 0x01, REPLICATE('a', 64), 1, 1, N'{}', SYSUTCDATETIME()), \
(N'r2', N'l2', N'i2', 0x01, REPLICATE('b', 64), 1, 1, N'{}', SYSUTCDATETIME());";
    conn::execute(&mut c, "seed", insert).await.unwrap();
    let err = migrate(&mut c).await.unwrap_err();
    assert!(
        matches!(err, conn::ConnError::Server { number: 51005, .. }),
        "{err}"
    );
    let n = count(
        &mut c,
        "SELECT COUNT_BIG(*) FROM sys.key_constraints WHERE name = \
N'dpone_commit_receipt_invocation_digest_uq' AND @P1 = @P1;",
        "x",
    )
    .await;
    assert_eq!(n, 0);
    leave(&mut c).await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_finalizer_counts() {
    let (url, mut c) = server().await;
    let name = scratch_name("fin");
    let _fin = create_db(&url, &mut c, &name).await;
    for b in provision::batches(provision::STATE_DDL) {
        conn::execute(&mut c, "state_ddl", &b).await.unwrap();
    }
    conn::execute(&mut c, "schema", "CREATE SCHEMA [stage];")
        .await
        .unwrap();
    let mut f = common::finalizer(DeleteMode::TimestampAndFlag, MissingAction::SoftDelete);
    f.target = ThreePart::new(&name, "dbo", "orders");
    f.stage_rows = ThreePart::new(&name, "stage", "rows_t");
    f.stage_keys = ThreePart::new(&name, "stage", "keys_t");
    f.state = sql::StateNames::defaults(&name, "dpone");
    let ddl = sql::target_ddl(&f.target, &f.keys, &f.business, f.mode);
    conn::execute(&mut c, "target_ddl", &ddl).await.unwrap();
    f.validate().unwrap();
    let cols = conn::target_columns(&mut c, "[dbo].[orders]")
        .await
        .unwrap();
    dpone_adapter_mssql::shape::verify_target(&f, &cols).unwrap();
    let (indexes, instead_of, cascading) = conn::target_key_catalog(&mut c, "[dbo].[orders]")
        .await
        .unwrap();
    let key_names: Vec<String> = f.keys.iter().map(|k| k.name.clone()).collect();
    catalog::verify_target_key(&key_names, &indexes, instead_of, cascading).unwrap();

    // Run 1: baseline of a, b, c.
    let load = |rows: &str, keys: &str| {
        format!(
            "{}\n{}\nINSERT INTO {} VALUES {rows}; INSERT INTO {} VALUES {keys};",
            f.stage_rows_ddl(),
            f.stage_keys_ddl(),
            f.stage_rows.sql(),
            f.stage_keys.sql()
        )
    };
    let at = "2026-01-01T00:00:00";
    conn::execute(
        &mut c,
        "stage",
        &load(
            "(N'a', 1, 1.00, N'x'), (N'b', 1, 2.00, NULL), (N'c', 1, 3.00, N'z')",
            "(N'a', 1), (N'b', 1), (N'c', 1)",
        ),
    )
    .await
    .unwrap();
    for (stmt, want) in [
        (f.update_changed(), 0),
        (f.reactivate(), 0),
        (f.insert(), 3),
    ] {
        assert_eq!(count(&mut c, &stmt, at).await, want, "{stmt}");
    }
    conn::execute(&mut c, "drop", &f.stage_drop())
        .await
        .unwrap();

    // Run 2: b changed, c missing; a's note gained a trailing space only — a change, although
    // the column's case-insensitive, padded collation calls the two equal; A and a stay
    // distinct keys.
    conn::execute(
        &mut c,
        "stage",
        &load(
            "(N'b', 1, 2.50, NULL), (N'A', 1, 9.00, NULL), (N'a', 1, 1.00, N'x ')",
            "(N'a', 1), (N'b', 1), (N'A', 1)",
        ),
    )
    .await
    .unwrap();
    // Through the run transaction: framing, applock, one detection time, exact counts.
    let mut tx = RunTransaction::begin(c, f.clone()).await.unwrap();
    tx.lock_target(&[7u8; 32]).await.unwrap();
    let at2 = tx.detection_time().await.unwrap();
    let p = tx.populations().await.unwrap();
    assert_eq!((p.active, p.total, p.missing), (3, 3, 1));
    assert_eq!(tx.apply(ApplyStep::UpdateChanged, at2).await.unwrap(), 2);
    assert_eq!(tx.apply(ApplyStep::Reactivate, at2).await.unwrap(), 0);
    assert_eq!(tx.apply(ApplyStep::Insert, at2).await.unwrap(), 1);
    assert_eq!(tx.apply(ApplyStep::Missing, at2).await.unwrap(), 1);
    let parity = tx.parity().await.unwrap();
    assert_eq!(
        (parity.active, parity.total, parity.delta_outside_snapshot),
        (3, 4, 0)
    );
    let mut c = tx.commit().await.unwrap();
    conn::execute(&mut c, "drop", &f.stage_drop())
        .await
        .unwrap();
    leave(&mut c).await;
}
