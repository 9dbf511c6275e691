//! The PostgreSQL state catalog checked against the reviewed contract
//! (`fixtures/xmin/state-ddl.sql`), as pure checks over captured catalog rows: each state
//! table's exact columns (name, type as `format_type` renders it, nullability), the unique
//! indexes the protocol relies on (columns and partial predicate), and its triggers — exactly
//! the immutability triggers on the receipt and authority tables, none elsewhere. A missing
//! filtered index lets two active owners coexist; a dropped immutability trigger lets a receipt
//! be rewritten; an extra trigger can change any write the protocol makes. CHECK constraints and
//! foreign keys are the reviewed ones exactly ([`STATE_CHECKS`], [`STATE_FOREIGN_KEYS`]): none
//! added, none dropped, none `NOT VALID`, no referential action but `NO ACTION`, and no table
//! outside the state tables referencing one. Failures name tables, columns and indexes only.
//!
//! The immutability guards are checked as enforcing, not just present
//! ([`dpone_pg_catalog::verify_guards`]): each immutable table has exactly the reviewed `BEFORE
//! UPDATE OR DELETE … FOR EACH ROW` trigger and `BEFORE TRUNCATE … FOR EACH STATEMENT` trigger
//! (row triggers never fire on `TRUNCATE`), each enabled for every session (not `DISABLE` or
//! `ENABLE REPLICA`), without `WHEN` condition or column list, calling [`FORBID_MUTATION`]
//! exactly as the DDL defines it (body, language, return type, volatility, security, no `SET`);
//! no state table has row-level security, a policy or a rule. Those refusals start with their
//! reason code (`DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING`, `…_TRIGGER_FUNCTION_NOT_REVIEWED`,
//! `…_TRUNCATE_UNGUARDED`, `…_ROW_SECURITY_PRESENT`, `…_RULE_PRESENT`) under the error code
//! `DPONE_XMIN_STATE_CATALOG_INVALID`.

pub use dpone_pg_catalog::{
    CONSTRAINTS_SQL, ColumnContract, Constraint, ForeignKeyContract, IMMUTABLE_TGTYPE,
    REVIEWED_FK_ACTIONS, Reason, ReviewedFunction, TRUNCATE_GUARD_TGTYPE, TableFacts, TriggerFacts,
};
use dpone_pg_catalog::{verify_columns, verify_guards};

/// The prefix of the guards' reason codes (`DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING`).
pub const REASON_PREFIX: &str = "DPONE_XMIN_STATE";

/// The reviewed trigger function the immutable tables' guards call
/// ([`crate::ddl::render_state_ddl`]).
pub const FORBID_MUTATION: ReviewedFunction = ReviewedFunction {
    name: "dpone_forbid_mutation",
    source: "BEGIN\nRAISE EXCEPTION 'dpone state rows are immutable' USING ERRCODE = 'P0001';\nEND",
};

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

/// Roles whose rows are immutable: exactly the reviewed `BEFORE UPDATE OR DELETE … FOR EACH
/// ROW` and `BEFORE TRUNCATE … FOR EACH STATEMENT` triggers, enforcing, calling
/// [`FORBID_MUTATION`].
pub const IMMUTABLE_ROLES: [&str; 3] = ["receipt", "repair_authority", "repair_consumption"];

/// Per role: the CHECK constraints of the reviewed DDL, as `pg_get_constraintdef` renders them
/// (PostgreSQL 15; sorted).
pub const STATE_CHECKS: [(&str, &[&str]); 5] = [
    (
        "source_state",
        &[
            "CHECK ((octet_length(target_identity) = 32))",
            "CHECK ((revision >= 1))",
            "CHECK ((safe_xmin >= 0))",
            "CHECK ((state_key ~ '^[0-9a-f]{64}$'::text))",
            "CHECK ((visible_horizon >= safe_xmin))",
        ],
    ),
    (
        "run",
        &["CHECK ((status = ANY (ARRAY['committed'::text, 'rolled_back'::text])))"],
    ),
    ("receipt", &[]),
    (
        "repair_authority",
        &["CHECK ((recorded_digest ~ '^[0-9a-f]{64}$'::text))"],
    ),
    ("repair_consumption", &[]),
];

/// Per role: the foreign keys of the reviewed DDL.
pub const STATE_FOREIGN_KEYS: [(&str, &[ForeignKeyContract]); 5] = [
    ("source_state", &[]),
    ("run", &[]),
    ("receipt", &[]),
    ("repair_authority", &[]),
    (
        "repair_consumption",
        &[
            (&["authority_id"], "repair_authority", &["authority_id"]),
            (&["receipt_id"], "receipt", &["receipt_id"]),
        ],
    ),
];

/// Foreign keys of other tables referencing the target (`$1`: its oid) whose action on delete
/// or update writes (`CASCADE`, `SET NULL`, `SET DEFAULT`), counted.
pub const TARGET_CASCADING_REFERENCES_SQL: &str = "SELECT count(*) FROM pg_catalog.pg_constraint c \
 WHERE c.confrelid = $1 AND c.contype = 'f' \
   AND (c.confdeltype NOT IN ('a', 'r') OR c.confupdtype NOT IN ('a', 'r'))";

/// The table's constraints against the reviewed CHECKs and foreign keys of `role`.
fn verify_constraints(role: &str, table: &str, facts: &TableFacts) -> Result<(), String> {
    let checks = STATE_CHECKS
        .iter()
        .find(|(r, _)| *r == role)
        .map_or(&[][..], |(_, c)| *c);
    let fks = STATE_FOREIGN_KEYS
        .iter()
        .find(|(r, _)| *r == role)
        .map_or(&[][..], |(_, f)| *f);
    dpone_pg_catalog::verify_constraints(
        "state table",
        "the state tables",
        table,
        facts,
        checks,
        fks,
    )
}

/// Checks one state table (by role) against the contract; `Err` names what differs.
pub fn verify_table(role: &str, table: &str, facts: &TableFacts) -> Result<(), String> {
    let columns = STATE_CONTRACT
        .iter()
        .find(|(r, _)| *r == role)
        .map(|(_, c)| *c)
        .ok_or_else(|| format!("unknown state role {role}"))?;
    verify_columns("state table", table, columns, facts)?;
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
    verify_guards(
        REASON_PREFIX,
        "state table",
        table,
        facts,
        IMMUTABLE_ROLES.contains(&role),
        &FORBID_MUTATION,
    )?;
    verify_constraints(role, table, facts)
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
                vec![
                    TriggerFacts::reviewed("dpone_immutable", IMMUTABLE_TGTYPE, &FORBID_MUTATION),
                    TriggerFacts::reviewed(
                        "dpone_no_truncate",
                        TRUNCATE_GUARD_TGTYPE,
                        &FORBID_MUTATION,
                    ),
                ]
            } else {
                vec![]
            },
            constraints: reviewed_constraints(role),
            ..TableFacts::default()
        }
    }

    #[test]
    fn the_reviewed_function_is_the_ddls() {
        // Tier: unit (the contract against the rendered DDL).
        let ddl = crate::ddl::render_state_ddl("dpone_state", &crate::ddl::default_state_tables());
        assert!(
            ddl.contains(&format!(
                "CREATE FUNCTION \"dpone_state\".\"dpone_forbid_mutation\"() RETURNS trigger \
                 LANGUAGE plpgsql AS $$\n{}\n$$;\n",
                FORBID_MUTATION.source
            )),
            "{ddl}"
        );
    }

    fn reviewed_constraints(role: &str) -> Vec<Constraint> {
        let checks = STATE_CHECKS.iter().find(|(r, _)| *r == role).unwrap().1;
        let fks = STATE_FOREIGN_KEYS
            .iter()
            .find(|(r, _)| *r == role)
            .unwrap()
            .1;
        let mut out: Vec<Constraint> = checks
            .iter()
            .map(|d| Constraint::Check {
                definition: (*d).into(),
                validated: true,
            })
            .collect();
        out.extend(
            fks.iter()
                .map(|(cols, to, ref_cols)| Constraint::ForeignKey {
                    columns: cols.iter().map(|c| (*c).into()).collect(),
                    references: Some((*to).into()),
                    referenced_columns: ref_cols.iter().map(|c| (*c).into()).collect(),
                    actions: REVIEWED_FK_ACTIONS.into(),
                    validated: true,
                }),
        );
        // The consumption table's keys reference these two.
        if matches!(role, "receipt" | "repair_authority") {
            out.push(Constraint::ReferencedBy(Some("repair_consumption".into())));
        }
        out
    }

    #[test]
    fn an_added_dropped_or_weakened_check_or_foreign_key_is_refused() {
        // Tier: unit (pure contract check).
        let check = |d: &str, validated| Constraint::Check {
            definition: d.into(),
            validated,
        };
        let mut f = reviewed("receipt");
        f.constraints
            .push(check("CHECK ((new_revision < 100))", true));
        let e = verify_table("receipt", "t", &f).unwrap_err();
        assert!(
            e.contains("CHECK constraint the reviewed DDL does not"),
            "{e}"
        );

        let mut f = reviewed("source_state");
        f.constraints.remove(0);
        let e = verify_table("source_state", "t", &f).unwrap_err();
        assert!(e.contains("lacks the reviewed CHECK"), "{e}");

        let mut f = reviewed("source_state");
        f.constraints[0] = check(STATE_CHECKS[0].1[0], false);
        assert!(
            verify_table("source_state", "t", &f)
                .unwrap_err()
                .contains("NOT VALID")
        );

        let mut f = reviewed("run");
        f.constraints.push(check(STATE_CHECKS[1].1[0], true));
        assert!(verify_table("run", "t", &f).unwrap_err().contains("twice"));

        let fk = |cols: &[&str], to: Option<&str>, actions: &str| Constraint::ForeignKey {
            columns: cols.iter().map(|c| (*c).into()).collect(),
            references: to.map(Into::into),
            referenced_columns: vec!["receipt_id".into()],
            actions: actions.into(),
            validated: true,
        };
        // An added foreign key, to another state table or outside the schema.
        for added in [
            fk(&["receipt_id"], Some("receipt"), REVIEWED_FK_ACTIONS),
            fk(&["receipt_id"], None, REVIEWED_FK_ACTIONS),
        ] {
            let mut f = reviewed("run");
            f.constraints.push(added);
            let e = verify_table("run", "t", &f).unwrap_err();
            assert!(e.contains("foreign key"), "{e}");
        }
        // The reviewed foreign key with a cascade, or deferrable, or NOT VALID.
        for weakened in ["acs", "aasd"] {
            let mut f = reviewed("repair_consumption");
            f.constraints[1] = fk(&["receipt_id"], Some("receipt"), weakened);
            assert!(
                verify_table("repair_consumption", "t", &f).is_err(),
                "{weakened}"
            );
        }
        let mut f = reviewed("repair_consumption");
        if let Constraint::ForeignKey { validated, .. } = &mut f.constraints[1] {
            *validated = false;
        }
        assert!(verify_table("repair_consumption", "t", &f).is_err());
        // A dropped foreign key.
        let mut f = reviewed("repair_consumption");
        f.constraints.pop();
        assert!(
            verify_table("repair_consumption", "t", &f)
                .unwrap_err()
                .contains("lacks a foreign key")
        );
        // A table outside the state tables referencing one.
        let mut f = reviewed("receipt");
        f.constraints.push(Constraint::ReferencedBy(None));
        assert!(
            verify_table("receipt", "t", &f)
                .unwrap_err()
                .contains("outside the state tables")
        );
        let mut f = reviewed("receipt");
        f.constraints.push(Constraint::Other("x".into()));
        assert!(
            verify_table("receipt", "t", &f)
                .unwrap_err()
                .contains("kind x")
        );
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
        f.triggers[0].function.source = "BEGIN\n-- RAISE EXCEPTION 'x';\nEND".into();
        assert!(
            verify_table("receipt", "t", &f)
                .unwrap_err()
                .starts_with("DPONE_XMIN_STATE_TRIGGER_FUNCTION_NOT_REVIEWED: state table \"t\""),
            "a trigger that does not raise"
        );
        let mut f = reviewed("repair_consumption");
        f.triggers[1].enabled = "D".into();
        assert!(
            verify_table("repair_consumption", "t", &f)
                .unwrap_err()
                .starts_with("DPONE_XMIN_STATE_TRIGGER_NOT_ENFORCING: "),
            "a disabled truncate guard"
        );
        let mut f = reviewed("repair_authority");
        f.triggers.pop();
        assert!(
            verify_table("repair_authority", "t", &f)
                .unwrap_err()
                .starts_with("DPONE_XMIN_STATE_TRUNCATE_UNGUARDED: "),
            "no truncate guard"
        );
        let mut f = reviewed("source_state");
        f.policies.push("hide".into());
        assert!(
            verify_table("source_state", "t", &f)
                .unwrap_err()
                .starts_with("DPONE_XMIN_STATE_ROW_SECURITY_PRESENT: "),
            "a policy"
        );
        let mut f = reviewed("run");
        f.rules.push("keep".into());
        assert!(
            verify_table("run", "t", &f)
                .unwrap_err()
                .starts_with("DPONE_XMIN_STATE_RULE_PRESENT: "),
            "a rule"
        );
        let mut f = reviewed("source_state");
        f.triggers = vec![TriggerFacts::reviewed("x", 5, &FORBID_MUTATION)];
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
