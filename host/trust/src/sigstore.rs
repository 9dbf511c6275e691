//! Sigstore bundles verified offline against a pinned trusted root.
//!
//! The cryptographic checks are those of the `sigstore-verify` crate (chosen by measurement on
//! the Sigstore conformance suite, see `docs/signature-verification.md`): bundle media types
//! v0.1, v0.2 and both v0.3 spellings; message signatures and DSSE envelopes; Rekor v1 entries
//! with inclusion proof, signed checkpoint and signed entry timestamp; Rekor v2 entries with
//! checkpoints; RFC 3161 timestamps; certificate chain to a Fulcio authority valid at every
//! verified signing time, SCTs; managed keys. This module adds what the host needs around it:
//! bounded reading, an exact identity policy (certificate SAN and OIDC issuer compared for
//! equality, no patterns), trust roots only through [`PinnedTrustedRoot`], stable codes and
//! evidence.

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::{SigstoreFault, TrustError};
use crate::trusted_root::PinnedTrustedRoot;
use serde_json::{Value, json};
use sigstore_verify::types::{
    ArtifactDigest, Bundle, DerPublicKey, HashAlgorithm, SignatureContent,
};
use sigstore_verify::{
    Policy, PublicKeyVerificationPolicy, VerificationPolicy, VerificationResult,
};

/// Largest accepted Sigstore bundle (one JSON document).
pub const MAX_SIGSTORE_BUNDLE_BYTES: usize = 16 * 1024 * 1024;

/// What was signed: the artifact bytes or a digest of them.
#[derive(Clone, Copy, Debug)]
pub enum Artifact<'a> {
    /// The artifact bytes.
    Bytes(&'a [u8]),
    /// `sha256:<hex>`.
    Sha256(Sha256Digest),
    /// `sha512:<hex>` (in-toto subjects may only carry a SHA-512 digest).
    Sha512([u8; 64]),
}

impl Artifact<'static> {
    /// Parses `sha256:<64 hex>` or `sha512:<128 hex>` (lowercase); `None` otherwise.
    pub fn parse_digest(text: &str) -> Option<Self> {
        if let Some(hex) = text.strip_prefix("sha256:") {
            return Sha256Digest::parse_hex(hex).map(Self::Sha256);
        }
        let hex = text.strip_prefix("sha512:")?;
        if hex.len() != 128
            || !hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return None;
        }
        let mut out = [0u8; 64];
        hex::decode_to_slice(hex, &mut out).ok()?;
        Some(Self::Sha512(out))
    }
}

impl<'a> Artifact<'a> {
    fn to_sigstore(self) -> Result<sigstore_verify::types::Artifact<'a>> {
        Ok(match self {
            Self::Bytes(bytes) => sigstore_verify::types::Artifact::from_blob(bytes),
            Self::Sha256(digest) => sigstore_verify::types::Artifact::from_digest(
                ArtifactDigest::new(HashAlgorithm::Sha2256, digest.as_bytes().to_vec())
                    .map_err(|err| sigstore_err(SigstoreFault::ArtifactInvalid, err.to_string()))?,
            ),
            Self::Sha512(digest) => sigstore_verify::types::Artifact::from_digest(
                ArtifactDigest::new(HashAlgorithm::Sha2512, digest.to_vec())
                    .map_err(|err| sigstore_err(SigstoreFault::ArtifactInvalid, err.to_string()))?,
            ),
        })
    }
}

/// Who must have signed.
#[derive(Clone, Debug)]
pub enum Signer {
    /// A Fulcio certificate whose SAN equals `identity` and whose OIDC issuer extension equals
    /// `issuer`, both byte for byte.
    Identity {
        /// Exact certificate SAN (URI or email).
        identity: String,
        /// Exact OIDC issuer URL.
        issuer: String,
    },
    /// A managed key (SubjectPublicKeyInfo PEM), as `--key` of the conformance protocol.
    PublicKey {
        /// The PEM text.
        pem: String,
    },
}

/// What a successful verification established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SigstoreOutcome {
    /// Bundle media type.
    pub media_type: String,
    /// `message_signature` or `dsse`.
    pub content: &'static str,
    /// The certificate SAN that matched, for certificate bundles.
    pub identity: Option<String>,
    /// The OIDC issuer that matched, for certificate bundles.
    pub issuer: Option<String>,
    /// Whether a managed key was used instead of a certificate.
    pub managed_key: bool,
    /// Certificate chain, validity and usage checked.
    pub certificate_verified: bool,
    /// The certificate's SCT checked.
    pub sct_verified: bool,
    /// Transparency log inclusion (proof, checkpoint) checked.
    pub tlog_verified: bool,
    /// Log entries in the bundle.
    pub tlog_entries: usize,
    /// RFC 3161 timestamps in the bundle (each one verified).
    pub rfc3161_timestamps: usize,
    /// Every authenticated signing time, as Unix seconds.
    pub verified_times: Vec<i64>,
    /// SHA-256 of the trusted root file used.
    pub trusted_root_sha256: Sha256Digest,
    /// Whether that digest matched a pin.
    pub trusted_root_pinned: bool,
}

impl SigstoreOutcome {
    /// The outcome as JSON (stable field names).
    pub fn to_json(&self) -> Value {
        json!({
            "media_type": self.media_type,
            "content": self.content,
            "identity": self.identity,
            "issuer": self.issuer,
            "managed_key": self.managed_key,
            "certificate_verified": self.certificate_verified,
            "sct_verified": self.sct_verified,
            "tlog_verified": self.tlog_verified,
            "tlog_entries": self.tlog_entries,
            "rfc3161_timestamps": self.rfc3161_timestamps,
            "verified_times": self.verified_times,
            "trusted_root_sha256": self.trusted_root_sha256.to_hex(),
            "trusted_root_pinned": self.trusted_root_pinned,
        })
    }
}

pub(crate) fn sigstore_err(fault: SigstoreFault, detail: impl Into<String>) -> TrustError {
    TrustError::Sigstore {
        fault,
        detail: dpone_boundary::text::clean_message(&detail.into()),
    }
}

/// Parses one Sigstore bundle (bounded, UTF-8 JSON of a known media type).
pub fn parse_bundle(bytes: &[u8]) -> Result<Bundle> {
    if bytes.len() > MAX_SIGSTORE_BUNDLE_BYTES {
        return Err(sigstore_err(
            SigstoreFault::BundleMalformed,
            format!("larger than {MAX_SIGSTORE_BUNDLE_BYTES} bytes"),
        ));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|_| sigstore_err(SigstoreFault::BundleMalformed, "not UTF-8"))?;
    Bundle::from_json(text)
        .map_err(|err| sigstore_err(SigstoreFault::BundleMalformed, err.to_string()))
}

/// Verifies a Sigstore bundle for `artifact`, signed as `signer` requires, against `root`.
pub fn verify(
    bundle_bytes: &[u8],
    artifact: Artifact<'_>,
    signer: &Signer,
    root: &PinnedTrustedRoot,
) -> Result<SigstoreOutcome> {
    verify_input(
        bundle_bytes,
        ArtifactInput::Artifact(artifact),
        signer,
        root,
    )
}

/// [`verify`] of an artifact read to its end in constant memory (it is hashed as a stream,
/// never held whole). Bundle-only checks run before anything is read. A message signature of a
/// scheme that cannot verify a prehashed message (Ed25519) is refused as `ArtifactInvalid`.
pub fn verify_reader(
    bundle_bytes: &[u8],
    reader: &mut dyn std::io::Read,
    signer: &Signer,
    root: &PinnedTrustedRoot,
) -> Result<SigstoreOutcome> {
    verify_input(bundle_bytes, ArtifactInput::Reader(reader), signer, root)
}

/// What is verified: bytes or a digest, or a reader hashed as a stream.
enum ArtifactInput<'a, 'r> {
    Artifact(Artifact<'a>),
    Reader(&'r mut dyn std::io::Read),
}

fn verify_input(
    bundle_bytes: &[u8],
    artifact: ArtifactInput<'_, '_>,
    signer: &Signer,
    root: &PinnedTrustedRoot,
) -> Result<SigstoreOutcome> {
    let bundle = parse_bundle(bundle_bytes)?;
    let result = match signer {
        Signer::Identity { identity, issuer } => {
            if identity.is_empty() || issuer.is_empty() {
                return Err(sigstore_err(
                    SigstoreFault::IdentityMismatch,
                    "an empty identity or issuer matches nothing",
                ));
            }
            let policy = VerificationPolicy::new(identity.as_str(), issuer.as_str());
            run_input(&bundle, artifact, &policy, root)?
        }
        Signer::PublicKey { pem } => {
            let key = DerPublicKey::from_pem(pem)
                .map_err(|err| sigstore_err(SigstoreFault::KeyInvalid, err.to_string()))?;
            run_input(
                &bundle,
                artifact,
                &PublicKeyVerificationPolicy::new(key),
                root,
            )?
        }
    };
    Ok(outcome(
        &bundle,
        &result,
        matches!(signer, Signer::PublicKey { .. }),
        root,
    ))
}

/// Runs the verifier over an artifact or a reader.
fn run_input(
    bundle: &Bundle,
    artifact: ArtifactInput<'_, '_>,
    policy: &(impl Policy + ?Sized),
    root: &PinnedTrustedRoot,
) -> Result<VerificationResult> {
    match artifact {
        ArtifactInput::Artifact(artifact) => run(bundle, artifact, policy, root),
        ArtifactInput::Reader(reader) => root
            .verifier()
            .verify_reader(reader, bundle, policy)
            .map_err(map_error),
    }
}

/// Runs the verifier with an explicit policy.
pub(crate) fn run(
    bundle: &Bundle,
    artifact: Artifact<'_>,
    policy: &(impl Policy + ?Sized),
    root: &PinnedTrustedRoot,
) -> Result<VerificationResult> {
    root.verifier()
        .verify(artifact.to_sigstore()?, bundle, policy)
        .map_err(map_error)
}

pub(crate) fn outcome(
    bundle: &Bundle,
    result: &VerificationResult,
    managed_key: bool,
    root: &PinnedTrustedRoot,
) -> SigstoreOutcome {
    SigstoreOutcome {
        media_type: bundle.media_type.as_str().to_owned(),
        content: match &bundle.content {
            SignatureContent::DsseEnvelope(_) => "dsse",
            _ => "message_signature",
        },
        identity: result.identity().map(|san| san.as_str().to_owned()),
        issuer: result.issuer().map(str::to_owned),
        managed_key,
        certificate_verified: result.certificate_verified(),
        sct_verified: result.sct_verified(),
        tlog_verified: result.tlog_verified(),
        tlog_entries: bundle.verification_material.tlog_entries.len(),
        rfc3161_timestamps: bundle
            .verification_material
            .timestamp_verification_data
            .rfc3161_timestamps
            .len(),
        verified_times: result
            .verified_timestamps()
            .iter()
            .map(|t| t.as_second())
            .collect(),
        trusted_root_sha256: *root.sha256(),
        trusted_root_pinned: root.is_pinned(),
    }
}

/// Maps the verifier's error categories onto stable codes.
pub(crate) fn map_error(err: sigstore_verify::Error) -> TrustError {
    use sigstore_verify::Error as E;
    let fault = match &err {
        E::IdentityMismatch { .. } => SigstoreFault::IdentityMismatch,
        E::IssuerMismatch { .. } => SigstoreFault::IssuerMismatch,
        E::SignatureInvalid(_) => SigstoreFault::SignatureInvalid,
        E::ArtifactMismatch(_) => SigstoreFault::ArtifactMismatch,
        E::UnsupportedArtifact(_) | E::UnsupportedBundle(_) => SigstoreFault::Unsupported,
        E::Certificate(_) => SigstoreFault::CertificateInvalid,
        E::TransparencyLog(_) => SigstoreFault::TlogInvalid,
        E::Timestamp(_) => SigstoreFault::TimestampInvalid,
        E::InvalidTrustRoot(_) | E::TrustRoot(_) | E::TrustedCertificate(_) => {
            SigstoreFault::TrustedRootUnusable
        }
        E::ArtifactRead(_) => SigstoreFault::ArtifactInvalid,
        _ => SigstoreFault::BundleInvalid,
    };
    sigstore_err(fault, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_arguments() {
        let hex = "a".repeat(64);
        assert!(matches!(
            Artifact::parse_digest(&format!("sha256:{hex}")),
            Some(Artifact::Sha256(_))
        ));
        assert!(matches!(
            Artifact::parse_digest(&format!("sha512:{}", "b".repeat(128))),
            Some(Artifact::Sha512(_))
        ));
        assert!(Artifact::parse_digest(&format!("sha256:{}", "A".repeat(64))).is_none());
        assert!(Artifact::parse_digest("sha256:abc").is_none());
        assert!(Artifact::parse_digest("md5:abc").is_none());
    }

    #[test]
    fn malformed_bundles_are_bad_input() {
        let err = parse_bundle(b"{").err();
        assert_eq!(
            err.as_ref().map(TrustError::code),
            Some("DPONE_SIGSTORE_BUNDLE_MALFORMED")
        );
        assert_eq!(
            err.map(|e| e.class()),
            Some(crate::error::ErrorClass::BadInput)
        );
    }
}
