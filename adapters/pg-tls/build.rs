//! Sets `cfg(dpone_live_pg)` when a PostgreSQL test server is configured, so the live TLS test
//! runs; without one it is reported as ignored (with its SKIP reason), never as passed.

fn main() {
    dpone_live_test_cfg::live_pg(env!("CARGO_MANIFEST_DIR"));
}
