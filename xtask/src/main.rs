//! Developer tasks that cargo alone cannot express.
//!
//! - `cargo xtask policies [--check]`: build the four policy components reproducibly and write
//!   (or, with `--check`, verify) their pins in `policies/components.lock.json` and their bytes
//!   in `policies/components/*.wasm` (the committed copies `dpone-host` embeds; `--check` fails
//!   unless the rebuild is byte-identical to them).
//! - `cargo xtask hostile`: build the hostile fixture components used by the sandbox tests.
//! - `cargo xtask demo`: `policies --check`, `dpone-host demo` (the README's main job), then the
//!   XMin route end to end on the local PostgreSQL server with generated sample data.
//! - `cargo xtask test`: `policies --check`, `hostile`, the tools the tests call
//!   (`.ci/install-test-tools`: xmllint), start the local PostgreSQL server the
//!   database tests use (`.ci/start-postgres`) and the real-engine ClickHouse tier the live
//!   ClickHouse tests use (`.ci/start-clickhouse`), then `cargo test --workspace`.
//! - `cargo xtask attest --subject FILE --out BUNDLE --trusted-root-out ROOT [...]`: issue one
//!   GitHub-style attestation offline with the test signer (see `attest.rs`).
//! - `cargo xtask audit [--db DIR | --vendor DIR]`: `Cargo.lock` against the RustSec advisory
//!   database, offline: the vendored snapshot in `xtask/advisory-db/` by default (see
//!   `audit.rs`).
//!
//! Built components land in `target/components/`.

mod attest;
mod audit;

use anyhow::{Context, Result, bail, ensure};
use dpone_policy_build::{BuildEnv, BuildSpec, ComponentLock, build_components};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const WIT_PACKAGE: &str = "dpone:policy@0.1.0";
const LOCK_FILE: &str = "policies/components.lock.json";
const COMPONENT_DIR: &str = "target/components";
/// The shipped components as committed, next to the lock: `dpone-host` embeds these.
const COMMITTED_DIR: &str = "policies/components";

/// The shipped policies: (kind, cargo package).
const POLICIES: &[(&str, &str)] = &[
    ("admission", "dpone-policy-admission"),
    ("delete-mode", "dpone-policy-delete-mode"),
    ("guard", "dpone-policy-guard"),
    ("scope", "dpone-policy-scope"),
];

/// Hostile fixtures: (output name, cargo feature of `dpone-hostile-policy`).
const HOSTILE: &[(&str, &str)] = &[
    ("hostile-spin", "spin"),
    ("hostile-grow-memory", "grow-memory"),
    ("hostile-recurse", "recurse"),
    ("hostile-trap", "trap"),
    ("hostile-oversized", "oversized"),
    ("hostile-permissive", "permissive"),
];

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .context("xtask lives one level below the workspace root")?
        .to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    match args.first().map(String::as_str) {
        Some("policies") => policies(&root, args.iter().any(|a| a == "--check")),
        Some("hostile") => hostile(&root),
        Some("attest") => attest::attest(&args[1..]),
        Some("audit") => audit::audit(&root, &args[1..]),
        Some("demo") => {
            policies(&root, true)?;
            run(Command::new(&cargo)
                .current_dir(&root)
                .args([
                    "run",
                    "--quiet",
                    "--release",
                    "-p",
                    "dpone-host",
                    "--",
                    "demo",
                ])
                .args(&args[1..]))?;
            // The XMin route on the local PostgreSQL server, with generated sample data.
            let Some(url) = local_postgres(&root) else {
                eprintln!("demo: SKIP the XMin route: no local PostgreSQL server");
                return Ok(());
            };
            run(Command::new(&cargo)
                .current_dir(&root)
                .env("DPONE_TEST_PG_URL", url)
                .env(
                    "DPONE_HOST_BIN",
                    cargo_target_dir(&root).join("release/dpone-host"),
                )
                .args([
                    "run",
                    "--quiet",
                    "--release",
                    "-p",
                    "dpone-adapter-postgres",
                ])
                .args(["--example", "xmin_demo"]))
        }
        Some("test") => {
            policies(&root, true)?;
            hostile(&root)?;
            test_tools(&root);
            let mut test = Command::new(&cargo);
            test.current_dir(&root)
                .args(["test", "--workspace"])
                .args(&args[1..]);
            if let Some(url) = local_postgres(&root) {
                test.env("DPONE_TEST_PG_URL", url);
            }
            for (name, value) in local_clickhouse(&root) {
                test.env(name, value);
            }
            run(&mut test)
        }
        _ => bail!(
            "usage: cargo xtask <policies [--check] | hostile | demo | test [cargo test args] | attest ... | audit [--db DIR | --vendor DIR]>"
        ),
    }
}

/// Installs the command-line tools the tests call (xmllint for the JUnit schema) through
/// `.ci/install-test-tools` when they are missing. A tool that cannot be had is said here; the
/// tests that need it then fail with that reason.
fn test_tools(root: &Path) {
    let script = root.join(".ci/install-test-tools");
    match Command::new("bash").arg(&script).output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => eprintln!(
            "test: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ),
        Err(e) => eprintln!("test: cannot run .ci/install-test-tools ({e})"),
    }
}

/// Starts (or finds) the local PostgreSQL server the database tests use, through
/// `.ci/start-postgres`, unless `DPONE_TEST_PG_URL` is already set. Returns its URL. When the
/// server cannot be had, the database tests are reported ignored with their SKIP reason.
fn local_postgres(root: &Path) -> Option<String> {
    if let Ok(url) = std::env::var("DPONE_TEST_PG_URL") {
        return Some(url);
    }
    let script = root.join(".ci/start-postgres");
    if !script.exists() {
        return None;
    }
    let output = Command::new("bash").arg(&script).output().ok()?;
    if !output.status.success() {
        eprintln!(
            "test: no local PostgreSQL ({}); database tests will be ignored (SKIP)",
            String::from_utf8_lossy(&output.stderr).trim()
        );
        return None;
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .and_then(|line| line.strip_prefix("DPONE_TEST_PG_URL="))
        .map(str::to_owned)
}

/// Starts (or finds) the real-engine ClickHouse tier the live ClickHouse tests use, through
/// `.ci/start-clickhouse`, unless `DPONE_TEST_CLICKHOUSE_URL` is already set. Returns the
/// variables its last line names. When the tier cannot be had, those tests are reported ignored
/// with their SKIP reason.
fn local_clickhouse(root: &Path) -> Vec<(String, String)> {
    if std::env::var_os("DPONE_TEST_CLICKHOUSE_URL").is_some() {
        return Vec::new();
    }
    let script = root.join(".ci/start-clickhouse");
    let output = match Command::new("bash").arg(&script).output() {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            eprintln!(
                "test: no ClickHouse tier ({}); the live ClickHouse tests are ignored",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            );
            return Vec::new();
        }
        Err(e) => {
            eprintln!(
                "test: cannot run .ci/start-clickhouse ({e}); the live ClickHouse tests are ignored"
            );
            return Vec::new();
        }
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .filter(|(k, _)| k.starts_with("DPONE_TEST_CLICKHOUSE_"))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Where cargo puts its build outputs: `CARGO_TARGET_DIR` when set (relative to the workspace
/// root when relative), else the workspace's `target/`.
fn cargo_target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => root.join(dir),
        None => root.join("target"),
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("spawning {cmd:?}"))?;
    ensure!(status.success(), "{cmd:?} failed with {status}");
    Ok(())
}

fn build(
    root: &Path,
    target_subdir: &str,
    specs: &[BuildSpec],
) -> Result<BTreeMap<String, Vec<u8>>> {
    let env = BuildEnv::new(root, &root.join("target").join(target_subdir));
    let components =
        build_components(&env, specs).map_err(|e| anyhow::anyhow!("{}: {e}", e.code()))?;
    let dir = root.join(COMPONENT_DIR);
    std::fs::create_dir_all(&dir)?;
    for (name, bytes) in &components {
        std::fs::write(dir.join(format!("{name}.wasm")), bytes)?;
    }
    Ok(components)
}

fn policies(root: &Path, check: bool) -> Result<()> {
    let specs: Vec<BuildSpec> = POLICIES
        .iter()
        .map(|(kind, package)| BuildSpec {
            name: (*kind).to_owned(),
            package: (*package).to_owned(),
            feature: None,
        })
        .collect();
    let bytes = build(root, "policy-build", &specs)?;
    let built = ComponentLock::pin(WIT_PACKAGE, &bytes);
    let lock_path = root.join(LOCK_FILE);
    let committed = root.join(COMMITTED_DIR);
    if check {
        let text = std::fs::read_to_string(&lock_path).with_context(|| {
            format!("reading {LOCK_FILE}; run `cargo xtask policies` to create it")
        })?;
        let pinned = ComponentLock::from_json(&text).map_err(|e| anyhow::anyhow!("{e}"))?;
        if pinned != built {
            eprintln!("pinned in {LOCK_FILE}:\n{}", pinned.to_json());
            eprintln!("built now:\n{}", built.to_json());
            bail!(
                "policy components differ from {LOCK_FILE}: the lock is stale or the build is not reproducible"
            );
        }
        // dpone-host embeds the committed copies: the rebuild must give exactly their bytes.
        let mut differ = Vec::new();
        for (kind, rebuilt) in &bytes {
            let path = committed.join(format!("{kind}.wasm"));
            match std::fs::read(&path) {
                Ok(c) if c == *rebuilt => {}
                Ok(_) => differ.push(format!("{kind}.wasm differs")),
                Err(_) => differ.push(format!("{kind}.wasm is missing")),
            }
        }
        if !differ.is_empty() {
            bail!(
                "the committed components in {COMMITTED_DIR}/ are not the reproducible build: {}; \
                 run `cargo xtask policies` to rebuild them and the lock",
                differ.join(", ")
            );
        }
        eprintln!(
            "policies: {} components match {LOCK_FILE} and are byte-identical to {COMMITTED_DIR}/",
            built.components.len()
        );
    } else {
        std::fs::write(&lock_path, built.to_json())?;
        std::fs::create_dir_all(&committed)?;
        for (kind, rebuilt) in &bytes {
            std::fs::write(committed.join(format!("{kind}.wasm")), rebuilt)?;
        }
        eprintln!("policies: wrote {LOCK_FILE} and {COMMITTED_DIR}/*.wasm");
    }
    for (kind, c) in &built.components {
        eprintln!("  {kind:<12} {} {} bytes", c.sha256, c.size);
    }
    Ok(())
}

fn hostile(root: &Path) -> Result<()> {
    let specs: Vec<BuildSpec> = HOSTILE
        .iter()
        .map(|(name, feature)| BuildSpec {
            name: (*name).to_owned(),
            package: "dpone-hostile-policy".to_owned(),
            feature: Some((*feature).to_owned()),
        })
        .collect();
    let built = build(root, "policy-build", &specs)?;
    eprintln!(
        "hostile: built {} fixture components into {COMPONENT_DIR}",
        built.len()
    );
    Ok(())
}
