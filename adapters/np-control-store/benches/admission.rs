//! Benchmarks of protected admission on a real PostgreSQL server (a bench binary, not a timed
//! test).
//!
//! ```text
//! cargo bench -p dpone-adapter-np-control-store --bench admission
//! ```
//!
//! 1. **One admission** (criterion, `admit_one`): one client, an uncontended pool; each
//!    iteration is one SERIALIZABLE admission transaction over a verify-full TLS connection: the
//!    environment lock, BEGIN and every read in one flight (keyed by the grant's registration,
//!    read before the lock or kept from the store's last admission under that grant), the
//!    decision on that read, then the reservation insert, COMMIT and the unlock in one flight. The decision here is the store's own
//!    (`admit`, which applies the same rule as the scope component); the component's own cost
//!    inside the transaction is microseconds (the decision bench). Pools are set up outside the
//!    measured time (a pool holds at most 128 attempts, the spec's ceiling, so fresh campaigns
//!    are made as needed).
//! 2. **64-way contention** on one pool: 64 clients, each on its own connection, released
//!    together, two admissions each (128, the pool's whole attempt ceiling; the pool must end
//!    charged with exactly 128), for `ROUNDS` fresh pools; prints admissions per second and
//!    p50/p99 of one admission under contention, plus p50/p99 uncontended, as one JSON object.
//! 3. **The workload layer under contention**: one more round of the same 128 attempts where
//!    every workload allows only 64 of the pool; it must admit exactly 64
//!    (`workload_limit_round_admitted`), the rest refused `DPONE_NP_STORE_ATTEMPTS_EXCEEDED`.
//!
//! Without a configured server it fails with the reason (it measures nothing).
//!
//! Figures, with the comparison to the code before the decision moved into the transaction in
//! the same run, are in `docs/nonproduction-authority.md` ("Admission under contention").
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
        format!(
            "{{\"clients\":{CLIENTS},\"rounds\":{ROUNDS},\"admissions\":{admitted},\
             \"admissions_per_second_contended\":{:.1},\
             \"contended_p50_ms\":{:.2},\"contended_p99_ms\":{:.2},\
             \"uncontended_samples\":{},\"uncontended_p50_ms\":{:.2},\"uncontended_p99_ms\":{:.2},\
             \"workload_limit_round_admitted\":{workload_bound},\"workload_limit\":64,\
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
    rt.block_on(s.env.drop_schema());
}
