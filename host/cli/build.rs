//! Sets `cfg(dpone_live_clickhouse)` when `DPONE_TEST_CLICKHOUSE_URL` names a ClickHouse cluster
//! and `cfg(dpone_live_pg)` when a PostgreSQL test server is configured, so the live tests that
//! need them run; without them they are reported as ignored (with their SKIP reason), never as
//! passed.
//!
//! Embeds the shipped policy components: writes `$OUT_DIR/embedded_components.rs`, which
//! `include_bytes!`s the committed `policies/components/{admission,delete-mode,guard,scope}.wasm`.
//! Before embedding, each file's sha256 and size are checked against its pin in
//! `policies/components.lock.json`; a file that does not match its pin fails the build, so the
//! binary only ever embeds components at their pins (and the pins are still checked at every
//! load). `cargo xtask policies --check` proves that a reproducible rebuild from source gives
//! these same bytes. No prior step is needed: `cargo install --path host/cli` works on a fresh
//! clone.

use sha2::{Digest, Sha256};
use std::path::PathBuf;

const KINDS: &[&str] = &["admission", "delete-mode", "guard", "scope"];

fn main() {
    dpone_live_test_cfg::live_pg(env!("CARGO_MANIFEST_DIR"));
    dpone_live_test_cfg::live_clickhouse();
    dpone_live_test_cfg::live_mssql();
    embed_components();
}

fn embed_components() {
    let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lock_path = workspace.join("policies/components.lock.json");
    println!("cargo::rerun-if-changed={}", lock_path.display());
    let lock_text = std::fs::read_to_string(&lock_path)
        .unwrap_or_else(|e| panic!("cannot read policies/components.lock.json: {e}"));
    let lock: serde_json::Value = serde_json::from_str(&lock_text)
        .unwrap_or_else(|e| panic!("policies/components.lock.json is not JSON: {e}"));
    let mut entries = String::new();
    let mut mismatched = Vec::new();
    for kind in KINDS {
        let path = workspace.join(format!("policies/components/{kind}.wasm"));
        println!("cargo::rerun-if-changed={}", path.display());
        let pin = &lock["components"][kind];
        let (Some(want_sha), Some(want_size)) = (pin["sha256"].as_str(), pin["size"].as_u64())
        else {
            panic!("policies/components.lock.json has no sha256 and size for {kind}");
        };
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!("cannot read policies/components/{kind}.wasm: {e} (run `cargo xtask policies`)")
        });
        let got_sha = format!("sha256:{}", hex::encode(Sha256::digest(&bytes)));
        if got_sha != want_sha || bytes.len() as u64 != want_size {
            mismatched.push(format!(
                "{kind}.wasm is {got_sha} ({} bytes), pinned {want_sha} ({want_size} bytes)",
                bytes.len()
            ));
            continue;
        }
        let path = path
            .canonicalize()
            .unwrap_or_else(|e| panic!("cannot resolve policies/components/{kind}.wasm: {e}"));
        entries.push_str(&format!("    ({kind:?}, include_bytes!({path:?})),\n"));
    }
    if !mismatched.is_empty() {
        panic!(
            "the committed components in policies/components/ do not match their pins in \
             policies/components.lock.json: {}; run `cargo xtask policies` to rebuild both",
            mismatched.join("; ")
        );
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let code = format!(
        "/// The shipped components, by kind name: the committed `policies/components/*.wasm`,\n\
         /// checked against their pins at build time.\n\
         pub const EMBEDDED_COMPONENTS: &[(&str, &[u8])] = &[\n{entries}];\n"
    );
    std::fs::write(out.join("embedded_components.rs"), code)
        .unwrap_or_else(|e| panic!("cannot write embedded_components.rs: {e}"));
}
