//! Verification cost: an ed25519-signed bundle (in memory, from a directory, from an archive),
//! the trust policy parse, a Sigstore bundle and a GitHub attestation from the conformance
//! corpus (skipped with a message when the corpus is absent), and loading a trusted root.
//!
//! `cargo bench -p dpone-trust --bench verify`

use criterion::Criterion;
use dpone_trust::Sha256Digest;
use dpone_trust::archive;
use dpone_trust::attestation::{self, AttestationPolicy, SLSA_PROVENANCE_V1, SubjectDigest};
use dpone_trust::bundle::{self, BundleBuilder, BundleFiles};
use dpone_trust::keys::SecretKey;
use dpone_trust::manifest::{PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use dpone_trust::sigstore::{self, Artifact, Signer};
use dpone_trust::trusted_root::PinnedTrustedRoot;
use std::hint::black_box;
use std::path::{Path, PathBuf};

const BUDGET: ResourceBudget = ResourceBudget {
    fuel: 10_000_000,
    memory_bytes: 16 << 20,
    wasm_stack_bytes: 512 << 10,
};

/// Four components of shipped-policy size (35-100 KB) and four 100 KB tables, signed 2 of 3.
fn signed_bundle() -> (BundleFiles, TrustPolicy) {
    let blob = |seed: u8, len: usize| -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(seed).wrapping_add(seed))
            .collect()
    };
    let mut builder = BundleBuilder::new("bench", "1.0.0");
    for (i, kind) in PolicyKind::ALL.into_iter().enumerate() {
        let seed = u8::try_from(i).unwrap_or(0) + 3;
        builder = builder
            .policy(kind, blob(seed, 35_000 + 20_000 * i), BUDGET)
            .table(kind.as_str(), kind, blob(seed + 7, 100_000));
    }
    let mut files = builder.build().expect("bundle");
    let keys: Vec<SecretKey> = (1..=3).map(|n| SecretKey::from_seed(&[n; 32])).collect();
    bundle::sign(&mut files, &keys[0]).expect("sign");
    bundle::sign(&mut files, &keys[1]).expect("sign");
    let policy = TrustPolicy::new(
        keys.iter().map(|k| k.public_key().expect("key")).collect(),
        2,
        Vec::new(),
    )
    .expect("policy");
    (files, policy)
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/conformance")
}

fn bench_ed25519(c: &mut Criterion) {
    let (files, policy) = signed_bundle();
    let total: usize = files.iter().map(|(_, b)| b.len()).sum();
    eprintln!(
        "ed25519 bundle: {} files, {total} bytes, 2 signatures",
        files.len()
    );
    c.bench_function("ed25519 bundle verify (in memory)", |b| {
        b.iter(|| bundle::verify(black_box(&files), &policy).expect("verifies"))
    });

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bundle");
    files.write_dir(&path).expect("write");
    c.bench_function("ed25519 bundle read_dir + verify", |b| {
        b.iter(|| {
            let read = BundleFiles::read_dir(black_box(&path)).expect("read");
            bundle::verify(&read, &policy).expect("verifies")
        })
    });

    let packed = archive::pack(&files).expect("pack");
    c.bench_function("ed25519 bundle archive unpack + verify", |b| {
        b.iter(|| {
            let unpacked = archive::unpack(black_box(&packed)).expect("unpack");
            bundle::verify(&unpacked, &policy).expect("verifies")
        })
    });

    let policy_bytes = policy.to_json_bytes().expect("policy json");
    c.bench_function("trust policy parse (3 keys)", |b| {
        b.iter(|| TrustPolicy::parse(black_box(&policy_bytes)).expect("parses"))
    });
}

fn bench_sigstore(c: &mut Criterion) {
    let base = corpus();
    let cases = base.join("sigstore/cases");
    assert!(
        cases.is_dir(),
        "the vendored conformance corpus fixtures/conformance/sigstore is missing"
    );
    let root_bytes =
        std::fs::read(base.join("sigstore/production_trusted_root.json")).expect("root");
    let pins = [Sha256Digest::of(&root_bytes)];
    c.bench_function("trusted root load (production, pinned)", |b| {
        b.iter(|| PinnedTrustedRoot::from_bytes(black_box(&root_bytes), &pins).expect("root"))
    });
    let root = PinnedTrustedRoot::from_bytes(&root_bytes, &pins).expect("root");
    let artifact = std::fs::read(cases.join("a.txt")).expect("artifact");
    let signer = Signer::Identity {
        identity: "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main".into(),
        issuer: "https://token.actions.githubusercontent.com".into(),
    };
    let bundle_v03 =
        std::fs::read(cases.join("happy-path-v0.3/bundle.sigstore.json")).expect("bundle");
    c.bench_function(
        "sigstore bundle verify (v0.3, Rekor v1, message signature)",
        |b| {
            b.iter(|| {
                sigstore::verify(
                    black_box(&bundle_v03),
                    Artifact::Bytes(&artifact),
                    &signer,
                    &root,
                )
                .expect("verifies")
            })
        },
    );

    let rekor2 = cases.join("rekor2-happy-path");
    let rekor2_root_bytes = std::fs::read(rekor2.join("trusted_root.json")).expect("root");
    let rekor2_root =
        PinnedTrustedRoot::from_bytes(&rekor2_root_bytes, &[Sha256Digest::of(&rekor2_root_bytes)])
            .expect("root");
    let rekor2_bundle = std::fs::read(rekor2.join("bundle.sigstore.json")).expect("bundle");
    c.bench_function("sigstore bundle verify (Rekor v2 + RFC 3161)", |b| {
        b.iter(|| {
            sigstore::verify(
                black_box(&rekor2_bundle),
                Artifact::Bytes(&artifact),
                &signer,
                &rekor2_root,
            )
            .expect("verifies")
        })
    });

    let attest = base.join("github-attestations");
    let gh_root_bytes = std::fs::read(attest.join("trusted_root.github.json")).expect("root");
    let gh_root =
        PinnedTrustedRoot::from_bytes(&gh_root_bytes, &[Sha256Digest::of(&gh_root_bytes)])
            .expect("root");
    let gh_bundle =
        std::fs::read(attest.join("github_provenance_demo-0.0.12-py3-none-any-bundle.jsonl"))
            .expect("bundle");
    let subject = SubjectDigest::parse(
        "sha256:ae57936def59bc4c75edd3a837d89bcefc6d3a5e31d55a6fa7a71624f92c3c3b",
    )
    .expect("digest");
    let policy = AttestationPolicy {
        issuer: "https://token.actions.githubusercontent.com".into(),
        signer_workflow: Some("actions/attest-demo/.github/workflows/build-python.yml".into()),
        require_github_hosted_runner: true,
        predicate_type: SLSA_PROVENANCE_V1.into(),
        ..AttestationPolicy::default()
    };
    c.bench_function(
        "GitHub attestation verify (GitHub instance, RFC 3161)",
        |b| {
            b.iter(|| {
                attestation::verify_jsonl(black_box(&gh_bundle), &subject, &policy, &gh_root)
                    .expect("verifies")
            })
        },
    );
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_ed25519(&mut c);
    bench_sigstore(&mut c);
    c.final_summary();
}
