//! Every bundle of `fixtures/conformance/github-attestations/` checked as its README table
//! says, with the identity checks applied, plus negative tests: a wrong identity, issuer,
//! signer workflow, signer digest, repository, runner environment, predicate type, subject
//! digest, instance or missing timestamp is each refused with its own code.
//!
//! The corpus is vendored in the repository (`fixtures/conformance/`, provenance in its README):
//! when it is absent every test fails rather than passing without checking anything.

use dpone_trust::Sha256Digest;
use dpone_trust::attestation::{
    self, AttestationOutcome, AttestationPolicy, Instance, SLSA_PROVENANCE_V1, SubjectDigest,
};
use dpone_trust::trusted_root::PinnedTrustedRoot;
use std::path::{Path, PathBuf};

const ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/conformance/github-attestations")
}

fn present() -> PathBuf {
    let dir = corpus();
    assert!(
        dir.is_dir(),
        "the vendored conformance corpus fixtures/conformance/github-attestations is missing"
    );
    dir
}

fn root(dir: &Path, file: &str) -> PinnedTrustedRoot {
    let bytes = std::fs::read(dir.join(file)).expect("trusted root readable");
    PinnedTrustedRoot::from_bytes(&bytes, &[Sha256Digest::of(&bytes)]).expect("trusted root usable")
}

/// The workflow part of a GitHub workflow SAN: `owner/repo/path` without `https://github.com/`
/// and without `@ref`.
fn workflow_of(san: &str) -> String {
    san.trim_start_matches("https://github.com/")
        .split_once('@')
        .map(|(w, _)| w.to_owned())
        .unwrap_or_default()
}

fn policy(san: &str, issuer: &str) -> AttestationPolicy {
    AttestationPolicy {
        issuer: issuer.into(),
        certificate_identity: Some(san.into()),
        signer_workflow: Some(workflow_of(san)),
        predicate_type: SLSA_PROVENANCE_V1.into(),
        ..AttestationPolicy::default()
    }
}

fn verify_file(
    dir: &Path,
    file: &str,
    subject: &SubjectDigest,
    policy: &AttestationPolicy,
    root: &PinnedTrustedRoot,
) -> Result<Vec<AttestationOutcome>, &'static str> {
    let bytes = std::fs::read(dir.join(file)).map_err(|_| "UNREADABLE")?;
    let result = if file.ends_with(".jsonl") {
        attestation::verify_jsonl(&bytes, subject, policy, root)
    } else {
        attestation::verify(&bytes, subject, policy, root).map(|o| vec![o])
    };
    result.map_err(|err| err.code())
}

/// The sha512 subject of the sigstore-js statement, read from the bundle itself.
fn sigstore_js_subject(dir: &Path) -> SubjectDigest {
    let bundle: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("sigstore-js-2.1.0-bundle.json")).expect("readable"),
    )
    .expect("json");
    let payload = bundle["dsseEnvelope"]["payload"].as_str().expect("payload");
    let statement: serde_json::Value =
        serde_json::from_slice(&base64_decode(payload)).expect("statement json");
    let hex = statement["subject"][0]["digest"]["sha512"]
        .as_str()
        .expect("sha512 subject");
    SubjectDigest::parse(&format!("sha512:{hex}")).expect("digest")
}

fn base64_decode(text: &str) -> Vec<u8> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for byte in text.bytes().filter(|b| *b != b'=') {
        let Some(v) = ALPHABET.iter().position(|c| *c == byte) else {
            continue;
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

fn sha256(hex: &str) -> SubjectDigest {
    SubjectDigest::parse(&format!("sha256:{hex}")).expect("digest")
}

struct Row {
    file: &'static str,
    root: &'static str,
    expect_ok: bool,
    san: &'static str,
    issuer: &'static str,
    subject: Option<&'static str>,
    instance: Option<Instance>,
}

const PROVENANCE_SAN: &str =
    "https://github.com/actions/attest-demo/.github/workflows/build-python.yml@refs/heads/main";
const PROVENANCE_SUBJECT: &str = "ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b";
const SIGSTORE_JS_SAN: &str =
    "https://github.com/sigstore/sigstore-js/.github/workflows/release.yml@refs/heads/main";

fn rows() -> Vec<Row> {
    vec![
        Row {
            file: "github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl",
            root: "trusted_root.github.json",
            expect_ok: true,
            san: PROVENANCE_SAN,
            issuer: ACTIONS_ISSUER,
            subject: Some(PROVENANCE_SUBJECT),
            instance: Some(Instance::GitHub),
        },
        Row {
            file: "github_provenance_demo-0.0.12-py3-none-any-bundle-missing-cert.jsonl",
            root: "trusted_root.github.json",
            expect_ok: false,
            san: PROVENANCE_SAN,
            issuer: ACTIONS_ISSUER,
            subject: Some(PROVENANCE_SUBJECT),
            instance: None,
        },
        Row {
            file: "github_provenance_demo-0.0.12-py3-none-any-bundle-missing-verification-material.jsonl",
            root: "trusted_root.github.json",
            expect_ok: false,
            san: PROVENANCE_SAN,
            issuer: ACTIONS_ISSUER,
            subject: Some(PROVENANCE_SUBJECT),
            instance: None,
        },
        Row {
            file: "custom-issuer.sigstore.json",
            root: "trusted_root.json",
            expect_ok: true,
            san: "https://github.com/too-legit/attest/.github/workflows/integration.yml@refs/heads/main",
            issuer: "https://token.actions.githubusercontent.com/hammer-time",
            subject: Some("afa27b44d43b02a9fea41d13cedc2e4016cfcf87c5dbf990e593669aa8ce286d"),
            instance: Some(Instance::PublicGood),
        },
        Row {
            file: "reusable-workflow-attestation.sigstore.json",
            root: "trusted_root.json",
            expect_ok: true,
            san: "https://github.com/github/artifact-attestations-workflows/.github/workflows/attest.yml@09b495c3f12c7881b3cc17209a327792065c1a1d",
            issuer: ACTIONS_ISSUER,
            subject: Some("49a3aa6075e0f49f82843e74b5baa614ad2a588e6675612bf108a0a008c5ac25"),
            instance: Some(Instance::PublicGood),
        },
        Row {
            file: "sigstore-js-2.1.0-bundle.json",
            root: "trusted_root.json",
            expect_ok: true,
            san: SIGSTORE_JS_SAN,
            issuer: ACTIONS_ISSUER,
            subject: None,
            instance: Some(Instance::PublicGood),
        },
        Row {
            file: "sigstore-js-2.1.0-bundle-v0.1.json",
            root: "trusted_root.json",
            expect_ok: true,
            san: SIGSTORE_JS_SAN,
            issuer: ACTIONS_ISSUER,
            subject: None,
            instance: Some(Instance::PublicGood),
        },
        Row {
            file: "sigstore-js-2.1.0_with_2_bundles.jsonl",
            root: "trusted_root.json",
            expect_ok: true,
            san: SIGSTORE_JS_SAN,
            issuer: ACTIONS_ISSUER,
            subject: None,
            instance: Some(Instance::PublicGood),
        },
        Row {
            file: "sigstoreBundle-invalid-signature.json",
            root: "trusted_root.json",
            expect_ok: false,
            san: SIGSTORE_JS_SAN,
            issuer: ACTIONS_ISSUER,
            subject: Some(PROVENANCE_SUBJECT),
            instance: None,
        },
    ]
}

#[test]
fn every_bundle_behaves_as_the_table_says() {
    let dir = present();
    let mut agreed = 0;
    let table = rows();
    for row in &table {
        let root = root(&dir, row.root);
        let subject = match row.subject {
            Some(hex) => sha256(hex),
            None => sigstore_js_subject(&dir),
        };
        let result = verify_file(
            &dir,
            row.file,
            &subject,
            &policy(row.san, row.issuer),
            &root,
        );
        let shown = match &result {
            Ok(outcomes) => format!(
                "OK x{} instance={} signer={}",
                outcomes.len(),
                outcomes[0].instance.as_str(),
                outcomes[0].signer_identity.as_deref().unwrap_or("-")
            ),
            Err(code) => (*code).to_owned(),
        };
        eprintln!(
            "{:<88} expect={:<6} {shown}",
            row.file,
            if row.expect_ok { "verify" } else { "fail" }
        );
        assert_eq!(result.is_ok(), row.expect_ok, "{}: {shown}", row.file);
        if let (Ok(outcomes), Some(instance)) = (&result, row.instance) {
            assert!(
                outcomes.iter().all(|o| o.instance == instance),
                "{}",
                row.file
            );
        }
        agreed += 1;
    }
    eprintln!(
        "TOTAL: {agreed}/{} attestation bundles behaved as the README table says",
        table.len()
    );
}

/// A full policy for the GitHub-instance provenance bundle, built from its own claims.
fn provenance_case(
    dir: &Path,
) -> (
    PinnedTrustedRoot,
    SubjectDigest,
    AttestationPolicy,
    AttestationOutcome,
) {
    let root = root(dir, "trusted_root.github.json");
    let subject = sha256(PROVENANCE_SUBJECT);
    let base = policy(PROVENANCE_SAN, ACTIONS_ISSUER);
    let outcome = verify_file(
        dir,
        "github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl",
        &subject,
        &base,
        &root,
    )
    .expect("the provenance bundle verifies")
    .remove(0);
    let mut full = base;
    full.signer_digest = outcome.build_signer_digest.clone();
    full.source_repository = outcome.source_repository.clone();
    full.require_github_hosted_runner =
        outcome.runner_environment.as_deref() == Some("github-hosted");
    (root, subject, full, outcome)
}

#[test]
fn the_full_identity_policy_verifies_and_reports_the_canonical_signer() {
    let dir = present();
    let (root, subject, full, outcome) = provenance_case(&dir);
    let file = "github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl";
    let again = verify_file(&dir, file, &subject, &full, &root).expect("full policy verifies");
    let digest = outcome
        .build_signer_digest
        .clone()
        .expect("signer digest claim");
    assert_eq!(
        again[0].signer_identity.as_deref(),
        Some(
            format!(
                "https://github.com/actions/attest-demo/.github/workflows/build-python.yml@{digest}"
            )
            .as_str()
        )
    );
    assert_eq!(again[0].sigstore.tlog_entries, 0);
    assert_eq!(again[0].sigstore.rfc3161_timestamps, 1);
    eprintln!("{}", again[0].to_json());
}

#[test]
fn wrong_identity_claims_are_each_refused_with_their_own_code() {
    let dir = present();
    let (root, subject, full, _) = provenance_case(&dir);
    let file = "github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl";
    let refused = |policy: &AttestationPolicy, subject: &SubjectDigest| {
        verify_file(&dir, file, subject, policy, &root)
            .err()
            .unwrap_or("ACCEPTED")
    };

    let mut p = full.clone();
    p.certificate_identity = Some(PROVENANCE_SAN.replace("refs/heads/main", "refs/heads/evil"));
    assert_eq!(refused(&p, &subject), "DPONE_ATTESTATION_IDENTITY_MISMATCH");

    let mut p = full.clone();
    p.issuer = "https://token.actions.githubusercontent.com/evil".into();
    assert_eq!(refused(&p, &subject), "DPONE_ATTESTATION_ISSUER_MISMATCH");

    let mut p = full.clone();
    p.signer_workflow = Some("actions/attest-demo/.github/workflows/other.yml".into());
    assert_eq!(refused(&p, &subject), "DPONE_ATTESTATION_SIGNER_MISMATCH");

    let mut p = full.clone();
    p.signer_digest = Some("0".repeat(40));
    assert_eq!(
        refused(&p, &subject),
        "DPONE_ATTESTATION_SIGNER_DIGEST_MISMATCH"
    );

    let mut p = full.clone();
    p.source_repository = Some("actions/attest-demo-fork".into());
    assert_eq!(
        refused(&p, &subject),
        "DPONE_ATTESTATION_REPOSITORY_MISMATCH"
    );

    let mut p = full.clone();
    p.predicate_type = "https://spdx.dev/Document/v2.3".into();
    assert_eq!(
        refused(&p, &subject),
        "DPONE_ATTESTATION_PREDICATE_TYPE_MISMATCH"
    );

    assert_eq!(
        refused(&full, &sha256(&"0".repeat(64))),
        "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH"
    );

    let mut p = full.clone();
    p.certificate_identity = None;
    p.signer_workflow = None;
    assert_eq!(refused(&p, &subject), "DPONE_ATTESTATION_POLICY_INVALID");
}

#[test]
fn runner_environment_is_enforced_on_a_real_certificate() {
    let dir = present();
    // The sigstore-js certificate predates the runner environment extension (.11): a policy
    // that requires a GitHub-hosted runner must refuse it, and accept it without the rule.
    let root = root(&dir, "trusted_root.json");
    let subject = sigstore_js_subject(&dir);
    let mut p = policy(SIGSTORE_JS_SAN, ACTIONS_ISSUER);
    let outcome =
        verify_file(&dir, "sigstore-js-2.1.0-bundle.json", &subject, &p, &root).expect("verifies");
    p.require_github_hosted_runner = true;
    let result = verify_file(&dir, "sigstore-js-2.1.0-bundle.json", &subject, &p, &root);
    if outcome[0].runner_environment.as_deref() == Some("github-hosted") {
        assert!(result.is_ok());
    } else {
        assert_eq!(
            result.err(),
            Some("DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH")
        );
    }
}

#[test]
fn instances_and_thresholds() {
    let dir = present();
    let subject = sha256(PROVENANCE_SUBJECT);
    let p = policy(PROVENANCE_SAN, ACTIONS_ISSUER);
    let file = "github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl";

    // A GitHub-instance bundle against the public-good root: no authority of that instance.
    let public_good = root(&dir, "trusted_root.public-good.json");
    assert_eq!(
        verify_file(&dir, file, &subject, &p, &public_good).err(),
        Some("DPONE_ATTESTATION_INSTANCE_UNKNOWN")
    );

    // The same bundle with its RFC 3161 timestamp removed: GitHub's instance requires one.
    let github = root(&dir, "trusted_root.github.json");
    let text = std::fs::read_to_string(dir.join(file)).expect("readable");
    let mut bundle: serde_json::Value = serde_json::from_str(text.trim()).expect("json");
    bundle["verificationMaterial"]["timestampVerificationData"] =
        serde_json::json!({"rfc3161Timestamps": []});
    let stripped = serde_json::to_vec(&bundle).expect("json");
    let code = attestation::verify(&stripped, &subject, &p, &github)
        .err()
        .map(|e| e.code());
    assert!(
        matches!(
            code,
            Some(
                "DPONE_ATTESTATION_THRESHOLD_NOT_MET"
                    | "DPONE_SIGSTORE_TIMESTAMP_INVALID"
                    | "DPONE_SIGSTORE_BUNDLE_INVALID"
            )
        ),
        "{code:?}"
    );
    eprintln!("GitHub-instance bundle without its timestamp: {code:?}");

    // A public-good bundle whose log entry is removed does not meet the public-good threshold.
    let pg_root = root(&dir, "trusted_root.json");
    let js = sigstore_js_subject(&dir);
    let js_policy = policy(SIGSTORE_JS_SAN, ACTIONS_ISSUER);
    let text =
        std::fs::read_to_string(dir.join("sigstore-js-2.1.0-bundle.json")).expect("readable");
    let mut bundle: serde_json::Value = serde_json::from_str(&text).expect("json");
    bundle["verificationMaterial"]["tlogEntries"] = serde_json::json!([]);
    let stripped = serde_json::to_vec(&bundle).expect("json");
    let result = attestation::verify(&stripped, &js, &js_policy, &pg_root);
    assert!(
        result.is_err(),
        "a public-good bundle without a log entry must not verify"
    );
    eprintln!(
        "public-good bundle without log entry: {:?}",
        result.err().map(|e| e.code())
    );
}
