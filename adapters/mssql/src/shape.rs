//! Target-shape preflight as a pure check over the rows of [`crate::sql::TARGET_COLUMNS`]:
//! key columns present, `NOT NULL`, text keys in `Latin1_General_100_BIN2`, business columns
//! present, and the delete mode's reserved columns exactly as the mode requires.

use crate::sql::{
    DELETED_AT_COLUMN, DeleteMode, Finalizer, IS_DELETED_COLUMN, KEY_COLLATION, KeyType,
    UPDATED_AT_COLUMN,
};

/// One row of [`crate::sql::TARGET_COLUMNS`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnRow {
    /// Column name.
    pub name: String,
    /// `sys.types.name`.
    pub type_name: String,
    /// Nullable.
    pub is_nullable: bool,
    /// Collation (text columns only).
    pub collation_name: Option<String>,
    /// Computed column.
    pub is_computed: bool,
    /// Persisted computed column.
    pub is_persisted: bool,
    /// `max_length` in bytes (-1 for `max`).
    pub max_length: i32,
    /// `precision` (decimal, numeric).
    pub precision: u8,
    /// `scale` (decimal, numeric, datetime2, time, datetimeoffset).
    pub scale: u8,
}

impl ColumnRow {
    /// The column's type as SQL Server spells it in DDL (`nvarchar(40)`, `decimal(18,2)`,
    /// `datetime2(7)`, `varbinary(max)`), for staging tables of the same shape.
    pub fn type_sql(&self) -> String {
        let len = |chars: i32| {
            if self.max_length < 0 {
                "max".to_owned()
            } else {
                chars.to_string()
            }
        };
        match self.type_name.as_str() {
            "nvarchar" | "nchar" => format!("{}({})", self.type_name, len(self.max_length / 2)),
            "varchar" | "char" | "varbinary" | "binary" => {
                format!("{}({})", self.type_name, len(self.max_length))
            }
            "decimal" | "numeric" => {
                format!("{}({},{})", self.type_name, self.precision, self.scale)
            }
            "datetime2" | "time" | "datetimeoffset" => {
                format!("{}({})", self.type_name, self.scale)
            }
            other => other.to_owned(),
        }
    }

    /// The key type of a unique-key column, if SQL Server keys of this type are supported.
    pub fn key_type(&self) -> Option<KeyType> {
        match self.type_name.as_str() {
            "int" => Some(KeyType::Int),
            "bigint" => Some(KeyType::BigInt),
            "uniqueidentifier" => Some(KeyType::Uuid),
            "nvarchar" if self.max_length > 0 => Some(KeyType::Text {
                max_chars: u16::try_from(self.max_length / 2).ok()?,
            }),
            _ => None,
        }
    }
}

/// Stable code of every shape failure (the message names the column).
pub const TARGET_TABLE_INVALID: &str = "mssql_transaction.target_table_invalid";

fn find<'a>(rows: &'a [ColumnRow], name: &str) -> Result<&'a ColumnRow, String> {
    rows.iter()
        .find(|r| r.name == name)
        .ok_or_else(|| format!("column {name:?} is missing"))
}

fn key_type_name(ty: KeyType) -> &'static str {
    match ty {
        KeyType::Int => "int",
        KeyType::BigInt => "bigint",
        KeyType::Uuid => "uniqueidentifier",
        KeyType::Text { .. } => "nvarchar",
    }
}

/// Verifies the target's columns against the frozen finalizer coordinates.
pub fn verify_target(f: &Finalizer, rows: &[ColumnRow]) -> Result<(), String> {
    for k in &f.keys {
        let r = find(rows, &k.name)?;
        if r.type_name != key_type_name(k.ty) || r.is_nullable || r.is_computed {
            return Err(format!("key column {:?} has the wrong type", k.name));
        }
        if matches!(k.ty, KeyType::Text { .. })
            && r.collation_name.as_deref() != Some(KEY_COLLATION)
        {
            return Err(format!("key column {:?} is not {KEY_COLLATION}", k.name));
        }
    }
    for b in &f.business {
        let r = find(rows, &b.name)?;
        if r.is_computed {
            return Err(format!("business column {:?} is computed", b.name));
        }
    }
    let upd = find(rows, UPDATED_AT_COLUMN)?;
    if upd.type_name != "datetime2" || upd.is_nullable {
        return Err(format!("{UPDATED_AT_COLUMN} must be datetime2 NOT NULL"));
    }
    let deleted_at = rows.iter().find(|r| r.name == DELETED_AT_COLUMN);
    let flag = rows.iter().find(|r| r.name == IS_DELETED_COLUMN);
    let ts_ok = |c: Option<&ColumnRow>| {
        c.is_some_and(|c| c.type_name == "datetime2" && c.is_nullable && !c.is_computed)
    };
    let ok = match f.mode {
        DeleteMode::TimestampOnly => ts_ok(deleted_at) && flag.is_none(),
        DeleteMode::TimestampAndFlag => {
            ts_ok(deleted_at)
                && flag.is_some_and(|c| c.type_name == "bit" && c.is_computed && c.is_persisted)
        }
        DeleteMode::FlagOnly => {
            deleted_at.is_none()
                && flag.is_some_and(|c| c.type_name == "bit" && !c.is_nullable && !c.is_computed)
        }
        DeleteMode::Hard => deleted_at.is_none() && flag.is_none(),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "reserved soft-delete columns do not match the {:?} mode",
            f.mode
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Bulk-load limits of tiberius 0.12.3 (refused before extraction and before any transaction)
// ---------------------------------------------------------------------------------------------

/// A staged column name the bulk load cannot send: tiberius writes the names of `INSERT BULK`
/// unquoted, so a reserved word (or a name that is not a regular identifier) breaks it.
pub const BULK_COLUMN_NAME_UNSUPPORTED: &str = "mssql_transaction.bulk_column_name_unsupported";
/// A staged column type the bulk load cannot carry faithfully (see [`check_bulk_column`]).
pub const BULK_COLUMN_TYPE_UNSUPPORTED: &str = "mssql_transaction.bulk_column_type_unsupported";

/// The reserved keywords of Transact-SQL (SQL Server 2016 to 2025), upper case. An
/// `INSERT BULK` column list with one of them unquoted does not parse. (ODBC's reserved words,
/// such as `DATE`, `VALUE` or `LEVEL`, are ordinary identifiers in T-SQL and stay allowed.)
pub const RESERVED_WORDS: &[&str] = &[
    "ADD",
    "ALL",
    "ALTER",
    "AND",
    "ANY",
    "AS",
    "ASC",
    "AUTHORIZATION",
    "BACKUP",
    "BEGIN",
    "BETWEEN",
    "BREAK",
    "BROWSE",
    "BULK",
    "BY",
    "CASCADE",
    "CASE",
    "CHECK",
    "CHECKPOINT",
    "CLOSE",
    "CLUSTERED",
    "COALESCE",
    "COLLATE",
    "COLUMN",
    "COMMIT",
    "COMPUTE",
    "CONSTRAINT",
    "CONTAINS",
    "CONTAINSTABLE",
    "CONTINUE",
    "CONVERT",
    "CREATE",
    "CROSS",
    "CURRENT",
    "CURRENT_DATE",
    "CURRENT_TIME",
    "CURRENT_TIMESTAMP",
    "CURRENT_USER",
    "CURSOR",
    "DATABASE",
    "DBCC",
    "DEALLOCATE",
    "DECLARE",
    "DEFAULT",
    "DELETE",
    "DENY",
    "DESC",
    "DISK",
    "DISTINCT",
    "DISTRIBUTED",
    "DOUBLE",
    "DROP",
    "DUMP",
    "ELSE",
    "END",
    "ERRLVL",
    "ESCAPE",
    "EXCEPT",
    "EXEC",
    "EXECUTE",
    "EXISTS",
    "EXIT",
    "EXTERNAL",
    "FETCH",
    "FILE",
    "FILLFACTOR",
    "FOR",
    "FOREIGN",
    "FREETEXT",
    "FREETEXTTABLE",
    "FROM",
    "FULL",
    "FUNCTION",
    "GOTO",
    "GRANT",
    "GROUP",
    "HAVING",
    "HOLDLOCK",
    "IDENTITY",
    "IDENTITY_INSERT",
    "IDENTITYCOL",
    "IF",
    "IN",
    "INDEX",
    "INNER",
    "INSERT",
    "INTERSECT",
    "INTO",
    "IS",
    "JOIN",
    "KEY",
    "KILL",
    "LEFT",
    "LIKE",
    "LINENO",
    "LOAD",
    "MERGE",
    "NATIONAL",
    "NOCHECK",
    "NONCLUSTERED",
    "NOT",
    "NULL",
    "NULLIF",
    "OF",
    "OFF",
    "OFFSETS",
    "ON",
    "OPEN",
    "OPENDATASOURCE",
    "OPENQUERY",
    "OPENROWSET",
    "OPENXML",
    "OPTION",
    "OR",
    "ORDER",
    "OUTER",
    "OVER",
    "PERCENT",
    "PIVOT",
    "PLAN",
    "PRECISION",
    "PRIMARY",
    "PRINT",
    "PROC",
    "PROCEDURE",
    "PUBLIC",
    "RAISERROR",
    "READ",
    "READTEXT",
    "RECONFIGURE",
    "REFERENCES",
    "REPLICATION",
    "RESTORE",
    "RESTRICT",
    "RETURN",
    "REVERT",
    "REVOKE",
    "RIGHT",
    "ROLLBACK",
    "ROWCOUNT",
    "ROWGUIDCOL",
    "RULE",
    "SAVE",
    "SCHEMA",
    "SECURITYAUDIT",
    "SELECT",
    "SEMANTICKEYPHRASETABLE",
    "SEMANTICSIMILARITYDETAILSTABLE",
    "SEMANTICSIMILARITYTABLE",
    "SESSION_USER",
    "SET",
    "SETUSER",
    "SHUTDOWN",
    "SOME",
    "STATISTICS",
    "SYSTEM_USER",
    "TABLE",
    "TABLESAMPLE",
    "TEXTSIZE",
    "THEN",
    "TO",
    "TOP",
    "TRAN",
    "TRANSACTION",
    "TRIGGER",
    "TRUNCATE",
    "TRY_CONVERT",
    "TSEQUAL",
    "UNION",
    "UNIQUE",
    "UNPIVOT",
    "UPDATE",
    "UPDATETEXT",
    "USE",
    "USER",
    "VALUES",
    "VARYING",
    "VIEW",
    "WAITFOR",
    "WHEN",
    "WHERE",
    "WHILE",
    "WITH",
    "WRITETEXT",
];

/// Refuses a staged column name that `INSERT BULK` would not read unquoted: not a regular
/// identifier (`[A-Za-z_][A-Za-z0-9_]*`, at most 128 characters) or a reserved word.
pub fn check_bulk_column_name(name: &str) -> Result<(), String> {
    let regular = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !regular {
        return Err(format!(
            "{BULK_COLUMN_NAME_UNSUPPORTED}: column {name:?} is not a regular identifier; the \
             bulk load names staged columns unquoted"
        ));
    }
    if RESERVED_WORDS.contains(&name.to_ascii_uppercase().as_str()) {
        return Err(format!(
            "{BULK_COLUMN_NAME_UNSUPPORTED}: column {name:?} is a reserved word; the bulk load \
             names staged columns unquoted, so rename the column (source and target)"
        ));
    }
    Ok(())
}

/// Refuses, before any extraction, a business column type the bulk load cannot carry
/// faithfully — only the target types of the route's type mapping are loaded at all (`bit`,
/// `smallint`, `int`, `bigint`, `real`, `float`, `nvarchar(n)`, `varbinary(n)`,
/// `uniqueidentifier`, `date`, `time(7)`, `datetime2(6|7)`, `datetimeoffset(7)`,
/// `decimal`/`numeric(p,s)` with `s <= 37`) — and, among them, the limits of tiberius 0.12.3:
///
/// - `time` and `datetimeoffset` other than scale 7: `INSERT BULK` declares them without a
///   scale (so at scale 7) while the values are encoded at the column's scale;
/// - `nvarchar` of 2001–4000 characters: declared by byte length, which exceeds 4000, so as
///   `nvarchar(max)` while the values are sent in the non-PLP form;
/// - `(max)` types: values over 65,535 bytes are refused by the bulk load, mid-run; the schema
///   is refused up front instead.
pub fn check_bulk_column(c: &ColumnRow) -> Result<(), String> {
    let refuse = |why: &str| {
        Err(format!(
            "{BULK_COLUMN_TYPE_UNSUPPORTED}: column {:?} ({}) {why}",
            c.name,
            c.type_sql()
        ))
    };
    const MAX: &str = "is a (max) type; the bulk load refuses values over 65,535 bytes, so the \
                       schema is refused before any extraction";
    match c.type_name.as_str() {
        "bit" | "smallint" | "int" | "bigint" | "real" | "float" | "uniqueidentifier" | "date" => {
            Ok(())
        }
        "nvarchar" if c.max_length == -1 => refuse(MAX),
        "nvarchar" if (4001..=8000).contains(&c.max_length) => {
            refuse("is declared as nvarchar(max) by the bulk load; use at most 2000 characters")
        }
        "nvarchar" => Ok(()),
        "varbinary" if c.max_length == -1 => refuse(MAX),
        "varbinary" => Ok(()),
        "time" | "datetimeoffset" if c.scale == 7 => Ok(()),
        "time" | "datetimeoffset" => {
            refuse("is loaded without its scale by the bulk load; use scale 7 (the default)")
        }
        "datetime2" if (6..=7).contains(&c.scale) => Ok(()),
        "decimal" | "numeric" if (1..=38).contains(&c.precision) && c.scale <= 37 => Ok(()),
        _ => refuse(
            "has no exact mapping from a PostgreSQL type in this route (see the type mapping in \
             docs/mssql-target.md)",
        ),
    }
}
