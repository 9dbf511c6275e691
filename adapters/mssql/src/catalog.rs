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
//!   triggers (`AFTER UPDATE, DELETE`) on receipts, authorities and consumptions, no other
//!   enabled trigger that could rewrite or swallow a state write, and exactly the reviewed CHECK
//!   constraints and foreign keys: none added or dropped, each enabled and trusted, foreign keys
//!   `NO ACTION` only, and no table outside the state tables referencing one;
//! - no foreign key of another table references the target with a cascading or `SET NULL` /
//!   `SET DEFAULT` action (a delete or key update would write outside the target).
//!
//! The rows come from [`crate::sql::TARGET_UNIQUE_INDEXES`], [`crate::sql::TARGET_TRIGGERS`] and
//! [`crate::sql::StateNames::catalog_facts`]. Failures name tables and columns only.

use std::collections::{BTreeMap, BTreeSet};

/// Stable code: the target has no enabled, unfiltered unique index on exactly the key.
pub const TARGET_KEY_INDEX_MISSING: &str = "mssql_transaction.target_key_index_missing";
/// Stable code: the target has an enabled `INSTEAD OF` trigger.
pub const TARGET_INSTEAD_OF_TRIGGER: &str = "mssql_transaction.target_instead_of_trigger";
/// Stable code: a foreign key of another table cascades (or sets NULL / a default) from the
/// target.
pub const TARGET_CASCADING_REFERENCE: &str = "mssql_transaction.target_cascading_reference";
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
/// order), no enabled `INSTEAD OF` trigger, and no enabled foreign key of another table that
/// references it with `CASCADE`, `SET NULL` or `SET DEFAULT` (`cascading_references`: their
/// count). `NO ACTION` only refuses; CHECK constraints and the target's own foreign keys only
/// refuse rows, and a refused row rolls the run back.
pub fn verify_target_key(
    keys: &[String],
    rows: &[UniqueIndexColumn],
    instead_of_triggers: i32,
    cascading_references: i32,
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
    if cascading_references != 0 {
        return Err(format!(
            "{TARGET_CASCADING_REFERENCE}: a foreign key of another table references the target \
             with ON DELETE or ON UPDATE CASCADE, SET NULL or SET DEFAULT; the run would write \
             outside the target"
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
    /// A CHECK constraint.
    Check {
        /// Table role.
        role: String,
        /// Constraint name.
        name: String,
        /// `sys.check_constraints.definition`.
        definition: String,
        /// Disabled (`NOCHECK`).
        is_disabled: bool,
        /// Not trusted (enabled `WITH NOCHECK`: existing rows unchecked).
        is_not_trusted: bool,
    },
    /// One column of a foreign key of a state table.
    ForeignKey {
        /// Table role.
        role: String,
        /// Constraint name.
        name: String,
        /// The referencing column.
        column: String,
        /// `<referenced role>.<column>`; `None` when the referenced table is no state table.
        references: Option<String>,
        /// `delete_referential_action + 4 * update_referential_action` (0: no action).
        actions: i32,
        /// Disabled.
        is_disabled: bool,
        /// Not trusted.
        is_not_trusted: bool,
    },
    /// A foreign key of a table outside the state tables that references a state table.
    ReferencedBy {
        /// The referenced table's role.
        role: String,
        /// Constraint name.
        name: String,
    },
}

/// The reviewed CHECK constraints per role, as [`normalize_check`] renders SQL Server's stored
/// definition (`([safe_xmin]>=(0))` → `safe_xmin>=0`; an `IN` list, stored as `OR` terms in
/// any order, → the sorted terms joined by `|`). Names are not compared.
pub const STATE_CHECKS: [(&str, &[&str]); 5] = [
    (
        "source_state",
        &["revision>=1", "safe_xmin>=0", "visible_horizon>=safe_xmin"],
    ),
    (
        "run",
        &[
            "isjsonevidence=1",
            "status='committed'|status='rolled_back'",
        ],
    ),
    ("receipt", &["isjsonbody=1"]),
    ("repair_authority", &[]),
    ("repair_consumption", &[]),
];

/// The reviewed foreign keys: (role, column, referenced `<role>.<column>`); each a single
/// column, `NO ACTION` on delete and update, enabled and trusted.
pub const STATE_FOREIGN_KEYS: &[(&str, &str, &str)] = &[
    (
        "repair_consumption",
        "authority_id",
        "repair_authority.authority_id",
    ),
    ("repair_consumption", "receipt_id", "receipt.receipt_id"),
];

/// A CHECK definition compared without SQL Server's decoration ([`normalize_filter`] per
/// top-level `OR` term, terms sorted and joined by `|`), so an `IN` list matches whatever order
/// the server stored its terms in.
pub fn normalize_check(definition: &str) -> String {
    let lower = definition.to_lowercase();
    let mut terms: Vec<String> = lower.split(" or ").map(normalize_filter).collect();
    terms.sort_unstable();
    terms.join("|")
}

/// One column of a captured foreign key: column, referenced `<role>.<column>`, actions,
/// disabled, not trusted.
type ForeignKeyColumn<'a> = (&'a str, Option<&'a str>, i32, bool, bool);

/// CHECK constraints and foreign keys against [`STATE_CHECKS`] and [`STATE_FOREIGN_KEYS`].
fn verify_state_constraints(facts: &[StateFact]) -> Result<(), String> {
    for (role, reviewed) in STATE_CHECKS {
        let mut checks = Vec::new();
        for f in facts {
            if let StateFact::Check {
                role: r,
                name,
                definition,
                is_disabled,
                is_not_trusted,
            } = f
                && r == role
            {
                if *is_disabled || *is_not_trusted {
                    return Err(mismatch(
                        role,
                        format!("CHECK constraint {name} is disabled or not trusted"),
                    ));
                }
                let normalized = normalize_check(definition);
                if !reviewed.contains(&normalized.as_str()) {
                    return Err(mismatch(
                        role,
                        format!("CHECK constraint {name} is not in the contract"),
                    ));
                }
                checks.push(normalized);
            }
        }
        checks.sort_unstable();
        let mut want: Vec<&str> = reviewed.to_vec();
        want.sort_unstable();
        if checks.iter().map(String::as_str).ne(want.iter().copied()) {
            return Err(mismatch(
                role,
                "the CHECK constraints are not exactly the contract's (one is missing or twice)"
                    .into(),
            ));
        }
    }
    // Foreign keys, by (role, name): one row per column.
    let mut keys: BTreeMap<(&str, &str), Vec<ForeignKeyColumn<'_>>> = BTreeMap::new();
    for f in facts {
        match f {
            StateFact::ForeignKey {
                role,
                name,
                column,
                references,
                actions,
                is_disabled,
                is_not_trusted,
            } => keys.entry((role, name)).or_default().push((
                column,
                references.as_deref(),
                *actions,
                *is_disabled,
                *is_not_trusted,
            )),
            StateFact::ReferencedBy { role, name } => {
                return Err(mismatch(
                    role,
                    format!("foreign key {name} of a table outside the state tables references it"),
                ));
            }
            _ => {}
        }
    }
    for ((role, name), columns) in &keys {
        let reviewed = match columns.as_slice() {
            [(column, Some(to), 0, false, false)] => STATE_FOREIGN_KEYS
                .iter()
                .any(|(r, c, t)| r == role && c == column && t == to),
            _ => false,
        };
        if !reviewed {
            return Err(mismatch(
                role,
                format!(
                    "foreign key {name} is not in the contract (or is disabled, not trusted or \
                     has a referential action)"
                ),
            ));
        }
    }
    for (role, column, to) in STATE_FOREIGN_KEYS {
        let present = keys.iter().any(|((r, _), cols)| {
            r == role && matches!(cols.as_slice(), [(c, Some(t), ..)] if c == column && t == to)
        });
        if !present {
            return Err(mismatch(
                role,
                format!("the foreign key on {column} referencing {to} is missing"),
            ));
        }
    }
    Ok(())
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
    verify_state_constraints(facts)
}
