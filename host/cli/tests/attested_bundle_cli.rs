//! The CI recipe of `docs/bundles.md` ("Bundles attested by GitHub Actions"), run through the
//! `dpone-host` binary with the offline test signer standing in for
//! `actions/attest-build-provenance`: create the bundle, attest its manifest, put the
//! attestation and the trusted root under `attestations/`, pack; then, as the operator, write a
//! `dpone.trust-policy.v2` naming the CI identity and run `bundle verify` and `bundle activate`.
//! A policy pinning another ref, or an attestation of another manifest, is refused with its code.
//!
//! Needs `target/components/guard.wasm` (`cargo xtask policies`), as the binary embeds it.

use dpone_test_attest_signer::{AttestOptions, Subject, TestAuthority, WorkloadIdentity};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str], dir: &Path) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .args(args)
        .current_dir(dir)
        .env("DPONE_STATE_DIR", dir.join("state"))
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The first JSON value on stdout (the result, or `{"verified": false, "error": CODE}`).
    let json = serde_json::Deserializer::from_str(&stdout)
        .into_iter::<Value>()
        .next()
        .and_then(Result::ok)
        .unwrap_or(Value::Null);
    (
        out.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ci() -> WorkloadIdentity {
    WorkloadIdentity {
        signer_workflow: "acme/policies/.github/workflows/release.yml".into(),
        signer_ref: "refs/tags/v1.4.0".into(),
        signer_digest: "4444444444444444444444444444444444444444".into(),
        repository: "acme/policies".into(),
        source_ref: "refs/tags/v1.4.0".into(),
        repository_id: "763287532".into(),
        owner_id: "44036562".into(),
        ..WorkloadIdentity::default()
    }
}

fn hex_sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn trust_policy(root_sha256: &str, git_ref: &str) -> String {
    let id = ci();
    json!({
        "schema": "dpone.trust-policy.v2",
        "bundle_signers": {
            "threshold": 1,
            "keys": [],
            "attestations": [{
                "issuer": id.issuer,
                "signer_workflow": id.signer_workflow,
                "signer_digest": id.signer_digest,
                "repository": id.repository,
                "repository_id": id.repository_id,
                "owner_id": id.owner_id,
                "ref": git_ref,
                "runner_environment": "github-hosted",
                "trusted_root_sha256": root_sha256,
            }],
        },
    })
    .to_string()
}

#[test]
fn the_ci_recipe_yields_a_bundle_the_host_verifies_and_activates() {
    let guard = workspace().join("target/components/guard.wasm");
    assert!(
        guard.is_file(),
        "target/components/guard.wasm is built (dpone-host embeds it: run `cargo xtask policies`)"
    );
    let table = workspace().join("fixtures/decision-tables/guard.json");
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();

    // CI: build the bundle.
    let policy_arg = format!("guard={}", guard.display());
    let table_arg = format!("guard={}", table.display());
    let (rc, _, err) = run(
        &[
            "bundle",
            "create",
            "--out",
            "bundle",
            "--name",
            "core-policies",
            "--version",
            "1.4.0",
            "--sequence",
            "3",
            "--policy",
            &policy_arg,
            "--table",
            &table_arg,
        ],
        dir,
    );
    assert_eq!(rc, 0, "{err}");

    // CI: attest bundle/manifest.json (actions/attest-build-provenance), then place the
    // attestation and the trusted root under attestations/.
    let manifest = std::fs::read(dir.join("bundle/manifest.json")).expect("manifest");
    let ca = TestAuthority::new().expect("test authority");
    let attestation = ca
        .attest(
            &[Subject::of("manifest.json", &manifest)],
            &ci(),
            &AttestOptions::default(),
        )
        .expect("attest");
    let root = ca.trusted_root_json();
    let root_sha256 = hex_sha256(&root);
    std::fs::create_dir(dir.join("bundle/attestations")).expect("mkdir");
    std::fs::write(
        dir.join("bundle/attestations/release.sigstore.json"),
        &attestation,
    )
    .expect("write attestation");
    std::fs::write(
        dir.join(format!(
            "bundle/attestations/{root_sha256}.trusted_root.json"
        )),
        &root,
    )
    .expect("write root");
    let (rc, _, err) = run(&["bundle", "pack", "bundle", "--out", "bundle.tar"], dir);
    assert_eq!(rc, 0, "{err}");

    // Operator: a v2 trust policy naming the CI identity.
    std::fs::write(
        dir.join("trust.json"),
        trust_policy(&root_sha256, "refs/tags/v1.4.0"),
    )
    .expect("write policy");
    let (rc, out, err) = run(
        &[
            "bundle",
            "verify",
            "bundle.tar",
            "--trust-policy",
            "trust.json",
        ],
        dir,
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out["verified"], true);
    assert_eq!(
        out["evidence"]["attestations"][0]["signer_identity"],
        ci().signer_identity().as_str()
    );
    assert_eq!(
        out["evidence"]["manifest_sha256"],
        hex_sha256(&manifest).as_str()
    );
    let (rc, out, err) = run(
        &[
            "bundle",
            "activate",
            "bundle",
            "--trust-policy",
            "trust.json",
        ],
        dir,
    );
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out["activated"], true, "{out}");

    // A policy pinning another ref refuses the same bundle (exit 1, its own code).
    std::fs::write(
        dir.join("other-ref.json"),
        trust_policy(&root_sha256, "refs/heads/main"),
    )
    .expect("write policy");
    let (rc, out, _) = run(
        &[
            "bundle",
            "verify",
            "bundle.tar",
            "--trust-policy",
            "other-ref.json",
        ],
        dir,
    );
    assert_eq!(rc, 1);
    assert_eq!(out["error"], "DPONE_ATTESTATION_REF_MISMATCH");

    // The attestation moved onto another bundle (another manifest) refuses too.
    let (rc, _, err) = run(
        &[
            "bundle",
            "create",
            "--out",
            "other",
            "--name",
            "core-policies",
            "--version",
            "1.4.1",
            "--sequence",
            "4",
            "--policy",
            &policy_arg,
            "--table",
            &table_arg,
        ],
        dir,
    );
    assert_eq!(rc, 0, "{err}");
    std::fs::create_dir(dir.join("other/attestations")).expect("mkdir");
    for name in [
        "release.sigstore.json".to_owned(),
        format!("{root_sha256}.trusted_root.json"),
    ] {
        std::fs::copy(
            dir.join("bundle/attestations").join(&name),
            dir.join("other/attestations").join(&name),
        )
        .expect("copy");
    }
    let (rc, out, _) = run(
        &["bundle", "verify", "other", "--trust-policy", "trust.json"],
        dir,
    );
    assert_eq!(rc, 1);
    assert_eq!(out["error"], "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH");
}
