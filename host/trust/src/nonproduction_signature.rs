//! The nonproduction authority's signature adapter, closed to GitHub Artifact Attestations.
//!
//! A nonproduction authority document (spec 004) is authenticated by one GitHub Artifact
//! Attestation whose subject is the document's bytes. The external policy pins everything that
//! decides who may sign ([`SignaturePins`]); the caller hands over the bundle, the trusted root
//! bytes and the document bytes; [`verify`] answers with the verified canonical signer identity
//! `https://github.com/{signer_workflow}@{signer_digest}` and the subject digest
//! ([`VerifiedSigner`]), or refuses with a stable code.
//!
//! What it adds to [`crate::attestation::verify`], which it calls unchanged:
//!
//! - **Every pin is required** and well formed before anything is read
//!   (`DPONE_NP_SIGNATURE_PINS_INVALID`): issuer, trusted-root sha256, source repository
//!   `owner/repo` (exact; never "any repository calling a reusable workflow"), predicate type,
//!   signer workflow `owner/repo/.github/workflows/<file>` and its 40-hex commit, and the
//!   hosted-runner requirement (a boolean the policy states either way).
//! - **The trusted root is pinned**: its bytes must hash to the pin
//!   (`DPONE_TRUST_ROOT_DIGEST_MISMATCH`); there is no unpinned path.
//! - **Certificates only**: a bundle whose verification material is a public key (a cosign key
//!   bundle) is refused with `DPONE_NP_SIGNATURE_PUBLIC_KEY_BUNDLE` before any cryptography:
//!   possession of a key does not authenticate the issuer and identity labels.
//! - **The subject is the document**: the statement must name `sha256(document)`
//!   (`DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH` otherwise).
//! - The composite identity is read from the verified certificate (extensions .9 and .10) and
//!   must equal the pins (`DPONE_NP_SIGNATURE_SIGNER_IDENTITY_MISMATCH`, a defence in depth
//!   behind the attestation checks).
//!
//! Each remaining refusal keeps its attestation or Sigstore code: wrong signer workflow
//! (`DPONE_ATTESTATION_SIGNER_MISMATCH`), signer digest (`..._SIGNER_DIGEST_MISMATCH`), issuer
//! (`..._ISSUER_MISMATCH`), repository (`..._REPOSITORY_MISMATCH`), runner
//! (`..._RUNNER_ENVIRONMENT_MISMATCH`), predicate (`..._PREDICATE_TYPE_MISMATCH`), a statement
//! that is not strict JSON (`DPONE_ATTESTATION_STATEMENT_*`), a signature that does not verify
//! (`DPONE_SIGSTORE_SIGNATURE_INVALID`), a timestamp that does not (`..._TIMESTAMP_INVALID`).
//!
//! Verification consumes nothing and reads no clock of its own beyond the verifier's use of
//! the authenticated timestamps. Re-checking the policy, revocation epoch and clock after this
//! answer is the caller's job (the contracts crate).

use crate::Result;
use crate::attestation::{self, AttestationPolicy, SubjectDigest};
use crate::digest::Sha256Digest;
use crate::error::{NpSignatureFault, TrustError, shown};
use crate::sigstore;
use crate::trusted_root::PinnedTrustedRoot;
use serde_json::{Value, json};
use sigstore_verify::types::bundle::VerificationMaterialContent;

/// Longest accepted pin string (issuer, predicate type, workflow).
pub const MAX_PIN_CHARS: usize = 512;

/// What the external policy pins. Every field is required.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SignaturePins {
    /// OIDC issuer (extension .8), e.g. `https://token.actions.githubusercontent.com`.
    pub issuer: String,
    /// sha256 of the trusted root file's bytes, 64 lowercase hex.
    pub trusted_root_sha256: String,
    /// Source repository `owner/repo` (extension .12 must be `https://github.com/owner/repo`).
    pub repository: String,
    /// Predicate type of the in-toto statement.
    pub predicate_type: String,
    /// Signer workflow `owner/repo/.github/workflows/<file>` (extension .9 before `@`).
    pub signer_workflow: String,
    /// Commit the signer workflow ran from (extension .10), 40 lowercase hex.
    pub signer_digest: String,
    /// Require the runner environment (extension .11) to be `github-hosted`.
    pub require_github_hosted_runner: bool,
}

/// What a successful verification established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedSigner {
    /// `https://github.com/{signer_workflow}@{signer_digest}`, from the verified certificate.
    pub signer_identity: String,
    /// `sha256:<hex>` of the document, the attestation's subject.
    pub subject_digest: String,
    /// Source repository URI (extension .12).
    pub source_repository: String,
    /// Build signer URI (extension .9), with the workflow's ref.
    pub build_signer_uri: String,
    /// Runner environment (extension .11), when present.
    pub runner_environment: Option<String>,
    /// Predicate type of the statement.
    pub predicate_type: String,
    /// sha256 of the trusted root bytes used (equal to the pin).
    pub trusted_root_sha256: String,
    /// The Sigstore instance whose thresholds applied (`github`, `public-good` or `custom`).
    pub instance: &'static str,
    /// Every authenticated signing time, Unix seconds.
    pub verified_times: Vec<i64>,
}

impl VerifiedSigner {
    /// The outcome as JSON for evidence (stable field names).
    pub fn to_json(&self) -> Value {
        json!({
            "signer_identity": self.signer_identity,
            "subject_digest": self.subject_digest,
            "source_repository": self.source_repository,
            "build_signer_uri": self.build_signer_uri,
            "runner_environment": self.runner_environment,
            "predicate_type": self.predicate_type,
            "trusted_root_sha256": self.trusted_root_sha256,
            "instance": self.instance,
            "verified_times": self.verified_times,
        })
    }
}

fn refuse(fault: NpSignatureFault, detail: impl Into<String>) -> TrustError {
    TrustError::NpSignature {
        fault,
        detail: dpone_boundary::text::clean_message(&detail.into()),
    }
}

fn pins_invalid(field: &str, rule: &str) -> TrustError {
    refuse(
        NpSignatureFault::PinsInvalid,
        format!("pin `{field}` {rule}"),
    )
}

/// A GitHub owner or repository name: ASCII letters, digits, `-`, `_`, `.`; not `.` or `..`.
fn is_name(segment: &str) -> bool {
    !segment.is_empty()
        && segment.len() <= 100
        && segment != "."
        && segment != ".."
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `owner/repo`, both GitHub names.
pub(crate) fn is_repository(text: &str) -> bool {
    text.split_once('/')
        .is_some_and(|(owner, repo)| is_name(owner) && is_name(repo))
}

/// `owner/repo/.github/workflows/<file>.yml` (or `.yaml`), without a ref.
pub(crate) fn is_workflow(text: &str) -> bool {
    text.len() <= MAX_PIN_CHARS
        && match text.splitn(3, '/').collect::<Vec<_>>()[..] {
            [owner, repo, path] => {
                is_name(owner)
                    && is_name(repo)
                    && path.strip_prefix(".github/workflows/").is_some_and(|file| {
                        (file.ends_with(".yml") || file.ends_with(".yaml"))
                            && file.split('/').all(is_name)
                    })
            }
            _ => false,
        }
}

pub(crate) fn is_hex(text: &str, len: usize) -> bool {
    text.len() == len
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

pub(crate) fn is_https_url(text: &str) -> bool {
    text.len() <= MAX_PIN_CHARS
        && text.strip_prefix("https://").is_some_and(|rest| {
            !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_graphic() && b != b'*')
        })
}

impl SignaturePins {
    /// Checks every pin is present and well formed; returns the trusted root pin.
    pub fn validate(&self) -> Result<Sha256Digest> {
        if !is_https_url(&self.issuer) {
            return Err(pins_invalid("issuer", "must be an https URL"));
        }
        let root = Sha256Digest::parse_hex(&self.trusted_root_sha256)
            .ok_or_else(|| pins_invalid("trusted_root_sha256", "must be 64 lowercase hex"))?;
        if !is_repository(&self.repository) {
            return Err(pins_invalid(
                "repository",
                "must be one repository `owner/repo`",
            ));
        }
        if !is_https_url(&self.predicate_type) {
            return Err(pins_invalid("predicate_type", "must be an https URL"));
        }
        if !is_workflow(&self.signer_workflow) {
            return Err(pins_invalid(
                "signer_workflow",
                "must be `owner/repo/.github/workflows/<file>.yml`",
            ));
        }
        if !is_hex(&self.signer_digest, 40) {
            return Err(pins_invalid(
                "signer_digest",
                "must be the 40-hex commit of the signer workflow",
            ));
        }
        Ok(root)
    }

    /// The canonical signer identity these pins name.
    pub fn signer_identity(&self) -> String {
        format!(
            "https://github.com/{}@{}",
            self.signer_workflow, self.signer_digest
        )
    }
}

/// Verifies that `bundle` is a GitHub Artifact Attestation of `document` by the pinned signer,
/// against `trusted_root` (whose bytes must hash to the pin).
pub fn verify(
    pins: &SignaturePins,
    bundle: &[u8],
    trusted_root: &[u8],
    document: &[u8],
) -> Result<VerifiedSigner> {
    let root_pin = pins.validate()?;
    let root = PinnedTrustedRoot::from_bytes(trusted_root, &[root_pin])?;
    let parsed = sigstore::parse_bundle(bundle)?;
    if matches!(
        parsed.verification_material.content,
        VerificationMaterialContent::PublicKey(_)
    ) {
        return Err(refuse(
            NpSignatureFault::PublicKeyBundle,
            "the bundle is signed by a public key, not a certificate; this adapter accepts only GitHub Artifact Attestations",
        ));
    }
    let policy = AttestationPolicy {
        issuer: pins.issuer.clone(),
        certificate_identity: None,
        signer_workflow: Some(pins.signer_workflow.clone()),
        signer_digest: Some(pins.signer_digest.clone()),
        source_repository: Some(pins.repository.clone()),
        require_github_hosted_runner: pins.require_github_hosted_runner,
        predicate_type: pins.predicate_type.clone(),
        ..AttestationPolicy::default()
    };
    let subject = SubjectDigest::Sha256(Sha256Digest::of(document));
    let outcome = attestation::verify(bundle, &subject, &policy, &root)?;
    let expected = pins.signer_identity();
    if outcome.signer_identity.as_deref() != Some(expected.as_str()) {
        return Err(refuse(
            NpSignatureFault::SignerIdentityMismatch,
            format!(
                "the certificate names signer {:?}, the pins require {:?}",
                outcome.signer_identity.as_deref().map(shown),
                shown(&expected)
            ),
        ));
    }
    Ok(VerifiedSigner {
        signer_identity: expected,
        subject_digest: outcome.subject_digest,
        source_repository: outcome.source_repository.unwrap_or_default(),
        build_signer_uri: outcome.build_signer_uri.unwrap_or_default(),
        runner_environment: outcome.runner_environment,
        predicate_type: outcome.predicate_type,
        trusted_root_sha256: root.sha256().to_hex(),
        instance: outcome.instance.as_str(),
        verified_times: outcome.sigstore.verified_times,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pins() -> SignaturePins {
        SignaturePins {
            issuer: "https://token.actions.githubusercontent.com".into(),
            trusted_root_sha256: "a".repeat(64),
            repository: "acme/app".into(),
            predicate_type: crate::attestation::SLSA_PROVENANCE_V1.into(),
            signer_workflow: "acme/app/.github/workflows/release.yml".into(),
            signer_digest: "0".repeat(40),
            require_github_hosted_runner: true,
        }
    }

    type Change = Box<dyn Fn(&mut SignaturePins)>;

    fn code(p: &SignaturePins) -> &'static str {
        match p.validate() {
            Ok(_) => "OK",
            Err(err) => err.code(),
        }
    }

    #[test]
    fn every_pin_is_required_and_well_formed() {
        assert_eq!(code(&pins()), "OK");
        let bad: Vec<Change> = vec![
            Box::new(|p| p.issuer.clear()),
            Box::new(|p| p.issuer = "http://token.actions.githubusercontent.com".into()),
            Box::new(|p| p.trusted_root_sha256 = "A".repeat(64)),
            Box::new(|p| p.trusted_root_sha256.clear()),
            Box::new(|p| p.repository.clear()),
            Box::new(|p| p.repository = "acme".into()),
            Box::new(|p| p.repository = "acme/*".into()),
            Box::new(|p| p.repository = "acme/app/extra".into()),
            Box::new(|p| p.repository = "*/*".into()),
            Box::new(|p| p.predicate_type.clear()),
            Box::new(|p| p.signer_workflow.clear()),
            Box::new(|p| p.signer_workflow = "acme/app".into()),
            Box::new(|p| p.signer_workflow = "acme/app/.github/workflows/release.yml@main".into()),
            Box::new(|p| p.signer_workflow = "acme/app/release.yml".into()),
            Box::new(|p| p.signer_workflow = "acme/app/.github/workflows/../x.yml".into()),
            Box::new(|p| p.signer_digest = "0".repeat(39)),
            Box::new(|p| p.signer_digest = "refs/heads/main".into()),
            Box::new(|p| p.signer_digest = "0".repeat(64)),
        ];
        for (i, change) in bad.iter().enumerate() {
            let mut p = pins();
            change(&mut p);
            assert_eq!(
                code(&p),
                "DPONE_NP_SIGNATURE_PINS_INVALID",
                "case {i}: {p:?}"
            );
        }
    }

    #[test]
    fn the_composite_identity_uses_the_digest_not_the_ref() {
        assert_eq!(
            pins().signer_identity(),
            format!(
                "https://github.com/acme/app/.github/workflows/release.yml@{}",
                "0".repeat(40)
            )
        );
    }
}
