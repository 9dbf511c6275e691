//! End to end: a bundle of the shipped components and decision tables is signed in the test,
//! activated through the gate, and asked for a decision whose evidence carries the bundle's
//! verification; then tampered with in several ways, each refused with its code. A second test
//! drives the same flow through the `dpone-host` binary's `bundle` and `verify-bundle`
//! commands.
//!
//! The shipped components are the committed `policies/components/*.wasm` (the bytes the binary
//! embeds, at their pins); the hostile fixture comes from `target/components/` (`cargo xtask
//! hostile`). The Sigstore conformance corpus is vendored in `fixtures/conformance/`. A missing
//! input fails the test that needs it, never passes it.

#[allow(dead_code)]
#[path = "../src/activation.rs"]
mod activation;

use activation::{activate_bundle, activate_bundle_recorded};
use dpone_decision_table::{DecisionTable, first_mismatch};
use dpone_policy_runtime::{PolicyKind as RuntimeKind, PolicyRuntime, SandboxConfig};
use dpone_trust::bundle::{self, BundleBuilder, BundleFiles};
use dpone_trust::keys::SecretKey;
use dpone_trust::manifest::{PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const BUDGET: ResourceBudget = ResourceBudget {
    fuel: 10_000_000,
    memory_bytes: 16 << 20,
    wasm_stack_bytes: 512 << 10,
};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const SHIPPED: &[&str] = &["admission", "delete-mode", "guard", "scope"];

/// Where the component of `kind` is: a shipped kind's committed copy next to the lock file, or
/// a fixture built into `target/components/` by `cargo xtask hostile`.
fn component_path(kind: &str) -> PathBuf {
    if SHIPPED.contains(&kind) {
        workspace().join(format!("policies/components/{kind}.wasm"))
    } else {
        workspace().join(format!("target/components/{kind}.wasm"))
    }
}

/// The component of `kind`, or `None` when it is missing (the caller fails).
fn component(kind: &str) -> Option<Vec<u8>> {
    std::fs::read(component_path(kind)).ok()
}

fn table(name: &str) -> Vec<u8> {
    std::fs::read(
        workspace()
            .join("fixtures/decision-tables")
            .join(format!("{name}.json")),
    )
    .expect("decision table fixture")
}

/// Test-only signer from a fixed seed.
fn signer() -> SecretKey {
    SecretKey::from_seed(&[42; 32])
}

fn trust() -> TrustPolicy {
    TrustPolicy::new(vec![signer().public_key().expect("key")], 1, Vec::new()).expect("policy")
}

fn signed(builder: BundleBuilder) -> BundleFiles {
    let mut files = builder.build().expect("bundle builds");
    bundle::sign(&mut files, &signer()).expect("signs");
    files
}

fn code(runtime: &PolicyRuntime, files: &BundleFiles) -> &'static str {
    match activate_bundle(runtime, files, &trust()) {
        Ok(_) => "OK",
        Err(err) => err.code(),
    }
}

#[test]
fn a_signed_bundle_activates_decides_with_evidence_and_refuses_tampering() {
    let (guard, delete_mode) = (
        required_component("guard"),
        required_component("delete-mode"),
    );
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let builder = || {
        BundleBuilder::new("shipped", "0.1.0")
            .policy(PolicyKind::Guard, guard.clone(), BUDGET)
            .policy(PolicyKind::DeleteMode, delete_mode.clone(), BUDGET)
            .table("guard", PolicyKind::Guard, table("guard"))
            .table("delete-mode", PolicyKind::DeleteMode, table("delete-mode"))
    };
    let files = signed(builder());

    // Activate: verified, loaded at the manifest's pins, every table row agreed.
    let activated = activate_bundle(&runtime, &files, &trust()).expect("activates");
    let evidence = serde_json::to_value(activated.activation_evidence()).expect("evidence");
    let rows: u64 = evidence["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| t["agreed"].as_u64().unwrap_or(0))
        .sum();
    assert!(rows > 10, "the shipped tables have rows: {evidence}");
    assert!(activated.policy(RuntimeKind::Scope).is_none());

    // Decide: the decision's evidence names the component and the verified bundle.
    let guard_table = DecisionTable::from_json(std::str::from_utf8(&table("guard")).expect("utf8"))
        .expect("table parses");
    let row = &guard_table.rows[0];
    let decided = activated
        .decide_json(RuntimeKind::Guard, "decide", &row.input)
        .expect("decides");
    assert_eq!(first_mismatch(&row.expect, &decided["decision"], "$"), None);
    let manifest_sha256 =
        dpone_trust::Sha256Digest::of(files.get("manifest.json").expect("m")).to_hex();
    assert_eq!(
        decided["bundle"]["manifest_sha256"],
        Value::String(manifest_sha256)
    );
    assert_eq!(
        decided["evidence"]["component_sha256"],
        Value::String(format!(
            "sha256:{}",
            dpone_trust::Sha256Digest::of(&guard).to_hex()
        ))
    );
    assert_eq!(
        decided["bundle"]["signers"][0],
        Value::String(signer().public_key().expect("key").id().to_string())
    );
    assert_eq!(
        activated
            .decide_json(RuntimeKind::Scope, "decide", &row.input)
            .err()
            .map(|e| e.code()),
        Some("DPONE_ACTIVATION_POLICY_ABSENT")
    );

    // Tamper: a flipped bit in a component.
    let mut flipped = files.clone();
    let mut bytes = guard.clone();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    flipped.insert("guard.wasm", bytes).expect("insert");
    assert_eq!(
        code(&runtime, &flipped),
        "DPONE_BUNDLE_FILE_DIGEST_MISMATCH"
    );

    // Tamper: signature removed.
    let mut unsigned = files.clone();
    unsigned.remove("signatures.json");
    assert_eq!(code(&runtime, &unsigned), "DPONE_BUNDLE_UNSIGNED");

    // A properly signed bundle whose table disagrees with its component is still refused.
    let mut wrong: Value = serde_json::from_slice(&table("guard")).expect("json");
    wrong["rows"][0]["expect"] =
        serde_json::json!({"deny": {"code": "DPONE_NOT_WHAT_THE_POLICY_SAYS"}});
    let disagreeing = signed(
        BundleBuilder::new("shipped", "0.1.1")
            .policy(PolicyKind::Guard, guard.clone(), BUDGET)
            .table(
                "guard",
                PolicyKind::Guard,
                serde_json::to_vec(&wrong).expect("json"),
            ),
    );
    assert_eq!(
        code(&runtime, &disagreeing),
        "DPONE_ACTIVATION_TABLE_DISAGREES"
    );

    // A signed bundle that ships the guard component as its delete-mode policy: the runtime
    // refuses the component for the declared kind.
    let swapped = signed(
        BundleBuilder::new("shipped", "0.1.2")
            .policy(PolicyKind::DeleteMode, guard.clone(), BUDGET)
            .table("delete-mode", PolicyKind::DeleteMode, table("delete-mode")),
    );
    let swapped_code = code(&runtime, &swapped);
    assert!(swapped_code.starts_with("DPONE_POLICY_"), "{swapped_code}");

    // A component without a table is not activated.
    let untested = signed(BundleBuilder::new("shipped", "0.1.3").policy(
        PolicyKind::Guard,
        guard.clone(),
        BUDGET,
    ));
    assert_eq!(
        code(&runtime, &untested),
        "DPONE_ACTIVATION_COMPONENT_UNTESTED"
    );

    // Budgets beyond what the host provides.
    let big_stack = signed(
        BundleBuilder::new("shipped", "0.1.4")
            .policy(
                PolicyKind::Guard,
                guard.clone(),
                ResourceBudget {
                    wasm_stack_bytes: 64 << 20,
                    ..BUDGET
                },
            )
            .table("guard", PolicyKind::Guard, table("guard")),
    );
    assert_eq!(
        code(&runtime, &big_stack),
        "DPONE_ACTIVATION_STACK_UNAVAILABLE"
    );
    let big_fuel = signed(
        BundleBuilder::new("shipped", "0.1.5")
            .policy(
                PolicyKind::Guard,
                guard.clone(),
                ResourceBudget {
                    fuel: 1 << 50,
                    ..BUDGET
                },
            )
            .table("guard", PolicyKind::Guard, table("guard")),
    );
    assert!(code(&runtime, &big_fuel).starts_with("DPONE_POLICY_"));
}

/// Runs the binary; returns (exit code, stdout, stderr).
fn run(args: &[&str], dir: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .args(args)
        .current_dir(dir)
        .env("DPONE_STATE_DIR", dir.join("state"))
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_bundle_commands_work_end_to_end() {
    let dir = tempfile_dir();
    let _ = required_component("guard");
    let guard = component_path("guard");
    let guard_table = workspace().join("fixtures/decision-tables/guard.json");
    let (guard, guard_table) = (guard.to_string_lossy(), guard_table.to_string_lossy());

    let (rc, out, _) = run(&["bundle", "keygen", "--out", "signer.key"], &dir);
    assert_eq!(rc, 0);
    assert!(
        !out.contains("PRIVATE"),
        "keygen never prints the private key"
    );
    let policy_arg = format!("guard={guard}");
    let table_arg = format!("guard={guard_table}");
    let (rc, _, err) = run(
        &[
            "bundle",
            "create",
            "--sequence",
            "1",
            "--out",
            "b",
            "--name",
            "e2e",
            "--version",
            "1.0.0",
            "--policy",
            &policy_arg,
            "--table",
            &table_arg,
        ],
        &dir,
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        run(&["bundle", "sign", "b", "--key", "signer.key"], &dir).0,
        0
    );
    let (rc, policy, _) = run(
        &[
            "bundle",
            "trust-policy",
            "--key",
            "signer.key.pub",
            "--threshold",
            "1",
        ],
        &dir,
    );
    assert_eq!(rc, 0);
    std::fs::write(dir.join("policy.json"), policy).expect("write policy");

    let (rc, out, err) = run(
        &["bundle", "verify", "b", "--trust-policy", "policy.json"],
        &dir,
    );
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("\"verified\": true"));
    assert!(
        !out.contains(&dir.to_string_lossy().to_string()),
        "no local paths in output"
    );
    let (rc, out, err) = run(
        &["bundle", "activate", "b", "--trust-policy", "policy.json"],
        &dir,
    );
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("\"activated\": true"));

    assert_eq!(run(&["bundle", "pack", "b", "--out", "b.tar"], &dir).0, 0);
    assert_eq!(
        run(
            &["bundle", "verify", "b.tar", "--trust-policy", "policy.json"],
            &dir
        )
        .0,
        0
    );

    // With a trust policy configured, decisions come only from the verified bundle.
    let facts = workspace().join("fixtures/samples/guard.json");
    let facts = facts.to_string_lossy();
    let (rc, out, err) = run(
        &[
            "--trust-policy",
            "policy.json",
            "--bundle",
            "b",
            "policy",
            "eval",
            "guard",
            "--input",
            &facts,
        ],
        &dir,
    );
    assert_eq!(rc, 0, "{err}");
    let eval: serde_json::Value = serde_json::from_str(&out).expect("eval prints JSON");
    assert!(
        eval["bundle"].is_object(),
        "bundle evidence accompanies the decision: {out}"
    );
    assert!(eval["decision"].is_object());
    let (rc, _, err) = run(
        &[
            "--trust-policy",
            "policy.json",
            "policy",
            "eval",
            "guard",
            "--input",
            &facts,
        ],
        &dir,
    );
    assert_eq!(
        rc, 1,
        "a configured trust policy without a bundle refuses: {err}"
    );
    assert!(err.contains("DPONE_TRUST_BUNDLE_REQUIRED"), "{err}");
    let (rc, _, err) = run(
        &[
            "--trust-policy",
            "policy.json",
            "--bundle",
            "b",
            "policy",
            "eval",
            "guard",
            "--input",
            &facts,
            "--component",
            &guard,
            "--pin",
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ],
        &dir,
    );
    assert_eq!(rc, 1, "--component cannot bypass the bundle: {err}");

    let path = dir.join("b/guard.wasm");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[100] ^= 1;
    std::fs::write(&path, bytes).expect("write");
    let (rc, _, err) = run(
        &["bundle", "verify", "b", "--trust-policy", "policy.json"],
        &dir,
    );
    assert_eq!(rc, 1);
    assert!(err.contains("DPONE_BUNDLE_FILE_DIGEST_MISMATCH"), "{err}");
    let (rc, _, err) = run(
        &["bundle", "activate", "b", "--trust-policy", "policy.json"],
        &dir,
    );
    assert_eq!(rc, 1);
    assert!(err.contains("DPONE_BUNDLE_FILE_DIGEST_MISMATCH"), "{err}");
    let (rc, _, err) = run(
        &[
            "--trust-policy",
            "policy.json",
            "--bundle",
            "b",
            "policy",
            "eval",
            "guard",
            "--input",
            &facts,
        ],
        &dir,
    );
    assert_eq!(rc, 1, "a tampered bundle decides nothing: {err}");
    assert!(err.contains("DPONE_BUNDLE_FILE_DIGEST_MISMATCH"), "{err}");

    let cases = workspace().join("fixtures/conformance/sigstore");
    assert!(
        cases.is_dir(),
        "the vendored conformance corpus fixtures/conformance/sigstore is missing"
    );
    let bundle = cases.join("cases/happy-path-v0.3/bundle.sigstore.json");
    let root = cases.join("production_trusted_root.json");
    let artifact = cases.join("cases/a.txt");
    let identity = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
    let args = |id: &'static str| -> Vec<String> {
        vec![
            "verify-bundle".into(),
            "--bundle".into(),
            bundle.to_string_lossy().into_owned(),
            "--certificate-identity".into(),
            id.into(),
            "--certificate-oidc-issuer".into(),
            "https://token.actions.githubusercontent.com".into(),
            "--trusted-root".into(),
            root.to_string_lossy().into_owned(),
            artifact.to_string_lossy().into_owned(),
        ]
    };
    let ok: Vec<String> = args(identity);
    let ok: Vec<&str> = ok.iter().map(String::as_str).collect();
    assert_eq!(run(&ok, &dir).0, 0);
    let wrong: Vec<String> = args("https://github.com/someone/else");
    let wrong: Vec<&str> = wrong.iter().map(String::as_str).collect();
    assert_eq!(run(&wrong, &dir).0, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system temp dir.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "dpone-bundle-e2e-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn trusted_root_sha256_narrows_the_policys_pins_and_never_widens_them() {
    let cases = workspace().join("fixtures/conformance/sigstore");
    assert!(
        cases.is_dir(),
        "the vendored conformance corpus fixtures/conformance/sigstore is missing"
    );
    let dir = tempfile_dir();
    assert_eq!(run(&["bundle", "keygen", "--out", "signer.key"], &dir).0, 0);
    // A trust policy that pins no Sigstore trusted root at all.
    let (rc, policy, err) = run(
        &[
            "bundle",
            "trust-policy",
            "--key",
            "signer.key.pub",
            "--threshold",
            "1",
        ],
        &dir,
    );
    assert_eq!(rc, 0, "{err}");
    std::fs::write(dir.join("policy.json"), policy).expect("write policy");
    let root = cases.join("production_trusted_root.json");
    let root_sha = {
        let out = Command::new("sha256sum")
            .arg(&root)
            .output()
            .expect("sha256sum");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let bundle = cases.join("cases/happy-path-v0.3/bundle.sigstore.json");
    let artifact = cases.join("cases/a.txt");
    let verify = |extra: &[&str]| {
        let mut args = vec![
            "verify-bundle".to_owned(),
            "--bundle".to_owned(),
            bundle.to_string_lossy().into_owned(),
            "--certificate-identity".to_owned(),
            "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main".to_owned(),
            "--certificate-oidc-issuer".to_owned(),
            "https://token.actions.githubusercontent.com".to_owned(),
            "--trusted-root".to_owned(),
            root.to_string_lossy().into_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.push(artifact.to_string_lossy().into_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args, &dir)
    };
    // The pin alone verifies.
    let (rc, _, err) = verify(&["--trusted-root-sha256", &root_sha]);
    assert_eq!(rc, 0, "{err}");
    // With the policy, a pin the policy does not carry is refused, not added.
    let (rc, _, err) = verify(&[
        "--trusted-root-sha256",
        &root_sha,
        "--trust-policy",
        "policy.json",
    ]);
    assert_ne!(rc, 0);
    assert!(err.contains("DPONE_CLI_TRUSTED_ROOT_PIN_CONFLICT"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn now() -> u64 {
    dpone_trust::freshness::unix_now()
}

/// A signed guard bundle named `fresh` at `sequence`, valid over `window`.
fn fresh(guard: &[u8], version: &str, sequence: u64, window: (u64, u64)) -> BundleFiles {
    signed(
        BundleBuilder::new("fresh", version)
            .sequence(sequence)
            .validity(window.0, window.1)
            .policy(PolicyKind::Guard, guard.to_vec(), BUDGET)
            .table("guard", PolicyKind::Guard, table("guard")),
    )
}

fn recorded(runtime: &PolicyRuntime, files: &BundleFiles, ledger: &Path) -> &'static str {
    match activate_bundle_recorded(runtime, files, &trust(), ledger) {
        Ok(_) => "OK",
        Err(err) => err.code(),
    }
}

#[test]
fn an_older_signed_bundle_is_never_activated_again() {
    let guard = required_component("guard");
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let state = tempfile::tempdir().expect("state dir");
    let ledger = state.path().join("bundle-activations.json");
    let window = (now() - 60, now() + 3600);
    let one = fresh(&guard, "1.0.0", 1, window);
    let two = fresh(&guard, "2.0.0", 2, window);

    assert_eq!(recorded(&runtime, &one, &ledger), "OK");
    assert_eq!(recorded(&runtime, &two, &ledger), "OK");
    // The replay: validly signed by the same keys, but older.
    assert_eq!(recorded(&runtime, &one, &ledger), "DPONE_BUNDLE_ROLLBACK");
    // The current bundle activates again (every CLI command activates it).
    assert_eq!(recorded(&runtime, &two, &ledger), "OK");
    // Other content under a sequence already used is refused.
    let two_again = fresh(&guard, "2.0.1", 2, window);
    assert_eq!(
        recorded(&runtime, &two_again, &ledger),
        "DPONE_BUNDLE_SEQUENCE_REUSED"
    );
    // A failed activation records nothing: a higher sequence whose table disagrees is refused,
    // and the ledger still holds sequence 2.
    let mut broken_table: Value = serde_json::from_slice(&table("guard")).expect("table json");
    broken_table["rows"][0]["expect"] =
        serde_json::json!({"deny": {"code": "NOPE", "message": ""}});
    let broken = signed(
        BundleBuilder::new("fresh", "9.0.0")
            .sequence(9)
            .validity(window.0, window.1)
            .policy(PolicyKind::Guard, guard.clone(), BUDGET)
            .table(
                "guard",
                PolicyKind::Guard,
                serde_json::to_vec(&broken_table).expect("json"),
            ),
    );
    assert_ne!(recorded(&runtime, &broken, &ledger), "OK");
    assert_eq!(recorded(&runtime, &two, &ledger), "OK");
    let three = fresh(&guard, "3.0.0", 3, window);
    assert_eq!(recorded(&runtime, &three, &ledger), "OK");
    assert_eq!(recorded(&runtime, &two, &ledger), "DPONE_BUNDLE_ROLLBACK");
}

#[test]
fn expired_and_not_yet_valid_bundles_are_refused_and_a_frozen_host_stops_deciding() {
    let guard = required_component("guard");
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let state = tempfile::tempdir().expect("state dir");
    let ledger = state.path().join("bundle-activations.json");
    let t = now();
    let expired = fresh(&guard, "1.0.0", 1, (t - 3600, t - 1));
    assert_eq!(
        recorded(&runtime, &expired, &ledger),
        "DPONE_BUNDLE_EXPIRED"
    );
    assert_eq!(code(&runtime, &expired), "DPONE_BUNDLE_EXPIRED");
    let early = fresh(&guard, "1.0.0", 1, (t + 3600, t + 7200));
    assert_eq!(
        recorded(&runtime, &early, &ledger),
        "DPONE_BUNDLE_NOT_YET_VALID"
    );

    // Freeze: the host is held on the last bundle it saw; once its window ends, it is refused.
    let short = fresh(&guard, "1.0.1", 1, (t - 10, t + 2));
    assert_eq!(recorded(&runtime, &short, &ledger), "OK");
    std::thread::sleep(std::time::Duration::from_millis(3200));
    assert_eq!(recorded(&runtime, &short, &ledger), "DPONE_BUNDLE_EXPIRED");
}

#[test]
fn a_clock_earlier_than_the_last_activation_refuses() {
    let guard = required_component("guard");
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let state = tempfile::tempdir().expect("state dir");
    let ledger = state.path().join("bundle-activations.json");
    let t = now();
    let files = fresh(&guard, "1.0.0", 1, (t - 60, t + 100_000));
    let manifest =
        dpone_trust::manifest::Manifest::parse(files.get("manifest.json").expect("manifest"))
            .expect("parses");
    let digest = dpone_trust::Sha256Digest::of(files.get("manifest.json").expect("manifest"));
    // The last activation happened "later" than the clock now reads: the clock was set back.
    let mut later = dpone_trust::freshness::ActivationLedger::default();
    later.record(trust().sha256(), &manifest, &digest, t + 50_000);
    later.save(&ledger).expect("save");
    assert_eq!(
        recorded(&runtime, &files, &ledger),
        "DPONE_BUNDLE_CLOCK_BEHIND"
    );
}

/// A component the test cannot do without: a missing one fails the test, never passes it.
fn required_component(name: &str) -> Vec<u8> {
    component(name).unwrap_or_else(|| {
        panic!("the component {name}.wasm is missing (hostile fixtures: run `cargo xtask hostile`)")
    })
}

fn guard_table(expect: Value) -> Vec<u8> {
    let sample: Value = serde_json::from_slice(
        &std::fs::read(workspace().join("fixtures/samples/guard.json")).expect("sample"),
    )
    .expect("sample parses");
    serde_json::to_vec(&serde_json::json!({
        "kind": "guard",
        "function": "decide",
        "rows": [{"name": "the sample", "input": sample, "expect": expect}],
    }))
    .expect("table")
}

#[test]
fn host_conformance_rows_run_on_every_activation_and_are_in_the_evidence() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let files = signed(
        BundleBuilder::new("shipped", "0.1.0")
            .policy(PolicyKind::Guard, required_component("guard"), BUDGET)
            .policy(
                PolicyKind::DeleteMode,
                required_component("delete-mode"),
                BUDGET,
            )
            .table("guard", PolicyKind::Guard, table("guard"))
            .table("delete-mode", PolicyKind::DeleteMode, table("delete-mode")),
    );
    let activated = activate_bundle(&runtime, &files, &trust()).expect("activates");
    let evidence = serde_json::to_value(activated.activation_evidence()).expect("evidence");
    let host = &evidence["host_conformance"];
    assert_eq!(host["wit_package"], "dpone:policy@0.1.0");
    let tables = host["tables"].as_array().expect("host tables");
    let mut kinds: Vec<&str> = tables.iter().filter_map(|t| t["kind"].as_str()).collect();
    kinds.sort_unstable();
    assert_eq!(kinds, ["delete-mode", "guard"]);
    for table in tables {
        assert!(table["table_version"].as_u64().is_some_and(|v| v >= 1));
        assert_eq!(table["failed"], 0, "{table}");
        let rows = table["rows"].as_array().expect("rows");
        assert!(rows.len() >= 10, "{table}");
        for row in rows {
            assert_eq!(row["passed"], true, "{row}");
            assert!(row["id"].as_str().is_some_and(|id| !id.is_empty()));
        }
    }
    let ids: Vec<&str> = tables
        .iter()
        .flat_map(|t| t["rows"].as_array().into_iter().flatten())
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert!(ids.contains(&"guard.authority.expired"), "{ids:?}");
    assert!(ids.contains(&"guard.authority.consumed"), "{ids:?}");
}

#[test]
fn a_permissive_guard_is_refused_by_the_host_tables_whatever_its_own_table_says() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    // The author's table passes: the sample is an allowed run and the guard allows it.
    let files = signed(
        BundleBuilder::new("permissive", "0.1.0")
            .policy(
                PolicyKind::Guard,
                required_component("hostile-permissive"),
                BUDGET,
            )
            .table(
                "guard",
                PolicyKind::Guard,
                guard_table(serde_json::json!({"allow": {"load": "incremental"}})),
            ),
    );
    let err = activate_bundle(&runtime, &files, &trust())
        .err()
        .expect("a permissive guard is refused");
    assert_eq!(err.code(), "DPONE_ACTIVATION_CONFORMANCE_FAILED");
    assert!(
        err.to_string()
            .contains("row guard.max-delete-rows.no-authority"),
        "{err}"
    );
    assert!(err.is_refusal());

    // The same author table activates the shipped guard.
    let files = signed(
        BundleBuilder::new("shipped", "0.1.0")
            .policy(PolicyKind::Guard, required_component("guard"), BUDGET)
            .table(
                "guard",
                PolicyKind::Guard,
                guard_table(serde_json::json!({"allow": {"load": "incremental"}})),
            ),
    );
    assert_eq!(code(&runtime, &files), "OK");
}

#[test]
fn bundle_tables_with_empty_expectations_are_refused() {
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    for expect in [
        serde_json::json!({}),
        serde_json::json!({"alow": {}}),
        serde_json::json!({"allow": {}, "deny": {}}),
    ] {
        let files = signed(
            BundleBuilder::new("vacuous", "0.1.0")
                .policy(PolicyKind::Guard, required_component("guard"), BUDGET)
                .table("guard", PolicyKind::Guard, guard_table(expect.clone())),
        );
        assert_eq!(
            code(&runtime, &files),
            "DPONE_ACTIVATION_TABLE_EXPECTATION_EMPTY",
            "{expect}"
        );
    }
}
