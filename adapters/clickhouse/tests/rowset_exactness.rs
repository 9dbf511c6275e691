//! Tier: real engine. The rowset proof's exactness as a property over generated rows: for every
//! type the canonical profile admits (`dpone_engine_clickhouse::canonical::types`), bare, in
//! `Nullable`, and — where the engine allows it — in `LowCardinality` and
//! `LowCardinality(Nullable)`, rows whose last column's `RowBinary` encoding (and so the row's)
//! ends in every byte value 0x00..=0xFF are written by the crate's own `RowBinaryWriter`, loaded
//! into a real ClickHouse table on a member, and digested there by the production rowset query
//! (`sql::rowset_buckets`, run through `ClickHouseCluster::rowset_buckets`). The member's buckets
//! must equal the host's, which the crate computes over the same bytes (`rowset_digest` for the
//! whole set, `RowsetHasher` per bucket), for every row.
//!
//! Per row: each table is `(k UInt32, v T)` and the key `k` of every row is searched so that the
//! rows' SHA-256 hashes fall into distinct buckets (at most two rows share one when a table
//! holds more than 256 rows), so a bucket that differs names its row. A differing bucket's rows
//! are then checked one by one in a table of their own, so the failure names the type, the
//! generated case and the byte the row ends in.
//!
//! Beyond the byte sweep every table holds the edge values the other live tests never
//! generated: empty strings, strings ending in 0x0A or 0x00 and strings containing `'\n'`
//! (`String` is the last column), NULLs in a last `Nullable` column, NaN (quiet, negative,
//! signalling), -0.0 and ±inf, and the minimum and maximum of every integer; and single-column
//! tables, where the row is the value alone.
//!
//! The generator is a seeded SplitMix64: every run generates the same rows.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use dpone_adapter_clickhouse::ClickHouseCluster;
use dpone_engine_clickhouse::canonical::rowset::{self, RowsetHasher};
use dpone_engine_clickhouse::canonical::{
    BucketDigest, ColumnType, RowBinaryWriter, Scalar, Value, column_types, parse_type,
    rowset_digest,
};
use dpone_engine_clickhouse::contracts::{Schema, Uuid, member_id};
use dpone_engine_clickhouse::ports::MemberCatalog;
use support::{Tier, unique};

/// SplitMix64: a deterministic generator, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A generated last value: a [`Value`] for the crate's `RowBinaryWriter`, or — only where
/// `Value` cannot express the bits — the value's `RowBinary` bytes themselves (`Int256`,
/// `UInt256` and `Decimal256` take `i128`/`u128`, so the writer can only sign- or zero-extend
/// their top bytes; a NaN `Float32` would pass through an `f64`). Raw values are never NULL.
enum Last {
    V(Value),
    Raw(Vec<u8>),
}

/// An `Enum8` defining every value -128..=127, so its one byte takes every value.
fn enum8() -> String {
    let items: Vec<String> = (-128i16..=127).map(|v| format!("'e{v}' = {v}")).collect();
    format!("Enum8({})", items.join(", "))
}

/// The `Enum16` value whose last `RowBinary` byte (the high byte) is `b`; 0x80 gives the
/// minimum and 0x7F the maximum.
fn enum16_value(b: u8) -> i16 {
    let low = match b {
        0x80 => 0x00,
        0x7F => 0xFF,
        _ => b.wrapping_mul(37) ^ 0x0A,
    };
    i16::from_le_bytes([low, b])
}

/// An `Enum16` whose 256 values end in every byte.
fn enum16() -> String {
    let items: Vec<String> = (0..=255u8)
        .map(|b| format!("'e{b}' = {}", enum16_value(b)))
        .collect();
    format!("Enum16({})", items.join(", "))
}

/// Every scalar of the profile, with its parameterised spellings.
fn scalars() -> Vec<String> {
    let mut v: Vec<String> = [
        "Int8",
        "Int16",
        "Int32",
        "Int64",
        "Int128",
        "Int256",
        "UInt8",
        "UInt16",
        "UInt32",
        "UInt64",
        "UInt128",
        "UInt256",
        "Float32",
        "Float64",
        "Bool",
        "String",
        "FixedString(1)",
        "FixedString(7)",
        "UUID",
        "Date",
        "Date32",
        "DateTime",
        "DateTime('Asia/Kolkata')",
        "DateTime64(0)",
        "DateTime64(3, 'UTC')",
        "DateTime64(9, 'America/New_York')",
        "Decimal(1, 1)",
        "Decimal32(2)",
        "Decimal(18, 4)",
        "Decimal128(10)",
        "Decimal(76, 20)",
        "Decimal256(76)",
        "IPv4",
        "IPv6",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.push(enum8());
    v.push(enum16());
    v
}

/// `LowCardinality` holds numbers, strings, `Date`, `DateTime`, `UUID` and IP addresses; the
/// engine refuses it over `DateTime64`, `Decimal` and `Enum` ("DataTypeLowCardinality is
/// supported only for numbers, strings, Date or DateTime").
fn low_cardinality_allowed(s: Scalar) -> bool {
    !matches!(
        s,
        Scalar::DateTime64(_) | Scalar::Decimal { .. } | Scalar::Enum8 | Scalar::Enum16
    )
}

/// Every column type: each scalar bare, in `Nullable`, and where allowed in `LowCardinality`
/// and `LowCardinality(Nullable)`.
fn profile_types() -> Vec<String> {
    let mut out = Vec::new();
    for s in scalars() {
        let scalar = parse_type(&s).expect("in the profile").scalar;
        out.push(s.clone());
        out.push(format!("Nullable({s})"));
        if low_cardinality_allowed(scalar) {
            out.push(format!("LowCardinality({s})"));
            out.push(format!("LowCardinality(Nullable({s}))"));
        }
    }
    out
}

/// `w` little-endian bytes as a signed value (sign-extended).
fn signed_le(le: &[u8]) -> i128 {
    let fill = if le.last().is_some_and(|b| b & 0x80 != 0) {
        0xFF
    } else {
        0
    };
    let mut buf = [fill; 16];
    buf[..le.len()].copy_from_slice(le);
    i128::from_le_bytes(buf)
}

fn unsigned_le(le: &[u8]) -> u128 {
    let mut buf = [0u8; 16];
    buf[..le.len()].copy_from_slice(le);
    u128::from_le_bytes(buf)
}

/// `w - 1` random bytes, then `b`: a little-endian value whose last byte is `b`.
fn le_ending(rng: &mut Rng, w: usize, b: u8) -> Vec<u8> {
    let mut le = rng.bytes(w - 1);
    le.push(b);
    le
}

/// A value of `s` whose `RowBinary` encoding ends in `b`, or `None` where the type cannot
/// produce it. Fixed-width values are stored and re-serialised by the engine as their bits,
/// so every top byte is produced, including bit patterns outside a type's documented range
/// (a `Date32` past 2299, a `Decimal(1, 1)` past 0.9): the proof compares bits, and a source
/// that sends such bits must still prove.
fn ending_in(s: Scalar, b: u8, rng: &mut Rng) -> Option<Last> {
    Some(match s {
        Scalar::Int(32) | Scalar::UInt(32) | Scalar::Decimal { bytes: 32, .. } => {
            Last::Raw(le_ending(rng, 32, b))
        }
        Scalar::Int(w) | Scalar::Decimal { bytes: w, .. } => {
            Last::V(Value::Int(signed_le(&le_ending(rng, usize::from(w), b))))
        }
        Scalar::UInt(w) => Last::V(Value::UInt(unsigned_le(&le_ending(rng, usize::from(w), b)))),
        Scalar::Float32 => {
            let le = le_ending(rng, 4, b);
            let f = f32::from_le_bytes([le[0], le[1], le[2], le[3]]);
            if f.is_nan() {
                Last::Raw(le)
            } else {
                Last::V(Value::Float(f64::from(f)))
            }
        }
        Scalar::Float64 => {
            let le = le_ending(rng, 8, b);
            Last::V(Value::Float(f64::from_le_bytes(
                le.try_into().expect("8 bytes"),
            )))
        }
        // `Bool` is one byte, 0x00 or 0x01: the host refuses any other byte as malformed, so
        // its rows end only in 0x00 or 0x01.
        Scalar::Bool => return (b <= 1).then_some(Last::V(Value::Bool(b == 1))),
        Scalar::String => {
            let n = rng.below(12) as usize;
            Last::V(Value::Bytes(le_ending(rng, n + 1, b)))
        }
        Scalar::FixedString(n) => Last::V(Value::Bytes(le_ending(rng, n as usize, b))),
        Scalar::Uuid => {
            // The wire sends the two RFC halves little-endian: its last byte is RFC byte 8.
            let mut u: [u8; 16] = rng.bytes(16).try_into().expect("16 bytes");
            u[8] = b;
            Last::V(Value::Raw16(u))
        }
        Scalar::Date => Last::V(Value::Int(unsigned_le(&le_ending(rng, 2, b)) as i128)),
        Scalar::Date32 => Last::V(Value::Int(signed_le(&le_ending(rng, 4, b)))),
        Scalar::DateTime => Last::V(Value::Int(unsigned_le(&le_ending(rng, 4, b)) as i128)),
        Scalar::DateTime64(_) => Last::V(Value::Int(signed_le(&le_ending(rng, 8, b)))),
        Scalar::Enum8 => Last::V(Value::Int(i128::from(b as i8))),
        Scalar::Enum16 => Last::V(Value::Int(i128::from(enum16_value(b)))),
        Scalar::Ipv4 => Last::V(Value::UInt(unsigned_le(&le_ending(rng, 4, b)))),
        Scalar::Ipv6 => {
            let mut a: [u8; 16] = rng.bytes(16).try_into().expect("16 bytes");
            a[15] = b;
            Last::V(Value::Raw16(a))
        }
    })
}

/// Strings the byte sweep does not reach by itself.
fn edge_strings() -> Vec<(&'static str, Vec<u8>)> {
    let mut long_nl = vec![b'x'; 299];
    long_nl.push(b'\n');
    let mut len127 = vec![b'y'; 126];
    len127.push(b'\n');
    let mut len128 = vec![b'z'; 127];
    len128.push(b'\n');
    vec![
        ("empty (the row ends in its length byte 0x00)", Vec::new()),
        ("\"\\n\"", b"\n".to_vec()),
        ("\"\\n\\n\"", b"\n\n".to_vec()),
        ("\"\\0\"", vec![0]),
        ("\"a\\n\"", b"a\n".to_vec()),
        ("\"a\\0\"", b"a\0".to_vec()),
        ("\"\\r\\n\"", b"\r\n".to_vec()),
        ("\"line1\\nline2\"", b"line1\nline2".to_vec()),
        ("\"\\nlead\"", b"\nlead".to_vec()),
        ("10 bytes (length byte 0x0A)", b"0123456789".to_vec()),
        ("10 bytes ending in \\n", b"012345678\n".to_vec()),
        ("non-UTF-8 ending in \\n", vec![0xFF, 0xFE, b'\n']),
        ("127 bytes ending in \\n", len127),
        ("128 bytes ending in \\n (two-byte length)", len128),
        ("300 bytes ending in \\n", long_nl),
    ]
}

fn float64_edges() -> Vec<(&'static str, u64)> {
    vec![
        ("NaN", f64::NAN.to_bits()),
        ("-NaN", f64::NAN.to_bits() | (1 << 63)),
        ("signalling NaN", 0x7FF0_0000_0000_0001),
        ("NaN with payload 0x0A", 0x7FF8_0000_0000_000A),
        ("+inf", f64::INFINITY.to_bits()),
        ("-inf", f64::NEG_INFINITY.to_bits()),
        ("-0.0", (-0.0f64).to_bits()),
        ("+0.0", 0),
        ("MIN_POSITIVE", f64::MIN_POSITIVE.to_bits()),
        ("smallest subnormal", 1),
        ("MAX", f64::MAX.to_bits()),
        ("MIN", f64::MIN.to_bits()),
        ("10.0", 10.0f64.to_bits()),
    ]
}

fn float32_edges() -> Vec<(&'static str, u32)> {
    vec![
        ("NaN", f32::NAN.to_bits()),
        ("-NaN", f32::NAN.to_bits() | (1 << 31)),
        ("signalling NaN", 0x7F80_0001),
        ("NaN with payload 0x0A", 0x7FC0_000A),
        ("+inf", f32::INFINITY.to_bits()),
        ("-inf", f32::NEG_INFINITY.to_bits()),
        ("-0.0", (-0.0f32).to_bits()),
        ("+0.0", 0),
        ("MIN_POSITIVE", f32::MIN_POSITIVE.to_bits()),
        ("smallest subnormal", 1),
        ("MAX", f32::MAX.to_bits()),
        ("MIN", f32::MIN.to_bits()),
    ]
}

/// Edge values of `s`, labelled.
fn edges(s: Scalar) -> Vec<(String, Last)> {
    let v = |label: &str, v: Value| (label.to_string(), Last::V(v));
    let raw = |label: &str, b: Vec<u8>| (label.to_string(), Last::Raw(b));
    match s {
        Scalar::Int(32) | Scalar::Decimal { bytes: 32, .. } => {
            let mut min = vec![0u8; 32];
            min[31] = 0x80;
            let mut max = vec![0xFFu8; 32];
            max[31] = 0x7F;
            vec![
                raw("min", min),
                raw("max", max),
                raw("0", vec![0; 32]),
                raw("-1", vec![0xFF; 32]),
            ]
        }
        Scalar::UInt(32) => vec![raw("0", vec![0; 32]), raw("max", vec![0xFF; 32])],
        Scalar::Int(w) | Scalar::Decimal { bytes: w, .. } => {
            let bits = u32::from(w) * 8;
            let (min, max) = if bits == 128 {
                (i128::MIN, i128::MAX)
            } else {
                (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
            };
            vec![
                v("min", Value::Int(min)),
                v("max", Value::Int(max)),
                v("0", Value::Int(0)),
                v("-1", Value::Int(-1)),
                v("10", Value::Int(10)),
            ]
        }
        Scalar::UInt(w) => {
            let max = if w == 16 {
                u128::MAX
            } else {
                (1u128 << (u32::from(w) * 8)) - 1
            };
            vec![
                v("0", Value::UInt(0)),
                v("max", Value::UInt(max)),
                v("10", Value::UInt(10)),
            ]
        }
        Scalar::Float64 => float64_edges()
            .into_iter()
            .map(|(l, b)| v(l, Value::Float(f64::from_bits(b))))
            .collect(),
        Scalar::Float32 => float32_edges()
            .into_iter()
            .map(|(l, b)| raw(l, b.to_le_bytes().to_vec()))
            .collect(),
        Scalar::String => edge_strings()
            .into_iter()
            .map(|(l, b)| v(l, Value::Bytes(b)))
            .collect(),
        Scalar::FixedString(n) => {
            let n = n as usize;
            vec![
                v("empty (zero padded)", Value::Bytes(Vec::new())),
                v("\"\\n\" zero padded", Value::Bytes(b"\n".to_vec())),
                v("all \\n", Value::Bytes(vec![b'\n'; n])),
                v("all \\0", Value::Bytes(vec![0; n])),
            ]
        }
        Scalar::Uuid => vec![
            v("nil", Value::Raw16([0; 16])),
            v("all ff", Value::Raw16([0xFF; 16])),
        ],
        Scalar::Date => vec![v("0", Value::Int(0)), v("max", Value::Int(65_535))],
        Scalar::Date32 => vec![
            v("1900-01-01", Value::Int(-25_567)),
            v("2299-12-31", Value::Int(120_529)),
            v("0", Value::Int(0)),
            v("-1", Value::Int(-1)),
        ],
        Scalar::DateTime => vec![
            v("0", Value::Int(0)),
            v("max", Value::Int(i128::from(u32::MAX))),
        ],
        Scalar::DateTime64(_) => vec![
            v("min", Value::Int(i128::from(i64::MIN))),
            v("max", Value::Int(i128::from(i64::MAX))),
            v("0", Value::Int(0)),
            v("-1", Value::Int(-1)),
        ],
        Scalar::Ipv4 => vec![
            v("0.0.0.0", Value::UInt(0)),
            v("255.255.255.255", Value::UInt(u128::from(u32::MAX))),
            v("10.0.0.10", Value::UInt(0x0A00_000A)),
        ],
        Scalar::Ipv6 => {
            let mut one = [0u8; 16];
            one[15] = 1;
            let mut nl = [0u8; 16];
            nl[0] = 0x0A;
            nl[15] = 0x0A;
            vec![
                v("::", Value::Raw16([0; 16])),
                v("::1", Value::Raw16(one)),
                v("all ff", Value::Raw16([0xFF; 16])),
                v("a00::a", Value::Raw16(nl)),
            ]
        }
        // The sweep defines and covers every value of both enums; `Bool` has two values.
        Scalar::Bool | Scalar::Enum8 | Scalar::Enum16 => Vec::new(),
    }
}

/// One table to check: its columns and its rows' `RowBinary` bytes, labelled.
struct Job {
    /// The last column's type.
    ty: String,
    schema: Schema,
    rows: Vec<(String, Vec<u8>)>,
    /// For the rows a `LowCardinality` float column normalizes (see [`lc_float_normalized`]):
    /// the bytes the member stores instead, row by row. `None`: the member stores every row's
    /// bytes exactly, so its digest must equal the host's.
    stored: Option<Vec<Vec<u8>>>,
}

/// What the engine stores in a `LowCardinality(Float32/Float64)` column (bare or over
/// `Nullable`) when it differs from the bits sent: its dictionary keeps one entry per value
/// that compares equal, so `-0.0` is stored as `+0.0` and every NaN as the positive quiet NaN
/// (`0x7FC00000`, `0x7FF8000000000000`). The rowset proof compares bits, so a table holding
/// such a value cannot prove under it (it is refused, never accepted); the rows are kept out
/// of the equality property and pinned below, so a change of that behaviour is seen. (The
/// engine creates such columns only with `allow_suspicious_low_cardinality_types`, which these
/// tables set and the route's candidate `CREATE` does not.)
fn lc_float_normalized(ty: &str, s: Scalar, last: &Last) -> Option<Last> {
    if !ty.starts_with("LowCardinality(") {
        return None;
    }
    match (s, last) {
        (Scalar::Float64, Last::V(Value::Float(x))) => {
            let bits = x.to_bits();
            let stored = if x.is_nan() {
                0x7FF8_0000_0000_0000
            } else if bits == (-0.0f64).to_bits() {
                0
            } else {
                bits
            };
            (stored != bits).then(|| Last::Raw(stored.to_le_bytes().to_vec()))
        }
        (Scalar::Float32, Last::V(Value::Float(_)) | Last::Raw(_)) => {
            let bits = match last {
                Last::V(Value::Float(x)) => (*x as f32).to_bits(),
                Last::Raw(le) => u32::from_le_bytes(le[..4].try_into().expect("4 bytes")),
                Last::V(_) => return None,
            };
            let stored = if f32::from_bits(bits).is_nan() {
                0x7FC0_0000
            } else if bits == (-0.0f32).to_bits() {
                0
            } else {
                bits
            };
            (stored != bits).then(|| Last::Raw(stored.to_le_bytes().to_vec()))
        }
        _ => None,
    }
}

/// One row's `RowBinary` bytes: the key (when the table has one), then the last value, written
/// by the crate's writer (a raw value follows the writer's key and the not-NULL flag 0x00).
fn row_bytes(types: &[ColumnType], key: Option<u32>, last: &Last) -> Vec<u8> {
    let mut values: Vec<Value> = key
        .map(|k| Value::UInt(u128::from(k)))
        .into_iter()
        .collect();
    match last {
        Last::V(v) => {
            values.push(v.clone());
            let mut w = RowBinaryWriter::new(types.to_vec());
            w.row(&values).expect("the value fits its column");
            w.finish()
        }
        Last::Raw(raw) => {
            let n = values.len();
            let mut w = RowBinaryWriter::new(types[..n].to_vec());
            w.row(&values).expect("the key fits its column");
            let mut out = w.finish();
            if types[n].nullable {
                out.push(0);
            }
            out.extend_from_slice(raw);
            out
        }
    }
}

/// One row's bucket as the host computes it (the crate's `RowsetHasher`).
fn row_bucket(row: &[u8]) -> BucketDigest {
    let mut h = RowsetHasher::new(1 << 20);
    h.push_row(row).expect("in memory");
    let b = h.finish().expect("in memory");
    assert_eq!(b.len(), 1);
    b[0]
}

/// The jobs of a `(k UInt32, v ty)` table: the byte sweep, the edges, and NULLs when nullable;
/// every row's key chosen so that at most `ceil(rows / 256)` rows share a bucket. A second job
/// holds the rows a `LowCardinality` float column normalizes, when there are any.
fn keyed_jobs(ty: &str, rng: &mut Rng) -> Vec<Job> {
    let t = parse_type(ty).expect("in the profile");
    let schema = Schema::of(&[("k", "UInt32"), ("v", ty)]);
    let types = column_types(&schema).expect("profile");
    let mut cases: Vec<(String, Last, Option<u8>)> = Vec::new();
    for b in 0..=255u8 {
        if let Some(last) = ending_in(t.scalar, b, rng) {
            cases.push((format!("sweep 0x{b:02X}"), last, Some(b)));
        }
    }
    for (label, last) in edges(t.scalar) {
        cases.push((label, last, None));
    }
    if t.nullable {
        for i in 0..3 {
            cases.push((format!("NULL #{i}"), Last::V(Value::Null), Some(0x01)));
        }
    }
    let mut normalized = Vec::new();
    let mut stored = Vec::new();
    let mut ends = BTreeSet::new();
    cases.retain(|(label, last, _)| {
        let Some(n) = lc_float_normalized(ty, t.scalar, last) else {
            return true;
        };
        let k = rng.next() as u32;
        let row = row_bytes(&types, Some(k), last);
        ends.insert(*row.last().expect("a row has bytes"));
        normalized.push((format!("{label}, normalized by the engine"), row));
        stored.push(row_bytes(&types, Some(k), &n));
        false
    });
    let per_bucket = cases.len().div_ceil(256);
    let mut used = [0usize; 256];
    let mut rows = Vec::new();
    for (label, last, want) in cases {
        let mut k = rng.next() as u32;
        let row = loop {
            let row = row_bytes(&types, Some(k), &last);
            let b = usize::from(row_bucket(&row).bucket);
            if used[b] < per_bucket {
                used[b] += 1;
                break row;
            }
            k = k.wrapping_add(1);
        };
        let end = *row.last().expect("a row has bytes");
        if let Some(want) = want {
            assert_eq!(end, want, "{ty} {label}: the generator missed its byte");
        }
        ends.insert(end);
        rows.push((format!("{label}, ends in 0x{end:02X}"), row));
    }
    // The sweep reaches every byte, except that a bare `Bool` row ends only in 0x00 or 0x01.
    let expected = if t.scalar == Scalar::Bool { 2 } else { 256 };
    assert_eq!(
        ends.len(),
        expected,
        "{ty}: rows end in {} bytes",
        ends.len()
    );
    let mut jobs = vec![Job {
        ty: ty.to_string(),
        schema: schema.clone(),
        rows,
        stored: None,
    }];
    if !normalized.is_empty() {
        jobs.push(Job {
            ty: format!("{ty} (normalized values)"),
            schema,
            rows: normalized,
            stored: Some(stored),
        });
    }
    jobs
}

/// A single-column table: the row is the value alone (no key, so buckets may hold several
/// rows; the per-row check below separates them).
fn single_column_job(ty: &str, values: Vec<(String, Last)>) -> Job {
    let schema = Schema::of(&[("v", ty)]);
    let types = column_types(&schema).expect("profile");
    let rows = values
        .into_iter()
        .map(|(label, last)| {
            let row = row_bytes(&types, None, &last);
            let end = *row.last().expect("a row has bytes");
            (format!("{label}, ends in 0x{end:02X}"), row)
        })
        .collect();
    Job {
        ty: format!("single column {ty}"),
        schema,
        rows,
        stored: None,
    }
}

fn single_column_jobs() -> Vec<Job> {
    let strings = || {
        let mut v: Vec<(String, Last)> = edge_strings()
            .into_iter()
            .map(|(l, b)| (l.to_string(), Last::V(Value::Bytes(b))))
            .collect();
        for b in 0..=255u8 {
            v.push((
                format!("one byte 0x{b:02X}"),
                Last::V(Value::Bytes(vec![b])),
            ));
            v.push((
                format!("\"x\" then 0x{b:02X}"),
                Last::V(Value::Bytes(vec![b'x', b])),
            ));
        }
        v
    };
    let mut nullable = strings();
    nullable.push(("NULL".into(), Last::V(Value::Null)));
    let uint8 = (0..=255u8)
        .map(|b| (format!("{b}"), Last::V(Value::UInt(u128::from(b)))))
        .collect();
    let float64 = float64_edges()
        .into_iter()
        .map(|(l, b)| (l.to_string(), Last::V(Value::Float(f64::from_bits(b)))))
        .collect();
    vec![
        single_column_job("String", strings()),
        single_column_job("Nullable(String)", nullable),
        single_column_job("UInt8", uint8),
        single_column_job("Float64", float64),
    ]
}

/// Percent-encodes a query for the URL.
fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A table UUID no other run uses (not part of any row).
fn fresh_uuid(n: usize) -> Uuid {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let mut r = Rng(nanos as u64 ^ (u64::from(std::process::id()) << 32) ^ n as u64);
    Uuid::from_random(r.bytes(16).try_into().expect("16 bytes"))
}

/// The member-side buckets of `rows` under `schema`: a real table on member `(1, replica)`,
/// loaded with exactly these bytes, digested by the production rowset query through the
/// adapter; the table is dropped afterwards.
fn member_buckets(
    tier: &Tier,
    c: &ClickHouseCluster,
    replica: u32,
    schema: &Schema,
    stream: &[u8],
    n: usize,
) -> Vec<BucketDigest> {
    let name = unique(&format!("rowset_prop_{n}"));
    let uuid = fresh_uuid(n);
    let db = &tier.database;
    let cols: Vec<String> = schema
        .columns
        .iter()
        .map(|c| format!("`{}` {}", c.name, c.type_name))
        .collect();
    let member = tier.member(replica);
    let exchange = |path: &str, body: &[u8], what: &str| {
        let (status, reply) = tier.http(member, "POST", path, body);
        assert_eq!(
            status,
            200,
            "{what} failed: {}",
            String::from_utf8_lossy(&reply)
        );
    };
    exchange(
        "/?allow_suspicious_low_cardinality_types=1",
        format!(
            "CREATE TABLE `{db}`.`{name}` UUID '{uuid}' ({}) ENGINE = MergeTree ORDER BY tuple()",
            cols.join(", ")
        )
        .as_bytes(),
        "create",
    );
    exchange(
        &format!(
            "/?query={}",
            url_encode(&format!("INSERT INTO `{db}`.`{name}` FORMAT RowBinary"))
        ),
        stream,
        "insert",
    );
    let buckets = c
        .rowset_buckets(&member_id(1, replica), db, &name, uuid, schema)
        .expect("member rowset buckets");
    exchange(
        "/",
        format!("DROP TABLE `{db}`.`{name}` SYNC").as_bytes(),
        "drop",
    );
    buckets
}

/// Most rows of one table checked alone after its set differs.
const RECHECKS_PER_TABLE: usize = 32;

/// A row (or set) whose member digest differs from the host's.
struct Failure {
    line: String,
    /// The byte a row proven to differ on its own ends in.
    row_end: Option<u8>,
}

impl Failure {
    fn set(line: String) -> Self {
        Self {
            line,
            row_end: None,
        }
    }
}

/// Checks one table; returns a line per failing row (or set).
fn check(tier: &Tier, c: &ClickHouseCluster, replica: u32, job: &Job, n: usize) -> Vec<Failure> {
    let stream: Vec<u8> = job
        .rows
        .iter()
        .flat_map(|(_, r)| r.iter().copied())
        .collect();
    // The host's digest of the artifact bytes: every row decoded by the crate's reader.
    let host = rowset_digest(&job.schema, &stream[..], 1 << 20).expect("host rowset digest");
    assert_eq!(host.row_count, job.rows.len() as u64, "{}", job.ty);
    let member = member_buckets(tier, c, replica, &job.schema, &stream, n);
    let member_summary = rowset::combine(&job.schema, &member).expect("well-formed reply");
    if let Some(stored) = &job.stored {
        // The member digests what it stores, exactly; the proof refuses the table.
        let stored: Vec<u8> = stored.concat();
        let expected = rowset_digest(&job.schema, &stored[..], 1 << 20).expect("stored digest");
        return if member_summary == expected && member_summary != host {
            Vec::new()
        } else {
            vec![Failure::set(format!(
                "{}: the member no longer stores exactly the normalized values ({} rows); \
                 revisit lc_float_normalized",
                job.ty,
                job.rows.len()
            ))]
        };
    }
    if member_summary == host {
        return Vec::new();
    }
    // Per bucket, then per row: the rows of every differing bucket, each in a table alone.
    let mut hasher = RowsetHasher::new(1 << 20);
    let mut by_bucket: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for (i, (_, row)) in job.rows.iter().enumerate() {
        hasher.push_row(row).expect("in memory");
        by_bucket.entry(row_bucket(row).bucket).or_default().push(i);
    }
    let host_buckets: BTreeMap<u8, BucketDigest> = hasher
        .finish()
        .expect("in memory")
        .into_iter()
        .map(|b| (b.bucket, b))
        .collect();
    let member_buckets_map: BTreeMap<u8, BucketDigest> =
        member.iter().map(|b| (b.bucket, *b)).collect();
    let differing: BTreeSet<u8> = host_buckets
        .keys()
        .chain(member_buckets_map.keys())
        .copied()
        .filter(|b| host_buckets.get(b) != member_buckets_map.get(b))
        .collect();
    let suspects: Vec<usize> = differing
        .iter()
        .flat_map(|b| by_bucket.get(b).cloned().unwrap_or_default())
        .collect();
    let mut failures = Vec::new();
    for (j, &i) in suspects.iter().enumerate() {
        let (label, row) = &job.rows[i];
        if j >= RECHECKS_PER_TABLE {
            failures.push(Failure::set(format!(
                "{}: {label}: in a differing bucket (not rechecked alone)",
                job.ty
            )));
            continue;
        }
        let alone = rowset::combine(
            &job.schema,
            &member_buckets(tier, c, replica, &job.schema, row, n),
        )
        .expect("well-formed reply");
        let host_alone = rowset_digest(&job.schema, &row[..], 1 << 20).expect("host digest");
        if alone != host_alone {
            failures.push(Failure {
                line: format!(
                    "{}: {label}: the member's row digest differs from the host's (row {})",
                    job.ty,
                    hex(row)
                ),
                row_end: row.last().copied(),
            });
        }
    }
    if failures.is_empty() {
        failures.push(Failure::set(format!(
            "{}: the set differs (buckets {differing:02X?}) but no single row does",
            job.ty
        )));
    }
    failures
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
#[cfg_attr(
    not(dpone_live_clickhouse),
    ignore = "SKIP: DPONE_TEST_CLICKHOUSE_URL is not set; start the real-engine tier with .ci/start-clickhouse"
)]
fn every_profile_type_ending_in_every_byte_has_the_same_rowset_digest_on_the_member_and_the_host() {
    let started = Instant::now();
    let tier = Tier::from_env();
    let mut rng = Rng(0x0DD0_0A0A_5EED_0033);
    let mut jobs: Vec<Job> = profile_types()
        .iter()
        .flat_map(|ty| keyed_jobs(ty, &mut rng))
        .collect();
    jobs.extend(single_column_jobs());
    let rows: usize = jobs.iter().map(|j| j.rows.len()).sum();
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    // Four workers, two per member, each with its own adapter.
    std::thread::scope(|s| {
        for w in 0..4u32 {
            let (tier, jobs, next, failures) = (&tier, &jobs, &next, &failures);
            s.spawn(move || {
                let c = tier.cluster();
                let replica = w % 2 + 1;
                loop {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(n) else { break };
                    let f = check(tier, &c, replica, job, n);
                    failures.lock().expect("lock").extend(f);
                }
            });
        }
    });
    let failures: Vec<Failure> = failures.into_inner().expect("lock");
    let ends: BTreeSet<String> = failures
        .iter()
        .filter_map(|f| f.row_end.map(|b| format!("0x{b:02X}")))
        .collect();
    assert!(
        failures.is_empty(),
        "the member's rowset query and the host differ ({rows} rows in {} tables): {} rows \
         differ on their own, and they end in the bytes {ends:?}; {} other lines\n{}",
        jobs.len(),
        failures.iter().filter(|f| f.row_end.is_some()).count(),
        failures.iter().filter(|f| f.row_end.is_none()).count(),
        failures
            .iter()
            .take(400)
            .map(|f| f.line.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!(
        "rowset property: {rows} rows in {} tables, {:?}",
        jobs.len(),
        started.elapsed()
    );
}
