//! 64 parallel clients, each with its own connection, race for the last units of one pool —
//! attempts, source rows, source bytes and distinct workload membership — across replacement
//! grants, for 20 seeds. The total admitted never exceeds the ceiling; the counts are exact
//! (every refusal carries the pool's exceeded code and nothing else).
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`).

mod support;

use dpone_adapter_np_control_store::*;
use std::sync::Arc;
use support::*;
use tokio::sync::Barrier;

const CLIENTS: usize = 64;
const SEEDS: u64 = 20;
const REPLACEMENTS: u64 = 4;

/// Runs `op(i)` on 64 clients released together; returns each result.
async fn race<T, F, Fut>(stores: &[Arc<PgControlStore>], op: F) -> Vec<Result<T>>
where
    T: Send + 'static,
    F: Fn(usize, Arc<PgControlStore>) -> Fut,
    Fut: std::future::Future<Output = Result<T>> + Send + 'static,
{
    let barrier = Arc::new(Barrier::new(stores.len()));
    let mut tasks = Vec::new();
    for (i, s) in stores.iter().enumerate() {
        let fut = op(i, s.clone());
        let b = barrier.clone();
        tasks.push(tokio::spawn(async move {
            b.wait().await;
            fut.await
        }));
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("client task"));
    }
    out
}

fn tally<T>(results: &[Result<T>], refusal: StoreCode) -> usize {
    for r in results {
        if let Err(e) = r {
            assert_eq!(e.code, refusal, "unexpected refusal: {e}");
        }
    }
    results.iter().filter(|r| r.is_ok()).count()
}

struct Pool {
    campaign: Uuid,
    grants: Vec<GrantRegistration>,
}

/// A fresh campaign pool with `REPLACEMENTS` execution grants over the same 64 workloads, all
/// with the grant limits `l`.
async fn pool(s: &PgControlStore, a: &Authenticated, env: &Uuid, id: u64, l: Limits) -> Pool {
    let campaign = uuid(2, id);
    let mut grants = Vec::new();
    for k in 0..REPLACEMENTS {
        let g = execution_grant(
            env,
            &campaign,
            &uuid(3, id * 100 + k),
            &uuid(4, id * 100 + k),
            l,
            workloads(0..64, CEILINGS),
        );
        let charged = match register_and_select(s, a, &g).await {
            Registered::New {
                membership_charged, ..
            } => membership_charged,
            Registered::Reopened => panic!("a fresh grant"),
        };
        assert_eq!(
            charged,
            if k == 0 { 64 } else { 0 },
            "replacement grants charge nothing new"
        );
        grants.push(g);
    }
    Pool { campaign, grants }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn sixty_four_clients_never_overrun_a_pool_across_replacement_grants() {
    let e = Env::new().await;
    let env = uuid(1, 1);
    let admin = e.store();
    admin.verify_catalog().await.expect("reviewed catalog");
    admin
        .record_trust(&policy(&env, b"policy", 1, CEILINGS))
        .await
        .unwrap();
    let a = auth(&admin, &env).await;
    let stores: Vec<Arc<PgControlStore>> = (0..CLIENTS).map(|_| Arc::new(e.store())).collect();
    for seed in 0..SEEDS {
        // Attempts: `pre` settled attempts already charged, then 64 clients for the rest.
        let ceiling = 10 + (seed * 7) % 50;
        let pre = seed % 5;
        let p = pool(
            &admin,
            &a,
            &env,
            seed * 10 + 1,
            limits(|l| l.attempts = ceiling as i64),
        )
        .await;
        for j in 0..pre {
            let r = admin
                .admit(&a, &admission(&p.grants[0], &format!("w{j}"), "pre", 0, 0))
                .await
                .unwrap();
            admin
                .settle(&Settlement {
                    reservation_id: r.reservation_id,
                    measured_source_rows: 0,
                    measured_source_bytes: 0,
                    measured_http_bytes: 0,
                    outcome: AttemptOutcome::Succeeded,
                })
                .await
                .unwrap();
        }
        let grants = Arc::new(p.grants.clone());
        let auth_token = a.clone();
        let results = race(&stores, |i, s| {
            let (g, a) = (grants.clone(), auth_token.clone());
            async move {
                let grant = &g[i % g.len()];
                s.admit(
                    &a,
                    &admission(grant, &format!("w{i}"), &format!("s{seed}"), 0, 0),
                )
                .await
            }
        })
        .await;
        let admitted = tally(&results, StoreCode::AttemptsExceeded);
        assert_eq!(admitted as u64, ceiling - pre, "seed {seed}: attempts");
        let status = admin
            .pool_status(&execution_pool(&env, &p.campaign))
            .await
            .unwrap();
        assert_eq!(
            status.attempts as u64, ceiling,
            "seed {seed}: attempts charged"
        );

        // Source rows: `pre_rows` already reserved, equal requests of `size` rows.
        let cap = 1_000 + seed as i64 * 37;
        let size = 20 + seed as i64 * 3;
        let pre_rows = seed as i64 * 11;
        let p = pool(
            &admin,
            &a,
            &env,
            seed * 10 + 2,
            limits(|l| l.source_rows = cap),
        )
        .await;
        admin
            .admit(&a, &admission(&p.grants[1], "w63", "pre", pre_rows, 0))
            .await
            .unwrap();
        let grants = Arc::new(p.grants.clone());
        let results = race(&stores[..63], |i, s| {
            let (g, a) = (grants.clone(), auth_token.clone());
            async move {
                s.admit(
                    &a,
                    &admission(&g[i % g.len()], &format!("w{i}"), "r", size, 0),
                )
                .await
            }
        })
        .await;
        let admitted = tally(&results, StoreCode::SourceRowsExceeded) as i64;
        let expected = ((cap - pre_rows) / size).min(63);
        assert_eq!(admitted, expected, "seed {seed}: rows");
        let status = admin
            .pool_status(&execution_pool(&env, &p.campaign))
            .await
            .unwrap();
        assert_eq!(status.reserved_source_rows, pre_rows + expected * size);
        assert!(status.reserved_source_rows <= cap);

        // Source bytes: the same shape on the byte pool.
        let cap_b = 1 << 20;
        let size_b = 30_000 + seed as i64 * 1_009;
        let pre_b = seed as i64 * 4_099;
        let p = pool(
            &admin,
            &a,
            &env,
            seed * 10 + 3,
            limits(|l| l.source_bytes = cap_b),
        )
        .await;
        admin
            .admit(&a, &admission(&p.grants[2], "w63", "pre", 0, pre_b))
            .await
            .unwrap();
        let grants = Arc::new(p.grants.clone());
        let results = race(&stores[..63], |i, s| {
            let (g, a) = (grants.clone(), auth_token.clone());
            async move {
                s.admit(
                    &a,
                    &admission(&g[i % g.len()], &format!("w{i}"), "b", 0, size_b),
                )
                .await
            }
        })
        .await;
        let admitted = tally(&results, StoreCode::SourceBytesExceeded) as i64;
        let expected = ((cap_b - pre_b) / size_b).min(63);
        assert_eq!(admitted, expected, "seed {seed}: bytes");
        let status = admin
            .pool_status(&execution_pool(&env, &p.campaign))
            .await
            .unwrap();
        assert_eq!(status.reserved_source_bytes, pre_b + expected * size_b);
        assert!(status.reserved_source_bytes <= cap_b);

        // Membership: 10 members charged, then 64 replacement grants each adding one new
        // workload under a membership ceiling of `m`.
        let m = 20 + seed as i64;
        let campaign = uuid(2, seed * 10 + 4);
        let first = execution_grant(
            &env,
            &campaign,
            &uuid(3, seed * 1_000_000),
            &uuid(4, seed * 1_000_000),
            limits(|l| l.workloads = m),
            workloads(0..10, CEILINGS),
        );
        admin.register(&a, &first).await.unwrap();
        let results = race(&stores, |i, s| {
            let a = auth_token.clone();
            let (env, campaign) = (env.clone(), campaign.clone());
            async move {
                let mut members = workloads(0..1, CEILINGS);
                members.push(WorkloadLimits {
                    workload: WorkloadId::new(&format!("n{i}")).unwrap(),
                    pack_digest: Sha256Digest::of(format!("pack n{i}").as_bytes()),
                    limits: CEILINGS,
                });
                let id = seed * 1_000_000 + 1 + i as u64;
                let g = execution_grant(
                    &env,
                    &campaign,
                    &uuid(3, id),
                    &uuid(4, id),
                    limits(|l| l.workloads = m),
                    members,
                );
                s.register(&a, &g).await
            }
        })
        .await;
        let admitted = tally(&results, StoreCode::MembershipExceeded) as i64;
        assert_eq!(admitted, m - 10, "seed {seed}: membership");
        for r in results.iter().flatten() {
            assert_eq!(
                r,
                &Registered::New {
                    membership_charged: 1,
                    executor_permit: true
                }
            );
        }
        let status = admin
            .pool_status(&execution_pool(&env, &campaign))
            .await
            .unwrap();
        assert_eq!(status.members, m, "seed {seed}: members charged");
    }
    e.drop_schema().await;
}
