//! Errors of the trust crate, each with a stable machine code.
//!
//! Codes are part of the public contract (see `docs/bundles.md` and
//! `docs/signature-verification.md`): they never change meaning and are never reused. Messages
//! are for people; they name bundle-relative file names, key ids and digests, never local
//! paths, key material or endpoints.

use std::fmt;

/// How a caller should treat an error, e.g. to pick a process exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The material under verification was examined and refused (exit code 1).
    Refused,
    /// An input the operator supplied could not be read or parsed (exit code 3).
    BadInput,
    /// Something that should not happen happened inside the verifier (exit code 5).
    Internal,
}

/// Which strictly parsed JSON document an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Document {
    /// A bundle's `manifest.json`.
    Manifest,
    /// A bundle's `signatures.json`.
    Signatures,
    /// A trust policy file.
    TrustPolicy,
    /// The in-toto statement inside an attestation's DSSE envelope.
    Statement,
}

impl fmt::Display for Document {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Manifest => "manifest",
            Self::Signatures => "signatures file",
            Self::TrustPolicy => "trust policy",
            Self::Statement => "attestation statement",
        })
    }
}

/// What is wrong with a strictly parsed JSON document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentFault {
    /// Larger than the fixed limit for its kind.
    TooLarge,
    /// Not UTF-8 JSON, or nested too deeply.
    Malformed,
    /// An object names the same key twice.
    DuplicateKey,
    /// An object has a field the schema does not define.
    UnknownField,
    /// A required field is absent.
    MissingField,
    /// A field has the wrong type or a value outside its rules.
    InvalidValue,
    /// The bytes are not the RFC 8785 canonical encoding of their own value.
    NonCanonical,
    /// The `schema` field names a format this version does not read.
    SchemaUnsupported,
}

impl fmt::Display for DocumentFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooLarge => "is too large",
            Self::Malformed => "is not valid JSON",
            Self::DuplicateKey => "has a duplicate key",
            Self::UnknownField => "has an unknown field",
            Self::MissingField => "lacks a required field",
            Self::InvalidValue => "has an invalid value",
            Self::NonCanonical => "is not in canonical form (RFC 8785)",
            Self::SchemaUnsupported => "has an unsupported schema",
        })
    }
}

/// What is wrong with a single-file bundle archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveFault {
    /// Not a readable tar stream.
    Malformed,
    /// The archive, or one member, is larger than the limits allow.
    TooLarge,
    /// More members than a bundle may hold.
    TooManyMembers,
    /// A member is not a regular file (link, directory, device, extension header, ...).
    MemberType,
    /// A member name is absolute, contains `..` or is not a bundle file name.
    MemberPath,
    /// Two members share a name.
    DuplicateMember,
    /// The archive is not byte-identical to the canonical archive of its own members.
    NonCanonical,
}

impl ArchiveFault {
    fn code(self) -> &'static str {
        match self {
            Self::Malformed => "DPONE_BUNDLE_ARCHIVE_MALFORMED",
            Self::TooLarge => "DPONE_BUNDLE_ARCHIVE_TOO_LARGE",
            Self::TooManyMembers => "DPONE_BUNDLE_ARCHIVE_TOO_MANY_MEMBERS",
            Self::MemberType => "DPONE_BUNDLE_ARCHIVE_MEMBER_TYPE",
            Self::MemberPath => "DPONE_BUNDLE_ARCHIVE_MEMBER_PATH",
            Self::DuplicateMember => "DPONE_BUNDLE_ARCHIVE_DUPLICATE_MEMBER",
            Self::NonCanonical => "DPONE_BUNDLE_ARCHIVE_NON_CANONICAL",
        }
    }
}

/// Why a Sigstore bundle did not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigstoreFault {
    /// The bundle is not a parseable Sigstore bundle (bad JSON, unknown media type, ...).
    BundleMalformed,
    /// The bundle parses but is internally inconsistent or incomplete.
    BundleInvalid,
    /// The bundle uses content, key types or entry kinds that cannot be verified.
    Unsupported,
    /// The certificate SAN does not equal the required identity.
    IdentityMismatch,
    /// The certificate's OIDC issuer does not equal the required issuer.
    IssuerMismatch,
    /// The signature does not verify.
    SignatureInvalid,
    /// The bundle does not describe the given artifact or digest.
    ArtifactMismatch,
    /// The signing certificate (chain, validity, SCT, usage) was refused.
    CertificateInvalid,
    /// A transparency log entry, inclusion proof, checkpoint or SET was refused.
    TlogInvalid,
    /// An RFC 3161 timestamp was refused, or there is no verified signing time.
    TimestampInvalid,
    /// The `--key` public key could not be read.
    KeyInvalid,
    /// The artifact argument is neither a readable file nor a well-formed digest.
    ArtifactInvalid,
    /// The trusted root cannot be used by the verifier.
    TrustedRootUnusable,
}

impl SigstoreFault {
    fn code(self) -> &'static str {
        match self {
            Self::BundleMalformed => "DPONE_SIGSTORE_BUNDLE_MALFORMED",
            Self::BundleInvalid => "DPONE_SIGSTORE_BUNDLE_INVALID",
            Self::Unsupported => "DPONE_SIGSTORE_UNSUPPORTED",
            Self::IdentityMismatch => "DPONE_SIGSTORE_IDENTITY_MISMATCH",
            Self::IssuerMismatch => "DPONE_SIGSTORE_ISSUER_MISMATCH",
            Self::SignatureInvalid => "DPONE_SIGSTORE_SIGNATURE_INVALID",
            Self::ArtifactMismatch => "DPONE_SIGSTORE_ARTIFACT_MISMATCH",
            Self::CertificateInvalid => "DPONE_SIGSTORE_CERTIFICATE_INVALID",
            Self::TlogInvalid => "DPONE_SIGSTORE_TLOG_INVALID",
            Self::TimestampInvalid => "DPONE_SIGSTORE_TIMESTAMP_INVALID",
            Self::KeyInvalid => "DPONE_SIGSTORE_KEY_INVALID",
            Self::ArtifactInvalid => "DPONE_SIGSTORE_ARTIFACT_INVALID",
            Self::TrustedRootUnusable => "DPONE_SIGSTORE_TRUSTED_ROOT_UNUSABLE",
        }
    }

    fn class(self) -> ErrorClass {
        match self {
            Self::BundleMalformed
            | Self::KeyInvalid
            | Self::ArtifactInvalid
            | Self::TrustedRootUnusable => ErrorClass::BadInput,
            _ => ErrorClass::Refused,
        }
    }
}

/// Why a GitHub Artifact Attestation was refused beyond the Sigstore checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttestationFault {
    /// The attestation policy itself is unusable (e.g. it constrains no signer).
    PolicyInvalid,
    /// No bundle was given (empty file).
    NoBundle,
    /// The bundle carries no signing certificate (e.g. a bare public key).
    CertificateMissing,
    /// The leaf certificate's issuer organisation matches no certificate authority of the
    /// trusted root, or has not exactly one organisation.
    InstanceUnknown,
    /// The bundle lacks the evidence its instance requires (log entry, SCT, timestamp).
    ThresholdNotMet,
    /// The DSSE payload is not an in-toto Statement v1.
    StatementMalformed,
    /// The statement's predicate type is not the required one.
    PredicateTypeMismatch,
    /// No subject of the statement has the required digest.
    SubjectDigestMismatch,
    /// The certificate SAN is not the required identity.
    IdentityMismatch,
    /// The build signer URI (extension .9) is not the required signer workflow.
    SignerMismatch,
    /// The build signer digest (extension .10) is not the required digest.
    SignerDigestMismatch,
    /// The OIDC issuer (extension .8) is not the required issuer.
    IssuerMismatch,
    /// The source repository URI (extension .12) is not the required repository.
    RepositoryMismatch,
    /// The runner environment (extension .11) is not `github-hosted` where that is required.
    RunnerEnvironmentMismatch,
    /// The source repository ref (extension .14) is not the required ref.
    RefMismatch,
    /// The source repository's numeric id (extension .15) is not the required one.
    RepositoryIdMismatch,
    /// The source repository owner URI (extension .16) is not the required owner.
    OwnerMismatch,
    /// The source repository owner's numeric id (extension .17) is not the required one.
    OwnerIdMismatch,
}

impl AttestationFault {
    fn code(self) -> &'static str {
        match self {
            Self::PolicyInvalid => "DPONE_ATTESTATION_POLICY_INVALID",
            Self::NoBundle => "DPONE_ATTESTATION_NO_BUNDLE",
            Self::CertificateMissing => "DPONE_ATTESTATION_CERTIFICATE_MISSING",
            Self::InstanceUnknown => "DPONE_ATTESTATION_INSTANCE_UNKNOWN",
            Self::ThresholdNotMet => "DPONE_ATTESTATION_THRESHOLD_NOT_MET",
            Self::StatementMalformed => "DPONE_ATTESTATION_STATEMENT_MALFORMED",
            Self::PredicateTypeMismatch => "DPONE_ATTESTATION_PREDICATE_TYPE_MISMATCH",
            Self::SubjectDigestMismatch => "DPONE_ATTESTATION_SUBJECT_DIGEST_MISMATCH",
            Self::IdentityMismatch => "DPONE_ATTESTATION_IDENTITY_MISMATCH",
            Self::SignerMismatch => "DPONE_ATTESTATION_SIGNER_MISMATCH",
            Self::SignerDigestMismatch => "DPONE_ATTESTATION_SIGNER_DIGEST_MISMATCH",
            Self::IssuerMismatch => "DPONE_ATTESTATION_ISSUER_MISMATCH",
            Self::RepositoryMismatch => "DPONE_ATTESTATION_REPOSITORY_MISMATCH",
            Self::RunnerEnvironmentMismatch => "DPONE_ATTESTATION_RUNNER_ENVIRONMENT_MISMATCH",
            Self::RefMismatch => "DPONE_ATTESTATION_REF_MISMATCH",
            Self::RepositoryIdMismatch => "DPONE_ATTESTATION_REPOSITORY_ID_MISMATCH",
            Self::OwnerMismatch => "DPONE_ATTESTATION_OWNER_MISMATCH",
            Self::OwnerIdMismatch => "DPONE_ATTESTATION_OWNER_ID_MISMATCH",
        }
    }
}

/// Why the nonproduction authority's closed signature adapter refused, beyond the attestation
/// checks it reuses (see [`crate::nonproduction_signature`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpSignatureFault {
    /// A pin is missing or malformed (empty repository, a signer digest that is not 40 hex, ...).
    PinsInvalid,
    /// The bundle's verification material is a public key (a cosign key bundle), not a
    /// certificate: key possession does not authenticate the issuer and identity labels.
    PublicKeyBundle,
    /// The bundle verified but names no composite signer identity equal to the pins.
    SignerIdentityMismatch,
}

impl NpSignatureFault {
    fn code(self) -> &'static str {
        match self {
            Self::PinsInvalid => "DPONE_NP_SIGNATURE_PINS_INVALID",
            Self::PublicKeyBundle => "DPONE_NP_SIGNATURE_PUBLIC_KEY_BUNDLE",
            Self::SignerIdentityMismatch => "DPONE_NP_SIGNATURE_SIGNER_IDENTITY_MISMATCH",
        }
    }
}

/// Every way verification, signing or key handling can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrustError {
    /// A strictly parsed JSON document was refused.
    #[error("{doc} {fault}: {detail}")]
    Document {
        /// Which document.
        doc: Document,
        /// What is wrong with it.
        fault: DocumentFault,
        /// Where and why, e.g. `$.policies[0].budget: unknown field \`x\``.
        detail: String,
    },
    /// The manifest names a WIT package version this host does not support.
    #[error("the bundle targets WIT package `{found}`, which this host does not support")]
    WitVersionUnsupported {
        /// The version the manifest names.
        found: String,
    },
    /// A file name in the manifest or the bundle is not a permitted bundle file name
    /// (absolute, `..`, separators, or outside the naming rules).
    #[error("file name {name:?} is not a permitted bundle file name")]
    PathInvalid {
        /// The offending name (bundle-relative, truncated).
        name: String,
    },
    /// A file the manifest lists is absent from the bundle.
    #[error("bundle file `{name}` listed in the manifest is missing")]
    FileMissing {
        /// Bundle-relative name.
        name: String,
    },
    /// The bundle holds a file the manifest does not list.
    #[error("bundle file {name:?} is not listed in the manifest")]
    FileUnexpected {
        /// Bundle-relative name (truncated).
        name: String,
    },
    /// A bundle entry is not a regular file (a symlink, device, socket, ...).
    #[error("bundle entry {name:?} is not a regular file")]
    FileNotRegular {
        /// Bundle-relative name (truncated).
        name: String,
    },
    /// A bundle file exceeds the fixed limit for its kind.
    #[error("bundle file `{name}` is larger than {limit} bytes")]
    FileTooLarge {
        /// Bundle-relative name.
        name: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// The bundle as a whole holds too many files or bytes.
    #[error("the bundle exceeds its limits: {detail}")]
    BundleTooLarge {
        /// Which limit.
        detail: String,
    },
    /// A file's size differs from the manifest.
    #[error("bundle file `{name}` has {actual} bytes, the manifest declares {declared}")]
    FileSizeMismatch {
        /// Bundle-relative name.
        name: String,
        /// Size in the manifest.
        declared: u64,
        /// Size found.
        actual: u64,
    },
    /// A file's sha256 differs from the manifest.
    #[error("bundle file `{name}` has sha256 {actual}, the manifest declares {declared}")]
    FileDigestMismatch {
        /// Bundle-relative name.
        name: String,
        /// Digest in the manifest.
        declared: String,
        /// Digest found.
        actual: String,
    },
    /// The single-file archive form was refused.
    #[error("bundle archive refused: {detail}")]
    Archive {
        /// What is wrong.
        fault: ArchiveFault,
        /// Details.
        detail: String,
    },
    /// The bundle carries no signature at all (no `signatures.json`, or an empty list).
    #[error("the bundle is not signed; the trust policy requires {threshold} signature(s)")]
    Unsigned {
        /// Signatures the trust policy requires.
        threshold: usize,
    },
    /// `signatures.json` refers to a different manifest.
    #[error(
        "the signatures file is for manifest sha256 {declared}, the bundle's manifest is {actual}"
    )]
    SignaturesManifestMismatch {
        /// Digest named in `signatures.json`.
        declared: String,
        /// Digest of the bundle's manifest.
        actual: String,
    },
    /// Every signature is by a key the trust policy does not list.
    #[error(
        "no signature is by a key the trust policy accepts ({ignored} signature(s) by unlisted keys were ignored)"
    )]
    UntrustedSigner {
        /// Signatures by unlisted keys.
        ignored: usize,
    },
    /// A signature by a listed key does not verify over this manifest.
    #[error("the signature by key {key_id} does not verify over this manifest")]
    SignatureInvalid {
        /// The listed key whose signature failed.
        key_id: String,
    },
    /// Fewer distinct listed keys signed than the threshold requires.
    #[error("{valid} distinct trusted signer(s), the trust policy requires {threshold}")]
    ThresholdNotMet {
        /// Distinct listed keys with a valid signature.
        valid: usize,
        /// Required.
        threshold: usize,
    },
    /// The trust policy is well formed JSON but unusable (threshold out of range, no keys).
    #[error("trust policy is unusable: {detail}")]
    TrustPolicyInvalid {
        /// Why.
        detail: String,
    },
    /// A key id in the trust policy is not the sha256 of its public key.
    #[error("trust policy key {key_id} does not match the sha256 of its public key")]
    TrustPolicyKeyIdMismatch {
        /// The declared key id.
        key_id: String,
    },
    /// A public key in the trust policy is listed twice.
    #[error("trust policy lists key {key_id} twice")]
    TrustPolicyDuplicateKey {
        /// The key id.
        key_id: String,
    },
    /// A public key is not a usable ed25519 key (wrong length, not a curve point, weak).
    #[error("public key is not a usable ed25519 key: {detail}")]
    PublicKeyInvalid {
        /// Why.
        detail: String,
    },
    /// A key file could not be parsed.
    #[error("key file is malformed: {detail}")]
    KeyFileMalformed {
        /// Why (never key material).
        detail: String,
    },
    /// A private key file is readable by group or others.
    #[error("private key file is accessible by group or others (mode {mode:o}); it must be 0600")]
    KeyFilePermissions {
        /// The file mode bits.
        mode: u32,
    },
    /// Key generation refuses to overwrite an existing file.
    #[error("refusing to overwrite an existing key file")]
    KeyFileExists,
    /// The operating system's random number generator failed.
    #[error("no secure randomness available for key generation")]
    RandomnessUnavailable,
    /// A trusted root file's sha256 does not match any pin of the trust policy.
    #[error("trusted root sha256 {actual} does not match its pin")]
    TrustedRootDigestMismatch {
        /// Digest of the given trusted root.
        actual: String,
    },
    /// A trusted root is required but the trust policy pins none.
    #[error("the trust policy pins no Sigstore trusted root")]
    TrustedRootNotPinned,
    /// A trusted root file is not a valid Sigstore trusted root.
    #[error("trusted root is not usable: {detail}")]
    TrustedRootInvalid {
        /// Why.
        detail: String,
    },
    /// A Sigstore bundle did not verify.
    #[error("Sigstore bundle refused: {detail}")]
    Sigstore {
        /// Why, as a category.
        fault: SigstoreFault,
        /// Details from the verifier.
        detail: String,
    },
    /// A GitHub Artifact Attestation was refused.
    #[error("attestation refused: {detail}")]
    Attestation {
        /// Why, as a category.
        fault: AttestationFault,
        /// Details.
        detail: String,
    },
    /// The nonproduction authority's signature adapter refused.
    #[error("nonproduction signature refused: {detail}")]
    NpSignature {
        /// Why, as a category.
        fault: NpSignatureFault,
        /// Details.
        detail: String,
    },
    /// The bundle's signed validity window has ended.
    #[error("the bundle expired at {expires_at} (unix seconds); the clock reads {now}")]
    BundleExpired {
        /// End of the window.
        expires_at: u64,
        /// The clock, read once for this activation.
        now: u64,
    },
    /// The bundle's signed validity window has not begun.
    #[error("the bundle is valid from {not_before} (unix seconds); the clock reads {now}")]
    BundleNotYetValid {
        /// Start of the window.
        not_before: u64,
        /// The clock, read once for this activation.
        now: u64,
    },
    /// A bundle with a lower sequence than one already activated under its name on this host.
    #[error(
        "bundle `{name}` sequence {sequence} is lower than sequence {highest} already activated on this host"
    )]
    BundleRollback {
        /// Bundle name.
        name: String,
        /// Offered.
        sequence: u64,
        /// Highest activated.
        highest: u64,
    },
    /// The same sequence with different content than the bundle activated at it.
    #[error(
        "bundle `{name}` sequence {sequence} was activated with other content; a new bundle needs a higher sequence"
    )]
    BundleSequenceReused {
        /// Bundle name.
        name: String,
        /// Sequence.
        sequence: u64,
    },
    /// The clock reads earlier than the last activation recorded for this bundle name.
    #[error(
        "the clock ({now}) is earlier than the last activation of this bundle ({last}); refusing until it is set right"
    )]
    ClockBehind {
        /// The clock, read once for this activation.
        now: u64,
        /// The last activation recorded.
        last: u64,
    },
    /// The host's activation state file is unusable.
    #[error("the bundle activation state is unusable: {detail}")]
    ActivationStateUnusable {
        /// Why (never a path).
        detail: String,
    },
    /// An input could not be read or written.
    #[error("cannot {action}: {source}")]
    Io {
        /// What was being done, e.g. `read the bundle directory` (never a path).
        action: &'static str,
        /// The operating system error.
        #[source]
        source: std::io::Error,
    },
    /// An invariant of this crate did not hold.
    #[error("internal error: {detail}")]
    Internal {
        /// What.
        detail: String,
    },
}

macro_rules! document_codes {
    ($doc:expr, $fault:expr, $( $d:ident => $prefix:literal ),* ) => {
        match ($doc, $fault) {
            $(
                (Document::$d, DocumentFault::TooLarge) => concat!($prefix, "_TOO_LARGE"),
                (Document::$d, DocumentFault::Malformed) => concat!($prefix, "_MALFORMED"),
                (Document::$d, DocumentFault::DuplicateKey) => concat!($prefix, "_DUPLICATE_KEY"),
                (Document::$d, DocumentFault::UnknownField) => concat!($prefix, "_UNKNOWN_FIELD"),
                (Document::$d, DocumentFault::MissingField) => concat!($prefix, "_MISSING_FIELD"),
                (Document::$d, DocumentFault::InvalidValue) => concat!($prefix, "_INVALID_VALUE"),
                (Document::$d, DocumentFault::NonCanonical) => concat!($prefix, "_NON_CANONICAL"),
                (Document::$d, DocumentFault::SchemaUnsupported) => concat!($prefix, "_SCHEMA_UNSUPPORTED"),
            )*
        }
    };
}

impl TrustError {
    /// The stable machine code of this error, e.g. `DPONE_BUNDLE_MANIFEST_UNKNOWN_FIELD`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Document { doc, fault, .. } => document_codes!(*doc, *fault,
                Manifest => "DPONE_BUNDLE_MANIFEST",
                Signatures => "DPONE_BUNDLE_SIGNATURES",
                TrustPolicy => "DPONE_TRUST_POLICY",
                Statement => "DPONE_ATTESTATION_STATEMENT"),
            Self::WitVersionUnsupported { .. } => "DPONE_BUNDLE_WIT_VERSION_UNSUPPORTED",
            Self::PathInvalid { .. } => "DPONE_BUNDLE_PATH_INVALID",
            Self::FileMissing { .. } => "DPONE_BUNDLE_FILE_MISSING",
            Self::FileUnexpected { .. } => "DPONE_BUNDLE_FILE_UNEXPECTED",
            Self::FileNotRegular { .. } => "DPONE_BUNDLE_FILE_NOT_REGULAR",
            Self::FileTooLarge { .. } => "DPONE_BUNDLE_FILE_TOO_LARGE",
            Self::BundleTooLarge { .. } => "DPONE_BUNDLE_TOO_LARGE",
            Self::FileSizeMismatch { .. } => "DPONE_BUNDLE_FILE_SIZE_MISMATCH",
            Self::FileDigestMismatch { .. } => "DPONE_BUNDLE_FILE_DIGEST_MISMATCH",
            Self::Archive { fault, .. } => fault.code(),
            Self::Unsigned { .. } => "DPONE_BUNDLE_UNSIGNED",
            Self::SignaturesManifestMismatch { .. } => "DPONE_BUNDLE_SIGNATURES_MANIFEST_MISMATCH",
            Self::UntrustedSigner { .. } => "DPONE_BUNDLE_SIGNER_UNTRUSTED",
            Self::SignatureInvalid { .. } => "DPONE_BUNDLE_SIGNATURE_INVALID",
            Self::ThresholdNotMet { .. } => "DPONE_BUNDLE_THRESHOLD_NOT_MET",
            Self::TrustPolicyInvalid { .. } => "DPONE_TRUST_POLICY_INVALID",
            Self::TrustPolicyKeyIdMismatch { .. } => "DPONE_TRUST_POLICY_KEY_ID_MISMATCH",
            Self::TrustPolicyDuplicateKey { .. } => "DPONE_TRUST_POLICY_DUPLICATE_SIGNER",
            Self::PublicKeyInvalid { .. } => "DPONE_KEY_PUBLIC_INVALID",
            Self::KeyFileMalformed { .. } => "DPONE_KEY_FILE_MALFORMED",
            Self::KeyFilePermissions { .. } => "DPONE_KEY_FILE_PERMISSIONS",
            Self::KeyFileExists => "DPONE_KEY_FILE_EXISTS",
            Self::RandomnessUnavailable => "DPONE_KEY_RANDOMNESS_UNAVAILABLE",
            Self::TrustedRootDigestMismatch { .. } => "DPONE_TRUST_ROOT_DIGEST_MISMATCH",
            Self::TrustedRootNotPinned => "DPONE_TRUST_ROOT_NOT_PINNED",
            Self::TrustedRootInvalid { .. } => "DPONE_TRUST_ROOT_INVALID",
            Self::Sigstore { fault, .. } => fault.code(),
            Self::Attestation { fault, .. } => fault.code(),
            Self::NpSignature { fault, .. } => fault.code(),
            Self::BundleExpired { .. } => "DPONE_BUNDLE_EXPIRED",
            Self::BundleNotYetValid { .. } => "DPONE_BUNDLE_NOT_YET_VALID",
            Self::BundleRollback { .. } => "DPONE_BUNDLE_ROLLBACK",
            Self::BundleSequenceReused { .. } => "DPONE_BUNDLE_SEQUENCE_REUSED",
            Self::ClockBehind { .. } => "DPONE_BUNDLE_CLOCK_BEHIND",
            Self::ActivationStateUnusable { .. } => "DPONE_BUNDLE_STATE_UNUSABLE",
            Self::Io { .. } => "DPONE_TRUST_IO",
            Self::Internal { .. } => "DPONE_TRUST_INTERNAL",
        }
    }

    /// How a caller should treat this error (refusal, bad input or internal error).
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Document {
                doc: Document::TrustPolicy,
                ..
            }
            | Self::TrustPolicyInvalid { .. }
            | Self::TrustPolicyKeyIdMismatch { .. }
            | Self::TrustPolicyDuplicateKey { .. }
            | Self::PublicKeyInvalid { .. }
            | Self::KeyFileMalformed { .. }
            | Self::KeyFilePermissions { .. }
            | Self::KeyFileExists
            | Self::TrustedRootNotPinned
            | Self::TrustedRootInvalid { .. }
            | Self::Io { .. } => ErrorClass::BadInput,
            Self::Attestation {
                fault: AttestationFault::PolicyInvalid | AttestationFault::NoBundle,
                ..
            } => ErrorClass::BadInput,
            Self::NpSignature {
                fault: NpSignatureFault::PinsInvalid,
                ..
            } => ErrorClass::BadInput,
            Self::Sigstore { fault, .. } => fault.class(),
            Self::RandomnessUnavailable | Self::Internal { .. } => ErrorClass::Internal,
            _ => ErrorClass::Refused,
        }
    }

    pub(crate) fn io(action: &'static str, source: std::io::Error) -> Self {
        Self::Io { action, source }
    }

    pub(crate) fn doc(doc: Document, fault: DocumentFault, detail: impl Into<String>) -> Self {
        Self::Document {
            doc,
            fault,
            detail: dpone_boundary::text::clean_message(&detail.into()),
        }
    }
}

/// Shortens untrusted text before it goes into a message, and escapes control characters.
pub(crate) fn shown(text: &str) -> String {
    const MAX: usize = 96;
    let mut out: String = text
        .chars()
        .take(MAX)
        .flat_map(char::escape_default)
        .collect();
    if text.chars().count() > MAX {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_codes_are_distinct_per_document() {
        let faults = [
            DocumentFault::TooLarge,
            DocumentFault::Malformed,
            DocumentFault::DuplicateKey,
            DocumentFault::UnknownField,
            DocumentFault::MissingField,
            DocumentFault::InvalidValue,
            DocumentFault::NonCanonical,
            DocumentFault::SchemaUnsupported,
        ];
        let mut seen = std::collections::BTreeSet::new();
        for doc in [
            Document::Manifest,
            Document::Signatures,
            Document::TrustPolicy,
            Document::Statement,
        ] {
            for fault in faults {
                let code = TrustError::doc(doc, fault, "x").code();
                assert!(code.starts_with("DPONE_"));
                assert!(seen.insert(code), "{code} reused");
            }
        }
        assert_eq!(
            TrustError::doc(Document::Manifest, DocumentFault::UnknownField, "x").code(),
            "DPONE_BUNDLE_MANIFEST_UNKNOWN_FIELD"
        );
    }

    #[test]
    fn shown_truncates_and_escapes() {
        assert_eq!(shown("a\nb"), "a\\nb");
        assert!(shown(&"x".repeat(500)).ends_with("..."));
    }
}
