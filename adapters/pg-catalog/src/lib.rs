//! The PostgreSQL catalog of a table whose shape is reviewed DDL (the XMin state tables, the
//! nonproduction control store): what the catalog says of it ([`table_facts`]: columns,
//! unique indexes, user triggers with the functions they call, CHECK constraints and foreign
//! keys, in and out, row security, rules), and the checks every such contract shares
//! ([`verify_columns`], [`verify_constraints`], [`verify_guards`]). The contracts themselves —
//! which tables, columns, indexes, CHECKs, foreign keys and which tables are immutable — stay
//! with the crate that owns the DDL. Failures name tables, columns, constraints, triggers,
//! functions, policies and rules only, never a row value.
//!
//! The immutability guards ([`verify_guards`]) refuse with a stable reason code at the start of
//! the message (`<prefix>_TRIGGER_NOT_ENFORCING: …`, see [`Reason`]); the owning crate's
//! catalog code stays the error's code.

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

/// `pg_trigger.tgtype` of `BEFORE TRUNCATE FOR EACH STATEMENT` (before 2 + truncate 32): row
/// triggers never fire on `TRUNCATE`, so every immutable table also has this one.
pub const TRUNCATE_GUARD_TGTYPE: i16 = 34;

/// Why the immutability guards of a reviewed table are refused: a stable reason, written as
/// `<prefix>_<reason>` at the start of the message (`DPONE_NP_STORE_TRIGGER_NOT_ENFORCING: …`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// A guard trigger is disabled or fires only in replica sessions (`pg_trigger.tgenabled`
    /// not `O` or `A`), has a `WHEN` condition or a column list.
    TriggerNotEnforcing,
    /// A guard trigger calls a function whose definition is not the reviewed one (body,
    /// language, return type, volatility, security, `SET` clauses, name or schema).
    TriggerFunctionNotReviewed,
    /// An immutable table has no `BEFORE TRUNCATE … FOR EACH STATEMENT` guard.
    TruncateUnguarded,
    /// Row-level security is enabled or forced on the table, or a policy exists for it.
    RowSecurityPresent,
    /// A rule (other than a view's `_RETURN`) exists on the table.
    RulePresent,
}

impl Reason {
    /// Every reason, in documentation order.
    pub const ALL: [Reason; 5] = [
        Reason::TriggerNotEnforcing,
        Reason::TriggerFunctionNotReviewed,
        Reason::TruncateUnguarded,
        Reason::RowSecurityPresent,
        Reason::RulePresent,
    ];

    /// The reason's suffix (`TRIGGER_NOT_ENFORCING`).
    pub const fn suffix(self) -> &'static str {
        match self {
            Reason::TriggerNotEnforcing => "TRIGGER_NOT_ENFORCING",
            Reason::TriggerFunctionNotReviewed => "TRIGGER_FUNCTION_NOT_REVIEWED",
            Reason::TruncateUnguarded => "TRUNCATE_UNGUARDED",
            Reason::RowSecurityPresent => "ROW_SECURITY_PRESENT",
            Reason::RulePresent => "RULE_PRESENT",
        }
    }

    /// The stable code under `prefix` (`DPONE_NP_STORE` → `DPONE_NP_STORE_RULE_PRESENT`).
    pub fn code(self, prefix: &str) -> String {
        format!("{prefix}_{}", self.suffix())
    }
}

/// The reviewed trigger function of a contract: `CREATE FUNCTION <schema>.<name>() RETURNS
/// trigger LANGUAGE plpgsql AS $$<source>$$` in the tables' own schema — `VOLATILE`, `SECURITY
/// INVOKER`, no `SET` clause, no argument.
#[derive(Clone, Copy, Debug)]
pub struct ReviewedFunction {
    /// Function name.
    pub name: &'static str,
    /// Its body as the reviewed DDL writes it between `$$`; compared with `pg_proc.prosrc`
    /// after trimming surrounding whitespace only.
    pub source: &'static str,
}

/// What the catalog says of the function a trigger calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionFacts {
    /// Its name.
    pub name: String,
    /// Whether it is in the table's schema.
    pub same_schema: bool,
    /// `prosrc`.
    pub source: String,
    /// `pg_language.lanname`.
    pub language: String,
    /// `format_type` of `prorettype`.
    pub returns: String,
    /// `provolatile` (`v`, `s`, `i`).
    pub volatility: String,
    /// `prosecdef`.
    pub security_definer: bool,
    /// Whether `proconfig` holds a `SET` clause.
    pub has_config: bool,
    /// `pronargs`.
    pub args: i16,
}

impl FunctionFacts {
    /// The function `reviewed` as the reviewed DDL creates it.
    pub fn reviewed(reviewed: &ReviewedFunction) -> Self {
        Self {
            name: reviewed.name.into(),
            same_schema: true,
            source: reviewed.source.into(),
            language: "plpgsql".into(),
            returns: "trigger".into(),
            volatility: "v".into(),
            security_definer: false,
            has_config: false,
            args: 0,
        }
    }

    /// What differs from `reviewed`, if anything.
    pub fn differs_from(&self, reviewed: &ReviewedFunction) -> Option<&'static str> {
        if self.name != reviewed.name || !self.same_schema {
            Some("another name or schema")
        } else if self.source.trim() != reviewed.source.trim() {
            Some("another body")
        } else if self.language != "plpgsql" {
            Some("another language")
        } else if self.returns != "trigger" || self.args != 0 {
            Some("another signature")
        } else if self.volatility != "v" {
            Some("another volatility")
        } else if self.security_definer {
            Some("SECURITY DEFINER")
        } else if self.has_config {
            Some("a SET clause")
        } else {
            None
        }
    }
}

/// A user trigger of a table (internal ones, such as foreign keys', are left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerFacts {
    /// `tgname`.
    pub name: String,
    /// `tgtype`.
    pub tgtype: i16,
    /// `tgenabled`: `O` (origin and local sessions), `A` (always), `R` (replica sessions only),
    /// `D` (disabled).
    pub enabled: String,
    /// Whether it has a `WHEN` condition (`tgqual`).
    pub has_condition: bool,
    /// Whether it fires only for a column list (`tgattr`).
    pub has_columns: bool,
    /// The function it calls.
    pub function: FunctionFacts,
}

impl TriggerFacts {
    /// The trigger `name` of kind `tgtype` calling `function`, as the reviewed DDL creates it.
    pub fn reviewed(name: &str, tgtype: i16, function: &ReviewedFunction) -> Self {
        Self {
            name: name.into(),
            tgtype,
            enabled: "O".into(),
            has_condition: false,
            has_columns: false,
            function: FunctionFacts::reviewed(function),
        }
    }

    /// Why it does not fire on every write it names, if so.
    pub fn not_enforcing(&self) -> Option<&'static str> {
        match self.enabled.as_str() {
            "O" | "A" if self.has_condition => Some("has a WHEN condition"),
            "O" | "A" if self.has_columns => Some("fires only for a column list"),
            "O" | "A" => None,
            "R" => Some("fires only in replica sessions (ENABLE REPLICA TRIGGER)"),
            "D" => Some("is disabled"),
            _ => Some("is not enabled for every session"),
        }
    }
}

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
    /// User triggers (enabled or not), with the functions they call.
    pub triggers: Vec<TriggerFacts>,
    /// CHECK constraints and foreign keys of the table and foreign keys referencing it.
    pub constraints: Vec<Constraint>,
    /// `relrowsecurity`, `relforcerowsecurity`.
    pub row_security: (bool, bool),
    /// Names of the table's row security policies (`pg_policy`).
    pub policies: Vec<String>,
    /// Names of the table's rules (`pg_rewrite`) other than `_RETURN`.
    pub rules: Vec<String>,
}

/// Reads the catalog of table `schema.name` (an ordinary table; none: empty facts), naming
/// related tables with `name_of`.
pub async fn table_facts(
    c: &Client,
    schema: &str,
    name: &str,
    name_of: impl Fn(&str) -> Option<String>,
) -> Result<TableFacts, tokio_postgres::Error> {
    let Some((oid, row_security)) = c
        .query_opt(
            "SELECT cl.oid, cl.relrowsecurity, cl.relforcerowsecurity FROM pg_catalog.pg_class cl \
             JOIN pg_catalog.pg_namespace n ON n.oid = cl.relnamespace \
             WHERE n.nspname = $1 AND cl.relname = $2 AND cl.relkind = 'r'",
            &[&schema, &name],
        )
        .await?
        .map(|r| (r.get::<_, u32>(0), (r.get(1), r.get(2))))
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
            "SELECT t.tgname::text, t.tgtype, t.tgenabled::text, t.tgqual IS NOT NULL, \
             cardinality(t.tgattr::int2[]) > 0, p.proname::text, \
             p.pronamespace = cl.relnamespace, p.prosrc, l.lanname::text, \
             pg_catalog.format_type(p.prorettype, NULL), p.provolatile::text, p.prosecdef, \
             p.proconfig IS NOT NULL, p.pronargs \
             FROM pg_catalog.pg_trigger t \
             JOIN pg_catalog.pg_class cl ON cl.oid = t.tgrelid \
             JOIN pg_catalog.pg_proc p ON p.oid = t.tgfoid \
             JOIN pg_catalog.pg_language l ON l.oid = p.prolang \
             WHERE t.tgrelid = $1 AND NOT t.tgisinternal ORDER BY t.tgname",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| TriggerFacts {
            name: r.get(0),
            tgtype: r.get(1),
            enabled: r.get(2),
            has_condition: r.get(3),
            has_columns: r.get::<_, Option<bool>>(4).unwrap_or(false),
            function: FunctionFacts {
                name: r.get(5),
                same_schema: r.get(6),
                source: r.get(7),
                language: r.get(8),
                returns: r.get(9),
                volatility: r.get(10),
                security_definer: r.get(11),
                has_config: r.get(12),
                args: r.get(13),
            },
        })
        .collect();
    let policies = c
        .query(
            "SELECT polname::text FROM pg_catalog.pg_policy WHERE polrelid = $1 ORDER BY 1",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let rules = c
        .query(
            "SELECT rulename::text FROM pg_catalog.pg_rewrite \
             WHERE ev_class = $1 AND rulename <> '_RETURN' ORDER BY 1",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
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
        row_security,
        policies,
        rules,
    })
}

/// The table's triggers, row security and rules against the reviewed DDL. Every table: no
/// row-level security (neither enabled nor forced), no policy, no rule. An `immutable` table:
/// exactly the reviewed `BEFORE UPDATE OR DELETE … FOR EACH ROW` trigger
/// ([`IMMUTABLE_TGTYPE`]) and `BEFORE TRUNCATE … FOR EACH STATEMENT` trigger
/// ([`TRUNCATE_GUARD_TGTYPE`]), each enabled for every session, without `WHEN` condition or
/// column list, calling exactly the reviewed `function`; another table: no trigger. Refusals
/// of the guards start with their [`Reason`]'s code under `prefix`.
pub fn verify_guards(
    prefix: &str,
    noun: &str,
    table: &str,
    facts: &TableFacts,
    immutable: bool,
    function: &ReviewedFunction,
) -> Result<(), String> {
    let refuse = |reason: Reason, what: String| {
        Err(format!("{}: {noun} {table:?} {what}", reason.code(prefix)))
    };
    if !immutable {
        if !facts.triggers.is_empty() {
            return Err(format!(
                "{noun} {table:?} has a trigger the reviewed DDL does not"
            ));
        }
    } else {
        let guards = facts
            .triggers
            .iter()
            .filter(|t| matches!(t.tgtype, IMMUTABLE_TGTYPE | TRUNCATE_GUARD_TGTYPE));
        for t in guards {
            if let Some(why) = t.not_enforcing() {
                return refuse(
                    Reason::TriggerNotEnforcing,
                    format!("trigger {:?} {why}", t.name),
                );
            }
            if let Some(what) = t.function.differs_from(function) {
                return refuse(
                    Reason::TriggerFunctionNotReviewed,
                    format!(
                        "trigger {:?} calls function {:?} with {what} than the reviewed {:?}",
                        t.name, t.function.name, function.name
                    ),
                );
            }
        }
        let count = |tgtype| facts.triggers.iter().filter(|t| t.tgtype == tgtype).count();
        let exactly = || {
            Err(format!(
                "{noun} {table:?} must have exactly the reviewed immutability triggers"
            ))
        };
        if count(IMMUTABLE_TGTYPE) != 1 {
            return exactly();
        }
        if count(TRUNCATE_GUARD_TGTYPE) == 0 {
            return refuse(
                Reason::TruncateUnguarded,
                "has no reviewed BEFORE TRUNCATE ... FOR EACH STATEMENT trigger (row triggers \
                 never fire on TRUNCATE)"
                    .into(),
            );
        }
        if count(TRUNCATE_GUARD_TGTYPE) != 1 || facts.triggers.len() != 2 {
            return exactly();
        }
    }
    match facts.row_security {
        (true, _) => {
            return refuse(
                Reason::RowSecurityPresent,
                "has row-level security enabled".into(),
            );
        }
        (_, true) => {
            return refuse(
                Reason::RowSecurityPresent,
                "has row-level security forced".into(),
            );
        }
        _ => {}
    }
    if let Some(policy) = facts.policies.first() {
        return refuse(
            Reason::RowSecurityPresent,
            format!("has row security policy {policy:?}"),
        );
    }
    if let Some(rule) = facts.rules.first() {
        return refuse(Reason::RulePresent, format!("has rule {rule:?}"));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    const F: ReviewedFunction = ReviewedFunction {
        name: "forbid",
        source: "BEGIN\nRAISE EXCEPTION 'immutable';\nEND",
    };

    fn guarded() -> TableFacts {
        TableFacts {
            triggers: vec![
                TriggerFacts::reviewed("immutable", IMMUTABLE_TGTYPE, &F),
                TriggerFacts::reviewed("no_truncate", TRUNCATE_GUARD_TGTYPE, &F),
            ],
            ..TableFacts::default()
        }
    }

    fn reason(r: Result<(), String>) -> String {
        let e = r.expect_err("refused");
        e.split(':').next().unwrap_or_default().to_owned()
    }

    #[test]
    fn the_reviewed_guards_pass_and_each_weakening_has_its_reason() {
        // Tier: unit (pure check).
        let check = |f: &TableFacts| verify_guards("P", "table", "t", f, true, &F);
        assert_eq!(check(&guarded()), Ok(()));
        let mut f = guarded();
        f.triggers[0].function.source = "\n  BEGIN\nRAISE EXCEPTION 'immutable';\nEND \n".into();
        assert_eq!(check(&f), Ok(()), "surrounding whitespace only");
        assert_eq!(
            verify_guards("P", "table", "t", &TableFacts::default(), false, &F),
            Ok(())
        );
        type Weaken = fn(&mut TableFacts);
        let weakened: [(&str, Weaken); 14] = [
            ("P_TRIGGER_NOT_ENFORCING", |f| {
                f.triggers[0].enabled = "R".into()
            }),
            ("P_TRIGGER_NOT_ENFORCING", |f| {
                f.triggers[1].enabled = "D".into()
            }),
            ("P_TRIGGER_NOT_ENFORCING", |f| {
                f.triggers[0].has_condition = true
            }),
            ("P_TRIGGER_NOT_ENFORCING", |f| {
                f.triggers[0].has_columns = true
            }),
            ("P_TRIGGER_FUNCTION_NOT_REVIEWED", |f| {
                f.triggers[0].function.source = "BEGIN\n-- RAISE EXCEPTION 'immutable';\nEND".into()
            }),
            ("P_TRIGGER_FUNCTION_NOT_REVIEWED", |f| {
                f.triggers[1].function.language = "sql".into()
            }),
            ("P_TRIGGER_FUNCTION_NOT_REVIEWED", |f| {
                f.triggers[0].function.volatility = "s".into()
            }),
            ("P_TRIGGER_FUNCTION_NOT_REVIEWED", |f| {
                f.triggers[0].function.security_definer = true
            }),
            ("P_TRIGGER_FUNCTION_NOT_REVIEWED", |f| {
                f.triggers[0].function.has_config = true
            }),
            ("P_TRIGGER_FUNCTION_NOT_REVIEWED", |f| {
                f.triggers[0].function.same_schema = false
            }),
            ("P_TRUNCATE_UNGUARDED", |f| {
                f.triggers.pop();
            }),
            ("P_ROW_SECURITY_PRESENT", |f| f.row_security = (false, true)),
            ("P_ROW_SECURITY_PRESENT", |f| f.policies.push("p".into())),
            ("P_RULE_PRESENT", |f| f.rules.push("r".into())),
        ];
        for (i, (code, weaken)) in weakened.iter().enumerate() {
            let mut f = guarded();
            weaken(&mut f);
            assert_eq!(reason(check(&f)), *code, "case {i}");
        }
        // A missing row guard or an extra trigger is the catalog's plain refusal.
        let mut f = guarded();
        f.triggers.remove(0);
        assert!(check(&f).unwrap_err().contains("exactly the reviewed"));
        let mut f = guarded();
        f.triggers.push(TriggerFacts::reviewed("extra", 5, &F));
        assert!(check(&f).unwrap_err().contains("exactly the reviewed"));
        // A table that is not immutable has no trigger at all.
        assert!(
            verify_guards("P", "table", "t", &guarded(), false, &F)
                .unwrap_err()
                .contains("has a trigger")
        );
    }
}
