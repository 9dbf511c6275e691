//! Tier: unit. Every statement the adapter sends, snapshot-tested (`expect-test`; update with
//! `UPDATE_EXPECT=1`), plus well-formedness checks on identifiers and refusals.

use dpone_adapter_clickhouse::sql::{self, SqlError};
use dpone_engine_clickhouse::contracts::{ClusterStatement, Digest, Schema, Token, Uuid};
use dpone_engine_clickhouse::ports::{CandidateSpec, DdlCorrelation, LoadTokens};
use expect_test::expect;

fn schema() -> Schema {
    Schema::of(&[
        ("id", "UInt64"),
        ("name", "Nullable(String)"),
        ("amount", "Decimal(18, 2)"),
        ("uid", "UUID"),
    ])
}

fn corr() -> DdlCorrelation {
    DdlCorrelation {
        token: Token([0xab; 16]),
        query_id: "dpone-exchange-abababababababababababababababab".into(),
        query_digest: Digest::of(b"q"),
    }
}

#[test]
fn inventory_and_authority() {
    expect![[r#"
        SELECT toUInt32(shard_num) AS shard_num, toUInt32(replica_num) AS replica_num, host_name, toUInt16(port) AS port, toUInt8(internal_replication) AS internal_replication FROM system.clusters WHERE cluster = {cluster:String} ORDER BY shard_num, replica_num
          param cluster = analytics_cluster
    "#]]
    .assert_eq(&sql::inventory("analytics_cluster").to_string());
    expect![[r#"
        SELECT value, toUInt64(_version) AS version FROM `dpone`.`authority` WHERE key = {key:String}
          param key = k1
    "#]]
    .assert_eq(&sql::authority_read("dpone", "authority", "k1").unwrap().to_string());
    expect![[r#"
        INSERT INTO `dpone`.`authority` (key, value) SETTINGS keeper_map_strict_mode = 1 SELECT {key:String}, {value:String}
          param key = k1
          param value = {"phase":"LOCKED"}
    "#]]
    .assert_eq(
        &sql::authority_insert("dpone", "authority", "k1", r#"{"phase":"LOCKED"}"#)
            .unwrap()
            .to_string(),
    );
    expect![[r#"
        ALTER TABLE `dpone`.`authority` UPDATE value = {value:String} WHERE key = {key:String} AND _version = {version:UInt64} SETTINGS keeper_map_strict_mode = 1
          param value = v
          param key = k1
          param version = 7
    "#]]
    .assert_eq(&sql::authority_update("dpone", "authority", "k1", 7, "v").unwrap().to_string());
}

#[test]
fn member_catalog() {
    expect![[r#"
        SELECT engine FROM system.databases WHERE name = {database:String}
          param database = db
    "#]]
    .assert_eq(&sql::database_engine("db").to_string());
    expect![[r#"
        SELECT engine_full FROM system.tables WHERE database = {database:String} AND name = {table:String} AND engine = 'KeeperMap'
          param database = dpone
          param table = authority
    "#]]
    .assert_eq(&sql::keeper_map_facade("dpone", "authority").to_string());
    expect![[r#"
        SELECT toUInt64(count()) AS n FROM system.functions WHERE name = 'formatRow'
    "#]]
    .assert_eq(&sql::rowset_function().to_string());
    expect![[r#"
        SELECT toString(uuid) AS uuid, engine FROM system.tables WHERE database = {database:String} AND name = {table:String}
          param database = db
          param table = t
    "#]]
    .assert_eq(&sql::table_info("db", "t").to_string());
    expect![[r#"
        SELECT name, type FROM system.columns WHERE database = {database:String} AND table = {table:String} ORDER BY position
          param database = db
          param table = t
    "#]]
    .assert_eq(&sql::table_columns("db", "t").to_string());
    expect![[r#"
        SELECT toUInt64(count()) AS n FROM `db`.`t`
    "#]]
    .assert_eq(&sql::table_count("db", "t").unwrap().to_string());
    expect![[r#"
        SELECT `id`, `name`, `amount`, `uid` FROM `db`.`t` ORDER BY `id` ASC NULLS FIRST, length(`name`) ASC NULLS FIRST, `name` ASC NULLS FIRST, `amount` ASC NULLS FIRST, toString(`uid`) ASC NULLS FIRST
    "#]]
    .assert_eq(&sql::read_rows("db", "t", &schema()).unwrap().to_string());
    expect![[r#"
        SELECT toUInt8(reinterpretAsUInt8(substring(h, 1, 1))) AS bucket, toUInt64(count()) AS rows, hex(SHA256(arrayStringConcat(arraySort(groupArray(h))))) AS digest FROM (SELECT substring(SHA256(formatRow('RowBinary', `db`.`t`.`id`, `db`.`t`.`name`, `db`.`t`.`amount`, `db`.`t`.`uid`)), 1, 32) AS h FROM `db`.`t`) GROUP BY bucket ORDER BY bucket
    "#]]
    .assert_eq(&sql::rowset_buckets("db", "t", &schema()).unwrap().to_string());
    let s = schema();
    let order = vec!["id".to_string()];
    let spec = CandidateSpec {
        database: "db",
        name: "t__dpone_ext_0123456789abcdef",
        uuid: Uuid::from_random([0x11; 16]),
        schema: &s,
        engine: "MergeTree",
        order_by: &order,
    };
    expect![[r#"
        CREATE TABLE `db`.`t__dpone_ext_0123456789abcdef` UUID '11111111-1111-4111-9111-111111111111' (`id` UInt64, `name` Nullable(String), `amount` Decimal(18, 2), `uid` UUID) ENGINE = MergeTree ORDER BY (`id`) SETTINGS non_replicated_deduplication_window = 1000
    "#]]
    .assert_eq(&sql::create_candidate(&spec).unwrap().to_string());
    expect![[r#"
        INSERT INTO `db`.`t__dpone_ext_0123456789abcdef` (`id`, `name`, `amount`, `uid`) FORMAT RowBinary
          setting query_id = dpone-load-g-m-0
          setting insert_deduplication_token = dpone-g-m
          setting insert_deduplicate = 1
          setting async_insert = 0
    "#]]
    .assert_eq(
        &sql::load(
            "db",
            "t__dpone_ext_0123456789abcdef",
            &s,
            &LoadTokens {
                query_id: "dpone-load-g-m-0".into(),
                dedup_token: "dpone-g-m".into(),
            },
        )
        .unwrap()
        .to_string(),
    );
    expect![[r#"
        DROP TABLE `db`.`t__dpone_ext_0123456789abcdef` SYNC
    "#]]
    .assert_eq(
        &sql::drop_candidate("db", "t__dpone_ext_0123456789abcdef")
            .unwrap()
            .to_string(),
    );
}

#[test]
fn cluster_ddl_and_queue() {
    let ex = ClusterStatement::Exchange {
        database: "db".into(),
        target: "t".into(),
        candidate: "t__dpone_ext_0123456789abcdef".into(),
    };
    expect![[r#"
        EXCHANGE TABLES `db`.`t` AND `db`.`t__dpone_ext_0123456789abcdef` ON CLUSTER `analytics_cluster`
          setting query_id = dpone-exchange-abababababababababababababababab
          setting log_comment = dpone-exchange-abababababababababababababababab
          setting distributed_ddl_output_mode = throw
          setting skip_unavailable_shards = 0
          setting distributed_ddl_task_timeout = 180
    "#]]
    .assert_eq(&sql::cluster_ddl("analytics_cluster", &ex, &corr(), 180).unwrap().to_string());
    let rn = ClusterStatement::Rename {
        database: "db".into(),
        candidate: "t__dpone_ext_0123456789abcdef".into(),
        target: "t".into(),
    };
    expect![[r#"
        RENAME TABLE `db`.`t__dpone_ext_0123456789abcdef` TO `db`.`t` ON CLUSTER `analytics_cluster`
          setting query_id = dpone-exchange-abababababababababababababababab
          setting log_comment = dpone-exchange-abababababababababababababababab
          setting distributed_ddl_output_mode = throw
          setting skip_unavailable_shards = 0
          setting distributed_ddl_task_timeout = 180
    "#]]
    .assert_eq(
        &sql::cluster_ddl("analytics_cluster", &rn, &corr(), 180)
            .unwrap()
            .to_string(),
    );
    let dr = ClusterStatement::Drop {
        database: "db".into(),
        name: "t__dpone_ext_0123456789abcdef".into(),
    };
    expect![[r#"
        DROP TABLE `db`.`t__dpone_ext_0123456789abcdef` ON CLUSTER `analytics_cluster` SYNC
          setting query_id = dpone-exchange-abababababababababababababababab
          setting log_comment = dpone-exchange-abababababababababababababababab
          setting distributed_ddl_output_mode = throw
          setting skip_unavailable_shards = 0
          setting distributed_ddl_task_timeout = 180
    "#]]
    .assert_eq(
        &sql::cluster_ddl("analytics_cluster", &dr, &corr(), 180)
            .unwrap()
            .to_string(),
    );
    expect![[r#"
        SELECT entry, ifNull(host, '') AS host, toUInt16(ifNull(port, 0)) AS port, ifNull(toString(status), '') AS status, toInt64(ifNull(exception_code, 0)) AS exception_code FROM system.distributed_ddl_queue WHERE cluster = {cluster:String} AND settings['log_comment'] = {correlation:String} ORDER BY entry, host, port
          param cluster = analytics_cluster
          param correlation = dpone-exchange-abababababababababababababababab
    "#]]
    .assert_eq(&sql::ddl_queue("analytics_cluster", "dpone-exchange-abababababababababababababababab").to_string());
}

#[test]
fn one_server_ddl_replica_sync_and_the_replicated_candidate() {
    let ex = ClusterStatement::Exchange {
        database: "db".into(),
        target: "t".into(),
        candidate: "t__dpone_ext_0123456789abcdef".into(),
    };
    expect![[r#"
        EXCHANGE TABLES `db`.`t` AND `db`.`t__dpone_ext_0123456789abcdef`
          setting query_id = dpone-exchange-abababababababababababababababab
          setting log_comment = dpone-exchange-abababababababababababababababab
    "#]]
    .assert_eq(&sql::local_ddl(&ex, &corr()).unwrap().to_string());
    let dr = ClusterStatement::Drop {
        database: "db".into(),
        name: "t__dpone_ext_0123456789abcdef".into(),
    };
    expect![[r#"
        DROP TABLE `db`.`t__dpone_ext_0123456789abcdef` SYNC
          setting query_id = dpone-exchange-abababababababababababababababab
          setting log_comment = dpone-exchange-abababababababababababababababab
    "#]]
    .assert_eq(&sql::local_ddl(&dr, &corr()).unwrap().to_string());
    expect![[r#"
        SELECT toUInt64(count()) AS n FROM system.processes WHERE query_id = {query_id:String}
          param query_id = dpone-exchange-abababababababababababababababab
    "#]]
    .assert_eq(&sql::running_query("dpone-exchange-abababababababababababababababab").to_string());
    expect![[r#"
        SYSTEM SYNC REPLICA `db`.`t__dpone_ext_0123456789abcdef`
          setting receive_timeout = 120
    "#]]
    .assert_eq(
        &sql::sync_replica("db", "t__dpone_ext_0123456789abcdef", 120)
            .unwrap()
            .to_string(),
    );
    let s = schema();
    let spec = CandidateSpec {
        database: "db",
        name: "c",
        uuid: Uuid::from_random([1; 16]),
        schema: &s,
        engine: "ReplicatedMergeTree",
        order_by: &[],
    };
    expect![[r#"
        CREATE TABLE `db`.`c` UUID '01010101-0101-4101-8101-010101010101' (`id` UInt64, `name` Nullable(String), `amount` Decimal(18, 2), `uid` UUID) ENGINE = ReplicatedMergeTree ORDER BY tuple()
    "#]]
    .assert_eq(&sql::create_candidate(&spec).unwrap().to_string());
}

#[test]
fn identifiers_are_quoted_and_bad_parts_refused() {
    assert_eq!(sql::ident("a`b\\c").unwrap(), "`a\\`b\\\\c`");
    assert_eq!(sql::ident(""), Err(SqlError::Identifier));
    assert_eq!(sql::ident("a\nb"), Err(SqlError::Identifier));
    // An injection attempt stays inside one quoted identifier.
    let s = sql::table_count("db", "t` ; DROP TABLE x; --").unwrap().sql;
    assert_eq!(
        s,
        "SELECT toUInt64(count()) AS n FROM `db`.`t\\` ; DROP TABLE x; --`"
    );
    let bad_type = Schema::of(&[("a", "Array(Int8)")]);
    assert_eq!(sql::read_rows("db", "t", &bad_type), Err(SqlError::Type(0)));
    assert_eq!(
        sql::rowset_buckets("db", "t", &bad_type),
        Err(SqlError::Type(0))
    );
    let s = schema();
    for engine in [
        "ReplicatedReplacingMergeTree",
        "Distributed",
        "MergeTree() ; DROP",
    ] {
        let spec = CandidateSpec {
            database: "db",
            name: "c",
            uuid: Uuid::from_random([1; 16]),
            schema: &s,
            engine,
            order_by: &[],
        };
        assert_eq!(
            sql::create_candidate(&spec),
            Err(SqlError::Engine),
            "{engine}"
        );
    }
    let spec = CandidateSpec {
        database: "db",
        name: "c",
        uuid: Uuid::from_random([1; 16]),
        schema: &bad_type,
        engine: "MergeTree",
        order_by: &[],
    };
    assert_eq!(sql::create_candidate(&spec), Err(SqlError::Type(0)));
}

#[test]
fn every_statement_is_well_formed() {
    // Balanced backticks, parentheses and braces; no trailing semicolons; no FORMAT on reads.
    let s = schema();
    let statements = vec![
        sql::inventory("c"),
        sql::authority_read("d", "t", "k").unwrap(),
        sql::authority_insert("d", "t", "k", "v").unwrap(),
        sql::authority_update("d", "t", "k", 1, "v").unwrap(),
        sql::database_engine("d"),
        sql::keeper_map_facade("d", "t"),
        sql::table_info("d", "t"),
        sql::table_columns("d", "t"),
        sql::table_count("d", "t").unwrap(),
        sql::read_rows("d", "t", &s).unwrap(),
        sql::rowset_buckets("d", "t", &s).unwrap(),
        sql::drop_candidate("d", "t").unwrap(),
        sql::ddl_queue("c", "q"),
        sql::ping(),
    ];
    for st in statements {
        let text = &st.sql;
        assert!(!text.trim_end().ends_with(';'), "{text}");
        assert_eq!(text.matches('`').count() % 2, 0, "{text}");
        assert_eq!(
            text.matches('(').count(),
            text.matches(')').count(),
            "{text}"
        );
        assert_eq!(
            text.matches('{').count(),
            text.matches('}').count(),
            "{text}"
        );
        for (name, _) in &st.params {
            assert!(
                text.contains(&format!("{{{name}:")),
                "param {name} bound in {text}"
            );
        }
    }
}
