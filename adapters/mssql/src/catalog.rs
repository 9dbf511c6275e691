//! Catalog verification beyond `OBJECT_ID`, as pure checks over captured catalog rows:
//!
//! - the target table has an enabled, unfiltered unique index (primary key or unique
//!   constraint/index) on exactly the route's key, and no enabled `INSTEAD OF` trigger (which
//!   would make the `OUTPUT` counts describe rows that were never written);
//! - the five state tables are the reviewed contract v2 of `fixtures/mssql/state-ddl.sql`:
//!   exactly its columns (type, length, nullability), its unique indexes on the columns the
//!   engine's guarantees rest on (one row per state key, one active owner per target, one
//!   receipt per load, per revision, per invocation and per invocation digest, one consumption
//!   per authority, load and receipt, one committed run row per run), the enabled immutability
//!   triggers (`AFTER UPDATE, DELETE`) on receipts, authorities and consumptions, and no other
//!   enabled trigger that could rewrite or swallow a state write.
//!
//! The rows come from [`crate::sql::TARGET_UNIQUE_INDEXES`], [`crate::sql::TARGET_TRIGGERS`] and
//! [`crate::sql::StateNames::catalog_facts`]. Failures name tables and columns only.

use std::collections::{BTreeMap, BTreeSet};

/// Stable code: the target has no enabled, unfiltered unique index on exactly the key.
pub const TARGET_KEY_INDEX_MISSING: &str = "mssql_transaction.target_key_index_missing";
/// Stable code: the target has an enabled `INSTEAD OF` trigger.
pub const TARGET_INSTEAD_OF_TRIGGER: &str = "mssql_transaction.target_instead_of_trigger";
/// Stable code: a state table differs from the reviewed contract.
pub const STATE_CATALOG_MISMATCH: &str = "mssql_transaction.state_catalog_mismatch";

/// One key column of a unique index ([`crate::sql::TARGET_UNIQUE_INDEXES`], or a state table's
/// `index` fact).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueIndexColumn {
    /// `sys.indexes.index_id`.
    pub index_id: i32,
    /// Primary key.
    pub is_primary_key: bool,
    /// Filtered index.
    pub has_filter: bool,
    /// Disabled index (enforces nothing).
    pub is_disabled: bool,
    /// `filter_definition`, if filtered.
    pub filter: Option<String>,
    /// Key column name.
    pub column: String,
}

/// One unique index: its flags and its key columns as a set.
#[derive(Clone, Debug, PartialEq, Eq)]
struct UniqueIndex {
    is_primary_key: bool,
    is_disabled: bool,
    filter: Option<String>,
    columns: BTreeSet<String>,
}

fn indexes(rows: &[UniqueIndexColumn]) -> Vec<UniqueIndex> {
    let mut by_id: BTreeMap<i32, UniqueIndex> = BTreeMap::new();
    for r in rows {
        let e = by_id.entry(r.index_id).or_insert_with(|| UniqueIndex {
            is_primary_key: r.is_primary_key,
            is_disabled: r.is_disabled,
            filter: if r.has_filter {
                Some(normalize_filter(r.filter.as_deref().unwrap_or_default()))
            } else {
                None
            },
            columns: BTreeSet::new(),
        });
        e.columns.insert(r.column.clone());
    }
    by_id.into_values().collect()
}

/// A filter definition compared without SQL Server's decoration: lower case, no white space,
/// brackets or parentheses (`([superseded_at_utc] IS NULL)` → `superseded_at_utcisnull`).
pub fn normalize_filter(f: &str) -> String {
    f.chars()
        .filter(|c| !c.is_whitespace() && !matches!(c, '[' | ']' | '(' | ')'))
        .flat_map(char::to_lowercase)
        .collect()
}

fn has_unique(indexes: &[UniqueIndex], columns: &[&str], filter: Option<&str>) -> bool {
    let want: BTreeSet<String> = columns.iter().map(|c| (*c).to_owned()).collect();
    let filter = filter.map(normalize_filter);
    indexes
        .iter()
        .any(|i| !i.is_disabled && i.columns == want && i.filter == filter)
}

/// The target must have an enabled, unfiltered unique index on exactly the key (in any column
/// order) and no enabled `INSTEAD OF` trigger.
pub fn verify_target_key(
    keys: &[String],
    rows: &[UniqueIndexColumn],
    instead_of_triggers: i32,
) -> Result<(), String> {
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    if !has_unique(&indexes(rows), &keys, None) {
        return Err(format!(
            "{TARGET_KEY_INDEX_MISSING}: the target has no enabled, unfiltered primary key or \
             unique index on exactly the key ({})",
            keys.join(", ")
        ));
    }
    if instead_of_triggers != 0 {
        return Err(format!(
            "{TARGET_INSTEAD_OF_TRIGGER}: the target has an enabled INSTEAD OF trigger; the \
             route's exact counts cannot be trusted"
        ));
    }
    Ok(())
}

/// State table roles, as [`crate::sql::StateNames::named`] names them.
pub const STATE_ROLES: [&str; 5] = [
    "source_state",
    "run",
    "receipt",
    "repair_authority",
    "repair_consumption",
];

/// One row of [`crate::sql::StateNames::catalog_facts`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateFact {
    /// A column: name, `sys.types` name, `max_length`, nullability.
    Column {
        /// Table role.
        role: String,
        /// Column.
        name: String,
        /// Type name.
        type_name: String,
        /// `max_length` in bytes (-1 for `max`).
        max_length: i32,
        /// Nullable.
        nullable: bool,
    },
    /// A key column of a unique index.
    Index {
        /// Table role.
        role: String,
        /// The index column.
        column: UniqueIndexColumn,
    },
    /// A trigger event: one row per (trigger, event).
    Trigger {
        /// Table role.
        role: String,
        /// Trigger name.
        name: String,
        /// `INSERT`, `UPDATE` or `DELETE`.
        event: String,
        /// Disabled.
        is_disabled: bool,
        /// `INSTEAD OF`.
        is_instead_of: bool,
    },
}

/// Column contract of one state table: (name, type, max_length, nullable).
type Columns = &'static [(&'static str, &'static str, i32, bool)];

/// The reviewed column contract v2, per role (`fixtures/mssql/state-ddl.sql`).
pub const STATE_COLUMNS: [(&str, Columns); 5] = [
    (
        "source_state",
        &[
            ("state_key", "char", 64, false),
            ("target_identity", "binary", 32, false),
            ("scope_hash", "char", 64, false),
            ("safe_xmin", "bigint", 8, false),
            ("revision", "bigint", 8, false),
            ("visible_horizon", "bigint", 8, false),
            ("last_receipt_id", "nvarchar", 256, false),
            ("created_at_utc", "datetime2", 8, false),
            ("updated_at_utc", "datetime2", 8, false),
            ("superseded_at_utc", "datetime2", 8, true),
            ("superseded_by", "char", 64, true),
        ],
    ),
    (
        "run",
        &[
            ("run_id", "nvarchar", 256, false),
            ("invocation_id", "nvarchar", 256, false),
            ("state_key", "char", 64, false),
            ("status", "varchar", 16, false),
            ("code", "nvarchar", 256, true),
            ("evidence", "nvarchar", -1, false),
            ("recorded_at_utc", "datetime2", 8, false),
        ],
    ),
    (
        "receipt",
        &[
            ("receipt_id", "nvarchar", 256, false),
            ("load_id", "nvarchar", 256, false),
            ("invocation_id", "nvarchar", 256, false),
            ("invocation_digest", "binary", 32, false),
            ("state_key", "char", 64, false),
            ("previous_xmin", "bigint", 8, true),
            ("previous_revision", "bigint", 8, true),
            ("new_xmin", "bigint", 8, false),
            ("new_revision", "bigint", 8, false),
            ("body", "nvarchar", -1, false),
            ("committed_at_utc", "datetime2", 8, false),
        ],
    ),
    (
        "repair_authority",
        &[
            ("authority_id", "nvarchar", 256, false),
            ("recorded_digest", "char", 64, false),
            ("document", "nvarchar", -1, false),
            ("created_at_utc", "datetime2", 8, false),
        ],
    ),
    (
        "repair_consumption",
        &[
            ("authority_id", "nvarchar", 256, false),
            ("authority_digest", "char", 64, false),
            ("state_key", "char", 64, false),
            ("load_id", "nvarchar", 256, false),
            ("receipt_id", "nvarchar", 256, false),
            ("consumed_at_utc", "datetime2", 8, false),
        ],
    ),
];

/// Unique indexes the engine's guarantees rest on: (role, key columns, filter).
pub const STATE_UNIQUE: &[(&str, &[&str], Option<&str>)] = &[
    ("source_state", &["state_key"], None),
    (
        "source_state",
        &["target_identity"],
        Some("[superseded_at_utc] IS NULL"),
    ),
    ("run", &["run_id"], Some("[status] = 'committed'")),
    ("receipt", &["receipt_id"], None),
    ("receipt", &["load_id"], None),
    ("receipt", &["state_key", "new_revision"], None),
    ("receipt", &["state_key", "invocation_id"], None),
    ("receipt", &["invocation_digest"], None),
    ("repair_authority", &["authority_id"], None),
    ("repair_consumption", &["authority_id"], None),
    ("repair_consumption", &["load_id"], None),
    ("repair_consumption", &["receipt_id"], None),
];

/// Roles whose rows are immutable: each needs an enabled `AFTER UPDATE, DELETE` trigger.
pub const IMMUTABLE_ROLES: [&str; 3] = ["receipt", "repair_authority", "repair_consumption"];

fn mismatch(role: &str, what: String) -> String {
    format!(
        "{STATE_CATALOG_MISMATCH}: state table {role}: {what}; run the reviewed provisioning script"
    )
}

/// Verifies the captured facts of the five state tables against the reviewed contract v2.
pub fn verify_state_catalog(facts: &[StateFact]) -> Result<(), String> {
    for (role, contract) in STATE_COLUMNS {
        let mut actual: BTreeMap<&str, (&str, i32, bool)> = BTreeMap::new();
        for f in facts {
            if let StateFact::Column {
                role: r,
                name,
                type_name,
                max_length,
                nullable,
            } = f
                && r == role
            {
                actual.insert(name, (type_name, *max_length, *nullable));
            }
        }
        if actual.is_empty() {
            return Err(mismatch(role, "the table is missing".into()));
        }
        for (name, ty, len, nullable) in contract {
            match actual.get(name) {
                None => return Err(mismatch(role, format!("column {name} is missing"))),
                Some(got) if *got != (*ty, *len, *nullable) => {
                    return Err(mismatch(
                        role,
                        format!("column {name} is not {ty} ({len} bytes, nullable {nullable})"),
                    ));
                }
                Some(_) => {}
            }
        }
        if let Some(extra) = actual
            .keys()
            .find(|k| !contract.iter().any(|(n, ..)| n == *k))
        {
            return Err(mismatch(
                role,
                format!("column {extra} is not in the contract"),
            ));
        }
    }
    for (role, columns, filter) in STATE_UNIQUE {
        let rows: Vec<UniqueIndexColumn> = facts
            .iter()
            .filter_map(|f| match f {
                StateFact::Index { role: r, column } if r == role => Some(column.clone()),
                _ => None,
            })
            .collect();
        if !has_unique(&indexes(&rows), columns, *filter) {
            return Err(mismatch(
                role,
                format!(
                    "no enabled unique index on ({}){}",
                    columns.join(", "),
                    filter.map_or(String::new(), |f| format!(" WHERE {f}"))
                ),
            ));
        }
    }
    // Triggers: (role, name) -> (events, disabled, instead of).
    let mut triggers: BTreeMap<(&str, &str), (BTreeSet<&str>, bool, bool)> = BTreeMap::new();
    for f in facts {
        if let StateFact::Trigger {
            role,
            name,
            event,
            is_disabled,
            is_instead_of,
        } = f
        {
            let e = triggers.entry((role, name)).or_insert((
                BTreeSet::new(),
                *is_disabled,
                *is_instead_of,
            ));
            e.0.insert(event);
        }
    }
    for ((role, name), (events, disabled, instead_of)) in &triggers {
        if *disabled {
            continue;
        }
        let immutable = IMMUTABLE_ROLES.contains(role);
        let only_update_delete = events.iter().all(|e| matches!(*e, "UPDATE" | "DELETE"));
        if *instead_of || !immutable || !only_update_delete {
            return Err(mismatch(
                role,
                format!("trigger {name} is not an immutability trigger (AFTER UPDATE, DELETE)"),
            ));
        }
    }
    for role in IMMUTABLE_ROLES {
        let guarded = triggers.iter().any(|((r, _), (events, disabled, _))| {
            *r == role && !disabled && events.contains("UPDATE") && events.contains("DELETE")
        });
        if !guarded {
            return Err(mismatch(
                role,
                "no enabled immutability trigger (AFTER UPDATE, DELETE)".into(),
            ));
        }
    }
    Ok(())
}
