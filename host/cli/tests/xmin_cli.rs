//! Tier: CLI end-to-end on a real PostgreSQL server. `dpone-host check | plan | run | status`
//! on an XMin manifest, with the guard and delete-mode decisions made by the shipped WebAssembly
//! components at their pins. Databases come from the PostgreSQL adapter's test support (a fresh
//! source and target per test); without a configured server the test is ignored with its SKIP
//! reason (`cfg(dpone_live_pg)`), and a configured server that cannot be used fails it.

#[path = "../../../adapters/postgres/tests/support/mod.rs"]
mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{Fixture, Options};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Cli<'a> {
    fixture: &'a Fixture,
    manifest: PathBuf,
    registry: PathBuf,
    artifacts: PathBuf,
}

impl Cli<'_> {
    fn run(&self, command: &str, extra: &[&str]) -> (i32, Value, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
            .current_dir(root())
            .envs(&self.fixture.env)
            .arg(command)
            .arg("--manifest")
            .arg(&self.manifest)
            .arg("--connections")
            .arg(&self.registry)
            .arg("--artifact-dir")
            .arg(&self.artifacts)
            .args(extra)
            .output()
            .expect("dpone-host runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
        (
            out.status.code().unwrap_or(-1),
            json,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn check_plan_run_status_with_policy_components_on_a_real_server() {
    let options = Options {
        reconciliation_extra: "  guards: {max_delete_ratio: 0.5}\n".into(),
        ..Options::default()
    };
    let Some(f) = Fixture::new("clie2e", options).await else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let cli = Cli {
        fixture: &f,
        manifest: write(dir.path(), "manifest.yaml", &f.manifest_yaml),
        registry: write(dir.path(), "registry.yaml", &f.registry_yaml),
        artifacts: dir.path().join("artifacts"),
    };

    let (rc, check, err) = cli.run("check", &[]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(check["status"], "ok");
    let (rc, plan, err) = cli.run("plan", &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        plan["delete_plan"]["rules"]
            .as_array()
            .is_some_and(|r| r.len() == 6),
        "{plan}"
    );
    let pin = |kind: &str| {
        let lock: Value = serde_json::from_str(
            &std::fs::read_to_string(root().join("policies/components.lock.json")).expect("lock"),
        )
        .expect("lock parses");
        lock["components"][kind]["sha256"].clone()
    };
    assert_eq!(
        plan["delete_plan_evidence"]["component_sha256"],
        pin("delete-mode")
    );

    f.src_sql("INSERT INTO public.items SELECT g, 'item-' || g, g % 7, g * 1.25 FROM generate_series(1, 200) g").await;
    let (rc, baseline, err) = cli.run("run", &[]);
    assert_eq!(rc, 0, "{err}");
    let text = baseline.to_string();
    assert!(
        text.contains(&pin("guard").as_str().unwrap_or("?").to_owned()),
        "guard evidence from the component: {text}"
    );
    assert_eq!(f.active_keys().await, f.source_keys().await);
    // The source's measurement: rows and binary COPY payload bytes of the read.
    let m = &baseline["source_measurement"];
    assert_eq!(m["rows"], 200, "{baseline}");
    assert_eq!(m["complete"], true, "{baseline}");
    assert!(
        m["source_bytes"].as_u64().is_some_and(|b| b > 200 * 20),
        "{baseline}"
    );

    f.src_sql("DELETE FROM public.items WHERE id <= 3").await;
    let (rc, delete, err) = cli.run("run", &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        delete.to_string().contains("\"soft_deleted\":3"),
        "{delete}"
    );
    // Incremental: the empty delta and the 197 keys, together.
    assert_eq!(delete["source_measurement"]["rows"], 197, "{delete}");
    assert_eq!(f.active_keys().await, f.source_keys().await);

    let (rc, status, err) = cli.run("status", &[]);
    assert_eq!(rc, 0, "{err}");
    assert!(status["state"].is_object(), "{status}");
    assert_eq!(status["receipts"].as_array().map(Vec::len), Some(2));

    // A delete beyond the manifest's guards is refused with the guard's code and changes nothing.
    f.src_sql("DELETE FROM public.items WHERE id <= 150").await;
    let before = f.target_fingerprint().await;
    let (rc, refused, err) = cli.run("run", &[]);
    assert_eq!(rc, 1, "{refused}");
    assert!(err.contains("DPONE_"), "{err}");
    assert_eq!(
        f.target_fingerprint().await,
        before,
        "a refused run mutates nothing"
    );
    for leak in [
        "password",
        "127.0.0.1",
        "/var/run",
        dir.path().to_str().unwrap_or("?"),
    ] {
        assert!(
            !err.contains(leak) && !refused.to_string().contains(leak),
            "no {leak} in output"
        );
    }
}
