//! TLS for PostgreSQL connections, shared by both PostgreSQL source readers and the target.
//!
//! | [`Mode`] (`sslmode`) | TLS | server certificate |
//! |---|---|---|
//! | `disable` | never | — |
//! | `require` | required | not verified (encryption only) |
//! | `verify-ca` | required | chain to a trusted CA; any host name |
//! | `verify-full` | required | chain to a trusted CA and names the host |
//!
//! Trusted CAs: the pinned `sslrootcert` bundle (PEM) when given, else the system's roots.
//! rustls 0.21 through `tokio-postgres-rustls`, the line `tiberius` uses (one TLS stack); SCRAM
//! channel binding is used when the server offers it. Errors carry a classified reason only:
//! never a path, an endpoint or the driver's text.

use rustls::client::{ServerCertVerified, ServerCertVerifier, WebPkiVerifier};
use rustls::{Certificate, CertificateError, ClientConfig, RootCertStore, ServerName};
use std::sync::Arc;
use std::time::SystemTime;
pub use tokio_postgres_rustls::MakeRustlsConnect;

/// A TLS mode, with libpq's names and meanings (no `prefer`/`allow`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No TLS.
    Disable,
    /// TLS required; the certificate is not verified.
    Require,
    /// TLS required; the chain must lead to a trusted CA (any host name).
    VerifyCa,
    /// TLS required; trusted chain and a subjectAltName matching the host.
    VerifyFull,
}

impl Mode {
    /// The driver's setting: TLS is mandatory unless disabled.
    pub fn driver(self) -> tokio_postgres::config::SslMode {
        match self {
            Mode::Disable => tokio_postgres::config::SslMode::Disable,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }
}

/// The trust anchors cannot be loaded: the reason, without the path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootCertError(pub String);

impl std::fmt::Display for RootCertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS trust anchors: {}", self.0)
    }
}

impl std::error::Error for RootCertError {}

/// The connector for `mode`, or `None` for [`Mode::Disable`]. Reads the CA bundle.
pub fn connector(
    mode: Mode,
    root_cert: Option<&str>,
) -> Result<Option<MakeRustlsConnect>, RootCertError> {
    let builder = ClientConfig::builder().with_safe_defaults();
    let config = match mode {
        Mode::Disable => return Ok(None),
        Mode::Require => builder
            .with_custom_certificate_verifier(Arc::new(EncryptionOnly))
            .with_no_client_auth(),
        Mode::VerifyCa => builder
            .with_custom_certificate_verifier(Arc::new(ChainOnly(WebPkiVerifier::new(
                roots(root_cert)?,
                None,
            ))))
            .with_no_client_auth(),
        Mode::VerifyFull => builder
            .with_root_certificates(roots(root_cert)?)
            .with_no_client_auth(),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn roots(root_cert: Option<&str>) -> Result<RootCertStore, RootCertError> {
    let certs: Vec<Vec<u8>> = match root_cert {
        Some(path) => {
            let file = std::fs::File::open(path).map_err(|e| {
                RootCertError(format!("sslrootcert cannot be read ({:?})", e.kind()))
            })?;
            rustls_pemfile::certs(&mut std::io::BufReader::new(file))
                .map_err(|_| RootCertError("sslrootcert is not PEM".into()))?
        }
        None => rustls_native_certs::load_native_certs()
            .map_err(|e| RootCertError(format!("system roots cannot be loaded ({:?})", e.kind())))?
            .into_iter()
            .map(|c| c.0)
            .collect(),
    };
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(&certs);
    if added == 0 {
        return Err(RootCertError("no usable CA certificate".into()));
    }
    Ok(store)
}

/// `require`: no certificate verification (the handshake signatures are still checked
/// against the presented key).
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

/// `verify-ca`: the WebPKI chain check without the host-name check (rustls checks the name
/// only after the chain has verified).
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

/// Why a connection failed in TLS, classified without the driver's text; `None` when the
/// failure is not a TLS one.
pub fn failure(e: &tokio_postgres::Error) -> Option<&'static str> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bundle_is_refused_without_its_path() {
        let e = connector(Mode::VerifyFull, Some("/nonexistent/dpone/ca.pem"))
            .err()
            .expect("refused");
        assert!(e.to_string().contains("cannot be read"), "{e}");
        assert!(!e.to_string().contains("nonexistent"), "{e}");
        assert!(connector(Mode::Disable, None).expect("disable").is_none());
        assert!(connector(Mode::Require, None).expect("require").is_some());
    }
}
