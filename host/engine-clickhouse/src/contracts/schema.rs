//! Target schema: column names and exact ClickHouse type names, in declared order.

use serde::{Deserialize, Serialize};

/// One column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Column {
    /// Column name.
    pub name: String,
    /// Type name exactly as `system.columns.type` reports it.
    pub type_name: String,
}

impl Column {
    /// A column.
    pub fn new(name: &str, type_name: &str) -> Self {
        Self {
            name: name.into(),
            type_name: type_name.into(),
        }
    }
}

/// The ordered column list of a target, candidate or artifact.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// Columns in declared order.
    pub columns: Vec<Column>,
}

impl Schema {
    /// A schema from `(name, type)` pairs.
    pub fn of(columns: &[(&str, &str)]) -> Self {
        Self {
            columns: columns.iter().map(|(n, t)| Column::new(n, t)).collect(),
        }
    }
}
