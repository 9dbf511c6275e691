//! The PostgreSQL state catalog checked against the reviewed contract
//! (`fixtures/xmin/state-ddl.sql`), as pure checks over captured catalog rows: each state
//! table's exact columns (name, type as `format_type` renders it, nullability), the unique
//! indexes the protocol relies on (columns and partial predicate), and its triggers — exactly
//! the immutability trigger on the receipt and authority tables, none elsewhere. A missing
//! filtered index lets two active owners coexist; a dropped immutability trigger lets a receipt
//! be rewritten; an extra trigger can change any write the protocol makes. Failures name tables,
//! columns and indexes only.

/// A column of a state table: name, `format_type` text, NOT NULL.
pub type ColumnContract = (&'static str, &'static str, bool);

/// Per role: the exact columns, in table order.
pub const STATE_CONTRACT: [(&str, &[ColumnContract]); 5] = [
    (
        "source_state",
        &[
            ("state_key", "text", true),
            ("target_identity", "bytea", true),
            ("scope_hash", "text", true),
            ("safe_xmin", "bigint", true),
            ("revision", "bigint", true),
            ("visible_horizon", "bigint", true),
            ("last_receipt_id", "text", true),
            ("created_at_utc", "timestamp with time zone", true),
            ("updated_at_utc", "timestamp with time zone", true),
            ("superseded_at_utc", "timestamp with time zone", false),
            ("superseded_by", "text", false),
        ],
    ),
    (
        "run",
        &[
            ("run_id", "text", true),
            ("invocation_id", "text", true),
            ("state_key", "text", true),
            ("status", "text", true),
            ("code", "text", false),
            ("evidence", "jsonb", true),
            ("recorded_at_utc", "timestamp with time zone", true),
        ],
    ),
    (
        "receipt",
        &[
            ("receipt_id", "text", true),
            ("load_id", "text", true),
            ("invocation_id", "text", true),
            ("state_key", "text", true),
            ("previous_xmin", "bigint", false),
            ("previous_revision", "bigint", false),
            ("new_xmin", "bigint", true),
            ("new_revision", "bigint", true),
            ("body", "jsonb", true),
            ("committed_at_utc", "timestamp with time zone", true),
        ],
    ),
    (
        "repair_authority",
        &[
            ("authority_id", "text", true),
            ("recorded_digest", "text", true),
            ("document", "text", true),
            ("created_at_utc", "timestamp with time zone", true),
        ],
    ),
    (
        "repair_consumption",
        &[
            ("authority_id", "text", true),
            ("authority_digest", "text", true),
            ("state_key", "text", true),
            ("load_id", "text", true),
            ("receipt_id", "text", true),
            ("consumed_at_utc", "timestamp with time zone", true),
        ],
    ),
];

/// A unique index the protocol relies on: its columns in order and its partial predicate as
/// `pg_get_expr` renders it.
pub type UniqueContract = (&'static [&'static str], Option<&'static str>);

/// Per role: unique indexes that must exist.
pub const STATE_UNIQUE: [(&str, &[UniqueContract]); 5] = [
    (
        "source_state",
        &[
            (&["state_key"], None),
            (&["target_identity"], Some("(superseded_at_utc IS NULL)")),
        ],
    ),
    (
        "run",
        &[(&["run_id"], Some("(status = 'committed'::text)"))],
    ),
    (
        "receipt",
        &[
            (&["receipt_id"], None),
            (&["load_id"], None),
            (&["state_key", "new_revision"], None),
            (&["state_key", "invocation_id"], None),
        ],
    ),
    ("repair_authority", &[(&["authority_id"], None)]),
    (
        "repair_consumption",
        &[
            (&["authority_id"], None),
            (&["load_id"], None),
            (&["receipt_id"], None),
        ],
    ),
];

/// Roles whose rows are immutable: exactly one enabled `BEFORE UPDATE OR DELETE … FOR EACH ROW`
/// trigger calling a function that raises.
pub const IMMUTABLE_ROLES: [&str; 3] = ["receipt", "repair_authority", "repair_consumption"];

/// `pg_trigger.tgtype` of `BEFORE UPDATE OR DELETE FOR EACH ROW` (row 1 + before 2 + delete 8
/// + update 16).
pub const IMMUTABLE_TGTYPE: i16 = 27;

/// What the catalog says of one state table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableFacts {
    /// Columns in table order: name, `format_type`, NOT NULL.
    pub columns: Vec<(String, String, bool)>,
    /// Valid unique indexes: columns in order (empty for an expression index), predicate.
    pub unique: Vec<(Vec<String>, Option<String>)>,
    /// Enabled user triggers: `tgtype`, whether the function body raises.
    pub triggers: Vec<(i16, bool)>,
}

/// Checks one state table (by role) against the contract; `Err` names what differs.
pub fn verify_table(role: &str, table: &str, facts: &TableFacts) -> Result<(), String> {
    let columns = STATE_CONTRACT
        .iter()
        .find(|(r, _)| *r == role)
        .map(|(_, c)| *c)
        .ok_or_else(|| format!("unknown state role {role}"))?;
    if facts.columns.is_empty() {
        return Err(format!(
            "state table {table:?} does not exist (provision the reviewed DDL)"
        ));
    }
    for (name, type_name, not_null) in columns {
        match facts.columns.iter().find(|(n, _, _)| n == name) {
            None => return Err(format!("state table {table:?} lacks column {name:?}")),
            Some((_, t, nn)) if t != type_name || nn != not_null => {
                return Err(format!(
                    "state table {table:?} column {name:?} is not {type_name}{}",
                    if *not_null { " NOT NULL" } else { " NULL" }
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((extra, _, _)) = facts
        .columns
        .iter()
        .find(|(n, _, _)| !columns.iter().any(|(c, _, _)| c == n))
    {
        return Err(format!(
            "state table {table:?} has column {extra:?} the reviewed DDL does not"
        ));
    }
    let unique = STATE_UNIQUE
        .iter()
        .find(|(r, _)| *r == role)
        .map_or(&[][..], |(_, u)| *u);
    for (cols, predicate) in unique {
        let found = facts.unique.iter().any(|(c, p)| {
            c.iter().map(String::as_str).eq(cols.iter().copied()) && p.as_deref() == *predicate
        });
        if !found {
            return Err(format!(
                "state table {table:?} lacks the unique index on ({}){}",
                cols.join(", "),
                predicate.map_or(String::new(), |p| format!(" WHERE {p}"))
            ));
        }
    }
    let immutable = IMMUTABLE_ROLES.contains(&role);
    match (immutable, facts.triggers.as_slice()) {
        (true, [(IMMUTABLE_TGTYPE, true)]) | (false, []) => Ok(()),
        (true, _) => Err(format!(
            "state table {table:?} must have exactly the reviewed immutability trigger"
        )),
        (false, _) => Err(format!(
            "state table {table:?} has a trigger the reviewed DDL does not"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reviewed(role: &str) -> TableFacts {
        let columns = STATE_CONTRACT.iter().find(|(r, _)| *r == role).unwrap().1;
        let unique = STATE_UNIQUE.iter().find(|(r, _)| *r == role).unwrap().1;
        TableFacts {
            columns: columns
                .iter()
                .map(|(n, t, nn)| ((*n).into(), (*t).into(), *nn))
                .collect(),
            unique: unique
                .iter()
                .map(|(c, p)| {
                    (
                        c.iter().map(|s| (*s).to_owned()).collect(),
                        p.map(str::to_owned),
                    )
                })
                .collect(),
            triggers: if IMMUTABLE_ROLES.contains(&role) {
                vec![(IMMUTABLE_TGTYPE, true)]
            } else {
                vec![]
            },
        }
    }

    #[test]
    fn the_reviewed_shape_passes_and_every_deviation_is_named() {
        // Tier: unit (pure contract check).
        for (role, _) in STATE_CONTRACT {
            assert_eq!(verify_table(role, "t", &reviewed(role)), Ok(()), "{role}");
        }
        let mut f = reviewed("source_state");
        f.unique.retain(|(_, p)| p.is_none());
        assert!(
            verify_table("source_state", "t", &f)
                .unwrap_err()
                .contains("unique index")
        );
        let mut f = reviewed("run");
        f.columns[3].1 = "character varying(20)".into();
        assert!(
            verify_table("run", "t", &f)
                .unwrap_err()
                .contains("\"status\"")
        );
        let mut f = reviewed("run");
        f.columns.push(("extra".into(), "text".into(), false));
        assert!(
            verify_table("run", "t", &f)
                .unwrap_err()
                .contains("\"extra\"")
        );
        let mut f = reviewed("receipt");
        f.triggers.clear();
        assert!(
            verify_table("receipt", "t", &f)
                .unwrap_err()
                .contains("immutability")
        );
        let mut f = reviewed("receipt");
        f.triggers = vec![(IMMUTABLE_TGTYPE, false)];
        assert!(
            verify_table("receipt", "t", &f).is_err(),
            "a trigger that does not raise"
        );
        let mut f = reviewed("source_state");
        f.triggers = vec![(5, true)];
        assert!(
            verify_table("source_state", "t", &f)
                .unwrap_err()
                .contains("trigger")
        );
        let mut f = reviewed("source_state");
        f.columns[9].2 = true;
        assert!(
            verify_table("source_state", "t", &f).is_err(),
            "nullability"
        );
        assert!(
            verify_table("run", "t", &TableFacts::default())
                .unwrap_err()
                .contains("does not exist")
        );
    }
}
