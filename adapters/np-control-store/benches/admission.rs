//! Benchmarks of protected admission on a real PostgreSQL server (a bench binary, not a timed
//! test).
//!
//! ```text
//! cargo bench -p dpone-adapter-np-control-store --bench admission
//! ```
//!
//! 1. **One admission** (criterion, `admit_one`): one client, an uncontended pool; each
//!    iteration is one queued admission over a verify-full TLS connection (group admission,
//!    alone): the request appended, the environment lock and the outcome read in one flight;
//!    BEGIN SERIALIZABLE, the trust revision, the batch and the grant's reads in the next; the
//!    decision on that read; the reservation and outcome inserts, COMMIT and the unlock in the
//!    last. The decision here is the store's own (`admit`, which applies the same rule as the
//!    scope component); the component's own cost inside the transaction is microseconds (the
//!    decision bench). Pools are set up outside the measured time (a pool holds at most 128
//!    attempts, the spec's ceiling, so fresh campaigns are made as needed).
//! 2. **64-way contention** on one pool: 64 clients, each on its own connection, released
//!    together, two admissions each (128, the pool's whole attempt ceiling; the pool must end
//!    charged with exactly 128), for `ROUNDS` fresh pools; prints admissions per second and
//!    p50/p99 of one admission under contention, plus p50/p99 uncontended, and how the queue
//!    grouped the run's requests (mean batch of admissions and of settlements, the largest
//!    batch; settlements no longer queue, so their count is 0), as one JSON object.
//! 3. **The workload layer under contention**: one more round of the same 128 attempts where
//!    every workload allows only 64 of the pool; it must admit exactly 64
//!    (`workload_limit_round_admitted`), the rest refused `DPONE_NP_STORE_ATTEMPTS_EXCEEDED`.
//! 4. **The server's floor for a batch** (`group_floor`): 64 admissions' reservation inserts in
//!    one critical section, then their settlements, with no queue, decisions or wake-ups. With
//!    `DPONE_BENCH_FLOOR_WITHOUT_BACKSTOP=1` the floor's session skips every trigger (the
//!    backstop's share of the floor; the output says `"backstop":"off …"`). With
//!    `DPONE_BENCH_FLOOR_SET_BACKSTOP=1` the floor measures a **prototype** of a set-based
//!    backstop (`benches/prototype/set-backstop.sql`, applied to the bench's own schema only:
//!    the reservation checks run once per statement over its transition table) and writes each
//!    batch's 64 reservations in one multi-row `INSERT`; the output says `"backstop":"set
//!    (prototype …)"`. Neither knob is the product's DDL.
//!
//! Without a configured server it fails with the reason (it measures nothing).
//!
//! Figures, with the comparison to the code before group admission in the same session, are in
//! `docs/nonproduction-authority.md` ("Admission under contention").
#![allow(clippy::print_stdout, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use criterion::Criterion;
use dpone_adapter_np_control_store::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::*;

const CLIENTS: usize = 64;
const ROUNDS: u64 = 8;

static POOLS: AtomicU64 = AtomicU64::new(1);

struct Setup {
    env: Env,
    admin: PgControlStore,
    auth: Authenticated,
}

async fn setup() -> Setup {
    let env = Env::new().await;
    let admin = env.store();
    admin.verify_catalog().await.expect("reviewed catalog");
    admin
        .record_trust(&policy(&uuid(1, 1), b"policy", 1, CEILINGS))
        .await
        .expect("trust");
    let auth = auth(&admin, &uuid(1, 1)).await;
    Setup { env, admin, auth }
}

/// A fresh campaign pool: one execution grant over 64 workloads, its request selected.
async fn fresh_pool(s: &Setup) -> GrantRegistration {
    let id = POOLS.fetch_add(1, Ordering::SeqCst);
    let g = execution_grant(
        &uuid(1, 1),
        &uuid(2, id),
        &uuid(3, id),
        &uuid(4, id),
        CEILINGS,
        workloads(0..64, CEILINGS),
    );
    register_and_select(&s.admin, &s.auth, &g).await;
    g
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() {
    if !cfg!(dpone_live_pg) {
        eprintln!(
            "admission bench: no PostgreSQL server configured (set DPONE_TEST_PG_URL or run .ci/start-postgres)"
        );
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("runtime");
    let s = rt.block_on(setup());

    // 1. One admission, uncontended (criterion).
    let mut uncontended: Vec<Duration> = Vec::new();
    let mut c = Criterion::default()
        .sample_size(20)
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    c.bench_function("admit_one", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                let mut done = 0u64;
                while done < iters {
                    let g = fresh_pool(&s).await;
                    for k in 0..128u64 {
                        if done == iters {
                            break;
                        }
                        let req = admission(&g, &format!("w{}", k % 64), &format!("a{k}"), 1, 1);
                        // Settle the workload's first attempt before its second (one RUNNING
                        // attempt per workload), outside the measured time.
                        if k >= 64 {
                            let first = reservation_id(
                                &uuid(1, 1),
                                &g.campaign,
                                Phase::Execution,
                                &req.workload,
                                &AttemptId::new(&format!("a{}", k - 64)).unwrap(),
                            );
                            s.admin
                                .settle(&Settlement {
                                    reservation_id: first,
                                    measured_source_rows: 1,
                                    measured_source_bytes: 1,
                                    measured_http_bytes: 0,
                                    outcome: AttemptOutcome::Succeeded,
                                })
                                .await
                                .expect("settle");
                        }
                        let t = Instant::now();
                        s.admin.admit(&s.auth, &req).await.expect("admitted");
                        let d = t.elapsed();
                        uncontended.push(d);
                        total += d;
                        done += 1;
                    }
                }
                total
            })
        })
    });
    c.final_summary();

    // 2. 64-way contention on one pool.
    let report = rt.block_on(async {
        let stores: Vec<Arc<PgControlStore>> =
            (0..CLIENTS).map(|_| Arc::new(s.env.store())).collect();
        // Open every connection before timing.
        for st in &stores {
            st.current_trust(&uuid(1, 1)).await.expect("connect");
        }
        let mut latencies = Vec::new();
        let mut wall = Duration::ZERO;
        let mut admitted = 0usize;
        for _ in 0..ROUNDS {
            let g = Arc::new(fresh_pool(&s).await);
            let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
            let start = Instant::now();
            let mut tasks = Vec::new();
            for (i, st) in stores.iter().enumerate() {
                let (st, g, b, a) = (st.clone(), g.clone(), barrier.clone(), s.auth.clone());
                tasks.push(tokio::spawn(async move {
                    b.wait().await;
                    let mut out = Vec::new();
                    // Two attempts per client on its own workload: 128 in all, the pool's
                    // attempt ceiling. The second waits for the first to be settled.
                    for k in 0..2 {
                        let req = admission(&g, &format!("w{i}"), &format!("c{k}"), 1, 1);
                        let t = Instant::now();
                        let r = st.admit(&a, &req).await.expect("admitted");
                        out.push(t.elapsed());
                        st.settle(&Settlement {
                            reservation_id: r.reservation_id,
                            measured_source_rows: 1,
                            measured_source_bytes: 1,
                            measured_http_bytes: 0,
                            outcome: AttemptOutcome::Succeeded,
                        })
                        .await
                        .expect("settle");
                    }
                    out
                }));
            }
            for t in tasks {
                let l = t.await.expect("client");
                admitted += l.len();
                latencies.extend(l);
            }
            wall += start.elapsed();
            let pool = s
                .admin
                .pool_status(&execution_pool(&uuid(1, 1), &g.campaign))
                .await
                .expect("pool");
            assert_eq!(pool.attempts, 128, "exactly the ceiling");
        }
        // One more round where the workload layer binds: every workload allows 64 attempts of
        // the pool, so 128 contended attempts must admit exactly 64, as one at a time would.
        let id = POOLS.fetch_add(1, Ordering::SeqCst);
        let g = Arc::new(execution_grant(
            &uuid(1, 1),
            &uuid(2, id),
            &uuid(3, id),
            &uuid(4, id),
            CEILINGS,
            workloads(0..64, limits(|l| l.attempts = 64)),
        ));
        register_and_select(&s.admin, &s.auth, &g).await;
        let barrier = Arc::new(tokio::sync::Barrier::new(CLIENTS));
        let mut tasks = Vec::new();
        for (i, st) in stores.iter().enumerate() {
            let (st, g, b, a) = (st.clone(), g.clone(), barrier.clone(), s.auth.clone());
            tasks.push(tokio::spawn(async move {
                b.wait().await;
                let mut admitted = 0usize;
                for k in 0..2 {
                    let req = admission(&g, &format!("w{i}"), &format!("c{k}"), 1, 1);
                    match st.admit(&a, &req).await {
                        Ok(r) => {
                            admitted += 1;
                            st.settle(&Settlement {
                                reservation_id: r.reservation_id,
                                measured_source_rows: 1,
                                measured_source_bytes: 1,
                                measured_http_bytes: 0,
                                outcome: AttemptOutcome::Succeeded,
                            })
                            .await
                            .expect("settle");
                        }
                        Err(e) => assert_eq!(e.code, StoreCode::AttemptsExceeded, "{e}"),
                    }
                }
                admitted
            }));
        }
        let mut workload_bound = 0usize;
        for t in tasks {
            workload_bound += t.await.expect("client");
        }
        assert_eq!(workload_bound, 64, "the workload layer admits exactly its ceiling");
        latencies.sort();
        uncontended.sort();
        // How the queue grouped them: the holders' batch sizes, per request.
        let batches = s
            .env
            .admin
            .query(
                &format!(
                    "SELECT r.kind, o.outcome FROM \"{s}\".np_admission_outcome o \
                     JOIN \"{s}\".np_admission_request r USING (request_id)",
                    s = s.env.schema
                ),
                &[],
            )
            .await
            .expect("outcomes");
        let mut sizes: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
        for row in &batches {
            let o = queue::parse_outcome(row.get(1)).expect("outcome");
            sizes[usize::from(row.get::<_, &str>(0) == "settle")].push(o.batch);
        }
        let mean = |v: &Vec<u32>| v.iter().map(|&b| f64::from(b)).sum::<f64>() / v.len().max(1) as f64;
        let grouped = format!(
            "\"admit_requests\":{},\"admit_mean_batch\":{:.1},\"settle_requests\":{},\
             \"settle_mean_batch\":{:.1},\"max_batch\":{}",
            sizes[0].len(),
            mean(&sizes[0]),
            sizes[1].len(),
            mean(&sizes[1]),
            sizes.iter().flatten().max().copied().unwrap_or(0)
        );
        format!(
            "{{\"clients\":{CLIENTS},\"rounds\":{ROUNDS},\"admissions\":{admitted},\
             \"admissions_per_second_contended\":{:.1},\
             \"contended_p50_ms\":{:.2},\"contended_p99_ms\":{:.2},\
             \"uncontended_samples\":{},\"uncontended_p50_ms\":{:.2},\"uncontended_p99_ms\":{:.2},\
             \"workload_limit_round_admitted\":{workload_bound},\"workload_limit\":64,{grouped},\
             \"note\":\"contended wall time includes each client's settle between its two admissions\"}}",
            admitted as f64 / wall.as_secs_f64(),
            pct(&latencies, 0.50),
            pct(&latencies, 0.99),
            uncontended.len(),
            pct(&uncontended, 0.50),
            pct(&uncontended, 0.99),
        )
    });
    println!("{report}");
    // 4. The floor of group admission on this server with today's backstop.
    let floor = rt.block_on(group_floor(&s));
    println!("{floor}");
    rt.block_on(s.env.drop_schema());
}

/// The environment lock's key, computed as the store computes it.
fn env_lock_key(environment: &Uuid) -> i64 {
    use sha2::Digest as _;
    let d = sha2::Sha256::digest(
        format!("dpone.np-control-store.lock:{}", environment.as_str()).as_bytes(),
    );
    i64::from_be_bytes(d[..8].try_into().expect("eight bytes"))
}

/// What one critical section deciding a whole batch would cost the server: for each of
/// `ROUNDS` fresh pools, on one connection, the 64 workloads' first attempts admitted in one
/// SERIALIZABLE transaction under the environment lock (the lock, BEGIN and the batch's reads —
/// trust, registration, ownership, every workload's ceilings, the membership ceiling, the pool,
/// the batch's duplicates — in one flight; then the 64 reservation inserts, each checked by the
/// backstop trigger, COMMIT and the unlock in a second flight), then their 64 settlements the
/// same way, then the second attempts and their settlements. No decision is made (the
/// component's cost is the decision bench's), no request or outcome row is written and no
/// requester is woken: an upper bound for group admission with one row trigger per
/// reservation, not a design. Plain TCP on loopback (the store itself uses TLS).
async fn group_floor(s: &Setup) -> String {
    let env = uuid(1, 1);
    let key = env_lock_key(&env);
    let schema = &s.env.schema;
    let t = |name: &str| format!("\"{schema}\".\"{name}\"");
    let insert_reservation = format!(
        "INSERT INTO {} (reservation_id, environment_id, campaign_id, phase, route, \
         grant_id, grant_digest, trust_revision, workload_id, attempt_id, \
         reserved_source_rows, reserved_source_bytes, reserved_seconds, reserved_at_utc) \
         VALUES ($1, $2::text::uuid, $3::text::uuid, $4, NULL, $5::text::uuid, $6, $7, $8, \
         $9, 1, 1, 60, clock_timestamp())",
        t("np_reservation")
    );
    let insert_settlement = format!(
        "INSERT INTO {} (reservation_id, measured_source_rows, measured_source_bytes, \
         measured_http_bytes, outcome, settled_at_utc) \
         VALUES ($1, 1, 1, 0, 'succeeded', clock_timestamp())",
        t("np_settlement")
    );
    let reads = [
        format!(
            "SELECT revision FROM {} WHERE environment_id = $1::text::uuid \
             ORDER BY revision DESC LIMIT 1",
            t("np_trust_revision")
        ),
        format!(
            "SELECT grant_digest FROM {} WHERE grant_id = $2::text::uuid AND phase = 'execution' \
             AND $1::text IS NOT NULL",
            t("np_registration")
        ),
        format!(
            "SELECT count(*) FROM {} WHERE grant_id = $2::text::uuid AND $1::text IS NOT NULL",
            t("np_activation_selection")
        ),
        format!(
            "SELECT workload_id, max_attempts FROM {} WHERE grant_id = $2::text::uuid \
             AND phase = 'execution' AND $1::text IS NOT NULL",
            t("np_grant_workload")
        ),
        format!(
            "SELECT (SELECT count(*) FROM {m} WHERE environment_id = $1::text::uuid \
               AND campaign_id = $2::text::uuid), count(*), \
               count(*) FILTER (WHERE s.reservation_id IS NULL) \
             FROM {r} x LEFT JOIN {st} s ON s.reservation_id = x.reservation_id \
             WHERE x.environment_id = $1::text::uuid AND x.campaign_id = $2::text::uuid",
            m = t("np_membership"),
            r = t("np_reservation"),
            st = t("np_settlement"),
        ),
    ];
    let admin = &s.env.admin;
    // The backstop's share of the floor: with `DPONE_BENCH_FLOOR_WITHOUT_BACKSTOP=1` the floor's
    // session skips every trigger (`session_replication_role = replica`: the backstop's and the
    // foreign keys'; the test role is a superuser). A measurement knob, never the product.
    let without_backstop = std::env::var_os("DPONE_BENCH_FLOOR_WITHOUT_BACKSTOP").is_some();
    if without_backstop {
        admin
            .batch_execute("SET session_replication_role = replica")
            .await
            .expect("replica role");
    }
    // PROTOTYPE: the reservation backstop checked once per statement, the batch's reservations
    // in one multi-row INSERT (`DPONE_BENCH_FLOOR_SET_BACKSTOP=1`; measurement only).
    let set_backstop = std::env::var_os("DPONE_BENCH_FLOOR_SET_BACKSTOP").is_some();
    if set_backstop {
        let sql = include_str!("prototype/set-backstop.sql")
            .replace("\"dpone_np_control\"", &format!("\"{schema}\""));
        admin.batch_execute(&sql).await.expect("prototype backstop");
    }
    let insert_many = set_backstop.then(|| {
        format!(
            "INSERT INTO {} (reservation_id, environment_id, campaign_id, phase, route, \
             grant_id, grant_digest, trust_revision, workload_id, attempt_id, \
             reserved_source_rows, reserved_source_bytes, reserved_seconds, reserved_at_utc) \
             SELECT u.id, $2::text::uuid, $3::text::uuid, 'execution', NULL, $4::text::uuid, $5, \
             $6, u.w, u.a, 1, 1, 60, clock_timestamp() \
             FROM unnest($1::text[], $7::text[], $8::text[]) AS u(id, w, a)",
            t("np_reservation")
        )
    });
    let mut admit_batches = Vec::new();
    let mut settle_batches = Vec::new();
    let mut wall = Duration::ZERO;
    for _ in 0..ROUNDS {
        let g = fresh_pool(s).await;
        let grant_id = g.grant_id.as_str().to_owned();
        let campaign = g.campaign.as_str().to_owned();
        let digest = Sha256Digest::of(&g.original_bytes).as_str().to_owned();
        let env_s = env.as_str();
        let revision: i64 = admin
            .query_one(&reads[0], &[&env_s])
            .await
            .expect("trust")
            .get(0);
        let ins_r = admin.prepare(&insert_reservation).await.expect("prepare");
        let ins_s = admin.prepare(&insert_settlement).await.expect("prepare");
        for k in 0..2 {
            let ids: Vec<(String, String, String)> = (0..64)
                .map(|i| {
                    let w = WorkloadId::new(&format!("w{i}")).expect("workload");
                    let a = AttemptId::new(&format!("g{k}")).expect("attempt");
                    let id = reservation_id(&env, &g.campaign, Phase::Execution, &w, &a);
                    (
                        id.as_str().to_owned(),
                        w.as_str().to_owned(),
                        a.as_str().to_owned(),
                    )
                })
                .collect();
            // The admissions' critical section.
            let start = Instant::now();
            let lock = format!("SELECT pg_advisory_lock({key})");
            let grant_s = grant_id.as_str();
            let campaign_s = campaign.as_str();
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&env_s, &grant_s];
            let all: Vec<&str> = ids.iter().map(|(id, _, _)| id.as_str()).collect();
            let dup = format!(
                "SELECT count(*) FROM {} WHERE reservation_id = ANY($1)",
                t("np_reservation")
            );
            let pool_params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] =
                [&env_s, &campaign_s];
            let all_params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&all];
            let (l, b, r0, r1, r2, r3, pool, d) = tokio::join!(
                biased;
                admin.batch_execute(&lock),
                admin.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE"),
                admin.query(&reads[0], &params[..1]),
                admin.query(&reads[1], &params),
                admin.query(&reads[2], &params),
                admin.query(&reads[3], &params),
                admin.query(&reads[4], &pool_params),
                admin.query(&dup, &all_params)
            );
            l.expect("lock");
            b.expect("begin");
            for r in [r0, r1, r2, r3, pool, d] {
                r.expect("read");
            }
            let unlock = format!("SELECT pg_advisory_unlock({key})");
            {
                let (ins_r, campaign, grant_id, digest) = (&ins_r, &campaign, &grant_id, &digest);
                let inserts = ids.iter().map(|(id, w, a)| async move {
                    let p: [&(dyn tokio_postgres::types::ToSql + Sync); 9] = [
                        id,
                        &env_s,
                        campaign,
                        &"execution",
                        grant_id,
                        digest,
                        &revision,
                        w,
                        a,
                    ];
                    admin.execute(ins_r, &p).await
                });
                // The prototype's one multi-row insert, or one insert per reservation.
                let inserted = async {
                    let Some(sql) = &insert_many else {
                        return futures_ordered(inserts).await;
                    };
                    let column = |pick: fn(&(String, String, String)) -> &str| -> Vec<&str> {
                        ids.iter().map(pick).collect()
                    };
                    let (id_col, workload_col, attempt_col) = (
                        column(|(id, _, _)| id),
                        column(|(_, w, _)| w),
                        column(|(_, _, a)| a),
                    );
                    let many: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
                        &id_col,
                        &env_s,
                        campaign,
                        grant_id,
                        digest,
                        &revision,
                        &workload_col,
                        &attempt_col,
                    ];
                    vec![admin.execute(sql, &many).await]
                };
                let (written, commit, unlocked) = tokio::join!(
                    biased;
                    inserted,
                    admin.batch_execute("COMMIT"),
                    admin.batch_execute(&unlock)
                );
                for w in written {
                    w.expect("reservation accepted by the backstop");
                }
                commit.expect("commit");
                unlocked.expect("unlock");
            }
            let admitted = start.elapsed();
            admit_batches.push(admitted);
            // The settlements' critical section.
            let start = Instant::now();
            let by_id = format!(
                "SELECT r.reservation_id, s.reservation_id IS NOT NULL FROM {} r \
                 LEFT JOIN {} s ON s.reservation_id = r.reservation_id \
                 WHERE r.reservation_id = ANY($1)",
                t("np_reservation"),
                t("np_settlement")
            );
            let (l, b, found) = tokio::join!(
                biased;
                admin.batch_execute(&lock),
                admin.batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE"),
                admin.query(&by_id, &all_params)
            );
            l.expect("lock");
            b.expect("begin");
            assert_eq!(found.expect("read").len(), 64);
            {
                let inserts = ids.iter().map(|(id, _, _)| {
                    let ins_s = &ins_s;
                    async move { admin.execute(ins_s, &[id]).await }
                });
                let (written, commit, unlocked) = tokio::join!(
                    biased;
                    futures_ordered(inserts),
                    admin.batch_execute("COMMIT"),
                    admin.batch_execute(&unlock)
                );
                for w in written {
                    w.expect("settlement accepted by the backstop");
                }
                commit.expect("commit");
                unlocked.expect("unlock");
            }
            let settled = start.elapsed();
            settle_batches.push(settled);
            wall += admitted + settled;
        }
        let pool = s
            .admin
            .pool_status(&execution_pool(&env, &g.campaign))
            .await
            .expect("pool");
        assert_eq!(pool.attempts, 128, "every batched insert was kept");
        assert_eq!(pool.unresolved, 0, "every batched settlement was kept");
    }
    if without_backstop {
        admin
            .batch_execute("RESET session_replication_role")
            .await
            .expect("reset");
    }
    admit_batches.sort();
    settle_batches.sort();
    let admissions = admit_batches.len() * 64;
    format!(
        "{{\"group_floor\":{{\"backstop\":{},\"batch\":64,\"batches\":{},\
         \"admissions_per_second_with_settlements\":{:.1},\
         \"admit_batch_p50_ms\":{:.2},\"admit_batch_max_ms\":{:.2},\
         \"settle_batch_p50_ms\":{:.2},\"settle_batch_max_ms\":{:.2},\
         \"note\":\"server floor of one critical section per batch: no decision, no request or outcome rows, no wake-ups\"}}}}",
        if without_backstop {
            "\"off (every trigger skipped: DPONE_BENCH_FLOOR_WITHOUT_BACKSTOP)\""
        } else if set_backstop {
            "\"set (prototype, one multi-row insert: DPONE_BENCH_FLOOR_SET_BACKSTOP)\""
        } else {
            "\"on\""
        },
        admit_batches.len(),
        admissions as f64 / wall.as_secs_f64(),
        pct(&admit_batches, 0.5),
        pct(&admit_batches, 1.0),
        pct(&settle_batches, 0.5),
        pct(&settle_batches, 1.0),
    )
}

/// Polls `futures` in order (each is queued on the connection when first polled), so the
/// statements go out in one flight, in order, and returns their results in that order.
async fn futures_ordered<F: std::future::Future>(
    futures: impl Iterator<Item = F>,
) -> Vec<F::Output> {
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = futures.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in pinned.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *o = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}
