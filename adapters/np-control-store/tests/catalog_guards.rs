//! The immutability guards of the control store on a real PostgreSQL server: a trigger made
//! inert (replica-only, disabled, `WHEN (false)`, a column list), a trigger function rewritten
//! so it no longer raises, a protected table without its `BEFORE TRUNCATE` guard, row security
//! and rules are each refused by the catalog check with their own reason code, naming the table
//! and no row values; on the reviewed DDL PostgreSQL itself refuses `UPDATE`, `DELETE` and
//! `TRUNCATE`; the truncate-guard migration brings an older store to the contract.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`).

mod support;

use dpone_adapter_np_control_store::catalog::CONTRACT;
use dpone_adapter_np_control_store::*;
use support::*;

/// The reviewed trigger function, as `control-store.sql` creates it (schema `"S"`).
const REVIEWED_FUNCTION: &str = "CREATE OR REPLACE FUNCTION \"S\".\"np_forbid_mutation\"() \
     RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\nRAISE EXCEPTION 'dpone nonproduction control \
     rows are immutable' USING ERRCODE = 'P0001';\nEND\n$$";

fn in_schema(sql: &str, e: &Env) -> String {
    sql.replace("\"S\"", &format!("\"{}\"", e.schema))
}

/// `verify_catalog` refuses with the catalog code, the message starting with `reason` and
/// naming `table`; no value of a row appears.
async fn refused_with(store: &PgControlStore, reason: &str, table: &str, what: &str) {
    let err = store.verify_catalog().await.expect_err(what);
    assert_eq!(err.code, StoreCode::CatalogInvalid, "{what}: {err}");
    assert!(
        err.message.starts_with(&format!("{reason}: ")),
        "{what}: {err}"
    );
    assert!(err.message.contains(&format!("{table:?}")), "{what}: {err}");
    assert!(
        !err.message.contains("sha256:") && !err.message.contains("policy-A"),
        "{what}: a row value in {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn an_inert_or_rewritten_guard_row_security_and_rules_are_refused_with_their_codes() {
    let e = Env::new().await;
    let store = e.store();
    store
        .verify_catalog()
        .await
        .expect("the fixture is the contract");
    store
        .record_trust(&policy(&uuid(1, 1), b"policy-A", 0, CEILINGS))
        .await
        .expect("a row");
    let recreate = "DROP TRIGGER np_immutable ON \"S\".np_settlement; \
         CREATE TRIGGER np_immutable BEFORE UPDATE OR DELETE ON \"S\".np_settlement \
         FOR EACH ROW EXECUTE FUNCTION \"S\".np_forbid_mutation()";
    let commented = "CREATE OR REPLACE FUNCTION \"S\".\"np_forbid_mutation\"() \
         RETURNS trigger LANGUAGE plpgsql AS $$\nBEGIN\n-- RAISE EXCEPTION 'dpone nonproduction \
         control rows are immutable' USING ERRCODE = 'P0001';\nRETURN OLD;\nEND\n$$";
    let cases: Vec<(&str, String, String, &str, &str)> = vec![
        (
            "ENABLE REPLICA TRIGGER",
            "ALTER TABLE \"S\".np_settlement ENABLE REPLICA TRIGGER np_immutable".into(),
            "ALTER TABLE \"S\".np_settlement ENABLE TRIGGER np_immutable".into(),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_settlement",
        ),
        (
            "DISABLE TRIGGER",
            "ALTER TABLE \"S\".np_settlement DISABLE TRIGGER np_immutable".into(),
            "ALTER TABLE \"S\".np_settlement ENABLE TRIGGER np_immutable".into(),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_settlement",
        ),
        (
            "WHEN (false)",
            "DROP TRIGGER np_immutable ON \"S\".np_settlement; \
             CREATE TRIGGER np_immutable BEFORE UPDATE OR DELETE ON \"S\".np_settlement \
             FOR EACH ROW WHEN (false) EXECUTE FUNCTION \"S\".np_forbid_mutation()"
                .into(),
            recreate.into(),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_settlement",
        ),
        (
            "a column list",
            "DROP TRIGGER np_immutable ON \"S\".np_settlement; \
             CREATE TRIGGER np_immutable BEFORE UPDATE OF outcome OR DELETE ON \"S\".np_settlement \
             FOR EACH ROW EXECUTE FUNCTION \"S\".np_forbid_mutation()"
                .into(),
            recreate.into(),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_settlement",
        ),
        (
            "the function's RAISE commented out",
            commented.into(),
            REVIEWED_FUNCTION.into(),
            "DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED",
            "np_trust_revision",
        ),
        (
            "the function SECURITY DEFINER",
            "ALTER FUNCTION \"S\".np_forbid_mutation() SECURITY DEFINER".into(),
            "ALTER FUNCTION \"S\".np_forbid_mutation() SECURITY INVOKER".into(),
            "DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED",
            "np_trust_revision",
        ),
        (
            "no TRUNCATE guard",
            "DROP TRIGGER np_no_truncate ON \"S\".np_settlement".into(),
            "CREATE TRIGGER np_no_truncate BEFORE TRUNCATE ON \"S\".np_settlement \
             FOR EACH STATEMENT EXECUTE FUNCTION \"S\".np_forbid_mutation()"
                .into(),
            "DPONE_NP_STORE_TRUNCATE_UNGUARDED",
            "np_settlement",
        ),
        (
            "a disabled TRUNCATE guard",
            "ALTER TABLE \"S\".np_settlement DISABLE TRIGGER np_no_truncate".into(),
            "ALTER TABLE \"S\".np_settlement ENABLE TRIGGER np_no_truncate".into(),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_settlement",
        ),
        (
            "row level security",
            "ALTER TABLE \"S\".np_settlement ENABLE ROW LEVEL SECURITY".into(),
            "ALTER TABLE \"S\".np_settlement DISABLE ROW LEVEL SECURITY".into(),
            "DPONE_NP_STORE_ROW_SECURITY_PRESENT",
            "np_settlement",
        ),
        (
            "forced row level security",
            "ALTER TABLE \"S\".np_settlement FORCE ROW LEVEL SECURITY".into(),
            "ALTER TABLE \"S\".np_settlement NO FORCE ROW LEVEL SECURITY".into(),
            "DPONE_NP_STORE_ROW_SECURITY_PRESENT",
            "np_settlement",
        ),
        (
            "a row security policy",
            "CREATE POLICY hide ON \"S\".np_trust_revision USING (false)".into(),
            "DROP POLICY hide ON \"S\".np_trust_revision".into(),
            "DPONE_NP_STORE_ROW_SECURITY_PRESENT",
            "np_trust_revision",
        ),
        (
            "a rule",
            "CREATE RULE keep AS ON DELETE TO \"S\".np_reservation DO INSTEAD NOTHING".into(),
            "DROP RULE keep ON \"S\".np_reservation".into(),
            "DPONE_NP_STORE_RULE_PRESENT",
            "np_reservation",
        ),
    ];
    for (what, change, undo, reason, table) in &cases {
        e.admin
            .batch_execute(&in_schema(change, &e))
            .await
            .unwrap_or_else(|err| panic!("{what}: {err}"));
        refused_with(&store, reason, table, what).await;
        e.admin
            .batch_execute(&in_schema(undo, &e))
            .await
            .unwrap_or_else(|err| panic!("undo {what}: {err}"));
        store
            .verify_catalog()
            .await
            .unwrap_or_else(|err| panic!("restored after {what}: {err}"));
    }
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn truncate_is_refused_by_the_database_and_an_unguarded_table_by_the_check() {
    let e = Env::new().await;
    let store = e.store();
    store
        .record_trust(&policy(&uuid(1, 1), b"policy-A", 0, CEILINGS))
        .await
        .expect("a row");
    // The reviewed DDL: TRUNCATE (even with CASCADE) is refused by PostgreSQL.
    for sql in [
        "TRUNCATE \"S\".np_trust_revision CASCADE",
        "TRUNCATE \"S\".np_settlement",
    ] {
        let err = e
            .admin
            .batch_execute(&in_schema(sql, &e))
            .await
            .expect_err(sql);
        assert_eq!(err.code().map(|c| c.code()), Some("P0001"), "{sql}");
    }
    assert_eq!(count(&e).await, 1, "nothing truncated");
    // UPDATE and DELETE too.
    for sql in [
        "UPDATE \"S\".np_trust_revision SET revocation_epoch = 1",
        "DELETE FROM \"S\".np_trust_revision",
    ] {
        let err = e
            .admin
            .batch_execute(&in_schema(sql, &e))
            .await
            .expect_err(sql);
        assert_eq!(err.code().map(|c| c.code()), Some("P0001"), "{sql}");
    }
    // Without the statement trigger a TRUNCATE empties the table (row triggers never fire):
    // the check refuses such a store.
    e.admin
        .batch_execute(&in_schema(
            "DROP TRIGGER np_no_truncate ON \"S\".np_trust_revision",
            &e,
        ))
        .await
        .expect("drop the guard");
    refused_with(
        &store,
        "DPONE_NP_STORE_TRUNCATE_UNGUARDED",
        "np_trust_revision",
        "unguarded",
    )
    .await;
    // With the guards of the tables it cascades to dropped too, the rows are gone.
    let mut drop = String::new();
    for t in CONTRACT.iter().skip(1) {
        drop.push_str(&format!(
            "DROP TRIGGER np_no_truncate ON \"{}\".{};\n",
            e.schema, t.name
        ));
    }
    e.admin.batch_execute(&drop).await.expect("drop the guards");
    e.admin
        .batch_execute(&in_schema("TRUNCATE \"S\".np_trust_revision CASCADE", &e))
        .await
        .expect("an unguarded table truncates");
    assert_eq!(count(&e).await, 0);
    e.drop_schema().await;
}

async fn count(e: &Env) -> i64 {
    let sql = format!("SELECT count(*) FROM \"{}\".np_trust_revision", e.schema);
    e.admin.query_one(&sql, &[]).await.unwrap().get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn the_truncate_guard_migration_brings_an_older_store_to_the_contract() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nonproduction");
    let migration =
        std::fs::read_to_string(root.join("migrate-add-truncate-guard.sql")).expect("migration");
    let ddl = std::fs::read_to_string(root.join("control-store.sql")).expect("ddl");
    // Every CREATE of the migration is the DDL's; each is preceded by its DROP ... IF EXISTS,
    // so the migration can be applied again.
    let all = statements(&migration);
    let creates: Vec<&String> = all.iter().filter(|s| s.starts_with("CREATE")).collect();
    // Every table but those created later with their guards (`migrate-add-identity-record.sql`
    // creates `np_participant_identity` with its own, `migrate-add-admission-queue.sql` the
    // queue's two tables with theirs).
    let later = [
        "np_participant_identity",
        "np_admission_request",
        "np_admission_outcome",
    ];
    let guarded: Vec<&str> = CONTRACT
        .iter()
        .map(|t| t.name)
        .filter(|t| !later.contains(t))
        .collect();
    assert_eq!(creates.len(), guarded.len());
    for t in &guarded {
        assert!(
            creates.iter().any(|c| c.contains(&format!("\"{t}\"\n"))),
            "the migration guards {t}"
        );
    }
    for c in &creates {
        assert!(ddl.contains(c.as_str()), "the DDL holds {c}");
    }
    assert!(
        all.iter().all(
            |s| s.starts_with("CREATE TRIGGER np_no_truncate BEFORE TRUNCATE")
                || s.starts_with("DROP TRIGGER IF EXISTS np_no_truncate ON")
        ),
        "the migration only (re)creates truncate guards"
    );
    let e = Env::new().await;
    let mut drop = String::new();
    for t in &guarded {
        drop.push_str(&format!(
            "DROP TRIGGER np_no_truncate ON \"{}\".{t};\n",
            e.schema
        ));
    }
    e.admin.batch_execute(&drop).await.expect("an older store");
    let store = e.store();
    refused_with(
        &store,
        "DPONE_NP_STORE_TRUNCATE_UNGUARDED",
        CONTRACT[0].name,
        "older store",
    )
    .await;
    let migration = migration.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema));
    e.admin
        .batch_execute(&migration)
        .await
        .expect("the migration applies");
    store
        .verify_catalog()
        .await
        .expect("migrated store verifies");
    e.admin
        .batch_execute(&migration)
        .await
        .expect("the migration applies again");
    store.verify_catalog().await.expect("still verifies");
    e.drop_schema().await;
}
