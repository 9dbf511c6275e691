//! `dpone-host run --np-reservation` end to end: the control store (a fresh schema with the
//! reviewed DDL, `support::np_store`), an execution campaign attested by the offline test
//! signer whose composition pins the workload's pack digest to the manifest's exact bytes,
//! `campaign admit`, and the route run as the binary.
//!
//! XMin route (fresh source and target databases from the PostgreSQL adapter's test support,
//! manifest named `pg-customers`): a reservation of exactly the relation's rows and COPY bytes
//! runs, settles complete and `campaign status` shows it; a reservation one row short fails
//! closed with the row-bound code, leaves the target untouched and settles incomplete (still
//! charged); a settled, a foreign-workload and an unknown reservation, a manifest with the
//! right name but other bytes, one whose duration bound elapsed, one whose admitting policy is
//! no longer the current trust revision and one whose grant was revoked (`campaign policy
//! register` with a higher epoch) are refused before any read (no run output, no artifact
//! directory, target unchanged); a run whose source is held up past the reservation's
//! `attempt_seconds` is stopped at its deadline, settles incomplete and leaves the target
//! unchanged; a malformed id and a malformed ClickHouse manifest are bad input before the
//! store is touched. Eight `run` processes started together under one reservation: exactly one
//! claims it, reads and settles; the seven others are refused before any read.
//!
//! ClickHouse route (the real-engine tier of `.ci/start-clickhouse`, from a PostgreSQL source
//! database of its own): the exact bound publishes and settles `succeeded` with the measured
//! source rows and bytes and the HTTP body bytes sent; one row short fails closed with the
//! rowbinary bound code, publishes nothing (members unchanged) and settles `incomplete`; a run
//! whose source is held up past its deadline is stopped before anything is published, settles
//! `incomplete`, and the same operation then resumes and completes under a new reservation.
//! No output names the store's connection or an endpoint.
//!
//! Tier: real database integration (`cfg(dpone_live_pg)`, and for the ClickHouse route also
//! `cfg(dpone_live_clickhouse)`; without a configured server these tests are reported ignored
//! with their SKIP reason, never passed).

mod support;

#[path = "../../../adapters/postgres/tests/support/mod.rs"]
mod pg;

use pg::{Fixture, Options};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::campaign as c;
use support::np_store::*;

use support::np_xmin::WORKLOAD;

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
    /// The composition a reservation run names (`--np-composition`), written by
    /// [`Xmin::bind`].
    composition: PathBuf,
}

impl<'a> Xmin<'a> {
    fn new(fixture: &'a Fixture, dir: &Path, name: &str) -> Self {
        let manifest = fixture
            .manifest_yaml
            .replace("name: items_to_dwh", &format!("name: {name}"));
        assert!(manifest.contains(&format!("name: {name}\n")), "{manifest}");
        Self::with_text(fixture, dir, name, &manifest)
    }

    /// The route with exactly `manifest` as its manifest file.
    fn with_text(fixture: &'a Fixture, dir: &Path, name: &str, manifest: &str) -> Self {
        Self::with_registry(fixture, dir, name, manifest, &fixture.registry_yaml)
    }

    /// The route with exactly `manifest` and `registry` as its files.
    fn with_registry(
        fixture: &'a Fixture,
        dir: &Path,
        name: &str,
        manifest: &str,
        registry: &str,
    ) -> Self {
        Self {
            fixture,
            manifest: write(dir, &format!("{name}.yaml"), manifest),
            registry: write(dir, "registry.yaml", registry),
            artifacts: dir.join("artifacts"),
            composition: dir.join("composition.json"),
        }
    }

    /// Writes the campaign's composition for `--np-composition`.
    fn bind(&self, docs: &c::Docs) {
        std::fs::write(&self.composition, c::canon(&docs.composition)).expect("write");
    }

    /// `campaign enroll` of `participant` through this route's registry connection
    /// `connection`.
    fn enroll(&self, run: &Run<'_>, docs: &c::Docs, participant: &str, connection: &str) -> Output {
        let args =
            support::np_xmin::enroll_args(run, docs, participant, &self.registry, connection);
        run.command(&args)
            .envs(&self.fixture.env)
            .output()
            .expect("run dpone-host")
    }

    /// Enrolls the route's source (`synth-pg-read`) and target (`synth-pg-write`) databases.
    fn enroll_both(&self, run: &Run<'_>, docs: &c::Docs) {
        for (p, conn) in [(PG_READ, "pg_source"), (PG_WRITE, "pg_target")] {
            let v = ok(&self.enroll(run, docs, p, conn));
            assert_eq!(v["result"], "enrolled", "{v}");
        }
    }

    /// `sha256:` of the manifest file's exact bytes: the workload's pack digest.
    fn pack(&self) -> String {
        pack_of(&self.manifest)
    }

    /// `run` under `reservation` (or without one), invocation `invocation`.
    fn run(&self, store: &Store, invocation: &str, reservation: Option<&str>) -> Output {
        self.command(store, invocation, reservation)
            .output()
            .expect("run dpone-host")
    }

    /// The `run` command line, not started.
    fn command(&self, store: &Store, invocation: &str, reservation: Option<&str>) -> Command {
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
            cmd.args(["--np-reservation", r])
                .arg("--np-composition")
                .arg(&self.composition)
                .args(store.args());
        }
        cmd
    }

    fn ran(&self, invocation: &str) -> bool {
        self.artifacts.join(invocation).exists()
    }
}

/// `sha256:<hex>` of a file's exact bytes.
fn pack_of(path: &Path) -> String {
    dpone_engine_nonproduction::fields::Digest::of(&std::fs::read(path).expect("read the manifest"))
        .as_str()
        .to_owned()
}

/// A campaign whose workload `WORKLOAD` is the manifest whose digest is `pack` (its route as
/// the fixtures have it: the ClickHouse route is not physically bound).
use support::np_xmin::{CH_WRITE, PG_READ, PG_WRITE};

/// [`support::np_xmin::xmin_docs`] for fixture `f`'s source and target databases.
fn xmin_docs(pack: &str, f: &Fixture, read: &str) -> c::Docs {
    support::np_xmin::xmin_docs(pack, &f.src.name, &f.pg_target_db().name, read)
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
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_run_under_a_reservation_is_bounded_by_it_and_settles_what_it_read() {
    let _live = one_at_a_time();
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

    let f = Fixture::new("nprun", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    f.src_sql(SOURCE_ROWS).await;
    let xmin = Xmin::new(&f, dir.path(), WORKLOAD);
    let empty = f.target_fingerprint().await;

    // The campaign: policy, execution grant (the workload's pack is this manifest), the
    // workload's reservations.
    let run = Run::new(&store);
    let docs = xmin_docs(&xmin.pack(), &f, "public.items");
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    xmin.bind(&docs);
    xmin.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));

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
    assert!(
        l["run_claimed_at_unix"]
            .as_i64()
            .is_some_and(|t| t >= l["reserved_at_unix"].as_i64().expect("reserved")),
        "the run that read under it claimed it: {l}"
    );
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

    // Exactly the relation's rows and bytes: the run completes and settles complete. Before
    // that, a manifest with the workload's name but other bytes (one comment line more) is
    // refused under the same RUNNING reservation before any read.
    let exact = reservation(&run, &docs, &grant, WORKLOAD, "a2", 200, bytes);
    let edited_dir = dir.path().join("edited");
    std::fs::create_dir_all(&edited_dir).expect("dir");
    let text = std::fs::read_to_string(&xmin.manifest).expect("manifest");
    let edited = Xmin::with_text(&f, &edited_dir, WORKLOAD, &format!("{text}# edited\n"));
    assert_ne!(edited.pack(), xmin.pack());
    edited.bind(&docs);
    let before_edit = f.target_fingerprint().await;
    let out = edited.run(&store, "edited", Some(&exact));
    assert_eq!(
        refused_before_read(&out, &store, &edited, "edited"),
        "DPONE_CLI_NP_RESERVATION_MANIFEST_MISMATCH"
    );
    assert_eq!(f.target_fingerprint().await, before_edit);
    assert_eq!(
        listed(&run, &grant_id, &exact)["state"],
        "unresolved",
        "a refused run settles nothing"
    );
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
    assert_eq!(
        bound_roles(&l),
        [
            ("source", PG_READ),
            ("state", PG_WRITE),
            ("target", PG_WRITE)
        ]
        .map(|(r, p)| (r.to_owned(), p.to_owned())),
        "the run was bound to the enrolled participants of its route: {l}"
    );
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
    let l = listed(&run, &grant_id, &pending);
    assert_eq!(l["state"], "unresolved");
    assert!(
        l["run_claimed_at_unix"].is_null(),
        "runs refused before the claim leave it unclaimed: {l}"
    );

    store.drop_schema().await;
}

/// The (role, participant) pairs a listed reservation's run was bound to.
fn bound_roles(l: &Value) -> Vec<(String, String)> {
    l["participants"]
        .as_array()
        .expect("participants")
        .iter()
        .map(|p| {
            assert!(
                p["identity_digest"]
                    .as_str()
                    .is_some_and(|d| d.starts_with("sha256:")),
                "{p}"
            );
            (id(&p["role"]), id(&p["participant_id"]))
        })
        .collect()
}

/// No endpoint or credential in a command's output.
fn no_endpoint(out: &Output, f: &Fixture) {
    for text in [
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    ] {
        assert!(
            !text.contains("127.0.0.1") && !text.contains("localhost"),
            "an endpoint leaked: {text}"
        );
        for secret in f.env.values() {
            assert!(
                secret.len() < 4 || !text.contains(secret.as_str()),
                "a credential leaked"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_run_is_bound_to_the_enrolled_participants_of_its_route_before_any_read() {
    let _live = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new().await;
    let f = Fixture::new("npbind", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    f.src_sql(SOURCE_ROWS).await;
    // Another source and target database on the same server, with the same rows.
    let other = Fixture::new("npbind_o", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    other.src_sql(SOURCE_ROWS).await;
    let xmin = Xmin::new(&f, dir.path(), WORKLOAD);
    let text = std::fs::read_to_string(&xmin.manifest).expect("manifest");
    let run = Run::new(&store);
    let docs = xmin_docs(&xmin.pack(), &f, "public.items");
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    xmin.bind(&docs);

    // Enrollment: only a participant of the pinned policy's enrollment, only through a
    // connection of its engine; the identity observed live, no endpoint printed.
    let out = xmin.enroll(&run, &docs, "synth-nobody", "pg_source");
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_CLI_CAMPAIGN_ENROLL_PARTICIPANT_UNKNOWN"
    );
    // A participant is observed only through a connection of its engine.
    let out = xmin.enroll(&run, &docs, "synth-mssql-write", "pg_source");
    assert_eq!(
        refused(&out, &store, 3),
        "DPONE_CLI_CAMPAIGN_ENROLL_CONNECTION_UNKNOWN"
    );
    // A ClickHouse participant is observed on a cluster's database, named explicitly.
    let out = xmin.enroll(&run, &docs, "synth-ch-write", "pg_source");
    assert_eq!(refused(&out, &store, 3), "DPONE_CLI_ARGUMENT");
    let out = xmin.enroll(&run, &docs, PG_READ, "pg_source");
    no_endpoint(&out, &f);
    let e = ok(&out);
    assert_eq!(e["result"], "enrolled", "{e}");
    assert_eq!(e["participant_id"], PG_READ);
    assert_eq!(e["identity"]["database_name"], f.src.name.as_str());
    assert_eq!(e["trust_revision"], 1);
    let again = ok(&xmin.enroll(&run, &docs, PG_READ, "pg_source"));
    assert_eq!(
        again["result"], "reopened",
        "the same identity is idempotent"
    );
    assert_eq!(again["identity_digest"], e["identity_digest"]);
    // The same participant observed on another database: append-only, refused.
    let other_dir = dir.path().join("other");
    std::fs::create_dir_all(&other_dir).expect("dir");
    let elsewhere = Xmin::with_registry(&other, &other_dir, WORKLOAD, &text, &other.registry_yaml);
    assert_eq!(elsewhere.pack(), xmin.pack(), "the same manifest bytes");
    elsewhere.bind(&docs);
    let out = elsewhere.enroll(&run, &docs, PG_READ, "pg_source");
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_NP_STORE_ENROLLMENT_CONFLICT"
    );

    ok(&run.grant_register(&docs, true, &grant));
    let rid = reservation(&run, &docs, &grant, WORKLOAD, "b1", 200, 1 << 20);
    let (empty, other_empty) = (
        f.target_fingerprint().await,
        other.target_fingerprint().await,
    );
    let untouched = |what: &str, out: &Output, x: &Xmin<'_>, invocation: &str, code: &str| {
        assert_eq!(
            refused_before_read(out, &store, x, invocation),
            code,
            "{what}"
        );
        no_endpoint(out, x.fixture);
        let l = listed(&run, &grant_id, &rid);
        assert_eq!(l["state"], "unresolved", "{what}: nothing settled: {l}");
        assert!(l["run_claimed_at_unix"].is_null(), "{what}: unclaimed: {l}");
    };

    // The route's target participant is not enrolled.
    let out = xmin.run(&store, "unenrolled", Some(&rid));
    untouched(
        "target not enrolled",
        &out,
        &xmin,
        "unenrolled",
        "DPONE_CLI_NP_PARTICIPANT_NOT_ENROLLED",
    );
    let w = ok(&xmin.enroll(&run, &docs, PG_WRITE, "pg_target"));
    assert_eq!(
        w["identity"]["database_name"],
        f.pg_target_db().name.as_str()
    );

    // The same manifest bytes with the registry (endpoints and pins) pointed at other
    // databases of the server: the source, then only the target.
    let out = elsewhere.run(&store, "moved-source", Some(&rid));
    untouched(
        "source elsewhere",
        &out,
        &elsewhere,
        "moved-source",
        "DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH",
    );
    let at = |y: &str| y.find("  pg_target:").expect("the target connection");
    let spliced = format!(
        "{}{}",
        &f.registry_yaml[..at(&f.registry_yaml)],
        &other.registry_yaml[at(&other.registry_yaml)..]
    );
    let target_dir = dir.path().join("target");
    std::fs::create_dir_all(&target_dir).expect("dir");
    let moved = Xmin::with_registry(&f, &target_dir, WORKLOAD, &text, &spliced);
    moved.bind(&docs);
    let out = moved.run(&store, "moved-target", Some(&rid));
    untouched(
        "target elsewhere",
        &out,
        &moved,
        "moved-target",
        "DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH",
    );

    // A registry key that is only an ASCII-case variant of the manifest's relation.
    assert!(f.registry_yaml.contains("public.items:"));
    let case_dir = dir.path().join("case");
    std::fs::create_dir_all(&case_dir).expect("dir");
    let case = Xmin::with_registry(
        &f,
        &case_dir,
        WORKLOAD,
        &text,
        &f.registry_yaml.replace("public.items:", "Public.Items:"),
    );
    case.bind(&docs);
    let out = case.run(&store, "case", Some(&rid));
    untouched(
        "case-variant key",
        &out,
        &case,
        "case",
        "DPONE_CLI_NP_RELATION_CASE_ALIAS",
    );

    // A composition that is not the one the grant binds.
    let mut forged = docs.clone();
    forged.composition["composition_id"] = "7c9e6679-7425-40de-944b-e07fc1f90ae7".into();
    xmin.bind(&forged);
    let out = xmin.run(&store, "forged", Some(&rid));
    untouched(
        "another composition",
        &out,
        &xmin,
        "forged",
        "DPONE_CLI_NP_COMPOSITION_MISMATCH",
    );
    xmin.bind(&docs);

    for (what, target, before) in [
        ("target", &f, &empty),
        ("other target", &other, &other_empty),
    ] {
        assert_eq!(
            &target.target_fingerprint().await,
            before,
            "{what}: nothing written"
        );
        assert!(target.active_keys().await.is_empty(), "{what}: no rows");
    }

    // The bound run: the enrolled participants, the workload's relations.
    let out = xmin.run(&store, "bound", Some(&rid));
    let v = ok_run(&out);
    assert_eq!(
        v["np_reservation"]["settlement"]["outcome"], "succeeded",
        "{v}"
    );
    assert_eq!(f.active_keys().await.len(), 200);
    let l = listed(&run, &grant_id, &rid);
    assert_eq!(
        bound_roles(&l),
        [
            ("source", PG_READ),
            ("state", PG_WRITE),
            ("target", PG_WRITE)
        ]
        .map(|(r, p)| (r.to_owned(), p.to_owned()))
    );
    store.drop_schema().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_relation_outside_the_workloads_subjects_is_refused_before_any_read() {
    let _live = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new().await;
    let f = Fixture::new("npscope", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    f.src_sql(SOURCE_ROWS).await;
    let xmin = Xmin::new(&f, dir.path(), WORKLOAD);
    let run = Run::new(&store);
    // The signed workload reads another relation of the same participant.
    let docs = xmin_docs(&xmin.pack(), &f, "public.items_archive");
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    xmin.bind(&docs);
    xmin.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));
    let rid = reservation(&run, &docs, &grant, WORKLOAD, "s1", 200, 1 << 20);
    let empty = f.target_fingerprint().await;
    let out = xmin.run(&store, "scope", Some(&rid));
    assert_eq!(
        refused_before_read(&out, &store, &xmin, "scope"),
        "DPONE_CLI_NP_RELATION_OUT_OF_SCOPE"
    );
    assert_eq!(f.target_fingerprint().await, empty);
    assert!(f.active_keys().await.is_empty());
    let l = listed(&run, &grant_id, &rid);
    assert_eq!(l["state"], "unresolved");
    assert!(l["run_claimed_at_unix"].is_null());
    store.drop_schema().await;
}

/// `campaign admit` of `WORKLOAD` with the given attempt seconds.
fn admit_for(
    run: &Run<'_>,
    docs: &c::Docs,
    grant: &[u8],
    attempt: &str,
    rows: u64,
    bytes: u64,
    seconds: u64,
) -> String {
    let mut a = vec!["admit".to_owned()];
    a.extend(run.grant_args(docs, true, grant));
    a.extend(
        [
            "--workload",
            WORKLOAD,
            "--attempt",
            attempt,
            "--source-rows",
            &rows.to_string(),
            "--source-bytes",
            &bytes.to_string(),
            "--attempt-seconds",
            &seconds.to_string(),
        ]
        .map(str::to_owned),
    );
    let a = ok(&run.cli(&a));
    assert_eq!(a["reservation"]["attempt_seconds"], seconds, "{a}");
    id(&a["reservation"]["reservation_id"])
}

/// The attempt's duration bound: short enough to elapse while the source waits, long enough
/// for a debug binary on a busy machine to start, pass the reservation's checks and reach the
/// source read before it elapses (startup alone has taken seconds on a loaded 2-core runner).
const BRIEF_SECONDS: u64 = 30;

/// The live tests of this file run one at a time: the deadline tests measure time from the
/// reservation, and the others' binaries would compete with them for the CPU.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static LIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn an_xmin_run_past_its_attempt_deadline_is_stopped_uncommitted_and_settled_incomplete() {
    let _live = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new().await;
    let f = Fixture::new("npdead", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    f.src_sql(SOURCE_ROWS).await;
    let xmin = Xmin::new(&f, dir.path(), WORKLOAD);
    let before = f.target_fingerprint().await;
    let run = Run::new(&store);
    let docs = xmin_docs(&xmin.pack(), &f, "public.items");
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    xmin.bind(&docs);
    xmin.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));

    // A genuinely slow source: another session holds the relation in ACCESS EXCLUSIVE mode,
    // so the source's ACCESS SHARE lock waits far beyond the attempt's duration bound.
    let holder = f.src.client().await;
    holder
        .batch_execute("BEGIN; LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("hold the source relation");
    let rid = admit_for(&run, &docs, &grant, "d1", 200, 1 << 20, BRIEF_SECONDS);
    let started = std::time::Instant::now();
    let out = xmin.run(&store, "deadline", Some(&rid));
    let took = started.elapsed();
    holder.batch_execute("ROLLBACK").await.expect("release");

    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_CLI_NP_ATTEMPT_DEADLINE_EXCEEDED"
    );
    assert!(
        took < std::time::Duration::from_secs(BRIEF_SECONDS + 10),
        "stopped at the deadline, not when the lock was released: {took:?}"
    );
    let v = json(&out);
    assert_eq!(
        v["failure"]["error"]["code"], "DPONE_XMIN_ATTEMPT_DEADLINE_EXCEEDED",
        "{v}"
    );
    assert_eq!(v["failure"]["rolled_back"], true, "{v}");
    let s = &v["np_reservation"]["settlement"];
    assert_eq!(s["result"], "recorded", "{v}");
    assert_eq!(s["outcome"], "incomplete");
    assert_eq!(s["complete"], false);
    assert_eq!(s["measured_source_rows"], 0, "the read never got a row");
    assert_eq!(
        v["np_reservation"]["bound"]["attempt_seconds"],
        BRIEF_SECONDS
    );
    assert_eq!(
        f.target_fingerprint().await,
        before,
        "nothing was committed"
    );
    assert!(f.active_keys().await.is_empty());
    let l = listed(&run, &grant_id, &rid);
    assert_eq!(l["state"], "settled");
    assert_eq!(l["settlement"]["outcome"], "incomplete");

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
            .arg("--np-composition")
            .arg(root().join("fixtures/nonproduction/composition.json"))
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
    // A ClickHouse manifest takes a reservation; a malformed one is refused as the route
    // refuses it, before the store is contacted.
    let valid = c::digest(&Value::Null);
    let (exit, code_of) = code(&run(&clickhouse, &valid));
    assert_eq!(exit, Some(3));
    assert!(
        code_of
            .as_deref()
            .is_some_and(|c| c.starts_with("DPONE_CLICKHOUSE_MANIFEST_")),
        "{code_of:?}"
    );
    assert_eq!(
        code(&run(&xmin, "sha256:XYZ")),
        (Some(3), Some("DPONE_NP_STORE_INVALID_INPUT".to_owned()))
    );
}

/// The ClickHouse route of workload `WORKLOAD` on the real-engine tier: a PostgreSQL source
/// database of its own (`public.source_table`, 1000 rows), a registry and a manifest as an
/// operator writes them, and a target table of its own.
struct ChRoute {
    admin_url: String,
    db: String,
    ch_url: String,
    ch_user: String,
    ch_password: String,
    pg_password: String,
    members: Vec<String>,
    database: String,
    authority_table: String,
    cluster: String,
    target: String,
    dir: tempfile::TempDir,
    registry: PathBuf,
    manifest: PathBuf,
    /// The composition a reservation run names (`--np-composition`), written by
    /// [`ChRoute::bind`].
    composition: PathBuf,
}

const CH_ROWS: u64 = 1000;

impl ChRoute {
    async fn new(tag: &str) -> Self {
        let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is set"));
        let opt = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
        let ch_url = var("DPONE_TEST_CLICKHOUSE_URL");
        let member_urls = var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS");
        let Some(url) = env_value("DPONE_TEST_PG_URL") else {
            unusable("no PostgreSQL server beside the ClickHouse tier");
        };
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .expect("a postgres:// URL");
        let (auth, hostpart) = rest.split_once('@').expect("user@host");
        let (user, pg_password) = auth.split_once(':').unwrap_or((auth, ""));
        let hostport = hostpart.split(['/', '?']).next().expect("host");
        let (host, port) = hostport.split_once(':').unwrap_or((hostport, "5432"));
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).expect("random");
        let suffix = format!("{}_{}", std::process::id(), hex::encode(r));
        let db = format!("dpone_t_npch_{tag}_{suffix}");
        admin(&url)
            .await
            .batch_execute(&format!("CREATE DATABASE \"{db}\""))
            .await
            .expect("create the source database");
        admin(&with_database(&url, &db))
            .await
            .batch_execute(&format!(
                "CREATE TABLE public.source_table (id bigint NOT NULL, note text NOT NULL); \
                 INSERT INTO public.source_table SELECT i, 'n' || i \
                 FROM generate_series(1, {CH_ROWS}) i"
            ))
            .await
            .expect("fill the source");
        let database = opt("DPONE_TEST_CLICKHOUSE_DATABASE", "dpone_test");
        let authority = opt(
            "DPONE_TEST_CLICKHOUSE_AUTHORITY",
            "dpone_test.dpone_authority",
        );
        let (adb, atable) = authority.split_once('.').expect("db.table");
        let mut members = Vec::new();
        let member_yaml: String = member_urls
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|item| {
                let (key, url) = item.split_once('=').expect("shard:replica=url");
                let (sh, re) = key.split_once(':').expect("shard:replica");
                members.push(url.to_owned());
                format!("      - {{shard_num: {sh}, replica_num: {re}, url: '{url}'}}\n")
            })
            .collect();
        let ch_user = opt("DPONE_TEST_CLICKHOUSE_USER", "default");
        let dir = tempfile::tempdir().expect("tempdir");
        let tls_yaml = tier_tls_yaml();
        let registry = write(
            dir.path(),
            "registry.yaml",
            &format!(
                "version: 1\nconnections:\n  analytics_ch:\n    kind: clickhouse_cluster\n    coordinator_url: '{ch_url}'\n    members:\n{member_yaml}    user: '{ch_user}'\n    password_env: DPONE_CLICKHOUSE_PASSWORD\n{tls_yaml}    authority: {{database: {adb}, table: {atable}}}\n    ddl_task_timeout_secs: 60\n  pg_source:\n    kind: postgres_source\n    endpoint: {{host: '{host}', port: {port}, database: '{db}', user: '{user}', sslmode: disable}}\n    password_env: DPONE_PG_SOURCE_PASSWORD\n"
            ),
        );
        let target = format!("np_{tag}_{suffix}");
        let manifest = write(dir.path(), "manifest.yaml", &Self::manifest(&target));
        let composition = dir.path().join("composition.json");
        Self {
            admin_url: url.clone(),
            db,
            ch_url,
            ch_user,
            ch_password: opt("DPONE_TEST_CLICKHOUSE_PASSWORD", ""),
            pg_password: pg_password.to_owned(),
            members,
            database,
            authority_table: atable.to_owned(),
            cluster: std::env::var("DPONE_TEST_CLICKHOUSE_CLUSTER")
                .unwrap_or_else(|_| "analytics_cluster".to_owned()),
            target,
            dir,
            registry,
            manifest,
            composition,
        }
    }

    /// The campaign documents of this route: `WORKLOAD` is its manifest, routed truthfully
    /// from `synth-pg-read` (this source database) to `synth-ch-write` (the tier's database).
    fn docs(&self) -> c::Docs {
        support::np_xmin::clickhouse_docs(
            &self.pack(),
            &self.db,
            "public.source_table",
            &self.database,
            &self.target,
            &self.authority_table,
        )
    }

    /// Writes the campaign's composition for `--np-composition`.
    fn bind(&self, docs: &c::Docs) {
        std::fs::write(&self.composition, c::canon(&docs.composition)).expect("write");
    }

    /// `campaign enroll` of `participant` through this route's registry connection
    /// `connection` (`clickhouse`: with this route's database and cluster).
    fn enroll(&self, run: &Run<'_>, docs: &c::Docs, participant: &str, connection: &str) -> Output {
        let mut args =
            support::np_xmin::enroll_args(run, docs, participant, &self.registry, connection);
        if participant == CH_WRITE {
            args.extend([
                "--database".to_owned(),
                self.database.clone(),
                "--cluster".to_owned(),
                self.cluster.clone(),
            ]);
        }
        run.command(&args)
            .env("DPONE_CLICKHOUSE_PASSWORD", &self.ch_password)
            .env("DPONE_PG_SOURCE_PASSWORD", &self.pg_password)
            .output()
            .expect("run dpone-host")
    }

    /// Enrolls the route's source database (`synth-pg-read`) and the tier's database on every
    /// member (`synth-ch-write`), and writes the composition.
    fn enroll_both(&self, run: &Run<'_>, docs: &c::Docs) {
        for (p, conn) in [(PG_READ, "pg_source"), (CH_WRITE, "analytics_ch")] {
            let v = ok(&self.enroll(run, docs, p, conn));
            assert_eq!(v["result"], "enrolled", "{v}");
        }
        self.bind(docs);
    }

    /// The manifest of workload `WORKLOAD` publishing `public.source_table` as `target`.
    fn manifest(target: &str) -> String {
        let cluster = std::env::var("DPONE_TEST_CLICKHOUSE_CLUSTER")
            .unwrap_or_else(|_| "analytics_cluster".to_owned());
        let database = std::env::var("DPONE_TEST_CLICKHOUSE_DATABASE")
            .unwrap_or_else(|_| "dpone_test".to_owned());
        format!(
            "version: 1\nname: {WORKLOAD}\nsource:\n  connection_ref: pg_source\n  relation: public.source_table\n  columns:\n    - {{name: \"id\", type: \"UInt64\"}}\n    - {{name: \"note\", type: \"String\"}}\ntarget: {{connection_ref: analytics_ch, database: {database}, table: {target}}}\nphysical_design:\n  storage:\n    clickhouse:\n      engine: MergeTree\n      order_by: [id]\n      max_source_bytes: 1073741824\n      staging_database: {database}\n      cluster: {{name: {cluster}, ddl_scope: cluster, replication_mode: external}}\n"
        )
    }

    fn pack(&self) -> String {
        pack_of(&self.manifest)
    }

    /// `run` of `manifest` (this route's by default) with `invocation`, under `reservation`.
    fn run(
        &self,
        store: &Store,
        manifest: Option<&Path>,
        invocation: &str,
        reservation: Option<&str>,
    ) -> Output {
        self.run_through(store, &self.registry, manifest, invocation, reservation)
    }

    /// [`ChRoute::run`] with the connection registry `registry`.
    fn run_through(
        &self,
        store: &Store,
        registry: &Path,
        manifest: Option<&Path>,
        invocation: &str,
        reservation: Option<&str>,
    ) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
        cmd.current_dir(root())
            .env_remove("DPONE_TRUST_POLICY")
            .env_remove("DPONE_POLICY_BUNDLE")
            .env("DPONE_CLICKHOUSE_PASSWORD", &self.ch_password)
            .env("DPONE_PG_SOURCE_PASSWORD", &self.pg_password)
            .env("DPONE_NP_STORE_URL", &store.url)
            .arg("run")
            .arg("--manifest")
            .arg(manifest.unwrap_or(&self.manifest))
            .arg("--connections")
            .arg(registry)
            .arg("--artifact-dir")
            .arg(self.dir.path().join("artifacts"))
            .args(["--invocation", invocation]);
        if let Some(r) = reservation {
            cmd.args(["--np-reservation", r])
                .arg("--np-composition")
                .arg(&self.composition)
                .args(store.args());
        }
        let out = cmd.output().expect("run dpone-host");
        for text in [
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        ] {
            assert!(!text.contains(&self.ch_url), "endpoint in output");
            assert!(
                self.ch_password.is_empty() || !text.contains(&self.ch_password),
                "credential in output"
            );
            assert!(
                self.pg_password.is_empty() || !text.contains(&self.pg_password),
                "credential in output"
            );
            assert!(
                !text.contains(self.dir.path().to_str().expect("utf-8")),
                "local path in output"
            );
        }
        out
    }

    /// One statement on a member (TabSeparated output).
    fn member_sql(&self, member_url: &str, query: &str) -> String {
        let mut curl = Command::new("curl");
        if let Ok(ca) = std::env::var("DPONE_TEST_CLICKHOUSE_CA") {
            curl.arg("--cacert").arg(ca);
        }
        let out = curl
            .args(["-fsS", "-m", "60", "--data-binary", query])
            .arg("-H")
            .arg(format!("X-ClickHouse-User: {}", self.ch_user))
            .arg("-H")
            .arg(format!("X-ClickHouse-Key: {}", self.ch_password))
            .arg(member_url)
            .output()
            .expect("curl runs");
        assert!(out.status.success(), "member query failed");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// Per member: the tables carrying the target's name, and the target's row count if it
    /// exists.
    fn members(&self) -> Vec<(Vec<String>, Option<u64>)> {
        self.members
            .iter()
            .map(|url| {
                let tables: Vec<String> = self
                    .member_sql(
                        url,
                        &format!(
                            "SELECT name FROM system.tables WHERE database = '{}' AND startsWith(name, '{}') ORDER BY name",
                            self.database, self.target
                        ),
                    )
                    .lines()
                    .map(str::to_owned)
                    .collect();
                let rows = tables.contains(&self.target).then(|| {
                    self.member_sql(
                        url,
                        &format!("SELECT count() FROM `{}`.`{}`", self.database, self.target),
                    )
                    .trim()
                    .parse()
                    .expect("a count")
                });
                (tables, rows)
            })
            .collect()
    }

    /// A session holding `public.source_table` in ACCESS EXCLUSIVE mode until it is dropped
    /// or rolled back: the source's ACCESS SHARE lock waits behind it.
    async fn hold_source(&self) -> tokio_postgres::Client {
        let c = admin(&with_database(&self.admin_url, &self.db)).await;
        c.batch_execute("BEGIN; LOCK TABLE public.source_table IN ACCESS EXCLUSIVE MODE")
            .await
            .expect("hold the source relation");
        c
    }

    async fn drop_source(&self) {
        let _ = admin(&self.admin_url)
            .await
            .batch_execute(&format!(
                "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
                self.db
            ))
            .await;
    }
}

/// Exit 0 and the JSON on stdout.
fn ok_run(out: &Output) -> Value {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{} {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    json(out)
}

/// HTTP body bytes of every member load the run reports.
fn http_body_bytes(v: &Value) -> u64 {
    v["measurements"]["http_body"]
        .as_array()
        .expect("member loads")
        .iter()
        .map(|b| b["body_bytes"].as_u64().expect("bytes"))
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source and the control store) are both needed"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_clickhouse_run_under_a_reservation_is_bounded_by_it_and_settles_what_it_read() {
    let _live = one_at_a_time();
    let route = ChRoute::new("bound").await;

    // The relation's exact COPY payload bytes, measured by an unbounded run of a twin manifest
    // (another target table; other bytes, so not the admitted pack).
    let twin = write(
        route.dir.path(),
        "twin.yaml",
        &ChRoute::manifest(&format!("twin_{}", route.target)),
    );
    let store = Store::new().await;
    let v = ok_run(&route.run(&store, Some(&twin), "np-measure", None));
    let measured = &v["measurements"]["source"];
    assert_eq!(measured["rows"], CH_ROWS, "{v}");
    assert_eq!(measured["complete"], true);
    let bytes = measured["source_bytes"].as_u64().expect("bytes");
    assert!(bytes > CH_ROWS * 10, "{measured}");

    let run = Run::new(&store);
    let docs = route.docs();
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    route.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));
    let nothing: Vec<(Vec<String>, Option<u64>)> =
        route.members.iter().map(|_| (Vec::new(), None)).collect();
    assert_eq!(route.members(), nothing, "the target does not exist yet");

    // One row short: the rowbinary source fails closed at row 1000, nothing is sealed or
    // published, and the read is settled incomplete (clamped to the reservation).
    let short = reservation(&run, &docs, &grant, WORKLOAD, "c1", CH_ROWS - 1, bytes);
    let out = route.run(&store, None, "np-short", Some(&short));
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_PG_ROWBINARY_SOURCE_ROW_BOUND_EXCEEDED"
    );
    let v = json(&out);
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(
        v["cause"], "DPONE_PG_ROWBINARY_SOURCE_ROW_BOUND_EXCEEDED",
        "{v}"
    );
    assert_eq!(v["measurements"]["source"]["complete"], false, "{v}");
    let s = &v["np_reservation"]["settlement"];
    assert_eq!(s["result"], "recorded", "{v}");
    assert_eq!(s["outcome"], "incomplete");
    assert_eq!(s["reservation_freed"], false);
    assert!(
        s["measured_source_rows"]
            .as_u64()
            .is_some_and(|r| r < CH_ROWS),
        "{s}"
    );
    assert_eq!(s["measured_http_bytes"], 0, "nothing was sent");
    assert_eq!(route.members(), nothing, "nothing was published");
    let l = listed(&run, &grant_id, &short);
    assert_eq!(l["settlement"]["outcome"], "incomplete");

    // The exact bound: published on every member, settled succeeded with the measured rows,
    // bytes and the HTTP body bytes the sender measured.
    let exact = reservation(&run, &docs, &grant, WORKLOAD, "c2", CH_ROWS, bytes);
    let v = ok_run(&route.run(&store, None, "np-exact", Some(&exact)));
    assert_eq!(v["outcome"], "completed", "{v}");
    assert_eq!(v["measurements"]["source"]["rows"], CH_ROWS);
    assert_eq!(v["measurements"]["source"]["source_bytes"], bytes);
    let http = http_body_bytes(&v);
    assert!(http > 0, "{v}");
    let s = &v["np_reservation"]["settlement"];
    assert_eq!(s["result"], "recorded", "{v}");
    assert_eq!(s["outcome"], "succeeded");
    assert_eq!(s["measured_source_rows"], CH_ROWS);
    assert_eq!(s["measured_source_bytes"], bytes);
    assert_eq!(s["measured_http_bytes"], http);
    assert_eq!(s["clamped_to_reservation"], false);
    for (tables, rows) in route.members() {
        assert_eq!(rows, Some(CH_ROWS), "{tables:?}");
    }
    let l = listed(&run, &grant_id, &exact);
    assert_eq!(l["settlement"]["outcome"], "succeeded");
    assert_eq!(l["settlement"]["measured_http_bytes"], http);

    store.drop_schema().await;
    route.drop_source().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source and the control store) are both needed"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_clickhouse_run_past_its_attempt_deadline_publishes_nothing_and_resumes_later() {
    let _live = one_at_a_time();
    let route = ChRoute::new("deadline").await;
    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = route.docs();
    let grant = c::canon(&docs.egrant);
    let grant_id = id(&docs.egrant["grant_id"]);
    ok(&run.policy_register(&docs, None));
    route.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));
    let nothing: Vec<(Vec<String>, Option<u64>)> =
        route.members.iter().map(|_| (Vec::new(), None)).collect();

    // The source waits behind another session's lock far beyond the attempt's bound.
    let holder = route.hold_source().await;
    let rid = admit_for(&run, &docs, &grant, "t1", CH_ROWS, 1 << 20, BRIEF_SECONDS);
    let started = std::time::Instant::now();
    let out = route.run(&store, None, "np-deadline", Some(&rid));
    let took = started.elapsed();
    holder.batch_execute("ROLLBACK").await.expect("release");
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_CLI_NP_ATTEMPT_DEADLINE_EXCEEDED"
    );
    assert!(
        took < std::time::Duration::from_secs(BRIEF_SECONDS + 10),
        "stopped at the deadline: {took:?}"
    );
    let v = json(&out);
    assert_eq!(v["error"], "DPONE_CLICKHOUSE_CLUSTER_INTERRUPTED", "{v}");
    assert!(
        v["source_error"]
            .as_str()
            .is_some_and(|e| e.contains("deadline")),
        "{v}"
    );
    assert_eq!(v["recovery"], "resume_same_operation", "{v}");
    let s = &v["np_reservation"]["settlement"];
    assert_eq!(s["result"], "recorded", "{v}");
    assert_eq!(s["outcome"], "incomplete");
    assert_eq!(s["measured_source_rows"], 0);
    assert_eq!(s["measured_http_bytes"], 0);
    assert_eq!(route.members(), nothing, "nothing was published");
    assert_eq!(
        listed(&run, &grant_id, &rid)["settlement"]["outcome"],
        "incomplete"
    );

    // The same operation resumes under a new reservation: its source is read again (the
    // stopped attempt sealed nothing), charged to this attempt, and published.
    let again = admit_for(&run, &docs, &grant, "t2", CH_ROWS, 1 << 20, 600);
    let v = ok_run(&route.run(&store, None, "np-deadline", Some(&again)));
    assert_eq!(v["outcome"], "completed", "{v}");
    let s = &v["np_reservation"]["settlement"];
    assert_eq!(s["outcome"], "succeeded", "{v}");
    assert_eq!(s["measured_source_rows"], CH_ROWS);
    assert_eq!(s["measured_http_bytes"], http_body_bytes(&v));
    for (tables, rows) in route.members() {
        assert_eq!(rows, Some(CH_ROWS), "{tables:?}");
    }

    store.drop_schema().await;
    route.drop_source().await;
}

/// The ClickHouse route under a reservation is bound to the enrolled participants before
/// anything is read or written, attacked through its registry (which no one signs) with the
/// admitted manifest's exact bytes: the source moved to another database of the server, the
/// members' URLs swapped, the authority facade in another database, and — in a store where
/// the ClickHouse participant was enrolled as another database — the tier's database itself.
/// Each is refused with its code, nothing is published and the reservation stays unclaimed:
/// the honest registry then runs under the same reservation and records the three bound
/// participants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source and the control store) are both needed"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_clickhouse_run_reads_and_publishes_only_its_enrolled_participants() {
    let _live = one_at_a_time();
    let route = ChRoute::new("bind").await;
    let nothing: Vec<(Vec<String>, Option<u64>)> =
        route.members.iter().map(|_| (Vec::new(), None)).collect();
    // Another database on the same PostgreSQL server, with a table of the same name and shape.
    let other_pg = format!("{}_other", route.db);
    admin(&route.admin_url)
        .await
        .batch_execute(&format!("CREATE DATABASE \"{other_pg}\""))
        .await
        .expect("create another database");
    admin(&with_database(&route.admin_url, &other_pg))
        .await
        .batch_execute(
            "CREATE TABLE public.source_table (id bigint NOT NULL, note text NOT NULL); \
             INSERT INTO public.source_table SELECT i, 'PROD-SECRET-' || i \
             FROM generate_series(1, 37) i",
        )
        .await
        .expect("fill it");
    // Another ClickHouse database on every member.
    let other_ch = format!("dpone_t_other_{}", route.target);
    for url in &route.members {
        route.member_sql(
            url,
            &format!("CREATE DATABASE IF NOT EXISTS `{other_ch}` ENGINE = Atomic"),
        );
    }
    let registry = std::fs::read_to_string(&route.registry).expect("registry");
    let variant = |name: &str, text: String| {
        assert_ne!(text, registry, "{name} changes the registry");
        write(route.dir.path(), name, &text)
    };
    let moved_source = variant(
        "moved-source.yaml",
        registry.replace(
            &format!("database: '{}'", route.db),
            &format!("database: '{other_pg}'"),
        ),
    );
    let swapped = variant(
        "swapped.yaml",
        registry
            .replace(&route.members[0], "MEMBER-A")
            .replace(&route.members[1], &route.members[0])
            .replace("MEMBER-A", &route.members[1]),
    );
    let moved_authority = variant(
        "moved-authority.yaml",
        registry.replace(
            &format!("authority: {{database: {},", route.database),
            &format!("authority: {{database: {other_ch},"),
        ),
    );

    // Store A: the ClickHouse participant was enrolled as another database of the cluster.
    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = route.docs();
    let grant = c::canon(&docs.egrant);
    ok(&run.policy_register(&docs, None));
    ok(&route.enroll(&run, &docs, PG_READ, "pg_source"));
    let mut args =
        support::np_xmin::enroll_args(&run, &docs, CH_WRITE, &route.registry, "analytics_ch");
    args.extend([
        "--database".to_owned(),
        other_ch.clone(),
        "--cluster".to_owned(),
        route.cluster.clone(),
    ]);
    let v = ok(&run
        .command(&args)
        .env("DPONE_CLICKHOUSE_PASSWORD", &route.ch_password)
        .output()
        .expect("run dpone-host"));
    assert_eq!(v["engine"], "clickhouse", "{v}");
    assert_eq!(v["identity"]["database_name"], other_ch.as_str());
    assert_eq!(
        v["identity"]["members"].as_array().map(Vec::len),
        Some(route.members.len()),
        "every member is enrolled: {v}"
    );
    route.bind(&docs);
    ok(&run.grant_register(&docs, true, &grant));
    let rid = reservation(&run, &docs, &grant, WORKLOAD, "b1", CH_ROWS, 1 << 20);
    let out = route.run(&store, None, "np-bind-a", Some(&rid));
    assert_eq!(
        refused(&out, &store, 1),
        "DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH"
    );
    assert!(out.stdout.is_empty(), "nothing ran");
    assert_eq!(route.members(), nothing, "nothing was published");
    store.drop_schema().await;

    // Store B: both participants enrolled as they are.
    let store = Store::new().await;
    let run = Run::new(&store);
    ok(&run.policy_register(&docs, None));
    route.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));
    let rid = reservation(&run, &docs, &grant, WORKLOAD, "b2", CH_ROWS, 1 << 20);
    for (registry, code) in [
        (&moved_source, "DPONE_CLI_NP_PARTICIPANT_IDENTITY_MISMATCH"),
        (
            &swapped,
            "DPONE_CLICKHOUSE_CLUSTER_MEMBER_IDENTITY_UNPROVEN",
        ),
        (&moved_authority, "DPONE_CLI_NP_RELATION_OUT_OF_SCOPE"),
    ] {
        let out = route.run_through(&store, registry, None, "np-bind-b", Some(&rid));
        assert_eq!(refused(&out, &store, 1), code, "{}", registry.display());
        assert!(out.stdout.is_empty(), "nothing ran");
        assert_eq!(route.members(), nothing, "nothing was published");
    }
    // The same reservation is still unclaimed: the honest registry runs under it.
    let v = ok_run(&route.run(&store, None, "np-bind-b", Some(&rid)));
    assert_eq!(v["outcome"], "completed", "{v}");
    assert_eq!(
        v["measurements"]["source"]["rows"], CH_ROWS,
        "its own source"
    );
    let bound = v["np_reservation"]["participants"]
        .as_array()
        .expect("participants")
        .iter()
        .map(|p| {
            (
                p["role"].as_str().unwrap_or_default().to_owned(),
                p["participant_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(
        bound,
        [
            ("source".to_owned(), PG_READ.to_owned()),
            ("target".to_owned(), CH_WRITE.to_owned()),
            ("state".to_owned(), CH_WRITE.to_owned()),
        ]
    );
    for (tables, rows) in route.members() {
        assert_eq!(rows, Some(CH_ROWS), "{tables:?}");
    }

    store.drop_schema().await;
    for url in &route.members {
        route.member_sql(url, &format!("DROP DATABASE IF EXISTS `{other_ch}`"));
    }
    let _ = admin(&route.admin_url)
        .await
        .batch_execute(&format!(
            "DROP DATABASE IF EXISTS \"{other_pg}\" WITH (FORCE)"
        ))
        .await;
    route.drop_source().await;
}

/// Concurrent `campaign enroll` processes through the binary for one ClickHouse participant,
/// half observing the tier's database and half another database of the cluster: the store
/// records exactly one identity, once; every other process of the same identity reopens it and
/// every process of the other identity is refused with `DPONE_NP_STORE_ENROLLMENT_CONFLICT`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the control store) are both needed"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn concurrent_enrollments_of_one_participant_record_one_identity() {
    let _live = one_at_a_time();
    let route = ChRoute::new("enrollrace").await;
    let other_ch = format!("dpone_t_other_{}", route.target);
    for url in &route.members {
        route.member_sql(
            url,
            &format!("CREATE DATABASE IF NOT EXISTS `{other_ch}` ENGINE = Atomic"),
        );
    }
    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = route.docs();
    ok(&run.policy_register(&docs, None));
    // The policy file is written once, before the processes start.
    let base =
        support::np_xmin::enroll_args(&run, &docs, CH_WRITE, &route.registry, "analytics_ch");
    let children: Vec<(bool, std::process::Child)> = (0..8)
        .map(|i| {
            let database = if i % 2 == 0 {
                &route.database
            } else {
                &other_ch
            };
            let mut args = base.clone();
            args.extend([
                "--database".to_owned(),
                database.clone(),
                "--cluster".to_owned(),
                route.cluster.clone(),
            ]);
            let child = run
                .command(&args)
                .env("DPONE_CLICKHOUSE_PASSWORD", &route.ch_password)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start dpone-host");
            (i % 2 == 0, child)
        })
        .collect();
    let mut outcomes: Vec<(bool, String)> = Vec::new();
    for (tier, child) in children {
        let out = child.wait_with_output().expect("dpone-host ran");
        let outcome = if out.status.success() {
            json(&out)["result"].as_str().unwrap_or_default().to_owned()
        } else {
            refused(&out, &store, 1)
        };
        outcomes.push((tier, outcome));
    }
    let enrolled: Vec<bool> = outcomes
        .iter()
        .filter(|(_, o)| o == "enrolled")
        .map(|(tier, _)| *tier)
        .collect();
    assert_eq!(enrolled.len(), 1, "exactly one records: {outcomes:?}");
    let winner = enrolled[0];
    for (tier, outcome) in &outcomes {
        let expected = if *tier == winner {
            ["enrolled", "reopened"].as_slice()
        } else {
            ["DPONE_NP_STORE_ENROLLMENT_CONFLICT"].as_slice()
        };
        assert!(expected.contains(&outcome.as_str()), "{outcomes:?}");
    }
    let rows: i64 = admin(&store.admin_url)
        .await
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{}\".np_participant_identity",
                store.schema
            ),
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(rows, 1, "one record");
    store.drop_schema().await;
    for url in &route.members {
        route.member_sql(url, &format!("DROP DATABASE IF EXISTS `{other_ch}`"));
    }
    route.drop_source().await;
}

/// Concurrent processes through the binary under one reservation: the reservation bounds one
/// run's reads, so exactly one of them claims it, reads, commits and settles; every other is
/// refused with `DPONE_NP_STORE_RESERVATION_RUN_CLAIMED` before it reads (no artifact
/// directory, no output). The source relation is held locked while they start, so the run
/// that claimed waits at its source lock, unfinished, while the others arrive: without the
/// claim all eight would wait there and then read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn concurrent_runs_under_one_reservation_read_once() {
    let _live = one_at_a_time();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::new().await;
    let f = Fixture::new("npclaim", Options::default())
        .await
        .expect("the PostgreSQL fixture (server configured)");
    f.src_sql(SOURCE_ROWS).await;
    let xmin = Xmin::new(&f, dir.path(), WORKLOAD);
    let run = Run::new(&store);
    let docs = xmin_docs(&xmin.pack(), &f, "public.items");
    let grant = c::canon(&docs.egrant);
    ok(&run.policy_register(&docs, None));
    xmin.bind(&docs);
    xmin.enroll_both(&run, &docs);
    ok(&run.grant_register(&docs, true, &grant));
    let rid = admit_for(&run, &docs, &grant, "c1", 200, 1 << 20, 600);

    let holder = f.src.client().await;
    holder
        .batch_execute("BEGIN; LOCK TABLE public.items IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("hold the source relation");
    const RUNS: usize = 8;
    let mut children: Vec<_> = (0..RUNS)
        .map(|i| {
            xmin.command(&store, &format!("claim-{i}"), Some(&rid))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn dpone-host")
        })
        .collect();
    // Until all but one have ended (or two minutes passed), the source stays locked.
    let waited = std::time::Instant::now();
    while waited.elapsed() < std::time::Duration::from_secs(120) {
        let mut ended = 0;
        for c in children.iter_mut() {
            if c.try_wait().expect("poll").is_some() {
                ended += 1;
            }
        }
        if ended >= RUNS - 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    holder.batch_execute("ROLLBACK").await.expect("release");
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().expect("wait"))
        .collect();
    let mut winners = Vec::new();
    for (i, out) in outs.iter().enumerate() {
        let invocation = format!("claim-{i}");
        if out.status.code() == Some(0) {
            winners.push(i);
            let v = json(out);
            assert_eq!(
                v["np_reservation"]["settlement"]["outcome"], "succeeded",
                "{v}"
            );
            assert!(xmin.ran(&invocation));
        } else {
            assert_eq!(
                refused_before_read(out, &store, &xmin, &invocation),
                "DPONE_NP_STORE_RESERVATION_RUN_CLAIMED",
                "run {i}"
            );
        }
    }
    assert_eq!(winners.len(), 1, "exactly one run claims the reservation");
    assert_eq!(f.active_keys().await.len(), 200);
    store.drop_schema().await;
}

/// A one-server ClickHouse participant (spec 004's "single-node ClickHouse"): enrolled through a
/// `clickhouse_server` connection without `--cluster` as its one member, and a run of a manifest
/// without a cluster block bound to it and published on that server alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the control store) are both needed"
)]
#[allow(
    clippy::await_holding_lock,
    reason = "each test has its own runtime; the guard only orders the tests"
)]
async fn a_one_server_participant_is_enrolled_as_its_one_member_and_its_run_bound() {
    let _live = one_at_a_time();
    let route = ChRoute::new("oneserver").await;
    // One server: member (1, 1) of the tier, the manifest without its cluster block.
    let registry = std::fs::read_to_string(&route.registry).expect("registry");
    let mut one = String::new();
    let mut in_ch = false;
    for line in registry.lines() {
        if line.starts_with("  ") && !line.starts_with("   ") {
            in_ch = line.trim() == "analytics_ch:";
        }
        let t = line.trim_start();
        if in_ch
            && (t.starts_with("members:")
                || t.starts_with("- {shard_num")
                || t.starts_with("ddl_task_timeout_secs:"))
        {
            continue;
        }
        if in_ch && t == "kind: clickhouse_cluster" {
            one.push_str("    kind: clickhouse_server\n");
        } else if in_ch && t.starts_with("coordinator_url:") {
            one.push_str(&format!("    url: '{}'\n", route.members[0]));
        } else {
            one.push_str(line);
            one.push('\n');
        }
    }
    std::fs::write(&route.registry, one).expect("registry");
    let manifest = std::fs::read_to_string(&route.manifest).expect("manifest");
    let local: String = manifest
        .lines()
        .filter(|l| !l.trim_start().starts_with("cluster:"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_ne!(local, manifest);
    std::fs::write(&route.manifest, local).expect("manifest");

    let store = Store::new().await;
    let run = Run::new(&store);
    let docs = route.docs();
    ok(&run.policy_register(&docs, None));
    ok(&route.enroll(&run, &docs, PG_READ, "pg_source"));
    let base =
        support::np_xmin::enroll_args(&run, &docs, CH_WRITE, &route.registry, "analytics_ch");
    // A cluster's enrollment (with --cluster) cannot name the one-server connection.
    let mut clustered = base.clone();
    clustered.extend([
        "--database".to_owned(),
        route.database.clone(),
        "--cluster".to_owned(),
        route.cluster.clone(),
    ]);
    let out = run
        .command(&clustered)
        .env("DPONE_CLICKHOUSE_PASSWORD", &route.ch_password)
        .output()
        .expect("run dpone-host");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("DPONE_CLI_CAMPAIGN_ENROLL_CONNECTION_UNKNOWN"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args = base;
    args.extend(["--database".to_owned(), route.database.clone()]);
    let v = ok(&run
        .command(&args)
        .env("DPONE_CLICKHOUSE_PASSWORD", &route.ch_password)
        .output()
        .expect("run dpone-host"));
    assert_eq!(v["result"], "enrolled", "{v}");
    assert_eq!(v["engine"], "clickhouse", "{v}");
    let members = v["identity"]["members"].as_array().expect("members");
    assert_eq!(members.len(), 1, "{v}");
    assert_eq!(members[0]["shard_num"], 1);
    assert_eq!(members[0]["replica_num"], 1);
    route.bind(&docs);
    let grant = c::canon(&docs.egrant);
    ok(&run.grant_register(&docs, true, &grant));
    let rid = reservation(&run, &docs, &grant, WORKLOAD, "one", CH_ROWS, 1 << 20);
    let v = ok_run(&route.run(&store, None, "np-one-server", Some(&rid)));
    assert_eq!(v["outcome"], "completed", "{v}");
    assert_eq!(
        v["receipt"]["schema_version"],
        "dpone.clickhouse.local-full-refresh-receipt.v1"
    );
    let published = route.members();
    assert_eq!(published[0].1, Some(CH_ROWS), "{published:?}");
    assert_eq!(published[1].1, None, "nothing on the other server");
    store.drop_schema().await;
    route.drop_source().await;
}

/// The registry line pinning the tier's CA (`DPONE_TEST_CLICKHOUSE_CA`: the tier serves
/// `https://` only), or nothing for a tier without one.
fn tier_tls_yaml() -> String {
    std::env::var("DPONE_TEST_CLICKHOUSE_CA")
        .ok()
        .filter(|ca| !ca.trim().is_empty())
        .map(|ca| format!("    sslrootcert: '{ca}'\n"))
        .unwrap_or_default()
}
