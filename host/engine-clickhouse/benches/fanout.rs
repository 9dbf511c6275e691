//! Benchmark: staging fan-out time (LOCKED → COMPLETED through the in-process synthetic
//! cluster) for N = 2, 4 and 8 members. Measures the coordinator's own cost per member
//! (authority CAS and read-back, create, load, canonical verification, publication and cleanup
//! bookkeeping); network and server time are not modelled. Prints JSON.
//!
//! `cargo bench -p dpone-engine-clickhouse --bench fanout`
#![allow(clippy::print_stdout)] // the report is the output

use std::time::{Duration, Instant};

use dpone_engine_clickhouse::canonical::{RowBinaryWriter, Value, column_types};
use dpone_engine_clickhouse::contracts::{Digest, Schema};
use dpone_engine_clickhouse::ports::NoProgress;
use dpone_engine_clickhouse::synthetic::{
    FnGate, SyntheticArtifacts, SyntheticCluster, SyntheticEnv,
};
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, OperationRequest, Ports, RunOutcome,
};
use dpone_policy_model::admission::StaticFacts;

fn schema() -> Schema {
    Schema::of(&[
        ("id", "UInt64"),
        ("name", "String"),
        ("amount", "Decimal(18, 2)"),
    ])
}

fn artifact(n: u64) -> Vec<u8> {
    let mut w = RowBinaryWriter::new(column_types(&schema()).expect("types"));
    for k in 0..n {
        w.row(&[
            Value::UInt(u128::from(k)),
            Value::Bytes(format!("n-{k}").into_bytes()),
            Value::Int(i128::from(k)),
        ])
        .expect("row");
    }
    w.finish()
}

fn request() -> OperationRequest {
    OperationRequest {
        static_facts: StaticFacts {
            cluster_name: "analytics_cluster".into(),
            ddl_scope: Some("cluster".into()),
            replication_mode: Some("external".into()),
            engine: "MergeTree".into(),
            max_source_bytes: Some(1 << 30),
            target_database: "db".into(),
            staging_database: "db".into(),
            access_table_engine: None,
        },
        target_table: "target_table".into(),
        scheduler_invocation: "bench".into(),
        plan_digest: Digest::of(b"bench plan"),
        schema: schema(),
        order_by: vec!["id".into()],
    }
}

fn once(members: u32, bytes: &[u8], rows: u64) -> Duration {
    let cluster = SyntheticCluster::new(members, &schema());
    let artifacts = SyntheticArtifacts::new(bytes.to_vec(), rows);
    let env = SyntheticEnv::new(1);
    let gate = FnGate::new(
        "native-policy-core",
        dpone_policy_admission::admit_static,
        dpone_policy_admission::admit_runtime,
    );
    let c = Coordinator::new(
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
    let t = Instant::now();
    let out = c.run(&request()).expect("bench run completes");
    let d = t.elapsed();
    assert!(matches!(out, RunOutcome::Completed { .. }));
    d
}

fn main() {
    let rows: u64 = std::env::var("DPONE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let bytes = artifact(rows);
    let mut results = Vec::new();
    for members in [2u32, 4, 8] {
        let _ = once(members, &bytes, rows);
        let mut v: Vec<Duration> = (0..7).map(|_| once(members, &bytes, rows)).collect();
        v.sort_unstable();
        let median = v[v.len() / 2];
        results.push(serde_json::json!({
            "members": members,
            "median_ms": median.as_secs_f64() * 1e3,
            "per_member_ms": median.as_secs_f64() * 1e3 / f64::from(members),
        }));
    }
    let report = serde_json::json!({
        "bench": "staging_fanout_synthetic",
        "rows": rows,
        "artifact_bytes": bytes.len(),
        "results": results,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
}
