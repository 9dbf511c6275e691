//! Build-script helper shared by every crate with live tests: it sets `cfg(dpone_live_*)` when a
//! test server is configured, so the live tests run (and fail if the server cannot be reached);
//! without one they are reported as ignored with their SKIP reason, never as passed.
//!
//! Only build scripts use it (a `[build-dependencies]` entry); it has no dependencies. It speaks to
//! cargo the only way a build script can, on stdout.

#![allow(clippy::print_stdout)]

use std::path::Path;

/// Sets `cfg(dpone_live_pg)` when a PostgreSQL server is configured for the tests: the variable
/// `DPONE_TEST_PG_URL` is set, or `.ci/start-postgres` wrote its env file
/// (`<workspace>/target/dpone-test-pg.env`). `manifest_dir` is the calling crate's
/// `CARGO_MANIFEST_DIR`, two levels below the workspace root.
pub fn live_pg(manifest_dir: &str) {
    println!("cargo::rustc-check-cfg=cfg(dpone_live_pg)");
    println!("cargo::rerun-if-env-changed=DPONE_TEST_PG_URL");
    let env_file = Path::new(manifest_dir).join("../../target/dpone-test-pg.env");
    // A missing file keeps the build script rerunning, so the file's appearance is noticed.
    println!("cargo::rerun-if-changed={}", env_file.display());
    let from_var = non_empty_var("DPONE_TEST_PG_URL");
    let from_file = std::fs::read_to_string(&env_file).is_ok_and(|t| {
        t.lines().any(|l| {
            l.trim()
                .strip_prefix("export DPONE_TEST_PG_URL=")
                .is_some_and(|u| !u.trim().is_empty())
        })
    });
    if from_var || from_file {
        println!("cargo::rustc-cfg=dpone_live_pg");
    }
}

/// Sets `cfg(dpone_live_clickhouse)` when `DPONE_TEST_CLICKHOUSE_URL` names a ClickHouse cluster.
pub fn live_clickhouse() {
    from_variable("dpone_live_clickhouse", "DPONE_TEST_CLICKHOUSE_URL");
}

/// Sets `cfg(dpone_live_clickhouse_replicated)` when `DPONE_TEST_CLICKHOUSE_REPLICATED_URL`
/// names a ClickHouse cluster of `Replicated*MergeTree` replicas (`internal_replication = true`).
pub fn live_clickhouse_replicated() {
    from_variable(
        "dpone_live_clickhouse_replicated",
        "DPONE_TEST_CLICKHOUSE_REPLICATED_URL",
    );
}

/// Sets `cfg(dpone_live_mssql)` when `DPONE_TEST_MSSQL_URL` names a SQL Server.
pub fn live_mssql() {
    from_variable("dpone_live_mssql", "DPONE_TEST_MSSQL_URL");
}

fn from_variable(cfg: &str, variable: &str) {
    println!("cargo::rustc-check-cfg=cfg({cfg})");
    println!("cargo::rerun-if-env-changed={variable}");
    if non_empty_var(variable) {
        println!("cargo::rustc-cfg={cfg}");
    }
}

fn non_empty_var(variable: &str) -> bool {
    std::env::var(variable).is_ok_and(|v| !v.trim().is_empty())
}
