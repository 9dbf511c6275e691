//! Unresolved reservations stay charged after the process that made them dies between reserve
//! and settle: a child process (this test binary, running the ignored helper below) admits an
//! attempt and is killed with SIGKILL before it settles; the reservation, its RUNNING state and
//! its charge survive, and no refund happens.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`) with a real child process.

mod support;

use dpone_adapter_np_control_store::*;
use std::io::{BufRead, Write};
use support::*;

const CHILD: &str = "DPONE_NP_STORE_CRASH_CHILD_SCHEMA";
const CHILD_TEST: &str = "child_reserves_then_waits_to_be_killed";

fn grant() -> GrantRegistration {
    execution_grant(
        &uuid(1, 1),
        &uuid(2, 1),
        &uuid(3, 1),
        &uuid(4, 1),
        limits(|l| l.source_rows = 1_000),
        workloads(0..2, CEILINGS),
    )
}

/// The child: admits 600 of the pool's 1,000 rows, says so, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "SKIP: not a test on its own; unresolved_reservations_stay_charged_after_the_process_dies runs it as its child process and kills it"]
async fn child_reserves_then_waits_to_be_killed() {
    let schema = std::env::var(CHILD).expect("run only as the child of the crash test");
    let e = Env::attach(&schema).await;
    let store = e.store();
    let a = auth(&store, &uuid(1, 1)).await;
    let r = store
        .admit(&a, &admission(&grant(), "w0", "a1", 600, 6_000))
        .await
        .expect("admitted");
    // Straight to the stdout handle: libtest's output capture only sees `print!`.
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nRESERVED {}", r.reservation_id.as_str()).expect("tell the parent");
    out.flush().expect("tell the parent");
    drop(out);
    tokio::time::sleep(std::time::Duration::from_secs(120)).await;
    panic!("the child was not killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn unresolved_reservations_stay_charged_after_the_process_dies() {
    let e = Env::new().await;
    let store = e.store();
    let env = uuid(1, 1);
    store
        .record_trust(&policy(&env, b"policy", 1, CEILINGS))
        .await
        .unwrap();
    let a = auth(&store, &env).await;
    let g = grant();
    register_and_select(&store, &a, &g).await;

    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            CHILD_TEST,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &e.schema)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().unwrap();
    let id = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for l in std::io::BufReader::new(stdout)
            .lines()
            .map_while(std::result::Result::ok)
        {
            // libtest's "test … ... " prefix may share the line.
            if let Some((_, rest)) = l.split_once("RESERVED ")
                && let Some(id) = rest.split_whitespace().next()
            {
                return Ok(id.to_owned());
            }
            seen.push(l);
        }
        Err(seen.join(" | "))
    })
    .join()
    .unwrap()
    .unwrap_or_else(|seen| panic!("the child did not reserve: {seen}"));
    child.kill().expect("kill the child");
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child died by the signal");

    let id = Sha256Digest::parse("id", &id).unwrap();
    let r = store
        .probe(&id)
        .await
        .unwrap()
        .expect("the reservation survived");
    assert_eq!((r.source_rows, r.source_bytes), (600, 6_000));
    let pool = store
        .pool_status(&execution_pool(&env, &uuid(2, 1)))
        .await
        .unwrap();
    assert_eq!(
        (
            pool.attempts,
            pool.unresolved,
            pool.reserved_source_rows,
            pool.measured_source_rows
        ),
        (1, 1, 600, 0)
    );
    // Still RUNNING, still charged: no automatic refund.
    assert_eq!(
        code(store.admit(&a, &admission(&g, "w0", "a2", 1, 1)).await),
        StoreCode::AttemptRunning
    );
    assert_eq!(
        code(store.admit(&a, &admission(&g, "w1", "a1", 401, 1)).await),
        StoreCode::SourceRowsExceeded
    );
    store
        .admit(&a, &admission(&g, "w1", "a1", 400, 1))
        .await
        .expect("exactly the remainder");
    e.drop_schema().await;
}
