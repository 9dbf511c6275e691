//! [`PgRowBinarySource`]: extracts one PostgreSQL relation, once, in a `REPEATABLE READ READ
//! ONLY` snapshot, and writes it as ClickHouse `RowBinary` of the declared schema.
//!
//! Order on one connection:
//!
//! 1. `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY` with the pinned settings
//!    ([`SESSION_SETTINGS`]): `row_security = off` (a policy raises instead of filtering rows),
//!    fixed `DateStyle`, `IntervalStyle`, `TimeZone`, `extra_float_digits`, `bytea_output` and
//!    `search_path = pg_catalog`;
//! 2. `LOCK TABLE ONLY "schema"."table" IN ACCESS SHARE MODE`, before the snapshot exists (a
//!    `LOCK` takes no snapshot), so no `ALTER`, `DROP` or `TRUNCATE` can commit until extraction
//!    ends;
//! 3. the catalog query (which fixes the snapshot) binds the name to one relation OID (the same
//!    in the snapshot and in the current catalog, and locked by this session), refuses a
//!    partitioned table and a relation row-level security applies to, and reads each declared
//!    column's type by that OID; every column must exist and its type must encode as the
//!    declared ClickHouse type (see [`crate::types`]). Nothing is written to the sink before
//!    these checks pass;
//! 4. one binary `COPY (SELECT "c1", … FROM ONLY "schema"."table") TO STDOUT` (never rows of
//!    inheritance children), decoded tuple by tuple, converted exactly (no rounding, no
//!    truncation) and written in blocks of about 1 MiB; a write the sink refuses (the artifact
//!    store's byte bound) stops at once;
//! 5. the name is resolved again: if it no longer names the OID read, the extraction fails
//!    (a rename during the read could have made COPY read another relation) and nothing is
//!    sealed;
//! 6. `ROLLBACK`.
//!
//! ## Source bound (nonproduction reservations)
//!
//! [`PgRowBinarySource::with_bound`] sets a finite [`SourceBound`] (rows and source bytes)
//! reserved for the attempt; without one nothing changes. A bound of zero rows, or of fewer
//! bytes than an empty binary COPY stream ([`MIN_COPY_BYTES`]), is refused before any
//! connection. Catalog statistics are not consulted (an estimate proves nothing either way;
//! the streaming check is the authority). While streaming, each COPY chunk's bytes are counted
//! before it is decoded, and each tuple before it is converted or written: the COPY payload may
//! reach the bound exactly, one byte or tuple more fails with
//! [`SourceError::ByteBoundExceeded`] / [`SourceError::RowBoundExceeded`]. The COPY is then
//! abandoned by closing the connection (no `ROLLBACK` waiting for the rest of the stream), and
//! the error reaches [`dpone_adapter_clickhouse::StoreArtifactSource`], which drops the
//! unsealed writer: its temporary file is removed and no receipt is written. The query is the
//! same with or without a bound (no `LIMIT`).
//!
//! ## Deadline (nonproduction reservations)
//!
//! [`PgRowBinarySource::with_deadline`] sets the attempt's deadline (a monotonic instant). A
//! deadline already passed refuses the read before any connection; otherwise the whole
//! extraction (connect, lock, catalog, COPY, re-check) runs under a Tokio timeout at that
//! instant. When it fires, the extraction future is dropped at its await point: the connection
//! closes (the server aborts the COPY and the snapshot), the unsealed writer is dropped by
//! [`dpone_adapter_clickhouse::StoreArtifactSource`] and the error is
//! [`SourceError::DeadlineExceeded`], whose port kind is `Interrupted` (the coordinator stops
//! and the operation stays resumable). Rows and bytes are counted in place, so
//! [`PgRowBinarySource::last_measurement`] still reports what was read up to the last chunk.
//!
//! Source bytes are the binary COPY payload bytes as received, after the typed projection of
//! the declared columns and before any compression: *not* the `RowBinary` artifact's bytes
//! (which the artifact store's `max_source_bytes` bounds separately).
//! [`PgRowBinarySource::last_measurement`] reports rows and source bytes of the last
//! extraction, also for a refused or failed one (an incomplete observation).
//!
//! The source owns a single-threaded Tokio runtime and blocks on it, like the ClickHouse
//! adapter: call it outside any other Tokio runtime. TLS follows [`PgRowBinarySource::with_tls`]
//! (the registry's `sslmode` and `sslrootcert`, see `dpone-pg-tls`); without it the session is
//! plain.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use dpone_adapter_clickhouse::Extract;
use dpone_engine_clickhouse::canonical::{ColumnType, RowBinaryWriter, Value, column_types};
use dpone_engine_clickhouse::contracts::Schema;
use dpone_engine_clickhouse::ports::PortError;
use dpone_pg_tls::Mode as TlsMode;
use futures_util::StreamExt;
use tokio_postgres::{Client, Config};

use crate::copy::CopyReader;
use crate::error::SourceError;
use crate::types::{FieldError, PgType, convert, decimal_precision, producible};

/// Bytes of `RowBinary` gathered before one write to the sink.
const BLOCK: usize = 1 << 20;
/// Bytes of an empty binary COPY stream: the 19-byte header and the 2-byte trailer.
pub const MIN_COPY_BYTES: u64 = 21;

/// A finite source-export bound reserved for one attempt: the most tuples and binary COPY
/// payload bytes the read may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceBound {
    /// Most tuples.
    pub max_rows: u64,
    /// Most COPY payload bytes (header, tuples and trailer, before any compression).
    pub max_bytes: u64,
}

impl SourceBound {
    /// Refuses, before any read, a bound that authorizes no export.
    pub fn check_before_read(&self) -> Result<(), SourceError> {
        if self.max_rows == 0 {
            return Err(SourceError::RowBoundExceeded { max: 0 });
        }
        if self.max_bytes < MIN_COPY_BYTES {
            return Err(SourceError::ByteBoundExceeded {
                max: self.max_bytes,
            });
        }
        Ok(())
    }
}

/// What one extraction read: tuples decoded and COPY payload bytes received (for a refused
/// read, up to and including the chunk that breached the bound), and whether the extraction
/// completed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceMeasurement {
    /// Tuples decoded.
    pub rows: u64,
    /// COPY payload bytes received.
    pub source_bytes: u64,
    /// The extraction succeeded (otherwise an incomplete observation).
    pub complete: bool,
}

/// Settings pinned for the snapshot transaction (`SET LOCAL`, sent with `BEGIN`).
/// `row_security = off` makes a row-level security policy raise instead of filtering.
pub const SESSION_SETTINGS: &str = "SET LOCAL row_security = off; \
     SET LOCAL \"DateStyle\" = 'ISO, MDY'; \
     SET LOCAL \"IntervalStyle\" = 'postgres'; \
     SET LOCAL \"TimeZone\" = 'UTC'; \
     SET LOCAL extra_float_digits = 3; \
     SET LOCAL bytea_output = 'hex'; \
     SET LOCAL search_path = pg_catalog";

/// A connection configuration built from registry fields (the composition root passes the
/// password it resolved from the environment).
pub fn pg_config(
    host: &str,
    port: u16,
    database: &str,
    user: &str,
    password: Option<&str>,
) -> Config {
    let mut c = Config::new();
    if host.starts_with('/') {
        c.host_path(host);
    } else {
        c.host(host);
    }
    c.port(port)
        .dbname(database)
        .user(user)
        .application_name("dpone-host")
        .connect_timeout(Duration::from_secs(30));
    if let Some(pw) = password {
        c.password(pw);
    }
    c
}

/// Checks, without any I/O, that every declared column type is in the canonical profile and
/// that some PostgreSQL type this source reads encodes as it.
pub fn check_declared(schema: &Schema) -> Result<(), SourceError> {
    for (i, c) in schema.columns.iter().enumerate() {
        let ok = dpone_engine_clickhouse::canonical::parse_type(&c.type_name)
            .is_some_and(|t| producible(t.scalar));
        if !ok {
            return Err(SourceError::DeclaredTypeUnsupported { column: i });
        }
    }
    Ok(())
}

/// The PostgreSQL source of the ClickHouse artifact.
pub struct PgRowBinarySource {
    config: Config,
    tls: (TlsMode, Option<String>),
    schema_name: String,
    table: String,
    bound: Option<SourceBound>,
    deadline: Option<std::time::Instant>,
    last_error: Mutex<Option<SourceError>>,
    last_measurement: Mutex<Option<SourceMeasurement>>,
}

impl std::fmt::Debug for PgRowBinarySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config holds the password and the endpoint: never printed.
        f.debug_struct("PgRowBinarySource").finish_non_exhaustive()
    }
}

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// One declared column, resolved against the catalog.
struct Plan {
    pg: PgType,
    target: ColumnType,
    precision: Option<u32>,
}

impl PgRowBinarySource {
    /// A source reading `schema_name.table` through `config`.
    pub fn new(config: Config, schema_name: &str, table: &str) -> Self {
        Self {
            config,
            tls: (TlsMode::Disable, None),
            schema_name: schema_name.to_owned(),
            table: table.to_owned(),
            bound: None,
            deadline: None,
            last_error: Mutex::new(None),
            last_measurement: Mutex::new(None),
        }
    }

    /// Abandons any extraction still running at `deadline` (see the module docs).
    pub fn with_deadline(mut self, deadline: std::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Enforces `bound` on every extraction (see the module docs).
    pub fn with_bound(mut self, bound: SourceBound) -> Self {
        self.bound = Some(bound);
        self
    }

    /// Rows and COPY payload bytes of the last extraction (`None` before the first, or when it
    /// ended before the COPY started, e.g. a bound refused before the read).
    pub fn last_measurement(&self) -> Option<SourceMeasurement> {
        *self
            .last_measurement
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Connects with TLS `mode`, trusting the CA bundle at `root_cert` (else the system's
    /// roots) for `verify-ca` / `verify-full`.
    pub fn with_tls(mut self, mode: TlsMode, root_cert: Option<&str>) -> Self {
        self.tls = (mode, root_cert.map(str::to_owned));
        self
    }

    /// The detailed error of the last failed extraction (the engine sees only its code).
    pub fn last_error(&self) -> Option<SourceError> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Extracts the relation once into `out` as `RowBinary` of `schema`; returns the row count.
    pub fn extract_to(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, SourceError> {
        let mut measured: Option<SourceMeasurement> = None;
        let result = self.extract_inner(schema, out, &mut measured);
        if let Some(m) = &mut measured {
            m.complete = result.is_ok();
        }
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = result.as_ref().err().cloned();
        *self
            .last_measurement
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = measured;
        result
    }

    fn extract_inner(
        &self,
        schema: &Schema,
        out: &mut dyn Write,
        measured: &mut Option<SourceMeasurement>,
    ) -> Result<u64, SourceError> {
        check_declared(schema)?;
        if let Some(b) = &self.bound {
            b.check_before_read()?;
        }
        let types =
            column_types(schema).map_err(|_| SourceError::DeclaredTypeUnsupported { column: 0 })?;
        if self
            .deadline
            .is_some_and(|d| std::time::Instant::now() >= d)
        {
            return Err(SourceError::DeadlineExceeded);
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|_| SourceError::Connect {
                sqlstate: "none".into(),
            })?;
        let work = async {
            // The one opener: the driver's TLS mode follows the chosen mode (never a plaintext
            // fallback); channel binding required under TLS.
            let (client, driver) =
                dpone_pg_tls::connect(&self.config, self.tls.0, self.tls.1.as_deref())
                    .await
                    .map_err(|e| match e {
                        dpone_pg_tls::ConnectError::RootCert(_) => SourceError::TlsRootCert,
                        dpone_pg_tls::ConnectError::Db(e) => SourceError::from_pg("connect", &e),
                        other => SourceError::Tls {
                            reason: other.tls_reason().unwrap_or("the TLS handshake failed"),
                        },
                    })?;
            let result = self.snapshot(&client, schema, types, out, measured).await;
            match &result {
                // A bound breach abandons the COPY: closing the connection (below) makes the
                // server abort the statement, instead of a ROLLBACK that would first wait for
                // the rest of the stream.
                Err(
                    SourceError::RowBoundExceeded { .. } | SourceError::ByteBoundExceeded { .. },
                ) => {}
                // Best effort: the server also rolls back when the session ends.
                Err(_) => {
                    let _ = client.batch_execute("ROLLBACK").await;
                }
                Ok(_) => {}
            }
            drop(client);
            driver.abort();
            result
        };
        match self.deadline {
            None => rt.block_on(work),
            // At the deadline the extraction is dropped where it waits: the client closes with
            // it, the server aborts the COPY and the snapshot; what was counted stays counted.
            Some(d) => rt.block_on(async {
                tokio::time::timeout_at(tokio::time::Instant::from_std(d), work)
                    .await
                    .unwrap_or(Err(SourceError::DeadlineExceeded))
            }),
        }
    }

    async fn snapshot(
        &self,
        client: &Client,
        schema: &Schema,
        types: Vec<ColumnType>,
        out: &mut dyn Write,
        measured: &mut Option<SourceMeasurement>,
    ) -> Result<u64, SourceError> {
        let relation = format!("{}.{}", ident(&self.schema_name), ident(&self.table));
        client
            .batch_execute(&format!(
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; {SESSION_SETTINGS}"
            ))
            .await
            .map_err(|e| SourceError::from_pg("begin", &e))?;
        client
            .batch_execute(&format!("LOCK TABLE ONLY {relation} IN ACCESS SHARE MODE"))
            .await
            .map_err(|e| SourceError::from_pg("lock", &e))?;
        // Fixes the snapshot: one OID for the name, in the snapshot and in the current catalog
        // (which LOCK and COPY resolve against), locked by this session.
        let bind = client
            .query_one(
                "SELECT (SELECT c.oid FROM pg_catalog.pg_class c \
                           JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                          WHERE n.nspname = $1 AND c.relname = $2), \
                        pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text))::oid",
                &[&self.schema_name, &self.table],
            )
            .await
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let snapshot_oid: Option<u32> = bind
            .try_get(0)
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let current_oid: Option<u32> = bind
            .try_get(1)
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let oid = match (snapshot_oid, current_oid) {
            (Some(a), Some(b)) if a == b => a,
            (None, None) => {
                return Err(SourceError::RelationUnavailable {
                    sqlstate: "42P01".into(),
                });
            }
            _ => return Err(SourceError::RelationChanged),
        };
        let facts = client
            .query_one(
                "SELECT c.relkind::text, pg_catalog.row_security_active(c.oid), \
                        EXISTS (SELECT 1 FROM pg_catalog.pg_locks l \
                                 WHERE l.locktype = 'relation' AND l.relation = c.oid \
                                   AND l.pid = pg_catalog.pg_backend_pid() \
                                   AND l.mode = 'AccessShareLock' AND l.granted) \
                   FROM pg_catalog.pg_class c WHERE c.oid = $1",
                &[&oid],
            )
            .await
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let relkind: String = facts
            .try_get(0)
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let row_security: bool = facts
            .try_get(1)
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let locked: bool = facts
            .try_get(2)
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        if !locked {
            return Err(SourceError::RelationChanged);
        }
        if relkind == "p" {
            return Err(SourceError::RelationPartitioned);
        }
        if row_security {
            return Err(SourceError::RowSecurityActive);
        }
        let rows = client
            .query(
                "SELECT a.attname::text AS name, \
                        CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE a.atttypid END AS typid \
                   FROM pg_catalog.pg_attribute a \
                   JOIN pg_catalog.pg_type t ON t.oid = a.atttypid \
                  WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped",
                &[&oid],
            )
            .await
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let catalog: Vec<(String, u32)> = rows
            .iter()
            .map(|r| Ok((r.try_get::<_, String>(0)?, r.try_get::<_, u32>(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let mut plan = Vec::with_capacity(types.len());
        for (i, (col, ty)) in schema.columns.iter().zip(&types).enumerate() {
            let (_, oid) = catalog
                .iter()
                .find(|(n, _)| n == &col.name)
                .ok_or(SourceError::ColumnMissing { column: i })?;
            let pg = PgType::from_oid(*oid).ok_or(SourceError::TypeUnsupported { column: i })?;
            if !pg.encodes_as(ty.scalar) {
                return Err(SourceError::TypeMismatch { column: i });
            }
            plan.push(Plan {
                pg,
                target: *ty,
                precision: decimal_precision(&col.type_name),
            });
        }

        let columns: Vec<String> = schema.columns.iter().map(|c| ident(&c.name)).collect();
        let copy = format!(
            "COPY (SELECT {} FROM ONLY {relation}) TO STDOUT (FORMAT binary)",
            columns.join(", ")
        );
        let stream = client
            .copy_out(&copy)
            .await
            .map_err(|e| SourceError::from_pg("copy", &e))?;
        futures_util::pin_mut!(stream);
        let mut reader = CopyReader::new(plan.len());
        let mut writer = RowBinaryWriter::new(types.clone());
        let mut values: Vec<Value> = Vec::with_capacity(plan.len());
        let mut rows: u64 = 0;
        let mut pending = 0usize;
        let bound = self.bound;
        let measure = measured.insert(SourceMeasurement::default());
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| SourceError::from_pg("copy", &e))?;
            measure.source_bytes += chunk.len() as u64;
            if let Some(b) = bound
                && measure.source_bytes > b.max_bytes
            {
                return Err(SourceError::ByteBoundExceeded { max: b.max_bytes });
            }
            reader.push(&chunk, |fields| {
                rows += 1;
                measure.rows = rows;
                if let Some(b) = bound
                    && rows > b.max_rows
                {
                    return Err(SourceError::RowBoundExceeded { max: b.max_rows });
                }
                values.clear();
                for (i, (p, raw)) in plan.iter().zip(fields).enumerate() {
                    let v = convert(p.pg, p.target, p.precision, *raw)
                        .map_err(|e| field_error(e, i, rows))?;
                    pending += raw.map_or(1, |r| r.len() + 2);
                    values.push(v);
                }
                writer
                    .row(&values)
                    .map_err(|m| SourceError::ValueOutOfRange {
                        column: m.column,
                        row: rows,
                    })?;
                if pending >= BLOCK {
                    let full = std::mem::replace(&mut writer, RowBinaryWriter::new(types.clone()));
                    out.write_all(&full.finish())
                        .map_err(|_| SourceError::ArtifactWrite)?;
                    pending = 0;
                }
                Ok(())
            })?;
        }
        reader.finish()?;
        // COPY resolved the name again: it must still name the relation bound above.
        let again = client
            .query_one(
                "SELECT pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text))::oid",
                &[&self.schema_name, &self.table],
            )
            .await
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        let again: Option<u32> = again
            .try_get(0)
            .map_err(|e| SourceError::from_pg("catalog", &e))?;
        if again != Some(oid) {
            return Err(SourceError::RelationChanged);
        }
        out.write_all(&writer.finish())
            .and_then(|()| out.flush())
            .map_err(|_| SourceError::ArtifactWrite)?;
        client
            .batch_execute("ROLLBACK")
            .await
            .map_err(|e| SourceError::from_pg("rollback", &e))?;
        Ok(rows)
    }
}

fn field_error(e: FieldError, column: usize, row: u64) -> SourceError {
    match e {
        FieldError::Null => SourceError::NullInNonNullable { column, row },
        FieldError::OutOfRange => SourceError::ValueOutOfRange { column, row },
        FieldError::NotExact => SourceError::ValueNotExact { column, row },
        FieldError::Malformed => SourceError::CopyFormat("a field does not have its type's layout"),
    }
}

impl Extract for &PgRowBinarySource {
    fn extract(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, PortError> {
        self.extract_to(schema, out).map_err(|e| e.port_error())
    }
}
