//! Sets `cfg(dpone_live_pg)` when a PostgreSQL test server is configured, so the store's live
//! tests and its bench run; without one they are reported as ignored (with their SKIP reason),
//! never as passed.

fn main() {
    live_pg(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
}

/// Sets `cfg(dpone_live_pg)` when a PostgreSQL server is configured for the tests: the variable
/// `DPONE_TEST_PG_URL` is set, or `.ci/start-postgres` wrote its env file
/// (`<workspace>/target/dpone-test-pg.env`). Without either, the PostgreSQL-backed tests are
/// reported as ignored with their SKIP reason, never as passed; with either, a server that cannot
/// be reached fails them.
fn live_pg(workspace: &std::path::Path) {
    println!("cargo::rustc-check-cfg=cfg(dpone_live_pg)");
    println!("cargo::rerun-if-env-changed=DPONE_TEST_PG_URL");
    let env_file = workspace.join("target/dpone-test-pg.env");
    // A missing file keeps the build script rerunning, so the file's appearance is noticed.
    println!("cargo::rerun-if-changed={}", env_file.display());
    let from_var = std::env::var("DPONE_TEST_PG_URL").is_ok_and(|v| !v.trim().is_empty());
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
