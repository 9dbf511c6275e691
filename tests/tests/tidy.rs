//! Tier: tidy. The architecture invariants of `docs/architecture.md` that can be read off the
//! tree: the one direction of dependency between crates, module docs on every source file, and a
//! `SAFETY:` comment on every `unsafe`.

use dpone_integration_tests::workspace;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Normal (non-dev, non-build) dependencies of every workspace package, by package name.
fn normal_dependencies() -> BTreeMap<String, Vec<String>> {
    let meta = workspace_metadata();
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str().map(str::to_owned))
                .collect();
            (p["name"].as_str().unwrap_or_default().to_owned(), deps)
        })
        .collect()
}

const DRIVERS: &[&str] = &[
    "tokio-postgres",
    "tokio-postgres-rustls",
    "rustls",
    "postgres",
    "tiberius",
    "clickhouse",
    "hyper",
    "reqwest",
];

#[test]
fn dependencies_point_one_way() {
    let deps = normal_dependencies();
    let mut violations = Vec::new();
    let mut forbid = |package: &str, forbidden: &dyn Fn(&str) -> bool, why: &str| {
        if let Some(list) = deps.get(package) {
            for dep in list.iter().filter(|d| forbidden(d)) {
                violations.push(format!("{package} depends on {dep}: {why}"));
            }
        }
    };
    for (package, _) in deps.iter() {
        if package.starts_with("dpone-engine-") {
            forbid(
                package,
                &|d| {
                    DRIVERS.contains(&d)
                        || d == "wasmtime"
                        || d == "dpone-policy-runtime"
                        || d.starts_with("dpone-adapter-")
                        || d == "dpone-host"
                },
                "engines know nothing of drivers, wasmtime or adapters",
            );
        }
        if package.starts_with("dpone-adapter-") {
            forbid(
                package,
                &|d| d == "wasmtime" || d == "dpone-policy-runtime" || d == "dpone-host",
                "adapters do I/O, not policy",
            );
        }
        if package.starts_with("dpone-policy-")
            && package != "dpone-policy-runtime"
            && package != "dpone-policy-build"
        {
            forbid(
                package,
                &|d| !matches!(d, "dpone-policy-model" | "serde" | "wit-bindgen"),
                "policy cores and the model depend on nothing but the contract",
            );
        }
    }
    forbid(
        "dpone-policy-runtime",
        &|d| {
            DRIVERS.contains(&d)
                || d.starts_with("dpone-engine-")
                || d.starts_with("dpone-adapter-")
                || d == "dpone-trust"
        },
        "the runtime runs policies and nothing else",
    );
    forbid(
        "dpone-trust",
        &|d| d == "wasmtime" || d == "dpone-policy-runtime" || DRIVERS.contains(&d),
        "trust verifies signatures and nothing else",
    );
    forbid(
        "dpone-engine-nonproduction",
        &|d| {
            !matches!(
                d,
                "dpone-boundary"
                    | "dpone-policy-model"
                    | "serde"
                    | "serde_json"
                    | "serde_json_canonicalizer"
                    | "sha2"
                    | "hex"
            )
        },
        "the nonproduction contracts are pure: no driver, tokio, wasmtime or dpone-trust",
    );
    forbid(
        "dpone-policy-model",
        &|d| d != "serde",
        "the model is plain data",
    );
    assert!(deps.contains_key("dpone-policy-model") && deps.contains_key("dpone-policy-runtime"));
    assert!(deps.contains_key("dpone-engine-nonproduction"));
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

/// `cargo metadata --no-deps --offline` of the workspace: only the workspace's own manifests,
/// so it needs neither the network nor any crate in the local cargo cache (a full `cargo
/// metadata`, even with `--filter-platform`, resolves every platform's crates and fails offline
/// on a cache that never built this workspace).
fn workspace_metadata() -> Value {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .current_dir(workspace())
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata is JSON")
}

/// For every package in `Cargo.lock`, the names of the packages it depends on (all kinds: the
/// lock does not tell dev edges apart). A small reader of the lock's fixed layout.
fn lock_dependents_of(target: &str) -> Vec<String> {
    let text = std::fs::read_to_string(workspace().join("Cargo.lock")).expect("Cargo.lock");
    let mut dependents = Vec::new();
    for block in text.split("[[package]]").skip(1) {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("every locked package has a name");
        let Some(deps) = block.split("dependencies = [").nth(1) else {
            continue;
        };
        let deps = deps.split(']').next().unwrap_or_default();
        let depends = deps
            .split(',')
            .map(|d| d.trim().trim_matches('"'))
            .any(|d| d.split(' ').next() == Some(target));
        if depends {
            dependents.push(name.to_owned());
        }
    }
    dependents
}

/// The test signer issues attestations from a made-up certificate authority: it must never be
/// compiled into the product. It is a workspace path crate that is never published, so only
/// workspace packages can depend on it (checked against `Cargo.lock`); the check then walks
/// `dpone-host`'s workspace dependencies along normal and build edges, optional ones included
/// (dev-dependencies are not part of the binary), and refuses any path to it. It reads only the
/// checkout: no network and no local cargo cache (run it with `CARGO_HOME` empty and
/// `CARGO_NET_OFFLINE=true`).
#[test]
fn the_product_binary_never_depends_on_the_test_signer() {
    const TEST_ONLY: &str = "dpone-test-attest-signer";
    let meta = workspace_metadata();
    let packages = meta["packages"].as_array().expect("packages");
    let workspace_names: std::collections::BTreeSet<&str> =
        packages.iter().filter_map(|p| p["name"].as_str()).collect();
    assert!(
        workspace_names.contains(TEST_ONLY),
        "{TEST_ONLY} is a workspace package, so this check can see it"
    );
    let outside: Vec<String> = lock_dependents_of(TEST_ONLY)
        .into_iter()
        .filter(|n| !workspace_names.contains(n.as_str()))
        .collect();
    assert!(
        outside.is_empty(),
        "only workspace packages may depend on {TEST_ONLY}; Cargo.lock has: {outside:?}"
    );
    assert!(
        !lock_dependents_of(TEST_ONLY).is_empty(),
        "the Cargo.lock reader sees the test signer's dependents (dev and xtask)"
    );
    let deps_of: BTreeMap<&str, &Vec<Value>> = packages
        .iter()
        .filter_map(|p| Some((p["name"].as_str()?, p["dependencies"].as_array()?)))
        .collect();
    // Breadth-first over linked workspace edges, remembering how each package was reached.
    let host = "dpone-host";
    assert!(
        deps_of.contains_key(host),
        "dpone-host is a workspace package"
    );
    let mut reached_from: BTreeMap<&str, &str> = BTreeMap::from([(host, host)]);
    let mut queue = std::collections::VecDeque::from([host]);
    let mut dev_edges_seen = 0;
    while let Some(name) = queue.pop_front() {
        for dep in deps_of[name].iter() {
            let Some(dep_name) = dep["name"].as_str() else {
                continue;
            };
            if dep["kind"] == "dev" {
                dev_edges_seen += 1;
                continue;
            }
            if !workspace_names.contains(dep_name) {
                continue;
            }
            if !reached_from.contains_key(dep_name) {
                reached_from.insert(dep_name, name);
                queue.push_back(dep_name);
            }
        }
    }
    assert!(dev_edges_seen > 0, "dev-dependency edges are told apart");
    for expected in ["dpone-trust", "dpone-policy-runtime", "dpone-boundary"] {
        assert!(
            reached_from.contains_key(expected),
            "the walk covers dpone-host's workspace dependencies ({expected})"
        );
    }
    if reached_from.contains_key(TEST_ONLY) {
        let mut path = vec![TEST_ONLY];
        let mut at = TEST_ONLY;
        while at != host {
            at = reached_from[at];
            path.push(at);
        }
        path.reverse();
        panic!(
            "dpone-host depends on the test signer: {}",
            path.join(" -> ")
        );
    }
}

fn rust_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                rust_sources(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.components().any(|c| c.as_os_str() == "src")
        {
            out.push(path);
        }
    }
}

fn workspace_sources() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for top in ["host", "policies", "adapters", "fixtures", "tests", "xtask"] {
        rust_sources(&workspace().join(top), &mut files);
    }
    files.sort();
    files
}

#[test]
fn every_source_file_starts_with_module_docs() {
    let files = workspace_sources();
    assert!(files.len() > 20, "found the sources");
    let missing: Vec<_> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_default();
            !text.trim_start().starts_with("//!")
        })
        .map(|f| {
            f.strip_prefix(workspace())
                .unwrap_or(f)
                .display()
                .to_string()
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a `//!` module doc:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut unexplained = Vec::new();
    for file in workspace_sources() {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if !(code.contains("unsafe {")
                || code.contains("unsafe fn")
                || code.contains("unsafe impl"))
            {
                continue;
            }
            let window = &lines[i.saturating_sub(8)..i];
            if !window.iter().any(|l| l.contains("SAFETY:")) {
                unexplained.push(format!(
                    "{}:{}",
                    file.strip_prefix(workspace()).unwrap_or(&file).display(),
                    i + 1
                ));
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "unsafe without a preceding `// SAFETY:` comment:\n{}",
        unexplained.join("\n")
    );
}
