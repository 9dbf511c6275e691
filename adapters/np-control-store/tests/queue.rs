//! Group admission through the queue, against the real server: the requests waiting for an
//! environment's lock are decided by its holder in one transaction, in arrival order, with
//! exactly the answers one-at-a-time admission gives; an outcome is believed only when the
//! store's rows agree; another session's malformed request, a decider of another identity and a
//! requester that stopped waiting never change this session's answer. A settlement takes no
//! turn at the lock (one read and one insert; the primary key decides between concurrent
//! ones), and one another session queued is still decided by the holder.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`). A test holds the environment's lock
//! from its own session so that the admissions under test queue behind it, then releases it.

mod support;

use dpone_adapter_np_control_store::queue::{
    OUTCOME_SCHEMA, QueuedOutcome, Verdict, parse_outcome, parse_request, to_bytes,
};
use dpone_adapter_np_control_store::*;
use std::sync::Arc;
use std::time::Duration;
use support::*;
use tokio_postgres::Client;

/// The environment lock's key, as the store and the backstop compute it.
fn lock_key(env: &Uuid) -> i64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(format!("dpone.np-control-store.lock:{}", env.as_str()).as_bytes());
    i64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

/// Waits until `n` sessions wait for `key`.
async fn until_waiting(admin: &Client, key: i64, n: i64) {
    let (hi, lo) = (
        i64::from(((key as u64) >> 32) as u32),
        i64::from(key as u32),
    );
    for _ in 0..2_000 {
        let waiting: i64 = admin
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted \
                 AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                &[&hi, &lo],
            )
            .await
            .expect("pg_locks")
            .get(0);
        if waiting >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("{n} sessions never queued for the lock");
}

/// Every outcome row with its request's sequence number, in arrival order.
async fn outcomes(e: &Env) -> Vec<(i64, QueuedOutcome)> {
    let rows = e
        .admin
        .query(
            &format!(
                "SELECT r.request_seq, o.outcome FROM \"{s}\".np_admission_outcome o \
                 JOIN \"{s}\".np_admission_request r USING (request_id) ORDER BY r.request_seq",
                s = e.schema
            ),
            &[],
        )
        .await
        .expect("outcomes");
    rows.iter()
        .map(|r| (r.get(0), parse_outcome(r.get(1)).expect("a valid outcome")))
        .collect()
}

struct Setup {
    env: Uuid,
    auth: Authenticated,
    grant: GrantRegistration,
    store: PgControlStore,
}

/// One execution pool whose policy allows `attempts` attempts, ten member workloads, in
/// environment `n` (advisory locks are the database's: each test has its own environment, so
/// tests running at once never queue behind each other's locks).
async fn setup(e: &Env, n: u64, attempts: i64) -> Setup {
    let env = uuid(1, 0x900 + n);
    let store = e.store();
    let ceilings = limits(|l| l.attempts = attempts);
    store
        .record_trust(&policy(&env, b"policy-A", 1, ceilings))
        .await
        .expect("trust");
    let auth = auth(&store, &env).await;
    let grant = execution_grant(
        &env,
        &uuid(2, 1),
        &uuid(3, 1),
        &uuid(4, 1),
        ceilings,
        workloads(0..10, ceilings),
    );
    register_and_select(&store, &auth, &grant).await;
    Setup {
        env,
        auth,
        grant,
        store,
    }
}

/// A session of its own that holds the environment's lock `key`.
async fn holding(e: &Env, key: i64) -> Client {
    let c = e.session().await;
    c.batch_execute(&format!("SELECT pg_advisory_lock({key})"))
        .await
        .expect("hold the lock");
    c
}

/// Releases the lock `key` that `c` holds.
async fn release(c: &Client, key: i64) {
    c.batch_execute(&format!("SELECT pg_advisory_unlock({key})"))
        .await
        .expect("release");
}

/// Another session's request `id` of `kind`, queued directly (not by a store) with the
/// `decider` and record given, claiming process id 1 and the time `claimed_at` (the server
/// replaces both).
async fn queue_directly(
    e: &Env,
    c: &Client,
    env: &Uuid,
    (id, kind, decider): (&str, &str, &str),
    record: &[u8],
    claimed_at: &str,
) {
    c.execute(
        &format!(
            "INSERT INTO \"{}\".np_admission_request (request_id, environment_id, kind, \
             decider, requester_pid, request, requested_at_utc) \
             VALUES ($1::text::uuid, $2::text::uuid, $3, $4, 1, $5, $6::text::timestamptz)",
            e.schema
        ),
        &[&id, &env.as_str(), &kind, &decider, &record, &claimed_at],
    )
    .await
    .expect("queue directly");
}

/// `c` waits for the lock `key` and releases it at once.
fn wait_for_lock(c: Arc<Client>, key: i64) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        c.batch_execute(&format!(
            "SELECT pg_advisory_lock({key}); SELECT pg_advisory_unlock({key})"
        ))
        .await
        .expect("waited for the lock");
    })
}

/// `workload`'s first attempt admitted by a store of its own, once it is the `nth` session
/// waiting for the lock `key`.
async fn queued_admission(
    e: &Env,
    s: &Setup,
    workload: &str,
    key: i64,
    nth: i64,
) -> tokio::task::JoinHandle<Result<Reservation>> {
    let store = Arc::new(e.store());
    let (auth, req) = (s.auth.clone(), admission(&s.grant, workload, "a1", 1, 1));
    let task = tokio::spawn(async move { store.admit(&auth, &req).await });
    until_waiting(&e.admin, key, nth).await;
    task
}

/// A decider of its own identity that denies every request.
struct DenyAll;

impl PoolDecider for DenyAll {
    fn identity(&self) -> &str {
        "test.deny-all"
    }
    fn admits(&self, _facts: &[u8], _pool: &PoolStatus) -> bool {
        false
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn waiting_admissions_are_decided_in_one_batch_in_arrival_order_with_one_at_a_time_answers() {
    let e = Env::new().await;
    let s = setup(&e, 1, 3).await;
    let key = lock_key(&s.env);
    let holder = holding(&e, key).await;
    // Six admissions queue one after another behind the held lock; three attempts are left.
    let mut tasks = Vec::new();
    for i in 0..6 {
        tasks.push(queued_admission(&e, &s, &format!("w{i}"), key, i + 1).await);
    }
    release(&holder, key).await;
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("task"));
    }
    // One at a time in arrival order: the first three are admitted, the rest refused with the
    // pool's exceeded code and nothing else.
    for (i, r) in results.iter().enumerate() {
        match r {
            Ok(res) => assert!(i < 3, "admission {i} was admitted: {res:?}"),
            Err(err) => {
                assert!(i >= 3, "admission {i} was refused: {err}");
                assert_eq!(err.code, StoreCode::AttemptsExceeded);
            }
        }
    }
    // The first in line decided all six in one transaction; each outcome says so.
    let out = outcomes(&e).await;
    assert_eq!(out.len(), 6);
    assert!(out.iter().all(|(_, o)| o.batch == 6), "{out:?}");
    for (i, (_, o)) in out.iter().enumerate() {
        match (&o.verdict, i < 3) {
            (Verdict::Admitted { pool_before, .. }, true) => {
                assert_eq!(
                    pool_before.attempts, i as i64,
                    "decided on the pool as left"
                )
            }
            (Verdict::Refused { code, .. }, false) => {
                assert_eq!(code, "DPONE_NP_STORE_ATTEMPTS_EXCEEDED")
            }
            (v, _) => panic!("outcome {i}: {v:?}"),
        }
    }
    let pool = s
        .store
        .pool_status(&execution_pool(&s.env, &uuid(2, 1)))
        .await
        .expect("pool");
    assert_eq!(pool.attempts, 3);
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_forged_admitted_outcome_is_refused_and_nothing_is_reserved() {
    let e = Env::new().await;
    let s = setup(&e, 2, 10).await;
    let key = lock_key(&s.env);
    let rogue = holding(&e, key).await;
    let task = queued_admission(&e, &s, "w0", key, 1).await;
    // The lock's holder writes an outcome naming a reservation that does not exist.
    let request: (String, Vec<u8>) = {
        let r = rogue
            .query_one(
                &format!(
                    "SELECT request_id::text, request FROM \"{}\".np_admission_request",
                    e.schema
                ),
                &[],
            )
            .await
            .expect("the queued request");
        (r.get(0), r.get(1))
    };
    assert!(parse_request(&request.1).is_ok());
    let forged = to_bytes(&QueuedOutcome {
        schema: OUTCOME_SCHEMA.to_owned(),
        batch: 2,
        verdict: Verdict::Admitted {
            reservation_id: Sha256Digest::of(b"no such reservation").as_str().to_owned(),
            pool_before: Default::default(),
        },
    });
    rogue
        .execute(
            &format!(
                "INSERT INTO \"{}\".np_admission_outcome (request_id, outcome, decided_at_utc) \
                 VALUES ($1::text::uuid, $2, now())",
                e.schema
            ),
            &[&request.0, &forged],
        )
        .await
        .expect("forged outcome");
    release(&rogue, key).await;
    let err = task.await.expect("task").expect_err("a forged outcome");
    assert_eq!(err.code, StoreCode::StoredStateInvalid);
    let pool = s
        .store
        .pool_status(&execution_pool(&s.env, &uuid(2, 1)))
        .await
        .expect("pool");
    assert_eq!(pool.attempts, 0);
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn another_sessions_malformed_request_is_refused_alone_and_its_session_is_stamped_by_the_server()
 {
    let e = Env::new().await;
    let s = setup(&e, 3, 10).await;
    let key = lock_key(&s.env);
    let holder = holding(&e, key).await;
    let honest = queued_admission(&e, &s, "w0", key, 1).await;
    // A rogue session queues garbage in the honest decider's name, claiming another session's
    // process id, and waits behind the honest admission.
    let rogue = Arc::new(e.session().await);
    queue_directly(
        &e,
        &rogue,
        &s.env,
        (
            "00000000-0000-4000-8000-0000000000ee",
            "admit",
            "dpone.np.store-checks-only.v1",
        ),
        b"{}",
        "2000-01-01",
    )
    .await;
    let stamped: (i32, i32, bool) = {
        let r = rogue
            .query_one(
                &format!(
                    "SELECT requester_pid, pg_backend_pid(), requested_at_utc > '2001-01-01' \
                     FROM \"{}\".np_admission_request \
                     WHERE request_id = '00000000-0000-4000-8000-0000000000ee'",
                    e.schema
                ),
                &[],
            )
            .await
            .expect("stamp");
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!(
        stamped.0, stamped.1,
        "the server names the requesting session"
    );
    assert!(stamped.2, "the server stamps the time");
    let rogue_wait = wait_for_lock(rogue.clone(), key);
    until_waiting(&e.admin, key, 2).await;
    release(&holder, key).await;
    let r = honest.await.expect("task").expect("the honest admission");
    assert_eq!(r.workload.as_str(), "w0");
    rogue_wait.await.expect("rogue waited");
    let out = outcomes(&e).await;
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(matches!(out[0].1.verdict, Verdict::Admitted { .. }));
    match &out[1].1.verdict {
        Verdict::Refused { code, .. } => assert_eq!(code, "DPONE_NP_STORE_STORED_STATE_INVALID"),
        v => panic!("the garbage was decided: {v:?}"),
    }
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_waiter_naming_another_decider_and_a_requester_that_left_are_never_decided_by_the_holder()
{
    let e = Env::new().await;
    let s = setup(&e, 4, 10).await;
    let key = lock_key(&s.env);
    let holder = holding(&e, key).await;
    // A requester that queued and left: its request stays in the table, its session is gone.
    {
        let left = e.session().await;
        queue_directly(
            &e,
            &left,
            &s.env,
            (
                "00000000-0000-4000-8000-0000000000ff",
                "admit",
                "dpone.np.store-checks-only.v1",
            ),
            b"{}",
            "2000-01-01",
        )
        .await;
    }
    let checks_only = queued_admission(&e, &s, "w0", key, 1).await;
    let store = Arc::new(e.store());
    let (auth, req) = (s.auth.clone(), admission(&s.grant, "w1", "a1", 1, 1));
    let denying =
        tokio::spawn(async move { store.admit_decided(&auth, &req, b"{}", &DenyAll).await });
    until_waiting(&e.admin, key, 2).await;
    release(&holder, key).await;
    checks_only.await.expect("task").expect("admitted");
    // Decided by its own decider (the holder's would have admitted it).
    match denying.await.expect("task").expect("decided") {
        Admission::Denied { .. } => {}
        other => panic!("decided by another identity: {other:?}"),
    }
    let out = outcomes(&e).await;
    assert_eq!(
        out.len(),
        2,
        "the requester that left is never decided: {out:?}"
    );
    assert!(out.iter().all(|(_, o)| o.batch == 1), "{out:?}");
    e.drop_schema().await;
}

/// A pool of environment `n` (ten attempts) where workload `w0`'s first attempt is admitted,
/// then the environment's lock held by a session of its own: the setup, the lock's key, the
/// reservation and the holding session.
async fn admitted_then_held(e: &Env, n: u64) -> (Setup, i64, Reservation, Client) {
    let s = setup(e, n, 10).await;
    let key = lock_key(&s.env);
    let first = s
        .store
        .admit(&s.auth, &admission(&s.grant, "w0", "a1", 5, 5))
        .await
        .expect("the first attempt");
    let holder = holding(e, key).await;
    (s, key, first, holder)
}

/// A settlement of `reservation` with `rows` source rows measured.
fn settlement(reservation: &Reservation, rows: i64, outcome: AttemptOutcome) -> Settlement {
    Settlement {
        reservation_id: reservation.reservation_id.clone(),
        measured_source_rows: rows,
        measured_source_bytes: 1,
        measured_http_bytes: 7,
        outcome,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_settlement_takes_no_turn_at_the_lock_and_the_admission_queued_after_it_sees_it() {
    let e = Env::new().await;
    let (s, key, first, holder) = admitted_then_held(&e, 5).await;
    // The lock is held by another session for the whole settlement: it must not wait for it.
    let settled = tokio::time::timeout(
        Duration::from_secs(30),
        s.store
            .settle(&settlement(&first, 3, AttemptOutcome::Succeeded)),
    )
    .await
    .expect("the settlement waited for the environment lock")
    .expect("settled");
    assert_eq!(settled, Settled::Recorded);
    // The workload's next attempt, queued after the settlement returned, is decided on a pool
    // where the first attempt is resolved (not refused as still running).
    let store = Arc::new(e.store());
    let (auth, req) = (s.auth.clone(), admission(&s.grant, "w0", "a2", 5, 5));
    let next = tokio::spawn(async move { store.admit(&auth, &req).await });
    until_waiting(&e.admin, key, 1).await;
    release(&holder, key).await;
    let second = next.await.expect("task").expect("the next attempt");
    assert_eq!(second.attempt.as_str(), "a2");
    // Nothing about the settlement went through the queue.
    let queued: i64 = e
        .admin
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{}\".np_admission_request WHERE kind = 'settle'",
                e.schema
            ),
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(queued, 0);
    // The same settlement again reopens; other measurements conflict; more than reserved is
    // refused; an unknown reservation is refused; nothing of these is written.
    assert_eq!(
        s.store
            .settle(&settlement(&first, 3, AttemptOutcome::Succeeded))
            .await
            .expect("again"),
        Settled::Reopened
    );
    let conflict = s
        .store
        .settle(&settlement(&first, 4, AttemptOutcome::Succeeded))
        .await
        .expect_err("other measurements");
    assert_eq!(conflict.code, StoreCode::SettlementConflict);
    let over = s
        .store
        .settle(&settlement(&second, 6, AttemptOutcome::Failed))
        .await
        .expect_err("more than reserved");
    assert_eq!(over.code, StoreCode::SettleExceedsReservation);
    let mut unknown = settlement(&second, 1, AttemptOutcome::Failed);
    unknown.reservation_id =
        Sha256Digest::parse("reservation_id", &format!("sha256:{}", "0".repeat(64)))
            .expect("digest");
    let unknown = s.store.settle(&unknown).await.expect_err("unknown");
    assert_eq!(unknown.code, StoreCode::ReservationUnknown);
    let settlements: i64 = e
        .admin
        .query_one(
            &format!("SELECT count(*) FROM \"{}\".np_settlement", e.schema),
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(settlements, 1);
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn concurrent_settlements_of_one_reservation_record_exactly_one() {
    let e = Env::new().await;
    let s = setup(&e, 6, 10).await;
    for (round, workload) in ["w1", "w2", "w3"].iter().enumerate() {
        let r = s
            .store
            .admit(&s.auth, &admission(&s.grant, workload, "a1", 5, 5))
            .await
            .expect("admitted");
        // Eight stores settle at once: in round 0 all with the same measurements, then half
        // with other measurements.
        let gate = Arc::new(tokio::sync::Barrier::new(8));
        let mut tasks = Vec::new();
        for i in 0..8 {
            let store = e.store();
            let rows = if round > 0 && i % 2 == 1 { 2 } else { 1 };
            let mine = settlement(&r, rows, AttemptOutcome::Succeeded);
            let gate = gate.clone();
            tasks.push(tokio::spawn(async move {
                store.verify_catalog().await.expect("connected");
                gate.wait().await;
                (rows, store.settle(&mine).await)
            }));
        }
        let mut answers = Vec::new();
        for t in tasks {
            answers.push(t.await.expect("task"));
        }
        let recorded: Vec<i64> = answers
            .iter()
            .filter(|(_, a)| matches!(a, Ok(Settled::Recorded)))
            .map(|(rows, _)| *rows)
            .collect();
        assert_eq!(recorded.len(), 1, "round {round}: {answers:?}");
        let stored: i64 = e
            .admin
            .query_one(
                &format!(
                    "SELECT measured_source_rows FROM \"{}\".np_settlement WHERE reservation_id = $1",
                    e.schema
                ),
                &[&r.reservation_id.as_str()],
            )
            .await
            .expect("the settlement")
            .get(0);
        assert_eq!(stored, recorded[0]);
        for (rows, a) in &answers {
            match a {
                Ok(Settled::Recorded) => {}
                Ok(Settled::Reopened) => assert_eq!(*rows, stored, "round {round}"),
                Err(err) => {
                    assert_ne!(*rows, stored, "round {round}: {err}");
                    assert_eq!(err.code, StoreCode::SettlementConflict);
                }
            }
        }
    }
    e.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_settlement_another_session_queued_is_still_decided_by_the_holder() {
    use dpone_adapter_np_control_store::queue::{
        Ask, QueuedRequest, QueuedSettlement, REQUEST_SCHEMA, SETTLEMENT_DECIDER,
    };
    let e = Env::new().await;
    let (s, key, first, holder) = admitted_then_held(&e, 7).await;
    let honest = queued_admission(&e, &s, "w1", key, 1).await;
    // Another session (as an earlier release did) queues a settlement and waits for the lock.
    let other = Arc::new(e.session().await);
    let record = to_bytes(&QueuedRequest {
        schema: REQUEST_SCHEMA.to_owned(),
        ask: Ask::Settle(QueuedSettlement {
            reservation_id: first.reservation_id.as_str().to_owned(),
            measured_source_rows: 2,
            measured_source_bytes: 1,
            measured_http_bytes: 0,
            outcome: "succeeded".to_owned(),
        }),
    });
    queue_directly(
        &e,
        &other,
        &s.env,
        (
            "00000000-0000-4000-8000-0000000000aa",
            "settle",
            SETTLEMENT_DECIDER,
        ),
        &record,
        "2000-01-01",
    )
    .await;
    let other_wait = wait_for_lock(other.clone(), key);
    until_waiting(&e.admin, key, 2).await;
    release(&holder, key).await;
    honest.await.expect("task").expect("the honest admission");
    other_wait.await.expect("waited");
    // The first attempt's own outcome, then the batch of two: the honest admission and the
    // other session's settlement.
    let out = outcomes(&e).await;
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(matches!(out[1].1.verdict, Verdict::Admitted { .. }));
    assert!(
        matches!(out[2].1.verdict, Verdict::Settled { reopened: false }),
        "{out:?}"
    );
    assert!(out[1..].iter().all(|(_, o)| o.batch == 2), "{out:?}");
    // The holder recorded it; the store's own settlement of it with the same measurements
    // reopens.
    let mut same = settlement(&first, 2, AttemptOutcome::Succeeded);
    same.measured_http_bytes = 0;
    assert_eq!(
        s.store.settle(&same).await.expect("the same settlement"),
        Settled::Reopened
    );
    e.drop_schema().await;
}
