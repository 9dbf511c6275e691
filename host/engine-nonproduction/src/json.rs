//! Strict, bounded, canonical JSON: the one reader of every document of this crate.
//!
//! `serde_json` alone keeps the last of two duplicate keys, accepts any spelling of a value and
//! nests 128 deep. Here a document is refused, each with its own code, when it:
//!
//! - is larger than [`MAX_DOCUMENT_BYTES`] (checked before parsing): [`codes::TOO_LARGE`];
//! - is not one UTF-8 JSON value: [`codes::MALFORMED`];
//! - nests objects/arrays deeper than [`MAX_DEPTH`]: [`codes::TOO_DEEP`];
//! - names a key twice in one object, at any depth: [`codes::DUPLICATE_KEY`];
//! - holds a number that is not an integer in `0..=2^53-1`: [`codes::NUMBER_INVALID`] (the
//!   documents have no floats and no negative numbers; the bound keeps integers exact under
//!   RFC 8785);
//! - is not exactly the RFC 8785 encoding of its own value: [`codes::NON_CANONICAL`].
//!
//! [`Obj`] then reads one object whose key set must be *exactly* the schema's: an extra key is
//! [`codes::UNKNOWN_FIELD`], a missing one [`codes::MISSING_FIELD`]. No field is optional and
//! none has a default.
//!
//! The rules above are checked by the shared reader [`dpone_boundary::strict_json`] (not
//! `dpone-trust`, which engines may not depend on), asked for this crate's size limit and depth
//! bound; this module maps its faults to the crate's own codes, and paths in details show only
//! keys in [`SCHEMA_KEYS`] (a duplicate key is never shown).

use crate::codes;
use crate::error::{NpError, Result};
use dpone_boundary::strict_json::{self, CanonicalFault, JsonPath, Limits, StrictJsonFault};
use serde_json::{Map, Value};

/// The largest document any reader of this crate accepts: 256 KiB.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The deepest nesting of objects and arrays (the top-level object is depth 1).
pub const MAX_DEPTH: usize = 8;

/// The largest integer a document may hold: 2^53 - 1.
pub const MAX_SAFE_INTEGER: u64 = strict_json::MAX_SAFE_INTEGER;

const LIMITS: Limits = Limits {
    max_bytes: MAX_DOCUMENT_BYTES,
    max_depth: Some(MAX_DEPTH),
};

/// Parses `bytes` as one strict JSON value (size, syntax, depth, duplicate keys, numbers).
pub fn parse_strict(bytes: &[u8]) -> Result<Value> {
    strict_json::parse(bytes, &LIMITS).map_err(refusal)
}

/// The crate's code and detail for a refusal of the strict reader. Paths show only keys in
/// [`SCHEMA_KEYS`]; a duplicate key is never shown.
fn refusal(fault: StrictJsonFault) -> NpError {
    match fault {
        StrictJsonFault::TooLarge { len, max_bytes } => NpError::new(
            codes::TOO_LARGE,
            format!("{len} bytes, the limit is {max_bytes}"),
        ),
        StrictJsonFault::Malformed { line, column, .. } => NpError::new(
            codes::MALFORMED,
            format!("not one JSON value (line {line}, column {column})"),
        ),
        StrictJsonFault::TooDeep { path, max_depth } => NpError::new(
            codes::TOO_DEEP,
            format!("{}: nesting deeper than {max_depth}", shown(&path)),
        ),
        StrictJsonFault::DuplicateKey { path, .. } => NpError::new(
            codes::DUPLICATE_KEY,
            format!("{}: a key appears twice", shown(&path)),
        ),
        StrictJsonFault::NumberInvalid { path, fault } => NpError::new(
            codes::NUMBER_INVALID,
            format!("{}: {}", shown(&path), fault.reason()),
        ),
    }
}

/// A path as reports show it: a key in [`SCHEMA_KEYS`] by name, any other by its position.
fn shown(path: &JsonPath) -> String {
    path.render(|name, position| match known_key(name) {
        Some(known) => known.to_owned(),
        None => format!("<key {position}>"),
    })
}

/// Refuses `bytes` unless they are exactly the RFC 8785 encoding of `value`.
pub fn expect_canonical(value: &Value, bytes: &[u8]) -> Result<()> {
    let at = match strict_json::check_canonical(bytes, value) {
        Ok(()) => return Ok(()),
        Err(CanonicalFault::DiffersAt(at)) => at,
        // Impossible for a `Value` (see [`canonical_bytes`]): the empty encoding differs at 0.
        Err(CanonicalFault::Unencodable(_)) => 0,
    };
    Err(NpError::new(
        codes::NON_CANONICAL,
        format!("the bytes differ from the RFC 8785 encoding at offset {at}"),
    ))
}

/// The RFC 8785 encoding of `value`.
///
/// Values built by this crate hold only strings, objects, arrays and integers below 2^53, which
/// the canonicalizer always encodes; an (impossible) failure yields an empty vector, which no
/// reader accepts and no digest of a valid document equals.
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    strict_json::canonical_bytes(value).unwrap_or_default()
}

/// Reads the top-level `schema` and refuses any other than `expected`.
pub fn expect_schema(value: &Value, expected: &str) -> Result<()> {
    let found = value
        .as_object()
        .and_then(|m| m.get("schema"))
        .and_then(Value::as_str);
    match found {
        None => Err(NpError::new(
            codes::SCHEMA_MISSING,
            "$: expected an object with a string \"schema\"",
        )),
        Some(found) if found == expected => Ok(()),
        Some(_) => Err(NpError::new(
            codes::SCHEMA_UNSUPPORTED,
            format!("$.schema: this reader reads only \"{expected}\""),
        )),
    }
}

/// Every key any schema of this crate defines: the only keys echoed in paths (another key is
/// shown by its position, so no attacker-chosen text reaches a report). The fixtures test checks
/// that every key of every example is listed.
pub const SCHEMA_KEYS: &[&str] = &[
    "access",
    "activation_id",
    "attempts",
    "attestations",
    "authority",
    "campaign_id",
    "ceilings",
    "commit",
    "compilation_intent",
    "composition_id",
    "dbt",
    "deployment_digest",
    "digest",
    "effect",
    "effects",
    "engine",
    "enrollment",
    "enrollment_digest",
    "environment_id",
    "evidence",
    "execution_grant_digest",
    "fixture",
    "fixture_plan_digest",
    "generator",
    "grant_digest",
    "grant_id",
    "id",
    "image",
    "issuer",
    "limits",
    "manifest_digest",
    "max_attempt_seconds",
    "max_attempts",
    "max_source_bytes",
    "max_source_rows",
    "max_validity_seconds",
    "max_workloads",
    "membership",
    "mode",
    "name",
    "native_release_digest",
    "not_after",
    "not_before",
    "observations",
    "ordinary_release_digests",
    "origin",
    "outcome",
    "pack_digest",
    "parent_release_digest",
    "participant_id",
    "participants",
    "payload_bytes",
    "phase",
    "phase_subjects",
    "policy_digest",
    "policy_id",
    "predicate_type",
    "producer",
    "producer_run_id",
    "project",
    "purpose",
    "qualification_digest",
    "qualification_id",
    "qualification_plan_digest",
    "qualifications",
    "qualified_set_digest",
    "relation",
    "release_set_id",
    "repository",
    "revocation_epoch",
    "route",
    "routes",
    "run_id",
    "run_results_digest",
    "runner_environment",
    "runtime_context_sha256",
    "schema",
    "scope",
    "signer",
    "signer_digest",
    "signer_workflow",
    "size_bytes",
    "source",
    "source_bytes",
    "source_engine",
    "source_participant",
    "source_rows",
    "subjects",
    "target_engine",
    "target_participant",
    "toolchain",
    "toolchain_id",
    "trust",
    "trust_policy",
    "trust_tier",
    "trusted_root_digest",
    "validity",
    "wire",
    "workload_id",
    "workload_kind",
    "workloads",
];

fn known_key(key: &str) -> Option<&'static str> {
    SCHEMA_KEYS.iter().copied().find(|k| *k == key)
}

/// One object of a schema: its key set is exactly the schema's keys.
pub struct Obj<'a> {
    path: String,
    map: &'a Map<String, Value>,
}

impl<'a> Obj<'a> {
    /// Checks that `value` (at `path`) is an object whose keys are exactly `keys`.
    pub fn new(path: &str, value: &'a Value, keys: &[&str]) -> Result<Self> {
        let Value::Object(map) = value else {
            return Err(NpError::new(
                codes::TYPE_INVALID,
                format!("{path}: expected an object"),
            ));
        };
        if map.keys().any(|key| !keys.contains(&key.as_str())) {
            return Err(NpError::new(
                codes::UNKNOWN_FIELD,
                format!("{path}: a field the schema does not define"),
            ));
        }
        if let Some(missing) = keys.iter().find(|key| !map.contains_key(**key)) {
            return Err(NpError::new(
                codes::MISSING_FIELD,
                format!("{path}: missing field \"{missing}\""),
            ));
        }
        Ok(Self {
            path: path.to_owned(),
            map,
        })
    }

    /// The path of `key` inside this object.
    pub fn path_of(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// The raw value of `key` (present: [`Obj::new`] checked the key set).
    pub fn value(&self, key: &str) -> Result<&'a Value> {
        self.map.get(key).ok_or_else(|| {
            NpError::new(
                codes::MISSING_FIELD,
                format!("{}: missing field \"{key}\"", self.path),
            )
        })
    }

    /// A string field.
    pub fn str(&self, key: &str) -> Result<&'a str> {
        self.value(key)?.as_str().ok_or_else(|| {
            NpError::new(
                codes::TYPE_INVALID,
                format!("{}: expected a string", self.path_of(key)),
            )
        })
    }

    /// An integer field (already bounded to `0..=2^53-1` by the reader).
    pub fn u64(&self, key: &str) -> Result<u64> {
        self.value(key)?.as_u64().ok_or_else(|| {
            NpError::new(
                codes::TYPE_INVALID,
                format!("{}: expected a non-negative integer", self.path_of(key)),
            )
        })
    }

    /// A `u32` field; a larger integer is above every ceiling.
    pub fn u32(&self, key: &str) -> Result<u32> {
        u32::try_from(self.u64(key)?).map_err(|_| {
            NpError::new(
                codes::LIMIT_ABOVE_CEILING,
                format!("{}: above every ceiling", self.path_of(key)),
            )
        })
    }

    /// An array field of at least `min` and at most `max` entries.
    pub fn array(&self, key: &str, min: usize, max: usize) -> Result<&'a [Value]> {
        let items = self.value(key)?.as_array().ok_or_else(|| {
            NpError::new(
                codes::TYPE_INVALID,
                format!("{}: expected an array", self.path_of(key)),
            )
        })?;
        if items.len() < min {
            return Err(NpError::new(
                codes::LIST_EMPTY,
                format!("{}: at least {min} entries are required", self.path_of(key)),
            ));
        }
        if items.len() > max {
            return Err(NpError::new(
                codes::LIST_TOO_LONG,
                format!("{}: at most {max} entries are allowed", self.path_of(key)),
            ));
        }
        Ok(items)
    }

    /// A nested object field whose keys are exactly `keys`.
    pub fn obj(&self, key: &str, keys: &[&str]) -> Result<Obj<'a>> {
        Obj::new(&self.path_of(key), self.value(key)?, keys)
    }

    /// Raw keys of this object (for phase-specific checks).
    pub fn keys(&self) -> impl Iterator<Item = &'a str> {
        self.map.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(bytes: &[u8]) -> Option<&'static str> {
        parse_strict(bytes)
            .and_then(|v| expect_canonical(&v, bytes))
            .err()
            .map(|e| e.code())
    }

    #[test]
    fn strict_reader_refuses_each_rule_with_its_code() {
        assert_eq!(code(br#"{"a":1,"b":"x"}"#), None);
        assert_eq!(code(br#"{"a":1,"a":2}"#), Some(codes::DUPLICATE_KEY));
        assert_eq!(
            code(br#"{"a":[{"b":1,"b":1}]}"#),
            Some(codes::DUPLICATE_KEY)
        );
        assert_eq!(code(br#"{"a":1.5}"#), Some(codes::NUMBER_INVALID));
        assert_eq!(code(br#"{"a":-1}"#), Some(codes::NUMBER_INVALID));
        assert_eq!(
            code(br#"{"a":9007199254740992}"#),
            Some(codes::NUMBER_INVALID)
        );
        assert_eq!(code(br#"{"b":1,"a":1}"#), Some(codes::NON_CANONICAL));
        assert_eq!(code(b"{\"a\":1}\n"), Some(codes::NON_CANONICAL));
        assert_eq!(code(br#"{"a":"\u0041"}"#), Some(codes::NON_CANONICAL));
        assert_eq!(code(b"{"), Some(codes::MALFORMED));
        assert_eq!(code(b"{} {}"), Some(codes::MALFORMED));
        assert_eq!(code(b"\xff"), Some(codes::MALFORMED));
        let deep = format!("{}{}", "[".repeat(9), "]".repeat(9));
        assert_eq!(code(deep.as_bytes()), Some(codes::TOO_DEEP));
        let ok = format!("{}{}", "[".repeat(8), "]".repeat(8));
        assert_eq!(code(ok.as_bytes()), None);
        let big = vec![b' '; MAX_DOCUMENT_BYTES + 1];
        assert_eq!(code(&big), Some(codes::TOO_LARGE));
    }

    #[test]
    fn objects_have_exactly_their_keys() {
        let v = serde_json::json!({"a": "x", "b": 2});
        assert_eq!(
            Obj::new("$", &v, &["a"]).err().map(|e| e.code()),
            Some(codes::UNKNOWN_FIELD)
        );
        assert_eq!(
            Obj::new("$", &v, &["a", "b", "c"]).err().map(|e| e.code()),
            Some(codes::MISSING_FIELD)
        );
        let obj = Obj::new("$", &v, &["a", "b"]).expect("exact keys");
        assert_eq!(obj.str("a").ok(), Some("x"));
        assert_eq!(obj.u64("b").ok(), Some(2));
        assert_eq!(
            obj.str("b").err().map(|e| e.code()),
            Some(codes::TYPE_INVALID)
        );
    }

    #[test]
    fn unknown_keys_are_not_echoed() {
        let err = parse_strict(br#"{"evil\u202ekey":{"x":1,"x":2}}"#).err();
        let shown = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(shown.starts_with(codes::DUPLICATE_KEY), "{shown}");
        assert!(!shown.contains("evil"), "{shown}");
        let err = parse_strict(br#"{"hunter2":{"x":1,"x":2},"scope":1}"#).err();
        let shown = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(!shown.contains("hunter2"), "{shown}");
        let err = parse_strict(br#"{"scope":{"x":1,"x":2}}"#).err();
        let shown = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(shown.contains("$.scope"), "{shown}");
    }
}
