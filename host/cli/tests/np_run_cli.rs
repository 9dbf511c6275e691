//! `dpone-host run --np-reservation` end to end on a real PostgreSQL server: the control store
//! (a fresh schema with the reviewed DDL, `support::np_store`), an execution campaign attested
//! by the offline test signer, `campaign admit` for the workload `pg-customers`, and the XMin
//! route (fresh source and target databases from the PostgreSQL adapter's test support) whose
//! manifest names that workload.
//!
//! Covered: a reservation of exactly the relation's rows and COPY bytes runs, settles complete
//! and `campaign status` shows it; a reservation one row short fails closed with the row-bound
//! code, leaves the target untouched and settles incomplete (still charged); a settled, a
//! foreign-workload and an unknown reservation, one whose duration bound elapsed, one whose
//! admitting policy is no longer the current trust revision and one whose grant was revoked
//! (`campaign policy register` with a higher epoch) are refused before any read (no run output,
//! no artifact directory, target unchanged); a malformed id and a ClickHouse manifest are bad
//! input before the store is touched. No output names the store's connection.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`; without a configured server these
//! tests are reported ignored with their SKIP reason, never passed).

mod support;

#[path = "../../../adapters/postgres/tests/support/mod.rs"]
mod pg;

use pg::{Fixture, Options};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use support::campaign as c;
use support::np_store::*;

/// The workload of the execution grant's membership the XMin manifest runs as.
const WORKLOAD: &str = "pg-customers";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// One XMin route (manifest named `name`) and its artifact directory.
struct Xmin<'a> {
    fixture: &'a Fixture,
    manifest: PathBuf,
    registry: PathBuf,
    artifacts: PathBuf,
}

impl<'a> Xmin<'a> {
    fn new(fixture: &'a Fixture, dir: &Path, name: &str) -> Self {
        let manifest = fixture
            .manifest_yaml
            .replace("name: items_to_dwh", &format!("name: {name}"));
        assert!(manifest.contains(&format!("name: {name}\n")), "{manifest}");
        Self {
            fixture,
            manifest: write(dir, &format!("{name}.yaml"), &manifest),
            registry: write(dir, "registry.yaml", &fixture.registry_yaml),
            artifacts: dir.join("artifacts"),
        }
    }

    /// `run` under `reservation` (or without one), invocation `invocation`.
    fn run(&self, store: &Store, invocation: &str, reservation: Option<&str>) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
        cmd.current_dir(root())
            .envs(&self.fixture.env)
            .env("DPONE_NP_STORE_URL", &store.url)
            .arg("run")
            .arg("--manifest")
            .arg(&self.manifest)
            .arg("--connections")
            .arg(&self.registry)
            .arg("--artifact-dir")
            .arg(&self.artifacts)
            .args(["--invocation", invocation]);
        if let Some(r) = reservation {
            cmd.args(["--np-reservation", r]).args(store.args());
        }
        cmd.output().expect("run dpone-host")
    }

    fn ran(&self, invocation: &str) -> bool {
        self.artifacts.join(invocation).exists()
    }
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A refusal before any read: its code, after checking that the run printed nothing, created
/// no artifact directory and named no endpoint.
fn refused_before_read(out: &Output, store: &Store, xmin: &Xmin<'_>, invocation: &str) -> String {
    let code = refused(out, store, 1);
    assert!(
        out.stdout.is_empty(),
        "a refused reservation prints no run: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !xmin.ran(invocation),
        "no artifact directory: the run did not start"
    );
    code
}

fn reservation(
    run: &Run<'_>,
    docs: &c::Docs,
    grant: &[u8],
    workload: &str,
    attempt: &str,
    rows: u64,
    bytes: u64,
) -> String {
    let a = run.admit(docs, true, grant, workload, attempt, rows, bytes);
    let a = ok(&a);
    assert_eq!(a["result"], "admitted");
    assert_eq!(a["reservation"]["source_rows"], rows);
    assert_eq!(a["reservation"]["source_bytes"], bytes);
    id(&a["reservation"]["reservation_id"])
}

/// The settled reservation `rid` as `campaign status` lists it.
fn listed(run: &Run<'_>, grant_id: &str, rid: &str) -> Value {
    let st = ok(&run.status(grant_id, "execution", &[rid]));
    st["reservations"]
        .as_array()
        .expect("reservations")
        .iter()
        .find(|r| r["reservation_id"] == rid)
        .cloned()
        .unwrap_or_else(|| panic!("status lists {rid}: {st}"))
}

const SOURCE_ROWS: &str = "INSERT INTO public.items SELECT g, 'item-' || g, g % 7, g * 1.25 FROM generate_series(1, 200) g";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_run_under_a_reservation_is_bounded_by_it_and_settles_what_it_read() {
    let dir = tempfile::tempdir().expect("tempdir");

    // The relation's exact rows and COPY payload bytes, measured by an unbounded run on a twin
    // fixture with the same rows.
    let twin = Fixture::new("nprun_m", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    twin.src_sql(SOURCE_ROWS).await;
    let measure_dir = dir.path().join("measure");
    std::fs::create_dir_all(&measure_dir).expect("dir");
    let m = Xmin::new(&twin, &measure_dir, WORKLOAD);
    let store = Store::new().await;
    let out = m.run(&store, "measure", None);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let measured = json(&out)["source_measurement"].clone();
    assert_eq!(measured["rows"], 200, "{measured}");
    assert_eq!(measured["complete"], true);
    let bytes = measured["source_bytes"].as_u64().expect("bytes");
    assert!(bytes > 200 * 20, "{measured}");

    // The campaign: policy, execution grant, the workload's reservations.
    let run = Run::new(&store);
    let docs = live_docs();
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    ok(&run.grant_register(&docs, true, &grant));

    let f = Fixture::new("nprun", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    f.src_sql(SOURCE_ROWS).await;
    let xmin = Xmin::new(&f, dir.path(), WORKLOAD);
    let empty = f.target_fingerprint().await;

    // One row short: exactly 199 rows pass, the 200th fails closed; the target is untouched
    // and the measured usage is settled incomplete (the reservation stays charged).
    let short = reservation(&run, &docs, &grant, WORKLOAD, "a1", 199, bytes);
    let out = xmin.run(&store, "short", Some(&short));
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_XMIN_SOURCE_ROW_BOUND_EXCEEDED"
    );
    let v = json(&out);
    assert_eq!(
        v["failure"]["error"]["code"], "DPONE_XMIN_SOURCE_ROW_BOUND_EXCEEDED",
        "{v}"
    );
    assert_eq!(v["source_measurement"]["complete"], false, "{v}");
    let np = &v["np_reservation"];
    assert_eq!(np["reservation_id"], short.as_str());
    assert_eq!(np["workload_id"], WORKLOAD);
    assert_eq!(np["bound"]["source_rows"], 199);
    let s = &np["settlement"];
    assert_eq!(s["result"], "recorded", "{v}");
    assert_eq!(s["outcome"], "incomplete");
    assert_eq!(s["complete"], false);
    assert_eq!(s["reservation_freed"], false);
    assert!(
        s["measured_source_rows"].as_i64().is_some_and(|r| r <= 199),
        "{s}"
    );
    assert_eq!(
        f.target_fingerprint().await,
        empty,
        "the target is untouched"
    );
    assert!(f.active_keys().await.is_empty());
    let l = listed(&run, &grant_id, &short);
    assert_eq!(l["state"], "settled");
    assert_eq!(l["settlement"]["outcome"], "incomplete");
    assert_eq!(l["source_rows"], 199, "the reservation is not lowered");

    // The settled reservation is no longer RUNNING: refused before any read.
    let again = xmin.run(&store, "again", Some(&short));
    assert_eq!(
        refused_before_read(&again, &store, &xmin, "again"),
        "DPONE_NP_STORE_RESERVATION_RESOLVED"
    );

    // A reservation of another workload, and an unknown one: refused before any read.
    let foreign = reservation(&run, &docs, &grant, "export-orders-mart", "x1", 10, 4096);
    let out = xmin.run(&store, "foreign", Some(&foreign));
    assert_eq!(
        refused_before_read(&out, &store, &xmin, "foreign"),
        "DPONE_CLI_NP_RESERVATION_WORKLOAD_MISMATCH"
    );
    let unknown = c::digest(&Value::Null);
    let out = xmin.run(&store, "unknown", Some(&unknown));
    assert_eq!(
        refused_before_read(&out, &store, &xmin, "unknown"),
        "DPONE_NP_STORE_RESERVATION_UNKNOWN"
    );
    let out = xmin.run(&store, "malformed", Some("sha256:nothex"));
    assert_eq!(refused(&out, &store, 3), "DPONE_NP_STORE_INVALID_INPUT");
    assert!(!xmin.ran("malformed"));
    assert_eq!(
        listed(&run, &grant_id, &foreign)["state"],
        "unresolved",
        "a refused run settles nothing"
    );

    // Exactly the relation's rows and bytes: the run completes and settles complete.
    let exact = reservation(&run, &docs, &grant, WORKLOAD, "a2", 200, bytes);
    let out = xmin.run(&store, "exact", Some(&exact));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["source_measurement"]["rows"], 200, "{v}");
    assert_eq!(v["source_measurement"]["source_bytes"], bytes);
    let s = &v["np_reservation"]["settlement"];
    assert_eq!(s["result"], "recorded", "{v}");
    assert_eq!(s["outcome"], "succeeded");
    assert_eq!(s["complete"], true);
    assert_eq!(s["measured_source_rows"], 200);
    assert_eq!(s["measured_source_bytes"], bytes);
    assert_eq!(s["clamped_to_reservation"], false);
    assert_eq!(f.active_keys().await, f.source_keys().await);
    let l = listed(&run, &grant_id, &exact);
    assert_eq!(l["state"], "settled");
    assert_eq!(l["settlement"]["outcome"], "succeeded");
    assert_eq!(l["settlement"]["measured_source_rows"], 200);
    assert_eq!(l["settlement"]["measured_source_bytes"], bytes);
    let st = ok(&run.status(&grant_id, "execution", &[]));
    assert_eq!(
        st["pool"]["reserved_source_rows"],
        199 + 10 + 200,
        "never refunded"
    );
    assert_eq!(st["pool"]["unresolved"], 1, "only the foreign reservation");

    // The attempt's duration bound elapsed since its reservation: refused before any read;
    // settled by hand so that the workload may be admitted again.
    f.src_sql("UPDATE public.items SET qty = qty + 1 WHERE id <= 10")
        .await;
    let before = f.target_fingerprint().await;
    let mut a = vec!["admit".to_owned()];
    a.extend(run.grant_args(&docs, true, &grant));
    a.extend(
        [
            "--workload",
            WORKLOAD,
            "--attempt",
            "a3",
            "--source-rows",
            "200",
            "--source-bytes",
            &bytes.to_string(),
            "--attempt-seconds",
            "1",
        ]
        .map(str::to_owned),
    );
    let brief = id(&ok(&run.cli(&a))["reservation"]["reservation_id"]);
    std::thread::sleep(std::time::Duration::from_millis(2100));
    let out = xmin.run(&store, "elapsed", Some(&brief));
    assert_eq!(
        refused_before_read(&out, &store, &xmin, "elapsed"),
        "DPONE_NP_STORE_ATTEMPT_WINDOW_ELAPSED"
    );
    let s = ok(&run.cli(
        &[
            "settle",
            "--reservation",
            &brief,
            "--source-rows",
            "0",
            "--source-bytes",
            "0",
            "--outcome",
            "failed",
        ]
        .map(str::to_owned),
    ));
    assert_eq!(s["result"], "recorded");

    // Another policy becomes the current trust revision after admission: refused before any
    // read (the reservation was admitted under the pinned policy).
    let pending = reservation(&run, &docs, &grant, WORKLOAD, "a4", 200, bytes);
    let mut other = docs.clone();
    other.policy["validity"]["not_after"] = (other.policy["validity"]["not_after"]
        .as_u64()
        .expect("not_after")
        + 1)
    .into();
    other.seal();
    assert_eq!(
        ok(&run.policy_register(&other, None))["trust"]["revision"],
        2
    );
    let out = xmin.run(&store, "changed", Some(&pending));
    assert_eq!(
        refused_before_read(&out, &store, &xmin, "changed"),
        "DPONE_NP_STORE_TRUST_REVISION_CHANGED"
    );

    // Revocation after admission: the pinned policy again, with a higher epoch, refuses the run
    // before any read, although the reservation is RUNNING.
    assert_eq!(
        ok(&run.policy_register(&docs, Some(4)))["trust"]["revision"],
        3
    );
    let out = xmin.run(&store, "revoked", Some(&pending));
    assert_eq!(
        refused_before_read(&out, &store, &xmin, "revoked"),
        "DPONE_NP_STORE_GRANT_REVOKED"
    );
    assert_eq!(
        f.target_fingerprint().await,
        before,
        "nothing was read or written"
    );
    assert_eq!(listed(&run, &grant_id, &pending)["state"], "unresolved");

    store.drop_schema().await;
}

#[test]
fn bad_input_is_refused_before_the_store_is_touched() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clickhouse = write(dir.path(), "ch.yaml", "version: 1\nphysical_design: {}\n");
    let xmin = write(dir.path(), "x.yaml", "version: 1\nreconciliation: {}\n");
    let run = |manifest: &Path, reservation: &str| {
        Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .current_dir(root())
            .env(
                "DPONE_NP_STORE_URL",
                "postgresql://u:secret-pw@db.invalid/x",
            )
            .arg("run")
            .arg("--manifest")
            .arg(manifest)
            .args(["--np-reservation", reservation])
            .output()
            .expect("run dpone-host")
    };
    let code = |out: &Output| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !stderr.contains("secret-pw") && !stderr.contains("db.invalid"),
            "{stderr}"
        );
        assert!(out.stdout.is_empty());
        let line = stderr.lines().last().unwrap_or_default();
        (
            out.status.code(),
            serde_json::from_str::<Value>(line)
                .ok()
                .and_then(|v| v["error"].as_str().map(str::to_owned)),
        )
    };
    let valid = c::digest(&Value::Null);
    assert_eq!(
        code(&run(&clickhouse, &valid)),
        (
            Some(3),
            Some("DPONE_CLI_NP_RESERVATION_ROUTE_UNSUPPORTED".to_owned())
        )
    );
    assert_eq!(
        code(&run(&xmin, "sha256:XYZ")),
        (Some(3), Some("DPONE_NP_STORE_INVALID_INPUT".to_owned()))
    );
}
