//! The PostgreSQL source of the ClickHouse publication artifact.
//!
//! [`PgRowBinarySource`] reads one relation, once, in a `REPEATABLE READ READ ONLY` snapshot and
//! encodes it as ClickHouse `RowBinary` of the manifest's declared columns, converting each value
//! exactly (see [`types`] for the mapping; anything lossy or unmapped is refused with a stable
//! [`SourceError::code`] before any byte is written). As an [`dpone_adapter_clickhouse::Extract`]
//! it streams into the content-addressed artifact store through
//! [`dpone_adapter_clickhouse::StoreArtifactSource`], which bounds it by `max_source_bytes` and
//! seals the receipt `{sha256, byte_size, row_count, schema_digest}`.
//!
//! Errors reaching the engine are redacted port errors whose class is the stable code: no row
//! values, names, endpoints or credentials.

mod copy;
mod error;
mod source;
pub mod types;

/// The TLS modes of [`PgRowBinarySource::with_tls`].
pub use dpone_pg_tls::Mode as TlsMode;
pub use error::{SourceError, codes};
pub use source::{
    MIN_COPY_BYTES, PgRowBinarySource, SourceBound, SourceMeasurement, check_declared, pg_config,
};
/// The driver's connection configuration, re-exported so callers need no direct dependency.
pub use tokio_postgres::Config as PgConfig;
