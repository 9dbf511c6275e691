//! Shared support of the real-engine tests: the tier's environment, the adapter built against
//! it, raw queries to one member (for checks the adapter does not make), the tier's fault
//! control, and a generated source.
//!
//! The tier is started by `.ci/start-clickhouse` (two real ClickHouse 26.9 engines behind the
//! HTTP interface over TLS, one ZooKeeper); its last output line names the variables read here,
//! among them the tier's CA (`DPONE_TEST_CLICKHOUSE_CA`), which every endpoint here pins.
#![allow(dead_code, clippy::print_stdout)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dpone_adapter_clickhouse::{
    ClickHouseCluster, ClickHouseConfig, ClickHouseEndpoint, Credential, Extract,
};
use dpone_engine_clickhouse::canonical::{RowBinaryWriter, Value, column_types};
use dpone_engine_clickhouse::contracts::{Digest, Schema};
use dpone_engine_clickhouse::ports::{ArtifactSource, NoProgress, PortError, SystemEnvironment};
use dpone_engine_clickhouse::synthetic::FnGate;
use dpone_engine_clickhouse::{Coordinator, CoordinatorConfig, OperationRequest, Ports};
use dpone_policy_model::admission::StaticFacts;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// The running tier, from the environment `.ci/start-clickhouse` prints.
pub struct Tier {
    /// Coordinator URL.
    pub url: String,
    /// Member URLs by (shard, replica).
    pub members: BTreeMap<(u32, u32), String>,
    /// User.
    pub user: String,
    /// Password.
    pub password: String,
    /// Cluster name.
    pub cluster: String,
    /// Atomic database on every member.
    pub database: String,
    /// KeeperMap authority facade.
    pub authority: (String, String),
    /// The tier's state directory (control script, fault logs), when it is the local tier.
    pub dir: Option<PathBuf>,
    /// The CA bundle (PEM) the tier's `https://` endpoints are verified against.
    pub ca: Option<String>,
}

fn var(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

impl Tier {
    /// Reads the tier from the environment. The tests that call this run only when
    /// `DPONE_TEST_CLICKHOUSE_URL` is set (build-time cfg), so a missing companion variable is
    /// a broken set-up and fails the test.
    pub fn from_env() -> Self {
        Self::from_prefix("DPONE_TEST_CLICKHOUSE")
    }

    /// The tier named by `<prefix>_URL`, `<prefix>_MEMBER_URLS`, `<prefix>_USER`, … (the
    /// Replicated cluster of the internal-mode tests is `DPONE_TEST_CLICKHOUSE_REPLICATED`).
    pub fn from_prefix(prefix: &str) -> Self {
        let var = |k: &str| var(&format!("{prefix}_{k}"));
        let url = var("URL").unwrap_or_else(|| panic!("{prefix}_URL is set"));
        let raw = var("MEMBER_URLS")
            .unwrap_or_else(|| panic!("{prefix}_MEMBER_URLS is set beside {prefix}_URL"));
        let mut members = BTreeMap::new();
        for item in raw.split(',').filter(|s| !s.is_empty()) {
            let (key, u) = item.split_once('=').expect("items are shard:replica=url");
            let (s, r) = key.split_once(':').expect("keys are shard:replica");
            members.insert(
                (s.parse().expect("shard"), r.parse().expect("replica")),
                u.to_string(),
            );
        }
        let authority = var("AUTHORITY").unwrap_or_else(|| "dpone_test.dpone_authority".into());
        let (adb, at) = authority.split_once('.').expect("authority is db.table");
        Self {
            url,
            members,
            user: var("USER").unwrap_or_else(|| "default".into()),
            password: var("PASSWORD").unwrap_or_default(),
            cluster: var("CLUSTER").unwrap_or_else(|| "analytics_cluster".into()),
            database: var("DATABASE").unwrap_or_else(|| "dpone_test".into()),
            authority: (adb.into(), at.into()),
            dir: var("TIER").map(PathBuf::from),
            ca: var("CA"),
        }
    }

    /// `url` as an endpoint of this tier: pinned to the tier's CA.
    pub fn endpoint(&self, url: &str) -> ClickHouseEndpoint {
        ClickHouseEndpoint {
            url: url.to_owned(),
            sslrootcert: self.ca.clone(),
        }
    }

    /// The adapter's configuration against this tier.
    pub fn config(&self, request_timeout_secs: u64) -> ClickHouseConfig {
        ClickHouseConfig {
            coordinator_url: self.endpoint(&self.url),
            member_urls: self
                .members
                .iter()
                .map(|(k, u)| (*k, self.endpoint(u)))
                .collect(),
            credential: Credential {
                user: self.user.clone(),
                password: self.password.clone(),
            },
            authority_database: self.authority.0.clone(),
            authority_table: self.authority.1.clone(),
            cluster: self.cluster.clone(),
            ddl_task_timeout_secs: 20,
            request_timeout_secs,
        }
    }

    /// The adapter against this tier.
    pub fn cluster(&self) -> ClickHouseCluster {
        ClickHouseCluster::new(&self.config(60)).expect("adapter builds")
    }

    /// The URL of member `(1, replica)`.
    pub fn member(&self, replica: u32) -> &str {
        &self.members[&(1, replica)]
    }

    /// Runs one statement on a member and returns its `TabSeparated` output.
    pub fn sql(&self, member_url: &str, query: &str) -> String {
        let (status, body) = self.http(member_url, "POST", "/", query.as_bytes());
        assert_eq!(
            status,
            200,
            "tier query failed: {}",
            String::from_utf8_lossy(&body)
        );
        String::from_utf8(body).expect("utf-8 output")
    }

    /// One HTTP exchange with a member (authenticated; over TLS verified against the tier's
    /// CA for an `https://` URL), returning status and body.
    pub fn http(&self, member_url: &str, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        let (tls, authority) = if let Some(a) = member_url.strip_prefix("https://") {
            (true, a.trim_end_matches('/'))
        } else {
            let a = member_url
                .strip_prefix("http://")
                .expect("tier URLs are http:// or https://");
            (false, a.trim_end_matches('/'))
        };
        let tcp = TcpStream::connect(authority).expect("member reachable");
        tcp.set_read_timeout(Some(Duration::from_secs(60))).ok();
        let mut s: Box<dyn Connection> = if tls {
            let host = authority
                .rsplit_once(':')
                .map_or(authority, |(h, _)| h)
                .to_owned();
            let name = ServerName::try_from(host).expect("a host name or address");
            let ca = self
                .ca
                .as_deref()
                .expect("DPONE_TEST_CLICKHOUSE_CA names the tier's CA beside https:// URLs");
            let conn = ClientConnection::new(tls_client(ca), name).expect("TLS client");
            Box::new(StreamOwned::new(conn, tcp))
        } else {
            Box::new(tcp)
        };
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\
             X-ClickHouse-User: {}\r\nX-ClickHouse-Key: {}\r\nContent-Length: {}\r\n\r\n",
            self.user,
            self.password,
            body.len()
        );
        s.write_all(head.as_bytes()).expect("send");
        s.write_all(body).expect("send");
        s.flush().expect("send");
        let mut raw = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                // The member closes without a TLS close_notify; the length below decides
                // whether the response is whole.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
                Err(e) => panic!("read from the member: {e}"),
            }
        }
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("HTTP head");
        let head = String::from_utf8_lossy(&raw[..split]).to_string();
        let status = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .expect("status");
        let mut body = raw[split + 4..].to_vec();
        let length = head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        });
        if let Some(length) = length {
            assert!(body.len() >= length, "response cut short");
            body.truncate(length);
        }
        (status, body)
    }

    /// Arms a fault rule on a member (see `.ci/clickhouse-tier/member.py`).
    pub fn arm(&self, replica: u32, rule: &serde_json::Value) {
        let (status, body) = self.http(
            self.member(replica),
            "POST",
            "/__tier/faults",
            rule.to_string().as_bytes(),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Every firing recorded by a member, across its restarts.
    pub fn fired(&self, replica: u32) -> Vec<serde_json::Value> {
        let (status, body) = self.http(self.member(replica), "GET", "/__tier/faults", b"");
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        v["fired"].as_array().cloned().unwrap_or_default()
    }

    /// Disarms every rule on a member.
    pub fn disarm(&self, replica: u32) {
        let (status, _) = self.http(self.member(replica), "POST", "/__tier/faults/clear", b"");
        assert_eq!(status, 200);
    }

    /// Runs the tier's control script.
    pub fn ctl(&self, args: &[&str]) {
        let dir = self
            .dir
            .as_ref()
            .expect("DPONE_TEST_CLICKHOUSE_TIER names the local tier");
        let status = Command::new("bash")
            .arg(dir.join("ctl"))
            .args(args)
            .status()
            .expect("ctl runs");
        assert!(status.success(), "ctl {args:?} failed");
    }

    /// ZooKeeper up and both members answering.
    pub fn heal(&self) {
        self.ctl(&["zk-start"]);
        for m in ["m1", "m2"] {
            self.ctl(&["wait", m]);
        }
    }
}

/// A byte stream to a member: plain TCP or TLS over it.
trait Connection: Read + Write {}
impl<T: Read + Write> Connection for T {}

/// A TLS client trusting exactly the CA certificates in `ca` (PEM).
pub fn tls_client(ca: &str) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("the tier's CA file") {
        roots
            .add(cert.expect("PEM certificate"))
            .expect("a usable CA certificate");
    }
    Arc::new(
        ClientConfig::builder_with_provider(
            Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
        )
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

/// A name no other test run uses.
pub fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    format!(
        "{prefix}_{}_{:x}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff
    )
}

/// The three-column sample schema.
pub fn schema() -> Schema {
    Schema::of(&[
        ("id", "UInt64"),
        ("name", "String"),
        ("amount", "Decimal(18, 2)"),
    ])
}

/// A generated source of `rows` rows; `salt` changes every value but the key.
pub struct Rows {
    /// Row count.
    pub rows: u64,
    /// Changes the generated values.
    pub salt: u64,
}

impl Extract for Rows {
    fn extract(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, PortError> {
        let mut w = RowBinaryWriter::new(column_types(schema).expect("profile"));
        for k in 0..self.rows {
            w.row(&[
                Value::UInt(u128::from(k)),
                Value::Bytes(format!("n-{k}-{}", self.salt).into_bytes()),
                Value::Int(i128::from(k * 7 + self.salt)),
            ])
            .expect("row");
        }
        out.write_all(&w.finish())
            .map_err(|_| PortError::rejected("DPONE_TEST_WRITE"))?;
        Ok(self.rows)
    }
}

/// What a member's table holds, from the engine itself: row count, distinct keys and an
/// order-independent fingerprint of every row.
pub fn table_facts(tier: &Tier, replica: u32, table: &str) -> (u64, u64, String) {
    let out = tier.sql(
        tier.member(replica),
        &format!(
            "SELECT count(), uniqExact(id), toString(sum(cityHash64(id, name, toInt64(amount * 100)))) \
             FROM `{}`.`{table}`",
            tier.database
        ),
    );
    let cols: Vec<&str> = out.trim().split('\t').collect();
    (
        cols[0].parse().expect("count"),
        cols[1].parse().expect("uniq"),
        cols[2].to_string(),
    )
}

/// The fingerprint `table_facts` reports for a generated source, computed by the engine on
/// the same values (so no hashing is reimplemented here).
pub fn expected_fingerprint(tier: &Tier, rows: u64, salt: u64) -> String {
    let out = tier.sql(
        tier.member(1),
        &format!(
            "SELECT toString(sum(cityHash64(number, concat('n-', toString(number), '-{salt}'), \
             toInt64(number * 7 + {salt})))) FROM numbers({rows})"
        ),
    );
    out.trim().to_string()
}

/// Tables of `database` on a member whose name starts with `prefix`.
pub fn tables_like(tier: &Tier, replica: u32, prefix: &str) -> Vec<String> {
    tier.sql(
        tier.member(replica),
        &format!(
            "SELECT name FROM system.tables WHERE database = '{}' AND startsWith(name, '{prefix}') ORDER BY name",
            tier.database
        ),
    )
    .lines()
    .map(str::to_owned)
    .collect()
}

/// The shipped admission rules (their native core).
pub fn gate() -> FnGate {
    FnGate::new(
        "native-policy-core",
        dpone_policy_admission::admit_static,
        dpone_policy_admission::admit_runtime,
    )
}

/// An external full refresh of `target` on the tier, ordered by the first column.
pub fn request(tier: &Tier, target: &str, invocation: &str, schema: Schema) -> OperationRequest {
    let mut req = internal_request(tier, target, invocation, schema);
    req.static_facts.replication_mode = Some("external".into());
    req.static_facts.engine = "MergeTree".into();
    req
}

/// An internal-mode full refresh of `target` (a manifest without `replication_mode`, a
/// `ReplicatedMergeTree` engine), ordered by the first column.
pub fn internal_request(
    tier: &Tier,
    target: &str,
    invocation: &str,
    schema: Schema,
) -> OperationRequest {
    OperationRequest {
        static_facts: StaticFacts {
            cluster_name: tier.cluster.clone(),
            ddl_scope: Some("cluster".into()),
            replication_mode: None,
            engine: "ReplicatedMergeTree".into(),
            max_source_bytes: Some(1 << 30),
            target_database: tier.database.clone(),
            staging_database: tier.database.clone(),
            access_table_engine: None,
        },
        target_table: target.into(),
        scheduler_invocation: invocation.into(),
        plan_digest: Digest::of(b"real-engine plan"),
        order_by: vec![schema.columns[0].name.clone()],
        schema,
    }
}

/// The engine over the real adapter: `cluster` serves authority, inventory, catalog and DDL.
pub fn coordinator<'a>(
    cluster: &'a ClickHouseCluster,
    artifacts: &'a (dyn ArtifactSource + Sync),
    gate: &'a FnGate,
    env: &'a SystemEnvironment,
) -> Coordinator<'a> {
    Coordinator::new(
        Ports {
            authority: cluster,
            inventory: cluster,
            catalog: cluster,
            ddl: cluster,
            artifacts,
            admission: gate,
            env,
            progress: &NoProgress,
        },
        CoordinatorConfig::default(),
    )
}
