//! Bundles signed by the CI system that built them: GitHub Artifact Attestations of the
//! manifest (the `actions/attest-build-provenance` shape), carried under `attestations/`,
//! counted by a `dpone.trust-policy.v2` beside ed25519 keys.
//!
//! Genuine attestations come from the offline test signer; the real GitHub-instance bundle of
//! the conformance corpus checks the claim matching (ref, repository and owner ids) on data
//! GitHub produced, and is refused when carried in a bundle whose manifest it does not attest.
//! Tests that need the corpus print `SKIP: ...` and assert nothing when it is absent.

use dpone_test_attest_signer::{
    AttestOptions, Subject, TestAuthority, WorkloadIdentity, provenance_statement,
};
use dpone_trust::Sha256Digest;
use dpone_trust::archive;
use dpone_trust::attestation::{self, AttestationPolicy, SLSA_PROVENANCE_V1, SubjectDigest};
use dpone_trust::bundle::{self, BundleBuilder, BundleFiles, MANIFEST_FILE};
use dpone_trust::bundle_attestation::{AttestationIdentity, trusted_root_file};
use dpone_trust::keys::SecretKey;
use dpone_trust::manifest::{PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use dpone_trust::trusted_root::PinnedTrustedRoot;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

const BUDGET: ResourceBudget = ResourceBudget {
    fuel: 1_000_000,
    memory_bytes: 1 << 20,
    wasm_stack_bytes: 512 << 10,
};

fn authority() -> &'static TestAuthority {
    static CA: OnceLock<TestAuthority> = OnceLock::new();
    CA.get_or_init(|| TestAuthority::new().expect("test authority"))
}

fn ci() -> WorkloadIdentity {
    WorkloadIdentity {
        signer_workflow: "acme/policies/.github/workflows/release.yml".into(),
        signer_ref: "refs/tags/v1.4.0".into(),
        signer_digest: "2222222222222222222222222222222222222222".into(),
        repository: "acme/policies".into(),
        repository_digest: "2222222222222222222222222222222222222222".into(),
        source_ref: "refs/tags/v1.4.0".into(),
        repository_id: "763287532".into(),
        owner_id: "44036562".into(),
        ..WorkloadIdentity::default()
    }
}

fn root_bytes() -> Vec<u8> {
    authority().trusted_root_json()
}

fn identity_for(id: &WorkloadIdentity, root: &[u8]) -> AttestationIdentity {
    AttestationIdentity {
        issuer: id.issuer.clone(),
        signer_workflow: id.signer_workflow.clone(),
        signer_digest: id.signer_digest.clone(),
        repository: id.repository.clone(),
        repository_id: id.repository_id.clone(),
        owner_id: id.owner_id.clone(),
        git_ref: id.source_ref.clone(),
        runner_environment: id.runner_environment.clone(),
        trusted_root_sha256: Sha256Digest::of(root),
    }
}

fn key(seed: u8) -> SecretKey {
    SecretKey::from_seed(&[seed; 32])
}

/// An unsigned bundle (component bytes are opaque to verification).
fn unsigned_bundle() -> BundleFiles {
    BundleBuilder::new("core-policies", "1.4.0")
        .sequence(3)
        .policy(PolicyKind::Guard, b"\0asm not really".to_vec(), BUDGET)
        .table("guard", PolicyKind::Guard, b"{}".to_vec())
        .build()
        .expect("bundle")
}

fn manifest_subject(files: &BundleFiles) -> Subject {
    Subject::of(MANIFEST_FILE, files.get(MANIFEST_FILE).expect("manifest"))
}

/// Adds an attestation of the bundle's manifest by `id`, and the test root.
fn attest(files: &mut BundleFiles, stem: &str, id: &WorkloadIdentity) {
    let bundle = authority()
        .attest(&[manifest_subject(files)], id, &AttestOptions::default())
        .expect("attest");
    files
        .insert(&format!("attestations/{stem}.sigstore.json"), bundle)
        .expect("insert attestation");
    let root = root_bytes();
    files
        .insert(&trusted_root_file(&Sha256Digest::of(&root)), root)
        .expect("insert root");
}

fn attested_by(id: &WorkloadIdentity) -> BundleFiles {
    let mut files = unsigned_bundle();
    attest(&mut files, "release", id);
    files
}

fn policy(keys: &[u8], identities: Vec<AttestationIdentity>, threshold: usize) -> TrustPolicy {
    TrustPolicy::with_attestations(
        keys.iter()
            .map(|s| key(*s).public_key().expect("key"))
            .collect(),
        identities,
        threshold,
        Vec::new(),
    )
    .expect("policy")
}

fn ci_policy() -> TrustPolicy {
    policy(&[], vec![identity_for(&ci(), &root_bytes())], 1)
}

fn code(files: &BundleFiles, policy: &TrustPolicy) -> &'static str {
    match bundle::verify(files, policy) {
        Ok(_) => "OK",
        Err(err) => err.code(),
    }
}

#[test]
fn a_bundle_attested_by_its_ci_workflow_verifies() {
    let files = attested_by(&ci());
    let verified = bundle::verify(&files, &ci_policy()).expect("verifies");
    let evidence = verified.evidence();
    assert!(evidence.signers.is_empty());
    assert_eq!(evidence.attested_by.len(), 1);
    let signer = &evidence.attested_by[0];
    assert_eq!(
        signer.signer_identity,
        "https://github.com/acme/policies/.github/workflows/release.yml@2222222222222222222222222222222222222222"
    );
    assert_eq!(signer.file, "attestations/release.sigstore.json");
    assert_eq!(signer.source_ref, "refs/tags/v1.4.0");
    assert_eq!(signer.source_repository, "https://github.com/acme/policies");
    let json = evidence.to_json();
    assert_eq!(
        json["attestations"][0]["signer_identity"],
        signer.signer_identity.as_str()
    );
    assert_eq!(json["ignored_attestations"], serde_json::json!([]));
    // Only the manifest's own files are handed out: no attestation or root file.
    assert_eq!(verified.components().count(), 1);
}

#[test]
fn k_of_n_counts_keys_and_attestation_identities_together() {
    let two_of_two = policy(&[1], vec![identity_for(&ci(), &root_bytes())], 2);
    let mut files = attested_by(&ci());
    assert_eq!(code(&files, &two_of_two), "DPONE_BUNDLE_THRESHOLD_NOT_MET");
    bundle::sign(&mut files, &key(1)).expect("sign");
    let verified = bundle::verify(&files, &two_of_two).expect("one key and one attestation");
    assert_eq!(verified.evidence().signers.len(), 1);
    assert_eq!(verified.evidence().attested_by.len(), 1);

    // A key signature alone meets a 1-of-2 policy; the key alone does not meet 2 of 2.
    let mut key_only = unsigned_bundle();
    bundle::sign(&mut key_only, &key(1)).expect("sign");
    assert_eq!(
        code(&key_only, &two_of_two),
        "DPONE_BUNDLE_THRESHOLD_NOT_MET"
    );
    let one_of_two = policy(&[1], vec![identity_for(&ci(), &root_bytes())], 1);
    assert_eq!(code(&key_only, &one_of_two), "OK");

    // Two attestations by the same identity count once.
    let two_ids = policy(
        &[],
        vec![
            identity_for(&ci(), &root_bytes()),
            identity_for(
                &WorkloadIdentity {
                    signer_workflow: "acme/policies/.github/workflows/review.yml".into(),
                    ..ci()
                },
                &root_bytes(),
            ),
        ],
        2,
    );
    let mut twice = attested_by(&ci());
    attest(&mut twice, "release-again", &ci());
    assert_eq!(code(&twice, &two_ids), "DPONE_BUNDLE_THRESHOLD_NOT_MET");
    attest(
        &mut twice,
        "review",
        &WorkloadIdentity {
            signer_workflow: "acme/policies/.github/workflows/review.yml".into(),
            ..ci()
        },
    );
    let verified = bundle::verify(&twice, &two_ids).expect("two distinct identities");
    assert_eq!(verified.evidence().attested_by.len(), 2);
}

#[test]
fn every_pinned_claim_is_required() {
    let cases: Vec<(&str, WorkloadIdentity, &str)> = vec![
        (
            "signer digest",
            // Not listed at all: the composite identity differs, so it is ignored.
            WorkloadIdentity {
                signer_digest: "3333333333333333333333333333333333333333".into(),
                ..ci()
            },
            "DPONE_BUNDLE_SIGNER_UNTRUSTED",
        ),
        (
            "issuer",
            WorkloadIdentity {
                issuer: "https://token.actions.example.com".into(),
                ..ci()
            },
            "DPONE_ATTESTATION_ISSUER_MISMATCH",
        ),
        (
            "repository",
            WorkloadIdentity {
                repository: "acme/fork".into(),
                ..ci()
            },
            "DPONE_ATTESTATION_REPOSITORY_MISMATCH",
        ),
        (
            "repository id",
            WorkloadIdentity {
                repository_id: "1".into(),
                ..ci()
            },
            "DPONE_ATTESTATION_REPOSITORY_ID_MISMATCH",
        ),
        (
            "owner id",
            WorkloadIdentity {
                owner_id: "2".into(),
                ..ci()
            },
            "DPONE_ATTESTATION_OWNER_ID_MISMATCH",
        ),
        (
            "ref",
            WorkloadIdentity {
                source_ref: "refs/heads/feature".into(),
                ..ci()
            },
            "DPONE_ATTESTATION_REF_MISMATCH",
        ),
        (
            "runner",
            WorkloadIdentity {
                runner_environment: "self-hosted".into(),
                ..ci()
            },
            "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH",
        ),
    ];
    for (what, id, expected) in cases {
        assert_eq!(code(&attested_by(&id), &ci_policy()), expected, "{what}");
    }
    // The unchanged identity verifies under the same policy (the owner's own extension, .16,
    // is checked on the real GitHub bundle below).
    assert_eq!(code(&attested_by(&ci()), &ci_policy()), "OK");
}

#[test]
fn a_bad_attestation_by_a_listed_identity_refuses_even_above_threshold() {
    // The key meets 1 of 2; the listed CI identity's attestation names another ref.
    let one_of_two = policy(&[1], vec![identity_for(&ci(), &root_bytes())], 1);
    let mut files = attested_by(&WorkloadIdentity {
        source_ref: "refs/heads/main".into(),
        ..ci()
    });
    bundle::sign(&mut files, &key(1)).expect("sign");
    assert_eq!(code(&files, &one_of_two), "DPONE_ATTESTATION_REF_MISMATCH");
    // An attestation of another manifest by the listed identity refuses too.
    let mut other = unsigned_bundle();
    let moved = authority()
        .attest(
            &[Subject::of(MANIFEST_FILE, b"another manifest")],
            &ci(),
            &AttestOptions::default(),
        )
        .expect("attest");
    other
        .insert("attestations/release.sigstore.json", moved)
        .expect("insert");
    let root = root_bytes();
    other
        .insert(&trusted_root_file(&Sha256Digest::of(&root)), root)
        .expect("insert");
    assert_eq!(
        code(&other, &ci_policy()),
        "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH"
    );
}

#[test]
fn unlisted_attestations_are_ignored_and_reported() {
    let stranger = WorkloadIdentity {
        signer_workflow: "mallory/tools/.github/workflows/release.yml".into(),
        repository: "mallory/tools".into(),
        ..ci()
    };
    let files = attested_by(&stranger);
    assert_eq!(code(&files, &ci_policy()), "DPONE_BUNDLE_SIGNER_UNTRUSTED");
    let mut both = attested_by(&ci());
    attest(&mut both, "stranger", &stranger);
    let verified = bundle::verify(&both, &ci_policy()).expect("the listed one verifies");
    assert_eq!(
        verified.evidence().ignored_attestations,
        vec!["attestations/stranger.sigstore.json".to_owned()]
    );
    // A cosign key bundle can name no identity: ignored, never counted.
    let mut keyed = unsigned_bundle();
    let payload = serde_json::to_vec(&provenance_statement(&[manifest_subject(&keyed)], &ci()))
        .expect("json");
    let key_bundle = authority()
        .public_key_bundle(&payload, &AttestOptions::default())
        .expect("key bundle");
    keyed
        .insert("attestations/key.sigstore.json", key_bundle)
        .expect("insert");
    assert_eq!(code(&keyed, &ci_policy()), "DPONE_BUNDLE_SIGNER_UNTRUSTED");
}

#[test]
fn the_statement_is_parsed_strictly() {
    let mut files = unsigned_bundle();
    let subject = manifest_subject(&files);
    let statement = provenance_statement(&[subject], &ci());
    let text = serde_json::to_string(&statement).expect("json");
    // A second `subject` naming another digest: a last-key-wins reader would see that one.
    let other = serde_json::json!([{"name": "x", "digest": {"sha256": "0".repeat(64)}}]);
    let duplicated = format!("{{\"subject\":{other},{}", &text[1..]);
    let bundle = authority()
        .attest_payload(duplicated.as_bytes(), &ci(), &AttestOptions::default())
        .expect("attest");
    files
        .insert("attestations/release.sigstore.json", bundle)
        .expect("insert");
    let root = root_bytes();
    files
        .insert(&trusted_root_file(&Sha256Digest::of(&root)), root)
        .expect("insert");
    assert_eq!(
        code(&files, &ci_policy()),
        "DPONE_ATTESTATION_STATEMENT_DUPLICATE_KEY"
    );
    let extra = format!("{{\"extra\":1,{}", &text[1..]);
    let mut files = unsigned_bundle();
    let bundle = authority()
        .attest_payload(extra.as_bytes(), &ci(), &AttestOptions::default())
        .expect("attest");
    files
        .insert("attestations/release.sigstore.json", bundle)
        .expect("insert");
    let root = root_bytes();
    files
        .insert(&trusted_root_file(&Sha256Digest::of(&root)), root)
        .expect("insert");
    assert_eq!(
        code(&files, &ci_policy()),
        "DPONE_ATTESTATION_STATEMENT_UNKNOWN_FIELD"
    );
}

#[test]
fn the_trusted_root_must_be_the_pinned_one() {
    // Missing root file.
    let mut files = attested_by(&ci());
    let root = root_bytes();
    let name = trusted_root_file(&Sha256Digest::of(&root));
    files.remove(&name);
    assert_eq!(code(&files, &ci_policy()), "DPONE_BUNDLE_FILE_MISSING");
    // Another authority's root under the pinned name.
    let other = TestAuthority::new().expect("authority").trusted_root_json();
    files.insert(&name, other).expect("insert");
    assert_eq!(
        code(&files, &ci_policy()),
        "DPONE_TRUST_ROOT_DIGEST_MISMATCH"
    );
    // An attestation from another authority, verified against the pinned root.
    let mut foreign = unsigned_bundle();
    let ca = TestAuthority::new().expect("authority");
    let bundle = ca
        .attest(
            &[manifest_subject(&foreign)],
            &ci(),
            &AttestOptions::default(),
        )
        .expect("attest");
    foreign
        .insert("attestations/release.sigstore.json", bundle)
        .expect("insert");
    foreign.insert(&name, root).expect("insert");
    assert_eq!(
        code(&foreign, &ci_policy()),
        "DPONE_SIGSTORE_TIMESTAMP_INVALID"
    );
}

#[test]
fn a_v1_policy_ignores_attestations_and_reads_as_before() {
    let v1 = policy(&[1], Vec::new(), 1);
    let bytes = v1.to_json_bytes().expect("json");
    assert!(String::from_utf8_lossy(&bytes).contains("\"dpone.trust-policy.v1\""));
    let mut files = attested_by(&ci());
    assert_eq!(code(&files, &v1), "DPONE_BUNDLE_SIGNER_UNTRUSTED");
    bundle::sign(&mut files, &key(1)).expect("sign");
    let verified = bundle::verify(&files, &v1).expect("the key signature verifies");
    assert_eq!(
        verified.evidence().ignored_attestations,
        vec!["attestations/release.sigstore.json".to_owned()]
    );
    assert!(verified.evidence().attested_by.is_empty());
    // No signatures and no attestations is still unsigned.
    assert_eq!(code(&unsigned_bundle(), &v1), "DPONE_BUNDLE_UNSIGNED");
    assert_eq!(
        code(&unsigned_bundle(), &ci_policy()),
        "DPONE_BUNDLE_UNSIGNED"
    );
}

#[test]
fn v2_policies_parse_strictly_and_round_trip() {
    let original = policy(&[1], vec![identity_for(&ci(), &root_bytes())], 2);
    let bytes = original.to_json_bytes().expect("json");
    let text = String::from_utf8(bytes.clone()).expect("utf8");
    assert!(text.contains("\"dpone.trust-policy.v2\""));
    let parsed = TrustPolicy::parse(&bytes).expect("parses");
    assert_eq!(parsed.sha256(), original.sha256());
    assert_eq!(
        parsed.attestation_identities(),
        original.attestation_identities()
    );
    assert_eq!(parsed.threshold(), 2);

    let refused = |text: &str| TrustPolicy::parse(text.as_bytes()).err().map(|e| e.code());
    // Attestations in a v1 policy are an unknown field.
    assert_eq!(
        refused(&text.replace("dpone.trust-policy.v2", "dpone.trust-policy.v1")),
        Some("DPONE_TRUST_POLICY_UNKNOWN_FIELD")
    );
    assert_eq!(
        refused(&text.replace("\"ref\":\"refs/tags/v1.4.0\"", "\"ref\":\"main\"")),
        Some("DPONE_TRUST_POLICY_INVALID_VALUE")
    );
    assert_eq!(
        refused(&text.replace("\"repository_id\":\"763287532\",", "")),
        Some("DPONE_TRUST_POLICY_MISSING_FIELD")
    );
    assert_eq!(
        refused(&text.replace("\"repository\":\"acme/policies\"", "\"repository\":\"*/*\"")),
        Some("DPONE_TRUST_POLICY_INVALID_VALUE")
    );
    assert_eq!(
        refused(&text.replace("\"owner_id\":\"44036562\"", "\"owner_id\":44036562")),
        Some("DPONE_TRUST_POLICY_INVALID_VALUE")
    );
    assert_eq!(
        refused(&text.replace("\"issuer\":", "\"issuer\":\"x\",\"issuer\":")),
        Some("DPONE_TRUST_POLICY_DUPLICATE_KEY")
    );
    assert_eq!(
        refused(&text.replace("\"threshold\":2", "\"threshold\":3")),
        Some("DPONE_TRUST_POLICY_INVALID")
    );
    // The same identity twice.
    let twice = TrustPolicy::with_attestations(
        Vec::new(),
        vec![
            identity_for(&ci(), &root_bytes()),
            identity_for(&ci(), &root_bytes()),
        ],
        1,
        Vec::new(),
    );
    assert_eq!(
        twice.err().map(|e| e.code()),
        Some("DPONE_TRUST_POLICY_DUPLICATE_SIGNER")
    );
    // A v2 policy with attestation identities only.
    let only = ci_policy();
    assert_eq!(only.keys().count(), 0);
    assert_eq!(
        TrustPolicy::parse(&only.to_json_bytes().expect("json"))
            .expect("parses")
            .attestation_identities()
            .len(),
        1
    );
}

#[test]
fn attested_bundles_survive_the_archive_and_directory_forms() {
    let files = attested_by(&ci());
    let packed = archive::pack(&files).expect("pack");
    let unpacked = archive::unpack(&packed).expect("unpack");
    assert_eq!(unpacked, files);
    assert_eq!(code(&unpacked, &ci_policy()), "OK");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bundle");
    files.write_dir(&path).expect("write");
    let read = BundleFiles::read_dir(&path).expect("read");
    assert_eq!(read, files);
    assert_eq!(code(&read, &ci_policy()), "OK");
    // Anything else under attestations/ is refused when the directory is read.
    std::fs::write(path.join("attestations/notes.txt"), b"x").expect("write");
    assert_eq!(
        BundleFiles::read_dir(&path).err().map(|e| e.code()),
        Some("DPONE_BUNDLE_FILE_UNEXPECTED")
    );
    // At most eight attestation files.
    let mut more = files.clone();
    for i in 0..8 {
        let bytes = more
            .get("attestations/release.sigstore.json")
            .expect("bundle")
            .to_vec();
        let result = more.insert(&format!("attestations/copy{i}.sigstore.json"), bytes);
        if i < 7 {
            result.expect("up to eight attestations");
        } else {
            assert_eq!(
                result.err().map(|e| e.code()),
                Some("DPONE_BUNDLE_TOO_LARGE")
            );
        }
    }
}

// --- the conformance corpus: a real GitHub-instance attestation ---

/// The corpus is vendored in the repository (`fixtures/conformance/`): when it is absent the
/// tests that read it fail rather than pass without checking anything.
fn corpus() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/conformance/github-attestations");
    assert!(
        dir.is_dir(),
        "the vendored conformance corpus fixtures/conformance/github-attestations is missing"
    );
    dir
}

const DEMO: &str = "github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl";
const DEMO_SUBJECT: &str = "ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b";

fn demo_identity(root: &[u8]) -> AttestationIdentity {
    AttestationIdentity {
        issuer: "https://token.actions.githubusercontent.com".into(),
        signer_workflow: "actions/attest-demo/.github/workflows/build-python.yml".into(),
        signer_digest: "a6c23b9806c593664f68637c8f9d45dfcf98b2db".into(),
        repository: "actions/attest-demo".into(),
        repository_id: "763287532".into(),
        owner_id: "44036562".into(),
        git_ref: "refs/heads/main".into(),
        runner_environment: "github-hosted".into(),
        trusted_root_sha256: Sha256Digest::of(root),
    }
}

#[test]
fn the_real_github_attestation_matches_every_pinned_claim() {
    let dir = corpus();
    let bundle = std::fs::read(dir.join(DEMO)).expect("bundle");
    let bundle = bundle
        .split(|b| *b == b'\n')
        .next()
        .expect("one line")
        .to_vec();
    let root = std::fs::read(dir.join("trusted_root.github.json")).expect("root");
    let pinned = PinnedTrustedRoot::from_bytes(&root, &[Sha256Digest::of(&root)]).expect("root");
    let subject = SubjectDigest::parse(&format!("sha256:{DEMO_SUBJECT}")).expect("digest");
    let full = AttestationPolicy {
        issuer: "https://token.actions.githubusercontent.com".into(),
        signer_workflow: Some("actions/attest-demo/.github/workflows/build-python.yml".into()),
        signer_digest: Some("a6c23b9806c593664f68637c8f9d45dfcf98b2db".into()),
        source_repository: Some("actions/attest-demo".into()),
        runner_environment: Some("github-hosted".into()),
        source_repository_ref: Some("refs/heads/main".into()),
        source_repository_id: Some("763287532".into()),
        source_repository_owner: Some("actions".into()),
        source_repository_owner_id: Some("44036562".into()),
        predicate_type: SLSA_PROVENANCE_V1.into(),
        ..AttestationPolicy::default()
    };
    let outcome = attestation::verify(&bundle, &subject, &full, &pinned).expect("verifies");
    assert_eq!(
        outcome.source_repository_ref.as_deref(),
        Some("refs/heads/main")
    );
    let refused = |change: &dyn Fn(&mut AttestationPolicy)| {
        let mut p = full.clone();
        change(&mut p);
        attestation::verify(&bundle, &subject, &p, &pinned)
            .err()
            .map(|e| e.code())
    };
    assert_eq!(
        refused(&|p| p.source_repository_ref = Some("refs/heads/dev".into())),
        Some("DPONE_ATTESTATION_REF_MISMATCH")
    );
    assert_eq!(
        refused(&|p| p.source_repository_id = Some("763287533".into())),
        Some("DPONE_ATTESTATION_REPOSITORY_ID_MISMATCH")
    );
    assert_eq!(
        refused(&|p| p.source_repository_owner = Some("github".into())),
        Some("DPONE_ATTESTATION_OWNER_MISMATCH")
    );
    assert_eq!(
        refused(&|p| p.source_repository_owner_id = Some("9919".into())),
        Some("DPONE_ATTESTATION_OWNER_ID_MISMATCH")
    );
    assert_eq!(
        refused(&|p| p.runner_environment = Some("self-hosted".into())),
        Some("DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH")
    );
}

#[test]
fn a_real_attestation_of_another_artifact_never_signs_a_bundle() {
    let dir = corpus();
    let bundle = std::fs::read(dir.join(DEMO)).expect("bundle");
    let bundle = bundle
        .split(|b| *b == b'\n')
        .next()
        .expect("one line")
        .to_vec();
    let root = std::fs::read(dir.join("trusted_root.github.json")).expect("root");
    let mut files = unsigned_bundle();
    files
        .insert("attestations/demo.sigstore.json", bundle)
        .expect("insert");
    files
        .insert(&trusted_root_file(&Sha256Digest::of(&root)), root.clone())
        .expect("insert");
    let listed = policy(&[], vec![demo_identity(&root)], 1);
    // The identity is listed, so the attestation must verify for this manifest: it does not.
    assert_eq!(
        code(&files, &listed),
        "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH"
    );
    // Under a policy that does not list it, it is ignored and cannot sign.
    assert_eq!(code(&files, &ci_policy()), "DPONE_BUNDLE_SIGNER_UNTRUSTED");
}

#[test]
fn a_malformed_attestation_file_refuses_under_a_v2_policy_only() {
    let mut files = attested_by(&ci());
    files
        .insert("attestations/broken.sigstore.json", b"{".to_vec())
        .expect("insert");
    assert_eq!(
        code(&files, &ci_policy()),
        "DPONE_SIGSTORE_BUNDLE_MALFORMED"
    );
    // A v1 policy never reads attestation files: the key signature decides.
    let v1 = policy(&[1], Vec::new(), 1);
    bundle::sign(&mut files, &key(1)).expect("sign");
    assert_eq!(code(&files, &v1), "OK");
}
