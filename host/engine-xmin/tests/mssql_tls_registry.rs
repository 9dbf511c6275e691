//! The registry's TLS options on SQL Server connections, checked without I/O: `sslrootcert`
//! (an absolute path; the pinned CA) is accepted, together with `trust_server_certificate` it
//! is refused (mutually exclusive), and `sslmode` stays a PostgreSQL option. Every refusal is
//! `DPONE_XMIN_REGISTRY_INVALID` and names no path.

use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::registry::Registry;

const MSSQL_REGISTRY: &str = include_str!("../../../fixtures/xmin/mssql/registry.yaml");

const TARGET: &str =
    "endpoint: {host: sql.internal, port: 1433, database: DWH, user: dpone_loader}";

fn with_target(endpoint: &str, trust_server_certificate: bool) -> String {
    let mut endpoint = endpoint.to_owned();
    if trust_server_certificate {
        endpoint.push_str("\n    trust_server_certificate: true");
    }
    assert!(MSSQL_REGISTRY.contains(TARGET));
    MSSQL_REGISTRY.replacen(TARGET, &endpoint, 1)
}

fn refused(text: &str) -> String {
    let e = Registry::from_yaml(text).expect_err("must be refused");
    assert_eq!(e.code(), ErrorCode::RegistryInvalid, "{e}");
    let message = e.message().to_owned();
    assert!(!message.contains("/etc/dpone"), "{message}");
    message
}

#[test]
fn a_pinned_ca_is_accepted_on_a_sql_server_connection() {
    let r = Registry::from_yaml(&with_target(
        "endpoint: {host: sql.internal, port: 1433, database: DWH, user: dpone_loader, sslrootcert: /etc/dpone/mssql-ca.pem}",
        false,
    ))
    .expect("pinned CA");
    let c = &r.connections["mssql_target"];
    assert_eq!(
        c.endpoint.sslrootcert.as_deref(),
        Some("/etc/dpone/mssql-ca.pem")
    );
    assert!(!c.trust_server_certificate);
    // Without either, validation against the system's roots (the fixture as shipped).
    let r = Registry::from_yaml(MSSQL_REGISTRY).expect("fixture");
    assert!(r.connections["mssql_target"].endpoint.sslrootcert.is_none());
    Registry::from_yaml(&with_target(TARGET, true)).expect("trust_server_certificate alone");
}

#[test]
fn a_pinned_ca_and_trust_server_certificate_are_mutually_exclusive() {
    let m = refused(&with_target(
        "endpoint: {host: sql.internal, port: 1433, database: DWH, user: dpone_loader, sslrootcert: /etc/dpone/mssql-ca.pem}",
        true,
    ));
    assert!(m.contains("mutually exclusive"), "{m}");
}

#[test]
fn sql_server_tls_options_are_checked() {
    let m = refused(&with_target(
        "endpoint: {host: sql.internal, port: 1433, database: DWH, user: dpone_loader, sslrootcert: mssql-ca.pem}",
        false,
    ));
    assert!(m.contains("absolute path"), "{m}");
    let m = refused(&with_target(
        "endpoint: {host: sql.internal, port: 1433, database: DWH, user: dpone_loader, sslmode: verify-full}",
        false,
    ));
    assert!(m.contains("sslmode is a PostgreSQL option"), "{m}");
}
