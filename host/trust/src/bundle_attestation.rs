//! GitHub Artifact Attestations as bundle signers: the CI system that built a bundle attests its
//! manifest, and a trust policy (`dpone.trust-policy.v2`) may count that attestation towards its
//! k-of-n threshold beside ed25519 keys.
//!
//! **In the bundle.** An attestation travels inside the bundle, outside the manifest (like
//! `signatures.json`, it signs the manifest and so cannot be listed in it):
//!
//! ```text
//! attestations/<stem>.sigstore.json          a Sigstore bundle: DSSE, in-toto Statement v1,
//!                                            SLSA provenance v1, subject sha256(manifest.json)
//! attestations/<sha256>.trusted_root.json    a Sigstore trusted root, named by its own sha256
//! ```
//!
//! At most [`MAX_ATTESTATION_FILES`] attestations and [`MAX_TRUSTED_ROOT_FILES`] trusted roots,
//! each at most 1 MiB. A trusted root inside the bundle grants nothing by itself: an identity
//! uses only the file named by the sha256 it pins, and that file's bytes must hash to the pin.
//!
//! **In the trust policy.** An [`AttestationIdentity`] pins, all required: OIDC issuer, signer
//! workflow and the 40-hex commit it ran from, source repository `owner/repo` with the numeric
//! ids of the repository and of its owner, the source ref, the runner environment and the
//! trusted root's sha256. The predicate type is always SLSA provenance v1 (the shape of
//! `actions/attest-build-provenance`). Its signer identity is the composite
//! `https://github.com/{signer_workflow}@{signer_digest}`; a policy lists each at most once.
//!
//! **Counting** ([`evaluate`]) mirrors the ed25519 rules:
//! - an attestation whose certificate names (unverified) the signer identity of a listed
//!   identity must verify completely under that identity, or the bundle is refused outright
//!   with the attestation's own code, even when the threshold is met without it;
//! - an attestation naming no listed identity, or carrying a public key instead of a
//!   certificate, is ignored and reported (`ignored_attestations`), never counted;
//! - each listed identity counts at most once however many attestations it made.
//!
//! The statement is parsed strictly (duplicate keys refuse, see [`crate::attestation`]).

use crate::Result;
use crate::attestation::{self, AttestationPolicy, SLSA_PROVENANCE_V1, SubjectDigest};
use crate::bundle::BundleFiles;
use crate::digest::Sha256Digest;
use crate::error::{Document, TrustError, shown};
use crate::json::Fields;
use crate::nonproduction_signature::{is_hex, is_https_url, is_repository, is_workflow};
use crate::sigstore;
use crate::trusted_root::PinnedTrustedRoot;
use serde_json::{Value, json};
use sigstore_verify::types::bundle::VerificationMaterialContent;
use std::collections::BTreeMap;

/// The directory of attestation files in a bundle.
pub const ATTESTATIONS_DIR: &str = "attestations";
/// Suffix of an attestation bundle file.
pub const ATTESTATION_SUFFIX: &str = ".sigstore.json";
/// Suffix of a trusted root file (its stem is the file's sha256).
pub const TRUSTED_ROOT_SUFFIX: &str = ".trusted_root.json";
/// Most attestation bundles a bundle may carry.
pub const MAX_ATTESTATION_FILES: usize = 8;
/// Most trusted roots a bundle may carry.
pub const MAX_TRUSTED_ROOT_FILES: usize = 4;
/// Largest attestation bundle file (real ones are about 10 KiB).
pub const MAX_ATTESTATION_BYTES: u64 = 1024 * 1024;
/// Most attestation identities a trust policy may list.
pub const MAX_IDENTITIES: usize = 16;

/// Runner environments an identity may pin (extension .11).
pub const RUNNER_ENVIRONMENTS: [&str; 2] = ["github-hosted", "self-hosted"];

/// The bundle-relative name of the trusted root file an identity pinning `sha256` uses.
pub fn trusted_root_file(sha256: &Sha256Digest) -> String {
    format!(
        "{ATTESTATIONS_DIR}/{}{TRUSTED_ROOT_SUFFIX}",
        sha256.to_hex()
    )
}

/// A CI workflow identity a trust policy accepts as a bundle signer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttestationIdentity {
    /// OIDC issuer (extension .8).
    pub issuer: String,
    /// Signer workflow `owner/repo/.github/workflows/<file>` (extension .9 before `@`).
    pub signer_workflow: String,
    /// The 40-hex commit the signer workflow ran from (extension .10).
    pub signer_digest: String,
    /// Source repository `owner/repo` (extensions .12 and .16).
    pub repository: String,
    /// Numeric id of the source repository (extension .15).
    pub repository_id: String,
    /// Numeric id of the repository owner (extension .17).
    pub owner_id: String,
    /// Source ref, e.g. `refs/heads/main` (extension .14).
    pub git_ref: String,
    /// Runner environment, `github-hosted` or `self-hosted` (extension .11).
    pub runner_environment: String,
    /// sha256 of the trusted root file the attestation is verified against.
    pub trusted_root_sha256: Sha256Digest,
}

/// The JSON field names of an identity in the trust policy.
pub(crate) const IDENTITY_FIELDS: &[&str] = &[
    "issuer",
    "signer_workflow",
    "signer_digest",
    "repository",
    "repository_id",
    "owner_id",
    "ref",
    "runner_environment",
    "trusted_root_sha256",
];

fn is_numeric_id(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 20
        && text.bytes().all(|b| b.is_ascii_digit())
        && !(text.len() > 1 && text.starts_with('0'))
}

fn is_ref(text: &str) -> bool {
    text.len() <= 256
        && text
            .strip_prefix("refs/")
            .is_some_and(|rest| !rest.is_empty())
        && text.bytes().all(|b| b.is_ascii_graphic() && b != b'*')
        && !text.contains("..")
}

impl AttestationIdentity {
    /// `https://github.com/{signer_workflow}@{signer_digest}`.
    pub fn signer_identity(&self) -> String {
        format!(
            "https://github.com/{}@{}",
            self.signer_workflow, self.signer_digest
        )
    }

    /// Parses one identity of a trust policy (`path` names it in errors).
    pub(crate) fn parse(fields: &Fields<'_>) -> Result<Self> {
        let text = |key: &str, ok: fn(&str) -> bool, rule: &str| -> Result<String> {
            let value = fields.str(key)?;
            if ok(value) {
                Ok(value.to_owned())
            } else {
                Err(fields.invalid(key, rule))
            }
        };
        Ok(Self {
            issuer: text("issuer", is_https_url, "expected an https URL")?,
            signer_workflow: text(
                "signer_workflow",
                is_workflow,
                "expected owner/repo/.github/workflows/<file>.yml",
            )?,
            signer_digest: text(
                "signer_digest",
                |t| is_hex(t, 40),
                "expected the 40-hex commit of the signer workflow",
            )?,
            repository: text("repository", is_repository, "expected owner/repo")?,
            repository_id: text("repository_id", is_numeric_id, "expected a numeric id")?,
            owner_id: text("owner_id", is_numeric_id, "expected a numeric id")?,
            git_ref: text("ref", is_ref, "expected a full ref, e.g. refs/heads/main")?,
            runner_environment: text(
                "runner_environment",
                |t| RUNNER_ENVIRONMENTS.contains(&t),
                "expected github-hosted or self-hosted",
            )?,
            trusted_root_sha256: Sha256Digest::parse_hex(fields.str("trusted_root_sha256")?)
                .ok_or_else(|| {
                    fields.invalid(
                        "trusted_root_sha256",
                        "expected 64 lowercase hexadecimal characters",
                    )
                })?,
        })
    }

    /// The identity as trust policy JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "issuer": self.issuer,
            "signer_workflow": self.signer_workflow,
            "signer_digest": self.signer_digest,
            "repository": self.repository,
            "repository_id": self.repository_id,
            "owner_id": self.owner_id,
            "ref": self.git_ref,
            "runner_environment": self.runner_environment,
            "trusted_root_sha256": self.trusted_root_sha256.to_hex(),
        })
    }

    /// Checks an identity built in code the way [`Self::parse`] checks a file's.
    pub(crate) fn validate(&self) -> Result<()> {
        let bytes = crate::json::canonical_bytes(&self.to_json())?;
        let value = crate::json::parse_strict(Document::TrustPolicy, &bytes, 64 * 1024, false)?;
        let fields = Fields::new(Document::TrustPolicy, "$", &value, IDENTITY_FIELDS)?;
        Self::parse(&fields).map(|_| ())
    }

    fn policy(&self) -> AttestationPolicy {
        let owner = self
            .repository
            .split_once('/')
            .map(|(owner, _)| owner.to_owned());
        AttestationPolicy {
            issuer: self.issuer.clone(),
            certificate_identity: None,
            signer_workflow: Some(self.signer_workflow.clone()),
            signer_digest: Some(self.signer_digest.clone()),
            source_repository: Some(self.repository.clone()),
            require_github_hosted_runner: false,
            runner_environment: Some(self.runner_environment.clone()),
            source_repository_ref: Some(self.git_ref.clone()),
            source_repository_id: Some(self.repository_id.clone()),
            source_repository_owner: owner,
            source_repository_owner_id: Some(self.owner_id.clone()),
            predicate_type: SLSA_PROVENANCE_V1.to_owned(),
        }
    }
}

/// One listed identity whose attestation verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttestedSigner {
    /// The composite signer identity.
    pub signer_identity: String,
    /// The bundle-relative attestation file that verified.
    pub file: String,
    /// Source repository URI (extension .12).
    pub source_repository: String,
    /// Source ref (extension .14).
    pub source_ref: String,
    /// The sha256 of the trusted root used.
    pub trusted_root_sha256: String,
    /// Authenticated signing times, Unix seconds.
    pub verified_times: Vec<i64>,
}

impl AttestedSigner {
    /// The signer as JSON (stable field names).
    pub fn to_json(&self) -> Value {
        json!({
            "signer_identity": self.signer_identity,
            "file": self.file,
            "source_repository": self.source_repository,
            "ref": self.source_ref,
            "trusted_root_sha256": self.trusted_root_sha256,
            "verified_times": self.verified_times,
        })
    }
}

/// What the attestations of a bundle contributed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AttestationEvidence {
    /// Listed identities whose attestation verified, by signer identity.
    pub signers: Vec<AttestedSigner>,
    /// Attestation files that name no listed identity (ignored, never counted).
    pub ignored: Vec<String>,
    /// Attestation files present in the bundle.
    pub present: usize,
}

/// The attestation files of a bundle, in name order.
pub fn attestation_files(files: &BundleFiles) -> impl Iterator<Item = (&str, &[u8])> {
    files.iter().filter(|(name, _)| {
        name.strip_prefix(ATTESTATIONS_DIR)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| rest.ends_with(ATTESTATION_SUFFIX))
            && !name.ends_with(TRUSTED_ROOT_SUFFIX)
    })
}

/// The composite signer identity a certificate claims, before anything is verified.
fn claimed_identity(bundle: &sigstore_verify::types::Bundle) -> Option<String> {
    let cert = bundle.signing_certificate()?;
    let info = sigstore_verify::crypto::parse_certificate_info(cert).ok()?;
    let uri = info.ci_claims.build_signer_uri?;
    let digest = info.ci_claims.build_signer_digest?;
    let (workflow, _) = uri.strip_prefix("https://github.com/")?.split_once('@')?;
    Some(format!("https://github.com/{workflow}@{digest}"))
}

/// Verifies the attestations of a bundle whose manifest has `manifest_sha256` against the
/// identities a trust policy lists. Refuses outright when an attestation naming a listed
/// identity does not verify under it.
pub fn evaluate(
    identities: &[AttestationIdentity],
    manifest_sha256: &Sha256Digest,
    files: &BundleFiles,
) -> Result<AttestationEvidence> {
    let by_identity: BTreeMap<String, &AttestationIdentity> = identities
        .iter()
        .map(|identity| (identity.signer_identity(), identity))
        .collect();
    let subject = SubjectDigest::Sha256(*manifest_sha256);
    let mut signers: BTreeMap<String, AttestedSigner> = BTreeMap::new();
    let mut evidence = AttestationEvidence::default();
    for (name, bytes) in attestation_files(files) {
        evidence.present += 1;
        let parsed = sigstore::parse_bundle(bytes)?;
        let listed = match &parsed.verification_material.content {
            VerificationMaterialContent::PublicKey(_) => None,
            _ => claimed_identity(&parsed).and_then(|claimed| by_identity.get(&claimed)),
        };
        let Some(identity) = listed else {
            evidence.ignored.push(name.to_owned());
            continue;
        };
        let root_name = trusted_root_file(&identity.trusted_root_sha256);
        let root_bytes = files
            .get(&root_name)
            .ok_or_else(|| TrustError::FileMissing {
                name: shown(&root_name),
            })?;
        let root = PinnedTrustedRoot::from_bytes(root_bytes, &[identity.trusted_root_sha256])?;
        let outcome = attestation::verify(bytes, &subject, &identity.policy(), &root)?;
        let signer_identity = identity.signer_identity();
        if outcome.signer_identity.as_deref() != Some(signer_identity.as_str()) {
            return Err(TrustError::Attestation {
                fault: crate::error::AttestationFault::SignerMismatch,
                detail: format!(
                    "attestation `{}` verified as {:?}, not as the listed identity",
                    shown(name),
                    outcome.signer_identity.as_deref().map(shown)
                ),
            });
        }
        signers
            .entry(signer_identity.clone())
            .or_insert_with(|| AttestedSigner {
                signer_identity,
                file: name.to_owned(),
                source_repository: outcome.source_repository.unwrap_or_default(),
                source_ref: outcome.source_repository_ref.unwrap_or_default(),
                trusted_root_sha256: root.sha256().to_hex(),
                verified_times: outcome.sigstore.verified_times,
            });
    }
    evidence.signers = signers.into_values().collect();
    Ok(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_refs() {
        assert!(is_numeric_id("763287532"));
        assert!(is_numeric_id("0"));
        assert!(!is_numeric_id("0763"));
        assert!(!is_numeric_id(""));
        assert!(!is_numeric_id("12a"));
        assert!(is_ref("refs/heads/main"));
        assert!(is_ref("refs/tags/v1.2.3"));
        assert!(!is_ref("main"));
        assert!(!is_ref("refs/"));
        assert!(!is_ref("refs/heads/*"));
        assert!(!is_ref("refs/heads/a b"));
    }

    #[test]
    fn trusted_roots_are_named_by_their_digest() {
        let digest = Sha256Digest::of(b"root");
        assert_eq!(
            trusted_root_file(&digest),
            format!("attestations/{}.trusted_root.json", digest.to_hex())
        );
    }
}
