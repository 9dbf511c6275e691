//! Opening connections from registry endpoints. TLS is not negotiated by this adapter: use a
//! unix socket or loopback, or a TLS-terminating proxy owned by the environment.

use dpone_engine_xmin::registry::Endpoint;
use dpone_engine_xmin::{ErrorCode, XminError};
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

/// Builds a driver config from an endpoint.
pub fn config(ep: &Endpoint, application: &str) -> Config {
    let mut c = Config::new();
    if ep.spec.host.starts_with('/') {
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
    c
}

/// Connects; failures carry only a code and the SQLSTATE (no endpoint, no credential).
pub async fn connect(ep: &Endpoint, code: ErrorCode, application: &str) -> Result<Conn, XminError> {
    let (client, connection) = config(ep, application)
        .connect(NoTls)
        .await
        .map_err(|e| crate::sql::db_error(code, "connect", &e))?;
    let task = tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(Conn { client, task })
}
