//! Which PostgreSQL types encode as which ClickHouse types, and the exact conversion of one
//! binary-COPY field into a [`Value`] for the `RowBinary` writer.
//!
//! | PostgreSQL (binary COPY) | ClickHouse (declared) | conversion |
//! |---|---|---|
//! | `boolean` | `Bool` | as is |
//! | `smallint`, `integer`, `bigint` | `Int8`…`Int256`, `UInt8`…`UInt256` | value must fit (no negative into `UInt*`) |
//! | `real` | `Float32`, `Float64` | exact (widening) |
//! | `double precision` | `Float64` | exact |
//! | `numeric` | `Decimal(P, S)` | unscaled at scale `S`; more fractional digits than `S`, more than `P` digits, NaN or ±Infinity are refused |
//! | `text`, `varchar`, `char(n)`, `name`, `bytea` | `String`, `FixedString(N)` | the bytes (UTF-8 for text types); at most `N` bytes for `FixedString` (zero-padded) |
//! | `uuid` | `UUID` | the 16 bytes |
//! | `date` | `Date`, `Date32` | days since 1970-01-01; must fit `UInt16` / `Int32`; ±infinity refused |
//! | `timestamp`, `timestamptz` | `DateTime`, `DateTime64(p)` | microseconds since the epoch (a `timestamp` is read as UTC) rescaled to seconds or 10^-p s; a sub-unit remainder is refused, never rounded; ±infinity refused |
//! | `inet` | `IPv4`, `IPv6` | host addresses only (`/32`, `/128`) of the matching family |
//!
//! Each type may be `Nullable(…)` (a NULL otherwise is refused) and `LowCardinality(…)`.
//! `Enum8`/`Enum16` have no PostgreSQL source here; domains over a supported base type are read
//! as their base type; every other PostgreSQL type (arrays, json, intervals, money, …) is refused.

use dpone_engine_clickhouse::canonical::{ColumnType, Scalar, Value};

/// A PostgreSQL type this source reads (by its binary wire format).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgType {
    /// `boolean`.
    Bool,
    /// `smallint`.
    Int2,
    /// `integer`.
    Int4,
    /// `bigint`.
    Int8,
    /// `real`.
    Float4,
    /// `double precision`.
    Float8,
    /// `numeric`.
    Numeric,
    /// `text`, `varchar`, `char(n)`, `name`.
    Text,
    /// `bytea`.
    Bytea,
    /// `uuid`.
    Uuid,
    /// `date`.
    Date,
    /// `timestamp` (read as UTC).
    Timestamp,
    /// `timestamptz`.
    Timestamptz,
    /// `inet`.
    Inet,
}

impl PgType {
    /// The type of a built-in type OID, if this source reads it.
    pub fn from_oid(oid: u32) -> Option<Self> {
        Some(match oid {
            16 => Self::Bool,
            21 => Self::Int2,
            23 => Self::Int4,
            20 => Self::Int8,
            700 => Self::Float4,
            701 => Self::Float8,
            1700 => Self::Numeric,
            25 | 1043 | 1042 | 19 => Self::Text,
            17 => Self::Bytea,
            2950 => Self::Uuid,
            1082 => Self::Date,
            1114 => Self::Timestamp,
            1184 => Self::Timestamptz,
            869 => Self::Inet,
            _ => return None,
        })
    }

    /// Whether a value of this type encodes as `scalar`.
    pub fn encodes_as(self, scalar: Scalar) -> bool {
        use PgType as P;
        use Scalar as S;
        match self {
            P::Bool => scalar == S::Bool,
            P::Int2 | P::Int4 | P::Int8 => matches!(scalar, S::Int(_) | S::UInt(_)),
            P::Float4 => matches!(scalar, S::Float32 | S::Float64),
            P::Float8 => scalar == S::Float64,
            P::Numeric => matches!(scalar, S::Decimal { .. }),
            P::Text | P::Bytea => matches!(scalar, S::String | S::FixedString(_)),
            P::Uuid => scalar == S::Uuid,
            P::Date => matches!(scalar, S::Date | S::Date32),
            P::Timestamp | P::Timestamptz => matches!(scalar, S::DateTime | S::DateTime64(_)),
            P::Inet => matches!(scalar, S::Ipv4 | S::Ipv6),
        }
    }
}

/// Whether some PostgreSQL type this source reads encodes as `scalar`.
pub fn producible(scalar: Scalar) -> bool {
    !matches!(scalar, Scalar::Enum8 | Scalar::Enum16)
}

/// The precision `P` of a declared `Decimal(P, S)` (the manifest uses the reported spelling).
pub fn decimal_precision(type_name: &str) -> Option<u32> {
    let start = type_name.find("Decimal(")? + "Decimal(".len();
    let digits: String = type_name[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A conversion failure for one field (the caller adds column and row).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldError {
    /// NULL in a non-Nullable column.
    Null,
    /// Does not fit.
    OutOfRange,
    /// Would lose precision.
    NotExact,
    /// The bytes do not have the type's binary layout.
    Malformed,
}

/// Days from 1970-01-01 to 2000-01-01 (PostgreSQL's epoch).
const PG_EPOCH_DAYS: i64 = 10_957;
/// Microseconds from 1970-01-01 to 2000-01-01.
const PG_EPOCH_MICROS: i64 = PG_EPOCH_DAYS * 86_400 * 1_000_000;

fn pow10(n: u32) -> Option<i128> {
    10i128.checked_pow(n)
}

fn be<const N: usize>(b: &[u8]) -> Result<[u8; N], FieldError> {
    b.try_into().map_err(|_| FieldError::Malformed)
}

/// One field (its raw binary-COPY bytes, `None` for NULL) as a [`Value`] of `target`.
/// `precision` is the declared `P` of a `Decimal`.
pub fn convert(
    pg: PgType,
    target: ColumnType,
    precision: Option<u32>,
    raw: Option<&[u8]>,
) -> Result<Value, FieldError> {
    let Some(b) = raw else {
        return if target.nullable {
            Ok(Value::Null)
        } else {
            Err(FieldError::Null)
        };
    };
    Ok(match pg {
        PgType::Bool => match be::<1>(b)?[0] {
            0 => Value::Bool(false),
            1 => Value::Bool(true),
            _ => return Err(FieldError::Malformed),
        },
        PgType::Int2 => int(i64::from(i16::from_be_bytes(be(b)?)), target.scalar)?,
        PgType::Int4 => int(i64::from(i32::from_be_bytes(be(b)?)), target.scalar)?,
        PgType::Int8 => int(i64::from_be_bytes(be(b)?), target.scalar)?,
        PgType::Float4 => Value::Float(f64::from(f32::from_be_bytes(be(b)?))),
        PgType::Float8 => Value::Float(f64::from_be_bytes(be(b)?)),
        PgType::Numeric => {
            let Scalar::Decimal { scale, .. } = target.scalar else {
                return Err(FieldError::OutOfRange);
            };
            let unscaled = numeric(b, u32::from(scale))?;
            if let Some(p) = precision.filter(|p| *p <= 38) {
                let bound = pow10(p).ok_or(FieldError::OutOfRange)?;
                if unscaled.unsigned_abs() >= bound.unsigned_abs() {
                    return Err(FieldError::OutOfRange);
                }
            }
            Value::Int(unscaled)
        }
        PgType::Text | PgType::Bytea => Value::Bytes(b.to_vec()),
        PgType::Uuid => Value::Raw16(be(b)?),
        PgType::Date => {
            let d = i32::from_be_bytes(be(b)?);
            if d == i32::MAX || d == i32::MIN {
                return Err(FieldError::OutOfRange);
            }
            Value::Int(i128::from(i64::from(d) + PG_EPOCH_DAYS))
        }
        PgType::Timestamp | PgType::Timestamptz => {
            let t = i64::from_be_bytes(be(b)?);
            if t == i64::MAX || t == i64::MIN {
                return Err(FieldError::OutOfRange);
            }
            let micros = i128::from(t) + i128::from(PG_EPOCH_MICROS);
            let digits: i64 = match target.scalar {
                Scalar::DateTime => 0,
                Scalar::DateTime64(p) => i64::from(p),
                _ => return Err(FieldError::OutOfRange),
            };
            let ticks = if digits <= 6 {
                let div = pow10((6 - digits) as u32).ok_or(FieldError::OutOfRange)?;
                if micros % div != 0 {
                    return Err(FieldError::NotExact);
                }
                micros / div
            } else {
                let mul = pow10((digits - 6) as u32).ok_or(FieldError::OutOfRange)?;
                micros.checked_mul(mul).ok_or(FieldError::OutOfRange)?
            };
            Value::Int(ticks)
        }
        PgType::Inet => inet(b, target.scalar)?,
    })
}

fn int(x: i64, scalar: Scalar) -> Result<Value, FieldError> {
    match scalar {
        Scalar::Int(_) => Ok(Value::Int(i128::from(x))),
        Scalar::UInt(_) => u128::try_from(x)
            .map(Value::UInt)
            .map_err(|_| FieldError::OutOfRange),
        _ => Err(FieldError::OutOfRange),
    }
}

/// PostgreSQL `numeric` binary (`ndigits, weight, sign, dscale, digits[ndigits]` in base
/// 10000) as an unscaled integer at `scale`.
fn numeric(b: &[u8], scale: u32) -> Result<i128, FieldError> {
    if b.len() < 8 {
        return Err(FieldError::Malformed);
    }
    let ndigits = u16::from_be_bytes([b[0], b[1]]) as usize;
    let weight = i64::from(i16::from_be_bytes([b[2], b[3]]));
    let sign = u16::from_be_bytes([b[4], b[5]]);
    if b.len() != 8 + 2 * ndigits {
        return Err(FieldError::Malformed);
    }
    let negative = match sign {
        0x0000 => false,
        0x4000 => true,
        // NaN, +Infinity, -Infinity
        0xC000 | 0xD000 | 0xF000 => return Err(FieldError::OutOfRange),
        _ => return Err(FieldError::Malformed),
    };
    // value = mantissa * 10^(4 * (weight - ndigits + 1)); unscaled = value * 10^scale.
    let mut mantissa: i128 = 0;
    for i in 0..ndigits {
        let d = u16::from_be_bytes([b[8 + 2 * i], b[9 + 2 * i]]);
        if d >= 10_000 {
            return Err(FieldError::Malformed);
        }
        mantissa = mantissa
            .checked_mul(10_000)
            .and_then(|m| m.checked_add(i128::from(d)))
            .ok_or(FieldError::OutOfRange)?;
    }
    let exponent = 4 * (weight - ndigits as i64 + 1) + i64::from(scale);
    let unscaled = if mantissa == 0 {
        0
    } else if exponent >= 0 {
        let factor = u32::try_from(exponent)
            .ok()
            .and_then(pow10)
            .ok_or(FieldError::OutOfRange)?;
        mantissa.checked_mul(factor).ok_or(FieldError::OutOfRange)?
    } else {
        let divisor = u32::try_from(-exponent)
            .ok()
            .and_then(pow10)
            .ok_or(FieldError::NotExact)?;
        if mantissa % divisor != 0 {
            return Err(FieldError::NotExact);
        }
        mantissa / divisor
    };
    Ok(if negative { -unscaled } else { unscaled })
}

/// PostgreSQL `inet` binary (`family, bits, is_cidr, nb, address[nb]`).
fn inet(b: &[u8], scalar: Scalar) -> Result<Value, FieldError> {
    if b.len() < 4 || b.len() != 4 + b[3] as usize {
        return Err(FieldError::Malformed);
    }
    let (family, bits, addr) = (b[0], b[1], &b[4..]);
    match (scalar, family, addr.len()) {
        // PGSQL_AF_INET = 2, PGSQL_AF_INET6 = 3
        (Scalar::Ipv4, 2, 4) => {
            if bits != 32 {
                return Err(FieldError::NotExact);
            }
            Ok(Value::UInt(u128::from(u32::from_be_bytes(be(addr)?))))
        }
        (Scalar::Ipv6, 3, 16) => {
            if bits != 128 {
                return Err(FieldError::NotExact);
            }
            Ok(Value::Raw16(be(addr)?))
        }
        _ => Err(FieldError::OutOfRange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ct(nullable: bool, scalar: Scalar) -> ColumnType {
        ColumnType { nullable, scalar }
    }

    /// `numeric` wire bytes from base-10000 digits.
    fn num(weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(digits.len() as u16).to_be_bytes());
        v.extend_from_slice(&weight.to_be_bytes());
        v.extend_from_slice(&sign.to_be_bytes());
        v.extend_from_slice(&dscale.to_be_bytes());
        for d in digits {
            v.extend_from_slice(&d.to_be_bytes());
        }
        v
    }

    #[test]
    fn numeric_converts_exactly_or_refuses() {
        let dec = |scale| ct(false, Scalar::Decimal { bytes: 8, scale });
        // 12345.678 = [1, 2345, 6780] weight 1
        let v = num(1, 0, 3, &[1, 2345, 6780]);
        assert_eq!(
            convert(PgType::Numeric, dec(4), Some(18), Some(&v)),
            Ok(Value::Int(123_456_780))
        );
        assert_eq!(
            convert(PgType::Numeric, dec(3), Some(18), Some(&v)),
            Ok(Value::Int(12_345_678))
        );
        assert_eq!(
            convert(PgType::Numeric, dec(2), Some(18), Some(&v)),
            Err(FieldError::NotExact)
        );
        // -0.0001 = [1] weight -1
        let v = num(-1, 0x4000, 4, &[1]);
        assert_eq!(
            convert(PgType::Numeric, dec(4), Some(18), Some(&v)),
            Ok(Value::Int(-1))
        );
        // 10^8 = [1, 0, 0] weight 2 → 1e8 * 10^4 = 1e12 fits P=18, not P=12
        let v = num(2, 0, 0, &[1]);
        assert_eq!(
            convert(PgType::Numeric, dec(4), Some(18), Some(&v)),
            Ok(Value::Int(1_000_000_000_000))
        );
        assert_eq!(
            convert(PgType::Numeric, dec(4), Some(12), Some(&v)),
            Err(FieldError::OutOfRange)
        );
        // zero, NaN, infinity
        assert_eq!(
            convert(PgType::Numeric, dec(2), Some(9), Some(&num(0, 0, 0, &[]))),
            Ok(Value::Int(0))
        );
        for sign in [0xC000, 0xD000, 0xF000] {
            assert_eq!(
                convert(
                    PgType::Numeric,
                    dec(2),
                    Some(9),
                    Some(&num(0, sign, 0, &[]))
                ),
                Err(FieldError::OutOfRange)
            );
        }
        assert_eq!(
            convert(PgType::Numeric, dec(2), Some(9), Some(&[0, 1])),
            Err(FieldError::Malformed)
        );
    }

    #[test]
    fn temporals_are_rescaled_without_rounding() {
        // 2000-01-01 00:00:01.5 UTC = 1_500_000 µs after the PostgreSQL epoch.
        let t = 1_500_000i64.to_be_bytes();
        let unix_ms = 946_684_801_500i128;
        assert_eq!(
            convert(
                PgType::Timestamptz,
                ct(false, Scalar::DateTime64(3)),
                None,
                Some(&t)
            ),
            Ok(Value::Int(unix_ms))
        );
        assert_eq!(
            convert(
                PgType::Timestamp,
                ct(false, Scalar::DateTime64(9)),
                None,
                Some(&t)
            ),
            Ok(Value::Int(unix_ms * 1_000_000))
        );
        assert_eq!(
            convert(
                PgType::Timestamp,
                ct(false, Scalar::DateTime),
                None,
                Some(&t)
            ),
            Err(FieldError::NotExact)
        );
        assert_eq!(
            convert(
                PgType::Timestamp,
                ct(false, Scalar::DateTime),
                None,
                Some(&i64::MAX.to_be_bytes())
            ),
            Err(FieldError::OutOfRange)
        );
        // 1999-12-31 = day -1 → 10956 days since 1970.
        assert_eq!(
            convert(
                PgType::Date,
                ct(false, Scalar::Date32),
                None,
                Some(&(-1i32).to_be_bytes())
            ),
            Ok(Value::Int(10_956))
        );
    }

    #[test]
    fn nulls_integers_and_addresses() {
        assert_eq!(
            convert(PgType::Int4, ct(true, Scalar::Int(4)), None, None),
            Ok(Value::Null)
        );
        assert_eq!(
            convert(PgType::Int4, ct(false, Scalar::Int(4)), None, None),
            Err(FieldError::Null)
        );
        assert_eq!(
            convert(
                PgType::Int2,
                ct(false, Scalar::UInt(1)),
                None,
                Some(&(-1i16).to_be_bytes())
            ),
            Err(FieldError::OutOfRange)
        );
        assert_eq!(
            convert(
                PgType::Int8,
                ct(false, Scalar::Int(16)),
                None,
                Some(&(-7i64).to_be_bytes())
            ),
            Ok(Value::Int(-7))
        );
        assert_eq!(
            convert(
                PgType::Inet,
                ct(false, Scalar::Ipv4),
                None,
                Some(&[2, 32, 0, 4, 10, 0, 0, 1])
            ),
            Ok(Value::UInt(0x0a00_0001))
        );
        assert_eq!(
            convert(
                PgType::Inet,
                ct(false, Scalar::Ipv4),
                None,
                Some(&[2, 24, 0, 4, 10, 0, 0, 0])
            ),
            Err(FieldError::NotExact)
        );
        assert_eq!(
            convert(
                PgType::Inet,
                ct(false, Scalar::Ipv6),
                None,
                Some(&[2, 32, 0, 4, 10, 0, 0, 1])
            ),
            Err(FieldError::OutOfRange)
        );
    }

    #[test]
    fn the_mapping_table() {
        assert!(PgType::Int2.encodes_as(Scalar::UInt(8)));
        assert!(PgType::Float4.encodes_as(Scalar::Float64));
        assert!(!PgType::Float8.encodes_as(Scalar::Float32));
        assert!(!PgType::Text.encodes_as(Scalar::Uuid));
        assert!(!PgType::Timestamptz.encodes_as(Scalar::Date));
        assert_eq!(PgType::from_oid(114), None); // json
        assert_eq!(PgType::from_oid(1007), None); // int4[]
        assert!(!producible(Scalar::Enum8));
        assert_eq!(decimal_precision("Nullable(Decimal(18, 4))"), Some(18));
        assert_eq!(decimal_precision("String"), None);
    }
}
