//! GitHub Artifact Attestations: DSSE in-toto Statement v1 bundles, verified offline.
//!
//! On top of [`crate::sigstore`] this module applies what `gh attestation verify` applies:
//!
//! 1. **Instance and thresholds.** The leaf certificate's issuer must have exactly one
//!    organisation, and the trusted root must hold a Fulcio authority whose lowest certificate
//!    was issued by that same organisation (otherwise `DPONE_ATTESTATION_INSTANCE_UNKNOWN`).
//!    The organisation picks the thresholds:
//!    - `sigstore.dev` (public good): one transparency log entry with verified inclusion, a
//!      verified SCT, and one observer timestamp (the log's integrated time or an RFC 3161
//!      timestamp);
//!    - `GitHub, Inc.` (GitHub's instance, `fulcio.githubapp.com`): no log entry and no SCT
//!      are required, and one signed RFC 3161 timestamp from a timestamp authority of the
//!      trusted root is;
//!    - any other organisation (a custom root): one verified observer timestamp, and a
//!      verified log entry if the trusted root lists a transparency log.
//!
//!    A bundle lacking what its instance requires is `DPONE_ATTESTATION_THRESHOLD_NOT_MET`.
//!    Every timestamp present must verify in any case.
//! 2. **Statement.** The DSSE payload must be an in-toto Statement v1 with the required
//!    predicate type and a subject carrying the required digest (sha256 or sha512). It is read
//!    with the crate's strict JSON reader ([`crate::json`]): a duplicate key at any depth, a
//!    float, a negative or oversized integer, trailing data, or a top-level field other than
//!    `_type`, `subject`, `predicateType`, `predicate` is refused
//!    (`DPONE_ATTESTATION_STATEMENT_*`), so the statement this module checks is the one every
//!    other reader of the payload sees.
//! 3. **Identity** from the Fulcio certificate extensions `1.3.6.1.4.1.57264.1.x`, each compared
//!    for equality: OIDC issuer (.8), build signer URI (.9) as a workflow (`owner/repo/path`)
//!    followed by `@<ref>`, build signer digest (.10), source repository URI (.12), runner
//!    environment `github-hosted` (.11) when required, and, each when the policy names it, the
//!    exact runner environment (.11), ref (.14), repository id (.15), owner (.16) and owner id
//!    (.17), and the certificate SAN. The
//!    canonical signer identity reported in the evidence is
//!    `https://github.com/{signer_workflow}@{signer_digest}`.
//!
//! Unlike `gh`, bundles with media type v0.1 are accepted (the conformance corpus expects the
//! v0.1 `sigstore-js` bundle to verify), and all matching is exact, never by pattern.

use crate::Result;
use crate::digest::Sha256Digest;
use crate::error::{AttestationFault, Document, SigstoreFault, TrustError, shown};
use crate::json::{self, Fields};
use crate::sigstore::{self, Artifact, SigstoreOutcome};
use crate::trusted_root::PinnedTrustedRoot;
use serde_json::{Value, json};
use sigstore_verify::VerificationPolicy;
use sigstore_verify::crypto::FulcioCiClaims;
use sigstore_verify::types::{Bundle, SignatureContent};
use x509_cert::Certificate;
use x509_cert::der::Decode as _;
use x509_cert::der::asn1::{PrintableStringRef, Utf8StringRef};
use x509_cert::der::oid::ObjectIdentifier;

/// Issuer organisation of the Sigstore public-good Fulcio.
pub const PUBLIC_GOOD_ISSUER_ORG: &str = "sigstore.dev";
/// Issuer organisation of GitHub's Fulcio instance.
pub const GITHUB_ISSUER_ORG: &str = "GitHub, Inc.";
/// The in-toto Statement v1 type.
pub const IN_TOTO_STATEMENT_V1: &str = "https://in-toto.io/Statement/v1";
/// SLSA provenance v1, the predicate of GitHub build provenance.
pub const SLSA_PROVENANCE_V1: &str = "https://slsa.dev/provenance/v1";
/// The DSSE payload type of in-toto statements.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// The runner environment of GitHub-hosted runners (extension .11).
pub const GITHUB_HOSTED: &str = "github-hosted";
/// Largest accepted in-toto statement (the DSSE payload).
pub const MAX_STATEMENT_BYTES: usize = 4 * 1024 * 1024;

const ORGANIZATION_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");

/// Which Sigstore instance issued the signing certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instance {
    /// The Sigstore public-good instance.
    PublicGood,
    /// GitHub's instance (private repositories, no public log).
    GitHub,
    /// Another instance described by a custom trusted root.
    Custom,
}

impl Instance {
    /// Stable name for evidence.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PublicGood => "public-good",
            Self::GitHub => "github",
            Self::Custom => "custom",
        }
    }
}

/// The subject digest the attestation must name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubjectDigest {
    /// A sha256 subject.
    Sha256(Sha256Digest),
    /// A sha512 subject.
    Sha512([u8; 64]),
}

impl SubjectDigest {
    /// Parses `sha256:<hex>` or `sha512:<hex>` (lowercase).
    pub fn parse(text: &str) -> Option<Self> {
        match Artifact::parse_digest(text)? {
            Artifact::Sha256(d) => Some(Self::Sha256(d)),
            Artifact::Sha512(d) => Some(Self::Sha512(d)),
            Artifact::Bytes(_) => None,
        }
    }

    fn algorithm(&self) -> &'static str {
        match self {
            Self::Sha256(_) => "sha256",
            Self::Sha512(_) => "sha512",
        }
    }

    fn hex(&self) -> String {
        match self {
            Self::Sha256(d) => d.to_hex(),
            Self::Sha512(d) => hex::encode(d),
        }
    }

    fn artifact(&self) -> Artifact<'static> {
        match self {
            Self::Sha256(d) => Artifact::Sha256(*d),
            Self::Sha512(d) => Artifact::Sha512(*d),
        }
    }
}

/// What an attestation must show. Every field set is compared for equality.
#[derive(Clone, Debug, Default)]
pub struct AttestationPolicy {
    /// OIDC issuer (extension .8), e.g. `https://token.actions.githubusercontent.com`.
    pub issuer: String,
    /// Exact certificate SAN, if required.
    pub certificate_identity: Option<String>,
    /// Signer workflow `owner/repo/path/to/workflow.yml` (or a full `https://host/...` URL
    /// prefix): the build signer URI (.9) must be this followed by `@<ref>`.
    pub signer_workflow: Option<String>,
    /// Build signer digest (.10), the commit the signing workflow ran from.
    pub signer_digest: Option<String>,
    /// Source repository (.12): `owner/repo` or a full URL.
    pub source_repository: Option<String>,
    /// Require the runner environment (.11) to be `github-hosted`.
    pub require_github_hosted_runner: bool,
    /// Exact runner environment (.11), e.g. `self-hosted`, if required.
    pub runner_environment: Option<String>,
    /// Source repository ref (.14), e.g. `refs/heads/main`, if required.
    pub source_repository_ref: Option<String>,
    /// Source repository numeric id (.15), if required.
    pub source_repository_id: Option<String>,
    /// Source repository owner (.16): an owner name or a full URL, if required.
    pub source_repository_owner: Option<String>,
    /// Source repository owner numeric id (.17), if required.
    pub source_repository_owner_id: Option<String>,
    /// Predicate type of the statement, e.g. [`SLSA_PROVENANCE_V1`].
    pub predicate_type: String,
}

/// What a successful attestation verification established.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttestationOutcome {
    /// The instance whose thresholds applied.
    pub instance: Instance,
    /// The Sigstore-level outcome.
    pub sigstore: SigstoreOutcome,
    /// `https://github.com/{signer_workflow}@{signer_digest}`, when both claims are present.
    pub signer_identity: Option<String>,
    /// Build signer URI (.9).
    pub build_signer_uri: Option<String>,
    /// Build signer digest (.10).
    pub build_signer_digest: Option<String>,
    /// Source repository URI (.12).
    pub source_repository: Option<String>,
    /// Runner environment (.11).
    pub runner_environment: Option<String>,
    /// Source repository ref (.14).
    pub source_repository_ref: Option<String>,
    /// The statement's predicate type.
    pub predicate_type: String,
    /// The matched subject digest, `<alg>:<hex>`.
    pub subject_digest: String,
}

impl AttestationOutcome {
    /// The outcome as JSON (stable field names).
    pub fn to_json(&self) -> Value {
        json!({
            "instance": self.instance.as_str(),
            "signer_identity": self.signer_identity,
            "build_signer_uri": self.build_signer_uri,
            "build_signer_digest": self.build_signer_digest,
            "source_repository": self.source_repository,
            "runner_environment": self.runner_environment,
            "source_repository_ref": self.source_repository_ref,
            "predicate_type": self.predicate_type,
            "subject_digest": self.subject_digest,
            "sigstore": self.sigstore.to_json(),
        })
    }
}

fn fault(fault: AttestationFault, detail: impl Into<String>) -> TrustError {
    TrustError::Attestation {
        fault,
        detail: detail.into(),
    }
}

fn github_url(value: &str) -> String {
    if value.starts_with("https://") {
        value.to_owned()
    } else {
        format!("https://github.com/{value}")
    }
}

/// Verifies every bundle of a `.jsonl` file (one bundle a line, blank lines skipped) and
/// returns the outcomes of those that verify. As with `gh`, the file is accepted when at
/// least one bundle verifies; when none does, the error of the last one is returned.
pub fn verify_jsonl(
    bytes: &[u8],
    subject: &SubjectDigest,
    policy: &AttestationPolicy,
    root: &PinnedTrustedRoot,
) -> Result<Vec<AttestationOutcome>> {
    let mut verified = Vec::new();
    let mut last_error = None;
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match verify(line, subject, policy, root) {
            Ok(outcome) => verified.push(outcome),
            Err(err) => last_error = Some(err),
        }
    }
    match (verified.is_empty(), last_error) {
        (false, _) => Ok(verified),
        (true, Some(err)) => Err(err),
        (true, None) => Err(fault(
            AttestationFault::NoBundle,
            "the file holds no bundle",
        )),
    }
}

/// Verifies one attestation bundle.
pub fn verify(
    bundle_bytes: &[u8],
    subject: &SubjectDigest,
    policy: &AttestationPolicy,
    root: &PinnedTrustedRoot,
) -> Result<AttestationOutcome> {
    if policy.issuer.is_empty() {
        return Err(fault(
            AttestationFault::PolicyInvalid,
            "the policy names no OIDC issuer",
        ));
    }
    if policy.certificate_identity.is_none() && policy.signer_workflow.is_none() {
        return Err(fault(
            AttestationFault::PolicyInvalid,
            "the policy constrains no signer (certificate identity or signer workflow)",
        ));
    }
    if policy.predicate_type.is_empty() {
        return Err(fault(
            AttestationFault::PolicyInvalid,
            "the policy names no predicate type",
        ));
    }

    let bundle = sigstore::parse_bundle(bundle_bytes)?;
    let predicate_type = check_statement(&bundle, subject, policy)?;
    let instance = pick_instance(&bundle, root)?;

    let mut vpolicy = VerificationPolicy::any_identity().require_issuer(policy.issuer.as_str());
    if let Some(san) = &policy.certificate_identity {
        vpolicy = vpolicy.require_identity(san.as_str());
    }
    let root_has_tlog = !root.root().tlogs.is_empty();
    vpolicy = match instance {
        Instance::PublicGood => vpolicy,
        Instance::GitHub => vpolicy.skip_tlog_unsafe().skip_sct(),
        Instance::Custom if root_has_tlog => vpolicy.skip_sct(),
        Instance::Custom => vpolicy.skip_tlog_unsafe().skip_sct(),
    };
    let result =
        sigstore::run(&bundle, subject.artifact(), &vpolicy, root).map_err(|err| match err {
            TrustError::Sigstore {
                fault: SigstoreFault::IdentityMismatch,
                detail,
            } => fault(AttestationFault::IdentityMismatch, detail),
            TrustError::Sigstore {
                fault: SigstoreFault::IssuerMismatch,
                detail,
            } => fault(AttestationFault::IssuerMismatch, detail),
            other => other,
        })?;
    let outcome = sigstore::outcome(&bundle, &result, false, root);

    // Thresholds by instance, on top of "every timestamp present verified".
    let short = threshold_shortfall(
        instance,
        &Evidence {
            tlog_entries: outcome.tlog_entries,
            tlog_verified: result.tlog_verified(),
            sct_verified: result.sct_verified(),
            observer_times: result.verified_timestamps().len(),
            rfc3161_timestamps: outcome.rfc3161_timestamps,
            root_has_tlog,
        },
    );
    if let Some(detail) = short {
        return Err(fault(AttestationFault::ThresholdNotMet, detail));
    }

    let claims = result
        .certificate()
        .map(|info| info.ci_claims.clone())
        .unwrap_or_default();
    check_claims(&claims, policy)?;
    let signer_uri = claims.build_signer_uri.clone();

    let signer_identity = match (&signer_uri, &claims.build_signer_digest) {
        (Some(uri), Some(digest)) => uri
            .strip_prefix("https://github.com/")
            .and_then(|rest| rest.split_once('@'))
            .map(|(workflow, _)| format!("https://github.com/{workflow}@{digest}")),
        _ => None,
    };
    Ok(AttestationOutcome {
        instance,
        sigstore: outcome,
        signer_identity,
        build_signer_uri: signer_uri,
        build_signer_digest: claims.build_signer_digest.clone(),
        source_repository: claims.source_repository_uri.clone(),
        runner_environment: claims.runner_environment.clone(),
        source_repository_ref: claims.source_repository_ref.clone(),
        predicate_type,
        subject_digest: format!("{}:{}", subject.algorithm(), subject.hex()),
    })
}

/// What the Sigstore verification established, as the thresholds see it.
#[derive(Clone, Copy, Debug)]
struct Evidence {
    tlog_entries: usize,
    tlog_verified: bool,
    sct_verified: bool,
    observer_times: usize,
    rfc3161_timestamps: usize,
    root_has_tlog: bool,
}

/// Why the evidence falls short of what `instance` requires, if it does.
fn threshold_shortfall(instance: Instance, e: &Evidence) -> Option<&'static str> {
    match instance {
        Instance::PublicGood => {
            if e.tlog_entries == 0 || !e.tlog_verified {
                Some("the public-good instance requires a verified transparency log entry")
            } else if !e.sct_verified {
                Some("the public-good instance requires a verified SCT")
            } else if e.observer_times == 0 {
                Some("the public-good instance requires an observer timestamp")
            } else {
                None
            }
        }
        Instance::GitHub => (e.rfc3161_timestamps == 0)
            .then_some("GitHub's instance requires one signed RFC 3161 timestamp"),
        Instance::Custom => {
            if e.observer_times == 0 {
                Some("a custom instance requires an observer timestamp")
            } else if e.root_has_tlog && (e.tlog_entries == 0 || !e.tlog_verified) {
                Some("the trusted root lists a transparency log, so an entry is required")
            } else {
                None
            }
        }
    }
}

/// The identity rules on the Fulcio CI claims (extensions .9 to .12), each exact.
pub fn check_claims(claims: &FulcioCiClaims, policy: &AttestationPolicy) -> Result<()> {
    let signer_uri = &claims.build_signer_uri;
    if let Some(workflow) = &policy.signer_workflow {
        let prefix = format!("{}@", github_url(workflow));
        if !signer_uri.as_deref().is_some_and(|uri| {
            uri.strip_prefix(&prefix)
                .is_some_and(|reference| !reference.is_empty())
        }) {
            return Err(fault(
                AttestationFault::SignerMismatch,
                format!(
                    "build signer URI is {:?}, the policy requires workflow {:?}",
                    signer_uri.as_deref().map(shown),
                    shown(workflow)
                ),
            ));
        }
    }
    if let Some(digest) = &policy.signer_digest
        && claims.build_signer_digest.as_deref() != Some(digest.as_str())
    {
        return Err(fault(
            AttestationFault::SignerDigestMismatch,
            format!(
                "build signer digest is {:?}, the policy requires {:?}",
                claims.build_signer_digest.as_deref().map(shown),
                shown(digest)
            ),
        ));
    }
    if let Some(repository) = &policy.source_repository
        && claims.source_repository_uri.as_deref() != Some(github_url(repository).as_str())
    {
        return Err(fault(
            AttestationFault::RepositoryMismatch,
            format!(
                "source repository is {:?}, the policy requires {:?}",
                claims.source_repository_uri.as_deref().map(shown),
                shown(&github_url(repository))
            ),
        ));
    }
    if policy.require_github_hosted_runner
        && claims.runner_environment.as_deref() != Some(GITHUB_HOSTED)
    {
        return Err(fault(
            AttestationFault::RunnerEnvironmentMismatch,
            format!(
                "runner environment is {:?}, the policy requires \"{GITHUB_HOSTED}\"",
                claims.runner_environment.as_deref().map(shown)
            ),
        ));
    }
    let owner_uri = policy.source_repository_owner.as_deref().map(github_url);
    let exact = [
        (
            policy.runner_environment.as_deref(),
            &claims.runner_environment,
            AttestationFault::RunnerEnvironmentMismatch,
            "runner environment",
        ),
        (
            policy.source_repository_ref.as_deref(),
            &claims.source_repository_ref,
            AttestationFault::RefMismatch,
            "source repository ref",
        ),
        (
            policy.source_repository_id.as_deref(),
            &claims.source_repository_identifier,
            AttestationFault::RepositoryIdMismatch,
            "source repository id",
        ),
        (
            owner_uri.as_deref(),
            &claims.source_repository_owner_uri,
            AttestationFault::OwnerMismatch,
            "source repository owner",
        ),
        (
            policy.source_repository_owner_id.as_deref(),
            &claims.source_repository_owner_identifier,
            AttestationFault::OwnerIdMismatch,
            "source repository owner id",
        ),
    ];
    for (required, actual, mismatch, what) in exact {
        if let Some(required) = required
            && actual.as_deref() != Some(required)
        {
            return Err(fault(
                mismatch,
                format!(
                    "{what} is {:?}, the policy requires {:?}",
                    actual.as_deref().map(shown),
                    shown(required)
                ),
            ));
        }
    }
    Ok(())
}

/// Reads a DSSE payload as an in-toto Statement v1, strictly: the crate's strict JSON reader
/// (duplicate keys, floats, negative or oversized integers, trailing data refused), only the
/// top-level fields `_type`, `subject`, `predicateType`, `predicate`, and `_type` equal to
/// [`IN_TOTO_STATEMENT_V1`].
pub fn parse_statement(payload: &[u8]) -> Result<Value> {
    let statement = json::parse_strict(Document::Statement, payload, MAX_STATEMENT_BYTES, false)?;
    Fields::new(
        Document::Statement,
        "$",
        &statement,
        &["_type", "subject", "predicateType", "predicate"],
    )?;
    if statement.get("_type").and_then(Value::as_str) != Some(IN_TOTO_STATEMENT_V1) {
        return Err(fault(
            AttestationFault::StatementMalformed,
            "not an in-toto Statement v1",
        ));
    }
    Ok(statement)
}

/// Checks the DSSE payload is a Statement v1 with the predicate type and subject required.
fn check_statement(
    bundle: &Bundle,
    subject: &SubjectDigest,
    policy: &AttestationPolicy,
) -> Result<String> {
    let SignatureContent::DsseEnvelope(envelope) = &bundle.content else {
        return Err(fault(
            AttestationFault::StatementMalformed,
            "the bundle holds no DSSE envelope",
        ));
    };
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(fault(
            AttestationFault::StatementMalformed,
            format!("payload type is {:?}", shown(&envelope.payload_type)),
        ));
    }
    let statement = parse_statement(envelope.payload.as_bytes())?;
    let predicate_type = statement
        .get("predicateType")
        .and_then(Value::as_str)
        .ok_or_else(|| fault(AttestationFault::StatementMalformed, "no predicate type"))?;
    if predicate_type != policy.predicate_type {
        return Err(fault(
            AttestationFault::PredicateTypeMismatch,
            format!(
                "predicate type is {:?}, the policy requires {:?}",
                shown(predicate_type),
                shown(&policy.predicate_type)
            ),
        ));
    }
    let subjects = statement
        .get("subject")
        .and_then(Value::as_array)
        .ok_or_else(|| fault(AttestationFault::StatementMalformed, "no subject list"))?;
    let wanted = subject.hex();
    let found = subjects.iter().any(|s| {
        s.get("digest")
            .and_then(|d| d.get(subject.algorithm()))
            .and_then(Value::as_str)
            .is_some_and(|hex| hex.eq_ignore_ascii_case(&wanted))
    });
    if !found {
        return Err(fault(
            AttestationFault::SubjectDigestMismatch,
            format!("no subject has {}:{wanted}", subject.algorithm()),
        ));
    }
    Ok(predicate_type.to_owned())
}

/// The organisation names of an X.509 name.
fn organizations(name: &x509_cert::name::Name) -> Vec<String> {
    name.0
        .iter()
        .flat_map(|rdn| rdn.0.iter())
        .filter(|atv| atv.oid == ORGANIZATION_NAME)
        .filter_map(|atv| {
            atv.value
                .decode_as::<Utf8StringRef<'_>>()
                .map(|s| s.as_str().to_owned())
                .or_else(|_| {
                    atv.value
                        .decode_as::<PrintableStringRef<'_>>()
                        .map(|s| s.as_str().to_owned())
                })
                .ok()
        })
        .collect()
}

fn issuer_organizations(der: &[u8]) -> Option<Vec<String>> {
    Certificate::from_der(der)
        .ok()
        .map(|cert| organizations(&cert.tbs_certificate.issuer))
}

/// Picks the instance as `gh attestation verify` does with a custom trusted root.
fn pick_instance(bundle: &Bundle, root: &PinnedTrustedRoot) -> Result<Instance> {
    let leaf = bundle.signing_certificate().ok_or_else(|| {
        fault(
            AttestationFault::CertificateMissing,
            "the bundle carries no signing certificate",
        )
    })?;
    let orgs = issuer_organizations(leaf.as_bytes()).ok_or_else(|| {
        sigstore::sigstore_err(
            SigstoreFault::CertificateInvalid,
            "unparseable leaf certificate",
        )
    })?;
    let [org] = orgs.as_slice() else {
        return Err(fault(
            AttestationFault::InstanceUnknown,
            format!(
                "the leaf certificate's issuer has {} organisations, expected one",
                orgs.len()
            ),
        ));
    };
    let known = root.root().certificate_authorities.iter().any(|ca| {
        ca.cert_chain
            .certificates
            .first()
            .and_then(|lowest| issuer_organizations(lowest.raw_bytes.as_bytes()))
            .is_some_and(|ca_orgs| ca_orgs.first() == Some(org))
    });
    if !known {
        return Err(fault(
            AttestationFault::InstanceUnknown,
            format!(
                "no certificate authority of the trusted root belongs to {:?}",
                shown(org)
            ),
        ));
    }
    Ok(match org.as_str() {
        PUBLIC_GOOD_ISSUER_ORG => Instance::PublicGood,
        GITHUB_ISSUER_ORG => Instance::GitHub,
        _ => Instance::Custom,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> FulcioCiClaims {
        let mut claims = FulcioCiClaims::default();
        claims.build_signer_uri =
            Some("https://github.com/acme/app/.github/workflows/release.yml@refs/tags/v1".into());
        claims.build_signer_digest = Some("0123abcd".into());
        claims.source_repository_uri = Some("https://github.com/acme/app".into());
        claims.runner_environment = Some("github-hosted".into());
        claims
    }

    fn policy() -> AttestationPolicy {
        AttestationPolicy {
            issuer: "https://token.actions.githubusercontent.com".into(),
            signer_workflow: Some("acme/app/.github/workflows/release.yml".into()),
            signer_digest: Some("0123abcd".into()),
            source_repository: Some("acme/app".into()),
            require_github_hosted_runner: true,
            predicate_type: SLSA_PROVENANCE_V1.into(),
            ..AttestationPolicy::default()
        }
    }

    fn code(claims: &FulcioCiClaims, policy: &AttestationPolicy) -> &'static str {
        match check_claims(claims, policy) {
            Ok(()) => "OK",
            Err(err) => err.code(),
        }
    }

    #[test]
    fn every_claim_is_matched_exactly() {
        assert_eq!(code(&claims(), &policy()), "OK");

        let mut p = policy();
        p.signer_workflow = Some("acme/app/.github/workflows/release".into());
        assert_eq!(code(&claims(), &p), "DPONE_ATTESTATION_SIGNER_MISMATCH");
        p.signer_workflow = Some("acme/ap".into());
        assert_eq!(code(&claims(), &p), "DPONE_ATTESTATION_SIGNER_MISMATCH");

        let mut p = policy();
        p.signer_digest = Some("0123abc".into());
        assert_eq!(
            code(&claims(), &p),
            "DPONE_ATTESTATION_SIGNER_DIGEST_MISMATCH"
        );

        let mut p = policy();
        p.source_repository = Some("acme/app-fork".into());
        assert_eq!(code(&claims(), &p), "DPONE_ATTESTATION_REPOSITORY_MISMATCH");

        let mut self_hosted = claims();
        self_hosted.runner_environment = Some("self-hosted".into());
        assert_eq!(
            code(&self_hosted, &policy()),
            "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH"
        );
        let mut p = policy();
        p.require_github_hosted_runner = false;
        assert_eq!(code(&self_hosted, &p), "OK");
    }

    #[test]
    fn absent_claims_never_match() {
        let empty = FulcioCiClaims::default();
        assert_eq!(code(&empty, &policy()), "DPONE_ATTESTATION_SIGNER_MISMATCH");
        let mut p = policy();
        p.signer_workflow = None;
        assert_eq!(code(&empty, &p), "DPONE_ATTESTATION_SIGNER_DIGEST_MISMATCH");
        p.signer_digest = None;
        assert_eq!(code(&empty, &p), "DPONE_ATTESTATION_REPOSITORY_MISMATCH");
        p.source_repository = None;
        assert_eq!(
            code(&empty, &p),
            "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH"
        );
    }

    #[test]
    fn thresholds_by_instance() {
        let full = Evidence {
            tlog_entries: 1,
            tlog_verified: true,
            sct_verified: true,
            observer_times: 1,
            rfc3161_timestamps: 0,
            root_has_tlog: true,
        };
        assert_eq!(threshold_shortfall(Instance::PublicGood, &full), None);
        for weaker in [
            Evidence {
                tlog_entries: 0,
                ..full
            },
            Evidence {
                tlog_verified: false,
                ..full
            },
            Evidence {
                sct_verified: false,
                ..full
            },
            Evidence {
                observer_times: 0,
                ..full
            },
        ] {
            assert!(threshold_shortfall(Instance::PublicGood, &weaker).is_some());
        }
        // GitHub's instance: a log entry and SCT do not replace the signed timestamp.
        assert!(threshold_shortfall(Instance::GitHub, &full).is_some());
        let github = Evidence {
            tlog_entries: 0,
            tlog_verified: false,
            sct_verified: false,
            observer_times: 1,
            rfc3161_timestamps: 1,
            root_has_tlog: false,
        };
        assert_eq!(threshold_shortfall(Instance::GitHub, &github), None);
        assert_eq!(threshold_shortfall(Instance::Custom, &github), None);
        assert!(
            threshold_shortfall(
                Instance::Custom,
                &Evidence {
                    root_has_tlog: true,
                    ..github
                }
            )
            .is_some()
        );
        assert!(
            threshold_shortfall(
                Instance::Custom,
                &Evidence {
                    observer_times: 0,
                    ..github
                }
            )
            .is_some()
        );
    }

    #[test]
    fn subject_digests_parse() {
        assert!(matches!(
            SubjectDigest::parse(&format!("sha256:{}", "0".repeat(64))),
            Some(SubjectDigest::Sha256(_))
        ));
        assert!(SubjectDigest::parse("sha1:00").is_none());
    }
}
