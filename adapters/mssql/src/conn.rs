//! tiberius connection (TDS over rustls; no OpenSSL) and the catalog captures that feed
//! [`crate::pins`].
//!
//! Errors never carry the server's message text (it can quote key values): only the error
//! class and, for server errors, the SQL Server error number.
//!
//! TLS is always required ([`EncryptionLevel::Required`]) and the server's chain and name are
//! validated by default. An endpoint's `sslrootcert` pins a CA bundle: the file is read here
//! through the bounded reader of regular files (at most [`MAX_CA_BUNDLE_BYTES`]; a FIFO, a
//! device, `/proc`, `/sys` or `/dev` is refused) and must hold PEM certificates, and those
//! certificates, already parsed, are handed to tiberius (never the path, which would be read
//! again, unbounded). tiberius 0.13 adds a pinned CA **to** the system's roots; it has no way to
//! replace them. `trust_server_certificate` (no validation) and `sslrootcert` are mutually
//! exclusive. A CA that cannot be used is [`ConnError::RootCert`]
//! (`DPONE_XMIN_TLS_ROOT_CERT_INVALID`, [`connect_code`]), without the path.

use crate::catalog::{StateFact, UniqueIndexColumn};
use crate::pins::{CatalogRow, SessionIdentity};
use crate::server::ServerFacts;
use crate::sql;
use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::registry::Endpoint;
use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use std::path::Path;
use tiberius::{AuthMethod, Client, ColumnData, Config, EncryptionLevel, Row};
use tokio::net::TcpStream;
use tokio_util::compat::{Compat, TokioAsyncWriteCompatExt};

/// A connected session.
pub type MssqlClient = Client<Compat<TcpStream>>;

/// Environment variable holding the ADO.NET connection string of the live-test server.
pub const TEST_URL_ENV: &str = "DPONE_TEST_MSSQL_URL";

/// The largest `sslrootcert` CA bundle read (as for PostgreSQL; a full system bundle is about
/// 220 KB).
pub const MAX_CA_BUNDLE_BYTES: u64 = 1 << 20;

/// A connection or statement failure, without server text.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The connection string did not parse.
    #[error("connection string invalid")]
    Config,
    /// TCP failure.
    #[error("network error ({0:?})")]
    Io(std::io::ErrorKind),
    /// SQL Server error with its number.
    #[error("SQL Server error {number} in {step}")]
    Server {
        /// Boundary.
        step: &'static str,
        /// `ERROR_NUMBER()`.
        number: u32,
    },
    /// Driver-level failure (TLS, protocol, conversion).
    #[error("driver error in {0}")]
    Driver(&'static str),
    /// `sp_getapplock` returned a negative status (timeout, cancel, deadlock).
    #[error("application lock not granted (status {0})")]
    LockNotGranted(i32),
    /// A result had an unexpected shape.
    #[error("unexpected result shape in {0}")]
    Shape(&'static str),
    /// The pinned CA cannot be used (the reason, never the path), or it was combined with
    /// `trust_server_certificate`.
    #[error("TLS trust anchors: {0}")]
    RootCert(String),
}

/// The engine's code of a failure to connect: a pinned CA that cannot be used is
/// `DPONE_XMIN_TLS_ROOT_CERT_INVALID` (retrying does not fix it), anything else
/// `DPONE_XMIN_TARGET_CONNECT`.
pub fn connect_code(e: &ConnError) -> ErrorCode {
    match e {
        ConnError::RootCert(_) => ErrorCode::TlsRootCertInvalid,
        _ => ErrorCode::TargetConnect,
    }
}

/// Maps a driver error without its server text.
pub fn map_error(step: &'static str, e: tiberius::error::Error) -> ConnError {
    match e {
        tiberius::error::Error::Server(t) => ConnError::Server {
            step,
            number: t.code(),
        },
        tiberius::error::Error::Io { kind, .. } => ConnError::Io(kind),
        _ => ConnError::Driver(step),
    }
}

/// Connects with an ADO.NET connection string (`server=tcp:host,1433;user=...;password=...;
/// TrustServerCertificate=false`). TLS is negotiated by tiberius with rustls.
pub async fn connect(ado: &str) -> Result<MssqlClient, ConnError> {
    let config = Config::from_ado_string(ado).map_err(|_| ConnError::Config)?;
    connect_config(config).await
}

/// tiberius 0.13 bounds every server round trip by a 30-second command timeout by default
/// (0.12 waited indefinitely). The route's statements legitimately wait longer — the finalizer's
/// DML over a large target, `sp_getapplock` behind another run, the bulk load's acknowledgement
/// — and a timed-out command leaves the session out of sync mid-transaction, so every session
/// waits as before; the attempt deadline of a reservation run is enforced by the route itself.
/// The handshake keeps tiberius' 15-second bound.
fn with_session_timeouts(mut config: Config) -> Config {
    config.command_timeout(None);
    config
}

async fn connect_config(config: Config) -> Result<MssqlClient, ConnError> {
    let config = with_session_timeouts(config);
    let tcp = TcpStream::connect(config.get_addr())
        .await
        .map_err(|e| ConnError::Io(e.kind()))?;
    tcp.set_nodelay(true).map_err(|e| ConnError::Io(e.kind()))?;
    Client::connect(config, tcp.compat_write())
        .await
        .map_err(|e| map_error("connect", e))
}

/// Sets [`sql::SESSION_OPTIONS`] as a plain batch, so they hold for the whole session (not one
/// `sp_executesql` scope). The target port does this on every session, after the server's
/// classification (so a server that rejects an option is still refused by kind first).
pub async fn set_session_options(client: &mut MssqlClient) -> Result<(), ConnError> {
    execute(client, "session_options", sql::SESSION_OPTIONS).await
}

/// Connects to `database` with a registry endpoint's coordinates and credential (SQL Server
/// authentication), TLS required and negotiated with rustls ([`endpoint_config`]).
pub async fn connect_endpoint(
    endpoint: &Endpoint,
    database: &str,
    trust_server_certificate: bool,
) -> Result<MssqlClient, ConnError> {
    connect_config(endpoint_config(
        endpoint,
        database,
        trust_server_certificate,
    )?)
    .await
}

/// The tiberius configuration of a registry endpoint, before any I/O but the CA file's read:
/// TLS required; the certificate chain validated against the system's roots plus the
/// endpoint's pinned `sslrootcert` certificates ([`pinned_ca`]), or not validated at all when
/// the registry set `trust_server_certificate` (disposable test instances only). Both at once
/// is refused ([`ConnError::RootCert`]; tiberius would panic).
pub fn endpoint_config(
    endpoint: &Endpoint,
    database: &str,
    trust_server_certificate: bool,
) -> Result<Config, ConnError> {
    let ca = endpoint.spec.sslrootcert.as_deref();
    if trust_server_certificate && ca.is_some() {
        return Err(ConnError::RootCert(
            "sslrootcert and trust_server_certificate are mutually exclusive".into(),
        ));
    }
    let mut config = Config::new();
    config.host(&endpoint.spec.host);
    config.port(endpoint.spec.port);
    config.database(database);
    config.application_name("dpone-host");
    let password = endpoint.password.as_ref().map_or("", |p| p.expose());
    config.authentication(AuthMethod::sql_server(&endpoint.spec.user, password));
    config.encryption(EncryptionLevel::Required);
    if let Some(path) = ca {
        for cert in pinned_ca(path)? {
            config.trust_cert_ca_bundle(cert.as_ref().to_vec());
        }
    } else if trust_server_certificate {
        config.trust_cert();
    }
    Ok(config)
}

/// The usable CA certificates of a pinned bundle: read bounded (a regular file of at most
/// [`MAX_CA_BUNDLE_BYTES`]), PEM, at least one certificate a trust anchor can be made of
/// (unparsable ones are left out, as for PostgreSQL). Errors name the reason, never the path.
pub fn pinned_ca(path: &str) -> Result<Vec<CertificateDer<'static>>, ConnError> {
    let pem =
        dpone_boundary::read::read_regular(Path::new(path), MAX_CA_BUNDLE_BYTES).map_err(|e| {
            ConnError::RootCert(format!("sslrootcert cannot be read ({})", e.describe()))
        })?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|_| ConnError::RootCert("sslrootcert is not PEM".into()))?;
    if certs.is_empty() {
        return Err(ConnError::RootCert("sslrootcert is not PEM".into()));
    }
    let usable: Vec<CertificateDer<'static>> = certs
        .into_iter()
        .filter(|c| RootCertStore::empty().add(c.clone()).is_ok())
        .collect();
    if usable.is_empty() {
        return Err(ConnError::RootCert(
            "sslrootcert holds no usable CA certificate".into(),
        ));
    }
    Ok(usable)
}

/// Runs a parameterized statement (through `sp_executesql`) and returns the rows of its last
/// result set: the statements that count with `OUTPUT ... INTO` end with the `SELECT` of the
/// count.
pub async fn last_result(
    client: &mut MssqlClient,
    step: &'static str,
    statement: &str,
    params: &[&dyn tiberius::ToSql],
) -> Result<Vec<Row>, ConnError> {
    let sets = client
        .query(statement, params)
        .await
        .map_err(|e| map_error(step, e))?
        .into_results()
        .await
        .map_err(|e| map_error(step, e))?;
    Ok(sets.into_iter().last().unwrap_or_default())
}

async fn rows(
    client: &mut MssqlClient,
    step: &'static str,
    statement: &str,
    params: &[&dyn tiberius::ToSql],
) -> Result<Vec<Row>, ConnError> {
    client
        .query(statement, params)
        .await
        .map_err(|e| map_error(step, e))?
        .into_first_result()
        .await
        .map_err(|e| map_error(step, e))
}

fn text(row: &Row, col: &str, step: &'static str) -> Result<Option<String>, ConnError> {
    row.try_get::<&str, _>(col)
        .map(|v| v.map(str::to_owned))
        .map_err(|_| ConnError::Shape(step))
}

fn int(row: &Row, col: &str, step: &'static str) -> Result<Option<i32>, ConnError> {
    row.try_get::<i32, _>(col)
        .map_err(|_| ConnError::Shape(step))
}

/// The create token of a typed `datetime2` column ([`crate::pins::create_token`]).
fn create_token(row: &Row, col: &str, step: &'static str) -> Result<String, ConnError> {
    let cell = row
        .cells()
        .find(|(c, _)| c.name() == col)
        .map(|(_, d)| d)
        .ok_or(ConnError::Shape(step))?;
    match cell {
        ColumnData::DateTime2(Some(v)) => {
            crate::pins::create_token(v.date().days(), v.time().increments(), v.time().scale())
                .ok_or(ConnError::Shape(step))
        }
        _ => Err(ConnError::Shape(step)),
    }
}

/// What kind of TDS server this session reached ([`crate::server::classify`] decides).
pub async fn server_facts(client: &mut MssqlClient) -> Result<ServerFacts, ConnError> {
    const STEP: &str = "server_facts";
    let r = rows(client, STEP, sql::SERVER_FACTS, &[]).await?;
    let row = r.first().ok_or(ConnError::Shape(STEP))?;
    Ok(ServerFacts {
        babelfish: text(row, "babelfish", STEP)?,
        version_text: text(row, "version_text", STEP)?,
        product_version: text(row, "product_version", STEP)?,
        engine_edition: int(row, "engine_edition", STEP)?,
    })
}

/// `HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW ANY DATABASE')`.
pub async fn metadata_permission(client: &mut MssqlClient) -> Result<Option<i32>, ConnError> {
    const STEP: &str = "metadata_permission";
    let r = rows(client, STEP, sql::METADATA_PERMISSION, &[]).await?;
    let row = r.first().ok_or(ConnError::Shape(STEP))?;
    int(row, "has_view_any_database", STEP)
}

/// Catalog rows folding to `name`.
pub async fn catalog_rows(
    client: &mut MssqlClient,
    name: &str,
) -> Result<Vec<CatalogRow>, ConnError> {
    const STEP: &str = "catalog_rows";
    let r = rows(client, STEP, sql::CATALOG_ROWS, &[&name]).await?;
    r.iter()
        .map(|row| {
            Ok(CatalogRow {
                name: text(row, "name", STEP)?.ok_or(ConnError::Shape(STEP))?,
                database_id: int(row, "database_id", STEP)?.ok_or(ConnError::Shape(STEP))?,
                create_token: create_token(row, "create_date", STEP)?,
                database_guid: text(row, "database_guid", STEP)?,
                state_desc: text(row, "state_desc", STEP)?.unwrap_or_default(),
                user_access_desc: text(row, "user_access_desc", STEP)?.unwrap_or_default(),
                has_dbaccess: int(row, "has_dbaccess", STEP)?,
            })
        })
        .collect()
}

/// Topology and effective principal of the session.
pub async fn session_identity(client: &mut MssqlClient) -> Result<SessionIdentity, ConnError> {
    const STEP: &str = "session_identity";
    let r = rows(client, STEP, sql::SESSION_IDENTITY, &[]).await?;
    let row = r.first().ok_or(ConnError::Shape(STEP))?;
    let req = |c: &str| -> Result<String, ConnError> {
        text(row, c, STEP)?.ok_or(ConnError::Shape(STEP))
    };
    Ok(SessionIdentity {
        server_name: req("server_name")?,
        machine_name: req("machine_name")?,
        instance_name: text(row, "instance_name", STEP)?,
        product_version: req("product_version")?,
        principal_name: req("principal_name")?,
        principal_sid: row
            .try_get::<&[u8], _>("principal_sid")
            .map_err(|_| ConnError::Shape(STEP))?
            .map(crate::pins::sid_hex)
            .ok_or(ConnError::Shape(STEP))?,
    })
}

/// Column rows of a table (`object` as `[schema].[table]`, in the session's database).
pub async fn target_columns(
    client: &mut MssqlClient,
    object: &str,
) -> Result<Vec<crate::shape::ColumnRow>, ConnError> {
    const STEP: &str = "target_columns";
    let r = rows(client, STEP, sql::TARGET_COLUMNS, &[&object]).await?;
    r.iter()
        .map(|row| {
            let flag = |c: &str| -> Result<bool, ConnError> { Ok(int(row, c, STEP)? == Some(1)) };
            Ok(crate::shape::ColumnRow {
                name: text(row, "name", STEP)?.ok_or(ConnError::Shape(STEP))?,
                type_name: text(row, "type_name", STEP)?.ok_or(ConnError::Shape(STEP))?,
                is_nullable: flag("is_nullable")?,
                collation_name: text(row, "collation_name", STEP)?,
                is_computed: flag("is_computed")?,
                is_persisted: flag("is_persisted")?,
                max_length: int(row, "max_length", STEP)?.ok_or(ConnError::Shape(STEP))?,
                precision: small(int(row, "type_precision", STEP)?, STEP)?,
                scale: small(int(row, "type_scale", STEP)?, STEP)?,
                code_page: int(row, "code_page", STEP)?.and_then(|v| u32::try_from(v).ok()),
            })
        })
        .collect()
}

fn small(v: Option<i32>, step: &'static str) -> Result<u8, ConnError> {
    v.and_then(|v| u8::try_from(v).ok())
        .ok_or(ConnError::Shape(step))
}

/// Key columns of the target's unique indexes, its enabled `INSTEAD OF` trigger count and the
/// count of enabled foreign keys that reference it with a cascading, `SET NULL` or `SET DEFAULT`
/// action (`object` as `[schema].[table]`, in the session's database).
pub async fn target_key_catalog(
    client: &mut MssqlClient,
    object: &str,
) -> Result<(Vec<UniqueIndexColumn>, i32, i32), ConnError> {
    const STEP: &str = "target_key_catalog";
    let r = rows(client, STEP, sql::TARGET_UNIQUE_INDEXES, &[&object]).await?;
    let columns = r
        .iter()
        .map(|row| {
            let flag = |c: &str| -> Result<bool, ConnError> { Ok(int(row, c, STEP)? == Some(1)) };
            Ok(UniqueIndexColumn {
                index_id: int(row, "index_id", STEP)?.ok_or(ConnError::Shape(STEP))?,
                is_primary_key: flag("is_primary_key")?,
                has_filter: flag("has_filter")?,
                is_disabled: flag("is_disabled")?,
                filter: text(row, "filter_definition", STEP)?,
                column: text(row, "column_name", STEP)?.ok_or(ConnError::Shape(STEP))?,
            })
        })
        .collect::<Result<Vec<_>, ConnError>>()?;
    let t = rows(client, STEP, sql::TARGET_TRIGGERS, &[&object]).await?;
    let count = |c: &str| {
        t.first()
            .and_then(|row| int(row, c, STEP).ok().flatten())
            .ok_or(ConnError::Shape(STEP))
    };
    Ok((
        columns,
        count("instead_of_triggers")?,
        count("cascading_references")?,
    ))
}

/// The state tables' catalog facts ([`sql::StateNames::catalog_facts`]).
pub async fn state_catalog_facts(
    client: &mut MssqlClient,
    statement: &str,
) -> Result<Vec<StateFact>, ConnError> {
    const STEP: &str = "state_catalog_facts";
    let r = rows(client, STEP, statement, &[]).await?;
    r.iter()
        .map(|row| {
            let req = |c: &str| -> Result<String, ConnError> {
                text(row, c, STEP)?.ok_or(ConnError::Shape(STEP))
            };
            let num = |c: &str| -> Result<i32, ConnError> {
                int(row, c, STEP)?.ok_or(ConnError::Shape(STEP))
            };
            let role = req("role")?;
            Ok(match req("kind")?.as_str() {
                "column" => StateFact::Column {
                    role,
                    name: req("name")?,
                    type_name: req("item")?,
                    max_length: num("n1")?,
                    nullable: num("n2")? == 1,
                },
                "index" => {
                    let flags = num("n2")?;
                    StateFact::Index {
                        role,
                        column: UniqueIndexColumn {
                            index_id: req("name")?.parse().map_err(|_| ConnError::Shape(STEP))?,
                            is_primary_key: flags & 1 != 0,
                            has_filter: flags & 2 != 0,
                            is_disabled: flags & 4 != 0,
                            filter: text(row, "filter", STEP)?,
                            column: req("item")?,
                        },
                    }
                }
                "trigger" => StateFact::Trigger {
                    role,
                    name: req("name")?,
                    event: req("item")?,
                    is_disabled: num("n1")? == 1,
                    is_instead_of: num("n2")? == 1,
                },
                "check" => StateFact::Check {
                    role,
                    name: req("name")?,
                    definition: req("filter")?,
                    is_disabled: num("n1")? == 1,
                    is_not_trusted: num("n2")? == 1,
                },
                "foreign_key" => {
                    let flags = num("n2")?;
                    StateFact::ForeignKey {
                        role,
                        name: req("name")?,
                        column: req("item")?,
                        references: text(row, "filter", STEP)?,
                        actions: num("n1")?,
                        is_disabled: flags & 1 != 0,
                        is_not_trusted: flags & 2 != 0,
                    }
                }
                "referenced_by" => StateFact::ReferencedBy {
                    role,
                    name: req("name")?,
                },
                _ => return Err(ConnError::Shape(STEP)),
            })
        })
        .collect()
}

/// `DB_ID()` and `DB_NAME()` of the session (the staging lease check).
pub async fn current_database(client: &mut MssqlClient) -> Result<(i32, String), ConnError> {
    const STEP: &str = "current_database";
    let r = rows(client, STEP, sql::CURRENT_DATABASE, &[]).await?;
    let row = r.first().ok_or(ConnError::Shape(STEP))?;
    Ok((
        int(row, "database_id", STEP)?.ok_or(ConnError::Shape(STEP))?,
        text(row, "database_name", STEP)?.ok_or(ConnError::Shape(STEP))?,
    ))
}

/// Runs a statement batch that returns nothing of interest.
pub async fn execute(
    client: &mut MssqlClient,
    step: &'static str,
    statement: &str,
) -> Result<(), ConnError> {
    client
        .simple_query(statement)
        .await
        .map_err(|e| map_error(step, e))?
        .into_results()
        .await
        .map_err(|e| map_error(step, e))?;
    Ok(())
}

/// Live-test hygiene: drops every scratch database ([`sql::SCRATCH_PREFIX`]) older than
/// `older_than_minutes`, left behind by a test process that was killed before its guard ran.
/// Returns the names dropped.
pub async fn sweep_scratch(
    client: &mut MssqlClient,
    older_than_minutes: i32,
) -> Result<Vec<String>, ConnError> {
    const STEP: &str = "sweep_scratch";
    let r = rows(
        client,
        STEP,
        sql::STALE_SCRATCH_DATABASES,
        &[&older_than_minutes],
    )
    .await?;
    let names: Vec<String> = r
        .iter()
        .map(|row| text(row, "name", STEP)?.ok_or(ConnError::Shape(STEP)))
        .collect::<Result<_, _>>()?;
    execute(client, "use", "USE master;").await?;
    for n in &names {
        if n.starts_with(sql::SCRATCH_PREFIX) {
            execute(client, STEP, &sql::drop_scratch_database(n)).await?;
        }
    }
    Ok(names)
}

/// The live-test connection string, or the reason to skip.
pub fn test_url() -> Result<String, String> {
    match std::env::var(TEST_URL_ENV) {
        Ok(v) if !v.trim().is_empty() => Ok(v),
        _ => Err(format!(
            "{TEST_URL_ENV} is not set; no SQL Server to test against"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_wait_for_long_statements_but_bound_the_handshake() {
        let config = with_session_timeouts(Config::new());
        assert_eq!(config.get_command_timeout(), None);
        assert!(config.get_handshake_timeout().is_some());
        let ado =
            Config::from_ado_string("server=tcp:db.invalid,1433;user=u;password=p").expect("ado");
        assert!(ado.get_command_timeout().is_some(), "tiberius' own default");
        assert_eq!(with_session_timeouts(ado).get_command_timeout(), None);
    }
}
