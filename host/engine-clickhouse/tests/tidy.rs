//! Tier: unit (tidy). Architecture invariants of the engine crate: no driver, runtime or
//! wasmtime dependency; every source file has module docs.

use std::path::Path;

#[test]
fn the_engine_depends_on_no_driver_runtime_or_wasmtime() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("manifest");
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    for forbidden in [
        "wasmtime",
        "clickhouse",
        "tokio",
        "hyper",
        "reqwest",
        "postgres",
        "tiberius",
        "dpone-policy-runtime",
        "cap-std",
    ] {
        assert!(
            !deps.lines().any(|l| l.trim_start().starts_with(forbidden)),
            "the engine must not depend on {forbidden}"
        );
    }
}

#[test]
fn every_source_file_has_module_docs() {
    fn walk(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 10);
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        assert!(
            text.trim_start().starts_with("//!"),
            "{} lacks module docs",
            f.file_name().and_then(|n| n.to_str()).unwrap_or("?")
        );
    }
}
