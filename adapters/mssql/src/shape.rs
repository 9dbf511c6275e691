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
// Bulk-load limits of tiberius 0.13 (refused before extraction and before any transaction)
// ---------------------------------------------------------------------------------------------

/// A staged column name no SQL Server column can have (empty, or longer than 128 characters).
/// tiberius 0.13 bracket-quotes the names of `INSERT BULK` (a `]` doubled), so reserved words
/// and irregular identifiers load like any other name; 0.12.3 wrote them unquoted.
pub const BULK_COLUMN_NAME_UNSUPPORTED: &str = "mssql_transaction.bulk_column_name_unsupported";
/// A staged column type the bulk load cannot carry faithfully (see [`check_bulk_column`]).
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

/// Refuses, before any extraction, a business column type the bulk load cannot carry
/// faithfully — only the target types of the route's type mapping are loaded at all (`bit`,
/// `smallint`, `int`, `bigint`, `real`, `float`, `nvarchar(n)`, `varbinary(n)`,
/// `uniqueidentifier`, `date`, `time(7)`, `datetime2(0..7)`, `datetimeoffset(7)`,
/// `decimal`/`numeric(p,s)` with `s <= 37`) — and, among them, the limits tiberius 0.13 keeps
/// (read in its source: `MetaDataColumn`'s `Display` writes the `INSERT BULK` column list,
/// `ColumnData::encode` the values):
///
/// - `time` and `datetimeoffset` other than scale 7: `INSERT BULK` declares them without a
///   scale (so at scale 7) while the values are encoded at the column's scale;
/// - `nvarchar` of 2001–4000 characters: declared by byte length, which exceeds 4000, so as
///   `nvarchar(max)` while the values are sent in the non-PLP form;
/// - `(max)` types: the encoder compares a value's length with the PLP column's 0xFFFF, so
///   values over 65,535 bytes are refused by the bulk load, mid-run; the schema is refused up
///   front instead.
///
/// `datetime2(0..5)` is loaded since the move to tiberius 0.13's adapter revision: the column
/// list declares `datetime2(n)` from the column's own scale (as 0.12.3 did), and the route
/// encodes each value at that scale, refusing one with digits beyond it (never rounding).
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
        "datetime2" if c.scale <= 7 => Ok(()),
        "decimal" | "numeric" if (1..=38).contains(&c.precision) && c.scale <= 37 => Ok(()),
        _ => refuse(
            "has no exact mapping from a PostgreSQL type in this route (see the type mapping in \
             docs/mssql-target.md)",
        ),
    }
}
