//! The rowset digest: the content proof a member computes where the data lives.
//!
//! ```text
//! row_hash(r)     = SHA-256(r's RowBinary bytes under the schema, columns in declared order)
//! bucket b        = the rows whose row_hash begins with the byte b
//! bucket_digest b = SHA-256(the row hashes of bucket b, sorted bytewise, concatenated)
//! rowset_digest   = SHA-256( u64_be(26) || "dpone.clickhouse.rowset.v1" || schema_digest
//!                         || for every non-empty bucket b, ascending: u8(b) || u64_be(rows_b)
//!                                                                      || bucket_digest b
//!                         || u64_be(n) )
//! ```
//!
//! Two tables with equal rowset digests hold the same multiset of row hashes (the sorted list
//! of each bucket is hashed whole, duplicates included), so — short of a SHA-256 collision —
//! the same multiset of rows: `RowBinary` under one schema encodes every value exactly and
//! delimits every row. Equal row counts alone never count: the digest covers every row's bytes.
//! It is stricter than the canonical digest ([`super::digest`]): it compares bits, so `-0.0`
//! and `+0.0` differ. Both sides derive from the same artifact bytes, so strictness can only
//! refuse, never accept, different content.
//!
//! The digest needs no row order, so a member computes it with one `GROUP BY` over its table
//! (`adapters/clickhouse` holds that query) and returns 256 small rows instead of the table,
//! and the host computes it over the artifact in one streaming pass. The host keeps at most
//! `memory_budget` bytes of row hashes in memory; beyond that it appends each bucket's hashes
//! to one anonymous temporary file (removed by the operating system when closed, readable by
//! this process only) and sorts one bucket at a time at the end, so memory does not grow with
//! the table (about 1/256 of 32 bytes per row at the end).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};

use sha2::{Digest as _, Sha256};

use super::digest::{ContentSummary, DigestError, column_types};
use super::rowbinary::RowReader;
use crate::contracts::hash::Digest;
use crate::contracts::identity::schema_digest;
use crate::contracts::schema::Schema;

const DOMAIN: &[u8] = b"dpone.clickhouse.rowset.v1";
const BUCKETS: usize = 256;
const HASH_BYTES: usize = 32;

/// The digest of one bucket, as a member reports it and as the host computes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketDigest {
    /// First byte of every row hash in the bucket.
    pub bucket: u8,
    /// Rows in the bucket (never zero: empty buckets are not reported).
    pub rows: u64,
    /// SHA-256 of the bucket's row hashes, sorted bytewise and concatenated.
    pub digest: Digest,
}

/// A member's per-bucket reply that cannot be a rowset: buckets out of order or repeated, a
/// bucket with no rows, or a row count that overflows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the member's rowset reply is malformed")]
pub struct RowsetReplyInvalid;

/// Most buckets a reply can hold.
pub const MAX_BUCKETS: usize = BUCKETS;

/// One bucket as a member's reply row carries it: the digest as 64 hex digits.
pub fn bucket_from_reply(
    bucket: u8,
    rows: u64,
    digest_hex: &str,
) -> Result<BucketDigest, RowsetReplyInvalid> {
    let mut digest = [0u8; HASH_BYTES];
    hex::decode_to_slice(digest_hex, &mut digest).map_err(|_| RowsetReplyInvalid)?;
    Ok(BucketDigest {
        bucket,
        rows,
        digest: Digest(digest),
    })
}

/// The rowset digest from its buckets (one per non-empty bucket, strictly ascending).
pub fn combine(
    schema: &Schema,
    buckets: &[BucketDigest],
) -> Result<ContentSummary, RowsetReplyInvalid> {
    let mut h = Sha256::new();
    h.update((DOMAIN.len() as u64).to_be_bytes());
    h.update(DOMAIN);
    h.update(schema_digest(schema).0);
    let mut total: u64 = 0;
    let mut last: Option<u8> = None;
    for b in buckets {
        if b.rows == 0 || last.is_some_and(|l| l >= b.bucket) {
            return Err(RowsetReplyInvalid);
        }
        last = Some(b.bucket);
        total = total.checked_add(b.rows).ok_or(RowsetReplyInvalid)?;
        h.update([b.bucket]);
        h.update(b.rows.to_be_bytes());
        h.update(b.digest.0);
    }
    h.update(total.to_be_bytes());
    Ok(ContentSummary {
        digest: Digest(h.finalize().into()),
        row_count: total,
    })
}

/// Where spilled hashes of one bucket lie in the spill file: (offset, hashes).
type Segment = (u64, u64);

/// Accumulates row hashes into buckets, spilling past a memory budget.
pub struct RowsetHasher {
    buckets: Vec<Vec<[u8; HASH_BYTES]>>,
    held: usize,
    budget_hashes: usize,
    spill: Option<(File, u64)>,
    segments: Vec<Vec<Segment>>,
}

impl RowsetHasher {
    /// A hasher holding at most `memory_budget` bytes of row hashes before it spills (at least
    /// one hash per bucket).
    pub fn new(memory_budget: u64) -> Self {
        let budget_hashes = usize::try_from(memory_budget / HASH_BYTES as u64)
            .unwrap_or(usize::MAX)
            .max(BUCKETS);
        Self {
            buckets: vec![Vec::new(); BUCKETS],
            held: 0,
            budget_hashes,
            spill: None,
            segments: vec![Vec::new(); BUCKETS],
        }
    }

    /// Adds one row, by its `RowBinary` bytes.
    pub fn push_row(&mut self, row: &[u8]) -> io::Result<()> {
        let h: [u8; HASH_BYTES] = Sha256::digest(row).into();
        self.buckets[usize::from(h[0])].push(h);
        self.held += 1;
        if self.held >= self.budget_hashes {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.spill.is_none() {
            self.spill = Some((tempfile::tempfile()?, 0));
        }
        let Some((file, end)) = self.spill.as_mut() else {
            return Ok(());
        };
        let mut w = io::BufWriter::with_capacity(1 << 20, &*file);
        w.seek(SeekFrom::Start(*end))?;
        for (b, hashes) in self.buckets.iter_mut().enumerate() {
            if hashes.is_empty() {
                continue;
            }
            for h in hashes.iter() {
                w.write_all(h)?;
            }
            self.segments[b].push((*end, hashes.len() as u64));
            *end += (hashes.len() * HASH_BYTES) as u64;
            hashes.clear();
        }
        w.flush()?;
        self.held = 0;
        Ok(())
    }

    /// Every non-empty bucket's digest, ascending.
    pub fn finish(mut self) -> io::Result<Vec<BucketDigest>> {
        let mut out = Vec::new();
        for b in 0..BUCKETS {
            let mut hashes = std::mem::take(&mut self.buckets[b]);
            if let Some((file, _)) = self.spill.as_mut() {
                for &(offset, n) in &self.segments[b] {
                    file.seek(SeekFrom::Start(offset))?;
                    let start = hashes.len();
                    hashes.resize(start + n as usize, [0; HASH_BYTES]);
                    file.read_exact(hashes[start..].as_flattened_mut())?;
                }
            }
            if hashes.is_empty() {
                continue;
            }
            // Bytewise order; row hashes are uniform, so the 8 bytes after the bucket byte
            // decide almost every comparison as one integer comparison.
            hashes.sort_unstable_by(|a, b| sort_key(a).cmp(&sort_key(b)).then_with(|| a.cmp(b)));
            let mut h = Sha256::new();
            for chunk in hashes.chunks(2048) {
                h.update(chunk.as_flattened());
            }
            out.push(BucketDigest {
                bucket: b as u8,
                rows: hashes.len() as u64,
                digest: Digest(h.finalize().into()),
            });
        }
        Ok(out)
    }
}

fn sort_key(h: &[u8; HASH_BYTES]) -> u64 {
    let mut k = [0u8; 8];
    k.copy_from_slice(&h[1..9]);
    u64::from_be_bytes(k)
}

/// The rowset digest of a `RowBinary` stream of `schema`, every row decoded (a malformed stream
/// is refused), holding at most `memory_budget` bytes of row hashes in memory.
pub fn rowset_digest<R: Read>(
    schema: &Schema,
    reader: R,
    memory_budget: u64,
) -> Result<ContentSummary, DigestError> {
    let types = column_types(schema)?;
    let mut hasher = RowsetHasher::new(memory_budget);
    let mut spill_error = None;
    RowReader::new(reader).for_each_raw_row(&types, |row| {
        if spill_error.is_none()
            && let Err(e) = hasher.push_row(row)
        {
            spill_error = Some(e.kind());
        }
    })?;
    if let Some(kind) = spill_error {
        return Err(DigestError::Spill(kind));
    }
    let buckets = hasher.finish().map_err(|e| DigestError::Spill(e.kind()))?;
    combine(schema, &buckets).map_err(|_| DigestError::Spill(io::ErrorKind::InvalidData))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::canonical::{RowBinaryWriter, Value};
    use crate::contracts::schema::Column;

    fn schema() -> Schema {
        Schema {
            columns: vec![
                Column {
                    name: "id".into(),
                    type_name: "UInt64".into(),
                },
                Column {
                    name: "s".into(),
                    type_name: "String".into(),
                },
            ],
        }
    }

    fn stream(rows: impl Iterator<Item = u64>) -> Vec<u8> {
        let types = column_types(&schema()).expect("types");
        let mut w = RowBinaryWriter::new(types);
        for i in rows {
            w.row(&[
                Value::UInt(u128::from(i)),
                Value::Bytes(format!("v{}", i % 7).into_bytes()),
            ])
            .expect("row");
        }
        w.finish()
    }

    #[test]
    fn order_does_not_matter_and_spilling_changes_nothing() {
        let n = 5_000u64;
        let forward = stream(0..n);
        let rotated = stream((n / 3..n).chain(0..n / 3));
        let a = rowset_digest(&schema(), &forward[..], 64 << 20).expect("in memory");
        let b = rowset_digest(&schema(), &rotated[..], 64 << 20).expect("in memory");
        // A budget of 256 hashes spills about twenty times.
        let c = rowset_digest(&schema(), &rotated[..], 0).expect("spilled");
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(a.row_count, n);
    }

    #[test]
    fn one_changed_value_a_duplicate_or_a_missing_row_changes_the_digest() {
        let n = 1_000u64;
        let base = rowset_digest(&schema(), &stream(0..n)[..], 1 << 20).expect("base");
        let changed = rowset_digest(
            &schema(),
            &stream((0..n).map(|i| if i == 500 { n } else { i }))[..],
            1 << 20,
        )
        .expect("changed");
        let duplicate =
            rowset_digest(&schema(), &stream((0..n).chain([7]))[..], 1 << 20).expect("duplicate");
        let missing = rowset_digest(&schema(), &stream(1..n)[..], 1 << 20).expect("missing");
        // A duplicate replacing another row keeps the count but not the digest.
        let swapped =
            rowset_digest(&schema(), &stream((1..n).chain([7]))[..], 1 << 20).expect("swapped");
        for other in [changed, duplicate, missing, swapped] {
            assert_ne!(other.digest, base.digest);
        }
        assert_eq!(swapped.row_count, base.row_count);
    }

    #[test]
    fn buckets_recombine_to_the_streamed_digest_and_bad_replies_are_refused() {
        let bytes = stream(0..3_000);
        let types = column_types(&schema()).expect("types");
        let mut hasher = RowsetHasher::new(1 << 20);
        RowReader::new(&bytes[..])
            .for_each_raw_row(&types, |row| hasher.push_row(row).expect("push"))
            .expect("rows");
        let buckets = hasher.finish().expect("buckets");
        let whole = rowset_digest(&schema(), &bytes[..], 1 << 20).expect("digest");
        assert_eq!(combine(&schema(), &buckets), Ok(whole));

        let mut reversed = buckets.clone();
        reversed.reverse();
        assert_eq!(combine(&schema(), &reversed), Err(RowsetReplyInvalid));
        let mut repeated = buckets.clone();
        repeated.insert(1, buckets[0]);
        assert_eq!(combine(&schema(), &repeated), Err(RowsetReplyInvalid));
        let mut empty = buckets.clone();
        empty[3].rows = 0;
        assert_eq!(combine(&schema(), &empty), Err(RowsetReplyInvalid));
        let overflow = [
            BucketDigest {
                bucket: 0,
                rows: u64::MAX,
                digest: Digest([0; 32]),
            },
            BucketDigest {
                bucket: 1,
                rows: 1,
                digest: Digest([0; 32]),
            },
        ];
        assert_eq!(combine(&schema(), &overflow), Err(RowsetReplyInvalid));
        // Zero rows is a valid, distinct digest.
        let none = combine(&schema(), &[]).expect("empty table");
        assert_eq!(none.row_count, 0);
        assert_ne!(none.digest, whole.digest);
    }

    #[test]
    fn a_malformed_stream_is_refused() {
        let mut bytes = stream(0..10);
        bytes.pop();
        assert!(matches!(
            rowset_digest(&schema(), &bytes[..], 1 << 20),
            Err(DigestError::Decode(_))
        ));
    }
}
