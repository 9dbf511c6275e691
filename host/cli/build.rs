//! Sets `cfg(dpone_live_clickhouse)` when `DPONE_TEST_CLICKHOUSE_URL` names a ClickHouse cluster, so the live tests that need it run;
//! without it they are reported as ignored (with their SKIP reason), never as passed.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(dpone_live_clickhouse)");
    println!("cargo::rerun-if-env-changed=DPONE_TEST_CLICKHOUSE_URL");
    if std::env::var("DPONE_TEST_CLICKHOUSE_URL").is_ok_and(|v| !v.trim().is_empty()) {
        println!("cargo::rustc-cfg=dpone_live_clickhouse");
    }
}
