//! Runs every case of the Sigstore conformance corpus (`fixtures/conformance/sigstore/cases`)
//! through `dpone_trust::sigstore::verify`, once with the artifact file and once with
//! `sha256:<hex>`, and requires agreement with the expected outcome (`_fail` cases must fail,
//! every other case must verify). Prints a per-case table and the totals (`--nocapture`).
//!
//! The corpus is vendored in the repository (`fixtures/conformance/`, provenance in its README):
//! when it is absent the test fails rather than passing without checking anything.

use dpone_trust::Sha256Digest;
use dpone_trust::sigstore::{self, Artifact, Signer};
use dpone_trust::trusted_root::PinnedTrustedRoot;
use std::path::{Path, PathBuf};

const DEFAULT_IDENTITY: &str = "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main";
const DEFAULT_ISSUER: &str = "https://token.actions.githubusercontent.com";

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/conformance")
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// Outcome of one run: `OK` or the refusal code.
fn run(case: &Path, cases: &Path, sigstore_dir: &Path, by_digest: bool) -> String {
    let bundle = match std::fs::read(case.join("bundle.sigstore.json")) {
        Ok(bytes) => bytes,
        Err(_) => return "UNREADABLE_BUNDLE".into(),
    };
    let artifact_path = if case.join("artifact").exists() {
        case.join("artifact")
    } else {
        cases.join("a.txt")
    };
    let root_path = if case.join("trusted_root.json").exists() {
        case.join("trusted_root.json")
    } else {
        sigstore_dir.join("production_trusted_root.json")
    };
    let signer = match read_trimmed(&case.join("key.pub")) {
        Some(pem) => Signer::PublicKey { pem },
        None => Signer::Identity {
            identity: read_trimmed(&case.join("identity"))
                .unwrap_or_else(|| DEFAULT_IDENTITY.into()),
            issuer: read_trimmed(&case.join("issuer")).unwrap_or_else(|| DEFAULT_ISSUER.into()),
        },
    };
    let Ok(artifact_bytes) = std::fs::read(&artifact_path) else {
        return "UNREADABLE_ARTIFACT".into();
    };
    let Ok(root_bytes) = std::fs::read(&root_path) else {
        return "UNREADABLE_ROOT".into();
    };
    // Pinned to its own digest: the same path a trust policy takes.
    let root = match PinnedTrustedRoot::from_bytes(&root_bytes, &[Sha256Digest::of(&root_bytes)]) {
        Ok(root) => root,
        Err(err) => return err.code().into(),
    };
    let artifact = if by_digest {
        Artifact::Sha256(Sha256Digest::of(&artifact_bytes))
    } else {
        Artifact::Bytes(&artifact_bytes)
    };
    match sigstore::verify(&bundle, artifact, &signer, &root) {
        Ok(_) => "OK".into(),
        Err(err) => err.code().into(),
    }
}

#[test]
fn sigstore_conformance_cases_agree_file_and_digest() {
    let base = corpus();
    let sigstore_dir = base.join("sigstore");
    let cases = sigstore_dir.join("cases");
    assert!(
        cases.is_dir(),
        "the vendored conformance corpus fixtures/conformance/sigstore/cases is missing"
    );
    let mut names: Vec<String> = std::fs::read_dir(&cases)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    assert!(
        !names.is_empty(),
        "the corpus folder exists but holds no case"
    );

    let (mut file_agree, mut digest_agree) = (0usize, 0usize);
    let mut disagreements = Vec::new();
    eprintln!(
        "{:<58} {:<7} {:<40} {:<40}",
        "case", "expect", "file", "sha256:<hex>"
    );
    for name in &names {
        let case = cases.join(name);
        let expect_ok = !name.ends_with("_fail");
        let by_file = run(&case, &cases, &sigstore_dir, false);
        let by_digest = run(&case, &cases, &sigstore_dir, true);
        let agrees = |outcome: &str| (outcome == "OK") == expect_ok;
        if agrees(&by_file) {
            file_agree += 1;
        } else {
            disagreements.push(format!("{name} (file): {by_file}"));
        }
        if agrees(&by_digest) {
            digest_agree += 1;
        } else {
            disagreements.push(format!("{name} (digest): {by_digest}"));
        }
        eprintln!(
            "{:<58} {:<7} {:<40} {:<40}",
            name,
            if expect_ok { "verify" } else { "fail" },
            format!(
                "{}{by_file}",
                if agrees(&by_file) { "" } else { "DISAGREE " }
            ),
            format!(
                "{}{by_digest}",
                if agrees(&by_digest) { "" } else { "DISAGREE " }
            ),
        );
    }
    let must_pass = names.iter().filter(|n| !n.ends_with("_fail")).count();
    eprintln!(
        "TOTAL: {} cases ({} must verify, {} must fail); agreed with the artifact file: {}/{}; agreed with sha256:<hex>: {}/{}",
        names.len(),
        must_pass,
        names.len() - must_pass,
        file_agree,
        names.len(),
        digest_agree,
        names.len()
    );
    assert!(
        disagreements.is_empty(),
        "disagreements: {disagreements:#?}"
    );
}
