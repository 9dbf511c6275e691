//! Tier: real engine, a Replicated cluster. Internal-mode publication (a manifest without
//! `replication_mode`) against a real ClickHouse cluster of one shard whose replicas run
//! `ReplicatedMergeTree` (`internal_replication = true`), only when
//! `DPONE_TEST_CLICKHOUSE_REPLICATED_URL` is set at build time; otherwise every test is reported
//! ignored with its SKIP reason, never passed.
//!
//! The chdb engines of the local tier keep `ReplicatedMergeTree` tables read-only, so no
//! replicated cluster runs on these machines: the internal mode's fault matrix runs on the
//! synthetic Replicated cluster (`host/engine-clickhouse/tests/fault_matrix.rs`), and these
//! tests run where a real Replicated cluster is provided (the live-servers workflow).
//!
//! Variables (same shape as the external tier's, prefix `DPONE_TEST_CLICKHOUSE_REPLICATED`):
//! `_URL` (coordinator), `_MEMBER_URLS` (`shard:replica=url,…`), `_USER`, `_PASSWORD`,
//! `_CLUSTER` (default `analytics_cluster`), `_DATABASE` (default `dpone_test`, an Atomic
//! database on every replica), `_AUTHORITY` (`db.table`, a KeeperMap facade on every replica).
//! Every replica needs the `{shard}` and `{replica}` macros, so a candidate created with only
//! `ENGINE = ReplicatedMergeTree` joins the server's `default_replica_path`.

mod support;

use dpone_adapter_clickhouse::{ClickHouseCluster, Extract, StoreArtifactSource};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::contracts::{
    AuthoritySlot, V1_RECEIPT_SCHEMA, decode_slot, member_id, target_key,
};
use dpone_engine_clickhouse::ports::{
    AuthorityStore, InventoryPort, MemberCatalog, SystemEnvironment,
};
use dpone_engine_clickhouse::{OperationRequest, RunOutcome};
use support::{
    Rows, Tier, coordinator, expected_fingerprint, gate, internal_request, schema, table_facts,
    tables_like, unique,
};

const PREFIX: &str = "DPONE_TEST_CLICKHOUSE_REPLICATED";

fn run(
    cluster: &ClickHouseCluster,
    source: &(dyn Extract + Sync),
    req: &OperationRequest,
) -> Result<RunOutcome, dpone_engine_clickhouse::EngineError> {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let artifacts = StoreArtifactSource::new(&store, source);
    let gate = gate();
    coordinator(cluster, &artifacts, &gate, &SystemEnvironment).run(req)
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse_replicated),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_REPLICATED_URL is not set; no Replicated cluster runs on this machine (the chdb tier keeps ReplicatedMergeTree read-only)"
)]
fn the_inventory_is_internal_and_every_replica_proves_its_identity() {
    let tier = Tier::from_prefix(PREFIX);
    let c = tier.cluster();
    let (rows, complete) = c.observe(&tier.cluster).expect("inventory");
    assert!(complete, "every inventory row needs a member URL");
    assert!(rows.len() >= 2);
    assert!(rows.iter().all(|r| r.internal_replication));
    for r in &rows {
        let probe = c
            .probe(
                &member_id(r.shard_num, r.replica_num),
                &tier.database,
                "absent",
            )
            .expect("probe");
        assert_eq!(probe.database_engine, "Atomic");
        assert!(probe.keeper_map_available);
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse_replicated),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_REPLICATED_URL is not set; no Replicated cluster runs on this machine (the chdb tier keeps ReplicatedMergeTree read-only)"
)]
fn a_manifest_without_a_mode_publishes_through_one_replica_then_exchanges() {
    let tier = Tier::from_prefix(PREFIX);
    let c = tier.cluster();
    let target = unique("live_internal");
    let replicas: Vec<u32> = tier.members.keys().map(|(_, r)| *r).collect();
    // First generation: RENAME (absent target), loaded once, replicated, every replica proven.
    let req = internal_request(&tier, &target, &unique("inv"), schema());
    let RunOutcome::Completed { receipt } = run(
        &c,
        &Rows {
            rows: 5_000,
            salt: 1,
        },
        &req,
    )
    .expect("the first internal run completes") else {
        panic!("not completed");
    };
    assert_eq!(receipt.schema_version, V1_RECEIPT_SCHEMA);
    assert_eq!(receipt.members.len(), replicas.len());
    let want = expected_fingerprint(&tier, 5_000, 1);
    for &r in &replicas {
        assert_eq!(table_facts(&tier, r, &target), (5_000, 5_000, want.clone()));
        assert_eq!(tables_like(&tier, r, &target), vec![target.clone()]);
    }
    let key = target_key(&tier.cluster, &tier.database, &target);
    let slot = c.read(&key).expect("authority").expect("slot");
    assert!(matches!(decode_slot(&slot.value), Ok(AuthoritySlot::V1(_))));
    // The same request again: idempotent, nothing reloaded.
    assert!(matches!(
        run(
            &c,
            &Rows {
                rows: 5_000,
                salt: 1
            },
            &req
        ),
        Ok(RunOutcome::Completed { .. })
    ));
    // Second generation: EXCHANGE, the predecessor dropped on every replica.
    let req2 = internal_request(&tier, &target, &unique("inv"), schema());
    assert!(matches!(
        run(
            &c,
            &Rows {
                rows: 7_000,
                salt: 2
            },
            &req2
        ),
        Ok(RunOutcome::Completed { .. })
    ));
    let want = expected_fingerprint(&tier, 7_000, 2);
    for &r in &replicas {
        assert_eq!(table_facts(&tier, r, &target), (7_000, 7_000, want.clone()));
        assert_eq!(tables_like(&tier, r, &target), vec![target.clone()]);
        let t = c
            .observe_table(&member_id(1, r), &tier.database, &target)
            .expect("observe")
            .expect("target");
        assert!(t.engine.starts_with("Replicated"), "{}", t.engine);
    }
}
