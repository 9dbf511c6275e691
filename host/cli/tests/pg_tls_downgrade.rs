//! The control store's connection never downgrades: a fake server that answers `N` to the TLS
//! request and asks for a cleartext password never receives the password, from
//! `campaign status` under `--store-sslmode verify-full --store-sslrootcert` and under the
//! default sslmode; a URL whose own sslmode contradicts the option is refused before any
//! connection.

use dpone_pg_tls::testing::PlaintextTrap;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const PASSWORD: &str = "store-pw-never-in-clear";
/// The SSLRequest message: length 8, code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

fn status(url: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .args([
            "campaign",
            "status",
            "--grant-id",
            "00000000-0000-4000-8000-000000000001",
            "--phase",
            "execution",
            "--store-url-env",
            "DPONE_TEST_TRAP_STORE_URL",
        ])
        .args(extra)
        .env("DPONE_TEST_TRAP_STORE_URL", url)
        .output()
        .expect("dpone-host runs")
}

/// A PEM CA certificate for `--store-sslrootcert`: the test server's CA when configured, else
/// one made with `openssl` (`None` when neither is available).
fn some_ca(dir: &std::path::Path) -> Option<String> {
    if let Ok(ca) = std::env::var("DPONE_TEST_PG_CA") {
        return Some(ca);
    }
    let (key, pem) = (dir.join("ca.key"), dir.join("ca.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
        ])
        .args([
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=dpone trap test CA",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&pem)
        .output()
        .ok()?;
    made.status
        .success()
        .then(|| pem.to_str().expect("utf-8").to_owned())
}

fn assert_refused_without_password(trap: &PlaintextTrap, out: &Output, what: &str) {
    let until = Instant::now() + Duration::from_secs(10);
    while trap.finished() < 1 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{what}: {stderr}");
    assert!(
        trap.saw(&SSL_REQUEST),
        "{what}: the store asked for TLS: {stderr}"
    );
    assert!(
        !trap.saw(PASSWORD.as_bytes()),
        "{what}: the password was sent in clear"
    );
    assert!(
        !trap.saw(b"dpone_np_control"),
        "{what}: a query was sent in clear"
    );
    assert!(
        stderr.contains("DPONE_NP_STORE_UNAVAILABLE"),
        "{what}: {stderr}"
    );
    assert!(stderr.contains("TLS"), "{what}: {stderr}");
    assert!(!stderr.contains(PASSWORD), "{what}: {stderr}");
    assert!(
        !stderr.contains(&trap.port().to_string()),
        "{what}: {stderr}"
    );
}

fn trap_url(trap: &PlaintextTrap) -> String {
    format!("postgres://np_user:{PASSWORD}@localhost:{}/np", trap.port())
}

#[test]
fn verify_full_with_a_pinned_ca_never_sends_the_password_in_clear() {
    let dir = tempfile::tempdir().expect("dir");
    let ca = some_ca(dir.path()).expect("a CA file: DPONE_TEST_PG_CA, or openssl to make one");
    let trap = PlaintextTrap::start();
    let out = status(
        &trap_url(&trap),
        &["--store-sslmode", "verify-full", "--store-sslrootcert", &ca],
    );
    assert_refused_without_password(&trap, &out, "verify-full");
}

#[test]
fn the_default_sslmode_never_sends_the_password_in_clear() {
    let trap = PlaintextTrap::start();
    let out = status(&trap_url(&trap), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if stderr.contains("DPONE_NP_STORE_UNAVAILABLE") && stderr.contains("trust anchors") {
        // No system roots here: refused before connecting, which cannot downgrade either —
        // asserted, not skipped.
        assert!(!trap.saw(PASSWORD.as_bytes()));
        return;
    }
    assert_refused_without_password(&trap, &out, "default sslmode");
}

#[test]
fn require_never_sends_the_password_in_clear() {
    let trap = PlaintextTrap::start();
    let out = status(&trap_url(&trap), &["--store-sslmode", "require"]);
    assert_refused_without_password(&trap, &out, "require");
}

#[test]
fn a_url_sslmode_that_contradicts_the_option_is_refused_before_connecting() {
    let trap = PlaintextTrap::start();
    for (query, mode) in [
        ("?sslmode=disable", "verify-full"),
        ("?sslmode=prefer", "require"),
        ("?channel_binding=disable", "verify-ca"),
    ] {
        let out = status(
            &format!("{}{query}", trap_url(&trap)),
            &["--store-sslmode", mode],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{query}: {stderr}");
        assert!(
            stderr.contains("DPONE_CLI_CAMPAIGN_STORE_URL_TLS_CONFLICT"),
            "{query}: {stderr}"
        );
        assert!(!stderr.contains(PASSWORD), "{stderr}");
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(trap.received().is_empty(), "nothing connected");
}
