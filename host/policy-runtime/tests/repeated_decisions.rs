//! Repeated decisions on one loaded component: the first goes through the generated bindings,
//! which type-check the exports; later ones instantiate directly and call the checked export.
//! Both paths must give the same decision and the same evidence, for every kind and function.
//!
//! Needs the shipped components (`cargo xtask policies`); run from anywhere.

use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, SandboxConfig, Sha256Digest};
use serde_json::Value;
use std::path::PathBuf;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_json(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{} is readable: {e}", path.display()));
    serde_json::from_str(&text).expect("JSON")
}

#[test]
fn the_checked_first_decision_and_the_direct_later_ones_agree() {
    let lock = read_json(workspace().join("policies/components.lock.json"));
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let mut shared = std::collections::BTreeMap::new();
    for (kind, function, sample) in [
        (PolicyKind::Guard, "decide", "guard"),
        (PolicyKind::DeleteMode, "plan", "delete-mode"),
        (PolicyKind::Admission, "admit-static", "admission-static"),
        (PolicyKind::Admission, "admit-runtime", "admission-runtime"),
        (PolicyKind::Scope, "decide", "scope"),
    ] {
        let path = workspace()
            .join("target/components")
            .join(format!("{}.wasm", kind.as_str()));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| {
            panic!(
                "{} is not built ({e}); run `cargo xtask policies`",
                path.display()
            )
        });
        let pin: Sha256Digest = lock["components"][kind.as_str()]["sha256"]
            .as_str()
            .expect("pin")
            .parse()
            .expect("pin parses");
        let input = read_json(workspace().join(format!("fixtures/samples/{sample}.json")));
        let decide = |loaded: &dpone_policy_runtime::LoadedPolicy| {
            let decided = loaded.decide_json(function, &input).expect("decides");
            serde_json::to_string(&(&decided.decision, &decided.evidence)).expect("JSON")
        };
        // The first decision of a freshly loaded component takes the checked path.
        let fresh = runtime
            .load(kind, &bytes, pin, Budget::default())
            .expect("loads");
        let checked = decide(&fresh);
        // One component per kind shared by every function of it: after its first decision
        // (for admission, of the other function too) decisions take the direct path.
        let loaded = shared.entry(kind).or_insert_with(|| {
            runtime
                .load(kind, &bytes, pin, Budget::default())
                .expect("loads")
        });
        for _ in 0..3 {
            assert_eq!(decide(loaded), checked, "{kind} {function}");
        }
    }
}

/// The pooled-memory reset is chosen per CPU (`SandboxConfig::pagemap_scan`); both must leave a
/// zeroed memory, so a decision after many others decides and evidences the same either way.
#[test]
fn both_pooled_memory_resets_give_the_same_decisions() {
    let lock = read_json(workspace().join("policies/components.lock.json"));
    let path = workspace().join("target/components/guard.wasm");
    let bytes = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{} is not built ({e}); run `cargo xtask policies`",
            path.display()
        )
    });
    let pin: Sha256Digest = lock["components"]["guard"]["sha256"]
        .as_str()
        .expect("pin")
        .parse()
        .expect("pin parses");
    let input = read_json(workspace().join("fixtures/samples/guard.json"));
    let outcomes = [false, true].map(|pagemap_scan| {
        let runtime = PolicyRuntime::new(SandboxConfig {
            pagemap_scan,
            ..SandboxConfig::default()
        })
        .expect("runtime");
        let loaded = runtime
            .load(PolicyKind::Guard, &bytes, pin, Budget::default())
            .expect("loads");
        // Enough decisions that pooled slots are reused and reset many times.
        let all: Vec<String> = (0..100)
            .map(|_| {
                let decided = loaded.decide_json("decide", &input).expect("decides");
                serde_json::to_string(&(&decided.decision, &decided.evidence)).expect("JSON")
            })
            .collect();
        assert!(
            all.windows(2).all(|w| w[0] == w[1]),
            "pagemap_scan {pagemap_scan}"
        );
        all[0].clone()
    });
    assert_eq!(outcomes[0], outcomes[1]);
}
