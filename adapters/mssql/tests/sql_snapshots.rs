//! Snapshot of every T-SQL statement: a change to any statement shows up in review.

mod common;

use dpone_adapter_mssql::sql;
use expect_test::expect_file;

fn render(pairs: &[(String, String)]) -> String {
    let mut out = String::new();
    for (n, s) in pairs {
        out.push_str(&format!("-- {n}\n{s}\n\n"));
    }
    out
}

#[test]
fn fixed_statements() {
    let pairs: Vec<(String, String)> = sql::fixed()
        .into_iter()
        .map(|(n, s)| (n.to_owned(), s.to_owned()))
        .collect();
    expect_file!["snapshots/fixed.sql"].assert_eq(&render(&pairs));
}

#[test]
fn finalizer_timestamp_only() {
    snapshot(0, expect_file!["snapshots/finalizer_timestamp_only.sql"]);
}

#[test]
fn finalizer_timestamp_and_flag() {
    snapshot(
        1,
        expect_file!["snapshots/finalizer_timestamp_and_flag.sql"],
    );
}

#[test]
fn finalizer_flag_only() {
    snapshot(2, expect_file!["snapshots/finalizer_flag_only.sql"]);
}

#[test]
fn finalizer_hard_delete() {
    snapshot(3, expect_file!["snapshots/finalizer_hard_delete.sql"]);
}

fn snapshot(case: usize, expected: expect_test::ExpectFile) {
    let (_, mode, missing) = common::CASES[case];
    let f = common::finalizer(mode, missing);
    let mut pairs = vec![(
        "target_ddl".to_owned(),
        sql::target_ddl(&f.target, &f.keys, &f.business, mode),
    )];
    pairs.extend(f.all().into_iter().map(|(n, s)| (n.to_owned(), s)));
    expected.assert_eq(&render(&pairs));
}

#[test]
fn no_merge_and_counts_from_output() {
    for (name, s) in common::all_statements() {
        assert!(
            !s.to_ascii_uppercase().contains("MERGE "),
            "{name} uses MERGE"
        );
    }
    for (case, mode, missing) in common::CASES {
        let f = common::finalizer(mode, missing);
        let mut dml = vec![f.update_changed(), f.insert()];
        if mode == sql::DeleteMode::Hard {
            // Nothing is ever deleted in place, so nothing can be reactivated.
            assert_eq!(f.reactivate(), "SELECT CAST(0 AS bigint) AS affected;");
        } else {
            dml.push(f.reactivate());
        }
        for s in dml.into_iter().chain([
            f.missing_action(),
            f.supersede(),
            f.cas_update(),
            f.cas_insert(),
        ]) {
            assert!(
                s.contains("OUTPUT CONVERT(bit, 1) INTO @dpone_out"),
                "{case}: {s}"
            );
            assert!(s.ends_with("SELECT COUNT_BIG(*) AS affected FROM @dpone_out;"));
        }
        // State writes go through three-part names on the run connection.
        for s in [f.insert_receipt(), f.consume_authority(), f.cas_update()] {
            assert!(s.contains("[DWH_State].[dpone]."), "{case}: {s}");
        }
    }
}

#[test]
fn text_keys_are_binary_collated_in_target_and_staging() {
    let f = common::finalizer(
        sql::DeleteMode::TimestampOnly,
        sql::MissingAction::SoftDelete,
    );
    for s in [
        f.stage_rows_ddl(),
        f.stage_keys_ddl(),
        sql::target_ddl(&f.target, &f.keys, &f.business, f.mode),
    ] {
        assert!(s.contains("[tenant] nvarchar(64) COLLATE Latin1_General_100_BIN2 NOT NULL"));
    }
}

#[test]
fn key_only_table_has_no_update_and_reactivates_marker_only() {
    let mut f = common::finalizer(sql::DeleteMode::FlagOnly, sql::MissingAction::SoftDelete);
    f.business.clear();
    assert_eq!(f.update_changed(), "SELECT CAST(0 AS bigint) AS affected;");
    assert!(
        f.reactivate()
            .starts_with("DECLARE @dpone_out TABLE (n bit NOT NULL); UPDATE t SET t.[__dpone__is_deleted] = 0, t.[__dpone__updated_at] = @P1 OUTPUT")
    );
    f.validate().unwrap();
}

#[test]
fn finalizer_validation() {
    let f = common::finalizer(
        sql::DeleteMode::TimestampOnly,
        sql::MissingAction::SoftDelete,
    );
    f.validate().unwrap();
    let mut mismatch = f.clone();
    mismatch.missing = sql::MissingAction::HardDelete;
    assert_eq!(
        mismatch.validate(),
        Err("mssql_transaction.delete_mode_mismatch")
    );
    let mut wide = f.clone();
    wide.keys[0].ty = sql::KeyType::Text { max_chars: 450 };
    assert_eq!(
        wide.validate(),
        Err("mssql_transaction.target_key_too_wide")
    );
    let mut none = f.clone();
    none.keys.clear();
    assert_eq!(none.validate(), Err("mssql_transaction.target_key_missing"));
    let mut reserved = f.clone();
    reserved.business[0].name = "__dpone__deleted_at".into();
    assert_eq!(
        reserved.validate(),
        Err("mssql_transaction.target_reserved_column")
    );
    let mut dup = f.clone();
    dup.business[0].name = "id".into();
    assert_eq!(
        dup.validate(),
        Err("mssql_transaction.target_duplicate_column")
    );
}

#[test]
fn scratch_sweep_only_touches_the_test_prefix() {
    // `_` is a LIKE wildcard: the prefix is matched literally, and only old databases are swept,
    // so a test running now in another process keeps its databases.
    assert_eq!(sql::SCRATCH_PREFIX, "dpone_t_");
    assert!(sql::STALE_SCRATCH_DATABASES.contains(r"LIKE N'dpone\_t\_%' ESCAPE N'\'"));
    assert!(
        sql::STALE_SCRATCH_DATABASES
            .contains("create_date < DATEADD(MINUTE, -CONVERT(int, @P1), GETDATE())")
    );
    assert_eq!(
        sql::drop_scratch_database("dpone_t_a]b'c"),
        "IF DB_ID(N'dpone_t_a]b''c') IS NOT NULL BEGIN ALTER DATABASE [dpone_t_a]]b'c] SET SINGLE_USER WITH ROLLBACK IMMEDIATE; DROP DATABASE [dpone_t_a]]b'c]; END;"
    );
}

/// Change detection does not depend on the columns' collations: under a case-insensitive or
/// trailing-space-padded collation a change of case or trailing spaces is still a change, and
/// a varbinary change in trailing zero bytes too. Text compares as bytes plus byte length,
/// binary with its byte length; the staging column has the target column's collation.
#[test]
fn change_detection_is_collation_independent() {
    use dpone_adapter_mssql::sql::BusinessColumn;
    let mut f = common::finalizer(
        sql::DeleteMode::TimestampOnly,
        sql::MissingAction::SoftDelete,
    );
    let col = |name: &str, ty: &str, collation: Option<&str>| BusinessColumn {
        name: name.into(),
        type_sql: ty.into(),
        collation: collation.map(Into::into),
    };
    f.business = vec![
        col("n", "nvarchar(40)", Some("Latin1_General_CI_AS")),
        col("v", "varchar(10)", Some("SQL_Latin1_General_CP1_CI_AS")),
        col("c", "nchar(3)", Some("Latin1_General_100_CI_AI")),
        col("b", "varbinary(16)", None),
        col("d", "decimal(18,2)", None),
    ];
    let u = f.update_changed();
    let exists = &u[u.find("EXISTS (").unwrap()..];
    assert!(
        exists.starts_with(
            "EXISTS (SELECT CONVERT(varbinary(8000), s.[n]), DATALENGTH(s.[n]), \
CONVERT(varbinary(8000), s.[v]), DATALENGTH(s.[v]), CONVERT(varbinary(8000), s.[c]), \
DATALENGTH(s.[c]), s.[b], DATALENGTH(s.[b]), s.[d] EXCEPT SELECT CONVERT(varbinary(8000), t.[n])"
        ),
        "{exists}"
    );
    // No comparison of a text column in its own collation is left.
    assert!(!exists.contains("s.[n] EXCEPT") && !exists.contains(", s.[n],"));
    let ddl = f.stage_rows_ddl();
    assert!(
        ddl.contains("[n] nvarchar(40) COLLATE Latin1_General_CI_AS NULL"),
        "{ddl}"
    );
    assert!(
        ddl.contains("[v] varchar(10) COLLATE SQL_Latin1_General_CP1_CI_AS NULL"),
        "{ddl}"
    );
    assert!(ddl.contains("[b] varbinary(16) NULL"), "{ddl}");
    assert!(sql::is_collation_name("Latin1_General_100_CI_AS_SC_UTF8"));
    assert!(!sql::is_collation_name("x; DROP TABLE t"));
    assert!(!sql::is_collation_name(""));
}
