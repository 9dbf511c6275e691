//! Source errors and their stable `DPONE_PG_ROWBINARY_*` codes.
//!
//! Messages carry column positions, row ordinals and SQLSTATEs only: never row values, relation
//! or column names, endpoints or credentials.

use dpone_engine_clickhouse::ports::{PortError, PortErrorKind};

/// Stable codes of this source (also the [`PortError`] classes the engine sees).
pub mod codes {
    /// The server could not be reached or refused the session.
    pub const CONNECT: &str = "DPONE_PG_ROWBINARY_CONNECT";
    /// A snapshot statement failed (BEGIN, LOCK, catalog read, COPY, ROLLBACK).
    pub const QUERY: &str = "DPONE_PG_ROWBINARY_QUERY";
    /// The TLS session failed (untrusted or misnamed certificate, handshake, no TLS).
    pub const TLS: &str = "DPONE_PG_ROWBINARY_TLS";
    /// The `sslrootcert` CA bundle cannot be read or holds no usable certificate.
    pub const TLS_ROOT_CERT_INVALID: &str = "DPONE_PG_ROWBINARY_TLS_ROOT_CERT_INVALID";
    /// The relation or its schema does not exist.
    pub const RELATION_UNAVAILABLE: &str = "DPONE_PG_ROWBINARY_RELATION_UNAVAILABLE";
    /// The principal lacks a privilege the read needs (SQLSTATE 42501): `CONNECT`, schema
    /// `USAGE`, table-level `SELECT` (which `LOCK … IN ACCESS SHARE MODE` needs).
    pub const PERMISSION_DENIED: &str = "DPONE_PG_ROWBINARY_PERMISSION_DENIED";
    /// Row-level security applies to the principal on the relation: the snapshot could be
    /// filtered, so the read is refused (it runs with `row_security = off`).
    pub const ROW_SECURITY_ACTIVE: &str = "DPONE_PG_ROWBINARY_ROW_SECURITY_ACTIVE";
    /// The relation is a partitioned table (read with `ONLY` it would be empty): declare a
    /// partition or a plain table.
    pub const RELATION_PARTITIONED: &str = "DPONE_PG_ROWBINARY_RELATION_PARTITIONED";
    /// The name resolved to another relation during the read (a schema or relation renamed,
    /// or the lock taken on another relation): nothing is sealed.
    pub const RELATION_CHANGED: &str = "DPONE_PG_ROWBINARY_RELATION_CHANGED";
    /// A declared column does not exist in the relation.
    pub const COLUMN_MISSING: &str = "DPONE_PG_ROWBINARY_COLUMN_MISSING";
    /// A declared ClickHouse type is outside the canonical profile or no PostgreSQL type maps to it.
    pub const DECLARED_TYPE_UNSUPPORTED: &str = "DPONE_PG_ROWBINARY_DECLARED_TYPE_UNSUPPORTED";
    /// The PostgreSQL column type is not one this source reads.
    pub const TYPE_UNSUPPORTED: &str = "DPONE_PG_ROWBINARY_TYPE_UNSUPPORTED";
    /// The PostgreSQL column type cannot be encoded as the declared ClickHouse type.
    pub const TYPE_MISMATCH: &str = "DPONE_PG_ROWBINARY_TYPE_MISMATCH";
    /// A NULL arrived for a column not declared `Nullable`.
    pub const NULL_IN_NON_NULLABLE: &str = "DPONE_PG_ROWBINARY_NULL_IN_NON_NULLABLE";
    /// A value does not fit the declared type (range, length, address family, infinity, NaN).
    pub const VALUE_OUT_OF_RANGE: &str = "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE";
    /// A value would lose precision (decimal scale, sub-unit time, network mask).
    pub const VALUE_NOT_EXACT: &str = "DPONE_PG_ROWBINARY_VALUE_NOT_EXACT";
    /// The binary COPY stream is malformed.
    pub const COPY_FORMAT: &str = "DPONE_PG_ROWBINARY_COPY_FORMAT";
    /// The artifact sink refused bytes (for a breached bound the store reports its own code).
    pub const ARTIFACT_WRITE: &str = "DPONE_PG_ROWBINARY_ARTIFACT_WRITE";
    /// The attempt's source bound allows no rows, or the COPY stream carried more tuples than
    /// it: the read is abandoned and nothing is sealed.
    pub const SOURCE_ROW_BOUND_EXCEEDED: &str = "DPONE_PG_ROWBINARY_SOURCE_ROW_BOUND_EXCEEDED";
    /// The attempt's source bound is below an empty binary COPY stream, or the COPY stream
    /// carried more payload bytes than it: the read is abandoned and nothing is sealed.
    pub const SOURCE_BYTE_BOUND_EXCEEDED: &str = "DPONE_PG_ROWBINARY_SOURCE_BYTE_BOUND_EXCEEDED";
    /// The attempt's deadline passed before the extraction ended: the read is abandoned and
    /// nothing is sealed (port kind `Interrupted`: the operation stays resumable).
    pub const ATTEMPT_DEADLINE_EXCEEDED: &str = "DPONE_PG_ROWBINARY_ATTEMPT_DEADLINE_EXCEEDED";
}

/// Why an extraction failed. Nothing is written to the sink before the column checks pass.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    /// No session.
    #[error("the PostgreSQL source did not accept a session (SQLSTATE {sqlstate})")]
    Connect {
        /// SQLSTATE, or `none` for a transport failure.
        sqlstate: String,
    },
    /// The TLS session failed.
    #[error("the PostgreSQL source TLS session failed: {reason}")]
    Tls {
        /// Classified reason (no endpoint, no path).
        reason: &'static str,
    },
    /// The CA bundle cannot be used.
    #[error(
        "the PostgreSQL source CA bundle (sslrootcert) cannot be read or holds no usable certificate"
    )]
    TlsRootCert,
    /// A statement failed.
    #[error("the source {step} failed (SQLSTATE {sqlstate})")]
    Query {
        /// Step.
        step: &'static str,
        /// SQLSTATE, or `none`.
        sqlstate: String,
    },
    /// The relation is missing or unreadable.
    #[error("the source relation does not exist or may not be read (SQLSTATE {sqlstate})")]
    RelationUnavailable {
        /// SQLSTATE.
        sqlstate: String,
    },
    /// A privilege is missing.
    #[error("the source principal lacks a privilege the read needs (SQLSTATE 42501)")]
    PermissionDenied,
    /// Row-level security applies.
    #[error("row-level security applies to the source principal on the relation")]
    RowSecurityActive,
    /// A partitioned parent.
    #[error("the source relation is a partitioned table")]
    RelationPartitioned,
    /// The name no longer resolves to the relation read.
    #[error("the source relation's name resolved to another relation during the read")]
    RelationChanged,
    /// A declared column is absent.
    #[error("declared column {column} does not exist in the source relation")]
    ColumnMissing {
        /// Column position (0-based).
        column: usize,
    },
    /// A declared type this source cannot produce.
    #[error("declared column {column} has a ClickHouse type this source cannot produce")]
    DeclaredTypeUnsupported {
        /// Column position.
        column: usize,
    },
    /// A PostgreSQL type this source does not read.
    #[error("source column {column} has a PostgreSQL type this source does not read")]
    TypeUnsupported {
        /// Column position.
        column: usize,
    },
    /// A PostgreSQL type that cannot become the declared type.
    #[error("source column {column} cannot be encoded as its declared ClickHouse type")]
    TypeMismatch {
        /// Column position.
        column: usize,
    },
    /// NULL in a non-Nullable column.
    #[error("row {row}: NULL in column {column}, which is not declared Nullable")]
    NullInNonNullable {
        /// Column position.
        column: usize,
        /// Row ordinal (1-based) in the snapshot.
        row: u64,
    },
    /// A value does not fit.
    #[error("row {row}: the value of column {column} does not fit its declared type")]
    ValueOutOfRange {
        /// Column position.
        column: usize,
        /// Row ordinal (1-based).
        row: u64,
    },
    /// A value would lose precision.
    #[error(
        "row {row}: the value of column {column} is not exactly representable in its declared type"
    )]
    ValueNotExact {
        /// Column position.
        column: usize,
        /// Row ordinal (1-based).
        row: u64,
    },
    /// Malformed COPY stream.
    #[error("the binary COPY stream is malformed: {0}")]
    CopyFormat(&'static str),
    /// The sink refused bytes.
    #[error("the artifact sink refused bytes")]
    ArtifactWrite,
    /// More tuples than the source bound (or a bound of zero rows, refused before the read).
    #[error(
        "the COPY stream carried more than the source bound of {max} rows; the read was abandoned"
    )]
    RowBoundExceeded {
        /// The bound.
        max: u64,
    },
    /// More COPY payload bytes than the source bound (or a bound below an empty COPY stream,
    /// refused before the read).
    #[error(
        "the COPY stream carried more than the source bound of {max} bytes; the read was abandoned"
    )]
    ByteBoundExceeded {
        /// The bound.
        max: u64,
    },
    /// The attempt's deadline passed before the extraction ended.
    #[error("the attempt's deadline passed before the source read ended; the read was abandoned")]
    DeadlineExceeded,
}

impl SourceError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Connect { .. } => codes::CONNECT,
            Self::Query { .. } => codes::QUERY,
            Self::Tls { .. } => codes::TLS,
            Self::TlsRootCert => codes::TLS_ROOT_CERT_INVALID,
            Self::RelationUnavailable { .. } => codes::RELATION_UNAVAILABLE,
            Self::PermissionDenied => codes::PERMISSION_DENIED,
            Self::RowSecurityActive => codes::ROW_SECURITY_ACTIVE,
            Self::RelationPartitioned => codes::RELATION_PARTITIONED,
            Self::RelationChanged => codes::RELATION_CHANGED,
            Self::ColumnMissing { .. } => codes::COLUMN_MISSING,
            Self::DeclaredTypeUnsupported { .. } => codes::DECLARED_TYPE_UNSUPPORTED,
            Self::TypeUnsupported { .. } => codes::TYPE_UNSUPPORTED,
            Self::TypeMismatch { .. } => codes::TYPE_MISMATCH,
            Self::NullInNonNullable { .. } => codes::NULL_IN_NON_NULLABLE,
            Self::ValueOutOfRange { .. } => codes::VALUE_OUT_OF_RANGE,
            Self::ValueNotExact { .. } => codes::VALUE_NOT_EXACT,
            Self::CopyFormat(_) => codes::COPY_FORMAT,
            Self::ArtifactWrite => codes::ARTIFACT_WRITE,
            Self::RowBoundExceeded { .. } => codes::SOURCE_ROW_BOUND_EXCEEDED,
            Self::ByteBoundExceeded { .. } => codes::SOURCE_BYTE_BOUND_EXCEEDED,
            Self::DeadlineExceeded => codes::ATTEMPT_DEADLINE_EXCEEDED,
        }
    }

    /// The redacted port error the engine sees: transport failures are `Unavailable` (the same
    /// operation may retry), a passed deadline is `Interrupted` (the run stops; the operation
    /// resumes later), everything else is `Rejected`.
    pub fn port_error(&self) -> PortError {
        match self {
            Self::Connect { .. } | Self::Query { .. } => PortError::unavailable(self.code()),
            Self::DeadlineExceeded => PortError::new(PortErrorKind::Interrupted, self.code()),
            _ => PortError::rejected(self.code()),
        }
    }

    pub(crate) fn from_pg(step: &'static str, e: &tokio_postgres::Error) -> Self {
        let sqlstate = sqlstate(e);
        match (step, e.code()) {
            ("connect", _) => Self::Connect { sqlstate },
            // undefined_table, invalid_schema_name
            (_, Some(c)) if matches!(c.code(), "42P01" | "3F000") => {
                Self::RelationUnavailable { sqlstate }
            }
            // insufficient_privilege (also raised by row-level security under row_security = off)
            (_, Some(c)) if c.code() == "42501" => Self::PermissionDenied,
            _ => Self::Query { step, sqlstate },
        }
    }
}

fn sqlstate(e: &tokio_postgres::Error) -> String {
    e.code()
        .map(|c| c.code().to_owned())
        .unwrap_or_else(|| "none".to_owned())
}
