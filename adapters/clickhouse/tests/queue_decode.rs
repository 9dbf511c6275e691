//! Tier: unit over recorded real-engine output. `system.distributed_ddl_queue.status` is
//! `Nullable(Enum8)` on ClickHouse 26.9, so `toString(status)` is `Nullable(String)`; the adapter's
//! queue query makes it non-nullable. These tests replay `RowBinary` responses recorded from the
//! real engine (`fixtures/clickhouse/real-engine/`, captured from the tier of
//! `.ci/start-clickhouse` with the adapter's own statements) to the adapter's HTTP client through
//! a one-shot local responder, so they run everywhere, server or not.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread;

use dpone_adapter_clickhouse::{ClickHouseCluster, ClickHouseConfig, Credential, class};
use dpone_engine_clickhouse::contracts::member_id;
use dpone_engine_clickhouse::ports::{ClusterDdl, InventoryPort, QueueHostStatus};

fn recorded(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/clickhouse/real-engine")
        .join(name);
    std::fs::read(path).expect("recorded response")
}

/// Answers every request with the recorded `RowBinary` of the statement it carries: the
/// inventory for `system.clusters`, `queue` for the DDL queue.
fn responder(queue: Vec<u8>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let clusters = recorded("clusters.rowbinary");
    thread::spawn(move || {
        for stream in listener.incoming().take(8) {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                if line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; length];
            if reader.read_exact(&mut body).is_err() {
                continue;
            }
            let text = String::from_utf8_lossy(&body);
            let answer = if text.contains("system.clusters") {
                &clusters
            } else {
                &queue
            };
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
                answer.len()
            );
            let _ = stream.write_all(head.as_bytes());
            let _ = stream.write_all(answer);
        }
    });
    url
}

fn adapter(url: &str) -> ClickHouseCluster {
    ClickHouseCluster::new(&ClickHouseConfig {
        coordinator_url: url.into(),
        member_urls: [((1, 1), url.into()), ((1, 2), url.into())].into(),
        credential: Credential {
            user: "default".into(),
            password: String::new(),
        },
        authority_database: "dpone_test".into(),
        authority_table: "dpone_authority".into(),
        cluster: "analytics_cluster".into(),
        ddl_task_timeout_secs: 30,
        request_timeout_secs: 10,
    })
    .expect("adapter")
}

const CORRELATION: &str = "dpone-rename-b3226b6c66b0bfc6647953e5eceb73dc";

#[test]
fn the_real_engines_queue_rows_decode_and_map_to_members() {
    let url = responder(recorded("ddl-queue.rowbinary"));
    let c = adapter(&url);
    // The inventory maps each queue host to its member.
    let (rows, complete) = c.observe("analytics_cluster").expect("inventory decodes");
    assert!(complete);
    assert_eq!(rows.len(), 2);
    let entries = c
        .observe_queue("analytics_cluster", CORRELATION)
        .expect("the recorded queue rows decode");
    assert_eq!(entries.len(), 1);
    let e = &entries[0];
    assert_eq!(e.entry, "query-0000000001");
    assert_eq!(e.unmapped_hosts, 0);
    assert_eq!(e.members.len(), 2);
    for id in [member_id(1, 1), member_id(1, 2)] {
        assert!(
            e.members
                .iter()
                .any(|(m, s)| *m == id && *s == QueueHostStatus::Finished),
            "member {id:?} finished"
        );
    }
}

#[test]
fn the_nullable_status_text_of_the_old_query_is_a_decode_failure_never_a_status() {
    // What the real engine answers to `toString(status)` without `ifNull`: a NULL flag before
    // each status. The adapter's row type refuses it with a redacted class, so such an answer
    // can never be read as some other status.
    let url = responder(recorded("ddl-queue-nullable-status.rowbinary"));
    let c = adapter(&url);
    let e = c
        .observe_queue("analytics_cluster", CORRELATION)
        .expect_err("a nullable status does not decode as text");
    assert_eq!(e.class, class::DECODE);
}
