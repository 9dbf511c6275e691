//! Tier: tidy. The architecture invariants of `docs/architecture.md` that can be read off the
//! tree: the one direction of dependency between crates, module docs on every source file, a
//! `SAFETY:` comment on every `unsafe`, and one TLS stack without flagged versions in
//! `Cargo.lock`.

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
                    // The span facade only (no exporter, no I/O), as the other engines.
                    | "tracing"
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

/// `cargo metadata --no-deps` of the workspace: only the workspace's own manifests, nothing
/// resolved, so it needs neither the network nor any crate in the local cargo cache (a full
/// `cargo metadata`, even with `--filter-platform`, resolves every platform's crates, which a
/// cache that never built this workspace does not hold).
fn workspace_metadata() -> Value {
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()))
        .current_dir(workspace())
        .args(["metadata", "--format-version", "1", "--no-deps"])
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

/// `(name, version)` of every package in `Cargo.lock`, read as text: no `cargo metadata`, which
/// needs every platform's crates in the local cache.
fn locked_packages() -> Vec<(String, String)> {
    let lock = std::fs::read_to_string(workspace().join("Cargo.lock")).expect("Cargo.lock");
    let mut out = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(" = ")?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_owned())
            })
        };
        if let (Some(name), Some(version)) = (field("name"), field("version")) {
            out.push((name, version));
        }
    }
    out
}

/// `major.minor.patch` of a locked version (a pre-release suffix is ignored).
fn semver(version: &str) -> (u64, u64, u64) {
    let mut parts = version
        .split(['-', '+'])
        .next()
        .unwrap_or_default()
        .split('.')
        .map(|p| p.parse::<u64>().expect("numeric version part"));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

/// Versions of TLS and archive crates that the RustSec advisory database flags (vulnerable or
/// unmaintained) or that bring a second TLS stack back, each with the reason. The README's
/// "Dependency advisories" describes `cargo xtask audit`, which checks the whole lock against the
/// database.
fn refused_version(name: &str, version: &str) -> Option<&'static str> {
    let v = semver(version);
    match name {
        "rustls" if v < (0, 23, 0) => Some("the rustls 0.21/0.22 line (a second TLS stack)"),
        "rustls-webpki" if v < (0, 103, 13) => {
            Some("RUSTSEC-2026-0098/-0099/-0104 (name constraints, fixed in 0.103.13)")
        }
        "ring" if v < (0, 17, 12) => Some("RUSTSEC-2025-0009/-0010 (ring 0.16 unmaintained)"),
        "rustls-pemfile" => Some("unmaintained (rustls-pki-types reads PEM)"),
        "tar" if v < (0, 4, 45) => Some("below the patched tar 0.4.45"),
        "tokio-postgres" if v < (0, 7, 18) => Some("below the patched tokio-postgres 0.7.18"),
        "wasmtime" if v < (48, 0, 9) && !carried_with_mitigation("RUSTSEC-2026-0570") => Some(
            "RUSTSEC-2026-0570 (GC subtype abort), fixed in 48.0.9, and no mitigation recorded",
        ),
        _ => None,
    }
}

/// Whether `cargo xtask audit` carries `advisory` with a mitigation (its `MITIGATED` table, whose
/// evidence the xtask tests check is in the tree).
fn carried_with_mitigation(advisory: &str) -> bool {
    let audit = std::fs::read_to_string(workspace().join("xtask/src/audit.rs")).expect("audit.rs");
    let table = audit
        .split("pub const MITIGATED")
        .nth(1)
        .and_then(|rest| rest.split("\n}];").next())
        .unwrap_or("");
    table.contains(&format!("id: \"{advisory}\""))
}

/// One TLS stack and no locked version with a known advisory: exactly one `rustls`, and none of
/// the versions [`refused_version`] names.
#[test]
fn the_lock_has_one_tls_stack_and_no_flagged_versions() {
    let packages = locked_packages();
    assert!(
        packages.len() > 100 && packages.iter().any(|(n, _)| n == "wasmtime"),
        "Cargo.lock was read ({} packages)",
        packages.len()
    );
    let rustls: Vec<&str> = packages
        .iter()
        .filter(|(n, _)| n == "rustls")
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(
        rustls.len(),
        1,
        "one rustls version in Cargo.lock: {rustls:?}"
    );
    let flagged: Vec<String> = packages
        .iter()
        .filter_map(|(n, v)| refused_version(n, v).map(|why| format!("{n} {v}: {why}")))
        .collect();
    assert!(flagged.is_empty(), "Cargo.lock: {flagged:#?}");
}

/// The check above recognises each version it is meant to refuse, and lets the current lines
/// through.
#[test]
fn the_flagged_version_list_matches_the_known_findings() {
    for (name, version) in [
        ("rustls", "0.21.12"),
        ("rustls-webpki", "0.101.7"),
        ("rustls-webpki", "0.103.12"),
        ("ring", "0.16.20"),
        ("rustls-pemfile", "1.0.4"),
        ("rustls-pemfile", "2.2.0"),
        ("tar", "0.4.44"),
        ("tokio-postgres", "0.7.17"),
    ] {
        assert!(refused_version(name, version).is_some(), "{name} {version}");
    }
    // wasmtime below 48.0.9 passes only because the audit carries RUSTSEC-2026-0570 with its
    // mitigation; an unknown advisory id is not carried.
    assert!(carried_with_mitigation("RUSTSEC-2026-0570"));
    assert!(!carried_with_mitigation("RUSTSEC-2026-0000"));
    assert!(refused_version("wasmtime", "48.0.9").is_none());
    for (name, version) in [
        ("rustls", "0.23.46"),
        ("rustls-webpki", "0.103.17"),
        ("ring", "0.17.14"),
        ("tar", "0.4.45"),
        ("tokio-postgres", "0.7.18"),
        ("tiberius", "0.13.0"),
    ] {
        assert!(refused_version(name, version).is_none(), "{name} {version}");
    }
}
