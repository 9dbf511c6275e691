//! The control store's protocol on a real PostgreSQL server: the reviewed DDL verified (never
//! created), monotonic trust revisions, immutable registrations, one-time qualification,
//! the activation coordinator, admission re-checks (revision bracket, expiry and revocation
//! mid-flight, duplicate and running attempts), reservations vs measured usage, replacement
//! ceilings, and lost commit acknowledgements probed by the deterministic reservation id.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`).

mod support;

use dpone_adapter_np_control_store::*;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use support::*;
use tokio_postgres::Client;

struct Campaign {
    env: Uuid,
    campaign: Uuid,
    store: PgControlStore,
    auth: Authenticated,
}

async fn campaign(e: &Env, policy_limits: Limits) -> Campaign {
    let env = uuid(1, 1);
    let store = e.store();
    store.verify_catalog().await.expect("reviewed catalog");
    store
        .record_trust(&policy(&env, b"policy-A", 1, policy_limits))
        .await
        .expect("trust");
    let auth = auth(&store, &env).await;
    Campaign {
        env,
        campaign: uuid(2, 1),
        store,
        auth,
    }
}

/// A store provisioned before the run-claim table existed is refused by the catalog check, and
/// the reviewed migration (the same statements as in the DDL) makes it verify; a reservation
/// is then claimed once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn the_run_claim_migration_brings_an_older_store_to_the_contract() {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/nonproduction");
    let migration =
        std::fs::read_to_string(root.join("migrate-add-run-claim.sql")).expect("migration");
    let ddl = std::fs::read_to_string(root.join("control-store.sql")).expect("ddl");
    let first = statements(&migration);
    assert_eq!(first.len(), 2);
    for statement in &first {
        assert!(
            ddl.contains(statement.as_str()),
            "the DDL holds {statement}"
        );
    }
    // The enrollment migration's statements are the DDL's too; it follows this one.
    let enrollment =
        std::fs::read_to_string(root.join("migrate-add-enrollment.sql")).expect("migration");
    let later = statements(&enrollment);
    assert_eq!(later.len(), 4);
    for statement in &later {
        assert!(
            ddl.contains(statement.as_str()),
            "the DDL holds {statement}"
        );
    }
    // So are the identity records' (ClickHouse participants); that migration comes last.
    let identities =
        std::fs::read_to_string(root.join("migrate-add-identity-record.sql")).expect("migration");
    let last = statements(&identities);
    assert_eq!(last.len(), 3);
    for statement in &last {
        assert!(
            ddl.contains(statement.as_str()),
            "the DDL holds {statement}"
        );
    }
    // And the admission queue's (group admission), which comes after them.
    let queue =
        std::fs::read_to_string(root.join("migrate-add-admission-queue.sql")).expect("migration");
    let newest = statements(&queue);
    assert_eq!(newest.len(), 12);
    for statement in &newest {
        assert!(
            ddl.contains(statement.as_str()),
            "the DDL holds {statement}"
        );
    }
    let e = Env::new().await;
    e.admin
        .batch_execute(&format!(
            "DROP TABLE \"{s}\".np_admission_outcome, \"{s}\".np_admission_request; \
             DROP FUNCTION \"{s}\".np_stamp_request(); \
             DROP TABLE \"{s}\".np_participant_identity, \"{s}\".np_run_participant, \
             \"{s}\".np_participant_enrollment, \"{s}\".np_run_claim",
            s = e.schema
        ))
        .await
        .expect("an older store");
    let store = e.store();
    assert_eq!(
        code(store.verify_catalog().await),
        StoreCode::CatalogInvalid
    );
    e.admin
        .batch_execute(&migration.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema)))
        .await
        .expect("the migration applies");
    assert_eq!(
        code(e.store().verify_catalog().await),
        StoreCode::CatalogInvalid,
        "without the enrollment tables"
    );
    e.admin
        .batch_execute(&enrollment.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema)))
        .await
        .expect("the enrollment migration applies");
    // The re-created tables lack the TRUNCATE guards; the truncate-guard migration follows.
    let err = e.store().verify_catalog().await.unwrap_err();
    assert!(
        err.message
            .starts_with("DPONE_NP_STORE_TRUNCATE_UNGUARDED: "),
        "without the truncate guards: {err}"
    );
    let guards =
        std::fs::read_to_string(root.join("migrate-add-truncate-guard.sql")).expect("migration");
    e.admin
        .batch_execute(&guards.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema)))
        .await
        .expect("the truncate-guard migration applies");
    let err = e.store().verify_catalog().await.unwrap_err();
    assert_eq!(
        err.code,
        StoreCode::CatalogInvalid,
        "without the identity records"
    );
    e.admin
        .batch_execute(&identities.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema)))
        .await
        .expect("the identity-record migration applies");
    let err = e.store().verify_catalog().await.unwrap_err();
    assert_eq!(
        err.code,
        StoreCode::CatalogInvalid,
        "without the admission queue"
    );
    e.admin
        .batch_execute(&queue.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema)))
        .await
        .expect("the admission-queue migration applies");
    let store = e.store();
    store
        .verify_catalog()
        .await
        .expect("migrated store verifies");
    let id = Sha256Digest::of(b"not a reservation");
    assert!(
        store.claim_run(&id, &[]).await.is_err(),
        "a claim names an existing reservation (foreign key)"
    );
    drop(store);
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn the_reviewed_ddl_is_verified_never_created_and_deviations_refuse() {
    let e = Env::new().await;
    let store = e.store();
    store
        .verify_catalog()
        .await
        .expect("the fixture is the contract");
    // A schema without the DDL: refused, and nothing is created.
    let mut missing = e.endpoint();
    missing.schema = format!("{}_absent", e.schema);
    let absent = PgControlStore::new(missing).expect("store");
    assert_eq!(
        code(absent.verify_catalog().await),
        StoreCode::CatalogInvalid
    );
    assert_eq!(
        code(
            absent
                .record_trust(&policy(&uuid(1, 1), b"p", 0, CEILINGS))
                .await
        ),
        StoreCode::CatalogInvalid,
        "every operation verifies the catalog first"
    );
    let created: i64 = e
        .admin
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
            &[&format!("{}_absent", e.schema)],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(created, 0, "the store never creates its schema");
    // Rows are immutable.
    let env = uuid(1, 1);
    store
        .record_trust(&policy(&env, b"p", 0, CEILINGS))
        .await
        .unwrap();
    let upd = e
        .admin
        .execute(
            &format!(
                "UPDATE \"{}\".np_trust_revision SET revocation_epoch = 0",
                e.schema
            ),
            &[],
        )
        .await
        .unwrap_err();
    assert_eq!(upd.code().map(|c| c.code()), Some("P0001"));
    // A dropped immutability trigger, an extra column, a dropped unique index: each refused.
    let unique: String = e
        .admin
        .query_one(
            &format!(
                "SELECT conname::text FROM pg_constraint WHERE contype = 'u' \
                 AND conrelid = '\"{}\".np_reservation'::regclass",
                e.schema
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let drop_unique = format!("ALTER TABLE \"S\".np_reservation DROP CONSTRAINT \"{unique}\"");
    for (ddl, undo) in [
        (
            "DROP TRIGGER np_immutable ON \"S\".np_settlement",
            "CREATE TRIGGER np_immutable BEFORE UPDATE OR DELETE ON \"S\".np_settlement \
             FOR EACH ROW EXECUTE FUNCTION \"S\".np_forbid_mutation()",
        ),
        (
            "ALTER TABLE \"S\".np_reservation ADD COLUMN refunded bigint",
            "ALTER TABLE \"S\".np_reservation DROP COLUMN refunded",
        ),
        (
            drop_unique.as_str(),
            "ALTER TABLE \"S\".np_reservation ADD UNIQUE \
             (environment_id, campaign_id, phase, workload_id, attempt_id)",
        ),
    ] {
        e.admin
            .batch_execute(&ddl.replace("\"S\"", &format!("\"{}\"", e.schema)))
            .await
            .expect("deviate");
        let err = store.verify_catalog().await.unwrap_err();
        assert_eq!(err.code, StoreCode::CatalogInvalid, "{ddl}");
        e.admin
            .batch_execute(&undo.replace("\"S\"", &format!("\"{}\"", e.schema)))
            .await
            .expect("undo");
        store.verify_catalog().await.expect("restored");
    }
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn an_added_or_dropped_check_constraint_or_foreign_key_refuses_with_the_catalog_code() {
    let e = Env::new().await;
    let store = e.store();
    store
        .verify_catalog()
        .await
        .expect("the fixture is the contract");
    for (ddl, undo) in [
        // An added CHECK constraint (it could refuse a settlement the protocol must record).
        (
            "ALTER TABLE \"S\".np_settlement ADD CONSTRAINT sneaky CHECK (measured_source_rows < 10)",
            "ALTER TABLE \"S\".np_settlement DROP CONSTRAINT sneaky",
        ),
        // A dropped reviewed CHECK (a limit the store relies on).
        (
            "ALTER TABLE \"S\".np_settlement DROP CONSTRAINT np_settlement_measured_source_rows_check",
            "ALTER TABLE \"S\".np_settlement ADD CONSTRAINT np_settlement_measured_source_rows_check \
             CHECK (measured_source_rows >= 0)",
        ),
        // An added foreign key to a table outside the store.
        (
            "CREATE TABLE \"S\".outside (reservation_id text PRIMARY KEY); \
             ALTER TABLE \"S\".np_settlement ADD CONSTRAINT sneaky FOREIGN KEY (reservation_id) \
             REFERENCES \"S\".outside (reservation_id) NOT VALID",
            "ALTER TABLE \"S\".np_settlement DROP CONSTRAINT sneaky; DROP TABLE \"S\".outside",
        ),
        // A table outside the store referencing one of it.
        (
            "CREATE TABLE public.np_outside (reservation_id text \
             REFERENCES \"S\".np_reservation (reservation_id) ON DELETE CASCADE)",
            "DROP TABLE public.np_outside",
        ),
        // The reviewed foreign key replaced by a cascading one.
        (
            "ALTER TABLE \"S\".np_settlement DROP CONSTRAINT np_settlement_reservation_id_fkey; \
             ALTER TABLE \"S\".np_settlement ADD CONSTRAINT np_settlement_reservation_id_fkey \
             FOREIGN KEY (reservation_id) REFERENCES \"S\".np_reservation (reservation_id) ON DELETE CASCADE",
            "ALTER TABLE \"S\".np_settlement DROP CONSTRAINT np_settlement_reservation_id_fkey; \
             ALTER TABLE \"S\".np_settlement ADD CONSTRAINT np_settlement_reservation_id_fkey \
             FOREIGN KEY (reservation_id) REFERENCES \"S\".np_reservation (reservation_id)",
        ),
        // A dropped reviewed foreign key.
        (
            "ALTER TABLE \"S\".np_settlement DROP CONSTRAINT np_settlement_reservation_id_fkey",
            "ALTER TABLE \"S\".np_settlement ADD CONSTRAINT np_settlement_reservation_id_fkey \
             FOREIGN KEY (reservation_id) REFERENCES \"S\".np_reservation (reservation_id)",
        ),
    ] {
        e.admin
            .batch_execute(&ddl.replace("\"S\"", &format!("\"{}\"", e.schema)))
            .await
            .expect("deviate");
        let err = store.verify_catalog().await.unwrap_err();
        assert_eq!(err.code, StoreCode::CatalogInvalid, "{ddl}");
        e.admin
            .batch_execute(&undo.replace("\"S\"", &format!("\"{}\"", e.schema)))
            .await
            .expect("undo");
        store.verify_catalog().await.expect("restored");
    }
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn trust_revisions_are_monotonic_and_restored_policy_bytes_are_a_new_revision() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..2, CEILINGS),
    );
    register_and_select(s, &c.auth, &g).await;
    let at_a = c.auth.clone();
    assert_eq!(at_a.revision(), 1);
    // The same record again is the current revision, not a new one.
    let same = s
        .record_trust(&policy(&c.env, b"policy-A", 1, CEILINGS))
        .await
        .unwrap();
    assert_eq!(same.revision, 1);
    let b = s
        .record_trust(&policy(&c.env, b"policy-B", 1, CEILINGS))
        .await
        .unwrap();
    assert_eq!(b.revision, 2);
    let restored = s
        .record_trust(&policy(&c.env, b"policy-A", 1, CEILINGS))
        .await
        .unwrap();
    assert_eq!(
        restored.revision, 3,
        "restoring old bytes appends a revision"
    );
    assert_eq!(restored.policy_digest, Sha256Digest::of(b"policy-A"));
    // An authentication under revision 1 does not survive the restore.
    assert_eq!(
        code(s.admit(&at_a, &admission(&g, "w0", "a1", 1, 1)).await),
        StoreCode::TrustRevisionChanged
    );
    let fresh = auth(s, &c.env).await;
    assert_eq!(fresh.revision(), 3);
    s.admit(&fresh, &admission(&g, "w0", "a1", 1, 1))
        .await
        .expect("admitted at revision 3");
    // The revocation epoch never decreases.
    assert_eq!(
        code(
            s.record_trust(&policy(&c.env, b"policy-C", 0, CEILINGS))
                .await
        ),
        StoreCode::RevocationEpochBackwards
    );
    // Limits above the spec's ceilings refuse before anything is stored.
    let mut too_high = policy(&c.env, b"policy-D", 1, CEILINGS);
    too_high.limits.source_rows = CEILINGS.source_rows + 1;
    assert_eq!(
        code(s.record_trust(&too_high).await),
        StoreCode::LimitAboveCeiling
    );
    assert_eq!(s.current_trust(&c.env).await.unwrap().unwrap().revision, 3);
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_revision_change_inside_or_after_the_bracket_refuses() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    // Inside the bracket: the policy changes while the caller verifies.
    let endpoint = e.endpoint();
    let env = c.env.clone();
    let inside = c
        .store
        .authenticate(&c.env, move |rev| {
            assert_eq!(rev.revision, 1);
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(async {
                    let other = PgControlStore::new(endpoint).unwrap();
                    other
                        .record_trust(&policy(&env, b"policy-B", 1, CEILINGS))
                        .await
                        .unwrap();
                });
            })
            .join()
            .unwrap();
            Ok(())
        })
        .await;
    assert_eq!(code(inside), StoreCode::TrustRevisionChanged);
    // After the bracket, before the transaction.
    let a = auth(&c.store, &c.env).await;
    c.store
        .record_trust(&policy(&c.env, b"policy-C", 1, CEILINGS))
        .await
        .unwrap();
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    assert_eq!(
        code(c.store.register(&a, &g).await),
        StoreCode::TrustRevisionChanged
    );
    // A refusing verification is not an authentication.
    assert_eq!(
        code(
            c.store
                .authenticate(&c.env, |_| Err("bad signature".into()))
                .await
        ),
        StoreCode::AuthenticationFailed
    );
    assert_eq!(
        code(c.store.authenticate(&uuid(9, 9), |_| Ok(())).await),
        StoreCode::TrustMissing
    );
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn registrations_are_immutable_and_identical_ones_reopen_without_a_charge() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..5, CEILINGS),
    );
    assert_eq!(
        s.register(&c.auth, &g).await.unwrap(),
        Registered::New {
            membership_charged: 5,
            executor_permit: true
        }
    );
    assert_eq!(s.register(&c.auth, &g).await.unwrap(), Registered::Reopened);
    assert_eq!(
        s.pool_status(&execution_pool(&c.env, &c.campaign))
            .await
            .unwrap()
            .members,
        5
    );
    let mut changed = g.clone();
    changed.original_bytes.push(b' ');
    assert_eq!(
        code(s.register(&c.auth, &changed).await),
        StoreCode::RegistrationBytesChanged
    );
    // Admission with bytes other than the registered original refuses.
    register_and_select(
        s,
        &c.auth,
        &execution_grant(
            &c.env,
            &c.campaign,
            &uuid(3, 2),
            &uuid(4, 2),
            CEILINGS,
            workloads(0..1, CEILINGS),
        ),
    )
    .await;
    s.select_activation_request(
        &c.auth,
        &g.key(),
        &g.original_bytes,
        &request(&g, "selected"),
    )
    .await
    .unwrap();
    let mut req = admission(&g, "w0", "a1", 1, 1);
    req.original_bytes = changed.original_bytes.clone();
    assert_eq!(
        code(s.admit(&c.auth, &req).await),
        StoreCode::GrantBytesMismatch
    );
    // A replacement grant over the same workloads charges nothing new; a grant UUID does not
    // make a fresh pool.
    let replacement = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 3),
        &uuid(4, 3),
        CEILINGS,
        workloads(3..7, CEILINGS),
    );
    assert_eq!(
        s.register(&c.auth, &replacement).await.unwrap(),
        Registered::New {
            membership_charged: 2,
            executor_permit: true
        }
    );
    assert_eq!(
        s.pool_status(&execution_pool(&c.env, &c.campaign))
            .await
            .unwrap()
            .members,
        7
    );
    // Membership above the effective ceiling (a workload's lower max_workloads) refuses whole.
    let narrow = workloads(7..8, limits(|l| l.workloads = 7));
    let over = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 4),
        &uuid(4, 4),
        CEILINGS,
        narrow,
    );
    assert_eq!(
        code(s.register(&c.auth, &over).await),
        StoreCode::MembershipExceeded
    );
    assert_eq!(
        s.pool_status(&execution_pool(&c.env, &c.campaign))
            .await
            .unwrap()
            .members,
        7
    );
    assert!(
        s.history(&over.key()).await.unwrap().is_none(),
        "nothing of it was kept"
    );
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_qualification_run_is_consumed_once_and_never_rebound() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let route = Route::new(["postgres", "table", "full_refresh", "mssql", "table", "v1"]).unwrap();
    let run = uuid(5, 1);
    let q1 = qualification_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &run,
        &route,
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    let q2 = qualification_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &run,
        &route,
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    assert!(matches!(
        s.register(&c.auth, &q1).await.unwrap(),
        Registered::New {
            executor_permit: false,
            ..
        }
    ));
    s.register(&c.auth, &q2).await.unwrap();
    // No admission before consumption.
    assert_eq!(
        code(s.admit(&c.auth, &admission(&q1, "w0", "a1", 10, 10)).await),
        StoreCode::QualificationNotConsumed
    );
    s.consume_qualification(&c.auth, &q1.key(), &q1.original_bytes)
        .await
        .expect("first use");
    assert_eq!(
        code(
            s.consume_qualification(&c.auth, &q1.key(), &q1.original_bytes)
                .await
        ),
        StoreCode::QualificationReplayed
    );
    assert_eq!(
        code(
            s.consume_qualification(&c.auth, &q2.key(), &q2.original_bytes)
                .await
        ),
        StoreCode::QualificationRebound
    );
    assert_eq!(
        code(s.admit(&c.auth, &admission(&q2, "w0", "a1", 10, 10)).await),
        StoreCode::QualificationNotConsumed
    );
    // Phase swap: an execution key cannot consume, a qualification key cannot select.
    let x = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    s.register(&c.auth, &x).await.unwrap();
    assert_eq!(
        code(
            s.consume_qualification(&c.auth, &x.key(), &x.original_bytes)
                .await
        ),
        StoreCode::PhaseMismatch
    );
    let mut req = request(&x, "r");
    req.grant_digest = Sha256Digest::of(&q1.original_bytes);
    assert_eq!(
        code(
            s.select_activation_request(&c.auth, &q1.key(), &q1.original_bytes, &req)
                .await
        ),
        StoreCode::PhaseMismatch
    );
    // Qualification rows/bytes are pooled by the exact route.
    let r = s
        .admit(&c.auth, &admission(&q1, "w0", "a1", 10, 100))
        .await
        .unwrap();
    assert_eq!(r.source_rows, 10);
    let mut key = PoolKey {
        environment: c.env.clone(),
        campaign: c.campaign.clone(),
        phase: Phase::Qualification,
        route: Some(route.clone()),
    };
    assert_eq!(s.pool_status(&key).await.unwrap().reserved_source_rows, 10);
    key.route =
        Some(Route::new(["postgres", "table", "full_refresh", "mssql", "table", "v2"]).unwrap());
    assert_eq!(s.pool_status(&key).await.unwrap().reserved_source_rows, 0);
    assert_eq!(
        s.pool_status(&key).await.unwrap().attempts,
        1,
        "attempts are per campaign pool"
    );
    // A settled and a running attempt: the pool read in one pass equals each charge summed on
    // its own (the reviewed definition of every column), under the route and under another.
    s.settle(&Settlement {
        reservation_id: r.reservation_id.clone(),
        measured_source_rows: 7,
        measured_source_bytes: 70,
        measured_http_bytes: 3,
        outcome: AttemptOutcome::Succeeded,
    })
    .await
    .unwrap();
    s.admit(&c.auth, &admission(&q1, "w0", "a2", 20, 200))
        .await
        .unwrap();
    for k in [
        key.clone(),
        PoolKey {
            route: Some(route.clone()),
            ..key.clone()
        },
    ] {
        let each = charges_summed_one_by_one(&e, &k).await;
        let status = s.pool_status(&k).await.unwrap();
        assert_eq!(status, each, "{:?}", k.route);
    }
    let under_route = s
        .pool_status(&PoolKey {
            route: Some(route),
            ..key
        })
        .await
        .unwrap();
    assert_eq!(
        (
            under_route.attempts,
            under_route.reserved_source_rows,
            under_route.unresolved,
            under_route.measured_source_rows,
            under_route.measured_http_bytes
        ),
        (2, 30, 1, 7, 3)
    );
    e.drop_schema().await;
}

/// A pool's eight charges, each by its own statement over the tables (the definition the store's
/// one-pass read must equal).
async fn charges_summed_one_by_one(e: &Env, k: &PoolKey) -> PoolStatus {
    let sc = &e.schema;
    let p = "environment_id = $1::text::uuid AND campaign_id = $2::text::uuid AND phase = $3";
    let route = "route IS NOT DISTINCT FROM $4::text[]";
    let (r, st, m) = (
        format!("\"{sc}\".np_reservation"),
        format!("\"{sc}\".np_settlement"),
        format!("\"{sc}\".np_membership"),
    );
    let sql = format!(
        "SELECT (SELECT count(*) FROM {m} WHERE {p}), \
         (SELECT count(*) FROM {r} WHERE {p}), \
         (SELECT coalesce(sum(reserved_source_rows), 0)::bigint FROM {r} WHERE {p} AND {route}), \
         (SELECT coalesce(sum(reserved_source_bytes), 0)::bigint FROM {r} WHERE {p} AND {route}), \
         (SELECT count(*) FROM {r} x WHERE {p} AND NOT EXISTS \
            (SELECT 1 FROM {st} s WHERE s.reservation_id = x.reservation_id)), \
         (SELECT coalesce(sum(s.measured_source_rows), 0)::bigint FROM {st} s \
            JOIN {r} x USING (reservation_id) WHERE {p} AND {route}), \
         (SELECT coalesce(sum(s.measured_source_bytes), 0)::bigint FROM {st} s \
            JOIN {r} x USING (reservation_id) WHERE {p} AND {route}), \
         (SELECT coalesce(sum(s.measured_http_bytes), 0)::bigint FROM {st} s \
            JOIN {r} x USING (reservation_id) WHERE {p} AND {route})"
    );
    let route: Option<Vec<String>> = k.route.as_ref().map(|r| r.dims().to_vec());
    let row = e
        .admin
        .query_one(
            &sql,
            &[
                &k.environment.as_str(),
                &k.campaign.as_str(),
                &k.phase.as_str(),
                &route,
            ],
        )
        .await
        .expect("the charges");
    PoolStatus {
        members: row.get(0),
        attempts: row.get(1),
        reserved_source_rows: row.get(2),
        reserved_source_bytes: row.get(3),
        unresolved: row.get(4),
        measured_source_rows: row.get(5),
        measured_source_bytes: row.get(6),
        measured_http_bytes: row.get(7),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn the_activation_coordinator_keeps_its_single_exact_request() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let activation = uuid(4, 1);
    let g1 = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &activation,
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    let g2 = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &activation,
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    s.register(&c.auth, &g1).await.unwrap();
    s.register(&c.auth, &g2).await.unwrap();
    let r1 = request(&g1, "one");
    assert_eq!(
        s.select_activation_request(&c.auth, &g1.key(), &g1.original_bytes, &r1)
            .await
            .unwrap(),
        Selected::Selected
    );
    assert_eq!(
        s.select_activation_request(&c.auth, &g1.key(), &g1.original_bytes, &r1)
            .await
            .unwrap(),
        Selected::Reopened
    );
    // Another documentary candidate is recorded but replaces nothing.
    let r2 = request(&g2, "two");
    assert!(s.record_activation_candidate(&r2).await.unwrap());
    assert!(!s.record_activation_candidate(&r2).await.unwrap());
    assert_eq!(
        code(
            s.select_activation_request(&c.auth, &g2.key(), &g2.original_bytes, &r2)
                .await
        ),
        StoreCode::ActivationAlreadySelected
    );
    assert_eq!(
        code(
            s.select_activation_request(
                &c.auth,
                &g1.key(),
                &g1.original_bytes,
                &request(&g1, "other")
            )
            .await
        ),
        StoreCode::ActivationAlreadySelected
    );
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g2, "w0", "a1", 1, 1)).await),
        StoreCode::ActivationNotSelected
    );
    s.admit(&c.auth, &admission(&g1, "w0", "a1", 1, 1))
        .await
        .expect("the selected grant");
    // A grant cannot migrate to another activation; a request must bind the grant's digest.
    let mut moved = request(&g1, "moved");
    moved.activation_id = uuid(4, 9);
    assert_eq!(
        code(
            s.select_activation_request(&c.auth, &g1.key(), &g1.original_bytes, &moved)
                .await
        ),
        StoreCode::ActivationMismatch
    );
    let mut unbound = request(&g1, "unbound");
    unbound.grant_digest = Sha256Digest::of(b"another grant");
    assert_eq!(
        code(
            s.select_activation_request(&c.auth, &g1.key(), &g1.original_bytes, &unbound)
                .await
        ),
        StoreCode::GrantBytesMismatch
    );
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn expiry_and_revocation_mid_flight_refuse_and_history_stays_readable() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let mut short = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..2, CEILINGS),
    );
    short.not_after_unix = now() + 3;
    register_and_select(s, &c.auth, &short).await;
    let a = auth(s, &c.env).await;
    s.admit(&a, &admission(&short, "w0", "a1", 1, 1))
        .await
        .expect("inside the window");
    tokio::time::sleep(std::time::Duration::from_millis(
        u64::try_from(short.not_after_unix - now() + 1).unwrap_or(0) * 1000 + 100,
    ))
    .await;
    assert_eq!(
        code(s.admit(&a, &admission(&short, "w1", "a1", 1, 1)).await),
        StoreCode::GrantExpired
    );
    // Revocation between authentication and the transaction.
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &uuid(4, 2),
        CEILINGS,
        workloads(0..2, CEILINGS),
    );
    register_and_select(s, &a, &g).await;
    let before = auth(s, &c.env).await;
    s.record_trust(&policy(&c.env, b"policy-A", 2, CEILINGS))
        .await
        .unwrap();
    assert_eq!(
        code(s.admit(&before, &admission(&g, "w1", "a1", 1, 1)).await),
        StoreCode::TrustRevisionChanged
    );
    let after = auth(s, &c.env).await;
    assert_eq!(
        code(s.admit(&after, &admission(&g, "w1", "a1", 1, 1)).await),
        StoreCode::GrantRevoked
    );
    // A revoked grant's identical registration reopens as history, but a new one refuses.
    assert_eq!(s.register(&after, &g).await.unwrap(), Registered::Reopened);
    let late = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 3),
        &uuid(4, 3),
        CEILINGS,
        workloads(0..1, CEILINGS),
    );
    assert_eq!(
        code(s.register(&after, &late).await),
        StoreCode::GrantRevoked
    );
    // History under the original trust revision, after expiry and revocation.
    for (grant, revision) in [(&short, 1), (&g, 1)] {
        let h = s.history(&grant.key()).await.unwrap().expect("history");
        assert_eq!(h.trust.revision, revision);
        assert_eq!(h.trust.revocation_epoch, 1);
        assert_eq!(h.trust.policy_digest, Sha256Digest::of(b"policy-A"));
        assert_eq!(h.original_bytes, grant.original_bytes);
        assert_eq!(h.grant_digest, Sha256Digest::of(&grant.original_bytes));
    }
    assert_eq!(
        s.current_trust(&c.env)
            .await
            .unwrap()
            .unwrap()
            .revocation_epoch,
        2
    );
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn duplicate_and_running_attempts_refuse_and_settlement_never_frees_a_reservation() {
    let e = Env::new().await;
    let c = campaign(&e, limits(|l| l.source_rows = 100)).await;
    let s = &c.store;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..2, limits(|l| l.attempts = 3)),
    );
    register_and_select(s, &c.auth, &g).await;
    let first = s
        .admit(&c.auth, &admission(&g, "w0", "a1", 60, 1000))
        .await
        .unwrap();
    assert!(!first.resolved_by_probe);
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g, "w0", "a1", 1, 1)).await),
        StoreCode::AttemptDuplicate
    );
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g, "w0", "a2", 1, 1)).await),
        StoreCode::AttemptRunning
    );
    // Settle below the reservation: the reservation stays charged.
    let settle = Settlement {
        reservation_id: first.reservation_id.clone(),
        measured_source_rows: 10,
        measured_source_bytes: 200,
        measured_http_bytes: 150,
        outcome: AttemptOutcome::Succeeded,
    };
    assert_eq!(s.settle(&settle).await.unwrap(), Settled::Recorded);
    assert_eq!(s.settle(&settle).await.unwrap(), Settled::Reopened);
    let mut other = settle.clone();
    other.measured_source_rows = 11;
    assert_eq!(code(s.settle(&other).await), StoreCode::SettlementConflict);
    let pool = s
        .pool_status(&execution_pool(&c.env, &c.campaign))
        .await
        .unwrap();
    assert_eq!(
        (
            pool.reserved_source_rows,
            pool.reserved_source_bytes,
            pool.unresolved,
            pool.measured_source_rows,
            pool.measured_http_bytes
        ),
        (60, 1000, 0, 10, 150)
    );
    // 60 of 100 rows stay charged although only 10 were read.
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g, "w0", "a2", 41, 1)).await),
        StoreCode::SourceRowsExceeded
    );
    let second = s
        .admit(&c.auth, &admission(&g, "w0", "a2", 40, 1))
        .await
        .unwrap();
    let mut over = settle.clone();
    over.reservation_id = second.reservation_id.clone();
    over.measured_source_rows = 41;
    assert_eq!(
        code(s.settle(&over).await),
        StoreCode::SettleExceedsReservation
    );
    over.reservation_id = Sha256Digest::of(b"nothing");
    assert_eq!(code(s.settle(&over).await), StoreCode::ReservationUnknown);
    // The workload's own attempt ceiling (3) binds below the pool's.
    over.reservation_id = second.reservation_id.clone();
    over.measured_source_rows = 0;
    over.measured_source_bytes = 0;
    s.settle(&over).await.unwrap();
    s.admit(&c.auth, &admission(&g, "w0", "a3", 0, 0))
        .await
        .unwrap();
    s.settle(&Settlement {
        reservation_id: reservation_id(
            &c.env,
            &c.campaign,
            Phase::Execution,
            &WorkloadId::new("w0").unwrap(),
            &AttemptId::new("a3").unwrap(),
        ),
        ..over.clone()
    })
    .await
    .unwrap();
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g, "w0", "a4", 0, 0)).await),
        StoreCode::AttemptsExceeded
    );
    // A workload's ceiling bounds the pool's charges when that workload is admitted (as the
    // scope component decides): w1's ceiling is 3 too, and the pool holds 3.
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g, "w1", "a1", 0, 0)).await),
        StoreCode::AttemptsExceeded
    );
    // The attempt duration bound and workloads outside the grant.
    let mut long = admission(&g, "w1", "a9", 0, 0);
    long.attempt_seconds = 3_600;
    let narrow = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &uuid(4, 2),
        limits(|l| l.attempt_seconds = 600),
        workloads(1..2, CEILINGS),
    );
    register_and_select(s, &c.auth, &narrow).await;
    long.grant = narrow.key();
    long.original_bytes = narrow.original_bytes.clone();
    assert_eq!(
        code(s.admit(&c.auth, &long).await),
        StoreCode::AttemptSecondsExceeded
    );
    assert_eq!(
        code(
            s.admit(&c.auth, &admission(&narrow, "w0", "a9", 0, 0))
                .await
        ),
        StoreCode::WorkloadNotInGrant
    );
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn replacement_ceilings_admit_more_or_block_but_never_reset_or_enlarge() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let members = workloads(0..4, CEILINGS);
    let g1 = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        limits(|l| l.source_rows = 100),
        members.clone(),
    );
    register_and_select(s, &c.auth, &g1).await;
    let r1 = s
        .admit(&c.auth, &admission(&g1, "w0", "a1", 100, 0))
        .await
        .unwrap();
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g1, "w1", "a1", 1, 0)).await),
        StoreCode::SourceRowsExceeded
    );
    // A higher replacement ceiling admits exactly the difference.
    let g2 = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &uuid(4, 2),
        limits(|l| l.source_rows = 150),
        members.clone(),
    );
    assert_eq!(
        register_and_select(s, &c.auth, &g2).await,
        Registered::New {
            membership_charged: 0,
            executor_permit: true
        }
    );
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g2, "w1", "a1", 51, 0)).await),
        StoreCode::SourceRowsExceeded
    );
    s.admit(&c.auth, &admission(&g2, "w1", "a1", 50, 0))
        .await
        .unwrap();
    // The earlier reservation is not enlarged.
    assert_eq!(
        s.probe(&r1.reservation_id)
            .await
            .unwrap()
            .unwrap()
            .source_rows,
        100
    );
    // A smaller replacement ceiling blocks new admission.
    let g3 = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 3),
        &uuid(4, 3),
        limits(|l| l.source_rows = 120),
        members,
    );
    register_and_select(s, &c.auth, &g3).await;
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g3, "w2", "a1", 0, 0)).await),
        StoreCode::SourceRowsExceeded
    );
    assert_eq!(
        code(s.admit(&c.auth, &admission(&g3, "w2", "a1", 1, 0)).await),
        StoreCode::SourceRowsExceeded
    );
    let pool = s
        .pool_status(&execution_pool(&c.env, &c.campaign))
        .await
        .unwrap();
    assert_eq!((pool.attempts, pool.reserved_source_rows), (2, 150));
    // A policy revision with a lower ceiling blocks too; a smaller membership ceiling as well.
    s.record_trust(&policy(&c.env, b"policy-A", 1, limits(|l| l.workloads = 3)))
        .await
        .unwrap();
    let a = auth(s, &c.env).await;
    assert_eq!(
        code(s.admit(&a, &admission(&g2, "w3", "a1", 0, 0)).await),
        StoreCode::MembershipExceeded
    );
    e.drop_schema().await;
}

/// Sends COMMIT for real, then reports the acknowledgement as lost once (the store drops the
/// connection, as when it closes after COMMIT was sent).
struct LoseAckAfterCommit(AtomicBool);

impl CommitBoundary for LoseAckAfterCommit {
    fn commit<'a>(
        &'a self,
        client: &'a Client,
    ) -> Pin<Box<dyn std::future::Future<Output = CommitAck> + Send + 'a>> {
        Box::pin(async move {
            let ack = HonestCommit.commit(client).await;
            if ack == CommitAck::Acknowledged && self.0.swap(false, Ordering::SeqCst) {
                CommitAck::Lost
            } else {
                ack
            }
        })
    }
}

/// Never sends COMMIT the first time and reports the acknowledgement as lost: the server rolls
/// the transaction back when the store drops the connection.
struct LoseBeforeCommit(AtomicBool);

impl CommitBoundary for LoseBeforeCommit {
    fn commit<'a>(
        &'a self,
        client: &'a Client,
    ) -> Pin<Box<dyn std::future::Future<Output = CommitAck> + Send + 'a>> {
        Box::pin(async move {
            if self.0.swap(false, Ordering::SeqCst) {
                CommitAck::Lost
            } else {
                HonestCommit.commit(client).await
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_lost_commit_acknowledgement_is_probed_never_assumed() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..3, CEILINGS),
    );
    register_and_select(&c.store, &c.auth, &g).await;
    // Committed, acknowledgement lost: the probe finds exactly the reservation.
    let after = e.store_with(Arc::new(LoseAckAfterCommit(AtomicBool::new(true))));
    let r = after
        .admit(&c.auth, &admission(&g, "w0", "a1", 7, 70))
        .await
        .expect("resolved");
    assert!(r.resolved_by_probe);
    assert_eq!((r.source_rows, r.source_bytes), (7, 70));
    // Not committed, acknowledgement lost: the probe finds nothing and the admission is retried
    // under the same deterministic id, charged once.
    let before = e.store_with(Arc::new(LoseBeforeCommit(AtomicBool::new(true))));
    let r2 = before
        .admit(&c.auth, &admission(&g, "w1", "a1", 5, 50))
        .await
        .expect("resolved");
    assert!(r2.resolved_by_probe);
    let pool = c
        .store
        .pool_status(&execution_pool(&c.env, &c.campaign))
        .await
        .unwrap();
    assert_eq!(
        (
            pool.attempts,
            pool.reserved_source_rows,
            pool.reserved_source_bytes
        ),
        (2, 12, 120)
    );
    assert_eq!(
        c.store
            .probe(&r.reservation_id)
            .await
            .unwrap()
            .unwrap()
            .reservation_id,
        r.reservation_id
    );
    // A settlement is queued too: its lost acknowledgement is resolved by reading its
    // outcome, recorded once.
    let lost = e.store_with(Arc::new(LoseAckAfterCommit(AtomicBool::new(true))));
    let settlement = Settlement {
        reservation_id: r.reservation_id.clone(),
        measured_source_rows: 7,
        measured_source_bytes: 70,
        measured_http_bytes: 0,
        outcome: AttemptOutcome::Succeeded,
    };
    assert_eq!(lost.settle(&settlement).await.unwrap(), Settled::Recorded);
    assert_eq!(
        c.store.settle(&settlement).await.unwrap(),
        Settled::Reopened
    );
    // Other protected operations report the unknown outcome instead of assuming.
    let g2 = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &uuid(4, 2),
        CEILINGS,
        workloads(0..3, CEILINGS),
    );
    let lost = e.store_with(Arc::new(LoseAckAfterCommit(AtomicBool::new(true))));
    let err = lost.register(&c.auth, &g2).await.unwrap_err();
    assert_eq!(err.code, StoreCode::OutcomeUnknown);
    e.drop_schema().await;
}

/// Rolls the transaction back and reports a serialization failure at COMMIT, `n` times.
struct SerializationFailures(std::sync::atomic::AtomicU32);

impl CommitBoundary for SerializationFailures {
    fn commit<'a>(
        &'a self,
        client: &'a Client,
    ) -> Pin<Box<dyn std::future::Future<Output = CommitAck> + Send + 'a>> {
        Box::pin(async move {
            let left = self.0.load(Ordering::SeqCst);
            if left > 0 {
                self.0.store(left - 1, Ordering::SeqCst);
                client.batch_execute("ROLLBACK").await.expect("rollback");
                CommitAck::Refused("40001".into())
            } else {
                HonestCommit.commit(client).await
            }
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn serialization_failures_retry_within_a_bound_and_then_refuse() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..2, CEILINGS),
    );
    register_and_select(&c.store, &c.auth, &g).await;
    let flaky = e.store_with(Arc::new(SerializationFailures(3.into())));
    let r = flaky
        .admit(&c.auth, &admission(&g, "w0", "a1", 5, 5))
        .await
        .expect("admitted after three retries");
    assert!(!r.resolved_by_probe);
    let mut hopeless = e.store_with(Arc::new(SerializationFailures(100.into())));
    hopeless.set_max_retries(2);
    assert_eq!(
        code(
            hopeless
                .admit(&c.auth, &admission(&g, "w1", "a1", 5, 5))
                .await
        ),
        StoreCode::SerializationRetriesExhausted
    );
    let pool = c
        .store
        .pool_status(&execution_pool(&c.env, &c.campaign))
        .await
        .unwrap();
    assert_eq!(
        (pool.attempts, pool.reserved_source_rows),
        (1, 5),
        "charged once, nothing for the refused one"
    );
    e.drop_schema().await;
}

/// A trigger the store never sees (added after its session was verified) on `table`: it refuses
/// the first insert with the backstop's `code`, the next two with a serialization failure, and
/// accepts the rest. The sequence `test_refusals` counts the inserts tried.
async fn refuse_inserts_three_times(e: &Env, table: &str, code: &str) {
    let s = &e.schema;
    e.admin
        .batch_execute(&format!(
            "CREATE SEQUENCE \"{s}\".test_refusals; \
             CREATE FUNCTION \"{s}\".test_refuse() RETURNS trigger LANGUAGE plpgsql AS $f$ \
             DECLARE n bigint := nextval('\"{s}\".test_refusals'); BEGIN \
               IF n = 1 THEN RAISE EXCEPTION 'refused' USING ERRCODE = '{code}'; END IF; \
               IF n <= 3 THEN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END IF; \
               RETURN NEW; END $f$; \
             CREATE TRIGGER test_refuse BEFORE INSERT ON \"{s}\".{table} \
             FOR EACH ROW EXECUTE FUNCTION \"{s}\".test_refuse();"
        ))
        .await
        .expect("the refusing trigger");
}

/// The reservation's insert travels in one flight with COMMIT, and PostgreSQL answers COMMIT of
/// a transaction aborted by that insert with `ROLLBACK`, not an error: only the insert's own
/// answer tells. A trigger the store never sees (added after its session was verified) refuses
/// the insert as the backstop would once, then with a serialization failure twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_reservation_insert_the_server_refuses_is_never_reported_admitted() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..3, CEILINGS),
    );
    register_and_select(&c.store, &c.auth, &g).await;
    c.store
        .admit(&c.auth, &admission(&g, "w0", "a1", 1, 1))
        .await
        .expect("admitted before the server refuses anything");
    refuse_inserts_three_times(&e, "np_reservation", "NP013").await;
    let pool = || async {
        let p = c
            .store
            .pool_status(&execution_pool(&c.env, &c.campaign))
            .await
            .unwrap();
        (p.attempts, p.reserved_source_rows, p.reserved_source_bytes)
    };
    assert_eq!(
        code(
            c.store
                .admit(&c.auth, &admission(&g, "w1", "a1", 5, 50))
                .await
        ),
        StoreCode::SourceRowsExceeded,
        "the server's refusal of the insert, not an admission"
    );
    assert_eq!(pool().await, (1, 1, 1), "nothing was charged");
    let r = c
        .store
        .admit(&c.auth, &admission(&g, "w1", "a1", 5, 50))
        .await
        .expect("admitted after two serialization failures at the insert");
    assert!(!r.resolved_by_probe);
    assert_eq!(pool().await, (2, 6, 51), "charged once");
    let fired: i64 = e
        .admin
        .query_one(
            &format!("SELECT last_value FROM \"{}\".test_refusals", e.schema),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(fired, 4, "refused three times, accepted the fourth");
    e.drop_schema().await;
}

/// The settlement's insert also travels with COMMIT: a settlement the server refuses is never
/// reported recorded and charges nothing, and one refused by serialization failures is retried
/// and recorded once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_settlement_insert_the_server_refuses_is_never_reported_recorded() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let g = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..3, CEILINGS),
    );
    register_and_select(&c.store, &c.auth, &g).await;
    let r = c
        .store
        .admit(&c.auth, &admission(&g, "w0", "a1", 5, 50))
        .await
        .expect("admitted");
    refuse_inserts_three_times(&e, "np_settlement", "NP015").await;
    let settlement = Settlement {
        reservation_id: r.reservation_id.clone(),
        measured_source_rows: 4,
        measured_source_bytes: 40,
        measured_http_bytes: 0,
        outcome: AttemptOutcome::Succeeded,
    };
    let pool = || async {
        let p = c
            .store
            .pool_status(&execution_pool(&c.env, &c.campaign))
            .await
            .unwrap();
        (
            p.unresolved,
            p.measured_source_rows,
            p.measured_source_bytes,
        )
    };
    assert_eq!(
        code(c.store.settle(&settlement).await),
        StoreCode::SettleExceedsReservation,
        "the server's refusal of the insert, not a settlement"
    );
    assert_eq!(pool().await, (1, 0, 0), "nothing was recorded");
    assert_eq!(
        c.store.settle(&settlement).await.expect("recorded"),
        Settled::Recorded,
        "recorded after two serialization failures at the insert"
    );
    assert_eq!(pool().await, (0, 4, 40), "recorded once");
    assert_eq!(
        c.store.settle(&settlement).await.expect("reopened"),
        Settled::Reopened
    );
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_pools_reservations_are_listed_across_replacement_grants_with_their_settlements() {
    let e = Env::new().await;
    let c = campaign(&e, CEILINGS).await;
    let s = &c.store;
    let first = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        CEILINGS,
        workloads(0..2, CEILINGS),
    );
    let replacement = execution_grant(
        &c.env,
        &c.campaign,
        &uuid(3, 2),
        &uuid(4, 2),
        CEILINGS,
        workloads(0..2, CEILINGS),
    );
    register_and_select(s, &c.auth, &first).await;
    register_and_select(s, &c.auth, &replacement).await;
    let a = s
        .admit(&c.auth, &admission(&first, "w0", "a1", 10, 100))
        .await
        .expect("admitted");
    let b = s
        .admit(&c.auth, &admission(&replacement, "w1", "a1", 20, 200))
        .await
        .expect("admitted");
    let settled = Settlement {
        reservation_id: a.reservation_id.clone(),
        measured_source_rows: 7,
        measured_source_bytes: 70,
        measured_http_bytes: 90,
        outcome: AttemptOutcome::Succeeded,
    };
    s.settle(&settled).await.expect("settled");

    let pool = execution_pool(&c.env, &c.campaign);
    let listed = s
        .reservations(&pool, MAX_LISTED_RESERVATIONS)
        .await
        .expect("listed");
    assert_eq!(listed.len(), 2, "one pool across the replacement grant");
    assert_eq!(listed[0].reservation, a, "oldest first, as issued");
    assert_eq!(listed[0].settlement.as_ref(), Some(&settled));
    assert_eq!(listed[1].reservation, b);
    assert_eq!(listed[1].settlement, None, "unresolved");
    assert!(listed[0].reserved_at_unix <= listed[1].reserved_at_unix);
    assert!(
        listed.iter().all(|l| l.run_claimed_at_unix.is_none()),
        "no run has claimed either"
    );
    // A run's claim shows in the listing and in the run's authority, with its time.
    assert!(s.claim_run(&b.reservation_id, &[]).await.expect("claimed"));
    let listed = s
        .reservations(&pool, MAX_LISTED_RESERVATIONS)
        .await
        .expect("listed");
    assert_eq!(listed[0].run_claimed_at_unix, None);
    let claimed = listed[1].run_claimed_at_unix.expect("claimed");
    assert!(claimed >= listed[1].reserved_at_unix, "{claimed}");
    let authority = s
        .reservation_authority(&b.reservation_id)
        .await
        .expect("read")
        .expect("found");
    assert_eq!(authority.listed.run_claimed_at_unix, Some(claimed));
    assert_eq!(
        s.reservations(&pool, 1).await.expect("listed").len(),
        1,
        "the limit holds"
    );
    // Another campaign's and another phase's pools are empty.
    let other = execution_pool(&c.env, &uuid(2, 9));
    assert!(s.reservations(&other, 10).await.expect("listed").is_empty());
    let mut qualification = pool.clone();
    qualification.phase = Phase::Qualification;
    qualification.route = Some(Route::new(["a", "b", "c", "d", "e", "f"]).expect("route"));
    assert!(
        s.reservations(&qualification, 10)
            .await
            .expect("listed")
            .is_empty()
    );
    e.drop_schema().await;
}

/// Participants of both engines are enrolled append-only, each once under one enrollment, and
/// read back with every record re-checked: the database re-computes a ClickHouse record's digest,
/// and a stored record that is not exactly a valid identity makes the enrollment unreadable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn participants_of_each_engine_are_enrolled_once_and_read_back_checked() {
    use dpone_engine_nonproduction::enrollment::{
        ClickhouseIdentity, ClickhouseMember, Enrollment, ParticipantIdentity, PhysicalIdentity,
    };
    let e = Env::new().await;
    let store = e.store();
    let env = uuid(1, 1);
    let trust = store
        .record_trust(&policy(&env, b"p", 0, CEILINGS))
        .await
        .expect("trust");
    let digest = Sha256Digest::of(b"enrollment");
    let member = |replica_num: u32, database_uuid: &str| ClickhouseMember {
        shard_num: 1,
        replica_num,
        server_uuid: "00000000-0000-0000-0000-000000000000".to_owned(),
        database_uuid: database_uuid.to_owned(),
    };
    let ch = |database_uuid: &str| -> ParticipantIdentity {
        ClickhouseIdentity::new(
            "synth_ch".to_owned(),
            vec![
                member(1, "7de30027-332a-401c-addd-22a502309253"),
                member(2, database_uuid),
            ],
        )
        .expect("valid")
        .into()
    };
    let record = |id: &str, identity: ParticipantIdentity| Enrollment {
        participant_id: id.to_owned(),
        identity_digest: identity.digest(),
        identity,
    };
    let pg: ParticipantIdentity = PhysicalIdentity {
        system_identifier: "7401234567890123456".to_owned(),
        database_name: "synth_pg".to_owned(),
        database_oid: 16_384,
    }
    .into();
    let enroll = |r: Enrollment| {
        let store = &store;
        let digest = &digest;
        let env = &env;
        async move { store.enroll(env, digest, trust.revision, &r).await }
    };
    let first = ch("e42d2219-89c8-4e13-9fb0-60b1b0c263b2");
    assert_eq!(
        enroll(record("synth-ch-write", first.clone())).await,
        Ok(Enrolled::Recorded)
    );
    assert_eq!(
        enroll(record("synth-pg-read", pg.clone())).await,
        Ok(Enrolled::Recorded)
    );
    assert_eq!(
        enroll(record("synth-ch-write", first.clone())).await,
        Ok(Enrolled::Reopened),
        "the same identity again reopens"
    );
    // A recreated database on one member is another identity: never replaced.
    let recreated = ch("0670178e-0e59-46ef-9845-9b26c4981039");
    assert_eq!(
        code(enroll(record("synth-ch-write", recreated)).await),
        StoreCode::EnrollmentConflict
    );
    // An id enrolled under one engine is never enrolled under the other.
    assert_eq!(
        code(enroll(record("synth-pg-read", first.clone())).await),
        StoreCode::EnrollmentConflict
    );
    assert_eq!(
        code(enroll(record("synth-ch-write", pg.clone())).await),
        StoreCode::EnrollmentConflict
    );
    let read = store.enrolled(&env, &digest).await.expect("enrolled");
    assert_eq!(
        read,
        vec![record("synth-ch-write", first), record("synth-pg-read", pg)]
    );

    // The database refuses a record whose digest is not its own, whatever the writer.
    let insert = |participant: &str, record: &str, record_digest: &str| {
        format!(
            "INSERT INTO \"{s}\".np_participant_identity VALUES ('{env}', '{d}', \
             '{participant}', 'clickhouse', 'dpone.np-physical-identity.clickhouse.v1', \
             '{record}', '{record_digest}', {rev}, now())",
            s = e.schema,
            env = env.as_str(),
            d = digest.as_str(),
            rev = trust.revision,
        )
    };
    let forged = e
        .admin
        .batch_execute(&insert(
            "synth-ch-other",
            "{}",
            Sha256Digest::of(b"x").as_str(),
        ))
        .await
        .expect_err("a digest that is not the record's");
    assert_eq!(forged.code().map(|c| c.code()), Some("23514"));
    // A record with its own digest that is not a canonical identity: stored, but the whole
    // enrollment becomes unreadable rather than partly trusted.
    let odd = "{\"database_name\": \"synth_ch\"}";
    e.admin
        .batch_execute(&insert(
            "synth-ch-other",
            odd,
            Sha256Digest::of(odd.as_bytes()).as_str(),
        ))
        .await
        .expect("the database accepts a consistent record");
    assert_eq!(
        code(store.enrolled(&env, &digest).await),
        StoreCode::StoredStateInvalid
    );
    drop(store);
    e.drop_schema().await;
}
