//! The offline test signer (`dpone-test-attest-signer`) issues attestations that the production
//! verifier, `dpone_trust::attestation::verify`, accepts unchanged, under the thresholds of
//! GitHub's instance (and of a custom root when the authority has another organisation).

use dpone_test_attest_signer::{
    AttestOptions, AuthorityOptions, Subject, TestAuthority, WorkloadIdentity,
};
use dpone_trust::Sha256Digest;
use dpone_trust::attestation::{
    self, AttestationPolicy, Instance, SLSA_PROVENANCE_V1, SubjectDigest,
};
use dpone_trust::trusted_root::PinnedTrustedRoot;

fn pinned(root: &[u8]) -> PinnedTrustedRoot {
    PinnedTrustedRoot::from_bytes(root, &[Sha256Digest::of(root)]).expect("test root usable")
}

fn policy(identity: &WorkloadIdentity) -> AttestationPolicy {
    AttestationPolicy {
        issuer: identity.issuer.clone(),
        certificate_identity: Some(identity.san()),
        signer_workflow: Some(identity.signer_workflow.clone()),
        signer_digest: Some(identity.signer_digest.clone()),
        source_repository: Some(identity.repository.clone()),
        require_github_hosted_runner: true,
        predicate_type: SLSA_PROVENANCE_V1.into(),
        ..AttestationPolicy::default()
    }
}

#[test]
fn the_production_verifier_accepts_test_signed_attestations() {
    let ca = TestAuthority::new().expect("authority");
    let identity = WorkloadIdentity::default();
    let document = b"a document";
    let bundle = ca
        .attest(
            &[Subject::of("doc", document)],
            &identity,
            &AttestOptions::default(),
        )
        .expect("attest");
    let root = pinned(&ca.trusted_root_json());
    let subject = SubjectDigest::Sha256(Sha256Digest::of(document));
    let outcome = attestation::verify(&bundle, &subject, &policy(&identity), &root)
        .expect("a test-signed attestation verifies");
    assert_eq!(outcome.instance, Instance::GitHub);
    assert_eq!(
        outcome.signer_identity.as_deref(),
        Some(identity.signer_identity().as_str())
    );
    assert_eq!(outcome.sigstore.rfc3161_timestamps, 1);
    assert_eq!(outcome.sigstore.tlog_entries, 0);
    assert!(outcome.sigstore.certificate_verified);
    assert_eq!(outcome.sigstore.verified_times.len(), 1);
}

#[test]
fn a_custom_organisation_is_verified_under_the_custom_root_thresholds() {
    let ca = TestAuthority::with_options(AuthorityOptions {
        organization: "dpone test authority".into(),
        ..AuthorityOptions::default()
    })
    .expect("authority");
    let identity = WorkloadIdentity::default();
    let bundle = ca
        .attest(
            &[Subject::of("doc", b"x")],
            &identity,
            &AttestOptions::default(),
        )
        .expect("attest");
    let subject = SubjectDigest::Sha256(Sha256Digest::of(b"x"));
    let outcome = attestation::verify(
        &bundle,
        &subject,
        &policy(&identity),
        &pinned(&ca.trusted_root_json()),
    )
    .expect("verifies");
    assert_eq!(outcome.instance, Instance::Custom);
}

#[test]
fn another_authoritys_root_does_not_verify_the_bundle() {
    let ca = TestAuthority::new().expect("authority");
    let other = TestAuthority::new().expect("authority");
    let identity = WorkloadIdentity::default();
    let bundle = ca
        .attest(
            &[Subject::of("doc", b"x")],
            &identity,
            &AttestOptions::default(),
        )
        .expect("attest");
    let subject = SubjectDigest::Sha256(Sha256Digest::of(b"x"));
    // Same organisation, so the instance matches; the timestamp's signer is not the other TSA.
    let err = attestation::verify(
        &bundle,
        &subject,
        &policy(&identity),
        &pinned(&other.trusted_root_json()),
    )
    .expect_err("another root refuses");
    assert_eq!(err.code(), "DPONE_SIGSTORE_TIMESTAMP_INVALID");
}
