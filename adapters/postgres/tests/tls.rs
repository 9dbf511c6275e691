//! TLS to PostgreSQL on a real server presenting a certificate of the test CA that
//! `.ci/start-postgres` generates (subjectAltName `DNS:localhost` only): each `sslmode`, the
//! pinned CA bundle, the default, and a whole run over `verify-full`.
//!
//! Tier: real PostgreSQL integration.

mod support;

use dpone_adapter_postgres::conn::connect;
use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::registry::{Endpoint, SslMode};
use support::{Fixture, Options, TestDb, prepare};

fn ca(name: &str) -> String {
    support::env_file_value(name).unwrap_or_else(|| {
        support::skip(&format!(
            "{name} is not set and not in target/dpone-test-pg.env: rerun .ci/start-postgres"
        ))
    })
}

fn endpoint(db: &TestDb, host: &str, mode: Option<SslMode>, root: Option<String>) -> Endpoint {
    let mut ep = db.endpoint();
    ep.spec.host = host.to_owned();
    ep.spec.sslmode = mode;
    ep.spec.sslrootcert = root;
    ep
}

/// Connects and reports whether the session is encrypted, or the failure's code and message.
async fn session(ep: &Endpoint) -> Result<bool, (ErrorCode, String)> {
    let conn = connect(ep, ErrorCode::SourceConnect, "dpone-host tls test")
        .await
        .map_err(|e| (e.code(), e.to_string()))?;
    let row = conn
        .client
        .query_one(
            "SELECT ssl FROM pg_catalog.pg_stat_ssl WHERE pid = pg_catalog.pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    Ok(row.get(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn each_sslmode_against_the_test_ca() {
    let db = TestDb::create("tls").await.expect("database");
    let test_ca = ca("DPONE_TEST_PG_CA");
    let other_ca = ca("DPONE_TEST_PG_OTHER_CA");
    use SslMode::*;
    let ok = |tls: bool| Ok::<bool, (ErrorCode, String)>(tls);

    // Plain connections keep working.
    assert_eq!(
        session(&endpoint(&db, "127.0.0.1", Some(Disable), None)).await,
        ok(false)
    );
    // Encryption without verification.
    assert_eq!(
        session(&endpoint(&db, "127.0.0.1", Some(Require), None)).await,
        ok(true)
    );
    // verify-ca: the chain, any name.
    let verify_ca = endpoint(&db, "127.0.0.1", Some(VerifyCa), Some(test_ca.clone()));
    assert_eq!(session(&verify_ca).await, ok(true));
    // verify-full: the chain and the host name (the certificate names localhost only).
    let full = endpoint(&db, "localhost", Some(VerifyFull), Some(test_ca.clone()));
    assert_eq!(session(&full).await, ok(true));

    let refusals = [
        (
            endpoint(&db, "127.0.0.1", Some(VerifyFull), Some(test_ca.clone())),
            ErrorCode::SourceConnect,
            "does not name the host",
        ),
        (
            endpoint(&db, "localhost", Some(VerifyFull), Some(other_ca.clone())),
            ErrorCode::SourceConnect,
            "not signed by a trusted CA",
        ),
        (
            endpoint(&db, "127.0.0.1", Some(VerifyCa), Some(other_ca.clone())),
            ErrorCode::SourceConnect,
            "not signed by a trusted CA",
        ),
        (
            endpoint(
                &db,
                "localhost",
                Some(VerifyFull),
                Some("/nonexistent/dpone-ca.pem".into()),
            ),
            ErrorCode::TlsRootCertInvalid,
            "sslrootcert cannot be read",
        ),
    ];
    for (ep, code, why) in refusals {
        let (got, message) = session(&ep).await.expect_err("refused");
        assert_eq!(got, code, "{message}");
        assert!(message.contains(why), "{message}");
        for secret in [
            &test_ca,
            &other_ca,
            "/nonexistent",
            "127.0.0.1",
            "localhost",
        ] {
            assert!(!message.contains(secret), "leaks {secret}: {message}");
        }
        if let Some(pw) = db.password() {
            assert!(!message.contains(&pw));
        }
    }

    // The default for a host name is verify-full against the system's roots, which do not
    // hold the test CA: refused, never a silent plain or unverified session.
    let default = endpoint(&db, "localhost", None, None);
    assert_eq!(default.spec.effective_sslmode(), VerifyFull);
    let (got, message) = session(&default).await.expect_err("default verifies");
    assert!(
        got == ErrorCode::SourceConnect || got == ErrorCode::TlsRootCertInvalid,
        "{got:?}: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_run_over_verify_full_with_a_pinned_ca() {
    let f = Fixture::new("tlsrun", Options::default())
        .await
        .expect("fixture");
    f.src_sql("INSERT INTO public.items VALUES (1, 'a', 1, 1), (2, 'b', 2, 2)")
        .await;
    let test_ca = ca("DPONE_TEST_PG_CA");
    let registry = f
        .registry_yaml
        .replace("host: '127.0.0.1'", "host: localhost")
        .replace(
            "sslmode: disable",
            &format!("sslmode: verify-full, sslrootcert: '{test_ca}'"),
        );
    assert!(!registry.contains("sslmode: disable"), "{registry}");
    let route = prepare(&f.manifest_yaml, &registry, &f.env).expect("route");
    let req = dpone_engine_xmin::RunRequest {
        invocation_id: support::new_invocation(),
        repair_authority_ref: None,
    };
    let mut target = dpone_adapter_postgres::target::PgTarget::for_route(&route).expect("target");
    let out = dpone_engine_xmin::run(
        &route,
        &req,
        &mut dpone_adapter_postgres::source::PgSource::new(),
        &mut target,
        &f.store,
        &support::NativePolicies,
    )
    .await
    .expect("run over TLS");
    assert_eq!(out.receipt.metrics.inserted, 2);

    // The same registry with an unrelated CA pinned is refused at connect.
    let other = registry.replace(&test_ca, &ca("DPONE_TEST_PG_OTHER_CA"));
    let route = prepare(&f.manifest_yaml, &other, &f.env).expect("route");
    let mut target = dpone_adapter_postgres::target::PgTarget::for_route(&route).expect("target");
    let err = dpone_engine_xmin::run(
        &route,
        &dpone_engine_xmin::RunRequest {
            invocation_id: support::new_invocation(),
            repair_authority_ref: None,
        },
        &mut dpone_adapter_postgres::source::PgSource::new(),
        &mut target,
        &f.store,
        &support::NativePolicies,
    )
    .await
    .expect_err("an unrelated CA is refused");
    assert!(
        matches!(
            err.code(),
            ErrorCode::TargetConnect | ErrorCode::SourceConnect
        ),
        "{err}"
    );
}
