//! Staging decode without a server: PostgreSQL binary send formats into tiberius values, the
//! streaming artifact reader against its receipt, the pre-export key checks and the exact fit
//! of values to staging columns. Every expected value is derived in the comment next to it.

use dpone_adapter_mssql::keys::{KEY_TOO_WIDE, KEY_TRAILING_SPACE};
use dpone_adapter_mssql::shape::ColumnRow;
use dpone_adapter_mssql::sql::{KeyColumn, KeyType};
use dpone_adapter_mssql::stage::{
    COLUMN_VALUE_INEXACT, ColumnFit, KEY_TOO_LONG, PgType, TupleReader, check_export, column_types,
    decode_field, open_payload, plan_columns,
};
use dpone_engine_xmin::ErrorCode;
use dpone_engine_xmin::artifact::{ArtifactReceipt, ArtifactStore, ArtifactWriter};
use dpone_engine_xmin::copy_binary::encode_for_tests;
use dpone_engine_xmin::envelope::{
    ARTIFACT_FORMAT, ENVELOPE_SCHEMA, PayloadReceipt, SnapshotEnvelope, SourceColumn,
};
use dpone_policy_model::guard::LoadKind;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{self, Cursor, Read};
use std::sync::Mutex;
use tiberius::ColumnData;

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// Artifacts by name; a name need not be the digest of its bytes (that is how tests corrupt).
#[derive(Default)]
struct MemStore {
    files: Mutex<HashMap<String, Vec<u8>>>,
}

impl MemStore {
    fn put(&self, name: &str, bytes: Vec<u8>) {
        self.files
            .lock()
            .expect("store lock")
            .insert(name.into(), bytes);
    }
}

impl ArtifactStore for MemStore {
    fn create(&self) -> io::Result<Box<dyn ArtifactWriter>> {
        Err(io::Error::other("read-only test store"))
    }

    fn open(&self, sha256: &str) -> io::Result<Box<dyn Read + Send>> {
        let files = self.files.lock().expect("store lock");
        let bytes = files.get(sha256).cloned().ok_or(io::ErrorKind::NotFound)?;
        Ok(Box::new(Cursor::new(bytes)))
    }

    fn remove(&self, sha256: &str) -> io::Result<()> {
        self.files.lock().expect("store lock").remove(sha256);
        Ok(())
    }
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn receipt(bytes: &[u8], fields: u16, rows: u64) -> PayloadReceipt {
    PayloadReceipt {
        artifact: ArtifactReceipt {
            sha256: sha(bytes),
            bytes: bytes.len() as u64,
        },
        format: ARTIFACT_FORMAT.into(),
        rows,
        fields,
        complete: true,
    }
}

/// Stores `bytes` under their digest and returns the matching receipt.
fn stored(store: &MemStore, bytes: Vec<u8>, fields: u16, rows: u64) -> PayloadReceipt {
    let r = receipt(&bytes, fields, rows);
    store.put(&r.artifact.sha256, bytes);
    r
}

fn col(name: &str, type_sql: &str, type_oid: u32) -> SourceColumn {
    SourceColumn {
        name: name.into(),
        type_sql: type_sql.into(),
        type_oid,
    }
}

fn key(name: &str, ty: KeyType) -> KeyColumn {
    KeyColumn {
        name: name.into(),
        ty,
    }
}

fn envelope(
    columns: Vec<SourceColumn>,
    key_columns: u16,
    rows: PayloadReceipt,
    keys: Option<PayloadReceipt>,
) -> SnapshotEnvelope {
    let key_count = keys.as_ref().unwrap_or(&rows).rows;
    SnapshotEnvelope {
        schema: ENVELOPE_SCHEMA.into(),
        state_key: "state".into(),
        scope_hash: "scope".into(),
        source_authority_digest: "authority".into(),
        snapshot_token: "token".into(),
        load: if keys.is_some() {
            LoadKind::Incremental
        } else {
            LoadKind::FullBaseline
        },
        previous_xmin: keys.as_ref().map(|_| 100),
        safe_checkpoint: 200,
        visible_horizon: 210,
        replay_amplification_xids: 10,
        columns,
        key_columns,
        rows,
        keys,
        key_count,
        complete: true,
        source_lineage: Default::default(),
    }
}

fn i32be(v: i32) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

fn i64be(v: i64) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// PostgreSQL `numeric_send`: ndigits, weight, sign, dscale, then base-10000 digits, all
/// big-endian 16-bit.
fn numeric(weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(digits.len() as i16).to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&dscale.to_be_bytes());
    for d in digits {
        out.extend_from_slice(&d.to_be_bytes());
    }
    out
}

const POS: u16 = 0x0000;
const NEG: u16 = 0x4000;

fn code<T: std::fmt::Debug>(r: Result<T, dpone_engine_xmin::XminError>) -> ErrorCode {
    r.expect_err("expected an error").code()
}

fn num(ty: PgType, bytes: &[u8]) -> (i128, u8) {
    match decode_field(ty, bytes).expect("decodes") {
        ColumnData::Numeric(Some(n)) => (n.value(), n.scale()),
        other => panic!("not a numeric: {other:?}"),
    }
}

/// (SQL Server day since 0001-01-01, 10^-scale increments since midnight, scale).
fn dt2(v: ColumnData<'static>) -> (u32, u64, u8) {
    match v {
        ColumnData::DateTime2(Some(d)) => {
            (d.date().days(), d.time().increments(), d.time().scale())
        }
        other => panic!("not a datetime2: {other:?}"),
    }
}

fn target(name: &str, type_name: &str, max_length: i32, precision: u8, scale: u8) -> ColumnRow {
    ColumnRow {
        name: name.into(),
        type_name: type_name.into(),
        is_nullable: true,
        collation_name: None,
        is_computed: false,
        is_persisted: false,
        max_length,
        precision,
        scale,
        code_page: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

#[test]
fn accepted_oids_round_trip_and_others_are_refused() {
    let accepted = [
        16, 17, 20, 21, 23, 25, 700, 701, 1042, 1043, 1082, 1083, 1114, 1184, 1700, 2950,
    ];
    for oid in accepted {
        let ty = PgType::from_oid(oid).expect("accepted");
        assert_eq!(ty.oid(), oid);
    }
    assert_eq!(PgType::from_oid(1700), Some(PgType::Numeric));
    assert_eq!(PgType::from_oid(2950), Some(PgType::Uuid));
    // json, jsonb, interval, timetz, money, oid, bit, int2vector
    for oid in [114, 3802, 1186, 1266, 790, 26, 1560, 22, 0] {
        assert_eq!(PgType::from_oid(oid), None, "oid {oid}");
    }
}

#[test]
fn unsupported_column_type_names_column_and_type_only() {
    let cols = [col("id", "integer", 23), col("doc", "jsonb", 3802)];
    let e = column_types(&cols).expect_err("jsonb is not accepted");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    assert!(e.message().contains("\"doc\""), "{}", e.message());
    assert!(e.message().contains("jsonb"), "{}", e.message());
    assert!(!e.message().contains("\"id\""), "{}", e.message());
    assert_eq!(
        column_types(&cols[..1]).expect("int4 accepted"),
        vec![PgType::Int4]
    );
}

// ---------------------------------------------------------------------------------------------
// decode_field
// ---------------------------------------------------------------------------------------------

#[test]
fn integers_bool_and_floats() {
    // int2 -2 = 0xFFFE (two's complement, big-endian).
    assert_eq!(
        decode_field(PgType::Int2, &[0xFF, 0xFE]).expect("int2"),
        ColumnData::I16(Some(-2))
    );
    // int4 0x01020304 = 16909060.
    assert_eq!(
        decode_field(PgType::Int4, &[1, 2, 3, 4]).expect("int4"),
        ColumnData::I32(Some(16_909_060))
    );
    assert_eq!(
        decode_field(PgType::Int8, &i64be(i64::MIN)).expect("int8"),
        ColumnData::I64(Some(i64::MIN))
    );
    assert_eq!(
        code(decode_field(PgType::Int4, &[1, 2, 3])),
        ErrorCode::ArtifactMalformed
    );
    assert_eq!(
        decode_field(PgType::Bool, &[1]).expect("bool"),
        ColumnData::Bit(Some(true))
    );
    assert_eq!(
        decode_field(PgType::Bool, &[0]).expect("bool"),
        ColumnData::Bit(Some(false))
    );
    assert_eq!(
        code(decode_field(PgType::Bool, &[2])),
        ErrorCode::ArtifactMalformed
    );
    // float4 1.5 = 0x3FC00000; float8 -0.1 = 0xBFB999999999999A.
    assert_eq!(
        decode_field(PgType::Float4, &[0x3F, 0xC0, 0, 0]).expect("float4"),
        ColumnData::F32(Some(1.5))
    );
    assert_eq!(
        decode_field(PgType::Float8, &0xBFB9_9999_9999_999Au64.to_be_bytes()).expect("float8"),
        ColumnData::F64(Some(-0.1))
    );
    // float4 NaN = 0x7FC00000; float8 +Infinity = 0x7FF0000000000000.
    assert_eq!(
        code(decode_field(PgType::Float4, &[0x7F, 0xC0, 0, 0])),
        ErrorCode::TargetColumnTypeUnsupported
    );
    assert_eq!(
        code(decode_field(
            PgType::Float8,
            &0x7FF0_0000_0000_0000u64.to_be_bytes()
        )),
        ErrorCode::TargetColumnTypeUnsupported
    );
}

#[test]
fn text_bytea_and_uuid() {
    let s = "Grüße, 世界 🎉";
    for ty in [PgType::Text, PgType::Varchar, PgType::Bpchar] {
        assert_eq!(
            decode_field(ty, s.as_bytes()).expect("utf-8"),
            ColumnData::String(Some(s.into()))
        );
    }
    // bpchar arrives padded and stays padded.
    assert_eq!(
        decode_field(PgType::Bpchar, b"ab  ").expect("bpchar"),
        ColumnData::String(Some("ab  ".into()))
    );
    assert_eq!(
        code(decode_field(PgType::Text, &[b'a', 0xFF])),
        ErrorCode::ArtifactMalformed
    );
    assert_eq!(
        decode_field(PgType::Bytea, &[0, 0xFF, 0x10]).expect("bytea"),
        ColumnData::Binary(Some(vec![0u8, 0xFF, 0x10].into()))
    );
    // uuid_send writes the 16 bytes in RFC 4122 order; tiberius takes uuid::Uuid in that order
    // and swaps groups 1-3 to SQL Server's mixed-endian layout itself, so no swap here.
    let raw: [u8; 16] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE,
        0xFF,
    ];
    match decode_field(PgType::Uuid, &raw).expect("uuid") {
        ColumnData::Guid(Some(u)) => {
            assert_eq!(u.as_bytes(), &raw);
            assert_eq!(u.to_string(), "00112233-4455-6677-8899-aabbccddeeff");
        }
        other => panic!("not a guid: {other:?}"),
    }
    assert_eq!(
        code(decode_field(PgType::Uuid, &raw[..15])),
        ErrorCode::ArtifactMalformed
    );
}

#[test]
fn dates_from_the_2000_epoch() {
    let day = |pg: i32| match decode_field(PgType::Date, &i32be(pg)).expect("date") {
        ColumnData::Date(Some(d)) => d.days(),
        other => panic!("not a date: {other:?}"),
    };
    // 0001-01-01 .. 2000-01-01: 1999 * 365 + 484 leap days = 730119.
    assert_eq!(day(0), 730_119);
    assert_eq!(day(-1), 730_118); // 1999-12-31
    // 1970-01-01 is 10957 days before 2000-01-01; 1969 * 365 + 477 = 719162.
    assert_eq!(day(-10_957), 719_162);
    // 2024-02-29: 24 * 365 + 6 leap days + 31 + 28 = 8825 days after 2000-01-01.
    assert_eq!(day(8_825), 738_944);
    assert_eq!(day(-730_119), 0); // 0001-01-01
    assert_eq!(day(2_921_939), 3_652_058); // 9999-12-31
    for out in [2_921_940, -730_120] {
        assert_eq!(
            code(decode_field(PgType::Date, &i32be(out))),
            ErrorCode::TargetColumnTypeUnsupported
        );
    }
    // 'infinity' and '-infinity'.
    for inf in [i32::MAX, i32::MIN] {
        let e = decode_field(PgType::Date, &i32be(inf)).expect_err("infinite");
        assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
        assert!(e.message().contains("infinite"), "{}", e.message());
    }
}

#[test]
fn time_in_100ns_increments() {
    let t = |micros: i64| match decode_field(PgType::Time, &i64be(micros)).expect("time") {
        ColumnData::Time(Some(t)) => (t.increments(), t.scale()),
        other => panic!("not a time: {other:?}"),
    };
    assert_eq!(t(0), (0, 7));
    // 12:34:56.789012 = 45296 s + 789012 us = 45_296_789_012 us = 452_967_890_120 * 100 ns.
    assert_eq!(t(45_296_789_012), (452_967_890_120, 7));
    // 23:59:59.999999
    assert_eq!(t(86_399_999_999), (863_999_999_990, 7));
    // PostgreSQL accepts 24:00:00; SQL Server's time does not.
    assert_eq!(
        code(decode_field(PgType::Time, &i64be(86_400_000_000))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    assert_eq!(
        code(decode_field(PgType::Time, &i64be(-1))),
        ErrorCode::ArtifactMalformed
    );
}

#[test]
fn timestamps_from_the_2000_epoch() {
    for ty in [PgType::Timestamp, PgType::Timestamptz] {
        let ts = |micros: i64| dt2(decode_field(ty, &i64be(micros)).expect("timestamp"));
        assert_eq!(ts(0), (730_119, 0, 7));
        // One microsecond before 2000-01-01: 1999-12-31 23:59:59.999999.
        assert_eq!(ts(-1), (730_118, 863_999_999_990, 7));
        // Unix epoch: 946_684_800 s before 2000-01-01.
        assert_eq!(ts(-946_684_800_000_000), (719_162, 0, 7));
        // 2024-02-29 12:34:56.789012: 8825 days * 86_400_000_000 + 45_296_789_012.
        assert_eq!(ts(762_525_296_789_012), (738_944, 452_967_890_120, 7));
        // 0001-01-01 00:00:00 = -730119 days; one microsecond earlier is out of range.
        assert_eq!(ts(-730_119 * 86_400_000_000), (0, 0, 7));
        assert_eq!(
            code(decode_field(ty, &i64be(-730_119 * 86_400_000_000 - 1))),
            ErrorCode::TargetColumnTypeUnsupported
        );
        for inf in [i64::MAX, i64::MIN] {
            let e = decode_field(ty, &i64be(inf)).expect_err("infinite");
            assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
            assert!(e.message().contains("infinite"), "{}", e.message());
        }
    }
}

#[test]
fn numerics_exact_at_display_scale() {
    let n = PgType::Numeric;
    // 0: no digits, weight 0, dscale 0.
    assert_eq!(num(n, &numeric(0, POS, 0, &[])), (0, 0));
    // 12345.6780 (dscale 4) = 1 * 10000^1 + 2345 + 6780 / 10000 -> 123456780 at scale 4.
    assert_eq!(
        num(n, &numeric(1, POS, 4, &[1, 2345, 6780])),
        (123_456_780, 4)
    );
    // Same digits, dscale 6 (e.g. numeric(20,6)): 12345.678000 -> 12345678000 at scale 6.
    assert_eq!(
        num(n, &numeric(1, POS, 6, &[1, 2345, 6780])),
        (12_345_678_000, 6)
    );
    // -1.5 = -(1 + 5000 / 10000), dscale 1 -> -15 at scale 1.
    assert_eq!(num(n, &numeric(0, NEG, 1, &[1, 5000])), (-15, 1));
    // 0.0001 = 1 * 10000^-1, dscale 4.
    assert_eq!(num(n, &numeric(-1, POS, 4, &[1])), (1, 4));
    // 100000000 = 1 * 10000^2 (trailing zero groups are not sent).
    assert_eq!(num(n, &numeric(2, POS, 0, &[1])), (100_000_000, 0));
    // 10^37 = 10 * 10000^9: 38 digits, the largest power that fits.
    assert_eq!(num(n, &numeric(9, POS, 0, &[10])), (10i128.pow(37), 0));
    // 10^38 - 1: 38 nines = "99" then nine groups of 9999, weight 9.
    let nines = [99, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999];
    assert_eq!(
        num(n, &numeric(9, NEG, 0, &nines)),
        (-(10i128.pow(38) - 1), 0)
    );
    // 10^38 = 100 * 10000^9: 39 digits.
    assert_eq!(
        code(decode_field(n, &numeric(9, POS, 0, &[100]))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    // A PostgreSQL-only magnitude, 10^400.
    assert_eq!(
        code(decode_field(n, &numeric(100, POS, 0, &[1]))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    // 1.5 with dscale 40: represented at scale 37 (digits beyond are zeros) = 15 * 10^36.
    assert_eq!(
        num(n, &numeric(0, POS, 40, &[1, 5000])),
        (15 * 10i128.pow(36), 37)
    );
    // 10^-40 = 1 * 10000^-10, dscale 40: non-zero digit beyond 37 fractional digits.
    assert_eq!(
        code(decode_field(n, &numeric(-10, POS, 40, &[1]))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    // NaN, +Infinity, -Infinity.
    for sign in [0xC000, 0xD000, 0xF000] {
        assert_eq!(
            code(decode_field(n, &numeric(0, sign, 0, &[]))),
            ErrorCode::TargetColumnTypeUnsupported,
            "sign {sign:#x}"
        );
    }
    // Malformed: declared two digits, one sent; a digit above 9999; an unknown sign.
    let mut short = numeric(0, POS, 0, &[1, 2]);
    short.truncate(short.len() - 2);
    assert_eq!(code(decode_field(n, &short)), ErrorCode::ArtifactMalformed);
    assert_eq!(
        code(decode_field(n, &numeric(0, POS, 0, &[10_000]))),
        ErrorCode::ArtifactMalformed
    );
    assert_eq!(
        code(decode_field(n, &numeric(0, 0x1234, 0, &[1]))),
        ErrorCode::ArtifactMalformed
    );
}

// ---------------------------------------------------------------------------------------------
// TupleReader
// ---------------------------------------------------------------------------------------------

fn read_all(
    store: &MemStore,
    r: &PayloadReceipt,
    key_fields: u16,
) -> Result<Vec<Vec<Option<Vec<u8>>>>, dpone_engine_xmin::XminError> {
    let mut reader = open_payload(store, r, key_fields)?;
    let mut out = Vec::new();
    while let Some(t) = reader.next_tuple()? {
        out.push(t.fields().map(|f| f.map(<[u8]>::to_vec)).collect());
    }
    Ok(out)
}

#[test]
fn reader_yields_fields_nulls_and_counts() {
    let store = MemStore::default();
    let one = i32be(1);
    let two = i32be(2);
    let bytes = encode_for_tests(&[
        vec![Some(&one), Some(b"x"), None],
        vec![Some(&two), Some(b""), Some(b"tail")],
    ]);
    let len = bytes.len() as u64;
    let r = stored(&store, bytes, 3, 2);
    let mut reader = open_payload(&store, &r, 1).expect("header");
    {
        let t = reader.next_tuple().expect("tuple").expect("first");
        assert_eq!(t.len(), 3);
        assert_eq!(t.field(0), Some(&one[..]));
        assert_eq!(t.field(1), Some(&b"x"[..]));
        assert_eq!(t.field(2), None);
        assert_eq!(t.field(3), None);
    }
    {
        let t = reader.next_tuple().expect("tuple").expect("second");
        // An empty field is not NULL.
        assert_eq!(t.field(1), Some(&b""[..]));
        assert_eq!(t.field(2), Some(&b"tail"[..]));
    }
    assert!(reader.next_tuple().expect("trailer verified").is_none());
    assert!(reader.next_tuple().expect("stays done").is_none());
    assert_eq!(reader.tuples(), 2);
    assert_eq!(reader.bytes(), len);
}

#[test]
fn reader_skips_a_header_extension_and_hashes_it() {
    let store = MemStore::default();
    let plain = encode_for_tests(&[vec![Some(b"k")]]);
    // Header: 11-byte signature, flags, then extension length 3 and its bytes.
    let mut bytes = plain[..15].to_vec();
    bytes.extend_from_slice(&3i32.to_be_bytes());
    bytes.extend_from_slice(b"ext");
    bytes.extend_from_slice(&plain[19..]);
    let r = stored(&store, bytes, 1, 1);
    assert_eq!(
        read_all(&store, &r, 1).expect("valid"),
        vec![vec![Some(b"k".to_vec())]]
    );
}

#[test]
fn reader_checksum_mismatch_same_length() {
    let store = MemStore::default();
    let bytes = encode_for_tests(&[vec![Some(b"abc")]]);
    let r = receipt(&bytes, 1, 1);
    let mut changed = bytes.clone();
    let at = changed.len() - 3; // inside the field "abc"
    changed[at] ^= 0x01;
    store.put(&r.artifact.sha256, changed);
    assert_eq!(
        code(read_all(&store, &r, 1)),
        ErrorCode::ArtifactChecksumMismatch
    );
}

#[test]
fn reader_truncated_stream() {
    let store = MemStore::default();
    let bytes = encode_for_tests(&[vec![Some(b"abc")], vec![Some(b"def")]]);
    let cut = bytes[..bytes.len() - 5].to_vec();
    // The receipt describes the whole artifact: the stored bytes are not those bytes.
    let r = receipt(&bytes, 1, 2);
    store.put(&r.artifact.sha256, cut.clone());
    assert_eq!(
        code(read_all(&store, &r, 1)),
        ErrorCode::ArtifactChecksumMismatch
    );
    // The receipt describes the truncated bytes: the recorded artifact lacks its trailer.
    let r = stored(&store, cut, 1, 2);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::ArtifactIncomplete);
    // Cut inside the header.
    let r = stored(&store, bytes[..9].to_vec(), 1, 0);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::ArtifactIncomplete);
}

#[test]
fn reader_bytes_after_trailer() {
    let store = MemStore::default();
    let mut bytes = encode_for_tests(&[vec![Some(b"abc")]]);
    let clean = receipt(&bytes, 1, 1);
    bytes.push(0);
    // Recorded with the extra byte: a malformed artifact.
    let r = stored(&store, bytes.clone(), 1, 1);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::ArtifactMalformed);
    // Recorded without it: the stored bytes are longer than the receipt.
    store.put(&clean.artifact.sha256, bytes);
    assert_eq!(
        code(read_all(&store, &clean, 1)),
        ErrorCode::ArtifactChecksumMismatch
    );
}

#[test]
fn reader_framing_refusals() {
    let store = MemStore::default();
    // A tuple with one field where the payload declares two.
    let r = stored(&store, encode_for_tests(&[vec![Some(b"a")]]), 2, 1);
    let e = read_all(&store, &r, 1).expect_err("field count");
    assert_eq!(e.code(), ErrorCode::ArtifactMalformed);
    assert!(
        e.message().contains("1 fields, expected 2"),
        "{}",
        e.message()
    );
    // NULL in the key field.
    let r = stored(&store, encode_for_tests(&[vec![None, Some(b"a")]]), 2, 1);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::SnapshotNullKey);
    // The same NULL outside the key is fine.
    let r = stored(&store, encode_for_tests(&[vec![Some(b"k"), None]]), 2, 1);
    assert_eq!(read_all(&store, &r, 1).expect("nullable").len(), 1);
    // Bad signature.
    let mut bad = encode_for_tests(&[]);
    bad[0] = b'X';
    let r = stored(&store, bad, 1, 0);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::ArtifactMalformed);
    // OID flag (bit 16) set.
    let mut oids = encode_for_tests(&[]);
    oids[11..15].copy_from_slice(&0x0001_0000u32.to_be_bytes());
    let r = stored(&store, oids, 1, 0);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::ArtifactMalformed);
    // Field length -2.
    let mut neg = encode_for_tests(&[vec![Some(b"a")]]);
    neg[21..25].copy_from_slice(&(-2i32).to_be_bytes());
    let r = stored(&store, neg, 1, 1);
    assert_eq!(code(read_all(&store, &r, 1)), ErrorCode::ArtifactMalformed);
}

#[test]
fn reader_row_count_and_receipt_fields() {
    let store = MemStore::default();
    let r = stored(&store, encode_for_tests(&[vec![Some(b"a")]]), 1, 2);
    assert_eq!(
        code(read_all(&store, &r, 1)),
        ErrorCode::SnapshotCountMismatch
    );
    let mut incomplete = r.clone();
    incomplete.complete = false;
    assert_eq!(
        code(read_all(&store, &incomplete, 1)),
        ErrorCode::ArtifactIncomplete
    );
    let mut format = r.clone();
    format.format = "csv".into();
    assert_eq!(
        code(read_all(&store, &format, 1)),
        ErrorCode::ArtifactMalformed
    );
    // An errored reader keeps returning the error.
    let mut bad = encode_for_tests(&[vec![Some(b"a")]]);
    bad.push(7);
    let mut reader =
        TupleReader::new(Cursor::new(bad.clone()), &receipt(&bad, 1, 1), 1).expect("header");
    assert!(reader.next_tuple().expect("first tuple").is_some());
    assert_eq!(code(reader.next_tuple()), ErrorCode::ArtifactMalformed);
    assert_eq!(code(reader.next_tuple()), ErrorCode::ArtifactMalformed);
}

// ---------------------------------------------------------------------------------------------
// check_export
// ---------------------------------------------------------------------------------------------

fn text_int_columns() -> Vec<SourceColumn> {
    vec![
        col("code", "text", 25),
        col("n", "integer", 23),
        col("amount", "numeric(12,2)", 1700),
    ]
}

fn text_int_keys(max_chars: u16) -> Vec<KeyColumn> {
    vec![
        key("code", KeyType::Text { max_chars }),
        key("n", KeyType::Int),
    ]
}

#[test]
fn export_baseline_counts_and_key_width() {
    let store = MemStore::default();
    // 12.50 = 12 + 5000 / 10000 with dscale 2.
    let amount = numeric(0, POS, 2, &[12, 5000]);
    // "é🎉": 2 chars, 3 UTF-16 code units (the emoji is a surrogate pair) = 6 index bytes.
    let bytes = encode_for_tests(&[
        vec![Some("é🎉".as_bytes()), Some(&i32be(1)), Some(&amount)],
        vec![Some(b"a"), Some(&i32be(2)), None],
    ]);
    let len = bytes.len() as u64;
    let rows = stored(&store, bytes, 3, 2);
    let env = envelope(text_int_columns(), 2, rows, None);
    let check = check_export(&env, &store, &text_int_keys(3)).expect("fits");
    assert_eq!(check.keys.tuples, 2);
    assert_eq!(check.keys.bytes, len);
    assert_eq!(check.rows, check.keys);
    // 6 bytes of text + 4 bytes of int.
    assert_eq!(check.max_key_bytes, 10);
    // nvarchar(2) holds 2 code units: the 3-unit key does not fit.
    let e = check_export(&env, &store, &text_int_keys(2)).expect_err("too long");
    assert_eq!(e.code(), ErrorCode::TargetKeyUnsupported);
    assert!(e.message().contains(KEY_TOO_LONG), "{}", e.message());
    assert!(!e.message().contains("é🎉"), "{}", e.message());
}

#[test]
fn export_incremental_reads_keys_and_rows() {
    let store = MemStore::default();
    let keys = stored(
        &store,
        encode_for_tests(&[
            vec![Some(b"a"), Some(&i32be(1))],
            vec![Some(b"b"), Some(&i32be(2))],
            vec![Some(b"c"), Some(&i32be(3))],
        ]),
        2,
        3,
    );
    let amount = numeric(0, POS, 2, &[7]);
    let rows_bytes = encode_for_tests(&[vec![Some(b"b"), Some(&i32be(2)), Some(&amount)]]);
    let rows_len = rows_bytes.len() as u64;
    let rows = stored(&store, rows_bytes, 3, 1);
    let env = envelope(text_int_columns(), 2, rows.clone(), Some(keys));
    let check = check_export(&env, &store, &text_int_keys(10)).expect("fits");
    assert_eq!(check.keys.tuples, 3);
    assert_eq!(check.rows.tuples, 1);
    assert_eq!(check.rows.bytes, rows_len);
    assert_eq!(check.max_key_bytes, 2 + 4);
    // A NaN amount in the delta is refused before staging, naming the column.
    let nan = numeric(0, 0xC000, 0, &[]);
    let bad_rows = stored(
        &store,
        encode_for_tests(&[vec![Some(b"b"), Some(&i32be(2)), Some(&nan)]]),
        3,
        1,
    );
    let env = envelope(text_int_columns(), 2, bad_rows, env.keys.clone());
    let e = check_export(&env, &store, &text_int_keys(10)).expect_err("NaN");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    assert!(e.message().contains("\"amount\""), "{}", e.message());
}

#[test]
fn export_trailing_space_key_refused_without_value() {
    let store = MemStore::default();
    let rows = stored(
        &store,
        encode_for_tests(&[
            vec![Some(b"plain"), Some(&i32be(1)), None],
            vec![Some(b"secret "), Some(&i32be(2)), None],
        ]),
        3,
        2,
    );
    let env = envelope(text_int_columns(), 2, rows, None);
    let e = check_export(&env, &store, &text_int_keys(20)).expect_err("trailing space");
    assert_eq!(e.code(), ErrorCode::TargetKeyUnsupported);
    assert!(e.message().contains(KEY_TRAILING_SPACE), "{}", e.message());
    assert!(e.message().contains("\"code\""), "{}", e.message());
    assert!(!e.message().contains("secret"), "{}", e.message());
    // Trailing tab and leading space are significant on both sides: accepted.
    let rows = stored(
        &store,
        encode_for_tests(&[vec![Some(b" lead\t"), Some(&i32be(1)), None]]),
        3,
        1,
    );
    let env = envelope(text_int_columns(), 2, rows, None);
    assert!(check_export(&env, &store, &text_int_keys(20)).is_ok());
}

#[test]
fn export_key_too_wide_refused() {
    let store = MemStore::default();
    let rows = stored(
        &store,
        encode_for_tests(&[vec![Some(b"a"), Some(&i32be(1)), None]]),
        3,
        1,
    );
    let env = envelope(text_int_columns(), 2, rows, None);
    // nvarchar(450) = 900 bytes plus int 4 = 904 > 900.
    let e = check_export(&env, &store, &text_int_keys(450)).expect_err("too wide");
    assert_eq!(e.code(), ErrorCode::TargetKeyUnsupported);
    assert!(e.message().contains(KEY_TOO_WIDE), "{}", e.message());
    // nvarchar(448) = 896 + 4 = 900: accepted.
    assert!(check_export(&env, &store, &text_int_keys(448)).is_ok());
}

#[test]
fn export_key_type_and_shape_refusals() {
    let store = MemStore::default();
    let rows = stored(
        &store,
        encode_for_tests(&[vec![Some(&i64be(1)), Some(b"x")]]),
        2,
        1,
    );
    let cols = vec![col("id", "bigint", 20), col("v", "text", 25)];
    let env = envelope(cols.clone(), 1, rows.clone(), None);
    // int8 does not fit int.
    assert_eq!(
        code(check_export(&env, &store, &[key("id", KeyType::Int)])),
        ErrorCode::TargetColumnTypeUnsupported
    );
    assert!(check_export(&env, &store, &[key("id", KeyType::BigInt)]).is_ok());
    // Key named differently from the envelope's key column.
    assert_eq!(
        code(check_export(&env, &store, &[key("other", KeyType::BigInt)])),
        ErrorCode::EnvelopeInvalid
    );
    // An unsupported business column type is refused before reading.
    let env = envelope(
        vec![col("id", "bigint", 20), col("v", "interval", 1186)],
        1,
        rows,
        None,
    );
    let e = check_export(&env, &store, &[key("id", KeyType::BigInt)]).expect_err("interval");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    assert!(e.message().contains("\"v\"") && e.message().contains("interval"));
    // int2 fits bigint and int; uuid fits uniqueidentifier only.
    let rows = stored(
        &store,
        encode_for_tests(&[vec![Some(&[0, 7][..]), Some(&[9u8; 16][..])]]),
        2,
        1,
    );
    let cols = vec![col("a", "smallint", 21), col("u", "uuid", 2950)];
    let env = envelope(cols, 2, rows, None);
    let ok = check_export(
        &env,
        &store,
        &[key("a", KeyType::BigInt), key("u", KeyType::Uuid)],
    )
    .expect("fits");
    assert_eq!(ok.max_key_bytes, 8 + 16);
    assert_eq!(
        code(check_export(
            &env,
            &store,
            &[
                key("a", KeyType::Int),
                key("u", KeyType::Text { max_chars: 36 })
            ]
        )),
        ErrorCode::TargetColumnTypeUnsupported
    );
}

// ---------------------------------------------------------------------------------------------
// ColumnFit
// ---------------------------------------------------------------------------------------------

#[test]
fn fit_integers_widen_and_never_narrow() {
    let int2 = col("a", "smallint", 21);
    let f = ColumnFit::new(&int2, &target("a", "int", 4, 10, 0)).expect("int2 -> int");
    assert_eq!(
        f.convert(Some(&[0xFF, 0xFE])).expect("value"),
        ColumnData::I32(Some(-2))
    );
    assert_eq!(f.convert(None).expect("null"), ColumnData::I32(None));
    let int4 = col("b", "integer", 23);
    let f = ColumnFit::new(&int4, &target("b", "bigint", 8, 19, 0)).expect("int4 -> bigint");
    assert_eq!(
        f.convert(Some(&i32be(i32::MIN))).expect("value"),
        ColumnData::I64(Some(i64::from(i32::MIN)))
    );
    let int8 = col("c", "bigint", 20);
    let e = ColumnFit::new(&int8, &target("c", "int", 4, 10, 0)).expect_err("narrowing");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    assert!(e.message().contains("\"c\"") && e.message().contains("int"));
    // float4 widens exactly into float(53).
    let f4 = col("f", "real", 700);
    let f = ColumnFit::new(&f4, &target("f", "float", 8, 53, 0)).expect("float4 -> float");
    assert_eq!(
        f.convert(Some(&0.1f32.to_bits().to_be_bytes()))
            .expect("value"),
        ColumnData::F64(Some(f64::from(0.1f32)))
    );
    let f8 = col("g", "double precision", 701);
    assert!(ColumnFit::new(&f8, &target("g", "real", 4, 24, 0)).is_err());
}

#[test]
fn fit_numeric_to_column_scale_exactly() {
    let c = col("amount", "numeric", 1700);
    let f = ColumnFit::new(&c, &target("amount", "decimal", 9, 18, 2)).expect("decimal(18,2)");
    let value = |bytes: &[u8]| match f.convert(Some(bytes)).expect("fits") {
        ColumnData::Numeric(Some(n)) => (n.value(), n.scale()),
        other => panic!("not a numeric: {other:?}"),
    };
    // 12345.6700 (dscale 4) = [1, 2345, 6700]: at scale 2 exactly 1234567.
    assert_eq!(value(&numeric(1, POS, 4, &[1, 2345, 6700])), (1_234_567, 2));
    // 7 (dscale 0) -> 700 at scale 2.
    assert_eq!(value(&numeric(0, POS, 0, &[7])), (700, 2));
    // -0.05 = -(500 / 10000), dscale 2 -> -5.
    assert_eq!(value(&numeric(-1, NEG, 2, &[500])), (-5, 2));
    // 12345.6780 would lose the 8 at scale 2: refused, not rounded.
    let e = f
        .convert(Some(&numeric(1, POS, 4, &[1, 2345, 6780])))
        .expect_err("rounding");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    assert!(e.message().contains("\"amount\""), "{}", e.message());
    // decimal(5,2) holds at most 999.99: 1000 does not fit.
    let small = ColumnFit::new(&c, &target("amount", "decimal", 5, 5, 2)).expect("decimal(5,2)");
    assert!(small.convert(Some(&numeric(0, POS, 0, &[999]))).is_ok());
    assert_eq!(
        code(small.convert(Some(&numeric(0, POS, 0, &[1000])))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    assert_eq!(
        small.convert(None).expect("null"),
        ColumnData::Numeric(None)
    );
    // decimal(38,38) has no tiberius representation.
    assert!(ColumnFit::new(&c, &target("amount", "decimal", 17, 38, 38)).is_err());
}

#[test]
fn fit_time_and_timestamps_to_column_scale() {
    let t = col("t", "time without time zone", 1083);
    let f6 = ColumnFit::new(&t, &target("t", "time", 5, 15, 6)).expect("time(6)");
    match f6.convert(Some(&i64be(45_296_789_012))).expect("value") {
        // Sent as time(7) (the insert path binds time(7); the server narrows it to time(6)
        // exactly): 100 ns increments.
        ColumnData::Time(Some(v)) => assert_eq!((v.increments(), v.scale()), (452_967_890_120, 7)),
        other => panic!("not a time: {other:?}"),
    }
    // time(3): whole milliseconds load, a value with microseconds is refused (not rounded).
    let f3 = ColumnFit::new(&t, &target("t", "time", 4, 12, 3)).expect("time(3)");
    assert!(f3.convert(Some(&i64be(45_296_789_000))).is_ok());
    let e = f3
        .convert(Some(&i64be(45_296_789_012)))
        .expect_err("refused");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    assert!(
        e.message().starts_with(COLUMN_VALUE_INEXACT),
        "{}",
        e.message()
    );
    assert!(e.message().contains("\"t\""), "{}", e.message());

    let ts = col("ts", "timestamp without time zone", 1114);
    let f7 = ColumnFit::new(&ts, &target("ts", "datetime2", 8, 27, 7)).expect("datetime2(7)");
    assert_eq!(
        dt2(f7.convert(Some(&i64be(-1))).expect("value")),
        (730_118, 863_999_999_990, 7)
    );
    assert_eq!(f7.convert(None).expect("null"), ColumnData::DateTime2(None));
    // timestamp without zone has no offset to give datetimeoffset.
    assert!(ColumnFit::new(&ts, &target("ts", "datetimeoffset", 10, 34, 7)).is_err());
    // timestamp into datetime is accepted (on its 1/300 s grid, see fit_datetime_*).
    assert!(ColumnFit::new(&ts, &target("ts", "datetime", 8, 23, 3)).is_ok());

    // datetime2(0..5): the value at the column's scale, exactly; digits beyond it are refused,
    // never rounded. 762_525_296_789_000 µs = 2024-02-26 12:34:56.789 (day 738_944).
    let f3 = ColumnFit::new(&ts, &target("ts", "datetime2", 7, 23, 3)).expect("datetime2(3)");
    assert_eq!(
        dt2(f3
            .convert(Some(&i64be(762_525_296_789_000)))
            .expect("milliseconds fit")),
        (738_944, 45_296_789, 3)
    );
    assert_eq!(
        code(f3.convert(Some(&i64be(762_525_296_789_012)))),
        ErrorCode::TargetColumnTypeUnsupported,
        "12 µs beyond scale 3"
    );
    let f0 = ColumnFit::new(&ts, &target("ts", "datetime2", 6, 19, 0)).expect("datetime2(0)");
    assert_eq!(
        dt2(f0
            .convert(Some(&i64be(762_525_296_000_000)))
            .expect("whole seconds fit")),
        (738_944, 45_296, 0)
    );
    assert_eq!(
        code(f0.convert(Some(&i64be(762_525_296_000_001)))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    // A refusal names the column, never the value.
    let e = f0
        .convert(Some(&i64be(762_525_296_000_001)))
        .expect_err("refused");
    assert!(e.message().contains("\"ts\""), "{}", e.message());
    assert!(!e.message().contains("762525296000001"), "{}", e.message());
    let f5 = ColumnFit::new(&ts, &target("ts", "datetime2", 8, 25, 5)).expect("datetime2(5)");
    assert_eq!(
        dt2(f5
            .convert(Some(&i64be(762_525_296_789_010)))
            .expect("10 µs steps fit")),
        (738_944, 4_529_678_901, 5)
    );
    assert!(ColumnFit::new(&ts, &target("ts", "datetime2", 8, 27, 8)).is_err());

    let tz = col("tz", "timestamp with time zone", 1184);
    let fo = ColumnFit::new(&tz, &target("tz", "datetimeoffset", 10, 34, 7)).expect("dto(7)");
    match fo
        .convert(Some(&i64be(762_525_296_789_012)))
        .expect("value")
    {
        ColumnData::DateTimeOffset(Some(v)) => {
            assert_eq!(v.offset(), 0);
            let d = v.datetime2();
            assert_eq!(
                (d.date().days(), d.time().increments(), d.time().scale()),
                (738_944, 452_967_890_120, 7)
            );
        }
        other => panic!("not a datetimeoffset: {other:?}"),
    }
    let fu = ColumnFit::new(&tz, &target("tz", "datetime2", 7, 26, 6)).expect("UTC datetime2(6)");
    assert_eq!(
        dt2(fu
            .convert(Some(&i64be(762_525_296_789_012)))
            .expect("value")),
        (738_944, 45_296_789_012, 6)
    );
}

#[test]
fn fit_text_binary_and_guid() {
    let s = col("s", "character varying(10)", 1043);
    // nvarchar(2): max_length 4 bytes. "é🎉" needs 3 UTF-16 units = 6 bytes.
    let f = ColumnFit::new(&s, &target("s", "nvarchar", 4, 0, 0)).expect("nvarchar");
    assert_eq!(
        code(f.convert(Some("é🎉".as_bytes()))),
        ErrorCode::TargetColumnTypeUnsupported
    );
    assert_eq!(
        f.convert(Some("é!".as_bytes())).expect("2 units"),
        ColumnData::String(Some("é!".into()))
    );
    assert_eq!(f.convert(None).expect("null"), ColumnData::String(None));
    let max = ColumnFit::new(&s, &target("s", "nvarchar", -1, 0, 0)).expect("nvarchar(max)");
    assert!(max.convert(Some("é🎉".as_bytes())).is_ok());
    // A varchar column without a code page the host can check is refused; nchar is accepted
    // (values that fill it exactly, see fit_fixed_length_*).
    assert!(ColumnFit::new(&s, &target("s", "varchar", 10, 0, 0)).is_err());
    assert!(ColumnFit::new(&s, &target("s", "nchar", 20, 0, 0)).is_ok());

    let b = col("b", "bytea", 17);
    let fb = ColumnFit::new(&b, &target("b", "varbinary", 2, 0, 0)).expect("varbinary(2)");
    assert!(fb.convert(Some(&[1, 2])).is_ok());
    assert!(fb.convert(Some(&[1, 2, 3])).is_err());
    assert_eq!(fb.convert(None).expect("null"), ColumnData::Binary(None));

    let u = col("u", "uuid", 2950);
    let fg = ColumnFit::new(&u, &target("u", "uniqueidentifier", 16, 0, 0)).expect("guid");
    assert_eq!(fg.convert(None).expect("null"), ColumnData::Guid(None));
    assert!(ColumnFit::new(&u, &target("u", "nvarchar", 72, 0, 0)).is_err());
}

#[test]
fn plan_requires_same_columns_in_order() {
    let sources = vec![col("id", "integer", 23), col("v", "text", 25)];
    let targets = vec![
        target("id", "int", 4, 10, 0),
        target("v", "nvarchar", -1, 0, 0),
    ];
    let plan = plan_columns(&sources, &targets).expect("matches");
    assert_eq!(plan.len(), 2);
    assert_eq!(plan[1].source_type(), PgType::Text);
    let swapped = vec![targets[1].clone(), targets[0].clone()];
    assert_eq!(
        code(plan_columns(&sources, &swapped)),
        ErrorCode::TargetTableInvalid
    );
    assert_eq!(
        code(plan_columns(&sources, &targets[..1])),
        ErrorCode::TargetTableInvalid
    );
}

/// Hands out one byte per `read`, so every header word, length and field crosses reads.
struct Trickle(Cursor<Vec<u8>>);

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(1);
        self.0.read(&mut buf[..n])
    }
}

#[test]
fn reader_streams_across_reads_and_large_fields() {
    // A 300 000-byte field is larger than the reader's 256 KiB buffer.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let bytes = encode_for_tests(&[
        vec![Some(&i32be(1)), Some(&big)],
        vec![Some(&i32be(2)), None],
    ]);
    let r = receipt(&bytes, 2, 2);
    let mut reader = TupleReader::new(Trickle(Cursor::new(bytes.clone())), &r, 1).expect("header");
    let first = reader.next_tuple().expect("tuple").expect("first");
    assert_eq!(first.field(1).map(<[u8]>::len), Some(300_000));
    assert_eq!(first.field(1), Some(&big[..]));
    let second = reader.next_tuple().expect("tuple").expect("second");
    assert_eq!(second.field(0), Some(&i32be(2)[..]));
    assert!(reader.next_tuple().expect("verified").is_none());
    assert_eq!(reader.bytes(), bytes.len() as u64);
}

/// Live round trip of what tiberius 0.13 newly carries: `datetime2(0)`, `(3)` and `(5)` columns
/// and column names that are reserved words or irregular identifiers (bracket-quoted in the
/// `INSERT BULK` column list), bulk-loaded from a binary COPY payload and read back exactly; a
/// value with digits beyond a column's scale refuses the load with nothing stored.
#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_bulk_load_round_trips_datetime2_scales_and_quoted_names() {
    use dpone_adapter_mssql::{conn, sql, stage};
    let url = conn::test_url().unwrap_or_else(|reason| panic!("{reason}"));
    let mut c = conn::connect(&url).await.expect("connect");
    let name = format!(
        "{}bulk_{}_{}",
        sql::SCRATCH_PREFIX,
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    );
    conn::execute(
        &mut c,
        "create",
        &format!("CREATE DATABASE {};", sql::ident(&name)),
    )
    .await
    .expect("create database");
    let run = async {
        conn::execute(&mut c, "use", &format!("USE {};", sql::ident(&name))).await?;
        conn::execute(
            &mut c,
            "ddl",
            "CREATE TABLE [dbo].[t] ([order] bigint NOT NULL PRIMARY KEY, \
             [two words] datetime2(0) NULL, [a]]b] datetime2(3) NULL, [user] datetime2(5) NULL);",
        )
        .await?;
        Ok::<(), conn::ConnError>(())
    };
    run.await.expect("scratch table");
    let columns = vec![
        col("order", "bigint", 20),
        col("two words", "timestamp without time zone", 1114),
        col("a]b", "timestamp without time zone", 1114),
        col("user", "timestamp without time zone", 1114),
    ];
    // 2024-02-26 12:34:56 (+ .789 / + .78901): 762_525_296_000_000 µs since 2000-01-01.
    let (s0, s3, s5) = (
        i64be(762_525_296_000_000),
        i64be(762_525_296_789_000),
        i64be(762_525_296_789_010),
    );
    let store = MemStore::default();
    let ok = stored(
        &store,
        encode_for_tests(&[
            vec![Some(&i64be(1)), Some(&s0), Some(&s3), Some(&s5)],
            vec![Some(&i64be(2)), None, None, None],
        ]),
        4,
        2,
    );
    let sent = stage::load_staging(&mut c, "[dbo].[t]", &columns, 1, &ok, &store)
        .await
        .expect("bulk load");
    assert_eq!(sent, 2);
    let rows = c
        .query(
            "SELECT CONVERT(varchar(40), [two words], 126), CONVERT(varchar(40), [a]]b], 126), \
             CONVERT(varchar(40), [user], 126) FROM [dbo].[t] WHERE [order] = @P1;",
            &[&1i64],
        )
        .await
        .expect("read")
        .into_first_result()
        .await
        .expect("rows");
    let got: Vec<Option<&str>> = (0..3).map(|i| rows[0].get::<&str, _>(i)).collect();
    assert_eq!(
        got,
        [
            Some("2024-02-26T12:34:56"),
            Some("2024-02-26T12:34:56.789"),
            Some("2024-02-26T12:34:56.78901"),
        ]
    );
    // One microsecond beyond datetime2(0): refused before it is sent, nothing more stored.
    let bad = stored(
        &store,
        encode_for_tests(&[vec![
            Some(&i64be(3)),
            Some(&i64be(762_525_296_000_001)),
            None,
            None,
        ]]),
        4,
        1,
    );
    let e = stage::load_staging(&mut c, "[dbo].[t]", &columns, 1, &bad, &store)
        .await
        .expect_err("refused");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
    drop(c);
    let mut c = conn::connect(&url).await.expect("reconnect");
    conn::execute(&mut c, "drop", &sql::drop_scratch_database(&name))
        .await
        .expect("drop scratch database");
}

// ---------------------------------------------------------------------------------------------
// Types accepted with per-value checks (both load paths)
// ---------------------------------------------------------------------------------------------

fn i16be(v: i16) -> Vec<u8> {
    v.to_be_bytes().to_vec()
}

/// PostgreSQL timestamp: `days` after 2000-01-01 plus `micros` into the day.
fn pg_ts(days: i64, micros: i64) -> Vec<u8> {
    i64be(days * 86_400_000_000 + micros)
}

/// SQL Server `date` day (since 0001-01-01) of 2000-01-01.
const PG_EPOCH_DAY: i64 = 730_119;

fn with_code_page(mut row: ColumnRow, cp: u32) -> ColumnRow {
    row.code_page = Some(cp);
    row
}

/// A refusal: the column type's code, the detail code first, the column named, the value not.
fn refused_value(fit: &ColumnFit, bytes: &[u8], column: &str, why: &str) {
    let e = fit.convert(Some(bytes)).expect_err("refused");
    assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported, "{e}");
    let m = e.message();
    assert!(m.starts_with(COLUMN_VALUE_INEXACT), "{m}");
    assert!(m.contains(&format!("column {column:?}")), "{m}");
    assert!(m.contains(why), "{m}");
}

#[test]
fn fit_tinyint_from_int2_and_int4_in_range_only() {
    for (src, bytes) in [
        (
            col("n", "smallint", 21),
            [i16be(0), i16be(255), i16be(256), i16be(-1)],
        ),
        (
            col("n", "integer", 23),
            [i32be(0), i32be(255), i32be(256), i32be(-1)],
        ),
    ] {
        let f = ColumnFit::new(&src, &target("n", "tinyint", 1, 3, 0)).expect("tinyint");
        assert_eq!(
            f.convert(Some(&bytes[0])).expect("0"),
            ColumnData::U8(Some(0))
        );
        assert_eq!(
            f.convert(Some(&bytes[1])).expect("255"),
            ColumnData::U8(Some(255))
        );
        refused_value(&f, &bytes[2], "n", "0 .. 255");
        refused_value(&f, &bytes[3], "n", "0 .. 255");
        assert_eq!(f.convert(None).expect("null"), ColumnData::U8(None));
    }
    // int8 could never be narrowed safely by type: refused.
    assert!(ColumnFit::new(&col("n", "bigint", 20), &target("n", "tinyint", 1, 3, 0)).is_err());
}

#[test]
fn fit_money_and_smallmoney_at_four_decimals_within_range() {
    let c = col("m", "numeric", 1700);
    let money = ColumnFit::new(&c, &target("m", "money", 8, 19, 4)).expect("money");
    let num4 = |v: ColumnData<'static>| match v {
        ColumnData::Numeric(Some(n)) => (n.value(), n.scale()),
        other => panic!("not a numeric: {other:?}"),
    };
    // 922337203685477.5807 = groups 922 3372 0368 5477 . 5807 (weight 3): i64::MAX / 10^4.
    let max = numeric(3, POS, 4, &[922, 3372, 368, 5477, 5807]);
    assert_eq!(
        num4(money.convert(Some(&max)).expect("max")),
        (i64::MAX as i128, 4)
    );
    let min = numeric(3, NEG, 4, &[922, 3372, 368, 5477, 5808]);
    assert_eq!(
        num4(money.convert(Some(&min)).expect("min")),
        (i64::MIN as i128, 4)
    );
    refused_value(
        &money,
        &numeric(3, POS, 4, &[922, 3372, 368, 5477, 5808]),
        "m",
        "exceeds money",
    );
    // 1.23456: a fifth decimal would be rounded by money.
    refused_value(
        &money,
        &numeric(0, POS, 5, &[1, 2345, 6000]),
        "m",
        "4 decimals",
    );
    // 1.23450 (display scale 5, trailing zero) is exactly 1.2345.
    assert_eq!(
        num4(
            money
                .convert(Some(&numeric(0, POS, 5, &[1, 2345])))
                .expect("1.2345")
        ),
        (12_345, 4)
    );
    let small = ColumnFit::new(&c, &target("m", "smallmoney", 4, 10, 4)).expect("smallmoney");
    // 214748.3647 = groups 21 4748 . 3647 (weight 1): i32::MAX / 10^4.
    assert_eq!(
        num4(
            small
                .convert(Some(&numeric(1, POS, 4, &[21, 4748, 3647])))
                .expect("max")
        ),
        (i32::MAX as i128, 4)
    );
    assert_eq!(
        num4(
            small
                .convert(Some(&numeric(1, NEG, 4, &[21, 4748, 3648])))
                .expect("min")
        ),
        (i32::MIN as i128, 4)
    );
    refused_value(
        &small,
        &numeric(1, POS, 4, &[21, 4748, 3648]),
        "m",
        "exceeds smallmoney",
    );
    assert_eq!(
        small.convert(None).expect("null"),
        ColumnData::Numeric(None)
    );
    // float into money is refused by type.
    assert!(
        ColumnFit::new(
            &col("m", "double precision", 701),
            &target("m", "money", 8, 19, 4)
        )
        .is_err()
    );
}

#[test]
fn fit_datetime_on_its_grid_and_range() {
    let c = col("d", "timestamp without time zone", 1114);
    let f = ColumnFit::new(&c, &target("d", "datetime", 8, 23, 3)).expect("datetime");
    let dt = |v: ColumnData<'static>| match v {
        ColumnData::DateTime(Some(d)) => (d.days(), d.seconds_fragments()),
        other => panic!("not a datetime: {other:?}"),
    };
    // 1753-01-01 is SQL day 639_905, 53_690 days before 1900-01-01.
    let first = pg_ts(639_905 - PG_EPOCH_DAY, 0);
    assert_eq!(dt(f.convert(Some(&first)).expect("first")), (-53_690, 0));
    // 9999-12-31 23:59:59.990: day 3_652_058 (2_958_463 after 1900), 86_399.99 s = 25_919_997
    // ticks of 1/300 s.
    let last = pg_ts(3_652_058 - PG_EPOCH_DAY, 86_399_990_000);
    assert_eq!(
        dt(f.convert(Some(&last)).expect("last")),
        (2_958_463, 25_919_997)
    );
    // 2000-01-01 00:00:00.010 = 3 ticks.
    assert_eq!(
        dt(f.convert(Some(&pg_ts(0, 10_000))).expect("10 ms")),
        (36_524, 3)
    );
    refused_value(&f, &pg_ts(639_904 - PG_EPOCH_DAY, 0), "d", "1753-01-01");
    // .001 s and .003333 s are not exact multiples of 1/300 s in microseconds.
    refused_value(&f, &pg_ts(0, 1_000), "d", "1/300-second grid");
    refused_value(&f, &pg_ts(0, 3_333), "d", "1/300-second grid");
    assert_eq!(f.convert(None).expect("null"), ColumnData::DateTime(None));
    // timestamptz as UTC.
    assert!(
        ColumnFit::new(
            &col("d", "timestamp with time zone", 1184),
            &target("d", "datetime", 8, 23, 3)
        )
        .is_ok()
    );
}

#[test]
fn fit_smalldatetime_whole_minutes_in_range() {
    let c = col("d", "timestamp without time zone", 1114);
    let f = ColumnFit::new(&c, &target("d", "smalldatetime", 4, 16, 0)).expect("smalldatetime");
    let sdt = |v: ColumnData<'static>| match v {
        ColumnData::SmallDateTime(Some(d)) => (d.days(), d.seconds_fragments()),
        other => panic!("not a smalldatetime: {other:?}"),
    };
    // 1900-01-01 00:00 is SQL day 693_595.
    assert_eq!(
        sdt(f
            .convert(Some(&pg_ts(693_595 - PG_EPOCH_DAY, 0)))
            .expect("first")),
        (0, 0)
    );
    // 2079-06-06 23:59: day 65_535 after 1900-01-01, minute 1_439.
    let last = pg_ts(693_595 + 65_535 - PG_EPOCH_DAY, 1_439 * 60_000_000);
    assert_eq!(sdt(f.convert(Some(&last)).expect("last")), (65_535, 1_439));
    refused_value(
        &f,
        &pg_ts(693_595 + 65_536 - PG_EPOCH_DAY, 0),
        "d",
        "2079-06-06",
    );
    refused_value(
        &f,
        &pg_ts(693_594 - PG_EPOCH_DAY, 1_439 * 60_000_000),
        "d",
        "1900-01-01",
    );
    refused_value(&f, &pg_ts(0, 30_000_000), "d", "whole minute");
    assert_eq!(
        f.convert(None).expect("null"),
        ColumnData::SmallDateTime(None)
    );
}

#[test]
fn fit_time_and_datetimeoffset_at_any_scale() {
    let t = col("t", "time without time zone", 1083);
    for scale in 0..=7u8 {
        let f = ColumnFit::new(&t, &target("t", "time", 5, 8 + scale, scale)).expect("time(n)");
        // 12:34:56 fits every scale, sent as time(7).
        match f
            .convert(Some(&i64be(45_296_000_000)))
            .expect("whole second")
        {
            ColumnData::Time(Some(v)) => {
                assert_eq!((v.increments(), v.scale()), (452_960_000_000, 7))
            }
            other => panic!("not a time: {other:?}"),
        }
        let one_micro = f.convert(Some(&i64be(45_296_000_001)));
        assert_eq!(one_micro.is_ok(), scale >= 6, "time({scale})");
    }
    let tz = col("tz", "timestamp with time zone", 1184);
    let f3 = ColumnFit::new(&tz, &target("tz", "datetimeoffset", 8, 30, 3)).expect("dto(3)");
    match f3.convert(Some(&i64be(762_525_296_789_000))).expect("ms") {
        ColumnData::DateTimeOffset(Some(v)) => {
            assert_eq!(v.offset(), 0);
            assert_eq!(v.datetime2().time().scale(), 7);
            assert_eq!(v.datetime2().time().increments(), 452_967_890_000);
        }
        other => panic!("not a datetimeoffset: {other:?}"),
    }
    refused_value(&f3, &i64be(762_525_296_789_012), "tz", "scale 3");
}

#[test]
fn fit_varchar_and_char_by_code_page() {
    let s = col("s", "text", 25);
    // Windows-1252: every character of the code page (0x20..=0xFF, the five unassigned bytes
    // decode to C1 controls in Windows' table and in encoding_rs' alike) loads.
    let all: String = encoding_rs::WINDOWS_1252
        .decode_without_bom_handling(&(0x20u8..=0xFF).collect::<Vec<u8>>())
        .0
        .into_owned();
    assert_eq!(
        dpone_adapter_mssql::stage::code_page_bytes(&all, 1252),
        Some(224)
    );
    let wide = ColumnFit::new(&s, &with_code_page(target("s", "varchar", 224, 0, 0), 1252))
        .expect("varchar(224)");
    assert_eq!(
        wide.convert(Some(all.as_bytes())).expect("whole code page"),
        ColumnData::String(Some(all.clone().into()))
    );
    let f = ColumnFit::new(&s, &with_code_page(target("s", "varchar", 3, 0, 0), 1252))
        .expect("varchar(3)");
    // "€ab": € is one byte (0x80) in 1252.
    assert!(f.convert(Some("€ab".as_bytes())).is_ok());
    refused_value(&f, "€abc".as_bytes(), "s", "3 bytes");
    // ā (U+0101) has no 1252 byte: SQL Server would store a best-fit "a".
    refused_value(&f, "ā".as_bytes(), "s", "code page (windows-1252)");
    refused_value(&f, "🎉".as_bytes(), "s", "code page");
    // Cyrillic in 1251, not in 1252.
    let cyr =
        ColumnFit::new(&s, &with_code_page(target("s", "varchar", 10, 0, 0), 1251)).expect("1251");
    assert!(cyr.convert(Some("Жук".as_bytes())).is_ok());
    refused_value(&wide, "Жук".as_bytes(), "s", "code page");
    // A _UTF8 collation (65001) holds every character; the limit is in UTF-8 bytes.
    let utf8 =
        ColumnFit::new(&s, &with_code_page(target("s", "varchar", 6, 0, 0), 65001)).expect("utf8");
    assert!(utf8.convert(Some("é🎉".as_bytes())).is_ok());
    refused_value(&utf8, "éé🎉".as_bytes(), "s", "6 bytes");
    let max = ColumnFit::new(&s, &with_code_page(target("s", "varchar", -1, 0, 0), 65001))
        .expect("varchar(max)");
    let long = "ж".repeat(100_000);
    assert!(max.convert(Some(long.as_bytes())).is_ok());
    // Legacy multi-byte and OEM code pages are refused by type.
    for cp in [932, 936, 949, 950, 437, 850] {
        assert!(ColumnFit::new(&s, &with_code_page(target("s", "varchar", 10, 0, 0), cp)).is_err());
    }
}

#[test]
fn fit_fixed_length_columns_only_for_values_the_padding_leaves_unchanged() {
    let s = col("s", "character(3)", 1042);
    let c =
        ColumnFit::new(&s, &with_code_page(target("s", "char", 3, 0, 0), 1252)).expect("char(3)");
    assert!(c.convert(Some(b"abc")).is_ok());
    // bpchar(3) comes padded; "ab" from a text source would be padded to "ab " by SQL Server.
    assert!(c.convert(Some(b"ab ")).is_ok());
    refused_value(&c, b"ab", "s", "pad");
    refused_value(&c, b"abcd", "s", "3 bytes");
    // nchar(2): 4 bytes, two UTF-16 units.
    let n = ColumnFit::new(&s, &target("s", "nchar", 4, 0, 0)).expect("nchar(2)");
    assert!(n.convert(Some("é!".as_bytes())).is_ok());
    refused_value(&n, b"a", "s", "pad");
    refused_value(&n, "é🎉".as_bytes(), "s", "longer than nchar(2)");
    // binary(2).
    let b = col("b", "bytea", 17);
    let fb = ColumnFit::new(&b, &target("b", "binary", 2, 0, 0)).expect("binary(2)");
    assert!(fb.convert(Some(&[0, 0])).is_ok());
    refused_value(&fb, &[1], "b", "pad");
    refused_value(&fb, &[1, 2, 3], "b", "longer than binary(2)");
}

#[test]
fn insert_path_sends_datetime2_at_scale_7_and_bulk_at_the_column_scale() {
    let sources = vec![
        col("id", "bigint", 20),
        col("ts", "timestamp without time zone", 1114),
        col("doc", "text", 25),
    ];
    let bulk = vec![
        target("id", "bigint", 8, 19, 0),
        target("ts", "datetime2", 7, 23, 3),
        target("doc", "nvarchar", 4000, 0, 0),
    ];
    let mut insert = bulk.clone();
    insert[2] = target("doc", "nvarchar", -1, 0, 0);
    let ms = i64be(762_525_296_789_000);
    let plan = plan_columns(&sources, &bulk).expect("bulk");
    assert_eq!(
        dt2(plan[1].convert(Some(&ms)).expect("v")),
        (738_944, 45_296_789, 3)
    );
    let plan = plan_columns(&sources, &insert).expect("insert");
    assert_eq!(
        dt2(plan[1].convert(Some(&ms)).expect("v")),
        (738_944, 452_967_890_000, 7)
    );
    refused_value(&plan[1], &i64be(762_525_296_789_001), "ts", "scale 3");
    // A (max) value over 65,535 bytes: the bulk load could not carry it, the insert path can.
    let big = "x".repeat(70_000);
    assert!(plan[2].convert(Some(big.as_bytes())).is_ok());
}

// ---------------------------------------------------------------------------------------------
// The insert path's statements and batches
// ---------------------------------------------------------------------------------------------

#[test]
fn staging_insert_statement_and_batch_limits() {
    use dpone_adapter_mssql::sql::{INSERT_MAX_PARAMS, insert_batch_rows, staging_insert};
    assert_eq!(
        staging_insert("[s].[t]", &["id", "a]b"], 2),
        "INSERT INTO [s].[t] ([id], [a]]b]) VALUES (@P1, @P2), (@P3, @P4);"
    );
    assert_eq!(
        staging_insert("[s].[t]", &["id"], 1),
        "INSERT INTO [s].[t] ([id]) VALUES (@P1);"
    );
    // 1,000 rows at most; 2,098 values at most (2,100 RPC parameters less sp_executesql's two).
    assert_eq!(insert_batch_rows(1), 1000);
    assert_eq!(insert_batch_rows(2), 1000);
    assert_eq!(insert_batch_rows(3), 699);
    assert_eq!(insert_batch_rows(10), 209);
    assert_eq!(insert_batch_rows(1024), 2);
    assert_eq!(insert_batch_rows(4000), 1);
    for n in 1..=1024 {
        assert!(insert_batch_rows(n) * n <= INSERT_MAX_PARAMS, "{n} columns");
    }
    // The statement parses as T-SQL.
    let sql = staging_insert("[s].[t]", &["id", "v"], 3);
    sqlparser::parser::Parser::parse_sql(&sqlparser::dialect::MsSqlDialect {}, &sql)
        .expect("parses");
}

#[test]
fn insert_batches_fill_to_the_parameter_limit_and_the_byte_bound() {
    use dpone_adapter_mssql::stage::{INSERT_BATCH_BYTES, InsertBatch};
    let sources = vec![col("id", "bigint", 20), col("doc", "text", 25)];
    let targets = vec![
        target("id", "bigint", 8, 19, 0),
        target("doc", "nvarchar", -1, 0, 0),
    ];
    let plan = plan_columns(&sources, &targets).expect("plan");
    let rows: Vec<Vec<u8>> = (0..1001).map(i64be).collect();
    let tuples: Vec<Vec<Option<&[u8]>>> = rows
        .iter()
        .map(|id| vec![Some(&id[..]), Some(&b"v"[..])])
        .collect();
    let bytes = encode_for_tests(&tuples);
    let r = receipt(&bytes, 2, 1001);
    let mut reader = TupleReader::new(Cursor::new(bytes), &r, 1).expect("header");
    let mut batch = InsertBatch::default();
    let mut statements = Vec::new();
    while let Some(t) = reader.next_tuple().expect("tuple") {
        batch.push(&t, &plan).expect("fits");
        if batch.full(plan.len()) {
            statements.push(batch.take_query("[s].[t]", &["id", "doc"]).param_count());
        }
    }
    if batch.rows > 0 {
        statements.push(batch.take_query("[s].[t]", &["id", "doc"]).param_count());
    }
    // 1,000 rows of 2 parameters, then the last row.
    assert_eq!(statements, vec![2000, 2]);
    // One value of the byte bound fills a batch by itself.
    let big = vec![b'x'; INSERT_BATCH_BYTES];
    let one = encode_for_tests(&[vec![Some(&i64be(1)[..]), Some(&big[..])]]);
    let r = receipt(&one, 2, 1);
    let mut reader = TupleReader::new(Cursor::new(one), &r, 1).expect("header");
    let mut batch = InsertBatch::default();
    let t = reader.next_tuple().expect("tuple").expect("row");
    batch.push(&t, &plan).expect("fits");
    assert!(batch.full(plan.len()));
}

// ---------------------------------------------------------------------------------------------
// Live round trips, one per accepted type (ignored with their SKIP reason without a server)
// ---------------------------------------------------------------------------------------------

/// What a read-back expression returns for one row.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Back {
    Null,
    Int(i64),
    Text(String),
    Bytes(Vec<u8>),
}

/// A scratch database (`dpone_t_types_*`) with one connection in it, dropped at the end.
struct Live {
    url: String,
    name: String,
    c: dpone_adapter_mssql::conn::MssqlClient,
}

impl Live {
    async fn new(tag: &str) -> Live {
        use dpone_adapter_mssql::{conn, server, sql};
        let url = conn::test_url().unwrap_or_else(|reason| panic!("{reason}"));
        let mut c = conn::connect(&url).await.expect("connect");
        let facts = conn::server_facts(&mut c).await.expect("server facts");
        if let Err(e) = server::classify(&facts) {
            panic!("DPONE_XMIN_TARGET_SERVER_UNSUPPORTED: {e}");
        }
        let name = format!(
            "{}types_{tag}_{}_{}",
            sql::SCRATCH_PREFIX,
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        );
        conn::execute(
            &mut c,
            "create",
            &format!("CREATE DATABASE {};", sql::ident(&name)),
        )
        .await
        .expect("create database");
        conn::execute(&mut c, "use", &format!("USE {};", sql::ident(&name)))
            .await
            .expect("use");
        Live { url, name, c }
    }

    /// Creates `[dbo].[<table>]` as `[id] bigint NOT NULL PRIMARY KEY, [v] <ty> NULL` and loads
    /// `values` (row i gets id i + 1) from a binary COPY payload of the `source` column type
    /// through the route's staging load; returns the load path's row count.
    async fn load(
        &mut self,
        table: &str,
        ty: &str,
        source: (&str, u32),
        values: &[Option<Vec<u8>>],
    ) -> Result<u64, dpone_engine_xmin::XminError> {
        use dpone_adapter_mssql::{conn, sql, stage};
        conn::execute(
            &mut self.c,
            "ddl",
            &format!(
                "CREATE TABLE [dbo].{} ([id] bigint NOT NULL PRIMARY KEY, [v] {ty} NULL);",
                sql::ident(table)
            ),
        )
        .await
        .expect("scratch table");
        let columns = vec![col("id", "bigint", 20), col("v", source.0, source.1)];
        let ids: Vec<Vec<u8>> = (1..=values.len() as i64).map(i64be).collect();
        let tuples: Vec<Vec<Option<&[u8]>>> = ids
            .iter()
            .zip(values)
            .map(|(id, v)| vec![Some(&id[..]), v.as_deref()])
            .collect();
        let store = MemStore::default();
        let payload = stored(&store, encode_for_tests(&tuples), 2, values.len() as u64);
        stage::load_staging(
            &mut self.c,
            &format!("[dbo].{}", sql::ident(table)),
            &columns,
            1,
            &payload,
            &store,
        )
        .await
    }

    /// A fresh session in the scratch database: a refused bulk load leaves its session mid-load,
    /// to be discarded (as the route discards the staging lease).
    async fn reconnect(&mut self) {
        use dpone_adapter_mssql::{conn, sql};
        self.c = conn::connect(&self.url).await.expect("reconnect");
        conn::execute(
            &mut self.c,
            "use",
            &format!("USE {};", sql::ident(&self.name)),
        )
        .await
        .expect("use");
    }

    /// `expr` over `[v]` for every row, by id.
    /// Loads `values` into a fresh `ty` table and asserts they read back (`expr`) as `expected`.
    async fn round_trip(
        &mut self,
        table: &str,
        ty: &str,
        source: (&str, u32),
        values: &[Option<Vec<u8>>],
        expr: &str,
        expected: &[Back],
    ) {
        self.load(table, ty, source, values).await.expect("load");
        assert_eq!(self.read(table, expr).await, expected, "{ty}");
    }

    async fn read(&mut self, table: &str, expr: &str) -> Vec<Back> {
        use dpone_adapter_mssql::sql;
        let rows = self
            .c
            .simple_query(format!(
                "SELECT {expr} FROM [dbo].{} ORDER BY [id];",
                sql::ident(table)
            ))
            .await
            .expect("read")
            .into_first_result()
            .await
            .expect("rows");
        rows.iter()
            .map(|r| {
                if let Ok(Some(v)) = r.try_get::<i64, _>(0) {
                    Back::Int(v)
                } else if let Ok(Some(v)) = r.try_get::<&str, _>(0) {
                    Back::Text(v.to_owned())
                } else if let Ok(Some(v)) = r.try_get::<&[u8], _>(0) {
                    Back::Bytes(v.to_vec())
                } else {
                    Back::Null
                }
            })
            .collect()
    }

    async fn drop_db(self) {
        use dpone_adapter_mssql::{conn, sql};
        drop(self.c);
        let mut c = conn::connect(&self.url).await.expect("reconnect");
        conn::execute(&mut c, "drop", &sql::drop_scratch_database(&self.name))
            .await
            .expect("drop scratch database");
    }
}

fn some(v: Vec<u8>) -> Option<Vec<u8>> {
    Some(v)
}

/// Microseconds since 0001-01-01 of a `datetime2(7)` conversion, read as `bigint`.
const SINCE_0001: &str =
    "DATEDIFF_BIG(MICROSECOND, CONVERT(datetime2(7), '0001-01-01'), CONVERT(datetime2(7), [v]))";

fn micros_0001(pg_days: i64, micros: i64) -> i64 {
    (PG_EPOCH_DAY + pg_days) * 86_400_000_000 + micros
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_tinyint() {
    let mut l = Live::new("tinyint").await;
    let vals = [some(i16be(0)), some(i16be(255)), None, some(i16be(7))];
    assert_eq!(
        l.load("t", "tinyint", ("smallint", 21), &vals)
            .await
            .expect("load"),
        4
    );
    assert_eq!(
        l.read("t", "CONVERT(bigint, [v])").await,
        [Back::Int(0), Back::Int(255), Back::Null, Back::Int(7)]
    );
    let e = l
        .load("u", "tinyint", ("integer", 23), &[some(i32be(256))])
        .await
        .expect_err("refused");
    assert!(e.message().starts_with(COLUMN_VALUE_INEXACT), "{e}");
    l.reconnect().await;
    assert_eq!(l.read("u", "CONVERT(bigint, [v])").await, []);
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_money_and_smallmoney() {
    let mut l = Live::new("money").await;
    let vals = [
        some(numeric(3, POS, 4, &[922, 3372, 368, 5477, 5807])),
        some(numeric(3, NEG, 4, &[922, 3372, 368, 5477, 5808])),
        some(numeric(0, POS, 5, &[1, 2345])),
        None,
    ];
    l.load("m", "money", ("numeric", 1700), &vals)
        .await
        .expect("load");
    let text = "CONVERT(nvarchar(40), CONVERT(decimal(19,4), [v]))";
    assert_eq!(
        l.read("m", text).await,
        [
            Back::Text("922337203685477.5807".into()),
            Back::Text("-922337203685477.5808".into()),
            Back::Text("1.2345".into()),
            Back::Null,
        ]
    );
    let vals = [
        some(numeric(1, POS, 4, &[21, 4748, 3647])),
        some(numeric(1, NEG, 4, &[21, 4748, 3648])),
    ];
    l.load("s", "smallmoney", ("numeric", 1700), &vals)
        .await
        .expect("load");
    assert_eq!(
        l.read("s", "CONVERT(nvarchar(40), CONVERT(decimal(10,4), [v]))")
            .await,
        [
            Back::Text("214748.3647".into()),
            Back::Text("-214748.3648".into())
        ]
    );
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_datetime() {
    let mut l = Live::new("datetime").await;
    let first = (639_905 - PG_EPOCH_DAY, 0);
    let last = (3_652_058 - PG_EPOCH_DAY, 86_399_990_000);
    let vals = [
        some(pg_ts(first.0, first.1)),
        some(pg_ts(last.0, last.1)),
        some(pg_ts(0, 10_000)),
        None,
    ];
    l.load(
        "d",
        "datetime",
        ("timestamp without time zone", 1114),
        &vals,
    )
    .await
    .expect("load");
    assert_eq!(
        l.read("d", SINCE_0001).await,
        [
            Back::Int(micros_0001(first.0, first.1)),
            Back::Int(micros_0001(last.0, last.1)),
            Back::Int(micros_0001(0, 10_000)),
            Back::Null,
        ]
    );
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_smalldatetime() {
    let mut l = Live::new("smalldatetime").await;
    let first = (693_595 - PG_EPOCH_DAY, 0);
    let last = (693_595 + 65_535 - PG_EPOCH_DAY, 1_439 * 60_000_000);
    let vals = [
        some(pg_ts(first.0, first.1)),
        some(pg_ts(last.0, last.1)),
        None,
    ];
    l.round_trip(
        "d",
        "smalldatetime",
        ("timestamp without time zone", 1114),
        &vals,
        SINCE_0001,
        &[
            Back::Int(micros_0001(first.0, first.1)),
            Back::Int(micros_0001(last.0, last.1)),
            Back::Null,
        ],
    )
    .await;
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_time_every_scale() {
    let mut l = Live::new("time").await;
    for scale in 0..=7u32 {
        // 23:59:59 plus the finest fraction the scale holds (µs at scale 6 and 7).
        let step = 10i64.pow(6u32.saturating_sub(scale));
        let last = 86_399_000_000 + (1_000_000 - step);
        let vals = [some(i64be(0)), some(i64be(last)), None];
        let table = format!("t{scale}");
        l.load(
            &table,
            &format!("time({scale})"),
            ("time without time zone", 1083),
            &vals,
        )
        .await
        .expect("load");
        assert_eq!(
            l.read(
                &table,
                "DATEDIFF_BIG(MICROSECOND, CONVERT(time(7), '00:00:00'), CONVERT(time(7), [v]))"
            )
            .await,
            [Back::Int(0), Back::Int(last), Back::Null],
            "time({scale})"
        );
    }
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_datetimeoffset_every_scale() {
    let mut l = Live::new("dto").await;
    for scale in 0..=7u32 {
        let step = 10i64.pow(6u32.saturating_sub(scale));
        let last = (3_652_058 - PG_EPOCH_DAY, 86_400_000_000 - step);
        let first = (-PG_EPOCH_DAY, 0);
        let vals = [
            some(pg_ts(first.0, first.1)),
            some(pg_ts(last.0, last.1)),
            None,
        ];
        let table = format!("o{scale}");
        l.load(
            &table,
            &format!("datetimeoffset({scale})"),
            ("timestamp with time zone", 1184),
            &vals,
        )
        .await
        .expect("load");
        assert_eq!(
            l.read(&table, SINCE_0001).await,
            [
                Back::Int(micros_0001(first.0, first.1)),
                Back::Int(micros_0001(last.0, last.1)),
                Back::Null
            ],
            "datetimeoffset({scale})"
        );
        assert_eq!(
            l.read(&table, "CONVERT(bigint, DATEPART(TZOFFSET, [v]))")
                .await,
            [Back::Int(0), Back::Int(0), Back::Null]
        );
    }
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_varchar_and_char_by_code_page() {
    let mut l = Live::new("varchar").await;
    let bytes = "CONVERT(varbinary(max), [v])";
    let back = "CONVERT(nvarchar(max), [v])";
    // Windows-1252: every character of the code page, at the column's full length.
    let all_bytes: Vec<u8> = (0x20u8..=0xFF).collect();
    let all = encoding_rs::WINDOWS_1252
        .decode_without_bom_handling(&all_bytes)
        .0
        .into_owned();
    let vals = [some(all.clone().into_bytes()), some(b"".to_vec()), None];
    l.load(
        "w",
        "varchar(224) COLLATE Latin1_General_100_CI_AS",
        ("text", 25),
        &vals,
    )
    .await
    .expect("load");
    assert_eq!(
        l.read("w", bytes).await,
        [Back::Bytes(all_bytes), Back::Bytes(vec![]), Back::Null]
    );
    assert_eq!(l.read("w", back).await[0], Back::Text(all.clone()));
    // Windows-1251.
    let cyr = "Жук ёлка Ђ";
    l.round_trip(
        "c",
        "varchar(20) COLLATE Cyrillic_General_100_CI_AS",
        ("text", 25),
        &[some(cyr.as_bytes().to_vec())],
        back,
        &[Back::Text(cyr.into())],
    )
    .await;
    // A _UTF8 collation (SQL Server 2019+): every character, and a (max) value over 65,535
    // bytes.
    let utf8 = "é🎉 ж ∑ 中";
    let big = "ж🎉".repeat(20_000);
    l.round_trip(
        "u",
        "varchar(max) COLLATE Latin1_General_100_CI_AS_SC_UTF8",
        ("text", 25),
        &[
            some(utf8.as_bytes().to_vec()),
            some(big.as_bytes().to_vec()),
        ],
        bytes,
        &[
            Back::Bytes(utf8.as_bytes().to_vec()),
            Back::Bytes(big.as_bytes().to_vec()),
        ],
    )
    .await;
    // char(n): values that fill it exactly.
    l.round_trip(
        "f",
        "char(3) COLLATE Latin1_General_100_CI_AS",
        ("character(3)", 1042),
        &[some(b"ab ".to_vec()), some(b"xyz".to_vec())],
        bytes,
        &[Back::Bytes(b"ab ".to_vec()), Back::Bytes(b"xyz".to_vec())],
    )
    .await;
    // A character outside the code page is refused before it is sent; nothing is stored.
    let e = l
        .load(
            "r",
            "varchar(10) COLLATE Latin1_General_100_CI_AS",
            ("text", 25),
            &[some(b"ok".to_vec()), some("ā".as_bytes().to_vec())],
        )
        .await
        .expect_err("refused");
    assert!(e.message().starts_with(COLUMN_VALUE_INEXACT), "{e}");
    l.reconnect().await;
    assert_eq!(l.read("r", bytes).await, []);
    l.drop_db().await;
}

fn utf16le(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_le_bytes).collect()
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_nvarchar_4000_max_and_nchar() {
    let mut l = Live::new("nvarchar").await;
    let bytes = "CONVERT(varbinary(max), [v])";
    // nvarchar(4000): 4,000 UTF-16 units, surrogate pairs included.
    let full = "🎉".repeat(1_000) + &"é".repeat(2_000);
    l.round_trip(
        "n",
        "nvarchar(4000) COLLATE Latin1_General_100_CI_AS",
        ("text", 25),
        &[some(full.as_bytes().to_vec()), None],
        bytes,
        &[Back::Bytes(utf16le(&full)), Back::Null],
    )
    .await;
    // nvarchar(max): 200,000 bytes.
    let big = "ж".repeat(100_000);
    l.round_trip(
        "m",
        "nvarchar(max) COLLATE Latin1_General_100_CI_AS",
        ("text", 25),
        &[some(big.as_bytes().to_vec()), some(b"".to_vec())],
        bytes,
        &[Back::Bytes(utf16le(&big)), Back::Bytes(vec![])],
    )
    .await;
    // nchar(4000): full-length values only.
    let n4000 = "x".repeat(4_000);
    l.round_trip(
        "c",
        "nchar(4000) COLLATE Latin1_General_100_CI_AS",
        ("text", 25),
        &[some(n4000.as_bytes().to_vec())],
        bytes,
        &[Back::Bytes(utf16le(&n4000))],
    )
    .await;
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_varbinary_max_and_binary() {
    let mut l = Live::new("binary").await;
    let bytes = "CONVERT(varbinary(max), [v])";
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    l.round_trip(
        "m",
        "varbinary(max)",
        ("bytea", 17),
        &[some(big.clone()), some(vec![]), some(vec![0, 0]), None],
        bytes,
        &[
            Back::Bytes(big),
            Back::Bytes(vec![]),
            Back::Bytes(vec![0, 0]),
            Back::Null,
        ],
    )
    .await;
    let full: Vec<u8> = (0..8000u32).map(|i| (i % 256) as u8).collect();
    l.round_trip(
        "v",
        "varbinary(8000)",
        ("bytea", 17),
        &[some(full.clone())],
        bytes,
        &[Back::Bytes(full)],
    )
    .await;
    let h: Vec<u8> = (0..32u8).collect();
    l.round_trip(
        "b",
        "binary(32)",
        ("bytea", 17),
        &[some(h.clone()), None],
        bytes,
        &[Back::Bytes(h), Back::Null],
    )
    .await;
    l.drop_db().await;
}

/// The finalizer's change detection compares `(max)` text as `varbinary(max)`: converted to
/// `varbinary(8000)` a value would be cut, and a change past 8,000 bytes read as "unchanged".
#[test]
fn finalizer_compares_max_text_whole() {
    use dpone_adapter_mssql::sql::BusinessColumn;
    let b = |ty: &str| BusinessColumn {
        name: "v".into(),
        type_sql: ty.into(),
        collation: None,
    };
    assert_eq!(
        b("nvarchar(max)").exact("s"),
        "CONVERT(varbinary(max), s.[v]), DATALENGTH(s.[v])"
    );
    assert_eq!(
        b("varchar(max)").exact("s"),
        "CONVERT(varbinary(max), s.[v]), DATALENGTH(s.[v])"
    );
    assert_eq!(
        b("char(10)").exact("s"),
        "CONVERT(varbinary(8000), s.[v]), DATALENGTH(s.[v])"
    );
    assert_eq!(b("varbinary(max)").exact("s"), "s.[v], DATALENGTH(s.[v])");
    assert_eq!(b("money").exact("s"), "s.[v]");
}

/// The insert path's rate against the bulk load's on the same rows (printed with
/// `--nocapture`): 20,000 rows of a 50-character text into `nvarchar(50)` (bulk load) and into
/// `nvarchar(max)` (insert path), both read back equal.
#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_load_rate_bulk_against_insert_path() {
    let mut l = Live::new("rate").await;
    const ROWS: usize = 20_000;
    let text = "x".repeat(50);
    let vals: Vec<Option<Vec<u8>>> = (0..ROWS).map(|_| some(text.as_bytes().to_vec())).collect();
    let mut rates = Vec::new();
    for (table, ty) in [("b", "nvarchar(50)"), ("i", "nvarchar(max)")] {
        let start = std::time::Instant::now();
        let n = l.load(table, ty, ("text", 25), &vals).await.expect("load");
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(n, ROWS as u64);
        let back = l.read(table, "CONVERT(nvarchar(max), [v])").await;
        assert_eq!(back.len(), ROWS);
        assert!(back.iter().all(|b| *b == Back::Text(text.clone())));
        rates.push((ty, ROWS as f64 / secs));
    }
    #[allow(clippy::print_stdout)] // the measurement is the output (`--nocapture`)
    {
        println!("staging load rate (rows/s): {rates:?}");
    }
    l.drop_db().await;
}

/// With the target's columns, the pre-export pass fits every non-key value exactly as the load
/// will: a value that would not read back equal is refused before any SQL Server object exists.
#[test]
fn export_fitted_refuses_inexact_values_before_staging() {
    use dpone_adapter_mssql::stage::check_export_fitted;
    let store = MemStore::default();
    let columns = vec![
        col("id", "integer", 23),
        col("qty", "smallint", 21),
        col("at", "timestamp without time zone", 1114),
    ];
    let targets = vec![
        target("id", "int", 4, 10, 0),
        target("qty", "tinyint", 1, 3, 0),
        target("at", "datetime", 8, 23, 3),
        target("__dpone__updated_at", "datetime2", 8, 27, 7),
    ];
    let keys = vec![key("id", KeyType::Int)];
    let ok = stored(
        &store,
        encode_for_tests(&[vec![
            Some(&i32be(1)),
            Some(&i16be(255)),
            Some(&pg_ts(0, 10_000)),
        ]]),
        3,
        1,
    );
    let env = envelope(columns.clone(), 1, ok, None);
    check_export_fitted(&env, &store, &keys, &targets).expect("fits");
    for (qty, at, column) in [
        (i16be(256), pg_ts(0, 10_000), "qty"),
        (i16be(1), pg_ts(0, 1_000), "at"),
    ] {
        let bad = stored(
            &store,
            encode_for_tests(&[vec![Some(&i32be(1)), Some(&qty), Some(&at)]]),
            3,
            1,
        );
        let env = envelope(columns.clone(), 1, bad, None);
        // Without the target's columns the values decode; with them they are refused.
        check_export(&env, &store, &keys).expect("decodes");
        let e = check_export_fitted(&env, &store, &keys, &targets).expect_err("refused");
        assert_eq!(e.code(), ErrorCode::TargetColumnTypeUnsupported);
        assert!(
            e.message().starts_with(COLUMN_VALUE_INEXACT),
            "{}",
            e.message()
        );
        assert!(
            e.message().contains(&format!("{column:?}")),
            "{}",
            e.message()
        );
    }
}

// Live round trips of the types the bulk load carried before (same helper, same SKIP).

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_bit_and_integers() {
    let mut l = Live::new("ints").await;
    let as_int = "CONVERT(bigint, [v])";
    l.load(
        "b",
        "bit",
        ("boolean", 16),
        &[some(vec![1]), some(vec![0]), None],
    )
    .await
    .expect("load");
    assert_eq!(
        l.read("b", as_int).await,
        [Back::Int(1), Back::Int(0), Back::Null]
    );
    l.round_trip(
        "s",
        "smallint",
        ("smallint", 21),
        &[some(i16be(i16::MIN)), some(i16be(i16::MAX))],
        as_int,
        &[Back::Int(i16::MIN.into()), Back::Int(i16::MAX.into())],
    )
    .await;
    l.round_trip(
        "i",
        "int",
        ("integer", 23),
        &[some(i32be(i32::MIN)), some(i32be(i32::MAX))],
        as_int,
        &[Back::Int(i32::MIN.into()), Back::Int(i32::MAX.into())],
    )
    .await;
    l.round_trip(
        "g",
        "bigint",
        ("bigint", 20),
        &[some(i64be(i64::MIN)), some(i64be(i64::MAX))],
        as_int,
        &[Back::Int(i64::MIN), Back::Int(i64::MAX)],
    )
    .await;
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_real_and_float() {
    let mut l = Live::new("floats").await;
    // The IEEE 754 bits, big-endian, as SQL Server converts a float to varbinary.
    let r = [f32::MAX, f32::MIN_POSITIVE, -1.5f32, 0.1f32];
    let vals: Vec<_> = r.iter().map(|v| some(v.to_be_bytes().to_vec())).collect();
    l.load("r", "real", ("real", 700), &vals)
        .await
        .expect("load");
    assert_eq!(
        l.read("r", "CONVERT(varbinary(4), [v])").await,
        r.iter()
            .map(|v| Back::Bytes(v.to_be_bytes().to_vec()))
            .collect::<Vec<_>>()
    );
    let f = [f64::MAX, f64::MIN_POSITIVE, -1.5f64, 0.1f64];
    let vals: Vec<_> = f.iter().map(|v| some(v.to_be_bytes().to_vec())).collect();
    l.load("f", "float", ("double precision", 701), &vals)
        .await
        .expect("load");
    assert_eq!(
        l.read("f", "CONVERT(varbinary(8), [v])").await,
        f.iter()
            .map(|v| Back::Bytes(v.to_be_bytes().to_vec()))
            .collect::<Vec<_>>()
    );
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_decimal() {
    let mut l = Live::new("decimal").await;
    // 38 nines at scale 0 and at scale 10; groups of 4 digits, weight counts integer groups.
    let nines_0 = numeric(
        9,
        POS,
        0,
        &[99, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999],
    );
    let neg_0 = numeric(
        9,
        NEG,
        0,
        &[99, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999],
    );
    l.load(
        "a",
        "decimal(38,0)",
        ("numeric", 1700),
        &[some(nines_0), some(neg_0), None],
    )
    .await
    .expect("load");
    let nines = "9".repeat(38);
    assert_eq!(
        l.read("a", "CONVERT(nvarchar(60), [v])").await,
        [
            Back::Text(nines.clone()),
            Back::Text(format!("-{nines}")),
            Back::Null
        ]
    );
    // 9999999999999999999999999999.9999999999: 28 integer digits, 10 decimals.
    let frac = numeric(
        6,
        POS,
        10,
        &[9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9999, 9900],
    );
    l.load("b", "numeric(38,10)", ("numeric", 1700), &[some(frac)])
        .await
        .expect("load");
    assert_eq!(
        l.read("b", "CONVERT(nvarchar(60), [v])").await,
        [Back::Text(format!("{}.{}", "9".repeat(28), "9".repeat(10)))]
    );
    l.drop_db().await;
}

#[tokio::test]
#[cfg_attr(
    not(dpone_live_mssql),
    ignore = "SKIP: DPONE_TEST_MSSQL_URL is not set; no SQL Server to test against"
)]
async fn live_round_trip_uniqueidentifier_date_and_datetime2() {
    let mut l = Live::new("uuid_date").await;
    let u: Vec<u8> = (1..=16).collect();
    l.load("u", "uniqueidentifier", ("uuid", 2950), &[some(u), None])
        .await
        .expect("load");
    assert_eq!(
        l.read("u", "CONVERT(nvarchar(36), [v])").await,
        [
            Back::Text("01020304-0506-0708-090A-0B0C0D0E0F10".into()),
            Back::Null
        ]
    );
    let (first, last) = (-PG_EPOCH_DAY as i32, (3_652_058 - PG_EPOCH_DAY) as i32);
    l.load(
        "d",
        "date",
        ("date", 1082),
        &[some(i32be(first)), some(i32be(last))],
    )
    .await
    .expect("load");
    assert_eq!(
        l.read(
            "d",
            "CONVERT(bigint, DATEDIFF(DAY, CONVERT(date, '0001-01-01'), [v]))"
        )
        .await,
        [Back::Int(0), Back::Int(3_652_058)]
    );
    let last_ts = (3_652_058 - PG_EPOCH_DAY, 86_399_999_999);
    l.load(
        "t",
        "datetime2(7)",
        ("timestamp without time zone", 1114),
        &[
            some(pg_ts(-PG_EPOCH_DAY, 0)),
            some(pg_ts(last_ts.0, last_ts.1)),
        ],
    )
    .await
    .expect("load");
    assert_eq!(
        l.read("t", SINCE_0001).await,
        [Back::Int(0), Back::Int(micros_0001(last_ts.0, last_ts.1))]
    );
    // nvarchar(2000) at its full length (bulk load).
    let full = "ж".repeat(2_000);
    l.load(
        "n",
        "nvarchar(2000) COLLATE Latin1_General_100_CI_AS",
        ("text", 25),
        &[some(full.as_bytes().to_vec())],
    )
    .await
    .expect("load");
    assert_eq!(
        l.read("n", "CONVERT(varbinary(max), [v])").await,
        [Back::Bytes(utf16le(&full))]
    );
    l.drop_db().await;
}

/// Refusals that come from decoding (NaN, infinities, dates out of range) carry the detail code
/// too when a value is fitted to its column.
#[test]
fn fit_refusals_from_decoding_carry_the_detail_code() {
    let f = ColumnFit::new(
        &col("x", "double precision", 701),
        &target("x", "float", 8, 53, 0),
    )
    .expect("float");
    refused_value(&f, &f64::NAN.to_be_bytes(), "x", "NaN");
    let d = ColumnFit::new(&col("d", "date", 1082), &target("d", "date", 3, 10, 0)).expect("date");
    refused_value(&d, &i32be(i32::MAX), "d", "infinite");
    let m =
        ColumnFit::new(&col("m", "numeric", 1700), &target("m", "money", 8, 19, 4)).expect("money");
    refused_value(&m, &numeric(0, 0xC000, 0, &[]), "m", "NaN");
}
