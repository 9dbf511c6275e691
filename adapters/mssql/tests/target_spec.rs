//! The SQL Server target port's pure parts: the finalizer frozen from captured `sys.columns`
//! rows, the delete shape of each plan mode, the mapping of pin failures to engine codes, and
//! the invocation digest of contract v2.
//!
//! Tier: unit (no server). The port's I/O is exercised, when `DPONE_TEST_MSSQL_URL` is set, by
//! the `::sql_server` variants of the engine's shared suites in `adapters/postgres/tests/`
//! (`lifecycle.rs`, `faults.rs`, `guards.rs`, `transfer.rs`) and by this crate's
//! `tests/live.rs`.

use dpone_adapter_mssql::pins::PinError;
use dpone_adapter_mssql::shape::ColumnRow;
use dpone_adapter_mssql::sql::{DeleteMode, KeyType, MissingAction};
use dpone_adapter_mssql::target::{MssqlTargetSpec, invocation_digest, pin_error};
use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::manifest::StateTables;
use dpone_engine_xmin::registry::{
    Endpoint, EndpointSpec, MssqlDatabaseAuthority, MssqlPin, MssqlRole, MssqlRoutePins,
};
use dpone_policy_model::delete_mode::Mode;

fn endpoint(db: &str) -> Endpoint {
    Endpoint {
        spec: EndpointSpec {
            host: "sql.internal".into(),
            port: 1433,
            database: db.into(),
            user: "loader".into(),
            sslmode: None,
            sslrootcert: None,
        },
        password: None,
    }
}

fn pin(role: MssqlRole, name: &str, id: i32) -> MssqlPin {
    MssqlPin {
        role,
        name: name.into(),
        authority: MssqlDatabaseAuthority {
            database_id: id,
            create_token: "2026-08-16T09:14:22.1233333".into(),
            database_guid: "01234567-89ab-cdef-0123-456789abcdef".into(),
        },
    }
}

fn spec(mode: Mode) -> MssqlTargetSpec {
    MssqlTargetSpec {
        endpoint: endpoint("DWH"),
        pins: MssqlRoutePins {
            pins: [
                pin(MssqlRole::Target, "DWH", 7),
                pin(MssqlRole::Staging, "DWH_Stage", 8),
                pin(MssqlRole::State, "DWH_State", 9),
            ],
            staging_schema: "dpone_stage".into(),
            state_endpoint: endpoint("DWH_State"),
            trust_server_certificate: false,
        },
        schema: "dbo".into(),
        table: "orders".into(),
        keys: vec!["tenant".into(), "id".into()],
        business: vec!["amount".into(), "note".into(), "payload".into()],
        plan: dpone_policy_delete_mode::plan_for(mode),
        state_schema: "dpone".into(),
        state: StateTables {
            connection_ref: "mssql_state".into(),
            schema: None,
            source_state: "dpone_source_state".into(),
            run: "dpone_run_state".into(),
            receipt: "dpone_commit_receipt".into(),
            repair_authority: "dpone_repair_authority".into(),
            repair_consumption: "dpone_repair_authority_consumption".into(),
        },
    }
}

fn col(name: &str, ty: &str, nullable: bool, max_length: i32) -> ColumnRow {
    ColumnRow {
        name: name.into(),
        type_name: ty.into(),
        is_nullable: nullable,
        collation_name: None,
        is_computed: false,
        is_persisted: false,
        max_length,
        precision: 0,
        scale: 0,
        code_page: None,
    }
}

fn columns() -> Vec<ColumnRow> {
    vec![
        ColumnRow {
            collation_name: Some("Latin1_General_100_BIN2".into()),
            ..col("tenant", "nvarchar", false, 128)
        },
        col("id", "bigint", false, 8),
        ColumnRow {
            precision: 18,
            scale: 2,
            ..col("amount", "decimal", true, 9)
        },
        col("note", "nvarchar", true, 400),
        col("payload", "varbinary", true, 8000),
        ColumnRow {
            scale: 7,
            ..col("__dpone__deleted_at", "datetime2", true, 8)
        },
        ColumnRow {
            scale: 7,
            ..col("__dpone__updated_at", "datetime2", false, 8)
        },
    ]
}

#[test]
fn finalizer_is_frozen_from_the_target_columns() {
    let f = spec(Mode::TimestampOnly)
        .finalizer(&columns())
        .expect("valid target");
    assert_eq!(f.target.sql(), "[DWH].[dbo].[orders]");
    assert_eq!(f.stage_rows.database, "DWH_Stage");
    assert_eq!(f.stage_rows.schema, "dpone_stage");
    assert_eq!(
        f.state.receipt.sql(),
        "[DWH_State].[dpone].[dpone_commit_receipt]"
    );
    assert_eq!(f.keys[0].ty, KeyType::Text { max_chars: 64 });
    assert_eq!(f.keys[1].ty, KeyType::BigInt);
    let types: Vec<&str> = f.business.iter().map(|b| b.type_sql.as_str()).collect();
    assert_eq!(types, ["decimal(18,2)", "nvarchar(200)", "varbinary(8000)"]);
    assert_eq!(f.mode, DeleteMode::TimestampOnly);
    assert_eq!(f.missing, MissingAction::SoftDelete);
}

#[test]
fn delete_shapes_of_every_plan_mode() {
    for (mode, shape) in [
        (
            Mode::TimestampOnly,
            (DeleteMode::TimestampOnly, MissingAction::SoftDelete),
        ),
        (
            Mode::TimestampAndFlag,
            (DeleteMode::TimestampAndFlag, MissingAction::SoftDelete),
        ),
        (
            Mode::FlagOnly,
            (DeleteMode::FlagOnly, MissingAction::SoftDelete),
        ),
        (
            Mode::HardDelete,
            (DeleteMode::Hard, MissingAction::HardDelete),
        ),
    ] {
        assert_eq!(spec(mode).delete_shape(), shape, "{mode:?}");
    }
}

#[test]
fn target_shape_failures_are_refused_before_any_staging() {
    let refused = |cols: Vec<ColumnRow>, mode: Mode| {
        spec(mode)
            .finalizer(&cols)
            .expect_err("must be refused")
            .code()
    };
    // A missing business column.
    let mut cols = columns();
    cols.retain(|c| c.name != "note");
    assert_eq!(
        refused(cols, Mode::TimestampOnly),
        ErrorCode::TargetTableInvalid
    );
    // A key column of a type SQL Server keys are not supported in.
    let mut cols = columns();
    cols[1].type_name = "decimal".into();
    assert_eq!(
        refused(cols, Mode::TimestampOnly),
        ErrorCode::TargetTableInvalid
    );
    // A text key wider than the 900-byte index limit (nvarchar(451) + bigint).
    let mut cols = columns();
    cols[0].max_length = 902;
    let e = spec(Mode::TimestampOnly)
        .finalizer(&cols)
        .expect_err("too wide");
    assert_eq!(e.code(), ErrorCode::TargetTableInvalid);
    // A text key in a case-insensitive collation.
    let mut cols = columns();
    cols[0].collation_name = Some("SQL_Latin1_General_CP1_CI_AS".into());
    assert_eq!(
        refused(cols, Mode::TimestampOnly),
        ErrorCode::TargetTableInvalid
    );
    // flag_only needs a stored bit flag, not the timestamp.
    assert_eq!(
        refused(columns(), Mode::FlagOnly),
        ErrorCode::TargetTableInvalid
    );
}

#[test]
fn pin_failures_map_to_engine_codes() {
    let e = |code: &str| PinError {
        code: code.into(),
        message: "m".into(),
    };
    for (code, want) in [
        (
            "mssql_transaction.staging_database_metadata_permission_denied",
            ErrorCode::TargetMetadataPermissionDenied,
        ),
        (
            "mssql_transaction.state_topology_mismatch",
            ErrorCode::TargetTopologyMismatch,
        ),
        (
            "mssql_transaction.state_principal_mismatch",
            ErrorCode::TargetTopologyMismatch,
        ),
        (
            "mssql_transaction.staging_lease_lost",
            ErrorCode::TargetStagingAuthorityLost,
        ),
        (
            "mssql_transaction.target_database_pin_mismatch",
            ErrorCode::TargetDatabasePinMismatch,
        ),
        (
            "mssql_transaction.target_database_casefold_decoy",
            ErrorCode::TargetDatabasePinMismatch,
        ),
    ] {
        let x = pin_error(&e(code));
        assert_eq!(x.code(), want, "{code}");
        // The adapter's detail code leads the message for operators.
        assert!(x.message().starts_with(code), "{}", x.message());
    }
}

#[test]
fn invocation_digest_binds_the_invocation_only() {
    let a = invocation_digest("inv-1");
    assert_eq!(a, invocation_digest("inv-1"));
    assert_ne!(a, invocation_digest("inv-2"));
    assert_ne!(a, [0u8; 32]);
}

#[test]
fn hard_delete_target_has_no_reserved_soft_delete_columns() {
    let mut cols = columns();
    cols.retain(|c| c.name != "__dpone__deleted_at");
    let f = spec(Mode::HardDelete)
        .finalizer(&cols)
        .expect("hard-delete target");
    assert_eq!(f.mode, DeleteMode::Hard);
    assert_eq!(f.missing, MissingAction::HardDelete);
    assert_eq!(f.reactivate(), "SELECT CAST(0 AS bigint) AS affected;");
    assert!(f.missing_action().contains("DELETE t OUTPUT"));
    assert!(f.populations().contains("WHERE 1 = 1"));
    // A leftover soft-delete column is refused, as the plan has none.
    let e = spec(Mode::HardDelete)
        .finalizer(&columns())
        .expect_err("reserved column on a hard-delete target");
    assert_eq!(e.code(), ErrorCode::TargetTableInvalid);
}

/// `begin` does not depend on `preflight` (the `TargetPort` contract, as on PostgreSQL): it
/// connects and re-verifies everything on the run's own connection. Without a server that is a
/// connection failure, never "preflight must run before the run transaction".
#[tokio::test]
async fn begin_does_not_require_preflight() {
    use dpone_adapter_mssql::target::MssqlTarget;
    use dpone_engine_xmin::ports::TargetPort;
    let mut s = spec(Mode::TimestampOnly);
    // A closed local port: the connection is refused at once.
    s.endpoint.spec.host = "127.0.0.1".into();
    s.endpoint.spec.port = 1;
    let mut target = MssqlTarget::new(s);
    let e = match target.begin().await {
        Ok(_) => panic!("no server listens on port 1"),
        Err(e) => e,
    };
    assert_eq!(e.code(), ErrorCode::TargetConnect, "{e}");
    assert!(!e.message().contains("preflight"), "{e}");
}

/// Every test file named in the crate's docs and test headers exists (the tier map must not
/// drift from the tree).
#[test]
fn named_test_files_exist() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let repo = root.join("../..");
    let mut texts = vec![(
        "docs/mssql-target.md".to_owned(),
        std::fs::read_to_string(repo.join("docs/mssql-target.md")).expect("docs"),
    )];
    for entry in std::fs::read_dir(root.join("tests")).expect("tests dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("test file");
            texts.push((path.display().to_string(), text));
        }
    }
    for (file, text) in texts {
        for (i, _) in text.match_indices("tests/") {
            let rest = &text[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.')))
                .unwrap_or(rest.len());
            let name = rest[..end].trim_end_matches('.');
            if !name.ends_with(".rs") {
                continue;
            }
            let candidates = [root.join(name), repo.join("adapters/postgres").join(name)];
            assert!(
                candidates.iter().any(|p| p.exists()),
                "{file} names {name}, which does not exist"
            );
        }
    }
}

/// Every common SQL Server column type is either accepted, with the load path that carries it
/// exactly (`shape::load_path`), or refused when the finalizer is frozen (preflight and `begin`,
/// before extraction and before any transaction) with the reason in the message; the column
/// names already at `check`/`plan` (`check_plan`, no I/O).
#[test]
fn column_types_are_accepted_with_their_load_path_or_refused_before_any_io() {
    use dpone_adapter_mssql::shape::{
        BULK_COLUMN_NAME_UNSUPPORTED, BULK_COLUMN_TYPE_UNSUPPORTED, LoadPath, load_path,
        table_load_path,
    };
    let with_note = |row: ColumnRow| {
        let mut cols = columns();
        let i = cols.iter().position(|c| c.name == "note").unwrap();
        cols[i] = ColumnRow {
            name: "note".into(),
            ..row
        };
        spec(Mode::TimestampOnly).finalizer(&cols)
    };
    let refused = |row: ColumnRow, why: &str| {
        let e = with_note(row).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported, "{e}");
        assert!(e.message().starts_with(BULK_COLUMN_TYPE_UNSUPPORTED), "{e}");
        assert!(e.message().contains("\"note\""), "{e}");
        assert!(e.message().contains(why), "{e}");
    };
    let accepted = |row: ColumnRow, path: LoadPath| {
        assert_eq!(load_path(&row), path, "{}", row.type_sql());
        with_note(row).expect("accepted");
    };
    let scaled = |ty: &str, scale: u8| ColumnRow {
        scale,
        ..col("note", ty, true, 8)
    };
    let coded = |ty: &str, len: i32, cp: u32| ColumnRow {
        code_page: Some(cp),
        collation_name: Some("Latin1_General_100_CI_AS".into()),
        ..col("note", ty, true, len)
    };
    // Bulk load: what tiberius 0.13's INSERT BULK declares and encodes exactly.
    for ty in [
        "bit",
        "tinyint",
        "smallint",
        "int",
        "bigint",
        "real",
        "float",
        "uniqueidentifier",
        "date",
        "money",
        "smallmoney",
        "datetime",
    ] {
        accepted(col("note", ty, true, 8), LoadPath::Bulk);
    }
    for scale in 0..=7 {
        accepted(scaled("datetime2", scale), LoadPath::Bulk);
    }
    accepted(scaled("time", 7), LoadPath::Bulk);
    accepted(scaled("datetimeoffset", 7), LoadPath::Bulk);
    accepted(col("note", "nvarchar", true, 4000), LoadPath::Bulk);
    accepted(col("note", "varbinary", true, 8000), LoadPath::Bulk);
    accepted(col("note", "binary", true, 32), LoadPath::Bulk);
    accepted(
        ColumnRow {
            precision: 38,
            scale: 10,
            ..col("note", "numeric", true, 17)
        },
        LoadPath::Bulk,
    );
    // Insert path: what the bulk load would declare or encode wrongly.
    for scale in 0..=6 {
        accepted(scaled("time", scale), LoadPath::Insert);
        accepted(scaled("datetimeoffset", scale), LoadPath::Insert);
    }
    accepted(col("note", "smalldatetime", true, 4), LoadPath::Insert);
    accepted(col("note", "nvarchar", true, 4002), LoadPath::Insert);
    accepted(col("note", "nvarchar", true, 8000), LoadPath::Insert);
    accepted(col("note", "nvarchar", true, -1), LoadPath::Insert);
    accepted(col("note", "nchar", true, 20), LoadPath::Insert);
    accepted(col("note", "nchar", true, 8000), LoadPath::Insert);
    accepted(col("note", "varbinary", true, -1), LoadPath::Insert);
    for cp in [
        65001, 874, 1250, 1251, 1252, 1253, 1254, 1255, 1256, 1257, 1258,
    ] {
        accepted(coded("varchar", 50, cp), LoadPath::Insert);
        accepted(coded("char", 10, cp), LoadPath::Insert);
        accepted(coded("varchar", -1, cp), LoadPath::Insert);
    }
    // One column on the insert path puts the whole table there.
    assert_eq!(table_load_path(&columns()), LoadPath::Bulk);
    let mut mixed = columns();
    mixed.push(col("big", "nvarchar", true, -1));
    assert_eq!(table_load_path(&mixed), LoadPath::Insert);
    // Refused, with the reason.
    for cp in [932, 936, 949, 950, 437, 850] {
        refused(coded("varchar", 50, cp), "code page");
    }
    refused(col("note", "varchar", true, 50), "no code page");
    refused(col("note", "xml", true, -1), "re-serializes");
    refused(col("note", "ntext", true, 16), "deprecated");
    refused(col("note", "text", true, 16), "deprecated");
    refused(col("note", "image", true, 16), "deprecated");
    refused(col("note", "sql_variant", true, 8016), "base type");
    refused(col("note", "timestamp", false, 8), "written by the server");
    for ty in ["geography", "geometry", "hierarchyid", "sysname"] {
        refused(col("note", ty, true, -1), "no exact mapping");
    }
    refused(scaled("datetime2", 8), "no exact mapping");

    // Reserved words and irregular names load (tiberius 0.13 bracket-quotes the INSERT BULK
    // column list); only a name no SQL Server column can have is refused, without I/O.
    for name in [
        "order",
        "Key",
        "USER",
        "percent",
        "file",
        "1tenant",
        "two words",
        "a]b",
    ] {
        let mut s = spec(Mode::TimestampOnly);
        s.business[1] = name.into();
        s.check_plan().unwrap_or_else(|e| panic!("{name:?}: {e}"));
    }
    for name in [String::new(), "x".repeat(129)] {
        let mut s = spec(Mode::TimestampOnly);
        s.keys[0] = name.clone();
        let e = s
            .check_plan()
            .expect_err("no SQL Server column has this name");
        assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported, "{name:?}");
        assert!(e.message().starts_with(BULK_COLUMN_NAME_UNSUPPORTED), "{e}");
    }
    // ODBC's reserved words are ordinary identifiers in T-SQL: common column names pass.
    for name in [
        "date", "value", "level", "name", "status", "year", "time", "count",
    ] {
        let mut s = spec(Mode::TimestampOnly);
        s.business[1] = name.into();
        s.check_plan().expect(name);
    }
    spec(Mode::TimestampOnly).check_plan().expect("plain names");
}

/// Error codes as documented: a duplicate key in the bulk load is the snapshot's duplicate
/// key, a null key the snapshot's null key, an evicted or lost staging session a lost staging
/// authority — whether the lease check, the staging DDL or the bulk load saw it.
#[test]
fn staging_failures_keep_their_documented_codes() {
    use dpone_adapter_mssql::conn::ConnError;
    use dpone_adapter_mssql::session::{LEASE_EVICTION_ERRORS, lease_error};
    let server = |number| ConnError::Server {
        step: "bulk_load",
        number,
    };
    assert_eq!(
        lease_error(&server(2627)).code(),
        ErrorCode::SnapshotDuplicateKey
    );
    assert_eq!(
        lease_error(&server(2601)).code(),
        ErrorCode::SnapshotDuplicateKey
    );
    assert_eq!(lease_error(&server(515)).code(), ErrorCode::SnapshotNullKey);
    for n in LEASE_EVICTION_ERRORS {
        let e = lease_error(&server(*n));
        assert_eq!(e.code(), ErrorCode::TargetStagingAuthorityLost, "{n}");
        assert!(
            e.message()
                .starts_with("mssql_transaction.staging_lease_lost")
        );
    }
    assert_eq!(
        lease_error(&ConnError::Io(std::io::ErrorKind::ConnectionReset)).code(),
        ErrorCode::TargetStagingAuthorityLost
    );
    assert_eq!(
        lease_error(&server(1205)).code(),
        ErrorCode::TargetSerializationConflict
    );
    assert_eq!(
        lease_error(&server(8152)).code(),
        ErrorCode::TargetStatementFailed
    );
    // No server text (which can quote key values) reaches the message.
    assert_eq!(
        lease_error(&server(2627)).message(),
        "a key occurs twice in the staged payload"
    );
}

/// The staging columns take the target columns' collations, read from the catalog; a
/// collation name that could not be written into DDL is refused.
#[test]
fn staging_columns_take_the_target_collation() {
    let mut cols = columns();
    cols[3].collation_name = Some("SQL_Latin1_General_CP1_CI_AS".into());
    let f = spec(Mode::TimestampOnly).finalizer(&cols).expect("valid");
    assert_eq!(
        f.business[1].collation.as_deref(),
        Some("SQL_Latin1_General_CP1_CI_AS")
    );
    assert!(
        f.stage_rows_ddl()
            .contains("[note] nvarchar(200) COLLATE SQL_Latin1_General_CP1_CI_AS NULL")
    );
    cols[3].collation_name = Some("bad name]".into());
    assert_eq!(
        spec(Mode::TimestampOnly)
            .finalizer(&cols)
            .expect_err("refused")
            .code(),
        ErrorCode::TargetTableInvalid
    );
}

/// The adapter follows the delete-mode plan's rules, not only its mode: the shipped policy's
/// plan of every mode is exactly what the finalizer executes, and a plan that asks for anything
/// else is refused at `check`/`plan` (no I/O) with the delete-mode code.
#[test]
fn the_delete_plan_rules_are_followed_or_refused() {
    use dpone_adapter_mssql::target::{DELETE_PLAN_UNSUPPORTED, check_delete_plan, executed_plan};
    use dpone_policy_model::delete_mode::{
        ActivePredicate, ColumnRole, FlagEffect, KeyState, RowAction, TimestampEffect,
    };
    for mode in [
        Mode::TimestampOnly,
        Mode::TimestampAndFlag,
        Mode::FlagOnly,
        Mode::HardDelete,
    ] {
        let shipped = dpone_policy_delete_mode::plan_for(mode);
        assert_eq!(shipped, executed_plan(mode), "{mode:?}");
        check_delete_plan(&shipped).unwrap();
        spec(mode).check_plan().unwrap();
    }
    let refused = |plan: dpone_policy_model::delete_mode::DeletePlan, what: &str| {
        let e = check_delete_plan(&plan).unwrap_err();
        assert!(e.starts_with(DELETE_PLAN_UNSUPPORTED), "{e}");
        assert!(e.contains(what), "{e}");
        let mut s = spec(plan.mode);
        s.plan = plan;
        assert_eq!(
            s.check_plan().unwrap_err().code(),
            ErrorCode::DeleteModeRejected
        );
    };
    let base = || dpone_policy_delete_mode::plan_for(Mode::TimestampOnly);
    let with_rule =
        |state: KeyState, f: &dyn Fn(&mut dpone_policy_model::delete_mode::Classification)| {
            let mut p = base();
            for r in &mut p.rules {
                if r.state == state {
                    f(r);
                }
            }
            p
        };
    // A soft delete that would not keep the first detection time of already-deleted rows.
    refused(
        with_rule(KeyState::StillMissing, &|r| {
            r.deleted_at = TimestampEffect::SetDetectionTime;
        }),
        "StillMissing",
    );
    // Identical rows rewritten (no strict no-op), changed rows reactivated, missing rows
    // hard-deleted under a soft mode.
    refused(
        with_rule(KeyState::Identical, &|r| r.write_business_columns = true),
        "Identical",
    );
    refused(
        with_rule(KeyState::Changed, &|r| {
            r.deleted_at = TimestampEffect::Clear
        }),
        "Changed",
    );
    refused(
        with_rule(KeyState::Missing, &|r| r.action = RowAction::HardDelete),
        "Missing",
    );
    refused(
        with_rule(KeyState::Reappeared, &|r| {
            r.deleted_flag = FlagEffect::SetFalse
        }),
        "Reappeared",
    );
    // A rule missing or duplicated.
    let mut p = base();
    p.rules.retain(|r| r.state != KeyState::NewInSource);
    refused(p, "NewInSource");
    let mut p = base();
    let dup = p.rules[0].clone();
    p.rules.push(dup);
    refused(p, "NewInSource");
    // Other reserved columns or another active predicate.
    let mut p = base();
    p.columns[0].role = ColumnRole::DeletedFlagStored;
    refused(p, "reserved columns");
    let mut p = base();
    p.active_predicate = ActivePredicate::EveryRow;
    refused(p, "active predicate");
}

/// The insert writes the deletion marker as active, as the plan's insert rule says, instead of
/// leaving it to a column default.
#[test]
fn insert_writes_the_marker_as_active() {
    let mut cols = columns();
    let f = spec(Mode::TimestampOnly).finalizer(&cols).unwrap();
    assert!(
        f.insert()
            .contains("[__dpone__deleted_at], [__dpone__updated_at]) ")
    );
    assert!(f.insert().contains("s.[payload], NULL, @P1 FROM"));
    cols.retain(|c| c.name != "__dpone__deleted_at");
    cols.push(col("__dpone__is_deleted", "bit", false, 1));
    let f = spec(Mode::FlagOnly).finalizer(&cols).unwrap();
    assert!(
        f.insert()
            .contains("[__dpone__is_deleted], [__dpone__updated_at]) ")
    );
    assert!(f.insert().contains("s.[payload], 0, @P1 FROM"));
}

/// Staging (on the lease, committed outside the run transaction) comes before the run
/// transaction and its application lock, so the lock is held for the apply only; the engine
/// orders `stage` before `lock_target` for this port.
#[test]
fn staging_precedes_the_run_transaction_and_its_lock() {
    use dpone_adapter_mssql::target::MssqlSession;
    const { assert!(MssqlSession::STAGES_BEFORE_LOCK) };
}
