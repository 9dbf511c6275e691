//! Shared helpers for the cross-crate tests: where the workspace, the built components and the
//! fixtures are, and loading shipped components at their locked pins.

use dpone_policy_build::ComponentLock;
use dpone_policy_runtime::{Budget, LoadedPolicy, PolicyKind, PolicyRuntime, Sha256Digest};
use std::path::PathBuf;

/// The workspace root.
pub fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(PathBuf::from)
        .unwrap_or_default()
}

/// Reads a built component from `target/components/`. Panics with the command that builds it.
pub fn component(name: &str) -> Vec<u8> {
    let path = workspace()
        .join("target/components")
        .join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{name}.wasm is not built ({e}); run `cargo xtask test` (or `cargo xtask policies` and `cargo xtask hostile`)"
        )
    })
}

/// The locked pin of a shipped policy.
pub fn pin(kind: PolicyKind) -> Sha256Digest {
    let text = std::fs::read_to_string(workspace().join("policies/components.lock.json"))
        .expect("policies/components.lock.json is readable");
    let lock = ComponentLock::from_json(&text).expect("lock file parses");
    lock.components[kind.as_str()]
        .sha256
        .parse()
        .expect("lock pins are sha256 digests")
}

/// Loads the shipped component of `kind` at its locked pin.
pub fn load_shipped(runtime: &PolicyRuntime, kind: PolicyKind) -> LoadedPolicy {
    runtime
        .load(
            kind,
            &component(kind.as_str()),
            pin(kind),
            Budget::default(),
        )
        .unwrap_or_else(|e| panic!("shipped {kind} component loads: {} {e}", e.code()))
}

/// Every decision table in `fixtures/decision-tables/`, with its file name.
pub fn decision_tables() -> Vec<(String, dpone_decision_table::DecisionTable)> {
    let dir = workspace().join("fixtures/decision-tables");
    let mut tables: Vec<_> = std::fs::read_dir(&dir)
        .expect("fixtures/decision-tables exists")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("table readable");
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let table = dpone_decision_table::DecisionTable::from_json(&text)
                .unwrap_or_else(|e| panic!("{name} parses: {e}"));
            (name, table)
        })
        .collect();
    tables.sort_by(|a, b| a.0.cmp(&b.0));
    tables
}

/// The sample guard facts in `fixtures/samples/guard.json`, parsed into the model type `T`.
pub fn guard_sample<T: serde::de::DeserializeOwned>() -> T {
    let text = std::fs::read_to_string(workspace().join("fixtures/samples/guard.json"))
        .expect("guard sample is readable");
    serde_json::from_str(&text).expect("guard sample parses")
}
