//! Tier: real PostgreSQL integration. Extracts relations from a live server into the artifact
//! store and checks the sealed artifact against the engine's canonical content digest of the
//! same rows, encoded independently here; plus every refusal with its stable code.
//!
//! The server URL comes from `DPONE_TEST_PG_URL`, or from the env file `.ci/start-postgres`
//! writes (`target/dpone-test-pg.env`). Each test creates and drops its own database. Without
//! either, the server tests are ignored with their SKIP reason (`cfg(dpone_live_pg)`, set by
//! `build.rs`); with either, a server that cannot be used fails them.

use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

use dpone_adapter_clickhouse::StoreArtifactSource;
use dpone_adapter_postgres_rowbinary::{
    MIN_COPY_BYTES, PgConfig, PgRowBinarySource, SourceBound, SourceMeasurement, check_declared,
    pg_config,
};
use dpone_artifact_store::ArtifactStore;
use dpone_engine_clickhouse::canonical::{RowBinaryWriter, Value, column_types, content_digest};
use dpone_engine_clickhouse::contracts::{Digest, Schema, schema_digest};
use dpone_engine_clickhouse::ports::{ArtifactSource, PortErrorKind};
use tokio_postgres::NoTls;

const BUDGET: u64 = 1 << 28;

fn server_url() -> Option<String> {
    if let Ok(u) = std::env::var("DPONE_TEST_PG_URL")
        && !u.is_empty()
    {
        return Some(u);
    }
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("export DPONE_TEST_PG_URL=")
            .map(str::to_owned)
    })
}

/// Server tests run only when a server is configured: one that cannot be used fails them.
fn skip(reason: &str) -> ! {
    panic!("PostgreSQL test server configured but not usable: {reason}");
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

async fn exec(cfg: &PgConfig, sql: &str) -> Result<(), tokio_postgres::Error> {
    let (client, conn) = cfg.connect(NoTls).await?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let r = client.batch_execute(sql).await;
    drop(client);
    driver.abort();
    r
}

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A database of its own, dropped (with FORCE) at the end of the test.
struct TestDb {
    admin: PgConfig,
    name: String,
}

impl TestDb {
    fn create(setup: &str) -> Option<Self> {
        let Some(url) = server_url() else {
            skip("no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres");
        };
        let Ok(mut admin) = PgConfig::from_str(&url) else {
            skip("DPONE_TEST_PG_URL is not a valid connection URL");
        };
        admin.dbname("postgres");
        let name = format!(
            "dpone_t_chsrc_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        if let Err(e) = rt().block_on(exec(&admin, &format!("CREATE DATABASE \"{name}\""))) {
            skip(&format!(
                "PostgreSQL server in DPONE_TEST_PG_URL is not usable (SQLSTATE {:?})",
                e.code().map(|c| c.code().to_owned())
            ));
        }
        let db = Self { admin, name };
        rt().block_on(exec(&db.config(), setup))
            .expect("set-up SQL");
        Some(db)
    }

    fn config(&self) -> PgConfig {
        let mut c = self.admin.clone();
        c.dbname(&self.name);
        c
    }

    fn source(&self, table: &str) -> PgRowBinarySource {
        PgRowBinarySource::new(self.config(), "public", table)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let _ = rt().block_on(exec(&self.admin, &sql));
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn micros(y: i64, mo: i64, d: i64, h: i64, mi: i64, s: i64, us: i64) -> i128 {
    i128::from(((days(y, mo, d) * 24 + h) * 60 + mi) * 60 + s) * 1_000_000 + i128::from(us)
}

fn digest(schema: &Schema, bytes: &[u8]) -> (Digest, u64) {
    let s = content_digest(schema, bytes, BUDGET).expect("digest");
    (s.digest, s.row_count)
}

const TYPES_SQL: &str = "
CREATE TABLE public.src (
  id bigint NOT NULL, code text NOT NULL, day date NOT NULL, amount numeric(18,4),
  note varchar(40), at timestamptz NOT NULL, local_at timestamp NOT NULL,
  ratio double precision NOT NULL, small real NOT NULL, uid uuid NOT NULL, flag boolean NOT NULL,
  tiny smallint NOT NULL, addr inet NOT NULL, addr6 inet NOT NULL, blob bytea NOT NULL,
  doc json
);
INSERT INTO public.src VALUES
 (1, 'alpha', '1969-12-31', 12345.6789, 'first', '2024-02-29 12:34:56.123456+00',
  '2024-02-29 12:34:56.789', 1.5, 0.25, '00112233-4455-6677-8899-aabbccddeeff', true, 7,
  '10.0.0.1', '::1', '\\x01020304', '{}'),
 (-2, '', '2149-06-06', -0.0001, NULL, '1900-01-01 00:00:00+00', '1970-01-01 00:00:00', -0.0,
  3.5, 'ffffffff-0000-0000-0000-000000000001', false, 255, '192.168.1.254', 'fe80::1',
  '\\xff', NULL),
 (9223372036854775807, 'caf\u{e9} \u{2603}', '2000-01-01', NULL, 'n',
  '2000-01-01 00:00:00.000001+00', '2000-01-01 00:00:00.001', 1e300, -1e-10, '01234567-89ab-cdef-0123-456789abcdef',
  true, 0, '0.0.0.0', '2001:db8::ff', '\\x', NULL);
";

fn types_schema() -> Schema {
    Schema::of(&[
        ("id", "Int64"),
        ("code", "String"),
        ("day", "Date32"),
        ("amount", "Nullable(Decimal(18, 4))"),
        ("note", "Nullable(String)"),
        ("at", "DateTime64(6, 'UTC')"),
        ("local_at", "DateTime64(3)"),
        ("ratio", "Float64"),
        ("small", "Float32"),
        ("uid", "UUID"),
        ("flag", "Bool"),
        ("tiny", "UInt8"),
        ("addr", "IPv4"),
        ("addr6", "IPv6"),
        ("blob", "FixedString(4)"),
    ])
}

fn uuid(hex: &str) -> [u8; 16] {
    let h: String = hex.chars().filter(|c| *c != '-').collect();
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&h[2 * i..2 * i + 2], 16).expect("hex");
    }
    out
}

fn ipv6(last: &[(usize, u8)], prefix: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..prefix.len()].copy_from_slice(prefix);
    for (i, b) in last {
        out[*i] = *b;
    }
    out
}

/// The rows of `TYPES_SQL`, encoded here from their literals.
fn expected_types_rows() -> Vec<u8> {
    let schema = types_schema();
    let mut w = RowBinaryWriter::new(column_types(&schema).expect("profile"));
    let rows: Vec<Vec<Value>> = vec![
        vec![
            Value::Int(1),
            Value::Bytes(b"alpha".to_vec()),
            Value::Int(-1),
            Value::Int(123_456_789),
            Value::Bytes(b"first".to_vec()),
            Value::Int(micros(2024, 2, 29, 12, 34, 56, 123_456)),
            Value::Int(micros(2024, 2, 29, 12, 34, 56, 789_000) / 1000),
            Value::Float(1.5),
            Value::Float(0.25),
            Value::Raw16(uuid("00112233-4455-6677-8899-aabbccddeeff")),
            Value::Bool(true),
            Value::UInt(7),
            Value::UInt(0x0a00_0001),
            Value::Raw16(ipv6(&[(15, 1)], &[])),
            Value::Bytes(vec![1, 2, 3, 4]),
        ],
        vec![
            Value::Int(-2),
            Value::Bytes(Vec::new()),
            Value::Int(i128::from(days(2149, 6, 6))),
            Value::Int(-1),
            Value::Null,
            Value::Int(micros(1900, 1, 1, 0, 0, 0, 0)),
            Value::Int(0),
            Value::Float(-0.0),
            Value::Float(3.5),
            Value::Raw16(uuid("ffffffff-0000-0000-0000-000000000001")),
            Value::Bool(false),
            Value::UInt(255),
            Value::UInt(0xc0a8_01fe),
            Value::Raw16(ipv6(&[(15, 1)], &[0xfe, 0x80])),
            Value::Bytes(vec![0xff]),
        ],
        vec![
            Value::Int(i128::from(i64::MAX)),
            Value::Bytes("caf\u{e9} \u{2603}".as_bytes().to_vec()),
            Value::Int(i128::from(days(2000, 1, 1))),
            Value::Null,
            Value::Bytes(b"n".to_vec()),
            Value::Int(micros(2000, 1, 1, 0, 0, 0, 1)),
            Value::Int(micros(2000, 1, 1, 0, 0, 0, 1_000) / 1000),
            Value::Float(1e300),
            Value::Float(f64::from(-1e-10f32)),
            Value::Raw16(uuid("01234567-89ab-cdef-0123-456789abcdef")),
            Value::Bool(true),
            Value::UInt(0),
            Value::UInt(0),
            Value::Raw16(ipv6(&[(15, 0xff)], &[0x20, 0x01, 0x0d, 0xb8])),
            Value::Bytes(Vec::new()),
        ],
    ];
    for r in &rows {
        w.row(r).expect("expected row fits");
    }
    w.finish()
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn every_supported_type_round_trips_to_the_engines_canonical_digest() {
    let Some(db) = TestDb::create(TYPES_SQL) else {
        return;
    };
    let schema = types_schema();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = db.source("src");
    let identity = StoreArtifactSource::new(&store, &source)
        .seal(&schema, 1 << 20)
        .expect("sealed");
    assert_eq!(identity.row_count, 3);
    assert_eq!(identity.schema_digest, schema_digest(&schema));

    let mut bytes = Vec::new();
    std::io::Read::read_to_end(
        &mut store
            .open(&store.reopen(&identity.sha256.0).expect("reopen"))
            .expect("open"),
        &mut bytes,
    )
    .expect("read");
    assert_eq!(bytes.len() as u64, identity.byte_size);
    assert_eq!(Digest::of(&bytes), identity.sha256);

    let expected = expected_types_rows();
    assert_eq!(digest(&schema, &bytes), digest(&schema, &expected));
    // Equal digests, not merely equal counts: the artifact holds exactly these rows.
    assert_eq!(bytes.len(), expected.len());
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn a_large_relation_streams_in_blocks_and_a_fresh_store_reopens_it() {
    const N: i64 = 60_000;
    let setup = format!(
        "CREATE TABLE public.big AS
           SELECT i::bigint AS id, 'row-' || i AS label, (i * 1.25)::numeric(12,2) AS amount,
                  CASE WHEN i % 3 = 0 THEN NULL ELSE repeat('x', (i % 50)::int) END AS pad
             FROM generate_series(1, {N}) AS i;"
    );
    let Some(db) = TestDb::create(&setup) else {
        return;
    };
    let schema = Schema::of(&[
        ("id", "UInt64"),
        ("label", "String"),
        ("amount", "Decimal(12, 2)"),
        ("pad", "Nullable(String)"),
    ]);
    let dir = tempfile::tempdir().expect("tempdir");
    let identity = {
        let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
        let source = db.source("big");
        StoreArtifactSource::new(&store, &source)
            .seal(&schema, 1 << 30)
            .expect("sealed")
    };
    assert_eq!(identity.row_count, N as u64);
    assert!(identity.byte_size > 1 << 20, "more than one block");

    let mut w = RowBinaryWriter::new(column_types(&schema).expect("profile"));
    for i in 1..=N {
        w.row(&[
            Value::UInt(i as u128),
            Value::Bytes(format!("row-{i}").into_bytes()),
            Value::Int(i128::from(i) * 125),
            if i % 3 == 0 {
                Value::Null
            } else {
                Value::Bytes(vec![b'x'; (i % 50) as usize])
            },
        ])
        .expect("fits");
    }
    let expected = w.finish();

    // A fresh store over the same directory reopens and revalidates the artifact by identity.
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("reopened store");
    let receipt = store.reopen(&identity.sha256.0).expect("reopen");
    store.revalidate(&receipt).expect("revalidates");
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut store.open(&receipt).expect("open"), &mut bytes).expect("read");
    assert_eq!(digest(&schema, &bytes), digest(&schema, &expected));
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn an_empty_relation_is_a_valid_artifact() {
    let Some(db) = TestDb::create("CREATE TABLE public.empty (id integer NOT NULL);") else {
        return;
    };
    let schema = Schema::of(&[("id", "Int32")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 20).expect("store");
    let source = db.source("empty");
    let identity = StoreArtifactSource::new(&store, &source)
        .seal(&schema, 1 << 20)
        .expect("sealed");
    assert_eq!((identity.row_count, identity.byte_size), (0, 0));
    assert_eq!(digest(&schema, &[]).1, 0);
}

fn objects(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join("objects"))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn the_byte_bound_stops_the_extraction_and_seals_nothing() {
    let Some(db) = TestDb::create(
        "CREATE TABLE public.big AS SELECT i::bigint AS id FROM generate_series(1, 100000) AS i;",
    ) else {
        return;
    };
    let schema = Schema::of(&[("id", "Int64")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = db.source("big");
    let e = StoreArtifactSource::new(&store, &source)
        .seal(&schema, 4096)
        .expect_err("too large");
    assert_eq!(e.class, "DPONE_ARTIFACT_TOO_LARGE");
    assert_eq!(objects(dir.path()), 0);
}

/// Extraction into a plain buffer: the code of the failure and how many bytes reached the sink.
fn refused(db: &TestDb, table: &str, schema: &Schema) -> (&'static str, usize) {
    let mut sink = Vec::new();
    let e = db
        .source(table)
        .extract_to(schema, &mut sink)
        .expect_err("refused");
    (e.code(), sink.len())
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn unmappable_columns_are_refused_before_any_byte_is_written() {
    let Some(db) = TestDb::create(TYPES_SQL) else {
        return;
    };
    let with = |name: &str, ty: &str| Schema::of(&[("id", "Int64"), (name, ty)]);
    for (schema, code) in [
        (with("at", "Date"), "DPONE_PG_ROWBINARY_TYPE_MISMATCH"),
        (with("ratio", "Float32"), "DPONE_PG_ROWBINARY_TYPE_MISMATCH"),
        (with("code", "UUID"), "DPONE_PG_ROWBINARY_TYPE_MISMATCH"),
        (
            with("doc", "Nullable(String)"),
            "DPONE_PG_ROWBINARY_TYPE_UNSUPPORTED",
        ),
        (
            with("absent", "String"),
            "DPONE_PG_ROWBINARY_COLUMN_MISSING",
        ),
        (
            with("tiny", "Enum8('a' = 1)"),
            "DPONE_PG_ROWBINARY_DECLARED_TYPE_UNSUPPORTED",
        ),
        (
            with("code", "Array(String)"),
            "DPONE_PG_ROWBINARY_DECLARED_TYPE_UNSUPPORTED",
        ),
    ] {
        assert_eq!(refused(&db, "src", &schema), (code, 0), "{schema:?}");
    }
    assert_eq!(
        refused(&db, "no_such_table", &with("code", "String")),
        ("DPONE_PG_ROWBINARY_RELATION_UNAVAILABLE", 0)
    );
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn values_that_do_not_fit_stop_the_extraction_and_seal_nothing() {
    let Some(db) = TestDb::create(TYPES_SQL) else {
        return;
    };
    let with = |name: &str, ty: &str| Schema::of(&[("id", "Int64"), (name, ty)]);
    for (schema, code) in [
        (
            with("note", "String"),
            "DPONE_PG_ROWBINARY_NULL_IN_NON_NULLABLE",
        ),
        (
            with("amount", "Nullable(Decimal(18, 2))"),
            "DPONE_PG_ROWBINARY_VALUE_NOT_EXACT",
        ),
        (
            with("amount", "Nullable(Decimal(6, 4))"),
            "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE",
        ),
        (
            with("tiny", "Int8"),
            "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE",
        ),
        (with("at", "DateTime"), "DPONE_PG_ROWBINARY_VALUE_NOT_EXACT"),
        (with("day", "Date"), "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE"),
        (
            with("blob", "FixedString(2)"),
            "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE",
        ),
        (
            with("addr6", "IPv4"),
            "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE",
        ),
        (
            Schema::of(&[("id", "UInt64")]),
            "DPONE_PG_ROWBINARY_VALUE_OUT_OF_RANGE",
        ),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
        let source = db.source("src");
        let e = StoreArtifactSource::new(&store, &source)
            .seal(&schema, 1 << 20)
            .expect_err("refused");
        assert_eq!(
            (e.class, e.kind),
            (code, PortErrorKind::Rejected),
            "{schema:?}"
        );
        assert_eq!(source.last_error().map(|e| e.code()), Some(code));
        assert_eq!(objects(dir.path()), 0, "nothing sealed");
    }
}

#[test]
fn declared_types_are_checked_without_io() {
    assert!(check_declared(&types_schema()).is_ok());
    let e =
        check_declared(&Schema::of(&[("a", "Int8"), ("b", "Enum16('x' = 1)")])).expect_err("enum");
    assert_eq!(e.code(), "DPONE_PG_ROWBINARY_DECLARED_TYPE_UNSUPPORTED");
    assert!(e.to_string().contains("column 1"));
}

#[test]
fn an_unreachable_server_is_unavailable_not_rejected() {
    // Port 1 on loopback: nothing listens there.
    let source = PgRowBinarySource::new(
        pg_config("127.0.0.1", 1, "nowhere", "nobody", Some("hunter2")),
        "public",
        "src",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 20).expect("store");
    let e = StoreArtifactSource::new(&store, &source)
        .seal(&Schema::of(&[("id", "Int64")]), 1 << 20)
        .expect_err("unreachable");
    assert_eq!(
        (e.class, e.kind),
        ("DPONE_PG_ROWBINARY_CONNECT", PortErrorKind::Unavailable)
    );
    let text = format!("{:?} {source:?}", source.last_error());
    assert!(
        !text.contains("hunter2") && !text.contains("127.0.0.1"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------------
// The snapshot is complete or refused: row-level security, inheritance, partitioned parents,
// privileges.
// ---------------------------------------------------------------------------------------------

const SAFETY_SQL: &str = "CREATE TABLE public.src (id bigint NOT NULL, label text NOT NULL); \
    INSERT INTO public.src SELECT i, 'row-' || i FROM generate_series(1, 4) AS i;";

fn id_schema() -> Schema {
    Schema::of(&[("id", "Int64")])
}

/// Rows read from `table` (as `config`'s principal), or the failure's code.
fn read_ids(config: PgConfig, table: &str) -> Result<u64, &'static str> {
    let source = PgRowBinarySource::new(config, "public", table);
    let mut sink = Vec::new();
    source
        .extract_to(&id_schema(), &mut sink)
        .map_err(|e| e.code())
}

/// A login role (the URL's password, no superuser, no BYPASSRLS) with `grants`; returns its
/// config and name.
fn reader(db: &TestDb, tag: &str, grants: &str) -> (PgConfig, String) {
    let password =
        String::from_utf8_lossy(db.admin.get_password().expect("password URL")).into_owned();
    let role = format!("{}_{tag}", db.name);
    let sql = format!(
        "CREATE ROLE \"{role}\" LOGIN PASSWORD '{pw}' NOSUPERUSER NOINHERIT NOBYPASSRLS; \
         GRANT CONNECT ON DATABASE \"{db}\" TO \"{role}\"; GRANT USAGE ON SCHEMA public TO \"{role}\"; {g}",
        pw = password.replace('\'', "''"),
        db = db.name,
        g = grants.replace("{role}", &format!("\"{role}\"")),
    );
    rt().block_on(exec(&db.config(), &sql))
        .expect("create reader");
    let mut c = db.config();
    c.user(&role);
    (c, role)
}

fn drop_reader(db: &TestDb, role: &str) {
    let _ = rt().block_on(exec(
        &db.config(),
        &format!("DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\""),
    ));
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn row_level_security_refuses_instead_of_filtering() {
    let db = TestDb::create(SAFETY_SQL).expect("database");
    let (cfg, role) = reader(&db, "rls", "GRANT SELECT ON public.src TO {role};");
    assert_eq!(read_ids(cfg.clone(), "src"), Ok(4));
    rt().block_on(exec(
        &db.config(),
        &format!(
            "ALTER TABLE public.src ENABLE ROW LEVEL SECURITY; \
             CREATE POLICY hide ON public.src FOR SELECT TO \"{role}\" USING (id <> 2);"
        ),
    ))
    .expect("policy");
    assert_eq!(
        read_ids(cfg, "src"),
        Err("DPONE_PG_ROWBINARY_ROW_SECURITY_ACTIVE")
    );
    drop_reader(&db, &role);
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn inheritance_children_are_never_read() {
    let db = TestDb::create(&format!(
        "{SAFETY_SQL} CREATE TABLE public.src_child () INHERITS (public.src); \
         INSERT INTO public.src_child VALUES (100, 'child');"
    ))
    .expect("database");
    assert_eq!(read_ids(db.config(), "src"), Ok(4));
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn a_partitioned_parent_is_refused_and_a_partition_is_read() {
    let db = TestDb::create(
        "CREATE TABLE public.parted (id bigint NOT NULL) PARTITION BY RANGE (id); \
         CREATE TABLE public.parted_0 PARTITION OF public.parted FOR VALUES FROM (0) TO (100); \
         INSERT INTO public.parted SELECT generate_series(1, 5);",
    )
    .expect("database");
    assert_eq!(
        read_ids(db.config(), "parted"),
        Err("DPONE_PG_ROWBINARY_RELATION_PARTITIONED")
    );
    assert_eq!(read_ids(db.config(), "parted_0"), Ok(5));
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn a_missing_privilege_is_permission_denied() {
    let db = TestDb::create(SAFETY_SQL).expect("database");
    // Column-level SELECT does not allow LOCK … IN ACCESS SHARE MODE.
    let (cfg, role) = reader(&db, "perm", "GRANT SELECT (id) ON public.src TO {role};");
    assert_eq!(
        read_ids(cfg, "src"),
        Err("DPONE_PG_ROWBINARY_PERMISSION_DENIED")
    );
    drop_reader(&db, &role);
}

/// A value of `.ci/start-postgres`'s env file (or the variable itself).
fn env_value(name: &str) -> String {
    if let Ok(v) = std::env::var(name)
        && !v.is_empty()
    {
        return v;
    }
    let file =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/dpone-test-pg.env");
    let prefix = format!("export {name}=");
    std::fs::read_to_string(file)
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.trim().strip_prefix(prefix.as_str()).map(str::to_owned))
        })
        .unwrap_or_else(|| skip(&format!("{name} is not set: rerun .ci/start-postgres")))
}

#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn tls_modes_against_the_test_ca() {
    use dpone_adapter_postgres_rowbinary::TlsMode;
    let db = TestDb::create(SAFETY_SQL).expect("database");
    let ca = env_value("DPONE_TEST_PG_CA");
    let other = env_value("DPONE_TEST_PG_OTHER_CA");
    let admin = db.config();
    let password = admin
        .get_password()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let read = |host: &str, mode: TlsMode, root: Option<&str>| {
        let c = pg_config(
            host,
            admin.get_ports().first().copied().unwrap_or(5432),
            &db.name,
            admin.get_user().unwrap_or("postgres"),
            password.as_deref(),
        );
        let source = PgRowBinarySource::new(c, "public", "src").with_tls(mode, root);
        let mut sink = Vec::new();
        source
            .extract_to(&id_schema(), &mut sink)
            .map_err(|e| (e.code(), e.to_string()))
    };
    assert_eq!(read("127.0.0.1", TlsMode::Require, None), Ok(4));
    assert_eq!(read("127.0.0.1", TlsMode::VerifyCa, Some(&ca)), Ok(4));
    assert_eq!(read("localhost", TlsMode::VerifyFull, Some(&ca)), Ok(4));
    let (code, message) = read("127.0.0.1", TlsMode::VerifyFull, Some(&ca)).expect_err("name");
    assert_eq!(code, "DPONE_PG_ROWBINARY_TLS");
    assert!(message.contains("does not name the host"), "{message}");
    let (code, message) = read("localhost", TlsMode::VerifyFull, Some(&other)).expect_err("ca");
    assert_eq!(code, "DPONE_PG_ROWBINARY_TLS");
    assert!(message.contains("not signed by a trusted CA"), "{message}");
    assert!(!message.contains(&other) && !message.contains("localhost"));
    let (code, _) = read(
        "localhost",
        TlsMode::VerifyFull,
        Some("/nonexistent/ca.pem"),
    )
    .expect_err("bundle");
    assert_eq!(code, "DPONE_PG_ROWBINARY_TLS_ROOT_CERT_INVALID");
}

/// Entries of the store's `tmp/`, `objects/` and `receipts/` directories.
fn store_entries(dir: &std::path::Path) -> usize {
    ["tmp", "objects", "receipts"]
        .iter()
        .map(|d| {
            std::fs::read_dir(dir.join(d))
                .map(|d| d.count())
                .unwrap_or(0)
        })
        .sum()
}

/// Seals `table` with `bound` into a fresh store; on success the identity, on a refusal its
/// class after checking that the store holds nothing (no object, no receipt, no temporary).
fn seal_bounded(
    db: &TestDb,
    table: &str,
    schema: &Schema,
    bound: SourceBound,
) -> (
    Result<dpone_engine_clickhouse::contracts::ArtifactIdentity, &'static str>,
    Option<SourceMeasurement>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = db.source(table).with_bound(bound);
    let r = StoreArtifactSource::new(&store, &source).seal(schema, 1 << 30);
    let m = source.last_measurement();
    match r {
        Ok(id) => (Ok(id), m),
        Err(e) => {
            assert_eq!(e.kind, PortErrorKind::Rejected, "{e:?}");
            assert_eq!(
                store_entries(dir.path()),
                0,
                "a refused read seals nothing and leaves no temporary file"
            );
            if let Some(m) = m {
                assert!(!m.complete, "a refused read is an incomplete observation");
            }
            (Err(e.class), m)
        }
    }
}

/// The reserved source bound on a real COPY stream: exactly N rows and N COPY payload bytes
/// (measured by a first, unbounded read) pass with the same artifact; N+1 is refused with its
/// code and seals nothing; mid-stream refusals abandon the COPY.
#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn the_source_bound_passes_exactly_n_rows_and_bytes_and_refuses_n_plus_one() {
    const N: u64 = 60_000;
    let setup = format!(
        "CREATE TABLE public.big AS
           SELECT i::bigint AS id, repeat('y', 40) || i AS label
             FROM generate_series(1, {N}) AS i;"
    );
    let Some(db) = TestDb::create(&setup) else {
        return;
    };
    let schema = Schema::of(&[("id", "UInt64"), ("label", "String")]);

    // Unbounded: the measurement the bounds come from.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ArtifactStore::open_path(dir.path(), 1 << 30).expect("store");
    let source = db.source("big");
    let base = StoreArtifactSource::new(&store, &source)
        .seal(&schema, 1 << 30)
        .expect("sealed");
    let m = source.last_measurement().expect("measured");
    assert!(m.complete);
    assert_eq!(m.rows, N);
    assert_eq!(base.row_count, N);
    let bytes = m.source_bytes;
    // Source bytes are the COPY payload (header, per tuple a field count and two length-prefixed
    // fields, trailer), not the RowBinary artifact.
    let labels: u64 = (1..=N).map(|i| 40 + i.to_string().len() as u64).sum();
    assert_eq!(bytes, 19 + N * (2 + 4 + 8 + 4) + labels + 2);
    assert_ne!(bytes, base.byte_size);
    // Half the stream is more than one 1 MiB RowBinary block: a mid-stream refusal below has
    // already written to the temporary file.
    assert!(base.byte_size / 2 > 1 << 20, "{}", base.byte_size);

    let exact = SourceBound {
        max_rows: N,
        max_bytes: bytes,
    };
    let (r, m) = seal_bounded(&db, "big", &schema, exact);
    assert_eq!(r, Ok(base), "a bound never changes the artifact");
    assert_eq!(
        m,
        Some(SourceMeasurement {
            rows: N,
            source_bytes: bytes,
            complete: true
        })
    );

    let (r, m) = seal_bounded(
        &db,
        "big",
        &schema,
        SourceBound {
            max_rows: N - 1,
            ..exact
        },
    );
    assert_eq!(r, Err("DPONE_PG_ROWBINARY_SOURCE_ROW_BOUND_EXCEEDED"));
    assert_eq!(m.map(|m| m.rows), Some(N), "refused on tuple N+1");

    let (r, m) = seal_bounded(
        &db,
        "big",
        &schema,
        SourceBound {
            max_bytes: bytes - 1,
            ..exact
        },
    );
    assert_eq!(r, Err("DPONE_PG_ROWBINARY_SOURCE_BYTE_BOUND_EXCEEDED"));
    assert_eq!(m.map(|m| m.source_bytes), Some(bytes));

    // Mid-stream, after more than one RowBinary block reached the temporary file.
    let (r, m) = seal_bounded(
        &db,
        "big",
        &schema,
        SourceBound {
            max_rows: N / 2,
            ..exact
        },
    );
    assert_eq!(r, Err("DPONE_PG_ROWBINARY_SOURCE_ROW_BOUND_EXCEEDED"));
    assert_eq!(m.map(|m| m.rows), Some(N / 2 + 1));
    let (r, m) = seal_bounded(
        &db,
        "big",
        &schema,
        SourceBound {
            max_bytes: bytes / 2,
            ..exact
        },
    );
    assert_eq!(r, Err("DPONE_PG_ROWBINARY_SOURCE_BYTE_BOUND_EXCEEDED"));
    let m = m.expect("measured");
    assert!(
        m.source_bytes > bytes / 2 && m.source_bytes < bytes,
        "{m:?}"
    );

    // Refused before the read: nothing measured, nothing sealed.
    for (bound, code) in [
        (
            SourceBound {
                max_rows: 0,
                max_bytes: u64::MAX,
            },
            "DPONE_PG_ROWBINARY_SOURCE_ROW_BOUND_EXCEEDED",
        ),
        (
            SourceBound {
                max_rows: u64::MAX,
                max_bytes: MIN_COPY_BYTES - 1,
            },
            "DPONE_PG_ROWBINARY_SOURCE_BYTE_BOUND_EXCEEDED",
        ),
    ] {
        let (r, m) = seal_bounded(&db, "big", &schema, bound);
        assert_eq!(r, Err(code));
        assert_eq!(m, None, "refused before the read");
    }
}

/// An empty relation is exactly `MIN_COPY_BYTES` of COPY payload and fits the smallest bound
/// that allows a read.
#[test]
#[cfg_attr(
    not(dpone_live_pg),
    ignore = "SKIP: no PostgreSQL server: set DPONE_TEST_PG_URL or run .ci/start-postgres"
)]
fn an_empty_relation_fits_the_smallest_bound() {
    let Some(db) = TestDb::create("CREATE TABLE public.empty (id integer NOT NULL);") else {
        return;
    };
    let schema = Schema::of(&[("id", "Int32")]);
    let (r, m) = seal_bounded(
        &db,
        "empty",
        &schema,
        SourceBound {
            max_rows: 1,
            max_bytes: MIN_COPY_BYTES,
        },
    );
    assert_eq!(r.map(|id| id.row_count), Ok(0));
    assert_eq!(
        m,
        Some(SourceMeasurement {
            rows: 0,
            source_bytes: MIN_COPY_BYTES,
            complete: true
        })
    );
}
