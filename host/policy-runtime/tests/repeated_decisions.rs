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
