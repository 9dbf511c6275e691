//! Test-only signer for GitHub Artifact Attestations, entirely offline.
//!
//! [`TestAuthority`] is a small Sigstore instance made up on the spot: a Fulcio-like certificate
//! authority (a root and an intermediate) and an RFC 3161 timestamp authority (a root and a
//! signing leaf), all ECDSA P-256. It issues **genuine** Sigstore bundles (media type v0.3) whose
//! content is a DSSE envelope around an in-toto Statement v1, exactly the shape
//! `actions/attest-build-provenance` produces on GitHub's instance:
//!
//! - a short-lived leaf certificate (empty subject, critical URI SAN
//!   `https://github.com/{signer_workflow}@{signer_ref}`, key usage digitalSignature, extended key
//!   usage codeSigning) carrying the Fulcio extensions `1.3.6.1.4.1.57264.1.8` to `.22`, each a DER
//!   UTF8String as Fulcio writes them;
//! - the DSSE signature over the pre-authentication encoding of the payload;
//! - one RFC 3161 timestamp token (`TimeStampResp` with a CMS `SignedData` over a `TSTInfo`) whose
//!   message imprint is the sha256 of the signature, signed by the TSA leaf (extended key usage
//!   timeStamping), with the `contentType`, `messageDigest` and `signingTime` signed attributes;
//! - no transparency log entry and no SCT.
//!
//! [`TestAuthority::trusted_root_json`] writes the `trusted_root.json` that names both
//! authorities. The production verifier (`dpone_trust::attestation::verify`) checks these bundles
//! unchanged.
//!
//! The certificate authorities' organisation is `GitHub, Inc.` by default, so the verifier applies
//! the thresholds of GitHub's instance (no log entry, no SCT, one signed RFC 3161 timestamp from a
//! TSA of the trusted root); [`AuthorityOptions::organization`] picks another organisation to
//! exercise the custom-root thresholds. The trusted root pins what verifies, so the name alone
//! grants nothing: only a root file whose sha256 a policy pins is ever used.
//!
//! Keys are random per authority and never leave the process. This crate is for tests and the
//! `cargo xtask attest` command only; `tests/tests/tidy.rs` checks that the `dpone-host` binary
//! never depends on it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use cms::cert::IssuerAndSerialNumber;
use cms::content_info::{CmsVersion, ContentInfo};
use cms::signed_data::{
    EncapsulatedContentInfo, SignedData, SignerIdentifier, SignerInfo, SignerInfos,
};
use const_oid::ObjectIdentifier;
use const_oid::db::{rfc5280, rfc5911, rfc5912, rfc6268};
use der::asn1::{GeneralizedTime, Ia5String, Int, OctetString, SetOfVec, Uint, Utf8StringRef};
use der::{Any, Decode as _, Encode as _, Sequence, Tag};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use sigstore_verify::crypto::KeyPair;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use x509_cert::attr::{Attribute, AttributeTypeAndValue};
use x509_cert::ext::Extension;
use x509_cert::ext::pkix::name::GeneralName;
use x509_cert::ext::pkix::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, KeyUsages,
    SubjectAltName, SubjectKeyIdentifier,
};
use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
use x509_cert::serial_number::SerialNumber;
use x509_cert::spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use x509_cert::time::{Time, Validity};
use x509_cert::{Certificate, TbsCertificate, Version};

/// Media type of the bundles this crate writes.
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// Media type of the trusted root this crate writes.
pub const TRUSTED_ROOT_MEDIA_TYPE: &str =
    "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
/// The in-toto Statement v1 type.
pub const IN_TOTO_STATEMENT_V1: &str = "https://in-toto.io/Statement/v1";
/// The DSSE payload type of in-toto statements.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// SLSA provenance v1, the predicate of `actions/attest-build-provenance`.
pub const SLSA_PROVENANCE_V1: &str = "https://slsa.dev/provenance/v1";
/// The GitHub Actions OIDC issuer.
pub const ACTIONS_ISSUER: &str = "https://token.actions.githubusercontent.com";
/// Organisation of GitHub's Fulcio instance, the default of the test authorities.
pub const GITHUB_ORG: &str = "GitHub, Inc.";

/// Start of every test authority's validity (2020-01-01T00:00:00Z).
pub const AUTHORITY_NOT_BEFORE: u64 = 1_577_836_800;
/// End of every test authority's validity (2049-12-31T00:00:00Z, the last UTCTime year).
pub const AUTHORITY_NOT_AFTER: u64 = 2_524_521_600;
const AUTHORITY_NOT_BEFORE_RFC3339: &str = "2020-01-01T00:00:00Z";
/// Lifetime of a leaf certificate, as Fulcio issues them (10 minutes).
pub const LEAF_LIFETIME_SECONDS: u64 = 600;

const FULCIO_ARC: &str = "1.3.6.1.4.1.57264.1";
const ECDSA_WITH_SHA256: ObjectIdentifier = rfc5912::ECDSA_WITH_SHA_256;
const ID_SHA256: ObjectIdentifier = rfc5912::ID_SHA_256;
const ID_CT_TST_INFO: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.16.1.4");
const ORGANIZATION: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");
const COMMON_NAME: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
const TSA_POLICY: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.2");

/// A failure of the test signer (it only fails on a bug or an impossible option).
#[derive(Debug)]
pub struct SignerError(pub String);

impl std::fmt::Display for SignerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "test signer: {}", self.0)
    }
}

impl std::error::Error for SignerError {}

/// Result type of this crate.
pub type Result<T, E = SignerError> = std::result::Result<T, E>;

fn err(what: &str) -> impl FnOnce(String) -> SignerError + '_ {
    move |detail| SignerError(format!("{what}: {detail}"))
}

trait Ctx<T> {
    fn ctx(self, what: &str) -> Result<T>;
}

impl<T, E: std::fmt::Display> Ctx<T> for std::result::Result<T, E> {
    fn ctx(self, what: &str) -> Result<T> {
        self.map_err(|e| err(what)(e.to_string()))
    }
}

/// How the test authorities are named.
#[derive(Clone, Debug)]
pub struct AuthorityOptions {
    /// Organisation of every authority certificate; `GitHub, Inc.` selects the thresholds of
    /// GitHub's instance in the verifier, anything else those of a custom root.
    pub organization: String,
    /// Common name prefix of the authority certificates.
    pub common_name: String,
}

impl Default for AuthorityOptions {
    fn default() -> Self {
        Self {
            organization: GITHUB_ORG.to_owned(),
            common_name: "dpone test".to_owned(),
        }
    }
}

/// One certificate and its key.
struct Issued {
    key: KeyPair,
    cert: Certificate,
    der: Vec<u8>,
    ski: Vec<u8>,
}

/// A Fulcio-like certificate authority and an RFC 3161 timestamp authority, made up offline.
pub struct TestAuthority {
    options: AuthorityOptions,
    fulcio_root: Issued,
    fulcio_intermediate: Issued,
    tsa_root: Issued,
    tsa_leaf: Issued,
    serial: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for TestAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestAuthority")
            .field("organization", &self.options.organization)
            .finish_non_exhaustive()
    }
}

/// The workload identity a leaf certificate asserts, as GitHub's Fulcio writes it from the
/// Actions OIDC token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadIdentity {
    /// OIDC issuer (extension .8).
    pub issuer: String,
    /// Signer workflow `owner/repo/.github/workflows/file.yml` (the part of .9 before `@`).
    pub signer_workflow: String,
    /// Ref of the signer workflow (the part of .9 after `@`), e.g. `refs/heads/main`.
    pub signer_ref: String,
    /// Build signer digest (.10): the commit the signer workflow ran from, 40 hex.
    pub signer_digest: String,
    /// Runner environment (.11): `github-hosted` or `self-hosted`.
    pub runner_environment: String,
    /// Source repository `owner/repo` (.12 is `https://github.com/owner/repo`).
    pub repository: String,
    /// Source repository digest (.13), the commit built, 40 hex.
    pub repository_digest: String,
    /// Source repository ref (.14), e.g. `refs/heads/main`.
    pub source_ref: String,
    /// Repository numeric id (.15).
    pub repository_id: String,
    /// Owner numeric id (.17); the owner URI (.16) is derived from the repository.
    pub owner_id: String,
    /// Build trigger (.20), e.g. `push`.
    pub build_trigger: String,
    /// Run invocation URI (.21).
    pub run_invocation_uri: String,
    /// Repository visibility at signing (.22).
    pub visibility: String,
}

impl Default for WorkloadIdentity {
    fn default() -> Self {
        Self {
            issuer: ACTIONS_ISSUER.to_owned(),
            signer_workflow: "dpone-example/policies/.github/workflows/release.yml".to_owned(),
            signer_ref: "refs/heads/main".to_owned(),
            signer_digest: "1111111111111111111111111111111111111111".to_owned(),
            runner_environment: "github-hosted".to_owned(),
            repository: "dpone-example/policies".to_owned(),
            repository_digest: "1111111111111111111111111111111111111111".to_owned(),
            source_ref: "refs/heads/main".to_owned(),
            repository_id: "900000001".to_owned(),
            owner_id: "900000002".to_owned(),
            build_trigger: "push".to_owned(),
            run_invocation_uri:
                "https://github.com/dpone-example/policies/actions/runs/1/attempts/1".to_owned(),
            visibility: "private".to_owned(),
        }
    }
}

impl WorkloadIdentity {
    /// The certificate SAN: `https://github.com/{signer_workflow}@{signer_ref}`.
    pub fn san(&self) -> String {
        format!(
            "https://github.com/{}@{}",
            self.signer_workflow, self.signer_ref
        )
    }

    /// The canonical signer identity `https://github.com/{signer_workflow}@{signer_digest}`.
    pub fn signer_identity(&self) -> String {
        format!(
            "https://github.com/{}@{}",
            self.signer_workflow, self.signer_digest
        )
    }

    fn owner(&self) -> &str {
        self.repository.split('/').next().unwrap_or_default()
    }

    /// The Fulcio extensions, by number under `1.3.6.1.4.1.57264.1`, in the order Fulcio writes.
    pub fn fulcio_claims(&self) -> Vec<(u32, String)> {
        let repo_url = format!("https://github.com/{}", self.repository);
        vec![
            (8, self.issuer.clone()),
            (9, self.san()),
            (10, self.signer_digest.clone()),
            (11, self.runner_environment.clone()),
            (12, repo_url),
            (13, self.repository_digest.clone()),
            (14, self.source_ref.clone()),
            (15, self.repository_id.clone()),
            (16, format!("https://github.com/{}", self.owner())),
            (17, self.owner_id.clone()),
            (18, self.san()),
            (19, self.signer_digest.clone()),
            (20, self.build_trigger.clone()),
            (21, self.run_invocation_uri.clone()),
            (22, self.visibility.clone()),
        ]
    }
}

/// One subject of an in-toto statement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subject {
    /// Subject name, e.g. a file name.
    pub name: String,
    /// sha256 of the subject, 64 lowercase hex.
    pub sha256: String,
}

impl Subject {
    /// A subject for `bytes`, named `name`.
    pub fn of(name: &str, bytes: &[u8]) -> Self {
        Self {
            name: name.to_owned(),
            sha256: hex::encode(Sha256::digest(bytes)),
        }
    }
}

/// The in-toto Statement v1 of `actions/attest-build-provenance`: SLSA provenance v1 for the
/// subjects, built by `identity`.
pub fn provenance_statement(subjects: &[Subject], identity: &WorkloadIdentity) -> Value {
    let workflow_path = identity
        .signer_workflow
        .splitn(3, '/')
        .nth(2)
        .unwrap_or_default()
        .to_owned();
    json!({
        "_type": IN_TOTO_STATEMENT_V1,
        "subject": subjects
            .iter()
            .map(|s| json!({"name": s.name, "digest": {"sha256": s.sha256}}))
            .collect::<Vec<_>>(),
        "predicateType": SLSA_PROVENANCE_V1,
        "predicate": {
            "buildDefinition": {
                "buildType": "https://actions.github.io/buildtypes/workflow/v1",
                "externalParameters": {"workflow": {
                    "ref": identity.source_ref,
                    "repository": format!("https://github.com/{}", identity.repository),
                    "path": workflow_path,
                }},
                "internalParameters": {"github": {
                    "event_name": identity.build_trigger,
                    "repository_id": identity.repository_id,
                    "repository_owner_id": identity.owner_id,
                    "runner_environment": identity.runner_environment,
                }},
                "resolvedDependencies": [{
                    "uri": format!("git+https://github.com/{}@{}", identity.repository, identity.source_ref),
                    "digest": {"gitCommit": identity.repository_digest},
                }],
            },
            "runDetails": {
                "builder": {"id": format!("https://github.com/{}@{}", identity.signer_workflow, identity.signer_ref)},
                "metadata": {"invocationId": identity.run_invocation_uri},
            },
        },
    })
}

/// What can be changed about one attestation, mostly to make refusal cases.
#[derive(Clone, Debug, Default)]
pub struct AttestOptions {
    /// Signing time, Unix seconds (default: now). The leaf is valid from 5 s before it for
    /// [`LEAF_LIFETIME_SECONDS`]; the timestamp says this time.
    pub signed_at: Option<u64>,
    /// Time the timestamp authority states instead of `signed_at`, e.g. after the leaf expired.
    pub timestamp_at: Option<u64>,
    /// Flip a bit of the DSSE signature before it is timestamped (the timestamp is valid, the
    /// signature is not).
    pub corrupt_signature: bool,
    /// Flip a bit of the DSSE signature after it was timestamped (neither verifies).
    pub corrupt_signature_after_timestamp: bool,
    /// Leave the timestamp out.
    pub omit_timestamp: bool,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn name(org: &str, cn: &str) -> Result<Name> {
    let rdn = |oid: ObjectIdentifier, value: &str| -> Result<RelativeDistinguishedName> {
        let value = Any::from(Utf8StringRef::new(value).ctx("name")?);
        Ok(RelativeDistinguishedName(
            SetOfVec::try_from(vec![AttributeTypeAndValue { oid, value }]).ctx("name")?,
        ))
    };
    Ok(RdnSequence(vec![
        rdn(ORGANIZATION, org)?,
        rdn(COMMON_NAME, cn)?,
    ]))
}

fn time(unix: u64) -> Result<Time> {
    Time::try_from(UNIX_EPOCH + Duration::from_secs(unix)).ctx("time")
}

fn ecdsa_sha256() -> AlgorithmIdentifierOwned {
    AlgorithmIdentifierOwned {
        oid: ECDSA_WITH_SHA256,
        parameters: None,
    }
}

fn spki(key: &KeyPair) -> Result<SubjectPublicKeyInfoOwned> {
    let der = key.public_key_der().ctx("public key")?;
    SubjectPublicKeyInfoOwned::from_der(der.as_bytes()).ctx("public key")
}

fn key_id(key: &KeyPair) -> Vec<u8> {
    Sha256::digest(key.public_key_bytes())[..20].to_vec()
}

fn ext<T: x509_cert::ext::AsExtension>(value: &T, subject: &Name) -> Result<Extension> {
    value.to_extension(subject, &[]).ctx("extension")
}

fn string_ext(oid: ObjectIdentifier, value: &str) -> Result<Extension> {
    Ok(Extension {
        extn_id: oid,
        critical: false,
        extn_value: OctetString::new(
            Utf8StringRef::new(value)
                .ctx("extension")?
                .to_der()
                .ctx("extension")?,
        )
        .ctx("extension")?,
    })
}

/// What a certificate is for.
enum Role<'a> {
    Ca { path_len: u8 },
    TsaLeaf,
    FulcioLeaf(&'a WorkloadIdentity),
}

struct CertSpec<'a> {
    subject: Name,
    issuer: Option<&'a Issued>,
    not_before: u64,
    not_after: u64,
    role: Role<'a>,
    serial: u64,
}

fn issue(spec: CertSpec<'_>) -> Result<Issued> {
    let key = KeyPair::generate_ecdsa_p256().ctx("key generation")?;
    let ski = key_id(&key);
    let subject = spec.subject;
    let issuer_name = match spec.issuer {
        Some(issuer) => issuer.cert.tbs_certificate.subject.clone(),
        None => subject.clone(),
    };
    let mut extensions = Vec::new();
    match &spec.role {
        Role::Ca { path_len } => {
            extensions.push(ext(
                &KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign),
                &subject,
            )?);
            extensions.push(ext(
                &BasicConstraints {
                    ca: true,
                    path_len_constraint: Some(*path_len),
                },
                &subject,
            )?);
        }
        Role::TsaLeaf => {
            extensions.push(ext(
                &KeyUsage(KeyUsages::DigitalSignature.into()),
                &subject,
            )?);
            let mut eku = ext(
                &ExtendedKeyUsage(vec![rfc5280::ID_KP_TIME_STAMPING]),
                &subject,
            )?;
            eku.critical = true;
            extensions.push(eku);
        }
        Role::FulcioLeaf(_) => {
            extensions.push(ext(
                &KeyUsage(KeyUsages::DigitalSignature.into()),
                &subject,
            )?);
            extensions.push(ext(
                &ExtendedKeyUsage(vec![rfc5280::ID_KP_CODE_SIGNING]),
                &subject,
            )?);
        }
    }
    extensions.push(ext(
        &SubjectKeyIdentifier(OctetString::new(ski.clone()).ctx("ski")?),
        &subject,
    )?);
    if let Some(issuer) = spec.issuer {
        extensions.push(ext(
            &AuthorityKeyIdentifier {
                key_identifier: Some(OctetString::new(issuer.ski.clone()).ctx("aki")?),
                authority_cert_issuer: None,
                authority_cert_serial_number: None,
            },
            &subject,
        )?);
    }
    if let Role::FulcioLeaf(identity) = &spec.role {
        let uri = Ia5String::new(&identity.san()).ctx("SAN")?;
        let mut san = ext(
            &SubjectAltName(vec![GeneralName::UniformResourceIdentifier(uri)]),
            &subject,
        )?;
        san.critical = true;
        extensions.push(san);
        for (n, value) in identity.fulcio_claims() {
            let oid = ObjectIdentifier::new(&format!("{FULCIO_ARC}.{n}")).ctx("oid")?;
            extensions.push(string_ext(oid, &value)?);
        }
    }
    let mut serial = spec.serial.to_be_bytes().to_vec();
    serial.insert(0, 0x01);
    let tbs = TbsCertificate {
        version: Version::V3,
        serial_number: SerialNumber::new(&serial).ctx("serial")?,
        signature: ecdsa_sha256(),
        issuer: issuer_name,
        validity: Validity {
            not_before: time(spec.not_before)?,
            not_after: time(spec.not_after)?,
        },
        subject,
        subject_public_key_info: spki(&key)?,
        issuer_unique_id: None,
        subject_unique_id: None,
        extensions: Some(extensions),
    };
    let tbs_der = tbs.to_der().ctx("tbs")?;
    let signer = spec.issuer.map_or(&key, |i| &i.key);
    let signature = signer.sign(&tbs_der).ctx("certificate signature")?;
    let cert = Certificate {
        tbs_certificate: tbs,
        signature_algorithm: ecdsa_sha256(),
        signature: der::asn1::BitString::from_bytes(signature.as_bytes()).ctx("signature")?,
    };
    let der = cert.to_der().ctx("certificate")?;
    Ok(Issued {
        key,
        cert,
        der,
        ski,
    })
}

/// RFC 3161 `MessageImprint`.
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct MessageImprint {
    hash_algorithm: AlgorithmIdentifierOwned,
    hashed_message: OctetString,
}

/// RFC 3161 `TSTInfo` (the fields a TSA sets here).
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct TstInfo {
    version: u8,
    policy: ObjectIdentifier,
    message_imprint: MessageImprint,
    serial_number: Int,
    gen_time: GeneralizedTime,
}

/// RFC 3161 `PKIStatusInfo` (status only).
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct PkiStatusInfo {
    status: u8,
}

/// RFC 3161 `TimeStampResp`.
#[derive(Clone, Debug, Eq, PartialEq, Sequence)]
struct TimeStampResp {
    status: PkiStatusInfo,
    time_stamp_token: Any,
}

fn attribute(oid: ObjectIdentifier, value: Any) -> Result<Attribute> {
    Ok(Attribute {
        oid,
        values: SetOfVec::try_from(vec![value]).ctx("attribute")?,
    })
}

impl TestAuthority {
    /// A new authority named `GitHub, Inc.`.
    pub fn new() -> Result<Self> {
        Self::with_options(AuthorityOptions::default())
    }

    /// A new authority with these names.
    pub fn with_options(options: AuthorityOptions) -> Result<Self> {
        let org = options.organization.as_str();
        let cn = options.common_name.as_str();
        let fulcio_root = issue(CertSpec {
            subject: name(org, &format!("{cn} Fulcio root"))?,
            issuer: None,
            not_before: AUTHORITY_NOT_BEFORE,
            not_after: AUTHORITY_NOT_AFTER,
            role: Role::Ca { path_len: 1 },
            serial: 1,
        })?;
        let fulcio_intermediate = issue(CertSpec {
            subject: name(org, &format!("{cn} Fulcio intermediate"))?,
            issuer: Some(&fulcio_root),
            not_before: AUTHORITY_NOT_BEFORE,
            not_after: AUTHORITY_NOT_AFTER,
            role: Role::Ca { path_len: 0 },
            serial: 2,
        })?;
        let tsa_root = issue(CertSpec {
            subject: name(org, &format!("{cn} TSA root"))?,
            issuer: None,
            not_before: AUTHORITY_NOT_BEFORE,
            not_after: AUTHORITY_NOT_AFTER,
            role: Role::Ca { path_len: 0 },
            serial: 3,
        })?;
        let tsa_leaf = issue(CertSpec {
            subject: name(org, &format!("{cn} TSA timestamping"))?,
            issuer: Some(&tsa_root),
            not_before: AUTHORITY_NOT_BEFORE,
            not_after: AUTHORITY_NOT_AFTER,
            role: Role::TsaLeaf,
            serial: 4,
        })?;
        Ok(Self {
            options,
            fulcio_root,
            fulcio_intermediate,
            tsa_root,
            tsa_leaf,
            serial: std::sync::atomic::AtomicU64::new(1000),
        })
    }

    fn next_serial(&self) -> u64 {
        self.serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// The `trusted_root.json` naming the Fulcio-like CA (intermediate, then root) and the TSA
    /// (leaf, then root), with no transparency log and no CT log.
    pub fn trusted_root_json(&self) -> Vec<u8> {
        let org = &self.options.organization;
        let cn = &self.options.common_name;
        let chain = |certs: &[&Issued]| {
            json!({"certificates": certs
                .iter()
                .map(|c| json!({"rawBytes": B64.encode(&c.der)}))
                .collect::<Vec<_>>()})
        };
        let root = json!({
            "mediaType": TRUSTED_ROOT_MEDIA_TYPE,
            "tlogs": [],
            "certificateAuthorities": [{
                "subject": {"organization": org, "commonName": format!("{cn} Fulcio root")},
                "uri": "https://fulcio.test.invalid",
                "certChain": chain(&[&self.fulcio_intermediate, &self.fulcio_root]),
                "validFor": {"start": AUTHORITY_NOT_BEFORE_RFC3339},
            }],
            "ctlogs": [],
            "timestampAuthorities": [{
                "subject": {"organization": org, "commonName": format!("{cn} TSA root")},
                "uri": "https://tsa.test.invalid",
                "certChain": chain(&[&self.tsa_leaf, &self.tsa_root]),
                "validFor": {"start": AUTHORITY_NOT_BEFORE_RFC3339},
            }],
        });
        let mut bytes = serde_json::to_vec_pretty(&root).unwrap_or_default();
        bytes.push(b'\n');
        bytes
    }

    /// A leaf certificate for `identity`, valid from `signed_at - 5` for 10 minutes, and its key.
    fn leaf(&self, identity: &WorkloadIdentity, signed_at: u64) -> Result<Issued> {
        let not_before = signed_at.saturating_sub(5);
        issue(CertSpec {
            subject: RdnSequence(Vec::new()),
            issuer: Some(&self.fulcio_intermediate),
            not_before,
            not_after: not_before + LEAF_LIFETIME_SECONDS,
            role: Role::FulcioLeaf(identity),
            serial: self.next_serial(),
        })
    }

    /// An RFC 3161 `TimeStampResp` over `signature`, stating `at`.
    pub fn timestamp(&self, signature: &[u8], at: u64) -> Result<Vec<u8>> {
        let tst = TstInfo {
            version: 1,
            policy: TSA_POLICY,
            message_imprint: MessageImprint {
                hash_algorithm: AlgorithmIdentifierOwned {
                    oid: ID_SHA256,
                    parameters: None,
                },
                hashed_message: OctetString::new(Sha256::digest(signature).to_vec())
                    .ctx("imprint")?,
            },
            serial_number: Int::from(
                Uint::new(&self.next_serial().to_be_bytes()[..]).ctx("serial")?,
            ),
            gen_time: GeneralizedTime::from_unix_duration(Duration::from_secs(at)).ctx("time")?,
        };
        let tst_der = tst.to_der().ctx("TSTInfo")?;
        let signed_attrs: x509_cert::attr::Attributes = SetOfVec::try_from(vec![
            attribute(
                rfc6268::ID_CONTENT_TYPE,
                Any::encode_from(&ID_CT_TST_INFO).ctx("attr")?,
            )?,
            attribute(
                rfc6268::ID_MESSAGE_DIGEST,
                Any::encode_from(&OctetString::new(Sha256::digest(&tst_der).to_vec()).ctx("attr")?)
                    .ctx("attr")?,
            )?,
            attribute(
                rfc6268::ID_SIGNING_TIME,
                Any::encode_from(&time(at)?).ctx("attr")?,
            )?,
        ])
        .ctx("signed attributes")?;
        let signature = self
            .tsa_leaf
            .key
            .sign(&signed_attrs.to_der().ctx("signed attributes")?)
            .ctx("TSA signature")?;
        let signer_info = SignerInfo {
            version: CmsVersion::V1,
            sid: SignerIdentifier::IssuerAndSerialNumber(IssuerAndSerialNumber {
                issuer: self.tsa_leaf.cert.tbs_certificate.issuer.clone(),
                serial_number: self.tsa_leaf.cert.tbs_certificate.serial_number.clone(),
            }),
            digest_alg: AlgorithmIdentifierOwned {
                oid: ID_SHA256,
                parameters: None,
            },
            signed_attrs: Some(signed_attrs),
            signature_algorithm: ecdsa_sha256(),
            signature: OctetString::new(signature.as_bytes().to_vec()).ctx("signature")?,
            unsigned_attrs: None,
        };
        let signed_data = SignedData {
            version: CmsVersion::V3,
            digest_algorithms: SetOfVec::try_from(vec![AlgorithmIdentifierOwned {
                oid: ID_SHA256,
                parameters: None,
            }])
            .ctx("digest algorithms")?,
            encap_content_info: EncapsulatedContentInfo {
                econtent_type: ID_CT_TST_INFO,
                econtent: Some(Any::new(Tag::OctetString, tst_der).ctx("content")?),
            },
            certificates: None,
            crls: None,
            signer_infos: SignerInfos(SetOfVec::try_from(vec![signer_info]).ctx("signer infos")?),
        };
        let token = ContentInfo {
            content_type: rfc5911::ID_SIGNED_DATA,
            content: Any::encode_from(&signed_data).ctx("signed data")?,
        };
        let response = TimeStampResp {
            status: PkiStatusInfo { status: 0 },
            time_stamp_token: Any::encode_from(&token).ctx("token")?,
        };
        response.to_der().ctx("TimeStampResp")
    }

    /// A Sigstore bundle v0.3: a DSSE envelope of `payload` (an in-toto statement, any bytes)
    /// signed by a fresh leaf certificate for `identity`, with an RFC 3161 timestamp.
    pub fn attest_payload(
        &self,
        payload: &[u8],
        identity: &WorkloadIdentity,
        options: &AttestOptions,
    ) -> Result<Vec<u8>> {
        let signed_at = options.signed_at.unwrap_or_else(now);
        let leaf = self.leaf(identity, signed_at)?;
        let material = json!({"certificate": {"rawBytes": B64.encode(&leaf.der)}});
        self.envelope(payload, &leaf.key, material, signed_at, options)
    }

    /// A bundle for the SLSA provenance statement of `subjects`, as
    /// `actions/attest-build-provenance` writes it.
    pub fn attest(
        &self,
        subjects: &[Subject],
        identity: &WorkloadIdentity,
        options: &AttestOptions,
    ) -> Result<Vec<u8>> {
        let statement = provenance_statement(subjects, identity);
        let payload = serde_json::to_vec(&statement).ctx("statement")?;
        self.attest_payload(&payload, identity, options)
    }

    /// A cosign-style managed-key bundle: the same DSSE envelope and timestamp, but the
    /// verification material is a public key hint instead of a certificate.
    pub fn public_key_bundle(&self, payload: &[u8], options: &AttestOptions) -> Result<Vec<u8>> {
        let key = KeyPair::generate_ecdsa_p256().ctx("key generation")?;
        let hint = B64.encode(Sha256::digest(key.public_key_bytes()));
        let material = json!({"publicKey": {"hint": hint}});
        let signed_at = options.signed_at.unwrap_or_else(now);
        self.envelope(payload, &key, material, signed_at, options)
    }

    fn envelope(
        &self,
        payload: &[u8],
        key: &KeyPair,
        mut material: Value,
        signed_at: u64,
        options: &AttestOptions,
    ) -> Result<Vec<u8>> {
        let mut signature = key
            .sign(&pae(IN_TOTO_PAYLOAD_TYPE, payload))
            .ctx("DSSE signature")?
            .as_bytes()
            .to_vec();
        if options.corrupt_signature {
            flip_last_bit(&mut signature);
        }
        let timestamps = if options.omit_timestamp {
            Vec::new()
        } else {
            let token = self.timestamp(&signature, options.timestamp_at.unwrap_or(signed_at))?;
            vec![json!({"signedTimestamp": B64.encode(token)})]
        };
        if options.corrupt_signature_after_timestamp {
            flip_last_bit(&mut signature);
        }
        if let Some(map) = material.as_object_mut() {
            map.insert("tlogEntries".into(), json!([]));
            map.insert(
                "timestampVerificationData".into(),
                json!({"rfc3161Timestamps": timestamps}),
            );
        }
        let bundle = json!({
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": material,
            "dsseEnvelope": {
                "payload": B64.encode(payload),
                "payloadType": IN_TOTO_PAYLOAD_TYPE,
                "signatures": [{"sig": B64.encode(&signature)}],
            },
        });
        serde_json::to_vec(&bundle).ctx("bundle")
    }
}

fn flip_last_bit(signature: &mut [u8]) {
    // The last byte of an ASN.1 ECDSA signature is inside `s`: the encoding stays valid.
    if let Some(last) = signature.last_mut() {
        *last ^= 1;
    }
}

/// The DSSE v1 pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {} {} ",
        payload_type.len(),
        payload_type,
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_and_roots_are_json_of_the_expected_shape() -> Result<()> {
        let ca = TestAuthority::new()?;
        let root: Value = serde_json::from_slice(&ca.trusted_root_json()).ctx("root json")?;
        assert_eq!(
            root["certificateAuthorities"][0]["certChain"]["certificates"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        assert_eq!(
            root["timestampAuthorities"][0]["certChain"]["certificates"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
        let bundle = ca.attest(
            &[Subject::of("a", b"a")],
            &WorkloadIdentity::default(),
            &AttestOptions::default(),
        )?;
        let bundle: Value = serde_json::from_slice(&bundle).ctx("bundle json")?;
        assert_eq!(bundle["mediaType"], BUNDLE_MEDIA_TYPE);
        assert!(bundle["verificationMaterial"]["certificate"]["rawBytes"].is_string());
        assert_eq!(
            bundle["verificationMaterial"]["timestampVerificationData"]["rfc3161Timestamps"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        Ok(())
    }

    #[test]
    fn leaf_certificates_carry_the_fulcio_claims_as_utf8_strings() -> Result<()> {
        let ca = TestAuthority::new()?;
        let identity = WorkloadIdentity::default();
        let leaf = ca.leaf(&identity, now())?;
        let exts = leaf.cert.tbs_certificate.extensions.unwrap_or_default();
        let repo = exts
            .iter()
            .find(|e| e.extn_id.to_string() == "1.3.6.1.4.1.57264.1.12")
            .ok_or_else(|| SignerError("no .12".into()))?;
        let value = Utf8StringRef::from_der(repo.extn_value.as_bytes()).ctx("utf8")?;
        assert_eq!(value.as_str(), "https://github.com/dpone-example/policies");
        assert_eq!(leaf.cert.tbs_certificate.subject.0.len(), 0);
        Ok(())
    }

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }
}
