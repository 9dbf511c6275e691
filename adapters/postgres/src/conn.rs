//! Opening connections from registry endpoints, with TLS per the endpoint's `sslmode`.
//!
//! | `sslmode` | TLS | certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `require` | required | not verified (encryption only) |
//! | `verify-ca` | required | chain to a trusted CA; any host name |
//! | `verify-full` (default for a TCP host) | required | chain to a trusted CA and names the host |
//!
//! Trusted CAs: the endpoint's pinned `sslrootcert` bundle (PEM), else the system's roots. TLS is
//! rustls 0.21 through `tokio-postgres-rustls`, the line `tiberius` uses (one TLS stack); SCRAM
//! channel binding is used when the server offers it. Failures carry a code and a classified
//! reason only (no endpoint, no path, no credential).

use dpone_engine_xmin::registry::{Endpoint, EndpointSpec, SslMode};
use dpone_engine_xmin::{ErrorCode, XminError};
use rustls::client::{ServerCertVerified, ServerCertVerifier, WebPkiVerifier};
use rustls::{Certificate, CertificateError, ClientConfig, RootCertStore, ServerName};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::task::JoinHandle;
use tokio_postgres::config::SslMode as PgSslMode;
use tokio_postgres::{Client, Config, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

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
        .ssl_mode(match ep.spec.effective_sslmode() {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        });
    if let Some(pw) = &ep.password {
        c.password(pw.expose());
    }
    c
}

/// The TLS connector of an endpoint, or `None` for `disable`. Reads the pinned CA bundle.
pub fn tls_connector(spec: &EndpointSpec) -> Result<Option<MakeRustlsConnect>, XminError> {
    let builder = ClientConfig::builder().with_safe_defaults();
    let config = match spec.effective_sslmode() {
        SslMode::Disable => return Ok(None),
        SslMode::Require => builder
            .with_custom_certificate_verifier(Arc::new(EncryptionOnly))
            .with_no_client_auth(),
        SslMode::VerifyCa => builder
            .with_custom_certificate_verifier(Arc::new(ChainOnly(WebPkiVerifier::new(
                roots(spec)?,
                None,
            ))))
            .with_no_client_auth(),
        SslMode::VerifyFull => builder
            .with_root_certificates(roots(spec)?)
            .with_no_client_auth(),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn roots(spec: &EndpointSpec) -> Result<RootCertStore, XminError> {
    let invalid = |what: &str| {
        XminError::new(
            ErrorCode::TlsRootCertInvalid,
            format!("TLS trust anchors: {what}"),
        )
    };
    let certs: Vec<Vec<u8>> = match &spec.sslrootcert {
        Some(path) => {
            let file = std::fs::File::open(path)
                .map_err(|e| invalid(&format!("sslrootcert cannot be read ({:?})", e.kind())))?;
            rustls_pemfile::certs(&mut std::io::BufReader::new(file))
                .map_err(|_| invalid("sslrootcert is not PEM"))?
        }
        None => rustls_native_certs::load_native_certs()
            .map_err(|e| invalid(&format!("system roots cannot be loaded ({:?})", e.kind())))?
            .into_iter()
            .map(|c| c.0)
            .collect(),
    };
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(&certs);
    if added == 0 {
        return Err(invalid("no usable CA certificate"));
    }
    Ok(store)
}

/// `require`: TLS without certificate verification (the handshake signatures are still
/// checked against the presented key).
struct EncryptionOnly;

impl ServerCertVerifier for EncryptionOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &Certificate,
        _intermediates: &[Certificate],
        _server_name: &ServerName,
        _scts: &mut dyn Iterator<Item = &[u8]>,
        _ocsp_response: &[u8],
        _now: SystemTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
}

/// `verify-ca`: the full WebPKI chain check, without the host-name check (which rustls does
/// after the chain has been verified).
struct ChainOnly(WebPkiVerifier);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &Certificate,
        intermediates: &[Certificate],
        server_name: &ServerName,
        scts: &mut dyn Iterator<Item = &[u8]>,
        ocsp_response: &[u8],
        now: SystemTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            scts,
            ocsp_response,
            now,
        ) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName)) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }
}

/// Why a TLS connection failed, classified without the driver's text.
fn tls_failure(e: &tokio_postgres::Error) -> Option<&'static str> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(err) = cur {
        let found = err.downcast_ref::<rustls::Error>().or_else(|| {
            err.downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(r) = found {
            return Some(match r {
                rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
                    "the server certificate is not signed by a trusted CA"
                }
                rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => {
                    "the server certificate does not name the host"
                }
                rustls::Error::InvalidCertificate(
                    CertificateError::Expired | CertificateError::NotValidYet,
                ) => "the server certificate is expired or not yet valid",
                rustls::Error::InvalidCertificate(_) => "the server certificate is invalid",
                _ => "the TLS handshake failed",
            });
        }
        cur = err.source();
    }
    // The driver's own TLS errors (e.g. the server refused TLS) name no endpoint.
    e.to_string()
        .contains("TLS")
        .then_some("the server did not complete a TLS session")
}

fn connect_error(code: ErrorCode, e: &tokio_postgres::Error) -> XminError {
    match tls_failure(e) {
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
