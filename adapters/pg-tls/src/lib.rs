//! The one way the host opens a PostgreSQL connection ([`connect`]), with TLS per `sslmode`.
//!
//! | [`Mode`] (`sslmode`) | TLS | server certificate | SCRAM channel binding |
//! |---|---|---|---|
//! | `disable` | never | — | — |
//! | `require` | required | not verified (encryption only) | required |
//! | `verify-ca` | required | chain to a trusted CA; any host name | required |
//! | `verify-full` | required | chain to a trusted CA and names the host | required |
//!
//! [`connect`] sets the driver's own mode from the [`Mode`] on every connection, whatever the
//! caller's [`Config`] says, so a TLS mode never falls back to a plaintext socket (a server that
//! answers `N` to the TLS request is refused before any credential is sent). Under TLS the
//! driver requires `SCRAM-SHA-256-PLUS` (tls-server-end-point, which `tokio-postgres-rustls`
//! provides): a server that offers SCRAM without binding, asks for a cleartext or md5 password,
//! or skips authentication is refused before the password is sent. A connection URL is read by
//! [`config_from_url`], which refuses a URL whose own TLS parameters contradict the mode.
//!
//! Trusted CAs: the pinned `sslrootcert` bundle (PEM) when given, read through the bounded
//! reader of regular files (`dpone-boundary`, at most [`MAX_CA_BUNDLE_BYTES`]), else the
//! system's roots. rustls 0.23 through `tokio-postgres-rustls`, the line `tiberius` 0.13 uses
//! (one TLS stack), with the aws-lc-rs crypto provider chosen explicitly ([`provider`]).
//! Errors carry a stable code and a classified reason only: never a path, an endpoint, a
//! credential or the driver's text.

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::path::Path;
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio_postgres::config::{ChannelBinding, SslMode, SslNegotiation};
use tokio_postgres::{Client, Config, NoTls};
pub use tokio_postgres_rustls::MakeRustlsConnect;

#[cfg(feature = "test-support")]
pub mod testing;

/// The largest `sslrootcert` CA bundle read (a full system bundle is about 220 KB).
pub const MAX_CA_BUNDLE_BYTES: u64 = 1 << 20;

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
    /// The driver's setting: TLS is mandatory unless disabled (never `prefer`).
    pub fn driver(self) -> SslMode {
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }

    /// The driver's channel binding: required under TLS, off without it.
    pub fn channel_binding(self) -> ChannelBinding {
        match self {
            Mode::Disable => ChannelBinding::Disable,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => ChannelBinding::Require,
        }
    }

    /// libpq's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
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
            let pem = dpone_boundary::read::read_regular(Path::new(path), MAX_CA_BUNDLE_BYTES)
                .map_err(|e| {
                    RootCertError(format!("sslrootcert cannot be read ({})", e.describe()))
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

/// Why [`connect`] or [`config_from_url`] refused. Carries no path, endpoint or credential.
#[derive(Debug)]
pub enum ConnectError {
    /// The trust anchors cannot be loaded (`DPONE_PG_TLS_ROOT_CERT_INVALID`).
    RootCert(RootCertError),
    /// The connection URL is not a PostgreSQL connection string (`DPONE_PG_URL_INVALID`).
    UrlInvalid,
    /// The URL's own TLS parameter contradicts the chosen mode (`DPONE_PG_TLS_URL_CONFLICT`);
    /// the parameter's name.
    UrlConflict(&'static str),
    /// TLS could not be established or the server certificate was refused
    /// (`DPONE_PG_TLS_FAILED`); the classified reason.
    Tls(&'static str),
    /// Under TLS the server did not authenticate with SCRAM channel binding, so no password
    /// was sent (`DPONE_PG_TLS_CHANNEL_BINDING_REQUIRED`).
    ChannelBinding,
    /// Any other driver failure (the caller classifies it: SQLSTATE, closed, ...).
    Db(tokio_postgres::Error),
}

impl ConnectError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::RootCert(_) => "DPONE_PG_TLS_ROOT_CERT_INVALID",
            Self::UrlInvalid => "DPONE_PG_URL_INVALID",
            Self::UrlConflict(_) => "DPONE_PG_TLS_URL_CONFLICT",
            Self::Tls(_) => "DPONE_PG_TLS_FAILED",
            Self::ChannelBinding => "DPONE_PG_TLS_CHANNEL_BINDING_REQUIRED",
            Self::Db(_) => "DPONE_PG_CONNECT_FAILED",
        }
    }

    /// The reason, when it is a TLS one (`TLS: ...` in callers' messages).
    pub fn tls_reason(&self) -> Option<&'static str> {
        match self {
            Self::Tls(why) => Some(why),
            Self::ChannelBinding => Some(CHANNEL_BINDING_REASON),
            _ => None,
        }
    }
}

const CHANNEL_BINDING_REASON: &str =
    "the server did not authenticate with SCRAM channel binding (no password was sent)";

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RootCert(e) => write!(f, "{e}"),
            Self::UrlInvalid => {
                f.write_str("the connection URL is not a PostgreSQL connection string")
            }
            Self::UrlConflict(key) => write!(
                f,
                "the connection URL sets {key}, which contradicts the chosen sslmode (TLS is chosen by the sslmode option alone)"
            ),
            Self::Tls(why) => write!(f, "TLS: {why}"),
            Self::ChannelBinding => write!(f, "TLS: {CHANNEL_BINDING_REASON}"),
            Self::Db(_) => f.write_str("the connection failed"),
        }
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::RootCert(e) => Some(e),
            Self::Db(e) => Some(e),
            _ => None,
        }
    }
}

/// A client and the task driving its connection (spawned on the current Tokio runtime).
pub type Session = (Client, JoinHandle<()>);

/// `config` as [`connect`] uses it under `mode`: the driver's TLS mode, negotiation and channel
/// binding follow `mode`, whatever `config` said.
pub fn session_config(config: &Config, mode: Mode) -> Config {
    let mut c = config.clone();
    c.ssl_mode(mode.driver())
        .ssl_negotiation(SslNegotiation::Postgres)
        .channel_binding(mode.channel_binding());
    c
}

/// Opens a connection to `config` with TLS per `mode`, trusting the CA bundle at `root_cert`
/// (else the system's roots) for `verify-ca` / `verify-full`; the bundle is read on each call.
/// The one opener of every PostgreSQL connection of the host.
pub async fn connect(
    config: &Config,
    mode: Mode,
    root_cert: Option<&str>,
) -> Result<Session, ConnectError> {
    let cfg = session_config(config, mode);
    let tls = connector(mode, root_cert).map_err(ConnectError::RootCert)?;
    let classify = |e: tokio_postgres::Error| classify(mode, e);
    Ok(match tls {
        None => {
            let (client, connection) = cfg.connect(NoTls).await.map_err(classify)?;
            (
                client,
                tokio::spawn(async move {
                    let _ = connection.await;
                }),
            )
        }
        Some(tls) => {
            let (client, connection) = cfg.connect(tls).await.map_err(classify)?;
            (
                client,
                tokio::spawn(async move {
                    let _ = connection.await;
                }),
            )
        }
    })
}

fn classify(mode: Mode, e: tokio_postgres::Error) -> ConnectError {
    if mode != Mode::Disable && e.code().is_none() && is_channel_binding_refusal(&e) {
        return ConnectError::ChannelBinding;
    }
    match failure(&e) {
        Some(why) => ConnectError::Tls(why),
        None => ConnectError::Db(e),
    }
}

/// The driver's refusal to authenticate without channel binding (its text names no endpoint).
fn is_channel_binding_refusal(e: &tokio_postgres::Error) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut text = e.to_string();
    while let Some(err) = cur {
        text.push_str(&err.to_string());
        cur = err.source();
    }
    text.contains("channel binding")
}

/// The TLS parameters a connection URL may carry, all of which the mode decides.
const URL_TLS_KEYS: &[&str] = &[
    "sslmode",
    "sslnegotiation",
    "channel_binding",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslcrl",
    "sslcrldir",
    "sslpassword",
    "sslsni",
    "sslcompression",
    "requiressl",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "gssencmode",
];

/// Reads a PostgreSQL connection URL (`postgres://…` or `key=value …`) for use under `mode`.
/// Its own TLS parameters may only repeat what `mode` decides (`sslmode` naming the same mode,
/// `channel_binding` as [`connect`] sets it, `sslnegotiation=postgres`); any other TLS parameter
/// is refused (`DPONE_PG_TLS_URL_CONFLICT`), as is a string the driver cannot read.
pub fn config_from_url(url: &str, mode: Mode) -> Result<Config, ConnectError> {
    for (key, value) in url_params(url)? {
        let Some(known) = URL_TLS_KEYS.iter().find(|k| **k == key) else {
            continue;
        };
        let agrees = match *known {
            "sslmode" => value == mode.as_str(),
            "sslnegotiation" => value == "postgres",
            "channel_binding" => match mode {
                Mode::Disable => value == "disable",
                _ => value == "require",
            },
            _ => false,
        };
        if !agrees {
            return Err(ConnectError::UrlConflict(known));
        }
    }
    url.parse::<Config>().map_err(|_| ConnectError::UrlInvalid)
}

/// The parameters of a connection string, in either of the driver's two forms (keys and
/// values decoded as the driver decodes them).
fn url_params(url: &str) -> Result<Vec<(String, String)>, ConnectError> {
    let rest = url
        .strip_prefix("postgresql://")
        .or_else(|| url.strip_prefix("postgres://"));
    match rest {
        Some(rest) => {
            let Some((_, query)) = rest.split_once('?') else {
                return Ok(Vec::new());
            };
            query
                .split('&')
                .filter(|p| !p.is_empty())
                // A piece without `=` is not a parameter (the driver refuses a real one).
                .filter_map(|pair| pair.split_once('='))
                .map(|(k, v)| Ok((percent_decode(k)?, percent_decode(v)?)))
                .collect()
        }
        None => key_values(url),
    }
}

fn percent_decode(s: &str) -> Result<String, ConnectError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or(ConnectError::UrlInvalid)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| ConnectError::UrlInvalid)?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ConnectError::UrlInvalid)
}

/// `key = value` pairs separated by whitespace; a value is a run of non-space characters or a
/// single-quoted string, backslash escaping the next character in either.
fn key_values(s: &str) -> Result<Vec<(String, String)>, ConnectError> {
    let mut it = s.chars().peekable();
    let mut out = Vec::new();
    loop {
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        if it.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(c) = it.next_if(|c| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        if it.next() != Some('=') {
            return Err(ConnectError::UrlInvalid);
        }
        while it.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if it.next_if_eq(&'\'').is_some() {
            loop {
                match it.next() {
                    Some('\'') => break,
                    Some('\\') => value.push(it.next().ok_or(ConnectError::UrlInvalid)?),
                    Some(c) => value.push(c),
                    None => return Err(ConnectError::UrlInvalid),
                }
            }
        } else {
            while let Some(c) = it.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.push(it.next().ok_or(ConnectError::UrlInvalid)?);
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
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
