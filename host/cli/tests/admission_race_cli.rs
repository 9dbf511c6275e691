//! The concurrency tier of protected admission: many `dpone-host campaign admit` *processes*
//! released together against one pool of a real PostgreSQL control store, for each limit layer
//! (policy, grant, workload) and dimension (attempts, source rows, source bytes, unresolved
//! attempts, membership). Each race must admit exactly what one-at-a-time admission admits on a
//! fresh store of the same campaign, and every refusal must carry the dimension's code.
//!
//! The campaign: one execution grant whose membership is `N` ordinary workloads (clones of the
//! fixture's `pg-customers` with their own ids and pack digests), so that `N` schedulers can each
//! hold one RUNNING attempt at once; the limit under test is set to 16 on one layer and the other
//! layers are left above it. Each process reserves 1,000 rows and 1,000 bytes.
//!
//! Settlements take no turn at the environment lock (one insert whose primary key decides), so
//! 64 `campaign settle` processes of one reservation race too: exactly one is recorded.
//!
//! Tier: real database integration through the binary (`cfg(dpone_live_pg)`; without a
//! configured server these tests are reported ignored with their SKIP reason, never passed).

mod support;

use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Child, Command, Output};
use support::campaign::{self as c, Docs};
use support::np_store::*;

/// The races run one after another: each starts up to 128 processes with a connection each.
static ONE_RACE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Each process's decision deadline: 64 or 128 processes on a few cores wait for a core longer
/// than the 500 ms default backstop allows (that failure is fail-closed and tested elsewhere;
/// this tier tests what is admitted).
const RACE_DEADLINE_MS: &str = "10000";

/// The limit under test on its layer.
const LIMIT: u64 = 16;
/// What each attempt reserves.
const ROWS: u64 = 1_000;
const BYTES: u64 = 1_000;

#[derive(Clone, Copy, Debug)]
enum Layer {
    Policy,
    Grant,
    Workload,
}

#[derive(Clone, Copy, Debug)]
enum Dimension {
    Attempts,
    Rows,
    Bytes,
}

impl Dimension {
    fn key(self) -> &'static str {
        match self {
            Dimension::Attempts => "max_attempts",
            Dimension::Rows => "max_source_rows",
            Dimension::Bytes => "max_source_bytes",
        }
    }

    /// The limit that admits exactly [`LIMIT`] attempts of [`ROWS`] rows and [`BYTES`] bytes.
    fn limit(self) -> u64 {
        match self {
            Dimension::Attempts => LIMIT,
            Dimension::Rows => LIMIT * ROWS,
            Dimension::Bytes => LIMIT * BYTES,
        }
    }

    fn code(self) -> &'static str {
        match self {
            Dimension::Attempts => "DPONE_SCOPE_BUDGET_ATTEMPTS_EXHAUSTED",
            Dimension::Rows => "DPONE_SCOPE_BUDGET_SOURCE_ROWS_EXHAUSTED",
            Dimension::Bytes => "DPONE_SCOPE_BUDGET_SOURCE_BYTES_EXHAUSTED",
        }
    }
}

fn workload_id(i: usize) -> String {
    format!("race-w{i:03}")
}

/// A campaign of `n` ordinary workloads with every layer's limits high enough for `n` attempts
/// and `layer`'s `dimension` set to its [`Dimension::limit`].
fn race_docs(n: usize, layer: Layer, dimension: Dimension) -> Docs {
    let mut docs = live_docs();
    let template = docs.composition["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["workload_id"] == "pg-customers")
        .cloned()
        .expect("the pg-customers workload");
    let roomy = json!({
        "max_attempt_seconds": 900,
        "max_attempts": 128,
        "max_source_bytes": 1u64 << 30,
        "max_source_rows": 100_000,
        "max_workloads": 64,
    });
    let mut workloads = Vec::with_capacity(n);
    let mut members = Vec::with_capacity(n);
    for i in 0..n {
        let mut w = template.clone();
        let id = workload_id(i);
        let pack = c::digest(&json!({"race-pack": id}));
        w["workload_id"] = id.clone().into();
        w["pack_digest"] = pack.clone().into();
        w["limits"] = roomy.clone();
        if let Layer::Workload = layer {
            w["limits"][dimension.key()] = dimension.limit().into();
        }
        workloads.push(w);
        members.push(json!({"workload_id": id, "pack_digest": pack}));
    }
    docs.composition["workloads"] = Value::Array(workloads);
    docs.composition["scope"] = c::scope_of_effects(&docs.policy, &docs.composition);
    docs.egrant["phase_subjects"]["membership"] = Value::Array(members.clone());
    docs.request["workloads"] = Value::Array(members);
    docs.egrant["limits"] = roomy.clone();
    docs.policy["ceilings"] = roomy;
    match layer {
        Layer::Grant => docs.egrant["limits"][dimension.key()] = dimension.limit().into(),
        Layer::Policy => docs.policy["ceilings"][dimension.key()] = dimension.limit().into(),
        Layer::Workload => {}
    }
    docs.seal();
    docs
}

/// A fresh store with the campaign's policy and grant registered (which warms the precompiled
/// cache, so the racing processes only read it).
async fn registered(docs: &Docs) -> (Store, Vec<u8>) {
    let store = Store::new().await;
    let grant = c::canon(&docs.egrant);
    {
        let run = Run::new(&store);
        ok(&run.policy_register(docs, None));
        let r = ok(&run.grant_register(docs, true, &grant));
        assert_eq!(r["result"], "registered");
    }
    (store, grant)
}

/// The outcome of one admit process: `Ok(())` admitted, `Err(code)` refused.
fn outcome(out: &Output) -> Result<(), String> {
    if out.status.success() {
        let v: Value = serde_json::from_slice(&out.stdout).expect("admit prints JSON");
        assert_eq!(v["result"], "admitted");
        return Ok(());
    }
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refusal, not a failure: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stderr)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned();
    Err(serde_json::from_str::<Value>(&line)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or(line))
}

/// `(workload, attempt)` admissions, all processes started before any is awaited (`together`)
/// or one after another. Returns the outcomes in order.
fn admit_all(
    run: &Run<'_>,
    docs: &Docs,
    grant: &[u8],
    who: &[(String, String)],
    together: bool,
) -> Vec<Result<(), String>> {
    // The files are written once; each process differs in its workload and attempt only.
    let base = run.admit_args(docs, true, grant, "w", "a", ROWS, BYTES);
    let args_of = |workload: &str, attempt: &str| {
        let mut a = base.clone();
        for (flag, value) in [("--workload", workload), ("--attempt", attempt)] {
            let at = a.iter().position(|x| x == flag).expect("flag") + 1;
            a[at] = value.to_owned();
        }
        a
    };
    let commands = who
        .iter()
        .map(|(w, a)| run.command(&args_of(w, a)))
        .collect();
    run_all(commands, together).iter().map(outcome).collect()
}

/// Runs `commands` with the race's decision deadline: all started before any is awaited
/// (`together`) or one after another. Returns their outputs in order.
fn run_all(commands: Vec<Command>, together: bool) -> Vec<Output> {
    if !together {
        return commands
            .into_iter()
            .map(|mut c| {
                c.env("DPONE_POLICY_DEADLINE_MS", RACE_DEADLINE_MS)
                    .output()
                    .expect("run dpone-host")
            })
            .collect();
    }
    wait_all(spawn_all(commands))
}

/// Starts every command (with the race's decision deadline), none awaited.
fn spawn_all(commands: Vec<Command>) -> Vec<Child> {
    commands
        .into_iter()
        .map(|mut c| {
            c.env("DPONE_POLICY_DEADLINE_MS", RACE_DEADLINE_MS)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn dpone-host")
        })
        .collect()
}

/// Every child's output, in order.
fn wait_all(children: Vec<Child>) -> Vec<Output> {
    children
        .into_iter()
        .map(|child| child.wait_with_output().expect("wait"))
        .collect()
}

fn tally(outcomes: &[Result<(), String>]) -> (usize, BTreeMap<String, usize>) {
    let mut refused = BTreeMap::new();
    let mut admitted = 0;
    for o in outcomes {
        match o {
            Ok(()) => admitted += 1,
            Err(code) => *refused.entry(code.clone()).or_insert(0) += 1,
        }
    }
    (admitted, refused)
}

/// One race: `processes` admissions of distinct workloads, one at a time on one fresh store and
/// all together on another; both must admit exactly [`LIMIT`], refuse the rest with the
/// dimension's code, and leave the pool charged with exactly what was admitted.
async fn race(processes: usize, layer: Layer, dimension: Dimension) {
    let docs = race_docs(processes.min(64), layer, dimension);
    let who: Vec<(String, String)> = (0..processes)
        .map(|i| (workload_id(i % 64), format!("a{}", i / 64)))
        .collect();
    let mut results = Vec::new();
    for together in [false, true] {
        let (store, grant) = registered(&docs).await;
        let run = Run::new(&store);
        let outcomes = admit_all(&run, &docs, &grant, &who, together);
        let (admitted, refused) = tally(&outcomes);
        let mode = if together {
            "together"
        } else {
            "one at a time"
        };
        assert_eq!(
            admitted, LIMIT as usize,
            "{layer:?} {dimension:?} {mode}: admitted {admitted}, refused {refused:?}"
        );
        let mut expected = BTreeMap::new();
        let refusals = processes - LIMIT as usize;
        // With more processes than workloads, a workload's second attempt may meet its first
        // still RUNNING; every other refusal is the dimension's.
        let running = refused
            .get("DPONE_NP_STORE_ATTEMPT_RUNNING")
            .copied()
            .unwrap_or(0);
        if running > 0 {
            assert!(processes > 64, "{mode}: running refusals without reuse");
            expected.insert("DPONE_NP_STORE_ATTEMPT_RUNNING".to_owned(), running);
        }
        expected.insert(dimension.code().to_owned(), refusals - running);
        assert_eq!(refused, expected, "{layer:?} {dimension:?} {mode}");
        let st = ok(&run.status(&id(&docs.egrant["grant_id"]), "execution", &[]));
        assert_eq!(st["pool"]["attempts"], LIMIT, "{mode}: the pool's charge");
        assert_eq!(st["pool"]["reserved_source_rows"], LIMIT * ROWS);
        assert_eq!(st["pool"]["reserved_source_bytes"], LIMIT * BYTES);
        results.push(admitted);
        drop(run);
        store.drop_schema().await;
    }
    assert_eq!(results[0], results[1], "one at a time and together agree");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn workload_limits_hold_against_64_concurrent_admit_processes() {
    let _one = ONE_RACE_AT_A_TIME.lock().await;
    for dimension in [Dimension::Attempts, Dimension::Rows, Dimension::Bytes] {
        race(64, Layer::Workload, dimension).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn workload_attempt_limit_holds_against_128_concurrent_admit_processes() {
    let _one = ONE_RACE_AT_A_TIME.lock().await;
    race(128, Layer::Workload, Dimension::Attempts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn grant_and_policy_limits_hold_against_64_concurrent_admit_processes() {
    let _one = ONE_RACE_AT_A_TIME.lock().await;
    for layer in [Layer::Grant, Layer::Policy] {
        for dimension in [Dimension::Attempts, Dimension::Rows, Dimension::Bytes] {
            race(64, layer, dimension).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn one_workload_holds_one_unresolved_attempt_against_64_concurrent_processes() {
    let _one = ONE_RACE_AT_A_TIME.lock().await;
    let docs = race_docs(4, Layer::Workload, Dimension::Attempts);
    let who: Vec<(String, String)> = (0..64).map(|i| (workload_id(0), format!("a{i}"))).collect();
    let (store, grant) = registered(&docs).await;
    let run = Run::new(&store);
    let (admitted, refused) = tally(&admit_all(&run, &docs, &grant, &who, true));
    assert_eq!(admitted, 1, "refused: {refused:?}");
    assert_eq!(
        refused,
        BTreeMap::from([("DPONE_NP_STORE_ATTEMPT_RUNNING".to_owned(), 63)])
    );
    drop(run);
    store.drop_schema().await;
}

/// 64 `campaign settle` processes of one reservation, half with one measured row count and half
/// with another, lined up at the insert: a session holds the settlement table in SHARE mode (the
/// processes' reads pass, their inserts wait) until all 64 wait, then lets them go. Exactly one
/// is recorded (the others' inserts are skipped by the primary key and compared); every other process with its
/// measurements answers `reopened` and every one with the other measurements is refused
/// `DPONE_NP_STORE_SETTLEMENT_CONFLICT`; the pool holds the recorded measurements once, and the
/// workload's next attempt is admitted (its first is resolved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn one_reservation_is_settled_once_against_64_concurrent_settle_processes() {
    let _one = ONE_RACE_AT_A_TIME.lock().await;
    let docs = race_docs(4, Layer::Workload, Dimension::Attempts);
    let (store, grant) = registered(&docs).await;
    let run = Run::new(&store);
    let admitted = ok(&run.admit(&docs, true, &grant, &workload_id(0), "a0", ROWS, BYTES));
    let rid = id(&admitted["reservation"]["reservation_id"]);
    let rows_of = |i: usize| if i.is_multiple_of(2) { 500 } else { 600 };
    let gate = admin(&store.admin_url).await;
    let table = format!("\"{}\".np_settlement", store.schema);
    gate.batch_execute(&format!("BEGIN; LOCK TABLE {table} IN SHARE MODE"))
        .await
        .expect("hold the settlement table");
    let children = spawn_all(
        (0..64)
            .map(|i| run.command(&Run::settle_args(&rid, rows_of(i), 10, 0)))
            .collect(),
    );
    let waiting = || async {
        gate.query_one(
            "SELECT count(*) FROM pg_catalog.pg_locks \
             WHERE NOT granted AND relation = $1::text::regclass",
            &[&table],
        )
        .await
        .expect("pg_locks")
        .get::<_, i64>(0)
    };
    let mut lined_up = 0;
    for _ in 0..1_200 {
        lined_up = waiting().await;
        if lined_up == 64 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    gate.batch_execute("COMMIT").await.expect("release");
    let outputs = wait_all(children);
    assert_eq!(lined_up, 64, "the processes never all reached their insert");
    let mut recorded = Vec::new();
    let mut reopened = Vec::new();
    let mut conflicts = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        if out.status.success() {
            let v: Value = serde_json::from_slice(&out.stdout).expect("settle prints JSON");
            match v["result"].as_str() {
                Some("recorded") => recorded.push(rows_of(i)),
                Some("reopened") => reopened.push(rows_of(i)),
                other => panic!("process {i}: {other:?}"),
            }
        } else {
            assert_eq!(
                refused_code(out),
                "DPONE_NP_STORE_SETTLEMENT_CONFLICT",
                "process {i}"
            );
            conflicts.push(rows_of(i));
        }
    }
    assert_eq!(
        recorded.len(),
        1,
        "reopened {reopened:?}, conflicts {conflicts:?}"
    );
    let won = recorded[0];
    assert_eq!(reopened.len(), 31, "the winner's measurements reopen");
    assert!(reopened.iter().all(|r| *r == won));
    assert_eq!(conflicts.len(), 32, "the other measurements conflict");
    assert!(conflicts.iter().all(|r| *r != won));
    let st = ok(&run.status(&id(&docs.egrant["grant_id"]), "execution", &[]));
    assert_eq!(st["pool"]["unresolved"], 0);
    assert_eq!(st["pool"]["measured_source_rows"], won);
    assert_eq!(st["pool"]["measured_source_bytes"], 10);
    ok(&run.admit(&docs, true, &grant, &workload_id(0), "a1", ROWS, BYTES));
    drop(run);
    store.drop_schema().await;
}

/// Membership is charged when an execution grant registers: 8 grants over disjoint 8-workload
/// memberships of one campaign, whose workloads allow a pool membership of 16, register as 8
/// `campaign grant register` processes started together and one at a time: exactly two are
/// registered either way, the others refused `DPONE_NP_STORE_MEMBERSHIP_EXCEEDED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn membership_holds_against_concurrent_grant_register_processes() {
    let _one = ONE_RACE_AT_A_TIME.lock().await;
    const GRANTS: usize = 8;
    const EACH: usize = 8;
    let mut base = race_docs(GRANTS * EACH, Layer::Workload, Dimension::Attempts);
    for w in base.composition["workloads"]
        .as_array_mut()
        .expect("workloads")
    {
        w["limits"]["max_workloads"] = (2 * EACH).into();
    }
    base.seal();
    let members: Vec<Value> = base.egrant["phase_subjects"]["membership"]
        .as_array()
        .expect("membership")
        .clone();
    // One campaign, one composition; per grant its own id, activation and membership.
    let grants: Vec<Docs> = (0..GRANTS)
        .map(|k| {
            let mut d = base.clone();
            let grant_id = format!("f1c8e5a3-7d2b-4e96-8a3f-{:012x}", k + 1);
            let activation = format!("d6a3f8b2-5e1c-4b79-9c04-{:012x}", k + 1);
            let mine = Value::Array(members[k * EACH..(k + 1) * EACH].to_vec());
            d.egrant["grant_id"] = grant_id.into();
            d.egrant["phase_subjects"]["activation_id"] = activation.clone().into();
            d.egrant["phase_subjects"]["membership"] = mine.clone();
            d.request["activation_id"] = activation.into();
            d.request["workloads"] = mine;
            d.seal();
            d
        })
        .collect();
    for together in [false, true] {
        let store = Store::new().await;
        let admin = Run::new(&store);
        ok(&admin.policy_register(&base, None));
        let runs: Vec<Run<'_>> = grants.iter().map(|_| Run::new(&store)).collect();
        let commands: Vec<Vec<String>> = grants
            .iter()
            .zip(&runs)
            .map(|(d, run)| {
                let mut a = vec!["grant".to_owned(), "register".to_owned()];
                a.extend(run.grant_args(d, true, &c::canon(&d.egrant)));
                a
            })
            .collect();
        let outputs = run_all(
            commands
                .iter()
                .zip(&runs)
                .map(|(a, run)| run.command(a))
                .collect(),
            together,
        );
        let mut registered = 0;
        let mut refused = BTreeMap::new();
        for out in &outputs {
            if out.status.success() {
                registered += 1;
            } else {
                let code = refused_code(out);
                *refused.entry(code).or_insert(0) += 1;
            }
        }
        let mode = if together {
            "together"
        } else {
            "one at a time"
        };
        assert_eq!(registered, 2, "{mode}: refused {refused:?}");
        assert_eq!(
            refused,
            BTreeMap::from([("DPONE_NP_STORE_MEMBERSHIP_EXCEEDED".to_owned(), GRANTS - 2)]),
            "{mode}"
        );
        drop(runs);
        drop(admin);
        store.drop_schema().await;
    }
}

/// The code of a refused command (exit 1).
fn refused_code(out: &Output) -> String {
    match outcome(out) {
        Err(code) => code,
        Ok(()) => panic!("not refused"),
    }
}
