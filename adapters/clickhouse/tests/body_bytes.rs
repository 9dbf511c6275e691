//! The HTTP body bytes a member load reports equal the body bytes the server received.
//!
//! Tier: in-process HTTP listener. The real `ClickHouseCluster` (the `clickhouse` crate over
//! hyper, as in production) loads into a plain HTTP/1.1 server in this test that answers the
//! two catalog reads a load makes (`system.tables`, `system.columns`, in `RowBinary`) and
//! counts the de-chunked request body of the `INSERT`. It proves the sender's count, not
//! anything about a ClickHouse engine.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use dpone_adapter_clickhouse::{BodyObservation, ClickHouseCluster, ClickHouseConfig, Credential};
use dpone_engine_clickhouse::contracts::{Uuid, member_id};
use dpone_engine_clickhouse::ports::{LoadTokens, MemberCatalog};

const UUID: &str = "0b0a0c0d-1111-4222-8333-444455556666";

/// What the listener saw: the body bytes of every INSERT.
#[derive(Default)]
struct Seen {
    insert_bodies: Vec<u64>,
}

fn string(out: &mut Vec<u8>, s: &str) {
    // RowBinary String: LEB128 length, then the bytes (all lengths here are < 128).
    out.push(u8::try_from(s.len()).expect("short"));
    out.extend_from_slice(s.as_bytes());
}

/// Reads one request: head lines and the body (Content-Length or chunked), returning the
/// request line, the body and the body's byte count.
fn read_request(r: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let request_line = line.trim_end().to_owned();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        match k.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = v.trim().parse().ok()?,
            "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
            _ => {}
        }
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            r.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim_end().split(';').next()?, 16).ok()?;
            if size == 0 {
                // Trailer section: lines until the empty one.
                loop {
                    line.clear();
                    r.read_line(&mut line).ok()?;
                    if line.trim_end().is_empty() {
                        break;
                    }
                }
                break;
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..]).ok()?;
            let mut crlf = [0u8; 2];
            r.read_exact(&mut crlf).ok()?;
        }
    } else {
        body.resize(length, 0);
        r.read_exact(&mut body).ok()?;
    }
    Some((request_line, body))
}

fn respond(s: &mut TcpStream, status: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = s.write_all(head.as_bytes());
    let _ = s.write_all(body);
    let _ = s.flush();
}

/// Serves until the test ends; `fail_insert` answers every INSERT (after reading its body)
/// with a server error.
fn serve(fail_insert: bool) -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let shared = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let shared = shared.clone();
            std::thread::spawn(move || {
                let mut w = stream.try_clone().expect("clone");
                let mut r = BufReader::new(stream);
                let Some((request_line, body)) = read_request(&mut r) else {
                    return;
                };
                let text = format!("{request_line}\n{}", String::from_utf8_lossy(&body));
                if request_line.contains("INSERT") {
                    shared
                        .lock()
                        .expect("seen")
                        .insert_bodies
                        .push(body.len() as u64);
                    if fail_insert {
                        respond(
                            &mut w,
                            "500 Internal Server Error",
                            b"Code: 1. DB::Exception: refused by the test listener.",
                        );
                    } else {
                        respond(&mut w, "200 OK", b"");
                    }
                } else if text.contains("system.tables") {
                    let mut out = Vec::new();
                    string(&mut out, UUID);
                    string(&mut out, "MergeTree");
                    respond(&mut w, "200 OK", &out);
                } else if text.contains("system.columns") {
                    let mut out = Vec::new();
                    for (name, ty) in [("id", "UInt64"), ("label", "String")] {
                        string(&mut out, name);
                        string(&mut out, ty);
                    }
                    respond(&mut w, "200 OK", &out);
                } else {
                    respond(&mut w, "400 Bad Request", b"Code: 62. unexpected");
                }
            });
        }
    });
    (url, seen)
}

fn cluster(url: &str) -> ClickHouseCluster {
    ClickHouseCluster::new(&ClickHouseConfig {
        coordinator_url: url.into(),
        member_urls: BTreeMap::from([((1, 1), url.into())]),
        credential: Credential {
            user: "default".into(),
            password: "unused".into(),
        },
        authority_database: "dpone".into(),
        authority_table: "authority".into(),
        cluster: "c".into(),
        ddl_task_timeout_secs: 10,
        request_timeout_secs: 30,
    })
    .expect("cluster")
}

/// `rows` RowBinary rows of (UInt64, String).
fn artifact(rows: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..rows {
        out.extend_from_slice(&i.to_le_bytes());
        string(&mut out, &format!("label-{i:08}-{}", "z".repeat(40)));
    }
    out
}

fn load(
    c: &ClickHouseCluster,
    bytes: &[u8],
) -> Result<(), dpone_engine_clickhouse::ports::PortError> {
    c.load(
        &member_id(1, 1),
        "db",
        "t__dpone_ext_0123456789abcdef",
        Uuid::parse(UUID).expect("uuid"),
        &mut &bytes[..],
        &LoadTokens {
            query_id: "q-1".into(),
            dedup_token: "d-1".into(),
        },
    )
}

#[test]
fn the_reported_body_bytes_equal_the_bytes_the_server_received() {
    let (url, seen) = serve(false);
    let c = cluster(&url);
    assert_eq!(c.body_observations(), vec![], "nothing sent yet");
    // More than two of the sender's 1 MiB chunks, and a small one.
    for rows in [40_000u64, 3] {
        let bytes = artifact(rows);
        load(&c, &bytes).expect("loaded");
        let received = *seen
            .lock()
            .expect("seen")
            .insert_bodies
            .last()
            .expect("an insert");
        let observed = *c.body_observations().last().expect("observed");
        assert_eq!(
            observed,
            BodyObservation {
                member: member_id(1, 1),
                body_bytes: received,
                complete: true,
            }
        );
        assert_eq!(
            received,
            bytes.len() as u64,
            "uncompressed: the artifact's bytes"
        );
    }
    assert!(artifact(40_000).len() > 2 << 20);
    assert_eq!(c.body_observations().len(), 2, "one observation per load");
}

#[test]
fn a_failed_insert_keeps_an_incomplete_observation() {
    let (url, seen) = serve(true);
    let c = cluster(&url);
    let bytes = artifact(10_000);
    let e = load(&c, &bytes).expect_err("the server refused the insert");
    assert_ne!(
        e.kind,
        dpone_engine_clickhouse::ports::PortErrorKind::Unavailable,
        "{e:?}"
    );
    let observed = c.body_observations();
    assert_eq!(observed.len(), 1);
    assert!(!observed[0].complete, "a failed send is incomplete");
    let received = seen.lock().expect("seen").insert_bodies.clone();
    assert_eq!(received, vec![bytes.len() as u64]);
    assert!(observed[0].body_bytes <= bytes.len() as u64);
}
