//! ClickHouse `RowBinary` decoding into the canonical value encoding, and a `RowBinary` writer.
//!
//! # Canonical value encoding
//!
//! Values of a row are concatenated in column order. Every encoding is self-delimiting given the
//! schema, and byte order equals value order for numbers, so sorting rows bytewise is a total,
//! deterministic order.
//!
//! The schema digest opens every content digest, so widths may follow the column type and no
//! value carries its type. Byte order equals value order for numbers and temporals.
//!
//! | type | canonical bytes |
//! |---|---|
//! | `Nullable(T)` | `0x00` for NULL, else `0x01` then `T` (non-nullable columns carry no flag) |
//! | `UIntN` | N/8 bytes big-endian |
//! | `IntN`, `Enum8`, `Enum16` | N/8 bytes big-endian two's complement with the sign bit flipped |
//! | `Bool` | `0x00` or `0x01` (any other wire byte is a decode error) |
//! | `Float32/64` | IEEE-754 bits big-endian after: every NaN → the canonical quiet NaN, `-0.0` → `+0.0`; then the order-preserving transform (negative: all bits flipped, else sign bit flipped) |
//! | `Decimal*(P, S)` | the unscaled value at its storage width (4, 8, 16 or 32 bytes), big-endian two's complement with the sign bit flipped (the scale is in the schema) |
//! | `Date` | days since 1970-01-01 as `UInt16` big-endian |
//! | `Date32` | days since 1970-01-01 as `Int32` (sign bit flipped) |
//! | `DateTime` | seconds since the epoch as `UInt32` big-endian (the time zone is metadata) |
//! | `DateTime64(p)` | ticks of 10^-p seconds as `Int64` (sign bit flipped) |
//! | `String` | `u32` big-endian byte length, then the bytes (no UTF-8 requirement) |
//! | `FixedString(N)` | the N bytes |
//! | `UUID` | 16 bytes in RFC 4122 order (the wire sends two little-endian `UInt64` halves) |
//! | `IPv4` | 4 bytes network order |
//! | `IPv6` | 16 bytes network order |
//! | `LowCardinality(T)` | as `T` |

use std::io::{self, Read};

use super::types::{ColumnType, Scalar};

/// Largest single value (string) accepted, in bytes.
pub const MAX_VALUE_BYTES: usize = 256 * 1024 * 1024;

const READ_CHUNK: usize = 64 * 1024;

/// A stream that does not decode under its schema.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The stream ended inside a row.
    #[error("stream ended inside a row")]
    Truncated,
    /// A malformed value.
    #[error("malformed value: {0}")]
    Malformed(&'static str),
    /// A value larger than [`MAX_VALUE_BYTES`].
    #[error("value larger than the per-value bound")]
    ValueTooLarge,
    /// The reader failed.
    #[error("reader failed ({0:?})")]
    Read(io::ErrorKind),
}

/// A buffered reader that decodes whole rows from contiguous slices of its buffer, so the hot
/// loop works on a local slice without per-value refill checks.
pub struct RowReader<R> {
    inner: R,
    buf: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    consumed: u64,
}

impl<R: Read> RowReader<R> {
    /// Wraps a reader.
    pub fn new(inner: R) -> Self {
        Self {
            inner,
            buf: vec![0; READ_CHUNK],
            pos: 0,
            end: 0,
            eof: false,
            consumed: 0,
        }
    }

    /// Reads until more than `have` bytes are buffered or the stream ends; false at the end.
    fn more(&mut self, have: usize) -> Result<bool, DecodeError> {
        let need = have + 1;
        if need > 2 * MAX_VALUE_BYTES {
            return Err(DecodeError::ValueTooLarge);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.buf.len() < need.max(READ_CHUNK) {
            self.buf.resize(need.max(self.buf.len() * 2), 0);
        } else if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        while self.end < need && !self.eof {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(DecodeError::Read(e.kind())),
            }
        }
        Ok(self.end >= need)
    }

    /// Consumes the `p` bytes of whole rows decoded from the buffer and reads on: true when
    /// more bytes arrived, false at a clean end of the stream (no partial row left).
    fn advance(&mut self, p: usize) -> Result<bool, DecodeError> {
        self.pos += p;
        self.consumed += p as u64;
        let have = self.end - self.pos;
        if self.more(have)? {
            Ok(true)
        } else if have == 0 {
            Ok(false)
        } else {
            Err(DecodeError::Truncated)
        }
    }

    /// Decodes every row, appending each row's canonical encoding to `out` and then calling
    /// `on_row(out, row_start, stream_offset_after_row)`; `on_row` returns false to stop early.
    /// Returns the number of rows decoded.
    pub fn encode_rows<F>(
        &mut self,
        types: &[ColumnType],
        out: &mut Vec<u8>,
        mut on_row: F,
    ) -> Result<u64, DecodeError>
    where
        F: FnMut(&mut Vec<u8>, usize, u64) -> bool,
    {
        let mut rows = 0u64;
        loop {
            let buf = &self.buf[self.pos..self.end];
            let mut p = 0;
            while p < buf.len() {
                let start = out.len();
                if !encode_row_slice(buf, &mut p, types, out)? {
                    break;
                }
                rows += 1;
                if !on_row(out, start, self.consumed + p as u64) {
                    self.pos += p;
                    self.consumed += p as u64;
                    return Ok(rows);
                }
            }
            if !self.advance(p)? {
                return Ok(rows);
            }
        }
    }
}

impl<R: Read> RowReader<R> {
    /// Decodes every row (so a malformed stream is refused exactly as [`Self::encode_rows`]
    /// refuses it) and calls `on_row` with the row's own `RowBinary` bytes, as they arrived.
    /// Returns the number of rows.
    pub fn for_each_raw_row<F>(
        &mut self,
        types: &[ColumnType],
        mut on_row: F,
    ) -> Result<u64, DecodeError>
    where
        F: FnMut(&[u8]),
    {
        let mut scratch = Vec::with_capacity(256);
        let mut rows = 0u64;
        loop {
            let buf = &self.buf[self.pos..self.end];
            let mut p = 0;
            while p < buf.len() {
                let start = p;
                scratch.clear();
                if !encode_row_slice(buf, &mut p, types, &mut scratch)? {
                    break;
                }
                rows += 1;
                on_row(&buf[start..p]);
            }
            if !self.advance(p)? {
                return Ok(rows);
            }
        }
    }
}

/// Bytes `p..p + n` of `buf`, or `None` when the row continues past the buffer.
#[inline(always)]
fn take<'b>(buf: &'b [u8], p: &mut usize, n: usize) -> Option<&'b [u8]> {
    let s = buf.get(*p..*p + n)?;
    *p += n;
    Some(s)
}

/// Decodes one row from `buf[*pos..]`. `Ok(false)`: the row is incomplete in `buf`; nothing is
/// consumed and `out` is restored.
#[inline]
pub fn encode_row_slice(
    buf: &[u8],
    pos: &mut usize,
    types: &[ColumnType],
    out: &mut Vec<u8>,
) -> Result<bool, DecodeError> {
    let mark = out.len();
    let mut p = *pos;
    for ty in types {
        if !encode_value(buf, &mut p, *ty, out)? {
            out.truncate(mark);
            return Ok(false);
        }
    }
    *pos = p;
    Ok(true)
}

macro_rules! need {
    ($e:expr) => {
        match $e {
            Some(v) => v,
            None => return Ok(false),
        }
    };
}

/// Decodes one value of `ty` from `buf[*p..]` and appends its canonical encoding to `out`;
/// `Ok(false)` when the value continues past `buf`.
#[inline(always)]
pub fn encode_value(
    buf: &[u8],
    p: &mut usize,
    ty: ColumnType,
    out: &mut Vec<u8>,
) -> Result<bool, DecodeError> {
    if ty.nullable {
        match need!(take(buf, p, 1))[0] {
            1 => {
                out.push(0);
                return Ok(true);
            }
            0 => out.push(1),
            _ => return Err(DecodeError::Malformed("nullable flag")),
        }
    }
    match ty.scalar {
        Scalar::UInt(w) => push_be(out, need!(take(buf, p, w as usize)), false),
        Scalar::Int(w) => push_be(out, need!(take(buf, p, w as usize)), true),
        Scalar::Bool => match need!(take(buf, p, 1))[0] {
            b @ (0 | 1) => out.push(b),
            _ => return Err(DecodeError::Malformed("bool")),
        },
        Scalar::Float32 => {
            let b = need!(take(buf, p, 4));
            let mut bits = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let v = f32::from_bits(bits);
            if v.is_nan() {
                bits = 0x7fc0_0000;
            } else if v == 0.0 {
                bits = 0;
            }
            bits = if bits & 0x8000_0000 != 0 {
                !bits
            } else {
                bits | 0x8000_0000
            };
            out.extend_from_slice(&bits.to_be_bytes());
        }
        Scalar::Float64 => {
            let b = need!(take(buf, p, 8));
            let mut arr = [0u8; 8];
            arr.copy_from_slice(b);
            let mut bits = u64::from_le_bytes(arr);
            let v = f64::from_bits(bits);
            if v.is_nan() {
                bits = 0x7ff8_0000_0000_0000;
            } else if v == 0.0 {
                bits = 0;
            }
            bits = if bits & (1 << 63) != 0 {
                !bits
            } else {
                bits | (1 << 63)
            };
            out.extend_from_slice(&bits.to_be_bytes());
        }
        Scalar::Decimal { bytes, .. } => push_be(out, need!(take(buf, p, bytes as usize)), true),
        Scalar::Date => push_be(out, need!(take(buf, p, 2)), false),
        Scalar::Date32 => push_be(out, need!(take(buf, p, 4)), true),
        Scalar::DateTime => push_be(out, need!(take(buf, p, 4)), false),
        Scalar::DateTime64(_) => push_be(out, need!(take(buf, p, 8)), true),
        Scalar::String => {
            let mut len: u64 = 0;
            let mut shift = 0;
            loop {
                let b = need!(take(buf, p, 1))[0];
                len |= u64::from(b & 0x7f) << shift;
                if b & 0x80 == 0 {
                    break;
                }
                shift += 7;
                if shift >= 64 {
                    return Err(DecodeError::Malformed("varint longer than 10 bytes"));
                }
            }
            if len > MAX_VALUE_BYTES as u64 {
                return Err(DecodeError::ValueTooLarge);
            }
            let bytes = need!(take(buf, p, len as usize));
            out.extend_from_slice(&(len as u32).to_be_bytes());
            out.extend_from_slice(bytes);
        }
        Scalar::FixedString(n) => out.extend_from_slice(need!(take(buf, p, n as usize))),
        Scalar::Uuid => {
            let b = need!(take(buf, p, 16));
            push_be(out, &b[0..8], false);
            push_be(out, &b[8..16], false);
        }
        Scalar::Enum8 => push_be(out, need!(take(buf, p, 1)), true),
        Scalar::Enum16 => push_be(out, need!(take(buf, p, 2)), true),
        Scalar::Ipv4 => push_be(out, need!(take(buf, p, 4)), false),
        Scalar::Ipv6 => out.extend_from_slice(need!(take(buf, p, 16))),
    }
    Ok(true)
}

/// Appends little-endian `b` as big-endian, flipping the sign bit when `signed`.
#[inline]
fn push_be(out: &mut Vec<u8>, b: &[u8], signed: bool) {
    let flip = |top: u8| if signed { top ^ 0x80 } else { top };
    match *b {
        [a] => out.push(flip(a)),
        [a0, a1] => out.extend_from_slice(&[flip(a1), a0]),
        [a0, a1, a2, a3] => out.extend_from_slice(&[flip(a3), a2, a1, a0]),
        [a0, a1, a2, a3, a4, a5, a6, a7] => {
            out.extend_from_slice(&[flip(a7), a6, a5, a4, a3, a2, a1, a0]);
        }
        _ => {
            let start = out.len();
            out.extend(b.iter().rev());
            if signed {
                out[start] ^= 0x80;
            }
        }
    }
}

/// The byte offsets where each `RowBinary` row ends (for splitting a stream at row boundaries).
pub fn row_ends(types: &[ColumnType], bytes: &[u8]) -> Result<Vec<usize>, DecodeError> {
    let mut r = RowReader::new(bytes);
    let mut scratch = Vec::with_capacity(256);
    let mut ends = Vec::new();
    r.encode_rows(types, &mut scratch, |out, _, end| {
        out.clear();
        ends.push(end as usize);
        true
    })?;
    Ok(ends)
}

/// One value for [`RowBinaryWriter`]. Integers of any width are given as `i128`/`u128` and
/// sign- or zero-extended to the column width.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// NULL (only in `Nullable` columns).
    Null,
    /// Signed integer, decimal unscaled value, date days, datetime seconds, datetime64 ticks,
    /// enum value.
    Int(i128),
    /// Unsigned integer or IPv4.
    UInt(u128),
    /// Float.
    Float(f64),
    /// Bool.
    Bool(bool),
    /// String or FixedString bytes.
    Bytes(Vec<u8>),
    /// UUID in RFC order, or IPv6 in network order.
    Raw16([u8; 16]),
}

/// Writes rows in ClickHouse `RowBinary` for a schema in the canonical profile.
pub struct RowBinaryWriter {
    types: Vec<ColumnType>,
    out: Vec<u8>,
    rows: u64,
}

/// A value that does not fit its column.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("value {column} does not fit its column type")]
pub struct ValueMismatch {
    /// Column position.
    pub column: usize,
}

impl RowBinaryWriter {
    /// A writer for the given column types.
    pub fn new(types: Vec<ColumnType>) -> Self {
        Self {
            types,
            out: Vec::new(),
            rows: 0,
        }
    }

    /// Appends one row.
    pub fn row(&mut self, values: &[Value]) -> Result<(), ValueMismatch> {
        if values.len() != self.types.len() {
            return Err(ValueMismatch {
                column: values.len().min(self.types.len()),
            });
        }
        let mark = self.out.len();
        for (i, (ty, v)) in self.types.clone().iter().zip(values).enumerate() {
            if let Err(()) = self.value(*ty, v) {
                self.out.truncate(mark);
                return Err(ValueMismatch { column: i });
            }
        }
        self.rows += 1;
        Ok(())
    }

    fn value(&mut self, ty: ColumnType, v: &Value) -> Result<(), ()> {
        if ty.nullable {
            if matches!(v, Value::Null) {
                self.out.push(1);
                return Ok(());
            }
            self.out.push(0);
        }
        let o = &mut self.out;
        match (ty.scalar, v) {
            (Scalar::Int(w), Value::Int(x)) => {
                if w < 16 && (*x < -(1i128 << (w * 8 - 1)) || *x >= (1i128 << (w * 8 - 1))) {
                    return Err(());
                }
                le_signed(o, *x, w as usize)
            }
            (Scalar::UInt(w), Value::UInt(x)) => {
                if w < 16 && *x >= (1u128 << (w * 8)) {
                    return Err(());
                }
                le_unsigned(o, *x, w as usize)
            }
            (Scalar::Float32, Value::Float(x)) => o.extend_from_slice(&(*x as f32).to_le_bytes()),
            (Scalar::Float64, Value::Float(x)) => o.extend_from_slice(&x.to_le_bytes()),
            (Scalar::Bool, Value::Bool(b)) => o.push(u8::from(*b)),
            (Scalar::Decimal { bytes, .. }, Value::Int(x)) => {
                if bytes < 16
                    && (*x < -(1i128 << (bytes * 8 - 1)) || *x >= (1i128 << (bytes * 8 - 1)))
                {
                    return Err(());
                }
                le_signed(o, *x, bytes as usize)
            }
            (Scalar::Date, Value::Int(x)) => {
                let d = u16::try_from(*x).map_err(|_| ())?;
                o.extend_from_slice(&d.to_le_bytes());
            }
            (Scalar::Date32, Value::Int(x)) => {
                let d = i32::try_from(*x).map_err(|_| ())?;
                o.extend_from_slice(&d.to_le_bytes());
            }
            (Scalar::DateTime, Value::Int(x)) => {
                let d = u32::try_from(*x).map_err(|_| ())?;
                o.extend_from_slice(&d.to_le_bytes());
            }
            (Scalar::DateTime64(_), Value::Int(x)) => {
                let d = i64::try_from(*x).map_err(|_| ())?;
                o.extend_from_slice(&d.to_le_bytes());
            }
            (Scalar::String, Value::Bytes(b)) => {
                let mut n = b.len() as u64;
                loop {
                    let byte = (n & 0x7f) as u8;
                    n >>= 7;
                    if n == 0 {
                        o.push(byte);
                        break;
                    }
                    o.push(byte | 0x80);
                }
                o.extend_from_slice(b);
            }
            (Scalar::FixedString(n), Value::Bytes(b)) => {
                if b.len() > n as usize {
                    return Err(());
                }
                o.extend_from_slice(b);
                o.extend(std::iter::repeat_n(0, n as usize - b.len()));
            }
            (Scalar::Uuid, Value::Raw16(u)) => {
                o.extend(u[0..8].iter().rev());
                o.extend(u[8..16].iter().rev());
            }
            (Scalar::Enum8, Value::Int(x)) => o.push(i8::try_from(*x).map_err(|_| ())? as u8),
            (Scalar::Enum16, Value::Int(x)) => {
                o.extend_from_slice(&i16::try_from(*x).map_err(|_| ())?.to_le_bytes());
            }
            (Scalar::Ipv4, Value::UInt(x)) => {
                o.extend_from_slice(&u32::try_from(*x).map_err(|_| ())?.to_le_bytes());
            }
            (Scalar::Ipv6, Value::Raw16(b)) => o.extend_from_slice(b),
            _ => return Err(()),
        }
        Ok(())
    }

    /// Rows written.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The encoded bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

fn le_signed(o: &mut Vec<u8>, x: i128, width: usize) {
    let b = x.to_le_bytes();
    if width <= 16 {
        o.extend_from_slice(&b[..width]);
    } else {
        o.extend_from_slice(&b);
        o.extend(std::iter::repeat_n(
            if x < 0 { 0xff } else { 0 },
            width - 16,
        ));
    }
}

fn le_unsigned(o: &mut Vec<u8>, x: u128, width: usize) {
    let b = x.to_le_bytes();
    if width <= 16 {
        o.extend_from_slice(&b[..width]);
    } else {
        o.extend_from_slice(&b);
        o.extend(std::iter::repeat_n(0, width - 16));
    }
}
