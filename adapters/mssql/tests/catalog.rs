//! Catalog verification beyond `OBJECT_ID` on captured catalog rows (tier: statement/unit, no
//! server): the target's unique index on exactly the key, and the state tables' reviewed
//! contract (columns, unique and filtered indexes, immutability triggers).

use dpone_adapter_mssql::catalog::{
    IMMUTABLE_ROLES, STATE_CATALOG_MISMATCH, STATE_CHECKS, STATE_COLUMNS, STATE_FOREIGN_KEYS,
    STATE_UNIQUE, StateFact, TARGET_CASCADING_REFERENCE, TARGET_INSTEAD_OF_TRIGGER,
    TARGET_KEY_INDEX_MISSING, UniqueIndexColumn, normalize_check, normalize_filter,
    verify_state_catalog, verify_target_key,
};

fn ix(id: i32, pk: bool, filter: Option<&str>, column: &str) -> UniqueIndexColumn {
    UniqueIndexColumn {
        index_id: id,
        is_primary_key: pk,
        has_filter: filter.is_some(),
        is_disabled: false,
        filter: filter.map(Into::into),
        column: column.into(),
    }
}

fn keys() -> Vec<String> {
    vec!["tenant".into(), "id".into()]
}

#[test]
fn target_needs_a_unique_index_on_exactly_the_key() {
    // The reviewed DDL's clustered primary key.
    let pk = [ix(1, true, None, "tenant"), ix(1, true, None, "id")];
    verify_target_key(&keys(), &pk, 0, 0).unwrap();
    // A unique index (not a primary key) in another column order is as good.
    let uq = [ix(2, false, None, "id"), ix(2, false, None, "tenant")];
    verify_target_key(&keys(), &uq, 0, 0).unwrap();
    let refused = |rows: &[UniqueIndexColumn]| {
        let e = verify_target_key(&keys(), rows, 0, 0).unwrap_err();
        assert!(e.starts_with(TARGET_KEY_INDEX_MISSING), "{e}");
    };
    refused(&[]);
    // On a part of the key only, or on more than the key.
    refused(&[ix(1, true, None, "id")]);
    refused(&[
        ix(1, true, None, "tenant"),
        ix(1, true, None, "id"),
        ix(1, true, None, "region"),
    ]);
    // Filtered, or disabled.
    refused(&[
        ix(3, false, Some("([id]>(0))"), "tenant"),
        ix(3, false, Some("([id]>(0))"), "id"),
    ]);
    let mut disabled = pk.clone();
    for c in &mut disabled {
        c.is_disabled = true;
    }
    refused(&disabled);
    // An INSTEAD OF trigger makes the OUTPUT counts untrustworthy.
    let e = verify_target_key(&keys(), &pk, 1, 0).unwrap_err();
    assert!(e.starts_with(TARGET_INSTEAD_OF_TRIGGER), "{e}");
    // A foreign key that cascades (or sets NULL / a default) from the target writes elsewhere.
    let e = verify_target_key(&keys(), &pk, 0, 1).unwrap_err();
    assert!(e.starts_with(TARGET_CASCADING_REFERENCE), "{e}");
}

/// The facts SQL Server reports for a state database provisioned with the reviewed script.
fn reviewed() -> Vec<StateFact> {
    let mut facts = Vec::new();
    for (role, cols) in STATE_COLUMNS {
        for (name, ty, len, nullable) in cols {
            facts.push(StateFact::Column {
                role: role.into(),
                name: (*name).into(),
                type_name: (*ty).into(),
                max_length: *len,
                nullable: *nullable,
            });
        }
    }
    for (i, (role, cols, filter)) in STATE_UNIQUE.iter().enumerate() {
        // SQL Server's own spelling of a filter.
        let filter = filter.map(|f| match f {
            "[superseded_at_utc] IS NULL" => "([superseded_at_utc] IS NULL)",
            _ => "([status]='committed')",
        });
        for c in *cols {
            facts.push(StateFact::Index {
                role: (*role).into(),
                column: ix(i as i32 + 1, false, filter, c),
            });
        }
    }
    for role in IMMUTABLE_ROLES {
        for event in ["UPDATE", "DELETE"] {
            facts.push(StateFact::Trigger {
                role: role.into(),
                name: format!("dpone_{role}_immutable"),
                event: event.into(),
                is_disabled: false,
                is_instead_of: false,
            });
        }
    }
    // SQL Server's stored spelling of the reviewed CHECK constraints (an IN list is stored as
    // OR terms, last value first).
    for (role, name, definition) in [
        (
            "source_state",
            "dpone_source_state_xmin_ck",
            "([safe_xmin]>=(0))",
        ),
        (
            "source_state",
            "dpone_source_state_revision_ck",
            "([revision]>=(1))",
        ),
        (
            "source_state",
            "dpone_source_state_horizon_ck",
            "([visible_horizon]>=[safe_xmin])",
        ),
        (
            "run",
            "dpone_run_state_status_ck",
            "([status]='rolled_back' OR [status]='committed')",
        ),
        (
            "run",
            "dpone_run_state_evidence_ck",
            "(isjson([evidence])=(1))",
        ),
        (
            "receipt",
            "dpone_commit_receipt_body_ck",
            "(isjson([body])=(1))",
        ),
    ] {
        facts.push(check(role, name, definition));
    }
    for (name, column, to) in [
        (
            "dpone_repair_authority_consumption_authority_fk",
            "authority_id",
            "repair_authority.authority_id",
        ),
        (
            "dpone_repair_authority_consumption_receipt_fk",
            "receipt_id",
            "receipt.receipt_id",
        ),
    ] {
        facts.push(fk(name, column, Some(to), 0));
    }
    facts
}

fn check(role: &str, name: &str, definition: &str) -> StateFact {
    StateFact::Check {
        role: role.into(),
        name: name.into(),
        definition: definition.into(),
        is_disabled: false,
        is_not_trusted: false,
    }
}

fn fk(name: &str, column: &str, references: Option<&str>, actions: i32) -> StateFact {
    StateFact::ForeignKey {
        role: "repair_consumption".into(),
        name: name.into(),
        column: column.into(),
        references: references.map(Into::into),
        actions,
        is_disabled: false,
        is_not_trusted: false,
    }
}

fn refused(facts: &[StateFact], needle: &str) {
    let e = verify_state_catalog(facts).unwrap_err();
    assert!(e.starts_with(STATE_CATALOG_MISMATCH), "{e}");
    assert!(e.contains(needle), "{e} lacks {needle}");
}

#[test]
fn the_reviewed_state_contract_passes() {
    verify_state_catalog(&reviewed()).unwrap();
    assert_eq!(
        normalize_filter("([superseded_at_utc] IS NULL)"),
        normalize_filter("[superseded_at_utc] IS NULL")
    );
}

#[test]
fn state_columns_must_be_exactly_the_contract() {
    let mut f = reviewed();
    f.retain(|x| !matches!(x, StateFact::Column { name, role, .. } if role == "receipt" && name == "invocation_digest"));
    refused(&f, "invocation_digest is missing");
    let mut f = reviewed();
    for x in &mut f {
        if let StateFact::Column {
            name, max_length, ..
        } = x
            && name == "last_receipt_id"
        {
            *max_length = 400;
        }
    }
    refused(&f, "last_receipt_id");
    let mut f = reviewed();
    f.push(StateFact::Column {
        role: "source_state".into(),
        name: "note".into(),
        type_name: "int".into(),
        max_length: 4,
        nullable: true,
    });
    refused(&f, "note is not in the contract");
    let mut f = reviewed();
    f.retain(|x| !matches!(x, StateFact::Column { role, .. } if role == "run"));
    refused(&f, "run: the table is missing");
}

#[test]
fn state_unique_and_filtered_indexes_must_hold() {
    // A v1 database (no invocation-digest constraint) is not contract v2.
    let drop_index = |f: &mut Vec<StateFact>, role: &str, column: &str| {
        let id = f
            .iter()
            .find_map(|x| match x {
                StateFact::Index { role: r, column: c } if r == role && c.column == column => {
                    Some(c.index_id)
                }
                _ => None,
            })
            .unwrap();
        f.retain(|x| !matches!(x, StateFact::Index { column: c, .. } if c.index_id == id));
    };
    let mut f = reviewed();
    drop_index(&mut f, "receipt", "invocation_digest");
    refused(&f, "(invocation_digest)");
    // One active owner per target: the filtered index, with its filter.
    let mut f = reviewed();
    drop_index(&mut f, "source_state", "target_identity");
    refused(&f, "target_identity");
    let mut f = reviewed();
    for x in &mut f {
        if let StateFact::Index { column: c, .. } = x
            && c.column == "target_identity"
        {
            c.filter = Some("([superseded_by] IS NULL)".into());
        }
    }
    refused(&f, "WHERE [superseded_at_utc] IS NULL");
    // An unfiltered unique index on target_identity would forbid history: not the contract.
    let mut f = reviewed();
    for x in &mut f {
        if let StateFact::Index { column: c, .. } = x
            && c.column == "target_identity"
        {
            c.has_filter = false;
            c.filter = None;
        }
    }
    refused(&f, "target_identity");
    // A disabled index enforces nothing.
    let mut f = reviewed();
    for x in &mut f {
        if let StateFact::Index { column: c, .. } = x
            && c.column == "load_id"
        {
            c.is_disabled = true;
        }
    }
    refused(&f, "(load_id)");
}

#[test]
fn state_triggers_are_exactly_the_immutability_triggers() {
    // Missing or disabled immutability trigger.
    let mut f = reviewed();
    f.retain(|x| !matches!(x, StateFact::Trigger { role, .. } if role == "receipt"));
    refused(&f, "receipt: no enabled immutability trigger");
    let mut f = reviewed();
    for x in &mut f {
        if let StateFact::Trigger {
            role, is_disabled, ..
        } = x
            && role == "repair_authority"
        {
            *is_disabled = true;
        }
    }
    refused(&f, "repair_authority: no enabled immutability trigger");
    // A trigger that could rewrite or swallow a state write.
    let extra = |role: &str, event: &str, instead_of: bool| StateFact::Trigger {
        role: role.into(),
        name: "t_extra".into(),
        event: event.into(),
        is_disabled: false,
        is_instead_of: instead_of,
    };
    for (role, event, instead_of) in [
        ("source_state", "UPDATE", false),
        ("run", "INSERT", false),
        ("receipt", "INSERT", false),
        ("receipt", "UPDATE", true),
    ] {
        let mut f = reviewed();
        f.push(extra(role, event, instead_of));
        refused(&f, "t_extra is not an immutability trigger");
    }
    // A disabled extra trigger does nothing.
    let mut f = reviewed();
    f.push(StateFact::Trigger {
        role: "source_state".into(),
        name: "t_extra".into(),
        event: "UPDATE".into(),
        is_disabled: true,
        is_instead_of: false,
    });
    verify_state_catalog(&f).unwrap();
}

#[test]
fn the_contract_matches_the_reviewed_script() {
    // Every column and index name of the contract appears in fixtures/mssql/state-ddl.sql, and
    // every column the script creates is in the contract.
    let script = dpone_adapter_mssql::provision::STATE_DDL;
    let mut contract_columns = 0;
    for (_, cols) in STATE_COLUMNS {
        for (name, ty, ..) in cols {
            assert!(script.contains(&format!("[{name}]")), "{name}");
            assert!(script.contains(ty), "{ty}");
            contract_columns += 1;
        }
    }
    let script_columns = script
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with('[') && !t.starts_with("[dpone]")
        })
        .count();
    assert_eq!(contract_columns, script_columns);
    for (_, cols, filter) in STATE_UNIQUE {
        if let Some(f) = filter {
            assert!(script.contains(&format!("WHERE {f}")), "{f}");
        }
        let list = cols
            .iter()
            .map(|c| format!("[{c}]"))
            .collect::<Vec<_>>()
            .join(", ");
        assert!(
            script.contains(&format!("({list})")) || cols.len() == 1,
            "({list})"
        );
    }
}

#[test]
fn check_definitions_compare_without_decoration_or_in_list_order() {
    assert_eq!(normalize_check("([safe_xmin]>=(0))"), "safe_xmin>=0");
    assert_eq!(
        normalize_check("([status]='rolled_back' OR [status]='committed')"),
        normalize_check("([status]='committed' OR [status]='rolled_back')")
    );
    assert_eq!(
        normalize_check("([status]='rolled_back' OR [status]='committed')"),
        "status='committed'|status='rolled_back'"
    );
    assert_ne!(
        normalize_check("([status]='committed' OR [status]='rolled_back' OR [status]='x')"),
        normalize_check("([status]='committed' OR [status]='rolled_back')")
    );
    // Every reviewed definition is already normalized.
    for (_, checks) in STATE_CHECKS {
        for c in checks {
            assert_eq!(normalize_check(&c.replace('|', " or ")), *c, "{c}");
        }
    }
}

#[test]
fn state_check_constraints_are_exactly_the_contracts() {
    // An added CHECK constraint (it could refuse the run's own writes).
    let mut f = reviewed();
    f.push(check("receipt", "sneaky", "([new_revision]<(1000))"));
    refused(&f, "CHECK constraint sneaky is not in the contract");
    // A reviewed one replaced by a weaker one under the same name.
    let mut f = reviewed();
    for x in &mut f {
        if let StateFact::Check {
            name, definition, ..
        } = x
            && name == "dpone_run_state_status_ck"
        {
            *definition = "([status]='committed' OR [status]='rolled_back' OR [status]='x')".into();
        }
    }
    refused(&f, "dpone_run_state_status_ck is not in the contract");
    // A dropped one.
    let mut f = reviewed();
    f.retain(
        |x| !matches!(x, StateFact::Check { name, .. } if name == "dpone_commit_receipt_body_ck"),
    );
    refused(&f, "receipt: the CHECK constraints are not exactly");
    // Twice.
    let mut f = reviewed();
    f.push(check("source_state", "again", "([revision]>=(1))"));
    refused(&f, "source_state: the CHECK constraints are not exactly");
    // Disabled or enabled WITH NOCHECK.
    for trusted in [false, true] {
        let mut f = reviewed();
        for x in &mut f {
            if let StateFact::Check {
                name,
                is_disabled,
                is_not_trusted,
                ..
            } = x
                && name == "dpone_source_state_xmin_ck"
            {
                *is_disabled = trusted;
                *is_not_trusted = !trusted;
            }
        }
        refused(&f, "dpone_source_state_xmin_ck is disabled or not trusted");
    }
}

#[test]
fn state_foreign_keys_are_exactly_the_contracts() {
    assert_eq!(STATE_FOREIGN_KEYS.len(), 2);
    // An added foreign key, to another state table or outside the state tables.
    for references in [Some("receipt.receipt_id"), None] {
        let mut f = reviewed();
        f.push(fk("sneaky", "load_id", references, 0));
        refused(&f, "foreign key sneaky is not in the contract");
    }
    // The reviewed key with ON DELETE CASCADE (1), ON UPDATE SET NULL (4 * 2), disabled, or
    // not trusted.
    for change in 0..4 {
        let mut f = reviewed();
        for x in &mut f {
            if let StateFact::ForeignKey {
                column,
                actions,
                is_disabled,
                is_not_trusted,
                ..
            } = x
                && column == "receipt_id"
            {
                match change {
                    0 => *actions = 1,
                    1 => *actions = 8,
                    2 => *is_disabled = true,
                    _ => *is_not_trusted = true,
                }
            }
        }
        refused(
            &f,
            "dpone_repair_authority_consumption_receipt_fk is not in the contract",
        );
    }
    // A dropped one.
    let mut f = reviewed();
    f.retain(|x| !matches!(x, StateFact::ForeignKey { column, .. } if column == "authority_id"));
    refused(
        &f,
        "the foreign key on authority_id referencing repair_authority.authority_id is missing",
    );
    // A composite key over the reviewed column is not the reviewed key.
    let mut f = reviewed();
    f.push(StateFact::ForeignKey {
        role: "repair_consumption".into(),
        name: "dpone_repair_authority_consumption_receipt_fk".into(),
        column: "load_id".into(),
        references: Some("receipt.load_id".into()),
        actions: 0,
        is_disabled: false,
        is_not_trusted: false,
    });
    refused(
        &f,
        "dpone_repair_authority_consumption_receipt_fk is not in the contract",
    );
    // A table outside the state tables referencing one.
    let mut f = reviewed();
    f.push(StateFact::ReferencedBy {
        role: "receipt".into(),
        name: "outside_fk".into(),
    });
    refused(
        &f,
        "receipt: foreign key outside_fk of a table outside the state tables",
    );
}
