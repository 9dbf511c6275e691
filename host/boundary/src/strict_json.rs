//! Strict JSON: the one reader of the JSON documents `dpone-trust` and the engines accept.
//!
//! `serde_json` on its own keeps the last of two duplicate keys, accepts any number and nests
//! 128 deep. [`parse`] reads one document and refuses it with a [`StrictJsonFault`] when it:
//!
//! - is larger than [`Limits::max_bytes`] (checked before parsing): [`StrictJsonFault::TooLarge`];
//! - is not one UTF-8 JSON value (syntax error, trailing data, bad escape, `serde_json`'s own
//!   nesting limit of 128): [`StrictJsonFault::Malformed`];
//! - nests objects and arrays deeper than [`Limits::max_depth`], when there is one (the top-level
//!   object or array is depth 1): [`StrictJsonFault::TooDeep`];
//! - names a key twice in one object, at any depth: [`StrictJsonFault::DuplicateKey`];
//! - holds a number that is not an integer in `0..=`[`MAX_SAFE_INTEGER`]
//!   (no fractions, exponents or negatives; the bound keeps every integer exact under RFC 8785):
//!   [`StrictJsonFault::NumberInvalid`].
//!
//! [`check_canonical`] then refuses bytes that differ by a single byte from the RFC 8785
//! encoding of their own value ([`canonical_bytes`]).
//!
//! A fault carries a structured [`JsonPath`] and, for a duplicate, the raw key: both may hold
//! attacker-chosen text, so each caller renders them by its own rule (quoted, or only keys its
//! schema defines) and maps the fault to its own codes.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::fmt::{self, Write as _};

/// The largest integer a document may hold: 2^53 - 1, exact in IEEE 754 doubles.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The bounds of one kind of document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest document in bytes.
    pub max_bytes: usize,
    /// The deepest nesting of objects and arrays (the top level is depth 1); `None` leaves only
    /// `serde_json`'s own limit of 128, which is reported as [`StrictJsonFault::Malformed`].
    pub max_depth: Option<usize>,
}

/// One step of a [`JsonPath`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The value of a key: its raw (untrusted) name and its position among the keys of its
    /// object, counting from 0.
    Key {
        /// The key as the document spells it.
        name: String,
        /// How many keys of the same object came before it.
        position: usize,
    },
    /// An element of an array, counting from 0.
    Index(usize),
}

/// Where a value is in a document, from the top level (`$`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JsonPath(Vec<Step>);

impl JsonPath {
    /// The steps from the top level; empty for the top level itself.
    pub fn steps(&self) -> &[Step] {
        &self.0
    }

    /// The path as `$.key[0].key`, each key written by `key(name, position)` (which decides
    /// whether and how untrusted text is shown).
    pub fn render(&self, mut key: impl FnMut(&str, usize) -> String) -> String {
        let mut out = String::from("$");
        for step in &self.0 {
            match step {
                Step::Key { name, position } => {
                    out.push('.');
                    out.push_str(&key(name, *position));
                }
                Step::Index(index) => {
                    let _ = write!(out, "[{index}]");
                }
            }
        }
        out
    }
}

/// Why a number was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NumberFault {
    /// An integer above [`MAX_SAFE_INTEGER`].
    AboveMax,
    /// A negative integer.
    Negative,
    /// A fraction or an exponent.
    NotInteger,
}

impl NumberFault {
    /// A fixed, short reason: `integer above 2^53-1`, `negative numbers are not allowed` or
    /// `only integers are allowed`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::AboveMax => "integer above 2^53-1",
            Self::Negative => "negative numbers are not allowed",
            Self::NotInteger => "only integers are allowed",
        }
    }
}

/// Why [`parse`] refused a document (the first rule broken, in reading order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrictJsonFault {
    /// The document is larger than [`Limits::max_bytes`].
    TooLarge {
        /// The size of the document in bytes.
        len: usize,
        /// The limit in bytes.
        max_bytes: usize,
    },
    /// The bytes are not one UTF-8 JSON value.
    Malformed {
        /// `serde_json`'s message (it ends with the line and column).
        message: String,
        /// The line of the error, from 1.
        line: usize,
        /// The column of the error, from 1.
        column: usize,
    },
    /// An object or array at `path` nests deeper than `max_depth`.
    TooDeep {
        /// The object or array that is one level too deep.
        path: JsonPath,
        /// The bound.
        max_depth: usize,
    },
    /// The object at `path` names `key` twice.
    DuplicateKey {
        /// The object.
        path: JsonPath,
        /// The repeated key, raw (untrusted).
        key: String,
    },
    /// The number at `path` is not an integer in `0..=2^53-1`.
    NumberInvalid {
        /// The number.
        path: JsonPath,
        /// What is wrong with it.
        fault: NumberFault,
    },
}

/// Parses `bytes` as one strict JSON document within `limits`.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<Value, StrictJsonFault> {
    if bytes.len() > limits.max_bytes {
        return Err(StrictJsonFault::TooLarge {
            len: bytes.len(),
            max_bytes: limits.max_bytes,
        });
    }
    let ctx = Ctx {
        max_depth: limits.max_depth,
        fault: RefCell::new(None),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let parsed = Seed {
        ctx: &ctx,
        parent: None,
        step: At::Root,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|value| de.end().map(|()| value));
    parsed.map_err(|err| {
        ctx.fault
            .into_inner()
            .unwrap_or_else(|| StrictJsonFault::Malformed {
                message: err.to_string(),
                line: err.line(),
                column: err.column(),
            })
    })
}

/// The RFC 8785 encoding of a value could not be produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError(String);

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EncodeError {}

/// The RFC 8785 canonical encoding of `value`.
///
/// A `serde_json::Value` holds no non-finite number, so this does not fail in practice; the
/// error is the canonicalizer's message.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>, EncodeError> {
    serde_json_canonicalizer::to_vec(value).map_err(|err| EncodeError(err.to_string()))
}

/// Why [`check_canonical`] refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CanonicalFault {
    /// The value has no RFC 8785 encoding.
    Unencodable(EncodeError),
    /// The bytes differ from the RFC 8785 encoding from this byte offset on (an offset equal to
    /// the shorter length means one is a prefix of the other).
    DiffersAt(usize),
}

/// Refuses `bytes` unless they are exactly the RFC 8785 encoding of `value`.
pub fn check_canonical(bytes: &[u8], value: &Value) -> Result<(), CanonicalFault> {
    let expected = canonical_bytes(value).map_err(CanonicalFault::Unencodable)?;
    if expected == bytes {
        return Ok(());
    }
    let at = expected
        .iter()
        .zip(bytes)
        .position(|(a, b)| a != b)
        .unwrap_or(expected.len().min(bytes.len()));
    Err(CanonicalFault::DiffersAt(at))
}

struct Ctx {
    max_depth: Option<usize>,
    fault: RefCell<Option<StrictJsonFault>>,
}

/// Where a [`Seed`] is, relative to its parent (borrowed: a path is built only on a fault).
#[derive(Clone, Copy)]
enum At<'k> {
    Root,
    Key(&'k str, usize),
    Index(usize),
}

struct Seed<'a> {
    ctx: &'a Ctx,
    parent: Option<&'a Seed<'a>>,
    step: At<'a>,
    depth: usize,
}

impl<'a> Seed<'a> {
    fn path(&self) -> JsonPath {
        let mut steps = Vec::with_capacity(self.depth);
        let mut at = Some(self);
        while let Some(seed) = at {
            match seed.step {
                At::Root => {}
                At::Key(name, position) => steps.push(Step::Key {
                    name: name.to_owned(),
                    position,
                }),
                At::Index(index) => steps.push(Step::Index(index)),
            }
            at = seed.parent;
        }
        steps.reverse();
        JsonPath(steps)
    }

    fn fail<E: de::Error>(&self, fault: impl FnOnce(JsonPath) -> StrictJsonFault) -> E {
        let mut slot = self.ctx.fault.borrow_mut();
        if slot.is_none() {
            *slot = Some(fault(self.path()));
        }
        E::custom("strict JSON rule violated")
    }

    fn child<'c>(&'c self, step: At<'c>) -> Seed<'c> {
        Seed {
            ctx: self.ctx,
            parent: Some(self),
            step,
            depth: self.depth + 1,
        }
    }

    fn enter<E: de::Error>(&self) -> Result<(), E> {
        match self.ctx.max_depth {
            Some(max_depth) if self.depth + 1 > max_depth => {
                Err(self.fail(|path| StrictJsonFault::TooDeep { path, max_depth }))
            }
            _ => Ok(()),
        }
    }

    fn number<E: de::Error>(&self, fault: NumberFault) -> E {
        self.fail(|path| StrictJsonFault::NumberInvalid { path, fault })
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        if v > MAX_SAFE_INTEGER {
            return Err(self.number(NumberFault::AboveMax));
        }
        Ok(Value::from(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        match u64::try_from(v) {
            Ok(v) => self.visit_u64(v),
            Err(_) => Err(self.number(NumberFault::Negative)),
        }
    }

    fn visit_f64<E: de::Error>(self, _v: f64) -> Result<Value, E> {
        Err(self.number(NumberFault::NotInteger))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut out = Vec::new();
        while let Some(item) = seq.next_element_seed(self.child(At::Index(out.len())))? {
            out.push(item);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(self.fail(|path| StrictJsonFault::DuplicateKey { path, key }));
            }
            let value = map.next_value_seed(self.child(At::Key(&key, out.len())))?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_bytes: 1024,
        max_depth: None,
    };

    fn fault(bytes: &[u8], limits: &Limits) -> Option<StrictJsonFault> {
        parse(bytes, limits).err()
    }

    fn quoted(path: &JsonPath) -> String {
        path.render(|name, _| format!("\"{name}\""))
    }

    #[test]
    fn a_valid_document_is_its_value() {
        let value = parse(br#"{"a":[1,{"b":"x"}],"c":true,"d":null}"#, &LIMITS);
        assert_eq!(
            value,
            Ok(serde_json::json!({"a": [1, {"b": "x"}], "c": true, "d": null}))
        );
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth_with_their_object_and_key() {
        let Some(StrictJsonFault::DuplicateKey { path, key }) = fault(br#"{"a":1,"a":2}"#, &LIMITS)
        else {
            panic!("a top-level duplicate is refused");
        };
        assert_eq!((quoted(&path), key.as_str()), ("$".to_owned(), "a"));

        let Some(StrictJsonFault::DuplicateKey { path, key }) =
            fault(br#"{"x":0,"a":[{"b":1,"c":2,"b":3}]}"#, &LIMITS)
        else {
            panic!("a nested duplicate is refused");
        };
        assert_eq!(key, "b");
        assert_eq!(quoted(&path), r#"$."a"[0]"#);
        assert_eq!(
            path.steps(),
            &[
                Step::Key {
                    name: "a".to_owned(),
                    position: 1
                },
                Step::Index(0)
            ]
        );
        assert_eq!(
            path.render(|_, position| format!("<key {position}>")),
            "$.<key 1>[0]"
        );

        assert_eq!(fault(br#"{"a":{"a":1}}"#, &LIMITS), None);
    }

    #[test]
    fn numbers_are_safe_non_negative_integers() {
        for (bytes, expected) in [
            (&br#"{"a":1.5}"#[..], NumberFault::NotInteger),
            (br#"{"a":1e3}"#, NumberFault::NotInteger),
            (br#"{"a":-1}"#, NumberFault::Negative),
            (br#"{"a":9007199254740992}"#, NumberFault::AboveMax),
            (br#"{"a":18446744073709551616}"#, NumberFault::NotInteger),
        ] {
            let Some(StrictJsonFault::NumberInvalid { path, fault }) = fault(bytes, &LIMITS) else {
                panic!("{} is refused", String::from_utf8_lossy(bytes));
            };
            assert_eq!((quoted(&path), fault), (r#"$."a""#.to_owned(), expected));
        }
        assert_eq!(fault(br#"{"a":9007199254740991,"b":0}"#, &LIMITS), None);
        assert_eq!(NumberFault::AboveMax.reason(), "integer above 2^53-1");
    }

    #[test]
    fn depth_is_bounded_when_asked() {
        let bounded = Limits {
            max_bytes: 1024,
            max_depth: Some(3),
        };
        assert_eq!(fault(b"[[[]]]", &bounded), None);
        assert_eq!(fault(br#"{"a":{"b":[1]}}"#, &bounded), None);
        let Some(StrictJsonFault::TooDeep { path, max_depth }) =
            fault(br#"{"a":{"b":[{}]}}"#, &bounded)
        else {
            panic!("depth 4 is refused");
        };
        assert_eq!(
            (quoted(&path), max_depth),
            (r#"$."a"."b"[0]"#.to_owned(), 3)
        );

        // Without a bound, only serde_json's own limit of 128 applies, as a syntax error.
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(fault(ok.as_bytes(), &LIMITS), None);
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(matches!(
            fault(deep.as_bytes(), &LIMITS),
            Some(StrictJsonFault::Malformed { .. })
        ));
    }

    #[test]
    fn size_is_checked_before_parsing() {
        let exact = Limits {
            max_bytes: 7,
            max_depth: None,
        };
        assert_eq!(fault(br#"{"a":1}"#, &exact), None);
        assert_eq!(
            fault(br#"{"a":1} "#, &exact),
            Some(StrictJsonFault::TooLarge {
                len: 8,
                max_bytes: 7
            })
        );
        // Too large wins over every other fault.
        assert!(matches!(
            fault(&[b'{'; 8], &exact),
            Some(StrictJsonFault::TooLarge { .. })
        ));
    }

    #[test]
    fn malformed_inputs_carry_serde_json_position() {
        for bytes in [&b"{"[..], b"{} {}", b"\xff", b"", b"{\"a\":1,}"] {
            assert!(
                matches!(
                    fault(bytes, &LIMITS),
                    Some(StrictJsonFault::Malformed { .. })
                ),
                "{}",
                String::from_utf8_lossy(bytes)
            );
        }
        let Some(StrictJsonFault::Malformed {
            message,
            line,
            column,
        }) = fault(b"{}\n {}", &LIMITS)
        else {
            panic!("trailing data is refused");
        };
        assert_eq!((line, column), (2, 2));
        assert!(message.contains("trailing characters"), "{message}");
    }

    #[test]
    fn canonical_form_is_byte_exact() {
        let check = |bytes: &[u8]| {
            let value = parse(bytes, &LIMITS).expect("strict JSON");
            check_canonical(bytes, &value)
        };
        assert_eq!(check(br#"{"a":1,"b":"x"}"#), Ok(()));
        assert_eq!(
            check(br#"{"b":"x","a":1}"#),
            Err(CanonicalFault::DiffersAt(2))
        );
        assert_eq!(check(br#"{"a": 1}"#), Err(CanonicalFault::DiffersAt(5)));
        assert_eq!(check(b"{\"a\":1}\n"), Err(CanonicalFault::DiffersAt(7)));
        assert_eq!(
            check(br#"{"a":"\u0041"}"#),
            Err(CanonicalFault::DiffersAt(6))
        );
        assert_eq!(
            canonical_bytes(&serde_json::json!({"b": [1, "\u{e9}"], "a": {}})),
            Ok("{\"a\":{},\"b\":[1,\"\u{e9}\"]}".as_bytes().to_vec())
        );
    }
}
