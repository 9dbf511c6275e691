//! Tier: CLI end-to-end. `dpone-host check --connections REGISTRY` without a manifest: strict
//! registry parsing, the live pin diff against a real PostgreSQL server (a fresh database per
//! test, pins discovered live), drift, unreachable connections, credentials and `--offline`.
//!
//! The server comes from `DPONE_TEST_PG_URL` or the env file `.ci/start-postgres` writes
//! (`target/dpone-test-pg.env`); without either the live tests are ignored with their SKIP reason
//! (`cfg(dpone_live_pg)`, set by `build.rs`), and with either a server that cannot be used fails
//! them. The tests that need no server always run.

use dpone_adapter_postgres::discover::{discover_database_pin, discover_source_authority};
use dpone_engine_xmin::registry::{
    AuthorityProfile, DatabasePin, Endpoint, EndpointSpec, Secret, SourceAuthority, SslMode,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_postgres::{Config, NoTls};

const PASSWORD_VAR: &str = "DPONE_CONNCHECK_TEST_PASSWORD";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn server_url() -> Option<String> {
    if let Ok(u) = std::env::var("DPONE_TEST_PG_URL")
        && !u.is_empty()
    {
        return Some(u);
    }
    let text = std::fs::read_to_string(root().join("target/dpone-test-pg.env")).ok()?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("export DPONE_TEST_PG_URL=")
            .map(str::to_owned)
    })
}

/// The live tests run only when a server is configured: one that cannot be used fails them.
fn skip(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh database with one table, dropped (with FORCE) on drop.
struct TestDb {
    name: String,
    cfg: Config,
}

impl TestDb {
    async fn create() -> Option<Self> {
        let Some(url) = server_url() else {
            skip("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let Ok(cfg) = Config::from_str(&url) else {
            skip("DPONE_TEST_PG_URL is not a valid connection URL");
        };
        let mut admin = cfg.clone();
        admin.dbname("postgres");
        let (client, conn) = match admin.connect(NoTls).await {
            Ok(x) => x,
            Err(_) => {
                skip("PostgreSQL server in DPONE_TEST_PG_URL is not reachable or refused the login")
            }
        };
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).expect("random");
        let name = format!(
            "dpone_t_connchk_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst),
            hex::encode(r)
        );
        client
            .batch_execute(&format!("CREATE DATABASE \"{name}\""))
            .await
            .expect("create database");
        let db = Self { name, cfg };
        let mut c = db.cfg.clone();
        c.dbname(&db.name);
        let (client, conn) = c
            .connect(NoTls)
            .await
            .expect("connect to the test database");
        tokio::spawn(async move {
            let _ = conn.await;
        });
        client
            .batch_execute("CREATE TABLE public.items (id bigint PRIMARY KEY, name text)")
            .await
            .expect("create table");
        Some(db)
    }

    fn host(&self) -> String {
        match self.cfg.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(tokio_postgres::config::Host::Unix(p)) => p.to_string_lossy().into_owned(),
            None => "127.0.0.1".into(),
        }
    }

    fn port(&self) -> u16 {
        self.cfg.get_ports().first().copied().unwrap_or(5432)
    }

    fn user(&self) -> String {
        self.cfg.get_user().unwrap_or("postgres").to_owned()
    }

    fn password(&self) -> String {
        self.cfg
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .unwrap_or_default()
    }

    fn endpoint(&self) -> Endpoint {
        Endpoint {
            spec: EndpointSpec {
                host: self.host(),
                port: self.port(),
                database: self.name.clone(),
                user: self.user(),
                sslmode: Some(SslMode::Disable),
                sslrootcert: None,
            },
            password: Some(Secret::new(self.password())),
        }
    }

    /// The YAML endpoint line of this database.
    fn endpoint_yaml(&self) -> String {
        format!(
            "{{host: '{}', port: {}, database: '{}', user: '{}', sslmode: disable}}",
            self.host(),
            self.port(),
            self.name,
            self.user()
        )
    }

    async fn pins(&self) -> (SourceAuthority, SourceAuthority, DatabasePin) {
        let ep = self.endpoint();
        let v1 =
            discover_source_authority(&ep, AuthorityProfile::PhysicalCluster, &["public.items"])
                .await
                .expect("discover v1 authority");
        let v2 =
            discover_source_authority(&ep, AuthorityProfile::CatalogIdentity, &["public.items"])
                .await
                .expect("discover v2 authority");
        let target = discover_database_pin(&ep)
            .await
            .expect("discover target pin");
        (v1, v2, target)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        let mut admin = self.cfg.clone();
        admin.dbname("postgres");
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok((client, conn)) = admin.connect(NoTls).await {
                    tokio::spawn(async move {
                        let _ = conn.await;
                    });
                    let _ = client
                        .batch_execute(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                        .await;
                }
            });
        })
        .join();
    }
}

fn source_yaml(name: &str, db: &TestDb, a: &SourceAuthority, extra_relations: &str) -> String {
    let v1 = match (&a.system_identifier, a.timeline) {
        (Some(s), Some(t)) => format!("      system_identifier: '{s}'\n      timeline: {t}\n"),
        _ => String::new(),
    };
    let (version, profile) = match a.profile {
        AuthorityProfile::PhysicalCluster => (1, "physical_cluster"),
        AuthorityProfile::CatalogIdentity => (2, "catalog_identity"),
    };
    let relations: String = a
        .relations
        .iter()
        .map(|(k, r)| {
            format!(
                "        {k}: {{schema_oid: {}, relation_oid: {}}}\n",
                r.schema_oid, r.relation_oid
            )
        })
        .collect();
    format!(
        "  {name}:
    kind: postgres_source
    endpoint: {ep}
    password_env: {PASSWORD_VAR}
    postgres_source_authority:
      version: {version}
      profile: {profile}
      recovery_role: primary
      database: {{name: '{dn}', oid: {doid}}}
      effective_principal: {{name: '{en}', oid: {eoid}}}
      session_principal: {{name: '{sn}', oid: {soid}}}
      relations:
{relations}{extra_relations}{v1}",
        ep = db.endpoint_yaml(),
        dn = a.database.name,
        doid = a.database.oid,
        en = a.effective_principal.name,
        eoid = a.effective_principal.oid,
        sn = a.session_principal.name,
        soid = a.session_principal.oid,
    )
}

fn target_yaml(name: &str, db: &TestDb, p: &DatabasePin) -> String {
    format!(
        "  {name}:
    kind: postgres_target
    endpoint: {ep}
    password_env: {PASSWORD_VAR}
    database_pin: {{name: '{n}', oid: {oid}, system_identifier: '{sys}'}}
",
        ep = db.endpoint_yaml(),
        n = p.name,
        oid = p.oid,
        sys = p.system_identifier,
    )
}

/// An mssql_target connection on a port where nothing listens.
fn unreachable_mssql_yaml(password_var: &str) -> String {
    format!(
        "  sql_target:
    kind: mssql_target
    endpoint: {{host: '127.0.0.1', port: 1, database: dwh, user: dpone_loader}}
    password_env: {password_var}
    trust_server_certificate: true
    database_authorities:
      dwh: {{database_id: 5, create_token: '2026-08-16T09:14:22.1233333', database_guid: '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0'}}
"
    )
}

fn registry(connections: &[String]) -> String {
    format!(
        "version: 1\nenvironment: ci\nconnections:\n{}",
        connections.concat()
    )
}

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Output {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or(Value::Null)
    }

    /// The failure's code: from the JSON error line, or, in text mode (`--output text`), from
    /// the human line `verdict: CODE: message`.
    fn error_code(&self) -> String {
        let line = self.stderr.lines().last().unwrap_or_default();
        serde_json::from_str::<Value>(line)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .or_else(|| {
                line.split(": ")
                    .nth(1)
                    .filter(|code| code.starts_with("DPONE_"))
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    }

    fn assert_no_leak(&self, secrets: &[&str]) {
        for s in secrets.iter().filter(|s| !s.is_empty()) {
            assert!(
                !self.stdout.contains(s) && !self.stderr.contains(s),
                "{s:?} leaked:\n{}\n{}",
                self.stdout,
                self.stderr
            );
        }
    }
}

fn run_cli(args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_dpone-host"))
        .current_dir(root())
        .env_remove("DPONE_CONNECTIONS")
        .env_remove(PASSWORD_VAR)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .expect("dpone-host runs");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_string_lossy().into_owned()
}

/// `(connection, field, status, code)` of every field of a JSON report.
fn fields(report: &Value) -> Vec<(String, String, String, Option<String>)> {
    let mut out = Vec::new();
    for c in report["connections"].as_array().into_iter().flatten() {
        for f in c["fields"].as_array().into_iter().flatten() {
            out.push((
                c["name"].as_str().unwrap_or_default().to_owned(),
                f["field"].as_str().unwrap_or_default().to_owned(),
                f["status"].as_str().unwrap_or_default().to_owned(),
                f["code"].as_str().map(str::to_owned),
            ));
        }
    }
    out
}

fn random_secret() -> String {
    let mut r = [0u8; 16];
    getrandom::fill(&mut r).expect("random");
    format!("pw-{}", hex::encode(r))
}

#[test]
fn a_missing_manifest_is_bad_input_and_registry_flags_need_the_registry_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = write(
        dir.path(),
        "registry.yaml",
        &registry(&[unreachable_mssql_yaml(PASSWORD_VAR)]),
    );
    let out = run_cli(&["check"], &[]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(out.error_code(), "DPONE_CLI_MANIFEST_REQUIRED");
    for command in ["plan", "run", "status"] {
        let out = run_cli(&[command, "--connections", &reg], &[]);
        assert_eq!(out.code, 3, "{command}: {}", out.stderr);
        assert_eq!(out.error_code(), "DPONE_CLI_MANIFEST_REQUIRED", "{command}");
    }
    let out = run_cli(&["state", "show", "--connections", &reg], &[]);
    assert_eq!(out.error_code(), "DPONE_CLI_MANIFEST_REQUIRED");
    // --json and --offline belong to the registry check: with a manifest they are usage errors.
    for flag in ["--json", "--offline"] {
        let out = run_cli(
            &["check", "--manifest", &reg, "--connections", &reg, flag],
            &[],
        );
        assert_eq!(out.code, 2, "{flag}: {}", out.stderr);
    }
}

#[test]
fn offline_checks_structure_only_and_keeps_the_registry_codes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let secret = random_secret();
    let good = registry(&[unreachable_mssql_yaml(PASSWORD_VAR)]);

    // Valid: exit 0 without connecting (nothing listens on port 1) or reading credentials.
    let reg = write(dir.path(), "good.yaml", &good);
    let out = run_cli(
        &[
            "check",
            "--connections",
            &reg,
            "--offline",
            "--output",
            "text",
        ],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("NOTHING was verified"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("not_verified"), "{}", out.stdout);
    assert!(!out.stdout.contains(" match "), "{}", out.stdout);
    let out = run_cli(
        &["check", "--connections", &reg, "--offline", "--json"],
        &[(PASSWORD_VAR, &secret)],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = out.json();
    assert_eq!(report["schema"], "dpone.connections-check.v1");
    assert_eq!(report["mode"], "offline");
    assert_eq!(report["outcome"], "not_verified");
    assert_eq!(report["summary"]["match"], 0);
    let all = fields(&report);
    assert_eq!(all.len(), 9, "{report}");
    assert!(all.iter().all(|(_, _, s, _)| s == "not_verified"));
    out.assert_no_leak(&[&secret, "127.0.0.1", "dpone_loader", PASSWORD_VAR]);

    // The registry check follows `--output` like every command: piped (the default `auto`) and
    // `--output json` give the same JSON contract as `--json`, and `--json` wins over
    // `--output text` (it is an alias of `--output json`).
    for flags in [
        &[][..],
        &["--output", "json"][..],
        &["--output", "text", "--json"][..],
    ] {
        let mut args = vec!["check", "--connections", &reg, "--offline"];
        args.extend_from_slice(flags);
        let piped = run_cli(&args, &[(PASSWORD_VAR, &secret)]);
        assert_eq!(piped.code, 0, "{flags:?}: {}", piped.stderr);
        assert_eq!(
            piped.stdout, out.stdout,
            "{flags:?}: the same JSON bytes as --json"
        );
        assert_eq!(
            piped.json()["schema"],
            "dpone.connections-check.v1",
            "{flags:?}"
        );
    }

    // Malformed: the strict parser's codes, bad input.
    let cases = [
        (
            good.replace(
                "    trust_server_certificate: true\n",
                "    trust_server_certificate: true\n    tls: strict\n",
            ),
            "DPONE_XMIN_REGISTRY_UNKNOWN_FIELD",
        ),
        (
            good.replace("environment: ci\n", "environment: ci\nenvironment: prod\n"),
            "DPONE_XMIN_YAML_DUPLICATE_KEY",
        ),
        (
            good.replace("database_id: 5", "database_id: 0"),
            "DPONE_XMIN_REGISTRY_INVALID",
        ),
    ];
    for (i, (text, code)) in cases.iter().enumerate() {
        assert_ne!(text, &good, "case {i} changes the registry");
        let reg = write(dir.path(), &format!("bad{i}.yaml"), text);
        for extra in [&["--offline"][..], &[]] {
            let mut args = vec!["check", "--connections", &reg];
            args.extend_from_slice(extra);
            let out = run_cli(&args, &[(PASSWORD_VAR, &secret)]);
            assert_eq!(out.code, 3, "{code}: {}", out.stderr);
            assert_eq!(out.error_code(), *code, "{}", out.stderr);
            assert!(out.stdout.is_empty(), "{}", out.stdout);
            out.assert_no_leak(&[&secret, "127.0.0.1"]);
        }
    }
}

#[test]
fn an_unset_password_variable_is_the_registry_credential_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = write(
        dir.path(),
        "registry.yaml",
        &registry(&[unreachable_mssql_yaml(
            "DPONE_CONNCHECK_TEST_UNSET_PASSWORD",
        )]),
    );
    let out = run_cli(&["check", "--connections", &reg], &[]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert_eq!(out.error_code(), "DPONE_XMIN_REGISTRY_CREDENTIAL_MISSING");
    assert!(out.stdout.is_empty(), "nothing is checked: {}", out.stdout);
    out.assert_no_leak(&["127.0.0.1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn live_pins_discovered_from_the_server_all_match() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (v1, v2, target) = db.pins().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = write(
        dir.path(),
        "registry.yaml",
        &registry(&[
            source_yaml("pg_source_v1", &db, &v1, ""),
            source_yaml("pg_source_v2", &db, &v2, ""),
            target_yaml("pg_target", &db, &target),
        ]),
    );
    let password = db.password();
    let env = [(PASSWORD_VAR, password.as_str())];

    let out = run_cli(&["check", "--connections", &reg, "--json"], &env);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let report = out.json();
    assert_eq!(report["schema"], "dpone.connections-check.v1");
    assert_eq!(report["mode"], "live");
    assert_eq!(report["outcome"], "match");
    assert_eq!(report["code"], Value::Null);
    let all = fields(&report);
    // v1: 9 catalog fields + system identifier + timeline; v2: 9; target: 3.
    assert_eq!(all.len(), 11 + 9 + 3, "{report}");
    assert!(
        all.iter().all(|(_, _, s, _)| s == "match"),
        "every field matches: {report}"
    );
    assert_eq!(report["summary"]["match"], 23);
    let names: Vec<&str> = report["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names, ["pg_source_v1", "pg_source_v2", "pg_target"]);
    out.assert_no_leak(&[&password, &db.host(), &format!(":{}", db.port())]);

    let out = run_cli(&["check", "--connections", &reg, "--output", "text"], &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("every pinned field matches"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("MISMATCH ") && !out.stdout.contains("unreachable "));
    out.assert_no_leak(&[&password, &db.host()]);

    // The most verbose log level never forwards the drivers' records, which carry statement
    // parameters (tokio-postgres logs every statement with its parameters at debug).
    let traced = run_cli(
        &["check", "--connections", &reg, "--json"],
        &[(PASSWORD_VAR, password.as_str()), ("DPONE_LOG", "trace")],
    );
    assert_eq!(traced.code, 0, "{}", traced.stderr);
    for driver in [
        "tokio_postgres",
        "parameters",
        "rustls",
        "executing statement",
    ] {
        assert!(
            !traced.stderr.contains(driver),
            "a driver record reached the log ({driver}):\n{}",
            traced.stderr
        );
    }
    traced.assert_no_leak(&[&password, &db.host()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn a_changed_pin_is_a_mismatch_on_exactly_that_field() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (v1, v2, target) = db.pins().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let password = db.password();
    let env = [(PASSWORD_VAR, password.as_str())];

    let mut wrong_oid = target.clone();
    wrong_oid.oid += 1;
    let mut wrong_sysid = v1.clone();
    wrong_sysid.system_identifier = Some("1234567890123456789".into());
    let cases = [
        (
            "target_oid",
            vec![
                source_yaml("pg_source", &db, &v1, ""),
                target_yaml("pg_target", &db, &wrong_oid),
            ],
            vec![(
                "pg_target",
                "database_pin.oid",
                "DPONE_XMIN_TARGET_DATABASE_PIN_MISMATCH",
            )],
        ),
        (
            "source_system_identifier",
            vec![
                source_yaml("pg_source", &db, &wrong_sysid, ""),
                target_yaml("pg_target", &db, &target),
            ],
            vec![(
                "pg_source",
                "system_identifier",
                "DPONE_XMIN_SOURCE_SYSTEM_IDENTIFIER_MISMATCH",
            )],
        ),
        (
            "dropped_relation",
            vec![source_yaml(
                "pg_source",
                &db,
                &v2,
                "        public.gone: {schema_oid: 2200, relation_oid: 99999}\n",
            )],
            vec![
                (
                    "pg_source",
                    "relations.public.gone.schema_oid",
                    "DPONE_XMIN_SOURCE_RELATION_MISSING",
                ),
                (
                    "pg_source",
                    "relations.public.gone.relation_oid",
                    "DPONE_XMIN_SOURCE_RELATION_MISSING",
                ),
            ],
        ),
    ];
    for (case, connections, expected) in cases {
        let reg = write(dir.path(), &format!("{case}.yaml"), &registry(&connections));
        let out = run_cli(&["check", "--connections", &reg, "--json"], &env);
        assert_eq!(out.code, 1, "{case}: {}\n{}", out.stdout, out.stderr);
        assert_eq!(out.error_code(), "DPONE_CONNECTIONS_PIN_DRIFT", "{case}");
        let report = out.json();
        assert_eq!(report["outcome"], "drift", "{case}");
        assert_eq!(report["code"], "DPONE_CONNECTIONS_PIN_DRIFT", "{case}");
        let all = fields(&report);
        let mismatched: Vec<(&str, &str, &str)> = all
            .iter()
            .filter(|(_, _, s, _)| s == "MISMATCH")
            .map(|(c, f, _, code)| (c.as_str(), f.as_str(), code.as_deref().unwrap_or_default()))
            .collect();
        assert_eq!(mismatched, expected, "{case}: {report}");
        assert!(
            all.iter()
                .filter(|(_, _, s, _)| s != "MISMATCH")
                .all(|(_, _, s, _)| s == "match"),
            "{case}: every other field matches: {report}"
        );
        out.assert_no_leak(&[&password, &db.host()]);

        let out = run_cli(&["check", "--connections", &reg, "--output", "text"], &env);
        assert_eq!(out.code, 1, "{case}: {}", out.stderr);
        assert_eq!(out.error_code(), "DPONE_CONNECTIONS_PIN_DRIFT");
        for (conn, field, code) in &expected {
            assert!(
                out.stdout.lines().any(|l| l.starts_with(conn)
                    && l.contains(&format!(" {field} "))
                    && l.contains(" MISMATCH ")
                    && l.contains(code)),
                "{case}: {field} is MISMATCH in the table:\n{}",
                out.stdout
            );
        }
        out.assert_no_leak(&[&password, &db.host()]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
async fn an_unreachable_mssql_target_is_never_a_match_and_leaks_nothing() {
    let Some(db) = TestDb::create().await else {
        return;
    };
    let (_, _, target) = db.pins().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let password = db.password();
    let env = [(PASSWORD_VAR, password.as_str())];
    let reg = write(
        dir.path(),
        "registry.yaml",
        &registry(&[
            target_yaml("pg_target", &db, &target),
            unreachable_mssql_yaml(PASSWORD_VAR),
        ]),
    );

    let out = run_cli(&["check", "--connections", &reg, "--json"], &env);
    assert_eq!(out.code, 75, "{}\n{}", out.stdout, out.stderr);
    assert_eq!(out.error_code(), "DPONE_CONNECTIONS_UNREACHABLE");
    let report = out.json();
    assert_eq!(report["outcome"], "unreachable");
    assert_eq!(
        report["summary"]["match"], 3,
        "only the PostgreSQL pins match"
    );
    let sql = report["connections"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "sql_target")
        .cloned()
        .unwrap_or(Value::Null);
    assert_eq!(sql["kind"], "mssql_target");
    assert_eq!(sql["status"], "unreachable");
    assert_eq!(sql["code"], "DPONE_XMIN_TARGET_CONNECT");
    let all = fields(&report);
    let sql_fields: Vec<_> = all.iter().filter(|(c, ..)| c == "sql_target").collect();
    assert_eq!(sql_fields.len(), 9, "{report}");
    assert!(
        sql_fields.iter().all(|(_, _, s, code)| s == "unreachable"
            && code.as_deref() == Some("DPONE_XMIN_TARGET_CONNECT")),
        "{report}"
    );
    assert!(
        all.iter()
            .filter(|(c, ..)| c == "pg_target")
            .all(|(_, _, s, _)| s == "match")
    );
    out.assert_no_leak(&[&password, "127.0.0.1", "dpone_loader"]);

    let out = run_cli(&["check", "--connections", &reg, "--output", "text"], &env);
    assert_eq!(out.code, 75, "{}", out.stderr);
    assert_eq!(out.error_code(), "DPONE_CONNECTIONS_UNREACHABLE");
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("sql_target") && l.contains(" unreachable ")),
        "{}",
        out.stdout
    );
    out.assert_no_leak(&[&password, "127.0.0.1", "dpone_loader"]);
}
