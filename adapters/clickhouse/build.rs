//! Sets `cfg(dpone_live_clickhouse)` when `DPONE_TEST_CLICKHOUSE_URL` names a ClickHouse cluster, so the live tests that need it run;
//! without it they are reported as ignored (with their SKIP reason), never as passed; the same for
//! `DPONE_TEST_CLICKHOUSE_REPLICATED_URL` and the Replicated cluster's tests (`cfg(dpone_live_clickhouse_replicated)`).

fn main() {
    dpone_live_test_cfg::live_clickhouse();
    dpone_live_test_cfg::live_clickhouse_replicated();
}
