//! `dpone-host campaign policy register | grant register | admit | settle | status` end to end
//! on a real PostgreSQL server: the reviewed DDL (`fixtures/nonproduction/control-store.sql`)
//! applied to a fresh schema as an operator would, the binary connected through the URL variable
//! (verify-full against the test CA when one is configured), grants attested offline by the test
//! signer and dated around the real clock (the store checks validity with the database clock).
//!
//! Covered: the execution journey (register policy and grant, admit, settle, status), an
//! identical registration reopened as history, duplicate and running attempts, settlement never
//! freeing a reservation, revocation after which `status` still shows the original registration
//! under its original trust revision while new admission is refused; the qualification journey
//! with a replayed consumed run, a rebound run and changed registration bytes refused; a store
//! without the DDL, a missing trust revision and a policy that is not the current revision; the
//! connection options' own refusals. Every refusal is checked for its stable code and exit status
//! and for not echoing the connection URL.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`; without a configured server these
//! tests are reported ignored with their SKIP reason, never passed).

mod support;

use serde_json::Value;
use std::process::Command;
use support::campaign::{self as c, Docs};
use support::np_store::*;

/// A qualification campaign: the qualification plan's workloads (the export cell only), with
/// the composition's scope recomputed from its effects (as `campaign_cli.rs` does).
fn qualification_docs() -> Docs {
    let mut docs = live_docs();
    let composition = &mut docs.composition;
    let export: Vec<Value> = composition["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .filter(|w| w["workload_id"] == "export-orders-mart")
        .cloned()
        .collect();
    composition["workloads"] = Value::Array(export);
    composition["scope"] = c::scope_of_effects(&docs.policy, composition);
    docs.seal();
    docs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn execution_journey_admits_settles_and_keeps_history_after_revocation() {
    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = live_docs();
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);

    let p = ok(&run.policy_register(&docs, None));
    assert_eq!(p["result"], "recorded");
    assert_eq!(p["trust"]["revision"], 1);
    assert_eq!(p["trust"]["revocation_epoch"], 3);
    assert_eq!(p["trust"]["policy_digest"], docs.policy_digest());
    let again = ok(&run.policy_register(&docs, None));
    assert_eq!(
        again["trust"]["revision"], 1,
        "the same record is the current revision"
    );

    let r = ok(&run.grant_register(&docs, true, &grant));
    assert_eq!(r["result"], "registered");
    assert_eq!(r["phase"], "execution");
    assert_eq!(r["trust_revision"], 1);
    assert_eq!(
        r["membership_charged"], 3,
        "the complete membership at once"
    );
    assert_eq!(r["executor_permit"], true);
    assert_eq!(
        r["protected"]["activation_request"]["selection"],
        "selected"
    );
    assert_eq!(r["verification"]["result"], "verified");
    assert_eq!(r["grant_digest"], c::digest(&docs.egrant));

    // An identical execution registration reopens as history.
    let h = ok(&run.grant_register(&docs, true, &grant));
    assert_eq!(h["result"], "reopened_as_history");
    assert_eq!(h["membership_charged"], 0);
    assert_eq!(h["executor_permit"], false);
    assert_eq!(
        h["protected"]["activation_request"]["selection"],
        "reopened"
    );

    let a = ok(&run.admit(&docs, true, &grant, "pg-customers", "a1", 1000, 4096));
    assert_eq!(a["result"], "admitted");
    let res = &a["reservation"];
    let rid = id(&res["reservation_id"]);
    assert!(rid.starts_with("sha256:") && rid.len() == 71);
    assert_eq!(res["workload_id"], "pg-customers");
    assert_eq!(res["attempt_id"], "a1");
    assert_eq!(res["source_rows"], 1000);
    assert_eq!(res["source_bytes"], 4096);
    assert_eq!(res["trust_revision"], 1);
    assert_eq!(res["resolved_by_probe"], false);
    let scope = &a["evidence"]["scope"];
    assert_eq!(scope["decision"], "admit");
    assert_eq!(scope["pool_before"]["members"], 3);
    assert_eq!(scope["pool_before"]["attempts"], 0);
    assert_eq!(scope["evidence"]["kind"], "scope");
    assert_eq!(
        scope["component"]["sha256"],
        scope["evidence"]["component_sha256"]
    );
    assert_eq!(scope["effective_limits"]["max_source_rows"], 20_000);
    assert_eq!(a["evidence"]["authentication"]["trust_revision"], 1);

    // The same attempt again, and another attempt while the first is unresolved.
    let dup = run.admit(&docs, true, &grant, "pg-customers", "a1", 1000, 4096);
    assert_eq!(refused(&dup, &store, 1), "DPONE_NP_STORE_ATTEMPT_DUPLICATE");
    let running = run.admit(&docs, true, &grant, "pg-customers", "a2", 10, 10);
    assert_eq!(
        refused(&running, &store, 1),
        "DPONE_NP_STORE_ATTEMPT_RUNNING"
    );
    // A reservation alone above the workload's ceiling: the scope component denies it.
    let over = run.admit(&docs, true, &grant, "export-orders-mart", "b1", 50_001, 10);
    assert_eq!(
        refused(&over, &store, 1),
        "DPONE_SCOPE_RESERVATION_EXCEEDS_LIMIT"
    );
    assert_eq!(
        serde_json::from_slice::<Value>(&over.stdout).expect("the denial's evidence")["decision"],
        "deny"
    );

    // Settlement records measured usage and frees nothing.
    let s = ok(&run.settle(&rid, 900, 4000, 5000));
    assert_eq!(s["result"], "recorded");
    assert_eq!(s["reservation_freed"], false);
    assert_eq!(ok(&run.settle(&rid, 900, 4000, 5000))["result"], "reopened");
    let above = run.settle(&rid, 1001, 4000, 5000);
    assert_eq!(
        refused(&above, &store, 1),
        "DPONE_NP_STORE_SETTLE_EXCEEDS_RESERVATION"
    );
    let conflict = run.settle(&rid, 800, 4000, 5000);
    assert_eq!(
        refused(&conflict, &store, 1),
        "DPONE_NP_STORE_SETTLEMENT_CONFLICT"
    );
    let unknown = run.settle(&c::digest(&Value::Null), 1, 1, 1);
    assert_eq!(
        refused(&unknown, &store, 1),
        "DPONE_NP_STORE_RESERVATION_UNKNOWN"
    );

    let st = ok(&run.status(&grant_id, "execution", &[&rid]));
    assert_eq!(st["pool"]["attempts"], 1);
    assert_eq!(st["pool"]["reserved_source_rows"], 1000, "never refunded");
    assert_eq!(st["pool"]["measured_source_rows"], 900);
    assert_eq!(st["pool"]["measured_http_bytes"], 5000);
    assert_eq!(st["pool"]["unresolved"], 0);
    assert_eq!(st["pool"]["members"], 3);
    assert_eq!(st["reservations"][0]["reservation_id"], rid.as_str());
    assert_eq!(st["current_authority"]["revoked"], false);
    // At a terminal: the verdict first, then the pool's charges; off one, the same JSON as
    // with --output json.
    let status_args = || {
        [
            "status",
            "--grant-id",
            grant_id.as_str(),
            "--phase",
            "execution",
        ]
        .map(str::to_owned)
    };
    let (rc, shown) = at_terminal(&run.command(&status_args()));
    eprintln!("{shown}");
    assert_eq!(rc, 0, "{shown}");
    assert!(shown.starts_with("done: admits new work\n"), "{shown}");
    assert_eq!(fact(&shown, "grant").as_deref(), Some(grant_id.as_str()));
    assert_eq!(
        fact(&shown, "attempts").as_deref(),
        Some("1 (0 unresolved)")
    );
    assert_eq!(
        fact(&shown, "reserved").as_deref(),
        Some("1000 rows, 4096 bytes")
    );
    assert_eq!(
        fact(&shown, "measured").as_deref(),
        Some("900 rows, 4000 bytes, 5000 http bytes")
    );
    assert!(
        !shown.contains(&store.url) && !shown.contains('{'),
        "{shown}"
    );
    let piped = run.cli(&status_args());
    let explicit = run.cli(&[
        "status".to_owned(),
        "--grant-id".to_owned(),
        grant_id.clone(),
        "--phase".to_owned(),
        "execution".to_owned(),
        "--output".to_owned(),
        "json".to_owned(),
    ]);
    assert_eq!(
        String::from_utf8_lossy(&piped.stdout),
        String::from_utf8_lossy(&explicit.stdout)
    );
    assert_eq!(ok(&piped)["result"], "history");

    // Revocation: a new trust revision with a higher epoch.
    let rev = ok(&run.policy_register(&docs, Some(4)));
    assert_eq!(rev["trust"]["revision"], 2);
    assert_eq!(rev["trust"]["revocation_epoch"], 4);
    let back = run.policy_register(&docs, Some(3));
    assert_eq!(
        refused(&back, &store, 1),
        "DPONE_NP_STORE_REVOCATION_EPOCH_BACKWARDS"
    );
    let st = ok(&run.status(&grant_id, "execution", &[]));
    let reg = &st["registration"];
    assert_eq!(reg["grant_digest"], c::digest(&docs.egrant));
    assert_eq!(reg["original_size_bytes"], grant.len());
    assert_eq!(
        reg["original_trust"]["revision"], 1,
        "its original trust revision"
    );
    assert_eq!(reg["original_trust"]["revocation_epoch"], 3);
    assert_eq!(reg["original_trust"]["policy_digest"], docs.policy_digest());
    assert_eq!(st["current_trust"]["revision"], 2);
    assert_eq!(st["current_authority"]["revoked"], true);
    assert_eq!(st["current_authority"]["admits_new_work"], false);
    let (rc, shown) = at_terminal(&run.command(&status_args()));
    eprintln!("{shown}");
    assert_eq!(rc, 0, "a revoked grant's history still reads: {shown}");
    assert!(
        shown.starts_with("refused: revoked: admits no new work\n"),
        "{shown}"
    );
    assert_eq!(
        fact(&shown, "trust revision").as_deref(),
        Some("1 registered, 2 current")
    );
    assert_eq!(st["pool"]["attempts"], 1, "charges survive revocation");
    // New admission verifies current authority: revoked.
    let after = run.admit(&docs, true, &grant, "pg-customers", "a3", 1, 1);
    assert_eq!(refused(&after, &store, 1), "DPONE_NP_REOPEN_REVOKED");
    let st = ok(&run.status(&grant_id, "execution", &[]));
    assert_eq!(
        st["pool"]["attempts"], 1,
        "a refused admission charges nothing"
    );
    store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn qualification_replay_rebinding_and_changed_bytes_are_refused() {
    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = qualification_docs();
    let grant = c::canon(&docs.qgrant);
    ok(&run.policy_register(&docs, None));

    let r = ok(&run.grant_register(&docs, false, &grant));
    assert_eq!(r["result"], "registered");
    assert_eq!(r["phase"], "qualification");
    assert_eq!(
        r["membership_charged"], 1,
        "the composition's workload on the route"
    );
    assert_eq!(r["executor_permit"], false);
    assert_eq!(r["protected"]["qualification_run"], "consumed");

    // Replay of the consumed qualification.
    let replay = run.grant_register(&docs, false, &grant);
    assert_eq!(
        refused(&replay, &store, 1),
        "DPONE_NP_STORE_QUALIFICATION_REPLAYED"
    );

    // The consumed run admits attempts of its own grant.
    let a = ok(&run.admit(&docs, false, &grant, "export-orders-mart", "q1", 100, 100));
    assert_eq!(a["reservation"]["phase"], "qualification");
    let workload_out = run.admit(&docs, false, &grant, "pg-customers", "q2", 1, 1);
    assert_eq!(
        refused(&workload_out, &store, 1),
        "DPONE_NP_SCOPE_WORKLOAD_UNKNOWN"
    );

    // Changed original bytes under the same grant/phase key, genuinely signed.
    let mut changed = docs.clone();
    changed.qgrant["limits"]["max_attempts"] = 3.into();
    changed.seal();
    let out = run.grant_register(&changed, false, &c::canon(&changed.qgrant));
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_NP_STORE_REGISTRATION_BYTES_CHANGED"
    );

    // Another grant naming the same run: registered, but the run cannot be rebound.
    let mut other = docs.clone();
    other.qgrant["grant_id"] = "5d1f0c3e-7a2b-4c9d-8e6f-1a2b3c4d5e6f".into();
    other.seal();
    let out = run.grant_register(&other, false, &c::canon(&other.qgrant));
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_NP_STORE_QUALIFICATION_REBOUND"
    );
    let st = ok(&run.status("5d1f0c3e-7a2b-4c9d-8e6f-1a2b3c4d5e6f", "qualification", &[]));
    assert_eq!(
        st["pool"]["attempts"], 1,
        "the replacement grant shares the pool"
    );
    assert_eq!(st["pool"]["members"], 1);
    let rebound_admit = run.admit(
        &other,
        false,
        &c::canon(&other.qgrant),
        "export-orders-mart",
        "q3",
        1,
        1,
    );
    assert_eq!(
        refused(&rebound_admit, &store, 1),
        "DPONE_NP_STORE_QUALIFICATION_NOT_CONSUMED"
    );
    store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn store_preconditions_refuse_with_their_codes() {
    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = live_docs();
    let grant = c::canon(&docs.egrant);

    // No trust revision yet.
    let out = run.grant_register(&docs, true, &grant);
    assert_eq!(refused(&out, &store, 1), "DPONE_NP_STORE_TRUST_MISSING");

    // The store's current revision is another policy.
    ok(&run.policy_register(&docs, None));
    let mut other = docs.clone();
    other.policy["max_validity_seconds"] = 43_200.into();
    other.seal();
    ok(&run.policy_register(&other, None));
    let out = run.grant_register(&docs, true, &grant);
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_CLI_CAMPAIGN_POLICY_NOT_CURRENT"
    );
    let st = run.status(&id(&docs.egrant["grant_id"]), "execution", &[]);
    assert_eq!(
        refused(&st, &store, 1),
        "DPONE_NP_STORE_GRANT_NOT_REGISTERED"
    );

    // A schema without the reviewed DDL: refused, nothing created.
    let absent = Store {
        url: store.url.clone(),
        schema: format!("{}_absent", store.schema),
        ca: store.ca.clone(),
        admin_url: store.admin_url.clone(),
        privileged_session: true,
    };
    let out = Run::new(&absent).policy_register(&docs, None);
    assert_eq!(refused(&out, &store, 1), "DPONE_NP_STORE_CATALOG_INVALID");
    let created: i64 = admin(&store.admin_url)
        .await
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
            &[&absent.schema],
        )
        .await
        .expect("catalog")
        .get(0);
    assert_eq!(created, 0, "the CLI never creates the store's schema");

    // The pin and the root are checked before the store is touched.
    let mut a = vec![
        "policy".to_owned(),
        "register".to_owned(),
        "--policy".to_owned(),
        run.file("policy.json", &c::canon(&docs.policy)),
        "--policy-digest".to_owned(),
        other.policy_digest(),
        "--trusted-root".to_owned(),
        run.file("trusted_root.json", &c::trusted_root()),
    ];
    let out = run.cli(&a);
    assert_eq!(refused(&out, &store, 1), "DPONE_NP_REOPEN_POLICY_UNPINNED");
    a[5] = docs.policy_digest();
    a.extend(["--revocation-epoch".to_owned(), "2".to_owned()]);
    let out = run.cli(&a);
    assert_eq!(
        refused(&out, &store, 3),
        "DPONE_CLI_CAMPAIGN_EPOCH_BELOW_POLICY"
    );
    store.drop_schema().await;
}

/// The reviewed least-privilege roles, compiled into the test.
const ROLES_SQL: &str = include_str!("../../../fixtures/nonproduction/control-store-roles.sql");

/// The store's session is checked as well as its catalog: a login that could change the store
/// around the protocol (the owner's, or a runtime login granted TRIGGER, or made a member of
/// the owner) is refused before anything is recorded, naming what it could do (never the
/// role); a login of the reviewed platform role is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_store_session_that_could_alter_the_store_is_refused() {
    let store = Store::new().await;
    let docs = live_docs();
    let db = admin(&store.admin_url).await;
    let revisions = || async {
        let n: i64 = admin(&store.admin_url)
            .await
            .query_one(
                &format!(
                    "SELECT count(*) FROM \"{}\".np_trust_revision",
                    store.schema
                ),
                &[],
            )
            .await
            .expect("count")
            .get(0);
        n
    };
    let as_login = |url: String| Store {
        url,
        schema: store.schema.clone(),
        ca: store.ca.clone(),
        admin_url: store.admin_url.clone(),
        privileged_session: false,
    };

    // The schema owner's own login, as a deployment would connect it.
    let out = Run::new(&as_login(store.url.clone())).policy_register(&docs, None);
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_NP_STORE_SESSION_PRIVILEGED"
    );
    assert_eq!(revisions().await, 0, "nothing recorded");

    // A login of the platform role, with the reviewed roles applied.
    db.batch_execute(&ROLES_SQL.replace("\"dpone_np_control\"", &format!("\"{}\"", store.schema)))
        .await
        .expect("the reviewed roles apply");
    let mut r = [0u8; 12];
    getrandom::fill(&mut r).expect("random");
    let login = format!("dpone_np_t_cli_{}", hex::encode(&r[..4]));
    let password = hex::encode(&r[4..]);
    db.batch_execute(&format!(
        "CREATE ROLE {login} LOGIN NOSUPERUSER NOCREATEROLE NOCREATEDB PASSWORD '{password}'; \
         GRANT dpone_np_platform TO {login}"
    ))
    .await
    .expect("a platform login");
    let platform = as_login(with_login(&store.url, &login, &password));
    ok(&Run::new(&platform).policy_register(&docs, None));
    assert_eq!(revisions().await, 1);

    // The same login, one privilege more, then a member of the owner.
    let mut other = docs.clone();
    other.policy["max_validity_seconds"] = 43_200.into();
    other.seal();
    for (grant, names) in [
        (
            format!(
                "GRANT TRIGGER ON \"{}\".np_reservation TO {login}",
                store.schema
            ),
            "np_reservation TRIGGER",
        ),
        (
            format!("GRANT dpone_np_owner TO {login}"),
            "member of the schema's owner",
        ),
    ] {
        db.batch_execute(&grant).await.expect("grant");
        let out = Run::new(&platform).policy_register(&other, None);
        assert_eq!(
            refused(&out, &store, 1),
            "DPONE_NP_STORE_SESSION_PRIVILEGED",
            "{grant}"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(names), "{grant}: {stderr}");
        assert!(!stderr.contains(&login), "the role leaked: {stderr}");
        assert_eq!(revisions().await, 1, "{grant}: nothing recorded");
        db.batch_execute(&grant.replace("GRANT", "REVOKE").replace(" TO ", " FROM "))
            .await
            .expect("revoke");
    }
    ok(&Run::new(&platform).policy_register(&other, None));
    assert_eq!(revisions().await, 2, "least privilege again: accepted");
    store.drop_schema().await;
    let _ = db
        .batch_execute(&format!("DROP ROLE IF EXISTS {login}"))
        .await;
}

#[test]
fn connection_options_refuse_without_echoing_the_url() {
    let bin = env!("CARGO_BIN_EXE_dpone-host");
    let base = [
        "campaign",
        "settle",
        "--reservation",
        "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        "--source-rows",
        "1",
        "--source-bytes",
        "1",
        "--outcome",
        "failed",
        "--store-url-env",
        "DPONE_TEST_NP_STORE_URL_FOR_CLI",
    ];
    let unset = Command::new(bin)
        .env_remove("DPONE_TEST_NP_STORE_URL_FOR_CLI")
        .args(base)
        .output()
        .expect("run");
    assert_eq!(unset.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&unset.stderr).contains("DPONE_CLI_CAMPAIGN_STORE_URL_UNSET"));
    // A URL that does not parse, and one whose own TLS parameter contradicts the options (TLS
    // is chosen by --store-sslmode alone): both refused before connecting, neither echoed.
    for (url, code) in [
        (
            "postgres://user:s3cr3t-pw@db.internal.example:5432/x?connect_timeout=bogus",
            "DPONE_CLI_CAMPAIGN_STORE_URL_INVALID",
        ),
        (
            "postgres://user:s3cr3t-pw@db.internal.example:5432/x?sslmode=bogus-mode",
            "DPONE_CLI_CAMPAIGN_STORE_URL_TLS_CONFLICT",
        ),
        (
            "postgres://user:s3cr3t-pw@db.internal.example:5432/x?sslmode=disable",
            "DPONE_CLI_CAMPAIGN_STORE_URL_TLS_CONFLICT",
        ),
    ] {
        let invalid = Command::new(bin)
            .env("DPONE_TEST_NP_STORE_URL_FOR_CLI", url)
            .args(base)
            .output()
            .expect("run");
        let stderr = String::from_utf8_lossy(&invalid.stderr);
        assert_eq!(invalid.status.code(), Some(3), "{stderr}");
        assert!(stderr.contains(code), "{code}: {stderr}");
        assert!(
            !stderr.contains("s3cr3t") && !stderr.contains("db.internal"),
            "{stderr}"
        );
        assert!(invalid.stdout.is_empty());
    }
}

#[test]
fn special_files_are_refused_before_the_store_is_touched() {
    let bin = env!("CARGO_BIN_EXE_dpone-host");
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("ca-fifo.pem");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let fifo = fifo.display().to_string();
    let started = std::time::Instant::now();
    // The store's CA bundle (opened by the driver by path) is checked first, never blocking.
    let ca = Command::new(bin)
        .env(
            "DPONE_TEST_NP_STORE_URL_FOR_CLI",
            "postgres://nobody@127.0.0.1:1/none",
        )
        .args([
            "campaign",
            "settle",
            "--reservation",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "--source-rows",
            "1",
            "--source-bytes",
            "1",
            "--outcome",
            "failed",
            "--store-url-env",
            "DPONE_TEST_NP_STORE_URL_FOR_CLI",
            "--store-sslrootcert",
            &fifo,
        ])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&ca.stderr);
    assert_eq!(ca.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("DPONE_CLI_INPUT_NOT_REGULAR_FILE"),
        "{stderr}"
    );
    assert!(!stderr.contains("ca-fifo"), "the path leaked: {stderr}");
    // `policy register --policy` reads through the bounded reader before connecting.
    let policy = Command::new(bin)
        .env_remove("DPONE_NP_STORE_URL")
        .args([
            "campaign",
            "policy",
            "register",
            "--policy",
            &fifo,
            "--policy-digest",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "--trusted-root",
            "/dev/zero",
        ])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&policy.stderr);
    assert_eq!(policy.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("DPONE_CLI_INPUT_NOT_REGULAR_FILE"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "a FIFO blocked"
    );
}
