//! Tier: live opt-in. Runs against a real ClickHouse cluster only when
//! `DPONE_TEST_CLICKHOUSE_URL` (coordinator HTTP URL) and `DPONE_TEST_CLICKHOUSE_MEMBER_URLS`
//! (`shard:replica=url,…`) are set; otherwise prints `SKIP: <reason>` and returns. Optional:
//! `DPONE_TEST_CLICKHOUSE_USER`, `DPONE_TEST_CLICKHOUSE_PASSWORD`,
//! `DPONE_TEST_CLICKHOUSE_CLUSTER` (default `analytics_cluster`),
//! `DPONE_TEST_CLICKHOUSE_DATABASE` (default `dpone_test`), and the KeeperMap facade
//! `DPONE_TEST_CLICKHOUSE_AUTHORITY` (`db.table`, default `dpone_test.dpone_authority`), which
//! must already exist on every member. A skipped test is not a pass.
#![allow(clippy::print_stdout)]

use std::collections::BTreeMap;
use std::io::Write;

use dpone_adapter_clickhouse::{
    ClickHouseCluster, ClickHouseConfig, Credential, Extract, StoreArtifactSource,
};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::canonical::{RowBinaryWriter, Value, column_types};
use dpone_engine_clickhouse::contracts::{Digest, Schema};
use dpone_engine_clickhouse::ports::{
    InventoryPort, MemberCatalog, NoProgress, PortError, SystemEnvironment,
};
use dpone_engine_clickhouse::synthetic::FnGate;
use dpone_engine_clickhouse::{
    Coordinator, CoordinatorConfig, OperationRequest, Ports, RunOutcome,
};
use dpone_policy_model::admission::StaticFacts;

struct Env {
    url: String,
    members: BTreeMap<(u32, u32), String>,
    user: String,
    password: String,
    cluster: String,
    database: String,
    authority: (String, String),
}

fn env() -> Result<Env, String> {
    let url = std::env::var("DPONE_TEST_CLICKHOUSE_URL")
        .map_err(|_| "DPONE_TEST_CLICKHOUSE_URL is not set".to_string())?;
    let raw = std::env::var("DPONE_TEST_CLICKHOUSE_MEMBER_URLS")
        .map_err(|_| "DPONE_TEST_CLICKHOUSE_MEMBER_URLS is not set".to_string())?;
    let mut members = BTreeMap::new();
    for item in raw.split(',').filter(|s| !s.is_empty()) {
        let (key, u) = item
            .split_once('=')
            .ok_or("DPONE_TEST_CLICKHOUSE_MEMBER_URLS items are shard:replica=url")?;
        let (s, r) = key
            .split_once(':')
            .ok_or("DPONE_TEST_CLICKHOUSE_MEMBER_URLS keys are shard:replica")?;
        let s: u32 = s.parse().map_err(|_| "shard is not a number")?;
        let r: u32 = r.parse().map_err(|_| "replica is not a number")?;
        members.insert((s, r), u.to_string());
    }
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let authority = var(
        "DPONE_TEST_CLICKHOUSE_AUTHORITY",
        "dpone_test.dpone_authority",
    );
    let (adb, at) = authority
        .split_once('.')
        .ok_or("DPONE_TEST_CLICKHOUSE_AUTHORITY is db.table")?;
    Ok(Env {
        url,
        members,
        user: var("DPONE_TEST_CLICKHOUSE_USER", "default"),
        password: var("DPONE_TEST_CLICKHOUSE_PASSWORD", ""),
        cluster: var("DPONE_TEST_CLICKHOUSE_CLUSTER", "analytics_cluster"),
        database: var("DPONE_TEST_CLICKHOUSE_DATABASE", "dpone_test"),
        authority: (adb.into(), at.into()),
    })
}

fn cluster(e: &Env) -> ClickHouseCluster {
    ClickHouseCluster::new(&ClickHouseConfig {
        coordinator_url: e.url.clone(),
        member_urls: e.members.clone(),
        credential: Credential {
            user: e.user.clone(),
            password: e.password.clone(),
        },
        authority_database: e.authority.0.clone(),
        authority_table: e.authority.1.clone(),
        ddl_task_timeout_secs: 120,
    })
    .expect("adapter builds")
}

fn schema() -> Schema {
    Schema::of(&[
        ("id", "UInt64"),
        ("name", "String"),
        ("amount", "Decimal(18, 2)"),
    ])
}

struct Rows(u64);

impl Extract for Rows {
    fn extract(&self, schema: &Schema, out: &mut dyn Write) -> Result<u64, PortError> {
        let mut w = RowBinaryWriter::new(column_types(schema).expect("profile"));
        for k in 0..self.0 {
            w.row(&[
                Value::UInt(u128::from(k)),
                Value::Bytes(format!("n-{k}").into_bytes()),
                Value::Int(i128::from(k)),
            ])
            .expect("row");
        }
        out.write_all(&w.finish())
            .map_err(|_| PortError::rejected("DPONE_TEST_WRITE"))?;
        Ok(self.0)
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; no ClickHouse cluster to test against"
)]
fn live_inventory_is_complete_and_external() {
    let e = match env() {
        Ok(e) => e,
        Err(reason) => {
            println!("SKIP: {reason}");
            return;
        }
    };
    let c = cluster(&e);
    let (rows, complete) = c.observe(&e.cluster).expect("inventory");
    assert!(complete, "every inventory row needs a member URL");
    assert!(rows.len() >= 2);
    assert!(rows.iter().all(|r| !r.internal_replication));
    for r in &rows {
        let id = dpone_engine_clickhouse::contracts::member_id(r.shard_num, r.replica_num);
        let probe = c.probe(&id, &e.database, "absent_table").expect("probe");
        assert_eq!(probe.database_engine, "Atomic");
        assert!(probe.keeper_map_available);
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; no ClickHouse cluster to test against"
)]
fn live_full_refresh_completes_and_retry_is_idempotent() {
    let e = match env() {
        Ok(e) => e,
        Err(reason) => {
            println!("SKIP: {reason}");
            return;
        }
    };
    let c = cluster(&e);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = StoreArtifactSource::new(&store, Rows(1_000));
    let gate = FnGate::new(
        "native-policy-core",
        dpone_policy_admission::admit_static,
        dpone_policy_admission::admit_runtime,
    );
    let env = SystemEnvironment;
    let coordinator = Coordinator::new(
        Ports {
            authority: &c,
            inventory: &c,
            catalog: &c,
            ddl: &c,
            artifacts: &source,
            admission: &gate,
            env: &env,
            progress: &NoProgress,
        },
        CoordinatorConfig::default(),
    );
    let invocation = format!("live-{}", SystemEnvironment.now_unix_for_test());
    let req = OperationRequest {
        static_facts: StaticFacts {
            cluster_name: e.cluster.clone(),
            ddl_scope: Some("cluster".into()),
            replication_mode: Some("external".into()),
            engine: "MergeTree".into(),
            max_source_bytes: Some(1 << 30),
            target_database: e.database.clone(),
            staging_database: e.database.clone(),
            access_table_engine: None,
        },
        target_table: "dpone_live_target".into(),
        scheduler_invocation: invocation,
        plan_digest: Digest::of(b"live plan"),
        schema: schema(),
        order_by: vec!["id".into()],
    };
    let first = coordinator.run(&req).expect("live run");
    let RunOutcome::Completed { receipt } = first else {
        panic!("live run did not complete: {first:?}");
    };
    assert_eq!(receipt.artifact.row_count, 1_000);
    let again = coordinator.run(&req).expect("retry");
    assert!(matches!(again, RunOutcome::Completed { .. }));
}

trait NowForTest {
    fn now_unix_for_test(&self) -> i64;
}

impl NowForTest for SystemEnvironment {
    fn now_unix_for_test(&self) -> i64 {
        use dpone_engine_clickhouse::ports::Environment;
        self.now_unix()
    }
}
