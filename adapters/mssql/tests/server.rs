//! Which TDS servers the target accepts: the classification of the server's answers to
//! `SERVER_FACTS`, asked before any pin, staging or write (tier: statement/unit, no server).

use dpone_adapter_mssql::server::{
    MIN_MAJOR_VERSION, SERVER_EDITION_UNSUPPORTED, SERVER_NOT_SQL_SERVER,
    SERVER_VERSION_UNSUPPORTED, ServerClass, ServerFacts, classify,
};
use dpone_adapter_mssql::sql;
use dpone_adapter_mssql::target::pin_error;
use dpone_engine_xmin::ErrorCode;

fn sql_server(version: &str, edition: i32) -> ServerFacts {
    ServerFacts {
        babelfish: None,
        version_text: Some(format!(
            "Microsoft SQL Server 2022 (RTM-CU14) (KB5038325) - {version} (X64) \n\tJul  9 2024 16:48:52 \n\tCopyright (C) 2022 Microsoft Corporation\n\tDeveloper Edition (64-bit) on Linux (Ubuntu 22.04.4 LTS) <X64>"
        )),
        product_version: Some(version.into()),
        engine_edition: Some(edition),
    }
}

/// Babelfish for PostgreSQL 4.x as it answers by default.
fn babelfish() -> ServerFacts {
    ServerFacts {
        babelfish: Some("1".into()),
        version_text: Some(
            "Babelfish for PostgreSQL with SQL Server Compatibility - 12.0.2000.8\nNov 20 2024 10:00:00\nCopyright (c) Amazon Web Services\nPostgreSQL 16.4 on x86_64-pc-linux-gnu (Babelfish 4.3.0)".into(),
        ),
        product_version: Some("12.0.2000.8".into()),
        engine_edition: Some(3),
    }
}

fn refused(facts: &ServerFacts) -> String {
    classify(facts).expect_err("must be refused").code
}

#[test]
fn supported_sql_server_versions_pass() {
    for (v, major) in [
        ("13.0.7037.1", 13),
        ("14.0.3465.1", 14),
        ("15.0.4385.2", 15),
        ("16.0.4135.4", 16),
        ("17.0.1000.7", 17),
    ] {
        for edition in 1..=4 {
            assert_eq!(
                classify(&sql_server(v, edition)).unwrap(),
                ServerClass::SqlServer { major },
                "{v} edition {edition}"
            );
        }
    }
    assert_eq!(MIN_MAJOR_VERSION, 13);
}

#[test]
fn babelfish_is_refused_and_pointed_to_the_postgres_target() {
    let e = classify(&babelfish()).unwrap_err();
    assert_eq!(e.code, SERVER_NOT_SQL_SERVER);
    assert!(e.message.contains("Babelfish"), "{}", e.message);
    assert!(e.message.contains("PostgreSQL target"), "{}", e.message);
    // Babelfish can be told to report any SQL Server version and banner
    // (babelfishpg_tds.product_version, babelfishpg_tsql.version): the property still tells.
    let mut spoofed = sql_server("16.0.4135.4", 3);
    spoofed.babelfish = Some("1".into());
    assert_eq!(refused(&spoofed), SERVER_NOT_SQL_SERVER);
    // And a banner that names Babelfish is enough on its own.
    let mut banner = babelfish();
    banner.babelfish = None;
    assert_eq!(refused(&banner), SERVER_NOT_SQL_SERVER);
    // The engine code is the server refusal, with the detail code first.
    let x = pin_error(&e);
    assert_eq!(x.code(), ErrorCode::TargetServerUnsupported);
    assert!(x.message().starts_with(SERVER_NOT_SQL_SERVER));
}

#[test]
fn other_tds_servers_are_refused() {
    let mut other = sql_server("16.0.4135.4", 3);
    other.version_text = Some("Adaptive Server Enterprise/16.0".into());
    assert_eq!(refused(&other), SERVER_NOT_SQL_SERVER);
    other.version_text = None;
    assert_eq!(refused(&other), SERVER_NOT_SQL_SERVER);
    // `SERVERPROPERTY('Babelfish')` = 0 is not Babelfish.
    let mut zero = sql_server("16.0.4135.4", 3);
    zero.babelfish = Some("0".into());
    assert!(classify(&zero).is_ok());
}

#[test]
fn older_sql_server_is_refused_with_the_minimum() {
    for v in ["12.0.6024.0", "11.0.7001.0", "10.50.6000.34"] {
        let e = classify(&sql_server(v, 3)).unwrap_err();
        assert_eq!(e.code, SERVER_VERSION_UNSUPPORTED, "{v}");
        assert!(e.message.contains("2016"), "{}", e.message);
    }
    let mut unreadable = sql_server("16.0.4135.4", 3);
    unreadable.product_version = None;
    assert_eq!(refused(&unreadable), SERVER_VERSION_UNSUPPORTED);
    unreadable.product_version = Some("sixteen".into());
    assert_eq!(refused(&unreadable), SERVER_VERSION_UNSUPPORTED);
    assert_eq!(
        pin_error(&classify(&sql_server("12.0.6024.0", 3)).unwrap_err()).code(),
        ErrorCode::TargetServerUnsupported
    );
}

#[test]
fn editions_without_cross_database_transactions_are_refused() {
    // Azure SQL Database (5), Synapse dedicated (6), SQL Edge (9), Synapse serverless (11).
    for edition in [5, 6, 9, 11, 12] {
        let mut f = sql_server("12.0.2000.8", edition);
        f.version_text = Some("Microsoft SQL Azure (RTM) - 12.0.2000.8".into());
        assert_eq!(refused(&f), SERVER_EDITION_UNSUPPORTED, "{edition}");
    }
    let mut none = sql_server("16.0.4135.4", 3);
    none.engine_edition = None;
    assert_eq!(refused(&none), SERVER_EDITION_UNSUPPORTED);
    // Azure SQL Managed Instance reports 12.0.2000.8 but is an evergreen engine.
    let mut mi = sql_server("12.0.2000.8", 8);
    mi.version_text = Some("Microsoft SQL Azure (RTM) - 12.0.2000.8".into());
    assert_eq!(classify(&mi).unwrap(), ServerClass::ManagedInstance);
}

#[test]
fn the_server_is_asked_about_itself_first() {
    let fixed = sql::fixed();
    assert_eq!(fixed[0].0, "server_facts");
    for property in [
        "'Babelfish'",
        "@@VERSION",
        "'ProductVersion'",
        "'EngineEdition'",
    ] {
        assert!(sql::SERVER_FACTS.contains(property), "{property}");
    }
}
