//! Tier: OTLP over HTTPS with a pinned CA, and headers never in clear. `dpone-host policy eval`
//! (no database) exports to a local receiver: a rustls server on 127.0.0.1 whose certificates
//! the test makes with the `openssl` command line (a CA and a `localhost`/`127.0.0.1` server
//! certificate per authority), or the plain receiver of `support/otlp.rs`. Asserted as
//! received: export over https with the pinned CA (and the per-signal CA variables), the
//! headers arriving; a server certified by another CA (or by a CA the system does not trust)
//! receiving nothing; headers with a plain `http://` endpoint that is not loopback refused
//! before any connection; plain `http://` to loopback still working with headers.

#[path = "support/otlp.rs"]
mod otlp;

use otlp::{Received, Receiver};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bearer token of the tests' headers: it must arrive over TLS or loopback and never be on
/// stderr.
const TOKEN: &str = "otlp-secret-token-7f3a";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `dpone-host policy eval guard` with every inherited OTel variable removed, then `env` set.
fn eval(env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
    command.current_dir(root());
    for (key, _) in std::env::vars() {
        if key.starts_with("OTEL_") {
            command.env_remove(key);
        }
    }
    command.env_remove("DPONE_LOG");
    command.envs(env.iter().copied());
    command.env("OTEL_SERVICE_NAME", "dpone-otlp-tls-test");
    let out = command
        .args([
            "policy",
            "eval",
            "guard",
            "--input",
            "fixtures/samples/guard.json",
        ])
        .output()
        .expect("dpone-host runs");
    assert!(
        out.status.success(),
        "telemetry never changes the result: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn headers_env() -> String {
    format!("authorization=Bearer%20{TOKEN},x-tenant=dpone")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A CA and a server certificate it signed (`localhost`, `127.0.0.1`), made with `openssl`.
struct Authority {
    ca: PathBuf,
    chain: Vec<CertificateDer<'static>>,
    key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("the openssl command line makes the test certificates");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn authority(dir: &Path, name: &str) -> Authority {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let ca_subject = format!("/CN=dpone otlp test CA {name}");
    let mut ca_args = vec!["req", "-x509"];
    ca_args.extend(curve);
    ca_args.extend([
        "-nodes",
        "-days",
        "2",
        "-subj",
        &ca_subject,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
    ]);
    openssl(&dir, &ca_args);
    let mut csr_args = vec!["req", "-new"];
    csr_args.extend(curve);
    csr_args.extend([
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    openssl(&dir, &csr_args);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext");
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
    let chain = CertificateDer::pem_file_iter(dir.join("server.pem"))
        .expect("server.pem")
        .collect::<Result<Vec<_>, _>>()
        .expect("PEM");
    Authority {
        ca: dir.join("ca.pem"),
        chain,
        key: dir.join("server.key"),
    }
}

/// The heads of the requests received, in order.
type Heads = Arc<Mutex<Vec<String>>>;

fn read_request(stream: &mut impl Read) -> Option<(String, String, Vec<u8>)> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let (head_end, length) = loop {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while raw.len() < head_end + length {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        raw.extend_from_slice(&buf[..n]);
    }
    let head = String::from_utf8_lossy(&raw[..head_end - 4]).into_owned();
    let path = head.split(' ').nth(1)?.to_owned();
    Some((path, head, raw[head_end..head_end + length].to_vec()))
}

/// An OTLP/HTTPS receiver on 127.0.0.1 presenting `authority`'s server certificate. Records
/// only what arrives inside an established TLS session; a refused handshake records nothing.
struct TlsReceiver {
    port: u16,
    otlp: Receiver,
    heads: Heads,
}

impl TlsReceiver {
    fn start(authority: &Authority) -> Self {
        let key = PrivateKeyDer::from_pem_file(&authority.key).expect("server key");
        let config = Arc::new(
            ServerConfig::builder_with_provider(Arc::new(
                rustls::crypto::aws_lc_rs::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(authority.chain.clone(), key)
            .expect("server certificate"),
        );
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let received: Received = Arc::default();
        let heads: Heads = Arc::default();
        let (keep, keep_heads) = (received.clone(), heads.clone());
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
                let Ok(session) = ServerConnection::new(config.clone()) else {
                    continue;
                };
                let mut stream = StreamOwned::new(session, tcp);
                if let Some((path, head, body)) = read_request(&mut stream) {
                    keep.lock().expect("lock").push((path, body));
                    keep_heads.lock().expect("lock").push(head);
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    stream.conn.send_close_notify();
                    let _ = stream.flush();
                }
            }
        });
        let otlp = Receiver {
            endpoint: format!("https://127.0.0.1:{port}"),
            received,
        };
        Self { port, otlp, heads }
    }

    fn endpoint(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    fn paths(&self) -> Vec<String> {
        self.otlp
            .received
            .lock()
            .expect("lock")
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn https_with_the_pinned_ca_exports_and_the_headers_arrive() {
    let dir = tempfile::tempdir().expect("tempdir");
    let a = authority(dir.path(), "a");
    let receiver = TlsReceiver::start(&a);
    let headers = headers_env();
    let out = eval(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", path(&a.ca)),
        ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
    ]);
    let err = stderr(&out);
    assert!(!err.contains("not exported"), "{err}");
    assert!(!err.contains(TOKEN), "{err}");

    let (spans, _) = receiver.otlp.spans();
    assert!(
        spans.iter().any(|s| s.name == "policy eval"),
        "{:?}",
        receiver.paths()
    );
    assert!(spans.iter().any(|s| s.name == "decide"));
    assert!(receiver.otlp.metrics().contains_key("dpone.decisions"));
    let heads = receiver.heads.lock().expect("lock").clone();
    assert!(!heads.is_empty());
    for head in &heads {
        assert!(
            head.contains(&format!("authorization: Bearer {TOKEN}")),
            "{head}"
        );
        assert!(head.contains("x-tenant: dpone"), "{head}");
    }
}

#[test]
fn per_signal_ca_variables_override_the_base_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (authority(dir.path(), "a"), authority(dir.path(), "b"));
    let receiver = TlsReceiver::start(&a);
    eval(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
        // The base CA is the wrong one; only traces pin the server's CA.
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", path(&b.ca)),
        ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", path(&a.ca)),
    ]);
    let paths = receiver.paths();
    assert!(paths.iter().any(|p| p == "/v1/traces"), "{paths:?}");
    assert!(
        !paths.iter().any(|p| p == "/v1/metrics"),
        "metrics pinned to the other CA reached the server: {paths:?}"
    );

    let receiver = TlsReceiver::start(&a);
    eval(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_METRICS_CERTIFICATE", path(&a.ca)),
        ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", path(&b.ca)),
    ]);
    let paths = receiver.paths();
    assert!(paths.iter().any(|p| p == "/v1/metrics"), "{paths:?}");
    assert!(!paths.iter().any(|p| p == "/v1/traces"), "{paths:?}");
}

#[test]
fn a_server_certified_by_another_ca_receives_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (a, b) = (authority(dir.path(), "a"), authority(dir.path(), "b"));
    let headers = headers_env();
    // Pinned to A, the server presents B's certificate.
    let receiver = TlsReceiver::start(&b);
    let out = eval(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", path(&a.ca)),
        ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
    ]);
    assert!(receiver.paths().is_empty(), "{:?}", receiver.paths());
    assert!(!stderr(&out).contains(TOKEN));

    // No CA pinned: the system's roots do not trust the test CA (or cannot be loaded here,
    // which exports nothing either).
    let receiver = TlsReceiver::start(&a);
    let out = eval(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
    ]);
    assert!(receiver.paths().is_empty(), "{:?}", receiver.paths());
    let err = stderr(&out);
    assert!(!err.contains(TOKEN), "{err}");
    assert!(
        err.is_empty() || err.contains("DPONE_OTLP_SYSTEM_ROOTS_UNAVAILABLE"),
        "{err}"
    );

    // A pinned CA file that is not one: nothing exported, one line per signal naming the code,
    // never the path.
    let receiver = TlsReceiver::start(&a);
    let out = eval(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", "/dev/zero"),
    ]);
    assert!(receiver.paths().is_empty());
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(
        lines[0].contains("traces not exported: DPONE_OTLP_CA_INVALID"),
        "{err}"
    );
    assert!(
        lines[1].contains("metrics not exported: DPONE_OTLP_CA_INVALID"),
        "{err}"
    );
    assert!(
        !err.contains("/dev/zero") && !err.contains("127.0.0.1"),
        "{err}"
    );
}

/// A local address that is not loopback, if the machine has one (the source address of a route
/// to TEST-NET-1; a UDP `connect` sends nothing).
fn local_non_loopback_ip() -> Option<IpAddr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn headers_are_never_sent_in_clear_to_a_non_loopback_endpoint() {
    let headers = headers_env();
    let refused = |endpoint: &str| {
        let out = eval(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
        ]);
        let err = stderr(&out);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{err}");
        for (line, signal) in lines.iter().zip(["traces", "metrics"]) {
            assert!(
                line.contains(&format!(
                    "{signal} not exported: DPONE_OTLP_HEADERS_OVER_PLAINTEXT"
                )),
                "{err}"
            );
        }
        let host = endpoint
            .trim_start_matches("http://")
            .rsplit_once(':')
            .map_or(endpoint, |(h, _)| h);
        assert!(!err.contains(host) && !err.contains(TOKEN), "{err}");
    };

    // TEST-NET-1: nothing could listen there. The refusal is the transport's, when the
    // exporters are set up: no exporter exists for either signal, so nothing is ever sent.
    refused("http://192.0.2.10:4318");
    // A per-signal endpoint and per-signal headers are held to the same rule.
    let out = eval(&[
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "http://192.0.2.10:4318/v1/traces",
        ),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &headers),
        ("OTEL_METRICS_EXPORTER", "none"),
    ]);
    assert!(
        stderr(&out).contains("traces not exported: DPONE_OTLP_HEADERS_OVER_PLAINTEXT"),
        "{}",
        stderr(&out)
    );

    // A listener on a local address that is not loopback receives nothing with headers, and
    // does receive the export without them (so it was reachable).
    let Some(ip) = local_non_loopback_ip() else {
        eprintln!("no non-loopback local address here: only the TEST-NET endpoint was checked");
        return;
    };
    let listener = TcpListener::bind((ip, 0)).expect("bind a non-loopback local address");
    let receiver = Receiver::on(listener);
    refused(&receiver.endpoint);
    assert!(
        receiver.received.lock().expect("lock").is_empty(),
        "something reached the non-loopback listener"
    );
    let out = eval(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)]);
    assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    assert!(!receiver.bodies("/v1/traces").is_empty(), "control export");
}

#[test]
fn plain_http_to_loopback_still_exports_with_headers() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let received: Received = Arc::default();
    let heads: Heads = Arc::default();
    let (keep, keep_heads) = (received.clone(), heads.clone());
    std::thread::spawn(move || {
        for mut tcp in listener.incoming().flatten() {
            let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
            if let Some((path, head, body)) = read_request(&mut tcp) {
                keep.lock().expect("lock").push((path, body));
                keep_heads.lock().expect("lock").push(head);
                let _ = tcp.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    });
    let receiver = Receiver {
        endpoint: format!("http://127.0.0.1:{port}"),
        received,
    };
    let headers = headers_env();
    for endpoint in [
        receiver.endpoint.clone(),
        format!("http://localhost:{port}"),
    ] {
        let out = eval(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_HEADERS", &headers),
        ]);
        assert!(stderr(&out).is_empty(), "{}", stderr(&out));
    }
    let (spans, _) = receiver.spans();
    assert_eq!(
        spans.iter().filter(|s| s.name == "policy eval").count(),
        2,
        "one export per run, by address and by name"
    );
    let heads = heads.lock().expect("lock").clone();
    assert!(
        heads
            .iter()
            .all(|h| h.contains(&format!("authorization: Bearer {TOKEN}")))
    );
}
