//! The one opener: no TLS mode downgrades to plaintext or sends a password in clear (fake
//! server), URL TLS parameters that contradict the mode are refused, CA bundles are read
//! bounded, and against the real test server verify-full holds with its CA and fails with
//! another.

use dpone_pg_tls::testing::PlaintextTrap;
use dpone_pg_tls::{ConnectError, Mode, config_from_url, connect};
use std::time::{Duration, Instant};
use tokio_postgres::Config;

const PASSWORD: &str = "s3cret-never-in-clear";

fn trap_config(trap: &PlaintextTrap) -> Config {
    let mut c = Config::new();
    c.host("localhost")
        .port(trap.port())
        .user("u")
        .dbname("d")
        .password(PASSWORD)
        .connect_timeout(Duration::from_secs(5));
    c
}

async fn wait_finished(trap: &PlaintextTrap, n: usize) {
    let until = Instant::now() + Duration::from_secs(10);
    while trap.finished() < n && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn no_tls_mode_falls_back_to_plaintext_even_when_the_config_prefers() {
    for mode in [Mode::Require, Mode::VerifyCa, Mode::VerifyFull] {
        let trap = PlaintextTrap::start();
        // The caller's own config says `prefer`; the mode decides.
        let mut cfg = trap_config(&trap);
        cfg.ssl_mode(tokio_postgres::config::SslMode::Prefer);
        let Err(e) = connect(&cfg, mode, None).await else {
            panic!("refused")
        };
        assert_eq!(e.code(), "DPONE_PG_TLS_FAILED", "{mode:?}: {e}");
        wait_finished(&trap, 1).await;
        assert!(!trap.saw(PASSWORD.as_bytes()), "{mode:?}: password sent");
        assert!(!trap.saw(b"user\0u\0"), "{mode:?}: startup sent in clear");
    }
}

#[tokio::test]
async fn the_trap_sees_a_password_sent_in_clear() {
    // The fake server detects a cleartext password: under `disable` (chosen plaintext) the
    // driver sends it, so the assertions above can fail.
    let trap = PlaintextTrap::start();
    let _ = connect(&trap_config(&trap), Mode::Disable, None).await;
    wait_finished(&trap, 1).await;
    assert!(trap.saw(PASSWORD.as_bytes()));
}

#[test]
fn url_tls_parameters_that_contradict_the_mode_are_refused() {
    let conflict = |url: &str, mode| match config_from_url(url, mode) {
        Err(ConnectError::UrlConflict(k)) => Some(k),
        Err(e) => panic!("{url}: {e}"),
        Ok(_) => None,
    };
    let base = "postgres://u:p@db.example:5432/d";
    assert_eq!(
        conflict(&format!("{base}?sslmode=disable"), Mode::VerifyFull),
        Some("sslmode")
    );
    assert_eq!(
        conflict(&format!("{base}?sslmode=prefer"), Mode::VerifyFull),
        Some("sslmode")
    );
    assert_eq!(
        conflict(&format!("{base}?sslmode=require"), Mode::VerifyFull),
        Some("sslmode")
    );
    assert_eq!(
        conflict(&format!("{base}?sslmode=require"), Mode::Disable),
        Some("sslmode")
    );
    assert_eq!(
        conflict(&format!("{base}?channel_binding=disable"), Mode::Require),
        Some("channel_binding")
    );
    assert_eq!(
        conflict(&format!("{base}?%73slmode=disable"), Mode::Require),
        Some("sslmode")
    );
    assert_eq!(
        conflict(&format!("{base}?sslnegotiation=direct"), Mode::Require),
        Some("sslnegotiation")
    );
    assert_eq!(
        conflict(&format!("{base}?sslrootcert=/x.pem"), Mode::VerifyFull),
        Some("sslrootcert")
    );
    assert_eq!(
        conflict("host=db.example user=u sslmode = 'prefer'", Mode::VerifyCa),
        Some("sslmode")
    );
    assert_eq!(
        conflict("host=db.example sslmode=disable", Mode::Require),
        Some("sslmode")
    );
    // Agreeing parameters and none at all are accepted.
    assert_eq!(
        conflict(&format!("{base}?sslmode=require"), Mode::Require),
        None
    );
    assert_eq!(
        conflict(&format!("{base}?channel_binding=require"), Mode::VerifyFull),
        None
    );
    assert_eq!(
        conflict("host=db.example sslmode=disable", Mode::Disable),
        None
    );
    assert_eq!(conflict(base, Mode::VerifyFull), None);
    let Err(e) = config_from_url("postgres://u@h/d?nonsense=1", Mode::Require) else {
        panic!("bad")
    };
    assert_eq!(e.code(), "DPONE_PG_URL_INVALID");
}

#[tokio::test]
async fn a_fifo_or_dev_zero_as_sslrootcert_is_refused_promptly() {
    let dir = tempfile::tempdir().expect("dir");
    let fifo = dir.path().join("ca.pem");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo");
    let big = dir.path().join("big.pem");
    std::fs::write(
        &big,
        vec![b'A'; (dpone_pg_tls::MAX_CA_BUNDLE_BYTES + 1) as usize],
    )
    .expect("write");
    let cfg = Config::new();
    for path in [
        fifo.to_str().expect("utf-8"),
        "/dev/zero",
        big.to_str().expect("utf-8"),
    ] {
        let started = Instant::now();
        let Err(e) = tokio::time::timeout(
            Duration::from_secs(10),
            connect(&cfg, Mode::VerifyFull, Some(path)),
        )
        .await
        .expect("finishes promptly") else {
            panic!("refused")
        };
        assert_eq!(e.code(), "DPONE_PG_TLS_ROOT_CERT_INVALID", "{e}");
        assert!(!e.to_string().contains(path), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}

/// The live server: its URL parts and the CA files `.ci/start-postgres` wrote.
/// Each value comes from the environment, else from `target/dpone-test-pg.env` (CI exports only
/// the URL).
fn live() -> Option<(Config, String, String)> {
    let url = live_value("DPONE_TEST_PG_URL")?;
    let ca = live_value("DPONE_TEST_PG_CA")?;
    let other = live_value("DPONE_TEST_PG_OTHER_CA")?;
    let mut c: Config = url.parse().expect("DPONE_TEST_PG_URL parses");
    // The server certificate names `localhost` only.
    c.host("localhost").connect_timeout(Duration::from_secs(10));
    Some((c, ca, other))
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn live_verify_full_connects_with_the_ca_and_binds_the_channel() {
    let (cfg, ca, other) =
        live().expect("the configured server names DPONE_TEST_PG_URL, _CA and _OTHER_CA");
    let (client, task) = connect(&cfg, Mode::VerifyFull, Some(&ca))
        .await
        .expect("verify-full");
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("query");
    assert!(row.get::<_, bool>(0), "the session is TLS");
    task.abort();
    let Err(e) = connect(&cfg, Mode::VerifyFull, Some(&other)).await else {
        panic!("wrong CA")
    };
    assert_eq!(e.code(), "DPONE_PG_TLS_FAILED", "{e}");
    assert!(e.to_string().contains("not signed by a trusted CA"), "{e}");
}

fn live_value(name: &str) -> Option<String> {
    if let Ok(v) = std::env::var(name)
        && !v.is_empty()
    {
        return Some(v);
    }
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).ok()?;
    let prefix = format!("export {name}=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()).map(str::to_owned))
}
