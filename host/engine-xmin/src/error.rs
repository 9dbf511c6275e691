//! Stable error codes of the XMin key-reconciliation route (`DPONE_XMIN_*`).
//!
//! Every failure of the route is an [`XminError`]: a stable [`ErrorCode`] and a message for
//! people. Messages never hold credentials, endpoints, row values or local paths; adapters map
//! driver errors to a code plus the SQLSTATE, never to the driver's text (whose DETAIL lines can
//! quote key values). Codes never change meaning; new failures get new codes.

use serde::Serialize;
use std::fmt;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, )*) => {
        /// A stable, machine-readable failure code.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        impl ErrorCode {
            /// Every code, in documentation order.
            pub const ALL: &'static [ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as written in evidence, logs and documentation.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( ErrorCode::$variant => $code, )*
                }
            }
        }
    };
}

codes! {
    // Strict YAML (manifests and registries).
    /// The document is not well-formed YAML.
    YamlSyntax = "DPONE_XMIN_YAML_SYNTAX",
    /// A mapping repeats a key.
    YamlDuplicateKey = "DPONE_XMIN_YAML_DUPLICATE_KEY",
    /// The document uses an anchor or an alias.
    YamlAlias = "DPONE_XMIN_YAML_ALIAS",
    /// The document uses an explicit tag.
    YamlTag = "DPONE_XMIN_YAML_TAG",
    /// The document holds a non-ASCII character.
    YamlNonAscii = "DPONE_XMIN_YAML_NON_ASCII",
    /// A plain scalar is ambiguous across YAML versions (`yes`, `on`, `0x1f`, `1e3`, `007`, ...).
    YamlAmbiguousScalar = "DPONE_XMIN_YAML_AMBIGUOUS_SCALAR",
    /// The stream holds zero or several documents.
    YamlDocumentCount = "DPONE_XMIN_YAML_DOCUMENT_COUNT",
    /// A mapping key is not a plain string.
    YamlNonStringKey = "DPONE_XMIN_YAML_NON_STRING_KEY",
    /// The document exceeds a size or nesting limit.
    YamlLimit = "DPONE_XMIN_YAML_LIMIT",

    // Workload manifest.
    /// The manifest has a field the schema does not define.
    ManifestUnknownField = "DPONE_XMIN_MANIFEST_UNKNOWN_FIELD",
    /// The manifest does not match the schema (missing field, wrong type, bad value).
    ManifestInvalid = "DPONE_XMIN_MANIFEST_INVALID",
    /// The manifest uses the deprecated boolean `reconciliation: true`, which never enables this route.
    ManifestLegacyReconciliation = "DPONE_XMIN_MANIFEST_LEGACY_RECONCILIATION",
    /// The manifest asks for a mode, cadence, consistency or target this route does not support.
    ManifestUnsupportedRoute = "DPONE_XMIN_MANIFEST_UNSUPPORTED_ROUTE",
    /// An identifier is empty, too long, non-ASCII or not a plain SQL identifier.
    ManifestIdentifierInvalid = "DPONE_XMIN_MANIFEST_IDENTIFIER_INVALID",
    /// The unique key is empty, repeats a column, or names a column that is not selected.
    ManifestUniqueKeyInvalid = "DPONE_XMIN_MANIFEST_UNIQUE_KEY_INVALID",
    /// A guard ratio is not a decimal in [0, 1] with at most six fractional digits.
    ManifestRatioInvalid = "DPONE_XMIN_MANIFEST_RATIO_INVALID",
    /// `state.run_table.name` and the legacy `state.run_table.run_name` are both set, or neither.
    ManifestStateTableConflict = "DPONE_XMIN_MANIFEST_STATE_TABLE_CONFLICT",
    /// The state atomicity or state type cannot be honoured for this target.
    ManifestStateAtomicityUnsupported = "DPONE_XMIN_MANIFEST_STATE_ATOMICITY_UNSUPPORTED",
    /// The delete-mode policy rejected the configuration.
    DeleteModeRejected = "DPONE_XMIN_DELETE_MODE_REJECTED",

    // Environment-owned connection registry.
    /// The registry has a field the schema does not define.
    RegistryUnknownField = "DPONE_XMIN_REGISTRY_UNKNOWN_FIELD",
    /// The registry does not match the schema.
    RegistryInvalid = "DPONE_XMIN_REGISTRY_INVALID",
    /// A manifest names a connection the registry does not hold, or one of the wrong kind.
    RegistryConnectionUnknown = "DPONE_XMIN_REGISTRY_CONNECTION_UNKNOWN",
    /// A credential variable named by the registry is not set in the environment.
    RegistryCredentialMissing = "DPONE_XMIN_REGISTRY_CREDENTIAL_MISSING",
    /// The source authority document is malformed for its version (missing or extra pins).
    RegistryAuthorityInvalid = "DPONE_XMIN_REGISTRY_AUTHORITY_INVALID",
    /// The source relation has no pin in the authority document.
    RegistryRelationUnpinned = "DPONE_XMIN_REGISTRY_RELATION_UNPINNED",
    /// A relation alias is non-ASCII or folds to several pins.
    RegistryRelationAliasAmbiguous = "DPONE_XMIN_REGISTRY_RELATION_ALIAS_AMBIGUOUS",
    /// A target or state connection lacks its database pin.
    RegistryPinMissing = "DPONE_XMIN_REGISTRY_PIN_MISSING",
    /// Target and state pins name different databases, so one transaction cannot cover both.
    RegistryStateNotTargetAtomic = "DPONE_XMIN_REGISTRY_STATE_NOT_TARGET_ATOMIC",

    // Target and state database preflight (before source I/O).
    /// Connecting to the target failed.
    TargetConnect = "DPONE_XMIN_TARGET_CONNECT",
    /// The target database name or OID differs from its pin (recreated or substituted).
    TargetDatabasePinMismatch = "DPONE_XMIN_TARGET_DATABASE_PIN_MISMATCH",
    /// The target cluster's system identifier differs from its pin.
    TargetSystemIdentifierMismatch = "DPONE_XMIN_TARGET_SYSTEM_IDENTIFIER_MISMATCH",
    /// The target table is missing or its columns, reserved columns or unique key do not match.
    TargetTableInvalid = "DPONE_XMIN_TARGET_TABLE_INVALID",
    /// The principal may not read the server's database catalog (`VIEW ANY DATABASE`), so pins
    /// cannot be verified; the adapter's detail code is in the message.
    TargetMetadataPermissionDenied = "DPONE_XMIN_TARGET_METADATA_PERMISSION_DENIED",
    /// Target and state sessions differ in server topology or effective principal.
    TargetTopologyMismatch = "DPONE_XMIN_TARGET_TOPOLOGY_MISMATCH",
    /// The target server is not one the adapter supports: a TDS server that is not SQL Server
    /// (Babelfish), a SQL Server older than the documented minimum, or an edition without
    /// cross-database transactions; refused before any staging or write, the adapter's detail
    /// code leads the message.
    TargetServerUnsupported = "DPONE_XMIN_TARGET_SERVER_UNSUPPORTED",
    /// The staging session lost its signed staging database (eviction or substitution): a
    /// staging-authority failure, never authority for another database.
    TargetStagingAuthorityLost = "DPONE_XMIN_TARGET_STAGING_AUTHORITY_LOST",
    /// A key value cannot be stored faithfully by the target (SQL Server: trailing U+0020,
    /// wider than its column or the 900-byte index limit), rejected before staging.
    TargetKeyUnsupported = "DPONE_XMIN_TARGET_KEY_UNSUPPORTED",
    /// A source column type has no faithful mapping to the target column.
    TargetColumnTypeUnsupported = "DPONE_XMIN_TARGET_COLUMN_TYPE_UNSUPPORTED",
    /// A state table is missing or does not have the reviewed shape.
    StateCatalogInvalid = "DPONE_XMIN_STATE_CATALOG_INVALID",

    // Source boundary.
    /// Connecting to the source failed.
    SourceConnect = "DPONE_XMIN_SOURCE_CONNECT",
    /// The `sslrootcert` CA bundle of a PostgreSQL connection cannot be read or holds no
    /// usable certificate (or the system roots cannot be loaded).
    TlsRootCertInvalid = "DPONE_XMIN_TLS_ROOT_CERT_INVALID",
    /// The source session settings are unsafe (e.g. `standard_conforming_strings` off).
    SourceSettingsUnsafe = "DPONE_XMIN_SOURCE_SETTINGS_UNSAFE",
    /// The source's recovery role differs from the pinned topology role.
    SourceRecoveryRoleMismatch = "DPONE_XMIN_SOURCE_RECOVERY_ROLE_MISMATCH",
    /// The source database name or OID differs from its pin.
    SourceDatabasePinMismatch = "DPONE_XMIN_SOURCE_DATABASE_PIN_MISMATCH",
    /// The effective or session principal name or OID differs from its pin.
    SourcePrincipalPinMismatch = "DPONE_XMIN_SOURCE_PRINCIPAL_PIN_MISMATCH",
    /// The schema or relation OID differs from its pin, before or under the lock.
    SourceRelationPinMismatch = "DPONE_XMIN_SOURCE_RELATION_PIN_MISMATCH",
    /// The relation does not exist or is not an ordinary table.
    SourceRelationMissing = "DPONE_XMIN_SOURCE_RELATION_MISSING",
    /// The source principal lacks a privilege the read needs (`LOCK … IN ACCESS SHARE MODE`
    /// needs table-level `SELECT`; schema `USAGE`; `CONNECT`); SQLSTATE 42501.
    SourcePermissionDenied = "DPONE_XMIN_SOURCE_PERMISSION_DENIED",
    /// Row-level security applies to the source principal on the relation: the key snapshot
    /// could be filtered, so the read is refused (it runs with `row_security = off`).
    SourceRowSecurityActive = "DPONE_XMIN_SOURCE_ROW_SECURITY_ACTIVE",
    /// The relation is a partitioned table: only an ordinary table (read with `ONLY`) is a
    /// complete snapshot; pin and read a partition, or a plain table.
    SourceRelationPartitioned = "DPONE_XMIN_SOURCE_RELATION_PARTITIONED",
    /// The cluster's system identifier differs from the version-1 pin.
    SourceSystemIdentifierMismatch = "DPONE_XMIN_SOURCE_SYSTEM_IDENTIFIER_MISMATCH",
    /// The cluster's timeline differs from the version-1 pin.
    SourceTimelineMismatch = "DPONE_XMIN_SOURCE_TIMELINE_MISMATCH",
    /// The source's lineage (system identifier, timeline) recorded with the checkpoint differs
    /// from what this run observed, or this run's profile no longer observes what was recorded:
    /// a failover or restore may have reused XIDs below the checkpoint, so the delta cannot be
    /// trusted. Full repair (a repair baseline) required.
    SourceLineageChanged = "DPONE_XMIN_SOURCE_LINEAGE_CHANGED",
    /// A `column_values` scope value is not a valid value of the scope column's type.
    ScopeValueInvalid = "DPONE_XMIN_SCOPE_VALUE_INVALID",
    /// The scope column's type has no equality operator, so a `column_values` scope cannot
    /// compare it.
    ScopeColumnNotComparable = "DPONE_XMIN_SCOPE_COLUMN_NOT_COMPARABLE",
    /// A selected column is missing from the source relation.
    SourceColumnMissing = "DPONE_XMIN_SOURCE_COLUMN_MISSING",
    /// A column type cannot be carried losslessly by the binary wire (not a built-in type).
    SourceUnsupportedColumnType = "DPONE_XMIN_SOURCE_UNSUPPORTED_COLUMN_TYPE",
    /// The XID epoch changed since the checkpoint or within the snapshot.
    SourceXidEpochChanged = "DPONE_XMIN_SOURCE_XID_EPOCH_CHANGED",
    /// Rows newer than the checkpoint may have been frozen; the delta cannot be trusted.
    SourceFreezeUncertain = "DPONE_XMIN_SOURCE_FREEZE_UNCERTAIN",
    /// `H - U` exceeds `source.options.xmin_max_replay_amplification_xids`.
    SourceReplayAmplificationExceeded = "DPONE_XMIN_SOURCE_REPLAY_AMPLIFICATION_EXCEEDED",
    /// The snapshot's safe XMin is below the stored checkpoint.
    SourceCheckpointRegression = "DPONE_XMIN_SOURCE_CHECKPOINT_REGRESSION",
    /// A source statement or the COPY stream failed.
    SourceExtractionFailed = "DPONE_XMIN_SOURCE_EXTRACTION_FAILED",
    /// The attempt's source bound allows no export (zero rows, or fewer bytes than an empty
    /// binary COPY), or the COPY streams carried more rows than the bound: the read is
    /// abandoned and no artifact is published.
    SourceRowBoundExceeded = "DPONE_XMIN_SOURCE_ROW_BOUND_EXCEEDED",
    /// The COPY streams carried more payload bytes than the attempt's source bound: the read is
    /// abandoned and no artifact is published.
    SourceByteBoundExceeded = "DPONE_XMIN_SOURCE_BYTE_BOUND_EXCEEDED",
    /// The attempt's deadline (a nonproduction reservation's `attempt_seconds`) passed: the
    /// source read is abandoned, or the target transaction is rolled back before commit.
    AttemptDeadlineExceeded = "DPONE_XMIN_ATTEMPT_DEADLINE_EXCEEDED",

    // Artifacts and validation (before any target mutation).
    /// Reading or writing an artifact failed.
    ArtifactIo = "DPONE_XMIN_ARTIFACT_IO",
    /// An artifact's bytes do not match its recorded sha256 or size.
    ArtifactChecksumMismatch = "DPONE_XMIN_ARTIFACT_CHECKSUM_MISMATCH",
    /// An artifact lacks its trailer or is otherwise incomplete.
    ArtifactIncomplete = "DPONE_XMIN_ARTIFACT_INCOMPLETE",
    /// An artifact is not a well-formed binary COPY stream of the expected shape.
    ArtifactMalformed = "DPONE_XMIN_ARTIFACT_MALFORMED",
    /// The envelope contradicts the route or itself.
    EnvelopeInvalid = "DPONE_XMIN_ENVELOPE_INVALID",
    /// A key column is null in the snapshot.
    SnapshotNullKey = "DPONE_XMIN_SNAPSHOT_NULL_KEY",
    /// A key occurs twice in the snapshot or the delta.
    SnapshotDuplicateKey = "DPONE_XMIN_SNAPSHOT_DUPLICATE_KEY",
    /// Row counts of artifacts, receipts and staging disagree.
    SnapshotCountMismatch = "DPONE_XMIN_SNAPSHOT_COUNT_MISMATCH",
    /// The envelope was produced for another scope.
    SnapshotScopeMismatch = "DPONE_XMIN_SNAPSHOT_SCOPE_MISMATCH",

    // Target transaction.
    /// A target statement failed (SQLSTATE in the message).
    TargetStatementFailed = "DPONE_XMIN_TARGET_STATEMENT_FAILED",
    /// The serializable transaction lost a conflict (SQLSTATE 40001/40P01); retry.
    TargetSerializationConflict = "DPONE_XMIN_TARGET_SERIALIZATION_CONFLICT",
    /// Another run moved the checkpoint since this run's snapshot; retry from the new checkpoint.
    StateCheckpointStale = "DPONE_XMIN_STATE_CHECKPOINT_STALE",
    /// The state row of this key was superseded by a transfer.
    StateSuperseded = "DPONE_XMIN_STATE_SUPERSEDED",
    /// This invocation's receipt was committed under another route fingerprint (a rotated
    /// source authority or target/state pin): it is not replayed under the new authority, and
    /// nothing is written; start a new invocation.
    ReceiptAuthorityChanged = "DPONE_XMIN_RECEIPT_AUTHORITY_CHANGED",
    /// The guard policy refused the run; the policy's reason code is in the message.
    GuardDenied = "DPONE_XMIN_GUARD_DENIED",
    /// A policy component failed (trap, limit, malformed output); fail closed.
    PolicyFailed = "DPONE_XMIN_POLICY_FAILED",
    /// Active target keys and snapshot keys differ after apply: full repair required.
    ParityDrift = "DPONE_XMIN_PARITY_DRIFT",
    /// Action counts break an invariant (disjoint metrics, guard counts).
    MetricInvariant = "DPONE_XMIN_METRIC_INVARIANT",
    /// The selected repair authority does not exist.
    AuthorityNotFound = "DPONE_XMIN_AUTHORITY_NOT_FOUND",
    /// A repair authority document cannot be read or created as given.
    AuthorityInvalid = "DPONE_XMIN_AUTHORITY_INVALID",
    /// The transfer's old owner could not be superseded exactly.
    TransferFailed = "DPONE_XMIN_TRANSFER_FAILED",
    /// Commit was sent but not acknowledged, and the receipt probe could not decide the outcome.
    CommitOutcomeUnknown = "DPONE_XMIN_COMMIT_OUTCOME_UNKNOWN",
    /// A fault injected by a test harness.
    InjectedFault = "DPONE_XMIN_INJECTED_FAULT",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// How a caller treats a failure of a code (the CLI maps it to its exit status; the table is
/// in `docs/cli.md`, "Exit statuses by code").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The manifest, registry or a document is malformed or names something that does not
    /// exist: fix the input (exit 3).
    BadInput,
    /// The route refused or failed closed: a pin, a guard, a policy, a protocol invariant
    /// (exit 1).
    Refused,
    /// Nothing was concluded: a dependency did not answer, a conflict was lost or a commit's
    /// outcome is not yet known; the same invocation may make progress later (exit 75).
    NotFinished,
}

impl ErrorCode {
    /// The class of this code.
    pub const fn class(self) -> ErrorClass {
        use ErrorCode as C;
        match self {
            C::YamlSyntax
            | C::YamlDuplicateKey
            | C::YamlAlias
            | C::YamlTag
            | C::YamlNonAscii
            | C::YamlAmbiguousScalar
            | C::YamlDocumentCount
            | C::YamlNonStringKey
            | C::YamlLimit
            | C::ManifestUnknownField
            | C::ManifestInvalid
            | C::ManifestLegacyReconciliation
            | C::ManifestUnsupportedRoute
            | C::ManifestIdentifierInvalid
            | C::ManifestUniqueKeyInvalid
            | C::ManifestRatioInvalid
            | C::ManifestStateTableConflict
            | C::ManifestStateAtomicityUnsupported
            | C::RegistryUnknownField
            | C::RegistryInvalid
            | C::RegistryConnectionUnknown
            | C::RegistryCredentialMissing
            | C::RegistryAuthorityInvalid
            | C::RegistryRelationUnpinned
            | C::RegistryRelationAliasAmbiguous
            | C::RegistryPinMissing
            | C::RegistryStateNotTargetAtomic
            | C::AuthorityInvalid
            | C::ScopeValueInvalid => ErrorClass::BadInput,
            C::TargetConnect
            | C::SourceConnect
            | C::TargetSerializationConflict
            | C::StateCheckpointStale
            | C::CommitOutcomeUnknown => ErrorClass::NotFinished,
            _ => ErrorClass::Refused,
        }
    }
}

/// A failure of the route: a stable code and a message without secrets or row values.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct XminError {
    code: ErrorCode,
    message: String,
}

impl XminError {
    /// Builds an error. The message is made safe to print here, whatever it quotes
    /// ([`dpone_boundary::text::clean_message`]: quoted values capped, control, separator and
    /// bidi characters escaped, the whole capped).
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: dpone_boundary::text::clean_message(&message.into()),
        }
    }

    /// The stable code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The message for people.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = XminError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn codes_are_unique_and_prefixed() {
        let mut seen = BTreeSet::new();
        for code in ErrorCode::ALL {
            assert!(code.as_str().starts_with("DPONE_XMIN_"), "{code}");
            assert!(seen.insert(code.as_str()), "duplicate {code}");
        }
    }

    /// Every stable code is listed in the error table of the route's documentation.
    #[test]
    fn every_code_is_documented() {
        let docs = include_str!("../../../docs/xmin-reconciliation.md");
        for code in ErrorCode::ALL {
            assert!(
                docs.contains(&format!("`{}`", code.as_str())),
                "{code} is not listed in docs/xmin-reconciliation.md"
            );
        }
    }
}
