//! The control store's catalog checked against the reviewed DDL
//! (`fixtures/nonproduction/control-store.sql`), as pure checks over captured catalog rows, the
//! way the XMin state catalog is checked: each table's exact columns (name, `format_type` text,
//! nullability), the unique indexes the protocol relies on (one qualification consumption per
//! run, one selected request per activation, one reservation per attempt, one membership charge
//! per workload and pool, one original per grant/phase key), and exactly one immutability
//! trigger per table — every table is append-only. A missing unique index lets a run be consumed
//! twice; a dropped trigger lets a charge be refunded by an UPDATE. Failures name tables,
//! columns and indexes only.

/// A column: name, `format_type` text, NOT NULL.
pub type ColumnContract = (&'static str, &'static str, bool);

/// One table of the reviewed DDL.
#[derive(Clone, Copy, Debug)]
pub struct TableContract {
    /// Table name.
    pub name: &'static str,
    /// Exact columns in table order.
    pub columns: &'static [ColumnContract],
    /// Non-partial unique indexes that must exist (columns in order).
    pub unique: &'static [&'static [&'static str]],
}

/// Every table of the store with its exact columns, in table order.
pub const CONTRACT: [TableContract; 9] = [
    TableContract {
        name: "np_trust_revision",
        columns: &[
            ("environment_id", "uuid", true),
            ("revision", "bigint", true),
            ("policy_digest", "text", true),
            ("policy_bytes", "bytea", true),
            ("root_digest", "text", true),
            ("revocation_epoch", "bigint", true),
            ("max_workloads", "bigint", true),
            ("max_attempts", "bigint", true),
            ("max_source_rows", "bigint", true),
            ("max_source_bytes", "bigint", true),
            ("max_attempt_seconds", "bigint", true),
            ("max_validity_seconds", "bigint", true),
            ("recorded_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["environment_id", "revision"]],
    },
    TableContract {
        name: "np_registration",
        columns: &[
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("environment_id", "uuid", true),
            ("campaign_id", "uuid", true),
            ("grant_digest", "text", true),
            ("original_bytes", "bytea", true),
            ("trust_revision", "bigint", true),
            ("revocation_epoch", "bigint", true),
            ("not_before_utc", "timestamp with time zone", true),
            ("not_after_utc", "timestamp with time zone", true),
            ("max_workloads", "bigint", true),
            ("max_attempts", "bigint", true),
            ("max_source_rows", "bigint", true),
            ("max_source_bytes", "bigint", true),
            ("max_attempt_seconds", "bigint", true),
            ("qualification_run_id", "uuid", false),
            ("route", "text[]", false),
            ("activation_id", "uuid", false),
            ("registered_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["grant_id", "phase"]],
    },
    TableContract {
        name: "np_grant_workload",
        columns: &[
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("workload_id", "text", true),
            ("pack_digest", "text", true),
            ("max_workloads", "bigint", true),
            ("max_attempts", "bigint", true),
            ("max_source_rows", "bigint", true),
            ("max_source_bytes", "bigint", true),
            ("max_attempt_seconds", "bigint", true),
        ],
        unique: &[&["grant_id", "phase", "workload_id"]],
    },
    TableContract {
        name: "np_membership",
        columns: &[
            ("environment_id", "uuid", true),
            ("campaign_id", "uuid", true),
            ("phase", "text", true),
            ("workload_id", "text", true),
            ("grant_id", "uuid", true),
            ("charged_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["environment_id", "campaign_id", "phase", "workload_id"]],
    },
    TableContract {
        name: "np_qualification_consumption",
        columns: &[
            ("run_id", "uuid", true),
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("grant_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("consumed_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["run_id"]],
    },
    TableContract {
        name: "np_activation_candidate",
        columns: &[
            ("activation_id", "uuid", true),
            ("request_digest", "text", true),
            ("request_bytes", "bytea", true),
            ("recorded_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["activation_id", "request_digest"]],
    },
    TableContract {
        name: "np_activation_selection",
        columns: &[
            ("activation_id", "uuid", true),
            ("request_digest", "text", true),
            ("request_bytes", "bytea", true),
            ("grant_id", "uuid", true),
            ("phase", "text", true),
            ("grant_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("selected_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["activation_id"]],
    },
    TableContract {
        name: "np_reservation",
        columns: &[
            ("reservation_id", "text", true),
            ("environment_id", "uuid", true),
            ("campaign_id", "uuid", true),
            ("phase", "text", true),
            ("route", "text[]", false),
            ("grant_id", "uuid", true),
            ("grant_digest", "text", true),
            ("trust_revision", "bigint", true),
            ("workload_id", "text", true),
            ("attempt_id", "text", true),
            ("reserved_source_rows", "bigint", true),
            ("reserved_source_bytes", "bigint", true),
            ("reserved_seconds", "bigint", true),
            ("reserved_at_utc", "timestamp with time zone", true),
        ],
        unique: &[
            &["reservation_id"],
            &[
                "environment_id",
                "campaign_id",
                "phase",
                "workload_id",
                "attempt_id",
            ],
        ],
    },
    TableContract {
        name: "np_settlement",
        columns: &[
            ("reservation_id", "text", true),
            ("measured_source_rows", "bigint", true),
            ("measured_source_bytes", "bigint", true),
            ("measured_http_bytes", "bigint", true),
            ("outcome", "text", true),
            ("settled_at_utc", "timestamp with time zone", true),
        ],
        unique: &[&["reservation_id"]],
    },
];

/// `pg_trigger.tgtype` of `BEFORE UPDATE OR DELETE FOR EACH ROW` (row 1 + before 2 + delete 8
/// + update 16).
pub const IMMUTABLE_TGTYPE: i16 = 27;

/// What the catalog says of one table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableFacts {
    /// Columns in table order: name, `format_type`, NOT NULL.
    pub columns: Vec<(String, String, bool)>,
    /// Valid unique indexes: columns in order, partial predicate.
    pub unique: Vec<(Vec<String>, Option<String>)>,
    /// Enabled user triggers: `tgtype`, whether the function body raises.
    pub triggers: Vec<(i16, bool)>,
}

/// Checks one table against its contract; `Err` names what differs.
pub fn verify_table(contract: &TableContract, facts: &TableFacts) -> Result<(), String> {
    let table = contract.name;
    if facts.columns.is_empty() {
        return Err(format!(
            "control table {table:?} does not exist (provision the reviewed DDL)"
        ));
    }
    let actual: Vec<(&str, &str, bool)> = facts
        .columns
        .iter()
        .map(|(n, t, nn)| (n.as_str(), t.as_str(), *nn))
        .collect();
    for (name, type_name, not_null) in contract.columns {
        match actual.iter().find(|(n, _, _)| n == name) {
            None => return Err(format!("control table {table:?} lacks column {name:?}")),
            Some((_, t, nn)) if t != type_name || nn != not_null => {
                return Err(format!(
                    "control table {table:?} column {name:?} is not {type_name}{}",
                    if *not_null { " NOT NULL" } else { " NULL" }
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((extra, _, _)) = actual
        .iter()
        .find(|(n, _, _)| !contract.columns.iter().any(|(c, _, _)| c == n))
    {
        return Err(format!(
            "control table {table:?} has column {extra:?} the reviewed DDL does not"
        ));
    }
    if actual
        .iter()
        .map(|(n, _, _)| *n)
        .ne(contract.columns.iter().map(|(n, _, _)| *n))
    {
        return Err(format!(
            "control table {table:?} has its columns in another order than the reviewed DDL"
        ));
    }
    for cols in contract.unique {
        let found = facts
            .unique
            .iter()
            .any(|(c, p)| p.is_none() && c.iter().map(String::as_str).eq(cols.iter().copied()));
        if !found {
            return Err(format!(
                "control table {table:?} lacks the unique index on ({})",
                cols.join(", ")
            ));
        }
    }
    match facts.triggers.as_slice() {
        [(IMMUTABLE_TGTYPE, true)] => Ok(()),
        _ => Err(format!(
            "control table {table:?} must have exactly the reviewed immutability trigger"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reviewed(c: &TableContract) -> TableFacts {
        TableFacts {
            columns: c
                .columns
                .iter()
                .map(|(n, t, nn)| ((*n).into(), (*t).into(), *nn))
                .collect(),
            unique: c
                .unique
                .iter()
                .map(|u| (u.iter().map(|s| (*s).to_owned()).collect(), None))
                .collect(),
            triggers: vec![(IMMUTABLE_TGTYPE, true)],
        }
    }

    #[test]
    fn the_reviewed_shape_passes_and_every_deviation_is_named() {
        // Tier: unit (pure contract check).
        for c in &CONTRACT {
            assert_eq!(verify_table(c, &reviewed(c)), Ok(()), "{}", c.name);
        }
        let reservation = CONTRACT
            .iter()
            .find(|c| c.name == "np_reservation")
            .unwrap();
        let mut f = reviewed(reservation);
        f.unique.pop();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("unique index")
        );
        let mut f = reviewed(reservation);
        f.unique[1].1 = Some("(phase = 'execution'::text)".into());
        assert!(
            verify_table(reservation, &f).is_err(),
            "a partial index is not the contract"
        );
        let mut f = reviewed(reservation);
        f.columns[10].1 = "integer".into();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("reserved_source_rows")
        );
        let mut f = reviewed(reservation);
        f.columns.push(("refund".into(), "bigint".into(), false));
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("\"refund\"")
        );
        let mut f = reviewed(reservation);
        f.columns.swap(1, 2);
        assert!(verify_table(reservation, &f).unwrap_err().contains("order"));
        let mut f = reviewed(reservation);
        f.triggers.clear();
        assert!(
            verify_table(reservation, &f)
                .unwrap_err()
                .contains("immutability")
        );
        let mut f = reviewed(reservation);
        f.triggers = vec![(IMMUTABLE_TGTYPE, false)];
        assert!(
            verify_table(reservation, &f).is_err(),
            "a trigger that does not raise"
        );
        let mut f = reviewed(reservation);
        f.triggers.push((5, true));
        assert!(verify_table(reservation, &f).is_err(), "an extra trigger");
        let mut f = reviewed(reservation);
        f.columns[4].2 = true;
        assert!(verify_table(reservation, &f).is_err(), "nullability");
        assert!(
            verify_table(reservation, &TableFacts::default())
                .unwrap_err()
                .contains("does not exist")
        );
    }
}
