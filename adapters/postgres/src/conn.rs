//! Opening connections from registry endpoints, with TLS per the endpoint's `sslmode`
//! (`dpone-pg-tls`: `disable`, `require`, `verify-ca`, `verify-full` — the default for a TCP
//! host — and the pinned `sslrootcert` CA bundle). Failures carry a code and the SQLSTATE or a
//! classified TLS reason only (no endpoint, no path, no credential).

use dpone_engine_xmin::registry::{Endpoint, EndpointSpec, SslMode};
use dpone_engine_xmin::{ErrorCode, XminError};
use dpone_pg_tls::{ConnectError, Mode};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_postgres::{Client, Config};

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

/// Builds a driver config from an endpoint (its TLS settings are [`connect`]'s to decide).
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
        .connect_timeout(Duration::from_secs(30));
    if let Some(pw) = &ep.password {
        c.password(pw.expose());
    }
    dpone_pg_tls::session_config(&c, mode(&ep.spec))
}

/// Connects through the one opener (`dpone_pg_tls::connect`: the driver's TLS mode follows the
/// endpoint's `sslmode`, never a plaintext fallback; channel binding required under TLS);
/// failures carry only a code, the SQLSTATE or the classified TLS reason (no endpoint, no
/// credential).
pub async fn connect(ep: &Endpoint, code: ErrorCode, application: &str) -> Result<Conn, XminError> {
    let cfg = config(ep, application);
    let (client, task) =
        dpone_pg_tls::connect(&cfg, mode(&ep.spec), ep.spec.sslrootcert.as_deref())
            .await
            .map_err(|e| match e {
                ConnectError::RootCert(e) => {
                    XminError::new(ErrorCode::TlsRootCertInvalid, e.to_string())
                }
                ConnectError::Db(e) => crate::sql::db_error(code, "connect", &e),
                other => XminError::new(code, format!("connect failed: {other}")),
            })?;
    Ok(Conn { client, task })
}
