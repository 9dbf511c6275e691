//! Tier: real engine over TLS. Every member of the tier serves `https://` only, under the tier's
//! own CA (`DPONE_TEST_CLICKHOUSE_CA`), and every live suite pins it. Here the promise is
//! attacked: a member pinned to another CA, or reached as plain `http://`, answers nothing. And
//! the adapter reaches a real member through a TLS-terminating TCP proxy the test starts on
//! 127.0.0.1 (a rustls server presenting a `localhost` certificate signed by a CA the test makes
//! with the `openssl` command line, which dials the member over TLS pinned to the tier's CA), then
//! runs the cluster inventory and the member's identity probe over `https://` with the test CA
//! pinned. A pin of another CA, or no pin (the system's roots, which do not hold the test CA),
//! is refused during the handshake: the proxy never opens a connection to the member and
//! forwards zero bytes. The live tests run only when `DPONE_TEST_CLICKHOUSE_URL` is set at build
//! time (otherwise they are reported ignored with their SKIP reason, never passed); the tests of
//! unusable CA files need no server.

mod support;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dpone_adapter_clickhouse::{ClickHouseCluster, ClickHouseEndpoint, class};
use dpone_engine_clickhouse::contracts::member_id;
use dpone_engine_clickhouse::ports::{InventoryPort, MemberCatalog, PortError, PortErrorKind};
use rustls::pki_types::ServerName;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, ClientConnection, ServerConfig, ServerConnection, StreamOwned};
use support::{Tier, tls_client};

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

/// A CA and a `localhost` / `127.0.0.1` server certificate it signed.
struct Authority {
    ca: PathBuf,
    chain: Vec<CertificateDer<'static>>,
    key: PathBuf,
}

fn authority(dir: &Path, name: &str) -> Authority {
    let dir = dir.join(name);
    std::fs::create_dir_all(&dir).expect("dir");
    let curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let ca_subject = format!("/CN=dpone clickhouse test CA {name}");
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

/// What the proxy passed on: connections opened to the member, and bytes forwarded either way.
#[derive(Default)]
struct Forwarded {
    upstream_connections: AtomicU64,
    bytes: AtomicU64,
}

/// Where a proxy forwards each session.
#[derive(Clone)]
enum Upstream {
    /// Plain TCP to `host:port`.
    Plain(String),
    /// TLS to `host:port` (an IP address), verified by `client`.
    Tls(String, Arc<ClientConfig>),
}

impl Upstream {
    /// A member of the tier at its `https://` URL, verified against the tier's CA.
    fn member(tier: &Tier, url: &str) -> Self {
        let ca = tier
            .ca
            .as_deref()
            .expect("DPONE_TEST_CLICKHOUSE_CA names the tier's CA");
        Self::Tls(authority_of(url), tls_client(ca))
    }

    /// The connection to the upstream, its TLS handshake (if any) complete; `tick` is then
    /// its read timeout.
    fn connect(&self, tick: Duration) -> Option<Box<dyn Stream>> {
        match self {
            Self::Plain(addr) => {
                let tcp = TcpStream::connect(addr).ok()?;
                tcp.set_read_timeout(Some(tick)).ok()?;
                Some(Box::new(tcp))
            }
            Self::Tls(addr, client) => {
                let tcp = TcpStream::connect(addr).ok()?;
                tcp.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
                let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
                let name = ServerName::try_from(host.to_owned()).ok()?;
                let conn = ClientConnection::new(client.clone(), name).ok()?;
                let mut tls = StreamOwned::new(conn, tcp);
                while tls.conn.is_handshaking() {
                    tls.conn.complete_io(&mut tls.sock).ok()?;
                }
                tls.sock.set_read_timeout(Some(tick)).ok()?;
                Some(Box::new(tls))
            }
        }
    }
}

/// A byte stream: plain TCP or TLS over it.
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// A TLS-terminating TCP proxy on 127.0.0.1 presenting `authority`'s certificate and
/// forwarding each session, once its handshake has completed, to `upstream`.
struct TlsProxy {
    port: u16,
    forwarded: Arc<Forwarded>,
}

impl TlsProxy {
    fn start(authority: &Authority, upstream: Upstream) -> Self {
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
        let forwarded: Arc<Forwarded> = Arc::default();
        let counts = forwarded.clone();
        std::thread::spawn(move || {
            for tcp in listener.incoming().flatten() {
                let (config, counts, upstream) = (config.clone(), counts.clone(), upstream.clone());
                std::thread::spawn(move || session(tcp, &config, &counts, &upstream));
            }
        });
        Self { port, forwarded }
    }

    fn url(&self) -> String {
        format!("https://localhost:{}", self.port)
    }

    fn upstream_connections(&self) -> u64 {
        self.forwarded.upstream_connections.load(Ordering::SeqCst)
    }

    fn bytes(&self) -> u64 {
        self.forwarded.bytes.load(Ordering::SeqCst)
    }
}

fn idle(e: &std::io::Error) -> bool {
    matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// One client session: the handshake first (a refused one ends here, before the member is
/// dialled), then both directions shuttled by polling with short read timeouts.
fn session(tcp: TcpStream, config: &Arc<ServerConfig>, counts: &Forwarded, upstream: &Upstream) {
    let Ok(conn) = ServerConnection::new(config.clone()) else {
        return;
    };
    let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
    let mut tls = StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        if tls.conn.complete_io(&mut tls.sock).is_err() {
            return;
        }
    }
    let tick = Duration::from_millis(5);
    let Some(mut member) = upstream.connect(tick) else {
        return;
    };
    counts.upstream_connections.fetch_add(1, Ordering::SeqCst);
    if tls.sock.set_read_timeout(Some(tick)).is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut last = Instant::now();
    while last.elapsed() < Duration::from_secs(30) {
        match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if member
                    .write_all(&buf[..n])
                    .and_then(|()| member.flush())
                    .is_err()
                {
                    break;
                }
                counts.bytes.fetch_add(n as u64, Ordering::SeqCst);
                last = Instant::now();
            }
            Err(e) if idle(&e) => {}
            Err(_) => break,
        }
        match member.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if tls.write_all(&buf[..n]).and_then(|()| tls.flush()).is_err() {
                    break;
                }
                counts.bytes.fetch_add(n as u64, Ordering::SeqCst);
                last = Instant::now();
            }
            Err(e) if idle(&e) => {}
            Err(_) => break,
        }
    }
    tls.conn.send_close_notify();
    let _ = tls.flush();
    let _ = tls.sock.shutdown(Shutdown::Both);
}

/// `host:port` of a member URL of the tier.
fn authority_of(url: &str) -> String {
    url.strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .expect("the tier's members are https:// URLs")
        .trim_end_matches('/')
        .to_owned()
}

/// The adapter with the coordinator and member (1, 1) reached through `proxy` with `pin`, and
/// member (1, 2) directly.
fn cluster_through(
    tier: &Tier,
    proxy: &TlsProxy,
    pin: Option<&Path>,
) -> Result<ClickHouseCluster, PortError> {
    let endpoint = ClickHouseEndpoint {
        url: proxy.url(),
        sslrootcert: pin.map(|p| p.to_str().expect("utf-8 path").to_owned()),
    };
    let mut config = tier.config(30);
    config.coordinator_url = endpoint.clone();
    config.member_urls.insert((1, 1), endpoint);
    ClickHouseCluster::new(&config)
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn a_member_behind_tls_answers_with_the_pinned_ca() {
    let tier = Tier::from_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let good = authority(dir.path(), "good");
    let proxy = TlsProxy::start(&good, Upstream::member(&tier, tier.member(1)));
    let c = cluster_through(&tier, &proxy, Some(&good.ca)).expect("adapter builds");
    // The coordinator's inventory and the member's identity probe, both over TLS.
    let (rows, complete) = c.observe(&tier.cluster).expect("inventory over https");
    assert!(complete && !rows.is_empty(), "{rows:?}");
    let probe = c
        .probe(&member_id(1, 1), &tier.database, "absent_table")
        .expect("member (1, 1) over https proves its identity");
    assert_eq!(probe.database_engine, "Atomic");
    assert!(probe.keeper_map_available);
    assert!(proxy.upstream_connections() >= 1);
    assert!(proxy.bytes() > 0);
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn a_server_certified_by_another_ca_is_refused_before_anything_is_forwarded() {
    let tier = Tier::from_env();
    let dir = tempfile::tempdir().expect("tempdir");
    let good = authority(dir.path(), "good");
    let other = authority(dir.path(), "other");
    let proxy = TlsProxy::start(&good, Upstream::member(&tier, tier.member(1)));
    // Pinned to another CA, and not pinned at all (the system's roots do not hold the test CA).
    for pin in [Some(other.ca.as_path()), None] {
        let c = match cluster_through(&tier, &proxy, pin) {
            Ok(c) => c,
            // A system without usable roots refuses the set-up instead: nothing is sent either.
            Err(e) if pin.is_none() && e.class == class::TLS_ROOT_CERT => continue,
            Err(e) => panic!("adapter builds: {e:?}"),
        };
        let e = c.observe(&tier.cluster).expect_err("refused");
        assert_eq!(
            (e.kind, e.class),
            (PortErrorKind::Rejected, class::TLS_CERTIFICATE),
            "{pin:?}"
        );
        let e = c
            .probe(&member_id(1, 1), &tier.database, "absent_table")
            .expect_err("refused");
        assert_eq!(e.class, class::TLS_CERTIFICATE, "{pin:?}");
        // The member reached directly, pinned to the tier's CA, still answers.
        c.probe(&member_id(1, 2), &tier.database, "absent_table")
            .expect("member (1, 2) over https://");
    }
    assert_eq!(proxy.upstream_connections(), 0);
    assert_eq!(proxy.bytes(), 0);
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn the_tier_answers_over_tls_pinned_to_its_ca_and_nothing_else() {
    let tier = Tier::from_env();
    for url in tier.members.values() {
        assert!(
            url.starts_with("https://"),
            "every member of the tier is TLS"
        );
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let other = authority(dir.path(), "other");
    let id = member_id(1, 1);
    // Pinned to the tier's CA: the inventory and the identity probe answer.
    let c = tier.cluster();
    assert!(c.observe(&tier.cluster).expect("inventory").1);
    c.probe(&id, &tier.database, "absent_table")
        .expect("identity over https://");
    // Pinned to another CA: refused in the handshake, as a certificate that does not verify.
    let mut config = tier.config(30);
    for e in config
        .member_urls
        .values_mut()
        .chain([&mut config.coordinator_url])
    {
        e.sslrootcert = Some(other.ca.to_str().expect("utf-8 path").to_owned());
    }
    let c = ClickHouseCluster::new(&config).expect("adapter builds");
    let e = c.observe(&tier.cluster).expect_err("another CA");
    assert_eq!(
        (e.kind, e.class),
        (PortErrorKind::Rejected, class::TLS_CERTIFICATE)
    );
    let e = c
        .probe(&id, &tier.database, "absent_table")
        .expect_err("another CA");
    assert_eq!(e.class, class::TLS_CERTIFICATE);
    // The same member as plain http://: the member speaks TLS only, so no answer comes back.
    let mut config = tier.config(10);
    let plain = |e: &mut ClickHouseEndpoint| {
        e.url = e.url.replacen("https://", "http://", 1);
        e.sslrootcert = None;
    };
    config.member_urls.values_mut().for_each(plain);
    plain(&mut config.coordinator_url);
    let c = ClickHouseCluster::new(&config).expect("adapter builds");
    let e = c
        .probe(&id, &tier.database, "absent_table")
        .expect_err("no TLS, no answer");
    assert_ne!(e.kind, PortErrorKind::Rejected, "{e:?}");
    c.observe(&tier.cluster).expect_err("no TLS, no answer");
}

/// The adapter with one `https://` endpoint pinned to `ca` (nothing listens there: building
/// the adapter reads the CA and connects to nothing).
fn build_with_ca(ca: &Path) -> Result<ClickHouseCluster, PortError> {
    build_at("https://localhost:1", Some(ca))
}

/// The adapter with every endpoint at `url`, pinned to `ca`.
fn build_at(url: &str, ca: Option<&Path>) -> Result<ClickHouseCluster, PortError> {
    let endpoint = ClickHouseEndpoint {
        url: url.into(),
        sslrootcert: ca.map(|p| p.to_str().expect("utf-8 path").to_owned()),
    };
    ClickHouseCluster::new(&dpone_adapter_clickhouse::ClickHouseConfig {
        coordinator_url: endpoint.clone(),
        member_urls: [((1, 1), endpoint.clone()), ((1, 2), endpoint)].into(),
        credential: dpone_adapter_clickhouse::Credential {
            user: "u".into(),
            password: "p".into(),
        },
        authority_database: "dpone".into(),
        authority_table: "authority".into(),
        cluster: "analytics_cluster".into(),
        ddl_task_timeout_secs: 10,
        request_timeout_secs: 10,
    })
}

#[test]
fn an_unusable_pinned_ca_refuses_the_set_up_without_naming_the_file() {
    // Tier: unit (no server). A FIFO and a device are never read (no hang), a file above the
    // ceiling is not read whole, and PEM without a certificate adds no trust anchor.
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("ca-fifo.pem");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let large = dir.path().join("ca-large.pem");
    std::fs::write(&large, vec![b'A'; (1 << 20) + 1]).expect("write");
    let empty = dir.path().join("ca-empty.pem");
    std::fs::write(&empty, "not a certificate\n").expect("write");
    let key_only = dir.path().join("ca-key.pem");
    std::fs::write(
        &key_only,
        "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n",
    )
    .expect("write");
    for ca in [
        fifo.as_path(),
        Path::new("/dev/zero"),
        &large,
        &empty,
        &key_only,
        &dir.path().join("absent.pem"),
        dir.path(),
    ] {
        let e = build_with_ca(ca).err().expect("refused");
        assert_eq!(
            (e.kind, e.class),
            (PortErrorKind::Rejected, class::TLS_ROOT_CERT),
            "{ca:?}"
        );
        assert!(!format!("{e} {e:?}").contains("ca-"), "{e:?}");
    }
}

#[test]
fn a_usable_pinned_ca_builds_the_adapter_without_connecting() {
    // Tier: unit (no server).
    let dir = tempfile::tempdir().expect("tempdir");
    let good = authority(dir.path(), "good");
    assert!(build_with_ca(&good.ca).is_ok());
}

/// A plain HTTP responder on 127.0.0.1 answering every request with the inventory recorded
/// from the real engine (`fixtures/clickhouse/real-engine/clusters.rowbinary`).
fn recorded_inventory_responder() -> String {
    let clusters = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/clickhouse/real-engine/clusters.rowbinary"),
    )
    .expect("recorded inventory");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().take(16) {
            let Ok(mut stream) = stream else { return };
            let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
            let mut raw = Vec::new();
            let mut buf = [0u8; 8192];
            // The head, then as many body bytes as it announces.
            let complete = loop {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break false,
                    Ok(n) => raw.extend_from_slice(&buf[..n]),
                }
                if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while raw.len() < end + 4 + length {
                        match stream.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => raw.extend_from_slice(&buf[..n]),
                        }
                    }
                    break true;
                }
            };
            if !complete {
                continue;
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                clusters.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(&clusters);
        }
    });
    addr
}

#[test]
fn the_adapter_speaks_https_with_the_pinned_ca_and_never_to_another_ca() {
    // Tier: unit over recorded real-engine output (no server): the proxy of the live tests in
    // front of a responder replaying the real engine's inventory.
    let dir = tempfile::tempdir().expect("tempdir");
    let good = authority(dir.path(), "good");
    let other = authority(dir.path(), "other");
    let proxy = TlsProxy::start(&good, Upstream::Plain(recorded_inventory_responder()));
    let c = build_at(&proxy.url(), Some(&good.ca)).expect("adapter builds");
    let (rows, complete) = c
        .observe("analytics_cluster")
        .expect("inventory over https");
    assert!(complete, "{rows:?}");
    assert_eq!(rows.len(), 2);
    assert!(proxy.upstream_connections() >= 1 && proxy.bytes() > 0);
    // The certificate names 127.0.0.1 as well; plain http:// to a TLS port gets no inventory.
    let c = build_at(&format!("https://127.0.0.1:{}", proxy.port), Some(&good.ca))
        .expect("adapter builds");
    c.observe("analytics_cluster")
        .expect("inventory over https");
    let c = build_at(&format!("http://127.0.0.1:{}", proxy.port), None).expect("adapter builds");
    c.observe("analytics_cluster")
        .expect_err("no TLS, no answer");

    let refused = TlsProxy::start(&good, Upstream::Plain(recorded_inventory_responder()));
    for url in [refused.url(), format!("https://127.0.0.1:{}", refused.port)] {
        let c = build_at(&url, Some(&other.ca)).expect("adapter builds");
        let e = c.observe("analytics_cluster").expect_err("another CA");
        assert_eq!(
            (e.kind, e.class),
            (PortErrorKind::Rejected, class::TLS_CERTIFICATE)
        );
    }
    // No pin: the system's roots, which do not hold the test CA (or, on a system without
    // usable roots, a set-up that refuses to build).
    match build_at(&refused.url(), None) {
        Ok(c) => assert_eq!(
            c.observe("analytics_cluster")
                .expect_err("system roots")
                .class,
            class::TLS_CERTIFICATE
        ),
        Err(e) => assert_eq!(e.class, class::TLS_ROOT_CERT),
    }
    assert_eq!(refused.upstream_connections(), 0);
    assert_eq!(refused.bytes(), 0);
}
