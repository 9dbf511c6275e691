//! Cost of telemetry on the decision path: one real decision of the pinned guard component
//! (`policies/components/guard.wasm` at its pin in `policies/components.lock.json`, a fresh
//! sandbox per decision, the input `fixtures/samples/guard.json`), called directly ("bare") and
//! through the instrumented wrapper every command uses ([`telemetry::decide`]: the `decide`
//! span, its attributes and the decision metrics), inside a command span, as in the binary.
//!
//! Telemetry is process-global (one subscriber, one set of exporters, set at start-up exactly as
//! `dpone-host` does with [`telemetry::init`]), so one `cargo bench` run measures both
//! configurations in two child processes of this benchmark:
//!
//! - `off`: no OTel variable set (what every command does unless asked);
//! - `on`: `OTEL_EXPORTER_OTLP_ENDPOINT` names a local OTLP/HTTP sink this process runs (it
//!   answers `200` to every export), so spans and metrics are really built, batched and sent.
//!
//! Each child benchmarks `bare` and `instrumented` with criterion, then prints the p50 of a
//! plain timing loop that alternates the two (so drift of the shared machine hits both).
//!
//! `cargo bench -p dpone-host --bench decide_telemetry`

// The binary's own module (`src/telemetry.rs` and its `telemetry/http.rs`).
// Built as a test target: its unit tests are compiled but not run (harness = false).
#[allow(dead_code, unused_imports)]
#[path = "../src"]
mod src {
    pub mod telemetry;
}
use src::telemetry;

/// The exit statuses [`telemetry`] refers to.
mod exit {
    /// Not finished: retry the same invocation.
    pub const RETRY: u8 = 75;
}

use criterion::Criterion;
use dpone_policy_build::ComponentLock;
use dpone_policy_runtime::{Budget, PolicyKind, PolicyRuntime, SandboxConfig};
use std::hint::black_box;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

const MODE: &str = "DPONE_BENCH_TELEMETRY";

fn main() {
    match std::env::var(MODE) {
        Ok(mode) => child(&mode),
        Err(_) => parent(),
    }
}

/// Runs the two configurations, each in a child process of this benchmark.
fn parent() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a local port for the OTLP sink");
    let endpoint = format!(
        "http://{}",
        listener.local_addr().expect("the sink's address")
    );
    std::thread::spawn(move || sink(&listener));
    let exe = std::env::current_exe().expect("this benchmark's executable");
    let args: Vec<String> = std::env::args().skip(1).collect();
    for mode in ["off", "on"] {
        let mut command = Command::new(&exe);
        command.args(&args).env(MODE, mode);
        for (key, _) in std::env::vars() {
            if key.starts_with("OTEL_") {
                command.env_remove(key);
            }
        }
        if mode == "on" {
            command
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
                .env("OTEL_SERVICE_NAME", "dpone-bench");
        }
        let status = command.status().expect("the child benchmark runs");
        assert!(status.success(), "telemetry {mode}: {status}");
    }
}

/// A minimal OTLP/HTTP receiver: reads each request (head and `Content-Length` body) and
/// answers `200` with an empty body.
fn sink(listener: &TcpListener) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut request = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 {
                break;
            }
            request.extend_from_slice(&buf[..n]);
            if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    }
}

fn child(mode: &str) {
    let telemetry = telemetry::init();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let lock = ComponentLock::from_json(
        &std::fs::read_to_string(root.join("policies/components.lock.json")).expect("lock"),
    )
    .expect("lock parses");
    let pin = lock.components["guard"].sha256.parse().expect("pin");
    let component =
        std::fs::read(root.join("policies/components/guard.wasm")).expect("the pinned guard");
    let runtime = PolicyRuntime::new(SandboxConfig::default()).expect("runtime");
    let guard = runtime
        .load(PolicyKind::Guard, &component, pin, Budget::default())
        .expect("the guard component loads at its pin");
    let input: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("fixtures/samples/guard.json")).expect("the sample facts"),
    )
    .expect("the sample facts parse");

    let command = telemetry::command_span("policy bench");
    // The configuration under test is the one asked for: the command span is recorded only
    // when an exporter is configured.
    assert_eq!(command.is_disabled(), mode == "off", "telemetry {mode}");
    let _entered = command.enter();
    let bare = || guard.decide_json("decide", black_box(&input));
    let instrumented = || {
        telemetry::decide(PolicyKind::Guard, "decide", || {
            guard.decide_json("decide", black_box(&input))
        })
    };
    assert!(bare().is_ok() && instrumented().is_ok());

    let mut c = Criterion::default().configure_from_args();
    c.bench_function(&format!("decide_telemetry_{mode}/bare"), |b| {
        b.iter(bare);
    });
    c.bench_function(&format!("decide_telemetry_{mode}/instrumented"), |b| {
        b.iter(instrumented);
    });
    c.final_summary();

    let rounds = 3000;
    let (mut plain, mut wrapped) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for _ in 0..rounds {
        let t = Instant::now();
        assert!(bare().is_ok());
        plain.push(t.elapsed().as_secs_f64() * 1e6);
        let t = Instant::now();
        assert!(instrumented().is_ok());
        wrapped.push(t.elapsed().as_secs_f64() * 1e6);
    }
    plain.sort_by(f64::total_cmp);
    wrapped.sort_by(f64::total_cmp);
    let p50 = |s: &[f64]| s[s.len() / 2];
    eprintln!(
        "decide_telemetry ({mode}): p50 bare {:.1} us, instrumented {:.1} us ({:+.1} us) over {rounds} alternating rounds",
        p50(&plain),
        p50(&wrapped),
        p50(&wrapped) - p50(&plain)
    );
    drop(_entered);
    drop(command);
    telemetry.shutdown();
}
