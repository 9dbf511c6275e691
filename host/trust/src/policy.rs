//! The trust policy: which keys may sign bundles, how many must, and which Sigstore trusted
//! roots are pinned.
//!
//! ```json
//! {
//!   "schema": "dpone.trust-policy.v1",
//!   "bundle_signers": {
//!     "threshold": 2,
//!     "keys": [
//!       {"key_id": "sha256:<hex of sha256(public key)>", "public_key": "<64 hex>"},
//!       {"key_id": "sha256:...", "public_key": "..."}
//!     ]
//!   },
//!   "sigstore_trusted_roots": [{"sha256": "<64 hex of the trusted_root.json file>"}]
//! }
//! ```
//!
//! Version 2 (`dpone.trust-policy.v2`) may also list GitHub Artifact Attestation identities
//! beside the keys; the threshold counts both (see [`crate::bundle_attestation`]):
//!
//! ```json
//! {
//!   "schema": "dpone.trust-policy.v2",
//!   "bundle_signers": {
//!     "threshold": 2,
//!     "keys": [{"key_id": "sha256:...", "public_key": "..."}],
//!     "attestations": [{
//!       "issuer": "https://token.actions.githubusercontent.com",
//!       "signer_workflow": "acme/policies/.github/workflows/release.yml",
//!       "signer_digest": "<40 hex>",
//!       "repository": "acme/policies", "repository_id": "763287532", "owner_id": "44036562",
//!       "ref": "refs/heads/main", "runner_environment": "github-hosted",
//!       "trusted_root_sha256": "<64 hex>"
//!     }]
//!   }
//! }
//! ```
//!
//! A v1 file reads exactly as before (and a policy without attestation identities is written as
//! v1, so its digest does not change); `attestations` in a v1 file is an unknown field.
//!
//! The file is strict JSON (unknown fields, duplicate keys, floats and oversized files are
//! refused) but, being written by people, need not be canonical. A policy always names at
//! least one signer (key or attestation identity) and a threshold `1 <= k <= n`: there is no
//! policy that accepts unsigned bundles. Each key id must be the sha256 of its key, and a key or
//! a signer identity may be listed once.
//!
//! Threshold rules ([`TrustPolicy::evaluate`]):
//! - only signatures by listed keys count, each key at most once however often it signed;
//! - a signature by a listed key that does not verify refuses the bundle outright
//!   (`DPONE_BUNDLE_SIGNATURE_INVALID`), even when the threshold is met without it;
//! - a signature by an unlisted key is ignored and reported in the evidence; if no listed key
//!   signed at all and some unlisted key did, the refusal is `DPONE_BUNDLE_SIGNER_UNTRUSTED`;
//! - no signature at all is `DPONE_BUNDLE_UNSIGNED`; fewer distinct listed signers than `k`
//!   is `DPONE_BUNDLE_THRESHOLD_NOT_MET`.

use crate::Result;
use crate::bundle::BundleFiles;
use crate::bundle_attestation::{
    self, AttestationEvidence, AttestationIdentity, AttestedSigner, IDENTITY_FIELDS, MAX_IDENTITIES,
};
use crate::digest::Sha256Digest;
use crate::error::{Document, TrustError, shown};
use crate::json::{self, Fields};
use crate::keys::{KeyId, PublicKey};
use crate::signature::{self, SignatureFile};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The trust policy schema of policies with keys only (read and written as before).
pub const TRUST_POLICY_SCHEMA: &str = "dpone.trust-policy.v1";
/// The trust policy schema that may also list attestation identities.
pub const TRUST_POLICY_SCHEMA_V2: &str = "dpone.trust-policy.v2";

/// Largest accepted trust policy file.
pub const MAX_TRUST_POLICY_BYTES: usize = 64 * 1024;

/// Most keys a trust policy may list.
pub const MAX_KEYS: usize = 64;

/// A parsed, validated trust policy.
#[derive(Clone, Debug)]
pub struct TrustPolicy {
    threshold: usize,
    keys: BTreeMap<KeyId, PublicKey>,
    attestations: Vec<AttestationIdentity>,
    trusted_roots: Vec<Sha256Digest>,
    sha256: Sha256Digest,
}

/// Who signed a bundle, as far as the trust policy is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignerEvidence {
    /// Distinct listed keys whose signature verified, in key id order.
    pub signers: Vec<KeyId>,
    /// Distinct unlisted keys whose signatures were ignored.
    pub ignored: Vec<KeyId>,
    /// Listed attestation identities whose attestation of the manifest verified.
    pub attested_by: Vec<AttestedSigner>,
    /// Attestation files that name no listed identity (ignored).
    pub ignored_attestations: Vec<String>,
    /// The threshold applied.
    pub threshold: usize,
}

impl TrustPolicy {
    /// Parses a trust policy file. `sha256` of the evidence is the digest of these bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        let value =
            json::parse_strict(Document::TrustPolicy, bytes, MAX_TRUST_POLICY_BYTES, false)?;
        let top = Fields::new(
            Document::TrustPolicy,
            "$",
            &value,
            &["schema", "bundle_signers", "sigstore_trusted_roots"],
        )?;
        let v2 = top.str("schema")? == TRUST_POLICY_SCHEMA_V2;
        if !v2 {
            json::expect_schema(&top, TRUST_POLICY_SCHEMA)?;
        }
        let signers = if v2 {
            top.object("bundle_signers", &["threshold", "keys", "attestations"])?
        } else {
            top.object("bundle_signers", &["threshold", "keys"])?
        };
        let threshold = signers.u64("threshold")?;
        let raw_keys = if v2 {
            signers.array_or_empty("keys")?
        } else {
            signers.array("keys")?
        };
        if raw_keys.len() > MAX_KEYS {
            return Err(signers.invalid("keys", format!("at most {MAX_KEYS} keys")));
        }
        let mut keys = Vec::new();
        for (i, item) in raw_keys.iter().enumerate() {
            let path = format!("$.bundle_signers.keys[{i}]");
            let fields = Fields::new(
                Document::TrustPolicy,
                &path,
                item,
                &["key_id", "public_key"],
            )?;
            let key_id = fields.str("key_id")?;
            let declared = KeyId::parse(key_id)
                .ok_or_else(|| fields.invalid("key_id", "expected sha256:<64 lowercase hex>"))?;
            let key = PublicKey::from_hex(fields.str("public_key")?)?;
            if key.id() != &declared {
                return Err(TrustError::TrustPolicyKeyIdMismatch {
                    key_id: shown(key_id),
                });
            }
            keys.push(key);
        }
        let mut attestations = Vec::new();
        if v2 {
            let raw = signers.array_or_empty("attestations")?;
            if raw.len() > MAX_IDENTITIES {
                return Err(signers.invalid(
                    "attestations",
                    format!("at most {MAX_IDENTITIES} attestation identities"),
                ));
            }
            for (i, item) in raw.iter().enumerate() {
                let path = format!("$.bundle_signers.attestations[{i}]");
                let fields = Fields::new(Document::TrustPolicy, &path, item, IDENTITY_FIELDS)?;
                attestations.push(AttestationIdentity::parse(&fields)?);
            }
        }
        let mut trusted_roots = Vec::new();
        for (i, item) in top
            .array_or_empty("sigstore_trusted_roots")?
            .iter()
            .enumerate()
        {
            let path = format!("$.sigstore_trusted_roots[{i}]");
            let fields = Fields::new(Document::TrustPolicy, &path, item, &["sha256"])?;
            let digest = Sha256Digest::parse_hex(fields.str("sha256")?).ok_or_else(|| {
                fields.invalid("sha256", "expected 64 lowercase hexadecimal characters")
            })?;
            trusted_roots.push(digest);
        }
        let threshold = usize::try_from(threshold).unwrap_or(usize::MAX);
        Self::build(
            keys,
            attestations,
            threshold,
            trusted_roots,
            Sha256Digest::of(bytes),
        )
    }

    /// A policy built in code; its digest is that of [`TrustPolicy::to_json_bytes`].
    pub fn new(
        keys: Vec<PublicKey>,
        threshold: usize,
        trusted_roots: Vec<Sha256Digest>,
    ) -> Result<Self> {
        Self::with_attestations(keys, Vec::new(), threshold, trusted_roots)
    }

    /// A policy built in code that may list attestation identities (written as v2 when it
    /// does); its digest is that of [`TrustPolicy::to_json_bytes`].
    pub fn with_attestations(
        keys: Vec<PublicKey>,
        attestations: Vec<AttestationIdentity>,
        threshold: usize,
        trusted_roots: Vec<Sha256Digest>,
    ) -> Result<Self> {
        for identity in &attestations {
            identity.validate()?;
        }
        let mut policy = Self::build(
            keys,
            attestations,
            threshold,
            trusted_roots,
            Sha256Digest::of(b""),
        )?;
        policy.sha256 = Sha256Digest::of(&policy.to_json_bytes()?);
        Ok(policy)
    }

    fn build(
        keys: Vec<PublicKey>,
        attestations: Vec<AttestationIdentity>,
        threshold: usize,
        trusted_roots: Vec<Sha256Digest>,
        sha256: Sha256Digest,
    ) -> Result<Self> {
        let mut map = BTreeMap::new();
        for key in keys {
            if let Some(dup) = map.insert(key.id().clone(), key) {
                return Err(TrustError::TrustPolicyDuplicateKey {
                    key_id: dup.id().to_string(),
                });
            }
        }
        let mut identities = BTreeSet::new();
        for identity in &attestations {
            if !identities.insert(identity.signer_identity()) {
                return Err(TrustError::TrustPolicyDuplicateKey {
                    key_id: shown(&identity.signer_identity()),
                });
            }
        }
        if attestations.len() > MAX_IDENTITIES {
            return Err(TrustError::TrustPolicyInvalid {
                detail: format!("more than {MAX_IDENTITIES} attestation identities"),
            });
        }
        let n = map.len() + attestations.len();
        if n == 0 {
            return Err(TrustError::TrustPolicyInvalid {
                detail: "it names no bundle signer key".into(),
            });
        }
        if threshold == 0 || threshold > n {
            return Err(TrustError::TrustPolicyInvalid {
                detail: format!(
                    "threshold {threshold} is outside 1..={n} (the number of keys and attestation identities)"
                ),
            });
        }
        Ok(Self {
            threshold,
            keys: map,
            attestations,
            trusted_roots,
            sha256,
        })
    }

    /// The policy as canonical JSON.
    pub fn to_json_bytes(&self) -> Result<Vec<u8>> {
        let keys: Vec<Value> = self
            .keys
            .values()
            .map(|key| json!({"key_id": key.id().as_str(), "public_key": key.to_hex()}))
            .collect();
        let roots: Vec<Value> = self
            .trusted_roots
            .iter()
            .map(|d| json!({"sha256": d.to_hex()}))
            .collect();
        let mut value = if self.attestations.is_empty() {
            json!({
                "schema": TRUST_POLICY_SCHEMA,
                "bundle_signers": {"threshold": self.threshold, "keys": keys},
            })
        } else {
            let identities: Vec<Value> = self
                .attestations
                .iter()
                .map(AttestationIdentity::to_json)
                .collect();
            json!({
                "schema": TRUST_POLICY_SCHEMA_V2,
                "bundle_signers": {
                    "threshold": self.threshold,
                    "keys": keys,
                    "attestations": identities,
                },
            })
        };
        if !roots.is_empty()
            && let Some(map) = value.as_object_mut()
        {
            map.insert("sigstore_trusted_roots".into(), Value::Array(roots));
        }
        json::canonical_bytes(&value)
    }

    /// Signatures required (k).
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    /// Accepted keys (n), by key id.
    pub fn keys(&self) -> impl Iterator<Item = &PublicKey> {
        self.keys.values()
    }

    /// The accepted key with this id.
    pub fn key(&self, id: &KeyId) -> Option<&PublicKey> {
        self.keys.get(id)
    }

    /// Accepted attestation identities.
    pub fn attestation_identities(&self) -> &[AttestationIdentity] {
        &self.attestations
    }

    /// Pinned sha256 digests of Sigstore trusted root files.
    pub fn trusted_root_pins(&self) -> &[Sha256Digest] {
        &self.trusted_roots
    }

    /// SHA-256 of the policy file (part of the evidence).
    pub fn sha256(&self) -> &Sha256Digest {
        &self.sha256
    }

    /// Applies the threshold rules to the ed25519 signatures over a manifest with
    /// `manifest_sha256` (no attestation counts).
    pub fn evaluate(
        &self,
        manifest_sha256: &Sha256Digest,
        signatures: Option<&SignatureFile>,
    ) -> Result<SignerEvidence> {
        self.tally(manifest_sha256, signatures, None)
    }

    /// Applies the threshold rules to a bundle: its ed25519 signatures and, when the policy
    /// lists attestation identities, its attestation files, counted together. Under a policy
    /// without identities attestation files are ignored (reported, never counted).
    pub fn evaluate_bundle(
        &self,
        manifest_sha256: &Sha256Digest,
        signatures: Option<&SignatureFile>,
        files: &BundleFiles,
    ) -> Result<SignerEvidence> {
        self.tally(manifest_sha256, signatures, Some(files))
    }

    fn tally(
        &self,
        manifest_sha256: &Sha256Digest,
        signatures: Option<&SignatureFile>,
        files: Option<&BundleFiles>,
    ) -> Result<SignerEvidence> {
        let attestation_files =
            files.map_or(0, |f| bundle_attestation::attestation_files(f).count());
        let unsigned = signatures.is_none_or(|file| file.signatures.is_empty());
        if signatures.is_none() && attestation_files == 0 {
            return Err(TrustError::Unsigned {
                threshold: self.threshold,
            });
        }
        if let Some(file) = signatures
            && &file.manifest_sha256 != manifest_sha256
        {
            return Err(TrustError::SignaturesManifestMismatch {
                declared: file.manifest_sha256.to_hex(),
                actual: manifest_sha256.to_hex(),
            });
        }
        if unsigned && attestation_files == 0 {
            return Err(TrustError::Unsigned {
                threshold: self.threshold,
            });
        }
        let message = signature::signing_message(manifest_sha256);
        let mut signers = BTreeSet::new();
        let mut ignored = BTreeSet::new();
        for entry in signatures.iter().flat_map(|file| &file.signatures) {
            match self.keys.get(&entry.key_id) {
                None => {
                    ignored.insert(entry.key_id.clone());
                }
                Some(key) => {
                    if !key.verify_strict(&message, &entry.signature) {
                        return Err(TrustError::SignatureInvalid {
                            key_id: entry.key_id.to_string(),
                        });
                    }
                    signers.insert(entry.key_id.clone());
                }
            }
        }
        let attested = match files {
            None => AttestationEvidence::default(),
            Some(files) if self.attestations.is_empty() => AttestationEvidence {
                ignored: bundle_attestation::attestation_files(files)
                    .map(|(name, _)| name.to_owned())
                    .collect(),
                present: attestation_files,
                signers: Vec::new(),
            },
            Some(files) => {
                bundle_attestation::evaluate(&self.attestations, manifest_sha256, files)?
            }
        };
        let valid = signers.len() + attested.signers.len();
        if valid >= self.threshold {
            return Ok(SignerEvidence {
                signers: signers.into_iter().collect(),
                ignored: ignored.into_iter().collect(),
                attested_by: attested.signers,
                ignored_attestations: attested.ignored,
                threshold: self.threshold,
            });
        }
        if valid == 0 {
            return Err(TrustError::UntrustedSigner {
                ignored: ignored.len() + attested.ignored.len(),
            });
        }
        Err(TrustError::ThresholdNotMet {
            valid,
            threshold: self.threshold,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::SecretKey;

    fn key(seed: u8) -> SecretKey {
        SecretKey::from_seed(&[seed; 32])
    }

    fn policy(seeds: &[u8], threshold: usize) -> Result<TrustPolicy> {
        let keys = seeds
            .iter()
            .map(|s| key(*s).public_key())
            .collect::<Result<Vec<_>>>()?;
        TrustPolicy::new(keys, threshold, Vec::new())
    }

    fn signed(digest: &Sha256Digest, seeds: &[u8]) -> Result<SignatureFile> {
        let mut file = SignatureFile::new(*digest);
        for seed in seeds {
            file.add(&key(*seed))?;
        }
        Ok(file)
    }

    fn code(result: Result<SignerEvidence>) -> &'static str {
        match result {
            Ok(_) => "OK",
            Err(err) => err.code(),
        }
    }

    #[test]
    fn threshold_k_of_n() -> Result<()> {
        let digest = Sha256Digest::of(b"manifest");
        let two_of_three = policy(&[1, 2, 3], 2)?;
        assert_eq!(
            code(two_of_three.evaluate(&digest, Some(&signed(&digest, &[1, 2])?))),
            "OK"
        );
        assert_eq!(
            code(two_of_three.evaluate(&digest, Some(&signed(&digest, &[3, 1, 2])?))),
            "OK"
        );
        assert_eq!(
            code(two_of_three.evaluate(&digest, Some(&signed(&digest, &[1])?))),
            "DPONE_BUNDLE_THRESHOLD_NOT_MET"
        );
        assert_eq!(
            code(two_of_three.evaluate(&digest, None)),
            "DPONE_BUNDLE_UNSIGNED"
        );
        assert_eq!(
            code(two_of_three.evaluate(&digest, Some(&signed(&digest, &[])?))),
            "DPONE_BUNDLE_UNSIGNED"
        );
        Ok(())
    }

    #[test]
    fn duplicate_signatures_by_one_key_count_once() -> Result<()> {
        let digest = Sha256Digest::of(b"manifest");
        let two_of_two = policy(&[1, 2], 2)?;
        let mut file = signed(&digest, &[1])?;
        let again = file.signatures[0].clone();
        file.signatures.push(again.clone());
        file.signatures.push(again);
        assert_eq!(
            code(two_of_two.evaluate(&digest, Some(&file))),
            "DPONE_BUNDLE_THRESHOLD_NOT_MET"
        );
        Ok(())
    }

    #[test]
    fn unlisted_keys_never_count_and_are_reported() -> Result<()> {
        let digest = Sha256Digest::of(b"manifest");
        let one_of_one = policy(&[1], 1)?;
        assert_eq!(
            code(one_of_one.evaluate(&digest, Some(&signed(&digest, &[8, 9])?))),
            "DPONE_BUNDLE_SIGNER_UNTRUSTED"
        );
        let evidence = one_of_one.evaluate(&digest, Some(&signed(&digest, &[9, 1])?))?;
        assert_eq!(evidence.signers, vec![key(1).public_key()?.id().clone()]);
        assert_eq!(evidence.ignored, vec![key(9).public_key()?.id().clone()]);
        let two_of_two = policy(&[1, 2], 2)?;
        assert_eq!(
            code(two_of_two.evaluate(&digest, Some(&signed(&digest, &[1, 7, 8])?))),
            "DPONE_BUNDLE_THRESHOLD_NOT_MET"
        );
        Ok(())
    }

    #[test]
    fn a_bad_signature_by_a_listed_key_refuses_even_above_threshold() -> Result<()> {
        let digest = Sha256Digest::of(b"manifest");
        let one_of_two = policy(&[1, 2], 1)?;
        let mut file = signed(&digest, &[1, 2])?;
        let second = key(2).public_key()?.id().clone();
        for entry in file.signatures.iter_mut().filter(|s| s.key_id == second) {
            entry.signature[0] ^= 1;
        }
        assert_eq!(
            code(one_of_two.evaluate(&digest, Some(&file))),
            "DPONE_BUNDLE_SIGNATURE_INVALID"
        );
        Ok(())
    }

    #[test]
    fn signatures_bind_the_manifest_digest() -> Result<()> {
        let digest = Sha256Digest::of(b"manifest");
        let other = Sha256Digest::of(b"other manifest");
        let one_of_one = policy(&[1], 1)?;
        // A signature file for another manifest.
        assert_eq!(
            code(one_of_one.evaluate(&digest, Some(&signed(&other, &[1])?))),
            "DPONE_BUNDLE_SIGNATURES_MANIFEST_MISMATCH"
        );
        // A signature made over another digest, relabelled for this manifest.
        let mut moved = signed(&other, &[1])?;
        moved.manifest_sha256 = digest;
        assert_eq!(
            code(one_of_one.evaluate(&digest, Some(&moved))),
            "DPONE_BUNDLE_SIGNATURE_INVALID"
        );
        Ok(())
    }

    #[test]
    fn policies_that_would_fail_open_do_not_exist() -> Result<()> {
        assert_eq!(
            policy(&[], 1).err().map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_INVALID")
        );
        assert_eq!(
            policy(&[1], 0).err().map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_INVALID")
        );
        assert_eq!(
            policy(&[1, 2], 3).err().map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_INVALID")
        );
        assert_eq!(
            policy(&[1, 1], 1).err().map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_DUPLICATE_SIGNER")
        );
        Ok(())
    }

    #[test]
    fn parse_round_trip_and_strictness() -> Result<()> {
        let original = policy(&[1, 2], 2)?;
        let bytes = original.to_json_bytes()?;
        let parsed = TrustPolicy::parse(&bytes)?;
        assert_eq!(parsed.threshold(), 2);
        assert_eq!(parsed.sha256(), original.sha256());

        let text = String::from_utf8_lossy(&bytes).to_string();
        let with_extra = text.replacen("{", "{\"allow_unsigned\":true,", 1);
        assert_eq!(
            TrustPolicy::parse(with_extra.as_bytes())
                .err()
                .map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_UNKNOWN_FIELD")
        );
        let dup = text.replacen("{", "{\"schema\":\"x\",", 1);
        assert_eq!(
            TrustPolicy::parse(dup.as_bytes()).err().map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_DUPLICATE_KEY")
        );
        let other_id = key(3).public_key()?.id().to_string();
        let first_id = key(1).public_key()?.id().to_string();
        let wrong_id = text.replacen(&first_id, &other_id, 1);
        assert_eq!(
            TrustPolicy::parse(wrong_id.as_bytes())
                .err()
                .map(|e| e.code()),
            Some("DPONE_TRUST_POLICY_KEY_ID_MISMATCH")
        );
        Ok(())
    }
}
