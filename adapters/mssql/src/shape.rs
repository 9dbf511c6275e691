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
