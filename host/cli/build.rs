//! Sets `cfg(dpone_live_clickhouse)` when `DPONE_TEST_CLICKHOUSE_URL` names a ClickHouse cluster
//! and `cfg(dpone_live_pg)` when a PostgreSQL test server is configured, so the live tests that
//! need them run; without them they are reported as ignored (with their SKIP reason), never as
//! passed.
//!
//! Embeds the shipped policy components: writes `$OUT_DIR/embedded_components.rs`, which
//! `include_bytes!`s `<target>/components/{admission,delete-mode,guard,scope}.wasm` as built by
//! `cargo xtask policies`. The directory is `DPONE_EMBED_COMPONENTS_DIR` when set, else
//! `$CARGO_TARGET_DIR/components`, else the workspace's `target/components`. A missing component
//! fails the build with the command that builds it. The pins in `policies/components.lock.json`
//! are still checked against these bytes at every load.

use std::path::PathBuf;

const KINDS: &[&str] = &["admission", "delete-mode", "guard", "scope"];

fn main() {
    dpone_live_test_cfg::live_pg(env!("CARGO_MANIFEST_DIR"));
    dpone_live_test_cfg::live_clickhouse();
    embed_components();
}

fn components_dir() -> PathBuf {
    println!("cargo::rerun-if-env-changed=DPONE_EMBED_COMPONENTS_DIR");
    println!("cargo::rerun-if-env-changed=CARGO_TARGET_DIR");
    if let Some(dir) = std::env::var_os("DPONE_EMBED_COMPONENTS_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(dir);
    }
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let workspace = manifest.join("../..");
    match std::env::var_os("CARGO_TARGET_DIR").filter(|v| !v.is_empty()) {
        Some(target) => {
            let target = PathBuf::from(target);
            let target = if target.is_absolute() {
                target
            } else {
                workspace.join(target)
            };
            target.join("components")
        }
        None => workspace.join("target/components"),
    }
}

fn embed_components() {
    let dir = components_dir();
    let mut entries = String::new();
    let mut missing = Vec::new();
    for kind in KINDS {
        let path = dir.join(format!("{kind}.wasm"));
        println!("cargo::rerun-if-changed={}", path.display());
        match path.canonicalize() {
            Ok(path) if path.is_file() => {
                entries.push_str(&format!("    ({kind:?}, include_bytes!({:?})),\n", path));
            }
            _ => missing.push(format!("{kind}.wasm")),
        }
    }
    if !missing.is_empty() {
        panic!(
            "the shipped policy components are embedded in dpone-host, but {} not built in {}: \
             run `cargo xtask policies` first (or set DPONE_EMBED_COMPONENTS_DIR)",
            missing.join(", "),
            dir.display()
        );
    }
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    let code = format!(
        "/// The shipped components, by kind name, as built by `cargo xtask policies`.\n\
         pub const EMBEDDED_COMPONENTS: &[(&str, &[u8])] = &[\n{entries}];\n"
    );
    std::fs::write(out.join("embedded_components.rs"), code)
        .unwrap_or_else(|e| panic!("cannot write embedded_components.rs: {e}"));
}
