//! Cost of the nonproduction authority's signature adapter end to end: one attestation issued
//! offline by the test signer, verified from its bytes (pins checked, trusted root pinned and
//! parsed, bundle parsed, statement parsed strictly, certificate chain, RFC 3161 timestamp, DSSE
//! signature, identity claims). Prints p50 and p90 of a plain timing loop after criterion's
//! report, since the issue asks for the median.
//!
//! `cargo bench -p dpone-trust --bench nonproduction_signature`

use criterion::Criterion;
use dpone_test_attest_signer::{
    AttestOptions, SLSA_PROVENANCE_V1, Subject, TestAuthority, WorkloadIdentity,
};
use dpone_trust::Sha256Digest;
use dpone_trust::nonproduction_signature::{SignaturePins, verify};
use std::hint::black_box;
use std::time::Instant;

fn main() {
    let document = br#"{"schema":"dpone.nonproduction-authority.v1"}"#;
    let ca = TestAuthority::new().expect("test authority");
    let identity = WorkloadIdentity::default();
    let bundle = ca
        .attest(
            &[Subject::of("authority.json", document)],
            &identity,
            &AttestOptions::default(),
        )
        .expect("attest");
    let root = ca.trusted_root_json();
    let pins = SignaturePins {
        issuer: identity.issuer.clone(),
        trusted_root_sha256: Sha256Digest::of(&root).to_hex(),
        repository: identity.repository.clone(),
        predicate_type: SLSA_PROVENANCE_V1.into(),
        signer_workflow: identity.signer_workflow.clone(),
        signer_digest: identity.signer_digest.clone(),
        require_github_hosted_runner: true,
    };
    verify(&pins, &bundle, &root, document).expect("the benchmarked attestation verifies");

    let mut c = Criterion::default().configure_from_args();
    c.bench_function("nonproduction_signature/verify_end_to_end", |b| {
        b.iter(|| {
            verify(
                black_box(&pins),
                black_box(&bundle),
                black_box(&root),
                document,
            )
        })
    });
    c.final_summary();

    let mut samples: Vec<f64> = (0..500)
        .map(|_| {
            let start = Instant::now();
            let result = verify(&pins, &bundle, &root, document);
            let elapsed = start.elapsed().as_secs_f64() * 1e6;
            assert!(result.is_ok());
            elapsed
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    eprintln!(
        "nonproduction_signature/verify_end_to_end: p50 {:.0} us, p90 {:.0} us over {} runs",
        samples[samples.len() / 2],
        samples[samples.len() * 9 / 10],
        samples.len()
    );
}
