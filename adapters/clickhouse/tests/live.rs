//! Tier: real engine. Runs the adapter and the engine against two real ClickHouse 26.9 members
//! (the tier `.ci/start-clickhouse` starts, or any cluster named by the same variables) only
//! when `DPONE_TEST_CLICKHOUSE_URL` is set at build time; otherwise every test is reported
//! ignored with its SKIP reason, never passed. Variables: `DPONE_TEST_CLICKHOUSE_URL`
//! (coordinator), `DPONE_TEST_CLICKHOUSE_MEMBER_URLS` (`shard:replica=url,…`), and optionally
//! `DPONE_TEST_CLICKHOUSE_USER`, `_PASSWORD`, `_CLUSTER` (default `analytics_cluster`),
//! `_DATABASE` (default `dpone_test`), `_AUTHORITY` (`db.table`, default
//! `dpone_test.dpone_authority`, a KeeperMap facade on every member).
//!
//! Every test publishes to its own target name, so the tests run in parallel.

mod support;

use dpone_adapter_clickhouse::{ClickHouseCluster, Extract, StoreArtifactSource, class};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::canonical::{RowBinaryWriter, Value, column_types};
use dpone_engine_clickhouse::contracts::{self, Schema, member_id};
use dpone_engine_clickhouse::ports::{
    ClusterDdl, InventoryPort, MEMBER_IDENTITY_UNPROVEN, MemberCatalog, PortError, QueueHostStatus,
    SystemEnvironment,
};
use dpone_engine_clickhouse::{OperationRequest, RunOutcome};
use support::{
    Rows, Tier, coordinator, expected_fingerprint, gate, request, schema, table_facts, tables_like,
    unique,
};

/// One `run` with a fresh artifact store.
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

fn completed(outcome: RunOutcome) -> Box<dpone_engine_clickhouse::contracts::PublicationReceipt> {
    match outcome {
        RunOutcome::Completed { receipt } => receipt,
        other => panic!("the run did not complete: {other:?}"),
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn inventory_is_complete_external_and_every_member_proves_its_identity() {
    let tier = Tier::from_env();
    let c = tier.cluster();
    let (rows, complete) = c.observe(&tier.cluster).expect("inventory");
    assert!(complete, "every inventory row needs a member URL");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| !r.internal_replication));
    for r in &rows {
        let id = member_id(r.shard_num, r.replica_num);
        let probe = c.probe(&id, &tier.database, "absent_table").expect("probe");
        assert_eq!(probe.database_engine, "Atomic");
        assert!(probe.keeper_map_available);
        assert_eq!(probe.target_engine, None);
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn a_member_url_that_reaches_another_replica_is_refused() {
    let tier = Tier::from_env();
    let with = |members: std::collections::BTreeMap<(u32, u32), String>| {
        let mut config = tier.config(30);
        config.member_urls = members
            .iter()
            .map(|(k, u)| (*k, tier.endpoint(u)))
            .collect();
        ClickHouseCluster::new(&config).expect("adapter builds")
    };
    let probe = |c: &ClickHouseCluster, replica: u32| {
        c.probe(&member_id(1, replica), &tier.database, "absent_table")
    };
    // Swapped URLs: each reaches the other replica, which says so of itself.
    let mut swapped = tier.members.clone();
    swapped.insert((1, 1), tier.member(2).to_owned());
    swapped.insert((1, 2), tier.member(1).to_owned());
    let c = with(swapped);
    for replica in [1, 2] {
        assert_eq!(
            probe(&c, replica)
                .expect_err("identity must be proven")
                .class,
            MEMBER_IDENTITY_UNPROVEN
        );
    }
    // Two members on one server: the one it is not is refused.
    let mut doubled = tier.members.clone();
    doubled.insert((1, 2), tier.member(1).to_owned());
    let c = with(doubled);
    assert!(probe(&c, 1).is_ok());
    assert_eq!(
        probe(&c, 2).expect_err("identity must be proven").class,
        MEMBER_IDENTITY_UNPROVEN
    );
    // A configured member the cluster does not list.
    let mut extra = tier.members.clone();
    extra.insert((1, 3), tier.member(2).to_owned());
    assert_eq!(
        with(extra)
            .observe(&tier.cluster)
            .expect_err("extra member")
            .class,
        class::MEMBER_EXTRA
    );
    // The registry as configured proves every member.
    let c = tier.cluster();
    assert!(c.observe(&tier.cluster).expect("inventory").1);
    for replica in [1, 2] {
        assert!(probe(&c, replica).is_ok());
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn first_publication_renames_a_retry_converges_and_a_second_operation_exchanges() {
    let tier = Tier::from_env();
    let c = tier.cluster();
    let target = unique("live_pub");
    // First publication: the target is absent, so the candidate is renamed into place.
    let first = request(&tier, &target, &unique("inv"), schema());
    let source = Rows {
        rows: 1_000,
        salt: 1,
    };
    let receipt = completed(run(&c, &source, &first).expect("first run"));
    assert_eq!(receipt.artifact.row_count, 1_000);
    // One load per member, each body the artifact's bytes, acknowledged.
    let sent = c.body_observations();
    assert_eq!(sent.len(), 2, "{sent:?}");
    for s in &sent {
        assert_eq!(s.body_bytes, receipt.artifact.byte_size, "{sent:?}");
        assert!(s.complete, "{sent:?}");
    }
    let want = expected_fingerprint(&tier, 1_000, 1);
    for replica in [1, 2] {
        assert_eq!(
            table_facts(&tier, replica, &target),
            (1_000, 1_000, want.clone())
        );
    }
    // The bound publication entry is on the queue: one entry, both hosts finished.
    let queue = c
        .observe_queue(
            &tier.cluster,
            &contracts::ddl_query_id(receipt.publication.kind, &receipt.publication.token),
        )
        .expect("the real queue rows decode");
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].unmapped_hosts, 0);
    assert_eq!(queue[0].members.len(), 2);
    assert!(
        queue[0]
            .members
            .iter()
            .all(|(_, s)| *s == QueueHostStatus::Finished)
    );
    // A retry of the same invocation converges without loading anything again.
    let again = completed(run(&c, &source, &first).expect("retry"));
    assert_eq!(again.generation_id, receipt.generation_id);
    assert_eq!(c.body_observations(), sent, "the retry sent no body");
    for replica in [1, 2] {
        assert_eq!(table_facts(&tier, replica, &target).0, 1_000);
    }
    // A second operation replaces the first: EXCHANGE, then cleanup of the predecessor.
    let second = request(&tier, &target, &unique("inv"), schema());
    let changed = Rows {
        rows: 1_500,
        salt: 2,
    };
    completed(run(&c, &changed, &second).expect("second run"));
    let want = expected_fingerprint(&tier, 1_500, 2);
    for replica in [1, 2] {
        assert_eq!(
            table_facts(&tier, replica, &target),
            (1_500, 1_500, want.clone())
        );
        // Cleanup proved absence: no candidate or predecessor is left beside the target.
        assert_eq!(tables_like(&tier, replica, &target), vec![target.clone()]);
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn an_empty_source_publishes_an_empty_generation_on_every_member() {
    let tier = Tier::from_env();
    let c = tier.cluster();
    let target = unique("live_empty");
    let req = request(&tier, &target, &unique("inv"), schema());
    let receipt = completed(run(&c, &Rows { rows: 0, salt: 0 }, &req).expect("run"));
    assert_eq!(receipt.artifact.row_count, 0);
    for replica in [1, 2] {
        assert_eq!(table_facts(&tier, replica, &target).0, 0);
        assert_eq!(tables_like(&tier, replica, &target), vec![target.clone()]);
    }
}

/// Every type of the canonical profile, with edge values.
struct AllTypes;

fn all_types_schema() -> Schema {
    Schema::of(&[
        ("k", "UInt64"),
        ("i8", "Int8"),
        ("i16", "Int16"),
        ("i32", "Int32"),
        ("i64", "Int64"),
        ("i128", "Int128"),
        ("i256", "Int256"),
        ("u8", "UInt8"),
        ("u16", "UInt16"),
        ("u32", "UInt32"),
        ("u128", "UInt128"),
        ("u256", "UInt256"),
        ("f32", "Float32"),
        ("f64", "Float64"),
        ("b", "Bool"),
        ("s", "String"),
        ("fs", "FixedString(4)"),
        ("u", "UUID"),
        ("d", "Date"),
        ("d32", "Date32"),
        ("dt", "DateTime"),
        ("dt64", "DateTime64(6)"),
        ("dec32", "Decimal(9, 2)"),
        ("dec64", "Decimal(18, 4)"),
        ("dec128", "Decimal(38, 10)"),
        ("dec256", "Decimal(76, 20)"),
        ("e8", "Enum8('a' = -1, 'b' = 2)"),
        ("e16", "Enum16('y' = -300, 'x' = 300)"),
        ("ip4", "IPv4"),
        ("ip6", "IPv6"),
        ("ns", "Nullable(String)"),
        ("ni", "Nullable(Int32)"),
        ("lc", "LowCardinality(String)"),
        ("lcn", "LowCardinality(Nullable(String))"),
    ])
}

impl Extract for AllTypes {
    fn extract(&self, schema: &Schema, out: &mut dyn std::io::Write) -> Result<u64, PortError> {
        let mut w = RowBinaryWriter::new(column_types(schema).expect("profile"));
        let all = all_rows();
        for r in &all {
            w.row(r).expect("row fits");
        }
        out.write_all(&w.finish())
            .map_err(|_| PortError::rejected("DPONE_TEST_WRITE"))?;
        Ok(all.len() as u64)
    }
}

fn all_rows() -> Vec<Vec<Value>> {
    let rows = 64u64;
    let mut all = Vec::new();
    for k in 0..rows {
        let neg = k % 2 == 0;
        let sign = |v: i128| if neg { -v } else { v };
        let s = i128::from(k);
        let mut uuid = [0u8; 16];
        uuid[15] = k as u8;
        uuid[6] = 0x40;
        let mut ip6 = [0u8; 16];
        ip6[0] = 0x20;
        ip6[1] = 0x01;
        ip6[15] = k as u8;
        all.push(vec![
            Value::UInt(u128::from(k)),
            Value::Int(sign(s % 128)),
            Value::Int(sign(s * 257)),
            Value::Int(sign(s * 65_537)),
            Value::Int(sign(s * 4_294_967_311)),
            Value::Int(sign(s * 18_446_744_073_709_551_557)),
            Value::Int(sign(s * 170_141_183_460_469_231_731)),
            Value::UInt(u128::from(k % 256)),
            Value::UInt(u128::from(k * 1_021 % 65_536)),
            Value::UInt(u128::from(u32::MAX) - u128::from(k)),
            Value::UInt(u128::MAX - u128::from(k)),
            Value::UInt(u128::from(k) << 100),
            Value::Float(if k == 3 { f64::NAN } else { (s as f64) * -0.5 }),
            Value::Float(if k == 5 { -0.0 } else { (s as f64) / 3.0 }),
            Value::Bool(k % 3 == 0),
            Value::Bytes(if k == 7 {
                vec![0, 255, 10]
            } else {
                format!("s{k}").into_bytes()
            }),
            Value::Bytes(vec![b'a', k as u8, 0, 255]),
            Value::Raw16(uuid),
            Value::Int(s * 100),
            Value::Int(sign(s * 1_000)),
            Value::Int(1_700_000_000 + s),
            Value::Int(sign(1_700_000_000_000_000 + s)),
            Value::Int(sign(s * 12_345)),
            Value::Int(sign(s * 123_456_789)),
            Value::Int(sign(s * 10_i128.pow(30))),
            Value::Int(sign(s * 10_i128.pow(36))),
            Value::Int(if neg { -1 } else { 2 }),
            Value::Int(if neg { 300 } else { -300 }),
            Value::UInt(0x0a00_0000 + u128::from(k)),
            Value::Raw16(ip6),
            if k % 4 == 0 {
                Value::Null
            } else {
                Value::Bytes(format!("n{k}").into_bytes())
            },
            if k % 5 == 0 {
                Value::Null
            } else {
                Value::Int(sign(s))
            },
            Value::Bytes(format!("lc{}", k % 3).into_bytes()),
            if k % 6 == 0 {
                Value::Null
            } else {
                Value::Bytes(format!("l{}", k % 2).into_bytes())
            },
        ]);
    }
    all
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn every_profile_type_round_trips_with_member_digests_equal_to_the_artifact_digest() {
    let tier = Tier::from_env();
    let c = tier.cluster();
    let target = unique("live_types");
    let req = request(&tier, &target, &unique("inv"), all_types_schema());
    // READY requires each member's canonical content digest, read back from the real engine,
    // to equal the artifact's; COMMITTED requires it again of every published target.
    let receipt = completed(run(&c, &AllTypes, &req).expect("run"));
    assert_eq!(receipt.artifact.row_count, 64);
    for replica in [1, 2] {
        let id = member_id(1, replica);
        let observed = c
            .observe_table(&id, &tier.database, &target)
            .expect("observe")
            .expect("published");
        assert_eq!(observed.row_count, 64);
        assert_eq!(observed.columns, all_types_schema().columns);
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn the_manifest_spelling_rule_matches_what_the_engine_reports() {
    let tier = Tier::from_env();
    let table = unique("spelling");
    let declared = [
        "Decimal32(2)",
        "Decimal256(20)",
        "Enum16('x' = 300, 'y' = -300)",
        "Enum8('a'=1,'b, c'=-2)",
        "Nullable(Enum8('b' = 2, 'a' = 1))",
        "LowCardinality(Nullable(String))",
        "DateTime64(6,'UTC')",
        "FixedString(4)",
    ];
    let columns: Vec<String> = declared
        .iter()
        .enumerate()
        .map(|(i, t)| format!("c{i} {t}"))
        .collect();
    tier.sql(
        tier.member(1),
        &format!(
            "CREATE TABLE `{}`.`{table}` ({}) ENGINE = Memory",
            tier.database,
            columns.join(", ")
        ),
    );
    let reported = tier.sql(
        tier.member(1),
        &format!(
            "SELECT type FROM system.columns WHERE database = '{}' AND table = '{table}' ORDER BY position FORMAT TSVRaw",
            tier.database
        ),
    );
    let reported: Vec<&str> = reported.lines().collect();
    for (t, r) in declared.iter().zip(&reported) {
        assert_eq!(
            contracts::manifest::reported_type_spelling(t).as_deref(),
            Some(*r),
            "{t}"
        );
    }
    tier.sql(
        tier.member(1),
        &format!("DROP TABLE `{}`.`{table}` SYNC", tier.database),
    );
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn rows_whose_encoding_ends_in_a_newline_byte_prove_and_publish_under_the_default_proof() {
    // 100,000 rows of (k UInt64, s String, last) for a UUID, a Float64 and an integer last
    // column: about one row in 256 ends in the byte 0x0A, which `formatRowNoNewline` trims on the
    // member (the default proof then held such a table for the operator as divergent). The
    // member's rowset digest equals the host's over the artifact for every row, and the
    // publication under the default proof completes.
    const ROWS: u64 = 100_000;
    struct Ending(&'static str);
    impl Ending {
        fn schema(&self) -> Schema {
            Schema::of(&[("k", "UInt64"), ("s", "String"), ("last", self.0)])
        }
        fn last(&self, k: u64) -> Value {
            // A multiplicative hash spreads the last byte over every value.
            let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (k >> 7);
            match self.0 {
                "UUID" => {
                    let mut u = [0u8; 16];
                    u[..8].copy_from_slice(&h.to_le_bytes());
                    u[8..].copy_from_slice(&h.rotate_left(17).to_le_bytes());
                    u[6] = 0x40 | (u[6] & 0x0f);
                    Value::Raw16(u)
                }
                "Float64" => Value::Float(f64::from_bits(h >> 2)),
                _ => Value::UInt(u128::from(h & 0xFFFF_FFFF)),
            }
        }
    }
    impl Extract for Ending {
        fn extract(&self, schema: &Schema, out: &mut dyn std::io::Write) -> Result<u64, PortError> {
            let mut w = RowBinaryWriter::new(column_types(schema).expect("profile"));
            for k in 0..ROWS {
                w.row(&[
                    Value::UInt(u128::from(k)),
                    Value::Bytes(format!("s{k}").into_bytes()),
                    self.last(k),
                ])
                .expect("row fits");
            }
            out.write_all(&w.finish())
                .map_err(|_| PortError::rejected("DPONE_TEST_WRITE"))?;
            Ok(ROWS)
        }
    }
    let tier = Tier::from_env();
    let c = tier.cluster();
    for (ending, name) in [
        (Ending("UUID"), "uuid"),
        (Ending("Float64"), "f64"),
        (Ending("UInt32"), "u32"),
    ] {
        let schema = ending.schema();
        let mut bytes = Vec::new();
        ending.extract(&schema, &mut bytes).expect("artifact bytes");
        // The rows that end in 0x0A: the last column's encoding is fixed-width, so its last
        // byte is the row's last byte.
        let width = match ending.0 {
            "UUID" => 16,
            "Float64" => 8,
            _ => 4,
        };
        let newline_rows = (0..ROWS)
            .filter(|&k| {
                let mut w = RowBinaryWriter::new(column_types(&schema).expect("profile"));
                w.row(&[Value::UInt(0), Value::Bytes(Vec::new()), ending.last(k)])
                    .expect("row fits");
                let row = w.finish();
                row.len() >= width && row.last() == Some(&0x0A)
            })
            .count();
        assert!(
            newline_rows > 100,
            "{name}: the table must hold rows ending in 0x0A ({newline_rows})"
        );
        let host = dpone_engine_clickhouse::canonical::rowset_digest(&schema, &bytes[..], 1 << 24)
            .expect("artifact rowset digest");
        assert_eq!(host.row_count, ROWS);
        let target = unique(&format!("live_nl_{name}"));
        let req = request(&tier, &target, &unique("inv"), schema.clone());
        let receipt = completed(run(&c, &ending, &req).expect("run"));
        assert_eq!(
            receipt.content_proof,
            contracts::ContentProof::Rowset,
            "{name}"
        );
        assert_eq!(receipt.content_digest, host.digest, "{name}");
        for replica in [1, 2] {
            let member = contracts::member_id(1, replica);
            let t = c
                .observe_table(&member, &tier.database, &target)
                .expect("observe")
                .expect("published target");
            let buckets = c
                .rowset_buckets(&member, &tier.database, &target, t.uuid, &schema)
                .expect("member rowset buckets");
            let member_digest =
                dpone_engine_clickhouse::canonical::rowset::combine(&schema, &buckets)
                    .expect("well-formed reply");
            assert_eq!(member_digest, host, "{name}: member {replica}");
        }
    }
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn every_member_computes_the_rowset_digest_of_the_artifact_bytes_for_every_profile_type() {
    // The rowset proof's basis: each member re-serializes every row of every profile type
    // (NaN, -0.0, NULLs, empty and non-UTF-8 strings included) to exactly the artifact's
    // `RowBinary` row bytes, so its `GROUP BY` buckets combine to the digest the host computes
    // over the artifact, and the run's receipt carries that digest under the rowset proof.
    let tier = Tier::from_env();
    let c = tier.cluster();
    let target = unique("live_rowset");
    let req = request(&tier, &target, &unique("inv"), all_types_schema());
    let receipt = completed(run(&c, &AllTypes, &req).expect("run"));
    let schema = all_types_schema();
    let mut bytes = Vec::new();
    AllTypes
        .extract(&schema, &mut bytes)
        .expect("artifact bytes");
    let host = dpone_engine_clickhouse::canonical::rowset_digest(&schema, &bytes[..], 1 << 20)
        .expect("artifact rowset digest");
    assert_eq!(host.row_count, 64);
    assert_eq!(receipt.content_proof, contracts::ContentProof::Rowset);
    assert_eq!(receipt.content_digest, host.digest);
    for replica in [1, 2] {
        let member = contracts::member_id(1, replica);
        let t = c
            .observe_table(&member, &tier.database, &target)
            .expect("observe")
            .expect("published target");
        let buckets = c
            .rowset_buckets(&member, &tier.database, &target, t.uuid, &schema)
            .expect("member rowset buckets");
        let member_digest = dpone_engine_clickhouse::canonical::rowset::combine(&schema, &buckets)
            .expect("well-formed reply");
        assert_eq!(member_digest, host, "member {replica}");
        // Another UUID under the same name is refused, never digested.
        let other = contracts::Uuid::parse("00000000-0000-4000-8000-000000000000").expect("uuid");
        assert!(
            c.rowset_buckets(&member, &tier.database, &target, other, &schema)
                .is_err()
        );
    }
}
