//! Tier: unit. The manifest and registry parsers: the sample documents, the mapping to the
//! admission facts, the plan digest, and every refusal with its stable code.

use super::*;

const MANIFEST: &str = include_str!("../../../../../fixtures/clickhouse/manifest.yaml");
const REGISTRY: &str = include_str!("../../../../../fixtures/clickhouse/registry.yaml");
const BLOCKED: &str = include_str!("../../../../../fixtures/clickhouse/manifest-blocked.yaml");
const MALFORMED: &str = include_str!("../../../../../fixtures/clickhouse/manifest-malformed.yaml");

fn manifest_code(text: &str) -> &'static str {
    match Manifest::parse(text) {
        Err(e) => e.code(),
        Ok(m) => panic!("accepted: {m:?}"),
    }
}

fn registry_code(text: &str) -> &'static str {
    match Registry::parse(text) {
        Err(e) => e.code(),
        Ok(r) => panic!("accepted: {r:?}"),
    }
}

/// The sample manifest with `from` replaced by `to` (exactly once).
fn edit(from: &str, to: &str) -> String {
    assert_eq!(MANIFEST.matches(from).count(), 1, "{from:?} occurs once");
    MANIFEST.replacen(from, to, 1)
}

fn edit_registry(from: &str, to: &str) -> String {
    assert_eq!(REGISTRY.matches(from).count(), 1, "{from:?} occurs once");
    REGISTRY.replacen(from, to, 1)
}

#[test]
fn the_sample_manifest_parses_into_its_parts() {
    let m = Manifest::parse(MANIFEST).expect("sample parses");
    assert_eq!(m.name, "source_table_to_analytics");
    assert_eq!(m.source.connection_ref, "pg_source");
    assert_eq!(
        m.source.relation,
        Relation {
            schema: "public".into(),
            table: "source_table".into()
        }
    );
    let cols: Vec<(&str, &str)> = m
        .source
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.type_name.as_str()))
        .collect();
    assert_eq!(
        cols,
        [
            ("id", "UInt64"),
            ("metric_code", "String"),
            ("observed_on", "Date"),
            ("value", "Decimal(18, 4)"),
            ("note", "Nullable(String)"),
        ]
    );
    assert_eq!(m.target.database, "analytics");
    assert_eq!(m.target.table, "target_table");
    assert_eq!(m.clickhouse.order_by, ["id"]);
    assert_eq!(
        m.clickhouse.cluster.replication_mode.as_deref(),
        Some("external")
    );
    assert_eq!(m.schema().columns.len(), 5);
}

#[test]
fn static_facts_carry_the_manifest_values_unjudged() {
    let m = Manifest::parse(MANIFEST).expect("sample parses");
    assert_eq!(
        m.static_facts(),
        StaticFacts {
            cluster_name: "analytics_cluster".into(),
            ddl_scope: Some("cluster".into()),
            replication_mode: Some("external".into()),
            engine: "MergeTree".into(),
            max_source_bytes: Some(1_073_741_824),
            target_database: "analytics".into(),
            staging_database: "analytics".into(),
            access_table_engine: None,
        }
    );
    // What the policy judges is passed through as written.
    let b = Manifest::parse(BLOCKED).expect("the blocked sample parses");
    let f = b.static_facts();
    assert_eq!(f.engine, "ReplicatedMergeTree");
    assert_eq!(f.staging_database, "staging");
    assert_eq!(f.access_table_engine.as_deref(), Some("Distributed"));
}

#[test]
fn replication_mode_defaults_to_internal_by_absence_and_invalid_modes_reach_the_policy() {
    let m = Manifest::parse(&edit("        replication_mode: external\n", "")).expect("parses");
    assert_eq!(m.static_facts().replication_mode, None);
    let m = Manifest::parse(&edit(
        "replication_mode: external",
        "replication_mode: sideways",
    ))
    .expect("parses");
    assert_eq!(
        m.static_facts().replication_mode.as_deref(),
        Some("sideways")
    );
    let m = Manifest::parse(&edit("        ddl_scope: cluster\n", "")).expect("parses");
    assert_eq!(m.static_facts().ddl_scope, None);
    let m = Manifest::parse(&edit("      max_source_bytes: 1073741824\n", "")).expect("parses");
    assert_eq!(m.static_facts().max_source_bytes, None);
    let m = Manifest::parse(&edit(
        "max_source_bytes: 1073741824",
        "max_source_bytes: -5",
    ))
    .expect("parses");
    assert_eq!(m.static_facts().max_source_bytes, Some(-5));
}

#[test]
fn staging_database_defaults_to_the_target_database() {
    let m = Manifest::parse(&edit("      staging_database: analytics\n", "")).expect("parses");
    assert_eq!(m.clickhouse.staging_database, "analytics");
    let m = Manifest::parse(&edit("      order_by: [id]\n", "")).expect("parses");
    assert!(m.clickhouse.order_by.is_empty());
}

#[test]
fn the_plan_digest_is_deterministic_and_sees_every_published_field() {
    let base = Manifest::parse(MANIFEST).expect("parses");
    assert_eq!(
        base.plan_digest(),
        Manifest::parse(MANIFEST).expect("parses").plan_digest()
    );
    // The workload name is documentation only.
    let renamed = Manifest::parse(&edit(
        "name: source_table_to_analytics",
        "name: renamed_workload",
    ))
    .expect("parses");
    assert_eq!(base.plan_digest(), renamed.plan_digest());
    for (from, to) in [
        ("connection_ref: pg_source", "connection_ref: pg_other"),
        (
            "relation: public.source_table",
            "relation: public.other_table",
        ),
        ("type: Nullable(String)", "type: String"),
        ("table: target_table", "table: other_target"),
        ("engine: MergeTree", "engine: ReplacingMergeTree"),
        ("order_by: [id]", "order_by: [metric_code]"),
        (
            "max_source_bytes: 1073741824",
            "max_source_bytes: 1073741825",
        ),
        ("        replication_mode: external\n", ""),
        ("        ddl_scope: cluster\n", ""),
        ("name: analytics_cluster", "name: other_cluster"),
    ] {
        let changed = Manifest::parse(&edit(from, to)).expect("parses");
        assert_ne!(base.plan_digest(), changed.plan_digest(), "{from} -> {to}");
    }
}

#[test]
fn content_proof_chooses_the_proof_and_enters_the_plan_only_when_written() {
    let base = Manifest::parse(MANIFEST).expect("parses");
    assert_eq!(base.clickhouse.content_proof, None);
    // A plan without the field keeps the digest it had before the field existed, so an
    // operation an older host started keeps its id.
    assert_eq!(
        base.plan_digest().to_hex(),
        PLAN_DIGEST_WITHOUT_CONTENT_PROOF
    );
    let with = |proof: &str| {
        Manifest::parse(&edit(
            "      staging_database: analytics\n",
            &format!("      staging_database: analytics\n      content_proof: {proof}\n"),
        ))
    };
    let rowset = with("rowset").expect("parses");
    let canonical = with("canonical").expect("parses");
    assert_eq!(rowset.clickhouse.content_proof, Some(ContentProof::Rowset));
    assert_eq!(
        canonical.clickhouse.content_proof,
        Some(ContentProof::Canonical)
    );
    // Written, the choice is part of the plan: three distinct digests.
    let digests = [&base, &rowset, &canonical].map(|m| m.plan_digest());
    assert_ne!(digests[0], digests[1]);
    assert_ne!(digests[0], digests[2]);
    assert_ne!(digests[1], digests[2]);
    for bad in ["Rowset", "sum", "''", "1", "[rowset]"] {
        let code = match with(bad) {
            Err(e) => e.code(),
            Ok(m) => panic!("accepted {bad}: {m:?}"),
        };
        assert!(
            code == "DPONE_CLICKHOUSE_MANIFEST_FIELD_INVALID"
                || code == "DPONE_CLICKHOUSE_MANIFEST_FIELD_TYPE",
            "{bad}: {code}"
        );
    }
}

/// The sample manifest's plan digest as `dpone-host plan` printed it before `content_proof`
/// existed.
const PLAN_DIGEST_WITHOUT_CONTENT_PROOF: &str =
    "dd78f3b234ad7d298d59fe0ce3691410aa4b32e1cbbc7801f95d86388eb9a8ac";

#[test]
fn the_target_key_is_the_engine_identity() {
    let m = Manifest::parse(MANIFEST).expect("parses");
    assert_eq!(
        m.target_key(),
        crate::contracts::target_key("analytics_cluster", "analytics", "target_table")
    );
}

#[test]
fn strict_yaml_refusals_have_manifest_codes() {
    assert_eq!(
        manifest_code(MALFORMED),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_DUPLICATE_KEY"
    );
    assert_eq!(
        manifest_code(&format!("{MANIFEST}x: &a 1\ny: *a\n")),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_ALIAS"
    );
    assert_eq!(
        manifest_code(&edit("engine: MergeTree", "engine: !!str MergeTree")),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_TAG"
    );
    assert_eq!(
        manifest_code(&edit("ddl_scope: cluster", "ddl_scope: on")),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_AMBIGUOUS_SCALAR"
    );
    assert_eq!(
        manifest_code("a: [1\n"),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_SYNTAX"
    );
    assert_eq!(
        manifest_code(""),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_DOCUMENT_COUNT"
    );
    assert_eq!(
        manifest_code(&edit("name: source_table", "name: s\u{f6}urce_table")),
        "DPONE_CLICKHOUSE_MANIFEST_YAML_NON_ASCII"
    );
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    for (from, to) in [
        ("version: 1\n", "version: 1\nowner: team\n"),
        (
            "  relation: public.source_table\n",
            "  relation: public.source_table\n  filter: x\n",
        ),
        (
            "      type: UInt64\n",
            "      type: UInt64\n      codec: ZSTD\n",
        ),
        (
            "  table: target_table\n",
            "  table: target_table\n  schema: x\n",
        ),
        ("physical_design:\n", "physical_design:\n  indexes: []\n"),
        ("  storage:\n", "  storage:\n    postgres: {}\n"),
        (
            "      engine: MergeTree\n",
            "      engine: MergeTree\n      partition_by: id\n",
        ),
        (
            "        ddl_scope: cluster\n",
            "        ddl_scope: cluster\n        shards: 1\n",
        ),
    ] {
        assert_eq!(
            manifest_code(&edit(from, to)),
            "DPONE_CLICKHOUSE_MANIFEST_UNKNOWN_FIELD",
            "{to}"
        );
    }
    let e =
        Manifest::parse(&edit("version: 1\n", "version: 1\nowner: team\n")).expect_err("unknown");
    assert!(e.to_string().contains("\"owner\""), "{e}");
}

#[test]
fn missing_required_fields_are_refused() {
    for from in [
        "version: 1\n",
        "name: source_table_to_analytics\n",
        "  connection_ref: pg_source\n",
        "  relation: public.source_table\n",
        "  database: analytics\n",
        "      engine: MergeTree\n",
        "        name: analytics_cluster\n",
    ] {
        assert_eq!(
            manifest_code(&edit(from, "")),
            "DPONE_CLICKHOUSE_MANIFEST_MISSING_FIELD",
            "{from}"
        );
    }
}

#[test]
fn wrong_types_are_refused() {
    for (from, to) in [
        ("version: 1", "version: '1'"),
        (
            "max_source_bytes: 1073741824",
            "max_source_bytes: '1073741824'",
        ),
        ("max_source_bytes: 1073741824", "max_source_bytes: 10.5"),
        ("replication_mode: external", "replication_mode: true"),
        ("order_by: [id]", "order_by: id"),
        ("engine: MergeTree", "engine: [MergeTree]"),
        ("name: source_table_to_analytics", "name: 7"),
    ] {
        assert_eq!(
            manifest_code(&edit(from, to)),
            "DPONE_CLICKHOUSE_MANIFEST_FIELD_TYPE",
            "{to}"
        );
    }
}

#[test]
fn invalid_values_are_refused() {
    for (from, to) in [
        ("relation: public.source_table", "relation: source_table"),
        (
            "relation: public.source_table",
            "relation: public.source.table",
        ),
        ("  database: analytics\n", "  database: 'analytics; DROP'\n"),
        ("table: target_table", "table: ''"),
        ("name: analytics_cluster", "name: ''"),
        ("order_by: [id]", "order_by: [missing_column]"),
        ("order_by: [id]", "order_by: [id, id]"),
        ("    - name: metric_code\n", "    - name: id\n"),
        ("type: Decimal(18, 4)", "type: Decimal(18, 4"),
        ("staging_database: analytics", "staging_database: ''"),
    ] {
        assert_eq!(
            manifest_code(&edit(from, to)),
            "DPONE_CLICKHOUSE_MANIFEST_FIELD_INVALID",
            "{to}"
        );
    }
    let no_columns = edit(
        "  columns:\n    - name: id\n      type: UInt64\n    - name: metric_code\n      type: String\n    - name: observed_on\n      type: Date\n    - name: value\n      type: Decimal(18, 4)\n    - name: note\n      type: Nullable(String)\n",
        "  columns: []\n",
    );
    assert_eq!(
        manifest_code(&no_columns),
        "DPONE_CLICKHOUSE_MANIFEST_FIELD_INVALID"
    );
    assert_eq!(
        manifest_code(&edit("version: 1", "version: 2")),
        "DPONE_CLICKHOUSE_MANIFEST_VERSION_UNSUPPORTED"
    );
}

#[test]
fn column_types_must_use_the_reported_spelling() {
    let e = Manifest::parse(&edit("type: Decimal(18, 4)", "type: Decimal(18,4)"))
        .expect_err("spelling");
    assert_eq!(e.code(), "DPONE_CLICKHOUSE_MANIFEST_COLUMN_TYPE_SPELLING");
    assert!(e.to_string().contains("Decimal(18, 4)"), "{e}");
    let e =
        Manifest::parse(&edit("type: Decimal(18, 4)", "type: Decimal64(4)")).expect_err("alias");
    assert!(e.to_string().contains("Decimal(18, 4)"), "{e}");
}

#[test]
fn reported_spelling_normalizes_spacing_and_decimal_aliases() {
    for (written, reported) in [
        ("UInt64", "UInt64"),
        ("Nullable( String )", "Nullable(String)"),
        ("Decimal(18,4)", "Decimal(18, 4)"),
        ("Decimal32(2)", "Decimal(9, 2)"),
        ("Nullable(Decimal128(10))", "Nullable(Decimal(38, 10))"),
        ("DateTime64(3,'UTC')", "DateTime64(3, 'UTC')"),
        ("Enum8('a'=1,'b, c'=-2)", "Enum8('b, c' = -2, 'a' = 1)"),
        // The server sorts enum elements by value (checked on the real engine).
        (
            "Enum16('x' = 300, 'y' = -300)",
            "Enum16('y' = -300, 'x' = 300)",
        ),
        (
            "Nullable(Enum8('b' = 2, 'a' = 1))",
            "Nullable(Enum8('a' = 1, 'b' = 2))",
        ),
        (
            "LowCardinality(Nullable(String))",
            "LowCardinality(Nullable(String))",
        ),
        ("Tuple(a Int8, b String)", "Tuple(a Int8, b String)"),
    ] {
        assert_eq!(
            reported_type_spelling(written).as_deref(),
            Some(reported),
            "{written}"
        );
    }
    for bad in [
        "",
        "Nullable(String",
        "String)",
        "A(B)C",
        "Enum8('a)",
        "Int8;",
        "x\u{7}",
    ] {
        assert_eq!(reported_type_spelling(bad), None, "{bad:?}");
    }
}

#[test]
fn the_sample_registry_parses() {
    let r = Registry::parse(REGISTRY).expect("sample registry parses");
    let ch = r
        .clickhouse("analytics_ch", "target.connection_ref")
        .expect("clickhouse");
    assert_eq!(ch.member_urls.len(), 2);
    assert_eq!(
        ch.member_urls.get(&(1, 2)).map(|e| e.url.as_str()),
        Some("http://ch-2.analytics.internal:8123")
    );
    assert!(ch.insecure_plaintext);
    let tls = r
        .clickhouse("analytics_ch_tls", "target.connection_ref")
        .expect("clickhouse over TLS");
    assert!(!tls.insecure_plaintext);
    assert!(tls.coordinator_url.is_tls());
    let pin = Some("/etc/dpone/clickhouse-ca.pem".to_owned());
    assert_eq!(tls.sslrootcert, pin);
    assert_eq!(tls.coordinator_url.sslrootcert, pin);
    assert!(
        tls.member_urls
            .values()
            .all(|e| e.is_tls() && e.sslrootcert == pin)
    );
    assert_eq!(ch.password_env, "DPONE_CLICKHOUSE_PASSWORD");
    assert_eq!(ch.authority_table, "publication_authority");
    assert_eq!(ch.ddl_task_timeout_secs, 180);
    let pg = r
        .postgres("pg_source", "source.connection_ref")
        .expect("postgres");
    assert_eq!(pg.port, 5432);
    assert_eq!(pg.password_env.as_deref(), Some("DPONE_PG_SOURCE_PASSWORD"));
}

#[test]
fn registry_lookups_check_presence_and_kind() {
    let r = Registry::parse(REGISTRY).expect("parses");
    let code = |e: ManifestError| e.code();
    assert_eq!(
        r.clickhouse("nowhere", "target.connection_ref")
            .map_err(code)
            .err(),
        Some("DPONE_CLICKHOUSE_REGISTRY_CONNECTION_UNKNOWN")
    );
    assert_eq!(
        r.clickhouse("pg_source", "target.connection_ref")
            .map_err(code)
            .err(),
        Some("DPONE_CLICKHOUSE_REGISTRY_CONNECTION_KIND")
    );
    assert_eq!(
        r.postgres("analytics_ch", "source.connection_ref")
            .map_err(code)
            .err(),
        Some("DPONE_CLICKHOUSE_REGISTRY_CONNECTION_KIND")
    );
}

#[test]
fn credentials_come_only_from_the_named_variable_and_never_show() {
    let s = Registry::password("DPONE_X", |n| {
        (n == "DPONE_X").then(|| "hunter2".to_owned())
    })
    .expect("set");
    assert_eq!(s.expose(), "hunter2");
    assert!(!format!("{s:?} {s}").contains("hunter2"));
    let e = Registry::password("DPONE_UNSET", |_| None).expect_err("unset");
    assert_eq!(e.code(), "DPONE_CLICKHOUSE_REGISTRY_CREDENTIAL_MISSING");
}

#[test]
fn registry_refusals_have_registry_codes() {
    for (from, to, code) in [
        (
            "    password_env: DPONE_CLICKHOUSE_PASSWORD\n",
            "    password_env: DPONE_CLICKHOUSE_PASSWORD\n    password: hunter2\n",
            "DPONE_CLICKHOUSE_REGISTRY_UNKNOWN_FIELD",
        ),
        (
            "    password_env: DPONE_CLICKHOUSE_PASSWORD\n",
            "",
            "DPONE_CLICKHOUSE_REGISTRY_MISSING_FIELD",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: http://user:hunter2@ch-1:8123",
            "DPONE_CLICKHOUSE_REGISTRY_URL_INVALID",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: https://user@ch-1:8443",
            "DPONE_CLICKHOUSE_REGISTRY_URL_INVALID",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: httpx://ch-1:8443",
            "DPONE_CLICKHOUSE_REGISTRY_URL_INVALID",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: http://ch-1:8123/path?q=1",
            "DPONE_CLICKHOUSE_REGISTRY_URL_INVALID",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: http://ch-1:0",
            "DPONE_CLICKHOUSE_REGISTRY_URL_INVALID",
        ),
        (
            "{shard_num: 1, replica_num: 2, url",
            "{shard_num: 1, replica_num: 1, url",
            "DPONE_CLICKHOUSE_REGISTRY_DUPLICATE_MEMBER",
        ),
        (
            "{shard_num: 1, replica_num: 2, url",
            "{shard_num: 0, replica_num: 2, url",
            "DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID",
        ),
        (
            "kind: postgres_source",
            "kind: mysql_source",
            "DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID",
        ),
        (
            "password_env: DPONE_PG_SOURCE_PASSWORD",
            "password_env: 'not a variable'",
            "DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID",
        ),
        (
            "ddl_task_timeout_secs: 180",
            "ddl_task_timeout_secs: 0",
            "DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID",
        ),
        (
            "port: 5432",
            "port: '5432'",
            "DPONE_CLICKHOUSE_REGISTRY_FIELD_TYPE",
        ),
        (
            "version: 1",
            "version: 3",
            "DPONE_CLICKHOUSE_REGISTRY_VERSION_UNSUPPORTED",
        ),
        (
            "  pg_source:\n",
            "  pg_source:\n    kind: postgres_source\n",
            "DPONE_CLICKHOUSE_REGISTRY_YAML_DUPLICATE_KEY",
        ),
    ] {
        assert_eq!(registry_code(&edit_registry(from, to)), code, "{to}");
    }
}

#[test]
fn registry_errors_never_echo_endpoints_or_secrets() {
    for (from, to) in [
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: http://user:hunter2@ch-1:8123",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: http://ch-1:8123/secret-path",
        ),
        (
            "coordinator_url: http://ch-1.analytics.internal:8123",
            "coordinator_url: ftp://ch-1:21",
        ),
    ] {
        let e = Registry::parse(&edit_registry(from, to)).expect_err("refused");
        let text = e.to_string();
        assert!(!text.contains("ch-1"), "{text}");
        assert!(
            !text.contains("hunter2") && !text.contains("secret-path"),
            "{text}"
        );
    }
}

#[test]
fn postgres_source_tls_options() {
    let ep = "endpoint: {host: '127.0.0.1', port: 5432, database: shop, user: dpone_reader}";
    let parse = |endpoint: &str| Registry::parse(&edit_registry(ep, endpoint));
    let pg = |r: &Registry| {
        r.postgres("pg_source", "source.connection_ref")
            .expect("postgres")
            .clone()
    };
    // A TCP host defaults to verify-full; a socket directory to disable.
    assert_eq!(
        pg(&Registry::parse(REGISTRY).expect("sample")).effective_sslmode(),
        PgSslMode::VerifyFull
    );
    let r = parse("endpoint: {host: /var/run/postgresql, port: 5432, database: shop, user: r}")
        .expect("socket");
    assert_eq!(pg(&r).effective_sslmode(), PgSslMode::Disable);
    let r = parse(
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: r, sslmode: verify-ca, sslrootcert: /etc/dpone/ca.pem}",
    )
    .expect("verify-ca");
    assert_eq!(pg(&r).sslmode, Some(PgSslMode::VerifyCa));
    assert_eq!(pg(&r).sslrootcert.as_deref(), Some("/etc/dpone/ca.pem"));
    for bad in [
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: r, sslmode: prefer}",
        "endpoint: {host: /var/run/postgresql, port: 5432, database: shop, user: r, sslmode: require}",
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: r, sslmode: require, sslrootcert: /etc/ca.pem}",
        "endpoint: {host: db.example.com, port: 5432, database: shop, user: r, sslrootcert: ca.pem}",
    ] {
        assert_eq!(
            parse(bad).map(|_| ()).map_err(|e| e.code()),
            Err("DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID"),
            "{bad}"
        );
    }
}

/// The sample's plaintext connection without its opt-out, with `from` replaced by `to`.
fn plaintext_registry(from: &str, to: &str) -> String {
    edit_registry("    insecure_plaintext: true\n", "").replacen(from, to, 1)
}

#[test]
fn https_urls_are_accepted_with_or_without_a_pinned_ca() {
    let text = plaintext_registry("", "")
        .replace(
            "http://ch-1.analytics.internal:8123",
            "https://ch-1.analytics.internal",
        )
        .replace(
            "http://ch-2.analytics.internal:8123",
            "'https://[fd00::2]:8443/'",
        );
    let r = Registry::parse(&text).expect("https accepted");
    let ch = r
        .clickhouse("analytics_ch", "target.connection_ref")
        .expect("clickhouse");
    assert!(!ch.insecure_plaintext);
    assert_eq!(ch.sslrootcert, None);
    assert!(ch.coordinator_url.is_tls() && ch.coordinator_url.sslrootcert.is_none());
    assert_eq!(
        ch.member_urls.get(&(1, 2)).map(|e| e.url.as_str()),
        Some("https://[fd00::2]:8443/")
    );
}

#[test]
fn plain_http_with_the_credential_goes_to_loopback_only_unless_the_registry_says_so() {
    let code = |text: &str| Registry::parse(text).map(|_| ()).map_err(|e| e.code());
    let refused = Err("DPONE_CLICKHOUSE_REGISTRY_PLAINTEXT_CREDENTIAL");
    // The sample without its opt-out: the coordinator and both members are remote.
    assert_eq!(code(&plaintext_registry("", "")), refused);
    // Only one remote member is enough.
    let one_remote = plaintext_registry("", "").replace(
        "http://ch-1.analytics.internal:8123",
        "http://127.0.0.1:8123",
    );
    assert_eq!(code(&one_remote), refused);
    let e = Registry::parse(&one_remote).expect_err("refused");
    let text = e.to_string();
    assert!(text.contains("members[1].url"), "{text}");
    assert!(!text.contains("ch-2") && !text.contains("8123"), "{text}");
    // Loopback in every form keeps working without TLS (the test tier).
    for loopback in [
        "127.0.0.1:18123",
        "127.1.2.3",
        "localhost:8123",
        "LOCALHOST",
        "[::1]:8123",
    ] {
        let text = plaintext_registry("", "")
            .replace(
                "http://ch-1.analytics.internal:8123",
                &format!("'http://{loopback}'"),
            )
            .replace(
                "http://ch-2.analytics.internal:8123",
                &format!("'http://{loopback}'"),
            );
        assert_eq!(code(&text), Ok(()), "{loopback}");
    }
    // Names that only look local are remote; no name is resolved.
    for remote in [
        "127.0.0.1.nip.io",
        "localhost.example",
        "[::2]",
        "0.0.0.0",
        "10.0.0.1",
    ] {
        let text = plaintext_registry("", "")
            .replace(
                "http://ch-1.analytics.internal:8123",
                &format!("'http://{remote}'"),
            )
            .replace("ch-2.analytics.internal:8123", "127.0.0.1");
        assert_eq!(code(&text), refused, "{remote}");
    }
    // Mixed: https to the remote hosts, http to loopback.
    let mixed = plaintext_registry("", "")
        .replace(
            "http://ch-1.analytics.internal:8123",
            "http://127.0.0.1:8123",
        )
        .replace(
            "http://ch-2.analytics.internal:8123",
            "https://ch-2.analytics.internal",
        );
    assert_eq!(code(&mixed), Ok(()));
    // The explicit opt-out (the sample) accepts it; a non-boolean is a type error.
    assert_eq!(code(REGISTRY), Ok(()));
    assert_eq!(
        code(&edit_registry(
            "insecure_plaintext: true",
            "insecure_plaintext: 'yes'"
        )),
        Err("DPONE_CLICKHOUSE_REGISTRY_FIELD_TYPE")
    );
    assert_eq!(
        code(&edit_registry(
            "insecure_plaintext: true",
            "insecure_plaintext: false"
        )),
        refused
    );
}

#[test]
fn the_pinned_ca_of_a_clickhouse_connection_is_an_absolute_path_used_with_https() {
    let code = |text: &str| Registry::parse(text).map(|_| ()).map_err(|e| e.code());
    let pin = "    sslrootcert: /etc/dpone/clickhouse-ca.pem    # optional pinned CA; absent: system roots\n";
    let with_ca = |ca: &str| edit_registry(pin, &format!("    sslrootcert: {ca}\n"));
    assert_eq!(code(&with_ca("/etc/ca.pem")), Ok(()));
    for bad in ["ca.pem", "'./ca.pem'", "''"] {
        let text = with_ca(bad);
        assert_eq!(
            code(&text),
            Err("DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID"),
            "{bad}"
        );
    }
    assert_eq!(
        code(&with_ca("[/etc/ca.pem]")),
        Err("DPONE_CLICKHOUSE_REGISTRY_FIELD_TYPE")
    );
    // A pin with no https:// URL to use it for is a mistake, not a no-op.
    let plaintext_pinned = edit_registry(
        "    insecure_plaintext: true\n",
        "    insecure_plaintext: true\n    sslrootcert: /etc/ca.pem\n",
    );
    let e = Registry::parse(&plaintext_pinned).expect_err("pin without https");
    assert_eq!(e.code(), "DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID");
    assert!(e.to_string().contains("sslrootcert"), "{e}");
    let long = format!("/{}", "a".repeat(4096));
    assert_eq!(
        code(&with_ca(&long)),
        Err("DPONE_CLICKHOUSE_REGISTRY_FIELD_INVALID")
    );
}

#[test]
fn a_manifest_without_a_cluster_block_is_one_server() {
    // Tier: unit.
    let text = edit(
        "      cluster:\n        name: analytics_cluster\n        ddl_scope: cluster\n        replication_mode: external\n",
        "",
    );
    let m = Manifest::parse(&text).expect("one server parses");
    assert!(m.clickhouse.cluster.is_local());
    let f = m.static_facts();
    assert_eq!(f.cluster_name, "");
    assert_eq!(f.ddl_scope.as_deref(), Some("local"));
    assert_eq!(f.replication_mode, None);
    // Its own slot and plan: never the cluster's.
    let clustered = Manifest::parse(MANIFEST).expect("sample");
    assert_ne!(m.target_key(), clustered.target_key());
    assert_ne!(m.plan_digest(), clustered.plan_digest());
    // A cluster block still needs its name.
    assert_eq!(
        manifest_code(&edit("        name: analytics_cluster\n", "")),
        "DPONE_CLICKHOUSE_MANIFEST_MISSING_FIELD"
    );
}

#[test]
fn a_clickhouse_server_connection_is_one_server_and_only_for_one_server() {
    // Tier: unit.
    let text = "version: 1\nconnections:\n  one:\n    kind: clickhouse_server\n    url: https://ch-1.analytics.internal:8443\n    sslrootcert: /etc/dpone/ch-ca.pem\n    user: dpone_publisher\n    password_env: DPONE_CLICKHOUSE_PASSWORD\n    authority: {database: dpone, table: publication_authority}\n  pg:\n    kind: postgres_source\n    endpoint: {host: pg.internal, port: 5432, database: app, user: reader}\n";
    let r = Registry::parse(text).expect("parses");
    let c = r
        .clickhouse_for("one", "target.connection_ref", true)
        .expect("server");
    assert!(c.single_server);
    assert_eq!(c.member_urls.len(), 1);
    assert_eq!(c.member_urls[&(1, 1)], c.coordinator_url);
    assert_eq!(
        c.coordinator_url.sslrootcert.as_deref(),
        Some("/etc/dpone/ch-ca.pem")
    );
    // A cluster manifest may not name it, nor a one-server manifest a cluster connection.
    let e = r
        .clickhouse("one", "target.connection_ref")
        .expect_err("kind");
    assert_eq!(e.code(), "DPONE_CLICKHOUSE_REGISTRY_CONNECTION_KIND");
    let cluster = Registry::parse(REGISTRY).expect("sample");
    let e = cluster
        .clickhouse_for("analytics_ch", "target.connection_ref", true)
        .expect_err("kind");
    assert_eq!(e.code(), "DPONE_CLICKHOUSE_REGISTRY_CONNECTION_KIND");
    // Cluster-only fields are refused on one server; plain http to a remote host too.
    for (from, to, code) in [
        (
            "    user: dpone_publisher\n",
            "    user: dpone_publisher\n    members: []\n",
            "DPONE_CLICKHOUSE_REGISTRY_UNKNOWN_FIELD",
        ),
        (
            "    user: dpone_publisher\n",
            "    user: dpone_publisher\n    ddl_task_timeout_secs: 10\n",
            "DPONE_CLICKHOUSE_REGISTRY_UNKNOWN_FIELD",
        ),
        (
            "    url: https://ch-1.analytics.internal:8443\n    sslrootcert: /etc/dpone/ch-ca.pem\n",
            "    url: http://ch-1.analytics.internal:8123\n",
            "DPONE_CLICKHOUSE_REGISTRY_PLAINTEXT_CREDENTIAL",
        ),
    ] {
        assert_eq!(registry_code(&text.replacen(from, to, 1)), code, "{to}");
    }
}
