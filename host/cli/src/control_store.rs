//! The nonproduction control store as the cli reaches it: where it is ([`StoreArgs`], the URL
//! read from the variable `--store-url-env` names and never printed), opening it ([`open`]),
//! the async runtime its calls run on, the exit status of its codes ([`store_exit`], the table
//! of `docs/cli.md`), and the live observation of a participant's physical identity
//! ([`observe`]) that `campaign enroll` records and a reservation run binds to.

use crate::exit::{BAD_INPUT, Failure, INTERNAL, REFUSED, RETRY};
use crate::input::check_regular;
use clap::{Args, ValueEnum};
use dpone_adapter_np_control_store::{PgControlStore, StoreCode, StoreEndpoint, StoreError};
use dpone_engine_nonproduction::enrollment::{self, PhysicalIdentity, SqlserverIdentity};
use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::registry::Endpoint;
use std::path::PathBuf;

/// The default variable holding the control store's connection URL.
pub const DEFAULT_URL_ENV: &str = "DPONE_NP_STORE_URL";

/// TLS toward the control store (`sslmode`).
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS, server not verified.
    Require,
    /// TLS, the server's chain verified against `--store-sslrootcert`.
    VerifyCa,
    /// TLS, chain and host name verified.
    VerifyFull,
}

/// Where the control store is.
#[derive(Args)]
pub struct StoreArgs {
    /// Name of the environment variable holding the store's PostgreSQL connection URL (never
    /// printed).
    #[arg(long, default_value = DEFAULT_URL_ENV)]
    store_url_env: String,
    /// Schema holding the reviewed DDL (`fixtures/nonproduction/control-store.sql`).
    #[arg(long, default_value = "dpone_np_control")]
    store_schema: String,
    /// TLS mode toward the store.
    #[arg(long, value_enum, default_value = "verify-full")]
    store_sslmode: SslMode,
    /// Pinned CA bundle (PEM) for `verify-ca` / `verify-full`.
    #[arg(long)]
    store_sslrootcert: Option<PathBuf>,
    /// Accept a store session whose role could change the store around the protocol (a
    /// superuser, a member of an owner, or a holder of UPDATE, DELETE, TRUNCATE, TRIGGER,
    /// REFERENCES or CREATE): a single-user development store only. Without it such a session is
    /// refused (`DPONE_NP_STORE_SESSION_PRIVILEGED`): the database backstop holds only against
    /// roles that cannot disable it.
    #[arg(long)]
    store_privileged_session: bool,
}

/// The exit status of a control-store code (the table of `docs/cli.md`).
pub fn store_exit(code: StoreCode) -> u8 {
    match code {
        StoreCode::InvalidInput | StoreCode::LimitAboveCeiling => BAD_INPUT,
        StoreCode::Unavailable
        | StoreCode::SerializationRetriesExhausted
        | StoreCode::OutcomeUnknown => RETRY,
        StoreCode::StoredStateInvalid => INTERNAL,
        _ => REFUSED,
    }
}

pub(crate) fn store_failure(e: StoreError) -> Failure {
    let mut message = e.message;
    if let Some(id) = &e.reservation_id {
        message = format!(
            "{message}; probe reservation {} with campaign status",
            id.as_str()
        );
    }
    Failure {
        code: e.code.as_str().to_owned(),
        message,
        exit: store_exit(e.code),
    }
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|_| Failure::internal("DPONE_CLI_RUNTIME", "cannot start the async runtime"))
}

/// The store over the connection the options name; connects lazily.
pub(crate) fn open(args: &StoreArgs) -> Result<PgControlStore, Failure> {
    let url = std::env::var(&args.store_url_env)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .ok_or_else(|| {
            Failure::bad_input(
                "DPONE_CLI_CAMPAIGN_STORE_URL_UNSET",
                "the variable --store-url-env names is not set (it holds the control store's connection URL)",
            )
        })?;
    let tls = match args.store_sslmode {
        SslMode::Disable => dpone_pg_tls::Mode::Disable,
        SslMode::Require => dpone_pg_tls::Mode::Require,
        SslMode::VerifyCa => dpone_pg_tls::Mode::VerifyCa,
        SslMode::VerifyFull => dpone_pg_tls::Mode::VerifyFull,
    };
    // The URL's own TLS parameters may only repeat --store-sslmode (the store's opener forces
    // the driver's mode from it in any case).
    let config = dpone_pg_tls::config_from_url(&url, tls).map_err(|e| match e {
        dpone_pg_tls::ConnectError::UrlConflict(key) => Failure::bad_input(
            "DPONE_CLI_CAMPAIGN_STORE_URL_TLS_CONFLICT",
            format!(
                "the control store's connection URL sets {key}, which contradicts --store-sslmode (TLS is chosen by --store-sslmode and --store-sslrootcert alone)"
            ),
        ),
        _ => Failure::bad_input(
            "DPONE_CLI_CAMPAIGN_STORE_URL_INVALID",
            "the control store's connection URL is not a PostgreSQL connection string",
        ),
    })?;
    let root_cert = match &args.store_sslrootcert {
        Some(p) => Some(check_regular(p, "store CA bundle").and_then(|()| {
            p.to_str().map(str::to_owned).ok_or_else(|| {
                Failure::bad_input(
                    "DPONE_CLI_ARGUMENT",
                    "--store-sslrootcert is not a UTF-8 path",
                )
            })
        })?),
        None => None,
    };
    PgControlStore::new(StoreEndpoint {
        config,
        tls,
        root_cert,
        schema: args.store_schema.clone(),
        accept_privileged_session: args.store_privileged_session,
    })
    .map_err(store_failure)
}

/// Observes the identity of the database `ep` names, on a session of its own (one statement,
/// [`enrollment::OBSERVE_SQL`]); failures carry a code only, never the endpoint.
pub(crate) async fn observe(ep: &Endpoint, code: ErrorCode) -> Result<PhysicalIdentity, Failure> {
    let conn = dpone_adapter_postgres::conn::connect(ep, code, "dpone-np-enrollment")
        .await
        .map_err(Failure::from)?;
    let row = conn
        .client
        .query_one(enrollment::OBSERVE_SQL, &[])
        .await
        .map_err(|e| {
            Failure::from(dpone_adapter_postgres::sql::db_error(
                code,
                "observe the identity",
                &e,
            ))
        })?;
    let (sys, name, oid): (Option<String>, Option<String>, Option<i64>) =
        (row.get(0), row.get(1), row.get(2));
    match (sys, name, oid.and_then(|o| u32::try_from(o).ok())) {
        (Some(system_identifier), Some(database_name), Some(database_oid)) => {
            Ok(PhysicalIdentity {
                system_identifier,
                database_name,
                database_oid,
            })
        }
        _ => Err(Failure::refused(
            "DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE",
            "the participant's identity could not be observed (system identifier, database \
             name or OID missing)",
        )),
    }
}

/// Observes the identity of SQL Server database `database` through `ep` (TLS required, as the
/// route connects; `trust_server_certificate` as the registry says): its catalog row
/// (`sys.databases` and `sys.database_recovery_status`, the statement the route's pins are
/// verified with), which must name exactly `database` and carry its GUID. Failures carry a code
/// only, never the endpoint or the server's text.
pub(crate) async fn observe_sqlserver(
    ep: &Endpoint,
    database: &str,
    trust_server_certificate: bool,
) -> Result<SqlserverIdentity, Failure> {
    use dpone_adapter_mssql::conn as mssql;
    let failure = |code: ErrorCode, e: &mssql::ConnError| {
        Failure::from(dpone_engine_xmin::XminError::new(
            code,
            format!("observe the identity: {e}"),
        ))
    };
    let mut client = mssql::connect_endpoint(ep, database, trust_server_certificate)
        .await
        .map_err(|e| failure(mssql::connect_code(&e), &e))?;
    let rows = mssql::catalog_rows(&mut client, database)
        .await
        .map_err(|e| failure(ErrorCode::TargetStatementFailed, &e))?;
    let row = rows.iter().find(|r| r.name == database);
    let identity = row.and_then(|r| {
        SqlserverIdentity::new(
            r.name.clone(),
            r.database_id,
            r.create_token.clone(),
            r.database_guid.as_deref()?,
        )
        .ok()
    });
    identity.ok_or_else(|| {
        Failure::refused(
            "DPONE_CLI_NP_PARTICIPANT_UNOBSERVABLE",
            "the participant's identity could not be observed (no catalog row of exactly that \
             database, or its GUID is not visible)",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpone_adapter_np_control_store as store;
    use std::collections::BTreeMap;

    const DOCS: &str = include_str!("../../../docs/cli.md");

    #[test]
    fn store_codes_exit_as_documented() {
        let start = DOCS
            .find("Codes of the nonproduction control store")
            .expect("docs/cli.md documents the control store's codes");
        let mut documented = BTreeMap::new();
        let mut in_table = false;
        for line in DOCS[start..].lines().skip(1) {
            if line.starts_with('|') {
                in_table = true;
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                let Some(code) = cells
                    .get(1)
                    .and_then(|c| c.strip_prefix('`')?.strip_suffix('`'))
                else {
                    continue;
                };
                let exit: u8 = cells[2].parse().expect("exit status");
                assert!(documented.insert(code.to_owned(), exit).is_none());
            } else if in_table {
                break;
            }
        }
        let actual: BTreeMap<String, u8> = StoreCode::ALL
            .iter()
            .map(|c| (c.as_str().to_owned(), store_exit(*c)))
            .collect();
        assert_eq!(
            documented, actual,
            "docs/cli.md (left) and store_exit (right)"
        );
    }

    /// The live SQL Server's `database` (default `master`) observed as `campaign enroll` and a
    /// reservation run observe it, from `DPONE_TEST_MSSQL_URL` (an ADO.NET string): the same
    /// identity twice, of exactly that database; a database that does not exist is never
    /// observed. Tier: live SQL Server (`cfg(dpone_live_mssql)`).
    #[tokio::test]
    #[cfg_attr(
        not(dpone_live_mssql),
        ignore = "SKIP: no SQL Server: set DPONE_TEST_MSSQL_URL (an ADO.NET connection string)"
    )]
    async fn a_sql_server_database_is_observed_by_its_catalog_identity() {
        use dpone_engine_xmin::registry::{EndpointSpec, Secret};
        let url = dpone_adapter_mssql::conn::test_url().unwrap_or_else(|r| panic!("{r}"));
        let mut fields = BTreeMap::new();
        for part in url.split(';').filter(|p| !p.trim().is_empty()) {
            let (k, v) = part.split_once('=').expect("key=value");
            fields.insert(
                k.trim().to_ascii_lowercase().replace(' ', ""),
                v.trim().to_owned(),
            );
        }
        let get = |keys: &[&str]| keys.iter().find_map(|k| fields.get(*k).cloned());
        let server = get(&["server", "datasource", "addr", "address"]).expect("server");
        let server = server.strip_prefix("tcp:").unwrap_or(&server);
        let (host, port) = server.split_once(',').unwrap_or((server, "1433"));
        let database = get(&["database", "initialcatalog"]).unwrap_or_else(|| "master".into());
        let trust =
            get(&["trustservercertificate"]).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let ep = Endpoint {
            spec: EndpointSpec {
                host: host.to_owned(),
                port: port.parse().expect("port"),
                database: database.clone(),
                user: get(&["user", "userid", "uid"]).expect("user"),
                sslmode: None,
                sslrootcert: None,
            },
            password: get(&["password", "pwd"]).map(Secret::new),
        };
        let first = observe_sqlserver(&ep, &database, trust)
            .await
            .expect("observed");
        assert_eq!(first.database_name, database);
        assert!(first.database_id > 0);
        assert_eq!(
            observe_sqlserver(&ep, &database, trust)
                .await
                .expect("again"),
            first,
            "the same database is the same identity"
        );
        let absent = "dpone_no_such_database_7c1f";
        assert!(observe_sqlserver(&ep, absent, trust).await.is_err());
    }

    #[test]
    fn a_lost_acknowledgement_names_the_reservation_to_probe_and_retries() {
        let mut e = StoreError::new(StoreCode::OutcomeUnknown, "commit acknowledgement lost");
        let id = store::Sha256Digest::of(b"r");
        e.reservation_id = Some(id.clone());
        let f = store_failure(e);
        assert_eq!(f.exit, RETRY);
        assert!(f.message.contains(id.as_str()));
    }
}
