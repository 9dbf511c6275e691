//! Tamper tests: a signed bundle, changed in every way an attacker or an accident could change
//! it, is refused, each way with its own code. Keys come from fixed test seeds, generated here.

use dpone_trust::archive;
use dpone_trust::bundle::{self, BundleBuilder, BundleFiles};
use dpone_trust::json::canonical_bytes;
use dpone_trust::keys::SecretKey;
use dpone_trust::manifest::{PolicyKind, ResourceBudget};
use dpone_trust::policy::TrustPolicy;
use dpone_trust::trusted_root::PinnedTrustedRoot;
use dpone_trust::{Sha256Digest, TrustError};
use serde_json::Value;

const BUDGET: ResourceBudget = ResourceBudget {
    fuel: 5_000_000,
    memory_bytes: 16 * 1024 * 1024,
    wasm_stack_bytes: 512 * 1024,
};

/// Test-only signer keys from fixed seeds; never used outside tests.
fn signer(n: u8) -> SecretKey {
    SecretKey::from_seed(&[n; 32])
}

fn component(tag: u8, len: usize) -> Vec<u8> {
    let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
    bytes.extend((0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(tag)));
    bytes
}

fn unsigned_bundle() -> BundleFiles {
    BundleBuilder::new("core-policies", "1.4.0")
        .policy(PolicyKind::Guard, component(1, 700), BUDGET)
        .policy(PolicyKind::Scope, component(2, 500), BUDGET)
        .table(
            "guard-basic",
            PolicyKind::Guard,
            br#"{"kind":"guard","rows":[]}"#.to_vec(),
        )
        .build()
        .expect("bundle builds")
}

/// Signed by keys 1 and 2; the policy accepts keys 1, 2 and 3 with threshold 2.
fn signed_bundle() -> BundleFiles {
    let mut files = unsigned_bundle();
    bundle::sign(&mut files, &signer(1)).expect("sign 1");
    bundle::sign(&mut files, &signer(2)).expect("sign 2");
    files
}

fn policy(seeds: &[u8], threshold: usize) -> TrustPolicy {
    let keys = seeds
        .iter()
        .map(|s| signer(*s).public_key().expect("key"))
        .collect();
    TrustPolicy::new(keys, threshold, Vec::new()).expect("policy")
}

fn two_of_three() -> TrustPolicy {
    policy(&[1, 2, 3], 2)
}

fn code(files: &BundleFiles, policy: &TrustPolicy) -> &'static str {
    match bundle::verify(files, policy) {
        Ok(_) => "OK",
        Err(err) => err.code(),
    }
}

fn manifest_value(files: &BundleFiles) -> Value {
    serde_json::from_slice(files.get("manifest.json").expect("manifest")).expect("json")
}

fn with_manifest(files: &BundleFiles, value: &Value) -> BundleFiles {
    let mut out = files.clone();
    out.insert("manifest.json", canonical_bytes(value).expect("canonical"))
        .expect("insert");
    out
}

#[test]
fn a_signed_bundle_verifies_as_directory_and_archive() {
    let files = signed_bundle();
    let verified = bundle::verify(&files, &two_of_three()).expect("verifies");
    let evidence = verified.evidence();
    assert_eq!(evidence.signers.len(), 2);
    assert_eq!(evidence.threshold, 2);
    assert!(evidence.ignored_signers.is_empty());
    let guard = verified.component(PolicyKind::Guard).expect("guard");
    assert_eq!(guard.sha256, Sha256Digest::of(guard.bytes));
    assert_eq!(verified.tables().count(), 1);
    assert!(verified.component(PolicyKind::Admission).is_none());

    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bundle");
    files.write_dir(&path).expect("write");
    let read = BundleFiles::read_dir(&path).expect("read");
    assert_eq!(read, files);

    let packed = archive::pack(&files).expect("pack");
    assert_eq!(
        archive::pack(&files).expect("pack again"),
        packed,
        "packing is deterministic"
    );
    let unpacked = archive::unpack(&packed).expect("unpack");
    let from_archive = bundle::verify(&unpacked, &two_of_three()).expect("archive verifies");
    assert_eq!(from_archive.evidence(), evidence);
}

#[test]
fn a_flipped_bit_anywhere_in_any_file_is_refused() {
    let files = signed_bundle();
    let policy = two_of_three();
    let mut checked = 0;
    for (name, bytes) in files.iter() {
        let mut codes = std::collections::BTreeSet::new();
        for i in 0..bytes.len() {
            let mut changed = bytes.to_vec();
            changed[i] ^= 1 << (i % 8);
            let mut tampered = files.clone();
            tampered.insert(name, changed).expect("insert");
            let outcome = code(&tampered, &policy);
            assert_ne!(
                outcome, "OK",
                "{name}: flipping a bit at byte {i} was accepted"
            );
            codes.insert(outcome);
            checked += 1;
        }
        eprintln!("{name}: {} flips refused with {codes:?}", bytes.len());
    }
    assert!(checked > 1000);
}

#[test]
fn a_flipped_bit_anywhere_in_the_archive_is_refused() {
    // One signature keeps the ~7,700 verifications cheap; the per-file test covers two.
    let mut files = unsigned_bundle();
    bundle::sign(&mut files, &signer(1)).expect("sign");
    let packed = archive::pack(&files).expect("pack");
    let policy = policy(&[1, 2, 3], 1);
    let mut codes = std::collections::BTreeSet::new();
    for i in 0..packed.len() {
        let mut changed = packed.clone();
        changed[i] ^= 1 << (i % 8);
        let outcome = match archive::unpack(&changed).and_then(|f| bundle::verify(&f, &policy)) {
            Ok(_) => "OK",
            Err(err) => err.code(),
        };
        assert_ne!(
            outcome, "OK",
            "flipping a bit at archive byte {i} was accepted"
        );
        codes.insert(outcome);
    }
    eprintln!("archive: {} flips refused with {codes:?}", packed.len());
}

#[test]
fn a_removed_signature_is_refused_not_ignored() {
    let mut files = signed_bundle();
    files.remove("signatures.json");
    assert_eq!(code(&files, &two_of_three()), "DPONE_BUNDLE_UNSIGNED");

    // An empty list is no better than no file.
    let mut empty = signed_bundle();
    let mut sigs: Value =
        serde_json::from_slice(empty.get("signatures.json").expect("sigs")).expect("json");
    sigs["signatures"] = Value::Array(Vec::new());
    empty
        .insert("signatures.json", canonical_bytes(&sigs).expect("c"))
        .expect("insert");
    assert_eq!(code(&empty, &two_of_three()), "DPONE_BUNDLE_UNSIGNED");

    // One of two signatures removed: below the threshold.
    let mut one = signed_bundle();
    let mut sigs: Value =
        serde_json::from_slice(one.get("signatures.json").expect("sigs")).expect("json");
    if let Some(list) = sigs["signatures"].as_array_mut() {
        list.truncate(1);
    }
    one.insert("signatures.json", canonical_bytes(&sigs).expect("c"))
        .expect("insert");
    assert_eq!(
        code(&one, &two_of_three()),
        "DPONE_BUNDLE_THRESHOLD_NOT_MET"
    );
}

#[test]
fn a_replaced_component_is_refused() {
    let files = signed_bundle();
    let mut same_size = files.clone();
    same_size
        .insert("guard.wasm", component(9, 700))
        .expect("insert");
    assert_eq!(
        code(&same_size, &two_of_three()),
        "DPONE_BUNDLE_FILE_DIGEST_MISMATCH"
    );

    let mut other_size = files.clone();
    other_size
        .insert("guard.wasm", component(1, 701))
        .expect("insert");
    assert_eq!(
        code(&other_size, &two_of_three()),
        "DPONE_BUNDLE_FILE_SIZE_MISMATCH"
    );

    let mut table = files.clone();
    table
        .insert(
            "tables/guard-basic.json",
            br#"{"kind":"guard","rows":[{}]}"#.to_vec(),
        )
        .expect("insert");
    assert_ne!(code(&table, &two_of_three()), "OK");
}

#[test]
fn stripping_and_resigning_does_not_help_an_attacker() {
    // The attacker swaps the component, rewrites the manifest to match and either drops the
    // signatures (OPA GHSA-g2pf-6v5v-qcc8 pattern) or signs with a key of their own.
    let mut attacked = BundleBuilder::new("core-policies", "1.4.0")
        .policy(PolicyKind::Guard, component(66, 700), BUDGET)
        .policy(PolicyKind::Scope, component(2, 500), BUDGET)
        .table(
            "guard-basic",
            PolicyKind::Guard,
            br#"{"kind":"guard","rows":[]}"#.to_vec(),
        )
        .build()
        .expect("bundle");
    assert_eq!(code(&attacked, &two_of_three()), "DPONE_BUNDLE_UNSIGNED");
    bundle::sign(&mut attacked, &signer(66)).expect("sign");
    assert_eq!(
        code(&attacked, &two_of_three()),
        "DPONE_BUNDLE_SIGNER_UNTRUSTED"
    );

    // Keeping the genuine signatures file does not help either.
    let mut reused = attacked.clone();
    reused
        .insert(
            "signatures.json",
            signed_bundle()
                .get("signatures.json")
                .expect("sigs")
                .to_vec(),
        )
        .expect("insert");
    assert_eq!(
        code(&reused, &two_of_three()),
        "DPONE_BUNDLE_SIGNATURES_MANIFEST_MISMATCH"
    );

    // Nor does a genuine signature relabelled for the new manifest.
    let mut relabelled = reused.clone();
    let mut sigs: Value =
        serde_json::from_slice(relabelled.get("signatures.json").expect("sigs")).expect("json");
    sigs["manifest_sha256"] =
        Value::String(Sha256Digest::of(attacked.get("manifest.json").expect("m")).to_hex());
    relabelled
        .insert("signatures.json", canonical_bytes(&sigs).expect("c"))
        .expect("insert");
    assert_eq!(
        code(&relabelled, &two_of_three()),
        "DPONE_BUNDLE_SIGNATURE_INVALID"
    );
}

#[test]
fn unlisted_keys_and_duplicates_do_not_count() {
    let mut files = unsigned_bundle();
    bundle::sign(&mut files, &signer(1)).expect("sign");
    bundle::sign(&mut files, &signer(7)).expect("sign");
    // Key 7 is not listed: one trusted signature, threshold two.
    assert_eq!(
        code(&files, &two_of_three()),
        "DPONE_BUNDLE_THRESHOLD_NOT_MET"
    );
    // With threshold one it verifies, and key 7 shows up as ignored evidence.
    let one = policy(&[1, 2, 3], 1);
    let verified = bundle::verify(&files, &one).expect("verifies");
    assert_eq!(verified.evidence().ignored_signers.len(), 1);

    // The same key's signature three times still counts once.
    let mut dup = unsigned_bundle();
    bundle::sign(&mut dup, &signer(1)).expect("sign");
    let mut sigs: Value =
        serde_json::from_slice(dup.get("signatures.json").expect("sigs")).expect("json");
    if let Some(list) = sigs["signatures"].as_array_mut() {
        let first = list[0].clone();
        list.push(first.clone());
        list.push(first);
    }
    dup.insert("signatures.json", canonical_bytes(&sigs).expect("c"))
        .expect("insert");
    assert_eq!(
        code(&dup, &two_of_three()),
        "DPONE_BUNDLE_THRESHOLD_NOT_MET"
    );
}

#[test]
fn manifest_rules_each_have_their_code() {
    let files = signed_bundle();
    let policy = two_of_three();
    let base = manifest_value(&files);

    let mut added = base.clone();
    added["allow_unsigned"] = Value::Bool(true);
    assert_eq!(
        code(&with_manifest(&files, &added), &policy),
        "DPONE_BUNDLE_MANIFEST_UNKNOWN_FIELD"
    );

    let mut nested = base.clone();
    nested["policies"][0]["budget"]["fuel_refill"] = Value::from(1);
    assert_eq!(
        code(&with_manifest(&files, &nested), &policy),
        "DPONE_BUNDLE_MANIFEST_UNKNOWN_FIELD"
    );

    let mut missing = base.clone();
    if let Some(map) = missing["policies"][0].as_object_mut() {
        map.remove("sha256");
    }
    assert_eq!(
        code(&with_manifest(&files, &missing), &policy),
        "DPONE_BUNDLE_MANIFEST_MISSING_FIELD"
    );

    let mut traversal = base.clone();
    traversal["tables"][0]["file"] = Value::String("tables/../../etc/passwd.json".into());
    assert_eq!(
        code(&with_manifest(&files, &traversal), &policy),
        "DPONE_BUNDLE_PATH_INVALID"
    );
    let mut absolute = base.clone();
    absolute["policies"][0]["file"] = Value::String("/tmp/guard.wasm".into());
    assert_eq!(
        code(&with_manifest(&files, &absolute), &policy),
        "DPONE_BUNDLE_PATH_INVALID"
    );

    let mut wit = base.clone();
    wit["wit_package"] = Value::String("dpone:policy@9.0.0".into());
    assert_eq!(
        code(&with_manifest(&files, &wit), &policy),
        "DPONE_BUNDLE_WIT_VERSION_UNSUPPORTED"
    );

    // A v1 manifest (no sequence, no validity window) is not read: it could not be protected
    // against rollback or expire.
    let mut schema = base.clone();
    schema["schema"] = Value::String("dpone.policy-bundle.v1".into());
    assert_eq!(
        code(&with_manifest(&files, &schema), &policy),
        "DPONE_BUNDLE_MANIFEST_SCHEMA_UNSUPPORTED"
    );
    let mut unsequenced = base.clone();
    if let Some(map) = unsequenced.as_object_mut() {
        map.remove("sequence");
    }
    assert_eq!(
        code(&with_manifest(&files, &unsequenced), &policy),
        "DPONE_BUNDLE_MANIFEST_MISSING_FIELD"
    );
    let mut zero = base.clone();
    zero["sequence"] = Value::from(0);
    assert_eq!(
        code(&with_manifest(&files, &zero), &policy),
        "DPONE_BUNDLE_MANIFEST_INVALID_VALUE"
    );
    let mut inverted = base.clone();
    inverted["not_before"] = Value::from(200);
    inverted["expires_at"] = Value::from(100);
    assert_eq!(
        code(&with_manifest(&files, &inverted), &policy),
        "DPONE_BUNDLE_MANIFEST_INVALID_VALUE"
    );

    let mut float = files.clone();
    let text = String::from_utf8(files.get("manifest.json").expect("m").to_vec()).expect("utf8");
    float
        .insert(
            "manifest.json",
            text.replacen("\"fuel\":5000000", "\"fuel\":5000000.5", 1)
                .into_bytes(),
        )
        .expect("insert");
    assert_eq!(code(&float, &policy), "DPONE_BUNDLE_MANIFEST_INVALID_VALUE");

    let mut pretty = files.clone();
    pretty
        .insert(
            "manifest.json",
            serde_json::to_vec_pretty(&base).expect("pretty"),
        )
        .expect("insert");
    assert_eq!(
        code(&pretty, &policy),
        "DPONE_BUNDLE_MANIFEST_NON_CANONICAL"
    );

    let mut duplicate = files.clone();
    duplicate
        .insert(
            "manifest.json",
            text.replacen("{", "{\"name\":\"evil\",", 1).into_bytes(),
        )
        .expect("insert");
    assert_eq!(
        code(&duplicate, &policy),
        "DPONE_BUNDLE_MANIFEST_DUPLICATE_KEY"
    );

    let mut oversized = files.clone();
    let mut big = base.clone();
    big["name"] = Value::String("x".repeat(300 * 1024));
    let big_bytes = canonical_bytes(&big).expect("c");
    assert!(big_bytes.len() > 256 * 1024);
    let err = oversized.insert("manifest.json", big_bytes).err();
    assert_eq!(err.map(|e| e.code()), Some("DPONE_BUNDLE_FILE_TOO_LARGE"));
    let direct = dpone_trust::manifest::Manifest::parse(&canonical_bytes(&big).expect("c")).err();
    assert_eq!(
        direct.map(|e| e.code()),
        Some("DPONE_BUNDLE_MANIFEST_TOO_LARGE")
    );
    oversized.remove("manifest.json");
    assert_eq!(code(&oversized, &policy), "DPONE_BUNDLE_FILE_MISSING");
}

#[test]
fn missing_and_extra_files_are_refused() {
    let files = signed_bundle();
    let mut missing = files.clone();
    missing.remove("scope.wasm");
    assert_eq!(code(&missing, &two_of_three()), "DPONE_BUNDLE_FILE_MISSING");

    let mut extra = files.clone();
    extra
        .insert("admission.wasm", component(5, 100))
        .expect("insert");
    assert_eq!(
        code(&extra, &two_of_three()),
        "DPONE_BUNDLE_FILE_UNEXPECTED"
    );

    let mut extra_table = files.clone();
    extra_table
        .insert("tables/extra.json", b"{}".to_vec())
        .expect("insert");
    assert_eq!(
        code(&extra_table, &two_of_three()),
        "DPONE_BUNDLE_FILE_UNEXPECTED"
    );

    assert_eq!(
        files
            .clone()
            .insert("../escape.wasm", vec![1])
            .err()
            .map(|e| e.code()),
        Some("DPONE_BUNDLE_PATH_INVALID")
    );
}

#[cfg(unix)]
#[test]
fn directories_admit_only_regular_bundle_files() {
    let files = signed_bundle();
    let dir = tempfile::tempdir().expect("tempdir");

    let stray = dir.path().join("stray");
    files.write_dir(&stray).expect("write");
    std::fs::write(stray.join("README.md"), b"hello").expect("write");
    assert_eq!(
        BundleFiles::read_dir(&stray).err().map(|e| e.code()),
        Some("DPONE_BUNDLE_FILE_UNEXPECTED")
    );

    let linked = dir.path().join("linked");
    files.write_dir(&linked).expect("write");
    std::fs::remove_file(linked.join("guard.wasm")).expect("rm");
    std::os::unix::fs::symlink(stray.join("guard.wasm"), linked.join("guard.wasm"))
        .expect("symlink");
    assert_eq!(
        BundleFiles::read_dir(&linked).err().map(|e| e.code()),
        Some("DPONE_BUNDLE_FILE_NOT_REGULAR")
    );

    let nested = dir.path().join("nested");
    files.write_dir(&nested).expect("write");
    std::fs::create_dir(nested.join("tables").join("deeper")).expect("mkdir");
    assert_eq!(
        BundleFiles::read_dir(&nested).err().map(|e| e.code()),
        Some("DPONE_BUNDLE_FILE_UNEXPECTED")
    );
}

#[test]
fn a_trust_root_whose_digest_does_not_match_its_pin_is_refused() {
    let root_bytes =
        br#"{"mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1"}"#;
    let pin = Sha256Digest::of(b"some other trusted root");
    let err = PinnedTrustedRoot::from_bytes(root_bytes, &[pin]).err();
    assert_eq!(
        err.as_ref().map(TrustError::code),
        Some("DPONE_TRUST_ROOT_DIGEST_MISMATCH")
    );

    // The pin comes from the trust policy; a policy that pins nothing refuses too.
    let no_pins = two_of_three();
    let err = PinnedTrustedRoot::from_policy(root_bytes, &no_pins).err();
    assert_eq!(err.map(|e| e.code()), Some("DPONE_TRUST_ROOT_NOT_PINNED"));

    let keys = vec![signer(1).public_key().expect("key")];
    let pinned = TrustPolicy::new(keys, 1, vec![pin]).expect("policy");
    let err = PinnedTrustedRoot::from_policy(root_bytes, &pinned).err();
    assert_eq!(
        err.map(|e| e.code()),
        Some("DPONE_TRUST_ROOT_DIGEST_MISMATCH")
    );

    // With the right pin the bytes are parsed (and here found unusable: no authorities).
    let right = PinnedTrustedRoot::from_bytes(root_bytes, &[Sha256Digest::of(root_bytes)]);
    assert!(right.is_ok() || right.err().map(|e| e.code()) == Some("DPONE_TRUST_ROOT_INVALID"));
}
