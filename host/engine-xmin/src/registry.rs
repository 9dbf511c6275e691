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
//!   OID and the cluster's system identifier.
//!
//! Credentials are read from an [`Environment`] when a connection is resolved; they never appear
//! in errors, evidence or `Debug` output.

use crate::error::{ErrorCode, Result, XminError};
use crate::identity::sha256_canonical;
use crate::manifest::{Manifest, check_identifier, schema_error, split_relation};
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
    /// Database pin (target and state connections only).
    #[serde(default)]
    pub database_pin: Option<DatabasePin>,
}

/// Connection kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionKind {
    /// A PostgreSQL source.
    PostgresSource,
    /// A PostgreSQL target or state database.
    PostgresTarget,
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
    /// Version 1 only: the current timeline.
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
    /// Target database pin.
    pub target_pin: DatabasePin,
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
            match c.kind {
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
        let target = self.connection(
            &manifest.target_connection_ref,
            ConnectionKind::PostgresTarget,
        )?;
        let state = self.connection(
            &manifest.state.connection_ref,
            ConnectionKind::PostgresTarget,
        )?;
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
            target_pin,
            state_schema,
            state_schema_conflict,
        })
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
            if a.system_identifier.is_some() || a.timeline.is_some() {
                return Err(bad(
                    "version 2 (catalog_identity) must not carry system_identifier or timeline",
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
