//! Every T-SQL statement the SQL Server target sends, in one module.
//!
//! Identifiers are bracket-quoted ([`ident`]); values are always bound parameters (`@P1`, ...),
//! never spliced. Statements with parameters run through `sp_executesql` (a nested scope);
//! session settings ([`SET_XACT_ABORT`], [`SET_SERIALIZABLE`]), [`BEGIN`] and
//! [`Finalizer::missing_table_ddl`] must be sent as plain batches so they outlive the statement. Statements are grouped by boundary:
//!
//! - Server and pin verification ([`SERVER_FACTS`], [`METADATA_PERMISSION`], [`CATALOG_ROWS`],
//!   [`SESSION_IDENTITY`], [`CURRENT_DATABASE`]): read before any source I/O, and again on the
//!   run connection when the run transaction begins. None of them depends on a `CONVERT`
//!   style: typed values are formatted in Rust.
//! - Staging ([`Finalizer::stage_rows_ddl`], [`Finalizer::stage_keys_ddl`]): text keys in
//!   `Latin1_General_100_BIN2`, clustered on the key.
//! - The finalizer ([`Finalizer`]): `SET XACT_ABORT ON`, `SERIALIZABLE`, a transaction-owned
//!   `sp_getapplock`, one detection timestamp, set-based update/reactivate/insert and the
//!   missing-key action with exact counts from `OUTPUT` (never `MERGE`), parity, checkpoint CAS,
//!   receipt and authority consumption through three-part state names, one commit.
//! - Target DDL ([`target_ddl`]): the reserved soft-delete columns of each delete mode.

/// Bracket-quotes an identifier (`[a]]b]`).
pub fn ident(s: &str) -> String {
    format!("[{}]", s.replace(']', "]]"))
}

/// A three-part name `[database].[schema].[object]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreePart {
    /// Canonical database name (exact spelling of the pin).
    pub database: String,
    /// Schema.
    pub schema: String,
    /// Object.
    pub object: String,
}

impl ThreePart {
    /// Builds a name.
    pub fn new(database: &str, schema: &str, object: &str) -> Self {
        Self {
            database: database.into(),
            schema: schema.into(),
            object: object.into(),
        }
    }

    /// The quoted name.
    pub fn sql(&self) -> String {
        format!(
            "{}.{}.{}",
            ident(&self.database),
            ident(&self.schema),
            ident(&self.object)
        )
    }
}

/// Collation of text unique keys in target and staging: binary code-point order, so `A`/`a` and
/// accents stay distinct.
pub const KEY_COLLATION: &str = "Latin1_General_100_BIN2";
/// Engine-owned lineage column: detection time of the last write to the row.
pub const UPDATED_AT_COLUMN: &str = "__dpone__updated_at";
/// Reserved soft-delete timestamp column.
pub const DELETED_AT_COLUMN: &str = "__dpone__deleted_at";
/// Reserved soft-delete flag column.
pub const IS_DELETED_COLUMN: &str = "__dpone__is_deleted";

// ---------------------------------------------------------------------------------------------
// Pin verification
// ---------------------------------------------------------------------------------------------

/// Checked first: without `VIEW ANY DATABASE` the catalog rows are not interpretable.
pub const METADATA_PERMISSION: &str =
    "SELECT HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW ANY DATABASE') AS has_view_any_database;";

/// What kind of TDS server answers ([`crate::server::classify`]): asked first on every session
/// (before any pin, staging or write). `SERVERPROPERTY` of an unknown name is NULL on SQL
/// Server; Babelfish answers `1` for `'Babelfish'`.
pub const SERVER_FACTS: &str = "SELECT CONVERT(nvarchar(128), SERVERPROPERTY('Babelfish')) AS babelfish, \
CONVERT(nvarchar(4000), @@VERSION) AS version_text, \
CONVERT(nvarchar(128), SERVERPROPERTY('ProductVersion')) AS product_version, \
CONVERT(int, SERVERPROPERTY('EngineEdition')) AS engine_edition;";

/// Every database whose name folds to `@P1` (case- and accent-insensitive), so the verifier sees
/// the exact spelling and any casefold decoy. `create_date` is returned as a typed
/// `datetime2(7)` and the create token is formatted from it in Rust
/// ([`crate::pins::create_token`]): no `CONVERT` style, whose output drops a zero fraction. The
/// GUID comes from `sys.database_recovery_status` (`uniqueidentifier` to `varchar` takes no
/// style).
pub const CATALOG_ROWS: &str = "SELECT d.name AS name, d.database_id AS database_id, \
CAST(d.create_date AS datetime2(7)) AS create_date, \
CONVERT(varchar(36), r.database_guid) AS database_guid, d.state_desc AS state_desc, \
d.user_access_desc AS user_access_desc, HAS_DBACCESS(d.name) AS has_dbaccess \
FROM master.sys.databases AS d \
LEFT JOIN master.sys.database_recovery_status AS r ON r.database_id = d.database_id \
WHERE d.name COLLATE Latin1_General_100_CI_AI = @P1 COLLATE Latin1_General_100_CI_AI \
ORDER BY d.database_id;";

/// Topology and effective principal of a session: target and state sessions must agree. The
/// SID is read as `varbinary` and hex-encoded in Rust (no `CONVERT` style).
pub const SESSION_IDENTITY: &str = "SELECT CONVERT(nvarchar(256), @@SERVERNAME) AS server_name, \
CONVERT(nvarchar(256), SERVERPROPERTY('MachineName')) AS machine_name, \
CONVERT(nvarchar(256), SERVERPROPERTY('InstanceName')) AS instance_name, \
CONVERT(nvarchar(256), SERVERPROPERTY('ProductVersion')) AS product_version, \
SUSER_SNAME() AS principal_name, SUSER_SID() AS principal_sid;";

/// The staging lease's own view of its current database (checked before and after each staging
/// action).
pub const CURRENT_DATABASE: &str = "SELECT DB_ID() AS database_id, DB_NAME() AS database_name;";

/// Columns of a table for the target-shape preflight (`@P1` = `[schema].[table]`, run in the
/// target database): name, type, max length in bytes, nullability, collation, computed and
/// persisted flags.
pub const TARGET_COLUMNS: &str = "SELECT c.name AS name, ty.name AS type_name, \
CONVERT(int, c.max_length) AS max_length, CONVERT(int, c.is_nullable) AS is_nullable, \
c.collation_name AS collation_name, CONVERT(int, c.is_computed) AS is_computed, \
CONVERT(int, ISNULL(cc.is_persisted, 0)) AS is_persisted, \
CONVERT(int, c.precision) AS type_precision, CONVERT(int, c.scale) AS type_scale, \
CONVERT(int, COLLATIONPROPERTY(c.collation_name, 'CodePage')) AS code_page \
FROM sys.columns AS c INNER JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id \
LEFT JOIN sys.computed_columns AS cc ON cc.object_id = c.object_id AND cc.column_id = c.column_id \
WHERE c.object_id = OBJECT_ID(@P1) ORDER BY c.column_id;";

/// Name prefix of every scratch database the live tests create (here and in the shared suites).
pub const SCRATCH_PREFIX: &str = "dpone_t_";

/// Scratch databases of earlier live-test processes: names starting with [`SCRATCH_PREFIX`]
/// (`_` escaped, it is a `LIKE` wildcard) created more than `@P1` minutes ago. Younger ones may
/// belong to a test running now in another process.
pub const STALE_SCRATCH_DATABASES: &str = "SELECT name FROM sys.databases \
WHERE name LIKE N'dpone\\_t\\_%' ESCAPE N'\\' \
AND create_date < DATEADD(MINUTE, -CONVERT(int, @P1), GETDATE()) ORDER BY name;";

/// Drops one scratch database, disconnecting its sessions first.
pub fn drop_scratch_database(name: &str) -> String {
    format!(
        "IF DB_ID(N'{lit}') IS NOT NULL BEGIN \
ALTER DATABASE {n} SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE {n}; END;",
        lit = name.replace('\'', "''"),
        n = ident(name)
    )
}

/// Key columns of the target's unique indexes (`@P1` = `[schema].[table]`, run in the target
/// database), for [`crate::catalog::verify_target_key`].
pub const TARGET_UNIQUE_INDEXES: &str = "SELECT i.index_id AS index_id, \
CONVERT(int, i.is_primary_key) AS is_primary_key, CONVERT(int, i.has_filter) AS has_filter, \
CONVERT(int, i.is_disabled) AS is_disabled, i.filter_definition AS filter_definition, \
c.name AS column_name \
FROM sys.indexes AS i INNER JOIN sys.index_columns AS ic \
ON ic.object_id = i.object_id AND ic.index_id = i.index_id AND ic.key_ordinal > 0 \
INNER JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id \
WHERE i.object_id = OBJECT_ID(@P1) AND i.is_unique = 1 ORDER BY i.index_id, ic.key_ordinal;";

/// Enabled `INSTEAD OF` triggers on the target (`@P1` = `[schema].[table]`).
pub const TARGET_TRIGGERS: &str = "SELECT CONVERT(int, COUNT(*)) AS instead_of_triggers, \
CONVERT(int, (SELECT COUNT(*) FROM sys.foreign_keys AS fk \
WHERE fk.referenced_object_id = OBJECT_ID(@P1) AND fk.is_disabled = 0 \
AND (fk.delete_referential_action <> 0 OR fk.update_referential_action <> 0))) \
AS cascading_references \
FROM sys.triggers AS tr WHERE tr.parent_id = OBJECT_ID(@P1) AND tr.is_disabled = 0 \
AND tr.is_instead_of_trigger = 1;";

// ---------------------------------------------------------------------------------------------
// Transaction framing
// ---------------------------------------------------------------------------------------------

/// The session options SQL Server requires for DML on tables with filtered indexes (the state
/// tables' one-active-owner and committed-once indexes) and for creating them. tiberius logs
/// in as an ODBC client (which makes the server set them), but the server's `user options` or
/// a tool's defaults (`sqlcmd` without `-I` has `QUOTED_IDENTIFIER OFF`) must not decide: every
/// session of the target port sends them once the server is classified, and the provisioning
/// scripts begin with them.
pub const SESSION_OPTIONS: &str = "SET ANSI_NULLS ON; SET ANSI_PADDING ON; SET ANSI_WARNINGS ON; \
SET ARITHABORT ON; SET CONCAT_NULL_YIELDS_NULL ON; SET QUOTED_IDENTIFIER ON; \
SET NUMERIC_ROUNDABORT OFF;";

/// Any run-time error aborts the whole transaction.
pub const SET_XACT_ABORT: &str = "SET XACT_ABORT ON;";
/// Isolation of the run transaction.
pub const SET_SERIALIZABLE: &str = "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;";
/// Begins the run transaction.
pub const BEGIN: &str = "BEGIN TRANSACTION;";
/// Commits once.
pub const COMMIT: &str = "COMMIT TRANSACTION;";
/// Rolls back (a no-op when `XACT_ABORT` already did).
pub const ROLLBACK: &str = "IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;";
/// Transaction-owned application lock on the target identity (`@P1`, hex); returns the
/// `sp_getapplock` status (>= 0 granted). The lock is released by commit or rollback.
pub const APPLOCK: &str = "DECLARE @rc int; \
EXEC @rc = sp_getapplock @Resource = @P1, @LockMode = N'Exclusive', \
@LockOwner = N'Transaction', @LockTimeout = 30000; \
SELECT @rc AS applock_status;";
/// The run's single detection timestamp: UTC microseconds since the Unix epoch. The DML binds
/// it back as ISO 8601 text (`@P1`), so every write of the run carries the same instant.
pub const DETECTION_TIME: &str = "SELECT DATEDIFF_BIG(MICROSECOND, \
CAST('1970-01-01T00:00:00' AS datetime2(7)), SYSUTCDATETIME()) AS detection_micros;";

// ---------------------------------------------------------------------------------------------
// Delete modes and key shape
// ---------------------------------------------------------------------------------------------

/// Canonical soft-delete representation of the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeleteMode {
    /// Nullable UTC `datetime2` `__dpone__deleted_at`.
    TimestampOnly,
    /// Timestamp plus a persisted computed `__dpone__is_deleted`.
    TimestampAndFlag,
    /// Stored `bit NOT NULL` `__dpone__is_deleted`.
    FlagOnly,
    /// No reserved soft-delete columns: every row is active and missing keys are deleted (the
    /// delete-mode plan of `hard_delete`).
    Hard,
}

/// What happens to active keys absent from the snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingAction {
    /// Mark deleted per the delete mode.
    SoftDelete,
    /// Delete the rows.
    HardDelete,
}

/// Type of a unique-key column in target and staging.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyType {
    /// `int`.
    Int,
    /// `bigint`.
    BigInt,
    /// `uniqueidentifier`.
    Uuid,
    /// `nvarchar(n)` in [`KEY_COLLATION`].
    Text {
        /// Maximum characters (UTF-16 code units).
        max_chars: u16,
    },
}

impl KeyType {
    /// Column type SQL.
    pub fn sql(self) -> String {
        match self {
            KeyType::Int => "int".into(),
            KeyType::BigInt => "bigint".into(),
            KeyType::Uuid => "uniqueidentifier".into(),
            KeyType::Text { max_chars } => {
                format!("nvarchar({max_chars}) COLLATE {KEY_COLLATION}")
            }
        }
    }

    /// Bytes this column takes in an index key at most.
    pub fn index_bytes(self) -> u32 {
        match self {
            KeyType::Int => 4,
            KeyType::BigInt => 8,
            KeyType::Uuid => 16,
            KeyType::Text { max_chars } => 2 * u32::from(max_chars),
        }
    }
}

/// A unique-key column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyColumn {
    /// Name.
    pub name: String,
    /// Type.
    pub ty: KeyType,
}

/// A business column with its reviewed SQL Server type text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BusinessColumn {
    /// Name.
    pub name: String,
    /// Type SQL, e.g. `nvarchar(200)`, `decimal(18,2)`.
    pub type_sql: String,
    /// The target column's collation (text columns), so the staging column has the same one:
    /// no implicit conversion between code pages and no collation conflict between the two.
    pub collation: Option<String>,
}

impl BusinessColumn {
    /// Type SQL with the column's collation (`nvarchar(200) COLLATE Latin1_General_100_CI_AS`).
    pub fn type_with_collation(&self) -> String {
        match &self.collation {
            Some(c) => format!("{} COLLATE {c}", self.type_sql),
            None => self.type_sql.clone(),
        }
    }

    /// Expressions that compare this column exactly, whatever its collation: text as its bytes
    /// plus its byte length (so case, accents, width and trailing spaces are changes, and a
    /// case-insensitive or padded collation cannot call a change "unchanged"); binary with its
    /// byte length (SQL Server ignores trailing `0x00` when comparing `varbinary`); every other
    /// type as itself. `NULL` stays `NULL`, so the `EXCEPT` comparison stays null-safe.
    pub fn exact(&self, alias: &str) -> String {
        let c = format!("{alias}.{}", ident(&self.name));
        let ty = self.type_sql.to_ascii_lowercase();
        let text = ["nvarchar(", "nchar(", "varchar(", "char("]
            .iter()
            .any(|p| ty.starts_with(p));
        let binary = ty.starts_with("varbinary(") || ty.starts_with("binary(");
        // A `(max)` value may exceed 8,000 bytes: converted to `varbinary(8000)` it would be
        // cut, and a change past the cut would read as "unchanged".
        let max = ty.ends_with("(max)");
        if text && max {
            format!("CONVERT(varbinary(max), {c}), DATALENGTH({c})")
        } else if text {
            format!("CONVERT(varbinary(8000), {c}), DATALENGTH({c})")
        } else if binary {
            format!("{c}, DATALENGTH({c})")
        } else {
            c
        }
    }
}

/// Rows per `INSERT ... VALUES` statement: SQL Server's limit on row value expressions.
pub const INSERT_MAX_ROWS: usize = 1000;
/// Bound values per statement: an RPC request carries at most 2,100 parameters, and
/// `sp_executesql` spends two of them on the statement and its parameter declarations.
pub const INSERT_MAX_PARAMS: usize = 2098;

/// Rows per batch of the insert load path for a table of `columns` loadable columns: as many
/// as the row and parameter limits allow (at least one; a table has at most 1,024 columns).
pub fn insert_batch_rows(columns: usize) -> usize {
    (INSERT_MAX_PARAMS / columns.max(1)).clamp(1, INSERT_MAX_ROWS)
}

/// The insert load path's statement: `rows` row constructors of `columns.len()` parameters
/// each, numbered row by row (`@P1..@Pn` the first row), into `table` (already quoted, e.g.
/// `[dpone_stage].[dpone_stage_x_rows]`). The values are bound as typed RPC parameters; the
/// server converts each to its column's type, which the host has checked to be exact.
pub fn staging_insert(table: &str, columns: &[&str], rows: usize) -> String {
    use std::fmt::Write;
    let names = columns
        .iter()
        .map(|c| ident(c))
        .collect::<Vec<_>>()
        .join(", ");
    let n = columns.len();
    let mut out = format!("INSERT INTO {table} ({names}) VALUES ");
    for r in 0..rows {
        if r > 0 {
            out.push_str(", ");
        }
        out.push('(');
        for i in 0..n {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "@P{}", r * n + i + 1);
        }
        out.push(')');
    }
    out.push(';');
    out
}

/// A collation name as the catalog spells it (`Latin1_General_100_CI_AS`): only such names are
/// written into DDL.
pub fn is_collation_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 128 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

// ---------------------------------------------------------------------------------------------
// Target DDL (reviewed provisioning; the runtime verifies, never creates)
// ---------------------------------------------------------------------------------------------

/// Reviewed DDL for a target table: keys (clustered primary key), business columns, the delete
/// mode's reserved columns and the lineage column.
pub fn target_ddl(
    table: &ThreePart,
    keys: &[KeyColumn],
    business: &[BusinessColumn],
    mode: DeleteMode,
) -> String {
    let mut cols: Vec<String> = keys
        .iter()
        .map(|k| format!("    {} {} NOT NULL", ident(&k.name), k.ty.sql()))
        .collect();
    cols.extend(
        business
            .iter()
            .map(|b| format!("    {} {} NULL", ident(&b.name), b.type_with_collation())),
    );
    match mode {
        DeleteMode::TimestampOnly => {
            cols.push(format!(
                "    {} datetime2(7) NULL",
                ident(DELETED_AT_COLUMN)
            ));
        }
        DeleteMode::TimestampAndFlag => {
            cols.push(format!(
                "    {} datetime2(7) NULL",
                ident(DELETED_AT_COLUMN)
            ));
            cols.push(format!(
                "    {} AS (CONVERT(bit, CASE WHEN {} IS NULL THEN 0 ELSE 1 END)) PERSISTED",
                ident(IS_DELETED_COLUMN),
                ident(DELETED_AT_COLUMN)
            ));
        }
        DeleteMode::FlagOnly => {
            cols.push(format!(
                "    {} bit NOT NULL CONSTRAINT {} DEFAULT (0)",
                ident(IS_DELETED_COLUMN),
                ident(&format!("DF_{}_is_deleted", table.object))
            ));
        }
        DeleteMode::Hard => {}
    }
    cols.push(format!(
        "    {} datetime2(7) NOT NULL",
        ident(UPDATED_AT_COLUMN)
    ));
    cols.push(format!(
        "    CONSTRAINT {} PRIMARY KEY CLUSTERED ({})",
        ident(&format!("PK_{}", table.object)),
        key_list(keys, None)
    ));
    format!("CREATE TABLE {} (\n{}\n);", table.sql(), cols.join(",\n"))
}

fn key_list(keys: &[KeyColumn], alias: Option<&str>) -> String {
    keys.iter()
        .map(|k| match alias {
            Some(a) => format!("{a}.{}", ident(&k.name)),
            None => ident(&k.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn key_join(keys: &[KeyColumn], a: &str, b: &str) -> String {
    keys.iter()
        .map(|k| format!("{a}.{n} = {b}.{n}", n = ident(&k.name)))
        .collect::<Vec<_>>()
        .join(" AND ")
}

// ---------------------------------------------------------------------------------------------
// The finalizer
// ---------------------------------------------------------------------------------------------

/// The five state tables by three-part name (same connection as the target: `target_atomic`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateNames {
    /// `dpone_source_state`.
    pub source_state: ThreePart,
    /// `dpone_run_state`.
    pub run: ThreePart,
    /// `dpone_commit_receipt`.
    pub receipt: ThreePart,
    /// `dpone_repair_authority`.
    pub repair_authority: ThreePart,
    /// `dpone_repair_authority_consumption`.
    pub repair_consumption: ThreePart,
}

/// Columns of a state row as the target reads them (the superseded flag as an int, so no
/// date/time decoding is needed).
const STATE_COLUMNS: &str = "state_key, target_identity, scope_hash, safe_xmin, revision, \
visible_horizon, last_receipt_id, \
CONVERT(int, CASE WHEN superseded_at_utc IS NULL THEN 0 ELSE 1 END) AS superseded";

impl StateNames {
    /// The five tables, named, in catalog order.
    pub fn named(&self) -> [(&'static str, &ThreePart); 5] {
        [
            ("source_state", &self.source_state),
            ("run", &self.run),
            ("receipt", &self.receipt),
            ("repair_authority", &self.repair_authority),
            ("repair_consumption", &self.repair_consumption),
        ]
    }

    /// `OBJECT_ID` of each state table (NULL when missing): the state catalog preflight. Names
    /// are validated identifiers, bracket-quoted and embedded as Unicode literals.
    pub fn catalog_check(&self) -> String {
        let cols: Vec<String> = self
            .named()
            .iter()
            .map(|(n, t)| format!("OBJECT_ID(N'{}', N'U') AS {n}", t.sql().replace('\'', "''")))
            .collect();
        format!("SELECT {};", cols.join(", "))
    }

    /// Columns, unique-index key columns, trigger events, CHECK constraints and foreign keys of
    /// the five state tables, run in the state database, for
    /// [`crate::catalog::verify_state_catalog`]. Rows: `(role, kind, name, item, n1, n2,
    /// filter)` with kind `column` (name, type, max_length, nullable), `index` (index id,
    /// column, key ordinal, flags: 1 primary key, 2 filtered, 4 disabled; filter definition),
    /// `trigger` (name, event, disabled, instead of), `check` (name, -, disabled, not trusted,
    /// definition), `foreign_key` (one row per column: name, column, delete action + 4 × update
    /// action, disabled + 2 × not trusted, `<referenced role>.<column>` or NULL when the
    /// referenced table is no state table) or `referenced_by` (a foreign key of a table outside
    /// the state tables that references one: its name).
    pub fn catalog_facts(&self) -> String {
        let objects: Vec<String> = self
            .named()
            .iter()
            .map(|(n, t)| {
                format!(
                    "SELECT N'{n}' AS role, OBJECT_ID(N'{}', N'U') AS object_id",
                    t.sql().replace('\'', "''")
                )
            })
            .collect();
        format!(
            "WITH v (role, object_id) AS ({objects}) \
SELECT v.role AS role, N'column' AS kind, c.name AS name, ty.name AS item, \
CONVERT(int, c.max_length) AS n1, CONVERT(int, c.is_nullable) AS n2, \
CONVERT(nvarchar(4000), NULL) AS filter \
FROM v INNER JOIN sys.columns AS c ON c.object_id = v.object_id \
INNER JOIN sys.types AS ty ON ty.user_type_id = c.user_type_id \
UNION ALL \
SELECT v.role, N'index', CONVERT(nvarchar(128), i.index_id), c.name, \
CONVERT(int, ic.key_ordinal), \
CONVERT(int, i.is_primary_key) + 2 * CONVERT(int, i.has_filter) + 4 * CONVERT(int, i.is_disabled), \
i.filter_definition \
FROM v INNER JOIN sys.indexes AS i ON i.object_id = v.object_id AND i.is_unique = 1 \
INNER JOIN sys.index_columns AS ic ON ic.object_id = i.object_id AND ic.index_id = i.index_id \
AND ic.key_ordinal > 0 \
INNER JOIN sys.columns AS c ON c.object_id = ic.object_id AND c.column_id = ic.column_id \
UNION ALL \
SELECT v.role, N'trigger', tr.name, te.type_desc, CONVERT(int, tr.is_disabled), \
CONVERT(int, tr.is_instead_of_trigger), NULL \
FROM v INNER JOIN sys.triggers AS tr ON tr.parent_id = v.object_id \
INNER JOIN sys.trigger_events AS te ON te.object_id = tr.object_id \
UNION ALL \
SELECT v.role, N'check', cc.name, N'', CONVERT(int, cc.is_disabled), \
CONVERT(int, cc.is_not_trusted), CONVERT(nvarchar(4000), cc.definition) \
FROM v INNER JOIN sys.check_constraints AS cc ON cc.parent_object_id = v.object_id \
UNION ALL \
SELECT v.role, N'foreign_key', fk.name, pc.name, \
CONVERT(int, fk.delete_referential_action) + 4 * CONVERT(int, fk.update_referential_action), \
CONVERT(int, fk.is_disabled) + 2 * CONVERT(int, fk.is_not_trusted), \
CONVERT(nvarchar(4000), rv.role + N'.' + rc.name) \
FROM v INNER JOIN sys.foreign_keys AS fk ON fk.parent_object_id = v.object_id \
INNER JOIN sys.foreign_key_columns AS fkc ON fkc.constraint_object_id = fk.object_id \
INNER JOIN sys.columns AS pc ON pc.object_id = fkc.parent_object_id \
AND pc.column_id = fkc.parent_column_id \
INNER JOIN sys.columns AS rc ON rc.object_id = fkc.referenced_object_id \
AND rc.column_id = fkc.referenced_column_id \
LEFT JOIN v AS rv ON rv.object_id = fk.referenced_object_id \
UNION ALL \
SELECT v.role, N'referenced_by', fk.name, N'', 0, 0, NULL \
FROM v INNER JOIN sys.foreign_keys AS fk ON fk.referenced_object_id = v.object_id \
WHERE NOT EXISTS (SELECT 1 FROM v AS w WHERE w.object_id = fk.parent_object_id) \
ORDER BY 1, 2, 3, 5;",
            objects = objects.join(" UNION ALL ")
        )
    }

    /// A state row outside the run transaction (`@P1` = state key).
    pub fn select_state(&self) -> String {
        format!(
            "SELECT {STATE_COLUMNS} FROM {} WHERE state_key = @P1;",
            self.source_state.sql()
        )
    }

    /// The receipt of an invocation of a state key (`@P1` invocation id, `@P2` state key).
    pub fn select_receipt_by_invocation(&self) -> String {
        format!(
            "SELECT body FROM {} WHERE invocation_id = @P1 AND state_key = @P2;",
            self.receipt.sql()
        )
    }

    /// The receipt of a load (`@P1` load id): the acknowledgement-loss probe.
    pub fn select_receipt_by_load(&self) -> String {
        format!(
            "SELECT body FROM {} WHERE load_id = @P1;",
            self.receipt.sql()
        )
    }

    /// Receipts of a state key, newest first (`@P1` state key, `@P2` limit).
    pub fn select_receipts(&self) -> String {
        format!(
            "SELECT TOP (@P2) body FROM {} WHERE state_key = @P1 ORDER BY new_revision DESC;",
            self.receipt.sql()
        )
    }

    /// An authority and whether it was consumed, outside the run transaction (`@P1` id).
    pub fn select_authority(&self) -> String {
        format!(
            "SELECT a.authority_id, a.recorded_digest, a.document, \
CONVERT(int, CASE WHEN EXISTS (SELECT 1 FROM {c} AS c WHERE c.authority_id = a.authority_id) \
THEN 1 ELSE 0 END) AS consumed FROM {a} AS a WHERE a.authority_id = @P1;",
            a = self.repair_authority.sql(),
            c = self.repair_consumption.sql(),
        )
    }

    /// A run row written outside the run transaction (a run that did not commit).
    pub fn insert_failed_run(&self) -> String {
        format!(
            "INSERT INTO {} (run_id, invocation_id, state_key, status, code, evidence, \
recorded_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6, SYSUTCDATETIME());",
            self.run.sql()
        )
    }

    /// Default table names in a state database and schema.
    pub fn defaults(database: &str, schema: &str) -> Self {
        let t = |n: &str| ThreePart::new(database, schema, n);
        Self {
            source_state: t("dpone_source_state"),
            run: t("dpone_run_state"),
            receipt: t("dpone_commit_receipt"),
            repair_authority: t("dpone_repair_authority"),
            repair_consumption: t("dpone_repair_authority_consumption"),
        }
    }
}

/// Coordinates of one run: all frozen from the envelope before staging.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finalizer {
    /// Target table.
    pub target: ThreePart,
    /// Staged delta rows (in the signed staging database).
    pub stage_rows: ThreePart,
    /// Staged snapshot keys.
    pub stage_keys: ThreePart,
    /// Unique key, in key order.
    pub keys: Vec<KeyColumn>,
    /// Business columns, in manifest order.
    pub business: Vec<BusinessColumn>,
    /// Delete mode of the target.
    pub mode: DeleteMode,
    /// Missing-key action.
    pub missing: MissingAction,
    /// State tables.
    pub state: StateNames,
}

/// Session-local table fixing the missing population `M` under the lock.
pub const MISSING_TABLE: &str = "#dpone_missing";

impl Finalizer {
    /// Checks the frozen coordinates before any staging: at least one key column, the key within
    /// the 900-byte index limit, no duplicate or reserved column names.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.keys.is_empty() {
            return Err("mssql_transaction.target_key_missing");
        }
        if (self.mode == DeleteMode::Hard) != (self.missing == MissingAction::HardDelete) {
            return Err("mssql_transaction.delete_mode_mismatch");
        }
        crate::keys::check_key_width(&self.keys)?;
        let mut names: Vec<&str> = self.keys.iter().map(|k| k.name.as_str()).collect();
        names.extend(self.business.iter().map(|b| b.name.as_str()));
        if names.iter().any(|n| n.starts_with("__dpone__")) {
            return Err("mssql_transaction.target_reserved_column");
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != names.len() {
            return Err("mssql_transaction.target_duplicate_column");
        }
        Ok(())
    }

    fn active(&self, alias: &str) -> String {
        match self.mode {
            DeleteMode::TimestampOnly | DeleteMode::TimestampAndFlag => {
                format!("{alias}.{} IS NULL", ident(DELETED_AT_COLUMN))
            }
            DeleteMode::FlagOnly => format!("{alias}.{} = 0", ident(IS_DELETED_COLUMN)),
            DeleteMode::Hard => "1 = 1".to_owned(),
        }
    }

    /// `t.b = s.b, ` for every business column (empty for a key-only table).
    fn set_business(&self) -> String {
        self.business
            .iter()
            .map(|b| format!("t.{n} = s.{n}, ", n = ident(&b.name)))
            .collect()
    }

    fn counted(dml: &str) -> String {
        format!(
            "DECLARE @dpone_out TABLE (n bit NOT NULL); {dml} SELECT COUNT_BIG(*) AS affected FROM @dpone_out;"
        )
    }

    /// Staging table of delta rows: keys (clustered primary key) and business columns.
    pub fn stage_rows_ddl(&self) -> String {
        let mut cols: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("    {} {} NOT NULL", ident(&k.name), k.ty.sql()))
            .collect();
        cols.extend(
            self.business
                .iter()
                .map(|b| format!("    {} {} NULL", ident(&b.name), b.type_with_collation())),
        );
        cols.push(format!(
            "    PRIMARY KEY CLUSTERED ({})",
            key_list(&self.keys, None)
        ));
        format!(
            "CREATE TABLE {} (\n{}\n);",
            self.stage_rows.sql(),
            cols.join(",\n")
        )
    }

    /// Staging table of snapshot keys (the clustered key enforces uniqueness).
    pub fn stage_keys_ddl(&self) -> String {
        let mut cols: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("    {} {} NOT NULL", ident(&k.name), k.ty.sql()))
            .collect();
        cols.push(format!(
            "    PRIMARY KEY CLUSTERED ({})",
            key_list(&self.keys, None)
        ));
        format!(
            "CREATE TABLE {} (\n{}\n);",
            self.stage_keys.sql(),
            cols.join(",\n")
        )
    }

    /// Drops both staging tables (cleanup on the staging lease).
    pub fn stage_drop(&self) -> String {
        format!(
            "DROP TABLE IF EXISTS {}; DROP TABLE IF EXISTS {};",
            self.stage_rows.sql(),
            self.stage_keys.sql()
        )
    }

    /// Staged counts: delta rows and snapshot keys.
    pub fn staged_counts(&self) -> String {
        format!(
            "SELECT (SELECT COUNT_BIG(*) FROM {}) AS row_count, (SELECT COUNT_BIG(*) FROM {}) AS key_count;",
            self.stage_rows.sql(),
            self.stage_keys.sql()
        )
    }

    /// The session-level table for `M`. Sent as a plain batch (not through `sp_executesql`), so
    /// it outlives the statement and is visible to [`Finalizer::populations`] and
    /// [`Finalizer::missing_action`]; text keys keep the binary collation in tempdb.
    pub fn missing_table_ddl(&self) -> String {
        let cols: Vec<String> = self
            .keys
            .iter()
            .map(|k| format!("{} {} NOT NULL", ident(&k.name), k.ty.sql()))
            .collect();
        format!(
            "DROP TABLE IF EXISTS {m}; CREATE TABLE {m} ({cols}, PRIMARY KEY CLUSTERED ({keys}));",
            m = MISSING_TABLE,
            cols = cols.join(", "),
            keys = key_list(&self.keys, None),
        )
    }

    /// Fixes `M` (active target keys absent from the snapshot) into [`MISSING_TABLE`] and
    /// returns active, total and missing counts, before any business DML.
    pub fn populations(&self) -> String {
        format!(
            "DELETE FROM {m}; INSERT INTO {m} ({keys}) SELECT {tk} FROM {t} AS t WHERE {act} \
AND NOT EXISTS (SELECT 1 FROM {k} AS k WHERE {join}); \
SELECT (SELECT COUNT_BIG(*) FROM {t} AS t WHERE {act}) AS active, \
(SELECT COUNT_BIG(*) FROM {t}) AS total, (SELECT COUNT_BIG(*) FROM {m}) AS missing;",
            keys = key_list(&self.keys, None),
            tk = key_list(&self.keys, Some("t")),
            m = MISSING_TABLE,
            t = self.target.sql(),
            k = self.stage_keys.sql(),
            act = self.active("t"),
            join = key_join(&self.keys, "k", "t"),
        )
    }

    /// Rewrites active rows whose business columns changed (null-safe `EXCEPT` comparison of
    /// [`BusinessColumn::exact`] expressions, independent of the columns' collations); `@P1` is
    /// the detection timestamp. Identical rows are not touched.
    pub fn update_changed(&self) -> String {
        if self.business.is_empty() {
            // A key-only table has nothing that can change.
            return "SELECT CAST(0 AS bigint) AS affected;".to_owned();
        }
        let exact = |alias: &str| {
            self.business
                .iter()
                .map(|b| b.exact(alias))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (s_cols, t_cols) = (exact("s"), exact("t"));
        Self::counted(&format!(
            "UPDATE t SET {set}t.{upd} = @P1 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) \
FROM {t} AS t INNER JOIN {s} AS s ON {join} \
WHERE {act} AND EXISTS (SELECT {s_cols} EXCEPT SELECT {t_cols});",
            set = self.set_business(),
            upd = ident(UPDATED_AT_COLUMN),
            t = self.target.sql(),
            s = self.stage_rows.sql(),
            join = key_join(&self.keys, "s", "t"),
            act = self.active("t"),
        ))
    }

    /// Rewrites deleted rows that reappeared in the delta and marks them active.
    pub fn reactivate(&self) -> String {
        let clear = match self.mode {
            DeleteMode::TimestampOnly | DeleteMode::TimestampAndFlag => {
                format!("t.{} = NULL", ident(DELETED_AT_COLUMN))
            }
            DeleteMode::FlagOnly => format!("t.{} = 0", ident(IS_DELETED_COLUMN)),
            // Without soft deletes no row is ever deleted in place.
            DeleteMode::Hard => return "SELECT CAST(0 AS bigint) AS affected;".to_owned(),
        };
        Self::counted(&format!(
            "UPDATE t SET {set}{clear}, t.{upd} = @P1 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) \
FROM {t} AS t INNER JOIN {s} AS s ON {join} WHERE NOT ({act});",
            set = self.set_business(),
            upd = ident(UPDATED_AT_COLUMN),
            t = self.target.sql(),
            s = self.stage_rows.sql(),
            join = key_join(&self.keys, "s", "t"),
            act = self.active("t"),
        ))
    }

    /// Inserts delta keys absent from the target, with the deletion marker written as active
    /// (the plan's insert rule; never left to a column default).
    pub fn insert(&self) -> String {
        let mut cols: Vec<String> = self.keys.iter().map(|k| ident(&k.name)).collect();
        cols.extend(self.business.iter().map(|b| ident(&b.name)));
        let mut vals: Vec<String> = cols.iter().map(|c| format!("s.{c}")).collect();
        match self.mode {
            DeleteMode::TimestampOnly | DeleteMode::TimestampAndFlag => {
                cols.push(ident(DELETED_AT_COLUMN));
                vals.push("NULL".into());
            }
            DeleteMode::FlagOnly => {
                cols.push(ident(IS_DELETED_COLUMN));
                vals.push("0".into());
            }
            DeleteMode::Hard => {}
        }
        cols.push(ident(UPDATED_AT_COLUMN));
        vals.push("@P1".into());
        Self::counted(&format!(
            "INSERT INTO {t} ({cols}) OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) \
SELECT {vals} FROM {s} AS s WHERE NOT EXISTS (SELECT 1 FROM {t} AS t WHERE {join});",
            t = self.target.sql(),
            cols = cols.join(", "),
            vals = vals.join(", "),
            s = self.stage_rows.sql(),
            join = key_join(&self.keys, "t", "s"),
        ))
    }

    /// The missing-key action over `M` (fixed by [`Finalizer::populations`]). A soft delete
    /// keeps the first detection timestamp of rows already deleted (they are not in `M`).
    pub fn missing_action(&self) -> String {
        let from = format!(
            "FROM {t} AS t INNER JOIN {m} AS m ON {join} WHERE {act}",
            t = self.target.sql(),
            m = MISSING_TABLE,
            join = key_join(&self.keys, "m", "t"),
            act = self.active("t"),
        );
        let dml = match (self.missing, self.mode) {
            (MissingAction::HardDelete, _) => {
                format!("DELETE t OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) {from};")
            }
            (MissingAction::SoftDelete, DeleteMode::FlagOnly) => format!(
                "UPDATE t SET t.{f} = 1, t.{u} = @P1 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) {from};",
                f = ident(IS_DELETED_COLUMN),
                u = ident(UPDATED_AT_COLUMN),
            ),
            (MissingAction::SoftDelete, DeleteMode::Hard) => {
                // Refused by `validate`; never a silent no-op.
                return "THROW 51010, 'soft delete without soft-delete columns', 1;".to_owned();
            }
            (MissingAction::SoftDelete, _) => format!(
                "UPDATE t SET t.{d} = @P1, t.{u} = @P1 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) {from};",
                d = ident(DELETED_AT_COLUMN),
                u = ident(UPDATED_AT_COLUMN),
            ),
        };
        Self::counted(&dml)
    }

    /// Active-key parity after apply: active and total target rows, delta keys outside the
    /// snapshot (must be 0).
    pub fn parity(&self) -> String {
        format!(
            "SELECT (SELECT COUNT_BIG(*) FROM {t} AS t WHERE {act}) AS active, \
(SELECT COUNT_BIG(*) FROM {t}) AS total, \
(SELECT COUNT_BIG(*) FROM {s} AS s WHERE NOT EXISTS (SELECT 1 FROM {k} AS k WHERE {join})) \
AS delta_outside_snapshot;",
            t = self.target.sql(),
            act = self.active("t"),
            s = self.stage_rows.sql(),
            k = self.stage_keys.sql(),
            join = key_join(&self.keys, "k", "s"),
        )
    }

    /// This key's state row, locked for the rest of the transaction (`@P1` = state key).
    pub fn read_own_state(&self) -> String {
        format!(
            "SELECT {STATE_COLUMNS} FROM {} WITH (UPDLOCK, HOLDLOCK) WHERE state_key = @P1;",
            self.state.source_state.sql()
        )
    }

    /// Another active owner of the target (`@P1` = state key, `@P2` = target identity).
    pub fn read_other_owner(&self) -> String {
        format!(
            "SELECT state_key, safe_xmin, revision FROM {} WITH (UPDLOCK, HOLDLOCK) \
WHERE target_identity = @P2 AND state_key <> @P1 AND superseded_at_utc IS NULL;",
            self.state.source_state.sql()
        )
    }

    /// The selected authority under the lock (`@P1` = authority id).
    pub fn read_authority(&self) -> String {
        format!(
            "SELECT a.authority_id, a.recorded_digest, a.document, \
CONVERT(int, CASE WHEN c.receipt_id IS NULL THEN 0 ELSE 1 END) AS consumed \
FROM {a} AS a WITH (UPDLOCK, HOLDLOCK) LEFT JOIN {c} AS c WITH (UPDLOCK, HOLDLOCK) \
ON c.authority_id = a.authority_id WHERE a.authority_id = @P1;",
            a = self.state.repair_authority.sql(),
            c = self.state.repair_consumption.sql(),
        )
    }

    /// Marks the old owner superseded (`@P1` old key, `@P2` xmin, `@P3` revision, `@P4` new key,
    /// `@P5` detection time); exact count from `OUTPUT` (must be 1).
    pub fn supersede(&self) -> String {
        Self::counted(&format!(
            "UPDATE s SET s.superseded_at_utc = @P5, s.superseded_by = @P4 \
OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) FROM {} AS s \
WHERE s.state_key = @P1 AND s.safe_xmin = @P2 AND s.revision = @P3 \
AND s.superseded_at_utc IS NULL;",
            self.state.source_state.sql()
        ))
    }

    /// Checkpoint CAS on an existing row: (`@P1` key, `@P2` expected xmin, `@P3` expected
    /// revision, `@P4` new xmin, `@P5` new revision, `@P6` visible horizon, `@P7` receipt id,
    /// `@P8` detection time); 1 = applied, 0 = stale.
    pub fn cas_update(&self) -> String {
        Self::counted(&format!(
            "UPDATE s SET s.safe_xmin = @P4, s.revision = @P5, s.visible_horizon = @P6, \
s.last_receipt_id = @P7, s.updated_at_utc = @P8 OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) \
FROM {} AS s WHERE s.state_key = @P1 AND s.safe_xmin = @P2 AND s.revision = @P3 \
AND s.superseded_at_utc IS NULL;",
            self.state.source_state.sql()
        ))
    }

    /// Checkpoint CAS when no row may exist: (`@P1` key, `@P2` target identity, `@P3` scope
    /// hash, `@P4` new xmin, `@P5` revision, `@P6` horizon, `@P7` receipt id, `@P8` time).
    pub fn cas_insert(&self) -> String {
        Self::counted(&format!(
            "INSERT INTO {st} (state_key, target_identity, scope_hash, safe_xmin, revision, \
visible_horizon, last_receipt_id, created_at_utc, updated_at_utc) \
OUTPUT CONVERT(bit, 1) INTO @dpone_out (n) \
SELECT @P1, @P2, @P3, @P4, @P5, @P6, @P7, @P8, @P8 \
WHERE NOT EXISTS (SELECT 1 FROM {st} AS s WITH (UPDLOCK, HOLDLOCK) WHERE s.state_key = @P1);",
            st = self.state.source_state.sql()
        ))
    }

    /// The commit receipt, through the three-part state name on the run connection.
    pub fn insert_receipt(&self) -> String {
        format!(
            "INSERT INTO {} (receipt_id, load_id, invocation_id, invocation_digest, state_key, \
previous_xmin, previous_revision, new_xmin, new_revision, body, committed_at_utc) \
VALUES (@P1, @P2, @P3, @P4, @P5, @P6, @P7, @P8, @P9, @P10, @P11);",
            self.state.receipt.sql()
        )
    }

    /// The authority consumption, bound to the state key, load and receipt.
    pub fn consume_authority(&self) -> String {
        format!(
            "INSERT INTO {} (authority_id, authority_digest, state_key, load_id, receipt_id, \
consumed_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6);",
            self.state.repair_consumption.sql()
        )
    }

    /// The run row.
    pub fn record_run(&self) -> String {
        format!(
            "INSERT INTO {} (run_id, invocation_id, state_key, status, code, evidence, \
recorded_at_utc) VALUES (@P1, @P2, @P3, @P4, @P5, @P6, SYSUTCDATETIME());",
            self.state.run.sql()
        )
    }

    /// Every finalizer statement in run order, named, for snapshot and parse tests.
    pub fn all(&self) -> Vec<(&'static str, String)> {
        vec![
            ("stage_rows_ddl", self.stage_rows_ddl()),
            ("stage_keys_ddl", self.stage_keys_ddl()),
            ("staged_counts", self.staged_counts()),
            ("read_own_state", self.read_own_state()),
            ("read_other_owner", self.read_other_owner()),
            ("read_authority", self.read_authority()),
            ("missing_table_ddl", self.missing_table_ddl()),
            ("populations", self.populations()),
            ("supersede", self.supersede()),
            ("update_changed", self.update_changed()),
            ("reactivate", self.reactivate()),
            ("insert", self.insert()),
            ("missing_action", self.missing_action()),
            ("parity", self.parity()),
            ("cas_update", self.cas_update()),
            ("cas_insert", self.cas_insert()),
            ("insert_receipt", self.insert_receipt()),
            ("consume_authority", self.consume_authority()),
            ("record_run", self.record_run()),
            ("stage_drop", self.stage_drop()),
            ("state_catalog_check", self.state.catalog_check()),
            ("state_catalog_facts", self.state.catalog_facts()),
            ("select_state", self.state.select_state()),
            (
                "select_receipt_by_invocation",
                self.state.select_receipt_by_invocation(),
            ),
            (
                "select_receipt_by_load",
                self.state.select_receipt_by_load(),
            ),
            ("select_receipts", self.state.select_receipts()),
            ("select_authority", self.state.select_authority()),
            ("insert_failed_run", self.state.insert_failed_run()),
        ]
    }
}

/// The fixed statements, named, for snapshot and parse tests.
pub fn fixed() -> Vec<(&'static str, &'static str)> {
    vec![
        ("server_facts", SERVER_FACTS),
        ("metadata_permission", METADATA_PERMISSION),
        ("catalog_rows", CATALOG_ROWS),
        ("session_identity", SESSION_IDENTITY),
        ("current_database", CURRENT_DATABASE),
        ("target_columns", TARGET_COLUMNS),
        ("target_unique_indexes", TARGET_UNIQUE_INDEXES),
        ("target_triggers", TARGET_TRIGGERS),
        ("session_options", SESSION_OPTIONS),
        ("set_xact_abort", SET_XACT_ABORT),
        ("set_serializable", SET_SERIALIZABLE),
        ("begin", BEGIN),
        ("applock", APPLOCK),
        ("detection_time", DETECTION_TIME),
        ("commit", COMMIT),
        ("rollback", ROLLBACK),
        ("stale_scratch_databases", STALE_SCRATCH_DATABASES),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(ident("a]b"), "[a]]b]");
        assert_eq!(ThreePart::new("D", "s", "t").sql(), "[D].[s].[t]");
    }

    #[test]
    fn key_width() {
        assert_eq!(KeyType::Text { max_chars: 450 }.index_bytes(), 900);
        assert_eq!(
            KeyType::Text { max_chars: 10 }.sql(),
            "nvarchar(10) COLLATE Latin1_General_100_BIN2"
        );
    }
}
