//! Strict JSON: the one reader for every JSON document this crate accepts.
//!
//! `serde_json` on its own keeps the last of two duplicate keys and accepts any spelling of a
//! value. Here a document is refused, each with its own [`DocumentFault`], when it:
//!
//! - exceeds the fixed size limit of its kind (checked before parsing);
//! - is not UTF-8 JSON, has trailing data, or nests deeper than `serde_json`'s limit (128);
//! - names a key twice in one object (detected while parsing, at any depth);
//! - holds a number that is not an integer in `0..=2^53-1` (our documents have no floats and
//!   no negative numbers; the bound keeps every integer exact under RFC 8785);
//! - for canonical documents: differs by a single byte from the RFC 8785 encoding of its own
//!   value (the value is re-canonicalized and the bytes compared);
//! - has a field its schema does not define, lacks one it requires, or has a value of the
//!   wrong type ([`Fields`]).
//!
//! The reading rules (all but the last) are those of the shared reader
//! [`dpone_boundary::strict_json`], asked for no depth bound; this module maps its faults to
//! [`DocumentFault`]s, quoting keys in paths and details with `error::shown`.

use crate::Result;
use crate::error::{Document, DocumentFault, TrustError, shown};
use dpone_boundary::strict_json::{self, CanonicalFault, Limits, StrictJsonFault};
use serde_json::{Map, Value};
use std::fmt;

/// The largest integer a document may hold: 2^53 - 1, exact in IEEE 754 doubles.
pub const MAX_SAFE_INTEGER: u64 = strict_json::MAX_SAFE_INTEGER;

/// Parses `bytes` as one strict JSON document of kind `doc`.
///
/// `limit` is the maximum size in bytes; with `canonical`, the bytes must also be exactly the
/// RFC 8785 encoding of the parsed value. The reader is [`dpone_boundary::strict_json`] without
/// a depth bound of its own; paths and duplicate keys are quoted with `error::shown`.
pub fn parse_strict(doc: Document, bytes: &[u8], limit: usize, canonical: bool) -> Result<Value> {
    let limits = Limits {
        max_bytes: limit,
        max_depth: None,
    };
    let value = strict_json::parse(bytes, &limits).map_err(|fault| refusal(doc, fault))?;
    if canonical {
        strict_json::check_canonical(bytes, &value).map_err(|fault| match fault {
            CanonicalFault::Unencodable(err) => {
                TrustError::doc(doc, DocumentFault::Malformed, err.to_string())
            }
            CanonicalFault::DiffersAt(at) => TrustError::doc(
                doc,
                DocumentFault::NonCanonical,
                format!("the bytes differ from the RFC 8785 encoding at offset {at}"),
            ),
        })?;
    }
    Ok(value)
}

/// The crate's fault and detail for a refusal of the strict reader.
fn refusal(doc: Document, fault: StrictJsonFault) -> TrustError {
    let path = |path: &strict_json::JsonPath| path.render(|name, _| shown(name));
    match fault {
        StrictJsonFault::TooLarge { len, max_bytes } => TrustError::doc(
            doc,
            DocumentFault::TooLarge,
            format!("{len} bytes, the limit is {max_bytes}"),
        ),
        StrictJsonFault::Malformed { message, .. } => {
            TrustError::doc(doc, DocumentFault::Malformed, message)
        }
        // No depth bound is asked for: serde_json's own limit reports as malformed.
        StrictJsonFault::TooDeep {
            path: at,
            max_depth,
        } => TrustError::doc(
            doc,
            DocumentFault::Malformed,
            format!("{}: nesting deeper than {max_depth}", path(&at)),
        ),
        StrictJsonFault::DuplicateKey { path: at, key } => TrustError::doc(
            doc,
            DocumentFault::DuplicateKey,
            format!("{}: key \"{}\" appears twice", path(&at), shown(&key)),
        ),
        StrictJsonFault::NumberInvalid { path: at, fault } => TrustError::doc(
            doc,
            DocumentFault::InvalidValue,
            format!("{}: {}", path(&at), fault.reason()),
        ),
    }
}

/// The RFC 8785 canonical encoding of `value`.
pub fn canonical_bytes(value: &Value) -> Result<Vec<u8>> {
    strict_json::canonical_bytes(value).map_err(|err| TrustError::Internal {
        detail: format!("canonical JSON encoding failed: {err}"),
    })
}

/// Typed access to the fields of one JSON object, refusing fields the schema does not name.
pub struct Fields<'a> {
    doc: Document,
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Checks that `value` (at `path`) is an object whose keys are all in `allowed`.
    pub fn new(doc: Document, path: &str, value: &'a Value, allowed: &[&str]) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(TrustError::doc(
                doc,
                DocumentFault::InvalidValue,
                format!("{path}: expected an object"),
            ));
        };
        if let Some(unknown) = map.keys().find(|key| !allowed.contains(&key.as_str())) {
            return Err(TrustError::doc(
                doc,
                DocumentFault::UnknownField,
                format!("{path}: unknown field \"{}\"", shown(unknown)),
            ));
        }
        Ok(Self {
            doc,
            path: path.to_owned(),
            map,
        })
    }

    /// The path of `key` inside this object, e.g. `$.policies[0].sha256`.
    pub fn path_of(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// An [`DocumentFault::InvalidValue`] error about `key`.
    pub fn invalid(&self, key: &str, reason: impl fmt::Display) -> TrustError {
        TrustError::doc(
            self.doc,
            DocumentFault::InvalidValue,
            format!("{}: {reason}", self.path_of(key)),
        )
    }

    /// The raw value of an optional field.
    pub fn optional(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key)
    }

    /// The raw value of a required field.
    pub fn required(&self, key: &str) -> Result<&'a Value> {
        self.map.get(key).ok_or_else(|| {
            TrustError::doc(
                self.doc,
                DocumentFault::MissingField,
                format!("{}: missing field \"{key}\"", self.path),
            )
        })
    }

    /// A required string field.
    pub fn str(&self, key: &str) -> Result<&'a str> {
        self.required(key)?
            .as_str()
            .ok_or_else(|| self.invalid(key, "expected a string"))
    }

    /// A required integer field (already bounded by [`MAX_SAFE_INTEGER`]).
    pub fn u64(&self, key: &str) -> Result<u64> {
        self.required(key)?
            .as_u64()
            .ok_or_else(|| self.invalid(key, "expected a non-negative integer"))
    }

    /// A required array field.
    pub fn array(&self, key: &str) -> Result<&'a [Value]> {
        self.required(key)?
            .as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| self.invalid(key, "expected an array"))
    }

    /// An optional array field; absent means empty.
    pub fn array_or_empty(&self, key: &str) -> Result<&'a [Value]> {
        match self.optional(key) {
            None => Ok(&[]),
            Some(value) => value
                .as_array()
                .map(Vec::as_slice)
                .ok_or_else(|| self.invalid(key, "expected an array")),
        }
    }

    /// A required object field, itself restricted to `allowed` keys.
    pub fn object(&self, key: &str, allowed: &[&str]) -> Result<Fields<'a>> {
        Fields::new(self.doc, &self.path_of(key), self.required(key)?, allowed)
    }

    /// The document kind.
    pub fn doc(&self) -> Document {
        self.doc
    }
}

/// Checks the `schema` field of a document against the one this version reads.
pub fn expect_schema(fields: &Fields<'_>, expected: &str) -> Result<()> {
    let found = fields.str("schema")?;
    if found != expected {
        return Err(TrustError::doc(
            fields.doc(),
            DocumentFault::SchemaUnsupported,
            format!(
                "found \"{}\", this version reads \"{expected}\"",
                shown(found)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault(bytes: &[u8], canonical: bool) -> Option<DocumentFault> {
        match parse_strict(Document::Manifest, bytes, 1024, canonical) {
            Ok(_) => None,
            Err(TrustError::Document { fault, .. }) => Some(fault),
            Err(other) => panic!("unexpected error {other}"),
        }
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert_eq!(
            fault(br#"{"a":1,"a":2}"#, false),
            Some(DocumentFault::DuplicateKey)
        );
        assert_eq!(
            fault(br#"{"a":[{"b":1,"c":2,"b":3}]}"#, false),
            Some(DocumentFault::DuplicateKey)
        );
        assert_eq!(fault(br#"{"a":{"a":1}}"#, false), None);
    }

    #[test]
    fn numbers_are_safe_non_negative_integers() {
        assert_eq!(
            fault(br#"{"a":1.5}"#, false),
            Some(DocumentFault::InvalidValue)
        );
        assert_eq!(
            fault(br#"{"a":1e3}"#, false),
            Some(DocumentFault::InvalidValue)
        );
        assert_eq!(
            fault(br#"{"a":-1}"#, false),
            Some(DocumentFault::InvalidValue)
        );
        assert_eq!(
            fault(br#"{"a":9007199254740992}"#, false),
            Some(DocumentFault::InvalidValue)
        );
        assert_eq!(fault(br#"{"a":9007199254740991}"#, true), None);
    }

    #[test]
    fn canonical_form_is_byte_exact() {
        assert_eq!(fault(br#"{"a":1,"b":"x"}"#, true), None);
        assert_eq!(
            fault(br#"{"b":"x","a":1}"#, true),
            Some(DocumentFault::NonCanonical)
        );
        assert_eq!(
            fault(br#"{"a": 1}"#, true),
            Some(DocumentFault::NonCanonical)
        );
        assert_eq!(
            fault(b"{\"a\":1}\n", true),
            Some(DocumentFault::NonCanonical)
        );
        assert_eq!(
            fault(br#"{"a":"\u0041"}"#, true),
            Some(DocumentFault::NonCanonical)
        );
        assert_eq!(fault(b"{\"a\":1}\n", false), None);
    }

    #[test]
    fn malformed_and_oversized_inputs() {
        assert_eq!(fault(b"{", false), Some(DocumentFault::Malformed));
        assert_eq!(fault(b"{} {}", false), Some(DocumentFault::Malformed));
        assert_eq!(fault(b"\xff", false), Some(DocumentFault::Malformed));
        assert_eq!(fault(&[b' '; 2000], false), Some(DocumentFault::TooLarge));
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            fault(deep.as_bytes(), false),
            Some(DocumentFault::Malformed)
        );
    }

    #[test]
    fn fields_refuse_unknown_and_missing() {
        let value = serde_json::json!({"a": "x", "b": 2});
        let err = Fields::new(Document::Manifest, "$", &value, &["a"]).err();
        assert!(matches!(
            err,
            Some(TrustError::Document {
                fault: DocumentFault::UnknownField,
                ..
            })
        ));
        let fields = Fields::new(Document::Manifest, "$", &value, &["a", "b", "c"]).ok();
        let fields = fields.as_ref();
        assert!(fields.is_some_and(|f| f.str("a").is_ok() && f.u64("b").ok() == Some(2)));
        assert!(fields.is_some_and(|f| matches!(
            f.str("c"),
            Err(TrustError::Document {
                fault: DocumentFault::MissingField,
                ..
            })
        )));
    }
}
