//! Catalog verification beyond `OBJECT_ID` on captured catalog rows (tier: statement/unit, no
//! server): the target's unique index on exactly the key, and the state tables' reviewed
//! contract (columns, unique and filtered indexes, immutability triggers).

use dpone_adapter_mssql::catalog::{
    IMMUTABLE_ROLES, STATE_CATALOG_MISMATCH, STATE_COLUMNS, STATE_UNIQUE, StateFact,
    TARGET_INSTEAD_OF_TRIGGER, TARGET_KEY_INDEX_MISSING, UniqueIndexColumn, normalize_filter,
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
    verify_target_key(&keys(), &pk, 0).unwrap();
    // A unique index (not a primary key) in another column order is as good.
    let uq = [ix(2, false, None, "id"), ix(2, false, None, "tenant")];
    verify_target_key(&keys(), &uq, 0).unwrap();
    let refused = |rows: &[UniqueIndexColumn]| {
        let e = verify_target_key(&keys(), rows, 0).unwrap_err();
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
    let e = verify_target_key(&keys(), &pk, 1).unwrap_err();
    assert!(e.starts_with(TARGET_INSTEAD_OF_TRIGGER), "{e}");
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
    facts
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
