//! The protected control store for live CLI tests: a fresh schema with the reviewed DDL
//! (`fixtures/nonproduction/control-store.sql`) applied as an operator would, a campaign dated
//! around the real clock and attested by the offline test signer, and the `campaign` commands
//! run as a binary against it (`campaign_store_cli.rs`, `np_run_cli.rs`).
#![allow(dead_code)]

use super::campaign::{self as c, Docs};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::str::FromStr;

pub const TEST_DB: &str = "dpone_np_store_tests";

pub fn env_value(name: &str) -> Option<String> {
    if let Ok(v) = std::env::var(name)
        && !v.is_empty()
    {
        return Some(v);
    }
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).ok()?;
    let prefix = format!("export {name}=");
    text.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()).map(str::to_owned))
}

pub fn unusable(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// A fresh schema with the reviewed DDL in the test database; dropped at the end.
pub struct Store {
    /// The URL the binary gets (database switched; `localhost` for verify-full).
    pub url: String,
    pub schema: String,
    pub ca: Option<String>,
    pub admin_url: String,
    /// Pass `--store-privileged-session`: the tests' login owns the schema it created (a
    /// single-user development store); `false` connects as a deployment does.
    pub privileged_session: bool,
}

pub async fn admin(url: &str) -> tokio_postgres::Client {
    let cfg = tokio_postgres::Config::from_str(url)
        .unwrap_or_else(|_| unusable("DPONE_TEST_PG_URL is not a valid connection URL"));
    let (client, conn) = match cfg.connect(tokio_postgres::NoTls).await {
        Ok(x) => x,
        Err(e) if e.code().is_some() => unusable("the server refused the login"),
        Err(_) => unusable("the server is not reachable"),
    };
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// `url` with its user and password replaced (`user` and `password` URL-safe).
pub fn with_login(url: &str, user: &str, password: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let at = url.rfind('@').map_or(scheme_end, |i| i + 1);
    format!("{}{user}:{password}@{}", &url[..scheme_end], &url[at..])
}

/// `url` with its database replaced.
pub fn with_database(url: &str, db: &str) -> String {
    let at = url.rfind('@').map_or(0, |i| i + 1);
    let (head, tail) = url.split_at(at);
    let (hostport, query) = match tail.find('/') {
        Some(i) => {
            let rest = &tail[i + 1..];
            let q = rest.find('?').map_or("", |j| &rest[j..]);
            (&tail[..i], q)
        }
        None => (tail, ""),
    };
    format!("{head}{hostport}/{db}{query}")
}

impl Store {
    pub async fn new() -> Store {
        let Some(url) = env_value("DPONE_TEST_PG_URL") else {
            unusable("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let root = admin(&url).await;
        let exists = root
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&TEST_DB])
            .await
            .expect("look up the test database")
            .is_some();
        if !exists
            && let Err(e) = root
                .batch_execute(&format!("CREATE DATABASE \"{TEST_DB}\""))
                .await
        {
            assert!(
                matches!(e.code().map(|c| c.code()), Some("42P04" | "23505")),
                "create the test database: {e}"
            );
        }
        let admin_url = with_database(&url, TEST_DB);
        let mut r = [0u8; 4];
        getrandom::fill(&mut r).expect("random");
        let schema = format!("np_cli_{}_{}", std::process::id(), hex::encode(r));
        let ddl = std::fs::read_to_string(c::fixtures().join("control-store.sql"))
            .expect("the reviewed DDL")
            .replace("\"dpone_np_control\"", &format!("\"{schema}\""));
        admin(&admin_url)
            .await
            .batch_execute(&ddl)
            .await
            .expect("the reviewed DDL applies");
        let ca = env_value("DPONE_TEST_PG_CA");
        let url = if ca.is_some() {
            admin_url.replace("@127.0.0.1", "@localhost")
        } else {
            admin_url.clone()
        };
        Store {
            url,
            schema,
            ca,
            admin_url,
            privileged_session: true,
        }
    }

    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["--store-schema".to_owned(), self.schema.clone()];
        if self.privileged_session {
            a.push("--store-privileged-session".to_owned());
        }
        match &self.ca {
            Some(ca) => a.extend([
                "--store-sslmode".to_owned(),
                "verify-full".to_owned(),
                "--store-sslrootcert".to_owned(),
                ca.clone(),
            ]),
            None => a.extend(["--store-sslmode".to_owned(), "disable".to_owned()]),
        }
        a
    }

    pub async fn drop_schema(self) {
        let _ = admin(&self.admin_url)
            .await
            .batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.schema))
            .await;
    }
}

/// A campaign whose grants are valid now and signed a little earlier.
pub fn live_docs() -> Docs {
    let now = unix_now();
    let mut docs = Docs::new();
    docs.policy["validity"]["not_before"] = (now - 86_400).into();
    docs.policy["validity"]["not_after"] = (now + 30 * 86_400).into();
    for g in [&mut docs.qgrant, &mut docs.egrant] {
        g["validity"]["not_before"] = (now - 600).into();
        g["validity"]["not_after"] = (now + 6 * 3600).into();
    }
    docs.seal();
    docs
}

pub fn attest(bytes: &[u8]) -> Vec<u8> {
    c::authority()
        .attest(
            &[dpone_test_attest_signer::Subject::of("grant.json", bytes)],
            &c::identity(),
            &dpone_test_attest_signer::AttestOptions {
                signed_at: Some(unix_now() - 300),
                ..Default::default()
            },
        )
        .expect("attest")
}

pub fn cache() -> (PathBuf, PathBuf) {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"));
    let cache = dir.path().join("cache");
    std::fs::create_dir_all(&cache).expect("cache dir");
    (cache, dir.path().join("cache.key"))
}

pub struct Run<'a> {
    pub store: &'a Store,
    pub dir: tempfile::TempDir,
}

impl<'a> Run<'a> {
    pub fn new(store: &'a Store) -> Self {
        Self {
            store,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    pub fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        p.display().to_string()
    }

    /// `dpone-host campaign ARGS` against this store, not started yet.
    pub fn command(&self, args: &[String]) -> Command {
        let (cache, key) = cache();
        let mut all = args.to_vec();
        all.extend(self.store.args());
        // Only the verifying commands load the scope component.
        if matches!(args.first().map(String::as_str), Some("grant" | "admit")) {
            all.extend(["--cache-dir".to_owned(), cache.display().to_string()]);
        }
        let mut command = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
        command
            .env("DPONE_NP_STORE_URL", &self.store.url)
            .env("DPONE_CACHE_KEY", key)
            .arg("campaign")
            .args(&all);
        command
    }

    pub fn cli(&self, args: &[String]) -> Output {
        self.command(args).output().expect("run dpone-host")
    }

    pub fn policy_register(&self, docs: &Docs, epoch: Option<u64>) -> Output {
        let mut a = vec![
            "policy".to_owned(),
            "register".to_owned(),
            "--policy".to_owned(),
            self.file("policy.json", &c::canon(&docs.policy)),
            "--policy-digest".to_owned(),
            docs.policy_digest(),
            "--trusted-root".to_owned(),
            self.file("trusted_root.json", &c::trusted_root()),
        ];
        if let Some(e) = epoch {
            a.extend(["--revocation-epoch".to_owned(), e.to_string()]);
        }
        self.cli(&a)
    }

    /// The verification options of `grant register` / `admit` for one phase's grant.
    pub fn grant_args(&self, docs: &Docs, execution: bool, grant: &[u8]) -> Vec<String> {
        let mut a = vec![
            "--policy".to_owned(),
            self.file("policy.json", &c::canon(&docs.policy)),
            "--policy-digest".to_owned(),
            docs.policy_digest(),
            "--document".to_owned(),
            self.file("grant.json", grant),
            "--attestation".to_owned(),
            self.file("grant.sigstore.json", &attest(grant)),
            "--trusted-root".to_owned(),
            self.file("trusted_root.json", &c::trusted_root()),
            "--composition".to_owned(),
            self.file("composition.json", &c::canon(&docs.composition)),
        ];
        if execution {
            a.extend([
                "--request".to_owned(),
                self.file("request.json", &c::canon(&docs.request)),
                "--release-set".to_owned(),
                self.file("release-set.json", &c::canon(&docs.release)),
            ]);
        }
        a
    }

    pub fn grant_register(&self, docs: &Docs, execution: bool, grant: &[u8]) -> Output {
        let mut a = vec!["grant".to_owned(), "register".to_owned()];
        a.extend(self.grant_args(docs, execution, grant));
        self.cli(&a)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn admit(
        &self,
        docs: &Docs,
        execution: bool,
        grant: &[u8],
        workload: &str,
        attempt: &str,
        rows: u64,
        bytes: u64,
    ) -> Output {
        let a = self.admit_args(docs, execution, grant, workload, attempt, rows, bytes);
        self.cli(&a)
    }

    /// The arguments of one `campaign admit`.
    #[allow(clippy::too_many_arguments)]
    pub fn admit_args(
        &self,
        docs: &Docs,
        execution: bool,
        grant: &[u8],
        workload: &str,
        attempt: &str,
        rows: u64,
        bytes: u64,
    ) -> Vec<String> {
        let mut a = vec!["admit".to_owned()];
        a.extend(self.grant_args(docs, execution, grant));
        a.extend([
            "--workload".to_owned(),
            workload.to_owned(),
            "--attempt".to_owned(),
            attempt.to_owned(),
            "--source-rows".to_owned(),
            rows.to_string(),
            "--source-bytes".to_owned(),
            bytes.to_string(),
            "--attempt-seconds".to_owned(),
            "600".to_owned(),
        ]);
        a
    }

    pub fn settle(&self, reservation: &str, rows: u64, bytes: u64, http: u64) -> Output {
        self.cli(&Self::settle_args(reservation, rows, bytes, http))
    }

    /// The arguments of one `campaign settle` (outcome `succeeded`).
    pub fn settle_args(reservation: &str, rows: u64, bytes: u64, http: u64) -> Vec<String> {
        vec![
            "settle".to_owned(),
            "--reservation".to_owned(),
            reservation.to_owned(),
            "--source-rows".to_owned(),
            rows.to_string(),
            "--source-bytes".to_owned(),
            bytes.to_string(),
            "--http-bytes".to_owned(),
            http.to_string(),
            "--outcome".to_owned(),
            "succeeded".to_owned(),
        ]
    }

    pub fn status(&self, grant_id: &str, phase: &str, reservations: &[&str]) -> Output {
        let mut a = vec![
            "status".to_owned(),
            "--grant-id".to_owned(),
            grant_id.to_owned(),
            "--phase".to_owned(),
            phase.to_owned(),
        ];
        for r in reservations {
            a.extend(["--reservation".to_owned(), (*r).to_owned()]);
        }
        self.cli(&a)
    }
}

pub fn ok(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "refused: {} {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The refusal's code, after checking its exit status and that nothing names the connection.
pub fn refused(out: &Output, store: &Store, exit: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(exit),
        "exit status: {stderr} {stdout}"
    );
    for text in [&stderr, &stdout] {
        assert!(!text.contains(&store.url), "the URL leaked: {text}");
        assert!(
            !text.contains("127.0.0.1") && !text.contains("localhost"),
            "an endpoint leaked: {text}"
        );
    }
    let line = stderr.lines().last().unwrap_or_default();
    serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("<no code: {stderr}>"))
}

pub fn id(v: &Value) -> String {
    v.as_str().expect("a string").to_owned()
}

/// Runs `command` on a pseudo-terminal (util-linux `script`) with `NO_COLOR`, `--output auto`:
/// its exit status and what the terminal showed (`\r\n` made `\n`).
pub fn at_terminal(command: &Command) -> (i32, String) {
    let quoted: Vec<String> = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect();
    let mut pty = Command::new("script");
    pty.args(["-qec", &quoted.join(" "), "/dev/null"])
        .env("NO_COLOR", "1");
    for (key, value) in command.get_envs() {
        if let Some(v) = value {
            pty.env(key, v);
        }
    }
    let out = pty.output().expect("util-linux `script` runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n"),
    )
}

/// The value of a summary's fact `key` (a line `  KEY  VALUE`, aligned).
pub fn fact(shown: &str, key: &str) -> Option<String> {
    shown.lines().find_map(|l| {
        let rest = l.strip_prefix("  ")?.strip_prefix(key)?;
        rest.starts_with("  ").then(|| rest.trim().to_owned())
    })
}
