//! Sets `cfg(dpone_live_mssql)` when `DPONE_TEST_MSSQL_URL` names a SQL Server, so the live tests that need it run;
//! without it they are reported as ignored (with their SKIP reason), never as passed.

fn main() {
    dpone_live_test_cfg::live_mssql();
}
