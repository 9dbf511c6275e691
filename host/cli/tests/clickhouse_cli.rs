//! Tier: CLI end-to-end. `check`, `plan`, `run`, `status` and `resolve` of the ClickHouse
//! publication route, run as the `dpone-host` binary from the workspace root (where `cargo xtask
//! policies` leaves the components): JSON on stdout, one JSON error line on stderr, the documented
//! exit statuses, and no endpoint, credential or local path in any output.
//!
//! Without a ClickHouse cluster the route is exercised up to the adapter's connection failure
//! (and on the in-process synthetic cluster). The `live_*` tests run the whole route on the
//! real-engine tier (`.ci/start-clickhouse`: two real ClickHouse members) from a real
//! PostgreSQL source; they run only when `DPONE_TEST_CLICKHOUSE_URL` was set at build time and are
//! reported ignored with their SKIP reason otherwise, never passed.
//! The PostgreSQL-backed tests are ignored without a configured PostgreSQL server
//! (`cfg(dpone_live_pg)`) and fail when a configured one cannot be used.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "support/otlp.rs"]
mod otlp;

use dpone_adapter_clickhouse::StoreArtifactSource;
use dpone_adapter_postgres_rowbinary::{PgConfig, PgRowBinarySource};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::canonical::{
    RowBinaryWriter, Value as CanonicalValue, column_types, content_digest,
};
use dpone_engine_clickhouse::contracts::manifest::Manifest;
use dpone_engine_clickhouse::contracts::{
    AdmissionEvidence, Schema, candidate_name, operation_id, schema_digest,
};
use dpone_engine_clickhouse::ports::{AdmissionGate, Gated, NoProgress, PortError};
use dpone_engine_clickhouse::synthetic::{SyntheticCluster, SyntheticEnv};
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, OperationRequest, Ports, RunOutcome,
};
use dpone_policy_model::admission::{RuntimeDecision, RuntimeFacts, StaticDecision, StaticFacts};
use dpone_policy_runtime::{
    Budget, LoadedPolicy, PolicyKind, PolicyRuntime, SandboxConfig, Sha256Digest,
};
use serde_json::{Value, json};

const MANIFEST: &str = "fixtures/clickhouse/manifest.yaml";
const BLOCKED: &str = "fixtures/clickhouse/manifest-blocked.yaml";
const MALFORMED: &str = "fixtures/clickhouse/manifest-malformed.yaml";
const SECRET: &str = "s3cr3t-never-printed";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).expect("fixture")
}

/// The binary with a clean environment for the variables the route reads.
fn dpone(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_dpone-host"));
    c.current_dir(root()).args(args);
    for v in [
        "DPONE_TRUST_POLICY",
        "DPONE_POLICY_BUNDLE",
        "DPONE_CONNECTIONS",
        "DPONE_INVOCATION_ID",
        "DPONE_CLICKHOUSE_PASSWORD",
        "DPONE_PG_SOURCE_PASSWORD",
    ] {
        c.env_remove(v);
    }
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("dpone-host runs")
}

fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The code of the one JSON line on stderr (piped stderr carries nothing else).
fn stderr_code(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON line on stderr: {text}");
    let report: Value = serde_json::from_str(lines[0])
        .unwrap_or_else(|e| panic!("stderr is a JSON report ({e}): {text}"));
    report["error"].as_str().unwrap_or_default().to_owned()
}

fn codes(json: &Value) -> Vec<String> {
    json["blockers"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|b| b["code"].as_str().unwrap_or_default().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A registry whose ClickHouse endpoints refuse connections (nothing listens on ports 1 and 2).
fn unreachable_registry(dir: &Path) -> PathBuf {
    let text = fixture("fixtures/clickhouse/registry.yaml")
        .replace("http://ch-1.analytics.internal:8123", "http://127.0.0.1:1")
        .replace("http://ch-2.analytics.internal:8123", "http://127.0.0.1:2");
    let path = dir.join("registry.yaml");
    std::fs::write(&path, text).expect("write registry");
    path
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn check_admits_the_sample_and_prints_the_spec_decision_in_order() {
    let out = dpone(&["check", "--manifest", MANIFEST], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stderr.is_empty());
    let j = stdout_json(&out);
    assert_eq!(j["route"], "clickhouse_cluster_publication");
    assert_eq!(j["admitted"], true);
    assert_eq!(
        j["replication"],
        json!({
            "requested": "cluster",
            "selected": "cluster_external",
            "replication_mode": "external",
            "runtime_admission_required": true,
            "no_fallback": true
        })
    );
    // The decision prints with the spec's field order.
    let text = String::from_utf8_lossy(&out.stdout);
    let order: Vec<usize> = [
        "\"requested\"",
        "\"selected\"",
        "\"replication_mode\"",
        "\"runtime_admission_required\"",
        "\"no_fallback\"",
    ]
    .iter()
    .map(|k| text.find(k).expect("field present"))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    assert_eq!(j["blockers"], json!([]));
    assert_eq!(j["evidence"]["kind"], "admission");
    assert_eq!(j["evidence"]["function"], "admit-static");
    assert_eq!(j["evidence"]["output"]["admitted"], j["replication"]);
    let lock: Value =
        serde_json::from_str(&fixture("policies/components.lock.json")).expect("lock");
    assert_eq!(
        j["evidence"]["component_sha256"],
        lock["components"]["admission"]["sha256"]
    );
    assert_eq!(j["requires"]["keeper_authority"], true);
    assert!(j["connections"].is_null());
    assert!(j.get("plan").is_none());
}

#[test]
fn a_blocked_manifest_exits_1_with_the_first_blocker_and_lists_all() {
    let out = dpone(&["check", "--manifest", BLOCKED], &[]);
    assert_eq!(out.status.code(), Some(1));
    let j = stdout_json(&out);
    assert_eq!(j["admitted"], false);
    assert!(j["replication"].is_null());
    assert_eq!(
        codes(&j),
        [
            "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH",
            "DPONE_CLICKHOUSE_CLUSTER_ACCESS_TABLE_FORBIDDEN",
            "DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH",
        ]
    );
    assert!(
        j["blockers"]
            .as_array()
            .is_some_and(|b| b.iter().all(|x| x["by"] == "admission_policy"))
    );
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH"
    );
}

#[test]
fn a_manifest_without_a_mode_is_admitted_in_internal_mode() {
    // The spec's default: no `replication_mode` means internal, with a ReplicatedMergeTree
    // engine; `check` admits it statically and names the mode, without fallback.
    let dir = tempfile::tempdir().expect("tempdir");
    let text = fixture(MANIFEST)
        .replace("        replication_mode: external\n", "")
        .replace("engine: MergeTree", "engine: ReplicatedMergeTree");
    let m = write(dir.path(), "internal.yaml", &text);
    let out = dpone(&["check", "--manifest", s(&m)], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = stdout_json(&out);
    assert_eq!(j["admitted"], true);
    assert_eq!(j["replication"]["selected"], "cluster_internal");
    assert_eq!(j["replication"]["replication_mode"], "internal");
    assert_eq!(j["replication"]["no_fallback"], true);
    assert!(codes(&j).is_empty());
    // The plain MergeTree under internal mode is the policy's engine/mode mismatch.
    let text = fixture(MANIFEST).replace("        replication_mode: external\n", "");
    let m = write(dir.path(), "mismatch.yaml", &text);
    let out = dpone(&["check", "--manifest", s(&m)], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        codes(&stdout_json(&out)),
        ["DPONE_CLICKHOUSE_CLUSTER_ENGINE_MODE_MISMATCH"]
    );
}

#[test]
fn host_rules_block_what_the_static_facts_cannot_carry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let text = fixture(MANIFEST)
        .replace("type: UInt64", "type: Array(UInt64)")
        .replace("order_by: [id]", "order_by: [note]");
    let m = write(dir.path(), "types.yaml", &text);
    let out = dpone(&["check", "--manifest", s(&m)], &[]);
    assert_eq!(out.status.code(), Some(1));
    let j = stdout_json(&out);
    assert_eq!(j["replication"]["selected"], "cluster_external");
    assert_eq!(
        codes(&j),
        [
            "DPONE_CLICKHOUSE_CLUSTER_UNSUPPORTED_COLUMN_TYPE",
            "DPONE_CLICKHOUSE_ROUTE_ORDER_BY_NULLABLE",
        ]
    );
}

#[test]
fn engines_whose_content_the_digest_cannot_prove_are_refused_at_check_and_plan() {
    // The policy admits every direct `*MergeTree` for external mode; the host's rule admits
    // only the plain MergeTree, whose rows stay exactly as inserted.
    let dir = tempfile::tempdir().expect("tempdir");
    for (command, engine) in [
        ("check", "ReplacingMergeTree"),
        ("check", "SummingMergeTree"),
        ("plan", "AggregatingMergeTree"),
        ("check", "CollapsingMergeTree"),
        ("plan", "VersionedCollapsingMergeTree"),
    ] {
        let text = fixture(MANIFEST).replace("engine: MergeTree", &format!("engine: {engine}"));
        let m = write(dir.path(), "engine.yaml", &text);
        {
            let out = dpone(&[command, "--manifest", s(&m)], &[]);
            assert_eq!(out.status.code(), Some(1), "{command} {engine}");
            let j = stdout_json(&out);
            assert_eq!(j["replication"]["selected"], "cluster_external");
            assert_eq!(
                codes(&j),
                ["DPONE_CLICKHOUSE_CLUSTER_ENGINE_CONTENT_UNVERIFIABLE"],
                "{command} {engine}"
            );
            assert_eq!(j["blockers"][0]["by"], "host");
            assert_eq!(
                stderr_code(&out),
                "DPONE_CLICKHOUSE_CLUSTER_ENGINE_CONTENT_UNVERIFIABLE"
            );
        }
    }
}

/// A coordinator endpoint that answers every query with the two-member `system.clusters`
/// inventory as `RowBinary` (the only statement a run sends to it before probing members).
fn inventory_only_coordinator() -> std::net::SocketAddr {
    use std::io::{Read, Write};
    fn row(out: &mut Vec<u8>, replica: u32, host: &str) {
        out.extend_from_slice(&1u32.to_le_bytes());
        out.extend_from_slice(&replica.to_le_bytes());
        out.push(host.len() as u8);
        out.extend_from_slice(host.as_bytes());
        out.extend_from_slice(&9000u16.to_le_bytes());
        out.push(0);
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            // Read the request head, then its body (Content-Length or chunked).
            let head_end = loop {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break None,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(i + 4);
                }
            };
            let Some(head_end) = head_end else { continue };
            let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok());
            let done = |buf: &[u8]| match length {
                Some(n) => buf.len() >= head_end + n,
                None if head.contains("transfer-encoding: chunked") => buf.ends_with(b"0\r\n\r\n"),
                None => true,
            };
            while !done(&buf) {
                match stream.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let mut body = Vec::new();
            row(&mut body, 1, "ch-1");
            row(&mut body, 2, "ch-2");
            let _ = stream.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .as_bytes(),
            );
            let _ = stream.write_all(&body);
        }
    });
    addr
}

#[test]
fn a_member_that_does_not_answer_is_an_outage_exit_75_resumable_never_a_manifest_blocker() {
    // The coordinator answers (inventory), both members refuse connections: runtime admission
    // must not turn the silence into DATABASE_NOT_ATOMIC / KEEPER_MAP_UNAVAILABLE blockers.
    let dir = tempfile::tempdir().expect("tempdir");
    let coordinator = inventory_only_coordinator();
    let text = fixture("fixtures/clickhouse/registry.yaml")
        .replace(
            "coordinator_url: http://ch-1.analytics.internal:8123",
            &format!("coordinator_url: http://{coordinator}"),
        )
        .replace("http://ch-1.analytics.internal:8123", "http://127.0.0.1:1")
        .replace("http://ch-2.analytics.internal:8123", "http://127.0.0.1:2");
    let registry = write(dir.path(), "registry.yaml", &text);
    let artifacts = dir.path().join("artifacts");
    for attempt in 0..2 {
        let out = dpone(
            &[
                "run",
                "--manifest",
                MANIFEST,
                "--connections",
                s(&registry),
                "--invocation",
                "nightly-2026-09-18",
                "--artifact-dir",
                s(&artifacts),
            ],
            &[
                ("DPONE_CLICKHOUSE_PASSWORD", SECRET),
                ("DPONE_PG_SOURCE_PASSWORD", SECRET),
            ],
        );
        assert_eq!(
            out.status.code(),
            Some(75),
            "attempt {attempt}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            stderr_code(&out),
            "DPONE_CLICKHOUSE_CLUSTER_MEMBER_UNAVAILABLE"
        );
        let j = stdout_json(&out);
        assert_eq!(j["outcome"], "failed");
        assert_eq!(j["error"], "DPONE_CLICKHOUSE_CLUSTER_MEMBER_UNAVAILABLE");
        assert_eq!(j["cause"], "DPONE_CLICKHOUSE_NETWORK");
        assert_eq!(j["retryable"], true);
        assert_eq!(j["recovery"], "resume_same_operation");
        assert_eq!(j["blockers"], json!([]));
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for leak in [
            SECRET,
            "127.0.0.1",
            "ch-1",
            dir.path().to_str().unwrap_or("/tmp"),
        ] {
            assert!(!all.contains(leak), "leaks {leak}: {all}");
        }
    }
    // Admission stops before any source I/O: the store holds no file at all.
    fn files(dir: &Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |d| {
            d.flatten()
                .map(|e| {
                    let p = e.path();
                    if p.is_dir() { files(&p) } else { 1 }
                })
                .sum()
        })
    }
    assert_eq!(files(&artifacts), 0, "no artifact was sealed");
}

#[test]
fn malformed_manifests_exit_3_with_stable_codes_and_no_stdout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let unknown = write(
        dir.path(),
        "unknown.yaml",
        &fixture(MANIFEST).replace("version: 1\n", "version: 1\nretries: 3\n"),
    );
    let alias = write(
        dir.path(),
        "alias.yaml",
        &format!("{}extra: &a 1\nmore: *a\n", fixture(MANIFEST)),
    );
    for (manifest, code) in [
        (MALFORMED, "DPONE_CLICKHOUSE_MANIFEST_YAML_DUPLICATE_KEY"),
        (s(&unknown), "DPONE_CLICKHOUSE_MANIFEST_UNKNOWN_FIELD"),
        (s(&alias), "DPONE_CLICKHOUSE_MANIFEST_YAML_ALIAS"),
    ] {
        for command in ["check", "plan"] {
            let out = dpone(&[command, "--manifest", manifest], &[]);
            assert_eq!(out.status.code(), Some(3), "{command} {manifest}");
            assert!(out.stdout.is_empty());
            assert_eq!(stderr_code(&out), code);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                !err.contains(dir.path().to_str().unwrap_or("/tmp")),
                "{err}"
            );
        }
    }
}

#[test]
fn plan_prints_the_deterministic_identities_without_touching_a_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = unreachable_registry(dir.path());
    let env = [
        ("DPONE_CLICKHOUSE_PASSWORD", SECRET),
        ("DPONE_PG_SOURCE_PASSWORD", SECRET),
    ];
    let args = [
        "plan",
        "--manifest",
        MANIFEST,
        "--connections",
        s(&registry),
        "--invocation",
        "nightly-2026-09-18",
    ];
    let out = dpone(&args, &env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = stdout_json(&out);
    let m = Manifest::parse(&fixture(MANIFEST)).expect("fixture parses");
    let op = operation_id("nightly-2026-09-18", &m.target_key(), &m.plan_digest());
    let plan = &j["plan"];
    assert_eq!(plan["target_key"], m.target_key().to_string());
    assert_eq!(plan["plan_digest"], m.plan_digest().to_string());
    assert_eq!(plan["content_proof"], "rowset", "the default proof");
    assert_eq!(
        plan["schema_digest"],
        schema_digest(&m.schema()).to_string()
    );
    assert_eq!(plan["operation_id"], op.to_string());
    assert_eq!(plan["candidate_name"], candidate_name("target_table", &op));
    assert_eq!(
        plan["protocol_version"],
        "dpone.clickhouse.cluster-external-full-refresh.v1"
    );
    assert_eq!(plan["phases"][0], "LOCKED");
    assert_eq!(plan["phases"][6], "COMPLETED");
    assert_eq!(j["connections"]["members"], 2);
    assert_eq!(j["connections"]["credentials"], "present");
    // Deterministic: the same invocation plans the same identities.
    assert_eq!(stdout_json(&dpone(&args, &env))["plan"], j["plan"]);
    // No endpoint or secret in the output.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("127.0.0.1") && !text.contains(SECRET),
        "{text}"
    );

    let out = dpone(&["plan", "--manifest", MANIFEST], &[]);
    assert_eq!(out.status.code(), Some(0));
    let j = stdout_json(&out);
    assert_eq!(j["plan"]["invocation_given"], false);
    assert!(j["plan"]["operation_id"].is_null() && j["plan"]["candidate_name"].is_null());
}

#[test]
fn check_resolves_connections_and_requires_the_named_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = unreachable_registry(dir.path());
    let args = [
        "check",
        "--manifest",
        MANIFEST,
        "--connections",
        s(&registry),
    ];
    let out = dpone(&args, &[("DPONE_CLICKHOUSE_PASSWORD", SECRET)]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_REGISTRY_CREDENTIAL_MISSING"
    );

    let swapped = write(
        dir.path(),
        "swapped.yaml",
        &fixture(MANIFEST).replace("connection_ref: analytics_ch", "connection_ref: pg_source"),
    );
    let out = dpone(
        &[
            "check",
            "--manifest",
            s(&swapped),
            "--connections",
            s(&registry),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_REGISTRY_CONNECTION_KIND"
    );

    let bad = write(
        dir.path(),
        "bad-registry.yaml",
        &std::fs::read_to_string(&registry)
            .expect("registry")
            .replace("http://127.0.0.1:1", "http://user:pw@127.0.0.1:1"),
    );
    let out = dpone(
        &["check", "--manifest", MANIFEST, "--connections", s(&bad)],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLICKHOUSE_REGISTRY_URL_INVALID");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("pw@"));
}

#[test]
fn run_and_status_without_a_server_fail_with_the_adapters_connection_code() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = unreachable_registry(dir.path());
    let artifacts = dir.path().join("artifacts");
    let env = [
        ("DPONE_CLICKHOUSE_PASSWORD", SECRET),
        ("DPONE_PG_SOURCE_PASSWORD", SECRET),
    ];
    for command in ["run", "status"] {
        let out = dpone(
            &[
                command,
                "--manifest",
                MANIFEST,
                "--connections",
                s(&registry),
                "--invocation",
                "nightly-2026-09-18",
                "--artifact-dir",
                s(&artifacts),
            ],
            &env,
        );
        assert_unreachable(&out, command, dir.path());
    }
    assert!(!artifacts.exists(), "nothing was extracted");
}

/// A command that could not reach ClickHouse: exit 75 (retry), the adapter's network code, no
/// stdout, and no credential, endpoint or local path on stderr.
fn assert_unreachable(out: &Output, label: &str, dir: &Path) {
    assert_eq!(out.status.code(), Some(75), "{label}: retry later");
    assert_eq!(stderr_code(out), "DPONE_CLICKHOUSE_NETWORK", "{label}");
    assert!(out.stdout.is_empty(), "{label}");
    let err = String::from_utf8_lossy(&out.stderr);
    for leak in [SECRET, "127.0.0.1", dir.to_str().unwrap_or("/tmp")] {
        assert!(!err.contains(leak), "{label} leaks {leak}: {err}");
    }
}

#[test]
fn run_blocks_before_touching_any_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = unreachable_registry(dir.path());
    let out = dpone(
        &[
            "run",
            "--manifest",
            BLOCKED,
            "--connections",
            s(&registry),
            "--invocation",
            "nightly-2026-09-18",
        ],
        &[
            ("DPONE_CLICKHOUSE_PASSWORD", SECRET),
            ("DPONE_PG_SOURCE_PASSWORD", SECRET),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_CLUSTER_STAGING_DATABASE_MISMATCH"
    );
    let j = stdout_json(&out);
    assert_eq!(j["outcome"], "blocked");
    assert_eq!(j["recovery"], "fix_manifest");
    assert_eq!(codes(&j).len(), 3);
}

#[test]
fn run_needs_an_invocation_and_a_registry() {
    let out = dpone(&["run", "--manifest", MANIFEST], &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_INVOCATION_REQUIRED");
    let out = dpone(
        &["status", "--manifest", MANIFEST, "--invocation", "x"],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_CONNECTIONS_REQUIRED");
}

#[test]
fn resolve_needs_a_clickhouse_manifest_an_invocation_and_a_registry() {
    let out = dpone(&["resolve"], &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_MANIFEST_REQUIRED");
    let out = dpone(&["resolve", "--manifest", MANIFEST], &[]);
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_INVOCATION_REQUIRED");
    let out = dpone(
        &[
            "resolve",
            "--manifest",
            MANIFEST,
            "--invocation",
            "x",
            "--apply",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_CONNECTIONS_REQUIRED");
    let out = dpone(
        &[
            "resolve",
            "--manifest",
            "fixtures/xmin/manifest.yaml",
            "--invocation",
            "x",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(stderr_code(&out), "DPONE_CLI_RESOLVE_ROUTE_UNSUPPORTED");
    for bad in [
        &["resolve", "--manifest", MANIFEST, "--quiet-seconds", "soon"][..],
        &["resolve", "--manifest", MANIFEST, "--force"][..],
    ] {
        let out = dpone(bad, &[]);
        assert_eq!(out.status.code(), Some(2), "usage: {bad:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn resolve_without_a_server_changes_nothing_and_exits_75() {
    let dir = tempfile::tempdir().expect("tempdir");
    let registry = unreachable_registry(dir.path());
    let artifacts = dir.path().join("artifacts");
    let env = [("DPONE_CLICKHOUSE_PASSWORD", SECRET)];
    for extra in [&[][..], &["--apply", "--json"][..]] {
        let mut args = vec![
            "resolve",
            "--manifest",
            MANIFEST,
            "--connections",
            s(&registry),
            "--invocation",
            "nightly-2026-09-18",
            "--artifact-dir",
            s(&artifacts),
        ];
        args.extend_from_slice(extra);
        let out = dpone(&args, &env);
        assert_unreachable(&out, &format!("{extra:?}"), dir.path());
    }
    assert!(!artifacts.exists(), "resolve creates no artifact store");
}

#[test]
fn a_configured_trust_policy_is_honoured_by_the_route() {
    // From the environment and from the global option alike: without a bundle, no component
    // is loaded from the shipped directory.
    let out = dpone(
        &["check", "--manifest", MANIFEST],
        &[("DPONE_TRUST_POLICY", "fixtures/trust/none.json")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_code(&out), "DPONE_TRUST_BUNDLE_REQUIRED");
    let out = dpone(
        &[
            "check",
            "--manifest",
            MANIFEST,
            "--trust-policy",
            "fixtures/trust/none.json",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_code(&out), "DPONE_TRUST_BUNDLE_REQUIRED");
    assert!(out.stdout.is_empty());
}

// ---------------------------------------------------------------------------------------------
// The composition without ClickHouse: real PostgreSQL + the admission component + the
// synthetic cluster behind the engine's ports.
// ---------------------------------------------------------------------------------------------

/// The [`AdmissionGate`] over the shipped admission component (as the CLI wires it).
struct ComponentGate(LoadedPolicy);

impl AdmissionGate for ComponentGate {
    fn admit_static(&self, f: &StaticFacts) -> Result<Gated<StaticDecision>, PortError> {
        let d = self
            .0
            .admission_static(f)
            .map_err(|e| PortError::rejected(e.code()))?;
        Ok(Gated {
            evidence: AdmissionEvidence {
                component_sha256: d.evidence.component_sha256.to_string(),
                input_sha256: d.evidence.input_sha256.to_string(),
            },
            decision: d.decision,
        })
    }

    fn admit_runtime(&self, f: &RuntimeFacts) -> Result<Gated<RuntimeDecision>, PortError> {
        let d = self
            .0
            .admission_runtime(f)
            .map_err(|e| PortError::rejected(e.code()))?;
        Ok(Gated {
            evidence: AdmissionEvidence {
                component_sha256: d.evidence.component_sha256.to_string(),
                input_sha256: d.evidence.input_sha256.to_string(),
            },
            decision: d.decision,
        })
    }
}

fn admission_component() -> LoadedPolicy {
    let lock: Value =
        serde_json::from_str(&fixture("policies/components.lock.json")).expect("lock");
    let pin: Sha256Digest = lock["components"]["admission"]["sha256"]
        .as_str()
        .expect("pin")
        .parse()
        .expect("pin parses");
    let bytes = std::fs::read(root().join("target/components/admission.wasm"))
        .expect("the admission component (cargo xtask policies)");
    PolicyRuntime::new(SandboxConfig::default())
        .expect("runtime")
        .load(PolicyKind::Admission, &bytes, pin, Budget::default())
        .expect("component loads at its pin")
}

/// A database of its own on the test server, with `setup` applied; dropped at the end.
struct PgDb {
    url: String,
    name: String,
}

impl PgDb {
    fn create(tag: &str, setup: &str) -> Option<Self> {
        let Some(url) = pg_url() else {
            pg_unusable("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let name = format!("dpone_t_ch{tag}_{}", std::process::id());
        if !psql(
            &url,
            "postgres",
            &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
        ) || !psql(&url, "postgres", &format!("CREATE DATABASE \"{name}\""))
        {
            pg_unusable("the PostgreSQL server is not usable through psql");
        }
        let db = Self { url, name };
        assert!(psql(&db.url, &db.name, setup), "set-up SQL");
        Some(db)
    }

    fn config(&self) -> PgConfig {
        let mut c: PgConfig = self.url.parse().expect("DPONE_TEST_PG_URL parses");
        c.dbname(&self.name);
        c
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        let _ = psql(
            &self.url,
            "postgres",
            &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
        );
    }
}

const SOURCE_SQL: &str = "CREATE TABLE public.source_table (id bigint NOT NULL, \
    metric_code text NOT NULL, observed_on date NOT NULL, value numeric(18,4), note text); \
    INSERT INTO public.source_table SELECT i, 'm' || (i % 7), DATE '1970-01-01' + i, \
    i * 0.0625, CASE WHEN i % 4 = 0 THEN NULL ELSE 'n' || i END \
    FROM generate_series(1, 500) AS i;";

/// The rows of `SOURCE_SQL`, encoded here from the same formulas.
fn expected_source_rows(schema: &Schema) -> Vec<u8> {
    let mut w = RowBinaryWriter::new(column_types(schema).expect("profile"));
    for i in 1..=500u64 {
        w.row(&[
            CanonicalValue::UInt(u128::from(i)),
            CanonicalValue::Bytes(format!("m{}", i % 7).into_bytes()),
            CanonicalValue::Int(i128::from(i)),
            CanonicalValue::Int(i128::from(i) * 625),
            if i % 4 == 0 {
                CanonicalValue::Null
            } else {
                CanonicalValue::Bytes(format!("n{i}").into_bytes())
            },
        ])
        .expect("fits");
    }
    w.finish()
}

fn request(m: &Manifest, invocation: &str) -> OperationRequest {
    OperationRequest {
        static_facts: m.static_facts(),
        target_table: m.target.table.clone(),
        scheduler_invocation: invocation.to_owned(),
        plan_digest: m.plan_digest(),
        schema: m.schema(),
        order_by: m.clickhouse.order_by.clone(),
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn a_real_postgres_relation_publishes_through_the_component_on_a_synthetic_cluster() {
    let Some(db) = PgDb::create("pub", SOURCE_SQL) else {
        return;
    };
    let m = Manifest::parse(&fixture(MANIFEST)).expect("fixture parses");
    let schema = m.schema();
    let gate = ComponentGate(admission_component());
    let cluster = SyntheticCluster::new(2, &schema);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = PgRowBinarySource::new(db.config(), "public", "source_table");
    let artifacts = StoreArtifactSource::new(&store, &source);
    let env = SyntheticEnv::new(7);
    let coordinator = Coordinator::new(
        Ports {
            authority: &cluster,
            inventory: &cluster,
            catalog: &cluster,
            ddl: &cluster,
            artifacts: &artifacts,
            admission: &gate,
            env: &env,
            progress: &NoProgress,
        },
        CoordinatorConfig::default(),
    );
    let req = request(&m, "synthetic-1");
    let receipt = match coordinator.run(&req).expect("run") {
        RunOutcome::Completed { receipt } => receipt,
        other => panic!("not completed: {other:?}"),
    };
    let expected =
        content_digest(&schema, expected_source_rows(&schema).as_slice(), 1 << 28).expect("digest");
    let expected_rowset = dpone_engine_clickhouse::canonical::rowset_digest(
        &schema,
        expected_source_rows(&schema).as_slice(),
        1 << 28,
    )
    .expect("rowset digest");
    assert_eq!(receipt.artifact.row_count, 500);
    assert_eq!(
        receipt.content_proof,
        dpone_engine_clickhouse::contracts::ContentProof::Rowset
    );
    assert_eq!(
        receipt.content_digest, expected_rowset.digest,
        "the artifact is exactly the relation"
    );
    assert_eq!(receipt.members.len(), 2);
    for i in 0..2 {
        let t = cluster
            .snapshot(i, "analytics", "target_table")
            .expect("published");
        let d = content_digest(&schema, t.data.as_slice(), 1 << 28).expect("member digest");
        assert_eq!(d.digest, expected.digest, "member {i} holds the generation");
        assert_eq!(cluster.duplicate_rows(i), 0);
    }
    // The admission evidence in the authority record names the component that decided.
    let lock: Value =
        serde_json::from_str(&fixture("policies/components.lock.json")).expect("lock");
    let record = cluster
        .authority_value(&m.target_key())
        .expect("record")
        .value;
    assert!(
        record.contains(
            lock["components"]["admission"]["sha256"]
                .as_str()
                .expect("pin")
        )
    );
    // A retry of the same operation converges on the same receipt and extracts nothing new.
    match coordinator.run(&req).expect("retry") {
        RunOutcome::Completed { receipt: again } => assert_eq!(again, receipt),
        other => panic!("not completed: {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn a_source_type_mismatch_stops_before_any_member_is_touched() {
    let Some(db) = PgDb::create("mis", SOURCE_SQL) else {
        return;
    };
    // `observed_on` declared as a timestamp: a date does not encode as DateTime64.
    let m = Manifest::parse(&fixture(MANIFEST).replace("type: Date\n", "type: DateTime64(3)\n"))
        .expect("parses");
    let schema = m.schema();
    let gate = ComponentGate(admission_component());
    let cluster = SyntheticCluster::new(2, &schema);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = PgRowBinarySource::new(db.config(), "public", "source_table");
    let artifacts = StoreArtifactSource::new(&store, &source);
    let env = SyntheticEnv::new(7);
    let coordinator = Coordinator::new(
        Ports {
            authority: &cluster,
            inventory: &cluster,
            catalog: &cluster,
            ddl: &cluster,
            artifacts: &artifacts,
            admission: &gate,
            env: &env,
            progress: &NoProgress,
        },
        CoordinatorConfig::default(),
    );
    let e = coordinator
        .run(&request(&m, "synthetic-2"))
        .expect_err("refused");
    assert_eq!(e.code(), "DPONE_CLICKHOUSE_CLUSTER_ARTIFACT_UNAVAILABLE");
    assert_eq!(
        source.last_error().map(|e| e.code()),
        Some("DPONE_PG_ROWBINARY_TYPE_MISMATCH")
    );
    for i in 0..2 {
        assert!(cluster.table_names(i).is_empty(), "member {i} untouched");
    }
    // Refused before any mutation: the operation is ABORTED, so it fences nothing.
    let status = coordinator
        .status(&request(&m, "synthetic-2"))
        .expect("status reads");
    let slot = serde_json::to_value(&status.slot).expect("slot serializes");
    assert!(
        slot.to_string().contains("\"ABORTED\""),
        "the refused operation is aborted: {slot}"
    );
}

// ---------------------------------------------------------------------------------------------
// Live: a real ClickHouse cluster and PostgreSQL server.
// ---------------------------------------------------------------------------------------------

#[allow(clippy::print_stdout)]
/// PostgreSQL-backed tests run only when a server is configured (`cfg(dpone_live_pg)`): one that
/// cannot be used fails them, never skips them.
fn pg_unusable(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

fn pg_url() -> Option<String> {
    if let Ok(u) = std::env::var("DPONE_TEST_PG_URL")
        && !u.is_empty()
    {
        return Some(u);
    }
    let text = std::fs::read_to_string(root().join("target/dpone-test-pg.env")).ok()?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("export DPONE_TEST_PG_URL=")
            .map(str::to_owned)
    })
}

/// `postgres://user:password@host:port/db` → (host, port, user, password).
fn split_pg_url(url: &str) -> Option<(String, u16, String, String)> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let (auth, hostpart) = rest.split_once('@')?;
    let (user, password) = auth.split_once(':').unwrap_or((auth, ""));
    let hostport = hostpart.split('/').next()?;
    let (host, port) = hostport.split_once(':').unwrap_or((hostport, "5432"));
    Some((
        host.into(),
        port.parse().ok()?,
        user.into(),
        password.into(),
    ))
}

fn psql(url: &str, db: &str, sql: &str) -> bool {
    let target = match url.rsplit_once('/') {
        Some((base, _)) => format!("{base}/{db}"),
        None => return false,
    };
    Command::new("psql")
        .args([&target, "-v", "ON_ERROR_STOP=1", "-qAtc", sql])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Tier: real engine (CLI end-to-end). A workload of its own on the real-engine ClickHouse tier
/// (`.ci/start-clickhouse`) from a PostgreSQL database of its own: registry, manifest and
/// credentials as an operator writes them. These tests run only when `DPONE_TEST_CLICKHOUSE_URL`
/// was set at build time; then a missing companion variable or PostgreSQL server is a failure.
struct LiveRoute {
    pg: String,
    db: String,
    ch_url: String,
    ch_user: String,
    ch_password: String,
    pg_password: String,
    database: String,
    target: String,
    dir: tempfile::TempDir,
    registry: PathBuf,
    manifest: PathBuf,
}

impl LiveRoute {
    /// `columns` are (name, ClickHouse type); `source_sql` creates and fills
    /// `public.source_table` in a fresh database.
    fn new(tag: &str, columns: &[(&str, &str)], source_sql: &str) -> Self {
        let env = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} is set"));
        let opt = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_owned());
        let ch_url = env("DPONE_TEST_CLICKHOUSE_URL");
        let members = env("DPONE_TEST_CLICKHOUSE_MEMBER_URLS");
        let pg = pg_url().expect("a PostgreSQL server beside the ClickHouse tier");
        let (host, port, user, pg_password) = split_pg_url(&pg).expect("postgres:// URL");
        let cluster = opt("DPONE_TEST_CLICKHOUSE_CLUSTER", "analytics_cluster");
        let database = opt("DPONE_TEST_CLICKHOUSE_DATABASE", "dpone_test");
        let authority = opt(
            "DPONE_TEST_CLICKHOUSE_AUTHORITY",
            "dpone_test.dpone_authority",
        );
        let (adb, atable) = authority.split_once('.').expect("db.table");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .subsec_nanos();
        let suffix = format!("{}_{nanos:x}", std::process::id());
        let db = format!("dpone_t_chlive_{tag}_{suffix}");
        assert!(
            psql(&pg, "postgres", &format!("CREATE DATABASE \"{db}\"")),
            "CREATE DATABASE"
        );
        assert!(psql(&pg, &db, source_sql), "source set-up");
        let dir = tempfile::tempdir().expect("tempdir");
        let member_yaml: String = members
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|item| {
                let (key, url) = item.split_once('=').expect("shard:replica=url");
                let (sh, re) = key.split_once(':').expect("shard:replica");
                format!("      - {{shard_num: {sh}, replica_num: {re}, url: '{url}'}}\n")
            })
            .collect();
        let ch_user = opt("DPONE_TEST_CLICKHOUSE_USER", "default");
        let tls_yaml = tier_tls_yaml();
        let registry = write(
            dir.path(),
            "registry.yaml",
            &format!(
                "version: 1\nconnections:\n  analytics_ch:\n    kind: clickhouse_cluster\n    coordinator_url: '{ch_url}'\n    members:\n{member_yaml}    user: '{ch_user}'\n    password_env: DPONE_CLICKHOUSE_PASSWORD\n{tls_yaml}    authority: {{database: {adb}, table: {atable}}}\n    ddl_task_timeout_secs: 60\n  pg_source:\n    kind: postgres_source\n    endpoint: {{host: '{host}', port: {port}, database: '{db}', user: '{user}', sslmode: disable}}\n    password_env: DPONE_PG_SOURCE_PASSWORD\n"
            ),
        );
        let target = format!("cli_{tag}_{suffix}");
        let column_yaml: String = columns
            .iter()
            .map(|(n, t)| format!("    - {{name: \"{n}\", type: \"{t}\"}}\n"))
            .collect();
        let manifest = write(
            dir.path(),
            "manifest.yaml",
            &format!(
                "version: 1\nname: real_engine_{tag}\nsource:\n  connection_ref: pg_source\n  relation: public.source_table\n  columns:\n{column_yaml}target: {{connection_ref: analytics_ch, database: {database}, table: {target}}}\nphysical_design:\n  storage:\n    clickhouse:\n      engine: MergeTree\n      order_by: [{}]\n      max_source_bytes: 1073741824\n      staging_database: {database}\n      cluster: {{name: {cluster}, ddl_scope: cluster, replication_mode: external}}\n",
                columns[0].0
            ),
        );
        Self {
            pg,
            db,
            ch_url,
            ch_user,
            ch_password: opt("DPONE_TEST_CLICKHOUSE_PASSWORD", ""),
            pg_password,
            database,
            target,
            dir,
            registry,
            manifest,
        }
    }

    /// `dpone-host COMMAND --manifest … --connections … [--invocation ID] [extra…]`.
    fn cmd(&self, command: &str, invocation: Option<&str>, extra: &[&str]) -> Output {
        self.cmd_env(command, invocation, extra, &[])
    }

    /// `dpone-host COMMAND` of this route on a pseudo-terminal (util-linux `script`, `NO_COLOR`,
    /// `--output auto`): its exit status and what the terminal showed (`\r\n` made `\n`).
    fn at_terminal(&self, command: &str, invocation: Option<&str>) -> (i32, String) {
        let artifacts = self.dir.path().join("artifacts");
        let mut a = vec![
            env!("CARGO_BIN_EXE_dpone-host"),
            command,
            "--manifest",
            s(&self.manifest),
            "--connections",
            s(&self.registry),
            "--artifact-dir",
            s(&artifacts),
        ];
        if let Some(i) = invocation {
            a.extend(["--invocation", i]);
        }
        let quoted: Vec<String> = a
            .iter()
            .map(|x| format!("'{}'", x.replace('\'', "'\\''")))
            .collect();
        let out = Command::new("script")
            .current_dir(root())
            .args(["-qec", &quoted.join(" "), "/dev/null"])
            .env("NO_COLOR", "1")
            .env("DPONE_CLICKHOUSE_PASSWORD", &self.ch_password)
            .env("DPONE_PG_SOURCE_PASSWORD", &self.pg_password)
            .output()
            .expect("util-linux `script` runs");
        let shown = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
        assert!(!shown.contains(&self.ch_url), "endpoint in output");
        assert!(!shown.contains(s(self.dir.path())), "local path in output");
        (out.status.code().unwrap_or(-1), shown)
    }

    /// [`Self::cmd`] with more environment variables.
    fn cmd_env(
        &self,
        command: &str,
        invocation: Option<&str>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Output {
        let artifacts = self.dir.path().join("artifacts");
        let mut a = vec![
            command,
            "--manifest",
            s(&self.manifest),
            "--connections",
            s(&self.registry),
            "--artifact-dir",
            s(&artifacts),
        ];
        if let Some(i) = invocation {
            a.extend(["--invocation", i]);
        }
        a.extend(extra);
        let mut vars = vec![
            ("DPONE_CLICKHOUSE_PASSWORD", self.ch_password.as_str()),
            ("DPONE_PG_SOURCE_PASSWORD", self.pg_password.as_str()),
        ];
        vars.extend_from_slice(env);
        let out = dpone(&a, &vars);
        // Nothing an operator's log must not hold: endpoints, credentials, local paths.
        for text in [
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        ] {
            assert!(!text.contains(&self.ch_url), "endpoint in output");
            assert!(
                self.ch_password.is_empty() || !text.contains(&self.ch_password),
                "credential in output"
            );
            assert!(
                self.pg_password.is_empty() || !text.contains(&self.pg_password),
                "credential in output"
            );
            assert!(!text.contains(s(self.dir.path())), "local path in output");
        }
        out
    }

    /// Exit 0 and the JSON on stdout.
    fn ok(&self, command: &str, invocation: Option<&str>) -> Value {
        let out = self.cmd(command, invocation, &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout_json(&out)
    }

    /// One statement on a member of the tier (TabSeparated output).
    fn member_sql(&self, member_url: &str, query: &str) -> String {
        let mut curl = Command::new("curl");
        if let Ok(ca) = std::env::var("DPONE_TEST_CLICKHOUSE_CA") {
            curl.arg("--cacert").arg(ca);
        }
        let out = curl
            .args(["-fsS", "-m", "60", "--data-binary", query])
            .arg("-H")
            .arg(format!("X-ClickHouse-User: {}", self.ch_user))
            .arg("-H")
            .arg(format!("X-ClickHouse-Key: {}", self.ch_password))
            .arg(member_url)
            .output()
            .expect("curl runs");
        assert!(out.status.success(), "member query failed");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// The tables that carry the target's name on every member (none when it was never
    /// published).
    fn members_if_any(&self) -> Vec<(String, Vec<String>)> {
        std::env::var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS")
            .expect("set")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|item| {
                let url = item.split_once('=').expect("key=url").1;
                let tables = self.member_sql(
                    url,
                    &format!(
                        "SELECT name FROM system.tables WHERE database = '{}' AND startsWith(name, '{}') ORDER BY name",
                        self.database, self.target
                    ),
                );
                (url.to_owned(), tables.lines().map(str::to_owned).collect())
            })
            .collect()
    }

    /// Every member's (row count, order-independent fingerprint) of the target, and the tables
    /// beside it that carry its name.
    fn members(&self) -> Vec<(String, Vec<String>)> {
        std::env::var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS")
            .expect("set")
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|item| {
                let url = item.split_once('=').expect("key=url").1;
                let facts = self.member_sql(
                    url,
                    &format!(
                        "SELECT count(), toString(sum(cityHash64(*))) FROM `{}`.`{}`",
                        self.database, self.target
                    ),
                );
                let tables = self.member_sql(
                    url,
                    &format!(
                        "SELECT name FROM system.tables WHERE database = '{}' AND startsWith(name, '{}') ORDER BY name",
                        self.database, self.target
                    ),
                );
                (
                    facts.trim().to_owned(),
                    tables.lines().map(str::to_owned).collect(),
                )
            })
            .collect()
    }
}

impl Drop for LiveRoute {
    fn drop(&mut self) {
        let _ = psql(
            &self.pg,
            "postgres",
            &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.db),
        );
    }
}

const LIVE_COLUMNS: &[(&str, &str)] = &[
    ("id", "UInt64"),
    ("metric_code", "String"),
    ("observed_on", "Date"),
    ("value", "Decimal(18, 4)"),
    ("note", "Nullable(String)"),
];

const LIVE_SOURCE: &str = "CREATE TABLE public.source_table (id bigint NOT NULL, \
    metric_code text NOT NULL, observed_on date NOT NULL, value numeric(18,4), note text); \
    INSERT INTO public.source_table SELECT i, 'm' || (i % 7), DATE '2026-01-01' + i % 30, \
    i * 0.5, CASE WHEN i % 4 = 0 THEN NULL ELSE 'n' || i END FROM generate_series(1, 1000) i;";

impl LiveRoute {
    /// This route rewritten for one server: the manifest loses its cluster block and the
    /// registry's ClickHouse connection becomes a `clickhouse_server` of member `(1, 1)` (its
    /// user, credential variable, authority and any TLS pin kept).
    fn one_server(self) -> Self {
        let member1 = std::env::var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS")
            .expect("set")
            .split(',')
            .find_map(|i| i.strip_prefix("1:1=").map(str::to_owned))
            .expect("member 1:1");
        let registry = std::fs::read_to_string(&self.registry).expect("registry");
        let mut out = String::new();
        let mut in_ch = false;
        for line in registry.lines() {
            if line.starts_with("  ") && !line.starts_with("   ") {
                in_ch = line.trim() == "analytics_ch:";
            }
            let t = line.trim_start();
            let keep = !(in_ch
                && (t.starts_with("members:")
                    || t.starts_with("- {shard_num")
                    || t.starts_with("ddl_task_timeout_secs:")));
            if !keep {
                continue;
            }
            let line = if in_ch && t == "kind: clickhouse_cluster" {
                "    kind: clickhouse_server".to_owned()
            } else if in_ch && t.starts_with("coordinator_url:") {
                format!("    url: '{member1}'")
            } else {
                line.to_owned()
            };
            out.push_str(&line);
            out.push('\n');
        }
        std::fs::write(&self.registry, out).expect("registry");
        let manifest = std::fs::read_to_string(&self.manifest).expect("manifest");
        let local: String = manifest
            .lines()
            .filter(|l| !l.trim_start().starts_with("cluster:"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_ne!(local, manifest);
        std::fs::write(&self.manifest, local).expect("manifest");
        self
    }
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_one_server_check_plan_run_status_through_the_binary() {
    // A manifest without a cluster block, a `clickhouse_server` connection: local publication
    // of a real PostgreSQL relation to one real member, through the binary.
    let route = LiveRoute::new("one_server", LIVE_COLUMNS, LIVE_SOURCE).one_server();
    let check = route.ok("check", None);
    assert_eq!(check["replication"]["requested"], "local", "{check}");
    assert_eq!(check["replication"]["selected"], "local", "{check}");
    let j = route.ok("run", Some("local-1"));
    assert_eq!(j["outcome"], "completed", "{j}");
    assert_eq!(j["replication"], check["replication"], "{j}");
    assert_eq!(
        j["receipt"]["schema_version"],
        "dpone.clickhouse.local-full-refresh-receipt.v1"
    );
    assert_eq!(j["receipt"]["artifact"]["row_count"], 1000);
    let members = route.members_if_any();
    assert_eq!(
        members[0].1,
        vec![route.target.clone()],
        "published on member 1"
    );
    assert!(members[1].1.is_empty(), "nothing on another server");
    assert_eq!(route.ok("run", Some("local-1"))["receipt"], j["receipt"]);
    assert_eq!(
        route.ok("status", Some("local-1"))["status"]["recovery"],
        "none"
    );
    // A second generation: EXCHANGE, and the predecessor cleaned up.
    let j2 = route.ok("run", Some("local-2"));
    assert_eq!(j2["outcome"], "completed", "{j2}");
    assert_eq!(
        route.members_if_any()[0].1,
        vec![route.target.clone()],
        "one table left"
    );
    // The manifest and the connection must agree on the topology: a cluster manifest naming
    // the one-server connection is refused before anything is contacted.
    let mut clustered = std::fs::read_to_string(&route.manifest).expect("manifest");
    clustered.push_str(
        "      cluster: {name: analytics_cluster, ddl_scope: cluster, replication_mode: external}\n",
    );
    std::fs::write(&route.manifest, clustered).expect("manifest");
    let out = route.cmd("run", Some("local-3"), &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_REGISTRY_CONNECTION_KIND"
    );
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_run_publishes_then_a_retry_converges_and_status_names_no_action() {
    let route = LiveRoute::new("retry", LIVE_COLUMNS, LIVE_SOURCE);
    let j1 = route.ok("run", Some("live-cli-1"));
    assert_eq!(j1["outcome"], "completed");
    assert_eq!(j1["receipt"]["artifact"]["row_count"], 1000);
    // The run prints the replication decision its static admission made, as check and plan do.
    let check = route.ok("check", None);
    assert_eq!(j1["replication"], check["replication"], "{j1}");
    assert_eq!(j1["replication"]["replication_mode"], "external", "{j1}");
    assert_eq!(
        j1["receipt"]["content_proof"], "rowset",
        "a manifest that names no proof gets the default"
    );
    let again = route.ok("run", Some("live-cli-1"));
    assert_eq!(
        again["receipt"], j1["receipt"],
        "a retry converges, no new generation"
    );
    assert_eq!(
        route.ok("status", Some("live-cli-1"))["status"]["recovery"],
        "none"
    );
    // A completed operation has nothing to resolve: refused, nothing recorded.
    let res = route.cmd("resolve", Some("live-cli-1"), &["--apply", "--json"]);
    assert_eq!(res.status.code(), Some(1));
    assert_eq!(
        stderr_code(&res),
        "DPONE_CLICKHOUSE_CLUSTER_RESOLVE_NOT_NEEDED"
    );
    let rj = stdout_json(&res);
    assert_eq!(rj["resolve"]["outcome"], "refused");
    assert_eq!(rj["resolve"]["recovery"], "none");
    // The same refusal at a terminal: the verdict first (then what was observed per member).
    let (rc, shown) = route.at_terminal("resolve", Some("live-cli-1"));
    eprintln!("{shown}");
    assert_eq!(rc, 1, "{shown}");
    assert!(
        shown.starts_with("refused: DPONE_CLICKHOUSE_CLUSTER_RESOLVE_NOT_NEEDED\n"),
        "{shown}"
    );
    let next = shown
        .lines()
        .find(|l| l.starts_with("  next "))
        .unwrap_or_else(|| panic!("a next line: {shown}"));
    assert_eq!(
        next.split_whitespace().collect::<Vec<_>>(),
        ["next", "none"]
    );
    assert!(
        shown.contains("\nresolve: workload "),
        "the per-member report follows: {shown}"
    );
    // `--output text --json`: the summary alone; `--json` off a terminal stays the JSON.
    let text = route.cmd(
        "resolve",
        Some("live-cli-1"),
        &["--json", "--output", "text"],
    );
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.starts_with("refused: DPONE_CLICKHOUSE_CLUSTER_RESOLVE_NOT_NEEDED\n")
            && !text.contains("resolve: workload"),
        "{text}"
    );
    let explicit = route.cmd(
        "resolve",
        Some("live-cli-1"),
        &["--apply", "--json", "--output", "json"],
    );
    assert_eq!(
        String::from_utf8_lossy(&explicit.stdout),
        String::from_utf8_lossy(&res.stdout),
        "--json off a terminal is the JSON"
    );
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_a_manifest_that_names_the_canonical_proof_is_published_under_it() {
    let route = LiveRoute::new("canon", LIVE_COLUMNS, LIVE_SOURCE);
    let text = std::fs::read_to_string(&route.manifest).expect("manifest");
    let staging = format!("      staging_database: {}\n", route.database);
    assert_eq!(text.matches(&staging).count(), 1, "{text}");
    let default_plan = route.ok("plan", Some("live-canon-1"))["plan"]["plan_digest"].clone();
    std::fs::write(
        &route.manifest,
        text.replace(
            &staging,
            &format!("{staging}      content_proof: canonical\n"),
        ),
    )
    .expect("manifest");
    let plan = route.ok("plan", Some("live-canon-1"));
    assert_ne!(
        plan["plan"]["plan_digest"], default_plan,
        "the proof is part of the plan"
    );
    assert_eq!(plan["plan"]["content_proof"], "canonical");
    let j = route.ok("run", Some("live-canon-1"));
    assert_eq!(j["outcome"], "completed", "{j}");
    assert_eq!(j["receipt"]["artifact"]["row_count"], 1000);
    // A canonical receipt is written exactly as before proofs were versioned: no field.
    assert!(j["receipt"].get("content_proof").is_none(), "{j}");
    // The canonical proof digests the stored artifact in its own pass, after the seal.
    assert!(
        j["phase_timings"]["artifact_digest_s"]
            .as_f64()
            .is_some_and(|t| t > 0.0),
        "{j}"
    );
    let members = route.members();
    assert_eq!(members.len(), 2);
    assert_eq!(members[0].0, members[1].0, "members hold one generation");
    // Changing the manifest back to the default names another plan, so another operation.
    std::fs::write(&route.manifest, &text).expect("manifest");
    let again = route.ok("run", Some("live-canon-2"));
    assert_eq!(again["outcome"], "completed", "{again}");
    assert_eq!(again["receipt"]["content_proof"], "rowset", "{again}");
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_check_plan_run_status_then_exchange_then_an_empty_source_on_two_real_members() {
    let route = LiveRoute::new("journey", LIVE_COLUMNS, LIVE_SOURCE);
    let check = route.ok("check", None);
    assert_eq!(check["replication"]["selected"], "cluster_external");
    assert_eq!(check["admitted"], true);
    let plan = route.ok("plan", Some("journey-1"));
    assert!(plan["plan"]["operation_id"].is_string(), "{plan}");
    // First publication: the target is absent, RENAME.
    let first = route.ok("run", Some("journey-1"));
    assert_eq!(first["outcome"], "completed");
    assert_eq!(first["receipt"]["publication"]["kind"], "rename");
    // The two separate measurements: source rows and COPY payload bytes, and each member
    // load's HTTP body (uncompressed RowBinary: the artifact's bytes).
    let measured = &first["measurements"];
    assert_eq!(measured["source"]["rows"], 1000, "{first}");
    assert_eq!(measured["source"]["complete"], true, "{first}");
    assert!(
        measured["source"]["source_bytes"]
            .as_u64()
            .is_some_and(|b| b > 1000),
        "{first}"
    );
    let sent = measured["http_body"].as_array().expect("http_body");
    assert_eq!(sent.len(), 2, "one load per member: {first}");
    for s in sent {
        assert_eq!(
            s["body_bytes"], first["receipt"]["artifact"]["byte_size"],
            "{first}"
        );
        assert_eq!(s["complete"], true, "{first}");
    }
    // Phase timings: every phase the run executed, and each member's steps.
    let timings = &first["phase_timings"];
    for phase in ["seal_s", "stage_s", "authorize_s", "publish_s"] {
        assert!(
            timings[phase].as_f64().is_some_and(|t| t > 0.0),
            "{phase}: {first}"
        );
    }
    // Under the rowset proof the artifact is digested while it is sealed (inside `seal_s`).
    assert!(
        timings["artifact_digest_s"]
            .as_f64()
            .is_some_and(|t| t >= 0.0),
        "{first}"
    );
    assert!(
        timings["total_s"].as_f64() >= timings["stage_s"].as_f64(),
        "{first}"
    );
    // Every phase change is an authority write read back: at least lock, staging (with every
    // member's candidate intent), created (every member), staged (with every member READY),
    // dispatching, committed and completed, each a write and a read.
    assert!(
        timings["authority_calls"].as_u64().is_some_and(|n| n >= 14),
        "{first}"
    );
    assert!(
        timings["authority_s"].as_f64().is_some_and(|t| t > 0.0),
        "{first}"
    );
    let per_member = timings["members"].as_array().expect("members");
    assert_eq!(per_member.len(), 2, "{first}");
    for m in per_member {
        for step in ["create_s", "load_s", "candidate_proof_s", "target_proof_s"] {
            assert!(m[step].as_f64().is_some_and(|t| t > 0.0), "{step}: {first}");
        }
    }
    let members = route.members();
    assert_eq!(members.len(), 2);
    assert!(members[0].0.starts_with("1000\t"), "{members:?}");
    assert_eq!(members[0].0, members[1].0, "members hold one generation");
    assert_eq!(
        route.ok("status", Some("journey-1"))["status"]["recovery"],
        "none"
    );
    // A second operation replaces the first: EXCHANGE, then cleanup proves absence.
    assert!(psql(
        &route.pg,
        &route.db,
        "UPDATE public.source_table SET note = 'changed' WHERE id % 10 = 0; \
         DELETE FROM public.source_table WHERE id > 900; \
         INSERT INTO public.source_table VALUES (5000, 'm9', DATE '2026-02-01', 1.25, NULL);"
    ));
    let second = route.ok("run", Some("journey-2"));
    assert_eq!(second["receipt"]["publication"]["kind"], "exchange");
    assert_eq!(second["receipt"]["artifact"]["row_count"], 901);
    let members = route.members();
    assert!(members[0].0.starts_with("901\t"), "{members:?}");
    assert_eq!(members[0].0, members[1].0);
    for (_, tables) in &members {
        assert_eq!(
            tables,
            &vec![route.target.clone()],
            "cleanup left no object"
        );
    }
    // An empty source publishes an empty generation.
    assert!(psql(&route.pg, &route.db, "TRUNCATE public.source_table;"));
    let third = route.ok("run", Some("journey-3"));
    assert_eq!(third["receipt"]["artifact"]["row_count"], 0);
    for (facts, tables) in route.members() {
        assert!(facts.starts_with("0\t"), "{facts}");
        assert_eq!(tables, vec![route.target.clone()]);
    }
    assert_eq!(
        route.ok("status", Some("journey-3"))["status"]["recovery"],
        "none"
    );
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_every_source_type_round_trips_with_member_digests_equal_to_the_artifact_digest() {
    let columns: &[(&str, &str)] = &[
        ("id", "UInt64"),
        ("i2", "Int16"),
        ("i4", "Int32"),
        ("i8", "Int64"),
        ("b", "Bool"),
        ("f4", "Float32"),
        ("f8", "Float64"),
        ("n", "Decimal(18, 4)"),
        ("n38", "Decimal(38, 10)"),
        ("t", "String"),
        ("fs", "FixedString(4)"),
        ("by", "String"),
        ("u", "UUID"),
        ("d", "Date"),
        ("d32", "Date32"),
        ("ts", "DateTime"),
        ("tsz", "DateTime64(6)"),
        ("ip4", "IPv4"),
        ("ip6", "IPv6"),
        ("nt", "Nullable(String)"),
        ("lc", "LowCardinality(String)"),
    ];
    let route = LiveRoute::new(
        "types",
        columns,
        "CREATE TABLE public.source_table (id bigint NOT NULL, i2 smallint NOT NULL, \
         i4 integer NOT NULL, i8 bigint NOT NULL, b boolean NOT NULL, f4 real NOT NULL, \
         f8 double precision NOT NULL, n numeric(18,4) NOT NULL, n38 numeric(38,10) NOT NULL, \
         t text NOT NULL, fs char(4) NOT NULL, by bytea NOT NULL, u uuid NOT NULL, \
         d date NOT NULL, d32 date NOT NULL, ts timestamp NOT NULL, tsz timestamptz NOT NULL, \
         ip4 inet NOT NULL, ip6 inet NOT NULL, nt text, lc text NOT NULL); \
         INSERT INTO public.source_table SELECT i, (i * 97 % 65536 - 32768)::smallint, \
         -i * 65537, i * 4294967311, i % 3 = 0, i / 3.0, -i / 7.0, i * 1.0625, \
         i * 12345.0123456789, 'text ' || i || ' é', lpad(i::text, 4, 'x'), \
         decode(lpad(to_hex(i), 8, '0'), 'hex'), md5(i::text)::uuid, DATE '1970-01-01' + i, \
         DATE '1901-01-01' + i * 100, TIMESTAMP '2026-01-01 00:00:00' + i * interval '1 second', \
         TIMESTAMPTZ '2026-01-01 00:00:00+00' + i * interval '1 microsecond', \
         ('10.0.' || (i % 256) || '.' || (i % 200))::inet, ('2001:db8::' || to_hex(i))::inet, \
         CASE WHEN i % 5 = 0 THEN NULL ELSE 'n' || i END, 'lc' || (i % 3) \
         FROM generate_series(1, 300) AS i;",
    );
    // READY needs each member's canonical content digest, read back from the real engine, to
    // equal the artifact's (extracted from PostgreSQL); COMMITTED needs it again of every
    // published target. The receipt records each member's digest.
    let run = route.ok("run", Some("types-1"));
    let receipt = &run["receipt"];
    assert_eq!(receipt["artifact"]["row_count"], 300);
    let members = receipt["members"].as_array().expect("members");
    assert_eq!(members.len(), 2);
    for m in members {
        assert_eq!(m["content_digest"], receipt["content_digest"]);
        assert_eq!(m["row_count"], 300);
    }
    let facts = route.members();
    assert_eq!(facts[0].0, facts[1].0);
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_a_manifest_without_a_mode_is_routed_internal_and_refused_by_the_external_topology() {
    // The mode router on real members: a manifest without `replication_mode` is internal mode;
    // the tier's cluster reports internal_replication = false, so runtime admission refuses it
    // (flag/mode mismatch) before any source read or member mutation, never falling back.
    let route = LiveRoute::new("router", LIVE_COLUMNS, LIVE_SOURCE);
    let text = std::fs::read_to_string(&route.manifest).expect("manifest");
    let internal = text
        .replace(", replication_mode: external", "")
        .replace("engine: MergeTree", "engine: ReplicatedMergeTree");
    assert_ne!(internal, text);
    std::fs::write(&route.manifest, internal).expect("write");
    let out = route.cmd("run", Some("router-1"), &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j = stdout_json(&out);
    // The policy's own blocker is the one reported.
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_CLUSTER_FLAG_MODE_MISMATCH"
    );
    assert_eq!(j["replication"]["selected"], "cluster_internal", "{j}");
    for (_, tables) in route.members_if_any() {
        assert!(tables.is_empty(), "nothing was created: {tables:?}");
    }
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_swapped_member_urls_are_refused_before_anything_is_created() {
    let route = LiveRoute::new("identity", LIVE_COLUMNS, LIVE_SOURCE);
    let text = std::fs::read_to_string(&route.registry).expect("registry");
    let mut urls = std::env::var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS").expect("set");
    urls = urls
        .split(',')
        .filter_map(|i| i.split_once('=').map(|(_, u)| u.to_owned()))
        .collect::<Vec<_>>()
        .join(",");
    let (u1, u2) = urls.split_once(',').expect("two members");
    let swapped = text
        .replace(
            &format!("replica_num: 1, url: '{u1}'"),
            "replica_num: 1, url: 'U2'",
        )
        .replace(
            &format!("replica_num: 2, url: '{u2}'"),
            "replica_num: 2, url: 'U1'",
        )
        .replace("'U1'", &format!("'{u1}'"))
        .replace("'U2'", &format!("'{u2}'"));
    assert_ne!(swapped, text);
    std::fs::write(&route.registry, swapped).expect("write");
    let out = route.cmd("run", Some("identity-1"), &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stderr_code(&out),
        "DPONE_CLICKHOUSE_CLUSTER_MEMBER_IDENTITY_UNPROVEN"
    );
    assert_eq!(stdout_json(&out)["recovery"], "fix_manifest");
    for (_, tables) in route.members_if_any() {
        assert!(tables.is_empty(), "nothing was created: {tables:?}");
    }
}

#[test]
#[cfg_attr(
    not(all(dpone_live_clickhouse, dpone_live_pg)),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL (start the real-engine tier with .ci/start-clickhouse) and DPONE_TEST_PG_URL or .ci/start-postgres (the PostgreSQL source) are both needed"
)]
fn live_publication_exports_its_protocol_steps_decisions_and_counts_over_otlp() {
    use otlp::{Receiver, otel_env, str_attr, sum};
    let route = LiveRoute::new("otlp", LIVE_COLUMNS, LIVE_SOURCE);
    let receiver = Receiver::start();
    let env = otel_env(&receiver);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = route.cmd_env("run", Some("otlp-1"), &[], &env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = stdout_json(&out);
    assert_eq!(run["outcome"], "completed");

    let (spans, resource) = receiver.spans();
    assert_eq!(str_attr(&resource, "service.name"), Some("dpone-otlp-test"));
    let command = spans
        .iter()
        .find(|s| s.name == "run")
        .expect("the command span");
    assert!(command.parent_span_id.is_empty());
    let steps: Vec<&str> = {
        let mut under: Vec<_> = spans
            .iter()
            .filter(|s| s.parent_span_id == command.span_id && s.name != "decide")
            .collect();
        under.sort_by_key(|s| s.start_time_unix_nano);
        under.iter().map(|s| s.name.as_str()).collect()
    };
    // The protocol's steps in order, each once (cleanup: committed, then its dispatch, when
    // there are predecessors to drop; settle: the completed record read back).
    assert_eq!(
        steps
            .iter()
            .filter(|n| **n != "cleanup")
            .copied()
            .collect::<Vec<_>>(),
        [
            "admit",
            "lock",
            "seal",
            "stage",
            "authorize",
            "publish",
            "settle"
        ],
        "{steps:?}"
    );
    assert!(steps.contains(&"cleanup"), "{steps:?}");
    let admit = spans.iter().find(|s| s.name == "admit").expect("admit");
    let decisions: Vec<_> = spans.iter().filter(|s| s.name == "decide").collect();
    assert!(
        decisions.iter().any(|d| d.parent_span_id == admit.span_id
            && str_attr(&d.attributes, "policy.function") == Some("admit-runtime")),
        "the runtime admission is decided inside the admit step"
    );
    for d in &decisions {
        assert_eq!(str_attr(&d.attributes, "policy.kind"), Some("admission"));
    }

    let metrics = receiver.metrics();
    let source = &run["measurements"]["source"];
    assert_eq!(
        sum(&metrics, "dpone.rows.read", &[("route", "clickhouse")]),
        source["rows"].as_u64().expect("rows")
    );
    assert_eq!(
        sum(&metrics, "dpone.bytes.read", &[("route", "clickhouse")]),
        source["source_bytes"].as_u64().expect("bytes")
    );
    assert_eq!(
        sum(
            &metrics,
            "dpone.decisions",
            &[("policy.function", "admit-runtime")]
        ),
        1
    );
    // Rows applied: the publication's rows, once per publication (not per member).
    let published = run["receipt"]["artifact"]["row_count"]
        .as_u64()
        .expect("row count");
    assert_eq!(published, source["rows"].as_u64().expect("rows"));
    assert_eq!(
        sum(&metrics, "dpone.rows.applied", &[("route", "clickhouse")]),
        published
    );

    // The retry's human summary (`--output text`): converged, published. It found the
    // publication completed, so it applied nothing and counts nothing applied.
    let again = Receiver::start();
    let env = otel_env(&again);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = route.cmd_env("run", Some("otlp-1"), &["--output", "text"], &env);
    assert_eq!(out.status.code(), Some(0));
    let retried = again.metrics();
    assert!(
        retried.contains_key("dpone.decisions"),
        "the retry exported its metrics: {:?}",
        retried.keys()
    );
    assert!(
        !retried.contains_key("dpone.rows.applied"),
        "a retry of a completed publication applies nothing"
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}");
    assert!(text.starts_with("done: published\n"), "{text}");
    assert!(
        text.contains("  publication ") && text.contains("  artifact "),
        "{text}"
    );

    // No endpoint, credential or local path in what was sent.
    let raw = String::from_utf8_lossy(&receiver.raw()).into_owned();
    assert!(!raw.contains(&route.ch_url), "endpoint exported");
    for secret in [&route.ch_password, &route.pg_password] {
        assert!(
            secret.is_empty() || !raw.contains(secret.as_str()),
            "credential exported"
        );
    }
    assert!(!raw.contains(s(route.dir.path())), "local path exported");
}

/// The registry line pinning the tier's CA (`DPONE_TEST_CLICKHOUSE_CA`: the tier serves
/// `https://` only), or nothing for a tier without one.
fn tier_tls_yaml() -> String {
    std::env::var("DPONE_TEST_CLICKHOUSE_CA")
        .ok()
        .filter(|ca| !ca.trim().is_empty())
        .map(|ca| format!("    sslrootcert: '{ca}'\n"))
        .unwrap_or_default()
}
