//! The PostgreSQL catalog of a table whose shape is reviewed DDL (the XMin state tables, the
//! nonproduction control store): what the catalog says of it ([`table_facts`]: columns,
//! unique indexes, enabled user triggers, CHECK constraints and foreign keys, in and out), and
//! the checks every such contract shares ([`verify_columns`], [`verify_constraints`]). The
//! contracts themselves — which tables, columns, indexes, CHECKs and foreign keys — stay with
//! the crate that owns the DDL. Failures name tables, columns and constraints only.

use tokio_postgres::Client;

/// A column: name, `format_type` text, NOT NULL.
pub type ColumnContract = (&'static str, &'static str, bool);

/// A reviewed foreign key: its columns, the referenced table (as the contract names it) and
/// the referenced columns. All are `NO ACTION`, `MATCH SIMPLE`, not deferrable.
pub type ForeignKeyContract = (
    &'static [&'static str],
    &'static str,
    &'static [&'static str],
);

/// `confupdtype`, `confdeltype`, `confmatchtype` of a reviewed foreign key: `NO ACTION` on
/// update and delete, `MATCH SIMPLE`, not deferrable (no `d` suffix).
pub const REVIEWED_FK_ACTIONS: &str = "aas";

/// `pg_trigger.tgtype` of `BEFORE UPDATE OR DELETE FOR EACH ROW` (row 1 + before 2 + delete 8
/// + update 16).
pub const IMMUTABLE_TGTYPE: i16 = 27;

/// The one catalog query for [`Constraint`]s of a table (`$1`: its oid): its CHECK, foreign-key
/// and exclusion constraints, and the foreign keys of other tables that reference it. Columns:
/// `contype`, CHECK definition, validated, outgoing, columns, referenced columns, the other
/// table's name, whether it is in the same schema, the actions (`confupdtype`, `confdeltype`,
/// `confmatchtype`, `d` when deferrable).
pub const CONSTRAINTS_SQL: &str = "SELECT c.contype::text, \
       CASE WHEN c.contype = 'c' THEN pg_catalog.pg_get_constraintdef(c.oid) END, \
       c.convalidated, c.conrelid = $1, \
       ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(attnum, ord) \
             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum \
             ORDER BY k.ord), \
       ARRAY(SELECT a.attname::text FROM unnest(c.confkey) WITH ORDINALITY k(attnum, ord) \
             JOIN pg_catalog.pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.attnum \
             ORDER BY k.ord), \
       o.relname::text, o.relnamespace = me.relnamespace, \
       c.confupdtype::text || c.confdeltype::text || c.confmatchtype::text \
         || CASE WHEN c.condeferrable THEN 'd' ELSE '' END \
  FROM pg_catalog.pg_constraint c \
  JOIN pg_catalog.pg_class me ON me.oid = $1 \
  LEFT JOIN pg_catalog.pg_class o \
    ON o.oid = CASE WHEN c.conrelid = $1 THEN c.confrelid ELSE c.conrelid END \
 WHERE (c.conrelid = $1 AND c.contype IN ('c', 'f', 'x')) \
    OR (c.confrelid = $1 AND c.conrelid <> $1 AND c.contype = 'f')";

/// A CHECK constraint, foreign key or exclusion constraint involving a reviewed table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// A CHECK constraint of the table.
    Check {
        /// `pg_get_constraintdef`.
        definition: String,
        /// `false` for `NOT VALID`.
        validated: bool,
    },
    /// A foreign key of the table.
    ForeignKey {
        /// Its columns, in order.
        columns: Vec<String>,
        /// The referenced table as the contract names it; `None` when it is none of the
        /// contract's tables in the same schema.
        references: Option<String>,
        /// The referenced columns, in order.
        referenced_columns: Vec<String>,
        /// `confupdtype`, `confdeltype`, `confmatchtype`, then `d` when deferrable.
        actions: String,
        /// `false` for `NOT VALID`.
        validated: bool,
    },
    /// A foreign key of another table that references this one: that table as the contract
    /// names it, `None` when it is none of the contract's tables in the same schema.
    ReferencedBy(Option<String>),
    /// Another constraint kind the reviewed DDL does not have (an exclusion constraint).
    Other(String),
}

impl Constraint {
    /// One [`CONSTRAINTS_SQL`] row; `name_of` names a table of the same schema as the contract
    /// does (`None`: not one of its tables).
    pub fn from_row(row: &tokio_postgres::Row, name_of: impl Fn(&str) -> Option<String>) -> Self {
        let kind: String = row.get(0);
        let validated: bool = row.get(2);
        let outgoing: bool = row.get(3);
        let other: Option<String> = row.get(6);
        let same_schema: Option<bool> = row.get(7);
        let named = other
            .filter(|_| same_schema == Some(true))
            .and_then(|t| name_of(&t));
        match (kind.as_str(), outgoing) {
            ("c", _) => Constraint::Check {
                definition: row.get::<_, Option<String>>(1).unwrap_or_default(),
                validated,
            },
            ("f", true) => Constraint::ForeignKey {
                columns: row.get(4),
                references: named,
                referenced_columns: row.get(5),
                actions: row.get(8),
                validated,
            },
            ("f", false) => Constraint::ReferencedBy(named),
            _ => Constraint::Other(kind),
        }
    }
}

/// What the catalog says of one table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableFacts {
    /// Columns in table order: name, `format_type`, NOT NULL (empty: no such table).
    pub columns: Vec<(String, String, bool)>,
    /// Valid unique indexes: columns in order (expression indexes are left out), predicate.
    pub unique: Vec<(Vec<String>, Option<String>)>,
    /// Enabled user triggers: `tgtype`, whether the function body raises.
    pub triggers: Vec<(i16, bool)>,
    /// CHECK constraints and foreign keys of the table and foreign keys referencing it.
    pub constraints: Vec<Constraint>,
}

/// Reads the catalog of table `schema.name` (an ordinary table; none: empty facts), naming
/// related tables with `name_of`.
pub async fn table_facts(
    c: &Client,
    schema: &str,
    name: &str,
    name_of: impl Fn(&str) -> Option<String>,
) -> Result<TableFacts, tokio_postgres::Error> {
    let Some(oid) = c
        .query_opt(
            "SELECT cl.oid FROM pg_catalog.pg_class cl \
             JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace \
             WHERE n.nspname = $1 AND cl.relname = $2 AND cl.relkind = 'r'",
            &[&schema, &name],
        )
        .await?
        .map(|r| r.get::<_, u32>(0))
    else {
        return Ok(TableFacts::default());
    };
    let columns = c
        .query(
            "SELECT a.attname::text, pg_catalog.format_type(a.atttypid, a.atttypmod), \
             a.attnotnull FROM pg_catalog.pg_attribute a \
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let unique = c
        .query(
            "SELECT ARRAY(SELECT a.attname::text \
               FROM unnest((ix.indkey::int2[])[0:ix.indnkeyatts - 1]) \
                 WITH ORDINALITY k(attnum, ord) \
               JOIN pg_catalog.pg_attribute a ON a.attrelid = ix.indrelid \
                 AND a.attnum = k.attnum ORDER BY k.ord), \
             pg_catalog.pg_get_expr(ix.indpred, ix.indrelid) \
             FROM pg_catalog.pg_index ix \
             WHERE ix.indrelid = $1 AND ix.indisunique AND ix.indisvalid AND ix.indisready \
               AND ix.indexprs IS NULL",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let triggers = c
        .query(
            "SELECT t.tgtype, p.prosrc ~* 'raise\\s+exception' \
             FROM pg_catalog.pg_trigger t JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid \
             WHERE t.tgrelid = $1 AND NOT t.tgisinternal AND t.tgenabled <> 'D'",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let constraints = c
        .query(CONSTRAINTS_SQL, &[&oid])
        .await?
        .iter()
        .map(|r| Constraint::from_row(r, &name_of))
        .collect();
    Ok(TableFacts {
        columns,
        unique,
        triggers,
        constraints,
    })
}

/// The table exists and has exactly the reviewed columns (name, type, nullability); `noun`
/// says what kind of table it is in the message ("state table").
pub fn verify_columns(
    noun: &str,
    table: &str,
    reviewed: &[ColumnContract],
    facts: &TableFacts,
) -> Result<(), String> {
    if facts.columns.is_empty() {
        return Err(format!(
            "{noun} {table:?} does not exist (provision the reviewed DDL)"
        ));
    }
    for (name, type_name, not_null) in reviewed {
        match facts.columns.iter().find(|(n, _, _)| n == name) {
            None => return Err(format!("{noun} {table:?} lacks column {name:?}")),
            Some((_, t, nn)) if t != type_name || nn != not_null => {
                return Err(format!(
                    "{noun} {table:?} column {name:?} is not {type_name}{}",
                    if *not_null { " NOT NULL" } else { " NULL" }
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((extra, _, _)) = facts
        .columns
        .iter()
        .find(|(n, _, _)| !reviewed.iter().any(|(c, _, _)| c == n))
    {
        return Err(format!(
            "{noun} {table:?} has column {extra:?} the reviewed DDL does not"
        ));
    }
    Ok(())
}

/// The table's constraints are exactly the reviewed CHECKs and foreign keys: none added,
/// dropped or `NOT VALID`, no referential action but `NO ACTION`, no exclusion constraint, and
/// no table outside the contract (`outside` says which: "the state tables") referencing it.
pub fn verify_constraints(
    noun: &str,
    outside: &str,
    table: &str,
    facts: &TableFacts,
    reviewed_checks: &[&str],
    reviewed_fks: &[ForeignKeyContract],
) -> Result<(), String> {
    let mut checks = Vec::new();
    let mut fks = 0;
    for c in &facts.constraints {
        match c {
            Constraint::Check {
                definition,
                validated,
            } => {
                if !validated {
                    return Err(format!(
                        "{noun} {table:?} has a CHECK constraint that is NOT VALID"
                    ));
                }
                checks.push(definition.as_str());
            }
            Constraint::ForeignKey {
                columns,
                references,
                referenced_columns,
                actions,
                validated,
            } => {
                fks += 1;
                let reviewed = reviewed_fks.iter().any(|(cols, to, ref_cols)| {
                    columns.iter().map(String::as_str).eq(cols.iter().copied())
                        && references.as_deref() == Some(*to)
                        && referenced_columns
                            .iter()
                            .map(String::as_str)
                            .eq(ref_cols.iter().copied())
                        && actions == REVIEWED_FK_ACTIONS
                        && *validated
                });
                if !reviewed {
                    return Err(format!(
                        "{noun} {table:?} has a foreign key on ({}) the reviewed DDL does not \
                         (or with another target, action or validity)",
                        columns.join(", ")
                    ));
                }
            }
            Constraint::ReferencedBy(None) => {
                return Err(format!(
                    "{noun} {table:?} is referenced by a foreign key of a table outside {outside}"
                ));
            }
            // Checked as the referencing table's own foreign key.
            Constraint::ReferencedBy(Some(_)) => {}
            Constraint::Other(kind) => {
                return Err(format!(
                    "{noun} {table:?} has a constraint (kind {kind}) the reviewed DDL does not"
                ));
            }
        }
    }
    checks.sort_unstable();
    if let Some(extra) = checks.iter().find(|c| !reviewed_checks.contains(c)) {
        return Err(format!(
            "{noun} {table:?} has a CHECK constraint the reviewed DDL does not: {extra}"
        ));
    }
    if let Some(missing) = reviewed_checks.iter().find(|c| !checks.contains(c)) {
        return Err(format!("{noun} {table:?} lacks the reviewed {missing}"));
    }
    if checks.len() != reviewed_checks.len() {
        return Err(format!("{noun} {table:?} has a CHECK constraint twice"));
    }
    if fks != reviewed_fks.len() {
        return Err(format!(
            "{noun} {table:?} lacks a foreign key of the reviewed DDL"
        ));
    }
    Ok(())
}
