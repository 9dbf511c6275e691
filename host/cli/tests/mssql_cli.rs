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
    // Offline: the state's placement is stated as a requirement, with what was not checked.
    let json = report(&text);
    let location = json["state_location"].as_str().expect("state_location");
    assert!(
        location.contains("not verified by check, verified by run's preflight"),
        "{location}"
    );
    let not_checked = json["not_checked"].to_string();
    for unverified in ["no server was contacted", "Babelfish", "same principal"] {
        assert!(
            not_checked.contains(unverified),
            "{unverified}: {not_checked}"
        );
    }
    let checked = json["checked"].to_string();
    assert!(checked.contains("bulk load can name"), "{checked}");
    assert!(!checked.contains("instance"), "{checked}");
}

/// The JSON document on stdout (the text holds stdout then stderr).
fn report(text: &str) -> serde_json::Value {
    let end = text.rfind("\n}").map_or(text.len(), |i| i + 2);
    serde_json::from_str(&text[..end]).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn plan_prints_the_sql_server_routes_own_steps() {
    let dir = scratch("mssql-plan");
    let (code, text) = dpone(
        &["plan", "--manifest", MANIFEST, "--connections", REGISTRY],
        &dir,
    );
    assert_eq!(code, 0, "{text}");
    let json = report(&text);
    let steps: Vec<&str> = json["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for postgres_only in ["advisory lock", "RETURNING", "BEGIN SERIALIZABLE"] {
        assert!(
            steps.iter().all(|s| !s.contains(postgres_only)),
            "{postgres_only}: {steps:#?}"
        );
    }
    assert!(steps[0].starts_with("server check"), "{steps:#?}");
    assert!(steps[0].contains("not Babelfish"), "{steps:#?}");
    let at = |needle: &str| {
        steps
            .iter()
            .position(|s| s.contains(needle))
            .unwrap_or_else(|| panic!("no step with {needle:?}: {steps:#?}"))
    };
    assert!(at("bulk load") < at("sp_getapplock"), "{steps:#?}");
    assert!(at("sp_getapplock") < at("OUTPUT ... INTO"), "{steps:#?}");
    assert!(
        json["not_checked"][0]
            .as_str()
            .is_some_and(|n| n.starts_with("no server was contacted")),
        "{json}"
    );
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
