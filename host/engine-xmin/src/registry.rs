//! The environment-owned connection registry: logical connection refs → endpoints and pins.
//!
//! Manifests name connections only by logical ref. The registry, owned and reviewed by the
//! environment (never by a workload), holds each endpoint, the *name* of the environment
//! variable that carries its password, and the pins the route verifies:
//!
//! - a PostgreSQL **source** connection holds one closed `postgres_source_authority` document,
//!   version 1 (`physical_cluster`: adds the signed system identifier and timeline) or version 2
//!   (`catalog_identity`: never calls control or statistics functions);
//! - a PostgreSQL **target** (and state) connection holds a `database_pin`: database name and
//!   OID and the cluster's system identifier;
//! - a SQL Server **target** (and state) connection holds a closed `database_authorities` map:
//!   canonical database name → `database_id`, `create_token`, `database_guid`, for the target,
//!   every staging database and the state database it serves.
//!
//! Credentials are read from an [`Environment`] when a connection is resolved; they never appear
//! in errors, evidence or `Debug` output.

use crate::error::{ErrorCode, Result, XminError};
use crate::identity::sha256_canonical;
use crate::manifest::{Manifest, TargetKind, check_identifier, schema_error, split_relation};
use crate::yaml;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// Registry schema version this build reads.
pub const REGISTRY_VERSION: u32 = 1;

/// Where credentials come from: the process environment in production, a map in tests.
pub trait Environment {
    /// The value of a variable, if set.
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessEnvironment;

impl Environment for ProcessEnvironment {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl Environment for BTreeMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

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

/// The registry document.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Registry {
    /// Schema version; must be [`REGISTRY_VERSION`].
    pub version: u32,
    /// Environment name; part of the state identity.
    pub environment: String,
    /// Logical connections.
    pub connections: BTreeMap<String, Connection>,
}

/// One logical connection.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// `postgres_source` or `postgres_target`.
    pub kind: ConnectionKind,
    /// Where to connect.
    pub endpoint: EndpointSpec,
    /// Environment variable holding the password; none for password-less (e.g. trust/peer) auth.
    #[serde(default)]
    pub password_env: Option<String>,
    /// Default schema for state tables on this connection.
    #[serde(default)]
    pub default_schema: Option<String>,
    /// Source authority document (source connections only).
    #[serde(default)]
    pub postgres_source_authority: Option<SourceAuthority>,
    /// Database pin (PostgreSQL target and state connections only).
    #[serde(default)]
    pub database_pin: Option<DatabasePin>,
    /// The closed map of pinned databases (SQL Server connections only).
    #[serde(default)]
    pub database_authorities: Option<BTreeMap<String, MssqlDatabaseAuthority>>,
    /// Accept the server's certificate without validating its chain (SQL Server only; for
    /// disposable test instances). Default false: the chain is validated by rustls.
    #[serde(default)]
    pub trust_server_certificate: bool,
}

/// One pinned SQL Server database: exactly three fields.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MssqlDatabaseAuthority {
    /// `sys.databases.database_id`.
    pub database_id: i32,
    /// `create_date` as `datetime2(7)` ISO 8601 (`2026-08-16T09:14:22.1233333`).
    pub create_token: String,
    /// `sys.database_recovery_status.database_guid` (compared case-insensitively).
    pub database_guid: String,
}

/// Which database of a SQL Server route a pin serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MssqlRole {
    /// The target database.
    Target,
    /// The staging database (may be the target database).
    Staging,
    /// The state database.
    State,
}

impl MssqlRole {
    /// Stable role name used in codes and digests.
    pub fn name(self) -> &'static str {
        match self {
            MssqlRole::Target => "target",
            MssqlRole::Staging => "staging",
            MssqlRole::State => "state",
        }
    }
}

/// One resolved SQL Server pin: role, canonical name and authority.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MssqlPin {
    /// Role.
    pub role: MssqlRole,
    /// Canonical database name (the map key, exact spelling).
    pub name: String,
    /// The pinned authority.
    pub authority: MssqlDatabaseAuthority,
}

/// The pins of a SQL Server route and the sessions they need.
#[derive(Clone, Debug)]
pub struct MssqlRoutePins {
    /// Target, staging, then state.
    pub pins: [MssqlPin; 3],
    /// Schema of the staging tables in the staging database.
    pub staging_schema: String,
    /// The state connection (a separate session, for the topology and principal proof).
    pub state_endpoint: Endpoint,
    /// The target connection's `trust_server_certificate`.
    pub trust_server_certificate: bool,
}

impl MssqlRoutePins {
    /// The pin of a role.
    pub fn pin(&self, role: MssqlRole) -> &MssqlPin {
        &self.pins[role as usize]
    }

    /// The role-aware digest of the pins that enters invocation and receipt identity:
    /// SHA-256 over `role \0 name \0 id \0 token \0 lower(guid) \n` per role, in role order.
    pub fn digest(&self) -> String {
        mssql_pin_digest(&self.pins)
    }
}

/// The role-aware pin digest (see [`MssqlRoutePins::digest`]).
pub fn mssql_pin_digest(pins: &[MssqlPin]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"dpone.mssql.database_authorities.v1\n");
    for p in pins {
        h.update(p.role.name().as_bytes());
        h.update([0]);
        h.update(p.name.as_bytes());
        h.update([0]);
        h.update(p.authority.database_id.to_string().as_bytes());
        h.update([0]);
        h.update(p.authority.create_token.as_bytes());
        h.update([0]);
        h.update(p.authority.database_guid.to_ascii_lowercase().as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Resolves a database name against a closed map: the exact key, else the single key equal up
/// to ASCII case. Non-ASCII names, no key, or several folding keys are rejected.
pub fn resolve_database_alias<'a>(
    authorities: &'a BTreeMap<String, MssqlDatabaseAuthority>,
    requested: &str,
) -> std::result::Result<(&'a str, &'a MssqlDatabaseAuthority), &'static str> {
    if let Some((k, a)) = authorities.get_key_value(requested) {
        return Ok((k.as_str(), a));
    }
    if !requested.is_ascii() {
        return Err("alias_ambiguous");
    }
    let mut found = authorities
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(requested));
    match (found.next(), found.next()) {
        (Some((k, a)), None) => Ok((k.as_str(), a)),
        (None, _) => Err("pin_missing"),
        (Some(_), Some(_)) => Err("alias_ambiguous"),
    }
}

/// The pins a target of either dialect carries.
#[derive(Clone, Debug)]
pub enum TargetPins {
    /// A PostgreSQL target: one database pin (state in the same database).
    Postgres(DatabasePin),
    /// A SQL Server target: target, staging and state database authorities.
    SqlServer(Box<MssqlRoutePins>),
}

impl TargetPins {
    /// The PostgreSQL pin, if this is a PostgreSQL target.
    pub fn postgres(&self) -> Option<&DatabasePin> {
        match self {
            TargetPins::Postgres(p) => Some(p),
            TargetPins::SqlServer(_) => None,
        }
    }

    /// The SQL Server pins, if this is a SQL Server target.
    pub fn sql_server(&self) -> Option<&MssqlRoutePins> {
        match self {
            TargetPins::Postgres(_) => None,
            TargetPins::SqlServer(p) => Some(p),
        }
    }
}

/// Connection kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionKind {
    /// A PostgreSQL source.
    PostgresSource,
    /// A PostgreSQL target or state database.
    PostgresTarget,
    /// A SQL Server target or state database.
    MssqlTarget,
}

/// Endpoint coordinates (no credentials).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointSpec {
    /// Host name, address, or a unix-socket directory (starting with `/`).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Database to connect to.
    pub database: String,
    /// Login role.
    pub user: String,
    /// PostgreSQL TLS mode (libpq's names); absent: `verify-full` for a TCP host, `disable`
    /// for a unix socket. Refused on SQL Server connections (TLS is always required there;
    /// they use `sslrootcert` or `trust_server_certificate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslmode: Option<SslMode>,
    /// The pinned CA bundle (an absolute path to PEM certificates) that `verify-ca` and
    /// `verify-full` trust; absent: the system's root certificates. On a SQL Server connection
    /// the CA that validates the server's chain (tiberius adds it to the system's roots);
    /// mutually exclusive with `trust_server_certificate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sslrootcert: Option<String>,
}

/// TLS mode of a PostgreSQL connection (libpq's names and meanings).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS required; the certificate is not verified (encryption only).
    Require,
    /// TLS required; the certificate chain must lead to a trusted CA (any host name).
    VerifyCa,
    /// TLS required; trusted chain and the certificate names the host.
    VerifyFull,
}

impl EndpointSpec {
    /// Whether the host is a unix-socket directory.
    pub fn is_unix_socket(&self) -> bool {
        self.host.starts_with('/')
    }

    /// The TLS mode in effect: the configured one, else `verify-full` for a TCP host and
    /// `disable` for a unix socket.
    pub fn effective_sslmode(&self) -> SslMode {
        match self.sslmode {
            Some(m) => m,
            None if self.is_unix_socket() => SslMode::Disable,
            None => SslMode::VerifyFull,
        }
    }
}

/// A resolved endpoint with its credential.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Coordinates.
    pub spec: EndpointSpec,
    /// Password, if the registry names a variable for it.
    pub password: Option<Secret>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Endpoint(<redacted>)")
    }
}

/// `name` + `oid`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NamedOid {
    /// Exact catalog name.
    pub name: String,
    /// Catalog OID.
    pub oid: u32,
}

/// The pins of one relation.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RelationPin {
    /// `pg_namespace.oid` of the schema.
    pub schema_oid: u32,
    /// `pg_class.oid` of the relation.
    pub relation_oid: u32,
}

/// Topology role the source must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryRole {
    /// `pg_is_in_recovery() = false`.
    Primary,
    /// `pg_is_in_recovery() = true`.
    Standby,
}

/// Source authority profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthorityProfile {
    /// Version 1: adds system identifier and timeline (needs control-function grants).
    PhysicalCluster,
    /// Version 2: ordinary catalog reads and `pg_is_in_recovery()` only.
    CatalogIdentity,
}

/// The `postgres_source_authority` document, as written.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SourceAuthority {
    /// 1 or 2.
    pub version: u32,
    /// Must match the version: 1 = `physical_cluster`, 2 = `catalog_identity`.
    pub profile: AuthorityProfile,
    /// Required topology role.
    pub recovery_role: RecoveryRole,
    /// Database name and OID.
    pub database: NamedOid,
    /// `current_user` name and OID.
    pub effective_principal: NamedOid,
    /// `session_user` name and OID.
    pub session_principal: NamedOid,
    /// Pinned relations keyed by canonical `schema.relation`.
    pub relations: BTreeMap<String, RelationPin>,
    /// Version 1 only: `pg_control_system().system_identifier`, as decimal text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_identifier: Option<String>,
    /// Version 1 only: the current timeline (required). Version 2 refuses it: it calls no
    /// control or WAL-file function that could verify it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<u32>,
}

/// A target or state database pin.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DatabasePin {
    /// Exact database name.
    pub name: String,
    /// `pg_database.oid`.
    pub oid: u32,
    /// `pg_control_system().system_identifier`, as decimal text.
    pub system_identifier: String,
}

/// What the source boundary must verify for one route: the selected profile and one relation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SelectedSourceAuthority {
    /// Version (1 or 2).
    pub version: u32,
    /// Profile.
    pub profile: AuthorityProfile,
    /// Topology role.
    pub recovery_role: RecoveryRole,
    /// Database pin.
    pub database: NamedOid,
    /// Effective principal pin.
    pub effective_principal: NamedOid,
    /// Session principal pin.
    pub session_principal: NamedOid,
    /// Canonical schema name.
    pub schema: String,
    /// Canonical relation name.
    pub relation: String,
    /// Relation pins.
    pub relation_pin: RelationPin,
    /// Version 1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_identifier: Option<String>,
    /// Version 1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<u32>,
}

impl SelectedSourceAuthority {
    /// sha256 of the canonical JSON of this selection: the versioned authority digest bound into
    /// the route identity. Unrelated relation pins and endpoint coordinates are excluded.
    pub fn digest(&self) -> String {
        sha256_canonical(&("dpone.xmin.source-authority.v1", self))
    }
}

impl SelectedSourceAuthority {
    /// The selected relation's registry key, `schema.relation`, exactly as the registry spells
    /// it: what the run reads. A manifest's `source_relation` may reach it as an ASCII-case
    /// alias ([`resolve_relation`], spec 003: the OID pins make it the same pinned relation);
    /// a run under a nonproduction reservation, whose scope names relations byte-exactly,
    /// refuses unless the manifest names this key exactly.
    pub fn relation_key(&self) -> String {
        format!("{}.{}", self.schema, self.relation)
    }
}

/// Registry connections resolved for one manifest.
#[derive(Clone, Debug)]
pub struct ResolvedRoute {
    /// Environment name.
    pub environment: String,
    /// Source endpoint.
    pub source: Endpoint,
    /// Source authority selected for the manifest's relation.
    pub source_authority: SelectedSourceAuthority,
    /// Target endpoint (also used for state: one connection, one transaction).
    pub target: Endpoint,
    /// Target database pins of the route's dialect.
    pub target_pins: TargetPins,
    /// Schema of the state tables and how it was chosen.
    pub state_schema: String,
    /// Evidence of a manifest/registry schema conflict, if any (manifest wins).
    pub state_schema_conflict: Option<String>,
}

impl Registry {
    /// Parses and checks a registry from strict YAML.
    pub fn from_yaml(text: &str) -> Result<Self> {
        let value = yaml::parse_strict(text)?;
        let reg: Registry = serde_json::from_value(value).map_err(|e| {
            schema_error(
                &e,
                ErrorCode::RegistryUnknownField,
                ErrorCode::RegistryInvalid,
                "registry",
            )
        })?;
        reg.check()?;
        Ok(reg)
    }

    /// Structural checks that do not depend on a manifest.
    pub fn check(&self) -> Result<()> {
        let invalid = |m: String| XminError::new(ErrorCode::RegistryInvalid, m);
        if self.version != REGISTRY_VERSION {
            return Err(invalid("registry version must be 1".into()));
        }
        if self.environment.is_empty()
            || !self
                .environment
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        {
            return Err(invalid(
                "environment must be ASCII letters, digits, '_', '-' or '.'".into(),
            ));
        }
        for (name, c) in &self.connections {
            if c.endpoint.host.is_empty()
                || c.endpoint.database.is_empty()
                || c.endpoint.user.is_empty()
            {
                return Err(invalid(format!(
                    "connection {name:?}: endpoint fields must not be empty"
                )));
            }
            check_tls(name, c).map_err(invalid)?;
            if let Some(var) = &c.password_env
                && (var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
            {
                return Err(invalid(format!(
                    "connection {name:?}: password_env must name an environment variable"
                )));
            }
            if let Some(s) = &c.default_schema {
                check_identifier(s, "default_schema")
                    .map_err(|e| invalid(format!("connection {name:?}: {}", e.message())))?;
            }
            if c.kind != ConnectionKind::MssqlTarget
                && (c.database_authorities.is_some() || c.trust_server_certificate)
            {
                return Err(invalid(format!(
                    "connection {name:?}: database_authorities and trust_server_certificate apply to mssql_target connections only"
                )));
            }
            match c.kind {
                ConnectionKind::MssqlTarget => check_mssql_connection(name, c)?,
                ConnectionKind::PostgresSource => {
                    if c.database_pin.is_some() {
                        return Err(invalid(format!(
                            "connection {name:?}: a source connection holds no database_pin"
                        )));
                    }
                    let Some(a) = &c.postgres_source_authority else {
                        return Err(XminError::new(
                            ErrorCode::RegistryAuthorityInvalid,
                            format!("source connection {name:?} lacks postgres_source_authority"),
                        ));
                    };
                    check_authority(name, a)?;
                }
                ConnectionKind::PostgresTarget => {
                    if c.postgres_source_authority.is_some() {
                        return Err(invalid(format!(
                            "connection {name:?}: a target connection holds no source authority"
                        )));
                    }
                    let Some(pin) = &c.database_pin else {
                        return Err(XminError::new(
                            ErrorCode::RegistryPinMissing,
                            format!("target connection {name:?} lacks database_pin"),
                        ));
                    };
                    check_system_identifier(&pin.system_identifier).map_err(|_| {
                        XminError::new(
                            ErrorCode::RegistryInvalid,
                            format!(
                                "connection {name:?}: system_identifier must be decimal digits"
                            ),
                        )
                    })?;
                    if pin.name.is_empty() || pin.oid == 0 {
                        return Err(XminError::new(
                            ErrorCode::RegistryPinMissing,
                            format!("connection {name:?}: database_pin needs a name and an OID"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn connection(&self, r: &str, kind: ConnectionKind) -> Result<&Connection> {
        match self.connections.get(r) {
            Some(c) if c.kind == kind => Ok(c),
            Some(_) => Err(XminError::new(
                ErrorCode::RegistryConnectionUnknown,
                format!("connection {r:?} is not of kind {kind:?}"),
            )),
            None => Err(XminError::new(
                ErrorCode::RegistryConnectionUnknown,
                format!("connection {r:?} is not in the registry"),
            )),
        }
    }

    /// Resolves a manifest's connections, pins and credentials. No I/O besides reading `env`.
    pub fn resolve(&self, manifest: &Manifest, env: &dyn Environment) -> Result<ResolvedRoute> {
        let source = self.connection(
            &manifest.source_connection_ref,
            ConnectionKind::PostgresSource,
        )?;
        let target_kind = match manifest.target_kind {
            TargetKind::Postgres => ConnectionKind::PostgresTarget,
            TargetKind::Mssql => ConnectionKind::MssqlTarget,
        };
        let target = self.connection(&manifest.target_connection_ref, target_kind)?;
        let state = self.connection(&manifest.state.connection_ref, target_kind)?;
        let target_pins = match manifest.target_kind {
            TargetKind::Postgres => TargetPins::Postgres(postgres_pins(target, state)?),
            TargetKind::Mssql => {
                TargetPins::SqlServer(Box::new(mssql_pins(manifest, target, state, env)?))
            }
        };
        let authority = source.postgres_source_authority.as_ref().ok_or_else(|| {
            XminError::new(
                ErrorCode::RegistryAuthorityInvalid,
                "source lacks its authority document",
            )
        })?;
        let (canonical, pin) = resolve_relation(authority, &manifest.source_relation)?;
        let (schema, relation) = split_relation(canonical)?;
        let (state_schema, state_schema_conflict) = match (
            &manifest.state.schema,
            &state.default_schema,
        ) {
            (Some(m), Some(r)) if m != r => (
                m.clone(),
                Some("state.schema from the manifest overrides the registry default_schema".into()),
            ),
            (Some(m), _) => (m.clone(), None),
            (None, Some(r)) => (r.clone(), None),
            (None, None) => {
                return Err(XminError::new(
                    ErrorCode::ManifestInvalid,
                    "no state schema: set state.schema or the state connection's default_schema",
                ));
            }
        };
        Ok(ResolvedRoute {
            environment: self.environment.clone(),
            source: endpoint(source, env)?,
            source_authority: SelectedSourceAuthority {
                version: authority.version,
                profile: authority.profile,
                recovery_role: authority.recovery_role,
                database: authority.database.clone(),
                effective_principal: authority.effective_principal.clone(),
                session_principal: authority.session_principal.clone(),
                schema: schema.to_owned(),
                relation: relation.to_owned(),
                relation_pin: pin.clone(),
                system_identifier: authority.system_identifier.clone(),
                timeline: authority.timeline,
            },
            target: endpoint(target, env)?,
            target_pins,
            state_schema,
            state_schema_conflict,
        })
    }
}

fn postgres_pins(target: &Connection, state: &Connection) -> Result<DatabasePin> {
    let target_pin = target.database_pin.clone().ok_or_else(|| {
        XminError::new(
            ErrorCode::RegistryPinMissing,
            "target connection lacks database_pin",
        )
    })?;
    let state_pin = state.database_pin.as_ref().ok_or_else(|| {
        XminError::new(
            ErrorCode::RegistryPinMissing,
            "state connection lacks database_pin",
        )
    })?;
    if *state_pin != target_pin {
        return Err(XminError::new(
            ErrorCode::RegistryStateNotTargetAtomic,
            "state and target pins name different databases; target_atomic needs one database",
        ));
    }
    if target.endpoint.database != target_pin.name {
        return Err(XminError::new(
            ErrorCode::RegistryInvalid,
            "target endpoint database differs from its pinned name",
        ));
    }
    Ok(target_pin)
}

/// Resolves target, staging and state against the closed maps: the target connection pins
/// target and staging, the state connection pins the state database.
fn mssql_pins(
    manifest: &Manifest,
    target: &Connection,
    state: &Connection,
    env: &dyn Environment,
) -> Result<MssqlRoutePins> {
    let empty = BTreeMap::new();
    let resolve = |role: MssqlRole, c: &Connection, requested: &str| -> Result<MssqlPin> {
        let map = c.database_authorities.as_ref().unwrap_or(&empty);
        let (name, authority) = resolve_database_alias(map, requested).map_err(|reason| {
            let code = if reason == "alias_ambiguous" {
                ErrorCode::RegistryRelationAliasAmbiguous
            } else {
                ErrorCode::RegistryPinMissing
            };
            XminError::new(
                code,
                format!(
                    "mssql_transaction.{}_database_{reason}: the {} database is not pinned exactly once by its connection's database_authorities",
                    role.name(),
                    role.name()
                ),
            )
        })?;
        Ok(MssqlPin {
            role,
            name: name.to_owned(),
            authority: authority.clone(),
        })
    };
    let target_db = manifest
        .target_database
        .as_deref()
        .unwrap_or(&target.endpoint.database);
    let staging_db = manifest.staging_database.as_deref().unwrap_or(target_db);
    let target_pin = resolve(MssqlRole::Target, target, target_db)?;
    let staging_pin = resolve(MssqlRole::Staging, target, staging_db)?;
    let state_pin = resolve(MssqlRole::State, state, &state.endpoint.database)?;
    Ok(MssqlRoutePins {
        pins: [target_pin, staging_pin, state_pin],
        staging_schema: manifest
            .staging_schema
            .clone()
            .unwrap_or_else(|| "dbo".to_owned()),
        state_endpoint: endpoint(state, env)?,
        trust_server_certificate: target.trust_server_certificate,
    })
}

fn check_mssql_connection(name: &str, c: &Connection) -> Result<()> {
    let invalid = |m: String| XminError::new(ErrorCode::RegistryInvalid, m);
    if c.database_pin.is_some() || c.postgres_source_authority.is_some() {
        return Err(invalid(format!(
            "connection {name:?}: an mssql_target connection holds database_authorities only"
        )));
    }
    let map = match &c.database_authorities {
        Some(m) if !m.is_empty() => m,
        _ => {
            return Err(XminError::new(
                ErrorCode::RegistryPinMissing,
                format!("mssql_target connection {name:?} lacks database_authorities"),
            ));
        }
    };
    let keys: Vec<&String> = map.keys().collect();
    for (i, k) in keys.iter().enumerate() {
        if k.is_empty() || k.len() > 128 || !k.is_ascii() || k.chars().any(char::is_control) {
            return Err(invalid(format!(
                "connection {name:?}: database names must be 1-128 printable ASCII characters"
            )));
        }
        if keys[..i].iter().any(|o| o.eq_ignore_ascii_case(k)) {
            return Err(XminError::new(
                ErrorCode::RegistryRelationAliasAmbiguous,
                format!(
                    "connection {name:?}: two database_authorities keys fold to the same ASCII name"
                ),
            ));
        }
        let a = &map[*k];
        if a.database_id <= 0 {
            return Err(invalid(format!(
                "connection {name:?}: database_id must be positive"
            )));
        }
        if !is_create_token(&a.create_token) {
            return Err(invalid(format!(
                "connection {name:?}: create_token must be datetime2(7) ISO 8601 (YYYY-MM-DDTHH:MM:SS.fffffff)"
            )));
        }
        if !is_guid(&a.database_guid) {
            return Err(invalid(format!(
                "connection {name:?}: database_guid must be a GUID (8-4-4-4-12 hex digits)"
            )));
        }
    }
    if resolve_database_alias(map, &c.endpoint.database).is_err() {
        return Err(XminError::new(
            ErrorCode::RegistryPinMissing,
            format!("connection {name:?}: its endpoint database is not pinned exactly once"),
        ));
    }
    Ok(())
}

fn is_create_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 27
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            _ => c.is_ascii_digit(),
        })
}

fn is_guid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, &c)| match i {
            8 | 13 | 18 | 23 => c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

impl Connection {
    /// The endpoint with its credential read from `env`; an unset password variable is
    /// [`ErrorCode::RegistryCredentialMissing`].
    pub fn endpoint(&self, env: &dyn Environment) -> Result<Endpoint> {
        endpoint(self, env)
    }
}

fn endpoint(c: &Connection, env: &dyn Environment) -> Result<Endpoint> {
    let password = match &c.password_env {
        None => None,
        Some(var) => Some(Secret::new(env.var(var).ok_or_else(|| {
            XminError::new(
                ErrorCode::RegistryCredentialMissing,
                format!("environment variable {var} named by the registry is not set"),
            )
        })?)),
    };
    Ok(Endpoint {
        spec: c.endpoint.clone(),
        password,
    })
}

fn check_system_identifier(s: &str) -> Result<u64, ()> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(());
    }
    s.parse::<u64>().map_err(|_| ())
}

/// TLS options: PostgreSQL connections only; no TLS over a unix socket; a CA bundle only where
/// it is used (`verify-ca`, `verify-full`) and named by an absolute path.
fn check_tls(name: &str, c: &Connection) -> std::result::Result<(), String> {
    let e = &c.endpoint;
    if c.kind == ConnectionKind::MssqlTarget {
        if e.sslmode.is_some() {
            return Err(format!(
                "connection {name:?}: sslmode is a PostgreSQL option (SQL Server connections \
                 always require TLS; they use sslrootcert or trust_server_certificate)"
            ));
        }
        if let Some(ca) = &e.sslrootcert {
            if c.trust_server_certificate {
                return Err(format!(
                    "connection {name:?}: sslrootcert and trust_server_certificate are mutually \
                     exclusive (a pinned CA validates the chain; trust_server_certificate skips \
                     validation)"
                ));
            }
            if !ca.starts_with('/') || ca.contains('\0') {
                return Err(format!(
                    "connection {name:?}: sslrootcert must be an absolute path"
                ));
            }
        }
        return Ok(());
    }
    let mode = e.effective_sslmode();
    if e.is_unix_socket() && mode != SslMode::Disable {
        return Err(format!(
            "connection {name:?}: a unix socket endpoint has no TLS (sslmode must be disable)"
        ));
    }
    if let Some(ca) = &e.sslrootcert {
        if !matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) {
            return Err(format!(
                "connection {name:?}: sslrootcert needs sslmode verify-ca or verify-full"
            ));
        }
        if !ca.starts_with('/') || ca.contains('\0') {
            return Err(format!(
                "connection {name:?}: sslrootcert must be an absolute path"
            ));
        }
    }
    Ok(())
}

fn check_authority(name: &str, a: &SourceAuthority) -> Result<()> {
    let bad = |m: &str| {
        XminError::new(
            ErrorCode::RegistryAuthorityInvalid,
            format!("source connection {name:?}: {m}"),
        )
    };
    match (a.version, a.profile) {
        (1, AuthorityProfile::PhysicalCluster) => {
            let sys = a
                .system_identifier
                .as_deref()
                .ok_or_else(|| bad("version 1 needs system_identifier"))?;
            check_system_identifier(sys)
                .map_err(|()| bad("system_identifier must be decimal digits"))?;
            if a.timeline.is_none_or(|t| t == 0) {
                return Err(bad("version 1 needs a non-zero timeline"));
            }
        }
        (2, AuthorityProfile::CatalogIdentity) => {
            if a.system_identifier.is_some() {
                return Err(bad(
                    "version 2 (catalog_identity) must not carry system_identifier",
                ));
            }
            // Spec 003: version 2 never calls control, WAL-file or statistics functions, so
            // it cannot verify a timeline; a signed field is never silently ignored.
            if a.timeline.is_some() {
                return Err(bad(
                    "version 2 (catalog_identity) must not carry timeline (it reads no control \
                     or WAL-file function); pin the timeline with version 1 (physical_cluster)",
                ));
            }
        }
        (1 | 2, _) => {
            return Err(bad(
                "profile does not match version (1 = physical_cluster, 2 = catalog_identity)",
            ));
        }
        _ => return Err(bad("unsupported authority version (supported: 1, 2)")),
    }
    for n in [&a.database, &a.effective_principal, &a.session_principal] {
        if n.name.is_empty() || n.oid == 0 {
            return Err(bad(
                "database and principal pins need a name and a non-zero OID",
            ));
        }
    }
    if a.relations.is_empty() {
        return Err(bad("relations must pin at least one relation"));
    }
    let keys: Vec<&String> = a.relations.keys().collect();
    for (i, k) in keys.iter().enumerate() {
        let (s, r) = split_relation(k).map_err(|_| bad("relation keys must be schema.relation"))?;
        check_identifier(s, "relation")
            .map_err(|_| bad("relation keys must be plain ASCII identifiers"))?;
        check_identifier(r, "relation")
            .map_err(|_| bad("relation keys must be plain ASCII identifiers"))?;
        if keys[..i].iter().any(|o| o.eq_ignore_ascii_case(k)) {
            return Err(XminError::new(
                ErrorCode::RegistryRelationAliasAmbiguous,
                format!(
                    "source connection {name:?}: two relation pins fold to the same ASCII name"
                ),
            ));
        }
        let p = &a.relations[*k];
        if p.schema_oid == 0 || p.relation_oid == 0 {
            return Err(bad("relation pins need non-zero OIDs"));
        }
    }
    Ok(())
}

/// Resolves an authored relation to its canonical pinned key: an exact key, or the single key
/// equal to it under ASCII case folding.
pub fn resolve_relation<'a>(
    a: &'a SourceAuthority,
    authored: &str,
) -> Result<(&'a str, &'a RelationPin)> {
    if !authored.is_ascii() {
        return Err(XminError::new(
            ErrorCode::RegistryRelationAliasAmbiguous,
            "relation alias is not ASCII",
        ));
    }
    if let Some((k, p)) = a.relations.get_key_value(authored) {
        return Ok((k.as_str(), p));
    }
    let mut found = a
        .relations
        .iter()
        .filter(|(k, _)| k.eq_ignore_ascii_case(authored));
    match (found.next(), found.next()) {
        (Some((k, p)), None) => Ok((k.as_str(), p)),
        (None, _) => Err(XminError::new(
            ErrorCode::RegistryRelationUnpinned,
            "source relation has no pin in the source authority document",
        )),
        (Some(_), Some(_)) => Err(XminError::new(
            ErrorCode::RegistryRelationAliasAmbiguous,
            "source relation alias folds to several pinned relations",
        )),
    }
}
