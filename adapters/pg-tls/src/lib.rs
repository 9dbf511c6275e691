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
//! rustls 0.23 through `tokio-postgres-rustls`, the line `tiberius` 0.13 uses (one TLS stack),
//! with the aws-lc-rs crypto provider chosen explicitly ([`provider`]); SCRAM channel binding is
//! used when the server offers it. Errors carry a classified reason only: never a path, an
//! endpoint or the driver's text.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::sync::Arc;
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

/// The one crypto provider of the host's TLS connections: aws-lc-rs, the provider `tiberius`
/// falls back to and `sigstore-verify` is built with. Passed explicitly (never a process-wide
/// default), so no connection depends on which crate installed a default first.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// The connector for `mode`, or `None` for [`Mode::Disable`]. Reads the CA bundle.
pub fn connector(
    mode: Mode,
    root_cert: Option<&str>,
) -> Result<Option<MakeRustlsConnect>, RootCertError> {
    Ok(client_config(mode, root_cert)?.map(MakeRustlsConnect::new))
}

/// The rustls client configuration for `mode`, or `None` for [`Mode::Disable`].
pub fn client_config(
    mode: Mode,
    root_cert: Option<&str>,
) -> Result<Option<ClientConfig>, RootCertError> {
    if mode == Mode::Disable {
        return Ok(None);
    }
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|_| RootCertError("the crypto provider offers no TLS version".into()))?;
    let config = match mode {
        Mode::Disable => return Ok(None),
        Mode::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptionOnly(provider)))
            .with_no_client_auth(),
        Mode::VerifyCa => {
            let chain =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots(root_cert)?), provider)
                    .build()
                    .map_err(|_| RootCertError("no usable CA certificate".into()))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(chain)))
                .with_no_client_auth()
        }
        Mode::VerifyFull => builder
            .with_root_certificates(roots(root_cert)?)
            .with_no_client_auth(),
    };
    Ok(Some(config))
}

fn roots(root_cert: Option<&str>) -> Result<RootCertStore, RootCertError> {
    let certs: Vec<CertificateDer<'static>> = match root_cert {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                RootCertError(format!("sslrootcert cannot be read ({:?})", e.kind()))
            })?;
            CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<_, _>>()
                .map_err(|_| RootCertError("sslrootcert is not PEM".into()))?
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() && !found.errors.is_empty() {
                return Err(RootCertError("system roots cannot be loaded".into()));
            }
            found.certs
        }
    };
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(RootCertError("no usable CA certificate".into()));
    }
    Ok(store)
}

/// `require`: no certificate verification; the handshake signatures are still checked against
/// the presented key.
#[derive(Debug)]
struct EncryptionOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptionOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the WebPKI chain check without the host-name check. rustls checks the name
/// only after the chain has verified, so a name error means the chain is trusted; both forms
/// of the name error (with and without the names in context) are accepted, nothing else.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

/// A host-name mismatch, in either of the forms rustls 0.23 reports it.
fn is_name_error(e: &CertificateError) -> bool {
    matches!(
        e,
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
    )
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(ref c)) if is_name_error(c) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
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
                rustls::Error::InvalidCertificate(c) if is_name_error(c) => {
                    "the server certificate does not name the host"
                }
                rustls::Error::InvalidCertificate(
                    CertificateError::Expired
                    | CertificateError::ExpiredContext { .. }
                    | CertificateError::NotValidYet
                    | CertificateError::NotValidYetContext { .. },
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

    #[test]
    fn verify_ca_waives_only_the_name_error_in_both_its_forms() {
        assert!(is_name_error(&CertificateError::NotValidForName));
        assert!(is_name_error(&CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("db.example").expect("name").to_owned(),
            presented: vec!["DnsName(\"other.example\")".into()],
        }));
        for other in [
            CertificateError::UnknownIssuer,
            CertificateError::BadSignature,
            CertificateError::Expired,
            CertificateError::NotValidYet,
            CertificateError::Revoked,
            CertificateError::BadEncoding,
        ] {
            assert!(!is_name_error(&other), "{other:?}");
        }
    }

    #[test]
    fn connections_use_the_one_aws_lc_rs_provider() {
        let expected = rustls::crypto::aws_lc_rs::default_provider();
        let suites =
            |p: &CryptoProvider| -> Vec<_> { p.cipher_suites.iter().map(|s| s.suite()).collect() };
        let config = client_config(Mode::Require, None)
            .expect("config")
            .expect("tls");
        assert_eq!(suites(config.crypto_provider()), suites(&expected));
        assert_eq!(suites(&provider()), suites(&expected));
    }

    #[test]
    fn a_bundle_that_is_not_pem_is_refused_without_its_path() {
        let dir = std::env::temp_dir().join(format!("dpone-pg-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ca.pem");
        std::fs::write(&path, b"-----BEGIN CERTIFICATE-----\nnot base64 at all\n").expect("write");
        let path = path.to_str().expect("utf-8");
        for mode in [Mode::VerifyCa, Mode::VerifyFull] {
            let e = connector(mode, Some(path)).err().expect("refused");
            assert!(
                e.to_string().contains("not PEM") || e.to_string().contains("no usable CA"),
                "{e}"
            );
            assert!(!e.to_string().contains("dpone-pg-tls"), "{e}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
