//! The source boundary: one `REPEATABLE READ READ ONLY` snapshot on a PostgreSQL source.
//!
//! Order on one connection:
//!
//! 1. `BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY` and, for this transaction, the pinned
//!    session settings ([`SESSION_SETTINGS`]): `row_security = off` (a row-level security policy
//!    then raises instead of silently filtering keys), and fixed `DateStyle`, `IntervalStyle`,
//!    `TimeZone`, `extra_float_digits`, `bytea_output` and `search_path`, so no text form the
//!    read depends on (the `column_values` scope, the xmin window) varies with role or
//!    database defaults;
//! 2. `LOCK TABLE ONLY "schema"."relation" IN ACCESS SHARE MODE` *before* the snapshot exists
//!    (a `LOCK` statement takes no snapshot), so no DROP, TRUNCATE or rewrite can commit between
//!    the snapshot and the end of extraction;
//! 3. the first query fixes the snapshot and reads, under the lock: recovery role, database
//!    name/OID, effective and session principal names/OIDs, schema and relation OIDs (exact
//!    names, both in the snapshot and in the current catalog), that this session holds the lock
//!    on the *pinned* OID, the relation kind (a partitioned table is refused), whether row-level
//!    security applies to the principal (refused), `standard_conforming_strings`, and
//!    `pg_current_snapshot()` with its xmin `U` and xmax `H` as 64-bit `xid8`. Version-2
//!    (`catalog_identity`) never calls a control, WAL-file or statistics function (a version-2
//!    selection carrying a timeline or system identifier is refused before any I/O); version 1
//!    additionally reads `pg_control_system()` and the timeline;
//! 4. the column projection (built-in types only, so binary COPY round-trips losslessly);
//! 5. epoch and freeze checks against the previous checkpoint (fail closed);
//! 6. binary `COPY (SELECT … FROM ONLY "schema"."relation" …) TO STDOUT` of the delta
//!    `[previous, H)` (or all rows for a baseline) and, for an incremental run, of the complete
//!    key set — streamed to artifacts, never held whole. `ONLY`: rows of inheritance children
//!    are never read;
//! 7. after each COPY the names are resolved again in the current catalog: a schema renamed
//!    (or another relation put in its place) since step 3 fails the read (the artifacts are
//!    removed), so a COPY that read a relation other than the pinned one is caught unless the
//!    rename was reversed before the next check (which needs the schemas' owner);
//! 8. `ROLLBACK` (the relation lock is held until both artifacts are complete).
//!
//! ## Source bound (nonproduction reservations)
//!
//! [`PgSource::with_bound`] sets a finite [`SourceBound`] (rows and source bytes) that the
//! attempt reserved before the read; without one the source behaves exactly as before. The bound
//! is enforced twice:
//!
//! - *before the read*: a bound of zero rows, or of fewer bytes than an empty binary COPY
//!   stream ([`MIN_COPY_BYTES`]), authorizes no export and is refused before `BEGIN`, without
//!   a connection. Catalog statistics (`reltuples`, relation size) are *not* consulted: an
//!   estimate neither proves that a relation fits nor that it does not (the spec: "expected
//!   row counts or statistics alone do not" establish a bound), so the streaming check is the
//!   only authority;
//! - *while streaming*: every COPY chunk is counted before it is framed or written; the
//!   cumulative payload bytes and tuples of the attempt's COPY statements (the delta and, for
//!   an incremental run, the key set: both are source reads of one attempt) may reach the
//!   bound exactly; one byte or one tuple more fails with
//!   [`ErrorCode::SourceByteBoundExceeded`] / [`ErrorCode::SourceRowBoundExceeded`]. The COPY
//!   is abandoned by closing the connection (the server aborts the statement and rolls the
//!   snapshot back; no `ROLLBACK` waits for the rest of the stream), the unfinished artifact's
//!   temporary file is removed and any artifact already published by this attempt is removed.
//!   Rows are never clipped with `LIMIT`: the query is the same with or without a bound.
//!
//! ## Deadline (nonproduction reservations)
//!
//! [`PgSource::with_deadline`] sets the attempt's deadline (a monotonic instant; the reservation's
//! `attempt_seconds` counted from its reservation time). A deadline already passed refuses the
//! read before a connection. Otherwise the connection and the extraction run under Tokio
//! timeouts at that instant, and so does each wait for the next COPY chunk: when it fires the
//! read stops where it waits (chunks already received stay counted), the connection is closed
//! as for a bound breach, the unfinished artifact's temporary file and any artifact this read
//! already published are removed, and the error is [`ErrorCode::AttemptDeadlineExceeded`].
//!
//! Source bytes are the binary COPY payload bytes as received (after the typed column
//! projection, before any compression), which for this route are exactly the artifact bytes:
//! [`PayloadReceipt::artifact`]`.bytes` and [`PayloadReceipt::rows`] of the envelope are the
//! measurement, so the envelope needs no new field. [`PgSource::last_measurement`] reports the
//! same totals, also for a refused or failed read (an incomplete observation).
//!
//! The delta filter compares the row's 32-bit `xmin` with the window `[previous, H)` modulo
//! 2^32. This is exact because `H - previous < 2^31` is enforced (otherwise the run fails with
//! `DPONE_XMIN_SOURCE_FREEZE_UNCERTAIN`) and PostgreSQL keeps the raw `xmin` of frozen tuples;
//! an ancient frozen tuple aliasing into the window is only replayed, which is a strict no-op.

use crate::conn::{Conn, connect};
use crate::sql::{db_error, ident, literal, qualified};
use dpone_engine_xmin::artifact::{ArtifactStore, io_error};
use dpone_engine_xmin::copy_binary::FrameChecker;
use dpone_engine_xmin::envelope::{
    ARTIFACT_FORMAT, ENVELOPE_SCHEMA, PayloadReceipt, SnapshotEnvelope, SourceColumn, SourceLineage,
};
use dpone_engine_xmin::identity::sha256_canonical;
use dpone_engine_xmin::manifest::Scope;
use dpone_engine_xmin::ports::{ExtractRequest, SourcePort};
use dpone_engine_xmin::registry::{AuthorityProfile, RecoveryRole, SelectedSourceAuthority};
use dpone_engine_xmin::validate::{check_horizons, frame_error_to_xmin};
use dpone_engine_xmin::{ErrorCode, Result, XminError};
use dpone_policy_model::guard::LoadKind;
use futures_util::StreamExt;
use std::io::Write;

/// First OID assigned to user objects; lower OIDs are built-in types.
const FIRST_NORMAL_OBJECT_ID: u32 = 16384;
/// Bytes gathered before checking and writing.
const BLOCK: usize = 1 << 20;
/// XIDs below this are special (invalid, bootstrap, frozen).
const FIRST_NORMAL_XID: u64 = 3;
/// Bytes of an empty binary COPY stream: the 19-byte header and the 2-byte trailer.
pub const MIN_COPY_BYTES: u64 = 21;

/// A finite source-export bound reserved for one attempt: the most tuples and COPY payload
/// bytes its reads may carry (cumulative over the attempt's COPY statements).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SourceBound {
    /// Most tuples.
    pub max_rows: u64,
    /// Most COPY payload bytes (header, tuples and trailer, before any compression).
    pub max_bytes: u64,
}

impl SourceBound {
    /// Refuses, before any read, a bound that authorizes no export.
    pub fn check_before_read(&self) -> Result<()> {
        if self.max_rows == 0 {
            return Err(XminError::new(
                ErrorCode::SourceRowBoundExceeded,
                "the source bound allows no rows; the read was not started",
            ));
        }
        if self.max_bytes < MIN_COPY_BYTES {
            return Err(XminError::new(
                ErrorCode::SourceByteBoundExceeded,
                format!(
                    "the source bound of {} bytes is below an empty COPY stream; the read was \
                     not started",
                    self.max_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// What one extraction read: tuples framed and COPY payload bytes received over all its COPY
/// statements (for a refused read, up to and including the chunk that breached the bound), and
/// whether the extraction returned an envelope.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceMeasurement {
    /// Tuples received.
    pub rows: u64,
    /// COPY payload bytes received.
    pub source_bytes: u64,
    /// The extraction succeeded (otherwise an incomplete observation).
    pub complete: bool,
}

/// Counts an attempt's reads against its optional bound and deadline.
#[derive(Debug, Default)]
struct Meter {
    bound: Option<SourceBound>,
    deadline: Option<tokio::time::Instant>,
    /// Rows and bytes of COPY statements already finished.
    rows: u64,
    bytes: u64,
    /// Artifacts this extraction published (removed when the deadline abandons it).
    published: Vec<String>,
}

fn deadline_exceeded() -> XminError {
    XminError::new(
        ErrorCode::AttemptDeadlineExceeded,
        "the attempt's deadline passed before the source read ended; the read was abandoned",
    )
}

impl Meter {
    /// Admits `n` more bytes on top of the finished statements' and the current statement's
    /// `so_far`.
    fn admit_bytes(&self, so_far: u64, n: usize) -> Result<()> {
        if let Some(b) = self.bound {
            let total = self.bytes.saturating_add(so_far).saturating_add(n as u64);
            if total > b.max_bytes {
                return Err(XminError::new(
                    ErrorCode::SourceByteBoundExceeded,
                    format!(
                        "the COPY streams carried more than the source bound of {} bytes; the \
                         read was abandoned",
                        b.max_bytes
                    ),
                ));
            }
        }
        Ok(())
    }

    fn admit_rows(&self, so_far: u64) -> Result<()> {
        if let Some(b) = self.bound
            && self.rows.saturating_add(so_far) > b.max_rows
        {
            return Err(XminError::new(
                ErrorCode::SourceRowBoundExceeded,
                format!(
                    "the COPY streams carried more than the source bound of {} rows; the read \
                     was abandoned",
                    b.max_rows
                ),
            ));
        }
        Ok(())
    }
}

/// Settings pinned for the snapshot transaction (`SET LOCAL`, sent with `BEGIN` in one round
/// trip). `row_security = off` makes a row-level security policy raise instead of filtering.
pub const SESSION_SETTINGS: &str = "SET LOCAL row_security = off; \
     SET LOCAL \"DateStyle\" = 'ISO, MDY'; \
     SET LOCAL \"IntervalStyle\" = 'postgres'; \
     SET LOCAL \"TimeZone\" = 'UTC'; \
     SET LOCAL extra_float_digits = 3; \
     SET LOCAL bytea_output = 'hex'; \
     SET LOCAL search_path = pg_catalog";

/// The PostgreSQL source port.
#[derive(Clone, Debug, Default)]
pub struct PgSource {
    /// Called with the number of bytes received after each COPY chunk (progress display).
    progress: Option<fn(u64)>,
    /// The attempt's reserved source bound, if any.
    bound: Option<SourceBound>,
    /// The attempt's deadline, if any.
    deadline: Option<std::time::Instant>,
    /// What the last extraction read.
    last: Option<SourceMeasurement>,
}

impl PgSource {
    /// A source without progress reporting.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reports received bytes to `f` (the CLI draws a progress bar on a terminal).
    pub fn with_progress(mut self, f: fn(u64)) -> Self {
        self.progress = Some(f);
        self
    }

    /// Enforces `bound` on every extraction (see the module docs); without it nothing is
    /// bounded beyond the artifact store.
    pub fn with_bound(mut self, bound: SourceBound) -> Self {
        self.bound = Some(bound);
        self
    }

    /// Abandons an extraction still running at `deadline` (see the module docs).
    pub fn with_deadline(mut self, deadline: std::time::Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Rows and COPY payload bytes the last extraction read (`None` before the first, or when
    /// it was refused before the read).
    pub fn last_measurement(&self) -> Option<SourceMeasurement> {
        self.last
    }
}

fn src_err(code: ErrorCode, step: &str, e: &tokio_postgres::Error) -> XminError {
    db_error(code, step, e)
}

/// Maps an error of a statement reading the relation: missing objects and missing privileges
/// get their own codes; everything else is an extraction failure (SQLSTATE only).
fn read_error(step: &str, e: &tokio_postgres::Error) -> XminError {
    match e.code().map(|s| s.code()) {
        Some("42P01") | Some("3F000") => XminError::new(
            ErrorCode::SourceRelationMissing,
            format!("{step}: source relation or schema does not exist"),
        ),
        Some("42501") => XminError::new(
            ErrorCode::SourcePermissionDenied,
            format!(
                "{step}: the source principal lacks a privilege (SQLSTATE 42501); see the \
                 documented grants"
            ),
        ),
        _ => src_err(ErrorCode::SourceExtractionFailed, step, e),
    }
}

/// After COPY: the schema and relation names still resolve, in the current catalog, to the
/// pinned OIDs (a rename during the read would have made COPY read another relation).
async fn verify_names_current(
    c: &tokio_postgres::Client,
    a: &SelectedSourceAuthority,
) -> Result<()> {
    let row = c
        .query_one(
            "SELECT pg_catalog.to_regnamespace(pg_catalog.quote_ident($1::text))::oid, \
                    pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text))::oid",
            &[&a.schema, &a.relation],
        )
        .await
        .map_err(|e| read_error("re-verify names", &e))?;
    let schema_oid: Option<u32> = row.get(0);
    let rel_oid: Option<u32> = row.get(1);
    if schema_oid != Some(a.relation_pin.schema_oid) || rel_oid != Some(a.relation_pin.relation_oid)
    {
        return Err(XminError::new(
            ErrorCode::SourceRelationPinMismatch,
            "schema or relation name no longer resolves to its signed pin after the read",
        ));
    }
    Ok(())
}

fn mismatch(code: ErrorCode, what: &str) -> XminError {
    XminError::new(code, format!("{what} differs from its signed pin"))
}

/// What the verification query observed.
struct Observed {
    snapshot_text: String,
    u: u64,
    h: u64,
    /// What the profile read of the cluster's lineage (recorded by the receipt).
    lineage: SourceLineage,
}

impl SourcePort for PgSource {
    async fn extract(
        &mut self,
        req: &ExtractRequest<'_>,
        store: &dyn ArtifactStore,
    ) -> Result<SnapshotEnvelope> {
        self.last = None;
        check_profile(req.authority)?;
        if let Some(b) = &self.bound {
            b.check_before_read()?;
        }
        let deadline = self.deadline.map(tokio::time::Instant::from_std);
        if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
            return Err(deadline_exceeded());
        }
        let mut meter = Meter {
            bound: self.bound,
            deadline,
            ..Meter::default()
        };
        let connected = within(
            deadline,
            connect(
                req.endpoint,
                ErrorCode::SourceConnect,
                "dpone-host xmin source",
            ),
        )
        .await;
        let conn = connected?;
        let result = within(
            deadline,
            extract_on(&conn, req, store, self.progress, &mut meter),
        )
        .await;
        self.last = Some(SourceMeasurement {
            rows: meter.rows,
            source_bytes: meter.bytes,
            complete: result.is_ok(),
        });
        match &result {
            // A bound breach or the deadline abandons the COPY: closing the connection makes
            // the server abort the statement and the snapshot, instead of a ROLLBACK that would
            // first wait for the rest of the stream. The deadline may have stopped the read
            // between statements: the artifacts this read already published are removed.
            Err(e) if e.code() == ErrorCode::AttemptDeadlineExceeded => {
                drop(conn);
                for sha in &meter.published {
                    let _ = store.remove(sha);
                }
            }
            Err(e)
                if matches!(
                    e.code(),
                    ErrorCode::SourceRowBoundExceeded | ErrorCode::SourceByteBoundExceeded
                ) =>
            {
                drop(conn);
            }
            // End the snapshot deterministically; a failure here only means the connection is
            // gone.
            _ => {
                let _ = conn.client.batch_execute("ROLLBACK").await;
            }
        }
        result
    }
}

/// Refuses, before any I/O, a version-2 (`catalog_identity`) selection that carries a
/// physical pin (system identifier or timeline): version 2 calls no control, WAL-file or
/// statistics function that could verify one, and a signed field is never silently ignored.
/// The registry refuses such a document already; this keeps the boundary closed for any other
/// caller.
fn check_profile(a: &SelectedSourceAuthority) -> Result<()> {
    if a.profile == AuthorityProfile::CatalogIdentity
        && (a.timeline.is_some() || a.system_identifier.is_some())
    {
        return Err(XminError::new(
            ErrorCode::RegistryAuthorityInvalid,
            "a version 2 (catalog_identity) source authority carries no timeline or system \
             identifier; pin those with version 1 (physical_cluster)",
        ));
    }
    Ok(())
}

/// `work`, abandoned at `deadline` (dropped where it waits) with
/// [`ErrorCode::AttemptDeadlineExceeded`].
async fn within<T>(
    deadline: Option<tokio::time::Instant>,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match deadline {
        None => work.await,
        Some(d) => tokio::time::timeout_at(d, work)
            .await
            .unwrap_or_else(|_| Err(deadline_exceeded())),
    }
}

async fn extract_on(
    conn: &Conn,
    req: &ExtractRequest<'_>,
    store: &dyn ArtifactStore,
    progress: Option<fn(u64)>,
    meter: &mut Meter,
) -> Result<SnapshotEnvelope> {
    let c = &conn.client;
    let a = req.authority;
    c.batch_execute(&format!(
        "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY; {SESSION_SETTINGS}"
    ))
    .await
    .map_err(|e| src_err(ErrorCode::SourceExtractionFailed, "begin", &e))?;
    let relation = qualified(&a.schema, &a.relation);
    c.batch_execute(&format!("LOCK TABLE ONLY {relation} IN ACCESS SHARE MODE"))
        .await
        .map_err(|e| read_error("lock relation", &e))?;
    let observed = verify_authority(c, a).await?;
    let columns = project_columns(c, a, req.unique_key, req.business_columns).await?;

    let (u, h) = (observed.u, observed.h);
    let previous = match req.load {
        LoadKind::FullBaseline => None,
        LoadKind::Incremental => Some(req.previous.map(|c| c.xmin).ok_or_else(|| {
            XminError::new(
                ErrorCode::EnvelopeInvalid,
                "incremental extraction without a checkpoint",
            )
        })?),
    };
    check_horizons(previous, u, h)?;

    let key_list: Vec<String> = req.unique_key.iter().map(|k| ident(k)).collect();
    let all_list: Vec<String> = req
        .unique_key
        .iter()
        .chain(req.business_columns)
        .map(|k| ident(k))
        .collect();
    let scope = scope_predicate(c, req.scope, &columns).await?;
    let fields = u16::try_from(all_list.len())
        .map_err(|_| XminError::new(ErrorCode::EnvelopeInvalid, "too many columns"))?;
    let key_fields = u16::try_from(key_list.len())
        .map_err(|_| XminError::new(ErrorCode::EnvelopeInvalid, "too many key columns"))?;

    let rows_sql = match previous {
        None => format!(
            "COPY (SELECT {} FROM ONLY {relation} WHERE {scope}) TO STDOUT (FORMAT binary)",
            all_list.join(", ")
        ),
        Some(p) => format!(
            "COPY (SELECT {} FROM ONLY {relation} WHERE {scope} AND {}) TO STDOUT (FORMAT binary)",
            all_list.join(", "),
            xmin_window(p, h)
        ),
    };
    let rows = copy_to_artifact(c, &rows_sql, fields, key_fields, store, progress, meter).await?;
    let keys = match previous {
        None => None,
        Some(_) => {
            // Each COPY resolves the names: re-verify after each one.
            if let Err(e) = verify_names_current(c, a).await {
                let _ = store.remove(&rows.artifact.sha256);
                return Err(e);
            }
            let sql = format!(
                "COPY (SELECT {} FROM ONLY {relation} WHERE {scope}) TO STDOUT (FORMAT binary)",
                key_list.join(", ")
            );
            match copy_to_artifact(c, &sql, key_fields, key_fields, store, progress, meter).await {
                Ok(k) => Some(k),
                Err(e) => {
                    let _ = store.remove(&rows.artifact.sha256);
                    return Err(e);
                }
            }
        }
    };
    // The COPY statements resolved the names again: prove they still name the pinned objects.
    if let Err(e) = verify_names_current(c, a).await {
        let _ = store.remove(&rows.artifact.sha256);
        if let Some(k) = &keys {
            let _ = store.remove(&k.artifact.sha256);
        }
        return Err(e);
    }
    let key_count = keys.as_ref().unwrap_or(&rows).rows;
    let complete = rows.complete && keys.as_ref().is_none_or(|k| k.complete);
    let snapshot_token = sha256_canonical(&(
        "dpone.xmin.snapshot-token.v1",
        &a.database.name,
        a.database.oid,
        &observed.snapshot_text,
    ));
    Ok(SnapshotEnvelope {
        schema: ENVELOPE_SCHEMA.to_owned(),
        state_key: req.identity.state_key.clone(),
        scope_hash: req.identity.scope_hash.clone(),
        source_authority_digest: req.identity.source_authority_digest.clone(),
        snapshot_token,
        load: req.load,
        previous_xmin: previous,
        safe_checkpoint: u,
        visible_horizon: h,
        replay_amplification_xids: h - u,
        columns,
        key_columns: key_fields,
        rows,
        keys,
        key_count,
        complete,
        source_lineage: observed.lineage,
    })
}

/// `[previous, H)` on the 32-bit row xmin, modulo 2^32 (see the module docs).
fn xmin_window(previous: u64, h: u64) -> String {
    let p = previous & 0xffff_ffff;
    let hh = h & 0xffff_ffff;
    let x = "(xmin::text::bigint)";
    if p <= hh {
        format!("({x} >= {p} AND {x} < {hh})")
    } else {
        format!("({x} >= {p} OR ({x} >= {FIRST_NORMAL_XID} AND {x} < {hh}))")
    }
}

/// The scope as a predicate on typed values: `column IN (CAST('v' AS type), …)`, where `type` is
/// the column's type without its modifier (`format_type(oid, NULL)`: a modifier would coerce a
/// value, e.g. truncate it to a `varchar(n)`, instead of refusing it). Under the snapshot, before
/// any COPY, every value is cast and compared once: a value that is not of the type is
/// [`ErrorCode::ScopeValueInvalid`] (SQLSTATE class 22), a type without `=` is
/// [`ErrorCode::ScopeColumnNotComparable`] (42883). Values are never echoed.
async fn scope_predicate(
    c: &tokio_postgres::Client,
    scope: &Scope,
    columns: &[SourceColumn],
) -> Result<String> {
    let (column, values) = match scope {
        Scope::Full => return Ok("true".to_owned()),
        Scope::ColumnValues { column, values } => (column, values),
    };
    let oid = columns
        .iter()
        .find(|col| &col.name == column)
        .map(|col| col.type_oid)
        .ok_or_else(|| {
            XminError::new(
                ErrorCode::SourceColumnMissing,
                "the scope column is not among the projected columns",
            )
        })?;
    let type_sql: String = c
        .query_one("SELECT pg_catalog.format_type($1::oid, NULL)", &[&oid])
        .await
        .map_err(|e| read_error("read scope column type", &e))?
        .get(0);
    let casts: Option<Vec<String>> = values
        .iter()
        .map(|v| literal(v).map(|l| format!("CAST({l} AS {type_sql})")))
        .collect();
    let casts =
        casts.ok_or_else(|| XminError::new(ErrorCode::ManifestInvalid, "scope value holds NUL"))?;
    let check = format!(
        "SELECT bool_and(CAST(v AS {type_sql}) = CAST(v AS {type_sql})) \
         FROM pg_catalog.unnest($1::text[]) AS v"
    );
    if let Err(e) = c.query_one(&check, &[values]).await {
        let state = e.code().map(|s| s.code().to_owned()).unwrap_or_default();
        return Err(if state == "42883" {
            XminError::new(
                ErrorCode::ScopeColumnNotComparable,
                "the scope column's type has no equality operator",
            )
        } else if state.starts_with("22") {
            XminError::new(
                ErrorCode::ScopeValueInvalid,
                format!(
                    "a scope value is not a value of the scope column's type (SQLSTATE {state})"
                ),
            )
        } else {
            read_error("check scope values", &e)
        });
    }
    Ok(format!("{} IN ({})", ident(column), casts.join(", ")))
}

async fn verify_authority(
    c: &tokio_postgres::Client,
    a: &SelectedSourceAuthority,
) -> Result<Observed> {
    // First statement of the transaction: fixes the snapshot (the relation is already locked).
    // Names are resolved twice: in the snapshot (pg_class/pg_namespace) and in the current
    // catalog (`to_regclass`, `to_regnamespace`), which is what LOCK and COPY resolve against.
    let row = c
        .query_one(
            "SELECT pg_is_in_recovery(), current_database()::text, \
                    (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = current_database()), \
                    current_user::text, (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = current_user), \
                    session_user::text, (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = session_user), \
                    (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname = $1), \
                    (SELECT cl.oid FROM pg_catalog.pg_class cl JOIN pg_catalog.pg_namespace n \
                       ON n.oid = cl.relnamespace WHERE n.nspname = $1 AND cl.relname = $2), \
                    (SELECT cl.relkind::text FROM pg_catalog.pg_class cl WHERE cl.oid = $3), \
                    current_setting('standard_conforming_strings'), \
                    pg_current_snapshot()::text, \
                    pg_snapshot_xmin(pg_current_snapshot())::text, \
                    pg_snapshot_xmax(pg_current_snapshot())::text, \
                    pg_catalog.to_regnamespace(pg_catalog.quote_ident($1::text))::oid, \
                    pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text))::oid, \
                    EXISTS (SELECT 1 FROM pg_catalog.pg_locks l \
                             WHERE l.locktype = 'relation' AND l.relation = $3 \
                               AND l.pid = pg_catalog.pg_backend_pid() \
                               AND l.mode = 'AccessShareLock' AND l.granted), \
                    pg_catalog.row_security_active($3::oid)",
            &[&a.schema, &a.relation, &a.relation_pin.relation_oid],
        )
        .await
        .map_err(|e| read_error("verify authority", &e))?;
    let in_recovery: bool = row.get(0);
    let role = if in_recovery {
        RecoveryRole::Standby
    } else {
        RecoveryRole::Primary
    };
    if role != a.recovery_role {
        return Err(mismatch(
            ErrorCode::SourceRecoveryRoleMismatch,
            "recovery role",
        ));
    }
    let db_name: String = row.get(1);
    let db_oid: Option<u32> = row.get(2);
    if db_name != a.database.name || db_oid != Some(a.database.oid) {
        return Err(mismatch(
            ErrorCode::SourceDatabasePinMismatch,
            "database name or OID",
        ));
    }
    let eff: (String, Option<u32>) = (row.get(3), row.get(4));
    let ses: (String, Option<u32>) = (row.get(5), row.get(6));
    if eff.0 != a.effective_principal.name
        || eff.1 != Some(a.effective_principal.oid)
        || ses.0 != a.session_principal.name
        || ses.1 != Some(a.session_principal.oid)
    {
        return Err(mismatch(
            ErrorCode::SourcePrincipalPinMismatch,
            "effective or session principal",
        ));
    }
    let schema_oid: Option<u32> = row.get(7);
    let rel_oid: Option<u32> = row.get(8);
    let relkind: Option<String> = row.get(9);
    let current_schema_oid: Option<u32> = row.get(14);
    let current_rel_oid: Option<u32> = row.get(15);
    let locked: bool = row.get(16);
    let row_security: Option<bool> = row.get(17);
    if schema_oid != Some(a.relation_pin.schema_oid)
        || rel_oid != Some(a.relation_pin.relation_oid)
        || current_schema_oid != Some(a.relation_pin.schema_oid)
        || current_rel_oid != Some(a.relation_pin.relation_oid)
        || !locked
    {
        return Err(mismatch(
            ErrorCode::SourceRelationPinMismatch,
            "schema or relation OID",
        ));
    }
    match relkind.as_deref() {
        Some("r") => {}
        Some("p") => {
            return Err(XminError::new(
                ErrorCode::SourceRelationPartitioned,
                "source relation is a partitioned table; pin a partition or a plain table",
            ));
        }
        _ => {
            return Err(XminError::new(
                ErrorCode::SourceRelationMissing,
                "source relation is not an ordinary table",
            ));
        }
    }
    if row_security != Some(false) {
        return Err(XminError::new(
            ErrorCode::SourceRowSecurityActive,
            "row-level security applies to the source principal on the relation; \
             the key snapshot could be incomplete",
        ));
    }
    let scs: String = row.get(10);
    if scs != "on" {
        return Err(XminError::new(
            ErrorCode::SourceSettingsUnsafe,
            "standard_conforming_strings must be on",
        ));
    }
    let parse = |i: usize| -> Result<u64> {
        let s: String = row.get(i);
        s.parse::<u64>().map_err(|_| {
            XminError::new(
                ErrorCode::SourceExtractionFailed,
                "snapshot XID is not a number",
            )
        })
    };
    let mut observed = Observed {
        snapshot_text: row.get(11),
        u: parse(12)?,
        h: parse(13)?,
        lineage: SourceLineage::default(),
    };
    // Version 2 (`catalog_identity`) reads nothing more: no control, WAL-file or statistics
    // function (spec 003); its lineage stays empty.
    if a.profile == AuthorityProfile::PhysicalCluster {
        let row = c
            .query_one(
                "SELECT (SELECT system_identifier::text FROM pg_catalog.pg_control_system()), \
                        (SELECT timeline_id FROM pg_catalog.pg_control_checkpoint())",
                &[],
            )
            .await
            .map_err(|e| src_err(ErrorCode::SourceExtractionFailed, "read control data", &e))?;
        let sys: Option<String> = row.get(0);
        let tli: Option<i32> = row.get(1);
        if sys.as_deref() != a.system_identifier.as_deref() {
            return Err(mismatch(
                ErrorCode::SourceSystemIdentifierMismatch,
                "system identifier",
            ));
        }
        let tli = tli.and_then(|t| u32::try_from(t).ok());
        if tli != a.timeline {
            return Err(mismatch(ErrorCode::SourceTimelineMismatch, "timeline"));
        }
        observed.lineage = SourceLineage {
            system_identifier: sys,
            timeline: tli,
        };
    }
    Ok(observed)
}

async fn project_columns(
    c: &tokio_postgres::Client,
    a: &SelectedSourceAuthority,
    keys: &[String],
    business: &[String],
) -> Result<Vec<SourceColumn>> {
    let rows = c
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.atttypid \
             FROM pg_catalog.pg_attribute a \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped",
            &[&a.relation_pin.relation_oid],
        )
        .await
        .map_err(|e| src_err(ErrorCode::SourceExtractionFailed, "read columns", &e))?;
    let mut out = Vec::new();
    for name in keys.iter().chain(business) {
        let row = rows
            .iter()
            .find(|r| r.get::<_, String>(0) == *name)
            .ok_or_else(|| {
                XminError::new(
                    ErrorCode::SourceColumnMissing,
                    format!("column {name:?} is not in the source relation"),
                )
            })?;
        let type_oid: u32 = row.get(2);
        let type_sql: String = row.get(1);
        if type_oid >= FIRST_NORMAL_OBJECT_ID || !crate::sql::safe_type_sql(&type_sql) {
            return Err(XminError::new(
                ErrorCode::SourceUnsupportedColumnType,
                format!("column {name:?} has a type that is not built in"),
            ));
        }
        out.push(SourceColumn {
            name: name.clone(),
            type_sql,
            type_oid,
        });
    }
    Ok(out)
}

async fn copy_to_artifact(
    c: &tokio_postgres::Client,
    sql: &str,
    fields: u16,
    key_fields: u16,
    store: &dyn ArtifactStore,
    progress: Option<fn(u64)>,
    meter: &mut Meter,
) -> Result<PayloadReceipt> {
    let stream = c
        .copy_out(sql)
        .await
        .map_err(|e| read_error("copy out", &e))?;
    let mut stream = std::pin::pin!(stream);
    let mut writer = store
        .create()
        .map_err(|e| io_error("create artifact", &e))?;
    let mut checker = FrameChecker::new(fields, key_fields);
    // The server sends one message per row: gather them so framing checks, hashing and writes
    // work on large blocks.
    let mut block: Vec<u8> = Vec::with_capacity(BLOCK);
    // Each chunk is counted and framed as it arrives, before it joins the block: a breach of
    // the bound is caught on the chunk that carries the first byte or tuple over it, and no
    // byte of that chunk reaches the artifact. (Without a bound this is the same framing as
    // before, only in smaller steps.)
    let mut received: u64 = 0;
    let deadline = meter.deadline;
    let counted = async {
        // At the deadline the wait for the next chunk ends here, so the chunks already
        // received stay counted.
        while let Some(chunk) = within(deadline, async { Ok(stream.next().await) }).await? {
            let chunk = chunk.map_err(|e| read_error("copy out stream", &e))?;
            let admitted = meter.admit_bytes(received, chunk.len());
            received += chunk.len() as u64;
            admitted?;
            checker.push(&chunk).map_err(frame_error_to_xmin)?;
            meter.admit_rows(checker.rows())?;
            block.extend_from_slice(&chunk);
            if block.len() >= BLOCK {
                flush_block(&mut block, writer.as_mut(), progress)?;
            }
        }
        flush_block(&mut block, writer.as_mut(), progress)
    };
    let streamed = counted.await;
    meter.rows += checker.rows();
    meter.bytes += received;
    // On an error the unfinished writer is dropped here, which removes its temporary file.
    streamed?;
    let complete = checker.complete();
    let artifact = writer
        .finish()
        .map_err(|e| io_error("publish artifact", &e))?;
    meter.published.push(artifact.sha256.clone());
    Ok(PayloadReceipt {
        artifact,
        format: ARTIFACT_FORMAT.to_owned(),
        rows: checker.rows(),
        fields,
        complete,
    })
}

fn flush_block(
    block: &mut Vec<u8>,
    writer: &mut dyn Write,
    progress: Option<fn(u64)>,
) -> Result<()> {
    writer
        .write_all(block)
        .map_err(|e| io_error("write artifact", &e))?;
    if let Some(f) = progress {
        f(block.len() as u64);
    }
    block.clear();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xmin_window_wraps() {
        assert_eq!(
            xmin_window((1 << 32) + 100, (1 << 32) + 200),
            "((xmin::text::bigint) >= 100 AND (xmin::text::bigint) < 200)"
        );
        let w = xmin_window((1 << 32) - 10, (1 << 32) + 5);
        assert!(w.contains(">= 4294967286 OR"), "{w}");
        assert!(w.contains("< 5"), "{w}");
    }
}
