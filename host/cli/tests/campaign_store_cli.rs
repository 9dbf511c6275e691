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
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::str::FromStr;
use support::campaign::{self as c, Docs};

const SKIP: &str = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres";
const TEST_DB: &str = "dpone_np_store_tests";

fn env_value(name: &str) -> Option<String> {
    if let Ok(v) = std::env::var(name)
        && !v.is_empty()
    {
        return Some(v);
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).ok()?;
    let prefix = format!("export {name}=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()).map(str::to_owned))
}

fn unusable(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A fresh schema with the reviewed DDL in the test database; dropped at the end.
struct Store {
    /// The URL the binary gets (database switched; `localhost` for verify-full).
    url: String,
    schema: String,
    ca: Option<String>,
    admin_url: String,
}

async fn admin(url: &str) -> tokio_postgres::Client {
    let cfg = tokio_postgres::Config::from_str(url)
        .unwrap_or_else(|_| unusable("DPONE_TEST_PG_URL is not a valid connection URL"));
    let (client, conn) = match cfg.connect(tokio_postgres::NoTls).await {
        Ok(x) => x,
        Err(e) if e.code().is_some() => unusable("the server refused the login"),
        Err(_) => unusable("the server is not reachable"),
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// `url` with its database replaced.
fn with_database(url: &str, db: &str) -> String {
    let at = url.rfind('@').map_or(0, |i| i + 1);
    let (head, tail) = url.split_at(at);
    let (hostport, query) = match tail.find('/') {
        Some(i) => {
            let rest = &tail[i + 1..];
            let q = rest.find('?').map_or("", |j| &rest[j..]);
            (&tail[..i], q)
        }
        None => (tail, ""),
    };
    format!("{head}{hostport}/{db}{query}")
}

impl Store {
    async fn new() -> Store {
        let Some(url) = env_value("DPONE_TEST_PG_URL") else {
            unusable("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let root = admin(&url).await;
        let exists = root
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&TEST_DB])
            .await
            .expect("look up the test database")
            .is_some();
        if !exists
            && let Err(e) = root
                .batch_execute(&format!("CREATE DATABASE \"{TEST_DB}\""))
                .await
        {
            assert!(
                matches!(e.code().map(|c| c.code()), Some("42P04" | "23505")),
                "create the test database: {e}"
            );
        }
        let admin_url = with_database(&url, TEST_DB);
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).expect("random");
        let schema = format!("np_cli_{}_{}", std::process::id(), hex::encode(r));
        let ddl = std::fs::read_to_string(c::fixtures().join("control-store.sql"))
            .expect("the reviewed DDL")
            .replace("\"dpone_np_control\"", &format!("\"{schema}\""));
        admin(&admin_url)
            .await
            .batch_execute(&ddl)
            .await
            .expect("the reviewed DDL applies");
        let ca = env_value("DPONE_TEST_PG_CA");
        let url = if ca.is_some() {
            admin_url.replace("@127.0.0.1", "@localhost")
        } else {
            admin_url.clone()
        };
        Store {
            url,
            schema,
            ca,
            admin_url,
        }
    }

    fn args(&self) -> Vec<String> {
        let mut a = vec!["--store-schema".to_owned(), self.schema.clone()];
        match &self.ca {
            Some(ca) => a.extend([
                "--store-sslmode".to_owned(),
                "verify-full".to_owned(),
                "--store-sslrootcert".to_owned(),
                ca.clone(),
            ]),
            None => a.extend(["--store-sslmode".to_owned(), "disable".to_owned()]),
        }
        a
    }

    async fn drop_schema(self) {
        let _ = admin(&self.admin_url)
            .await
            .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
            .await;
    }
}

/// A campaign whose grants are valid now and signed a little earlier.
fn live_docs() -> Docs {
    let now = unix_now();
    let mut docs = Docs::new();
    docs.policy["validity"]["not_before"] = (now - 86_400).into();
    docs.policy["validity"]["not_after"] = (now + 30 * 86_400).into();
    for g in [&mut docs.qgrant, &mut docs.egrant] {
        g["validity"]["not_before"] = (now - 600).into();
        g["validity"]["not_after"] = (now + 6 * 3600).into();
    }
    docs.seal();
    docs
}

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
    let table = docs.policy["enrollment"]["participants"]
        .as_array()
        .expect("participants")
        .clone();
    let mut subjects = std::collections::BTreeSet::new();
    for w in composition["workloads"].as_array().expect("workloads") {
        for e in w["effects"].as_array().expect("effects") {
            subjects.insert((
                e["participant_id"].as_str().unwrap_or_default().to_owned(),
                e["relation"].as_str().unwrap_or_default().to_owned(),
            ));
        }
    }
    let ids: std::collections::BTreeSet<&String> = subjects.iter().map(|(p, _)| p).collect();
    let participants: Vec<Value> = ids
        .iter()
        .map(|id| {
            table
                .iter()
                .find(|p| p["participant_id"] == id.as_str())
                .cloned()
                .unwrap_or_else(|| panic!("participant {id}"))
        })
        .collect();
    composition["scope"] = serde_json::json!({
        "participants": participants,
        "subjects": subjects
            .iter()
            .map(|(p, r)| serde_json::json!({"participant_id": p, "relation": r}))
            .collect::<Vec<_>>(),
    });
    docs.seal();
    docs
}

fn attest(bytes: &[u8]) -> Vec<u8> {
    c::authority()
        .attest(
            &[dpone_test_attest_signer::Subject::of("grant.json", bytes)],
            &c::identity(),
            &dpone_test_attest_signer::AttestOptions {
                signed_at: Some(unix_now() - 300),
                ..Default::default()
            },
        )
        .expect("attest")
}

fn cache() -> (PathBuf, PathBuf) {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"));
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    (cache, dir.path().join("cache.key"))
}

struct Run<'a> {
    store: &'a Store,
    dir: tempfile::TempDir,
}

impl<'a> Run<'a> {
    fn new(store: &'a Store) -> Self {
        Self {
            store,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        p.display().to_string()
    }

    fn cli(&self, args: &[String]) -> Output {
        let (cache, key) = cache();
        let mut all = args.to_vec();
        all.extend(self.store.args());
        // Only the verifying commands load the scope component.
        if matches!(args.first().map(String::as_str), Some("grant" | "admit")) {
            all.extend(["--cache-dir".to_owned(), cache.display().to_string()]);
        }
        Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .env("DPONE_NP_STORE_URL", &self.store.url)
            .env("DPONE_CACHE_KEY", key)
            .arg("campaign")
            .args(&all)
            .output()
            .expect("run dpone-host")
    }

    fn policy_register(&self, docs: &Docs, epoch: Option<u64>) -> Output {
        let mut a = vec![
            "policy".to_owned(),
            "register".to_owned(),
            "--policy".to_owned(),
            self.file("policy.json", &c::canon(&docs.policy)),
            "--policy-digest".to_owned(),
            docs.policy_digest(),
            "--trusted-root".to_owned(),
            self.file("trusted_root.json", &c::trusted_root()),
        ];
        if let Some(e) = epoch {
            a.extend(["--revocation-epoch".to_owned(), e.to_string()]);
        }
        self.cli(&a)
    }

    /// The verification options of `grant register` / `admit` for one phase's grant.
    fn grant_args(&self, docs: &Docs, execution: bool, grant: &[u8]) -> Vec<String> {
        let mut a = vec![
            "--policy".to_owned(),
            self.file("policy.json", &c::canon(&docs.policy)),
            "--policy-digest".to_owned(),
            docs.policy_digest(),
            "--document".to_owned(),
            self.file("grant.json", grant),
            "--attestation".to_owned(),
            self.file("grant.sigstore.json", &attest(grant)),
            "--trusted-root".to_owned(),
            self.file("trusted_root.json", &c::trusted_root()),
            "--composition".to_owned(),
            self.file("composition.json", &c::canon(&docs.composition)),
        ];
        if execution {
            a.extend([
                "--request".to_owned(),
                self.file("request.json", &c::canon(&docs.request)),
                "--release-set".to_owned(),
                self.file("release-set.json", &c::canon(&docs.release)),
            ]);
        }
        a
    }

    fn grant_register(&self, docs: &Docs, execution: bool, grant: &[u8]) -> Output {
        let mut a = vec!["grant".to_owned(), "register".to_owned()];
        a.extend(self.grant_args(docs, execution, grant));
        self.cli(&a)
    }

    #[allow(clippy::too_many_arguments)]
    fn admit(
        &self,
        docs: &Docs,
        execution: bool,
        grant: &[u8],
        workload: &str,
        attempt: &str,
        rows: u64,
        bytes: u64,
    ) -> Output {
        let mut a = vec!["admit".to_owned()];
        a.extend(self.grant_args(docs, execution, grant));
        a.extend([
            "--workload".to_owned(),
            workload.to_owned(),
            "--attempt".to_owned(),
            attempt.to_owned(),
            "--source-rows".to_owned(),
            rows.to_string(),
            "--source-bytes".to_owned(),
            bytes.to_string(),
            "--attempt-seconds".to_owned(),
            "600".to_owned(),
        ]);
        self.cli(&a)
    }

    fn settle(&self, reservation: &str, rows: u64, bytes: u64, http: u64) -> Output {
        self.cli(&[
            "settle".to_owned(),
            "--reservation".to_owned(),
            reservation.to_owned(),
            "--source-rows".to_owned(),
            rows.to_string(),
            "--source-bytes".to_owned(),
            bytes.to_string(),
            "--http-bytes".to_owned(),
            http.to_string(),
            "--outcome".to_owned(),
            "succeeded".to_owned(),
        ])
    }

    fn status(&self, grant_id: &str, phase: &str, reservations: &[&str]) -> Output {
        let mut a = vec![
            "status".to_owned(),
            "--grant-id".to_owned(),
            grant_id.to_owned(),
            "--phase".to_owned(),
            phase.to_owned(),
        ];
        for r in reservations {
            a.extend(["--reservation".to_owned(), (*r).to_owned()]);
        }
        self.cli(&a)
    }
}

fn ok(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "refused: {} {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The refusal's code, after checking its exit status and that nothing names the connection.
fn refused(out: &Output, store: &Store, exit: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(exit),
        "exit status: {stderr} {stdout}"
    );
    for text in [&stderr, &stdout] {
        assert!(!text.contains(&store.url), "the URL leaked: {text}");
        assert!(
            !text.contains("127.0.0.1") && !text.contains("localhost"),
            "an endpoint leaked: {text}"
        );
    }
    let line = stderr.lines().last().unwrap_or_default();
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("<no code: {stderr}>"))
}

fn id(v: &Value) -> String {
    v.as_str().expect("a string").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn execution_journey_admits_settles_and_keeps_history_after_revocation() {
    let _ = SKIP;
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
    let secret = "postgres://user:s3cr3t-pw@db.internal.example:5432/x?sslmode=bogus-mode";
    let invalid = Command::new(bin)
        .env("DPONE_TEST_NP_STORE_URL_FOR_CLI", secret)
        .args(base)
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&invalid.stderr);
    assert_eq!(invalid.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("DPONE_CLI_CAMPAIGN_STORE_URL_INVALID"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3cr3t") && !stderr.contains("db.internal"),
        "{stderr}"
    );
    assert!(invalid.stdout.is_empty());
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
