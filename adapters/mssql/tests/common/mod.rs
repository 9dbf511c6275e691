//! Shared sample coordinates for the statement tests.
#![allow(dead_code)]

use dpone_adapter_mssql::provision;
use dpone_adapter_mssql::sql::{
    self, BusinessColumn, DeleteMode, Finalizer, KeyColumn, KeyType, MissingAction, StateNames,
    ThreePart,
};

pub fn finalizer(mode: DeleteMode, missing: MissingAction) -> Finalizer {
    Finalizer {
        target: ThreePart::new("DWH", "dbo", "orders"),
        stage_rows: ThreePart::new("DWH_Stage", "dpone", "rows_0123456789abcdef"),
        stage_keys: ThreePart::new("DWH_Stage", "dpone", "keys_0123456789abcdef"),
        keys: vec![
            KeyColumn {
                name: "tenant".into(),
                ty: KeyType::Text { max_chars: 64 },
            },
            KeyColumn {
                name: "id".into(),
                ty: KeyType::BigInt,
            },
        ],
        business: vec![
            BusinessColumn {
                name: "amount".into(),
                type_sql: "decimal(18,2)".into(),
                collation: None,
            },
            BusinessColumn {
                name: "note".into(),
                type_sql: "nvarchar(200)".into(),
                collation: Some("SQL_Latin1_General_CP1_CI_AS".into()),
            },
        ],
        mode,
        missing,
        state: StateNames::defaults("DWH_State", "dpone"),
    }
}

pub const CASES: [(&str, DeleteMode, MissingAction); 4] = [
    (
        "timestamp_only",
        DeleteMode::TimestampOnly,
        MissingAction::SoftDelete,
    ),
    (
        "timestamp_and_flag",
        DeleteMode::TimestampAndFlag,
        MissingAction::SoftDelete,
    ),
    ("flag_only", DeleteMode::FlagOnly, MissingAction::SoftDelete),
    ("hard_delete", DeleteMode::Hard, MissingAction::HardDelete),
];

/// Every statement the crate can send or ship, named.
pub fn all_statements() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = sql::fixed()
        .into_iter()
        .map(|(n, s)| (n.to_owned(), s.to_owned()))
        .collect();
    for (case, mode, missing) in CASES {
        let f = finalizer(mode, missing);
        out.push((
            format!("{case}/target_ddl"),
            sql::target_ddl(&f.target, &f.keys, &f.business, mode),
        ));
        for (n, s) in f.all() {
            out.push((format!("{case}/{n}"), s));
        }
    }
    let mut key_only = finalizer(DeleteMode::FlagOnly, MissingAction::SoftDelete);
    key_only.business.clear();
    for (n, s) in key_only.all() {
        out.push((format!("key_only/{n}"), s));
    }
    for (i, b) in provision::batches(provision::STATE_DDL)
        .into_iter()
        .enumerate()
    {
        out.push((format!("state_ddl/batch{i}"), b));
    }
    for (i, b) in provision::batches(provision::MIGRATE_V1_TO_V2)
        .into_iter()
        .enumerate()
    {
        out.push((format!("migrate_v1_to_v2/batch{i}"), b));
    }
    out
}
