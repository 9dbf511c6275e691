//! Staging load: PostgreSQL binary `COPY` artifacts into SQL Server staging tables.
//!
//! The engine's artifacts hold the source's binary `COPY` stream unchanged, which SQL Server
//! cannot read. This module streams an artifact tuple by tuple ([`TupleReader`], hashing every
//! byte and proving the receipt at the end), decodes PostgreSQL's binary send formats exactly
//! ([`decode_field`]), fits each value to the staging column without loss ([`ColumnFit`]) and
//! sends the rows by the table's load path ([`load_staging`]): tiberius' bulk insert, or
//! batched parameterized `INSERT`s for what the bulk load cannot carry
//! ([`crate::shape::load_path`]). [`check_export`] is the pre-pass run before any SQL Server
//! object exists: every column type is accepted, the key types fit the target key, and no key
//! value is one SQL Server would store differently (trailing U+0020, longer than its column,
//! wider than the index limit).
//!
//! Type mapping (PostgreSQL → SQL Server column → tiberius value; each value checked, refused
//! with [`COLUMN_VALUE_INEXACT`] if it would not read back equal):
//!
//! | PostgreSQL | SQL Server column | value |
//! | --- | --- | --- |
//! | `bool` | `bit` | `Bit` |
//! | `int2` | `tinyint` (0..=255), `smallint`, `int`, `bigint` | `U8`, `I16`, `I32`, `I64` |
//! | `int4` | `tinyint` (0..=255), `int`, `bigint` | `U8`, `I32`, `I64` |
//! | `int8` | `bigint` | `I64` |
//! | `float4` | `real`, `float` | `F32`, `F64` (NaN and ±Infinity rejected) |
//! | `float8` | `float` | `F64` (NaN and ±Infinity rejected) |
//! | `text`, `varchar`, `bpchar` | `nvarchar(n\|max)`, `nchar(n)` (exactly n units) | `String` |
//! | `text`, `varchar`, `bpchar` | `varchar(n\|max)`, `char(n)` (exactly n bytes) in the column's code page | `String` (the server converts) |
//! | `bytea` | `varbinary(n\|max)`, `binary(n)` (exactly n bytes) | `Binary` |
//! | `uuid` | `uniqueidentifier` | `Guid` |
//! | `date` | `date` | `Date` |
//! | `time` | `time(0..7)` (no digits beyond the scale) | `Time` at scale 7 |
//! | `timestamp` | `datetime2(0..7)` (no digits beyond the scale) | `DateTime2` (column scale by bulk load, 7 by parameter) |
//! | `timestamp`, `timestamptz` | `datetime` (multiples of 10 ms, from 1753), `smalldatetime` (whole minutes, 1900..2079-06-06) | `DateTime`, `SmallDateTime` |
//! | `timestamptz` | `datetime2(0..7)` (UTC, as above) or `datetimeoffset(0..7)` (offset 0) | `DateTime2`, `DateTimeOffset` at scale 7 |
//! | `numeric` | `decimal(p,s)`, `numeric(p,s)` with `s <= 37` | `Numeric` at scale `s` |
//! | `numeric` | `money`, `smallmoney` (≤ 4 decimals, in range) | `Numeric` at scale 4 |
//!
//! Canonical decoding ([`decode_field`]) maps `time`, `timestamp` and `timestamptz` to scale 7
//! (100 ns increments; PostgreSQL's microseconds are exact) and `timestamptz` to a UTC
//! `datetime2`. Values SQL Server cannot hold exactly are refused, never rounded: infinite dates
//! and timestamps, dates outside 0001-01-01..9999-12-31, `time` 24:00:00, numeric NaN and
//! ±Infinity, numerics beyond 38 digits or with non-zero digits past the column's scale,
//! timestamps with digits past a `datetime2(0..5)` column's scale.
//!
//! tiberius 0.13 (as 0.12) encodes `uuid::Uuid` in RFC 4122 byte order and swaps the first three groups
//! itself for SQL Server's mixed-endian GUID layout, so PostgreSQL's uuid bytes (RFC order) go
//! in unchanged. Errors name columns and types, never values.

use crate::conn::{self, MssqlClient};
use crate::keys;
use crate::shape::{self, ColumnRow, LoadPath};
use crate::sql::{KeyColumn, KeyType};
use dpone_engine_xmin::artifact::{ArtifactStore, io_error};
use dpone_engine_xmin::envelope::{
    ARTIFACT_FORMAT, PayloadReceipt, SnapshotEnvelope, SourceColumn,
};
use dpone_engine_xmin::{ErrorCode, XminError};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::io::{self, BufRead, BufReader, Read};
use tiberius::numeric::Numeric;
use tiberius::time::{Date, DateTime, DateTime2, DateTimeOffset, SmallDateTime, Time};
use tiberius::{ColumnData, Query, TokenRow, Uuid};

/// Detail code: a text key value is longer than its `nvarchar(n)` key column.
pub const KEY_TOO_LONG: &str = "mssql_transaction.target_key_too_long";
/// Detail code of every per-value refusal of [`ColumnFit::convert`]: the value would not read
/// back equal from its column (too long, padded, beyond the scale or the grid, out of range, a
/// character outside the code page). The message names the column, never the value.
pub const COLUMN_VALUE_INEXACT: &str = "mssql_transaction.column_value_inexact";

/// SQL Server `date` day of 1900-01-01, day 0 of `datetime` and `smalldatetime`.
const DAY_1900: i64 = 693_595;
/// SQL Server `date` day of 1753-01-01, the first day of `datetime`.
const DAY_1753: i64 = 639_905;
/// SQL Server `date` day of 2079-06-06, the last day of `smalldatetime`.
const DAY_2079_06_06: i64 = DAY_1900 + 65_535;
/// `datetime` ticks are 1/300 s; a microsecond value is on that grid when it is a multiple of
/// 10 ms (3 ticks).
const DATETIME_GRID_MICROS: u64 = 10_000;
const MICROS_PER_MINUTE: u64 = 60_000_000;
/// Largest `money` and `smallmoney` values times 10^4 (their negative bounds are one more).
const MONEY_MAX: i128 = i64::MAX as i128;
const SMALLMONEY_MAX: i128 = i32::MAX as i128;

/// Days from 0001-01-01 (SQL Server `date` day 0) to 2000-01-01 (PostgreSQL day 0).
const PG_EPOCH_DAYS: i64 = 730_119;
/// SQL Server `date` day of 9999-12-31.
const MAX_DATE_DAYS: i64 = 3_652_058;
const MICROS_PER_DAY: i64 = 86_400_000_000;
/// Largest scale tiberius' `Numeric` accepts.
const MAX_NUMERIC_SCALE: u32 = 37;
/// Exclusive bound of a 38-digit decimal.
const DECIMAL_LIMIT: i128 = 10i128.pow(38);

/// PostgreSQL built-in types the SQL Server target accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PgType {
    /// `bool` (OID 16).
    Bool,
    /// `bytea` (OID 17).
    Bytea,
    /// `int8` (OID 20).
    Int8,
    /// `int2` (OID 21).
    Int2,
    /// `int4` (OID 23).
    Int4,
    /// `text` (OID 25).
    Text,
    /// `float4` (OID 700).
    Float4,
    /// `float8` (OID 701).
    Float8,
    /// `bpchar` (OID 1042).
    Bpchar,
    /// `varchar` (OID 1043).
    Varchar,
    /// `date` (OID 1082).
    Date,
    /// `time` (OID 1083).
    Time,
    /// `timestamp` (OID 1114).
    Timestamp,
    /// `timestamptz` (OID 1184).
    Timestamptz,
    /// `numeric` (OID 1700).
    Numeric,
    /// `uuid` (OID 2950).
    Uuid,
}

impl PgType {
    /// The accepted type with this OID; `None` for every other type.
    pub fn from_oid(oid: u32) -> Option<PgType> {
        Some(match oid {
            16 => PgType::Bool,
            17 => PgType::Bytea,
            20 => PgType::Int8,
            21 => PgType::Int2,
            23 => PgType::Int4,
            25 => PgType::Text,
            700 => PgType::Float4,
            701 => PgType::Float8,
            1042 => PgType::Bpchar,
            1043 => PgType::Varchar,
            1082 => PgType::Date,
            1083 => PgType::Time,
            1114 => PgType::Timestamp,
            1184 => PgType::Timestamptz,
            1700 => PgType::Numeric,
            2950 => PgType::Uuid,
            _ => return None,
        })
    }

    /// The type's OID.
    pub fn oid(self) -> u32 {
        match self {
            PgType::Bool => 16,
            PgType::Bytea => 17,
            PgType::Int8 => 20,
            PgType::Int2 => 21,
            PgType::Int4 => 23,
            PgType::Text => 25,
            PgType::Float4 => 700,
            PgType::Float8 => 701,
            PgType::Bpchar => 1042,
            PgType::Varchar => 1043,
            PgType::Date => 1082,
            PgType::Time => 1083,
            PgType::Timestamp => 1114,
            PgType::Timestamptz => 1184,
            PgType::Numeric => 1700,
            PgType::Uuid => 2950,
        }
    }

    /// The type's internal name (`pg_type.typname`).
    pub fn name(self) -> &'static str {
        match self {
            PgType::Bool => "bool",
            PgType::Bytea => "bytea",
            PgType::Int8 => "int8",
            PgType::Int2 => "int2",
            PgType::Int4 => "int4",
            PgType::Text => "text",
            PgType::Float4 => "float4",
            PgType::Float8 => "float8",
            PgType::Bpchar => "bpchar",
            PgType::Varchar => "varchar",
            PgType::Date => "date",
            PgType::Time => "time",
            PgType::Timestamp => "timestamp",
            PgType::Timestamptz => "timestamptz",
            PgType::Numeric => "numeric",
            PgType::Uuid => "uuid",
        }
    }

    fn is_text(self) -> bool {
        matches!(self, PgType::Text | PgType::Varchar | PgType::Bpchar)
    }
}

/// The accepted type of a column; [`ErrorCode::TargetColumnTypeUnsupported`] naming the column
/// and its PostgreSQL type otherwise.
pub fn column_type(column: &SourceColumn) -> Result<PgType, XminError> {
    PgType::from_oid(column.type_oid).ok_or_else(|| {
        XminError::new(
            ErrorCode::TargetColumnTypeUnsupported,
            format!(
                "column {:?} has PostgreSQL type {}, which the SQL Server target does not accept",
                column.name, column.type_sql
            ),
        )
    })
}

/// The accepted type of every column, in order; fails on the first column not accepted.
pub fn column_types(columns: &[SourceColumn]) -> Result<Vec<PgType>, XminError> {
    columns.iter().map(column_type).collect()
}

fn malformed(message: impl Into<String>) -> XminError {
    XminError::new(ErrorCode::ArtifactMalformed, message)
}

fn unsupported(message: impl Into<String>) -> XminError {
    XminError::new(ErrorCode::TargetColumnTypeUnsupported, message)
}

/// Names the column in a message; a leading detail code (`mssql_transaction.…: `) stays first.
fn in_column(name: &str, e: XminError) -> XminError {
    let message = e.message();
    let message = match message.split_once(": ") {
        Some((code, rest)) if code.starts_with("mssql_transaction.") && !code.contains(' ') => {
            format!("{code}: column {name:?}: {rest}")
        }
        _ => format!("column {name:?}: {message}"),
    };
    XminError::new(e.code(), message)
}

// ---------------------------------------------------------------------------------------------
// Streaming tuple reader
// ---------------------------------------------------------------------------------------------

const SIGNATURE: &[u8; 11] = b"PGCOPY\n\xff\r\n\0";
/// Flag bits a reader must understand: 0-15 (incompatible format changes) and 16 (OIDs, which
/// the source never sends).
const FLAGS_REJECTED: u32 = 0x0001_ffff;

/// Hashes and counts every byte it passes up, and reads at most `limit` bytes from `inner`
/// (the receipt's size plus one, enough to prove a longer stream without reading all of it).
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
    limit: u64,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let room = self.limit.saturating_sub(self.bytes);
        let want = usize::try_from(room).unwrap_or(usize::MAX).min(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let n = self.inner.read(&mut buf[..want])?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReaderState {
    Tuples,
    Done,
    Failed,
}

/// One tuple of a [`TupleReader`], borrowed until the next read.
#[derive(Clone, Copy, Debug)]
pub struct Tuple<'a> {
    data: &'a [u8],
    spans: &'a [Option<(usize, usize)>],
}

impl<'a> Tuple<'a> {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether the tuple has no fields.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Field `i`: `Some(bytes)`, or `None` when it is NULL or `i` is out of range.
    pub fn field(&self, i: usize) -> Option<&'a [u8]> {
        let data = self.data;
        self.spans
            .get(i)
            .copied()
            .flatten()
            .and_then(|(start, end)| data.get(start..end))
    }

    /// The fields in order (`None` = NULL).
    pub fn fields(&self) -> impl Iterator<Item = Option<&'a [u8]>> + '_ {
        (0..self.spans.len()).map(|i| self.field(i))
    }
}

/// Streaming parser of a binary `COPY` artifact against its [`PayloadReceipt`].
///
/// Holds one tuple at a time. Every byte read is hashed and counted; at most the receipt's size
/// plus one byte is read from the source. After the trailer it proves that nothing follows,
/// that sha256 and size equal the receipt and that the tuple count equals the receipt's rows;
/// only then does [`TupleReader::next_tuple`] return `Ok(None)`.
///
/// Codes: bytes differing from the receipt (including a truncated or extended artifact) →
/// [`ErrorCode::ArtifactChecksumMismatch`]; the recorded bytes end before the trailer →
/// [`ErrorCode::ArtifactIncomplete`]; bad signature, flags, lengths, field count or bytes after
/// the trailer → [`ErrorCode::ArtifactMalformed`]; a NULL in one of the leading key fields →
/// [`ErrorCode::SnapshotNullKey`]; tuple count differing from the receipt →
/// [`ErrorCode::SnapshotCountMismatch`]; read failures → [`ErrorCode::ArtifactIo`].
pub struct TupleReader<R: Read> {
    src: BufReader<Hashing<R>>,
    sha256: String,
    expected_bytes: u64,
    expected_rows: u64,
    fields: u16,
    key_fields: u16,
    data: Vec<u8>,
    spans: Vec<Option<(usize, usize)>>,
    tuples: u64,
    state: ReaderState,
    failure: Option<(ErrorCode, String)>,
}

impl<R: Read> std::fmt::Debug for TupleReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TupleReader")
            .field("fields", &self.fields)
            .field("key_fields", &self.key_fields)
            .field("tuples", &self.tuples)
            .field("bytes", &self.src.get_ref().bytes)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<R: Read> TupleReader<R> {
    /// Starts reading `source`, which must hold the artifact of `payload`, and parses the
    /// header. The first `key_fields` of every tuple must be non-NULL.
    pub fn new(source: R, payload: &PayloadReceipt, key_fields: u16) -> Result<Self, XminError> {
        if payload.format != ARTIFACT_FORMAT {
            return Err(malformed("payload format is not postgres-copy-binary"));
        }
        if key_fields > payload.fields {
            return Err(malformed("payload has fewer fields than key columns"));
        }
        if !payload.complete {
            return Err(XminError::new(
                ErrorCode::ArtifactIncomplete,
                "payload was not completely extracted",
            ));
        }
        let hashing = Hashing {
            inner: source,
            hasher: Sha256::new(),
            bytes: 0,
            limit: payload.artifact.bytes.saturating_add(1),
        };
        let mut reader = Self {
            src: BufReader::with_capacity(256 * 1024, hashing),
            sha256: payload.artifact.sha256.clone(),
            expected_bytes: payload.artifact.bytes,
            expected_rows: payload.rows,
            fields: payload.fields,
            key_fields,
            data: Vec::new(),
            spans: Vec::with_capacity(usize::from(payload.fields)),
            tuples: 0,
            state: ReaderState::Tuples,
            failure: None,
        };
        reader.header().map_err(|e| reader.fail(e))?;
        Ok(reader)
    }

    /// Tuples returned so far.
    pub fn tuples(&self) -> u64 {
        self.tuples
    }

    /// Bytes read (and hashed) so far.
    pub fn bytes(&self) -> u64 {
        self.src.get_ref().bytes
    }

    /// Fields per tuple.
    pub fn field_count(&self) -> u16 {
        self.fields
    }

    /// The next tuple, or `Ok(None)` once the trailer was read and the whole artifact proved
    /// equal to its receipt. After an error every call returns that error again.
    pub fn next_tuple(&mut self) -> Result<Option<Tuple<'_>>, XminError> {
        match self.state {
            ReaderState::Done => return Ok(None),
            ReaderState::Failed => {
                let (code, message) = self
                    .failure
                    .clone()
                    .unwrap_or((ErrorCode::ArtifactMalformed, String::new()));
                return Err(XminError::new(code, message));
            }
            ReaderState::Tuples => {}
        }
        match self.read_tuple() {
            Ok(true) => Ok(Some(Tuple {
                data: &self.data,
                spans: &self.spans,
            })),
            Ok(false) => {
                self.state = ReaderState::Done;
                Ok(None)
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    fn fail(&mut self, e: XminError) -> XminError {
        self.state = ReaderState::Failed;
        self.failure = Some((e.code(), e.message().to_owned()));
        e
    }

    fn receipt_matches(&self) -> bool {
        let h = self.src.get_ref();
        h.bytes == self.expected_bytes
            && hex::encode(h.hasher.clone().finalize()).eq_ignore_ascii_case(&self.sha256)
    }

    fn mismatch() -> XminError {
        XminError::new(
            ErrorCode::ArtifactChecksumMismatch,
            "artifact bytes do not match their receipt",
        )
    }

    /// The stream ended early: a changed artifact if its bytes are not the recorded ones,
    /// otherwise the recorded artifact itself lacks its trailer.
    fn ended(&self) -> XminError {
        if self.receipt_matches() {
            XminError::new(
                ErrorCode::ArtifactIncomplete,
                "artifact ends before its trailer",
            )
        } else {
            Self::mismatch()
        }
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), XminError> {
        match self.src.read_exact(buf) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(self.ended()),
            Err(e) => Err(io_error("read artifact", &e)),
        }
    }

    fn read_i16(&mut self) -> Result<i16, XminError> {
        let mut b = [0u8; 2];
        self.read_exact(&mut b)?;
        Ok(i16::from_be_bytes(b))
    }

    fn read_i32(&mut self) -> Result<i32, XminError> {
        let mut b = [0u8; 4];
        self.read_exact(&mut b)?;
        Ok(i32::from_be_bytes(b))
    }

    fn header(&mut self) -> Result<(), XminError> {
        let mut sig = [0u8; 11];
        self.read_exact(&mut sig)?;
        if &sig != SIGNATURE {
            return Err(malformed("artifact lacks the binary COPY signature"));
        }
        let flags = self.read_i32()? as u32;
        if flags & FLAGS_REJECTED != 0 {
            return Err(malformed("binary COPY header has unsupported flags"));
        }
        let ext = self.read_i32()?;
        let ext = u64::try_from(ext).map_err(|_| malformed("negative header extension length"))?;
        let skipped = io::copy(&mut (&mut self.src).take(ext), &mut io::sink())
            .map_err(|e| io_error("read artifact", &e))?;
        if skipped != ext {
            return Err(self.ended());
        }
        Ok(())
    }

    /// Reads one tuple into `data`/`spans`; `false` after a verified trailer.
    fn read_tuple(&mut self) -> Result<bool, XminError> {
        let n = self.read_i16()?;
        if n == -1 {
            self.finish()?;
            return Ok(false);
        }
        if n < 0 || n as u16 != self.fields {
            return Err(malformed(format!(
                "a tuple has {n} fields, expected {}",
                self.fields
            )));
        }
        self.data.clear();
        self.spans.clear();
        for i in 0..self.fields {
            let len = self.read_i32()?;
            if len == -1 {
                if i < self.key_fields {
                    return Err(XminError::new(
                        ErrorCode::SnapshotNullKey,
                        format!("key field {} is NULL in the snapshot", i + 1),
                    ));
                }
                self.spans.push(None);
                continue;
            }
            let len = u64::try_from(len).map_err(|_| malformed("negative field length"))?;
            let start = self.data.len();
            let got = (&mut self.src)
                .take(len)
                .read_to_end(&mut self.data)
                .map_err(|e| io_error("read artifact", &e))?;
            if got as u64 != len {
                return Err(self.ended());
            }
            self.spans.push(Some((start, self.data.len())));
        }
        self.tuples += 1;
        Ok(true)
    }

    fn finish(&mut self) -> Result<(), XminError> {
        let trailing = !self
            .src
            .fill_buf()
            .map_err(|e| io_error("read artifact", &e))?
            .is_empty();
        if trailing {
            io::copy(&mut self.src, &mut io::sink()).map_err(|e| io_error("read artifact", &e))?;
        }
        if !self.receipt_matches() {
            return Err(Self::mismatch());
        }
        if trailing {
            return Err(malformed("bytes follow the binary COPY trailer"));
        }
        if self.tuples != self.expected_rows {
            return Err(XminError::new(
                ErrorCode::SnapshotCountMismatch,
                "artifact row count differs from its receipt",
            ));
        }
        Ok(())
    }
}

/// Opens the artifact of `payload` in `store` as a [`TupleReader`].
pub fn open_payload(
    store: &dyn ArtifactStore,
    payload: &PayloadReceipt,
    key_fields: u16,
) -> Result<TupleReader<Box<dyn Read + Send>>, XminError> {
    let source = store
        .open(&payload.artifact.sha256)
        .map_err(|e| io_error("open artifact", &e))?;
    TupleReader::new(source, payload, key_fields)
}

// ---------------------------------------------------------------------------------------------
// Decoding PostgreSQL binary send formats
// ---------------------------------------------------------------------------------------------

fn fixed<const N: usize>(ty: PgType, bytes: &[u8]) -> Result<[u8; N], XminError> {
    bytes.try_into().map_err(|_| {
        malformed(format!(
            "a {} field has {} bytes, expected {N}",
            ty.name(),
            bytes.len()
        ))
    })
}

fn decode_bool(bytes: &[u8]) -> Result<bool, XminError> {
    match fixed::<1>(PgType::Bool, bytes)? {
        [0] => Ok(false),
        [1] => Ok(true),
        _ => Err(malformed("a bool field is neither 0 nor 1")),
    }
}

fn decode_int(ty: PgType, bytes: &[u8]) -> Result<i64, XminError> {
    Ok(match ty {
        PgType::Int2 => i64::from(i16::from_be_bytes(fixed(ty, bytes)?)),
        PgType::Int4 => i64::from(i32::from_be_bytes(fixed(ty, bytes)?)),
        _ => i64::from_be_bytes(fixed(ty, bytes)?),
    })
}

fn finite(ty: PgType, v: f64) -> Result<(), XminError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(unsupported(format!(
            "a {} value is NaN or infinite, which SQL Server cannot store",
            ty.name()
        )))
    }
}

fn decode_f32(bytes: &[u8]) -> Result<f32, XminError> {
    let v = f32::from_be_bytes(fixed(PgType::Float4, bytes)?);
    finite(PgType::Float4, f64::from(v))?;
    Ok(v)
}

fn decode_f64(bytes: &[u8]) -> Result<f64, XminError> {
    let v = f64::from_be_bytes(fixed(PgType::Float8, bytes)?);
    finite(PgType::Float8, v)?;
    Ok(v)
}

fn decode_text(ty: PgType, bytes: &[u8]) -> Result<String, XminError> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| malformed(format!("a {} field is not valid UTF-8", ty.name())))
}

/// SQL Server `date` day (days since 0001-01-01) of a PostgreSQL day offset from 2000-01-01.
fn sql_day(ty: PgType, pg_days: i64) -> Result<u32, XminError> {
    let day = PG_EPOCH_DAYS + pg_days;
    if (0..=MAX_DATE_DAYS).contains(&day) {
        u32::try_from(day).map_err(|_| out_of_range(ty))
    } else {
        Err(out_of_range(ty))
    }
}

fn out_of_range(ty: PgType) -> XminError {
    unsupported(format!(
        "a {} value is outside SQL Server's range 0001-01-01 .. 9999-12-31",
        ty.name()
    ))
}

fn infinite(ty: PgType) -> XminError {
    unsupported(format!(
        "a {} value is infinite, which SQL Server cannot store",
        ty.name()
    ))
}

fn decode_date(bytes: &[u8]) -> Result<u32, XminError> {
    let days = i32::from_be_bytes(fixed(PgType::Date, bytes)?);
    if days == i32::MAX || days == i32::MIN {
        return Err(infinite(PgType::Date));
    }
    sql_day(PgType::Date, i64::from(days))
}

/// Microseconds since midnight, `0 .. 24h` exclusive.
fn decode_time(bytes: &[u8]) -> Result<u64, XminError> {
    let micros = i64::from_be_bytes(fixed(PgType::Time, bytes)?);
    if !(0..=MICROS_PER_DAY).contains(&micros) {
        return Err(malformed("a time field is outside 00:00 .. 24:00"));
    }
    if micros == MICROS_PER_DAY {
        return Err(unsupported(
            "a time value is 24:00:00, which SQL Server cannot store",
        ));
    }
    u64::try_from(micros).map_err(|_| malformed("a time field is negative"))
}

/// SQL Server day and microseconds since midnight of a timestamp.
fn decode_timestamp(ty: PgType, bytes: &[u8]) -> Result<(u32, u64), XminError> {
    let micros = i64::from_be_bytes(fixed(ty, bytes)?);
    if micros == i64::MAX || micros == i64::MIN {
        return Err(infinite(ty));
    }
    let day = sql_day(ty, micros.div_euclid(MICROS_PER_DAY))?;
    let of_day = u64::try_from(micros.rem_euclid(MICROS_PER_DAY)).map_err(|_| out_of_range(ty))?;
    Ok((day, of_day))
}

/// Time at `scale` (6 or 7) from microseconds.
fn time_at(micros: u64, scale: u8) -> Time {
    let factor = if scale >= 7 { 10 } else { 1 };
    Time::new(micros * factor, scale)
}

fn datetime2_at(day: u32, micros: u64, scale: u8) -> DateTime2 {
    DateTime2::new(Date::new(day), time_at(micros, scale))
}

/// A `datetime2(scale)` value of exactly `micros` past midnight: scale 6 and 7 hold every
/// microsecond; scale 0..5 only values without digits beyond it (the value is refused, never
/// rounded).
fn datetime2_exact(day: u32, micros: u64, scale: u8) -> Result<DateTime2, XminError> {
    if scale >= 6 {
        return Ok(datetime2_at(day, micros, scale));
    }
    let step = 10u64.pow(6 - u32::from(scale));
    if !micros.is_multiple_of(step) {
        return Err(inexact(format!(
            "a timestamp has digits beyond the column's scale {scale} (not rounded)"
        )));
    }
    Ok(DateTime2::new(
        Date::new(day),
        Time::new(micros / step, scale),
    ))
}

/// A PostgreSQL numeric in base-10000 digits.
#[derive(Debug)]
struct PgNumeric {
    negative: bool,
    weight: i16,
    dscale: u16,
    digits: Vec<u16>,
}

const NUMERIC_POS: u16 = 0x0000;
const NUMERIC_NEG: u16 = 0x4000;
const NUMERIC_NAN: u16 = 0xC000;
const NUMERIC_PINF: u16 = 0xD000;
const NUMERIC_NINF: u16 = 0xF000;

fn parse_numeric(bytes: &[u8]) -> Result<PgNumeric, XminError> {
    let word = |i: usize| -> Result<u16, XminError> {
        bytes
            .get(2 * i..2 * i + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| malformed("a numeric field is truncated"))
    };
    let ndigits = word(0)? as i16;
    let weight = word(1)? as i16;
    let sign = word(2)?;
    let dscale = word(3)?;
    match sign {
        NUMERIC_NAN => {
            return Err(unsupported(
                "a numeric value is NaN, which SQL Server cannot store",
            ));
        }
        NUMERIC_PINF | NUMERIC_NINF => {
            return Err(unsupported(
                "a numeric value is infinite, which SQL Server cannot store",
            ));
        }
        NUMERIC_POS | NUMERIC_NEG => {}
        _ => return Err(malformed("a numeric field has an invalid sign")),
    }
    let ndigits = usize::try_from(ndigits).map_err(|_| malformed("negative numeric length"))?;
    if bytes.len() != 8 + 2 * ndigits || dscale > 0x3FFF {
        return Err(malformed("a numeric field has an invalid length or scale"));
    }
    let digits = (0..ndigits)
        .map(|i| word(4 + i))
        .collect::<Result<Vec<u16>, _>>()?;
    if digits.iter().any(|&d| d > 9999) {
        return Err(malformed("a numeric field has a digit above 9999"));
    }
    Ok(PgNumeric {
        negative: sign == NUMERIC_NEG,
        weight,
        dscale,
        digits,
    })
}

/// Why a numeric does not fit a scale.
enum NumericFit {
    /// A non-zero digit lies right of the scale.
    Fraction,
    /// 38 digits or more at that scale.
    Overflow,
}

impl PgNumeric {
    /// The exact value times `10^scale` if it is an integer below `10^38` in magnitude.
    fn at_scale(&self, scale: u32) -> Result<i128, NumericFit> {
        let mut acc: i128 = 0;
        let scale = i64::from(scale);
        for (i, &d) in self.digits.iter().enumerate() {
            if d == 0 {
                continue;
            }
            let exp = 4 * (i64::from(self.weight) - i as i64) + scale;
            let term = if exp >= 0 {
                let exp = u32::try_from(exp).map_err(|_| NumericFit::Overflow)?;
                if exp > 38 {
                    return Err(NumericFit::Overflow);
                }
                i128::from(d)
                    .checked_mul(10i128.pow(exp))
                    .ok_or(NumericFit::Overflow)?
            } else {
                let cut = u32::try_from(-exp).map_err(|_| NumericFit::Fraction)?;
                if cut >= 4 {
                    return Err(NumericFit::Fraction);
                }
                let div = 10i128.pow(cut);
                if i128::from(d) % div != 0 {
                    return Err(NumericFit::Fraction);
                }
                i128::from(d) / div
            };
            acc = acc.checked_add(term).ok_or(NumericFit::Overflow)?;
            if acc >= DECIMAL_LIMIT {
                return Err(NumericFit::Overflow);
            }
        }
        Ok(if self.negative { -acc } else { acc })
    }
}

fn numeric_overflow() -> XminError {
    unsupported("a numeric value has more than 38 digits, beyond SQL Server's decimal(38)")
}

/// The value at its display scale (`dscale`), or at scale 37 when `dscale` is larger and the
/// digits beyond 37 are zeros.
fn decode_numeric(bytes: &[u8]) -> Result<Numeric, XminError> {
    let n = parse_numeric(bytes)?;
    let scale = u32::from(n.dscale).min(MAX_NUMERIC_SCALE);
    match n.at_scale(scale) {
        Ok(v) => Ok(Numeric::new_with_scale(v, scale as u8)),
        Err(NumericFit::Overflow) => Err(numeric_overflow()),
        Err(NumericFit::Fraction) => Err(unsupported(
            "a numeric value has non-zero digits beyond its scale or beyond 37 fractional digits",
        )),
    }
}

/// Decodes one non-NULL field in PostgreSQL's binary send format, exactly.
///
/// Canonical values: `int2` → `I16`, `int4` → `I32`, `int8` → `I64`, `bool` → `Bit`,
/// `float4` → `F32`, `float8` → `F64`, `text`/`varchar`/`bpchar` → `String`, `bytea` →
/// `Binary`, `uuid` → `Guid`, `date` → `Date`, `time` → `Time` (scale 7), `timestamp` and
/// `timestamptz` → `DateTime2` (scale 7; `timestamptz` as UTC), `numeric` → `Numeric` at its
/// display scale. Wrong lengths and invalid encodings are [`ErrorCode::ArtifactMalformed`];
/// values SQL Server cannot hold exactly are [`ErrorCode::TargetColumnTypeUnsupported`].
pub fn decode_field(ty: PgType, bytes: &[u8]) -> Result<ColumnData<'static>, XminError> {
    Ok(match ty {
        PgType::Bool => ColumnData::Bit(Some(decode_bool(bytes)?)),
        PgType::Int2 => ColumnData::I16(Some(i16::from_be_bytes(fixed(ty, bytes)?))),
        PgType::Int4 => ColumnData::I32(Some(i32::from_be_bytes(fixed(ty, bytes)?))),
        PgType::Int8 => ColumnData::I64(Some(i64::from_be_bytes(fixed(ty, bytes)?))),
        PgType::Float4 => ColumnData::F32(Some(decode_f32(bytes)?)),
        PgType::Float8 => ColumnData::F64(Some(decode_f64(bytes)?)),
        PgType::Text | PgType::Varchar | PgType::Bpchar => {
            ColumnData::String(Some(Cow::Owned(decode_text(ty, bytes)?)))
        }
        PgType::Bytea => ColumnData::Binary(Some(Cow::Owned(bytes.to_vec()))),
        PgType::Uuid => ColumnData::Guid(Some(Uuid::from_bytes(fixed(ty, bytes)?))),
        PgType::Date => ColumnData::Date(Some(Date::new(decode_date(bytes)?))),
        PgType::Time => ColumnData::Time(Some(time_at(decode_time(bytes)?, 7))),
        PgType::Timestamp | PgType::Timestamptz => {
            let (day, micros) = decode_timestamp(ty, bytes)?;
            ColumnData::DateTime2(Some(datetime2_at(day, micros, 7)))
        }
        PgType::Numeric => ColumnData::Numeric(Some(decode_numeric(bytes)?)),
    })
}

// ---------------------------------------------------------------------------------------------
// Fitting values to staging columns
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fit {
    Bit,
    TinyInt,
    SmallInt,
    Int,
    BigInt,
    Real,
    Float,
    /// `nvarchar(n|max)`, or `nchar(n)` when `fixed` (a value must fill it: no padding).
    NVarChar {
        max_bytes: Option<usize>,
        fixed: bool,
    },
    /// `varchar(n|max)`/`char(n)` in a code page (`None`: a `_UTF8` collation).
    VarChar {
        max_bytes: Option<usize>,
        fixed: bool,
        code_page: Option<&'static encoding_rs::Encoding>,
    },
    /// `varbinary(n|max)`, or `binary(n)` when `fixed`.
    VarBinary {
        max_bytes: Option<usize>,
        fixed: bool,
    },
    Guid,
    Date,
    Time {
        scale: u8,
    },
    /// `datetime2(scale)`, sent at `wire` (the column's scale by bulk load, 7 as a parameter).
    DateTime2 {
        scale: u8,
        wire: u8,
    },
    DateTimeOffset {
        scale: u8,
    },
    DateTime,
    SmallDateTime,
    Decimal {
        precision: u8,
        scale: u8,
    },
    Money {
        small: bool,
    },
}

/// The `encoding_rs` encoding of a supported `varchar` code page (`None` for 65001, UTF-8).
fn code_page_encoding(code_page: u32) -> Option<Option<&'static encoding_rs::Encoding>> {
    use encoding_rs as e;
    Some(match code_page {
        65001 => None,
        874 => Some(e::WINDOWS_874),
        1250 => Some(e::WINDOWS_1250),
        1251 => Some(e::WINDOWS_1251),
        1252 => Some(e::WINDOWS_1252),
        1253 => Some(e::WINDOWS_1253),
        1254 => Some(e::WINDOWS_1254),
        1255 => Some(e::WINDOWS_1255),
        1256 => Some(e::WINDOWS_1256),
        1257 => Some(e::WINDOWS_1257),
        1258 => Some(e::WINDOWS_1258),
        _ => return None,
    })
}

/// The bytes `s` takes in a `varchar` column of `code_page`, or `None` when a character has no
/// exact representation there (so SQL Server would store `?` or a best-fit look-alike).
pub fn code_page_bytes(s: &str, code_page: u32) -> Option<usize> {
    encoded_len(s, code_page_encoding(code_page)?)
}

fn encoded_len(s: &str, encoding: Option<&'static encoding_rs::Encoding>) -> Option<usize> {
    match encoding {
        None => Some(s.len()),
        Some(enc) => {
            let (bytes, _, unmappable) = enc.encode(s);
            if unmappable {
                return None;
            }
            // Every character must come back as itself (no many-to-one mapping).
            let (back, malformed) = enc.decode_without_bom_handling(&bytes);
            (!malformed && back == s).then_some(bytes.len())
        }
    }
}

fn inexact(what: impl std::fmt::Display) -> XminError {
    unsupported(format!("{COLUMN_VALUE_INEXACT}: {what}"))
}

/// `micros` past midnight has no digits beyond `scale` (0..=7).
fn within_scale(micros: u64, scale: u8) -> bool {
    scale >= 6 || micros.is_multiple_of(10u64.pow(6 - u32::from(scale)))
}

/// How one source column's values become values of one staging column, exactly.
///
/// [`ColumnFit::new`] refuses a pairing that could lose information for some value (see the
/// module's mapping table); [`ColumnFit::convert`] refuses a single value that does not fit
/// (too long, too many digits, non-zero digits beyond the column's scale). Both with
/// [`ErrorCode::TargetColumnTypeUnsupported`], naming the column and types, never the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnFit {
    name: String,
    source: PgType,
    fit: Fit,
}

fn max_bytes(target: &ColumnRow) -> Option<usize> {
    usize::try_from(target.max_length).ok()
}

impl ColumnFit {
    /// Pairs a source column with its staging column, with the values in the form of the
    /// column's own load path ([`shape::load_path`]).
    pub fn new(source: &SourceColumn, target: &ColumnRow) -> Result<ColumnFit, XminError> {
        ColumnFit::for_path(source, target, shape::load_path(target))
    }

    /// Pairs a source column with its staging column for a table loaded by `path`: the same
    /// checks, the values in that path's form (a `datetime2` is sent at the column's scale by
    /// bulk load, at scale 7 as an RPC parameter, which the server narrows exactly).
    pub fn for_path(
        source: &SourceColumn,
        target: &ColumnRow,
        path: LoadPath,
    ) -> Result<ColumnFit, XminError> {
        let ty = column_type(source)?;
        let scale = (target.scale <= 7).then_some(target.scale);
        let fixed = matches!(target.type_name.as_str(), "nchar" | "char" | "binary");
        let fit = match (ty, target.type_name.as_str()) {
            (PgType::Bool, "bit") => Some(Fit::Bit),
            (PgType::Int2 | PgType::Int4, "tinyint") => Some(Fit::TinyInt),
            (PgType::Int2, "smallint") => Some(Fit::SmallInt),
            (PgType::Int2 | PgType::Int4, "int") => Some(Fit::Int),
            (PgType::Int2 | PgType::Int4 | PgType::Int8, "bigint") => Some(Fit::BigInt),
            (PgType::Float4, "real") => Some(Fit::Real),
            (PgType::Float4 | PgType::Float8, "float") => Some(Fit::Float),
            (t, "nvarchar" | "nchar") if t.is_text() => Some(Fit::NVarChar {
                max_bytes: max_bytes(target),
                fixed,
            }),
            (t, "varchar" | "char") if t.is_text() => target
                .code_page
                .and_then(code_page_encoding)
                .map(|code_page| Fit::VarChar {
                    max_bytes: max_bytes(target),
                    fixed,
                    code_page,
                }),
            (PgType::Bytea, "varbinary" | "binary") => Some(Fit::VarBinary {
                max_bytes: max_bytes(target),
                fixed,
            }),
            (PgType::Uuid, "uniqueidentifier") => Some(Fit::Guid),
            (PgType::Date, "date") => Some(Fit::Date),
            // Any scale: a value with digits beyond it is refused, never rounded.
            (PgType::Time, "time") => scale.map(|scale| Fit::Time { scale }),
            (PgType::Timestamp | PgType::Timestamptz, "datetime2") => {
                scale.map(|scale| Fit::DateTime2 {
                    scale,
                    wire: match path {
                        LoadPath::Bulk => scale,
                        LoadPath::Insert => 7,
                    },
                })
            }
            (PgType::Timestamptz, "datetimeoffset") => {
                scale.map(|scale| Fit::DateTimeOffset { scale })
            }
            (PgType::Timestamp | PgType::Timestamptz, "datetime") => Some(Fit::DateTime),
            (PgType::Timestamp | PgType::Timestamptz, "smalldatetime") => Some(Fit::SmallDateTime),
            (PgType::Numeric, "decimal" | "numeric")
                if u32::from(target.scale) <= MAX_NUMERIC_SCALE
                    && (1..=38).contains(&target.precision)
                    && target.scale <= target.precision =>
            {
                Some(Fit::Decimal {
                    precision: target.precision,
                    scale: target.scale,
                })
            }
            (PgType::Numeric, "money") => Some(Fit::Money { small: false }),
            (PgType::Numeric, "smallmoney") => Some(Fit::Money { small: true }),
            _ => None,
        };
        let fit = fit.ok_or_else(|| {
            unsupported(format!(
                "column {:?}: PostgreSQL {} cannot be stored exactly in SQL Server {}",
                source.name,
                source.type_sql,
                target.type_sql()
            ))
        })?;
        Ok(ColumnFit {
            name: source.name.clone(),
            source: ty,
            fit,
        })
    }

    /// The source column's accepted type.
    pub fn source_type(&self) -> PgType {
        self.source
    }

    /// Converts one field (`None` = NULL) to the value the staging column takes.
    pub fn convert(&self, field: Option<&[u8]>) -> Result<ColumnData<'static>, XminError> {
        match field {
            None => Ok(self.null()),
            Some(bytes) => self.value(bytes).map_err(|e| {
                // Every per-value refusal carries the detail code (NaN, infinities and dates
                // out of range come from the decoders without one).
                let e = if e.code() == ErrorCode::TargetColumnTypeUnsupported
                    && !e.message().starts_with(COLUMN_VALUE_INEXACT)
                {
                    inexact(e.message())
                } else {
                    e
                };
                in_column(&self.name, e)
            }),
        }
    }

    fn null(&self) -> ColumnData<'static> {
        match self.fit {
            Fit::Bit => ColumnData::Bit(None),
            Fit::TinyInt => ColumnData::U8(None),
            Fit::SmallInt => ColumnData::I16(None),
            Fit::Int => ColumnData::I32(None),
            Fit::BigInt => ColumnData::I64(None),
            Fit::Real => ColumnData::F32(None),
            Fit::Float => ColumnData::F64(None),
            Fit::NVarChar { .. } | Fit::VarChar { .. } => ColumnData::String(None),
            Fit::VarBinary { .. } => ColumnData::Binary(None),
            Fit::Guid => ColumnData::Guid(None),
            Fit::Date => ColumnData::Date(None),
            Fit::Time { .. } => ColumnData::Time(None),
            Fit::DateTime2 { .. } => ColumnData::DateTime2(None),
            Fit::DateTimeOffset { .. } => ColumnData::DateTimeOffset(None),
            Fit::DateTime => ColumnData::DateTime(None),
            Fit::SmallDateTime => ColumnData::SmallDateTime(None),
            Fit::Decimal { .. } | Fit::Money { .. } => ColumnData::Numeric(None),
        }
    }

    fn value(&self, bytes: &[u8]) -> Result<ColumnData<'static>, XminError> {
        let ty = self.source;
        Ok(match self.fit {
            Fit::Bit => ColumnData::Bit(Some(decode_bool(bytes)?)),
            Fit::TinyInt => ColumnData::U8(Some(
                u8::try_from(decode_int(ty, bytes)?)
                    .map_err(|_| inexact("a value is outside tinyint's 0 .. 255"))?,
            )),
            Fit::SmallInt => ColumnData::I16(Some(i16::from_be_bytes(fixed(ty, bytes)?))),
            Fit::Int => ColumnData::I32(Some(
                i32::try_from(decode_int(ty, bytes)?).map_err(|_| malformed("int overflow"))?,
            )),
            Fit::BigInt => ColumnData::I64(Some(decode_int(ty, bytes)?)),
            Fit::Real => ColumnData::F32(Some(decode_f32(bytes)?)),
            Fit::Float => ColumnData::F64(Some(match ty {
                PgType::Float4 => f64::from(decode_f32(bytes)?),
                _ => decode_f64(bytes)?,
            })),
            Fit::NVarChar { max_bytes, fixed } => {
                let s = decode_text(ty, bytes)?;
                let len = 2 * s.encode_utf16().count();
                let kind = if fixed { "nchar" } else { "nvarchar" };
                if let Some(max) = max_bytes {
                    if len > max {
                        return Err(inexact(format!(
                            "a value is longer than {kind}({})",
                            max / 2
                        )));
                    }
                    if fixed && len < max {
                        return Err(inexact(format!(
                            "a value is shorter than nchar({}), which would pad it",
                            max / 2
                        )));
                    }
                }
                ColumnData::String(Some(Cow::Owned(s)))
            }
            Fit::VarChar {
                max_bytes,
                fixed,
                code_page,
            } => {
                let s = decode_text(ty, bytes)?;
                let len = encoded_len(&s, code_page).ok_or_else(|| {
                    inexact(format!(
                        "a value has a character outside the column's code page ({})",
                        code_page.map_or("UTF-8", |e| e.name())
                    ))
                })?;
                let kind = if fixed { "char" } else { "varchar" };
                if let Some(max) = max_bytes {
                    if len > max {
                        return Err(inexact(format!(
                            "a value takes more than the {max} bytes of {kind}({max})"
                        )));
                    }
                    if fixed && len < max {
                        return Err(inexact(format!(
                            "a value is shorter than char({max}), which would pad it"
                        )));
                    }
                }
                ColumnData::String(Some(Cow::Owned(s)))
            }
            Fit::VarBinary { max_bytes, fixed } => {
                let kind = if fixed { "binary" } else { "varbinary" };
                if let Some(max) = max_bytes {
                    if bytes.len() > max {
                        return Err(inexact(format!("a value is longer than {kind}({max})")));
                    }
                    if fixed && bytes.len() < max {
                        return Err(inexact(format!(
                            "a value is shorter than binary({max}), which would pad it"
                        )));
                    }
                }
                ColumnData::Binary(Some(Cow::Owned(bytes.to_vec())))
            }
            Fit::Guid => ColumnData::Guid(Some(Uuid::from_bytes(fixed(ty, bytes)?))),
            Fit::Date => ColumnData::Date(Some(Date::new(decode_date(bytes)?))),
            Fit::Time { scale } => {
                let micros = decode_time(bytes)?;
                if !within_scale(micros, scale) {
                    return Err(inexact(format!(
                        "a time has digits beyond the column's scale {scale} (not rounded)"
                    )));
                }
                ColumnData::Time(Some(time_at(micros, 7)))
            }
            Fit::DateTime2 { scale, wire } => {
                let (day, micros) = decode_timestamp(ty, bytes)?;
                if !within_scale(micros, scale) {
                    return Err(inexact(format!(
                        "a timestamp has digits beyond the column's scale {scale} (not rounded)"
                    )));
                }
                ColumnData::DateTime2(Some(datetime2_exact(day, micros, wire)?))
            }
            Fit::DateTimeOffset { scale } => {
                let (day, micros) = decode_timestamp(ty, bytes)?;
                if !within_scale(micros, scale) {
                    return Err(inexact(format!(
                        "a timestamp has digits beyond the column's scale {scale} (not rounded)"
                    )));
                }
                ColumnData::DateTimeOffset(Some(DateTimeOffset::new(
                    datetime2_at(day, micros, 7),
                    0,
                )))
            }
            Fit::DateTime => {
                let (day, micros) = decode_timestamp(ty, bytes)?;
                if i64::from(day) < DAY_1753 {
                    return Err(inexact("a timestamp is before datetime's 1753-01-01"));
                }
                if !micros.is_multiple_of(DATETIME_GRID_MICROS) {
                    return Err(inexact(
                        "a timestamp is not on datetime's 1/300-second grid (a multiple of \
                         10 ms; not rounded)",
                    ));
                }
                let days = i32::try_from(i64::from(day) - DAY_1900)
                    .map_err(|_| inexact("a timestamp is outside datetime's range"))?;
                let ticks = u32::try_from(micros / DATETIME_GRID_MICROS * 3)
                    .map_err(|_| inexact("a timestamp is outside datetime's range"))?;
                ColumnData::DateTime(Some(DateTime::new(days, ticks)))
            }
            Fit::SmallDateTime => {
                let (day, micros) = decode_timestamp(ty, bytes)?;
                let day = i64::from(day);
                if !(DAY_1900..=DAY_2079_06_06).contains(&day) {
                    return Err(inexact(
                        "a timestamp is outside smalldatetime's 1900-01-01 .. 2079-06-06",
                    ));
                }
                if !micros.is_multiple_of(MICROS_PER_MINUTE) {
                    return Err(inexact(
                        "a timestamp is not a whole minute, which smalldatetime would round",
                    ));
                }
                let days = u16::try_from(day - DAY_1900)
                    .map_err(|_| inexact("a timestamp is outside smalldatetime's range"))?;
                let minutes = u16::try_from(micros / MICROS_PER_MINUTE)
                    .map_err(|_| inexact("a timestamp is outside smalldatetime's range"))?;
                ColumnData::SmallDateTime(Some(SmallDateTime::new(days, minutes)))
            }
            Fit::Decimal { precision, scale } => {
                let n = parse_numeric(bytes)?;
                let v = n.at_scale(u32::from(scale)).map_err(|e| {
                    inexact(match e {
                        NumericFit::Fraction => format!(
                            "a numeric value has non-zero digits beyond the scale of decimal({precision},{scale})"
                        ),
                        NumericFit::Overflow => {
                            format!("a numeric value exceeds decimal({precision},{scale})")
                        }
                    })
                })?;
                if v.unsigned_abs() >= 10u128.pow(u32::from(precision)) {
                    return Err(inexact(format!(
                        "a numeric value exceeds decimal({precision},{scale})"
                    )));
                }
                ColumnData::Numeric(Some(Numeric::new_with_scale(v, scale)))
            }
            Fit::Money { small } => {
                let kind = if small { "smallmoney" } else { "money" };
                let max = if small { SMALLMONEY_MAX } else { MONEY_MAX };
                let n = parse_numeric(bytes)?;
                let v = n.at_scale(4).map_err(|e| {
                    inexact(match e {
                        NumericFit::Fraction => {
                            format!("a numeric value has more than the 4 decimals of {kind}")
                        }
                        NumericFit::Overflow => format!("a numeric value exceeds {kind}"),
                    })
                })?;
                if v > max || v < -max - 1 {
                    return Err(inexact(format!("a numeric value exceeds {kind}")));
                }
                ColumnData::Numeric(Some(Numeric::new_with_scale(v, 4)))
            }
        })
    }
}

/// Pairs every source column with the staging column at the same position; the names must
/// agree ([`ErrorCode::TargetTableInvalid`] otherwise).
pub fn plan_columns(
    sources: &[SourceColumn],
    targets: &[ColumnRow],
) -> Result<Vec<ColumnFit>, XminError> {
    if sources.len() != targets.len() {
        return Err(XminError::new(
            ErrorCode::TargetTableInvalid,
            format!(
                "staging table has {} loadable columns, the artifact {}",
                targets.len(),
                sources.len()
            ),
        ));
    }
    let path = shape::table_load_path(targets);
    sources
        .iter()
        .zip(targets)
        .map(|(s, t)| {
            if s.name != t.name {
                return Err(XminError::new(
                    ErrorCode::TargetTableInvalid,
                    format!(
                        "staging column {:?} stands where the artifact has {:?}",
                        t.name, s.name
                    ),
                ));
            }
            ColumnFit::for_path(s, t, path)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Pre-export check
// ---------------------------------------------------------------------------------------------

/// Tuples and bytes of one payload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PayloadCount {
    /// Tuples.
    pub tuples: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What [`check_export`] proved and counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportCheck {
    /// The key payload ([`SnapshotEnvelope::key_payload`]).
    pub keys: PayloadCount,
    /// The rows payload (equal to `keys` for a baseline, whose rows are its key payload).
    pub rows: PayloadCount,
    /// Widest composite key seen, in SQL Server index bytes (`int` 4, `bigint` 8,
    /// `uniqueidentifier` 16, `nvarchar` 2 per UTF-16 code unit); at most the declared width,
    /// which [`keys::check_key_width`] bounds by 900.
    pub max_key_bytes: u32,
}

fn key_fits(pg: PgType, key: KeyType) -> bool {
    match key {
        KeyType::Int => matches!(pg, PgType::Int2 | PgType::Int4),
        KeyType::BigInt => matches!(pg, PgType::Int2 | PgType::Int4 | PgType::Int8),
        KeyType::Uuid => pg == PgType::Uuid,
        KeyType::Text { .. } => pg.is_text(),
    }
}

fn key_error(column: &str, detail: &str, what: &str) -> XminError {
    XminError::new(
        ErrorCode::TargetKeyUnsupported,
        format!("{detail}: key column {column:?}: {what}"),
    )
}

/// Key checks, canonical decoding of every field of one tuple and, where the target column is
/// known (`fits`), the per-value fit to it; returns the key's bytes.
fn check_tuple(
    tuple: &Tuple<'_>,
    columns: &[SourceColumn],
    types: &[PgType],
    keys: &[KeyColumn],
    fits: &[Option<ColumnFit>],
) -> Result<u32, XminError> {
    let mut key_bytes = 0u32;
    for (i, ty) in types.iter().enumerate().take(tuple.len()) {
        let name = columns.get(i).map(|c| c.name.as_str()).unwrap_or_default();
        let Some(bytes) = tuple.field(i) else {
            continue;
        };
        let Some(key) = keys.get(i) else {
            match fits.get(i) {
                // Decodes and checks the value exactly as the load will (column named).
                Some(Some(fit)) => {
                    fit.convert(Some(bytes))?;
                }
                _ => {
                    decode_field(*ty, bytes).map_err(|e| in_column(name, e))?;
                }
            }
            continue;
        };
        let value = decode_field(*ty, bytes).map_err(|e| in_column(name, e))?;
        key_bytes += match (key.ty, &value) {
            (KeyType::Text { max_chars }, ColumnData::String(Some(s))) => {
                keys::check_text_key(s).map_err(|code| {
                    key_error(
                        &key.name,
                        code,
                        "a value ends in U+0020, which SQL Server's padded comparison would merge",
                    )
                })?;
                let units = s.encode_utf16().count();
                if units > usize::from(max_chars) {
                    return Err(key_error(
                        &key.name,
                        KEY_TOO_LONG,
                        &format!("a value is longer than nvarchar({max_chars})"),
                    ));
                }
                // `units <= max_chars <= u16::MAX`.
                2 * units as u32
            }
            (ty, _) => ty.index_bytes(),
        };
    }
    Ok(key_bytes)
}

fn scan(
    reader: &mut TupleReader<Box<dyn Read + Send>>,
    columns: &[SourceColumn],
    types: &[PgType],
    keys: &[KeyColumn],
    fits: &[Option<ColumnFit>],
) -> Result<(PayloadCount, u32), XminError> {
    let mut widest = 0u32;
    while let Some(tuple) = reader.next_tuple()? {
        widest = widest.max(check_tuple(&tuple, columns, types, keys, fits)?);
    }
    Ok((
        PayloadCount {
            tuples: reader.tuples(),
            bytes: reader.bytes(),
        },
        widest,
    ))
}

fn envelope_invalid(message: impl Into<String>) -> XminError {
    XminError::new(ErrorCode::EnvelopeInvalid, message)
}

/// The pre-pass before any SQL Server object is created.
///
/// Checks that every envelope column type is accepted, that `keys` are the envelope's key
/// columns in order with compatible types (`int2`/`int4` → `int`; `int2`/`int4`/`int8` →
/// `bigint`; `uuid` → `uniqueidentifier`; `text`/`varchar`/`bpchar` → `nvarchar`), and that the
/// declared key fits the 900-byte index limit. Then streams the key payload and, for an
/// incremental envelope, the rows payload: each artifact is proved against its receipt, every
/// field decodes to a value SQL Server holds exactly, and no text key value ends in U+0020
/// ([`keys::KEY_TRAILING_SPACE`]) or exceeds its column's UTF-16 length ([`KEY_TOO_LONG`]),
/// both [`ErrorCode::TargetKeyUnsupported`]. Messages carry detail codes, never key values.
pub fn check_export(
    envelope: &SnapshotEnvelope,
    store: &dyn ArtifactStore,
    keys: &[KeyColumn],
) -> Result<ExportCheck, XminError> {
    check_export_fitted(envelope, store, keys, &[])
}

/// [`check_export`], and every non-key value fitted to its target column (`targets`, the
/// target's columns as frozen by preflight or `begin`, matched by name; the staging columns
/// have the same types and collations) exactly as the load will fit it: a value that would not
/// read back equal ([`COLUMN_VALUE_INEXACT`]) is refused before any SQL Server object is
/// created, not midway through the staging load.
pub fn check_export_fitted(
    envelope: &SnapshotEnvelope,
    store: &dyn ArtifactStore,
    keys: &[KeyColumn],
    targets: &[ColumnRow],
) -> Result<ExportCheck, XminError> {
    let types = column_types(&envelope.columns)?;
    let key_count = usize::from(envelope.key_columns);
    if keys.len() != key_count || key_count == 0 || key_count > envelope.columns.len() {
        return Err(envelope_invalid(format!(
            "envelope has {key_count} key columns, the target key {}",
            keys.len()
        )));
    }
    for ((k, c), ty) in keys.iter().zip(&envelope.columns).zip(&types) {
        if k.name != c.name {
            return Err(envelope_invalid(format!(
                "target key column {:?} stands where the envelope has {:?}",
                k.name, c.name
            )));
        }
        if !key_fits(*ty, k.ty) {
            return Err(unsupported(format!(
                "key column {:?}: PostgreSQL {} does not fit SQL Server {}",
                k.name,
                c.type_sql,
                k.ty.sql()
            )));
        }
    }
    keys::check_key_width(keys).map_err(|code| {
        XminError::new(
            ErrorCode::TargetKeyUnsupported,
            format!(
                "{code}: the declared key is wider than {} bytes",
                keys::MAX_INDEX_KEY_BYTES
            ),
        )
    })?;
    let fits = envelope
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| match targets.iter().find(|t| t.name == c.name) {
            Some(t) if i >= keys.len() => ColumnFit::new(c, t).map(Some),
            _ => Ok(None),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let key_fields = envelope.key_columns;
    let key_payload = envelope.key_payload();
    let key_payload_fields = if envelope.keys.is_some() {
        key_count
    } else {
        envelope.columns.len()
    };
    if usize::from(key_payload.fields) != key_payload_fields {
        return Err(malformed(
            "key payload field count differs from the envelope",
        ));
    }
    let mut reader = open_payload(store, key_payload, key_fields)?;
    let (key_counts, mut widest) = scan(&mut reader, &envelope.columns, &types, keys, &fits)?;
    let row_counts = if envelope.keys.is_some() {
        if usize::from(envelope.rows.fields) != envelope.columns.len() {
            return Err(malformed(
                "rows payload field count differs from the envelope",
            ));
        }
        let mut reader = open_payload(store, &envelope.rows, key_fields)?;
        let (counts, w) = scan(&mut reader, &envelope.columns, &types, keys, &fits)?;
        widest = widest.max(w);
        counts
    } else {
        key_counts
    };
    Ok(ExportCheck {
        keys: key_counts,
        rows: row_counts,
        max_key_bytes: widest,
    })
}

// ---------------------------------------------------------------------------------------------
// Bulk load
// ---------------------------------------------------------------------------------------------

/// The bulk load runs on the staging lease: a duplicate or null key in the payload keeps its
/// snapshot code, a lost or evicted session is a staging-authority failure
/// ([`crate::session::lease_error`]).
fn statement_failed(step: &'static str, e: tiberius::error::Error) -> XminError {
    crate::session::lease_error(&conn::map_error(step, e))
}

/// Upper bound of the values' bytes buffered for one statement of the insert path (one row may
/// exceed it alone: a batch is sent as soon as it reaches the bound).
pub const INSERT_BATCH_BYTES: usize = 8 << 20;

/// Streams the artifact of `payload` into the staging table `table` (bracket-quoted, in the
/// session's current database) and returns the rows sent, by the table's load path
/// ([`shape::table_load_path`]): tiberius' bulk insert, or parameterized batched `INSERT`s for
/// the types and lengths the bulk load cannot carry (`insert_load`, below).
///
/// The staging table's loadable columns must be `columns` in order (names checked), each
/// paired by [`ColumnFit::for_path`]; the first `key_columns` fields must be non-NULL. The
/// artifact is proved equal to its receipt (sha256, size, trailer, row count) **before** the
/// load is finalized (the bulk insert's `finalize`, the insert path's `COMMIT`); on any error
/// the load is abandoned unfinalized, and the session must then be discarded (its transaction
/// rolled back by `XACT_ABORT` or the dropped connection).
pub async fn load_staging(
    client: &mut MssqlClient,
    table: &str,
    columns: &[SourceColumn],
    key_columns: usize,
    payload: &PayloadReceipt,
    store: &dyn ArtifactStore,
) -> Result<u64, XminError> {
    const STEP: &str = "bulk_load";
    column_types(columns)?;
    if usize::from(payload.fields) != columns.len() || key_columns > columns.len() {
        return Err(malformed("payload field count differs from the columns"));
    }
    let key_fields =
        u16::try_from(key_columns).map_err(|_| envelope_invalid("too many key columns"))?;
    // tiberius' bulk insert skips computed columns; the staging tables have none, but the
    // pairing must see exactly the columns the load fills.
    let targets: Vec<ColumnRow> = conn::target_columns(client, table)
        .await
        .map_err(|e| XminError::new(ErrorCode::TargetStatementFailed, e.to_string()))?
        .into_iter()
        .filter(|c| !c.is_computed)
        .collect();
    let plan = plan_columns(columns, &targets)?;
    let mut reader = open_payload(store, payload, key_fields)?;
    if shape::table_load_path(&targets) == LoadPath::Insert {
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        return insert_load(client, table, &names, &plan, &mut reader).await;
    }
    let mut request = client
        .bulk_insert(table)
        .await
        .map_err(|e| statement_failed(STEP, e))?;
    let mut sent = 0u64;
    loop {
        let row = match reader.next_tuple()? {
            None => break,
            Some(tuple) => {
                let mut row = TokenRow::with_capacity(plan.len());
                for (i, fit) in plan.iter().enumerate() {
                    row.push(fit.convert(tuple.field(i))?);
                }
                row
            }
        };
        request
            .send(row)
            .await
            .map_err(|e| statement_failed(STEP, e))?;
        sent += 1;
    }
    let stored = request
        .finalize()
        .await
        .map_err(|e| statement_failed(STEP, e))?
        .total();
    if stored != sent {
        return Err(XminError::new(
            ErrorCode::SnapshotCountMismatch,
            format!("bulk insert stored {stored} rows, {sent} were sent"),
        ));
    }
    Ok(sent)
}

/// One statement of the insert path: the rows' values in row order, ready to bind.
#[derive(Debug, Default)]
pub struct InsertBatch {
    /// Rows in the batch.
    pub rows: usize,
    /// Bound values, `rows × columns`, row by row.
    pub values: Vec<ColumnData<'static>>,
    /// Bytes of the source fields (the buffering bound).
    pub bytes: usize,
}

impl InsertBatch {
    /// Converts one tuple into the batch (every value checked by its [`ColumnFit`]).
    pub fn push(&mut self, tuple: &Tuple<'_>, plan: &[ColumnFit]) -> Result<(), XminError> {
        for (i, fit) in plan.iter().enumerate() {
            let field = tuple.field(i);
            self.bytes += field.map_or(0, <[u8]>::len);
            self.values.push(fit.convert(field)?);
        }
        self.rows += 1;
        Ok(())
    }

    /// The batch is full for a table of `columns` columns.
    pub fn full(&self, columns: usize) -> bool {
        self.rows >= crate::sql::insert_batch_rows(columns) || self.bytes >= INSERT_BATCH_BYTES
    }

    /// The statement and its bound parameters; empties the batch.
    pub fn take_query(&mut self, table: &str, names: &[&str]) -> Query<'static> {
        let mut q = Query::new(crate::sql::staging_insert(table, names, self.rows));
        for v in self.values.drain(..) {
            q.bind(v);
        }
        self.rows = 0;
        self.bytes = 0;
        q
    }
}

/// The insert load path: inside one transaction of the staging session, the tuples in batches
/// of [`crate::sql::insert_batch_rows`] rows (at most 2,098 parameters and 1,000 rows per
/// statement, at most [`INSERT_BATCH_BYTES`] buffered), each value bound as a typed RPC
/// parameter (`nvarchar(4000)`/`nvarchar(max)`, `varbinary(8000)`/`varbinary(max)` as PLP,
/// `numeric(p,s)`, `datetime2(7)`, `time(7)`, `datetimeoffset(7)`, `datetime`,
/// `smalldatetime`, `tinyint`, …) that the server converts to the column's type exactly,
/// every value having been checked host-side by its [`ColumnFit`]. `COMMIT` only after the
/// artifact is proved equal to its receipt and the server's row counts add up to the rows
/// sent; on any error a best-effort `ROLLBACK`.
async fn insert_load(
    client: &mut MssqlClient,
    table: &str,
    names: &[&str],
    plan: &[ColumnFit],
    reader: &mut TupleReader<Box<dyn Read + Send>>,
) -> Result<u64, XminError> {
    const STEP: &str = "insert_load";
    client
        .simple_query("BEGIN TRANSACTION;")
        .await
        .map_err(|e| statement_failed(STEP, e))?
        .into_results()
        .await
        .map_err(|e| statement_failed(STEP, e))?;
    let result = async {
        let mut batch = InsertBatch::default();
        let (mut sent, mut stored) = (0u64, 0u64);
        loop {
            let tuple = reader.next_tuple()?;
            let done = match tuple {
                Some(t) => {
                    batch.push(&t, plan)?;
                    false
                }
                None => true,
            };
            if batch.rows > 0 && (done || batch.full(plan.len())) {
                sent += batch.rows as u64;
                stored += batch
                    .take_query(table, names)
                    .execute(client)
                    .await
                    .map_err(|e| statement_failed(STEP, e))?
                    .total();
            }
            if done {
                break;
            }
        }
        if stored != sent {
            return Err(XminError::new(
                ErrorCode::SnapshotCountMismatch,
                format!("the inserts stored {stored} rows, {sent} were sent"),
            ));
        }
        client
            .simple_query("COMMIT TRANSACTION;")
            .await
            .map_err(|e| statement_failed(STEP, e))?
            .into_results()
            .await
            .map_err(|e| statement_failed(STEP, e))?;
        Ok(sent)
    }
    .await;
    if result.is_err() {
        // Best effort: a lost session rolls back by itself.
        if let Ok(stream) = client
            .simple_query("IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;")
            .await
        {
            let _ = stream.into_results().await;
        }
    }
    result
}
