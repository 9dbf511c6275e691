//! Property tests over the parsers of untrusted input: the manifest, the signatures file, the
//! trust policy and the archive reader never panic, and accept only canonical input (whatever
//! they accept re-encodes to exactly the bytes they were given).

use dpone_trust::archive;
use dpone_trust::bundle::{BundleBuilder, BundleFiles};
use dpone_trust::keys::SecretKey;
use dpone_trust::manifest::{Manifest, PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use dpone_trust::signature::SignatureFile;
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = PolicyKind> {
    prop::sample::select(PolicyKind::ALL.to_vec())
}

fn budget() -> impl Strategy<Value = ResourceBudget> {
    (1u64..1 << 40, 1u64..=1 << 32, 1u64..1 << 24).prop_map(
        |(fuel, memory_bytes, wasm_stack_bytes)| ResourceBudget {
            fuel,
            memory_bytes,
            wasm_stack_bytes,
        },
    )
}

/// A valid bundle: 1-4 components with random bytes and budgets, 0-3 tables.
fn bundle() -> impl Strategy<Value = BundleFiles> {
    (
        "[a-z0-9][a-z0-9._-]{0,20}",
        "[0-9][0-9a-z.+-]{0,10}",
        prop::collection::btree_map(
            kind(),
            (prop::collection::vec(any::<u8>(), 1..64), budget()),
            1..=4,
        ),
        prop::collection::vec(
            ("[a-z0-9]{1,8}", prop::collection::vec(any::<u8>(), 0..32)),
            0..3,
        ),
    )
        .prop_filter_map("name rules", |(name, version, policies, tables)| {
            if name.contains("..") {
                return None;
            }
            let kinds: Vec<PolicyKind> = policies.keys().copied().collect();
            let mut builder = BundleBuilder::new(&name, &version);
            for (kind, (bytes, budget)) in policies {
                builder = builder.policy(kind, bytes, budget);
            }
            for (i, (stem, bytes)) in tables.into_iter().enumerate() {
                builder = builder.table(&stem, kinds[i % kinds.len()], bytes);
            }
            builder.build().ok()
        })
}

/// One edit of a byte string: flip, insert, delete or overwrite.
fn mutate(bytes: &[u8], op: u8, at: usize, value: u8) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.is_empty() {
        out.push(value);
        return out;
    }
    let at = at % out.len();
    match op % 4 {
        0 => out[at] ^= 1 << (value % 8),
        1 => out.insert(at, value),
        2 => {
            out.remove(at);
        }
        _ => out[at] = value,
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, .. ProptestConfig::default() })]

    #[test]
    fn manifest_parser_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Manifest::parse(&bytes);
        let _ = SignatureFile::parse(&bytes);
        let _ = TrustPolicy::parse(&bytes);
    }

    #[test]
    fn manifest_parser_never_panics_on_json_shaped_text(text in r#"[{}\[\]":,0-9a-z_ .\\-]{0,200}"#) {
        let _ = Manifest::parse(text.as_bytes());
        let _ = SignatureFile::parse(text.as_bytes());
        let _ = TrustPolicy::parse(text.as_bytes());
    }

    #[test]
    fn manifests_round_trip_and_only_canonical_bytes_are_accepted(
        files in bundle(),
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let bytes = files.get("manifest.json").map(<[u8]>::to_vec).unwrap_or_default();
        let manifest = Manifest::parse(&bytes).expect("built manifests parse");
        prop_assert_eq!(manifest.to_canonical_bytes().expect("encode"), bytes.clone());

        let mut mutated = bytes.clone();
        for (op, at, value) in edits {
            mutated = mutate(&mutated, op, at, value);
        }
        if let Ok(parsed) = Manifest::parse(&mutated) {
            // Accepted input is canonical: it is exactly the encoding of what was parsed.
            prop_assert_eq!(parsed.to_canonical_bytes().expect("encode"), mutated);
        }
    }

    #[test]
    fn signature_files_accept_only_canonical_bytes(
        seeds in prop::collection::vec(any::<u8>(), 1..4),
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let mut file = SignatureFile::new(dpone_trust::Sha256Digest::of(&seeds));
        for seed in &seeds {
            file.add(&SecretKey::from_seed(&[*seed; 32])).expect("sign");
        }
        let bytes = file.to_canonical_bytes().expect("encode");
        prop_assert_eq!(SignatureFile::parse(&bytes).expect("parse"), file);
        let mut mutated = bytes;
        for (op, at, value) in edits {
            mutated = mutate(&mutated, op, at, value);
        }
        if let Ok(parsed) = SignatureFile::parse(&mutated) {
            prop_assert_eq!(parsed.to_canonical_bytes().expect("encode"), mutated);
        }
    }

    #[test]
    fn archive_reader_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..4096)) {
        let _ = archive::unpack(&bytes);
    }

    #[test]
    fn archives_round_trip_and_only_canonical_archives_are_accepted(
        files in bundle(),
        edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
    ) {
        let packed = archive::pack(&files).expect("pack");
        prop_assert_eq!(&archive::unpack(&packed).expect("unpack"), &files);
        let mut mutated = packed;
        for (op, at, value) in edits {
            mutated = mutate(&mutated, op, at, value);
        }
        if let Ok(unpacked) = archive::unpack(&mutated) {
            prop_assert_eq!(archive::pack(&unpacked).expect("pack"), mutated);
        }
    }

    #[test]
    fn archive_headers_with_random_member_metadata_never_panic(
        name in prop::collection::vec(any::<u8>(), 1..100),
        size in any::<u64>(),
        kind in any::<u8>(),
        body in prop::collection::vec(any::<u8>(), 0..1024),
    ) {
        let mut header = [0u8; 512];
        header[..name.len()].copy_from_slice(&name);
        let octal = format!("{:011o}", size % (1 << 33));
        header[124..135].copy_from_slice(octal.as_bytes());
        header[156] = kind;
        header[257..263].copy_from_slice(b"ustar\0");
        header[263..265].copy_from_slice(b"00");
        header[148..156].copy_from_slice(b"        ");
        let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
        let cksum = format!("{sum:06o}\0 ");
        header[148..156].copy_from_slice(cksum.as_bytes());
        let mut bytes = header.to_vec();
        bytes.extend_from_slice(&body);
        bytes.resize(bytes.len().div_ceil(512) * 512 + 1024, 0);
        let _ = archive::unpack(&bytes);
    }
}

/// The Sigstore bundle path (parse + verify) on mutated real bundles: refusals, never panics.
mod sigstore_mutations {
    use super::mutate;
    use dpone_trust::Sha256Digest;
    use dpone_trust::sigstore::{self, Artifact, Signer};
    use dpone_trust::trusted_root::PinnedTrustedRoot;
    use proptest::prelude::*;
    use std::path::Path;

    /// The corpus is vendored in the repository (`fixtures/conformance/`): a missing file
    /// fails the test instead of letting it pass unchecked.
    fn corpus() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let base =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/conformance/sigstore");
        let read = |name: &str| {
            std::fs::read(base.join(name)).unwrap_or_else(|_| {
                panic!(
                    "the vendored conformance corpus file fixtures/conformance/sigstore/{name} is missing"
                )
            })
        };
        (
            read("cases/happy-path-v0.3/bundle.sigstore.json"),
            read("production_trusted_root.json"),
            read("cases/a.txt"),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

        #[test]
        fn mutated_sigstore_bundles_never_panic(
            edits in prop::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
        ) {
            let (bundle, root_bytes, artifact) = corpus();
            let root = PinnedTrustedRoot::from_bytes(&root_bytes, &[Sha256Digest::of(&root_bytes)])
                .expect("production root");
            let signer = Signer::Identity {
                identity: "https://github.com/sigstore-conformance/extremely-dangerous-public-oidc-beacon/.github/workflows/extremely-dangerous-oidc-beacon.yml@refs/heads/main".into(),
                issuer: "https://token.actions.githubusercontent.com".into(),
            };
            let mut mutated = bundle;
            for (op, at, value) in edits {
                mutated = mutate(&mutated, op, at, value);
            }
            let _ = sigstore::verify(&mutated, Artifact::Bytes(&artifact), &signer, &root);
        }
    }
}
