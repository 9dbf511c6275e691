//! The nonproduction authority's closed signature adapter against attestations issued offline by
//! the test signer: a valid attestation verifies and yields the composite signer identity; every
//! wrong pin, an unpinned root, a cosign key bundle, a subject that is not the document and a
//! tampered signature are each refused with their own stable code.

use dpone_test_attest_signer::{
    AttestOptions, AuthorityOptions, SLSA_PROVENANCE_V1, Subject, TestAuthority, WorkloadIdentity,
    provenance_statement,
};
use dpone_trust::Sha256Digest;
use dpone_trust::nonproduction_signature::{SignaturePins, VerifiedSigner, verify};
use std::collections::BTreeSet;
use std::sync::OnceLock;

const DOCUMENT: &[u8] = br#"{"schema":"dpone.nonproduction-authority.v1","phase":"qualification"}"#;

fn authority() -> &'static TestAuthority {
    static CA: OnceLock<TestAuthority> = OnceLock::new();
    CA.get_or_init(|| TestAuthority::new().expect("test authority"))
}

fn identity() -> WorkloadIdentity {
    WorkloadIdentity {
        signer_workflow: "dpone-example/authority/.github/workflows/grant.yml".into(),
        signer_digest: "0123456789abcdef0123456789abcdef01234567".into(),
        repository: "dpone-example/authority".into(),
        ..WorkloadIdentity::default()
    }
}

fn root() -> Vec<u8> {
    authority().trusted_root_json()
}

fn pins() -> SignaturePins {
    let id = identity();
    SignaturePins {
        issuer: id.issuer.clone(),
        trusted_root_sha256: Sha256Digest::of(&root()).to_hex(),
        repository: id.repository.clone(),
        predicate_type: SLSA_PROVENANCE_V1.into(),
        signer_workflow: id.signer_workflow.clone(),
        signer_digest: id.signer_digest.clone(),
        require_github_hosted_runner: true,
    }
}

fn signed_by(id: &WorkloadIdentity) -> Vec<u8> {
    authority()
        .attest(
            &[Subject::of("authority.json", DOCUMENT)],
            id,
            &AttestOptions::default(),
        )
        .expect("attest")
}

fn outcome(
    pins: &SignaturePins,
    bundle: &[u8],
    root: &[u8],
) -> Result<VerifiedSigner, &'static str> {
    verify(pins, bundle, root, DOCUMENT).map_err(|e| e.code())
}

fn code(pins: &SignaturePins, bundle: &[u8], root: &[u8]) -> &'static str {
    match outcome(pins, bundle, root) {
        Ok(_) => "OK",
        Err(code) => code,
    }
}

#[test]
fn a_valid_attestation_verifies_to_the_composite_identity() {
    let id = identity();
    let verified = outcome(&pins(), &signed_by(&id), &root()).expect("verifies");
    assert_eq!(
        verified.signer_identity,
        "https://github.com/dpone-example/authority/.github/workflows/grant.yml@0123456789abcdef0123456789abcdef01234567"
    );
    assert_eq!(
        verified.subject_digest,
        format!("sha256:{}", Sha256Digest::of(DOCUMENT).to_hex())
    );
    assert_eq!(
        verified.source_repository,
        "https://github.com/dpone-example/authority"
    );
    assert_eq!(verified.build_signer_uri, id.san());
    assert_eq!(verified.instance, "github");
    assert_eq!(verified.trusted_root_sha256, pins().trusted_root_sha256);
    assert_eq!(verified.verified_times.len(), 1);
    assert_eq!(
        verified.to_json()["signer_identity"],
        verified.signer_identity.as_str()
    );
}

#[test]
fn each_refusal_has_its_own_code() {
    let good = signed_by(&identity());
    let mut cases: Vec<(&str, &'static str)> = Vec::new();

    // Wrong certificate claims against the same pins.
    let with = |change: &dyn Fn(&mut WorkloadIdentity)| {
        let mut id = identity();
        change(&mut id);
        code(&pins(), &signed_by(&id), &root())
    };
    cases.push((
        "signer workflow",
        with(&|id| {
            id.signer_workflow = "dpone-example/authority/.github/workflows/other.yml".into()
        }),
    ));
    cases.push((
        "signer digest",
        with(&|id| id.signer_digest = "fedcba9876543210fedcba9876543210fedcba98".into()),
    ));
    cases.push((
        "issuer",
        with(&|id| id.issuer = "https://token.actions.example.com".into()),
    ));
    cases.push((
        "repository",
        with(&|id| id.repository = "dpone-example/fork".into()),
    ));
    cases.push((
        "runner",
        with(&|id| id.runner_environment = "self-hosted".into()),
    ));

    // A statement with another predicate type.
    let mut statement =
        provenance_statement(&[Subject::of("authority.json", DOCUMENT)], &identity());
    statement["predicateType"] = "https://example.com/other-predicate/v1".into();
    let other_predicate = authority()
        .attest_payload(
            &serde_json::to_vec(&statement).expect("json"),
            &identity(),
            &AttestOptions::default(),
        )
        .expect("attest");
    cases.push(("predicate", code(&pins(), &other_predicate, &root())));

    // A trusted root whose digest is not the pin (another authority's root).
    let other_root = TestAuthority::new().expect("authority").trusted_root_json();
    cases.push(("root not pinned", code(&pins(), &good, &other_root)));

    // A cosign key bundle over the same statement.
    let payload = serde_json::to_vec(&provenance_statement(
        &[Subject::of("authority.json", DOCUMENT)],
        &identity(),
    ))
    .expect("json");
    let key_bundle = authority()
        .public_key_bundle(&payload, &AttestOptions::default())
        .expect("key bundle");
    cases.push(("cosign key bundle", code(&pins(), &key_bundle, &root())));

    // A valid attestation of another document.
    let other_subject = authority()
        .attest(
            &[Subject::of("authority.json", b"another document")],
            &identity(),
            &AttestOptions::default(),
        )
        .expect("attest");
    cases.push((
        "subject is not the document",
        code(&pins(), &other_subject, &root()),
    ));

    // A signature that does not verify (the timestamp is over the tampered bytes, so only the
    // signature check can refuse it).
    let tampered = authority()
        .attest(
            &[Subject::of("authority.json", DOCUMENT)],
            &identity(),
            &AttestOptions {
                corrupt_signature: true,
                ..AttestOptions::default()
            },
        )
        .expect("attest");
    cases.push(("tampered signature", code(&pins(), &tampered, &root())));

    // Unusable pins.
    let mut no_repo = pins();
    no_repo.repository.clear();
    cases.push(("no repository pin", code(&no_repo, &good, &root())));

    let expected = [
        ("signer workflow", "DPONE_ATTESTATION_SIGNER_MISMATCH"),
        ("signer digest", "DPONE_ATTESTATION_SIGNER_DIGEST_MISMATCH"),
        ("issuer", "DPONE_ATTESTATION_ISSUER_MISMATCH"),
        ("repository", "DPONE_ATTESTATION_REPOSITORY_MISMATCH"),
        ("runner", "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH"),
        ("predicate", "DPONE_ATTESTATION_PREDICATE_TYPE_MISMATCH"),
        ("root not pinned", "DPONE_TRUST_ROOT_DIGEST_MISMATCH"),
        ("cosign key bundle", "DPONE_NP_SIGNATURE_PUBLIC_KEY_BUNDLE"),
        (
            "subject is not the document",
            "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH",
        ),
        ("tampered signature", "DPONE_SIGSTORE_SIGNATURE_INVALID"),
        ("no repository pin", "DPONE_NP_SIGNATURE_PINS_INVALID"),
    ];
    assert_eq!(cases, expected.to_vec());
    let distinct: BTreeSet<_> = cases.iter().map(|(_, c)| *c).collect();
    assert_eq!(
        distinct.len(),
        cases.len(),
        "every refusal has its own code"
    );
    // And the untouched attestation still verifies under the same pins.
    assert_eq!(code(&pins(), &good, &root()), "OK");
}

#[test]
fn a_hosted_runner_pin_of_false_accepts_self_hosted_runners_only_when_stated() {
    let mut id = identity();
    id.runner_environment = "self-hosted".into();
    let bundle = signed_by(&id);
    assert_eq!(
        code(&pins(), &bundle, &root()),
        "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH"
    );
    let relaxed = SignaturePins {
        require_github_hosted_runner: false,
        ..pins()
    };
    assert_eq!(code(&relaxed, &bundle, &root()), "OK");
}

#[test]
fn timestamps_must_verify_and_cover_the_certificate() {
    let base = AttestOptions::default();
    let subject = [Subject::of("authority.json", DOCUMENT)];
    let sign = |options: AttestOptions| {
        authority()
            .attest(&subject, &identity(), &options)
            .expect("attest")
    };
    // No timestamp and no log entry: the verifier has no signing time to check the
    // certificate at, and refuses the bundle as incomplete.
    assert_eq!(
        code(
            &pins(),
            &sign(AttestOptions {
                omit_timestamp: true,
                ..base.clone()
            }),
            &root()
        ),
        "DPONE_SIGSTORE_BUNDLE_INVALID"
    );
    // A signature changed after it was timestamped: the timestamp no longer matches it.
    assert_eq!(
        code(
            &pins(),
            &sign(AttestOptions {
                corrupt_signature_after_timestamp: true,
                ..base.clone()
            }),
            &root()
        ),
        "DPONE_SIGSTORE_TIMESTAMP_INVALID"
    );
    // A timestamp after the 10-minute leaf expired.
    let signed_at = 1_800_000_000;
    assert_eq!(
        code(
            &pins(),
            &sign(AttestOptions {
                signed_at: Some(signed_at),
                timestamp_at: Some(signed_at + 3600),
                ..base.clone()
            }),
            &root()
        ),
        "DPONE_SIGSTORE_CERTIFICATE_INVALID"
    );
    // A past signing time inside the leaf's validity verifies.
    assert_eq!(
        code(
            &pins(),
            &sign(AttestOptions {
                signed_at: Some(signed_at),
                ..base
            }),
            &root()
        ),
        "OK"
    );
}

#[test]
fn a_custom_organisation_gets_the_custom_root_thresholds() {
    let ca = TestAuthority::with_options(AuthorityOptions {
        organization: "dpone test authority".into(),
        ..AuthorityOptions::default()
    })
    .expect("authority");
    let root = ca.trusted_root_json();
    let bundle = ca
        .attest(
            &[Subject::of("authority.json", DOCUMENT)],
            &identity(),
            &AttestOptions::default(),
        )
        .expect("attest");
    let pins = SignaturePins {
        trusted_root_sha256: Sha256Digest::of(&root).to_hex(),
        ..pins()
    };
    let verified = outcome(&pins, &bundle, &root).expect("verifies");
    assert_eq!(verified.instance, "custom");
}
