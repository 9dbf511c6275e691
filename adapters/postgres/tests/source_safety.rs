//! The key snapshot is complete or the read is refused: row-level security, inheritance
//! children, partitioned parents, missing privileges, a schema renamed during the read, pinned
//! session settings, and that version 2 calls no control, WAL or statistics function, each on a
//! real PostgreSQL server.
//!
//! Tier: real PostgreSQL integration (native policies).

mod support;

use dpone_adapter_postgres::source::{PgSource, SESSION_SETTINGS};
use dpone_adapter_postgres::target::PgTarget;
use dpone_engine_xmin::engine::{Phase, RunFailure, RunOutcome};
use dpone_engine_xmin::{ErrorCode, Route, RunRequest};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use support::{Fixture, Options, prepare};

fn guarded() -> Options {
    // Deletions up to half of the keys would be applied: a filtered snapshot is not stopped by
    // the guards, only by the source checks under test.
    Options {
        reconciliation_extra: "  guards: {max_delete_ratio: 0.5}\n".into(),
        ..Options::default()
    }
}

async fn run_route(
    f: &Fixture,
    route: &Route,
    source: &mut PgSource,
) -> Result<RunOutcome, RunFailure> {
    let req = RunRequest {
        invocation_id: support::new_invocation(),
        repair_authority_ref: None,
    };
    let mut target = PgTarget::for_route(route).expect("target");
    dpone_engine_xmin::run(
        route,
        &req,
        source,
        &mut target,
        &f.store,
        &support::NativePolicies,
    )
    .await
}

fn artifact_count(f: &Fixture) -> usize {
    std::fs::read_dir(f.artifacts_dir.path())
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Runs `route` and expects a refusal in extraction with `code`, with nothing changed.
async fn refused(f: &Fixture, route: &Route, code: ErrorCode) {
    let before = f.target_fingerprint().await;
    let cp = f.checkpoint().await;
    let err = run_route(f, route, &mut PgSource::new())
        .await
        .expect_err("must be refused");
    assert_eq!(err.code(), code, "{err}");
    assert_eq!(err.phase, Phase::Extraction, "{err}");
    assert_eq!(artifact_count(f), 0, "no payload may be kept");
    assert_eq!(f.target_fingerprint().await, before, "target untouched");
    assert_eq!(f.checkpoint().await, cp, "checkpoint untouched");
}

/// A login role (the URL's password) with `grants`, and the route reading as it.
async fn reader_route(f: &Fixture, tag: &str, grants: &str) -> (Route, String) {
    let password = f
        .src
        .password()
        .expect("password-authenticated test server");
    let role = format!("{}_{tag}", f.src.name);
    let pw = password.replace('\'', "''");
    f.src_sql(&format!(
        "CREATE ROLE \"{role}\" LOGIN PASSWORD '{pw}' NOSUPERUSER NOINHERIT NOBYPASSRLS; \
         GRANT CONNECT ON DATABASE \"{db}\" TO \"{role}\"; \
         GRANT USAGE ON SCHEMA public TO \"{role}\"; {grants}",
        db = f.src.name,
        grants = grants.replace("{role}", &format!("\"{role}\"")),
    ))
    .await;
    let oid: u32 =
        f.sc.query_one("SELECT oid FROM pg_roles WHERE rolname = $1", &[&role])
            .await
            .expect("oid")
            .get(0);
    let admin = f.src.endpoint_spec().user;
    let admin_oid: u32 =
        f.sc.query_one("SELECT oid FROM pg_roles WHERE rolname = $1", &[&admin])
            .await
            .expect("oid")
            .get(0);
    let reg = f
        .registry_yaml
        .replacen(&format!("user: '{admin}',"), &format!("user: '{role}',"), 1)
        .replace(
            &format!("principal: {{name: '{admin}', oid: {admin_oid}}}"),
            &format!("principal: {{name: '{role}', oid: {oid}}}"),
        );
    (
        prepare(&f.manifest_yaml, &reg, &f.env).expect("route"),
        role,
    )
}

async fn drop_role(f: &Fixture, role: &str) {
    f.src_sql(&format!("DROP OWNED BY \"{role}\"")).await;
    let _ = f.sc.batch_execute(&format!("DROP ROLE \"{role}\"")).await;
}

/// A row-level security policy hiding rows from the reader refuses the read; it never turns
/// the hidden rows into deletions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn row_level_security_refuses_instead_of_hiding_keys() {
    let f = Fixture::new("rls", guarded()).await.expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2), (3, 'c', 3, 3), (4, 'd', 4, 4)")
        .await;
    let (route, role) = reader_route(&f, "rls", "GRANT SELECT ON public.items TO {role};").await;
    let out = run_route(&f, &route, &mut PgSource::new())
        .await
        .expect("baseline as the reader");
    assert_eq!(out.receipt.metrics.inserted, 4);
    f.src_sql(&format!(
        "ALTER TABLE public.items ENABLE ROW LEVEL SECURITY; \
         CREATE POLICY hide_two ON public.items FOR SELECT TO \"{role}\" USING (id <> 2);"
    ))
    .await;
    f.src_sql("UPDATE public.items SET qty = 10 WHERE id = 1")
        .await;
    refused(&f, &route, ErrorCode::SourceRowSecurityActive).await;
    assert_eq!(f.active_keys().await, vec![1, 2, 3, 4], "no key deleted");
    // Without row-level security the same reader runs again.
    f.src_sql("DROP POLICY hide_two ON public.items").await;
    f.src_sql("ALTER TABLE public.items DISABLE ROW LEVEL SECURITY")
        .await;
    run_route(&f, &route, &mut PgSource::new())
        .await
        .expect("without the policy the reader runs");
    drop_role(&f, &role).await;
}

/// Rows of an inheritance child are not part of the pinned relation's snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn inheritance_children_are_never_read() {
    let f = Fixture::new("inh", guarded()).await.expect("fixture");
    f.src_sql(
        "INSERT INTO public.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2); \
         CREATE TABLE public.items_child () INHERITS (public.items); \
         INSERT INTO public.items_child VALUES (100, 'child', 1, 1);",
    )
    .await;
    let out = f.run().await.expect("baseline");
    assert_eq!(out.receipt.metrics.inserted, 2);
    assert_eq!(f.active_keys().await, vec![1, 2]);
    // Incremental: a child row changed in the window is neither a delta row nor a key.
    f.src_sql("INSERT INTO public.items_child VALUES (101, 'child', 1, 1); UPDATE public.items SET qty = 5 WHERE id = 1")
        .await;
    let out = f.run().await.expect("incremental");
    assert_eq!(out.receipt.metrics.updated, 1);
    assert_eq!(out.receipt.metrics.inserted, 0);
    assert_eq!(f.active_keys().await, vec![1, 2]);
}

/// A partitioned parent is refused with its own code (reading it with `ONLY` would be empty).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_partitioned_parent_is_refused() {
    let f = Fixture::new("part", guarded()).await.expect("fixture");
    let old_oid: u32 =
        f.sc.query_one("SELECT 'public.items'::regclass::oid", &[])
            .await
            .expect("oid")
            .get(0);
    f.src_sql(
        "ALTER TABLE public.items RENAME TO items_plain; \
         CREATE TABLE public.items (id bigint NOT NULL, name text NOT NULL, qty integer, \
           price numeric(10,2)) PARTITION BY RANGE (id); \
         CREATE TABLE public.items_p0 PARTITION OF public.items FOR VALUES FROM (0) TO (1000); \
         INSERT INTO public.items VALUES (1, 'a', 1, 1);",
    )
    .await;
    let new_oid: u32 =
        f.sc.query_one("SELECT 'public.items'::regclass::oid", &[])
            .await
            .expect("oid")
            .get(0);
    let reg = f.registry_yaml.replace(
        &format!("relation_oid: {old_oid}}}"),
        &format!("relation_oid: {new_oid}}}"),
    );
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(&f, &route, ErrorCode::SourceRelationPartitioned).await;
}

/// A missing table privilege has its own code, not RELATION_MISSING.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_missing_privilege_is_permission_denied() {
    let f = Fixture::new("perm", guarded()).await.expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    // Column-level SELECT is not enough for LOCK … IN ACCESS SHARE MODE.
    let (route, role) = reader_route(
        &f,
        "perm",
        "GRANT SELECT (id, name, qty, price) ON public.items TO {role};",
    )
    .await;
    refused(&f, &route, ErrorCode::SourcePermissionDenied).await;
    drop_role(&f, &role).await;
}

/// The hook renames the pinned schema away and a decoy schema into its name, once, while the
/// delta COPY completes and before the key COPY.
static RENAME: Mutex<Option<(tokio_postgres::Config, String)>> = Mutex::new(None);
static RENAMED: AtomicBool = AtomicBool::new(false);

fn rename_during_read(_bytes: u64) {
    if RENAMED.swap(true, Ordering::SeqCst) {
        return;
    }
    let Some((cfg, db)) = RENAME.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
        return;
    };
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let client = support::connect_to(&cfg, &db).await;
            client
                .batch_execute(
                    "ALTER SCHEMA public RENAME TO public_moved; ALTER SCHEMA decoy RENAME TO public;",
                )
                .await
                .expect("rename schemas");
        });
    })
    .join()
    .expect("rename thread");
}

/// A schema renamed between the pin check and COPY (another relation of the same name put in
/// its place) fails the read; the decoy's keys never become deletions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_schema_renamed_during_the_read_is_refused() {
    let f = Fixture::new("rename", guarded()).await.expect("fixture");
    f.src_sql(
        "INSERT INTO public.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2), (3, 'c', 3, 3), (4, 'd', 4, 4); \
         CREATE SCHEMA decoy; \
         CREATE TABLE decoy.items (id bigint PRIMARY KEY, name text NOT NULL, qty integer, price numeric(10,2)); \
         INSERT INTO decoy.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2), (3, 'c', 3, 3);",
    )
    .await;
    f.run().await.expect("baseline");
    f.src_sql("UPDATE public.items SET qty = 9 WHERE id = 1")
        .await;
    let before = f.target_fingerprint().await;
    let cp = f.checkpoint().await;
    *RENAME.lock().unwrap_or_else(|p| p.into_inner()) =
        Some((f.src.cfg.clone(), f.src.name.clone()));
    RENAMED.store(false, Ordering::SeqCst);
    let mut source = PgSource::new().with_progress(rename_during_read);
    let err = run_route(&f, &f.route, &mut source)
        .await
        .expect_err("a renamed schema must be refused");
    assert!(
        RENAMED.load(Ordering::SeqCst),
        "the rename ran during the read"
    );
    assert_eq!(err.code(), ErrorCode::SourceRelationPinMismatch, "{err}");
    assert_eq!(err.phase, Phase::Extraction, "{err}");
    assert_eq!(artifact_count(&f), 0, "the artifacts are removed");
    assert_eq!(f.target_fingerprint().await, before);
    assert_eq!(f.checkpoint().await, cp);
}

/// The pinned settings override database and role defaults that change text forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn session_settings_are_pinned_over_database_defaults() {
    let f = Fixture::new("settings", guarded()).await.expect("fixture");
    f.src_sql(&format!(
        "ALTER DATABASE \"{db}\" SET \"DateStyle\" = 'SQL, DMY'; \
         ALTER DATABASE \"{db}\" SET \"IntervalStyle\" = 'sql_standard'; \
         ALTER DATABASE \"{db}\" SET \"TimeZone\" = 'Pacific/Chatham'; \
         ALTER DATABASE \"{db}\" SET extra_float_digits = -15; \
         ALTER DATABASE \"{db}\" SET bytea_output = 'escape'; \
         ALTER DATABASE \"{db}\" SET search_path = 'decoy, pg_catalog'; \
         ALTER DATABASE \"{db}\" SET row_security = on;",
        db = f.src.name
    ))
    .await;
    let c = f.src.client().await;
    c.batch_execute(&format!(
        "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; {SESSION_SETTINGS}"
    ))
    .await
    .expect("settings apply");
    let row = c
        .query_one(
            "SELECT (timestamptz '2026-03-04 05:06:07+00')::text, (interval '1 day 2 hours')::text, \
                    (float8 '0.1')::text, ('\\x00ff'::bytea)::text, current_setting('search_path'), \
                    current_setting('row_security')",
            &[],
        )
        .await
        .expect("read settings");
    let got: (String, String, String, String, String, String) = (
        row.get(0),
        row.get(1),
        row.get(2),
        row.get(3),
        row.get(4),
        row.get(5),
    );
    assert_eq!(
        got,
        (
            "2026-03-04 05:06:07+00".to_owned(),
            "1 day 02:00:00".to_owned(),
            "0.1".to_owned(),
            "\\x00ff".to_owned(),
            "pg_catalog".to_owned(),
            "off".to_owned(),
        )
    );
    c.batch_execute("ROLLBACK").await.expect("rollback");
    drop(c);
    // And a run still succeeds under those defaults.
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("run under hostile database defaults");
}

/// Revokes from `PUBLIC`, in the source database only (its own `pg_catalog`), `EXECUTE` on every
/// control, WAL and statistics function and `SELECT` on every statistics view.
const REVOKE_CONTROL_WAL_STATISTICS: &str = r"DO $$
DECLARE o text;
BEGIN
  FOR o IN SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p
            WHERE p.pronamespace = 'pg_catalog'::regnamespace
              AND (p.proname LIKE 'pg\_control\_%' OR p.proname LIKE '%wal%'
                   OR p.proname LIKE 'pg\_stat\_%')
  LOOP
    EXECUTE format('REVOKE EXECUTE ON FUNCTION %s FROM PUBLIC', o);
  END LOOP;
  FOR o IN SELECT format('%I.%I', v.schemaname, v.viewname) FROM pg_catalog.pg_views v
            WHERE v.schemaname = 'pg_catalog'
              AND (v.viewname LIKE 'pg\_stat%' OR v.viewname LIKE 'pg\_statio%')
  LOOP
    EXECUTE format('REVOKE SELECT ON %s FROM PUBLIC', o);
  END LOOP;
END $$";

/// Spec 003: version 2 "never calls pg_control_system(), pg_control_checkpoint(), WAL-file
/// functions, or statistics views". A registry that gives version 2 a `timeline` pin is refused
/// (`DPONE_XMIN_REGISTRY_AUTHORITY_INVALID`), and so is such a selection reaching the source
/// boundary by any other way, before any I/O; a reader that can execute no control, WAL or
/// statistics function (nor read a statistics view) extracts under version 2.
///
/// Fails before the fix: the registry accepted the pin, and the source read the timeline with
/// `pg_walfile_name(pg_current_wal_lsn())` (here: permission denied for the reader).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn version_2_calls_no_control_wal_or_statistics_function() {
    let f = Fixture::new("v2nowal", guarded()).await.expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    let tli: i32 =
        f.sc.query_one("SELECT timeline_id FROM pg_control_checkpoint()", &[])
            .await
            .expect("timeline")
            .get(0);
    let tli = u32::try_from(tli).expect("timeline");

    // The registry refuses a version-2 timeline pin, even the current timeline of a primary.
    let reg = f.registry_yaml.replace(
        "      relations:\n",
        &format!("      timeline: {tli}\n      relations:\n"),
    );
    assert_ne!(reg, f.registry_yaml);
    let e = prepare(&f.manifest_yaml, &reg, &f.env).expect_err("version 2 with a timeline");
    assert_eq!(e.code(), ErrorCode::RegistryAuthorityInvalid, "{e}");

    // A reader in a source database where no control, WAL or statistics function is executable.
    f.src_sql(REVOKE_CONTROL_WAL_STATISTICS).await;
    let (route, role) = reader_route(&f, "nowal", "GRANT SELECT ON public.items TO {role};").await;
    let mut cfg = f.src.cfg.clone();
    cfg.user(&role);
    let reader = support::connect_to(&cfg, &f.src.name).await;
    for probe in [
        "SELECT pg_catalog.pg_current_wal_lsn()",
        "SELECT pg_catalog.pg_walfile_name('0/0'::pg_lsn)",
        "SELECT system_identifier FROM pg_catalog.pg_control_system()",
        "SELECT timeline_id FROM pg_catalog.pg_control_checkpoint()",
        "SELECT count(*) FROM pg_catalog.pg_stat_activity",
    ] {
        let e = reader
            .query_one(probe, &[])
            .await
            .expect_err("the reader may not call it");
        assert_eq!(e.code().map(|c| c.code()), Some("42501"), "{probe}: {e:?}");
    }
    drop(reader);

    // Version 2 extracts as that reader.
    let out = run_route(&f, &route, &mut PgSource::new())
        .await
        .expect("version 2 needs no control, WAL or statistics function");
    assert_eq!(out.receipt.metrics.inserted, 1);
    assert!(
        out.receipt.source_lineage.is_empty(),
        "version 2 reads no lineage"
    );

    // A version-2 selection carrying a timeline, which only a caller bypassing the registry can
    // build, is refused at the source boundary before any I/O, the current timeline included.
    let mut pinned = route.clone();
    pinned.resolved.source_authority.timeline = Some(tli);
    refused(&f, &pinned, ErrorCode::RegistryAuthorityInvalid).await;
    drop_role(&f, &role).await;
}

/// The fixture's manifest with a `column_values` scope on `column`.
fn scoped(f: &Fixture, column: &str, values: &str) -> Route {
    let manifest = f.manifest_yaml.replacen(
        "  unique_key: [id]\n",
        &format!("  unique_key: [id]\n  scope: {{type: column_values, column: {column}, values: {values}}}\n"),
        1,
    );
    assert_ne!(manifest, f.manifest_yaml);
    prepare(&manifest, &f.registry_yaml, &f.env).expect("scoped route")
}

/// A `column_values` scope compares values of the column's type, not text forms: `'1.0'`
/// selects the `numeric(10,2)` value `1.00` (whose text is `1.00`), and a row whose value
/// changes into the scope enters it on the next incremental run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_column_values_scope_compares_typed_values() {
    let f = Fixture::new("scopet", Options::default())
        .await
        .expect("fixture");
    f.src_sql(
        "INSERT INTO public.items VALUES (1, 'a', 1, 1.00), (2, 'b', 1, 2.50), \
         (3, 'c', 1, 3.00), (4, 'd', 1, NULL)",
    )
    .await;
    let route = scoped(&f, "price", "['1.0', '2.5']");
    let out = run_route(&f, &route, &mut PgSource::new())
        .await
        .expect("scoped baseline");
    assert_eq!(out.receipt.metrics.inserted, 2);
    assert_eq!(f.active_keys().await, vec![1, 2]);
    f.src_sql("UPDATE public.items SET price = 2.5 WHERE id = 3")
        .await;
    let out = run_route(&f, &route, &mut PgSource::new())
        .await
        .expect("scoped incremental");
    assert_eq!(out.receipt.metrics.inserted, 1);
    assert_eq!(f.active_keys().await, vec![1, 2, 3]);
}

/// A scope value that is not a value of the column's type, and a scope column whose type has
/// no equality operator, are refused under the snapshot before any row is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn scope_values_of_another_type_and_incomparable_scope_columns_are_refused() {
    let f = Fixture::new("scopebad", Options::default())
        .await
        .expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    refused(
        &f,
        &scoped(&f, "qty", "['1', 'one']"),
        ErrorCode::ScopeValueInvalid,
    )
    .await;
    // A value a typmod would silently truncate is not coerced: `varchar(1)` is cast as
    // `character varying`, so 'ab' matches nothing instead of matching 'a'.
    f.src_sql("ALTER TABLE public.items ALTER COLUMN name TYPE varchar(1)")
        .await;
    let narrowed = scoped(&f, "name", "['ab']");
    let err = run_route(&f, &narrowed, &mut PgSource::new())
        .await
        .expect_err("an empty key snapshot is refused by the guard");
    assert_eq!(err.code(), ErrorCode::GuardDenied, "{err}");
    assert!(
        err.to_string()
            .contains("DPONE_GUARD_EMPTY_SNAPSHOT_REFUSED"),
        "'ab' must select nothing, not the row 'a': {err}"
    );
    f.src_sql("ALTER TABLE public.items ALTER COLUMN name TYPE json USING to_json(name)")
        .await;
    refused(
        &f,
        &scoped(&f, "name", "['a']"),
        ErrorCode::ScopeColumnNotComparable,
    )
    .await;
}
