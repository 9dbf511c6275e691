//! Opening connections from registry endpoints, with TLS per the endpoint's `sslmode`
//! (`dpone-pg-tls`: `disable`, `require`, `verify-ca`, `verify-full` — the default for a TCP
//! host — and the pinned `sslrootcert` CA bundle). Failures carry a code and the SQLSTATE or a
//! classified TLS reason only (no endpoint, no path, no credential).

use dpone_engine_xmin::registry::{Endpoint, EndpointSpec, SslMode};
use dpone_engine_xmin::{ErrorCode, XminError};
use dpone_pg_tls::{MakeRustlsConnect, Mode};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config, NoTls};

/// A client and the task driving its connection; dropping it closes the connection.
pub struct Conn {
    /// The client.
    pub client: Client,
    task: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn mode(spec: &EndpointSpec) -> Mode {
    match spec.effective_sslmode() {
        SslMode::Disable => Mode::Disable,
        SslMode::Require => Mode::Require,
        SslMode::VerifyCa => Mode::VerifyCa,
        SslMode::VerifyFull => Mode::VerifyFull,
    }
}

/// Builds a driver config from an endpoint (TLS required unless its mode is `disable`).
pub fn config(ep: &Endpoint, application: &str) -> Config {
    let mut c = Config::new();
    if ep.spec.is_unix_socket() {
        c.host_path(&ep.spec.host);
    } else {
        c.host(&ep.spec.host);
    }
    c.port(ep.spec.port)
        .user(&ep.spec.user)
        .dbname(&ep.spec.database)
        .application_name(application)
        .connect_timeout(Duration::from_secs(30))
        .ssl_mode(mode(&ep.spec).driver());
    if let Some(pw) = &ep.password {
        c.password(pw.expose());
    }
    c
}

/// The TLS connector of an endpoint, or `None` for `disable`. Reads the pinned CA bundle.
pub fn tls_connector(spec: &EndpointSpec) -> Result<Option<MakeRustlsConnect>, XminError> {
    dpone_pg_tls::connector(mode(spec), spec.sslrootcert.as_deref())
        .map_err(|e| XminError::new(ErrorCode::TlsRootCertInvalid, e.to_string()))
}

fn connect_error(code: ErrorCode, e: &tokio_postgres::Error) -> XminError {
    match dpone_pg_tls::failure(e) {
        Some(why) => XminError::new(code, format!("connect failed: TLS: {why}")),
        None => crate::sql::db_error(code, "connect", e),
    }
}

/// Connects; failures carry only a code, the SQLSTATE or the classified TLS reason (no
/// endpoint, no credential).
pub async fn connect(ep: &Endpoint, code: ErrorCode, application: &str) -> Result<Conn, XminError> {
    let cfg = config(ep, application);
    let (client, task) = match tls_connector(&ep.spec)? {
        None => {
            let (client, connection) = cfg
                .connect(NoTls)
                .await
                .map_err(|e| connect_error(code, &e))?;
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            (client, task)
        }
        Some(tls) => {
            let (client, connection) = cfg
                .connect(tls)
                .await
                .map_err(|e| connect_error(code, &e))?;
            let task = tokio::spawn(async move {
                let _ = connection.await;
            });
            (client, task)
        }
    };
    Ok(Conn { client, task })
}
