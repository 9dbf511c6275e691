//! The database backstop and the least-privilege roles on a real PostgreSQL server
//! (`control-store.sql`'s `np_backstop` triggers, `control-store-roles.sql`): a scheduler's
//! session (`SET ROLE dpone_np_scheduler`) that writes `np_reservation` directly is refused by
//! PostgreSQL when the row exceeds the pool, names a grant digest or workload that is not the
//! registered one, opens a second unresolved attempt, or smuggles two attempts into one
//! statement; it cannot insert a trust revision or a settlement at all. Each attack is first
//! shown to pass with the guard taken away (the trigger disabled, or the privilege granted,
//! inside a transaction that is rolled back), so the refusal is the guard's. The store's own
//! admission, run as the scheduler role, still admits; a settlement by the worker role still
//! records. The catalog check refuses a store whose backstop is missing, inert or rewritten,
//! and the migration brings an older store to the contract.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`).

mod support;

use dpone_adapter_np_control_store::store::backstop_code;
use dpone_adapter_np_control_store::*;
use support::*;

/// The reviewed SQL, compiled into the test: nothing is read at run time.
const ROLES_SQL: &str = include_str!("../../../fixtures/nonproduction/control-store-roles.sql");
const BACKSTOP_MIGRATION: &str =
    include_str!("../../../fixtures/nonproduction/migrate-add-backstop.sql");
const CONTROL_STORE_DDL: &str = include_str!("../../../fixtures/nonproduction/control-store.sql");

fn in_schema(sql: &str, e: &Env) -> String {
    sql.replace("\"dpone_np_control\"", &format!("\"{}\"", e.schema))
}

/// A store provisioned from the reviewed DDL with the reviewed roles, one execution campaign
/// (pool: 3 attempts, 100 source rows; workloads w0..w2) and one admitted attempt (w0/a1, 40
/// rows, unresolved), admitted by the store connected as the scheduler role.
struct Pool {
    e: Env,
    env: Uuid,
    campaign: Uuid,
    grant: GrantRegistration,
    revision: i64,
}

/// A store that logs in as a member of group role `role` (a login role per group, created for
/// the tests with a fresh password): the way a deployment connects each command.
async fn store_as(e: &Env, role: &str) -> PgControlStore {
    let login = role.replace("dpone_np_", "dpone_np_t_");
    let password = member_login(e, &login, role).await;
    store_logged_in(e, &login, &password)
}

/// Makes `login` a login member of `role` with a fresh password (returned), no other attribute.
async fn member_login(e: &Env, login: &str, role: &str) -> String {
    let mut r = [0u8; 16];
    getrandom::fill(&mut r).expect("random");
    let password: String = r.iter().map(|b| format!("{b:02x}")).collect();
    e.admin
        .batch_execute(&format!(
            "DO $$ BEGIN CREATE ROLE {login} LOGIN; \
             EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$; \
             ALTER ROLE {login} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD '{password}'; \
             GRANT {role} TO {login}"
        ))
        .await
        .expect("a login role");
    password
}

/// The store as `login`, its session's privileges checked.
fn store_logged_in(e: &Env, login: &str, password: &str) -> PgControlStore {
    let mut endpoint = e.endpoint();
    endpoint.config.user(login).password(password);
    endpoint.accept_privileged_session = false;
    PgControlStore::new(endpoint).expect("store")
}

async fn pool() -> Pool {
    let e = Env::new().await;
    e.admin
        .batch_execute(&in_schema(ROLES_SQL, &e))
        .await
        .expect("the reviewed roles apply");
    let env = uuid(1, 1);
    let campaign = uuid(2, 1);
    let pool_limits = limits(|l| {
        l.attempts = 3;
        l.source_rows = 100;
    });
    let platform = store_as(&e, "dpone_np_platform").await;
    let trust = platform
        .record_trust(&policy(&env, b"policy-A", 1, pool_limits))
        .await
        .expect("the platform role records the policy");
    let a = auth(&platform, &env).await;
    let grant = execution_grant(
        &env,
        &campaign,
        &uuid(3, 1),
        &uuid(4, 1),
        pool_limits,
        workloads(0..3, CEILINGS),
    );
    register_and_select(&platform, &a, &grant).await;
    let scheduler = store_as(&e, "dpone_np_scheduler").await;
    let a = auth(&scheduler, &env).await;
    let admitted = scheduler
        .admit(&a, &admission(&grant, "w0", "a1", 40, 10))
        .await
        .expect("the scheduler role admits through the store");
    assert_eq!(admitted.source_rows, 40);
    Pool {
        e,
        env,
        campaign,
        grant,
        revision: trust.revision,
    }
}

/// A direct `INSERT` of reservation `workload`/`attempt` with `rows` source rows, the grant's
/// digest `digest` and the pool's current trust revision.
fn reservation_insert(p: &Pool, workload: &str, attempt: &str, rows: i64, digest: &str) -> String {
    let id = reservation_id(
        &p.env,
        &p.campaign,
        Phase::Execution,
        &WorkloadId::new(workload).expect("workload"),
        &AttemptId::new(attempt).expect("attempt"),
    );
    format!(
        "('{id}', '{env}', '{campaign}', 'execution', NULL, '{grant}', '{digest}', {rev}, \
         '{workload}', '{attempt}', {rows}, 10, 60, now())",
        id = id.as_str(),
        env = p.env.as_str(),
        campaign = p.campaign.as_str(),
        grant = p.grant.grant_id.as_str(),
        rev = p.revision,
    )
}

fn insert_into_reservation(p: &Pool, values: &[String]) -> String {
    format!(
        "INSERT INTO \"{}\".np_reservation (reservation_id, environment_id, campaign_id, phase, \
         route, grant_id, grant_digest, trust_revision, workload_id, attempt_id, \
         reserved_source_rows, reserved_source_bytes, reserved_seconds, reserved_at_utc) \
         VALUES {}",
        p.e.schema,
        values.join(", ")
    )
}

fn digest(p: &Pool) -> String {
    Sha256Digest::of(&p.grant.original_bytes)
        .as_str()
        .to_owned()
}

/// Runs `sql` in a scheduler session (`SET LOCAL ROLE dpone_np_scheduler`) after `weaken` (run
/// as the administrator in the same transaction), then rolls everything back: the SQLSTATE of
/// the refusal, `None` when PostgreSQL accepted the write.
async fn as_scheduler(p: &Pool, weaken: &str, begin: &str, sql: &str) -> Option<String> {
    let admin = &p.e.admin;
    admin
        .batch_execute(&format!(
            "{begin}; {weaken}; SET LOCAL ROLE dpone_np_scheduler"
        ))
        .await
        .expect("a scheduler session");
    let r = admin.batch_execute(sql).await;
    admin.batch_execute("ROLLBACK").await.expect("rollback");
    match r {
        Ok(()) => None,
        Err(e) => Some(e.code().map_or("none".into(), |c| c.code().to_owned())),
    }
}

/// The attack is accepted with the guard taken away and refused with `state` by PostgreSQL
/// with it.
async fn refused_only_by_the_guard(p: &Pool, weaken: &str, sql: &str, state: &str, what: &str) {
    assert_eq!(
        as_scheduler(p, weaken, "BEGIN", sql).await,
        None,
        "{what}: accepted without the guard"
    );
    assert_eq!(
        as_scheduler(p, "SELECT 1", "BEGIN", sql).await.as_deref(),
        Some(state),
        "{what}: refused by the database"
    );
}

fn disable(p: &Pool, table: &str) -> String {
    format!(
        "ALTER TABLE \"{}\".{table} DISABLE TRIGGER np_backstop",
        p.e.schema
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_schedulers_direct_reservation_that_breaks_a_rule_is_refused_by_postgresql() {
    let p = pool().await;
    let off = disable(&p, "np_reservation");
    let d = digest(&p);
    // Over the pool: 40 rows are reserved, the pool holds 100.
    let over = insert_into_reservation(&p, &[reservation_insert(&p, "w1", "a1", 61, &d)]);
    refused_only_by_the_guard(&p, &off, &over, "NP013", "over the source-row pool").await;
    // A workload the grant does not name.
    let stranger = insert_into_reservation(&p, &[reservation_insert(&p, "w9", "a1", 1, &d)]);
    refused_only_by_the_guard(&p, &off, &stranger, "NP008", "an unregistered workload").await;
    // Another grant digest than the registered original (an unregistered grant id is refused by
    // the reviewed foreign key even without the backstop, so the registered id is used).
    let forged = Sha256Digest::of(b"another grant").as_str().to_owned();
    let digest_forged =
        insert_into_reservation(&p, &[reservation_insert(&p, "w1", "a1", 1, &forged)]);
    refused_only_by_the_guard(&p, &off, &digest_forged, "NP001", "another grant digest").await;
    // A second unresolved attempt of w0 (w0/a1 is RUNNING).
    let second = insert_into_reservation(&p, &[reservation_insert(&p, "w0", "a2", 1, &d)]);
    refused_only_by_the_guard(&p, &off, &second, "NP009", "a second unresolved attempt").await;
    // Two attempts in one statement that only together exceed the pool (each row's check sees
    // the rows the statement inserted before it).
    let pair = insert_into_reservation(
        &p,
        &[
            reservation_insert(&p, "w1", "a1", 30, &d),
            reservation_insert(&p, "w2", "a1", 31, &d),
        ],
    );
    refused_only_by_the_guard(&p, &off, &pair, "NP013", "two rows in one statement").await;
    // A trust revision naming another signer: the scheduler role has no INSERT on the table.
    let trust = format!(
        "INSERT INTO \"{s}\".np_trust_revision SELECT environment_id, revision + 1, \
         policy_digest, policy_bytes, '{root}', revocation_epoch, max_workloads, max_attempts, \
         max_source_rows, max_source_bytes, max_attempt_seconds, max_validity_seconds, now() \
         FROM \"{s}\".np_trust_revision",
        s = p.e.schema,
        root = Sha256Digest::of(b"another signer").as_str(),
    );
    let grant_trust = format!(
        "GRANT INSERT ON \"{}\".np_trust_revision TO dpone_np_scheduler",
        p.e.schema
    );
    refused_only_by_the_guard(&p, &grant_trust, &trust, "42501", "a trust revision").await;
    // A settlement: the worker's table, not the scheduler's.
    let id = reservation_id(
        &p.env,
        &p.campaign,
        Phase::Execution,
        &WorkloadId::new("w0").expect("workload"),
        &AttemptId::new("a1").expect("attempt"),
    );
    let settle = format!(
        "INSERT INTO \"{}\".np_settlement VALUES ('{}', 0, 0, 0, 'failed', now())",
        p.e.schema,
        id.as_str()
    );
    let grant_settle = format!(
        "GRANT INSERT ON \"{}\".np_settlement TO dpone_np_scheduler",
        p.e.schema
    );
    refused_only_by_the_guard(&p, &grant_settle, &settle, "42501", "a settlement").await;
    // A writer whose snapshot may predate the environment lock is refused outright.
    let within = insert_into_reservation(&p, &[reservation_insert(&p, "w1", "a1", 1, &d)]);
    assert_eq!(
        as_scheduler(
            &p,
            "SELECT 1",
            "BEGIN ISOLATION LEVEL REPEATABLE READ",
            &within
        )
        .await
        .as_deref(),
        Some("NP016"),
        "a REPEATABLE READ writer"
    );
    // A row within every rule is accepted from a direct writer too (the backstop holds the
    // rules, not a monopoly of the client).
    assert_eq!(as_scheduler(&p, "SELECT 1", "BEGIN", &within).await, None);

    // The normal path still admits and settles, each as its own role; the pool is unchanged by
    // the rolled-back attacks.
    let scheduler = store_as(&p.e, "dpone_np_scheduler").await;
    let a = auth(&scheduler, &p.env).await;
    let before = scheduler
        .pool_status(&execution_pool(&p.env, &p.campaign))
        .await
        .expect("pool");
    assert_eq!((before.attempts, before.reserved_source_rows), (1, 40));
    let admitted = scheduler
        .admit(&a, &admission(&p.grant, "w1", "a1", 60, 10))
        .await
        .expect("the store admits up to the pool");
    assert_eq!(admitted.source_rows, 60);
    assert_eq!(
        code(
            scheduler
                .record_trust(&policy(&p.env, b"policy-B", 1, CEILINGS))
                .await
        ),
        StoreCode::Unavailable,
        "the scheduler role cannot record a trust revision through the store either"
    );
    let worker = store_as(&p.e, "dpone_np_worker").await;
    let settled = worker
        .settle(&Settlement {
            reservation_id: id,
            measured_source_rows: 40,
            measured_source_bytes: 10,
            measured_http_bytes: 0,
            outcome: AttemptOutcome::Succeeded,
        })
        .await
        .expect("the worker role settles");
    assert_eq!(settled, Settled::Recorded);
    p.e.drop_schema().await;
}

/// A second administrator connection to the test database.
async fn connect(e: &Env) -> tokio_postgres::Client {
    let (client, conn) = e
        .endpoint()
        .config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn two_direct_writers_cannot_race_past_the_pool_under_read_committed() {
    // Without the backstop nothing checks a direct INSERT at all (the first test shows each
    // such row accepted); with it, the second writer's check waits on the environment lock the
    // first one holds until it commits, and then sees its row.
    let p = pool().await;
    let d = digest(&p);
    let (a, b) = (connect(&p.e).await, connect(&p.e).await);
    for c in [&a, &b] {
        c.batch_execute("BEGIN ISOLATION LEVEL READ COMMITTED; SET LOCAL ROLE dpone_np_scheduler")
            .await
            .expect("a scheduler session");
    }
    a.batch_execute(&insert_into_reservation(
        &p,
        &[reservation_insert(&p, "w1", "a1", 30, &d)],
    ))
    .await
    .expect("the first writer is within the pool");
    let second = insert_into_reservation(&p, &[reservation_insert(&p, "w2", "a1", 31, &d)]);
    let waiting = tokio::spawn(async move {
        let r = b.batch_execute(&second).await;
        let _ = b.batch_execute("ROLLBACK").await;
        r.err().and_then(|e| e.code().map(|c| c.code().to_owned()))
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !waiting.is_finished(),
        "the second writer waits for the environment lock"
    );
    a.batch_execute("COMMIT").await.expect("commit");
    assert_eq!(
        waiting.await.expect("join").as_deref(),
        Some("NP013"),
        "after the first commit the second writer's row exceeds the pool"
    );
    let status =
        p.e.store()
            .pool_status(&execution_pool(&p.env, &p.campaign))
            .await
            .expect("pool");
    assert_eq!((status.attempts, status.reserved_source_rows), (2, 70));
    p.e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_missing_inert_or_rewritten_backstop_is_refused_and_the_migration_restores_it() {
    let e = Env::new().await;
    let store = e.store();
    store.verify_catalog().await.expect("the fixture verifies");
    let s = &e.schema;
    let cases: Vec<(String, String, &str, &str)> = vec![
        (
            format!("ALTER TABLE \"{s}\".np_reservation DISABLE TRIGGER np_backstop"),
            format!("ALTER TABLE \"{s}\".np_reservation ENABLE TRIGGER np_backstop"),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_reservation",
        ),
        (
            format!("DROP TRIGGER np_backstop ON \"{s}\".np_settlement"),
            format!(
                "CREATE TRIGGER np_backstop BEFORE INSERT ON \"{s}\".np_settlement \
                 FOR EACH ROW EXECUTE FUNCTION \"{s}\".np_check_settlement()"
            ),
            "DPONE_NP_STORE_TRIGGER_NOT_ENFORCING",
            "np_settlement",
        ),
        (
            format!("ALTER FUNCTION \"{s}\".np_check_reservation() RESET search_path"),
            format!(
                "ALTER FUNCTION \"{s}\".np_check_reservation() \
                 SET search_path = pg_catalog, pg_temp"
            ),
            "DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED",
            "np_reservation",
        ),
        (
            format!(
                "CREATE OR REPLACE FUNCTION \"{s}\".\"np_check_selection\"() RETURNS trigger \
                 LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$\nBEGIN\n\
                 RETURN NEW;\nEND\n$$"
            ),
            String::new(),
            "DPONE_NP_STORE_TRIGGER_FUNCTION_NOT_REVIEWED",
            "np_activation_selection",
        ),
    ];
    for (weaken, restore, reason, table) in &cases {
        e.admin.batch_execute(weaken).await.expect("weaken");
        let err = e.store().verify_catalog().await.expect_err(weaken);
        assert_eq!(err.code, StoreCode::CatalogInvalid, "{weaken}: {err}");
        assert!(
            err.message.starts_with(&format!("{reason}: ")),
            "{weaken}: {err}"
        );
        assert!(
            err.message.contains(&format!("{table:?}")),
            "{weaken}: {err}"
        );
        if !restore.is_empty() {
            e.admin.batch_execute(restore).await.expect("restore");
            e.store().verify_catalog().await.expect("restored");
        }
    }
    // The migration: its statements after the DROPs are the DDL's verbatim; on the rewritten
    // store (and again) it brings the catalog back to the contract.
    let migration = BACKSTOP_MIGRATION;
    let body: String = migration
        .lines()
        .filter(|l| !l.starts_with("--") && !l.starts_with("DROP TRIGGER IF EXISTS"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(
        CONTROL_STORE_DDL.contains(&body),
        "migrate-add-backstop.sql's statements are control-store.sql's"
    );
    for _ in 0..2 {
        e.admin
            .batch_execute(&in_schema(migration, &e))
            .await
            .expect("the migration applies");
        e.store()
            .verify_catalog()
            .await
            .expect("migrated store verifies");
    }
    // An older store: no backstop at all (the queue's stamp came with the queue's tables, in
    // their own migration).
    let mut drop = String::new();
    for (table, function) in catalog::BACKSTOP
        .into_iter()
        .filter(|(t, _)| *t != "np_admission_request")
    {
        drop.push_str(&format!(
            "DROP TRIGGER np_backstop ON \"{s}\".{table}; DROP FUNCTION \"{s}\".{function}();\n"
        ));
    }
    e.admin.batch_execute(&drop).await.expect("an older store");
    let err = e.store().verify_catalog().await.expect_err("older store");
    assert!(
        err.message
            .starts_with("DPONE_NP_STORE_TRIGGER_NOT_ENFORCING: "),
        "{err}"
    );
    e.admin
        .batch_execute(&in_schema(migration, &e))
        .await
        .expect("the migration applies to an older store");
    e.store()
        .verify_catalog()
        .await
        .expect("migrated store verifies");
    // The roles apply to it, and again.
    for _ in 0..2 {
        e.admin
            .batch_execute(&in_schema(ROLES_SQL, &e))
            .await
            .expect("the roles apply");
    }
    e.drop_schema().await;
}

#[test]
fn each_backstop_sqlstate_maps_to_a_stable_store_code() {
    // Tier: unit (the client's mapping of the triggers' SQLSTATEs).
    let ddl = CONTROL_STORE_DDL;
    for n in 1..=17 {
        let state = format!("NP{n:03}");
        assert!(backstop_code(&state).is_some(), "{state}");
        assert!(
            ddl.contains(&format!("ERRCODE = '{state}'")),
            "{state} is raised by the reviewed DDL"
        );
    }
    assert_eq!(backstop_code("NP013"), Some(StoreCode::SourceRowsExceeded));
    assert_eq!(backstop_code("NP009"), Some(StoreCode::AttemptRunning));
    assert_eq!(backstop_code("P0001"), None);
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_store_session_that_switches_role_is_refused_not_a_crash() {
    // `-c role=…` in the options: the session's login is not its current role, so the server
    // hides the session's own start, which identifies it after a lost acknowledgement.
    let e = Env::new().await;
    e.admin
        .batch_execute(&in_schema(ROLES_SQL, &e))
        .await
        .expect("the reviewed roles apply");
    let mut endpoint = e.endpoint();
    endpoint.config.options("-c role=dpone_np_scheduler");
    let store = PgControlStore::new(endpoint).expect("store");
    let env = uuid(1, 1);
    let err = store
        .record_trust(&policy(&env, b"policy-A", 1, limits(|_| {})))
        .await
        .expect_err("refused at open");
    assert_eq!(err.code, StoreCode::Unavailable, "{err:?}");
    assert!(err.message.contains("SET ROLE"), "{}", err.message);
}

/// Each privilege that would let a runtime login change the store around the protocol is
/// refused on its own, at the first connection and before any operation, naming what the
/// session could do (never the login): `UPDATE`, `DELETE`, `TRUNCATE`, `TRIGGER`, `REFERENCES`
/// on a table, `UPDATE` of one column, `CREATE` on the schema, the superuser attribute. The
/// same login is accepted once each is revoked.
#[tokio::test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn each_privilege_that_could_alter_the_store_is_refused_on_its_own() {
    let e = Env::new().await;
    e.admin
        .batch_execute(&in_schema(ROLES_SQL, &e))
        .await
        .expect("the reviewed roles apply");
    // A login of its own (roles are the server's, and other tests log in as the others).
    let login = "dpone_np_t_privileges";
    let password = member_login(&e, login, "dpone_np_platform").await;
    let probe = || async { store_logged_in(&e, login, &password).verify_catalog().await };
    let s = &e.schema;
    let cases = [
        (
            format!("GRANT UPDATE ON \"{s}\".np_reservation TO {login}"),
            format!("REVOKE UPDATE ON \"{s}\".np_reservation FROM {login}"),
            "UPDATE",
        ),
        (
            format!("GRANT DELETE ON \"{s}\".np_settlement TO {login}"),
            format!("REVOKE DELETE ON \"{s}\".np_settlement FROM {login}"),
            "DELETE",
        ),
        (
            format!("GRANT TRUNCATE ON \"{s}\".np_run_claim TO {login}"),
            format!("REVOKE TRUNCATE ON \"{s}\".np_run_claim FROM {login}"),
            "TRUNCATE",
        ),
        (
            format!("GRANT TRIGGER ON \"{s}\".np_participant_identity TO {login}"),
            format!("REVOKE TRIGGER ON \"{s}\".np_participant_identity FROM {login}"),
            "TRIGGER",
        ),
        (
            format!("GRANT REFERENCES ON \"{s}\".np_trust_revision TO {login}"),
            format!("REVOKE REFERENCES ON \"{s}\".np_trust_revision FROM {login}"),
            "REFERENCES",
        ),
        (
            format!("GRANT UPDATE (outcome) ON \"{s}\".np_settlement TO {login}"),
            format!("REVOKE UPDATE (outcome) ON \"{s}\".np_settlement FROM {login}"),
            "UPDATE",
        ),
        (
            format!("GRANT CREATE ON SCHEMA \"{s}\" TO {login}"),
            format!("REVOKE CREATE ON SCHEMA \"{s}\" FROM {login}"),
            "CREATE",
        ),
        (
            format!("ALTER ROLE {login} SUPERUSER"),
            format!("ALTER ROLE {login} NOSUPERUSER"),
            "superuser",
        ),
    ];
    probe().await.expect("the platform login as provisioned");
    for (grant, revoke, what) in &cases {
        e.admin.batch_execute(grant).await.expect("grant");
        let err = probe().await.expect_err(grant);
        e.admin.batch_execute(revoke).await.expect("revoke");
        assert_eq!(err.code, StoreCode::SessionPrivileged, "{grant}: {err:?}");
        assert!(err.message.contains(what), "{grant}: {}", err.message);
        assert!(!err.message.contains(login), "the login is never named");
    }
    probe()
        .await
        .expect("accepted again once every privilege is revoked");
    e.drop_schema().await;
}
