//! Target-shape preflight on captured `sys.columns` rows, for each delete mode.

mod common;

use dpone_adapter_mssql::shape::{ColumnRow, verify_target};
use dpone_adapter_mssql::sql::{DeleteMode, MissingAction};

fn col(name: &str, ty: &str, nullable: bool) -> ColumnRow {
    ColumnRow {
        name: name.into(),
        type_name: ty.into(),
        is_nullable: nullable,
        collation_name: None,
        is_computed: false,
        is_persisted: false,
        max_length: 0,
        precision: 0,
        scale: 0,
        code_page: None,
    }
}

fn base() -> Vec<ColumnRow> {
    vec![
        ColumnRow {
            collation_name: Some("Latin1_General_100_BIN2".into()),
            ..col("tenant", "nvarchar", false)
        },
        col("id", "bigint", false),
        col("amount", "decimal", true),
        ColumnRow {
            collation_name: Some("SQL_Latin1_General_CP1_CI_AS".into()),
            ..col("note", "nvarchar", true)
        },
        col("__dpone__updated_at", "datetime2", false),
    ]
}

fn computed_flag() -> ColumnRow {
    ColumnRow {
        is_computed: true,
        is_persisted: true,
        max_length: 0,
        precision: 0,
        scale: 0,
        ..col("__dpone__is_deleted", "bit", true)
    }
}

#[test]
fn each_mode_accepts_its_columns_only() {
    let ts = col("__dpone__deleted_at", "datetime2", true);
    let stored = col("__dpone__is_deleted", "bit", false);
    let shapes = [
        (DeleteMode::TimestampOnly, vec![ts.clone()]),
        (
            DeleteMode::TimestampAndFlag,
            vec![ts.clone(), computed_flag()],
        ),
        (DeleteMode::FlagOnly, vec![stored.clone()]),
    ];
    for (mode, extra) in &shapes {
        let f = common::finalizer(*mode, MissingAction::SoftDelete);
        for (other, extra2) in &shapes {
            let mut rows = base();
            rows.extend(extra2.iter().cloned());
            assert_eq!(
                verify_target(&f, &rows).is_ok(),
                mode == other,
                "{mode:?} on {other:?} columns"
            );
        }
        let mut rows = base();
        rows.extend(extra.iter().cloned());
        verify_target(&f, &rows).unwrap();
    }
    // A non-persisted computed flag is not timestamp_and_flag.
    let f = common::finalizer(DeleteMode::TimestampAndFlag, MissingAction::SoftDelete);
    let mut rows = base();
    rows.push(ts);
    rows.push(ColumnRow {
        is_persisted: false,
        max_length: 0,
        precision: 0,
        scale: 0,
        ..computed_flag()
    });
    assert!(verify_target(&f, &rows).is_err());
}

#[test]
fn text_key_must_be_binary_collated_and_not_null() {
    let f = common::finalizer(DeleteMode::TimestampOnly, MissingAction::SoftDelete);
    let mut rows = base();
    rows.push(col("__dpone__deleted_at", "datetime2", true));
    rows[0].collation_name = Some("Latin1_General_100_CI_AS".into());
    assert!(verify_target(&f, &rows).unwrap_err().contains("tenant"));
    rows[0].collation_name = Some("Latin1_General_100_BIN2".into());
    rows[1].is_nullable = true;
    assert!(verify_target(&f, &rows).is_err());
    rows[1].is_nullable = false;
    rows.remove(2);
    assert!(verify_target(&f, &rows).unwrap_err().contains("amount"));
}
