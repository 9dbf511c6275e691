//! Sets `cfg(dpone_live_pg)` when a PostgreSQL test server is configured, so the live tests that
//! need it run; without it they are reported as ignored (with their SKIP reason), never as passed.

fn main() {
    dpone_live_test_cfg::live_pg(env!("CARGO_MANIFEST_DIR"));
}
