//! The canonical type profile: which ClickHouse column types the content digest supports.
//!
//! Supported: `Int8…Int256`, `UInt8…UInt256`, `Float32`, `Float64`, `Bool`, `String`,
//! `FixedString(N)`, `UUID`, `Date`, `Date32`, `DateTime[('tz')]`, `DateTime64(p[, 'tz'])`,
//! `Decimal(P, S)`, `Decimal32/64/128/256(S)`, `Enum8(…)`, `Enum16(…)`, `IPv4`, `IPv6`, each
//! optionally wrapped in `Nullable(…)`, `LowCardinality(…)` or `LowCardinality(Nullable(…))`.
//! Everything else (arrays, maps, tuples, JSON, variants, aggregate states, geo types) is
//! unsupported in this version and fails explicitly.

/// A scalar type inside the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// Signed integer of `bytes` width (1, 2, 4, 8, 16, 32).
    Int(u8),
    /// Unsigned integer of `bytes` width.
    UInt(u8),
    /// `Float32`.
    Float32,
    /// `Float64`.
    Float64,
    /// `Bool`.
    Bool,
    /// `String`.
    String,
    /// `FixedString(N)`.
    FixedString(u32),
    /// `UUID`.
    Uuid,
    /// `Date` (u16 days).
    Date,
    /// `Date32` (i32 days).
    Date32,
    /// `DateTime` (u32 seconds).
    DateTime,
    /// `DateTime64(p)` (i64 ticks of 10^-p seconds).
    DateTime64(u8),
    /// `Decimal` with storage width in bytes (4, 8, 16, 32) and scale.
    Decimal {
        /// Storage width in bytes.
        bytes: u8,
        /// Scale.
        scale: u8,
    },
    /// `Enum8`.
    Enum8,
    /// `Enum16`.
    Enum16,
    /// `IPv4`.
    Ipv4,
    /// `IPv6`.
    Ipv6,
}

/// A column type inside the profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ColumnType {
    /// Wrapped in `Nullable`.
    pub nullable: bool,
    /// The scalar.
    pub scalar: Scalar,
}

/// ClickHouse's limit on `FixedString(N)`.
const FIXED_STRING_MAX: u64 = 0xFF_FFFF;

/// Parses a type name exactly as `system.columns.type` reports it; `None` when outside the
/// profile.
pub fn parse_type(type_name: &str) -> Option<ColumnType> {
    let t = type_name.trim();
    if let Some(inner) = wrapped(t, "LowCardinality") {
        return parse_nullable_or_scalar(inner);
    }
    parse_nullable_or_scalar(t)
}

fn parse_nullable_or_scalar(t: &str) -> Option<ColumnType> {
    if let Some(inner) = wrapped(t, "Nullable") {
        return Some(ColumnType {
            nullable: true,
            scalar: parse_scalar(inner)?,
        });
    }
    Some(ColumnType {
        nullable: false,
        scalar: parse_scalar(t)?,
    })
}

/// `name(inner)` → `inner` (trimmed), only when the parentheses close at the very end.
fn wrapped<'a>(t: &'a str, name: &str) -> Option<&'a str> {
    let rest = t.strip_prefix(name)?.trim_start();
    let inner = rest.strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.trim())
}

fn number(s: &str, max: u64) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || s.len() > 8 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = s.parse().ok()?;
    (n <= max).then_some(n)
}

fn time_zone_ok(s: &str) -> bool {
    let s = s.trim();
    let Some(inner) = s.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')) else {
        return false;
    };
    (1..=64).contains(&inner.len())
        && inner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'+' | b'-'))
}

fn parse_scalar(t: &str) -> Option<Scalar> {
    let plain = match t {
        "Int8" => Some(Scalar::Int(1)),
        "Int16" => Some(Scalar::Int(2)),
        "Int32" => Some(Scalar::Int(4)),
        "Int64" => Some(Scalar::Int(8)),
        "Int128" => Some(Scalar::Int(16)),
        "Int256" => Some(Scalar::Int(32)),
        "UInt8" => Some(Scalar::UInt(1)),
        "UInt16" => Some(Scalar::UInt(2)),
        "UInt32" => Some(Scalar::UInt(4)),
        "UInt64" => Some(Scalar::UInt(8)),
        "UInt128" => Some(Scalar::UInt(16)),
        "UInt256" => Some(Scalar::UInt(32)),
        "Float32" => Some(Scalar::Float32),
        "Float64" => Some(Scalar::Float64),
        "Bool" => Some(Scalar::Bool),
        "String" => Some(Scalar::String),
        "UUID" => Some(Scalar::Uuid),
        "Date" => Some(Scalar::Date),
        "Date32" => Some(Scalar::Date32),
        "DateTime" => Some(Scalar::DateTime),
        "IPv4" => Some(Scalar::Ipv4),
        "IPv6" => Some(Scalar::Ipv6),
        _ => None,
    };
    if plain.is_some() {
        return plain;
    }
    if let Some(n) = wrapped(t, "FixedString") {
        let n = number(n, FIXED_STRING_MAX)?;
        return (n >= 1).then_some(Scalar::FixedString(n as u32));
    }
    if let Some(tz) = wrapped(t, "DateTime") {
        return time_zone_ok(tz).then_some(Scalar::DateTime);
    }
    if let Some(args) = wrapped(t, "DateTime64") {
        let (p, tz) = match args.split_once(',') {
            Some((p, tz)) => (p, Some(tz)),
            None => (args, None),
        };
        let p = number(p, 9)?;
        if let Some(tz) = tz
            && !time_zone_ok(tz)
        {
            return None;
        }
        return Some(Scalar::DateTime64(p as u8));
    }
    if let Some(args) = wrapped(t, "Decimal") {
        let (p, s) = args.split_once(',')?;
        let p = number(p, 76)?;
        let s = number(s, p)?;
        if p == 0 {
            return None;
        }
        let bytes = match p {
            1..=9 => 4,
            10..=18 => 8,
            19..=38 => 16,
            _ => 32,
        };
        return Some(Scalar::Decimal {
            bytes,
            scale: s as u8,
        });
    }
    for (name, bytes, max_scale) in [
        ("Decimal32", 4u8, 9u64),
        ("Decimal64", 8, 18),
        ("Decimal128", 16, 38),
        ("Decimal256", 32, 76),
    ] {
        if let Some(s) = wrapped(t, name) {
            let s = number(s, max_scale)?;
            return Some(Scalar::Decimal {
                bytes,
                scale: s as u8,
            });
        }
    }
    if let Some(body) = wrapped(t, "Enum8") {
        return enum_body_ok(body).then_some(Scalar::Enum8);
    }
    if let Some(body) = wrapped(t, "Enum16") {
        return enum_body_ok(body).then_some(Scalar::Enum16);
    }
    None
}

/// `'name' = value, …`: at least one element, quotes balanced (values are the wire values).
fn enum_body_ok(body: &str) -> bool {
    let b = body.as_bytes();
    if b.first() != Some(&b'\'') {
        return false;
    }
    let mut in_quote = false;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\\' if in_quote => i += 1,
            b'\'' => in_quote = !in_quote,
            b'(' | b')' if !in_quote => return false,
            _ => {}
        }
        i += 1;
    }
    !in_quote
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_types_parse() {
        // Unit: the supported profile.
        for t in [
            "Int8",
            "UInt256",
            "Nullable(String)",
            "LowCardinality(String)",
            "LowCardinality(Nullable(String))",
            "FixedString(16)",
            "DateTime('UTC')",
            "DateTime64(3)",
            "DateTime64(6, 'Europe/Berlin')",
            "Decimal(38, 10)",
            "Decimal64(4)",
            "Enum8('a' = 1, 'b' = 2)",
            "Enum16('x(' = -3)",
            "IPv6",
        ] {
            assert!(parse_type(t).is_some(), "{t}");
        }
    }

    #[test]
    fn nested_and_unknown_types_are_unsupported() {
        // Unit: deep/nested types fail explicitly.
        for t in [
            "Array(Int32)",
            "Map(String, String)",
            "Tuple(a Int8)",
            "JSON",
            "Nullable(Array(Int8))",
            "FixedString(0)",
            "Decimal(80, 2)",
            "DateTime64(10)",
            "Nested(a Int8)",
            "Variant(Int8, String)",
            "AggregateFunction(sum, UInt64)",
            "Enum8()",
            "",
        ] {
            assert!(parse_type(t).is_none(), "{t}");
        }
    }
}
