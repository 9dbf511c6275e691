//! Pins and source authority profiles on a real PostgreSQL server: wrong pins are refused with
//! their own codes before any row is read or any target mutation; version 1 verifies the
//! system identifier; version 2 runs with a least-privilege principal.
//!
//! Tier: real PostgreSQL integration.

mod support;

use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::engine::Phase;
use dpone_engine_xmin::registry::AuthorityProfile;
use support::{Fixture, Options, prepare};

fn artifact_count(f: &Fixture) -> usize {
    std::fs::read_dir(f.artifacts_dir.path())
        .map(|d| d.count())
        .unwrap_or(0)
}

async fn refused(f: &Fixture, route: &dpone_engine_xmin::Route, code: ErrorCode, phase: Phase) {
    let before = f.target_fingerprint().await;
    let cp = f.checkpoint().await;
    let req = dpone_engine_xmin::RunRequest {
        invocation_id: support::new_invocation(),
        repair_authority_ref: None,
    };
    let mut target = dpone_adapter_postgres::target::PgTarget::for_route(route).expect("target");
    let err = dpone_engine_xmin::run(
        route,
        &req,
        &mut dpone_adapter_postgres::source::PgSource::new(),
        &mut target,
        &f.store,
        &support::NativePolicies,
    )
    .await
    .expect_err("must be refused");
    assert_eq!(err.code(), code, "{err}");
    assert_eq!(err.phase, phase, "{err}");
    assert_eq!(artifact_count(f), 0, "no payload may be extracted");
    assert_eq!(f.target_fingerprint().await, before);
    assert_eq!(f.checkpoint().await, cp);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn wrong_pins_are_refused_with_distinct_codes() {
    let Some(f) = Fixture::new("pins", Options::default()).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("baseline");

    // Relation recreated under the same name: new OID.
    f.src_sql(&format!("DROP TABLE public.items; {}", support::SOURCE_DDL))
        .await;
    refused(
        &f,
        &f.route,
        ErrorCode::SourceRelationPinMismatch,
        Phase::Extraction,
    )
    .await;

    // Wrong database OID in the source pin (database recreated).
    let reg = f.registry_yaml.replacen(
        &format!("oid: {}}}", source_db_oid(&f).await),
        "oid: 4242}",
        1,
    );
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(
        &f,
        &route,
        ErrorCode::SourceDatabasePinMismatch,
        Phase::Extraction,
    )
    .await;

    // Principal changed (pinned OID differs).
    let user = f.src.endpoint_spec().user;
    let user_oid: u32 =
        f.sc.query_one("SELECT oid FROM pg_roles WHERE rolname = $1", &[&user])
            .await
            .expect("role")
            .get(0);
    let reg = f.registry_yaml.replace(
        &format!("effective_principal: {{name: '{user}', oid: {user_oid}}}"),
        &format!("effective_principal: {{name: '{user}', oid: 4243}}"),
    );
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(
        &f,
        &route,
        ErrorCode::SourcePrincipalPinMismatch,
        Phase::Extraction,
    )
    .await;

    // Target database recreated: its pinned OID no longer matches (refused before source I/O).
    let tgt_oid: u32 = f
        .pg_target()
        .query_one(
            "SELECT oid FROM pg_database WHERE datname = current_database()",
            &[],
        )
        .await
        .expect("oid")
        .get(0);
    let reg = f
        .registry_yaml
        .replace(&format!("oid: {tgt_oid},"), "oid: 4244,");
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(
        &f,
        &route,
        ErrorCode::TargetDatabasePinMismatch,
        Phase::Preflight,
    )
    .await;

    // Wrong target system identifier.
    let sys: String = f
        .pg_target()
        .query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
        .expect("sysid")
        .get(0);
    let reg = f.registry_yaml.replace(
        &format!("system_identifier: '{sys}'}}"),
        "system_identifier: '1'}",
    );
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(
        &f,
        &route,
        ErrorCode::TargetSystemIdentifierMismatch,
        Phase::Preflight,
    )
    .await;

    // Missing state table.
    f.pg_target()
        .batch_execute("ALTER TABLE dpone_state.dpone_run_state RENAME TO other_run_state")
        .await
        .expect("rename");
    refused(
        &f,
        &f.route,
        ErrorCode::StateCatalogInvalid,
        Phase::Preflight,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_state_catalog_that_differs_from_the_reviewed_ddl_is_refused_before_extraction() {
    // Each change is made, refused at preflight with nothing extracted or written, and undone.
    let changes: &[(&str, &str)] = &[
        (
            "DROP INDEX dpone_state.dpone_source_state_one_active_owner",
            "CREATE UNIQUE INDEX dpone_source_state_one_active_owner ON dpone_state.dpone_source_state (target_identity) WHERE superseded_at_utc IS NULL",
        ),
        (
            "DROP TRIGGER dpone_immutable ON dpone_state.dpone_commit_receipt",
            "CREATE TRIGGER dpone_immutable BEFORE UPDATE OR DELETE ON dpone_state.dpone_commit_receipt FOR EACH ROW EXECUTE FUNCTION dpone_state.dpone_forbid_mutation()",
        ),
        (
            "ALTER TABLE dpone_state.dpone_repair_authority DISABLE TRIGGER dpone_immutable",
            "ALTER TABLE dpone_state.dpone_repair_authority ENABLE TRIGGER dpone_immutable",
        ),
        (
            "CREATE FUNCTION dpone_state.noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$; \
             CREATE TRIGGER sneaky BEFORE INSERT ON dpone_state.dpone_source_state FOR EACH ROW EXECUTE FUNCTION dpone_state.noop()",
            "DROP TRIGGER sneaky ON dpone_state.dpone_source_state; DROP FUNCTION dpone_state.noop()",
        ),
        (
            "ALTER TABLE dpone_state.dpone_run_state ALTER COLUMN evidence TYPE text",
            "ALTER TABLE dpone_state.dpone_run_state ALTER COLUMN evidence TYPE jsonb USING evidence::jsonb",
        ),
        (
            "ALTER TABLE dpone_state.dpone_source_state ALTER COLUMN superseded_by SET NOT NULL",
            "ALTER TABLE dpone_state.dpone_source_state ALTER COLUMN superseded_by DROP NOT NULL",
        ),
    ];
    let Some(f) = Fixture::new("catalog", Options::default()).await else {
        return;
    };
    for (change, undo) in changes {
        f.pg_target().batch_execute(change).await.expect("change");
        refused(
            &f,
            &f.route,
            ErrorCode::StateCatalogInvalid,
            Phase::Preflight,
        )
        .await;
        f.pg_target().batch_execute(undo).await.expect("undo");
    }
    // Undone, the catalog is the reviewed one again and a run commits.
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("the reviewed catalog passes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn an_added_or_dropped_check_constraint_or_foreign_key_on_the_state_is_refused() {
    // Each change is made, refused at preflight with the catalog code, and undone.
    let changes: &[(&str, &str)] = &[
        // An added CHECK constraint (it could refuse the run's own receipt).
        (
            "ALTER TABLE dpone_state.dpone_commit_receipt ADD CONSTRAINT sneaky CHECK (new_revision < 1000)",
            "ALTER TABLE dpone_state.dpone_commit_receipt DROP CONSTRAINT sneaky",
        ),
        // An added CHECK constraint, NOT VALID.
        (
            "ALTER TABLE dpone_state.dpone_source_state ADD CONSTRAINT sneaky CHECK (safe_xmin < 10) NOT VALID",
            "ALTER TABLE dpone_state.dpone_source_state DROP CONSTRAINT sneaky",
        ),
        // A dropped reviewed CHECK constraint.
        (
            "ALTER TABLE dpone_state.dpone_run_state DROP CONSTRAINT dpone_run_state_status_check",
            "ALTER TABLE dpone_state.dpone_run_state ADD CONSTRAINT dpone_run_state_status_check CHECK (status IN ('committed', 'rolled_back'))",
        ),
        // An added foreign key from a state table to a table outside the state.
        (
            "CREATE TABLE dpone_state.outside (run_id text PRIMARY KEY); \
             ALTER TABLE dpone_state.dpone_run_state ADD CONSTRAINT sneaky FOREIGN KEY (run_id) REFERENCES dpone_state.outside (run_id) ON DELETE CASCADE NOT VALID",
            "ALTER TABLE dpone_state.dpone_run_state DROP CONSTRAINT sneaky; DROP TABLE dpone_state.outside",
        ),
        // A table outside the state referencing a state table.
        (
            "CREATE TABLE public.outside (receipt_id text REFERENCES dpone_state.dpone_commit_receipt (receipt_id))",
            "DROP TABLE public.outside",
        ),
        // The reviewed foreign key replaced by a cascading one.
        (
            "ALTER TABLE dpone_state.dpone_repair_authority_consumption DROP CONSTRAINT dpone_repair_authority_consumption_receipt_id_fkey; \
             ALTER TABLE dpone_state.dpone_repair_authority_consumption ADD CONSTRAINT dpone_repair_authority_consumption_receipt_id_fkey FOREIGN KEY (receipt_id) REFERENCES dpone_state.dpone_commit_receipt (receipt_id) ON DELETE CASCADE",
            "ALTER TABLE dpone_state.dpone_repair_authority_consumption DROP CONSTRAINT dpone_repair_authority_consumption_receipt_id_fkey; \
             ALTER TABLE dpone_state.dpone_repair_authority_consumption ADD CONSTRAINT dpone_repair_authority_consumption_receipt_id_fkey FOREIGN KEY (receipt_id) REFERENCES dpone_state.dpone_commit_receipt (receipt_id)",
        ),
        // A dropped reviewed foreign key.
        (
            "ALTER TABLE dpone_state.dpone_repair_authority_consumption DROP CONSTRAINT dpone_repair_authority_consumption_authority_id_fkey",
            "ALTER TABLE dpone_state.dpone_repair_authority_consumption ADD CONSTRAINT dpone_repair_authority_consumption_authority_id_fkey FOREIGN KEY (authority_id) REFERENCES dpone_state.dpone_repair_authority (authority_id)",
        ),
    ];
    let Some(f) = Fixture::new("constraints", Options::default()).await else {
        return;
    };
    for (change, undo) in changes {
        f.pg_target().batch_execute(change).await.expect("change");
        refused(
            &f,
            &f.route,
            ErrorCode::StateCatalogInvalid,
            Phase::Preflight,
        )
        .await;
        f.pg_target().batch_execute(undo).await.expect("undo");
    }
    // Undone, the catalog is the reviewed one again and a run commits.
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("the reviewed catalog passes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_cascading_foreign_key_onto_the_target_is_refused_a_restricting_one_is_not() {
    let Some(f) = Fixture::new("target_fk", Options::default()).await else {
        return;
    };
    for action in [
        "ON DELETE CASCADE",
        "ON DELETE SET NULL",
        "ON UPDATE CASCADE",
    ] {
        f.pg_target()
            .batch_execute(&format!(
                "CREATE TABLE public.child (id bigint REFERENCES dwh.items (id) {action})"
            ))
            .await
            .expect("child");
        refused(
            &f,
            &f.route,
            ErrorCode::TargetTableInvalid,
            Phase::Preflight,
        )
        .await;
        f.pg_target()
            .batch_execute("DROP TABLE public.child")
            .await
            .expect("drop");
    }
    // NO ACTION only refuses a delete of a referenced row; CHECK constraints only refuse rows.
    f.pg_target()
        .batch_execute(
            "CREATE TABLE public.child (id bigint REFERENCES dwh.items (id)); \
             ALTER TABLE dwh.items ADD CONSTRAINT qty_nonnegative CHECK (qty >= 0)",
        )
        .await
        .expect("restricting");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("restricting constraints pass");
}

async fn source_db_oid(f: &Fixture) -> u32 {
    f.sc.query_one(
        "SELECT oid FROM pg_database WHERE datname = current_database()",
        &[],
    )
    .await
    .expect("oid")
    .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn version_1_physical_cluster_verifies_system_identifier() {
    let options = Options {
        profile: AuthorityProfile::PhysicalCluster,
        ..Options::default()
    };
    let Some(f) = Fixture::new("v1", options).await else {
        return;
    };
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("v1 baseline");
    let sys: String =
        f.sc.query_one(
            "SELECT system_identifier::text FROM pg_control_system()",
            &[],
        )
        .await
        .expect("sysid")
        .get(0);
    let reg = f.registry_yaml.replacen(
        &format!("system_identifier: '{sys}'\n"),
        "system_identifier: '12345'\n",
        1,
    );
    assert_ne!(reg, f.registry_yaml);
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(
        &f,
        &route,
        ErrorCode::SourceSystemIdentifierMismatch,
        Phase::Extraction,
    )
    .await;
    let reg = f
        .registry_yaml
        .replacen("      timeline: 1\n", "      timeline: 7\n", 1);
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    refused(
        &f,
        &route,
        ErrorCode::SourceTimelineMismatch,
        Phase::Extraction,
    )
    .await;
}

/// Version 2 needs only CONNECT, USAGE and SELECT: a least-privilege principal extracts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn version_2_runs_with_least_privilege_principal() {
    let Some(f) = Fixture::new("v2lp", Options::default()).await else {
        return;
    };
    let Some(password) = f.src.password() else {
        support::skip("least-privilege test needs a password-authenticated server URL");
    };
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2)")
        .await;
    let role = format!("{}_reader", f.src.name);
    let pw = password.replace('\'', "''");
    f.src_sql(&format!(
        "CREATE ROLE \"{role}\" LOGIN PASSWORD '{pw}' NOSUPERUSER NOINHERIT; \
         REVOKE ALL ON DATABASE \"{db}\" FROM PUBLIC; \
         GRANT CONNECT ON DATABASE \"{db}\" TO \"{role}\"; \
         GRANT USAGE ON SCHEMA public TO \"{role}\"; \
         GRANT SELECT ON public.items TO \"{role}\";",
        db = f.src.name
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
    // The source connection logs in as the reader; its principals are pinned to the reader.
    let reg = f
        .registry_yaml
        .replacen(&format!("user: '{admin}',"), &format!("user: '{role}',"), 1)
        .replace(
            &format!("principal: {{name: '{admin}', oid: {admin_oid}}}"),
            &format!("principal: {{name: '{role}', oid: {oid}}}"),
        );
    let route = prepare(&f.manifest_yaml, &reg, &f.env).expect("route");
    let req = dpone_engine_xmin::RunRequest {
        invocation_id: support::new_invocation(),
        repair_authority_ref: None,
    };
    let mut target = dpone_adapter_postgres::target::PgTarget::for_route(&route).expect("target");
    let out = dpone_engine_xmin::run(
        &route,
        &req,
        &mut dpone_adapter_postgres::source::PgSource::new(),
        &mut target,
        &f.store,
        &support::NativePolicies,
    )
    .await
    .expect("least-privilege extraction");
    assert_eq!(out.receipt.metrics.inserted, 2);
    // The same principal cannot read control data: version 1 would fail, version 2 never asks.
    drop(target);
    f.src_sql(&format!("DROP OWNED BY \"{role}\"")).await;
    let _ = f.sc.batch_execute(&format!("DROP ROLE \"{role}\"")).await;
}

/// The newest receipt's recorded source lineage (`null` when none was recorded).
async fn recorded_lineage(f: &Fixture) -> serde_json::Value {
    let text: Option<String> = f
        .pg_target()
        .query_one(
            "SELECT (body -> 'source_lineage')::text FROM dpone_state.dpone_commit_receipt \
             WHERE state_key = $1 ORDER BY new_revision DESC LIMIT 1",
            &[&f.route.identity.state_key],
        )
        .await
        .expect("receipt")
        .get(0);
    text.map_or(serde_json::Value::Null, |t| {
        serde_json::from_str(&t).expect("json")
    })
}

/// Every receipt records the source lineage its snapshot observed, and an incremental run
/// continues a checkpoint only under that lineage: a checkpoint taken on another timeline (as
/// the old primary's is after a promotion), or one whose lineage the current profile no longer
/// reads, is refused with `DPONE_XMIN_SOURCE_LINEAGE_CHANGED` (full repair) before any target
/// mutation; a repair baseline records the new lineage and incremental runs continue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_checkpoint_continues_only_under_the_source_lineage_it_was_taken_under() {
    let options = Options {
        profile: AuthorityProfile::PhysicalCluster,
        ..Options::default()
    };
    let f = Fixture::new("lineage", options).await.expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1)")
        .await;
    f.run().await.expect("v1 baseline");
    let row =
        f.sc.query_one(
            "SELECT system_identifier::text, \
                    (SELECT timeline_id FROM pg_control_checkpoint())::bigint \
             FROM pg_control_system()",
            &[],
        )
        .await
        .expect("control data");
    let (sys, tli): (String, i64) = (row.get(0), row.get(1));
    let observed = serde_json::json!({"system_identifier": sys, "timeline": tli});
    assert_eq!(recorded_lineage(&f).await, observed);
    f.src_sql("INSERT INTO public.items VALUES (2, 'b', 1, 1)")
        .await;
    let out = f.run().await.expect("same lineage continues");
    assert_eq!(out.receipt.metrics.inserted, 1);
    assert_eq!(recorded_lineage(&f).await, observed);

    // The same source read under version 2 (no control function, no timeline pin) cannot show
    // the recorded lineage: the checkpoint is not continued.
    let v2 = prepare(
        &f.manifest_yaml,
        &support::registry_yaml(&f.src, f.pg_target_db(), AuthorityProfile::CatalogIdentity).await,
        &f.env,
    )
    .expect("v2 route");
    assert_eq!(v2.identity.state_key, f.route.identity.state_key);
    refused(&f, &v2, ErrorCode::SourceLineageChanged, Phase::Validation).await;

    // The newest receipt as a promotion leaves it: written on the timeline before. (The
    // receipt table is immutable; its owner lifts the trigger for this one edit.)
    f.pg_target()
        .batch_execute(&format!(
            "ALTER TABLE dpone_state.dpone_commit_receipt DISABLE TRIGGER dpone_immutable; \
             UPDATE dpone_state.dpone_commit_receipt \
                SET body = jsonb_set(body, '{{source_lineage,timeline}}', '{}') \
              WHERE state_key = '{}' AND new_revision = 2; \
             ALTER TABLE dpone_state.dpone_commit_receipt ENABLE TRIGGER dpone_immutable;",
            tli - 1,
            f.route.identity.state_key
        ))
        .await
        .expect("receipt as a promotion leaves it");
    f.src_sql("INSERT INTO public.items VALUES (3, 'c', 1, 1)")
        .await;
    let err = f
        .run()
        .await
        .expect_err("another timeline is not continued");
    assert_eq!(err.code(), ErrorCode::SourceLineageChanged, "{err}");
    assert!(err.full_repair_required);
    assert_eq!(f.active_keys().await, vec![1, 2]);

    // The repair baseline: an authority allowing a full baseline from this checkpoint.
    let cp = f.checkpoint().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let allow = dpone_policy_model::guard::AuthorityAllow {
        full_baseline: true,
        max_delete_rows: None,
        max_delete_ratio: None,
    };
    f.create_authority("lineage-repair", cp, allow, (now - 60, now + 3600), None)
        .await;
    let out = f
        .run_with(Some("lineage-repair"))
        .await
        .expect("repair baseline");
    assert_eq!(
        out.load,
        Some(dpone_policy_model::guard::LoadKind::FullBaseline)
    );
    assert_eq!(f.active_keys().await, vec![1, 2, 3]);
    assert_eq!(recorded_lineage(&f).await, observed);
    f.src_sql("INSERT INTO public.items VALUES (4, 'd', 1, 1)")
        .await;
    f.run()
        .await
        .expect("incremental after the repair baseline");
    assert_eq!(f.active_keys().await, vec![1, 2, 3, 4]);
}
