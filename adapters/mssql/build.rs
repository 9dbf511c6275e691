//! Sets `cfg(dpone_live_mssql)` when `DPONE_TEST_MSSQL_URL` names a SQL Server, so the live tests that need it run;
//! without it they are reported as ignored (with their SKIP reason), never as passed.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dpone_live_mssql)");
    println!("cargo::rerun-if-env-changed=DPONE_TEST_MSSQL_URL");
    if std::env::var("DPONE_TEST_MSSQL_URL").is_ok_and(|v| !v.trim().is_empty()) {
        println!("cargo::rustc-cfg=dpone_live_mssql");
    }
}
