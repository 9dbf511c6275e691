//! The SQL Server target port's pure parts: the finalizer frozen from captured `sys.columns`
//! rows, the delete shape of each plan mode, the mapping of pin failures to engine codes, and
//! the invocation digest of contract v2.
//!
//! Tier: unit (no server). The port's I/O is exercised by `tests/engine_suites.rs` when
//! `DPONE_TEST_MSSQL_URL` is set.

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
        mode,
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
        col("payload", "varbinary", true, -1),
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
    assert_eq!(types, ["decimal(18,2)", "nvarchar(200)", "varbinary(max)"]);
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
