//! The OTLP exporters' transport: one blocking HTTP/1.1 POST per export (`Connection: close`),
//! over a plain TCP connection for an `http://` endpoint or over TLS for an `https://` one,
//! bounded by connect, read and write timeouts and a response ceiling.
//!
//! TLS is rustls 0.23 with the aws-lc-rs provider (the host's one TLS stack, the one the
//! PostgreSQL and SQL Server connections use), a blocking [`rustls::StreamOwned`] over the
//! `TcpStream`. The server's certificate is verified (chain and host name) against the system's
//! roots, or, when the signal's `…_CERTIFICATE` variable names a PEM file, against exactly the
//! CA certificates of that file (read through the bounded reader of regular files, at most
//! [`MAX_CA_BYTES`]). There is no option to skip verification and no client certificate.
//!
//! Headers (`OTEL_EXPORTER_OTLP_HEADERS`, typically a bearer token) never travel in clear to
//! another machine: with headers configured, an `http://` endpoint whose host is not loopback
//! (`localhost`, `127.0.0.0/8`, `::1`) is refused before any connection ([`OtlpHttp::for_signal`]),
//! and such a client dials only loopback addresses. Errors name their kind, never the endpoint,
//! a header or a path.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use std::future::Future;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Connect, read and write timeout of one export.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest response read (the OTLP response is a small protobuf message).
const MAX_RESPONSE: u64 = 64 * 1024;
/// The largest CA file read (a full system bundle is about 220 KB).
pub const MAX_CA_BYTES: u64 = 1 << 20;

/// Why a signal is not exported: a stable code and a reason without the endpoint, any header or
/// any path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportError {
    /// Headers are configured and the endpoint is plain `http://` to a non-loopback host.
    HeadersOverPlaintext,
    /// The endpoint is not an `http://` or `https://` URL with a host.
    Endpoint,
    /// The pinned CA file cannot be used (the reason, e.g. `not a regular file`, `not PEM`).
    Ca(String),
    /// No `…_CERTIFICATE` is set and the system's roots cannot be loaded.
    SystemRoots,
}

impl TransportError {
    /// The stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::HeadersOverPlaintext => "DPONE_OTLP_HEADERS_OVER_PLAINTEXT",
            Self::Endpoint => "DPONE_OTLP_ENDPOINT_INVALID",
            Self::Ca(_) => "DPONE_OTLP_CA_INVALID",
            Self::SystemRoots => "DPONE_OTLP_SYSTEM_ROOTS_UNAVAILABLE",
        }
    }
}

impl std::fmt::Display for TransportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reason = match self {
            Self::HeadersOverPlaintext => {
                "OTLP headers are sent only over https:// or to a loopback http:// endpoint"
                    .to_owned()
            }
            Self::Endpoint => "the OTLP endpoint is not an http:// or https:// URL".to_owned(),
            Self::Ca(reason) => format!("the OTLP CA certificate file {reason}"),
            Self::SystemRoots => "the system's root certificates cannot be loaded".to_owned(),
        };
        write!(f, "{}: {reason}", self.code())
    }
}

impl std::error::Error for TransportError {}

/// Blocking HTTP/1.1 client of one signal's OTLP/HTTP exporter: plain for `http://`, rustls for
/// `https://`.
#[derive(Debug, Clone)]
pub struct OtlpHttp {
    /// The TLS configuration of an `https://` endpoint (none for `http://`).
    tls: Option<Arc<ClientConfig>>,
    /// Headers are configured: plaintext only to loopback addresses.
    headers: bool,
}

fn error(message: &'static str) -> HttpError {
    message.into()
}

/// The host of a URL without IPv6 brackets.
fn bare(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// `localhost` or a loopback address literal (no name is resolved).
fn is_loopback_host(host: &str) -> bool {
    let host = bare(host);
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl OtlpHttp {
    /// The client for one signal: `endpoint` is the URL the exporter sends to, `headers`
    /// whether headers are configured for it, `certificate` the pinned CA file of its
    /// `…_CERTIFICATE` variable (used for `https://` only). Reads the CA file (or the system's
    /// roots) once, here.
    pub fn for_signal(
        endpoint: &str,
        headers: bool,
        certificate: Option<&str>,
    ) -> Result<Self, TransportError> {
        let request = Request::builder()
            .uri(endpoint)
            .body(())
            .map_err(|_| TransportError::Endpoint)?;
        let uri = request.uri();
        let host = uri
            .host()
            .filter(|h| !h.is_empty())
            .ok_or(TransportError::Endpoint)?;
        match uri.scheme_str() {
            Some("http") if headers && !is_loopback_host(host) => {
                Err(TransportError::HeadersOverPlaintext)
            }
            Some("http") => Ok(Self { tls: None, headers }),
            Some("https") => Ok(Self {
                tls: Some(Arc::new(client_config(certificate)?)),
                headers,
            }),
            _ => Err(TransportError::Endpoint),
        }
    }

    /// Sends `request` and reads the whole response.
    pub fn post(&self, request: &Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let uri = request.uri();
        let tls = match uri.scheme_str() {
            Some("http") => None,
            Some("https") => Some(
                self.tls
                    .clone()
                    .ok_or_else(|| error("OTLP client configured for http:// only"))?,
            ),
            _ => return Err(error("the OTLP endpoint is not an http:// or https:// URL")),
        };
        let host = uri
            .host()
            .ok_or_else(|| error("OTLP endpoint without a host"))?;
        let plaintext_headers = tls.is_none() && self.headers;
        if plaintext_headers && !is_loopback_host(host) {
            return Err(error(
                "OTLP headers are sent only over https:// or to a loopback http:// endpoint",
            ));
        }
        let host = bare(host);
        let port = uri
            .port_u16()
            .unwrap_or(if tls.is_some() { 443 } else { 80 });
        let addrs: Vec<SocketAddr> = (host, port)
            .to_socket_addrs()
            .map_err(|_| error("OTLP endpoint host does not resolve"))?
            // `localhost` that resolves elsewhere does not receive headers in clear.
            .filter(|a| !plaintext_headers || a.ip().is_loopback())
            .collect();
        let stream = addrs
            .iter()
            .find_map(|addr| TcpStream::connect_timeout(addr, TIMEOUT).ok())
            .ok_or_else(|| error("cannot connect to the OTLP endpoint"))?;
        stream.set_read_timeout(Some(TIMEOUT))?;
        stream.set_write_timeout(Some(TIMEOUT))?;
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map_or(host, |a| a.as_str());
        let mut head = format!(
            "{} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
            request.method(),
            request.body().len()
        );
        for (name, value) in request.headers() {
            if let Ok(v) = value.to_str() {
                head.push_str(&format!("{name}: {v}\r\n"));
            }
        }
        head.push_str("\r\n");
        let raw = match tls {
            None => exchange(stream, head.as_bytes(), request.body()),
            Some(config) => {
                let name = ServerName::try_from(host.to_owned())
                    .map_err(|_| error("OTLP endpoint host is not a TLS server name"))?;
                let connection = ClientConnection::new(config, name)
                    .map_err(|_| error("OTLP TLS session cannot be set up"))?;
                exchange(
                    StreamOwned::new(connection, stream),
                    head.as_bytes(),
                    request.body(),
                )
            }
        }?;
        parse_response(&raw)
    }
}

/// Writes the request and reads the response up to [`MAX_RESPONSE`] bytes or the end of the
/// stream. I/O errors are reduced to their class (a TLS refusal, else the I/O kind), never
/// the peer's names.
fn exchange(mut stream: impl Read + Write, head: &[u8], body: &[u8]) -> Result<Vec<u8>, HttpError> {
    stream
        .write_all(head)
        .and_then(|()| stream.write_all(body))
        .and_then(|()| stream.flush())
        .map_err(io_error)?;
    let mut raw = Vec::new();
    match stream.take(MAX_RESPONSE).read_to_end(&mut raw) {
        Ok(_) => Ok(raw),
        // A peer that closes without TLS close_notify after its whole response.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => Ok(raw),
        Err(e) => Err(io_error(e)),
    }
}

fn io_error(e: std::io::Error) -> HttpError {
    let tls = e
        .get_ref()
        .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some());
    if tls {
        error("the OTLP endpoint's TLS certificate or handshake was refused")
    } else {
        format!("OTLP I/O error ({})", e.kind()).into()
    }
}

/// The TLS configuration: the pinned CA file's certificates, else the system's roots.
fn client_config(certificate: Option<&str>) -> Result<ClientConfig, TransportError> {
    let certs: Vec<CertificateDer<'static>> = match certificate {
        Some(path) => {
            let pem = dpone_boundary::read::read_regular(Path::new(path), MAX_CA_BYTES)
                .map_err(|e| TransportError::Ca(format!("cannot be read ({})", e.describe())))?;
            let certs = CertificateDer::pem_slice_iter(&pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|_| TransportError::Ca("is not PEM".into()))?;
            if certs.is_empty() {
                return Err(TransportError::Ca("is not PEM".into()));
            }
            certs
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            if found.certs.is_empty() {
                return Err(TransportError::SystemRoots);
            }
            found.certs
        }
    };
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(match certificate {
            Some(_) => TransportError::Ca("holds no usable CA certificate".into()),
            None => TransportError::SystemRoots,
        });
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| TransportError::Ca("cannot be used (no TLS version)".into()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Status and body (by `Content-Length`; empty otherwise) of an HTTP/1.x response.
fn parse_response(raw: &[u8]) -> Result<Response<Bytes>, HttpError> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| error("malformed OTLP response"))?;
    let head = std::str::from_utf8(&raw[..end]).map_err(|_| error("malformed OTLP response"))?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| error("malformed OTLP response status"))?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse::<usize>().ok());
    let rest = &raw[end + 4..];
    let body = match length {
        Some(n) if n <= rest.len() => Bytes::copy_from_slice(&rest[..n]),
        _ => Bytes::new(),
    };
    Response::builder()
        .status(status)
        .body(body)
        .map_err(|_| error("malformed OTLP response status"))
}

impl HttpClient for OtlpHttp {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.post(&request) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_response_is_its_status_and_its_content_length_body() {
        let r = parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nabXX").unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.body().as_ref(), b"ab");
        let r = parse_response(b"HTTP/1.1 503 Busy\r\n\r\n").unwrap();
        assert_eq!(r.status(), 503);
        assert!(r.body().is_empty());
        assert!(parse_response(b"garbage").is_err());
    }

    #[test]
    fn headers_go_in_clear_to_loopback_only() {
        for endpoint in [
            "http://127.0.0.1:4318",
            "http://127.3.2.1:4318/v1/traces",
            "http://[::1]:4318",
            "http://localhost:4318",
            "http://LOCALHOST",
        ] {
            OtlpHttp::for_signal(endpoint, true, None)
                .unwrap_or_else(|e| panic!("{endpoint}: {e}"));
        }
        for endpoint in [
            "http://192.0.2.7:4318",
            "http://secret-collector.example:4318/v1/traces",
            "http://[2001:db8::1]:4318",
            "http://localhost.example:4318",
            "http://127.0.0.1.example",
        ] {
            let e = OtlpHttp::for_signal(endpoint, true, None).unwrap_err();
            assert_eq!(e, TransportError::HeadersOverPlaintext, "{endpoint}");
            let text = e.to_string();
            assert!(
                text.starts_with("DPONE_OTLP_HEADERS_OVER_PLAINTEXT: "),
                "{text}"
            );
            assert!(
                !text.contains("secret") && !text.contains("192.0.2"),
                "{text}"
            );
            // Without headers the same endpoint is fine.
            OtlpHttp::for_signal(endpoint, false, None).expect("no headers");
        }
    }

    #[test]
    fn a_client_with_headers_never_dials_a_non_loopback_address_in_clear() {
        // Built for loopback, handed a request to another host: refused before resolving.
        let client = OtlpHttp::for_signal("http://127.0.0.1:9", true, None).expect("client");
        let request = Request::post("http://192.0.2.7:4318/v1/traces")
            .body(Bytes::new())
            .unwrap();
        let e = client.post(&request).unwrap_err().to_string();
        assert!(e.contains("loopback"), "{e}");
        assert!(!e.contains("192.0.2"), "{e}");
    }

    #[test]
    fn endpoints_that_are_not_http_urls_are_refused_without_naming_them() {
        for endpoint in [
            "ftp://secret-host.example/x",
            "secret-host.example:4318",
            "",
        ] {
            let e = OtlpHttp::for_signal(endpoint, false, None).unwrap_err();
            assert_eq!(e, TransportError::Endpoint, "{endpoint:?}");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
        let client = OtlpHttp::for_signal("http://127.0.0.1:9", false, None).expect("client");
        let request = Request::post("https://secret-host.example:4318/v1/traces")
            .body(Bytes::new())
            .unwrap();
        let e = client.post(&request).unwrap_err().to_string();
        assert!(e.contains("http:// only"), "{e}");
        assert!(!e.contains("secret-host"), "{e}");
    }

    #[test]
    fn the_pinned_ca_file_is_read_bounded_and_must_be_pem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = |name: &str| dir.path().join(name).to_str().expect("utf-8").to_owned();
        let https = |ca: &str| OtlpHttp::for_signal("https://127.0.0.1:4318", true, Some(ca));
        let reason = |ca: &str| match https(ca).unwrap_err() {
            TransportError::Ca(reason) => reason,
            other => panic!("{other}"),
        };

        let fifo = path("fifo.pem");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success());
        assert_eq!(reason(&fifo), "cannot be read (not a regular file)");
        assert_eq!(reason("/dev/zero"), "cannot be read (not a regular file)");
        assert!(reason(&path("missing.pem")).starts_with("cannot be read ("));

        let big = path("big.pem");
        std::fs::write(&big, vec![b'A'; usize::try_from(MAX_CA_BYTES).unwrap() + 1]).unwrap();
        assert_eq!(
            reason(&big),
            format!("cannot be read (larger than {MAX_CA_BYTES} bytes)")
        );

        let text = path("not-pem.pem");
        std::fs::write(&text, "just some text\n").unwrap();
        assert_eq!(reason(&text), "is not PEM");
        let key_only = path("key.pem");
        std::fs::write(
            &key_only,
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
        )
        .unwrap();
        assert_eq!(reason(&key_only), "is not PEM");
        let garbage = path("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        assert_eq!(reason(&garbage), "holds no usable CA certificate");

        for ca in [&fifo, &big, &text, &garbage] {
            let e = https(ca).unwrap_err().to_string();
            assert!(e.starts_with("DPONE_OTLP_CA_INVALID: "), "{e}");
            assert!(!e.contains(dir.path().to_str().unwrap()), "{e}");
        }
        // The CA file is for https:// only: an http:// endpoint does not read it.
        OtlpHttp::for_signal("http://127.0.0.1:4318", false, Some(&fifo)).expect("http");
    }
}
