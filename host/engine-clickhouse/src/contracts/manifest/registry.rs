//! The environment-owned connection registry of the ClickHouse publication route.
//!
//! Manifests name connections only by logical ref. The registry, owned and reviewed by the
//! environment (never by a workload), maps each ref to a connection:
//!
//! - `clickhouse_cluster`: the coordinator URL (inventory, KeeperMap authority, `ON CLUSTER`
//!   DDL), one direct URL per member keyed by `(shard_num, replica_num)`, the user, the *name*
//!   of the environment variable holding the password, the KeeperMap authority facade
//!   (`database`, `table`), an optional `distributed_ddl_task_timeout`, `request_timeout_secs` and
//!   `verification_timeout_secs` (the verification-time budget of one content proof); URLs are
//!   `http://host[:port]` or `https://host[:port]`, optionally with `sslrootcert` (an absolute
//!   path to the pinned CA bundle every `https://` endpoint is verified against; absent: the
//!   system's roots). A plain `http://` URL whose host is not loopback (`localhost`,
//!   `127.0.0.0/8`, `::1`) would carry the credential in clear and is refused
//!   (`PLAINTEXT_CREDENTIAL`) unless the connection says `insecure_plaintext: true`;
//! - `clickhouse_server`: one ClickHouse server for a manifest without a cluster block (local
//!   publication): its `url`, and otherwise the fields of `clickhouse_cluster` but the
//!   coordinator URL, the members and the DDL task timeout (the server is its own coordinator
//!   and its only member, `(1, 1)`);
//! - `postgres_source`: host (name, address or unix socket directory), port, database, user,
//!   optionally `sslmode` (`disable | require | verify-ca | verify-full`; absent: `verify-full`
//!   for a TCP host, `disable` for a unix socket) and `sslrootcert` (an absolute path to the
//!   pinned CA bundle, only with `verify-ca`/`verify-full`), and optionally the name of the
//!   environment variable holding the password.
//!
//! No field can hold a secret: there is no `password` field, URLs may not carry user
//! information, and credentials are read from the environment only when a connection is
//! resolved for `run` or `status` ([`Registry::password`]). Errors name field paths, never
//! endpoints or environment values.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::{
    Document, ErrorKind, Fields, ManifestError, identifier, integer, invalid, list, string,
    type_error,
};

/// Registry schema version this build reads.
pub const REGISTRY_VERSION: i64 = 1;

/// Default `distributed_ddl_task_timeout` for cluster DDL, in seconds.
pub const DEFAULT_DDL_TASK_TIMEOUT_SECS: u64 = 180;
/// Default client-side bound on one ClickHouse request, in seconds.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 300;
/// Default verification-time budget of one member's content proof, in seconds.
pub const DEFAULT_VERIFICATION_TIMEOUT_SECS: u64 = 3600;

const DOC: Document = Document::Registry;

type Result<T> = std::result::Result<T, ManifestError>;

/// A password; `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: impl Into<String>) -> Self {
        Self(s.into())
    }

    /// The secret itself, for the driver only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One endpoint of a `clickhouse_cluster` connection: its URL and the pinned CA bundle an
/// `https://` URL is verified against. The connection's `sslrootcert` is copied into every
/// endpoint, so whatever passes the URLs on passes the pin with them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClickHouseEndpoint {
    /// `http://host[:port]` or `https://host[:port]`.
    pub url: String,
    /// The pinned CA bundle (absolute path, PEM) for an `https://` URL; absent: the system's
    /// roots. Never used for `http://`.
    pub sslrootcert: Option<String>,
}

impl ClickHouseEndpoint {
    /// An endpoint without a pinned CA.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            sslrootcert: None,
        }
    }

    /// The endpoint negotiates TLS (`https://`).
    pub fn is_tls(&self) -> bool {
        self.url.starts_with("https://")
    }
}

impl From<&str> for ClickHouseEndpoint {
    fn from(url: &str) -> Self {
        Self::new(url)
    }
}

impl From<String> for ClickHouseEndpoint {
    fn from(url: String) -> Self {
        Self::new(url)
    }
}

/// A `clickhouse_cluster` connection, or a `clickhouse_server` one ([`Self::single_server`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClickHouseConnection {
    /// A `clickhouse_server` connection: one server, which is the coordinator and the only
    /// member `(1, 1)`, for local publication.
    pub single_server: bool,
    /// The coordinator endpoint.
    pub coordinator_url: ClickHouseEndpoint,
    /// Each member's endpoint, keyed by `(shard_num, replica_num)`.
    pub member_urls: BTreeMap<(u32, u32), ClickHouseEndpoint>,
    /// The pinned CA bundle of the connection's `https://` endpoints (also in each endpoint).
    pub sslrootcert: Option<String>,
    /// The registry allows plain `http://` to hosts that are not loopback.
    pub insecure_plaintext: bool,
    /// User.
    pub user: String,
    /// Name of the environment variable holding the password.
    pub password_env: String,
    /// Database of the KeeperMap authority facade.
    pub authority_database: String,
    /// Table of the KeeperMap authority facade.
    pub authority_table: String,
    /// `distributed_ddl_task_timeout` in seconds.
    pub ddl_task_timeout_secs: u64,
    /// Client-side bound on one request, in seconds.
    pub request_timeout_secs: u64,
    /// The verification-time budget: how long one member's content proof may run before the
    /// member stops it, in seconds.
    pub verification_timeout_secs: u64,
}

/// A `postgres_source` connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresConnection {
    /// Host name, address, or unix socket directory (starting with `/`).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Database.
    pub database: String,
    /// User.
    pub user: String,
    /// Name of the environment variable holding the password, if any.
    pub password_env: Option<String>,
    /// TLS mode as written (absent: see [`PostgresConnection::effective_sslmode`]).
    pub sslmode: Option<PgSslMode>,
    /// The pinned CA bundle (absolute path) for `verify-ca` / `verify-full`; absent: the
    /// system's roots.
    pub sslrootcert: Option<String>,
}

/// TLS mode of a PostgreSQL source (libpq's names and meanings).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgSslMode {
    /// No TLS.
    Disable,
    /// TLS required; the certificate is not verified.
    Require,
    /// TLS required; trusted chain, any host name.
    VerifyCa,
    /// TLS required; trusted chain and a certificate naming the host.
    VerifyFull,
}

impl PostgresConnection {
    /// The mode in effect: as written, else `verify-full` for a TCP host and `disable` for a
    /// unix-socket directory.
    pub fn effective_sslmode(&self) -> PgSslMode {
        match self.sslmode {
            Some(m) => m,
            None if self.host.starts_with('/') => PgSslMode::Disable,
            None => PgSslMode::VerifyFull,
        }
    }
}

/// One registry entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Connection {
    /// A ClickHouse cluster.
    ClickHouse(ClickHouseConnection),
    /// A PostgreSQL source.
    Postgres(PostgresConnection),
}

impl Connection {
    fn kind(&self) -> &'static str {
        match self {
            Self::ClickHouse(c) if c.single_server => "clickhouse_server",
            Self::ClickHouse(_) => "clickhouse_cluster",
            Self::Postgres(_) => "postgres_source",
        }
    }
}

/// A parsed registry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registry {
    /// Connections by logical ref.
    pub connections: BTreeMap<String, Connection>,
}

impl Registry {
    /// Parses and shape-checks a registry.
    pub fn parse(text: &str) -> Result<Self> {
        let value = super::yaml::parse_strict(text, DOC)?;
        let mut top = Fields::new(DOC, "", &value)?;
        let version = integer(DOC, "version", top.required("version")?)?;
        if version != REGISTRY_VERSION {
            return Err(ManifestError::new(
                DOC,
                ErrorKind::VersionUnsupported,
                format!("version {version} is not supported (this build reads {REGISTRY_VERSION})"),
            ));
        }
        let entries = Fields::new(DOC, "connections", top.required("connections")?)?;
        let mut connections = BTreeMap::new();
        for (name, v) in entries.entries() {
            let path = format!("connections.{name}");
            if !super::is_logical_name(name) {
                return Err(invalid(
                    DOC,
                    "a connection ref must be 1 to 128 characters of [A-Za-z0-9_.-]",
                ));
            }
            connections.insert(name.clone(), parse_connection(&path, v)?);
        }
        top.finish()?;
        Ok(Self { connections })
    }

    fn get(&self, reference: &str, field: &str) -> Result<&Connection> {
        self.connections.get(reference).ok_or_else(|| {
            ManifestError::new(
                DOC,
                ErrorKind::ConnectionUnknown,
                format!("the registry holds no connection named by the manifest's {field}"),
            )
        })
    }

    /// The ClickHouse cluster connection `reference` (the manifest's `field` names it).
    pub fn clickhouse(&self, reference: &str, field: &str) -> Result<&ClickHouseConnection> {
        match self.get(reference, field)? {
            Connection::ClickHouse(c) if !c.single_server => Ok(c),
            other => Err(kind_error(field, "clickhouse_cluster", other)),
        }
    }

    /// The ClickHouse connection `reference` for a manifest that publishes to one server
    /// (`single_server`: no cluster block, a `clickhouse_server` connection) or to a cluster
    /// (a `clickhouse_cluster` connection); the other kind is `CONNECTION_KIND`.
    pub fn clickhouse_for(
        &self,
        reference: &str,
        field: &str,
        single_server: bool,
    ) -> Result<&ClickHouseConnection> {
        if !single_server {
            return self.clickhouse(reference, field);
        }
        match self.get(reference, field)? {
            Connection::ClickHouse(c) if c.single_server => Ok(c),
            other => Err(kind_error(field, "clickhouse_server", other)),
        }
    }

    /// The PostgreSQL source connection `reference` (the manifest's `field` names it).
    pub fn postgres(&self, reference: &str, field: &str) -> Result<&PostgresConnection> {
        match self.get(reference, field)? {
            Connection::Postgres(c) => Ok(c),
            other => Err(kind_error(field, "postgres_source", other)),
        }
    }

    /// Reads the password from the environment variable named `var` through `lookup`.
    /// The value is never part of an error.
    pub fn password(var: &str, lookup: impl Fn(&str) -> Option<String>) -> Result<Secret> {
        lookup(var).map(Secret::new).ok_or_else(|| {
            ManifestError::new(
                DOC,
                ErrorKind::CredentialMissing,
                format!("the environment variable {var} named for a credential is not set"),
            )
        })
    }
}

fn kind_error(field: &str, wanted: &str, got: &Connection) -> ManifestError {
    ManifestError::new(
        DOC,
        ErrorKind::ConnectionKind,
        format!(
            "the manifest's {field} must name a {wanted} connection, not a {}",
            got.kind()
        ),
    )
}

fn parse_connection(path: &str, v: &Value) -> Result<Connection> {
    let mut f = Fields::new(DOC, path, v)?;
    let kind = f.required_str("kind")?;
    let connection = match kind.as_str() {
        "clickhouse_cluster" => Connection::ClickHouse(parse_clickhouse(&mut f, false)?),
        "clickhouse_server" => Connection::ClickHouse(parse_clickhouse(&mut f, true)?),
        "postgres_source" => Connection::Postgres(parse_postgres(&mut f)?),
        _ => {
            return Err(invalid(
                DOC,
                format!(
                    "{path}.kind must be clickhouse_cluster, clickhouse_server or postgres_source"
                ),
            ));
        }
    };
    f.finish()?;
    Ok(connection)
}

fn env_name(path: &str, v: &Value) -> Result<String> {
    let s = string(DOC, path, v)?;
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(s)
    } else {
        Err(invalid(
            DOC,
            format!("{path} must name an environment variable ([A-Za-z_][A-Za-z0-9_]*)"),
        ))
    }
}

/// `http://host[:port][/]` or `https://host[:port][/]`: no user information, path, query or
/// fragment. Whether a plain `http://` URL may carry the credential is decided by the
/// connection ([`is_plaintext_to_remote`]).
pub fn check_url(path: &str, v: &Value) -> Result<String> {
    let s = string(DOC, path, v)?;
    url_host(&s).map_err(|why| {
        ManifestError::new(
            DOC,
            ErrorKind::UrlInvalid,
            format!("{path} must be an http://host[:port] or https://host[:port] URL ({why})"),
        )
    })?;
    Ok(s)
}

/// The host of a URL `check_url` accepts (an IPv6 literal keeps its brackets), or why not.
fn url_host(s: &str) -> std::result::Result<&str, &'static str> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or("only http:// and https:// are supported")?;
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() {
        return Err("no host");
    }
    if authority.contains('@') {
        return Err("credentials never go into a URL");
    }
    if authority.contains(['/', '?', '#']) {
        return Err("no path, query or fragment");
    }
    let ok_chars = authority
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'[' | b']'));
    if !ok_chars {
        return Err("unexpected character");
    }
    // A port, when present, is 1..=65535 (IPv6 literals are bracketed).
    let host_end = if authority.starts_with('[') {
        authority
            .find(']')
            .map(|i| i + 1)
            .ok_or("unclosed IPv6 literal")?
    } else {
        authority.find(':').unwrap_or(authority.len())
    };
    match &authority[host_end..] {
        "" => {}
        port => {
            let digits = port
                .strip_prefix(':')
                .ok_or("unexpected text after the host")?;
            match digits.parse::<u16>() {
                Ok(p) if p > 0 && !digits.starts_with('0') => {}
                _ => return Err("invalid port"),
            }
        }
    }
    if host_end == 0 || &authority[..host_end] == "[]" {
        return Err("no host");
    }
    Ok(&authority[..host_end])
}

/// `localhost` or a loopback address literal (`127.0.0.0/8`, `::1`); no name is resolved.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A URL `check_url` accepts that is plain `http://` to a host that is not loopback: a
/// credential sent to it crosses the network in clear.
pub fn is_plaintext_to_remote(url: &str) -> bool {
    url.starts_with("http://") && url_host(url).is_ok_and(|h| !is_loopback_host(h))
}

fn u32_field(path: &str, v: &Value) -> Result<u32> {
    let n = integer(DOC, path, v)?;
    u32::try_from(n)
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| invalid(DOC, format!("{path} must be a positive 32-bit integer")))
}

fn parse_clickhouse(f: &mut Fields<'_>, single_server: bool) -> Result<ClickHouseConnection> {
    let coordinator_key = if single_server {
        "url"
    } else {
        "coordinator_url"
    };
    let coordinator_path = f.path(coordinator_key);
    let coordinator_url = check_url(&coordinator_path, f.required(coordinator_key)?)?;
    let mut member_urls = BTreeMap::new();
    // The field path of each member's URL, in the order of `member_urls`.
    let mut member_paths = BTreeMap::new();
    let members_path = f.path("members");
    let items = if single_server {
        // The server is its only member.
        member_urls.insert((1, 1), coordinator_url.clone());
        member_paths.insert((1, 1), coordinator_path.clone());
        Vec::new()
    } else {
        list(DOC, &members_path, f.required("members")?)?.to_vec()
    };
    for (i, item) in items.iter().enumerate() {
        let p = format!("{members_path}[{i}]");
        let mut m = Fields::new(DOC, &p, item)?;
        let shard = u32_field(&m.path("shard_num"), m.required("shard_num")?)?;
        let replica = u32_field(&m.path("replica_num"), m.required("replica_num")?)?;
        let url_path = m.path("url");
        let url = check_url(&url_path, m.required("url")?)?;
        m.finish()?;
        member_paths.insert((shard, replica), url_path);
        if member_urls.insert((shard, replica), url).is_some() {
            return Err(ManifestError::new(
                DOC,
                ErrorKind::DuplicateMember,
                format!("{p} repeats shard_num {shard} replica_num {replica}"),
            ));
        }
    }
    if member_urls.is_empty() {
        return Err(invalid(
            DOC,
            format!("{members_path} must list every member"),
        ));
    }
    let user = f.required_str("user")?;
    if user.is_empty() || user.chars().any(char::is_control) {
        return Err(invalid(
            DOC,
            format!("{} must be a user name", f.path("user")),
        ));
    }
    let password_env = env_name(&f.path("password_env"), f.required("password_env")?)?;
    let authority_path = f.path("authority");
    let mut a = Fields::new(DOC, &authority_path, f.required("authority")?)?;
    let authority_database = identifier(DOC, &a.path("database"), a.required("database")?)?;
    let authority_table = identifier(DOC, &a.path("table"), a.required("table")?)?;
    a.finish()?;
    let ddl_task_timeout_secs = if single_server {
        DEFAULT_DDL_TASK_TIMEOUT_SECS
    } else {
        seconds(f, "ddl_task_timeout_secs", DEFAULT_DDL_TASK_TIMEOUT_SECS)?
    };
    let request_timeout_secs = seconds(f, "request_timeout_secs", DEFAULT_REQUEST_TIMEOUT_SECS)?;
    let verification_timeout_secs = seconds(
        f,
        "verification_timeout_secs",
        DEFAULT_VERIFICATION_TIMEOUT_SECS,
    )?;
    let insecure_path = f.path("insecure_plaintext");
    let insecure_plaintext = match f.optional("insecure_plaintext") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(type_error(DOC, &insecure_path, "a boolean")),
    };
    let sslrootcert_path = f.path("sslrootcert");
    let sslrootcert = f.optional_str("sslrootcert")?;
    // Every URL with the field path that named it, the coordinator first.
    let urls: Vec<(String, &String)> =
        std::iter::once((coordinator_path.clone(), &coordinator_url))
            .chain(
                member_paths
                    .values()
                    .zip(member_urls.values())
                    .map(|(p, u)| (p.clone(), u)),
            )
            .collect();
    if let Some((p, _)) = urls
        .iter()
        .find(|(_, u)| !insecure_plaintext && is_plaintext_to_remote(u))
    {
        return Err(ManifestError::new(
            DOC,
            ErrorKind::PlaintextCredential,
            format!(
                "{p} is plain http:// to a host that is not loopback, so the credential would \
                     cross the network in clear: use https:// (or set {insecure_path}: true)"
            ),
        ));
    }
    if let Some(ca) = &sslrootcert {
        if !ca.starts_with('/') || ca.len() > 4096 || ca.chars().any(char::is_control) {
            return Err(invalid(
                DOC,
                format!("{sslrootcert_path} must be an absolute path"),
            ));
        }
        if !urls.iter().any(|(_, u)| u.starts_with("https://")) {
            return Err(invalid(
                DOC,
                format!("{sslrootcert_path} needs at least one https:// URL"),
            ));
        }
    }
    let endpoint = |url: String| ClickHouseEndpoint {
        url,
        sslrootcert: sslrootcert.clone(),
    };
    Ok(ClickHouseConnection {
        single_server,
        coordinator_url: endpoint(coordinator_url),
        member_urls: member_urls
            .into_iter()
            .map(|(k, u)| (k, endpoint(u)))
            .collect(),
        sslrootcert,
        insecure_plaintext,
        user,
        password_env,
        authority_database,
        authority_table,
        ddl_task_timeout_secs,
        request_timeout_secs,
        verification_timeout_secs,
    })
}

/// An optional duration field: 1 to 86400 seconds, `default` when absent.
fn seconds(f: &mut Fields<'_>, name: &'static str, default: u64) -> Result<u64> {
    let Some(v) = f.optional(name) else {
        return Ok(default);
    };
    let p = f.path(name);
    let n = integer(DOC, &p, v)?;
    u64::try_from(n)
        .ok()
        .filter(|n| (1..=86_400).contains(n))
        .ok_or_else(|| invalid(DOC, format!("{p} must be 1 to 86400 seconds")))
}

fn parse_postgres(f: &mut Fields<'_>) -> Result<PostgresConnection> {
    let endpoint_path = f.path("endpoint");
    let mut e = Fields::new(DOC, &endpoint_path, f.required("endpoint")?)?;
    let host = e.required_str("host")?;
    let host_ok = !host.is_empty()
        && host.len() <= 255
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b':' | b'/'));
    if !host_ok {
        return Err(invalid(
            DOC,
            format!(
                "{} must be a host name, address or socket directory",
                e.path("host")
            ),
        ));
    }
    let port_path = e.path("port");
    let port = u16::try_from(integer(DOC, &port_path, e.required("port")?)?)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| invalid(DOC, format!("{port_path} must be 1 to 65535")))?;
    let database = e.required_str("database")?;
    let user = e.required_str("user")?;
    for (name, value) in [("database", &database), ("user", &user)] {
        if value.is_empty() || value.len() > 63 || value.chars().any(char::is_control) {
            return Err(invalid(
                DOC,
                format!("{} must be 1 to 63 printable bytes", e.path(name)),
            ));
        }
    }
    let sslmode = match e.optional_str("sslmode")? {
        None => None,
        Some(m) => Some(match m.as_str() {
            "disable" => PgSslMode::Disable,
            "require" => PgSslMode::Require,
            "verify-ca" => PgSslMode::VerifyCa,
            "verify-full" => PgSslMode::VerifyFull,
            _ => {
                return Err(invalid(
                    DOC,
                    format!(
                        "{} must be disable, require, verify-ca or verify-full",
                        e.path("sslmode")
                    ),
                ));
            }
        }),
    };
    let sslrootcert = e.optional_str("sslrootcert")?;
    let sslmode_path = e.path("sslmode");
    let sslrootcert_path = e.path("sslrootcert");
    e.finish()?;
    let password_env = match f.optional("password_env") {
        None => None,
        Some(v) => Some(env_name(&f.path("password_env"), v)?),
    };
    let c = PostgresConnection {
        host,
        port,
        database,
        user,
        password_env,
        sslmode,
        sslrootcert,
    };
    let mode = c.effective_sslmode();
    if c.host.starts_with('/') && mode != PgSslMode::Disable {
        return Err(invalid(
            DOC,
            format!("{sslmode_path} must be disable for a unix socket directory"),
        ));
    }
    if let Some(ca) = &c.sslrootcert {
        if !matches!(mode, PgSslMode::VerifyCa | PgSslMode::VerifyFull) {
            return Err(invalid(
                DOC,
                format!("{sslrootcert_path} needs sslmode verify-ca or verify-full"),
            ));
        }
        if !ca.starts_with('/') || ca.len() > 4096 || ca.chars().any(char::is_control) {
            return Err(invalid(
                DOC,
                format!("{sslrootcert_path} must be an absolute path"),
            ));
        }
    }
    Ok(c)
}
