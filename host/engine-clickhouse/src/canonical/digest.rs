//! The canonical content digest: SHA-256 over typed rows in canonical order.
//!
//! ```text
//! content_digest = SHA-256( u64_be(27) || "dpone.clickhouse.content.v1"
//!                        || schema_digest (32 bytes)
//!                        || row_1 || row_2 || … || row_n     (canonical encodings, sorted bytewise)
//!                        || u64_be(n) )
//! ```
//!
//! Rows are decoded from `RowBinary` and re-encoded canonically (see [`super::rowbinary`]); the
//! canonical all-column order is the bytewise order of those encodings, which for numbers is
//! value order. The host sorts, so no server collation or `ORDER BY` semantics enter the digest;
//! the sort is bounded by a byte budget and exceeding it is an error, never a partial digest.
//! A stream that already arrives in canonical order is detected and not re-sorted. Duplicated
//! rows stay in the multiset, so a duplicate always changes the digest. Zero rows is a valid,
//! distinct digest.

use std::io::Read;

use sha2::{Digest as _, Sha256};

use super::rowbinary::{DecodeError, RowReader};
use super::types::{ColumnType, parse_type};
use crate::contracts::hash::Digest;
use crate::contracts::identity::schema_digest;
use crate::contracts::schema::Schema;

const DOMAIN: &[u8] = b"dpone.clickhouse.content.v1";
const HASH_BATCH: usize = 64 * 1024;

/// Why a digest could not be computed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestError {
    /// A column type outside the profile.
    #[error("column {column} has a type outside the canonical profile")]
    UnsupportedType {
        /// Column position.
        column: usize,
    },
    /// No columns.
    #[error("a schema needs at least one column")]
    EmptySchema,
    /// The stream does not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The canonical sort would exceed its budget.
    #[error("the canonical sort needs more than {budget} bytes")]
    BudgetExceeded {
        /// Budget in bytes.
        budget: u64,
    },
    /// The rowset digest's temporary spill file failed.
    #[error("the digest's temporary file failed ({0:?})")]
    Spill(std::io::ErrorKind),
}

/// A content digest and the row count it covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContentSummary {
    /// Canonical content digest.
    pub digest: Digest,
    /// Rows.
    pub row_count: u64,
}

/// The schema's column types, or the first unsupported column.
pub fn column_types(schema: &Schema) -> Result<Vec<ColumnType>, DigestError> {
    if schema.columns.is_empty() {
        return Err(DigestError::EmptySchema);
    }
    schema
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| parse_type(&c.type_name).ok_or(DigestError::UnsupportedType { column: i }))
        .collect()
}

fn prologue(schema: &Schema) -> Sha256 {
    let mut h = Sha256::new();
    h.update((DOMAIN.len() as u64).to_be_bytes());
    h.update(DOMAIN);
    h.update(schema_digest(schema).0);
    h
}

/// The canonical content digest of a `RowBinary` stream, sorting in memory bounded by
/// `sort_budget` bytes (row encodings plus 24 bytes of index per row).
pub fn content_digest<R: Read>(
    schema: &Schema,
    reader: R,
    sort_budget: u64,
) -> Result<ContentSummary, DigestError> {
    let types = column_types(schema)?;
    let mut r = RowReader::new(reader);
    let mut arena: Vec<u8> = Vec::new();
    // (8-byte big-endian prefix, start, end) of every row in `arena`.
    let mut rows: Vec<(u64, usize, usize)> = Vec::new();
    let mut sorted = true;
    let mut over_budget = false;
    r.encode_rows(&types, &mut arena, |arena, start, _| {
        let used = arena.len() as u64 + 24 * (rows.len() as u64 + 1);
        if used > sort_budget {
            over_budget = true;
            return false;
        }
        if sorted
            && let Some(&(_, ps, pe)) = rows.last()
            && arena[ps..pe] > arena[start..]
        {
            sorted = false;
        }
        let mut k = [0u8; 8];
        let n = (arena.len() - start).min(8);
        k[..n].copy_from_slice(&arena[start..start + n]);
        rows.push((u64::from_be_bytes(k), start, arena.len()));
        true
    })?;
    if over_budget {
        return Err(DigestError::BudgetExceeded {
            budget: sort_budget,
        });
    }
    let count = rows.len() as u64;
    let mut h = prologue(schema);
    if sorted {
        h.update(&arena);
    } else {
        // Sort by the 8-byte big-endian prefix first (cache-friendly), whole rows on ties.
        rows.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| arena[a.1..a.2].cmp(&arena[b.1..b.2]))
        });
        let mut batch = Vec::with_capacity(HASH_BATCH);
        for (_, s, e) in &rows {
            if batch.len() + (e - s) > HASH_BATCH {
                h.update(&batch);
                batch.clear();
            }
            batch.extend_from_slice(&arena[*s..*e]);
        }
        h.update(&batch);
    }
    h.update(count.to_be_bytes());
    Ok(ContentSummary {
        digest: Digest(h.finalize().into()),
        row_count: count,
    })
}

/// Single pass, constant memory: the digest of a stream whose rows arrive in canonical order,
/// or `None` as soon as a row arrives out of order (the caller then reopens the stream and uses
/// [`content_digest`]). When it returns a digest, that digest equals [`content_digest`]'s.
pub fn streamed_digest<R: Read>(
    schema: &Schema,
    reader: R,
) -> Result<Option<ContentSummary>, DigestError> {
    let types = column_types(schema)?;
    let mut r = RowReader::new(reader);
    let mut h = prologue(schema);
    let mut batch = Vec::with_capacity(HASH_BATCH + 4096);
    // The previous row: inside `batch` when `prev_in_batch`, else in `carry` (after a flush).
    let mut carry: Vec<u8> = Vec::with_capacity(256);
    let mut prev = (0usize, 0usize);
    let mut prev_in_batch = false;
    let mut in_order = true;
    let n = r.encode_rows(&types, &mut batch, |batch, start, _| {
        let before: &[u8] = if prev_in_batch {
            &batch[prev.0..prev.1]
        } else {
            &carry
        };
        if (prev_in_batch || !carry.is_empty() || start > 0) && before > &batch[start..] {
            in_order = false;
            return false;
        }
        if batch.len() >= HASH_BATCH {
            h.update(&batch[..]);
            carry.clear();
            carry.extend_from_slice(&batch[start..]);
            batch.clear();
            prev_in_batch = false;
        } else {
            prev = (start, batch.len());
            prev_in_batch = true;
        }
        true
    })?;
    if !in_order {
        return Ok(None);
    }
    h.update(&batch);
    h.update(n.to_be_bytes());
    Ok(Some(ContentSummary {
        digest: Digest(h.finalize().into()),
        row_count: n,
    }))
}

/// The canonical digest of a stream that can be reopened: one constant-memory pass when the
/// stream arrives in canonical order, else a second, bounded, sorting pass. `open` errors are
/// passed through unchanged.
pub fn content_digest_reopen<R, E, F>(
    schema: &Schema,
    mut open: F,
    sort_budget: u64,
) -> Result<Result<ContentSummary, DigestError>, E>
where
    R: Read,
    F: FnMut() -> Result<R, E>,
{
    let first = open()?;
    match streamed_digest(schema, first) {
        Ok(Some(summary)) => return Ok(Ok(summary)),
        Ok(None) => {}
        Err(e) => return Ok(Err(e)),
    }
    let second = open()?;
    Ok(content_digest(schema, second, sort_budget))
}
