//! Tier: unit. The canonical content digest.

mod common;

use common::profile;
use dpone_engine_clickhouse::canonical::{
    DigestError, RowBinaryWriter, Value, column_types, content_digest, content_digest_reopen,
    streamed_digest,
};
use dpone_engine_clickhouse::contracts::Schema;

const BUDGET: u64 = 1 << 24;

#[test]
fn digest_ignores_row_order_but_not_duplicates_or_values() {
    let p = profile();
    let s = p.schema();
    let a = content_digest(&s, &p.rows(1, 20)[..], BUDGET).expect("digest");
    // Same rows, reversed order.
    let types = column_types(&s).expect("types");
    let forward = p.rows(1, 20);
    let ends = dpone_engine_clickhouse::canonical::rowbinary::row_ends(&types, &forward)
        .expect("rows split");
    let mut rows = Vec::new();
    let mut start = 0;
    for e in &ends {
        rows.push(&forward[start..*e]);
        start = *e;
    }
    let reversed: Vec<u8> = rows.iter().rev().flat_map(|r| r.iter().copied()).collect();
    let b = content_digest(&s, &reversed[..], BUDGET).expect("digest");
    assert_eq!(a, b);
    assert_eq!(a.row_count, 20);
    // A duplicated row changes the digest even though it changes nothing else.
    let mut dup = forward.clone();
    dup.extend_from_slice(rows[0]);
    let c = content_digest(&s, &dup[..], BUDGET).expect("digest");
    assert_ne!(a.digest, c.digest);
    // Equal counts never prove equality.
    let other = content_digest(&s, &p.rows(2, 20)[..], BUDGET).expect("digest");
    assert_eq!(other.row_count, a.row_count);
    assert_ne!(other.digest, a.digest);
}

#[test]
fn empty_input_is_a_valid_distinct_digest() {
    let p = profile();
    let s = p.schema();
    let e = content_digest(&s, &[][..], BUDGET).expect("empty digest");
    assert_eq!(e.row_count, 0);
    assert_eq!(e, content_digest(&s, &[][..], BUDGET).expect("again"));
    let other = Schema::of(&[("id", "UInt64")]);
    assert_ne!(
        e.digest,
        content_digest(&other, &[][..], BUDGET).expect("x").digest
    );
}

#[test]
fn sorted_input_digest_equals_streaming_digest() {
    let s = Schema::of(&[("k", "Int64"), ("v", "Nullable(String)")]);
    let mut w = RowBinaryWriter::new(column_types(&s).expect("types"));
    for k in -5i128..5 {
        w.row(&[Value::Int(k), Value::Bytes(vec![b'x'; 3])])
            .expect("row");
    }
    let bytes = w.finish();
    // Value order equals byte order for signed integers, so this input is canonical.
    assert_eq!(
        content_digest(&s, &bytes[..], BUDGET).expect("sorted"),
        streamed_digest(&s, &bytes[..])
            .expect("ordered")
            .expect("in order")
    );
    // Out of order: the single pass declines, the reopening digest falls back to sorting.
    let p = profile();
    let shuffled = {
        let mut b = p.rows(5, 3);
        b.extend_from_slice(&p.rows(1, 3));
        b
    };
    assert_eq!(
        streamed_digest(&p.schema(), &shuffled[..]).expect("decodes"),
        None
    );
    let mut opened = 0;
    let d = content_digest_reopen(
        &p.schema(),
        || {
            opened += 1;
            Ok::<_, ()>(&shuffled[..])
        },
        BUDGET,
    )
    .expect("opens")
    .expect("digest");
    assert_eq!(opened, 2);
    assert_eq!(
        d,
        content_digest(&p.schema(), &shuffled[..], BUDGET).expect("digest")
    );
}

#[test]
fn canonical_encoding_per_type() {
    // Nulls, decimals, temporals, floats, UUIDs.
    let s = Schema::of(&[
        ("n", "Nullable(Int32)"),
        ("d", "Decimal(10, 2)"),
        ("t", "DateTime64(3)"),
        ("f", "Float64"),
        ("u", "UUID"),
        ("day", "Date"),
    ]);
    let row = |n: Value, d: i128, t: i128, f: f64| {
        let mut w = RowBinaryWriter::new(column_types(&s).expect("types"));
        w.row(&[
            n,
            Value::Int(d),
            Value::Int(t),
            Value::Float(f),
            Value::Raw16([7; 16]),
            Value::Int(19_000),
        ])
        .expect("row");
        content_digest(&s, &w.finish()[..], BUDGET)
            .expect("digest")
            .digest
    };
    let base = row(Value::Null, 12_345, 1_500, 0.0);
    assert_eq!(
        base,
        row(Value::Null, 12_345, 1_500, -0.0),
        "-0.0 equals +0.0"
    );
    assert_eq!(
        row(Value::Null, 1, 1, f64::NAN),
        row(Value::Null, 1, 1, -f64::NAN),
        "every NaN is one canonical NaN"
    );
    assert_ne!(
        base,
        row(Value::Int(0), 12_345, 1_500, 0.0),
        "NULL differs from 0"
    );
    assert_ne!(base, row(Value::Null, 12_346, 1_500, 0.0));
    assert_ne!(base, row(Value::Null, 12_345, -1_500, 0.0));
}

#[test]
fn unsupported_types_and_malformed_streams_fail() {
    let s = Schema::of(&[("a", "Array(Int8)")]);
    assert_eq!(
        content_digest(&s, &[][..], BUDGET),
        Err(DigestError::UnsupportedType { column: 0 })
    );
    let s = Schema::of(&[("a", "UInt32")]);
    assert!(matches!(
        content_digest(&s, &[1u8, 2, 3][..], BUDGET),
        Err(DigestError::Decode(_))
    ));
    let s = Schema::of(&[("b", "Bool")]);
    assert!(
        content_digest(&s, &[2u8][..], BUDGET).is_err(),
        "bool is 0 or 1"
    );
    let s = Schema::of(&[("s", "String")]);
    // A length prefix that claims more than the stream holds.
    assert!(content_digest(&s, &[0xff, 0xff, 0x03, b'a'][..], BUDGET).is_err());
    assert_eq!(
        content_digest(&Schema::default(), &[][..], BUDGET),
        Err(DigestError::EmptySchema)
    );
}

#[test]
fn sort_budget_is_enforced() {
    let p = profile();
    let bytes = p.rows(1, 100);
    assert_eq!(
        content_digest(&p.schema(), &bytes[..], 256),
        Err(DigestError::BudgetExceeded { budget: 256 })
    );
}

/// A reader that returns at most `step` bytes per call, so rows and values straddle reads.
struct Dribble<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl std::io::Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.bytes.len());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        Ok(n)
    }
}

#[test]
fn read_boundaries_do_not_change_the_digest() {
    let s = Schema::of(&[("k", "UInt32"), ("v", "String")]);
    let mut w = RowBinaryWriter::new(column_types(&s).expect("types"));
    for k in 0..50u32 {
        // Includes values far larger than one read buffer.
        let len = if k % 10 == 0 { 200_000 } else { k as usize };
        w.row(&[
            Value::UInt(u128::from(k)),
            Value::Bytes(vec![b'a' + (k % 26) as u8; len]),
        ])
        .expect("row");
    }
    let bytes = w.finish();
    let whole = content_digest(&s, &bytes[..], 1 << 26).expect("digest");
    for step in [1, 3, 7, 4096, 70_000] {
        let d = content_digest(
            &s,
            Dribble {
                bytes: &bytes,
                step,
            },
            1 << 26,
        )
        .expect("digest");
        assert_eq!(d, whole, "step {step}");
        let d = streamed_digest(
            &s,
            Dribble {
                bytes: &bytes,
                step,
            },
        )
        .expect("digest")
        .expect("in order");
        assert_eq!(d, whole, "streamed, step {step}");
    }
    // A stream cut inside a row is an error, never a shorter digest.
    assert!(content_digest(&s, &bytes[..bytes.len() - 1], 1 << 26).is_err());
    assert!(streamed_digest(&s, &bytes[..bytes.len() - 1]).is_err());
}

#[test]
fn content_digest_encoding_is_pinned() {
    // Pinned so any change to the canonical encoding is a deliberate, visible change.
    let s = Schema::of(&[
        ("id", "UInt64"),
        ("s", "Nullable(String)"),
        ("d", "Decimal(9, 2)"),
    ]);
    let mut w = RowBinaryWriter::new(column_types(&s).expect("types"));
    w.row(&[Value::UInt(2), Value::Null, Value::Int(-5)])
        .expect("row");
    w.row(&[
        Value::UInt(1),
        Value::Bytes(b"a".to_vec()),
        Value::Int(12_345),
    ])
    .expect("row");
    let d = content_digest(&s, &w.finish()[..], BUDGET).expect("digest");
    assert_eq!(d.row_count, 2);
    // Computed independently from the documented encoding (docs/clickhouse-external-publication.md).
    assert_eq!(
        d.digest.to_hex(),
        "73496c6562a276019feca949d9ee6bdb6d22c0ebfb110a43f5b1d9b651d20bb1"
    );
}
