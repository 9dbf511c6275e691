//! `check` and `run` on a SQL Server route without a server: `check` resolves the pins and
//! identities offline; `run` verifies the target, staging and state pins before any source I/O,
//! so an unreachable SQL Server fails closed with the target code and writes no artifact.
//!
//! Tier: CLI (the built binary); no database server is contacted successfully.

use std::path::Path;
use std::process::Command;

const MANIFEST: &str = "fixtures/xmin/mssql/manifest.yaml";
const REGISTRY: &str = "fixtures/xmin/mssql/registry.yaml";
const SOURCE_PASSWORD: &str = "source-secret-7f3a";
const MSSQL_PASSWORD: &str = "mssql-secret-91c2";

fn dpone(args: &[&str], dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(workspace())
        .args(args)
        .arg("--artifact-dir")
        .arg(dir)
        .env("DPONE_PG_SOURCE_PASSWORD", SOURCE_PASSWORD)
        .env("DPONE_MSSQL_PASSWORD", MSSQL_PASSWORD)
        .env_remove("DPONE_CONNECTIONS")
        .output()
        .expect("run dpone-host");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !text.contains(SOURCE_PASSWORD) && !text.contains(MSSQL_PASSWORD),
        "a password leaked: {text}"
    );
    (out.status.code().unwrap_or(-1), text)
}

/// Regular files anywhere under `dir` (the store may create its per-invocation directory).
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .flatten()
            .map(|e| {
                let p = e.path();
                if p.is_dir() { files_under(&p) } else { 1 }
            })
            .sum()
    })
}

/// The workspace root: the shipped components are found relative to it.
fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn check_resolves_a_sql_server_route_offline() {
    let dir = scratch("mssql-check");
    let (code, text) = dpone(
        &["check", "--manifest", MANIFEST, "--connections", REGISTRY],
        &dir,
    );
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("postgres_xmin_to_mssql_key_snapshot"),
        "{text}"
    );
    assert!(text.contains("DWH_State.dpone"), "{text}");
    assert!(!text.contains("sql.internal"), "an endpoint leaked: {text}");
}

#[test]
fn run_verifies_sql_server_pins_before_any_source_io() {
    let dir = scratch("mssql-run");
    let artifacts = dir.join("artifacts");
    // Both servers unreachable: the first failure names which side was contacted first.
    let registry = std::fs::read_to_string(workspace().join(REGISTRY))
        .expect("registry")
        .replace(
            "host: sql.internal, port: 1433",
            "host: '127.0.0.1', port: 1",
        )
        .replace(
            "host: /var/run/postgresql, port: 5432",
            "host: '127.0.0.1', port: 2",
        );
    let registry_path = dir.join("registry.yaml");
    std::fs::write(&registry_path, registry).expect("write registry");
    let registry_arg = registry_path.to_str().expect("utf-8 path");
    let (code, text) = dpone(
        &["run", "--manifest", MANIFEST, "--connections", registry_arg],
        &artifacts,
    );
    assert_ne!(code, 0, "{text}");
    assert!(text.contains("DPONE_XMIN_TARGET_CONNECT"), "{text}");
    assert!(
        !text.contains("DPONE_XMIN_SOURCE"),
        "source contacted first: {text}"
    );
    assert!(!text.contains("127.0.0.1"), "an endpoint leaked: {text}");
    assert_eq!(
        files_under(&artifacts),
        0,
        "no artifact may exist before the pins are verified"
    );
}
