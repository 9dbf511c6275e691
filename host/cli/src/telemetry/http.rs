//! The OTLP exporters' transport: one blocking HTTP/1.1 POST per export over a plain `http://`
//! TCP connection (`Connection: close`), bounded by connect, read and write timeouts and a
//! response ceiling. Plain HTTP only: the host carries no TLS stack for telemetry; an
//! `https://` endpoint is an error (nothing exported). Errors name their kind, never the
//! endpoint.

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use std::future::Future;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::time::Duration;

/// Connect, read and write timeout of one export.
const TIMEOUT: Duration = Duration::from_secs(5);
/// The largest response read (the OTLP response is a small protobuf message).
const MAX_RESPONSE: u64 = 64 * 1024;

/// Blocking plain-HTTP client for the OTLP/HTTP exporters.
#[derive(Debug, Clone, Copy)]
pub struct PlainHttp;

fn error(message: &'static str) -> HttpError {
    message.into()
}

/// Sends `request` and reads the whole response.
pub fn post(request: &Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
    let uri = request.uri();
    if uri.scheme_str() != Some("http") {
        return Err(error(
            "only plain http:// OTLP endpoints are supported (no TLS for telemetry)",
        ));
    }
    let host = uri
        .host()
        .ok_or_else(|| error("OTLP endpoint without a host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|_| error("OTLP endpoint host does not resolve"))?;
    let mut stream = None;
    for addr in addrs {
        if let Ok(s) = TcpStream::connect_timeout(&addr, TIMEOUT) {
            stream = Some(s);
            break;
        }
    }
    let mut stream = stream.ok_or_else(|| error("cannot connect to the OTLP endpoint"))?;
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
    stream.write_all(head.as_bytes())?;
    stream.write_all(request.body())?;
    stream.flush()?;
    let mut raw = Vec::new();
    stream.take(MAX_RESPONSE).read_to_end(&mut raw)?;
    parse_response(&raw)
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

impl HttpClient for PlainHttp {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { post(&request) })
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
    fn https_endpoints_are_refused_without_naming_them() {
        let request = Request::post("https://secret-host.example:4318/v1/traces")
            .body(Bytes::new())
            .unwrap();
        let e = post(&request).unwrap_err().to_string();
        assert!(e.contains("only plain http://"), "{e}");
        assert!(!e.contains("secret-host"), "{e}");
    }
}
