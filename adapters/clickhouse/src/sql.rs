//! Every SQL statement the adapter sends, in one place, built from validated parts.
//!
//! Values always travel as server-side query parameters (`{name:Type}`), never spliced into the
//! text. Identifiers (database, table, column and cluster names) are backtick-quoted with
//! backslash escaping. Type names and engine names come only from the canonical profile or an
//! allow-list and are checked before they reach a statement. Query-level settings travel beside
//! the text (HTTP settings) and are part of every [`Statement`] so snapshots show them.

use std::fmt;

use dpone_engine_clickhouse::canonical::{Scalar, parse_type};
use dpone_engine_clickhouse::contracts::{ClusterStatement, Schema};
use dpone_engine_clickhouse::ports::{CandidateSpec, DdlCorrelation, LoadTokens};

/// One statement: text, query-level settings and server-side parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// SQL text.
    pub sql: String,
    /// Query-level settings (HTTP parameters).
    pub settings: Vec<(&'static str, String)>,
    /// Server-side parameters bound by name.
    pub params: Vec<(&'static str, String)>,
}

impl Statement {
    fn new(sql: String) -> Self {
        Self {
            sql,
            settings: Vec::new(),
            params: Vec::new(),
        }
    }

    fn setting(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.settings.push((name, value.into()));
        self
    }

    /// The statement with one more query-level setting.
    pub fn with_setting(self, name: &'static str, value: String) -> Self {
        self.setting(name, value)
    }

    fn param(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.params.push((name, value.into()));
        self
    }
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.sql)?;
        for (k, v) in &self.settings {
            writeln!(f, "  setting {k} = {v}")?;
        }
        for (k, v) in &self.params {
            writeln!(f, "  param {k} = {v}")?;
        }
        Ok(())
    }
}

/// A part that cannot be put into a statement.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SqlError {
    /// A column type outside the canonical profile.
    #[error("column {0} has a type outside the canonical profile")]
    Type(usize),
    /// An engine outside the allow-list.
    #[error("the table engine is not a direct non-replicated MergeTree engine")]
    Engine,
    /// An empty or control-character identifier.
    #[error("an identifier is empty or holds control characters")]
    Identifier,
}

/// `` `name` `` with backticks and backslashes escaped.
pub fn ident(name: &str) -> Result<String, SqlError> {
    if name.is_empty() || name.chars().any(char::is_control) {
        return Err(SqlError::Identifier);
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('`');
    for c in name.chars() {
        if c == '`' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('`');
    Ok(out)
}

fn qualified(database: &str, table: &str) -> Result<String, SqlError> {
    Ok(format!("{}.{}", ident(database)?, ident(table)?))
}

/// Engines accepted for candidates: exactly the engine's
/// [`CONTENT_EXACT_ENGINES`](dpone_engine_clickhouse::admission::CONTENT_EXACT_ENGINES), the
/// direct, non-replicated, argument-less engines whose content the canonical digest proves
/// (the plain `MergeTree`; engines that replace, sum, aggregate or collapse rows at insert or
/// merge are refused at `check` and by the coordinator).
pub const ENGINES: &[&str] = dpone_engine_clickhouse::admission::CONTENT_EXACT_ENGINES;

/// The complete `system.clusters` inventory of one cluster, sorted.
pub fn inventory(cluster: &str) -> Statement {
    Statement::new(
        "SELECT toUInt32(shard_num) AS shard_num, toUInt32(replica_num) AS replica_num, \
         host_name, toUInt16(port) AS port, toUInt8(internal_replication) AS internal_replication \
         FROM system.clusters WHERE cluster = {cluster:String} ORDER BY shard_num, replica_num"
            .into(),
    )
    .param("cluster", cluster)
}

/// The replica(s) of `cluster` that the answering server calls itself (`is_local`).
pub fn local_replica(cluster: &str) -> Statement {
    Statement::new(
        "SELECT toUInt32(shard_num) AS shard_num, toUInt32(replica_num) AS replica_num \
         FROM system.clusters WHERE cluster = {cluster:String} AND is_local \
         ORDER BY shard_num, replica_num"
            .into(),
    )
    .param("cluster", cluster)
}

/// The server's UUID and database `database`'s UUID, as this server reports them (one row per
/// database of that name: none when it is absent).
pub fn database_identity(database: &str) -> Statement {
    Statement::new(
        "SELECT toString(serverUUID()) AS server_uuid, toString(uuid) AS database_uuid \
         FROM system.databases WHERE name = {database:String}"
            .into(),
    )
    .param("database", database)
}

/// Reads one authority slot with its Keeper version.
pub fn authority_read(database: &str, table: &str, key: &str) -> Result<Statement, SqlError> {
    Ok(Statement::new(format!(
        "SELECT value, toUInt64(_version) AS version FROM {} WHERE key = {{key:String}}",
        qualified(database, table)?
    ))
    .param("key", key))
}

/// Strict insert of a new slot (fails when the key exists).
pub fn authority_insert(
    database: &str,
    table: &str,
    key: &str,
    value: &str,
) -> Result<Statement, SqlError> {
    Ok(Statement::new(format!(
        "INSERT INTO {} (key, value) SETTINGS keeper_map_strict_mode = 1 \
         SELECT {{key:String}}, {{value:String}}",
        qualified(database, table)?
    ))
    .param("key", key)
    .param("value", value))
}

/// Version-checked update: a silent no-op when `_version` is stale, so callers read back.
pub fn authority_update(
    database: &str,
    table: &str,
    key: &str,
    expected_version: u64,
    value: &str,
) -> Result<Statement, SqlError> {
    Ok(Statement::new(format!(
        "ALTER TABLE {} UPDATE value = {{value:String}} \
         WHERE key = {{key:String}} AND _version = {{version:UInt64}} \
         SETTINGS keeper_map_strict_mode = 1",
        qualified(database, table)?
    ))
    .param("value", value)
    .param("key", key)
    .param("version", expected_version.to_string()))
}

/// The engine of a database.
pub fn database_engine(database: &str) -> Statement {
    Statement::new("SELECT engine FROM system.databases WHERE name = {database:String}".into())
        .param("database", database)
}

/// The KeeperMap authority facade's full definition on a member (no row: no facade).
pub fn keeper_map_facade(database: &str, table: &str) -> Statement {
    Statement::new(
        "SELECT engine_full FROM system.tables \
         WHERE database = {database:String} AND name = {table:String} AND engine = 'KeeperMap'"
            .into(),
    )
    .param("database", database)
    .param("table", table)
}

/// Whether the member has `formatRow` (the rowset proof's member query calls it).
pub fn rowset_function() -> Statement {
    Statement::new(
        "SELECT toUInt64(count()) AS n FROM system.functions WHERE name = 'formatRow'".into(),
    )
}

/// UUID and engine of one table.
pub fn table_info(database: &str, table: &str) -> Statement {
    Statement::new(
        "SELECT toString(uuid) AS uuid, engine FROM system.tables \
         WHERE database = {database:String} AND name = {table:String}"
            .into(),
    )
    .param("database", database)
    .param("table", table)
}

/// The active data parts of one table: name, checksum of all files, rows, in name order.
pub fn table_parts(database: &str, table: &str) -> Statement {
    Statement::new(
        "SELECT name, toString(hash_of_all_files) AS hash, rows FROM system.parts \
         WHERE database = {database:String} AND table = {table:String} AND active ORDER BY name"
            .into(),
    )
    .param("database", database)
    .param("table", table)
}

/// How many mutations of one table are not finished.
pub fn table_pending_mutations(database: &str, table: &str) -> Statement {
    Statement::new(
        "SELECT count() AS n FROM system.mutations \
         WHERE database = {database:String} AND table = {table:String} AND NOT is_done"
            .into(),
    )
    .param("database", database)
    .param("table", table)
}

/// Columns of one table in table order.
pub fn table_columns(database: &str, table: &str) -> Statement {
    Statement::new(
        "SELECT name, type FROM system.columns \
         WHERE database = {database:String} AND table = {table:String} ORDER BY position"
            .into(),
    )
    .param("database", database)
    .param("table", table)
}

/// Exact row count of one table.
pub fn table_count(database: &str, table: &str) -> Result<Statement, SqlError> {
    Ok(Statement::new(format!(
        "SELECT toUInt64(count()) AS n FROM {}",
        qualified(database, table)?
    )))
}

/// The canonical `ORDER BY` expression of one column: NULL first, strings by (length, bytes),
/// UUIDs by their RFC byte order. Only a hint: the host re-sorts whenever the stream is not in
/// canonical order, so correctness never depends on server collation.
fn order_expr(column: &str, scalar: Scalar) -> String {
    match scalar {
        Scalar::String => format!("length({column}) ASC NULLS FIRST, {column} ASC NULLS FIRST"),
        Scalar::Uuid => format!("toString({column}) ASC NULLS FIRST"),
        _ => format!("{column} ASC NULLS FIRST"),
    }
}

/// Streams a table as `RowBinary` in declared column order (the client asks for `RowBinary`).
pub fn read_rows(database: &str, table: &str, schema: &Schema) -> Result<Statement, SqlError> {
    let mut cols = Vec::new();
    let mut order = Vec::new();
    for (i, c) in schema.columns.iter().enumerate() {
        let t = parse_type(&c.type_name).ok_or(SqlError::Type(i))?;
        let q = ident(&c.name)?;
        order.push(order_expr(&q, t.scalar));
        cols.push(q);
    }
    Ok(Statement::new(format!(
        "SELECT {} FROM {} ORDER BY {}",
        cols.join(", "),
        qualified(database, table)?,
        order.join(", ")
    )))
}

/// The rowset digest's buckets of a table (`dpone_engine_clickhouse::canonical::rowset`): each
/// row's `RowBinary` bytes in declared column order, hashed with SHA-256, grouped by the hash's
/// first byte; per bucket its rows and the SHA-256 of its hashes sorted bytewise and
/// concatenated. `substring(…, 1, 32)` makes each hash a `String` of exactly 32 bytes (a
/// `FixedString` converted to `String` loses trailing zero bytes).
///
/// Each row is serialised with `formatRow('RowBinary', …)`, which returns exactly the row's
/// `RowBinary` bytes (`RowBinary` has no row delimiter), as the host hashes them from the
/// artifact. `formatRowNoNewline` must not be used: it trims one trailing 0x0A byte, so every
/// row whose encoding ends in 0x0A (about 1 in 256) would hash differently on the member and a
/// faithful copy would be refused. `tests/rowset_exactness.rs` proves the query against the
/// host for rows of every profile type ending in every byte value.
pub fn rowset_buckets(database: &str, table: &str, schema: &Schema) -> Result<Statement, SqlError> {
    // Columns are referenced qualified, so no alias of the query can stand for a column of the
    // same name.
    let table = qualified(database, table)?;
    let mut cols = Vec::new();
    for (i, c) in schema.columns.iter().enumerate() {
        parse_type(&c.type_name).ok_or(SqlError::Type(i))?;
        cols.push(format!("{table}.{}", ident(&c.name)?));
    }
    Ok(Statement::new(format!(
        "SELECT toUInt8(reinterpretAsUInt8(substring(h, 1, 1))) AS bucket, toUInt64(count()) AS rows, \
         hex(SHA256(arrayStringConcat(arraySort(groupArray(h))))) AS digest \
         FROM (SELECT substring(SHA256(formatRow('RowBinary', {})), 1, 32) AS h FROM {table}) \
         GROUP BY bucket ORDER BY bucket",
        cols.join(", "),
    )))
}

/// `CREATE TABLE … UUID` of a candidate with the exact UUID, profile-checked column types and
/// an allow-listed engine; deduplication by token is enabled on the plain MergeTree.
pub fn create_candidate(spec: &CandidateSpec<'_>) -> Result<Statement, SqlError> {
    if !ENGINES.contains(&spec.engine) {
        return Err(SqlError::Engine);
    }
    let mut cols = Vec::new();
    for (i, c) in spec.schema.columns.iter().enumerate() {
        parse_type(&c.type_name).ok_or(SqlError::Type(i))?;
        cols.push(format!("{} {}", ident(&c.name)?, c.type_name.trim()));
    }
    let order = if spec.order_by.is_empty() {
        "tuple()".to_string()
    } else {
        let keys: Result<Vec<String>, SqlError> = spec.order_by.iter().map(|k| ident(k)).collect();
        format!("({})", keys?.join(", "))
    };
    // A replicated candidate takes the server's `default_replica_path` and
    // `default_replica_name` (`/clickhouse/tables/{uuid}/{shard}`, `{replica}`): every replica
    // created with the same UUID joins the one replication path. Deduplication by token is the
    // replicated table's own (`replicated_deduplication_window`); the plain MergeTree enables it.
    let settings = if spec.engine.starts_with("Replicated") {
        ""
    } else {
        " SETTINGS non_replicated_deduplication_window = 1000"
    };
    Ok(Statement::new(format!(
        "CREATE TABLE {} UUID '{}' ({}) ENGINE = {} ORDER BY {}{settings}",
        qualified(spec.database, spec.name)?,
        spec.uuid,
        cols.join(", "),
        spec.engine,
        order
    )))
}

/// `SYSTEM SYNC REPLICA` of one replicated table, waiting at most `bound_secs` (the server's
/// `receive_timeout` bounds the wait; a replica still behind then fails with `TIMEOUT_EXCEEDED`).
pub fn sync_replica(database: &str, table: &str, bound_secs: u64) -> Result<Statement, SqlError> {
    Ok(Statement::new(format!(
        "SYSTEM SYNC REPLICA {}",
        qualified(database, table)?
    ))
    .setting("receive_timeout", bound_secs.max(1).to_string()))
}

/// One synchronous `RowBinary` load with deterministic tokens; async insert off.
pub fn load(
    database: &str,
    table: &str,
    schema: &Schema,
    tokens: &LoadTokens,
) -> Result<Statement, SqlError> {
    let cols: Result<Vec<String>, SqlError> =
        schema.columns.iter().map(|c| ident(&c.name)).collect();
    Ok(Statement::new(format!(
        "INSERT INTO {} ({}) FORMAT RowBinary",
        qualified(database, table)?,
        cols?.join(", ")
    ))
    .setting("query_id", &tokens.query_id)
    .setting("insert_deduplication_token", &tokens.dedup_token)
    .setting("insert_deduplicate", "1")
    .setting("async_insert", "0"))
}

/// Member-local drop of a candidate (after its UUID was checked).
pub fn drop_candidate(database: &str, table: &str) -> Result<Statement, SqlError> {
    Ok(Statement::new(format!(
        "DROP TABLE {} SYNC",
        qualified(database, table)?
    )))
}

/// One server's publication or cleanup statement (no `ON CLUSTER`), with the correlation bound
/// as its `query_id` and `log_comment`.
pub fn local_ddl(
    statement: &ClusterStatement,
    correlation: &DdlCorrelation,
) -> Result<Statement, SqlError> {
    Ok(Statement::new(ddl_text(statement, None)?)
        .setting("query_id", &correlation.query_id)
        .setting("log_comment", &correlation.query_id))
}

/// The SQL of a publication or cleanup statement, `ON CLUSTER on` when a cluster is named.
fn ddl_text(statement: &ClusterStatement, on: Option<&str>) -> Result<String, SqlError> {
    let on = match on {
        Some(cluster) => format!(" ON CLUSTER {}", ident(cluster)?),
        None => String::new(),
    };
    Ok(match statement {
        ClusterStatement::Exchange {
            database,
            target,
            candidate,
        } => format!(
            "EXCHANGE TABLES {} AND {}{on}",
            qualified(database, target)?,
            qualified(database, candidate)?
        ),
        ClusterStatement::Rename {
            database,
            candidate,
            target,
        } => format!(
            "RENAME TABLE {} TO {}{on}",
            qualified(database, candidate)?,
            qualified(database, target)?
        ),
        ClusterStatement::Drop { database, name } => {
            format!("DROP TABLE {}{on} SYNC", qualified(database, name)?)
        }
    })
}

/// Whether the query with id `query_id` is running on this server (`system.processes`).
pub fn running_query(query_id: &str) -> Statement {
    Statement::new(
        "SELECT toUInt64(count()) AS n FROM system.processes WHERE query_id = {query_id:String}"
            .into(),
    )
    .param("query_id", query_id)
}

/// This server's `serverUUID()`.
pub fn server_uuid() -> Statement {
    Statement::new("SELECT toString(serverUUID()) AS server_uuid".into())
}

/// One correlated `ON CLUSTER` statement: `throw` output mode, no skipped shards, bound
/// `log_comment` and `query_id`.
pub fn cluster_ddl(
    cluster: &str,
    statement: &ClusterStatement,
    correlation: &DdlCorrelation,
    task_timeout_secs: u64,
) -> Result<Statement, SqlError> {
    let sql = ddl_text(statement, Some(cluster))?;
    Ok(Statement::new(sql)
        .setting("query_id", &correlation.query_id)
        .setting("log_comment", &correlation.query_id)
        .setting("distributed_ddl_output_mode", "throw")
        .setting("skip_unavailable_shards", "0")
        .setting(
            "distributed_ddl_task_timeout",
            task_timeout_secs.to_string(),
        ))
}

/// The queue rows of one correlated DDL (bound by `log_comment`). `status` is
/// `Nullable(Enum8)` on the server, so its text is made non-nullable here (NULL reads as the
/// empty string, i.e. not yet picked up by the host).
pub fn ddl_queue(cluster: &str, query_id: &str) -> Statement {
    Statement::new(
        "SELECT entry, ifNull(host, '') AS host, toUInt16(ifNull(port, 0)) AS port, \
         ifNull(toString(status), '') AS status, toInt64(ifNull(exception_code, 0)) AS exception_code \
         FROM system.distributed_ddl_queue \
         WHERE cluster = {cluster:String} AND settings['log_comment'] = {correlation:String} \
         ORDER BY entry, host, port"
            .into(),
    )
    .param("cluster", cluster)
    .param("correlation", query_id)
}

/// A connectivity probe.
pub fn ping() -> Statement {
    Statement::new("SELECT 1".into())
}
