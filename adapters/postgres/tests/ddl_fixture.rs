//! The reviewed state DDL in `fixtures/xmin/state-ddl.sql` is exactly what
//! `render_state_ddl` produces for the default names (set `DPONE_BLESS=1` to rewrite it).
//!
//! Tier: unit (pure).

use dpone_adapter_postgres::ddl::{default_state_tables, render_state_ddl};

#[test]
fn state_ddl_fixture_is_current() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/xmin/state-ddl.sql");
    let rendered = render_state_ddl("dpone_state", &default_state_tables());
    if std::env::var("DPONE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &rendered).expect("write fixture");
    }
    let fixture = std::fs::read_to_string(&path).expect("fixture");
    assert_eq!(
        fixture, rendered,
        "fixtures/xmin/state-ddl.sql is stale: rerun with DPONE_BLESS=1"
    );
}
