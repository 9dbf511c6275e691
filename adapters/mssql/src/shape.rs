//! Target-shape preflight as a pure check over the rows of [`crate::sql::TARGET_COLUMNS`]:
//! key columns present, `NOT NULL`, text keys in `Latin1_General_100_BIN2`, business columns
//! present, and the delete mode's reserved columns exactly as the mode requires; the column
//! types the route accepts and the load path of each ([`check_bulk_column`], [`load_path`]).

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
    /// The code page of the column's collation as the server reports it
    /// (`COLLATIONPROPERTY(collation_name, 'CodePage')`; 65001 for a `_UTF8` collation), for
    /// text columns; `None` otherwise.
    pub code_page: Option<u32>,
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
// Accepted column types and their load paths (refused before extraction and any transaction)
// ---------------------------------------------------------------------------------------------

/// A staged column name no SQL Server column can have (empty, or longer than 128 characters).
/// tiberius 0.13 bracket-quotes the names of `INSERT BULK` (a `]` doubled), so reserved words
/// and irregular identifiers load like any other name; 0.12.3 wrote them unquoted.
pub const BULK_COLUMN_NAME_UNSUPPORTED: &str = "mssql_transaction.bulk_column_name_unsupported";
/// A staged column type no load path carries exactly (see [`check_bulk_column`]).
pub const BULK_COLUMN_TYPE_UNSUPPORTED: &str = "mssql_transaction.bulk_column_type_unsupported";

/// Refuses a staged column name no SQL Server column can have: empty, or longer than 128
/// characters (`sysname`). Every other name — reserved words, spaces, `]` — is loaded, since
/// tiberius 0.13 bracket-quotes `INSERT BULK`'s column list.
pub fn check_bulk_column_name(name: &str) -> Result<(), String> {
    let chars = name.chars().count();
    if chars == 0 || chars > 128 {
        return Err(format!(
            "{BULK_COLUMN_NAME_UNSUPPORTED}: a column name of {chars} characters cannot name a \
             SQL Server column (1 to 128)"
        ));
    }
    Ok(())
}

/// How the rows of one staging table are loaded (one path for every row of the table).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPath {
    /// tiberius 0.13's `INSERT BULK` (`Client::bulk_insert`).
    Bulk,
    /// Parameterized, batched `INSERT INTO ... VALUES (@P1, ...), (...)` over RPC
    /// ([`crate::sql::staging_insert`]): for the column types and lengths the bulk load cannot
    /// carry exactly.
    Insert,
}

/// Code pages of `varchar`/`char` collations whose characters the adapter can check exactly:
/// 65001 (`_UTF8` collations, every character) and the single-byte Windows code pages, whose
/// WHATWG tables in `encoding_rs` are Windows' own mappings.
pub fn code_page_supported(code_page: u32) -> bool {
    code_page == 65001 || code_page == 874 || (1250..=1258).contains(&code_page)
}

/// The path that carries a column accepted by [`check_bulk_column`] exactly. The bulk load of
/// tiberius 0.13 (read in its source: `MetaDataColumn`'s `Display` writes the `INSERT BULK`
/// column list, `ColumnData::encode` the values) carries `bit`, `tinyint`, `smallint`, `int`,
/// `bigint`, `real`, `float`, `decimal`/`numeric`, `money`, `smallmoney`, `uniqueidentifier`,
/// `date`, `datetime`, `datetime2(0..7)`, `time(7)`, `datetimeoffset(7)`, `nvarchar(1..2000)`,
/// `varbinary(1..8000)` and `binary(n)`. Everything else goes through [`LoadPath::Insert`]:
///
/// - `(max)` types: the encoder compares a value's length with the PLP column's 0xFFFF, so
///   values over 65,535 bytes fail;
/// - `nvarchar(2001..4000)`: declared by byte length, so as `nvarchar(max)`, with non-PLP values;
/// - `nchar(n)`: declared by byte length, so as `nchar(2n)`;
/// - `varchar`/`char`: encoded with the code page tiberius derives from the collation's LCID,
///   which ignores the `_UTF8` flag; the RPC path sends `nvarchar` and the server converts it
///   with the column's own code page;
/// - `smalldatetime`: declared as `datetime` while its values are sent in 4 bytes;
/// - `time(n)`, `datetimeoffset(n)` with n ≠ 7: declared without their scale (so at 7) while
///   values are encoded at the column's scale.
pub fn load_path(c: &ColumnRow) -> LoadPath {
    match c.type_name.as_str() {
        _ if c.max_length == -1 => LoadPath::Insert,
        "nvarchar" if c.max_length > 4000 => LoadPath::Insert,
        "varchar" | "char" | "nchar" | "smalldatetime" => LoadPath::Insert,
        "time" | "datetimeoffset" if c.scale != 7 => LoadPath::Insert,
        _ => LoadPath::Bulk,
    }
}

/// One path for the whole table: [`LoadPath::Insert`] as soon as one column needs it.
pub fn table_load_path(columns: &[ColumnRow]) -> LoadPath {
    if columns.iter().any(|c| load_path(c) == LoadPath::Insert) {
        LoadPath::Insert
    } else {
        LoadPath::Bulk
    }
}

/// Refuses, before any extraction, a business column type no load path carries exactly.
///
/// Accepted (each value is then checked host-side by [`crate::stage::ColumnFit`], and one that
/// would not read back equal is refused, never rounded): `bit`, `tinyint`, `smallint`, `int`,
/// `bigint`, `real`, `float`, `decimal`/`numeric(p,s)` (`s <= 37`), `money`, `smallmoney`,
/// `uniqueidentifier`, `date`, `datetime`, `smalldatetime`, `datetime2(0..7)`, `time(0..7)`,
/// `datetimeoffset(0..7)`, `nvarchar(n|max)`, `nchar(n)`, `varchar(n|max)` and `char(n)` in a
/// collation whose code page [`code_page_supported`], `varbinary(n|max)` and `binary(n)`.
/// [`load_path`] says which path loads them.
///
/// Refused: `xml` (the server re-serializes a document, and `xml` cannot be compared by the
/// finalizer's `EXCEPT`), `sql_variant`, `text`, `ntext`, `image` (not comparable, deprecated),
/// `timestamp`/`rowversion` (written by the server), CLR types (`geography`, `geometry`,
/// `hierarchyid`), alias types, and `varchar`/`char` in a multi-byte legacy code page (932, 936,
/// 949, 950) or an OEM one (437, 850), whose Windows tables the host cannot reproduce exactly.
pub fn check_bulk_column(c: &ColumnRow) -> Result<(), String> {
    let refuse = |why: &str| {
        Err(format!(
            "{BULK_COLUMN_TYPE_UNSUPPORTED}: column {:?} ({}) {why}",
            c.name,
            c.type_sql()
        ))
    };
    match c.type_name.as_str() {
        "bit" | "tinyint" | "smallint" | "int" | "bigint" | "real" | "float"
        | "uniqueidentifier" | "date" | "money" | "smallmoney" | "datetime" | "smalldatetime" => {
            Ok(())
        }
        "nvarchar" | "varbinary" if c.max_length == -1 || c.max_length > 0 => Ok(()),
        "nchar" | "binary" if c.max_length > 0 => Ok(()),
        "varchar" | "char" if c.max_length == -1 || c.max_length > 0 => match c.code_page {
            Some(cp) if code_page_supported(cp) => Ok(()),
            Some(cp) => refuse(&format!(
                "uses code page {cp}; only _UTF8 collations (65001) and the single-byte \
                 Windows code pages (874, 1250-1258) are checked exactly"
            )),
            None => refuse("has no code page the host can check"),
        },
        "time" | "datetimeoffset" | "datetime2" if c.scale <= 7 => Ok(()),
        "decimal" | "numeric" if (1..=38).contains(&c.precision) && c.scale <= 37 => Ok(()),
        "xml" => refuse(
            "is xml: the server re-serializes documents and the finalizer cannot compare xml",
        ),
        "text" | "ntext" | "image" => {
            refuse("is a deprecated large-object type the finalizer cannot compare")
        }
        "sql_variant" => refuse("is sql_variant, whose base type varies per value"),
        "timestamp" | "rowversion" => refuse("is written by the server, not loadable"),
        _ => refuse(
            "has no exact mapping from a PostgreSQL type in this route (see the type mapping in \
             docs/mssql-target.md)",
        ),
    }
}
