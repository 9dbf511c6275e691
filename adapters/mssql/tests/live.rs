//! Live SQL Server tests, gated on `DPONE_TEST_MSSQL_URL` (an ADO.NET connection string for a
//! principal that may create and drop scratch databases; see docs/mssql-target.md). Without it
//! each test prints `SKIP: <reason>` and returns; with `DPONE_TEST_MSSQL_REQUIRED=1` a missing
//! server fails instead.
//!
//! Scope: pin capture and verification against the real catalog, the staging lease check, the
//! state provisioning scripts and the v1 -> v2 migration (clean, duplicate-digest abort, rerun),
//! and one finalizer pass (insert, update, soft delete, reactivate) with exact `OUTPUT` counts.

mod common;

use dpone_adapter_mssql::conn::{self, MssqlClient};
use dpone_adapter_mssql::pins::{DatabaseAuthority, Role, verify_database, verify_lease};
use dpone_adapter_mssql::provision;
use dpone_adapter_mssql::session::RunTransaction;
use dpone_adapter_mssql::sql::{self, DeleteMode, MissingAction, ThreePart};
use dpone_engine_xmin::ports::ApplyStep;

#[allow(clippy::print_stdout)]
fn skip(reason: &str) {
    if std::env::var("DPONE_TEST_MSSQL_REQUIRED").is_ok_and(|v| v == "1") {
        panic!("SQL Server required (DPONE_TEST_MSSQL_REQUIRED=1) but: {reason}");
    }
    println!("SKIP: {reason}");
    eprintln!("SKIP: {reason}");
}

async fn server() -> Option<MssqlClient> {
    let url = match conn::test_url() {
        Ok(u) => u,
        Err(reason) => {
            skip(&reason);
            return None;
        }
    };
    match conn::connect(&url).await {
        Ok(c) => Some(c),
        Err(e) => {
            skip(&format!("cannot connect to {}: {e}", conn::TEST_URL_ENV));
            None
        }
    }
}

fn scratch_name(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("dpone_t_{tag}_{}_{nanos}", std::process::id())
}

async fn create_db(c: &mut MssqlClient, name: &str) {
    conn::execute(
        c,
        "create",
        &format!("CREATE DATABASE {};", sql::ident(name)),
    )
    .await
    .expect("create database");
    conn::execute(c, "use", &format!("USE {};", sql::ident(name)))
        .await
        .expect("use");
}

async fn drop_db(c: &mut MssqlClient, name: &str) {
    let _ = conn::execute(c, "use", "USE master;").await;
    let _ = conn::execute(
        c,
        "drop",
        &format!(
            "ALTER DATABASE {n} SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE {n};",
            n = sql::ident(name)
        ),
    )
    .await;
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
    let Some(mut c) = server().await else { return };
    let name = scratch_name("pins");
    create_db(&mut c, &name).await;
    assert_eq!(conn::metadata_permission(&mut c).await.unwrap(), Some(1));
    let rows = conn::catalog_rows(&mut c, &name).await.unwrap();
    assert_eq!(rows.len(), 1);
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
    drop_db(&mut c, &name).await;
    create_db(&mut c, &name).await;
    let rows = conn::catalog_rows(&mut c, &name).await.unwrap();
    assert!(verify_database(Role::Target, &name, &pin, &rows).is_err());
    drop_db(&mut c, &name).await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_state_ddl_and_migration() {
    let Some(mut c) = server().await else { return };
    // Clean v1 -> v2, then an exact rerun.
    let name = scratch_name("mig");
    create_db(&mut c, &name).await;
    for b in provision::state_ddl_v1() {
        conn::execute(&mut c, "state_ddl_v1", &b).await.unwrap();
    }
    conn::execute(&mut c, "migrate", provision::MIGRATE_V1_TO_V2)
        .await
        .unwrap();
    conn::execute(&mut c, "migrate_rerun", provision::MIGRATE_V1_TO_V2)
        .await
        .unwrap();
    drop_db(&mut c, &name).await;

    // Duplicate historical digests: abort with 51005 and no constraint.
    let name = scratch_name("dup");
    create_db(&mut c, &name).await;
    for b in provision::state_ddl_v1() {
        conn::execute(&mut c, "state_ddl_v1", &b).await.unwrap();
    }
    let insert = "INSERT INTO [dpone].[dpone_commit_receipt] (receipt_id, load_id, invocation_id, \
invocation_digest, state_key, new_xmin, new_revision, body, committed_at_utc) VALUES \
(N'r1', N'l1', N'i1', 0x01, REPLICATE('a', 64), 1, 1, N'{}', SYSUTCDATETIME()), \
(N'r2', N'l2', N'i2', 0x01, REPLICATE('b', 64), 1, 1, N'{}', SYSUTCDATETIME());";
    conn::execute(&mut c, "seed", insert).await.unwrap();
    let err = conn::execute(&mut c, "migrate", provision::MIGRATE_V1_TO_V2)
        .await
        .unwrap_err();
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
    drop_db(&mut c, &name).await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_finalizer_counts() {
    let Some(mut c) = server().await else { return };
    let name = scratch_name("fin");
    create_db(&mut c, &name).await;
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

    // Run 2: b changed, c missing, a identical; A and a stay distinct keys.
    conn::execute(
        &mut c,
        "stage",
        &load(
            "(N'b', 1, 2.50, NULL), (N'A', 1, 9.00, NULL)",
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
    assert_eq!(tx.apply(ApplyStep::UpdateChanged, at2).await.unwrap(), 1);
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
    drop_db(&mut c, &name).await;
}
