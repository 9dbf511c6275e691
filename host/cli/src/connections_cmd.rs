//! `check --connections REGISTRY` without a manifest: review of the environment-owned XMin
//! connection registry.
//!
//! The registry is parsed strictly (its errors keep their `DPONE_XMIN_REGISTRY_*` and
//! `DPONE_XMIN_YAML_*` codes). Then every connection, in name order, is connected to and its live
//! identity observed, and each pinned field is printed with its pinned and observed value and a
//! status: `match`, `MISMATCH`, `refused` (the server answered and is one the route refuses,
//! e.g. Babelfish: permanent, exit 1) or `unreachable` (with a stable code; retry, exit 75).
//! `--offline` checks the structure only and prints the pins, verifying nothing.
//!
//! Connections are named only by logical name and kind: the output never holds hosts, ports,
//! passwords or connection strings, and never server text (a failure carries a stable code and
//! the adapter's sanitized detail: SQLSTATE, SQL Server error number or I/O error kind).

use crate::exit::{Failure, RETRY, print_json_contract};
use crate::input::InputKind;
use crate::render::clean;
use crate::route::{CheckArgs, MANIFEST_REQUIRED};
use crate::shipped;
use dpone_adapter_mssql::conn::{self as mssql, ConnError};
use dpone_adapter_mssql::pins::{self, CatalogRow, PinError, Role};
use dpone_adapter_mssql::server::{self as mssql_server, ServerFacts};
use dpone_adapter_postgres::discover::{discover_database_pin, discover_source_authority};
use dpone_engine_xmin::registry::{
    AuthorityProfile, Connection, ConnectionKind, Endpoint, Environment, MssqlDatabaseAuthority,
    RecoveryRole, SourceAuthority,
};
use dpone_engine_xmin::{ErrorCode, ProcessEnvironment, Registry, XminError};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::time::Duration;

/// Schema id of the JSON report.
pub const SCHEMA: &str = "dpone.connections-check.v1";
/// Some pinned field differs from the live value (exit 1, refused).
pub const PIN_DRIFT: &str = "DPONE_CONNECTIONS_PIN_DRIFT";
/// Some pinned field could not be observed (exit 75).
pub const UNREACHABLE: &str = "DPONE_CONNECTIONS_UNREACHABLE";
/// A server answered and is one the route refuses (exit 1: retrying does not change it).
pub const SERVER_REFUSED: &str = "DPONE_CONNECTIONS_SERVER_REFUSED";
/// Field code: observing the connection took longer than [`OBSERVE_TIMEOUT`].
pub const TIMEOUT: &str = "DPONE_CONNECTIONS_TIMEOUT";
/// Upper bound for observing one connection (connect and every catalog read).
pub const OBSERVE_TIMEOUT: Duration = Duration::from_secs(60);

/// Status of one field (and, aggregated, of a connection).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
enum Status {
    #[serde(rename = "match")]
    Match,
    #[serde(rename = "MISMATCH")]
    Mismatch,
    #[serde(rename = "refused")]
    Refused,
    #[serde(rename = "unreachable")]
    Unreachable,
    #[serde(rename = "not_verified")]
    NotVerified,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Match => "match",
            Status::Mismatch => "MISMATCH",
            Status::Refused => "refused",
            Status::Unreachable => "unreachable",
            Status::NotVerified => "not_verified",
        }
    }
}

/// Whether the servers were asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Mode {
    Live,
    Offline,
}

/// The verdict over every field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    Match,
    Drift,
    Refused,
    Unreachable,
    NotVerified,
}

/// The report (`dpone.connections-check.v1`).
#[derive(Debug, Serialize)]
struct Report {
    schema: &'static str,
    mode: Mode,
    environment: String,
    outcome: Outcome,
    code: Option<&'static str>,
    note: String,
    summary: Summary,
    connections: Vec<ConnectionReport>,
}

#[derive(Debug, Default, Serialize)]
struct Summary {
    connections: usize,
    fields: usize,
    #[serde(rename = "match")]
    matched: usize,
    mismatch: usize,
    refused: usize,
    unreachable: usize,
    not_verified: usize,
}

#[derive(Debug, Serialize)]
struct ConnectionReport {
    name: String,
    kind: ConnectionKind,
    status: Status,
    /// Set when the connection as a whole could not be observed (connect failed, timed out).
    code: Option<String>,
    detail: Option<String>,
    fields: Vec<FieldReport>,
}

#[derive(Debug, Serialize)]
struct FieldReport {
    field: String,
    pinned: Value,
    observed: Value,
    status: Status,
    code: Option<String>,
    detail: Option<String>,
}

/// One pinned (or required) value of a connection.
struct Pin {
    field: String,
    pinned: Value,
    /// The code a run would fail with if the live value differs.
    mismatch: String,
    /// Compare strings ignoring ASCII case (SQL Server GUIDs).
    fold_case: bool,
}

fn pin(field: impl Into<String>, pinned: Value, mismatch: impl Into<String>) -> Pin {
    Pin {
        field: field.into(),
        pinned,
        mismatch: mismatch.into(),
        fold_case: false,
    }
}

/// A live value; `code` overrides the pin's mismatch code (a missing relation, the verifier's
/// verdict).
struct Observed {
    value: Value,
    code: Option<String>,
}

/// Why a field (or a whole connection) was not observed.
#[derive(Clone, Debug)]
struct Unobserved {
    code: String,
    detail: String,
    /// The server answered and was refused for what it is (permanent): the fields are
    /// `refused`, not `unreachable`, and the check exits 1 rather than 75.
    refused: bool,
}

impl Unobserved {
    /// Not observed for a reason that may pass (network, login, timeout).
    fn unreachable(code: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            code: code.into(),
            detail: detail.into(),
            refused: false,
        }
    }

    fn xmin(e: &XminError) -> Self {
        Self::unreachable(e.code().as_str(), e.message())
    }

    fn mssql(code: ErrorCode, e: &ConnError) -> Self {
        Self::unreachable(code.as_str(), e.to_string())
    }
}

type Observations = BTreeMap<String, Result<Observed, Unobserved>>;

fn seen(value: Value) -> Result<Observed, Unobserved> {
    Ok(Observed { value, code: None })
}

/// `check` without a manifest: the registry check.
pub fn check(args: &CheckArgs) -> Result<(), Failure> {
    let path = args.route.connections.as_ref().ok_or_else(|| {
        Failure::bad_input(
            MANIFEST_REQUIRED,
            "check needs --manifest (workload check) or --connections / DPONE_CONNECTIONS \
             (connection registry check)",
        )
    })?;
    let text = String::from_utf8(shipped::read_input(path, InputKind::ConnectionRegistry)?)
        .map_err(|_| {
            Failure::bad_input(
                "DPONE_CLI_INPUT_MALFORMED",
                "the connection registry is not UTF-8",
            )
        })?;
    let registry = Registry::from_yaml(&text).map_err(|e| registry_failure(&e))?;
    let report = if args.offline {
        offline_report(&registry)
    } else {
        let endpoints = resolve_endpoints(&registry, &ProcessEnvironment)?;
        block_on(live_report(&registry, &endpoints))?
    };
    // The table is this command's human summary: shown in text mode (`--output text`, or a
    // terminal under `--output auto`); otherwise, and always with `--json` (an alias of
    // `--output json`), the JSON contract.
    if args.json || !crate::render::text_mode() {
        print_json_contract(&report)?;
    } else {
        crate::exit::write_stdout(&render_table(&report))?;
    }
    verdict(&report)
}

/// Registry errors are bad input and keep their code.
fn registry_failure(e: &XminError) -> Failure {
    Failure::bad_input(e.code().as_str(), e.message())
}

/// Each connection's endpoint with its credential, before anything is contacted: an unset
/// password variable fails the check as the route would.
fn resolve_endpoints(
    registry: &Registry,
    env: &dyn Environment,
) -> Result<BTreeMap<String, Endpoint>, Failure> {
    registry
        .connections
        .iter()
        .map(|(name, c)| {
            let endpoint = c.endpoint(env).map_err(|e| {
                Failure::bad_input(
                    e.code().as_str(),
                    format!("connection {name:?}: {}", e.message()),
                )
            })?;
            Ok((name.clone(), endpoint))
        })
        .collect()
}

fn block_on<F: Future>(future: F) -> Result<F::Output, Failure> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::internal("DPONE_CLI_RUNTIME", e.kind().to_string()))?;
    Ok(runtime.block_on(future))
}

fn recovery_role(r: RecoveryRole) -> &'static str {
    match r {
        RecoveryRole::Primary => "primary",
        RecoveryRole::Standby => "standby",
    }
}

/// The pins of a source authority document, in review order.
fn source_pins(a: &SourceAuthority) -> Vec<Pin> {
    use ErrorCode as C;
    let named = |field: &str, n: &dpone_engine_xmin::registry::NamedOid, code: C| {
        [
            pin(format!("{field}.name"), json!(n.name), code.as_str()),
            pin(format!("{field}.oid"), json!(n.oid), code.as_str()),
        ]
    };
    let mut out = vec![pin(
        "recovery_role",
        json!(recovery_role(a.recovery_role)),
        C::SourceRecoveryRoleMismatch.as_str(),
    )];
    out.extend(named("database", &a.database, C::SourceDatabasePinMismatch));
    out.extend(named(
        "effective_principal",
        &a.effective_principal,
        C::SourcePrincipalPinMismatch,
    ));
    out.extend(named(
        "session_principal",
        &a.session_principal,
        C::SourcePrincipalPinMismatch,
    ));
    for (key, r) in &a.relations {
        let code = C::SourceRelationPinMismatch.as_str();
        out.push(pin(
            format!("relations.{key}.schema_oid"),
            json!(r.schema_oid),
            code,
        ));
        out.push(pin(
            format!("relations.{key}.relation_oid"),
            json!(r.relation_oid),
            code,
        ));
    }
    if let Some(s) = &a.system_identifier {
        out.push(pin(
            "system_identifier",
            json!(s),
            C::SourceSystemIdentifierMismatch.as_str(),
        ));
    }
    if let Some(t) = a.timeline {
        out.push(pin(
            "timeline",
            json!(t),
            C::SourceTimelineMismatch.as_str(),
        ));
    }
    out
}

/// `mssql_transaction.<reason>` without the role: a registry entry may serve any role.
fn mssql_code(reason: &str) -> String {
    format!("mssql_transaction.{reason}")
}

fn role_free(e: &PinError) -> String {
    match e.code.strip_prefix("mssql_transaction.target_") {
        Some(reason) => mssql_code(reason),
        None => e.code.clone(),
    }
}

const VIEW_ANY_DATABASE: &str = "permission.view_any_database";

fn db_field(name: &str, field: &str) -> String {
    format!("database_authorities.{name}.{field}")
}

/// The pins of a SQL Server connection and the catalog facts the verifier requires of each
/// pinned database (ONLINE, MULTI_USER, `HAS_DBACCESS` = 1, no casefold decoy).
fn mssql_pins(map: &BTreeMap<String, MssqlDatabaseAuthority>) -> Vec<Pin> {
    let mut out = vec![pin(
        VIEW_ANY_DATABASE,
        json!(1),
        mssql_code("database_metadata_permission_denied"),
    )];
    for (name, a) in map {
        let mismatch = mssql_code("database_pin_mismatch");
        out.push(pin(
            db_field(name, "database_id"),
            json!(a.database_id),
            &mismatch,
        ));
        out.push(pin(
            db_field(name, "create_token"),
            json!(a.create_token),
            &mismatch,
        ));
        out.push(Pin {
            fold_case: true,
            ..pin(
                db_field(name, "database_guid"),
                json!(a.database_guid),
                &mismatch,
            )
        });
        out.push(pin(
            db_field(name, "state"),
            json!("ONLINE"),
            mssql_code("database_not_online"),
        ));
        out.push(pin(
            db_field(name, "user_access"),
            json!("MULTI_USER"),
            mssql_code("database_not_multi_user"),
        ));
        out.push(pin(
            db_field(name, "has_dbaccess"),
            json!(1),
            mssql_code("database_access_denied"),
        ));
        out.push(pin(
            db_field(name, "casefold_decoys"),
            json!([]),
            mssql_code("database_casefold_decoy"),
        ));
        // The verifier's own verdict; its reason is the code when it refuses.
        out.push(pin(db_field(name, "verifier"), json!("ok"), &mismatch));
    }
    out
}

/// Every pinned (or required) field of a connection, in review order.
fn pins_of(c: &Connection) -> Vec<Pin> {
    use ErrorCode as C;
    match c.kind {
        ConnectionKind::PostgresSource => c
            .postgres_source_authority
            .as_ref()
            .map(source_pins)
            .unwrap_or_default(),
        ConnectionKind::PostgresTarget => c
            .database_pin
            .as_ref()
            .map(|p| {
                vec![
                    pin(
                        "database_pin.name",
                        json!(p.name),
                        C::TargetDatabasePinMismatch.as_str(),
                    ),
                    pin(
                        "database_pin.oid",
                        json!(p.oid),
                        C::TargetDatabasePinMismatch.as_str(),
                    ),
                    pin(
                        "database_pin.system_identifier",
                        json!(p.system_identifier),
                        C::TargetSystemIdentifierMismatch.as_str(),
                    ),
                ]
            })
            .unwrap_or_default(),
        ConnectionKind::MssqlTarget => c
            .database_authorities
            .as_ref()
            .map(mssql_pins)
            .unwrap_or_default(),
    }
}

/// Observes a PostgreSQL source: database, principals and recovery role; every pinned relation
/// (a missing one is observed as `null`); for version 1 the system identifier and timeline.
async fn observe_source(ep: &Endpoint, a: &SourceAuthority) -> Result<Observations, Unobserved> {
    let mut obs = Observations::new();
    let relation = |obs: &mut Observations, key: &str, r: Result<(Value, Value), Unobserved>| {
        let (schema, rel) = match r {
            Ok((s, r)) => (seen(s), seen(r)),
            Err(u) => (Err(u.clone()), Err(u)),
        };
        obs.insert(format!("relations.{key}.schema_oid"), schema);
        obs.insert(format!("relations.{key}.relation_oid"), rel);
    };
    let keys: Vec<&str> = a.relations.keys().map(String::as_str).collect();
    let base = match discover_source_authority(ep, AuthorityProfile::CatalogIdentity, &keys).await {
        Ok(found) => {
            for (key, r) in &found.relations {
                relation(
                    &mut obs,
                    key,
                    Ok((json!(r.schema_oid), json!(r.relation_oid))),
                );
            }
            found
        }
        Err(e) if e.code() == ErrorCode::SourceRelationMissing => {
            // One relation is gone: look at each on its own so the others are still compared.
            let found = discover_source_authority(ep, AuthorityProfile::CatalogIdentity, &[])
                .await
                .map_err(|e| Unobserved::xmin(&e))?;
            for key in &keys {
                match discover_source_authority(ep, AuthorityProfile::CatalogIdentity, &[*key])
                    .await
                {
                    Ok(one) => {
                        if let Some(r) = one.relations.get(*key) {
                            relation(
                                &mut obs,
                                key,
                                Ok((json!(r.schema_oid), json!(r.relation_oid))),
                            );
                        }
                    }
                    Err(e) if e.code() == ErrorCode::SourceRelationMissing => {
                        let missing = || {
                            Ok(Observed {
                                value: Value::Null,
                                code: Some(ErrorCode::SourceRelationMissing.as_str().to_owned()),
                            })
                        };
                        obs.insert(format!("relations.{key}.schema_oid"), missing());
                        obs.insert(format!("relations.{key}.relation_oid"), missing());
                    }
                    Err(e) => relation(&mut obs, key, Err(Unobserved::xmin(&e))),
                }
            }
            found
        }
        Err(e) => return Err(Unobserved::xmin(&e)),
    };
    obs.insert(
        "recovery_role".into(),
        seen(json!(recovery_role(base.recovery_role))),
    );
    for (field, n) in [
        ("database", &base.database),
        ("effective_principal", &base.effective_principal),
        ("session_principal", &base.session_principal),
    ] {
        obs.insert(format!("{field}.name"), seen(json!(n.name)));
        obs.insert(format!("{field}.oid"), seen(json!(n.oid)));
    }
    if a.system_identifier.is_some() || a.timeline.is_some() {
        match discover_source_authority(ep, AuthorityProfile::PhysicalCluster, &[]).await {
            Ok(v1) => {
                obs.insert(
                    "system_identifier".into(),
                    seen(json!(v1.system_identifier)),
                );
                obs.insert("timeline".into(), seen(json!(v1.timeline)));
            }
            Err(e) => {
                let u = Unobserved::xmin(&e);
                obs.insert("system_identifier".into(), Err(u.clone()));
                obs.insert("timeline".into(), Err(u));
            }
        }
    }
    Ok(obs)
}

/// Observes a PostgreSQL target or state database.
async fn observe_target(ep: &Endpoint) -> Result<Observations, Unobserved> {
    let live = discover_database_pin(ep)
        .await
        .map_err(|e| Unobserved::xmin(&e))?;
    Ok(Observations::from([
        ("database_pin.name".into(), seen(json!(live.name))),
        ("database_pin.oid".into(), seen(json!(live.oid))),
        (
            "database_pin.system_identifier".into(),
            seen(json!(live.system_identifier)),
        ),
    ]))
}

fn fold(s: &str) -> String {
    s.chars().flat_map(char::to_lowercase).collect()
}

/// The observed fields of one pinned SQL Server database, from its catalog rows.
fn observe_catalog(
    obs: &mut Observations,
    name: &str,
    pin: &MssqlDatabaseAuthority,
    rows: &[CatalogRow],
) {
    let decoys: Vec<&str> = rows
        .iter()
        .filter(|r| r.name != name && fold(&r.name) == fold(name))
        .map(|r| r.name.as_str())
        .collect();
    obs.insert(db_field(name, "casefold_decoys"), seen(json!(decoys)));
    let exact: Vec<&CatalogRow> = rows.iter().filter(|r| r.name == name).collect();
    let fields = [
        "database_id",
        "create_token",
        "database_guid",
        "state",
        "user_access",
        "has_dbaccess",
    ];
    if let [row] = exact.as_slice() {
        let values = [
            json!(row.database_id),
            json!(row.create_token),
            json!(row.database_guid),
            json!(row.state_desc),
            json!(row.user_access_desc),
            json!(row.has_dbaccess),
        ];
        for (field, value) in fields.into_iter().zip(values) {
            obs.insert(db_field(name, field), seen(value));
        }
    } else {
        // No database spelled exactly so (or, impossibly, several): nothing to compare.
        for field in fields {
            obs.insert(
                db_field(name, field),
                Ok(Observed {
                    value: Value::Null,
                    code: Some(mssql_code("database_not_found")),
                }),
            );
        }
    }
    let verdict = match pins::verify_database(Role::Target, name, pin, rows) {
        Ok(()) => Observed {
            value: json!("ok"),
            code: None,
        },
        Err(e) => {
            let code = role_free(&e);
            Observed {
                value: json!(code),
                code: Some(code),
            }
        }
    };
    obs.insert(db_field(name, "verifier"), Ok(verdict));
}

/// The whole connection is refused (`DPONE_XMIN_TARGET_SERVER_UNSUPPORTED`, the adapter's
/// detail code first) when the server is not a supported SQL Server.
fn server_refusal(facts: &ServerFacts) -> Result<(), Unobserved> {
    mssql_server::classify(facts)
        .map(drop)
        .map_err(|e| Unobserved {
            code: ErrorCode::TargetServerUnsupported.as_str().to_owned(),
            detail: e.to_string(),
            refused: true,
        })
}

/// Observes a SQL Server connection: the server's kind, then `VIEW ANY DATABASE`, then the catalog rows of every
/// pinned database, each checked by the pure verifier.
async fn observe_mssql(
    ep: &Endpoint,
    map: &BTreeMap<String, MssqlDatabaseAuthority>,
    trust_server_certificate: bool,
) -> Result<Observations, Unobserved> {
    let database = pins::resolve_alias(Role::Target, map, &ep.spec.database).map_err(|e| {
        Unobserved::unreachable(ErrorCode::RegistryPinMissing.as_str(), role_free(&e))
    })?;
    let mut client = mssql::connect_endpoint(ep, &database, trust_server_certificate)
        .await
        .map_err(|e| Unobserved::mssql(mssql::connect_code(&e), &e))?;
    let statement = |e: ConnError| Unobserved::mssql(ErrorCode::TargetStatementFailed, &e);
    // The server first: a TDS server that is not a supported SQL Server (Babelfish, an older
    // version) is refused before its catalog is read.
    let facts = mssql::server_facts(&mut client).await.map_err(statement)?;
    server_refusal(&facts)?;
    let has_perms = mssql::metadata_permission(&mut client)
        .await
        .map_err(statement)?;
    let mut obs = Observations::new();
    let permission = pins::check_metadata_permission(Role::Target, has_perms);
    obs.insert(
        VIEW_ANY_DATABASE.into(),
        Ok(Observed {
            value: json!(has_perms),
            code: permission.as_ref().err().map(role_free),
        }),
    );
    for (name, pin) in map {
        let rows = if permission.is_ok() {
            mssql::catalog_rows(&mut client, name)
                .await
                .map_err(statement)
        } else {
            Err(Unobserved::unreachable(
                ErrorCode::TargetMetadataPermissionDenied.as_str(),
                "VIEW ANY DATABASE is denied or invisible; the pin cannot be verified",
            ))
        };
        match rows {
            Ok(rows) => observe_catalog(&mut obs, name, pin, &rows),
            Err(u) => {
                for p in mssql_pins(&BTreeMap::from([(name.clone(), pin.clone())]))
                    .into_iter()
                    .filter(|p| p.field != VIEW_ANY_DATABASE)
                {
                    obs.insert(p.field, Err(u.clone()));
                }
            }
        }
    }
    Ok(obs)
}

async fn observe(c: &Connection, ep: &Endpoint) -> Result<Observations, Unobserved> {
    match c.kind {
        ConnectionKind::PostgresSource => match &c.postgres_source_authority {
            Some(a) => observe_source(ep, a).await,
            None => Ok(Observations::new()),
        },
        ConnectionKind::PostgresTarget => observe_target(ep).await,
        ConnectionKind::MssqlTarget => match &c.database_authorities {
            Some(map) => observe_mssql(ep, map, c.trust_server_certificate).await,
            None => Ok(Observations::new()),
        },
    }
}

fn same(p: &Pin, observed: &Value) -> bool {
    match (p.fold_case, &p.pinned, observed) {
        (true, Value::String(a), Value::String(b)) => a.eq_ignore_ascii_case(b),
        _ => p.pinned == *observed,
    }
}

/// Compares each pin with its observation; a field without one is unreachable.
fn diff(pins: Vec<Pin>, observed: &Result<Observations, Unobserved>) -> Vec<FieldReport> {
    pins.into_iter()
        .map(|p| {
            let found = match observed {
                Ok(obs) => obs.get(&p.field).map(|o| o.as_ref().map_err(Clone::clone)),
                Err(u) => Some(Err(u.clone())),
            };
            let (observed, status, code, detail) = match found {
                Some(Ok(o)) if same(&p, &o.value) => (o.value.clone(), Status::Match, None, None),
                Some(Ok(o)) => (
                    o.value.clone(),
                    Status::Mismatch,
                    Some(o.code.clone().unwrap_or_else(|| p.mismatch.clone())),
                    None,
                ),
                Some(Err(u)) => (
                    Value::Null,
                    if u.refused {
                        Status::Refused
                    } else {
                        Status::Unreachable
                    },
                    Some(u.code),
                    Some(u.detail),
                ),
                None => (
                    Value::Null,
                    Status::Unreachable,
                    Some(UNREACHABLE.to_owned()),
                    Some("not observed".to_owned()),
                ),
            };
            FieldReport {
                field: p.field,
                pinned: p.pinned,
                observed,
                status,
                code,
                detail,
            }
        })
        .collect()
}

fn connection_status(fields: &[FieldReport]) -> Status {
    let any = |s: Status| fields.iter().any(|f| f.status == s);
    if any(Status::Mismatch) {
        Status::Mismatch
    } else if any(Status::Refused) {
        Status::Refused
    } else if any(Status::Unreachable) {
        Status::Unreachable
    } else if any(Status::NotVerified) {
        Status::NotVerified
    } else {
        Status::Match
    }
}

async fn live_report(registry: &Registry, endpoints: &BTreeMap<String, Endpoint>) -> Report {
    let mut connections = Vec::new();
    for (name, c) in &registry.connections {
        let observed = match endpoints.get(name) {
            Some(ep) => tokio::time::timeout(OBSERVE_TIMEOUT, observe(c, ep))
                .await
                .unwrap_or_else(|_| {
                    Err(Unobserved::unreachable(
                        TIMEOUT,
                        format!("no answer within {} s", OBSERVE_TIMEOUT.as_secs()),
                    ))
                }),
            None => Err(Unobserved::unreachable(UNREACHABLE, "no endpoint")),
        };
        let fields = diff(pins_of(c), &observed);
        let (code, detail) = match &observed {
            Err(u) => (Some(u.code.clone()), Some(u.detail.clone())),
            Ok(_) => (None, None),
        };
        connections.push(ConnectionReport {
            name: name.clone(),
            kind: c.kind,
            status: connection_status(&fields),
            code,
            detail,
            fields,
        });
    }
    finish(Mode::Live, registry, connections)
}

fn offline_report(registry: &Registry) -> Report {
    let connections = registry
        .connections
        .iter()
        .map(|(name, c)| {
            let fields: Vec<FieldReport> = pins_of(c)
                .into_iter()
                .map(|p| FieldReport {
                    field: p.field,
                    pinned: p.pinned,
                    observed: Value::Null,
                    status: Status::NotVerified,
                    code: None,
                    detail: None,
                })
                .collect();
            ConnectionReport {
                name: name.clone(),
                kind: c.kind,
                status: connection_status(&fields),
                code: None,
                detail: None,
                fields,
            }
        })
        .collect();
    finish(Mode::Offline, registry, connections)
}

fn finish(mode: Mode, registry: &Registry, connections: Vec<ConnectionReport>) -> Report {
    let mut summary = Summary {
        connections: connections.len(),
        ..Summary::default()
    };
    for f in connections.iter().flat_map(|c| &c.fields) {
        summary.fields += 1;
        match f.status {
            Status::Match => summary.matched += 1,
            Status::Mismatch => summary.mismatch += 1,
            Status::Refused => summary.refused += 1,
            Status::Unreachable => summary.unreachable += 1,
            Status::NotVerified => summary.not_verified += 1,
        }
    }
    let (outcome, code, note) = if summary.mismatch > 0 {
        (
            Outcome::Drift,
            Some(PIN_DRIFT),
            format!(
                "{} pinned field(s) differ from the live servers ({} not observed)",
                summary.mismatch,
                summary.unreachable + summary.refused
            ),
        )
    } else if summary.refused > 0 {
        (
            Outcome::Refused,
            Some(SERVER_REFUSED),
            format!(
                "{} pinned field(s) are on a server the route refuses (permanent: retrying \
                 does not change it; {} not observed)",
                summary.refused, summary.unreachable
            ),
        )
    } else if summary.unreachable > 0 {
        (
            Outcome::Unreachable,
            Some(UNREACHABLE),
            format!(
                "{} pinned field(s) could not be observed and are not verified",
                summary.unreachable
            ),
        )
    } else if mode == Mode::Offline {
        (
            Outcome::NotVerified,
            None,
            "offline: the registry is structurally valid; NOTHING was verified against a server"
                .to_owned(),
        )
    } else {
        (
            Outcome::Match,
            None,
            "every pinned field matches the live servers".to_owned(),
        )
    };
    Report {
        schema: SCHEMA,
        mode,
        environment: registry.environment.clone(),
        outcome,
        code,
        note,
        summary,
        connections,
    }
}

/// Exit 0 when every pin matches (or, offline, when the registry is valid); drift and a refused
/// server are refusals (exit 1: a scheduler must not retry them); an unobserved field exits 75
/// (retry once the connection answers).
fn verdict(report: &Report) -> Result<(), Failure> {
    match report.outcome {
        Outcome::Match | Outcome::NotVerified => Ok(()),
        Outcome::Drift => Err(Failure::refused(PIN_DRIFT, report.note.clone())),
        Outcome::Refused => Err(Failure::refused(SERVER_REFUSED, report.note.clone())),
        Outcome::Unreachable => Err(Failure {
            code: UNREACHABLE.to_owned(),
            message: report.note.clone(),
            exit: RETRY,
        }),
    }
}

/// A pinned or observed value as one safe table cell ([`crate::render::clean`]: control
/// characters replaced, capped): observed values come from the servers.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => clean(s),
        Value::Array(items) if items.is_empty() => "none".to_owned(),
        Value::Array(items) => clean(items.iter().map(cell).collect::<Vec<_>>().join(", ")),
        other => clean(other),
    }
}

/// The human-readable table.
fn render_table(report: &Report) -> String {
    let mut out = String::new();
    let mode = match report.mode {
        Mode::Live => "live",
        Mode::Offline => "OFFLINE (structure only, nothing verified)",
    };
    let _ = writeln!(
        out,
        "connection registry: environment {}, {} connection(s), {mode}",
        clean(&report.environment),
        report.summary.connections
    );
    let header = [
        "CONNECTION",
        "KIND",
        "FIELD",
        "PINNED",
        "OBSERVED",
        "STATUS",
        "CODE",
    ];
    let mut rows: Vec<[String; 7]> = Vec::new();
    for c in &report.connections {
        let kind = match c.kind {
            ConnectionKind::PostgresSource => "postgres_source",
            ConnectionKind::PostgresTarget => "postgres_target",
            ConnectionKind::MssqlTarget => "mssql_target",
        };
        for f in &c.fields {
            let code = match (&f.code, &f.detail) {
                (Some(code), Some(detail)) => format!("{} ({})", clean(code), clean(detail)),
                (Some(code), None) => clean(code),
                _ => String::new(),
            };
            rows.push([
                clean(&c.name),
                kind.to_owned(),
                clean(&f.field),
                cell(&f.pinned),
                cell(&f.observed),
                f.status.as_str().to_owned(),
                code,
            ]);
        }
    }
    let mut widths = header.map(str::len);
    for r in &rows {
        for (w, v) in widths.iter_mut().zip(r) {
            *w = (*w).max(v.len());
        }
    }
    let mut line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, (v, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                l.push_str(v);
            } else {
                let _ = write!(l, "{v:<w$}  ");
            }
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    line(&header);
    for r in &rows {
        line(&r.each_ref().map(String::as_str));
    }
    let s = &report.summary;
    let _ = writeln!(
        out,
        "result: {} match, {} MISMATCH, {} refused, {} unreachable, {} not verified: {}{}",
        s.matched,
        s.mismatch,
        s.refused,
        s.unreachable,
        s.not_verified,
        report.note,
        report.code.map(|c| format!(" [{c}]")).unwrap_or_default()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REGISTRY: &str = "version: 1
environment: ci
connections:
  sql:
    kind: mssql_target
    endpoint: {host: db.internal, port: 1433, database: Dwh, user: loader}
    password_env: DPONE_UNIT_MSSQL_PASSWORD
    database_authorities:
      Dwh: {database_id: 5, create_token: '2026-08-16T09:14:22.1233333', database_guid: '0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0'}
  src:
    kind: postgres_source
    endpoint: {host: /var/run/postgresql, port: 5432, database: shop, user: reader}
    postgres_source_authority:
      version: 1
      profile: physical_cluster
      recovery_role: primary
      database: {name: shop, oid: 16384}
      effective_principal: {name: reader, oid: 10}
      session_principal: {name: reader, oid: 10}
      relations:
        public.orders: {schema_oid: 2200, relation_oid: 16390}
      system_identifier: '7642011472967116994'
      timeline: 1
";

    fn registry() -> Registry {
        Registry::from_yaml(REGISTRY).expect("registry parses")
    }

    fn row(name: &str) -> CatalogRow {
        CatalogRow {
            name: name.to_owned(),
            database_id: 5,
            create_token: "2026-08-16T09:14:22.1233333".to_owned(),
            database_guid: Some("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".to_owned()),
            state_desc: "ONLINE".to_owned(),
            user_access_desc: "MULTI_USER".to_owned(),
            has_dbaccess: Some(1),
        }
    }

    fn mssql_fields(rows: &[CatalogRow]) -> Vec<FieldReport> {
        let reg = registry();
        let map = reg.connections["sql"]
            .database_authorities
            .clone()
            .expect("map");
        let mut obs = Observations::from([(VIEW_ANY_DATABASE.to_owned(), seen(json!(1)))]);
        observe_catalog(&mut obs, "Dwh", &map["Dwh"], rows);
        diff(mssql_pins(&map), &Ok(obs))
    }

    fn status_of<'a>(fields: &'a [FieldReport], suffix: &str) -> &'a FieldReport {
        fields
            .iter()
            .find(|f| f.field.ends_with(suffix))
            .expect("field present")
    }

    #[test]
    fn matching_catalog_rows_match_every_field_and_the_guid_ignores_case() {
        let fields = mssql_fields(&[row("Dwh")]);
        assert_eq!(fields.len(), 9);
        assert!(
            fields.iter().all(|f| f.status == Status::Match),
            "{fields:?}"
        );
    }

    #[test]
    fn a_recreated_database_and_a_decoy_are_mismatches_with_the_verifier_reason() {
        let mut recreated = row("Dwh");
        recreated.database_id = 9;
        let fields = mssql_fields(&[recreated, row("DWH")]);
        let id = status_of(&fields, ".database_id");
        assert_eq!(id.status, Status::Mismatch);
        assert_eq!(
            id.code.as_deref(),
            Some("mssql_transaction.database_pin_mismatch")
        );
        let decoys = status_of(&fields, ".casefold_decoys");
        assert_eq!(decoys.status, Status::Mismatch);
        assert_eq!(decoys.observed, json!(["DWH"]));
        let verifier = status_of(&fields, ".verifier");
        assert_eq!(verifier.status, Status::Mismatch);
        assert_eq!(
            verifier.code.as_deref(),
            Some("mssql_transaction.database_casefold_decoy")
        );
        assert_eq!(status_of(&fields, ".create_token").status, Status::Match);
    }

    #[test]
    fn a_tds_server_that_is_not_sql_server_makes_every_pin_refused_never_unreachable() {
        let babelfish = ServerFacts {
            babelfish: Some("1".to_owned()),
            version_text: Some(
                "Babelfish for PostgreSQL with SQL Server Compatibility - 12.0.2000.8".to_owned(),
            ),
            product_version: Some("12.0.2000.8".to_owned()),
            engine_edition: Some(3),
        };
        let refused = server_refusal(&babelfish).expect_err("Babelfish is refused");
        assert_eq!(refused.code, "DPONE_XMIN_TARGET_SERVER_UNSUPPORTED");
        assert!(
            refused
                .detail
                .starts_with("mssql_transaction.server_not_sql_server")
        );
        assert!(
            refused.detail.contains("PostgreSQL target"),
            "{}",
            refused.detail
        );
        let reg = registry();
        let map = reg.connections["sql"]
            .database_authorities
            .clone()
            .expect("map");
        assert!(
            refused.refused,
            "a server that answered and was refused is permanent"
        );
        let fields = diff(mssql_pins(&map), &Err(refused));
        assert!(fields.iter().all(|f| f.status == Status::Refused
            && f.code.as_deref() == Some("DPONE_XMIN_TARGET_SERVER_UNSUPPORTED")));
        let old = ServerFacts {
            version_text: Some("Microsoft SQL Server 2014 (SP3) - 12.0.6024.0".to_owned()),
            babelfish: None,
            ..babelfish
        };
        let refused = server_refusal(&old).expect_err("2014 is refused");
        assert!(
            refused
                .detail
                .starts_with("mssql_transaction.server_version_unsupported")
        );
        let current = ServerFacts {
            version_text: Some("Microsoft SQL Server 2022 (RTM-CU14) - 16.0.4135.4".to_owned()),
            product_version: Some("16.0.4135.4".to_owned()),
            ..old
        };
        assert!(server_refusal(&current).is_ok());
    }

    #[test]
    fn a_missing_database_is_not_found_never_a_match() {
        let fields = mssql_fields(&[]);
        let id = status_of(&fields, ".database_id");
        assert_eq!(id.status, Status::Mismatch);
        assert_eq!(id.observed, Value::Null);
        assert_eq!(
            id.code.as_deref(),
            Some("mssql_transaction.database_not_found")
        );
    }

    #[test]
    fn an_unreachable_connection_marks_every_pin_unreachable() {
        let reg = registry();
        let fields = diff(
            pins_of(&reg.connections["src"]),
            &Err(Unobserved::unreachable(
                "DPONE_XMIN_SOURCE_CONNECT",
                "connect failed (no SQLSTATE)",
            )),
        );
        assert_eq!(fields.len(), 11);
        assert!(fields.iter().all(|f| f.status == Status::Unreachable));
        let report = finish(
            Mode::Live,
            &reg,
            vec![ConnectionReport {
                name: "src".into(),
                kind: ConnectionKind::PostgresSource,
                status: connection_status(&fields),
                code: None,
                detail: None,
                fields,
            }],
        );
        assert_eq!(report.outcome, Outcome::Unreachable);
        assert_eq!(report.summary.matched, 0);
        let failure = verdict(&report).expect_err("unreachable fails");
        assert_eq!(failure.code, UNREACHABLE);
        assert_eq!(failure.exit, RETRY);
    }

    #[test]
    fn offline_lists_the_pins_verifies_nothing_and_never_prints_endpoints() {
        let report = offline_report(&registry());
        assert_eq!(report.outcome, Outcome::NotVerified);
        assert_eq!(report.summary.fields, 20);
        assert_eq!(report.summary.not_verified, 20);
        assert!(verdict(&report).is_ok());
        let table = render_table(&report);
        let json = serde_json::to_string(&report).expect("json");
        for text in [&table, &json] {
            assert!(text.contains("NOTHING was verified"), "{text}");
            for private in ["db.internal", "1433", "/var/run/postgresql", "loader"] {
                assert!(!text.contains(private), "{private} in {text}");
            }
        }
    }

    #[test]
    fn values_in_the_table_cannot_drive_the_terminal() {
        let mut report = offline_report(&registry());
        report.connections[0].name = "src\u{7}".into();
        report.connections[0].fields[0].observed = Value::String("15.4\u{1b}[2J\nx".into());
        report.connections[0].fields[0].detail = Some("d\u{1b}]8;;x".into());
        report.connections[0].fields[0].code = Some("C".into());
        let table = render_table(&report);
        assert!(
            !table.contains('\u{1b}') && !table.contains('\u{7}'),
            "{table:?}"
        );
        assert!(table.contains("15.4?[2J?x"), "{table}");
    }

    #[test]
    fn credentials_are_resolved_before_any_connection() {
        let env = BTreeMap::from([("OTHER".to_owned(), "x".to_owned())]);
        let failure = resolve_endpoints(&registry(), &env).expect_err("unset variable");
        assert_eq!(failure.code, "DPONE_XMIN_REGISTRY_CREDENTIAL_MISSING");
        assert_eq!(failure.exit, crate::exit::BAD_INPUT);
        let env = BTreeMap::from([("DPONE_UNIT_MSSQL_PASSWORD".to_owned(), "s3cret".to_owned())]);
        let endpoints = resolve_endpoints(&registry(), &env).expect("resolved");
        assert_eq!(
            endpoints["sql"]
                .password
                .as_ref()
                .map(dpone_engine_xmin::registry::Secret::expose),
            Some("s3cret")
        );
        assert!(endpoints["src"].password.is_none());
    }

    fn report_of(fields: Vec<FieldReport>) -> Report {
        let reg = registry();
        finish(
            Mode::Live,
            &reg,
            vec![ConnectionReport {
                name: "sql".into(),
                kind: ConnectionKind::MssqlTarget,
                status: connection_status(&fields),
                code: None,
                detail: None,
                fields,
            }],
        )
    }

    fn babelfish_refusal() -> Unobserved {
        server_refusal(&ServerFacts {
            babelfish: Some("1".to_owned()),
            version_text: Some("Babelfish for PostgreSQL - 12.0.2000.8".to_owned()),
            product_version: Some("12.0.2000.8".to_owned()),
            engine_edition: Some(3),
        })
        .expect_err("Babelfish is refused")
    }

    /// A refused server is its own outcome, code and non-retryable exit; a network outage stays
    /// 75. The two never share a code, so a scheduler can tell them apart.
    #[test]
    fn a_refused_server_exits_1_with_its_own_code_and_an_outage_exits_75() {
        let reg = registry();
        let map = reg.connections["sql"]
            .database_authorities
            .clone()
            .expect("map");
        let refused = report_of(diff(mssql_pins(&map), &Err(babelfish_refusal())));
        assert_eq!(refused.outcome, Outcome::Refused);
        assert_eq!(refused.code, Some(SERVER_REFUSED));
        assert_eq!(refused.summary.refused, 9);
        assert_eq!(refused.summary.unreachable, 0);
        assert_eq!(refused.connections[0].status, Status::Refused);
        let failure = verdict(&refused).expect_err("refused fails");
        assert_eq!(failure.code, SERVER_REFUSED);
        assert_eq!(failure.exit, crate::exit::REFUSED);
        assert!(failure.message.contains("permanent"), "{}", failure.message);
        let table = render_table(&refused);
        assert!(table.contains(" refused "), "{table}");
        assert!(
            table.contains("[DPONE_CONNECTIONS_SERVER_REFUSED]"),
            "{table}"
        );
        let json = serde_json::to_value(&refused).expect("json");
        assert_eq!(json["outcome"], "refused");
        assert_eq!(json["connections"][0]["fields"][0]["status"], "refused");

        let outage = Unobserved::mssql(
            ErrorCode::TargetConnect,
            &ConnError::Io(std::io::ErrorKind::ConnectionRefused),
        );
        let unreachable = report_of(diff(mssql_pins(&map), &Err(outage)));
        assert_eq!(unreachable.outcome, Outcome::Unreachable);
        let failure = verdict(&unreachable).expect_err("unreachable fails");
        assert_eq!((failure.code.as_str(), failure.exit), (UNREACHABLE, RETRY));

        // A refusal outweighs an outage elsewhere (retrying cannot fix it); drift outweighs both.
        let mut fields = diff(mssql_pins(&map), &Err(babelfish_refusal()));
        fields.extend(diff(
            pins_of(&reg.connections["src"]),
            &Err(Unobserved::unreachable(
                "DPONE_XMIN_SOURCE_CONNECT",
                "timeout",
            )),
        ));
        let mixed = report_of(fields);
        assert_eq!(
            verdict(&mixed).expect_err("refused").exit,
            crate::exit::REFUSED
        );
        assert_eq!(mixed.code, Some(SERVER_REFUSED));
        let mut drift = mssql_fields(&[]);
        drift.extend(diff(mssql_pins(&map), &Err(babelfish_refusal())));
        assert_eq!(report_of(drift).code, Some(PIN_DRIFT));
    }

    /// docs/cli.md's exit table of the registry check names each outcome's code with the exit
    /// status the check returns.
    #[test]
    fn the_documented_registry_check_exits_match_the_verdicts() {
        const DOCS: &str = include_str!("../../../docs/cli.md");
        let section = &DOCS[DOCS.find("## Connection registry check").expect("section")..];
        let documented: BTreeMap<String, u8> = section
            .lines()
            .skip_while(|l| !l.starts_with("| exit |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                let code = cells.get(2)?.strip_prefix('`')?.split('`').next()?;
                Some((code.to_owned(), cells[1].parse().ok()?))
            })
            .filter(|(code, _)| code.starts_with("DPONE_CONNECTIONS_"))
            .collect();
        let reg = registry();
        let map = reg.connections["sql"]
            .database_authorities
            .clone()
            .expect("map");
        let outage = Unobserved::unreachable("DPONE_XMIN_TARGET_CONNECT", "network error");
        let mut actual = BTreeMap::new();
        for fields in [
            mssql_fields(&[]),
            diff(mssql_pins(&map), &Err(babelfish_refusal())),
            diff(mssql_pins(&map), &Err(outage)),
        ] {
            let f = verdict(&report_of(fields)).expect_err("fails");
            actual.insert(f.code, f.exit);
        }
        assert_eq!(
            documented, actual,
            "docs/cli.md (left) and the check (right)"
        );
    }
}
